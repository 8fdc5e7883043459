"""OnnxModel: an ONNX graph interpreted node by node into lazy Tensor ops (tinygrad's onnx runner). Initializers become
Tensors, each node is one call into the op table (ops.py), and the outputs are realized together at the end. The whole
model (subgraphs included) is checked before anything runs: against ONNX's rules as onnxruntime checks them at load
(InvalidModel), and against the table (Unsupported)."""
from __future__ import annotations
import functools, math, os, re, sys, threading, time
import numpy as np
import onnx
from onnx import numpy_helper, helper
from morok_mlir.tensor import Tensor
from morok_mlir.jit import TinyJit
from morok_mlir.core.dtype import dtypes
from morok_mlir.core.uop import guards
from morok_mlir.dialects.ops import Ops
from morok_mlir.core.provenance import user_loc
from morok_mlir.core.progress import progress
from morok_mlir.device import Device
from morok_mlir.device.buffer import Buffer
from morok_mlir import realize as R
from morok_mlir.realize import new_buffer
from morok_mlir.onnx import fold, ops, siblings
from morok_mlir.onnx.ops import OPS, REFUSE, INVALID, owned, AXIS_OPS, AXES_INPUT, AXIS_RANGE

class InvalidModel(ValueError):
  """A model ONNX does not allow, or inputs its graph does not take, as onnxruntime refuses them: the message names the
  node (name, op type) or the value at fault, and the caller's file:line."""
class InvalidInputType(InvalidModel, TypeError):
  """An input whose dtype is not the one the graph declares."""
class Unsupported(NotImplementedError):
  """A valid model this front end cannot run (an op, dtype or attribute value it lacks), named at the caller's line."""

def where(node: onnx.NodeProto, opset: int) -> str: return f"node {node.name!r} ({node.op_type}, opset {opset})"
def invalid(msg: str, exc: type = InvalidModel) -> Exception: return exc(f"{user_loc()}: {msg}")

MIN_OPSET = 7
# ONNX element types this front end holds; the others (strings, float8, int4, complex) are refused by name
DTYPES = {onnx.TensorProto.FLOAT: dtypes.float32, onnx.TensorProto.DOUBLE: dtypes.float64, onnx.TensorProto.FLOAT16: dtypes.float16,
          onnx.TensorProto.BOOL: dtypes.bool, onnx.TensorProto.INT8: dtypes.int8, onnx.TensorProto.UINT8: dtypes.uint8,
          onnx.TensorProto.INT16: dtypes.int16, onnx.TensorProto.UINT16: dtypes.uint16, onnx.TensorProto.INT32: dtypes.int32,
          onnx.TensorProto.UINT32: dtypes.uint32, onnx.TensorProto.INT64: dtypes.int64, onnx.TensorProto.UINT64: dtypes.uint64}
if (_bf16 := getattr(dtypes, "bfloat16", None)) is not None: DTYPES[onnx.TensorProto.BFLOAT16] = _bf16

DTYPES_NP = {dt.npdt: dt for dt in DTYPES.values() if dt.npdt is not None}
# control inputs (see control_inputs) whose values key a replay: integers and booleans of a few elements (a sample rate, a flag)
CONTROL_DTYPES = {dtypes.bool, dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32, dtypes.int64, dtypes.uint64}
CONTROL_NUMEL = 16
CONTROL_VALUES = 4   # the values of one control input that key replays; a fifth makes it data

def dtype_of(t: int):
  if (dt := DTYPES.get(t)) is None:
    name = onnx.TensorProto.DataType.Name(t)
    raise NotImplementedError("bfloat16" if name == "BFLOAT16" else f"ONNX element type {name}")
  return dt

def numel(t: onnx.TensorProto) -> int: return math.prod(t.dims)

def check_tensor(t: onnx.TensorProto, what: str, base: str | None):
  """A stored tensor's dims and data agree, before anything is allocated: dims not negative, the inline data as many
  elements (raw bytes) as the dims say, external data a part of a file inside the base folder of exactly that size."""
  if any(d < 0 for d in t.dims): raise invalid(f"{what} has negative dims {list(t.dims)}")
  if t.data_type == onnx.TensorProto.UNDEFINED: raise invalid(f"{what} has no element type")
  try: dtype_of(t.data_type)
  except NotImplementedError as e: raise Unsupported(f"{user_loc()}: {what}: {e}") from None
  if t.data_location == onnx.TensorProto.EXTERNAL: return external_file(t, what, base)
  n = numel(t)
  if t.HasField("raw_data"):
    if len(t.raw_data) != (want := n * _itemsize(t)): raise invalid(f"{what} holds {len(t.raw_data)} bytes, its dims {list(t.dims)} need {want}")
  elif (have := len(getattr(t, helper.tensor_dtype_to_field(t.data_type)))) != n:
    raise invalid(f"{what} holds {have} values, its dims {list(t.dims)} need {n}")

def _itemsize(t: onnx.TensorProto) -> int: return helper.tensor_dtype_to_np_dtype(t.data_type).itemsize

def external_file(t: onnx.TensorProto, what: str, base: str | None) -> tuple[str, int, int]:
  """(path, offset, length) of a tensor's external data, checked as onnxruntime checks it: a model read from a path reads
  next to itself, one given in memory only from the base folder its caller names; the location stays inside that folder
  (no absolute path, no '..', no symlink out of it) and the part read lies in the file and is the tensor's size."""
  info = {e.key: e.value for e in t.external_data}
  loc = info.get("location", "")
  if base is None:
    raise invalid(f"{what} keeps its data in the external file {loc!r}: a model given as bytes or an onnx.ModelProto reads "
                  "external data only from the folder its caller names (OnnxModel(model, base_dir=...))")
  if not loc or os.path.isabs(loc) or ".." in loc.replace("\\", "/").split("/"):
    raise invalid(f"{what}: external data location {loc!r} must be a relative path inside the model's folder")
  root = os.path.realpath(base)
  path = os.path.realpath(os.path.join(root, loc))
  if os.path.commonpath([root, path]) != root: raise invalid(f"{what}: external data location {loc!r} leads out of {root!r}")
  if not os.path.isfile(path): raise invalid(f"{what}: external data file {loc!r} is not a file in {root!r}")
  try: off, length = int(info.get("offset", 0)), int(info.get("length", -1))
  except ValueError: raise invalid(f"{what}: external data offset/length {info.get('offset')!r}/{info.get('length')!r} are not integers") from None
  size, want = os.path.getsize(path), numel(t) * _itemsize(t)
  if not 0 <= off <= size: raise invalid(f"{what}: external data offset {off} lies outside {loc!r} ({size} bytes)")
  if length == -1: length = size - off
  if length < 0 or off + length > size:
    raise invalid(f"{what}: external data bytes {off}..{off + length} lie outside {loc!r} ({size} bytes)")
  if length != want: raise invalid(f"{what}: external data holds {length} bytes, its dims {list(t.dims)} need {want}")
  return path, off, length

