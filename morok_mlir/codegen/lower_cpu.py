"""uop-lower-cpu: kernel-level `uop` functions (docs/pipeline.md section 2) -> upstream MLIR (section 3).

Each kernel becomes a public `func.func` over signless, static memrefs: `scf.for` loops, `memref.load/store`, `arith`,
`math`. `@schedule` becomes a function that `func.call`s the kernels on its arguments (`slots`), dependencies first.

Placement: ranges closed by one `uop.end` (or `uop.reduce`) become nested `scf.for`s in the order of their `axis`;
every op is emitted in the innermost open loop among the ranges it depends on (so loop-invariant loads and index
math are hoisted), a reduce opens its loops (carrying the accumulator as `iter_args`) where its result is needed.
A gated load clamps its address to 0 where the gate is false and selects 0 for the value, so padding never reads
out of bounds (an empty buffer gives the constant 0).

Semantics the table below pins down (numpy's where numpy defines one):
- integer ops wrap; `idiv` truncates, `mod` has the dividend's sign; x/0 and x%0 give 0, INT_MIN/-1 wraps
  (guards keep LLVM's undefined cases, which trap on x86, out of the code; constant divisors need none)
- `shr` is arithmetic on signed types, logical on unsigned; an amount outside [0, bits) (negative ones too) shifts
  every bit out, as in numpy: `shl` gives 0, `shr` 0 or the sign fill
- float max/min propagate NaN (`arith.maximumf`), `cmpne` is unordered (true for NaN), `mod` on floats is fmod
- casts: float->int truncates toward zero (undefined out of range, as in C), int/float->bool is `!= 0`,
  bool->number is 0/1, int widening follows the source's signedness
- a dtype in COMPUTE is a storage type: its values are loaded, stored and selected as they are, but every op on them
  runs in the compute type and its result is rounded back (bfloat16 in float32, as PyTorch's CPU kernels; reduces
  accumulate in the compute type and round once). Casts to it go through the compute type (f64 -> f32 -> bf16, as
  ml_dtypes and PyTorch round), the rounding is to nearest even in integer ops (`Bf16`: subnormals kept, NaN stays
  NaN), so it is the same on every target and no target's flushing conversion instruction is used
- bool is `i1` in registers and one byte (0/1, like numpy's bool) in memory: buffers of `i1` are `memref<Nxi8>`,
  a load is `!= 0`, a store `extui`.

Choices of uop-optimize (kernel func attributes) it honours: `uop.threads = N` (the outermost loop runs over the
trailing arguments `%lo, %hi`, so the device can call chunks of it on N threads; `uop.grain` keeps chunk bounds
multiples of it), `uop.fastmath` (reduce accumulators may reassociate and contract: LLVM then vectorizes and
interleaves them), `uop.reduce_block = B` (a float add reduce over more than B terms runs as nested loops with an
accumulator per block: kernel_facts.blocked), `uop.nontemporal = VW` (VW lanes per iteration of the innermost loop, one
nontemporal vector store: big outputs that are not read back soon), `uop.lanes = W` (W neighbouring iterations of the
innermost loop run as the lanes of vectors, reduces inside it with vector accumulators: pooling, depthwise convolutions).
f32 exp2 and log2 are polynomials (vectorizable; libm calls are scalar): see `Poly` for their error bounds.

Public API: `lower_kernel(f: Func, name: str | None = None) -> str` (one kernel's func text) and
`lower_module(funcs: list[Func]) -> str` (a whole kernel-level module). Unsupported input raises PassError."""
from __future__ import annotations
import math, re
import numpy as np
from math import gcd, prod
from morok_mlir.ir.bridge import Func, arg_buffer, attr_text, const_text, import_module, replace_module_body, type_text
from morok_mlir.core.dtype import DType, PtrDType, dtypes
from morok_mlir.core.uop import UOp, attrs
from morok_mlir.dialects.ops import Ops, REDUCE_IDENTITY
from morok_mlir.core import index_math as im
from morok_mlir.core.index_math import affine, affine_simplify, at_lane
from morok_mlir.core.kernel_facts import blocked, contraction, in_place, k_contiguous, k_rows, single_store, twin
from morok_mlir.ir.registry import register, PassError

# ---------------------------------------------------------------- tables
# dtype class: f(loat) s(igned int, and index) u(nsigned) b(ool)
def cls(dt: DType) -> str: return "f" if dt.is_float else "u" if dt.is_unsigned else "b" if dt.is_bool else "s"

F, S, U, B = "fsub"
def _t(f=None, s=None, u=None, b=None): return {k: v for k, v in zip("fsub", (f, s, u, b)) if v}
ALU = {  # op -> dtype class -> MLIR op taking (a, b[, c]) of one type
  "add": _t("arith.addf", "arith.addi", "arith.addi", "arith.ori"), "sub": _t("arith.subf", "arith.subi", "arith.subi", "arith.xori"),
  "mul": _t("arith.mulf", "arith.muli", "arith.muli", "arith.andi"), "fdiv": _t("arith.divf"),
  "idiv": _t(None, "arith.divsi", "arith.divui"), "mod": _t("arith.remf", "arith.remsi", "arith.remui"),
  "max": _t("arith.maximumf", "arith.maxsi", "arith.maxui", "arith.ori"), "min": _t("arith.minimumf", "arith.minsi", "arith.minui", "arith.andi"),
  "and": _t(None, "arith.andi", "arith.andi", "arith.andi"), "or": _t(None, "arith.ori", "arith.ori", "arith.ori"),
  "xor": _t(None, "arith.xori", "arith.xori", "arith.xori"), "shl": _t(None, "arith.shli", "arith.shli"),
  "shr": _t(None, "arith.shrsi", "arith.shrui"), "pow": _t("math.powf"),
  "sqrt": _t("math.sqrt"), "exp2": _t("math.exp2"), "log2": _t("math.log2"), "sin": _t("math.sin"), "trunc": _t("math.trunc"),
  "mulacc": _t("math.fma"),
}
CMP = {"cmplt": _t("arith.cmpf olt", "arith.cmpi slt", "arith.cmpi ult", "arith.cmpi ult"),
       "cmpeq": _t("arith.cmpf oeq", "arith.cmpi eq", "arith.cmpi eq", "arith.cmpi eq"),
       "cmpne": _t("arith.cmpf une", "arith.cmpi ne", "arith.cmpi ne", "arith.cmpi ne")}
# (source class, destination class) -> cast op; None: decided by width below
CASTS = {(F, S): "arith.fptosi", (F, U): "arith.fptoui", (S, F): "arith.sitofp", (U, F): "arith.uitofp", (B, F): "arith.uitofp",
         (B, S): "arith.extui", (B, U): "arith.extui"}
# ops whose operands `value` does not lower first in operand order (they open loops, run effects or take addresses)
_OWN_OPERANDS = frozenset((Ops.RANGE, Ops.BUFFER, Ops.AFTER, Ops.REDUCE, Ops.LOAD, Ops.INDEX))
UNSUPPORTED = {"bufferize": "a bufferize left in a kernel (run uop-kernel-split first)", "special": "GPU ids", "wmma": "tensor cores",
               "vectorize": "vectors", "gep": "vectors", "if": "if blocks", "endif": "if blocks", "barrier": "barriers",
               "define_var": "symbolic sizes", "bind": "symbolic sizes", "threefry": "threefry (decompose it first)"}

def mem_type(dt: DType) -> str:
  """The memref type of a buffer in memory: signless, bool as bytes."""
  if not isinstance(dt, PtrDType) or dt.size is None: raise PassError(f"kernel arguments must be flat static memrefs, got {dt}")
  return f"memref<{dt.size}x{'i8' if dt.base.is_bool else dt.base.signless}>"

def sl(dt: DType) -> str: return dt.signless  # register type (index stays index, bool i1)

def _axis(r: UOp) -> int: return r.attrs.get("axis", 0)

def _int_attr(f: Func, name: str, default: int = 0) -> int:
  if type(v := f.attrs.get(name, default)) is not int: raise PassError(f"@{f.name}: attribute {name} must be an i64 integer, got {attr_text(v)}")
  return v

def outer_range(f: Func) -> UOp | None:
  """The outermost loop range of a kernel (the first axis its store's `end` closes), or None."""
  ends = [u for u in f.roots[0].toposort if u.op is Ops.END] if f.roots else []
  rngs = [r for e in ends for r in e.src[1:] if r.op is Ops.RANGE]
  return min(rngs, key=_axis, default=None)

def parallel_info(f: Func) -> tuple[int, int, int] | None:
  """(outer loop size, threads, chunk grain) of a kernel uop-optimize marked parallel, else None. An outer loop that
  runs to a symbolic size is split in the kernel (Lowerer.close_loops): its chunks are parts i .. j of `threads`."""
  if "uop.threads" not in f.attrs or (r := outer_range(f)) is None: return None
  t = _int_attr(f, "uop.threads", 1)
  return (t, t, 1) if im.cval(r.src[0]) is None else (int(r.src[0].attrs["value"]), t, _int_attr(f, "uop.grain", 1))

# storage dtype -> the dtype its ops compute in (LLVM has no bf16 arithmetic on most targets; where it has, it flushes
# subnormals or rounds per target, so bf16 is widened here, computed, and rounded back by Bf16)
COMPUTE = {dtypes.bfloat16: dtypes.float32}

class Bf16:
  """bfloat16 <-> float32 in integer ops: bf16 is the top half of an f32, so widening is a shift; narrowing rounds to
  nearest even by adding 0x7fff plus the lowest kept bit (a carry into the exponent is the correct round up, and
  inf stays inf); a NaN keeps its sign and top payload bits and is made quiet (rounding could carry it to inf).
  Vectorizes, and rounds numbers as ml_dtypes and PyTorch do."""
  @staticmethod
  def widen(L, c, x: str) -> str:
    i = L(f"arith.extui {L(f'arith.bitcast {x} : bf16 to i16')} : i16 to i32")
    return L(f"arith.bitcast {L(f'arith.shli {i}, {c(16)} : i32')} : i32 to f32")
  @staticmethod
  def narrow(L, c, x: str) -> str:
    op = lambda name, a, b: L(f"arith.{name} {a}, {b} : i32")
    b = L(f"arith.bitcast {x} : f32 to i32")
    hi = op("shrui", b, c(16))
    r = op("shrui", op("addi", b, op("addi", op("andi", hi, c(1)), c(0x7fff))), c(16))
    r = L(f"arith.select {L(f'arith.cmpf uno, {x}, {x} : f32')}, {op('ori', hi, c(0x40))}, {r} : i32")
    return L(f"arith.bitcast {L(f'arith.trunci {r} : i32 to i16')} : i16 to bf16")

# ---------------------------------------------------------------- polynomial transcendentals (f32)
POLY = ("exp2", "log2", "pow")
LOG2E, HALF_PI = 1 / math.log(2), math.pi / 2
def meant(c: UOp, real: float) -> float:
  """c's value, or +-real where c is real's f32 rounding (the Tensor ops' 1/ln 2 and pi/2: a constant stored as f32)."""
  v = float(c.attrs["value"])
  return math.copysign(real, v) if abs(v) == float(np.float32(real)) else v

def exp2_of_product(u: UOp) -> tuple[UOp, float] | None:
  """(x, c) when u is an f32 exp2 of x * c, c a constant: lowered as Poly.exp2_mul. exp and sigmoid multiply by
  +-1/ln 2, taken at full precision (its f32 rounding alone is 18 ulp at exp(80))."""
  if u.op is not Ops.EXP2 or u.dtype is not dtypes.float32 or (m := u.src[0]).op is not Ops.MUL: return None
  for x, c in (m.src, m.src[::-1]):
    if c.op is Ops.CONST and x.op is not Ops.CONST: return x, meant(c, LOG2E)
  return None

def sin_of_shift(u: UOp) -> tuple[UOp, float, bool] | None:
  """(x, c, negated) when u is an f32 sin of c + x, x + c, c - x or x - c, c a constant: computed in f64, the shift
  exact. cos(x) is sin(pi/2 - x), whose f32 subtraction (and pi/2's f32 rounding) cost all precision near cos's zeros
  (0.75 relative at x ~ 100): in that form the constant stands for the real pi/2."""
  if u.op is not Ops.SIN or u.dtype is not dtypes.float32 or (a := u.src[0]).op not in (Ops.ADD, Ops.SUB): return None
  (l, r), sub = a.src, a.op is Ops.SUB
  if l.op is Ops.CONST and r.op is not Ops.CONST: return r, meant(l, HALF_PI) if sub else float(l.attrs["value"]), sub
  if r.op is Ops.CONST and l.op is not Ops.CONST: return l, -float(r.attrs["value"]) if sub else float(r.attrs["value"]), False
  return None

def splat(v, elem: str, n: int) -> str:
  """The text of an n-lane vector constant of v (elem: its MLIR element type)."""
  return f"arith.constant dense<{const_text(v, elem).split(' :')[0]}> : vector<{n}x{elem}>"

