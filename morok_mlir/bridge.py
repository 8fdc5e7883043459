"""MLIR text <-> UOp DAGs. A module is a list of `Func`s; function arguments become `buffer` UOps (slot = argument
number), `func.return` operands are the results, and roots without results (sink) are kept as roots."""
from __future__ import annotations
import math, re
from dataclasses import dataclass, field
from mlir import ir
from .uop import UOp, attrs as mkattrs

@dataclass
class Func:
  name: str
  args: list[str]                   # argument MLIR types
  results: list[UOp]                # func.return operands
  roots: list[UOp] = field(default_factory=list)  # result-less ops that must be kept (uop.sink)
  attrs: dict = field(default_factory=dict)       # function attributes: name -> Python value (None: a unit flag; see _py_attr)
  arg_attrs: list[dict] | None = None
  visibility: str | None = None
  def all_roots(self) -> list[UOp]: return self.results + self.roots

# ---------------------------------------------------------------- export
def _fmt_float(v: float, ty: str) -> str:
  if math.isnan(v) or math.isinf(v):  # hex bit patterns: MLIR has no literal for these
    import numpy as np
    np_t = {"f16": np.float16, "f32": np.float32, "f64": np.float64}[ty]
    bits = np.array(v, dtype=np_t).view({2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(np_t).itemsize]).item()
    return f"{hex(bits)}"
  return repr(float(v))

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

def _loc(u: UOp) -> str:
  if not u.loc: return ""
  m = re.fullmatch(r"(.*?):(\d+)(?::(\d+))?", u.loc)
  return f' loc("{m.group(1)}":{m.group(2)}:{m.group(3) or 0})' if m else f' loc("{u.loc}")'

def _elem(ty: str) -> str:
  """Element type of a shaped type ('tensor<4xi32>' -> 'i32'), or ty itself for a scalar."""
  m = re.search(r"[<x]([a-z]+\d*)>$", ty)
  return m.group(1) if m and ty.startswith(("tensor", "vector", "memref")) else ty

def func_text(f: Func) -> str:
  names: dict[UOp, str] = {}
  lines: list[str] = []
  args = [f"%arg{i}: {t}" + (" {" + ", ".join(f"{k} = {v}" for k, v in f.arg_attrs[i].items()) + "}" if f.arg_attrs and f.arg_attrs[i] else "")
          for i, t in enumerate(f.args)]
  order: list[UOp] = []
  seen: set[UOp] = set()
  for r in f.all_roots():
    for u in r.toposort:
      if u not in seen: seen.add(u); order.append(u)
  for u in order:
    if u.op == "buffer" and u.attrs.get("slot") is not None and u.attrs["slot"] < len(f.args) and f.args[u.attrs["slot"]] == u.ty:
      names[u] = f"%arg{u.attrs['slot']}"; continue
    a = dict(u.attrs)
    if u.op == "const": a["value"] = ("@raw", const_text(a["value"], _elem(u.ty)))
    atext = ", ".join(f"{k} = {v[1] if isinstance(v, tuple) and v and v[0] == '@raw' else attr_text(v)}" for k, v in sorted(a.items()))
    res = "" if u.op == "sink" else f"%{len(names)} = "
    if res: names[u] = f"%{len(names)}"
    ins = ", ".join(names[s] for s in u.src)
    sig = f"({', '.join(s.ty for s in u.src)}) -> " + ("()" if u.op == "sink" else u.ty)
    lines.append(f'    {res}"uop.{u.op}"({ins})' + (f" {{{atext}}}" if atext else "") + f" : {sig}{_loc(u)}")
  ret = "    return" + (" " + ", ".join(names[r] for r in f.results) + " : " + ", ".join(r.ty for r in f.results) if f.results else "")
  fattrs = (" attributes {" + ", ".join(k if v is None else f"{k} = {attr_text(v)}" for k, v in f.attrs.items()) + "}") if f.attrs else ""
  vis = f"{f.visibility} " if f.visibility else ""
  rtys = (" -> (" + ", ".join(r.ty for r in f.results) + ")") if f.results else ""
  return f"  func.func {vis}@{f.name}({', '.join(args)}){rtys}{fattrs} {{\n" + "\n".join(lines + [ret]) + "\n  }\n"

def module_text(funcs: list[Func]) -> str: return "module {\n" + "".join(func_text(f) for f in funcs) + "}\n"

# ---------------------------------------------------------------- import
_LOC = re.compile(r'loc\("([^"]*)":(\d+):(\d+)\)')

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
  m = _LOC.search(str(op.location))
  return f"{m.group(1)}:{m.group(2)}:{m.group(3)}" if m else None

class IRImportError(Exception):
  def __init__(self, msg: str, loc: str | None = None): super().__init__(msg); self.loc = loc

def import_func(fop) -> Func:
  """A func.func operation -> Func of UOp DAGs."""
  body = fop.regions[0].blocks[0]
  ftype = ir.FunctionType(ir.TypeAttr(fop.attributes["function_type"]).value)
  args = [str(t) for t in ftype.inputs]
  vals: dict = {}
  for i, a in enumerate(body.arguments): vals[a] = UOp("buffer", args[i], (), mkattrs(slot=i))
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
    opname = name[4:]
    a = {}
    for k, attr in op.attributes.items():
      v = _py_attr(attr)
      a[k] = _unsigned_fix(v, str(op.results[0].type)) if opname == "const" else v
    ty = str(op.results[0].type) if len(op.results) else "()"
    u = UOp(opname, ty, tuple(vals[o] for o in op.operands), mkattrs(**a), loc_of(op))
    if len(op.results): vals[op.results[0]] = u
    else: f.roots.append(u)
  return f

def import_module(module: ir.Module | ir.Operation) -> list[Func]:
  mop = module.operation if isinstance(module, ir.Module) else module
  return [import_func(op) for op in mop.regions[0].blocks[0].operations if op.operation.name == "func.func"]

def replace_module_body(module_op: ir.Operation, text: str) -> None:
  """Swap the module's contents for the ops parsed from text (used by Python passes that rebuild the IR)."""
  with module_op.context:
    new = ir.Module.parse(text)
  block = module_op.regions[0].blocks[0]
  for op in list(block.operations): op.erase()
  for op in list(new.body.operations): block.append(op)
