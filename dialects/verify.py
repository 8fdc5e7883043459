"""What IRDL cannot express, checked in Python: shapes of movement ops and reductions, i1 results of comparisons,
attribute values. Runs after parsing and after every pass; each problem is (location, message)."""
from __future__ import annotations
import functools, re
from math import prod
from morok_mlir.core.dtype import dtypes
from morok_mlir.core.uop import UOp, DYN, attrs
from morok_mlir.dialects.ops import OPS, Ops
from morok_mlir.ir.bridge import split_type

_DYNAMIC = re.compile(r"(tensor|memref|vector)<(?:[\d?]+x|\[\d+\]x)*[?*\[]")  # a ?, * or [4] (scalable) dim
ITEMSIZE = {d.mlir: d.itemsize for d in dtypes.all + (dtypes.index,)}  # the element types every pass handles
ELEMENTS = ", ".join(ITEMSIZE)
# No buffer can be larger than a 64-bit machine's user address space (2^47 bytes on x86-64 and AArch64); below it
# element counts and byte offsets also fit the int64 index arithmetic of the lowerings.
MAX_BYTES = 1 << 47
TYPE_RULE = (f"operand and result types are scalars of {', '.join(f'`{e}`' for e in ITEMSIZE)} (the dtype table's element types), "
             "`tensor` types (symbolic `?` dims allowed), static `memref` and 1-d `vector` types of them of at most 2^47 bytes, "
             "`!uop.ptr<T>` of one, or `!uop.token`")
REDUCE_OPS = ("add", "mul", "max", "min")
SCATTER_OPS = ("store",) + REDUCE_OPS
RANGE_KINDS = ("loop", "reduce", "serial", "global", "local")

@functools.lru_cache(maxsize=4096)  # a program has few distinct types; the verifier runs after every pass
def type_problem(ty: str) -> str | None:
  """Why a uop value cannot have type ty, or None."""
  kind, dims, elem = split_type(ty)
  if kind == "token" or ty in ITEMSIZE: return None
  if kind == "ptr": return None if elem in ITEMSIZE else f"pointer to {elem}: the element type must be one of {ELEMENTS}"
  if kind == "scalar":
    if _DYNAMIC.search(ty): return f"needs static shapes, got {ty}"
    if re.fullmatch(r"(tensor|memref|vector)<.*>", ty):
      return f"unsupported type {ty}: shapes are static, element types one of {ELEMENTS}, no layout, encoding or memory space"
    return f"unsupported type {ty}: uop values are scalars of {ELEMENTS}, tensors, memrefs and vectors of them, !uop.ptr<T> or !uop.token"
  if kind != "tensor" and DYN in dims: return f"needs static shapes, got {ty}"
  if elem not in ITEMSIZE: return f"element type {elem} of {ty} is not supported (supported: {ELEMENTS})"
  if kind == "vector" and len(dims) != 1: return f"vectors have one dimension (lanes), got {ty}"
  if (n := prod(d for d in dims if d != DYN)) * ITEMSIZE[elem] > MAX_BYTES: return f"{ty} has {n} elements of {ITEMSIZE[elem]} bytes: more than 2^47 bytes"

def _derived(name: str, s: tuple, a: dict) -> tuple:
  """The result shape the core's shape rules (uop.SHAPE_RULES) give op `name` on a source of shape s: one definition."""
  src = UOp(Ops.BUFFER, dtypes.float32, (), attrs(slot=0, shape=tuple(s)))   # shapes do not depend on the element type
  return UOp(Ops(name), dtypes.float32, (src,), attrs(**{k: tuple(v) for k, v in a.items() if isinstance(v, tuple)})).shape

def _pairs(v, n, what):
  if len(v) != 2 * n: return f"{what} needs 2 values per dimension ({2 * n}), got {len(v)}"

