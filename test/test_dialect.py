"""The uop dialect: every op of the table parses, verifies, round-trips, is rejected when malformed (an MLIRError or
a verify.py problem naming the op, never an abort) and can be built from Python."""
import pathlib, re
import pytest
from mlir import ir
from mlir.dialects import func
from morok_mlir.dialects import OPS, new_context, builders as b
from morok_mlir.dialects.ops import parse_sig, example_module, _split_types
from morok_mlir.dialects.verify import CHECKS, verify_module
from morok_mlir.dialects import doc

ROOT = pathlib.Path(__file__).resolve().parents[1]

@pytest.fixture(scope="module")
def ctx():
  return new_context()

def problems(ctx, text: str) -> str:
  """All diagnostics for text: the parser's/IRDL's, else verify.py's; '' when valid."""
  with ctx:
    try: m = ir.Module.parse(text)
    except ir.MLIRError as e: return str(e)
    return "\n".join(msg for _, msg in verify_module(m.operation))

@pytest.mark.parametrize("name", OPS)
def test_example_roundtrip(ctx, name):
  text = example_module(OPS[name])
  with ctx:
    m = ir.Module.parse(text)
    assert m.operation.verify() and verify_module(m.operation) == []
    once = m.operation.get_asm(print_generic_op_form=True)
    twice = ir.Module.parse(once).operation.get_asm(print_generic_op_form=True)
  assert once == twice and f'"uop.{name}"' in once

def _bad_operand(op) -> str:
  """The example with its last operand's type replaced by one that breaks the signature."""
  head, tys = op.example.rsplit(" : (", 1)
  ins, out = tys.split(") -> ", 1)
  ins = _split_types(ins)
  ins[-1] = "f32" if ins[-1] == "!uop.token" else "!uop.token"
  return f"{head} : ({', '.join(ins)}) -> {out}"

def _missing_attr(op) -> str:
  k = next(iter(op.attrs))
  return re.sub(rf"\b{k} = (array<[^>]*>|\"[^\"]*\"|[^,}}]+)(, )?", "", op.example).replace(" {}", "")

VARIANTS = [(n, "operand", _bad_operand) for n, o in OPS.items() if o.operands] + \
           [(n, "attr", _missing_attr) for n, o in OPS.items() if o.attrs]

@pytest.mark.parametrize("name,kind,mutate", VARIANTS, ids=[f"{n}-{k}" for n, k, _ in VARIANTS])
def test_bad_variant_rejected(ctx, name, kind, mutate):
  op = OPS[name]
  bad = type(op)(**{**op.__dict__, "example": mutate(op)})
  assert bad.example != op.example
  msg = problems(ctx, example_module(bad))
  assert f"uop.{name}" in msg, f"not rejected: {bad.example}\n{msg}"
  if kind == "attr": assert "is expected but not provided" in msg

def test_every_op_has_a_bad_variant():
  assert {n for n, _, _ in VARIANTS} == set(OPS)

