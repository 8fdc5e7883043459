"""One loop range run as the lanes of vectors: LaneLowerer lowers a kernel whose `lane` range has no loop, each value
that depends on it a vector (the contraction's packs and tile epilogues, Winograd's input transform); lane_split
rewrites a kernel marked `uop.lanes = W` so its innermost loop steps W lanes."""
from __future__ import annotations
from itertools import product
from math import prod
from morok_mlir.ir.bridge import Func
from morok_mlir.core.dtype import DType, dtypes
from morok_mlir.core.uop import UOp, attrs
from morok_mlir.dialects.ops import Ops, REDUCE_IDENTITY
from morok_mlir.core import index_math as im
from morok_mlir.core.index_math import affine_simplify
from morok_mlir.core.kernel_facts import lane_coef, single_store
from morok_mlir.codegen.lower_cpu import ALU, CMP, POLY, Frame, Lowerer, Poly, _axis, cls, exp2_of_product, gated, lane_range, mem_type, sl, splat

# ops a lane-dependent value may be made of (dtype class -> ops), and the largest address step a load's lanes may take
LANE_OPS = {"s": {Ops.ADD, Ops.SUB, Ops.MUL}, "b": {Ops.CMPLT, Ops.CMPEQ, Ops.CMPNE, Ops.AND, Ops.OR, Ops.XOR, Ops.CAST},
            "f": {Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.RECIP, Ops.SQRT, Ops.MAX, Ops.MIN, Ops.NEG, Ops.WHERE, Ops.LOAD, Ops.REDUCE,
                  Ops.EXP2, Ops.LOG2, Ops.POW, Ops.CAST}}   # casts between f32 and bool (a mask read as floats)
