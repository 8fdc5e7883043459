"""The Z3 prover of the rewrite rules in `symbolic.py`: every rule, for every op and dtype its pattern can match.

For each instance the pattern is built with placeholders (Z3 variables: bit-vectors at the dtype's width for
integers, index (64) and bools (1), Z3 floating point for f16/bf16/f32/f64), the rule's guard and rhs run under the Z3
semantics context (so constant folding executes the real folding code on symbolic values), and Z3 must show:
  assumptions (value bounds, guard, the LHS is defined) => the RHS is defined and LHS == RHS.
Equality of floats is SMT `=`: NaN equals NaN, +0.0 differs from -0.0, so rules unsound at NaN/Inf/-0.0 fail.
Undefined behaviour, as in C and MLIR: division/remainder by zero, shifts by >= the width or < 0, float->int casts
of NaN or out-of-range values. Transcendentals (exp2 log2 sin pow) are uninterpreted functions: their folded values
are numpy's by definition; the proof shows they are applied to the right operands.

Rules marked `proof="int"` (division by a symbolic divisor: bit-blasting it past 8 bits does not finish) are proven
at every integer width in two machine-checked steps, see `ISem`: in Z3's integers LHS == RHS under the guard, and
no operand of a division, remainder, max or min leaves the dtype's range, so the values at the width are the same."""
from __future__ import annotations
import itertools, sys, time
import z3
from morok_mlir.core.uop import UOp, attrs
from morok_mlir.core.dtype import DType, dtypes
from morok_mlir.core.pattern import UPat, elem
from morok_mlir.core.symbolic import (RULES, Rule, OP_DTYPES, CMP_ALU, FLOATS, PyDom, INT_SEM, semantics, dt_of, lossless, pydom)
from morok_mlir.dialects.ops import Ops

DTS = ("i1", "i8", "ui8", "i16", "i32", "ui32", "i64", "ui64", "index", "f16", "bf16", "f32", "f64")
IDTS = ("i8", "ui8", "i16", "ui16", "i32", "ui32", "i64", "ui64", "index")  # the widths of the integer method
W = 136  # guards compute exactly in this width: products of two 64-bit bounds plus sums never overflow it
RNE, RTZ = z3.RNE(), z3.RTZ()
# bfloat16 ops run in float32 and round once: for + - * / sqrt that equals rounding the exact result (24 >= 2 * 8 + 2 bits)
_FP = {"f16": z3.Float16(), "bf16": z3.FPSort(8, 8), "f32": z3.Float32(), "f64": z3.Float64()}

def width(e: str) -> int: return 64 if e == "index" else dt_of(e).bits
def sort(e: str): return _FP[e] if e in _FP else z3.BitVecSort(width(e))
def signed(e: str) -> bool: return e in ("i8", "i16", "i32", "i64", "index")
def bv1(c): return z3.If(c, z3.BitVecVal(1, 1), z3.BitVecVal(0, 1))
def zconst(v, e: str):
  return z3.FPVal(float(v), _FP[e]) if e in _FP else z3.BitVecVal(int(v), width(e))
def widen(t, e: str):
  return z3.SignExt(W - t.size(), t) if signed(e) else z3.ZeroExt(W - t.size(), t)
_UF: dict = {}
def uf(name: str, e: str, n: int = 1):
  if (f := _UF.get((name, e))) is None: f = _UF[(name, e)] = z3.Function(f"{name}_{e}", *[_FP[e]] * (n + 1))
  return f

def z3_cast(v, src: str, dst: str):
  """The value conversion `cast` (spec): float->int truncates, ->bool is != 0, bool-> is 0/1, floats round to nearest."""
  if dst == "i1": return bv1(z3.Not(z3.fpIsZero(v)) if src in _FP else v != 0)
  if src == "i1": return z3.If(v == 1, zconst(1, dst), zconst(0, dst))
  if dst == "bf16" and src != "f32": v, src = z3_cast(v, src, "f32"), "f32"   # every conversion to bfloat16 goes through float32
  if dst in _FP:
    if src in _FP: return z3.fpFPToFP(RNE, v, _FP[dst])
    return (z3.fpSignedToFP if signed(src) else z3.fpUnsignedToFP)(RNE, v, _FP[dst])
  if src in _FP: return (z3.fpToSBV if signed(dst) else z3.fpToUBV)(RTZ, v, z3.BitVecSort(width(dst)))
  n, m = width(src), width(dst)
  if m <= n: return z3.Extract(m - 1, 0, v)
  return (z3.SignExt if signed(src) else z3.ZeroExt)(m - n, v)
