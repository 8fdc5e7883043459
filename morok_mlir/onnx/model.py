"""OnnxModel: an ONNX graph interpreted node by node into lazy Tensor ops (tinygrad's onnx runner). Initializers become
Tensors, each node is one call into the op table (ops.py), and the outputs are realized together at the end. The whole
graph (subgraphs included) is checked against the table before anything runs."""
from __future__ import annotations
import os, threading
import numpy as np
import onnx
from onnx import numpy_helper, helper
from morok_mlir.tensor import Tensor
from morok_mlir.jit import TinyJit
from morok_mlir.core.dtype import dtypes
from morok_mlir.onnx.ops import OPS, REFUSE

MIN_OPSET = 7
# ONNX element types this front end holds; the others (strings, float8, int4, complex) are refused by name
DTYPES = {onnx.TensorProto.FLOAT: dtypes.float32, onnx.TensorProto.DOUBLE: dtypes.float64, onnx.TensorProto.FLOAT16: dtypes.float16,
          onnx.TensorProto.BOOL: dtypes.bool, onnx.TensorProto.INT8: dtypes.int8, onnx.TensorProto.UINT8: dtypes.uint8,
          onnx.TensorProto.INT16: dtypes.int16, onnx.TensorProto.UINT16: dtypes.uint16, onnx.TensorProto.INT32: dtypes.int32,
          onnx.TensorProto.UINT32: dtypes.uint32, onnx.TensorProto.INT64: dtypes.int64, onnx.TensorProto.UINT64: dtypes.uint64}
if (_bf16 := getattr(dtypes, "bfloat16", None)) is not None: DTYPES[onnx.TensorProto.BFLOAT16] = _bf16

def dtype_of(t: int):
  if (dt := DTYPES.get(t)) is None:
    name = onnx.TensorProto.DataType.Name(t)
    raise NotImplementedError("bfloat16" if name == "BFLOAT16" else f"ONNX element type {name}")
  return dt

def to_tensor(v) -> Tensor | list | None:
  """A numpy array (or a list of them: a sequence), Tensor or None as the graph's value."""
  if v is None or isinstance(v, Tensor): return v
  if isinstance(v, (list, tuple)): return [to_tensor(x) for x in v]
  if isinstance(v, onnx.TensorProto): dtype_of(v.data_type); v = numpy_helper.to_array(v)
  a = np.asarray(v)
  if a.dtype == object or a.dtype.kind in "USc": raise NotImplementedError(f"inputs of numpy dtype {a.dtype}")
  if a.dtype.name == "bfloat16" and onnx.TensorProto.BFLOAT16 not in DTYPES: raise NotImplementedError("bfloat16")
  return Tensor(np.array(a, order="C"))   # ascontiguousarray would make a 0-d array 1-d

class Subgraph:
  """A graph attribute (If's branches, Loop's and Scan's body): called with its inputs, it runs in the scope of the
  node that holds it (names of the outer graph are visible) and returns its outputs."""
  def __init__(self, graph: onnx.GraphProto, opset: int, scope: dict): self.graph, self.opset, self.scope = graph, opset, scope
  def __call__(self, *inputs) -> list:
    vals = dict(self.scope)
    vals.update({i.name: to_tensor(v) for i, v in zip(self.graph.input, inputs)})
    return run_graph(self.graph, vals, self.opset)

def attrs_of(node: onnx.NodeProto, opset: int, scope: dict) -> dict:
  out = {}
  for a in node.attribute:
    if a.ref_attr_name: raise NotImplementedError(f"node {node.name!r} ({node.op_type}): attribute references (functions)")
    if a.type == onnx.AttributeProto.GRAPH: out[a.name] = Subgraph(a.g, opset, scope)
    elif a.type == onnx.AttributeProto.TENSOR: out[a.name] = numpy_helper.to_array(a.t)
    elif a.type == onnx.AttributeProto.STRING: out[a.name] = a.s.decode()
    elif a.type == onnx.AttributeProto.STRINGS: out[a.name] = [s.decode() for s in a.strings]
    else: out[a.name] = helper.get_attribute_value(a)
  return out

def op_key(node: onnx.NodeProto) -> str:
  """The op table's key: the op type, prefixed by its domain outside the default one."""
  return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}:{node.op_type}"

