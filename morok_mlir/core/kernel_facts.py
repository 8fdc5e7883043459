"""Kernel facts: what a kernel computes, read off its UOp graph, that uop-optimize decides on and the code generators
lower by (uop-lower-cpu, codegen.winograd). Pure analysis of the kernel's sink (no MLIR, no device), below both:

  contraction(sink)      (reduce, a, b, I, J, K, T): the kernel is a batch of matrix products (uop.contraction), found once
                         per kernel (`depends` may ask Z3) and remembered, so the code generator reads the optimizer's answer
  int8_contraction(sink) the same of 8-bit values, summed in int32 (uop.int8)
  contraction_tiles      the register tile, KC and MC of an M x N x K contraction
  window, direct_conv    a convolution's image read in place (vectors along output channels), not packed as an im2col
  winograd(c)            the roles of a 3x3 convolution's ranges and operands (uop.winograd)
  k_contiguous, k_rows   how an operand reads memory along a reduce range
  one_index              whether an address's coefficients over some ranges step as their row-major index
  single_store           the one f32 store of a one-loop-nest kernel (uop.lanes, uop.nontemporal)
  lane_coef              an index's step per step of a range (uop.lanes, vector lanes in codegen)
  lane_reduce_of, innermost  the reduce whose innermost range runs as vector lanes (uop.reduce_lanes)
  lane_frac              an index that steps one element every d lanes (a nearest upsample read along its lanes)
  lane_supported         whether a value can be computed as vectors over a range's lanes (codegen.lanes.LaneLowerer)
  extent                 the positions a group of ranges runs over, symbolic sizes read at run time
  twin, in_place         a reduce's source that the loops compute again, and where it can be kept (uop.keep)
  blocked                a float add reduce as nested blocks of bounded length (uop.reduce_block)"""
from __future__ import annotations
import itertools
from math import prod
from morok_mlir.core.uop import UOp, attrs
from morok_mlir.core.dtype import dtypes
from morok_mlir.core import index_math as im
from morok_mlir.core.index_math import affine, affine_simplify
from morok_mlir.dialects.ops import Ops
from morok_mlir.host import CACHES
from morok_mlir.lru import LRU

def rsize(r: UOp) -> int:
  """A range's size; a symbolic one's largest value (what its buffers are allocated and its kernel's layout laid out for)."""
  return v if (v := im.cval(r.src[0])) is not None else im.smax(r.src[0])

def one_index(form: dict, rs: list[UOp]) -> bool:
  """Whether an affine form's coefficients over ranges rs step as their row-major linear index does (rows one index)."""
  return all(form.get(r, 0) == form.get(q, 0) * rsize(q) for r, q in zip(rs, rs[1:]))

def extent(rs: list[UOp]) -> UOp | None:
  """The number of positions the linear index of ranges rs (sorted by axis, laid out at their sizes' largest values) runs
  over: their sizes' product, the outermost's read at run time where it is symbolic. None where another is symbolic: its
  positions would not be a prefix of the layout."""
  if any(im.cval(r.src[0]) is None for r in rs[1:]): return None
  if not rs or im.cval(rs[0].src[0]) is not None: return im.const(prod(rsize(r) for r in rs))
  return im.mul(rs[0].src[0], im.const(prod(rsize(r) for r in rs[1:])))

def ranges_of(u: UOp) -> set[UOp]: return {x for x in u.toposort if x.op is Ops.RANGE}

DEPENDS_RLIMIT = 5_000_000     # Z3 resource units per dependence question (~2 s unloaded; a GroupNorm kernel's hardest: 0.8M)

def depends(x: UOp, r: UOp, rngs: list[UOp]) -> bool:
  """Whether x's value can change with range r, decided exactly: the addresses, gates and selects in x that mention
  r are compared at two values of r (all else equal). Affine forms (after the bounds-checked folding below) answer
  directly; otherwise Z3 looks for two values of r that differ (index math is 64-bit bit-vectors, as lowered), within
  DEPENDS_RLIMIT units of work. An unknown answer counts as dependent: a missed contraction costs speed, a wrong one
  would cost correctness.
  Mentioning is not depending: (i*64+j)//64 with j < 64 is i."""
  if any(u.dtype not in (dtypes.index, dtypes.bool) and r in u.src for u in x.toposort): return True   # a range used as a value
  exprs = [e for u in x.toposort
           for e in (u.src[1:] if u.op is Ops.INDEX else u.src[:1] if u.op is Ops.WHERE and u.dtype not in (dtypes.index, dtypes.bool) else ())
           if r in ranges_of(e)]
  memo: dict = {}
  forms = [affine(e, memo) for e in exprs]
  if any(f is not None and f.get(r, 0) != 0 for f in forms): return True
  # gates are comparisons of index math: rebuilt from affine parts, a range that only cancels out disappears
  rest = [g for e, f in zip(exprs, forms) if f is None and r in ranges_of(g := affine_simplify(e))]
  if not rest: return False
  # Z3 encodes index math only: an address or gate that reads memory (a gathered index) counts as dependent; a load at
  # an address without ranges (a symbolic size's value) is one unknown, the same in both
  fixed = {x for e in rest for u in e.toposort if u.op is Ops.LOAD and not ranges_of(u) for x in u.toposort}
  if any(u not in fixed and (u.op is Ops.LOAD or not u.src and u.op not in (Ops.CONST, Ops.RANGE, Ops.DEFINE_VAR)) for e in rest for u in e.toposort):
    return True
  if (hit := _DEPENDS.get(key := (tuple(rest), r))) is None: _DEPENDS[key] = hit = _z3_depends(rest, r)
  return hit

