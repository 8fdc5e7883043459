"""Every stage of the compiler as text: Tensor.mlir(stage=...), DEBUG=4's printout, and the graph stage as morok-opt's input."""
import os, pathlib, subprocess, sys
import numpy as np
import pytest
from morok_mlir import Tensor
from morok_mlir.realize import GlobalCounters
from morok_mlir.ir.pipeline import PIPELINE

ROOT = pathlib.Path(__file__).resolve().parent.parent
OPT = str(pathlib.Path(sys.executable).with_name("morok-opt"))
STAGES = ["graph", *PIPELINE, "lowered", "llvm"]
# what each stage holds, and no stage before it: the graph ops, ranges, kernels, the CPU choices, loops, LLVM functions
MARKS = {"graph": '"uop.reduce_axis"', "uop-rangeify": '"uop.range"', "uop-simplify": '"uop.range"', "uop-kernel-split": '"uop.kernel"',
         "uop-optimize": "uop.fastmath", "lowered": "scf.for", "llvm": "define void @kernel"}

def _t() -> Tensor:
  a = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
  return (a * 2 + 1).sum(1)

def test_every_stage_as_text():
  t, compiled = _t(), GlobalCounters.compiled
  texts = {s: t.mlir(s) for s in STAGES}
  assert GlobalCounters.compiled == compiled, "mlir() compiles no code"
  assert "uop.range" not in texts["graph"] and "loc(" not in texts["graph"]
  for s, mark in MARKS.items(): assert mark in texts[s], (s, texts[s][:400])
  assert t.mlir() == texts["graph"]
  np.testing.assert_allclose(t.numpy(), (np.arange(12).reshape(3, 4) * 2 + 1).sum(1))   # the tensor is still lazy and right

def test_debuginfo_names_the_users_line():
  t = _t()
  line = _t.__code__.co_firstlineno + 2
  assert f'loc("{__file__}":{line}:' in t.mlir("graph", debuginfo=True)
  assert f'loc("{__file__}":{line}:' in t.mlir("uop-optimize", debuginfo=True)   # the passes keep the user's lines

def test_bad_stage_lists_the_stages():
  msg = rf"{os.path.basename(__file__)}:\d+:\d+: mlir\(\): unknown stage 'lowred' \(stages: graph, uop-rangeify, .*, llvm\)"
  with pytest.raises(ValueError, match=msg):
    _t().mlir("lowred")
  with pytest.raises(TypeError, match="stage must be a str"): _t().mlir(4)

def test_graph_stage_runs_through_morok_opt(tmp_path):
  """The graph stage is morok-opt's input: each prefix of the pipeline gives the text mlir() gives after its last pass."""
  t = _t()
  (f := tmp_path / "graph.mlir").write_text(t.mlir("graph", debuginfo=True))
  for i, p in enumerate(PIPELINE):
    r = subprocess.run([OPT, str(f), "-p", ",".join(PIPELINE[:i + 1])], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert r.stdout == t.mlir(p), p

def test_debug4_prints_every_stage_in_order(tmp_path):
  prog = "from morok_mlir import Tensor\nimport numpy as np\nprint((Tensor(np.ones((3, 4), np.float32)) * 2).sum(1).numpy())\n"
  r = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                     env={**os.environ, "DEBUG": "4", "MOROK_DISK_CACHE": "0"})
  assert r.returncode == 0, r.stderr
  heads = [line[9:] for line in r.stdout.splitlines() if line.startswith("// ----- ") and not line.startswith("// ----- kernel")]
  assert heads == ["graph", *(f"after {p}" for p in PIPELINE), "lowered", "llvm"], heads
  assert '"uop.reduce_axis"' in r.stdout.split("// ----- after uop-rangeify")[0] and "define void @kernel" in r.stdout

def test_nothing_is_printed_when_not_asked(monkeypatch):
  """Without a recorder (no mlir(), DEBUG < 4, no VIZ) a compile runs the pipeline in one PassManager and prints no module."""
  from morok_mlir import realize
  from morok_mlir.ir import pipeline, stages
  monkeypatch.setattr(realize, "DEBUG", 0)
  monkeypatch.setattr(stages, "WATCH", None)
  monkeypatch.setattr(stages.Stages, "add", lambda *a, **k: pytest.fail("a module was printed"))
  runs, real = [], pipeline.run_pipeline
  monkeypatch.setattr(pipeline, "run_pipeline", lambda m, p, *a, **k: (runs.append(p), real(m, p, *a, **k))[1])
  compiled = GlobalCounters.compiled
  x = Tensor(np.arange(7, dtype=np.float32))
  np.testing.assert_allclose((x * 5.25 - 3.5).exp2().numpy(), np.exp2(np.arange(7) * 5.25 - 3.5), rtol=1e-6)
  assert GlobalCounters.compiled > compiled and runs == [",".join(PIPELINE)]
