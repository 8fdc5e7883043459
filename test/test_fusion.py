"""Kernel counts for the fusion cases users expect from tinygrad, and the caches of the realize driver."""
import numpy as np, pytest
from morok_mlir import Tensor
from morok_mlir.realize import GlobalCounters

def kernels(fn, *arrays):
  ts = [Tensor(a) for a in arrays]
  GlobalCounters.reset()
  out = fn(*ts).numpy()
  return GlobalCounters.kernel_count, out

rng = np.random.default_rng(0)
A, B, C = (rng.standard_normal((16, 32)).astype(np.float32) for _ in range(3))
V = rng.standard_normal(32).astype(np.float32)

@pytest.mark.parametrize("name,fn,ref,n", [
  ("elementwise chain", lambda a, b, c: ((a * b + c).relu() * 2 - a).exp(),
   lambda a, b, c: np.exp(np.maximum(a * b + c, 0) * 2 - a), 1),
  ("elementwise into reduce", lambda a, b, c: (a * b + c).sum(axis=1), lambda a, b, c: (a * b + c).sum(1), 1),
  ("x - x.max(axis, keepdim)", lambda a, b, c: a - a.max(axis=1, keepdim=True), lambda a, b, c: a - a.max(1, keepdims=True), 1),
  ("softmax", lambda a, b, c: a.softmax(axis=1), lambda a, b, c: np.exp(a - a.max(1, keepdims=True)) / np.exp(a - a.max(1, keepdims=True)).sum(1, keepdims=True), 1),
  ("permute+shrink+flip+reshape", lambda a, b, c: a.T[2:10].flip(0).reshape(4, 2, 16) + 1, lambda a, b, c: a.T[2:10][::-1].reshape(4, 2, 16) + 1, 1),
  # an output that is a contiguous() (a clone) is computed into its own buffer, not stored elsewhere and copied
  ("(a * b).contiguous()", lambda a, b, c: (a * b).contiguous(), lambda a, b, c: a * b, 1),
  ("clone", lambda a, b, c: a.clone(), lambda a, b, c: a, 1),
  ("contiguous of a reduce", lambda a, b, c: a.sum(1).contiguous(), lambda a, b, c: a.sum(1), 1),
])
def test_fusion_kernel_count(name, fn, ref, n):
  count, out = kernels(fn, A, B, C)
  assert count == n, f"{name}: {count} kernels, expected {n}"
  np.testing.assert_allclose(out, ref(A, B, C), rtol=1e-5, atol=1e-5)

def test_broadcast_chain_one_kernel():
  count, out = kernels(lambda a, v: (a + v) * a - v.exp(), A, V)
  assert count == 1
  np.testing.assert_allclose(out, (A + V) * A - np.exp(V), rtol=1e-5, atol=1e-5)

def test_column_max_takes_two_kernels():
  # the max along rows is broadcast along the outer loop: materialised, then consumed
  count, out = kernels(lambda a: a - a.max(axis=0, keepdim=True), A)
  assert count == 2
  np.testing.assert_allclose(out, A - A.max(0, keepdims=True))

def test_mlp_kernels():
  x, w1, w2 = (rng.standard_normal(s).astype(np.float32) for s in ((8, 12), (12, 16), (16, 4)))
  count, out = kernels(lambda x, w1, w2: (x @ w1).relu() @ w2, x, w1, w2)
  assert count == 2  # one per contraction: the relu fuses into the second matmul's loads
  np.testing.assert_allclose(out, np.maximum(x @ w1, 0) @ w2, rtol=1e-4, atol=1e-4)

def test_schedule_cache_reuses_compiled_schedule():
  a, b = (rng.standard_normal((5, 7)).astype(np.float32) for _ in range(2))
  f = lambda x, y: (x * y + 3).sum(axis=0)
  kernels(f, a, b)
  GlobalCounters.reset()
  out = f(Tensor(b), Tensor(a)).numpy()     # same structure, different buffers
  assert GlobalCounters.compiled == 0 and GlobalCounters.kernel_count == 1
  np.testing.assert_allclose(out, (b * a + 3).sum(0), rtol=1e-5)

