"""tinygrad's surface beyond the core ops, each against a numpy reference (and PyTorch where installed): bitcast across
item sizes, Newton-Schulz and Muon, conv padding='same', LSTMCell, ConvTranspose1d, LayerNorm2d, Tensor.to_,
Tensor.from_blob, GlobalCounters.mem_used, DType.bitsize, TinyJit.jit_cache, Tensor.sequential, copy.deepcopy."""
import copy, gc
import numpy as np
import pytest
from morok_mlir import Tensor, TinyJit, dtypes, nn
from morok_mlir.nn.optim import Muon, SGD
from morok_mlir.realize import GlobalCounters

try: import torch
except ImportError: torch = None

def rnd(*shape, seed=0): return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
def raises_here(exc, fn, match=None):
  with pytest.raises(exc, match=match) as e: fn()
  assert f"{__file__}:{fn.__code__.co_firstlineno}:" in str(e.value), str(e.value)

# ---------------------------------------------------------------- bitcast across item sizes
BYTES = np.random.default_rng(0).integers(0, 256, (3, 48), dtype=np.uint8)
KINDS = [np.uint8, np.int8, np.int16, np.uint16, np.float16, np.int32, np.float32, np.uint32, np.int64, np.float64, np.uint64]

@pytest.mark.parametrize("src", [np.uint8, np.int16, np.float32, np.float64], ids=lambda t: np.dtype(t).name)
def test_bitcast_sizes(src):
  """The last dim changes (tinygrad's rule), as numpy's .view: the same bytes, little-endian, NaN payloads kept."""
  x = BYTES.view(src)
  for dst in KINDS:
    got = Tensor(x).bitcast(dtypes.from_np(dst)).numpy()
    want = x.view(dst)
    assert got.shape == want.shape and np.array_equal(got.view(np.uint8), want.view(np.uint8)), (src, dst)

def test_bitcast_sizes_lazy_and_strided():
  x = BYTES.view(np.int32)
  t = (Tensor(x) + 1)[:, ::2]   # computed, then a strided view: the bytes of the values, not of the memory
  want = (x + 1)[:, ::2].copy()
  assert np.array_equal(t.bitcast(dtypes.uint8).numpy(), want.view(np.uint8))
  assert np.array_equal(t.bitcast(dtypes.uint8).bitcast(dtypes.int64).numpy(), want.view(np.int64))
  assert np.array_equal(Tensor(x).bitcast(dtypes.float16).bitcast(dtypes.int32).numpy(), x)
  assert Tensor(np.zeros((2, 0), np.int32)).bitcast(dtypes.int8).shape == (2, 0)

def test_bitcast_sizes_refused():
  raises_here(TypeError, lambda: Tensor(np.zeros(3, np.uint8)).bitcast(dtypes.int32), match="equal item sizes")
  raises_here(RuntimeError, lambda: Tensor(np.zeros((2, 6), np.int16)).bitcast(dtypes.int64), match=r"shape \(2, 6\)")
  raises_here(TypeError, lambda: Tensor(np.float32(1)).bitcast(dtypes.float16), match="equal item sizes")   # 0-d: no last dim
  raises_here(TypeError, lambda: Tensor([True, False]).bitcast(dtypes.uint8), match="bool")

# ---------------------------------------------------------------- Newton-Schulz and Muon
NS = (3.4445, -4.7750, 2.0315)
def ns_ref(g: np.ndarray, steps: int, params, eps=1e-7) -> np.ndarray:
  """tinygrad's newton_schulz in float64: the wide side last, unit Frobenius norm, G = sum p_i (G G^T)^i G."""
  if g.shape[-2] > g.shape[-1]: return ns_ref(g.swapaxes(-1, -2), steps, params, eps).swapaxes(-1, -2)
  g = g / (np.sqrt((g ** 2).sum(axis=(-2, -1), keepdims=True)) + eps)
  for _ in range(steps):
    gram, term, acc = g @ g.swapaxes(-1, -2), g, params[0] * g
    for p in params[1:]: term = gram @ term; acc = acc + p * term
    g = acc
  return g

