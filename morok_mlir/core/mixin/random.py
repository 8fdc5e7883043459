"""Random ops: the draw (Tensor's seeded generator: a UOp graph cannot draw) and dropout."""
from __future__ import annotations
from typing import Self
import numpy as np
from morok_mlir.core.mixin.helpers import _err, OpBase

class RandomMixin(OpBase):
  __slots__ = ()
  def _rand_like(self) -> Self:
    _err(NotImplementedError, "random numbers come from Tensor's seeded generator (Tensor.manual_seed): a UOp graph cannot draw them")
  def dropout(self, p: float = 0.5) -> Self:
    """Zero each element with probability p and scale the rest by 1/(1-p) while Tensor.training; the identity otherwise."""
    if not isinstance(p, (int, float, np.integer, np.floating)) or not 0 <= p <= 1:
      _err(ValueError, f"dropout probability has to be between 0 and 1, but got {p!r}")
    if not getattr(type(self), "training", False) or p == 0: return self
    if p == 1: return self._full(self.shape, 0, self.dtype)
    return self._rand_like().ge(p).where(self, 0) / (1.0 - p)