def check_graph(graph: onnx.GraphProto, opset: int):
  """NotImplementedError naming the first node this front end cannot run: an unknown op, or an attribute value it refuses."""
  for node in graph.node:
    where = f"node {node.name!r} ({node.op_type}, opset {opset})"
    if op_key(node) not in OPS:
      what = f"operator {node.op_type}" + (f" of domain {node.domain!r}" if node.domain not in ("", "ai.onnx") else "")
      raise NotImplementedError(f"{where}: {what} is not supported")
    a = {x.name: x for x in node.attribute}
    if (chk := REFUSE.get(op_key(node))) is not None:
      vals = {k: (v.s.decode() if v.type == onnx.AttributeProto.STRING else helper.get_attribute_value(v)) for k, v in a.items()
              if v.type != onnx.AttributeProto.GRAPH}
      if (why := chk(vals, opset)): raise NotImplementedError(f"{where}: {why}")
    for x in a.values():
      if x.type == onnx.AttributeProto.GRAPH: check_graph(x.g, opset)
      if x.type == onnx.AttributeProto.TENSOR and x.t.data_type not in DTYPES:
        try: dtype_of(x.t.data_type)
        except NotImplementedError as e: raise NotImplementedError(f"{where}: {e}") from None

def _host_full(v: Tensor, a: dict) -> Tensor:
  """ConstantOfShape's output as a buffer filled on the host (no kernel to compile per shape)."""
  val = np.asarray(a.get("value", np.zeros(1, np.float32))).reshape(-1)
  return Tensor(np.full(v.shape, val[0], val.dtype))

# ops whose outputs differ between calls with equal inputs: never folded
NOT_FOLDED = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Bernoulli", "Multinomial", "Dropout"}

def run_graph(graph: onnx.GraphProto, vals: dict, opset: int, folded: dict | None = None) -> list:
  """Interpret the nodes in order (ONNX lists them topologically); vals holds the inputs and the outer scope.
  folded (the top graph's, when the call overrides no initializer): the values that depend on no graph input
  (initializers, and what nodes without subgraphs compute from them alone), made on the first call and reused by later
  ones, as onnxruntime folds constants. ConstantOfShape's output is realized there: a weight made by it is then a
  buffer, not a broadcast constant, so a conv or matmul on it runs as a packed contraction (its packed panels kept
  between calls) instead of a plain loop nest."""
  for init in graph.initializer:
    if init.name not in vals or vals[init.name] is None:
      vals[init.name] = folded[init.name] if folded is not None and init.name in folded else to_tensor(numpy_helper.to_array(init))
      if folded is not None: folded[init.name] = vals[init.name]
  for node in graph.node:
    if folded is not None and node.output and all(n in folded for n in node.output if n):
      for n in node.output:
        if n: vals[n] = folded[n]
      continue
    ins = [vals[n] if n else None for n in node.input]
    a = attrs_of(node, opset, vals)
    a["_outputs"] = len(node.output)   # Split and MaxPool make as many outputs as the node names
    try: outs = OPS[op_key(node)](ins, a, opset)
    except NotImplementedError as e: raise NotImplementedError(f"node {node.name!r} ({node.op_type}, opset {opset}): {e}") from None
    if not isinstance(outs, tuple): outs = (outs,)   # a tuple is several outputs, a list one sequence
    for n, v in zip(node.output, outs):
      if n: vals[n] = v
    if (folded is not None and node.op_type not in NOT_FOLDED and all(n in folded for n in node.input if n)
        and not any(x.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for x in node.attribute)):
      for n, v in zip(node.output, outs):
        if n: folded[n] = vals[n] = _host_full(v, a) if node.op_type == "ConstantOfShape" and isinstance(v, Tensor) else v
  return [vals[o.name] for o in graph.output]

def _numpy(v):
  if isinstance(v, list): return [_numpy(x) for x in v]
  return None if v is None else v.numpy()

