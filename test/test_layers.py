"""Layering rules of the tree, checked on the source: MLIR type text is made and read only at the MLIR boundary."""
import ast, pathlib, re

ROOT = pathlib.Path(__file__).resolve().parent.parent
BOUNDARY = {"morok_mlir/ir/bridge.py", "morok_mlir/ir/emit.py"}   # plus dialects/: the dialect itself
TYPE_TEXT = re.compile(r"(tensor|memref|vector)<")

def sources():
  for folder in ("morok_mlir", "passes"):
    for p in sorted((ROOT / folder).rglob("*.py")):
      if (rel := p.relative_to(ROOT).as_posix()) not in BOUNDARY and "/dialects/" not in rel: yield rel, ast.parse(p.read_text())

def docstrings(tree) -> set[int]:
  return {id(n.body[0].value) for n in ast.walk(tree) if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef)) and n.body
          and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}

def test_no_type_text_read_outside_the_boundary():
  """A plain string literal holding MLIR type text is a pattern or a parsed type: only the boundary may have one.
  Code generation prints upstream memref/vector types, always as f-strings; nothing outside the boundary makes a tensor type."""
  bad = []
  for rel, tree in sources():
    skip, fparts = docstrings(tree), {id(v) for n in ast.walk(tree) if isinstance(n, ast.JoinedStr) for v in n.values}
    for n in ast.walk(tree):
      if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip and (m := TYPE_TEXT.search(n.value)):
        if id(n) not in fparts or m.group(1) == "tensor": bad.append(f"{rel}:{n.lineno}: {n.value!r}")
  assert not bad, "MLIR type text handled outside bridge/emit/dialects:\n" + "\n".join(bad)

def test_uops_carry_typed_values():
  from morok_mlir import Tensor
  from morok_mlir.dialects.ops import Op, Ops
  from morok_mlir.core.dtype import dtypes
  u = (Tensor.ones(2, 3) + 1).sum(1).uop
  assert u.op is Ops.RESHAPE and u.shape == (2,) and u.dtype is dtypes.float32
  assert all(x.op.__class__ is Op for x in u.toposort)
