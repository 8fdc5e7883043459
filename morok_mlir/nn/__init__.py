"""Layers with tinygrad's layouts and initialisations: plain classes holding Tensors (get_parameters finds them)."""
from __future__ import annotations
import math
import numpy as np
from morok_mlir.core.provenance import error as _err
from morok_mlir.tensor import Tensor

def _tuple(x, n: int) -> tuple[int, ...]: return (x,) * n if isinstance(x, int) else tuple(x)

class Linear:
  """y = x @ weight.T + bias, weight (out_features, in_features), both uniform in +-1/sqrt(in_features)."""
  def __init__(self, in_features: int, out_features: int, bias: bool = True):
    bound = 1 / math.sqrt(in_features)
    self.weight = Tensor.uniform(out_features, in_features, low=-bound, high=bound)
    self.bias = Tensor.uniform(out_features, low=-bound, high=bound) if bias else None
  def __call__(self, x: Tensor) -> Tensor: return x.linear(self.weight.transpose(), self.bias)

class Conv2d:
  """weight (out_channels, in_channels / groups, *kernel_size), weight and bias uniform in +-1/sqrt(fan_in)."""
  def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, dilation=1, groups: int = 1, bias: bool = True):
    self.kernel_size = _tuple(kernel_size, 2)
    self.stride, self.padding, self.dilation, self.groups = stride, padding, dilation, groups
    scale = 1 / math.sqrt(in_channels * math.prod(self.kernel_size))
    self.weight = Tensor.uniform(out_channels, in_channels // groups, *self.kernel_size, low=-scale, high=scale)
    self.bias = Tensor.uniform(out_channels, low=-scale, high=scale) if bias else None
  def __call__(self, x: Tensor) -> Tensor:
    return x.conv2d(self.weight, self.bias, groups=self.groups, stride=self.stride, dilation=self.dilation, padding=self.padding)

class LayerNorm:
  """Normalized over the last len(normalized_shape) dims, then scaled by weight (ones) and shifted by bias (zeros)."""
  def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True):
    self.normalized_shape = _tuple(normalized_shape, 1)
    self.axis, self.eps, self.elementwise_affine = tuple(-1 - i for i in range(len(self.normalized_shape))), eps, elementwise_affine
    self.weight = Tensor.ones(*self.normalized_shape) if elementwise_affine else None
    self.bias = Tensor.zeros(*self.normalized_shape) if elementwise_affine else None
  def __call__(self, x: Tensor) -> Tensor:
    if x.shape[-len(self.normalized_shape):] != self.normalized_shape:
      _err(ValueError, f"LayerNorm{self.normalized_shape} cannot normalize an input of shape {x.shape}")
    x = x.layernorm(eps=self.eps, axis=self.axis)
    return x * self.weight + self.bias if self.elementwise_affine else x

class LayerNorm2d(LayerNorm):
  """LayerNorm over the channels of an NCHW input (at each position), as tinygrad's: normalized_shape is the channels."""
  def __call__(self, x: Tensor) -> Tensor:
    if x.ndim != 4: _err(ValueError, f"LayerNorm2d takes an NCHW input, got shape {x.shape}")
    return super().__call__(x.permute(0, 2, 3, 1)).permute(0, 3, 1, 2)

class Embedding:
  """Rows of weight (vocab_size, embed_size, glorot uniform) picked by integer ids: a gather, O(ids x embed_size)."""
  def __init__(self, vocab_size: int, embed_size: int):
    self.vocab_sz, self.embed_sz = vocab_size, embed_size
    self.weight = Tensor.glorot_uniform(vocab_size, embed_size)
  def __call__(self, idx: Tensor) -> Tensor:
    if not isinstance(idx, Tensor) or not idx.dtype.is_int:
      _err(TypeError, f"Embedding takes an integer Tensor of ids, got {getattr(idx, 'dtype', idx)!r}")
    return self.weight[idx]

