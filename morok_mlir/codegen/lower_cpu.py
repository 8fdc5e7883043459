"""uop-lower-cpu: kernel-level `uop` functions (docs/pipeline.md section 2) -> upstream MLIR (section 3).

Each kernel becomes a public `func.func` over signless, static memrefs: `scf.for` loops, `memref.load/store`, `arith`,
`math`. `@schedule` becomes a function that `func.call`s the kernels on its arguments (`slots`), dependencies first.

Placement (which loop each op lives in) is placement.py's; this module is the CPU's policy for it (`CPU`: a parallel
kernel's outer loop runs over a thread's chunk) and each op's semantics on every target (`Lowerer`, `RULES`).
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

Public API: `lower_kernel(f: Func, name: str | None = None) -> str` (one kernel's func text); a whole kernel-level
module, each kernel as its template's phases: program.lower_module. Unsupported input raises PassError."""
from __future__ import annotations
import math
import numpy as np
from morok_mlir.ir.bridge import Func, const_text
from morok_mlir.core.dtype import DType, dtypes
from morok_mlir.core.uop import UOp, attrs
from morok_mlir.dialects.ops import Ops
from morok_mlir.core import index_math as im
from morok_mlir.ir.registry import PassError
from morok_mlir.codegen.emitter import HI, LO, Block, Emitter, Loop, params
from morok_mlir.codegen import fp8
from morok_mlir.host import CPU_FLAGS
from morok_mlir.codegen.tables import ALU, CMP, COMPUTE, B, F, S, U, cast_op, cls, mem_type, sl   # noqa: F401 (mem_type: for the phases)
from morok_mlir.codegen.placement import Frame, Placement, Policy, _axis, _int_attr, outer_range   # noqa: F401 (_axis: for the phases)

def parallel_info(f: Func) -> tuple[int, int, int] | None:
  """(outer loop size, threads, chunk grain) of a kernel uop-optimize marked parallel, else None. An outer loop that
  runs to a symbolic size is split in the kernel (CPU.bounds): its chunks are parts i .. j of `threads`."""
  if "uop.threads" not in f.attrs or (r := outer_range(f)) is None: return None
  t = _int_attr(f, "uop.threads", 1)
  return (t, t, 1) if im.cval(r.src[0]) is None else (int(r.src[0].attrs["value"]), t, _int_attr(f, "uop.grain", 1))

class Bf16:
  """bfloat16 <-> float32 in integer ops: bf16 is the top half of an f32, so widening is a shift; narrowing rounds to
  nearest even by adding 0x7fff plus the lowest kept bit (a carry into the exponent is the correct round up, and
  inf stays inf); a NaN keeps its sign and top payload bits and is made quiet (rounding could carry it to inf).
  Vectorizes, and rounds numbers as ml_dtypes and PyTorch do."""
  @staticmethod
  def widen(em: Emitter, fr: Block, c, x: str) -> str:
    i = em.cast(fr, "extui", em.cast(fr, "bitcast", x, "bf16", "i16"), "i16", "i32")
    return em.cast(fr, "bitcast", em.arith(fr, "shli", "i32", i, c(16)), "i32", "f32")
  @staticmethod
  def narrow(em: Emitter, fr: Block, c, x: str) -> str:
    op = lambda name, a, b: em.arith(fr, name, "i32", a, b)
    b = em.cast(fr, "bitcast", x, "f32", "i32")
    hi = op("shrui", b, c(16))
    r = op("shrui", op("addi", b, op("addi", op("andi", hi, c(1)), c(0x7fff))), c(16))
    r = em.select(fr, em.cmpf(fr, "uno", x, x, "f32"), op("ori", hi, c(0x40)), r, "i32")
    return em.cast(fr, "bitcast", em.cast(fr, "trunci", r, "i32", "i16"), "i16", "bf16")

CONVERT = {dtypes.bfloat16: Bf16, dtypes.fp8e4m3: fp8.E4M3, dtypes.fp8e5m2: fp8.E5M2}   # a storage dtype's conversions

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

