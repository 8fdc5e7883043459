"""uop-optimize: per-kernel CPU choices, written as attributes on each kernel func (uop-lower-cpu honours them).

  uop.fastmath            float reduces may reassociate/contract (LLVM vectorizes and interleaves the accumulator)
  uop.threads = N         the outermost loop is split in N chunks run on N threads (when the kernel does enough work); a
                          loop to a symbolic size in N parts of the size read at run time
  uop.grain = G           chunk bounds are multiples of G
  uop.nontemporal = VW    a big f32 elementwise output: its innermost loop steps VW lanes, the lanes' values (scalar
                          code LLVM's SLP vectorizer widens) go out in one vector store that bypasses the cache (no
                          read-for-ownership of output lines that will not be read back soon)
  uop.split_reduce = T     a kernel with one output element and one big f32 reduce: T partial reduces over chunks
                          (one per thread), then one over the partials (codegen.split_reduce.SplitReduce)
  uop.reduce_block = B    float add reduces longer than B terms accumulate in blocks (see kernel_facts.blocked): each accumulator
                          sums at most about B terms, so the rounding error grows like B + N/B, not N (f32 sums of
                          2^31 ones reach 2^31; one accumulator per vector lane stops at 2^24 each)
  uop.keep = [A, ...]     the reduces (named by the axis of their first range) whose source the kernel's loops compute
                          again at their own indices (a softmax's exp(x - max), summed, then divided): each element is
                          stored while it is reduced, in the output's place (kernel_facts.in_place: the row is then scaled there)
                          or a per-thread scratch row, and the loops read it back from cache instead of recomputing it
                          (see kernel_facts.twin; lower_cpu.Lowerer.keep)
  uop.row_lanes = W       besides uop.keep, on a short static row (see row_lanes): the row and its reduces run as W-lane
                          vectors, the source computed again rather than kept (codegen.lanes.row_lanes; uop.keep where it cannot)
  uop.reduce_lanes = W    the innermost range of the one reduce runs as W vector lanes (a vector accumulator, its lanes summed
                          once per output), its loads W neighbouring elements: a quantized matrix-vector product, whose
                          block index math split_ranges has run as ranges of their own (see reduce_lanes)
  uop.contraction = [MR, NR, KC, MC, VW]   the kernel is a contraction (reduce-add of a product of two operands, one indexed by
                          loop ranges I and the reduce ranges, the other by the remaining loop ranges and the reduce
                          ranges): packed operands and an MR x NR register tile of vector FMAs (see codegen.contraction.Contraction)
  uop.direct_conv           with uop.contraction: a strided convolution's image is operand a, read in place (from a padded copy
                          where padded) with the tile's vectors along output channels (kernel_facts.direct_conv)
  uop.int8 = [MR, NR, VW, KW]   a contraction of 8-bit values summed in int32 (kernel_facts.int8_contraction): packed 8-bit
                          operands, an MR x NR tile of VW-lane i32 accumulators, each instruction a dot product of KW
                          values per lane (host.INT8_DOTS: VNNI's vpdpbusd, or vpmaddwd) (see codegen.int8.Int8Contraction)
  uop.winograd = [MR, NR, KC, MC, VW, RB]   a 3x3 convolution of stride 1 as F(2x2, 3x3) Winograd (kernel_facts.winograd, `winograd_pays`):
                          16 products of Cout x tiles x Cin on that micro-kernel, tiled so, run per block of RB rows of
                          tiles (0: all at once; `winograd_block`) (see codegen.winograd); WINO=0 in the environment turns it
                          off (every such convolution a plain contraction)
  uop.variant_of = "name", uop.variant = [A, K, B, ...]   a copy of kernel `name`, its symbolic sizes' values (argument A,
                          entry K) bounded by B, optimized for those bounds; run where the values fit (`variants`)

Heuristics; with beam = n > 0 each static kernel's choices are then searched by timing (SEARCH, see device/search.py).
Options: threads (0: the machine's), vec (f32 lanes of a vector register, 0: the machine's), l2, l3 (cache bytes, 0:
the machine's), beam (0: no search), int8 (the int8 dot product, host.INT8_DOTS, or none; '': the machine's)."""
from __future__ import annotations
from dataclasses import replace
from math import prod
from morok_mlir.ir.bridge import Func
from morok_mlir.core.uop import UOp, attrs
from morok_mlir.core.dtype import dtypes
from morok_mlir import host
from morok_mlir.host import CACHES, INT8_DOTS, THREADS, VEC_WIDTH
from morok_mlir.ir.registry import register, Option, PassError
from morok_mlir.core import env, index_math as im
from morok_mlir.core.progress import progress
from morok_mlir.core.index_math import affine, affine_simplify
from morok_mlir.dialects.ops import GRAPH_ALU, Ops
from morok_mlir.core.kernel_facts import (ONE, REDUCE_STORES, WINO_MIN_LANES, contraction, contraction_tiles, direct_conv, extent, in_place,
  innermost, int8_contraction, lane_coef, lane_reduce_of, lane_supported, ranges_of, rsize, single_store, twin, winograd)

PAR_MIN_WORK = 1 << 18          # iterations x values computed below which waking a thread (~15 us) costs more than it saves
MM_MIN_FLOPS = 1 << 20          # contractions smaller than this stay plain loops

WINOGRAD = env.get("WINO")
DIRECT, DIRECT_MAX_CO, DIRECT_MIN_KW = True, 32, 6   # strided convolutions as direct ones (kernel_facts.direct_conv); False: an im2col packed