class BatchNorm:
  """Batch statistics over every dim but 1 while Tensor.training (running statistics updated with momentum, the
  variance unbiased), the running statistics otherwise (tinygrad's BatchNorm)."""
  def __init__(self, sz: int, eps: float = 1e-5, affine: bool = True, track_running_stats: bool = True, momentum: float = 0.1):
    self.eps, self.track_running_stats, self.momentum = eps, track_running_stats, momentum
    self.weight: Tensor | None = Tensor.ones(sz) if affine else None
    self.bias: Tensor | None = Tensor.zeros(sz) if affine else None
    # the statistics are data from the start, so every training step's graph has one structure (for a TinyJit too)
    self.num_batches_tracked = Tensor(np.zeros(1, np.int32), requires_grad=False)
    if track_running_stats: self.running_mean, self.running_var = (Tensor(np.full(sz, v, np.float32), requires_grad=False) for v in (0.0, 1.0))
  def calc_stats(self, x: Tensor) -> tuple[Tensor, Tensor]:
    shape_mask = [1, -1, *([1] * (x.ndim - 2))]
    if self.track_running_stats and not Tensor.training: return self.running_mean, self.running_var
    batch_mean = x.mean(axis=(axes := tuple(a for a in range(x.ndim) if a != 1)))
    y = x - batch_mean.detach().reshape(shape_mask)   # d(var)/d(mean) = 0
    return batch_mean, (y * y).mean(axis=axes)
  def __call__(self, x: Tensor) -> Tensor:
    if x.ndim < 2: _err(ValueError, f"BatchNorm needs an input with a channel dim 1, got shape {x.shape}")
    batch_mean, batch_var = self.calc_stats(x)
    if self.track_running_stats and Tensor.training:
      n = x._count(tuple(a for a in range(x.ndim) if a != 1), False)   # a tensor where the batch is symbolic
      unbiased = n / max(n - 1, 1) if isinstance(n, int) else n / (n - 1).maximum(1)
      rm, rv = self.running_mean, self.running_var
      rm.assign(((1 - self.momentum) * rm + self.momentum * batch_mean.detach()).cast(rm.dtype))
      rv.assign(((1 - self.momentum) * rv + self.momentum * unbiased * batch_var.detach()).cast(rv.dtype))
      self.num_batches_tracked += 1
    return x.batchnorm(self.weight, self.bias, batch_mean, batch_var.add(self.eps).rsqrt())
BatchNorm2d = BatchNorm
BatchNorm1d = BatchNorm

def Conv1d(in_channels: int, out_channels: int, kernel_size: int, stride=1, padding=0, dilation=1, groups: int = 1, bias: bool = True) -> Conv2d:
  """A Conv2d with a 1-d kernel: (N, C, L) inputs (tinygrad's)."""
  return Conv2d(in_channels, out_channels, (kernel_size,) if isinstance(kernel_size, int) else kernel_size, stride, padding, dilation, groups, bias)

def ConvTranspose1d(in_channels: int, out_channels: int, kernel_size: int, stride=1, padding=0, output_padding=0, dilation=1, groups: int = 1,
                    bias: bool = True) -> ConvTranspose2d:
  """A ConvTranspose2d with a 1-d kernel: (N, C, L) inputs (tinygrad's)."""
  return ConvTranspose2d(in_channels, out_channels, (kernel_size,) if isinstance(kernel_size, int) else kernel_size, stride, padding,
                         output_padding, dilation, groups, bias)

