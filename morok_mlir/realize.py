"""The realize driver: graph-level UOps -> `uop` module -> passes -> kernels -> run.

Input data enters the graph as `buffer` UOps made by `new_buffer`, each holding a Buffer on some device; a schedule
runs on Buffers of its own device. realize() is safe from any number of Python threads: compiles are serialised (MLIR
contexts are not thread-safe), running a cached schedule takes no lock."""
from __future__ import annotations
import bisect, collections, ctypes, functools, gc, importlib.util, itertools, json, math, os, sys, threading, time, types, weakref
from dataclasses import dataclass, field, replace
import numpy as np
from morok_mlir.core.uop import UOp, attrs, box, sym_val
from morok_mlir.core.dtype import DType, dtypes
from morok_mlir.dialects.ops import MOVEMENT, Op, Ops
from morok_mlir.ir.emit import normalize, structure, graph_func
from morok_mlir.ir import compile_lock, registry
from morok_mlir.lru import LRU
from morok_mlir.core import env
from morok_mlir.core.progress import progress
from morok_mlir.device import Device
from morok_mlir.device.buffer import Buffer
from morok_mlir.device import memory
from morok_mlir.host import VIEW_ALIGN
from morok_mlir.core.views import chain

# ---------------------------------------------------------------- input buffers: where data enters a graph
_ids = itertools.count()

def new_buffer(data: np.ndarray | Buffer, loc: str | None = None, dtype=None, copy: bool = False, shape=None) -> UOp:
  """A graph input holding `data`: an array (any shape) or a Buffer on any device (a realized value, of `shape`).
  An array enters as a CPU Buffer over its memory. It is stored C-contiguous in native byte
  order (kernels read raw memory: big-endian bytes would be other numbers) and made read-only; copy=True copies it
  even when it is already so (a user's array, which the user may change later). The UOp owns the array (its id makes
  it unique, so no other graph node shares it): the data lives exactly as long as graphs that use it.
  dtype: the array's dtype when the caller knows it; else it is checked here, and numpy dtypes
  that are not supported (complex, object, str, datetime, structured, longdouble) raise TypeError at loc."""
  if type(data) is Buffer:
    u = UOp.unique(Ops.BUFFER, data.dtype, (("id", next(_ids)), ("shape", shape := tuple(shape))), loc)   # attrs(id=, shape=), prebuilt
    if data.device == "CPU":   # contents never change (see below)
      (data._buf if data._buf is not None else data.as_numpy()).setflags(False)   # (write=False, positional: 60 ns less)
    u.buffer, u.__dict__["shape"] = data, shape
    return u
  if dtype is None:
    try: dtype = dtypes.from_np(data.dtype)
    except TypeError as e: raise TypeError(f"{loc or '<unknown>:0:0'}: cannot make a tensor from an array of {e}") from None
  if copy or data.dtype is not dtype.npdt and data.dtype != dtype.npdt or not data.flags.c_contiguous:
    data = np.array(data, dtype=dtype.npdt, order="C")   # native order, C-contiguous, 0-d arrays stay 0-d
  u = UOp(Ops.BUFFER, dtype, (), attrs(id=next(_ids), shape=data.shape), loc)
  data.setflags(write=False)   # contents never change: compiled programs may keep what they derive from them
  u.buffer = Buffer("CPU", data.size, dtype).allocate(data.reshape(-1))   # (a view: no copy)
  return u

# ---------------------------------------------------------------- compile: graph -> schedule of compiled kernels
CUT_NEVER = MOVEMENT | {Ops.BUFFER, Ops.CONST}

DEBUG = env.get("DEBUG")

@dataclass
class ScheduleItem:
  name: str
  program: object          # the device's program: call_buffers(bufs, inputs)
  slots: tuple[int, ...]   # schedule buffers passed to the kernel, in argument order
  choices: str = ""        # the kernel's CPU choices (uop-optimize's attributes), for DEBUG=2
  # a program takes the driver's Buffers unchecked (right device, dtype and size by construction) and, per argument,
  # the input buffer UOp whose contents it holds (None for the schedule's own buffers)
  def __post_init__(self): self.run = self.program.call_buffers

def call_buffers(prog, slots: tuple[int, ...], bufs: list, inputs: list, n_in: int, scratch: list | None = None) -> None:
  """prog run through call_buffers on the schedule's buffers at slots, each with the input UOp whose contents it holds
  (so a phase that repacks it keeps its result for the next call on that UOp). In a TinyJit capture, not for a buffer
  a schedule computed: the calls recorded run once each and a plan packs its own (an LLM's prefill kept both of every
  layer's KV cache panels, 36 MB at 256 tokens, till the next call)."""
  rec = capture.rec
  ins = [inputs[s] if s < n_in and (rec is None or getattr(inputs[s], "buffer", None) not in _made) else None for s in slots]
  if scratch: prog.call_buffers([bufs[s] for s in slots], ins, scratch=scratch)
  else: prog.call_buffers([bufs[s] for s in slots], ins)

