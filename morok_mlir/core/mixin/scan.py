"""Scans along the last axis (cumsum, cumprod, logcumsumexp, cummax) and ordering built on them (sort, argsort, topk)."""
from __future__ import annotations
import math
from typing import Self
from morok_mlir.core.dtype import dtypes, least_upper_dtype
from morok_mlir.dialects.ops import Ops, REDUCE_IDENTITY
from morok_mlir.core.mixin.helpers import _err, _isint, _f32, OpBase

SCAN_BLOCK = 256   # elements a scan's window reduce takes at once (see _scan)

class ScanMixin(OpBase):
  __slots__ = ()
  def _scan(self, op, block: int = SCAN_BLOCK) -> Self:
    """Inclusive scan along the last axis, O(n * block): a window reduce within blocks of `block` elements (each
    position sees the block-1 before it, identity-padded), then the exclusive scan of the block totals, recursively,
    combined in. op: Ops.ADD, Ops.MUL, Ops.MAX, or "lse" (log-add-exp)."""
    n, ident = self.shape[-1], {Ops.ADD: 0, Ops.MUL: 1, Ops.MAX: REDUCE_IDENTITY[Ops.MAX](self.dtype), "lse": -math.inf}[op]
    if n <= 2 * block:
      w = self.pad(((0, 0),) * (self.ndim - 1) + ((n - 1, 0),), value=ident)._pool((n,))
      if op == "lse":
        m = w.max(-1, keepdim=True)
        ms = m.isinf().where(0.0, m)   # an infinite max shifts by 0: exp(w - inf) would be NaN
        return (w - ms).exp().sum(-1).log() + ms.reshape(ms.shape[:-1])
      return w._reduce(op, -1)
    nb = -(-n // block)
    x = self.pad(((0, 0),) * (self.ndim - 1) + ((nb * block - n, 0),), value=ident).reshape(*self.shape[:-1], nb, block)._scan(op, block)
    base = x.shrink((None,) * (x.ndim - 1) + ((block - 1, block),)).reshape(x.shape[:-1])._scan(op, block)
    base = base.pad(((0, 0),) * (base.ndim - 1) + ((1, -1),), value=ident).unsqueeze(-1)   # exclusive: the totals of earlier blocks
    ret = x._combine(op, base._broadcast_to(x.shape))
    return ret.flatten(-2).shrink((None,) * (ret.ndim - 2) + ((nb * block - n, nb * block),))
  def _combine(self, op, y: Self) -> Self:
    if op != "lse": return {Ops.ADD: self.add, Ops.MUL: self.mul, Ops.MAX: self.maximum}[op](y)
    m = self.maximum(y)
    ms = m.isinf().where(0.0, m)
    return ((self - ms).exp() + (y - ms).exp()).log() + ms
  def _cumalu(self, axis, op) -> Self:
    if self.ndim == 0: self._dim(axis); return self
    d = self._dim(axis)
    if self._static(d, "cumulative op") == 0: return self
    x = self.transpose(d, -1)
    # a long axis other than the last is stored moved last: the blocks' window reduces, their totals' scans and the
    # combine then read their rows in order (read through the transposing view, their terms lie a row apart, each
    # output's a column of its own); a short one (one window reduce) keeps reading the view, its lanes along the rows
    if d != self.ndim - 1 and self.shape[d] > 2 * SCAN_BLOCK: x = x.contiguous()
    return x._scan(op).transpose(d, -1)
  def cumsum(self, axis: int = 0) -> Self:
    """Running sum along axis in the dtype sum accumulates in (ints and bools in 64 bits, as sum), O(n * 256) work."""
    return self._accumulated(lambda x: x._cumalu(axis, Ops.ADD), None)
  def cumprod(self, axis: int) -> Self:
    """Running product by the same block structure as cumsum (exact for zeros and negatives), in prod's dtype."""
    return self._accumulated(lambda x: x._cumalu(axis, Ops.MUL), None)
  @_f32
  def logcumsumexp(self, axis: int = 0) -> Self:
    """log(cumsum(exp(x))), each block shifted by its max so that exp never overflows."""
    return self._fl()._cumalu(axis, "lse")
  def cummax(self, axis: int = 0) -> tuple[Self, Self]:
    """Running max and its index, as PyTorch: a tie or a NaN (which propagates) takes the latest index. The index is the
    running max of the positions where x reaches its running max, since the latest such position holds the max."""
    v = self._cumalu(axis, Ops.MAX)
    if self.ndim == 0 or 0 in self.shape: return v, self._full(self.shape, 0, dtypes.default_int)
    d = self._dim(axis)
    hit = self.eq(v) | self.isnan() if self.dtype.is_float else self.eq(v)
    idx = self._arange(self.shape[d]).reshape(tuple(s if i == d else 1 for i, s in enumerate(self.shape)))
    return v, hit.where(idx, 0)._cumalu(d, Ops.MAX)
  def sort(self, dim: int = -1, descending: bool = False) -> tuple[Self, Self]:
    """Sorted values and their original indices along dim: a bitonic network, O(n log^2 n). Stable (equal keys keep
    their order, also descending, as PyTorch's stable sort), NaN last ascending and first descending (NaN is largest).
    Every compare-exchange orders (key, index) pairs, so all elements are distinct and stability needs no extra pass.
    The axis is padded to a power of two with keys that sort after every real element: NaN (or the dtype's max)
    ascending, -inf (or the dtype's min) descending, their indices past the real ones breaking ties with equal keys."""
    if self.ndim == 0: self._dim(dim); return self, self._full((), 0, dtypes.default_int)
    d = self._dim(dim)
    n = self._static(d, "sort")
    if 0 in self.shape: return self, self._full(self.shape, 0, dtypes.default_int)   # nothing to order
    x, dt = self.transpose(d, -1), self.dtype
    if n > 1 << 24 and dt.is_float and dt.itemsize <= 4: _err(ValueError, f"sort of {n} elements: indices past 2^24 do not fit float32 exactly")
    # keys and indices travel as one (..., n, 2) tensor of a dtype that holds both exactly: one kernel per network stage
    pdt = dtypes.float64 if dt == dtypes.float64 else dtypes.float32 if dt.is_float else dt if dt.itemsize == 8 else \
          least_upper_dtype(dtypes.uint8 if dt.is_bool else dt, dtypes.int32)
    key, idx = x.cast(pdt), self._arange(n).cast(pdt)._broadcast_to(x.shape)
    k, fl, lead = max(n - 1, 0).bit_length(), pdt.is_float, x.shape[:-1]
    if k:
      fill = (-math.inf if fl else pdt.min) if descending else (math.nan if fl else pdt.max)
      pad = ((0, 0),) * (x.ndim - 1) + ((0, (1 << k) - n),)
      key, idx = key.pad(pad, value=fill), idx.pad(pad, value=n)
    p = key.unsqueeze(-1).cat(idx.unsqueeze(-1), dim=-1)
    col = lambda t, c: t.shrink((None,) * (t.ndim - 1) + ((c, c + 1),))
    def before(a, b):   # does pair a come before pair b? Descending swaps the keys, never the indices
      ka, ia, kb, ib = col(a, 0), col(a, 1), col(b, 0), col(b, 1)
      if descending: ka, kb = kb, ka
      lt, eq = ka.lt(kb), ka.eq(kb)
      if fl: lt, eq = lt | kb.isnan() & ka.isnan().logical_not(), eq | ka.isnan() & kb.isnan()
      return lt | eq & ia.lt(ib)
    lower = self._full((1,), True, dtypes.bool).pad(((0, 1),)).reshape(2, 1, 1)   # the first element of a pair
    for s in range(k):
      for j in range(s, -1, -1):   # element i meets its partner 2^j away, or at a stage's first step its mirror in the 2^(s+1) block
        q = p.reshape(*lead, -1, 2, 1 << j, 2)
        o = q.flip((-3, -2)) if j == s else q.flip(-3)
        # pairs are distinct and totally ordered: the lower element takes its partner when the partner comes first, the
        # upper one when it comes first itself; each element is one select of two loads (no halves joined by a cat)
        p = before(o, q).eq(lower).where(o, q).reshape(p.shape).contiguous()
    p = p.shrink((None,) * (x.ndim - 1) + ((0, n), None))
    vals, idx = (p.shrink((None,) * x.ndim + ((c, c + 1),)).reshape(p.shape[:-1]) for c in (0, 1))
    return vals.cast(dt).transpose(d, -1), idx.cast(dtypes.default_int).transpose(d, -1)
  def argsort(self, dim: int = -1, descending: bool = False) -> Self:
    """The indices that sort along dim, stable (numpy's kind="stable")."""
    return self.sort(dim, descending)[1]
  def topk(self, k: int, dim: int = -1, largest: bool = True, sorted_: bool = True) -> tuple[Self, Self]:
    """The k largest (or smallest) values along dim and their indices, in sorted order (also for sorted_=False, which
    allows any order): a sort, then a shrink to k."""
    if not _isint(k): _err(TypeError, f"topk: k must be an int, got {k!r}")
    d = self._dim(dim)
    n = self._static(d, "topk") if self.ndim else 1
    if not 0 <= k <= n: _err(IndexError, f"topk: selected index k={k} is out of range for dimension {d} of size {n}")
    v, i = self.sort(d, descending=largest)
    cut = tuple((0, k) if j == d else None for j in range(self.ndim))
    return v.shrink(cut), i.shrink(cut)
