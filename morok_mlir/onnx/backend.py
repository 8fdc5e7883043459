"""onnx.backend.base.Backend for morok_mlir: prepare(model) -> BackendRep whose run(inputs) gives the outputs in graph
order; run_model, run_node and supports_device as onnx's backend tests call them."""
from __future__ import annotations
import numpy as np
import onnx
from onnx.backend.base import Backend, BackendRep
from morok_mlir.onnx.model import OnnxModel

class MorokRep(BackendRep):
  def __init__(self, model: OnnxModel, device: str): self.model, self.device = model, device
  def run(self, inputs, **kwargs) -> tuple:
    if isinstance(inputs, dict): feed = inputs
    else:
      inputs = [inputs] if isinstance(inputs, np.ndarray) else list(inputs)
      if len(inputs) != len(self.model.input_names):
        raise ValueError(f"{len(inputs)} inputs given, the graph takes {len(self.model.input_names)}: {', '.join(self.model.input_names)}")
      feed = dict(zip(self.model.input_names, inputs))
    from morok_mlir.device import Device
    with Device.default(self.device): out = self.model(feed)   # every tensor the graph makes lives on the rep's device
    return tuple(out[n] for n in self.model.output_names)

class MorokBackend(Backend):
  @classmethod
  def supports_device(cls, device: str) -> bool:
    if device.upper() == "CPU": return True
    if device.upper() != "CUDA": return False
    from morok_mlir.device import cuda
    return cuda.available()[0]
  @classmethod
  def prepare(cls, model, device: str = "CPU", **kwargs) -> MorokRep:
    if not cls.supports_device(device): raise RuntimeError(f"device {device!r} is not available")
    return MorokRep(OnnxModel(model), device.upper())
  @classmethod
  def run_model(cls, model, inputs, device: str = "CPU", **kwargs) -> tuple:
    return cls.prepare(model, device, **kwargs).run(inputs)
  @classmethod
  def run_node(cls, node: onnx.NodeProto, inputs, device: str = "CPU", outputs_info=None, **kwargs) -> tuple:
    """One node as a graph of its own: inputs are arrays in the node's input order; output types come from
    outputs_info ((dtype, shape) pairs) or default to float."""
    inputs = list(inputs)
    names = [n for n in node.input if n]
    vi = [onnx.helper.make_tensor_value_info(n, onnx.helper.np_dtype_to_tensor_dtype(np.asarray(x).dtype), np.shape(x))
          for n, x in zip(names, inputs)]
    outs = [onnx.helper.make_tensor_value_info(n, onnx.helper.np_dtype_to_tensor_dtype(np.dtype(outputs_info[k][0])) if outputs_info
                                               else onnx.TensorProto.FLOAT, None) for k, n in enumerate(node.output) if n]
    graph = onnx.helper.make_graph([node], "run_node", vi, outs)
    opset = kwargs.get("opset_version", onnx.defs.onnx_opset_version())
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", opset)])
    return cls.run_model(model, inputs, device)

prepare, run_model, run_node, supports_device = MorokBackend.prepare, MorokBackend.run_model, MorokBackend.run_node, MorokBackend.supports_device