def z3_bitcast(v, src: str, dst: str):
  if src in _FP: v = z3.fpToIEEEBV(v)
  return z3.fpBVToFP(v, _FP[dst]) if dst in _FP else v
def cast_defined(v, src: str, dst: str):
  if src not in _FP or dst in _FP or dst == "i1": return z3.BoolVal(True)
  lo, hi = (-(1 << (width(dst) - 1)), 1 << (width(dst) - 1)) if signed(dst) else (0, 1 << width(dst))
  t = z3.fpRoundToIntegral(RTZ, v)
  return z3.And(z3.Not(z3.fpIsNaN(v)), z3.fpGEQ(t, zconst(lo, src)), z3.fpLT(t, zconst(hi, src)))

class ZDom:
  """The folding primitives of `symbolic.PyDom` on Z3 terms (one-liners, the mirror of PyDom)."""
  def __init__(self, e: str):
    self.e, self.float = e, e in _FP
    self.ones = z3.BitVecVal(-1, width(e)) if not self.float else None
  def arg(self, v): return v
  def out(self, v): return v
  def c(self, v): return zconst(v, self.e)
  ite = staticmethod(z3.If)
  def lt(self, a, b):
    if self.float: return z3.fpLT(a, b)
    return a < b if signed(self.e) else z3.ULT(a, b)
  def eq(self, a, b): return z3.fpEQ(a, b) if self.float else a == b
  def ne(self, a, b): return z3.Not(self.eq(a, b))
  def abs(self, a): return z3.If(a < 0, -a, a) if signed(self.e) else a
  udiv, urem = staticmethod(z3.UDiv), staticmethod(z3.URem)
  def shl(self, a, b): return a << b
  def shr(self, a, b): return a >> b if signed(self.e) else z3.LShR(a, b)
  b = staticmethod(bv1)
  truth = staticmethod(lambda v: v == 1)
  any = staticmethod(lambda *c: z3.Or(*c))
  isnan, signbit = staticmethod(z3.fpIsNaN), staticmethod(z3.fpIsNegative)
  def nan(self): return z3.fpNaN(_FP[self.e])
  def sqrt(self, a): return z3.fpSqrt(RNE, a)
  def trunc(self, a): return z3.fpRoundToIntegral(RTZ, a)
  def exp2(self, a): return uf("exp2", self.e)(a)
  def log2(self, a): return uf("log2", self.e)(a)
  def sin(self, a): return uf("sin", self.e)(a)
  def pow(self, a, b): return uf("pow", self.e, 2)(a, b)
  def cast(self, v, src: DType): return z3_cast(v, src.mlir, self.e)
  def bitcast(self, v, src: DType): return z3_bitcast(v, src.mlir, self.e)

