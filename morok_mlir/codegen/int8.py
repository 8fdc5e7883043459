"""The int8 contraction: a kernel uop-optimize marked `uop.int8 = [MR, NR, VW, KW]` (kernel_facts.int8_contraction: the
store is g(int32 reduce-add over K of a*b), a and b 8-bit values, one unsigned and one signed) as the CPU's int8 dot
product on packed operands (Int8Contraction). Exact: every product and sum is an integer one, in int32 as onnx defines
MatMulInteger (a zero point's correction is the front end's: onnx.ops._int_matmul)."""
from __future__ import annotations
from math import prod
from morok_mlir.ir.bridge import Func, arg_buffer, attr_text
from morok_mlir.core.dtype import dtypes
from morok_mlir.core.uop import UOp, attrs
from morok_mlir.dialects.ops import Ops
from morok_mlir.core import index_math as im
from morok_mlir.core.index_math import affine
from morok_mlir.core.kernel_facts import int8_contraction, one_index, rsize
from morok_mlir.ir.registry import PassError
from morok_mlir.codegen.lower_cpu import _int_attr, lower_kernel, mem_type, parallel_info
from morok_mlir.codegen.emitter import HI, LO, Block, Emitter, arg, params

# (i32 lanes, 8-bit values per lane) -> the LLVM intrinsic, and whether it accumulates (vpdpbusd: acc + the sums of 4 u8
# x s8 products, its u8 operand first; vpmaddwd: the sums of 2 i16 x i16 products, added to the accumulator after)
DOTS = {(16, 4): ("llvm.x86.avx512.vpdpbusd.512", True), (8, 4): ("llvm.x86.avx512.vpdpbusd.256", True),
        (16, 2): ("llvm.x86.avx512.pmaddw.d.512", False), (8, 2): ("llvm.x86.avx2.pmadd.wd", False)}

def i32(v: int) -> UOp: return UOp(Ops.CONST, dtypes.int32, (), attrs(value=v))
def alu(op: Ops, *src: UOp) -> UOp: return UOp(op, src[0].dtype, src)

