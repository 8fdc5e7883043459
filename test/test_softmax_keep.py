"""Reduces that keep their source (uop-optimize's uop.keep): a softmax computes exp(x - max) once per element, stores
it in a scratch row while the row sum adds it, and the output loop reads it back. Differential against float64 numpy
over row lengths, axes, infinities and rows past the scratch budget; the kernels are inspected for the choice."""
import numpy as np, pytest
from morok_mlir import Tensor
from morok_mlir.codegen.lower_cpu import lower_kernel
from morok_mlir.ir.emit import graph_func, normalize
from morok_mlir.ir.pipeline import lower_to_kernels
from morok_mlir.host import CACHES

def kernels(t: Tensor):
  key, _, _ = normalize([t.uop])
  return [f for f in lower_to_kernels(graph_func(key)) if f.name != "schedule"]

def ref_softmax(x, axis, log=False):
  x = x.astype(np.float64)
  m = x.max(axis, keepdims=True)
  e = np.exp(x - m)
  return (x - m) - np.log(e.sum(axis, keepdims=True)) if log else e / e.sum(axis, keepdims=True)

rng = np.random.default_rng(0)

@pytest.mark.parametrize("shape,axis", [((5, 1), 1), ((3, 2), 1), ((7, 33), 1), ((64, 1000), 1), ((4, 4097), -1), ((33, 17), 0),
                                        ((3, 5, 7), 1), ((2, 6, 9), 2), ((1, 129), 1), ((1000,), 0)])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_matches_numpy(shape, axis, log):
  x = rng.standard_normal(shape).astype(np.float32) * 4
  t = Tensor(x)
  out = (t.log_softmax(axis) if log else t.softmax(axis)).numpy()
  np.testing.assert_allclose(out, ref_softmax(x, axis, log), rtol=2e-5, atol=1e-6)

@pytest.mark.parametrize("shape,streamed", [((64, 1000), False), ((4096, 4096), True)])
def test_softmax_exp_once(shape, streamed):
  """The output loop reads exp(x - max) back, one exp2 polynomial per element: from the output row the sum filled,
  scaled in place by plain stores; or, where the output is big enough to stream past the cache (64 MiB), from a
  scratch row, the output going out in nontemporal vector stores."""
  (f,) = kernels(Tensor(np.zeros(shape, np.float32)).softmax(1))
  assert "uop.keep" in f.attrs and ("uop.nontemporal" in f.attrs) == streamed
  text = lower_kernel(f)
  assert text.count("math.roundeven") == 1 and text.count("memref.alloca") == streamed and text.count("nontemporal = true") == streamed

def test_half_softmax_keeps_a_scratch_row():
  """A float16 output cannot hold the float32 exps: they wait in a float32 scratch row on the stack."""
  x = rng.standard_normal((64, 300)).astype(np.float16)
  t = Tensor(x).softmax(1)
  (f,) = kernels(t)
  text = lower_kernel(f)
  assert "uop.keep" in f.attrs and text.count("math.roundeven") == 1 and "memref.alloca() {alignment = 64 : i64} : memref<300xf32>" in text
  np.testing.assert_allclose(t.numpy().astype(np.float64), ref_softmax(x, 1), rtol=2e-3, atol=1e-5)

def test_user_written_softmax_keeps():
  """x.exp() / x.exp().sum() written by hand gets the same rule (no softmax method involved)."""
  x = rng.standard_normal((16, 300)).astype(np.float32)
  t = Tensor(x)
  e = (t - t.max(1, keepdim=True)).exp()
  y = e / e.sum(1, keepdim=True)
  (f,) = kernels(y)
  assert "uop.keep" in f.attrs and lower_kernel(f).count("math.roundeven") == 1
  np.testing.assert_allclose(y.numpy(), ref_softmax(x, 1), rtol=2e-5, atol=1e-7)
  z = t.exp() / t.exp().sum(1, keepdim=True)    # no max: exp(x) recomputed otherwise, kept here
  assert "uop.keep" in kernels(z)[0].attrs
  np.testing.assert_allclose(z.numpy(), np.exp(x.astype(np.float64)) / np.exp(x.astype(np.float64)).sum(1, keepdims=True), rtol=2e-5)