@dataclass
class Schedule:
  items: list[ScheduleItem]
  buffer_types: list[UOp]  # one buffer UOp (a sized pointer dtype) per schedule buffer: inputs, outputs, intermediates
  n_in: int
  n_out: int
  stages: stages.Stages | None = None   # VIZ's record of this compile, which each run adds its kernels' times to
  alias: dict[int, int] = field(default_factory=dict)   # output j -> the input whose buffer it is (an assign: written in place)
  views: dict[int, tuple[int, int]] = field(default_factory=dict)   # intermediate slot -> (the one it lies in, element offset)
  def __post_init__(self):
    # (elements, dtype) of each buffer it makes; an assign's output is its target's buffer (alias), not made
    self.allocs = [(b.size, b.dtype.base, self.alias.get(j)) for j, b in enumerate(self.buffer_types[self.n_in:])]
    # the intermediates (after the outputs) at offsets of one arena, by the kernels that touch them (device.memory),
    # and each kernel's scratch buffers (a contraction's packed panels, float32), live while that kernel runs
    first, nbytes = self.n_in + self.n_out, [n * dt.itemsize for n, dt, _ in self.allocs[self.n_out:]]
    uses = [[s - first for s in it.slots if s >= first] for it in self.items]
    scratch = [tuple(it.program.spec.scratch) if getattr(it.program, "takes_scratch", False) else () for it in self.items]
    for k, sizes in enumerate(scratch):
      uses[k] += range(len(nbytes), len(nbytes) + len(sizes)); nbytes += [4 * n for n in sizes]
    size = lambda s: self.buffer_types[s].dtype.base.itemsize
    offs, self.arena = memory.plan(uses, nbytes, {s - first: (d - first, o * size(s)) for s, (d, o) in self.views.items()})
    self.offsets, at = offs[:len(self.allocs) - self.n_out], iter(offs[len(self.allocs) - self.n_out:])
    self.scratch = [[(next(at), n) for n in sizes] for sizes in scratch]   # per item: (offset, floats) of each
    self.calls: list[_Run] = []   # prepared kernel calls, one set per run in flight (a free list: pop and append)
  def scratch_arrays(self, mem) -> list[list]:
    """Each item's scratch buffers as float32 arrays over mem, the bytes of an arena laid out by this schedule's plan."""
    return [[mem[o:o + 4 * n].view(np.float32) for o, n in s] for s in self.scratch]

class _Call:
  """One kernel of a schedule as a prepared call (CPU): an argument set of its own, which a _Run's batch points at the
  run's buffers. Until then, and for a program without prepare or one that keeps what it derives from an input (packed
  weights, which call_buffers keeps per input UOp), a run goes through call_buffers."""
  __slots__ = ("prog", "slots", "const", "args", "run", "fast", "k", "scr")
  def __init__(self, it: ScheduleItem, n_in: int, k: int):
    self.fast, self.scr = hasattr(it.program, "prepare"), bool(getattr(getattr(it.program, "spec", None), "scratch", ()))
    self.prog, self.slots, self.args, self.run, self.k = it.program, it.slots, None, None, k
    self.const = frozenset(i for i, s in enumerate(it.slots) if s < n_in)
  def prepare(self, mem: tuple | None) -> bool:
    """An argument set for the program's code, once that code stays: a JIT-compiled program moves onto its shared object
    once linked, and a set made for the engine would keep the engine (~1 MB) alive while the schedule is cached. A
    program with scratch buffers (a contraction's packed panels) takes the run's arena for them: only when the run keeps
    it (mem), else it goes through call_buffers with each run's."""
    self.args = None
    if getattr(self.prog.code, "engine", None) is not None: return False
    if self.scr and mem is None or (p := self.prog.prepare(self.const, scratch=mem[2][self.k] if self.scr else None)) is None:
      self.fast = False; return False
    self.args, self.run = p
    return True

class _Run:
  """A schedule's kernels as prepared calls for one run at a time: once every call that can be prepared has been (its
  code stays), each run of such calls is one native call (device.cpu.Batch) reading the buffers' pointers from one
  array, written once per run; the others go through call_buffers."""
  __slots__ = ("calls", "segs", "vals", "n_in", "one", "mem")
  def __init__(self, sched: Schedule):
    self.calls, self.segs, self.n_in, self.one = [_Call(it, sched.n_in, k) for k, it in enumerate(sched.items)], None, sched.n_in, None
    self.mem = None   # (arena, its views, the items' scratch arrays): this run's own while the arena is small (KEEP_ARENA)
  def _segment(self, nbufs: int) -> bool:
    """segs: each a Batch of calls' argument sets or a _Call through call_buffers; False while a code may still move."""
    if any(c.fast and getattr(c.prog.code, "engine", None) is not None for c in self.calls): return False
    from morok_mlir.device.cpu import Batch   # (the only device whose programs prepare argument sets)
    self.vals = (ctypes.c_void_p * max(1, nbufs))()
    self.segs = Batch.runs([(c.args if c.fast and c.prepare(self.mem) else None, list(enumerate(c.slots)), c) for c in self.calls], self.vals)
    if len(self.segs) == 1 and type(self.segs[0]) is not _Call: self.one = self.segs[0].run   # (run_buffers calls it itself)
    return True
  def __call__(self, bufs: list, inputs: list, scratch: list) -> None:
    if self.segs is None and not self._segment(len(bufs)):
      for c in self.calls: call_buffers(c.prog, c.slots, bufs, inputs, self.n_in, scratch[c.k])
      return
    self.vals[:] = [b.ptr for b in bufs]
    for g in self.segs:
      if type(g) is _Call: call_buffers(g.prog, g.slots, bufs, inputs, self.n_in, scratch[g.k])
      else: g.run()

