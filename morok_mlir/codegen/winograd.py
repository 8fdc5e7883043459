"""F(2x2, 3x3) Winograd convolution (Lavin and Gray, 2016) for a kernel uop-optimize marked `uop.winograd = [MR, NR, KC,
MC, VW, RB]` (kernel_facts.winograd: a 3x3 convolution of stride 1 and dilation 1, input and output channels >= 16, at most
128 output channels below 32 input channels, any size and padding). Each 2x2 block of outputs (a tile t) and each pair of
channels takes 16 multiplies instead of 36, in four phases (five with pad) over scratch buffers (the tile's 16 values indexed by
xi = 4i + j; tiles by row r of tiles over the batch):
  wt   U[xi][co][ci] = (G g G^T)[i][j] of each 3x3 filter g: the A panels of 16 products (MR rows of co); a function of
       the weights alone, so the runtime keeps it while the weights buffer lives (reuse)
  pad  zeros into the B panels' columns past the tiles (where the columns leave the last panel part empty)
  in   V[xi][ci][t] = (B^T d B)[i][j] of each 4x4 input tile d (tiles 2 apart: the image operand evaluated at oy + ky =
       2 ty + i), the B panels (NR columns of t), a row's tiles as vector lanes
  mm   M[xi] = U[xi] @ V[xi]: Contraction's micro-kernel, a batch of 16 products (threads split the batch)
  out  Y = A^T M A per tile: its 2x2 outputs go through the kernel's own store (bias, relu, a residual: the epilogue at
       each output; outputs past an odd size's end are not stored)
With RB > 0 (optimize.winograd_block: the whole batch's transformed tiles would leave L3) one phase (blk) runs in, mm and
out per block of RB tile rows instead, on each thread's own L2-sized B and C. The transforms are additions and halvings
(F(2x2, 3x3) is the variant with the smallest error; tests compare with a float64 product at 1e-5 of the output's scale)."""
from __future__ import annotations
from dataclasses import replace
from math import prod
from morok_mlir.ir.bridge import Func, arg_buffer
from morok_mlir.core.dtype import dtypes
from morok_mlir.core.uop import UOp, attrs
from morok_mlir.dialects.ops import Ops
from morok_mlir.core import index_math as im
from morok_mlir.core.index_math import affine_simplify
from morok_mlir.core.kernel_facts import WINO_MIN_LANES, contraction, contraction_tiles, winograd
from morok_mlir.host import CACHES
from morok_mlir.ir.registry import PassError
from morok_mlir.codegen.lower_cpu import _int_attr, gated, lane_range, loop_range, lower_kernel, mem_type, outer_range, parallel_info, sizes
from morok_mlir.codegen.lanes import LaneLowerer
from morok_mlir.codegen.contraction import Contraction, MicroKernel, mm
from morok_mlir.codegen.emitter import HI, LO, TID, Block, Emitter, arg, params

BT = ((1, 0, -1, 0), (0, 1, 1, 0), (0, -1, 1, 0), (0, 1, 0, -1))   # input transform (4x4)
G = ((1, 0, 0), (0.5, 0.5, 0.5), (0.5, -0.5, 0.5), (0, 0, 1))    # filter transform (4x3)
AT = ((1, 1, 1, 0), (0, 1, -1, -1))                               # output transform (2x4)

def f32(v: float) -> UOp: return UOp(Ops.CONST, dtypes.float32, (), attrs(value=float(v)))
def combine(mat, xs: list[UOp]) -> list[UOp]:
  """mat @ xs for a matrix of 0, +-1 and +-1/2: sums and differences, a halving last."""
  out = []
  for row in mat:
    acc, half = None, all(abs(c) in (0, 0.5) for c in row)
    for c, x in sorted(zip(row, xs), key=lambda cx: cx[0] < 0):   # a positive term first: d2 - d1, not -d1 + d2
      if not c: continue
      if acc is None: acc = x if c > 0 else UOp(Ops.NEG, dtypes.float32, (x,))
      else: acc = UOp(Ops.ADD if c > 0 else Ops.SUB, dtypes.float32, (acc, x))
    out.append(UOp(Ops.MUL, dtypes.float32, (acc, f32(0.5))) if half else acc)
  return out