def tensor_array(t: onnx.TensorProto, base: str | None) -> np.ndarray:
  """A stored tensor's values; external data read straight into the array (one copy of it in memory)."""
  if t.data_location != onnx.TensorProto.EXTERNAL: return numpy_helper.to_array(t)
  path, off, length = external_file(t, f"tensor {t.name!r}", base)
  a = np.fromfile(path, helper.tensor_dtype_to_np_dtype(t.data_type), count=numel(t), offset=off)
  if a.size != numel(t): raise invalid(f"tensor {t.name!r}: external data file {path!r} changed while it was read")
  return a.reshape(tuple(t.dims))

def to_tensor(v, copy: bool = True) -> Tensor | list | None:
  """A numpy array (or a list of them: a sequence), Tensor or None as the graph's value; copy=False for an array this
  module made (a stored tensor's), which the Tensor then holds without a copy."""
  if v is None or isinstance(v, Tensor): return v
  if isinstance(v, (list, tuple)): return [to_tensor(x, copy) for x in v]
  if isinstance(v, onnx.TensorProto):
    try: dtype_of(v.data_type)
    except NotImplementedError as e: raise Unsupported(f"{user_loc()}: input tensor {v.name!r}: {e}") from None
    v, copy = numpy_helper.to_array(v), False
  a = np.asarray(v)
  if a.dtype == object or a.dtype.kind in "USc": raise Unsupported(f"{user_loc()}: inputs of numpy dtype {a.dtype}")
  if a.dtype.name == "bfloat16" and onnx.TensorProto.BFLOAT16 not in DTYPES: raise Unsupported(f"{user_loc()}: bfloat16")
  return Tensor(np.array(a, order="C")) if copy else owned(a)   # ascontiguousarray would make a 0-d array 1-d

class Subgraph:
  """A graph attribute (If's branches, Loop's and Scan's body): called with its inputs, it runs in the scope of the
  node that holds it (names of the outer graph are visible) and returns its outputs."""
  def __init__(self, graph: onnx.GraphProto, opset: int, scope: dict, base: str | None):
    self.graph, self.opset, self.scope, self.base = graph, opset, scope, base
  def __call__(self, *inputs) -> list:
    vals = dict(self.scope)
    vals.update({i.name: to_tensor(v) for i, v in zip(self.graph.input, inputs)})
    return run_graph(self.graph, vals, self.opset, None, self.base)

def attrs_of(node: onnx.NodeProto, opset: int, scope: dict, base: str | None) -> dict:
  out = {}
  for a in node.attribute:
    if a.ref_attr_name: raise NotImplementedError("attribute references (functions)")
    if a.type == onnx.AttributeProto.GRAPH: out[a.name] = Subgraph(a.g, opset, scope, base)
    elif a.type == onnx.AttributeProto.TENSOR: out[a.name] = tensor_array(a.t, base)
    elif a.type == onnx.AttributeProto.STRING: out[a.name] = a.s.decode()
    elif a.type == onnx.AttributeProto.STRINGS: out[a.name] = [s.decode() for s in a.strings]
    else: out[a.name] = helper.get_attribute_value(a)
  return out

def op_key(node: onnx.NodeProto) -> str:
  """The op table's key: the op type, prefixed by its domain outside the default one."""
  return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}:{node.op_type}"

# graph attributes of control flow -> (inputs the body takes, outputs it gives), from the node's input and output counts
# (Loop: trip count, condition and N carried values in; condition, N carried and K scanned values out)
SUBGRAPHS = {"If": lambda n, o: {"then_branch": (0, len(n.output)), "else_branch": (0, len(n.output))},
             "Loop": lambda n, o: {"body": (len(n.input), 1 + len(n.output))},
             "Scan": lambda n, o: {"body": (len(n.input) - (o < 9), len(n.output))},   # Scan-8's first input is sequence_lens
             "SequenceMap": lambda n, o: {"body": (len(n.input), len(n.output))}}