class Variants:
  """A kernel of symbolic sizes with copies compiled for narrower bounds of its values (uop-optimize's variants,
  narrowest first, each with (values argument, k, bound, k, bound, ...)): a call runs the first whose bounds hold the
  values the kernel reads (its int64 input, in host memory), else the kernel itself. Every copy takes the same
  buffers (laid out for the largest values); each keeps its own packed weights."""
  def __init__(self, program, narrow: list[tuple[tuple, object]]):
    self.name, self.slot, self.progs = program.name, narrow[0][0][0], [p for _, p in narrow] + [program]
    self.at = [list(at) for at, _ in narrow]   # (as uop-optimize gave them: a schedule kept on disk has them back)
    self.bounds = [tuple((8 * k, b) for k, b in zip(at[1::2], at[2::2])) for at, _ in narrow]   # (byte offset, bound)
    # one value (the usual case): the copies' bounds, ascending, searched by bisection
    self.one = [at[0][1] for at in self.bounds] if all(len(at) == 1 for at in self.bounds) else None
    # the kernel's own spec, but a TinyJit replay passes the input UOps of the arguments any copy repacks, and the driver
    # leaves unprepared a kernel any copy of which has scratch buffers
    specs = [p.spec for p in self.progs]
    self.spec = replace(program.spec, reuse=tuple(dict.fromkeys(r for s in specs for r in s.reuse)),
                        scratch=next((s.scratch for s in reversed(specs) if s.scratch), ()))
    self._codes, self._code = None, None
  @property
  def nbytes(self) -> int: return sum(getattr(p, "nbytes", 0) for p in self.progs)
  @property
  def code(self):
    """One object while every copy keeps its code (a prepared set is made for those)."""
    if (codes := tuple([p.code for p in self.progs])) != self._codes: self._codes, self._code = codes, object()
    return self._code
  def pick(self, addr: int) -> int:
    """The copy for the values at address addr."""
    if (one := self.one) is not None: return bisect.bisect_left(one, ctypes.c_int64.from_address(addr + self.bounds[0][0][0]).value)
    for i, at in enumerate(self.bounds):
      if all(ctypes.c_int64.from_address(addr + off).value <= b for off, b in at): return i
    return len(self.bounds)
  def call_buffers(self, bufs: list, inputs: list | None = None) -> None:
    return self.progs[self.pick(bufs[self.slot].ptr)].call_buffers(bufs, inputs)
  def prepare(self, const: frozenset = frozenset(), inputs: list | None = None, scratch=None) -> tuple | None:
    """Each copy's argument set, written through one (and holding them: a copy's run may read its set's arrays, the
    chunk bounds, without holding them): run() calls the copy the values written pick (one at a time: they may share
    scratch)."""
    sets = []
    for q in self.progs:
      if not hasattr(q, "prepare") or (x := q.prepare(const, inputs, scratch=scratch)) is None: return None
      sets.append(x)
    runs, first = [r for _, r in sets], sets[0][0].ptrs
    args = types.SimpleNamespace(ptrs=_Fan([a.ptrs for a, _ in sets]), code=self.code, sets=[a for a, _ in sets], runs=runs)
    return args, lambda: runs[self.pick(first[self.slot])]()

class _Fan:
  """Writes to every copy's argument pointers at once (Variants.prepare)."""
  __slots__ = ("ptrs",)
  def __init__(self, ptrs: list): self.ptrs = ptrs
  def __setitem__(self, i, x):
    for p in self.ptrs: p[i] = x
  def __getitem__(self, i): return self.ptrs[0][i]

def choices(a: dict) -> str:
  """A kernel's CPU choices in a few words: contraction (or Winograd) tile, threads, split reduce, streamed stores."""
  out = [f"mm {a['uop.contraction'][0]}x{a['uop.contraction'][1]}" + " direct" * ("uop.direct_conv" in a) if "uop.contraction" in a else "",
         f"winograd {a['uop.winograd'][0]}x{a['uop.winograd'][1]}" if "uop.winograd" in a else "",
         f"threads {a['uop.threads']}" if "uop.threads" in a else "", f"split {a['uop.split_reduce']}" if "uop.split_reduce" in a else "",
         "nontemporal" if "uop.nontemporal" in a else "", f"gpu tile {a['uop.gpu_tile']}" if "uop.gpu_tile" in a else ""]
  return ", ".join(o for o in out if o)

def _compiler():
  """The compiler (MLIR, the passes, BEAM's search), imported with the first compile: a process that runs only schedules
  read from disk loads none of it. Returns the stage recorder's module."""
  from morok_mlir.ir import stages
  from morok_mlir import passes   # noqa: F401 (registers the passes lower_to_kernels runs)
  from morok_mlir.device import search   # noqa: F401 (registers uop-optimize's beam search)
  return stages

registry.LOADERS.append(_compiler)

def _kernels(graph: Func, dev, beam: int, rec: stages.Stages | None, debug: int) -> tuple[dict[str, Func], Func]:
  """graph's kernel functions by name and its schedule function, every stage recorded in rec (when given), the kernels
  as dev lowers them included. BEAM searches CPU kernels only (CUDA's: compile_schedule)."""
  from morok_mlir.ir.pipeline import lower_to_kernels
  with _compiler().recording(rec): funcs = {f.name: f for f in lower_to_kernels(graph, debug, beam if dev.name == "CPU" else 0)}
  sched = funcs.pop("schedule")
  if rec is not None: rec.lower(dev, [funcs[k.attrs["callee"][1]] for k in sched.roots[0].src])
  return funcs, sched

def compile_schedule(graph: Func, device: str, beam: int = 0) -> Schedule:
  """beam > 0: each new kernel's choices are searched by timing (device/search.py: the CPU's in uop-optimize, CUDA's block
  tiles here); 0: uop-optimize's heuristics."""
  t0 = time.perf_counter()
  stages = _compiler()
  from morok_mlir.ir import bridge
  rec = stages.active() or stages.new(DEBUG)   # every stage's module, when asked for (DEBUG=4, VIZ)
  funcs, sched = _kernels(graph, dev := Device[device], beam, rec, DEBUG)
  # a device's own timed choices (CUDA: a tiled contraction's block tile), made where its kernels are compiled
  if beam and (search := getattr(dev, "search", None)) is not None: funcs = {k: search(f, beam) for k, f in funcs.items()}
  # each kernel function once (the schedule may call one several times: uop-kernel-split's equal kernels); a device that
  # compiles several at once (the CPU: JIT engines of several, in parallel processes) gets them in groups
  names, progs = list(dict.fromkeys(k.attrs["callee"][1] for k in sched.roots[0].src)), {}
  # a kernel's copies for narrower bounds of its values (uop-optimize's variants), where the driver reads the values
  narrow = {}
  for f in funcs.values():
    if "uop.variant_of" in f.attrs and hasattr(dev.allocator, "as_numpy"): narrow.setdefault(f.attrs["uop.variant_of"], []).append(f.name)
  names += [v for n in names for v in narrow.get(n, ())]
  n = getattr(dev, "GROUP", 1)
  for group in progress([names[i:i + n] for i in range(0, len(names), n)], "compile", f"{n} kernels" if n > 1 else "kernel", since=t0):
    if DEBUG >= 3: print(bridge.module_text([funcs[name] for name in group]))
    progs |= zip(group, dev.compile_many([funcs[name] for name in group]) if n > 1 else [dev.compile(funcs[group[0]])])
  for name, vs in narrow.items():
    if name in progs: progs[name] = Variants(progs[name], [(funcs[v].attrs["uop.variant"], progs[v]) for v in reversed(vs)])
  items = [ScheduleItem(name, progs[name], k.attrs["slots"], choices(funcs[name].attrs) if DEBUG >= 2 else "")
           for k in sched.roots[0].src for name in (k.attrs["callee"][1],)]
  # inputs: the graph's, then (with symbolic sizes) the int64 buffer of the variables' values (uop-rangeify)
  al, vw = sched.attrs.get("uop.aliases", ()), sched.attrs.get("uop.views", ())
  return Schedule(items, sched.args, sched.attrs.get("uop.num_inputs", len(graph.args)), len(graph.results), rec if rec and rec.viz else None,
                  dict(zip(al[::2], al[1::2])), {s: (d, o) for s, d, o in zip(vw[::3], vw[1::3], vw[2::3])})

