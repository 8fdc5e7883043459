"""The CUDA device: its runtime on a fake driver (host memory; kernels run by the CPU emulator of GPU kernels), and on
a GPU: memory, copies, launches, errors, and the Tensor differential suite against numpy. The GPU tests are skipped,
with the reason, where cuda-python, libcuda or a GPU is missing (PTX generation is tested without one in
test_gpu_lowering.py). The whole Tensor suite runs on CUDA with `DEVICE=CUDA pytest test/test_tensor_ops.py`."""
import ctypes, gc, itertools
import numpy as np
import pytest
from morok_mlir import Tensor
from morok_mlir.device import cuda, Device
from morok_mlir.device.buffer import Buffer
from morok_mlir.device.cuda import available, CUDA, CUDAError, CUDAProgram, CompiledSpec

OK, WHY = available()
gpu = pytest.mark.skipif(not OK, reason=f"no CUDA GPU: {WHY}")

# ---------------------------------------------------------------- a fake driver: no GPU needed
class FakeDriver:
  """Just enough of cuda-python's driver API, backed by host memory, to run the runtime's logic without a GPU. It counts
  copies by direction; a kernel whose "PTX" is `// fake <n>` (see FakeCompiler) runs through the CPU emulator, at once.
  Work on a stream in `busy` has not finished: an event recorded there stays pending until that stream or the event is
  synchronized. CUDA graphs: a graph is a list of kernel nodes (their parameter values copied when added or set, as the
  driver does), instantiating copies it, launching one runs its nodes in order. A call named in `fail` returns an error.
Time is a clock that each kernel run advances by `kernel_ms(spec)` (a test sets it): an event records it, and
cuEventElapsedTime is the difference."""
  class CUdevice_attribute: CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 0, 1
  class CUDA_KERNEL_NODE_PARAMS: pass
  def __init__(self, capacity=1 << 30):
    self.mem, self.capacity, self.launches, self.launch_specs, self.specs, self.programs = {}, capacity, [], [], {}, {}
    self.copies = {"HtoD": 0, "DtoH": 0, "DtoD": 0}
    self.pinned, self.pinned_copies, self.streams, self.busy, self.fail = {}, 0, itertools.count(), set(), set()
    self.direct, self.graph_launches, self.node_sets = 0, 0, 0   # cuLaunchKernel calls, cuGraphLaunch calls, node updates
    self.clock, self.kernel_ms = 0.0, lambda spec: 0.01
  def _ok(self, *v): return (0, *v)
  def __getattribute__(self, name):
    if name.startswith("cu") and name in object.__getattribute__(self, "fail"): return lambda *a: (1, None)
    return object.__getattribute__(self, name)
  def cuInit(self, flags): return self._ok()
  def cuDeviceGetCount(self): return self._ok(1)
  def cuDeviceGet(self, i): return self._ok(i)
  def cuDeviceGetAttribute(self, a, dev): return self._ok((8, 6)[a])
  def cuDevicePrimaryCtxRetain(self, dev): return self._ok("ctx")
  def cuCtxSetCurrent(self, ctx): return self._ok()
  def cuStreamCreate(self, flags): return self._ok(f"stream{next(self.streams)}")
  def cuStreamSynchronize(self, s): self.busy.discard(s); return self._ok()
  def cuEventCreate(self, flags): return self._ok({"stream": None})
  def cuEventRecord(self, ev, s): ev["stream"], ev["t"] = (s if s in self.busy else None), self.clock; return self._ok()
  def cuEventElapsedTime(self, start, end): return self._ok(end["t"] - start["t"])
  def cuEventDestroy(self, ev): return self._ok()
  def cuEventQuery(self, ev): return (600,) if ev["stream"] in self.busy else self._ok()
  def cuEventSynchronize(self, ev): self.busy.discard(ev["stream"]); return self._ok()
  def cuGetErrorName(self, e):
    return self._ok({1: b"CUDA_ERROR_INVALID_VALUE", 2: b"CUDA_ERROR_OUT_OF_MEMORY", 218: b"CUDA_ERROR_INVALID_PTX"}[e])
  def cuGetErrorString(self, e): return self._ok(b"the driver said no")
  # (a real driver is thread-safe: the fake's tables are read as snapshots, list() of a dict taken whole under the GIL,
  # so threads allocating and freeing meanwhile never change one mid-iteration)
  def cuMemAlloc(self, n):
    if sum(a.nbytes for a in list(self.mem.values())) + n > self.capacity: return (2, None)
    a = np.zeros(n, np.uint8); self.mem[a.ctypes.data] = a; return self._ok(a.ctypes.data)
  def cuMemFree(self, p): del self.mem[p]; return self._ok()
  def cuMemHostAlloc(self, n, flags): a = np.zeros(n, np.uint8); self.pinned[a.ctypes.data] = a; return self._ok(a.ctypes.data)
  def cuMemFreeHost(self, p): del self.pinned[p]; return self._ok()
  def _copy(self, kind, dst, src, n):
    host = src if kind == "HtoD" else dst
    self.pinned_copies += any(p <= host and host + n <= p + a.nbytes for p, a in list(self.pinned.items()))
    self.copies[kind] += 1; ctypes.memmove(dst, src, n); return self._ok()
  def cuMemcpyHtoD(self, d, s, n): return self._copy("HtoD", d, s, n)
  def cuMemcpyDtoH(self, d, s, n): return self._copy("DtoH", d, s, n)
  def cuMemcpyHtoDAsync(self, d, s, n, stream): return self._copy("HtoD", d, s, n)
  def cuMemcpyDtoHAsync(self, d, s, n, stream): return self._copy("DtoH", d, s, n)
  def cuMemcpyDtoDAsync(self, d, s, n, stream): return self._copy("DtoD", d, s, n)
  def cuModuleLoadData(self, image): return self._ok(image[:-1].decode()) if image.startswith(b"//") else (218, None)
  def cuModuleGetFunction(self, mod, name): return self._ok((mod, name))
  def cuModuleUnload(self, mod): return self._ok()
  def _args(self, fn, params) -> list[int]:
    spec = self.specs.get(fn[0])
    ptrs = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))
    return [ctypes.c_void_p.from_address(ptrs[i]).value for i in range(len(spec.args) if spec else len(self.launch_args))]
  def _run(self, fn, grid, block, addrs):
    self.launches.append((fn[1], grid, block, addrs)); self.launch_specs.append(self.specs.get(fn[0]))
    self.clock += self.kernel_ms(self.specs.get(fn[0]))
    if (spec := self.specs.get(fn[0])) is not None:
      from morok_mlir.device.gpu_emulator import kernel_program
      if (p := self.programs.get(fn[0])) is None: p = self.programs[fn[0]] = kernel_program(spec)
      p.call_ptrs(*addrs)
  def cuLaunchKernel(self, fn, gx, gy, gz, lx, ly, lz, shm, stream, params, extra):
    self.direct += 1; self._run(fn, (gx, gy, gz), (lx, ly, lz), self._args(fn, params)); return self._ok()
  def _node(self, p):
    return {"fn": p.func, "grid": (p.gridDimX, p.gridDimY, p.gridDimZ), "block": (p.blockDimX, p.blockDimY, p.blockDimZ),
            "args": self._args(p.func, p.kernelParams)}
  def cuGraphCreate(self, flags): return self._ok([])
  def cuGraphAddKernelNode(self, g, deps, n, p):
    assert len(deps) == n and all(any(d is x for x in g) for d in deps)
    g.append(node := self._node(p)); return self._ok(node)
  def cuGraphInstantiateWithFlags(self, g, flags): return self._ok({"graph": g, "nodes": [dict(x) for x in g]})
  def cuGraphExecKernelNodeSetParams(self, e, node, p):
    i = next(i for i, x in enumerate(e["graph"]) if x is node)
    assert e["nodes"][i]["fn"] == p.func   # (a node's kernel cannot change in an instantiated graph)
    self.node_sets += 1; e["nodes"][i] = self._node(p); return self._ok()
  def cuGraphLaunch(self, e, stream):
    self.graph_launches += 1
    for x in e["nodes"]: self._run(x["fn"], x["grid"], x["block"], x["args"])
    return self._ok()
  def cuGraphExecDestroy(self, e): return self._ok()
  def cuGraphDestroy(self, g): return self._ok()

