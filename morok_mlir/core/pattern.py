"""The rewrite-rule DSL: UPat patterns over UOps, a PatternMatcher compiled to dispatch by op name, graph_rewrite.

  from morok_mlir.core.pattern import UPat, PatternMatcher, graph_rewrite
  pm = PatternMatcher([
    (UPat(Ops.ADD, src=(UPat.var("x"), UPat.const(0))), lambda x: x),            # x+0 -> x (either operand order)
    (UPat(Ops.MUL, src=(UPat.var("x"), UPat.cvar("c")), name="m"), lambda m, x, c: None if c.attrs["value"] != 2 else ...),
  ])
  new_root = graph_rewrite(root, pm)

A pattern names an op (a str, a tuple of op names for a family, or None for any op), optional operand sub-patterns,
an optional capture `name` (a repeated name must bind the same UOp: UOps are hash-consed, so this is identity),
a dtype constraint (a set of dtypes, e.g. {dtypes.int32, dtypes.index}) and, for constants, a value predicate.
Operands of commutative ops (add mul and or xor max min cmpne cmpeq) match in either order.
A rule is (pattern, fn); fn gets the captures as keyword arguments and returns the replacement UOp, or None for
"no match" -- the one convention everywhere (MLIR's native drivers use the opposite; we never expose those)."""
from __future__ import annotations
import math
from typing import Callable, Iterable
from morok_mlir.core.uop import UOp
from morok_mlir.core.dtype import DType
from morok_mlir.dialects.ops import Ops, COMMUTATIVE


def elem(u: UOp) -> str:
  """Element type name of u's dtype ('f32' for a float32 tensor, scalar or buffer)."""
  return u.dtype.base.mlir

def _same_value(a, b) -> bool:
  # constants compare by exact value: 0.0 and -0.0 differ, NaN equals NaN, True == 1 for i1
  if isinstance(a, float) or isinstance(b, float):
    a, b = float(a), float(b)
    return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
  return a == b

class UPat:
  __slots__ = ("op", "src", "name", "dtype", "value", "any_len", "lit")
  def __init__(self, op: str | tuple[str, ...] | None = None, src: tuple[UPat, ...] | None = None, name: str | None = None,
               dtype: Iterable[DType] | None = None, value: Callable | None = None, any_len: bool = False, lit=None):
    self.op = (op,) if isinstance(op, str) else (tuple(op) if op is not None else None)
    self.src, self.name, self.any_len = (tuple(src) if src is not None else None), name, any_len
    self.dtype = frozenset(dtype) if dtype is not None else None
    self.value = value  # predicate on a const's value (only consts match when set)
    self.lit = lit      # the literal of UPat.const(v) (the prover instantiates it)

  @staticmethod
  def var(name: str | None = None, dtype: Iterable[DType] | None = None) -> UPat: return UPat(None, name=name, dtype=dtype)
  @staticmethod
  def cvar(name: str | None = None, dtype: Iterable[DType] | None = None) -> UPat:
    """Any constant, bound to name (read its value with `.attrs['value']`)."""
    return UPat(Ops.CONST, name=name, dtype=dtype, value=lambda v: True)
  @staticmethod
  def const(v, name: str | None = None, dtype: Iterable[DType] | None = None) -> UPat:
    """A constant equal to v (exactly: -0.0 is not 0.0; for integers 0 also matches False, 1 True)."""
    return UPat(Ops.CONST, name=name, dtype=dtype, value=lambda x: _same_value(x, v), lit=v)
  def __repr__(self):
    return f"UPat({self.op!r}, name={self.name!r}" + (f", src={self.src!r}" if self.src else "") + ")"

  def match(self, u: UOp, store: dict) -> list[dict]:
    """All ways u matches (commutation can give several), each a dict of captures extending store."""
    if self.op is not None and u.op not in self.op: return []
    if self.dtype is not None and u.dtype not in self.dtype: return []
    if self.value is not None and (u.op is not Ops.CONST or not self.value(u.attrs.get("value"))): return []
    if self.name is not None:
      if (prev := store.get(self.name)) is not None and prev is not u: return []
      store = {**store, self.name: u}
    if self.src is None: return [store]
    n = len(self.src)
    if len(u.src) != n and not (self.any_len and len(u.src) >= n): return []
    orders = [u.src[:n]] + ([u.src[1::-1]] if n == 2 and u.op in COMMUTATIVE and u.src[0] is not u.src[1] else [])
    out: list[dict] = []
    for srcs in orders:
      stores = [store]
      for p, s in zip(self.src, srcs):
        stores = [s2 for s1 in stores for s2 in p.match(s, s1)]
        if not stores: break
      out.extend(stores)
    return out

class PatternMatcher:
  """Rules compiled to a dict op name -> [(pattern, fn)]; patterns with op=None are tried on every op."""
  def __init__(self, rules: list[tuple[UPat, Callable]]):
    self.rules = list(rules)
    self.by_op: dict[str, list[tuple[UPat, Callable]]] = {}
    self.wild: list[tuple[UPat, Callable]] = []
    for p, fn in self.rules:
      for o in (p.op or ()): self.by_op.setdefault(o, []).append((p, fn))
      if p.op is None: self.wild.append((p, fn))
    if self.wild:  # keep the rule order: wildcard rules go after the op-specific ones
      for o in self.by_op: self.by_op[o] = self.by_op[o] + self.wild
  def __add__(self, other: PatternMatcher) -> PatternMatcher: return PatternMatcher(self.rules + other.rules)

  def rewrite(self, u: UOp) -> UOp | None:
    """The first rule's replacement for u, or None if no rule applies."""
    for p, fn in self.by_op.get(u.op, self.wild):
      for store in p.match(u, {}):
        if (r := fn(**store)) is not None and r is not u: return r
    return None

def graph_rewrite(root: UOp, pm: PatternMatcher, memo: dict[UOp, UOp] | None = None) -> UOp:
  """Rewrite bottom-up to a fixpoint: operands first, then the node until no rule applies; a replacement's new
  nodes are rewritten too. Pass one memo dict to share work between several roots of one graph."""
  done: dict[UOp, UOp] = {} if memo is None else memo
  def order(r: UOp) -> list[UOp]:  # toposort that stops at finished nodes (a rewrite only walks its new nodes)
    out, seen, stack = [], set(), [(r, False)]
    while stack:
      u, post = stack.pop()
      if post: out.append(u); continue
      if u in done or u in seen: continue
      seen.add(u); stack.append((u, True))
      stack.extend((s, False) for s in reversed(u.src) if s not in done and s not in seen)
    return out
  def go(r: UOp, depth: int) -> UOp:
    if depth > 1000: raise RecursionError(f"graph_rewrite: no fixpoint after 1000 chained rewrites at {r!r}")
    for u in order(r):
      src = tuple(done[s] for s in u.src)
      n = u if src == u.src else u.replace(src=src)
      if n is not u and n in done: done[u] = done[n]; continue
      new = pm.rewrite(n)
      res = n if new is None else go(new, depth + 1)
      done[u] = done[n] = done[res] = res
    return done[r]
  try: return go(root, 0)
  finally: del go   # go's closure holds go: a cycle that would keep every node it saw alive until a collection
