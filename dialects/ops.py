"""The `uop` op set as one declarative table: everything else (IRDL, builders, docs, verifier) derives from it.

Operand/result signature mini-language, one entry per name:
  `x:T`      a value whose type is the constraint variable T (every use of T must be the same type, as in IRDL)
  `x:tensor` any tensor (fresh constraint each time: `tensor` never unifies)
  `x:memref` / `x:index` / `x:i1` / `x:token` / `x:ptr<T>`  (ptr's element is bound to T)
  `x:T*`     variadic, `x:T?` optional
Attributes: name -> kind, one of str, int, ints (dense i64 array), type, sym (symbol ref), value (any typed attr).
"""
from __future__ import annotations
import re
from dataclasses import dataclass, field

@dataclass(frozen=True)
class OpDef:
  name: str
  level: str            # "graph" or "kernel"
  operands: str
  results: str
  attrs: dict = field(default_factory=dict)
  doc: str = ""
  example: str = ""
  example_args: tuple = ()  # argument types of the example's function after its operands' (a buffer's slot names one)

_T = "a:T, b:T"
BINARY = {"add": "a + b", "mul": "a * b", "sub": "a - b", "idiv": "integer division, truncating toward zero",
          "fdiv": "float division", "mod": "remainder with the sign of a (C semantics; truncating)", "pow": "a ** b",
          "max": "maximum (NaN propagates)", "min": "minimum (NaN propagates)", "and": "bitwise/logical and",
          "or": "bitwise/logical or", "xor": "bitwise/logical xor", "shl": "a << b", "shr": "a >> b (arithmetic for signed)"}
COMPARE = {"cmplt": "a < b", "cmpne": "a != b (true for NaN)", "cmpeq": "a == b"}
UNARY = {"neg": "-a", "exp2": "2 ** a", "log2": "log2(a)", "sin": "sin(a)", "sqrt": "sqrt(a)", "recip": "1 / a",
         "trunc": "round toward zero (floats)"}
MOVEMENT = ("reshape", "permute", "expand", "pad", "shrink", "flip")
# traits (IRDL ops carry none, so our passes read them here)
COMMUTATIVE = frozenset(("add", "mul", "and", "or", "xor", "max", "min", "cmpne", "cmpeq"))   # operands match in either order
SIDE_EFFECTS = frozenset(("store", "sink", "group", "end", "kernel", "assign", "barrier", "if", "endif", "copy"))   # never dead, never merged
# the start value of each reduce op, a Python value of the dtype's kind (bool, float or int)
REDUCE_IDENTITY = {"add": lambda dt: False if dt.is_bool else 0.0 if dt.is_float else 0,
                   "mul": lambda dt: True if dt.is_bool else 1.0 if dt.is_float else 1,
                   "max": lambda dt: dt.min, "min": lambda dt: dt.max}
GRAPH_ALU = tuple(BINARY) + tuple(COMPARE) + tuple(UNARY) + ("where", "mulacc", "cast", "bitcast")

def _t(shape="4", dt="f32"): return f"tensor<{shape}x{dt}>"

