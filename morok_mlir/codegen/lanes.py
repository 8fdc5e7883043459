"""One loop range run as the lanes of vectors: LaneLowerer lowers a kernel whose `lane` range has no loop, each value
that depends on it a vector (the contraction's packs and tile epilogues, Winograd's input transform); lane_split
rewrites a kernel marked `uop.lanes = W` so its innermost loop steps W lanes."""
from __future__ import annotations
from functools import reduce
from itertools import product
from math import prod
from morok_mlir.ir.bridge import Func, arg_buffer
from morok_mlir.core.dtype import DType, dtypes
from morok_mlir.core.uop import UOp, attrs
from morok_mlir.dialects.ops import Ops, REDUCE_IDENTITY
from morok_mlir.core import index_math as im
from morok_mlir.core.index_math import affine_simplify
from morok_mlir.core.kernel_facts import LANE_MAX_STEP, REDUCE_STORES, innermost, lane_coef, lane_frac, lane_reduce_of, lane_supported, single_store
from morok_mlir.codegen.emitter import Block
from morok_mlir.codegen.lower_cpu import ALU, CMP, CPU, POLY, cast_op, Frame, Lowerer, lower_kernel, parallel_info, Poly, _axis, cls, exp2_of_product, gated, lane_range, mem_type, sl, splat

