"""Optimizers (tinygrad's nn/optim.py): step() builds every parameter's and every state tensor's update as one lazy
graph (under Tensor.no_grad) and realizes them all in one call, so a training step is one schedule."""
from __future__ import annotations
import numpy as np
from morok_mlir.core.dtype import dtypes
from morok_mlir.core.provenance import error as _err
from morok_mlir.tensor import Tensor

def _state(t: Tensor, value: float, dtype=None) -> Tensor:
  """Optimizer state shaped as t, filled with value, as data from the start: every step's graph then has one structure
  (a constant first step would compile a step of its own, and a TinyJit would see two different steps)."""
  dt = dtype or t.dtype
  return Tensor(np.full(t.shape, value, dt.np), device=t.device, requires_grad=False)

class Optimizer:
  def __init__(self, params: list[Tensor], lr: float):
    Tensor.realize(*params)   # lazy parameters (random initialisations) become data in one call, before they become leaves
    for x in params:   # a float parameter given to an optimizer requires grad unless it was set not to; others are buffers
      if x.requires_grad is None and x.dtype.is_float: x.requires_grad = True
    self.params: list[Tensor] = list({id(x): x for x in params if x.requires_grad}.values())
    if not self.params: _err(ValueError, "an optimizer needs at least one parameter that requires grad")
    self.buffers: list[Tensor] = list({id(x): x for x in params if not x.requires_grad}.values())   # realized with the step
    self.device = self.params[0].device
    # a tensor, not a constant: changing the learning rate (lr.assign) reuses the compiled step
    self.lr = Tensor([lr], dtype=dtypes.float32, device=self.device, requires_grad=False)
  def zero_grad(self):
    for p in self.params: p.grad = None
  def step(self) -> None:
    """Update the parameters from their .grad (those without one are left alone), realizing all in one call."""
    Tensor.realize(*self.schedule_step())
  def schedule_step(self) -> list[Tensor]:
    """The updated parameters, buffers and optimizer state, lazy (tinygrad's)."""
    if not Tensor.training: _err(RuntimeError, "Tensor.training is False: step() only while training (`with Tensor.train():`)")
    with Tensor.test():
      todo = [(i, p) for i, p in enumerate(self.params) if p.grad is not None]
      state = self._step([i for i, _ in todo], [p.grad.cast(p.dtype) for _, p in todo])
    return state + self.params + self.buffers
  def _lr(self, t: Tensor) -> Tensor: return self.lr.cast(t.dtype).reshape(())   # 0-d: a 0-d parameter stays 0-d

class SGD(Optimizer):
  """p -= lr * g, g the gradient plus weight_decay * p; with momentum, b = momentum * b + g and g = b (or g + momentum * b,
  nesterov), as PyTorch's SGD. ns_params (Muon's): g, as a matrix of its first dim by the rest, is orthogonalized by
  5 Newton-Schulz steps of that polynomial before the learning rate scales it (tinygrad's LARS)."""
  def __init__(self, params: list[Tensor], lr: float = 0.001, momentum: float = 0.0, weight_decay: float = 0.0, nesterov: bool = False,
               ns_params: tuple | None = None):
    super().__init__(params, lr)
    self.momentum, self.wd, self.nesterov, self.ns_params = momentum, weight_decay, nesterov, ns_params
    if ns_params is not None and (t := next((t for t in self.params if t.ndim == 0), None)) is not None:
      _err(ValueError, f"Newton-Schulz (Muon) orthogonalizes matrices: a 0-d parameter has none (shape {t.shape})")
    self.b = [_state(t, 0.0) for t in self.params] if momentum else []
  def _step(self, idx: list[int], grads: list[Tensor]) -> list[Tensor]:
    for i, g in zip(idx, grads):
      t = self.params[i]
      if self.wd: g = g + self.wd * t.detach()
      if self.momentum:
        self.b[i].assign(self.momentum * self.b[i] + g)   # b is zero on the first step: no special case
        g = g + self.momentum * self.b[i] if self.nesterov else self.b[i]
      if self.ns_params is not None: g = g.reshape(g.shape[0], -1).newton_schulz(5, self.ns_params).reshape(g.shape)
      t.assign((t.detach() - g * self._lr(t)).cast(t.dtype))
    return [self.b[i] for i in idx] if self.momentum else []

def Muon(params: list[Tensor], lr=3e-3, momentum=0.96, weight_decay=0.0, nesterov=True, ns_params=(3.4445, -4.7750, 2.0315)) -> SGD:
  """Muon (tinygrad's defaults): SGD with nesterov momentum whose step direction is orthogonalized by Newton-Schulz."""
  return SGD(params, lr, momentum, weight_decay, nesterov, ns_params)

class LAMB(Optimizer):
  """Adam's moments with bias correction, the update scaled by the trust ratio |p| / |update| (LAMB); adam=True skips
  the ratio (Adam, or AdamW with weight_decay)."""
  def __init__(self, params: list[Tensor], lr=0.001, b1=0.9, b2=0.999, eps=1e-6, weight_decay=0.0, adam=False):
    super().__init__(params, lr)
    self.b1, self.b2, self.eps, self.wd, self.adam = b1, b2, eps, weight_decay, adam
    self.b1_t, self.b2_t = (_state(self.lr, 1.0) for _ in (b1, b2))
    self.m, self.v = ([_state(t, 0.0, dtypes.float32) for t in self.params] for _ in range(2))
  def _step(self, idx: list[int], grads: list[Tensor]) -> list[Tensor]:
    self.b1_t.assign(self.b1_t * self.b1)
    self.b2_t.assign(self.b2_t * self.b2)
    c1, c2 = (1.0 - self.b1_t).reshape(()), (1.0 - self.b2_t).reshape(())   # the bias corrections, 0-d as _lr
    for i, g in zip(idx, grads):
      t, g = self.params[i], g.float()
      self.m[i].assign(self.b1 * self.m[i] + (1.0 - self.b1) * g)
      self.v[i].assign(self.b2 * self.v[i] + (1.0 - self.b2) * (g * g))
      up = (self.m[i] / c1) / ((self.v[i] / c2).sqrt() + self.eps) + self.wd * t.detach().float()
      if not self.adam:
        r1, r2 = t.detach().float().square().sum().sqrt(), up.square().sum().sqrt()
        up = up * r1.gt(0).where(r2.gt(0).where(r1 / r2, 1.0), 1.0)
      t.assign((t.detach() - (self._lr(up) * up).cast(t.dtype)).cast(t.dtype))
    return [self.b1_t, self.b2_t] + [self.m[i] for i in idx] + [self.v[i] for i in idx]

def Adam(params: list[Tensor], lr=0.001, b1=0.9, b2=0.999, eps=1e-8) -> LAMB: return LAMB(params, lr, b1, b2, eps, 0.0, adam=True)
def AdamW(params: list[Tensor], lr=0.001, b1=0.9, b2=0.999, eps=1e-8, weight_decay=0.01) -> LAMB:
  """Adam with decoupled weight decay: lr * weight_decay * p is subtracted beside the Adam step (tinygrad's, PyTorch's)."""
  return LAMB(params, lr, b1, b2, eps, weight_decay, adam=True)
