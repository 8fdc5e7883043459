"""ONNX-bad-input: a corpus of hostile models, files and calls built here with onnx.helper. Each one must raise the
importer's InvalidModel (a ValueError; InvalidInputType also a TypeError) or, for a valid model it cannot run,
Unsupported (a NotImplementedError), naming the node at fault (name and op type) or the value, and the caller's line:
never an internal KeyError/IndexError/StopIteration/ZeroDivisionError, never a model accepted silently. `at` says
where it must fail: "load" (OnnxModel(...), before anything compiles) or "call" (values only a call sees)."""
import inspect, os, re
from dataclasses import dataclass, field
from typing import Callable
import numpy as np
import pytest
onnx = pytest.importorskip("onnx")
from onnx import helper as h, numpy_helper as nh, TensorProto as T
from morok_mlir.onnx import OnnxModel
from morok_mlir.onnx.model import InvalidModel, InvalidInputType, Unsupported

F, I64, B = T.FLOAT, T.INT64, T.BOOL
def vi(name, shape=None, dt=F): return h.make_tensor_value_info(name, dt, shape)
def node(op, ins, outs, name="bad", **attrs): return h.make_node(op, ins, outs, name=name, **attrs)
def model(nodes, ins, outs, inits=(), opset=17):
  return h.make_model(h.make_graph(nodes, "g", ins, outs, list(inits)), opset_imports=[h.make_opsetid("", opset)])
def const(name, v, dt=np.int64): return nh.from_array(np.asarray(v, dt), name)
def graph(nodes, ins, outs, name="body"): return h.make_graph(nodes, name, ins, outs)
X = {"x": np.zeros((2, 3), np.float32)}

@dataclass
class Case:
  id: str
  build: Callable   # tmp_path -> what OnnxModel takes (a ModelProto, bytes or a path)
  at: str = "load"
  names: tuple = ("bad",)   # words the message must hold (the node's name and op type, or the value's name)
  feed: dict = field(default_factory=lambda: dict(X))
  kw: dict = field(default_factory=dict)       # OnnxModel's keywords
  call_kw: dict | None = None                  # the call's keywords, beside the feed dict
  exc: type = InvalidModel

CASES: list[Case] = []
def case(id, m, at="load", names=("bad",), **kw):
  CASES.append(Case(id, m if callable(m) else (lambda tmp, m=m: m), at, names, **kw))
def one(op, inputs=(), shape=(2, 3), nout=1, opset=17, out_dt=F, **attrs):
  """op(x, *constants) -> y0.. on x of the declared shape (None: rank unknown); inputs are (name, value) or (name, value, dtype)."""
  names = ["x"] + [i[0] for i in inputs]
  inits = [const(i[0], i[1], *i[2:]) for i in inputs if i[0]]
  outs, dts = [f"y{k}" for k in range(nout)], out_dt if isinstance(out_dt, list) else [out_dt] * nout
  return model([node(op, names, outs, **attrs)], [vi("x", None if shape is None else list(shape))], [vi(o, None, d) for o, d in zip(outs, dts)],
               inits, opset)

# ---- files and bytes
_mlp = model([node("Relu", ["x"], ["y"], name="r")], [vi("x", [2, 3])], [vi("y")])
case("bytes-empty", b"", names=("empty",))
case("file-empty", lambda tmp: (tmp / "e.onnx").write_bytes(b"") and None or tmp / "e.onnx", names=("empty",))
case("bytes-garbage", b"\xff\xfe garbage \x00\x01 not a model", names=("not an ONNX model",))
case("bytes-random", np.random.default_rng(0).bytes(256), names=())
case("bytes-truncated", _mlp.SerializeToString()[:-7], names=())
case("file-text", lambda tmp: (tmp / "t.onnx").write_text("hello, world\n") and tmp / "t.onnx", names=())
case("no-opset", h.make_model(_mlp.graph, opset_imports=[]), names=("imports no opset",))
case("opset-99", model([node("Relu", ["x"], ["y"])], [vi("x", [2, 3])], [vi("y")], opset=99), names=("opset 99",), exc=Unsupported)
case("opset-5", model([node("Relu", ["x"], ["y"])], [vi("x", [2, 3])], [vi("y")], opset=5), names=("opset 5",), exc=Unsupported)
case("ir-version-0", onnx.ModelProto(graph=_mlp.graph, opset_import=_mlp.opset_import), names=("IR version 0",))
case("no-graph", onnx.ModelProto(ir_version=8, opset_import=_mlp.opset_import), names=("no graph",))

