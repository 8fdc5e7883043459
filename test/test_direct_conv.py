"""Direct convolutions (kernel_facts.direct_conv, codegen.contraction's window_a/pad_phase): a strided convolution's image
read in place, or from a copy padded once, with the tile's vectors along output channels, against numpy's sums over
the windows; the window facts they rest on; and contraction_tiles' row blocks, equal for the threads that split them."""
import numpy as np
import pytest
from hypothesis import given, settings, HealthCheck, strategies as st
from morok_mlir import Tensor
from morok_mlir.core.kernel_facts import contraction, contraction_tiles, direct_conv, window
import morok_mlir.codegen.contraction as C
import morok_mlir.passes.optimize as O

def conv_ref(x, w, b, s, p, d):
  """Cross-correlation as torch's conv2d: x (1, ci, h, w), w (co, ci, kh, kw), stride s, padding p, dilation d (pairs)."""
  (sy, sx), (py, px), (dy, dx) = s, p, d
  xp = np.pad(x[0].astype(np.float64), ((0, 0), (py, py), (px, px)))
  co, ci, kh, kw = w.shape
  oh, ow = (xp.shape[1] - dy * (kh - 1) - 1) // sy + 1, (xp.shape[2] - dx * (kw - 1) - 1) // sx + 1
  out = np.zeros((co, oh, ow))
  for i in range(kh):
    for j in range(kw):
      win = xp[:, i * dy:i * dy + sy * (oh - 1) + 1:sy, j * dx:j * dx + sx * (ow - 1) + 1:sx]
      out += np.einsum("oc,chw->ohw", w[:, :, i, j].astype(np.float64), win)
  return (out + b[:, None, None])[None]

pair = lambda v: v if isinstance(v, tuple) else (v, v)
# (image, weights, stride, padding, dilation, runs direct): a small output (10x10, 7x7) has the image as a already, its
# rows packed (direct_conv keeps it, uop-optimize leaves it packed); the smallest stays plain loops (None)
CASES = [((3, 40, 40), (16, 6, 6), 2, 2, 1, True), ((64, 20, 20), (128, 3, 3), 2, 1, 1, False), ((5, 17, 23), (24, 3, 5), (2, 3), (1, 2), 1, None),
         ((64, 21, 19), (48, 3, 3), 2, 1, 2, True), ((1024, 14, 14), (64, 1, 1), 2, 0, 1, False), ((32, 30, 30), (16, 5, 5), 2, 2, 1, True),
         ((16, 33, 33), (40, 3, 3), 2, (0, 1), 1, True), ((48, 27, 27), (72, 4, 4), 4, 3, 1, True), ((3, 64, 64), (8, 7, 7), 2, 3, 1, True)]

@pytest.mark.parametrize("xs,ws,s,p,d,route", CASES)
def test_direct_conv_values(xs, ws, s, p, d, route, monkeypatch):
  """Every strided convolution direct_conv takes (direct wherever direct_conv takes it): odd sizes,
  rectangular windows and strides, asymmetric padding, dilation, an unpadded 1x1; bias and relu in the epilogue."""
  monkeypatch.setattr(O, "direct_pays", lambda *a: True)
  direct, orig = [], C.Contraction.__init__
  def spy(self, f, name):
    orig(self, f, name); direct.append("uop.direct_conv" in f.attrs)
  monkeypatch.setattr(C.Contraction, "__init__", spy)
  r = np.random.default_rng(7)
  (ci, h, wd), (co, kh, kw) = xs, ws
  x, w, b = r.standard_normal((1, ci, h, wd)).astype(np.float32), r.standard_normal((co, ci, kh, kw)).astype(np.float32), r.standard_normal(co).astype(np.float32)
  pd = tuple(v for q in pair(p) for v in (q, q))   # (top, bottom, left, right) as conv2d's padding takes it
  got = Tensor(x).conv2d(Tensor(w), Tensor(b), stride=s, padding=(pd[2], pd[3], pd[0], pd[1]), dilation=d).relu().numpy()
  ref = np.maximum(conv_ref(x, w, b, pair(s), pair(p), pair(d)), 0)
  np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-5 * np.abs(ref).max())
  assert direct == ([] if route is None else [route])

def test_direct_conv_with_a_residual():
  """A stem-like direct convolution (few output channels) whose epilogue adds a residual and a bias."""
  r = np.random.default_rng(3)
  x, w = r.standard_normal((1, 3, 64, 64)).astype(np.float32), r.standard_normal((16, 3, 6, 6)).astype(np.float32)
  res, b = r.standard_normal((1, 16, 32, 32)).astype(np.float32), r.standard_normal(16).astype(np.float32)
  got = (Tensor(x).conv2d(Tensor(w), Tensor(b), stride=2, padding=2) + Tensor(res)).numpy()
  np.testing.assert_allclose(got, conv_ref(x, w, b, (2, 2), (2, 2), (1, 1)) + res, rtol=2e-5, atol=1e-4)

def _conv_contraction(ci, co, hw, k, s, p, d=1):
  """The contraction of a one-image convolution's kernel, as uop-optimize sees it."""
  x, w = Tensor(np.zeros((1, ci, hw, hw), np.float32)), Tensor(np.zeros((co, ci, k, k), np.float32))
  from mlir import ir
  from morok_mlir.ir.bridge import import_module
  from morok_mlir.dialects import new_context
  with new_context(): funcs = import_module(ir.Module.parse(x.conv2d(w, stride=s, padding=p, dilation=d).mlir("uop-kernel-split")))
  return contraction(next(f for f in funcs if "uop.kernel" in f.attrs).roots[0])

def test_window_pairs():
  """A padded stride-2 window pairs each output position range with its window range (coefficient ratio the stride);
  a dilation that does not divide the stride has no partner: no direct convolution."""
  c = _conv_contraction(8, 16, 40, 3, 2, 1)
  d = direct_conv(c)
  assert d is not None and d is not c
  red, img, wt, I, J, K, T = d
  form, pairs = window(img, I, K)
  assert sorted(s for _, s in pairs.values()) == [2, 2] and {i for i, _ in pairs.values()} == set(I) and len(K) == 3
  assert direct_conv(_conv_contraction(8, 16, 64, 3, 2, 1, d=3)) is None     # stride 2, dilation 3: no window partner
  assert direct_conv(_conv_contraction(8, 16, 40, 3, 1, 1)) is None          # stride 1: Winograd's or an im2col's

@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(M=st.integers(1, 40000), N=st.integers(1, 600), K=st.integers(1, 3000), vec=st.sampled_from([8, 16]), threads=st.sampled_from([1, 2, 4]))
def test_row_blocks_equal_for_the_threads(M, N, K, vec, threads):
  """Where the threads split the row blocks (more of them than panels), the blocks are equal but for less than a panel
  of rows each: no thread waits while another finishes a block the others did not get (7 blocks of 1776 rows and one
  of 112, a direct 7x7 stem's before, left one of two threads idle a third of the time)."""
  mr, nr, kc, mc = contraction_tiles(M, N, K, vec, threads=threads)
  assert mc % mr == 0 and mc >= mr
  mb, rows = -(-M // mc), -(-M // mr) * mr
  if threads > 1 and mb > -(-N // nr): assert mb * mc - rows < mb * mr
