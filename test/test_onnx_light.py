"""onnx's nine "light" model-zoo graphs (onnx/backend/test/data/light: full-size 224x224 networks whose weights are made
by ConstantOfShape, with stored outputs) through the backend interface on the CPU, fed and compared as onnx's backend
runner does it (test/onnx_conformance.py light_case: its dummy inputs, output_0, the case's rtol/atol)."""
import pathlib, sys
import pytest
pytest.importorskip("onnx")
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import onnx_conformance as conf

@pytest.mark.parametrize("name", conf.LIGHT)
def test_light_model(name):
  reason, _ = conf.run_light(name)
  assert reason is None, f"light_{name}: {reason}"