# ---- graph structure
case("cycle", model([node("Relu", ["b"], ["a"], name="n1"), node("Relu", ["a"], ["b"], name="n2")], [vi("x", [2])], [vi("b")]),
     names=("n1", "Relu", "'b'"))
case("dangling-input", model([node("Relu", ["zz"], ["y"])], [vi("x", [2])], [vi("y")]), names=("bad", "Relu", "'zz'"))
case("dup-output", model([node("Relu", ["x"], ["y"], name="a"), node("Neg", ["x"], ["y"])], [vi("x", [2])], [vi("y")]), names=("bad", "Neg", "'y'"))
case("dup-output-one-node", model([node("Split", ["x"], ["y", "y"], axis=0, num_outputs=2)], [vi("x", [2])], [vi("y")], opset=18),
     names=("bad", "Split"))
case("output-shadows-input", model([node("Relu", ["x"], ["x"])], [vi("x", [2])], [vi("x")]), names=("bad", "'x'"))
case("dup-graph-input", model([node("Relu", ["x"], ["y"])], [vi("x", [2]), vi("x", [2])], [vi("y")]), names=("'x'",))
case("dup-initializer", model([node("Add", ["x", "w"], ["y"])], [vi("x", [2])], [vi("y")], [const("w", [1., 2.], np.float32)] * 2),
     names=("'w'",))
case("output-never-made", model([node("Relu", ["x"], ["y"])], [vi("x", [2])], [vi("zz")]), names=("'zz'",))
case("missing-required-input", model([node("Add", ["x"], ["y"])], [vi("x", [2])], [vi("y")]), names=("bad", "Add"))
case("too-many-inputs", model([node("Relu", ["x", "x"], ["y"])], [vi("x", [2])], [vi("y")]), names=("bad", "Relu"))
case("unknown-op", model([node("FooBar", ["x"], ["y"])], [vi("x", [2])], [vi("y")]), names=("bad", "FooBar"), exc=Unsupported)
case("unknown-domain", model([h.make_node("Relu", ["x"], ["y"], name="bad", domain="com.example")], [vi("x", [2])], [vi("y")]),
     names=("bad", "com.example"), exc=Unsupported)
case("unknown-attribute", one("Relu", foo=1), names=("bad", "Relu", "'foo'"))
case("attr-type-float-axis", one("Softmax", axis=1.5), names=("bad", "Softmax", "'axis'"))
case("attr-type-perm-floats", one("Transpose", perm=[1.0, 0.0]), names=("bad", "Transpose", "'perm'"))
case("attr-type-string-alpha", one("LeakyRelu", alpha="big"), names=("bad", "LeakyRelu", "'alpha'"))
case("required-attr-missing", one("Concat"), names=("bad", "Concat", "'axis'"))
case("cast-without-to", one("Cast"), names=("bad", "Cast", "'to'"))
case("input-type-mismatch", model([node("Add", ["x", "i"], ["y"])], [vi("x", [2]), vi("i", [2], I64)], [vi("y")]), names=("bad", "Add"))
_then = graph([node("Identity", ["zz"], ["t"], name="inner")], [], [vi("t")])
case("subgraph-dangling", model([node("If", ["c"], ["y"], then_branch=_then, else_branch=_then)], [vi("c", [], B)], [vi("y")]),
     names=("inner", "Identity", "'zz'"))

# ---- the caller's inputs
case("call-unknown-input", one("Relu"), "call", names=("'nope'",), feed={**X, "nope": np.zeros(1, np.float32)})
case("call-input-twice", one("Relu"), "call", names=("'x'", "twice"), call_kw=dict(X))
case("call-missing-input", one("Relu"), "call", names=("missing inputs: x",), feed={})
case("call-wrong-dtype", one("Relu"), "call", names=("'x'", "float32"), feed={"x": np.zeros((2, 3))}, exc=InvalidInputType)
case("call-wrong-rank", one("Relu"), "call", names=("'x'", "(6,)"), feed={"x": np.zeros(6, np.float32)})
case("call-wrong-shape", one("Relu"), "call", names=("'x'", "(3, 2)"), feed={"x": np.zeros((3, 2), np.float32)})
case("call-strings", one("Relu"), "call", names=("numpy dtype",), feed={"x": np.array([["a"] * 3] * 2)}, exc=Unsupported)

