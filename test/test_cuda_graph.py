"""The CUDA runtime's caching allocator, pinned host copies and TinyJit's CUDA graphs, on the fake driver of
test_cuda.py (which runs kernels through the CPU emulator and graphs node by node)."""
import numpy as np
import pytest
from morok_mlir import Tensor, TinyJit, Variable
from morok_mlir.core.dtype import dtypes
from morok_mlir.device import cuda
from morok_mlir.device.cuda import CUDAGraph
from test_cuda import fake_cuda, gpu  # noqa: F401 (the fixture)

def rnd(*s, seed=0): return np.random.default_rng(seed).standard_normal(s).astype(np.float32)

def test_allocator_reuses_blocks_by_size_class(fake_cuda):
  dev, fake = fake_cuda
  al = dev.allocator
  a = al.alloc(1000, "float32")                  # 4000 bytes: a block of 4096
  p = a.ptr
  al.free(a)
  assert al.pooled == 4096 and (4096, p) in al.pool
  b = al.alloc(1010, "float32")                  # 4040 bytes: the same class, the same block
  assert b.ptr == p and al.pooled == 0 and len(fake.mem) == 1
  c = al.alloc(1100, "float32")                  # 4400 bytes: the next class (4608), a new block
  assert c.ptr != p and fake.mem[c.ptr].nbytes == 4608
  assert [cuda.size_class(n) for n in (1, 512, 513, 1 << 20, (1 << 20) + 1, 3 << 20)] == [512, 512, 1024, 1 << 20, (1 << 20) + (1 << 17), 3 << 20]

def test_allocator_orders_reuse_by_stream(fake_cuda):
  """A block freed while work on its stream is pending goes to work queued later on that stream at once, to another
  stream only once that work is done."""
  dev, fake = fake_cuda
  al = dev.allocator
  keep = al.alloc(10, "float32")                 # (the device's stream allocates)
  s2 = cuda.check(fake.cuStreamCreate(0), "cuStreamCreate")
  a = al.alloc(256, "float32", stream=s2)
  p = a.ptr
  fake.busy.add(s2)                              # a kernel queued on s2 reading a still runs
  al.free(a)
  b = al.alloc(256, "float32")                   # the device's stream: not the block s2's work may still use
  assert b.ptr != p
  c = al.alloc(256, "float32", stream=s2)        # s2 again: ordered after that work, the block is reused
  assert c.ptr == p
  al.free(c)
  d = al.alloc(256, "float32")
  assert d.ptr != p
  cuda.check(fake.cuStreamSynchronize(s2), "cuStreamSynchronize")   # s2's work done: any stream may reuse it
  assert al.alloc(256, "float32").ptr == p
  del keep

def test_allocator_empty_cache_and_limit(fake_cuda):
  dev, fake = fake_cuda
  al = dev.allocator
  bufs = [al.alloc(1024, "float32") for _ in range(3)]   # 4096 bytes each
  ptrs = [b.ptr for b in bufs]
  al.limit = 8192
  for b in bufs: al.free(b)
  assert al.pooled == 8192 and ptrs[0] not in fake.mem and all(p in fake.mem for p in ptrs[1:])   # least recently freed goes
  live = al.alloc(100, "float32")
  al.empty_cache()
  assert al.pooled == 0 and not al.pool and list(fake.mem) == [live.ptr]

def test_pinned_copies_round_trip(fake_cuda, monkeypatch):
  """Host copies in pieces through two reused pinned staging buffers; the source may change once copyin returns."""
  dev, fake = fake_cuda
  al = dev.allocator
  monkeypatch.setattr(al, "STAGE", 4096)
  x = rnd(10_000)                                # 40000 bytes: 10 pieces
  buf = al.from_numpy(x)
  x0, x[:] = x.copy(), 0
  assert np.array_equal(al.to_numpy(buf), x0)
  assert len(fake.pinned) == 2 and fake.pinned_copies == fake.copies["HtoD"] + fake.copies["DtoH"] == 20
  y = np.arange(5, dtype=np.float32)
  assert np.array_equal(al.to_numpy(al.from_numpy(y)), y) and len(fake.pinned) == 2

def test_pinned_copies_fall_back_when_pinning_fails(fake_cuda):
  dev, fake = fake_cuda
  fake.fail.add("cuMemHostAlloc")
  x = rnd(3, 1000)
  np.testing.assert_array_equal((Tensor(x).to("CUDA") * 2).numpy(), x * 2)
  assert not dev.allocator.pinned and fake.pinned_copies == 0 and fake.copies["HtoD"] == fake.copies["DtoH"] == 1

def _graphs(f) -> list[CUDAGraph]: return [s for s in f.plan.run if type(s) is CUDAGraph]

def test_tinyjit_replays_one_cuda_graph(fake_cuda):
  """Each replay on CUDA is one cuGraphLaunch of all the call's kernels, no kernel launched alone; the graph is built
  once, and a replay sets the new arguments' and outputs' pointers in it."""
  _, fake = fake_cuda
  w = Tensor(rnd(64, 32, seed=9)).to("CUDA").realize()
  @TinyJit
  def f(a, b):
    h = ((a @ w).relu() + b).contiguous().realize()
    return (h - h.max(1, keepdim=True)).exp().sum(1)
  graphs, built = None, None
  for i in range(6):
    a, b = rnd(8, 64, seed=i), rnd(8, 32, seed=10 + i)
    ta, tb = Tensor(a).to("CUDA").realize(), Tensor(b).to("CUDA").realize()
    direct, launched = fake.direct, fake.graph_launches
    got = f(ta, tb)
    h = np.maximum(a @ rnd(64, 32, seed=9), 0) + b
    np.testing.assert_allclose(got.numpy(), np.exp(h - h.max(1, keepdims=True)).sum(1), rtol=1e-5)
    if i < 2: continue   # recorded calls: run normally
    assert fake.graph_launches == launched + 1 and fake.direct == direct
    if graphs is None:
      graphs = _graphs(f)
      assert len(graphs) == 1 and len(graphs[0].kernels) == f.plan.nkernels >= 2
      built, sets = graphs[0].exec, fake.node_sets
    assert _graphs(f) == graphs and graphs[0].exec is built
  assert fake.node_sets > sets   # the later replays' new pointers went into the instantiated graph

