"""B's rows read in place (codegen.contraction's Contraction.b_in_place): a 1x1 convolution's image, its columns the
positions of one channel, loaded by the micro-kernel where it lies (no pack_b), the last panel's columns past N masked;
against numpy's products, for channel counts that leave the last panel partial or whole, an image that starts inside
its buffer (a channel slice), and fused epilogues."""
import numpy as np
from hypothesis import given, settings, strategies as st
from morok_mlir import Tensor
import morok_mlir.codegen.contraction as C

def conv1x1_ref(x, w, b):
  return np.einsum("oc,nchw->nohw", w[:, :, 0, 0].astype(np.float64), x.astype(np.float64)) + b[None, :, None, None]

def _spy(monkeypatch) -> list:
  """The kernels' choice (B in place or packed) for each contraction lowered from here on."""
  seen, orig = [], C.Contraction.__init__
  def spy(self, f, name):
    orig(self, f, name); seen.append(self.direct_b is not None)
  monkeypatch.setattr(C.Contraction, "__init__", spy)
  return seen

@settings(max_examples=25, deadline=None)
@given(ci=st.integers(16, 96), co=st.integers(4, 40), h=st.integers(12, 30), w=st.integers(12, 30), lo=st.integers(0, 5))
def test_conv1x1_in_place_values(ci, co, h, w, lo):
  """Any channel counts and image sizes (the last panel partial or whole), the image a slice of a wider one's channels."""
  r = np.random.default_rng(ci * 1000 + co)
  x = r.standard_normal((1, ci + lo, h, w)).astype(np.float32)
  wt, b = r.standard_normal((co, ci, 1, 1)).astype(np.float32), r.standard_normal(co).astype(np.float32)
  got = Tensor(x)[:, lo:].conv2d(Tensor(wt), Tensor(b)).relu().numpy()
  ref = np.maximum(conv1x1_ref(x[:, lo:], wt, b), 0)
  np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())

def test_conv1x1_in_place_with_a_residual():
  """A 64 -> 24 channel 1x1 convolution at 21x21 (441 columns: the last panel partial at 8 and 16 lanes), its epilogue
  adding a residual (test/lit/uop-lower-cpu/contraction-b-in-place.mlir: its route, at fixed cache sizes)."""
  r = np.random.default_rng(5)
  x, res = r.standard_normal((1, 64, 21, 21)).astype(np.float32), r.standard_normal((1, 24, 21, 21)).astype(np.float32)
  wt, b = r.standard_normal((24, 64, 1, 1)).astype(np.float32), r.standard_normal(24).astype(np.float32)
  got = (Tensor(x).conv2d(Tensor(wt), Tensor(b)) + Tensor(res)).numpy()
  np.testing.assert_allclose(got, conv1x1_ref(x, wt, b) + res, rtol=1e-4, atol=1e-3)

def test_matrix_columns_stay_packed(monkeypatch):
  """x @ W (one column range: W's panels are packed once and kept while W lives) keeps its pack."""
  seen = _spy(monkeypatch)
  r = np.random.default_rng(6)
  a, w = r.standard_normal((48, 200)).astype(np.float32), r.standard_normal((200, 300)).astype(np.float32)
  np.testing.assert_allclose((Tensor(a) @ Tensor(w)).numpy(), a.astype(np.float64) @ w, rtol=1e-4, atol=1e-3)
  assert seen == [False]

@settings(max_examples=15, deadline=None)
@given(cs=st.lists(st.integers(1, 48), min_size=2, max_size=4), co=st.integers(8, 40), hw=st.integers(14, 28), relu=st.booleans())
def test_conv1x1_of_a_concatenation(cs, co, hw, relu):
  """A 1x1 convolution of images concatenated along channels (a fire or inception module's output): B's rows in
  segments, one per input, each read where it lies; the inputs realized apart (or computed: relu'd, then B is packed)."""
  r = np.random.default_rng(sum(cs) * 100 + co)
  xs = [r.standard_normal((1, c, hw, hw)).astype(np.float32) for c in cs]
  wt, b = r.standard_normal((co, sum(cs), 1, 1)).astype(np.float32), r.standard_normal(co).astype(np.float32)
  ts = [Tensor(x).realize() for x in xs]
  cat = ts[0].cat(*ts[1:], dim=1)
  got = (cat.relu() if relu else cat).conv2d(Tensor(wt), Tensor(b)).numpy()
  x = np.concatenate(xs, 1)
  ref = conv1x1_ref(np.maximum(x, 0) if relu else x, wt, b)
  np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())