def test_softmax_other_axis_and_noncontiguous():
  x = rng.standard_normal((40, 30)).astype(np.float32)
  np.testing.assert_allclose(Tensor(x).T.softmax(1).numpy(), ref_softmax(x.T, 1), rtol=2e-5, atol=1e-7)
  np.testing.assert_allclose(Tensor(x)[:, ::3].softmax(1).numpy(), ref_softmax(x[:, ::3], 1), rtol=2e-5, atol=1e-7)
  np.testing.assert_allclose(Tensor(x).softmax(0).numpy(), ref_softmax(x, 0), rtol=2e-5, atol=1e-7)

def test_softmax_infinities():
  """-inf entries give 0; a row of -inf only gives NaN (0/0, as numpy and PyTorch); +inf and NaN propagate as numpy."""
  x = rng.standard_normal((6, 9)).astype(np.float32)
  x[0, 3] = x[1, :4] = -np.inf
  x[2, :] = -np.inf
  x[3, 5] = np.inf
  x[4, 1] = np.nan
  with np.errstate(invalid="ignore"):
    for log in (False, True):
      t = Tensor(x)
      out = (t.log_softmax(1) if log else t.softmax(1)).numpy()
      np.testing.assert_allclose(out, ref_softmax(x, 1, log), rtol=2e-5, atol=1e-7)

def test_masked_attention_rows():
  """A fully masked attention row gives 0 (safe softmax), the others match a float64 reference."""
  q, k, v = (rng.standard_normal((2, 3, 5, 8)).astype(np.float32) for _ in range(3))
  mask = rng.random((5, 5)) > 0.4
  mask[2] = False
  out = Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), attn_mask=Tensor(mask)).numpy()
  s = np.where(mask, q.astype(np.float64) @ k.astype(np.float64).swapaxes(-1, -2) / np.sqrt(8), -np.inf)
  m = s.max(-1, keepdims=True)
  e = np.exp(s - np.where(np.isinf(m), 0, m))
  den = e.sum(-1, keepdims=True)
  np.testing.assert_allclose(out, (e / np.where(den == 0, 1, den)) @ v, rtol=1e-4, atol=1e-5)
  assert np.all(out[:, :, 2] == 0)

def test_big_rows_recompute():
  """A row past the scratch budget (a quarter of L2) is not kept: the exp is recomputed, and the result is the same."""
  n = CACHES[1] // 4 // 4 + 16
  x = rng.standard_normal((2, n)).astype(np.float32)
  t = Tensor(x).softmax(1)
  assert "uop.keep" not in kernels(t)[0].attrs
  np.testing.assert_allclose(t.numpy(), ref_softmax(x, 1), rtol=1e-4, atol=1e-9)
  y = rng.standard_normal((3, n // 2)).astype(np.float32)   # within the budget, beyond the reduce block (4096 terms)
  t = Tensor(y).softmax(1)
  assert "uop.keep" in kernels(t)[0].attrs
  np.testing.assert_allclose(t.numpy(), ref_softmax(y, 1), rtol=1e-4, atol=1e-9)

@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_narrow_softmax(dt):
  from morok_mlir.core.dtype import dtypes
  x = rng.standard_normal((8, 100)).astype(np.float32)
  out = Tensor(x).cast(getattr(dtypes, dt)).softmax(1).float().numpy()
  np.testing.assert_allclose(out, ref_softmax(x, 1), rtol=1e-2, atol=1e-3)

def test_softmax_gradient():
  x = rng.standard_normal((4, 50)).astype(np.float32)
  t = Tensor(x, requires_grad=True)
  w = rng.standard_normal((4, 50)).astype(np.float32)
  (t.softmax(1) * Tensor(w)).sum().backward()
  s = ref_softmax(x, 1)
  np.testing.assert_allclose(t.grad.numpy(), s * (w - (s * w).sum(1, keepdims=True)), rtol=1e-4, atol=1e-6)

@pytest.mark.parametrize("mask", [None, "bool", "causal"])
def test_attention_epilogue_sums_reassociate(mask):
  """Attention's row sums run in the contraction's epilogue, on each tile: they add up the exps pack_a stored in A's
  panels (no exp2 polynomial in the epilogue), with the kernel's fastmath (they vectorize), within float32 rounding of float64;
  masked keys (a fully masked query row gives 0) and causal masks go through the same panels."""
  from morok_mlir.codegen.contraction import Contraction
  q, k, v = (rng.standard_normal((2, 2, 64, 32)).astype(np.float32) for _ in range(3))
  m = np.tril(np.ones((64, 64), bool)) if mask == "causal" else rng.random((64, 64)) > 0.3 if mask else np.ones((64, 64), bool)
  if mask == "bool": m[5] = False
  kw = {"is_causal": True} if mask == "causal" else {"attn_mask": Tensor(m)} if mask else {}
  t = Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), **kw)
  (c,) = [Contraction(f, "k") for f in kernels(t) if "uop.contraction" in f.attrs and any(u.op == "exp2" for u in f.roots[0].toposort)]
  assert "uop.fastmath" in c.epi.attrs and c.epi_tile is not None and "uop.fastmath" in c.epi_tile.attrs   # on the tiles
  epi = c.text().split("func.func private @k_epi")[1]
  assert "math.roundeven" not in epi and "fastmath<reassoc,contract>" in epi and "math.roundeven" in c.text()
  s = np.where(m, q.astype(np.float64) @ k.astype(np.float64).swapaxes(-1, -2) / np.sqrt(32), -np.inf)
  mx = s.max(-1, keepdims=True)
  e = np.exp(s - np.where(np.isinf(mx), 0, mx))
  den = e.sum(-1, keepdims=True)
  np.testing.assert_allclose(t.numpy(), e / np.where(den == 0, 1, den) @ v, rtol=1e-4, atol=1e-5)

