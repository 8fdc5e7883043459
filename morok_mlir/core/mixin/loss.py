"""Losses: cross entropy (class indices or probabilities, label smoothing), negative log likelihood, binary cross entropy."""
from __future__ import annotations
from typing import Self
from morok_mlir.core.mixin.helpers import _err, OpBase

class LossMixin(OpBase):
  __slots__ = ()
  def _do_reduction(self, reduction: str) -> Self:
    if reduction not in ("mean", "sum", "none"): _err(ValueError, f"reduction must be one of 'mean', 'sum', 'none', got {reduction!r}")
    return self.mean() if reduction == "mean" else self.sum() if reduction == "sum" else self
  def _target(self, Y, what: str):
    if not isinstance(Y, OpBase): _err(TypeError, f"{what} takes a target tensor, got {type(Y).__name__}")
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