def compile_stages(outs: list[UOp], device: str | None = None, beam: int = 0) -> stages.Stages:
  """Every stage of compiling outs for device (Tensor.mlir): recorded, nothing compiled to code or run, no cache filled."""
  _kernels(graph_func(normalize(outs)[0]), Device[device or Device.DEFAULT], beam, rec := _compiler().Stages(), 0)
  return rec

# ---------------------------------------------------------------- schedules on disk
# A CPU schedule is kept on disk beside its kernels' shared objects (cpu.DiskCache): a new process that realizes a graph
# of the same structure reads it back and runs it without compiling, without even importing MLIR, the passes or LLVM (a
# model's warm start). The entry is plain JSON (never pickle: a cache file must not be able to run code), proved by its
# sum as a kernel's object is, and checked against itself (each kernel's arguments are the buffers its slots name); one
# that does not fit (damage, another format) is ignored: the graph is compiled and the entry written again.
PLAN_VERSION = 2
# the compiler's modules: once one is loaded (a compile, or a caller that may have changed its settings: a test, VIZ),
# this process compiles what it does not hold rather than run what the compiler of another process made
COMPILER = ("morok_mlir.ir.bridge", "morok_mlir.passes", "morok_mlir.codegen", "morok_mlir.core.kernel_facts")
# knobs that change no kernel: every other one is part of an entry's key
RUN_KNOBS = {"DEBUG", "DEVICE", "VIZ", "VIZ_PORT", "MOROK_CACHE_DIR", "MOROK_DISK_CACHE", "MOROK_CACHE_MAX_MB", "MOROK_MEM_CACHE_ENTRIES",
             "MOROK_MEM_CACHE_MB", "MOROK_PROGRESS", "MOROK_DIST_BACKEND", "MOROK_DIST_TIMEOUT", "MOROK_DIST_CHECK"}

@functools.cache
def _compiler_id() -> str:
  """What besides the graph decides its schedule: the entry format, the compiler's source files (path, size, time), the
  kernels' disk salt (MLIR release, LLVM pipeline, CPU features), the host's facts and the knobs that change kernels."""
  from morok_mlir import host
  files = []
  for pkg in ("morok_mlir", "morok_mlir.passes", "morok_mlir.dialects"):
    # the package's own folder (a source checkout adds the checkout's root to morok_mlir's path: not its files)
    for root in importlib.util.find_spec(pkg).submodule_search_locations[:1]:
      for d, dirs, names in sorted(os.walk(root)):
        dirs.sort()
        files += [f"{os.path.relpath(p, root)} {st.st_size} {st.st_mtime_ns}" for n in sorted(names) if n.endswith(".py")
                  for p in [os.path.join(d, n)] for st in [os.stat(p)]]
  knobs = [(k, _knob(k)) for k in sorted(env.KNOBS) if k not in RUN_KNOBS]
  return "\n".join([f"plan {PLAN_VERSION}", Device["CPU"].disk.salt, repr((host.THREADS, host.VEC_WIDTH, host.CACHES)), repr(knobs), *files])

def _knob(name: str) -> str:
  try: return repr(env.get(name))
  except env.EnvError: return "?"   # (a bad value raises where the knob is used)

def _spell(x, lines: list, ids: dict) -> str:
  """An entry of a structure key as text: a UOp as its number, the lines of its nodes (op, dtype, arg, sources'
  numbers) added first; a scalar with its type (1, 1.0 and True differ). TypeError on a value it cannot spell."""
  if (t := type(x)) is tuple: return "(" + ",".join([_spell(y, lines, ids) for y in x]) + ")"
  if t is UOp:
    for u in x.toposort:
      if u not in ids:
        arg = _spell(u.arg, lines, ids)
        ids[u] = len(ids); lines.append(f"{u.op!r} {u.dtype!r} {arg} {[ids[s] for s in u.src]}")
    return f"%{ids[x]}"
  if t is Op or isinstance(x, DType): return repr(x)
  if t in (int, float, str, bool) or x is None: return f"{t.__name__}:{x!r}"
  raise TypeError(f"a {t.__name__} in a graph key")

def plan_key(device: str, key: tuple, beam: int) -> str | None:
  """The disk entry of the schedule of the graph of structure key on device: None where none is kept (a device other
  than the CPU, the disk cache off, a key holding a value _spell cannot spell)."""
  if device != "CPU" or not Device[device].disk.enabled: return None
  try: text = _spell(key, lines := [], {})
  except TypeError: return None
  from morok_mlir.device.cpu import sha256
  return sha256("\n".join([_compiler_id(), device, str(beam), *lines, text]).encode()).hexdigest()[:40]

