"""IRDL definition of the `uop` dialect, generated from the op table, and the MLIR context that holds it."""
from __future__ import annotations
import re, sys, types
from morok_mlir.ir import load as _load_mlir
_load_mlir()
from mlir import ir
from mlir.dialects import irdl
from morok_mlir.dialects.ops import OPS, OpDef, parse_sig

_ATTR_BASE = {"str": '"#builtin.string"', "int": '"#builtin.integer"', "ints": '"#builtin.dense_array"',
              "type": '"#builtin.type"', "sym": '"#builtin.symbol_ref"'}
_FRESH = {"any": "irdl.any", "tensor": 'irdl.base "!builtin.tensor"', "memref": 'irdl.base "!builtin.memref"',
          "index": "irdl.is index", "i1": "irdl.is i1", "token": "irdl.parametric @uop::@token<>"}

def _irdl_op(op: OpDef) -> str:
  lines, bound, n = [], {}, 0
  def constraint(ty: str) -> str:
    nonlocal n
    if (m := re.fullmatch(r"ptr<(\w+)>", ty)):
      elem = constraint(m.group(1))
      n += 1; lines.append(f"%c{n} = irdl.parametric @uop::@ptr<{elem}>"); return f"%c{n}"
    if ty in bound: return bound[ty]
    n += 1; lines.append(f"%c{n} = {_FRESH.get(ty, 'irdl.any')}")
    if ty not in _FRESH: bound[ty] = f"%c{n}"  # a capital variable unifies, as in IRDL
    return f"%c{n}"
  sig = lambda s: ", ".join(f"{nm}: {'' if v == 'single' else v + ' '}{constraint(ty)}" for nm, ty, v in parse_sig(s))
  operands, results = sig(op.operands), sig(op.results)
  attrs = []
  for name, kind in op.attrs.items():
    n += 1; lines.append(f"%c{n} = " + (f"irdl.base {_ATTR_BASE[kind]}" if kind in _ATTR_BASE else "irdl.any")); attrs.append(f'"{name}" = %c{n}')
  if attrs: lines.append("irdl.attributes {" + ", ".join(attrs) + "}")
  lines += [f"irdl.operands({operands})", f"irdl.results({results})"]
  return f"  irdl.operation @{op.name} {{\n" + "".join(f"    {l}\n" for l in lines) + "  }\n"

IRDL_SOURCE = ("irdl.dialect @uop {\n"
               "  irdl.type @ptr {\n    %e = irdl.any\n    irdl.parameters(elem: %e)\n  }\n"
               "  irdl.type @token {\n    irdl.parameters()\n  }\n"
               + "".join(_irdl_op(o) for o in OPS.values()) + "}\n")

def load_uop_dialect(ctx: ir.Context) -> None:
  """Register `uop` in ctx. Loading twice into one context aborts MLIR, so a context is marked once loaded."""
  if getattr(ctx, "_uop_loaded", False): return
  with ctx, ir.Location.unknown():
    irdl.load_dialects(ir.Module.parse(IRDL_SOURCE))
  ctx._uop_loaded = True
  # The bindings look for a Python module `mlir.dialects.<namespace>` every time they wrap a `uop` op and do not
  # remember a failed import: an empty placeholder makes walking a module ~200x faster.
  sys.modules.setdefault("mlir.dialects.uop", types.ModuleType("mlir.dialects.uop"))

def new_context() -> ir.Context:
  ctx = ir.Context()
  ctx.allow_unregistered_dialects = False
  load_uop_dialect(ctx)
  return ctx
