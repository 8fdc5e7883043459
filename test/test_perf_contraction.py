from morok_mlir.core.dtype import dtypes
"""Contractions (uop-optimize's uop.contraction, lowered to packed operands + a register-tiled FMA micro-kernel) and
the split full reduction, against numpy, on shapes that do not divide the tiles."""
import numpy as np
import pytest
from morok_mlir.tensor import Tensor
from morok_mlir import realize as R
from morok_mlir.dialects.ops import Ops

R_ = np.random.default_rng(0)
def rnd(*s): return R_.standard_normal(s, dtype=np.float32)

def phases(t: Tensor) -> list[str]:
  """Entry points of the kernels that computed t (realizes it)."""
  t.realize()
  return [e for s in R._schedule_cache.values() for it in s.items for e, _ in (it.program.spec.phases or ())]

@pytest.mark.parametrize("m,k,n", [(97, 131, 83), (256, 784, 10), (7, 1000, 301), (130, 64, 257)])
def test_matmul_and_epilogue(m, k, n):
  a, b, bias = rnd(m, k), rnd(k, n), rnd(n)
  np.testing.assert_allclose((Tensor(a) @ Tensor(b)).numpy(), a @ b, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(((Tensor(a) @ Tensor(b)) + Tensor(bias)).relu().numpy(), np.maximum(a @ b + bias, 0), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose((Tensor(a.T.copy()).T @ Tensor(b)).numpy(), a @ b, rtol=1e-4, atol=1e-4)   # a transposed view

def test_contraction_is_chosen():
  a, b = rnd(128, 128), rnd(128, 128)
  assert any(p.endswith("_mm") for p in phases(Tensor(a) @ Tensor(b)))

def test_a_read_in_place_or_packed():
  """A row-major A is read where it is (no pack_a phase) unless its rows are a multiple of 1 KiB apart or it is a
  computed operand; results are the same either way (the last tile's rows past M repeat row M-1)."""
  R._schedule_cache.clear()
  for (m, k), packed in {(97, 131): False, (64, 256): True}.items():
    a, b = rnd(m, k), rnd(k, 160)
    t = Tensor(a) @ Tensor(b)
    assert any(p.endswith("_pack_a") for p in phases(t)) == packed, (m, k)
    np.testing.assert_allclose(t.numpy(), a @ b, rtol=1e-4, atol=1e-4)
    R._schedule_cache.clear()
  a, b = rnd(97, 131), rnd(131, 160)
  t = Tensor(a).relu() @ Tensor(b)   # relu(A) is computed while packing
  assert any(p.endswith("_pack_a") for p in phases(t))
  np.testing.assert_allclose(t.numpy(), np.maximum(a, 0) @ b, rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize("g,k,m,n", [(4, 34, 784, 34), (3, 7, 297, 253), (1, 40, 150, 130), (2, 130, 63, 39), (5, 3, 1000, 70)])
def test_column_major_a(g, k, m, n):
  """A read column by column (x^T @ w: each k's rows neighbours, as an NCHW image's pixels), batched or not, with rows,
  columns and k that do not divide the tiles, several B panels or one; against numpy."""
  x, w = rnd(g, k, m), rnd(g, k, n)
  np.testing.assert_allclose((Tensor(x).transpose(1, 2) @ Tensor(w)).numpy(), x.transpose(0, 2, 1) @ w, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose((Tensor(x[0]).T @ Tensor(w[0])).relu().numpy(), np.maximum(x[0].T @ w[0], 0), rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize("xs,ws,groups", [((1, 136, 28, 28), (136, 34, 1, 1), 4), ((1, 48, 37, 29), (64, 12, 1, 1), 4),
                                             ((1, 60, 19, 23), (99, 20, 1, 1), 3), ((3, 24, 37, 29), (40, 6, 1, 1), 4)])
def test_grouped_1x1_conv_by_group(xs, ws, groups):
  """A grouped 1x1 convolution whose output is laid out by group (as a channel shuffle reads it): the image of each
  group is the contraction's A, batched over the groups (several images: not one linear row index); against the direct sum."""
  x, w = rnd(*xs), rnd(*ws) * 0.1
  t = Tensor(x).conv2d(Tensor(w), groups=groups).relu()
  n, co, h, wd = t.shape
  np.testing.assert_allclose(t.reshape(n, groups, co // groups, h, wd).numpy(),
                             np.maximum(conv_ref(x, w, groups=groups), 0).reshape(n, groups, co // groups, h, wd), rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize("xs,ws,kw", [((1, 136, 28, 28), (136, 34, 1, 1), dict(groups=4)), ((1, 24, 56, 56), (112, 6, 1, 1), dict(groups=4)),
                                      ((2, 30, 19, 23), (99, 10, 1, 1), dict(groups=3)), ((1, 64, 29, 31), (96, 16, 3, 3), dict(groups=4, padding=1)),
                                      ((1, 48, 33, 35), (64, 12, 3, 3), dict(groups=4, stride=2, padding=1)),
                                      ((1, 32, 21, 21), (48, 8, 3, 3), dict(groups=4, dilation=2, padding=2))])
def test_grouped_conv(xs, ws, kw):
  """Grouped convolutions stored as NCHW (the output channel one range: its group and its channel in the group are
  split into two loops), 1x1 and 3x3, strided, padded, dilated, odd sizes, several images, with bias and relu."""
  x, w, b = rnd(*xs), rnd(*ws) * 0.1, rnd(ws[0])
  want = np.maximum(conv_ref(x, w, **kw) + b.reshape(1, -1, 1, 1), 0)
  np.testing.assert_allclose(Tensor(x).conv2d(Tensor(w), Tensor(b), **kw).relu().numpy(), want, rtol=1e-4, atol=1e-4)

def conv_ref(x, w, stride=1, padding=0, dilation=1, groups=1):
  (n, c, h, wd), (co, ci, kh, kw) = x.shape, w.shape
  xp = np.pad(x, ((0, 0), (0, 0), (padding, padding), (padding, padding))).astype(np.float64)
  oh, ow = (h + 2 * padding - dilation * (kh - 1) - 1) // stride + 1, (wd + 2 * padding - dilation * (kw - 1) - 1) // stride + 1
  out = np.zeros((n, co, oh, ow))
  g = co // groups
  for o in range(co):
    c0 = (o // g) * ci
    for i in range(kh):
      for j in range(kw):
        win = xp[:, c0:c0 + ci, i * dilation:i * dilation + stride * oh:stride, j * dilation:j * dilation + stride * ow:stride]
        out[:, o] += np.einsum("nchw,c->nhw", win, w[o, :, i, j])
  return out.astype(np.float32)

@pytest.mark.parametrize("xs,ws,kw", [((2, 16, 20, 18), (24, 16, 3, 3), dict(padding=1)), ((1, 8, 17, 17), (12, 4, 3, 3), dict(groups=2, stride=2)),
                                      ((2, 6, 15, 13), (5, 6, 2, 3), dict(dilation=2, padding=2)), ((3, 32, 12, 12), (40, 32, 1, 1), {})])
def test_conv2d(xs, ws, kw):
  x, w, b = rnd(*xs), rnd(*ws) * 0.1, rnd(ws[0])
  want = conv_ref(x, w, **{k: v for k, v in kw.items()}) + b.reshape(1, -1, 1, 1)
  np.testing.assert_allclose(Tensor(x).conv2d(Tensor(w), Tensor(b), **kw).numpy(), want, rtol=1e-4, atol=1e-4)

def pack_forms(t: Tensor) -> dict[str, str]:
  """'lanes' or 'scalar' per pack phase of the contraction that computed t (realizes it; clear the cache first)."""
  t.realize()
  sp = next(it.program.spec for s in R._schedule_cache.values() for it in s.items if it.program.spec.phases)
  parts = {p.split("(")[0]: p for p in sp.src.split("func.func @")[1:]}
  return {k[-1]: "lanes" if "vector.store" in v else "scalar" for k, v in parts.items() if "_pack_" in k}

# image sides packed as vector lanes: the innermost output width a multiple of the panel width or not (panels spanning
# rows: gated pieces), wider or narrower than a panel, strides (a load's lanes a step apart), dilation, padding (masked
# lanes), groups, one image (image as B: NR-wide panels in VW-lane groups) or several (image as A, packed per block)
CONV_LANES = [((8, 16, 12, 16), (32, 16, 3, 3), dict(padding=1)), ((3, 16, 15, 13), (24, 16, 3, 3), dict(padding=1)),
              ((4, 16, 19, 17), (16, 16, 3, 3), dict(stride=2, padding=1)), ((2, 6, 20, 21), (16, 6, 3, 3), dict(dilation=2, padding=2)),
              ((4, 32, 16, 16), (64, 8, 3, 3), dict(groups=4, padding=1)), ((1, 3, 40, 40), (16, 3, 7, 7), dict(stride=2, padding=3)),
              ((4, 32, 7, 7), (64, 32, 3, 3), dict(padding=1)), ((4, 32, 24, 24), (32, 32, 1, 1), dict(stride=2)),
              ((2, 8, 30, 30), (16, 8, 5, 5), dict(stride=3, padding=2)), ((1, 32, 20, 20), (64, 32, 3, 3), dict(padding=1)),
              ((1, 16, 23, 23), (64, 16, 3, 3), dict(stride=2)), ((1, 64, 7, 7), (128, 64, 3, 3), dict(padding=1)),
              ((2, 16, 64, 9), (32, 16, 3, 1), dict(padding=1, stride=2))]
@pytest.fixture
def direct(monkeypatch):
  """3x3 convolutions as plain contractions (no Winograd, no direct convolution): the tests of the image's packing."""
  from morok_mlir.passes import optimize
  monkeypatch.setattr(optimize, "WINOGRAD", False)
  monkeypatch.setattr(optimize, "DIRECT", False)

@pytest.mark.parametrize("xs,ws,kw", CONV_LANES)
def test_conv_image_packed_as_lanes(xs, ws, kw, direct):
  R._schedule_cache.clear()
  x, w, b = rnd(*xs), rnd(*ws) * 0.1, rnd(ws[0])
  t = Tensor(x).conv2d(Tensor(w), Tensor(b), **kw).relu()
  assert "lanes" in pack_forms(t).values()
  want = np.maximum(conv_ref(x, w, **kw) + b.reshape(1, -1, 1, 1), 0)
  np.testing.assert_allclose(t.numpy(), want, rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize("xs,ws,image", [((1, 64, 7, 7), (128, 64, 3, 3), "a"), ((1, 64, 14, 14), (128, 64, 1, 1), "a"),
                                          ((1, 16, 32, 32), (128, 16, 3, 3), "b"), ((2, 64, 7, 7), (128, 64, 3, 3), "a"),
                                          ((1, 16, 32, 32), (64, 16, 3, 3), "b"), ((1, 128, 28, 28), (32, 128, 3, 3), "b")])
def test_small_image_output_is_a(xs, ws, image, direct):
  """A convolution of one image packs its image as B (NR-wide panels) unless its output positions pad much worse so than
  to MR rows (7x7: 49 -> 64 vs 56; 32x32 divides both): then the image is A (packed per block, in L2, right before its
  tiles, or read in place: a small 1x1 convolution's) and the weights the B panels. Few output channels do not swap them."""
  R._schedule_cache.clear()
  x, w = rnd(*xs), rnd(*ws) * 0.1
  t = Tensor(x).conv2d(Tensor(w), padding=ws[-1] // 2)
  assert pack_forms(t).get(image, "in place") in ("lanes", "in place")
  np.testing.assert_allclose(t.numpy(), conv_ref(x, w, padding=ws[-1] // 2), rtol=1e-4, atol=1e-4)

def test_lanes_compute_a_fused_operand():
  """An operand computed while packing (relu of a padded image, a per-channel scale) runs as lane vectors too."""
  R._schedule_cache.clear()
  x, w, s = rnd(2, 16, 14, 14), rnd(32, 16, 3, 3) * 0.1, rnd(1, 16, 1, 1)
  t = (Tensor(x).relu() * Tensor(s)).conv2d(Tensor(w), padding=1)
  assert "lanes" in pack_forms(t).values()
  np.testing.assert_allclose(t.numpy(), conv_ref(np.maximum(x, 0) * s, w, padding=1), rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize("op", ["sum", "max", "min", "mean"])
def test_split_full_reduction(op):
  x = rnd(1 << 20)
  got, want = float(getattr(Tensor(x), op)().numpy()), float(getattr(x.astype(np.float64), op)())
  assert abs(got - want) <= 1e-5 * max(1.0, np.abs(x).sum() if op == "sum" else abs(want))

def test_depends_is_exact():
  """The contraction test's dependence question has exact answers: a gate that flips at one value of a range out of
  100 depends on it (random sampling would miss it), index math that only mentions a range does not."""
  from morok_mlir.core.uop import UOp, attrs
  from morok_mlir.core import index_math as im
  from morok_mlir.core.kernel_facts import depends
  i, j = (UOp(Ops.RANGE, dtypes.index, (im.const(100),), attrs(axis=a, kind="loop")) for a in (0, 1))
  f = lambda v: UOp(Ops.CONST, dtypes.float32, (), attrs(value=v))
  sel = lambda gate: UOp(Ops.WHERE, dtypes.float32, (gate, f(1.0), f(0.0)))
  lt = lambda a, b: UOp(Ops.CMPLT, dtypes.bool, (a, b))
  edge = sel(lt(j, im.const(1)))                                                    # affine gate, true only at j == 0
  assert depends(edge, j, [i, j]) and not depends(edge, i, [i, j])
  folded = sel(lt(UOp(Ops.IDIV, dtypes.index, (UOp(Ops.ADD, dtypes.index, (UOp(Ops.MUL, dtypes.index, (i, im.const(100))), j)), im.const(100))), im.const(3)))
  assert depends(folded, i, [i, j]) and not depends(folded, j, [i, j])             # (i*100+j)//100 is i
  prod_gate = sel(lt(UOp(Ops.MUL, dtypes.index, (i, j)), im.const(1)))                     # not affine: Z3 answers
  assert depends(prod_gate, j, [i, j]) and depends(prod_gate, i, [i, j])
  const_prod = sel(lt(UOp(Ops.MUL, dtypes.index, (UOp(Ops.MUL, dtypes.index, (i, j)), im.const(0))), im.const(1)))
  assert not depends(const_prod, j, [i, j])

def test_depends_remembers_z3_answers_within_a_bound(monkeypatch):
  """A Z3 question asked again (a model's layers: the same index math kernel after kernel) is answered from memory with
  the answer Z3 gives, and the memory keeps a bounded number of questions however many distinct ones come."""
  from morok_mlir.core.uop import UOp, attrs
  from morok_mlir.core import index_math as im, kernel_facts as kf
  from morok_mlir.lru import LRU
  monkeypatch.setattr(kf, "_DEPENDS", LRU(max_entries=3))
  asked = []
  monkeypatch.setattr(kf, "_z3_depends", lambda rest, r, z3=kf._z3_depends: asked.append(r) or z3(rest, r))
  i, j = (UOp(Ops.RANGE, dtypes.index, (im.const(100),), attrs(axis=a, kind="loop")) for a in (0, 1))
  gate = lambda c, m: UOp(Ops.WHERE, dtypes.float32, (UOp(Ops.CMPLT, dtypes.bool, (UOp(Ops.MUL, dtypes.index, (UOp(Ops.MUL, dtypes.index, (i, j)), im.const(m))), im.const(c))),
                                                      *(UOp(Ops.CONST, dtypes.float32, (), attrs(value=v)) for v in (1.0, 0.0))))
  want = {(c, m): kf._z3_depends([gate(c, m).src[0]], j) for c in (1, 5) for m in (0, 1)}
  assert want == {(1, 0): False, (5, 0): False, (1, 1): True, (5, 1): True}
  asked.clear()
  for _ in range(2):
    for (c, m), w in want.items(): assert kf.depends(gate(c, m), j, [i, j]) is w
  assert len(asked) == 8   # 4 questions in turn through 3 places: each was dropped before it came again
  assert len(kf._DEPENDS) == 3
  asked.clear()
  assert kf.depends(gate(5, 1), j, [i, j]) and not asked   # held: no question to Z3

def _mm_program(t: Tensor):
  t.realize()
  return next(it.program for s in R._schedule_cache.values() for it in s.items if it.program.spec.reuse)

def test_packed_b_kept_per_input():
  """pack_b runs once per input buffer: x @ W with the same W reuses its panels (new x each call), a different W packs
  anew, the panels die with W, and a direct call of the program (no inputs) packs into its own scratch."""
  import gc
  R._schedule_cache.clear()
  w1, w2 = rnd(200, 96), rnd(200, 96)
  W1, W2 = Tensor(w1), Tensor(w2)
  for _ in range(3):
    x = rnd(64, 200)
    np.testing.assert_allclose((Tensor(x) @ W1).numpy(), x @ w1, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose((Tensor(x) @ W2).numpy(), x @ w2, rtol=1e-4, atol=1e-4)
  p = _mm_program(Tensor(x) @ W1)
  assert {W1.uop, W2.uop} <= set(p._kept)
  out = np.zeros(64 * 96, np.float32)
  p(out, x.reshape(-1).copy(), w2.reshape(-1).copy())   # no inputs given: packs W2's copy into scratch
  np.testing.assert_allclose(out.reshape(64, 96), x @ w2, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose((Tensor(x) @ W1).numpy(), x @ w1, rtol=1e-4, atol=1e-4)   # kept panels untouched
  n = len(p._kept)
  del W2; gc.collect()
  assert len(p._kept) == n - 1
  for _ in range(5): Tensor(x) @ Tensor(rnd(200, 96))   # graphs only: nothing realized, nothing kept
  assert len(p._kept) == n - 1
  p.KEEP_BYTES = 3 * sum(a.nbytes for a in p._kept[W1.uop].values())   # room for three inputs' panels
  try:
    ws = [rnd(200, 96) for _ in range(5)]
    Ws = [Tensor(w) for w in ws]
    for w, W in zip(ws, Ws):
      np.testing.assert_allclose((Tensor(x) @ W).numpy(), x @ w, rtol=1e-4, atol=1e-4)
      np.testing.assert_allclose((Tensor(x) @ W1).numpy(), x @ w1, rtol=1e-4, atol=1e-4)   # used in between: kept
    assert list(p._kept) == [Ws[-2].uop, Ws[-1].uop, W1.uop]   # bounded by bytes, the least recently used dropped
  finally: del p.KEEP_BYTES

def test_inputs_are_read_only():
  t = Tensor(rnd(4, 4))
  with pytest.raises(ValueError): t.uop.buffer.numpy()[0] = 1.0
  r = (t + 1).realize()
  assert not r.uop.buffer.numpy().flags.writeable

@pytest.mark.parametrize("m,k,n", [(1027, 70, 48), (4000, 300, 24)])
def test_a_packed_per_block(m, k, n):
  """Tall computed A (more row blocks than B panels) over more than L2 or a B of three vectors or more: each thread packs
  its MC-row block of A inside mm, into its own buffer, right before using it (no pack_a phase; mm takes its chunk
  index). Also run as one whole-module JIT, where the schedule calls mm as chunk 0."""
  from morok_mlir.device.cpu import compile_module
  from morok_mlir.ir.emit import normalize, graph_func
  from morok_mlir.ir.pipeline import lower_to_kernels
  R._schedule_cache.clear()
  a, b = rnd(m, k), rnd(k, n)
  t = Tensor(a).relu() @ Tensor(b)
  ph = phases(t)
  prog = next(it.program for s in R._schedule_cache.values() for it in s.items if it.program.spec.phases)
  mm = dict(prog.spec.phases)["kernel_mm"]
  assert not any(p.endswith("_pack_a") for p in ph) and (mm is None or mm[3:] == (1,))   # threaded: takes its chunk index
  want = np.maximum(a, 0) @ b
  np.testing.assert_allclose(t.numpy(), want, rtol=1e-4, atol=1e-4)
  t2 = Tensor(a).relu() @ Tensor(b)
  funcs = lower_to_kernels(graph_func(normalize([t2.lazydata])[0]))
  out = np.zeros(m * n, np.float32)
  compile_module(funcs)(a.reshape(-1).copy(), b.reshape(-1).copy(), out)   # inputs by first use, then the output
  np.testing.assert_allclose(out.reshape(m, n), want, rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize("m,k,n", [(1027, 70, 16), (256, 512, 10), (64, 2048, 5)])
def test_small_computed_a_packed_row_major(m, k, n):
  """A computed A within L2 (an MLP's relu(h)) times a B of one or two vectors: pack_a writes A row-major, k in vector
  lanes, and the tiles read its rows there (Contraction.rows_a), instead of MR-row panels packed element by element."""
  from morok_mlir.codegen.contraction import Contraction
  R._schedule_cache.clear()
  a, b = rnd(m, k), rnd(k, n)
  t = Tensor(a).relu() @ Tensor(b)
  assert any(p.endswith("_pack_a") for p in phases(t))
  prog = next(it.program for s in R._schedule_cache.values() for it in s.items if it.program.spec.phases)
  assert prog.spec.scratch[0] >= m * k   # all of A, a row after another (not one MC-row block a thread)
  np.testing.assert_allclose(t.numpy(), np.maximum(a, 0) @ b, rtol=1e-4, atol=1e-4)
  assert m * k <= Contraction.ROWS_MAX

@pytest.mark.parametrize("rows,cols", [(256, 512), (1000, 48), (200, 300), (64, 2048)])
@pytest.mark.parametrize("op", ["sum", "max", "min"])
def test_column_reduce_reads_rows_in_place(rows, cols, op):
  """A column reduce (a bias gradient: dh.sum(0)) of a computed matrix runs as a contraction with ones whose B, the
  rows reduced, is read where it is (no pack_b phase: a copy of the data read once), rows 1 KiB apart included."""
  h, b = rnd(rows, cols), rnd(cols)
  R._schedule_cache.clear()
  x = Tensor(h).contiguous() * 2   # computed by one kernel, reduced by the next
  x.realize()
  t = Tensor(b) - 0.5 * getattr(x, op)(0)
  ph = phases(t)
  assert any(p.endswith("_mm") for p in ph) and not any(p.endswith("_pack_b") for p in ph), ph
  np.testing.assert_allclose(t.numpy(), b - 0.5 * getattr(h * 2, op)(0), rtol=1e-5, atol=1e-4)

@pytest.mark.parametrize("sa,sb", [((6, 50, 70), (6, 70, 90)), ((4, 1, 37, 70), (3, 70, 41)), ((2, 3, 128, 64), (2, 3, 64, 128))])
def test_batched_matmul_is_a_contraction(sa, sb):
  """Ranges both operands depend on are a batch: one packed problem per batch element, threads over the batch."""
  R._schedule_cache.clear()
  a, b = rnd(*sa), rnd(*sb)
  t = Tensor(a) @ Tensor(b)
  assert any(p.endswith("_mm") for p in phases(t))
  np.testing.assert_allclose(t.numpy(), a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose((Tensor(a).transpose(-1, -2).contiguous().transpose(-1, -2) @ Tensor(b) * 2).numpy(), 2 * (a.astype(np.float64) @ b),
                             rtol=1e-4, atol=2e-4)

@pytest.mark.parametrize("shape", [(2, 3, 128, 64), (3, 33, 20), (1, 2, 7, 5)])
def test_attention_products_with_row_sums_in_the_epilogue(shape):
  """softmax(q k^T) v: its last kernel holds the product with v and the row sums of the exponentials, another reduce,
  which stays in the epilogue (computed once per row); at most three kernels (the scores, the row max unless it stays
  inline too, the product), float64 reference."""
  R._schedule_cache.clear()
  q, k, v = rnd(*shape), rnd(*shape), rnd(*shape)
  t = Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v))
  ph = phases(t)
  assert len([it for s in R._schedule_cache.values() for it in s.items]) <= 3
  if shape[-2] >= 64: assert sum(p.endswith("_mm") for p in ph) == 2
  s = q.astype(np.float64) @ k.swapaxes(-1, -2) / np.sqrt(shape[-1])
  e = np.exp(s - s.max(-1, keepdims=True))
  np.testing.assert_allclose(t.numpy(), (e / e.sum(-1, keepdims=True)) @ v, rtol=1e-4, atol=1e-5)

def test_symbolic_panels_kept_per_input_and_values(monkeypatch):
  """A contraction over a symbolic size keeps the panels of a constant input for the values they were packed at (their
  loops run to them): a TinyJit replay or a realize at those values skips the pack, at other values packs anew (a pack
  kept for a smaller value would leave the rows past it stale), against numpy at every value, in any order."""
  from morok_mlir import Variable
  from morok_mlir.jit import TinyJit
  monkeypatch.setattr(R, "_schedule_cache", {})
  a, b = rnd(256, 64), rnd(256, 64)
  A, B = Tensor(a), Tensor(b)
  f = lambda n: (A[:n] @ B[:n].T).realize()
  V, jit = Variable("n", 1, 256), TinyJit(f)
  for n in (200, 200, 230, 200, 256, 150, 256):
    np.testing.assert_allclose(jit(V.bind(n)).numpy(), a[:n] @ b[:n].T, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(f(V.bind(n)).numpy(), a[:n] @ b[:n].T, rtol=1e-4, atol=1e-4)
  progs = [p for s in R._schedule_cache.values() for it in s.items for p in getattr(it.program, "progs", [it.program])]
  keyed = [p for p in progs if any(keys for *_, keys in p.spec.reuse)]
  assert keyed and any(B.uop in p._kept for p in keyed), [p.spec.reuse for p in progs]
  assert all(len(d) <= len(p.spec.reuse) for p in keyed for d in p._kept.values())   # one result per input and scratch

def test_replays_with_kept_panels_run_prepared(monkeypatch):
  """A TinyJit replay of a contraction whose panels of a constant input are kept runs its prepared argument set (the
  kept result taken once, its pack skipped), not the per-call path through call_buffers; at the symbolic sizes' values
  of the first call and at others."""
  import morok_mlir.device.cpu as C
  from morok_mlir import Variable
  from morok_mlir.jit import TinyJit
  monkeypatch.setattr(R, "_schedule_cache", {})
  a, w = rnd(256, 64), rnd(64, 96)
  A, W = Tensor(a), Tensor(w)
  V = Variable("n", 1, 256)
  static, sym = TinyJit(lambda: (A @ W).realize()), TinyJit(lambda n: (A[:n] @ W).realize())
  for _ in range(3): static(); sym(V.bind(200))
  calls, call_buffers = [], C.CPUProgram.call_buffers
  monkeypatch.setattr(C.CPUProgram, "call_buffers", lambda self, *args: calls.append(self.name) or call_buffers(self, *args))
  for n in (200, 230, 200):
    np.testing.assert_allclose(static().numpy(), a @ w, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(sym(V.bind(n)).numpy(), a[:n] @ w, rtol=1e-4, atol=1e-4)
  assert not calls, calls

@pytest.mark.parametrize("ci,products", [(28, True), (20, True), (6, False)])
def test_grouped_conv_short_rows(ci, products):
  """A grouped 1x1 convolution (4 groups, odd image) whose rows sum ci terms: the groups' products with rows and
  columns (each group's channels times its image) from 16 terms on, plain lane loops over single rows below (a few
  terms: packing would copy each element for a few uses); equal to the reference either way."""
  import re
  x, w = rnd(1, 4 * ci, 29, 31), rnd(4 * ci, ci, 1, 1) * 0.1
  t = Tensor(x).conv2d(Tensor(w), groups=4)
  kernels = re.findall(r"func.func private @(\S+)\(.*?attributes \{([^}]*)\}", t.mlir("uop-optimize"))
  assert len(kernels) == 1 and ("uop.contraction" in kernels[0][1]) == products, kernels
  np.testing.assert_allclose(t.numpy(), conv_ref(x, w, groups=4), rtol=1e-4, atol=1e-4)
