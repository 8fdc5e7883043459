"""What this machine offers code generation, read at run time: CPU features, the f32 lanes of its widest vector
register, the threads this process may use. Facts, not a runtime: passes take them as option defaults and the CPU
device builds with them, so neither imports the other for them."""
from __future__ import annotations
import os

def _cpu_flags() -> frozenset:
  try: return frozenset(next(l for l in open("/proc/cpuinfo") if l.startswith("flags")).split(":", 1)[1].split())
  except (OSError, StopIteration): return frozenset()
CPU_FLAGS = _cpu_flags()
# f32 lanes of the widest vector register: what uop-optimize vectorizes for and the micro-kernel tiles with
VEC_WIDTH = 16 if "avx512f" in CPU_FLAGS else 8 if "avx" in CPU_FLAGS else 4
THREADS = int(os.environ.get("MOROK_THREADS", 0)) or len(os.sched_getaffinity(0))

def _l2_bytes() -> int:
  """A core's L2 cache in bytes (sysfs), 512 KiB where it cannot be read."""
  base = "/sys/devices/system/cpu/cpu0/cache"
  try:
    for d in sorted(os.listdir(base)):
      if d.startswith("index") and open(f"{base}/{d}/level").read().strip() == "2" and "Instruction" not in open(f"{base}/{d}/type").read():
        v = open(f"{base}/{d}/size").read().strip()
        return int(v[:-1]) << {"K": 10, "M": 20}[v[-1]] if v[-1] in "KM" else int(v)
  except (OSError, ValueError, KeyError): pass
  return 1 << 19
L2_BYTES = _l2_bytes()
