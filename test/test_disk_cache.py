"""The CPU disk cache (device/cpu.py DiskCache): concurrent processes, a warm start without JIT, every kind of damage,
the size bound."""
import glob, hashlib, os, shutil, subprocess, sys, textwrap, time
import numpy as np
from morok_mlir import Tensor
from morok_mlir.device.cpu import CPUDevice, CPURenderer, DiskCache
from morok_mlir.ir.emit import normalize, graph_func
from morok_mlir.ir.pipeline import lower_to_kernels

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
  assert all(f.endswith((".so", ".plan", ".sum")) for f in files), files   # no temporaries left behind
  for e in glob.glob(os.path.join(cache, "*.so")) + glob.glob(os.path.join(cache, "*.plan")):   # each record proves its entry belongs to its key
    k = os.path.splitext(e)[0]
    with open(e, "rb") as f, open(k + ".sum", "rb") as g: assert DiskCache.digest(os.path.basename(k), f.read()) == g.read()
  return files

def test_concurrent_then_warm(tmp_path):
  cache = str(tmp_path)
  outs = run(cache, n=4)                      # four processes build and publish the same kernels at once (each checks its results)
  assert sum(m for _, m in outs) > 0          # (a late starter may already find them all published)
  files = entries(cache)
  assert files and len(files) % 2 == 0
  (hits, misses), = run(cache)                # a new process loads them all, JITs nothing
  assert misses == 0 and hits == sum(f.endswith(".so") for f in files)
  assert entries(cache) == files

# ---------------------------------------------------------------- damage, in process: each kind is rebuilt, never an error
def spec_of(t: Tensor):
  key = normalize([t.uop])[0]
  f, = [f for f in lower_to_kernels(graph_func(key)) if "uop.schedule" not in f.attrs]
  return CPURenderer().render(f)

X = np.linspace(-2, 2, 1000, dtype=np.float32)
KERNELS = [(lambda t: t * 3 + 1, lambda x: x * 3 + 1), (lambda t: t * 5 - 2, lambda x: x * 5 - 2)]   # same signature

def device(cache: str) -> CPUDevice:
  dev = CPUDevice()
  dev.disk.enabled, dev.disk.dir = True, cache
  return dev

def empty_so(path: str) -> bytes:
  """A loadable shared object without our entry points."""
  subprocess.run(["cc", "-shared", "-x", "c", "-o", path, "-"], input=b"int not_a_kernel;\n", check=True)
  return open(path, "rb").read()

