"""TinyJit (tinygrad's name and semantics): a function of Tensors runs normally while it is recorded (every schedule it
realizes, with where each input buffer came from); once two calls in a row ran the same schedules, later calls replay
the recorded kernels on the new arguments' buffers without calling the function, building graphs or looking up caches.

What a replay reproduces: the schedules realized in the function (Tensor.realize, .numpy(), an optimizer's step), in
order; the tensors they rebound (parameters and optimizer state realized inside: their new values, as fresh buffers);
the arguments the function wrote (t[a:b] = v, t.assign(v), t += v, realized inside: each replay's arguments take their
new values, as in eager; one of symbolic shape or on several devices makes the function run normally every time);
random numbers drawn inside (new counters each call); the returned tensors (fresh each call). What it cannot: host
work (a .numpy() result used in Python, a branch on data), which is why a function that reads on the host a value
computed from its arguments, state or random numbers, or whose schedules keep changing between calls, is never
replayed (it runs normally every time). Arguments must keep their shapes, dtypes, devices and
non-tensor values; a call that changes one raises JitError.

Symbolic sizes (tinygrad's): a bound Variable among the arguments or in a tensor argument's shape is a size, not a
value to keep: the signature holds the Variable, each replay runs the recorded kernels at the call's value (a
kernel argument: nothing is compiled again). A value the recorded graphs do not fit (a slice past a dim, or a
slice's form picked for another value) raises JitError at the caller's line."""
from __future__ import annotations
import ctypes, functools, gc, sys, threading, time, weakref
from dataclasses import dataclass, field
import numpy as np
from morok_mlir.core.uop import UOp, sym_val, sym_range, sym_attr, sprod, ssub, _pairs, guards, SYM_TEXT
from morok_mlir.core.dtype import dtypes
from morok_mlir.ir.emit import var_order, unbind
from morok_mlir.dialects.ops import Ops
from morok_mlir.core.provenance import error as _err
from morok_mlir.device.buffer import Buffer, Ring
from morok_mlir.device.cpu import CPU, Batch, SharedScratch
from morok_mlir import realize as R
from morok_mlir.tensor import Tensor

class JitError(RuntimeError): pass
_BUF, _RESHAPE, _BIND = Ops.BUFFER, Ops.RESHAPE, Ops.BIND   # (a replay's checks read them as globals)

@dataclass
class _Exec:
  sched: R.Schedule
  device: str
  srcs: list        # per schedule input: ("arg", i) | ("state", i) | ("out", k, j) | ("rng", i) | ("const", uop) | ("vals",)
  shapes: list      # the realized outputs' shapes (what their buffer UOps carry; symbolic: in the Variables)
  locs: list
  vars: dict = field(default_factory=dict)     # Variable -> the value it had, for the schedule's symbolic sizes
  checks: list = field(default_factory=list)   # (a, b, held, loc): whether sizes a <= b, which a replay's values must keep
  bufs: list = field(default_factory=list)     # per schedule input: the base Buffer it held when recorded (an assign's target
                                               # is stale after its schedule: its node holds no Buffer then), or for one an
                                               # earlier schedule of the call computed, where it came from: ("out", k, j)

@dataclass(frozen=True)
class ExecItem:
  """One captured kernel of TinyJit.jit_cache: prg, its compiled program (prg.name is the kernel's name), and bufs, the
  Buffers it runs on in argument order: the plan's own (intermediates, constants), None where each replay gives new
  ones (the arguments, the state, the outputs that leave the call)."""
  prg: object
  bufs: list

@dataclass
class _Recorder:
  """What one traced call did, filled by realize() and Tensor.realize() through R.capture."""
  execs: list = field(default_factory=list)
  made: dict = field(default_factory=dict)     # id(Buffer) -> (weak ref, [(exec k, output j)]), for the buffers this call computed
  args: set = field(default_factory=set)       # id(Buffer) of the arguments: never written in place (the caller's tensors)
  argbuf: list = field(default_factory=list)   # id(Buffer) of each argument as called (the call may rebind the argument)
  rng: list = field(default_factory=list)      # (counter buffer UOp, values drawn) for each random tensor made
  host: list = field(default_factory=list)     # the Buffers the call read on the host (.numpy(), .item(), .tolist())
  guards: list = field(default_factory=list)   # (a, b, held): the tests of sizes the call's graphs were built under (uop.assume)
  def schedule(self, sched: R.Schedule, device: str, inputs: list, bufs: list, outs: list[UOp], key: tuple = (), vals: tuple = ()):
    k = len(self.execs)
    if not vals: self.execs.append(_Exec(sched, device, list(inputs), [tuple(sym_val(d) for d in o.shape) for o in outs], [o.loc for o in outs]))
    else:
      nodes = UOp(Ops.SINK, dtypes.void, tuple(key)).toposort
      names = sorted((u for u in nodes if u.op is Ops.DEFINE_VAR), key=var_order)
      self.execs.append(_Exec(sched, device, list(inputs), [o.shape for o in key], [o.loc for o in outs], dict(zip(names, vals)), _checks(nodes)))
    # an input an earlier schedule computed is named by where it came from, not held: each intermediate goes back to the
    # allocator after its last reader, as outside a capture (an LLM's prefill held every layer's results and keys)
    e = self.execs[-1]
    e.bufs = [None if u is None else _buffer(u) for u in inputs]
    for i, b in enumerate(e.bufs):
      if (kj := self.made_by(b)) is not None: e.bufs[i] = e.srcs[i] = ("out", *kj[-1])
    for j in range(sched.n_out):
      b = bufs[sched.n_in + j]
      if (kj := self.made_by(b)) is None: self.made[id(b)] = (weakref.ref(b), kj := [])
      kj.append((k, j))
  def made_by(self, b: Buffer | None) -> list | None:
    """[(exec k, output j)] that computed b in this call (its last write last), else None (a Buffer that died frees its id)."""
    if b is None or (m := self.made.get(id(b))) is None or m[0]() is not b: return None
    return m[1]
  def random(self, counter: UOp, n: int): self.rng.append((counter, n))
  def host_read(self, b: Buffer): self.host.append(b.base if b.base is not None else b)
  def reads_data(self, args: list[Tensor], state: set[int], alias: dict) -> bool:
    """Whether the call read on the host a value computed from its arguments, its state or random numbers. A replay
    runs no Python: it would keep what the recorded call saw there (a shape, a branch taken, a count)."""
    given = self.args | state | {id(u.buffer) for u, _ in self.rng} | set(alias)
    tainted: list[bool] = []
    dep = lambda b: b is not None and (tainted[b[1]] if type(b) is tuple else id(b) in given or
                                       any(k < len(tainted) and tainted[k] for k, _ in self.made_by(b) or ()))
    for e in self.execs: tainted.append(any(dep(b) for b in e.bufs if b is not None))
    return any(dep(b) for b in self.host)

