"""Elementwise ops: dtypes and casts, broadcasting and promotion, arithmetic, bitwise ops, comparisons, where,
division and remainder, and the math functions (float composites in float32 at least)."""
from __future__ import annotations
import functools, math
from typing import Self
import numpy as np
from morok_mlir.core.dtype import DType, dtypes, least_upper_dtype
from morok_mlir.dialects.ops import Ops
from morok_mlir.core.provenance import OpTypeError
from morok_mlir.core.mixin.helpers import _err, _cv, _shape, _bshape, vkey, _dtype, _float, _f32, OpBase

# bools have no arithmetic: add/max are or, mul/min are and (as tinygrad rewrites them)
_BOOL_ALU = {Ops.ADD: Ops.OR, Ops.MUL: Ops.AND, Ops.MAX: Ops.OR, Ops.MIN: Ops.AND}
# a Python int or float operand of a tensor: (its type, vkey, the tensor's dtype, match_dtype, the default dtypes) -> (the
# constant's value and dtype), worked out once (dtype rules, range checks, rounding to the dtype)
_SCALARS: dict = {}
_UINT = {1: dtypes.uint8, 2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}   # item size -> the unsigned int of it

def _opposite(r: OpBase, b: OpBase) -> OpBase:
  """r is nonzero with the sign opposite to b's: where a truncating quotient/remainder needs the floor correction.
  A constant divisor's sign is known here, which keeps `x // 4` and `x % 4` small."""
  if (cv := b._const_value()) is None: return r.ne(0) & r.lt(0).ne(b.lt(0))
  return r.lt(0) if cv > 0 else r.gt(0)

