"""ONNX front end: OnnxModel runs an ONNX graph as lazy Tensor ops; morok_mlir.onnx.backend is onnx's Backend interface."""
from morok_mlir.onnx.model import OnnxModel, InvalidModel, Unsupported
from morok_mlir.onnx.ops import OPS

__all__ = ["OnnxModel", "InvalidModel", "Unsupported", "OPS"]
