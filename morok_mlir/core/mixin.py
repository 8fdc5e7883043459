"""Op methods shared by Tensor and UOp (tinygrad's mixins): broadcasting, dtype promotion, shape checks and the ops
composed from the primitives, written once. A class using OpMixin provides `shape`, `dtype`, `_node` (its graph UOp),
`_op(op, shape, dtype, src, **attrs)` (one primitive node of the same class) and `_const(value, dtype)` (a 0-d constant).
Comparisons are the named methods lt/gt/le/ge/eq/ne: Tensor maps its operators to them, a UOp keeps identity equality
(UOps are hash-consed dictionary keys)."""
from __future__ import annotations
import functools, math
from typing import Self
import numpy as np
from morok_mlir.core.dtype import DType, dtypes, least_upper_dtype, to_dtype
from morok_mlir.dialects.ops import Ops, REDUCE_IDENTITY
from morok_mlir.core.provenance import error as _error, OpValueError, OpIndexError, OpTypeError
from morok_mlir.core import uop as U   # symbolic sizes are UOps (uop imports this module: names are read at call time)

# ---------------------------------------------------------------- helpers
def _err(exc: type, msg: str):
  """Raise at the user's line; a rejected argument or shape is also a RuntimeError, as PyTorch's ops raise."""
  _error({ValueError: OpValueError, IndexError: OpIndexError}.get(exc, exc), msg)
def _prod(xs): return U.sprod(xs)   # an int, or an index UOp when a size is symbolic
def _argfix(*x) -> tuple:
  return tuple(x[0]) if x and isinstance(x[0], (tuple, list)) else x
def _cv(v, dt: DType):
  """A Python or numpy scalar as a constant of dtype dt. Integers wrap at the dtype's width (a cast, as in PyTorch), but
  a Python int must be a 64-bit integer of dt's signedness (PyTorch's "Overflow when unpacking long"); a float given to
  an integer dtype must be finite and in its range (as torch.full checks): no other value is silently changed."""
  if dt.is_float:   # through float64, as numpy converts a Python int
    try: return float(v) if dt is dtypes.float64 else float(dt.np(float(v)))
    except OverflowError: _err(OverflowError, f"{v} is out of range for {dt}")
  if dt.is_bool: return bool(v)
  if isinstance(v, (float, np.floating)):
    if not math.isfinite(v): _err(ValueError, f"cannot convert {v} to {dt}")
    if not dt.min <= math.trunc(v) <= dt.max: _err(OverflowError, f"{v} is out of range for {dt}")
  elif not isinstance(v, np.integer) and not -(1 << 63) <= v < 1 << (64 if dt.is_unsigned else 63):
    _err(OverflowError, f"Python int {v} is out of range for {dt} (it does not fit a 64-bit {'un' * dt.is_unsigned}signed integer)")
  v, m = int(v) & ((1 << dt.bits) - 1), 1 << dt.bits
  return v - m if not dt.is_unsigned and v >= m >> 1 else v
MAX_NUMEL = 1 << 62   # index math (core/index_math.py) is 64-bit: linear indices, strides and pad offsets stay below 2^63
def _sz(s, what: str = "size"):
  """A size: an int, or a symbolic index UOp whose variables are all bound (Variable(...).bind(value))."""
  if isinstance(s, U.UOp):
    try: U.sym_val(s)
    except (TypeError, KeyError): _err(TypeError, f"{what} {s!r} is not a bound size: use a Variable's .bind(value)")
    return s
  if not isinstance(s, (int, np.integer)) or isinstance(s, (bool, np.bool_)): _err(TypeError, f"{what} must be an int, got {type(s).__name__}")
  return int(s)

def _plain(shape: tuple) -> bool:
  """Every size a Python int >= 0 (no bool, numpy int or symbolic UOp): the common case, checked without a Python loop."""
  return list(map(type, shape)).count(int) == len(shape) and (not shape or min(shape) >= 0)
def _shape(shape, what: str = "shape") -> tuple:
  """A shape as a tuple of sizes (ints or bound symbolic UOps), checked up front: every dim non-negative (its bound value
  for a symbolic one), the element count what index math holds."""
  if _plain(shape) and math.prod(shape) < MAX_NUMEL: return tuple(shape)   # the common case
  if bad := [s for s in shape if not isinstance(s, (int, np.integer, U.UOp)) or isinstance(s, (bool, np.bool_))]:
    _err(TypeError, f"{what} {tuple(shape)} must hold ints, got {type(bad[0]).__name__}")
  shape = tuple(_sz(s, what) for s in shape)
  if any(U.sym_val(s) < 0 for s in shape): _err(ValueError, f"{what} {shape} has a negative dimension")
  if (n := U.sym_val(_prod(shape))) >= MAX_NUMEL: _err(ValueError, f"{what} {shape} has {n} elements, more than index math supports ({MAX_NUMEL})")
  return shape
def _bshape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
  """numpy broadcasting of shapes."""
  if len(shapes) == 2 and len(a := shapes[0]) == len(b := shapes[1]):   # the common case: a size-1 dim meets the other's
    try: return tuple(x if y == 1 or x == y else y if x == 1 else _nobcast() for x, y in zip(a, b))
    except _NoBroadcast: pass
  nd = max(len(s) for s in shapes)
  out = []
  for dims in zip(*((1,) * (nd - len(s)) + tuple(s) for s in shapes)):
    if len(big := {d for d in dims if d != 1}) > 1:
      _err(ValueError, f"shapes {' and '.join(str(tuple(s)) for s in shapes)} cannot be broadcast together")
    out.append(big.pop() if big else 1)
  return tuple(out)
def vkey(v):
  """A Python scalar as a dict key that keeps apart what == merges: 0.0 and -0.0 (as their reprs), and NaN (equal to itself)."""
  return v if v == v and (v or v.__class__ is not float) else repr(v)
# a Python int or float operand of a tensor: (its type, vkey, the tensor's dtype, match_dtype) -> (the constant's value and
# dtype), worked out once (dtype rules, range checks, rounding to the dtype)
_SCALARS: dict = {}
class _NoBroadcast(Exception): pass
def _nobcast(): raise _NoBroadcast
class DTypeNameError(TypeError, AttributeError):
  """A string that names no dtype: a TypeError (PyTorch's), and an AttributeError of `dtypes` (tinygrad's getattr)."""
_NONE = type(None)
def _isint(v) -> bool: return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
def _diag(d) -> int:
  if not _isint(d): _err(TypeError, f"diagonal must be an int, got {d!r}")
  return int(d)
def _dtype(x) -> DType:
  try: dt = to_dtype(x)
  except (AttributeError, TypeError): dt = None
  if not isinstance(dt, DType) or dt == dtypes.index: _err(DTypeNameError if isinstance(x, str) else TypeError, f"{x!r} is not a dtype")
  return dt
def _float(dt: DType) -> DType: return dt if dt.is_float else dtypes.default_float
def _narrow_float(dt: DType) -> bool: return dt.is_float and dt.itemsize < 4   # float16, bfloat16: opmath is float32
def _sum_acc(dt: DType) -> DType:
  """The dtype sum, prod, cumsum and cumprod accumulate in: bools and signed ints in int64 (PyTorch's and numpy's rule,
  which is also their result), unsigned ints in uint64 (numpy's); float16/bfloat16 in float32, rounded back at the end."""
  if dt.is_unsigned: return dtypes.uint64
  if dt.is_int or dt.is_bool: return dtypes.int64
  return least_upper_dtype(dt, dtypes.float32)
def _stat_dtype(dt: DType) -> DType:
  """The dtype mean, var and std compute in: ints and bools in float64 (numpy's intermediates: nothing wraps, no int is
  rounded to float32 before the subtraction), float16/bfloat16 in float32 (PyTorch's opmath: one rounding at the end)."""
  return least_upper_dtype(dt, dtypes.float32) if dt.is_float else dtypes.float64
def _dot_acc(dt: DType) -> DType:
  """The accumulator of a contraction (matmul, einsum, conv) whose result keeps its operands' dtype, as in PyTorch and
  numpy (int32 @ int32 is int32 and wraps): small ints in 32 bits (the same bits once cast back), float16/bfloat16 in float32."""
  return least_upper_dtype(dt, dtypes.float32 if dt.is_float else dtypes.uint32 if dt.is_unsigned else dtypes.int32)
def _contraction(xs: tuple[OpMixin, ...], dtype) -> tuple[list[OpMixin], DType, DType]:
  """The operands of a contraction summed in dtype (None: _dot_acc of their promoted dtype), its accumulator and result
  dtypes. Each operand is rounded to the promoted dtype first, as x * y rounds it, then cast to the accumulator where
  that is at least as wide: the products are formed there (float16 products exact in float32, PyTorch's opmath)."""
  dt = least_upper_dtype(*(x.dtype for x in xs))
  acc = _dot_acc(dt) if dtype is None else _dtype(dtype)
  wide = acc if least_upper_dtype(dt, acc) is acc else dt
  return [x._cast(dt)._cast(wide) for x in xs], acc, dt if dtype is None else acc
def _opposite(r: OpMixin, b: OpMixin) -> OpMixin:
  """r is nonzero with the sign opposite to b's: where a truncating quotient/remainder needs the floor correction.
  A constant divisor's sign is known here, which keeps `x // 4` and `x % 4` small."""
  if (cv := b._const_value()) is None: return r.ne(0) & r.lt(0).ne(b.lt(0))
  return r.lt(0) if cv > 0 else r.gt(0)
# bools have no arithmetic: add/max are or, mul/min are and (as tinygrad rewrites them)
_BOOL_ALU = {Ops.ADD: Ops.OR, Ops.MUL: Ops.AND, Ops.MAX: Ops.OR, Ops.MIN: Ops.AND}
_SCATTER_REDUCE = {"sum": "add", "prod": "mul", "mean": "add", "amax": "max", "amin": "min"}   # PyTorch's name -> scatter op

def _f32(fn):
  """Float composites run in float32 at least (PyTorch's opmath): their polynomials and cancellations would lose most of
  float16's 11 bits (bfloat16's 8). The result is rounded once to the input's float dtype."""
  @functools.wraps(fn)
  def f(self, *a, **kw):
    x = self._fl()
    return fn(x.float(), *a, **kw).cast(x.dtype) if _narrow_float(x.dtype) else fn(x, *a, **kw)
  return f

def _basic_plan(shape: tuple, idx: tuple) -> tuple[list, list, list, list]:
  """numpy's basic indexing (ints, slices of any step, None, ...) as movement: per dim its shrink bounds and
  stride, the dims to flip, and the result's shape. OpMixin.__getitem__ applies it, _basic_put undoes it."""
  for i in idx:
    if not (i is None or i is Ellipsis or isinstance(i, (int, np.integer, slice))) or isinstance(i, (bool, np.bool_)):
      _err(TypeError, f"unsupported index {i!r} (ints, slices, None, ..., and on a Tensor integer or bool arrays are supported)")
  if sum(i is Ellipsis for i in idx) > 1: _err(IndexError, "an index can only have a single ellipsis ('...')")
  used = sum(i is not None and i is not Ellipsis for i in idx)
  if used > len(shape): _err(IndexError, f"too many indices for tensor of dimension {len(shape)}")
  e = idx.index(Ellipsis) if Ellipsis in idx else len(idx)
  idx = idx[:e] + (slice(None),) * (len(shape) - used) + idx[e + 1:]
  bounds, flips, steps, out, d = [], [], [], [], 0
  for i in idx:
    if i is None: out.append(1); continue
    s = shape[d]
    if isinstance(s, U.UOp):
      b, n = _symbolic_slice(s, i, d)
      bounds.append(b); steps.append(1)
      if isinstance(i, slice): out.append(n)
    elif isinstance(i, slice):
      start, stop, step = i.indices(s) if i.step != 0 else _err(ValueError, "slice step cannot be zero")
      n = len(range(start, stop, step))
      lo, hi = (start, start + (n - 1) * step + 1) if step > 0 else (start + (n - 1) * step, start + 1)
      bounds.append((lo, hi) if n else (0, 0)); steps.append(abs(step) if n > 1 else 1); out.append(n)
      if step < 0 and n > 1: flips.append(d)
    else:
      if not -s <= i < s: _err(IndexError, f"index {i} is out of bounds for dimension {d} with size {s}")
      bounds.append((i % s, i % s + 1)); steps.append(1)
    d += 1
  return bounds, flips, steps, out

def _symbolic_slice(s: U.UOp, i, d: int) -> tuple[tuple, object]:
  """(shrink bounds, size) of index i (an int, or a slice of step 1) along a symbolic dim of size s, numpy's at s's
  bound value: each bound is a constant, or an offset from s where numpy's counts from the end (a start or stop left out,
  or negative), so the graph holds no value and one schedule serves every value that picks the same form."""
  val = U.sym_val(s)
  if not isinstance(i, slice):
    if not -val <= i < val: _err(IndexError, f"index {i} is out of bounds for dimension {d} with size {s!r}")
    lo = int(i) if i >= 0 else U.sadd(s, int(i))
    return (lo, U.sadd(lo, 1)), 1
  if i.step is not None and i.step != 1:
    _err(IndexError, f"slice step {i.step} along dimension {d} of symbolic size {s!r}: only a step of 1 is supported")
  def at(x, default):   # numpy's bound clamped into [0, val], as an int or an offset from s
    if x is None: return default
    x = int(x)
    if x < 0: return U.sadd(s, x) if val + x >= 0 else 0
    return x if x <= val else s
  lo, hi = at(i.start, 0), at(i.stop, s)
  return ((lo, hi), U.ssub(hi, lo)) if U.sym_val(hi) > U.sym_val(lo) else ((0, 0), 0)