class FakeCompiler:
  """Registers the kernel with the fake driver instead of making PTX (which only a GPU could run)."""
  ids = itertools.count()
  def __init__(self, fake: FakeDriver): self.fake = fake
  def compile(self, spec, chip):
    self.fake.specs[name := f"// fake {next(self.ids)}"] = spec
    return CompiledSpec(spec, name, chip)

@pytest.fixture
def fake_cuda(monkeypatch):
  """A fresh CUDA device on a FakeDriver that runs kernels, as Device["CUDA"], with fresh schedule and copy caches."""
  from morok_mlir import realize
  from morok_mlir.lru import LRU
  fake = FakeDriver()
  monkeypatch.setattr(cuda, "_drv", fake)
  dev = cuda.CUDADevice()
  dev.compiler = FakeCompiler(fake)
  monkeypatch.setattr(cuda, "CUDA", dev)
  monkeypatch.setattr(Device, "_found", {})
  monkeypatch.setattr(realize, "_schedule_cache", LRU(realize.schedule_nbytes))
  monkeypatch.setattr(realize, "_copies", type(realize._copies)())
  return dev, fake

def test_cuda_runtime_with_fake_driver(monkeypatch):
  fake = FakeDriver(capacity=10_240)
  monkeypatch.setattr(cuda, "_drv", fake)
  dev = cuda.CUDADevice()
  a = dev.allocator.from_numpy(np.arange(1000, dtype=np.float32))       # 4000 bytes: a block of 4096
  assert dev.chip == "sm_86" and np.array_equal(dev.allocator.to_numpy(a), np.arange(1000, dtype=np.float32))
  b = dev.allocator.alloc(1000, "float32"); dev.allocator.copy(b, a)
  assert np.array_equal(dev.allocator.to_numpy(b), np.arange(1000, dtype=np.float32))
  dev.allocator.free(b)
  c = dev.allocator.alloc(1500, "float32")                               # 6144 more: the cached block is released (LRU) to fit
  assert len(fake.mem) == 2 and dev.allocator.pooled == 0
  with pytest.raises(cuda.CUDAError, match=r"cuMemAlloc\(8192\): CUDA_ERROR_OUT_OF_MEMORY"): dev.allocator.alloc(2000, "float32")
  for x in (a, c): dev.allocator.free(x)
  (k,), _ = _kernels(Tensor(np.ones((8, 8), np.float32)) + 1)
  p = dev.compile(k)
  assert dev.compile(k) is p and list(dev.method_cache)[0][2] == "sm_86"
  x, out = dev.allocator.from_numpy(np.ones(64, np.float32)), dev.allocator.alloc(64, "float32")
  fake.launch_args = [0, 0]
  p(out, x)
  fn, g, l, ptrs = fake.launches[-1]
  assert fn == b"kernel" and g[0] * l[0] * 4 >= 64 and ptrs == [out.ptr, x.ptr]   # 4 outputs per thread (UPCAST)
  with pytest.raises(TypeError, match="not a CUDABuffer"): p(np.zeros(64, np.float32), x)
  with pytest.raises(cuda.CUDAError, match="loading kernel bad.*CUDA_ERROR_INVALID_PTX: the driver said no"):
    cuda.CUDAProgram(dev, cuda.CompiledSpec(p.spec, ".version 8.0", "sm_86"), "bad")

