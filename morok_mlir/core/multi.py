"""Multi-device graphs (tinygrad's multi.py, in this project's terms).

A value held by several devices is a `multi` node: one source per device, split along an axis (each source a slice)
or replicated (axis -1). Op methods build logical graphs over it, of the whole value's shape, so gradients, TinyJit and
every op method work unchanged. Before a graph is emitted, `shard_graph` rewrites it bottom-up into one graph per
device: an op on sharded sources becomes the op on each device's shard (elementwise stays split; a replicated or
device-free operand is cut to each shard's slice), a reduce over the split axis becomes each device's reduce and an
`allreduce` (lowered to copies and adds by uop-allreduce), and what has no per-shard form (a pad, shrink or flip
along the split axis, a reshape that moves it, a gather) first gathers the value on every device (copies and a
concatenation), then runs replicated. A `copy` of a multi value to one device gathers it there.

Devices named BASE@r (`CPU@1`) are ranks': one process each (morok_mlir.dist), every one building the same graph and
holding only its own shard (SPMD). The rewrite is the same (it works on shapes); what crosses ranks is an `allreduce`
whose devices are ranks, which the realize driver runs through the Communicator: a reduce's partials, or a gather (the
shards padded to the whole and summed, which the driver runs as an allgather). A replicated value gathers as the local
copy.

A node's device is implicit: a `copy` or `allreduce` is on its `device`, an input buffer on its Buffer's, any other node
on its sources' (a node with none, such as a constant, on whichever device reads it)."""
from __future__ import annotations
import itertools, math
from dataclasses import dataclass
from morok_mlir.core.uop import UOp, attrs
from morok_mlir.dialects.ops import Ops, GRAPH_ALU
from morok_mlir.core.provenance import OpTypeError

ELEMENTWISE = frozenset(GRAPH_ALU | {Ops.CONTIGUOUS, Ops.DETACH, Ops.THREEFRY, Ops.ASSIGN})
ALLREDUCE_OPS = frozenset((Ops.ADD, Ops.MAX))
MOVEMENT_OPS = frozenset((Ops.RESHAPE, Ops.PERMUTE, Ops.EXPAND, Ops.PAD, Ops.SHRINK, Ops.FLIP))

RANK, WORLD = None, None   # this process's rank and the number of ranks (dist.init() sets them)

def rank_of(device: str) -> int | None: return int(device.rpartition("@")[2]) if "@" in device else None
def mine(devices: tuple[str, ...]) -> str | None:
  """The device of `devices` this process holds: for rank devices the one of its rank, else None."""
  if rank_of(devices[0]) is None: return None
  if RANK is None: raise RuntimeError(f"devices {','.join(devices)} are ranks': call morok_mlir.dist.init() first")
  if devices != (ranks := tuple(f"{devices[0].rpartition('@')[0]}@{r}" for r in range(WORLD))):   # else an allreduce would miss some
    raise ValueError(f"devices {','.join(devices)} are not the {WORLD} ranks' ({','.join(ranks)}, as dist.devices() gives them)")
  return ranks[RANK]

