"""Functional nn: pooling, convolution (tinygrad's formulation), interpolation, attention, normalisation and linear
layers; tinygrad's names and signatures (PyTorch's where tinygrad follows it)."""
from __future__ import annotations
import math
from typing import Self
import numpy as np
from morok_mlir.core.dtype import dtypes, least_upper_dtype
from morok_mlir.dialects.ops import Ops
from morok_mlir.core.mixin.helpers import _err, _prod, _shape, _isint, _float, _contraction, _f32, OpBase

class NNMixin(OpBase):
  __slots__ = ()
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
    if not isinstance(indices, OpBase): _err(TypeError, f"max_unpool2d takes a Tensor of indices, got {type(indices).__name__}")
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
    if not isinstance(weight, OpBase) or not (bias is None or isinstance(bias, OpBase)):
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
    floor((j+0.5)*in/out). Source positions are exact integer arithmetic on aranges; the neighbours are gathered along
    the dim (exact for any value, O(1) per element)."""
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
      if mode.startswith("nearest") and (nout % nin == 0 or nin % nout == 0):   # an integer factor: movement ops, no mask
        f = nin // nout
        x = x.repeat_interleave(nout // nin, d) if nout > nin else \
          x[(slice(None),) * d + (slice(f // 2 if mode == "nearest-exact" else 0, None, f),)]
        continue
      j = self._arange(nout)
      if 4 * nin * nout >= 1 << 31: j = j.cast(dtypes.int64)
      # the source position of output j is num/den: lo = num // den, and p = num/den - lo the weight of lo's neighbour
      if mode == "nearest": num, den = j * nin, nout
      elif mode == "nearest-exact": num, den = (j * 2 + 1) * nin, 2 * nout
      elif align_corners: num, den = j * (nin - 1), max(nout - 1, 1)
      else: num, den = ((j * 2 + 1) * nin - nout).maximum(0), 2 * nout
      lo = num.idiv(den)
      if mode.startswith("nearest"): x = x._pick(d, lo); continue
      p = ((num - lo * den).cast(dtypes.float32) / den).reshape((nout,) + (1,) * (self.ndim - 1 - d))
      x0, x1 = x._pick(d, lo)._fl(), x._pick(d, (lo + 1).minimum(nin - 1))._fl()
      x = (x0 * (1 - p) + x1 * p).cast(self.dtype)
    return x
  def _pick(self, d: int, i: Self) -> Self:
    """Along dim d, output j takes element i[j] (i: one index in [0, size) per output)."""
    sh = self.shape[:d] + i.shape + self.shape[d + 1:]
    return self.gather(d, i.reshape((1,) * d + i.shape + (1,) * (self.ndim - 1 - d))._broadcast_to(sh))
  def scaled_dot_product_attention(self, key: Self, value: Self, attn_mask: Self | None = None, dropout_p: float = 0.0,
                                   is_causal: bool = False, enable_gqa: bool = False) -> Self:
    """softmax(q k^T / sqrt(E) + mask) v (tinygrad's): a bool mask keeps where True, a float one is added; is_causal
    masks key j > query i (top-left aligned, as PyTorch). Dropout acts as dropout() does: only while Tensor.training
    (tinygrad's rule; PyTorch's function applies dropout_p always). enable_gqa: key and value have fewer heads (dim -3),
    a divisor of the query's, each shared by that many query heads in a row (PyTorch's grouped-query attention)."""
    if not isinstance(key, OpBase) or not isinstance(value, OpBase) or not (attn_mask is None or isinstance(attn_mask, OpBase)):
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
      if t is not None and (not isinstance(t, OpBase) or _prod(t.shape) != _prod(shape)):
        _err(ValueError, f"batchnorm: {name} must be a Tensor of {_prod(shape)} elements for axis {axis} of {self.shape}, "
                         f"got {getattr(t, 'shape', t)}")
    x = self - mean.reshape(shape)
    if weight is not None: x = x * weight.reshape(shape)
    ret = x * invstd.reshape(shape)
    return ret + bias.reshape(shape) if bias is not None else ret
  def linear(self, weight: Self, bias: Self | None = None) -> Self:
    """self @ weight + bias with weight (in, out), as tinygrad (PyTorch's F.linear takes (out, in)); a 1-d weight scales."""
    if not isinstance(weight, OpBase) or not (bias is None or isinstance(bias, OpBase)):
      _err(TypeError, "linear takes a weight Tensor and an optional bias Tensor")
    x = self * weight if weight.ndim == 1 else self.dot(weight)
    return x + bias if bias is not None else x

# then one multiply-reduce, which uop-optimize recognises as a contraction (packed operands, register-tiled FMAs)
def _pool(self: OpBase, k_: tuple[int, ...], stride=1, dilation=1) -> OpBase:
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

def _same_pads(padding, HW, stride, dilation):
  """padding as conv2d takes it: a string of PyTorch's as the flat pads it means, anything else as it is."""
  if not isinstance(padding, str): return padding
  if padding == "valid": return 0
  if padding != "same": _err(ValueError, f"invalid padding string {padding!r}: 'same' or 'valid'")
  if any(s != 1 for s in stride): _err(ValueError, f"padding='same' is not supported for strided convolutions (stride {tuple(stride)})")
  return [p for d, k in zip(dilation[::-1], HW[::-1]) for p in (d * (k - 1) // 2, d * (k - 1) - d * (k - 1) // 2)]

def conv2d(self: OpBase, weight: OpBase, bias: OpBase | None = None, groups=1, stride=1, dilation=1, padding=0, dtype=None) -> OpBase:
  """tinygrad's / PyTorch's conv2d (NCHW input, (cout, cin/groups, kh, kw) weight); padding: int, one per spatial dim,
  or PyTorch's flat (left, right, top, bottom), or PyTorch's strings: 'valid' (none) and 'same' (the output keeps the
  input's size: d*(k-1) per dim, the odd one on the right/bottom, stride 1 only). Arguments are checked as PyTorch checks
  them: groups, stride and dilation positive, padding non-negative, one value or one per spatial dim."""
  if not isinstance(weight, OpBase) or not (bias is None or isinstance(bias, OpBase)):
    _err(TypeError, "conv2d takes a weight Tensor and an optional bias Tensor")
  if weight.ndim < 3 or self.ndim != weight.ndim:
    _err(ValueError, f"conv2d needs an input and a weight of equal rank >= 3 (batch, channels, spatial dims), got {self.shape} and {weight.shape}")
  (bs, cin_), (cout, cin), HW = self.shape[:2], weight.shape[:2], weight.shape[2:]
  groups, = _ints(groups, 1, "groups", 1)
  stride, dilation = _ints(stride, len(HW), "stride", 1), _ints(dilation, len(HW), "dilation", 1)
  pads = _ints(_same_pads(padding, HW, stride, dilation), len(HW), "padding", 0, (1, 2))
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

NNMixin._pool, NNMixin.conv2d = _pool, conv2d