# ---------------------------------------------------------------- the spec: each op as Z3 natives
def spec(op: str, e: str, a: list, out: str):
  """(term, defined) for op on operand terms a of element type e; out is the result's element type."""
  T = z3.BoolVal(True)
  if op is Ops.CAST: return z3_cast(a[0], e, out), cast_defined(a[0], e, out)
  if op is Ops.BITCAST: return z3_bitcast(a[0], e, out), T
  if op is Ops.WHERE: return z3.If(a[0] == 1, a[1], a[2]), T
  if e in _FP:
    x = a[0]; y = a[1] if len(a) > 1 else None
    nan = z3.Or(z3.fpIsNaN(x), z3.fpIsNaN(y)) if y is not None else None
    return {"add": lambda: x + y, "sub": lambda: x - y, "mul": lambda: x * y, "fdiv": lambda: z3.fpDiv(RNE, x, y),
            "neg": lambda: z3.fpNeg(x), "recip": lambda: z3.fpDiv(RNE, zconst(1.0, e), x), "sqrt": lambda: z3.fpSqrt(RNE, x),
            "trunc": lambda: z3.fpRoundToIntegral(RTZ, x), "mulacc": lambda: z3.fpFMA(RNE, x, y, a[2]),
            "max": lambda: z3.If(nan, z3.fpNaN(_FP[e]), z3.If(z3.fpLT(x, y), y, z3.If(z3.fpLT(y, x), x, z3.If(z3.fpIsNegative(x), y, x)))),
            "min": lambda: z3.If(nan, z3.fpNaN(_FP[e]), z3.If(z3.fpLT(x, y), x, z3.If(z3.fpLT(y, x), y, z3.If(z3.fpIsNegative(x), x, y)))),
            "cmplt": lambda: bv1(z3.fpLT(x, y)), "cmpeq": lambda: bv1(z3.fpEQ(x, y)), "cmpne": lambda: bv1(z3.Not(z3.fpEQ(x, y))),
            "exp2": lambda: uf("exp2", e)(x), "log2": lambda: uf("log2", e)(x), "sin": lambda: uf("sin", e)(x),
            "pow": lambda: uf("pow", e, 2)(x, y)}[op](), T
  x = a[0]; y = a[1] if len(a) > 1 else None; s, n = signed(e), width(e)
  lt = (lambda p, q: p < q) if s else z3.ULT
  shift_ok = z3.ULT(y, n) if y is not None else T
  return {"add": lambda: (x + y, T), "sub": lambda: (x - y, T), "mul": lambda: (x * y, T), "neg": lambda: (-x, T),
          "and": lambda: (x & y, T), "or": lambda: (x | y, T), "xor": lambda: (x ^ y, T),
          "idiv": lambda: (x / y if s else z3.UDiv(x, y), y != 0), "mod": lambda: (z3.SRem(x, y) if s else z3.URem(x, y), y != 0),
          "shl": lambda: (x << y, shift_ok), "shr": lambda: (x >> y if s else z3.LShR(x, y), shift_ok),
          "max": lambda: (z3.If(lt(x, y), y, x), T), "min": lambda: (z3.If(lt(x, y), x, y), T),
          "cmplt": lambda: (bv1(lt(x, y)), T), "cmpeq": lambda: (bv1(x == y), T), "cmpne": lambda: (bv1(x != y), T),
          "mulacc": lambda: (x * y + a[2], T)}[op]()

class ZSem:
  """The semantics context of one proof instance: symbolic consts, bounds, and the facts they imply."""
  def __init__(self):
    self.facts: list = []
    self.memo: dict = {}
    self.bnd: dict = {}
    self.fresh = itertools.count()
  def dom(self, dt: DType) -> ZDom: return ZDom(dt.mlir)
  def raw(self, u: UOp):
    v = u.attrs["value"]
    return v if isinstance(v, z3.ExprRef) else zconst(v, elem(u))
  def val(self, u: UOp):
    return self.raw(u) if elem(u) in _FP else widen(self.raw(u), elem(u))
  def _b(self, u: UOp):
    if u.op is Ops.CONST: return self.val(u), self.val(u)
    if u not in self.bnd:  # sound bounds: any lo <= value <= hi within the dtype's range (what vmin/vmax promise)
      k = next(self.fresh); lo, hi = z3.BitVec(f"lo{k}", W), z3.BitVec(f"hi{k}", W)
      v = widen(self.enc(u)[0], elem(u))
      self.facts += [self.dtmin(u) <= lo, lo <= v, v <= hi, hi <= self.dtmax(u)]
      self.bnd[u] = (lo, hi)
    return self.bnd[u]
  def vmin(self, u): return self._b(u)[0]
  def vmax(self, u): return self._b(u)[1]
  def dtmin(self, u): return z3.BitVecVal(-(1 << (width(elem(u)) - 1)) if signed(elem(u)) else 0, W)
  def dtmax(self, u): return z3.BitVecVal((1 << (width(elem(u)) - (1 if signed(elem(u)) else 0))) - 1, W)
  def all(self, *c): return z3.And(*[z3.BoolVal(x) if isinstance(x, bool) else x for x in c])
  def any(self, *c): return z3.Or(*[z3.BoolVal(x) if isinstance(x, bool) else x for x in c])
  def divides(self, a, b):  # a != 0 and b == a*k for some k (a fresh variable: an existential in the assumptions)
    k = z3.BitVec(f"k{next(self.fresh)}", W)
    return z3.And(a != 0, z3.ULE(k, 1 << 65), b == a * k)
  def foldable(self, op, dt, vals):
    if op in (Ops.IDIV, Ops.MOD): return vals[1] != 0
    if op in (Ops.SHL, Ops.SHR): return z3.And(vals[1] >= 0, vals[1] < width(dt.mlir))
    return not (op is Ops.MULACC and dt.is_float)
  def cast_ok(self, v, src: DType, dst: DType): return cast_defined(v, src.mlir, dst.mlir)
  def goal(self, lhs: UOp, rhs: UOp, g):  # (assumptions, the LHS is defined, conclusion)
    (l, ld), (r, rd) = self.enc(lhs), self.enc(rhs)
    return z3.And(*self.facts, g), ld, z3.And(rd, l == r)

  def enc(self, u: UOp):
    """(term, defined) of u; placeholders are Z3 variables, ranges add 0 <= r < end to the facts."""
    if u in self.memo: return self.memo[u]
    e = elem(u)
    if u.op is Ops.DEFINE_VAR: r = (z3.Const(u.attrs["name"], sort(e)), z3.BoolVal(True))
    elif u.op is Ops.CONST: r = (self.raw(u), z3.BoolVal(True))
    elif u.op is Ops.RANGE:
      end, d = self.enc(u.src[0]); v = z3.BitVec(f"r{next(self.fresh)}", 64)
      self.facts += [v >= 0, v < end]
      r = (v, d)
    elif u.op in (Ops.LOAD, Ops.REDUCE):   # data (what a load reads, a reduce over it): any value, one per node
      r = (z3.Const(f"data{next(self.fresh)}", sort(e)), z3.BoolVal(True))
    else:
      subs = [self.enc(s) for s in u.src]
      t, d = spec(u.op, elem(u.src[-1]), [s[0] for s in subs], e)
      r = (t, z3.And(d, *[s[1] for s in subs]))
    self.memo[u] = r
    return r

