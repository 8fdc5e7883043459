"""ONNX front end: OnnxModel runs an ONNX graph as lazy Tensor ops; morok_mlir.onnx.backend is onnx's Backend interface."""
try: import onnx  # noqa: F401
except ModuleNotFoundError as e:
  if e.name != "onnx": raise   # onnx is there but broken: its own error says more
  raise ModuleNotFoundError("morok_mlir.onnx needs the onnx package, an optional dependency: pip install 'morok-mlir[onnx]'",
                            name="onnx") from e
from morok_mlir.onnx.model import OnnxModel, InvalidModel, Unsupported
from morok_mlir.onnx.ops import OPS

__all__ = ["OnnxModel", "InvalidModel", "Unsupported", "OPS"]
