"""Realizing graphs that span devices: logical graph (with `multi` nodes) -> per-device graphs (core/multi.py) ->
uop-allreduce (copies and adds) -> rounds of realize() per device, a round computing the values the next one's
copies read. Every step is one realize() on one device, so the schedule cache, TinyJit's recording (a copied value
enters the next graph as an input on its own device, which realize and a replay copy over) and DEBUG all apply.

Over ranks (devices BASE@r, one process each): every rank builds every rank's per-device graphs (the same on all, so
all find the same collectives in the same order), runs only its own, and calls the Communicator in rounds of its own
for each `allreduce` over ranks: its partial (or its shard, for a gather: an allgather) realized locally, the result an
input of the next round. Another rank's shard is a placeholder input (a Buffer never given memory here)."""
from __future__ import annotations
import math
from morok_mlir.core import env
from morok_mlir.core.uop import UOp, attrs
from morok_mlir.core.multi import Sharded, shard_graph, multi, copy, gather, split_bounds, rank_of, mine, _cut
from morok_mlir.device.buffer import Buffer
from morok_mlir.dialects.ops import Ops
from morok_mlir import realize as R

def _devices(roots: list[UOp], where: dict[UOp, str]) -> dict[UOp, str | None]:
  """Each node's device (module docstring of core/multi.py); `where`: input buffers standing for a copy's result."""
  dev: dict[UOp, str | None] = {}
  for r in roots:
    for u in r.toposort:
      if u in dev: continue
      if u.op in (Ops.COPY, Ops.ALLREDUCE): dev[u] = u.attrs["device"]
      elif u.buffer is not None: dev[u] = where.get(u, u.buffer.device)
      else:
        ds = {d for s in u.src if (d := dev[s]) is not None}
        if len(ds) > 1: raise RuntimeError(f"{u.loc or '<unknown>'}: {u.op} reads values on {', '.join(sorted(ds))} without a copy")
        dev[u] = ds.pop() if ds else None
  return dev

def _resolve_copies(roots: list[UOp], beam) -> tuple[list[UOp], dict[UOp, str]]:
  """roots with every copy of a computed value replaced by an input holding it, computed round by round: a round
  realizes, per device, the sources of the copies no other pending copy is under."""
  where: dict[UOp, str] = {}
  while True:
    dev, pending, below = _devices(roots, where), [], {}
    for r in roots:
      for u in r.toposort:
        if u in below: continue
        below[u] = any(below[s] or s.op is Ops.COPY for s in u.src)
        if u.op is Ops.COPY and not below[u]: pending.append(u)
    if not pending: return roots, where
    m, todo = {}, {}
    for c in dict.fromkeys(pending):
      src, d = c.src[0], dev[c.src[0]]
      if d is None or d == c.attrs["device"]: m[c] = src   # a constant, or already there
      elif src.buffer is not None:   # an input: a node of its own standing for it on c's device, where realize() copies it
        m[c] = n = R.new_buffer(src.buffer, src.loc, shape=src.shape)
        where[n] = c.attrs["device"]
      else: todo.setdefault(d, []).append(c)
    for d, cs in todo.items():
      for c, b in zip(cs, R.realize([c.src[0] for c in cs], d, beam=beam)):
        m[c] = n = R.new_buffer(b, c.loc, shape=c.shape)
        where[n] = c.attrs["device"]
    roots = [r.substitute(m) for r in roots]

COMM = None   # the Communicator of rank devices' collectives (dist.init() sets it)
COLLECTIVE = {Ops.ADD: "sum", Ops.MAX: "max"}

def _comm():
  if COMM is None: raise RuntimeError("tensors on ranks' devices (BASE@r) need morok_mlir.dist.init() first")
  return COMM