def test_tinyjit_cuda_graph_symbolic(fake_cuda):
  """Replays at several values of a Variable, each one launch of the same graph: the kernels read the call's value from
  the values' buffer written before the launch, the results right at each value."""
  _, fake = fake_cuda
  S = rnd(16, 16, seed=3)
  x = Tensor(S).to("CUDA").realize()
  v = Variable("n_graph", 1, 16)
  @TinyJit
  def f(a, n): return (a[:n, :n] * 2).sum(0) + n
  execs = set()
  for i, k in enumerate((3, 9, 1, 16, 5, 9)):
    launched = fake.graph_launches
    got = f(x, v.bind(k))
    assert fake.graph_launches == launched + (i >= 2)
    if i >= 2: execs.add(id(_graphs(f)[0].exec))
    np.testing.assert_allclose(got.numpy(), (S[:k, :k] * 2).sum(0) + k, rtol=1e-5)
    vals = [int(fake.mem[a].view(np.int64)[0]) for a, arg in zip(fake.launches[-1][3], fake.launch_specs[-1].args) if arg == (1, dtypes.int64)]
    assert vals == [k]
  assert len(_graphs(f)) == 1 and fake.graph_launches == 4 and len(execs) == 1   # instantiated once for every value

def _two_kernels() -> TinyJit:
  """A jitted call of two kernels, 3a then its sum + 1, as the graph tests replay it."""
  return TinyJit(lambda a: ((a * 3).contiguous().realize() + 1).sum())
def _replay(f, fake, i: int) -> int:
  """f on the i-th input, checked; the graph launches the call added."""
  x = rnd(100, seed=i)
  t = Tensor(x).to("CUDA").realize()
  launched = fake.graph_launches
  np.testing.assert_allclose(f(t).numpy(), (x * 3 + 1).sum(), rtol=1e-5)
  return fake.graph_launches - launched

def test_tinyjit_cuda_graph_update_refused_builds_again(fake_cuda):
  _, fake = fake_cuda
  f = _two_kernels()
  execs = []
  for i in range(5):
    if i == 3: fake.fail.add("cuGraphExecKernelNodeSetParams")
    launched = _replay(f, fake, i)
    if i >= 2: assert launched == 1; execs.append(_graphs(f)[0].exec)
  assert execs[0] is not execs[1] is not execs[2] and _graphs(f)[0].failed is None   # instantiated anew each refused update

def test_cuda_graph_with_cuda13_names(fake_cuda, monkeypatch):
  """cuda-bindings 13 has no cuGraphInstantiateWithFlags: its cuGraphInstantiate takes (graph, flags). Replays still run
  as one graph launch."""
  _, fake = fake_cuda
  monkeypatch.setattr(type(fake), "cuGraphInstantiate", type(fake).cuGraphInstantiateWithFlags, raising=False)
  monkeypatch.delattr(type(fake), "cuGraphInstantiateWithFlags")
  f = _two_kernels()
  for i in range(4):
    launched = _replay(f, fake, i)
    if i >= 2: assert launched == 1
  assert _graphs(f)[0].failed is None

def test_tinyjit_cuda_graph_failure_falls_back(fake_cuda):
  """A graph the driver refuses: a warning naming the call, then the kernels launched one by one, right results."""
  _, fake = fake_cuda
  fake.fail.add("cuGraphInstantiateWithFlags")
  f = _two_kernels()
  for i in range(5):
    x = rnd(100, seed=i)
    t = Tensor(x).to("CUDA").realize()
    direct = fake.direct
    if i == 2:
      with pytest.warns(RuntimeWarning, match=r"test_cuda_graph.py:\d+:\d+: TinyJit on CUDA: 2 kernels are launched one by one: "
                                              r"their CUDA graph failed \(cuGraphInstantiateWithFlags: CUDA_ERROR_INVALID_VALUE"):
        got = f(t)
    else: got = f(t)
    np.testing.assert_allclose(got.numpy(), (x * 3 + 1).sum(), rtol=1e-5)
    assert fake.direct == direct + 2
  assert fake.graph_launches == 0 and _graphs(f)[0].failed is not None

@gpu
def test_tinyjit_cuda_graph_on_gpu():
  """On a GPU: a jitted function's replays through one CUDA graph, against numpy; pinned copies both ways."""
  x = rnd(1 << 20)
  np.testing.assert_array_equal(cuda.CUDA.allocator.to_numpy(cuda.CUDA.allocator.from_numpy(x)), x)
  @TinyJit
  def f(a, b): return ((a * b).contiguous().realize() + 1).sum(1)
  for i in range(5):
    a, b = rnd(64, 256, seed=i), rnd(64, 256, seed=9 + i)
    np.testing.assert_allclose(f(Tensor(a).to("CUDA").realize(), Tensor(b).to("CUDA").realize()).numpy(), (a * b + 1).sum(1), rtol=1e-4)
  assert [g.failed for g in _graphs(f)] == [None]