def _movement(name, ins, out, a):
  """element type kept; reshape keeps the element count, the others the rank; permute `order` is a permutation and gives the result shape; expand broadcasts only size-1 dims; pad/shrink take (before, after)/(start, end) pairs per dim, in range, and give the result shape; flip axes are distinct and in range"""
  (_, s, e), (_, o, oe) = split_type(ins[0]), split_type(out)
  if e != oe: return f"element type changes from {e} to {oe}"
  want_dyn = o.count(DYN) if name in ("reshape", "expand") else sum(x == DYN for x in a.get("padding", a.get("bounds", ())))
  if len(ins) - 1 != want_dyn: return f"needs static shapes or an index operand per symbolic size: {want_dyn} symbolic, {len(ins) - 1} operand(s)"
  if DYN in s + o or DYN in a.get("padding", a.get("bounds", ())): return _symbolic_movement(name, s, o, a)
  if name == "reshape":
    return None if prod(s) == prod(o) else f"reshape from {s} to {o} changes the element count ({prod(s)} vs {prod(o)})"
  if name != "reshape" and len(s) != len(o): return f"{name} keeps the rank: {s} -> {o}"
  if name == "permute":
    p = a["order"]
    if sorted(p) != list(range(len(s))): return f"order {list(p)} is not a permutation of {len(s)} axes"
    if (want := _derived(name, s, a)) != o: return f"permute of {s} by {list(p)} gives {want}, not {o}"
  if name == "expand":
    if any(x != y and x != 1 for x, y in zip(s, o)): return f"cannot expand {s} to {o} (only size-1 dims broadcast)"
  if name == "pad":
    if (err := _pairs(a["padding"], len(s), "padding")): return err
    p = a["padding"]
    if any(x < 0 for x in p): return "padding must be non-negative"
    if (want := _derived(name, s, a)) != o: return f"pad of {s} by {list(p)} gives {want}, not {o}"
  if name == "shrink":
    if (err := _pairs(a["bounds"], len(s), "bounds")): return err
    b = a["bounds"]
    for i, d in enumerate(s):
      if not 0 <= b[2 * i] <= b[2 * i + 1] <= d: return f"bounds ({b[2 * i]}, {b[2 * i + 1]}) out of range for dim {i} of size {d}"
    if (want := _derived(name, s, a)) != o: return f"shrink of {s} by {list(b)} gives {want}, not {o}"
  if name == "flip":
    if any(not 0 <= x < len(s) for x in a["axes"]) or len(set(a["axes"])) != len(a["axes"]): return f"bad flip axes {list(a['axes'])} for rank {len(s)}"
    if s != o: return f"flip keeps the shape: {s} -> {o}"

def _shown(dims: tuple) -> str: return "(" + ", ".join("?" if d == DYN else str(d) for d in dims) + ("," if len(dims) == 1 else "") + ")"
def _symbolic_movement(name, s, o, a):
  """Symbolic sizes (`?`, DYN) are checked where they are known: the rank, and permute's order."""
  if name != "reshape" and len(s) != len(o): return f"{name} keeps the rank: {_shown(s)} -> {_shown(o)}"
  if name == "permute" and sorted(a["order"]) != list(range(len(s))): return f"order {list(a['order'])} is not a permutation of {len(s)} axes"
  if name in ("pad", "shrink"): return _pairs(a["padding" if name == "pad" else "bounds"], len(s), "padding" if name == "pad" else "bounds")

def _reduce_axis(name, ins, out, a):
  """`op` is add|mul|max|min; `axes` distinct and in range; result shape is the input's with reduced dims set to 1"""
  (_, s, e), (_, o, oe) = split_type(ins[0]), split_type(out)
  if a["op"] not in REDUCE_OPS: return f"reduce op must be one of {', '.join(REDUCE_OPS)}, got {a['op']!r}"
  if any(not 0 <= x < len(s) for x in a["axes"]) or len(set(a["axes"])) != len(a["axes"]): return f"bad axes {list(a['axes'])} for rank {len(s)}"
  if (want := _derived(name, s, a)) != o or e != oe: return f"reduce of {s} over {list(a['axes'])} gives {want}x{e}, not {o}x{oe}"

def _same_shape_i1(name, ins, out, a):
  """result has the operands' shape and element type i1"""
  (k, s, _), (ko, o, oe) = split_type(ins[0]), split_type(out)
  if (k, s) != (ko, o) or oe != "i1": return f"result must have the operands' shape with element type i1, got {out}"

def _same_shape(name, ins, out, a):
  """result has the operand's shape (bitcast: and the same element width)"""
  (k, s, e), (ko, o, oe) = split_type(ins[0]), split_type(out)
  if (k, s) != (ko, o): return f"result must have the operand's shape, got {out} from {ins[0]}"
  if name == "bitcast":
    width = lambda t: 1 if t == "i1" else ITEMSIZE[t] * 8 if t in ITEMSIZE else int(re.sub(r"\D", "", t) or 64)   # (f8E4M3FN: 8)
    if width(e) != width(oe): return f"bitcast needs equal widths, got {e} and {oe}"

def _where(name, ins, out, a):
  """condition has the result's shape and element type i1"""
  return _same_shape_i1(name, [ins[1]], ins[0], a)

def _index(name, ins, out, a):
  """buffer is a flat static memref; the pointer's element is the buffer's"""
  if len(split_type(ins[0])[1]) != 1: return f"buffer must be a flat static memref<N x T>, got {ins[0]}"
  if split_type(ins[0])[2] != split_type(out)[2]: return f"pointer element {split_type(out)[2]} differs from buffer element {split_type(ins[0])[2]}"

