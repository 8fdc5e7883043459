"""uop-elide-copies (passes/copy_elide.py): a kernel copying a whole intermediate into a run of another is dropped, the
source becoming a view of the destination (the memory planner places it there); densenet's chains of concatenations
against numpy, with no copy of an intermediate left; the planner's views; a disk entry's views checked."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from morok_mlir import Tensor
from morok_mlir.device import Device, memory
from morok_mlir.host import VIEW_ALIGN
from morok_mlir.ir.emit import graph_func, normalize
from morok_mlir.passes import copy_elide
from morok_mlir.core.dtype import dtypes
from morok_mlir.core.uop import UOp, attrs
from morok_mlir.dialects.ops import Ops
import morok_mlir.realize as R

def dense_block(x: np.ndarray, ws: list[np.ndarray]) -> tuple[Tensor, np.ndarray]:
  """densenet's features: each layer concatenates a 1x1 convolution of relu(everything so far) to it."""
  t, ref = Tensor(x), x.astype(np.float64)
  for w in ws:
    t = t.cat(t.relu().conv2d(Tensor(w)), dim=1)
    ref = np.concatenate([ref, np.einsum("oc,nchw->nohw", w[:, :, 0, 0], np.maximum(ref, 0))], 1)
  return t, ref

def copies_of_intermediates(outs: list[Tensor]) -> tuple[int, dict]:
  """The kernels of outs' schedule that still copy an intermediate whole into another, and the views made."""
  funcs, sched = R._kernels(graph_func(normalize([t.uop for t in outs])[0]), Device["CPU"], 0, None, 0)
  first = sched.attrs["uop.num_inputs"] + sched.attrs["uop.num_outputs"]
  left = 0
  for c in sched.roots[0].src:
    if (cp := copy_elide.copy_of(funcs[c.attrs["callee"][1]])) is not None:
      left += min(c.attrs["slots"][cp[0]], c.attrs["slots"][cp[1]]) >= first
  vw = sched.attrs.get("uop.views", ())
  return left, {s: (d, o) for s, d, o in zip(vw[::3], vw[1::3], vw[2::3])}