# one bad variant per verify.py check: (op, function text, expected message)
F = "func.func @f({args}) {{\n  {body}\n  return\n}}"
VERIFY_BAD = [
  ("reshape", "%a: tensor<2x3xf32>", '%0 = "uop.reshape"(%a) : (tensor<2x3xf32>) -> tensor<5xf32>', "changes the element count"),
  ("permute", "%a: tensor<2x3xf32>", '%0 = "uop.permute"(%a) {order = array<i64: 0, 0>} : (tensor<2x3xf32>) -> tensor<2x3xf32>', "not a permutation"),
  ("permute", "%a: tensor<2x3xf32>", '%0 = "uop.permute"(%a) {order = array<i64: 1, 0>} : (tensor<2x3xf32>) -> tensor<2x3xf32>', "gives (3, 2)"),
  ("expand", "%a: tensor<2x3xf32>", '%0 = "uop.expand"(%a) : (tensor<2x3xf32>) -> tensor<4x3xf32>', "cannot expand"),
  ("expand", "%a: tensor<3xf32>", '%0 = "uop.expand"(%a) : (tensor<3xf32>) -> tensor<2x3xf32>', "keeps the rank"),
  ("pad", "%a: tensor<4xf32>", '%0 = "uop.pad"(%a) {padding = array<i64: 1>} : (tensor<4xf32>) -> tensor<5xf32>', "2 values per dimension"),
  ("pad", "%a: tensor<4xf32>", '%0 = "uop.pad"(%a) {padding = array<i64: -1, 0>} : (tensor<4xf32>) -> tensor<3xf32>', "non-negative"),
  ("pad", "%a: tensor<4xf32>", '%0 = "uop.pad"(%a) {padding = array<i64: 1, 1>} : (tensor<4xf32>) -> tensor<7xf32>', "gives (6,)"),
  ("shrink", "%a: tensor<4xf32>", '%0 = "uop.shrink"(%a) {bounds = array<i64: 3, 9>} : (tensor<4xf32>) -> tensor<6xf32>', "out of range"),
  ("shrink", "%a: tensor<4xf32>", '%0 = "uop.shrink"(%a) {bounds = array<i64: 1, 3>} : (tensor<4xf32>) -> tensor<3xf32>', "gives (2,)"),
  ("flip", "%a: tensor<4xf32>", '%0 = "uop.flip"(%a) {axes = array<i64: 1>} : (tensor<4xf32>) -> tensor<4xf32>', "bad flip axes"),
  ("flip", "%a: tensor<4xf32>", '%0 = "uop.flip"(%a) {axes = array<i64: 0>} : (tensor<4xf32>) -> tensor<4xi32>', "element type changes"),
  ("reduce_axis", "%a: tensor<2x3xf32>", '%0 = "uop.reduce_axis"(%a) {op = "sub", axes = array<i64: 1>} : (tensor<2x3xf32>) -> tensor<2x1xf32>', "reduce op must be"),
  ("reduce_axis", "%a: tensor<2x3xf32>", '%0 = "uop.reduce_axis"(%a) {op = "add", axes = array<i64: 2>} : (tensor<2x3xf32>) -> tensor<2x1xf32>', "bad axes"),
  ("reduce_axis", "%a: tensor<2x3xf32>", '%0 = "uop.reduce_axis"(%a) {op = "add", axes = array<i64: 1>} : (tensor<2x3xf32>) -> tensor<2xf32>', "gives (2, 1)"),
  ("cmplt", "%a: tensor<4xf32>", '%0 = "uop.cmplt"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xi8>', "element type i1"),
  ("cmpne", "%a: tensor<4xf32>", '%0 = "uop.cmpne"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<2xi1>', "element type i1"),
  ("cmpeq", "%a: f32", '%0 = "uop.cmpeq"(%a, %a) : (f32, f32) -> tensor<1xi1>', "element type i1"),
  ("cast", "%a: tensor<4xf32>", '%0 = "uop.cast"(%a) : (tensor<4xf32>) -> tensor<2xi32>', "operand's shape"),
  ("bitcast", "%a: tensor<4xf32>", '%0 = "uop.bitcast"(%a) : (tensor<4xf32>) -> tensor<4xi16>', "equal widths"),
  ("where", "%c: tensor<4xi8>, %a: tensor<4xf32>", '%0 = "uop.where"(%c, %a, %a) : (tensor<4xi8>, tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>', "element type i1"),
  ("index", "%m: memref<4xf32>, %i: index", '%0 = "uop.index"(%m, %i) : (memref<4xf32>, index) -> !uop.ptr<i32>', "differs from buffer element"),
  ("index", "%m: memref<2x2xf32>, %i: index", '%0 = "uop.index"(%m, %i) : (memref<2x2xf32>, index) -> !uop.ptr<f32>', "flat static memref"),
  ("reduce", "%a: f32, %r: index", '%0 = "uop.reduce"(%a, %r) {op = "div"} : (f32, index) -> f32', "reduce op must be"),
  ("range", "%n: index", '%0 = "uop.range"(%n) {axis = 0 : i64, kind = "sideways"} : (index) -> index', "range kind must be"),
  ("const", "", '%0 = "uop.const"() {value = 1 : i32} : () -> tensor<4xf32>', "value of type i32"),
  ("const", "", '%0 = "uop.const"() {value = "one"} : () -> f32', "scalar number"),
  ("const", "", '%0 = "uop.const"() {value = 1 : i32} : () -> memref<4xi32>', "tensor, vector or scalar"),
  ("vectorize", "%a: f32", '%0 = "uop.vectorize"(%a, %a) : (f32, f32) -> vector<3xf32>', "make vector<2xf32>"),
  ("gep", "%v: vector<2xf32>", '%0 = "uop.gep"(%v) {idx = array<i64: 2>} : (vector<2xf32>) -> f32', "out of range"),
  ("gep", "%v: vector<4xf32>", '%0 = "uop.gep"(%v) {idx = array<i64: 0, 1>} : (vector<4xf32>) -> f32', "gives vector<2xf32>"),
  # generic checks: i64 arrays only, static shapes
  ("permute", "%a: tensor<2x3xf32>", '%0 = "uop.permute"(%a) {order = array<i32: 1, 0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>', "array<i64"),
  ("permute", "%a: tensor<2x3xf32>", '%0 = "uop.permute"(%a) {order = array<f32: 1.0, 0.0>} : (tensor<2x3xf32>) -> tensor<3x2xf32>', "array<i64"),
  ("permute", "%a: tensor<?x3xf32>", '%0 = "uop.permute"(%a) {order = array<i64: 1, 0>} : (tensor<?x3xf32>) -> tensor<3x?xf32>', "static shapes"),
  ("reshape", "%a: tensor<4xf32>", '%0 = "uop.reshape"(%a) : (tensor<4xf32>) -> tensor<?xf32>', "static shapes"),
  ("buffer", "%a: tensor<4xf32>", '%0 = "uop.buffer"() {slot = 99999 : i64} : () -> tensor<4xf32>', "slot 99999 out of range: the function has 1"),
  ("buffer", "%a: tensor<4xf32>", '%0 = "uop.buffer"() {slot = -1 : i64} : () -> tensor<4xf32>', "slot -1 out of range"),
  ("buffer", "", '%0 = "uop.buffer"() {slot = 0 : i64} : () -> tensor<4xf32>', "has 0 argument(s)"),
  ("buffer", "%a: tensor<4xf32>", '%0 = "uop.buffer"() {slot = 0 : i64} : () -> tensor<8xf32>', "differs from the type tensor<4xf32> of argument 0"),
  ("buffer", "%a: tensor<4xf32>", '%0 = "uop.buffer"() {slot = true} : () -> tensor<4xf32>', "'slot' must be an integer"),
  ("gather", "%a: tensor<5x3xf32>, %i: tensor<2x3xf32>", '%0 = "uop.gather"(%a, %i) {axis = 0 : i64} : (tensor<5x3xf32>, tensor<2x3xf32>) -> tensor<2x3xf32>',
   "indices must be integers"),
  ("gather", "%a: tensor<5x3xf32>, %i: tensor<2x4xi32>", '%0 = "uop.gather"(%a, %i) {axis = 0 : i64} : (tensor<5x3xf32>, tensor<2x4xi32>) -> tensor<2x4xf32>',
   "larger than the source"),
  ("gather", "%a: tensor<5x3xf32>, %i: tensor<2x3xi32>", '%0 = "uop.gather"(%a, %i) {axis = 2 : i64} : (tensor<5x3xf32>, tensor<2x3xi32>) -> tensor<2x3xf32>',
   "along axis 2"),
  ("gather", "%a: tensor<5x3xf32>, %i: tensor<2x3xi32>", '%0 = "uop.gather"(%a, %i) {axis = 0 : i64} : (tensor<5x3xf32>, tensor<2x3xi32>) -> tensor<2x3xi32>',
   "source's element type"),
  ("scatter", "%a: tensor<5x3xf32>, %i: tensor<2x3xi32>, %v: tensor<2x3xf32>",
   '%0 = "uop.scatter"(%a, %i, %v) {axis = 0 : i64, op = "xor"} : (tensor<5x3xf32>, tensor<2x3xi32>, tensor<2x3xf32>) -> tensor<5x3xf32>', "op must be one of"),
  ("threefry", "%a: tensor<4xi64>", '%0 = "uop.threefry"(%a, %a) : (tensor<4xi64>, tensor<4xi64>) -> tensor<4xi64>', "works on ui64"),
  ("scatter", "%a: tensor<5x3xf32>, %i: tensor<2x3xf32>, %v: tensor<2x3xf32>",
   '%0 = "uop.scatter"(%a, %i, %v) {axis = 0 : i64, op = "add"} : (tensor<5x3xf32>, tensor<2x3xf32>, tensor<2x3xf32>) -> tensor<5x3xf32>', "indices must be integers"),
  ("scatter", "%a: tensor<5x3xf32>, %i: tensor<2x3xi32>, %v: tensor<2x2xf32>",
   '%0 = "uop.scatter"(%a, %i, %v) {axis = 0 : i64, op = "add"} : (tensor<5x3xf32>, tensor<2x3xi32>, tensor<2x2xf32>) -> tensor<5x3xf32>', "values of the indices' shape"),
  ("scatter", "%a: tensor<5x3xf32>, %i: tensor<2x4xi32>, %v: tensor<2x4xf32>",
   '%0 = "uop.scatter"(%a, %i, %v) {axis = 0 : i64, op = "add"} : (tensor<5x3xf32>, tensor<2x4xi32>, tensor<2x4xf32>) -> tensor<5x3xf32>', "larger than the source"),
]
@pytest.mark.parametrize("name,args,body,want", VERIFY_BAD, ids=[f"{v[0]}-{v[3][:20]}" for v in VERIFY_BAD])
def test_verify_rejects(ctx, name, args, body, want):
  msg = problems(ctx, F.format(args=args, body=body))
  assert f"'uop.{name}' op" in msg and want in msg, msg