# ---- an axis out of range, for every op that takes one (declared rank 2: at load; rank unknown: at the call)
_i0 = [("i", [0])]
AXIS_OPS = [("Softmax", {}, "axis"), ("LogSoftmax", {}, "axis"), ("Hardmax", {}, "axis"), ("Flatten", {}, "axis"),
            ("Concat", {"inputs": [("c", np.zeros((2, 3)), np.float32)]}, "axis"), ("Split", {"nout": 2, "num_outputs": 2, "opset": 18}, "axis"),
            ("Gather", {"inputs": _i0}, "axis"), ("GatherElements", {"inputs": [("i", np.zeros((2, 3)))]}, "axis"),
            ("ArgMax", {"out_dt": I64}, "axis"), ("ArgMin", {"out_dt": I64}, "axis"), ("LpNormalization", {}, "axis"),
            ("LayerNormalization", {"inputs": [("s", np.ones(3), np.float32)]}, "axis"), ("CumSum", {}, "input"),
            ("ReduceSum", {}, "input"), ("ReduceMean", {}, "axes"), ("ReduceMax", {}, "axes"), ("ReduceL2", {}, "axes"),
            ("Squeeze", {}, "input"), ("Unsqueeze", {}, "input"), ("Compress", {"inputs": [("c", [True, False], np.bool_)]}, "axis"),
            ("TopK", {"inputs": [("k", [1])], "nout": 2, "out_dt": [F, I64]}, "axis"),
            ("ScatterElements", {"inputs": [("i", np.zeros((2, 3))), ("u", np.zeros((2, 3)), np.float32)]}, "axis"),
            ("QuantizeLinear", {"inputs": [("s", np.ones(3), np.float32)], "out_dt": T.UINT8}, "axis"),
            ("Slice", {"inputs": [("st", [0]), ("en", [1])]}, "slice"), ("Pad", {"inputs": [("p", [0, 0]), ("", 0)], "opset": 18}, "pad"),
            ("MeanVarianceNormalization", {}, "axes"), ("Unique", {}, "axis"), ("Softmax", {"opset": 11}, "axis"),
            ("ReverseSequence", {"inputs": [("l", [1, 1])]}, "batch_axis")]
def axis_model(op, kw, how, ax, shape):
  kw = {**kw}
  inputs = list(kw.pop("inputs", []))
  attrs = {}
  if how in ("axis", "batch_axis"): attrs[how] = ax
  elif how == "axes": attrs["axes"] = [ax]
  elif how == "input": inputs.append(("ax", [ax] if op != "CumSum" else ax))
  elif how == "slice": inputs.append(("ax", [ax]))
  elif how == "pad": inputs.append(("ax", [ax]))
  return one(op, inputs, shape, **kw, **attrs)
for op, kw, how in AXIS_OPS:
  for ax in (5, -5):
    tag = f"{op}{'-' + str(kw['opset']) if 'opset' in kw else ''}"
    case(f"axis-{tag}-{ax}", axis_model(op, kw, how, ax if op != "Flatten" or ax > 0 else -4, (2, 3)), names=("bad", op))
  case(f"axis-{tag}-rank-unknown", axis_model(op, kw, how, 5, None), "call", names=("bad", op))

# ---- attribute values: permutations, sizes
case("perm-repeated", one("Transpose", perm=[0, 0]), names=("bad", "Transpose"))
case("perm-out-of-range", one("Transpose", perm=[0, 2]), names=("bad", "Transpose"))
case("perm-short", one("Transpose", perm=[1]), names=("bad", "Transpose"))
case("perm-short-rank-unknown", one("Transpose", shape=None, perm=[1]), "call", names=("bad", "Transpose"))
case("maxpool-kernel-0", one("MaxPool", shape=(1, 1, 4, 4), kernel_shape=[0, 0]), names=("bad", "MaxPool"))
case("maxpool-stride-0", one("MaxPool", shape=(1, 1, 4, 4), kernel_shape=[2, 2], strides=[0, 0]), names=("bad", "MaxPool"))
case("maxpool-stride-0-rank-unknown", one("MaxPool", shape=None, kernel_shape=[2, 2], strides=[0, 0]), "call", names=("bad", "MaxPool"),
     feed={"x": np.zeros((1, 1, 4, 4), np.float32)})
