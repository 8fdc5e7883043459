"""uop-optimize: per-kernel CPU choices, written as attributes on each kernel func (uop-lower-cpu honours them).

  uop.fastmath            float reduces may reassociate/contract (LLVM vectorizes and interleaves the accumulator)
  uop.threads = N         the outermost loop is split in N chunks run on N threads (when the kernel does enough work); a
                          loop to a symbolic size in N parts of the size read at run time
  uop.grain = G           chunk bounds are multiples of G
  uop.nontemporal = VW    a big f32 elementwise output: its innermost loop steps VW lanes, the lanes' values (scalar
                          code LLVM's SLP vectorizer widens) go out in one vector store that bypasses the cache (no
                          read-for-ownership of output lines that will not be read back soon)
  uop.split_reduce = T     a kernel with one output element and one big f32 reduce: T partial reduces over chunks
                          (one per thread), then one over the partials (lower_cpu.SplitReduce)
  uop.reduce_block = B    float add reduces longer than B terms accumulate in blocks (see `blocked`): each accumulator
                          sums at most about B terms, so the rounding error grows like B + N/B, not N (f32 sums of
                          2^31 ones reach 2^31; one accumulator per vector lane stops at 2^24 each)
  uop.keep = [A, ...]     the reduces (named by the axis of their first range) whose source the kernel's loops compute
                          again at their own indices (a softmax's exp(x - max), summed, then divided): each element is
                          stored while it is reduced, in the output's place (`in_place`: the row is then scaled there)
                          or a per-thread scratch row, and the loops read it back from cache instead of recomputing it
                          (see `twin`; lower_cpu.Lowerer.keep)
  uop.contraction = [MR, NR, KC, MC, VW]   the kernel is a contraction (reduce-add of a product of two operands, one indexed by
                          loop ranges I and the reduce ranges, the other by the remaining loop ranges and the reduce
                          ranges): packed operands and an MR x NR register tile of vector FMAs (see lower_cpu.Contraction)
  uop.winograd = [MR, NR, KC, MC, VW, RB]   a 3x3 convolution of stride 1 as F(2x2, 3x3) Winograd (`winograd`, `winograd_pays`):
                          16 products of Cout x tiles x Cin on that micro-kernel, tiled so, run per block of RB rows of
                          tiles (0: all at once; `winograd_block`) (see codegen.winograd); WINO=0 in the environment turns it
                          off (every such convolution a plain contraction)

Heuristics; with beam = n > 0 each static kernel's choices are then searched by timing (SEARCH, see device/search.py).
Options: threads (0: the machine's), vec (f32 lanes of a vector register, 0: the machine's), l2, l3 (cache bytes, 0:
the machine's), beam (0: no search)."""
from __future__ import annotations
import itertools, os
from dataclasses import replace
from math import prod
from morok_mlir.ir.bridge import Func
from morok_mlir.core.uop import UOp, attrs
from morok_mlir.core.dtype import dtypes
from morok_mlir.host import CACHES, THREADS, VEC_WIDTH
from morok_mlir.ir.registry import register, Option, PassError
from morok_mlir.core import index_math as im
from morok_mlir.core.index_math import affine, affine_simplify
from morok_mlir.dialects.ops import GRAPH_ALU, Ops

PAR_MIN_WORK = 1 << 18          # iterations x values computed below which waking a thread (~15 us) costs more than it saves
MM_MIN_FLOPS = 1 << 20          # contractions smaller than this stay plain loops

def _size(r: UOp) -> int: return int(r.src[0].attrs["value"])
def _rngs(u: UOp) -> set[UOp]: return {x for x in u.toposort if x.op is Ops.RANGE}

DEPENDS_RLIMIT = 5_000_000     # Z3 resource units per dependence question (~2 s unloaded; a GroupNorm kernel's hardest: 0.8M)
def depends(x: UOp, r: UOp, rngs: list[UOp]) -> bool:
  """Whether x's value can change with range r, decided exactly: the addresses, gates and selects in x that mention
  r are compared at two values of r (all else equal). Affine forms (after the bounds-checked folding below) answer
  directly; otherwise Z3 looks for two values of r that differ (index math is 64-bit bit-vectors, as lowered), within
  DEPENDS_RLIMIT units of work. An unknown answer counts as dependent: a missed contraction costs speed, a wrong one
  would cost correctness.
  Mentioning is not depending: (i*64+j)//64 with j < 64 is i."""
  if any(u.dtype not in (dtypes.index, dtypes.bool) and r in u.src for u in x.toposort): return True   # a range used as a value
  exprs = [e for u in x.toposort for e in (u.src[1:] if u.op is Ops.INDEX else u.src[:1] if u.op is Ops.WHERE and u.dtype not in (dtypes.index, dtypes.bool) else ())
           if r in _rngs(e)]
  memo: dict = {}
  forms = [affine(e, memo) for e in exprs]
  if any(f is not None and f.get(r, 0) != 0 for f in forms): return True
  # gates are comparisons of index math: rebuilt from affine parts, a range that only cancels out disappears
  rest = [g for e, f in zip(exprs, forms) if f is None and r in _rngs(g := affine_simplify(e))]
  if not rest: return False
  # Z3 encodes index math only: an address or gate that reads memory (a gathered index) counts as dependent
  if any(u.op is Ops.LOAD or not u.src and u.op not in (Ops.CONST, Ops.RANGE, Ops.DEFINE_VAR) for e in rest for u in e.toposort): return True
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

