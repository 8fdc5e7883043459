"""MLIR text <-> UOp DAGs. A module is a list of `Func`s; function arguments become `buffer` UOps (slot = argument
number), `func.return` operands are the results, and roots without results (sink) are kept as roots."""
from __future__ import annotations
import functools, math, re
from dataclasses import dataclass, field
from morok_mlir.ir import load as _load_mlir
_load_mlir()
from mlir import ir
from morok_mlir.core.uop import UOp, SHAPE_ATTR, DYN, attrs as mkattrs
from morok_mlir.core.dtype import DType, PtrDType, VecDType, dtypes
from morok_mlir.dialects.ops import Ops

@dataclass
class Func:
  name: str
  args: list[UOp]                   # the arguments as `buffer` UOps (slot = argument number)
  results: list[UOp]                # func.return operands
  roots: list[UOp] = field(default_factory=list)  # result-less ops that must be kept (uop.sink)
  attrs: dict = field(default_factory=dict)       # function attributes: name -> Python value (None: a unit flag; see _py_attr)
  arg_attrs: list[dict] | None = None
  visibility: str | None = None
  def all_roots(self) -> list[UOp]: return self.results + self.roots

# ---------------------------------------------------------------- types: the one place MLIR type text is made and read
def arg_buffer(slot: int, dtype: DType, shape: tuple | None = None) -> UOp:
  """Function argument `slot`: a tensor (shape given) or a buffer (a sized pointer dtype)."""
  return UOp(Ops.BUFFER, dtype, (), mkattrs(slot=slot) if shape is None else mkattrs(slot=slot, shape=tuple(shape)))

_TYPE_TEXT: dict[tuple, str] = {}
def type_text(dtype: DType, shape: tuple | None = None) -> str:
  """The MLIR type of a value: tensor<...> with a shape, memref<N x T> / !uop.ptr<T> for pointers, vector<N x T>,
  !uop.token for void, else the scalar element type. A symbolic dimension prints as `?` (its value is an operand of the
  op that makes the shape: see uop.SYM_ATTR)."""
  if (t := _TYPE_TEXT.get(k := (dtype, shape))) is None:
    b = dtype.base.mlir
    if shape is not None: t = "tensor<" + "".join(f"{d}x" if isinstance(d, int) else "?x" for d in shape) + b + ">"
    elif isinstance(dtype, PtrDType): t = f"!uop.ptr<{b}>" if dtype.size is None else f"memref<{dtype.size}x{b}>"
    elif isinstance(dtype, VecDType): t = f"vector<{dtype.count}x{b}>"
    else: t = "!uop.token" if dtype is dtypes.void else b
    _TYPE_TEXT[k] = t
  return t
def ty(u: UOp) -> str: return type_text(u.dtype, u.shape)

_SHAPED = re.compile(r"(tensor|memref|vector)<((?:(?:\d+|\?)x)*)(\w+)>")
@functools.lru_cache(maxsize=4096)   # a program has few distinct types; the verifier reads them after every pass
def split_type(t: str) -> tuple[str, tuple[int, ...], str]:
  """MLIR type text -> (kind, dims, element text), the one reader of type text: 'tensor<2x?xf32>' -> ('tensor', (2, DYN), 'f32'),
  '!uop.ptr<f32>' -> ('ptr', (), 'f32'), '!uop.token' -> ('token', (), ''), anything else ('scalar', (), t) (it may not be one)."""
  if (m := _SHAPED.fullmatch(t)): return m.group(1), tuple(DYN if x == "?" else int(x) for x in m.group(2).split("x")[:-1]), m.group(3)
  if t == "!uop.token": return "token", (), ""
  if t.startswith("!uop.ptr<") and t.endswith(">"): return "ptr", (), t[9:-1]
  return "scalar", (), t

def parse_type(t: str) -> tuple[DType, tuple[int, ...] | None]:
  """MLIR type text -> (dtype, shape); the inverse of type_text (TypeError for a type the dialect does not use).
  A `?` tensor dimension is uop.DYN."""
  kind, dims, e = split_type(t)
  if kind == "token": return dtypes.void, None
  e = dtypes.from_mlir(e)
  if kind == "tensor": return e, dims
  if kind in ("scalar", "ptr"): return (e.ptr() if kind == "ptr" else e), None
  if DYN in dims: raise TypeError(f"{t}: only tensors have symbolic dimensions")
  if len(dims) != 1: raise TypeError(f"{t}: only 1-d {kind}s are used")
  return (e.ptr(dims[0]) if kind == "memref" else e.vec(dims[0])), None

