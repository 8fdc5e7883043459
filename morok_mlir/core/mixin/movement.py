"""Movement: reshape, expand, permute, pad, shrink, flip and what is built from them alone (transpose, squeeze,
flatten, basic indexing)."""
from __future__ import annotations
import math
from typing import Self
import numpy as np
from morok_mlir.core.dtype import dtypes
from morok_mlir.dialects.ops import Ops
from morok_mlir.core import uop as U   # symbolic sizes are UOps (uop imports this package: names are read at call time)
from morok_mlir.core.mixin.helpers import _err, _prod, _argfix, _sz, _plain, _shape, _NONE, OpBase

def _basic_plan(shape: tuple, idx: tuple) -> tuple[list, list, list, list]:
  """numpy's basic indexing (ints, slices of any step, None, ...) as movement: per dim its shrink bounds and
  stride, the dims to flip, and the result's shape. MovementMixin.__getitem__ applies it, _basic_put undoes it."""
  for i in idx:
    if not (i is None or i is Ellipsis or isinstance(i, (int, np.integer, slice)) or isinstance(i, U.UOp) and i.dtype is dtypes.index) \
        or isinstance(i, (bool, np.bool_)):
      _err(TypeError, f"unsupported index {i!r} (ints, slices, None, ..., and on a Tensor integer or bool arrays are supported)")
  if sum(i is Ellipsis for i in idx) > 1: _err(IndexError, "an index can only have a single ellipsis ('...')")
  used = sum(i is not None and i is not Ellipsis for i in idx)
  if used > len(shape): _err(IndexError, f"too many indices for tensor of dimension {len(shape)}")
  e = idx.index(Ellipsis) if Ellipsis in idx else len(idx)
  idx = idx[:e] + (slice(None),) * (len(shape) - used) + idx[e + 1:]
  bounds, flips, steps, out, d = [], [], [], [], 0
  for i in idx:
    if i is None: out.append(1); continue
    s = shape[d]
    if isinstance(s, U.UOp) or isinstance(i, U.UOp) or isinstance(i, slice) and (isinstance(i.start, U.UOp) or isinstance(i.stop, U.UOp)):
      b, n = _symbolic_slice(s, i, d)
      bounds.append(b); steps.append(1)
      if isinstance(i, slice): out.append(n)
    elif isinstance(i, slice):
      start, stop, step = i.indices(s) if i.step != 0 else _err(ValueError, "slice step cannot be zero")
      n = len(range(start, stop, step))
      lo, hi = (start, start + (n - 1) * step + 1) if step > 0 else (start + (n - 1) * step, start + 1)
      bounds.append((lo, hi) if n else (0, 0)); steps.append(abs(step) if n > 1 else 1); out.append(n)
      if step < 0 and n > 1: flips.append(d)
    else:
      if not -s <= i < s: _err(IndexError, f"index {i} is out of bounds for dimension {d} with size {s}")
      bounds.append((i % s, i % s + 1)); steps.append(1)
    d += 1
  return bounds, flips, steps, out

def _symbolic_slice(s: U.UOp, i, d: int) -> tuple[tuple, object]:
  """(shrink bounds, size) of index i (an int, or a slice of step 1) along a symbolic dim of size s (or a slice with a
  bound size as start or stop along any dim), numpy's at the bound values: each bound is a constant, a bound size as
  given (it must lie in [0, s] at every value its variables take), or an offset from s where numpy's counts from the
  end (a start or stop left out, or negative), so the graph holds no value and one schedule serves every value that
  picks the same form. A bound size as an index is the slice of one element at it."""
  if isinstance(i, U.UOp): return _symbolic_slice(s, slice(i, i + 1), d)[0], 1
  if not isinstance(i, slice):
    if not U.assume(int(i) + 1 if i >= 0 else -int(i), s): _err(IndexError, f"index {i} is out of bounds for dimension {d} with size {s!r}")
    lo = int(i) if i >= 0 else U.sadd(s, int(i))
    return (lo, U.sadd(lo, 1)), 1
  if i.step is not None and i.step != 1:
    _err(IndexError, f"slice step {i.step} along dimension {d} of symbolic size {s!r}: only a step of 1 is supported")
  def at(x, default):   # numpy's bound clamped into [0, val], as an int or an offset from s
    if x is None: return default
    if isinstance(x, U.UOp):   # checked at its value, as numpy's; a TinyJit replay checks it at its own
      if U.sym_val(_sz(x, "slice bound")) < 0 or not U.assume(x, s):
        _err(IndexError, f"slice bound {x!r} is outside dimension {d} of size {s!r}")
      return x
    x = int(x)
    if x < 0: return U.sadd(s, x) if U.assume(-x, s) else 0
    return x if U.assume(x, s) else s
  lo, hi = at(i.start, 0), at(i.stop, s)
  given = isinstance(i.start, U.UOp) or isinstance(i.stop, U.UOp)   # a bound size as a bound: kept whatever its value
  if given and U.sym_range(U.ssub(hi, lo))[0] >= 0 or U.assume(U.sadd(lo, 1), hi): return (lo, hi), U.ssub(hi, lo)
  return (0, 0), 0

