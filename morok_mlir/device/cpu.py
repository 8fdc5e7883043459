"""The CPU device: kernel Func -> uop-lower-cpu -> upstream MLIR to the LLVM dialect -> ExecutionEngine(opt_level=OPT_LEVEL).

Public API (what the realize driver uses):
  CPU.compile(f: Func) -> CPUProgram        lower + JIT one kernel; the method cache (keyed by the canonical lowered
                                            text) compiles each distinct kernel once per process
  CPU.compile_many(fs) -> [CPUProgram]      the same for several kernels: those in neither cache are JIT-compiled
                                            together, BATCH to an engine (one LLVM codegen; its object is one shared
                                            object, entered in the disk cache under each kernel's key)
  program(*bufs: np.ndarray)                run it; buffers are checked (count, dtype, size, contiguity, writable
                                            outputs) and a bad one raises ValueError/TypeError before any native code
  program.call_ptrs(*addrs: int)            the unchecked fast path on raw data pointers (~1 us); programs are re-entrant
  program.call_buffers(bufs, inputs)        the realize driver's path, on allocated Buffers (device/buffer.py)
  CPU.allocator.alloc(size, dtype) / free   64-byte-aligned contiguous numpy arrays, pooled by byte size; copyin, copyout,
                                            copy, offset, ptr, as_numpy: the interface every allocator has
  compile_module(funcs) -> CPUProgram       a whole kernel-level module, called through its lowered @schedule

The stages mirror Morok's device.rs: renderer (the uop-lower-cpu pass: Func -> ProgramSpec with upstream MLIR),
compiler (upstream passes: -> LLVM-dialect text, the CompiledSpec), runtime (text -> CPUProgram via the JIT).
Buffers are passed with the bare-pointer memref convention, so a kernel is `void k(T0*, T1*, ...)`; the engine's
packed wrapper `_mlir_<name>(void**)` is called through ctypes with a pre-built argument array (one set per concurrent
call, so threads may share a program).
Bool buffers are numpy bool arrays (one byte, 0/1); the kernel reads and writes them as i8.

Performance pieces: a kernel that uop-optimize marked parallel takes two trailing index arguments (the bounds of its
outermost loop) and runs in THREADS chunks on a thread pool (ctypes releases the GIL); compiled kernels are kept on disk
as shared objects (DiskCache), so a new process does not JIT them again, and a JIT-compiled kernel moves onto its
shared object once that is linked (an ExecutionEngine holds ~1 MB, a loaded object a few pages); the allocator recycles
buffers when their last array dies, so a repeated realize does not page-fault fresh memory. The method cache is an LRU
(lru.LRU: MOROK_MEM_CACHE_ENTRIES, MOROK_MEM_CACHE_MB)."""
from __future__ import annotations
import _ctypes, atexit, ctypes, ctypes.util, functools, itertools, mmap, os, shutil, stat, subprocess, sys, tempfile, threading, time
import contextlib, json, warnings, weakref
from dataclasses import dataclass, replace
import numpy as np
from morok_mlir.core.dtype import DType, PtrDType, dtypes, to_dtype
from morok_mlir.core.uop import UOp
from morok_mlir.lru import LRU
from morok_mlir.core import env
from morok_mlir.device import disk_prune, memory
from morok_mlir.ir import families
from morok_mlir.device import pool
from morok_mlir.device.pool import Chain, Pool
from morok_mlir.host import CPU_FLAGS, VEC_WIDTH, THREADS, spare_cores
from morok_mlir.dialects.ops import Ops

# CPython's own SHA-256 where it has one by this name (3.11): hashlib's is OpenSSL's, ~3.4 MB of libcrypto mapped
try: from _sha256 import sha256
except ImportError: from hashlib import sha256

OPT_LEVEL = 2   # LLVM's -O level: its IR pipeline and its code generator (ExecutionEngine sets both). Kernels arrive vectorized
                # and tiled: O3's further passes cost compile time and bought no speed (A/B in bench/RESULTS.md)
LLVM_PIPELINE = ("builtin.module(convert-scf-to-cf,convert-vector-to-llvm,convert-math-to-llvm,expand-strided-metadata,"
                 "finalize-memref-to-llvm,convert-arith-to-llvm,convert-cf-to-llvm,convert-func-to-llvm{use-bare-ptr-memref-call-conv=1},"
                 "reconcile-unrealized-casts)")
# LLVM lowers f64->f16 (and f16 ops it widens to f64) to compiler-rt's __truncdfhf2, which libgcc_s (GCC >= 12)
# exports; loading it globally lets the JIT's process-symbol lookup find it
try: ctypes.CDLL(ctypes.util.find_library("gcc_s") or "libgcc_s.so.1", mode=ctypes.RTLD_GLOBAL)
except OSError: pass
# glibc keeps the heap that freed ExecutionEngines leave (0.2-0.4 MB per JIT-compiled kernel) unless asked to return it
_trim = getattr(ctypes.CDLL(None), "malloc_trim", None)
_lock = threading.Lock()   # one MLIR context for all CPU compiles; MLIR contexts are not safe to share across threads


@dataclass(frozen=True)
class ProgramSpec:
  name: str                  # entry point in src
  src: str                   # upstream MLIR module text (the output of uop-lower-cpu)
  args: tuple[tuple[int, DType], ...]  # (element count, dtype) per buffer argument
  outs: tuple[int, ...]      # arguments the kernel stores to
  par: tuple[int, int, int] | None = None  # (outer loop size, threads, chunk grain[, 1]): the kernel takes (lo, hi)
                                           # last, and with a 4th element 1 also its chunk's index (0 .. threads-1)
  phases: tuple = ()         # ((entry, par), ...) run in order instead of `name` (a contraction's pack/mm/epilogue)
  scratch: tuple[int, ...] = ()  # f32 element counts of scratch buffers passed after the kernel's buffers
  align: int = 1             # byte alignment the outputs need (aligned nontemporal vector stores)
  reuse: tuple[tuple[int, int, int, tuple[int, ...]], ...] = ()  # (phase, argument, scratch, keys): the phase fills that
          # scratch buffer from that argument alone, so its result holds while the argument does; and from the contents
          # of the (small) arguments keys, the symbolic sizes' values: its result holds for those contents
  def plain(self) -> list:
    """The spec less its source text, as JSON's lists, strings and numbers (a schedule kept on disk: realize.save_plan)."""
    return [self.name, [[n, d.name] for n, d in self.args], list(self.outs), self.par, [list(p) for p in self.phases],
            list(self.scratch), self.align, [[*r[:3], list(r[3])] for r in self.reuse]]
  @staticmethod
  def from_plain(x: list) -> ProgramSpec:
    """plain()'s spec back (its src empty); ValueError, TypeError or KeyError on anything else: the entry is damaged."""
    name, args, outs, par, phases, scratch, align, reuse = x
    ints = lambda v: tuple(_int(i) for i in v)
    opt = lambda v: None if v is None else ints(v)
    if type(name) is not str or not all(type(e) is str for e, _ in phases): raise TypeError("names are strings")
    return ProgramSpec(name, "", tuple((_int(n), DTYPES[d]) for n, d in args), ints(outs), opt(par), tuple((e, opt(p)) for e, p in phases),
                       ints(scratch), _int(align), tuple((*ints(r[:3]), ints(r[3])) for r in reuse))

def _mkey(s: ProgramSpec) -> tuple:
  """A spec's method cache key: the argument dtypes join the text (int8/uint8/bool buffers all lower to i8 memrefs, but
  the checks differ)."""
  return s.src, s.args, s.par, s.phases

def _int(v) -> int:
  if type(v) is not int or v < 0: raise ValueError(f"{v!r} is not a count")
  return v
DTYPES = {d.name: d for d in vars(dtypes).values() if isinstance(d, DType)}

@dataclass(frozen=True)
class CompiledSpec:
  name: str
  src: str                   # LLVM-dialect module text
  spec: ProgramSpec

def _arg(u: UOp) -> tuple[int, DType]:
  """(elements, element dtype) of a kernel argument: a buffer UOp with a sized pointer dtype."""
  if not isinstance(u.dtype, PtrDType) or u.dtype.size is None: raise TypeError(f"kernel arguments must be flat static buffers, got {u.dtype}")
  return u.dtype.size, u.dtype.base

def stored_slots(f: Func) -> set[int]:
  """Arguments a kernel stores to."""
  return {u.src[0].src[0].attrs["slot"] for r in f.roots for u in r.toposort
          if u.op is Ops.STORE and u.src[0].op is Ops.INDEX and u.src[0].src[0].op is Ops.BUFFER}