@pytest.mark.parametrize("shape", [(6, 9), (9, 6), (2, 5, 5)])
def test_newton_schulz(shape):
  g = rnd(*shape, seed=1)
  np.testing.assert_allclose(Tensor(g).newton_schulz(5, NS).numpy(), ns_ref(g.astype(np.float64), 5, NS), rtol=2e-4, atol=2e-5)
  # the classic cubic (1.5, -0.5) converges to the orthogonal polar factor: singular values 1
  q = Tensor(g).newton_schulz(30, (1.5, -0.5)).numpy()
  np.testing.assert_allclose(np.linalg.svd(q, compute_uv=False), 1.0, atol=1e-4)
  raises_here(ValueError, lambda: Tensor(g.reshape(-1)).newton_schulz(5, NS), match="two or more dims")

def muon_ref(w, grads, lr, momentum, wd, nesterov, params=NS):
  """tinygrad's Muon (LARS without trust ratio): weight decay, momentum (nesterov), the direction as a (dim 0, rest)
  matrix orthogonalized by 5 Newton-Schulz steps, then p -= lr * direction."""
  b = np.zeros_like(w)
  for g in grads:
    if wd: g = g + wd * w
    b = momentum * b + g
    g = g + momentum * b if nesterov else b
    w = w - lr * ns_ref(g.reshape(g.shape[0], -1), 5, params).reshape(g.shape)
  return w

@pytest.mark.parametrize("kw", [{}, dict(nesterov=False), dict(weight_decay=0.1, momentum=0.9), dict(lr=0.02, momentum=0.0)], ids=str)
def test_muon(kw):
  w0, w1 = rnd(8, 5, seed=2), rnd(4, 3, 2, seed=3)   # a conv-like weight is orthogonalized as (4, 6)
  grads = [(rnd(8, 5, seed=10 + i), rnd(4, 3, 2, seed=20 + i)) for i in range(3)]
  p0, p1 = Tensor(w0), Tensor(w1)
  opt = Muon([p0, p1], **kw)
  with Tensor.train():
    for g0, g1 in grads:
      p0.grad, p1.grad = Tensor(g0), Tensor(g1)
      opt.step()
  full = dict(lr=3e-3, momentum=0.96, wd=0.0, nesterov=True) | {("wd" if k == "weight_decay" else k): v for k, v in kw.items()}
  for p, w, gs in ((p0, w0, [g for g, _ in grads]), (p1, w1, [g for _, g in grads])):
    np.testing.assert_allclose(p.numpy(), muon_ref(w.astype(np.float64), [g.astype(np.float64) for g in gs], **full), rtol=1e-4, atol=1e-5)

def test_muon_trains_and_refuses_scalars():
  w = Tensor(rnd(6, 4, seed=4))
  x, y = Tensor(rnd(32, 6, seed=5)), Tensor(rnd(32, 4, seed=6))
  opt = Muon([w], lr=0.02)
  losses = []
  with Tensor.train():
    for _ in range(20):
      loss = ((x @ w - y) ** 2).mean()
      opt.zero_grad(); loss.backward(); opt.step()
      losses.append(loss.item())
  assert losses[-1] < 0.8 * losses[0]
  raises_here(ValueError, lambda: Muon([Tensor(1.0)]), match="0-d")
  assert isinstance(Muon([Tensor(rnd(2, 2))]), SGD)

# ---------------------------------------------------------------- conv padding='same'
def conv_ref(x, w, pads, dilation):
  """Direct NC(H)(W) cross-correlation in float64 of x zero-padded by pads ((before, after) per spatial dim)."""
  x = np.pad(x.astype(np.float64), ((0, 0), (0, 0), *pads))
  k, d = w.shape[2:], dilation
  out_sp = tuple(x.shape[2 + i] - d[i] * (k[i] - 1) for i in range(len(k)))
  out = np.zeros((x.shape[0], w.shape[0], *out_sp))
  for idx in np.ndindex(*k):
    sl = tuple(slice(d[i] * idx[i], d[i] * idx[i] + out_sp[i]) for i in range(len(k)))
    out += np.einsum("nc...,oc->no...", x[(slice(None), slice(None)) + sl], w[(slice(None), slice(None)) + idx])
  return out