def test_every_verify_check_has_a_bad_case():
  assert set(CHECKS) <= {v[0] for v in VERIFY_BAD}

# every op: element types from the dtype table, static shapes, 1-d vectors, at most 2^47 bytes (passes assume all of it)
TYPE_BAD = [("tensor<4xf8E5M2FNUZ>", "element type f8E5M2FNUZ"), ("tensor<4xi3>", "element type i3"), ("i128", "unsupported type i128"),
            ("tensor<4xf8E4M3FNUZ>", "element type f8E4M3FNUZ"), ("f8E4M3B11FNUZ", "unsupported type f8E4M3B11FNUZ"),
            ("tensor<4xsi32>", "element type si32"),
            ("tensor<4xui3>", "element type ui3"), ("tensor<4xtf32>", "element type tf32"), ("tensor<4xcomplex<f32>>", "unsupported type"),
            ("tensor<4xvector<4xf32>>", "unsupported type"), ("tensor<?x4xf32>", "static shapes"), ("tensor<*xf32>", "static shapes"),
            ("vector<[4]xf32>", "static shapes"), ('tensor<4xf32, "enc">', "no layout, encoding"), ("memref<4xf32, 3>", "memory space"),
            ("memref<4xf32, strided<[2]>>", "no layout"), ("vector<2x4xf32>", "one dimension"), ("tuple<f32>", "unsupported type"),
            ("tensor<99999999999x99999999999xf32>", "more than 2^47 bytes"), ("tensor<4611686018427387904xf32>", "more than 2^47 bytes"),
            ("none", "unsupported type none"), ("!uop.ptr<tf32>", "pointer to tf32"), ("!uop.ptr<tensor<4xf32>>", "pointer to tensor")]