class LaneLowerer(Lowerer):
  """A kernel whose range `lane` (size VW, closed by no loop) runs as the VW lanes of vectors: every value that depends
  on it is a vector, the rest scalars (broadcast where they meet), and the one store writes VW consecutive elements.
  A load whose address steps by s (1 <= s <= LANE_MAX_STEP) per lane reads s*VW consecutive elements with only each
  s-th enabled (a masked load: lanes gated off, padding, are not accessed, wherever they point) and keeps those; one
  whose address does not step (its gate does) reads its element where any lane's gate holds.
  Contraction.pack_block's panels of a convolution's image side: VW neighbouring output columns.
  prefetch: the store and the loads of its value (all but `skip`'s: the stack tile) are not run, only prefetched (their
  lanes' first and last element; `memref.prefetch`, a hint: it never faults): Contraction's tile epilogue, called
  before the tile's k loop, so the output and residual rows it will touch come in from L3 or memory meanwhile."""
  def __init__(self, f: Func, lane: UOp, prefetch: bool = False, skip: UOp | None = None, stream: bool = False):
    self.lane, self.vw, self.prefetch, self.skip, self.stream = lane, im.cval(lane.src[0]), prefetch, skip, stream
    # a streamed kernel's output loops: a load indexed by one reads a row of its own per output (a matrix's, not the vector's)
    self.rows = frozenset(r for e in f.roots[0].toposort if e.op is Ops.END for r in e.src[1:] if r.op is Ops.RANGE) if stream else frozenset()
    self.vec: set[UOp] = set()   # the values that are vectors: those depending on the lane, but for a reduce over it (a scalar)
    self.mark(f.roots[0])
    self.bcast: dict[UOp, tuple[Frame, str]] = {}
    # a prefetch's loop over the tile's rows stays rolled: unrolled, its clamped prefetches were ~10% of a contraction
    # kernel's LLVM time, for hints issued once a tile before a k loop of hundreds of FMAs
    super().__init__(f, CPU(f, unroll=not prefetch))
  def mark(self, x: UOp) -> UOp:
    for u in x.toposort:
      if u is self.lane or any(s in self.vec for s in u.src) and not (u.op is Ops.REDUCE and self.lane in u.src[1:]): self.vec.add(u)
    return x

  @staticmethod
  def supports(x: UOp, lane: UOp) -> bool: return lane_supported(x, lane)

  def rs(self, u: UOp) -> frozenset:
    self.ranges.setdefault(self.lane, frozenset())   # no loop runs over the lanes: their values sit in the loops around them
    return super().rs(u)
  def vty(self, dt: DType, n: int = 0) -> str: return f"vector<{n or self.vw}x{sl(dt)}>"
  def vec_of(self, s: UOp, fr: Frame) -> str:
    """s as a vector: its own value, or its scalar broadcast once in the loop it is computed in."""
    if s in self.vec: return self.value(s)
    if (b := self.bcast.get(s)) is not None and (b[0] is self.root or b[0] in self.open.values()): return b[1]
    n, sfr = self.value(s), self.target(s)
    self.bcast[s] = (sfr, name := self.em.broadcast(sfr, n, sl(s.dtype), self.vty(s.dtype)))
    return name
  def at0(self, e: UOp) -> str: return self.value(affine_simplify(e.substitute({self.lane: im.const(0)})))

  def _value(self, u: UOp) -> str:
    if u.op is Ops.REDUCE and self.lane in u.src[1:] and u not in self.names: return self.lane_reduce(u)
    if u not in self.vec: return super()._value(u)
    if (n := self.names.get(u)) is not None: return n
    fr = self.target(u)
    L = lambda text: self.line(fr, text)
    if u is self.lane: return self.place(u, fr, self.em.const(fr, f"dense<{list(range(self.vw))}>", self.vty(dtypes.index)))
    if u.op is Ops.LOAD: return self.place(u, fr, self.vload(u, fr))
    if u.op is Ops.REDUCE and (terms := self.taps(u)) is not None:   # a short reduce's terms combined as a tree
      return self.place(u, fr, self.rows_first(fr, u) or self.tree(fr, u, [self.vec_of(t, fr) for t in terms]))
    if u.op is Ops.REDUCE:   # a vector accumulator per lane, carried through the reduce's loops
      vt, op = self.vty(u.dtype), u.attrs["op"]
      init = splat(self.em, fr, REDUCE_IDENTITY[op](u.dtype), "f32", self.vw)
      frames = self.open_loops(fr, list(u.src[1:]), inits=[init])
      acc = self.line(frames[-1], f"{ALU[op]['f']} {frames[-1].acc}, {self.vec_of(u.src[0], frames[-1])}{self.fm} : {vt}")
      self.close_loops(frames, vt, acc)
      return self.place(u, fr, frames[0].res)
    if (k := _lane_step(self, u)): return self.place(u, fr, _vcmp_affine(self, u, k, fr))
    srcs, c = [self.vec_of(s, fr) for s in u.src], cls(u.src[0].dtype)
    if (rule := VRULES.get((u.op, c))) is not None: return self.place(u, fr, rule(self, u, srcs, fr))
    fm = self.fm if c == "f" and u.op in CONTRACT else ""   # a tap's product and the tree's add may fuse into one FMA
    return self.place(u, fr, L(f"{ALU[u.op][c]} {', '.join(srcs)}{fm} : {self.vty(u.src[0].dtype)}"))

  def tree(self, fr: Frame, u: UOp, vals: list[str], n: int = 0) -> str:
    """vals (vectors of reduce u's dtype, n lanes: VW by default) combined by u's op pairwise, as a tree: independent ops,
    a short chain."""
    op, vt = u.attrs["op"], self.vty(u.dtype, n)
    if op in PICK and u.dtype.is_float and len(vals) > 1: return self.pick_tree(fr, op, vals, vt, n)
    comb = ALU[op][cls(u.dtype)]
    while len(vals) > 1: vals = [self.line(fr, f"{comb} {a}, {b}{self.fm} : {vt}") for a, b in zip(vals[::2], vals[1::2])] + vals[len(vals) & ~1:]
    return vals[0]
  def pick_tree(self, fr: Frame, op: str, vals: list[str], vt: str, n: int = 0) -> str:
    """A float max/min of vals as a tree of compare-and-selects (one vmaxps/vminps each), NaN if any val is NaN: one
    unordered compare per pair of vals, ORed. arith.maximumf per pair would order signed zeros and test both operands for
    NaN at every combine (6 instructions each on x86); max/min may pick either of equal zeros."""
    em, bt = self.em, self.vty(dtypes.bool, n)
    nan = [em.cmpf(fr, "uno", a, b, vt) for a, b in zip(vals[::2], vals[1::2] + vals[-1:])]
    while len(nan) > 1: nan = [em.arith(fr, "ori", bt, a, b) for a, b in zip(nan[::2], nan[1::2])] + nan[len(nan) & ~1:]
    while len(vals) > 1:
      vals = [em.select(fr, em.cmpf(fr, PICK[op], a, b, vt), a, b, vt, bt) for a, b in zip(vals[::2], vals[1::2])] + vals[len(vals) & ~1:]
    return em.select(fr, nan[0], em.const(fr, "dense<0x7FC00000>", vt), vals[0], vt, bt)

  def lane_reduce(self, u: UOp) -> str:
    """A reduce over the lanes (and other ranges): a vector accumulator through the other ranges' loops, its lanes
    combined once after them. The innermost of those ranges, when short (a block's halves), is unrolled and its
    iterations combined before they meet the accumulator: independent vector ops, a shorter dependency chain."""
    fr, vt, op, t = self.target(u), self.vty(u.dtype), u.attrs["op"], sl(u.dtype)
    others = sorted((r for r in u.src[1:] if r is not self.lane), key=_axis)
    unroll = others.pop() if others and (n := im.cval(others[-1].src[0])) is not None and n <= UNROLL else None
    frames = self.open_loops(fr, others, inits=[splat(self.em, fr, REDUCE_IDENTITY[op](u.dtype), t, self.vw)])
    inner = frames[-1] if frames else fr
    srcs = [self.mark(affine_simplify(u.src[0].substitute({unroll: im.const(i)}))) for i in range(n)] if unroll is not None else [u.src[0]]
    val = self.tree(inner, u, [self.vec_of(x, inner) for x in srcs])
    if frames: self.close_loops(frames, vt, self.tree(inner, u, [frames[-1].acc, val]))
    # the lanes combined as a tree where the reduce may reassociate (uop.fastmath), not one add after another
    if op in PICK and u.dtype.is_float: return self.place(u, fr, self.pick_lanes(fr, op, frames[0].res if frames else val, vt))
    return self.place(u, fr, self.em.reduction(fr, KIND[op], frames[0].res if frames else val, vt, t, self.fm and " fastmath<reassoc>"))
  def pick_lanes(self, fr: Frame, op: str, v: str, vt: str) -> str:
    """The float max/min of v's lanes: halves compared and selected (one vmaxps/vminps each), NaN if any lane is NaN (one
    unordered compare of v with itself). vector.reduction <maximumf> orders signed zeros and tests for NaN at every
    step, lane by lane (~50 instructions for 16 lanes: a short softmax row's cost)."""
    em, bt, w = self.em, self.vty(dtypes.bool), self.vw
    nan = em.reduction(fr, "or", em.cmpf(fr, "uno", v, v, vt), bt, "i1")
    while w > 1:
      w //= 2
      hi = em.shuffle(fr, v, v, [i + w if i < w else i for i in range(self.vw)], vt, vt)
      v = em.select(fr, em.cmpf(fr, PICK[op], v, hi, vt), v, hi, vt, bt)
    return em.select(fr, nan, em.const(fr, "0x7FC00000", "f32"), em.vextract(fr, v, 0, "f32", vt), "f32")

  def rows_first(self, fr: Frame, u: UOp) -> str | None:
    """A window's reduce whose term is one load stepping s >= 2 elements per lane (an unpadded pool), combined rows first:
    each window row's m*VW consecutive elements (one wide vector, plain loads where they lie in the buffer) combined
    across the rows, then one shuffle per column offset c picks lane j's element s*j + c, and the columns are combined.
    Tap by tap, each tap's strided load takes a shuffle of its own: a 3x3 stride-2 max pool's 9 shuffles and 8
    combines per VW outputs become 3 shuffles and 2*m + 2 combines (m = 3 at 8 or 16 lanes). None where the term is
    another value, its gate differs from tap to tap (padding) or the taps would not take fewer ops."""
    ld, rs, vw = u.src[0], u.src[1:], self.vw
    if ld.op is not Ops.LOAD or ld.dtype is not u.dtype or u.dtype.is_bool or not isinstance(size := (idx := ld.src[0]).src[0].dtype.size, int): return None
    gate = idx.src[2] if len(idx.src) > 2 else None
    s, coefs = lane_coef(idx.src[1], self.lane, {}), [lane_coef(idx.src[1], r, {}) for r in rs]
    if not s or s < 2 or any(c is None or c < 0 for c in coefs) or gate is not None and any(r in gate.toposort for r in rs): return None
    if gate is not None and any(c in self.vec and _lane_step(self, c) <= 0 for c in conjuncts(gate)): return None
    ns = [im.cval(r.src[0]) for r in rs]
    col = [c * (n - 1) < vw for c, n in zip(coefs, ns)]   # ranges whose taps lie within a vector's span of each other
    tap_offs = lambda keep: [sum(c * i for c, i, k in zip(coefs, ix, keep) if k) for ix in product(*map(range, ns))
                             if all(i == 0 for i, k in zip(ix, keep) if not k)]
    rows, cols = tap_offs([not c for c in col]), tap_offs(col)
    m, pick, sh = -(-(s * (vw - 1) + max(cols) + 1) // vw), u.attrs["op"] in PICK and u.dtype.is_float, SHUFFLE_OPS.get(vw, 2)
    spans = sum((c + s * (vw - 1)) // vw - c // vw for c in cols)   # each column's source vectors, less one
    if m * _tree_ops(len(rows), pick) + sh * spans + _tree_ops(len(cols), pick) > len(rows) * len(cols) * (s - 1) * sh + _tree_ops(len(rows) * len(cols), pick):
      return None
    em, n, dt = self.em, m * vw, u.dtype
    wt, bt, it, z = self.vty(dt, n), self.vty(dtypes.bool, n), self.vty(dtypes.int32, n), "0.0" if dt.is_float else "0"
    buf, mt = self.value(idx.src[0]), mem_type(idx.src[0].dtype)
    base = self.value(affine_simplify(idx.src[1].substitute({self.lane: im.const(0), **{r: im.const(0) for r in rs}})))
    ats = [em.arith(fr, "addi", "index", base, self.const(r, dtypes.index)) for r in rows]
    ix = lambda v: self.const(v, dtypes.index)
    # lanes < valid hold their gate (k*lane < d: lane < ceil(d / k)); they read elements < need of each row, all in the buffer
    valid = ix(vw)
    for c in conjuncts(gate) if gate is not None else []:
      if c in self.vec: valid = em.arith(fr, "minsi", "index", valid, em.arith(fr, "ceildivsi", "index", _lane_bound(self, c), ix(_lane_step(self, c))))
      else: valid = em.select(fr, self.value(c), valid, ix(0), "index")
    some = em.cmpi(fr, "sgt", valid, ix(0), "index")
    need = em.select(fr, some, em.arith(fr, "addi", "index", em.arith(fr, "muli", "index", valid, ix(s)), ix(max(cols) + 1 - s)), ix(0), "index")
    inside = em.cmpi(fr, "sle", em.arith(fr, "addi", "index", ats[rows.index(max(rows))], ix(n)), ix(size), "index")
    plain = em.arith(fr, "andi", "i1", em.cmpi(fr, "sge", valid, ix(vw), "index"), inside)
    then, other = Block(), Block()
    need32 = em.cast(other, "index_cast", em.arith(other, "minsi", "index", need, ix(n)), "index", "i32")
    mask = em.cmpi(other, "slt", em.const(other, f"dense<{list(range(n))}>", it), em.broadcast(other, need32, "i32", it), it)
    wide = em.if_value(fr, plain, (then, self.tree(then, u, [em.vload(then, buf, a, mt, wt) for a in ats], n)),
                       (other, self.tree(other, u, [em.maskedload(other, buf, a, mask, em.const(other, f"dense<{z}>", wt), mt, bt, wt)
                                                    for a in ats], n)), wt)
    res = self.tree(fr, u, [em.shuffle(fr, wide, wide, [c + s * j for j in range(vw)], wt, wt) for c in cols])
    if gate is None: return res
    return em.select(fr, self.vec_of(gate, fr), res, em.const(fr, f"dense<{z}>", vt := self.vty(dt)), vt, self.vty(dtypes.bool))

  TAPS_MAX = 32   # terms of a reduce unrolled into a tree (a 3x3 or 5x5 window)
  def taps(self, u: UOp) -> list[UOp] | None:
    """The terms of a reduce over at most TAPS_MAX constant iterations (a pool's or a depthwise convolution's window),
    each with the reduce's ranges as constants, or None. A loop would chain every lane group's terms through one
    accumulator, each combine waiting on the last (a 3x3 max pool at 3-4x the cycles of the loads); a tree of them
    keeps the loads and combines independent."""
    rs, ns = u.src[1:], [im.cval(r.src[0]) for r in u.src[1:]]
    if None in ns or prod(ns) > self.TAPS_MAX: return None
    return [self.mark(affine_simplify(u.src[0].substitute({r: im.const(i) for r, i in zip(rs, ix)}))) for ix in product(*map(range, ns))]

  def vload(self, u: UOp, fr: Frame, into: Block | None = None) -> str:
    """u's lanes; into: the block the memory ops go in (the values they use are placed by fr)."""
    idx, vw = u.src[0], self.vw
    buf, step, mt = self.value(idx.src[0]), lane_coef(idx.src[1], self.lane, {}), mem_type(idx.src[0].dtype)
    frac = lane_frac(idx.src[1], self.lane) if step is None else None
    em, bt, ft, t, z = self.em, self.vty(dtypes.bool), self.vty(u.dtype), sl(u.dtype), "0.0" if u.dtype.is_float else "0"
    if into is None and (step or frac) and len(idx.src) > 2 and (same := [c for c in conjuncts(idx.src[2]) if c not in self.vec]):
      # a gate the lanes share (a cat's part by channel, a padded row) skips the load where it fails, rather than
      # masking every lane off: a pool or convolution over a cat reads only the part its channel is in
      rest = [c for c in conjuncts(idx.src[2]) if c in self.vec]
      lanes = UOp(Ops.LOAD, u.dtype, (UOp(Ops.INDEX, idx.dtype, (*idx.src[:2], *([self.mark(reduce(im.and_, rest))] if rest else []))),))
      self.vec.add(lanes)
      then, other = Block(), Block()
      v = self.vload(lanes, fr, then)
      return em.if_value(fr, self.value(reduce(im.and_, same)), (then, v), (other, em.const(other, f"dense<{z}>", ft)), ft)
    into = fr if into is None else into
    base = self.at0(idx.src[1])
    if frac is not None: return self.repeated(idx, frac[0], buf, base, mt, u.dtype, fr, into)
    n = step * vw
    if step == 0:   # one element, gated per lane: read where any lane's gate holds (then it is in bounds)
      mask = self.value(idx.src[2])
      some = em.reduction(fr, "or", mask, bt, "i1")
      v = em.load(fr, buf, em.select(fr, some, base, self.const(0, dtypes.index), "index"), mt)
      zero = em.const(fr, f"dense<{z}>", ft)
      return em.select(fr, mask, em.broadcast(fr, v, t, ft), zero, ft, bt)
    if len(idx.src) > 2: mask = self.vec_of(idx.src[2], fr) if step == 1 else self.wide_mask(idx.src[2], step, fr)
    elif step == 1:
      if self.stream and STREAM_AHEAD and (u.dtype.itemsize == 1 or not self.rows.isdisjoint(self.rs(idx.src[1]))):   # see STREAM_AHEAD
        em.prefetch(into, buf, em.arith(into, "addi", "index", base, em.const(into, STREAM_AHEAD // u.dtype.itemsize)), False, mt)
      return em.vload(into, buf, base, mt, ft)
    else: mask = em.const(fr, f"dense<{[i % step == 0 for i in range(n)]}>".lower(), self.vty(dtypes.bool, n))
    vt = self.vty(u.dtype, n)
    v = em.maskedload(other := Block(), buf, base, mask, em.const(fr, f"dense<{z}>", vt), mt, self.vty(dtypes.bool, n), vt)
    if (on := self.all_on(idx, step, fr)) is None: into.lines += other.lines
    else: v = em.if_value(into, on, ((then := Block()), em.vload(then, buf, base, mt, vt)), (other, v), vt)
    if step == 1: return v
    return em.shuffle(into, v, v, [j * step for j in range(vw)], vt, vt)

  def repeated(self, idx: UOp, d: int, buf: str, base: str, mt: str, dt: DType, fr: Frame, into: Block) -> str:
    """A load whose lanes take one element every d lanes (lane_frac: a nearest upsample along them): VW/d consecutive
    elements, each spread to its d lanes by one shuffle. Gated: an element is read where any of its lanes' gates holds,
    and the lanes whose gate fails take 0, as a gated load's do."""
    em, n, z = self.em, self.vw // d, "0.0" if dt.is_float else "0"
    nt, spread = self.vty(dt, n), [i // d for i in range(self.vw)]
    if len(idx.src) < 3: v = em.vload(into, buf, base, mt, nt)
    else:
      gate, bt, nb = self.vec_of(idx.src[2], fr), self.vty(dtypes.bool), self.vty(dtypes.bool, n)
      mask = reduce(lambda a, b: em.arith(fr, "ori", nb, a, b), [em.shuffle(fr, gate, gate, [j * d + r for j in range(n)], bt, bt) for r in range(d)])
      v = em.maskedload(other := Block(), buf, base, mask, em.const(fr, f"dense<{z}>", nt), mt, nb, nt)
      if (on := self.all_on(idx, 1, fr)) is None: into.lines += other.lines
      else: v = em.if_value(into, on, ((then := Block()), em.vload(then, buf, base, mt, nt)), (other, v), nt)
    v = em.shuffle(into, v, v, spread, nt, nt)
    if len(idx.src) < 3: return v
    return em.select(into, gate, v, em.const(fr, f"dense<{z}>", vt := self.vty(dt)), vt, bt)

  def all_on(self, idx: UOp, step: int, fr: Frame) -> str | None:
    """A scalar that holds where every element of a load of idx's lanes (step*VW of them) is read: each lane's gate holds
    and, for step > 1, the elements past the last lane's are in the buffer. There a plain load replaces the masked one
    (which takes an extra vector op per load on x86, or several on AVX2): a window's interior. None where a gate is not
    affine in the lane (or the buffer's size is symbolic)."""
    em, parts, size = self.em, [], idx.src[0].dtype.size
    for c in conjuncts(idx.src[2]) if len(idx.src) > 2 else []:
      if c not in self.vec: parts.append(self.value(c)); continue
      if not (k := _lane_step(self, c)): return None   # k*lane < d for every lane: at the lane where k*lane is largest
      parts.append(em.cmpi(fr, "slt", self.const(max(k * (self.vw - 1), 0), dtypes.index), _lane_bound(self, c), "index"))
    if step > 1:
      if not isinstance(size, int): return None
      parts.append(em.cmpi(fr, "slt", self.at0(idx.src[1]), self.const(size - step * self.vw + 1, dtypes.index), "index"))
    return reduce(lambda a, b: em.arith(fr, "andi", "i1", a, b), parts) if parts else None

  def wide_mask(self, g: UOp, step: int, fr: Frame) -> str:
    """Gate g of a load stepping by `step` per lane, on its step*VW elements: lane j's gate on element j*step, the elements
    between off. A conjunct affine in the lane is compared at that width directly; the rest are spread lane by lane."""
    em, n, bt = self.em, step * self.vw, self.vty(dtypes.bool, step * self.vw)
    aff = [(c, k) for c in conjuncts(g) if (k := _lane_step(self, c))]
    masks = [_vcmp_affine(self, c, k, fr, step) for c, k in aff]
    if rest := [c for c in conjuncts(g) if c not in dict(aff)]:
      m, off = self.vec_of(reduce(im.and_, rest), fr), em.const(fr, "dense<false>", self.vty(dtypes.bool))
      masks.append(em.shuffle(fr, m, off, [i // step if i % step == 0 else self.vw for i in range(n)], self.vty(dtypes.bool), self.vty(dtypes.bool)))
    return reduce(lambda a, b: em.arith(fr, "andi", bt, a, b), masks)

  def effect(self, u: UOp):
    if u.op is not Ops.STORE or u not in self.vec or u in self.done: return super().effect(u)
    self.done.add(u)
    idx, v = u.src
    fr = self.target(u)
    if self.prefetch:   # the loads a reduce makes are left out (their addresses need its loop)
      under = {y for r in v.toposort if r.op is Ops.REDUCE for y in r.src[0].toposort}
      # a load whose address does not step with the lanes (a per-channel scale or bias) reads one element a row from a
      # small vector that stays in cache: its prefetches would only cost code (LLVM's time), as many as the tile has rows
      for x in [idx] + [x.src[0] for x in v.toposort if x.op is Ops.LOAD and x not in under and x.src[0].src[0] is not self.skip
                        and lane_coef(x.src[0].src[1], self.lane, {}) != 0]:
        self.touch(x, x is idx, fr)
      return
    val = self.vec_of(v, fr)
    buf, at = self.value(idx.src[0]), self.at0(idx.src[1])
    mt, ft, em = mem_type(idx.src[0].dtype), self.vty(dtypes.float32), self.em
    if (step := lane_coef(idx.src[1], self.lane, {})) and step > 1:
      if step == 2 and (pair := self.pair(u, fr)) is not None: return self.interleave(pair, fr)
      # lanes step elements apart: spread over step*VW elements, the ones between masked off, as a strided load's
      n = step * self.vw
      wide = em.shuffle(fr, val, val, [i // step if i % step == 0 else 0 for i in range(n)], ft, ft)
      mask = self.wide_mask(idx.src[2], step, fr) if len(idx.src) > 2 else \
        em.const(fr, f"dense<{[i % step == 0 for i in range(n)]}>".lower(), self.vty(dtypes.bool, n))
      em.maskedstore(fr, buf, at, mask, wide, mt, self.vty(dtypes.bool, n), self.vty(dtypes.float32, n))
    elif len(idx.src) > 2: em.maskedstore(fr, buf, at, self.vec_of(idx.src[2], fr), val, mt, self.vty(dtypes.bool), ft)   # gated off: unwritten
    else: em.vstore(fr, val, buf, at, mt, ft)

  def pair(self, u: UOp, fr: Frame) -> tuple[UOp, UOp] | None:
    """(first, second): u and another store of the kernel, in the same loops, whose lanes fill the elements u's skip (two
    apart, one element after or before u's): Winograd's output columns 2t and 2t + 1, stored as one interleaved vector."""
    idx = u.src[0]
    for w in self.f.roots[0].toposort:
      if w is u or w.op is not Ops.STORE or w not in self.vec or w in self.done or (wi := w.src[0]).src[0] is not idx.src[0]: continue
      if lane_coef(wi.src[1], self.lane, {}) == 2 and (d := im.cval(affine_simplify(im.sub(wi.src[1], idx.src[1])))) in (1, -1) \
         and self.target(w) is fr and w.src[1].dtype is u.src[1].dtype:
        return (u, w) if d == 1 else (w, u)
    return None

  def interleave(self, pair: tuple[UOp, UOp], fr: Frame) -> None:
    """The two stores of pair as one vector of 2 VW elements, their lanes alternating (each one's gate on its own)."""
    em, vw, (a, b) = self.em, self.vw, pair
    self.done.update(pair)
    order = [j // 2 + (j % 2) * vw for j in range(2 * vw)]
    ft, wt = self.vty(dtypes.float32), self.vty(dtypes.float32, 2 * vw)
    wide = em.shuffle(fr, self.vec_of(a.src[1], fr), self.vec_of(b.src[1], fr), order, ft, ft)
    idx = a.src[0]; mt = mem_type(idx.src[0].dtype)
    buf, at = self.value(idx.src[0]), self.at0(idx.src[1])
    if all(len(s.src[0].src) < 3 for s in pair): return em.vstore(fr, wide, buf, at, mt, wt)
    on = lambda s: self.vec_of(s.src[0].src[2], fr) if len(s.src[0].src) > 2 else em.const(fr, "dense<true>", self.vty(dtypes.bool))
    bt = self.vty(dtypes.bool)
    em.maskedstore(fr, buf, at, em.shuffle(fr, on(a), on(b), order, bt, bt), wide, mt, self.vty(dtypes.bool, 2 * vw), wt)

  def touch(self, idx: UOp, write: bool, fr: Frame):
    """Prefetch the lanes' first and last element of idx (clamped into its buffer)."""
    buf, mt, base = self.value(idx.src[0]), mem_type(idx.src[0].dtype), self.at0(idx.src[1])
    last, top, c0 = (lane_coef(idx.src[1], self.lane, {}) or 0) * (self.vw - 1), idx.src[0].dtype.size - 1, self.const(0, dtypes.index)
    em = self.em
    clamp = lambda x: em.arith(fr, "maxsi", "index", em.arith(fr, "minsi", "index", x, self.const(top, dtypes.index)), c0)
    ends = [base] + [em.arith(fr, "addi", "index", base, self.const(last, dtypes.index))] * bool(last)
    for at in map(clamp, ends): em.prefetch(fr, buf, at, write, mt)

# vector ops to pick VW lanes out of two vectors (a strided load's, a window column's): AVX-512's vpermt2ps; AVX2's vshufps + vpermpd
SHUFFLE_OPS = {16: 1}
def _tree_ops(n: int, pick: bool) -> int:
  """Vector ops of LaneLowerer.tree over n vectors: n - 1 combines; a float max/min's NaN tests (one per pair), their ors
  and the last select besides."""
  return n - 1 + 2 * -(-n // 2) * (pick and n > 1)
CONTRACT = (Ops.ADD, Ops.SUB, Ops.MUL)
PICK = {"max": "ogt", "min": "olt"}   # a float max/min of two: the first where this compare holds, else the second
def conjuncts(g: UOp) -> list[UOp]: return conjuncts(g.src[0]) + conjuncts(g.src[1]) if g.op is Ops.AND else [g]
KIND = {"add": "add", "max": "maximumf", "min": "minimumf"}   # a reduce's vector.reduction (f32)
UNROLL = 4   # a lane reduce's innermost other range up to this long is unrolled

# the lanes' table: (op, dtype class of its first operand) -> rule(lowerer, u, vector operands, frame) -> the result;
# other ops are one MLIR op of ALU on vectors (LANE_OPS lists what may reach here)
def _vpoly(lw: LaneLowerer, u: UOp, srcs: list[str], fr: Frame) -> str:
  if (xc := exp2_of_product(u)) is not None: return Poly(lw, fr, lw.vw).exp2_mul(lw.vec_of(xc[0], fr), xc[1])
  return getattr(Poly(lw, fr, lw.vw), str(u.op))(*srcs)
def _vcmp(lw: LaneLowerer, u: UOp, srcs: list[str], fr: Frame) -> str:
  mop, pred = CMP[u.op][cls(u.src[0].dtype)].split()
  return lw.line(fr, f"{mop} {pred}, {srcs[0]}, {srcs[1]} : {lw.vty(u.src[0].dtype)}")
I32 = 2 ** 31
def _lane_step(lw: LaneLowerer, u: UOp) -> int:
  """k where u is a < b on indices whose difference steps by k per lane (a padding or tail gate), else 0."""
  if u.op is not Ops.CMPLT or u.src[0].dtype is not dtypes.index: return 0
  ka, kb = (lane_coef(s, lw.lane, {}) for s in u.src)
  return ka - kb if None not in (ka, kb) and abs(ka - kb) * lw.vw < I32 else 0
def _lane_bound(lw: LaneLowerer, u: UOp) -> str:
  """d of a < b = k*lane < d: b - a at lane 0, a scalar index."""
  return lw.value(affine_simplify(im.sub(u.src[1], u.src[0]).substitute({lw.lane: im.const(0)})))
def _vcmp_affine(lw: LaneLowerer, u: UOp, k: int, fr: Frame, step: int = 1) -> str:
  """a < b with b - a = d - k*lane: lane j's k*j < d, a constant vector against one scalar, compared in i32 (d clamped into
  i32 keeps every lane's answer): one vector compare where index vectors (i64) take two compares, an and and the adds
  building both sides, per tap of a padded window. step > 1: over step*VW elements, lane j's answer at element j*step,
  the elements between false (their constant the largest i32)."""
  em, d = lw.em, _lane_bound(lw, u)
  d32 = em.cast(fr, "index_cast", em.arith(fr, "maxsi", "index", em.arith(fr, "minsi", "index", d, lw.const(I32 - 1, dtypes.index)),
                                            lw.const(-I32, dtypes.index)), "index", "i32")
  vt = lw.vty(dtypes.int32, n := step * lw.vw)
  offs = [k * (i // step) if i % step == 0 else I32 - 1 for i in range(n)]
  return em.cmpi(fr, "slt", em.const(fr, f"dense<{offs}>", vt), em.broadcast(fr, d32, "i32", vt), vt)
def _vconst(lw: LaneLowerer, fr: Frame, v: str, dt: DType) -> str: return lw.em.const(fr, f"dense<{v}>", lw.vty(dt))
def _vcast(lw: LaneLowerer, u: UOp, srcs: list[str], fr: Frame) -> str:
  """A cast on vectors: to bool is != 0 (NaN is true), from bool 0 or 1, else lower_cpu's op by class and width."""
  s, d, em = u.src[0].dtype, u.dtype, lw.em
  if sl(s) == sl(d): return srcs[0]
  if d.is_bool: return (em.cmpf if s.is_float else em.cmpi)(fr, "une" if s.is_float else "ne", srcs[0], _vconst(lw, fr, "0.0" if s.is_float else "0", s), lw.vty(s))
  return em.cast(fr, cast_op(s, d), srcs[0], lw.vty(s), lw.vty(d))
def _vshift(lw: LaneLowerer, u: UOp, srcs: list[str], fr: Frame) -> str:
  """A shift of vectors by a vector of amounts, one per lane (vpsrlvd/vpsllvd), with Lowerer.shift's guard where an amount may
  lie outside [0, bits)."""
  dt = u.dtype
  return lw.shift(u.op, u.src, srcs, dt, fr, lw.vty(dt), lambda v: _vconst(lw, fr, str(v), dt), lw.vty(dtypes.bool))
VRULES = {
  (Ops.WHERE, "b"): lambda lw, u, srcs, fr: lw.em.select(fr, *srcs, lw.vty(u.dtype), lw.vty(dtypes.bool)),
  (Ops.NEG, "f"): lambda lw, u, srcs, fr: lw.em.arith(fr, "negf", lw.vty(u.src[0].dtype), srcs[0]),
  (Ops.RECIP, "f"): lambda lw, u, srcs, fr: lw.em.arith(fr, "divf", lw.vty(u.dtype), _vconst(lw, fr, '1.0', u.dtype), srcs[0]),
  **{(Ops.CAST, c): _vcast for c in "fsub"},
  **{(Ops.BITCAST, c): lambda lw, u, srcs, fr: lw.em.cast(fr, "bitcast", srcs[0], lw.vty(u.src[0].dtype), lw.vty(u.dtype)) for c in "fsu"},
  **{(op, c): _vshift for op in (Ops.SHL, Ops.SHR) for c in "su"},
  **{(Ops(op), "f"): _vpoly for op in POLY}, **{(op, c): _vcmp for op in CMP for c in CMP[op]}}

def lane_split(f: Func, w: int) -> tuple[Func, UOp] | None:
  """uop.lanes = W (optimize.lanes): the kernel with its innermost loop range r (size S) as ceil(S / W) iterations of W
  vector lanes, r = r' * W + lane (lanes past S, where W does not divide it, gated off: they neither load nor store),
  when LaneLowerer can run its store so (its address stepping 1 to LANE_MAX_STEP elements a lane); else None (the kernel
  lowers as plain loops). A symbolic S: ceil(S / W) and the gate read at run time."""
  if w < 2 or (one := single_store(f.roots[0])) is None: return None
  end, st, inner = one
  if len(st.src[0].src) != 2: return None
  n = inner.src[0]
  outer = UOp(Ops.RANGE, dtypes.index, (im.idiv(im.add(n, im.const(w - 1)), w),), attrs(axis=_axis(inner), kind=inner.attrs.get("kind", "loop")))
  lane = lane_range(w)
  st = affine_simplify(st.substitute({inner: (pos := im.add(im.mul(outer, im.const(w)), lane))}))
  if im.cval(n) is None or im.cval(n) % w:
    cut = UOp(Ops.CMPLT, dtypes.bool, (pos, n))
    st = st.substitute({u: gated(u, cut) for u in st.toposort if u.op is Ops.INDEX and lane in u.toposort})
  if not 1 <= (lane_coef(st.src[0].src[1], lane, {}) or 0) <= LANE_MAX_STEP or not LaneLowerer.supports(st.src[1], lane): return None
  end = UOp(Ops.END, dtypes.void, (st, *[outer if r is inner else r for r in end.src[1:]]))
  return Func(f.name, f.args, f.results, [UOp(Ops.SINK, dtypes.void, (end,))], f.attrs), lane

def reduce_lane_split(f: Func, w: int) -> tuple[Func, UOp] | None:
  """uop.reduce_lanes = W (optimize.reduce_lanes): the kernel with the innermost range r of its one f32 reduce (static
  size S, a multiple of W) as S / W iterations of W lanes, r = r' * W + lane, when LaneLowerer can run the reduce's source
  so; else None. The reduce's loads then read W neighbouring elements at once (a matrix-vector product's rows)."""
  if w < 2 or (one := single_store(f.roots[0], REDUCE_STORES)) is None or (red := lane_reduce_of(one[1])) is None: return None
  r = innermost(red)
  if (n := im.cval(r.src[0])) is None or n % w: return None
  lane, parts = lane_range(w), ()
  if n > w: parts = (UOp(Ops.RANGE, dtypes.index, (im.const(n // w),), attrs(axis=_axis(r), kind=r.attrs.get("kind"))),)
  sink = im.with_ranges(f.roots[0], r, (*parts, lane), im.add(im.mul(parts[0], im.const(w)), lane) if parts else lane)
  if (red := lane_reduce_of(single_store(sink, REDUCE_STORES)[1])) is None or not lane_supported(red.src[0], lane): return None
  return Func(f.name, f.args, f.results, [sink], f.attrs), lane

# a matrix-vector product's matrix loads prefetch this many bytes ahead (its quantized bytes, or a float matrix's rows: each
# output's own): its weights stream from memory once a call (a decode step's ~400 short products, a classifier's last
# layer), and the hardware's prefetchers, restarted at each product or 4 KiB page, left them at 8-19 GB/s of a 2-core
# Xeon's 38-49 (0: none)
STREAM_AHEAD = 4096
COSTLY = {Ops.EXP2, Ops.LOG2, Ops.POW, Ops.SIN, Ops.SQRT, Ops.FDIV, Ops.RECIP}   # per-element ops worth a vectorized pass
class LaneReduce:
  """A uop.reduce_lanes kernel whose store applies costly scalar ops to the reduce (SiLU after a matrix-vector
  product: an exp and a division per output, in scalar code between the vector reduces), as two phases: the reduces
  into a scratch buffer in the loops' order (threaded as the kernel), then the store's value over that buffer as
  vector lanes along the innermost loop (one thread: a few thousand elements). Else one phase (LaneLowerer).
  g, lane: reduce_lane_split's kernel and lane range."""
  def __init__(self, f: Func, name: str, w: int, g: Func, lane: UOp):
    self.name = name
    end, st, _ = single_store(g.roots[0], REDUCE_STORES)
    red, loops = lane_reduce_of(st), sorted(end.src[1:], key=_axis)
    # (the second phase's lanes store f32 vectors)
    if st.src[1].dtype is not dtypes.float32 or not all(im.cval(r.src[0]) is not None for r in loops) or not any(
        u.op in COSTLY for u in st.src[1].toposort if u is not red and red in u.toposort):
      self.parts, self.scratch = [(name, LaneLowerer(g, lane, stream=True), g)], []; return
    sizes = [im.cval(r.src[0]) for r in loops]
    n = prod(sizes)
    args = list(f.args) + [arg_buffer(len(f.args), dtypes.float32.ptr(n))]
    lin = im.const(0)
    for r, s in zip(loops, sizes): lin = im.add(im.mul(lin, im.const(s)), r)
    at = UOp(Ops.INDEX, dtypes.float32.ptr(), (args[-1], lin))
    sink = lambda st: [UOp(Ops.SINK, dtypes.void, (UOp(Ops.END, dtypes.void, (st, *end.src[1:])),))]
    red_f = Func(f"{name}_red", args, [], sink(UOp(Ops.STORE, dtypes.void, (at, red))), g.attrs)
    epi = Func(f"{name}_epi", args, [], sink(st.substitute({red: UOp(Ops.LOAD, dtypes.float32, (at,))})),
               {k: v for k, v in g.attrs.items() if k != "uop.threads"})
    self.scratch = [n]
    self.parts = [(red_f.name, LaneLowerer(red_f, lane, stream=True), red_f)]
    self.parts.append((epi.name, LaneLowerer(*ls), ls[0]) if (ls := lane_split(epi, w)) is not None else (epi.name, None, epi))
  def text(self) -> str: return "".join(lower_kernel(f, n, lw) for n, lw, f in self.parts)
  def phases(self): return [(n, parallel_info(f)) for n, _, f in self.parts]

def lane_groups(r: UOp, lane: UOp, axis: int | None = None, kind: str | None = None, unroll: int = 1) -> list[tuple[tuple, UOp, UOp | None]]:
  """Range r (size n) as groups of the W lanes of `lane`: (ranges, r's position in them, gate) for the whole steps of
  `unroll` groups (a range over the n // (W * unroll) steps, then one over the step's groups, which LLVM unrolls:
  independent vectors, a chain each), ungated; and, where those may not cover n, the groups past them one at a time
  (at most unroll of them), the lanes past n gated off. A symbolic n: the counts read at run time, and the whole steps
  run without masks or tests."""
  w, n, ax, kind = im.cval(lane.src[0]), r.src[0], _axis(r) if axis is None else axis, kind or r.attrs.get("kind", "loop")
  # sizes in affine_simplify's form, so that it leaves them (and the reduces over them) as they are on their users;
  # the step's groups on an axis of their own, apart from every range a kernel or its phases number
  rng = lambda size, a=ax: UOp(Ops.RANGE, dtypes.index, (affine_simplify(size),), attrs(axis=a, kind=kind))
  at = lambda grp: im.add(im.mul(grp, im.const(w)), lane)
  out, whole = [], im.idiv(n, w * unroll)
  if im.cval(whole) != 0:
    g, u = rng(whole), rng(im.const(unroll), UNROLL_AXIS + ax)
    out.append(((g, u), at(im.add(im.mul(g, im.const(unroll)), u)), None) if unroll > 1 else ((g,), at(g), None))
  if im.cval(n) is None or im.cval(n) % (w * unroll):
    t = rng(im.idiv(im.add(im.mod(n, w * unroll), im.const(w - 1)), w))
    pos = at(im.add(im.mul(whole, im.const(unroll)), t))
    out.append(((t,), pos, UOp(Ops.CMPLT, dtypes.bool, (pos, n))))
  return out
UNROLL_AXIS = 3000

def gate_lanes(x: UOp, lane: UOp, cut: UOp | None) -> UOp | None:
  """x with every address that steps with the lanes also gated by cut, so that lanes gated off neither load nor store;
  not those inside a reduce over the lanes (their lanes are that reduce's own). None where one address is both."""
  if cut is None: return x
  dep = {lane}
  for u in x.toposort:
    if any(s in dep for s in u.src): dep.add(u)
  out, inner, stack = set(), set(), [(x, False)]
  while stack:
    u, under = stack.pop()
    if u in (inner if under else out) or u not in dep: continue
    (inner if under else out).add(u)
    stack.extend((s, under or u.op is Ops.REDUCE and lane in u.src[1:]) for s in u.src)
  if any(u.op is Ops.INDEX for u in out & inner): return None
  return x.substitute({u: gated(u, cut) for u in out if u.op is Ops.INDEX})

def uses_lane(x: UOp, lane: UOp) -> bool:
  """Whether x depends on range `lane` other than through reduces over it (which LaneLowerer computes as scalars)."""
  dep = {lane}
  for u in x.toposort:
    if u is not lane and any(s in dep for s in u.src) and not (u.op is Ops.REDUCE and lane in u.src[1:]): dep.add(u)
  return x in dep

UNROLL_GROUPS = 4   # groups of lanes per whole step (reduce_groups, rows packed in lanes): 1 ran latency-bound at long rows
def reduce_groups(x: UOp, lane: UOp) -> UOp:
  """x with each f32 reduce over one range whose source LaneLowerer runs along it as groups of `lane`'s W lanes
  (lane_groups): a vector accumulator through the whole steps, its lanes combined once after them, then one through
  the groups past them, the last one's lanes past n bringing the reduce's identity; the two combined by the reduce's
  op. LLVM vectorizes a reduce to a count it knows only at run time in narrow vectors with scalar remainders, and a
  max (NaN-propagating) hardly at all."""
  new: dict[UOp, UOp] = {}
  for u in x.toposort:
    src = tuple(new.get(s, s) for s in u.src)
    v = u if src == u.src else u.replace(src=src)
    if v.op is Ops.REDUCE and len(v.src) == 2 and v.dtype is dtypes.float32 and not uses_lane(v.src[0], lane) and \
       lane_supported(v.src[0], r := v.src[1]):
      parts, op = [], v.attrs["op"]
      for g, pos, cut in lane_groups(r, lane, unroll=UNROLL_GROUPS):
        if (s := gate_lanes(v.src[0].substitute({r: pos}), lane, cut)) is None: break
        if cut is not None: s = UOp(Ops.WHERE, s.dtype, (cut, s, UOp(Ops.CONST, s.dtype, (), attrs(value=REDUCE_IDENTITY[op](s.dtype)))))
        # (simplified here, once: affine_simplify leaves it as it is where it runs on the reduce's users)
        parts.append(UOp(Ops.REDUCE, v.dtype, (affine_simplify(s), *g, lane), v.arg, v.loc))
      else: v = reduce(lambda a, b: UOp(Ops(op), v.dtype, (a, b)), parts)
    new[u] = v
  return new[x]

def row_lanes(f: Func, w: int) -> tuple[Func, UOp] | None:
  """uop.row_lanes = W (optimize.row_lanes): a kernel of rows (softmax's) whose one f32 store steps by 1 with its
  innermost loop r (static size n >= W) and whose reduces run along rows of their own: r and the reduces' ranges as
  groups of W lanes (lane_groups, reduce_groups), whole steps unmasked, the last group's lanes past n masked off.
  LLVM unrolls a short static row fully and vectorizes it poorly. None where LaneLowerer cannot run it."""
  if w < 2 or (one := single_store(f.roots[0])) is None: return None
  end, st, inner = one
  if (n := im.cval(inner.src[0])) is None or n < w or len(st.src[0].src) != 2: return None
  if lane_coef(st.src[0].src[1], inner, {}) != 1: return None
  lane, ends = lane_range(w), []
  st = reduce_groups(st, lane)
  for g, pos, cut in lane_groups(inner, lane, unroll=UNROLL_GROUPS):
    if (part := gate_lanes(st.substitute({inner: pos}), lane, cut)) is None or not LaneLowerer.supports(part.src[1], lane): return None
    ends.append(UOp(Ops.END, dtypes.void, (affine_simplify(part), *g)))
  body = ends[0] if len(ends) == 1 else UOp(Ops.GROUP, dtypes.void, tuple(ends))
  outer = [r for r in end.src[1:] if r is not inner]
  sink = UOp(Ops.SINK, dtypes.void, (UOp(Ops.END, dtypes.void, (body, *outer)),))
  return Func(f.name, f.args, f.results, [sink], {k: v for k, v in f.attrs.items() if k not in ("uop.keep", "uop.row_lanes")}), lane