def damage(kind: str, cache: str, keys: list[str]) -> None:
  so, sm = (os.path.join(cache, keys[0] + e) for e in (".so", ".sum"))
  data = open(so, "rb").read()
  def write(p, b):
    os.unlink(p)
    with open(p, "wb") as f: f.write(b)
  def record(b): write(sm, DiskCache.digest(keys[0], b))
  if kind == "so-truncated": write(so, data[:len(data) // 2])
  elif kind == "so-empty": write(so, b"")
  elif kind == "so-garbage": write(so, os.urandom(len(data)))
  elif kind == "so-garbage-with-record": write(so, b := b"\x7fELF" + os.urandom(len(data))); record(b)   # does not load
  elif kind == "so-lacks-symbols": os.unlink(so); record(empty_so(so))
  elif kind == "so-missing": os.unlink(so)
  elif kind == "sum-missing": os.unlink(sm)
  elif kind == "sum-empty": write(sm, b"")
  elif kind == "sum-truncated": write(sm, open(sm, "rb").read()[:20])
  elif kind == "sum-non-utf8": write(sm, b"\xff\xfe\x80 not a digest \xc3\x28")
  elif kind == "sum-old-format": write(sm, hashlib.sha256(data).hexdigest().encode())   # the .so's digest without its key
  elif kind == "swapped":   # each .so still matches its own record, under the other key
    so2, sm2 = (os.path.join(cache, keys[1] + e) for e in (".so", ".sum"))
    for a, b in ((so, so2), (sm, sm2)): os.replace(a, a + ".x"); os.replace(b, a); os.replace(a + ".x", b)
  elif kind in ("so-directory", "sum-directory"):
    p = so if kind == "so-directory" else sm
    os.unlink(p); os.makedirs(os.path.join(p, "inside"))
  elif kind == "sum-fifo": os.unlink(sm); os.mkfifo(sm)   # opening it for reading must not wait for a writer
  elif kind == "unreadable":
    if os.geteuid() == 0: os.unlink(so); os.symlink(os.path.basename(so), so)   # root reads anything: a symlink loop
    else: os.chmod(so, 0)
  else: raise ValueError(kind)

DAMAGE = ["so-truncated", "so-empty", "so-garbage", "so-garbage-with-record", "so-lacks-symbols", "so-missing", "sum-missing",
          "sum-empty", "sum-truncated", "sum-non-utf8", "sum-old-format", "swapped", "so-directory", "sum-directory", "sum-fifo",
          "unreadable"]

def test_damaged_entries_are_rebuilt(tmp_path):
  specs = [spec_of(k(Tensor(X))) for k, _ in KERNELS]
  good = str(tmp_path / "good")
  dev = device(good)
  for s in specs: dev.build(s)
  dev.disk.flush()
  keys = [dev.disk.key(s) for s in specs]
  assert sorted(os.listdir(good)) == sorted(k + e for k in keys for e in (".so", ".sum"))
  failures = []
  for kind in DAMAGE:
    cache = str(tmp_path / kind)
    shutil.copytree(good, cache)
    damage(kind, cache, keys)
    dev = device(cache)
    try:
      for s, (_, want) in zip(specs, KERNELS):   # a rebuild, never an error, and the right kernel
        p, out = dev.build(s), np.zeros(1000, np.float32)
        p(out, X)
        if not np.allclose(out, want(X)): failures.append(f"{kind}: wrong results")
      dev.disk.flush()
    except Exception as e: failures.append(f"{kind}: {type(e).__name__}: {e}"); continue
    if dev.disk.misses != (2 if kind == "swapped" else 1): failures.append(f"{kind}: {dev.disk.misses} rebuilt")
    again = device(cache)   # and the entry was replaced by a good one
    for s in specs: again.build(s)
    if (again.disk.hits, again.disk.misses) != (2, 0): failures.append(f"{kind}: not repaired ({again.disk.hits} hits)")
  assert not failures, failures

def test_damaged_entries_end_to_end(tmp_path):
  cache = str(tmp_path)
  run(cache)
  for sm in glob.glob(os.path.join(cache, "*.sum")):
    with open(sm, "wb") as f: f.write(b"\xff\xfe\x80")   # non-UTF-8 records: every kernel rebuilt, the script's checks pass
  (hits, misses), = run(cache)
  assert hits == 0 and misses > 0
  entries(cache)

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

def test_links_run_one_at_a_time_and_the_sweep_out_of_process(tmp_path, monkeypatch):
  """A model's first call compiles dozens of kernels: their links run on one worker, one after another (a thread and a
  `cc` per kernel competed with the kernels just compiled: resnet50's first calls ran 8x slower), and the sweep of the
  cache runs in a child process (in this one its Python loop over every file held the GIL against each kernel launch)."""
  from morok_mlir.device import disk_prune
  import threading
  dev = device(str(tmp_path))
  active, most, lock, real = [0], [0], threading.Lock(), dev.disk._link
  def link(*a):   # this cache's links only: another cache's worker (an earlier test's) may still be linking
    with lock: active[0] += 1; most[0] = max(most[0], active[0])
    try: time.sleep(0.02); return real(*a)
    finally:
      with lock: active[0] -= 1
  monkeypatch.setattr(dev.disk, "_link", link)
  def in_process(*a): raise AssertionError("the sweep ran in the calling process")
  monkeypatch.setattr(disk_prune, "prune", in_process)
  specs = [spec_of(Tensor(np.ones(n, np.float32)) * 3) for n in range(2001, 2007)]
  for s in specs: dev.build(s)
  dev.disk.flush()
  assert most[0] == 1, f"{most[0]} links at once"
  assert sorted(f[:-3] for f in os.listdir(tmp_path) if f.endswith(".so")) == sorted(dev.disk.key(s) for s in specs)
  dev.disk.max_bytes = 1
  dev.disk.prune()   # a child process: the patched function above is not what runs
  assert not [f for f in os.listdir(tmp_path) if f.endswith(".so")]

def test_link_without_the_segment_option(tmp_path, monkeypatch):
  """A linker that refuses the first link command (ld.gold and -z noseparate-code) still gets the kernel linked."""
  from morok_mlir.device import cpu
  monkeypatch.setattr(cpu, "LINKS", (["cc", "-shared", "-Wl,--no-such-option"], *cpu.LINKS[1:]))
  dev = device(str(tmp_path))
  dev.build(s := spec_of(Tensor(np.ones(3001, np.float32)) * 7)); dev.disk.flush()
  assert device(str(tmp_path)).disk.get(dev.disk.key(s)) is not None
