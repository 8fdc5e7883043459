"""Buffers that lie inside others (uop-elide-copies' sources of dropped copies: `uop.views` on @schedule), as a mapping
buffer -> (the buffer it lies in, offset there): the pass makes it, the memory planner places it, a plan read from
disk checks it."""
from __future__ import annotations

def chain(b: int, views: dict[int, tuple[int, int]]) -> list[tuple[int, int]]:
  """(b, 0) and each buffer b lies in (a view of a view ...) with b's offset there, outermost last; ValueError where the
  views make a cycle (a damaged entry on disk)."""
  out, seen = [(b, 0)], {b}
  while (at := out[-1][0]) in views:
    d, o = views[at]
    if d in seen: raise ValueError("views in a cycle")
    seen.add(d); out.append((d, out[-1][1] + o))
  return out
