"""Contraction tiles (kernel_facts.contraction_tiles) and the skinny shapes they serve: odd, small and one-sided sizes
through the packed micro-kernel, against numpy."""
import itertools, re
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
import morok_mlir.core.kernel_facts as facts
import morok_mlir.passes.optimize as opt
from morok_mlir.tensor import Tensor
from morok_mlir.core.dtype import dtypes
from morok_mlir import realize as R

R_ = np.random.default_rng(0)
def rnd(*s): return R_.standard_normal(s, dtype=np.float32)
CACHES = (32 << 10, 1 << 20, 32 << 20)

@pytest.fixture(autouse=True)
def data():
  """Each test draws the same data whatever ran before it."""
  global R_
  R_ = np.random.default_rng(0)

def mm_phases(t: Tensor) -> bool:
  """Whether the kernels that computed t (realizes it) include a contraction's micro-kernel."""
  R._schedule_cache.clear()
  t.realize()
  return any(e.endswith("_mm") for s in R._schedule_cache.values() for it in s.items for e, _ in (it.program.spec.phases or ()))

@settings(max_examples=300, deadline=None)
@given(st.integers(1, 5000), st.integers(1, 5000), st.integers(1, 5000), st.sampled_from([4, 8, 16]), st.integers(1, 4),
       st.sampled_from([(32 << 10, 256 << 10, 4 << 20), CACHES, (48 << 10, 2 << 20, 64 << 20)]))
