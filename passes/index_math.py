"""Smart constructors for index arithmetic on `index` UOps: they fold constants and drop trivial terms as they
build, so rangeify's output is small before uop-simplify runs. Bounds come from `uop.range` ends."""
from __future__ import annotations
from morok_mlir.uop import UOp, attrs
from . import symbolic

def const(v: int, ty: str = "index") -> UOp: return UOp("const", ty, (), attrs(value=int(v) if ty != "i1" else bool(v)))
def cval(u: UOp): return u.attrs["value"] if u.op == "const" else None

def bounds(u: UOp) -> tuple[int, int]:
  """Inclusive [min, max] of an index expression: the simplifier's value bounds, one definition for all passes."""
  return symbolic.bounds(u)

def _bin(op, a: UOp, b: UOp) -> UOp: return UOp(op, "index", (a, b))

def add(a: UOp, b: UOp) -> UOp:
  if cval(a) == 0: return b
  if cval(b) == 0: return a
  if cval(a) is not None and cval(b) is not None: return const(cval(a) + cval(b))
  if b.op == "const" and a.op == "add" and cval(a.src[1]) is not None: return add(a.src[0], const(cval(a.src[1]) + cval(b)))
  return _bin("add", a, b)

def sub(a: UOp, b: UOp) -> UOp:
  if cval(b) is not None: return add(a, const(-cval(b)))
  return _bin("sub", a, b)

def mul(a: UOp, b: UOp) -> UOp:
  if cval(a) == 0 or cval(b) == 0: return const(0)
  if cval(b) == 1: return a
  if cval(a) == 1: return b
  if cval(a) is not None and cval(b) is not None: return const(cval(a) * cval(b))
  return _bin("mul", a, b)

def idiv(a: UOp, c: int) -> UOp:
  lo, hi = bounds(a)
  if c == 1: return a
  if lo >= 0 and hi < c: return const(0)
  if cval(a) is not None: return const(int(cval(a) / c))
  return _bin("idiv", a, const(c))

def mod(a: UOp, c: int) -> UOp:
  lo, hi = bounds(a)
  if c == 1: return const(0)
  if lo >= 0 and hi < c: return a
  return _bin("mod", a, const(c))

def linearize(idx, shape) -> UOp:
  out, stride = const(0), 1
  for i, s in reversed(list(zip(idx, shape))):
    if s != 1: out = add(mul(i, const(stride)), out) if cval(out) != 0 else mul(i, const(stride))
    stride *= s
  return out

def unravel(lin: UOp, shape) -> tuple[UOp, ...]:
  if 0 in shape: return tuple(const(0) for _ in shape)  # nothing is ever indexed
  out, stride = [], 1
  for s in reversed(shape):
    out.append(const(0) if s == 1 else mod(idiv(lin, stride), s) if stride * s < 1 << 62 else idiv(lin, stride))
    stride *= s
  # the outermost dim needs no mod: lin < prod(shape)
  res = list(reversed(out))
  if shape and shape[0] != 1: res[0] = idiv(lin, stride // shape[0])
  return tuple(res)

def in_bounds(i: UOp, lo: int, hi: int):
  """i in [lo, hi) as an i1 UOp, None if always true, False if never."""
  a, b = bounds(i)
  if a >= hi or b < lo: return False
  conds = []
  if a < lo: conds.append(UOp("cmplt", "i1", (const(lo - 1), i)))
  if b >= hi: conds.append(UOp("cmplt", "i1", (i, const(hi))))
  out = None
  for c in conds: out = and_(out, c)
  return out

def and_(a, b):
  if a is False or b is False: return False
  if a is None: return b
  if b is None: return a
  return UOp("and", "i1", (a, b))