def test_materialised_reduce_is_never_also_recomputed():
  # logits are needed both directly and inside log_softmax's max/sum, where they must be materialised: every use
  # then loads them, whichever use the walk meets first (3 kernels, and the last has no contraction in it)
  from morok_mlir.realize import _schedule_cache
  x, w = rng.standard_normal((8, 12)).astype(np.float32), rng.standard_normal((12, 5)).astype(np.float32)
  count, out = kernels(lambda x, w: (x @ w).log_softmax(axis=1), x, w)
  ref = x @ w; ref = ref - ref.max(1, keepdims=True); ref = ref - np.log(np.exp(ref).sum(1, keepdims=True))
  np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
  assert count == 2
  last = list(_schedule_cache.values())[-1].items[-1].name
  assert last.startswith("r_8_5_") and "_12" not in last, last  # no reduce over the contraction's k (12) in it

def test_cat_of_products_runs_each_product_once():
  """cat(a @ b, c @ d): each product is a kernel of its own (a contraction) and the cat copies them; inlined under
  the cat's gates, both products were computed at every output place (17x the work, no micro-kernel)."""
  rng = np.random.default_rng(0)
  a, b, c, d = (rng.standard_normal((96, 80), dtype=np.float32) for _ in range(4))
  GlobalCounters.reset()
  out = (Tensor(a) @ Tensor(b.T)).cat(Tensor(c) @ Tensor(d.T), dim=1).pad(((1, 0), (0, 2))).numpy()
  assert GlobalCounters.kernel_count == 3
  np.testing.assert_allclose(out, np.pad(np.concatenate([a @ b.T, c @ d.T], 1), ((1, 0), (0, 2))), rtol=1e-4, atol=1e-4)

def test_epilogue_chain_is_stored_by_its_products_kernel():
  """relu(x @ w1 + b1) @ w2 + b2, log_softmax: the bias and relu run in the first product's kernel (the chain on top
  of it is what gets stored), so the second product loads its operand as is; 3 kernels, the last without a product."""
  from morok_mlir.realize import _schedule_cache
  r = np.random.default_rng(1)
  x, w1, b1, w2, b2 = (r.standard_normal(s, dtype=np.float32) for s in ((64, 96), (96, 128), (128,), (128, 10), (10,)))
  count, out = kernels(lambda x, w1, b1, w2, b2: ((x @ w1 + b1).relu() @ w2 + b2).log_softmax(axis=1), x, w1, b1, w2, b2)
  h = np.maximum(x @ w1 + b1, 0) @ w2 + b2
  h = h - h.max(1, keepdims=True)
  np.testing.assert_allclose(out, h - np.log(np.exp(h).sum(1, keepdims=True)), rtol=1e-4, atol=1e-4)
  assert count == 3
  sched = list(_schedule_cache.values())[-1]
  assert [len(sched.buffer_types) - sched.n_in - sched.n_out] == [2]   # the relu'd hidden layer and the logits

def test_two_products_in_one_sum_take_a_kernel_each():
  """a @ b + c @ d: a kernel tiles one contraction, so the second product is stored by its own kernel (inlined
  together, neither ran as a contraction: resnet50's residual blocks ran 40x slower)."""
  r = np.random.default_rng(2)
  a, b, c, d = (r.standard_normal((64, 64), dtype=np.float32) for _ in range(4))
  count, out = kernels(lambda a, b, c, d: (a @ b + c @ d).relu(), a, b, c, d)
  assert count == 2
  np.testing.assert_allclose(out, np.maximum(a @ b + c @ d, 0), rtol=1e-4, atol=1e-4)