@pytest.mark.parametrize("rows", [1, 3])
def test_a_norm_before_a_matrix_vector_product_keeps_it_a_contraction(rows):
  """An RMSNorm's mean of squares, one value for the whole product (a decode step's single row), is stored by its own
  kernel, so the product's kernel only reads its rows and the weights. Several rows: the norm stays inline (one
  kernel), and that kernel is still a product of two operands (the norm's reduce inside one of them: computed where
  its rows are packed), with float32 and with quantized weights; against float64."""
  from morok_mlir import nn
  from morok_mlir.core.kernel_facts import contraction
  from morok_mlir.nn.quant import dequantize
  x, w = rng.standard_normal((rows, 576)).astype(np.float32), rng.standard_normal((1536, 576)).astype(np.float32)
  t = nn.RMSNorm(576)(Tensor(x)) @ Tensor(w).T
  ks = kernels(t)
  if rows == 1: assert len(ks) == 2, [(f.name, list(f.attrs)) for f in ks]   # the product's rows then read contiguously
  else:
    q = nn.RMSNorm(576)(Tensor(x)) @ dequantize(Tensor(np.zeros((1536 * 576 // 32, 20), np.uint8)), "Q4_1", (1536, 576)).T
    assert all(len(k) == 1 and contraction(k[0].roots[0]) is not None for k in (ks, kernels(q))), [list(f.attrs) for f in ks]
  x64 = x.astype(np.float64)
  np.testing.assert_allclose(t.numpy(), (x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-6)) @ w.T, rtol=1e-4, atol=1e-3)

@pytest.mark.parametrize("vec", [8, 16])
@pytest.mark.parametrize("n", [9, 17, 33, 64, 100, 131, 200])
@pytest.mark.parametrize("log", [False, True])
def test_short_rows_in_lanes_match_numpy(n, vec, log, monkeypatch):
  # short static rows run as vector lanes (whole steps, then groups, the last one masked): rows with a NaN, +inf, -inf
  # terms, all -inf, huge values, in the whole steps or the last group, against float64 numpy; enough rows to thread
  import morok_mlir.passes.optimize as opt
  from morok_mlir import realize as R
  monkeypatch.setattr(opt, "VEC_WIDTH", vec)
  monkeypatch.setattr(R, "_schedule_cache", {})
  x = rng.standard_normal((1024, n)).astype(np.float32) * 4
  x[1, n // 3], x[2, n - 1], x[3, :], x[4, ::3], x[5, n - 2:] = np.nan, np.inf, -np.inf, -np.inf, -np.inf
  x[6, :] += 1e30
  x[7, :] *= 1e4
  t = Tensor(x)
  with np.errstate(invalid="ignore", over="ignore"): want = ref_softmax(x, 1, log)
  np.testing.assert_allclose((t.log_softmax(1) if log else t.softmax(1)).numpy(), want, rtol=2e-5, atol=1e-6)