def _checks(nodes: list[UOp]) -> list[tuple]:
  """What a graph of symbolic sizes assumed of their values, as (a, b, True, loc) for a <= b: each shrink inside its
  source, each pad width >= 0, each reshape keeping the element count. Building the graph checked them at the recorded
  values; a replay checks them at its own (a form picked for one value, x[2:5] along a dim of size n, does not fit n = 3)."""
  out = []
  def le(a, b, loc):
    if isinstance(a, UOp) or isinstance(b, UOp): out.append((a, b, True, loc))
  for u in nodes:
    if u.op not in (Ops.SHRINK, Ops.PAD, Ops.RESHAPE): continue   # (static bounds on a symbolic dim count too)
    if u.op is Ops.SHRINK:
      for s, (b, e) in zip(u.src[0].shape, _pairs(sym_attr(u, "bounds"))): le(0, b, u.loc); le(b, e, u.loc); le(e, s, u.loc)
    elif u.op is Ops.PAD:
      for w in sym_attr(u, "padding"): le(0, w, u.loc)
    else: le(n := sprod(u.src[0].shape), m := sprod(u.shape), u.loc); le(m, n, u.loc)
  return out

def _always(a, b, held: bool) -> bool:
  """Whether a <= b is `held` at every value in the Variables' ranges (interval arithmetic: what it cannot decide stays
  a test of each replay)."""
  try: lo, hi = sym_range(ssub(b, a))
  except TypeError: return False
  return lo >= 0 if held else hi < 0

SIZE_PY = {**SYM_TEXT, Ops.MAX: "max", Ops.MIN: "min"}
def _sizes_fn(exprs, order: list[UOp], cmp: str | None = None):
  """A function of the Variables' values (in order) giving the sizes exprs (ints or UOps of define_vars and size
  arithmetic), or with cmp the tests `a cmp b` of pairs, as a tuple: one generated Python expression, so a replay
  evaluates them in one call instead of walking UOps."""
  names = {v: f"v{i}" for i, v in enumerate(order)}
  def py(x) -> str:
    if not isinstance(x, UOp): return repr(x)
    if x.op is Ops.CONST: return repr(x.attrs["value"])
    if x.op is Ops.DEFINE_VAR: return names[x]
    a, b = map(py, x.src)
    return f"{SIZE_PY[x.op]}({a}, {b})" if x.op in (Ops.MAX, Ops.MIN) else f"({a} {SIZE_PY[x.op]} {b})"
  body = "".join(f"{py(a)} {cmp} {py(b)}, " if cmp else f"{py(a)}, " for a, b in (exprs if cmp else ((x, None) for x in exprs)))
  return eval(f"lambda {', '.join(names.values())}: ({body})", {"max": max, "min": min})

def _unbind(x: UOp, env: dict) -> UOp:
  """A size with its bound Variables in place of their binds; their values go to env (a Variable has one per call)."""
  binds = {u: unbind(u, env, JitError, "TinyJit: {var!r} is bound to both {old} and {new} in one call") for u in x.toposort if u.op is Ops.BIND}
  return x.substitute(binds) if binds else x
def _unbound(shape: tuple, env: dict) -> tuple: return tuple(_unbind(d, env) if isinstance(d, UOp) else d for d in shape)

def _padded(b: Buffer, top: int) -> Buffer:
  """b's contents at the start of a fresh buffer of top elements (a kernel compiled for a symbolic size may read as far
  as its largest value)."""
  out = Buffer.fresh(b.device, top, b.dtype)
  if b.size: out.view(b.size, b.dtype, 0).copyin(b.numpy())
  return out
def _sized(t: Tensor, shape: tuple) -> tuple[Tensor, Buffer, int]:
  """Argument t, data of a symbolic shape, as its function sees it while recorded: the first elements (as many as the
  shape's size) of a buffer of the shape's largest size holding t's. The graph holds no value, so its schedules serve
  every value. Returns that tensor, its buffer and the largest size (a replay pads each call's argument so)."""
  top = sym_range(n := sprod(shape))[1]
  u = R.new_buffer(b := _padded(_data(t.uop).buffer, top), t.uop.loc, shape=(top,))
  return Tensor._of(u, t.device).shrink(((0, n),)).reshape(shape), b, top

def _data(u: UOp) -> UOp | None:
  """The buffer UOp a data UOp (a buffer, or a reshape of one: the same memory, read in the same order) holds, else None."""
  if u.op is Ops.RESHAPE: u = u.src[0]
  return u if u.op is Ops.BUFFER else None

def _alone(t: Tensor) -> bool:
  """Whether t's buffer node, its Buffer and memory are held by t alone (and here: getrefcount's argument, the name u,
  the node's own cached toposort, the replay's list of buffers), so a replay may write them in place."""
  u = t.uop
  return u.op is Ops.BUFFER and sys.getrefcount(u) == 3 + ("toposort" in u.__dict__) and sys.getrefcount(u.buffer) == 3 and \
    sys.getrefcount(u.buffer._buf) == 2

def _bid(u: UOp) -> int | None:
  """id of the base Buffer a data UOp holds, else None."""
  return None if (b := _buffer(u)) is None else id(b)

def _buffer(u: UOp) -> Buffer | None:
  """The base Buffer a data UOp holds, else None."""
  if (d := _data(u)) is None or (b := d.buffer) is None: return None
  return b.base if b.base is not None else b