def test_training_step_stores_each_pre_activation_once():
  """Gradients of relu(x @ w1 + b1) @ w2 + b2 under cross-entropy: the pre-activation (read by the relu, its mask and
  the second product) is stored by the first product's kernel; its relu and mask are recomputed where read, not each
  stored by an elementwise kernel of their own (4 such kernels over the hidden layer before)."""
  from morok_mlir.realize import _schedule_cache
  r = np.random.default_rng(3)
  x, w1, b1, w2, b2 = (r.standard_normal(s, dtype=np.float32) * 0.1 for s in ((128, 160), (160, 192), (192,), (192, 10), (10,)))
  y = r.integers(0, 10, 128)
  P = [Tensor(v, requires_grad=True) for v in (w1, b1, w2, b2)]
  ((Tensor(x) @ P[0] + P[1]).relu() @ P[2] + P[3]).cross_entropy(Tensor(y.astype(np.int32))).backward()
  Tensor.realize(*[p.grad for p in P])
  names = [it.name for it in list(_schedule_cache.values())[-1].items]
  assert not [n for n in names if n.startswith("E_128_192")], names
  h = x @ w1 + b1; a = np.maximum(h, 0); z = a @ w2 + b2
  e = np.exp(z - z.max(1, keepdims=True)); dz = (e / e.sum(1, keepdims=True) - np.eye(10)[y]) / len(x)
  dh = (dz @ w2.T) * (h > 0)
  for p, g in zip(P, (x.T @ dh, dh.sum(0), a.T @ dz, dz.sum(0))): np.testing.assert_allclose(p.grad.numpy(), g, rtol=1e-4, atol=1e-5)

def test_grouped_conv_epilogue_keeps_its_groups():
  """relu(bn(grouped 1x1 conv)) read by a 3x3 depthwise conv: the grouped conv's kernel stores the relu (the depthwise
  conv reads it, not recomputing bn and relu per tap) and runs as a batch of products, each group's channels times its
  image (stored as (channels, ...) with the channel split back into group and channel: split_groups); as one
  matrix-vector product per channel it was 10x slower (shufflenet)."""
  import re
  r = np.random.default_rng(4)
  x, w1, w2 = r.standard_normal((1, 64, 28, 28), dtype=np.float32), r.standard_normal((64, 16, 1, 1), dtype=np.float32), \
    r.standard_normal((64, 1, 3, 3), dtype=np.float32)
  t = (Tensor(x).conv2d(Tensor(w1), groups=4) * 0.5 + 0.1).relu().conv2d(Tensor(w2), groups=64, padding=1)
  ks = re.findall(r"func.func private @(\S+)\(.*?attributes \{([^}]*)\}", t.mlir("uop-optimize"))
  assert len(ks) == 2 and "uop.contraction" in ks[0][1], ks
  out = t.numpy()
  g = np.einsum("gchw,goc->gohw", x.reshape(4, 16, 28, 28), w1.reshape(4, 16, 16)).reshape(1, 64, 28, 28)
  h = np.pad(np.maximum(g * 0.5 + 0.1, 0), ((0, 0), (0, 0), (1, 1), (1, 1)))
  ref = sum(h[:, :, i:i + 28, j:j + 28] * w2[:, 0, i, j][None, :, None, None] for i in range(3) for j in range(3))
  np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)

def test_cat_read_by_a_product_is_stored_part_by_part():
  """relu(cat of 5 parts) -> 1x1 conv: read inside the product's reduce range, the cat would select among all its
  parts for every element packed; it is stored once, each part into its slice (a kernel each), and the conv reads it."""
  from morok_mlir.realize import _schedule_cache
  r = np.random.default_rng(5)
  xs = [r.standard_normal((1, c, 14, 14), dtype=np.float32) for c in (64, 32, 32, 32, 32)]
  w = r.standard_normal((128, 192, 1, 1), dtype=np.float32) * 0.1
  count, out = kernels(lambda w, *xs: Tensor.cat(*xs, dim=1).relu().conv2d(w), w, *xs)
  names = [it.name for it in list(_schedule_cache.values())[-1].items]
  assert count == 6 and names[0].startswith("E_192_14_14") and all(n.startswith("E_32_14_14") for n in names[1:5]), names
  np.testing.assert_allclose(out, np.einsum("nchw,oc->nohw", np.maximum(np.concatenate(xs, 1), 0), w[:, :, 0, 0]), rtol=1e-4, atol=1e-4)
  # a cat of two parts, and one not read by a reduce, stay inline
  count, out = kernels(lambda a, b: Tensor.cat(a, b, dim=1).relu(), xs[1], xs[2])
  assert count == 1

