"""TinyJit (tinygrad's name and semantics): a function of Tensors runs normally while it is recorded (every schedule it
realizes, with where each input buffer came from); once two calls in a row ran the same schedules, later calls replay
the recorded kernels on the new arguments' buffers without calling the function, building graphs or looking up caches.

What a replay reproduces: the schedules realized in the function (Tensor.realize, .numpy(), an optimizer's step), in
order; the tensors they rebound (parameters and optimizer state realized inside: their new values, as fresh buffers);
random numbers drawn inside (new counters each call); the returned tensors (fresh each call). What it cannot: host
work (a .numpy() result used in Python, a branch on data), which is why a function whose schedules keep changing
between calls is never replayed (it runs normally every time). Arguments must keep their shapes, dtypes, devices and
non-tensor values; a call that changes one raises JitError."""
from __future__ import annotations
import functools, gc, threading
from dataclasses import dataclass, field
from morok_mlir.core.uop import UOp, sym_val
from morok_mlir.dialects.ops import Ops
from morok_mlir.core.provenance import error as _err
from morok_mlir.ir.emit import buffer_data
from morok_mlir.device.buffer import Buffer
from morok_mlir import realize as R
from morok_mlir.tensor import Tensor

class JitError(RuntimeError): pass

@dataclass
class _Exec:
  sched: R.Schedule
  device: str
  srcs: list        # per schedule input: ("arg", i) | ("state", i) | ("out", k, j) | ("rng", i) | ("const", uop)
  shapes: list      # the realized outputs' shapes (what their buffer UOps carry)
  locs: list

@dataclass
class _Recorder:
  """What one traced call did, filled by realize() and Tensor.realize() through R.capture."""
  execs: list = field(default_factory=list)
  made: dict = field(default_factory=dict)     # id(Buffer) -> (exec k, output j), for the buffers this call computed
  rng: list = field(default_factory=list)      # (counter buffer UOp, values drawn) for each random tensor made
  keep: list = field(default_factory=list)     # keeps recorded Buffers alive, so their ids stay theirs
  def schedule(self, sched: R.Schedule, device: str, inputs: list, bufs: list, outs: list[UOp]):
    k = len(self.execs)
    self.execs.append(_Exec(sched, device, list(inputs), [tuple(sym_val(d) for d in o.shape) for o in outs], [o.loc for o in outs]))
    for j in range(sched.n_out): self.made[id(bufs[sched.n_in + j])] = (k, j)
    self.keep += bufs[sched.n_in:sched.n_in + sched.n_out]
  def random(self, counter: UOp, n: int): self.rng.append((counter, n))

def _buffer(u: UOp) -> Buffer | None:
  """The base Buffer a data UOp (a buffer, or a reshape of one) holds, else None."""
  if u.op is Ops.RESHAPE: u = u.src[0]
  if u.op is not Ops.BUFFER: return None
  b = buffer_data(u)
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
  def reset(self):
    with self.lock: self.cnt, self.sig, self.last, self.plan, self.replayable = 0, None, None, None, True

  def __call__(self, *args, **kwargs):
    flat = list(args) + [kwargs[k] for k in sorted(kwargs)] if kwargs else args
    tensors = [x for x in flat if isinstance(x, Tensor)]
    if any(t.uop.op is not Ops.BUFFER for t in tensors): Tensor.realize(*tensors)
    sig = (tuple((t.shape, t.dtype, t.device) for t in tensors), tuple(_key(x) for x in flat if not isinstance(x, Tensor)), tuple(sorted(kwargs)))
    with self.lock:
      if self.sig is None: self.sig = sig
      elif sig != self.sig:
        _err(JitError, f"TinyJit: the arguments changed from {_describe(self.sig)} to {_describe(sig)}: a jitted function "
                       "replays one shape, dtype and device per tensor and the same other arguments (reset() it, or use another TinyJit)")
      cnt, plan = self.cnt, self.plan
      self.cnt += 1
    if plan is not None: return plan.replay(tensors)
    if not self.replayable: return self.fxn(*args, **kwargs)
    rec = _Recorder()
    # the tensors that exist before the call: those it rebinds are its state (parameters, optimizer moments); a Tensor
    # whose __init__ raised (still held by a traceback) has no uop
    before = [(t, u) for t in gc.get_objects() if type(t) is Tensor and (u := getattr(t, "uop", None)) is not None] if cnt >= 1 else []
    R.capture.rec = rec
    try:
      ret = self.fxn(*args, **kwargs)
      outs = [x for x in _leaves(ret) if isinstance(x, Tensor)]
      if outs: Tensor.realize(*outs)
    finally: R.capture.rec = None
    # a call is replayed once two calls in a row ran the same schedules (a first step often differs: lazy initial
    # state); one that never settles within MAX_TRIES calls runs normally from then on
    trace = [id(e.sched) for e in rec.execs]
    with self.lock:
      if any(None in e.srcs for e in rec.execs): self.replayable = False   # None: symbolic sizes' values
      elif trace == self.last and self.plan is None:
        self.plan = _Plan.build(rec, tensors, ret, [(t, u0, t.uop) for t, u0 in before if t.uop is not u0])
      self.last = trace
      if self.plan is None and cnt + 1 >= self.MAX_TRIES: self.replayable = False
    return ret