class TinyJit:
  """@TinyJit on a function whose Tensor arguments (positional or keyword) change between calls and whose work is
  realizing tensors. See the module docstring for what a replay reproduces."""
  MAX_TRIES = 5
  def __init__(self, fxn):
    self.fxn, self.cnt, self.lock = fxn, 0, threading.Lock()
    self.sig, self.last, self.plan, self.replayable = None, None, None, True
    functools.update_wrapper(self, fxn)
  def __get__(self, obj, objtype=None): return self if obj is None else functools.partial(self.__call__, obj)
  @property
  def jit_cache(self) -> list[ExecItem]:
    """The captured kernels a replay runs, in order (tinygrad's): empty until a call has been captured."""
    if (p := self.plan) is None: return []
    return [ExecItem(s.prog, [p.template[j] for j in s.slots]) for s in p.steps if isinstance(s, _Kernel)]
  def reset(self):
    with self.lock: self.cnt, self.sig, self.last, self.plan, self.replayable = 0, None, None, None, True

  def __call__(self, *args, **kwargs):
    if (plan := self.plan) is not None and plan.sig is not None and not kwargs:
      # a replay's usual call, checked as one tuple compare: positional Tensors holding data of the recorded shapes,
      # dtypes and devices (anything else takes the general path below, which realizes lazy arguments or raises)
      # (and bound Variables, each as its Variable: the values are the replay's sizes)
      try: sig = tuple([(u.shape, u.dtype, t.device) if type(t) is Tensor and ((u := t.uop).op is _BUF or u.op is _RESHAPE and u.src[0].op is _BUF)
                        else t.src[0] if type(t) is UOp and t.op is _BIND else None for t in args])
      except AttributeError: sig = None   # a Tensor whose __init__ raised
      if sig == plan.sig:
        if not plan.nvars: return plan.replay(args)
        env = {t.src[0]: t.src[1].attrs["value"] for t in args if type(t) is UOp}
        if len(env) == plan.nvars: return plan.replay([t for t in args if type(t) is Tensor], env)
    # Tensors inside lists, tuples and dicts are arguments too: the non-tensor rest (that structure included) must not change
    # bound Variables (arguments, or in tensors' shapes) are the call's sizes: the signature holds the Variables, a replay
    # takes their values (env)
    tensors: list[Tensor] = []
    env: dict[UOp, int] = {}
    rest = _split((args, kwargs), tensors, env)
    given = {id(t) for t in tensors}   # the caller's tensors (a multi one's shards below are tensors of their own)
    shapes = [t.shape for t in tensors]   # (a lazy argument realized takes its value's shape)
    if any(not _data(t.uop) for t in tensors): Tensor.realize(*tensors)
    if any(t.uop.op is Ops.MULTI for t in tensors):   # a tensor on several devices: each device's shard is an argument
      tensors = [Tensor._of(u, d) for t in tensors for u, d in (zip(t.uop.src, t.device) if t.uop.op is Ops.MULTI else [(t.uop, t.device)])]
      shapes = [t.shape for t in tensors]
    sig = (tuple((_unbound(sh, env), t.dtype, t.device) for sh, t in zip(shapes, tensors)), rest)
    with self.lock:
      if self.sig is None: self.sig = sig
      elif sig != self.sig:
        _err(JitError, f"TinyJit: the arguments changed from {_describe(self.sig)} to {_describe(sig)}: a jitted function "
                       "replays one shape, dtype and device per tensor and the same other arguments (reset() it, or use another TinyJit)")
      cnt, plan = self.cnt, self.plan
      self.cnt += 1
    if plan is not None: return plan.replay(tensors, env)
    if not self.replayable: return self.fxn(*args, **kwargs)
    rec = _Recorder()
    # the tensors that exist before the call: those it rebinds are its state (parameters, optimizer moments); a Tensor
    # whose __init__ raised (still held by a traceback) has no uop
    # (each as (tensor, its uop, the id of its Buffer): a uop of data held weakly, as in_place counts who holds it)
    before = [(t, t.uop if t.uop.op is Ops.MULTI else weakref.ref(t.uop), _bid(t.uop)) for t in gc.get_objects()
              if type(t) is Tensor and getattr(t, "uop", None) is not None] if cnt >= 1 else []
    # a tensor argument of symbolic shape: its function sees it in a buffer of the shape's largest size (_sized)
    sized = {i: _sized(t, sh) for i, (t, sh) in enumerate(zip(tensors, shapes)) if any(isinstance(d, UOp) for d in sh)}
    if sized:
      by_id = {id(tensors[i]): x for i, (x, _, _) in sized.items()}
      args, kwargs = _rebuild((args, kwargs), lambda t: by_id.get(id(t), t))
    alias = {id(b): i for i, (_, b, _) in sized.items()}
    seen = {i: x.uop for i, (x, _, _) in sized.items()}
    rec.argbuf = [id(_buffer(t.uop)) for t in tensors]
    rec.args = set(rec.argbuf) | set(alias)
    R.capture.rec, guards.log = rec, rec.guards
    try:
      ret = self.fxn(*args, **kwargs)
      outs = [x for x in _leaves(ret) if isinstance(x, Tensor)]
      if outs: Tensor.realize(*outs)
    finally: R.capture.rec = guards.log = None
    # an argument of symbolic shape the call wrote (its function saw a padded copy): the caller's tensor takes the value,
    # and the function runs normally from then on (a replay would write the copy)
    for i in (wrote := [i for i, u in seen.items() if sized[i][0].uop is not u]): tensors[i].uop = sized[i][0].uop
    # a call is replayed once two calls in a row ran the same schedules (a first step often differs: lazy initial
    # state); one that never settles within MAX_TRIES calls runs normally from then on
    # (and with the same values of the sizes the arguments do not give: those a replay keeps)
    trace = [(id(e.sched), tuple((v, x) for v, x in e.vars.items() if v not in env)) for e in rec.execs]
    with self.lock:
      # a multi tensor's shards are state of their own
      before = [x for t, u0, b0 in before for x in ([(t, u0, b0)] if type(u0) is weakref.ref else [(x, s, _bid(s)) for x, s in _shards(t, u0)])]
      changed = [(t, b0) for t, u0, b0 in before if t.uop is not (u0() if type(u0) is weakref.ref else u0)]
      # an argument the call rebound (written: t[a:b] = v, t.assign(v), t += v) is rebound on each replay's argument, not
      # kept as state (a tensor of one call); the shard of a multi-device argument is written by running normally
      at = {id(t): i for i, t in enumerate(tensors)}
      argw, changed = [(at[id(t)], t.uop) for t, _ in changed if id(t) in at], [(t, b0) for t, b0 in changed if id(t) not in at]
      shard = any(id(t.t if type(t) is _ShardOf else t) in given for t, _ in changed)
      if wrote or shard or rec.reads_data(tensors, {b0 for _, b0 in changed if b0 is not None}, alias): self.replayable = False
      elif trace == self.last and self.plan is None:
        R._recent.clear()   # (the last graphs realized hold the call's buffers: back to the pool, for the plan to take)
        self.plan = _Plan.build(rec, tensors, ret, [(t, b0, t.uop) for t, b0 in changed], env, alias, argw)
        if self.plan is not None: self.plan.padded = [(i, top) for i, (_, _, top) in sized.items()]
        if self.plan is not None and not kwargs and all(type(x) is Tensor or type(x) is UOp and x.op is Ops.BIND for x in args):
          shapes = iter(sig[0])
          self.plan.sig = tuple(next(shapes) if type(x) is Tensor else x.src[0] for x in args)
          bound = [x.src[0] for x in args if type(x) is UOp]
          self.plan.nvars = len(bound) if len(set(bound)) == len(bound) else -1   # a Variable given twice: the general path checks it
      self.last = trace
      if self.plan is None and cnt + 1 >= self.MAX_TRIES: self.replayable = False
      built = self.plan is not None and plan is None
    if built and any(e.device == "CPU" for e in self.plan.execs):
      # the recorded calls' memory went back to the allocator's pool for realizes to come, but the replays run on the
      # plan's own buffers: it goes back to the system (an LLM's prefill at 256 tokens left ~90 MB there)
      del rec
      R._recent.clear()   # (the last graphs realized, kept for their structure keys, hold the recorded calls' buffers)
      for e in self.plan.execs: e.sched.calls.clear()   # (and the arenas their plain runs kept: realize.KEEP_ARENA)
      CPU.allocator.trim()
    return ret

def _key(x):
  try: hash(x); return x
  except TypeError: return repr(x)
def _split(x, tensors: list, env: dict):
  """x's Tensors, appended to tensors, and the rest of x, hashable: its structure (containers as (type, *items), a
  dict's items in key order so keyword order does not matter, the Tensor class for each Tensor) and non-tensor values,
  which a replay keeps."""
  if isinstance(x, Tensor): tensors.append(x); return Tensor
  if isinstance(x, UOp) and x.dtype is dtypes.index: return _unbind(x, env)
  if isinstance(x, (tuple, list)): return (type(x), *(_split(v, tensors, env) for v in x))
  if isinstance(x, dict): return (type(x), *((_key(k), _split(x[k], tensors, env)) for k in sorted(x, key=repr)))
  return _key(x)
