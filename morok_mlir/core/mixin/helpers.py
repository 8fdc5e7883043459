"""What the op families share: argument and shape checks, broadcasting of shapes, scalar constants, the dtype rules
of accumulation, and OpBase, their root."""
from __future__ import annotations
import functools, math
import numpy as np
from morok_mlir.core.dtype import DType, dtypes, least_upper_dtype, to_dtype
from morok_mlir.core.provenance import error as _error, OpValueError, OpIndexError
from morok_mlir.core import uop as U   # symbolic sizes are UOps (uop imports this package: names are read at call time)

class OpBase:
  """The root of the op families (OpMixin is all of them): `isinstance(x, OpBase)` asks "is x a Tensor or a UOp"."""
  __slots__ = ()

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
class _NoBroadcast(Exception): pass
def _nobcast(): raise _NoBroadcast
class DTypeNameError(TypeError, AttributeError):
  """A string that names no dtype: a TypeError (PyTorch's), and an AttributeError of `dtypes` (tinygrad's getattr)."""
_NONE = type(None)
def _isint(v) -> bool: return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
def _diag(d, sym: bool = False) -> int:
  """A diagonal: an int, or (sym) a bound size (tinygrad's triu(start_pos + 1))."""
  if sym and isinstance(d, U.UOp): return _sz(d, "diagonal")
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
def _contraction(xs: tuple[OpBase, ...], dtype) -> tuple[list[OpBase], DType, DType]:
  """The operands of a contraction summed in dtype (None: _dot_acc of their promoted dtype), its accumulator and result
  dtypes. Each operand is rounded to the promoted dtype first, as x * y rounds it, then cast to the accumulator where
  that is at least as wide: the products are formed there (float16 products exact in float32, PyTorch's opmath)."""
  dt = least_upper_dtype(*(x.dtype for x in xs))
  acc = _dot_acc(dt) if dtype is None else _dtype(dtype)
  wide = acc if least_upper_dtype(dt, acc) is acc else dt
  return [x._cast(dt)._cast(wide) for x in xs], acc, dt if dtype is None else acc
def _f32(fn):
  """Float composites run in float32 at least (PyTorch's opmath): their polynomials and cancellations would lose most of
  float16's 11 bits (bfloat16's 8). The result is rounded once to the input's float dtype."""
  @functools.wraps(fn)
  def f(self, *a, **kw):
    x = self._fl()
    return fn(x.float(), *a, **kw).cast(x.dtype) if _narrow_float(x.dtype) else fn(x, *a, **kw)
  return f
