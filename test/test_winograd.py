"""F(2x2, 3x3) Winograd convolutions (uop-optimize's uop.winograd, lowered by codegen/winograd.py) against a float64
reference, with their epilogues, odd sizes, batches and padding; and the convolutions it is not chosen for."""
import numpy as np
import pytest
from morok_mlir import Tensor
from morok_mlir import realize as R
from morok_mlir.passes.optimize import WINO_MIN_FLOPS   # the default, before the fixture below lowers it

RNG = np.random.default_rng(0)
def rnd(*s): return RNG.standard_normal(s, dtype=np.float32)

def conv_ref(x, w, padding=(1, 1, 1, 1)):
  """float64 cross-correlation, stride 1; padding (top, bottom, left, right)."""
  t, b, l, r = padding
  xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (t, b), (l, r)))
  oh, ow = xp.shape[2] - 2, xp.shape[3] - 2
  return sum(np.einsum("nchw,oc->nohw", xp[:, :, i:i + oh, j:j + ow], w[:, :, i, j].astype(np.float64)) for i in range(3) for j in range(3))

def phases(t: Tensor) -> list[str]:
  R._schedule_cache.clear()
  t.realize()
  return [e for s in R._schedule_cache.values() for it in s.items for e, _ in (it.program.spec.phases or ())]
def kinds(t: Tensor) -> list[str]:   # the phases but pad (there only where the columns leave a panel part empty)
  return [k for p in phases(t) if (k := p.rsplit("_", 1)[1]) != "pad"]

@pytest.fixture(autouse=True)
def small(monkeypatch):
  """Winograd for convolutions of any work (the default leaves those under 2^25 flops plain): small shapes cover the
  edges (odd sizes, padding, batches) quickly; the caches those shapes were chosen for (one of them leaves L2) pinned,
  whatever this machine's are."""
  from morok_mlir.passes import optimize
  monkeypatch.setattr(optimize, "WINO_MIN_FLOPS", 0)
  monkeypatch.setattr(optimize, "CACHES", (32 << 10, 1 << 20, 32 << 20))

def close(got, want): np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())

# (batch, cin, cout, h, w, padding as torch's flat (left, right, top, bottom))
SHAPES = [(1, 32, 32, 16, 16, 1), (2, 48, 40, 10, 14, 1), (1, 64, 96, 14, 14, 1), (1, 64, 64, 13, 11, 1), (2, 40, 36, 9, 13, 1),
          (1, 64, 64, 15, 13, 0), (3, 64, 64, 9, 13, 0), (1, 64, 64, 11, 11, 2), (1, 64, 64, 12, 16, (0, 1, 1, 0)), (1, 128, 128, 28, 28, 1),
          (4, 32, 40, 64, 63, 1),   # leaves L2: blocks of tile rows
          (1, 16, 64, 19, 17, 1), (2, 24, 16, 11, 13, 0), (1, 16, 128, 13, 12, 1)]   # fewer than 32 input or output channels

@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_winograd_matches_direct(shape):
  bs, cin, cout, h, wd, pad = shape
  x, w, b = rnd(bs, cin, h, wd), rnd(cout, cin, 3, 3) * 0.1, rnd(cout)
  p = (pad,) * 4 if isinstance(pad, int) else (pad[2], pad[3], pad[0], pad[1])
  ref = conv_ref(x, w, p)
  res = rnd(*ref.shape)
  t = (Tensor(x).conv2d(Tensor(w), Tensor(b), padding=pad) + Tensor(res)).relu()   # bias, residual and relu: the store's epilogue
  assert kinds(t) == (["wt", "blk"] if bs == 4 else ["wt", "in", "mm", "out"])
  close(t.numpy(), np.maximum(ref + b[None, :, None, None] + res, 0))

@pytest.mark.parametrize("shape,blocked", [((1, 64, 192, 56, 56), True), ((1, 64, 96, 28, 28), False)], ids=str)
def test_winograd_blocks_by_l2(shape, blocked, monkeypatch):
  """With a 2 MiB L2: tiles of seven L2s (64 -> 192 channels at 56x56) run in blocks although their filters (0.8 MB) are
  read again by each of 14 blocks, more than half the tiles' bytes; tiles just past L2 (64 -> 96 at 28x28) do not."""
  from morok_mlir.passes import optimize
  monkeypatch.setattr(optimize, "CACHES", (48 << 10, 2 << 20, 32 << 20))
  bs, cin, cout, h, wd = shape
  x, w = rnd(bs, cin, h, wd), rnd(cout, cin, 3, 3) * 0.1
  t = Tensor(x).conv2d(Tensor(w), padding=1).relu()
  assert kinds(t) == (["wt", "blk"] if blocked else ["wt", "in", "mm", "out"])
  close(t.numpy(), np.maximum(conv_ref(x, w), 0))