def test_tensors_stay_on_the_gpu(fake_cuda):
  """Three chained realizes on CUDA: the input crosses to the device once, the result comes back once, and nothing
  in between touches the host."""
  dev, fake = fake_cuda
  a = np.arange(-500, 500, dtype=np.float32).reshape(10, 100)
  x = Tensor(a).to("CUDA")
  y = (x + 1).realize()
  z = (y * 2).realize()
  w = (z - 3).realize()
  assert fake.copies == {"HtoD": 1, "DtoH": 0, "DtoD": 0} and len(fake.launches) >= 3
  assert all(t.uop.buffer.device == "CUDA" for t in (y, z, w))
  np.testing.assert_array_equal(w.numpy(), (a + 1) * 2 - 3)
  assert fake.copies == {"HtoD": 1, "DtoH": 1, "DtoD": 0}
  np.testing.assert_array_equal((x * 3).numpy(), a * 3)    # the input's device copy is kept: no second host->device
  np.testing.assert_array_equal(w.to("CPU").numpy(), (a + 1) * 2 - 3)
  assert fake.copies == {"HtoD": 1, "DtoH": 3, "DtoD": 0}   # each .numpy(), and .to("CPU"): device->host
  np.testing.assert_allclose((y.sum(axis=1) + z.max()).numpy(), (a + 1).sum(axis=1) + ((a + 1) * 2).max(), rtol=1e-6)