def _show(s) -> str:
  """_split's rest as Python-like text."""
  if s is Tensor: return "Tensor"
  if type(s) is not tuple or not s or not isinstance(s[0], type): return repr(s)
  t, items = s[0], s[1:]
  if issubclass(t, dict): return "{" + ", ".join(f"{k!r}: {_show(v)}" for k, v in items) + "}"
  return f"[{', '.join(map(_show, items))}]" if issubclass(t, list) else f"({', '.join(map(_show, items))}{',' * (len(items) == 1)})"
def _describe(sig) -> str:
  (_, args, kwargs) = sig[1]
  call = ", ".join([_show(a) for a in args[1:]] + [f"{k}={_show(v)}" for k, v in kwargs[1:]])
  return ", ".join(f"{list(s)} {d.name} on {dev}" for s, d, dev in sig[0]) + f" in ({call})"
def _leaves(x):
  if isinstance(x, (tuple, list)): return [y for v in x for y in _leaves(v)]
  if isinstance(x, dict): return [y for v in x.values() for y in _leaves(v)]
  return [x]

class _Plan:
  """A recorded call, resolved: every schedule input named by where its buffer comes from at replay time, then laid
  out once for replay. A replay fills one list of Buffers (v): the arguments', the state's, the random counters', fresh
  memory for each output that leaves the call (returned, or rebinding state), and the plan's own buffers for
  intermediates and outputs only later kernels read (reused by every replay, under the plan's lock); each kernel is
  one prepared call that writes the pointers that change and calls its code."""
  @staticmethod
  def build(rec: _Recorder, args: list[Tensor], ret, state: list[tuple[Tensor, int | None, UOp]], env: dict, alias: dict,
            argw: list[tuple[int, UOp]] = ()) -> _Plan | None:
    """None when the call cannot be replayed: a state tensor that did not start as data, or ends as something no
    recorded schedule computed (a lazy graph: replaying would keep its first value)."""
    p = _Plan()
    argbuf = {b: i for i, b in enumerate(rec.argbuf)} | alias   # (alias: the padded copies of symbolic ones)
    if any(b0 is None for _, b0, _ in state): return None
    startbuf = {b0: i for i, (_, b0, _) in enumerate(state)}
    rngbuf = {id(u.buffer): i for i, (u, _) in enumerate(rec.rng)}
    p.rng, p.state = [n for _, n in rec.rng], [t for t, _, _ in state]
    def where(u: UOp, k: int = len(rec.execs), b: Buffer | None = None):   # u's buffer (b where given) as exec k reads it
      b = id(bb := _buffer(u) if b is None else b)
      for kind, table in (("arg", argbuf), ("out", None), ("rng", rngbuf), ("state", startbuf)):
        if kind == "out":   # the last write before exec k (an assign's output is its target's Buffer: written again later)
          if (kj := next((kj for kj in reversed(rec.made_by(bb) or ()) if kj[0] < k), None)) is not None: return ("out", *kj)
        elif b in table: return (kind, table[b])
      return ("const", u)
    p.execs = [_Exec(e.sched, e.device, [("vals",) if u is None else u if type(u) is tuple else where(u, k, b)
                                              for u, b in zip(e.srcs, e.bufs)], e.shapes, e.locs,
                     e.vars, e.checks) for k, e in enumerate(rec.execs)]
    if any(e.srcs[i][0] not in ("out", "state") for e in p.execs for i in e.sched.alias.values()): return None   # (an argument's)
    # the sizes' values a replay keeps (the Variables the arguments do not bind), and what each must satisfy
    p.kept = {v: x for e in rec.execs for v, x in e.vars.items() if v not in env}
    checks = {}   # one per test (a model's layers repeat theirs), at the first place that made it
    for a, b, held, loc in [c for e in rec.execs for c in e.checks] + [(*g, None) for g in rec.guards]: checks.setdefault((a, b, held), loc)
    p.checks = [(*k, loc) for k, loc in checks.items() if not _always(*k)]
    # (tensor, or an argument's index, (exec, output))
    rebinds = [(t, (rec.made_by(_buffer(u1)) or [None])[-1]) for t, u1 in [(t, u1) for t, _, u1 in state] + list(argw)]
    if any(kj is None for _, kj in rebinds): return None
    p.ret, p.devices = ret, [t.device for t in args + p.state]
    # a returned multi tensor: its shards' sources, its attributes and dtype
    ret_src = {id(t): ("multi", tuple(map(where, u.src)), u.arg, u.dtype) if (u := t.uop).op is Ops.MULTI else where(u)
               for t in _leaves(ret) if isinstance(t, Tensor)}
    rets = [x for s in ret_src.values() for x in (s[1] if s[0] == "multi" else (s,))]
    p._layout(len(args), [("out", *kj) for _, kj in rebinds] + rets)
    p.outs = list(dict.fromkeys(p.made[s] for s in [("out", *kj) for _, kj in rebinds] + rets if s[0] == "out"))
    p.rebinds = [(t, p.outs.index(p.made[("out", *kj)])) for t, kj in rebinds if type(t) is not int]
    p.argw = [(t, p.outs.index(p.made[("out", *kj)])) for t, kj in rebinds if type(t) is int]
    out = lambda s: ("out", p.outs.index(p.made[s])) if s[0] == "out" else s
    p.ret_src = {i: ("multi", tuple(map(out, s[1])), *s[2:]) if s[0] == "multi" else out(s) for i, s in ret_src.items()}
    p.ret_out = r[1] if type(ret) is Tensor and (r := p.ret_src[id(ret)])[0] == "out" else None   # the usual return: one output
    p.lock, p.keyed = threading.Lock(), any(k.keyed for k in p.steps if isinstance(k, _Kernel))
    if not p.state and not p.argw and not p.rng and not p.keyed and not alias and p.ret_out is not None and \
        len(p.outs) == len(p.fresh) == 1 and all(type(k) is _Kernel for k in p.steps):
      p.replay, p.one = p._replay_one, (*p.fresh[0], *p.outs[0], ret.device)
      _, dev, size, dt, _ = p.fresh[0]
      sym = any(isinstance(d, UOp) for d in p.outs[0][2])   # (its buffer has the largest size: a view of it goes back)
      p.ring = Ring(lambda: Buffer.fresh(dev, size, dt)) if size * dt.itemsize < (p.REUSE_SYM_BYTES if sym else p.REUSE_BYTES) and \
        dev == "CPU" else None
    if p.vals or p.checks or any(isinstance(d, UOp) for _, _, sh in p.outs for d in sh): p._compile()
    p.run = _graphs(p.steps, p.template)
    if p.replay == p._replay_one and len(p.run) == 1 and type(p.run[0]) is _Native:   # (_replay_one writes its array itself)
      p.native, at = p.run[0], {j: n for n, j in enumerate(p.run[0].js)}
      p.argpos, p.outpos = [(i, at[i]) for i in range(len(args)) if i in at], at.get(p.fresh[0][0])
      if p.outpos is None: p.native = None
    else: p.native = None
    return p

  def _compile(self):
    """The replay's sizes as generated functions of the Variables' values (in var_order): the checks as one tuple
    compare, each schedule's values buffer (the plan's own, written per replay), each symbolic output's shape."""
    exprs = [x for a, b, _, _ in self.checks for x in (a, b)] + [d for _, _, sh in self.outs for d in sh]
    self.order = sorted({u for x in exprs if isinstance(x, UOp) for u in x.toposort if u.op is Ops.DEFINE_VAR} |
                        {n for _, _, names in self.vals for n in names}, key=var_order)
    self.fits = _sizes_fn([(a, b) for a, b, _, _ in self.checks], self.order, "<=")
    self.held = tuple(held for _, _, held, _ in self.checks)
    self.valbufs = [(b := self.template[j], b.as_numpy() if hasattr(b.allocator, "as_numpy") else None, _sizes_fn(names, self.order))
                    for j, _, names in self.vals]
    self.shaped = [None if all(type(d) is int for d in sh) else _sizes_fn((sprod(sh), *sh), self.order) for _, _, sh in self.outs]

  def _layout(self, nargs: int, leaving: list):
    """Number every buffer a replay touches (its index in v) and make one step per kernel (and per cross-device copy)."""
    first = {"arg": 0, "state": nargs, "rng": nargs + len(self.state)}
    self.template: list[Buffer | None] = [None] * (nargs + len(self.state) + len(self.rng))
    self.fresh: list[tuple[int, str, int, object, int]] = []   # (v index, device, size, dtype, exec) made anew per replay
    self.made: dict[tuple, tuple] = {}   # ("out", k, j) -> (v index, loc, shape): an output's buffer and its UOp's fields
    self.steps, self.nkernels, self.sig, self.nvars, self.padded = [], 0, None, 0, []
    self.vals: list[tuple[int, str, tuple]] = []   # (v index, device, Variables): a schedule's sizes, written per replay
    self.order, self.shaped, self.valbufs, self.wrote = None, [], [], ()   # (see _compile; wrote: the values the buffers hold)
    self.uops: list = [None] * nargs   # the arguments' buffer UOps during a replay (state changes every call: not kept)
    # the kernels run one after another (under the plan's lock): each one's scratch buffers (a contraction's panels) lie
    # in the plan's arena where its schedule's memory plan put them; those of a program that takes none there (a kernel
    # with variants) share one block, not one set per kernel kept for the plan's life (an LLM's prefill plan held ~15 MB
    # per layer)
    self.scratch = SharedScratch([it for it in e.sched.items if not getattr(it.program, "takes_scratch", False)] for e in self.execs)
    self.pinned = [self.PIN_BYTES]   # bytes of constants' repacked results (weights' panels) its kernels may still hold
    def on(j: int, dev: str, const: bool) -> int:   # v index of buffer j on dev: copied once for a constant, else per replay
      if const: self.template.append(R.on_device(self.template[j], dev))
      else: self.template.append(None); self.steps.append(_Copy(j, len(self.template) - 1, dev))
      return len(self.template) - 1
    # an output read on another device is fresh each replay: on_device keeps one copy per Buffer, as contents never change
    leaving = set(leaving) | {s for e in self.execs for s in e.srcs if s[0] == "out" and self.execs[s[1]].device != e.device}
    for k in reversed(range(len(self.execs))):   # an assign's output is its target's buffer: fresh when the output leaves
      for j, i in (e := self.execs[k]).sched.alias.items():
        if ("out", k, j) in leaving and e.srcs[i][0] == "out": leaving.add(e.srcs[i])
    self.written = []   # the state a replay writes in place (v indices), unless someone else holds its old value
    # a schedule's intermediates are touched by its own kernels only, which run before the next schedule's: schedules
    # share one arena per device, each placing its intermediates in it as its memory plan says (an LLM's layers, one
    # schedule each, hold what one layer's kernels hold live at once, not 30 layers' intermediates)
    arenas: dict[str, Buffer] = {}
    for e in self.execs: arenas[e.device] = max(arenas.get(e.device, 0), e.sched.arena)
    self.arenas = arenas = {dev: Buffer(dev, n, dtypes.uint8).allocate() for dev, n in arenas.items() if n}
    mem = {dev: b.as_numpy() for dev, b in arenas.items() if hasattr(b.allocator, "as_numpy")}
    # an output that only later schedules read (a layer's result, read by the next layer) holds its buffer from its
    # schedule to its last reader: outputs whose lives do not overlap share one (an output written in place later, whose
    # buffer lives on as that output, has its own)
    last = {s: k for k, e in enumerate(self.execs) for s in e.srcs if s[0] == "out"}
    inplace = {e.srcs[i] for e in self.execs for i in e.sched.alias.values()}
    free: dict[tuple, list[Buffer]] = {}
    ends: dict[int, list[tuple]] = {}   # exec k -> (key, buffer) free once it has run
    for k, e in enumerate(self.execs):
      for key, b in ends.pop(k - 1, ()): free.setdefault(key, []).append(b)
      sched, slot, consts = e.sched, [], {}
      for i, s in enumerate(e.srcs):
        if s[0] == "out": j, dev = self.made[s][0], self.execs[s[1]].device
        elif s[0] == "const": j, dev = len(self.template), s[1].buffer.device; self.template.append(s[1].buffer); consts[i] = s[1]
        elif s[0] == "rng": j, dev = first["rng"] + s[1], "CPU"
        elif s[0] == "vals":
          j, dev = len(self.template), e.device
          self.template.append(Buffer(dev, len(e.vars), dtypes.int64).allocate()); self.vals.append((j, dev, tuple(e.vars)))
        else: j, dev = first[s[0]] + s[1], self.devices[first[s[0]] + s[1]]
        slot.append(j if dev == e.device else on(j, e.device, s[0] == "const"))
      for j, bt in enumerate(sched.buffer_types[sched.n_in:]):
        if (i := sched.alias.get(j)) is not None:   # written in place: the target's buffer
          self.made[("out", k, j)] = (slot[i], e.locs[j], e.shapes[j])
          if e.srcs[i][0] == "state": self.written.append(slot[i])
          slot.append(slot[i]); continue
        fresh = j < sched.n_out and ("out", k, j) in leaving
        if j >= sched.n_out: self.template.append(arenas[e.device].view(bt.size, bt.dtype.base, sched.offsets[j - sched.n_out]))
        elif fresh: self.template.append(None)
        elif ("out", k, j) in inplace: self.template.append(Buffer(e.device, bt.size, bt.dtype.base).allocate())
        else:
          b = f.pop() if (f := free.get(key := (e.device, bt.size, bt.dtype.base))) else Buffer(*key).allocate()
          ends.setdefault(last.get(("out", k, j), k), []).append((key, b))
          self.template.append(b)
        if fresh: self.fresh.append((len(self.template) - 1, e.device, bt.size, bt.dtype.base, k))
        if j < sched.n_out: self.made[("out", k, j)] = (len(self.template) - 1, e.locs[j], e.shapes[j])
        slot.append(len(self.template) - 1)
      for it, scr in zip(sched.items, sched.scratch_arrays(mem[e.device]) if any(sched.scratch) else sched.scratch):
        self.steps.append(_Kernel(it.program, [slot[s] for s in it.slots], [consts.get(s) for s in it.slots], self.template, self.uops,
                                  scr or self.scratch, self.pinned))
      self.nkernels += len(sched.items)

  PIN_BYTES = 1 << 28     # (a program keeps as much for call_buffers: CPUProgram.KEEP_BYTES)
  REUSE_BYTES = 1 << 16   # outputs under this size come from the plan's last two when no one holds those any more
  REUSE_SYM_BYTES = 1 << 22   # (one of symbolic size: its buffer has the largest, as the plan's intermediates have)
  def _replay_one(self, args: list[Tensor], env=None) -> Tensor:
    """replay for the usual plan (arguments in, kernels only, one fresh output back), without the general one's steps
    (its fields gathered once in self.one: this path is a 3-element add's whole cost under TinyJit); with symbolic sizes,
    the values buffers written when the values change and the output the first elements of its buffer. A small output's
    memory is one of the plan's last two outputs' that nothing references any more (a loop's `y = f(x)` drops the one
    from two calls back): nothing can read it again, and making a Buffer costs what this whole call's kernel does."""
    (j, dev, size, dt, k, o, loc, shape, device), nat, xs = self.one, self.native, ()
    if self.order is not None:
      env = self.kept | env if env else self.kept
      xs = tuple([env[x] for x in self.order])
      if self.fits(*xs) != self.held: self.sizes(env)   # (raises, naming the first test that fails)
    bufs = [(u if (u := t.uop).op is _BUF else u.src[0]).buffer for t in args]   # (the signature checked: data)
    with self.lock:
      try: b = ring.take() if (ring := self.ring) is not None else Buffer.fresh(dev, size, dt)
      except (MemoryError, OSError) as e: raise R._alloc_error(e, self.execs[k].sched, []) from None
      if xs != self.wrote: self._values(xs)
      # one native batch (with copies picked by the values: the one batch the copies picked for xs make): its pointers written here
      if nat is not None and (go := nat.one or nat.batch(xs)) is not None and not R.DEBUG:
        vals = nat.vals
        for i, n in self.argpos: vals[n] = bufs[i].ptr
        vals[self.outpos] = b.ptr
        go()
      else:
        v = self.template.copy()
        v[:len(bufs)], v[j] = bufs, b
        t0 = time.perf_counter()
        for step in self.run: step(v, xs) if type(step) is _Native else step(v)
        if R.DEBUG: R.GlobalCounters.time_sum_s += time.perf_counter() - t0
    R.GlobalCounters.kernel_count += self.nkernels
    if self.shaped and (f := self.shaped[0]) is not None: n, *sh = f(*xs); return Tensor._of(R.new_buffer(b.head(n), loc, shape=tuple(sh)), device)
    return Tensor._of(R.new_buffer(b, loc, shape=shape), device)
  def _values(self, xs: tuple):
    """Each schedule's values buffer (the plan's own, under its lock) at the values xs, kept while xs are the next call's."""
    self.wrote = None
    for b, h, f in self.valbufs:
      if h is not None: h[:] = f(*xs)
      else: b.copyin(np.array(f(*xs), np.int64))
    self.wrote = xs

  def sizes(self, env: dict) -> dict:
    """Every Variable's value for a replay, checked against what the recorded graphs assumed."""
    env = self.kept | env if self.kept else env
    for a, b, held, loc in self.checks:
      if (sym_val(a, env) <= sym_val(b, env)) != held:
        vals = ", ".join(f"{v.attrs['name']}={x}" for v, x in sorted(env.items(), key=lambda t: var_order(t[0])))
        at = f" at {loc}" if loc else ""
        _err(JitError, f"TinyJit: {vals} does not fit the recorded graph ({a!r} <= {b!r} was {held} when recorded{at}): a size "
                       "picked for another value (x[2:5] along a dim of size n needs n >= 5); reset() it, or use another TinyJit")
    return env
  def _out(self, j: int, v: list, xs: tuple) -> UOp:
    """Output j's buffer UOp; a symbolic one is the first elements of its buffer of the largest size, at the values xs."""
    i, loc, shape = self.outs[j]
    if (f := self.shaped[j] if self.shaped else None) is None: return R.new_buffer(v[i], loc, shape=shape)
    n, *shape = f(*xs)
    return R.new_buffer(v[i].head(n), loc, shape=tuple(shape))

  def replay(self, args: list[Tensor], env: dict | None = None):
    state, v, xs = self.state, self.template.copy(), ()
    if self.order is not None:
      env = self.kept | env if env else self.kept
      xs = tuple([env[x] for x in self.order])
      if self.fits(*xs) != self.held: self.sizes(env)   # (raises, naming the first test that fails)
    for i, t in enumerate(args): v[i] = _data(t.uop).buffer
    for i, top in self.padded: v[i] = _padded(v[i], top)
    if state:
      if any(not _data(t.uop) for t in state): Tensor.realize(*[t for t in state if not _data(t.uop)])
      for i, t in enumerate(state, len(args)): v[i] = _data(t.uop).buffer
      for i in self.written:   # a state someone else still reads (a view taken before this call): written into a copy
        if not _alone(state[i - len(args)]): v[i] = v[i].copy_to(v[i].device)
    if rng := [Tensor._counter_input(n) for n in self.rng]:
      for i, u in enumerate(rng, len(args) + len(state)): v[i] = u.buffer
    try:
      for j, dev, size, dt, _ in self.fresh: v[j] = Buffer.fresh(dev, size, dt)
    except (MemoryError, OSError) as e: raise R._alloc_error(e, self.execs[next(k for j, *_, k in self.fresh if v[j] is None)].sched, []) from None
    with self.lock:
      if xs != self.wrote: self._values(xs)
      if self.keyed: self.uops[:] = [_data(t.uop) for t in args]
      t0 = time.perf_counter()
      for step in self.run: step(v, xs) if type(step) is _Native else step(v)
      R.GlobalCounters.time_sum_s += time.perf_counter() - t0
    R.GlobalCounters.kernel_count += self.nkernels
    outs = [self._out(j, v, xs) for j in range(len(self.outs))]   # one buffer UOp per output the call gives back
    for t, i in self.rebinds: t.uop = outs[i]
    for a, i in self.argw: args[a].uop = outs[i]
    if self.ret_out is not None: return Tensor._of(outs[self.ret_out], self.ret.device)
    def uop(src) -> UOp:
      if src[0] == "multi": return UOp(Ops.MULTI, src[3], tuple(map(uop, src[1])), src[2])
      if src[0] == "out": return outs[src[1]]
      if src[0] == "rng": return R.new_buffer(rng[src[1]].buffer, None, shape=(2,))
      return src[1] if src[0] == "const" else (args if src[0] == "arg" else state)[src[1]].uop
    return _rebuild(self.ret, lambda t: _tensor(uop(self.ret_src[id(t)]), t))