def splat(em: Emitter, b: Block, v, elem: str, n: int) -> str:
  """An n-lane vector constant of v at the end of b (elem: its MLIR element type)."""
  return em.const(b, f"dense<{const_text(v, elem).split(' :')[0]}>", f"vector<{n}x{elem}>")

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
  def t(self, ty: str) -> str: return f"vector<{self.w}x{ty}>" if self.w else ty
  def c(self, v, ty="f32") -> str:
    if not self.w: return self.lw.const(v, POLY_DT[ty])
    return splat(self.lw.em, self.fr, v, ty, self.w)
  def op(self, name: str, *a, ty="f32") -> str: return self.lw.em.arith(self.fr, name, self.t(ty), *a)
  def math(self, name: str, *a, ty="f32") -> str: return self.lw.em.math(self.fr, name, self.t(ty), *a)
  def horner(self, x: str, coefs, ty="f32") -> str:
    p = self.c(coefs[0], ty)
    for k in coefs[1:]: p = self.math("fma", p, x, self.c(k, ty), ty=ty)
    return p
  def sel(self, cond: str, a: str, b: str, ty="f32") -> str:
    return self.lw.em.select(self.fr, cond, a, b, self.t(ty), self.t('i1') if self.w else "")
  def cmp(self, pred: str, a: str, b: str, ty="f32") -> str: return self.lw.em.cmpf(self.fr, pred, a, b, self.t(ty))
  def bool(self, name: str, a: str, b: str) -> str: return self.lw.em.arith(self.fr, name, self.t('i1'), a, b)
  def cast(self, op: str, x: str, src: str, dst: str) -> str: return self.lw.em.cast(self.fr, op, x, self.t(src), self.t(dst))
  def clamp(self, x: str, lo: float, hi: float) -> str:   # (maximumf and minimumf propagate NaN)
    return self.op("minimumf", self.op("maximumf", x, self.c(lo)), self.c(hi))
  def exp2(self, x: str) -> str:
    n = self.math("roundeven", xc := self.clamp(x, -160.0, 130.0))
    return self.scaled(self.op("subf", xc, n), n, x)
  def exp2_mul(self, x: str, c: float) -> str:
    """2^(x * c) for a constant c (exp and sigmoid: x / ln 2): n the rounded product, f = x c - n from FMAs with c in
    two f32 parts (a plain exp2 of the rounded product is off by |x c| * 2^-24 relative: exp(80), 64 ulp). x is clamped
    first to where 2^(x c) is 2^-160 .. 2^130: every value stays finite, the ends still give 0 and inf."""
    chi, clo = float(np.float32(c)), float(np.float32(c - float(np.float32(c))))
    xc = self.clamp(x, *sorted((-160.0 / c, 130.0 / c)))
    n = self.math("roundeven", self.op("mulf", xc, self.c(chi)))
    return self.scaled(self.math("fma", xc, self.c(clo), self.math("fma", xc, self.c(chi), self.op("negf", n))), n, x)
  # AVX-512's vscalefps: r * 2^n rounded once, subnormal and overflowing results included, NaN kept: one instruction for
  # what the shifts below take eight
  SCALEF = {16: ("llvm.x86.avx512.mask.scalef.ps.512", "i16", True), 8: ("llvm.x86.avx512.mask.scalef.ps.256", "i8", False)}
  def scaled(self, f: str, n: str, x: str) -> str:
    """exp2(f) * 2^n for f in [-1/2, 1/2] (a little past, from exp2_mul) and an integral n in [-160, 130] (NaN where x is)."""
    r = self.math("fma", self.horner(f, self.EXP2), f, self.c(1.0))
    if self.w in self.SCALEF and {"avx512f", "avx512vl"} <= CPU_FLAGS:
      name, mask, rounding = self.SCALEF[self.w]
      args, tys = [r, n, r, self.lw.em.const(self.fr, -1, mask)], [self.t("f32")] * 3 + [mask]
      if rounding: args, tys = args + [self.lw.em.const(self.fr, 4, "i32")], tys + ["i32"]   # the current rounding mode
      return self.lw.em.intrinsic(self.fr, name, args, tys, self.t("f32"))
    ni = self.cast("fptosi", n, "f32", "i32")
    if not self.w and "avx512f" in CPU_FLAGS:   # (LLVM's vectorizer widens ldexp, and lowers it to vscalefps)
      r = self.lw.em.intrinsic(self.fr, "llvm.ldexp.f32.i32", [r, ni], ["f32", "i32"], "f32")
    else:
      h = self.op("shrsi", ni, self.c(1, "i32"), ty="i32")   # 2^n as 2^h * 2^(n-h): both halves are normal floats
      for e in (h, self.op("subi", ni, h, ty="i32")):
        bits = self.op("shli", self.op("addi", e, self.c(127, "i32"), ty="i32"), self.c(23, "i32"), ty="i32")
        r = self.op("mulf", r, self.cast("bitcast", bits, "i32", "f32"))
    return self.sel(self.cmp("uno", x, x), x, r)   # (fptosi of NaN is poison)
  def log2(self, x: str, wide: bool = False) -> str:
    """wide: log2 of a positive finite x as f64 (for pow), no edge values."""
    small = self.cmp("olt", x, self.c(1.1754943508222875e-38))   # subnormal (and <= 0, fixed below): scale by 2^23
    xs = self.sel(small, self.op("mulf", x, self.c(8388608.0)), x)
    bits = self.cast("bitcast", xs, "f32", "i32")
    e = self.op("subi", self.op("shrui", bits, self.c(23, "i32"), ty="i32"),
                self.sel(small, self.c(150, "i32"), self.c(127, "i32"), "i32"), ty="i32")
    mb = self.op("ori", self.op("andi", bits, self.c(0x7fffff, "i32"), ty="i32"), self.c(0x3f800000, "i32"), ty="i32")
    m = self.cast("bitcast", mb, "i32", "f32")                 # x = m * 2^e, m in [1, 2)
    big = self.cmp("ogt", m, self.c(1.4142135623730951))
    m = self.sel(big, self.op("mulf", m, self.c(0.5)), m)      # m in [sqrt(1/2), sqrt(2)): z small around 0
    e = self.op("addi", e, self.cast("extui", big, "i1", "i32"), ty="i32")
    z = self.op("subf", m, self.c(1.0))
    z2 = self.op("mulf", z, z)
    y = self.op("mulf", self.op("mulf", self.horner(z, self.LOG), z), z2)
    if wide:   # log2(x) in f64, the sum and scaling unrounded: y's few ulp of z^3 / 3 stay below 2^-30
      z64, y64, e64 = self.cast("extf", z, "f32", "f64"), self.cast("extf", y, "f32", "f64"), self.cast("sitofp", e, "i32", "f64")
      ln = self.op("addf", z64, self.math("fma", self.op("mulf", z64, z64, ty="f64"), self.c(-0.5, "f64"), y64, ty="f64"), ty="f64")
      return self.math("fma", ln, self.c(1.4426950408889634, "f64"), e64, ty="f64")
    ln = self.op("addf", z, self.math("fma", z2, self.c(-0.5), y))
    r = self.math("fma", ln, self.c(1.4426950408889634), self.cast("sitofp", e, "i32", "f32"))
    inf = self.c(float("inf"))
    r = self.sel(self.cmp("oeq", x, inf), inf, r)
    r = self.sel(self.cmp("oeq", x, self.c(0.0)), self.c(float("-inf")), r)
    return self.sel(self.cmp("ult", x, self.c(0.0)), self.c(float("nan")), r)   # ult: x < 0 or NaN
  def pow(self, x: str, y: str) -> str:
    """x ** y as C's powf: exp2(y * log2|x|), log2, the product and exp2 in f64, rounded once (the product's rounding in
    f32 would cost |y log2 x| ulp), the sign of x to an odd integer power, NaN for a finite x < 0 to a non-integer one,
    and C's edge values: x ** 0 = 1 and 1 ** y = 1 (NaN too), (-1) ** +-inf = 1, 0 ** y = 0 or inf by y's sign, inf
    likewise."""
    ax, inf, one = self.math("absf", x), self.c(float("inf")), self.c(1.0)
    ok = self.bool("andi", self.cmp("ogt", ax, self.c(0.0)), self.cmp("olt", ax, inf))
    lg = self.log2(self.sel(ok, ax, one), wide=True)
    for v, s in ((0.0, "-inf"), (float("inf"), "inf")): lg = self.sel(self.cmp("oeq", ax, self.c(v)), self.c(float(s), "f64"), lg, "f64")
    t = self.op("mulf", lg, self.cast("extf", y, "f32", "f64"), ty="f64")
    t = self.op("minimumf", self.op("maximumf", t, self.c(-160.0, "f64"), ty="f64"), self.c(130.0, "f64"), ty="f64")
    # 2^t all in f64 (2^n by its exponent bits: normal in f64 over the whole range), rounded to f32 once
    n = self.math("roundeven", t, ty="f64")
    e = self.op("addi", self.cast("fptosi", n, "f64", "i64"), self.c(1023, "i64"), ty="i64")
    scale = self.cast("bitcast", self.op("shli", e, self.c(52, "i64"), ty="i64"), "i64", "f64")
    r64 = self.op("mulf", self.horner(self.op("subf", t, n, ty="f64"), self.EXP2_64, "f64"), scale, ty="f64")
    r = self.cast("truncf", r64, "f64", "f32")
    fy, half = self.math("floor", y), self.op("mulf", y, self.c(0.5))
    odd = self.bool("andi", self.cmp("oeq", fy, y), self.cmp("one", self.math("floor", half), half))
    signed = self.lw.em.cmpi(self.fr, "slt", self.cast("bitcast", x, "f32", "i32"), self.c(0, "i32"), self.t("i32"))   # -0.0 too
    r = self.sel(self.bool("andi", odd, signed), self.op("negf", r), r)
    r = self.sel(self.bool("andi", self.bool("andi", ok, signed), self.cmp("une", fy, y)), self.c(float("nan")), r)   # -inf is not
    r = self.sel(self.cmp("uno", x, y), self.c(float("nan")), r)   # the NaN t would be (and lanes poisoned by its fptosi)
    r = self.sel(self.bool("andi", self.cmp("oeq", ax, one), self.cmp("oeq", self.math("absf", y), inf)), one, r)
    return self.sel(self.bool("ori", self.cmp("oeq", y, self.c(0.0)), self.cmp("oeq", x, one)), one, r)