def _key(x):
  try: hash(x); return x
  except TypeError: return repr(x)
def _describe(sig) -> str: return ", ".join(f"{list(s)} {d.name} on {dev}" for s, d, dev in sig[0]) + (f" and {sig[1]}" if sig[1] else "")
def _leaves(x):
  if isinstance(x, (tuple, list)): return [y for v in x for y in _leaves(v)]
  if isinstance(x, dict): return [y for v in x.values() for y in _leaves(v)]
  return [x]

class _Plan:
  """A recorded call, resolved: every schedule input named by where its buffer comes from at replay time."""
  @staticmethod
  def build(rec: _Recorder, args: list[Tensor], ret, state: list[tuple[Tensor, UOp, UOp]]) -> _Plan | None:
    """None when the call cannot be replayed: a state tensor that did not start as data, or ends as something no
    recorded schedule computed (a lazy graph: replaying would keep its first value)."""
    p = _Plan()
    argbuf = {id(_buffer(t.uop)): i for i, t in enumerate(args)}
    if any(_buffer(u0) is None for _, u0, _ in state): return None
    startbuf = {id(_buffer(u0)): i for i, (_, u0, _) in enumerate(state)}
    rngbuf = {id(buffer_data(u)): i for i, (u, _) in enumerate(rec.rng)}
    p.rng, p.state = [n for _, n in rec.rng], [t for t, _, _ in state]
    def where(u: UOp):
      b = id(_buffer(u))
      for kind, table in (("arg", argbuf), ("out", rec.made), ("rng", rngbuf), ("state", startbuf)):
        if b in table: return (kind, *table[b]) if kind == "out" else (kind, table[b])
      return ("const", u)
    p.execs = [_Exec(e.sched, e.device, [where(u) for u in e.srcs], e.shapes, e.locs) for e in rec.execs]
    p.rebinds = [(t, rec.made.get(id(_buffer(u1)))) for t, _, u1 in state]   # (tensor, (exec, output))
    if any(kj is None for _, kj in p.rebinds): return None
    p.ret = ret
    p.ret_src = {id(t): where(t.uop) for t in _leaves(ret) if isinstance(t, Tensor)}
    return p

  def replay(self, args: list[Tensor]):
    if any(t.uop.op is not Ops.BUFFER for t in self.state): Tensor.realize(*[t for t in self.state if t.uop.op is not Ops.BUFFER])
    live = {"arg": [buffer_data(t.uop) for t in args], "state": [buffer_data(t.uop) for t in self.state],
            "rng": [buffer_data(Tensor._counter_input(n)) for n in self.rng]}
    made: list[list[Buffer]] = []
    def resolve(src) -> Buffer:
      return made[src[1]][src[2]] if src[0] == "out" else buffer_data(src[1]) if src[0] == "const" else live[src[0]][src[1]]
    for e in self.execs:
      # only constants keep their UOp: what a program derives from them (packed weights) stays valid across replays
      ins = [b if (b := resolve(s)).device == e.device else R.on_device(b, e.device) for s in e.srcs]
      bufs = R.run_buffers(e.sched, e.device, ins, [s[1] if s[0] == "const" else None for s in e.srcs])
      made.append(bufs[e.sched.n_in:])
    uops: dict = {}
    def uop(src) -> UOp:   # a buffer UOp for each output a tensor holds, made once
      if src[0] == "rng": return R.new_buffer(live["rng"][src[1]], None, shape=(2,))
      if src[0] != "out": return src[1] if src[0] == "const" else {"arg": args, "state": self.state}[src[0]][src[1]].uop
      if (u := uops.get(src)) is None: u = uops[src] = R.new_buffer(made[src[1]][src[2]], self.execs[src[1]].locs[src[2]], shape=self.execs[src[1]].shapes[src[2]])
      return u
    for t, (k, j) in self.rebinds: t.uop = uop(("out", k, j))
    return _rebuild(self.ret, lambda t: _tensor(uop(self.ret_src[id(t)]), t))

def _tensor(u: UOp, like: Tensor) -> Tensor:
  """A fresh Tensor holding buffer u (of like's shape: the recorded call returned like realized, a buffer UOp); built by
  Tensor's constructor, so every slot it has is set."""
  return Tensor(u, device=like.device)

def _rebuild(x, f):
  if isinstance(x, Tensor): return f(x)
  if isinstance(x, tuple): return tuple(_rebuild(v, f) for v in x)
  if isinstance(x, list): return [_rebuild(v, f) for v in x]
  if isinstance(x, dict): return {k: _rebuild(v, f) for k, v in x.items()}
  return x