@pytest.mark.parametrize("ty,want", TYPE_BAD, ids=[t for t, _ in TYPE_BAD])
def test_verify_rejects_types(ctx, ty, want):
  msg = problems(ctx, F.format(args=f"%a: {ty}", body=f'%0 = "uop.detach"(%a) : ({ty}) -> {ty}'))
  assert "'uop.detach' op" in msg and want in msg, msg
  if want.startswith("element type"):
    assert "(supported: i1, i8, i16, i32, i64, ui8, ui16, ui32, ui64, f8E4M3FN, f8E5M2, f16, bf16, f32, f64, index)" in msg

def test_verify_accepts_every_dtype(ctx):
  from morok_mlir.core.dtype import dtypes
  for d in dtypes.all + (dtypes.index,):
    for ty in (d.mlir, f"tensor<2x3x{d.mlir}>", f"tensor<{d.mlir}>", f"tensor<0x4x{d.mlir}>", f"memref<6x{d.mlir}>", f"vector<4x{d.mlir}>", f"!uop.ptr<{d.mlir}>"):
      assert problems(ctx, F.format(args=f"%a: {ty}", body=f'%0 = "uop.detach"(%a) : ({ty}) -> {ty}')) == "", ty

def test_verify_walk_is_iterative(ctx):
  """300 nested modules: deeper than Python's recursion limit allows a recursive walk (limit 1000, 3 frames per level)."""
  n = 400
  text = "module {" * n + 'func.func @f(%a: tensor<4xf32>) { %0 = "uop.reshape"(%a) : (tensor<4xf32>) -> tensor<5xf32> return }' + "}" * n
  assert "changes the element count" in problems(ctx, text)

