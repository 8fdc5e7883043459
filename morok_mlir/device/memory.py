"""The memory planner (tinygrad's engine/memory.py): a schedule's intermediate buffers placed at offsets of one arena by
their lifetimes, the kernels from the first to the last that touch each, so buffers whose lives do not overlap share
bytes. A decoder layer's intermediates (the normalized rows, q, the attention scores and their softmax, the
feed-forward's rows) then take what its kernels hold live at once, not their sum; a realize allocates one block for
them (the allocator pools blocks by size: a model's layers, one structure each, reuse one), a TinyJit plan one per
device for all its schedules (they run one after another, and intermediates never outlive their schedule).

  plan(uses, nbytes, views) -> (offsets, arena bytes)
  aligned(nbytes) -> the bytes a buffer takes in an arena"""
from __future__ import annotations
from morok_mlir.core.views import chain

ALIGN = 256   # every offset: cache lines, 64-byte non-temporal stores, and GPU vector loads all stay aligned
def aligned(nbytes: int) -> int: return -(-nbytes // ALIGN) * ALIGN

def plan(uses: list, nbytes: list[int], views: dict[int, tuple[int, int]] | None = None) -> tuple[list[int], int]:
  """uses[k]: the buffers (indices into nbytes) kernel k touches, kernels in run order. Buffers are placed largest first
  among those born at one kernel, each at the lowest offset clear of every buffer still live (first fit); a buffer no
  kernel touches lives throughout. views: buffer -> (the buffer it lies in, byte offset there): it takes no bytes of
  its own, and what touches it touches that one (uop-elide-copies' sources of dropped copies)."""
  if views:
    root = {b: chain(b, views)[-1] for b in views}   # (the buffer each view lies in at last, its offset there)
    offs, top = plan([[root.get(b, (b, 0))[0] for b in bs] for bs in uses], [0 if b in views else n for b, n in enumerate(nbytes)])
    for b, (r, o) in root.items(): offs[b] = offs[r] + o
    return offs, top
  first: dict[int, int] = {}
  last: dict[int, int] = {}
  for k, bs in enumerate(uses):
    for b in bs: first.setdefault(b, k); last[b] = k
  offs, live, top = [0] * len(nbytes), [], 0   # live: (offset, end, last kernel) of the buffers placed so far
  for b in sorted(range(len(nbytes)), key=lambda b: (first.get(b, 0), -nbytes[b], b)):
    born, size = first.get(b, 0), aligned(nbytes[b])
    live, o = [x for x in live if x[2] >= born], 0
    for s, e, _ in sorted(live):
      if o + size <= s: break
      o = max(o, e)
    offs[b] = o
    live.append((o, o + size, last.get(b, len(uses))))
    top = max(top, o + size)
  return offs, top