UNKEY_CALLS = 2   # calls in a row with other tensors for a keyed argument before its results stop being kept (_Kernel._unkeyed)
class _Kernel:
  """One kernel of a replay: its program on an argument set of the plan's own (CPU), where the pointers of the plan's
  buffers and constants are written once and the others (arguments, state, fresh outputs) each call; else (a program
  without prepare, or one that keeps what it derives from an argument) its call_buffers. A phase that only repacks a
  constant (a weight's B panels) is run by the first replay's call_buffers, which keeps its result; the set made then
  reads that result (and holds it: at most `pinned`'s budget of such results per plan) and skips the phase. Where the
  result depends on the sizes' values (a symbolic contraction's panels), or a copy of a realize.Variants has none yet,
  the set's run takes the result kept for each call's values (CPUProgram.prepare's keyed set) and runs on its own."""
  __slots__ = ("prog", "slots", "inputs", "args", "run", "fixed", "var", "keyed", "uops", "scratch", "pending", "pinned", "held", "last", "changes")
  def __init__(self, prog, slots: list[int], inputs: list, template: list, uops: list, scratch=None, pinned: list | None = None):
    self.prog, self.slots, self.inputs, self.uops, self.scratch, self.pinned = prog, slots, inputs, uops, scratch, pinned
    self.fixed = [(i, j) for i, j in enumerate(slots) if template[j] is not None]
    self.var = tuple((i, j) for i, j in enumerate(slots) if template[j] is None)
    # a phase that only repacks an argument (a weight passed in: B panels) runs once per argument buffer, as outside
    # the JIT: call_buffers keeps its result while that buffer UOp lives
    spec = getattr(prog, "spec", None)
    reuse = {arg for _, arg, *_ in getattr(spec, "reuse", ())}
    self.keyed = tuple((i, j) for i, j in enumerate(slots) if i in reuse and template[j] is None and j < len(uops))
    self.args, self.pending, self.held, self.last, self.changes = None, False, 0, None, {}
    if hasattr(prog, "prepare") and not self.keyed:
      self._bind(template)
      self.pending = self.args is None and pinned is not None and any(inputs[arg] is not None for _, arg, *_ in getattr(spec, "reuse", ()))
  def _bind(self, v: list, kept: bool = False):
    const, self.args = frozenset(i for i, u in enumerate(self.inputs) if u is not None), None
    if self.pinned is not None: self.pinned[0], self.held = self.pinned[0] + self.held, 0
    if (p := self.prog.prepare(const, self.inputs if kept else None, scratch=self.scratch)) is None: return
    # (the results its set holds, every copy's of a realize.Variants, within the plan's budget)
    progs = getattr(self.prog, "progs", (self.prog,))
    if kept and (n := sum(4 * q.spec.scratch[s] for q in progs for _, arg, s, _ in q.spec.reuse if arg in const)):
      if self.pinned[0] < n: return
      self.pinned[0], self.held = self.pinned[0] - n, n
    # (bound: no longer waiting for a first call, also where a rebind of its batch came first: a program moved meanwhile)
    self.args, self.run, self.pending = *p, False
    for i, j in self.fixed: self.args.ptrs[i] = v[j].ptr
  def _unkeyed(self, v: list, inputs: list) -> bool:
    """Whether an argument whose derived results the kernel keeps (keyed) came as another tensor at each of the last
    UNKEY_CALLS calls (a model's input: its packed panels would be kept, never read again): it stops being keyed, its
    phases running each call; a weight passed as the same tensor each call stays keyed. With none left the kernel is
    bound to a plain argument set and joins its batch."""
    last, self.last = self.last or {}, {i: id(inputs[i]) for i, _ in self.keyed}
    self.changes = {i: 0 if last.get(i) == n else self.changes.get(i, 0) + 1 for i, n in self.last.items()}
    if not (new := {i for i, c in self.changes.items() if c >= UNKEY_CALLS}): return False
    self.keyed = tuple((i, j) for i, j in self.keyed if i not in new)
    if not self.keyed: self.last = None; self._bind(v, kept=self.pinned is not None)
    return True
  def _call_buffers(self, v: list, inputs: list):
    if type(self.scratch) is list and self.scratch: return self.prog.call_buffers([v[j] for j in self.slots], inputs, scratch=self.scratch)
    return self.prog.call_buffers([v[j] for j in self.slots], inputs)
  def __call__(self, v: list):
    if (a := self.args) is not None and a.code is self.prog.code:   # the usual replay (a keyed kernel has no args)
      ptrs = a.ptrs
      for i, j in self.var: ptrs[i] = v[j].ptr
      return self.run()
    if self.keyed:
      inputs = list(self.inputs)
      for i, j in self.keyed: inputs[i] = self.uops[j]
      if self._unkeyed(v, inputs): return self(v)
      return self._call_buffers(v, inputs)
    if a is None:
      self._call_buffers(v, self.inputs)
      if self.pending: self.pending = False; self._bind(v, kept=True)   # (once: its results are kept now)
      return
    self._bind(v, kept=self.pinned is not None)
    if self.args is None: return self._call_buffers(v, self.inputs)
    self(v)