def transform(left, right, x: list[list[UOp]]) -> list[list[UOp]]:
  """left @ x @ right^T, x a list of rows."""
  cols = [combine(left, [row[j] for row in x]) for j in range(len(x[0]))]   # left @ x, column by column
  return [combine(right, [col[i] for col in cols]) for i in range(len(left))]

def at(x: UOp, sub: dict) -> UOp: return affine_simplify(x.substitute(sub))
def store(buf: UOp, idx: UOp, v: UOp) -> UOp: return UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, dtypes.float32.ptr(), (buf, idx)), v))
def kernel(name: str, args: list[UOp], stores: list[UOp], loops: list[UOp], extra: dict) -> Func:
  end = UOp(Ops.END, dtypes.void, (UOp(Ops.GROUP, dtypes.void, tuple(stores)), *loops))
  return Func(name, args, [], [UOp(Ops.SINK, dtypes.void, (end,))], {"uop.kernel": None, **extra})

def direct(f: Func) -> Func:
  """The kernel as a plain contraction (tiles for its own product), for a convolution Winograd cannot lower."""
  _, _, _, I, J, K, _ = contraction(f.roots[0])
  vw = f.attrs["uop.winograd"][4]
  mm = (*contraction_tiles(*(prod(sizes(rs)) for rs in (I, J, K)), vw, CACHES, _int_attr(f, "uop.threads", 1)), vw)
  return replace(f, attrs={**{k: v for k, v in f.attrs.items() if k != "uop.winograd"}, "uop.contraction": mm})

