"""The CPU disk cache (device/cpu.py DiskCache): concurrent processes, a warm start without JIT, corrupted files, the size
bound."""
import glob, hashlib, os, subprocess, sys, textwrap, time
import numpy as np
import pytest
from morok_mlir import Tensor
from morok_mlir.device.cpu import CPUDevice, CPURenderer, DiskCache
from morok_mlir.emit import normalize_inputs, graph_func
from morok_mlir.realize import lower_to_kernels

SCRIPT = textwrap.dedent("""
  import sys, numpy as np
  from morok_mlir import Tensor
  from morok_mlir.device.cpu import CPU
  a = np.arange(1, 5001, dtype=np.float32) / 1000; b = np.linspace(-1, 1, 5000, dtype=np.float32)
  got = ((Tensor(a) * 1.2345 + Tensor(b)).exp() - Tensor(a).sum()).numpy()
  want = np.exp(a * np.float32(1.2345) + b) - a.sum(dtype=np.float64)
  assert np.allclose(got, want, rtol=1e-5), float(np.abs(got - want).max())
  x = np.random.default_rng(0).standard_normal((96, 80), dtype=np.float32); w = np.ones((80, 112), np.float32) / 7
  assert np.allclose((Tensor(x) @ Tensor(w)).relu().numpy(), np.maximum(x @ w, 0), rtol=1e-4, atol=1e-5)
  print(CPU.disk.hits, CPU.disk.misses)
""")

def run(cache: str, n: int = 1) -> list[tuple[int, int]]:
  env = {**os.environ, "MOROK_CACHE_DIR": cache, "MOROK_DISK_CACHE": "1"}
  procs = [subprocess.Popen([sys.executable, "-c", SCRIPT], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(n)]
  outs = []
  for p in procs:
    out, err = p.communicate(timeout=300)
    assert p.returncode == 0, err
    outs.append(tuple(map(int, out.split())))
  return outs

def entries(cache: str) -> list[str]:
  files = sorted(os.listdir(cache))
  assert all(f.endswith((".so", ".sum")) for f in files), files   # no temporaries left behind
  for so in glob.glob(os.path.join(cache, "*.so")):
    with open(so, "rb") as f, open(so[:-3] + ".sum") as g: assert hashlib.sha256(f.read()).hexdigest() == g.read().strip()
  return files

def test_concurrent_then_warm(tmp_path):
  cache = str(tmp_path)
  outs = run(cache, n=4)                      # four processes build and publish the same kernels at once (each checks its results)
  assert sum(m for _, m in outs) > 0          # (a late starter may already find them all published)
  files = entries(cache)
  assert files and len(files) % 2 == 0
  (hits, misses), = run(cache)                # a new process loads them all, JITs nothing
  assert misses == 0 and hits == len(files) // 2
  assert entries(cache) == files

@pytest.mark.parametrize("damage", ["garbage", "truncated", "garbage-with-matching-sum", "missing-sum"])
def test_corrupted_cache_is_rebuilt(tmp_path, damage):
  cache = str(tmp_path)
  run(cache)
  for so in glob.glob(os.path.join(cache, "*.so")):
    data = open(so, "rb").read()
    bad = {"garbage": b"\x7fELF not really" * 50, "truncated": data[:len(data) // 2]}.get(damage, data)
    if damage == "garbage-with-matching-sum":
      bad = b"\x7fELF" + os.urandom(len(data))
      with open(so[:-3] + ".sum", "w") as f: f.write(hashlib.sha256(bad).hexdigest())
    with open(so, "wb") as f: f.write(bad)
    if damage == "missing-sum": os.unlink(so[:-3] + ".sum")
  (hits, misses), = run(cache)                # still correct (the script checks), every kernel rebuilt
  assert hits == 0 and misses > 0
  entries(cache)
  (hits, misses), = run(cache)                # and the rebuilt files are good again
  assert misses == 0 and hits > 0

def spec_of(t: Tensor):
  key, _ = normalize_inputs([t.uop])
  f, = [f for f in lower_to_kernels(graph_func(key)) if "uop.schedule" not in f.attrs]
  return CPURenderer().render(f)

def device(cache: str) -> CPUDevice:
  dev = CPUDevice()
  dev.disk.enabled, dev.disk.dir = True, cache
  return dev

# ---------------------------------------------------------------- the size bound
def test_size_bound_keeps_recently_used(tmp_path, monkeypatch):
  cache = str(tmp_path)
  dev = device(cache)
  specs = [spec_of(Tensor(np.ones(n, np.float32)) * 2) for n in range(1001, 1009)]
  dev.build(specs[0]); dev.disk.flush()
  size = sum(os.path.getsize(os.path.join(cache, f)) for f in os.listdir(cache))
  dev.disk.max_bytes = int(3.5 * size)   # room for three entries
  for i, s in enumerate(specs[1:]):
    time.sleep(0.01)                     # distinct mtimes
    assert dev.disk.get(dev.disk.key(specs[0])) is not None   # used again: the most recent
    dev.build(s); dev.disk.flush()
  files = os.listdir(cache)
  assert sum(os.path.getsize(os.path.join(cache, f)) for f in files) <= dev.disk.max_bytes
  kept = {f[:-3] for f in files if f.endswith(".so")}
  assert kept == {dev.disk.key(s) for s in (specs[0], specs[-2], specs[-1])}, "the least recently used go first"
  assert all(os.path.exists(os.path.join(cache, k + ".sum")) for k in kept)
  monkeypatch.setenv("MOROK_CACHE_MAX_MB", "1.5")
  assert DiskCache().max_bytes == int(1.5 * 2**20)