# (the index expressions left, range) -> depends' Z3 answer: the question is a function of these alone (hash-consed UOps,
# a fresh context, a work bound not a time bound), and a model's layers ask the same ones kernel after kernel
_DEPENDS = LRU(max_entries=4096)
def _z3_depends(rest: list[UOp], r: UOp) -> bool:
  import z3
  from morok_mlir.core.prove import ZSem
  twin = UOp(Ops.RANGE, r.dtype, r.src, attrs(axis=-1 - r.attrs["axis"], kind=r.attrs["kind"]))
  ctx = ZSem()
  differ = [ctx.enc(e)[0] != ctx.enc(e.substitute({r: twin}))[0] for e in rest]
  # a bound on Z3's work counted in its resource units, not time, in a fresh context (the work one question takes depends
  # on what its context holds already): the answer, and so the kernel, is the same on every run, whatever the load or
  # what was compiled before, and uop-lower-cpu asking again gets the answer uop-optimize got
  zc = z3.Context()
  s = z3.Solver(ctx=zc); s.set("rlimit", DEPENDS_RLIMIT); s.add(z3.And(*ctx.facts, z3.Or(*differ)).translate(zc))
  return s.check() != z3.unsat

Contraction = tuple[UOp, UOp, UOp, list[UOp], list[UOp], list[UOp], list[UOp]]
def canonical(sink: UOp) -> tuple[UOp, dict[UOp, UOp]]:
  """sink as the MLIR import builds it (an op without attributes has arg (), where the passes' builders leave None), and
  the map from its nodes back to sink's: the kernel uop-optimize analysed and the one uop-lower-cpu imports back from its
  text are then one object (UOps are hash-consed)."""
  new: dict[UOp, UOp] = {}
  for u in sink.toposort:
    src = tuple(new[s] for s in u.src)
    new[u] = u if u.arg is not None and src == u.src else UOp(u.op, u.dtype, src, u.arg or (), u.loc)
  return new[sink], {c: u for u, c in new.items()}

# canonical kernel sink -> its contraction: uop-optimize asks, and uop-lower-cpu lowering the kernel it wrote reads the
# answer instead of asking Z3 again (a process that only lowers, morok-opt -p uop-lower-cpu, finds it once itself)
_FOUND = LRU(max_entries=256)
def contraction(sink: UOp) -> Contraction | None:
  """(reduce, a, b, I, J, K, T) when the kernel's one store is f(reduce-add over K of a*b, other reduces), a depending
  on loop ranges T, I and K only, b on T, the other loop ranges J and K only: a batch (over T, the ranges both depend
  on) of I x J matrix products. The one add-of-a-product reduce is the contraction; other reduces stay in the epilogue
  (attention's row sums). T, I and J keep the loop order (axis). Found once per kernel (see _FOUND)."""
  key, back = canonical(sink)
  if (hit := _FOUND.get(key)) is None: _FOUND[key] = hit = (find_contraction(key),)
  if hit[0] is None: return None
  red, a, b, *rs = hit[0]
  return back[red], back[a], back[b], *([back[r] for r in x] for x in rs)

I8 = (dtypes.uint8, dtypes.int8)
def int8_contraction(sink: UOp) -> Contraction | None:
  """contraction(sink) of an int32 sum of products of 8-bit values cast to int32, one operand unsigned and the other
  signed (what VNNI's u8 x s8 dot product takes): (reduce, a, b, I, J, K, T), a and b the 8-bit values (uop.int8)."""
  key, back = canonical(sink)
  if (hit := _FOUND.get(("i8", key))) is None: _FOUND[("i8", key)] = hit = (find_contraction(key, dtypes.int32),)
  if hit[0] is None: return None
  red, a, b, *rs = hit[0]
  if not all(x.op is Ops.CAST and x.dtype is dtypes.int32 for x in (a, b)) or {a.src[0].dtype, b.src[0].dtype} != set(I8): return None
  return back[red], back[a.src[0]], back[b.src[0]], *([back[r] for r in x] for x in rs)