def direct_pays(co: int, kw: int, vec: int, whole: bool) -> bool:
  """Whether a strided convolution of co output channels and kw-wide window rows runs faster direct than as an im2col:
  where the im2col would be packed whole (not panel by panel inside mm: codegen.contraction's fused_b), or where few
  output channels fill whole vectors and the window's rows are long (a stem's 6x6 or 7x7: short rows leave the direct
  loop's per-tap work uncovered, channels short of a vector waste its lanes). Interleaved, one process: 64 -> 128
  channels 3x3 stride 2 at 40x40 191 -> 161 us; a 3 -> 16 6x6 stem at 320x320 303 -> 284, 7x7 at 224x224 211 -> 193;
  direct where this says no: a 3 -> 64 7x7 stem (fused_b) 644 / 683, 32 -> 64 at 80x80 (fused_b) 157 / 175, 3 -> 24
  3x3 at 224x224 57 / 136, 3 -> 16 3x3 44 / 81, 16 -> 16 3x3 at 112x112 64 / 76, 3 -> 16 5x5 102 / 130, 3 -> 24 6x6 at
  320x320 405 / 501 (at 8 lanes 755 / 660: 24 channels are three whole vectors there)."""
  return whole or co < DIRECT_MAX_CO and co % vec == 0 and kw >= DIRECT_MIN_KW

