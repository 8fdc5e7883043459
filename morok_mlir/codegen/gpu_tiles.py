"""Tiled GPU contractions: matmul, batched matmul and convolution kernels through shared-memory tiles and tensor cores.

A contraction kernel (kernel_facts.contraction: a reduce-add over K of a product, A indexed by the batch ranges T, its
rows I and K, B by T, its rows J and K) whose operands are f16 or bf16 (f32 under the cast to the accumulator), or f32
(on tensor cores as tf32 where that is allowed, PyTorch's `allow_tf32`; else by fma.rn.f32, FFMA), on a chip with
cp.async (sm_80 on), is planned here (`plan`) and lowered by the policy `Tiled` instead of uop-lower-gpu's thread per 4
outputs:
- a block computes one BM x BN tile of the output (of one batch element); its threads are WM x WN warps, each owning a
  (BM/WM) x (BN/WN) tile in registers: MT x NT tensor-core tiles of 16 x 8, f32 accumulators carried by the k loop;
- the block's A (BM x BK) and B (BN x BK) slices of k are staged in shared memory (gpu workgroup memory), two buffers:
  while one is multiplied the next is loaded. A buffer is flat (row * padded row + column) and a thread's addresses in
  it are one base plus constants; the k loop's counter is an i32 and the epilogue's row and column are worked out
  again from the ids in i32: 64-bit values live across the loop are what pushed ptxas past 128 registers. An operand
  that is a plain load whose contiguous dimension is 16-byte aligned is copied by `cp.async` (nvgpu.device_async_copy,
  16 bytes a thread; rows and k past the sizes read 0 bytes, zero-filled), one group per stage, `wait_group 1` before
  a stage is used (0 at the last); any other operand (a convolution's gated image, a cast, a transposed view) is loaded
  by each thread through the kernel's own index math and stored (zero past the sizes);
- `gpu.barrier` after a stage lands (before the warps read it) and after the warps read it (before it is refilled);
- per k step of the instruction, each warp reads its fragments from shared memory in the layouts of the PTX ISA (FRAG_A,
  FRAG_B, FRAG_C; 16-bit ones by ldmatrix: x4 for A's 16 x 16, x2 for B's 16 x 8, transposed where the tile is [k][rows]) and issues `nvvm.mma.sync` per 16 x 8 tile: m16n8k16 for f16/bf16, m16n8k8 for tf32 (each f32
  operand rounded to it first: cvt.rna.tf32.f32);
- the epilogue: each accumulator is the contraction's value at its (row, column); the kernel's store (a bias, an
  activation, the cast to f16) is lowered there as in any kernel, under a guard where the sizes are not multiples of the
  tile.
The block tile is the first of TILES that fits the chip's shared memory and registers (TARGETS), pads the output by at most
a quarter and leaves MIN_BLOCKS blocks (else the smallest that pads little); `tile=` (uop-lower-gpu's option) picks one by
its place in TILES: the space a timed search on a GPU explores (`candidates`)."""
from __future__ import annotations
from dataclasses import dataclass
from math import prod
from morok_mlir.ir.bridge import Func
from morok_mlir.core.dtype import DType, dtypes
from morok_mlir.core.uop import UOp
from morok_mlir.dialects.ops import Ops
from morok_mlir.core import index_math as im
from morok_mlir.core.index_math import affine
from morok_mlir.core.kernel_facts import contraction, rsize
from morok_mlir.codegen.tables import mem_type, sl
from morok_mlir.codegen.placement import Frame, Placement
from morok_mlir.codegen.emitter import Block, Emitter, params
from morok_mlir.codegen.lower_gpu import GPU, Launch, read_only

@dataclass(frozen=True)
class Target:
  sm: int      # compute capability x 10
  smem: int    # static shared memory of a block, bytes
  regs: int    # 32-bit registers of a block
TARGETS = {c: Target(int(c[3:5]), 48 << 10, 64 << 10) for c in ("sm_70", "sm_72", "sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a")}
TC_SM = 80   # m16n8k16 f16/bf16, tf32 and cp.async: sm_80 on