LANE_MAX_STEP = 4

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
  def __init__(self, f: Func, lane: UOp, prefetch: bool = False, skip: UOp | None = None):
    self.lane, self.vw, self.prefetch, self.skip = lane, im.cval(lane.src[0]), prefetch, skip
    self.vec = set()
    for u in f.roots[0].toposort:
      if u is lane or any(s in self.vec for s in u.src): self.vec.add(u)
    self.bcast: dict[UOp, tuple[Frame, str]] = {}
    super().__init__(f)

  @staticmethod
  def supports(x: UOp, lane: UOp) -> bool:
    """Whether x (a value of an f32 store whose address steps by 1 with `lane`) can be computed as lane vectors."""
    memo, dep = {}, {lane}
    for u in x.toposort:
      if u is not lane and any(s in dep for s in u.src): dep.add(u)
      if u not in dep or u is lane or u.op is Ops.INDEX: continue
      if u.dtype not in (dtypes.index, dtypes.bool, dtypes.float32) or u.op not in LANE_OPS[cls(u.dtype)]: return False
      if u.op is Ops.WHERE and u.src[1].dtype is not dtypes.float32: return False
      if u.op is Ops.CAST and {u.dtype, u.src[0].dtype} != {dtypes.float32, dtypes.bool}: return False
      if u.op is Ops.REDUCE and u.attrs.get("op") not in ("add", "max", "min"): return False
      if u.op is Ops.LOAD:
        idx = u.src[0]
        if idx.op is not Ops.INDEX or idx.src[0].op is not Ops.BUFFER: return False
        if (c := lane_coef(idx.src[1], lane, memo)) is None or not 0 <= c <= LANE_MAX_STEP or c == 0 and len(idx.src) < 3: return False
    return True

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
    if u not in self.vec: return super()._value(u)
    if (n := self.names.get(u)) is not None: return n
    fr = self.target(u)
    L = lambda text: self.line(fr, text)
    if u is self.lane: return self.place(u, fr, self.em.const(fr, f"dense<{list(range(self.vw))}>", self.vty(dtypes.index)))
    if u.op is Ops.LOAD: return self.place(u, fr, self.vload(u, fr))
    if u.op is Ops.REDUCE and (terms := self.taps(u)) is not None:   # a short reduce's terms combined as a tree
      vs, comb = [self.vec_of(t, fr) for t in terms], ALU[u.attrs["op"]]["f"]
      while len(vs) > 1: vs = [L(f"{comb} {a}, {b}{self.fm} : {self.vty(u.dtype)}") for a, b in zip(vs[::2], vs[1::2])] + vs[len(vs) & ~1:]
      return self.place(u, fr, vs[0])
    if u.op is Ops.REDUCE:   # a vector accumulator per lane, carried through the reduce's loops
      vt, op = self.vty(u.dtype), u.attrs["op"]
      init = splat(self.em, fr, REDUCE_IDENTITY[op](u.dtype), "f32", self.vw)
      frames = self.open_loops(fr, list(u.src[1:]), inits=[init])
      acc = self.line(frames[-1], f"{ALU[op]['f']} {frames[-1].acc}, {self.vec_of(u.src[0], frames[-1])}{self.fm} : {vt}")
      self.close_loops(frames, vt, acc)
      return self.place(u, fr, frames[0].res)
    srcs, c = [self.vec_of(s, fr) for s in u.src], cls(u.src[0].dtype)
    if (rule := VRULES.get((u.op, c))) is not None: return self.place(u, fr, rule(self, u, srcs, fr))
    return self.place(u, fr, L(f"{ALU[u.op][c]} {', '.join(srcs)} : {self.vty(u.src[0].dtype)}"))

  TAPS_MAX = 32   # terms of a reduce unrolled into a tree (a 3x3 or 5x5 window)
  def taps(self, u: UOp) -> list[UOp] | None:
    """The terms of a reduce over at most TAPS_MAX constant iterations (a pool's or a depthwise convolution's window),
    each with the reduce's ranges as constants, or None. A loop would chain every lane group's terms through one
    accumulator, each combine waiting on the last (a 3x3 max pool at 3-4x the cycles of the loads); a tree of them
    keeps the loads and combines independent."""
    rs, ns = u.src[1:], [im.cval(r.src[0]) for r in u.src[1:]]
    if None in ns or prod(ns) > self.TAPS_MAX: return None
    terms = [affine_simplify(u.src[0].substitute({r: im.const(i) for r, i in zip(rs, ix)})) for ix in product(*map(range, ns))]
    for x in (x for t in terms for x in t.toposort):
      if x is self.lane or any(s in self.vec for s in x.src): self.vec.add(x)
    return terms

  def vload(self, u: UOp, fr: Frame) -> str:
    idx, vw = u.src[0], self.vw
    buf, step, mt = self.value(idx.src[0]), lane_coef(idx.src[1], self.lane, {}), mem_type(idx.src[0].dtype)
    base, n = self.at0(idx.src[1]), step * vw
    em, bt, ft = self.em, self.vty(dtypes.bool), self.vty(dtypes.float32)
    if step == 0:   # one element, gated per lane: read where any lane's gate holds (then it is in bounds)
      mask = self.value(idx.src[2])
      some = em.reduction(fr, "or", mask, bt, "i1")
      v = em.load(fr, buf, em.select(fr, some, base, self.const(0, dtypes.index), "index"), mt)
      zero = em.const(fr, "dense<0.0>", ft)
      return em.select(fr, mask, em.broadcast(fr, v, "f32", ft), zero, ft, bt)
    if len(idx.src) > 2: mask = self.vec_of(idx.src[2], fr)
    elif step == 1: return em.vload(fr, buf, base, mt, ft)
    else: mask = em.const(fr, "dense<true>", bt)
    if step > 1:   # lane j's gate on element j*step, the elements between off
      off = em.const(fr, "dense<false>", bt)
      mask = em.shuffle(fr, mask, off, [i // step if i % step == 0 else vw for i in range(n)], bt, bt)
    vt = self.vty(dtypes.float32, n)
    v = em.maskedload(fr, buf, base, mask, em.const(fr, "dense<0.0>", vt), mt, self.vty(dtypes.bool, n), vt)
    if step == 1: return v
    return em.shuffle(fr, v, v, [j * step for j in range(vw)], vt, vt)

  def effect(self, u: UOp):
    if u.op is not Ops.STORE or u not in self.vec or u in self.done: return super().effect(u)
    self.done.add(u)
    idx, v = u.src
    fr = self.target(u)
    if self.prefetch:   # the loads a reduce makes are left out (their addresses need its loop)
      under = {y for r in v.toposort if r.op is Ops.REDUCE for y in r.src[0].toposort}
      for x in [idx] + [x.src[0] for x in v.toposort if x.op is Ops.LOAD and x not in under and x.src[0].src[0] is not self.skip]:
        self.touch(x, x is idx, fr)
      return
    val = self.vec_of(v, fr)
    buf, at = self.value(idx.src[0]), self.at0(idx.src[1])
    mt, ft = mem_type(idx.src[0].dtype), self.vty(dtypes.float32)
    if len(idx.src) > 2: self.em.maskedstore(fr, buf, at, self.vec_of(idx.src[2], fr), val, mt, self.vty(dtypes.bool), ft)   # gated off: unwritten
    else: self.em.vstore(fr, val, buf, at, mt, ft)

  def touch(self, idx: UOp, write: bool, fr: Frame):
    """Prefetch the lanes' first and last element of idx (clamped into its buffer)."""
    buf, mt, base = self.value(idx.src[0]), mem_type(idx.src[0].dtype), self.at0(idx.src[1])
    last, top, c0 = (lane_coef(idx.src[1], self.lane, {}) or 0) * (self.vw - 1), idx.src[0].dtype.size - 1, self.const(0, dtypes.index)
    em = self.em
    clamp = lambda x: em.arith(fr, "maxsi", "index", em.arith(fr, "minsi", "index", x, self.const(top, dtypes.index)), c0)
    ends = [base] + [em.arith(fr, "addi", "index", base, self.const(last, dtypes.index))] * bool(last)
    for at in map(clamp, ends): em.prefetch(fr, buf, at, write, mt)

# the lanes' table: (op, dtype class of its first operand) -> rule(lowerer, u, vector operands, frame) -> the result;
# other ops are one MLIR op of ALU on vectors (LANE_OPS lists what may reach here)
def _vpoly(lw: LaneLowerer, u: UOp, srcs: list[str], fr: Frame) -> str:
  if (xc := exp2_of_product(u)) is not None: return Poly(lw, fr, lw.vw).exp2_mul(lw.vec_of(xc[0], fr), xc[1])
  return getattr(Poly(lw, fr, lw.vw), str(u.op))(*srcs)
def _vcmp(lw: LaneLowerer, u: UOp, srcs: list[str], fr: Frame) -> str:
  mop, pred = CMP[u.op][cls(u.src[0].dtype)].split()
  return lw.line(fr, f"{mop} {pred}, {srcs[0]}, {srcs[1]} : {lw.vty(u.src[0].dtype)}")
def _vconst(lw: LaneLowerer, fr: Frame, v: str, dt: DType) -> str: return lw.em.const(fr, f"dense<{v}>", lw.vty(dt))
VRULES = {
  (Ops.WHERE, "b"): lambda lw, u, srcs, fr: lw.em.select(fr, *srcs, lw.vty(u.dtype), lw.vty(dtypes.bool)),
  (Ops.NEG, "f"): lambda lw, u, srcs, fr: lw.em.arith(fr, "negf", lw.vty(u.src[0].dtype), srcs[0]),
  (Ops.RECIP, "f"): lambda lw, u, srcs, fr: lw.em.arith(fr, "divf", lw.vty(u.dtype), _vconst(lw, fr, '1.0', u.dtype), srcs[0]),
  # f32 -> bool is != 0 (NaN is true), bool -> f32 is 0 or 1
  (Ops.CAST, "f"): lambda lw, u, srcs, fr: lw.em.cmpf(fr, "une", srcs[0], _vconst(lw, fr, '0.0', u.src[0].dtype), lw.vty(u.src[0].dtype)),
  (Ops.CAST, "b"): lambda lw, u, srcs, fr: lw.em.cast(fr, "uitofp", srcs[0], lw.vty(u.src[0].dtype), lw.vty(u.dtype)),
  **{(Ops(op), "f"): _vpoly for op in POLY}, **{(op, c): _vcmp for op in CMP for c in CMP[op]}}

def lane_split(f: Func, w: int) -> tuple[Func, UOp] | None:
  """uop.lanes = W (optimize.lanes): the kernel with its innermost loop range r (size S) as ceil(S / W) iterations of W
  vector lanes, r = r' * W + lane (lanes past S, where W does not divide it, gated off: they neither load nor store),
  when LaneLowerer can run its store so; else None (the kernel lowers as plain loops). A symbolic S: ceil(S / W) and the
  gate read at run time."""
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
  if lane_coef(st.src[0].src[1], lane, {}) != 1 or not LaneLowerer.supports(st.src[1], lane): return None
  end = UOp(Ops.END, dtypes.void, (st, *[outer if r is inner else r for r in end.src[1:]]))
  return Func(f.name, f.args, f.results, [UOp(Ops.SINK, dtypes.void, (end,))], f.attrs), lane