def sum_index(terms: list[UOp]) -> UOp:
  out = im.const(0)
  for t in terms: out = im.add(out, t)
  return out

# ---------------------------------------------------------------- the CPU's policy, each op's semantics
class CPU(Policy):
  """Plain scf.for loops; a kernel uop-optimize marked parallel (uop.threads) runs its outer loop over the chunk
  %lo .. %hi its function takes (an outer loop to a symbolic size: parts %lo .. %hi of `threads`). unroll=False: LLVM is
  to unroll none of its loops."""
  def __init__(self, f: Func, unroll: bool = True): self.par, self.unroll = outer_range(f) if "uop.threads" in f.attrs else None, unroll
  def bounds(self, lw: Placement, fr: Frame, lp: Loop):
    lp.unroll = self.unroll
    if fr.rng is not self.par: return
    lp.lo, lp.hi = LO, HI
    if im.cval(fr.rng.src[0]) is None:
      t, em = lw.const(_int_attr(lw.f, "uop.threads", 1), dtypes.index), lw.em
      lp.lo, lp.hi = (em.arith(fr.parent, "divui", "index", em.arith(fr.parent, "muli", "index", fr.end, b), t) for b in (LO, HI))
  def func(self, lw: Placement, name: str, private: bool) -> str:
    args = params([mem_type(t.dtype) for t in lw.f.args], *((LO, HI) if self.par else ()))
    return Emitter.func(name, args, lw.root, private=private)