# ---------------------------------------------------------------- the integer method: Z3 integers, then no overflow
# Every BV op is the integer op mod 2^n as SMT-LIB defines it (bvsdiv/bvsrem truncate, like C): add sub mul neg agree
# with the integers mod 2^n on any operands, idiv mod max min on operands in the dtype's range (INT_MIN / -1 wraps
# to INT_MIN, which is 2^(n-1) mod 2^n). So if every operand of those lies in range and every divisor is nonzero at
# the width, by induction over the tree each node's value at the width is its integer value mod 2^n, and LHS == RHS
# in the integers gives it at the width. Bounds are only taken of placeholders, whose integer value is their value.
class NotInt(Exception): pass
RING, LEAF = (Ops.ADD, Ops.SUB, Ops.MUL, Ops.NEG), (Ops.DEFINE_VAR, Ops.CONST)
def tdiv(a, b): return z3.If(a >= 0, a / b, -((-a) / b))  # SMT's div is Euclidean: equal to C's for a >= 0
ISPEC = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "neg": lambda a: -a,
         "idiv": tdiv, "mod": lambda a, b: a - b * tdiv(a, b),  # C's a == b*(a/b) + a%b; Z3 reasons best with it
         "max": lambda a, b: z3.If(a < b, b, a), "min": lambda a, b: z3.If(a < b, a, b)}
def irange(e: str) -> tuple[int, int]:
  n = width(e); return (-(1 << (n - 1)), (1 << (n - 1)) - 1) if signed(e) else (0, (1 << n) - 1)
def topo(u: UOp, seen=None) -> list[UOp]:
  seen = set() if seen is None else seen
  if u in seen: return []
  seen.add(u); return [n for s in u.src for n in topo(s, seen)] + [u]