def test_dlpack_on_cuda_shares_device_memory(fake_cuda):
  """A CUDA tensor exports its device memory (kDLCUDA, read-only in a DLPack 1.x capsule; a legacy capsule gets a device
  copy) and Tensor.from_dlpack imports a foreign CUDA capsule without a copy; the producer's deleter runs once the
  importing tensor dies."""
  import gc
  from morok_mlir.device import dlpack
  dev, fake = fake_cuda
  gc.collect(); dlpack.sweep()
  n0, a = len(dlpack._alive), np.arange(12, dtype=np.float32).reshape(3, 4)
  x = (Tensor(a).to("CUDA") * 2).realize()
  assert x.__dlpack_device__() == (2, 0)
  class Foreign:   # a CUDA producer that is not a Tensor (as a torch CUDA tensor is to us)
    def __dlpack_device__(self): return (2, 0)
    def __dlpack__(self, stream=None, max_version=None): return x.__dlpack__(stream=stream, max_version=max_version)
  y = Tensor.from_dlpack(Foreign())
  assert y.device == "CUDA" and y.shape == (3, 4) and y.uop.buffer.ptr == x.uop.buffer.ptr
  copies = dict(fake.copies)
  np.testing.assert_array_equal((y + 1).numpy(), a * 2 + 1)
  assert fake.copies["HtoD"] == copies["HtoD"]   # the import moved nothing through the host
  legacy = dlpack.Imported(x.__dlpack__())
  assert legacy.ptr != x.uop.buffer.ptr and fake.copies["DtoD"] == copies["DtoD"] + 1
  legacy.release()
  z = Tensor.from_dlpack(Foreign())   # (y's buffer may stay in the caches of the graphs that read it)
  assert len(dlpack._alive) == n0 + 2
  del z
  gc.collect(); dlpack.sweep()
  assert len(dlpack._alive) == n0 + 1

def test_an_absent_gpu_fails_where_the_tensor_is_moved(monkeypatch):
  """.to("CUDA") and Tensor(..., device="CUDA") without a driver or GPU: one RuntimeError at the user's line, no chain."""
  def no_driver(): raise cuda.CUDAUnavailable("no CUDA driver (libcuda.so) found")
  monkeypatch.setattr(cuda, "driver", no_driver)
  monkeypatch.setattr(cuda, "CUDA", cuda.CUDADevice())
  monkeypatch.setattr(Device, "_found", {})
  with pytest.raises(RuntimeError, match=r"test_cuda.py:\d+:\d+: device 'CUDA' is not available: no CUDA driver") as e:
    Tensor([1.0, 2.0]).to("CUDA")
  assert e.value.__cause__ is None and e.value.__context__ is None
  with pytest.raises(RuntimeError, match=r"test_cuda.py:\d+:\d+: device 'cuda' is not available"): Tensor([1.0], device="cuda")

def test_buffers_on_fake_cuda(fake_cuda):
  dev, fake = fake_cuda
  a = np.arange(100, dtype=np.float32)
  b = Buffer("cuda", 100, "float32")
  assert b.device == "CUDA" and not b.is_allocated and b.nbytes == 400
  b.copyin(a)
  assert b.is_allocated and b.ptr in fake.mem and np.array_equal(b.numpy(), a)
  v = b.view(10, np.dtype("float32"), 40)                       # bytes 40..80: elements 10..19
  assert v.ptr == b.ptr + 40 and np.array_equal(v.copyout(), a[10:20])
  v.copyin(np.zeros(10, np.float32))
  assert np.array_equal(b.numpy()[8:22], np.r_[8, 9, [0] * 10, 20, 21])
  with pytest.raises(TypeError, match="not host memory"): b.as_numpy()
  h = b.copy_to("CPU")
  assert h.device == "CPU" and np.array_equal(h.as_numpy(), b.numpy())
  d = h.copy_to("CUDA")
  assert np.array_equal(d.numpy(), h.as_numpy()) and d.ptr != b.ptr