case("avgpool-kernel-negative", one("AveragePool", shape=(1, 1, 4, 4), kernel_shape=[-2, 2]), names=("bad", "AveragePool"))
case("conv-dilation-0", one("Conv", [("w", np.ones((1, 1, 2, 2)), np.float32)], shape=(1, 1, 4, 4), dilations=[0, 0]), names=("bad", "Conv"))
case("split-negative", one("Split", [("s", [-1, 3])], shape=(2,), nout=2), "call", names=("bad", "Split"), feed={"x": np.zeros(2, np.float32)})
case("split-sum", one("Split", [("s", [1, 5])], shape=(2,), nout=2), names=("bad", "Split"), feed={"x": np.zeros(2, np.float32)})
case("tile-negative", one("Tile", [("r", [-1, 1])]), names=("bad", "Tile"))
case("depth-to-space-0", one("DepthToSpace", shape=(1, 4, 2, 2), blocksize=0), names=("bad", "DepthToSpace"))
case("space-to-depth-0", one("SpaceToDepth", shape=(1, 1, 4, 4), blocksize=0), names=("bad", "SpaceToDepth"))
case("topk-k-negative", one("TopK", [("k", [-1])], nout=2, out_dt=[F, I64]), names=("bad", "TopK"))
case("topk-k-too-big", one("TopK", [("k", [7])], nout=2, out_dt=[F, I64]), names=("bad", "TopK"))
case("onehot-depth-negative", model([node("OneHot", ["i", "d", "v"], ["y"])], [vi("i", [2], I64)], [vi("y")],
                                    [const("d", [-3]), const("v", [0., 1.], np.float32)]), names=("bad", "OneHot"), feed={"i": np.zeros(2, np.int64)})
case("constant-of-shape-negative", model([node("ConstantOfShape", ["s"], ["y"])], [], [vi("y")], [const("s", [-2, 3])]), names=("bad",), feed={})
case("constant-of-shape-huge", model([node("ConstantOfShape", ["s"], ["y"])], [], [vi("y")], [const("s", [1 << 20] * 3)]), "call",
     names=("bad", "ConstantOfShape", "bytes"), feed={})
case("constant-two-values", one("Constant", value_float=1.0, value_int=2), names=("bad", "Constant"))

# ---- Reshape, Expand, Gather, Slice, Pad with bad values
case("reshape-two-minus-one", one("Reshape", [("s", [-1, -1])]), names=("bad", "Reshape"))
case("reshape-size", one("Reshape", [("s", [4, 4])]), "call", names=("bad", "Reshape"))
case("reshape-size-rank-unknown", one("Reshape", [("s", [4, 4])], shape=None), "call", names=("bad", "Reshape"))
case("reshape-minus-two", one("Reshape", [("s", [-2, 3])]), names=("bad", "Reshape"))
case("expand-incompatible", one("Expand", [("s", [4, 4])]), names=("bad", "Expand"))
case("expand-incompatible-rank-unknown", one("Expand", [("s", [4, 4])], shape=None), "call", names=("bad", "Expand"))
case("expand-negative", one("Expand", [("s", [-2, 3])], shape=None), "call", names=("bad", "Expand"))
case("gather-index-out-of-range", one("Gather", [("i", [7])], axis=1), names=("bad", "Gather"))
case("gather-elements-index-shape", one("GatherElements", [("i", np.zeros((2, 3, 1)))]), "call", names=("bad", "GatherElements"))
case("slice-step-0", one("Slice", [("st", [0]), ("en", [1]), ("ax", [0]), ("sp", [0])]), names=("bad", "Slice"))
case("slice-step-0-rank-unknown", one("Slice", [("st", [0]), ("en", [1]), ("ax", [0]), ("sp", [0])], shape=None), "call", names=("bad", "Slice"))
case("slice-lengths", one("Slice", [("st", [0, 0]), ("en", [1])]), names=("bad", "Slice"))
case("slice-lengths-rank-unknown", one("Slice", [("st", [0, 0]), ("en", [1])], shape=None), "call", names=("bad", "Slice"))
case("slice-axes-repeated", one("Slice", [("st", [0, 0]), ("en", [1, 1]), ("ax", [0, 0])]), names=("bad", "Slice"))
case("slice-axes-repeated-rank-unknown", one("Slice", [("st", [0, 0]), ("en", [1, 1]), ("ax", [0, 0])], shape=None), "call", names=("bad", "Slice"))
case("pad-length", one("Pad", [("p", [1, 1, 1])]), names=("bad", "Pad"))
case("pad-length-rank-unknown", one("Pad", [("p", [1, 1, 1])], shape=None), "call", names=("bad", "Pad"))
case("pad-cuts-too-much", one("Pad", [("p", [-3, 0, 0, 0])], shape=None), "call", names=("bad", "Pad"))
case("unsqueeze-repeated-rank-unknown", one("Unsqueeze", [("a", [0, 0])], shape=None), "call", names=("bad", "Unsqueeze"))
case("squeeze-not-one-rank-unknown", one("Squeeze", [("a", [1])], shape=None), "call", names=("bad", "Squeeze"))
case("concat-shapes", model([node("Concat", ["x", "c"], ["y"], axis=0)], [vi("x", [2, 3])], [vi("y")], [const("c", np.zeros((2, 4)), np.float32)]),
     names=("bad", "Concat"))