# ---------------------------------------------------------------- export
def _fmt_float(v: float, ty: str) -> str:
  if math.isnan(v) or math.isinf(v):  # hex bit patterns: MLIR has no literal for these
    import numpy as np
    np_t = dtypes.from_mlir(ty).np
    bits = np.array(v, dtype=np_t).view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(np_t).itemsize]).item()
    return f"{hex(bits)}"
  # rounded through float32 as every cast to bfloat16 and fp8 is (ml_dtypes, PyTorch)
  if ty in ("bf16", "f8E4M3FN", "f8E5M2"): v = float(dtypes.from_mlir(ty).np(v))
  s = repr(float(v))   # MLIR's float literal needs a point: 1e-08 -> 1.0e-08
  return s.replace("e", ".0e") if "e" in s and "." not in s else s

def attr_text(v, ty_hint: str | None = None) -> str:
  """A Python attribute value as MLIR attribute text (None: a unit flag)."""
  if v is None: return "unit"
  if isinstance(v, bool): return "true" if v else "false"
  if isinstance(v, tuple) and v and v[0] == "@sym": return "@" + v[1]
  if isinstance(v, tuple) and v and v[0] == "@raw": return v[1]
  if isinstance(v, tuple): return "array<i64" + (": " + ", ".join(str(int(x)) for x in v) if v else "") + ">"
  if isinstance(v, int): return f"{v} : i64"
  if isinstance(v, str): return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
  raise TypeError(f"cannot print attribute {v!r}")

def const_text(v, elem: str) -> str:
  if elem == "i1": return "true" if v else "false"
  if elem.startswith(("f", "bf")): return f"{_fmt_float(v, elem)} : {elem}"
  return f"{int(v)} : {elem.lstrip('u') if elem.startswith('ui') else elem}" if elem != "index" else f"{int(v)} : index"

@functools.lru_cache(maxsize=4096)   # a graph's ops share a few hundred lines of the user's
def _loc(loc: str | None) -> str:
  if not loc: return ""
  m = re.fullmatch(r"(.*?):(\d+)(?::(\d+))?", loc)
  return f' loc("{m.group(1)}":{m.group(2)}:{m.group(3) or 0})' if m else f' loc("{loc}")'

def inherited_locs(order: list[UOp]) -> dict[UOp, str | None]:
  """The location each node of `order` (sources before users) is printed at: its own, else that of its nearest user that
  has one (a pass's new ops come from the ops that use them: a load from the add it feeds, a range from its reduce), else
  that of its nearest source (a sink, a store of a new buffer). Hash-consed nodes are shared, so nothing is written back."""
  loc = {u: u.loc for u in order}
  for u in reversed(order):
    if (l := loc[u]) is not None:
      for s in u.src:
        if loc.get(s, "") is None: loc[s] = l
  for u in order:
    if loc[u] is None: loc[u] = next((loc[s] for s in u.src if loc.get(s) is not None), None)
  return loc

def func_text(f: Func) -> str:
  names: dict[UOp, str] = {}
  lines: list[str] = []
  order: list[UOp] = []
  seen: set[UOp] = set()
  for r in f.all_roots():
    for u in r.toposort:
      if u not in seen: seen.add(u); order.append(u)
  locs = inherited_locs(order)
  # an argument is where its first reader is, the function and its return where its first result is
  args = [f"%arg{i}: {ty(t)}" + (" {" + ", ".join(f"{k} = {v}" for k, v in f.arg_attrs[i].items()) + "}" if f.arg_attrs and f.arg_attrs[i] else "")
          + _loc(locs.get(t)) for i, t in enumerate(f.args)]
  floc = _loc(next((l for r in f.all_roots() if (l := locs.get(r))), None))
  for u in order:
    if u.op is Ops.BUFFER and u.attrs.get("slot") is not None and u.attrs["slot"] < len(f.args) and f.args[u.attrs["slot"]] is u:
      names[u] = f"%arg{u.attrs['slot']}"; continue
    a = dict(u.attrs)
    a.pop("shape", None)   # in the result type
    if u.op is Ops.CONST: a["value"] = ("@raw", const_text(a["value"], u.dtype.base.mlir))
    atext = ", ".join(f"{k} = {v[1] if isinstance(v, tuple) and v and v[0] == '@raw' else attr_text(v)}" for k, v in sorted(a.items()))
    res = "" if u.op is Ops.SINK else f"%{len(names)} = "
    if res: names[u] = f"%{len(names)}"
    ins = ", ".join(names[s] for s in u.src)
    sig = f"({', '.join(ty(s) for s in u.src)}) -> " + ("()" if u.op is Ops.SINK else ty(u))
    lines.append(f'    {res}"uop.{u.op}"({ins})' + (f" {{{atext}}}" if atext else "") + f" : {sig}{_loc(locs[u])}")
  ret = "    return" + (" " + ", ".join(names[r] for r in f.results) + " : " + ", ".join(ty(r) for r in f.results) if f.results else "")
  fattrs = (" attributes {" + ", ".join(k if v is None else f"{k} = {attr_text(v)}" for k, v in f.attrs.items()) + "}") if f.attrs else ""
  vis = f"{f.visibility} " if f.visibility else ""
  rtys = (" -> (" + ", ".join(ty(r) for r in f.results) + ")") if f.results else ""
  return f"  func.func {vis}@{f.name}({', '.join(args)}){rtys}{fattrs} {{\n" + "\n".join(lines + [ret + floc]) + f"\n  }}{floc}\n"