class Lowerer(Placement):
  """A kernel's placement with each op's semantics: loads, the per-op table's rules and what they share (casts,
  guarded division and shifts, integer powers). policy: the target's (the CPU's by default)."""
  def __init__(self, f: Func, policy: Policy | None = None): super().__init__(f, policy or CPU(f))

  def load(self, u: UOp, fr: Frame) -> str:
    idx = u.src[0]
    if idx.op is not Ops.INDEX: raise PassError("uop.load must load through a uop.index", u.loc)
    if len(idx.src) > 2 and (split := self.gated_base(idx)) is not None:   # the clamp hoisted to the gate's loop
      buf, i, gate = self.value(idx.src[0]), self.value(split), self.value(idx.src[2])
    else:
      buf, i, gate = self.address(idx)
      if gate is not None: i = self.em.select(fr, gate, i, self.const(0, dtypes.index), "index")
    mt, dt = mem_type(idx.src[0].dtype), u.dtype
    if gate is not None:
      zero = self.const(False if dt.is_bool else 0.0 if dt.is_float else 0, dt)
      if idx.src[0].size == 0: return zero  # no element to read: every executed load is gated off
    v = self.em.load(fr, buf, i, mt)
    if dt.is_bool: v = self.em.cmpi(fr, "ne", v, self.const(0, dtypes.int8), "i8")
    return self.em.select(fr, gate, v, zero, sl(dt)) if gate is not None else v

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


  def alu(self, op: str, srcs: tuple[UOp, ...], names: list[str], dt: DType, fr: Frame, u: UOp, fm: str = "") -> str:
    """op on operands srcs (named names) with result dtype dt. Casts, bitcasts and selects move values as they are;
    every other op on a storage dtype (COMPUTE) widens its operands, runs in the compute dtype and rounds back."""
    sdt = srcs[0].dtype if srcs else dt
    if op is Ops.CAST: return self.cast(names[0], sdt, dt, fr)
    if op is Ops.BITCAST: return names[0] if sl(sdt) == sl(dt) else self.em.cast(fr, "bitcast", names[0], sl(sdt), sl(dt))
    if op is Ops.WHERE: return self.em.select(fr, *names[:3], sl(dt))
    if (cdt := COMPUTE.get(sdt)) is None: return self.scalar_alu(op, srcs, names, dt, fr, u, fm)
    r = self.scalar_alu(op, cdt, [self.cast(n, sdt, cdt, fr) for n in names], COMPUTE.get(dt, dt), fr, u, fm)
    return self.cast(r, cdt, dt, fr) if dt is sdt else r

  def scalar_alu(self, op: str, srcs: tuple[UOp, ...] | DType, names: list[str], dt: DType, fr: Frame, u: UOp, fm: str = "") -> str:
    """op on operands of one register type (srcs: the operand UOps, or only their dtype when no operand is a constant
    the op looks at), result dtype dt: its rule in the lowerer's table (RULES), or the op of one MLIR op of ALU."""
    sdt = srcs if isinstance(srcs, DType) else srcs[0].dtype if srcs else dt
    c = cls(sdt)
    if (rule := self.rules.get((op, c))) is not None and (r := rule(self, op, srcs, names, sdt, dt, fr, u)) is not None: return r
    if op not in ALU or c not in ALU[op]: raise PassError(f"uop.{op} is not defined on {sdt.name}", u.loc)
    return self.line(fr, f"{ALU[op][c]} {', '.join(names)}{fm if op in ('add', 'mul', 'max', 'min') else ''} : {sl(sdt)}")

  def ipow(self, a: str, e: str, dt: DType, fr: Frame) -> str:
    """Integer a ** e by squaring over the exponent's bits (wraps like repeated multiplication). A negative exponent
    gives the truncated 1 / a**-e: 1 for a == 1, +-1 for a == -1, else 0."""
    t, em = sl(dt), self.em
    zero, one, idx = self.const(0, dt), self.const(1, dt), (lambda v: self.const(v, dtypes.index))
    with em.for_(fr, idx(0), idx(dt.bits), idx(1), inits=[one, a, e], ty=t) as lp:
      (r, b, x), B = lp.accs, lp.body
      odd = em.cmpi(B, "ne", em.arith(B, "andi", t, x, one), zero, t)
      lp.yields = [em.select(B, odd, em.arith(B, "muli", t, r, b), r, t), em.arith(B, "muli", t, b, b), em.arith(B, "shrui", t, x, one)]
    out = lp.results[0]
    if dt.is_unsigned: return out
    neg = em.cmpi(fr, "slt", e, zero, t)
    odd = em.cmpi(fr, "ne", em.arith(fr, "andi", t, e, one), zero, t)
    m1 = self.const(-1, dt)
    sgn = em.select(fr, odd, m1, one, t)
    frac = em.select(fr, em.cmpi(fr, "eq", a, m1, t), sgn, zero, t)
    frac = em.select(fr, em.cmpi(fr, "eq", a, one, t), one, frac, t)
    return em.select(fr, neg, frac, out, t)

  def divide(self, op: str, srcs, names: list[str], dt: DType, fr: Frame) -> str:
    """Integer idiv/mod without LLVM's undefined (trapping) cases: x/0 -> 0, x%0 -> 0, MIN/-1 -> -MIN (wraps), MIN%-1 -> 0."""
    L, t, signed, em = (lambda text: self.line(fr, text)), sl(dt), not dt.is_unsigned, self.em
    mop = ALU[op][cls(dt)]
    a, b = names
    d = srcs[1]
    if d.op is Ops.CONST and d.attrs["value"] != 0 and not (signed and d.attrs["value"] == -1):
      # index math divides non-negative values: unsigned, a power of two is then a shift or a mask (no sign fix-up)
      if signed and dt is dtypes.index and d.attrs["value"] > 0 and im.bounds(srcs[0])[0] >= 0: mop = ALU[op][U]
      return L(f"{mop} {a}, {b} : {t}")
    zero, one = self.const(0, dt), self.const(1, dt)
    isz = bad = em.cmpi(fr, "eq", b, zero, t)
    if signed:
      ism1 = em.cmpi(fr, "eq", b, self.const(-1, dt), t)
      bad = em.arith(fr, "ori", "i1", isz, ism1)
    q = L(f"{mop} {a}, {em.select(fr, bad, one, b, t)} : {t}")
    if op is Ops.MOD: return q  # x % 1 is already the 0 we want for both bad divisors
    if signed: q = em.select(fr, ism1, em.arith(fr, "subi", t, zero, a), q, t)
    return em.select(fr, isz, zero, q, t)

  def shift(self, op: str, srcs, names: list[str], dt: DType, fr: Frame, ty: str = "", const=None, cty: str = "") -> str:
    """Shifts as numpy defines them for every amount: one outside [0, bits) (a negative one too, read as unsigned) shifts
    every bit out, so shl gives 0 and shr 0 or the sign fill (LLVM's shift by >= bits is poison). A constant amount in
    range needs no guard. ty, const, cty: the operands' type, a maker of its constants and the condition's type where they
    are vectors (LaneLowerer: an amount per lane)."""
    em, (a, b), mop = self.em, names, ALU[op][cls(dt)]
    t, c = ty or sl(dt), const or (lambda v: self.const(v, dt))
    if (d := srcs[1]).op is Ops.CONST and 0 <= d.attrs["value"] < dt.bits: return self.line(fr, f"{mop} {a}, {b} : {t}")
    ok = em.cmpi(fr, "ult", b, c(dt.bits), t)
    if op is Ops.SHR and not dt.is_unsigned: return em.arith(fr, "shrsi", t, a, em.select(fr, ok, b, c(dt.bits - 1), t, cty))
    return em.select(fr, ok, self.line(fr, f"{mop} {a}, {b} : {t}"), c(0), t, cty)   # select: the poison is not chosen

  def cast(self, x: str, s: DType, d: DType, fr: Frame) -> str:
    em = self.em
    if sl(s) == sl(d): return x
    c = lambda v: self.const(v, dtypes.int32)
    if (w := COMPUTE.get(s)) is not None: x, s = CONVERT[s].widen(em, fr, c, x), w   # exact: then on from the compute dtype
    if (w := COMPUTE.get(d)) is not None: return CONVERT[d].narrow(em, fr, c, self.cast(x, s, w, fr))
    if sl(s) == sl(d): return x
    if s is dtypes.index: x, s = em.cast(fr, "index_cast", x, "index", "i64"), dtypes.int64
    if d is dtypes.index: return em.cast(fr, "index_cast", self.cast(x, s, dtypes.int64, fr), "i64", "index")
    if sl(s) == sl(d): return x
    if cls(d) == B: return (em.cmpf(fr, "une", x, self.const(0.0, s), sl(s)) if cls(s) == F else em.cmpi(fr, "ne", x, self.const(0, s), sl(s)))
    return em.cast(fr, cast_op(s, d), x, sl(s), sl(d))