def _vectorize(name, ins, out, a):
  """result is vector<N x T> for N operands of type T"""
  want = f"vector<{len(ins)}x{ins[0]}>" if ins else "a vector"
  if out != want: return f"{len(ins)} lanes of {ins[0] if ins else '?'} make {want}, not {out}"

def _gep(name, ins, out, a):
  """source is a 1-d vector; `idx` lanes in range; result is the element (one lane) or vector<len(idx) x elem>"""
  k, s, e = split_type(ins[0])
  if k != "vector" or len(s) != 1: return f"source must be a 1-d vector, got {ins[0]}"
  if not a["idx"] or any(not 0 <= i < s[0] for i in a["idx"]): return f"lanes {list(a['idx'])} out of range for {ins[0]}"
  want = e if len(a["idx"]) == 1 else f"vector<{len(a['idx'])}x{e}>"
  if out != want: return f"extracting {len(a['idx'])} lane(s) of {ins[0]} gives {want}, not {out}"

def _reduce(name, ins, out, a):
  """`op` is add|mul|max|min"""
  if a["op"] not in REDUCE_OPS: return f"reduce op must be one of {', '.join(REDUCE_OPS)}, got {a['op']!r}"

def _range(name, ins, out, a):
  """`kind` is loop|reduce|serial|global|local"""
  if a["kind"] not in RANGE_KINDS: return f"range kind must be one of {', '.join(RANGE_KINDS)}, got {a['kind']!r}"

def _const(name, ins, out, a):
  """`value` is a scalar number whose type is the result's element type (signless for ui*); result is not a memref, pointer or token"""
  from mlir import ir
  v, (k, _, elem) = a["value"], split_type(out)
  if k in ("memref", "ptr", "token"): return f"result must be a tensor, vector or scalar, got {out}"
  if DYN in split_type(out)[1]: return f"a constant has a static shape, got {out}"
  if not isinstance(v, (ir.FloatAttr, ir.IntegerAttr, ir.BoolAttr)): return f"value must be a scalar number, got {v}"
  if str(v.type) != (elem[1:] if elem.startswith("ui") else elem): return f"value of type {v.type} for a result of element type {elem}"

def _fn_args(op) -> list[str] | None:
  """Argument types of the func.func around op, or None outside one."""
  f = op.parent
  while f is not None and f.operation.name != "func.func": f = f.operation.parent
  return [str(x.type) for x in f.regions[0].blocks[0].arguments] if f is not None and len(f.regions[0].blocks) else None

def _buffer(name, ins, out, a):
  """`slot` names an argument of the enclosing func.func, whose type is the result's"""
  slot, args = a["slot"], a["@fn_args"]
  if args is None: return "must be inside a func.func: its slot names one of the function's arguments"
  if not 0 <= slot < len(args): return f"slot {slot} out of range: the function has {len(args)} argument(s)"
  if args[slot] != out: return f"result type {out} differs from the type {args[slot]} of argument {slot}"

_INT = ("i8", "i16", "i32", "i64", "ui8", "ui16", "ui32", "ui64", "index")
def _indexing(src: str, idx: str, axis: int) -> str | None:
  """idx indexes src along axis: an integer element type, src's rank, axis in range, no dim larger than src's but axis's"""
  (_, s, _), (_, i, ie) = split_type(src), split_type(idx)
  if ie not in _INT: return f"indices must be integers, got {idx}"
  if len(i) != len(s) or not 0 <= axis < len(s): return f"indexing of rank {len(s)} along axis {axis} with indices {idx}"
  if any(d != axis and DYN not in (x, y) and x > y for d, (x, y) in enumerate(zip(i, s))):
    return f"indices {idx} are larger than the source {src} outside axis {axis}"

def _gather(name, ins, out, a):
  """see _indexing; the result has idx's shape and the source's element type"""
  if (bad := _indexing(ins[0], ins[1], a["axis"])): return bad
  (_, _, e), (_, i, _), (_, o, oe) = split_type(ins[0]), split_type(ins[1]), split_type(out)
  if (o, oe) != (i, e): return f"gather gives the indices' shape with the source's element type ({i}x{e}), not {out}"

def _scatter(name, ins, out, a):
  """see _indexing; src has idx's shape and the target's element type; op is store|add|mul|max|min"""
  if a["op"] not in SCATTER_OPS: return f"scatter op must be one of {', '.join(SCATTER_OPS)}, got {a['op']!r}"
  if (bad := _indexing(ins[0], ins[1], a["axis"])): return bad
  (_, _, e), (_, i, _), (_, v, ve) = split_type(ins[0]), split_type(ins[1]), split_type(ins[2])
  if (v, ve) != (i, e): return f"scatter takes values of the indices' shape and the target's element type ({i}x{e}), not {ins[2]}"