class _Native:
  """A run of CPU kernels as one step: each run among them of kernels with argument sets is one native call
  (device.cpu.Batch), the pointers of the buffers each replay gives (arguments, state, fresh outputs) written once each
  into one array; the others (waiting for their first call_buffers: _Kernel.pending, or whose set reads the sizes'
  values at each call: a keyed one) run on their own. A kernel with copies for narrower bounds (realize.Variants) runs
  in the batch as the copy the sizes' values pick: one set of batches per choice of copies, picked once per distinct
  values (xs, the plan's Variables' values; where they make one batch, _Plan._replay_one runs it: batch); a copy
  whose set reads the sizes' values at each call (keyed: its packed weights not made yet) runs on its own (_Copied),
  and its kernel is bound again after (as often as it has copies at most: then its set is not keyed any more, unless
  its packed weights depend on the values). A program that moves from its JIT engine
  onto its shared object (linked meanwhile) has its kernels bound again."""
  __slots__ = ("kernels", "template", "js", "vals", "segs", "moving", "pending", "one", "picks", "built", "chosen", "stale", "tries",
               "copied", "ones", "keyed")
  def __init__(self, kernels: list[_Kernel], template: list):
    self.kernels, self.template = kernels, template
    self.js = sorted({j for k in kernels for _, j in k.var})   # the v indices a replay fills
    self.vals = (ctypes.c_void_p * max(1, len(self.js)))()
    self.stale, self.tries = [], {}
    self._build()
  def _build(self, rebind: bool = False):
    if rebind:   # (fresh sets: the old ones read vals, not their own pointers)
      for k in self.kernels: k._bind(self.template, kept=k.pinned is not None)
    self.picks = [k for k in self.kernels if _copies(k.args)]
    self.built, self.chosen, self.copied = {}, {}, {}   # choice of copies -> segs; xs -> segs; id(keyed set) -> its _Copied
    self.ones = {}   # xs -> the run of its one batch, where the copies picked for xs make one (_Plan._replay_one calls it)
    self.segs = self._segs(())
    sets = lambda k: _copies(k.args) or ([k.args] if Batch.takes(k.args) else [])
    self.moving = [k for k in self.kernels if any(getattr(a.code, "engine", None) is not None for a in sets(k))]
    self.pending = [k for k in self.kernels if k.pending]
    self.keyed = [k for k in self.kernels if k.keyed and not _copies(k.args)]   # (each joins its batch once it stops being keyed)
    # a replay may write vals itself and call this when it is one batch that stays (_Plan._replay_one)
    self.one = self.segs[0].run if len(self.segs) == 1 and type(self.segs[0]) is Batch and not self.moving and not self.pending \
      and not self.picks else None
  def _segs(self, choice: tuple) -> list:
    """The steps for one choice of copies (per kernel of self.picks; () before any is picked: each runs on its own)."""
    at, copy, steps = {j: n for n, j in enumerate(self.js)}, dict(zip(map(id, self.picks), choice)), []
    for k in self.kernels:
      a = k.args.sets[copy[id(k)]] if id(k) in copy else k.args
      # (a keyed copy: one _Copied per set, whichever choices use it: it knows the values its set holds results for)
      other = (self.copied.get(id(a)) or self.copied.setdefault(id(a), _Copied(k.var, a, k.args.runs[copy[id(k)]]))) \
        if id(k) in copy and not Batch.takes(a) else k
      steps.append((a, [(i, at[j]) for i, j in k.var], other))
    return Batch.runs(steps, self.vals)
  def _pick(self, xs) -> list:
    """The steps for the values written in the plan's values buffers (the copies' choice read there once per xs)."""
    choice = tuple([k.prog.pick(k.args.sets[0].ptrs[k.prog.slot]) for k in self.picks])
    if (segs := self.built.get(choice)) is None: segs = self.built[choice] = self._segs(choice)
    self.stale = [k for k, c in zip(self.picks, choice) if k.args.sets[c].keyed and self.tries.get(id(k), 0) < len(k.args.sets)]
    if xs is not None and not self.stale:
      self.chosen[xs] = segs
      if len(segs) == 1 and type(segs[0]) is Batch and not self.moving and not self.pending: self.ones[xs] = segs[0].run
    return segs
  def batch(self, xs: tuple):
    """The run of the one batch the copies picked for the values xs (written in the values buffers) make, else None:
    the steps then run through __call__. A new xs is picked here (a decode loop's positions are new at every call)."""
    if (go := self.ones.get(xs)) is None and self.picks and not self.moving and not self.pending and xs not in self.chosen:
      self._pick(xs)
      go = self.ones.get(xs)
    return go
  def __call__(self, v: list, xs: tuple | None = None):
    if self.moving and any(k.args.code is not k.prog.code for k in self.moving): self._build(rebind=True)
    vals = self.vals
    for n, j in enumerate(self.js): vals[n] = v[j].ptr
    for s in (self.segs if not self.picks else self.chosen.get(xs) or self._pick(xs)):
      s.run() if type(s) is Batch else s(v, xs) if type(s) is _Copied else s(v)
    if self.pending and not all(k.pending for k in self.pending) or self.keyed and not all(k.keyed for k in self.keyed): self._build()
    if self.stale:
      for k in self.stale: self.tries[id(k)] = self.tries.get(id(k), 0) + 1; k._bind(self.template, kept=k.pinned is not None)
      self.stale = []
      self._build()