@dataclass(frozen=True)
class MMA:
  k: int       # the instruction's k: m16n8k16 or m16n8k8
  ptx: str     # the multiplicands' PTX type
  pack: int    # elements per 32-bit register
  vec: str     # what `pack` elements load as (a vector of two halves, or the f32)
  reg: str     # an A/B register's MLIR type, as nvvm.mma.sync takes it
def _pair(dt: DType) -> str: return f"vector<2x{sl(dt)}>"
MMAS = {dtypes.float16: MMA(16, "f16", 2, _pair(dtypes.float16), _pair(dtypes.float16)),
        dtypes.bfloat16: MMA(16, "bf16", 2, _pair(dtypes.bfloat16), "i32"), dtypes.float32: MMA(8, "tf32", 1, "f32", "i32")}
# f32 without tf32: no tensor core, each lane's share of a 16 x 8 tile (FRAG_C's four elements) by fma.rn.f32 per k, one
# k at a time: a warp's MT x NT tiles are then a lane's 2MT x 2NT outer product (8 x 8 for 128 x 128 tiles), the
# shape of a SIMT sgemm's register tile, on the same stages, barriers and epilogue
FFMA = MMA(1, "f32", 1, "f32", "f32")
def mma_of(dt: DType, tf32: bool) -> MMA | None: return FFMA if dt is dtypes.float32 and not tf32 else MMAS.get(dt)
# the fragments (PTX ISA, "Matrix Fragments for mma.m16n8k16 / mma.m16n8k8"): lane l, with g = l // 4 and q = l % 4, holds
# element e of A at (row g + FRAG_A[k][e][0], k pack*q + FRAG_A[k][e][1]), of B at (k pack*q + FRAG_B[k][e], column g), of
# C and D at (row g + FRAG_C[e][0], column 2q + FRAG_C[e][1]); register r holds elements r*pack .. r*pack + pack - 1
FRAG_A = {16: ((0, 0), (0, 1), (8, 0), (8, 1), (0, 8), (0, 9), (8, 8), (8, 9)), 8: ((0, 0), (8, 0), (0, 4), (8, 4))}
FRAG_B = {16: (0, 1, 8, 9), 8: (0, 4)}
FRAG_C = ((0, 0), (0, 1), (8, 0), (8, 1))

@dataclass(frozen=True)
class Tile:
  bm: int   # block tile rows
  bn: int   # block tile columns
  bk: int   # k per stage
  wm: int   # warps along the rows
  wn: int   # warps along the columns
  @property
  def threads(self) -> int: return 32 * self.wm * self.wn
  def mt(self) -> int: return self.bm // self.wm // 16   # 16 x 8 tensor-core tiles of a warp, along the rows
  def nt(self) -> int: return self.bn // self.wn // 8    # ... and the columns
TILES = (Tile(128, 128, 32, 2, 4), Tile(128, 128, 16, 2, 4), Tile(128, 64, 32, 2, 2), Tile(64, 128, 32, 2, 2),
         Tile(64, 64, 32, 2, 2), Tile(64, 64, 16, 2, 2), Tile(32, 32, 32, 1, 1), Tile(32, 32, 16, 1, 1))
MAX_WASTE = 1.25      # output padded to the tile by at most this much, or a smaller tile
MIN_FLOPS = 1 << 18   # smaller contractions keep the plain lowering
MIN_BLOCKS = 64       # blocks a tile should leave to fill the chip's multiprocessors (A100: 108, H100: 132, at 1-2 blocks each)
PAD = 16              # bytes each shared row is padded by: the fragments' rows fall in other banks, 16-byte chunks stay aligned
def min_resident(t: Tile) -> int:
  """`.minnctapersm 1` for tiles of at most 128 threads: left to itself ptxas aims at more resident blocks and spills (a
  64 x 64 tile of a.T @ b: 64 registers and 8 bytes spilled on sm_90; 90 registers with it), while 255 registers still
  leave 2 blocks. 256-thread tiles keep ptxas's choice (0): 2 blocks where 128 registers do, as a block's barriers
  leave the multiprocessor idle without another."""
  return 1 if t.threads <= 128 else 0