class GraphCheck:
  """The whole model checked before anything runs, as onnxruntime checks it at load: every name made once and read
  after it is made, attributes of the op's schema, stored tensors whose dims match their data, control flow bodies with
  the inputs and outputs their node gives and takes, and the ops and attribute values this front end runs."""
  def __init__(self, model: onnx.ModelProto, opset: int, base: str | None):
    self.opset, self.base = opset, base
    self.domains = {("" if o.domain == "ai.onnx" else o.domain): o.version for o in model.opset_import}

  def graph(self, graph: onnx.GraphProto, outer: set):
    made: set = set()
    def make(name: str, what: str):
      if name in made: raise invalid(f"{what}: the name {name!r} is made twice in graph {graph.name!r}")
      made.add(name)
    for vi in graph.input: make(vi.name, f"graph input {vi.name!r}")
    inputs = set(made)
    for t in graph.initializer:
      check_tensor(t, f"initializer {t.name!r}", self.base)
      if t.name not in inputs: make(t.name, f"initializer {t.name!r}")   # IR < 4 lists initializers among the inputs too
    for node in graph.node:
      self.node(node, outer | made)
      for o in node.output:
        if o: make(o, where(node, self.opset))
    for o in graph.output:
      if o.name not in made | outer: raise invalid(f"graph output {o.name!r} is made by no node, input or initializer of graph {graph.name!r}")

  def node(self, node: onnx.NodeProto, known: set):
    w = where(node, self.opset)
    if op_key(node) not in OPS:
      what = f"operator {node.op_type}" + (f" of domain {node.domain!r}" if node.domain not in ("", "ai.onnx") else "")
      raise Unsupported(f"{user_loc()}: {w}: {what} is not supported")
    if missing := [i for i in node.input if i and i not in known]:
      raise invalid(f"{w}: input {missing[0]!r} is no graph input, initializer or output of an earlier node (a cycle or a missing value)")
    if (why := self.schema(node)): raise invalid(f"{w}: {why}")
    a = {x.name: x for x in node.attribute}
    vals = {k: (v.s.decode(errors="replace") if v.type == onnx.AttributeProto.STRING else helper.get_attribute_value(v)) for k, v in a.items()
            if v.type != onnx.AttributeProto.GRAPH}
    if (why := INVALID.get(op_key(node), lambda a, o: None)(vals, self.opset)): raise invalid(f"{w}: {why}")
    if (why := REFUSE.get(op_key(node), lambda a, o: None)(vals, self.opset)): raise Unsupported(f"{user_loc()}: {w}: {why}")
    shapes = SUBGRAPHS.get(op_key(node), lambda n, o: {})(node, self.opset)
    for x in a.values():
      if x.type == onnx.AttributeProto.GRAPH:
        if x.name in shapes and (len(x.g.input), len(x.g.output)) != shapes[x.name]:
          raise invalid(f"{w}: attribute {x.name!r} takes {len(x.g.input)} inputs and gives {len(x.g.output)} outputs, "
                        f"the node needs {shapes[x.name][0]} and {shapes[x.name][1]}")
        self.graph(x.g, known)
      if x.type == onnx.AttributeProto.TENSOR: check_tensor(x.t, f"{w}: attribute {x.name!r}", self.base)

  def schema(self, node: onnx.NodeProto) -> str | None:
    """What the op's schema refuses in the node's attributes: an unknown name, a wrong type, a required one missing."""
    try: sch = onnx.defs.get_schema(node.op_type, self.domains.get(node.domain or "", self.opset), "" if node.domain == "ai.onnx" else node.domain)
    except onnx.defs.SchemaError: return None
    for x in node.attribute:
      if x.ref_attr_name: continue
      if (s := sch.attributes.get(x.name)) is None:
        return f"attribute {x.name!r} is not one of {node.op_type}'s ({', '.join(sorted(sch.attributes))})"
      if x.type and x.type != int(s.type):
        return f"attribute {x.name!r} must be {s.type.name}, got {onnx.AttributeProto.AttributeType.Name(x.type)}"
    given = {x.name for x in node.attribute}
    return next((f"the required attribute {k!r} is missing" for k, s in sch.attributes.items() if s.required and k not in given), None)

def _skeleton(model: onnx.ModelProto) -> onnx.ModelProto:
  """The model without its large tensors' data: those initializers become typed graph inputs (shape inference needs
  their type and dims only), so checking a model never copies its weights."""
  sk = onnx.ModelProto(ir_version=model.ir_version, opset_import=model.opset_import, functions=model.functions)
  g, src = sk.graph, model.graph
  g.name = src.name
  for f in ("node", "input", "output", "value_info", "sparse_initializer"): getattr(g, f).extend(getattr(src, f))
  inputs = {vi.name for vi in src.input}
  for t in src.initializer:
    if t.data_location != onnx.TensorProto.EXTERNAL and numel(t) <= 1024: g.initializer.append(t)   # (dims checked against data)
    elif t.name not in inputs: g.input.append(helper.make_tensor_value_info(t.name, t.data_type, t.dims))
  return sk

def infer_check(model: onnx.ModelProto, opset: int) -> onnx.ModelProto | None:
  """onnx's shape inference in strict mode: the per-node checks onnxruntime makes at load (axes in range, input counts
  and types, shapes that agree, values read from constants). The model with the shapes it inferred (None: not known)."""
  skeleton = _skeleton(model)
  try: return onnx.shape_inference.infer_shapes(skeleton, check_type=True, strict_mode=True, data_prop=True)
  except Exception as e:
    msg = " ".join(str(e).split())
    # an error inside an op's function body is onnx's own expansion failing (MeanVarianceNormalization's), not the model
    if msg.count("Inference error(s)") > 1 and (m := re.search(r"\(op_type:(\w+)", msg)):
      try: sch = onnx.defs.get_schema(m.group(1))
      except onnx.defs.SchemaError: sch = None
      if sch is not None and (sch.has_function or sch.has_context_dependent_function):
        return onnx.shape_inference.infer_shapes(skeleton, data_prop=True)
    if m := re.search(r"\(op_type:(\w+), node name: (.*?)\): (.*)", msg): msg = f"node {m.group(2)!r} ({m.group(1)}, opset {opset}): {m.group(3)}"
    raise invalid(msg) from None

def _known(g: onnx.GraphProto, shapes: dict, consts: dict):
  """The shapes inference found (None for a dim it does not know) and the values of small constants, subgraphs included."""
  for v in (*g.input, *g.value_info, *g.output):
    if v.type.HasField("tensor_type") and v.type.tensor_type.HasField("shape"):
      shapes[v.name] = tuple(d.dim_value if d.HasField("dim_value") else None for d in v.type.tensor_type.shape.dim)
  small = [(t.name, t) for t in g.initializer if numel(t) <= 64]
  small += [(n.output[0], a.t) for n in g.node if n.op_type == "Constant" and n.output for a in n.attribute if a.name == "value" and numel(a.t) <= 64]
  for name, t in small: shapes[name], consts[name] = tuple(t.dims), numpy_helper.to_array(t).reshape(-1).tolist()
  for n in g.node:
    if n.op_type == "Constant" and n.output and (a := next((a for a in n.attribute if a.name in ("value_int", "value_ints")), None)):
      consts[n.output[0]] = np.asarray(helper.get_attribute_value(a)).reshape(-1).tolist()
    for a in n.attribute:
      if a.type == onnx.AttributeProto.GRAPH: _known(a.g, shapes, consts)

def check_values(inferred: onnx.ModelProto, opset: int):
  """What inference leaves to run time, checked at load where the ranks and constants it reads are known: axes in
  range and named once, Transpose's perm a permutation, constant Gather indices inside their dim."""
  shapes, consts = {}, {}
  _known(inferred.graph, shapes, consts)
  def walk(g: onnx.GraphProto):
    for node in g.node:
      if (why := _node_values(node, shapes, consts)): raise invalid(f"{where(node, opset)}: {why}")
      for a in node.attribute:
        if a.type == onnx.AttributeProto.GRAPH: walk(a.g)
  walk(inferred.graph)