def module_text(funcs: list[Func]) -> str: return "module {\n" + "".join(func_text(f) for f in funcs) + "}\n"

# ---------------------------------------------------------------- import
FILE_LOC = re.compile(r' ?loc\("([^"]*)":(\d+):(\d+)\)')   # a file:line:col location, with the space printed before it

def _py_attr(a: ir.Attribute):
  """MLIR attribute -> hashable Python value (the inverse of attr_text/const_text)."""
  if isinstance(a, ir.BoolAttr): return a.value
  if isinstance(a, ir.IntegerAttr): return a.value
  if isinstance(a, ir.FloatAttr): return a.value
  if isinstance(a, ir.StringAttr): return a.value
  if isinstance(a, ir.DenseI64ArrayAttr): return tuple(a)
  if isinstance(a, ir.FlatSymbolRefAttr): return ("@sym", a.value)
  if isinstance(a, ir.TypeAttr): return ("@type", str(a.value))
  return ("@raw", str(a))

def _func_attr(a: ir.Attribute):
  """A function attribute as the Python value attr_text prints back unchanged: None for a unit flag, int for an i64,
  a tuple for array<i64>, str, bool; anything else is kept as its text."""
  if isinstance(a, ir.UnitAttr): return None
  if isinstance(a, ir.IntegerAttr) and not isinstance(a, ir.BoolAttr) and str(a.type) != "i64": return ("@raw", str(a))
  v = _py_attr(a)
  return v if isinstance(v, (bool, int, str)) or (isinstance(v, tuple) and v[:1] not in (("@type",),)) else ("@raw", str(a))

def _unsigned_fix(v, ty: str):
  """IntegerAttr.value reads the bits as signed; constants of unsigned types are kept as their unsigned value."""
  m = re.search(r"ui(\d+)", ty)
  return v % (1 << int(m.group(1))) if m and isinstance(v, int) else v

def _dict_items(d: ir.DictAttr) -> dict[str, str]:
  return {na.name: str(na.attr) for na in (d[i] for i in range(len(d)))}

def loc_of(op) -> str | None:
  m = FILE_LOC.search(str(op.location))
  return f"{m.group(1)}:{m.group(2)}:{m.group(3)}" if m else None

_OP_NAMES = frozenset(Ops)

class IRImportError(Exception):
  def __init__(self, msg: str, loc: str | None = None): super().__init__(msg); self.loc = loc