class _CommCall:
  """A Communicator call as a device program (call_buffers: the inputs, then the output), so that a collective is a
  schedule of one item: run as any schedule, and recorded and replayed by TinyJit in order with the kernels. fn
  "bucket": the allreduce of several inputs (of `shapes`) as one message, into their concatenation."""
  def __init__(self, fn: str, op: str, shapes: tuple): self.fn, self.op, self.shapes = fn, op, shapes
  def call_buffers(self, bufs: list[Buffer], inputs) -> None:
    if self.fn == "bucket": _comm().bucket(bufs[:-1], bufs[-1], self.shapes, self.op)
    else: _comm().into(self.fn, bufs[0], bufs[1], self.shapes[0], self.op)

_comm_scheds: dict[tuple, R.Schedule] = {}   # one per collective, shape, dtype and device: TinyJit knows a step by its schedule
def _collective(fn: str, us: list[UOp], device: str, shape: tuple, op: str = "sum") -> UOp:
  """fn of us (realized inputs on device; one but for a bucket) over the ranks, as an input of `shape` on device."""
  shapes, dt, n = tuple(u.shape for u in us), us[0].dtype, len(us)
  if (sched := _comm_scheds.get(key := (fn, op, shapes, shape, dt, device))) is None:
    bts = [UOp(Ops.BUFFER, dt.ptr(math.prod(sh)), (), attrs(slot=i)) for i, sh in enumerate((*shapes, shape))]
    name = {"allreduce": f"allreduce_{op}", "bucket": f"allreduce_{op}_bucket"}.get(fn, fn)   # (DEBUG=2's kernel list)
    item = R.ScheduleItem(name, _CommCall(fn, op, shapes), tuple(range(n + 1)))
    sched = _comm_scheds[key] = R.Schedule([item], bts, n, 1)
  bufs = R.run_schedule(sched, device, us)
  ret = R.new_buffer(bufs[-1], us[0].loc, shape=shape)
  if (rec := R.capture.rec) is not None: rec.schedule(sched, device, us, bufs, [ret])
  return ret

def _cross(u: UOp) -> bool: return u.op is Ops.ALLREDUCE and "@" in u.attrs["devices"]

def placeholder(shape: tuple, dtype, device: str, loc: str | None = None) -> UOp:
  """Another rank's value: an input of its shape and dtype whose Buffer is never given memory here."""
  return R.new_buffer(Buffer(device, math.prod(shape), dtype), loc, shape=shape)
def _remote(u: UOp, device: str) -> UOp: return placeholder(u.shape, u.dtype, device, u.loc)

def _gather_axis(src: tuple[UOp, ...]) -> int | None:
  """The axis along which an allreduce's sources are shards padded to the whole (a gather: gather() in core/multi.py)."""
  if not all(s.op is Ops.PAD for s in src): return None
  return next((i for s in src for i in range(len(s.shape)) if any(s.attrs["padding"][2 * i:2 * i + 2])), None)

def _allgather(src: tuple[UOp, ...], k: int, ax: int, local: str, beam) -> UOp:
  """The whole value from every rank's shard (src: the shards padded to it): an allgather of the shards, each padded to
  the largest, then joined here."""
  shards = [s.src[0] for s in src]
  m, n = max(s.shape[ax] for s in shards), src[0].shape[ax]
  pad = lambda u, lo, hi: u.pad(tuple((lo, hi) if i == ax else (0, 0) for i in range(len(u.shape))))
  own = pad(shards[k], 0, m - shards[k].shape[ax])
  g = _collective("allgather", _run([own.reshape((1, *own.shape))], local, beam), local, (len(src), *own.shape))
  out, lo = None, 0
  for r, s in enumerate(shards):
    w = s.shape[ax]
    part = pad(g.shrink(tuple((r, r + 1) if i == 0 else None for i in range(len(g.shape)))).reshape(own.shape)
               .shrink(tuple((0, w) if i == ax else None for i in range(len(own.shape)))), lo, n - lo - w)
    out, lo = part if out is None else out + part, lo + w
  return out

def lower_allreduce(*args):
  """passes.allreduce's (the passes load with the first graph over several devices, not with this module)."""
  from morok_mlir.passes.allreduce import lower_allreduce
  return lower_allreduce(*args)

