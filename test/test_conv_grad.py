"""Convolution and pooling, forward and gradients, at sizes that take the compiled paths a training step takes
(contractions, the input gradient's sum over windows, non-overlapping pools),
against float64 numpy written out by hand; reshapes of permuted tensors against numpy."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck
from morok_mlir import Tensor

def windows(xp: np.ndarray, k, s, d, o):
  """(ky, kx) -> xp's strided window view (N, C, OH, OW) for that kernel tap."""
  return {(ky, kx): xp[:, :, ky * d[0]: ky * d[0] + s[0] * (o[0] - 1) + 1: s[0], kx * d[1]: kx * d[1] + s[1] * (o[1] - 1) + 1: s[1]]
          for ky in range(k[0]) for kx in range(k[1])}

def np_conv(x, w, R, stride, padding, dilation, groups):
  """conv2d of x with w and the gradients of sum(conv * R) with respect to x and w, float64."""
  (ph, pw), (N, C, H, W), (O, Cg, KH, KW) = padding, x.shape, w.shape
  xp = np.pad(x, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
  o = [(n - d * (k - 1) - 1) // s + 1 for n, k, s, d in zip(xp.shape[2:], (KH, KW), stride, dilation)]
  win, Og = windows(xp, (KH, KW), stride, dilation, o), O // groups
  out, gw, gxp = np.zeros((N, O, *o)), np.zeros_like(w), np.zeros_like(xp)
  for (ky, kx), p in win.items():
    for g in range(groups):
      co, ci = slice(g * Og, (g + 1) * Og), slice(g * Cg, (g + 1) * Cg)
      out[:, co] += np.einsum("nchw,oc->nohw", p[:, ci], w[co, :, ky, kx])
      gw[co, :, ky, kx] += np.einsum("nohw,nchw->oc", R[:, co], p[:, ci])
      sy, sx = ky * dilation[0], kx * dilation[1]
      gxp[:, ci, sy: sy + stride[0] * (o[0] - 1) + 1: stride[0], sx: sx + stride[1] * (o[1] - 1) + 1: stride[1]] += \
        np.einsum("nohw,oc->nchw", R[:, co], w[co, :, ky, kx])
  return out, gxp[:, :, ph: ph + H, pw: pw + W], gw

CONVS = [  # x shape, w shape, stride, padding, dilation, groups
  ((16, 1, 8, 8), (16, 1, 3, 3), 1, 1, 1, 1),       # the digits CNN's first conv: a small weight gradient, plain loops
  ((16, 16, 4, 4), (32, 16, 3, 3), 1, 1, 1, 1),     # its second conv: contractions for every gradient
  ((4, 6, 11, 9), (8, 3, 3, 2), (2, 1), (1, 0), 1, 2),
  ((3, 4, 13, 12), (6, 4, 3, 3), 2, 2, (2, 1), 1),
  ((2, 8, 10, 10), (8, 1, 5, 5), 3, 2, 1, 8),       # depthwise, kernel larger than the stride
  ((2, 3, 9, 7), (5, 3, 2, 2), 2, 0, 1, 1),         # kernel no larger than stride: windows do not overlap
  ((2, 3, 10, 8), (4, 3, 1, 3), (3, 1), (0, 1), 1, 1),
]
@pytest.mark.parametrize("xs,ws,stride,padding,dilation,groups", CONVS)
def test_conv2d_forward_and_gradients(xs, ws, stride, padding, dilation, groups):
  two = lambda v: (v, v) if isinstance(v, int) else v
  r = np.random.default_rng(0)
  x, w, b = r.standard_normal(xs), r.standard_normal(ws) * 0.3, r.standard_normal(ws[0])
  # the output shape first (R must match it), then the reference with R
  o = Tensor(x.astype(np.float32)).conv2d(Tensor(w.astype(np.float32)), stride=stride, padding=padding, dilation=dilation, groups=groups).shape
  R = r.uniform(0.5, 1.5, o)
  ref, gx, gw = np_conv(x, w, R, two(stride), two(padding), two(dilation), groups)
  X, W, B = (Tensor(a.astype(np.float32), requires_grad=True) for a in (x, w, b))
  out = X.conv2d(W, B, stride=stride, padding=padding, dilation=dilation, groups=groups)
  (out * Tensor(R.astype(np.float32))).sum().backward()
  np.testing.assert_allclose(out.numpy(), ref + b.reshape(1, -1, 1, 1), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(X.grad.numpy(), gx, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(W.grad.numpy(), gw, rtol=1e-4, atol=1e-3)
  np.testing.assert_allclose(B.grad.numpy(), R.sum((0, 2, 3)), rtol=1e-4, atol=1e-3)

@pytest.mark.parametrize("k,s,pad", [(2, 2, 0), (2, 3, 0), ((2, 3), (2, 3), 1), (3, 3, 1), (1, 2, 0), ((2, 1), (3, 2), 0)])
def test_pools_without_overlap_forward_and_gradients(k, s, pad):
  """k <= stride: each input element lies in at most one window (the pad/shrink/reshape path)."""
  two = lambda v: (v, v) if isinstance(v, int) else v
  (kh, kw), (sh, sw) = two(k), two(s)
  r = np.random.default_rng(1)
  x = r.standard_normal((3, 4, 11, 10))
  xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)), constant_values=-np.inf)
  o = [(n - kk) // ss + 1 for n, kk, ss in zip(xp.shape[2:], (kh, kw), (sh, sw))]
  win = np.stack(list(windows(xp, (kh, kw), (sh, sw), (1, 1), o).values()), -1)   # (N, C, OH, OW, taps)
  R = r.uniform(0.5, 1.5, win.shape[:4])
  X = Tensor(x.astype(np.float32), requires_grad=True)
  mp = X.max_pool2d(k, s, padding=pad)
  ap = X.avg_pool2d(k, s, padding=pad)
  (mp * Tensor(R.astype(np.float32)) + ap * Tensor(R.astype(np.float32) * 2)).sum().backward()
  np.testing.assert_allclose(mp.numpy(), win.max(-1), rtol=1e-6)
  np.testing.assert_allclose(ap.numpy(), np.where(np.isinf(win), 0, win).mean(-1), rtol=1e-5, atol=1e-6)
  g = np.zeros_like(xp)
  am = win.argmax(-1)
  for t, (ky, kx) in enumerate((ky, kx) for ky in range(kh) for kx in range(kw)):
    sl = np.s_[:, :, ky: ky + sh * (o[0] - 1) + 1: sh, kx: kx + sw * (o[1] - 1) + 1: sw]
    g[sl] += R * (am == t) + 2 * R / (kh * kw)
  np.testing.assert_allclose(X.grad.numpy(), g[:, :, pad: pad + 11, pad: pad + 10], rtol=1e-5, atol=1e-5)

def test_digits_cnn_block_gradients():
  """conv -> relu -> max_pool -> conv, the gradient at the first conv's output read by its weight gradient once per
  kernel tap, against float64 numpy."""
  r = np.random.default_rng(2)
  x, w1, w2 = r.standard_normal((8, 1, 8, 8)), r.standard_normal((16, 1, 3, 3)), r.standard_normal((4, 16, 3, 3)) * 0.2
  X, W1, W2 = Tensor(x.astype(np.float32)), Tensor(w1.astype(np.float32), requires_grad=True), Tensor(w2.astype(np.float32), requires_grad=True)
  h = X.conv2d(W1, padding=1).relu().max_pool2d(2)
  out = h.conv2d(W2, padding=1)
  R = r.uniform(0.5, 1.5, out.shape)
  (out * Tensor(R.astype(np.float32))).sum().backward()
  c1 = np_conv(x, w1, np.zeros((8, 16, 8, 8)), (1, 1), (1, 1), (1, 1), 1)[0]
  a = np.maximum(c1, 0)
  win = a.reshape(8, 16, 4, 2, 4, 2).transpose(0, 1, 2, 4, 3, 5).reshape(8, 16, 4, 4, 4)
  hp = win.max(-1)
  _, gh, gw2 = np_conv(hp, w2, R, (1, 1), (1, 1), (1, 1), 1)
  onehot = (np.arange(4) == win.argmax(-1)[..., None])
  ga = (onehot * gh[..., None]).reshape(8, 16, 4, 4, 2, 2).transpose(0, 1, 2, 4, 3, 5).reshape(8, 16, 8, 8) * (c1 > 0)
  _, _, gw1 = np_conv(x, w1, ga, (1, 1), (1, 1), (1, 1), 1)
  np.testing.assert_allclose(W2.grad.numpy(), gw2, rtol=1e-4, atol=1e-3)
  np.testing.assert_allclose(W1.grad.numpy(), gw1, rtol=1e-4, atol=1e-3)

@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_reshape_of_permuted_tensor(data):
  """A reshape's index is computed per run of dims whose sizes multiply alike: any reshape of a permuted (so not
  contiguous) tensor, size-1 dims included, matches numpy's."""
  shape = data.draw(st.lists(st.sampled_from([1, 2, 3, 4, 6]), min_size=1, max_size=5))
  perm = data.draw(st.permutations(range(len(shape))))
  x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
  n, new = x.size, []
  while n > 1:   # a random factorization of the size, with size-1 dims sprinkled in
    f = data.draw(st.sampled_from([d for d in range(1, n + 1) if n % d == 0]))
    new.append(f); n //= f
  new += [1] * data.draw(st.integers(0, 2))
  new = data.draw(st.permutations(new))
  want = x.transpose(perm).reshape(new)
  np.testing.assert_array_equal((Tensor(x).permute(*perm).reshape(tuple(new)) + 1).numpy(), want + 1)