@pytest.mark.parametrize("k,dil", [((3, 3), (1, 1)), ((4, 2), (1, 1)), ((2, 3), (3, 2)), ((4, 4), (2, 1))], ids=str)
def test_conv2d_padding_same(k, dil):
  """The output keeps the input's size: d*(k-1) of padding per dim, the odd one after (right/bottom), as PyTorch."""
  x, w = rnd(2, 3, 9, 8, seed=7), rnd(4, 3, *k, seed=8)
  pads = [(d * (kk - 1) // 2, d * (kk - 1) - d * (kk - 1) // 2) for kk, d in zip(k, dil)]
  got = Tensor(x).conv2d(Tensor(w), padding="same", dilation=dil).numpy()
  assert got.shape == (2, 4, 9, 8)
  np.testing.assert_allclose(got, conv_ref(x, w, pads, dil), rtol=1e-4, atol=1e-4)
  if torch is not None:
    want = torch.nn.functional.conv2d(torch.from_numpy(x), torch.from_numpy(w), padding="same", dilation=dil).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
  valid = Tensor(x).conv2d(Tensor(w), padding="valid", dilation=dil).numpy()
  np.testing.assert_allclose(valid, conv_ref(x, w, [(0, 0)] * 2, dil), rtol=1e-4, atol=1e-4)

def test_conv_layers_padding_same():
  x1 = rnd(2, 3, 11, seed=9)
  c1 = nn.Conv1d(3, 5, 4, padding="same", dilation=3)
  np.testing.assert_allclose(c1(Tensor(x1)).numpy(), conv_ref(x1, c1.weight.numpy(), [(4, 5)], (3,)) + c1.bias.numpy()[:, None], rtol=1e-4, atol=1e-4)
  x2 = rnd(1, 2, 6, 7, seed=10)
  c2 = nn.Conv2d(2, 3, (2, 3), padding="same", bias=False)
  np.testing.assert_allclose(c2(Tensor(x2)).numpy(), conv_ref(x2, c2.weight.numpy(), [(0, 1), (1, 1)], (1, 1)), rtol=1e-4, atol=1e-4)
  raises_here(ValueError, lambda: Tensor(x2).conv2d(Tensor(rnd(3, 2, 3, 3)), stride=2, padding="same"), match="strided")
  raises_here(ValueError, lambda: Tensor(x2).conv2d(Tensor(rnd(3, 2, 3, 3)), padding="full"), match="'same' or 'valid'")

# ---------------------------------------------------------------- layers
def sigmoid(x): return 1 / (1 + np.exp(-x))

def test_lstm_cell():
  cell = nn.LSTMCell(3, 4)
  assert cell.weight_ih.shape == (16, 3) and cell.weight_hh.shape == (16, 4) and np.abs(cell.weight_ih.numpy()).max() <= 0.5
  cell.bias_ih, cell.bias_hh = Tensor(rnd(16, seed=11)), Tensor(rnd(16, seed=12))
  wi, wh, bi, bh = (t.numpy().astype(np.float64) for t in (cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh))
  x, h, c = rnd(5, 3, seed=13), rnd(5, 4, seed=14), rnd(5, 4, seed=15)
  def ref(x, h, c):
    i, f, g, o = np.split(x @ wi.T + bi + h @ wh.T + bh, 4, axis=1)
    c = sigmoid(f) * c + sigmoid(i) * np.tanh(g)
    return sigmoid(o) * np.tanh(c), c
  for got, want in zip(cell(Tensor(x), (Tensor(h), Tensor(c))), ref(x, h, c)): np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
  for got, want in zip(cell(Tensor(x)), ref(x, np.zeros((5, 4)), np.zeros((5, 4)))):
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
  if torch is not None:
    t = torch.nn.LSTMCell(3, 4)
    with torch.no_grad():
      for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh"): getattr(t, name).copy_(torch.from_numpy(getattr(cell, name).numpy()))
      want = t(torch.from_numpy(x), (torch.from_numpy(h), torch.from_numpy(c)))
    for got, w in zip(cell(Tensor(x), (Tensor(h), Tensor(c))), want): np.testing.assert_allclose(got.numpy(), w.numpy(), rtol=1e-5, atol=1e-5)
  assert nn.LSTMCell(3, 4, bias=False).bias_ih is None
  raises_here(ValueError, lambda: cell(Tensor(rnd(5, 4))), match="LSTMCell")

def test_conv_transpose1d():
  ct = nn.ConvTranspose1d(2, 6, 3, stride=2, padding=1, output_padding=1, groups=2)
  assert ct.weight.shape == (2, 3, 3) and ct.bias.shape == (6,)
  x, w, b = rnd(2, 2, 5, seed=16), ct.weight.numpy().astype(np.float64), ct.bias.numpy()
  full = np.zeros((2, 6, (5 - 1) * 2 + 3 + 1))   # scatter each input position's kernel into the output, then cut the padding
  for n, ci, l, k in np.ndindex(2, 2, 5, 3):
    full[n, ci * 3:(ci + 1) * 3, 2 * l + k] += x[n, ci, l] * w[ci, :, k]
  want = full[:, :, 1:1 + (5 - 1) * 2 - 2 + 3 + 1] + b[:, None]
  np.testing.assert_allclose(ct(Tensor(x)).numpy(), want, rtol=1e-5, atol=1e-5)

def test_layernorm2d():
  ln = nn.LayerNorm2d(3)
  ln.weight, ln.bias = Tensor(rnd(3, seed=17)), Tensor(rnd(3, seed=18))
  x = rnd(2, 3, 4, 5, seed=19).astype(np.float64)
  m, v = x.mean(1, keepdims=True), x.var(1, keepdims=True)
  want = (x - m) / np.sqrt(v + 1e-5) * ln.weight.numpy()[:, None, None] + ln.bias.numpy()[:, None, None]
  np.testing.assert_allclose(ln(Tensor(x.astype(np.float32))).numpy(), want, rtol=1e-4, atol=1e-5)
  raises_here(ValueError, lambda: ln(Tensor(rnd(3, 4, 5))), match="NCHW")

# ---------------------------------------------------------------- tensors, counters, jit
def test_to_in_place():
  t = Tensor(rnd(3))
  t.grad = Tensor(rnd(3, seed=1))
  assert t.to_("cpu") is t and t.device == "CPU" and t.grad.device == "CPU"
  np.testing.assert_array_equal(t.numpy(), rnd(3))

def test_from_blob():
  a = np.arange(12, dtype=np.int32)
  t = Tensor.from_blob(a.ctypes.data, (3, 4), dtype=dtypes.int32)
  assert t.shape == (3, 4) and t.dtype is dtypes.int32
  np.testing.assert_array_equal((t * 2).numpy(), a.reshape(3, 4) * 2)
  f = np.linspace(0, 1, 6, dtype=np.float32)
  np.testing.assert_array_equal(Tensor.from_blob(f.ctypes.data, (6,)).numpy(), f)   # float32 by default
  raises_here(TypeError, lambda: Tensor.from_blob("0x10", (2,)), match="address")

def test_mem_used():
  """Bytes held by live buffers: a realized 1 MiB tensor adds its size, and gives it back when it dies."""
  gc.collect()
  gc.disable()   # no other test's garbage is collected (and its memory given back) in between
  try:
    before = GlobalCounters.mem_used
    t = (Tensor.ones(512, 512) + 1).realize()
    held = GlobalCounters.mem_used
    del t
    assert held - before >= 512 * 512 * 4 and held - GlobalCounters.mem_used >= 512 * 512 * 4
  finally: gc.enable()

def test_bitsize():
  assert [d.bitsize for d in (dtypes.bool, dtypes.int8, dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.int64)] == [1, 8, 16, 16, 32, 64]

def test_jit_cache():
  @TinyJit
  def f(a, b): return ((a + b).relu().sum(1) * 2).realize()
  assert f.jit_cache == []
  for i in range(3): out = f(Tensor(rnd(4, 5, seed=i)), Tensor(rnd(4, 5, seed=10 + i)))
  np.testing.assert_allclose(out.numpy(), np.maximum(rnd(4, 5, seed=2) + rnd(4, 5, seed=12), 0).sum(1) * 2, rtol=1e-5)
  assert len(f.jit_cache) >= 1 and all(isinstance(ji.prg.name, str) and isinstance(ji.bufs, list) for ji in f.jit_cache)
  assert None in f.jit_cache[-1].bufs   # the output leaves the call: a fresh buffer each replay
  f.reset()
  assert f.jit_cache == []

def test_sequential_and_deepcopy():
  l1, l2 = nn.Linear(3, 4), nn.Linear(4, 2)
  x = Tensor(rnd(2, 3))
  np.testing.assert_allclose(x.sequential([l1, Tensor.relu, l2]).numpy(), l2(l1(x).relu()).numpy(), rtol=1e-6)
  t = Tensor(rnd(3), requires_grad=True)
  c = copy.deepcopy(t)
  assert c is not t and c.requires_grad and np.array_equal(c.numpy(), t.numpy())