def contraction(f: Func) -> tuple[UOp, UOp, UOp, list[UOp], list[UOp], list[UOp], list[UOp]] | None:
  """(reduce, a, b, I, J, K, T) when the kernel's one store is f(reduce-add over K of a*b, other reduces), a depending
  on loop ranges T, I and K only, b on T, the other loop ranges J and K only: a batch (over T, the ranges both depend
  on) of I x J matrix products. The one add-of-a-product reduce is the contraction; other reduces stay in the epilogue
  (attention's row sums). T, I and J keep the loop order (axis)."""
  ends = [u for u in f.roots[0].toposort if u.op is Ops.END]
  if len(ends) != 1 or ends[0].src[0].op is not Ops.STORE: return None
  loops = sorted(ends[0].src[1:], key=lambda r: r.attrs["axis"])
  reds = [u for u in ends[0].src[0].toposort if u.op is Ops.REDUCE and u.dtype is dtypes.float32 and u.src[0].op is Ops.MUL
          and (u.attrs.get("op") == "add" or u.attrs.get("op") in ("max", "min") and u.src[0].src[1] is ONE)]
  if len(reds) != 1: return None
  red = reds[0]
  K = sorted(red.src[1:], key=lambda r: r.attrs["axis"])
  a, b = red.src[0].src
  if set(K) & set(loops) or any(r.attrs.get("kind") != "loop" for r in loops): return None
  # the product is computed per output element: not inside another reduce, no range but the loops and its own reduces'
  if any(red in u.toposort for u in ends[0].src[0].toposort if u.op is Ops.REDUCE and u is not red): return None
  if _rngs(red) - set(loops) - {r for u in red.toposort if u.op is Ops.REDUCE for r in u.src[1:]}: return None
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
  # ranges: output positions). b's rows are padded to NR-wide panels (up to 32), a's to MR rows (up to 8): where b's pad
  # much worse (a small output: 7x7 = 49 rows pad to 64 as b, 56 as a) they swap, and the weights are the reusable panels.
  # They swap too where the weights have few rows (output channels) against a bigger image: as b, each image panel would
  # be packed (the whole im2col matrix, out of cache) for a few row tiles; as a, each block is packed into L2 right before
  # its tiles run (densenet's 3x3 convolutions to 32 channels: the model 57.7-59.2 -> 52.6-53.0 ms, interleaved)
  if len(ra - T) == 1 and len(rb - T) > 1 and plain(a, K[-1]):
    m, n = prod(_size(r) for r in ra - T), prod(_size(r) for r in rb - T)
    if padded(n, MAX_MR) * padded(m, 32) < padded(m, MAX_MR) * padded(n, 32) / 1.05 or m <= FEW_ROWS < n: a, b, ra, rb = b, a, rb, ra
  return red, a, b, [r for r in loops if r in ra - T], [r for r in loops if r not in ra], K, [r for r in loops if r in T]