def test_memory_back_to_the_pool_fake_cuda(fake_cuda):
  """A realized tensor's device memory goes back to the allocator's pool when the last tensor using it dies."""
  dev, fake = fake_cuda
  x = Tensor(np.ones(1000, np.float32)).to("CUDA")
  y = (x + 1).realize()
  ptr = y.uop.buffer.ptr
  assert ptr in dev.allocator.live and (4096, ptr) not in dev.allocator.pool
  z = Tensor(y.uop, device="CUDA")          # a second tensor on the same buffer keeps it
  del y; gc.collect()
  assert ptr in dev.allocator.live
  del z; gc.collect()
  assert ptr not in dev.allocator.live and (4096, ptr) in dev.allocator.pool
  assert (x + 2).realize().uop.buffer.ptr == ptr   # and is handed out again
  v = Buffer("CUDA", 1000, "float32").allocate().view(10, np.dtype("float32"), 0)
  p = v.base.ptr
  assert p in dev.allocator.live
  del v; gc.collect()                      # the view held its base
  assert p not in dev.allocator.live

def test_realize_on_cuda_from_threads(fake_cuda):
  """Threads realizing chains on one shared input: each gets its own result, and the input crosses to the device at
  most once per thread racing to copy it first (one copy is kept)."""
  import sys, threading
  dev, fake = fake_cuda
  a = np.arange(4096, dtype=np.float32)
  y = Tensor(a + 1).to("CUDA")
  errors, old = [], sys.getswitchinterval()
  def work(t):
    try:
      for i in range(20):
        r = ((y + t) * 2).realize()
        if not np.array_equal(r.numpy(), (a + 1 + t) * 2): errors.append((t, i))
    except Exception as e: errors.append(repr(e))
  sys.setswitchinterval(1e-6)
  try:
    ts = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in ts: t.start()
    for t in ts: t.join()
  finally: sys.setswitchinterval(old)
  assert not errors, errors[:3]
  assert 1 <= fake.copies["HtoD"] <= 4 and fake.copies["DtoH"] == 80

# ---------------------------------------------------------------- on a GPU
@gpu
def test_memory_roundtrip():
  a = np.arange(1000, dtype=np.float32)
  buf = CUDA.allocator.from_numpy(a)
  other = CUDA.allocator.alloc(1000, "float32")
  CUDA.allocator.copy(other, buf)
  np.testing.assert_array_equal(CUDA.allocator.to_numpy(other), a)
  ptr = other.ptr
  CUDA.allocator.free(other)
  again = CUDA.allocator.alloc(1000, "float32")
  assert again.ptr == ptr                       # the pool hands the freed block back
  for b in (buf, again): CUDA.allocator.free(b)
  with pytest.raises(ValueError): CUDA.allocator.copyin(buf, np.zeros(3, np.float32))

def _kernels(t):
  from morok_mlir.ir.emit import normalize, graph_func
  from morok_mlir.ir.pipeline import lower_to_kernels
  key, inputs, _ = normalize([t.lazydata])
  return [f for f in lower_to_kernels(graph_func(key)) if "uop.kernel" in f.attrs], inputs

@gpu
def test_program_on_device_buffers():
  from morok_mlir import Tensor
  a = np.random.default_rng(0).random((64, 1024), dtype=np.float32)
  (k,), _ = _kernels(Tensor(a).sum(axis=1))
  p = CUDA.compile(k)
  assert CUDA.compile(k) is p                   # method cache
  out, inp = CUDA.allocator.alloc(64, "float32"), CUDA.allocator.from_numpy(a)
  assert p(out, inp, wait=True) > 0
  np.testing.assert_allclose(CUDA.allocator.to_numpy(out), a.sum(axis=1), rtol=1e-5)
  with pytest.raises(TypeError): p(out)
  with pytest.raises(ValueError): p(inp, out)

@gpu
def test_errors_name_the_kernel():
  from morok_mlir import Tensor
  (k,), _ = _kernels(Tensor(np.ones(8, np.float32)) + 1)
  spec = CUDA.renderer.render(k)
  with pytest.raises(CUDAError, match="loading kernel my_kernel.*CUDA_ERROR"):
    CUDA.init(); CUDAProgram(CUDA, CompiledSpec(spec, "garbage", CUDA.chip), "my_kernel")

