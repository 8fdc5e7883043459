"""The CUDA device: kernel Func -> uop-lower-gpu -> gpu-lower-to-nvvm-pipeline -> PTX -> cuda-python driver API.

Nothing here touches cuda-python or libcuda until the device is used (`import morok_mlir` and the CPU path never
need them); rendering and PTX compilation work on any machine (`CUDA.compile_ptx(f, chip)`).

Public API, shaped like the CPU device's:
  CUDA.compile(f: Func) -> CUDAProgram      lower + PTX for this GPU's chip + cuModuleLoadData; the method cache is
                                            keyed by (lowered text, argument dtypes, chip), one entry per GPU arch
  program(*bufs, wait=False)                launch on CUDABuffers (checked); program.call_buffers(bufs, inputs): the
                                            realize driver's path on allocated Buffers (device/buffer.py), no host copies;
                                            a symbolic kernel's int64 buffer of the values is one of them, and its launch
                                            (sized for the values' maxima) is the same for every value;
                                            a kernel codegen.gpu_split splits is a CUDALaunches: its launches in order,
                                            on scratch each call takes from the allocator (a CUDA graph: a node each)
  CUDA.allocator.alloc(size, dtype, stream=None) -> CUDABuffer; .free(buf); .copyin(buf, arr); .copyout(arr, buf);
                                            .copy(dst, src); .offset, .ptr: the interface every allocator has; a block
                                            goes back to the cache (by size class, stream-ordered) at free() or when its
                                            CUDABuffer dies; .empty_cache(); host copies through pinned staging buffers
  CUDAGraph(kernels)                        a TinyJit replay's run of CUDA kernels as one CUDA graph (CUDAProgram.Graph)
  CUDA.synchronize()
  CUDA.time_ms(fn, runs) -> float           milliseconds per call of fn, by CUDA events around runs calls
  with CUDA.profile() as p: ...             p: (kernel, GPU ms) of each kernel launched in the block, by events
  CUDA.search(f, beam) -> Func              BEAM: a tiled contraction's fastest block tile on this GPU (uop.gpu_tile), cached
  available() -> (bool, reason)             cuda-python importable, cuInit works, at least one device
Every failing driver call raises CUDAError naming the call (and the kernel, for loads and launches). Threads may share
the device: launches take their own parameter arrays, the pool and the method cache (an LRU) are locked, and each
thread makes the device's context current before its first call."""
from __future__ import annotations
import contextlib, ctypes, threading, time, warnings, weakref
from collections import OrderedDict
from dataclasses import dataclass, field
import numpy as np
from morok_mlir.ir.bridge import Func
from morok_mlir.ir.pipeline import CompileError
from morok_mlir.ir.registry import PassError
from morok_mlir.codegen.lower_gpu import lower_kernel
from morok_mlir.codegen.gpu_split import split
from morok_mlir.codegen.emitter import Emitter
from morok_mlir.core.dtype import DType, dtypes, to_dtype
from morok_mlir.core.provenance import user_loc
from morok_mlir.lru import LRU
from morok_mlir.device import Device
from morok_mlir.device.cpu import _arg, stored_slots
from morok_mlir.device.ptx import CHIPS, ptx_for

class CUDAError(RuntimeError):
  """A CUDA driver call failed; the message names the call, the kernel where there is one, and the driver's error."""
class CUDAUnavailable(CUDAError):
  """No usable CUDA: cuda-python is not installed, libcuda is missing, or there is no device."""

_drv = None
def driver():
  """cuda-python's driver module, imported on first use."""
  global _drv
  if _drv is None:
    try: from cuda.bindings import driver as d     # cuda-python >= 12.6
    except ImportError:
      try: from cuda import cuda as d              # older cuda-python
      except ImportError as e: raise CUDAUnavailable("the CUDA device needs cuda-python: pip install 'morok-mlir[cuda]'") from e
    _drv = d
  return _drv

def check(ret, what: str):
  """cuda-python calls return (CUresult, *values): raise on an error, return the values."""
  err, *vals = ret if isinstance(ret, tuple) else (ret,)
  if int(err) != 0:
    d = driver()
    name, desc = (x[1].decode() if int(x[0]) == 0 and x[1] else "?" for x in (d.cuGetErrorName(err), d.cuGetErrorString(err)))
    raise CUDAError(f"{what}: {name}: {desc}")
  return vals[0] if len(vals) == 1 else tuple(vals)