def _node_values(node: onnx.NodeProto, shapes: dict, consts: dict) -> str | None:
  if not node.input or (shape := shapes.get(node.input[0])) is None: return None
  op, r, a = op_key(node), len(shape), {x.name: helper.get_attribute_value(x) for x in node.attribute}
  if op in AXIS_OPS:
    axes = [a[k] for k in ("axis", "batch_axis", "time_axis") if isinstance(a.get(k), int)] + list(a.get("axes", []))
    if (i := AXES_INPUT.get(op)) is not None and len(node.input) > i and node.input[i] in consts: axes += [int(v) for v in consts[node.input[i]]]
    lo, hi = AXIS_RANGE.get(op, lambda r, k: (-r, r - 1))(r, len(axes))
    if bad := [v for v in axes if not lo <= v <= hi]: return f"axis {bad[0]} is out of range ({lo}..{hi}) for input {node.input[0]!r} of {r} dims"
    if len(axes) > 1 and len({v % (hi + 1) for v in axes}) < len(axes): return f"axes {axes} name a dim twice"
  if op == "Transpose" and "perm" in a and sorted(a["perm"]) != list(range(r)): return f"perm {a['perm']} is not a permutation of {r} dims"
  if op == "TopK" and len(node.input) > 1 and (k := consts.get(node.input[1])) and k[0] < 0: return f"k={int(k[0])} is negative"
  if op == "Gather" and len(node.input) > 1 and (idx := consts.get(node.input[1])) and -r <= (ax := a.get("axis", 0)) < r:
    if (d := shape[ax]) is not None and (bad := [v for v in idx if not -d <= v < d]):
      return f"index {int(bad[0])} is out of range for dim {ax} of size {d} of input {node.input[0]!r}"
  return None

def parse(read, what: str) -> onnx.ModelProto:
  try: return read()
  except OSError: raise   # a path that cannot be read: the caller's, as open() names it
  except Exception as e: raise invalid(f"{what} is not an ONNX model: {type(e).__name__}: {e}") from None

def check_model(model: onnx.ModelProto, base: str | None) -> int:
  """The model's default-domain opset, once the whole model is checked (GraphCheck, then shape inference)."""
  if not model.ListFields(): raise invalid("the model is empty (an empty file or bytes, or no ONNX fields in them)")
  if not model.opset_import: raise invalid("the model imports no opset (opset_import is empty)")
  if model.ir_version < 3: raise invalid(f"IR version {model.ir_version} (an ONNX model has 3 or more)")
  if not model.HasField("graph"): raise invalid("the model has no graph")
  ops = [o.version for o in model.opset_import if o.domain in ("", "ai.onnx")]
  opset = ops[0] if ops else onnx.defs.onnx_opset_version()
  if not MIN_OPSET <= opset <= onnx.defs.onnx_opset_version():
    raise Unsupported(f"{user_loc()}: opset {opset} is not supported ({MIN_OPSET}..{onnx.defs.onnx_opset_version()})")
  GraphCheck(model, opset, base).graph(model.graph, set())
  for vi in [*model.graph.input, *model.graph.output]:
    if vi.type.HasField("tensor_type") and vi.type.tensor_type.elem_type:
      try: dtype_of(vi.type.tensor_type.elem_type)
      except NotImplementedError as e: raise Unsupported(f"{user_loc()}: graph input/output {vi.name!r}: {e}") from None
  if (inferred := infer_check(model, opset)) is not None: check_values(inferred, opset)
  return opset

def load(model, base_dir) -> tuple[onnx.ModelProto, str | None]:
  """The model and the folder its external data is read from: a path's own folder, else base_dir (None: none)."""
  base = None if base_dir is None else os.fspath(base_dir)
  if isinstance(model, (str, os.PathLike)):
    path = os.fspath(model)   # onnx.load: its formats by the file's extension (.onnx, .onnxtxt, .json, ...)
    m = parse(lambda: onnx.load(path, load_external_data=False), repr(path))
    return m, os.path.dirname(os.path.abspath(path)) if base is None else base
  if isinstance(model, (bytes, bytearray, memoryview)): return parse(lambda: onnx.load_from_string(bytes(model)), f"{len(model)} bytes"), base
  if isinstance(model, onnx.ModelProto): return model, base
  raise TypeError(f"OnnxModel takes a path, bytes or onnx.ModelProto, got {type(model).__name__}")

def _host_full(v: Tensor, a: dict) -> Tensor:
  """ConstantOfShape's output as a buffer filled on the host (no kernel to compile per shape)."""
  val = np.asarray(a.get("value", np.zeros(1, np.float32))).reshape(-1)
  return owned(np.full(v.shape, val[0], val.dtype))

# ops whose outputs differ between calls with equal inputs: never folded
NOT_FOLDED = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Bernoulli", "Multinomial", "Dropout"}

def run_graph(graph: onnx.GraphProto, vals: dict, opset: int, folded: dict | None = None, base: str | None = None) -> list:
  """Interpret the nodes in order (ONNX lists them topologically); vals holds the inputs and the outer scope.
  folded (the top graph's, when the call overrides no initializer): the values that depend on no graph input
  (initializers, and what nodes without subgraphs compute from them alone), made on the first call and reused by later
  ones, as onnxruntime folds constants. ConstantOfShape's output is realized there: a weight made by it is then a
  buffer, not a broadcast constant, so a conv or matmul on it runs as a packed contraction (its packed panels kept
  between calls) instead of a plain loop nest."""
  for init in graph.initializer:
    if init.name not in vals or vals[init.name] is None:
      vals[init.name] = folded[init.name] if folded is not None and init.name in folded else to_tensor(tensor_array(init, base), copy=False)
      if folded is not None: _fold(folded, (), init.name, vals[init.name])
  sibs, merged = siblings.groups(graph) if folded is not None else {}, set()
  for k, node in enumerate(progress(graph.node, f"onnx {graph.name or 'graph'}", "node")):
    if folded is not None and node.output and all(n in folded for n in node.output if n):
      for n in node.output:
        if n: vals[n] = _pend(folded[n])
      continue
    if k in merged: continue
    if k in sibs and (outs := _siblings([graph.node[i] for i in sibs[k]], vals, folded, opset, base)) is not None:
      vals.update(outs); merged.update(sibs[k])
      continue
    a, outs = run_node(node, vals, opset, base)
    for n, v in zip(node.output, outs):
      if n: vals[n] = v
    if (folded is not None and node.op_type not in NOT_FOLDED and all(n in folded for n in node.input if n)
        and not any(x.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for x in node.attribute)):
      for n, v in zip(node.output, outs):
        if n: vals[n] = _pend(_fold(folded, node.input, n, _host_full(v, a) if node.op_type == "ConstantOfShape" and isinstance(v, Tensor) else v))
  return [vals[o.name] for o in graph.output]