def save_plan(device: str, pk: str | None, sched: Schedule) -> None:
  """sched as disk entry pk, where every program of it has a disk entry of its own (CPUProgram.disk_key)."""
  if pk is None: return
  kernels, ids = [], {}
  def kernel(p) -> int:
    if getattr(p, "disk_key", None) is None: raise LookupError
    if id(p) not in ids: ids[id(p)] = len(kernels); kernels.append([p.disk_key, p.spec.plain()])
    return ids[id(p)]
  try: items = [[it.name, list(it.slots), [kernel(p) for p in getattr(it.program, "progs", (it.program,))], it.choices,
                 getattr(it.program, "at", [])] for it in sched.items]
  except LookupError: return
  data = {"version": PLAN_VERSION, "n_in": sched.n_in, "n_out": sched.n_out, "alias": sorted(sched.alias.items()),
          "views": [[s, d, o] for s, (d, o) in sorted(sched.views.items())],
          "buffers": [[b.dtype.base.name, b.dtype.size] for b in sched.buffer_types], "kernels": kernels, "items": items}
  Device[device].disk.write(pk, "plan", json.dumps(data, separators=(",", ":")).encode())

def load_plan(device: str, pk: str | None) -> Schedule | None:
  """The schedule of disk entry pk, its kernels loaded from their objects; None where there is none, it does not fit
  (damaged, of another format, a kernel's object gone), this process has loaded the compiler (COMPILER) or DEBUG >= 3
  asks to see the compile."""
  if pk is None or DEBUG >= 3 or any(m in sys.modules for m in COMPILER) or (data := Device[device].disk.read(pk, "plan")) is None: return None
  from morok_mlir.device.cpu import ProgramSpec, DTYPES
  try:
    d = json.loads(data)
    if d["version"] != PLAN_VERSION: return None
    bts = [UOp(Ops.BUFFER, DTYPES[n].ptr(count(size)), (), attrs(slot=i)) for i, (n, size) in enumerate(d["buffers"])]
    progs = [Device[device].from_disk(k, ProgramSpec.from_plain(s)) if type(k) is str else None for k, s in d["kernels"]]
    if None in progs: return None
    items = []
    for name, slots, ks, choice, at in d["items"]:
      ps, slots = [progs[count(k, len(progs))] for k in ks], tuple(count(s, len(bts)) for s in slots)
      # the programs run on the buffers' pointers unchecked: each argument must be the buffer of its slot's size and dtype
      if type(name) is not str or type(choice) is not str or len(at) != len(ps) - 1 or \
         any(p.spec.args != tuple((bts[s].dtype.size, bts[s].dtype.base) for s in slots) for p in ps): return None
      prog = Variants(ps[-1], [(_bounds(a, slots, bts), p) for a, p in zip(at, ps)]) if at else ps[0]
      items.append(ScheduleItem(name, prog, slots, choice))
    n_in, n_out = count(d["n_in"], len(bts) + 1), count(d["n_out"], len(bts) + 1 - d["n_in"])
    return Schedule(items, bts, n_in, n_out, None, {count(j, n_out): count(i, n_in) for j, i in d["alias"]}, _views(d["views"], bts, n_in + n_out))
  except (ValueError, TypeError, KeyError, IndexError, AttributeError): return None

def _views(vs: list, bts: list, first: int) -> dict[int, tuple[int, int]]:
  """A disk entry's views (uop-elide-copies), each an intermediate inside another of its dtype, at an aligned offset,
  no two from one buffer and none in a cycle; ValueError otherwise."""
  out = {}
  for s, d, o in vs:
    s, d, o = count(s, len(bts)), count(d, len(bts)), count(o)
    if s < first or d < first or s == d or s in out or bts[s].dtype.base != bts[d].dtype.base or o + bts[s].dtype.size > bts[d].dtype.size \
       or o * bts[s].dtype.base.itemsize % VIEW_ALIGN: raise ValueError("a view outside its buffer")
    out[s] = (d, o)
  for s in out: chain(s, out)   # (raises on a cycle)
  return out

def _bounds(at: list, slots: tuple, bts: list) -> tuple:
  """A copy's (values argument, k, bound, ...) (Variants), each k a value the argument holds (a call reads them)."""
  i = count(at[0], len(slots))
  if len(at) % 2 != 1: raise ValueError("bounds come in pairs")
  return (i, *(count(x, bts[slots[i]].dtype.size if j % 2 == 0 else None) for j, x in enumerate(at[1:])))

def count(v, below: int | None = None) -> int:
  """v, an int >= 0 (and < below): else ValueError (a damaged entry)."""
  if type(v) is not int or v < 0 or below is not None and v >= below: raise ValueError(f"{v!r} out of range")
  return v

def schedule_nbytes(s: Schedule) -> int:
  """What a cached schedule keeps alive: its programs (compiled code; shared ones counted in each schedule), ~4 KB of
  Python objects (the graph key, items, buffer types) and a small arena its run keeps (one per thread running it at
  once: one counted)."""
  return 4096 + sum(getattr(it.program, "nbytes", 0) for it in s.items) + (s.arena if s.arena <= KEEP_ARENA else 0)

# ---------------------------------------------------------------- realize
class _Counters(type):
  @property
  def mem_used(cls) -> int:
    """Bytes of device memory held by live buffers now, over the devices in use (not reset; the CPU's arrays under 64 KiB
    come from numpy and are not counted)."""
    return sum(getattr(getattr(d, "allocator", None), "used", 0) for d in {id(d): d for d in Device._found.values()}.values())

class GlobalCounters(metaclass=_Counters):
  """Totals since the last reset (tinygrad's name): kernels run, kernels compiled, time in kernels (a TinyJit replay
  of the usual plan adds its kernels' time only under DEBUG: two clock reads are ~4% of a small replay); mem_used."""
  kernel_count = 0
  compiled = 0
  time_sum_s = 0.0
  @classmethod
  def reset(cls): cls.kernel_count, cls.compiled, cls.time_sum_s = 0, 0, 0.0

# the schedules own their programs: an evicted schedule frees the programs no other schedule or method cache holds
_schedule_cache: dict[tuple, Schedule] = LRU(schedule_nbytes)   # (device, emit.structure's key[, beam]) -> schedule
Device.on_settings_change.append(lambda base: _schedule_cache.drop(lambda k: k[0].split("@")[0].split(":")[0] == base))