# ---------------------------------------------------------------- the per-op table
# (op, dtype class) -> rule(lowerer, op, srcs, names, sdt, dt, frame, u) -> the result's name (None: the ALU op instead);
# ops without a rule are one MLIR op of ALU. Targets share it and replace entries (lower_gpu.GPU_RULES).
def _sin(lw, op, srcs, names, sdt, dt, fr, u):
  if sl(sdt) != "f32" or (xs := sin_of_shift(u)) is None: return None
  em = lw.em
  if abs(xs[1]) == HALF_PI:   # sin(x +- pi/2) and sin(+-pi/2 - x) are +-cos(x): libm's cosf, exact for any x
    r = em.math(fr, "cos", "f32", lw.value(xs[0]))
    return em.arith(fr, "negf", "f32", r) if xs[1] < 0 else r
  # another shift: it and the sine in f64, rounded once
  arg = em.arith(fr, "subf" if xs[2] else "addf", "f64", lw.const(xs[1], dtypes.float64), em.cast(fr, "extf", lw.value(xs[0]), "f32", "f64"))
  return em.cast(fr, "truncf", em.math(fr, "sin", "f64", arg), "f64", "f32")
def _poly(lw, op, srcs, names, sdt, dt, fr, u):
  if sl(sdt) != "f32": return None
  if (xc := exp2_of_product(u)) is not None: return Poly(lw, fr).exp2_mul(lw.value(xc[0]), xc[1])
  return getattr(Poly(lw, fr), op)(*names)
