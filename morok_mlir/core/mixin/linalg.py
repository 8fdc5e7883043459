"""Contractions: dot, matmul and einsum, summed in the accumulator dtype of their operands."""
from __future__ import annotations
from typing import Self
from morok_mlir.dialects.ops import Ops
from morok_mlir.core.mixin.helpers import _err, _contraction, OpBase

class LinalgMixin(OpBase):
  __slots__ = ()
  def dot(self, w: Self, dtype=None) -> Self:
    if not isinstance(w, OpBase):   # not a tensor (an array): its own methods' errors, as the general form below meets them
      x, dx, dw = self, self.ndim, w.ndim
      if not (dx > 0 and dw > 0): _err(ValueError, f"both tensors need to be at least 1D, got {dx}D and {dw}D")
      if x.shape[-1] != w.shape[axis_w := -min(w.ndim, 2)]: _err(ValueError, f"cannot matmul {x.shape} and {w.shape}: {x.shape[-1]} != {w.shape[axis_w]}")
      x = x.reshape(*x.shape[0:-1], *[1] * min(dx - 1, dw - 1, 1), x.shape[-1])
      return x * w.reshape(*w.shape[0:-2], *[1] * min(dx - 1, dw - 1, 1), *w.shape[axis_w:]).transpose(-1, axis_w)
    xs, ws = self.shape, w.shape
    dx, dw = len(xs), len(ws)
    if not (dx > 0 and dw > 0): _err(ValueError, f"both tensors need to be at least 1D, got {dx}D and {dw}D")
    if xs[-1] != ws[axis_w := -min(dw, 2)]: _err(ValueError, f"cannot matmul {xs} and {ws}: {xs[-1]} != {ws[axis_w]}")
    one = (1,) * min(dx - 1, dw - 1, 1)
    x, w = self._reshaped(xs[:-1] + one + xs[-1:]), w._reshaped(ws[:-2] + one + ws[axis_w:])
    order = list(range(n := len(w.shape)))
    order[-1], order[n + axis_w] = order[n + axis_w], order[-1]
    w = w._permuted(tuple(order))   # its last two dims swapped (a vector's one stays)
    (x, w), acc, out = _contraction((x, w), dtype)
    return x._binop(Ops.MUL, w).sum(-1, dtype=acc)._cast(out)
  def matmul(self, x: Self, reverse=False, dtype=None) -> Self:
    return x.dot(self, dtype) if reverse else self.dot(x, dtype)
  def mm(self, x: Self, dtype=None) -> Self:
    """PyTorch's mm: matmul of two matrices, without broadcasting."""
    if self.ndim != 2 or getattr(x, "ndim", None) != 2:
      _err(ValueError, f"mm() multiplies two matrices, got shapes {self.shape} and {getattr(x, 'shape', type(x).__name__)}: use matmul")
    return self.matmul(x, dtype=dtype)
  def newton_schulz(self, steps: int, params: tuple, eps: float = 1.0e-7) -> Self:
    """tinygrad's Newton-Schulz iteration of an odd polynomial (Muon's orthogonalization) on the last two dims: G scaled
    to unit Frobenius norm, then `steps` times G = sum_i params[i] * (G G^T)^i G; the wide side is kept last (a tall
    matrix is transposed, iterated and transposed back), so G G^T is the smaller Gram matrix."""
    if self.ndim < 2: _err(ValueError, f"newton_schulz needs a tensor with two or more dims, got shape {self.shape}")
    if self.shape[-2] > self.shape[-1]: return self.transpose(-2, -1).newton_schulz(steps, params, eps).transpose(-2, -1)
    g = self / (self.square().sum(axis=(-2, -1), keepdim=True).sqrt() + eps)
    for _ in range(steps):
      gram, term, acc = g @ g.transpose(-2, -1), g, g * params[0]
      for p in params[1:]: term = gram @ term; acc = acc + term * p
      g = acc
    return g
  def __matmul__(self, x) -> Self: return self.matmul(x)
  def __rmatmul__(self, x) -> Self: return self.matmul(x, True)
  @staticmethod
  def einsum(formula: str, *operands, dtype=None):
    """tinygrad's einsum: each operand permuted to sorted letter order and broadcast over all letters, multiplied,
    summed over the letters not in the output. "..." stands for the leading dims; a letter repeated in one operand
    takes its diagonal; without "->" the output is the letters used once, sorted (numpy's rule)."""
    xs = tuple(operands[0]) if len(operands) == 1 and isinstance(operands[0], (tuple, list)) else operands
    if not isinstance(formula, str): _err(TypeError, f"einsum takes a formula string, got {type(formula).__name__}")
    if not xs or not all(isinstance(x, OpBase) for x in xs): _err(TypeError, "einsum takes tensors after the formula")
    formula = formula.replace(" ", "")
    lhs, arrow, out = formula.partition("->")
    inputs = lhs.split(",")
    if len(inputs) != len(xs): _err(ValueError, f"einsum: the formula has {len(inputs)} operands, got {len(xs)} tensors")
    if "..." in formula:
      free = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in formula]
      nell = [x.ndim - (len(s) - 3) for s, x in zip(inputs, xs) if "..." in s]
      if any(e < 0 for e in nell) or max(nell, default=0) > len(free): _err(ValueError, f"einsum: '...' does not fit the operands of {formula!r}")
      inputs = [s.replace("...", "".join(free[len(free) - (x.ndim - len(s) + 3):])) if "..." in s else s for s, x in zip(inputs, xs)]
      ell = "".join(free[len(free) - max(nell, default=0):])
      used = "".join(inputs)
      out = out.replace("...", ell) if arrow else ell + "".join(sorted(c for c in set(used) if used.count(c) == 1 and c not in ell))
    elif not arrow: out = "".join(sorted(c for c in set(lhs) if lhs.count(c) == 1 and c.isalpha()))
    if bad := [c for c in "".join(inputs) + out if not c.isalpha()]: _err(ValueError, f"einsum: invalid subscript {bad[0]!r} in {formula!r}")
    if len(set(out)) != len(out) or set(out) - set("".join(inputs)):
      _err(ValueError, f"einsum: output subscripts {out!r} must be distinct letters of the operands")
    sizes, ys = {}, []
    for s, x in zip(inputs, xs):
      if len(s) != x.ndim: _err(ValueError, f"einsum: subscripts {s!r} do not match the {x.ndim} dims of operand {x.shape}")
      while len(set(s)) < len(s):   # a repeated letter: its two dims moved last, then the diagonal (rows padded by one)
        c = next(c for c in s if s.count(c) > 1)
        i, j = s.index(c), s.index(c, s.index(c) + 1)
        if x.shape[i] != x.shape[j]: _err(ValueError, f"einsum: subscript {c!r} has sizes {x.shape[i]} and {x.shape[j]} in one operand")
        rest, k = [a for a in range(x.ndim) if a not in (i, j)], x._static(i, "einsum")
        x = x.permute(*rest, i, j).flatten(-2).pad((0, k)).reshape(*[x.shape[a] for a in rest], k, k + 1).shrink((*[None] * len(rest), None, (0, 1)))
        x, s = x.reshape(x.shape[:-1]), "".join(s[a] for a in rest) + c
      for c, n in zip(s, x.shape):   # a size-1 dim broadcasts against the letter's size elsewhere (numpy, PyTorch)
        if (m := sizes.setdefault(c, n)) != n and 1 not in (m, n): _err(ValueError, f"einsum: subscript {c!r} has sizes {m} and {n}")
        if m == 1: sizes[c] = n
      ys.append((s, x))
    letters = sorted(sizes)
    full = tuple(sizes[c] for c in letters)
    xs, acc, rdt = _contraction(tuple(x for _, x in ys), dtype)
    prod = None
    for (s, _), x in zip(ys, xs):
      order = sorted(range(len(s)), key=lambda a: s[a])
      x = x.permute(order).reshape(tuple(x.shape[s.index(c)] if c in s else 1 for c in letters)).expand(full)
      prod = x if prod is None else prod * x
    ret = prod.sum(tuple(i for i, c in enumerate(letters) if c not in out), dtype=acc)._cast(rdt)
    kept = [c for c in letters if c in out]
    return ret.permute(tuple(kept.index(c) for c in out))