case("matmul-shapes", model([node("MatMul", ["x", "w"], ["y"])], [vi("x", [2, 3])], [vi("y")], [const("w", np.zeros((4, 2)), np.float32)]),
     names=("bad", "MatMul"))
case("matmul-shapes-rank-unknown", model([node("MatMul", ["x", "w"], ["y"])], [vi("x")], [vi("y")], [const("w", np.zeros((4, 2)), np.float32)]),
     "call", names=("bad", "MatMul"))
case("add-broadcast-rank-unknown", model([node("Add", ["x", "w"], ["y"])], [vi("x")], [vi("y")], [const("w", np.zeros((4,)), np.float32)]),
     "call", names=("bad", "Add"))

# ---- ops that read values from the data at run time: sequences, counts, ranks of inputs not declared
S = h.make_tensor_sequence_value_info
def seq_model(nodes, outs, inits=()): return model(nodes, [vi("x", [2, 3])], outs, inits)
_sc = node("SequenceConstruct", ["x", "x"], ["s"], name="sc")
case("sequence-at-out-of-range", seq_model([_sc, node("SequenceAt", ["s", "p"], ["y"])], [vi("y")], [const("p", 5)]), "call",
     names=("bad", "SequenceAt", "position 5"))
case("sequence-erase-out-of-range", seq_model([_sc, node("SequenceErase", ["s", "p"], ["y"])], [S("y", F, None)], [const("p", -3)]), "call",
     names=("bad", "SequenceErase", "position -3"))
case("sequence-insert-out-of-range", seq_model([_sc, node("SequenceInsert", ["s", "x", "p"], ["y"])], [S("y", F, None)], [const("p", 3)]), "call",
     names=("bad", "SequenceInsert", "position 3"))
case("concat-from-empty-sequence", seq_model([node("SequenceEmpty", [], ["s"], name="se"), node("ConcatFromSequence", ["s"], ["y"], axis=0)],
     [vi("y")]), "call", names=("bad", "ConcatFromSequence", "empty"))
case("optional-get-empty", seq_model([node("Optional", [], ["o"], name="op", type=h.make_tensor_type_proto(F, None)),
     node("OptionalGetElement", ["o"], ["y"])], [vi("y")]), "call", names=("bad", "OptionalGetElement"))
case("einsum-operands", one("Einsum", equation="ij,jk->ik"), names=("bad", "Einsum"))
for k, eq in enumerate(("i!j", "..ij", "i.j", "ij-", "....ij")):   # equations onnx's shape inference loops forever on
  case(f"einsum-garbage-{k}", one("Einsum", equation=eq), names=("bad", "Einsum", "equation"))
case("cumsum-axis-vector", one("CumSum", [("a", [0, 1])], shape=None), "call", names=("bad", "CumSum"))
case("compress-past-the-dim", one("Compress", [("c", [True] * 9, np.bool_)], shape=None, axis=1), "call", names=("bad", "Compress"))
case("depth-to-space-rank", one("DepthToSpace", shape=None, blocksize=2), "call", names=("bad", "DepthToSpace", "4 dims"))
case("depth-to-space-channels", one("DepthToSpace", shape=None, blocksize=2), "call", names=("bad", "DepthToSpace", "channels"),
     feed={"x": np.zeros((1, 3, 2, 2), np.float32)})
case("space-to-depth-indivisible", one("SpaceToDepth", shape=None, blocksize=2), "call", names=("bad", "SpaceToDepth", "divide"),
     feed={"x": np.zeros((1, 1, 3, 3), np.float32)})