class ISem:
  """The semantics context on unbounded integers: guards compute exactly, as `Concrete`'s do on Python ints.
  wrap=True reduces every op's value mod 2^n: the values at the width, exactly (a search for counterexamples)."""
  def __init__(self, wrap=False):
    self.wrap, self.facts = wrap, []
    self.memo: dict = {}
    self.leaves: dict = {}
    self.bnd: dict = {}
    self.fresh = itertools.count()
  def term(self, u: UOp):
    if u in self.memo: return self.memo[u]
    e = elem(u)
    if e not in IDTS: raise NotInt(f"{e} is not an integer dtype")
    if u.op in LEAF:
      v = u.attrs.get("value")
      if u.op is Ops.CONST and not isinstance(v, z3.ExprRef): t = z3.IntVal(pydom(dt_of(e)).out(int(v)))
      else:
        t = self.leaves[u] = z3.Int(u.attrs["name"] if u.op is Ops.DEFINE_VAR else v.decl().name())
        lo, hi = irange(e); self.facts += [lo <= t, t <= hi]
    elif u.op in ISPEC:
      t = ISPEC[u.op](*[self.term(s) for s in u.src])
      if self.wrap: t = self.wrapped(t, e)
    else: raise NotInt(f"{u.op} has no integer semantics here")
    self.memo[u] = t
    return t
  def wrapped(self, t, e: str): lo, hi = irange(e); return (t - lo) % (hi - lo + 1) + lo
  def at_width(self, u: UOp):  # u's value at its width, given that its tree has the width's values (see above)
    return self.term(u) if u.op in LEAF else self.wrapped(self.term(u), elem(u))
  def val(self, u: UOp):
    if u.op not in LEAF: raise NotInt(f"value of {u.op}: its integer value may differ from its value at the width")
    return self.term(u)
  raw = val
  def _b(self, u: UOp):
    if u.op is Ops.CONST: return self.term(u), self.term(u)
    if u.op is not Ops.DEFINE_VAR: raise NotInt(f"bounds of {u.op}: its integer value may differ from its value at the width")
    if u not in self.bnd:
      k = next(self.fresh); lo, hi = z3.Int(f"lo{k}"), z3.Int(f"hi{k}"); v = self.term(u)
      self.facts += [self.dtmin(u) <= lo, lo <= v, v <= hi, hi <= self.dtmax(u)]
      self.bnd[u] = (lo, hi)
    return self.bnd[u]
  def vmin(self, u): return self._b(u)[0]
  def vmax(self, u): return self._b(u)[1]
  def dtmin(self, u): return z3.IntVal(irange(elem(u))[0])
  def dtmax(self, u): return z3.IntVal(irange(elem(u))[1])
  all, any = ZSem.all, ZSem.any
  def divides(self, a, b): return z3.And(a != 0, b == a * z3.Int(f"k{next(self.fresh)}"))

  def goal(self, lhs: UOp, rhs: UOp, g):
    """(assumptions, the LHS is defined, conclusion): each LHS idiv/mod/max/min whose subtree is defined at the width
    has its operands in range (per node: none rests on a divisor that wrapped below it), and if the LHS is defined,
    so is the RHS, the operands of its idiv/mod/max/min are in range, and LHS == RHS."""
    def defined(u): return z3.And(*[self.at_width(m.src[1]) != 0 for m in topo(u) if m.op in (Ops.IDIV, Ops.MOD)])
    def inrange(m): return z3.And(*[z3.And(irange(elem(s))[0] <= self.term(s), self.term(s) <= irange(elem(s))[1]) for s in m.src])
    def safe(u): return z3.And(*[inrange(m) for m in topo(u) if m.op not in RING + LEAF])
    l, r = self.term(lhs), self.term(rhs)
    obl = [z3.Implies(defined(m), inrange(m)) for m in topo(lhs) if m.op not in RING + LEAF]
    return z3.And(*self.facts, g), defined(lhs), z3.And(*obl, z3.Implies(defined(lhs), z3.And(defined(rhs), safe(rhs), l == r)))

# ---------------------------------------------------------------- instances of a pattern
def _ok(op: str, e: str) -> bool: return dt_of(e) in OP_DTYPES.get(op, ())