WINOGRAD = os.environ.get("WINO", "1") != "0"
WINO_MIN_CHANNELS = 32   # input and output channels at least this: with fewer the transforms cost more than the product saves
def winograd(c) -> tuple | None:
  """(img, wt, co, ci, (oy, ky), (ox, kx)) when the contraction c is a 3x3 convolution of stride 1 and dilation 1
  (F(2x2, 3x3) applies: codegen.winograd): the reduce ranges are the input channels (>= 32) and two
  of size 3; one operand (the weights) depends on one loop range (the output channels, >= 32), the other (the image)
  on each 3-wide range ky only through oy + ky for one output range oy: every address and gate of the image is affine
  with ky's coefficient equal to oy's (so it may be evaluated at any split of their sum)."""
  red, a, b, I, J, K, T = c
  if T or len(K) != 3 or sorted(_size(r) for r in K)[:2] != [3, 3]: return None
  if len(I) != 1: (a, I), (b, J) = (b, J), (a, I)
  if len(I) != 1 or len(J) < 2: return None
  wt, co, img, rows = a, I[0], b, J
  ci = max(K, key=_size)
  ky, kx = [r for r in K if r is not ci]
  if min(_size(ci), _size(co)) < WINO_MIN_CHANNELS or _size(ci) == 3: return None
  ranges, memo, forms = set(rows) | set(K), {}, []
  arith = (Ops.ADD, Ops.SUB, Ops.MUL, Ops.IDIV, Ops.MOD)
  for u in img.toposort:   # the index expressions the image's values depend on: addresses and compared values
    roots = u.src[1:2] if u.op is Ops.INDEX else u.src if u.op in (Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ) and u.src[0].dtype is dtypes.index else \
      () if u.dtype is dtypes.index and u.op in arith + (Ops.RANGE, Ops.CONST) else [s for s in u.src if s.dtype is dtypes.index]
    for e in roots:
      if not _rngs(e) & ranges: continue
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