case("conv-rank", one("Conv", [("w", np.ones((1, 2, 2, 2)), np.float32)], shape=None), "call", names=("bad", "Conv", "4 dims"))
case("maxpool-rank", one("MaxPool", shape=None, kernel_shape=[2, 2]), "call", names=("bad", "MaxPool", "4 dims"))
case("split-num-outputs-0", one("Split", shape=None, axis=0, num_outputs=0, opset=18), "call", names=("bad", "Split", "num_outputs"))
case("resize-negative-sizes", one("Resize", [("", 0), ("", 0), ("sz", [-1, 3])], shape=None), "call", names=("bad", "Resize"))
case("gemm-shapes", one("Gemm", [("w", np.zeros((4, 2)), np.float32)], shape=None), "call", names=("bad", "Gemm"))
case("where-broadcast", model([node("Where", ["c", "x", "w"], ["y"])], [vi("x")], [vi("y")],
     [const("c", [True, False, True, False], np.bool_), const("w", [1.], np.float32)]), "call", names=("bad", "Where"))
case("topk-k-too-big-rank-unknown", one("TopK", [("k", [9])], shape=None, nout=2, out_dt=[F, I64]), "call", names=("bad", "TopK"))

# ---- stored tensors
def tensor(name, dt, dims, **fields):
  t = onnx.TensorProto(name=name, data_type=dt, dims=dims)
  for k, v in fields.items(): getattr(t, k).extend(v) if isinstance(v, list) else setattr(t, k, v)
  return t
def with_init(t, op="Add"): return model([node(op, ["x", "w"], ["y"])], [vi("x", [2, 3])], [vi("y")], [t])
case("init-dims-negative", with_init(tensor("w", F, [-1, 3], raw_data=b"\0" * 12)), names=("'w'", "negative"))
case("init-raw-size", with_init(tensor("w", F, [2, 3], raw_data=b"\0" * 20)), names=("'w'", "20 bytes"))
case("init-typed-count", with_init(tensor("w", F, [2, 3], float_data=[1.0, 2.0])), names=("'w'", "2 values"))
case("init-huge-dims", with_init(tensor("w", F, [1 << 20] * 3)), names=("'w'",))
case("init-huge-dims-raw", with_init(tensor("w", F, [1 << 40, 1 << 40], raw_data=b"\0" * 8)), names=("'w'",))
case("init-int64-count", with_init(tensor("w", I64, [3], int64_data=[1, 2, 3, 4])), names=("'w'",))
case("init-undefined-dtype", with_init(tensor("w", T.UNDEFINED, [1], raw_data=b"\0" * 4)), names=("'w'",))
case("init-string", model([node("Identity", ["w"], ["y"])], [], [vi("y", None, T.STRING)], [h.make_tensor("w", T.STRING, [1], [b"a"])]),
     names=("'w'", "STRING"), exc=Unsupported)
case("init-complex", with_init(h.make_tensor("w", T.COMPLEX64, [1], [1 + 2j])), names=("'w'", "COMPLEX64"), exc=Unsupported)
case("init-float8", with_init(tensor("w", T.FLOAT8E4M3FN, [1], raw_data=b"\0")), names=("'w'",), exc=Unsupported)
case("constant-raw-size", model([node("Constant", [], ["y"], value=tensor("v", F, [4], raw_data=b"\0" * 3))], [], [vi("y")]),
     names=("bad", "Constant", "3 bytes"))
case("input-string-declared", model([node("Identity", ["x"], ["y"])], [vi("x", [1], T.STRING)], [vi("y", None, T.STRING)]),
     names=("'x'",), exc=Unsupported)

# ---- control flow
_t1 = graph([node("Identity", ["x"], ["t"], name="t")], [], [vi("t")])
_t2 = graph([node("Identity", ["x"], ["t"], name="t"), node("Neg", ["x"], ["u"], name="u")], [], [vi("t"), vi("u")])
def if_model(cond_shape, then=_t1, els=_t1, nout=1):
  outs = [f"y{k}" for k in range(nout)]
  return model([node("If", ["c"], outs, then_branch=then, else_branch=els)], [vi("c", cond_shape, B), vi("x", [2])], [vi(o) for o in outs])