@pytest.mark.parametrize("vec", [8, 16])
@pytest.mark.parametrize("shape", [(1, 16, 64, 19, 17, 1), (2, 24, 16, 11, 13, 0), (1, 32, 32, 6, 40, 1)], ids=str)
def test_winograd_output_lanes(shape, vec, monkeypatch):
  """The output transform runs a row's tiles as 8 or 16 vector lanes, a row's two output columns a tile stored as one
  interleaved vector: masked past an odd width and past the row's last tile, a residual read two columns a lane. A
  float16 result (no f16 lanes) keeps one tile at a time."""
  from morok_mlir.passes import optimize
  monkeypatch.setattr(optimize, "VEC_WIDTH", vec)
  monkeypatch.setattr(R, "_schedule_cache", {})
  bs, cin, cout, h, wd, pad = shape
  x, w, b = rnd(bs, cin, h, wd), rnd(cout, cin, 3, 3) * 0.1, rnd(cout)
  ref = conv_ref(x, w, (pad,) * 4) + b[None, :, None, None]
  res = rnd(*ref.shape)
  t = Tensor(x).conv2d(Tensor(w), Tensor(b), padding=pad)
  assert "out" in kinds(t)
  close((t + Tensor(res)).relu().numpy(), np.maximum(ref + res, 0))
  half = Tensor(x).conv2d(Tensor(w), Tensor(b), padding=pad).cast("float16")
  assert "out" in [p.rsplit("_", 1)[1] for p in phases(half)]
  np.testing.assert_allclose(half.numpy().astype(np.float32), ref, rtol=2e-3, atol=2e-3 * np.abs(ref).max())

def test_winograd_image_expression_and_new_weights():
  # the image operand may be computed (relu of the input, fused into the transform); a second weights tensor gets its
  # own transformed panels (kept per weights buffer), the first's stay valid
  x, w1, w2 = rnd(1, 64, 14, 14), rnd(64, 64, 3, 3) * 0.1, rnd(64, 64, 3, 3) * 0.1
  W1, W2 = Tensor(w1), Tensor(w2)
  assert any(p.endswith("_in") for p in phases(Tensor(x).relu().conv2d(W1, padding=1)))
  for _ in range(2):
    close(Tensor(x).relu().conv2d(W1, padding=1).numpy(), conv_ref(np.maximum(x, 0), w1))
    close(Tensor(x).relu().conv2d(W2, padding=1).numpy(), conv_ref(np.maximum(x, 0), w2))

def test_winograd_gradient():
  # the backward of a Winograd convolution (its output squared: the gradient reads the forward's result), float64's
  x, w = rnd(2, 32, 12, 12), rnd(32, 32, 3, 3) * 0.1
  X = Tensor(x, requires_grad=True)
  X.conv2d(Tensor(w), padding=1).square().sum().backward()
  assert any(p.endswith("_in") for p in phases(X.grad))
  y = conv_ref(x, w)
  gx = conv_ref(2 * y.astype(np.float32), np.flip(w, (2, 3)).transpose(1, 0, 2, 3).copy())
  close(X.grad.numpy(), gx)

@pytest.mark.parametrize("xs,ws,kw", [((1, 64, 16, 16), (64, 64, 3, 3), dict(stride=2, padding=1)),
                                      ((1, 64, 16, 16), (64, 64, 3, 3), dict(dilation=2, padding=2)),
                                      ((1, 64, 16, 16), (64, 64, 1, 1), {}), ((1, 64, 16, 16), (64, 32, 3, 3), dict(groups=2, padding=1)),
                                      ((1, 8, 16, 16), (64, 8, 3, 3), dict(padding=1)), ((1, 64, 16, 16), (8, 64, 3, 3), dict(padding=1)),
                                      ((1, 16, 16, 16), (192, 16, 3, 3), dict(padding=1)), ((1, 512, 7, 7), (512, 512, 3, 3), dict(padding=1))],
                         ids=["stride2", "dilation2", "1x1", "groups", "8 in", "8 out", "16 in 192 out", "16 tiles"])
def test_winograd_not_chosen(xs, ws, kw):
  # strides, dilations, other kernel sizes and groups are not its form; few channels (or many outputs of few inputs: each
  # of the 16 products a short k) or few tiles do not pay
  t = Tensor(rnd(*xs)).conv2d(Tensor(rnd(*ws)), **kw)
  assert not any(p.endswith("_in") for p in phases(t))