class Int8Contraction:
  """Four phases over the kernel's buffers and three scratch buffers of 32-bit words (typed f32 as every scratch is):
    pack_a  Ap[Mp][K/KW]           a's KW values along k in one word (bytes, or i16 halves where KW = 2), k past K as 0
    pack_b  Bp[N/NR][K/KW][NR]     b's, in NR-wide panels: a panel's words at one k step are one row of VW-lane vectors
    mm      C[Mp][Np] (int32 bits) per NR-wide panel (threads split the panels), per MR-row tile: MR x NR/VW accumulators
            carried through k, each k step NR/VW vector loads of Bp, MR broadcasts of an Ap word, MR x NR/VW dot products
    epi     the original store, the reduce replaced by C's element (called by mm where both run on one thread)
  Rows past M and columns past N are never packed: they reach only C's pad, which the epilogue never reads. A pack of
  one input buffer alone (int8 weights) runs once per input: its panels are kept (reuse)."""
  PAR_MIN = 1 << 18   # elements (packs, epilogue) or multiply-adds / 16 (mm) below which a phase runs on one thread

  def __init__(self, f: Func, name: str):
    self.f, self.name = f, name
    if (found := int8_contraction(f.roots[0])) is None: raise PassError(f"@{f.name}: uop.int8 on a kernel that is not a contraction of 8-bit values")
    red, a, b, I, J, K, T = found
    if len(K) != 1 or T: raise PassError(f"@{f.name}: uop.int8 needs one reduce range and no batch")
    if not (isinstance(c := f.attrs["uop.int8"], tuple) and len(c) == 4 and (c[2], c[3]) in DOTS and all(type(x) is int and x > 0 for x in c)
            and c[1] % c[2] == 0):
      raise PassError(f"@{f.name}: uop.int8 must be array<i64: MR, NR, VW, KW>, NR a multiple of VW, (VW, KW) one of {sorted(DOTS)}, "
                      f"got {attr_text(c)}")
    self.mr, self.nr, self.vw, self.kw = c
    self.M, self.N, self.K = prod(map(rsize, I)), prod(map(rsize, J)), rsize(K[0])
    self.K4 = -(-self.K // self.kw)   # words per row
    self.Mp, self.Np = -(-self.M // self.mr) * self.mr, -(-self.N // self.nr) * self.nr
    self.t = _int_attr(f, "uop.threads", 1)
    self.thr = {k: v for k, v in f.attrs.items() if k == "uop.threads"}
    n = len(f.args)
    # a row-major matrix of 8-bit values whose rows start at words: its words are Ap's, read in place (no pack_a)
    self.direct_a = self.in_place(a, I, K[0]) if self.kw == 4 else None
    self.scratch = [1 if self.direct_a else self.Mp * self.K4, self.Np * self.K4, self.Mp * self.Np]
    self.args = list(f.args) + [arg_buffer(n + j, dtypes.float32.ptr(x)) for j, x in enumerate(self.scratch)]
    ap, bp, cp = self.args[n:]
    # vpdpbusd's u8 operand may be either: a's or b's (the u8 values' side is a property of the data, not of the tile)
    self.a_unsigned = a.dtype is dtypes.uint8
    self.pack_a = None if self.direct_a else self.pack(a, I, K[0], ap, lambda row, k4: im.add(im.mul(row, im.const(self.K4)), k4))
    self.pack_b = self.pack(b, J, K[0], bp, lambda col, k4: im.add(im.add(im.mul(im.idiv(col, self.nr), im.const(self.K4 * self.nr)),
                                                                          im.mul(k4, im.const(self.nr))), im.mod(col, self.nr)))
    ci = im.add(im.mul(im.linearize(I, [rsize(r) for r in I]), im.const(self.Np)), im.linearize(J, [rsize(r) for r in J]))
    cval = UOp(Ops.BITCAST, dtypes.int32, (UOp(Ops.LOAD, dtypes.float32, (UOp(Ops.INDEX, dtypes.float32.ptr(), (cp, ci)),)),))
    # mm and the epilogue each on one thread (a small product: a call's microseconds): mm ends by calling the epilogue,
    # one phase (one call from the runtime) fewer
    self.one_pass = self.t <= 1 or self.M * self.N * self.K < 16 * self.PAR_MIN and self.M * self.N < self.PAR_MIN
    self.epi = Func(f"{name}_epi", self.args, [], [f.roots[0].substitute({red: cval})], {"uop.kernel": None, **({} if self.one_pass else self.thr)})
    self.a_slot, self.b_slot = self.one_slot(a), self.one_slot(b)

  @staticmethod
  def one_slot(x: UOp) -> int | None:
    """The argument x reads, where it reads one input buffer alone."""
    srcs = {u.src[0].src[0] for u in x.toposort if u.op is Ops.LOAD}
    return next(iter(srcs)).attrs["slot"] if len(srcs) == 1 and next(iter(srcs)).op is Ops.BUFFER else None

  def in_place(self, a: UOp, I: list[UOp], k: UOp) -> tuple[int, int, int] | None:
    """(buffer slot, offset, row stride) in values when a is an ungated load at offset + row * stride + k (row: the
    linear index of I), offset and stride multiples of 4 and K too: row r's word k4 is then 4 bytes at offset +
    r * stride + 4 * k4."""
    if a.op is not Ops.LOAD or (idx := a.src[0]).op is not Ops.INDEX or len(idx.src) != 2 or idx.src[0].op is not Ops.BUFFER: return None
    if (form := affine(idx.src[1], {})) is None or set(form) - {1, k, *I} or form.get(k) != 1 or self.K % 4: return None
    if not one_index(form, I): return None
    off, row = form.get(1, 0), form.get(I[-1], 0) if I else 0
    return (idx.src[0].attrs["slot"], off, row) if off % 4 == 0 and row % 4 == 0 and (row >= self.K or not I) else None

  def pack(self, x: UOp, rs: list[UOp], k: UOp, buf: UOp, at) -> Func:
    """A phase storing x's words: loops over x's rows (fresh ranges, in x's order) and k's words; word (row, k4) holds x at
    k = KW*k4 + j in its j-th byte (KW = 4) or i16 half (KW = 2), zero past K."""
    bits = 32 // self.kw
    new = {r: UOp(Ops.RANGE, dtypes.index, r.src, attrs(axis=1000 + i, kind="loop")) for i, r in enumerate(rs)}
    k4 = UOp(Ops.RANGE, dtypes.index, (im.const(self.K4),), attrs(axis=1000 + len(rs), kind="loop"))
    x = x.substitute(new)
    word = None
    for j in range(self.kw):
      kj = im.add(im.mul(k4, im.const(self.kw)), im.const(j))
      past = self.K % self.kw and j >= self.K % self.kw   # the last word's value j lies past K
      v = alu(Ops.AND, UOp(Ops.CAST, dtypes.int32, (x.substitute({k: UOp(Ops.MIN, dtypes.index, (kj, im.const(self.K - 1))) if past else kj}),)),
              i32((1 << bits) - 1))
      if past: v = UOp(Ops.WHERE, dtypes.int32, (UOp(Ops.CMPLT, dtypes.bool, (kj, im.const(self.K))), v, i32(0)))
      if j: v = alu(Ops.SHL, v, i32(bits * j))
      word = v if word is None else alu(Ops.OR, word, v)
    idx = at(im.linearize([new[r] for r in rs], [rsize(r) for r in rs]), k4)
    st = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, dtypes.float32.ptr(), (buf, idx)), UOp(Ops.BITCAST, dtypes.float32, (word,))))
    return Func(f"{self.name}_pack", self.args, [], [UOp(Ops.SINK, dtypes.void, (UOp(Ops.END, dtypes.void, (st, *new.values(), k4)),))],
                {"uop.kernel": None, **self.thr})

  def phases(self) -> list[tuple[str, tuple | None]]:
    par = lambda f, work: (parallel_info(f)[0], self.t if work >= self.PAR_MIN else 1, 1) if self.t > 1 else None
    mm_par = (self.Np // self.nr, self.t if self.M * self.N * self.K >= 16 * self.PAR_MIN else 1, 1) if self.t > 1 else None
    return [*([(f"{self.name}_pack_a", par(self.pack_a, self.M * self.K))] if self.pack_a else []),
            (f"{self.name}_pack_b", par(self.pack_b, self.N * self.K)), (f"{self.name}_mm", mm_par),
            *([] if self.one_pass else [(f"{self.name}_epi", par(self.epi, self.M * self.N))])]

  def reuse(self) -> list[tuple[int, int, int, tuple]]:
    """(phase, argument, scratch, keys): a pack of one input buffer alone (the weights' panels, as large as the weights;
    static sizes: no keys)."""
    names = [e for e, _ in self.phases()]
    return [(names.index(f"{self.name}_pack_{x}"), slot, i, ()) for i, (x, slot) in enumerate((("a", self.a_slot), ("b", self.b_slot)))
            if slot is not None and f"{self.name}_pack_{x}" in names]

  def text(self) -> str:
    return ((lower_kernel(self.pack_a, f"{self.name}_pack_a") if self.pack_a else "") + lower_kernel(self.pack_b, f"{self.name}_pack_b")
            + self.mm() + lower_kernel(self.epi, f"{self.name}_epi", private=self.one_pass))

  def mm(self) -> str:
    """C = Ap x Bp: per panel p (from %lo to %hi when threaded), per MR-row tile, the k loop over words carrying the tile."""
    em, b, n = Emitter("v", 1), Block(), len(self.f.args)
    bp, cp = arg(n + 1), arg(n + 2)
    mts = [mem_type(a.dtype) for a in self.args]
    mtb, mtc = mts[n + 1:]
    nv, vw, ew = self.nr // self.vw, self.vw, 32 // self.kw
    F, I, E = f"vector<{vw}xf32>", f"vector<{vw}xi32>", f"vector<{vw * self.kw}xi{ew}>"   # E: the dot's operand, by value
    name, acc_first = DOTS[(vw, self.kw)]
    c = lambda v: em.const(b, v)
    zero = em.const(b, "dense<0>", I)
    lo, hi = (LO, HI) if self.t > 1 else (c(0), c(self.Np // self.nr))
    with em.for_(b, lo, hi, c(1)) as p:
      pb = p.body
      with em.for_(pb, c(0), c(self.Mp), c(self.mr)) as i0:
        ib = i0.body
        with em.for_(ib, c(0), c(self.K4), c(1), [zero] * (self.mr * nv), I) as kl:
          kb, k = kl.body, kl.iv
          bat = em.arith(kb, "muli", "index", em.arith(kb, "addi", "index", em.arith(kb, "muli", "index", p.iv, c(self.K4)), k), c(self.nr))
          bv = [em.vbitcast(kb, em.vload(kb, bp, em.arith(kb, "addi", "index", bat, c(v * vw)) if v else bat, mtb, F), F, E) for v in range(nv)]
          out = []
          for r in range(self.mr):
            av = em.vbitcast(kb, self.a_word(em, kb, i0.iv, r, k, c, mts), I if self.direct_a else F, E)
            for v in range(nv):
              acc, (u, s) = kl.accs[r * nv + v], (av, bv[v]) if self.a_unsigned else (bv[v], av)
              if acc_first: out.append(em.intrinsic(kb, name, [acc, u, s], [I, E, E], I))
              else: out.append(em.arith(kb, "addi", I, acc, em.intrinsic(kb, name, [u, s], [E, E], I)))
          kl.yields = out
        for r in range(self.mr):
          row = em.arith(ib, "muli", "index", em.arith(ib, "addi", "index", i0.iv, c(r)), c(self.Np))
          for v in range(nv):
            at = em.arith(ib, "addi", "index", row, em.arith(ib, "addi", "index", em.arith(ib, "muli", "index", p.iv, c(self.nr)), c(v * vw)))
            em.vstore(ib, em.vbitcast(ib, kl.results[r * nv + v], I, F), cp, at, mtc, F)
    if self.one_pass: em.call(b, f"{self.name}_epi", [arg(i) for i in range(len(self.args))], mts)
    return Emitter.func(f"{self.name}_mm", params(mts, *((LO, HI) if self.t > 1 else ())), b)

  def a_word(self, em: Emitter, kb: Block, i0: str, r: int, k: str, c, mts: list[str]) -> str:
    """Row i0 + r's word k broadcast to every lane: from Ap, or read in place (the row clamped to the last: rows past M
    reach only C's pad)."""
    vw, n = self.vw, len(self.f.args)
    row = em.arith(kb, "addi", "index", i0, c(r)) if r else i0
    if not self.direct_a:
      at = em.arith(kb, "addi", "index", em.arith(kb, "muli", "index", row, c(self.K4)), k)
      return em.broadcast(kb, em.load(kb, arg(n), at, mts[n]), "f32", f"vector<{vw}xf32>")
    slot, off, stride = self.direct_a
    if self.Mp > self.M and r: row = em.arith(kb, "minsi", "index", row, c(self.M - 1))
    at = em.arith(kb, "addi", "index", em.arith(kb, "muli", "index", row, c(stride)), em.arith(kb, "muli", "index", k, c(4)))
    if off: at = em.arith(kb, "addi", "index", at, c(off))
    w8, w32 = f"vector<{self.kw}xi8>", f"vector<{self.kw // 4}xi32>"   # a word's bytes, the word
    return em.broadcast(kb, em.vbitcast(kb, em.vload(kb, arg(slot), at, mts[slot], w8), w8, w32), w32, f"vector<{vw}xi32>")
