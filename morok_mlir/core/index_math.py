"""Smart constructors for index arithmetic on `index` UOps: they fold constants and drop trivial terms as they
build, so rangeify's output is small before uop-simplify runs. Bounds come from `uop.range` ends.
A size (a shape's dim, a divisor, a stride) is an int or, when it is symbolic, an index UOp (see uop.SYM_ATTR)."""
from __future__ import annotations
import itertools, math
from morok_mlir.core.uop import UOp, as_index as sint, attrs   # sint: a size as an index UOp
from morok_mlir.core.dtype import DType, dtypes
from morok_mlir.core import symbolic
from morok_mlir.dialects.ops import Ops

def const(v: int, dtype: DType = dtypes.index) -> UOp: return UOp(Ops.CONST, dtype, (), attrs(value=bool(v) if dtype.is_bool else int(v)))
def cval(u: UOp): return u.attrs["value"] if u.op is Ops.CONST else None
def smax(x) -> int:
  """The largest value of a size: what a buffer of that size is allocated for."""
  return x if not isinstance(x, UOp) else bounds(x)[1]

def bounds(u: UOp) -> tuple[int, int]:
  """Inclusive [min, max] of an index expression: the simplifier's value bounds, one definition for all passes."""
  return symbolic.bounds(u)

def _bin(op: Ops, a: UOp, b: UOp) -> UOp: return UOp(op, dtypes.index, (a, b))

def add(a: UOp, b: UOp) -> UOp:
  if cval(a) == 0: return b
  if cval(b) == 0: return a
  if cval(a) is not None and cval(b) is not None: return const(cval(a) + cval(b))
  if b.op is Ops.CONST and a.op is Ops.ADD and cval(a.src[1]) is not None: return add(a.src[0], const(cval(a.src[1]) + cval(b)))
  return _bin(Ops.ADD, a, b)

def sub(a: UOp, b: UOp) -> UOp:
  if cval(b) is not None: return add(a, const(-cval(b)))
  return _bin(Ops.SUB, a, b)

def mul(a: UOp, b: UOp) -> UOp:
  if cval(a) == 0 or cval(b) == 0: return const(0)
  if cval(b) == 1: return a
  if cval(a) == 1: return b
  if cval(a) is not None and cval(b) is not None: return const(cval(a) * cval(b))
  return _bin(Ops.MUL, a, b)

def idiv(a: UOp, c) -> UOp:
  """a // c for a >= 0 and a size c (index math divides only non-negative values)."""
  lo, hi = bounds(a)
  if isinstance(c, UOp): return a if cval(c) == 1 else const(0) if lo >= 0 and hi < bounds(c)[0] else _bin(Ops.IDIV, a, c)
  if c == 1: return a
  if lo >= 0 and hi < c: return const(0)
  if cval(a) is not None: return const(int(cval(a) / c))
  return _bin(Ops.IDIV, a, const(c))

def mod(a: UOp, c) -> UOp:
  lo, hi = bounds(a)
  if isinstance(c, UOp): return a if lo >= 0 and hi < bounds(c)[0] else _bin(Ops.MOD, a, c)
  if c == 1: return const(0)
  if lo >= 0 and hi < c: return a
  return _bin(Ops.MOD, a, const(c))

def rsize(r: UOp):
  """A range's size: an int, or its end when symbolic."""
  return r.src[0] if (c := cval(r.src[0])) is None else c
def smul(a, b): return a * b if not isinstance(a, UOp) and not isinstance(b, UOp) else mul(sint(a), sint(b))

def linearize(idx, shape) -> UOp:
  out, stride = const(0), 1
  for i, s in reversed(list(zip(idx, shape))):
    if s != 1: out = add(mul(i, sint(stride)), out) if cval(out) != 0 else mul(i, sint(stride))
    stride = smul(stride, s)
  return out

def unravel(lin: UOp, shape) -> tuple[UOp, ...]:
  if 0 in shape: return tuple(const(0) for _ in shape)  # nothing is ever indexed
  out, strides, stride = [], [], 1
  for s in reversed(shape):
    out.append(const(0) if s == 1 else mod(idiv(lin, stride), s) if smax(stride) * smax(s) < 1 << 62 else idiv(lin, stride))
    strides.append(stride)
    stride = smul(stride, s)
  # the outermost dim needs no mod: lin < prod(shape)
  res = list(reversed(out))
  if shape and shape[0] != 1: res[0] = idiv(lin, strides[-1])
  return tuple(res)