_ops: list[OpDef] = [
  OpDef("buffer", "graph", "", "r:any", {"slot": "int"},
        "An input buffer of the graph, numbered by slot (graph functions usually take inputs as arguments instead).",
        f'%0 = "uop.buffer"() {{slot = 0 : i64}} : () -> {_t()}', (_t(),)),
  OpDef("const", "graph", "", "r:T", {"value": "value"},
        "A constant. With a tensor result the scalar `value` is splat to the whole shape.",
        f'%0 = "uop.const"() {{value = 1.0 : f32}} : () -> {_t()}'),
  *[OpDef(n, "graph", _T, "r:T", {}, f"Elementwise {d}; operands and result share one type (tensor or scalar).",
          f'%2 = "uop.{n}"(%0, %1) : ({_t()}, {_t()}) -> {_t()}') for n, d in BINARY.items()],
  *[OpDef(n, "graph", _T, "r:U", {}, f"Elementwise comparison {d}; the result has the operands' shape and dtype i1.",
          f'%2 = "uop.{n}"(%0, %1) : ({_t()}, {_t()}) -> {_t(dt="i1")}') for n, d in COMPARE.items()],
  *[OpDef(n, "graph", "a:T", "r:T", {}, f"Elementwise {d}.", f'%1 = "uop.{n}"(%0) : ({_t()}) -> {_t()}') for n, d in UNARY.items()],
  OpDef("where", "graph", "c:U, a:T, b:T", "r:T", {}, "Select: c ? a : b; c has the result's shape and dtype i1.",
        f'%3 = "uop.where"(%0, %1, %2) : ({_t(dt="i1")}, {_t()}, {_t()}) -> {_t()}'),
  OpDef("mulacc", "graph", "a:T, b:T, c:T", "r:T", {}, "Fused a * b + c.",
        f'%3 = "uop.mulacc"(%0, %1, %2) : ({_t()}, {_t()}, {_t()}) -> {_t()}'),
  OpDef("cast", "graph", "a:T", "r:U", {}, "Value conversion to the result's dtype (same shape).",
        f'%1 = "uop.cast"(%0) : ({_t()}) -> {_t(dt="i32")}'),
  OpDef("bitcast", "graph", "a:T", "r:U", {}, "Reinterpret the bits as the result's dtype (same shape, same item size).",
        f'%1 = "uop.bitcast"(%0) : ({_t()}) -> {_t(dt="i32")}'),
  OpDef("reshape", "graph", "a:tensor, dims:index*", "r:tensor", {},
        "Same elements, new shape (the result type); element count is kept. `dims`: the result's `?` dims, in order.",
        f'%1 = "uop.reshape"(%0) : ({_t("2x3")}) -> {_t("6")}'),
  OpDef("permute", "graph", "a:tensor", "r:tensor", {"order": "ints"}, "Axis permutation: result dim i is input dim order[i].",
        f'%1 = "uop.permute"(%0) {{order = array<i64: 1, 0>}} : ({_t("2x3")}) -> {_t("3x2")}'),
  OpDef("expand", "graph", "a:tensor, dims:index*", "r:tensor", {},
        "Broadcast size-1 dims to the result shape (same rank). `dims`: the result's `?` dims, in order.",
        f'%1 = "uop.expand"(%0) : ({_t("1x3")}) -> {_t("4x3")}'),
  OpDef("pad", "graph", "a:tensor, dims:index*", "r:tensor", {"padding": "ints"},
        "Zero padding; `padding` holds (before, after) per dim, flattened; `dims` the values of its symbolic (INT64_MIN) entries.",
        f'%1 = "uop.pad"(%0) {{padding = array<i64: 1, 2>}} : ({_t()}) -> {_t("7")}'),
  OpDef("shrink", "graph", "a:tensor, dims:index*", "r:tensor", {"bounds": "ints"},
        "Slice; `bounds` holds (start, end) per dim, flattened; `dims` the values of its symbolic (INT64_MIN) entries.",
        f'%1 = "uop.shrink"(%0) {{bounds = array<i64: 1, 3>}} : ({_t()}) -> {_t("2")}'),
  OpDef("flip", "graph", "a:tensor", "r:tensor", {"axes": "ints"}, "Reverse the listed axes.",
        f'%1 = "uop.flip"(%0) {{axes = array<i64: 0>}} : ({_t()}) -> {_t()}'),
  OpDef("gather", "graph", "a:tensor, idx:tensor", "r:tensor", {"axis": "int"},
        "r[i] = a[i with dim `axis` replaced by idx[i]]: idx has the result's shape and an integer element type, a's rank, and no "
        "dim larger than a's but `axis`. Each element reads through an index loaded from idx (O(result) reads); an index outside "
        "[0, a.shape[axis]) gives 0 (the load is gated: nothing outside the buffer is read).",
        f'%2 = "uop.gather"(%0, %1) {{axis = 0 : i64}} : ({_t("5x3")}, {_t("2x3", "i32")}) -> {_t("2x3")}'),
  OpDef("scatter", "graph", "a:T, idx:tensor, src:tensor", "r:T", {"axis": "int", "op": "str"},
        "a with, for every position i of idx, r[i with dim `axis` replaced by idx[i]] = src[i] (op `store`), or combined with it "
        "by op add|mul|max|min. idx and src share a shape of a's rank, no dim larger than a's but `axis`; idx has an integer "
        "element type, src a's. Positions are visited in row-major order of idx, so with duplicate indices the last store "
        "wins and a combining op folds every one in. An index outside [0, a.shape[axis]) writes nothing. O(a + idx) work.",
        f'%3 = "uop.scatter"(%0, %1, %2) {{axis = 0 : i64, op = "add"}} : ({_t("5x3")}, {_t("2x3", "i32")}, {_t("2x3")}) -> {_t("5x3")}'),
  OpDef("reduce_axis", "graph", "a:tensor", "r:tensor", {"op": "str", "axes": "ints"},
        "Reduce `axes` with op add|mul|max|min; reduced dims stay with size 1 (keepdim).",
        f'%1 = "uop.reduce_axis"(%0) {{op = "add", axes = array<i64: 1>}} : ({_t("2x3")}) -> {_t("2x1")}'),
  OpDef("contiguous", "graph", "a:T", "r:T", {}, "Force materialisation of the value into a buffer.",
        f'%1 = "uop.contiguous"(%0) : ({_t()}) -> {_t()}'),
  OpDef("copy", "graph", "a:T", "r:T", {"device": "str"}, "Copy the value to `device`.",
        f'%1 = "uop.copy"(%0) {{device = "CPU"}} : ({_t()}) -> {_t()}'),
  OpDef("multi", "graph", "srcs:tensor*", "r:tensor", {"axis": "int", "devices": "str"},
        "One value held by several devices, srcs[i] by device i of the comma-separated `devices`: split along `axis` (the value "
        "is the sources' concatenation), or, with axis = -1, replicated (each source the whole value). Graph ops on it are logical; morok_mlir/core/multi.py turns them "
        "into per-device ops before the graph is emitted.",
        f'%2 = "uop.multi"(%0, %1) {{axis = 0 : i64, devices = "CPU,CPU:1"}} : ({_t("2x3")}, {_t("2x3")}) -> {_t("4x3")}'),
  OpDef("allreduce", "graph", "srcs:T*", "r:T", {"device": "str", "devices": "str", "op": "str"},
        "The elementwise add|max of srcs, srcs[i] held by device i of the comma-separated `devices`, as a value on `device`. "
        "uop-allreduce lowers it to copies and adds.",
        f'%2 = "uop.allreduce"(%0, %1) {{device = "CPU:1", devices = "CPU,CPU:1", op = "add"}} : ({_t()}, {_t()}) -> {_t()}'),
  OpDef("assign", "graph", "target:T, value:T", "r:T", {}, "Write value into target's buffer; the result is target after the write.",
        f'%2 = "uop.assign"(%0, %1) : ({_t()}, {_t()}) -> {_t()}'),
  OpDef("detach", "graph", "a:T", "r:T", {}, "Identity that stops gradients.", f'%1 = "uop.detach"(%0) : ({_t()}) -> {_t()}'),
  OpDef("define_var", "graph", "", "r:index", {"name": "str", "min": "int", "max": "int"},
        "A symbolic size in [min, max]; uop-rangeify reads its value from the int64 buffer of the variables' values.",
        '%0 = "uop.define_var"() {name = "n", min = 1 : i64, max = 64 : i64} : () -> index'),
  OpDef("bind", "graph", "var:index, value:index", "r:index", {}, "Bind a define_var to a concrete value.",
        '%2 = "uop.bind"(%0, %1) : (index, index) -> index'),
  OpDef("threefry", "graph", _T, "r:T", {}, "Threefry2x32 random bits of (x, key), on uint64.",
        f'%2 = "uop.threefry"(%0, %1) : ({_t(dt="ui64")}, {_t(dt="ui64")}) -> {_t(dt="ui64")}'),
  OpDef("sink", "kernel", "srcs:token*", "", {}, "Roots of a kernel or a schedule: everything that must happen.",
        '"uop.sink"(%0, %1) : (!uop.token, !uop.token) -> ()'),
  # --- kernel level (after rangeify)
  OpDef("range", "kernel", "end:index", "r:index", {"axis": "int", "kind": "str"},
        "A loop counter over [0, end); kind is loop|reduce|serial|global|local (a serial loop runs in order on one thread: its "
        "iterations may write the same element). Closed by reduce or end.",
        '%1 = "uop.range"(%0) {axis = 0 : i64, kind = "loop"} : (index) -> index'),
  OpDef("index", "kernel", "buf:memref, idx:index, gate:i1?", "r:ptr<T>", {},
        "Address of element idx of a flat buffer; with a gate, loads through it yield 0 where the gate is false.",
        '%2 = "uop.index"(%0, %1) : (memref<16xf32>, index) -> !uop.ptr<f32>'),
  OpDef("load", "kernel", "p:ptr<T>", "r:T", {}, "Load through an index (0 where its gate is false).",
        '%1 = "uop.load"(%0) : (!uop.ptr<f32>) -> f32'),
  OpDef("store", "kernel", "p:ptr<T>, v:T", "r:token", {}, "Store a value through an index.",
        '%2 = "uop.store"(%0, %1) : (!uop.ptr<f32>, f32) -> !uop.token'),
  OpDef("reduce", "kernel", "src:T, ranges:index*", "r:T", {"op": "str"},
        "Accumulate src over the given ranges with op add|mul|max|min, closing them.",
        '%2 = "uop.reduce"(%0, %1) {op = "add"} : (f32, index) -> f32'),
  OpDef("group", "kernel", "srcs:token*", "r:token", {}, "Several effects as one: the stores of one loop nest (a kernel with several outputs).",
        '%2 = "uop.group"(%0, %1) : (!uop.token, !uop.token) -> !uop.token'),
  OpDef("end", "kernel", "src:token, ranges:index*", "r:token", {}, "Close loop ranges after a store.",
        '%2 = "uop.end"(%0, %1) : (!uop.token, index) -> !uop.token'),
  OpDef("bufferize", "kernel", "src:T, ranges:index*", "r:memref", {},
        "Materialise src, computed over the ranges, into a new flat buffer (row-major in the ranges' order).",
        '%2 = "uop.bufferize"(%0, %1) : (f32, index) -> memref<16xf32>'),
  OpDef("after", "kernel", "buf:memref, deps:token*", "r:memref", {}, "A buffer, once the given stores/kernels are done.",
        '%2 = "uop.after"(%0, %1) : (memref<16xf32>, !uop.token) -> memref<16xf32>'),
  OpDef("kernel", "kernel", "deps:token*", "r:token", {"callee": "sym", "slots": "ints"},
        "Run kernel function `callee` on the schedule's buffers `slots` after its dependencies.",
        '%1 = "uop.kernel"(%0) {callee = @k1, slots = array<i64: 2, 0>} : (!uop.token) -> !uop.token'),
  OpDef("special", "kernel", "", "r:index", {"dim": "str", "size": "int"},
        "A GPU thread/block id (gidx0, lidx1, ...) in [0, size).",
        '%0 = "uop.special"() {dim = "gidx0", size = 256 : i64} : () -> index'),
  OpDef("vectorize", "kernel", "srcs:T*", "r:U", {}, "Pack scalars into a vector.",
        '%2 = "uop.vectorize"(%0, %1) : (f32, f32) -> vector<2xf32>'),
  OpDef("gep", "kernel", "src:T", "r:U", {"idx": "ints"}, "Extract lanes of a vector.",
        '%1 = "uop.gep"(%0) {idx = array<i64: 1>} : (vector<2xf32>) -> f32'),
  OpDef("wmma", "kernel", "a:T, b:U, c:V", "r:V", {"dims": "ints"}, "Tensor-core matrix multiply-accumulate of an (M, N, K) tile.",
        '%3 = "uop.wmma"(%0, %1, %2) {dims = array<i64: 16, 8, 16>} : (vector<8xf16>, vector<4xf16>, vector<4xf32>) -> vector<4xf32>'),
  OpDef("if", "kernel", "cond:i1", "r:token", {}, "Start of a block executed only where cond holds.",
        '%1 = "uop.if"(%0) : (i1) -> !uop.token'),
  OpDef("endif", "kernel", "src:token", "r:token", {}, "End of an if block.", '%1 = "uop.endif"(%0) : (!uop.token) -> !uop.token'),
  OpDef("barrier", "kernel", "deps:token*", "r:token", {}, "Workgroup barrier after the given stores.",
        '%1 = "uop.barrier"(%0) : (!uop.token) -> !uop.token'),
]
OPS: dict[str, OpDef] = {o.name: o for o in _ops}
class Op(str):
  """One op of the table: a str that is its dialect name (`Ops.ADD == "add"`, hashes like it), so MLIR text and tables
  keyed by name need no conversion; there is one instance per op, so passes compare ops by identity (`u.op is Ops.ADD`)."""
  __slots__ = ()
  def __repr__(self): return f"Ops.{self.upper()}"
  def __reduce__(self): return Ops, (str(self),)   # unpickles to the one instance

