"""Activation functions: elementwise compositions with tinygrad's and PyTorch's names."""
from __future__ import annotations
import math
from typing import Self
from morok_mlir.core.mixin.helpers import _err, _f32, OpBase

class ActivationMixin(OpBase):
  __slots__ = ()
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