def test_tiles_fit(M, N, K, vec, threads, caches):
  mr, nr, kc, mc = facts.contraction_tiles(M, N, K, vec, caches, threads)
  regs = 32 if vec >= 16 else 16
  assert nr % vec == 0 and mr * (nr // vec) + nr // vec + 1 <= regs      # accumulators, B vectors, a broadcast
  assert 1 <= mr <= max(1, min(M, facts.MAX_MR)) and nr <= vec * max(1, -(-N // vec))   # no tile wider than its padded operand
  assert 1 <= kc <= K and mc % mr == 0 and mc >= mr
  assert mc == mr or 4 * mc * kc <= caches[1]                                 # A's block in L2
  assert mc <= -(-M // mr) * mr and (kc == 1 or 4 * kc * nr <= caches[1] // 8)  # no block past M; B's panel in an eighth of L2

@pytest.mark.parametrize("vec,tile", [(8, (6, 16)), (16, (8, 32))])
def test_large_square_tiles(vec, tile):
  assert facts.contraction_tiles(2048, 2048, 2048, vec, CACHES, 2)[:2] == tile

@pytest.mark.parametrize("vec", [8, 16])
def test_skinny_tiles(vec):
  assert facts.contraction_tiles(256, 10, 512, vec, CACHES, 2)[1] == vec * -(-10 // vec)   # N = 10: NR is 10 padded to lanes
  assert facts.contraction_tiles(1, 4096, 4096, vec, CACHES, 2)[0] == 1                   # M = 1: one row, wide panels
  mr, nr, kc, mc = facts.contraction_tiles(256, 10, 512, vec, CACHES, 2)
  assert -(-256 // mc) >= 2                                                           # one B panel: threads split A's rows

SIZES = (1, 3, 7, 10, 33, 257)
@pytest.mark.parametrize("m,n,k", list(itertools.product(SIZES, repeat=3))[::7])
def test_odd_sizes_through_the_micro_kernel(m, n, k, monkeypatch):
  monkeypatch.setattr(opt, "MM_MIN_FLOPS", 0)   # every contraction, however small, takes the packed path
  a, b = rnd(m, k), rnd(k, n)
  t = Tensor(a) @ Tensor(b)
  assert mm_phases(t) == (k > 1 and n > 1), (m, n, k)   # K = 1: no reduce; N = 1: a reads k-contiguous rows in place
  np.testing.assert_allclose(t.numpy(), a @ b, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose((Tensor(a.T.copy()).T @ Tensor(b.T.copy()).T).numpy(), a @ b, rtol=1e-4, atol=1e-4)   # transposed views

@pytest.mark.parametrize("m,n,k,contraction", [(1, 1000, 1111, True), (1000, 1, 1111, False), (3, 777, 1031, True), (10, 257, 1000, True),
                                               (257, 10, 1000, True), (1033, 3, 700, True), (4096, 10, 129, True)])
def test_skinny_matmul(m, n, k, contraction):
  """M or N small at sizes where the contraction is chosen by itself; N = 1 with k-contiguous rows stays plain loops."""
  a, b, bias = rnd(m, k), rnd(k, n), rnd(n)
  t = (Tensor(a) @ Tensor(b) + Tensor(bias)).relu()
  assert mm_phases(t) == contraction
  np.testing.assert_allclose(t.numpy(), np.maximum(a @ b + bias, 0), rtol=1e-4, atol=1e-4)

def test_vector_times_matrix():
  """x @ W with x 1-D: the matrix's k steps are N apart, so a contraction with M = 1 (its rows packed), not a strided
  reduce; W.T's rows are k-contiguous (plain loops); both against numpy."""
  x, w = rnd(1500), rnd(1500, 2000)
  t = Tensor(x) @ Tensor(w)
  assert mm_phases(t)
  np.testing.assert_allclose(t.numpy(), x @ w, rtol=1e-4, atol=1e-3)
  t = Tensor(w.T.copy()) @ Tensor(x)
  assert not mm_phases(t)
  np.testing.assert_allclose(t.numpy(), w.T @ x, rtol=1e-4, atol=1e-3)

def kernel_attrs(t: Tensor) -> list[dict]:
  """uop-optimize's attributes of each kernel that computes t."""
  from morok_mlir.ir.emit import graph_func, normalize
  from morok_mlir.ir.pipeline import lower_to_kernels
  return [f.attrs for f in lower_to_kernels(graph_func(normalize([t.uop])[0])) if f.name != "schedule"]

@pytest.mark.parametrize("vec", [8, 16])
@pytest.mark.parametrize("n,k,lanes", [(1000, 1024, True), (7, 2048, True), (33, 96, True), (1000, 1111, False), (5, 21, False)])
def test_matrix_vector_rows_in_lanes(n, k, lanes, vec, monkeypatch):
  """W @ x with W's rows k-contiguous (a classifier's last layer, x @ W.T): each output's row of its own runs as vector
  lanes whose loads prefetch ahead (uop.reduce_lanes) where the lanes divide k, else LLVM's loop; with a bias and relu
  after it, on 1 and 2 threads, against numpy."""
  monkeypatch.setattr(opt, "VEC_WIDTH", vec)
  x, w, bias = rnd(1, k), rnd(n, k), rnd(n)
  for threads in (1, 2):
    monkeypatch.setattr(opt, "THREADS", threads)
    monkeypatch.setattr(R, "_schedule_cache", {})
    t = (Tensor(x) @ Tensor(w).T + Tensor(bias)).relu()
    (attrs,) = kernel_attrs(t)
    assert ("uop.reduce_lanes" in attrs) == lanes and "uop.contraction" not in attrs, attrs
    np.testing.assert_allclose(t.numpy(), np.maximum(x @ w.T + bias, 0), rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize("vec", [8, 16])
@pytest.mark.parametrize("n,ci,co,hw", [(8, 64, 64, 16), (2, 48, 32, 8), (3, 32, 48, 5)])
def test_epilogue_on_tiles_of_an_image_batch(n, ci, co, hw, vec, monkeypatch):
  """A batch of images convolved, the image as A (rows: image, then position): the output's rows are one run per
  image, images apart. Where an image's positions are a multiple of the tile's rows, a tile never straddles two
  images and the epilogue runs on tiles (its lanes take the first row's image); else the epilogue phase runs. The
  tile's rows follow the vector width (6 at 8 lanes, 8 at 16): both widths, on any machine. Against numpy's direct
  sum, with bias and relu."""
  monkeypatch.setattr(opt, "VEC_WIDTH", vec)
  monkeypatch.setattr(opt, "WINOGRAD", False)         # a plain contraction, as big as it gets
  monkeypatch.setattr(R, "_schedule_cache", {})       # schedules for this width stay here
  mr = facts.contraction_tiles(n * hw * hw, co, ci * 9, vec)[0]
  x, w, b = rnd(n, ci, hw, hw), rnd(co, ci, 3, 3) * 0.05, rnd(co)
  xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
  cols = np.stack([xp[:, :, i:i + hw, j:j + hw] for i in range(3) for j in range(3)], 2).reshape(n, ci * 9, hw * hw)
  ref = np.maximum(np.einsum("ok,nkp->nop", w.reshape(co, -1), cols).reshape(n, co, hw, hw) + b[:, None, None], 0)
  t = Tensor(x).conv2d(Tensor(w), Tensor(b), padding=1).relu()
  names = phase_names(t)
  assert any(e.endswith("_mm") for e in names) and any(e.endswith("_epi") for e in names) == (hw * hw % mr != 0), (mr, names)
  np.testing.assert_allclose(t.numpy(), ref, rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize("sa,sb", [((3, 257, 600), (3, 600, 10)), ((5, 1, 900), (5, 900, 700)), ((2, 3, 33, 257), (257, 7))])
def test_batched_skinny(sa, sb, monkeypatch):
  monkeypatch.setattr(opt, "MM_MIN_FLOPS", 0)
  a, b = rnd(*sa), rnd(*sb)
  np.testing.assert_allclose((Tensor(a) @ Tensor(b)).numpy(), a @ b, rtol=1e-4, atol=1e-3)

def phase_names(t: Tensor) -> list[str]:
  """The phases of the kernels that computed t (realizes it)."""
  R._schedule_cache.clear()
  t.realize()
  return [e for s in R._schedule_cache.values() for it in s.items for e, _ in (it.program.spec.phases or ())]

@pytest.mark.parametrize("m,n,k", [(37, 45, 70), (128, 100, 64), (9, 17, 300), (64, 3136, 64), (200, 33, 1)])
def test_epilogue_runs_on_each_tile(m, n, k, monkeypatch):
  """relu(a @ b + bias + r): mm runs the epilogue on each tile after its last k slice (no epilogue phase), columns as
  vector lanes; the tiles past M and N (m, n not multiples of the tile) write nothing there and read nothing past r's end."""
  monkeypatch.setattr(opt, "MM_MIN_FLOPS", 0)
  a, b, bias, r = rnd(m, k), rnd(k, n), rnd(n), rnd(m, n)
  t = (Tensor(a) @ Tensor(b) + Tensor(bias) + Tensor(r)).relu()
  names = phase_names(t)
  assert k == 1 or any(e.endswith("_mm") for e in names) and not any(e.endswith("_epi") for e in names), names
  np.testing.assert_allclose(t.numpy(), np.maximum(a @ b + bias + r, 0), rtol=1e-4, atol=1e-4)

def test_epilogue_phase_where_tiles_cannot_run_it(monkeypatch):
  """An epilogue of ops the lanes do not run (sin) keeps the epilogue phase over C, one with exp and log runs on the
  tiles (the exp2/log2 polynomials on vectors); a transposed product and one stored into the buffer its A is read from
  (an assign) are right too."""
  monkeypatch.setattr(opt, "MM_MIN_FLOPS", 0)
  a, b = rnd(70, 90), rnd(90, 50)
  np.testing.assert_allclose((Tensor(a) @ Tensor(b)).T.contiguous().numpy(), (a @ b).T, rtol=1e-4, atol=1e-4)
  t = (Tensor(a) @ Tensor(b)).sin()
  assert any(e.endswith("_epi") for e in phase_names(t))
  np.testing.assert_allclose(t.numpy(), np.sin(a @ b), rtol=1e-4, atol=1e-4)
  t = (Tensor(a) @ Tensor(b) * 0.1).exp() + ((Tensor(a) @ Tensor(b)).abs() + 1).log()   # log's argument kept from 0
  assert not any(e.endswith("_epi") for e in phase_names(t))
  np.testing.assert_allclose(t.numpy(), np.exp((a @ b) * 0.1) + np.log(np.abs(a @ b) + 1), rtol=1e-4, atol=1e-4)
  w = rnd(90, 90) * 0.1
  x = Tensor(a).realize()
  ref = x.numpy() @ w
  x.assign(x @ Tensor(w)).realize()
  np.testing.assert_allclose(x.numpy(), ref, rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize("ci,co,hw,k,s", [(256, 1024, 14, 1, 1), (300, 37, 7, 1, 1), (512, 512, 14, 3, 2), (1024, 64, 3, 1, 1)])
def test_epilogue_runs_on_transposed_tiles(ci, co, hw, k, s):
  """Small convolution outputs take the image as A, so the output steps along A's rows: the tile goes to the stack
  transposed and the epilogue's lanes run along its rows (no epilogue phase), rows past the image and channels past
  the weights masked off; against numpy's direct sum."""
  x, w, b = rnd(1, ci, hw, hw), rnd(co, ci, k, k) * 0.05, rnd(co)
  p = k // 2
  xp = np.pad(x[0], ((0, 0), (p, p), (p, p)))
  o = (hw + 2 * p - k) // s + 1
  cols = np.stack([xp[:, i:i + s * o:s, j:j + s * o:s] for i in range(k) for j in range(k)], 1).reshape(ci * k * k, o * o)
  r = rnd(1, co, o, o)
  ref = np.maximum((w.reshape(co, -1) @ cols).reshape(1, co, o, o) + b[:, None, None] + r, 0)
  t = (Tensor(x).conv2d(Tensor(w), Tensor(b), stride=s, padding=p) + Tensor(r)).relu()
  names = phase_names(t)
  assert any(e.endswith("_mm") for e in names) and not any(e.endswith("_epi") for e in names), names
  np.testing.assert_allclose(t.numpy(), ref, rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize("sa,sb", [((3, 257, 600), (3, 600, 10)), ((5, 33, 900), (5, 900, 70)), ((4, 64, 64), (4, 64, 48))])
def test_epilogue_runs_on_batched_tiles(sa, sb):
  """A batch of products (a grouped convolution, a batched matmul) runs its epilogue on each tile too, the batch index
  decoded from the tile's: one slice or several, against numpy; and a grouped 1x1 convolution has no epilogue phase."""
  a, b, bias = rnd(*sa), rnd(*sb), rnd(sb[-1])
  t = (Tensor(a) @ Tensor(b) + Tensor(bias)).relu()
  names = phase_names(t)
  assert any(e.endswith("_mm") for e in names) and not any(e.endswith("_epi") for e in names), names
  np.testing.assert_allclose(t.numpy(), np.maximum(a @ b + bias, 0), rtol=1e-4, atol=1e-3)
  x, w, r = rnd(1, 272, 14, 14), rnd(272, 68, 1, 1) * 0.1, rnd(1, 272, 14, 14)
  t = (Tensor(x).conv2d(Tensor(w), groups=4) + Tensor(r)).relu()
  names = phase_names(t)
  assert any(e.endswith("_mm") for e in names) and not any(e.endswith("_epi") for e in names), names
  ref = np.einsum("gok,gkp->gop", w.reshape(4, 68, 68), x.reshape(4, 68, 196)).reshape(1, 272, 14, 14)
  np.testing.assert_allclose(t.numpy(), np.maximum(ref + r, 0), rtol=1e-4, atol=1e-4)

EPILOGUES = {   # (morok, numpy) on the product p, a row vector v and a same-shaped r: each a different path of tile_epilogue
  "bias relu": (lambda p, v, r: (p + v).relu(), lambda p, v, r: np.maximum(p + v, 0)),
  "residual product": (lambda p, v, r: p * r - 1, lambda p, v, r: p * r - 1),
  "half (the epilogue phase)": (lambda p, v, r: p.half(), lambda p, v, r: p.astype(np.float16)),
  "where": (lambda p, v, r: (p > 0).where(p, r), lambda p, v, r: np.where(p > 0, p, r)),
  "transposed": (lambda p, v, r: p.transpose(-1, -2) + 2, lambda p, v, r: np.swapaxes(p, -1, -2) + 2),
  "sqrt max div": (lambda p, v, r: p.abs().sqrt().maximum(0.5) / 3, lambda p, v, r: np.maximum(np.sqrt(np.abs(p)), 0.5) / 3),
  "float mask": (lambda p, v, r: p + r.cast(dtypes.bool).where(0.0, -1e9) + (p > 1).cast(dtypes.float32),
                 lambda p, v, r: p + np.where(r != 0, 0.0, -1e9) + (p > 1)),
  "gelu": (lambda p, v, r: (p * 0.1).gelu(), lambda p, v, r: 0.5 * (p * 0.1) * (1 + np.tanh(0.7978845608 * (p * 0.1 + 0.044715 * (p * 0.1) ** 3)))),
}
@pytest.mark.parametrize("name", sorted(EPILOGUES))
def test_each_epilogue_on_tiles(name, monkeypatch):
  """Each epilogue kind once on a batched product with tile edges: all but the half-precision store run on the tiles."""
  monkeypatch.setattr(opt, "MM_MIN_FLOPS", 0)
  a, b, v, r = rnd(2, 37, 50), rnd(2, 50, 45), rnd(45), rnd(2, 37, 45)
  f, ref = EPILOGUES[name]
  t = f(Tensor(a) @ Tensor(b), Tensor(v), Tensor(r))
  names = phase_names(t)
  assert any(e.endswith("_epi") for e in names) == ("epilogue phase" in name), names
  np.testing.assert_allclose(t.numpy().astype(np.float32), ref(a @ b, v, r).astype(np.float32), rtol=2e-3, atol=2e-3)

@settings(max_examples=30, deadline=None)
@given(st.integers(1, 70), st.integers(1, 70), st.integers(1, 70), st.integers(0, 3), st.sampled_from(sorted(EPILOGUES)))
def test_epilogues_on_any_shape(m, k, n, batch, name):
  """Random shapes (tile edges anywhere), batches and epilogues through the micro-kernel, against numpy."""
  import morok_mlir.passes.optimize as o
  old, o.MM_MIN_FLOPS = o.MM_MIN_FLOPS, 0
  try:
    lead = (batch,) if batch else ()
    a, b, v, r = rnd(*lead, m, k), rnd(*lead, k, n), rnd(n), rnd(*lead, m, n)
    f, ref = EPILOGUES[name]
    got = f(Tensor(a) @ Tensor(b), Tensor(v), Tensor(r)).numpy()
    np.testing.assert_allclose(got.astype(np.float32), ref(a @ b, v, r).astype(np.float32), rtol=2e-3, atol=2e-3)
  finally: o.MM_MIN_FLOPS = old

@pytest.mark.parametrize("t,m,k,n", [(3, 50, 137, 40), (4, 64, 128, 32), (2, 30, 256, 48), (6, 129, 64, 16)])
def test_batch_with_a_computed_along_k(t, m, k, n):
  """A batch whose A is computed from k-contiguous loads (exp of x, attention's exp(s - max)) is packed row-major and
  its rows read in place (codegen.contraction.Contraction.rows_a; 256 floats a row: 64 bytes of padding between rows)."""
  a, b = rnd(t, m, k) * 0.3, rnd(t, k, n)
  np.testing.assert_allclose((Tensor(a).exp() @ Tensor(b)).numpy(), np.exp(a.astype(np.float64)) @ b, rtol=1e-4, atol=1e-4)
  q, kk, v = rnd(t, m, 16), rnd(t, k, 16), rnd(t, k, n)
  mask = R_.random((m, k)) < 0.8
  mask[:, 0] = True
  s = q.astype(np.float64) @ kk.swapaxes(1, 2) / 4 + np.where(mask, 0, -np.inf)
  p = np.exp(s - s.max(-1, keepdims=True)); ref = p / p.sum(-1, keepdims=True) @ v
  got = Tensor(q).scaled_dot_product_attention(Tensor(kk), Tensor(v), attn_mask=Tensor(mask)).numpy()
  np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)

def test_lowering_reads_the_optimizers_contraction(monkeypatch):
  """uop-optimize finds each kernel's contraction, asking whether its operands depend on each range (Z3 where the index
  math is not affine); lowering the kernels it wrote, a plain contraction and a Winograd convolution, reads those answers
  and asks nothing again."""
  from morok_mlir.ir.emit import graph_func, normalize
  from morok_mlir.ir.pipeline import lower_to_kernels
  from morok_mlir.codegen.program import lower_program
  monkeypatch.setattr(opt, "WINO_MIN_FLOPS", 0)
  outs = [Tensor(rnd(4, 96, 128)) @ Tensor(rnd(4, 128, 80)), Tensor(rnd(1, 64, 16, 16)).conv2d(Tensor(rnd(64, 64, 3, 3)), padding=1)]
  chosen = ("uop.contraction", "uop.winograd")
  kernels = [f for t in outs for f in lower_to_kernels(graph_func(normalize([t.uop])[0])) if any(a in f.attrs for a in chosen)]
  assert sorted(a for f in kernels for a in f.attrs if a in chosen) == list(chosen)
  asked, depends = [], facts.depends
  monkeypatch.setattr(facts, "depends", lambda *a: asked.append(a) or depends(*a))
  for f in kernels: lower_program(f, f.name)
  assert not asked

@pytest.mark.parametrize("rows", [1, 3])
def test_quantized_weights_are_never_kept_as_float32_panels(rows):
  """A product with weights in quantized blocks reads them in place: one row (a decode step) runs as vector lanes over
  the blocks, several rows as a contraction whose packed panels are made per call and not kept (a float32 copy of the
  weights); float32 weights' panels are kept, as before."""
  from morok_mlir.codegen.contraction import Contraction
  from morok_mlir.ir.emit import graph_func, normalize
  from morok_mlir.ir.pipeline import lower_to_kernels
  from morok_mlir.nn.quant import dequantize
  rng = np.random.default_rng(0)
  blocks = rng.integers(0, 255, (1536 * 576 // 32, 20), dtype=np.uint8)
  blocks[:, :4] = np.array([0.01, 0.02], np.float16).view(np.uint8)   # scale and minimum: finite, well-conditioned
  raw = Tensor(blocks)
  x, w32 = Tensor(rng.standard_normal((rows, 576)).astype(np.float32)), Tensor(rng.standard_normal((1536, 576)).astype(np.float32))
  def kernels(t): return [f for f in lower_to_kernels(graph_func(normalize([t.uop])[0])) if f.name != "schedule"]
  (q,) = kernels(x @ dequantize(raw, "Q4_1", (1536, 576)).T)
  assert ("uop.reduce_lanes" in q.attrs) if rows == 1 else ("uop.contraction" in q.attrs and Contraction(q, "k").reuse() == []), q.attrs
  (f,) = kernels(Tensor(rng.standard_normal((3, 576)).astype(np.float32)) @ w32.T)
  assert Contraction(f, "k").reuse(), "float32 weights' panels are kept"
  ref = x.numpy() @ dequantize(raw, "Q4_1", (1536, 576)).numpy().T
  np.testing.assert_allclose((x @ dequantize(raw, "Q4_1", (1536, 576)).T).numpy(), ref, rtol=1e-4, atol=1e-3)

@pytest.mark.parametrize("vec", [8, 16])
@pytest.mark.parametrize("ci,co,hw,k,s,p", [(3, 24, 37, 3, 2, 1), (3, 20, 29, 7, 2, 3), (64, 16, 23, 1, 1, 0), (16, 48, 19, 3, 2, 1)])
def test_few_channel_convolutions(ci, co, hw, k, s, p, vec, monkeypatch):
  """Convolutions with few input or output channels (a 3-channel stem, strided; a 1x1 squeeze to 16 channels) with bias
  and relu, at either lane width, against numpy's windows: odd sizes, so tiles and panels end partly past the output."""
  monkeypatch.setattr(opt, "VEC_WIDTH", vec)
  monkeypatch.setattr(R, "_schedule_cache", {})
  x, w, b = rnd(1, ci, hw, hw), rnd(co, ci, k, k) * 0.2, rnd(co)
  xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
  o = (hw + 2 * p - k) // s + 1
  cols = np.stack([xp[0, :, i:i + s * o:s, j:j + s * o:s] for i in range(k) for j in range(k)], 1).reshape(ci * k * k, o * o)
  ref = np.maximum(w.reshape(co, -1) @ cols + b[:, None], 0).reshape(1, co, o, o)
  np.testing.assert_allclose(Tensor(x).conv2d(Tensor(w), Tensor(b), stride=s, padding=p).relu().numpy(), ref, rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n,ci,co,h,w,kh,kw,s,p,d", [(1, 3, 20, 101, 87, 3, 3, 2, 0, 1), (1, 3, 13, 69, 73, 7, 7, 2, 3, 1),
                                                     (2, 5, 32, 37, 43, 3, 5, 1, (1, 2), 1), (1, 4, 24, 95, 79, 3, 3, 2, 2, 2),
                                                     (1, 16, 40, 35, 29, 3, 3, 1, 1, 1), (2, 3, 48, 61, 45, 3, 3, 2, 1, 1),
                                                     (1, 3, 24, 42, 81, 2, 3, (2, 3), (0, 1), (1, 2))])
def test_convolutions_packing_image_panels_where_used(n, ci, co, h, w, kh, kw, s, p, d, threads, monkeypatch):
  """Convolutions whose image pack would write several times the image (im2col: C_in*KH*KW taps per output pixel), so
  mm may pack each panel of it where used: odd and rectangular sizes, strides, paddings and dilations, a batch, on one
  thread and two (each its own panel buffer), with bias and relu, against numpy's windows."""
  import morok_mlir.device.cpu as cpu
  monkeypatch.setattr(opt, "THREADS", threads)
  monkeypatch.setattr(cpu, "THREADS", threads)
  monkeypatch.setattr(R, "_schedule_cache", {})
  x, wt, b = rnd(n, ci, h, w), rnd(co, ci, kh, kw) * 0.2, rnd(co)
  (sy, sx), (py, px), (dy, dx) = ((v, v) if isinstance(v, int) else v for v in (s, p, d))
  xp = np.pad(x, ((0, 0), (0, 0), (py, py), (px, px)))
  oh, ow = (h + 2 * py - dy * (kh - 1) - 1) // sy + 1, (w + 2 * px - dx * (kw - 1) - 1) // sx + 1
  cols = np.stack([xp[:, :, i * dy:i * dy + sy * oh:sy, j * dx:j * dx + sx * ow:sx] for i in range(kh) for j in range(kw)], 2)
  ref = np.maximum(np.einsum("ok,nkp->nop", wt.reshape(co, -1), cols.reshape(n, ci * kh * kw, oh * ow)) + b[:, None], 0).reshape(n, co, oh, ow)
  got = Tensor(x).conv2d(Tensor(wt), Tensor(b), stride=s, padding=p, dilation=d).relu().numpy()
  np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)

def test_weight_pack_loops_are_not_unrolled(monkeypatch):
  """A 3x3 convolution's weight pack (no lanes: its loops nest over the taps and a panel's rows) tells LLVM not to unroll
  its loops (whole unrolling made bodies of hundreds of loads and stores that took most of the kernel's compile time),
  and the annotation reaches the LLVM IR; mm's loops are left to LLVM. The result holds on the first call and the next
  (the pack kept)."""
  monkeypatch.setattr(R, "_schedule_cache", {})
  x, w = rnd(1, 128, 7, 7), rnd(32, 128, 3, 3) * 0.1
  t = Tensor(x).conv2d(Tensor(w), padding=1).relu()
  funcs = {f.split("(")[0].split("@")[1]: f for f in re.split(r"(?=func\.func)", t.mlir("lowered"))[1:]}
  pack = [f for n, f in funcs.items() if n.endswith("_pack_b") and "vector." not in f]
  assert pack and all(f.count("scf.for") == f.count("loop_unroll<disable = true>") for f in pack), list(funcs)
  assert all("loop_unroll" not in f for n, f in funcs.items() if n.endswith("_mm"))
  assert "llvm.loop.unroll.disable" in t.mlir("llvm")
  xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
  cols = np.stack([xp[0, :, i:i + 7, j:j + 7] for i in range(3) for j in range(3)], 1).reshape(128 * 9, 49)
  ref = np.maximum(w.reshape(32, -1) @ cols, 0).reshape(1, 32, 7, 7)
  for _ in range(2): np.testing.assert_allclose(Tensor(x).conv2d(Tensor(w), padding=1).relu().numpy(), ref, rtol=1e-4, atol=1e-4)

def test_a_pack_of_tens_of_thousands_of_elements_runs_on_the_threads(monkeypatch):
  """A contraction's pack of A (here relu(a), computed as it is packed: 256 x 192 = 49152 elements) runs on the
  machine's threads: at one thread, a convolution's im2col pack held the other thread idle for 14-17% of the kernel.
  (B's 512 columns make more panels than A has row blocks on any CPU's tiles, so A is packed by a phase of its own.)"""
  from morok_mlir.host import THREADS
  monkeypatch.setattr(R, "_schedule_cache", {})
  rng = np.random.default_rng(0)
  a, b = rng.standard_normal((256, 192)).astype(np.float32), rng.standard_normal((192, 512)).astype(np.float32)
  np.testing.assert_allclose((Tensor(a).relu() @ Tensor(b)).numpy(), np.maximum(a, 0) @ b, rtol=1e-4, atol=1e-4)
  phases = dict(p for s in R._schedule_cache.values() for it in s.items for p in (it.program.spec.phases or ()))
  pack = next(par for name, par in phases.items() if name.endswith("_pack_a"))
  assert (pack is None) if THREADS < 2 else (pack[1] == THREADS), phases