def find_contraction(sink: UOp, dt=dtypes.float32) -> Contraction | None:
  ends = [u for u in sink.toposort if u.op is Ops.END]
  if len(ends) != 1 or ends[0].src[0].op is not Ops.STORE: return None
  loops = sorted(ends[0].src[1:], key=lambda r: r.attrs["axis"])
  reds = [u for u in ends[0].src[0].toposort if u.op is Ops.REDUCE and u.dtype is dt and u.src[0].op is Ops.MUL
          and (u.attrs.get("op") == "add" or u.attrs.get("op") in ("max", "min") and u.src[0].src[1] is ONE)]
  # a product's operand may reduce inline too (an RMSNorm's mean of squares, per row): the product is the outermost
  reds = [r for r in reds if not any(r in c.src[0].toposort for c in reds if c is not r)]
  if len(reds) != 1: return None
  red = reds[0]
  K = sorted(red.src[1:], key=lambda r: r.attrs["axis"])
  a, b = red.src[0].src
  if set(K) & set(loops) or any(r.attrs.get("kind") != "loop" for r in loops): return None
  # the product is computed per output element: not inside another reduce, no range but the loops and its own reduces'
  if any(red in u.toposort for u in ends[0].src[0].toposort if u.op is Ops.REDUCE and u is not red): return None
  if ranges_of(red) - set(loops) - {r for u in red.toposort if u.op is Ops.REDUCE for r in u.src[1:]}: return None
  every = loops + K
  ra, rb = {r for r in loops if depends(a, r, every)}, {r for r in loops if depends(b, r, every)}
  T = ra & rb
  # one operand without loop ranges of its own (a vector times a matrix: M or N is 1): plain loops reduce over k, fast
  # where the matrix's rows are k-contiguous; where its k steps are far apart (x @ W, x one row), the contraction packs
  # its N-wide rows into panels instead (4096 x 4096: 40x faster), the vector as a (I empty, M = 1)
  if not ra - T or not rb - T:
    if not ra - T and not rb - T or k_contiguous(mat := a if ra - T else b, K[-1]): return None
    if mat is a: a, b, ra, rb = b, a, rb, ra
  if ra & set(loops) != ra or rb & set(loops) != rb: return None
  # a holds the outermost loop when it can: for NCHW conv that is the image side, whose narrow (MR-row) panels pack
  # 3x faster than 16-wide ones, and threads then split the image rows (measured on conv and matmul)
  if ra - T and ra.isdisjoint({loops[0]}) and not rb.isdisjoint({loops[0]}): a, b, ra, rb = b, a, rb, ra
  # a convolution of one image: a the weights (a plain load, rows one range: output channels), b the image (rows several
  # ranges: output positions), the tile's vectors along the output's rows. b's rows are padded to NR-wide panels (up to
  # 32), a's to MR rows (up to 8): where b's pad much worse (a small output: 7x7 = 49 rows pad to 64 as b, 56 as a) they
  # swap, and the weights are the reusable panels. Few output channels still keep the weights as a: with the image as a,
  # each tile's epilogue would store NR output rows as MR-long runs, a slow part of a short product (a 3-channel stem)
  if len(ra - T) == 1 and len(rb - T) > 1 and plain(a, K[-1]):
    m, n = prod(rsize(r) for r in ra - T), prod(rsize(r) for r in rb - T)
    if padded(n, MAX_MR) * padded(m, 32) < padded(m, MAX_MR) * padded(n, 32) / 1.05: a, b, ra, rb = b, a, rb, ra
  return red, a, b, [r for r in loops if r in ra - T], [r for r in loops if r not in ra], K, [r for r in loops if r in T]

ONE = UOp(Ops.CONST, dtypes.float32, (), attrs(value=1.0))

