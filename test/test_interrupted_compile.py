"""Ctrl-C during the first compile (or the first import) must leave the process able to compile: the MLIR dialect modules
register themselves with the process as they are imported, so an interrupted import could never be retried."""
import os, subprocess, sys
import pytest

def _child(tmp_path, code: str) -> str:
  env = {**os.environ, "MOROK_CACHE_DIR": str(tmp_path)}
  r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)   # and exits
  assert r.returncode == 0, r.stderr[-3000:]
  return r.stdout.strip().splitlines()[-1]

_AT = """
import linecache, sys, threading
fired = []
def at(suffix, func, text, act):
  def local(frame, event, arg):
    if event == "line" and not fired and text in linecache.getline(frame.f_code.co_filename, frame.f_lineno):
      fired.append(frame.f_lineno); act()
    return local
  caller, _, func = func.rpartition(">")   # "put>start": start() called by put()
  def hook(frame, event, arg):
    return local if not fired and frame.f_code.co_filename.endswith(suffix) and (not func or frame.f_code.co_name == func) and \
      (not caller or frame.f_back is not None and frame.f_back.f_code.co_name == caller) else None
  return hook
def interrupt(): raise KeyboardInterrupt
"""
_AGAIN = """
import numpy as np
from morok_mlir import Tensor
a = (Tensor(np.arange(3, dtype=np.float32)) * 2 + 1).numpy().tolist()
b = Tensor(np.arange(6, dtype=np.float32)).reshape(2, 3).sum(1).numpy().tolist()
print(bool(fired), a, b)
"""

def test_sigint_while_the_mlir_dialects_are_imported(tmp_path):
  """A real SIGINT delivered after `mlir.dialects.func` registered its namespace, before its ops: the import is held
  until done, the KeyboardInterrupt comes after it, and compiling works."""
  code = _AT + """
import os, signal
hook = at("_func_ops_gen.py", "", "register_operation", lambda: os.kill(os.getpid(), signal.SIGINT))
sys.settrace(hook); threading.settrace(hook)
try:
  import numpy as np
  from morok_mlir import Tensor
  (Tensor(np.arange(3, dtype=np.float32)) + 1).numpy()
except KeyboardInterrupt: pass
finally: sys.settrace(None); threading.settrace(None)
""" + _AGAIN
  assert _child(tmp_path, code) == "True [1.0, 3.0, 5.0] [3.0, 12.0]"

# (file, function, the line at which KeyboardInterrupt is raised) during the first compile
# (an MLIR dialect module's import is covered above: ir.load holds a SIGINT until every one is imported, at the first compile)
POINTS = [("morok_mlir/ir/__init__.py", "load", "_loaded = True"),   # the MLIR modules imported, before the mark
          ("dialects/uop.py", "load_uop_dialect", "_uop_loaded = True"),   # after irdl.load_dialects, before the mark
          ("morok_mlir/ir/pipeline.py", "mlir_context", "_ctx_uses += 1"),
          ("morok_mlir/ir/pipeline.py", "run", 'carry["out"] = out'),   # our last pass's kernels handed back
          ("morok_mlir/realize.py", "realize", "_schedule_cache[ck] = sched"),
          ("morok_mlir/device/cpu.py", "lower_many", "return mod"),
          ("threading.py", "put>start", "_start_new_thread")]     # the disk cache's link worker, before it runs

@pytest.mark.parametrize("point", POINTS, ids=[p[2] for p in POINTS])
def test_interrupted_first_compile_then_realize(tmp_path, point):
  code = _AT + """
import numpy as np
from morok_mlir import Tensor
hook = at(*%r, interrupt)
sys.settrace(hook); threading.settrace(hook)
try: (Tensor(np.arange(3, dtype=np.float32)) + 1).numpy()
except KeyboardInterrupt: pass
finally: sys.settrace(None); threading.settrace(None)
""" % (point,) + _AGAIN
  fired, rest = _child(tmp_path, code).split(" ", 1)
  assert rest == "[1.0, 3.0, 5.0] [3.0, 12.0]"
  assert fired == "True"