def _alloc_error(e: Exception, sched: Schedule, outs: list[UOp]) -> MemoryError:
  """A failed allocation of the schedule's buffers (outputs first) as a MemoryError at the user's line, naming the
  buffer of the size that failed (the allocator's MemoryError says it) or the largest."""
  bts = sched.buffer_types[sched.n_in:sched.n_in + sched.n_out]
  sizes = [b.size * b.dtype.itemsize for b in bts] + [sched.arena]
  j = sizes.index(e.nbytes) if getattr(e, "nbytes", None) in sizes else sizes.index(max(sizes))
  what = f"the {outs[j].dtype.name}{list(outs[j].shape)} result" if j < len(outs) else f"{len(sched.offsets)} intermediate buffers"
  loc = outs[j].loc if j < len(outs) and outs[j].loc else next((o.loc for o in outs if o.loc), None)
  why = getattr(e, "reason", None) or getattr(e, "strerror", None) or e
  return MemoryError(f"{loc + ': ' if loc else ''}cannot allocate {sizes[j]} bytes for {what} ({why})")

# One kernel's compile time and memory grow with its ops and its arguments; a graph deeper or wider than this is realized
# in pieces (as tinygrad realizes long chains), each a small graph: pieces of one structure share one compiled schedule.
MAX_DEPTH, MAX_INPUTS = 2048, 256

def cut_deep(outs: list[UOp], device: str) -> list[UOp] | None:
  """outs rebuilt with the nodes at every MAX_DEPTH levels, or past MAX_INPUTS input buffers below them, realized
  first (nodes no bigger than the graph's inputs and outputs, not movement ops: a cut never materialises a broadcast);
  None when the graph is within both limits. A cut realizes, with the node, every value computed since the last cut
  that a later node still reads (a residual branch's input): left lazy, it would be computed again after the cut."""
  order = list(dict.fromkeys(u for o in outs for u in o.toposort))
  depth: dict[UOp, int] = {}
  for u in order: depth[u] = 1 + max((depth[s] for s in u.src), default=-1)
  ins = [u for u in order if u.buffer is not None]
  if max(depth.values()) < MAX_DEPTH and len(ins) <= MAX_INPUTS: return None
  big = max(sym_val(u.size) for u in ins + outs)
  last = {o: len(order) for o in outs}   # node -> the position of its last reader
  for i, u in enumerate(order):
    for s in u.src: last[s] = max(last.get(s, -1), i)
  new: dict[UOp, UOp] = {}
  below: dict[UOp, frozenset] = {}   # input buffers under each node since the last cut
  def build(u: UOp) -> tuple[UOp, int]:
    src = tuple(new[s] for s in u.src)
    n = u if src == u.src else u.replace(src=src)
    below[u] = frozenset((n,)) if n.buffer is not None else below[u.src[0]] if len(u.src) == 1 else frozenset().union(*(below[s] for s in u.src))
    return n, 1 + max((depth[s] for s in u.src), default=-1)
  def base(u: UOp) -> UOp:
    while u.op in MOVEMENT: u = u.src[0]
    return u
  pending: list[UOp] = []   # nodes since the last cut
  for i, u in enumerate(order):
    new[u], depth[u] = build(u)
    n = new[u]
    if (depth[u] >= MAX_DEPTH or len(below[u]) > MAX_INPUTS) and n.op not in CUT_NEVER and 0 < sym_val(n.size) <= big:
      live = dict.fromkeys(b for x in pending if last.get(x, -1) > i and (b := base(x)).op not in CUT_NEVER and new[b].buffer is None
                           and 0 < sym_val(b.size) <= big and all(type(d) is int for d in b.shape))
      live.pop(u, None)
      cut = [u, *live]
      bufs = realize([new[x] for x in cut], device, cut=False)
      for x, b in zip(cut, bufs): new[x] = new_buffer(b, new[x].loc, shape=tuple(sym_val(d) for d in new[x].shape))
      # every node since the last cut rebuilt over the buffers, not only those a later node reads: a later node may
      # reach a realized value through views read by nothing else after the cut (x.T.reshape(..).T: the first view)
      for x in pending + [u]:
        if x in live or x is u: depth[x], below[x] = 0, frozenset((new[x],))
        else: new[x], depth[x] = build(x)
      pending = []
    else: pending.append(u)
  return [new[o] for o in outs]

# an input's copy on another device, made the first time a schedule there reads it and kept while the input lives: input
# contents never change, so the copy stays right (Tensor(np).to("CUDA") crosses to the GPU once, however often it is used)
_copies: weakref.WeakKeyDictionary[Buffer, dict[str, Buffer]] = weakref.WeakKeyDictionary()
_copies_lock = threading.Lock()

def on_device(b: Buffer, device: str) -> Buffer:
  """b, or its (cached) copy on device."""
  if b.device == device: return b
  with _copies_lock: c = _copies.get(b, {}).get(device)
  if c is None:
    c = b.copy_to(device)
    with _copies_lock: c = _copies.setdefault(b, {}).setdefault(device, c)
  return c

# the outputs of the last few realizes, kept alive until the next garbage collection: a loop that rebuilds the same
# graph on the same tensors (a model's forward on its weights) gets the same hash-consed UOps back, whose structure key
# is remembered (emit.structure: the MLP's forward ~60 us of walk -> a lookup). Their inputs live as long as they would
# if the graph were cyclic garbage: a deleted tensor's memory goes at the next collection (gc.collect() included).
_recent: collections.deque = collections.deque(maxlen=4)
gc.callbacks.append(lambda phase, info, recent=_recent: recent.clear() if phase == "start" else None)

# ---------------------------------------------------------------- writes in place
# A write through a slice of a realized tensor, `t[a:b] = v` (Tensor.__setitem__: where(pad(all true), pad(v), b)), is
# functional: its value is a new tensor. Stored as such it copies all of b per write (a KV cache: the whole cache per
# token and layer). When no one can read b's old contents after this realize, the write is made assign(b, write):
# uop-rangeify stores only the box v fills, into b's own memory, and the schedule returns b's Buffer as the output
# (Schedule.alias). b is then stale: its buffer slot is cleared, and a new buffer node holds the memory.
_made: weakref.WeakSet = weakref.WeakSet()   # Buffers the driver allocated for schedules' outputs: memory no one else views

