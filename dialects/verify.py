"""What IRDL cannot express, checked in Python: shapes of movement ops and reductions, i1 results of comparisons,
attribute values. Runs after parsing and after every pass; each problem is (location, message)."""
from __future__ import annotations
import re
from math import prod

_SHAPED = re.compile(r"(tensor|memref|vector)<((?:\d+x)*)([a-z0-9]+)>")
_DYNAMIC = re.compile(r"(tensor|memref|vector)<[^>]*[?*\[]")
REDUCE_OPS = ("add", "mul", "max", "min")
RANGE_KINDS = ("loop", "reduce", "global", "local")

def parse_type(ty: str):
  """'tensor<2x3xf32>' -> ('tensor', (2, 3), 'f32'); 'f32' -> ('scalar', (), 'f32')."""
  if (m := _SHAPED.fullmatch(ty)): return m.group(1), tuple(int(x) for x in m.group(2).split("x")[:-1]), m.group(3)
  if ty.startswith("!uop.ptr<"): return "ptr", (), ty[9:-1]
  return ("token" if ty == "!uop.token" else "scalar"), (), ty

def _pairs(v, n, what):
  if len(v) != 2 * n: return f"{what} needs 2 values per dimension ({2 * n}), got {len(v)}"

def _movement(name, ins, out, a):
  """element type kept; reshape keeps the element count, the others the rank; permute `order` is a permutation and gives the result shape; expand broadcasts only size-1 dims; pad/shrink take (before, after)/(start, end) pairs per dim, in range, and give the result shape; flip axes are distinct and in range"""
  (_, s, e), (_, o, oe) = parse_type(ins[0]), parse_type(out)
  if e != oe: return f"element type changes from {e} to {oe}"
  if name == "reshape":
    return None if prod(s) == prod(o) else f"reshape from {s} to {o} changes the element count ({prod(s)} vs {prod(o)})"
  if name != "reshape" and len(s) != len(o): return f"{name} keeps the rank: {s} -> {o}"
  if name == "permute":
    p = a["order"]
    if sorted(p) != list(range(len(s))): return f"order {list(p)} is not a permutation of {len(s)} axes"
    if tuple(s[i] for i in p) != o: return f"permute of {s} by {list(p)} gives {tuple(s[i] for i in p)}, not {o}"
  if name == "expand":
    if any(x != y and x != 1 for x, y in zip(s, o)): return f"cannot expand {s} to {o} (only size-1 dims broadcast)"
  if name == "pad":
    if (err := _pairs(a["padding"], len(s), "padding")): return err
    p = a["padding"]
    if any(x < 0 for x in p): return "padding must be non-negative"
    want = tuple(d + p[2 * i] + p[2 * i + 1] for i, d in enumerate(s))
    if want != o: return f"pad of {s} by {list(p)} gives {want}, not {o}"
  if name == "shrink":
    if (err := _pairs(a["bounds"], len(s), "bounds")): return err
    b = a["bounds"]
    for i, d in enumerate(s):
      if not 0 <= b[2 * i] <= b[2 * i + 1] <= d: return f"bounds ({b[2 * i]}, {b[2 * i + 1]}) out of range for dim {i} of size {d}"
    want = tuple(b[2 * i + 1] - b[2 * i] for i in range(len(s)))
    if want != o: return f"shrink of {s} by {list(b)} gives {want}, not {o}"
  if name == "flip":
    if any(not 0 <= x < len(s) for x in a["axes"]) or len(set(a["axes"])) != len(a["axes"]): return f"bad flip axes {list(a['axes'])} for rank {len(s)}"
    if s != o: return f"flip keeps the shape: {s} -> {o}"

def _reduce_axis(name, ins, out, a):
  """`op` is add|mul|max|min; `axes` distinct and in range; result shape is the input's with reduced dims set to 1"""
  (_, s, e), (_, o, oe) = parse_type(ins[0]), parse_type(out)
  if a["op"] not in REDUCE_OPS: return f"reduce op must be one of {', '.join(REDUCE_OPS)}, got {a['op']!r}"
  if any(not 0 <= x < len(s) for x in a["axes"]) or len(set(a["axes"])) != len(a["axes"]): return f"bad axes {list(a['axes'])} for rank {len(s)}"
  want = tuple(1 if i in a["axes"] else d for i, d in enumerate(s))
  if want != o or e != oe: return f"reduce of {s} over {list(a['axes'])} gives {want}x{e}, not {o}x{oe}"

def _same_shape_i1(name, ins, out, a):
  """result has the operands' shape and element type i1"""
  (k, s, _), (ko, o, oe) = parse_type(ins[0]), parse_type(out)
  if (k, s) != (ko, o) or oe != "i1": return f"result must have the operands' shape with element type i1, got {out}"

def _same_shape(name, ins, out, a):
  """result has the operand's shape (bitcast: and the same element width)"""
  (k, s, e), (ko, o, oe) = parse_type(ins[0]), parse_type(out)
  if (k, s) != (ko, o): return f"result must have the operand's shape, got {out} from {ins[0]}"
  if name == "bitcast":
    width = lambda t: 1 if t == "i1" else int(re.sub(r"\D", "", t) or 64)
    if width(e) != width(oe): return f"bitcast needs equal widths, got {e} and {oe}"