POLY_DT = {"f32": dtypes.float32, "f64": dtypes.float64, "i32": dtypes.int32, "i64": dtypes.int64}   # Poly's scalar types
class Poly:
  """exp2, log2 and pow on f32 as arith/math ops LLVM vectorizes (math.exp2/log2 become scalar libm calls).
  Cephes' coefficients, evaluated with FMA. Bounds (test/test_perf_poly.py checks them against float64 over the
  whole range and the edge values): exp2 relative error <= 2 ulp for normal results (absolute <= 2^-149 below),
  log2 relative error <= 2 ulp, absolute <= 2^-24 near 1; both propagate NaN; exp2(-inf) = 0, exp2(+inf) = inf,
  exp2 overflows to inf above 128; log2(+-0) = -inf, log2(x < 0) = NaN, log2(inf) = inf; subnormals are exact
  inputs (log2 rescales them)."""
  EXP2 = (1.535336188319500e-4, 1.339887440266574e-3, 9.618437357674640e-3, 5.550332471162809e-2, 2.402264791363012e-1,
          6.931472028550421e-1)
  EXP2_64 = tuple(math.log(2) ** k / math.factorial(k) for k in range(11, -1, -1))   # 2^f, |f| <= 1/2: error < 2^-45
  LOG = (7.0376836292e-2, -1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1,
         2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1)
  def __init__(self, lw: Lowerer, fr: Frame, width: int = 0):   # width > 0: on vectors of that many lanes (LaneLowerer)
    self.lw, self.fr, self.w = lw, fr, width
  def L(self, text: str) -> str: return self.lw.line(self.fr, text)
  def t(self, ty: str) -> str: return f"vector<{self.w}x{ty}>" if self.w else ty
  def c(self, v, ty="f32") -> str:
    if not self.w: return self.lw.const(v, POLY_DT[ty])
    return self.L(splat(v, ty, self.w))
  def op(self, name: str, *a, ty="f32") -> str: return self.L(f"{name} {', '.join(a)} : {self.t(ty)}")
  def horner(self, x: str, coefs, ty="f32") -> str:
    p = self.c(coefs[0], ty)
    for k in coefs[1:]: p = self.op("math.fma", p, x, self.c(k, ty), ty=ty)
    return p
  def sel(self, cond: str, a: str, b: str, ty="f32") -> str:
    return self.L(f"arith.select {cond}, {a}, {b} : {self.t('i1') + ', ' if self.w else ''}{self.t(ty)}")
  def cmp(self, pred: str, a: str, b: str, ty="f32") -> str: return self.L(f"arith.cmpf {pred}, {a}, {b} : {self.t(ty)}")
  def bool(self, name: str, a: str, b: str) -> str: return self.L(f"arith.{name} {a}, {b} : {self.t('i1')}")
  def cast(self, op: str, x: str, src: str, dst: str) -> str: return self.L(f"{op} {x} : {self.t(src)} to {self.t(dst)}")
  def exp2(self, x: str, lo: str | None = None) -> str:
    """2^(x + lo), lo a small correction below x's rounding (exp2_mul's), or 2^x."""
    xc = self.op("arith.minimumf", self.op("arith.maximumf", x, self.c(-160.0)), self.c(130.0))
    n = self.op("math.roundeven", xc)
    f = self.op("arith.subf", xc, n)
    if lo is not None: f = self.op("arith.addf", f, lo)
    return self.sel(self.cmp("uno", x, x), x, self.scaled(f, self.cast("arith.fptosi", n, "f32", "i32")))
  def exp2_mul(self, x: str, c: float) -> str:
    """2^(x * c) for a constant c (exp and sigmoid: x / ln 2), the product's rounding recovered by an FMA and c split in
    two f32 parts: a plain exp2 of the rounded product is off by |x c| * 2^-24 relative (exp(80): 64 ulp)."""
    chi = float(np.float32(c))
    th = self.op("arith.mulf", x, self.c(chi))
    tl = self.op("math.fma", x, self.c(float(np.float32(c - chi))), self.op("math.fma", x, self.c(chi), self.op("arith.negf", th)))
    return self.exp2(th, self.sel(self.cmp("olt", self.op("math.absf", th), self.c(128.0)), tl, self.c(0.0)))   # inf: tl is NaN
  def scaled(self, f: str, ni: str) -> str:
    """exp2(f) * 2^ni for f in [-1/2, 1/2] and an i32 ni in [-160, 130]."""
    r = self.op("math.fma", self.horner(f, self.EXP2), f, self.c(1.0))
    h = self.op("arith.shrsi", ni, self.c(1, "i32"), ty="i32")   # 2^n as 2^h * 2^(n-h): both halves are normal floats
    for e in (h, self.op("arith.subi", ni, h, ty="i32")):
      bits = self.op("arith.shli", self.op("arith.addi", e, self.c(127, "i32"), ty="i32"), self.c(23, "i32"), ty="i32")
      r = self.op("arith.mulf", r, self.cast("arith.bitcast", bits, "i32", "f32"))
    return r
  def log2(self, x: str, wide: bool = False) -> str:
    """wide: log2 of a positive finite x as f64 (for pow), no edge values."""
    small = self.cmp("olt", x, self.c(1.1754943508222875e-38))   # subnormal (and <= 0, fixed below): scale by 2^23
    xs = self.sel(small, self.op("arith.mulf", x, self.c(8388608.0)), x)
    bits = self.cast("arith.bitcast", xs, "f32", "i32")
    e = self.op("arith.subi", self.op("arith.shrui", bits, self.c(23, "i32"), ty="i32"),
                self.sel(small, self.c(150, "i32"), self.c(127, "i32"), "i32"), ty="i32")
    mb = self.op("arith.ori", self.op("arith.andi", bits, self.c(0x7fffff, "i32"), ty="i32"), self.c(0x3f800000, "i32"), ty="i32")
    m = self.cast("arith.bitcast", mb, "i32", "f32")                 # x = m * 2^e, m in [1, 2)
    big = self.cmp("ogt", m, self.c(1.4142135623730951))
    m = self.sel(big, self.op("arith.mulf", m, self.c(0.5)), m)      # m in [sqrt(1/2), sqrt(2)): z small around 0
    e = self.op("arith.addi", e, self.cast("arith.extui", big, "i1", "i32"), ty="i32")
    z = self.op("arith.subf", m, self.c(1.0))
    z2 = self.op("arith.mulf", z, z)
    y = self.op("arith.mulf", self.op("arith.mulf", self.horner(z, self.LOG), z), z2)
    if wide:   # log2(x) in f64, the sum and scaling unrounded: y's few ulp of z^3 / 3 stay below 2^-30
      z64, y64, e64 = self.cast("arith.extf", z, "f32", "f64"), self.cast("arith.extf", y, "f32", "f64"), self.cast("arith.sitofp", e, "i32", "f64")
      ln = self.op("arith.addf", z64, self.op("math.fma", self.op("arith.mulf", z64, z64, ty="f64"), self.c(-0.5, "f64"), y64, ty="f64"), ty="f64")
      return self.op("math.fma", ln, self.c(1.4426950408889634, "f64"), e64, ty="f64")
    ln = self.op("arith.addf", z, self.op("math.fma", z2, self.c(-0.5), y))
    r = self.op("math.fma", ln, self.c(1.4426950408889634), self.cast("arith.sitofp", e, "i32", "f32"))
    inf = self.c(float("inf"))
    r = self.sel(self.cmp("oeq", x, inf), inf, r)
    r = self.sel(self.cmp("oeq", x, self.c(0.0)), self.c(float("-inf")), r)
    return self.sel(self.cmp("ult", x, self.c(0.0)), self.c(float("nan")), r)   # ult: x < 0 or NaN
  def pow(self, x: str, y: str) -> str:
    """x ** y as C's powf: exp2(y * log2|x|), log2, the product and exp2 in f64, rounded once (the product's rounding in
    f32 would cost |y log2 x| ulp), the sign of x to an odd integer power, NaN for a finite x < 0 to a non-integer one,
    and C's edge values: x ** 0 = 1 and 1 ** y = 1 (NaN too), (-1) ** +-inf = 1, 0 ** y = 0 or inf by y's sign, inf
    likewise."""
    ax, inf, one = self.op("math.absf", x), self.c(float("inf")), self.c(1.0)
    ok = self.bool("andi", self.cmp("ogt", ax, self.c(0.0)), self.cmp("olt", ax, inf))
    lg = self.log2(self.sel(ok, ax, one), wide=True)
    for v, s in ((0.0, "-inf"), (float("inf"), "inf")): lg = self.sel(self.cmp("oeq", ax, self.c(v)), self.c(float(s), "f64"), lg, "f64")
    t = self.op("arith.mulf", lg, self.cast("arith.extf", y, "f32", "f64"), ty="f64")
    t = self.op("arith.minimumf", self.op("arith.maximumf", t, self.c(-160.0, "f64"), ty="f64"), self.c(130.0, "f64"), ty="f64")
    # 2^t all in f64 (2^n by its exponent bits: normal in f64 over the whole range), rounded to f32 once
    n = self.op("math.roundeven", t, ty="f64")
    e = self.op("arith.addi", self.cast("arith.fptosi", n, "f64", "i64"), self.c(1023, "i64"), ty="i64")
    scale = self.cast("arith.bitcast", self.op("arith.shli", e, self.c(52, "i64"), ty="i64"), "i64", "f64")
    r64 = self.op("arith.mulf", self.horner(self.op("arith.subf", t, n, ty="f64"), self.EXP2_64, "f64"), scale, ty="f64")
    r = self.cast("arith.truncf", r64, "f64", "f32")
    fy, half = self.op("math.floor", y), self.op("arith.mulf", y, self.c(0.5))
    odd = self.bool("andi", self.cmp("oeq", fy, y), self.cmp("one", self.op("math.floor", half), half))
    signed = self.L(f"arith.cmpi slt, {self.cast('arith.bitcast', x, 'f32', 'i32')}, {self.c(0, 'i32')} : {self.t('i32')}")   # -0.0 too
    r = self.sel(self.bool("andi", odd, signed), self.op("arith.negf", r), r)
    r = self.sel(self.bool("andi", self.bool("andi", ok, signed), self.cmp("une", fy, y)), self.c(float("nan")), r)   # -inf is not
    r = self.sel(self.cmp("uno", x, y), self.c(float("nan")), r)   # the NaN t would be (and lanes poisoned by its fptosi)
    r = self.sel(self.bool("andi", self.cmp("oeq", ax, one), self.cmp("oeq", self.op("math.absf", y), inf)), one, r)
    return self.sel(self.bool("ori", self.cmp("oeq", y, self.c(0.0)), self.cmp("oeq", x, one)), one, r)

def sum_index(terms: list[UOp]) -> UOp:
  out = im.const(0)
  for t in terms: out = im.add(out, t)
  return out

# ---------------------------------------------------------------- the emitter
class Frame:
  """A loop body being written: its lines go into the parent's when the loop closes."""
  def __init__(self, parent: Frame | None, rng: UOp | None = None):
    self.parent, self.rng, self.lines, self.placed, self.step = parent, rng, [], [], 1
    self.depth = parent.depth + 1 if parent else 0
    self.chain = (parent.chain | {rng}) if parent else frozenset()