CASES = {  # name: (tensor op, numpy op, input shapes)
  "add_broadcast": (lambda a, b: a + b, lambda a, b: a + b, [(64, 1000), (1000,)]),
  "exp_sqrt": (lambda a: (a * 2).exp().sqrt(), lambda a: np.sqrt(np.exp(a * 2)), [(7, 1000)]),
  "rowsum": (lambda a: a.sum(axis=1), lambda a: a.sum(axis=1), [(64, 1024)]),
  "colmax": (lambda a: a.max(axis=0), lambda a: a.max(axis=0), [(1000, 33)]),
  "fullsum": (lambda a: a.sum(), lambda a: a.sum(), [(1 << 20,)]),
  "softmax": (lambda a: a.softmax(axis=1), lambda a: np.exp(a - a.max(1, keepdims=True)) / np.exp(a - a.max(1, keepdims=True)).sum(1, keepdims=True), [(32, 512)]),
  "matmul": (lambda a, b: a @ b, lambda a, b: a @ b, [(256, 300), (300, 200)]),
  "small_matmul": (lambda a, b: a @ b, lambda a, b: a @ b, [(16, 512), (512, 16)]),
  "pad": (lambda a: a.pad(((1, 1), (2, 2))) * 3, lambda a: np.pad(a, ((1, 1), (2, 2))) * 3, [(33, 65)]),
  "argmax": (lambda a: a.argmax(axis=1), lambda a: a.argmax(axis=1), [(64, 1024)]),
  # what the first GPU run found or what was built after it: a 16 MiB elementwise output (the CPU's nontemporal stores
  # faulted on it), float % and // (no frem in NVVM), two-phase reduces, f32 contractions on FFMA tiles
  "big_elementwise": (lambda a: a * 2 + 1, lambda a: a * 2 + 1, [(1 << 22,)]),
  "mod_floordiv": (lambda a, b: a % (b + 3) + a // (b - 3), lambda a, b: np.mod(a, b + 3) + np.floor_divide(a, b - 3), [(4096,), (4096,)]),
  "split_mean": (lambda a: a.mean(), lambda a: a.astype(np.float64).mean(), [(1 << 22,)]),
  "split_rows_max": (lambda a: a.max(axis=1), lambda a: a.max(axis=1), [(4, 1 << 18)]),
  "conv_f32": (lambda x, w: x.conv2d(w, padding=1), lambda x, w: _conv_ref(x, w), [(2, 32, 20, 20), (48, 32, 3, 3)]),
  "batched_f32": (lambda a, b: a @ b, lambda a, b: a @ b, [(8, 128, 96), (8, 96, 130)]),
}
def _conv_ref(x: np.ndarray, w: np.ndarray) -> np.ndarray:   # a 3x3 convolution, padding 1, by shifted products
  xp, (_, _, H, W) = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))), x.shape
  return sum(np.einsum("nchw,oc->nohw", xp[:, :, i:i + H, j:j + W], w[:, :, i, j]) for i in range(3) for j in range(3))

@gpu
@pytest.mark.parametrize("name", list(CASES))
def test_differential(name, monkeypatch):
  from morok_mlir import Tensor
  from morok_mlir import realize
  from morok_mlir.device import Device
  monkeypatch.setattr(Device, "DEFAULT", "CUDA")
  monkeypatch.setattr(realize, "_schedule_cache", {})   # schedules compiled for the CPU must not be reused
  top, ref, shapes = CASES[name]
  xs = [np.random.default_rng(i).standard_normal(s).astype(np.float32) for i, s in enumerate(shapes)]
  out = top(*[Tensor(x) for x in xs]).numpy()
  want = ref(*xs)
  if out.dtype.kind == "f": np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
  else: np.testing.assert_array_equal(out, want.astype(out.dtype))

def test_tinyjit_replays_across_devices_fake_cuda(fake_cuda):
  """A replay on CUDA programs (call_buffers, not the CPU's prepared calls) with a CPU argument copied in each call
  (a copy step) and a CUDA constant."""
  from morok_mlir import TinyJit
  _, fake = fake_cuda
  w = Tensor(np.arange(16, dtype=np.float32)).to("CUDA").realize()
  @TinyJit
  def f(x): return (x.to("CUDA") * w + 1).sum()
  for i in range(5):
    x = np.random.default_rng(i).standard_normal(16).astype(np.float32)
    n = len(fake.launches)
    got = f(Tensor(x))
    assert got.device == "CUDA"
    np.testing.assert_allclose(got.numpy(), (x * np.arange(16) + 1).sum(), rtol=1e-5)
    assert len(fake.launches) > n
  from morok_mlir.jit import _Copy, _Kernel
  assert f.plan is not None and any(type(s) is _Copy for s in f.plan.steps) and all(s.args is None for s in f.plan.steps if type(s) is _Kernel)

