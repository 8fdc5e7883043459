"""Cache trust: what another user can put in or near the kernel cache (cpu.DiskCache) never runs in this process, never
changes a result, and never makes the cache write through a planted link or delete a file it did not make. The tests
run as any user: another user's files are made with os.chown where this one is root, else those cases are skipped."""
import os, shutil, stat, subprocess, tempfile, time, warnings
import numpy as np
import pytest
from morok_mlir import Tensor
from morok_mlir.device import cpu, disk_prune
from morok_mlir.device.cpu import CPUDevice, CPURenderer, DiskCache
from morok_mlir.ir.emit import normalize, graph_func
from morok_mlir.ir.pipeline import lower_to_kernels

OTHER = 12345   # a uid that is not this process's
root = pytest.mark.skipif(os.geteuid() != 0, reason="making another user's files needs root")
X = np.linspace(-2, 2, 1000, dtype=np.float32)

def spec_of(t: Tensor):
  f, = [f for f in lower_to_kernels(graph_func(normalize([t.uop])[0])) if "uop.schedule" not in f.attrs]
  return CPURenderer().render(f)

A, B = spec_of(Tensor(X) * 3 - 1), spec_of(Tensor(X) * 5 + 2)   # one signature: B's object would run in A's place

@pytest.fixture
def fresh(tmp_path, monkeypatch):
  """This test's own temporary directory (where a refused folder's fallback goes) and its own record of warnings."""
  (t := tmp_path / "tmp").mkdir(mode=0o700)
  monkeypatch.setattr(tempfile, "tempdir", str(t))
  monkeypatch.setattr(cpu, "_REFUSED", set(), raising=False)
  return t

def device(cache) -> CPUDevice:
  dev = CPUDevice()
  dev.disk.enabled, dev.disk.dir = True, str(cache)
  return dev

def run_a(dev: CPUDevice) -> np.ndarray:
  p, out = dev.build(A), np.zeros(1000, np.float32)
  p(out, X); dev.disk.flush()
  return out

def plant(folder, marker) -> None:
  """A's entry as another user would plant it: an object whose constructor leaves marker, with a recomputed sum."""
  key, so = DiskCache().key(A), os.path.join(folder, DiskCache().key(A) + ".so")
  src = f'#include <stdio.h>\n__attribute__((constructor)) static void pwn(void) {{ fclose(fopen("{marker}", "w")); }}\n' \
        'void _mlir_kernel(void **a) {}\n'
  subprocess.run(["cc", "-shared", "-fPIC", "-x", "c", "-o", so, "-"], input=src.encode(), check=True)
  with open(so, "rb") as f, open(so[:-3] + ".sum", "wb") as g: g.write(DiskCache.digest(key, f.read()))

FOLDERS = {"world-writable": (0o777, None), "sticky-world-writable": (0o1777, None), "group-writable": (0o770, None),
           "another-users": (0o700, OTHER), "another-users-sticky": (0o1777, OTHER)}

@pytest.mark.parametrize("kind", FOLDERS)
def test_untrusted_folder_is_refused(tmp_path, fresh, kind):
  mode, owner = FOLDERS[kind]
  if owner is not None and os.geteuid() != 0: pytest.skip("making another user's folder needs root")
  (bad := tmp_path / "shared").mkdir(); plant(bad, marker := tmp_path / "ran")
  os.chmod(bad, mode)
  if owner is not None: os.chown(bad, owner, -1)
  with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    out = run_a(dev := device(bad))
    assert run_a(device(bad)) is not None   # a second cache on the same folder: no second warning
  assert not marker.exists(), "a planted object ran its code"
  np.testing.assert_allclose(out, X * 3 - 1, rtol=1e-6)
  msgs = [str(x.message) for x in w if issubclass(x.category, RuntimeWarning)]
  assert len(msgs) == 1 and str(bad) in msgs[0] and "not private" in msgs[0], msgs
  assert dev.disk.dir == str(fresh / f"morok-mlir-{os.geteuid()}") and stat.S_IMODE(os.stat(dev.disk.dir).st_mode) == 0o700
  assert sorted(os.listdir(bad)) == sorted(DiskCache().key(A) + e for e in (".so", ".sum")), "the cache wrote into the folder"

def test_folder_under_a_folder_others_can_rename_in(tmp_path, fresh):
  (up := tmp_path / "open").mkdir(); os.chmod(up, 0o777)   # anyone can move `cache` away and put their own in its place
  (up / "cache").mkdir(mode=0o700)
  with pytest.warns(RuntimeWarning, match="not private"): dev = device(up / "cache"); dev.disk.dir
  os.chmod(up, 0o1777)   # /tmp's sticky bit: only the owner may rename it
  assert device(up / "cache").disk.dir == str(up / "cache")

