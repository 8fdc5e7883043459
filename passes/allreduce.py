"""uop-allreduce: `allreduce` as copies between devices and elementwise ops (tinygrad's naive and ring allreduce).

Naive: each device copies every other device's value and reduces them ((n-1) whole copies into each device). Ring, for
values of at least `ring` bytes: the flat value is cut into n chunks; chunk k travels the ring from device k, each
device adding its own chunk (reduce-scatter: device k-1 ends with chunk k's total), then the totals travel the ring
once more (allgather), and each device joins the chunks (2(n-1)/n of the value sent per device, in 2(n-1) steps).
The allreduces of one value share their copies and adds (the nodes are hash-consed)."""
from __future__ import annotations
from morok_mlir.core.pattern import PatternMatcher, UPat, graph_rewrite
from morok_mlir.core.uop import UOp, attrs
from morok_mlir.dialects.ops import Ops
from morok_mlir.ir.bridge import Func
from morok_mlir.ir.registry import register, Option

def _copy(u: UOp, src: str, device: str) -> UOp:
  return u if src == device else UOp(Ops.COPY, u.dtype, (u,), attrs(device=device), u.loc)

def _combine(op, a: UOp, b: UOp) -> UOp: return UOp(Ops(op), a.dtype, (a, b), (), a.loc)

def naive(u: UOp) -> UOp:
  devs, dev, op = u.attrs["devices"].split(","), u.attrs["device"], u.attrs["op"]
  parts = [_copy(s, d, dev) for s, d in zip(u.src, devs)]
  ret = parts[0]
  for p in parts[1:]: ret = _combine(op, ret, p)
  return ret

def ring(u: UOp) -> UOp:
  devs, dev, op, n = u.attrs["devices"].split(","), u.attrs["device"], u.attrs["op"], len(u.src)
  size = u.src[0].size
  flat = [s.reshape((size,)) for s in u.src]
  bounds = [(k * size // n, (k + 1) * size // n) for k in range(n)]
  out = None
  for k, (lo, hi) in enumerate(bounds):
    if lo == hi: continue
    acc = flat[k].shrink(((lo, hi),))   # reduce-scatter: chunk k from device k around the ring
    for t in range(1, n):
      j = (k + t) % n
      acc = _combine(op, _copy(acc, devs[j - 1], devs[j]), flat[j].shrink(((lo, hi),)))
    at = (k + n - 1) % n                 # allgather: the total from its owner around the ring to `dev`
    while devs[at] != dev: acc, at = _copy(acc, devs[at], devs[(at + 1) % n]), (at + 1) % n
    piece = acc.pad(((lo, size - hi),))
    out = piece if out is None else out + piece
  return out.reshape(u.shape)

def lower_allreduce(roots: list[UOp], ring_bytes: int) -> list[UOp]:
  """roots with every allreduce replaced: naive below ring_bytes (and for two devices' tiny values), ring from it. One
  over ranks' devices (BASE@r: other processes, which no copy reaches) stays, for the Communicator."""
  if not any(u.op is Ops.ALLREDUCE and "@" not in u.attrs["devices"] for r in roots for u in r.toposort): return roots
  # bottom-up: an allreduce's sources may hold allreduces (softmax's sum of exp(x - max))
  lower = lambda u: (ring if u.size * u.dtype.itemsize >= ring_bytes and len(u.src) > 1 else naive)(u)
  pm = PatternMatcher([(UPat(Ops.ALLREDUCE, name="u"), lambda u: None if "@" in u.attrs["devices"] else lower(u))])
  memo: dict[UOp, UOp] = {}
  return [graph_rewrite(r, pm, memo) for r in roots]

RING_BYTES = 1 << 20

@register("uop-allreduce", "Lower allreduce to copies between devices and adds/maxes: naive, or a ring for large values",
          ring=Option(int, RING_BYTES, "bytes from which an allreduce goes around the ring (0: always)"))
def uop_allreduce(funcs: list[Func], ring: int = RING_BYTES) -> list[Func]:
  for f in funcs:
    new = lower_allreduce(f.results + f.roots, ring)
    f.results, f.roots = new[:len(f.results)], new[len(f.results):]
  return funcs
