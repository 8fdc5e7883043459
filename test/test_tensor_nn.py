"""Functional nn ops (pools, unpool, transposed and N-d convolution, interpolate, einsum, attention, norms, linear,
dropout), differential against numpy float64 references; every one a composition of existing ops."""
import itertools, math
import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view as swv
from morok_mlir import Tensor, dtypes
from morok_mlir.core.uop import UOp
from morok_mlir.dialects.ops import Ops
from morok_mlir.realize import GlobalCounters

def rnd(*shape, seed=0): return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
def close(t, ref, tol=1e-5):
  out = t.numpy()
  assert out.shape == np.shape(ref), (out.shape, np.shape(ref))
  np.testing.assert_allclose(out, ref, rtol=tol, atol=tol)
def raises_here(exc, fn, match=None):
  """fn is a one-line lambda: the error must name this test file and the lambda's line."""
  with pytest.raises(exc, match=match) as e: fn()
  assert f"{__file__}:{fn.__code__.co_firstlineno}:" in str(e.value), str(e.value)
def kernels(fn):
  GlobalCounters.reset()
  out = fn().numpy()
  return GlobalCounters.kernel_count, out

# ---------------------------------------------------------------- pooling
def windows(xp, k, s, d, o):
  """(..., *sp) -> (..., *o, *k): numpy's sliding windows of the dilated kernel, strided, cut to o."""
  n = len(k)
  w = swv(xp, [dd * (kk - 1) + 1 for kk, dd in zip(k, d)], axis=tuple(range(-n, 0)))
  w = w[(...,) + tuple(slice(None, None, ss) for ss in s) + tuple(slice(None, None, dd) for dd in d)]
  return w[(...,) + tuple(slice(0, oo) for oo in o) + (slice(None),) * n]