def test_cache_folder_made_private(tmp_path, fresh):
  run_a(dev := device(tmp_path / "new" / "cache"))
  for d in (tmp_path / "new", tmp_path / "new" / "cache"): assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
  assert dev.disk.dir == str(tmp_path / "new" / "cache") and len(os.listdir(dev.disk.dir)) == 2

ENTRIES = {"writable-by-others": (0o666, None), "group-writable": (0o664, None), "another-users": (0o644, OTHER)}

@pytest.mark.parametrize("kind", ENTRIES)
@pytest.mark.parametrize("planted", ["constructor", "other-kernel"])
def test_untrusted_entry_is_never_loaded(tmp_path, fresh, kind, planted):
  """In a folder of our own, an entry another user could have written (say, before the folder was made private) is
  rebuilt: neither a constructor's code nor another kernel under A's key (with its sum recomputed) is ever loaded."""
  mode, owner = ENTRIES[kind]
  if owner is not None and os.geteuid() != 0: pytest.skip("making another user's files needs root")
  (c := tmp_path / "cache").mkdir(mode=0o700)
  key = DiskCache().key(A)
  if planted == "constructor": plant(c, marker := tmp_path / "ran")
  else:
    (b := tmp_path / "b").mkdir(mode=0o700); dev = device(b); dev.build(B); dev.disk.flush()
    shutil.copy(b / (DiskCache().key(B) + ".so"), c / (key + ".so")); marker = tmp_path / "ran"
    (c / (key + ".sum")).write_bytes(DiskCache.digest(key, (c / (key + ".so")).read_bytes()))
  for e in (".so", ".sum"):
    os.chmod(c / (key + e), mode)
    if owner is not None: os.chown(c / (key + e), owner, -1)
  dev = device(c)
  np.testing.assert_allclose(run_a(dev), X * 3 - 1, rtol=1e-6)
  assert not marker.exists() and (dev.disk.hits, dev.disk.misses) == (0, 1)
  st = os.stat(c / (key + ".so"))   # replaced by a trusted entry, which loads
  assert st.st_uid == os.geteuid() and not st.st_mode & 0o022
  again = device(c); again.build(A)
  assert (again.disk.hits, again.disk.misses) == (1, 0)

def test_writes_never_follow_a_planted_link(tmp_path, fresh):
  """Links at every name the cache could write (its temporaries' predictable names, its entries') leave their
  targets alone."""
  (c := tmp_path / "cache").mkdir(mode=0o700)
  (victim := tmp_path / "victim").write_bytes(b"precious")
  key, pid = DiskCache().key(A), os.getpid()
  names = [f"{key}.so", f"{key}.sum", *(f"{key}.so.{pid}.{n}.tmp{e}" for n in range(8) for e in ("", ".sum"))]
  for name in names: os.symlink(victim, c / name)
  np.testing.assert_allclose(run_a(dev := device(c)), X * 3 - 1, rtol=1e-6)
  assert victim.read_bytes() == b"precious" and dev.disk.misses == 1
  assert all(stat.S_ISREG(os.lstat(c / (key + e)).st_mode) for e in (".so", ".sum"))   # the links replaced, not written through

def test_sweep_deletes_only_the_caches_own_names(tmp_path):
  hexes = "3f786850e387550fdab836ed7e6dc881de23001b"
  keep = [f"{hexes}.txt", "a" * 64, f"{hexes}_backup", f"{hexes}.so.bak", f"{hexes}.json", f"{hexes}x.o.orig"]
  mine = [f"{hexes}.1234.5.abcd_f01.so.tmp", f"{hexes}.1234.6.abcdef01.sum.tmp", f"{hexes}.1234.7.abcdef01.o.tmp",
          f"{'b' * 40}.sum"]   # temporaries left by a killed process, a record without its object
  for f in keep + mine:
    if f.endswith("_backup"): (tmp_path / f).mkdir(); (tmp_path / f / "notes").write_text("x")
    else: (tmp_path / f).write_text("x")
    old = time.time() - 7200
    os.utime(tmp_path / f, (old, old))
  disk_prune.prune(str(tmp_path), 1 << 30)
  assert sorted(os.listdir(tmp_path)) == sorted(keep) and (tmp_path / f"{hexes}_backup" / "notes").exists()
