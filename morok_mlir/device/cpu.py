"""The CPU device: kernel Func -> uop-lower-cpu -> upstream MLIR to the LLVM dialect -> ExecutionEngine(opt_level=3).

Public API (what the realize driver uses):
  CPU.compile(f: Func) -> CPUProgram        lower + JIT one kernel; the method cache (keyed by the canonical lowered
                                            text) compiles each distinct kernel once per process
  program(*bufs: np.ndarray)                run it; buffers are checked (count, dtype, size, contiguity, writable
                                            outputs) and a bad one raises ValueError/TypeError before any native code
  program.call_ptrs(*addrs: int)            the unchecked fast path on raw data pointers (~1 us)
  CPU.allocator.alloc(size, dtype) / free   64-byte-aligned contiguous numpy arrays, pooled by byte size
  compile_module(funcs) -> CPUProgram       a whole kernel-level module, called through its lowered @schedule

The stages mirror Morok's device.rs: renderer (the uop-lower-cpu pass: Func -> ProgramSpec with upstream MLIR),
compiler (upstream passes: -> LLVM-dialect text, the CompiledSpec), runtime (text -> CPUProgram via the JIT).
Buffers are passed with the bare-pointer memref convention, so a kernel is `void k(T0*, T1*, ...)`; the engine's
packed wrapper `_mlir_<name>(void**)` is called through ctypes with a pre-built argument array.
Bool buffers are numpy bool arrays (one byte, 0/1); the kernel reads and writes them as i8."""
from __future__ import annotations
import ctypes, ctypes.util, re, threading, time
from dataclasses import dataclass
import numpy as np
from ..bridge import Func
from ..dtype import DType, dtypes, to_dtype

LLVM_PIPELINE = ("builtin.module(convert-scf-to-cf,convert-math-to-llvm,expand-strided-metadata,finalize-memref-to-llvm,"
                 "convert-arith-to-llvm,convert-cf-to-llvm,convert-func-to-llvm{use-bare-ptr-memref-call-conv=1},"
                 "reconcile-unrealized-casts)")
_MEMREF = re.compile(r"memref<(\d+)x(\w+)>")
# LLVM lowers f64->f16 (and f16 ops it widens to f64) to compiler-rt's __truncdfhf2, which libgcc_s (GCC >= 12)
# exports; loading it globally lets the JIT's process-symbol lookup find it
try: ctypes.CDLL(ctypes.util.find_library("gcc_s") or "libgcc_s.so.1", mode=ctypes.RTLD_GLOBAL)
except OSError: pass
_lock = threading.Lock()   # one MLIR context for all CPU compiles; MLIR contexts are not safe to share across threads

@dataclass(frozen=True)
class ProgramSpec:
  name: str                  # entry point in src
  src: str                   # upstream MLIR module text (the output of uop-lower-cpu)
  args: tuple[tuple[int, DType], ...]  # (element count, dtype) per buffer argument
  outs: tuple[int, ...]      # arguments the kernel stores to

@dataclass(frozen=True)
class CompiledSpec:
  name: str
  src: str                   # LLVM-dialect module text
  spec: ProgramSpec

def _arg(ty: str) -> tuple[int, DType]:
  if not (m := _MEMREF.fullmatch(ty)): raise TypeError(f"kernel arguments must be flat static memrefs, got {ty}")
  return int(m.group(1)), dtypes.from_mlir(m.group(2))

def stored_slots(f: Func) -> set[int]:
  """Arguments a kernel stores to."""
  return {u.src[0].src[0].attrs["slot"] for r in f.roots for u in r.toposort
          if u.op == "store" and u.src[0].op == "index" and u.src[0].src[0].op == "buffer"}

class CPURenderer:
  """uop-lower-cpu on one kernel. The entry point is always `kernel`, so equal kernels render to equal text."""
  def render(self, f: Func, name: str = "kernel") -> ProgramSpec:
    from morok_mlir.passes.lower_cpu import lower_kernel
    # noinline: the engine's packed wrapper would otherwise inline the body and LLVM would optimise it twice
    src = lower_kernel(f, name).replace(") {\n", ') attributes {passthrough = ["noinline"]} {\n', 1)
    return ProgramSpec(name, "module {\n" + src + "}\n", tuple(_arg(t) for t in f.args), tuple(sorted(stored_slots(f))))

_ctx = None
def _context():
  global _ctx
  from mlir import ir
  if _ctx is None: _ctx = ir.Context()
  return _ctx

class CPUCompiler:
  cache_key = "CPU-mlir-llvm-O3"
  def compile(self, spec: ProgramSpec) -> CompiledSpec:
    from mlir import ir
    from mlir.passmanager import PassManager
    with _lock, _context():
      mod = ir.Module.parse(spec.src)   # raises MLIRError (a Python exception) on bad text
      PassManager.parse(LLVM_PIPELINE).run(mod.operation)
      return CompiledSpec(spec.name, str(mod), spec)