def zeros(shape: tuple[int, ...], dtype: DType, device: str, loc: str | None = None) -> UOp:
  """A realized buffer of zeros that writes through slices change in place (as a schedule's output); on an allocator
  that maps zeros unwritten (CPU's zeros), its pages take memory only once written."""
  dev, n = Device[device], math.prod(shape)
  if (z := getattr(dev.allocator, "zeros", None)) is not None: buf = Buffer.fresh(dev.name, n, dtype, z(n, dtype))
  else: buf = Buffer(dev.name, n, dtype).allocate().copyin(np.zeros(n, dtype.np))
  _made.add(buf)
  return new_buffer(buf, loc, shape=shape)

def in_place(outs: list[UOp], held: list[int], device: str) -> list[UOp]:
  """outs, each write through a slice of a buffer that may be written in place made assign(buffer, write). held[i]:
  the references to outs[i] the caller holds (its tensors' uop slots, its own lists). Safe when nothing outside this
  graph reads the buffer node or the write: every node whose source either is lies in outs' graph (this schedule reads
  the old contents before it stores: uop-rangeify orders it so), and no other node, tensor, cache or array holds the
  buffer node, its Buffer or its memory (reference counts: a view taken before the write, a lazy graph over the old
  value, a second node over the same Buffer, a numpy view all keep the copy)."""
  cands = [i for i, w in enumerate(outs) if _writable(w, device)]
  if not cands or len({outs[i].src[2] for i in cands}) < len(cands): return outs
  _forget({outs[i].src[2] for i in cands})
  watch = _refs(outs, {x for i in cands for x in (outs[i], outs[i].src[2])})
  ret = list(outs)
  if capture.rec is not None and not all(_sole(outs, i, watch, held[i]) for i in cands):
    # a TinyJit records this schedule for every replay: references from cyclic garbage (a node's cached toposort holds
    # the node; a compile's graphs wait for a collection) are not let to make it a copy for good
    gc.collect()
  for i in cands:
    if _sole(outs, i, watch, held[i]): ret[i] = UOp(Ops.ASSIGN, outs[i].dtype, (outs[i].src[2], outs[i]), loc=outs[i].loc)
  return ret

def _writable(w: UOp, device: str) -> bool:
  """Whether w is a write through a slice of a buffer the driver made on device (see in_place), not an argument of the
  function a TinyJit records (a replay would write the caller's tensor)."""
  return w.op is Ops.WHERE and (b := w.src[2]).op is Ops.BUFFER and (buf := b.buffer) is not None and buf.base is None and \
    buf.device == device and buf in _made and box(w, b) is not None and (capture.rec is None or id(buf) not in capture.rec.args)

def _refs(outs: list[UOp], watched: set[UOp]) -> dict[UOp, int]:
  """The references outs' graph holds to each watched node: sources, cached toposorts (of the nodes that reach it),
  remembered structure keys' input lists."""
  watch, reach = dict.fromkeys(watched, 0), {x: {x} for x in watched}
  for x in dict.fromkeys(x for o in outs for x in o.toposort):
    if x not in watch: reach[x] = set().union(*(reach.get(s, ()) for s in x.src))
    for s in x.src:
      if s in watch: watch[s] += 1
    for y in reach[x] if "toposort" in x.__dict__ else ():
      watch[y] += 1
    for hit in x.__dict__.get("_structure", {}).values():
      for y in hit[2]:
        if y in watch: watch[y] += 1
  return watch

def _sole(outs: list[UOp], i: int, watch: dict, held: int) -> bool:
  """Whether write outs[i] and its buffer node are held by outs' graph (watch) and the caller (held) only, and the
  node's Buffer and memory by that node only. (Each count adds what is held here: getrefcount's argument, the local
  name, watch's key; for the write outs and in_place's copy of it.)"""
  w = outs[i]
  b = w.src[2]
  return sys.getrefcount(b) == watch[b] + BASE[0] and sys.getrefcount(w) == watch[w] + held + BASE[1] and \
         sys.getrefcount(b.buffer) == BASE[2] and sys.getrefcount(b.buffer._buf) == BASE[3]
BASE = (4, 4, 2, 2)   # the references counted above that no holder outside adds (test_inplace checks both ways)

def _forget(targets: set[UOp]) -> None:
  """The recent graphs (kept only for their structure keys) that read a target, dropped."""
  for r in [r for r in list(_recent) if not targets.isdisjoint(_inputs(r))]:   # (a copy: a collection may clear it meanwhile)
    if r in _recent: _recent.remove(r)

def _inputs(outs: list[UOp]) -> list[UOp]:
  """The input buffers of a realized graph (its structure key's, remembered on its first output)."""
  return [b for hit in outs[0].__dict__.get("_structure", {}).values() for b in hit[2]]