class ElementwiseMixin(OpBase):
  __slots__ = ()
  def _alu(self, op: Ops, *src: Self, dtype: DType | None = None) -> Self:
    if dtype is None and self.dtype.is_bool: op = _BOOL_ALU.get(op, op)
    return self._op(op, self.shape, dtype, src)
  def _const_value(self):
    """The scalar this tensor is known to hold everywhere (a const seen through reshape/expand), else None."""
    u = self._node
    while u.op in (Ops.RESHAPE, Ops.EXPAND): u = u.src[0]
    return u.attrs["value"] if u.op is Ops.CONST else None
  def cast(self, dtype) -> Self: return self._cast(_dtype(dtype))
  def _cast(self, dt: DType) -> Self: return self if dt is self.dtype else self._op(Ops.CAST, self.shape, dt)
  def bitcast(self, dtype) -> Self:
    """The same bytes read as dtype. Between item sizes (tinygrad's rule) the last dim changes: n items of self become
    n * itemsize / dtype.itemsize of dtype, little-endian (numpy's .view on these machines), so its bytes must divide."""
    dt, src = _dtype(dtype), self.dtype
    if dt.is_bool != src.is_bool: _err(OpTypeError, f"bitcast {src} -> {dt}: bool has no bit pattern to share (cast it)")
    if dt.itemsize == src.itemsize: return self if dt == src else self._op(Ops.BITCAST, self.shape, dt)
    n = self.shape[-1] if self.ndim else None
    if not isinstance(n, int) or n * src.itemsize % dt.itemsize:
      _err(OpTypeError, f"bitcast {src} -> {dt} needs equal item sizes, or a static last dim whose {src.itemsize}-byte items fill whole "
                        f"{dt.itemsize}-byte ones: got shape {self.shape}")
    u_src, u_dt = (_UINT[d.itemsize] for d in (src, dt))
    x = self.bitcast(u_src)
    if (rate := dt.itemsize // src.itemsize) > 1:   # rate pieces of each wider item, the lowest first
      x = x.reshape(*self.shape[:-1], n // rate, rate)
      parts = [x.shrink((None,) * (x.ndim - 1) + ((i, i + 1),)).cast(u_dt) << 8 * src.itemsize * i for i in range(rate)]
      return functools.reduce(lambda a, b: a | b, parts).squeeze(-1).bitcast(dt)
    rate = src.itemsize // dt.itemsize   # each item split into rate narrower ones, the lowest first
    return x.unsqueeze(-1).cat(*[x.unsqueeze(-1) >> 8 * dt.itemsize * i for i in range(1, rate)], dim=-1).cast(u_dt).flatten(-2).bitcast(dt)
  def float(self) -> Self: return self.cast(dtypes.float32)
  def half(self) -> Self: return self.cast(dtypes.float16)
  def double(self) -> Self: return self.cast(dtypes.float64)
  def int(self) -> Self: return self.cast(dtypes.int32)
  def long(self) -> Self: return self.cast(dtypes.int64)
  def bool(self) -> Self: return self.cast(dtypes.bool)
  def contiguous(self) -> Self: return self._op(Ops.CONTIGUOUS, self.shape)
  def detach(self) -> Self: return self._op(Ops.DETACH, self.shape)
  def clone(self) -> Self: return self.contiguous()
  def _broadcasted(self, y, reverse: bool = False, match_dtype: bool = True) -> tuple[Self, Self]:
    x = self
    if not isinstance(y, OpBase):
      if (y.__class__ is float or y.__class__ is int) and (hit := _SCALARS.get(key := (y.__class__, vkey(y), x.dtype, match_dtype, dtypes.default_float, dtypes.default_int))):
        v, out = hit
      else:
        if not isinstance(y, (bool, int, float, np.generic)): _err(TypeError, f"unsupported operand type {type(y).__name__}")
        # a Python scalar takes the tensor's dtype class; an int tensor with a float scalar becomes the default float
        ydt = x.dtype if x.dtype.is_float or (x.dtype.is_int and isinstance(y, (int, np.integer))) else dtypes.from_py(y)
        out = least_upper_dtype(x.dtype, ydt) if match_dtype else ydt
        v = _cv(_cv(y, ydt), out)
        if y.__class__ is float or y.__class__ is int:
          if len(_SCALARS) >= 4096: _SCALARS.clear()
          _SCALARS[key] = v, out
      y = x._const_shaped(v, out, x.shape)
    if match_dtype and x.dtype is not y.dtype:
      out = least_upper_dtype(x.dtype, y.dtype)
      x, y = x._cast(out), y._cast(out)
    if reverse: x, y = y, x
    if (shape := x.shape) == y.shape: return x, y
    shape = _shape(_bshape(shape, y.shape))
    return x._expanded(shape), y._expanded(shape)
  def _const_shaped(self, value, dtype: DType, shape) -> Self:
    """A constant broadcast to shape (a Python scalar operand)."""
    return self._const(value, dtype)._broadcast_to(shape)
  def _binop(self, op: str, y, reverse=False, dtype=None) -> Self:
    if y.__class__ is self.__class__ and y.dtype is (dt := self.dtype) and y.shape == (sh := self.shape):   # nothing to broadcast
      if dtype is None and dt.is_bool: op = _BOOL_ALU.get(op, op)
      return y._op(op, sh, dtype, (self,)) if reverse else self._op(op, sh, dtype, (y,))
    a, b = self._broadcasted(y, reverse)
    return a._alu(op, b, dtype=dtype)
  def _need(self, ok, what: str, *others: Self):
    if not all(ok(t.dtype) for t in (self,) + others): _err(OpTypeError, f"{what} is not supported for {', '.join(str(t.dtype) for t in (self,) + others)}")
  def add(self, x, reverse=False) -> Self: return self._binop(Ops.ADD, x, reverse)
  def mul(self, x, reverse=False) -> Self: return self._binop(Ops.MUL, x, reverse)
  def sub(self, x, reverse=False) -> Self:
    a, b = self._broadcasted(x, reverse)
    if a.dtype.is_bool: _err(TypeError, "subtraction with bool tensors is not supported; use ^ or logical_not")
    return a._alu(Ops.SUB, b)
  def maximum(self, x) -> Self: return self._binop(Ops.MAX, x)
  def minimum(self, x) -> Self: return self._binop(Ops.MIN, x)
  def neg(self) -> Self: return self.logical_not() if self.dtype.is_bool else self._alu(Ops.NEG)
  def logical_not(self) -> Self: return self.cast(dtypes.bool)._binop(Ops.CMPNE, True, dtype=dtypes.bool)
  def _bitwise(self, op, x, reverse=False) -> Self:
    a, b = self._broadcasted(x, reverse)
    a._need(lambda d: d.is_int or d.is_bool, f"bitwise {op}")
    return a._alu(op, b)
  def bitwise_and(self, x, reverse=False) -> Self: return self._bitwise(Ops.AND, x, reverse)
  def bitwise_or(self, x, reverse=False) -> Self: return self._bitwise(Ops.OR, x, reverse)
  def bitwise_xor(self, x, reverse=False) -> Self: return self._bitwise(Ops.XOR, x, reverse)
  def bitwise_not(self) -> Self:
    self._need(lambda d: d.is_int or d.is_bool, "bitwise not")
    return self.logical_not() if self.dtype.is_bool else self ^ -1
  def _shift(self, op, x, reverse=False) -> Self:
    a, b = self._broadcasted(x, reverse)
    a._need(lambda d: d.is_int, f"shift {op}")
    return a._alu(op, b)
  def lshift(self, x, reverse=False) -> Self: return self._shift(Ops.SHL, x, reverse)
  def rshift(self, x, reverse=False) -> Self: return self._shift(Ops.SHR, x, reverse)
  def pow(self, x, reverse=False) -> Self:
    a, b = self._broadcasted(x, reverse)
    if a.dtype.is_bool: a, b = a.cast(dtypes.int32), b.cast(dtypes.int32)
    if a.dtype.is_int and (e := b._const_value()) is not None and e < 0: _err(ValueError, "integers to negative integer powers are not allowed")
    return a._alu(Ops.POW, b)
  def _outside(self, x) -> int:
    """+1 / -1 when x is a Python or numpy int above / below what self's integer dtype holds, else 0. Such a scalar
    would wrap on conversion (int8 256 -> 0), so comparisons with it are answered exactly, as numpy 2 does."""
    if not self.dtype.is_int or type(x) is bool or isinstance(x, np.bool_) or not isinstance(x, (int, np.integer)): return 0
    return 1 if x > self.dtype.max else -1 if x < self.dtype.min else 0
  def _known(self, value: bool) -> Self: return self._full(self.shape, value, dtypes.bool)
  def _cmp(self, op, x, reverse=False) -> Self:
    if (side := self._outside(x)): return self._known(op is Ops.CMPNE or (op is Ops.CMPLT and (side > 0) != reverse))
    a, b = self._broadcasted(x, reverse)
    if op is Ops.CMPLT and a.dtype.is_bool: return a.logical_not()._alu(Ops.AND, b)  # False < True, whatever i1's signedness
    return a._alu(op, b, dtype=dtypes.bool)
  def lt(self, x) -> Self: return self._cmp(Ops.CMPLT, x)
  def gt(self, x) -> Self: return self._cmp(Ops.CMPLT, x, True)
  def le(self, x) -> Self:
    if (side := self._outside(x)): return self._known(side > 0)
    a, b = self._broadcasted(x)
    if not a.dtype.is_float: return b.lt(a).logical_not()
    return a._alu(Ops.CMPLT, b, dtype=dtypes.bool)._alu(Ops.OR, a._alu(Ops.CMPEQ, b, dtype=dtypes.bool))   # a.lt(b) | a.eq(b)
  def ge(self, x) -> Self:
    if (side := self._outside(x)): return self._known(side < 0)
    a, b = self._broadcasted(x)
    return b.le(a)
  def eq(self, x) -> Self: return self._cmp(Ops.CMPEQ, x)
  def ne(self, x) -> Self: return self._cmp(Ops.CMPNE, x)
  def where(self, x, y) -> Self:
    """self ? x : y, with x and y promoted together and everything broadcast."""
    if isinstance(x, OpBase): x, y = x._broadcasted(y)
    elif isinstance(y, OpBase): y, x = y._broadcasted(x)
    else: x, y = self._const(x)._broadcasted(y)
    shape = _shape(x.shape if (sh := self.shape) == x.shape else _bshape(sh, x.shape, y.shape))   # (x, y: one shape now)
    c, x, y = self._cast(dtypes.bool)._expanded(shape), x._expanded(shape), y._expanded(shape)
    return c._op(Ops.WHERE, shape, x.dtype, (x, y))
  def _trunc_divmod(self, b: Self) -> tuple[Self, Self]:
    """Truncating integer quotient and remainder. Division by 0 gives 0 (as numpy) and MIN // -1 wraps; the divisor
    is made safe so that no kernel ever divides by 0 or overflows (both trap on CPUs), unless it is a safe constant."""
    a, cv = self, b._const_value()
    if cv is not None and cv != 0 and not (cv == -1 and not a.dtype.is_unsigned): return a._alu(Ops.IDIV, b), a._alu(Ops.MOD, b)
    bad = b.eq(0) if a.dtype.is_unsigned else b.eq(0) | b.eq(-1)
    bs = bad.where(1, b)
    q, r = a._alu(Ops.IDIV, bs), a._alu(Ops.MOD, bs)
    if not a.dtype.is_unsigned: q = b.eq(-1).where(-a, q)
    return b.eq(0).where(0, q), r
  def div(self, x, reverse=False, rounding_mode: str | None = None) -> Self:
    """True division (float result); rounding_mode "trunc" or "floor" rounds the quotient (ints stay ints)."""
    a, b = self._broadcasted(x, reverse)
    if rounding_mode not in (None, "trunc", "floor"): _err(ValueError, f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found {rounding_mode!r}")
    if rounding_mode is not None and (a.dtype.is_int or a.dtype.is_bool):
      if a.dtype.is_bool: a, b = a.cast(dtypes.int32), b.cast(dtypes.int32)
      q, r = a._trunc_divmod(b)
      if rounding_mode == "trunc" or a.dtype.is_unsigned: return q
      return _opposite(r, b).where(q - 1, q)
    dt = _float(a.dtype)
    a, b = a.cast(dt), b.cast(dt)
    if rounding_mode is None: return a._alu(Ops.FDIV, b)
    if rounding_mode == "trunc": return a._alu(Ops.FDIV, b).trunc()
    # floor of a float quotient as numpy/Python do it: the exact quotient (a - fmod(a, b)) / b, corrected and rounded
    m = a._alu(Ops.MOD, b)
    q = (a - m)._alu(Ops.FDIV, b)
    q = _opposite(m, b).where(q - 1, q)
    fq = q.floor()
    return b.eq(0).where(a._alu(Ops.FDIV, b), (q - fq).gt(0.5).where(fq + 1, fq))
  def idiv(self, x, reverse=False) -> Self:
    """Integer division truncating toward zero (tinygrad's idiv)."""
    a, b = self._broadcasted(x, reverse)
    a._need(lambda d: d.is_int, "idiv")
    return a._trunc_divmod(b)[0]
  def floordiv(self, x, reverse=False) -> Self: return self.div(x, reverse, "floor")
  def mod(self, x, reverse=False) -> Self:
    """Remainder with the sign of the divisor (Python/numpy/PyTorch), from the truncating mod plus a correction."""
    a, b = self._broadcasted(x, reverse)
    if a.dtype.is_bool: a, b = a.cast(dtypes.int32), b.cast(dtypes.int32)
    r = a._trunc_divmod(b)[1] if a.dtype.is_int else a._alu(Ops.MOD, b)
    if a.dtype.is_unsigned: return r
    return _opposite(r, b).where(r + b, r)  # fmod(a, 0) is already NaN
  def fmod(self, x) -> Self:
    a, b = self._broadcasted(x)
    return a._trunc_divmod(b)[1] if a.dtype.is_int else a._alu(Ops.MOD, b)
  def _fl(self) -> Self: return self._cast(_float(self.dtype))
  def _fl_with(self, other) -> tuple[Self, Self]:
    """self and other promoted together for a float op: a tensor other first (int32 with float16 is float16, each
    rounded to it), a scalar after self is float (a negative scalar would wrap to an unsigned self's dtype)."""
    return self._broadcasted(other) if isinstance(other, OpBase) else self._fl()._broadcasted(other)
  def exp2(self) -> Self: return self._fl()._alu(Ops.EXP2)
  def log2(self) -> Self: return self._fl()._alu(Ops.LOG2)
  def sin(self) -> Self: return self._fl()._alu(Ops.SIN)
  def sqrt(self) -> Self: return self._fl()._alu(Ops.SQRT)
  def reciprocal(self) -> Self: return self._fl()._alu(Ops.RECIP)
  # composites of two primitives still run in float32 for float16/bfloat16: x / ln 2 rounded to bfloat16's 8 bits
  # would put an error of |x| * 2^-9 into exp's exponent
  @_f32
  def exp(self) -> Self: return (self * (1 / math.log(2))).exp2()
  @_f32
  def log(self) -> Self: return self.log2() * math.log(2)
  @_f32
  def cos(self) -> Self: return ((math.pi / 2) - self).sin()
  @_f32
  def tan(self) -> Self: return self.sin() / self.cos()
  def rsqrt(self) -> Self: return self.sqrt().reciprocal()
  def square(self) -> Self: return self * self
  def trunc(self) -> Self: return self._alu(Ops.TRUNC) if self.dtype.is_float else self
  def floor(self) -> Self:
    if not self.dtype.is_float: return self
    return (b := self.trunc()).gt(self).where(b - 1, b)
  def ceil(self) -> Self:
    if not self.dtype.is_float: return self
    return (b := self.trunc()).lt(self).where(b + 1, b)
  def round(self) -> Self:
    """Round half to even (numpy/PyTorch); x - floor(x) is exact, so no x + 0.5 rounding error."""
    if not self.dtype.is_float: return self
    f = self.floor()
    d, even = self - f, ((f * 0.5).floor() * 2).eq(f)
    return d.gt(0.5).where(f + 1, d.lt(0.5).where(f, even.where(f, f + 1)))
  def abs(self) -> Self:
    """|x|; zeros (-0.0 too) give +0 and no gradient (PyTorch's sign(x) at 0), NaN stays NaN."""
    return self if self.dtype.is_unsigned or self.dtype.is_bool else self.lt(0).where(-self, self.eq(0).where(0, self))
  def sign(self) -> Self: return self if self.dtype.is_bool else self.lt(0).where(-1, self.gt(0).where(1, self.eq(0).where(0, self)))   # NaN stays
  def relu(self) -> Self: return self.le(0).where(0, self)   # 0 at 0 takes no gradient (PyTorch's); NaN stays NaN
  @_f32
  def sigmoid(self) -> Self: return (1 + (self * (-1 / math.log(2))).exp2()).reciprocal()
  @_f32
  def tanh(self) -> Self:
    """Cephes tanhf / tanh: 1 - 2 / (exp(2a) + 1) on a = |x| >= 0.625, an odd polynomial (float64: rational) below, where
    that form (and 2 sigmoid(2x) - 1) cancels: tanh(5.6e-8) gave 1.2e-7."""
    a, z = self.abs(), self * self
    if self.dtype is dtypes.float64:
      pq = z._poly([-9.64399179425052238628e-1, -9.92877231001918586564e1, -1.61468768441708447952e3]) / \
           z._poly([1.0, 1.12811678491632931402e2, 2.23548839060100448583e3, 4.84406305325125486048e3])
    else: pq = z._poly([-5.70498872745e-3, 2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1])
    return self._signed(a.lt(0.625).where(a + a * z * pq, 1 - 2 / ((a * 2).exp() + 1)))
  def clip(self, min_=None, max_=None) -> Self:
    if min_ is None and max_ is None: _err(ValueError, "clip needs min_ or max_")
    # selects, not maximum/minimum: a value at a bound takes the whole gradient (PyTorch's), NaN stays NaN, min_ > max_ gives max_
    x = self if min_ is None else self.lt(min_).where(min_, self)
    return x if max_ is None else x.gt(max_).where(max_, x)
  clamp = clip
  def lerp(self, end, weight) -> Self: return self + (end - self) * weight
  def isnan(self) -> Self: return self.ne(self)
  def isinf(self, detect_positive: bool = True, detect_negative: bool = True) -> Self:
    if not self.dtype.is_float or not (detect_positive or detect_negative): return self._known(False)
    if not detect_negative: return self.eq(math.inf)
    return self.eq(-math.inf) if not detect_positive else self.eq(math.inf) | self.eq(-math.inf)
  def __neg__(self) -> Self: return self.neg()
  def __invert__(self) -> Self: return self.bitwise_not()
  def __abs__(self) -> Self: return self.abs()
  # Composites of the primitives, written to keep float accuracy where the naive formula cancels or overflows.
  def _log1p(self) -> Self:
    """log(1 + x) without losing a small x (Goldberg): log(u) * x / (u - 1) cancels the rounding of u = 1 + x."""
    u = self + 1
    x = (u.eq(1) | u.eq(math.inf)).where(1.0, self)   # the branches not taken see 1: no 0/0, inf/inf, whose gradient is NaN
    v = x + 1
    return u.eq(1).where(self, u.eq(math.inf).where(u, v.log() * (x / (v - 1))))
  def _expm1(self) -> Self:
    """exp(x) - 1 without cancelling a small x (Kahan): (u - 1) * x / log(u) with u = exp(x)."""
    u = self.exp()
    return u.eq(1).where(self, (u - 1).eq(-1).where(-1.0, u.eq(math.inf).where(u, (u - 1) * (self / u.log()))))
  def _poly(self, coeffs) -> Self:
    """Horner: coeffs from the highest power down."""
    ret = self._full(self.shape, coeffs[0], self.dtype)
    for c in coeffs[1:]: ret = ret * self + c
    return ret
  def _signed(self, r: Self) -> Self: return self.lt(0).where(-r, self.eq(0).where(self, r))   # r (of |self|) with self's sign, -0.0 kept
  @_f32
  def atan(self) -> Self:
    """Cephes atanf (float32) and atan (float64): |x| reduced by atan(x) = pi/4 + atan((x-1)/(x+1)) or pi/2 + atan(-1/x),
    then a polynomial, or for float64 a rational function plus the rounding of pi/2; no x*x of the input, so large |x|
    and inf give +-pi/2."""
    a, f64 = self.abs(), self.dtype is dtypes.float64
    c = lambda v: a._const(v, a.dtype)   # typed: a where of two Python floats is float32
    big, mid = a.gt(2.414213562373095), a.gt(0.66 if f64 else 0.4142135623730950)
    xr = big.where(-a.reciprocal(), mid.where((a - 1) / (a + 1), a))
    z = xr * xr
    if f64:
      p = z._poly([-8.750608600031904122785e-1, -1.615753718733365076637e1, -7.500855792314704667340e1, -1.228866684490136173410e2,
                   -6.485021904942025371773e1])
      q = z._poly([1.0, 2.485846490142306297962e1, 1.650270098316988542046e2, 4.328810604912902668951e2, 4.853903996359136964868e2,
                   1.945506571482613964425e2])
      r = xr * (z * p / q) + xr + big.where(c(6.123233995736765886130e-17), mid.where(c(3.061616997868382943065e-17), 0.0))
    else: r = z._poly([8.05374449538e-2, -1.38776856032e-1, 1.99777106478e-1, -3.33329491539e-1]) * z * xr + xr
    return self._signed(r + big.where(c(math.pi / 2), mid.where(c(math.pi / 4), 0.0)))
  @_f32
  def asin(self) -> Self: return (self / ((1 - self) * (1 + self)).sqrt()).atan()   # 1 - x*x would cancel near |x| = 1
  @_f32
  def acos(self) -> Self: return ((1 - self) / (1 + self)).sqrt().atan() * 2   # small near x = 1, where pi/2 - asin cancels
  @_f32
  def sinh(self) -> Self: return (self._expm1() - (-self)._expm1()) * 0.5
  @_f32
  def cosh(self) -> Self: return (self.exp() + (-self).exp()) * 0.5
  @_f32
  def asinh(self) -> Self:
    """log1p(a + a^2 / (1 + sqrt(1 + a^2))) on a = |x| (no cancellation for negative x), log(2a) once a^2 would overflow."""
    a = self.abs()
    r = a.gt(2 ** 28).where(a.log() + math.log(2), (a + a * a / (1 + (1 + a * a).sqrt()))._log1p())
    return self._signed(r)
  @_f32
  def acosh(self) -> Self:
    t = self - 1   # log1p(t + sqrt(t * (t + 2))): exact near x = 1
    return self.lt(1).where(math.nan, self.gt(2 ** 28).where(self.log() + math.log(2), (t + (t * (t + 2)).sqrt())._log1p()))
  @_f32
  def atanh(self) -> Self:
    """0.5 log1p(2a / (1 - a)) on a = |x|: for x near -1 the argument of log1p would be near -1, where it cancels."""
    a = self.abs()
    return self._signed((a * 2 / (1 - a))._log1p() * 0.5)
  @_f32
  def erf(self) -> Self:
    """Taylor series below |x| = 0.5 (relative accuracy near 0), Abramowitz-Stegun 7.1.26 above (1.5e-7 absolute).
    float64: the Taylor series below 2 (34 terms), 1 - erfc from erfc's continued fraction above (40 terms): an ulp or two."""
    a = self.abs()
    if self.dtype is dtypes.float64:
      s = self * (self * self)._poly([(-1) ** n / (math.factorial(n) * (2 * n + 1)) for n in range(33, -1, -1)]) * (2 / math.sqrt(math.pi))
      t = a
      for k in range(40, 0, -1): t = a + (k / 2) / t
      return a.lt(2).where(s, self._signed(1 - (-a * a).exp() / (t * math.sqrt(math.pi))))
    small = self * (self * self)._poly([1 / 9360, -1 / 1320, 1 / 216, -1 / 42, 1 / 10, -1 / 3, 1]) * (2 / math.sqrt(math.pi))
    t = (1 + 0.3275911 * a).reciprocal()
    big = 1 - t * t._poly([1.061405429, -1.453152027, 1.421413741, -0.284496736, 0.254829592]) * (-a * a).exp()
    return a.lt(0.5).where(small, self._signed(big))
  def copysign(self, other) -> Self:
    """|self| with the sign bit of other (as numpy/PyTorch: -0.0 and NaN's sign count), in a float dtype."""
    a, b = self._fl_with(other)
    dt = _float(a.dtype)
    it = {2: dtypes.int16, 4: dtypes.int32, 8: dtypes.int64}[dt.itemsize]
    a, b = a.cast(dt), b.cast(dt)
    flip = a.bitcast(it).lt(0).ne(b.bitcast(it).lt(0))   # the sign bits differ: negate (exact on zeros and NaN)
    a = a.eq(0).where(a.detach(), a)   # d/da is sign(a) * sign(result), 0 at a = 0 (PyTorch's)
    return flip.where(-a, a)
  def logaddexp(self, other) -> Self:
    """log(exp(a) + exp(b)) = max + log1p(exp(-|a - b|)); a == b (infinities included) is max + log 2."""
    a, b = self._fl_with(other)
    dt = _float(a.dtype)
    a, b = a.cast(least_upper_dtype(dt, dtypes.float32)), b.cast(least_upper_dtype(dt, dtypes.float32))
    m = a.maximum(b)
    return a.eq(b).where(m + math.log(2), m + (-(a - b).abs()).exp()._log1p()).cast(dt)
  def isfinite(self) -> Self: return self.abs().lt(math.inf) if self.dtype.is_float else self._known(True)
  def isclose(self, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Self:
    """|a - b| <= atol + rtol * |b| or a == b (PyTorch's; infinities are close only to themselves). Ints and bools
    compare in the default float."""
    if rtol < 0 or atol < 0: _err(ValueError, f"isclose: rtol ({rtol}) and atol ({atol}) must be non-negative")
    a, b = self._broadcasted(other)
    close = a.eq(b)
    if not a.dtype.is_float: a, b = a.cast(dtypes.default_float), b.cast(dtypes.default_float)
    if equal_nan: close = close | (a.isnan() & b.isnan())
    d = (a - b).abs()
    return close | (d.isfinite() & d.le(atol + rtol * b.abs()))
  def masked_fill(self, mask, value) -> Self:
    """value where mask is True, self elsewhere (mask and self broadcast together, as in PyTorch)."""
    if not isinstance(mask, OpBase) or not mask.dtype.is_bool: _err(TypeError, f"masked_fill needs a bool mask, got {getattr(mask, 'dtype', mask)!r}")
    shape = _bshape(self.shape, mask.shape)
    return mask._broadcast_to(shape).where(self._const(_cv(value, self.dtype), self.dtype), self._broadcast_to(shape))

# binary operators and their reflected forms (Tensor adds the in-place ones)
BINARY_OPS = {k: getattr(ElementwiseMixin, v) for k, v in {"add": "add", "sub": "sub", "mul": "mul", "pow": "pow", "floordiv": "floordiv",
              "mod": "mod", "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor", "lshift": "lshift", "rshift": "rshift",
              "truediv": "div"}.items()}
for _name, _fn in BINARY_OPS.items():
  setattr(ElementwiseMixin, f"__{_name}__", _fn)
  setattr(ElementwiseMixin, f"__r{_name}__", lambda self, x, f=_fn: f(self, x, True))