def _siblings(nodes: list, vals: dict, folded: dict, opset: int, base: str | None) -> dict | None:
  """The outputs of sibling Convs (siblings.groups) computed by one Conv over their weights concatenated (made once, kept
  with the folded values), or None where they do not merge (their weights are not all constants, or do not concatenate;
  one whose attributes or input do not fit then raises its own node's error when run alone)."""
  if nodes[0].input[0] in folded: return None
  wn = [n.input[1] for n in nodes]
  bn = [n.input[2] if len(n.input) > 2 and n.input[2] else None for n in nodes]
  if not all(n in folded for n in wn + [b for b in bn if b]): return None
  ws, bs = [folded[n] for n in wn], [folded[b] if b else None for b in bn]
  if not siblings.mergeable(ws, bs) or any(tuple(a.ints) != tuple(w.shape[2:]) for n, w in zip(nodes, ws) for a in n.attribute
                                           if a.name == "kernel_shape"): return None   # (one that does not fit raises alone)
  key = "\0siblings " + " ".join(wn)   # (a NUL: no model's value name)
  if key not in folded:
    _pend(_fold(folded, wn, key, ws[0].cat(*ws[1:], dim=0)))
    if any(b is not None for b in bs):
      full = [b if b is not None else Tensor.zeros(w.shape[0], dtype=w.dtype) for w, b in zip(ws, bs)]
      _pend(_fold(folded, wn + [b for b in bn if b], key + " bias", full[0].cat(*full[1:], dim=0)))
  ins = [vals[nodes[0].input[0]], folded[key]] + ([folded[key + " bias"]] if key + " bias" in folded else [])
  try: y = OPS[op_key(nodes[0])](ins, {**attrs_of(nodes[0], opset, vals, base), "_outputs": 1}, opset)
  except (InvalidModel, Unsupported, NotImplementedError, *VALUE_ERRORS): return None
  return {n.output[0]: part for n, part in zip(nodes, y.split([w.shape[0] for w in ws], dim=1)) if n.output and n.output[0]}

def _pend(v):
  """A folded value; one that computes (not a view of data) is realized once at the end of a recorded call (the
  model's _settle), as onnxruntime folds constants: replays then read it instead of computing it each call."""
  if (pending := getattr(ops.CALL, "pending", None)) is not None and type(v) is Tensor and v.uop.op is not Ops.BUFFER and ops.computed(v):
    pending.append((None, v))
  return v

class Scope(dict):
  """The folded values of one set of control inputs' values (see control_inputs): those computed from them (its own
  items, the control inputs' tensors among them) over the model's common ones (base: initializers and what they alone
  make), which every set shares."""
  def __init__(self, base: dict, own: dict): super().__init__(own); self.base = base
  def __contains__(self, n): return dict.__contains__(self, n) or n in self.base
  def __getitem__(self, n): return dict.__getitem__(self, n) if dict.__contains__(self, n) else self.base[n]

def _fold(folded: dict, ins, n: str, v):
  """Keep folded value v of name n (made from the names ins): in a Scope's own items when one of ins is, else common."""
  if type(folded) is Scope and not any(dict.__contains__(folded, i) for i in ins): folded = folded.base
  folded[n] = v
  return v

# inputs of the ops that read them on the host to decide what runs: If's condition, Loop's trip count and condition,
# RNNs' sequence lengths, and the shapes, axes, counts and bounds that decide an output's shape
HOST_DECIDES = {"If": (0,), "Loop": (0, 1), "RNN": (4,), "GRU": (4,), "LSTM": (4,), "Reshape": (1,), "Expand": (1,), "Tile": (1,),
                "ConstantOfShape": (0,), "Range": (0, 1, 2), "OneHot": (1,), "TopK": (1,), "Slice": (1, 2, 3, 4), "Pad": (1, 2, 3),
                "Squeeze": (1,), "Unsqueeze": (1,), "Split": (1,), "Resize": (1, 2, 3), "CumSum": (1,),
                **{k: (1,) for k in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                                     "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")}}

def control_inputs(graph: onnx.GraphProto) -> set:
  """The names from outside graph (its inputs, the outer scope) whose values decide, through any nodes, a branch
  or a trip count inside it (subgraphs included): a call keyed on their values is one straight graph."""
  made = {o: node for node in graph.node for o in node.output if o}
  todo = []
  for node in graph.node:
    todo += [node.input[k] for k in HOST_DECIDES.get(node.op_type, ()) if k < len(node.input)]
    for x in node.attribute:
      if x.type != onnx.AttributeProto.GRAPH: continue
      inner = control_inputs(x.g)
      formal = {i.name for i in x.g.input}
      todo += [*(inner - formal), *(node.input if inner & formal else ())]   # a body's own input: any of the node's
  seen, out = set(), set()
  while todo:
    if not (n := todo.pop()) or n in seen: continue
    seen.add(n)
    if (node := made.get(n)) is None: out.add(n)
    else: todo += [*node.input, *(n for x in node.attribute if x.type == onnx.AttributeProto.GRAPH for n in _outer_names(x.g))]
  return out

def _outer_names(g: onnx.GraphProto) -> set:
  """The names g's nodes (and their subgraphs') read from outside g."""
  own = {i.name for i in g.input} | {i.name for i in g.initializer} | {o for node in g.node for o in node.output}
  reads = {i for node in g.node for i in node.input if i} | {n for node in g.node for x in node.attribute
                                                              if x.type == onnx.AttributeProto.GRAPH for n in _outer_names(x.g)}
  return reads - own