class Lowerer:
  pass_name = "uop-lower-cpu"   # subclasses (uop-lower-gpu) override effect/reduce/value and this, for messages
  keeps = True                  # whether uop.keep's scratch rows are honoured (stack memory per thread)
  def __init__(self, f: Func):
    self.f, self.n = f, 0
    if len(f.roots) != 1 or f.roots[0].op is not Ops.SINK or f.results: raise PassError(f"kernel @{f.name} must end in one uop.sink and return nothing")
    self.sink = f.roots[0]
    self.root = Frame(None)
    self.par = outer_range(f) if "uop.threads" in f.attrs else None  # the range whose loop runs from %lo to %hi
    self.fm = " fastmath<reassoc,contract>" if "uop.fastmath" in f.attrs else ""
    self.lanes = _int_attr(f, "uop.nontemporal", 0)   # see store_lanes
    self.block = _int_attr(f, "uop.reduce_block", 0)   # float add reduces longer than this accumulate in blocks
    self.names: dict[UOp, str] = {}      # values valid at the current point
    self.open: dict[UOp, Frame] = {}     # range -> the loop frame it is the counter of
    self.done: set[UOp] = set()          # side effects emitted
    self.ranges: dict[UOp, frozenset] = {}
    for i, t in enumerate(f.args): self.names[t] = f"%arg{i}"
    self.scratch: set[UOp] = set()
    self.kept_stores: set[UOp] = set()   # stores of kept values (plain stores, whatever uop.nontemporal says)
    if self.keeps and "uop.keep" in f.attrs: self.keep(tuple(f.attrs["uop.keep"]))
    self.rs(self.sink)

  def keep(self, axes: tuple[int, ...]):
    """uop.keep (optimize.kept): each named reduce stores its source, element by element as it reduces it, where the
    loops that compute the same value at their own indices (`twin`) then load it instead (an `after` on the reduce
    orders them). That place is the output itself when the kernel's one store writes each of those elements once and
    has the source's dtype (a softmax row is scaled in place, from cache: one row of cache, not two), else a scratch row
    on the stack (one per call, so per thread)."""
    loops = [r for e in self.sink.toposort if e.op is Ops.END for r in e.src[1:]]
    nodes, sub = set(self.sink.toposort), {}
    reds = [u for u in self.sink.toposort if u.op is Ops.REDUCE and u.src[1:] and min(_axis(r) for r in u.src[1:]) in axes]
    for n, red in enumerate(sorted(reds, key=lambda u: min(_axis(r) for r in u.src[1:]))):
      if (tw := twin(red, nodes, loops)) is None: raise PassError(f"@{self.f.name}: uop.keep names a reduce its loops do not recompute", red.loc)
      (t, K, J), src = tw, red.src[0]
      sizes = [im.cval(r.src[0]) for r in K]
      # the output row (stored for k, loaded back at j), unless the output goes out in nontemporal lanes (past the cache)
      if n == 0 and not self.lanes and (out := in_place(self.sink, red, t, J)) is not None:
        buf, at = out.src[0].src
        kat, jat = at.substitute(dict(zip(J, K))), at
      else:
        buf = arg_buffer(-1 - len(self.scratch), src.dtype.ptr(prod(sizes)))
        self.scratch.add(buf)
        self.names[buf] = name = f"%keep{len(self.scratch)}"
        self.root.lines.append(f"{name} = memref.alloca() {{alignment = 64 : i64}} : {mem_type(buf.dtype)}")
        kat, jat = im.linearize(K, sizes), im.linearize(J, sizes)
      st = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, src.dtype.ptr(), (buf, kat)), src), loc=red.loc)
      self.kept_stores.add(st)
      sub[red] = new = red.replace(src=(UOp(Ops.AFTER, src.dtype, (src, st), loc=red.loc), *red.src[1:]))
      sub[t] = UOp(Ops.LOAD, t.dtype, (UOp(Ops.INDEX, t.dtype.ptr(), (UOp(Ops.AFTER, buf.dtype, (buf, new)), jat)),), loc=t.loc)
    self.sink = self.sink.substitute(sub)

  # -- placement
  def rs(self, u: UOp) -> frozenset:
    """The open ranges u depends on: those of its sources, plus itself for a range, minus those a reduce/end closes.
    Only nodes not seen yet are walked (nodes built later, such as upcast lanes, reuse what is known below them)."""
    if (known := self.ranges.get(u)) is not None: return known
    stack = [(u, False)]
    while stack:
      x, post = stack.pop()
      if x in self.ranges: continue
      if not post:
        stack.append((x, True)); stack.extend((s, False) for s in x.src if s not in self.ranges)
        continue
      rs = frozenset().union(*(self.ranges[s] for s in x.src))
      if x.op is Ops.RANGE: rs |= {x}
      if x.op in (Ops.REDUCE, Ops.END):
        if any(r.op is not Ops.RANGE for r in x.src[1:]): raise PassError(f"uop.{x.op} closes a non-range", x.loc)
        rs -= set(x.src[1:])
      self.ranges[x] = rs
    return self.ranges[u]
  def target(self, u: UOp) -> Frame:
    if (missing := [r for r in self.rs(u) if r not in self.open]):
      raise PassError(f"uop.{u.op} uses range axis={_axis(missing[0])} outside the loop that closes it", u.loc)
    fr = max((self.open[r] for r in self.ranges[u]), key=lambda fr: fr.depth, default=self.root)
    if not self.ranges[u] <= fr.chain: raise PassError(f"uop.{u.op} mixes ranges of different loop nests", u.loc)
    return fr
  def line(self, fr: Frame, text: str) -> str:
    name = f"%{self.n}"; self.n += 1
    fr.lines.append(f"{name} = {text}")
    return name
  def place(self, u: UOp, fr: Frame, name: str) -> str:
    self.names[u] = name; fr.placed.append(u)
    return name
  def const(self, v, dt: DType) -> str: return self.value(UOp(Ops.CONST, dt, (), attrs(value=v)))

  def open_loops(self, parent: Frame, rngs: list[UOp], inits: list[str] | None = None) -> list[Frame]:
    """Nested loops over rngs (sorted by axis) under parent; with inits, each carries one accumulator."""
    frames = []
    for r in sorted(rngs, key=_axis):
      if r in self.open: raise PassError(f"range axis={_axis(r)} is closed while its loop is already open", r.loc)
      end = self.value(r.src[0])
      fr = Frame(frames[-1] if frames else parent, r)
      fr.iv, fr.end = f"%i{self.n}", end; self.n += 1
      if inits is not None: fr.acc, fr.res = f"%acc{self.n}", f"%{self.n + 1}"; self.n += 2
      self.open[r] = fr; frames.append(fr)
    return frames
  def close_loops(self, frames: list[Frame], ty: str | None = None, yielded: str | None = None, init: str | None = None):
    c0, c1 = self.const(0, dtypes.index), self.const(1, dtypes.index)
    for i, fr in reversed(list(enumerate(frames))):
      for u in fr.placed: del self.names[u]
      del self.open[fr.rng]
      lo, hi = ("%lo", "%hi") if fr.rng is self.par else (c0, fr.end)
      if fr.rng is self.par and im.cval(fr.rng.src[0]) is None:   # parts %lo .. %hi of T of a size read at run time
        t = self.const(_int_attr(self.f, "uop.threads", 1), dtypes.index)
        lo, hi = (self.line(fr.parent, f"arith.divui {self.line(fr.parent, f'arith.muli {fr.end}, {b} : index')}, {t} : index") for b in (lo, hi))
      head = f"scf.for {fr.iv} = {lo} to {hi} step {c1 if fr.step == 1 else self.const(fr.step, dtypes.index)}"
      if ty is None: text = [head + " {"] + ["  " + l for l in fr.lines] + ["}"]
      else:
        inner = frames[i + 1].res if i + 1 < len(frames) else yielded
        start = frames[i - 1].acc if i else init
        text = [f"{fr.res} = {head} iter_args({fr.acc} = {start}) -> ({ty}) {{"] + ["  " + l for l in fr.lines] + [f"  scf.yield {inner} : {ty}", "}"]
      fr.parent.lines.extend(text)

  # -- side effects
  def effect(self, u: UOp):
    if u in self.done: return
    self.done.add(u)
    if u.op in (Ops.SINK, Ops.GROUP):
      for s in u.src: self.effect(s)
    elif u.op is Ops.END:
      frames = self.open_loops(self.target(u), list(u.src[1:]))
      self.effect(u.src[0])
      self.close_loops(frames)
    elif u.op is Ops.STORE:
      idx, v = u.src
      if idx.op is not Ops.INDEX: raise PassError("uop.store must store through a uop.index", u.loc)
      # a kept value's store (to a scratch row) is no output store: lowering rebuilds its node (affine index forms),
      # so it is known by its buffer too
      if self.lanes and u not in self.kept_stores and idx.src[0] not in self.scratch: return self.store_lanes(u)
      buf, i, gate = self.address(idx)
      val = self.value(v)
      fr = self.target(u)
      if idx.dtype.base.is_bool: val = self.line(fr, f"arith.extui {val} : i1 to i8")
      st = f"memref.store {val}, {buf}[{i}] : {mem_type(idx.src[0].dtype)}"
      fr.lines.extend([f"scf.if {gate} {{", "  " + st, "}"] if gate else [st])
    elif u.op is Ops.AFTER: self.value(u)
    elif u.op is Ops.REDUCE: self.value(u)   # a kept reduce (see keep): its loop has filled the scratch row
    else: raise PassError(f"uop.{u.op} cannot be lowered as a side effect", u.loc)

  def store_lanes(self, u: UOp):
    """uop.nontemporal = VW (optimize.streaming_store chose the kernel): the innermost loop steps VW; the store's value
    is computed for lanes r .. r+VW-1 (index math in affine form, so the lanes' loads are base + 0..VW-1 and LLVM's
    SLP vectorizer turns the VW isomorphic scalar chains into vector code), then one nontemporal vector store."""
    fr = self.target(u)
    fr.step = self.lanes
    lanes = [at_lane(u, fr.rng, j) for j in range(self.lanes)]
    vals = [self.value(st.src[1]) for st in lanes]
    buf, i, _ = self.address(lanes[0].src[0])
    vec = self.line(fr, f"vector.from_elements {', '.join(vals)} : vector<{self.lanes}xf32>")
    # aligned: the address is a multiple of VW (streaming_store checks the index) in a buffer the runtime aligns
    fr.lines.append(f"vector.store {vec}, {buf}[{i}] {{alignment = {4 * self.lanes} : i64, nontemporal = true}} : "
                    f"{mem_type(u.src[0].src[0].dtype)}, vector<{self.lanes}xf32>")

  def address(self, idx: UOp) -> tuple[str, str, str | None]:
    return self.value(idx.src[0]), self.value(idx.src[1]), self.value(idx.src[2]) if len(idx.src) > 2 else None

  # -- values
  def value(self, u: UOp) -> str:
    """The SSA name of u's value, emitting it (and its operands, in operand order) where it is first needed."""
    if (n := self.names.get(u)) is not None: return n
    if u.op not in _OWN_OPERANDS:
      # a chain of plain ops is lowered operands first from an explicit post-order (the order the recursion below
      # would take), so each nested call finds its operands named: depth costs heap, not the C stack
      for x in self._operands_first(u): self._value(x)
    return self._value(u)
  def _operands_first(self, u: UOp) -> list[UOp]:
    order, seen, stack = [], set(), [(u, False)]
    while stack:
      x, post = stack.pop()
      if post: order.append(x); continue
      if x in seen or x in self.names: continue
      seen.add(x); stack.append((x, True))
      if x.op not in _OWN_OPERANDS: stack.extend((s, False) for s in reversed(x.src))
    return order[:-1]
  def _value(self, u: UOp) -> str:
    if (n := self.names.get(u)) is not None: return n
    if u.op in UNSUPPORTED: raise PassError(f"{self.pass_name} does not support {UNSUPPORTED[u.op]} yet (uop.{u.op})", u.loc)
    if u.op is Ops.RANGE:
      if u not in self.open: raise PassError(f"range axis={_axis(u)} is used outside the loop that closes it", u.loc)
      return self.open[u].iv
    if u.op is Ops.BUFFER: raise PassError(f"buffer slot {u.attrs.get('slot')} is not an argument of @{self.f.name}", u.loc)
    if u.op is Ops.AFTER:
      for d in u.src[1:]: self.effect(d)
      return self.value(u.src[0])
    if u.op is Ops.REDUCE: return self.reduce(u)
    srcs = [self.value(s) for s in u.src] if u.op not in (Ops.LOAD, Ops.INDEX) else []
    fr = self.target(u)
    if u.op is Ops.CONST: return self.place(u, fr, self.line(fr, f"arith.constant {const_text(u.attrs['value'], u.dtype.mlir)}"))
    if u.op is Ops.LOAD: return self.place(u, fr, self.load(u, fr))
    if u.op is Ops.INDEX: raise PassError("uop.index used as a value (only loads and stores take addresses)", u.loc)
    return self.place(u, fr, self.alu(u.op, u.src, srcs, u.dtype, fr, u))

  def load(self, u: UOp, fr: Frame) -> str:
    idx = u.src[0]
    if idx.op is not Ops.INDEX: raise PassError("uop.load must load through a uop.index", u.loc)
    if len(idx.src) > 2 and (split := self.gated_base(idx)) is not None:   # the clamp hoisted to the gate's loop
      buf, i, gate = self.value(idx.src[0]), self.value(split), self.value(idx.src[2])
    else:
      buf, i, gate = self.address(idx)
      if gate is not None: i = self.line(fr, f"arith.select {gate}, {i}, {self.const(0, dtypes.index)} : index")
    mt, dt = mem_type(idx.src[0].dtype), u.dtype
    if gate is not None:
      zero = self.const(False if dt.is_bool else 0.0 if dt.is_float else 0, dt)
      if idx.src[0].size == 0: return zero  # no element to read: every executed load is gated off
    v = self.line(fr, f"memref.load {buf}[{i}] : {mt}")
    if dt.is_bool: v = self.line(fr, f"arith.cmpi ne, {v}, {self.const(0, dtypes.int8)} : i8")
    return self.line(fr, f"arith.select {gate}, {v}, {zero} : {sl(dt)}") if gate is not None else v

  def gated_base(self, idx: UOp) -> UOp | None:
    """A gated address as where(gate, outer, 0) + inner, when its sum splits into terms that use only the gate's ranges
    (outer: a row base from a loaded index) and the rest (inner), and inner alone is always in the buffer. Where the gate
    is false the load then reads element inner, a valid one, and the clamp runs once per row, not per element: the inner
    loop addresses base + r, contiguous, which LLVM vectorizes (an embedding lookup's row copy)."""
    buf, i, gate = idx.src
    terms, todo = [], [i]
    while todo:
      if (t := todo.pop()).op is Ops.ADD and t.dtype is dtypes.index: todo += t.src
      else: terms.append(t)
    gr = self.rs(gate)
    outer, inner = [t for t in terms if self.rs(t) <= gr], [t for t in terms if not self.rs(t) <= gr]
    if not outer or not inner: return None
    lo, hi = im.bounds(rest := sum_index(inner))
    if lo < 0 or hi >= buf.dtype.size: return None
    return im.add(UOp(Ops.WHERE, dtypes.index, (gate, sum_index(outer), im.const(0))), rest)

  def reduce(self, u: UOp) -> str:
    op, dt = u.attrs.get("op"), u.dtype
    if op not in REDUCE_IDENTITY: raise PassError(f"reduce op must be add|mul|max|min, got {op!r}", u.loc)
    if cls(dt) not in ALU[op]: raise PassError(f"reduce {op} is not defined on {dt.name}", u.loc)
    fr = self.target(u)
    if self.block and op is Ops.ADD and dt.is_float and None not in (n := [im.cval(r.src[0]) for r in u.src[1:]]) and prod(n) > self.block:
      return self.place(u, fr, self.value(blocked(u, self.block)))
    cdt = COMPUTE.get(dt, dt)   # the accumulator's dtype: rounded to dt once, after the loop
    init = self.const(REDUCE_IDENTITY[op](cdt), cdt)
    frames = self.open_loops(fr, list(u.src[1:]), inits=[init])
    if not frames: return self.place(u, fr, self.value(u.src[0]))  # a reduce over no ranges is its source
    v = self.cast(self.value(u.src[0]), dt, cdt, frames[-1])
    acc = self.scalar_alu(op, cdt, [frames[-1].acc, v], cdt, frames[-1], u, self.fm if dt.is_float else "")
    self.close_loops(frames, sl(cdt), acc, init)
    return self.place(u, fr, self.cast(frames[0].res, cdt, dt, fr))

  def alu(self, op: str, srcs: tuple[UOp, ...], names: list[str], dt: DType, fr: Frame, u: UOp, fm: str = "") -> str:
    """op on operands srcs (named names) with result dtype dt. Casts, bitcasts and selects move values as they are;
    every other op on a storage dtype (COMPUTE) widens its operands, runs in the compute dtype and rounds back."""
    sdt = srcs[0].dtype if srcs else dt
    if op is Ops.CAST: return self.cast(names[0], sdt, dt, fr)
    if op is Ops.BITCAST: return names[0] if sl(sdt) == sl(dt) else self.line(fr, f"arith.bitcast {names[0]} : {sl(sdt)} to {sl(dt)}")
    if op is Ops.WHERE: return self.line(fr, f"arith.select {names[0]}, {names[1]}, {names[2]} : {sl(dt)}")
    if (cdt := COMPUTE.get(sdt)) is None: return self.scalar_alu(op, srcs, names, dt, fr, u, fm)
    r = self.scalar_alu(op, cdt, [self.cast(n, sdt, cdt, fr) for n in names], COMPUTE.get(dt, dt), fr, u, fm)
    return self.cast(r, cdt, dt, fr) if dt is sdt else r

  def scalar_alu(self, op: str, srcs: tuple[UOp, ...] | DType, names: list[str], dt: DType, fr: Frame, u: UOp, fm: str = "") -> str:
    """op on operands of one register type (srcs: the operand UOps, or only their dtype when no operand is a constant
    the op looks at), result dtype dt."""
    L = lambda text: self.line(fr, text)
    sdt = srcs if isinstance(srcs, DType) else srcs[0].dtype if srcs else dt
    c, t = cls(sdt), sl(sdt)
    if op is Ops.NEG:  # on bool: logical not, as in tinygrad
      if c == B: return L(f"arith.xori {names[0]}, {self.const(True, sdt)} : i1")
      return L(f"arith.negf {names[0]} : {t}") if c == F else L(f"arith.subi {self.const(0, sdt)}, {names[0]} : {t}")
    if op is Ops.RECIP and c == F: return L(f"arith.divf {self.const(1.0, sdt)}, {names[0]} : {t}")
    if op is Ops.TRUNC and c != F: return names[0]
    if op is Ops.MULACC and c != F: return self.scalar_alu(Ops.ADD, sdt, [self.scalar_alu(Ops.MUL, sdt, names[:2], dt, fr, u), names[2]], dt, fr, u)
    if op in CMP and c in CMP[op]:
      mop, pred = CMP[op][c].split()
      return L(f"{mop} {pred}, {names[0]}, {names[1]} : {t}")
    if op in (Ops.IDIV, Ops.MOD) and c in (S, U): return self.divide(op, srcs, names, sdt, fr)
    if op in (Ops.SHL, Ops.SHR) and c in (S, U): return self.shift(op, srcs, names, sdt, fr)
    if op is Ops.POW and c in (S, U): return self.ipow(names[0], names[1], sdt, fr)
    if op not in ALU or c not in ALU[op]: raise PassError(f"uop.{op} is not defined on {sdt.name}", u.loc)
    if op is Ops.SIN and (xs := sin_of_shift(u)) is not None:
      if abs(xs[1]) == HALF_PI:   # sin(x +- pi/2) and sin(+-pi/2 - x) are +-cos(x): libm's cosf, exact for any x
        r = L(f"math.cos {self.value(xs[0])} : f32")
        return L(f"arith.negf {r} : f32") if xs[1] < 0 else r
      # another shift: it and the sine in f64, rounded once
      arg = L(f"arith.{'subf' if xs[2] else 'addf'} {self.const(xs[1], dtypes.float64)}, {L(f'arith.extf {self.value(xs[0])} : f32 to f64')} : f64")
      return L(f"arith.truncf {L(f'math.sin {arg} : f64')} : f64 to f32")
    if op in POLY and t == "f32":
      if (xc := exp2_of_product(u)) is not None: return Poly(self, fr).exp2_mul(self.value(xc[0]), xc[1])
      return getattr(Poly(self, fr), op)(*names)
    return L(f"{ALU[op][c]} {', '.join(names)}{fm if op in ('add', 'mul', 'max', 'min') else ''} : {t}")

  def ipow(self, a: str, e: str, dt: DType, fr: Frame) -> str:
    """Integer a ** e by squaring over the exponent's bits (wraps like repeated multiplication). A negative exponent
    gives the truncated 1 / a**-e: 1 for a == 1, +-1 for a == -1, else 0."""
    L, t = (lambda text: self.line(fr, text)), sl(dt)
    zero, one, idx = self.const(0, dt), self.const(1, dt), (lambda v: self.const(v, dtypes.index))
    n = self.n; self.n += 10
    i, r, b, x, res = (f"%pw{n}_{k}" for k in ("i", "r", "b", "x", "res"))
    body = [f"%pw{n}_odd = arith.cmpi ne, %pw{n}_bit, {zero} : {t}",
            f"%pw{n}_rb = arith.muli {r}, {b} : {t}", f"%pw{n}_r2 = arith.select %pw{n}_odd, %pw{n}_rb, {r} : {t}",
            f"%pw{n}_b2 = arith.muli {b}, {b} : {t}", f"%pw{n}_x2 = arith.shrui {x}, {one} : {t}",
            f"scf.yield %pw{n}_r2, %pw{n}_b2, %pw{n}_x2 : {t}, {t}, {t}"]
    fr.lines += [f"{res}:3 = scf.for {i} = {idx(0)} to {idx(dt.bits)} step {idx(1)} iter_args({r} = {one}, {b} = {a}, {x} = {e}) -> ({t}, {t}, {t}) {{",
                 f"  %pw{n}_bit = arith.andi {x}, {one} : {t}"] + ["  " + l for l in body] + ["}"]
    out = f"{res}#0"
    if dt.is_unsigned: return out
    neg = L(f"arith.cmpi slt, {e}, {zero} : {t}")
    odd = L(f"arith.cmpi ne, {L(f'arith.andi {e}, {one} : {t}')}, {zero} : {t}")
    m1 = self.const(-1, dt)
    sgn = L(f"arith.select {odd}, {m1}, {one} : {t}")
    frac = L(f"arith.select {L(f'arith.cmpi eq, {a}, {m1} : {t}')}, {sgn}, {zero} : {t}")
    frac = L(f"arith.select {L(f'arith.cmpi eq, {a}, {one} : {t}')}, {one}, {frac} : {t}")
    return L(f"arith.select {neg}, {frac}, {out} : {t}")

  def divide(self, op: str, srcs, names: list[str], dt: DType, fr: Frame) -> str:
    """Integer idiv/mod without LLVM's undefined (trapping) cases: x/0 -> 0, x%0 -> 0, MIN/-1 -> -MIN (wraps), MIN%-1 -> 0."""
    L, t, signed = (lambda text: self.line(fr, text)), sl(dt), not dt.is_unsigned
    mop = ALU[op][cls(dt)]
    a, b = names
    d = srcs[1]
    if d.op is Ops.CONST and d.attrs["value"] != 0 and not (signed and d.attrs["value"] == -1):
      # index math divides non-negative values: unsigned, a power of two is then a shift or a mask (no sign fix-up)
      if signed and dt is dtypes.index and d.attrs["value"] > 0 and im.bounds(srcs[0])[0] >= 0: mop = ALU[op][U]
      return L(f"{mop} {a}, {b} : {t}")
    zero, one = self.const(0, dt), self.const(1, dt)
    isz = bad = L(f"arith.cmpi eq, {b}, {zero} : {t}")
    if signed:
      ism1 = L(f"arith.cmpi eq, {b}, {self.const(-1, dt)} : {t}")
      bad = L(f"arith.ori {isz}, {ism1} : i1")
    q = L(f"{mop} {a}, {L(f'arith.select {bad}, {one}, {b} : {t}')} : {t}")
    if op is Ops.MOD: return q  # x % 1 is already the 0 we want for both bad divisors
    if signed: q = L(f"arith.select {ism1}, {L(f'arith.subi {zero}, {a} : {t}')}, {q} : {t}")
    return L(f"arith.select {isz}, {zero}, {q} : {t}")

  def shift(self, op: str, srcs, names: list[str], dt: DType, fr: Frame) -> str:
    """Shifts as numpy defines them for every amount: one outside [0, bits) (a negative one too, read as unsigned) shifts
    every bit out, so shl gives 0 and shr 0 or the sign fill (LLVM's shift by >= bits is poison). A constant amount in
    range needs no guard."""
    L, t, (a, b), d = (lambda text: self.line(fr, text)), sl(dt), names, srcs[1]
    mop = ALU[op][cls(dt)]
    if d.op is Ops.CONST and 0 <= d.attrs["value"] < dt.bits: return L(f"{mop} {a}, {b} : {t}")
    ok = L(f"arith.cmpi ult, {b}, {self.const(dt.bits, dt)} : {t}")
    if op is Ops.SHR and not dt.is_unsigned: return L(f"arith.shrsi {a}, {L(f'arith.select {ok}, {b}, {self.const(dt.bits - 1, dt)} : {t}')} : {t}")
    return L(f"arith.select {ok}, {L(f'{mop} {a}, {b} : {t}')}, {self.const(0, dt)} : {t}")   # select: the poison is not chosen

  def cast(self, x: str, s: DType, d: DType, fr: Frame) -> str:
    L = lambda text: self.line(fr, text)
    if sl(s) == sl(d): return x
    c = lambda v: self.const(v, dtypes.int32)
    if (w := COMPUTE.get(s)) is not None: x, s = Bf16.widen(L, c, x), w   # exact: then on from the compute dtype
    if (w := COMPUTE.get(d)) is not None: return Bf16.narrow(L, c, self.cast(x, s, w, fr))
    if sl(s) == sl(d): return x
    if s is dtypes.index: x, s = L(f"arith.index_cast {x} : index to i64"), dtypes.int64
    if d is dtypes.index: return L(f"arith.index_cast {self.cast(x, s, dtypes.int64, fr)} : i64 to index")
    if sl(s) == sl(d): return x
    cs, cd = cls(s), cls(d)
    if cd == B:
      pred = "arith.cmpf une" if cs == F else "arith.cmpi ne"
      return L(f"{pred.split()[0]} {pred.split()[1]}, {x}, {self.const(0.0 if cs == F else 0, s)} : {sl(s)}")
    if (mop := CASTS.get((cs, cd))) is None:  # same class, different width
      wider = d.bits > s.bits
      mop = ("arith.extf" if wider else "arith.truncf") if cs == F else ("arith.extui" if cs == U else "arith.extsi") if wider else "arith.trunci"
    return L(f"{mop} {x} : {sl(s)} to {sl(d)}")

