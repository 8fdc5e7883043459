"""Reductions over dims (sum, prod, max, min, any, all, mean, var, std) and the softmax family."""
from __future__ import annotations
import math
from typing import Self
from morok_mlir.core.dtype import dtypes
from morok_mlir.dialects.ops import Ops, REDUCE_IDENTITY
from morok_mlir.core import uop as U   # symbolic sizes are UOps (uop imports this package: names are read at call time)
from morok_mlir.core.mixin.helpers import _err, _prod, _dtype, _narrow_float, _sum_acc, _stat_dtype, _f32, OpBase

class ReduceMixin(OpBase):
  __slots__ = ()
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
  def norm(self, p=2, dim=None, keepdim=False) -> Self:
    """PyTorch's vector norm over dim (all of them for None): (sum |x|^p)^(1/p); p inf/-inf the max/min of |x|, p 0 the
    count of nonzeros; "fro" is p 2. Computed in float."""
    x, p = self._fl().abs(), 2 if p == "fro" else p
    if not isinstance(p, (int, float)) or isinstance(p, bool): _err(TypeError, f"norm(): p must be a number or 'fro', got {p!r}")
    if p in (math.inf, -math.inf): return x.max(dim, keepdim) if p > 0 else x.min(dim, keepdim)
    if p == 0: return x.ne(0).cast(x.dtype).sum(dim, keepdim)
    if p == 1: return x.sum(dim, keepdim)
    return x.square().sum(dim, keepdim).sqrt() if p == 2 else x.pow(p).sum(dim, keepdim).pow(1 / p)
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
