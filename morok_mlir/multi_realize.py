"""Realizing graphs that span devices: logical graph (with `multi` nodes) -> per-device graphs (core/multi.py) ->
uop-allreduce (copies and adds) -> rounds of realize() per device, a round computing the values the next one's
copies read. Every step is one realize() on one device, so the schedule cache, TinyJit's recording (a copied value
enters the next graph as an input on its own device, which realize and a replay copy over) and DEBUG all apply."""
from __future__ import annotations
from morok_mlir.core import env
from morok_mlir.core.uop import UOp
from morok_mlir.core.multi import Sharded, shard_graph, multi, copy, gather, split_bounds
from morok_mlir.dialects.ops import Ops
from morok_mlir.passes.allreduce import lower_allreduce
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

def ring_bytes() -> int:
  """RING_BYTES in the environment (read at each call): allreduces of at least so many bytes go around the ring."""
  return env.get("RING_BYTES")

def realize_multi(outs: list[UOp], devices: tuple[str, ...], beam=None) -> list[UOp]:
  """Realize logical UOps of tensors on `devices`: per output, a `multi` of input buffers (an output no multi value
  reaches, such as a constant, whole on each device)."""
  vals = [v if isinstance(v, Sharded) else Sharded(tuple(copy(v, d) for d in devices), None, devices) for v in shard_graph(outs)]
  pieces = [(d, s) for v in vals for d, s in zip(v.devices, v.shards)]
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
  if axis is None: return replicated(u, devices)
  if not isinstance(n := u.shape[axis], int): raise ValueError(f"cannot split a symbolic dim ({n!r}) over devices")
  if (b := split_bounds(n, len(devices))) is None:
    raise ValueError(f"cannot split a dim of size {n} over {len(devices)} devices: a shard would be empty")
  cut = lambda lo, hi: u.shrink(tuple((lo, hi) if i == axis else None for i in range(len(u.shape))))
  return multi(tuple(copy(cut(lo, hi), d) for d, (lo, hi) in zip(devices, b)), axis, devices, u.loc)

def gather_to(u: UOp, device: str) -> UOp:
  """A realized multi value (a `multi` of input buffers) whole on one device: a single-device graph of copies."""
  ax = u.attrs["axis"]
  return gather(Sharded(u.src, None if ax < 0 else ax, tuple(u.attrs["devices"].split(","))), device)

def realize_on(u: UOp, device: str, beam=None) -> UOp:
  """A one-device value computed from multi values (a gradient flowing back to a leaf that was sharded lazily), realized
  on device as an input buffer."""
  v = shard_graph([copy(u, device)])[0]
  roots, _ = _resolve_copies(lower_allreduce([v if isinstance(v, UOp) else gather(v, device)], ring_bytes()), beam)
  return R.new_buffer(R.on_device(R.realize(roots, device, beam=beam)[0], device), u.loc, shape=u.shape)