def reshape_index(idx, shape, new_shape) -> tuple[UOp, ...]:
  """The index into new_shape of the element at idx in shape (the same elements in row-major order). Dims are matched
  in runs of equal size (1s dropped): a dim kept as it is passes its index through, and only a run that merges or splits
  dims goes through a flat index (unravel of linearize), so index math a pad or concat offsets (i - lo, defined under a
  gate) stays affine across reshapes that do not touch its dim."""
  flat = lambda: unravel(linearize(idx, shape), new_shape)
  if 0 in shape: return flat()
  sym = lambda d: isinstance(d, UOp)
  src, dst = [(i, d) for i, d in zip(idx, shape) if sym(d) or d != 1], [k for k, d in enumerate(new_shape) if sym(d) or d != 1]
  out, a, b = [const(0)] * len(new_shape), 0, 0
  while a < len(src) or b < len(dst):
    # a symbolic dim matches only the same size alone (a run of static dims around it keeps its own matching); any
    # other reshape over symbolic dims goes through the flat index
    if a == len(src) or b == len(dst): return flat()
    ga, gb, pa, pb = [src[a]], [dst[b]], src[a][1], new_shape[dst[b]]
    a, b = a + 1, b + 1
    if sym(pa) or sym(pb):
      if pa is not pb: return flat()
      out[gb[0]] = ga[0][0]
      continue
    while pa != pb:
      if (a == len(src) or sym(src[a][1])) if pa < pb else (b == len(dst) or sym(new_shape[dst[b]])): return flat()
      if pa < pb: ga.append(src[a]); pa *= src[a][1]; a += 1
      else: gb.append(dst[b]); pb *= new_shape[dst[b]]; b += 1
    if len(ga) == 1 and len(gb) == 1: out[gb[0]] = ga[0][0]
    else:
      for k, v in zip(gb, unravel(linearize([i for i, _ in ga], [d for _, d in ga]), [new_shape[k] for k in gb])): out[k] = v
  return tuple(out)

def in_bounds(i: UOp, lo, hi):
  """i in [lo, hi) as an i1 UOp, None if always true, False if never (lo, hi sizes)."""
  (a, b), (lo0, lo1), (hi0, hi1) = bounds(i), bounds(sint(lo)), bounds(sint(hi))
  if a >= hi1 or b < lo0: return False
  conds = []
  if a < lo1: conds.append(UOp(Ops.CMPLT, dtypes.bool, (sub(sint(lo), const(1)), i)))
  if b >= hi0: conds.append(UOp(Ops.CMPLT, dtypes.bool, (i, sint(hi))))
  out = None
  for c in conds: out = and_(out, c)
  return out

def and_(a, b):
  if a is False or b is False: return False
  if a is None: return b
  if b is None: return a
  return UOp(Ops.AND, dtypes.bool, (a, b))

def multiple_of(u: UOp, d: int, memo: dict | None = None) -> bool:
  """Whether index expression u is a multiple of d for every value of its ranges and variables (proved term by term:
  sums and differences of multiples, a product with one, a remainder by a multiple of d of one; False where unproved)."""
  memo = {} if memo is None else memo
  if (r := memo.get(u)) is not None: return r
  if u.op is Ops.CONST: r = int(u.attrs["value"]) % d == 0
  elif u.op in (Ops.ADD, Ops.SUB, Ops.MIN, Ops.MAX): r = all(multiple_of(s, d, memo) for s in u.src)
  elif u.op is Ops.MUL: r = any(multiple_of(s, d, memo) for s in u.src)
  elif u.op is Ops.MOD: r = (c := cval(u.src[1])) is not None and c % d == 0 and multiple_of(u.src[0], d, memo)
  else: r = d == 1
  memo[u] = r
  return r