def lower_kernel(f: Func, name: str | None = None, lw: Lowerer | None = None) -> str:
  """One kernel func (uop dialect, kernel level) -> a public func.func over signless memrefs (text); lw: its lowerer."""
  lw = lw or Lowerer(f)
  lw.effect(lw.sink)
  args = ", ".join([f"%arg{i}: {mem_type(t.dtype)}" for i, t in enumerate(f.args)] + (["%lo: index", "%hi: index"] if lw.par else []))
  body = "".join(f"    {l}\n" for l in lw.root.lines)
  return f"  func.func @{name or f.name}({args}) {{\n{body}    return\n  }}\n"

# ---------------------------------------------------------------- fresh ranges, gates
def sizes(rs: list[UOp]) -> list[int]: return [int(r.src[0].attrs["value"]) for r in rs]
def loop_range(i: int, n: int) -> UOp:
  """A loop range of size n for a rebuilt kernel (a phase, a tile epilogue): axis 1000 + i, past the kernel's own."""
  return UOp(Ops.RANGE, dtypes.index, (im.const(n),), attrs(axis=1000 + i, kind="loop"))
def lane_range(n: int) -> UOp:
  """The range LaneLowerer runs as the n lanes of vectors (closed by no loop)."""
  return UOp(Ops.RANGE, dtypes.index, (im.const(n),), attrs(axis=2000, kind="lane"))
def gated(ix: UOp, cond: UOp | None) -> UOp:
  """Index ix that also needs cond to hold (its gate and cond), ix itself for no cond."""
  return ix if cond is None else UOp(Ops.INDEX, ix.dtype, (*ix.src[:2], im.and_(ix.src[2] if len(ix.src) > 2 else None, cond)))

# ---------------------------------------------------------------- lanes: one range as vector lanes
def lane_coef(e: UOp, lane: UOp, memo: dict) -> int | None:
  """The step of index expression e per step of range `lane` when e is linear in it (other terms may be anything), else None."""
  for u in e.toposort:   # operands first: each node once
    if u in memo: continue
    cs = [memo[s] for s in u.src]
    if u is lane: c = 1
    elif all(x == 0 for x in cs): c = 0
    elif u.op in (Ops.ADD, Ops.SUB) and None not in cs: c = cs[0] + cs[1] if u.op is Ops.ADD else cs[0] - cs[1]
    elif u.op is Ops.MUL and None not in cs and (k := next((im.cval(s) for s in u.src if im.cval(s) is not None), None)) is not None:
      c = (cs[0] if im.cval(u.src[1]) == k else cs[1]) * k
    else: c = None
    memo[u] = c
  return memo[e]

# ops a lane-dependent value may be made of (dtype class -> ops), and the largest address step a load's lanes may take
LANE_OPS = {"s": {Ops.ADD, Ops.SUB, Ops.MUL}, "b": {Ops.CMPLT, Ops.CMPEQ, Ops.CMPNE, Ops.AND, Ops.OR, Ops.XOR, Ops.CAST},
            "f": {Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.RECIP, Ops.SQRT, Ops.MAX, Ops.MIN, Ops.NEG, Ops.WHERE, Ops.LOAD, Ops.REDUCE,
                  Ops.EXP2, Ops.LOG2, Ops.POW, Ops.CAST}}   # casts between f32 and bool (a mask read as floats)
LANE_MAX_STEP = 4