_xc = {"x": np.zeros(2, np.float32)}
case("if-cond-two", if_model([2]), "call", names=("bad", "If", "condition"), feed={**_xc, "c": np.array([True, False])})
case("if-cond-empty", if_model([0]), "call", names=("bad", "If", "condition"), feed={**_xc, "c": np.zeros(0, bool)})
case("if-cond-rank-unknown", if_model(None), "call", names=("bad", "If", "condition"), feed={**_xc, "c": np.ones((2, 2), bool)})
case("if-branch-counts-differ", if_model([], _t2, _t1), names=("bad", "If"))
case("if-branches-vs-node", if_model([], _t2, _t2, nout=1), names=("bad", "If", "_branch' takes 0 inputs and gives 2 outputs"))
case("if-branch-with-input", if_model([], graph([node("Identity", ["a"], ["t"], name="t")], [vi("a")], [vi("t")]), _t1), names=("bad", "If"))
def loop_model(body, nout=1, cond=True, trip=3):
  return model([node("Loop", ["m", "c", "v"], [f"y{k}" for k in range(nout)], body=body)], [vi("v", [2])], [vi(f"y{k}") for k in range(nout)],
               [const("m", trip), const("c", cond, np.bool_)])
_body_ok_nodes = [node("Identity", ["cin"], ["cout"], name="bc"), node("Add", ["vin", "vin"], ["vout"], name="ba")]
_body_ins = [vi("i", [], I64), vi("cin", [], B), vi("vin", [2])]
case("loop-body-inputs", loop_model(graph(_body_ok_nodes, _body_ins[:2] + [vi("vin", [2]), vi("extra", [2])], [vi("cout", [], B), vi("vout", [2])])),
     names=("bad", "Loop", "body"))
case("loop-body-outputs", loop_model(graph(_body_ok_nodes, _body_ins, [vi("cout", [], B)])), names=("bad", "Loop", "body"))
case("loop-node-outputs", loop_model(graph(_body_ok_nodes, _body_ins, [vi("cout", [], B), vi("vout", [2])]), nout=2), names=("bad", "Loop"))
case("loop-no-end", model([node("Loop", ["", "", "v"], ["y"], body=graph(_body_ok_nodes, _body_ins, [vi("cout", [], B), vi("vout", [2])]))],
                          [vi("v", [2])], [vi("y")]), "call", names=("bad", "Loop"), feed={"v": np.zeros(2, np.float32)}, exc=Unsupported)
_scan_body = graph([node("Add", ["s", "e"], ["s2"], name="sa"), node("Identity", ["e"], ["o"], name="si")],
                   [vi("s", [2]), vi("e", [2])], [vi("s2", [2]), vi("o", [2])])
def scan_model(len_a, len_b, body=_scan_body, declared=True):
  ins = [vi("s0", [2]), vi("a", [len_a, 2] if declared else None), vi("b", [len_b, 2] if declared else None)]
  body2 = graph([node("Add", ["s", "e"], ["t"], name="sa"), node("Add", ["t", "f"], ["s2"], name="sb"), node("Identity", ["e"], ["o"], name="si")],
                [vi("s", [2]), vi("e", [2]), vi("f", [2])], [vi("s2", [2]), vi("o", [2])]) if body is None else body
  return model([node("Scan", ["s0", "a", "b"], ["sf", "ys"], body=body2, num_scan_inputs=2)], ins, [vi("sf"), vi("ys")], opset=16)
_scan_feed = {"s0": np.zeros(2, np.float32), "a": np.zeros((3, 2), np.float32), "b": np.zeros((5, 2), np.float32)}
case("scan-lengths-3-5", scan_model(3, 5, None, declared=False), "call", names=("bad", "Scan", "[3, 5]"), feed=_scan_feed)
case("scan-body-inputs", scan_model(3, 3, _scan_body), names=("bad", "Scan", "body"), feed=_scan_feed)
case("scan-body-outputs", model([node("Scan", ["s0", "a"], ["sf", "ys"], body=graph([node("Add", ["s", "e"], ["s2"], name="sa")],
     [vi("s", [2]), vi("e", [2])], [vi("s2", [2])]), num_scan_inputs=1)], [vi("s0", [2]), vi("a", [3, 2])], [vi("sf"), vi("ys")], opset=16),
     names=("bad", "Scan", "body"))

# ---- Range
def range_model(s, l, d, dt=np.int64):
  inits = [const(n, v, dt) for n, v in zip("sld", (s, l, d))]
  return model([node("Range", ["s", "l", "d"], ["y"])], [], [vi("y", None, I64 if dt == np.int64 else F)], inits)