class MovementMixin(OpBase):
  __slots__ = ()
  @property
  def ndim(self) -> int: return len(self.shape)
  def numel(self) -> int: return _prod(self.shape)
  # movement the composite ops build from sizes they know to be valid (the public methods' checks and argument forms
  # skipped, the nodes the same)
  def _reshaped(self, shape: tuple) -> Self: return self if shape == self.shape else self._op(Ops.RESHAPE, shape)
  def _expanded(self, shape: tuple) -> Self:
    """self broadcast to shape, a valid shape (_shape) that self broadcasts to."""
    if (sh := self.shape) == shape: return self
    x = self if len(sh) == len(shape) else self._reshaped((1,) * (len(shape) - len(sh)) + sh)
    return x if x.shape == shape else x._op(Ops.EXPAND, shape)
  def _permuted(self, order: tuple[int, ...]) -> Self:
    sh = self.shape
    return self if order == tuple(range(len(sh))) else self._op(Ops.PERMUTE, tuple(sh[o] for o in order), order=order)
  def _dim(self, d: int, extra: int = 0) -> int:
    n = len(self.shape) + extra
    if d.__class__ is int and -n <= d < n: return d + n if d < 0 else d   # the common case
    if not isinstance(d, (int, np.integer)): _err(TypeError, f"dimension must be an int, got {type(d).__name__}")
    if not (-max(n, 1) <= d < max(n, 1)): _err(IndexError, f"dimension out of range (expected to be in range of [{-max(n, 1)}, {max(n, 1) - 1}], but got {d})")
    return d + n if d < 0 else d
  def reshape(self, shape, *args) -> Self:
    if args or shape.__class__ is not tuple: shape = _argfix(shape, *args)
    if _NONE in map(type, shape): shape = tuple(s if s is not None else self.shape[i] for i, s in enumerate(shape))
    if _plain(shape) and type(n := self._node.size) is int and math.prod(shape) == n:   # the common case
      return self if shape == self.shape else self._op(Ops.RESHAPE, shape)
    if any(not isinstance(s, (int, np.integer, U.UOp)) or not isinstance(s, U.UOp) and s < -1 for s in shape) or shape.count(-1) > 1:
      _err(ValueError, f"invalid shape {shape}")
    shape = tuple(_sz(s) if isinstance(s, U.UOp) else int(s) for s in shape)
    n = U.sym_val(self.numel())   # a symbolic size is checked at its bound value
    if -1 in shape:
      rest = _prod(s for s in shape if s != -1)
      if U.sym_val(rest) == 0 or n % U.sym_val(rest): _err(ValueError, f"shape {shape} is invalid for input of size {n}")
      shape = tuple(U.salu(Ops.IDIV, self.numel(), rest) if s == -1 else s for s in shape)
    if U.sym_val(_prod(shape)) != n: _err(ValueError, f"shape {shape} is invalid for input of size {n}")
    return self if shape == self.shape else self._op(Ops.RESHAPE, shape)
  view = reshape
  def _broadcast_to(self, shape: tuple[int, ...]) -> Self:
    if (sh := self.shape) == shape: return self
    if len(shape) < len(sh) or any(s != 1 and s != t for s, t in zip(sh[::-1], shape[::-1])):
      _err(ValueError, f"cannot broadcast {sh} to {shape}")
    return self._expanded(_shape(shape))   # the only movement op besides pad that makes more elements
  def expand(self, shape, *args) -> Self:
    shape = _argfix(shape, *args)
    if len(shape) < self.ndim: _err(ValueError, f"cannot expand {self.shape} to {shape}: fewer dimensions")
    old = (None,) * (len(shape) - self.ndim) + self.shape
    return self._broadcast_to(tuple(o if s == -1 and o is not None else s for o, s in zip(old, shape)))
  def broadcast_to(self, shape) -> Self: return self.expand(shape)
  def expand_as(self, other: Self) -> Self: return self.expand(other.shape)
  def permute(self, order, *args) -> Self:
    order, n = _argfix(order, *args), len(self.shape)
    if not (_plain(order) and len(order) == n and max(order, default=0) < n and len(set(order)) == n):   # else: negative dims, errors
      order = tuple(self._dim(o) for o in order)
      if sorted(order) != list(range(n)): _err(ValueError, f"{order} is not a permutation of the {n} dims of {self.shape}")
    return self._permuted(order)
  def pad(self, padding, mode: str = "constant", value=0.0) -> Self:
    """padding: (before, after) or None per dim, or PyTorch's flat (left, right, top, bottom, ...) starting at the last dim.
    Negative padding cuts, as in PyTorch."""
    if mode not in ("constant", "reflect", "replicate", "circular"):
      _err(NotImplementedError, f"pad mode {mode!r} is not supported ('constant', 'reflect', 'replicate' or 'circular')")
    if not isinstance(padding, (tuple, list)): _err(TypeError, f"padding must be a tuple or list, got {type(padding).__name__}")
    if all(isinstance(p, (int, np.integer)) for p in padding):
      if len(padding) % 2 or len(padding) > 2 * self.ndim: _err(ValueError, f"flat padding {tuple(padding)} must have an even length <= {2 * self.ndim}")
      pads = ((0, 0),) * (self.ndim - len(padding) // 2) + tuple(zip(padding[-2::-2], padding[::-2]))
    else:
      if len(padding) != self.ndim: _err(ValueError, f"padding {tuple(padding)} needs one entry per dim of {self.shape}")
      pads = tuple((0, 0) if p is None else tuple(p) if isinstance(p, (tuple, list)) else (p,) for p in padding)
    if any(len(p) != 2 for p in pads): _err(ValueError, f"invalid padding {tuple(padding)}")
    if any(not isinstance(v, (int, np.integer, U.UOp)) or isinstance(v, (bool, np.bool_)) for p in pads for v in p):
      _err(TypeError, f"padding {tuple(padding)} must hold ints or bound sizes")
    # a symbolic width (a bound size, as a setitem along a symbolic dim makes) pads with zeros and may not cut
    if any(isinstance(v, U.UOp) and (U.sym_val(_sz(v, "pad width")) < 0 or mode != "constant") for p in pads for v in p):
      _err(ValueError, f"padding {pads}: a symbolic width must be a bound size >= 0, in constant mode")
    pads = tuple(tuple(v if isinstance(v, U.UOp) else int(v) for v in p) for p in pads)
    if any(U.sym_val(s) + U.sym_val(b) + U.sym_val(a) < 0 for s, (b, a) in zip(self.shape, pads)):
      _err(ValueError, f"padding {pads} cuts more than {self.shape}")
    if mode != "constant": return self._pad_mode(pads, mode)
    cut = lambda v: min(v, 0) if isinstance(v, int) else 0
    x = self.shrink(tuple((-cut(b), U.sadd(s, cut(a))) for s, (b, a) in zip(self.shape, pads)))
    pads = tuple(tuple(v if isinstance(v, U.UOp) else max(v, 0) for v in p) for p in pads)
    if all(p == (0, 0) for p in pads): return x
    ret = x._op(Ops.PAD, _shape(tuple(U.sadd(U.sadd(s, b), a) for s, (b, a) in zip(x.shape, pads))), padding=tuple(v for p in pads for v in p))
    if value == 0: return ret
    return self._full(x.shape, True, dtypes.bool).pad(pads).where(ret, self._const(value, self.dtype))  # the padded region holds `value`
  def shrink(self, arg) -> Self:
    if len(arg) != self.ndim: _err(ValueError, f"shrink {tuple(arg)} needs one entry per dim of {self.shape}")
    bnd = lambda x: _sz(x, "shrink bound") if isinstance(x, U.UOp) else int(x)
    arg = tuple((0, s) if a is None else (bnd(a[0]), bnd(a[1])) for s, a in zip(self.shape, arg))
    if any(not (0 <= U.sym_val(b) <= U.sym_val(e) <= U.sym_val(s)) for s, (b, e) in zip(self.shape, arg)):
      _err(ValueError, f"invalid shrink {arg} of {self.shape}")
    if all(a == (0, s) for s, a in zip(self.shape, arg)): return self
    return self._op(Ops.SHRINK, tuple(U.ssub(e, b) for b, e in arg), bounds=tuple(v for a in arg for v in a))
  def flip(self, axis, *args) -> Self:
    axes = tuple(self._dim(a) for a in _argfix(axis, *args))
    if len(set(axes)) != len(axes): _err(ValueError, f"dim appears multiple times in {axes}")
    if self.ndim == 0: return self   # a 0-d tensor accepts dim 0/-1, as in PyTorch
    axes = tuple(sorted(a for a in axes if isinstance(self.shape[a], U.UOp) or self.shape[a] > 1))  # flipping a size-0/1 dim is a no-op
    return self._op(Ops.FLIP, self.shape, axes=axes) if axes else self
  def t(self) -> Self:
    """PyTorch's t(): a matrix transposed; a 0-d or 1-d tensor as it is."""
    if self.ndim > 2: _err(ValueError, f"t() expects a tensor with <= 2 dimensions, got shape {self.shape}: use transpose or permute")
    return self.transpose(0, 1) if self.ndim == 2 else self
  def transpose(self, dim0: int = 1, dim1: int = 0) -> Self:
    d0, d1 = self._dim(dim0), self._dim(dim1)
    if self.ndim == 0: return self   # a 0-d tensor accepts dims 0/-1, as in PyTorch
    order = list(range(self.ndim))
    order[d0], order[d1] = order[d1], order[d0]
    return self.permute(order)
  @property
  def T(self) -> Self: return self.permute(tuple(range(self.ndim))[::-1])
  def squeeze(self, dim: int | None = None) -> Self:
    if dim is None: return self.reshape(tuple(s for s in self.shape if s != 1))
    if self.ndim == 0: self._dim(dim); return self
    d = self._dim(dim)
    return self if self.shape[d] != 1 else self.reshape(self.shape[:d] + self.shape[d + 1:])
  def unsqueeze(self, dim: int) -> Self:
    d = self._dim(dim, extra=1)
    return self.reshape(self.shape[:d] + (1,) + self.shape[d:])
  def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Self:
    if self.ndim == 0: return self.reshape(1)
    s, e = self._dim(start_dim), self._dim(end_dim)
    return self.reshape(self.shape[:s] + (_prod(self.shape[s:e + 1]),) + self.shape[e + 1:])
  def unflatten(self, dim: int, sizes) -> Self:
    d = self._dim(dim)
    return self.reshape(self.shape[:d] + tuple(sizes) + self.shape[d + 1:])
  def __getitem__(self, idx) -> Self:
    """Basic indexing: ints, slices (any step, negative included), None and Ellipsis."""
    bounds, flips, steps, out = _basic_plan(self.shape, idx if isinstance(idx, tuple) else (idx,))
    x = self.shrink(bounds).flip(flips) if flips else self.shrink(bounds)
    for d, st in enumerate(steps):  # stride: pad to a multiple of st, split the dim into (n, st), keep column 0
      if st == 1: continue
      n = -(-x.shape[d] // st)
      x = x.pad(tuple((0, n * st - x.shape[d]) if j == d else None for j in range(x.ndim)))
      x = x.reshape(x.shape[:d] + (n, st) + x.shape[d + 1:]).shrink(tuple((0, 1) if j == d + 1 else None for j in range(x.ndim + 1)))
      x = x.reshape(x.shape[:d] + (n,) + x.shape[d + 2:])
    return x.reshape(tuple(out))
  def _basic_put(self, shape: tuple, idx: tuple) -> Self:
    """self (shaped as x[idx] for an x of shape `shape`) moved to where x[idx] reads it, 0 (False) elsewhere: the movement
    of __getitem__ undone, movement ops only (a setitem's value and mask)."""
    bounds, flips, steps, _ = _basic_plan(shape, idx)
    v = self.reshape(tuple(U.ssub(hi, lo) if st == 1 else -(-(hi - lo) // st) for (lo, hi), st in zip(bounds, steps)))
    for d, st in enumerate(steps):  # each kept element back to the front of its stride of st
      if st == 1: continue
      n, keep = v.shape[d], bounds[d][1] - bounds[d][0]
      v = v.reshape(v.shape[:d] + (n, 1) + v.shape[d + 1:]).pad(tuple((0, st - 1) if j == d + 1 else None for j in range(v.ndim + 1)))
      v = v.reshape(v.shape[:d] + (n * st,) + v.shape[d + 2:])
      v = v.shrink(tuple((0, keep) if j == d else None for j in range(v.ndim)))
    if flips: v = v.flip(flips)
    return v.pad(tuple((lo, U.ssub(s, hi)) for (lo, hi), s in zip(bounds, shape)))
