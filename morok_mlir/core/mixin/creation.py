"""Tensors made from a shape and values rather than from self's data: filled, ranges, one-hot rows."""
from __future__ import annotations
from typing import Self
from morok_mlir.core.dtype import DType, dtypes
from morok_mlir.core.mixin.helpers import _err, OpBase

class CreationMixin(OpBase):
  __slots__ = ()
  def _full(self, shape, value, dtype: DType) -> Self: return self._const(value, dtype).reshape((1,) * len(shape)).expand(shape)
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