class ConvTranspose2d:
  """weight (in_channels, out_channels / groups, *kernel_size), uniform in +-1/sqrt(in_channels * prod(kernel_size))."""
  def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0, output_padding=0, dilation=1, groups: int = 1,
               bias: bool = True):
    self.kernel_size = _tuple(kernel_size, 2)
    self.stride, self.padding, self.output_padding, self.dilation, self.groups = stride, padding, output_padding, dilation, groups
    scale = 1 / math.sqrt(in_channels * math.prod(self.kernel_size))
    self.weight = Tensor.uniform(in_channels, out_channels // groups, *self.kernel_size, low=-scale, high=scale)
    self.bias = Tensor.uniform(out_channels, low=-scale, high=scale) if bias else None
  def __call__(self, x: Tensor) -> Tensor:
    return x.conv_transpose2d(self.weight, self.bias, groups=self.groups, stride=self.stride, dilation=self.dilation, padding=self.padding,
                              output_padding=self.output_padding)

def _affine(x: Tensor, weight: Tensor | None, bias: Tensor | None) -> Tensor:
  """x scaled and shifted per channel (dim 1)."""
  if weight is None: return x
  shape = (1, -1) + (1,) * (x.ndim - 2)
  return x * weight.reshape(shape) + bias.reshape(shape)

class GroupNorm:
  """Each sample's channels in num_groups groups, each group normalized over its channels and positions, then an
  affine per channel (weight ones, bias zeros)."""
  def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True):
    if num_channels % num_groups: _err(ValueError, f"GroupNorm: {num_channels} channels do not split into {num_groups} groups")
    self.num_groups, self.num_channels, self.eps = num_groups, num_channels, eps
    self.weight, self.bias = (Tensor.ones(num_channels), Tensor.zeros(num_channels)) if affine else (None, None)
  def __call__(self, x: Tensor) -> Tensor:
    if x.ndim < 2 or x.shape[1] != self.num_channels: _err(ValueError, f"GroupNorm of {self.num_channels} channels got shape {x.shape}")
    return _affine(x.reshape(x.shape[0], self.num_groups, -1).layernorm(eps=self.eps).reshape(x.shape), self.weight, self.bias)

class InstanceNorm:
  """Each sample's channels normalized over their positions, then an affine per channel (PyTorch's affine=False default
  is tinygrad's affine=True here, as tinygrad)."""
  def __init__(self, num_features: int, eps: float = 1e-5, affine: bool = True):
    self.num_features, self.eps = num_features, eps
    self.weight, self.bias = (Tensor.ones(num_features), Tensor.zeros(num_features)) if affine else (None, None)
  def __call__(self, x: Tensor) -> Tensor:
    if x.ndim < 3 or x.shape[1] != self.num_features: _err(ValueError, f"InstanceNorm of {self.num_features} features got shape {x.shape}")
    return _affine(x.reshape(x.shape[0], x.shape[1], -1).layernorm(eps=self.eps).reshape(x.shape), self.weight, self.bias)

class RMSNorm:
  """x / sqrt(mean(x^2 over the last dim) + eps), times weight (ones)."""
  def __init__(self, dim: int, eps: float = 1e-6, elementwise_affine: bool = True):
    self.eps, self.weight = eps, Tensor.ones(dim) if elementwise_affine else None
  def __call__(self, x: Tensor) -> Tensor:
    y = x * (x.square().mean(-1, keepdim=True) + self.eps).rsqrt()
    return y * self.weight if self.weight is not None else y

class LSTMCell:
  """One step of an LSTM (PyTorch's layout and tinygrad's initialisation): gates i, f, g, o from
  x @ weight_ih.T + bias_ih + h @ weight_hh.T + bias_hh (weights uniform in +-1/sqrt(hidden_size), biases zero);
  c' = sigmoid(f) * c + sigmoid(i) * tanh(g), h' = sigmoid(o) * tanh(c'). hc None: zero states."""
  def __init__(self, input_size: int, hidden_size: int, bias: bool = True):
    stdv = 1.0 / math.sqrt(hidden_size)
    self.weight_ih = Tensor.uniform(hidden_size * 4, input_size, low=-stdv, high=stdv)
    self.weight_hh = Tensor.uniform(hidden_size * 4, hidden_size, low=-stdv, high=stdv)
    self.bias_ih, self.bias_hh = (Tensor.zeros(hidden_size * 4), Tensor.zeros(hidden_size * 4)) if bias else (None, None)
  def __call__(self, x: Tensor, hc: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor]:
    if x.ndim != 2 or x.shape[1] != (n := self.weight_ih.shape[1]):
      _err(ValueError, f"LSTMCell({n}, {self.weight_hh.shape[1]}) takes a (batch, {n}) input, got {x.shape}")
    if hc is None: hc = (Tensor.zeros(x.shape[0], self.weight_hh.shape[1], dtype=x.dtype, device=x.device),) * 2
    gates = x.linear(self.weight_ih.T, self.bias_ih) + hc[0].linear(self.weight_hh.T, self.bias_hh)
    i, f, g, o = gates.chunk(4, dim=1)
    c = f.sigmoid() * hc[1] + i.sigmoid() * g.tanh()
    return (o.sigmoid() * c.tanh()).contiguous(), c.contiguous()