@pytest.mark.parametrize("form", ["channels last", "flipped", "sum of two", "strided view"])
def test_winograd_image_layouts(form):
  # an image read through movement ops or computed from two inputs; one whose columns the lanes cannot read (a step of
  # 2 * C per tile, or a negative one) falls back to the plain contraction: every form gives the reference's answer
  x, y, w = rnd(2, 64, 14, 14), rnd(2, 64, 14, 14), rnd(64, 64, 3, 3) * 0.1
  t, want = {"channels last": (lambda: Tensor(x.transpose(0, 2, 3, 1).copy()).permute(0, 3, 1, 2), x),
             "flipped": (lambda: Tensor(x[..., ::-1].copy()).flip(3), x),
             "sum of two": (lambda: Tensor(x) + Tensor(y), x + y),
             "strided view": (lambda: Tensor(np.repeat(x, 2, axis=3))[..., ::2], x)}[form]
  close(t().conv2d(Tensor(w), padding=1).numpy(), conv_ref(want, w))

from hypothesis import given, settings, strategies as st

@settings(max_examples=15, deadline=None)
@given(st.integers(1, 2), st.integers(16, 40), st.integers(16, 40), st.integers(5, 16), st.integers(5, 16), st.integers(0, 2))
def test_winograd_random_shapes(bs, cin, cout, h, wd, pad):
  # random sizes (odd and even, with and without padding) through whichever form the heuristic picks, as the reference
  x, w = rnd(bs, cin, h, wd), rnd(cout, cin, 3, 3) * 0.1
  close(Tensor(x).conv2d(Tensor(w), padding=pad).relu().numpy(), np.maximum(conv_ref(x, w, (pad,) * 4), 0))

def test_winograd_work_threshold(monkeypatch):
  # by default a convolution whose plain product is under 2^24 flops stays plain (two more phases cost what it saves)
  from morok_mlir.passes import optimize
  monkeypatch.setattr(optimize, "WINO_MIN_FLOPS", WINO_MIN_FLOPS)
  w32, w48, w64 = Tensor(rnd(32, 32, 3, 3)), Tensor(rnd(96, 48, 3, 3)), Tensor(rnd(64, 64, 3, 3))
  assert not any(p.endswith("_in") for p in phases(Tensor(rnd(1, 32, 28, 28)).conv2d(w32, padding=1)))   # 14.5 MFLOP
  assert any(p.endswith("_in") for p in phases(Tensor(rnd(1, 48, 16, 16)).conv2d(w48, padding=1)))       # 21 MFLOP
  assert any(p.endswith("_in") for p in phases(Tensor(rnd(1, 64, 28, 28)).conv2d(w64, padding=1)))       # 58 MFLOP

@pytest.mark.parametrize("shape", [(1, 32, 61, 13, 11), (4, 32, 37, 64, 63)], ids=str)
def test_products_read_only_what_the_call_wrote(shape):
  """Every float the 16 products read (A's panels, pad rows included; B's, pad columns included) and write is written by
  this call: scratch starts out holding whatever other kernels left there, and a denormal there costs an Intel core a
  microcode assist per FMA (a 64-channel 3x3 at 20x20 ran 140 or 460 us by what the memory held). Scratch filled with a
  denormal first, none may remain where the products read."""
  from morok_mlir.codegen.winograd import Winograd
  from morok_mlir.device.cpu import CPU
  from morok_mlir.ir.emit import graph_func, normalize
  from morok_mlir.ir.pipeline import lower_to_kernels
  bs, cin, cout, h, wd = shape
  t = Tensor(rnd(bs, cin, h, wd)).conv2d(Tensor(rnd(cout, cin, 3, 3) * 0.1), padding=1).relu()
  f = next(f for f in lower_to_kernels(graph_func(normalize([t.uop])[0])) if "uop.winograd" in f.attrs)
  w = Winograd(f, "kernel")
  assert w.Mp > w.M and w.pad is not None and w.blocked == (bs == 4), "the shape must leave pad rows and B columns no block writes"
  prog = CPU.compile(f)
  args = [rnd(a.dtype.size) for a in f.args]
  junk = np.float32(1e-40)
  scratch = {i: np.full(n, junk, np.float32) for i, n in enumerate(prog.spec.scratch)}
  prog.call_ptrs(*[a.ctypes.data for a in args], scratch=scratch)
  used = [w.Mp * w.K, w.Np * w.K, w.Mp * w.Np]   # of each problem's area: A, B, C (each thread's B and C when blocked)
  for i, s in scratch.items():
    part = 0 if i == 0 else 1 + (i - 1) % 2
    left = [x for x in range(16) if (s[x * w.area[part]:x * w.area[part] + used[part]] == junk).any()]
    assert not left, f"scratch {i}: problems {left} read values this call did not write"