# ---------------------------------------------------------------- affine index forms (sound: bounds-checked)
def affine(u: UOp, memo: dict) -> dict | None:
  """u as {range: coef, 1: const} when it is affine in the ranges. idiv/mod by a constant c fold only where the
  bounds prove it: x = c*q + r term by term; with 0 <= r < c and x >= 0, x // c = q and x % c = r (what reshape and
  repeat chains build)."""
  if u in memo: return memo[u]
  r = None
  if u.op is Ops.CONST and u.dtype is dtypes.index: r = {1: int(u.attrs["value"])}
  elif u.op is Ops.RANGE: r = {u: 1}
  elif u.op in (Ops.ADD, Ops.SUB, Ops.MUL) and u.dtype is dtypes.index:
    a, b = affine(u.src[0], memo), affine(u.src[1], memo)
    if a is not None and b is not None:
      if u.op is Ops.MUL:
        if set(a) <= {1}: a, b = b, a
        if set(b) <= {1}: r = {k: v * b.get(1, 0) for k, v in a.items()}
      else:
        r = dict(a)
        for k, v in b.items(): r[k] = r.get(k, 0) + (v if u.op is Ops.ADD else -v)
  elif u.op in (Ops.IDIV, Ops.MOD) and u.dtype is dtypes.index and u.src[1].op is Ops.CONST and (c := int(u.src[1].attrs["value"])) > 0:
    a = affine(u.src[0], memo)
    if a is not None and _form_bounds(a)[0] >= 0:
      q, rem = {k: v // c for k, v in a.items()}, {k: v % c for k, v in a.items()}   # v = c*(v//c) + v%c, term by term
      lo, hi = _form_bounds(rem)
      if lo >= 0 and hi < c: r = q if u.op is Ops.IDIV else rem
  memo[u] = r = None if r is None else {k: v for k, v in r.items() if v or k == 1}
  return r

def affine_in(u: UOp, over: set, memo: dict) -> dict | None:
  """u's affine form in the ranges `over` alone: a subexpression that reads none of them is an atom, kept whole as a
  key (an output row's (t*40 + w) // 1600, beside a lane range that steps the column); where one reads some, affine()'s."""
  if u in memo: return memo[u]
  if not over & set(u.toposort): r = {1: int(u.attrs["value"])} if u.op is Ops.CONST else {u: 1}
  elif u.op in (Ops.ADD, Ops.SUB, Ops.MUL) and u.dtype is dtypes.index and (a := affine_in(u.src[0], over, memo)) is not None \
      and (b := affine_in(u.src[1], over, memo)) is not None:
    if u.op is Ops.MUL:
      if set(a) <= {1}: a, b = b, a
      r = {k: v * b.get(1, 0) for k, v in a.items()} if set(b) <= {1} else None
    else: r = {k: a.get(k, 0) + (b.get(k, 0) if u.op is Ops.ADD else -b.get(k, 0)) for k in {**a, **b}}
  else: r = affine(u, {})
  memo[u] = r
  return r

def _form_bounds(a: dict) -> tuple[int, int]:
  lo = hi = a.get(1, 0)
  for k, v in a.items():
    if k != 1: lo, hi = lo + min(0, v * (smax(k.src[0]) - 1)), hi + max(0, v * (smax(k.src[0]) - 1))
  return lo, hi

def affine_simplify(x: UOp) -> UOp:
  """x with every index subexpression that has an affine form rebuilt as (sum(coef * range) by axis) + const: the
  constant last, so forms that differ only in it share the rest (neighbouring addresses are base + c). Remembered on x
  (UOps are immutable; 72% of a model's calls repeat an earlier one): True where it is x itself (no reference cycle)."""
  if (r := x.__dict__.get("_affine")) is not None: return x if r is True else r
  x.__dict__["_affine"] = True if (r := _affine_simplify(x)) is x else r
  return r

class _Forms:
  """affine()'s memo kept on the nodes themselves (a kernel's lowering simplifies thousands of expressions that share
  their index math): a range's form names the range, so it is not kept (no reference cycle)."""
  def __contains__(self, u: UOp) -> bool: return u.op is not Ops.RANGE and "_aform" in u.__dict__
  def __getitem__(self, u: UOp): return u.__dict__["_aform"]
  def __setitem__(self, u: UOp, form) -> None:
    if u.op is not Ops.RANGE: u.__dict__["_aform"] = form
FORMS = _Forms()
AFFINE_OPS = (Ops.IDIV, Ops.MOD, Ops.ADD, Ops.SUB, Ops.MUL)

def _affine_simplify(x: UOp) -> UOp:
  sub = {}
  for u in x.toposort:
    if u.dtype is not dtypes.index or u.op not in AFFINE_OPS: continue
    # each index node's own form rebuilt, remembered apart from affine_simplify's result for it (where u has no form of
    # its own, its sources may still simplify)
    if (r := u.__dict__.get("_aexpr")) is None:
      if (a := affine(u, FORMS)) is None: r = True
      else:
        e = const(0)
        for k, v in sorted(((k, v) for k, v in a.items() if k != 1), key=lambda kv: kv[0].attrs["axis"]): e = add(e, mul(k, const(v)))
        r = True if (e := add(e, const(a.get(1, 0)))) is u else e
      u.__dict__["_aexpr"] = r
    if r is not True: sub[u] = r
  return x.substitute(sub) if sub else x

def at_lane(x: UOp, r: UOp, j: int) -> UOp:
  """x with range r advanced by j (lane j of a group of neighbours), index math in affine form: the lanes' addresses
  then differ only in their constant, which LLVM's SLP vectorizer and the NVPTX back end merge into vector accesses."""
  return affine_simplify(x.substitute({r: add(r, const(j))}) if j else x)

def with_ranges(x: UOp, r: UOp, parts: tuple[UOp, ...], e: UOp) -> UOp:
  """x with range r replaced by the expression e of the ranges parts: r's place among a reduce's or an end's ranges
  goes to parts (in order), every use of its value to e; index math in affine form."""
  new: dict[UOp, UOp] = {r: e}
  for u in x.toposort:
    if u in new: continue
    src = tuple(new.get(s, s) for s in u.src)
    if u.op in (Ops.REDUCE, Ops.END) and r in u.src[1:]: src = (src[0], *(p for s in u.src[1:] for p in (parts if s is r else (new.get(s, s),))))
    new[u] = u if src == u.src else u.replace(src=src)
  return affine_simplify(new[x])

def next_axis(x: UOp) -> int:
  """An axis past every range of x: a range made with it sorts innermost in its loop nest or reduce."""
  return 1 + max((u.attrs["axis"] for u in x.toposort if u.op is Ops.RANGE), default=0)

def _divmods(x: UOp) -> list[UOp]:
  return [u for u in x.toposort if u.op in (Ops.IDIV, Ops.MOD) and u.dtype is dtypes.index and cval(u.src[1]) is not None]

def split_ranges(x: UOp, ok) -> UOp:
  """x with ranges r (static size n, ok(r)) that index math divides or takes modulo by a constant c without folding
  (r's term k*r spans c or more) run as two, r = ro * f + ri with f = c / gcd(c, k) dividing n, where that folds more of
  them: (.. + k*r) // c and % c become affine in ro and ri. A GGUF block's weight k is byte (k // 32) * 20 + k % 16 in
  nibble (k % 32) // 16: split as k = 32 * b + 16 * h + j, neighbouring j address neighbouring bytes (vector lanes).
  ro takes r's place in the loop nest, ri a fresh axis past every other: the innermost of its reduce."""
  fresh = itertools.count(next_axis(x))
  while True:
    cands, memo, left = set(), {}, len(_divmods(x))
    for u in _divmods(x):
      for r, k in (affine(u.src[0], memo) or {}).items():
        if r != 1 and r.op is Ops.RANGE and ok(r) and (n := cval(r.src[0])) and 1 < (f := cval(u.src[1]) // math.gcd(cval(u.src[1]), k)) < n and n % f == 0:
          cands.add((f, r))
    for f, r in sorted(cands, key=lambda c: (-c[0], c[1].attrs["axis"])):
      ro, ri = (UOp(Ops.RANGE, dtypes.index, (const(m),), attrs(axis=a, kind=r.attrs.get("kind"))) for m, a in
                ((cval(r.src[0]) // f, r.attrs["axis"]), (f, next(fresh))))
      if len(_divmods(y := with_ranges(x, r, (ro, ri), add(mul(ro, const(f)), ri)))) < left: x = y; break
    else: return x
