"""Joining, splitting and layout: compositions of movement ops only (tinygrad's way), no data-dependent loads."""
from __future__ import annotations
import functools
from typing import Self
from morok_mlir.core.dtype import dtypes, least_upper_dtype
from morok_mlir.core import uop as U   # symbolic sizes are UOps (uop imports this package: names are read at call time)
from morok_mlir.core.mixin.helpers import _err, _argfix, _isint, _diag, OpBase

class LayoutMixin(OpBase):
  __slots__ = ()
  def _static(self, d: int, what: str) -> int:
    if self.ndim == 0: _err(IndexError, f"{what} needs a tensor with at least one dimension (dim out of range), got a 0-d tensor")
    if not isinstance(s := self.shape[d], int): _err(TypeError, f"{what} needs a static size in dim {d}, got symbolic {s!r}")
    return s
  def cat(self, *args: Self, dim: int = 0) -> Self:
    """PyTorch's cat: each input padded into the output's extent along dim, then merged by where (exact for -0.0 and NaN).
    Also callable as Tensor.cat(a, b) or Tensor.cat([a, b]). A 1-d empty tensor among tensors of another rank is skipped
    (PyTorch's rule), its dtype still promoted with the others'."""
    if isinstance(self, (list, tuple)) and args: _err(ValueError, "cat takes tensors, or one sequence of them, not both")
    ts = (*self, *args) if isinstance(self, (list, tuple)) else (self, *args)
    if not ts or not all(isinstance(t, OpBase) for t in ts): _err(TypeError, "cat expects a non-empty sequence of tensors")
    dt = least_upper_dtype(*(t.dtype for t in ts))
    if any(t.ndim != 1 for t in ts): ts = tuple(t for t in ts if t.shape != (0,))
    x = ts[0]
    d = x._dim(dim)
    for i, t in enumerate(ts[1:], 1):
      if t.ndim != x.ndim: _err(ValueError, f"cat: tensors must have the same number of dimensions, got {x.ndim} and {t.ndim} for tensor {i}")
      if bad := [j for j, (a, b) in enumerate(zip(x.shape, t.shape)) if j != d and a != b]:
        _err(ValueError, f"cat: sizes of tensors must match except in dimension {d}: expected size {x.shape[bad[0]]} but got size "
                         f"{t.shape[bad[0]]} for tensor {i} in dimension {bad[0]}")
    if len(ts) == 1: return x.cast(dt)
    if x.ndim == 0: x._static(d, "cat")   # (raises)
    sizes = [t.shape[d] for t in ts]   # a symbolic one pads the others by a bound size
    total, ret, off = functools.reduce(U.sadd, sizes), None, 0
    for t, n in zip(ts, sizes):
      if n.__class__ is not int or n:
        pad = tuple((off, U.ssub(U.ssub(total, off), n)) if j == d else None for j in range(x.ndim))
        p = t.cast(dt).pad(pad)
        ret = p if ret is None else t._full(t.shape, True, dtypes.bool).pad(pad).where(p, ret)
      off = U.sadd(off, n)
    return ret if ret is not None else x._full(x.shape[:d] + (0,) + x.shape[d + 1:], 0, dt)
  def stack(self, *args: Self, dim: int = 0) -> Self:
    if isinstance(self, (list, tuple)) and args: _err(ValueError, "stack takes tensors, or one sequence of them, not both")
    ts = (*self, *args) if isinstance(self, (list, tuple)) else (self, *args)
    if not ts or not all(isinstance(t, OpBase) for t in ts): _err(TypeError, "stack expects a non-empty sequence of tensors")
    if bad := [i for i, t in enumerate(ts) if t.shape != ts[0].shape]:
      _err(ValueError, f"stack expects each tensor to be equal size, but got {ts[0].shape} at entry 0 and {ts[bad[0]].shape} at entry {bad[0]}")
    d = ts[0]._dim(dim, extra=1)
    return ts[0].unsqueeze(d).cat(*(t.unsqueeze(d) for t in ts[1:]), dim=d)
  def split(self, sizes, dim: int = 0) -> tuple[Self, ...]:
    """PyTorch's split: chunks of `sizes` elements (the last one smaller), or exactly the given sizes."""
    d = self._dim(dim)
    n = self._static(d, "split")
    if _isint(sizes):
      if sizes < 0 or sizes == 0 and n: _err(ValueError, f"split_size must be positive for a dim of size {n}, got {sizes}")
      sizes = [min(sizes, n - i) for i in range(0, n, sizes)] if n else [0]
    elif not isinstance(sizes, (list, tuple)) or any(not _isint(s) for s in sizes):
      _err(TypeError, f"split sizes must be an int or a list of ints, got {sizes!r}")
    if any(s < 0 for s in sizes) or sum(sizes) != n:
      _err(ValueError, f"split sizes {list(sizes)} must be non-negative and sum exactly to {n} (the size of dim {d})")
    offs = [sum(sizes[:i]) for i in range(len(sizes) + 1)]
    return tuple(self.shrink(tuple((offs[i], offs[i + 1]) if j == d else None for j in range(self.ndim))) for i in range(len(sizes)))
  def chunk(self, chunks: int, dim: int = 0) -> tuple[Self, ...]:
    """PyTorch's chunk: splits of ceil(size/chunks) elements, so there may be fewer than `chunks` pieces."""
    if not _isint(chunks) or chunks <= 0:
      _err(ValueError, f"chunk expects `chunks` to be a positive int, got {chunks!r}")
    d = self._dim(dim)
    n = self._static(d, "chunk")
    return self.split(-(-n // chunks) if n else [0] * chunks, d)
  def repeat(self, repeats, *args) -> Self:
    """PyTorch's repeat (numpy's tile): one expand of a broadcast axis put before each dim."""
    reps = _argfix(repeats, *args)
    if any(not _isint(r) for r in reps): _err(TypeError, f"repeats must be ints, got {reps}")
    if len(reps) < self.ndim:
      _err(ValueError, f"number of dimensions of repeat dims ({len(reps)}) can not be smaller than number of dimensions of tensor ({self.ndim})")
    if any(r < 0 for r in reps): _err(ValueError, f"repeats can not be negative, got {tuple(reps)}")
    base = (1,) * (len(reps) - self.ndim) + self.shape
    x = self.reshape(tuple(v for s in base for v in (1, s))).expand(tuple(v for r, s in zip(reps, base) for v in (r, s)))
    return x.reshape(tuple(U.smul(s, r) if isinstance(s, U.UOp) else r * s for r, s in zip(reps, base)))
  def repeat_interleave(self, repeats: int, dim: int | None = None) -> Self:
    """Each element `repeats` times along dim (flattened when dim is None)."""
    if not _isint(repeats): _err(TypeError, f"repeats must be an int, got {repeats!r}")
    if repeats < 0: _err(ValueError, f"repeats can not be negative, got {repeats}")
    x, d = (self.flatten(), 0) if dim is None else (self, self._dim(dim))
    sh = x.shape
    x = x.reshape(sh[:d + 1] + (1,) + sh[d + 1:]).expand(sh[:d + 1] + (repeats,) + sh[d + 1:])
    return x.reshape(sh[:d] + (x._static(d, "repeat_interleave") * repeats,) + sh[d + 1:])
  def roll(self, shifts, dims=None) -> Self:
    """PyTorch's roll: the dim repeated twice, then the window starting at size - shift (flattened when dims is None)."""
    if dims is None: return self.flatten().roll(shifts, 0).reshape(self.shape)
    dims, shifts = (dims if isinstance(dims, (tuple, list)) else (dims,)), (shifts if isinstance(shifts, (tuple, list)) else (shifts,))
    if len(dims) != len(shifts): _err(ValueError, f"shifts and dimensions must align, got shifts={tuple(shifts)}, dims={tuple(dims)}")
    if any(not _isint(s) for s in shifts): _err(TypeError, f"shifts must be ints, got {shifts}")
    ds = [self._dim(d) for d in dims]
    shift = {d: 0 for d in ds}
    for d, s in zip(ds, shifts): shift[d] += int(s)   # a dim named twice shifts twice, as in PyTorch
    shift = {d: s % n for d, s in shift.items() if (n := self._static(d, "roll")) and s % n}
    if not shift: return self
    x = self.repeat(tuple(2 if i in shift else 1 for i in range(self.ndim)))
    return x.shrink(tuple((n - shift[i], 2 * n - shift[i]) if i in shift else None for i, n in enumerate(self.shape)))
  def pad_to(self, shape, *args) -> Self:
    """Zero-pad at the end of each dim up to shape (None keeps a dim)."""
    shape = _argfix(shape, *args)
    if len(shape) != self.ndim: _err(ValueError, f"pad_to: shape {tuple(shape)} needs {self.ndim} dims to match {self.shape}")
    if any(n is not None and (not isinstance(n, int) or not isinstance(s, int)) for s, n in zip(self.shape, shape)):
      _err(TypeError, f"pad_to needs static sizes, got {tuple(shape)} for {self.shape}")
    if any(n is not None and n < s for s, n in zip(self.shape, shape)): _err(ValueError, f"pad_to: {tuple(shape)} is smaller than {self.shape}")
    return self.pad(tuple(None if n is None else (0, n - s) for s, n in zip(self.shape, shape)))
  def unfold(self, dim: int, size: int, step: int) -> Self:
    """PyTorch's unfold: windows of `size` every `step` along dim, as a new last dim (the window view of _pool)."""
    d = self._dim(dim)
    n = self._static(d, "unfold") if self.ndim else 1
    if any(not _isint(v) for v in (size, step)): _err(TypeError, "unfold: size and step must be ints")
    if size < 0: _err(ValueError, f"unfold: size must be >= 0, got {size}")
    if step <= 0: _err(ValueError, f"unfold: step must be > 0, got {step}")
    if size > n: _err(ValueError, f"unfold: maximum size for tensor at dimension {d} is {n} but size is {size}")
    if self.ndim == 0: return self.reshape(1)
    if size == 0:   # empty windows, taken from self so that gradients reach it (as zeros)
      empty = self.unsqueeze(-1).shrink(tuple((0, s) for s in self.shape) + ((0, 0),))
      return empty.reshape(self.shape[:d] + (n // step + 1,) + self.shape[d + 1:] + (0,))
    last = tuple(i for i in range(self.ndim) if i != d) + (d,)
    return self.permute(last)._pool((size,), step).permute(*range(d), self.ndim - 1, *range(d, self.ndim - 1), self.ndim)
  def meshgrid(self, *args: Self, indexing: str = "ij") -> tuple[Self, ...]:
    """PyTorch's meshgrid of 0-d or 1-d tensors: each one reshaped along its own axis and broadcast to the grid."""
    if indexing not in ("ij", "xy"): _err(ValueError, f"indexing must be 'ij' or 'xy', got {indexing!r}")
    ts = (*self, *args) if isinstance(self, (list, tuple)) else (self, *args)
    if not ts or not all(isinstance(t, OpBase) for t in ts): _err(TypeError, "meshgrid expects a non-empty sequence of tensors")
    if bad := [t.shape for t in ts if t.ndim > 1]: _err(ValueError, f"meshgrid expects 0-d or 1-d tensors, got shape {bad[0]}")
    ts = tuple(t.reshape(-1) for t in ts)
    axes = list(range(len(ts)))
    if indexing == "xy" and len(ts) > 1: axes[0], axes[1] = 1, 0
    shape = [None] * len(ts)
    for a, t in zip(axes, ts): shape[a] = t.shape[0]
    return tuple(t.reshape(tuple(t.shape[0] if i == a else 1 for i in range(len(ts)))).expand(tuple(shape)) for a, t in zip(axes, ts))
  def diag(self) -> Self:
    """1-d -> the square matrix with it on the diagonal (each element padded with n zeros, flattened, cut to n*n);
    2-d -> its main diagonal, as PyTorch."""
    if self.ndim == 2: return self.diagonal()
    if self.ndim != 1: _err(ValueError, f"diag expects a 1-d or 2-d tensor, got {self.ndim}-d")
    n = self._static(0, "diag")
    return self.unsqueeze(-1).pad((None, (0, n))).flatten().shrink(((0, n * n),)).reshape(n, n)
  def diagonal(self) -> Self:
    """The main diagonal of a 2-d tensor: rows of min(n, m) padded by one more, so that column 0 walks the diagonal."""
    if self.ndim != 2: _err(ValueError, f"diagonal expects a 2-d tensor, got {self.ndim}-d")
    k = min(self._static(0, "diagonal"), self._static(1, "diagonal"))
    return self.shrink(((0, k), (0, k))).flatten().pad(((0, k),)).reshape(k, k + 1).shrink((None, (0, 1))).reshape(k)
  def _tri(self, r: int, c: int, diagonal: int = 0) -> Self:
    """The bool mask j - i >= diagonal of shape (r, c), by movement only (tinygrad's): rows of ones padded by s and cut
    so that row i starts i places later, which for both Tensor and UOp needs no arange."""
    if any(isinstance(x, U.UOp) for x in (r, c, diagonal)): return self._tri_sym(r, c, diagonal)
    if diagonal >= c or r == 0 or c == 0: return self._full((r, c), False, dtypes.bool)
    if r + diagonal <= 0: return self._full((r, c), True, dtypes.bool)
    s = r + c - 1
    t = self._full((s, s), True, dtypes.bool).pad((None, (0, s))).flatten().shrink(((0, s * (2 * s - 1)),)).reshape(s, 2 * s - 1)
    t = t.shrink((None, (0, s)))
    return t.shrink(((0, r), (-diagonal, c - diagonal))) if diagonal <= 0 else t.shrink(((diagonal, r + diagonal), (0, c)))
  def _tri_sym(self, r, c, diagonal) -> Self:
    """_tri with a symbolic size or diagonal: a Tensor compares aranges (Tensor._tri_sym); a graph of UOps cannot."""
    _err(TypeError, f"a triangle mask of a graph of UOps needs static sizes, got ({r!r}, {c!r}, diagonal {diagonal!r})")
  def _mat(self, what: str) -> tuple[int, int]:
    if self.ndim < 2: _err(ValueError, f"{what} expects a tensor with at least 2 dims, got {self.ndim}-d")
    return self.shape[-2], self.shape[-1]
  def triu(self, diagonal: int = 0) -> Self:
    """Zero below the diagonal-th diagonal of the last two dims (a mask built by movement, then where)."""
    return self._tri(*self._mat("triu"), _diag(diagonal, True)).where(self, self._const(0, self.dtype))
  def tril(self, diagonal: int = 0) -> Self:
    """Zero above the diagonal-th diagonal of the last two dims."""
    return self._tri(*self._mat("tril"), _diag(diagonal, True) + 1).where(self._const(0, self.dtype), self)
  def _pad_mode(self, pads: tuple[tuple[int, int], ...], mode: str) -> Self:
    """reflect / replicate / circular padding (PyTorch's), dim by dim: the pieces before and after are shrinks (flipped
    for reflect, expanded for replicate) joined by cat. As in PyTorch, negative pads cut after reflect and replicate padding
    (out[j] = self[f(j - before)] along each dim: reflect (1, -2) of [a, b, c] is [b, a]) but before circular padding
    (circular (1, -1) of [a, b, c] is [b, a, b])."""
    cut = lambda t: t.shrink(tuple((-min(b, 0), U.sadd(s, min(a, 0))) for s, (b, a) in zip(t.shape, pads)))
    x = cut(self) if mode == "circular" else self
    for d, (b, a) in enumerate((max(b, 0), max(a, 0)) for b, a in pads):
      if b == a == 0: continue
      n = x._static(d, f"{mode} padding")
      if mode == "reflect" and (b >= n or a >= n):
        _err(ValueError, f"padding size should be less than the corresponding input dimension, but got padding ({b}, {a}) at dimension {d} "
                         f"of input {x.shape}")
      if mode == "replicate" and n == 0: _err(ValueError, f"replicate padding of dimension {d} of input {x.shape}, which is empty")
      if mode == "circular" and (b > n or a > n): _err(ValueError, f"padding ({b}, {a}) at dimension {d} wraps around input {x.shape} more than once")
      piece = lambda lo, hi: x.shrink(tuple((lo, hi) if j == d else None for j in range(x.ndim)))
      grow = lambda t, k: t.expand(tuple(k if j == d else s for j, s in enumerate(t.shape)))
      if mode == "reflect": pb, pa = piece(1, b + 1).flip(d), piece(n - 1 - a, n - 1).flip(d)
      elif mode == "replicate": pb, pa = grow(piece(0, 1), b), grow(piece(n - 1, n), a)
      else: pb, pa = piece(n - b, n), piece(0, a)
      x = pb.cat(x, pa, dim=d)
    return x if mode == "circular" else cut(x)