@dataclass(frozen=True)
class Operand:
  x: UOp               # the value staged (a load of f16/bf16 under the cast to f32, or an f32 value)
  rows: tuple          # its output ranges (I for A, J for B)
  kmajor: bool         # k is its contiguous dimension: its shared tile is [rows][k], else [k][rows]
  copy: bool           # staged by cp.async
  def chunk(self) -> int: return 16 // self.x.dtype.itemsize if self.copy else 1

@dataclass(frozen=True)
class Plan:
  tile: Tile
  mma: MMA
  a: Operand
  b: Operand
  red: UOp
  K: tuple
  T: tuple
  M: int
  N: int
  Kn: int

def staged(x: UOp) -> UOp:
  """What shared memory holds of an operand: an f16/bf16 value under its (exact) cast to the f32 accumulator."""
  return x.src[0] if x.op is Ops.CAST and x.src[0].dtype in (dtypes.float16, dtypes.bfloat16) else x

def linear(form: dict | None, rngs: list[UOp]) -> bool:
  """Whether an address (affine form) steps through the positions of ranges rngs in their row-major order, the last by 1:
  a convolution's weights along (ci, ky, kx), a matrix along its one k range."""
  stride = 1
  for r in reversed(rngs):
    if form is None or form.get(r, 0) != stride: return False
    stride *= rsize(r)
  return True

def operand(x: UOp, rows: list[UOp], K: list[UOp], sm: int) -> Operand:
  """x's staging: along k or its rows, whichever its address runs through in order (k where neither); by cp.async where
  it is an ungated load of a buffer whose 16-byte chunks along that dimension start aligned (its positions a multiple of
  the chunk, every other step and the offset too)."""
  form = affine(x.src[0].src[1], {}) if x.op is Ops.LOAD and x.src[0].op is Ops.INDEX and len(x.src[0].src) == 2 else None
  kmajor = linear(form, K) or not linear(form, rows)
  v, fast = 16 // x.dtype.itemsize, K if kmajor else rows
  copy = (linear(form, fast) and sm >= TC_SM and x.src[0].src[0].op is Ops.BUFFER and prod(rsize(r) for r in fast) % v == 0
          and all(c % v == 0 for r, c in form.items() if r not in fast))
  return Operand(x, tuple(rows), kmajor, copy)