def padded(n: int, w: int) -> float: return -(-n // w) * w / n

WINDOW_MAX_STRIDE = 4   # an output position's step in its window partner's steps (a convolution's stride)
def window(x: UOp, I: list[UOp], K: list[UOp]) -> tuple[dict, dict] | None:
  """(form, pairs) when x is one f32 load of a buffer (or where(inside, that load, 0): padding) whose index is affine in I
  (output positions) and K (reduce ranges), coefficients >= 0 (form), and, where a gate guards it, each range i of I has
  a window partner k in K (pairs: k -> (i, s)) with coef(i) = s * coef(k), x a function of s*i + k alone, gates included:
  x can then be read from a copy of its buffer padded with what the gates give, indexed by s*i + k (codegen.contraction's
  direct convolution)."""
  gate = x.op is Ops.WHERE and im.cval(x.src[2]) == 0 and x.src[2].dtype is x.dtype   # padding: where(inside, x[...], 0)
  ld = x.src[1] if gate else x
  if ld.op is not Ops.LOAD or ld.dtype is not dtypes.float32 or (idx := ld.src[0]).op is not Ops.INDEX or idx.src[0].op is not Ops.BUFFER: return None
  if (form := affine(idx.src[1], {})) is None or set(form) - {1, *I, *K} or any(v < 0 for k, v in form.items() if k != 1): return None
  if not gate and len(idx.src) < 3: return form, {}
  pairs, free = {}, [k for k in K if form.get(k, 0) > 0]
  for i in I:
    cands = [k for k in free if form.get(i, 0) % form[k] == 0 and 1 <= form.get(i, 0) // form[k] <= WINDOW_MAX_STRIDE]
    if not cands: return None
    k = max(cands, key=lambda k: form[k])
    pairs[k] = (i, form[i] // form[k]); free.remove(k)
  # x at I = 0 and K = s*i + k is x itself: it reads its image at s*i + k alone (the copy pad_phase makes holds x there)
  moved = {**{i: im.const(0) for i, _ in pairs.values()}, **{k: im.add(im.mul(i, im.const(s)), k) for k, (i, s) in pairs.items()}}
  return (form, pairs) if affine_simplify(x.substitute(moved)) is affine_simplify(x) else None

def direct_conv(c: Contraction | None) -> Contraction | None:
  """c with the image as a (its rows output positions, the tile's vectors along output channels) when b, the image side of
  a convolution of one image, reads a window strided 2 or more along the output's innermost position (window: in place,
  or from a padded copy), static sizes, a the weights (a plain load): codegen.contraction then reads the image where it
  is instead of packing an im2col of it, which for a strided window gathers each vector through masks and shuffles. Not
  a matrix's rows (matrix_rows: a linear layer's input seen as a window as wide as its stride), which a pack copies in
  sequence."""
  if c is None: return None
  red, a, b, I, J, K, T = c
  if T or not I or not J or any(im.cval(r.src[0]) is None for r in I + J + K): return None
  for img, w, P, d in ((b, a, J, (red, b, a, J, I, K, T)), (a, b, I, c)):   # the image as b (contraction's choice) or a
    if plain(w, K[-1]) and (f := window(img, P, K)) is not None and f[0].get(P[-1], 0) >= 2 and not matrix_rows(f[0], P[-1], K): return d
  return None

def matrix_rows(form: dict, p: UOp, K: list[UOp]) -> bool:
  """Whether position p steps, in an affine form, over whole runs of a unit-step reduce range, longer than a
  convolution's stride (WINDOW_MAX_STRIDE): consecutive positions read consecutive rows of a matrix."""
  return form.get(p, 0) > WINDOW_MAX_STRIDE and any(form.get(k) == 1 and form[p] == rsize(k) for k in K)

def plain(x: UOp, k: UOp) -> bool:
  """Whether x is an ungated load of a buffer, k-contiguous (a row-major matrix, weights)."""
  return k_contiguous(x, k) and x.src[0].src[0].op is Ops.BUFFER

def k_step(load: UOp, k: UOp) -> int | None:
  """How far a load's address moves per step of range k (None: not affine)."""
  if load.src[0].op is not Ops.INDEX or (f := affine(load.src[0].src[1], {})) is None: return None
  return f.get(k, 0)

def k_contiguous(x: UOp, k: UOp) -> bool:
  """Whether x is an ungated load whose address steps by 1 with reduce range k."""
  return x.op is Ops.LOAD and x.src[0].op is Ops.INDEX and len(x.src[0].src) == 2 and k_step(x, k) == 1

def k_rows(x: UOp, k: UOp) -> bool:
  """Whether every load of x that moves with reduce range k steps by 1 with it (and one does): x's values along k
  read memory in sequence (attention's exp(s - max), a row of a matrix)."""
  loads = [u for u in x.toposort if u.op is Ops.LOAD and k in u.toposort]
  return bool(loads) and all(k_step(u, k) == 1 for u in loads)

FMA_PORTS, LOAD_PORTS, FMA_LATENCY = 2, 2, 4   # vector FMAs and loads issued per cycle, cycles per FMA: recent x86 cores

A_BLOCK_L2 = 4   # the MC x KC block of A takes this fraction of L2: B's panels and C's rows stream through the rest
MC_MIN_ROWS = 256   # but at least this many rows where L2 holds them: each B panel brought to L1 serves MC / MR tiles
MAX_MR, MAX_NV = 8, 8   # rows: A read in place keeps one address per row in a general register (x86-64 has 16)

def contraction_tiles(M: int, N: int, K: int, vec: int, caches: tuple[int, int, int] = CACHES, threads: int = 1) -> tuple[int, int, int, int]:
  """(MR, NR, KC, MC) for an M x N x K contraction at vec f32 lanes, L1/L2/L3 bytes `caches` (codegen.contraction.Contraction).
  MR x NR, the register tile: MR rows of NR/vec vectors held in MR*NR/vec accumulators, plus NR/vec B vectors and one
  broadcast A value, within the register file (16 registers at <= 8 lanes: ymm; 32 at 16: zmm). A k step costs
  max(FMAs / FMA_PORTS, loads / LOAD_PORTS, FMA_LATENCY) cycles, plus one for the loop; the tile is the one with the
  fewest cycles over the whole problem, M and N padded to MR and NR, so a skinny N (10) gets NR = its padded width, a
  skinny M few rows and wide panels. Within 5% of the fewest, the fewest B vectors win (narrow panels: 6x64 measured
  8% slower than 8x32 at 2048^3), then the most accumulators: 6x16 (ymm) and 8x32 (zmm) for large squares.
  KC: a KC x NR panel of B fills at most an eighth of L2 and the KC x N slice of B half of L3 (every row block of A
  passes over it); K splits in equal slices. MC: an MC x KC block of A fills a quarter of L2 (A_BLOCK_L2), or is
  MC_MIN_ROWS rows (fewer when that leaves a thread without a block or panel to take). Measured on a Xeon with 2 MiB
  of L2, 2 threads: at K = 384 a block filling L2 (1360 rows) ran 15% slower than a quarter of it; at K = 2048 64 rows
  (a quarter) ran 6% slower than 256.
  L1-sized KC = 128 was ~10% slower than KC = K at 1024^3 (a C tile is loaded and stored every 128 steps of k)."""
  regs = 32 if vec >= 16 else 16
  cands = [(mr, nv) for nv in range(1, min(MAX_NV, -(-N // vec)) + 1) for mr in range(1, min(MAX_MR, M) + 1) if mr * nv + nv + 1 <= regs]
  cost = {(mr, nv): -(-M // mr) * -(-N // (nv * vec)) * (max(mr * nv / FMA_PORTS, (mr + nv) / LOAD_PORTS, FMA_LATENCY) + 1)
          for mr, nv in cands}
  best = min(cost.values())
  mr, nv = min((t for t in cands if cost[t] <= 1.05 * best), key=lambda t: (t[1], -t[0] * t[1]))
  nr = nv * vec
  kc = max(1, min(caches[1] // 8 // (4 * nr), caches[2] // 2 // (4 * -(-N // nr) * nr)))
  kc = -(-K // -(-K // kc))   # equal slices: 1568 = 2 x 784, not 1024 + 544
  rows = caches[1] // (4 * kc)   # of A's, in all of L2
  mc = max(mr, min(max(rows // A_BLOCK_L2, min(MC_MIN_ROWS, rows)) // mr, -(-M // mr)) * mr)
  if -(-N // nr) < threads: mc = min(mc, max(mr, -(-M // threads // mr) * mr))   # the threads split A's row blocks
  if (mb := -(-M // mc)) > -(-N // nr) and threads > 1:
    # the threads split the row blocks: as many blocks a thread, of equal rows (7 blocks of 1776 rows and one of 112, a
    # direct 7x7 stem's, left one thread waiting for a third of its time)
    mb = -(-mb // threads) * threads
    mc = -(-(-(-M // mr)) // mb) * mr
  return mr, nr, kc, mc

# Input and output channels at least WINO_MIN_CHANNELS: with fewer the transforms cost more than the product saves. Below
# 32 input channels each of the 16 products is a short k, and it paid only up to WINO_FEW_CI_MAX_CO output channels
# (1 thread, 16 lanes; 8 lanes gained more: 1.5-1.7x): 16 -> 64 at 55x55 249 -> 192 us, 16 -> 128 at 40x40 247 -> 188,
# 24 -> 64 at 56x56 368 -> 273, 64 -> 16 at 56x56 264 -> 216; with more it lost: 16 -> 192 at 28x28 189 -> 240, 16 -> 256
# at 40x40 486 -> 990, 16 -> 384 at 28x28 360 -> 465.
WINO_MIN_CHANNELS, WINO_FEW_CI, WINO_FEW_CI_MAX_CO = 16, 32, 128
WINO_MIN_LANES = 4   # the fewest of a row's tiles Winograd's transforms run as vector lanes (the row padded to a multiple)

def winograd(c) -> tuple | None:
  """(img, wt, co, ci, (oy, ky), (ox, kx)) when the contraction c is a 3x3 convolution of stride 1 and dilation 1
  (F(2x2, 3x3) applies: codegen.winograd): the reduce ranges are the input channels (>= 16) and two
  of size 3; one operand (the weights) depends on one loop range (the output channels, >= 16;
  at most 128 where the input channels are fewer than 32), the other (the image)
  on each 3-wide range ky only through oy + ky for one output range oy: every address and gate of the image is affine
  with ky's coefficient equal to oy's (so it may be evaluated at any split of their sum)."""
  red, a, b, I, J, K, T = c
  if T or len(K) != 3 or sorted(rsize(r) for r in K)[:2] != [3, 3]: return None
  if len(I) != 1: (a, I), (b, J) = (b, J), (a, I)
  if len(I) != 1 or len(J) < 2: return None
  wt, co, img, rows = a, I[0], b, J
  ci = max(K, key=rsize)
  ky, kx = [r for r in K if r is not ci]
  if min(rsize(ci), rsize(co)) < WINO_MIN_CHANNELS or rsize(ci) < WINO_FEW_CI and rsize(co) > WINO_FEW_CI_MAX_CO: return None
  ranges, memo, forms = set(rows) | set(K), {}, []
  arith = (Ops.ADD, Ops.SUB, Ops.MUL, Ops.IDIV, Ops.MOD)
  for u in img.toposort:   # the index expressions the image's values depend on: addresses and compared values
    roots = u.src[1:2] if u.op is Ops.INDEX else u.src if u.op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ) and u.src[0].dtype is dtypes.index else \
      () if u.dtype is dtypes.index and u.op in arith + (Ops.RANGE, Ops.CONST) else [s for s in u.src if s.dtype is dtypes.index]
    for e in roots:
      if not ranges_of(e) & ranges: continue
      if u.op not in (Ops.INDEX, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ) or (f := affine(e, memo)) is None: return None
      forms.append(f)
  pairs = []
  for k in (ky, kx):
    if not any(f.get(k) for f in forms): return None
    mates = [r for r in rows if all(f.get(r, 0) == f.get(k, 0) for f in forms)]
    if len(mates) != 1: return None
    pairs.append((mates[0], k))
  if pairs[0][0] is pairs[1][0]: return None
  return img, wt, co, ci, pairs[0], pairs[1]

def lane_coef(e: UOp, lane: UOp, memo: dict) -> int | None:
  """The step of index expression e per step of range `lane` when e is linear in it (other terms may be anything, symbolic
  sizes too), else None."""
  for u in e.toposort:   # operands first: each node once
    if u in memo: continue
    cs = [memo[s] for s in u.src]
    if u is lane: c = 1
    elif all(x == 0 for x in cs): c = 0
    elif u.op in (Ops.ADD, Ops.SUB) and None not in cs: c = cs[0] + cs[1] if u.op is Ops.ADD else cs[0] - cs[1]
    elif u.op is Ops.MUL and None not in cs and (k := next((im.cval(s) for s in u.src if im.cval(s) is not None), None)) is not None:
      c = (cs[0] if im.cval(u.src[1]) == k else cs[1]) * k
    else: c = None
    memo[u] = c
  return memo[e]

_Q = UOp(Ops.RANGE, dtypes.index, (im.const(1),), attrs(axis=-1, kind="lane_q"))   # stands for h // d in lane_frac
def lane_frac(e: UOp, lane: UOp) -> tuple[int, UOp] | None:
  """(d, h) when index e steps one element every d lanes, d lanes to an element: e = g + h // d, the range `lane` only in
  h, which steps 1 per lane and is a multiple of d at lane 0 (each run of d lanes then shares one element: a nearest
  upsample by d read along its output's lanes); d a power of two that divides the lanes. Else None."""
  qs = [u for u in e.toposort if u.op is Ops.IDIV and lane in u.src[0].toposort]
  if len(qs) != 1 or (d := im.cval((q := qs[0]).src[1])) is None or d < 2 or d & (d - 1) or (im.cval(lane.src[0]) or 1) % d: return None
  if lane_coef(q.src[0], lane, {}) != 1 or lane in (g := e.substitute({q: _Q})).toposort or lane_coef(g, _Q, {}) != 1: return None
  return (d, q.src[0]) if im.multiple_of(affine_simplify(q.src[0].substitute({lane: im.const(0)})), d) else None

# ops a lane-dependent value may be made of (dtype class -> ops), the dtypes such a value may have, and the largest address
# step a load's lanes may take. Integer vectors carry a quantized weight's decode (bytes, nibbles, fp16 scales' bits).
LANE_OPS = {"s": {Ops.ADD, Ops.SUB, Ops.MUL, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR, Ops.WHERE, Ops.LOAD, Ops.CAST, Ops.BITCAST},
            "b": {Ops.CMPLT, Ops.CMPEQ, Ops.CMPNE, Ops.AND, Ops.OR, Ops.XOR, Ops.CAST},
            "f": {Ops.ADD, Ops.SUB, Ops.MUL, Ops.FDIV, Ops.RECIP, Ops.SQRT, Ops.MAX, Ops.MIN, Ops.NEG, Ops.WHERE, Ops.LOAD, Ops.REDUCE,
                  Ops.EXP2, Ops.LOG2, Ops.POW, Ops.CAST, Ops.BITCAST}}
LANE_OPS["u"] = LANE_OPS["s"]
LANE_DTYPES = {dtypes.index, dtypes.bool, dtypes.float32, dtypes.float16, dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16,
               dtypes.int32, dtypes.uint32}
LANE_MAX_STEP = 4

def lane_supported(x: UOp, lane: UOp) -> bool:
  """Whether x can be computed as vectors over range `lane`: every value that depends on it of LANE_DTYPES and made by
  LANE_OPS (float ops on f32 only, no cast from or to index, a reduce of add/max/min; a shift may take an amount per
  lane), every load
  among them stepping 0 (gated) to LANE_MAX_STEP elements per lane, or one element every d lanes (lane_frac)."""
  memo, dep = {}, {lane}
  # loads whose address steps one element every d lanes (lane_frac): the h // d in it is computed at lane 0 only
  frac = {u for u in x.toposort if u.op is Ops.LOAD and u.src[0].op is Ops.INDEX and lane_coef(u.src[0].src[1], lane, memo) is None
          and lane_frac(u.src[0].src[1], lane) is not None}
  quot = {q for u in frac for q in u.src[0].src[1].toposort if q.op is Ops.IDIV and lane in q.toposort}
  for u in x.toposort:
    if u is not lane and any(s in dep for s in u.src): dep.add(u)
    if u not in dep or u is lane or u.op is Ops.INDEX or u in quot: continue
    c = "f" if u.dtype.is_float else "u" if u.dtype.is_unsigned else "b" if u.dtype.is_bool else "s"
    if u.dtype not in LANE_DTYPES or u.op not in LANE_OPS[c]: return False
    if c == "f" and u.dtype is not dtypes.float32 and u.op not in (Ops.LOAD, Ops.BITCAST): return False   # f16 is read, then widened
    if u.op in (Ops.CAST, Ops.BITCAST) and dtypes.index in (u.dtype, u.src[0].dtype): return False
    if u.op is Ops.WHERE and u.src[1].dtype is not u.dtype: return False
    if u.op is Ops.REDUCE and u.attrs.get("op") not in ("add", "max", "min"): return False
    if u.op is Ops.LOAD:
      idx = u.src[0]
      if idx.op is not Ops.INDEX or idx.src[0].op is not Ops.BUFFER: return False
      c = 1 if u in frac else lane_coef(idx.src[1], lane, memo)
      if c is None or not 0 <= c <= LANE_MAX_STEP or c == 0 and len(idx.src) < 3: return False
  return True

def lane_reduce_of(st: UOp) -> UOp | None:
  """The one reduce in store st's value when it is an f32 add, max or min (uop.reduce_lanes runs its innermost range
  as vector lanes)."""
  reds = [u for u in st.src[1].toposort if u.op is Ops.REDUCE]
  return reds[0] if len(reds) == 1 and reds[0].dtype is dtypes.float32 and reds[0].attrs.get("op") in ("add", "max", "min") else None

def innermost(red: UOp) -> UOp:
  """A reduce's innermost range: the last by axis, of equal axes the later one (a split range's inner part)."""
  return max(enumerate(red.src[1:]), key=lambda t: (t[1].attrs["axis"], t[0]))[1]

def single_store(sink: UOp, dts: tuple = (dtypes.float32,)) -> tuple[UOp, UOp, UOp] | None:
  """(end, store, innermost loop range) of a kernel that is one loop nest ending in one store of a value of dts (f32)."""
  if len(sink.src) != 1 or (end := sink.src[0]).op is not Ops.END or (st := end.src[0]).op is not Ops.STORE: return None
  return (end, st, max(end.src[1:], key=lambda r: r.attrs["axis"])) if st.src[1].dtype in dts and end.src[1:] else None
# what a uop.reduce_lanes kernel may store: its reduce is f32 and its lanes end there, so the stored value is a scalar (an
# LLM's key and value projections write a float16 cache)
REDUCE_STORES = (dtypes.float32, dtypes.float16, dtypes.bfloat16)


def twin(red: UOp, nodes: set[UOp], loops: list[UOp]) -> tuple[UOp, list[UOp], list[UOp]] | None:
  """(t, K, J): t in nodes is red's source with red's ranges K replaced by loop ranges J of the same sizes (in K's
  order), so the loops compute, at their own indices, what red reduced: softmax's exp(x - max) / sum(exp(x - max))."""
  K, src = sorted(red.src[1:], key=lambda r: r.attrs["axis"]), red.src[0]
  if not K or len(K) > 3 or any(r.op is not Ops.RANGE or r.attrs.get("kind") != "reduce" for r in K): return None
  used = ranges_of(src)
  cands = [[r for r in loops if r not in used and r.src[0] is k.src[0]] for k in K]   # one size: equal constants, or one symbolic size
  for J in itertools.product(*cands):
    if len(set(J)) == len(J) and (t := src.substitute(dict(zip(K, J)))) in nodes: return t, K, list(J)
  return None

def in_place(sink: UOp, red: UOp, t: UOp, J: list[UOp]) -> UOp | None:
  """The kernel's one store when red's source can be kept where that store writes (uop.keep): ungated, of the source's
  dtype, over loops that include J, its value using t (so each place is written once more, with the final value)."""
  ends = [e for e in sink.toposort if e.op is Ops.END]
  if len(ends) != 1 or (st := ends[0].src[0]).op is not Ops.STORE or len(st.src[0].src) != 2: return None
  if st.src[1].dtype is not red.src[0].dtype or not set(J) <= set(ends[0].src[1:]) or t not in st.src[1].toposort: return None
  # the row's places are known inside the reduce's loop: besides J, the address uses only ranges the reduce runs within
  return st if ranges_of(st.src[0].src[1]) - set(J) <= ranges_of(red) - set(red.src[1:]) else None

def blocked(red: UOp, block: int, outer: int = 32) -> UOp:
  """A float add reduce as nested reduces (done by uop-lower-cpu where a kernel has `uop.reduce_block`). The innermost
  ranges whose sizes multiply to at most `block` form one level: one accumulator per iteration of the ranges outside
  it, the vector loop LLVM makes of it. The next range r, too long to join the level, runs in blocks r = ro*b + ri with
  ri joining the level (b*level <= block terms per accumulator) and a tail for the last r % b terms. Everything outside
  sums partial sums, in levels of at most `outer` terms (a shallow tree: these loops are short and scalar), so the
  error of N terms grows like block/lanes + outer*log_outer(N/block), not N. Fresh ranges take r's axis (the loop
  nest keeps its order) and a kind unique within this rewrite."""
  fresh = itertools.count()
  def rng(n: int, r: UOp) -> UOp: return UOp(Ops.RANGE, dtypes.index, (im.const(n),), attrs(axis=r.attrs["axis"], kind=f"block{next(fresh)}"))
  def red_(v: UOp, *rs: UOp) -> UOp: return UOp(Ops.REDUCE, red.dtype, (v, *rs), red.arg, red.loc) if rs else v
  def bsum(v: UOp, rs: list[UOp], blk: int) -> UOp:
    j, p = len(rs), 1
    while j and p * rsize(rs[j - 1]) <= blk: j -= 1; p *= rsize(rs[j])
    if not j: return red_(v, *rs)
    r, level, b = rs[j - 1], rs[j:], blk // p
    if b == 1: return bsum(red_(v, *level), rs[:j], outer)   # the level is a block: r runs over level sums
    (q, t), ro, ri = divmod(rsize(r), b), None, rng(b, r)
    if q > 1: ro = rng(q, r)
    out = red_(v.substitute({r: im.add(im.mul(ro, im.const(b)), ri) if ro is not None else ri}), ri, *level)
    if ro is not None: out = bsum(out, [ro], outer)
    if t: out = UOp(Ops.ADD, red.dtype, (out, red_(v.substitute({r: im.add(rt := rng(t, r), im.const(q * b))}), rt, *level)), None, red.loc)
    return bsum(out, rs[:j - 1], outer)
  return bsum(red.src[0], sorted(red.src[1:], key=lambda r: r.attrs["axis"]), block)