def pool_ref(x, k, s=None, d=1, p=0, ceil=False, mode="max", cip=True):
  """PyTorch's pooling in float64: output sizes (ceil_mode's last window starts inside the input or its left padding),
  -inf/0 padding, divisors counting the padding (cip) or only the input. Indices: first max in the spatial plane."""
  n = len(k)
  s, d = s or k, (d,) * n if isinstance(d, int) else d
  p = [(p, p)] * n if isinstance(p, int) else [(q, q) for q in p]
  sp, o = x.shape[-n:], []
  for i, kk, ss, dd, (pb, pa) in zip(sp, k, s, d, p):
    num = i + pb + pa - (dd * (kk - 1) + 1)
    oo = (-(-num // ss) if ceil else num // ss) + 1
    o.append(oo - 1 if ceil and (oo - 1) * ss >= i + pb else oo)
  extra = [max(0, (oo - 1) * ss + dd * (kk - 1) + 1 - (i + pb + pa)) for oo, ss, dd, kk, i, (pb, pa) in zip(o, s, d, k, sp, p)]
  padw = [(0, 0)] * (x.ndim - n) + [(pb, pa + e) for (pb, pa), e in zip(p, extra)]
  xd = x.astype(np.float64)
  if mode == "max":
    w = windows(np.pad(xd, padw, constant_values=-np.inf), k, s, d, o)
    flat = w.reshape(w.shape[:-n] + (-1,))
    pos = windows(np.pad(np.arange(math.prod(sp)).reshape(sp), padw[-n:], constant_values=-1), k, s, d, o).reshape(tuple(o) + (-1,))
    am = flat.argmax(-1)
    return flat.max(-1), np.take_along_axis(np.broadcast_to(pos, flat.shape), am[..., None], -1)[..., 0]
  total = windows(np.pad(xd, padw), k, s, d, o).sum(tuple(range(-n, 0)))
  if cip: inside = np.pad(np.ones([i + pb + pa for i, (pb, pa) in zip(sp, p)]), [(0, e) for e in extra])   # the input and its padding
  else: inside = np.pad(np.ones(sp), padw[-n:])                                                            # the input only
  cnt = windows(inside, k, s, d, o)
  return total / cnt.sum(tuple(range(-n, 0)))

POOLS = [dict(k=(2, 2)), dict(k=(3, 3), s=(2, 2), p=1), dict(k=(3, 2), s=(1, 2), d=(2, 1)), dict(k=(3, 3), s=(2, 2), ceil=True),
         dict(k=(3, 3), s=(2, 2), p=1, ceil=True), dict(k=(2, 3), s=(3, 2), p=(1, 1), d=2, ceil=True), dict(k=(4,), s=(3,), ceil=True),
         dict(k=(2, 2, 2), s=(1, 2, 2), p=1)]
def pool_args(c): return dict(kernel_size=c["k"], stride=c.get("s"), dilation=c.get("d", 1), padding=c.get("p", 0), ceil_mode=c.get("ceil", False))
def pool_input(c, seed=0):
  x = rnd(*[2, 3, 9, 8, 7][:2 + len(c["k"])] if len(c["k"]) < 3 else (1, 2, 5, 7, 6), seed=seed)
  return x

@pytest.mark.parametrize("c", POOLS, ids=str)
def test_max_pool(c):
  x = pool_input(c)
  ref, idx = pool_ref(x, c["k"], c.get("s"), c.get("d", 1), c.get("p", 0), c.get("ceil", False))
  out, ind = Tensor(x).max_pool2d(**pool_args(c), return_indices=True)
  close(out, ref)
  assert ind.dtype == dtypes.int64
  np.testing.assert_array_equal(ind.numpy(), idx)
  close(Tensor(x).max_pool2d(**pool_args(c)), ref)

@pytest.mark.parametrize("cip", [True, False])
@pytest.mark.parametrize("c", POOLS, ids=str)
def test_avg_pool(c, cip):
  x = pool_input(c, 1)
  close(Tensor(x).avg_pool2d(**pool_args(c), count_include_pad=cip), pool_ref(x, c["k"], c.get("s"), c.get("d", 1), c.get("p", 0),
                                                                             c.get("ceil", False), "avg", cip))

def test_pool_edge_cases():
  x = rnd(1, 1, 6, 5)
  xt = Tensor(np.ascontiguousarray(x.transpose(0, 1, 3, 2))).permute(0, 1, 3, 2)   # a non-contiguous view
  close(xt.max_pool2d((2, 2)), pool_ref(x, (2, 2))[0])
  close(xt.avg_pool2d(), pool_ref(x, (2, 2), mode="avg"))
  close(Tensor(x[0]).max_pool2d(3, stride=1), pool_ref(x[0], (3, 3), (1, 1))[0])                # (C, H, W) input, int kernel
  i = np.int32([[[5, -3, 2, 8], [1, 7, -9, 0]]])
  np.testing.assert_array_equal(Tensor(i).max_pool2d((2, 2), padding=1).numpy(), pool_ref(i, (2, 2), p=1)[0].astype(np.int32))
  ties, ind = Tensor(np.zeros((1, 4, 4), np.float32)).max_pool2d((2, 2), stride=1, return_indices=True)
  np.testing.assert_array_equal(ind.numpy()[0], [[0, 1, 2], [4, 5, 6], [8, 9, 10]])   # the first of equal maxima
  out, ind = Tensor(np.float32([[[1, np.nan, 3, 4], [5, 6, 7, 8]]])).max_pool2d((2, 2), return_indices=True)
  np.testing.assert_array_equal(out.numpy(), [[[np.nan, 8]]]); np.testing.assert_array_equal(ind.numpy(), [[[1, 7]]])   # NaN is the max
  ind = Tensor(np.full((1, 2, 2), -np.inf, np.float32)).max_pool2d((2, 2), padding=1, return_indices=True)[1]
  np.testing.assert_array_equal(ind.numpy(), [[[0, 1], [2, 3]]])   # -inf inputs win over the -inf padding

def test_pool_errors():
  x = Tensor(rnd(1, 1, 4, 4))
  raises_here(ValueError, lambda: x.max_pool2d((2, 2), padding=2), "at most half")
  raises_here(ValueError, lambda: x.avg_pool2d((3, 3), padding=2), "at most half")
  raises_here(ValueError, lambda: x.max_pool2d((2, 2), stride=0), "positive")
  raises_here(ValueError, lambda: x.max_pool2d((5, 5)), "larger than the input")
  raises_here(ValueError, lambda: Tensor(rnd(4)).max_pool2d((2, 2)), "at least 2 dims")

@pytest.mark.parametrize("c", [dict(k=(2, 2)), dict(k=(3, 3), s=(2, 2), p=1), dict(k=(3, 3), s=(1, 1))], ids=str)
def test_max_unpool(c):
  x = rnd(2, 3, 6, 5)
  out, ind = Tensor(x).max_pool2d(**pool_args(c), return_indices=True)
  got = out.max_unpool2d(ind, c["k"], c.get("s"), padding=c.get("p", 0), output_size=x.shape).numpy()
  ref = np.zeros((2, 3, 30))
  ov, oi = out.numpy().reshape(2, 3, -1), ind.numpy().reshape(2, 3, -1)
  for b, ch in np.ndindex(2, 3): ref[b, ch, oi[b, ch]] = ov[b, ch]   # overlapping windows write one element once
  np.testing.assert_array_equal(got, ref.reshape(x.shape).astype(np.float32))
  if c["k"] == (2, 2): assert out.max_unpool2d(ind, (2, 2)).shape == (2, 3, 6, 4)   # the default size: pool's input, floored
  raises_here(ValueError, lambda: out.max_unpool2d(ind[:, :1], (2, 2)), "shape of the input")

# ---------------------------------------------------------------- convolution
def conv_ref(x, w, b=None, groups=1, stride=1, dilation=1, padding=0):
  n = w.ndim - 2
  s, d, p = ((v,) * n if isinstance(v, int) else v for v in (stride, dilation, padding))
  xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(q, q) for q in p])
  o = [(i + 2 * q - dd * (k - 1) - 1) // ss + 1 for i, q, dd, k, ss in zip(x.shape[2:], p, d, w.shape[2:], s)]
  win = windows(xp, w.shape[2:], s, d, o)   # (bs, cin, *o, *k)
  g, ci, co = groups, w.shape[1], w.shape[0] // groups
  win = win.reshape(x.shape[0], g, ci, *win.shape[2:])
  ks = "".join("klm"[:n])
  out = np.stack([np.einsum(f"nc{'xyz'[:n]}{ks},oc{ks}->no{'xyz'[:n]}", win[:, i], w[i * co:(i + 1) * co]) for i in range(g)], 1)
  out = out.reshape(x.shape[0], g * co, *o)
  return out if b is None else out + b.reshape(1, -1, *[1] * n)

@pytest.mark.parametrize("xs,ws,kw", [((2, 4, 11), (6, 4, 3), dict(padding=1, stride=2)), ((1, 4, 9), (4, 2, 2), dict(groups=2, dilation=3)),
                                      ((1, 2, 5, 6, 4), (3, 2, 2, 3, 2), dict(padding=(1, 0, 1)))])
def test_conv_1d_3d(xs, ws, kw):
  x, w, b = rnd(*xs), rnd(*ws, seed=1), rnd(ws[0], seed=2)
  close(Tensor(x).conv2d(Tensor(w), Tensor(b), **kw), conv_ref(x, w, b, **kw), 1e-4)

def conv_transpose_ref(x, w, b=None, groups=1, stride=1, dilation=1, padding=0, output_padding=0):
  """The definition: every input element scatters its kernel into the output at i*stride + k*dilation - padding."""
  n = w.ndim - 2
  s, d, p, op = ((v,) * n if isinstance(v, int) else v for v in (stride, dilation, padding, output_padding))
  ci, co = w.shape[0] // groups, w.shape[1]
  full = [(i - 1) * ss + dd * (k - 1) + 1 + o for i, ss, dd, k, o in zip(x.shape[2:], s, d, w.shape[2:], op)]
  out = np.zeros((x.shape[0], groups * co, *full))
  for kpos in itertools.product(*[range(k) for k in w.shape[2:]]):
    sl = tuple(slice(kk * dd, kk * dd + (i - 1) * ss + 1, ss) for kk, dd, i, ss in zip(kpos, d, x.shape[2:], s))
    for g in range(groups):
      contrib = np.einsum("nc...,co->no...", x[:, g * ci:(g + 1) * ci].astype(np.float64), w[g * ci:(g + 1) * ci, (slice(None)), *kpos])
      out[(slice(None), slice(g * co, (g + 1) * co)) + sl] += contrib
  out = out[(slice(None), slice(None)) + tuple(slice(q, f - q) for q, f in zip(p, full))]
  return out if b is None else out + b.reshape(1, -1, *[1] * n)

@pytest.mark.parametrize("xs,ws,kw", [((2, 3, 5, 4), (3, 2, 3, 3), {}), ((1, 4, 4, 5), (4, 3, 3, 2), dict(stride=2, padding=1, output_padding=1)),
                                      ((2, 4, 3, 3), (4, 1, 2, 3), dict(groups=2, stride=(2, 3), dilation=(1, 2))),
                                      ((1, 2, 4, 4), (2, 2, 2, 2), dict(padding=2, stride=3, dilation=2, output_padding=(2, 0))),  # padding cuts
                                      ((2, 3, 7), (3, 2, 4), dict(stride=3, padding=1))])
def test_conv_transpose(xs, ws, kw):
  # few cases: compiling these kernels is slow (the contraction check's Z3 queries on zero-insertion index math time out)
  x, w, b = rnd(*xs), rnd(*ws, seed=1), rnd(ws[1] * kw.get("groups", 1), seed=2)
  if kw: close(Tensor(x).conv_transpose2d(Tensor(w), Tensor(b), **kw), conv_transpose_ref(x, w, b, **kw), 1e-4)
  else: close(Tensor(x).conv_transpose2d(Tensor(w), **kw), conv_transpose_ref(x, w, **kw), 1e-4)

def test_conv_transpose_errors():
  x, w = Tensor(rnd(1, 2, 3, 3)), Tensor(rnd(2, 2, 2, 2))
  raises_here(ValueError, lambda: x.conv_transpose2d(w, stride=2, output_padding=2), "output padding must be smaller")
  raises_here(ValueError, lambda: x.conv_transpose2d(Tensor(rnd(3, 2, 2, 2))), "does not match weight")
  raises_here(ValueError, lambda: x.conv_transpose2d(w, padding=3), "negative size")
  raises_here(TypeError, lambda: x.conv_transpose2d(np.ones((2, 2, 2, 2))), "weight Tensor")

# ---------------------------------------------------------------- interpolate
def interp_ref(x, size, mode, align_corners=False):
  """PyTorch's source positions per resized dim, in float64 (nearest: floor(j*in/out); nearest-exact: floor((j+.5)*in/out))."""
  out = x.astype(np.float64)
  for d, o in zip(range(x.ndim - len(size), x.ndim), size):
    i, j = x.shape[d], np.arange(o)
    if mode == "nearest": out = np.take(out, j * i // o, d)
    elif mode == "nearest-exact": out = np.take(out, (2 * j + 1) * i // (2 * o), d)
    else:
      src = j * (i - 1) / max(o - 1, 1) if align_corners else np.maximum((j + 0.5) * i / o - 0.5, 0)
      lo = np.floor(src).astype(int)
      lam = (src - lo).reshape((o,) + (1,) * (x.ndim - 1 - d))
      out = np.take(out, lo, d) * (1 - lam) + np.take(out, np.minimum(lo + 1, i - 1), d) * lam
  return out

@pytest.mark.parametrize("mode", ["linear", "nearest", "nearest-exact"])
@pytest.mark.parametrize("size", [(7, 3), (2, 9), (5, 5), (1, 1)])
def test_interpolate(mode, size):
  x = rnd(2, 3, 5, 4)
  close(Tensor(x).interpolate(size, mode), interp_ref(x, size, mode))
  if mode == "linear": close(Tensor(x).interpolate(size, mode, align_corners=True), interp_ref(x, size, mode, True))

def test_interpolate_modes_and_edges():
  x = rnd(1, 2, 3, 4, 5)
  close(Tensor(x).interpolate((6, 2, 7), "trilinear"), interp_ref(x, (6, 2, 7), "linear"))
  close(Tensor(x[0]).interpolate((5, 3), "bilinear", align_corners=True), interp_ref(x[0], (5, 3), "linear", True))
  close(Tensor(x[0, 0, 0]).interpolate((9,)), interp_ref(x[0, 0, 0], (9,), "linear"))
  xt = Tensor(np.ascontiguousarray(x[0, 0].T)).T   # non-contiguous
  close(xt.interpolate((7, 2), "nearest"), interp_ref(x[0, 0], (7, 2), "nearest"))
  i = np.arange(12, dtype=np.int32).reshape(1, 3, 4)
  np.testing.assert_array_equal(Tensor(i).interpolate((5, 8), "nearest").numpy(), interp_ref(i, (5, 8), "nearest").astype(np.int32))
  special = np.float32([[np.inf, -0.0, np.nan, 1.0]])
  np.testing.assert_array_equal(Tensor(special).interpolate((1, 8), "nearest").numpy(), np.repeat(special, 2, 1))   # picks are exact

def test_interpolate_gathers_and_its_gradient():
  """The neighbours are gathered (O(1) an output, no (out, in) one-hot reduce: 512 -> 1024 squared took seconds), and
  the gradient is the interpolation's transpose: d sum(w * resize(x)) / dx[i] = sum(w * resize(e_i))."""
  x, w = rnd(1, 1, 3, 4), rnd(1, 1, 5, 7)
  xt = Tensor(x, requires_grad=True)
  y = xt.interpolate((5, 7), "linear")
  assert Ops.GATHER in {u.op for u in y.uop.toposort} and Ops.REDUCE_AXIS not in {u.op for u in y.uop.toposort}
  (y * Tensor(w)).sum().backward()
  want = np.array([(interp_ref(e.reshape(x.shape), (5, 7), "linear") * w).sum() for e in np.eye(x.size)]).reshape(x.shape)
  close(xt.grad, want)

@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
@pytest.mark.parametrize("size", [(10, 8), (15, 4), (5, 12), (1, 2), (10, 1)])
def test_interpolate_nearest_integer_factors(mode, size):
  """Nearest resizes by an integer factor up or down are movement ops (a repeat, a strided slice): no one-hot reduce;
  the same picks as the general rule."""
  x = rnd(2, 3, 5, 4)
  y = Tensor(x).interpolate(size, mode)
  assert not {Ops.REDUCE_AXIS, Ops.WHERE} & {u.op for u in y.uop.toposort}
  np.testing.assert_array_equal(y.numpy(), interp_ref(x, size, mode))

def test_interpolate_errors():
  x = Tensor(rnd(1, 1, 4, 4))
  raises_here(ValueError, lambda: x.interpolate((2, 2), "cubic"), "mode must be")
  raises_here(ValueError, lambda: x.interpolate((2, 2), "nearest", align_corners=True), "align_corners")
  raises_here(ValueError, lambda: x.interpolate((2, 2, 2), "bilinear"), "bilinear resizes 2 dims")
  raises_here(ValueError, lambda: x.interpolate((0, 2)), "positive ints")

# ---------------------------------------------------------------- einsum
@pytest.mark.parametrize("formula,shapes", [("ij,jk->ik", [(3, 4), (4, 5)]), ("ij,jk", [(3, 4), (4, 5)]), ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
                                            ("i,i->", [(5,), (5,)]), ("i,j->ij", [(3,), (4,)]), ("ij->ji", [(3, 4)]), ("ij->", [(3, 4)]),
                                            ("ii->i", [(4, 4)]), ("ii", [(4, 4)]), ("iji->j", [(3, 2, 3)]),
                                            ("...ij,...jk->...ik", [(2, 3, 4), (4, 2)]),
                                            ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]), ("ab,bc,cd->ad", [(2, 3), (3, 4), (4, 2)]),
                                            ("i...->...", [(3, 2, 2)]), (" i j , j k -> k i ", [(2, 3), (3, 4)])])
def test_einsum(formula, shapes):
  arrs = [rnd(*s, seed=i) for i, s in enumerate(shapes)]
  close(Tensor.einsum(formula, *[Tensor(a) for a in arrs]), np.einsum(formula.replace(" ", ""), *[a.astype(np.float64) for a in arrs]), 1e-5)
  close(Tensor.einsum(formula, [Tensor(a) for a in arrs]), np.einsum(formula.replace(" ", ""), *[a.astype(np.float64) for a in arrs]), 1e-5)

def test_einsum_non_contiguous_and_errors():
  a, b = rnd(4, 3), rnd(4, 5)
  close(Tensor.einsum("ij,jk->ik", Tensor(a).T, Tensor(b)), a.T.astype(np.float64) @ b)
  x, y = Tensor(a), Tensor(b)
  raises_here(ValueError, lambda: Tensor.einsum("ij,jk->ik", x), "2 operands, got 1")
  raises_here(ValueError, lambda: Tensor.einsum("ij,jk->ik", x, y), "sizes 3 and 4")
  raises_here(ValueError, lambda: Tensor.einsum("ijk,jk->ik", x, y), "do not match")
  raises_here(ValueError, lambda: Tensor.einsum("ij,ik->iz", x, y), "must be distinct letters")

# ---------------------------------------------------------------- attention, norms, linear, dropout
def softmax_ref(s): return np.exp(s - s.max(-1, keepdims=True)) / np.exp(s - s.max(-1, keepdims=True)).sum(-1, keepdims=True)
def sdpa_ref(q, k, v, mask=None):
  s = q.astype(np.float64) @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
  if mask is not None: s = np.where(mask, s, -np.inf) if mask.dtype == bool else s + mask
  return softmax_ref(s) @ v

def test_attention():
  q, k, v = rnd(2, 3, 5, 8), rnd(2, 3, 7, 8, seed=1), rnd(2, 3, 7, 4, seed=2)
  close(Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v)), sdpa_ref(q, k, v))
  causal = np.tril(np.ones((5, 7), bool))
  close(Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), is_causal=True), sdpa_ref(q, k, v, causal))
  m = rnd(5, 7, seed=3) > 0
  m[:, 0] = True   # every query sees a key
  close(Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), attn_mask=Tensor(m)), sdpa_ref(q, k, v, m))
  f = rnd(3, 1, 7, seed=4)
  close(Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), attn_mask=Tensor(f)), sdpa_ref(q, k, v, f))
  qt = Tensor(np.ascontiguousarray(np.swapaxes(q, 1, 2))).transpose(1, 2)   # (B, L, H, E) stored, viewed as (B, H, L, E)
  close(qt.scaled_dot_product_attention(Tensor(k), Tensor(v), dropout_p=0.5), sdpa_ref(q, k, v))   # no dropout unless training
  raises_here(ValueError, lambda: Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), attn_mask=Tensor(m), is_causal=True), "not both")

