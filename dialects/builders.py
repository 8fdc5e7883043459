"""Python builders for every uop op, generated from the op table: `b.add(x, y)`, `b.permute(x, order=[1, 0],
type="tensor<3x2xf32>")`. Operands are positional in table order (a variadic operand takes a list, an optional one
may be None); attributes are keywords; `type=` gives the result type where the table does not determine it.
Everything is checked in Python before MLIR sees it (the wheels abort on misuse); a bad call raises ValueError."""
from __future__ import annotations
import keyword, re
from morok_mlir.ir import load as _load_mlir
_load_mlir()
from mlir import ir
from morok_mlir.dialects.ops import OPS, COMPARE, OpDef, parse_sig
from morok_mlir.dialects.verify import check_op

# constraint -> predicate on a type's text (a capital variable accepts anything: unification is checked separately)
_KIND = {"tensor": lambda t: t.startswith("tensor<"), "memref": lambda t: t.startswith("memref<"),
         "index": lambda t: t == "index", "i1": lambda t: t == "i1", "token": lambda t: t == "!uop.token",
         "any": lambda t: True}
_PTR = re.compile(r"ptr<(\w+)>")

def _ctx() -> ir.Context:
  ctx = ir.Context.current  # raises ValueError outside `with ctx`
  if not getattr(ctx, "_uop_loaded", False): raise ValueError("the uop dialect is not loaded in this context (use new_context())")
  return ctx

def _type(t) -> ir.Type:
  if isinstance(t, ir.Type): return t
  try: return ir.Type.parse(str(t))
  except ir.MLIRError as e: raise ValueError(f"bad type {t!r}: {e}") from None

def _attr(op: str, name: str, kind: str, v, result_ty: str | None) -> ir.Attribute:
  if isinstance(v, ir.Attribute): return v
  bad = lambda want: ValueError(f"uop.{op}: attribute '{name}' expects {want}, got {v!r}")
  if kind == "str":
    if not isinstance(v, str): raise bad("a str")
    return ir.StringAttr.get(v)
  if kind == "int":
    if not isinstance(v, int) or isinstance(v, bool) or not -2**63 <= v < 2**63: raise bad("an int64")
    return ir.IntegerAttr.get(ir.IntegerType.get_signless(64), v)
  if kind == "ints":
    if not isinstance(v, (list, tuple)) or not all(isinstance(x, int) and not isinstance(x, bool) and -2**63 <= x < 2**63 for x in v): raise bad("a list of int64")
    return ir.DenseI64ArrayAttr.get(list(v))
  if kind == "type": return ir.TypeAttr.get(_type(v))
  if kind == "sym":
    if not isinstance(v, str) or not v: raise bad("a symbol name")
    return ir.FlatSymbolRefAttr.get(v.lstrip("@"))
  if kind == "value":  # a Python scalar takes the result's element type (ui8 constants carry signless values)
    elem = re.sub(r"^(tensor|vector)<(?:\d+x)*(.*)>$", r"\2", result_ty or "")
    if elem == "index" or (m := re.fullmatch(r"[su]?i(\d+)", elem)):
      bits = 64 if elem == "index" else int(m.group(1))
      if not isinstance(v, int) or not -2**(bits - 1) <= v < 2**bits: raise bad(f"an int that fits {elem}")
      return ir.IntegerAttr.get(_type(re.sub(r"^[su]", "", elem)), int(v))
    if re.fullmatch(r"b?f\d+", elem):
      if not isinstance(v, (int, float)) or isinstance(v, bool): raise bad(f"a float for {elem}")
      return ir.FloatAttr.get(_type(elem), float(v))
    raise bad(f"a number matching the result type ({elem or 'none'})")
  raise bad(kind)