def out_align(f: Func) -> int:
  """Byte alignment a kernel's outputs need: its nontemporal vector stores are aligned to their width (uop-lower-cpu
  has checked the attribute is an integer)."""
  return 4 * f.attrs.get("uop.nontemporal", 0) or 1

# LLVM's own vectorizer (the loops codegen leaves scalar: a softmax's rows) takes the kernels' vector width, VEC_WIDTH
# lanes: tuned for recent Intel cores it prefers 256-bit vectors even where the core has 512-bit ones
FUNC_ATTRS = f' attributes {{passthrough = ["noinline", ["prefer-vector-width", "{32 * VEC_WIDTH}"]]}}'
class CPURenderer:
  """uop-lower-cpu on one kernel. The entry point is always `kernel`, so equal kernels render to equal text."""
  def render(self, f: Func, name: str = "kernel") -> ProgramSpec:
    from morok_mlir.codegen.program import lower_program   # (codegen loads with the first compile)
    from morok_mlir.codegen.emitter import Emitter, public_attrs
    # noinline: the engine's packed wrapper would otherwise inline the body and LLVM would optimise it twice
    with public_attrs(FUNC_ATTRS): src, phases, scratch, reuse = lower_program(f, name)
    par = phases[0][1] if len(phases) == 1 else None
    return ProgramSpec(name, Emitter.module([src]), tuple(_arg(t) for t in f.args), tuple(sorted(stored_slots(f))), par,
                       tuple(phases) if len(phases) > 1 or phases[0][0] != name else (), tuple(scratch),
                       out_align(f), tuple(reuse))

_ctx, _ctx_uses = None, 0
def _context():
  """The context upstream MLIR is parsed in (use it holding _lock). A context keeps every type and attribute it ever
  uniqued (tens of KB per kernel) until it dies, so a fresh one replaces it every 128 uses (26 ms)."""
  global _ctx, _ctx_uses
  from mlir import ir
  if _ctx is None or _ctx_uses >= 128: _ctx, _ctx_uses = ir.Context(), 0
  _ctx_uses += 1
  return _ctx

class CPUCompiler:
  cache_key = f"CPU-mlir-llvm-O{OPT_LEVEL}"
  def compile(self, spec: ProgramSpec) -> CompiledSpec:
    from mlir import ir
    from mlir.passmanager import PassManager
    with _lock, _context():
      mod = ir.Module.parse(spec.src)   # raises MLIRError (a Python exception) on bad text
      PassManager.parse(LLVM_PIPELINE).run(mod.operation)
      return CompiledSpec(spec.name, str(mod), spec)
  @staticmethod
  def lower_many(items: list[tuple[str, str]]):
    """The (prefix, upstream MLIR text) items as one LLVM-dialect module (in the current context, holding _lock), each
    one's functions renamed with its prefix (declarations of outside functions kept once): one JIT engine, one LLVM
    codegen for all of them."""
    from mlir import ir
    from mlir.passmanager import PassManager
    mod, declared = ir.Module.create(ir.Location.unknown()), set()
    for pre, src in items:
      m = ir.Module.parse(src)
      ops = list(m.body.operations)
      for op in ops:
        if len(op.regions) and len(op.regions[0].blocks):
          name = ir.StringAttr(op.attributes["sym_name"]).value
          ir.SymbolTable.replace_all_symbol_uses(name, pre + name, m.operation)
          ir.SymbolTable.set_symbol_name(op, pre + name)
      for op in ops:
        if len(op.regions) and not len(op.regions[0].blocks):
          if (name := ir.StringAttr(op.attributes["sym_name"]).value) in declared: continue
          declared.add(name)
        mod.body.append(op)
    PassManager.parse(LLVM_PIPELINE).run(mod.operation)
    return mod

def _trusted(st: os.stat_result) -> bool:
  """A file or folder only this user (or root, who can write into any process anyway) can have written: its owner is
  one of them and group and others have no write permission."""
  return st.st_uid in (os.geteuid(), 0) and not st.st_mode & 0o022

def _read(path: str, limit: int = 1 << 26) -> bytes:
  """A trusted regular file's bytes, the last component not followed if a link; anything else (a directory, a FIFO,
  a link, too big, unreadable, another user's or writable by others) raises OSError."""
  fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
  try:
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode) or st.st_size > limit or not _trusted(st): raise OSError(f"{path}: not a cache file")
    with open(fd, "rb", closefd=False) as f: return f.read()
  finally: os.close(fd)

def installed(dist: str) -> str:
  """The version of an installed distribution, from its .dist-info folder's name on sys.path (importlib.metadata, which
  says the same, imports ~5 MB of modules: email, zipfile, csv)."""
  pre = dist.replace("-", "_") + "-"
  for d in sys.path:
    try: found = [n for n in os.listdir(d or ".") if n.startswith(pre) and n.endswith(".dist-info")]
    except OSError: continue
    if found: return found[0][len(pre):-len(".dist-info")]
  from importlib.metadata import version
  return version(dist)

_REFUSED: set[str] = set()   # folders DiskCache refused (and warned about) in this process
def private_dir(d: str) -> str | None:
  """d as a folder no other user can write into or swap: made 0700 (with any missing parents) if absent, its resolved
  path; None when it is not a trusted folder or a folder above it lets another user rename it (writable by others,
  without the sticky bit that /tmp has, or owned by another user)."""
  try:
    d = os.path.realpath(d)
    *up, _ = chain = list(itertools.accumulate(d.split(os.sep)[1:], os.path.join, initial=os.sep))
    for p in chain:
      if not os.path.lexists(p):
        try: os.mkdir(p, 0o700)
        except FileExistsError: pass
    if not stat.S_ISDIR((st := os.lstat(d)).st_mode) or not _trusted(st): return None   # lstat: a link made since is refused
    for p in up:
      st = os.lstat(p)
      if not stat.S_ISDIR(st.st_mode) or st.st_uid not in (os.geteuid(), 0) or st.st_mode & 0o022 and not st.st_mode & stat.S_ISVTX: return None
    return d
  except OSError: return None

NICE = ["nice", "-n", "19"] if shutil.which("nice") else []   # the linker yields the cores to running kernels
# code and read-only data share a segment: a small kernel's object maps 2 pages instead of 4 and is 7 KB on disk, not 15
# (ld.gold lacks the option: then the plain link)
LINKS = (["cc", "-shared", "-Wl,-z,noseparate-code"], ["cc", "-shared"])