def _threefry(name, ins, out, a):
  """operands and result are uint64 (two 32-bit words each: counter and key)"""
  if any(split_type(t)[2] != "ui64" for t in ins + [out]): return f"threefry works on ui64 counters and keys, got {', '.join(ins)} -> {out}"

CHECKS = {"gather": _gather, "scatter": _scatter, "threefry": _threefry, **{m: _movement for m in ("reshape", "permute", "expand", "pad", "shrink", "flip")},
          "reduce_axis": _reduce_axis, "cmplt": _same_shape_i1, "cmpne": _same_shape_i1, "cmpeq": _same_shape_i1,
          "cast": _same_shape, "bitcast": _same_shape, "where": _where, "index": _index, "reduce": _reduce,
          "range": _range, "const": _const, "vectorize": _vectorize, "gep": _gep, "buffer": _buffer}

def _attr_value(attr):
  from mlir import ir
  for cls in (ir.DenseI64ArrayAttr,):
    if isinstance(attr, cls): return tuple(attr)
  for cls in (ir.StringAttr, ir.IntegerAttr):
    if isinstance(attr, cls): return attr.value
  return attr

SYM_SOURCES = ("reshape", "expand", "pad", "shrink")   # ops whose `?` sizes are their index operands
def _symbolic_problem(op, name, ins, outs) -> str | None:
  """A symbolic (`?`) dim follows from operands: from an op that makes it (SYM_SOURCES, with the size as an index operand),
  never from a function argument (graph inputs are static)."""
  from mlir import ir
  if (arg := next((t for o, t in zip(op.operands, ins) if "?" in t and isinstance(o.owner, ir.Block)), None)):
    return f"needs static shapes, got {arg}"
  if name not in SYM_SOURCES and (res := next((t for t in outs if "?" in t), None)) and not any("?" in t for t in ins):
    return f"needs static shapes, got {res}"

def check_op(op) -> str | None:
  """Problem with one uop operation, or None."""
  from mlir import ir
  name = op.name[4:]
  if name not in OPS: return None
  ins, outs = [str(o.type) for o in op.operands], [str(r.type) for r in op.results]
  if (err := next(filter(None, map(type_problem, ins + outs)), None)): return err
  if (err := _symbolic_problem(op, name, ins, outs)): return err
  for k, kind in OPS[name].attrs.items():  # IRDL's `#builtin.dense_array` also admits i32/f32/i1 arrays, `#builtin.integer` true
    if kind == "ints" and k in op.attributes and not isinstance(op.attributes[k], ir.DenseI64ArrayAttr):
      return f"attribute '{k}' must be an array<i64: ...>, got {op.attributes[k]}"
    if kind == "int" and k in op.attributes and not isinstance(op.attributes[k], ir.IntegerAttr):
      return f"attribute '{k}' must be an integer, got {op.attributes[k]}"
  if (chk := CHECKS.get(name)) is None: return None
  a = {k: v if k == "value" else _attr_value(v) for k, v in op.attributes.items()}
  if name == "buffer": a["@fn_args"] = _fn_args(op)
  try: return chk(name, ins, outs[0] if outs else "()", a)
  except Exception as e: return f"cannot be checked ({type(e).__name__}: {e})"  # a gap in a check must not crash the caller

def signature_problem(fop) -> str | None:
  """Problem with a func.func that uop passes import (a body; argument and result types as for uop values), or None."""
  from mlir import ir
  name = ir.StringAttr(fop.attributes["sym_name"]).value
  if not len(fop.regions[0].blocks): return f"'func.func' op @{name} is a declaration: uop passes need a body"
  ftype = ir.FunctionType(ir.TypeAttr(fop.attributes["function_type"]).value)
  for what, types in (("argument", ftype.inputs), ("result", ftype.results)):
    for i, t in enumerate(types):
      if (msg := type_problem(str(t))): return f"'func.func' op @{name} {what} {i}: {msg}"
  return None

def verify_module(module_op) -> list:
  """(location, message) for every uop op that IRDL accepts but our checks reject, and for the signature of every function
  that holds one. Iterative: deep nesting is no reason for a RecursionError."""
  errs, stack = [], [module_op]
  while stack:  # pre-order, in document order
    o = stack.pop().operation
    if o.name.startswith("uop.") and (msg := check_op(o)): errs.append((o.location, f"'{o.name}' op {msg}"))
    body = [c for r in o.regions for b in r.blocks for c in b.operations]
    if o.name == "func.func" and any(c.operation.name.startswith("uop.") for c in body) and (msg := signature_problem(o)):
      errs.append((o.location, msg))
    stack += reversed(body)
  return errs