def winograd_tiles(c, w) -> int:
  """The 2x2 output tiles of a convolution winograd() accepted (a batch of images, rows and columns rounded up)."""
  _, _, _, I, J, _, _ = c
  (oy, _), (ox, _) = w[4], w[5]
  return prod(rsize(r) for r in (J if w[2] in I else I) if r not in (oy, ox)) * -(-rsize(oy) // 2) * -(-rsize(ox) // 2)

def winograd_columns(rows: int, tw: int) -> int:
  """The columns of Winograd's products (codegen.winograd: rows of tiles, each padded to a multiple of its transforms'
  lanes, at fewest WINO_MIN_LANES): NR fits these, not the tiles (a 20x20 image's 10 rows of 10 tiles are 120 columns:
  a 112-wide panel for its 100 tiles took two, 224 columns)."""
  return rows * -(-tw // WINO_MIN_LANES) * WINO_MIN_LANES

def winograd_block(c, w, mr: int, vec: int, caches: tuple[int, int, int], threads: int) -> int:
  """Rows of tiles per block (0: the whole batch at once). Blocks pay where the transformed tiles of the whole batch (16
  floats per tile and input or output channel) would leave a core's L2 while the transformed filters (16 per pair of
  channels), which every block reads again, fit in it: the block's tiles then fill the rest of it (at least half), at
  least two blocks per thread, and the filters read again cost at most half the tiles' bytes. Measured (2 threads,
  Zen 4, 1 MiB L2): 8 images of 64 channels at 56x56 9.7 -> 5.7 ms; 128 channels at 112x112 11.2 -> 9.4 ms; with 256
  or 512 channels (4-16 MiB of filters) vgg19 ran 148 -> 178 ms. On a Xeon (2 MiB L2), whose L3 a core reads far
  slower than its L2, blocks paid from one image: 16 -> 64 channels at 55x55 264 -> 148 us, 64 at 56x56 521 -> 429,
  16 at 80x80 155 -> 99; where the filters' reads would cost more (128 channels at 28x28: 421 -> 564) they do not."""
  (oy, _), (ox, _) = w[4], w[5]
  rows, filters = winograd_tiles(c, w) // -(-rsize(ox) // 2), 16 * 4 * rsize(w[3]) * -(-rsize(w[2]) // mr) * mr
  per_row = 16 * 4 * -(-rsize(ox) // 2 // vec) * vec * (rsize(w[3]) + -(-rsize(w[2]) // mr) * mr)   # a row's tiles padded to lanes
  if rows * per_row <= caches[1] or rows < 2 * threads or filters > caches[1]: return 0
  rb = max(1, min(max(caches[1] - filters, caches[1] // 2) // per_row, rows // (2 * threads)))
  # tiles of several L2s leave the L3 share too once a model's other kernels have run: their trip out and back then
  # costs as much as reading the filters again once more
  cost = 1 if rows * per_row > 4 * caches[1] else 2
  return rb if cost * filters * -(-rows // rb) <= rows * per_row else 0

WINO_MIN_FLOPS = 1 << 24   # a convolution's plain product below which the transforms' phases cost what Winograd saves
def winograd_pays(tiles: int, flops: int) -> bool:
  """Whether Winograd's 16 products fill their panels, 32 tiles or more (a 7x7 output's 16 leave them half empty: 512
  channels 1083 -> 1114 us), and save more than its two extra phases cost: 2^24 flops of the plain product or more
  (measured, 1 thread: 32 channels at 28x28, 14.5 MFLOP, 94 -> 113 us; 64 channels at 28x28, 58 MFLOP, 371 -> 272 us;
  between 2^24 and 2^25: 48 -> 192 at 13x13 160-162 -> 139-140, 48 -> 96 at 16x16 103-107 -> 72-81, 80 -> 80 at 16x16
  161-168 -> 99-100, 64 -> 64 at 18x18 119-139 -> 113-114, 64 -> 64 at 20x20 160-212 -> 167-241, the one not gained). Its
  transforms move 16 floats per tile and channel; where the whole image's would leave L3, codegen.winograd runs them
  per block of tile rows in L2 (8 images of 64 channels at 56x56: 10.3 -> 6.1 ms)."""
  return tiles >= 32 and flops >= WINO_MIN_FLOPS

def depthwise(c, k_max: int = 32) -> bool:
  """A batch of products each of one row or column over a short k (below k_max: a depthwise convolution: per channel,
  its 3x3 taps times the image): packing would copy each operand element to use it a few times; plain loops, in vector
  lanes where the output rows allow (uop.lanes), read them where they are."""
  _, _, _, I, J, K, T = c
  return bool(T) and min(prod(map(rsize, I)), prod(map(rsize, J))) == 1 and prod(map(rsize, K)) < k_max

def reads_across(forms: list, k: UOp, inner: UOp) -> bool:
  """Whether loads of these affine index forms (None: not affine) read across reduce range k, no term a step of 1 along
  it, while the innermost loop reads along them, one form stepping 1 with it: a reduce over rows, a column per output."""
  return bool(forms) and all(fm is not None and fm.get(k, 0) != 1 for fm in forms) and any(fm.get(inner) == 1 for fm in forms)

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
  if not reads_across([affine(x.src[0].src[1], {}) for x in loads], k, inner): return None
  new = red.replace(src=(UOp(Ops.MUL, dtypes.float32, (red.src[0], ONE), None, red.loc), *red.src[1:]))
  return replace(f, roots=[f.roots[0].substitute({red: new})])

OUTER_CHUNK = 2048   # outputs a chunk of an outer reduce accumulates (8 KiB of f32: its row stays in L1 while the rows pass)
ACC = {"add": Ops.ADD, "mul": Ops.MUL, "max": Ops.MAX, "min": Ops.MIN}
def outer_reduce(f: Func, loops: list[UOp], threads: int) -> Func | None:
  """f with its one reduce over a leading axis run row by row, where column_reduce does not take it (a product, an
  integer or bool reduce, `x.any(0)`): the terms are a row apart, the innermost loop reads along the rows, so plain loops
  step a row per term and take each column's terms from a page of its own. The reduce's range becomes a loop between
  the innermost loop's chunks (an outer loop, which threads split) and the chunk's outputs, each output accumulated in
  place: its first row stored as it is, each later one combined with what is stored, what the kernel computes of the
  reduce (a cast, a scale) at the last row. So the output holds the accumulator, of its dtype (a wider accumulator, an
  integer mean's f64 sum stored as f32, keeps the plain loops, as does a float sum over more than REDUCE_BLOCK rows,
  whose blocks bound its error). The load of the stored value is gated by `row < rows` (always true): a load
  placement could hoist out of the row loop must depend on it. A max or min of bools cast to an integer and back (any,
  all) reduces the bools. The row loop is serial: the threads (or a GPU's ids) split the chunks and the other loops,
  never the rows."""
  if (one := single_store(f.roots[0], tuple(dtypes.all))) is None or len(reds := [u for u in f.roots[0].toposort if u.op is Ops.REDUCE]) != 1:
    return None
  end, st, inner = one
  red, v, out = reds[0], st.src[1], st.src[0]
  if len(red.src) != 2 or (op := ACC.get(red.attrs.get("op"))) is None or im.cval(inner.src[0]) is None or im.cval(red.src[1].src[0]) is None:
    return None
  (src, r), acc = red.src, red
  # cast(max(cast(bool))): the bools' own max (the casts keep order)
  if op in (Ops.MAX, Ops.MIN) and src.op is Ops.CAST and src.src[0].dtype is dtypes.bool and \
     (back := next((u for u in v.toposort if u.op is Ops.CAST and u.src[0] is red and u.dtype is dtypes.bool), None)) is not None:
    src, acc = src.src[0], back
  loads = [x for x in src.toposort if x.op is Ops.LOAD]
  forms = [affine(x.src[0].src[1], {}) for x in loads if x.src[0].op is Ops.INDEX]
  if acc.dtype is not v.dtype or red in v.substitute({acc: im.const(0)}).toposort or len(forms) != len(loads) or \
     not reads_across(forms, r, inner) or lane_coef(out.src[1], inner, {}) != 1 or any(x.src[0].src[0] is out.src[0] for x in loads):
    return None
  n, rows = im.cval(inner.src[0]), im.cval(r.src[0])
  if red.dtype.is_float and op is Ops.ADD and rows > REDUCE_BLOCK: return None   # (a long float sum keeps its blocks: uop.reduce_block)
  ch = max((d for d in range(8, min(n, OUTER_CHUNK) + 1, 8) if n % d == 0 and (len(loops) > 1 or d <= n // max(threads, 1))), default=n)
  base = max(u.attrs["axis"] for u in f.roots[0].toposort if u.op is Ops.RANGE) + 1
  rng = lambda size, ax, kind="loop": UOp(Ops.RANGE, dtypes.index, (im.const(size),), attrs(axis=ax, kind=kind))
  jc, row, jj = rng(n // ch, base), rng(rows, base + 1, "serial"), rng(ch, base + 2)   # (serial: a GPU runs it in order)
  sub = {inner: im.add(im.mul(jc, im.const(ch)), jj) if n > ch else jj, r: row}
  at, x = out.substitute(sub), src.substitute(sub)
  cmp = lambda o, c: UOp(o, dtypes.bool, (row, im.const(c)))
  gate = cmp(Ops.CMPLT, rows)
  held = UOp(Ops.LOAD, v.dtype, (UOp(Ops.INDEX, at.dtype, (*at.src[:2], UOp(Ops.AND, dtypes.bool, (at.src[2], gate)) if len(at.src) > 2 else gate)),))
  new = UOp(Ops.WHERE, v.dtype, (cmp(Ops.CMPEQ, 0), x, UOp(op, v.dtype, (held, x))))
  if v is not acc: new = UOp(Ops.WHERE, v.dtype, (cmp(Ops.CMPEQ, rows - 1), v.substitute({acc: new}).substitute(sub), new))
  ranges = [l for l in end.src[1:] if l is not inner] + ([jc] if n > ch else []) + [row, jj]
  return replace(f, roots=[UOp(Ops.SINK, dtypes.void, (UOp(Ops.END, dtypes.void, (UOp(Ops.STORE, dtypes.void, (at, new)), *ranges)),))])

REDUCE_BLOCK = 1 << 12          # terms per float accumulator: long enough that a block's vector loop and its horizontal
                                # sum cost ~1% over one long loop, short enough that blocks add up exactly to 2^31 and more
def long_sums(f: Func, block: int) -> bool:
  """Whether the kernel has a float add reduce over more than `block` terms."""
  return any(u.op is Ops.REDUCE and u.attrs.get("op") == "add" and u.dtype.is_float and prod(rsize(r) for r in u.src[1:]) > block
             for u in f.roots[0].toposort)

SPLIT_MIN = 1 << 18             # elements a full reduction needs before it is split across threads
def split_reduce(f: Func, threads: int) -> int | None:
  """Parts to split the one reduce of a loop-less kernel into, when it is big enough and divides evenly."""
  reds = [u for u in f.roots[0].toposort if u.op is Ops.REDUCE]
  if len(reds) != 1 or reds[0].dtype is not dtypes.float32 or len(reds[0].src) != 2 or any(u.op is Ops.END for u in f.roots[0].toposort): return None
  n = rsize(reds[0].src[1])
  return threads if n >= SPLIT_MIN and n % threads == 0 else None

# ops per element a value costs when computed again: the f32 polynomials and divisions count as many plain ops
COST = {Ops.EXP2: 16, Ops.LOG2: 16, Ops.SIN: 16, Ops.POW: 16, Ops.FDIV: 4, Ops.SQRT: 4}
KEEP_COST = 8                   # a reduce's source costs this much per element before storing it beats recomputing it

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
    if cost >= KEEP_COST and prod(rsize(r) for r in tw[1]) * red.dtype.itemsize <= budget:
      out.append((tw[1][0].attrs["axis"], in_place(f.roots[0], red, tw[0], tw[2]) is not None))
  return (tuple(a for a, _ in sorted(out)), sorted(out)[0][1]) if out else None

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

# a grouped convolution's rows of k below this stay plain lane loops rather than its groups' products: as products, k = 6
# and 10 ran 0.43x and 0.49x; k = 28 (4 groups of 28 channels at 28x28) 1.3x
SPLIT_MIN_K = 16
def split_groups(sink: UOp) -> UOp | None:
  """sink with a loop range r of size n that an index divides by c (n = G*c: a grouped convolution's output channel,
  its group r // c and its channel in the group r % c) as two loops g (G) and j (c), r = g*c + j: every index is then
  affine in them, and a contraction sees the group as its batch and j as B's columns (an image of G groups times its
  pixels, not G*c products of one row each, the image repacked for each); None if no index divides a range so."""
  nodes = sink.toposort
  for u in nodes:
    if u.op in (Ops.IDIV, Ops.MOD) and (r := u.src[0]).op is Ops.RANGE and r.attrs.get("kind") == "loop" and \
       (c := im.cval(u.src[1])) and (n := im.cval(r.src[0])) and 1 < c < n and n % c == 0: break
  else: return None
  ax = r.attrs["axis"]
  def rng(size: int, axis: int, old: UOp | None) -> UOp:
    return UOp(Ops.RANGE, dtypes.index, (im.const(size),) if old is None else old.src, attrs(**{**(old or r).attrs, "axis": axis}))
  g, j = rng(n // c, ax, None), rng(c, ax + 1, None)
  new: dict[UOp, UOp] = {r: im.add(im.mul(g, im.const(c)), j)}
  for u in nodes:
    if u in new: continue
    if u.op is Ops.RANGE and u.attrs["axis"] > ax: new[u] = rng(0, u.attrs["axis"] + 1, u); continue
    src = tuple(new.get(s, s) for s in u.src)
    if u.op in (Ops.END, Ops.REDUCE) and r in u.src[1:]:   # the loop it closes: both
      src = (src[0], *(x for o, s in zip(u.src[1:], src[1:]) for x in ((g, j) if o is r else (s,))))
    new[u] = u if src == u.src else u.replace(src=src)
  return affine_simplify(new[sink])

INDEX_ARITH = (Ops.ADD, Ops.SUB, Ops.MUL)
def linear_in(u: UOp, a: UOp, b: UOp) -> dict | None:
  """u's affine form in ranges a and b when it reaches them through +, - and * alone, its subterms that use neither
  taken as opaque symbols (a concat's or a channel shuffle's div and mod of the channel beside a row's span): exact for
  any values of a and b, so the loops may merge."""
  dep: set[UOp] = set()
  for x in u.toposort:
    if x is a or x is b or any(s in dep for s in x.src): dep.add(x)
  if any(x.op not in INDEX_ARITH for x in dep - {a, b}): return None
  free = {s for x in dep for s in x.src if s not in dep and s.op is not Ops.CONST}
  sub = {x: UOp(Ops.RANGE, dtypes.index, (im.const(1 << 40),), attrs(axis=-1 - i, kind="loop")) for i, x in enumerate(free)}
  return affine(u.substitute(sub), {})

CLOSERS = {"loop": Ops.END, "reduce": Ops.REDUCE}   # a range's kind -> the op whose sources close it
def merge_loops(sink: UOp) -> UOp:
  """sink with each pair of neighbouring loops (a outside b, closed by the same ends) that only ever address as one
  (every index expression over them is affine with a's coefficient nb times b's: a contiguous span of an NCHW tensor)
  run as one loop of na * nb iterations. A kernel over (256, 14, 14) then has one loop of 50176 that LLVM vectorizes
  whole, not 3584 runs of 14 with a scalar remainder each (3.5x faster). Two reduce ranges summed by the same reduces,
  a just before b in each, merge the same way (a global average pool over 1000 x 13 x 13: 65-67 -> 7-10 us). A range used
  any other way (a gate, a value, a per-channel parameter's address) keeps its loop. Runs on affine_simplify's output:
  a division left in an index is one its bounds do not fold, so an expression holding one has no affine form and keeps
  the loops apart."""
  while (pair := _mergeable(nodes := sink.toposort)) is not None:
    a, b, close = pair
    r = UOp(Ops.RANGE, dtypes.index, (im.const(im.cval(a.src[0]) * im.cval(b.src[0])),), a.arg)
    new: dict[UOp, UOp] = {a: im.const(0), b: r}
    for u in nodes:
      if u in new: continue
      src = tuple(new[s] for s in u.src)
      if u.op is close: src = (src[0], *(n for n, o in zip(src[1:], u.src[1:]) if o is not a))
      new[u] = u if src == u.src else u.replace(src=src)
    sink = affine_simplify(new[sink])
  return sink

def _mergeable(nodes: list[UOp]) -> tuple[UOp, UOp, Ops] | None:
  """(a, b, the op that closes them): the innermost neighbouring pair of ranges of one kind that merge_loops may run as
  one range, or None."""
  users: dict[UOp, list[UOp]] = {}
  for u in nodes:
    for s in u.src: users.setdefault(s, []).append(u)
  arith = lambda u: u.dtype is dtypes.index and u.op in INDEX_ARITH
  memo: dict = {}
  for kind, close in CLOSERS.items():
    loops = sorted((u for u in nodes if u.op is Ops.RANGE and u.attrs.get("kind") == kind), key=lambda r: r.attrs["axis"])
    for a, b in reversed(list(zip(loops, loops[1:]))):
      if im.cval(a.src[0]) is None or im.cval(b.src[0]) is None: continue
      ends = [u for u in nodes if u.op is close and (a in u.src[1:] or b in u.src[1:])]
      if not all(a in e.src[1:] and b in e.src[1:] and (close is Ops.END or e.src.index(a) + 1 == e.src.index(b)) for e in ends): continue
      if any(not arith(u) and u.op is not close for r in (a, b) for u in users.get(r, [])): continue
      over = {a, b}
      for u in nodes:
        if arith(u) and any(x in over for x in u.src): over.add(u)
      roots = [u for u in over - {a, b} if any(not arith(v) for v in users.get(u, []))]
      if all((fm := affine(u, memo) or linear_in(u, a, b)) is not None and fm.get(a, 0) == im.cval(b.src[0]) * fm.get(b, 0) for u in roots):
        return a, b, close
  return None

def optimize_kernel(f: Func, threads: int, vec: int, caches: tuple[int, int, int] = CACHES, dot: str | None = None, direct: bool = True) -> Func:
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
    return nodes, rngs, loops, body * (prod(map(rsize, loops)) + sum(
      prod(map(rsize, u.src[1:])) * prod(rsize(r) for r in ranges_of(u) if r in loops) for u in nodes if u.op is Ops.REDUCE))
  def threaded() -> bool:
    """Whether the outer loop runs on threads: enough work, at least one iteration per thread, no serial loop outside."""
    if threads <= 1 or not loops or work < PAR_MIN_WORK: return False
    if im.smax((outer := min(loops, key=lambda r: r.attrs["axis"])).src[0]) < threads: return False
    return not any(r.attrs["kind"] == "serial" and r.attrs["axis"] < outer.attrs["axis"] for r in rngs)   # a serial loop runs on one thread
  nodes, rngs, loops, work = facts(sink)
  attrs, keep = dict(f.attrs), None
  if any(u.op is Ops.REDUCE and u.dtype.is_float for u in nodes): attrs["uop.fastmath"] = None
  # a loop to a symbolic size: choices are made for the size's largest value (rsize), laid out for it, and run to the
  # value read at run time; the choices that need static sizes (Winograd's tiles, split reduces, streamed stores) are
  # not made, nor a contraction with a symbolic size on a range inside another of its kind (see kernel_facts.extent)
  sym = any(im.cval(r.src[0]) is None for r in rngs)
  size = 2 * prod(rsize(r) for r in rngs)
  # a grouped convolution's products of single rows (each output channel its own): split into its groups when those
  # are products with rows and columns, unless the rows' k is short enough for plain loops (depthwise, SPLIT_MIN_K)
  if size >= MM_MIN_FLOPS and not sym and (g := split_groups(sink)) is not None and rows_and_cols(contraction(g)) and \
     not rows_and_cols(c0 := contraction(sink)) and not (c0 is not None and depthwise(c0, SPLIT_MIN_K)):
    f, (nodes, rngs, loops, work) = replace(f, roots=[sink := g]), facts(g)
  if (dot := host.INT8_DOT if dot is None else dot) and size >= MM_MIN_FLOPS and not sym and (c := int8_contraction(sink)) is not None \
     and len(c[5]) == 1 and not c[6]:
    # 8-bit products summed in int32: the CPU's int8 dot product on packed 8-bit operands (codegen.int8), tiled as f32
    # FMAs are at its i32 lanes
    _, vw, per = INT8_DOTS[dot]
    mr, nr = contraction_tiles(*(prod(map(rsize, x)) for x in c[3:6]), vw, caches, threads)[:2]
    # vpmaddwd does not accumulate: its product takes one more register beside the tile, B's vectors and A's broadcast
    while per == 2 and mr > 1 and mr * (nr // vw) + nr // vw + 2 > (32 if vw >= 16 else 16): mr -= 1
    attrs["uop.int8"] = (mr, nr, vw, per)
    if threads > 1: attrs["uop.threads"] = threads
    return replace(f, attrs=attrs)
  if (size >= MM_MIN_FLOPS and (c := contraction(f.roots[0])) is not None and not depthwise(c) and fits(c, sym) and not narrow_matvec(c)
      or size >= MM_MIN_FLOPS >> 4 and (g := column_reduce(f, loops)) is not None and (c := contraction(g.roots[0])) is not None
      and fits(c, sym) and (f := g)):
    _, _, _, I, J, K, _ = c
    if WINOGRAD and not sym and (w := winograd(c)) is not None and winograd_pays(tiles := winograd_tiles(c, w), size):
      tw = -(-rsize(w[5][0]) // 2)   # tiles a row
      products = lambda rows: contraction_tiles(rsize(w[2]), winograd_columns(rows, tw), rsize(w[3]), vec, caches, threads)   # Cout x columns x Cin
      mm = products(tiles // tw)
      if rb := winograd_block(c, w, mm[0], vec, caches, threads): mm = products(rb)   # (one block's rows of tiles)
      attrs["uop.winograd"] = (*mm, vec, rb)
    else:
      tiles = contraction_tiles(M := prod(map(rsize, I)), prod(map(rsize, J)), k := prod(map(rsize, K)), vec, caches, threads)
      # a strided convolution's image read in place (kernel_facts.direct_conv: the tile's rows output positions) where it
      # pays; not where the image already is a (small outputs: their rows packed)
      mr, _, kc, mc = tiles
      whole = not (k <= kc and -(-M // mr) * mr * k <= mc * kc)   # the im2col packed whole, not panel by panel
      if direct and DIRECT and (d := direct_conv(c)) is not None and d is not c and direct_pays(M, rsize(K[-1]), vec, whole):
        _, _, _, I, J, K, _ = d
        attrs["uop.direct_conv"] = None
        tiles = contraction_tiles(prod(map(rsize, I)), prod(map(rsize, J)), k, vec, caches, threads)
      attrs["uop.contraction"] = (*tiles, vec)
    if threads > 1: attrs["uop.threads"] = threads
  else:
    if not sym and (o := outer_reduce(f, loops, threads)) is not None:
      attrs.pop("uop.fastmath", None)
      nodes, rngs, loops, _ = facts(o.roots[0])   # (work stays the reduce's: its rows are a serial loop now, which facts leaves out)
      if threaded(): attrs["uop.threads"] = threads
      return replace(o, attrs=attrs)
    if (m := merge_loops(sink)) is not sink: f, (nodes, rngs, loops, work) = replace(f, roots=[sink := m]), facts(m)
    if long_sums(f, REDUCE_BLOCK): attrs["uop.reduce_block"] = REDUCE_BLOCK
    if threads > 1 and not loops and not sym and (sr := split_reduce(f, threads)) is not None:
      attrs["uop.split_reduce"], attrs["uop.threads"] = sr, threads
    elif threaded(): attrs["uop.threads"] = threads
    # a kept row shares the core's L2 with the row it is computed from and with the other thread's rows
    if keep := kept(f, nodes, loops, caches[1] // 4):
      attrs["uop.keep"] = keep[0]
      if keep[1] and row_lanes(f, vec): attrs["uop.row_lanes"] = vec   # (kept in the output: nothing streams it)
    elif w := lanes(f, vec): attrs["uop.lanes"] = w
    elif rl := reduce_lanes(f, vec): f, attrs["uop.reduce_lanes"] = rl
  # a row kept in the output is scaled there, from cache, by plain stores (streaming them measured slower); an output
  # big enough to stream keeps its rows in a per-thread scratch row instead (codegen.placement), its stores then
  # streamed: no read of the output's lines before they are written
  if not sym and "uop.row_lanes" not in attrs:
    if (inner := streaming_store(f, vec)) is not None:
      attrs["uop.nontemporal"] = vec
      if inner is min(loops, key=lambda r: r.attrs["axis"]): attrs["uop.grain"] = vec   # chunks start on a lane group
  return replace(f, attrs=attrs)

def rows_and_cols(c) -> bool:
  """Whether contraction c (or None) is a batch of products with rows and columns, not of single rows or columns."""
  return c is not None and bool(c[3]) and bool(c[4])

def narrow_matvec(c) -> bool:
  """A product of one row with operands read from data narrower than float32 (quantized blocks, float16 weights): its
  packed panels would be a float32 copy made on every call (they are not kept: contraction.reuse), so the row's dot
  products run as vector lanes over the data in place (an LLM's decode step: 10x faster than packing)."""
  _, a, b, I, _, _, _ = c
  return prod(map(rsize, I)) == 1 and any(u.op is Ops.LOAD and u.dtype.itemsize < 4 for x in (a, b) for u in x.toposort)

def fits(c, sym: bool) -> bool:
  """Whether codegen.contraction runs contraction c: each of its range kinds with a symbolic size only on its outermost."""
  return not sym or all(extent(rs) is not None for rs in c[3:])

ROW_VECTORS = (1, 16)   # a kept row of at least 1 vector of lanes and fewer than 16 (4 whole steps of codegen.lanes' 4) runs as lanes
def row_lanes(f: Func, vec: int) -> bool:
  """Whether a kept row (softmax's) runs as vector lanes (uop.row_lanes): the kernel's one f32 store steps by 1 with its
  innermost loop, of a static size n in ROW_VECTORS vectors of vec lanes. LLVM fully unrolls a row of a few of its vector
  steps and vectorizes it poorly (n = 17 to 64: 10-15x a long row's time per element); past that its loop of whole
  vectors runs the row as well as lanes do, and the kept row computes each exp once, not twice."""
  if (one := single_store(f.roots[0])) is None: return False
  _, st, inner = one
  lo, hi = (vec * v for v in ROW_VECTORS)
  return len(st.src[0].src) == 2 and lo <= (im.cval(inner.src[0]) or 0) < hi and lane_coef(st.src[0].src[1], inner, {}) == 1

WIDE_LANES, LONG_REDUCE = 8, 64   # see lanes
def lanes(f: Func, vec: int) -> int | None:
  """W for uop.lanes: the kernel's one f32 store steps by 1 with its innermost loop, and its value reduces inside that
  loop (pooling, a depthwise convolution): LLVM vectorizes no loop with a loop inside, so uop-lower-cpu runs W
  neighbouring iterations as vector lanes: vec or vec/2 where they divide the loop, else vec with the last group's lanes
  past its end masked off; as few as cover a short loop (at least 4)."""
  if (one := single_store(f.roots[0])) is None: return None
  _, st, inner = one
  if len(st.src[0].src) != 2 or not any(u.op is Ops.REDUCE and inner in u.src[0].toposort for u in st.toposort): return None
  if lane_coef(st.src[0].src[1], inner, {}) != 1 or (n := rsize(inner)) < 4: return None   # (a symbolic row stride too)
  if not lane_supported(st.src[1], inner): return None
  # a loop of a few whole vectors around a long reduce (a row times a matrix): all of it one group of lanes, so what the
  # reduce computes apart from the lanes is computed once a step, not once per vector, and its vectors' accumulators
  # are independent chains
  red = max((prod(map(rsize, u.src[1:])) for u in st.toposort if u.op is Ops.REDUCE and inner in u.src[0].toposort), default=0)
  if n % vec == 0 and n <= WIDE_LANES * vec and red >= LONG_REDUCE: return n
  w = vec if n % vec == 0 or n % (vec // 2) else vec // 2
  while w > 4 and w // 2 >= n: w //= 2
  return w

def reduce_lanes(f: Func, vec: int) -> tuple[Func, int] | None:
  """(kernel, W) for uop.reduce_lanes: the kernel's one f32 store reduces (add, max, min) over data its loads read
  contiguously along the reduce's innermost range, once split_ranges has run the index math's divisions by constants as
  ranges of their own, but decoded from narrower types or through such divisions (a quantized matrix-vector product's
  blocks: LLVM vectorizes neither) or read from a row of each output's own (a float matrix-vector product: LLVM's loop,
  one output at a time, runs at ~2/3 of lanes that prefetch the rows, codegen.lanes.STREAM_AHEAD), and no more than
  REDUCE_BLOCK terms per lane. That range then runs W lanes wide (vec, or vec/2 where only that divides it): W
  neighbouring bytes or elements per load, a vector accumulator."""
  if (one := single_store(f.roots[0], REDUCE_STORES)) is None or lane_reduce_of(one[1]) is None: return None
  sink = im.split_ranges(f.roots[0], lambda r: r.attrs.get("kind") not in ("loop", "serial"))
  end, st, _ = single_store(sink, REDUCE_STORES)
  red, outs = lane_reduce_of(st), {r for r in end.src[1:] if r.op is Ops.RANGE}
  def lanes_of(r: UOp) -> tuple[int, int] | None:
    """(W, size) when r can run as lanes: W divides its static size, its loads step by 0 or 1 (one by 1) and are
    decoded from narrower data or indexed through a split division, the source computes as vectors"""
    if (n := im.cval(r.src[0])) is None or (w := next((w for w in (vec, vec // 2) if w >= 4 and n % w == 0), None)) is None: return None
    dep = {r}
    for u in red.src[0].toposort:
      if any(s in dep for s in u.src): dep.add(u)
    coefs = [(u.src[0].src[1], lane_coef(u.src[0].src[1], r, {})) for u in dep if u.op is Ops.LOAD]   # (address, step)
    steps = {k for _, k in coefs}
    narrow = any(u.dtype not in (dtypes.float32, dtypes.index, dtypes.bool) for u in dep if u.op is not Ops.INDEX)
    rows = any(k == 1 and not outs.isdisjoint(at.toposort) for at, k in coefs)
    return (w, n) if 1 in steps and steps <= {0, 1} and (narrow or rows or sink is not f.roots[0]) and lane_supported(red.src[0], r) else None
  if not (cands := [(wn, r) for r in red.src[1:] if (wn := lanes_of(r)) is not None]): return None
  (w, _), r = max(cands, key=lambda c: c[0][1])
  if prod(map(rsize, red.src[1:])) > w * REDUCE_BLOCK: return None
  if r is not innermost(red):   # the lanes' range innermost: a fresh axis past the others (a reduce's order is free)
    r2 = UOp(Ops.RANGE, dtypes.index, r.src, attrs(axis=im.next_axis(sink), kind=r.attrs["kind"]))
    sink = im.with_ranges(sink, r, (r2,), r2)
  return replace(f, roots=[sink]), w

NT_MIN_BYTES = 1 << 24          # outputs at least this big (twice a typical L3 share) are streamed past the cache
def streaming_store(f: Func, vec: int) -> UOp | None:
  """The innermost loop range when the kernel is elementwise (no reduce) with one big f32 store whose address steps
  by 1 with that range, which vec divides: such a store can go out as nontemporal vector stores."""
  if (one := single_store(f.roots[0])) is None: return None
  end, st, inner = one
  nodes = st.toposort
  # a reduce computed once per outer iteration (a row's mean) is shared by the lanes; one inside the lane loop is not
  if any(u.op is Ops.REDUCE and inner in u.toposort for u in nodes) or len(st.src[0].src) != 2: return None   # gated store
  form = affine(st.src[0].src[1], {})
  if form is None or form.get(inner) != 1 or rsize(inner) % vec or 4 * prod(rsize(r) for r in end.src[1:]) < NT_MIN_BYTES: return None
  if any(v % vec for k, v in form.items() if k is not inner): return None   # every lane group starts vec-aligned
  return inner

def value_clamps(sink: UOp) -> dict[UOp, tuple[int, int, int, int]]:
  """Each Variable's value as a kernel reads it (uop-rangeify's var_loads: min(max(load(values[k]), lo), hi)) ->
  (the values buffer's argument, k, lo, hi)."""
  out = {}
  for u in sink.toposort:
    if u.op is Ops.MIN and (m := u.src[0]).op is Ops.MAX and (c := m.src[0]).op is Ops.CAST and (ld := c.src[0]).op is Ops.LOAD \
        and (ix := ld.src[0]).op is Ops.INDEX and ix.src[0].op is Ops.BUFFER and ld.dtype is dtypes.int64 and \
        None not in (k := im.cval(ix.src[1]), lo := im.cval(m.src[1]), hi := im.cval(u.src[1])):
      out[u] = (ix.src[0].attrs["slot"], k, lo, hi)
  return out

def choice(f: Func) -> dict:
  """What a variant is kept for: the kernel's choices but a contraction's MR, KC and MC (they follow the rows' and k's
  bounds, which the loops run to at run time)."""
  return {k: (v[1], v[4]) if k == "uop.contraction" else v for k, v in f.attrs.items()}

def one_trips(sink: UOp) -> UOp:
  """sink without its loops of one iteration (their index is 0)."""
  for r in [u for u in affine_simplify(sink).toposort if u.op is Ops.RANGE and u.attrs.get("kind") == "loop" and im.cval(u.src[0]) == 1]:
    sink = im.with_ranges(sink, r, (), im.const(0))
  return affine_simplify(sink)

MAX_VARIANTS = 2   # narrower copies of a kernel at most (the widest runs): each is compiled with the schedule
def variants(f: Func, threads: int, vec: int, caches: tuple[int, int, int], dot: str | None = None, direct: bool = True) -> list[Func]:
  """f optimized; a kernel of symbolic sizes also as copies for narrower bounds of the values it reads, one per run of
  bounds whose choices (`choice`) differ from the wider run's (a product too small to pack: plain loops; wider panels
  for fewer rows; no threads), optimized for that run's largest bound s (each value's bound min(s, its largest)) and
  marked uop.variant_of = f's name, uop.variant = (values argument, k, bound, ...). The runs are found by halving s
  from the largest value down, then bisecting where the choices change; at most MAX_VARIANTS are kept, those where
  the kind of kernel or its threads change first, then the widest (a value in a run not kept runs the next wider copy). The realize
  driver runs the narrowest copy whose bounds hold the values read at run time (realize.Variants): a small value runs
  what the heuristics choose for small sizes, not for the largest."""
  if not MAX_VARIANTS or not (clamps := value_clamps(f.roots[0])): return [optimize_kernel(f, threads, vec, caches, dot, direct)]
  memo: dict[int, tuple[Func, dict]] = {}
  def at(s: int) -> dict:   # f's choices for every value at most s
    if s not in memo:
      # a value whose bound is its least is that constant: its loops of one iteration go, so threads split the next
      # loop (the columns of x[:m] @ W at m = 1, as the static kernel's do) rather than the one row
      narrow = {m: im.const(lo) if s <= lo else m.replace(src=(m.src[0], im.const(min(hi, s)))) for m, (_, _, lo, hi) in clamps.items()}
      memo[s] = (g := optimize_kernel(replace(f, roots=[one_trips(f.roots[0].substitute(narrow))]), threads, vec, caches, dot, direct), choice(g))
    return memo[s][1]
  hi = top = max(hi for *_, hi in clamps.values())
  out, ends = [], []
  kind = lambda s: (frozenset(at(s)), at(s).get("uop.threads"))
  while hi > 1:
    if at(lo := hi // 2) == at(hi): hi = lo; continue
    # at(lo) differs from at(hi): where the kind of kernel or its threads change, the largest bound that differs (other
    # changes, a tile's width, are taken where halving met them: each bound tried is a whole analysis of the kernel)
    while hi - lo > 1 and kind(lo) != kind(hi):
      if at(mid := (lo + hi) // 2) == at(hi): hi = mid
      else: lo = mid
    ends.append(hi := lo)
  # the copies most worth a compile: where the kind of kernel or its threads change (waking one costs more than a small
  # value's work; plain loops on threads against packed tiles), then the widest
  wider = dict(zip(ends, [top, *ends]))
  for s in sorted(sorted(ends, key=lambda s: (kind(s) == kind(wider[s]), -s))[:MAX_VARIANTS], reverse=True):
    at_s = (next(iter(clamps.values()))[0], *(x for _, k, lo, hi in clamps.values() for x in (k, max(lo, min(hi, s)))))
    out.append(replace(memo[s][0], name=f"{f.name}_v{len(out) + 1}", attrs={**memo[s][0].attrs, "uop.variant_of": f.name, "uop.variant": at_s}))
  at(top)
  return [memo[top][0], *out]

# (kernel with the heuristic's attributes, beam width, threads, vec) -> the kernel with the fastest choices found by
# compiling and timing candidates: the device layer's search registers itself here (a pass cannot run kernels)
SEARCH = None

@register("uop-optimize", "Per-kernel CPU choices as kernel attributes: threads, fastmath reduces, split reductions, contraction tiles, "
          "nontemporal stores, vector lanes",
          threads=Option(int, 0, "threads for parallel loops (0: the machine's)"), vec=Option(int, 0, "f32 lanes per vector (0: the machine's)"),
          l2=Option(int, 0, "L2 cache bytes (0: the machine's)"), l3=Option(int, 0, "L3 cache bytes (0: the machine's)"),
          beam=Option(int, 0, "beam width of a timed search over each kernel's choices, cached on disk (0: heuristics only)"),
          int8=Option(str, "", f"the int8 dot product of uop.int8: {', '.join(INT8_DOTS)} or none ('': the machine's)"),
          direct=Option(int, 1, "strided convolutions as direct ones where they pay (uop.direct_conv; 0: an im2col packed)"))
def uop_optimize(funcs: list[Func], threads: int = 0, vec: int = 0, l2: int = 0, l3: int = 0, beam: int = 0, int8: str = "",
                 direct: int = 1) -> list[Func]:
  threads, vec, caches = threads or THREADS, vec or VEC_WIDTH, (CACHES[0], l2 or CACHES[1], l3 or CACHES[2])
  if beam < 0: raise PassError(f"uop-optimize: beam must be >= 0, got {beam}")
  if int8 not in ("", "none", *INT8_DOTS): raise PassError(f"uop-optimize: int8 must be one of {', '.join(INT8_DOTS)} or none, got {int8!r}")
  dot = "" if int8 == "none" else int8 or None
  if beam and SEARCH is None: raise PassError("uop-optimize: beam > 0 needs the CPU device's search (morok_mlir.device.search)")
  kernel = lambda f: "uop.kernel" in f.attrs and f.roots and f.roots[0].op is Ops.SINK
  funcs = [g for f in funcs for g in (variants(f, threads, vec, caches, dot, bool(direct)) if kernel(f) else (f,))]
  if not beam: return funcs
  return [SEARCH(f, beam, threads, vec) if kernel(f) else f for f in progress(funcs, f"BEAM={beam}", "function")]