def test_nested_cats_copy_the_stored_one():
  """densenet's pattern, c_k = cat(c_{k-1}, x_k), each read by a 1x1 conv: a stored cat is one part of the next (copied
  whole), not taken apart again, so each layer adds two copy kernels, not one per part."""
  r = np.random.default_rng(6)
  xs = [r.standard_normal((1, 16, 8, 8), dtype=np.float32) for _ in range(5)]
  ws = [r.standard_normal((8, 16 * (k + 1), 1, 1), dtype=np.float32) * 0.1 for k in range(5)]
  def net(*ts):
    c, outs = ts[0], []
    for k in range(1, 5):
      c = Tensor.cat(c, ts[k], dim=1)
      outs.append(c.relu().conv2d(ts[5 + k]).sum())
    return Tensor.stack(*outs)
  count, out = kernels(net, *xs, *ws)
  ref, c = [], xs[0]
  for k in range(1, 5):
    c = np.concatenate([c, xs[k]], 1)
    ref.append(np.einsum("nchw,oc->nohw", np.maximum(c, 0), ws[k][:, :, 0, 0]).sum())
  np.testing.assert_allclose(out, ref, rtol=1e-3, atol=1e-3)
  assert count <= 4 + 3 + 2 + 2 + 4, count   # 4 convs (+ sums), the 3-part cat, then two copies per cat

def test_residual_block_outputs_are_stored_by_their_products_kernels():
  """Residual blocks y = relu(conv(y) + shortcut), the first shortcut a conv too: each block's output is stored by its
  conv's kernel (the sum of two products is an epilogue of one; the other is stored by its own kernel) and read as is by
  the next block's conv and residual add. Before, a block output counted as a few ops over stored products, so every
  reader recomputed the chain of all earlier blocks (resnet50's convolutions packed four buffers per element)."""
  from morok_mlir.realize import _schedule_cache
  r = np.random.default_rng(4)
  x = r.standard_normal((1, 32, 16, 16), dtype=np.float32)
  ws = [r.standard_normal(s, dtype=np.float32) * 0.1 for s in ((32, 32, 1, 1), (32, 32, 1, 1), (32, 32, 3, 3), (32, 32, 3, 3), (8, 32, 1, 1))]
  def net(x, w1, w2, w3, w4, w5):
    y = (x.conv2d(w1) + x.conv2d(w2)).relu()
    for w in (w3, w4): y = (y.conv2d(w, padding=1) + y).relu()
    return y.conv2d(w5)
  _schedule_cache.clear()
  count, out = kernels(net, x, *ws)
  assert count == 5, count   # one kernel per conv: the block outputs never take an elementwise kernel of their own
  sched = list(_schedule_cache.values())[-1]
  reads = [[s for s in it.slots[1:] if s >= sched.n_in + sched.n_out] for it in sched.items]
  assert all(len(x) <= 1 for x in reads), reads   # a block's conv reads the block before as one stored buffer
  def conv(a, w, p=0):   # stride 1, square kernel, same-size output where p = k // 2
    k, h, wd = w.shape[2], a.shape[2] + 2 * p - w.shape[2] + 1, a.shape[3] + 2 * p - w.shape[3] + 1
    a = np.pad(a, ((0, 0), (0, 0), (p, p), (p, p)))
    return sum(np.einsum("nchw,oc->nohw", a[:, :, i:i + h, j:j + wd], w[:, :, i, j]) for i in range(k) for j in range(k))
  y = np.maximum(conv(x, ws[0]) + conv(x, ws[1]), 0)
  for w in ws[2:4]: y = np.maximum(conv(y, w, 1) + y, 0)
  np.testing.assert_allclose(out, conv(y, ws[4]), rtol=1e-4, atol=1e-4)