@pytest.mark.parametrize("hw,layers", [(8, 4), (7, 3), (5, 5)])
def test_dense_block(hw, layers):
  """Each layer's features land in the block's concatenation where they are computed: its copies are dropped, the
  values numpy's (7x7 and 5x5: views at offsets of 64-byte multiples only; the others keep their copies)."""
  r = np.random.default_rng(hw)
  x = r.standard_normal((1, 16, hw, hw)).astype(np.float32)
  ws = [(r.standard_normal((16, 16 * (i + 1), 1, 1)) * 0.3).astype(np.float32) for i in range(layers)]
  wf = (r.standard_normal((8, 16 * (layers + 1), 1, 1)) * 0.3).astype(np.float32)
  t, ref = dense_block(x, ws)
  out = t.relu().conv2d(Tensor(wf))   # (the block's last concatenation an intermediate too)
  left, views = copies_of_intermediates([out])
  assert views and all(o * 4 % VIEW_ALIGN == 0 for _, o in views.values())
  if hw == 8: assert left == 0
  got = out.numpy()
  np.testing.assert_allclose(got, np.einsum("oc,nchw->nohw", wf[:, :, 0, 0], np.maximum(ref, 0)), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(t.numpy(), ref, rtol=1e-4, atol=1e-4)

def test_block_output_copies_the_stored_concatenation_whole():
  """A block's last concatenation as the output: the one before it, in a buffer already, is copied as one part, not
  again from each layer's features (densenet's pieces: 12-24 copy kernels each before)."""
  r = np.random.default_rng(3)
  x = r.standard_normal((1, 16, 8, 8)).astype(np.float32)
  ws = [(r.standard_normal((16, 16 * (i + 1), 1, 1)) * 0.3).astype(np.float32) for i in range(4)]
  t, ref = dense_block(x, ws)
  funcs, sched = R._kernels(graph_func(normalize([t.uop])[0]), Device["CPU"], 0, None, 0)
  out_slot = sched.attrs["uop.num_inputs"]
  writers = [c for c in sched.roots[0].src if c.attrs["slots"][0] == out_slot]
  assert len(writers) == 2   # the concatenation before the last layer, and the last layer's features
  np.testing.assert_allclose(t.numpy(), ref, rtol=1e-4, atol=1e-4)

@settings(max_examples=60, deadline=None)
@given(st.data())
def test_plan_places_views_inside_their_buffers(data):
  """Random lifetimes and views (chains included): a view lies at its buffer's offset plus its own; buffers live at once
  never overlap, a view counting as live wherever it is used."""
  n = data.draw(st.integers(2, 9))
  nbytes = [data.draw(st.integers(1, 40)) * 64 for _ in range(n)]
  views = {}
  for b in range(n):
    if data.draw(st.booleans()) and (cands := [d for d in range(b + 1, n) if nbytes[d] >= nbytes[b]]):
      d = data.draw(st.sampled_from(cands))
      views[b] = (d, data.draw(st.integers(0, (nbytes[d] - nbytes[b]) // 64)) * 64)
  uses = [sorted(set(data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=3)))) for _ in range(data.draw(st.integers(1, 8)))]
  offs, top = memory.plan(uses, nbytes, views)
  for b, (d, o) in views.items(): assert offs[b] == offs[d] + o and offs[b] + nbytes[b] <= offs[d] + nbytes[d]
  root = lambda b: root(views[b][0]) if b in views else b
  span = {}
  for k, bs in enumerate(uses):
    for b in bs: lo, hi = span.get(root(b), (k, k)); span[root(b)] = (min(lo, k), max(hi, k))
  roots = [b for b in range(n) if b not in views]
  for b in roots: assert offs[b] + nbytes[b] <= top
  for i, a in enumerate(roots):
    for b in roots[i + 1:]:
      la, ha = span.get(a, (0, len(uses))); lb, hb = span.get(b, (0, len(uses)))
      if la <= hb and lb <= ha: assert offs[a] + nbytes[a] <= offs[b] or offs[b] + nbytes[b] <= offs[a]

def _bufs(*sizes):
  return [UOp(Ops.BUFFER, dtypes.float32.ptr(n), (), attrs(slot=i)) for i, n in enumerate(sizes)]

def test_disk_views_checked():
  """A disk entry's views (untrusted): inside their buffer, aligned, between intermediates, one per source, no cycle."""
  bts = _bufs(64, 64, 256, 128, 64)   # an input, an output, then intermediates 2..4
  assert R._views([[4, 2, 32], [3, 2, 128]], bts, 2) == {4: (2, 32), 3: (2, 128)}
  for bad in ([[4, 2, 224]], [[4, 2, 8]], [[0, 2, 0]], [[4, 1, 0]], [[4, 2, 0], [4, 3, 0]], [[4, 3, 0], [3, 4, 0]], [[4, 4, 0]], [[4, 2, -16]]):
    with pytest.raises(ValueError): R._views(bad, bts, 2)

@settings(max_examples=40, deadline=None)
@given(st.data())
def test_random_concatenations_against_numpy(data):
  """Random graphs of concatenations along channels (of inputs, computed values and other concatenations, one value in
  several; densenet's layers), 1x1 convolutions, relus, sums and channel slices, realized together: numpy's values,
  whatever copies the pass dropped."""
  hw = data.draw(st.sampled_from([4, 5, 8]))
  rng = np.random.default_rng(data.draw(st.integers(0, 1 << 16)))
  pool = [(Tensor(x), x.astype(np.float64)) for x in (rng.standard_normal((1, c, hw, hw)).astype(np.float32) for c in (4, 8))]
  pick = lambda: data.draw(st.sampled_from(pool[-3:] if data.draw(st.booleans()) else pool))   # (recent values: chains, as densenet's)
  for _ in range(data.draw(st.integers(3, 9))):
    op = data.draw(st.sampled_from(["cat", "dense", "dense", "dense", "conv", "relu", "add", "slice"]))
    (a, na), (b, nb) = pick(), pick()
    if op == "cat":
      parts = [pick() for _ in range(data.draw(st.integers(1, 2)))]
      pool.append((a.cat(*[t for t, _ in parts], dim=1), np.concatenate([na, *[n for _, n in parts]], 1)))
    elif op == "conv":
      w = (rng.standard_normal((data.draw(st.sampled_from([4, 8, 12])), a.shape[1], 1, 1)) * 0.3).astype(np.float32)
      pool.append((a.conv2d(Tensor(w)), np.einsum("oc,nchw->nohw", w[:, :, 0, 0], na)))
    elif op == "dense":   # layers of a.cat(conv(relu(a))): densenet's block
      for _ in range(data.draw(st.integers(1, 4))):
        w = (rng.standard_normal((4, a.shape[1], 1, 1)) * 0.3).astype(np.float32)
        a, na = a.cat(a.relu().conv2d(Tensor(w)), dim=1), np.concatenate([na, np.einsum("oc,nchw->nohw", w[:, :, 0, 0], np.maximum(na, 0))], 1)
      pool.append((a, na))
    elif op == "relu": pool.append((a.relu(), np.maximum(na, 0)))
    elif op == "add" and a.shape == b.shape: pool.append((a + b, na + nb))
    elif op == "slice" and a.shape[1] > 4: pool.append((a[:, 2:a.shape[1] - 1], na[:, 2:na.shape[1] - 1]))
  outs = list({id(t): (t, n) for t, n in data.draw(st.lists(st.sampled_from(pool[2:] or pool), min_size=1, max_size=3))}.values())
  if data.draw(st.booleans()):   # the last value read by a product, as a block's next layer reads its features
    (a, na), w = pool[-1], (rng.standard_normal((4, pool[-1][0].shape[1], 1, 1)) * 0.3).astype(np.float32)
    outs.append((a.relu().conv2d(Tensor(w)), np.einsum("oc,nchw->nohw", w[:, :, 0, 0], np.maximum(na, 0))))
  Tensor.realize(*[t for t, _ in outs])
  for t, n in outs: np.testing.assert_allclose(t.numpy(), n, rtol=1e-4, atol=1e-4)

def test_fill_after_the_writes_of_a_views_views():
  """y = conv(x0), three dense layers on y (the first's features an output too), then cat(x1, the features, y) read by
  a product. The second layer's features become a view of the last cat, y and a layer's new channels views of those
  features; the last cat's first part (x1) is padded over all of it by a kernel that runs after y's writer: the copy
  of the features into the cat must stay (dropped, its fill's zeros overwrote y, written through a view of a view)."""
  r = np.random.default_rng(5)
  x0, x1 = r.standard_normal((1, 4, 8, 8)).astype(np.float32), r.standard_normal((1, 8, 8, 8)).astype(np.float32)
  w = lambda o, i: (r.standard_normal((o, i, 1, 1)) * 0.3).astype(np.float32)
  conv = lambda n, wt: np.einsum("oc,nchw->nohw", wt[:, :, 0, 0], n)
  w0 = w(8, 4)
  y, ny = Tensor(x0).conv2d(Tensor(w0)), conv(x0.astype(np.float64), w0)
  f, nf, layers = y, ny, []
  for _ in range(3):
    wl = w(4, f.shape[1])
    f, nf = f.cat(f.relu().conv2d(Tensor(wl)), dim=1), np.concatenate([nf, conv(np.maximum(nf, 0), wl)], 1)
    layers.append((f, nf))
  c, nc = Tensor(x1).cat(f, y, dim=1), np.concatenate([x1, nf, ny], 1)
  wf = w(4, c.shape[1])
  out = c.relu().conv2d(Tensor(wf))
  Tensor.realize(layers[0][0], out)   # (the first layer's features an output too)
  np.testing.assert_allclose(layers[0][0].numpy(), layers[0][1], rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(out.numpy(), conv(np.maximum(nc, 0), wf), rtol=1e-4, atol=1e-4)

def test_dense_block_under_tinyjit():
  """A dense block replayed by TinyJit on new inputs: the plan's arena holds the views where the schedule placed them."""
  from morok_mlir import TinyJit
  r = np.random.default_rng(9)
  ws = [(r.standard_normal((16, 16 * (i + 1), 1, 1)) * 0.3).astype(np.float32) for i in range(3)]
  wf = (r.standard_normal((8, 64, 1, 1)) * 0.3).astype(np.float32)
  @TinyJit
  def block(x: Tensor) -> Tensor:
    t = x
    for w in ws: t = t.cat(t.relu().conv2d(Tensor(w)), dim=1)
    return t.relu().conv2d(Tensor(wf)).realize()
  for _ in range(5):
    x = r.standard_normal((1, 16, 8, 8)).astype(np.float32)
    _, ref = dense_block(x, ws)
    np.testing.assert_allclose(block(Tensor(x)).numpy(), np.einsum("oc,nchw->nohw", wf[:, :, 0, 0], np.maximum(ref, 0)), rtol=1e-4, atol=1e-4)
  assert block.plan is not None