def gen(p: UPat, e: str, env: dict, fresh) -> list[tuple[UOp, dict]]:
  """Every LHS instance of pattern p with element type e (a repeated name reuses its placeholder)."""
  if p.dtype is not None and dt_of(e) not in p.dtype: return []
  if p.name is not None and p.name in env: return [(env[p.name], env)] if elem(env[p.name]) == e else []
  out = []
  if p.op is None: out = [(UOp(Ops.DEFINE_VAR, dt_of(e), (), attrs(name=f"{p.name or 'v'}{next(fresh)}_{e}")), env)]
  elif p.op == ("const",):
    if p.lit is not None:
      if e in _FP or not isinstance(p.lit, float): out = [(UOp(Ops.CONST, dt_of(e), (), attrs(value=p.lit)), env)]
    else: out = [(UOp(Ops.CONST, dt_of(e), (), attrs(value=z3.Const(f"c{next(fresh)}_{e}", sort(e)))), env)]
  else:
    for op in p.op:
      if op in CMP_ALU: kids = [[t] * 2 for t in DTS if _ok(op, t)] if e == "i1" else []
      elif op is Ops.WHERE: kids = [["i1", e, e]] if _ok(op, e) else []
      elif op is Ops.CAST: kids = [[t] for t in DTS]
      elif op is Ops.BITCAST: kids = [[t] for t in DTS if t != "index" and e != "index" and width(t) == width(e)]
      elif op is Ops.RANGE: kids = [["index"]] if e == "index" else []
      else: kids = [[e] * len(p.src)] if _ok(op, e) else []
      for ks in kids:
        partial = [((), env)]
        for sp, k in zip(p.src, ks):
          partial = [(srcs + (s,), env2) for srcs, env1 in partial for s, env2 in gen(sp, k, env1, fresh)]
        out += [(UOp(op, dt_of(e), srcs), env1) for srcs, env1 in partial]
  return [(u, {**env1, p.name: u} if p.name else env1) for u, env1 in out]

def _cex(m) -> str:
  return "counterexample: " + ", ".join(f"{d.name()}={m[d]}" for d in sorted(m.decls(), key=str)
                                        if d.arity() == 0 and not d.name().startswith(("lo", "hi", "k")))[:300]

def _solve(goal) -> tuple[str, str]:
  """('proven'|'failed'|'unknown', detail) for: goal is valid."""
  try:
    g = z3.Goal(); g.add(z3.Not(goal))
    # sum-of-monomials normal form decides ring identities (distributivity) that bit-blasting cannot
    res = z3.TryFor(z3.Then(z3.With("simplify", som=True), "fpa2bv", "simplify", "solve-eqs", "bit-blast", "sat"), 30000)(g)
    if len(res) == 1 and z3.is_false(res[0].as_expr()): return "proven", ""
  except z3.Z3Exception: pass  # e.g. uninterpreted functions: fall back to the default solver
  s = z3.Solver(); s.set("timeout", 20000); s.add(z3.Not(goal))
  r = s.check()
  if r == z3.unsat: return "proven", ""
  if r == z3.sat: return "failed", _cex(s.model())
  return "unknown", f"z3: {s.reason_unknown()}"

def _solver(*fs, ms=20000, s=None):  # a fresh one per query: a second check on one solver loses the nonlinear tactics
  s = s or z3.Solver(); s.set("timeout", ms); s.add(*fs); return s

def _refutes(rule: Rule, lhs: UOp, store: dict, ctx: ISem, m) -> str | None:
  """The counterexample at the width that model m of ctx's placeholders gives, if it is one there."""
  zs = ZSem()
  pins = [zs.enc(u)[0] == zconst(m.eval(t, model_completion=True).as_long(), elem(u)) for u, t in ctx.leaves.items()]
  h, d, c = _goal(zs, rule, lhs, store)
  return _cex(s.model()) if (s := _solver(h, d, z3.Not(c), *pins)).check() == z3.sat else None

def _solve_int(rule: Rule, lhs: UOp, store: dict) -> tuple[str, str]:
  if (goal := _goal(ctx := ISem(), rule, lhs, store)) is None: return "n/a", ""
  h, d, c = goal
  # a guard that never holds claims nothing ('smt' finds models of these fast, nlsat slowly)
  if (r := _solver(h, d, s=z3.Tactic("smt").solver()).check()) != z3.sat:
    return ("n/a", "") if r == z3.unsat else ("unknown", "z3 (integers): no model of the guard found")
  if (r := (s := _solver(h, z3.Not(c))).check()) == z3.unsat: return "proven", ""
  if r == z3.unknown: return "unknown", f"z3 (integers): {s.reason_unknown()}"
  # an integer model refutes the rule only if it does at the width: check it there (placeholders pinned: fast),
  # else search the values at the width (the integers with every op wrapped mod 2^n) for one
  if cex := _refutes(rule, lhs, store, ctx, m := s.model()): return "failed", cex
  h, d, c = _goal(w := ISem(wrap=True), rule, lhs, store)
  if (ws := _solver(h, d, z3.Not(c), ms=10000)).check() == z3.sat and (cex := _refutes(rule, lhs, store, w, ws.model())):
    return "failed", cex
  return "unknown", "an operand may leave the dtype's range (integer method), yet the rule holds at the width there: " + _cex(m)