def split_bounds(n: int, ndev: int) -> list[tuple[int, int]]:
  """tinygrad's split: shards of ceil(n / ndev) along the axis, the last one shorter; None when one would be empty."""
  sz = -(-n // ndev)
  b = [(min(i * sz, n), min((i + 1) * sz, n)) for i in range(ndev)]
  return b if all(hi > lo for lo, hi in b) else None

@dataclass(frozen=True)
class Sharded:
  """A value as one UOp per device: slices along `axis`, or whole copies (axis None)."""
  shards: tuple[UOp, ...]
  axis: int | None
  devices: tuple[str, ...]
  @property
  def bounds(self) -> list[tuple[int, int]]:
    ends = [0, *itertools.accumulate(s.shape[self.axis] for s in self.shards)] if self.axis is not None else []
    return list(zip(ends, ends[1:]))

def multi(shards: tuple[UOp, ...], axis: int | None, devices: tuple[str, ...], loc: str | None = None) -> UOp:
  return UOp(Ops.MULTI, shards[0].dtype, tuple(shards), attrs(axis=-1 if axis is None else axis, devices=",".join(devices)), loc)

def copy(u: UOp, device: str) -> UOp: return UOp(Ops.COPY, u.dtype, (u,), attrs(device=device), u.loc)

def _cut(u: UOp, axis: int, lo: int, hi: int) -> UOp:
  return u.shrink(tuple((lo, hi) if i == axis else None for i in range(len(u.shape))))

def gather(x: Sharded, device: str) -> UOp:
  """The whole value on device: its own copy, or the shards copied there and joined (pad and add: one kernel). Over
  ranks: the local copy, or an allreduce of the padded shards (the driver's allgather)."""
  if x.axis is None:
    if device in x.devices: return x.shards[x.devices.index(device)]
    src = x.shards[x.devices.index(m)] if (m := mine(x.devices)) is not None else x.shards[0]
    return copy(src, device)
  n, parts, ranks = x.bounds[-1][1], [], mine(x.devices) is not None
  for s, d, (lo, hi) in zip(x.shards, x.devices, x.bounds):
    parts.append((s if d == device or ranks else copy(s, device)).pad(tuple((lo, n - hi) if i == x.axis else (0, 0) for i in range(len(s.shape)))))
  if ranks: return UOp(Ops.ALLREDUCE, parts[0].dtype, tuple(parts), attrs(op=Ops.ADD, device=device, devices=",".join(x.devices)), parts[0].loc)
  ret = parts[0]
  for p in parts[1:]: ret = ret + p
  return ret

def replicate(x: Sharded) -> Sharded:
  return x if x.axis is None else Sharded(tuple(gather(x, d) for d in x.devices), None, x.devices)

def _reshape_axis(old: tuple, new: tuple, axis: int, bounds: list) -> int | None:
  """The axis of `new` along which the shards of a value of shape `old` split along `axis` are still slices, or None."""
  inner_old, pre = math.prod(old[axis + 1:]), math.prod(old[:axis])
  for a in range(len(new)):
    if math.prod(new[:a]) != pre: continue
    inner = math.prod(new[a + 1:])
    if all(lo * inner_old % inner == 0 and hi * inner_old % inner == 0 for lo, hi in bounds) and new[a] * inner == old[axis] * inner_old:
      return a
  return None

def _movement(u: UOp, x: Sharded) -> Sharded | None:
  """A movement op on each shard, or None where it has no per-shard form."""
  ax, per = x.axis, None
  if ax is None: return Sharded(tuple(_apply(u, (s,)) for s in x.shards), None, x.devices)
  if u.op is Ops.PERMUTE: return Sharded(tuple(u.replace(src=(s,)) for s in x.shards), u.attrs["order"].index(ax), x.devices)
  if u.op is Ops.RESHAPE:
    if (a := _reshape_axis(u.src[0].shape, new := u.attrs["shape"], ax, x.bounds)) is None: return None
    inner_old, inner = math.prod(u.src[0].shape[ax + 1:]), math.prod(new[a + 1:])
    per = [s.reshape(tuple((hi - lo) * inner_old // inner if i == a else d for i, d in enumerate(new))) for s, (lo, hi) in zip(x.shards, x.bounds)]
    return Sharded(tuple(per), a, x.devices)
  if u.op is Ops.EXPAND:
    if u.attrs["shape"][ax] != u.src[0].shape[ax]: return None
    per = [s._broadcast_to(tuple(s.shape[ax] if i == ax else d for i, d in enumerate(u.attrs["shape"]))) for s in x.shards]
  elif u.op is Ops.PAD:
    if any(u.attrs["padding"][2 * ax:2 * ax + 2]): return None
    per = [u.replace(src=(s,)) for s in x.shards]
  elif u.op is Ops.SHRINK:
    b = u.attrs["bounds"]
    if (b[2 * ax], b[2 * ax + 1]) != (0, u.src[0].shape[ax]): return None
    per = [s.shrink(tuple((0, s.shape[ax]) if i == ax else (b[2 * i], b[2 * i + 1]) for i in range(len(s.shape)))) for s in x.shards]
  elif u.op is Ops.FLIP:
    if ax in u.attrs["axes"]: return None
    per = [u.replace(src=(s,)) for s in x.shards]
  return None if per is None else Sharded(tuple(per), ax, x.devices)

def _apply(u: UOp, src: tuple[UOp, ...]) -> UOp:
  """u on other sources of the same shapes but along a sharded axis (movement ops carry shapes: rebuilt through their methods)."""
  if u.op is Ops.RESHAPE: return src[0].reshape(u.attrs["shape"])
  if u.op is Ops.EXPAND: return src[0]._broadcast_to(u.attrs["shape"])
  return u.replace(src=src)

def _piece(v, k: int, ax: int | None, bounds) -> UOp:
  """Device k's operand of an op split along ax: its shard, or its slice of a whole value."""
  if isinstance(v, UOp): return v if ax is None else _cut(v, ax, *bounds[k])
  if v.axis == ax: return v.shards[k]
  return v.shards[k] if ax is None else _cut(v.shards[k], ax, *bounds[k])

def _node(u: UOp, src: list) -> UOp | Sharded:
  ms = [v for v in src if isinstance(v, Sharded)]
  if u.op is Ops.MULTI:
    ax = u.attrs["axis"]
    return Sharded(tuple(src), None if ax < 0 else ax, tuple(u.attrs["devices"].split(",")))
  if not ms: return u if all(a is b for a, b in zip(src, u.src)) else u.replace(src=tuple(src))
  devs = ms[0].devices
  if any(m.devices != devs for m in ms):
    raise OpTypeError(f"{u.loc + ': ' if u.loc else ''}operands on different device sets: {', '.join(sorted({','.join(m.devices) for m in ms}))}")
  if u.op is Ops.COPY: return gather(src[0], u.attrs["device"]) if isinstance(src[0], Sharded) else src[0]
  if u.op is Ops.REDUCE_AXIS and isinstance(x := src[0], Sharded):
    if x.axis is not None and x.axis in u.attrs["axes"]:
      if u.attrs["op"] not in ALLREDUCE_OPS: return _node(u, [replicate(x)])
      part = tuple(u.replace(src=(s,)) for s in x.shards)
      return Sharded(tuple(UOp(Ops.ALLREDUCE, u.dtype, part, attrs(op=u.attrs["op"], device=d, devices=",".join(devs)), u.loc)
                           for d in devs), None, devs)
    return Sharded(tuple(u.replace(src=(s,)) for s in x.shards), x.axis, devs)
  if u.op in MOVEMENT_OPS:
    return r if (r := _movement(u, src[0])) is not None else _movement(u, replicate(src[0]))
  if u.op in ELEMENTWISE:
    axes = {m.axis for m in ms if m.axis is not None}
    if len(axes) > 1: src = [replicate(v) if isinstance(v, Sharded) else v for v in src]; axes = set()
    ax = next(iter(axes), None)
    bounds = next(m.bounds for m in ms if m.axis == ax) if ax is not None else None
    return Sharded(tuple(u.replace(src=tuple(_piece(v, k, ax, bounds) for v in src)) for k in range(len(devs))), ax, devs)
  # no per-shard form (gather, scatter, ...): every operand whole on every device
  whole = [replicate(v) if isinstance(v, Sharded) else v for v in src]
  return Sharded(tuple(u.replace(src=tuple(v.shards[k] if isinstance(v, Sharded) else v for v in whole)) for k in range(len(devs))), None, devs)

def shard_graph(outs: list[UOp]) -> list[UOp | Sharded]:
  """Each logical output as per-device graphs (a Sharded), or one UOp where it is a single device's (a copy to it)."""
  new: dict[UOp, UOp | Sharded] = {}
  for o in outs:
    for u in o.toposort:
      if u not in new: new[u] = u if not u.src else _node(u, [new[s] for s in u.src])
  return [new[o] for o in outs]
