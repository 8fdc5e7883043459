"""fp8 (OCP e4m3fn and e5m2) <-> float32 in integer ops, as lower_cpu's Bf16 is for bfloat16: fp8 values are stored
as they are and every op on them runs in float32. Both directions round and saturate as ml_dtypes and PyTorch do:
to nearest even, subnormals kept, NaN stays NaN; past the largest finite value e4m3 gives NaN (it has no infinity)
and e5m2 gives inf. Plain arith on i32/f32 (vectorizable), the same on every target."""
from __future__ import annotations
from dataclasses import dataclass

@dataclass(frozen=True)
class Fp8:
  e: int      # exponent bits
  m: int      # mantissa bits
  ty: str     # the MLIR element type
  fn: bool    # finite only (e4m3fn): 0x7f is NaN, overflow is NaN; else e5m2's IEEE layout: 0x7c inf, overflow inf
  @property
  def bias(self) -> int: return (1 << (self.e - 1)) - 1
  @property
  def nan(self) -> int: return 0x7F if self.fn else 0x7E   # ml_dtypes' quiet NaN (the sign is or-ed in)

  def widen(self, em, fr, c, x: str) -> str:
    """fp8 -> f32, exact. The 7 magnitude bits placed at the top of an f32's exponent and mantissa read as a number
    2^(bias - 127) times the value, normal or subnormal alike: one multiply by 2^(127 - bias) rescales it (f32 covers
    every fp8 subnormal as a normal). The all-ones exponent (e5m2) and e4m3's 0x7f are inf/NaN."""
    op = lambda name, a, b: em.arith(fr, name, "i32", a, b)
    u = em.cast(fr, "extui", em.cast(fr, "bitcast", x, self.ty, "i8"), "i8", "i32")
    mag = op("andi", u, c(0x7F))
    f = em.cast(fr, "bitcast", op("shli", mag, c(23 - self.m)), "i32", "f32")
    scale = em.cast(fr, "bitcast", c((254 - self.bias) << 23), "i32", "f32")
    r = em.cast(fr, "bitcast", em.arith(fr, "mulf", "f32", f, scale), "f32", "i32")
    if self.fn: r = em.select(fr, em.cmpi(fr, "eq", mag, c(0x7F), "i32"), c(0x7FC00000), r, "i32")
    else:
      top = c(((1 << self.e) - 1) << self.m)   # inf or NaN: f32's all-ones exponent, the mantissa bits kept
      special = op("ori", op("shli", op("andi", mag, c((1 << self.m) - 1)), c(23 - self.m)), c(0x7F800000))
      r = em.select(fr, em.cmpi(fr, "uge", mag, top, "i32"), special, r, "i32")
    return em.cast(fr, "bitcast", op("ori", r, op("shli", op("andi", u, c(0x80)), c(24))), "i32", "f32")

  def narrow(self, em, fr, c, x: str) -> str:
    """f32 -> fp8, rounded to nearest even. Normal results: the exponent rebiased in the bits, then the dropped bits
    rounded by adding half minus one plus the lowest kept bit (a carry into the exponent is the correct round up).
    Subnormal results: |x| + 2^(24 - bias - m) in one f32 add, whose ulp is the fp8 subnormal step, so the hardware's
    rounding is the fp8 one; the sum's bits past the constant's count the steps."""
    op = lambda name, a, b: em.arith(fr, name, "i32", a, b)
    b = em.cast(fr, "bitcast", x, "f32", "i32")
    a = op("andi", b, c(0x7FFFFFFF))
    sh = 23 - self.m
    n = op("subi", a, c((127 - self.bias) << 23))
    n = op("shrui", op("addi", n, op("addi", op("andi", op("shrui", n, c(sh)), c(1)), c((1 << (sh - 1)) - 1))), c(sh))
    magic = (127 + 24 - self.bias - self.m) << 23
    s = em.arith(fr, "addf", "f32", em.cast(fr, "bitcast", a, "i32", "f32"), em.cast(fr, "bitcast", c(magic), "i32", "f32"))
    s = op("subi", em.cast(fr, "bitcast", s, "f32", "i32"), c(magic))
    r = em.select(fr, em.cmpi(fr, "ult", a, c((128 - self.bias) << 23), "i32"), s, n, "i32")
    if self.fn: r = em.select(fr, em.cmpi(fr, "ugt", r, c(0x7E), "i32"), c(self.nan), r, "i32")   # NaN and inf land here too
    else:
      r = op("minui", r, c(0x7C))
      r = em.select(fr, em.cmpi(fr, "ugt", a, c(0x7F800000), "i32"), c(self.nan), r, "i32")
    r = op("ori", r, op("andi", op("shrui", b, c(24)), c(0x80)))
    return em.cast(fr, "bitcast", em.cast(fr, "trunci", r, "i32", "i8"), "i8", self.ty)

E4M3, E5M2 = Fp8(4, 3, "f8E4M3FN", True), Fp8(5, 2, "f8E5M2", False)