def realize(outs: list[UOp], device: str | None = None, cut: bool = True, beam: int | None = None) -> list[Buffer]:
  """Compute graph-level UOps on `device` (Device.DEFAULT if None); returns one flat Buffer per UOp, on device (a UOp
  that is already an input buffer gives its own Buffer, wherever it is). Inputs on other devices are copied to device
  once. The schedule cache is keyed by device and graph structure. cut=False: the graph is not split (cut_deep).
  beam: BEAM's width for new kernels (None: the BEAM environment variable, read at each call; 0: heuristics only)."""
  device = Device[device or Device.DEFAULT].name
  results: list[Buffer | None] = [None] * len(outs)
  todo, touts = [], []
  for i, o in enumerate(outs):
    if o.size == 0: results[i] = Buffer(device, 0, o.dtype).allocate()
    elif o.buffer is not None: results[i] = o.buffer
    else: todo.append(i); touts.append(o)
  if not todo: return results
  key, inputs, vals = structure(touts)
  _recent.append(touts)
  if beam is None: beam = env.get("BEAM")
  if not isinstance(beam, int) or beam < 0: raise ValueError(f"BEAM must be an integer >= 0, got {beam!r}")
  if (sched := _schedule_cache.get(ck := (device, key) if not beam else (device, key, beam))) is None:
    if cut and (pieces := cut_deep(touts, device)) is not None:
      for i, r in zip(todo, realize(pieces, device, cut=False, beam=beam)): results[i] = r
      return results
    with compile_lock:
      if (sched := _schedule_cache.get(ck)) is None:   # another thread may have compiled it while this one waited
        t0, pk = time.perf_counter(), plan_key(device, key, beam)
        if (sched := load_plan(device, pk)) is None:
          sched, how = compile_schedule(graph_func(normalize(touts)[0]), device, beam), "compiled {} kernels"
          save_plan(device, pk, sched)
        else: how = "loaded {} kernels' schedule from disk"
        _schedule_cache[ck] = sched
        GlobalCounters.compiled += len(sched.items)
        if DEBUG >= 1: print(how.format(len(sched.items)) + f" in {(time.perf_counter() - t0) * 1e3:.1f} ms")
  if vals: inputs = inputs + [None]   # symbolic sizes' values: one more input
  bufs = run_schedule(sched, device, inputs, vals, touts)
  if (rec := capture.rec) is not None: rec.schedule(sched, device, inputs, bufs, touts, normalize(touts)[0] if vals else (), vals)
  n_in = sched.n_in
  for i in sched.alias.values():   # an assign's target: its contents are overwritten, its copies on other devices stale
    with _copies_lock: _copies.pop(bufs[i], None)
    inputs[i].buffer = None
  for b in bufs[n_in:]: _made.add(b)
  for j, i in enumerate(todo):   # a symbolic output's buffer holds its variables' max size: the result is its first elements
    results[i] = bufs[n_in + j] if not vals or j in sched.alias else bufs[n_in + j].view(sym_val(outs[i].size), outs[i].dtype, 0)
  return results

def run_schedule(sched: Schedule, device: str, inputs: list[UOp | None], vals=(), outs: list[UOp] = ()) -> list[Buffer]:
  """Run a compiled schedule on the buffers of `inputs` (graph input UOps; None: the symbolic sizes' values, `vals`) and
  fresh buffers for its outputs and intermediates; returns the inputs' and outputs' buffers (intermediates are freed)."""
  try:
    bufs = [b if (b := u.buffer).device == device else on_device(b, device) for u in inputs if u is not None]
    if vals: bufs.append(Buffer(device, len(vals), dtypes.int64).copyin(np.array(vals, np.int64)))
  except (MemoryError, OSError) as e: raise _alloc_error(e, sched, list(outs)) from None
  return run_buffers(sched, device, bufs, inputs, outs)

def run_buffers(sched: Schedule, device: str, bufs: list[Buffer], inputs: list[UOp | None], outs: list[UOp] = ()) -> list[Buffer]:
  """run_schedule on input Buffers already on device; inputs[i]: the UOp whose immutable contents bufs[i] holds (a
  program may keep what it derives from them, e.g. packed weights), or None."""
  n_in, n_out = sched.n_in, sched.n_out
  run = None   # (timed runs go through call_buffers, without prepared calls or a kept arena)
  if DEBUG < 2 and sched.stages is None:
    try: run = sched.calls.pop()
    except IndexError: run = _Run(sched)
  try:
    bufs = bufs + [Buffer.fresh(device, n, dt) if a is None else bufs[a] for n, dt, a in sched.allocs[:n_out]]
    arena, mids, scratch = getattr(run, "mem", None) or _workspace(sched, device, run)
  except (MemoryError, OSError) as e:
    if run is not None: sched.calls.append(run)
    raise _alloc_error(e, sched, list(outs)) from None
  bufs += mids
  if run is None: dt_sum = _run_timed(sched, bufs, inputs, scratch)
  else:
    t0 = time.perf_counter()
    try:
      if (one := run.one) is not None: run.vals[:] = [b.ptr for b in bufs]; one()
      else: run(bufs, inputs, scratch)
    finally: sched.calls.append(run)
    dt_sum = time.perf_counter() - t0
  GlobalCounters.kernel_count += len(sched.items); GlobalCounters.time_sum_s += dt_sum
  if arena is None: return bufs
  if run is None or run.mem is None: arena.deallocate()   # (the intermediates are views of it)
  return bufs[:n_in + n_out]

KEEP_ARENA = 1 << 22   # a run keeps an arena up to this size for its next run: making, viewing and freeing one costs 20-200 us
def _workspace(sched: Schedule, device: str, run: _Run | None = None) -> tuple[Buffer | None, list[Buffer], list]:
  """A new arena for one run of sched, the intermediates' views of it and each item's scratch arrays in it (kept by run
  for its next runs when the arena is small)."""
  if not sched.arena: return None, [], sched.scratch
  arena = Buffer.fresh(device, sched.arena, dtypes.uint8)
  mids = [arena.view(n, dt, o) for (n, dt, _), o in zip(sched.allocs[sched.n_out:], sched.offsets)]
  # (only a host device's programs take scratch; without any, each item's list is empty)
  mem = arena, mids, sched.scratch_arrays(arena.as_numpy()) if any(sched.scratch) else sched.scratch
  if run is not None and sched.arena <= KEEP_ARENA: run.mem = mem
  return mem

def _run_timed(sched: Schedule, bufs: list[Buffer], inputs: list[UOp | None], scratch: list) -> float:
  """The kernels one by one through call_buffers, each timed: printed (DEBUG >= 2), added to VIZ's record."""
  dt_sum = 0.0
  for it, scr in zip(sched.items, scratch):
    t0 = time.perf_counter()
    call_buffers(it.program, it.slots, bufs, inputs, sched.n_in, scr)
    dt_sum += (dt := time.perf_counter() - t0)
    if DEBUG >= 2: print(f"  {it.name:<24} {dt * 1e6:9.1f} us  {it.choices}")
    if sched.stages is not None: sched.stages.ran(it.name, dt)
  return dt_sum

class _Capture(threading.local):
  rec = None   # a TinyJit recording the schedules this thread runs (morok_mlir.jit)
capture = _Capture()
