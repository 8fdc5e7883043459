"""Data-dependent indexing: gather and scatter along one dim (tinygrad's and PyTorch's)."""
from __future__ import annotations
from typing import Self
import numpy as np
from morok_mlir.core.dtype import dtypes
from morok_mlir.dialects.ops import Ops, REDUCE_IDENTITY
from morok_mlir.core.mixin.helpers import _err, _cv, OpBase

_SCATTER_REDUCE = {"sum": "add", "prod": "mul", "mean": "add", "amax": "max", "amin": "min"}   # PyTorch's name -> scatter op

class IndexingMixin(OpBase):
  __slots__ = ()
  def gather(self, dim: int, index: Self) -> Self:
    """out[i] = self[i with dim `dim` replaced by index[i]] (PyTorch's gather): index has self's rank and an integer dtype,
    no dim larger than self's but `dim`. O(out) reads through the loaded indices; an index outside [0, self.shape[dim])
    gives 0, as in tinygrad: the load is gated and never reads outside the buffer (PyTorch raises instead)."""
    d = self._indexed_dim("gather", dim, index)
    if self.ndim == 0: return self.reshape(1).gather(0, index.reshape(1)).reshape(())
    return self._op(Ops.GATHER, index.shape, self.dtype, (index,), axis=d)
  def _indexed_dim(self, what: str, dim: int, index) -> int:
    """dim, checked for indexing self along it with index (PyTorch's rules for gather and scatter)."""
    if not isinstance(index, OpBase) or not (index.dtype.is_int or index.dtype is dtypes.index):
      got = f"a {type(index).__name__} of {index.dtype}" if hasattr(index, "dtype") else f"a {type(index).__name__}"
      _err(TypeError, f"{what} needs an integer index tensor, got {got}")
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
    if isinstance(src, OpBase):
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