def _goal(ctx, rule: Rule, lhs: UOp, store: dict):
  """The proof goal of one match under ctx; None where the guard or the rhs refuses the match."""
  with semantics(ctx):
    g = True if rule.guard is None else rule.guard(**store)
    if g is False or (isinstance(g, z3.BoolRef) and z3.is_false(z3.simplify(g))): return None
    if (rhs := rule.rhs(**store)) is None: return None
    if rhs.dtype != lhs.dtype: raise TypeError(f"rhs type {rhs.dtype} != lhs type {lhs.dtype}")
    return ctx.goal(lhs, rhs, z3.BoolVal(True) if g is True else g)

def prove_instance(rule: Rule, lhs: UOp) -> tuple[str, str]:
  stores = rule.pat.match(lhs, {})
  if not stores: return "failed", f"pattern does not match its own instance {lhs!r}"
  verdicts = []
  for store in stores:
    try:
      if rule.proof == "int": verdicts.append(_solve_int(rule, lhs, store))
      elif (goal := _goal(ZSem(), rule, lhs, store)) is None: verdicts.append(("n/a", ""))
      else: verdicts.append(_solve(z3.Implies(z3.And(goal[0], goal[1]), goal[2])))
    except TypeError as ex: return "failed", str(ex)
    except NotInt as ex: return "unknown", f"outside the integer method: {ex}"
  for v in verdicts:
    if v[0] in ("failed", "unknown"): return v
  return ("proven", "") if any(v[0] == "proven" for v in verdicts) else ("n/a", "")

def proof_dts(rule: Rule) -> tuple[str, ...]: return rule.proof_dts or (IDTS if rule.proof == "int" else DTS)

def prove_rule(rule: Rule, dts=None) -> tuple[str, str, int, list[str]]:
  """(verdict, why, number of instances proven, their dtypes) of one rule over every op and dtype it can match."""
  fresh, n, done = itertools.count(), 0, []
  for e in dts or proof_dts(rule):
    for lhs, _ in gen(rule.pat, e, {}, fresh):
      # LHS types as the dialect has them: comparison results are i1, casts change type
      v, why = prove_instance(rule, lhs)
      if v in ("failed", "unknown"): return v, f"{why} (instance: {describe(lhs)})", n, done
      n += v == "proven"
      if v == "proven" and e not in done: done.append(e)
  return ("proven", "", n, done) if n else ("failed", "no instance of the pattern could be built or the guard never holds", 0, [])

def describe(u: UOp) -> str:
  if u.op is Ops.DEFINE_VAR: return u.attrs["name"].split("_")[0] + ":" + elem(u)
  if u.op is Ops.CONST: return f"{u.attrs['value']}:{elem(u)}"
  return f"{u.op}(" + ", ".join(describe(s) for s in u.src) + f"):{elem(u)}"

def main(argv=None) -> int:
  """`morok-opt --verify-rules`: prove every rule; print one verdict line each; exit 1 if any is not proven."""
  bad, t0 = 0, time.perf_counter()
  for rule in RULES:
    t = time.perf_counter()
    v, why, n, done = prove_rule(rule)
    bad += v != "proven"
    note = f"  ({'int + no-overflow' if rule.proof == 'int' else 'bit-vectors'}) at {' '.join(done)}" if rule.proof or rule.proof_dts else ""
    print(f"{rule.name:<22} {v:<8} {n:>4} instances {time.perf_counter() - t:6.2f}s{note}" + (f"  {why}" if why else ""), flush=True)
  print(f"{len(RULES) - bad}/{len(RULES)} rules proven in {time.perf_counter() - t0:.1f}s")
  return 1 if bad else 0

if __name__ == "__main__": sys.exit(main())
