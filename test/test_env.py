"""Environment knobs: each read through core/env.py's table, a bad value one clear line naming the variable, the value
and what is accepted; docs/environment.md documents exactly the table's knobs."""
import os, pathlib, re, subprocess, sys
import pytest
from morok_mlir.core import env

ROOT = pathlib.Path(__file__).resolve().parent.parent
BAD = {"DEBUG": "abc", "BEAM": "two", "DEVICE": "tpu", "MOROK_THREADS": "-3", "MOROK_CACHE_DIR": None, "MOROK_DISK_CACHE": "yes",
       "MOROK_CACHE_MAX_MB": "lots", "MOROK_MEM_CACHE_ENTRIES": "0", "MOROK_MEM_CACHE_MB": "-1", "WINO": "off",
       "MOROK_PROGRESS": "2", "VIZ": "page", "VIZ_PORT": "http", "RING_BYTES": "1MB", "MOROK_DIST_BACKEND": "gloo",
       "MOROK_DIST_TIMEOUT": "0", "MOROK_DIST_CHECK": "no"}
GOOD = {"DEBUG": ("2", 2), "BEAM": ("4", 4), "DEVICE": ("cuda:0", "cuda:0"), "MOROK_THREADS": ("3", 3), "MOROK_CACHE_DIR": ("/x", "/x"),
        "MOROK_DISK_CACHE": ("0", False), "MOROK_CACHE_MAX_MB": ("1.5", 1.5), "MOROK_MEM_CACHE_ENTRIES": ("16", 16),
        "MOROK_MEM_CACHE_MB": ("4", 4.0), "WINO": ("0", False), "MOROK_PROGRESS": ("0", False), "VIZ": ("out.html", "out.html"),
        "VIZ_PORT": ("0", 0), "RING_BYTES": ("0", 0), "MOROK_DIST_BACKEND": ("NCCL", "nccl"), "MOROK_DIST_TIMEOUT": ("2.5", 2.5),
        "MOROK_DIST_CHECK": ("0", False)}

def test_every_knob_is_listed_here():
  assert set(BAD) == set(GOOD) == set(env.KNOBS)

@pytest.mark.parametrize("name", [n for n, v in BAD.items() if v is not None])
def test_bad_value_is_one_clear_error(name, monkeypatch):
  monkeypatch.setenv(name, BAD[name])
  with pytest.raises(env.EnvError) as e: env.get(name)
  msg = str(e.value)
  assert isinstance(e.value, ValueError) and "\n" not in msg
  assert f"{name}={BAD[name]!r}" in msg and env.KNOBS[name].accepted in msg, msg

@pytest.mark.parametrize("name", list(GOOD))
def test_good_value_and_default(name, monkeypatch):
  monkeypatch.setenv(name, GOOD[name][0])
  assert env.get(name) == GOOD[name][1]
  monkeypatch.delenv(name)
  assert env.get(name) == env.KNOBS[name].parse(env.KNOBS[name].default)
  monkeypatch.setenv(name, "")   # set but empty: the default, as unset
  assert env.get(name) == env.KNOBS[name].parse(env.KNOBS[name].default)

def _run(name: str, tmp_path, *cmd):
  e = {k: v for k, v in os.environ.items() if k not in env.KNOBS} | {"MOROK_CACHE_DIR": str(tmp_path), name: BAD[name]}
  return subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=300)

# the knobs a first realize reads (at import or at the call): a script that sets one badly ends with one line
@pytest.mark.parametrize("name", ["DEBUG", "BEAM", "DEVICE", "MOROK_THREADS", "MOROK_DISK_CACHE", "MOROK_CACHE_MAX_MB",
                                  "MOROK_MEM_CACHE_ENTRIES", "MOROK_MEM_CACHE_MB", "WINO"])
def test_script_ends_with_one_line(name, tmp_path):
  r = _run(name, tmp_path, sys.executable, "-c", "from morok_mlir import Tensor; print((Tensor([1.0, 2.0]) + 1).sum().numpy())")
  assert r.returncode == 1 and r.stdout == "", r.stdout
  assert r.stderr.count("\n") == 1 and "Traceback" not in r.stderr, r.stderr
  assert re.fullmatch(rf"morok-mlir: error: environment variable {name}='{re.escape(BAD[name])}': {name} must be .*\n", r.stderr), r.stderr

def test_morok_opt_says_one_line(tmp_path):
  r = _run("DEBUG", tmp_path, str(pathlib.Path(sys.executable).with_name("morok-opt")), "--list-passes")
  assert r.returncode == 1 and r.stderr.count("\n") == 1 and "DEBUG='abc'" in r.stderr and "integer >= 0" in r.stderr, r.stderr

def test_docs_table_lists_every_knob():
  doc = (ROOT / "docs" / "environment.md").read_text()
  rows = re.findall(r"^\| `([A-Z_]+)` \|", doc, re.M)
  assert sorted(rows) == sorted(env.KNOBS), rows

def test_the_package_reads_the_environment_only_through_the_table():
  """os.environ/getenv reads elsewhere (its own table included) would skip the check (writes, as setdefault of
  CUDA_VISIBLE_DEVICES, are not reads)."""
  reads = re.compile(r"os\.environ\.get\(|os\.getenv\(|os\.environ\[[^]]+\](?!\s*=)|os\.environ\._data")
  found = [f"{p.relative_to(ROOT)}:{i}" for p in sorted((ROOT / "morok_mlir").rglob("*.py")) if p.name != "env.py"
           for i, line in enumerate(p.read_text().splitlines(), 1) if reads.search(line)]
  assert not found, found