class OnnxModel:
  """OnnxModel(path | bytes | onnx.ModelProto); model(**inputs) or model(inputs) -> {output name: numpy array} (Tensors
  with as_numpy=False). Inputs are numpy arrays or Tensors by graph input name."""
  def __init__(self, model, load_external_data: bool = True):
    if isinstance(model, (str, os.PathLike)): model = onnx.load(os.fspath(model), load_external_data=load_external_data)
    elif isinstance(model, (bytes, bytearray)): model = onnx.load_from_string(bytes(model))
    elif not isinstance(model, onnx.ModelProto): raise TypeError(f"OnnxModel takes a path, bytes or onnx.ModelProto, got {type(model).__name__}")
    self.model, self.graph = model, model.graph
    ops = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
    self.opset = ops[0] if ops else onnx.defs.onnx_opset_version()
    if not MIN_OPSET <= self.opset <= onnx.defs.onnx_opset_version():
      raise NotImplementedError(f"opset {self.opset} is not supported ({MIN_OPSET}..{onnx.defs.onnx_opset_version()})")
    check_graph(self.graph, self.opset)
    for init in self.graph.initializer: dtype_of(init.data_type)
    for vi in [*self.graph.input, *self.graph.output]:
      if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
        try: dtype_of(vi.type.tensor_type.elem_type)
        except NotImplementedError as e: raise NotImplementedError(f"graph input/output {vi.name!r}: {e}") from None
    inits = {i.name for i in self.graph.initializer}
    self.input_names = [i.name for i in self.graph.input if i.name not in inits]
    self.output_names = [o.name for o in self.graph.output]
    self._folded: dict = {}   # run_graph's values that depend on no graph input, realized on the first call
    self._jits: dict = {}     # the inputs' names, shapes, dtypes and devices -> a TinyJit of the graph on them (see __call__)
    self._jit_lock = threading.Lock()

  def __call__(self, inputs: dict | None = None, as_numpy: bool = True, **kw) -> dict:
    inputs = {**(inputs or {}), **kw}
    if missing := [n for n in self.input_names if n not in inputs]: raise ValueError(f"missing inputs: {', '.join(missing)}")
    vals = {n: to_tensor(v) for n, v in inputs.items()}
    for vi in self.graph.input:   # what the graph declares, checked as onnxruntime checks it: never a silent cast
      if (v := vals.get(vi.name)) is None or not isinstance(v, Tensor) or not vi.type.HasField("tensor_type"): continue
      tt = vi.type.tensor_type
      if tt.elem_type and tt.elem_type in DTYPES and DTYPES[tt.elem_type] != v.dtype:
        raise TypeError(f"input {vi.name!r} must be {DTYPES[tt.elem_type]}, got {v.dtype}")
      if tt.HasField("shape") and (len(tt.shape.dim) != v.ndim or any(d.HasField("dim_value") and d.dim_value != s
                                                                        for d, s in zip(tt.shape.dim, v.shape))):
        raise ValueError(f"input {vi.name!r} must have shape {[d.dim_value if d.HasField('dim_value') else d.dim_param for d in tt.shape.dim]}"
                         f", got {v.shape}")
    inits = {i.name for i in self.graph.initializer}
    if inits & set(inputs): outs = self._run(vals, None)
    elif not all(isinstance(v, Tensor) for v in vals.values()): outs = self._run(vals, self._folded)
    else:
      # A graph whose host reads (shapes, axes, counts) see only constants and the inputs' shapes is the same kernels
      # for inputs of the same shapes: TinyJit replays them without interpreting the graph again. One that reads an
      # input's data on the host (NonZero, a Loop's count) is never replayed (TinyJit sees the read) and runs normally.
      names = sorted(vals)
      key = tuple((n, vals[n].shape, vals[n].dtype, vals[n].device) for n in names)
      with self._jit_lock:
        if (jit := self._jits.get(key)) is None:
          if len(self._jits) >= self.MAX_JITS: del self._jits[next(iter(self._jits))]
          jit = self._jits[key] = TinyJit(lambda *ts: self._run(dict(zip(names, ts)), self._folded))
      outs = jit(*[vals[n] for n in names])
    return dict(zip(self.output_names, [_numpy(o) for o in outs] if as_numpy else outs))

  MAX_JITS = 8   # input signatures replayed at once (each holds its intermediates' memory)
  def _run(self, vals: dict, folded: dict | None) -> list:
    outs = run_graph(self.graph, vals, self.opset, folded)
    flat = [t for o in outs for t in (o if isinstance(o, list) else [o]) if isinstance(t, Tensor)]
    if flat: Tensor.realize(*flat)
    return outs