def test_attention_kernels():
  q, k, v = rnd(2, 4, 16, 32), rnd(2, 4, 16, 32, seed=1), rnd(2, 4, 16, 32, seed=2)
  n, out = kernels(lambda: Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), is_causal=True))
  assert n <= 3, n
  np.testing.assert_allclose(out, sdpa_ref(q, k, v, np.tril(np.ones((16, 16), bool))), rtol=1e-5, atol=1e-5)

def test_layernorm():
  x = rnd(64, 256)
  xd = x.astype(np.float64)
  ref = (xd - xd.mean(-1, keepdims=True)) / np.sqrt(xd.var(-1, keepdims=True) + 1e-5)
  n, out = kernels(lambda: Tensor(x).layernorm())
  assert n <= 2, n
  np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
  y = rnd(2, 3, 4, 5, seed=1).astype(np.float64)
  ref = (y - y.mean((2, 3), keepdims=True)) / np.sqrt(y.var((2, 3), keepdims=True) + 1e-3)   # dims 0 and 3 of the transposed view
  close(Tensor(y.astype(np.float32)).transpose(0, 2).layernorm((0, 3), eps=1e-3), ref.transpose(2, 1, 0, 3), 1e-5)

def test_batchnorm():
  x, w, b, m, iv = rnd(2, 3, 4, 5), rnd(3, seed=1), rnd(3, seed=2), rnd(3, seed=3), np.abs(rnd(3, seed=4))
  sh = (1, 3, 1, 1)
  ref = (x.astype(np.float64) - m.reshape(sh)) * w.reshape(sh) * iv.reshape(sh) + b.reshape(sh)
  close(Tensor(x).batchnorm(Tensor(w), Tensor(b), Tensor(m), Tensor(iv)), ref)
  close(Tensor(x).batchnorm(None, None, Tensor(m), Tensor(iv)), (x.astype(np.float64) - m.reshape(sh)) * iv.reshape(sh))
  m2, iv2 = rnd(4, 5, seed=5), np.abs(rnd(4, 5, seed=6))
  close(Tensor(x).batchnorm(None, None, Tensor(m2), Tensor(iv2), axis=(2, 3)), (x.astype(np.float64) - m2) * iv2)
  raises_here(ValueError, lambda: Tensor(x).batchnorm(None, None, Tensor(m2), Tensor(iv)), "mean must be a Tensor of 3 elements")