class DiskCache:
  """Compiled kernels as shared objects in MOROK_CACHE_DIR (default ~/.cache/morok-mlir; MOROK_DISK_CACHE=0 turns it off),
  at most MOROK_CACHE_MAX_MB megabytes (default 512): after every 1/16 of that written, the least recently used entries
  (oldest .so mtime; a hit touches it) are deleted down to the limit, and temporaries an hour old with them.

  The key hashes the kernel's lowered IR, the compiler (MLIR version, our LLVM pipeline) and the CPU's features. `<key>.so`
  sits beside `<key>.sum`, the sha256 of the key and the .so's bytes (read as bytes), so an entry proves it belongs to its
  key: a damaged one of any kind (truncated, empty, garbage, swapped with another key's, a directory, unreadable, an
  object that does not load or lacks the entry points) is rebuilt and replaced, never loaded and never an error. Files are
  written under fresh temporary names (mkstemp: never through a file or link already there) and renamed into place, so
  concurrent processes see whole files.
  A shared object runs its code when loaded, so the cache trusts only what no other user can have written: the folder
  is made 0700, and one another user owns or can write to (or rename, through a folder above it) is refused with one
  warning for a folder of this user's own (private_dir); an entry another user owns or can write to is never loaded.
  In a folder no one else can write, the sum guards against damage (torn writes, a full disk), not against people.
  Every JIT-compiled kernel is linked (one after another on a background thread, the linker at the lowest CPU priority,
  so the kernels a fresh model just compiled run at full speed meanwhile; a process waits for them at exit) and its
  program moves onto the loaded object; with the cache off, in a private temporary directory, deleted once loaded."""
  VERSION = "morok-cpu-3"   # 3: entry points named after the key (k<key>_kernel), several kernels to one object
  def __init__(self):
    self.enabled = env.get("MOROK_DISK_CACHE")
    self.dir = env.get("MOROK_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "morok-mlir")   # (checked when first used)
    self.max_bytes = int(env.get("MOROK_CACHE_MAX_MB") * 2**20)
    self.queue: list[tuple] = []   # (key, object file, directory, program) waiting for the link worker
    self.idle = threading.Condition()
    self.worker: threading.Thread | None = None
    self.hits = self.misses = 0     # verified loads / JIT compiles, for tests and DEBUG
    self.written, self._lock, self._ids, self._tmpdir = None, threading.RLock(), itertools.count(), None
    atexit.register(self.flush)
  @property
  def dir(self) -> str:
    """The folder in use: the one asked for if private_dir trusts it, else this user's folder in the temporary
    directory, checked the same way, or a folder of this process's own."""
    if self._dir is None:
      with self._lock:
        if self._dir is None: self._dir = private_dir(self._want) or self._refused()
    return self._dir
  @dir.setter
  def dir(self, d: str) -> None: self._want, self._dir = d, None
  def _refused(self) -> str:
    d = private_dir(os.path.join(tempfile.gettempdir(), f"morok-mlir-{os.geteuid()}")) or self._private()
    if self._want not in _REFUSED:
      _REFUSED.add(self._want)
      warnings.warn(f"kernel cache folder {self._want} is not private to this user (another user's, writable by group or others, "
                    f"under a folder others can write to, or not creatable): its shared objects could run another user's code; "
                    f"using {d} instead", RuntimeWarning, stacklevel=2)
    return d
  @functools.cached_property
  def salt(self) -> str:
    """What besides a kernel's text decides its code: this cache's format, the MLIR release, our pipeline, the CPU."""
    return f"{self.VERSION}|{installed('xtc-mlir-python-bindings')}|{LLVM_PIPELINE}|O{OPT_LEVEL}|{','.join(sorted(CPU_FLAGS))}|"
  def key(self, spec: ProgramSpec) -> str: return sha256((self.salt + spec.src).encode()).hexdigest()[:40]
  @staticmethod
  def digest(key: str, data: bytes) -> bytes: return sha256(key.encode() + b"\0" + data).hexdigest().encode()
  def get(self, key: str) -> str | None:
    """Path of a verified shared object for key (touched: most recently used), or None."""
    return os.path.join(self.dir, key + ".so") if self.read(key, "so") is not None else None
  def read(self, key: str, ext: str) -> bytes | None:
    """The bytes of entry <key>.<ext> if its sum (<key>.sum) proves them (touched: most recently used), else None."""
    if not self.enabled: return None
    path = os.path.join(self.dir, f"{key}.{ext}")
    try:   # (_read refuses another user's entries)
      if _read(os.path.join(self.dir, key + ".sum"), 4096).strip() != self.digest(key, data := _read(path)): return None
    except (OSError, ValueError): return None
    try: os.utime(path)
    except OSError: pass   # a read-only cache is still a cache
    return data
  def write(self, key: str, ext: str, data: bytes) -> None:
    """data as entry <key>.<ext>, with its sum: each written under a temporary name, then renamed into place (a reader in
    between sees a sum that does not prove the data, and no entry)."""
    if not self.enabled: return
    made = []
    try:
      d = self.dir
      for x, b in ((ext, data), ("sum", self.digest(key, data))):
        fd, tmp = self._mkstemp(d, key, x); made.append(tmp)
        with open(fd, "wb") as f: f.write(b)
      for x, tmp in zip((ext, "sum"), made): os.replace(tmp, os.path.join(d, f"{key}.{x}"))
      made = []
    except OSError: pass
    finally:
      for tmp in made:
        try: os.unlink(tmp)
        except OSError: pass
  def put(self, keys: list[str], engine, progs: list[CPUProgram] = ()) -> None:
    """Store the object code of an engine (one shared object, an entry under each key) and move the programs JIT-compiled
    in it onto that object once linked."""
    try:
      d = self.dir if self.enabled else self._private()
      os.makedirs(d, 0o700, exist_ok=True)   # (removed since it was checked)
      fd, obj = self._mkstemp(d, keys[0], "o"); os.close(fd)
      with _lock: engine.dump_to_object_file(obj)
    except OSError: return
    with self.idle:
      self.queue.append((keys, obj, d, [weakref.ref(p) for p in progs]))
      # set once started: a worker that never started (an interrupt inside start()) would keep flush() waiting at exit
      if self.worker is None: (w := threading.Thread(target=self._links, daemon=True, name="morok-link")).start(); self.worker = w
  def _links(self) -> None:
    while True:
      with self.idle: job = self.queue.pop(0) if self.queue else None
      if job is None:
        if _trim is not None: _trim(0)   # the engines of the programs just moved onto their objects are gone
        with self.idle:
          if not self.queue: self.worker = None; self.idle.notify_all(); return
        continue
      try: self._link(*job)
      except BaseException:   # flush must not wait for a worker that is gone
        with self.idle: self.worker = None; self.idle.notify_all()
        raise
  def _mkstemp(self, d: str, key: str, ext: str) -> tuple[int, str]:
    """A new file of this process's own (O_EXCL: never one already there, or a link); a name no earlier file of this
    process had (the loader takes an already loaded path for the same file), matching disk_prune.TEMP."""
    return tempfile.mkstemp(f".{ext}.tmp", f"{key}.{os.getpid()}.{next(self._ids)}.", d)
  def _private(self) -> str:
    with self._lock:
      if self._tmpdir is None:
        self._tmpdir = tempfile.mkdtemp(prefix="morok-")
        atexit.register(shutil.rmtree, self._tmpdir, True)
    return self._tmpdir
  def _link(self, keys: list[str], obj: str, d: str, progs: list[weakref.ref]) -> None:
    """Link the object of one engine's programs, move them onto it, and enter it under each key (hard links of one file:
    a process that loads several of them maps it once)."""
    made = [obj]
    try:
      fd, tmp = self._mkstemp(d, keys[0], "so"); os.close(fd); made.append(tmp)
      if all(subprocess.run([*NICE, *cc, "-o", tmp, obj, "-lm"], capture_output=True).returncode for cc in LINKS): return
      with open(os.open(tmp, os.O_RDONLY | os.O_NOFOLLOW), "rb") as f:
        os.fchmod(f.fileno(), 0o644); data = f.read()   # not group-writable whatever the umask: get() trusts it
      sums = []
      for key in keys:
        fd, tsum = self._mkstemp(d, key, "sum"); made.append(tsum); sums.append(tsum)
        with open(fd, "wb") as f: f.write(self.digest(key, data))
      names = []   # a fresh name of this process's own for each key but the last, which takes tmp itself
      for key in keys[:-1] if self.enabled else []:
        fd, src = self._mkstemp(d, key, "so"); os.close(fd); os.unlink(src); os.link(tmp, src); made.append(src); names.append(src)
      for prog in progs:   # (once linked under every name: a program counts its share of the file)
        if (p := prog()) is not None:
          try: p._load(tmp)
          except (OSError, AttributeError, RuntimeError): pass   # it keeps its engine
      if not self.enabled: return
      for key, src, tsum in zip(keys, names + [tmp], sums):
        so = os.path.join(d, key + ".so")
        for dst in (so, so[:-3] + ".sum"):   # a directory where an entry belongs is damage too
          if os.path.isdir(dst) and not os.path.islink(dst): shutil.rmtree(dst, ignore_errors=True)
        os.replace(src, so); os.replace(tsum, so[:-3] + ".sum")
      with self._lock:   # (written is None until the first check of this process)
        due = self.written is None or self.written + len(data) >= self.max_bytes // 16
        self.written = 0 if due else self.written + len(data)
      if due: self.prune()
    except OSError: pass
    finally:
      for path in made:
        try: os.unlink(path)
        except OSError: pass
  def prune(self) -> None:
    """Sweep the cache down to max_bytes (disk_prune, in a child process: none of its work holds this one's GIL)."""
    subprocess.run([*NICE, sys.executable, "-I", "-S", disk_prune.__file__, self.dir, str(self.max_bytes)], capture_output=True)
  def flush(self):
    with self.idle:
      while self.worker is not None: self.idle.wait()

_pool: Pool | None = None
_pool_lock = threading.Lock()
def _workers() -> Pool:
  global _pool
  if _pool is None:
    with _pool_lock:
      if _pool is None: _pool = Pool(max(1, THREADS - 1), _lock)
  return _pool
_orphans: list = []
def _forked():
  global _pool, _ctx
  # a forked child has none of the parent's workers, nor its MLIR context's threads: that context is left alone (its
  # destructor would wait for them) and a new one made when needed
  _orphans.append(_ctx)
  if _pool is not None: _pool.closed = True   # (a Chain made before the fork runs its chunks itself)
  _pool = _ctx = None
os.register_at_fork(after_in_child=_forked)

def chunks(n: int, parts: int, grain: int) -> list[tuple[int, int]]:
  """[0, n) in at most `parts` nonempty pieces whose inner bounds are multiples of grain."""
  blocks = -(-n // grain)
  cuts = [min(n, (blocks * i // parts) * grain) for i in range(parts + 1)]
  return [(a, b) for a, b in zip(cuts, cuts[1:]) if b > a]

ENGINE_BYTES = 1 << 20   # what an ExecutionEngine holds (its own LLJIT, target machine, code pages): ~1 MB, measured

class _Code:
  """Where a program's entry points live: a JIT engine, or a loaded shared object that is closed when the last user
  (a program, or an argument set of a call in flight) lets go of it."""
  handle = None
  def __init__(self, entries: list[str], engine=None, lib: str | None = None):
    if lib is not None:
      h = ctypes.CDLL(lib)   # ctypes never closes it: __del__ does
      st = os.stat(lib)      # (an object several kernels' entries share is mapped once: each counts its share)
      self.handle, self.nbytes = h._handle, st.st_size // max(1, st.st_nlink)
      addrs = [ctypes.cast(getattr(h, f"_mlir_{e}"), ctypes.c_void_p).value for e in entries]
    else:
      self.engine, self.nbytes = engine, ENGINE_BYTES
      addrs = [engine.raw_lookup(e) for e in entries]   # packed wrappers: void _mlir_<name>(void **args)
    if not all(addrs): raise RuntimeError(f"lookup of {entries} failed")
    self.addrs, self.fns = addrs, [ctypes.CFUNCTYPE(None, ctypes.c_void_p)(a) for a in addrs]
  def __del__(self):
    if self.handle is not None:
      try: _ctypes.dlclose(self.handle)
      except Exception: pass

class _Args:
  """One call's argument arrays: the buffer pointers, each phase's packs (chunk bounds) and its scratch buffers; runs,
  the call of its phases but those skipped, by the skipped phases' numbers."""
  __slots__ = ("code", "ptrs", "phases", "scratch", "keep", "runs", "keyed")
  def __init__(self, code, ptrs, phases, scratch, keep):
    self.code, self.ptrs, self.phases, self.scratch, self.keep, self.runs, self.keyed = code, ptrs, phases, scratch, keep, {}, False
  def run(self, skip: frozenset = frozenset()):
    """The call of every phase not in skip: one ctypes call for a serial kernel, else one native call (pool.Chain) that
    hands each phase's chunks to the workers, without coming back to Python between phases."""
    if (r := self.runs.get(skip)) is not None: return r
    steps = [(fn, packs) for i, (fn, packs) in enumerate(self.phases) if i not in skip]
    if len(steps) == 1 and len(steps[0][1]) == 1: r = functools.partial(steps[0][0], steps[0][1][0])
    else:
      c = Chain([(ctypes.cast(fn, ctypes.c_void_p).value, [ctypes.addressof(p) for p in packs]) for fn, packs in steps],
                _workers() if any(len(packs) > 1 for _, packs in steps) else None, _lock)
      r = c.serial if c.pool is None else c
      self.keep.append(c)   # (c.serial does not hold the arrays it reads)
    self.runs[skip] = r
    return r

class SharedScratch:
  """Scratch buffers for programs that never run at the same time (a TinyJit plan's kernels, run one after another):
  one block as big as the most any one of the schedule items' programs asks for, each program's buffers at offsets in
  it (memory.ALIGN apart), allocated when first used."""
  def __init__(self, items):
    self.size = max((self._span(getattr(getattr(it.program, "spec", None), "scratch", ())) for group in items for it in group), default=0)
    self.block = None
  @staticmethod
  def _span(sizes) -> int: return sum(memory.aligned(4 * n) for n in sizes)
  def take(self, sizes) -> list[np.ndarray]:
    if self._span(sizes) > self.size: return [CPU.allocator.alloc(n, dtypes.float32) for n in sizes]   # a program not counted
    if self.block is None: self.block = CPU.allocator.alloc(self.size, dtypes.uint8)
    offs = itertools.accumulate((memory.aligned(4 * n) for n in sizes[:-1]), initial=0)
    return [self.block[o:o + 4 * n].view(np.float32) for o, n in zip(offs, sizes)]

class Batch:
  """Prepared argument sets (CPUProgram.prepare's, the caller's own) run in order by one native call (pool.Chain), the
  pointers that change per run read from vals (a ctypes array of pointers the caller owns and writes): each (set m,
  argument i, j) of var points set m's argument i at vals[j]. The sets then read those arguments from vals only, and
  the batch holds them (and so their code) while it lives."""
  def __init__(self, sets: list[_Args], var: list[tuple[int, int, int]], vals):
    base, self.sets, self.vals = ctypes.addressof(vals), sets, vals
    for m, i, j in var:
      for _, packs in sets[m].phases:
        for p in packs: p[i] = base + 8 * j
    steps = [(ctypes.cast(fn, ctypes.c_void_p).value, [ctypes.addressof(p) for p in packs]) for a in sets for fn, packs in a.phases]
    c = self.chain = Chain(steps, _workers() if any(len(packs) > 1 for _, packs in steps) else None, _lock)
    self.run = c.serial if c.pool is None else c
  @staticmethod
  def takes(args) -> bool: return type(args) is _Args and not args.keyed   # (a Variants' set picks its copy in Python)
  @staticmethod
  def runs(steps, vals) -> list:
    """steps (args, var, other) in order as a list of Batches of their consecutive runs of sets Batch takes (var: each
    (argument i, j) that reads vals[j]) and, between them, the others' `other`, run on their own."""
    out, run = [], []
    def flush():
      if run: out.append(Batch([a for a, _ in run], [(m, i, j) for m, (_, var) in enumerate(run) for i, j in var], vals))
      run.clear()
    for args, var, other in steps:
      if Batch.takes(args): run.append((args, var))
      else: flush(); out.append(other)
    flush()
    return out

class CPUProgram:
  """A compiled kernel: its code (a JIT engine, or a shared object from the disk cache, which a JIT-compiled program
  moves onto once linked) and argument sets. Re-entrant: a call takes an argument set from a free list and puts it
  back (one pop and one append, atomic under the GIL), so threads never share one; a set made for the engine is dropped
  on return once the program has moved, and the engine is freed when the last such set goes."""
  takes_scratch = True   # call_buffers takes the schedule's arrays for its scratch buffers
  def __init__(self, c: CompiledSpec | None = None, spec: ProgramSpec | None = None, lib: str | None = None, engine=None,
               key: str | None = None, fam: tuple[str, tuple[int, ...]] | None = None):
    self.spec = spec = c.spec if c is not None else spec
    self.name = spec.name
    self._entries = spec.phases or ((spec.name, spec.par),)
    # the entry points' names in a shared engine and object: k<key>_<entry>, or a family's generic kernel's, which
    # takes this kernel's constants after its arguments (ir/families.py)
    prefix, self.consts = fam or (f"k{key}_" if key else "", ())
    self._symbols = [prefix + e for e, _ in self._entries]
    self._consts = (ctypes.c_int64 * max(1, len(self.consts)))(*self.consts)
    self.disk_key = key   # its disk cache entry, where it has one
    if lib is not None or engine is not None: self.code = _Code(self._symbols, engine=engine, lib=lib)
    else:
      from mlir import ir
      from mlir.execution_engine import ExecutionEngine
      with _lock, _context():
        self.code = _Code([e for e, _ in self._entries], engine=ExecutionEngine(ir.Module.parse(c.src), opt_level=OPT_LEVEL, enable_pic=True))
    self._np = [(size, np.dtype(dt.np)) for size, dt in spec.args]
    self._lend = 4 * sum(spec.scratch) >= self.LEND_BYTES
    self._free = [self._argset(lent=self._lend)]
    self._kept: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()   # input UOp -> {scratch: array it filled}
    self._kept_lock = threading.Lock()
  # bytes of reusable phase results (packed weights) a program keeps, least recently used dropped first. A count of 8
  # thrashed: shufflenet runs one program for 11 blocks, each with its own weights, and repacked them on every call
  # (a third of that program's time); entries also go when their input dies
  KEEP_BYTES = 1 << 28
  # call_ptrs' argument sets whose scratch takes this many bytes hold it during a call only (the allocator's pool hands
  # the blocks to the next call of any program): a program run once, or then under a TinyJit plan (which shares one
  # scratch set among its kernels), keeps none of its own (an LLM's 64 programs held 37 MB, used once each)
  LEND_BYTES = 1 << 20
  @property
  def nbytes(self) -> int:
    """What the program holds: code, its lowered text, one argument set's scratch buffers."""
    return self.code.nbytes + len(self.spec.src) + 4 * sum(self.spec.scratch)
  def _load(self, lib: str) -> None:
    """Move onto the shared object lib (the same code as the engine's): calls in flight finish on the engine."""
    self.code, self._free = _Code(self._symbols, lib=lib), []
  def _argset(self, kept: dict | None = None, shared: SharedScratch | None = None, lent: bool = False) -> _Args:
    """lent: without scratch (None) until _lend_scratch fills it for a call."""
    code, spec = self.code, self.spec
    n, ns = len(spec.args), len(spec.args) + len(spec.scratch)
    # shared: the plan's arrays for this program (a list) or a SharedScratch
    own = None if lent or shared is None else shared if isinstance(shared, list) else shared.take(spec.scratch)
    scratch = None if lent else [kept[i] if kept and i in kept else own[i] if own else CPU.allocator.alloc(x, dtypes.float32)
                                 for i, x in enumerate(spec.scratch)]
    ptrs = (ctypes.c_void_p * max(ns, 1))(*([0] * n + ([0] * (ns - n) if lent else [CPUAllocator.ptr(a) for a in scratch])))
    slot = lambda i: ctypes.addressof(ptrs) + i * ctypes.sizeof(ctypes.c_void_p)
    phases, keep = [], []   # (fn, [argument pack per chunk]); keep: the chunk bounds the packs point into
    consts = [ctypes.addressof(self._consts) + 8 * j for j in range(len(self.consts))]
    for fn, (_, par) in zip(code.fns, self._entries):
      if par is None: phases.append((fn, [(ctypes.c_void_p * max(ns + len(consts), 1))(*[slot(i) for i in range(ns)], *consts)])); continue
      # each chunk's (lo, hi, chunk index); a phase whose par has a 4th element 1 also takes the index (its buffers)
      bounds = [(ctypes.c_int64 * 3)(lo, hi, i) for i, (lo, hi) in enumerate(chunks(par[0], min(par[1], THREADS), par[2]))]
      nb = 3 if len(par) > 3 and par[3] else 2
      phases.append((fn, [(ctypes.c_void_p * (ns + nb + len(consts)))(*[slot(i) for i in range(ns)],
                                                                      *(ctypes.addressof(b) + 8 * j for j in range(nb)), *consts)
                          for b in bounds]))
      keep += bounds
    return _Args(code, ptrs, phases, scratch, keep)
  def call_ptrs(self, *addrs: int, skip: frozenset = frozenset(), scratch: dict | None = None) -> None:
    """Run on raw data pointers; scratch maps scratch buffer numbers to arrays used in place of this call's own (all
    of them given: a lent set borrows none)."""
    try: a = self._free.pop()
    except IndexError: a = self._argset(lent=self._lend)
    if a.scratch is None and not (scratch and len(scratch) == len(self.spec.scratch)): self._lend_scratch(a)
    try:
      a.ptrs[:len(addrs)] = addrs
      if scratch:
        for s, arr in scratch.items(): a.ptrs[len(addrs) + s] = CPUAllocator.ptr(arr)
      (a.runs.get(skip) or a.run(skip))()
    finally:
      if scratch and a.scratch is not None:
        for s in scratch: a.ptrs[len(addrs) + s] = CPUAllocator.ptr(a.scratch[s])   # no pointer outlives this call
      if self._lend: a.scratch = None   # (back to the pool when the arrays die)
      if a.code is self.code: self._free.append(a)
  def _lend_scratch(self, a: _Args) -> None:
    a.scratch = [CPU.allocator.alloc(x, dtypes.float32) for x in self.spec.scratch]
    n = len(self.spec.args)
    a.ptrs[n:n + len(a.scratch)] = [CPUAllocator.ptr(x) for x in a.scratch]
  def call_buffers(self, bufs: list, inputs: list | None = None, scratch: list | None = None) -> None:
    """The realize driver's path: allocated CPU Buffers, already of the right dtype and size; inputs[i] is the input
    UOp whose (immutable) contents bufs[i] holds, or None. A phase that only repacks an input (a contraction's B
    panels: weights, typically) runs once per input and its result is kept while the input lives. scratch: an array
    for each scratch buffer (the schedule's arena: memory.plan), else the program's own."""
    if not self.spec.reuse: return self.call_ptrs(*[b.ptr for b in bufs], scratch=dict(enumerate(scratch)) if scratch else None)
    skip, fresh, use = set(), [], dict(enumerate(scratch)) if scratch else {}
    for phase, arg, s, keys in self.spec.reuse:
      if (u := inputs[arg] if inputs is not None else None) is None: continue
      if (out := self._kept_at(u, at := self._key(s, keys, lambda j: bufs[j].ptr))) is not None: skip.add(phase)
      else: out = CPU.allocator.alloc(self.spec.scratch[s], dtypes.float32, lasting=True); fresh.append((u, s, at, out))
      use[s] = out
    self.call_ptrs(*[b.ptr for b in bufs], skip=frozenset(skip), scratch=use)
    if fresh: self._keep(fresh)
  def _key(self, s: int, keys: tuple, ptr) -> object:
    """What a kept result of scratch s is kept under: s, with the contents of the arguments keys (at ptr(j)) where the
    phase reads those too (the symbolic sizes' values)."""
    return (s, b"".join(ctypes.string_at(ptr(j), 8 * self.spec.args[j][0]) for j in keys)) if keys else s
  def _kept_at(self, u: UOp, at) -> np.ndarray | None:
    with self._kept_lock:
      if (out := self._kept.get(u, {}).get(at)) is not None: self._kept[u] = self._kept.pop(u)   # most recently used last
    return out
  def _keep(self, fresh: list) -> None:
    """Keep the results (input, scratch, key, array) of a call that succeeded: one per input and scratch (a result for
    other values of the sizes is dropped), within KEEP_BYTES, least recently used inputs dropped first."""
    with self._kept_lock:
      for u, s, at, out in fresh:
        d = self._kept.setdefault(u, {})
        for old in [k for k in d if type(k) is tuple and k[0] == s]: del d[old]
        d[at] = out
      total = sum(a.nbytes for d in self._kept.values() for a in d.values())
      for u in list(self._kept):
        if total <= self.KEEP_BYTES or len(self._kept) == 1: break
        total -= sum(a.nbytes for a in self._kept.pop(u).values())
  def prepare(self, const: frozenset = frozenset(), inputs: list | None = None, scratch: SharedScratch | list | None = None) -> tuple | None:
    """An argument set of the caller's own, for a caller that runs this program on other buffers many times (a TinyJit
    replay): (args, run), where the caller writes buffer pointers into args.ptrs[:len(spec.args)] and run() calls
    every phase on them (one ctypes call for a serial kernel); the caller holds args while it uses run. None when a
    phase of an argument in const (an input whose contents never change) is reusable: call_buffers keeps that phase's
    result; unless inputs (call_buffers') name those inputs: where the results kept for them hold for any values of the
    sizes and exist, the set reads them (and holds them) and run() skips their phases in its one native call; else
    run() takes the results kept for them (for the sizes' values read at the call, where they depend on those too) and
    skips their phases, or runs them into fresh arrays it keeps once the call succeeds (args.keyed: run() reads the
    values each call, so a Batch does not take the set). The set pins the code it was made for (the engine, if the
    program has moved onto its shared object since): prepare again when args.code is not self.code. scratch: buffers
    shared with programs that never run at the same time as this set (else the set has its own)."""
    kept = [(phase, inputs[arg] if inputs is not None else None, s, keys) for phase, arg, s, keys in self.spec.reuse if arg in const]
    if any(u is None for _, u, _, _ in kept): return None
    have = {s: out for _, u, s, keys in kept if not keys and (out := self._kept_at(u, s)) is not None}
    if len(have) < len(kept):
      (a := self._argset(None, scratch)).keyed = frozenset(phase for phase, *_ in kept)   # (a.runs[keyed]: every such phase skipped)
      return a, self._keyed_run(a, kept)
    a = self._argset(have, scratch)
    a.phases = [p for i, p in enumerate(a.phases) if i not in {phase for phase, *_ in kept}]
    # (a native chain reads a's arrays: its call holds a, as a caller may keep only the call and a.ptrs: Variants'). The
    # chain is made on the first call: a caller that runs the set inside a Batch never calls it (an LLM's TinyJit plans
    # held ~3.5 MB of one-kernel chains)
    if len(a.phases) == 1 and len(a.phases[0][1]) == 1: return a, a.run()
    return a, lambda _a=a: _a.run()()
  def _keyed_run(self, a: _Args, keyed: list):
    """prepare's run() for a set whose phases keyed (phase, input, scratch, keys) make results kept per input (and
    keys' contents: the sizes' values, read at each call): where the set holds the result for them, the phase is
    skipped, else the kept result is taken (or the phase runs into a fresh array, kept once the call succeeds)."""
    n, held, full = len(self.spec.args), {}, frozenset(i for i, *_ in keyed)   # held: scratch -> the key of the result a.scratch holds
    def run():
      # (the usual replay: the set holds every result for these values already, its phases skipped)
      if all(held.get(s) == self._key(s, keys, a.ptrs.__getitem__) for _, _, s, keys in keyed) and (r := a.runs.get(full)) is not None: return r()
      off, fresh, took = set(), [], []
      for i, u, s, keys in keyed:
        if held.get(s) == (at := self._key(s, keys, a.ptrs.__getitem__)): off.add(i); continue
        if (out := self._kept_at(u, at)) is None: fresh.append((u, s, at, out := CPU.allocator.alloc(self.spec.scratch[s], dtypes.float32, lasting=True)))
        else: off.add(i)
        a.scratch[s], a.ptrs[n + s] = out, CPUAllocator.ptr(out)
        took.append((s, at))
      held.update((s, None) for s, _ in took)   # (until the call succeeds)
      (a.runs.get(off := frozenset(off)) or a.run(off))()
      held.update(took)
      if fresh: self._keep(fresh)
    return run
  def __call__(self, *bufs: np.ndarray) -> None:
    if len(bufs) != len(self._np): raise TypeError(f"{self.name} takes {len(self._np)} buffers, got {len(bufs)}")
    for i, (b, (size, dt)) in enumerate(zip(bufs, self._np)):
      if type(b) is not np.ndarray: raise TypeError(f"{self.name}: buffer {i} is a {type(b).__name__}, not a numpy array")
      if b.dtype != dt or b.size < size or not b.flags.c_contiguous:
        raise ValueError(f"{self.name}: buffer {i} must be a C-contiguous {dt} array of at least {size} elements, got {b.dtype}[{b.size}]"
                         + ("" if b.flags.c_contiguous else " (not contiguous)"))
    for i in self.spec.outs:
      if not bufs[i].flags.writeable: raise ValueError(f"{self.name}: output buffer {i} is read-only")
      if bufs[i].ctypes.data % self.spec.align:   # (CPU.allocator's arrays are 64-byte aligned)
        raise ValueError(f"{self.name}: output buffer {i} must be {self.spec.align}-byte aligned (nontemporal stores)")
    self.call_ptrs(*[b.ctypes.data for b in bufs])

class CPUAllocator:
  """64-byte-aligned arrays, pooled by byte size. A block returns to the pool on free() or when the last array
  viewing it dies (arrays are made from a memoryview whose finalizer recycles the block), so realizing the same
  graph again reuses its memory instead of page-faulting fresh pages. Large blocks ask for transparent huge pages, and
  so do lasting ones (alloc's `lasting`: a weight's kept panels), carved from shared huge-page slabs (_carve).
  The pool is shared by threads under a lock (reentrant: a finalizer may run inside alloc); arrays under TINY bytes
  never touch it. An allocation the system refuses is a MemoryError with .nbytes and the system's .reason."""
  ALIGN, POOL_LIMIT, HUGE, SMALL, TINY, FIT, PAGE, OPEN_SLABS = 64, 1 << 30, 1 << 21, 1 << 16, 256, 2, 4096, 8
  def __init__(self):
    self.pool: dict[int, list] = {}; self.pooled = 0
    self.live: dict[int, weakref.finalize] = {}   # data address -> the finalizer that recycles its block
    self.used = 0   # bytes of the live pooled blocks (GlobalCounters.mem_used; arrays under SMALL bytes are numpy's own)
    self.slabs: list[list] = []   # [slab, offset of its free tail] of the huge-page slabs lasting blocks are carved from
    self.lock = threading.RLock()
  def _block(self, nbytes: int, lasting: bool = False):
    try: return self._carve(nbytes) if lasting and nbytes < self.HUGE else self._new_block(nbytes)
    except (OSError, MemoryError, ValueError, OverflowError) as e:
      err = MemoryError(f"cannot allocate {nbytes} bytes ({getattr(e, 'strerror', None) or e})")
      err.nbytes, err.reason = nbytes, getattr(e, "strerror", None) or str(e)
      raise err from None
  def _carve(self, nbytes: int):
    """A lasting block under HUGE bytes, from the first slab whose free tail holds it (a new one where none does): each
    slab one 2 MiB-aligned page asked for as a transparent huge page. What lasting blocks hold (a model's packed
    weights) is read from memory at every call, and on a virtual machine each 4 KiB page missing from the TLB costs a
    walk of the guest's and the host's tables: an evicted 2 MiB read ran 4.5x faster from one huge page here. A slab
    stays mapped while any of its blocks, live or pooled, does."""
    with self.lock:
      if (slot := next((x for x in self.slabs if x[1] + nbytes <= self.HUGE), None)) is None:
        self.slabs.append(slot := [self._huge(self.HUGE), 0])
      slab, off = slot
      slot[1] = off + -(-nbytes // self.ALIGN) * self.ALIGN
      self.slabs = [x for x in self.slabs if self.HUGE - x[1] >= self.PAGE][-self.OPEN_SLABS:]   # (a dropped one: its blocks keep it)
      return slab[off:off + nbytes]
  def _huge(self, nbytes: int) -> np.ndarray:
    """nbytes of a mapping of their own from a 2 MiB boundary, asked for as transparent huge pages to their end (a
    mapping started anywhere on a 4 KiB page keeps its first and last partial 2 MiB in small pages; shared memory gets
    none)."""
    m = mmap.mmap(-1, nbytes + self.HUGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    with contextlib.suppress(AttributeError, OSError): m.madvise(mmap.MADV_HUGEPAGE)
    raw = np.frombuffer(m, np.uint8)
    return raw[(o := -self.ptr(raw) % self.HUGE):o + nbytes]
  def _new_block(self, nbytes: int):
    if nbytes >= self.HUGE: return self._huge(nbytes)
    raw = np.empty(nbytes + self.ALIGN, np.uint8)
    off = -self.ptr(raw) % self.ALIGN
    return raw[off:off + nbytes]
  @staticmethod
  def zeros(size: int, dtype: DType) -> np.ndarray:
    """size zeros in a mapping of their own (not pooled: pooled blocks hold old values), without writing them: a page
    takes memory only once written, so a cache a run fills from its start (an LLM's keys and values) holds what it used."""
    m = mmap.mmap(-1, max(size * dtype.itemsize, 1), flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    return np.frombuffer(m, dtype.np, count=size)
  def alloc(self, size: int, dtype, lasting: bool = False) -> np.ndarray:
    # a tiny buffer of a DType (a TinyJit replay's or a small op's output) first: its checks alone cost what np.empty does
    if type(dtype) is DType and type(size) is int and 0 < size * dtype.itemsize < self.TINY: return np.empty(size, dtype.np)
    dt = dtype if type(dtype) is DType else to_dtype(dtype) if not isinstance(dtype, np.dtype) else dtypes.from_np(dtype)
    if not isinstance(size, (int, np.integer)) or size < 0: raise ValueError(f"bad buffer size {size!r}")
    nbytes = int(size) * dt.itemsize
    if not nbytes: return np.empty(0, dt.np)
    if nbytes < self.TINY: return np.empty(size, dt.np)   # within a cache line or a few: alignment buys nothing
    if nbytes < self.SMALL and not lasting and not self.pool.get(nbytes): return self._block(nbytes).view(dt.np)  # malloc is cheap here
    with self.lock:
      if (have := self._fit(nbytes)) is not None: block = self.pool[have].pop(); self.pooled -= have
      else:   # a block made anew replaces the pooled large ones it could serve
        block, have = None, nbytes
        for k in [k for k in self.pool if k >= self.HUGE and nbytes <= k * self.FIT and k < nbytes]: self.pooled -= k * len(self.pool.pop(k))
    if block is None: block = self._block(nbytes, lasting)
    mv = memoryview(block)
    arr = np.frombuffer(mv, dt.np, count=nbytes // dt.itemsize)
    addr = self.ptr(arr)
    self.live[addr] = weakref.finalize(arr, self._recycle, addr, block, have)  # numpy keeps its own view of mv, not mv
    with self.lock: self.used += have
    return arr
  def _fit(self, nbytes: int) -> int | None:
    """The size of the pooled block a request of nbytes takes (under the lock): its own size, or for a large one the
    smallest up to FIT times it, a mapping of its own whose pages past what its users wrote take no memory (an LLM's
    first layer and its other layers, two schedules with arenas of 8.1 and 8.8 MiB: one block pooled, not both)."""
    if self.pool.get(nbytes): return nbytes
    if nbytes < self.HUGE: return None
    return min((k for k, v in self.pool.items() if v and nbytes < k <= self.FIT * nbytes), default=None)
  def _recycle(self, addr: int, block, nbytes: int) -> None:
    with self.lock:
      self.live.pop(addr, None)
      self.used -= nbytes
      if self.pooled + nbytes <= self.POOL_LIMIT:
        self.pool.setdefault(nbytes, []).append(block); self.pooled += nbytes
  def trim(self) -> None:
    """The pooled blocks given back to the system (with the heap's free pages)."""
    with self.lock: self.pool, self.pooled, self.slabs = {}, 0, []
    if _trim is not None: _trim(0)
  def free(self, arr: np.ndarray) -> None:
    """Return arr's block now (the caller promises not to use arr again); arrays not from alloc are ignored."""
    if (fin := self.live.get(addr := self.ptr(arr))) is not None and arr.nbytes: fin()
    elif self.TINY <= arr.nbytes < self.SMALL and arr.flags.c_contiguous and addr % self.ALIGN == 0:
      with self.lock:
        if self.pooled + arr.nbytes <= self.POOL_LIMIT:
          self.pool.setdefault(arr.nbytes, []).append(arr.reshape(-1).view(np.uint8)); self.pooled += arr.nbytes
  # the interface every allocator has (device/buffer.py); here a handle is the flat array itself
  @staticmethod
  def ptr(arr: np.ndarray) -> int:
    # through ctypes' buffer protocol: ~0.25 us against arr.ctypes.data's ~2 us (which builds a helper object per call)
    try: return ctypes.addressof(ctypes.c_char.from_buffer(arr))
    except (TypeError, ValueError): return arr.ctypes.data   # read-only or empty
  @staticmethod
  def as_numpy(arr: np.ndarray) -> np.ndarray: return arr
  @staticmethod
  def offset(arr: np.ndarray, nbytes: int, size: int, dtype: DType) -> np.ndarray:
    if not nbytes and arr.dtype is dtype.npdt: return arr[:size]   # (a TinyJit replay's symbolic outputs: one slice, not four views)
    return arr.reshape(-1).view(np.uint8)[nbytes:nbytes + size * dtype.itemsize].view(dtype.np)
  @staticmethod
  def copy(dst: np.ndarray, src: np.ndarray) -> None:
    """dst and src are flat and C-contiguous (handles are); of one dtype, or of one byte size."""
    if dst.dtype != src.dtype: dst, src = dst.view(np.uint8), src.view(np.uint8)
    if dst.nbytes != src.nbytes: raise ValueError(f"copy: {src.nbytes} bytes into {dst.nbytes}")
    np.copyto(dst, src)
  copyin = copyout = copy   # (dst, src) all three: host memory is host memory
  def from_numpy(self, arr: np.ndarray) -> np.ndarray:
    out = self.alloc(arr.size, arr.dtype); out[:] = arr.reshape(-1); return out
  @staticmethod
  def to_numpy(arr: np.ndarray) -> np.ndarray: return arr.copy()

class CPUDevice:
  name = "CPU"
  def __init__(self):
    self.renderer, self.compiler, self.runtime, self.allocator = CPURenderer(), CPUCompiler(), CPUProgram, CPUAllocator()
    self.disk = DiskCache()
    # an evicted program lives on while a cached schedule holds it: the schedule cache is bounded in bytes of programs too
    self.method_cache: LRU = LRU(lambda p: p.nbytes)
    self.lock = threading.RLock()       # one compile at a time (and the method cache's compound get-or-build)
    self.compile_ms: list[float] = []   # per compiled kernel (cache misses), for DEBUG output and benchmarks
  BATCH = 16   # kernels JIT-compiled in one engine: one LLVM codegen (an engine costs ~14 ms before any code), and a
               # bound on the shared object a later process maps for any one of them
  GROUP = 64   # kernels the realize driver hands compile_many at once (a progress bar's step; batches for the workers)
  def compile(self, f: Func) -> CPUProgram: return self.compile_many([f])[0]
  def compile_many(self, funcs: list[Func]) -> list[CPUProgram]:
    """A program per kernel: from the method cache, else the disk cache, else JIT-compiled together, BATCH at a time.
    Where a core is spare (_workers), forked processes render and compile shares of the kernels (by their estimated
    work) meanwhile, and hand back what they rendered: their programs come through the disk cache."""
    with self.lock:
      # a family's kernels (families.fkey: likely one generic kernel, ir/families.py) go to one process, as one's work
      fams: dict[tuple, list[int]] = {}
      for i, f in enumerate(funcs): fams.setdefault(families.fkey(f), []).append(i)
      units, work = list(fams.values()), [self.work(f) for f in funcs]
      work = [max(work[i] for i in u) + self.KERNEL_WORK * (len(u) - 1) for u in units]
      shares = [[i for u in share for i in units[u]] for share in self.shares(list(range(len(units))), work, self._workers(work) + 1)]
      mine, children = shares[0], []
      for share in shares[1:]:
        if (c := self._fork([funcs[i] for i in share])) is not None: children.append((c, share))
        else: mine = mine + share
      specs = {i: self.renderer.render(funcs[i]) for i in mine}
      progs = self._build(list(specs.values()))
      for (pid, path), share in children:   # (rendered and JIT-compiled here where a child failed to)
        self._wait(pid)
        got = self._handed(path, len(share)) or [self.renderer.render(funcs[i]) for i in share]
        specs.update(zip(share, got))
        progs |= self._build(got)
      families.forget()
    return [progs[_mkey(specs[i])] for i in range(len(funcs))]
  def _build(self, specs: list[ProgramSpec]) -> dict:
    """specs' programs by key: from the method cache, else the disk cache, else JIT-compiled, BATCH to an engine."""
    progs, todo = {}, {}
    for spec in specs:
      if (k := _mkey(spec)) in progs or k in todo: continue
      if (p := self.method_cache.get(k)) is not None: progs[k] = p; continue
      t0 = time.perf_counter()
      if (p := self.load(spec)) is None: todo[k] = spec; continue
      progs[k] = self.method_cache[k] = p
      self.compile_ms.append((time.perf_counter() - t0) * 1e3)
    todo, t0 = list(todo.items()), time.perf_counter()
    for batch in families.batches(todo, lambda it: it[1].src, self.BATCH):
      for (k, _), p in zip(batch, self.jit([spec for _, spec in batch])): progs[k] = self.method_cache[k] = p
    if todo: self.compile_ms += [(time.perf_counter() - t0) * 1e3 / len(todo)] * len(todo)
    return progs
  # characters of rendered text per UOp of a kernel, by its kind (others: 50), and of a Winograd kernel whatever its size:
  # what a kernel's compile costs is estimated from them before it is rendered (lowered text ~ LLVM's time)
  TEXT_PER_NODE = {"uop.contraction": 430, "uop.int8": 430}
  WINOGRAD_TEXT = 87_000
  @classmethod
  def work(cls, f: Func) -> int:
    """f's estimated compile work: its rendered text's characters (see TEXT_PER_NODE) and KERNEL_WORK."""
    if "uop.winograd" in f.attrs: return cls.WINOGRAD_TEXT + cls.KERNEL_WORK
    per = next((v for k, v in cls.TEXT_PER_NODE.items() if k in f.attrs), 50)
    return per * len(f.roots[0].toposort) + cls.KERNEL_WORK
  KERNEL_WORK = 4_000   # characters of kernel text that cost LLVM what compiling one more kernel does (a tiny kernel's ~10 ms)
  @staticmethod
  def shares(items: list, work: list[int], n: int) -> list[list]:
    """items (indices into work) in n shares of about equal work, so that no process waits long for another: the
    largest first to the share with the least so far. LLVM's time grows with a kernel's text (a contraction's
    ~35,000 characters ~100 ms, an elementwise kernel's ~1,000 ~10 ms), and kernels of one model differ 30-fold."""
    out, load = [[] for _ in range(n)], [0] * n
    for i in sorted(items, key=lambda i: -work[i]):
      j = load.index(min(load))
      out[j].append(i); load[j] += work[i]
    return out
  WORKERS: int | None = None   # compile processes besides this one (None: the cores to spare, host.spare_cores)
  CHILD_WORK = 100_000         # characters of kernel text a compile process gets at least (~0.35 s of LLVM's work)
  def _workers(self, work: list[int]) -> int:
    """Compile processes to fork for kernels of this estimated work: one per core to spare (LLVM holds the GIL, so
    threads would take turns), each with CHILD_WORK or more to do (a child's kernels reach this process through the
    disk cache, linked: ~50-100 ms more), and none without the disk cache. Measured on 2 cores at load 1.9, shufflenet's
    first call (35 kernels, 0.69 M characters) took 2.90 s in one process and 1.98 s with a second; at load 3-4, with
    no core to spare, a second process made 24 matmul kernels 8% slower."""
    if not self.disk.enabled or len(work) < 2: return 0
    if self.WORKERS is not None: return min(self.WORKERS, len(work) - 1)
    # (the cores sampled only where the work would take a process: the sampling waits 2 ms)
    if (most := min(sum(work) // self.CHILD_WORK - 1, len(work) - 1)) <= 0: return 0
    return min(spare_cores(), most)
  def _fork(self, funcs: list[Func]) -> tuple[int, str] | None:
    """(pid, file) of a process (forked: nothing to import) that renders funcs, JIT-compiles those no cache holds, links
    them into the disk cache and writes what it rendered to the file (JSON: each spec's plain form and text)."""
    try:
      fd, path = tempfile.mkstemp(".specs.json", dir=self.disk._private()); os.close(fd)
      with _lock: pid = os.fork()   # (_lock held: no other thread of this process is inside MLIR or LLVM meanwhile)
    except OSError: return None
    if pid == 0:   # the child never returns into its parent's code, whatever happens in it
      try: self._child(funcs, path)
      finally: os._exit(0)
    return pid, path
  CHILD_LIMIT = 600.0   # seconds a compile process may take before this process compiles its share itself
  def _wait(self, pid: int) -> None:
    """Until the compile process pid exits; killed past CHILD_LIMIT (its kernels are then compiled here)."""
    deadline = time.monotonic() + self.CHILD_LIMIT
    while not os.waitpid(pid, os.WNOHANG)[0]:
      if time.monotonic() > deadline: os.kill(pid, 9); os.waitpid(pid, 0); return
      time.sleep(0.002)
  def _child(self, funcs: list[Func], path: str) -> None:
    """In a forked compile process: funcs rendered, those in no cache JIT-compiled BATCH to an engine and linked into the
    disk cache, and the specs written to path, last (an unwritten file: the parent renders and compiles them itself)."""
    global NICE
    self.disk._lock = threading.RLock()   # (another thread of the parent may have held it)
    NICE = []                             # this link is what the parent waits for
    specs = [self.renderer.render(f) for f in funcs]
    # (not the method cache: its lock may have been another thread's at the fork; what it holds the disk cache does)
    todo = list({_mkey(s): s for s in specs if self.disk.get(self.disk.key(s)) is None}.values())
    for batch in families.batches(todo, lambda spec: spec.src, self.BATCH):
      keys, code, engine, fams = self._engine(batch)
      with _lock, _context():
        pre = fams.get(f"k{keys[0]}_", (f"k{keys[0]}_",))[0]
        engine.raw_lookup(pre + (batch[0].phases[0][0] if batch[0].phases else batch[0].name))   # compiled here
        fd, obj = self.disk._mkstemp(d := self.disk.dir, keys[0], "o"); os.close(fd)
        engine.dump_to_object_file(obj)
      self.disk._link(list(code), obj, d, [])
    with open(path, "w") as f: json.dump([[s.plain(), s.src] for s in specs], f)
  @staticmethod
  def _handed(path: str, n: int) -> list[ProgramSpec] | None:
    """The n specs a compile process wrote to path (then removed), or None where it wrote none that fit."""
    try:
      with open(path) as f: got = json.load(f)
      specs = [replace(ProgramSpec.from_plain(p), src=src) for p, src in got if type(src) is str]
      return specs if len(specs) == n else None
    except (OSError, ValueError, TypeError, KeyError): return None
    finally:
      with contextlib.suppress(OSError): os.unlink(path)
  def load(self, spec: ProgramSpec) -> CPUProgram | None:
    """The program from the disk cache when it holds a verified object for spec, else None."""
    return self.from_disk(self.disk.key(spec), spec)
  def from_disk(self, key: str, spec: ProgramSpec) -> CPUProgram | None:
    """The program of spec from disk entry key (a verified object), else None."""
    if (so := self.disk.get(key)) is None: return None
    try:
      p = self.runtime(spec=spec, lib=so, key=key, fam=families.entry(so, f"k{key}_")); self.disk.hits += 1
      return p
    except (OSError, AttributeError, RuntimeError, ValueError): return None  # unloadable, or lacks an entry point: rebuild it
  def jit(self, specs: list[ProgramSpec]) -> list[CPUProgram]:
    """The programs compiled in one JIT engine (and stored in the disk cache), each one's functions named after its key."""
    keys, code, engine, fams = self._engine(specs)
    progs = [self.runtime(spec=s, engine=engine, key=k, fam=fams.get(f"k{k}_")) for s, k in zip(specs, keys)]
    self.disk.misses += len(specs)
    self.disk.put(list(code), engine, progs)
    return progs
  def _engine(self, specs: list[ProgramSpec]):
    """(each spec's disk key, one spec per key, a JIT engine of those (each one's functions named after its key, or its
    family's generic kernel's), {a family member's prefix: (its generic's prefix, its constants)})."""
    from mlir import ir
    from mlir.execution_engine import ExecutionEngine
    keys = [self.disk.key(s) for s in specs]
    code = dict(zip(keys, specs))   # one code per key (equal text: int8, uint8 and bool arguments all lower to i8)
    with _lock, _context():
      items, fams = families.units(plain := [(f"k{k}_", spec.src) for k, spec in code.items()])
      try: return keys, code, ExecutionEngine(self.compiler.lower_many(items), opt_level=OPT_LEVEL, enable_pic=True), fams
      except (ir.MLIRError, RuntimeError):   # a generic text MLIR or LLVM refuses (a form families.py does not know)
        if not fams: raise
      return keys, code, ExecutionEngine(self.compiler.lower_many(plain), opt_level=OPT_LEVEL, enable_pic=True), {}   # each alone
  def build(self, spec: ProgramSpec) -> CPUProgram:
    """From the disk cache when it holds a verified object for spec, else JIT (and store it there)."""
    return self.load(spec) or self.jit([spec])[0]

CPU = CPUDevice()

def native(src: str, names: tuple[str, ...], lock) -> tuple:
  """(what holds the code, each name's packed entry point) of an LLVM-dialect module (the worker pool's loops): from the
  disk cache's object for it, else JIT-compiled and stored there, as a kernel's."""
  key = sha256((CPU.disk.salt + src).encode()).hexdigest()[:40]
  if (so := CPU.disk.get(key)) is not None:
    try: code = _Code(list(names), lib=so)
    except (OSError, AttributeError, RuntimeError): pass
    else:
      CPU.disk.hits += 1
      return code, code.addrs
  from morok_mlir.ir import load
  load()
  from mlir import ir
  from mlir.execution_engine import ExecutionEngine
  with lock, ir.Context(), ir.Location.unknown(): eng = ExecutionEngine(ir.Module.parse(src), opt_level=OPT_LEVEL, enable_pic=True)
  CPU.disk.misses += 1
  if CPU.disk.enabled: CPU.disk.put([key], eng)
  return eng, _Code(list(names), engine=eng).addrs
pool.BUILD = native

def compile_module(funcs: list[Func]) -> CPUProgram:
  """A whole kernel-level module (kernels + @schedule) as one JIT module; the program runs the schedule."""
  sched = [f for f in funcs if "uop.schedule" in f.attrs]
  if len(sched) != 1: raise ValueError(f"expected one @schedule function, got {len(sched)}")
  kernels = {f.name: f for f in funcs}
  outs = tuple(sorted({k.attrs["slots"][i] for r in sched[0].roots for k in r.toposort if k.op is Ops.KERNEL
                       for i in stored_slots(kernels[k.attrs["callee"][1]])}))
  from morok_mlir.codegen.program import lower_module
  spec = ProgramSpec(sched[0].name, lower_module(funcs), tuple(_arg(t) for t in sched[0].args), outs,
                     align=max(out_align(f) for f in funcs))   # every stored buffer is checked against the strictest
  return CPUProgram(CPU.compiler.compile(spec))