class _Copied:
  """A copy's own keyed set (it reads the sizes' values and looks up its kept results each call) run on v's buffers,
  outside the batch. After a run at values xs the set holds every result for them: a next run at the same xs calls
  its code with those phases skipped, without the look-up."""
  __slots__ = ("var", "args", "run", "xs")
  def __init__(self, var: tuple, args, run): self.var, self.args, self.run, self.xs = var, args, run, None
  def __call__(self, v: list, xs):
    ptrs = self.args.ptrs
    for i, j in self.var: ptrs[i] = v[j].ptr
    if xs is not None and xs == self.xs and (r := self.args.runs.get(self.args.keyed)) is not None: return r()
    self.xs = None
    self.run()
    self.xs = xs

def _copies(args) -> list | None:
  """The argument sets of a realize.Variants' copies (a keyed one runs on its own when picked), else None."""
  sets = getattr(args, "sets", None)
  return sets if sets is not None and all(Batch.takes(a) or getattr(a, "keyed", False) for a in sets) else None

def _graphs(steps: list, template: list) -> list:
  """steps, each run of kernels whose program has a Graph (a device that replays kernels as one graph: CUDA's) as one
  step of that Graph, and each run of kernels with CPU argument sets as one _Native step."""
  out, run = [], []
  native = lambda s: type(s) is _Kernel and (Batch.takes(s.args) or _copies(s.args) is not None or s.pending)
  graph = lambda s: _Native if native(s) else getattr(s.prog, "Graph", None) if type(s) is _Kernel and s.args is None and not s.keyed else None
  for s in steps + [None]:
    if run and (s is None or graph(s) is not graph(run[0]) or graph(s) is not _Native and s.prog.dev is not run[0].prog.dev):
      out.append(_Native(run, template) if graph(run[0]) is _Native else graph(run[0])(run)); run = []
    if s is not None: (run if graph(s) else out).append(s)
  return out

