"""The bounded cache behind the schedule cache and every device's method cache: least recently used entries go first,
past a count and a byte budget (MOROK_MEM_CACHE_ENTRIES, default 1024; MOROK_MEM_CACHE_MB, default 512)."""
from __future__ import annotations
import threading
from morok_mlir.core import env
from collections import OrderedDict

# in-memory caches (the schedule cache here, each device's method cache) hold at most this many entries and bytes
MEM_CACHE_ENTRIES = env.get("MOROK_MEM_CACHE_ENTRIES")
# a network's schedules (resnet50: 130 kernels with packed weight panels and scratch, ~300 MB) must fit, or every call
# compiles its pieces again from the disk cache (seconds); a fixed budget, not a share of the machine's memory: the
# library lives in someone else's process. A small kernel's program is ~7 KB of it (its shared object and text).
MEM_CACHE_MB = env.get("MOROK_MEM_CACHE_MB") or 512.0

class LRU(OrderedDict):
  """A dict that drops its least recently used entries past max_entries entries or max_bytes bytes (size(value) each).
  A value's size may shrink after it is added (a program moves from its JIT engine to a shared object), never grow: the
  sizes recorded when added are an upper bound, measured again only when their sum passes max_bytes. get() is
  lock-free (a hit moves the entry to the end in one atomic step); adding takes a lock, so threads may share it."""
  def __init__(self, size=lambda v: 0, max_entries: int | None = None, max_mb: float | None = None):
    super().__init__()
    self.size, self.lock, self.sizes, self.total = size, threading.Lock(), {}, 0
    self.max_entries = MEM_CACHE_ENTRIES if max_entries is None else max_entries
    self.max_bytes = int((MEM_CACHE_MB if max_mb is None else max_mb) * 2**20)
  def get(self, k, default=None):
    if (v := OrderedDict.get(self, k)) is None: return default
    try: self.move_to_end(k)
    except KeyError: pass   # evicted by another thread just now: v is still good
    return v
  def __setitem__(self, k, v) -> None:
    with self.lock:
      OrderedDict.__setitem__(self, k, v)
      self.move_to_end(k)
      self.total += (n := self.size(v)) - self.sizes.get(k, 0); self.sizes[k] = n
      if self.total > self.max_bytes:   # measure again (list(): one atomic copy while hits reorder the dict)
        self.sizes = {k: self.size(v) for k, v in list(self.items())}; self.total = sum(self.sizes.values())
      while len(self) > self.max_entries or (self.total > self.max_bytes and len(self) > 1):
        self.total -= self.sizes.pop(self.popitem(last=False)[0], 0)
  def clear(self) -> None:
    with self.lock: OrderedDict.clear(self); self.sizes, self.total = {}, 0
  def drop(self, pred) -> None:
    """Remove the entries whose key pred accepts."""
    with self.lock:
      for k in [k for k in list(self.keys()) if pred(k)]:
        if OrderedDict.pop(self, k, None) is not None: self.total -= self.sizes.pop(k, 0)
  def nbytes(self) -> int: return sum(map(self.size, list(self.values())))   # measured now