def test_linear():
  x, w, b = rnd(3, 4), rnd(4, 5, seed=1), rnd(5, seed=2)
  close(Tensor(x).linear(Tensor(w), Tensor(b)), x.astype(np.float64) @ w + b)
  close(Tensor(x).linear(Tensor(np.ascontiguousarray(w.T)).T), x.astype(np.float64) @ w)
  close(Tensor(x).linear(Tensor(b[:4])), x * b[:4])
  raises_here(TypeError, lambda: Tensor(x).linear(w), "weight Tensor")

def test_dropout():
  x = Tensor(np.ones((64, 64), np.float32))
  assert x.dropout(0.5) is x and not Tensor.training   # evaluation: the identity
  raises_here(ValueError, lambda: x.dropout(1.5), "between 0 and 1")
  Tensor.training = True
  try:
    Tensor.manual_seed(1)
    out = x.dropout(0.25).numpy()
    assert set(np.unique(out)) <= {0.0, np.float32(1 / 0.75)} and 0.2 < (out == 0).mean() < 0.3
    np.testing.assert_array_equal(x.dropout(1.0).numpy(), np.zeros((64, 64), np.float32))
    assert x.dropout(0) is x
  finally: Tensor.training = False

def test_uop_builds_the_same_graph(monkeypatch):
  a, b = Tensor(rnd(1, 2, 6, 6)), Tensor(rnd(2, 2, 3, 3, seed=1))
  calls = [lambda x, w: x.max_pool2d((2, 2), padding=1, return_indices=True)[1], lambda x, w: x.avg_pool2d((3, 3), 2, ceil_mode=True),
           lambda x, w: x.conv_transpose2d(w, stride=2), lambda x, w: x.interpolate((4, 9)), lambda x, w: x.layernorm(),
           lambda x, w: type(x).einsum("nchw,ocij->nohw", x, w), lambda x, w: x.scaled_dot_product_attention(x, x, is_causal=True)]
  for fn in calls: np.testing.assert_array_equal(Tensor(fn(a.uop, b.uop)).numpy(), fn(a, b).numpy())   # a Tensor's arange is data: same values
  monkeypatch.setattr(UOp, "training", True, raising=False)
  with pytest.raises(NotImplementedError, match="seeded generator"): a.uop.dropout(0.5)

def test_cross_entropy_ignore_index():
  """PyTorch's ignore_index (default -100): those targets add nothing and the mean is over the others."""
  x, y = rnd(6, 4), np.array([0, 3, -100, 1, 2, -100], np.int32)
  lp = x.astype(np.float64) - np.log(np.exp(x.astype(np.float64)).sum(1, keepdims=True))
  keep = y != -100
  per = np.where(keep, -lp[np.arange(6), np.where(keep, y, 0)], 0)
  close(Tensor(x).cross_entropy(Tensor(y)), per.sum() / keep.sum(), 1e-5)
  close(Tensor(x).cross_entropy(Tensor(y), reduction="none"), per, 1e-5)
  y1 = np.where(keep, y, 1).astype(np.int32)   # another ignore_index: class 1
  close(Tensor(x).cross_entropy(Tensor(y1), ignore_index=1), -np.mean([lp[i, c] for i, c in enumerate(y1) if c != 1]), 1e-5)
  n, out = kernels(lambda: Tensor(x).cross_entropy(Tensor(y)))
  assert n <= 2, n