def _cmp(lw, op, srcs, names, sdt, dt, fr, u):
  mop, pred = CMP[op][cls(sdt)].split()
  return lw.line(fr, f"{mop} {pred}, {names[0]}, {names[1]} : {sl(sdt)}")
def _neg(lw, op, srcs, names, sdt, dt, fr, u):   # on bool: logical not, as in tinygrad
  c, t = cls(sdt), sl(sdt)
  if c == B: return lw.em.arith(fr, "xori", "i1", names[0], lw.const(True, sdt))
  return lw.em.arith(fr, "negf", t, names[0]) if c == F else lw.em.arith(fr, "subi", t, lw.const(0, sdt), names[0])
def _imulacc(lw, op, srcs, names, sdt, dt, fr, u):
  return lw.scalar_alu(Ops.ADD, sdt, [lw.scalar_alu(Ops.MUL, sdt, names[:2], dt, fr, u), names[2]], dt, fr, u)
INTS = (S, U)
RULES = {**{(Ops.NEG, c): _neg for c in "fsub"}, **{(op, c): _cmp for op in CMP for c in CMP[op]},
         (Ops.RECIP, F): lambda lw, op, srcs, names, sdt, dt, fr, u: lw.line(fr, f"arith.divf {lw.const(1.0, sdt)}, {names[0]} : {sl(sdt)}"),
         **{(Ops.TRUNC, c): (lambda lw, op, srcs, names, *_: names[0]) for c in "sub"}, **{(Ops.MULACC, c): _imulacc for c in "sub"},
         **{(op, c): (lambda lw, op, srcs, names, sdt, dt, fr, u: lw.divide(op, srcs, names, sdt, fr)) for op in (Ops.IDIV, Ops.MOD) for c in INTS},
         **{(op, c): (lambda lw, op, srcs, names, sdt, dt, fr, u: lw.shift(op, srcs, names, sdt, fr)) for op in (Ops.SHL, Ops.SHR) for c in INTS},
         **{(Ops.POW, c): (lambda lw, op, srcs, names, sdt, dt, fr, u: lw.ipow(names[0], names[1], sdt, fr)) for c in INTS},
         (Ops.SIN, F): _sin, **{(Ops(op), F): _poly for op in POLY}}
CPU.rules = RULES

def lower_kernel(f: Func, name: str | None = None, lw: Placement | None = None, private: bool = False) -> str:
  """One kernel func (uop dialect, kernel level) -> its function's text (a func.func over signless memrefs with the CPU's
  policy); lw: its lowerer; private: a function only its module calls (a phase another phase calls once: LLVM inlines it)."""
  lw = lw or Lowerer(f)
  lw.effect(lw.sink)
  return lw.policy.func(lw, name or f.name, private)

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