case("range-delta-0", range_model(0, 10, 0), "call", names=("bad", "Range", "delta 0"), feed={})
case("range-delta-0-float", range_model(0.0, 1.0, 0.0, np.float32), "call", names=("bad", "Range", "delta 0"), feed={})
case("range-nan", range_model(0.0, np.nan, 1.0, np.float32), "call", names=("bad", "Range"), feed={})
case("range-huge", range_model(0, 1 << 62, 1), "call", names=("bad", "Range", "bytes"), feed={})
case("range-huge-float", range_model(0.0, 1e30, 1.0, np.float32), "call", names=("bad", "Range", "bytes"), feed={})

# ---- external data
def ext_model(tmp, loc, info=None, data=b"\0" * 24, dims=(2, 3), save=True):
  (tmp / "model").mkdir(exist_ok=True)
  (tmp / "model" / "w.bin").write_bytes(data)
  t = onnx.TensorProto(name="w", data_type=F, dims=list(dims), data_location=T.EXTERNAL)
  for k, v in {"location": loc, **(info or {})}.items(): t.external_data.add(key=k, value=str(v))
  m = with_init(t)
  if not save: return m
  (p := tmp / "model" / "m.onnx").write_bytes(m.SerializeToString())
  return p
case("ext-bytes-no-base", lambda tmp: ext_model(tmp, "w.bin", save=False).SerializeToString(), names=("'w'", "base_dir"))
case("ext-proto-no-base", lambda tmp: ext_model(tmp, "w.bin", save=False), names=("'w'", "base_dir"))
case("ext-absolute", lambda tmp: ext_model(tmp, str(tmp / "model" / "w.bin")), names=("'w'", "relative"))
case("ext-dotdot", lambda tmp: ext_model(tmp, "../model/w.bin"), names=("'w'", "relative"))
case("ext-missing-file", lambda tmp: ext_model(tmp, "nope.bin"), names=("'w'", "nope.bin"))
case("ext-offset-past-end", lambda tmp: ext_model(tmp, "w.bin", {"offset": 100}), names=("'w'", "outside"))
case("ext-length-past-end", lambda tmp: ext_model(tmp, "w.bin", {"offset": 8, "length": 24}), names=("'w'", "outside"))
case("ext-length-vs-dims", lambda tmp: ext_model(tmp, "w.bin", {"length": 16}), names=("'w'", "16 bytes"))
case("ext-file-vs-dims", lambda tmp: ext_model(tmp, "w.bin", data=b"\0" * 28), names=("'w'", "28 bytes"))
case("ext-offset-negative", lambda tmp: ext_model(tmp, "w.bin", {"offset": -4}), names=("'w'",))
case("ext-offset-not-int", lambda tmp: ext_model(tmp, "w.bin", {"offset": "x"}), names=("'w'",))
case("ext-huge-dims", lambda tmp: ext_model(tmp, "w.bin", dims=(1 << 30, 1 << 30)), names=("'w'",))
def _escaping_link(tmp):
  (tmp / "secret.bin").write_bytes(b"\1" * 24)
  p = ext_model(tmp, "link.bin")
  os.symlink(tmp / "secret.bin", tmp / "model" / "link.bin")
  return p
case("ext-symlink-out", _escaping_link, names=("'w'", "out of"))

@pytest.mark.parametrize("c", CASES, ids=[c.id for c in CASES])
def test_hostile(c, tmp_path):
  src = c.build(tmp_path)
  line = inspect.currentframe().f_lineno + 3
  with pytest.raises((InvalidModel, Unsupported)) as e:
    if c.at == "load":
      OnnxModel(src, **c.kw)
    m = OnnxModel(src, **c.kw)   # a model that fails only on a call loads
    m(c.feed, **(c.call_kw or {}))
  msg = str(e.value)
  assert isinstance(e.value, c.exc), f"{type(e.value).__name__}: {msg}"
  loc = re.match(r"(.*):(\d+):\d+: ", msg)
  want = line if c.at == "load" else line + 2
  assert loc and os.path.samefile(loc.group(1), __file__) and int(loc.group(2)) == want, f"not at the caller's line {want}: {msg}"
  for n in c.names: assert n in msg, f"{n!r} not in: {msg}"

def test_corpus_covers_the_classes():
  """The corpus stays large and mostly fails at load (before any kernel compiles)."""
  assert len(CASES) >= 150 and sum(c.at == "load" for c in CASES) >= len(CASES) // 2