class OpMixin:
  __slots__ = ()
  @property
  def ndim(self) -> int: return len(self.shape)
  def numel(self) -> int: return _prod(self.shape)
  def _full(self, shape, value, dtype: DType) -> Self: return self._const(value, dtype).reshape((1,) * len(shape)).expand(shape)
  # movement the composite ops build from sizes they know to be valid (the public methods' checks and argument forms
  # skipped, the nodes the same)
  def _reshaped(self, shape: tuple) -> Self: return self if shape == self.shape else self._op(Ops.RESHAPE, shape)
  def _expanded(self, shape: tuple) -> Self:
    """self broadcast to shape, a valid shape (_shape) that self broadcasts to."""
    if (sh := self.shape) == shape: return self
    x = self if len(sh) == len(shape) else self._reshaped((1,) * (len(shape) - len(sh)) + sh)
    return x if x.shape == shape else x._op(Ops.EXPAND, shape)
  def _permuted(self, order: tuple[int, ...]) -> Self:
    sh = self.shape
    return self if order == tuple(range(len(sh))) else self._op(Ops.PERMUTE, tuple(sh[o] for o in order), order=order)

  # ---- dtypes, broadcasting and elementwise ops
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
    dt = _dtype(dtype)
    if dt.itemsize != self.dtype.itemsize or dt.is_bool != self.dtype.is_bool: _err(TypeError, f"bitcast {self.dtype} -> {dt} needs equal item sizes")
    return self if dt == self.dtype else self._op(Ops.BITCAST, self.shape, dt)
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
    if not isinstance(y, OpMixin):
      if (y.__class__ is float or y.__class__ is int) and (hit := _SCALARS.get(key := (y.__class__, vkey(y), x.dtype, match_dtype))):
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
    if isinstance(x, OpMixin): x, y = x._broadcasted(y)
    elif isinstance(y, OpMixin): y, x = y._broadcasted(x)
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
    return self._broadcasted(other) if isinstance(other, OpMixin) else self._fl()._broadcasted(other)
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

  # ---- math, activations and losses
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

  @_f32
  def gelu(self, approximate: str = "tanh") -> Self:
    """tinygrad's gelu: the tanh approximation, written x * sigmoid(2z) (= 0.5x(1 + tanh z), no cancellation);
    approximate="none" is the exact x * Phi(x) (PyTorch's default)."""
    if approximate == "none": return self * 0.5 * (1 + (self * (1 / math.sqrt(2))).erf())
    if approximate != "tanh": _err(ValueError, f"gelu: approximate must be 'tanh' or 'none', got {approximate!r}")
    return self * (self * (1 + 0.044715 * self * self) * (2 * math.sqrt(2 / math.pi))).sigmoid()
  @_f32
  def quick_gelu(self) -> Self: return self * (self * 1.702).sigmoid()
  @_f32
  def swish(self) -> Self: return self * self.sigmoid()
  def silu(self) -> Self: return self.swish()
  @_f32
  def elu(self, alpha=1.0) -> Self: return self.gt(0).where(self, alpha * self._expm1())
  @_f32
  def celu(self, alpha=1.0) -> Self: return self.maximum(0) + (alpha * (self / alpha)._expm1()).minimum(0)
  def selu(self, alpha=1.6732632423543772, gamma=1.0507009873554805) -> Self: return gamma * self.elu(alpha)
  def leaky_relu(self, neg_slope=0.01) -> Self: return self.lt(0).where(neg_slope * self, self)
  def relu6(self) -> Self: return self.relu().minimum(6)
  def hardtanh(self, min_val=-1, max_val=1) -> Self: return self.clip(min_val, max_val)
  def hardsigmoid(self, alpha=1 / 6, beta=0.5) -> Self: return (alpha * self + beta).relu().minimum(1)
  def hardswish(self) -> Self: return self * (self + 3).relu6() * (1 / 6)
  @_f32
  def softplus(self, beta=1.0, threshold=20.0) -> Self:
    """log(1 + exp(beta x)) / beta, and x itself once beta x > threshold (PyTorch's)."""
    bx, big = self * beta, (self * beta).gt(threshold)
    return big.where(self, big.where(0, bx).exp()._log1p() * (1 / beta))   # exp of the taken side only: no inf, no NaN gradient
  def softsign(self) -> Self: return self / (1 + self.abs())
  @_f32
  def mish(self) -> Self: return self * self.softplus().tanh()
  @_f32
  def logsigmoid(self) -> Self:
    """-softplus(-x), as min(x, 0) - log1p(exp(-|x|)): exact in both tails."""
    return self.minimum(0) - (-self.abs()).exp()._log1p()

  def _arange(self, n: int) -> Self:
    """0..n-1 (int32) from constants and movement only, for a UOp, which holds no data (Tensor uses a buffer): the sum
    of its binary digits, digit k the pattern [0]*2^k + [1]*2^k tiled to n. Elementwise, it fuses into its user."""
    if not isinstance(n, int): _err(TypeError, f"a class count must be an int, got {n!r}")
    ret = self._full((n,), 0, dtypes.int32)
    for k in range(max(n - 1, 0).bit_length()):
      p, r = 1 << k, -(-n // (2 << k))
      digit = self._full((1,), p, dtypes.int32).pad(((1, 0),)).reshape(2, 1).expand(2, p).reshape(1, 2 * p)
      ret = ret + digit.expand(r, 2 * p).reshape(r * 2 * p).shrink(((0, n),))
    return ret
  def _one_hot(self, n: int, dim: int) -> Self:
    """Class indices (self) as a bool one-hot with n classes at dim of the result; indices outside [0, n) are all False."""
    d = self._dim(dim, extra=1)
    return self.unsqueeze(d).eq(self._arange(n).reshape((n,) + (1,) * (self.ndim - d)))
  def one_hot(self, num_classes: int = -1) -> Self:
    """Integer class indices -> int32 one-hot on a new last dim (tinygrad/PyTorch); num_classes=-1 takes max + 1, which
    realizes the indices on a Tensor. An index outside [0, num_classes) gives an all-zero row (PyTorch raises)."""
    if not (self.dtype.is_int or self.dtype is dtypes.index): _err(TypeError, f"one_hot needs integer class indices, got {self.dtype}")
    if num_classes == -1: num_classes = int(self.max().item()) + 1 if self.numel() else 0
    return self._one_hot(num_classes, -1).cast(dtypes.int32)
  def masked_fill(self, mask, value) -> Self:
    """value where mask is True, self elsewhere (mask and self broadcast together, as in PyTorch)."""
    if not isinstance(mask, OpMixin) or not mask.dtype.is_bool: _err(TypeError, f"masked_fill needs a bool mask, got {getattr(mask, 'dtype', mask)!r}")
    shape = _bshape(self.shape, mask.shape)
    return mask._broadcast_to(shape).where(self._const(_cv(value, self.dtype), self.dtype), self._broadcast_to(shape))
  def _do_reduction(self, reduction: str) -> Self:
    if reduction not in ("mean", "sum", "none"): _err(ValueError, f"reduction must be one of 'mean', 'sum', 'none', got {reduction!r}")
    return self.mean() if reduction == "mean" else self.sum() if reduction == "sum" else self
  def _target(self, Y, what: str):
    if not isinstance(Y, OpMixin): _err(TypeError, f"{what} takes a target tensor, got {type(Y).__name__}")
    return Y
  def _smoothing(self, label_smoothing):
    if not 0.0 <= label_smoothing <= 1.0: _err(ValueError, f"label_smoothing must be in [0.0, 1.0], got {label_smoothing}")
  def _smoothed_pick(self, oh: Self, ax: int, ls: float) -> Self:
    """(1 - ls) * self[class] + ls * self.mean(ax) as one reduction: self weighted by the smoothed one-hot. Without
    smoothing it selects (a -inf log-probability of another class gives no NaN)."""
    if not ls: return oh.where(self, 0).sum(ax)
    return (self * oh.where(self._const(1 - ls + ls / self.shape[ax], self.dtype), ls / self.shape[ax])).sum(ax)
  def cross_entropy(self, Y, reduction: str = "mean", label_smoothing: float = 0.0, ignore_index: int = -100) -> Self:
    """Logits (N, C, ...) against class indices (N, ...) or probabilities shaped as self (PyTorch's rule); classes at dim 1.
    A class-index target equal to ignore_index (PyTorch's -100) adds nothing, and "mean" is over the others."""
    Y = self._target(Y, "cross_entropy")
    self._smoothing(label_smoothing)
    ax = 1 if self.ndim > 1 else 0
    lp = self.log_softmax(axis=ax)
    if Y.shape == self.shape and Y.dtype.is_float:   # probabilities
      ret = -(lp * (Y * (1 - label_smoothing) + label_smoothing / self.shape[ax] if label_smoothing else Y)).sum(ax)
    else:
      if Y.dtype.is_float or Y.shape != self.shape[:ax] + self.shape[ax + 1:]:
        _err(ValueError, f"cross_entropy: target {Y.shape} {Y.dtype} is neither class indices for {self.shape} nor probabilities shaped as it")
      keep = Y.ne(ignore_index)
      ret = keep.where(-lp._smoothed_pick(Y._one_hot(self.shape[ax], ax), ax, label_smoothing), 0)
      if reduction == "mean": return ret.sum() / keep.sum().cast(ret.dtype)
    return ret._do_reduction(reduction)
  def sparse_categorical_crossentropy(self, Y, ignore_index: int = -1, label_smoothing: float = 0.0, reduction: str = "mean") -> Self:
    """tinygrad's: logits (..., C) against class indices (...); targets equal to ignore_index add nothing, and the mean
    is over the others (ignore_index=-1 keeps every target in the mean)."""
    Y = self._target(Y, "sparse_categorical_crossentropy")
    self._smoothing(label_smoothing)
    if reduction not in ("mean", "sum", "none"): _err(ValueError, f"reduction must be one of 'mean', 'sum', 'none', got {reduction!r}")
    if Y.shape != self.shape[:-1]: _err(ValueError, f"sparse_categorical_crossentropy: target {Y.shape} does not match logits {self.shape}")
    mask = Y.ne(ignore_index) if ignore_index != -1 else Y._known(True)
    unreduced = self.log_softmax(-1)._smoothed_pick(Y._one_hot(self.shape[-1], -1), -1, label_smoothing)
    if ignore_index != -1: unreduced = mask.where(unreduced, 0)
    if reduction == "mean": return -(unreduced.sum() / mask.sum())
    return -(unreduced.sum() if reduction == "sum" else unreduced)
  def nll_loss(self, Y, weight=None, ignore_index: int | None = None, reduction: str = "mean") -> Self:
    """Log-probabilities (N, C, ...) against class indices (N, ...), weight (C,) per class; "mean" divides by the sum
    of the weights of the targets counted (PyTorch's). A target outside [0, C) adds 0 (PyTorch raises)."""
    Y = self._target(Y, "nll_loss")
    ax = 1 if self.ndim > 1 else 0
    if reduction not in ("mean", "sum", "none"): _err(ValueError, f"reduction must be one of 'mean', 'sum', 'none', got {reduction!r}")
    if Y.dtype.is_float or Y.shape != self.shape[:ax] + self.shape[ax + 1:]:
      _err(ValueError, f"nll_loss: target {Y.shape} {Y.dtype} does not fit {self.shape}")
    oh = Y._one_hot(C := self.shape[ax], ax)
    w = Y._full(Y.shape, 1, self.dtype) if weight is None else oh.where(weight.reshape((C,) + (1,) * (self.ndim - ax - 1)), 0).sum(ax)
    if ignore_index is not None: w = Y.ne(ignore_index).where(w, 0)
    nll = -oh.where(self, 0).sum(ax) * w
    return nll.sum() / w.sum() if reduction == "mean" else nll._do_reduction(reduction)
  def binary_crossentropy(self, Y, reduction: str = "mean") -> Self:
    """Probabilities against targets; each log is clamped at -100 (PyTorch's), so p = 0 or 1 gives no inf or NaN."""
    Y = self._target(Y, "binary_crossentropy")
    return (-Y * self.log().maximum(-100) - (1 - Y) * (1 - self).log().maximum(-100))._do_reduction(reduction)
  def binary_crossentropy_logits(self, Y, reduction: str = "mean", pos_weight=None) -> Self:
    """Logits against targets, through logsigmoid (no overflow); pos_weight scales the positive term (tinygrad's)."""
    Y = self._target(Y, "binary_crossentropy_logits")
    pos = Y * self.logsigmoid()
    return (-((pos if pos_weight is None else pos_weight * pos) + (1 - Y) * (-self).logsigmoid()))._do_reduction(reduction)

  # ---- movement
  def _dim(self, d: int, extra: int = 0) -> int:
    n = len(self.shape) + extra
    if d.__class__ is int and -n <= d < n: return d + n if d < 0 else d   # the common case
    if not isinstance(d, (int, np.integer)): _err(TypeError, f"dimension must be an int, got {type(d).__name__}")
    if not (-max(n, 1) <= d < max(n, 1)): _err(IndexError, f"dimension out of range (expected to be in range of [{-max(n, 1)}, {max(n, 1) - 1}], but got {d})")
    return d + n if d < 0 else d
  def reshape(self, shape, *args) -> Self:
    if args or shape.__class__ is not tuple: shape = _argfix(shape, *args)
    if _NONE in map(type, shape): shape = tuple(s if s is not None else self.shape[i] for i, s in enumerate(shape))
    if _plain(shape) and type(n := self._node.size) is int and math.prod(shape) == n:   # the common case
      return self if shape == self.shape else self._op(Ops.RESHAPE, shape)
    if any(not isinstance(s, (int, np.integer, U.UOp)) or not isinstance(s, U.UOp) and s < -1 for s in shape) or shape.count(-1) > 1:
      _err(ValueError, f"invalid shape {shape}")
    shape = tuple(_sz(s) if isinstance(s, U.UOp) else int(s) for s in shape)
    n = U.sym_val(self.numel())   # a symbolic size is checked at its bound value
    if -1 in shape:
      rest = _prod(s for s in shape if s != -1)
      if U.sym_val(rest) == 0 or n % U.sym_val(rest): _err(ValueError, f"shape {shape} is invalid for input of size {n}")
      shape = tuple(U.salu(Ops.IDIV, self.numel(), rest) if s == -1 else s for s in shape)
    if U.sym_val(_prod(shape)) != n: _err(ValueError, f"shape {shape} is invalid for input of size {n}")
    return self if shape == self.shape else self._op(Ops.RESHAPE, shape)
  view = reshape
  def _broadcast_to(self, shape: tuple[int, ...]) -> Self:
    if (sh := self.shape) == shape: return self
    if len(shape) < len(sh) or any(s != 1 and s != t for s, t in zip(sh[::-1], shape[::-1])):
      _err(ValueError, f"cannot broadcast {sh} to {shape}")
    return self._expanded(_shape(shape))   # the only movement op besides pad that makes more elements
  def expand(self, shape, *args) -> Self:
    shape = _argfix(shape, *args)
    if len(shape) < self.ndim: _err(ValueError, f"cannot expand {self.shape} to {shape}: fewer dimensions")
    old = (None,) * (len(shape) - self.ndim) + self.shape
    return self._broadcast_to(tuple(o if s == -1 and o is not None else s for o, s in zip(old, shape)))
  def broadcast_to(self, shape) -> Self: return self.expand(shape)
  def expand_as(self, other: Self) -> Self: return self.expand(other.shape)
  def permute(self, order, *args) -> Self:
    order, n = _argfix(order, *args), len(self.shape)
    if not (_plain(order) and len(order) == n and max(order, default=0) < n and len(set(order)) == n):   # else: negative dims, errors
      order = tuple(self._dim(o) for o in order)
      if sorted(order) != list(range(n)): _err(ValueError, f"{order} is not a permutation of the {n} dims of {self.shape}")
    return self._permuted(order)
  def pad(self, padding, mode: str = "constant", value=0.0) -> Self:
    """padding: (before, after) or None per dim, or PyTorch's flat (left, right, top, bottom, ...) starting at the last dim.
    Negative padding cuts, as in PyTorch."""
    if mode not in ("constant", "reflect", "replicate", "circular"):
      _err(NotImplementedError, f"pad mode {mode!r} is not supported ('constant', 'reflect', 'replicate' or 'circular')")
    if not isinstance(padding, (tuple, list)): _err(TypeError, f"padding must be a tuple or list, got {type(padding).__name__}")
    if all(isinstance(p, (int, np.integer)) for p in padding):
      if len(padding) % 2 or len(padding) > 2 * self.ndim: _err(ValueError, f"flat padding {tuple(padding)} must have an even length <= {2 * self.ndim}")
      pads = ((0, 0),) * (self.ndim - len(padding) // 2) + tuple(zip(padding[-2::-2], padding[::-2]))
    else:
      if len(padding) != self.ndim: _err(ValueError, f"padding {tuple(padding)} needs one entry per dim of {self.shape}")
      pads = tuple((0, 0) if p is None else tuple(p) if isinstance(p, (tuple, list)) else (p,) for p in padding)
    if any(len(p) != 2 for p in pads): _err(ValueError, f"invalid padding {tuple(padding)}")
    if any(not isinstance(v, (int, np.integer, U.UOp)) or isinstance(v, (bool, np.bool_)) for p in pads for v in p):
      _err(TypeError, f"padding {tuple(padding)} must hold ints or bound sizes")
    # a symbolic width (a bound size, as a setitem along a symbolic dim makes) pads with zeros and may not cut
    if any(isinstance(v, U.UOp) and (U.sym_val(_sz(v, "pad width")) < 0 or mode != "constant") for p in pads for v in p):
      _err(ValueError, f"padding {pads}: a symbolic width must be a bound size >= 0, in constant mode")
    pads = tuple(tuple(v if isinstance(v, U.UOp) else int(v) for v in p) for p in pads)
    if any(U.sym_val(s) + U.sym_val(b) + U.sym_val(a) < 0 for s, (b, a) in zip(self.shape, pads)):
      _err(ValueError, f"padding {pads} cuts more than {self.shape}")
    if mode != "constant": return self._pad_mode(pads, mode)
    cut = lambda v: min(v, 0) if isinstance(v, int) else 0
    x = self.shrink(tuple((-cut(b), U.sadd(s, cut(a))) for s, (b, a) in zip(self.shape, pads)))
    pads = tuple(tuple(v if isinstance(v, U.UOp) else max(v, 0) for v in p) for p in pads)
    if all(p == (0, 0) for p in pads): return x
    ret = x._op(Ops.PAD, _shape(tuple(U.sadd(U.sadd(s, b), a) for s, (b, a) in zip(x.shape, pads))), padding=tuple(v for p in pads for v in p))
    if value == 0: return ret
    return self._full(x.shape, True, dtypes.bool).pad(pads).where(ret, self._const(value, self.dtype))  # the padded region holds `value`
  def shrink(self, arg) -> Self:
    if len(arg) != self.ndim: _err(ValueError, f"shrink {tuple(arg)} needs one entry per dim of {self.shape}")
    bnd = lambda x: _sz(x, "shrink bound") if isinstance(x, U.UOp) else int(x)
    arg = tuple((0, s) if a is None else (bnd(a[0]), bnd(a[1])) for s, a in zip(self.shape, arg))
    if any(not (0 <= U.sym_val(b) <= U.sym_val(e) <= U.sym_val(s)) for s, (b, e) in zip(self.shape, arg)):
      _err(ValueError, f"invalid shrink {arg} of {self.shape}")
    if all(a == (0, s) for s, a in zip(self.shape, arg)): return self
    return self._op(Ops.SHRINK, tuple(U.ssub(e, b) for b, e in arg), bounds=tuple(v for a in arg for v in a))
  def flip(self, axis, *args) -> Self:
    axes = tuple(self._dim(a) for a in _argfix(axis, *args))
    if len(set(axes)) != len(axes): _err(ValueError, f"dim appears multiple times in {axes}")
    if self.ndim == 0: return self   # a 0-d tensor accepts dim 0/-1, as in PyTorch
    axes = tuple(sorted(a for a in axes if isinstance(self.shape[a], U.UOp) or self.shape[a] > 1))  # flipping a size-0/1 dim is a no-op
    return self._op(Ops.FLIP, self.shape, axes=axes) if axes else self
  def transpose(self, dim0: int = 1, dim1: int = 0) -> Self:
    d0, d1 = self._dim(dim0), self._dim(dim1)
    if self.ndim == 0: return self   # a 0-d tensor accepts dims 0/-1, as in PyTorch
    order = list(range(self.ndim))
    order[d0], order[d1] = order[d1], order[d0]
    return self.permute(order)
  @property
  def T(self) -> Self: return self.permute(tuple(range(self.ndim))[::-1])
  def squeeze(self, dim: int | None = None) -> Self:
    if dim is None: return self.reshape(tuple(s for s in self.shape if s != 1))
    if self.ndim == 0: self._dim(dim); return self
    d = self._dim(dim)
    return self if self.shape[d] != 1 else self.reshape(self.shape[:d] + self.shape[d + 1:])
  def unsqueeze(self, dim: int) -> Self:
    d = self._dim(dim, extra=1)
    return self.reshape(self.shape[:d] + (1,) + self.shape[d:])
  def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Self:
    if self.ndim == 0: return self.reshape(1)
    s, e = self._dim(start_dim), self._dim(end_dim)
    return self.reshape(self.shape[:s] + (_prod(self.shape[s:e + 1]),) + self.shape[e + 1:])
  def unflatten(self, dim: int, sizes) -> Self:
    d = self._dim(dim)
    return self.reshape(self.shape[:d] + tuple(sizes) + self.shape[d + 1:])
  def __getitem__(self, idx) -> Self:
    """Basic indexing: ints, slices (any step, negative included), None and Ellipsis."""
    bounds, flips, steps, out = _basic_plan(self.shape, idx if isinstance(idx, tuple) else (idx,))
    x = self.shrink(bounds).flip(flips) if flips else self.shrink(bounds)
    for d, st in enumerate(steps):  # stride: pad to a multiple of st, split the dim into (n, st), keep column 0
      if st == 1: continue
      n = -(-x.shape[d] // st)
      x = x.pad(tuple((0, n * st - x.shape[d]) if j == d else None for j in range(x.ndim)))
      x = x.reshape(x.shape[:d] + (n, st) + x.shape[d + 1:]).shrink(tuple((0, 1) if j == d + 1 else None for j in range(x.ndim + 1)))
      x = x.reshape(x.shape[:d] + (n,) + x.shape[d + 2:])
    return x.reshape(tuple(out))
  def _basic_put(self, shape: tuple, idx: tuple) -> Self:
    """self (shaped as x[idx] for an x of shape `shape`) moved to where x[idx] reads it, 0 (False) elsewhere: the movement
    of __getitem__ undone, movement ops only (a setitem's value and mask)."""
    bounds, flips, steps, _ = _basic_plan(shape, idx)
    v = self.reshape(tuple(U.ssub(hi, lo) if st == 1 else -(-(hi - lo) // st) for (lo, hi), st in zip(bounds, steps)))
    for d, st in enumerate(steps):  # each kept element back to the front of its stride of st
      if st == 1: continue
      n, keep = v.shape[d], bounds[d][1] - bounds[d][0]
      v = v.reshape(v.shape[:d] + (n, 1) + v.shape[d + 1:]).pad(tuple((0, st - 1) if j == d + 1 else None for j in range(v.ndim + 1)))
      v = v.reshape(v.shape[:d] + (n * st,) + v.shape[d + 2:])
      v = v.shrink(tuple((0, keep) if j == d else None for j in range(v.ndim)))
    if flips: v = v.flip(flips)
    return v.pad(tuple((lo, U.ssub(s, hi)) for (lo, hi), s in zip(bounds, shape)))

  # ---- joining, splitting and layout: compositions of movement ops only (tinygrad's way), no data-dependent loads
  def _static(self, d: int, what: str) -> int:
    if self.ndim == 0: _err(IndexError, f"{what} needs a tensor with at least one dimension (dim out of range), got a 0-d tensor")
    if not isinstance(s := self.shape[d], int): _err(TypeError, f"{what} needs a static size in dim {d}, got symbolic {s!r}")
    return s
  def cat(self, *args: Self, dim: int = 0) -> Self:
    """PyTorch's cat: each input padded into the output's extent along dim, then merged by where (exact for -0.0 and NaN).
    Also callable as Tensor.cat(a, b) or Tensor.cat([a, b]). A 1-d empty tensor among tensors of another rank is skipped
    (PyTorch's rule), its dtype still promoted with the others'."""
    if isinstance(self, (list, tuple)) and args: _err(ValueError, "cat takes tensors, or one sequence of them, not both")
    ts = (*self, *args) if isinstance(self, (list, tuple)) else (self, *args)
    if not ts or not all(isinstance(t, OpMixin) for t in ts): _err(TypeError, "cat expects a non-empty sequence of tensors")
    dt = least_upper_dtype(*(t.dtype for t in ts))
    if any(t.ndim != 1 for t in ts): ts = tuple(t for t in ts if t.shape != (0,))
    x = ts[0]
    d = x._dim(dim)
    for i, t in enumerate(ts[1:], 1):
      if t.ndim != x.ndim: _err(ValueError, f"cat: tensors must have the same number of dimensions, got {x.ndim} and {t.ndim} for tensor {i}")
      if bad := [j for j, (a, b) in enumerate(zip(x.shape, t.shape)) if j != d and a != b]:
        _err(ValueError, f"cat: sizes of tensors must match except in dimension {d}: expected size {x.shape[bad[0]]} but got size "
                         f"{t.shape[bad[0]]} for tensor {i} in dimension {bad[0]}")
    if len(ts) == 1: return x.cast(dt)
    sizes = [t._static(d, "cat") for t in ts]
    total, ret, off = sum(sizes), None, 0
    for t, n in zip(ts, sizes):
      if n:
        pad = tuple((off, total - off - n) if j == d else None for j in range(x.ndim))
        p = t.cast(dt).pad(pad)
        ret = p if ret is None else t._full(t.shape, True, dtypes.bool).pad(pad).where(p, ret)
      off += n
    return ret if ret is not None else x._full(x.shape[:d] + (0,) + x.shape[d + 1:], 0, dt)
  def stack(self, *args: Self, dim: int = 0) -> Self:
    if isinstance(self, (list, tuple)) and args: _err(ValueError, "stack takes tensors, or one sequence of them, not both")
    ts = (*self, *args) if isinstance(self, (list, tuple)) else (self, *args)
    if not ts or not all(isinstance(t, OpMixin) for t in ts): _err(TypeError, "stack expects a non-empty sequence of tensors")
    if bad := [i for i, t in enumerate(ts) if t.shape != ts[0].shape]:
      _err(ValueError, f"stack expects each tensor to be equal size, but got {ts[0].shape} at entry 0 and {ts[bad[0]].shape} at entry {bad[0]}")
    d = ts[0]._dim(dim, extra=1)
    return ts[0].unsqueeze(d).cat(*(t.unsqueeze(d) for t in ts[1:]), dim=d)
  def split(self, sizes, dim: int = 0) -> tuple[Self, ...]:
    """PyTorch's split: chunks of `sizes` elements (the last one smaller), or exactly the given sizes."""
    d = self._dim(dim)
    n = self._static(d, "split")
    if _isint(sizes):
      if sizes < 0 or sizes == 0 and n: _err(ValueError, f"split_size must be positive for a dim of size {n}, got {sizes}")
      sizes = [min(sizes, n - i) for i in range(0, n, sizes)] if n else [0]
    elif not isinstance(sizes, (list, tuple)) or any(not _isint(s) for s in sizes):
      _err(TypeError, f"split sizes must be an int or a list of ints, got {sizes!r}")
    if any(s < 0 for s in sizes) or sum(sizes) != n:
      _err(ValueError, f"split sizes {list(sizes)} must be non-negative and sum exactly to {n} (the size of dim {d})")
    offs = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
    return tuple(self.shrink(tuple((offs[i], offs[i + 1]) if j == d else None for j in range(self.ndim))) for i in range(len(sizes)))
  def chunk(self, chunks: int, dim: int = 0) -> tuple[Self, ...]:
    """PyTorch's chunk: splits of ceil(size/chunks) elements, so there may be fewer than `chunks` pieces."""
    if not _isint(chunks) or chunks <= 0:
      _err(ValueError, f"chunk expects `chunks` to be a positive int, got {chunks!r}")
    d = self._dim(dim)
    n = self._static(d, "chunk")
    return self.split(-(-n // chunks) if n else [0] * chunks, d)
  def repeat(self, repeats, *args) -> Self:
    """PyTorch's repeat (numpy's tile): one expand of a broadcast axis put before each dim."""
    reps = _argfix(repeats, *args)
    if any(not _isint(r) for r in reps): _err(TypeError, f"repeats must be ints, got {reps}")
    if len(reps) < self.ndim:
      _err(ValueError, f"number of dimensions of repeat dims ({len(reps)}) can not be smaller than number of dimensions of tensor ({self.ndim})")
    if any(r < 0 for r in reps): _err(ValueError, f"repeats can not be negative, got {tuple(reps)}")
    base = (1,) * (len(reps) - self.ndim) + self.shape
    x = self.reshape(tuple(v for s in base for v in (1, s))).expand(tuple(v for r, s in zip(reps, base) for v in (r, s)))
    return x.reshape(tuple(U.smul(s, r) if isinstance(s, U.UOp) else r * s for r, s in zip(reps, base)))
  def repeat_interleave(self, repeats: int, dim: int | None = None) -> Self:
    """Each element `repeats` times along dim (flattened when dim is None)."""
    if not _isint(repeats): _err(TypeError, f"repeats must be an int, got {repeats!r}")
    if repeats < 0: _err(ValueError, f"repeats can not be negative, got {repeats}")
    x, d = (self.flatten(), 0) if dim is None else (self, self._dim(dim))
    sh = x.shape
    x = x.reshape(sh[:d + 1] + (1,) + sh[d + 1:]).expand(sh[:d + 1] + (repeats,) + sh[d + 1:])
    return x.reshape(sh[:d] + (x._static(d, "repeat_interleave") * repeats,) + sh[d + 1:])
  def roll(self, shifts, dims=None) -> Self:
    """PyTorch's roll: the dim repeated twice, then the window starting at size - shift (flattened when dims is None)."""
    if dims is None: return self.flatten().roll(shifts, 0).reshape(self.shape)
    dims, shifts = (dims if isinstance(dims, (tuple, list)) else (dims,)), (shifts if isinstance(shifts, (tuple, list)) else (shifts,))
    if len(dims) != len(shifts): _err(ValueError, f"shifts and dimensions must align, got shifts={tuple(shifts)}, dims={tuple(dims)}")
    if any(not _isint(s) for s in shifts): _err(TypeError, f"shifts must be ints, got {shifts}")
    ds = [self._dim(d) for d in dims]
    shift = {d: 0 for d in ds}
    for d, s in zip(ds, shifts): shift[d] += int(s)   # a dim named twice shifts twice, as in PyTorch
    shift = {d: s % n for d, s in shift.items() if (n := self._static(d, "roll")) and s % n}
    if not shift: return self
    x = self.repeat(tuple(2 if i in shift else 1 for i in range(self.ndim)))
    return x.shrink(tuple((n - shift[i], 2 * n - shift[i]) if i in shift else None for i, n in enumerate(self.shape)))
  def pad_to(self, shape, *args) -> Self:
    """Zero-pad at the end of each dim up to shape (None keeps a dim)."""
    shape = _argfix(shape, *args)
    if len(shape) != self.ndim: _err(ValueError, f"pad_to: shape {tuple(shape)} needs {self.ndim} dims to match {self.shape}")
    if any(n is not None and (not isinstance(n, int) or not isinstance(s, int)) for s, n in zip(self.shape, shape)):
      _err(TypeError, f"pad_to needs static sizes, got {tuple(shape)} for {self.shape}")
    if any(n is not None and n < s for s, n in zip(self.shape, shape)): _err(ValueError, f"pad_to: {tuple(shape)} is smaller than {self.shape}")
    return self.pad(tuple(None if n is None else (0, n - s) for s, n in zip(self.shape, shape)))
  def unfold(self, dim: int, size: int, step: int) -> Self:
    """PyTorch's unfold: windows of `size` every `step` along dim, as a new last dim (the window view of _pool)."""
    d = self._dim(dim)
    n = self._static(d, "unfold") if self.ndim else 1
    if any(not _isint(v) for v in (size, step)): _err(TypeError, "unfold: size and step must be ints")
    if size < 0: _err(ValueError, f"unfold: size must be >= 0, got {size}")
    if step <= 0: _err(ValueError, f"unfold: step must be > 0, got {step}")
    if size > n: _err(ValueError, f"unfold: maximum size for tensor at dimension {d} is {n} but size is {size}")
    if self.ndim == 0: return self.reshape(1)
    if size == 0:   # empty windows, taken from self so that gradients reach it (as zeros)
      empty = self.unsqueeze(-1).shrink(tuple((0, s) for s in self.shape) + ((0, 0),))
      return empty.reshape(self.shape[:d] + (n // step + 1,) + self.shape[d + 1:] + (0,))
    last = tuple(i for i in range(self.ndim) if i != d) + (d,)
    return self.permute(last)._pool((size,), step).permute(*range(d), self.ndim - 1, *range(d, self.ndim - 1), self.ndim)
  def meshgrid(self, *args: Self, indexing: str = "ij") -> tuple[Self, ...]:
    """PyTorch's meshgrid of 0-d or 1-d tensors: each one reshaped along its own axis and broadcast to the grid."""
    if indexing not in ("ij", "xy"): _err(ValueError, f"indexing must be 'ij' or 'xy', got {indexing!r}")
    ts = (*self, *args) if isinstance(self, (list, tuple)) else (self, *args)
    if not ts or not all(isinstance(t, OpMixin) for t in ts): _err(TypeError, "meshgrid expects a non-empty sequence of tensors")
    if bad := [t.shape for t in ts if t.ndim > 1]: _err(ValueError, f"meshgrid expects 0-d or 1-d tensors, got shape {bad[0]}")
    ts = tuple(t.reshape(-1) for t in ts)
    axes = list(range(len(ts)))
    if indexing == "xy" and len(ts) > 1: axes[0], axes[1] = 1, 0
    shape = [None] * len(ts)
    for a, t in zip(axes, ts): shape[a] = t.shape[0]
    return tuple(t.reshape(tuple(t.shape[0] if i == a else 1 for i in range(len(ts)))).expand(tuple(shape)) for a, t in zip(axes, ts))
  def diag(self) -> Self:
    """1-d -> the square matrix with it on the diagonal (each element padded with n zeros, flattened, cut to n*n);
    2-d -> its main diagonal, as PyTorch."""
    if self.ndim == 2: return self.diagonal()
    if self.ndim != 1: _err(ValueError, f"diag expects a 1-d or 2-d tensor, got {self.ndim}-d")
    n = self._static(0, "diag")
    return self.unsqueeze(-1).pad((None, (0, n))).flatten().shrink(((0, n * n),)).reshape(n, n)
  def diagonal(self) -> Self:
    """The main diagonal of a 2-d tensor: rows of min(n, m) padded by one more, so that column 0 walks the diagonal."""
    if self.ndim != 2: _err(ValueError, f"diagonal expects a 2-d tensor, got {self.ndim}-d")
    k = min(self._static(0, "diagonal"), self._static(1, "diagonal"))
    return self.shrink(((0, k), (0, k))).flatten().pad(((0, k),)).reshape(k, k + 1).shrink((None, (0, 1))).reshape(k)
  def _tri(self, r: int, c: int, diagonal: int = 0) -> Self:
    """The bool mask j - i >= diagonal of shape (r, c), by movement only (tinygrad's): rows of ones padded by s and cut
    so that row i starts i places later, which for both Tensor and UOp needs no arange."""
    if diagonal >= c or r == 0 or c == 0: return self._full((r, c), False, dtypes.bool)
    if r + diagonal <= 0: return self._full((r, c), True, dtypes.bool)
    s = r + c - 1
    t = self._full((s, s), True, dtypes.bool).pad((None, (0, s))).flatten().shrink(((0, s * (2 * s - 1)),)).reshape(s, 2 * s - 1)
    t = t.shrink((None, (0, s)))
    return t.shrink(((0, r), (-diagonal, c - diagonal))) if diagonal <= 0 else t.shrink(((diagonal, r + diagonal), (0, c)))
  def _mat(self, what: str) -> tuple[int, int]:
    if self.ndim < 2: _err(ValueError, f"{what} expects a tensor with at least 2 dims, got {self.ndim}-d")
    return self._static(self.ndim - 2, what), self._static(self.ndim - 1, what)
  def triu(self, diagonal: int = 0) -> Self:
    """Zero below the diagonal-th diagonal of the last two dims (a mask built by movement, then where)."""
    return self._tri(*self._mat("triu"), _diag(diagonal)).where(self, self._const(0, self.dtype))
  def tril(self, diagonal: int = 0) -> Self:
    """Zero above the diagonal-th diagonal of the last two dims."""
    return self._tri(*self._mat("tril"), _diag(diagonal) + 1).where(self._const(0, self.dtype), self)
  def _pad_mode(self, pads: tuple[tuple[int, int], ...], mode: str) -> Self:
    """reflect / replicate / circular padding (PyTorch's), dim by dim: the pieces before and after are shrinks (flipped
    for reflect, expanded for replicate) joined by cat. As in PyTorch, negative pads cut after reflect and replicate padding
    (out[j] = self[f(j - before)] along each dim: reflect (1, -2) of [a, b, c] is [b, a]) but before circular padding
    (circular (1, -1) of [a, b, c] is [b, a, b])."""
    cut = lambda t: t.shrink(tuple((-min(b, 0), U.sadd(s, min(a, 0))) for s, (b, a) in zip(t.shape, pads)))
    x = cut(self) if mode == "circular" else self
    for d, (b, a) in enumerate((max(b, 0), max(a, 0)) for b, a in pads):
      if b == a == 0: continue
      n = x._static(d, f"{mode} padding")
      if mode == "reflect" and (b >= n or a >= n):
        _err(ValueError, f"padding size should be less than the corresponding input dimension, but got padding ({b}, {a}) at dimension {d} "
                         f"of input {x.shape}")
      if mode == "replicate" and n == 0: _err(ValueError, f"replicate padding of dimension {d} of input {x.shape}, which is empty")
      if mode == "circular" and (b > n or a > n): _err(ValueError, f"padding ({b}, {a}) at dimension {d} wraps around input {x.shape} more than once")
      piece = lambda lo, hi: x.shrink(tuple((lo, hi) if j == d else None for j in range(x.ndim)))
      grow = lambda t, k: t.expand(tuple(k if j == d else s for j, s in enumerate(t.shape)))
      if mode == "reflect": pb, pa = piece(1, b + 1).flip(d), piece(n - 1 - a, n - 1).flip(d)
      elif mode == "replicate": pb, pa = grow(piece(0, 1), b), grow(piece(n - 1, n), a)
      else: pb, pa = piece(n - b, n), piece(0, a)
      x = pb.cat(x, pa, dim=d)
    return x if mode == "circular" else cut(x)

  def gather(self, dim: int, index: Self) -> Self:
    """out[i] = self[i with dim `dim` replaced by index[i]] (PyTorch's gather): index has self's rank and an integer dtype,
    no dim larger than self's but `dim`. O(out) reads through the loaded indices; an index outside [0, self.shape[dim])
    gives 0, as in tinygrad: the load is gated and never reads outside the buffer (PyTorch raises instead)."""
    d = self._indexed_dim("gather", dim, index)
    if self.ndim == 0: return self.reshape(1).gather(0, index.reshape(1)).reshape(())
    return self._op(Ops.GATHER, index.shape, self.dtype, (index,), axis=d)
  def _indexed_dim(self, what: str, dim: int, index) -> int:
    """dim, checked for indexing self along it with index (PyTorch's rules for gather and scatter)."""
    if not isinstance(index, OpMixin) or not (index.dtype.is_int or index.dtype is dtypes.index):
      _err(TypeError, f"{what} needs an integer index tensor, got {getattr(index, 'dtype', type(index).__name__)}")
    d = self._dim(dim)
    if index.ndim != self.ndim: _err(ValueError, f"{what}: index {index.shape} needs the rank of {self.shape}")
    if any(not isinstance(s, int) for s in self.shape + index.shape): _err(TypeError, f"{what} needs static sizes")
    if any(j != d and x > y for j, (x, y) in enumerate(zip(index.shape, self.shape))):
      _err(ValueError, f"{what}: index {index.shape} is larger than {self.shape} outside dim {d}")
    return d

  def _scatter(self, dim: int, index: Self, src, op: str) -> Self:
    """The scatter primitive after PyTorch's checks: src (a scalar, or a tensor at least index's size in every dim, of
    which index's leading block is used) cast to self's dtype."""
    d = self._indexed_dim("scatter", dim, index)
    if isinstance(src, OpMixin):
      if src.ndim != self.ndim or any(x > y for x, y in zip(index.shape, src.shape)):
        _err(ValueError, f"scatter: src {src.shape} must have self's rank and be at least index {index.shape} in every dim")
      src = src.shrink(tuple((0, n) for n in index.shape)).cast(self.dtype)
    elif isinstance(src, (bool, int, float, np.generic)): src = self._full(index.shape, _cv(src, self.dtype), self.dtype)
    else: _err(TypeError, f"scatter takes a tensor or a number as src, got {type(src).__name__}")
    return self if index.numel() == 0 else self._op(Ops.SCATTER, self.shape, self.dtype, (index, src), axis=d, op=op)
  def scatter(self, dim: int, index: Self, src, reduce: str | None = None) -> Self:
    """self with self[i with dim `dim` replaced by index[i]] = src[i] for every position i of index (PyTorch's scatter;
    src a tensor or a number). Duplicate indices: the last in index's row-major order wins (PyTorch leaves it
    undefined); reduce='add'|'multiply' combines instead. An index outside [0, self.shape[dim]) writes nothing (PyTorch
    raises). A data-dependent store: O(self + index) work, whatever the size of dim."""
    if reduce not in (None, "add", "multiply"): _err(ValueError, f"scatter reduce must be None, 'add' or 'multiply', got {reduce!r}")
    return self._scatter(dim, index, src, {None: "store", "add": "add", "multiply": "mul"}[reduce])
  def scatter_reduce(self, dim: int, index: Self, src, reduce: str, include_self: bool = True) -> Self:
    """PyTorch's scatter_reduce: every src value folds into self at its index with reduce = sum|prod|mean|amax|amin;
    without include_self the indexed elements start from the reduction's identity instead of self's value (elements no
    index names keep self's). mean divides by the number of values folded in (floor division for integers, as
    PyTorch). An index outside [0, self.shape[dim]) contributes nothing."""
    if reduce not in _SCATTER_REDUCE: _err(ValueError, f"scatter_reduce reduce must be one of {', '.join(_SCATTER_REDUCE)}, got {reduce!r}")
    op, d = _SCATTER_REDUCE[reduce], self._dim(dim)
    hit = None if include_self else self._full(self.shape, False, dtypes.bool)._scatter(d, index, True, "store")
    base = self if hit is None else hit.where(self._const(0 if reduce == "mean" else REDUCE_IDENTITY[op](self.dtype), self.dtype), self)
    out = base._scatter(d, index, src, op)
    if reduce != "mean": return out
    n = self._full(self.shape, int(include_self), dtypes.int32)._scatter(d, index, 1, "add")
    m = n.maximum(1).cast(self.dtype)   # 0 only where the where below keeps self: no 0/0, in values or in gradients
    q = out.div(m) if self.dtype.is_float else out.floordiv(m)
    return q if include_self else n.eq(0).where(self, q)

  # ---- reductions and matmul
  def _axes(self, axis) -> tuple[int, ...]:
    if axis is None: return tuple(range(self.ndim))
    if axis.__class__ is int and -(n := len(self.shape)) <= axis < n: return (axis + n if axis < 0 else axis,)   # one dim
    axes = tuple(self._dim(a) for a in (axis if isinstance(axis, (tuple, list)) else (axis,)))
    if len(set(axes)) != len(axes): _err(ValueError, f"dim appears multiple times in {tuple(axis)}")
    return tuple(sorted(a for a in axes if self.ndim))  # a 0-d tensor accepts axis 0/-1 and reduces nothing
  def _reduce(self, op: Ops, axis=None, keepdim=False) -> Self:
    axes = self._axes(axis)
    kept = tuple(1 if i in axes else s for i, s in enumerate(self.shape))
    out = kept if keepdim else tuple(s for i, s in enumerate(self.shape) if i not in axes)
    if self.dtype.is_bool and op is not Ops.ADD: return self.cast(dtypes.uint8)._reduce(op, axis, keepdim).cast(dtypes.bool)  # no i1 ordering
    if not axes: return self._reshaped(out)
    if 0 in self.shape and 0 not in kept:   # empty reduce: the identity, from self's (empty) elements so that gradients reach self
      return self.reshape(-1).pad(((0, 1),), value=REDUCE_IDENTITY[op](self.dtype)).reshape((1,) * len(out)).expand(out)
    return self._op(Ops.REDUCE_AXIS, kept, op=op, axes=axes)._reshaped(out)
  def _accumulated(self, fn, dtype) -> Self:
    """fn of self cast to its accumulation dtype (_sum_acc, or dtype); float16/bfloat16 are rounded back once at the end."""
    ret = fn(self._cast(_sum_acc(self.dtype) if dtype is None else _dtype(dtype)))
    return ret._cast(self.dtype) if dtype is None and _narrow_float(self.dtype) else ret
  def sum(self, axis=None, keepdim=False, dtype=None) -> Self: return self._accumulated(lambda x: x._reduce(Ops.ADD, axis, keepdim), dtype)
  def prod(self, axis=None, keepdim=False, dtype=None) -> Self: return self._accumulated(lambda x: x._reduce(Ops.MUL, axis, keepdim), dtype)
  def _nonempty(self, axis, what: str):
    """max/min have no identity: reducing an empty dim raises, as in PyTorch (numpy too), instead of giving -inf/inf."""
    if axis is None and self.ndim and 0 in self.shape: _err(ValueError, f"{what}() of an empty tensor {self.shape}: give the dim to reduce")
    if bad := [a for a in self._axes(axis) if self.shape[a] == 0]: _err(IndexError, f"{what}(): expected reduction dim {bad[0]} to have non-zero size")
  def max(self, axis=None, keepdim=False) -> Self:
    self._nonempty(axis, "max")
    return self._reduce(Ops.MAX, axis, keepdim)
  def min(self, axis=None, keepdim=False) -> Self:
    self._nonempty(axis, "min")
    return self._reduce(Ops.MIN, axis, keepdim)
  def any(self, axis=None, keepdim=False) -> Self: return self.bool()._reduce(Ops.MAX, axis, keepdim)
  def all(self, axis=None, keepdim=False) -> Self: return self.logical_not().any(axis, keepdim).logical_not()
  def mean(self, axis=None, keepdim=False, dtype=None) -> Self:
    """dtype: cast the input to this float dtype first (PyTorch's mean(dtype=))."""
    if dtype is not None:
      if not (dt := _dtype(dtype)).is_float: _err(TypeError, f"mean(): dtype must be a floating point dtype, got {dt}")
      return self.cast(dt).mean(axis, keepdim)
    if _stat_dtype(self.dtype) is not self.dtype: return self._widened_stat(lambda x: x.mean(axis, keepdim))
    return self.sum(axis, keepdim).div(self._count(axis, keepdim))
  def _widened_stat(self, fn) -> Self:
    """fn (mean, var or std) of self computed in _stat_dtype, returned in self's float dtype or, for ints, the default float."""
    return fn(self.cast(_stat_dtype(self.dtype))).cast(self.dtype if self.dtype.is_float else dtypes.default_float)
  def _count(self, axis, keepdim: bool, less: int = 0):
    """How many elements each reduce over axis folds, less `less` (at least 0): an int, or where a reduced size is
    symbolic an int32 count of the reduce's shape, a sum of ones in the reduce's own kernel. Its value is read at run
    time, so one compiled schedule serves every size, as for the sum it divides."""
    n = _prod(self.shape[a] for a in self._axes(axis))
    if not isinstance(n, U.UOp): return max(0, n - less)
    count = self._const(1, dtypes.int32)._broadcast_to(self.shape).sum(axis, keepdim, dtype=dtypes.int32)
    return (count - less).maximum(0) if less else count
  def var(self, axis=None, keepdim=False, correction=1) -> Self:
    if _stat_dtype(self.dtype) is not self.dtype: return self._widened_stat(lambda x: x.var(axis, keepdim, correction))
    return (self - self.mean(axis, keepdim=True)).square().sum(axis, keepdim).div(self._count(axis, keepdim, correction))
  def std(self, axis=None, keepdim=False, correction=1) -> Self:
    if _stat_dtype(self.dtype) is not self.dtype: return self._widened_stat(lambda x: x.std(axis, keepdim, correction))
    return self.var(axis, keepdim, correction).sqrt()
  def var_mean(self, axis=None, keepdim=False, correction=1) -> tuple[Self, Self]:
    """(var, mean), the mean being the node var subtracts (one graph, no second mean)."""
    v = self.var(axis, keepdim, correction)
    return v, self.mean(axis, keepdim=True).reshape(v.shape)
  def std_mean(self, axis=None, keepdim=False, correction=1) -> tuple[Self, Self]:
    return self.std(axis, keepdim, correction), self.var_mean(axis, keepdim, correction)[1]   # the same var node (UOps are shared)
  def _softmax(self, axis, dtype=None):
    x = self.cast(dtype) if dtype is not None else self._fl()   # in float: an unsigned x - max would wrap
    if _narrow_float(x.dtype): x = x.float()   # float16/bfloat16 run in float32, rounded once at the end (PyTorch)
    m = x - x._reduce(Ops.MAX, axis, keepdim=True)  # subtract the max: exp never overflows (an empty dim has no max to raise on)
    e = m.exp()
    return m, e, e.sum(axis, keepdim=True)
  def _narrowed(self, r: Self, dtype) -> Self:
    return r.cast(dt) if _narrow_float(dt := self.dtype if dtype is None else _dtype(dtype)) else r
  def softmax(self, axis=-1, dtype=None) -> Self:
    _, e, ss = self._softmax(axis, dtype)
    return self._narrowed(e / ss, dtype)
  def log_softmax(self, axis=-1, dtype=None) -> Self:
    m, _, ss = self._softmax(axis, dtype)
    return self._narrowed(m - ss.log(), dtype)
  @_f32
  def logsumexp(self, axis=None, keepdim=False) -> Self:
    """log(sum(exp(x))) shifted by the max; an infinite max shifts by 0 (x - inf would be NaN), an empty dim gives -inf."""
    x = self._fl()
    m = x._reduce(Ops.MAX, axis, keepdim=True)
    m = m.isinf().where(0.0, m)
    ret = (x - m).exp().sum(axis, keepdim).log()
    return ret + m.reshape(ret.shape)

  # ---- cumulative and ordering
  def _scan(self, op, block: int = 256) -> Self:
    """Inclusive scan along the last axis, O(n * block): a window reduce within blocks of `block` elements (each
    position sees the block-1 before it, identity-padded), then the exclusive scan of the block totals, recursively,
    combined in. op: Ops.ADD, Ops.MUL, Ops.MAX, or "lse" (log-add-exp)."""
    n, ident = self.shape[-1], {Ops.ADD: 0, Ops.MUL: 1, Ops.MAX: REDUCE_IDENTITY[Ops.MAX](self.dtype), "lse": -math.inf}[op]
    if n <= 2 * block:
      w = self.pad(((0, 0),) * (self.ndim - 1) + ((n - 1, 0),), value=ident)._pool((n,))
      if op == "lse":
        m = w.max(-1, keepdim=True)
        ms = m.isinf().where(0.0, m)   # an infinite max shifts by 0: exp(w - inf) would be NaN
        return (w - ms).exp().sum(-1).log() + ms.reshape(ms.shape[:-1])
      return w._reduce(op, -1)
    nb = -(-n // block)
    x = self.pad(((0, 0),) * (self.ndim - 1) + ((nb * block - n, 0),), value=ident).reshape(*self.shape[:-1], nb, block)._scan(op, block)
    base = x.shrink((None,) * (x.ndim - 1) + ((block - 1, block),)).reshape(x.shape[:-1])._scan(op, block)
    base = base.pad(((0, 0),) * (base.ndim - 1) + ((1, -1),), value=ident).unsqueeze(-1)   # exclusive: the totals of earlier blocks
    ret = x._combine(op, base._broadcast_to(x.shape))
    return ret.flatten(-2).shrink((None,) * (ret.ndim - 2) + ((nb * block - n, nb * block),))
  def _combine(self, op, y: Self) -> Self:
    if op != "lse": return {Ops.ADD: self.add, Ops.MUL: self.mul, Ops.MAX: self.maximum}[op](y)
    m = self.maximum(y)
    ms = m.isinf().where(0.0, m)
    return ((self - ms).exp() + (y - ms).exp()).log() + ms
  def _cumalu(self, axis, op) -> Self:
    if self.ndim == 0: self._dim(axis); return self
    d = self._dim(axis)
    if self._static(d, "cumulative op") == 0: return self
    return self.transpose(d, -1)._scan(op).transpose(d, -1)
  def cumsum(self, axis: int = 0) -> Self:
    """Running sum along axis in the dtype sum accumulates in (ints and bools in 64 bits, as sum), O(n * 256) work."""
    return self._accumulated(lambda x: x._cumalu(axis, Ops.ADD), None)
  def cumprod(self, axis: int) -> Self:
    """Running product by the same block structure as cumsum (exact for zeros and negatives), in prod's dtype."""
    return self._accumulated(lambda x: x._cumalu(axis, Ops.MUL), None)
  @_f32
  def logcumsumexp(self, axis: int = 0) -> Self:
    """log(cumsum(exp(x))), each block shifted by its max so that exp never overflows."""
    return self._fl()._cumalu(axis, "lse")
  def cummax(self, axis: int = 0) -> tuple[Self, Self]:
    """Running max and its index, as PyTorch: a tie or a NaN (which propagates) takes the latest index. The index is the
    running max of the positions where x reaches its running max, since the latest such position holds the max."""
    v = self._cumalu(axis, Ops.MAX)
    if self.ndim == 0 or 0 in self.shape: return v, self._full(self.shape, 0, dtypes.default_int)
    d = self._dim(axis)
    hit = self.eq(v) | self.isnan() if self.dtype.is_float else self.eq(v)
    idx = self._arange(self.shape[d]).reshape(tuple(s if i == d else 1 for i, s in enumerate(self.shape)))
    return v, hit.where(idx, 0)._cumalu(d, Ops.MAX)
  def sort(self, dim: int = -1, descending: bool = False) -> tuple[Self, Self]:
    """Sorted values and their original indices along dim: a bitonic network, O(n log^2 n). Stable (equal keys keep
    their order, also descending, as PyTorch's stable sort), NaN last ascending and first descending (NaN is largest).
    Every compare-exchange orders (key, index) pairs, so all elements are distinct and stability needs no extra pass.
    The axis is padded to a power of two with keys that sort after every real element: NaN (or the dtype's max)
    ascending, -inf (or the dtype's min) descending, their indices past the real ones breaking ties with equal keys."""
    if self.ndim == 0: self._dim(dim); return self, self._full((), 0, dtypes.default_int)
    d = self._dim(dim)
    n = self._static(d, "sort")
    if 0 in self.shape: return self, self._full(self.shape, 0, dtypes.default_int)   # nothing to order
    x, dt = self.transpose(d, -1), self.dtype
    if n > 1 << 24 and dt.is_float and dt.itemsize <= 4: _err(ValueError, f"sort of {n} elements: indices past 2^24 do not fit float32 exactly")
    # keys and indices travel as one (..., n, 2) tensor of a dtype that holds both exactly: one kernel per network stage
    pdt = dtypes.float64 if dt == dtypes.float64 else dtypes.float32 if dt.is_float else dt if dt.itemsize == 8 else \
          least_upper_dtype(dtypes.uint8 if dt.is_bool else dt, dtypes.int32)
    key, idx = x.cast(pdt), self._arange(n).cast(pdt)._broadcast_to(x.shape)
    k, fl, lead = max(n - 1, 0).bit_length(), pdt.is_float, x.shape[:-1]
    if k:
      fill = (-math.inf if fl else pdt.min) if descending else (math.nan if fl else pdt.max)
      pad = ((0, 0),) * (x.ndim - 1) + ((0, (1 << k) - n),)
      key, idx = key.pad(pad, value=fill), idx.pad(pad, value=n)
    p = key.unsqueeze(-1).cat(idx.unsqueeze(-1), dim=-1)
    col = lambda t, c: t.shrink((None,) * (t.ndim - 1) + ((c, c + 1),))
    def before(a, b):   # does pair a come before pair b? Descending swaps the keys, never the indices
      ka, ia, kb, ib = col(a, 0), col(a, 1), col(b, 0), col(b, 1)
      if descending: ka, kb = kb, ka
      lt, eq = ka.lt(kb), ka.eq(kb)
      if fl: lt, eq = lt | kb.isnan() & ka.isnan().logical_not(), eq | ka.isnan() & kb.isnan()
      return lt | eq & ia.lt(ib)
    lower = self._full((1,), True, dtypes.bool).pad(((0, 1),)).reshape(2, 1, 1)   # the first element of a pair
    for s in range(k):
      for j in range(s, -1, -1):   # element i meets its partner 2^j away, or at a stage's first step its mirror in the 2^(s+1) block
        q = p.reshape(*lead, -1, 2, 1 << j, 2)
        o = q.flip((-3, -2)) if j == s else q.flip(-3)
        # pairs are distinct and totally ordered: the lower element takes its partner when the partner comes first, the
        # upper one when it comes first itself; each element is one select of two loads (no halves joined by a cat)
        p = before(o, q).eq(lower).where(o, q).reshape(p.shape).contiguous()
    p = p.shrink((None,) * (x.ndim - 1) + ((0, n), None))
    vals, idx = (p.shrink((None,) * x.ndim + ((c, c + 1),)).reshape(p.shape[:-1]) for c in (0, 1))
    return vals.cast(dt).transpose(d, -1), idx.cast(dtypes.default_int).transpose(d, -1)
  def argsort(self, dim: int = -1, descending: bool = False) -> Self:
    """The indices that sort along dim, stable (numpy's kind="stable")."""
    return self.sort(dim, descending)[1]
  def topk(self, k: int, dim: int = -1, largest: bool = True, sorted_: bool = True) -> tuple[Self, Self]:
    """The k largest (or smallest) values along dim and their indices, in sorted order (also for sorted_=False, which
    allows any order): a sort, then a shrink to k."""
    if not _isint(k): _err(TypeError, f"topk: k must be an int, got {k!r}")
    d = self._dim(dim)
    n = self._static(d, "topk") if self.ndim else 1
    if not 0 <= k <= n: _err(IndexError, f"topk: selected index k={k} is out of range for dimension {d} of size {n}")
    v, i = self.sort(d, descending=largest)
    cut = tuple((0, k) if j == d else None for j in range(self.ndim))
    return v.shrink(cut), i.shrink(cut)

  # ---- matmul
  def dot(self, w: Self, dtype=None) -> Self:
    if not isinstance(w, OpMixin):   # not a tensor (an array): its own methods' errors, as the general form below meets them
      x, dx, dw = self, self.ndim, w.ndim
      if not (dx > 0 and dw > 0): _err(ValueError, f"both tensors need to be at least 1D, got {dx}D and {dw}D")
      if x.shape[-1] != w.shape[axis_w := -min(w.ndim, 2)]: _err(ValueError, f"cannot matmul {x.shape} and {w.shape}: {x.shape[-1]} != {w.shape[axis_w]}")
      x = x.reshape(*x.shape[0:-1], *[1] * min(dx - 1, dw - 1, 1), x.shape[-1])
      return x * w.reshape(*w.shape[0:-2], *[1] * min(dx - 1, dw - 1, 1), *w.shape[axis_w:]).transpose(-1, axis_w)
    xs, ws = self.shape, w.shape
    dx, dw = len(xs), len(ws)
    if not (dx > 0 and dw > 0): _err(ValueError, f"both tensors need to be at least 1D, got {dx}D and {dw}D")
    if xs[-1] != ws[axis_w := -min(dw, 2)]: _err(ValueError, f"cannot matmul {xs} and {ws}: {xs[-1]} != {ws[axis_w]}")
    one = (1,) * min(dx - 1, dw - 1, 1)
    x, w = self._reshaped(xs[:-1] + one + xs[-1:]), w._reshaped(ws[:-2] + one + ws[axis_w:])
    order = list(range(n := len(w.shape)))
    order[-1], order[n + axis_w] = order[n + axis_w], order[-1]
    w = w._permuted(tuple(order))   # its last two dims swapped (a vector's one stays)
    (x, w), acc, out = _contraction((x, w), dtype)
    return x._binop(Ops.MUL, w).sum(-1, dtype=acc)._cast(out)
  def matmul(self, x: Self, reverse=False, dtype=None) -> Self:
    return x.dot(self, dtype) if reverse else self.dot(x, dtype)
  def __matmul__(self, x) -> Self: return self.matmul(x)
  def __rmatmul__(self, x) -> Self: return self.matmul(x, True)

  # ---- functional nn: compositions of the ops above, tinygrad's names and signatures (PyTorch's where tinygrad follows it)
  def _pool_args(self, kernel_size, stride, dilation, padding, what: str, half: bool):
    """Kernel, stride (the kernel's by default), dilation and flat padding (last dim first, as pad takes it) of a pool
    over the last len(kernel_size) dims, checked as PyTorch checks them: padding at most half the (effective) kernel."""
    n = len(kernel_size) if isinstance(kernel_size, (tuple, list)) else 2
    k_ = _ints(kernel_size, n, "kernel_size", 1)
    s_, d_ = _ints(k_ if stride is None else stride, n, "stride", 1), _ints(dilation, n, "dilation", 1)
    p_ = _ints(padding, n, "padding", 0, (1, 2))
    if self.ndim < n: _err(ValueError, f"{what} with a {n}-d kernel needs an input with at least {n} dims, got {self.shape}")
    for i in range(n): self._static(self.ndim - n + i, what)
    pads = [p for p in p_ for _ in range(2)][::-1] if len(p_) == n else list(p_)
    for i, (k, d) in enumerate(zip(k_, d_)):
      if max(pads[2 * (n - 1 - i)], pads[2 * (n - 1 - i) + 1]) > (k // 2 if half else (d * (k - 1) + 1) // 2):
        _err(ValueError, f"{what}: pad should be at most half of {'kernel' if half else 'effective kernel'} size, but got padding={padding}, "
                         f"kernel_size={kernel_size}" + f" and dilation={dilation}" * (not half))
    return k_, s_, d_, pads
  def _ceil_pads(self, pads: list[int], k_, s_, d_) -> list[int]:
    """Extra padding after each dim for ceil_mode (tinygrad's): room for a last partial window, unless it would start
    in the padding after the input (PyTorch's rule)."""
    pads, n = list(pads), len(k_)
    for j, (i, k, s, d) in enumerate(zip(self.shape[-n:][::-1], k_[::-1], s_[::-1], d_[::-1])):
      pb, pa, e = pads[2 * j], pads[2 * j + 1], d * (k - 1) + 1
      o = -(-(i + pb + pa - e) // s) + 1
      pads[2 * j + 1] += s * (o - 1) + e - (i + pb + pa) - max(s * (o - 1) - (pb + i - 1), 0)
    return pads
  def avg_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode=False, count_include_pad=True) -> Self:
    """Mean of each window over the last len(kernel_size) dims. count_include_pad counts the zero padding (not the
    extra room of ceil_mode, as PyTorch); without it each window is divided by its number of input elements."""
    k_, s_, d_, pads = self._pool_args(kernel_size, stride, dilation, padding, "avg_pool2d", True)
    axis = tuple(range(-len(k_), 0))
    cpads = self._ceil_pads(pads, k_, s_, d_) if ceil_mode else pads
    pool = lambda x, p: x.pad(p)._pool(k_, s_, d_)
    if not count_include_pad: return pool(self, cpads).sum(axis) / pool(self._full(self.shape, 1, self.dtype), cpads).sum(axis)
    if not ceil_mode: return pool(self, pads).mean(axis)
    ones = self._full(self.pad(pads).shape, 1, self.dtype)
    return pool(self, cpads).sum(axis) / pool(ones, [c - p for c, p in zip(cpads, pads)]).sum(axis)
  def max_pool2d(self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, ceil_mode=False, return_indices=False):
    """Max of each window over the last len(kernel_size) dims, padding with -inf (the dtype's min for ints).
    return_indices also gives PyTorch's indices (int64): each max's flat position in the input's spatial plane, the first
    one on ties (a descending arange masked by the maxima, then max, as tinygrad's argmax)."""
    k_, s_, d_, pads = self._pool_args(kernel_size, stride, dilation, padding, "max_pool2d", False)
    axis = tuple(range(-len(k_), 0))
    if ceil_mode: pads = self._ceil_pads(pads, k_, s_, d_)
    pooled = self.pad(pads, value=self.dtype.min)._pool(k_, s_, d_)
    out = pooled.max(axis)
    if not return_indices: return out
    sp = self.shape[-len(k_):]
    n = _prod(sp)
    idx = (n - self._arange(n).cast(dtypes.int64)).reshape(sp).pad(pads)._pool(k_, s_, d_)
    m = pooled.eq(out.reshape(out.shape + (1,) * len(k_)))
    if self.dtype.is_float: m = m | pooled.isnan()   # a NaN is the max: the index points at one
    return out, n - (m.where(idx, 0)).max(axis)
  def max_unpool2d(self, indices: Self, kernel_size=(2, 2), stride=None, dilation=1, padding=0, output_size=None) -> Self:
    """The inverse of max_pool2d: each value put at its index of the output's spatial plane, zeros elsewhere. The
    output size is max_pool2d's input size unless output_size (its trailing dims) says otherwise. Indices become a
    one-hot against an arange of the output plane (in * out elements per channel: for pooling sizes)."""
    if not isinstance(indices, OpMixin): _err(TypeError, f"max_unpool2d takes a Tensor of indices, got {type(indices).__name__}")
    if indices.shape != self.shape: _err(ValueError, f"max_unpool2d: indices {indices.shape} must have the shape of the input {self.shape}")
    if indices.dtype.is_float or indices.dtype.is_bool: _err(TypeError, f"max_unpool2d: indices must be integers, got {indices.dtype}")
    k_, s_, d_, pads = self._pool_args(kernel_size, stride, dilation, padding, "max_unpool2d", False)
    n, sp = len(k_), self.shape[-len(k_):]
    if output_size is None:
      output_size = tuple((i - 1) * s - pads[2 * j] - pads[2 * j + 1] + d * (k - 1) + 1
                          for j, (i, k, s, d) in enumerate(zip(sp[::-1], k_[::-1], s_[::-1], d_[::-1])))[::-1]
    else:
      if not isinstance(output_size, (tuple, list)) or len(output_size) < n:
        _err(ValueError, f"output_size must give the last {n} dims, got {output_size!r}")
      output_size = _shape(tuple(output_size)[-n:], "output_size")
    lead, nin, nout = self.shape[:-n], _prod(sp), _prod(output_size)
    oh = indices.reshape(*lead, nin, 1).eq(self._arange(nout).reshape(1, nout))
    x = self.reshape(*lead, nin, 1)
    # max, not sum: overlapping windows may pick one element twice, and PyTorch writes it once
    return oh.any(-2).where(oh.where(x, self.dtype.min)._reduce(Ops.MAX, -2), 0).cast(self.dtype).reshape(*lead, *output_size)
  def conv_transpose2d(self, weight: Self, bias: Self | None = None, groups=1, stride=1, dilation=1, padding=0, output_padding=0) -> Self:
    """tinygrad's / PyTorch's transposed convolution ((cin, cout/groups, *k) weight, any number of spatial dims): the
    input strided by zero insertion (reshape, pad, reshape), then conv2d with the flipped, transposed weight and
    padding d*(k-1) - padding (cut where negative)."""
    if not isinstance(weight, OpMixin) or not (bias is None or isinstance(bias, OpMixin)):
      _err(TypeError, "conv_transpose2d takes a weight Tensor and an optional bias Tensor")
    if weight.ndim < 3 or self.ndim != weight.ndim:
      _err(ValueError, f"conv_transpose2d needs an input and a weight of equal rank >= 3 (batch, channels, spatial dims), "
                       f"got {self.shape} and {weight.shape}")
    HW, n = weight.shape[2:], weight.ndim - 2
    groups, = _ints(groups, 1, "groups", 1)
    s_, d_, op_ = _ints(stride, n, "stride", 1), _ints(dilation, n, "dilation", 1), _ints(output_padding, n, "output_padding", 0)
    p_ = _ints(padding, n, "padding", 0, (1, 2))
    p_ = tuple(zip(p_, p_)) if len(p_) == n else tuple((p_[2 * (n - 1 - i)], p_[2 * (n - 1 - i) + 1]) for i in range(n))
    if any(o >= s and o >= d for o, s, d in zip(op_, s_, d_)):
      _err(ValueError, f"output padding must be smaller than either stride or dilation, got output_padding={output_padding}, "
                       f"stride={stride}, dilation={dilation}")
    if self.shape[1] != weight.shape[0] or weight.shape[0] % groups:
      _err(ValueError, f"input {self.shape} does not match weight {weight.shape} with groups={groups}")
    sp = [self._static(2 + i, "conv_transpose2d") for i in range(n)]
    if 0 in sp: _err(ValueError, f"conv_transpose2d: input {self.shape} has an empty spatial dim")
    o_ = tuple((i - 1) * s - pb - pa + d * (k - 1) + op + 1 for i, s, (pb, pa), d, k, op in zip(sp, s_, p_, d_, HW, op_))
    if any(o < 0 for o in o_):
      _err(ValueError, f"conv_transpose2d: the output of input {self.shape} with weight {weight.shape} and padding={padding} would have a negative size")
    if 0 in o_: return self._full((self.shape[0], weight.shape[1] * groups, *o_), 0, least_upper_dtype(self.dtype, weight.dtype))   # as PyTorch
    w = weight.reshape(groups, weight.shape[0] // groups, *weight.shape[1:]).transpose(1, 2).flip(*range(3, weight.ndim + 1))
    w, x = w.reshape(groups * weight.shape[1], weight.shape[0] // groups, *HW), self
    if any(s > 1 for s in s_):   # (k) -> (k, 1) -> pad (k, s) -> (k*s) -> cut the trailing s-1 zeros
      x = x.reshape(*x.shape[:2], *[v for k in sp for v in (k, 1)]).pad((None, None, *[v for s in s_ for v in (None, (0, s - 1))]))
      x = x.reshape(*x.shape[:2], *[k * s for k, s in zip(sp, s_)]).shrink((None, None, *[(0, k * s - s + 1) for k, s in zip(sp, s_)]))
    x = x.pad((None, None, *[((k - 1) * d - pb, (k - 1) * d - pa + op) for k, d, (pb, pa), op in zip(HW, d_, p_, op_)]))
    return x.conv2d(w, bias, groups=groups, dilation=d_)
  def interpolate(self, size, mode: str = "linear", align_corners: bool = False) -> Self:
    """Resize the last len(size) dims (tinygrad's; PyTorch's index rules). linear (also named bilinear / trilinear for 2 /
    3 dims) blends the two neighbours of each source position, nearest picks floor(j*in/out), nearest-exact
    floor((j+0.5)*in/out). Source positions are exact integer arithmetic on aranges; the neighbours are picked by a
    one-hot (out, in) mask and a max over in, which is exact for any value but costs out*in per element: it suits
    image-sized resizes, not a general gather."""
    modes = {"linear": None, "bilinear": 2, "trilinear": 3, "nearest": None, "nearest-exact": None}
    if mode not in modes: _err(ValueError, f"interpolate: mode must be one of {', '.join(modes)}, got {mode!r}")
    if not isinstance(size, (tuple, list)) or not 0 < len(size) <= self.ndim or not all(_isint(s) and s > 0 for s in size):
      _err(ValueError, f"interpolate: size must be a tuple of 1 to {self.ndim} positive ints, got {size!r}")
    if modes[mode] is not None and len(size) != modes[mode]:
      _err(ValueError, f"interpolate: {mode} resizes {modes[mode]} dims, got size={tuple(size)}")
    if align_corners and mode.startswith("nearest"):
      _err(ValueError, "align_corners option can only be set with the interpolating modes: linear | bilinear | trilinear")
    x = self
    for d in range(self.ndim - len(size), self.ndim):
      nin, nout = x._static(d, "interpolate"), int(size[d - self.ndim])
      if nin == 0: _err(ValueError, f"interpolate: cannot resize dim {d} of input {self.shape}, which is empty, to {nout}")
      if nin == nout: continue
      j, k = self._arange(nout), self._arange(nin)
      if 4 * nin * nout >= 1 << 31: j, k = j.cast(dtypes.int64), k.cast(dtypes.int64)
      # the source position of output j is num/den: lo = num // den, and p = num/den - lo the weight of lo's neighbour
      if mode == "nearest": num, den = j * nin, nout
      elif mode == "nearest-exact": num, den = (j * 2 + 1) * nin, 2 * nout
      elif align_corners: num, den = j * (nin - 1), max(nout - 1, 1)
      else: num, den = ((j * 2 + 1) * nin - nout).maximum(0), 2 * nout
      lo = num.idiv(den)
      pick = lambda i: x._pick(d, k.reshape(1, nin).eq(i.reshape(nout, 1)))
      if mode.startswith("nearest"): x = pick(lo); continue
      p = ((num - lo * den).cast(dtypes.float32) / den).reshape((nout,) + (1,) * (self.ndim - 1 - d))
      x0, x1 = pick(lo)._fl(), pick((lo + 1).minimum(nin - 1))._fl()
      x = (x0 * (1 - p) + x1 * p).cast(self.dtype)
    return x
  def _pick(self, d: int, oh: Self) -> Self:
    """Along dim d, output j takes the element k where the bool mask oh (out, in) is set (exactly one k per j)."""
    x = self.unsqueeze(d)
    oh = oh.reshape(oh.shape + (1,) * (self.ndim - 1 - d))
    return oh.where(x, self.dtype.min).max(d + 1)
  @staticmethod
  def einsum(formula: str, *operands, dtype=None):
    """tinygrad's einsum: each operand permuted to sorted letter order and broadcast over all letters, multiplied,
    summed over the letters not in the output. "..." stands for the leading dims; a letter repeated in one operand
    takes its diagonal; without "->" the output is the letters used once, sorted (numpy's rule)."""
    xs = tuple(operands[0]) if len(operands) == 1 and isinstance(operands[0], (tuple, list)) else operands
    if not isinstance(formula, str): _err(TypeError, f"einsum takes a formula string, got {type(formula).__name__}")
    if not xs or not all(isinstance(x, OpMixin) for x in xs): _err(TypeError, "einsum takes tensors after the formula")
    formula = formula.replace(" ", "")
    lhs, arrow, out = formula.partition("->")
    inputs = lhs.split(",")
    if len(inputs) != len(xs): _err(ValueError, f"einsum: the formula has {len(inputs)} operands, got {len(xs)} tensors")
    if "..." in formula:
      free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in formula]
      nell = [x.ndim - (len(s) - 3) for s, x in zip(inputs, xs) if "..." in s]
      if any(e < 0 for e in nell) or max(nell, default=0) > len(free): _err(ValueError, f"einsum: '...' does not fit the operands of {formula!r}")
      inputs = [s.replace("...", "".join(free[len(free) - (x.ndim - len(s) + 3):])) if "..." in s else s for s, x in zip(inputs, xs)]
      ell = "".join(free[len(free) - max(nell, default=0):])
      used = "".join(inputs)
      out = out.replace("...", ell) if arrow else ell + "".join(sorted(c for c in set(used) if used.count(c) == 1 and c not in ell))
    elif not arrow: out = "".join(sorted(c for c in set(lhs) if lhs.count(c) == 1 and c.isalpha()))
    if bad := [c for c in "".join(inputs) + out if not c.isalpha()]: _err(ValueError, f"einsum: invalid subscript {bad[0]!r} in {formula!r}")
    if len(set(out)) != len(out) or set(out) - set("".join(inputs)):
      _err(ValueError, f"einsum: output subscripts {out!r} must be distinct letters of the operands")
    sizes, ys = {}, []
    for s, x in zip(inputs, xs):
      if len(s) != x.ndim: _err(ValueError, f"einsum: subscripts {s!r} do not match the {x.ndim} dims of operand {x.shape}")
      while len(set(s)) < len(s):   # a repeated letter: its two dims moved last, then the diagonal (rows padded by one)
        c = next(c for c in s if s.count(c) > 1)
        i, j = s.index(c), s.index(c, s.index(c) + 1)
        if x.shape[i] != x.shape[j]: _err(ValueError, f"einsum: subscript {c!r} has sizes {x.shape[i]} and {x.shape[j]} in one operand")
        rest, k = [a for a in range(x.ndim) if a not in (i, j)], x._static(i, "einsum")
        x = x.permute(*rest, i, j).flatten(-2).pad((0, k)).reshape(*[x.shape[a] for a in rest], k, k + 1).shrink((*[None] * len(rest), None, (0, 1)))
        x, s = x.reshape(x.shape[:-1]), "".join(s[a] for a in rest) + c
      for c, n in zip(s, x.shape):   # a size-1 dim broadcasts against the letter's size elsewhere (numpy, PyTorch)
        if (m := sizes.setdefault(c, n)) != n and 1 not in (m, n): _err(ValueError, f"einsum: subscript {c!r} has sizes {m} and {n}")
        if m == 1: sizes[c] = n
      ys.append((s, x))
    letters = sorted(sizes)
    full = tuple(sizes[c] for c in letters)
    xs, acc, rdt = _contraction(tuple(x for _, x in ys), dtype)
    prod = None
    for (s, _), x in zip(ys, xs):
      order = sorted(range(len(s)), key=lambda a: s[a])
      x = x.permute(order).reshape(tuple(x.shape[s.index(c)] if c in s else 1 for c in letters)).expand(full)
      prod = x if prod is None else prod * x
    ret = prod.sum(tuple(i for i, c in enumerate(letters) if c not in out), dtype=acc)._cast(rdt)
    kept = [c for c in letters if c in out]
    return ret.permute(tuple(kept.index(c) for c in out))
  def scaled_dot_product_attention(self, key: Self, value: Self, attn_mask: Self | None = None, dropout_p: float = 0.0,
                                   is_causal: bool = False, enable_gqa: bool = False) -> Self:
    """softmax(q k^T / sqrt(E) + mask) v (tinygrad's): a bool mask keeps where True, a float one is added; is_causal
    masks key j > query i (top-left aligned, as PyTorch). Dropout acts as dropout() does: only while Tensor.training
    (tinygrad's rule; PyTorch's function applies dropout_p always). enable_gqa: key and value have fewer heads (dim -3),
    a divisor of the query's, each shared by that many query heads in a row (PyTorch's grouped-query attention)."""
    if not isinstance(key, OpMixin) or not isinstance(value, OpMixin) or not (attn_mask is None or isinstance(attn_mask, OpMixin)):
      _err(TypeError, "scaled_dot_product_attention takes key, value (and attn_mask) Tensors")
    if self.ndim < 2 or key.ndim < 2 or value.ndim < 2: _err(ValueError, f"scaled_dot_product_attention needs (..., L, E) tensors, got {self.shape}")
    if enable_gqa:
      if min(self.ndim, key.ndim, value.ndim) < 3 or key.shape[-3] != value.shape[-3] or self.shape[-3] % key.shape[-3]:
        _err(ValueError, f"scaled_dot_product_attention: with enable_gqa the key's and value's heads (dim -3) must divide the query's, "
                         f"got {self.shape}, {key.shape} and {value.shape}")
      g = self.shape[-3] // key.shape[-3]
      key, value = key.repeat_interleave(g, -3), value.repeat_interleave(g, -3)
    qk = self.matmul(key.transpose(-2, -1), dtype=least_upper_dtype(self.dtype, key.dtype, dtypes.float32)) / math.sqrt(self._static(-1, "attention"))
    if is_causal:
      if attn_mask is not None: _err(ValueError, "scaled_dot_product_attention: set attn_mask or is_causal, not both")
      attn_mask = qk._tri(*qk.shape[-2:], 1).logical_not()
    if attn_mask is not None: qk = qk + (attn_mask.where(0, -math.inf) if attn_mask.dtype.is_bool else attn_mask)
    # the softmax's division after the product with value: the row sums then fuse into that contraction (3 kernels, not 4).
    # A row with every key masked (or no key) gives 0, as PyTorch's safe softmax: its max shifts by 0, its sum divides as 1.
    m = (qk := qk.cast(_float(self.dtype)))._reduce(Ops.MAX, -1, keepdim=True)   # int inputs: the scores stay float
    e = qk.sub(m.eq(-math.inf).where(0.0, m)).exp()
    ss = e.sum(-1, keepdim=True)
    return (e.dropout(dropout_p) @ value) / ss.eq(0).where(1.0, ss)
  @_f32
  def layernorm(self, axis=-1, eps: float = 1e-5) -> Self:
    """Normalized over axis to mean 0 and variance 1 (biased), without the affine part (tinygrad's)."""
    y = self - self.mean(axis, keepdim=True)
    return y * (y * y).mean(axis, keepdim=True).add(eps).rsqrt()
  def batchnorm(self, weight: Self | None, bias: Self | None, mean: Self, invstd: Self, axis=1) -> Self:
    """(x - mean) * weight * invstd + bias with the statistics laid along axis (tinygrad's: invstd given, not var)."""
    axes = self._axes(axis)
    shape = tuple(s if a in axes else 1 for a, s in enumerate(self.shape))
    for name, t in (("weight", weight), ("bias", bias), ("mean", mean), ("invstd", invstd)):
      if t is not None and (not isinstance(t, OpMixin) or _prod(t.shape) != _prod(shape)):
        _err(ValueError, f"batchnorm: {name} must be a Tensor of {_prod(shape)} elements for axis {axis} of {self.shape}, "
                         f"got {getattr(t, 'shape', t)}")
    x = self - mean.reshape(shape)
    if weight is not None: x = x * weight.reshape(shape)
    ret = x * invstd.reshape(shape)
    return ret + bias.reshape(shape) if bias is not None else ret
  def linear(self, weight: Self, bias: Self | None = None) -> Self:
    """self @ weight + bias with weight (in, out), as tinygrad (PyTorch's F.linear takes (out, in)); a 1-d weight scales."""
    if not isinstance(weight, OpMixin) or not (bias is None or isinstance(bias, OpMixin)):
      _err(TypeError, "linear takes a weight Tensor and an optional bias Tensor")
    x = self * weight if weight.ndim == 1 else self.dot(weight)
    return x + bias if bias is not None else x
  def _rand_like(self) -> Self:
    _err(NotImplementedError, "random numbers come from Tensor's seeded generator (Tensor.manual_seed): a UOp graph cannot draw them")
  def dropout(self, p: float = 0.5) -> Self:
    """Zero each element with probability p and scale the rest by 1/(1-p) while Tensor.training; the identity otherwise."""
    if not isinstance(p, (int, float, np.integer, np.floating)) or not 0 <= p <= 1:
      _err(ValueError, f"dropout probability has to be between 0 and 1, but got {p!r}")
    if not getattr(type(self), "training", False) or p == 0: return self
    if p == 1: return self._full(self.shape, 0, self.dtype)
    return self._rand_like().ge(p).where(self, 0) / (1.0 - p)

# ---- convolution, tinygrad's formulation: sliding windows by movement ops only (repeat, shrink, reshape, permute),
# then one multiply-reduce, which uop-optimize recognises as a contraction (packed operands, register-tiled FMAs)
def _pool(self: OpMixin, k_: tuple[int, ...], stride=1, dilation=1) -> OpMixin:
  """(..., *i_) -> (..., *o_, *k_): every k_ window at the given stride and dilation."""
  n = len(k_)
  s_, d_ = (stride,) * n if isinstance(stride, int) else tuple(stride), (dilation,) * n if isinstance(dilation, int) else tuple(dilation)
  noop, i_ = [None] * (self.ndim - n), tuple(self._static(self.ndim - n + j, "a windowed op (pool, conv)") for j in range(n))
  if any(d * (k - 1) + 1 > i for k, i, d in zip(k_, i_, d_)): _err(ValueError, f"kernel {k_} (dilation {d_}) is larger than the input {i_}")
  o_ = [(i - d * (k - 1) - 1) // s + 1 for i, d, k, s in zip(i_, d_, k_, s_)]
  lead = list(self.shape[:-n])
  if all(k <= s for k, s in zip(k_, s_)) and all(d == 1 for d in d_):
    # windows that do not overlap (pooling): pad/shrink to o*s, split (o, s), keep k. The backward is a pad and a
    # reshape per element; the repeat below would make it a gated reduce over the repeats with div/mod index math
    x = self.pad(tuple([None] * len(lead) + [(0, max(0, o * s - i)) for i, o, s in zip(i_, o_, s_)]))
    x = x.shrink(tuple([None] * len(lead) + [(0, o * s) for o, s in zip(o_, s_)])).reshape(*lead, *[v for o, s in zip(o_, s_) for v in (o, s)])
    x = x.shrink(tuple([None] * len(lead) + [v for o, k in zip(o_, k_) for v in ((0, o), (0, k))]))
    return x.permute(*range(len(lead)), *[len(lead) + 2 * i for i in range(n)], *[len(lead) + 2 * i + 1 for i in range(n)])
  f_ = [max(1, -(-(o * s - d) // i)) for o, s, i, d in zip(o_, s_, i_, d_)]   # rows of i * f + d >= o * s (a stride past the input too)
  reps = [-(-k * (i * f + d) // i) for k, i, d, f in zip(k_, i_, d_, f_)]
  x = self.reshape(*lead, *[v for i in i_ for v in (1, i)]).expand(*lead, *[v for r, i in zip(reps, i_) for v in (r, i)])
  x = x.reshape(*lead, *[r * i for r, i in zip(reps, i_)])
  x = x.shrink(tuple([(0, s) for s in lead] + [(0, k * (i * f + d)) for k, i, d, f in zip(k_, i_, d_, f_)]))
  x = x.reshape(*lead, *[v for k, i, d, f in zip(k_, i_, d_, f_) for v in (k, i * f + d)])
  x = x.shrink(tuple([(0, s) for s in lead] + [v for k, o, s in zip(k_, o_, s_) for v in ((0, k), (0, o * s))]))
  x = x.reshape(*lead, *[v for k, o, s in zip(k_, o_, s_) for v in (k, o, s)])
  x = x.shrink(tuple([(0, s) for s in lead] + [v for k, o in zip(k_, o_) for v in ((0, k), (0, o), (0, 1))]))
  x = x.reshape(*lead, *[v for k, o in zip(k_, o_) for v in (k, o)])
  return x.permute(*range(len(noop)), *[len(noop) + i * 2 + 1 for i in range(n)], *[len(noop) + i * 2 for i in range(n)])

def _ints(v, n: int, name: str, least: int, counts: tuple[int, ...] = (1,)) -> tuple[int, ...]:
  """A conv argument as n ints >= least (an int stands for all n), checked as PyTorch checks it."""
  vs = (v,) if isinstance(v, (int, np.integer)) else tuple(v) if isinstance(v, (tuple, list)) else None
  if vs is None or any(not isinstance(x, (int, np.integer)) or isinstance(x, (bool, np.bool_)) for x in vs):
    _err(TypeError, f"{name} must be an int or a tuple of ints, got {v!r}")
  if len(vs) != 1 and len(vs) not in [c * n for c in counts]:
    _err(ValueError, f"expected {name} to be a single integer value or a list of {' or '.join(str(c * n) for c in counts)} values to match "
                     f"the convolution dimensions, but got {name}={list(vs)}")
  if any(x < least for x in vs): _err(ValueError, f"{name} must be {'positive' if least else 'non-negative'}, got {name}={v}")
  return tuple(int(x) for x in vs) * (n if len(vs) == 1 else 1)

def conv2d(self: OpMixin, weight: OpMixin, bias: OpMixin | None = None, groups=1, stride=1, dilation=1, padding=0, dtype=None) -> OpMixin:
  """tinygrad's / PyTorch's conv2d (NCHW input, (cout, cin/groups, kh, kw) weight); padding: int, one per spatial dim,
  or PyTorch's flat (left, right, top, bottom). Arguments are checked as PyTorch checks them: groups, stride and dilation
  positive, padding non-negative, one value or one per spatial dim."""
  if not isinstance(weight, OpMixin) or not (bias is None or isinstance(bias, OpMixin)):
    _err(TypeError, "conv2d takes a weight Tensor and an optional bias Tensor")
  if weight.ndim < 3 or self.ndim != weight.ndim:
    _err(ValueError, f"conv2d needs an input and a weight of equal rank >= 3 (batch, channels, spatial dims), got {self.shape} and {weight.shape}")
  (bs, cin_), (cout, cin), HW = self.shape[:2], weight.shape[:2], weight.shape[2:]
  groups, = _ints(groups, 1, "groups", 1)
  stride, dilation = _ints(stride, len(HW), "stride", 1), _ints(dilation, len(HW), "dilation", 1)
  pads = _ints(padding, len(HW), "padding", 0, (1, 2))
  if groups * cin != cin_ or cout % groups:
    _err(ValueError, f"input {self.shape} does not match weight {weight.shape} with groups={groups}")
  if bias is not None and bias.shape != (cout,):
    _err(ValueError, f"bias {bias.shape} does not match the {cout} output channels of weight {weight.shape}")
  pads = [p for p in pads for _ in range(2)][::-1] if len(pads) == len(HW) else list(pads)
  x = (self.pad(pads) if any(pads) else self)._pool(HW, stride, dilation)   # (bs, groups*cin, *oyx, *HW)
  rcout, oyx = cout // groups, x.shape[2:-len(HW)]
  (x, w), acc, out = _contraction((x, weight), dtype)
  x = x.reshape(bs, groups, cin, 1, *oyx, *HW).expand(bs, groups, cin, rcout, *oyx, *HW)
  x = x.permute(0, 1, 3, *[4 + i for i in range(len(oyx))], 2, *[4 + len(oyx) + i for i in range(len(HW))])
  ret = (x * w.reshape(1, groups, rcout, *[1] * len(oyx), cin, *HW)).sum([-1 - i for i in range(1 + len(oyx))], keepdim=True, dtype=acc)._cast(out)
  ret = ret.reshape(bs, cout, *oyx)
  return ret if bias is None else ret.add(bias.reshape(1, -1, *[1] * len(HW)))

OpMixin._pool, OpMixin.conv2d = _pool, conv2d

# binary operators and their reflected forms (Tensor adds the in-place ones)
BINARY_OPS = {"add": OpMixin.add, "sub": OpMixin.sub, "mul": OpMixin.mul, "pow": OpMixin.pow, "floordiv": OpMixin.floordiv, "mod": OpMixin.mod,
              "and": OpMixin.bitwise_and, "or": OpMixin.bitwise_or, "xor": OpMixin.bitwise_xor, "lshift": OpMixin.lshift,
              "rshift": OpMixin.rshift, "truediv": OpMixin.div}
for _name, _fn in BINARY_OPS.items():
  setattr(OpMixin, f"__{_name}__", _fn)
  setattr(OpMixin, f"__r{_name}__", lambda self, x, f=_fn: f(self, x, True))