def smem(t: Tile, p_a: Operand, p_b: Operand) -> int:
  """Shared bytes of the two stages of both operands' tiles (rows padded by PAD)."""
  def one(o: Operand, rows: int) -> int:
    n = o.x.dtype.itemsize
    return 2 * (rows * (t.bk + PAD // n) if o.kmajor else t.bk * (rows + PAD // n)) * n
  return one(p_a, t.bm) + one(p_b, t.bn)

REGS_BASE = 48   # a thread's registers besides its accumulators: fragments, addresses, loop state (ptxas: 63-127 in all)
# elements of an operand not copied by cp.async (a convolution's gated image) a thread loads per stage at most: each
# carries its own index math and bounds, all in flight at once (a 3x3 convolution: 16 take 214-254 registers, 32 spill)
GATHER_MAX = 16
def fits(t: Tile, a: Operand, b: Operand, mma: MMA, tgt: Target) -> bool:
  """Whether tile t runs on target tgt: its stages in the block's shared memory, its threads' accumulators (4 per 16 x 8
  tile) and REGS_BASE in the block's registers, at most GATHER_MAX gathered elements a thread, whole instructions of k
  per stage."""
  gathered = max((rows * t.bk // t.threads for o, rows in ((a, t.bm), (b, t.bn)) if not o.copy), default=0)
  return (smem(t, a, b) <= tgt.smem and t.threads * (4 * t.mt() * t.nt() + REGS_BASE) <= tgt.regs and t.bk % mma.k == 0
          and gathered <= GATHER_MAX)

def candidates(f: Func, chip: str, tf32: bool = False) -> list[int]:
  """The places in TILES of the tiles kernel f may take on chip: the space a timed search on a GPU explores (`tile=`)."""
  return [i for i in range(len(TILES)) if (p := plan(f, chip, tf32, i)) is not None and p.tile == TILES[i]]

def plan(f: Func, chip: str | None, tf32: bool = False, tile: int = -1) -> Plan | None:
  """The tiled lowering of kernel f on chip, or None where it does not apply (no contraction, symbolic sizes, other
  reduces in the kernel, operands without a tensor-core type, a chip without tensor cores, a small product)."""
  if (tgt := TARGETS.get(chip or "")) is None or tgt.sm < TC_SM or not f.roots or "uop.split_phase" in f.attrs or \
     (c := contraction(f.roots[0])) is None: return None   # (a split reduce's phase: its blocks are the chunks, gpu_split)
  red, a, b, I, J, K, T = c
  if red.attrs.get("op") != "add" or not I or not J or any(im.cval(r.src[0]) is None for r in I + J + K + T): return None
  if sum(u.op is Ops.REDUCE for u in f.roots[0].toposort) != 1: return None
  xa, xb = staged(a), staged(b)
  if xa.dtype is not xb.dtype or (mma := mma_of(xa.dtype, tf32)) is None: return None
  M, N, Kn = (prod(rsize(r) for r in rs) for rs in (I, J, K))
  if M * N * Kn * prod(rsize(r) for r in T) < MIN_FLOPS: return None
  oa, ob = operand(xa, I, K, tgt.sm), operand(xb, J, K, tgt.sm)
  fit = [t for t in TILES if fits(t, oa, ob, mma, tgt)]
  if not fit: return None
  blocks = lambda t: -(-M // t.bm) * -(-N // t.bn) * prod(rsize(r) for r in T)
  ok = [t for t in fit if -(-M // t.bm) * t.bm * -(-N // t.bn) * t.bn <= MAX_WASTE * M * N] or fit[-1:]
  t = TILES[tile] if 0 <= tile < len(TILES) and TILES[tile] in fit else next((t for t in ok if blocks(t) >= MIN_BLOCKS), ok[-1])
  return Plan(t, mma, oa, ob, red, tuple(K), tuple(T), M, N, Kn)

def shared_row(o: Operand, t: Tile, rows: int) -> int:
  """Elements of a row of o's shared tile ([rows][k], or [k][rows]), padded."""
  return (t.bk if o.kmajor else rows) + PAD // o.x.dtype.itemsize
def shared_type(o: Operand, t: Tile, rows: int) -> str:
  """Two stages of o's tile, each flat: an element's place is one index (row * shared_row + column), so that every
  address a thread uses in a stage is one base it keeps plus a constant."""
  return f"memref<2x{(rows if o.kmajor else t.bk) * shared_row(o, t, rows)}x{sl(o.x.dtype)}, #gpu.address_space<workgroup>>"

class Tiled(GPU):
  """uop-lower-gpu's policy for a planned contraction (see the module docstring): the kernel's one loop nest is the
  tiled kernel; the contraction's reduce is the accumulator of the element the epilogue stores."""
  def __init__(self, f: Func, p: Plan):
    self.p, self.tid, self.lane_groups = p, None, {}
    self.end = next(u for u in f.roots[0].src if u.op is Ops.END)
    self.shared = {}   # operand -> (workgroup memref name, its type)
  def bind(self, lw: Placement) -> None: pass
  def launch(self, name: str) -> Launch:
    p, t = self.p, self.p.tile
    blocks = -(-p.M // t.bm) * -(-p.N // t.bn) * prod(rsize(r) for r in p.T)
    return Launch(name, (blocks, 1, 1), (t.threads, 1, 1), tiles=True)
  def func(self, lw: Placement, name: str, private: bool = False) -> str:
    return Emitter.gpu_func(name, params([mem_type(t.dtype) for t in lw.f.args]), lw.root, self.p.tile.threads, read_only(lw.f),
                            [f"{n}: {ty}" for n, ty, _ in self.shared.values()], min_blocks=min_resident(self.p.tile))
  def effect(self, lw: Placement, u: UOp) -> bool:
    if u is not self.end: return False
    lw.done.add(u)
    self.kernel(lw)
    return True

  def ix(self, lw: Placement, b: Block, op: str, x: str, y) -> str:
    return lw.em.arith(b, op, "index", x, lw.const(y, dtypes.index) if isinstance(y, int) else y)
  def flat(self, lw: Placement, b: Block, o: Operand, row, k) -> str | int:
    """The place in o's shared stage of (row, k): ints give a constant offset, names a value."""
    C, (a, c) = self.shared[o][2], (row, k) if o.kmajor else (k, row)
    if isinstance(a, int) and isinstance(c, int): return a * C + c
    return self.ix(lw, b, "addi", self.ix(lw, b, "muli", a, C), c)
  def plus(self, lw: Placement, b: Block, x: str, c: int) -> str: return self.ix(lw, b, "addi", x, c) if c else x

  def kernel(self, lw: Placement):
    """Ids and each thread's bases, the prologue's stage, the k loop (next stage, wait, barrier, the warps' products,
    barrier), the epilogue."""
    p, t, em, root, ix = self.p, self.p.tile, lw.em, lw.root, self.ix
    tid, bid = em.gpu_id(root, "thread_id"), em.gpu_id(root, "block_id")
    lane, warp = ix(lw, root, "remui", tid, 32), ix(lw, root, "divui", tid, 32)
    g, q = ix(lw, root, "divui", lane, 4), ix(lw, root, "remui", lane, 4)
    wr = ix(lw, root, "muli", ix(lw, root, "divui", warp, t.wn), t.bm // t.wm)   # the warp's tile: its first row and column
    wc = ix(lw, root, "muli", ix(lw, root, "remui", warp, t.wn), t.bn // t.wn)
    nbn, nbm = -(-p.N // t.bn), -(-p.M // t.bm)
    rest = ix(lw, root, "divui", bid, nbn)
    m0, n0 = ix(lw, root, "muli", ix(lw, root, "remui", rest, nbm), t.bm), ix(lw, root, "muli", ix(lw, root, "remui", bid, nbn), t.bn)
    root.chain = frozenset(p.T)   # the batch: every stage and the epilogue read it
    self.flat_ivs(lw, root, list(p.T), ix(lw, root, "divui", rest, nbm))
    self.tid, self.base = tid, dict(g=g, q=q, wr=wr, wc=wc, m0=m0, n0=n0)
    for o, rows in ((p.a, t.bm), (p.b, t.bn)): self.shared[o] = (f"%shared_{'ab'[o is p.b]}", shared_type(o, t, rows), shared_row(o, t, rows))
    if p.mma.pack == 2: self.ldm_lanes(lw, lane)
    c0 = lw.const(0, dtypes.index)
    first = self.stage_both(lw, root, c0, c0)
    accs = self.k_loop(lw, first)
    self.epilogue(lw, accs, tid, bid)

  def stage_both(self, lw: Placement, b: Block, k0: str, buf: str) -> str | None:
    """Both operands' tiles at k0 into stage buf; the cp.async group's token where any was copied."""
    p = self.p
    toks = self.stage(lw, b, k0, buf, p.a, self.base["m0"], p.M, p.tile.bm) + self.stage(lw, b, k0, buf, p.b, self.base["n0"], p.N, p.tile.bn)
    return lw.em.async_commit(b, toks) if toks else None

  def stage(self, lw: Placement, b: Block, k0: str, buf: str, o: Operand, row0: str, R: int, rows: int) -> list[str]:
    """Operand o's tile (rows x bk, from row row0 and k k0) into its shared stage buf: each thread its chunks, the
    contiguous dimension fastest across threads (coalesced). Returns the cp.async tokens."""
    p, t, em, ix = self.p, self.p.tile, lw.em, self.ix
    v, (sh, st, C) = o.chunk(), self.shared[o]
    per, toks = (t.bk if o.kmajor else rows) // v, []
    # a thread's chunks: its first (outer0, inner0) plus constants, as one of per and the thread count divides the other
    assert t.threads % per == 0 or per % t.threads == 0, (t, per)
    outer0, inner0 = ix(lw, lw.root, "divui", self.tid, per), ix(lw, lw.root, "muli", ix(lw, lw.root, "remui", self.tid, per), v)
    at0 = ix(lw, lw.root, "addi", ix(lw, lw.root, "muli", outer0, C), inner0)
    for i in range(rows * t.bk // v // t.threads):
      do, di = divmod(i * t.threads, per)
      outer, inner = self.plus(lw, b, outer0, do), self.plus(lw, b, inner0, di * v)
      r, kk = (outer, inner) if o.kmajor else (inner, outer)
      row, k = ix(lw, b, "addi", row0, r), ix(lw, b, "addi", k0, kk)
      inb = em.arith(b, "andi", "i1", em.cmpi(b, "ult", row, lw.const(R, dtypes.index), "index"),
                     em.cmpi(b, "ult", k, lw.const(p.Kn, dtypes.index), "index"))
      at = f"{buf}, {self.plus(lw, b, at0, do * C + di * v)}"
      fr = Frame(lw.root); fr.chain = lw.root.chain | set(o.rows) | set(p.K)
      self.flat_ivs(lw, fr, list(o.rows), self.digits(lw, fr, list(o.rows), row))
      self.flat_ivs(lw, fr, list(p.K), self.digits(lw, fr, list(p.K), k))
      if o.copy:
        idx = lw.value(o.x.src[0].src[1])
        em.splice(b, fr)
        c0 = lw.const(0, dtypes.index)
        src, n = em.select(b, inb, idx, c0, "index"), em.select(b, inb, lw.const(v, dtypes.index), c0, "index")
        toks.append(em.async_copy(b, lw.value(o.x.src[0].src[0]), src, sh, at, v, n, mem_type(o.x.src[0].src[0].dtype), st))
      else:
        em.store(b, lw.const(0.0, o.x.dtype), sh, at, st)
        em.store(fr, lw.value(o.x), sh, at, st)
        em.splice(b, fr, inb)
      self.close_flat(lw, fr, list(o.rows) + list(p.K))
    return toks

  def k_loop(self, lw: Placement, first: str | None) -> list[str]:
    """The loop over the stages of k, the accumulators its iter_args: the next stage's loads go out first (into the
    other buffer), then this stage is waited for, and the warps multiply it between two barriers. Its counter is an
    i32 (ptxas: a 64-bit one took the 128 x 128 x 32 tile from 104 registers to 128 and a spilled word)."""
    p, t, em, ix = self.p, self.p.tile, lw.em, self.ix
    nk, c = -(-p.Kn // t.bk), lambda v: lw.const(v, dtypes.int32)
    zero = lw.const(0.0, dtypes.float32)
    lp = em.open_for(c(0), c(nk), c(1), [zero] * (t.mt() * t.nt() * 4), "f32")
    body = lp.body
    def index(b: Block, x: str) -> str: return em.cast(b, "index_castui", x, "i32", "index")
    nxt = em.arith(body, "addi", "i32", lp.iv, c(1))
    buf = index(body, em.arith(body, "remui", "i32", lp.iv, c(2)))
    more = em.cmpi(body, "ult", nxt, c(nk), "i32")
    with em.if_(body, more, orelse=first is not None) as (then, other):
      group = self.stage_both(lw, then, ix(lw, then, "muli", index(then, nxt), t.bk), index(then, em.arith(then, "remui", "i32", nxt, c(2))))
      if first is not None: em.async_wait(then, group, 1); em.async_wait(other, first, 0)
    em.barrier(body)
    new = self.products(lw, body, buf, lp.accs)
    em.barrier(body)
    em.close_for(lw.root, lp, new, "f32", "i32")
    return lp.results

  def regs(self, lw: Placement, b: Block, o: Operand, buf: str, coords: list[tuple[str, int, str, int]]) -> list[str]:
    """The registers of a fragment: coords (row base, row offset, k base, k offset) of each register's first element;
    its `pack` elements are consecutive in k."""
    m, em = self.p.mma, lw.em
    sh, st, _ = self.shared[o]
    out, base = [], self.flat(lw, b, o, coords[0][0], coords[0][2])
    for rb, ro, kb, ko in coords:
      at = self.plus(lw, b, base, self.flat(lw, b, o, ro, ko))
      if o.kmajor and m.pack > 1: x = em.vload(b, sh, f"{buf}, {at}", st, m.vec)
      else:
        xs = [em.load(b, sh, f"{buf}, {self.plus(lw, b, at, self.flat(lw, b, o, 0, j))}", st) for j in range(m.pack)]
        x = em.from_elements(b, xs, m.vec) if m.pack > 1 else xs[0]
      out.append(x if m.reg == m.vec else em.llvm_bitcast(b, x, m.vec, m.reg) if m.pack > 1 else em.tf32(b, x))
    return out

  LDM = {"a": 4, "b": 2}   # 8x8 matrices an operand's fragment is: A's 16 x 16 (rows, then k, halves), B's 16 (k) x 8
  def ldm_lanes(self, lw: Placement, lane: str):
    """Where each lane's ldmatrix row address lies in the fragment, per operand: matrix j = lane // 8 (A's at rows
    8*(j%2), k 8*(j//2); B's at k 8*(j%2)), row lane % 8 of it, a row being one of the fragment's rows (k-major tiles)
    or one of its k (tiles [k][rows], loaded transposed)."""
    root, ix, p = lw.root, self.ix, self.p
    r8, j = ix(lw, root, "remui", lane, 8), ix(lw, root, "divui", lane, 8)
    j2 = ix(lw, root, "muli", ix(lw, root, "remui", j, 2), 8)
    self.ldm = {}
    for o, base, (dr, dk) in ((p.a, "wr", (j2, ix(lw, root, "muli", ix(lw, root, "divui", j, 2), 8))), (p.b, "wc", (None, j2))):
      row, k = (ix(lw, root, "addi", dr, r8) if dr else r8, dk) if o.kmajor else (dr, ix(lw, root, "addi", dk, r8))
      self.ldm[o] = self.flat(lw, root, o, ix(lw, root, "addi", self.base[base], row) if row else self.base[base], k)

  def ldmatrix(self, lw: Placement, b: Block, o: Operand, buf: str, off: int, kk: int) -> list[str]:
    """Operand o's fragment registers for its 16 x 8 (B) or 16 x 16 (A) tile at row offset off, k kk: one ldmatrix."""
    m, em, (sh, st, _) = self.p.mma, lw.em, self.shared[o]
    n, elem = self.LDM["ab"[o is self.p.b]], sl(o.x.dtype)
    x = em.ldmatrix(b, sh, f"{buf}, {self.plus(lw, b, self.ldm[o], self.flat(lw, b, o, off, kk))}", n, not o.kmajor, st, elem)
    regs = [em.vextract(b, x, i, m.vec, f"vector<{n}x2x{elem}>") for i in range(n)]
    return regs if m.reg == m.vec else [em.llvm_bitcast(b, r, m.vec, m.reg) for r in regs]

  def products(self, lw: Placement, b: Block, buf: str, accs: list[str]) -> list[str]:
    """Each warp's MT x NT tiles times this stage: per k step of the instruction, its A and B fragments, then mma.sync."""
    p, t, m, em, base, ix = self.p, self.p.tile, self.p.mma, lw.em, self.base, self.ix
    if m is FFMA: return self.outer_products(lw, b, buf, list(accs))
    if m.pack == 1: ka, ra, rb = base["q"], ix(lw, b, "addi", base["wr"], base["g"]), ix(lw, b, "addi", base["wc"], base["g"])
    accs = list(accs)
    for kk in range(0, t.bk, m.k):
      if m.pack == 2:   # 16-bit elements: ldmatrix
        A = [self.ldmatrix(lw, b, p.a, buf, mt * 16, kk) for mt in range(t.mt())]
        B = [self.ldmatrix(lw, b, p.b, buf, nt * 8, kk) for nt in range(t.nt())]
      else:
        A = [self.regs(lw, b, p.a, buf, [(ra, mt * 16 + dr, ka, kk + dk) for dr, dk in FRAG_A[m.k][::m.pack]]) for mt in range(t.mt())]
        B = [self.regs(lw, b, p.b, buf, [(rb, nt * 8, ka, kk + dk) for dk in FRAG_B[m.k][::m.pack]]) for nt in range(t.nt())]
      for mt in range(t.mt()):
        for nt in range(t.nt()):
          at = (mt * t.nt() + nt) * 4
          d = em.mma_sync(b, A[mt], B[nt], accs[at:at + 4], (16, 8, m.k), m.ptx, m.reg)
          accs[at:at + 4] = [em.extract(b, d, e, 4) for e in range(4)]
    return accs

  def outer_products(self, lw: Placement, b: Block, buf: str, accs: list[str]) -> list[str]:
    """FFMA's products of this stage: per k, a lane's A at rows g and g + 8 of each of its MT tiles, B at columns 2q and
    2q + 1 of each of its NT tiles, and an fma into each accumulator at FRAG_C's place."""
    t, em, base, ix = self.p.tile, lw.em, self.base, self.ix
    ra, rb = ix(lw, b, "addi", base["wr"], base["g"]), ix(lw, b, "addi", base["wc"], ix(lw, b, "muli", base["q"], 2))
    k0 = lw.const(0, dtypes.index)
    for kk in range(t.bk):
      A = [self.regs(lw, b, self.p.a, buf, [(ra, mt * 16 + dr, k0, kk) for dr in (0, 8)]) for mt in range(t.mt())]
      B = [self.regs(lw, b, self.p.b, buf, [(rb, nt * 8 + dc, k0, kk) for dc in (0, 1)]) for nt in range(t.nt())]
      for mt in range(t.mt()):
        for nt in range(t.nt()):
          at = (mt * t.nt() + nt) * 4
          accs[at:at + 4] = [em.math(b, "fma", "f32", A[mt][dr // 8], B[nt][dc], accs[at + e]) for e, (dr, dc) in enumerate(FRAG_C)]
    return accs

  def epilogue(self, lw: Placement, accs: list[str], tid: str, bid: str):
    """Each accumulator's element: the kernel's store at (row, column), the contraction's reduce being the accumulator.
    The thread's first row and column are worked out again here from its ids, in i32: what the loop carries for the
    epilogue is then two 32-bit ids rather than the 64-bit parts of the loop's own addresses."""
    p, t, em, root = self.p, self.p.tile, lw.em, lw.root
    st = self.end.src[0]
    def i32(op: str, x: str, y: int) -> str: return em.arith(root, op, "i32", x, lw.const(y, dtypes.int32))
    def add(x: str, y: str) -> str: return em.arith(root, "addi", "i32", x, y)
    tid, bid = (em.cast(root, "index_castui", x, "index", "i32") for x in (tid, bid))
    lane, warp, nbn = i32("remui", tid, 32), i32("divui", tid, 32), -(-p.N // t.bn)
    m0, n0 = i32("muli", i32("remui", i32("divui", bid, nbn), -(-p.M // t.bm)), t.bm), i32("muli", i32("remui", bid, nbn), t.bn)
    rows0 = add(add(m0, i32("muli", i32("divui", warp, t.wn), t.bm // t.wm)), i32("divui", lane, 4))
    cols0 = add(add(n0, i32("muli", i32("remui", warp, t.wn), t.bn // t.wn)), i32("muli", i32("remui", lane, 4), 2))
    def at(x: str, c: int) -> str: return em.cast(root, "index_castui", add(x, lw.const(c, dtypes.int32)) if c else x, "i32", "index")
    I, J = list(p.a.rows), list(p.b.rows)
    for mt in range(t.mt()):
      for nt in range(t.nt()):
        for e, (dr, dc) in enumerate(FRAG_C):
          row, col = at(rows0, mt * 16 + dr), at(cols0, nt * 8 + dc)
          inb = em.arith(root, "andi", "i1", em.cmpi(root, "ult", row, lw.const(p.M, dtypes.index), "index"),
                         em.cmpi(root, "ult", col, lw.const(p.N, dtypes.index), "index"))
          fr = Frame(root); fr.chain = root.chain | set(I) | set(J)
          self.flat_ivs(lw, fr, I, self.digits(lw, fr, I, row))
          self.flat_ivs(lw, fr, J, self.digits(lw, fr, J, col))
          lw.place(p.red, fr, accs[(mt * t.nt() + nt) * 4 + e])
          lw.store(st)
          self.close_flat(lw, fr, I + J)
          em.splice(root, fr, inb)