# what an op raises on values it cannot take (a shape, an axis, an index read from a tensor): the node's error
VALUE_ERRORS = (ValueError, IndexError, KeyError, TypeError, ArithmeticError, StopIteration)

def run_node(node: onnx.NodeProto, vals: dict, opset: int, base: str | None) -> tuple[dict, tuple]:
  """One node's attributes and outputs (a tuple); an error names the node and the caller's line."""
  try:
    ins = [vals[n] if n else None for n in node.input]
    a = attrs_of(node, opset, vals, base)
    a["_outputs"] = len(node.output)   # Split and MaxPool make as many outputs as the node names
    outs = OPS[op_key(node)](ins, a, opset)
  except (InvalidModel, Unsupported): raise   # a subgraph's node, named already
  except NotImplementedError as e: raise Unsupported(f"{user_loc()}: {where(node, opset)}: {e}") from None
  except VALUE_ERRORS as e:
    loc, msg = user_loc(), str(e)
    if msg.startswith(loc + ": "): msg = msg[len(loc) + 2:]   # a Tensor method's error, at the same line
    if not isinstance(e, (ValueError, IndexError)) or not msg: msg = f"{type(e).__name__}: {msg}"   # a KeyError's message is the key
    raise InvalidModel(f"{loc}: {where(node, opset)}: {msg}") from e
  return a, (outs if isinstance(outs, tuple) else (outs,))   # a tuple is several outputs, a list one sequence

def _numpy(v):
  if isinstance(v, list): return [_numpy(x) for x in v]
  return None if v is None else v.numpy()

def _listed(outs) -> list: return [outs] if isinstance(outs, Tensor) else outs

def _handed(t) -> np.ndarray:
  """A replay's output as an array: the memory of a buffer the replay made for it and no one else holds (its only
  reference the output's UOp: a fresh output, or a fresh copy of an argument; a constant is held by the plan) becomes
  the array, as numpy() does for a temporary; any other output is copied."""
  if type(t) is not Tensor or (u := t.uop).op is not Ops.BUFFER or (b := u.buffer) is None or b.device != "CPU" or b.base is not None \
     or sys.getrefcount(b) != 3: return _numpy(t)
  a = b.as_numpy()
  a.flags.writeable = True
  return a.reshape(u.shape)

def _plain(plan) -> bool:
  """Whether a TinyJit plan's replays may read arguments from buffers rewritten between calls: its kernels all on the
  CPU keep nothing derived from an argument's buffer (no panels packed per argument), and no output is an argument."""
  try: return not plan.keyed and not plan.padded and all(e.device == "CPU" for e in plan.execs) and \
    all(src[0] != "arg" for src in plan.ret_src.values())
  except AttributeError: return False

class _Step:
  """One kernel of a direct replay: its program's argument set of the replay's own, pointers written once, and run. A
  phase that packs a constant (a weight's panels) reads the result call_buffers keeps for it: its first run is that
  call_buffers, which packs them; without such a result the kernel keeps running through call_buffers. A kernel split
  into chunks for threads may run them all on the calling thread instead (serial: decided by _Direct's first calls)."""
  __slots__ = ("prog", "args", "run", "runs", "bufs", "inputs", "serial", "times")
  def __init__(self, prog, bufs: list, inputs: list):
    self.prog, self.bufs, self.inputs, self.serial, self.times = prog, bufs, inputs, False, None
    self.prepare(first=True)
    if self.args is not None and any(len(packs) > 1 for _, packs in self.args.phases): self.times = ([], [])
  def prepare(self, first: bool = False):
    prog, bufs = self.prog, self.bufs
    if (p := prog.prepare(frozenset(i for i, u in enumerate(self.inputs) if u is not None), self.inputs)) is None:
      call = functools.partial(prog.call_buffers, bufs, self.inputs)
      def once(): call(); self.prepare()
      self.args, self.runs, self.run = None, None, once if first else call
      return
    (a := p[0]).ptrs[:len(bufs)] = [b.ptr for b in bufs]
    self.args, self.runs = a, (p[1], lambda: [fn(x) for fn, packs in a.phases for x in packs])   # (on threads, on this one)
    self.run = self.runs[self.serial]

