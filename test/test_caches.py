"""The in-memory caches are bounded (lru.LRU: the schedule cache, the CPU method cache), evicted programs free their
code, and a JIT-compiled kernel does not keep its ~1 MB ExecutionEngine: it moves onto its shared object."""
import ctypes, os, subprocess, sys, textwrap, threading
import numpy as np
import pytest
from morok_mlir import Tensor
from morok_mlir.device.cpu import CPU
from morok_mlir.lru import LRU

SCRIPT = textwrap.dedent("""
  import gc, os, numpy as np
  from morok_mlir import Tensor, realize as R
  from morok_mlir.device.cpu import CPU, _Code
  def rss(): return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
  def shapes(ns):
    for n in ns:
      got = (Tensor(np.ones((1, n), np.float32)) * 2).numpy()
      assert got.shape == (1, n) and (got == 2).all()
  shapes(range(1, 17)); CPU.disk.flush(); gc.collect()   # the caches are full from here on
  r0 = rss()
  shapes(range(17, 49))
  CPU.disk.flush(); stored = len(os.listdir(CPU.disk.dir))
  CPU.disk.enabled = False   # off: kernels are linked in a private directory, which is emptied once they are loaded
  shapes(range(49, 81)); CPU.disk.flush(); gc.collect()
  grown = rss() - r0
  codes = [o for o in gc.get_objects() if isinstance(o, _Code)]
  print("RESULT", len(CPU.method_cache), CPU.method_cache.nbytes(), len(R._schedule_cache), R._schedule_cache.nbytes(),
        len(codes), sum(hasattr(c, "engine") for c in codes), grown, len(os.listdir(CPU.disk._tmpdir)),
        len(os.listdir(CPU.disk.dir)) - stored)
""")

def test_caches_bounded_and_code_freed(tmp_path):
  env = {**os.environ, "MOROK_CACHE_DIR": str(tmp_path), "MOROK_DISK_CACHE": "1", "MOROK_MEM_CACHE_ENTRIES": "16", "MOROK_MEM_CACHE_MB": "4"}
  p = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=300)
  out = [l for l in p.stdout.splitlines() if l.startswith("RESULT")]
  assert p.returncode == 0 and out, p.stderr[-3000:]
  n_method, b_method, n_sched, b_sched, codes, engines, grown, tmp_left, stored_off = map(int, out[0].split()[1:])
  assert n_method <= 16 and n_sched <= 16 and b_method <= 4 << 20 and b_sched <= 4 << 20
  assert codes <= 32, f"{codes} programs' code alive: evicted programs are not freed"
  assert engines == 0, "JIT engines kept after their shared objects were loaded"
  assert tmp_left == 0 and stored_off == 0
  # 64 new kernels past the bound: an engine per kernel would be ~64 MB; contexts, objects and Python data are a few
  assert grown < 20 << 20, f"RSS grew {grown / 2**20:.1f} MB for 64 kernels"

def test_lru_bounds():
  c = LRU(lambda v: v, max_entries=3, max_mb=100 / 2**20)   # 100 bytes
  for k in "abc": c[k] = 10
  assert c.get("a") == 10     # a is now the most recent
  c["d"] = 10
  assert list(c) == ["c", "a", "d"]
  c["e"] = 85                 # 4 entries, then 105 bytes: the oldest go until both bounds hold
  assert list(c) == ["d", "e"] and c.nbytes() == 95
  c["f"] = 500                # bigger than the bound alone: kept (its caller holds it anyway), the rest dropped
  assert list(c) == ["f"]
  assert c.get("zz") is None and c.get("zz", 1) == 1

def test_lru_from_threads():
  c, errors = LRU(max_entries=50), []
  def churn(t):
    try:
      for i in range(20000):
        c[(t, i % 97)] = i
        c.get((t ^ 1, i % 89))
    except Exception as e: errors.append(repr(e))
  old = sys.getswitchinterval()
  sys.setswitchinterval(1e-6)
  try:
    ts = [threading.Thread(target=churn, args=(t,)) for t in range(4)]
    for t in ts: t.start()
    for t in ts: t.join()
  finally: sys.setswitchinterval(old)
  assert not errors and len(c) <= 50

def test_failed_allocation_is_memory_error_at_users_line(monkeypatch):
  with pytest.raises(MemoryError) as e: CPU.allocator.alloc(2**48, np.float32)   # 1 PiB: more than any address space
  assert e.value.nbytes == 2**50 and f"cannot allocate {2**50} bytes" in str(e.value)
  def refuse(size, dtype): raise OSError(12, "Cannot allocate memory")   # what mmap says
  monkeypatch.setattr(CPU.allocator, "alloc", refuse)
  t = Tensor(np.ones((30, 100), np.float32)) * 2; line = sys._getframe().f_lineno
  with pytest.raises(MemoryError, match=rf"test_caches.py:{line}\b.*: cannot allocate 12000 bytes for the float32\[30, 100\] result \(Cannot"):
    t.numpy()

TRIM = textwrap.dedent("""
  import ctypes, gc, os, numpy as np
  from morok_mlir import Tensor
  from morok_mlir.device.cpu import CPU
  def rss(): return int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
  for n in range(1, 49): (Tensor(np.ones((1, n), np.float32)) * 3).numpy()   # 48 JIT-compiled kernels, all kept
  CPU.disk.flush(); gc.collect()
  before = rss(); ctypes.CDLL(None).malloc_trim(0)
  print("RESULT", before - rss())
""")

@pytest.mark.skipif(not hasattr(ctypes.CDLL(None), "malloc_trim"), reason="glibc's malloc_trim")
def test_freed_engines_return_their_memory(tmp_path):
  """A kernel keeps what it runs on (its loaded object, tens of KB), not the heap its freed JIT engine left: once the
  link worker is done that heap is back with the system (it was ~0.35 MB per kernel, 1 GB over a model's worth)."""
  env = {**os.environ, "MOROK_CACHE_DIR": str(tmp_path), "MOROK_DISK_CACHE": "1"}
  p = subprocess.run([sys.executable, "-c", TRIM], env=env, capture_output=True, text=True, timeout=300)
  out = [l for l in p.stdout.splitlines() if l.startswith("RESULT")]
  assert p.returncode == 0 and out, p.stderr[-3000:]
  assert int(out[0].split()[1]) < 2 << 20, f"{int(out[0].split()[1]) / 2**20:.1f} MB of freed heap held after 48 kernels"

def test_default_memory_bound():
  """A fixed default, whatever the machine's memory: the caches live in someone else's process."""
  env = {k: v for k, v in os.environ.items() if k not in ("MOROK_MEM_CACHE_MB", "MOROK_MEM_CACHE_ENTRIES")}
  p = subprocess.run([sys.executable, "-c", "from morok_mlir import lru; print(lru.MEM_CACHE_MB, lru.MEM_CACHE_ENTRIES)"], env=env,
                     capture_output=True, text=True, timeout=60)
  assert p.stdout.split() == ["512.0", "1024"], p.stderr[-2000:]