class Winograd:
  """The phases above; the 16 products are one call of the contraction's micro-kernel (contraction.mm on a batch of 16
  problems, Cout x tiles x Cin, A and B packed in panels, C in scratch: see micro)."""
  def __init__(self, f: Func, name: str):
    self.f, self.name = f, name
    if (c := contraction(f.roots[0])) is None or (w := winograd(c)) is None:
      raise PassError(f"@{f.name}: uop.winograd on a kernel that is not a 3x3 convolution")
    red, img, wt, co, ci, (oy, ky), (ox, kx) = c[0], *w
    if not (isinstance(t := f.attrs["uop.winograd"], tuple) and len(t) == 6 and all(type(x) is int and x > 0 for x in t[:5]) and t[5] >= 0):
      raise PassError(f"@{f.name}: uop.winograd must be array<i64: MR, NR, KC, MC, VW, RB> of positive sizes (RB >= 0)")
    self.mr, self.nr, self.kc, self.mc, self.vw, rb = t
    end = f.roots[0].src[0]
    rest = [r for r in sorted(end.src[1:], key=lambda r: r.attrs["axis"]) if r not in (co, oy, ox)]   # the batch
    (oh, ow), nrest = sizes([oy, ox]), prod(sizes(rest))
    th, tw = -(-oh // 2), -(-ow // 2)   # an odd size's last tile has one output row or column past the end
    # the input transform runs L neighbouring tiles of a row as vector lanes: each row of tiles is padded to a multiple
    # of L (tiles past its end read nothing: 0), so no lane group crosses a row or a B panel; L is the widest whose
    # padded columns (tiles, then NR-wide panels: the products' work) are within 1/8 of the fewest
    padded = lambda L: -(-nrest * th * -(-tw // L) * L // self.nr) * self.nr
    widths = [L for L in (self.vw, self.vw // 2, WINO_MIN_LANES) if L >= WINO_MIN_LANES and self.nr % L == 0] or [1]
    self.lanes = next(L for L in widths if padded(L) <= 1.125 * min(map(padded, widths)))
    twp = -(-tw // self.lanes) * self.lanes
    # rows of tiles r (over the batch and tile rows): the transforms' outer loop. With RB > 0 the phases run per block of
    # RB rows instead, each thread's block's tiles and products in its own L2-sized buffers (mm: one block's 16 products)
    rows, self.threads = nrest * th, _int_attr(f, "uop.threads", 1)
    self.rb = min(rb, rows) or rows
    self.M, self.K, self.N = *sizes([co, ci]), self.rb * twp
    self.Mp, self.Np = -(-self.M // self.mr) * self.mr, -(-self.N // self.nr) * self.nr
    # the 16 problems' panels and results 64 bytes more than their size apart: the transforms read or write one value of
    # each, and 16 streams a multiple of 4 KiB apart would share cache sets
    self.area = tuple(x + 16 for x in (self.Mp * self.K, self.Np * self.K, self.Mp * self.Np))
    self.blocked = self.rb < rows
    self.scratch = [16 * self.area[0]] + [16 * x for x in self.area[1:]] * (self.threads if self.blocked else 1)
    n = len(f.args)
    self.args = list(f.args) + [arg_buffer(n + j, dtypes.float32.ptr(x)) for j, x in enumerate(self.scratch)]
    self.thr = {"uop.threads": 1} if self.blocked else {k: v for k, v in f.attrs.items() if k == "uop.threads"}   # blocked: rows lo..hi
    self.twp, self.tiles = twp, (th, tw, oh, ow)
    self.wt = self.weights(wt, co, ci, ky, kx)
    self.inp = self.inputs(img, ci, rest, rows, oy, ky, ox, kx)
    self.out = self.outputs(end.src[0], red, co, rest, rows, oy, ox)
    self.pad = self.padding(rows)
    self.wt_slot = next(iter(s)).attrs["slot"] if len(s := {x.src[0].src[0] for x in wt.toposort if x.op is Ops.LOAD}) == 1 \
      and next(iter(s)).op is Ops.BUFFER else None

  def col(self, r: UOp) -> UOp: return im.mul(im.mod(r, self.rb) if self.blocked else r, im.const(self.twp))   # a row's first column in B and C

  def weights(self, wt: UOp, co: UOp, ci: UOp, ky: UOp, kx: UOp) -> Func:
    """wt: U's 16 values of filter (co, ci) into A's panels, row co of panel co // MR; the last panel's rows past M repeat
    row M - 1 (they reach only C's pad rows; left unwritten, they would be whatever the memory held, see pad)."""
    ap = self.args[len(self.f.args)]
    rco, rci = loop_range(0, self.Mp), loop_range(1, self.K)
    row = UOp(Ops.MIN, dtypes.index, (rco, im.const(self.M - 1))) if self.Mp > self.M else rco
    g = [[at(wt, {co: row, ci: rci, ky: im.const(i), kx: im.const(j)}) for j in range(3)] for i in range(3)]
    pos = im.add(im.add(im.mul(im.idiv(rco, self.mr), im.const(self.K * self.mr)), im.mul(rci, im.const(self.mr))), im.mod(rco, self.mr))
    u = transform(G, G, g)
    return kernel(f"{self.name}_wt", self.args, [store(ap, im.add(pos, im.const(x * self.area[0])), u[x // 4][x % 4]) for x in range(16)],
                  [rco, rci], {})

  def padding(self, rows: int) -> Func | None:
    """pad: zeros into B's columns that no input transform of this call writes but the products read (the last panel's
    past N; blocked, also those of the rows the last block lacks), each call: scratch holds what other kernels left
    there, and a denormal operand costs an Intel core a microcode assist per FMA (a 64-channel 3x3 ran 140 or 460 us by
    what the memory held). None where in writes every column."""
    first = self.N if not self.blocked else (rows - (self.nblocks - 1) * self.rb) * self.twp
    if first >= self.Np: return None
    bp, run = self.args[len(self.f.args) + 1], self.K * self.nr   # a panel: K rows of NR columns
    rx, rq, rj = loop_range(0, 16), loop_range(1, self.Np // self.nr - first // self.nr), loop_range(2, run)
    pos = im.add(im.add(im.mul(rx, im.const(self.area[1])), im.mul(im.add(rq, im.const(first // self.nr)), im.const(run))), rj)
    return kernel(f"{self.name}_pad", self.args, [store(bp, pos, f32(0))], [rx, rq, rj], {})

  def inputs(self, img: UOp, ci: UOp, rest: list[UOp], rows: int, oy: UOp, ky: UOp, ox: UOp, kx: UOp) -> Func:
    """in: V's 16 values of input tile (row r, tx = L group + lane) and channel ci into B's panels, column t of panel t // NR."""
    bp, twp, (th, tw, oh, ow) = self.args[len(self.f.args) + 1], self.twp, self.tiles
    rr, rci2, rg = loop_range(0, rows), loop_range(1, self.K), loop_range(2, twp // self.lanes)
    *rrest, rty = im.unravel(rr, sizes(rest) + [th])
    self.lane = lane_range(self.lanes)
    rtx = im.add(im.mul(rg, im.const(self.lanes)), self.lane)
    t0 = im.add(self.col(rr), im.mul(rg, im.const(self.lanes)))   # the lane group's first column
    base = {ci: rci2, **dict(zip(rest, rrest))}
    lt = lambda a, n: UOp(Ops.CMPLT, dtypes.bool, (a, im.const(n)))
    real = lt(rtx, tw) if twp > tw else None
    def tap(i, j):
      # the image where oy + ky = 2 ty + i, ox + kx = 2 tx + j. Its loads are gated off in a padding tile and, for an
      # odd size, at 2 t + 3 = size + 2, past the image: that row (column) of the tile reaches only the output past the
      # end, which is not stored, so any value does there
      x = at(img, {**base, oy: im.add(im.mul(rty, im.const(2)), im.const(i // 3)), ky: im.const(min(i, 2)),
                   ox: im.add(im.mul(rtx, im.const(2)), im.const(j // 3)), kx: im.const(min(j, 2))})
      for r, cond in ((rr, lt(im.add(im.mul(rty, im.const(2)), im.const(i)), oh + 2) if i == 3 and oh % 2 else None),
                      (self.lane, im.and_(real, lt(im.add(im.mul(rtx, im.const(2)), im.const(j)), ow + 2) if j == 3 and ow % 2 else None))):
        if cond is not None: x = x.substitute({y.src[0]: gated(y.src[0], cond) for y in x.toposort if y.op is Ops.LOAD and r in y.src[0].toposort})
      return x
    v = transform(BT, BT, [[tap(i, j) for j in range(4)] for i in range(4)])
    panel = im.add(im.mul(im.idiv(t0, self.nr), im.const(self.K * self.nr)), im.mul(rci2, im.const(self.nr)))
    pos = im.add(im.add(panel, im.mod(t0, self.nr)), self.lane)
    if not all(LaneLowerer.supports(x, self.lane) for row in v for x in row):
      raise NotImplementedError(f"@{self.f.name}: an image the lanes cannot read")
    return kernel(f"{self.name}_in", self.args, [store(bp, im.add(pos, im.const(x * self.area[1])), v[x // 4][x % 4]) for x in range(16)],
                  [rr, rci2, rg], self.thr)

  def outputs(self, st: UOp, red: UOp, co: UOp, rest: list[UOp], rows: int, oy: UOp, ox: UOp) -> Func:
    """out: the kernel's store at the tile's 2x2 outputs (row r, output channel, tile column), its reduce replaced by A^T M A.
    A row's tiles run as vector lanes (as in's: consecutive columns of C; each output column pair two lanes' stores, every
    other element) where the store's value allows (LaneLowerer), else one tile at a time; self.out_lane: the lane range."""
    cp, (th, tw, oh, ow) = self.args[len(self.f.args) + 2], self.tiles
    lt = lambda a, n: UOp(Ops.CMPLT, dtypes.bool, (a, im.const(n)))
    def build(L: int) -> tuple[Func, UOp | None]:   # the kernel with L tiles a row as lanes (L = 1: a loop over them)
      rr, oco, rg = loop_range(0, rows), loop_range(1, self.M), loop_range(2, -(-tw // L))
      lane = lane_range(L) if L > 1 else None
      tx = im.add(im.mul(rg, im.const(L)), lane) if lane is not None else rg
      *orest, ty = im.unravel(rr, sizes(rest) + [th])
      cpos = im.add(im.add(im.mul(oco, im.const(self.Np)), self.col(rr)), tx)
      m = [[UOp(Ops.LOAD, dtypes.float32, (UOp(Ops.INDEX, dtypes.float32.ptr(), (cp, im.add(cpos, im.const((4 * i + j) * self.area[2])))),))
            for j in range(4)] for i in range(4)]
      y = transform(AT, AT, m)
      def output(p, q):   # an output past the end (an odd size's, a lane group's past the row) is not stored, nor its epilogue's loads made
        py, px = im.add(im.mul(ty, im.const(2)), im.const(p)), im.add(im.mul(tx, im.const(2)), im.const(q))
        o = at(st, {red: y[p][q], co: oco, oy: py, ox: px, **dict(zip(rest, orest))})
        cond = im.and_(lt(py, oh) if p and oh % 2 else None, lt(px, ow) if q and ow % 2 or tw % L else None)
        return o if cond is None else o.substitute({x: gated(x, cond) for x in o.toposort if x.op is Ops.INDEX and x.src[0] is not cp
                                                    and any(r in x.toposort for r in (rr, rg, lane) if r is not None)})
      return kernel(f"{self.name}_out", self.args, [output(p, q) for p in range(2) for q in range(2)], [rr, oco, rg], self.thr), lane
    f, self.out_lane = build(self.lanes)
    if self.out_lane is not None and not all(LaneLowerer.supports(s.src[1], self.out_lane) and LaneLowerer.supports(s.src[0], self.out_lane)
                                             for s in f.roots[0].src[0].src[0].src): f, self.out_lane = build(1)
    return f

  def phases(self) -> list[tuple[str, tuple | None]]:
    t = self.threads   # a transform writes or reads 16 values per tile and channel
    if self.blocked: return [(f"{self.name}_wt", None), (f"{self.name}_blk", (self.nblocks, t, 1, 1) if t > 1 else None)]
    par = lambda f, work: (parallel_info(f)[0], t if 16 * work >= Contraction.PACK_PAR_MIN else 1, 1) if t > 1 else None
    return [(f"{self.name}_wt", None), *([(f"{self.name}_pad", None)] if self.pad else []), (f"{self.name}_in", par(self.inp, self.N * self.K)),
            (f"{self.name}_mm", (16, t, 1) if t > 1 else None), (f"{self.name}_out", par(self.out, self.N * self.M))]
  @property
  def nblocks(self) -> int: return -(-sizes([outer_range(self.out)])[0] // self.rb)
  def reuse(self) -> list[tuple[int, int, int, tuple]]: return [(0, self.wt_slot, 0, ())] if self.wt_slot is not None else []
  def text(self) -> str:
    inner = self.blocked   # blocked: pad, in, mm and out are called by blk only
    return "".join([lower_kernel(self.wt, f"{self.name}_wt"), lower_kernel(self.pad, f"{self.name}_pad", private=inner) if self.pad else "",
                    lower_kernel(self.inp, f"{self.name}_in", LaneLowerer(self.inp, self.lane), inner), mm(self.micro(), inner),
                    lower_kernel(self.out, f"{self.name}_out", self.out_lane and LaneLowerer(self.out, self.out_lane), inner),
                    self.blk() if self.blocked else ""])
  def micro(self) -> MicroKernel:
    """The 16 products, one after the other in each scratch buffer; blocked: one block's, on the calling thread."""
    return MicroKernel(self.name, self.args, len(self.f.args), self.scratch, 1 if self.blocked else self.threads, self.mr, self.nr, self.kc,
                       self.mc, self.vw, self.M, self.K, self.Mp, self.Np, 16, self.area)
  def blk(self) -> str:
    """The blocked phase: for each of this thread's blocks of RB tile rows, the input transform into its own B panels,
    the block's 16 products into its own C, and the output transform; the thread's buffers picked by its chunk index."""
    n, t, rows = len(self.f.args), self.threads, sizes([outer_range(self.out)])[0]
    tys, em, b = [mem_type(a.dtype) for a in self.args], Emitter("w", 1), Block()
    c = lambda v: em.const(b, v)
    ops = [arg(i) for i in range(len(self.args))]
    for j in range(1, t):   # thread j's V and C are scratch 1 + 2 j and 2 + 2 j
      mine = em.cmpi(b, "eq", TID, c(j), "index")
      for part in (1, 2): ops[n + part] = em.select(b, mine, arg(n + part + 2 * j), ops[n + part], tys[n + part])
    lo, hi = (LO, HI) if t > 1 else (c(0), c(self.nblocks))
    one, rb = c(1), c(self.rb)
    if self.pad: em.call(b, f"{self.name}_pad", ops, tys)   # this thread's B
    with em.for_(b, lo, hi, one) as lp:
      r0 = em.arith(lp.body, "muli", "index", lp.iv, rb)
      r1 = em.arith(lp.body, "minsi", "index", em.arith(lp.body, "addi", "index", r0, rb), em.const(lp.body, rows))
      for phase, bounds in (("in", [r0, r1]), ("mm", []), ("out", [r0, r1])):
        em.call(lp.body, f"{self.name}_{phase}", ops + bounds, tys + ['index'] * len(bounds))
    return Emitter.func(f"{self.name}_blk", params(tys, *((LO, HI, TID) if t > 1 else ())), b)