def _where(name, ins, out, a):
  """condition has the result's shape and element type i1"""
  return _same_shape_i1(name, [ins[1]], ins[0], a)

def _index(name, ins, out, a):
  """buffer is a flat static memref; the pointer's element is the buffer's"""
  if len(parse_type(ins[0])[1]) != 1: return f"buffer must be a flat static memref<N x T>, got {ins[0]}"
  if parse_type(ins[0])[2] != parse_type(out)[2]: return f"pointer element {parse_type(out)[2]} differs from buffer element {parse_type(ins[0])[2]}"

def _vectorize(name, ins, out, a):
  """result is vector<N x T> for N operands of type T"""
  want = f"vector<{len(ins)}x{ins[0]}>" if ins else "a vector"
  if out != want: return f"{len(ins)} lanes of {ins[0] if ins else '?'} make {want}, not {out}"

def _gep(name, ins, out, a):
  """source is a 1-d vector; `idx` lanes in range; result is the element (one lane) or vector<len(idx) x elem>"""
  k, s, e = parse_type(ins[0])
  if k != "vector" or len(s) != 1: return f"source must be a 1-d vector, got {ins[0]}"
  if not a["idx"] or any(not 0 <= i < s[0] for i in a["idx"]): return f"lanes {list(a['idx'])} out of range for {ins[0]}"
  want = e if len(a["idx"]) == 1 else f"vector<{len(a['idx'])}x{e}>"
  if out != want: return f"extracting {len(a['idx'])} lane(s) of {ins[0]} gives {want}, not {out}"

def _reduce(name, ins, out, a):
  """`op` is add|mul|max|min"""
  if a["op"] not in REDUCE_OPS: return f"reduce op must be one of {', '.join(REDUCE_OPS)}, got {a['op']!r}"

def _range(name, ins, out, a):
  """`kind` is loop|reduce|global|local"""
  if a["kind"] not in RANGE_KINDS: return f"range kind must be one of {', '.join(RANGE_KINDS)}, got {a['kind']!r}"

def _const(name, ins, out, a):
  """`value` is a scalar number whose type is the result's element type (signless for ui*); result is not a memref, pointer or token"""
  from mlir import ir
  v, (k, _, elem) = a["value"], parse_type(out)
  if k in ("memref", "ptr", "token"): return f"result must be a tensor, vector or scalar, got {out}"
  if not isinstance(v, (ir.FloatAttr, ir.IntegerAttr, ir.BoolAttr)): return f"value must be a scalar number, got {v}"
  if str(v.type) != (elem[1:] if elem.startswith("ui") else elem): return f"value of type {v.type} for a result of element type {elem}"

CHECKS = {**{m: _movement for m in ("reshape", "permute", "expand", "pad", "shrink", "flip")},
          "reduce_axis": _reduce_axis, "cmplt": _same_shape_i1, "cmpne": _same_shape_i1, "cmpeq": _same_shape_i1,
          "cast": _same_shape, "bitcast": _same_shape, "where": _where, "index": _index, "reduce": _reduce,
          "range": _range, "const": _const, "vectorize": _vectorize, "gep": _gep}

def _attr_value(attr):
  from mlir import ir
  for cls in (ir.DenseI64ArrayAttr,):
    if isinstance(attr, cls): return tuple(attr)
  for cls in (ir.StringAttr, ir.IntegerAttr):
    if isinstance(attr, cls): return attr.value
  return attr

def check_op(op) -> str | None:
  """Problem with one uop operation, or None."""
  from mlir import ir
  from .ops import OPS
  name = op.name[4:]
  if (chk := CHECKS.get(name)) is None and name not in OPS: return None
  for k, kind in OPS[name].attrs.items():  # IRDL's `#builtin.dense_array` also admits i32/f32/i1 arrays
    if kind == "ints" and k in op.attributes and not isinstance(op.attributes[k], ir.DenseI64ArrayAttr):
      return f"attribute '{k}' must be an array<i64: ...>, got {op.attributes[k]}"
  if chk is None: return None
  ins, outs = [str(o.type) for o in op.operands], [str(r.type) for r in op.results]
  if (dyn := next((t for t in ins + outs if _DYNAMIC.search(t)), None)): return f"needs static shapes, got {dyn}"
  a = {k: v if k == "value" else _attr_value(v) for k, v in op.attributes.items()}
  try: return chk(name, ins, outs[0] if outs else "()", a)
  except Exception as e: return f"cannot be checked ({type(e).__name__}: {e})"  # a gap in a check must not crash the caller

def verify_module(module_op) -> list:
  """(location, message) for every uop op that IRDL accepts but our checks reject. Iterative: deep nesting is no
  reason for a RecursionError."""
  errs, stack = [], [module_op]
  while stack:  # pre-order, in document order
    o = stack.pop().operation
    if o.name.startswith("uop.") and (msg := check_op(o)): errs.append((o.location, f"'{o.name}' op {msg}"))
    stack += reversed([c for r in o.regions for b in r.blocks for c in b.operations])
  return errs
