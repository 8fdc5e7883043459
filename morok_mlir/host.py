"""What this machine offers code generation, read at run time: CPU features, the f32 lanes of its widest vector
register, the threads this process may use. Facts, not a runtime: passes take them as option defaults and the CPU
device builds with them, so neither imports the other for them."""
from __future__ import annotations
import os, time
from morok_mlir.core import env

def _cpu_flags() -> frozenset:
  try: return frozenset(next(l for l in open("/proc/cpuinfo") if l.startswith("flags")).split(":", 1)[1].split())
  except (OSError, StopIteration): return frozenset()
CPU_FLAGS = _cpu_flags()
def _cpu_name() -> str:
  try: return next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
  except (OSError, StopIteration): return "?"
CPU_NAME = _cpu_name()   # with CPU_FLAGS, what a tuned choice is keyed by (device/search.py)
# f32 lanes of the widest vector register: what uop-optimize vectorizes for and the micro-kernel tiles with
VEC_WIDTH = 16 if "avx512f" in CPU_FLAGS else 8 if "avx" in CPU_FLAGS else 4
THREADS = env.get("MOROK_THREADS") or len(os.sched_getaffinity(0))
# the int8 dot products, widest first: name -> (the CPU features it needs, i32 lanes, 8-bit values a 32-bit lane sums per
# instruction). VNNI's vpdpbusd sums 4 u8 x s8 products into each i32 lane; without it, vpmaddwd sums 2 i16 x i16 ones
# (8-bit values widened: exact, where vpmaddubsw's i16 pair sums saturate at 255 * 127 * 2)
INT8_DOTS = {"vnni512": ({"avx512_vnni", "avx512bw"}, 16, 4), "vnni256": ({"avx_vnni"}, 8, 4),
             "pmaddwd512": ({"avx512bw"}, 16, 2), "pmaddwd256": ({"avx2"}, 8, 2)}
# a buffer's start where a kernel reads or writes it: the most any kernel's access needs (a 512-bit nontemporal store;
# a GPU's 16-byte vectors), so a view of another buffer (uop-elide-copies) starts at a multiple of it
VIEW_ALIGN = 64
# the one this CPU runs (codegen.int8; "" where it has none: 8-bit products then run as float32 contractions)
INT8_DOT = next((k for k, (need, _, _) in INT8_DOTS.items() if need <= CPU_FLAGS), "")

def _cpus(s: str) -> int:
  """CPUs in a sysfs cpu list ("0-3,8")."""
  return sum(int(b) - int(a) + 1 for a, _, b in (r.partition("-") if "-" in r else (r, "", r) for r in s.split(",") if r))
L3_PER_CPU = 16 << 20   # the most L3 per core sharing it that the heuristics assume (no CPU has more than 12 MiB a core)
def _cache(level: int, field: str, default: int) -> int:
  """A field of cpu0's level-`level` data (or unified) cache from sysfs (its size in bytes, number_of_sets,
  ways_of_associativity); `default` where the kernel does not say. A virtual machine's guest sees its host socket's
  whole L3 (480 MiB on a 2-CPU guest) while it shares the L3 with the host's other cores: an L3 counts at most
  L3_PER_CPU for each CPU here that shares it."""
  units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
  try:
    for d in sorted(os.listdir(base := "/sys/devices/system/cpu/cpu0/cache")):
      if not d.startswith("index"): continue
      rd = lambda f: open(f"{base}/{d}/{f}").read().strip()
      if int(rd("level")) != level or rd("type") not in ("Data", "Unified"): continue
      n = int(s[:-1]) * units[s[-1]] if (s := rd(field))[-1] in units else int(s)
      return min(n, L3_PER_CPU * _cpus(rd("shared_cpu_list"))) if (level, field) == (3, "size") else n
  except (OSError, ValueError): pass
  return default
# L1 data, L2 and L3 bytes (the L3 as a whole, shared or not): what contraction tiles block K and M for (kernel_facts.contraction_tiles)
CACHES = (_cache(1, "size", 32 << 10), _cache(2, "size", 512 << 10), _cache(3, "size", 8 << 20))
# the L1 data cache's sets and ways (64-byte lines): lines 64 * sets bytes apart share a set, `ways` of them fit
L1_GEOMETRY = (_cache(1, "number_of_sets", 64), _cache(1, "ways_of_associativity", 8))

YIELDING_NICE = 10   # a task this nice or nicer yields its core to a normal-priority one (CFS weights: ~10% at 10, ~1.5% at 19)

def _task_states(pid: str) -> list[tuple[str, int]]:
  """(state, nice) of each thread of process pid, as /proc reads them now (none for a process gone meanwhile)."""
  out = []
  try: tids = os.listdir(f"/proc/{pid}/task")
  except OSError: return out
  for t in tids:
    try:
      with open(f"/proc/{pid}/task/{t}/stat") as f: st = f.read().rsplit(")", 1)[1].split()
    except OSError: continue
    out.append((st[0], int(st[16])))   # (stat's fields 3 and 19: after the name, state is first and nice 17th)
  return out

def yielding_running() -> int:
  """Threads of other processes running now at a yielding priority (nice >= YIELDING_NICE): a background linker's."""
  me = str(os.getpid())
  return sum(st == "R" and nice >= YIELDING_NICE for p in os.listdir("/proc") if p.isdigit() and p != me for st, nice in _task_states(p))

def spare_cores(samples: int = 3) -> int:
  """Cores of this process's share (THREADS) that no other task keeps busy now, this thread's not counted: from the
  tasks running (/proc/loadavg's fourth field: every running thread of every process, those /proc cannot show too)
  less this process's own and the yielding ones it can see (this device's linker runs at nice 19: counted, it kept a
  first call's second batch of kernels in one process), the fewest of a few samples 1 ms apart (a short task caught once
  is not a busy core). The one-minute load average, the fallback, lags a burst by a minute: just after one it reports
  busy cores that are idle."""
  cores = min(THREADS, len(os.sched_getaffinity(0)))
  try:
    others = []
    for i in range(samples):
      if i: time.sleep(1e-3)
      with open("/proc/loadavg") as f: running = int(f.read().split()[3].split("/")[0])
      running -= sum(st == "R" for st, _ in _task_states("self")) + yielding_running()
      others.append(max(0, running))   # (the counts are read at different moments: this process's may exceed all)
    return max(0, cores - 1 - min(others))
  except (OSError, ValueError, IndexError): return max(0, cores - int(os.getloadavg()[0]))