class CPUProgram:
  """A JIT-compiled kernel. Keeps its ExecutionEngine alive; not re-entrant (one argument array per program)."""
  def __init__(self, c: CompiledSpec):
    from mlir import ir
    from mlir.execution_engine import ExecutionEngine
    self.name, self.spec = c.name, c.spec
    with _lock, _context():
      self.engine = ExecutionEngine(ir.Module.parse(c.src), opt_level=3)
      addr = self.engine.raw_lookup(c.name)   # the packed wrapper: void _mlir_<name>(void **args)
    if not addr: raise RuntimeError(f"JIT lookup of {c.name} failed")
    n = len(c.spec.args)
    self._fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(addr)
    self._ptrs = (ctypes.c_void_p * max(n, 1))()
    self._packed = (ctypes.c_void_p * max(n, 1))(*[ctypes.addressof(self._ptrs) + i * ctypes.sizeof(ctypes.c_void_p) for i in range(n)])
    self._np = [(size, np.dtype(dt.np)) for size, dt in c.spec.args]
  def call_ptrs(self, *addrs: int) -> None:
    self._ptrs[:len(addrs)] = addrs
    self._fn(self._packed)
  def __call__(self, *bufs: np.ndarray) -> None:
    if len(bufs) != len(self._np): raise TypeError(f"{self.name} takes {len(self._np)} buffers, got {len(bufs)}")
    for i, (b, (size, dt)) in enumerate(zip(bufs, self._np)):
      if type(b) is not np.ndarray: raise TypeError(f"{self.name}: buffer {i} is a {type(b).__name__}, not a numpy array")
      if b.dtype != dt or b.size < size or not b.flags.c_contiguous:
        raise ValueError(f"{self.name}: buffer {i} must be a C-contiguous {dt} array of at least {size} elements, got {b.dtype}[{b.size}]"
                         + ("" if b.flags.c_contiguous else " (not contiguous)"))
    for i in self.spec.outs:
      if not bufs[i].flags.writeable: raise ValueError(f"{self.name}: output buffer {i} is read-only")
    self.call_ptrs(*[b.ctypes.data for b in bufs])

class CPUAllocator:
  """Aligned numpy arrays, pooled by byte size: reusing a buffer avoids fresh page faults on every realize."""
  ALIGN, POOL_LIMIT = 64, 1 << 30
  def __init__(self): self.pool: dict[int, list[np.ndarray]] = {}; self.pooled = 0
  def alloc(self, size: int, dtype) -> np.ndarray:
    dt = to_dtype(dtype) if not isinstance(dtype, np.dtype) else dtypes.from_np(dtype)
    if not isinstance(size, (int, np.integer)) or size < 0: raise ValueError(f"bad buffer size {size!r}")
    nbytes = int(size) * dt.itemsize
    if (free := self.pool.get(nbytes)):
      raw = free.pop(); self.pooled -= nbytes
    else:
      block = np.empty(nbytes + self.ALIGN, np.uint8)
      off = -block.ctypes.data % self.ALIGN
      raw = block[off:off + nbytes]
    return raw.view(dt.np)
  def free(self, arr: np.ndarray) -> None:
    if arr.nbytes and self.pooled + arr.nbytes <= self.POOL_LIMIT and arr.flags.c_contiguous and arr.ctypes.data % self.ALIGN == 0:
      self.pool.setdefault(arr.nbytes, []).append(arr.reshape(-1).view(np.uint8)); self.pooled += arr.nbytes

class CPUDevice:
  name = "CPU"
  def __init__(self):
    self.renderer, self.compiler, self.runtime, self.allocator = CPURenderer(), CPUCompiler(), CPUProgram, CPUAllocator()
    self.method_cache: dict[tuple, CPUProgram] = {}
    self.compile_ms: list[float] = []   # per compiled kernel (cache misses), for DEBUG output and benchmarks
  def compile(self, f: Func) -> CPUProgram:
    spec = self.renderer.render(f)
    # the argument dtypes join the key: int8/uint8/bool buffers all lower to i8 memrefs, but the checks differ
    if (p := self.method_cache.get(key := (spec.src, spec.args))) is None:
      t0 = time.perf_counter()
      p = self.method_cache[key] = self.runtime(self.compiler.compile(spec))
      self.compile_ms.append((time.perf_counter() - t0) * 1e3)
    return p

CPU = CPUDevice()

def compile_module(funcs: list[Func]) -> CPUProgram:
  """A whole kernel-level module (kernels + @schedule) as one JIT module; the program runs the schedule."""
  from morok_mlir.passes.lower_cpu import lower_module
  sched = [f for f in funcs if "uop.schedule" in f.attrs]
  if len(sched) != 1: raise ValueError(f"expected one @schedule function, got {len(sched)}")
  kernels = {f.name: f for f in funcs}
  outs = tuple(sorted({k.attrs["slots"][i] for r in sched[0].roots for k in r.toposort if k.op == "kernel"
                       for i in stored_slots(kernels[k.attrs["callee"][1]])}))
  spec = ProgramSpec(sched[0].name, lower_module(funcs), tuple(_arg(t) for t in sched[0].args), outs)
  return CPUProgram(CPU.compiler.compile(spec))