# --- builders

def _call_args(op, operands):
  """Group a flat operand list by the op's signature (one variadic/optional group at most)."""
  sig = parse_sig(op.operands)
  fixed = sum(v == "single" for _, _, v in sig)
  out, i = [], 0
  for _, _, v in sig:
    if v == "single": out.append(operands[i]); i += 1
    else:
      k = len(operands) - fixed
      out.append(list(operands[i:i + k]) if v == "variadic" else (operands[i] if k else None)); i += k
  return out

EXPLICIT = {"buffer", "multi", "const", "cast", "bitcast", "reshape", "permute", "expand", "pad", "shrink", "flip", "reduce_axis",
            "bufferize", "after", "vectorize", "gep"}  # result types the table leaves open

@pytest.mark.parametrize("name", OPS)
def test_builder_builds_op(ctx, name):
  op = OPS[name]
  with ctx, ir.Location.unknown():
    ref = ir.Module.parse(example_module(op))
    fn = ref.body.operations[0]
    want = fn.regions[0].blocks[0].operations[0].operation
    attrs = {k: v for k, v in want.attributes.items()}
    rty = [r.type for r in want.results]
    m = ir.Module.create()
    with ir.InsertionPoint(m.body):
      f = func.FuncOp(f"{name}_example", ([a.type for a in fn.arguments], []))
      with ir.InsertionPoint(f.add_entry_block()):
        args = _call_args(op, list(f.arguments))
        got = b.build(name, *args, type=rty[0] if rty else None, **attrs)
        if name in EXPLICIT:
          with pytest.raises(ValueError, match="pass the result type"): b.build(name, *args, **attrs)
        elif rty:
          assert b.build(name, *args, **attrs).type == rty[0]  # inferred
        func.ReturnOp([])
    assert m.operation.verify()
    got_op = got.owner if isinstance(got, ir.Value) else got
    assert str(got_op) == str(want)

def test_builder_names_and_python_attrs(ctx):
  assert callable(b.and_) and callable(b.if_) and callable(b.or_) and b.add.__name__ == "add"
  with ctx, ir.Location.unknown():
    m = ir.Module.create()
    with ir.InsertionPoint(m.body):
      t = ir.RankedTensorType.get([2, 3], ir.F32Type.get())
      f = func.FuncOp("g", ([t, ir.IndexType.get()], []))
      with ir.InsertionPoint(f.add_entry_block()):
        x, n = f.arguments
        assert str(b.cmplt(x, x).type) == "tensor<2x3xi1>"
        assert str(b.permute(x, order=[1, 0], type="tensor<3x2xf32>").type) == "tensor<3x2xf32>"
        assert "value = 2.500000e+00 : f32" in str(b.const(value=2.5, type="tensor<2x3xf32>").owner)
        assert "value = 7 : i8" in str(b.const(value=7, type="ui8").owner)  # unsigned constants carry signless values
        r = b.range(n, axis=0, kind="loop")
        k = b.kernel([], callee="k0", slots=[1, 0])
        assert "callee = @k0" in str(k.owner) and str(r.type) == "index"
        b.sink([k])
        func.ReturnOp([])
    assert m.operation.verify() and verify_module(m.operation) == []