def _infer(op: OpDef, bound: dict, ins: list[str]) -> str | None:
  (_, rc, _), = parse_sig(op.results)
  if op.name in COMPARE: return re.sub(r"(<(?:\d+x)*)[^<>]+>$", r"\1i1>", ins[0]) if ins[0].endswith(">") else "i1"
  if op.name == "gather": return re.sub(r"(<(?:\d+x)*)[^<>]+>$", lambda m: m.group(1) + re.sub(r"^.*x|^tensor<|>$", "", ins[0]) + ">", ins[1])
  if rc in ("index", "token"): return {"index": "index", "token": "!uop.token"}[rc]
  if (m := _PTR.fullmatch(rc)):
    elem = bound.get(m.group(1)) or next((re.sub(r"^memref<(?:\d+x)*(.*)>$", r"\1", t) for t in ins if t.startswith("memref<")), None)
    return elem and f"!uop.ptr<{elem}>"
  return bound.get(rc)

def build(name: str, /, *args, type=None, loc: ir.Location | None = None, **attrs):
  """Create uop.<name> at the current insertion point; returns its result Value (or the Operation if none)."""
  if name not in OPS: raise ValueError(f"unknown uop op {name!r}")
  op, ctx = OPS[name], _ctx()
  sig = parse_sig(op.operands)
  if len(args) > len(sig) or len(args) < sum(v == "single" for _, _, v in sig):
    raise ValueError(f"uop.{name} takes operands ({op.operands}), got {len(args)}")
  operands, bound, seg = [], {}, []
  for (oname, c, var), a in zip(sig, list(args) + [None] * (len(sig) - len(args))):
    vals = list(a or ()) if var == "variadic" else [] if a is None and var == "optional" else [a]
    for v in vals:
      if not isinstance(v, ir.Value): raise ValueError(f"uop.{name}: operand '{oname}' must be an ir.Value, got {v!r}")
      t, m = str(v.type), _PTR.fullmatch(c)
      if m and not t.startswith("!uop.ptr<"): raise ValueError(f"uop.{name}: operand '{oname}' must be !uop.ptr<...>, got {t}")
      key, t = (m.group(1), t[9:-1]) if m else (c, t)
      if key in _KIND:
        if not _KIND[key](t): raise ValueError(f"uop.{name}: operand '{oname}' must be {key}, got {t}")
      elif bound.setdefault(key, t) != t: raise ValueError(f"uop.{name}: operand '{oname}' has type {t}, expected {bound[key]}")
      operands.append(v)
  ins = [str(v.type) for v in operands]
  results = parse_sig(op.results)
  rty = None
  if results:
    rty = str(type) if type is not None else _infer(op, bound, ins)
    if rty is None: raise ValueError(f"uop.{name}: pass the result type with type=...")
  if set(attrs) != set(op.attrs):
    raise ValueError(f"uop.{name}: attributes are {sorted(op.attrs) or 'none'}, got {sorted(attrs)}")
  with ctx, loc or ir.Location.unknown():
    res = [_type(rty)] if rty else []
    a = {k: _attr(name, k, op.attrs[k], v, rty) for k, v in attrs.items()}
    o = ir.Operation.create(f"uop.{name}", results=res, operands=operands, attributes=a)
    try: o.verify()
    except ir.MLIRError as e: o.erase(); raise ValueError(f"uop.{name}: {e}") from None
    if (msg := check_op(o)): o.erase(); raise ValueError(f"uop.{name}: {msg}")
  return o.results[0] if res else o

def _builder(name: str):
  op = OPS[name]
  f = lambda *args, **kw: build(name, *args, **kw)
  f.__name__ = f.__qualname__ = name + "_" * keyword.iskeyword(name)
  f.__doc__ = f"{op.doc}\n\nOperands: ({op.operands}); result: {op.results or 'none'}; attributes: {op.attrs or 'none'}."
  return f

# one function per op; Python keywords get a trailing underscore (and_, or_, if_)
for _n in OPS: globals()[_n + "_" * keyword.iskeyword(_n)] = _builder(_n)
__all__ = ["build"] + [n + "_" * keyword.iskeyword(n) for n in OPS]