def test_contiguous_output_read_by_another_output():
  """A contiguous() that another output reads as well: computed once (stored, then copied to its output), read there."""
  a = Tensor(A)
  y = (a * 2).exp().contiguous()
  Tensor.realize(y, z := y.T + 1)
  np.testing.assert_allclose(y.numpy(), np.exp(A * 2), rtol=1e-5)
  np.testing.assert_allclose(z.numpy(), np.exp(A * 2).T + 1, rtol=1e-5)

@pytest.mark.parametrize("hw", [(14, 14), (7, 9), (1, 5)])
def test_merged_loops_beside_channel_shuffle(hw):
  """A row's span merges into one loop while the channel is indexed through div and mod (a concat of parts read by
  channel, a channel shuffle), with a per-channel scale and a residual; against numpy."""
  h, w = hw
  a, b, r = (rng.standard_normal((1, c, h, w)).astype(np.float32) for c in (12, 4, 16))
  s = rng.standard_normal((1, 16, 1, 1)).astype(np.float32)
  def shuffle(x, g): return x.reshape(1, g, x.shape[1] // g, h, w).permute(0, 2, 1, 3, 4).reshape(1, x.shape[1], h, w)
  got = (shuffle(Tensor(a).cat(Tensor(b), dim=1) * Tensor(s), 4) + Tensor(r)).relu()
  want = np.maximum((np.concatenate([a, b], 1) * s).reshape(1, 4, 4, h, w).transpose(0, 2, 1, 3, 4).reshape(1, 16, h, w) + r, 0)
  np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)