def winograd_tiles(c, w) -> int:
  """The 2x2 output tiles of a convolution winograd() accepted (a batch of images, rows and columns rounded up)."""
  _, _, _, I, J, _, _ = c
  (oy, _), (ox, _) = w[4], w[5]
  return prod(_size(r) for r in (J if w[2] in I else I) if r not in (oy, ox)) * -(-_size(oy) // 2) * -(-_size(ox) // 2)

def winograd_block(c, w, mr: int, vec: int, caches: tuple[int, int, int], threads: int) -> int:
  """Rows of tiles per block (0: the whole batch at once). Blocks pay where the transformed tiles of the whole batch (16
  floats per tile and input or output channel) would leave a quarter of L3 while the transformed filters (16 per pair
  of channels), which every block reads again, fit in a core's L2: the block's tiles then fill the rest of it (at least
  half), at least two blocks per thread. Measured (2 threads, Zen 4, 1 MiB L2): 8 images of 64 channels at 56x56
  9.7 -> 5.7 ms; 128 channels at 112x112 11.2 -> 9.4 ms; with 256 or 512 channels (4-16 MiB of filters) vgg19 ran
  148 -> 178 ms."""
  (oy, _), (ox, _) = w[4], w[5]
  rows, filters = winograd_tiles(c, w) // -(-_size(ox) // 2), 16 * 4 * _size(w[3]) * -(-_size(w[2]) // mr) * mr
  per_row = 16 * 4 * -(-_size(ox) // 2 // vec) * vec * (_size(w[3]) + -(-_size(w[2]) // mr) * mr)   # a row's tiles padded to lanes
  if rows * per_row <= caches[2] // 4 or rows < 2 * threads or filters > caches[1]: return 0
  return max(1, min(max(caches[1] - filters, caches[1] // 2) // per_row, rows // (2 * threads)))

WINO_MIN_FLOPS = 1 << 25   # a convolution's plain product below which the transforms' phases cost what Winograd saves
def winograd_pays(tiles: int, flops: int) -> bool:
  """Whether Winograd's 16 products fill their panels, 32 tiles or more (a 7x7 output's 16 leave them half empty: 512
  channels 1083 -> 1114 us), and save more than its two extra phases cost: 2^25 flops of the plain product or more
  (measured: 32 channels at 28x28, 14.5 MFLOP, 94 -> 113 us; 64 channels at 28x28, 58 MFLOP, 371 -> 272 us). Its
  transforms move 16 floats per tile and channel; where the whole image's would leave L3, codegen.winograd runs them
  per block of tile rows in L2 (8 images of 64 channels at 56x56: 10.3 -> 6.1 ms)."""
  return tiles >= 32 and flops >= WINO_MIN_FLOPS

def depthwise(c) -> bool:
  """A batch of products each of one row or column over a short k (a depthwise convolution: per channel, its 3x3 taps
  times the image): packing would copy each operand element to use it a few times; plain loops, in vector lanes where
  the output rows allow (uop.lanes), read them where they are."""
  _, _, _, I, J, K, T = c
  return bool(T) and min(prod(map(_size, I)), prod(map(_size, J))) == 1 and prod(map(_size, K)) < 32

ONE = UOp(Ops.CONST, dtypes.float32, (), attrs(value=1.0))
def column_reduce(f: Func, loops: list[UOp]) -> Func | None:
  """f with its one f32 reduce's source times ONE, when that reduce reads memory across its k (a bias gradient: a
  column sum of rows; `x.max(0)`) while the innermost loop reads along it: plain loops would step a row per term and
  reduce one column at a time; as a contraction with a ones vector (a max or min one combines with max or min instead of
  an FMA, see contraction), the rows are packed in panels and reduced NR columns at a time (a sum over 256 x 512: 16 us
  against 214)."""
  reds = [u for u in f.roots[0].toposort if u.op is Ops.REDUCE and u.attrs.get("op") in ("add", "max", "min") and u.dtype is dtypes.float32]
  if len(reds) != 1 or (red := reds[0]).src[0].op is Ops.MUL and red.attrs.get("op") == "add" or not loops: return None
  inner, k = max(loops, key=lambda r: r.attrs["axis"]), max(red.src[1:], key=lambda r: r.attrs["axis"])
  loads = [x for x in red.src[0].toposort if x.op is Ops.LOAD and x.src[0].op is Ops.INDEX and len(x.src[0].src) == 2]
  forms = [affine(x.src[0].src[1], {}) for x in loads]
  if not forms or any(fm is None or fm.get(k, 0) == 1 for fm in forms) or not any(fm.get(inner) == 1 for fm in forms): return None
  new = red.replace(src=(UOp(Ops.MUL, dtypes.float32, (red.src[0], ONE), None, red.loc), *red.src[1:]))
  return replace(f, roots=[f.roots[0].substitute({red: new})])

FEW_ROWS = 64   # weights with at most this many rows take the image's place as a (see contraction)
def padded(n: int, w: int) -> float: return -(-n // w) * w / n
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

REDUCE_BLOCK = 1 << 12          # terms per float accumulator: long enough that a block's vector loop and its horizontal
                                # sum cost ~1% over one long loop, short enough that blocks add up exactly to 2^31 and more
def long_sums(f: Func, block: int) -> bool:
  """Whether the kernel has a float add reduce over more than `block` terms."""
  return any(u.op is Ops.REDUCE and u.attrs.get("op") == "add" and u.dtype.is_float and prod(_size(r) for r in u.src[1:]) > block
             for u in f.roots[0].toposort)

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
    while j and p * _size(rs[j - 1]) <= blk: j -= 1; p *= _size(rs[j])
    if not j: return red_(v, *rs)
    r, level, b = rs[j - 1], rs[j:], blk // p
    if b == 1: return bsum(red_(v, *level), rs[:j], outer)   # the level is a block: r runs over level sums
    (q, t), ro, ri = divmod(_size(r), b), None, rng(b, r)
    if q > 1: ro = rng(q, r)
    out = red_(v.substitute({r: im.add(im.mul(ro, im.const(b)), ri) if ro is not None else ri}), ri, *level)
    if ro is not None: out = bsum(out, [ro], outer)
    if t: out = UOp(Ops.ADD, red.dtype, (out, red_(v.substitute({r: im.add(rt := rng(t, r), im.const(q * b))}), rt, *level)), None, red.loc)
    return bsum(out, rs[:j - 1], outer)
  return bsum(red.src[0], sorted(red.src[1:], key=lambda r: r.attrs["axis"]), block)

SPLIT_MIN = 1 << 18             # elements a full reduction needs before it is split across threads
def split_reduce(f: Func, threads: int) -> int | None:
  """Parts to split the one reduce of a loop-less kernel into, when it is big enough and divides evenly."""
  reds = [u for u in f.roots[0].toposort if u.op is Ops.REDUCE]
  if len(reds) != 1 or reds[0].dtype is not dtypes.float32 or len(reds[0].src) != 2 or any(u.op is Ops.END for u in f.roots[0].toposort): return None
  n = _size(reds[0].src[1])
  return threads if n >= SPLIT_MIN and n % threads == 0 else None

# ops per element a value costs when computed again: the f32 polynomials and divisions count as many plain ops
COST = {Ops.EXP2: 16, Ops.LOG2: 16, Ops.SIN: 16, Ops.POW: 16, Ops.FDIV: 4, Ops.SQRT: 4}
KEEP_COST = 8                   # a reduce's source costs this much per element before storing it beats recomputing it
def twin(red: UOp, nodes: set[UOp], loops: list[UOp]) -> tuple[UOp, list[UOp], list[UOp]] | None:
  """(t, K, J): t in nodes is red's source with red's ranges K replaced by loop ranges J of the same sizes (in K's
  order), so the loops compute, at their own indices, what red reduced: softmax's exp(x - max) / sum(exp(x - max))."""
  K, src = sorted(red.src[1:], key=lambda r: r.attrs["axis"]), red.src[0]
  if not K or len(K) > 3 or any(r.op is not Ops.RANGE or r.attrs.get("kind") != "reduce" for r in K): return None
  used = _rngs(src)
  cands = [[r for r in loops if r not in used and im.cval(r.src[0]) == im.cval(k.src[0]) is not None] for k in K]
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
  return st if _rngs(st.src[0].src[1]) - set(J) <= _rngs(red) - set(red.src[1:]) else None

def kept(f: Func, nodes: list[UOp], loops: list[UOp], budget: int) -> tuple[tuple[int, ...], bool] | None:
  """The reduces whose source is worth keeping (uop.keep), and whether the first is kept in the output (in_place):
  their loops recompute it (`twin`), it costs KEEP_COST ops per element or more, and a row of it fits in `budget`
  bytes (it is read back from cache)."""
  out, every = [], set(nodes)
  for red in nodes:
    if red.op is not Ops.REDUCE or (tw := twin(red, every, loops)) is None: continue
    nested = {x for r in red.src[0].toposort if r.op is Ops.REDUCE for x in r.toposort}   # computed once per row
    cost = sum(COST.get(u.op, 1) for u in red.src[0].toposort
               if u not in nested and u.dtype not in (dtypes.index, dtypes.bool) and u.op not in (Ops.CONST, Ops.LOAD))
    if cost >= KEEP_COST and prod(_size(r) for r in tw[1]) * red.dtype.itemsize <= budget:
      out.append((tw[1][0].attrs["axis"], in_place(f.roots[0], red, tw[0], tw[2]) is not None))
  return (tuple(a for a, _ in sorted(out)), sorted(out)[0][1]) if out else None

FMA_PORTS, LOAD_PORTS, FMA_LATENCY = 2, 2, 4   # vector FMAs and loads issued per cycle, cycles per FMA: recent x86 cores
MAX_MR, MAX_NV = 8, 8   # rows: A read in place keeps one address per row in a general register (x86-64 has 16)
def contraction_tiles(M: int, N: int, K: int, vec: int, caches: tuple[int, int, int] = CACHES, threads: int = 1) -> tuple[int, int, int, int]:
  """(MR, NR, KC, MC) for an M x N x K contraction at vec f32 lanes, L1/L2/L3 bytes `caches` (lower_cpu.Contraction).
  MR x NR, the register tile: MR rows of NR/vec vectors held in MR*NR/vec accumulators, plus NR/vec B vectors and one
  broadcast A value, within the register file (16 registers at <= 8 lanes: ymm; 32 at 16: zmm). A k step costs
  max(FMAs / FMA_PORTS, loads / LOAD_PORTS, FMA_LATENCY) cycles, plus one for the loop; the tile is the one with the
  fewest cycles over the whole problem, M and N padded to MR and NR, so a skinny N (10) gets NR = its padded width, a
  skinny M few rows and wide panels. Within 5% of the fewest, the fewest B vectors win (narrow panels: 6x64 measured
  8% slower than 8x32 at 2048^3), then the most accumulators: 6x16 (ymm) and 8x32 (zmm) for large squares.
  KC: a KC x NR panel of B fills at most an eighth of L2 and the KC x N slice of B half of L3 (every row block of A
  passes over it); K splits in equal slices. MC: an MC x KC block of A fills L2 (fewer rows when that leaves a thread
  without a block or panel to take). Measured on one Zen 4 core at 2048^3 (CPU time, interleaved): KC = 1024, MC = 256
  at 100 GFLOP/s; KC = 2048 (B panel half of L2) with MC = 64 (A block half of L2) at 89; L1-sized KC = 128 ~10% slower
  than KC = K at 1024^3 (a C tile is loaded and stored every 128 steps of k)."""
  regs = 32 if vec >= 16 else 16
  cands = [(mr, nv) for nv in range(1, min(MAX_NV, -(-N // vec)) + 1) for mr in range(1, min(MAX_MR, M) + 1) if mr * nv + nv + 1 <= regs]
  cost = {(mr, nv): -(-M // mr) * -(-N // (nv * vec)) * (max(mr * nv / FMA_PORTS, (mr + nv) / LOAD_PORTS, FMA_LATENCY) + 1)
          for mr, nv in cands}
  best = min(cost.values())
  mr, nv = min((t for t in cands if cost[t] <= 1.05 * best), key=lambda t: (t[1], -t[0] * t[1]))
  nr = nv * vec
  kc = max(1, min(caches[1] // 8 // (4 * nr), caches[2] // 2 // (4 * -(-N // nr) * nr)))
  kc = -(-K // -(-K // kc))   # equal slices: 1568 = 2 x 784, not 1024 + 544
  mc = max(mr, min(caches[1] // (4 * kc) // mr, -(-M // mr)) * mr)
  if -(-N // nr) < threads: mc = min(mc, max(mr, -(-M // threads // mr) * mr))   # the threads split A's row blocks
  return mr, nr, kc, mc

def conjuncts(g: UOp) -> set[UOp]:
  """The terms of a chain of ANDs."""
  return conjuncts(g.src[0]) | conjuncts(g.src[1]) if g.op is Ops.AND else {g}

def ungate(sink: UOp) -> UOp:
  """sink with the gate dropped from loads whose address is in their buffer anyway and whose value is only used under
  where(h, ., y) with h implying the gate (its conjuncts include the gate's): where the gate is false the value is not
  used, so reading the real element instead of 0 changes nothing. The load, ungated, then depends on fewer ranges and
  lowers outside their loops: a batchnorm of the image that a padded (depthwise) convolution reads, its per-channel
  sqrt and division computed once per channel instead of once per tap (shufflenet's). A use through a reduce, an
  address, a gate or a store covers nothing (only pure ops pass a cover on): the value is used as it is."""
  nodes = sink.toposort
  users: dict[UOp, list[tuple[UOp, int]]] = {}
  for u in nodes:
    for i, s in enumerate(u.src): users.setdefault(s, []).append((u, i))
  cover: dict[UOp, frozenset] = {}   # conjuncts true wherever u's value is used (a pure op passes on its own cover)
  for u in reversed(nodes):
    through = [cover[p] | conjuncts(p.src[0]) if p.op is Ops.WHERE and i == 1 else cover[p] if p.op in GRAPH_ALU else frozenset()
               for p, i in users.get(u, [])]
    cover[u] = frozenset.intersection(*through) if through else frozenset()
  sub = {}
  for u in nodes:
    if u.op is Ops.LOAD and len((idx := u.src[0]).src) == 3 and conjuncts(idx.src[2]) <= cover[u] and isinstance(n := idx.src[0].size, int):
      if (b := im.bounds(idx.src[1])) is not None and 0 <= b[0] and b[1] < n: sub[idx] = UOp(Ops.INDEX, idx.dtype, idx.src[:2])
  return sink.substitute(sub) if sub else sink

INDEX_ARITH = (Ops.ADD, Ops.SUB, Ops.MUL)
def merge_loops(sink: UOp) -> UOp:
  """sink with each pair of neighbouring loops (a outside b, closed by the same ends) that only ever address as one
  (every index expression over them is affine with a's coefficient nb times b's: a contiguous span of an NCHW tensor)
  run as one loop of na * nb iterations. A kernel over (256, 14, 14) then has one loop of 50176 that LLVM vectorizes
  whole, not 3584 runs of 14 with a scalar remainder each (3.5x faster). A range used any other way (a gate, a value,
  a per-channel parameter's address) keeps its loop. Runs on affine_simplify's output: a division left in an index
  is one its bounds do not fold, so an expression holding one has no affine form and keeps the loops apart."""
  while True:
    nodes = sink.toposort
    users: dict[UOp, list[UOp]] = {}
    for u in nodes:
      for s in u.src: users.setdefault(s, []).append(u)
    arith = lambda u: u.dtype is dtypes.index and u.op in INDEX_ARITH
    loops = sorted((u for u in nodes if u.op is Ops.RANGE and u.attrs.get("kind") == "loop"), key=lambda r: r.attrs["axis"])
    memo: dict = {}
    for a, b in reversed(list(zip(loops, loops[1:]))):
      if im.cval(a.src[0]) is None or im.cval(b.src[0]) is None: continue
      ends = [u for u in nodes if u.op is Ops.END and (a in u.src[1:] or b in u.src[1:])]
      if not all(a in e.src[1:] and b in e.src[1:] for e in ends): continue
      if any(not arith(u) and u.op is not Ops.END for r in (a, b) for u in users.get(r, [])): continue
      over = {a, b}
      for u in nodes:
        if arith(u) and any(x in over for x in u.src): over.add(u)
      roots = [u for u in over - {a, b} if any(not arith(v) for v in users.get(u, []))]
      if all((fm := affine(u, memo)) is not None and fm.get(a, 0) == im.cval(b.src[0]) * fm.get(b, 0) for u in roots): break
    else: return sink
    r = UOp(Ops.RANGE, dtypes.index, (im.const(im.cval(a.src[0]) * im.cval(b.src[0])),), a.arg)
    new: dict[UOp, UOp] = {a: im.const(0), b: r}
    for u in nodes:
      if u in new: continue
      src = tuple(new[s] for s in u.src)
      if u.op is Ops.END: src = (src[0], *(n for n, o in zip(src[1:], u.src[1:]) if o is not a))
      new[u] = u if src == u.src else u.replace(src=src)
    sink = affine_simplify(new[sink])

def optimize_kernel(f: Func, threads: int, vec: int, caches: tuple[int, int, int] = CACHES) -> Func:
  # index chains in affine form where bounds prove it: reshapes' div/mod fold away, so neighbouring iterations address
  # neighbouring elements and LLVM vectorizes the loads (a batched matmul's operands read k-contiguous rows)
  f = replace(f, roots=[sink := affine_simplify(ungate(f.roots[0]))])
  def facts(sink: UOp) -> tuple[list[UOp], list[UOp], list[UOp], int]:
    """nodes, ranges, loops and work: iterations x values computed per iteration, the loop nest once and each reduce
    once per iteration of the loops its value depends on (lowering hoists it out of the others; sibling reduces add);
    a symbolic size counts at its largest value"""
    nodes = sink.toposort
    rngs = [u for u in nodes if u.op is Ops.RANGE]
    loops = [r for r in rngs if r.attrs.get("kind") == "loop"]
    body = sum(1 for u in nodes if u.dtype not in (dtypes.index, dtypes.bool, dtypes.void) and u.op is not Ops.CONST)
    n = lambda r: im.smax(r.src[0])
    return nodes, rngs, loops, body * (prod(n(r) for r in loops) + sum(
      prod(n(r) for r in u.src[1:]) * prod(n(r) for r in _rngs(u) if r in loops) for u in nodes if u.op is Ops.REDUCE))
  def threaded() -> bool:
    """Whether the outer loop runs on threads: enough work, at least one iteration per thread, no serial loop outside."""
    if threads <= 1 or not loops or work < PAR_MIN_WORK: return False
    if im.smax((outer := min(loops, key=lambda r: r.attrs["axis"])).src[0]) < threads: return False
    return not any(r.attrs["kind"] == "serial" and r.attrs["axis"] < outer.attrs["axis"] for r in rngs)   # a serial loop runs on one thread
  nodes, rngs, loops, work = facts(sink)
  attrs, keep = dict(f.attrs), None
  if any(u.op is Ops.REDUCE and u.dtype.is_float for u in nodes): attrs["uop.fastmath"] = None
  # a loop that runs to a symbolic size: tiles, blocks and vector lanes are chosen for static sizes, so plain loops; the
  # outer loop still runs on threads (each takes its part of the size read at run time)
  if any(im.cval(r.src[0]) is None for r in rngs):
    if threaded(): attrs["uop.threads"] = threads
    return replace(f, attrs=attrs)
  size = 2 * prod(_size(r) for r in rngs)
  if (size >= MM_MIN_FLOPS and (c := contraction(f)) is not None and not depthwise(c)   # size first: contraction asks Z3
      or size >= MM_MIN_FLOPS >> 4 and (g := column_reduce(f, loops)) is not None and (c := contraction(g)) is not None and (f := g)):
    _, _, _, I, J, K, _ = c
    if WINOGRAD and (w := winograd(c)) is not None and winograd_pays(tiles := winograd_tiles(c, w), size):
      mm = contraction_tiles(_size(w[2]), tiles, _size(w[3]), vec, caches, threads)   # Cout x tiles x Cin
      attrs["uop.winograd"] = (*mm, vec, winograd_block(c, w, mm[0], vec, caches, threads))
    else: attrs["uop.contraction"] = (*contraction_tiles(prod(map(_size, I)), prod(map(_size, J)), prod(map(_size, K)), vec, caches, threads), vec)
    if threads > 1: attrs["uop.threads"] = threads
  else:
    if (m := merge_loops(sink)) is not sink: f, (nodes, rngs, loops, work) = replace(f, roots=[sink := m]), facts(m)
    if long_sums(f, REDUCE_BLOCK): attrs["uop.reduce_block"] = REDUCE_BLOCK
    if threads > 1 and not loops and (sr := split_reduce(f, threads)) is not None:
      attrs["uop.split_reduce"], attrs["uop.threads"] = sr, threads
    elif threaded(): attrs["uop.threads"] = threads
    # a kept row shares the core's L2 with the row it is computed from and with the other thread's rows
    if keep := kept(f, nodes, loops, caches[1] // 4): attrs["uop.keep"] = keep[0]
    elif w := lanes(f, vec): attrs["uop.lanes"] = w
  # a row kept in the output is scaled there, from cache, by plain stores (streaming them measured slower)
  if not keep or not keep[1]:
    if (inner := streaming_store(f, vec)) is not None:
      attrs["uop.nontemporal"] = vec
      if inner is min(loops, key=lambda r: r.attrs["axis"]): attrs["uop.grain"] = vec   # chunks start on a lane group
  return replace(f, attrs=attrs)

def lanes(f: Func, vec: int) -> int | None:
  """W for uop.lanes: the kernel's one f32 store steps by 1 with its innermost loop, and its value reduces inside that
  loop (pooling, a depthwise convolution): LLVM vectorizes no loop with a loop inside, so uop-lower-cpu runs W
  neighbouring iterations as vector lanes: vec or vec/2 where they divide the loop, else vec with the last group's lanes
  past its end masked off; as few as cover a short loop (at least 4)."""
  if (one := single_store(f)) is None: return None
  _, st, inner = one
  if len(st.src[0].src) != 2 or not any(u.op is Ops.REDUCE and inner in u.src[0].toposort for u in st.toposort): return None
  if (form := affine(st.src[0].src[1], {})) is None or form.get(inner) != 1 or (n := _size(inner)) < 4: return None
  w = vec if n % vec == 0 or n % (vec // 2) else vec // 2
  while w > 4 and w // 2 >= n: w //= 2
  return w

def single_store(f: Func) -> tuple[UOp, UOp, UOp] | None:
  """(end, store, innermost loop range) of a kernel that is one loop nest ending in one store of an f32 value."""
  if len(f.roots[0].src) != 1 or (end := f.roots[0].src[0]).op is not Ops.END or (st := end.src[0]).op is not Ops.STORE: return None
  return (end, st, max(end.src[1:], key=lambda r: r.attrs["axis"])) if st.src[1].dtype is dtypes.float32 and end.src[1:] else None

NT_MIN_BYTES = 1 << 24          # outputs at least this big (twice a typical L3 share) are streamed past the cache
def streaming_store(f: Func, vec: int) -> UOp | None:
  """The innermost loop range when the kernel is elementwise (no reduce) with one big f32 store whose address steps
  by 1 with that range, which vec divides: such a store can go out as nontemporal vector stores."""
  if (one := single_store(f)) is None: return None
  end, st, inner = one
  nodes = st.toposort
  # a reduce computed once per outer iteration (a row's mean) is shared by the lanes; one inside the lane loop is not
  if any(u.op is Ops.REDUCE and inner in u.toposort for u in nodes) or len(st.src[0].src) != 2: return None   # gated store
  form = affine(st.src[0].src[1], {})
  if form is None or form.get(inner) != 1 or _size(inner) % vec or 4 * prod(_size(r) for r in end.src[1:]) < NT_MIN_BYTES: return None
  if any(v % vec for k, v in form.items() if k is not inner): return None   # every lane group starts vec-aligned
  return inner

# (kernel with the heuristic's attributes, beam width, threads, vec) -> the kernel with the fastest choices found by
# compiling and timing candidates: the device layer's search registers itself here (a pass cannot run kernels)
SEARCH = None

@register("uop-optimize", "Per-kernel CPU choices as kernel attributes: threads, fastmath reduces, split reductions, contraction tiles, "
          "nontemporal stores, vector lanes",
          threads=Option(int, 0, "threads for parallel loops (0: the machine's)"), vec=Option(int, 0, "f32 lanes per vector (0: the machine's)"),
          l2=Option(int, 0, "L2 cache bytes (0: the machine's)"), l3=Option(int, 0, "L3 cache bytes (0: the machine's)"),
          beam=Option(int, 0, "beam width of a timed search over each kernel's choices, cached on disk (0: heuristics only)"))
def uop_optimize(funcs: list[Func], threads: int = 0, vec: int = 0, l2: int = 0, l3: int = 0, beam: int = 0) -> list[Func]:
  threads, vec, caches = threads or THREADS, vec or VEC_WIDTH, (CACHES[0], l2 or CACHES[1], l3 or CACHES[2])
  if beam < 0: raise PassError(f"uop-optimize: beam must be >= 0, got {beam}")
  if beam and SEARCH is None: raise PassError("uop-optimize: beam > 0 needs the CPU device's search (morok_mlir.device.search)")
  kernel = lambda f: "uop.kernel" in f.attrs and f.roots and f.roots[0].op is Ops.SINK
  funcs = [optimize_kernel(f, threads, vec, caches) if kernel(f) else f for f in funcs]
  return [SEARCH(f, beam, threads, vec) if beam and kernel(f) else f for f in funcs]