class LaneLowerer(Lowerer):
  """A kernel whose range `lane` (size VW, closed by no loop) runs as the VW lanes of vectors: every value that depends
  on it is a vector, the rest scalars (broadcast where they meet), and the one store writes VW consecutive elements.
  A load whose address steps by s (1 <= s <= LANE_MAX_STEP) per lane reads s*VW consecutive elements with only each
  s-th enabled (a masked load: lanes gated off, padding, are not accessed, wherever they point) and keeps those; one
  whose address does not step (its gate does) reads its element where any lane's gate holds.
  Contraction.pack_block's panels of a convolution's image side: VW neighbouring output columns.
  prefetch: the store and the loads of its value (all but `skip`'s: the stack tile) are not run, only prefetched (their
  lanes' first and last element; `memref.prefetch`, a hint: it never faults): Contraction's tile epilogue, called
  before the tile's k loop, so the output and residual rows it will touch come in from L3 or memory meanwhile."""
  def __init__(self, f: Func, lane: UOp, prefetch: bool = False, skip: UOp | None = None):
    self.lane, self.vw, self.prefetch, self.skip = lane, im.cval(lane.src[0]), prefetch, skip
    self.vec = set()
    for u in f.roots[0].toposort:
      if u is lane or any(s in self.vec for s in u.src): self.vec.add(u)
    self.bcast: dict[UOp, tuple[Frame, str]] = {}
    super().__init__(f)

  @staticmethod
  def supports(x: UOp, lane: UOp) -> bool:
    """Whether x (a value of an f32 store whose address steps by 1 with `lane`) can be computed as lane vectors."""
    memo, dep = {}, {lane}
    for u in x.toposort:
      if u is not lane and any(s in dep for s in u.src): dep.add(u)
      if u not in dep or u is lane or u.op is Ops.INDEX: continue
      if u.dtype not in (dtypes.index, dtypes.bool, dtypes.float32) or u.op not in LANE_OPS[cls(u.dtype)]: return False
      if u.op is Ops.WHERE and u.src[1].dtype is not dtypes.float32: return False
      if u.op is Ops.CAST and {u.dtype, u.src[0].dtype} != {dtypes.float32, dtypes.bool}: return False
      if u.op is Ops.REDUCE and u.attrs.get("op") not in ("add", "max", "min"): return False
      if u.op is Ops.LOAD:
        idx = u.src[0]
        if idx.op is not Ops.INDEX or idx.src[0].op is not Ops.BUFFER: return False
        if (c := lane_coef(idx.src[1], lane, memo)) is None or not 0 <= c <= LANE_MAX_STEP or c == 0 and len(idx.src) < 3: return False
    return True

  def rs(self, u: UOp) -> frozenset:
    self.ranges.setdefault(self.lane, frozenset())   # no loop runs over the lanes: their values sit in the loops around them
    return super().rs(u)
  def vty(self, dt: DType, n: int = 0) -> str: return f"vector<{n or self.vw}x{sl(dt)}>"
  def vec_of(self, s: UOp, fr: Frame) -> str:
    """s as a vector: its own value, or its scalar broadcast once in the loop it is computed in."""
    if s in self.vec: return self.value(s)
    if (b := self.bcast.get(s)) is not None and (b[0] is self.root or b[0] in self.open.values()): return b[1]
    n, sfr = self.value(s), self.target(s)
    self.bcast[s] = (sfr, name := self.line(sfr, f"vector.broadcast {n} : {sl(s.dtype)} to {self.vty(s.dtype)}"))
    return name
  def at0(self, e: UOp) -> str: return self.value(affine_simplify(e.substitute({self.lane: im.const(0)})))

  def _value(self, u: UOp) -> str:
    if u not in self.vec: return super()._value(u)
    if (n := self.names.get(u)) is not None: return n
    fr = self.target(u)
    L = lambda text: self.line(fr, text)
    if u is self.lane: return self.place(u, fr, L(f"arith.constant dense<{list(range(self.vw))}> : {self.vty(dtypes.index)}"))
    if u.op is Ops.LOAD: return self.place(u, fr, self.vload(u, fr))
    if u.op is Ops.REDUCE:   # a vector accumulator per lane, carried through the reduce's loops
      vt, op = self.vty(u.dtype), u.attrs["op"]
      init = L(splat(REDUCE_IDENTITY[op](u.dtype), "f32", self.vw))
      frames = self.open_loops(fr, list(u.src[1:]), inits=[init])
      acc = self.line(frames[-1], f"{ALU[op]['f']} {frames[-1].acc}, {self.vec_of(u.src[0], frames[-1])}{self.fm} : {vt}")
      self.close_loops(frames, vt, acc, init)
      return self.place(u, fr, frames[0].res)
    srcs = [self.vec_of(s, fr) for s in u.src]
    sdt, c = u.src[0].dtype, cls(u.src[0].dtype)
    if u.op is Ops.WHERE: return self.place(u, fr, L(f"arith.select {', '.join(srcs)} : {self.vty(dtypes.bool)}, {self.vty(u.dtype)}"))
    if u.op is Ops.NEG: return self.place(u, fr, L(f"arith.negf {srcs[0]} : {self.vty(sdt)}"))
    if u.op is Ops.RECIP: return self.place(u, fr, L(f"arith.divf {L(f'arith.constant dense<1.0> : {self.vty(sdt)}')}, {srcs[0]} : {self.vty(sdt)}"))
    if (xc := exp2_of_product(u)) is not None: return self.place(u, fr, Poly(self, fr, self.vw).exp2_mul(self.vec_of(xc[0], fr), xc[1]))
    if str(u.op) in POLY: return self.place(u, fr, getattr(Poly(self, fr, self.vw), str(u.op))(*srcs))
    if u.op is Ops.CAST:   # f32 -> bool is != 0 (NaN is true), bool -> f32 is 0 or 1
      if u.dtype is dtypes.bool:
        return self.place(u, fr, L(f"arith.cmpf une, {srcs[0]}, {L(f'arith.constant dense<0.0> : {self.vty(sdt)}')} : {self.vty(sdt)}"))
      return self.place(u, fr, L(f"arith.uitofp {srcs[0]} : {self.vty(sdt)} to {self.vty(u.dtype)}"))
    if u.op in CMP:
      mop, pred = CMP[u.op][c].split()
      return self.place(u, fr, L(f"{mop} {pred}, {srcs[0]}, {srcs[1]} : {self.vty(sdt)}"))
    return self.place(u, fr, L(f"{ALU[u.op][c]} {', '.join(srcs)} : {self.vty(sdt)}"))

  def vload(self, u: UOp, fr: Frame) -> str:
    idx, vw = u.src[0], self.vw
    buf, step, mt = self.value(idx.src[0]), lane_coef(idx.src[1], self.lane, {}), mem_type(idx.src[0].dtype)
    base, n = self.at0(idx.src[1]), step * vw
    L = lambda text: self.line(fr, text)
    if step == 0:   # one element, gated per lane: read where any lane's gate holds (then it is in bounds)
      mask = self.value(idx.src[2])
      some = L(f"vector.reduction <or>, {mask} : {self.vty(dtypes.bool)} into i1")
      v = L(f"memref.load {buf}[{L(f'arith.select {some}, {base}, {self.const(0, dtypes.index)} : index')}] : {mt}")
      zero = L(f"arith.constant dense<0.0> : {self.vty(dtypes.float32)}")
      vec = L(f"vector.broadcast {v} : f32 to {self.vty(dtypes.float32)}")
      return L(f"arith.select {mask}, {vec}, {zero} : {self.vty(dtypes.bool)}, {self.vty(dtypes.float32)}")
    if len(idx.src) > 2: mask = self.vec_of(idx.src[2], fr)
    elif step == 1: return L(f"vector.load {buf}[{base}] : {mt}, {self.vty(dtypes.float32)}")
    else: mask = L(f"arith.constant dense<true> : {self.vty(dtypes.bool)}")
    if step > 1:   # lane j's gate on element j*step, the elements between off
      off = L(f"arith.constant dense<false> : {self.vty(dtypes.bool)}")
      spread = [i // step if i % step == 0 else vw for i in range(n)]
      mask = L(f"vector.shuffle {mask}, {off} {spread} : {self.vty(dtypes.bool)}, {self.vty(dtypes.bool)}")
    zero = L(f"arith.constant dense<0.0> : {self.vty(dtypes.float32, n)}")
    vt = self.vty(dtypes.float32, n)
    v = L(f"vector.maskedload {buf}[{base}], {mask}, {zero} : {mt}, {self.vty(dtypes.bool, n)}, {vt} into {vt}")
    if step == 1: return v
    return L(f"vector.shuffle {v}, {v} {[j * step for j in range(vw)]} : {self.vty(dtypes.float32, n)}, {self.vty(dtypes.float32, n)}")

  def effect(self, u: UOp):
    if u.op is not Ops.STORE or u not in self.vec or u in self.done: return super().effect(u)
    self.done.add(u)
    idx, v = u.src
    fr = self.target(u)
    if self.prefetch:   # the loads a reduce makes are left out (their addresses need its loop)
      under = {y for r in v.toposort if r.op is Ops.REDUCE for y in r.src[0].toposort}
      for x in [idx] + [x.src[0] for x in v.toposort if x.op is Ops.LOAD and x not in under and x.src[0].src[0] is not self.skip]:
        self.touch(x, x is idx, fr)
      return
    val = self.vec_of(v, fr)
    buf, at = self.value(idx.src[0]), self.at0(idx.src[1])
    if len(idx.src) > 2:   # lanes gated off (past the output's edge) are not written
      fr.lines.append(f"vector.maskedstore {buf}[{at}], {self.vec_of(idx.src[2], fr)}, {val} : {mem_type(idx.src[0].dtype)}, "
                      f"{self.vty(dtypes.bool)}, {self.vty(dtypes.float32)}")
    else: fr.lines.append(f"vector.store {val}, {buf}[{at}] : {mem_type(idx.src[0].dtype)}, {self.vty(dtypes.float32)}")

  def touch(self, idx: UOp, write: bool, fr: Frame):
    """Prefetch the lanes' first and last element of idx (clamped into its buffer)."""
    buf, mt, base = self.value(idx.src[0]), mem_type(idx.src[0].dtype), self.at0(idx.src[1])
    last, top, c0 = (lane_coef(idx.src[1], self.lane, {}) or 0) * (self.vw - 1), idx.src[0].dtype.size - 1, self.const(0, dtypes.index)
    clamp = lambda x: self.line(fr, f"arith.maxsi {self.line(fr, f'arith.minsi {x}, {self.const(top, dtypes.index)} : index')}, {c0} : index")
    ends = [base] + [self.line(fr, f"arith.addi {base}, {self.const(last, dtypes.index)} : index")] * bool(last)
    for at in map(clamp, ends): fr.lines.append(f"memref.prefetch {buf}[{at}], {'write' if write else 'read'}, locality<3>, data : {mt}")

# ---------------------------------------------------------------- contractions: packed operands + register-tiled FMAs
class Contraction:
  """A kernel uop-optimize marked `uop.contraction = [MR, NR, KC, MC, VW]` (see kernel_facts.contraction: the store is
  g(reduce-add over K of a*b), a indexed by loop ranges I and K, b by loop ranges J and K) as four phases, each a
  function over the kernel's buffers plus three scratch buffers, each run on threads over its outer loop:
    pack_a  Ap[M/MR][K][MR] = a    the operands' index math (folded to affine form) and gates run here, O(MK + KN);
    pack_b  Bp[N/NR][K][NR] = b    rows past M / columns past N are not written: they only reach C entries never read
    mm      C[M][N] = Ap x Bp in Goto's order: KC-deep slices of K; MC-row blocks of Ap (L2); NR-wide panels of Bp
            (their KC slice in L1); an MR x NR tile of VW-lane vector accumulators carried through the k loop with
            vector.fma. Threads split the more numerous of the Ap blocks and the Bp panels.
    epi     the original store, with the reduce replaced by a load of C[m][n]   (bias, relu, ... fuse here)
  Two variants of A: read in place (a row-major load, see in_place: no pack_a), or, when threads split A's row blocks
  (more of them than B panels: convolutions, tall operands), packed per block inside mm: each thread packs its
  MC-row block (all of K) into its own L2-sized buffer, picked by its chunk index, just before the tiles use it.
  A pack whose rows are neighbours in the operand's innermost row range, read a small fixed step apart (a convolution's
  image side: output columns), runs them as vector lanes (pack_lanes, LaneLowerer); other operands pack element-wise.
  A pack of one input buffer's values alone (weights) runs once per input: its phase result is kept (reuse)."""
  def __init__(self, f: Func, name: str):
    self.f, self.name = f, name
    if (found := contraction(f.roots[0])) is None: raise PassError(f"@{f.name}: uop.contraction on a kernel that is not a contraction")
    red, a, b, I, J, K, T = found
    self.op = red.attrs["op"]   # add: a product's sum; max or min: a column reduce (a is ones, see optimize.column_reduce)
    if not (isinstance(c := f.attrs["uop.contraction"], tuple) and len(c) == 5 and all(type(x) is int and x > 0 for x in c)):
      raise PassError(f"@{f.name}: uop.contraction must be array<i64: MR, NR, KC, MC, VW> of positive sizes, got {attr_text(c)}")
    self.mr, self.nr, self.kc, self.mc, self.vw = c
    self.M, self.N, self.K, self.batch = (prod(sizes(rs)) for rs in (I, J, K, T))
    self.Mp, self.Np = -(-self.M // self.mr) * self.mr, -(-self.N // self.nr) * self.nr
    n = len(f.args)
    self.direct_a = self.in_place(a, I, K, self.Np == self.nr) if not T else None
    # a batch's A computed from values that step along k (attention's exp(s - max)): pack_a writes it row-major (stores
    # along k, as it computes it; rows a multiple of 1 KiB long get 64 bytes more so they do not share cache sets) and
    # the tiles read its rows there. MiniLM's softmax(qk) @ v, pack + tiles a call: 25.8 + 18.8 ms in MR-row panels
    # (each k step's values stored MR floats apart), 10.6 + 21.7 row-major. A plain load keeps its panels: they pack
    # fast, and tiles over them ran faster (q @ k^T 15.4 against 18.7 ms)
    self.rows_a = self.K + 16 * (self.K % 256 == 0) if T and len(K) == 1 and not k_contiguous(a, K[0]) and k_rows(a, K[0]) else None
    self.ka = self.rows_a or self.K   # A's floats per row in its scratch
    # panels that depend on one buffer alone (weights, typically: B, or A where the weights hold the outer loop, as in
    # a convolution of one image): the runtime may keep them while that input lives
    def one_slot(x):
      srcs = {u.src[0].src[0] for u in x.toposort if u.op is Ops.LOAD}
      return next(iter(srcs)).attrs["slot"] if len(srcs) == 1 and next(iter(srcs)).op is Ops.BUFFER else None
    self.a_slot, self.b_slot = one_slot(a), one_slot(b)
    # A packed per MC-row block inside mm, when threads split row blocks (more of them than B panels: convolutions,
    # tall operands): each thread's block (all of K, half as many floats as MC x KC: half of L2) stays in L2 from packing to use.
    # Not a plain k-contiguous load of one buffer (weights, as in a convolution of one image): its own phase packs it,
    # and that phase's result is kept per input (reuse)
    t = _int_attr(f, "uop.threads", 1)
    mc_blk = max(self.mr, min(self.mc, self.mc * self.kc // (2 * self.K) // self.mr * self.mr))
    self.fused = self.direct_a is None and not T and -(-self.Mp // mc_blk) > self.Np // self.nr and \
      not (self.a_slot is not None and k_contiguous(a, K[-1]))
    if self.fused: self.mc = mc_blk
    # Ap, Bp, C; a batch (over T) of each, one after the other
    self.scratch = [self.batch * self.Mp * self.ka if self.direct_a is None and not self.fused else 1, self.batch * self.Np * self.K,
                    self.batch * self.Mp * self.Np]
    if self.fused: self.scratch += [self.mc * self.K] * t   # one A block per thread
    self.args = list(f.args) + [arg_buffer(n + j, dtypes.float32.ptr(x)) for j, x in enumerate(self.scratch)]
    ap, bp, cp = (self.args[n + i] for i in (3 if self.fused else 0, 1, 2))
    thr = {k: v for k, v in f.attrs.items() if k in self.PASSED}
    def pack(x, rs, w, buf, k_first, per_batch, row=0):
      # loops over the batch, then the operand's own ranges (fresh axes: k outermost for b, whose rows are k; rows first
      # for a), so reads follow its layout; the packed position needs only lin // w and lin % w (row > 0: row-major,
      # rows `row` floats apart)
      x = affine_simplify(x.substitute({r: im.const(0) for r in set(I) | set(J) if r not in rs}))  # mentioned, not used
      if not row and (lanes := pack_lanes(x, rs, w, buf, per_batch=per_batch)) is not None: return lanes
      order = T + ((K + rs) if k_first else (rs + K))
      new = {r: UOp(Ops.RANGE, dtypes.index, r.src, attrs(axis=1000 + i, kind="loop")) for i, r in enumerate(order)}
      lin, kl = im.linearize([new[r] for r in rs], sizes(rs)), im.linearize([new[r] for r in K], sizes(K))
      idx = self.packed_at(lin, kl, w, row)
      if T: idx = im.add(im.mul(im.linearize([new[r] for r in T], sizes(T)), im.const(per_batch)), idx)
      st = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, dtypes.float32.ptr(), (buf, idx)), x.substitute(new)))
      return Func(f"{name}_pack", self.args, [], [UOp(Ops.SINK, dtypes.void, (UOp(Ops.END, dtypes.void, (st, *new.values())),))], {"uop.kernel": None, **thr})
    def pack_block(x, rs, w, buf):
      # per block: loops over panel p (from the caller's %lo to %hi), lane l, k; row p*w + l (clamped to the last:
      # lanes past M repeat it, reaching only C's pad rows) at the block-local position (p mod P)*K*w + k*w + l
      x = affine_simplify(x.substitute({r: im.const(0) for r in set(J) if r not in rs}))
      n_rows, per = prod(sizes(rs)), self.mc // w
      if (lanes := pack_lanes(x, rs, w, buf, per=per)) is not None: return lanes
      p, l, ks = loop_range(0, -(-n_rows // w)), loop_range(1, w), {r: loop_range(2 + i, s) for i, (r, s) in enumerate(zip(K, sizes(K)))}
      row = UOp(Ops.MIN, dtypes.index, (im.add(im.mul(p, im.const(w)), l), im.const(n_rows - 1)))
      kl = im.linearize([ks[r] for r in K], sizes(K))
      idx = im.add(im.add(im.mul(im.mod(p, per), im.const(self.K * w)), im.mul(kl, im.const(w))), l)
      val = affine_simplify(x.substitute({**dict(zip(rs, im.unravel(row, sizes(rs)))), **ks}))
      st = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, dtypes.float32.ptr(), (buf, idx)), val))
      return Func(f"{name}_pack", self.args, [], [UOp(Ops.SINK, dtypes.void, (UOp(Ops.END, dtypes.void, (st, p, l, *ks.values())),))],
                  {"uop.kernel": None, "uop.threads": 1})   # threads: takes the panel range (%lo, %hi)
    def pack_lanes(x, rs, w, buf, per=0, per_batch=0):
      # panels whose rows are neighbours in the innermost row range (a convolution's output columns) as vector lanes
      # (LaneLowerer): loops over the batch, panel p, k and lane group v (L = VW rows of a w-row panel), the rows
      # unravelled once per group. Each k then reads L elements a fixed step apart and writes L consecutive ones.
      # Where L does not divide that range (size S), a group spans pieces of up to J + 1 runs: each piece's loads are
      # gated to its lanes (the others may point anywhere), and rows past the last (lanes of the last panel, reaching
      # only C's pad rows) read the last row. per: panels per block (a block packed inside mm), else the whole operand
      if not rs: return None
      sz = sizes(rs)
      S, n_rows, L = sz[-1], prod(sz), self.vw if w % self.vw == 0 else w
      J = (S - gcd(L, S) + L - 1) // S   # the most row boundaries a group crosses
      ts = [loop_range(i, n) for i, n in enumerate(sizes(T) if not per else [])]
      p, ks = loop_range(len(ts), -(-n_rows // w)), {r: loop_range(len(ts) + 1 + i, n) for i, (r, n) in enumerate(zip(K, sizes(K)))}
      v = loop_range(len(ts) + 1 + len(K), w // L) if w > L else im.const(0)   # innermost: a k row's panel is read once
      lane = lane_range(L)
      row0 = im.add(im.mul(p, im.const(w)), im.mul(v, im.const(L)))
      r0, col, val = im.idiv(row0, S), im.add(im.mod(row0, S), lane), None
      clamp = J or n_rows % w
      sub = {**dict(zip(T, ts)), **ks}
      for jj in range(J + 1):
        row = UOp(Ops.MIN, dtypes.index, (im.add(r0, im.const(jj)), im.const(n_rows // S - 1))) if clamp else r0
        xj = affine_simplify(x.substitute({**dict(zip(rs, (*im.unravel(row, sz[:-1]), im.sub(col, im.const(jj * S))))), **sub}))
        if (mine := im.in_bounds(col, jj * S, (jj + 1) * S) if J else None) is False: continue
        if mine is not None:
          xj = xj.substitute({u.src[0]: gated(u.src[0], mine) for u in xj.toposort if u.op is Ops.LOAD and lane in u.src[0].toposort})
        val = xj if val is None or mine is None else UOp(Ops.WHERE, dtypes.float32, (mine, xj, val))
      if not LaneLowerer.supports(val, lane): return None
      kl = im.linearize([ks[r] for r in K], sizes(K))
      idx = im.add(im.add(im.mul(im.mod(p, per) if per else p, im.const(self.K * w)), im.mul(kl, im.const(w))), im.add(im.mul(v, im.const(L)), lane))
      if ts: idx = im.add(im.mul(im.linearize(ts, sizes(T)), im.const(per_batch)), idx)
      st = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, dtypes.float32.ptr(), (buf, idx)), val))
      loops = [*ts, p, *ks.values(), *([v] if w > L else [])]
      f = Func(f"{name}_pack", self.args, [], [UOp(Ops.SINK, dtypes.void, (UOp(Ops.END, dtypes.void, (st, *loops)),))],
               {"uop.kernel": None, **({"uop.threads": 1} if per else thr)})
      self.lane_of[id(f)] = lane
      return f
    self.lane_of: dict[int, UOp] = {}   # id of a pack phase whose rows run as vector lanes -> its lane range
    self.pack_a = None if self.direct_a is not None else pack_block(a, I, self.mr, ap) if self.fused else \
      pack(a, I, self.mr, ap, False, self.Mp * self.ka, self.rows_a or 0)
    self.pack_b = pack(b, J, self.nr, bp, True, self.Np * self.K)
    m, nn = im.linearize(I, sizes(I)), im.linearize(J, sizes(J))
    ci = im.add(im.mul(m, im.const(self.Np)), nn)
    if T: ci = im.add(im.mul(im.linearize(T, sizes(T)), im.const(self.Mp * self.Np)), ci)
    c = UOp(Ops.LOAD, dtypes.float32, (UOp(Ops.INDEX, dtypes.float32.ptr(), (cp, ci)),))
    sums = self.packed_sums(a, I, K, T, ap)
    epi = f.roots[0].substitute({red: c, **sums})
    if I and J and max(I + J, key=_axis) is I[-1]:
      # the output steps along A's last row range (NCHW conv with the image as A) while C steps along B's: the loops over
      # B's ranges move inside A's others, so a few rows of C stay in L1 while their columns go out, one at a time
      epi = epi.substitute({r: UOp(Ops.RANGE, dtypes.index, r.src, attrs(axis=1000 + i, kind="loop")) for i, r in enumerate(T + I[:-1] + J + I[-1:])})
    self.epi = Func(f"{name}_epi", self.args, [], [epi], {"uop.kernel": None, **thr})
    self.tile_rows = False   # see tile_epilogue
    self.epi_tile = self.tile_epilogue(red, a, b, I, J, T, cp, sums)

  def tile_epilogue(self, red: UOp, a: UOp, b: UOp, I: list[UOp], J: list[UOp], T: list[UOp], cp: UOp, sums: dict) -> Func | None:
    """The epilogue as a function of tiles (outer range t = (bt * MB + ib) * NB + jb, from %lo to %hi), which mm calls on each tile
    once its last k slice is done, with the tile on mm's stack (argument `tile`): no pass over C afterwards, and C takes
    scratch only when K takes several slices. The tile's columns run as vector lanes (LaneLowerer) when every index
    steps along J as one contiguous run (row-major matrices, NCHW outputs): idx(I, J) = idx(I, 0) + s * n, n the linear
    column, s 1 for the store (0 <= s <= LANE_MAX_STEP for loads); else its rows, when the indices step so along I (an
    output that steps along A's rows: a convolution with the image as A), from the tile stored transposed (tile_rows).
    None (the separate epilogue phase) for anything else: a reduce in the epilogue (but A's packed row sums), a value that uses the lane side other
    than through an index, a gate on it, a store that is not one f32 store over the loops, or a buffer that both the
    epilogue writes and the operands read (mm reads A while it stores the tiles)."""
    if (one := single_store(self.f.roots[0])) is None: return None
    end, st, _ = one
    if set(end.src[1:]) != set(I + J + T) or st.src[0].op is not Ops.INDEX: return None
    cload = UOp(Ops.LOAD, dtypes.float32, (UOp(Ops.INDEX, dtypes.float32.ptr(), (cp, im.const(0))),))   # the tile's element, placed below
    out, nodes = st.src[0].src[0], (st := st.substitute({red: cload, **sums})).toposort
    # a reduce in the epilogue: only the sums of A's packed panels (packed_sums: attention's softmax row sums)
    if out.op is not Ops.BUFFER or out.dtype.base is not dtypes.float32: return None
    if any(u.op is Ops.REDUCE and u not in sums.values() for u in nodes): return None
    if any(u.op is Ops.LOAD and u.src[0].src[0] is out for x in (a, b) for u in x.toposort): return None
    tile = arg_buffer(len(self.args), dtypes.float32.ptr(self.mr * self.nr))
    for rows in (False, True):
      if (f := self._tile_epilogue(st, nodes, cload, tile, I, J, T, rows)) is None: continue
      if self.K <= self.kc:   # C is never stored: no scratch for it (the phases share the args list; the epilogue has its own)
        self.scratch[2] = 1
        self.args[cp.attrs["slot"]] = f.args[cp.attrs["slot"]] = arg_buffer(cp.attrs["slot"], dtypes.float32.ptr(1))
      self.tile_rows = rows
      return f
    return None

  def _tile_epilogue(self, st: UOp, nodes: list[UOp], cload: UOp, tile: UOp, I: list[UOp], J: list[UOp], T: list[UOp], rows: bool) -> Func | None:
    """tile_epilogue with lanes along the tile's columns (n; the tile row-major), or its rows (m; the tile transposed).
    A batch's tiles follow each other: t = (bt * MB + ib) * NB + jb."""
    nb, nv, per = self.Np // self.nr, self.nr // self.vw, (self.Mp // self.mr) * (self.Np // self.nr)
    lane = lane_range(self.mr if rows else self.vw)
    t = loop_range(0, self.batch * per)
    tb = im.mod(t, per) if self.batch > 1 else t
    m0, n0 = im.mul(im.idiv(tb, nb), im.const(self.mr)), im.mul(im.mod(tb, nb), im.const(self.nr))
    if rows:
      c = loop_range(1, self.nr)
      loops, m, n, at = [t, c], im.add(m0, lane), im.add(n0, c), im.add(im.mul(c, im.const(self.mr)), lane)
    else:
      r, v = loop_range(1, self.mr), loop_range(2, nv) if nv > 1 else im.const(0)
      col = im.add(im.mul(v, im.const(self.vw)), lane)
      loops, m, n, at = [t, r, *([v] if nv > 1 else [])], im.add(m0, r), im.add(n0, col), im.add(im.mul(r, im.const(self.nr)), col)
    # the lane side (J for columns, I for rows): indices must step along it as one run; lanes past its edge read nothing.
    # The scalar side: its positions past the edge (the last tile's) are clamped: never stored
    rs, cs = (I, m, self.M, self.Mp), (J, n, self.N, self.Np)
    (L, lin, ln, lp), (S, slin, sn, sp) = (rs, cs) if rows else (cs, rs)
    scal = dict(zip(S, im.unravel(UOp(Ops.MIN, dtypes.index, (slin, im.const(sn - 1))) if sp != sn else slin, sizes(S))))
    scal.update(zip(T, im.unravel(im.idiv(t, per), sizes(T))))
    cut = UOp(Ops.CMPLT, dtypes.bool, (lin, im.const(ln))) if lp != ln else None
    # the first lane's position on the lane side, and how many lanes a vector holds there (they never straddle a run)
    Ls, szL, base, W = set(L), sizes(L), m0 if rows else im.add(n0, im.mul(v, im.const(self.vw))), self.mr if rows else self.vw
    sub, memo = {cload: UOp(Ops.LOAD, dtypes.float32, (UOp(Ops.INDEX, dtypes.float32.ptr(), (tile, at)),))}, {}
    for u in nodes:
      if u.op is not Ops.INDEX or u is cload.src[0]: continue
      if len(u.src) > 2 and Ls & set(u.src[2].toposort): return None
      x, lanes = u.src[1], Ls & set(u.src[1].toposort)
      if lanes:
        if (form := affine(x, memo)) is None or (s := form.get(L[-1], 0)) < 0: return None
        # L[i:] step as one run of stride s; the outer L[:i] (a batch of images, each output one run) may step apart,
        # where the run's length is a multiple of W: a vector's lanes then share the outer position, the first lane's
        i = next((i for i in range(len(L)) if [form.get(j, 0) for j in L[i:]] == [s * prod(szL[k + 1:]) for k in range(i, len(L))]
                  and (i == 0 or prod(szL[i:]) % W == 0)), None)
        if i is None: return None
        if i == 0: x = im.add(affine_simplify(x.substitute({j: im.const(0) for j in L})), im.mul(lin, im.const(s)))
        else:
          run = prod(szL[i:])
          outer = dict(zip(L[:i], im.unravel(im.idiv(base, run), szL[:i])))
          x = im.add(affine_simplify(x.substitute({**outer, **{j: im.const(0) for j in L[i:]}})),
                     im.mul(im.add(im.mod(base, run), lane), im.const(s)))
      ix = UOp(Ops.INDEX, u.dtype, (u.src[0], x.substitute(scal), *(g.substitute(scal) for g in u.src[2:])))
      sub[u] = gated(ix, cut) if lanes and u is not st.src[0] else ix
    idx, val = sub[st.src[0]], st.src[1].substitute({**sub, **scal})
    if Ls & set(val.toposort) or lane_coef(idx.src[1], lane, {}) != 1 or not LaneLowerer.supports(val, lane): return None
    idx = gated(idx, im.and_(UOp(Ops.CMPLT, dtypes.bool, (slin, im.const(sn))) if sp != sn else None, cut))
    body = UOp(Ops.END, dtypes.void, (UOp(Ops.STORE, dtypes.void, (idx, val), loc=st.loc), *loops))
    f = Func(f"{self.name}_epi", self.args + [tile], [], [UOp(Ops.SINK, dtypes.void, (body,))],
             {"uop.kernel": None, "uop.threads": 1, **{k: v for k, v in self.f.attrs.items() if k == "uop.fastmath"}})   # the sums reassociate
    self.lane_of[id(f)] = lane
    return f

  def packed_sums(self, a: UOp, I: list[UOp], K: list[UOp], T: list[UOp], ap: UOp) -> dict[UOp, UOp]:
    """The epilogue's sums of a itself over ranges like K (attention's softmax row sums of the exps its product
    packed), each replaced by a sum of A's packed panels: what pack_a computed is not computed again."""
    if self.pack_a is None or self.fused: return {}
    out, lin = {}, im.linearize(I, sizes(I))
    for u in self.f.roots[0].toposort:
      if u.op is not Ops.REDUCE or u.attrs.get("op") != "add" or len(u.src) != len(K) + 1 or u.dtype is not dtypes.float32: continue
      K2 = sorted(u.src[1:], key=_axis)
      if sizes(K2) != sizes(K) or a.substitute(dict(zip(K, K2))) is not u.src[0]: continue
      idx = self.packed_at(lin, im.linearize(K2, sizes(K)), self.mr, self.rows_a or 0)
      if T: idx = im.add(im.mul(im.linearize(T, sizes(T)), im.const(self.Mp * self.ka)), idx)
      out[u] = UOp(Ops.REDUCE, u.dtype, (UOp(Ops.LOAD, dtypes.float32, (UOp(Ops.INDEX, dtypes.float32.ptr(), (ap, idx)),)), *u.src[1:]), u.arg, u.loc)
    return out

  def packed_at(self, lin: UOp, kl: UOp, w: int, row: int = 0) -> UOp:
    """Where an operand's row lin, k kl goes in its scratch: w-row panels (each k's w values together), or row-major
    with rows `row` floats apart."""
    if row: return im.add(im.mul(lin, im.const(row)), kl)
    return im.add(im.add(im.mul(im.idiv(lin, w), im.const(self.K * w)), im.mul(kl, im.const(w))), im.mod(lin, w))

  @staticmethod
  def in_place(a: UOp, I: list[UOp], K: list[UOp], once: bool = False) -> tuple[int, int, int] | None:
    """(buffer slot, offset, row stride) when a is an ungated f32 load at offset + row*stride + k, one row range and
    one k range: the micro-kernel then reads A's rows where they are (each row a sequential stream in k) instead of
    copying A into MR-row panels first. `once`: B is one panel, so the tiles read A once (packing it would read it twice)."""
    if a.op is not Ops.LOAD or a.dtype is not dtypes.float32 or len(I) != 1 or len(K) != 1: return None
    idx = a.src[0]
    if idx.op is not Ops.INDEX or len(idx.src) != 2 or idx.src[0].op is not Ops.BUFFER: return None
    form = affine(idx.src[1], {})
    if form is None or set(form) - {1, I[0], K[0]} or form.get(K[0]) != 1 or form.get(I[0], 0) <= 0: return None
    # rows a multiple of 1 KiB apart share cache sets: the tile's 6 streams then evict each other (2048^3: 7% slower)
    if form[I[0]] % 256 == 0 and not once: return None
    return idx.src[0].attrs["slot"], form.get(1, 0), form[I[0]]

  PASSED = ("uop.threads", "uop.fastmath")   # the kernel's choices its phases take (fastmath: epilogue reduces vectorize)
  PAR_MIN = 1 << 18   # elements (packing, epilogue) or flops / 16 (mm) below which a phase runs on one thread
  def phases(self) -> list[tuple[str, tuple[int, int, int] | None]]:
    t = _int_attr(self.f, "uop.threads", 1)
    par = lambda f, work: (parallel_info(f)[0], t if work >= self.PAR_MIN else 1, 1) if t > 1 else None
    nmm = self.batch if self.batch > 1 else max(self.Np // self.nr, -(-self.Mp // self.mc))
    mm_par = (nmm, t if self.batch * self.M * self.N * self.K >= 8 * self.PAR_MIN else 1, 1, *((1,) if self.fused else ())) if t > 1 else None
    bt = self.batch
    return [*([(f"{self.name}_pack_a", par(self.pack_a, bt * self.M * self.K))] if self.pack_a is not None and not self.fused else []),
            (f"{self.name}_pack_b", par(self.pack_b, bt * self.N * self.K)),
            (f"{self.name}_mm", mm_par),
            *([] if self.epi_tile else [(f"{self.name}_epi", par(self.epi, bt * self.M * self.N))])]

  def reuse(self) -> list[tuple[int, int, int]]:
    """(phase, argument, scratch) of pack_a (a phase of its own) and pack_b when their panels are a function of one input buffer."""
    names = [e for e, _ in self.phases()]
    return [(names.index(f"{self.name}_pack_{x}"), slot, s) for x, slot, s in (("a", self.a_slot, 0), ("b", self.b_slot, 1))
            if slot is not None and f"{self.name}_pack_{x}" in names]

  def areas(self) -> tuple[int, int, int]:
    """Floats from one problem of a batch to the next in Ap, Bp and C."""
    return self.Mp * self.ka, self.Np * self.K, self.Mp * self.Np

  @staticmethod
  def private(text: str) -> str: return text.replace("func.func @", "func.func private @", 1)   # mm's one call of it inlines
  def text(self) -> str:
    low = lambda f, name: lower_kernel(f, name, LaneLowerer(f, self.lane_of[id(f)]) if id(f) in self.lane_of else None)
    return ((low(self.pack_a, f"{self.name}_pack_a") if self.pack_a is not None else "") + low(self.pack_b, f"{self.name}_pack_b")
            + self.mm() + (self.private(low(self.epi_tile, f"{self.name}_epi")) + self.private(lower_kernel(
                self.epi_tile, f"{self.name}_pf", LaneLowerer(self.epi_tile, self.lane_of[id(self.epi_tile)], True, self.epi_tile.args[-1])))
                           if self.epi_tile
                           else lower_kernel(self.epi, f"{self.name}_epi")))

  def mm(self) -> str:
    mr, nr, kc, mc, vw = self.mr, self.nr, self.kc, self.mc, self.vw
    nv, V = nr // vw, f"vector<{vw}xf32>"
    t = _int_attr(self.f, "uop.threads", 1)
    out, n, depth = [], [0], [2]
    def L(text):
      n[0] += 1; out.append(f"{'  ' * depth[0]}%v{n[0]} = {text}"); return f"%v{n[0]}"
    def put(text, d=None):
      if d is not None: depth[0] = d
      out.append(f"{'  ' * depth[0]}{text}")
    ci = lambda v: L(f"arith.constant {v} : index")
    add = lambda x, c: L(f"arith.addi {x}, {ci(c)} : index") if c else x
    c0, c1 = ci(0), ci(1)
    ck, ckc = ci(self.K), ci(kc)
    one = self.K <= kc   # one k slice
    if self.epi_tile is not None: put(f"%tile = memref.alloca() {{alignment = 64 : i64}} : memref<{mr * nr}xf32>")
    # the reduce's identity and combine: an FMA for a product's sum; a max or min of a column reduce (A is ones)
    op = self.op
    zero = L(f"arith.constant dense<{ {'add': '0.0', 'max': '0xFF800000', 'min': '0x7F800000'}[op]}> : {V}")
    nb, mb = self.Np // nr, -(-self.Mp // mc)   # Bp panels, Ap row blocks: threads split the larger (each thread then
    by_m = mb > nb                               # streams only its share of the big operand from memory)
    batched = self.batch > 1                     # threads split the batch instead; each problem's offsets in the scratch
    lo, hi = ("%lo", "%hi") if t > 1 else (c0, ci(self.batch if batched else mb if by_m else nb))
    at = lambda x, part: L(f"arith.addi {x}, %off{part} : index") if batched else x
    rowwise = self.direct_a is not None or self.rows_a is not None   # the tiles read A's rows (in place, or pack_a's copy)
    nargs = len(self.f.args)
    pa, pb, pc = (f"%arg{nargs + i}" for i in range(3))
    ta, tb, tc = (f"memref<{x}xf32>" for x in self.scratch[:3])

    def row_block():   # %ic .. the block's first and last MR-row panel
      ic = L(f"arith.muli %icb, {ci(mc)} : index")
      ic_end = L(f"arith.minsi {L(f'arith.addi {ic}, {ci(mc)} : index')}, {ci(self.Mp)} : index")
      return L(f"arith.divui {ic}, {ci(mr)} : index"), L(f"arith.divui {ic_end}, {ci(mr)} : index")

    def tile(ib_lo, ib_hi, kend, first, a_buf, a_ty, a_base):
      """for %ib in the block: the MR x NR tile of C at (%ib, %jb), accumulated over k in [%kc, kend)."""
      bbase = at(L(f"arith.muli %jb, {ci(self.K * nr)} : index"), "b")
      jcol = L(f"arith.muli %jb, {ci(nr)} : index")
      put(f"scf.for %ib = {ib_lo} to {ib_hi} step {c1} {{"); depth[0] += 1
      if not rowwise: abase = a_base()
      else:   # row r of the tile starts at off + min(ib*MR + r, M-1)*stride: rows past M repeat the last (C's pad rows)
        if self.direct_a is not None:
          slot, off, stride = self.direct_a
          a_buf, a_ty = f"%arg{slot}", mem_type(self.args[slot].dtype)
        else: off, stride = 0, self.rows_a   # the row-major copy pack_a made, this problem's at %offa
        row0, last = L(f"arith.muli %ib, {ci(mr)} : index"), ci(self.M - 1)
        rows = [L(f"arith.minsi {add(row0, r)}, {last} : index") for r in range(mr)]
        rbase = [at(L(f"arith.addi {L(f'arith.muli {x}, {ci(stride)} : index')}, {ci(off)} : index"), "a") if self.rows_a else
                 L(f"arith.addi {L(f'arith.muli {x}, {ci(stride)} : index')}, {ci(off)} : index") for x in rows]
      crow = at(L(f"arith.addi {L(f'arith.muli %ib, {ci(mr * self.Np)} : index')}, {jcol} : index"), "c")
      offs = [[L(f"arith.addi {crow}, {ci(r * self.Np + v * vw)} : index") for v in range(nv)] for r in range(mr)]
      # one k slice: C starts from the identity, nothing to load
      init = [zero] * len(offs) * nv if one else \
        [L(f"arith.select {first}, {zero}, {L(f'vector.load {pc}[{o}] : {tc}, {V}')} : {V}") for row in offs for o in row]
      tty = f"memref<{mr * nr}xf32>"
      if self.epi_tile is not None:   # its tile index t, and its calls' arguments (the tile's rows/columns from t)
        ib = L(f"arith.addi {L(f'arith.muli %bt, {ci(self.Mp // mr)} : index')}, %ib : index") if batched else "%ib"
        t = L(f"arith.addi {L(f'arith.muli {ib}, {ci(nb)} : index')}, %jb : index")
        epi_args = f"{', '.join([f'%arg{i}' for i in range(len(self.args))] + ['%tile', t, add(t, 1)])}) : " \
                   f"({', '.join([mem_type(x.dtype) for x in self.args] + [tty, 'index', 'index'])}) -> ()"
        # the output rows (and the rows the epilogue reads) this tile will touch, fetched while its k loop runs
        last = None if one else L(f"arith.cmpi eq, {kend}, {ck} : index")   # several slices: only the last one's tile
        if last: put(f"scf.if {last} {{")
        put(f"{'  ' * bool(last)}func.call @{self.name}_pf({epi_args}")
        if last: put("}")
      accs, res = [f"%acc{i}" for i in range(len(init))], f"%res{n[0]}"
      put(f"{res}:{len(init)} = scf.for %k = %kc to {kend} step {c1} iter_args("
          + ", ".join(f"{a} = {i}" for a, i in zip(accs, init)) + f") -> ({', '.join([V] * len(init))}) {{"); depth[0] += 1
      bo = L(f"arith.addi {bbase}, {L(f'arith.muli %k, {ci(nr)} : index')} : index")
      bv = [L(f"vector.load {pb}[{add(bo, v * vw)}] : {tb}, {V}") for v in range(nv)]
      # the same row of the next B panel, into L2, a cache line at a time: its first tile then finds it there (weights
      # packed once per input are read from memory on every call of a model; resnet50 47.3 -> 46.3 ms, interleaved)
      for off in range(0, nr, 16):
        put(f"memref.prefetch {pb}[{L(f'arith.minsi {add(bo, self.K * nr + off)}, {ci(self.scratch[1] - 1)} : index')}], read, locality<2>, data : {tb}")
      if not rowwise: ao = L(f"arith.addi {abase}, {L(f'arith.muli %k, {ci(mr)} : index')} : index")
      new = []
      for r in range(mr):
        ar = L(f"memref.load {a_buf}[{add(ao, r) if not rowwise else L(f'arith.addi {rbase[r]}, %k : index')}] : {a_ty}")
        av = L(f"vector.broadcast {ar} : f32 to {V}")
        new += [L(f"vector.fma {av}, {bv[v]}, {accs[r * nv + v]} : {V}") if op == "add" else
                L(f"arith.{op}imumf {accs[r * nv + v]}, {L(f'arith.mulf {av}, {bv[v]} : {V}')} : {V}") for v in range(nv)]
      put(f"scf.yield {', '.join(new)} : {', '.join([V] * len(new))}"); depth[0] -= 1
      put("}")
      def to_tile():   # the tile on mm's stack, row-major, or transposed where the epilogue's lanes run along its rows
        for q in range(mr * nv):
          if not self.tile_rows: put(f"vector.store {res}#{q}, %tile[{ci(q * vw)}] : {tty}, {V}"); continue
          # chunk q of the transposed tile (element p: column p // mr, row p % mr) from the accumulators it takes lanes
          # of, merged pairwise by shuffles (a scatter costs 11-15% of a 1x1 convolution's time at K = 256)
          src: dict[int, dict[int, int]] = {}   # accumulator -> {position in the chunk: its lane}
          for p in range(q * vw, (q + 1) * vw): src.setdefault((p % mr) * nv + p // mr // vw, {})[p - q * vw] = p // mr % vw
          parts = []
          for pair in [list(src.items())[i:i + 2] for i in range(0, len(src), 2)]:
            (a, fa), (b, fb) = pair[0], pair[-1]
            mask = [fa[p] if p in fa else vw + fb[p] if p in fb else 0 for p in range(vw)]
            parts.append((L(f"vector.shuffle {res}#{a}, {res}#{b} {mask} : {V}, {V}"), {**fa, **fb}))
          while len(parts) > 1:
            (a, fa), (b, fb) = parts[0], parts[1]
            parts = parts[2:] + [(L(f"vector.shuffle {a}, {b} {[p if p in fa else vw + p for p in range(vw)]} : {V}, {V}"), {**fa, **fb})]
          put(f"vector.store {parts[0][0]}, %tile[{ci(q * vw)}] : {tty}, {V}")
        put(f"func.call @{self.name}_epi({epi_args}")
      def to_c():
        for i, o in enumerate(o for row in offs for o in row): put(f"vector.store {res}#{i}, {pc}[{o}] : {tc}, {V}")
      if self.epi_tile is None: to_c()
      elif one: to_tile()
      else:   # the tile is done after the last slice: the epilogue takes it from the stack; C holds the earlier slices'
        put(f"scf.if {last} {{"); depth[0] += 1
        to_tile(); depth[0] -= 1
        put("} else {"); depth[0] += 1
        to_c(); depth[0] -= 1
        put("}")
      depth[0] -= 1; put("}")

    def k_slice():   # %kc's slice end and whether it is the first (C starts from zero)
      return L(f"arith.minsi {L(f'arith.addi %kc, {ckc} : index')}, {ck} : index"), L(f"arith.cmpi eq, %kc, {c0} : index")

    if self.fused:
      # Goto's order with A packed per block: each thread packs its MC-row block of A (all of K) into its own
      # L2-sized buffer (picked by the chunk index %tid) right before the tiles use it; A never round-trips memory
      blk = f"memref<{self.scratch[3]}xf32>"
      bufs = [f"%arg{nargs + 3 + i}" for i in range(len(self.scratch) - 3)]
      tid = "%tid" if t > 1 else c0
      mine = bufs[0]
      for i, b in enumerate(bufs[1:], 1): mine = L(f"arith.select {L(f'arith.cmpi eq, {tid}, {ci(i)} : index')}, {b}, {mine} : {blk}")
      put(f"scf.for %icb = {lo} to {hi} step {c1} {{", 3)
      ib_lo, ib_hi = row_block()
      pass_args = [f"%arg{i}" for i in range(nargs + 3)] + [mine] + bufs[1:]
      put(f"func.call @{self.name}_pack_a({', '.join(pass_args + [ib_lo, ib_hi])}) : ({', '.join([mem_type(a.dtype) for a in self.args] + ['index', 'index'])}) -> ()")
      put(f"scf.for %kc = {c0} to {ck} step {ckc} {{"); depth[0] += 1
      kend, first = k_slice()
      put(f"scf.for %jb = {c0} to {ci(nb)} step {c1} {{"); depth[0] += 1
      tile(ib_lo, ib_hi, kend, first, mine, blk, lambda: L(f"arith.muli {L(f'arith.subi %ib, {ib_lo} : index')}, {ci(self.K * mr)} : index"))
      for d in (5, 4, 3): put("}", d)
    else:
      # Goto's order: a KC-deep slice of K; an MC-row block of Ap (L2-resident) swept over this thread's Bp panels
      # (each KC x NR slice L1-resident while the MR-row tiles of the block pass over it)
      if batched:
        put(f"scf.for %bt = {lo} to {hi} step {c1} {{", 3)
        for part, area in zip("abc", self.areas()):
          put(f"%off{part} = arith.muli %bt, {ci(area)} : index")
        lo, hi, by_m = c0, ci(mb), True
      put(f"scf.for %kc = {c0} to {ck} step {ckc} {{", 3)
      kend, first = k_slice()
      put(f"scf.for %icb = {lo if by_m else c0} to {hi if by_m else ci(mb)} step {c1} {{"); depth[0] += 1
      ib_lo, ib_hi = row_block()
      put(f"scf.for %jb = {c0 if by_m else lo} to {ci(nb) if by_m else hi} step {c1} {{"); depth[0] += 1
      tile(ib_lo, ib_hi, kend, first, pa, ta, lambda: at(L(f"arith.muli %ib, {ci(self.K * mr)} : index"), "a"))
      for d in (5, 4, 3): put("}", d)
      if batched: put("}", 3)
    idx = ["%lo: index", "%hi: index"] + (["%tid: index"] if self.fused else []) if t > 1 else []
    args = ", ".join([f"%arg{i}: {mem_type(a.dtype)}" for i, a in enumerate(self.args)] + idx)
    return f"  func.func @{self.name}_mm({args}) {{\n" + "\n".join(out) + "\n    return\n  }\n"

class SplitReduce:
  """A kernel uop-optimize marked `uop.split_reduce = T` (one output, one f32 reduce over range r of size N) as two
  phases: partial[t] = reduce over r in [t*N/T, (t+1)*N/T) (threaded over t), then the kernel's store with the reduce
  replaced by the reduce over the T partials."""
  def __init__(self, f: Func, name: str):
    self.name, T = name, _int_attr(f, "uop.split_reduce")
    red = next(u for u in f.roots[0].toposort if u.op is Ops.REDUCE)
    r, n = red.src[1], int(red.src[1].src[0].attrs["value"])
    self.scratch, args = [T], list(f.args) + [arg_buffer(len(f.args), dtypes.float32.ptr(T))]
    part = args[-1]
    t, r2 = (UOp(Ops.RANGE, dtypes.index, (im.const(sz),), attrs(axis=1000 + i, kind=k)) for i, (sz, k) in enumerate(((T, "loop"), (n // T, "reduce"))))
    chunk = UOp(Ops.REDUCE, red.dtype, (red.src[0].substitute({r: im.add(im.mul(t, im.const(n // T)), r2)}), r2), red.arg)
    st = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, dtypes.float32.ptr(), (part, t)), chunk))
    opt = {k: v for k, v in f.attrs.items() if k in ("uop.threads", "uop.fastmath", "uop.reduce_block")}
    self.partial = Func(f"{name}_part", args, [], [UOp(Ops.SINK, dtypes.void, (UOp(Ops.END, dtypes.void, (st, t)),))], {"uop.kernel": None, **opt})
    t2 = UOp(Ops.RANGE, dtypes.index, (im.const(T),), attrs(axis=1002, kind="reduce"))
    total = UOp(Ops.REDUCE, red.dtype, (UOp(Ops.LOAD, dtypes.float32, (UOp(Ops.INDEX, dtypes.float32.ptr(), (part, t2)),)), t2), red.arg)
    self.final = Func(f"{name}_final", args, [], [f.roots[0].substitute({red: total})], {"uop.kernel": None})
  def text(self) -> str: return lower_kernel(self.partial, f"{self.name}_part") + lower_kernel(self.final, f"{self.name}_final")
  def phases(self): return [(f"{self.name}_part", parallel_info(self.partial)), (f"{self.name}_final", None)]

def lane_split(f: Func, w: int) -> tuple[Func, UOp] | None:
  """uop.lanes = W (optimize.lanes): the kernel with its innermost loop range r (size S) as ceil(S / W) iterations of W
  vector lanes, r = r' * W + lane (lanes past S, where W does not divide it, gated off: they neither load nor store),
  when LaneLowerer can run its store so; else None (the kernel lowers as plain loops)."""
  if w < 2 or (one := single_store(f.roots[0])) is None: return None
  end, st, inner = one
  if (n := im.cval(inner.src[0])) is None or len(st.src[0].src) != 2: return None
  outer = UOp(Ops.RANGE, dtypes.index, (im.const(-(-n // w)),), attrs(axis=_axis(inner), kind=inner.attrs.get("kind", "loop")))
  lane = lane_range(w)
  st = affine_simplify(st.substitute({inner: (pos := im.add(im.mul(outer, im.const(w)), lane))}))
  if n % w:
    cut = UOp(Ops.CMPLT, dtypes.bool, (pos, im.const(n)))
    st = st.substitute({u: gated(u, cut) for u in st.toposort if u.op is Ops.INDEX and lane in u.toposort})
  if lane_coef(st.src[0].src[1], lane, {}) != 1 or not LaneLowerer.supports(st.src[1], lane): return None
  end = UOp(Ops.END, dtypes.void, (st, *[outer if r is inner else r for r in end.src[1:]]))
  return Func(f.name, f.args, f.results, [UOp(Ops.SINK, dtypes.void, (end,))], f.attrs), lane

# choices made for static loop sizes
STATIC_ONLY = ("uop.contraction", "uop.winograd", "uop.split_reduce", "uop.nontemporal", "uop.lanes")

def lower_program(f: Func, name: str) -> tuple[str, list[tuple[str, tuple | None]], list[int], list[tuple[int, int, int]]]:
  """A kernel as device code: (module body text, [(entry, parallel info)] run in order, scratch f32 buffer sizes,
  [(phase, argument, scratch)] phases whose result depends on one argument alone). A loop may run to a symbolic size
  (its end read at run time) only in a kernel without the choices in STATIC_ONLY."""
  if (k := next((a for a in STATIC_ONLY if a in f.attrs), None)) and f.roots and any(
      u.op is Ops.RANGE and im.cval(u.src[0]) is None for u in f.roots[0].toposort):
    raise PassError(f"@{f.name}: {k} needs static range sizes (a loop here runs to a symbolic size)")
  if "uop.winograd" in f.attrs:
    from morok_mlir.codegen.winograd import Winograd, direct   # a Contraction of its own (its module builds on this one)
    try: return (c := Winograd(f, name)).text(), c.phases(), c.scratch, c.reuse()
    except NotImplementedError: f = direct(f)   # an image its lanes cannot read (a flipped or channels-last one)
  if "uop.contraction" in f.attrs: return (c := Contraction(f, name)).text(), c.phases(), c.scratch, c.reuse()
  if "uop.split_reduce" in f.attrs: return (c := SplitReduce(f, name)).text(), c.phases(), c.scratch, []
  if "uop.lanes" in f.attrs and (ls := lane_split(f, _int_attr(f, "uop.lanes"))) is not None:
    return lower_kernel(ls[0], name, LaneLowerer(*ls)), [(name, parallel_info(ls[0]))], [], []
  return lower_kernel(f, name), [(name, parallel_info(f))], [], []

def lower_schedule(f: Func, kernels: dict[str, Func], progs: dict[str, tuple] | None = None) -> str:
  """@schedule -> func.call of each kernel's phases (see lower_program) in order."""
  progs = progs or {n: ([(n, parallel_info(k))], []) for n, k in kernels.items()}
  calls = []
  for u in f.roots[0].toposort if f.roots else []:
    if u.op is not Ops.KERNEL: continue
    callee, slots = u.attrs.get("callee", ("", ""))[1], u.attrs.get("slots", ())
    if callee not in kernels: raise PassError(f"uop.kernel calls @{callee}, which is not a kernel of this module", u.loc)
    k = kernels[callee]
    if any(not 0 <= s < len(f.args) for s in slots): raise PassError(f"uop.kernel slots {list(slots)} out of range for {len(f.args)} buffers", u.loc)
    if [f.args[s].dtype for s in slots] != [a.dtype for a in k.args]:
      raise PassError(f"uop.kernel passes ({', '.join(type_text(f.args[s].dtype) for s in slots)}) to @{callee}"
                      f"({', '.join(type_text(a.dtype) for a in k.args)})", u.loc)
    phases, scratch = progs[callee]
    tys, ops = [mem_type(t.dtype) for t in k.args], [f"%arg{s}" for s in slots]
    for j, n in enumerate(scratch):  # a contraction's packed operands and tile buffer, for this call only
      calls.append(f"    %s{len(calls)}_{j} = memref.alloc() {{alignment = 64 : i64}} : memref<{n}xf32>\n")
    tys, ops = tys + [f"memref<{n}xf32>" for n in scratch], ops + [f"%s{len(calls) - len(scratch) + j}_{j}" for j in range(len(scratch))]
    for entry, par in phases:
      pt, po = tys, ops
      if par is not None:  # the whole outer loop in one call (as chunk 0, for phases that take the chunk index)
        calls.append(f"    %lo{len(calls)} = arith.constant 0 : index\n    %hi{len(calls)} = arith.constant {par[0]} : index\n")
        bounds = [f"%lo{len(calls) - 1}", f"%hi{len(calls) - 1}"] + [f"%lo{len(calls) - 1}"] * (len(par) > 3 and par[3])
        pt, po = tys + ["index"] * len(bounds), ops + bounds
      calls.append(f"    func.call @{entry}({', '.join(po)}) : ({', '.join(pt)}) -> ()\n")
    calls += [f"    memref.dealloc {o} : {t}\n" for o, t in zip(ops[len(k.args):], tys[len(k.args):])]
  args = ", ".join(f"%arg{i}: {mem_type(t.dtype)}" for i, t in enumerate(f.args))
  return f"  func.func @{f.name}({args}) {{\n{''.join(calls)}    return\n  }}\n"

def lower_module(funcs: list[Func]) -> str:
  kernels = {f.name: f for f in funcs if "uop.kernel" in f.attrs}
  out, progs = [], {}
  for f in funcs:
    if f.name in kernels:
      text, phases, scratch, _ = lower_program(f, f.name)
      out.append(text); progs[f.name] = (phases, scratch)
  for f in funcs:
    if f.name in kernels: continue
    elif "uop.schedule" in f.attrs: out.append(lower_schedule(f, kernels, progs))
    else: raise PassError(f"@{f.name} is neither a kernel (uop.kernel) nor the schedule (uop.schedule): run uop-kernel-split first")
  return "module {\n" + "".join(out) + "}\n"

@register("uop-lower-cpu", "Kernels -> func.func with scf.for, memref, arith, math; @schedule -> func.call of the kernels", on_uops=False)
def uop_lower_cpu(module_op):
  replace_module_body(module_op, lower_module(import_module(module_op)))