@pytest.mark.parametrize("shape", [(1, 40, 13, 13), (2, 3, 5, 7), (1, 17, 1, 9), (3, 2, 33, 31)])
def test_merged_reduce_ranges(shape):
  """Reduces over neighbouring axes that address as one contiguous span sum one range (uop-optimize merge_loops: a
  global average pool); through slices, pads, permutes and NaNs, and as max, every answer is numpy's."""
  x = rng.standard_normal(shape).astype(np.float32)
  X = Tensor(x)
  np.testing.assert_allclose(X.relu().mean((2, 3)).numpy(), np.maximum(x, 0).mean((2, 3)), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(X.sum((1, 2, 3), keepdim=True).numpy(), x.sum((1, 2, 3), keepdims=True), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(X[..., 1:].sum((2, 3)).numpy(), x[..., 1:].sum((2, 3)), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(X.pad(((0, 0), (0, 0), (1, 0), (0, 2))).max((2, 3)).numpy(), np.pad(x, ((0, 0), (0, 0), (1, 0), (0, 2))).max((2, 3)))
  np.testing.assert_allclose(X.permute(0, 1, 3, 2).sum((2, 3)).numpy(), x.sum((2, 3)), rtol=1e-5, atol=1e-5)
  y = x.copy(); y[0, 0, -1, -1] = np.nan
  assert np.isnan(Tensor(y).max((2, 3)).numpy()[0, 0]) and np.array_equal(Tensor(y).max((2, 3)).numpy()[:, 1:], y.max((2, 3))[:, 1:])

@pytest.mark.parametrize("shape", [(4, 14, 14), (2, 3, 5, 7), (1, 256, 7, 7), (3, 1, 9)])
def test_merged_loops_elementwise(shape):
  """Elementwise kernels over contiguous spans run as one loop (uop-optimize merge_loops); with per-channel
  parameters, slices, pads and permutes in the mix the loops that cannot merge stay, and every answer is numpy's."""
  x = rng.standard_normal(shape).astype(np.float32)
  b = rng.standard_normal(shape[:2] + (1,) * (len(shape) - 2)).astype(np.float32)
  X, Bt = Tensor(x), Tensor(b)
  np.testing.assert_allclose((X * 2 + 1).relu().numpy(), np.maximum(x * 2 + 1, 0), rtol=1e-6)
  np.testing.assert_allclose((X + Bt).numpy(), x + b, rtol=1e-6)
  pads = [(0, 0)] * (len(shape) - 1) + [(1, 2)]
  np.testing.assert_allclose(X.pad(tuple(pads)).exp().numpy(), np.exp(np.pad(x, pads)), rtol=1e-6)
  np.testing.assert_allclose((X[..., 1:] * X[..., :-1]).numpy(), x[..., 1:] * x[..., :-1], rtol=1e-6)
  perm = tuple(range(len(shape)))[::-1]
  np.testing.assert_allclose((X.permute(*perm) + 1).numpy(), x.transpose(perm) + 1, rtol=1e-6)

def test_transcendental_value_shared_by_a_pool_is_stored_once():
  """A biased SiLU (an add, an exp2, a reciprocal: few ops, but dear ones, rangeify.OP_COST) read by two kernels, a 5x5
  max pool and the cat a 1x1 convolution reads (a detector's SPPF), is stored once by a kernel of its own: the pool
  reads it, where computing it inline would redo it per window tap, 25 times an element. (Read once an element, as an
  optimizer's updates read theirs, the same ops stay inline: test_training_step_stores_each_pre_activation_once.)"""
  x, b = rng.standard_normal((1, 8, 12, 12)).astype(np.float32), rng.standard_normal((8, 1, 1)).astype(np.float32)
  w = rng.standard_normal((8, 32, 1, 1)).astype(np.float32)
  def sppf(act):
    y = act(Tensor(x) + Tensor(b))
    p1 = y.max_pool2d(kernel_size=5, stride=1, padding=2)
    return y.cat(p1, p1.max_pool2d(kernel_size=5, stride=1, padding=2), dim=1).conv2d(Tensor(w[:, :24]))
  silu = kernels_text(sppf(lambda t: t.silu()))
  assert sum("uop.exp2" in k for k in silu) == 1 and not any("uop.exp2" in k for k in silu if "_5_5_" in k.split("(")[0])
  y = (x + b) * (1 / (1 + np.exp(-(x + b))))
  pool = lambda v: np.max(np.stack([np.pad(v, ((0, 0), (0, 0), (2, 2), (2, 2)), constant_values=-np.inf)[:, :, i:i + 12, j:j + 12]
                                    for i in range(5) for j in range(5)]), 0)
  cat = np.concatenate([y, pool(y), pool(pool(y))], 1)
  np.testing.assert_allclose(sppf(lambda t: t.silu()).numpy(), np.einsum("oc,nchw->nohw", w[:, :24, 0, 0], cat), rtol=1e-4, atol=1e-4)

def kernels_text(t: Tensor) -> list[str]:
  """The text of each kernel function t's graph lowers to (uop-optimize's stage)."""
  return t.mlir("uop-optimize").split("func.func private @")[1:]

def test_matrix_vector_product_reads_its_vector_stored_once():
  """(x / c) @ W.T, a pool's sums divided by the window's count before a classifier: the division is the same for every
  output, so its own kernel computes it once (2 kernels) instead of the product's once per weight; 8 outputs of 64
  recompute it (1 kernel); a softmax row's sum, one value for the row, keeps the row one kernel."""
  x, c, w = rng.standard_normal(1024).astype(np.float32), np.array([49.0], np.float32), rng.standard_normal((1000, 1024)).astype(np.float32)
  count, out = kernels(lambda x, c, w: (x / c.expand(1024)) @ w.T, x, c, w)
  assert count == 2
  np.testing.assert_allclose(out, (x.astype(np.float64) / 49) @ w.T.astype(np.float64), rtol=1e-4, atol=1e-4)
  count, out = kernels(lambda x, c, w: (x / c.expand(64)) @ w.T, x[:64], c, w[:8, :64])
  assert count == 1
  np.testing.assert_allclose(out, (x[:64].astype(np.float64) / 49) @ w[:8, :64].T.astype(np.float64), rtol=1e-4, atol=1e-4)
  count, out = kernels(lambda x: x.softmax(-1), x[None])
  assert count == 1
  e = np.exp(x - x.max())
  np.testing.assert_allclose(out, (e / e.sum())[None], rtol=1e-5, atol=1e-7)