BUILDER_ERRORS = [
  (lambda x, n: b.add(x), "takes operands"),
  (lambda x, n: b.add(x, n), "has type index, expected tensor<2x3xf32>"),
  (lambda x, n: b.add(x, 3), "must be an ir.Value"),
  (lambda x, n: b.reshape(n, type="tensor<4xf32>"), "must be tensor"),
  (lambda x, n: b.permute(x, type="tensor<3x2xf32>"), "attributes are ['order']"),
  (lambda x, n: b.permute(x, order=[0, 0], type="tensor<2x3xf32>"), "not a permutation"),
  (lambda x, n: b.permute(x, order=[2**70], type="tensor<2x3xf32>"), "list of int64"),
  (lambda x, n: b.permute(x, order=3, type="tensor<2x3xf32>"), "list of int64"),
  (lambda x, n: b.range(n, axis=0, kind=1), "expects a str"),
  (lambda x, n: b.range(n, axis=True, kind="loop"), "expects an int64"),
  (lambda x, n: b.const(value="x", type="f32"), "a float for f32"),
  (lambda x, n: b.const(value=300, type="i8"), "fits i8"),
  (lambda x, n: b.const(value=1.5, type="i32"), "fits i32"),
  (lambda x, n: b.const(value=1, type="!uop.token"), "matching the result type"),
  (lambda x, n: b.cast(x), "pass the result type"),
  (lambda x, n: b.reshape(x, type="tensor<<"), "bad type"),
  (lambda x, n: b.reshape(x, type="tensor<5xf32>"), "element count"),
  (lambda x, n: b.load(x), "must be !uop.ptr"),
  (lambda x, n: b.build("nosuch"), "unknown uop op"),
]

@pytest.mark.parametrize("call,want", BUILDER_ERRORS, ids=[w for _, w in BUILDER_ERRORS])
def test_builder_rejects(ctx, call, want):
  with ctx, ir.Location.unknown():
    m = ir.Module.create()
    with ir.InsertionPoint(m.body):
      f = func.FuncOp("g", ([ir.RankedTensorType.get([2, 3], ir.F32Type.get()), ir.IndexType.get()], []))
      with ir.InsertionPoint(f.add_entry_block()):
        with pytest.raises(ValueError, match=re.escape(want)): call(*f.arguments)
        func.ReturnOp([])
    assert m.operation.verify()  # nothing half-built was left behind

def test_builder_needs_uop_context():
  with ir.Context(), ir.Location.unknown():  # creating uop.* here would abort inside MLIR
    with pytest.raises(ValueError, match="not loaded"): b.special(dim="gidx0", size=4)

# --- docs

def test_dialect_doc_is_current():
  assert (ROOT / "docs/dialect.md").read_text() == doc.render(), "run: python -m morok_mlir.dialects.doc > docs/dialect.md"

def test_dialect_doc_covers_every_op():
  text = (ROOT / "docs/dialect.md").read_text()
  for name, op in OPS.items():
    assert f"### `uop.{name}`" in text and example_module(op) in text
  assert "!uop.ptr<T>" in text and "!uop.token" in text

def test_pass_doc_lists_every_registered_pass():
  from morok_mlir.passes import PASSES
  text = (ROOT / "docs/passes.md").read_text()
  assert [p for p in PASSES if f"`{p}`" not in text] == []

def test_roundtrip_lit_covers_every_op():
  text = (ROOT / "test/lit/roundtrip/all-ops.mlir").read_text()
  assert [n for n in OPS if not re.search(rf'// CHECK-NEXT: .*"uop\.{n}"', text)] == []