def _run(us: list[UOp], device: str, beam) -> list[UOp]:
  """us, computed from this rank's values, realized on device as inputs."""
  for u in us:
    for v in u.toposort:
      if v.buffer is not None and (r := rank_of(v.buffer.device)) is not None and not v.buffer.is_allocated:
        raise RuntimeError(f"{u.loc or '<unknown>'}: this computation reads rank {r}'s shard, which this process does not hold")
  roots, _ = _resolve_copies(lower_allreduce(us, ring_bytes()), beam)
  return [R.new_buffer(R.on_device(b, device), u.loc, shape=u.shape) for u, b in zip(us, R.realize(roots, device, beam=beam))]

def _collectives(roots: list[UOp], beam) -> list[UOp]:
  """roots (every rank's graphs) with each allreduce over ranks replaced by its value here (another rank's by a
  placeholder), round by round: a round calls the Communicator for those no other such allreduce is under, in the
  order of the graphs, which every rank has the same; a round's allreduces of one op and dtype go as one message."""
  while True:
    groups, below = {}, {}
    for r in roots:
      for u in r.toposort:
        if u in below: continue
        below[u] = any(below[s] or _cross(s) for s in u.src)
        if _cross(u) and not below[u]: groups.setdefault((u.attrs["op"], u.src), []).append(u)
    if not groups: return roots
    m, vals, buckets = {}, {}, {}
    for key, us in groups.items():
      (op, src), devs = key, tuple(us[0].attrs["devices"].split(","))
      k = devs.index(local := mine(devs))
      if op == Ops.ADD and (ax := _gather_axis(src)) is not None: vals[key] = _allgather(src, k, ax, local, beam)
      else: buckets.setdefault((op, src[k].dtype, local), {})[key] = src[k]
    for (op, _, local), parts in buckets.items():
      vals.update(zip(parts, _allreduces(list(parts.values()), COLLECTIVE[Ops(op)], local, beam)))
    for key, us in groups.items():
      local = mine(tuple(us[0].attrs["devices"].split(",")))
      for u in us:
        d = u.attrs["device"]
        m[u] = vals[key] if d == local else _remote(u, d) if rank_of(d) is not None else copy(vals[key], d)
    roots = [r.substitute(m) for r in roots]

BUCKET_BYTES = 25 << 20   # PyTorch DDP's bucket_cap_mb

def _allreduces(parts: list[UOp], op: str, local: str, beam) -> list[UOp]:
  """The allreduces over ranks of this rank's parts (of one dtype, say a step's gradients) as few messages (PyTorch
  DDP's gradient buckets): the parts realized together, then one Communicator call per bucket of up to BUCKET_BYTES
  (the parts copied into one message there), each value a view of its bucket. One message instead of one per
  gradient, and the same message every step, so the shape check runs once."""
  groups, size = [], 0
  for i, p in enumerate(parts):   # (a symbolic size: a message of its own)
    n = math.prod(p.shape) * p.dtype.itemsize if all(isinstance(d, int) for d in p.shape) else BUCKET_BYTES + 1
    if not groups or size + n > BUCKET_BYTES: groups.append([]); size = 0
    groups[-1].append(i); size += n
  done, ret = _run(parts, local, beam), []
  for g in groups:
    if len(g) == 1: ret.append(_collective("allreduce", [done[g[0]]], local, parts[g[0]].shape, op)); continue
    val, o = _collective("bucket", [done[i] for i in g], local, (sum(math.prod(parts[i].shape) for i in g),), op), 0
    for i in g: ret.append(val.shrink(((o, o := o + math.prod(parts[i].shape)),)).reshape(parts[i].shape))
  return ret

def ring_bytes() -> int:
  """RING_BYTES in the environment (read at each call): allreduces of at least so many bytes go around the ring."""
  return env.get("RING_BYTES")