class _OpsType(type):
  """Ops behaves as an enum of Op (iteration, `Ops(name)`, `len`); its members are plain class attributes, which
  Python 3.11 reads ~4x faster than an Enum's (graph building reads them on every op)."""
  def __iter__(cls): return iter(cls._by_name.values())
  def __len__(cls) -> int: return len(cls._by_name)
  def __call__(cls, name: str) -> Op:
    if (o := cls._by_name.get(name)) is None: raise ValueError(f"{name!r} is not an op of the uop dialect")
    return o
class Ops(metaclass=_OpsType):
  _by_name: dict[str, Op] = {o.name: Op(o.name) for o in _ops}
for _o in Ops: setattr(Ops, _o.upper(), _o)
# the families and traits above as sets of members
MOVEMENT, COMMUTATIVE, SIDE_EFFECTS, GRAPH_ALU = (frozenset(map(Ops, names)) for names in (MOVEMENT, COMMUTATIVE, SIDE_EFFECTS, GRAPH_ALU))
UNARY_ALU, BINARY_ALU, CMP_ALU = (frozenset(map(Ops, names)) for names in (UNARY, BINARY, COMPARE))
REDUCE_IDENTITY = {Ops(k): v for k, v in REDUCE_IDENTITY.items()}

def parse_sig(sig: str) -> list[tuple[str, str, str]]:
  """'a:T, b:index*' -> [(name, constraint, variadicity)]"""
  out = []
  for part in filter(None, (p.strip() for p in sig.split(","))):
    name, ty = part.split(":")
    var = {"*": "variadic", "?": "optional"}.get(ty[-1], "single")
    out.append((name, ty.rstrip("*?"), var))
  return out

def _split_types(s: str) -> list[str]:
  out, depth, cur = [], 0, ""
  for ch in s:
    depth += ch in "<(" ; depth -= ch in ">)"
    if ch == "," and depth == 0: out.append(cur.strip()); cur = ""
    else: cur += ch
  return out + ([cur.strip()] if cur.strip() else [])

def example_module(op: OpDef) -> str:
  """The op's doc example wrapped in a function whose arguments feed its operands (for docs and round-trip tests)."""
  ins = op.example.rsplit(" : (", 1)[1].split(") -> ")[0]
  tys = _split_types(ins)
  body = op.example
  for i in reversed(range(len(tys))): body = re.sub(rf"%{i}\b", f"%arg{i}", body)
  args = ", ".join(f"%arg{i}: {t}" for i, t in enumerate(tys + list(op.example_args)))
  return f"func.func @{op.name}_example({args}) {{\n  {body}\n  return\n}}\n"