def available() -> tuple[bool, str]:
  try:
    d = driver()
    check(d.cuInit(0), "cuInit")
    if check(d.cuDeviceGetCount(), "cuDeviceGetCount") < 1: return False, "no CUDA device"
  except Exception as e: return False, f"{type(e).__name__}: {e}"   # cuda-python raises its own types when libcuda is missing
  return True, ""

def chip_for(major: int, minor: int) -> str:
  """The newest known chip this GPU runs: PTX is JIT-compiled forward (sm_80 PTX runs on sm_86, sm_89, ...)."""
  cc = major * 10 + minor
  ok = [c for c in CHIPS if not c.endswith("a") and int(c[3:]) <= cc]
  if not ok: raise CUDAError(f"compute capability {major}.{minor} is older than every supported chip ({', '.join(CHIPS)})")
  return max(ok, key=lambda c: int(c[3:]))

# ---------------------------------------------------------------- memory
@dataclass(eq=False)
class CUDABuffer:
  ptr: int          # device address (cuMemAlloc aligns to 256 bytes, the kernels assume 16)
  size: int         # elements
  dtype: DType
  nbytes: int
  stream: object = None   # the stream its work is queued on (None: the device's)

def size_class(nbytes: int) -> int:
  """The bytes of the cached block that holds nbytes: a multiple of 512, or above 1 MiB of an eighth of the power of two
  below, so that a freed block serves nearby sizes (as PyTorch's caching allocator rounds) and wastes at most 1/8."""
  step = 512 if nbytes <= 1 << 20 else 1 << (nbytes.bit_length() - 4)
  return -(-nbytes // step) * step

NOT_READY = 600   # CUDA_ERROR_NOT_READY: cuEventQuery's answer while the work before the event runs

class CUDAAllocator:
  """Device memory cached by size class and ordered by stream (PyTorch's caching allocator). A freed block is kept with
  the stream its work was queued on: work queued later on that stream runs after it, so the same stream reuses the block
  at once; another stream only once an event recorded at the free has completed (recorded when more than one stream
  allocates). Past `limit` cached bytes the least recently freed blocks go back to the driver; empty_cache() returns
  all of them, and so does running out of device memory before the allocation is retried. A block is freed by free() or
  when the CUDABuffer alloc returned dies, whichever comes first (views made by offset() own nothing).
  Host copies go through pinned (page-locked) staging buffers, reused, in pieces of at most STAGE bytes, queued on the
  device's stream; where pinning fails, through pageable memory after the stream's work."""
  limit, STAGE = 4 << 30, 8 << 20
  def __init__(self, dev: CUDADevice):
    self.dev, self.pool, self.pooled = dev, OrderedDict(), 0  # (class bytes, ptr) -> (stream, event | None), LRU order
    self.live: dict[int, weakref.finalize] = {}   # ptr -> the finalizer that pools the block when its CUDABuffer dies
    self.used = 0   # bytes of the live blocks (GlobalCounters.mem_used)
    self.lock, self.stage_lock = threading.RLock(), threading.Lock()   # (a copy waits on the GPU under stage_lock only)
    self.streams: list = []     # the streams blocks were allocated on
    self.events: list = []      # idle events, reused
    self.staging: list = [[0, 0, None], [0, 0, None]]   # pinned host buffers, used in turn: [address, bytes, event of last copy]
    self.turn, self.pinned = 0, True   # pinned: False once cuMemHostAlloc failed
  def alloc(self, size: int, dtype, stream=None) -> CUDABuffer:
    dt = to_dtype(dtype) if not isinstance(dtype, np.dtype) else dtypes.from_np(dtype)
    if not isinstance(size, (int, np.integer)) or size < 0: raise ValueError(f"bad buffer size {size!r}")
    nbytes = max(int(size) * dt.itemsize, 1)   # cuMemAlloc(0) is an error
    self.dev.init()
    cls, s, ptr = size_class(nbytes), self.dev.stream if stream is None else stream, None
    with self.lock:
      if s not in self.streams: self.streams.append(s)
      for key in reversed(self.pool):
        if key[0] == cls and self._reusable(*self.pool[key], s): ptr = key[1]; self._unpool(key); break
    if ptr is None:
      d = driver()
      try: ptr = int(check(d.cuMemAlloc(cls), f"cuMemAlloc({cls})"))
      except CUDAError:
        if not self.pool: raise
        self.empty_cache(); ptr = int(check(d.cuMemAlloc(cls), f"cuMemAlloc({cls}) after emptying the cache"))
    buf = CUDABuffer(ptr, int(size), dt, nbytes, stream)
    fin = self.live[ptr] = weakref.finalize(buf, self._recycle, cls, ptr, s)
    fin.atexit = False   # at exit the driver frees everything itself
    with self.lock: self.used += cls
    return buf
  def _reusable(self, freed_on, event, stream) -> bool:
    if freed_on == stream: return True
    if event is None: return False
    if int((ret := driver().cuEventQuery(event))[0]) == NOT_READY: return False
    check(ret, "cuEventQuery")
    return True
  def _unpool(self, key) -> None:
    _, event = self.pool.pop(key); self.pooled -= key[0]
    if event is not None: self.events.append(event)
  def _event(self, stream):
    """An event recorded on stream now: it completes once the work queued before it has."""
    self.dev.current()   # (a CUDABuffer may die in any thread)
    ev = self.events.pop() if self.events else check(driver().cuEventCreate(2), "cuEventCreate")   # CU_EVENT_DISABLE_TIMING
    check(driver().cuEventRecord(ev, stream), "cuEventRecord")
    return ev
  def _recycle(self, cls: int, ptr: int, stream) -> None:
    with self.lock:
      self.live.pop(ptr, None)
      self.used -= cls
      self.pool[(cls, ptr)] = (stream, self._event(stream) if len(self.streams) > 1 else None); self.pooled += cls
      if self.pooled > self.limit: self.release(self.pooled - self.limit)
  def free(self, buf: CUDABuffer) -> None:
    """Return buf's block now (the caller promises to queue no more work on buf); a view or a freed buffer is ignored."""
    with self.lock:
      if (fin := self.live.get(buf.ptr)) is not None and (p := fin.peek()) is not None and p[0] is buf: fin()
      buf.ptr = 0
  def release(self, nbytes: int | None = None) -> None:
    """Give cached blocks back to the driver, least recently freed first, until nbytes are freed (all by default)."""
    with self.lock:
      while self.pool and (nbytes is None or nbytes > 0):
        key = next(iter(self.pool))
        self._unpool(key)
        check(driver().cuMemFree(key[1]), "cuMemFree")
        if nbytes is not None: nbytes -= key[0]
  def empty_cache(self) -> None:
    """Every cached block back to the driver (torch.cuda.empty_cache); live buffers keep theirs."""
    self.release()
  def _stage(self, n: int) -> int | None:
    """The next pinned staging buffer of at least n bytes, idle (its last copy done), or None where pinning failed."""
    if not self.pinned: return None
    d, st = driver(), self.staging[self.turn]
    self.turn ^= 1
    if st[2] is not None: check(d.cuEventSynchronize(st[2]), "cuEventSynchronize")
    if st[1] < n:
      if st[0]: check(d.cuMemFreeHost(st[0]), "cuMemFreeHost"); st[:2] = 0, 0
      want = min(max(n, 64 << 10), self.STAGE)
      err, ptr = d.cuMemHostAlloc(want, 0)
      if int(err) != 0: self.pinned = False; return None   # (a locked-memory limit, say): pageable copies from now on
      st[:2] = int(ptr), want
      if st[2] is None: st[2] = check(d.cuEventCreate(2), "cuEventCreate")
    return st[0]
  def _host(self, arr: np.ndarray, buf: CUDABuffer, what: str):
    if type(arr) is not np.ndarray or not arr.flags.c_contiguous or arr.nbytes != buf.size * buf.dtype.itemsize:
      raise ValueError(f"{what}: need a C-contiguous array of {buf.size * buf.dtype.itemsize} bytes, got {getattr(arr, 'nbytes', arr)!r}")
  def _pieces(self, total: int):
    for off in range(0, total, self.STAGE): yield off, min(self.STAGE, total - off), self._stage(min(self.STAGE, total - off))
  def copyin(self, buf: CUDABuffer, arr: np.ndarray) -> None:
    """arr's bytes into buf, queued on the stream (arr may change once this returns: they were copied to staging)."""
    self._host(arr, buf, "copyin")
    d, src = driver(), arr.ctypes.data
    with self.stage_lock:
      for off, n, h in self._pieces(arr.nbytes):
        if h is None:
          self.dev.synchronize(); check(d.cuMemcpyHtoD(buf.ptr + off, src + off, arr.nbytes - off), "cuMemcpyHtoD"); return
        ctypes.memmove(h, src + off, n)
        check(d.cuMemcpyHtoDAsync(buf.ptr + off, h, n, self.dev.stream), "cuMemcpyHtoDAsync")
        check(d.cuEventRecord(self.staging[self.turn ^ 1][2], self.dev.stream), "cuEventRecord")
  def copyout(self, arr: np.ndarray, buf: CUDABuffer) -> None:
    """buf's bytes into arr, after the work queued on the stream."""
    self._host(arr, buf, "copyout")
    if not arr.flags.writeable: raise ValueError("copyout: destination is read-only")
    d, dst = driver(), arr.ctypes.data
    with self.stage_lock:
      for off, n, h in self._pieces(arr.nbytes):
        if h is None:
          self.dev.synchronize(); check(d.cuMemcpyDtoH(dst + off, buf.ptr + off, arr.nbytes - off), "cuMemcpyDtoH"); return
        ev = self.staging[self.turn ^ 1][2]
        check(d.cuMemcpyDtoHAsync(h, buf.ptr + off, n, self.dev.stream), "cuMemcpyDtoHAsync")
        check(d.cuEventRecord(ev, self.dev.stream), "cuEventRecord"); check(d.cuEventSynchronize(ev), "cuEventSynchronize")
        ctypes.memmove(dst + off, h, n)
  def copy(self, dst: CUDABuffer, src: CUDABuffer) -> None:
    if dst.nbytes != src.nbytes: raise ValueError(f"copy: {src.nbytes} bytes into {dst.nbytes}")
    check(driver().cuMemcpyDtoDAsync(dst.ptr, src.ptr, src.nbytes, self.dev.stream), "cuMemcpyDtoD")
  @staticmethod
  def ptr(buf: CUDABuffer) -> int: return buf.ptr
  @staticmethod
  def offset(buf: CUDABuffer, nbytes: int, size: int, dtype: DType) -> CUDABuffer:
    return CUDABuffer(buf.ptr + nbytes, size, dtype, size * dtype.itemsize)
  def from_numpy(self, arr: np.ndarray) -> CUDABuffer:
    arr = np.ascontiguousarray(arr); buf = self.alloc(arr.size, arr.dtype); self.copyin(buf, arr.reshape(-1)); return buf
  def to_numpy(self, buf: CUDABuffer) -> np.ndarray:
    out = np.empty(buf.size, buf.dtype.np); self.copyout(out, buf); return out

# ---------------------------------------------------------------- compile and run
@dataclass(frozen=True)
class ProgramSpec:
  name: str
  src: str                              # upstream MLIR: a gpu.module with one gpu.func (the output of uop-lower-gpu)
  args: tuple[tuple[int, DType], ...]   # (element count, dtype) per buffer argument
  outs: tuple[int, ...]                 # arguments the kernel stores to
  global_size: tuple[int, int, int]
  local_size: tuple[int, int, int]
  func: Func | None = field(default=None, compare=False, repr=False)   # the kernel it was lowered from (the emulator lowers it again)
  tiled: bool = False                   # a tiled contraction (codegen.gpu_tiles): the emulator runs its text (device.simt)
  # a kernel of several launches (a two-phase reduce, codegen.gpu_split): each its own spec, run in order over the
  # arguments then scratch buffers of these (elements, dtype), `temps`, that each call owns; the sizes above are the first's
  launches: tuple[ProgramSpec, ...] = ()
  temps: tuple[tuple[int, DType], ...] = ()

@dataclass(frozen=True)
class CompiledSpec:
  spec: ProgramSpec
  ptx: str
  chip: str

class CUDARenderer:
  """uop-lower-gpu on one kernel for a chip (None: no tiled contractions), f32 contractions on tensor cores as tf32 where
  tf32. The entry point is always `kernel`, so equal kernels render to equal text."""
  def __init__(self, chip: str | None = None, tf32: bool = False): self.chip, self.tf32 = chip, tf32
  def render(self, f: Func, name: str = "kernel") -> ProgramSpec:
    """f as one launch, or as the launches in order of a two-phase reduce where codegen.gpu_split splits it (src: one
    gpu.module of their kernels; each launch's spec has its own)."""
    if (sp := split(f)) is None: return self._render(f, name)[0]
    parts, texts = zip(*(self._render(g, f"{name}_{i}") for i, g in enumerate(sp.phases)))
    return ProgramSpec(name, Emitter.gpu_module(list(texts)), tuple(_arg(t) for t in f.args), tuple(sorted(stored_slots(f))),
                       parts[0].global_size, parts[0].local_size, f, launches=parts, temps=sp.scratch)
  def _render(self, f: Func, name: str) -> tuple[ProgramSpec, str]:
    try: text, launch = lower_kernel(f, name, chip=self.chip, tf32=self.tf32, tile=f.attrs.get("uop.gpu_tile", -1))
    except PassError as e: raise CompileError(f"{e.loc}: error: {e}" if e.loc else f"error: {e}") from None   # as the CPU's passes say it
    return ProgramSpec(name, Emitter.gpu_module([text]), tuple(_arg(t) for t in f.args), tuple(sorted(stored_slots(f))),
                       launch.global_size, launch.local_size, f, launch.tiles), text

class CUDACompiler:
  def compile(self, spec: ProgramSpec, chip: str) -> CompiledSpec: return CompiledSpec(spec, ptx_for(spec.src, chip), chip)

class CUDAProgram:
  def __init__(self, dev: CUDADevice, c: CompiledSpec, label: str):
    self.dev, self.spec, self.name, self.label = dev, c.spec, c.spec.name, label
    d = driver()
    self.module = check(d.cuModuleLoadData(c.ptx.encode() + b"\0"), f"loading kernel {label} (cuModuleLoadData, {c.chip})")
    self.fn = check(d.cuModuleGetFunction(self.module, c.spec.name.encode()), f"kernel {label}: cuModuleGetFunction")
    self.nbytes = len(c.ptx) + len(c.spec.src)   # the loaded module is of the order of its PTX
    self._free: list = []   # (pointer values, params pointing at them): one pair per concurrent launch
  def __del__(self):   # evicted from every cache: its launches finish, then the module goes
    try: self.dev.synchronize(); driver().cuModuleUnload(self.module)
    except Exception: pass   # the driver is gone (interpreter exit) or never had it
  def _params(self):
    n = len(self.spec.args)
    ptrs = (ctypes.c_void_p * max(n, 1))()   # kernel params: void*[] pointing at the pointer values
    return ptrs, (ctypes.c_void_p * max(n, 1))(*[ctypes.addressof(ptrs) + i * ctypes.sizeof(ctypes.c_void_p) for i in range(n)])
  def launch_ptrs(self, *addrs: int) -> None:
    try: ptrs, params = a = self._free.pop()
    except IndexError: ptrs, params = a = self._params()
    try:
      ptrs[:len(addrs)] = addrs
      (gx, gy, gz), (lx, ly, lz) = self.spec.global_size, self.spec.local_size
      if (prof := self.dev.prof) is not None: t0 = self.dev.mark()
      check(driver().cuLaunchKernel(self.fn, gx, gy, gz, lx, ly, lz, 0, self.dev.stream, ctypes.addressof(params), 0),
            f"launching kernel {self.label}")   # (the driver copies the parameters before it returns)
      if prof is not None: prof.append((self.label, t0, self.dev.mark()))
    finally: self._free.append(a)
  def call_buffers(self, bufs: list, inputs: list | None = None) -> None:
    """The realize driver's path: allocated CUDA Buffers of the right dtype and size; launches and returns (the stream
    orders what follows; a copy to the host waits for it)."""
    self.dev.current()
    self.launch_ptrs(*[b.ptr for b in bufs])
  def __call__(self, *bufs: CUDABuffer, wait: bool = False) -> float | None:
    """Launch on CUDABuffers. With wait, returns seconds until the GPU is done."""
    if len(bufs) != len(self.spec.args): raise TypeError(f"{self.label} takes {len(self.spec.args)} buffers, got {len(bufs)}")
    for i, (b, (size, dt)) in enumerate(zip(bufs, self.spec.args)):
      if type(b) is not CUDABuffer: raise TypeError(f"{self.label}: buffer {i} is a {type(b).__name__}, not a CUDABuffer")
      if b.dtype != dt or b.size < size: raise ValueError(f"{self.label}: buffer {i} must hold {size} {dt.name}, got {b.size} {b.dtype.name}")
    self.dev.current()
    t0 = time.perf_counter()
    self.launch_ptrs(*[b.ptr for b in bufs])
    if wait: self.dev.synchronize(f"kernel {self.label}")
    return time.perf_counter() - t0 if wait else None

class CUDALaunches(CUDAProgram):
  """A kernel of several launches in order (ProgramSpec.launches), each a CUDAProgram over the kernel's buffers and then
  the scratch buffers. A call takes its scratch from the device's caching allocator and gives it back once the launches
  are queued: work queued later on the stream runs after them, so the block is free to reuse, and calls from several
  threads never share one. A CUDA graph holds scratch of its own (CUDAGraph)."""
  def __init__(self, dev: CUDADevice, spec: ProgramSpec, parts: list[CUDAProgram], label: str):
    self.dev, self.spec, self.parts, self.name, self.label = dev, spec, parts, spec.name, label
    self.nbytes = sum(p.nbytes for p in parts)
  def __del__(self): pass   # (each part unloads its own module)
  def scratch(self) -> list[CUDABuffer]: return [self.dev.allocator.alloc(n, dt) for n, dt in self.spec.temps]
  def launch_ptrs(self, *addrs: int) -> None:
    bufs = self.scratch()
    try:
      for p in self.parts: p.launch_ptrs(*addrs, *(b.ptr for b in bufs))
    finally:
      for b in bufs: self.dev.allocator.free(b)

def launches(prog: CUDAProgram) -> list[CUDAProgram]: return getattr(prog, "parts", [prog])

class CUDAGraph:
  """A run of a TinyJit replay's CUDA kernels as one CUDA graph: built on its first call (a chain of kernel nodes,
  cuGraphAddKernelNode), instantiated once, and launched with one cuGraphLaunch per call. A later call first sets the
  arguments that changed (the new inputs' and outputs' pointers) in the instantiated graph (cuGraphExecKernelNodeSetParams),
  and builds it again where the driver refuses that; the sizes' values reach the kernels in the plan's own buffer, written
  on the stream before the launch. A kernel of several launches (CUDALaunches) is a node per launch, on scratch buffers
  the graph holds (allocated when it is first built). A graph the driver refuses is dropped, with a warning at the user's line naming the
  call, for launches kernel by kernel. kernels: steps with .prog (a CUDAProgram) and .slots (its buffers in a replay's list)."""
  def __init__(self, kernels: list):
    self.kernels, self.dev = kernels, kernels[0].prog.dev
    self.launches = [(i, p) for i, k in enumerate(kernels) for p in launches(k.prog)]   # per node: (its kernel, program)
    self.params = [p._params() for _, p in self.launches]   # per node: (pointer values, void*[] at them), read by the driver
    self.graph = self.exec = self.scratch = None
    self.nodes, self.last, self.failed = [], [], None
  def _node(self, prog: CUDAProgram, params):
    p = driver().CUDA_KERNEL_NODE_PARAMS()
    p.func, p.sharedMemBytes, p.kernelParams = prog.fn, 0, ctypes.addressof(params)
    (p.gridDimX, p.gridDimY, p.gridDimZ), (p.blockDimX, p.blockDimY, p.blockDimZ) = prog.spec.global_size, prog.spec.local_size
    return p
  def _build(self, addrs: list) -> None:
    d = driver()
    self.graph, self.nodes = check(d.cuGraphCreate(0), "cuGraphCreate"), []
    for (_, p), (ptrs, params), a in zip(self.launches, self.params, addrs):
      ptrs[:len(a)] = a
      deps = self.nodes[-1:]
      self.nodes.append(check(d.cuGraphAddKernelNode(self.graph, deps, len(deps), self._node(p, params)), f"kernel {p.label}: cuGraphAddKernelNode"))
    # CUDA 13 names cuGraphInstantiateWithFlags cuGraphInstantiate (the same (graph, flags) call; 12's cuGraphInstantiate is older)
    inst = getattr(d, "cuGraphInstantiateWithFlags", None) or d.cuGraphInstantiate
    self.exec, self.last = check(inst(self.graph, 0), "cuGraphInstantiateWithFlags"), addrs
  def _update(self, addrs: list) -> None:
    d = driver()
    for i, ((_, p), (ptrs, params), a) in enumerate(zip(self.launches, self.params, addrs)):
      if a == self.last[i]: continue
      ptrs[:len(a)] = a
      check(d.cuGraphExecKernelNodeSetParams(self.exec, self.nodes[i], self._node(p, params)), f"kernel {p.label}: cuGraphExecKernelNodeSetParams")
    self.last = addrs
  def _destroy(self) -> None:
    d, (g, e), self.graph, self.exec = driver(), (self.graph, self.exec), None, None
    if e is not None: d.cuGraphExecDestroy(e)
    if g is not None: d.cuGraphDestroy(g)
  def __del__(self):
    try: self.dev.synchronize(); self._destroy()
    except Exception: pass   # the driver is gone (interpreter exit)
  def __call__(self, v: list) -> None:
    args = [[v[j].ptr for j in k.slots] for k in self.kernels]
    if self.failed is None:
      self.dev.current()
      if self.scratch is None: self.scratch = [getattr(k.prog, "scratch", list)() for k in self.kernels]
      addrs = [args[i] + [b.ptr for b in self.scratch[i]] for i, _ in self.launches]
      try:
        if self.exec is None: self._build(addrs)
        else:
          try: self._update(addrs)
          except CUDAError: self._destroy(); self._build(addrs)   # an update the driver refuses: instantiated anew
        check(driver().cuGraphLaunch(self.exec, self.dev.stream), "cuGraphLaunch")
        return
      except CUDAError as e:
        self.failed = e
        self._destroy()
        self.scratch = None
        warnings.warn(f"{user_loc()}: TinyJit on CUDA: {len(self.kernels)} kernels are launched one by one: their CUDA graph "
                      f"failed ({e})", RuntimeWarning, stacklevel=2)
    for k, a in zip(self.kernels, args): k.prog.launch_ptrs(*a)
CUDAProgram.Graph = CUDAGraph   # what TinyJit replays a run of this device's kernels through

class CUDADevice:
  """allow_tf32 (PyTorch's torch.backends.cuda.matmul.allow_tf32, off by default): f32 matmuls and convolutions may run on
  tensor cores as tf32 (10 mantissa bits per operand, f32 accumulation); setting it drops CUDA's cached schedules, so the
  next realize follows it (a TinyJit plan recorded before keeps its kernels)."""
  name = "CUDA"
  def __init__(self, ordinal: int = 0):
    self.ordinal, self.ctx, self.stream, self.chip = ordinal, None, None, None
    self.renderer, self.compiler, self.allocator = CUDARenderer(), CUDACompiler(), CUDAAllocator(self)
    self.method_cache: LRU = LRU(lambda p: p.nbytes)
    self.lock, self._tls = threading.RLock(), threading.local()
    self.compile_ms: list[float] = []
  def current(self) -> None:
    """Make the device's context current in this thread (a context is current per thread; init made it so in its own)."""
    if getattr(self._tls, "ctx", None) is not self.ctx or self.ctx is None:
      self.init()
      check(driver().cuCtxSetCurrent(self.ctx), "cuCtxSetCurrent")
      self._tls.ctx = self.ctx
  def init(self) -> None:
    """cuInit, the primary context of the device, a stream, and the chip to compile for. Raises CUDAUnavailable."""
    if self.ctx is not None: return
    with self.lock: self._init()
  def _init(self) -> None:
    if self.ctx is not None: return
    d = driver()
    try:
      check(d.cuInit(0), "cuInit")
      if self.ordinal >= check(d.cuDeviceGetCount(), "cuDeviceGetCount"): raise CUDAUnavailable(f"no CUDA device {self.ordinal}")
    except CUDAUnavailable: raise
    except Exception as e: raise CUDAUnavailable(f"{type(e).__name__}: {e}") from None   # e.g. no libcuda
    dev = check(d.cuDeviceGet(self.ordinal), "cuDeviceGet")
    A = d.CUdevice_attribute
    cc = [check(d.cuDeviceGetAttribute(getattr(A, f"CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_{x}"), dev), "cuDeviceGetAttribute") for x in ("MAJOR", "MINOR")]
    self.chip = self.renderer.chip = chip_for(*cc)
    ctx = check(d.cuDevicePrimaryCtxRetain(dev), "cuDevicePrimaryCtxRetain")
    check(d.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    self.stream = check(d.cuStreamCreate(0), "cuStreamCreate")   # blocking: ordered with the legacy stream's copies
    self.ctx = ctx
  def time_ms(self, fn, runs: int) -> float:
    """Milliseconds per call of fn (work it queues on the stream), by CUDA events recorded around runs calls."""
    d = driver()
    self.current()
    start, end = (check(d.cuEventCreate(0), "cuEventCreate") for _ in range(2))   # 0: with timing
    try:
      check(d.cuEventRecord(start, self.stream), "cuEventRecord")
      for _ in range(runs): fn()
      check(d.cuEventRecord(end, self.stream), "cuEventRecord"); check(d.cuEventSynchronize(end), "cuEventSynchronize")
      return check(d.cuEventElapsedTime(start, end), "cuEventElapsedTime") / runs
    finally:
      for ev in (start, end): d.cuEventDestroy(ev)
  def mark(self):
    """A timing event recorded on the stream now."""
    ev = check(driver().cuEventCreate(0), "cuEventCreate")
    check(driver().cuEventRecord(ev, self.stream), "cuEventRecord")
    return ev
  @property
  def prof(self) -> list | None:
    """(kernel label, start event, end event) per launch while this thread's profile() is active (a mode per thread:
    another thread's launches are not its block's)."""
    return getattr(self._tls, "prof", None)
  @contextlib.contextmanager
  def profile(self):
    """Within the block each kernel launch of this device's programs (not a CUDA graph's) is timed on the GPU by a pair
    of events; yields a list that holds (kernel label, ms) per launch once the block ends (the stream synchronized)."""
    self.current()
    self._tls.prof = out = []
    try: yield out
    finally:
      self._tls.prof, recs, d = None, list(out), driver()
      try:
        self.synchronize("profiled kernels")
        out[:] = [(label, check(d.cuEventElapsedTime(a, b), "cuEventElapsedTime")) for label, a, b in recs]
      finally:
        for _, a, b in recs: d.cuEventDestroy(a); d.cuEventDestroy(b)
  def search(self, f: Func, beam: int) -> Func:
    """BEAM on CUDA: f with its tiled contraction's fastest block tile, timed on this GPU and cached (device/search.py)."""
    from morok_mlir.device import search
    return search.search_gpu(f, beam, self)
  def synchronize(self, what: str = "stream") -> None:
    if self.stream is not None: check(driver().cuStreamSynchronize(self.stream), f"{what} (cuStreamSynchronize)")
  @property
  def allow_tf32(self) -> bool: return self.renderer.tf32
  @allow_tf32.setter
  def allow_tf32(self, v: bool) -> None:
    if self.renderer.tf32 != bool(v): self.renderer.tf32 = bool(v); Device.settings_changed(self.name)
  def compile_ptx(self, f: Func, chip: str = "sm_90") -> str:
    """PTX for one kernel, without a GPU (a kernel of several launches: each one's PTX, in order)."""
    spec = CUDARenderer(chip, self.renderer.tf32).render(f)
    return "".join(self.compiler.compile(s, chip).ptx for s in spec.launches or (spec,))
  def compile(self, f: Func) -> CUDAProgram:
    self.current()
    with self.lock:
      spec = self.renderer.render(f)
      if (p := self.method_cache.get(key := (spec.src, spec.args, self.chip))) is None:
        t0 = time.perf_counter()
        p = self.method_cache[key] = CUDALaunches(self, spec, [CUDAProgram(self, self.compiler.compile(s, self.chip), f"{f.name}_{i}")
                                                              for i, s in enumerate(spec.launches)], f.name) \
          if spec.launches else CUDAProgram(self, self.compiler.compile(spec, self.chip), f.name)
        self.compile_ms.append((time.perf_counter() - t0) * 1e3)
    return p

CUDA = CUDADevice()