def import_func(fop) -> Func:
  """A func.func operation -> Func of UOp DAGs."""
  body = fop.regions[0].blocks[0]
  ftype = ir.FunctionType(ir.TypeAttr(fop.attributes["function_type"]).value)
  try:
    args = [arg_buffer(i, *parse_type(str(t))) for i, t in enumerate(ftype.inputs)]
    if any(DYN in (a.attrs.get("shape") or ()) for a in args): raise TypeError("graph inputs have static shapes")
  except TypeError as e: raise IRImportError(f"@{ir.StringAttr(fop.attributes['sym_name']).value}: {e}", loc_of(fop)) from None
  vals: dict = dict(zip(body.arguments, args))
  f = Func(ir.StringAttr(fop.attributes["sym_name"]).value, args, [])
  for k, v in fop.attributes.items():
    if k not in ("sym_name", "function_type", "sym_visibility", "arg_attrs", "res_attrs"): f.attrs[k] = _func_attr(v)
  if "sym_visibility" in fop.attributes: f.visibility = ir.StringAttr(fop.attributes["sym_visibility"]).value
  if "arg_attrs" in fop.attributes:
    f.arg_attrs = [_dict_items(ir.DictAttr(d)) for d in ir.ArrayAttr(fop.attributes["arg_attrs"])]
  for op in body.operations:
    name = op.operation.name
    if name == "func.return":
      f.results = [vals[o] for o in op.operands]; continue
    if not name.startswith("uop."): raise IRImportError(f"expected only uop ops in @{f.name}, got {name}", loc_of(op))
    if (opname := name[4:]) not in _OP_NAMES: raise IRImportError(f"unknown op {name}", loc_of(op))
    rty = str(op.results[0].type) if len(op.results) else "none"
    try: dtype, shape = parse_type(rty) if len(op.results) else (dtypes.void, None)
    except TypeError as e: raise IRImportError(f"{name}: {e}", loc_of(op)) from None
    a = {}
    for k, attr in op.attributes.items():
      v = _py_attr(attr)
      a[k] = _unsigned_fix(v, rty) if opname == "const" else Ops(v) if k == "op" and isinstance(v, str) and v in _OP_NAMES else v
    if (o := Ops(opname)) in SHAPE_ATTR and shape is not None: a["shape"] = shape
    u = UOp(o, dtype, tuple(vals[x] for x in op.operands), mkattrs(**a), loc_of(op))
    if (u.shape if u.shape is None else tuple(d if isinstance(d, int) else DYN for d in u.shape)) != shape:
      raise IRImportError(f"{name}: result type {rty} does not match its operands", loc_of(op))
    if len(op.results): vals[op.results[0]] = u
    else: f.roots.append(u)
  return f

def import_module(module: ir.Module | ir.Operation) -> list[Func]:
  mop = module.operation if isinstance(module, ir.Module) else module
  return [import_func(op) for op in mop.regions[0].blocks[0].operations if op.operation.name == "func.func"]

_REBUILT = "<rebuilt by a pass>"   # the source name of a pass's output text: its positions are nobody's source lines

def replace_module_body(module_op: ir.Operation, text: str) -> None:
  """Swap the module's contents for the ops parsed from text (used by Python passes that rebuild the IR). A function the
  input had (by name, at any depth: a gpu.func) keeps the input's location, and its arguments theirs by position; an op
  the text gives no location gets one of the input, never a position in the text: a top-level op its first located
  op's, any other op (and block argument) its parent's."""
  with module_op.context:
    new = ir.Operation.parse(text, source_name=_REBUILT)
  block = module_op.regions[0].blocks[0]
  old = {n: (op.location, [a.location for a in op.regions[0].blocks[0].arguments] if _has_body(op) else [])
         for op in block.operations if (n := _sym(op)) is not None}
  for op in list(block.operations): op.erase()
  for op in list(new.regions[0].blocks[0].operations):
    block.append(op)
    op = op.operation
    if _rebuilt(op.location) and _sym(op) not in old: op.location = _first_located(op) or module_op.location
    op.walk(lambda o: _relocate(o, old), ir.WalkOrder.PRE_ORDER)

def _sym(op) -> str | None:
  return ir.StringAttr(op.attributes["sym_name"]).value if "sym_name" in op.attributes else None
def _has_body(op) -> bool: return len(op.regions) > 0 and len(op.regions[0].blocks) > 0
def _rebuilt(loc: ir.Location) -> bool: return loc.is_a_file() and loc.filename == _REBUILT

def _first_located(top: ir.Operation) -> ir.Location | None:
  found = []
  def visit(op):
    if _rebuilt(op.location): return ir.WalkResult.ADVANCE
    found.append(op.location); return ir.WalkResult.INTERRUPT
  top.walk(visit, ir.WalkOrder.PRE_ORDER)
  return found[0] if found else None

def _relocate(op: ir.Operation, old: dict) -> ir.WalkResult:
  """op (its parent already done) and its blocks' arguments at locations of the input (see replace_module_body)."""
  if (prev := old.get(_sym(op)) if "sym_name" in op.attributes else None) is not None: op.location = prev[0]
  elif _rebuilt(op.location): op.location = op.parent.location
  for r in op.regions:
    for b in r.blocks:
      args = prev[1] if prev is not None and b == op.regions[0].blocks[0] else []
      for i, a in enumerate(b.arguments):
        if i < len(args): a.set_location(args[i])
        elif _rebuilt(a.location): a.set_location(op.location)
  return ir.WalkResult.ADVANCE