class _Copy:
  """A replay step: buffer j's copy on device (an input from another device), as the realize driver makes it."""
  def __init__(self, j: int, dst: int, device: str): self.j, self.dst, self.device = j, dst, device
  def __call__(self, v: list): v[self.dst] = R.on_device(v[self.j], self.device)

class _ShardOf:
  """Shard k of a multi tensor as a state tensor of its own: read, and rebound in place, through the tensor's multi."""
  __slots__ = ("t", "k")
  def __init__(self, t: Tensor, k: int): self.t, self.k = t, k
  @property
  def device(self) -> str: return self.t.device[self.k]
  @property
  def uop(self) -> UOp:
    if (m := self.t.uop).op is not Ops.MULTI or any(s.op is not Ops.BUFFER for s in m.src): m = self.t.realize().uop   # (changed lazily)
    return m.src[self.k]
  @uop.setter
  def uop(self, u: UOp): m = self.t.uop; self.t.uop = m.replace(src=m.src[:self.k] + (u,) + m.src[self.k + 1:])

def _shards(t: Tensor, u0: UOp) -> list:
  """(t, u0), or for a multi tensor of data that stays one over the same devices, (shard k, u0's shard k) per device
  (this process's: another rank's shard is a placeholder, which no kernel reads or writes here)."""
  data = lambda m: m.op is Ops.MULTI and all(s.op is Ops.BUFFER for s in m.src)
  if not (data(u0) and data(u1 := t.uop) and u1.arg == u0.arg and len(u1.src) == len(u0.src)): return [(t, u0)]
  return [(_ShardOf(t, k), s) for k, s in enumerate(u0.src) if "@" not in s.buffer.device or s.buffer.is_allocated]

def _tensor(u: UOp, like: Tensor) -> Tensor:
  """A fresh Tensor holding buffer u (of like's shape and device: the recorded call returned like realized)."""
  return Tensor._of(u, like.device)

def _rebuild(x, f):
  if isinstance(x, Tensor): return f(x)
  if isinstance(x, tuple): return tuple(_rebuild(v, f) for v in x)
  if isinstance(x, list): return [_rebuild(v, f) for v in x]
  if isinstance(x, dict): return {k: _rebuild(v, f) for k, v in x.items()}
  return x