class _Direct:
  """A plain plan (_plain) replayed on numpy arrays in and out: its kernels run on buffers of this object's own, each
  input copied in and each output copied out under the plan's lock, every pointer written once, so a call makes no
  Tensor, UOp or Buffer and costs its kernels' calls and the copies. None (make) for a plan with more than kernels
  (state, random numbers, symbolic sizes, copies between devices) or outputs other than computed or constant tensors.
  The first TUNE calls time each kernel split for threads both ways in turn, on the threads and all on the calling
  thread, and then each keeps the faster: a small kernel loses more to handing chunks to a thread than it gains (far
  more while other processes hold the cores)."""
  TUNE = 8
  @staticmethod
  def make(plan, names: list, inputs: dict):
    rets = [plan.ret] if type(plan.ret) is Tensor else plan.ret
    if plan.state or plan.rng or plan.vals or plan.checks or not all(hasattr(s, "prog") for s in plan.steps) or type(rets) is not list or \
       not all(type(t) is Tensor and plan.ret_src[id(t)][0] in ("out", "const") for t in rets): return None
    return _Direct(plan, names, inputs, rets)
  def __init__(self, plan, names: list, inputs: dict, rets: list):
    v, self.lock, self.n = plan.template.copy(), plan.lock, plan.nkernels
    for i, n in enumerate(names): v[i] = Buffer("CPU", inputs[n].size, DTYPES_NP[inputs[n].dtype]).allocate()
    for j, dev, size, dt, _ in plan.fresh: v[j] = Buffer(dev, size, dt).allocate()
    self.ins = [(n, v[i].as_numpy().reshape(inputs[n].shape)) for i, n in enumerate(names)]
    self.steps = [_Step(s.prog, [v[j] for j in s.slots], s.inputs) for s in plan.steps]
    self.tuning, self.timed = [k for k in self.steps if k.times is not None], 0
    def out(t: Tensor) -> np.ndarray:
      if (src := plan.ret_src[id(t)])[0] == "const": return src[1].buffer.as_numpy().reshape(src[1].shape)
      j, _, shape = plan.outs[src[1]]
      return v[j].as_numpy().reshape(shape)
    self.outs = [out(t) for t in rets]
  def __call__(self, inputs: dict) -> list[np.ndarray]:
    with self.lock:
      for n, a in self.ins: np.copyto(a, inputs[n])
      if self.tuning: self._timed()
      else:
        for k in self.steps:
          if k.args is not None and k.args.code is not k.prog.code: k.prepare()   # (the program moved onto its shared object)
          k.run()
      R.GlobalCounters.kernel_count += self.n
      return [o.copy() for o in self.outs]
  def _timed(self):
    for k in self.steps:
      if k.args is not None and k.args.code is not k.prog.code: k.prepare()
      if k.times is None or k.runs is None: k.run(); continue
      way = len(k.times[1]) < len(k.times[0])   # (in turn)
      t0 = time.perf_counter(); k.runs[way](); k.times[way].append(time.perf_counter() - t0)
    self.timed += 1
    if self.timed >= 2 * self.TUNE:
      for k in self.tuning:
        mid = [sorted(t)[len(t) // 2] if t else None for t in k.times]
        k.serial, k.times = None not in mid and mid[1] < mid[0], None
        if k.runs is not None: k.run = k.runs[k.serial]
      self.tuning = []

class OnnxModel:
  """OnnxModel(path | bytes | onnx.ModelProto); model(**inputs) or model(inputs) -> {output name: numpy array} (Tensors
  with as_numpy=False). Inputs are numpy arrays or Tensors by graph input name. The model is checked whole at load
  (InvalidModel for what ONNX does not allow, Unsupported for what this front end cannot run). External data is read
  from a path model's own folder when the graph first needs it, and from base_dir for a model given in memory (without
  base_dir such a model may hold no external data); load_external_data is onnx.load's flag, kept for its callers."""
  def __init__(self, model, load_external_data: bool = True, base_dir: str | os.PathLike | None = None):
    self.model, self.base = load(model, base_dir)
    self.graph = self.model.graph
    self.opset = check_model(self.model, self.base)
    inits = {i.name for i in self.graph.initializer}
    self.input_names = [i.name for i in self.graph.input if i.name not in inits]
    self._takes = set(self.input_names) | inits   # the names a call may give
    self.output_names = [o.name for o in self.graph.output]
    self._folded: dict = {}   # run_graph's values that depend on no graph input, realized on the first call
    self._consts: dict = {}   # values ops compute from constants alone (ops.hoisted): their graph -> the Tensor realized
    self._jits: dict = {}     # the inputs' names, shapes, dtypes and devices -> a TinyJit of the graph on them (see __call__)
    self._jit_lock = threading.Lock()
    self._control = control_inputs(self.graph) & set(self.input_names)
    self._values: dict = {}   # control input -> the values it keyed replays with (one that keeps changing stops keying)
    self._fast: dict = {}     # a call's arrays' names, shapes, dtypes (control values) -> (TinyJit, argument order, device, loc)

  def check_inputs(self, inputs: dict | None, kw: dict) -> dict:
    """The call's inputs as Tensors, checked against the graph as onnxruntime checks them: every name one of the graph's
    inputs (or initializers) and given once, none missing, dtype and shape as declared (never a silent cast)."""
    inputs = dict(inputs or {})
    if twice := sorted(set(inputs) & set(kw)): raise invalid(f"input {twice[0]!r} given twice (in the dict and as a keyword)")
    inputs.update(kw)
    if unknown := sorted(set(inputs) - self._takes): raise invalid(f"unknown input {unknown[0]!r}: the graph takes {', '.join(self.input_names)}")
    if missing := [n for n in self.input_names if n not in inputs]: raise invalid(f"missing inputs: {', '.join(missing)}")
    vals = {n: to_tensor(v) for n, v in inputs.items()}
    for vi in self.graph.input:
      if (v := vals.get(vi.name)) is None or not isinstance(v, Tensor) or not vi.type.HasField("tensor_type"): continue
      tt = vi.type.tensor_type
      if tt.elem_type and tt.elem_type in DTYPES and DTYPES[tt.elem_type] != v.dtype:
        raise invalid(f"input {vi.name!r} must be {DTYPES[tt.elem_type]}, got {v.dtype}", InvalidInputType)
      if tt.HasField("shape") and (len(tt.shape.dim) != v.ndim or any(d.HasField("dim_value") and d.dim_value != s
                                                                        for d, s in zip(tt.shape.dim, v.shape))):
        raise invalid(f"input {vi.name!r} must have shape {[d.dim_value if d.HasField('dim_value') else d.dim_param for d in tt.shape.dim]}"
                      f", got {v.shape}")
    return vals

  def __call__(self, inputs: dict | None = None, as_numpy: bool = True, **kw) -> dict:
    if not kw and type(inputs) is dict and (outs := self._replay(inputs, as_numpy)) is not None: return dict(zip(self.output_names, outs))
    vals = self.check_inputs(inputs, kw)
    inits = {i.name for i in self.graph.initializer}
    if inits & set(vals): outs = self._run(vals, None)
    elif not all(isinstance(v, Tensor) for v in vals.values()): outs = self._run(vals, self._folded)
    else:
      # A graph whose host reads (shapes, axes, counts, branches) see only constants, the inputs' shapes and the values
      # of its small integer control inputs (an If's condition made from one) is the same kernels for inputs of the same
      # shapes and control values: TinyJit replays them without interpreting the graph again, the control values folded
      # in as constants. One that reads other input data on the host (NonZero, a condition computed from a float
      # tensor) is never replayed (TinyJit sees the read) and runs normally.
      ctl = {n: v.numpy() for n, v in vals.items() if n in self._control and v.dtype in CONTROL_DTYPES and v.numel() <= CONTROL_NUMEL}
      for n, v in ctl.items():   # a counter (a step number) would make a replay per value: it becomes the call's data
        if len(seen := self._values.setdefault(n, set())) < CONTROL_VALUES: seen.add(v.tobytes())
        elif v.tobytes() not in seen: self._control, self._fast = self._control - {n}, {}
      ctl = {n: v for n, v in ctl.items() if n in self._control}
      names = sorted(n for n in vals if n not in ctl)
      key = tuple((n, vals[n].shape, vals[n].dtype, vals[n].device) for n in names) + tuple((n, ctl[n].tobytes()) for n in sorted(ctl))
      with self._jit_lock:
        if (jit := self._jits.get(key)) is None:
          if len(self._jits) >= self.MAX_JITS:
            del self._jits[next(iter(self._jits))]
            self._fast.clear()
          fixed = {n: vals[n] for n in ctl}
          scope = Scope(self._folded, fixed) if fixed else self._folded
          jit = self._jits[key] = TinyJit(lambda *ts: self._traced(dict(zip(names, ts)), fixed, scope))
      outs = _listed(jit(*[vals[n] for n in names]))
      if jit.plan is not None and not kw and type(inputs) is dict: self._remember(inputs, jit, names)
    return self._give(outs, as_numpy)

  def _give(self, outs: list, as_numpy: bool) -> dict:
    return dict(zip(self.output_names, [_numpy(o) for o in outs] if as_numpy else outs))

  def _fast_key(self, inputs: dict) -> tuple | None:
    """A call of numpy arrays (native byte order) and Tensors holding CPU data, by names, types, shapes, dtypes and
    control inputs' values; else None."""
    key = []
    for n, a in inputs.items():
      if type(a) is np.ndarray:
        if not a.dtype.isnative: return None
        key.append((n, a.shape, a.dtype, a.tobytes()) if n in self._control else (n, a.shape, a.dtype))
      elif type(a) is Tensor and (u := a.uop).op is Ops.BUFFER and (b := u.buffer) is not None and b.device == "CPU":
        key.append((n, Tensor, u.shape, u.dtype, b.as_numpy().tobytes()) if n in self._control else (n, Tensor, u.shape, u.dtype))
      else: return None
    return tuple(key)

  def _remember(self, inputs: dict, jit: TinyJit, names: list):
    """A call whose replay exists: later calls of inputs like its go straight to it (_replay)."""
    if (key := self._fast_key(inputs)) is None or key in self._fast: return
    dev, loc = Device.DEFAULT, user_loc()
    held = direct = None
    if dev == "CPU" and _plain(jit.plan):   # arrays copied into buffers of the replay's own, kept between calls
      own = lambda a: (a, Tensor._of(new_buffer(Buffer(dev, a.size, DTYPES_NP[a.dtype]).allocate(a.reshape(-1)), loc, shape=a.shape), dev))
      held = [own(np.empty(a.shape, a.dtype)) if type(a := inputs[n]) is np.ndarray else None for n in names]
      if all(type(inputs[n]) is np.ndarray for n in names): direct = _Direct.make(jit.plan, names, inputs)
    with self._jit_lock: self._fast[key] = (jit, names, dev, loc, held, threading.Lock(), direct)

  def _replay(self, inputs: dict, as_numpy: bool) -> list | None:
    """The outputs (arrays when as_numpy) of the replay of a call of inputs of names, shapes, dtypes and control values
    checked before (a _remember'ed call), none of the graph interpreted; None for any other call. A Tensor is the
    argument; an array is copied: into the replay's own buffer when its kernels keep nothing derived from an argument's
    contents (_plain), else a fresh one. Arrays in and out of a plain plan take its direct replay (_Direct)."""
    if not self._fast or (key := self._fast_key(inputs)) is None or (hit := self._fast.get(key)) is None: return None
    jit, names, dev, loc, held, lock, direct = hit
    if Device.DEFAULT != dev: return None
    if direct is not None and as_numpy and not R.DEBUG: return direct(inputs)
    if held is not None:
      with lock:   # (until the outputs, fresh buffers, are made: another thread's call then writes its arguments)
        for n, h in zip(names, held):
          if h is not None: np.copyto(h[0], inputs[n])
        outs = _listed(jit(*[inputs[n] if h is None else h[1] for n, h in zip(names, held)]))
    else:
      ts = []
      for n in names:
        if type(a := inputs[n]) is Tensor: ts.append(a); continue
        b = Buffer.fresh(dev, a.size, DTYPES_NP[a.dtype]).copyin(np.ascontiguousarray(a).reshape(-1))
        ts.append(Tensor._of(new_buffer(b, loc, shape=a.shape), dev))
      outs = _listed(jit(*ts))
    return [_handed(o) for o in outs] if as_numpy else outs

  MAX_JITS = 8   # input signatures replayed at once (each holds its intermediates' memory)
  def _traced(self, args: dict, fixed: dict, scope: dict) -> list:
    """_run of a recorded call: its ops see which values are the call's data (ops.CALL: an If on them is merged)."""
    ops.CALL.args, ops.CALL.consts, ops.CALL.pending = {id(u) for t in args.values() for u in t.uop.toposort}, self._consts, []
    try:
      outs = self._run({**args, **fixed}, scope)
      self._settle(ops.CALL.pending)
    finally: ops.CALL.args = ops.CALL.pending = None
    return outs[0] if len(outs) == 1 and isinstance(outs[0], Tensor) else outs   # (one Tensor: TinyJit's shortest replay)

  def _settle(self, pending: list):
    """The constants a recorded call computed (ops.hoisted's, and run_graph's folded values) realized together, outside
    the call's record: later calls read them as data (a replay computes none of them again)."""
    todo = {id(t): (u, t) for u, t in pending if t.uop.op is not Ops.BUFFER}
    if not todo: return
    for u, t in todo.values():   # those numpy computes as the kernels would, without compiling a kernel each (fold.py)
      if t.device == "CPU" and (v := fold.evaluate(t.uop)) is not None: t.uop = new_buffer(v, t.uop.loc)
    rec, log = R.capture.rec, guards.log
    R.capture.rec = guards.log = None
    try:
      if left := [t for _, t in todo.values() if t.uop.op is not Ops.BUFFER]: Tensor.realize(*left)
    finally: R.capture.rec, guards.log = rec, log
    for u, t in todo.values():
      if u is not None: self._consts[u] = t

  def _run(self, vals: dict, folded: dict | None) -> list:
    outs = run_graph(self.graph, vals, self.opset, folded, self.base)
    flat = [t for o in outs for t in (o if isinstance(o, list) else [o]) if isinstance(t, Tensor)]
    if flat: Tensor.realize(*flat)
    return outs
