"""The kernels a graph compiles to depend on the graph and the pass options alone: not on the machine's load, the hash
seed or what was compiled before. A process that only lowers (morok-opt -p uop-lower-cpu) finds a contraction again where
uop-optimize chose one, so both must get the same answers (kernel_facts.depends bounds Z3 by its work, not by time)."""
import hashlib, os, subprocess, sys
import numpy as np
import pytest
import z3
from morok_mlir import Tensor, nn
from morok_mlir import realize as R
from morok_mlir.device.cpu import CPU
from morok_mlir.lru import LRU
import morok_mlir.passes.optimize as opt
import morok_mlir.core.kernel_facts as facts

def groupnorm_backward() -> tuple[np.ndarray, np.ndarray, np.ndarray, list[str]]:
  """z = GroupNorm(3, 6)(x) of a (20, 6, 10, 10) batch, x and z read before x.grad of sum(z * w): (x, w, x.grad, the
  lowered text of each kernel compiled on the way)."""
  rng = np.random.default_rng(0)
  xv, wv = rng.standard_normal((20, 6, 10, 10), dtype=np.float32), rng.standard_normal((20, 6, 10, 10), dtype=np.float32)
  x = Tensor(xv, requires_grad=True)
  z = nn.GroupNorm(3, 6)(x)
  x.numpy(); z.numpy()
  (z * Tensor(wv)).sum().backward()
  grad = x.grad.numpy()
  return xv, wv, grad, [it.program.spec.src for s in R._schedule_cache.values() for it in s.items]

def groupnorm_grad(x: np.ndarray, w: np.ndarray) -> np.ndarray:
  """d sum(GroupNorm(3)(x) * w) / dx in float64 (weight ones, bias zeros)."""
  g, dz = x.astype(np.float64).reshape(20, 3, -1), w.astype(np.float64).reshape(20, 3, -1)
  sd = np.sqrt(g.var(-1, keepdims=True) + 1e-5)
  xh = (g - g.mean(-1, keepdims=True)) / sd
  return ((dz - dz.mean(-1, keepdims=True) - xh * (dz * xh).mean(-1, keepdims=True)) / sd).reshape(x.shape)

@pytest.fixture
def fresh(monkeypatch, tmp_path):
  """Empty schedule, method and kernel-facts caches and a disk cache of this test's own, so every kernel compiles (and
its contraction is looked for) here."""
  monkeypatch.setattr(R, "_schedule_cache", {})
  monkeypatch.setattr(CPU, "method_cache", LRU(lambda p: p.nbytes))
  monkeypatch.setattr(facts, "_FOUND", LRU(max_entries=256))
  monkeypatch.setattr(CPU.disk, "dir", str(tmp_path))

LOADED = 150   # Z3 work units a loaded machine gets through per millisecond of a wall-clock limit (an idle one: about 2000)
def test_groupnorm_backward_while_the_load_changes(fresh, monkeypatch):
  """Load that arrives halfway through uop-optimize's proofs and is gone when uop-lower-cpu runs: a proof with a
  wall-clock limit then buys less work (the long ones run out, the short ones finish). The same kernels as compiled on
  an idle machine, and the gradient right."""
  st = {"optimizing": False, "timed": 0, "busy_from": None}   # wall-clock limits set while optimizing, where the load starts
  set_, optimize_kernel = z3.Solver.set, opt.optimize_kernel
  def set_loaded(self, *args, **keys):
    params = {**dict(zip(args[::2], args[1::2])), **keys}
    if st["optimizing"] and "timeout" in params:
      st["timed"] += 1
      if st["busy_from"] is not None and st["timed"] > st["busy_from"]: params["rlimit"] = params.pop("timeout") * LOADED
    return set_(self, **params)
  def optimize_watched(*args, **keys):
    st["optimizing"] = True
    try: return optimize_kernel(*args, **keys)
    finally: st["optimizing"] = False
  monkeypatch.setattr(z3.Solver, "set", set_loaded)
  monkeypatch.setattr(opt, "optimize_kernel", optimize_watched)
  idle = groupnorm_backward()[3]
  st["busy_from"], st["timed"] = st["timed"] // 2, 0
  monkeypatch.setattr(R, "_schedule_cache", {})
  monkeypatch.setattr(CPU, "method_cache", LRU(lambda p: p.nbytes))
  monkeypatch.setattr(facts, "_FOUND", LRU(max_entries=256))
  x, w, grad, texts = groupnorm_backward()
  assert texts == idle
  np.testing.assert_allclose(grad, groupnorm_grad(x, w), rtol=1e-3, atol=1e-4)

def digest() -> str:
  return hashlib.sha256("\n".join(groupnorm_backward()[3]).encode()).hexdigest()

def test_same_kernels_in_another_process(fresh, tmp_path):
  """Compiled again in a fresh process with another hash seed (other set orders, other addresses): the same text."""
  env = {**os.environ, "PYTHONHASHSEED": "12345", "MOROK_CACHE_DIR": str(tmp_path)}
  out = subprocess.run([sys.executable, __file__], env=env, capture_output=True, text=True, timeout=600)
  assert out.returncode == 0, out.stderr
  assert out.stdout.split()[-1] == digest()

if __name__ == "__main__":
  R._schedule_cache = {}
  print(digest())