def test_tinyjit_output_read_on_another_device_fake_cuda(fake_cuda):
  """A value realized on the CPU inside the call and read by a CUDA kernel after it: each replay copies its new value."""
  from morok_mlir import TinyJit
  @TinyJit
  def f(x):
    h = (x * 2).realize()
    return (h.to("CUDA") + 1).sum()
  for i in range(6):
    x = np.random.default_rng(i).standard_normal(32).astype(np.float32)
    np.testing.assert_allclose(f(Tensor(x)).numpy(), (x * 2 + 1).sum(), rtol=1e-5)
  assert f.plan is not None

def test_row_kernels_on_fake_cuda(fake_cuda):
  """Softmax and layernorm realized on CUDA: one ROW launch each (a block per row, launched as the GPU would be, the
  emulator running every thread of a block), against numpy."""
  dev, fake = fake_cuda
  x = np.random.default_rng(0).standard_normal((33, 515)).astype(np.float32)
  t = Tensor(x).to("CUDA").realize()
  n = len(fake.launches)
  sm, ln = t.softmax(-1).realize(), t.layernorm().realize()
  assert len(fake.launches) == n + 2 and all(g[0] == 33 and l[0] == 256 for _, g, l, _ in fake.launches[n:])
  e = np.exp(x - x.max(-1, keepdims=True))
  np.testing.assert_allclose(sm.numpy(), e / e.sum(-1, keepdims=True), rtol=2e-5, atol=1e-7)
  np.testing.assert_allclose(ln.numpy(), (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5), rtol=1e-4, atol=2e-5)

def test_leading_axis_reduces_on_fake_cuda(fake_cuda):
  """Integer and bool reduces over rows (uop-optimize's outer_reduce: rows a serial loop, each output accumulated in place)
  on CUDA: each thread runs its output's rows in order, against numpy."""
  x = np.random.default_rng(1).integers(-3, 4, (45, 70)).astype(np.int32)
  t = Tensor(x).to("CUDA").realize()
  np.testing.assert_array_equal(t.sum(0).numpy(), x.sum(0))
  np.testing.assert_array_equal((t.max(0) * 2).numpy(), x.max(0) * 2)
  np.testing.assert_array_equal((t > 0).any(0).numpy(), (x > 0).any(0))

def test_profile_times_each_kernel_on_the_gpu(fake_cuda):
  """CUDA.profile(): each kernel launched in the block gets its GPU time from a pair of events around it (the fake
  driver's clock: each kernel 0.25 ms), the host's time between launches left out."""
  dev, fake = fake_cuda
  fake.kernel_ms = lambda spec: 0.25
  x = Tensor(np.arange(64, dtype=np.float32)).to("CUDA").realize()
  n0 = len(fake.launches)
  with dev.profile() as p:
    y = ((x * 2).realize() + 1).sum().realize()
  assert len(p) == len(fake.launches) - n0 >= 2 and all(ms == 0.25 for _, ms in p) and all(isinstance(k, str) for k, _ in p)
  assert dev.prof is None and float(y.numpy()) == float((np.arange(64) * 2 + 1).sum())
  # a mode per thread: another thread's launches during the block are not timed in it
  import threading
  with dev.profile() as p:
    th = threading.Thread(target=lambda: (x * 3).realize()); th.start(); th.join()
  assert p == []

# ops that build tensors of their own (aranges, masks): built on the operand's device, not the default one (CPU here)
HELPERS = {
  "argmax": lambda t: t.argmax(), "argmax_axis": lambda t: t.argmax(1), "argmin": lambda t: t.argmin(0), "tril": lambda t: t.tril(),
  "cumsum": lambda t: t.cumsum(1), "topk": lambda t: t.topk(2)[1], "sort": lambda t: t.sort(1)[1], "triu": lambda t: t.triu(1),
  "zeros_like": lambda t: t.zeros_like(), "ones_like": lambda t: t.ones_like() + t, "full_like": lambda t: t.full_like(2.5, dtype="float16"),
  "q5_0": lambda t: __import__("morok_mlir.nn.quant", fromlist=["dequantize"]).dequantize(
    (t.reshape(-1)[:22].abs() * 50).cast("uint8"), "Q5_0", (32,)),
}

@pytest.mark.parametrize("name", list(HELPERS))
def test_ops_building_their_own_tensors_stay_on_the_device(fake_cuda, name):
  x = np.random.default_rng(0).standard_normal((4, 7)).astype(np.float32)
  got, want = HELPERS[name](Tensor(x).to("CUDA")), HELPERS[name](Tensor(x))
  assert got.device == "CUDA"
  np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-6)