def test_l1_conflicts_counts_lines_per_set(monkeypatch):
  """A panel's rows (32 floats each) in an L1 of 64 sets, 8 or 12 ways: half the ways a set may hold."""
  for ways in (8, 12):
    monkeypatch.setattr(C, "L1_GEOMETRY", (64, ways))
    assert C.l1_conflicts([[k * 3136 for k in range(256)]], 32)      # a 56x56 image's channels: 16 lines a set
    assert not C.l1_conflicts([[k * 3136 for k in range(64)]], 32)   # 4 a set
    assert C.l1_conflicts([[k * 784 for k in range(512)]], 32)       # 28x28: spread over every set, but 32 KiB of lines
    assert not C.l1_conflicts([[k * 784 for k in range(96)]], 32)
    assert not C.l1_conflicts([[k * 441 for k in range(40)], [k * 441 for k in range(24)]], 32)
  monkeypatch.setattr(C, "L1_GEOMETRY", (64, 12))
  assert not C.l1_conflicts([[k * 3136 for k in range(96)]], 32) and C.l1_conflicts([[k * 3136 for k in range(112)]], 32)
  # two segments, each within its sets, whose lines together pass half of L1 (their buffers may lie anywhere)
  assert C.l1_conflicts([[k * 784 for k in range(200)], [k * 784 for k in range(200)]], 32)

def test_crowded_image_is_packed(monkeypatch):
  """A 1x1 convolution whose panels' rows would not stay in L1 (256 channels of a 56x56 image) packs B; 64 channels of
  the same image are read in place."""
  monkeypatch.setattr(C, "L1_GEOMETRY", (64, 12))
  seen = _spy(monkeypatch)
  r = np.random.default_rng(7)
  for ci in (256, 64):
    x, wt = r.standard_normal((1, ci, 56, 56)).astype(np.float32), r.standard_normal((24, ci, 1, 1)).astype(np.float32)
    b = r.standard_normal(24).astype(np.float32)
    ref = conv1x1_ref(x, wt, b)
    np.testing.assert_allclose(Tensor(x).conv2d(Tensor(wt), Tensor(b)).numpy(), ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
  assert seen == [False, True]

def test_crowded_image_packed_per_panel(monkeypatch):
  """B's rows too far apart to stay in L1 (256 channels of a 56x56 image, 12544 bytes apart: 16 of 64 sets) are packed:
  per panel inside mm where B is a buffer the schedule itself writes (uop.temps: an image, new each call), whole before
  mm where it is an input (maybe a weight, whose whole pack is kept across calls)."""
  from morok_mlir.host import L1_GEOMETRY
  seen, orig = [], C.Contraction.__init__
  def spy(self, f, name):
    orig(self, f, name); seen.append((self.crowded, self.b_slot in self.temps, self.fused_b, any(n.endswith("_pack_b") for n, _ in self.phases())))
  monkeypatch.setattr(C.Contraction, "__init__", spy)
  r = np.random.default_rng(7)
  x, wt, b = r.standard_normal((1, 256, 56, 56)).astype(np.float32), r.standard_normal((64, 256, 1, 1)).astype(np.float32), r.standard_normal(64)
  ref = conv1x1_ref(x * 2, wt, b)
  for image in (lambda: (Tensor(x) * 2).contiguous(), lambda: Tensor(x * 2).realize()):   # computed in the schedule; an input
    got = image().conv2d(Tensor(wt), Tensor(b.astype(np.float32))).numpy()
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-3)
  crowded = [(temp, fused, whole) for c, temp, fused, whole in seen if c]
  assert all(fused == temp and whole != temp for temp, fused, whole in crowded), seen
  if L1_GEOMETRY[0] == 64: assert [t for t, *_ in crowded] == [True, False], seen