def realize_multi(outs: list[UOp], devices: tuple[str, ...], beam=None) -> list[UOp]:
  """Realize logical UOps of tensors on `devices`: per output, a `multi` of input buffers (an output no multi value
  reaches, such as a constant, whole on each device)."""
  vals = [v if isinstance(v, Sharded) else Sharded(tuple(copy(v, d) for d in devices), None, devices) for v in shard_graph(outs)]
  pieces = [(d, s) for v in vals for d, s in zip(v.devices, v.shards)]
  if (local := mine(devices)) is not None:   # over ranks: the collectives, then this rank's pieces
    roots, ret, k = _collectives([s for _, s in pieces], beam), [], 0
    here = [i for i, (d, _) in enumerate(pieces) if d == local]
    done = [_remote(r, d) for (d, _), r in zip(pieces, roots)]
    for i, b in zip(here, _run([roots[i] for i in here], local, beam)): done[i] = b
    for o, v in zip(outs, vals):
      ret.append(multi(tuple(done[k:k + len(v.shards)]), v.axis, v.devices, o.loc))
      k += len(v.shards)
    return ret
  roots = lower_allreduce([s for _, s in pieces], ring_bytes())
  roots, _ = _resolve_copies(roots, beam)
  by_dev: dict[str, list[int]] = {}
  for i, (d, _) in enumerate(pieces): by_dev.setdefault(d, []).append(i)
  done: list[UOp | None] = [None] * len(roots)
  for d, idx in by_dev.items():
    for i, b in zip(idx, R.realize([roots[i] for i in idx], d, beam=beam)):
      done[i] = R.new_buffer(R.on_device(b, d), pieces[i][1].loc, shape=pieces[i][1].shape)
  ret, k = [], 0
  for o, v in zip(outs, vals):
    ret.append(multi(tuple(done[k:k + len(v.shards)]), v.axis, v.devices, o.loc))
    k += len(v.shards)
  return ret

def replicated(u: UOp, devices: tuple[str, ...]) -> UOp:
  """u whole on every device (copies of it)."""
  return multi(tuple(copy(u, d) for d in devices), None, devices, u.loc)

def shard(u: UOp, devices: tuple[str, ...], axis: int | None) -> UOp:
  """u on devices: split along axis (split_bounds), or whole on each (axis None)."""
  if mine(devices) is not None: _comm().agree(u.shape, u.dtype, "shard")   # SPMD: every rank shards a value of one shape
  if axis is None: return replicated(u, devices)
  if not isinstance(n := u.shape[axis], int): raise ValueError(f"cannot split a symbolic dim ({n!r}) over devices")
  if (b := split_bounds(n, len(devices))) is None:
    raise ValueError(f"cannot split a dim of size {n} over {len(devices)} devices: a shard would be empty")
  return multi(tuple(copy(_cut(u, axis, lo, hi), d) for d, (lo, hi) in zip(devices, b)), axis, devices, u.loc)

def gather_to(u: UOp, device: str) -> UOp:
  """A realized multi value (a `multi` of input buffers) whole on one device: a single-device graph of copies (over
  ranks: the value, gathered now)."""
  if mine(devs := tuple(u.attrs["devices"].split(","))) is not None: return realize_on(u, device)
  ax = u.attrs["axis"]
  return gather(Sharded(u.src, None if ax < 0 else ax, devs), device)

def realize_on(u: UOp, device: str, beam=None) -> UOp:
  """A one-device value computed from multi values (a gradient flowing back to a leaf that was sharded lazily), realized
  on device as an input buffer."""
  v = shard_graph([copy(u, device)])[0]
  if rank_of(device) is not None or any(_cross(x) for x in v.toposort): return _run(_collectives([v], beam), device, beam)[0]
  roots, _ = _resolve_copies(lower_allreduce([v if isinstance(v, UOp) else gather(v, device)], ring_bytes()), beam)
  return R.new_buffer(R.on_device(R.realize(roots, device, beam=beam)[0], device), u.loc, shape=u.shape)
