"""The contraction micro-kernel: a kernel uop-optimize marked `uop.contraction` (kernel_facts.contraction) as packed
operands and register-tiled vector FMAs (Contraction); Winograd's 16 products run on it too."""
from __future__ import annotations
from contextlib import ExitStack, contextmanager
from functools import reduce
from collections import Counter
from dataclasses import dataclass
from math import gcd, prod
from morok_mlir.ir.bridge import Func, arg_buffer, attr_text
from morok_mlir.core.dtype import dtypes
from morok_mlir.core.uop import UOp, attrs
from morok_mlir.dialects.ops import Ops
from morok_mlir.core import index_math as im
from morok_mlir.core.index_math import affine, affine_in, affine_simplify, next_axis
from morok_mlir.core.pattern import graph_rewrite
from morok_mlir.core.symbolic import SYMBOLIC
from morok_mlir.core.kernel_facts import ONE, contraction, direct_conv, extent, k_contiguous, k_rows, one_index, rsize, single_store, window
from morok_mlir.ir.registry import PassError
from morok_mlir.host import L1_GEOMETRY
from morok_mlir.codegen.lower_cpu import CPU, Lowerer, _axis, _int_attr, gated, lane_range, loop_range, lower_kernel, mem_type, parallel_info, sl
from morok_mlir.codegen.lanes import LaneLowerer, UNROLL_GROUPS, gate_lanes, lane_coef, lane_groups, reduce_groups
from morok_mlir.codegen.emitter import HI, LO, TID, Block, Emitter, arg, params

def _flips(u: UOp, k: UOp) -> list[int]:
  """The k where comparison u (x < y, one side k + c, the other a constant) turns: a concatenation's cut along k."""
  if (f := affine(u.src[0], {})) is not None and set(f) <= {1, k} and f.get(k) == 1 and (c := im.cval(u.src[1])) is not None:
    return [c - f.get(1, 0)]
  if (f := affine(u.src[1], {})) is not None and set(f) <= {1, k} and f.get(k) == 1 and (c := im.cval(u.src[0])) is not None:
    return [c - f.get(1, 0) + 1]
  return []

SET_FLOATS = 256   # f32 rows a multiple of this apart (1 KiB) map to the same L1 cache sets

def sizes(rs: list[UOp]) -> list[int]: return [rsize(r) for r in rs]   # the layout's: a symbolic size at its largest

# A's packed panels are read from memory on a model's every call where they are its weights (Winograd's filters, a
# convolution's as A): each k step prefetches, into L2, the panel A_AHEAD floats ahead (4 KiB: the next rows' panel
# comes in during this one's tiles), as it does B's next panel
A_AHEAD = 1024

def l1_conflicts(segments: list[list[int]], width: int) -> bool:
  """Whether a panel of B, rows of `width` f32 (each segment's at these elements of its own 64-byte aligned buffer),
  puts more lines in one L1 set than half its ways (host.L1_GEOMETRY; the tile's A panel and C need the rest), or more
  lines in L1 than that many a set (the segments' buffers lie anywhere): read in place, it would leave L1 between one
  tile's pass and the next (rows 3136 floats apart, a 56x56 image's channels, take 16 of the 64 sets' pairs; 512 rows
  of 784 exceed L1 itself), where a packed copy's lines are consecutive."""
  (sets, ways), total = L1_GEOMETRY, 0
  for rows in segments:
    use = Counter(ln % sets for r in rows for ln in range(r // 16, (r + width - 1) // 16 + 1))
    if max(use.values(), default=0) > ways // 2: return True
    total += sum(use.values())
  return total > sets * (ways // 2)

class Contraction:
  """A kernel uop-optimize marked `uop.contraction = [MR, NR, KC, MC, VW]` (see kernel_facts.contraction: the store is
  g(reduce-add over K of a*b), a indexed by loop ranges I and K, b by loop ranges J and K) as four phases, each a
  function over the kernel's buffers plus three scratch buffers, each run on threads over its outer loop:
    pack_a  Ap[M/MR][K][MR] = a    the operands' index math (folded to affine form) and gates run here, O(MK + KN);
    pack_b  Bp[N/NR][K][NR] = b    rows past M / columns past N are not written: they only reach C entries never read
    mm      C[M][N] = Ap x Bp in Goto's order: KC-deep slices of K; MC-row blocks of Ap (L2); NR-wide panels of Bp
            (their KC slice in L1); an MR x NR tile of VW-lane vector accumulators carried through the k loop with
            vector.fma. Threads split the more numerous of the Ap blocks and the Bp panels.
    epi     the original store, with the reduce replaced by a load of C[m][n]   (bias, relu, ... fuse here)
  Two variants of A: read in place (a row-major load, see in_place: no pack_a), or, when threads split A's row blocks
  (more of them than B panels: convolutions, tall operands), packed per block inside mm: each thread packs its
  MC-row block (all of K) into its own L2-sized buffer, picked by its chunk index, just before the tiles use it.
  A pack whose rows are neighbours in the operand's innermost row range, read a small fixed step apart (a convolution's
  image side: output columns), runs them as vector lanes (pack_lanes, LaneLowerer); other operands pack element-wise.
  A pack of one input buffer's values alone (weights) runs once per input: its phase result is kept (reuse).
  Symbolic sizes (only the outermost range of each of I, J, K and T may have one: kernel_facts.extent): the scratch and
  every index are laid out for the sizes' largest values, and the loops run to the values read at run time (M, N, K and
  the batch as `extent`s): mm's row blocks, panels and k slices up to them, its last ones partial; rows past M and
  columns past N are computed on whatever the scratch holds and never stored (the epilogue's gates are the sizes read
  at run time), so the same tiles serve every value."""
  def __init__(self, f: Func, name: str):
    self.f, self.name = f, name
    (red, a, b, I, J, K, T), (self.mr, self.nr, self.kc, self.mc, self.vw) = self.operands(f)
    self.op = red.attrs["op"]   # add: a product's sum; max or min: a column reduce (a is ones, see optimize.column_reduce)
    self.M, self.N, self.K, self.batch = (prod(sizes(rs)) for rs in (I, J, K, T))
    # the batch ranges each operand reads: a batch whose problems share an operand (a 1x1 convolution's weights, over the
    # image rows a transposing output makes the batch) packs it once per distinct problem of its own, not per problem
    self.uses = tuple(batch_uses(x, T) for x in (a, b))
    self.taps, self.pad = self.window_a(a, I, K) if "uop.direct_conv" in f.attrs else (None, None)   # a direct convolution
    self.rt = [extent(rs) for rs in (I, J, K, T)]   # the same, read at run time (constants where static)
    if None in self.rt: raise PassError(f"@{f.name}: uop.contraction with a symbolic size on a range inside another of its kind")
    self.Mp, self.Np = -(-self.M // self.mr) * self.mr, -(-self.N // self.nr) * self.nr
    n = len(f.args)
    self.direct_a = self.in_place(a, I, K, T, self.Np == self.nr, self.M * self.K <= self.COLS_MAX) if self.taps is None else \
      (n if self.pad else a.src[0].src[0].attrs["slot"], 0, 0, 0, 0)
    self.rows_a = self.row_major(a, K, T)
    self.ka = self.rows_a or self.K   # A's floats per row in its scratch
    # panels that depend on one buffer alone (weights, typically: B, or A where the weights hold the outer loop, as in
    # a convolution of one image): the runtime may keep them while that input lives (see reuse)
    (self.a_slot, self.a_keys), (self.b_slot, self.b_keys) = self.source(a, 0), self.source(b, 1)
    self.temps = set(f.attrs.get("uop.temps", ()))   # arguments the schedule writes (see uop-kernel-split)
    # A packed per MC-row block inside mm, when threads split row blocks (more of them than B panels: convolutions,
    # tall operands): each thread's block (all of K, half as many floats as MC x KC: half of L2) stays in L2 from packing to use.
    # Not a plain k-contiguous load of one buffer (weights, as in a convolution of one image): its own phase packs it,
    # and that phase's result is kept per input (reuse)
    t = _int_attr(f, "uop.threads", 1)
    mc_blk = max(self.mr, min(self.mc, self.mc * self.kc // (2 * self.K) // self.mr * self.mr))
    self.fused = self.direct_a is None and self.rows_a is None and not T and not self.sym and -(-self.Mp // mc_blk) > self.Np // self.nr and \
      not (self.a_slot is not None and k_contiguous(a, K[-1]))
    if self.fused: self.mc = mc_blk
    self.ranges, self.thr, self.t = (I, J, K, T), {k: v for k, v in f.attrs.items() if k in self.PASSED}, t
    self.fused_b, self.direct_b = self.b_route(a, b, J, K, T)
    self.layout()
    self.lane_of: dict[int, UOp] = {}   # id of a pack phase whose rows run as vector lanes -> its lane range
    if self.fused_b and (pb := self.pack_panel(b, J, self.args[n + 3])) is None: self.fused_b = False; self.layout()
    ap, bp, cp = (self.args[n + i] for i in (3 if self.fused else 0, 3 if self.fused_b else 1, 2))
    self.pack_a = self.pad_phase(a, I, K, ap) if self.pad else None if self.direct_a is not None else \
      self.pack_block(a, I, self.mr, ap) if self.fused else self.pack(a, I, self.mr, ap, False, self.Mp * self.ka, self.rows_a or 0)
    self.pack_b = pb if self.fused_b else None if self.direct_b else self.pack(b, J, self.nr, bp, True, self.Np * self.K)
    m, nn = im.linearize(I, sizes(I)), im.linearize(J, sizes(J))
    ci = im.add(im.mul(m, im.const(self.Np)), nn)
    if T: ci = im.add(im.mul(im.linearize(T, sizes(T)), im.const(self.Mp * self.Np)), ci)
    c = UOp(Ops.LOAD, dtypes.float32, (UOp(Ops.INDEX, dtypes.float32.ptr(), (cp, ci)),))
    sums = self.packed_sums(a, I, K, T, ap)
    epi = f.roots[0].substitute({red: c, **sums})
    if I and J and max(I + J, key=_axis) is I[-1]:
      # the output steps along A's last row range (NCHW conv with the image as A) while C steps along B's: the loops over
      # B's ranges move inside A's others, so a few rows of C stay in L1 while their columns go out, one at a time
      epi = epi.substitute({r: UOp(Ops.RANGE, dtypes.index, r.src, attrs(axis=1000 + i, kind="loop")) for i, r in enumerate(T + I[:-1] + J + I[-1:])})
    self.epi = Func(f"{name}_epi", self.args, [], [epi], {"uop.kernel": None, **self.thr})
    self.tile_rows = False   # see tile_epilogue
    self.epi_tile = self.tile_epilogue(red, a, b, I, J, T, cp, sums)

  def b_route(self, a: UOp, b: UOp, J: list[UOp], K: list[UOp], T: list[UOp]) -> tuple[bool, tuple | None]:
    """(fused_b, direct_b): how mm gets B's panels. Packed per panel inside mm (each thread one panel, all of K, one KC
    slice: the L1 block the tiles read, into its own buffer right before the tiles use it, so Bp never round-trips L2 or
    memory) when its pack is a gather that writes several times what it reads (a convolution's image, im2col: see
    expands), or when its rows, read in place, would not stay in L1 from one tile to the next (crowded, l1_conflicts)
    and B is the schedule's own buffer (an image: 256 -> 64 channels at 56x56 453 -> 374 us against packed whole,
    512 -> 128 at 28x28 397 -> 355); only where all of A's row blocks fit the L2 budget of one block (they are swept
    once per panel) and threads split the panels. Else B's rows are read in place where one block of A's rows sweeps
    each panel (b_in_place: direct_b), or B is packed whole before mm (crowded rows of an input, maybe a weight, whose
    whole pack is kept across calls: see reuse; uop.temps says which buffers the schedule writes)."""
    fits = not self.fused and not T and not self.sym and self.K <= self.kc and self.Mp * self.K <= self.mc * self.kc and \
      -(-self.Mp // self.mc) <= self.Np // self.nr
    self.crowded = False
    if fits and self.expands(b): return True, None
    segs = None if T or self.sym or self.taps or self.fused or self.Mp > self.mc else self.b_in_place(b, J, K, a is ONE)
    self.crowded = segs is not None and a is not ONE and l1_conflicts([[st + k * ks for k in range(lo, hi)] for lo, hi, _, st, ks in segs], self.nr)
    return (fits and self.b_slot in self.temps, None) if self.crowded else (False, segs)

  def row_major(self, a: UOp, K: list[UOp], T: list[UOp]) -> int | None:
    """pack_a's row stride where it writes A row-major: a batch's A (or a small one's, ROWS_MAX) computed from values
    that step along k (attention's exp(s - max)), stored along k as it computes it (rows a multiple of 1 KiB long get 64
    bytes more so they do not share cache sets); the tiles read its rows there. MiniLM's softmax(qk) @ v, pack + tiles a
    call: 25.8 + 18.8 ms in MR-row panels (each k step's values stored MR floats apart), 10.6 + 21.7 row-major. A plain
    load keeps its panels: they pack fast, and tiles over them ran faster (q @ k^T 15.4 against 18.7 ms)."""
    small = self.direct_a is None and self.M * self.K <= self.ROWS_MAX and self.Np <= 2 * self.vw
    if not (T or small) or len(K) != 1 or k_contiguous(a, K[0]) or not k_rows(a, K[0]): return None
    return self.K + 16 * (self.K % SET_FLOATS == 0)

  @property
  def sym(self) -> bool: return any(im.cval(x) is None for x in self.rt)   # a size read at run time

  @staticmethod
  def operands(f: Func) -> tuple[tuple, tuple]:
    """The contraction uop-optimize marked (for uop.direct_conv: with the image as a) and its tile attribute."""
    if (found := contraction(f.roots[0])) is None: raise PassError(f"@{f.name}: uop.contraction on a kernel that is not a contraction")
    if "uop.direct_conv" in f.attrs and (found := direct_conv(found)) is None:
      raise PassError(f"@{f.name}: uop.direct_conv on a contraction that is not a strided convolution's")
    if not (isinstance(c := f.attrs["uop.contraction"], tuple) and len(c) == 5 and all(type(x) is int and x > 0 for x in c)):
      raise PassError(f"@{f.name}: uop.contraction must be array<i64: MR, NR, KC, MC, VW> of positive sizes, got {attr_text(c)}")
    return found, c

  def window_a(self, a: UOp, I: list[UOp], K: list[UOp]) -> tuple[tuple, list[int] | None]:
    """((row form, k form), padded dims) of a direct convolution's image a (kernel_facts.window): row m's element for k
    step (k_0, ..., k_n) at c + sum coef_i * i(m) + sum coef_j * k_j, a row's positions i(m) its I ranges' (row-major);
    ungated, where a's buffer holds it; padded, in a copy (Ap's scratch, made by pad_phase) whose dims are K's, each a
    window partner's extent s*(n_i - 1) + n_k, so that the padding is stored once rather than tested per load. KC
    becomes whole windows: mm's loops over k nest as K's ranges do, its slices over the outermost."""
    self.kc = max(inner := prod(sizes(K[1:])), self.kc // inner * inner)
    form, pairs = window(a, I, K)
    if not pairs: return ((form.get(1, 0), tuple((rsize(i), form.get(i, 0)) for i in I)), tuple((rsize(k), form.get(k, 0)) for k in K)), None
    dims = [s * (rsize(i) - 1) + rsize(k) if k in pairs else rsize(k) for k in K for i, s in [pairs.get(k, (None, 0))]]
    strides = [prod(dims[j + 1:]) for j in range(len(dims))]
    coef = {i: strides[K.index(k)] * s for k, (i, s) in pairs.items()}
    return ((0, tuple((rsize(i), coef[i]) for i in I)), tuple(zip(sizes(K), strides))), dims

  def pad_phase(self, a: UOp, I: list[UOp], K: list[UOp], buf: UOp) -> Func:
    """The padded copy of a direct convolution's image (window_a): position (y_0, ..., y_n) holds a at I = 0 and K = y
    (a reads its image at s*i + k alone), its last dim's positions as vector lanes (the gates then masks)."""
    dims, lane = self.pad, lane_range(self.vw)
    ys = [loop_range(j, n) for j, n in enumerate(dims[:-1])]
    g = loop_range(len(ys), -(-dims[-1] // self.vw))
    x = im.add(im.mul(g, im.const(self.vw)), lane)
    val = affine_simplify(a.substitute({**{i: im.const(0) for i in I}, **dict(zip(K, ys + [x]))}))
    idx = UOp(Ops.INDEX, dtypes.float32.ptr(), (buf, im.linearize(ys + [x], dims)))
    if dims[-1] % self.vw: idx = gated(idx, UOp(Ops.CMPLT, dtypes.bool, (x, im.const(dims[-1]))))
    st = UOp(Ops.STORE, dtypes.void, (idx, val))
    end = UOp(Ops.END, dtypes.void, (st, *ys, g))
    f = Func(f"{self.name}_pack", self.args, [], [UOp(Ops.SINK, dtypes.void, (end,))], {"uop.kernel": None, **self.thr})
    if LaneLowerer.supports(val, lane): self.lane_of[id(f)] = lane
    else: raise PassError(f"@{self.f.name}: uop.direct_conv on an image its padded copy cannot read in vector lanes")
    return f

  def pack(self, x, rs, w, buf, k_first, per_batch, row=0):
    # loops over the batch, then the operand's own ranges (fresh axes: k outermost for b, whose rows are k; rows first
    # for a), so reads follow its layout; the packed position needs only lin // w and lin % w (row > 0: row-major,
    # rows `row` floats apart)
    I, J, K, _ = self.ranges
    x, tx = own_problems(x, self.uses[k_first])
    x = affine_simplify(x.substitute({r: im.const(0) for r in set(I) | set(J) if r not in rs}))  # mentioned, not used
    if not row and (lanes := self.pack_lanes(x, rs, w, buf, per_batch=per_batch, tx=tx)) is not None: return lanes
    if row and (lanes := self.pack_row_lanes(x, rs, buf, per_batch, row, tx)) is not None: return lanes
    order = tx + ((K + rs) if k_first else (rs + K))
    new = {r: UOp(Ops.RANGE, dtypes.index, r.src, attrs(axis=1000 + i, kind="loop")) for i, r in enumerate(order)}
    loops = list(new.values())
    lin, kl = im.linearize([new[r] for r in rs], sizes(rs)), im.linearize([new[r] for r in K], sizes(K))
    if ((c := im.cval(n := extent(rs))) is None or c % w) and not row:
      # rows to a symbolic count or not a whole number of panels: all panels' rows written, those past the last
      # repeating it (they reach only C's pad rows or columns; left unwritten, they would be whatever the scratch held,
      # denormals and all, in the FMAs: a denormal operand costs an Intel core a microcode assist per instruction)
      lin = UOp(Ops.RANGE, dtypes.index, (im.mul(im.idiv(im.add(n, im.const(w - 1)), w), im.const(w)),), new[rs[0]].arg)
      loops = [lin if u is new[rs[0]] else u for u in loops if not any(u is new[r] for r in rs[1:])]
      new.update(zip(rs, im.unravel(UOp(Ops.MIN, dtypes.index, (lin, im.sub(n, im.const(1)))), sizes(rs))))
    idx = self.packed_at(lin, kl, w, row)
    if tx: idx = im.add(im.mul(im.linearize([new[r] for r in tx], sizes(tx)), im.const(per_batch)), idx)
    st = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, dtypes.float32.ptr(), (buf, idx)), x.substitute(new)))
    return Func(f"{self.name}_pack", self.args, [], [UOp(Ops.SINK, dtypes.void, (UOp(Ops.END, dtypes.void, (st, *loops)),))],
                {"uop.kernel": None, **self.thr})

  def pack_row_lanes(self, x, rs, buf, per_batch, row, T):
    # a row-major A (attention's softmax rows), with k as vector lanes: whole steps of VW-lane groups, then the groups
    # past them, the last one's lanes past K gated off (lane_groups); the row's own reduces over k (max, sum of exps) so
    # too. K static or symbolic alike: LLVM unrolls a static row fully or vectorizes it with scalar remainders. Not where
    # K (a symbolic K's bound, a copy's for narrower bounds) holds no whole step: short rows run as well in plain loops,
    # without the masked groups' tests
    I, J, K, _ = self.ranges
    if len(K) != 1 or rsize(K[0]) < self.vw * UNROLL_GROUPS: return None
    new = {r: UOp(Ops.RANGE, dtypes.index, r.src, attrs(axis=1000 + i, kind="loop")) for i, r in enumerate(T + rs)}
    lane, ends = lane_range(self.vw), []
    at = self.packed_at(im.linearize([new[r] for r in rs], sizes(rs)), K[0], self.mr, row)
    if T: at = im.add(im.mul(im.linearize([new[r] for r in T], sizes(T)), im.const(per_batch)), at)
    st = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, dtypes.float32.ptr(), (buf, at)), reduce_groups(x.substitute(new), lane)))
    for g, pos, cut in lane_groups(K[0], lane, 1000 + len(new), "loop", UNROLL_GROUPS):
      if (part := gate_lanes(st.substitute({K[0]: pos}), lane, cut)) is None or not LaneLowerer.supports(part.src[1], lane): return None
      ends.append(UOp(Ops.END, dtypes.void, (affine_simplify(part), *g)))
    body = ends[0] if len(ends) == 1 else UOp(Ops.GROUP, dtypes.void, tuple(ends))
    f = Func(f"{self.name}_pack", self.args, [], [UOp(Ops.SINK, dtypes.void, (UOp(Ops.END, dtypes.void, (body, *new.values())),))],
             {"uop.kernel": None, **self.thr})
    self.lane_of[id(f)] = lane
    return f

  def pack_block(self, x, rs, w, buf):
    # per block: loops over panel p (from the caller's %lo to %hi), lane l, k; row p*w + l (clamped to the last:
    # lanes past M repeat it, reaching only C's pad rows) at the block-local position (p mod P)*K*w + k*w + l
    _, J, K, _ = self.ranges
    x = affine_simplify(x.substitute({r: im.const(0) for r in set(J) if r not in rs}))
    n_rows, per = prod(sizes(rs)), self.mc // w
    if (lanes := self.pack_lanes(x, rs, w, buf, per=per)) is not None: return lanes
    p, l, ks = loop_range(0, -(-n_rows // w)), loop_range(1, w), {r: loop_range(2 + i, s) for i, (r, s) in enumerate(zip(K, sizes(K)))}
    row = UOp(Ops.MIN, dtypes.index, (im.add(im.mul(p, im.const(w)), l), im.const(n_rows - 1)))
    kl = im.linearize([ks[r] for r in K], sizes(K))
    idx = im.add(im.add(im.mul(im.mod(p, per), im.const(self.K * w)), im.mul(kl, im.const(w))), l)
    val = affine_simplify(x.substitute({**dict(zip(rs, im.unravel(row, sizes(rs)))), **ks}))
    st = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, dtypes.float32.ptr(), (buf, idx)), val))
    return Func(f"{self.name}_pack", self.args, [], [UOp(Ops.SINK, dtypes.void, (UOp(Ops.END, dtypes.void, (st, p, l, *ks.values())),))],
                {"uop.kernel": None, "uop.threads": 1})   # threads: takes the panel range (%lo, %hi)

  def layout(self):
    # Ap, Bp, C; a batch (over T) of each, one after the other; then one A block or one B panel per thread (fused, fused_b)
    ba, bb = (problems(u) for u in self.uses)
    self.scratch = [prod(self.pad) if self.pad else ba * self.Mp * self.ka if self.direct_a is None and not self.fused else 1,
                    bb * self.Np * self.K if not self.fused_b and not self.direct_b else 1, self.batch * self.Mp * self.Np]
    self.scratch += [self.mc * self.K] * self.t if self.fused else [self.nr * self.K] * self.t if self.fused_b else []
    n = len(self.f.args)
    self.args = list(self.f.args) + [arg_buffer(n + j, dtypes.float32.ptr(x)) for j, x in enumerate(self.scratch)]

  def expands(self, b: UOp) -> bool:
    """Whether B's pack writes at least twice the elements of the buffers it reads: an im2col of a convolution's image
    (K = C_in*KH*KW taps per output pixel), whose panels are a function of the call's input, worth packing only where
    they are used. Not weights (each element packed once: kept across calls, see reuse)."""
    loads = [u for u in affine_simplify(b).toposort if u.op is Ops.LOAD]
    srcs = {u.src[0].src[0] for u in loads}
    if not (J := self.ranges[1]) or any(s.op is not Ops.BUFFER for s in srcs): return False
    # strided reads along the output columns only: a unit-step panel (a stride-1 convolution) packed inside mm measured
    # twice its phase's time (16->16 channels 3x3 at 55x55, 1 thread: 70 against 37 us; its tiles unchanged)
    return self.N * self.K >= 2 * sum(s.dtype.size for s in srcs) and all((lane_coef(u.src[0].src[1], J[-1], {}) or 0) >= 2 for u in loads)

  def pack_panel(self, x, rs, buf):
    # one NR-row panel of B (the caller's %lo .. %lo+1) in vector lanes, at the buffer's start
    I, _, _, _ = self.ranges
    return self.pack_lanes(affine_simplify(x.substitute({r: im.const(0) for r in I})), rs, self.nr, buf, per=1)

  def pack_lanes(self, x, rs, w, buf, per=0, per_batch=0, tx=()):
    # panels whose rows are neighbours in the innermost row range (a convolution's output columns) as vector lanes
    # (LaneLowerer): loops over the batch, panel p, k and lane group v (L = VW rows of a w-row panel), the rows
    # unravelled once per group. Each k then reads L elements a fixed step apart and writes L consecutive ones.
    # Where L does not divide that range (size S), a group spans pieces of up to J + 1 runs: each piece's loads are
    # gated to its lanes (the others may point anywhere), and rows past the last (lanes of the last panel, reaching
    # only C's pad rows) read the last row. per: panels per block (a block packed inside mm), else the whole operand
    _, _, K, _ = self.ranges
    T = tx
    if not rs or self.sym: return None
    sz = sizes(rs)
    S, n_rows, L = sz[-1], prod(sz), self.vw if w % self.vw == 0 else w
    J = (S - gcd(L, S) + L - 1) // S   # the most row boundaries a group crosses
    ts = [loop_range(i, n) for i, n in enumerate(sizes(T) if not per else [])]
    p, ks = loop_range(len(ts), -(-n_rows // w)), {r: loop_range(len(ts) + 1 + i, n) for i, (r, n) in enumerate(zip(K, sizes(K)))}
    v = loop_range(len(ts) + 1 + len(K), w // L) if w > L else im.const(0)   # innermost: a k row's panel is read once
    lane = lane_range(L)
    row0 = im.add(im.mul(p, im.const(w)), im.mul(v, im.const(L)))
    r0, col, val = im.idiv(row0, S), im.add(im.mod(row0, S), lane), None
    clamp = J or n_rows % w
    sub = {**dict(zip(T, ts)), **ks}
    for jj in range(J + 1):
      row = UOp(Ops.MIN, dtypes.index, (im.add(r0, im.const(jj)), im.const(n_rows // S - 1))) if clamp else r0
      xj = affine_simplify(x.substitute({**dict(zip(rs, (*im.unravel(row, sz[:-1]), im.sub(col, im.const(jj * S))))), **sub}))
      if (mine := im.in_bounds(col, jj * S, (jj + 1) * S) if J else None) is False: continue
      if mine is not None:
        xj = xj.substitute({u.src[0]: gated(u.src[0], mine) for u in xj.toposort if u.op is Ops.LOAD and lane in u.src[0].toposort})
      val = xj if val is None or mine is None else UOp(Ops.WHERE, dtypes.float32, (mine, xj, val))
    if not LaneLowerer.supports(val, lane): return None
    kl = im.linearize([ks[r] for r in K], sizes(K))
    idx = im.add(im.add(im.mul(im.mod(p, per) if per else p, im.const(self.K * w)), im.mul(kl, im.const(w))), im.add(im.mul(v, im.const(L)), lane))
    if ts: idx = im.add(im.mul(im.linearize(ts, sizes(T)), im.const(per_batch)), idx)
    st = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, dtypes.float32.ptr(), (buf, idx)), val))
    loops = [*ts, p, *ks.values(), *([v] if w > L else [])]
    f = Func(f"{self.name}_pack", self.args, [], [UOp(Ops.SINK, dtypes.void, (UOp(Ops.END, dtypes.void, (st, *loops)),))],
             {"uop.kernel": None, **({"uop.threads": 1} if per else self.thr)})
    self.lane_of[id(f)] = lane
    return f

  def tile_epilogue(self, red: UOp, a: UOp, b: UOp, I: list[UOp], J: list[UOp], T: list[UOp], cp: UOp, sums: dict) -> Func | None:
    """The epilogue as a function of tiles (outer range t = (bt * MB + ib) * NB + jb, from %lo to %hi), which mm calls on each tile
    once its last k slice is done, with the tile on mm's stack (argument `tile`): no pass over C afterwards, and C takes
    scratch only when K takes several slices. The tile's columns run as vector lanes (LaneLowerer) when every index
    steps along J as one contiguous run (row-major matrices, NCHW outputs): idx(I, J) = idx(I, 0) + s * n, n the linear
    column, s 1 for the store (0 <= s <= LANE_MAX_STEP for loads); else its rows, when the indices step so along I (an
    output that steps along A's rows: a convolution with the image as A), from the tile stored transposed (tile_rows).
    None (the separate epilogue phase) for anything else: a reduce in the epilogue (but A's packed row sums), a value that uses the lane side other
    than through an index, a gate on it, a store that is not one f32 store over the loops, or a buffer that both the
    epilogue writes and the operands read (mm reads A while it stores the tiles)."""
    if (one := single_store(self.f.roots[0])) is None: return None
    end, st, _ = one
    if set(end.src[1:]) != set(I + J + T) or st.src[0].op is not Ops.INDEX: return None
    cload = UOp(Ops.LOAD, dtypes.float32, (UOp(Ops.INDEX, dtypes.float32.ptr(), (cp, im.const(0))),))   # the tile's element, placed below
    out, nodes = st.src[0].src[0], (st := st.substitute({red: cload, **sums})).toposort
    # a reduce in the epilogue: only the sums of A's packed panels (packed_sums: attention's softmax row sums)
    if out.op is not Ops.BUFFER or out.dtype.base is not dtypes.float32: return None
    if any(u.op is Ops.REDUCE and u not in sums.values() for u in nodes): return None
    if any(u.op is Ops.LOAD and u.src[0].src[0] is out for x in (a, b) for u in x.toposort): return None
    tile = arg_buffer(len(self.args), dtypes.float32.ptr(self.mr * self.nr))
    for rows in (False, True):
      if (f := self._tile_epilogue(st, nodes, cload, tile, I, J, T, rows)) is None: continue
      if self.K <= self.kc:   # C is never stored: no scratch for it (the phases share the args list; the epilogue has its own)
        self.scratch[2] = 1
        self.args[cp.attrs["slot"]] = f.args[cp.attrs["slot"]] = arg_buffer(cp.attrs["slot"], dtypes.float32.ptr(1))
      self.tile_rows = rows
      return f
    return None

  def _tile_epilogue(self, st: UOp, nodes: list[UOp], cload: UOp, tile: UOp, I: list[UOp], J: list[UOp], T: list[UOp], rows: bool) -> Func | None:
    """tile_epilogue with lanes along the tile's columns (n; the tile row-major), or its rows (m; the tile transposed).
    A batch's tiles follow each other: t = (bt * MB + ib) * NB + jb."""
    nb, nv, per = self.Np // self.nr, self.nr // self.vw, (self.Mp // self.mr) * (self.Np // self.nr)
    lane = lane_range(self.mr if rows else self.vw)
    t = loop_range(0, self.batch * per)
    tb = im.mod(t, per) if self.batch > 1 else t
    m0, n0 = im.mul(im.idiv(tb, nb), im.const(self.mr)), im.mul(im.mod(tb, nb), im.const(self.nr))
    if rows:
      c = loop_range(1, self.nr)
      loops, m, n, at = [t, c], im.add(m0, lane), im.add(n0, c), im.add(im.mul(c, im.const(self.mr)), lane)
    else:
      r, v = loop_range(1, self.mr), loop_range(2, nv) if nv > 1 else im.const(0)
      col = im.add(im.mul(v, im.const(self.vw)), lane)
      loops, m, n, at = [t, r, *([v] if nv > 1 else [])], im.add(m0, r), im.add(n0, col), im.add(im.mul(r, im.const(self.nr)), col)
    # the lane side (J for columns, I for rows): indices must step along it as one run; lanes past its edge read nothing.
    # The scalar side: its positions past the edge (the last tile's) are clamped: never stored
    # (a size read at run time where symbolic): the edge a side's positions may pass, None where they never do
    rs, cs = (I, m, self.rt[0] if self.Mp != self.M or im.cval(self.rt[0]) is None else None), \
             (J, n, self.rt[1] if self.Np != self.N or im.cval(self.rt[1]) is None else None)
    (L, lin, ln), (S, slin, sn) = (rs, cs) if rows else (cs, rs)
    scal = dict(zip(S, im.unravel(UOp(Ops.MIN, dtypes.index, (slin, im.sub(sn, im.const(1)))) if sn is not None else slin, sizes(S))))
    scal.update(zip(T, im.unravel(im.idiv(t, per), sizes(T))))
    cut = UOp(Ops.CMPLT, dtypes.bool, (lin, ln)) if ln is not None else None
    # the first lane's position on the lane side, and how many lanes a vector holds there (they never straddle a run)
    Ls, szL, base, W = set(L), sizes(L), m0 if rows else im.add(n0, im.mul(v, im.const(self.vw))), self.mr if rows else self.vw
    sub, memo = {cload: UOp(Ops.LOAD, dtypes.float32, (UOp(Ops.INDEX, dtypes.float32.ptr(), (tile, at)),))}, {}
    for u in nodes:
      if u.op is not Ops.INDEX or u is cload.src[0]: continue
      if len(u.src) > 2 and Ls & set(u.src[2].toposort): return None
      x, lanes = u.src[1], Ls & set(u.src[1].toposort)
      if lanes:
        if (form := affine_in(x, Ls, memo)) is None or (s := form.get(L[-1], 0)) < 0: return None
        # L[i:] step as one run of stride s; the outer L[:i] (a batch of images, each output one run) may step apart,
        # where the run's length is a multiple of W: a vector's lanes then share the outer position, the first lane's
        i = next((i for i in range(len(L)) if [form.get(j, 0) for j in L[i:]] == [s * prod(szL[k + 1:]) for k in range(i, len(L))]
                  and (i == 0 or prod(szL[i:]) % W == 0)), None)
        if i is None: return None
        if i == 0: x = im.add(affine_simplify(x.substitute({j: im.const(0) for j in L})), im.mul(lin, im.const(s)))
        else:
          run = prod(szL[i:])
          outer = dict(zip(L[:i], im.unravel(im.idiv(base, run), szL[:i])))
          x = im.add(affine_simplify(x.substitute({**outer, **{j: im.const(0) for j in L[i:]}})),
                     im.mul(im.add(im.mod(base, run), lane), im.const(s)))
      ix = UOp(Ops.INDEX, u.dtype, (u.src[0], x.substitute(scal), *(g.substitute(scal) for g in u.src[2:])))
      sub[u] = gated(ix, cut) if lanes and u is not st.src[0] else ix
    idx, val = sub[st.src[0]], st.src[1].substitute({**sub, **scal})
    if Ls & set(val.toposort) or lane_coef(idx.src[1], lane, {}) != 1 or not LaneLowerer.supports(val, lane): return None
    idx = gated(idx, im.and_(UOp(Ops.CMPLT, dtypes.bool, (slin, sn)) if sn is not None else None, cut))
    body = UOp(Ops.END, dtypes.void, (UOp(Ops.STORE, dtypes.void, (idx, val), loc=st.loc), *loops))
    f = Func(f"{self.name}_epi", self.args + [tile], [], [UOp(Ops.SINK, dtypes.void, (body,))],
             {"uop.kernel": None, "uop.threads": 1, **{k: v for k, v in self.f.attrs.items() if k == "uop.fastmath"}})   # the sums reassociate
    self.lane_of[id(f)] = lane
    return f

  def packed_sums(self, a: UOp, I: list[UOp], K: list[UOp], T: list[UOp], ap: UOp) -> dict[UOp, UOp]:
    """The epilogue's sums of a itself over ranges like K (attention's softmax row sums of the exps its product
    packed), each replaced by a sum of A's packed panels: what pack_a computed is not computed again."""
    if self.pack_a is None or self.fused or self.pad: return {}
    out, lin = {}, im.linearize(I, sizes(I))
    for u in self.f.roots[0].toposort:
      if u.op is not Ops.REDUCE or u.attrs.get("op") != "add" or len(u.src) != len(K) + 1 or u.dtype is not dtypes.float32: continue
      K2 = sorted(u.src[1:], key=_axis)
      if [r.src[0] for r in K2] != [r.src[0] for r in K] or a.substitute(dict(zip(K, K2))) is not u.src[0]: continue
      idx = self.packed_at(lin, im.linearize(K2, sizes(K)), self.mr, self.rows_a or 0)
      if ua := self.uses[0]:
        own = [im.mod(r, d) if mod else im.idiv(r, d) for r, d, mod in ua]
        idx = im.add(im.mul(im.linearize(own, [problems([u]) for u in ua]), im.const(self.Mp * self.ka)), idx)
      out[u] = UOp(Ops.REDUCE, u.dtype, (UOp(Ops.LOAD, dtypes.float32, (UOp(Ops.INDEX, dtypes.float32.ptr(), (ap, idx)),)), *u.src[1:]), u.arg, u.loc)
    return out

  def packed_at(self, lin: UOp, kl: UOp, w: int, row: int = 0) -> UOp:
    """Where an operand's row lin, k kl goes in its scratch: w-row panels (each k's w values together), or row-major
    with rows `row` floats apart."""
    if row: return im.add(im.mul(lin, im.const(row)), kl)
    return im.add(im.add(im.mul(im.idiv(lin, w), im.const(self.K * w)), im.mul(kl, im.const(w))), im.mod(lin, w))

  COLS_MAX = 1 << 15   # floats of a column-major A (per problem) read in place: it stays in L2
  # floats of a computed A (relu(h): its values along k read memory in sequence) packed row-major with k as vector lanes
  # for the tiles to read in place, where not batched, within L2 and B is one or two vectors wide: MR-row panels would
  # pack it element by element, which costs more than the tiles' few FMAs per element (wider B: those pay it back)
  ROWS_MAX = 1 << 17
  @staticmethod
  def in_place(a: UOp, I: list[UOp], K: list[UOp], T: list[UOp], once: bool = False, small: bool = False) -> tuple[int, ...] | None:
    """(buffer slot, offset, row stride, k stride, batch stride) when a is an ungated f32 load at offset + row*stride +
    k*kstride + t*tstride (row: the linear index of its row ranges, as C's), one k range and at most one batch range:
    the micro-kernel then reads A where it is instead of copying it into MR-row panels first. Row-major (kstride 1, one
    row range, no batch): each row a sequential stream in k. Column-major (stride 1: an NCHW convolution's image, its
    groups the batch): each k's MR rows are neighbours, and the K rows a tile reads are far apart: only for a `small` A
    (one problem's stays in cache between the tiles and B's panels; a grouped convolution's packs were a third of its
    time, shufflenet's). `once`: B is one panel, so the tiles read A once (packing it would read it twice)."""
    if a.op is not Ops.LOAD or a.dtype is not dtypes.float32 or not I or len(K) != 1 or len(T) > 1: return None
    idx = a.src[0]
    if idx.op is not Ops.INDEX or len(idx.src) != 2 or idx.src[0].op is not Ops.BUFFER: return None
    form = affine(idx.src[1], {})
    if form is None or set(form) - {1, *I, K[0], *T} or any(form.get(r, 0) < 0 for r in T): return None
    if not one_index(form, I): return None
    row, ks, ts = form.get(I[-1], 0), form.get(K[0], 0), form.get(T[0], 0) if T else 0
    if row == 1 and ks > 1 and small: return idx.src[0].attrs["slot"], form.get(1, 0), 1, ks, ts
    # rows a multiple of 1 KiB apart share cache sets: the tile's 6 streams then evict each other (2048^3: 7% slower)
    if T or len(I) > 1 or ks != 1 or row <= 0 or row % SET_FLOATS == 0 and not once: return None
    return idx.src[0].attrs["slot"], form.get(1, 0), row, 1, 0

  @staticmethod
  def b_in_place(b: UOp, J: list[UOp], K: list[UOp], column: bool = False) -> tuple[tuple[int, int, int, int, int], ...] | None:
    """B's rows as segments (k from, k to, buffer slot, start, k stride) when over each stretch of k that its gates hold
    constant (a concatenation along k: k < c picks one input, the rest another) b is an ungated f32 load at start +
    k*stride + n, n the linear index of its column ranges (an NCHW image in a 1x1 convolution: a channel's positions in
    sequence), one k range: mm then loads each panel's k rows where they are, the last panel's columns past N masked
    off, instead of copying B into panels first. Taken where one block of A's rows sweeps each panel (few output
    channels): a panel is then read from memory once a call whether packed or not, so its pack, a copy of the image, is
    all it would add. Only where the columns span several ranges (an image's rows and columns): a matrix's one column
    range is a product's weights as often (x @ W), whose panels are packed once and kept while W lives; or where A is
    ones (column: a column reduce, optimize.column_reduce), whose B is the data reduced, read once whatever it is."""
    if b.dtype is not dtypes.float32 or len(J) < 2 - column or len(K) != 1: return None
    k, n = K[0], rsize(K[0])
    cuts = sorted({c for u in b.toposort if u.op is Ops.CMPLT for c in _flips(u, k) if 0 < c < n})
    segs, axis = [], next_axis(b)
    for lo, hi in zip([0, *cuts], [*cuts, n]):
      r = UOp(Ops.RANGE, dtypes.index, (im.const(hi - lo),), attrs(axis=axis, kind="reduce"))
      x = graph_rewrite(b.substitute({k: im.add(r, im.const(lo))}), SYMBOLIC) if cuts else b
      if (seg := Contraction._rows(x, J, r if cuts else k)) is None: return None
      slot, start, ks = seg
      segs.append((lo, hi, slot, start - lo * ks, ks))
    return tuple(segs)

  @staticmethod
  def _rows(x: UOp, J: list[UOp], k: UOp) -> tuple[int, int, int] | None:
    """(slot, start, k stride) where x is an ungated f32 load (its gate, if any, true) at start + k*stride + n (n: J's
    linear index)."""
    if x.op is not Ops.LOAD or (idx := x.src[0]).op is not Ops.INDEX or idx.src[0].op is not Ops.BUFFER: return None
    if len(idx.src) != 2 and not (len(idx.src) == 3 and im.cval(idx.src[2]) is True): return None
    form = affine(idx.src[1], {})
    if form is None or set(form) - {1, *J, k} or form.get(J[-1]) != 1 or (ks := form.get(k, 0)) < 1: return None
    if not one_index(form, J): return None
    return idx.src[0].attrs["slot"], form.get(1, 0), ks

  PASSED = ("uop.threads", "uop.fastmath")   # the kernel's choices its phases take (fastmath: epilogue reduces vectorize)
  # flops / 16 below which mm runs on one thread: a detector's 1x1 convolutions of 1.6 M multiply-adds (32 -> 32 channels
  # at 40x40) ran 30 us on one thread, 18 on two (the hand-off ~4 us)
  PAR_MIN = 1 << 16
  # elements below which a pack or the epilogue runs on one thread: at 2^18 a convolution's im2col pack (14-17% of the
  # kernel) ran on one of two threads in most of resnet50's layers; a hand-off costs ~4 us, 2^15 elements ~10-20
  PACK_PAR_MIN = 1 << 15
  def phases(self) -> list[tuple[str, tuple[int, int, int] | None]]:
    t = _int_attr(self.f, "uop.threads", 1)
    par = lambda f, work: (parallel_info(f)[0], t if work >= self.PACK_PAR_MIN else 1, 1) if t > 1 else None
    nmm = t if self.micro().split_sym else self.batch if self.batch > 1 else max(self.Np // self.nr, -(-self.Mp // self.mc))
    mm_par = (nmm, t if self.batch * self.M * self.N * self.K >= 8 * self.PAR_MIN else 1, 1, *((1,) if self.fused or self.fused_b else ())) \
      if t > 1 else None
    bt, (ba, bb) = self.batch, (problems(u) for u in self.uses)
    return [*([(f"{self.name}_pack_a", par(self.pack_a, ba * self.M * self.K))] if self.pack_a is not None and not self.fused else []),
            *([(f"{self.name}_pack_b", par(self.pack_b, bb * self.N * self.K))] if self.pack_b is not None and not self.fused_b else []),
            (f"{self.name}_mm", mm_par),
            *([] if self.epi_tile else [(f"{self.name}_epi", par(self.epi, bt * self.M * self.N))])]

  KEY_MAX = 64   # int64 elements a kept pack's keys may hold (the symbolic sizes' values: one per Variable)
  def source(self, x: UOp, own: int) -> tuple[int | None, tuple[int, ...]]:
    """(slot, keys) of operand x's pack (own: 0 for a, 1 for b) when it reads one input buffer's data, and besides only
    int64 arguments of at most KEY_MAX elements, keys: the symbolic sizes' values, read by x or by the extents its
    loops run to (its own rows, k, the batch); else (None, ())."""
    loads = lambda e: {u.src[0].src[0] for u in e.toposort if u.op is Ops.LOAD}
    keys = sorted({b for e in (x, self.rt[own], *self.rt[2:]) for b in loads(e) if b.op is Ops.BUFFER and b.dtype.base is dtypes.int64
                   and b.dtype.size <= self.KEY_MAX}, key=lambda b: b.attrs["slot"])
    if len(srcs := loads(x) - set(keys)) != 1 or (src := next(iter(srcs))).op is not Ops.BUFFER: return None, ()
    return src.attrs["slot"], tuple(b.attrs["slot"] for b in keys)

  def reuse(self) -> list[tuple[int, int, int, tuple[int, ...]]]:
    """(phase, argument, scratch, keys) of pack_a (a phase of its own) and pack_b when their panels are a function of one
    input buffer of 4-byte elements and of the contents of the small int64 arguments keys (the symbolic sizes' values,
    read at run time: a kept pack holds for the values it was made at). Not of narrower data (quantized blocks,
    float16): their panels would keep a float32 copy of weights that are narrow to save memory (an LLM's: its resident
    memory is to stay near its file's size)."""
    names = [e for e, _ in self.phases()]
    return [(names.index(f"{self.name}_pack_{x}"), slot, s, keys) for x, slot, s, keys in
            (("a", self.a_slot, 0, self.a_keys), ("b", self.b_slot, 1, self.b_keys))
            if slot is not None and f"{self.name}_pack_{x}" in names and self.f.args[slot].dtype.base.itemsize >= 4]

  def text(self) -> str:
    # a pack without lanes (a weight's panels, mostly: packed once and kept) nests loops over small constant sizes (a 3x3
    # filter's taps, a panel's rows): LLVM unrolled them whole into bodies of hundreds of loads and stores, whose alias
    # analysis (pairs of accesses) took most of a kernel's compile time; unrolled, they would run no faster
    low = lambda f, name: lower_kernel(f, name, LaneLowerer(f, self.lane_of[id(f)]) if id(f) in self.lane_of
                                       else Lowerer(f, CPU(f, unroll=False)))
    return ((low(self.pack_a, f"{self.name}_pack_a") if self.pack_a is not None else "")
            + (low(self.pack_b, f"{self.name}_pack_b") if self.pack_b is not None else "")
            + mm(self.micro()) + (self.tile_phases() if self.epi_tile else lower_kernel(self.epi, f"{self.name}_epi")))
  PF_MIN_K, PF_MIN_BYTES = 128, 1 << 20   # see prefetch
  @property
  def prefetch(self) -> bool:
    """Whether mm prefetches each tile's output and epilogue rows before its k loop: they pay where those rows come
    from L3 or memory (a conv 64->256 at 56x56 with a residual, 3.2 MB: 760-824 -> 545-549 us) or a long k loop hides
    them. A batch of small products (a grouped convolution's groups: an output in L2, k < 128) runs faster without
    (shufflenet's, k 34-68: 4066 -> 3863 us of kernels a call, 1 thread); one product of a short k, squeezenet's 1x1
    convolutions of k 16-64 (outputs of 0.2-0.8 MB), ran 10-25% slower without."""
    return self.batch == 1 or self.K >= self.PF_MIN_K or 4 * self.batch * self.M * self.N >= self.PF_MIN_BYTES
  def tile_phases(self) -> str:
    """The tile epilogue and its prefetch, private: mm's one call of each inlines."""
    lane = self.lane_of[id(ep := self.epi_tile)]
    return (lower_kernel(ep, f"{self.name}_epi", LaneLowerer(ep, lane), private=True)
            + (lower_kernel(ep, f"{self.name}_pf", LaneLowerer(ep, lane, True, ep.args[-1]), private=True) if self.prefetch else ""))

  def micro(self) -> MicroKernel:
    """The mm phase's problems, each after the other in Ap, Bp and C."""
    return MicroKernel(self.name, self.args, len(self.f.args), self.scratch, _int_attr(self.f, "uop.threads", 1), self.mr, self.nr, self.kc,
                       self.mc, self.vw, self.M, self.K, self.Mp, self.Np, self.batch, (self.Mp * self.ka, self.Np * self.K, self.Mp * self.Np),
                       self.op, self.direct_a, self.rows_a, self.fused, self.fused_b, self.epi_tile is not None, self.tile_rows, tuple(self.rt),
                       self.prefetch, self.taps, self.direct_b and (self.direct_b, self.N), tuple(self.batch_map(u) for u in self.uses))

  def batch_map(self, uses: list) -> tuple | None:
    """How problem bt of the batch finds the panels of an operand whose problems are `uses` (batch_uses): at sum((bt //
    p) % s * q) problems into its scratch, a (p, s, q) per range it reads (s 0: no modulo, the outermost range's size
    may be read at run time); None where its problems are the batch's (at bt)."""
    T = self.ranges[3]
    if [r for r, d, _ in uses if d == 1] == T: return None
    sz, at = sizes(T), {r: (d, mod) for r, d, mod in uses}
    return tuple((prod(sz[i + 1:]) * (1 if mod else d), d if mod else sz[i] // d if i else 0, problems([u for u in uses if T.index(u[0]) > i]))
                 for i, r in enumerate(T) if r in at for d, mod in [at[r]])

def batch_uses(x: UOp, T: list[UOp]) -> list[tuple[UOp, int, bool]]:
  """The batch ranges operand x reads, each as (r, d, mod): x reads r only as r // d (mod False) or only as r % d (mod
  True), so d problems in a row, or problems d apart, share x's panels; (r, 1, False) where it reads r whole."""
  return [(r, *shared_by(x, r)) for r in T if r in x.toposort]

def shared_by(x: UOp, r: UOp) -> tuple[int, bool]:
  """(d, mod) of batch_uses with the fewest problems of x's own: with r = d*q + m (d dividing r's static size), after
  index simplification x does not depend on m (r // d: a 1x1 convolution's weights at ((t*40 + w) // 1600)*85 + c are
  the same for 40 t in a row) or not on q (r % d: its image, at (t % 40)*40 + w, the same for t 40 apart)."""
  if (n := im.cval(r.src[0])) is None: return 1, False
  ax, best = next_axis(x), (n, 1, False)
  for d in (d for d in range(2, n) if n % d == 0):
    q, m = (UOp(Ops.RANGE, dtypes.index, (im.const(c),), attrs(axis=ax + j, kind="loop")) for j, c in enumerate((n // d, d)))
    seen = affine_simplify(x.substitute({r: im.add(im.mul(q, im.const(d)), m)})).toposort
    best = min([best, *([(n // d, d, False)] if m not in seen else []), *([(d, d, True)] if q not in seen else [])])
  return best[1:]

def problems(uses: list) -> int: return prod(d if mod else rsize(r) // d for r, d, mod in uses)

def own_problems(x: UOp, uses: list) -> tuple[UOp, list[UOp]]:
  """x over its own problems (batch_uses): a range it reads as r // d becomes d * r', as r % d becomes r' (r' over
  those problems)."""
  own = {r: UOp(Ops.RANGE, dtypes.index, (im.const(problems([(r, d, mod)])),), r.arg) for r, d, mod in uses if d > 1}
  if not own: return x, [r for r, *_ in uses]
  sub = {r: own[r] if mod else im.mul(own[r], im.const(d)) for r, d, mod in uses if d > 1}
  return affine_simplify(x.substitute(sub)), [own.get(r, r) for r, *_ in uses]

@dataclass
class MicroKernel:
  """One mm phase: C = A x B for each of a batch of problems (M x K times K x N, padded to Mp x Np), A and B packed in
  panels in the scratch buffers after the nargs kernel arguments (problems `areas` floats apart in Ap, Bp and C), or A's
  rows read in place (direct_a: slot, offset, row stride, k stride, batch stride) or from pack_a's row-major copy (rows_a: its row stride). fused: A
  packed per MC-row block inside mm, by the pack_a phase it calls; fused_b: B per panel (pack_b). tile: the epilogue runs per tile (_epi and
  its prefetch _pf, called with the tile, unless not `prefetch`; tile_rows: the tile transposed). op: add (FMAs), or max or min (column reduces).
  rt: M, N, K and the batch as index expressions read at run time (symbolic sizes; M, K, batch: the layout's maxima)."""
  name: str
  args: list[UOp]
  nargs: int
  scratch: list[int]
  threads: int
  mr: int
  nr: int
  kc: int
  mc: int
  vw: int
  M: int
  K: int
  Mp: int
  Np: int
  batch: int
  areas: tuple[int, int, int]
  op: str = "add"
  direct_a: tuple[int, int, int, int, int] | None = None
  rows_a: int | None = None
  fused: bool = False
  fused_b: bool = False
  tile: bool = False
  tile_rows: bool = False
  rt: tuple = ()
  prefetch: bool = True
  taps: tuple | None = None   # a direct convolution's image read in place: ((c, ((n_i, coef_i), ...)), ((n_k, coef_k), ...)), see window_a
  direct_b: tuple | None = None   # B's rows read in place: (segments, N), see Contraction.b_in_place
  tsel: tuple = (None, None)      # a batch's problem -> its A and B problems, where they read only some batch ranges (batch_map)

  @property
  def split_sym(self) -> bool:
    """Whether what threads split (the batch, A's row blocks or B's panels: MM.by_m) has a size read at run time: the
    phase then takes parts %lo .. %hi of `threads` (its par is (threads, threads, 1))."""
    m, n, _, bt = (im.cval(x) is None for x in self.rt) if self.rt else (False,) * 4
    return bt if self.batch > 1 else m if -(-self.Mp // self.mc) > self.Np // self.nr else n


IDENTITY = {"add": "0.0", "max": "0xFF800000", "min": "0x7F800000"}   # the reduce's identity (max, min: -inf, +inf)
SIZE_OPS = {Ops.ADD: "addi", Ops.SUB: "subi", Ops.MUL: "muli", Ops.MAX: "maxsi", Ops.MIN: "minsi", Ops.IDIV: "divsi", Ops.MOD: "remsi"}

def mm(mk: MicroKernel, private: bool = False) -> str: return MM(mk).text(private)

class MM:
  """The micro-kernel's phase (see Contraction): Goto's loops over KC slices, MC-row blocks and NR-wide panels around an
  MR x NR register tile of VW-lane vector accumulators, written on an Emitter (self.b: the block being written)."""
  def __init__(self, mk: MicroKernel):
    self.mk, self.em, self.b = mk, Emitter("v", 1), Block()
    self.nv, self.V, self.tty = mk.nr // mk.vw, f"vector<{mk.vw}xf32>", f"memref<{mk.mr * mk.nr}xf32>"
    self.c0, self.c1 = self.ci(0), self.ci(1)
    self.known: dict[UOp, str] = {}
    M, N, K, B = mk.rt or map(im.const, (mk.M, mk.Np, mk.K, mk.batch))   # read at run time where symbolic
    self.ck, self.ckc, self.mlast = self.size(K), self.ci(mk.kc), self.size(im.sub(M, im.const(1)))   # k's end, rows' last
    # M read at run time: the full MR-row panels run as MR-row tiles, and so does the last one when more than half full
    # (its rows past M repeat the last: one pass over B's panels); the rows of a last panel at most half full run as
    # smaller tiles (rem_rows). A transposed tile (tile_rows) takes whole panels
    self.rem = im.cval(M) is None and not mk.tile_rows
    if self.rem: self.mrt, self.full = self.size(M), self.size(im.idiv(im.add(M, im.const(mk.mr - 1 - mk.mr // 2)), mk.mr))
    # N read at run time: a last panel at most half full runs its tiles half as wide (no FMAs for the columns past N)
    self.ncols = self.size(N) if im.cval(N) is None and not mk.tile_rows and self.nv % 2 == 0 else None
    self.one = mk.K <= mk.kc   # one k slice
    if mk.tile: self.tile_buf = self.em.alloca(self.b, self.tty)
    # the reduce's identity and combine: an FMA for a product's sum; a max or min of a column reduce (A is ones)
    self.zero = self.em.const(self.b, f"dense<{IDENTITY[mk.op]}>", self.V)
    self.nb, self.mb = mk.Np // mk.nr, -(-mk.Mp // mk.mc)   # Bp panels, Ap row blocks: threads split the larger (each thread
    self.by_m = self.mb > self.nb                            # then streams only its share of the big operand from memory)
    self.batched = mk.batch > 1                              # threads split the batch instead; each problem's offsets in the scratch
    # the same counts at run time (the layout keeps the static ones: C's rows are Np apart, tiles numbered by nb)
    cdiv = lambda x, d: im.idiv(im.add(x, im.const(d - 1)), d)
    mp = im.mul(cdiv(M, mk.mr), im.const(mk.mr))
    self.mp, self.nb_rt, self.mb_rt = self.size(mp), self.size(cdiv(N, mk.nr)), self.size(cdiv(mp, mk.mc))
    cnt = self.size(B) if self.batched else self.mb_rt if self.by_m else self.nb_rt
    if mk.threads == 1: self.lo, self.hi = self.c0, cnt
    elif not mk.split_sym: self.lo, self.hi = LO, HI
    else: self.lo, self.hi = (self.ix("divui", self.ix("muli", cnt, x), self.ci(mk.threads)) for x in (LO, HI))
    self.rowwise = mk.direct_a is not None or mk.rows_a is not None   # the tiles read A's rows (in place, or pack_a's copy)
    self.pa, self.pb, self.pc = (arg(mk.nargs + i) for i in range(3))
    self.ta, self.tb, self.tc = (f"memref<{x}xf32>" for x in mk.scratch[:3])
    self.off: dict[str, str] = {}   # a batch's problem offsets in Ap, Bp and C

  def call(self, fn: str, args: list[str], tys: list[str]): self.em.call(self.b, fn, args, tys)
  def size(self, u: UOp) -> str:
    """A size as a value at the function's start: a constant, or an index expression of the variables' values."""
    if (n := self.known.get(u)) is not None: return n
    if (c := im.cval(u)) is not None: n = self.ci(c)
    elif u.op is Ops.LOAD:
      buf, i = u.src[0].src[:2]
      n = self.em.load(self.b, arg(buf.attrs['slot']), self.size(i), mem_type(buf.dtype))
    elif u.op is Ops.CAST: n = self.em.cast(self.b, "index_cast", self.size(u.src[0]), sl(u.src[0].dtype), "index")
    elif u.op in SIZE_OPS and u.dtype is dtypes.index: n = self.ix(SIZE_OPS[u.op], *map(self.size, u.src))   # sizes are >= 0
    else: raise PassError(f"@{self.mk.name}: a size read at run time as uop.{u.op}", u.loc)
    self.known[u] = n
    return n

  def ix(self, op: str, *xs: str) -> str: return self.em.arith(self.b, op, "index", *xs)   # index arithmetic
  def ci(self, v: int) -> str: return self.em.const(self.b, v)
  def add(self, x: str, c: int) -> str: return self.ix("addi", x, self.ci(c)) if c else x
  def at(self, x: str, part: str) -> str: return self.ix("addi", x, self.off[part]) if self.batched else x
  @contextmanager
  def into(self, b: Block):
    parent, self.b = self.b, b
    try: yield b
    finally: self.b = parent
  @contextmanager
  def loop(self, lo: str, hi: str, step: str | None = None, inits: list[str] = (), ty: str = ""):
    with self.em.for_(self.b, lo, hi, step or self.c1, inits=inits, ty=ty) as lp, self.into(lp.body): yield lp

  def text(self, private: bool = False) -> str:
    mk = self.mk
    if mk.fused: self.fused()
    elif mk.fused_b: self.fused_b()
    elif not self.batched: self.goto(self.lo, self.hi, self.by_m)
    else:
      with self.loop(self.lo, self.hi) as bt:
        self.bt = bt.iv
        for part, area, sel in zip("abc", mk.areas, (*mk.tsel, None)): self.off[part] = self.ix("muli", self.problem(bt.iv, sel), self.ci(area))
        self.goto(self.c0, self.mb_rt, True)
    idx = (LO, HI) + ((TID,) if mk.fused or mk.fused_b else ()) if mk.threads > 1 else ()
    return Emitter.func(f"{mk.name}_mm", params([mem_type(a.dtype) for a in mk.args], *idx), self.b, private=private)

  def problem(self, bt: str, sel: tuple | None) -> str:
    """Problem bt's problem in an operand's scratch (MicroKernel.tsel)."""
    if sel is None: return bt
    terms = []
    for p, s, q in sel:
      d = self.ix("divui", bt, self.ci(p)) if p > 1 else bt
      d = self.ix("remui", d, self.ci(s)) if s else d
      terms.append(self.ix("muli", d, self.ci(q)) if q > 1 else d)
    return reduce(lambda x, y: self.ix("addi", x, y), terms) if terms else self.c0

  def goto(self, lo: str, hi: str, by_m: bool):
    """Goto's order: a KC-deep slice of K; an MC-row block of Ap (L2-resident) swept over this thread's Bp panels (each
    KC x NR slice L1-resident while the MR-row tiles of the block pass over it); by_m: threads split the row blocks."""
    with self.loop(self.c0, self.ck, self.ckc) as kc:
      kend, first = self.k_slice(kc.iv)
      with self.loop(lo if by_m else self.c0, hi if by_m else self.mb_rt) as icb:
        ib_lo, ib_hi = self.row_block(icb.iv)
        with self.loop(self.c0 if by_m else lo, self.nb_rt if by_m else hi) as jb:
          a_base = lambda ib: self.at(self.ix("muli", ib, self.ci(self.mk.K * self.mk.mr)), "a")
          self.tile(kc.iv, jb.iv, ib_lo, ib_hi, kend, first, self.pa, self.ta, a_base)

  def fused(self):
    """Goto's order with A packed per block: each thread packs its MC-row block of A (all of K) into its own L2-sized
    buffer (picked by the chunk index %tid) right before the tiles use it; A never round-trips memory."""
    mk = self.mk
    mine, blk, bufs = self.mine()
    with self.loop(self.lo, self.hi) as icb:
      ib_lo, ib_hi = self.row_block(icb.iv)
      args = [arg(i) for i in range(mk.nargs + 3)] + [mine] + bufs[1:] + [ib_lo, ib_hi]
      self.call(f"{mk.name}_pack_a", args, [mem_type(a.dtype) for a in mk.args] + ['index', 'index'])
      with self.loop(self.c0, self.ck, self.ckc) as kc:
        kend, first = self.k_slice(kc.iv)
        with self.loop(self.c0, self.nb_rt) as jb:
          a_base = lambda ib: self.ix("muli", self.ix("subi", ib, ib_lo), self.ci(mk.K * mk.mr))
          self.tile(kc.iv, jb.iv, ib_lo, ib_hi, kend, first, mine, blk, a_base)

  def mine(self) -> tuple[str, str, list[str]]:
    """This thread's buffer (picked by the chunk index %tid among those after Ap, Bp and C), its type, all of them."""
    mk = self.mk
    blk, bufs = f"memref<{mk.scratch[3]}xf32>", [arg(mk.nargs + 3 + i) for i in range(len(mk.scratch) - 3)]
    tid, mine = TID if mk.threads > 1 else self.c0, bufs[0]
    for i, b in enumerate(bufs[1:], 1): mine = self.em.select(self.b, self.em.cmpi(self.b, "eq", tid, self.ci(i), "index"), b, mine, blk)
    return mine, blk, bufs

  def fused_b(self):
    """Panels of B packed where used: each of this thread's panels packed (all of K: one KC slice) into its own
    L1-sized buffer, then swept by every MR-row tile of A; Bp never round-trips memory."""
    mk = self.mk
    mine, blk, bufs = self.mine()
    self.pb, self.tb = mine, blk
    with self.loop(self.lo, self.hi) as jb:
      args = [arg(i) for i in range(mk.nargs + 3)] + [mine] + bufs[1:] + [jb.iv, self.add(jb.iv, 1)]
      self.call(f"{mk.name}_pack_b", args, [mem_type(a.dtype) for a in mk.args] + ['index', 'index'])
      kend, first = self.k_slice(self.c0)
      with self.loop(self.c0, self.mb_rt) as icb:
        ib_lo, ib_hi = self.row_block(icb.iv)
        self.tile(self.c0, jb.iv, ib_lo, ib_hi, kend, first, self.pa, self.ta, lambda ib: self.ix("muli", ib, self.ci(mk.K * mk.mr)))

  def row_block(self, icb: str) -> tuple[str, str]:   # the block's first and last MR-row panel
    mc, mr = self.mk.mc, self.mk.mr
    ic = self.ix("muli", icb, self.ci(mc))
    ic_end = self.ix("minsi", self.ix("addi", ic, self.ci(mc)), self.mp)
    return self.ix("divui", ic, self.ci(mr)), self.ix("divui", ic_end, self.ci(mr))

  def k_slice(self, kc: str) -> tuple[str, str]:   # the slice's end and whether it is the first (C starts from the identity)
    return self.ix("minsi", self.ix("addi", kc, self.ckc), self.ck), self.em.cmpi(self.b, "eq", kc, self.c0, "index")

  def a_rows(self, ib: str | None, a_buf: str, a_ty: str, rows: list[str] | None = None) -> tuple[str, str, list[str]]:
    """Row r of the tile starts at off + min(ib*MR + r, M-1)*stride: rows past M repeat the last (C's pad rows); or
    the given rows."""
    mk = self.mk
    ts = 0
    if mk.direct_a is not None:
      slot, off, stride, _, ts = mk.direct_a
      a_buf, a_ty = arg(slot), mem_type(mk.args[slot].dtype)
    else: off, stride = 0, mk.rows_a   # the row-major copy pack_a made, this problem's at offset "a"
    if rows is None:
      row0, last = self.ix("muli", ib, self.ci(mk.mr)), self.mlast
      rows = [self.ix("minsi", self.add(row0, r), last) for r in range(mk.mr)]
    if ts and self.batched: off = self.ix("addi", self.ix("muli", self.bt, self.ci(ts)), self.ci(off))   # this problem's A
    else: off = self.ci(off)
    base = lambda x: self.ix("addi", self.ix("muli", x, self.ci(stride)), off)
    if mk.taps is not None: base = self.tap_base
    rbase = [self.at(base(x), "a") if mk.direct_a is None else base(x) for x in rows]
    return a_buf, a_ty, rbase

  def tap_base(self, m: str) -> str:
    """Where a direct convolution's image row m (an output position) starts: c + sum coef_i * i(m), i(m) its I ranges'
    positions (row-major)."""
    (c, rows), acc = self.mk.taps[0], self.ci(self.mk.taps[0][0])
    for n, coef in reversed(rows):
      if coef: acc = self.ix("addi", acc, self.ix("muli", self.ix("remui", m, self.ci(n)), self.ci(coef)))
      m = self.ix("divui", m, self.ci(n))
    return acc

  def tile(self, kc: str, jb: str, ib_lo: str, ib_hi: str, kend: str, first: str, a_buf: str, a_ty: str, a_base):
    """for ib in the block: the MR x NR tile of C at (ib, jb), accumulated over k in [kc, kend); MR x NR/2 where panel
    jb holds at most NR/2 of the N columns read at run time."""
    if self.ncols is None: return self.tiles(kc, jb, ib_lo, ib_hi, kend, first, a_buf, a_ty, a_base)
    left = self.ix("subi", self.ncols, self.ix("muli", jb, self.ci(self.mk.nr)))
    with self.em.if_(self.b, self.em.cmpi(self.b, "sle", left, self.ci(self.mk.nr // 2), "index"), orelse=True) as (then, other):
      with self.into(then), self.vectors(self.nv // 2): self.tiles(kc, jb, ib_lo, ib_hi, kend, first, a_buf, a_ty, a_base)
      with self.into(other): self.tiles(kc, jb, ib_lo, ib_hi, kend, first, a_buf, a_ty, a_base)
  @contextmanager
  def vectors(self, nv: int):   # the tiles' vectors per row, nv instead of NR/VW (C's and the tile's layouts stay NR wide)
    whole, self.nv = self.nv, nv
    try: yield
    finally: self.nv = whole
  def tiles(self, kc: str, jb: str, ib_lo: str, ib_hi: str, kend: str, first: str, a_buf: str, a_ty: str, a_base):
    mk, V = self.mk, self.V
    jcol = self.ix("muli", jb, self.ci(mk.nr))
    bbase = self.c0 if mk.fused_b else jcol if mk.direct_b else self.at(self.ix("muli", jb, self.ci(mk.K * mk.nr)), "b")
    if self.rem: self.rem_rows(kc, jb, ib_lo, ib_hi, kend, first, a_buf, a_ty, a_base, bbase, jcol)
    with self.loop(ib_lo, self.ix("minsi", ib_hi, self.full) if self.rem else ib_hi) as ibl:
      ib = ibl.iv
      if not self.rowwise: a = a_base(ib)
      else: a_buf, a_ty, a = self.a_rows(ib, a_buf, a_ty)
      crow = self.at(self.ix("addi", self.ix("muli", ib, self.ci(mk.mr * mk.Np)), jcol), "c")
      offs = [self.ix("addi", crow, self.ci(r * mk.Np + v * mk.vw)) for r in range(mk.mr) for v in range(self.nv)]
      # one k slice: C starts from the identity, nothing to load
      init = [self.zero] * len(offs) if self.one else \
        [self.em.select(self.b, first, self.zero, self.em.vload(self.b, self.pc, o, self.tc, V), V) for o in offs]
      epi_args, last = self.prefetch(ib, jb, kend) if mk.tile else (None, None)
      if mk.tile and mk.prefetch: self.pf(epi_args, last)
      res = self.k_loop(kc, kend, init, bbase, a, a_buf, a_ty)
      if not mk.tile: self.to_c(res, offs)
      elif self.one: self.to_tile(res, epi_args)
      else:   # the tile is done after the last slice: the epilogue takes it from the stack; C holds the earlier slices'
        with self.em.if_(self.b, last, orelse=True) as (then, other):
          with self.into(then): self.to_tile(res, epi_args)
          with self.into(other): self.to_c(res, offs)

  def prefetch(self, ib: str, jb: str, kend: str) -> tuple[str, str | None]:
    """The epilogue calls' arguments (the tile index t from the tile's rows and columns), and the call of its prefetch:
    the output rows (and the rows the epilogue reads) this tile will touch, fetched while its k loop runs (several
    slices: only the last one's tile, under the condition returned)."""
    mk = self.mk
    if self.batched: ib = self.ix("addi", self.ix("muli", self.bt, self.ci(mk.Mp // mk.mr)), ib)
    t = self.ix("addi", self.ix("muli", ib, self.ci(self.nb)), jb)
    epi_args = ([arg(i) for i in range(len(mk.args))] + [self.tile_buf, t, self.add(t, 1)],
                [mem_type(x.dtype) for x in mk.args] + [self.tty, 'index', 'index'])
    return epi_args, None if self.one else self.em.cmpi(self.b, "eq", kend, self.ck, "index")

  def pf(self, epi_args: tuple[list[str], list[str]], last: str | None):
    if last is None: self.call(f"{self.mk.name}_pf", *epi_args)
    else:
      with self.em.if_(self.b, last) as (then, _), self.into(then): self.call(f"{self.mk.name}_pf", *epi_args)

  def rem_rows(self, kc: str, jb: str, ib_lo: str, ib_hi: str, kend: str, first: str, a_buf: str, a_ty: str, a_base, bbase: str, jcol: str):
    """The m % MR <= MR / 2 rows past the last full MR-row panel (M read at run time), when that panel is in this block,
    as tiles of 4, 2 and 1 rows (those of m % MR's bits; an MR-row tile would do MR rows' work for them); with a tile
    epilogue, each into its rows of the tile, and the epilogue once on the panel."""
    mk = self.mk
    here = self.em.arith(self.b, "andi", "i1", self.em.cmpi(self.b, "ule", ib_lo, self.full, "index"),
                         self.em.cmpi(self.b, "ult", self.full, ib_hi, "index"))
    with self.em.if_(self.b, here) as (then, _), self.into(then):
      row0 = self.ix("muli", self.full, self.ci(mk.mr))
      rem = self.ix("subi", self.mrt, row0)
      for p in (4, 2, 1):
        if p >= mk.mr: continue
        has = self.em.cmpi(self.b, "ne", self.ix("andi", rem, self.ci(p)), self.c0, "index")
        with self.em.if_(self.b, has) as (t, _), self.into(t):
          q = self.ix("andi", rem, self.ci(-2 * p))   # the first of these rows in the panel: m % MR's bits above p
          self.rows_tile(p, q, self.ix("addi", row0, q), kc, kend, first, a_buf, a_ty, a_base, bbase, jcol)
      if mk.tile:
        epi_args, last = self.prefetch(self.full, jb, kend)
        if last is None: self.call(f"{mk.name}_epi", *epi_args)
        else:
          with self.em.if_(self.b, last) as (t, _), self.into(t): self.call(f"{mk.name}_epi", *epi_args)

  def rows_tile(self, p: int, q: str, row: str, kc: str, kend: str, first: str, a_buf: str, a_ty: str, a_base, bbase: str, jcol: str):
    """A p x NR tile of C at rows row .. row+p-1 (q .. q+p-1 of the last panel)."""
    mk, V = self.mk, self.V
    if self.rowwise: a_buf, a_ty, a = self.a_rows(None, a_buf, a_ty, [self.add(row, r) for r in range(p)])
    else: a = self.ix("addi", a_base(self.full), q)
    crow = self.at(self.ix("addi", self.ix("muli", row, self.ci(mk.Np)), jcol), "c")
    offs = [self.add(crow, r * mk.Np + v * mk.vw) for r in range(p) for v in range(self.nv)]
    init = [self.zero] * len(offs) if self.one else \
      [self.em.select(self.b, first, self.zero, self.em.vload(self.b, self.pc, o, self.tc, V), V) for o in offs]
    res = self.k_loop(kc, kend, init, bbase, a, a_buf, a_ty, p)
    at = self.ix("muli", q, self.ci(mk.nr))
    to_tile = lambda: [self.em.vstore(self.b, x, self.tile_buf, self.add(at, (i // self.nv * mk.nr // mk.vw + i % self.nv) * mk.vw), self.tty, V)
                       for i, x in enumerate(res)]
    if not mk.tile: self.to_c(res, offs)
    elif self.one: to_tile()
    else:
      with self.em.if_(self.b, self.em.cmpi(self.b, "eq", kend, self.ck, "index"), orelse=True) as (t, o):
        with self.into(t): to_tile()
        with self.into(o): self.to_c(res, offs)

  def k_loop(self, kc: str, kend: str, init: list[str], bbase: str, a: str | list[str], a_buf: str, a_ty: str, rows: int = 0) -> list[str]:
    """The k loop of a tile: the accumulators carried through FMAs of A's column (broadcast) with B's row."""
    mk, V, nv = self.mk, self.V, self.nv
    # the same row of the next B panel, into L2, a cache line at a time: its first tile then finds it there (weights
    # packed once per input are read from memory on every call of a model; resnet50 47.3 -> 46.3 ms, interleaved). The
    # last panel's "next" is itself, clamped here once rather than per prefetch in the k loop
    pf = self.ix("minsi", self.add(bbase, mk.K * mk.nr), self.ci(mk.scratch[1] - mk.K * mk.nr)) if not mk.fused_b and not mk.direct_b else None
    masks = self.b_masks(bbase)
    def step(k: str, ak: str, accs: list[str], src: tuple[str, str, str, int]) -> list[str]:   # k: B's row; ak: its offset along A's rows
      pb, tb, base, stride = src
      bo = self.ix("addi", base, ko := self.ix("muli", k, self.ci(stride)))
      bv = [self.em.vload(self.b, pb, self.add(bo, v * mk.vw), tb, V) if v not in masks else
            self.em.maskedload(self.b, pb, self.add(bo, v * mk.vw), masks[v], self.zero, tb, f"vector<{mk.vw}xi1>", V) for v in range(nv)]
      if pf is not None:
        for off in range(0, mk.nr, 16): self.em.prefetch(self.b, self.pb, self.add(self.ix("addi", pf, ko), off), False, self.tb, 2)
      if not self.rowwise:
        ao = self.ix("addi", a, self.ix("muli", k, self.ci(mk.mr)))
        if A_AHEAD: self.em.prefetch(self.b, a_buf, self.add(ao, A_AHEAD), False, a_ty, 2)
      new = []
      for r in range(rows or mk.mr):
        ar = self.em.load(self.b, a_buf, self.add(ao, r) if not self.rowwise else self.ix("addi", a[r], ak), a_ty)
        av = self.em.broadcast(self.b, ar, "f32", V)
        new += [self.em.fma(self.b, av, bv[v], accs[r * nv + v], V) if mk.op == "add" else
                self.em.arith(self.b, f"{mk.op}imumf", V, accs[r * nv + v], self.em.arith(self.b, "mulf", V, av, bv[v])) for v in range(nv)]
      return new
    src = (self.pb, self.tb, bbase, mk.nr)
    if mk.taps is not None: return self.k_taps(kc, kend, init, lambda k, ak, accs: step(k, ak, accs, src))
    for lo, hi, src in self.b_segments(kc, kend, bbase) if mk.direct_b else [(kc, kend, src)]:
      with self.loop(lo, hi, inits=init, ty=V) as kl:
        ak = self.ix("muli", kl.iv, self.ci(ks)) if (ks := mk.direct_a[3] if mk.direct_a else 1) != 1 else kl.iv   # k's step along A's rows
        kl.yields = step(kl.iv, ak, kl.accs, src)
      init = kl.results
    return init

  def b_segments(self, kc: str, kend: str, col: str) -> list[tuple[str, str, tuple[str, str, str, int]]]:
    """B's rows read in place: each segment's k loop bounds within the slice [kc, kend), and where its rows are (buffer,
    type, the address of column col at k = 0, k stride)."""
    segs, out = self.mk.direct_b[0], []
    for lo, hi, slot, start, ks in segs:
      bounds = (kc, kend) if len(segs) == 1 else (self.ix("maxsi", kc, self.ci(lo)), self.ix("minsi", kend, self.ci(hi)))
      out.append((*bounds, (arg(slot), mem_type(self.mk.args[slot].dtype), self.add(col, start), ks)))
    return out

  def b_masks(self, bbase: str) -> dict[int, str]:
    """B's rows read in place: the lanes of each vector that may reach past column N (in the last panel, where N is not
    a whole number of panels) as a mask, per vector of the tile; the others load whole."""
    mk = self.mk
    if not mk.direct_b or not (part := mk.direct_b[1] % mk.nr): return {}
    left = self.ix("subi", self.ci(mk.direct_b[1]), bbase)   # columns from the tile's first to N
    return {v: self.em.create_mask(self.b, self.add(left, -v * mk.vw), f"vector<{mk.vw}xi1>")
            for v in range(self.nv) if (v + 1) * mk.vw > part}

  def k_taps(self, kc: str, kend: str, init: list[str], step) -> list[str]:
    """A direct convolution's k slice as loops nested as its K ranges (whole windows: the slice runs over the outer
    range), A's offset along its rows a sum of each range's coefficient times its counter, B's row their linear index."""
    ks, V = self.mk.taps[1], self.V
    inner = self.ci(prod(n for n, _ in ks[1:]))
    res = lambda lp: [lp.res] if len(lp.inits) == 1 else [f"{lp.res}#{j}" for j in range(len(lp.inits))]
    with ExitStack() as st:
      loops = [st.enter_context(self.loop(self.ix("divui", kc, inner), self.ix("divui", kend, inner), inits=init, ty=V))]
      for n, _ in ks[1:]: loops.append(st.enter_context(self.loop(self.c0, self.ci(n), inits=loops[-1].accs, ty=V)))
      k = loops[0].iv
      for lp, (n, _) in zip(loops[1:], ks[1:]): k = self.ix("addi", self.ix("muli", k, self.ci(n)), lp.iv)
      terms = [lp.iv if c == 1 else self.ix("muli", lp.iv, self.ci(c)) for lp, (_, c) in zip(loops, ks) if c]
      ak = reduce(lambda x, y: self.ix("addi", x, y), terms) if terms else self.c0
      loops[-1].yields = step(k, ak, loops[-1].accs)
      for outer, lp in zip(loops, loops[1:]): outer.yields = res(lp)
    return res(loops[0])

  def to_c(self, res: list[str], offs: list[str]):
    for r, o in zip(res, offs): self.em.vstore(self.b, r, self.pc, o, self.tc, self.V)

  def to_tile(self, res: list[str], epi_args: tuple[list[str], list[str]]):
    """The tile on mm's stack, row-major, or transposed where the epilogue's lanes run along its rows; then the epilogue."""
    mk, vw, V = self.mk, self.mk.vw, self.V
    for q in range(mk.mr * self.nv):   # (row q // nv of the tile, NR wide)
      v = res[q] if not mk.tile_rows else self.transposed(res, q)
      self.em.vstore(self.b, v, self.tile_buf, self.ci((q // self.nv * mk.nr // vw + q % self.nv) * vw), self.tty, V)
    self.call(f"{mk.name}_epi", *epi_args)

  def transposed(self, res: list[str], q: int) -> str:
    """Chunk q of the transposed tile (element p: column p // mr, row p % mr) from the accumulators it takes lanes of,
    merged pairwise by shuffles (a scatter costs 11-15% of a 1x1 convolution's time at K = 256)."""
    mr, vw, nv, V = self.mk.mr, self.mk.vw, self.nv, self.V
    src: dict[int, dict[int, int]] = {}   # accumulator -> {position in the chunk: its lane}
    for p in range(q * vw, (q + 1) * vw): src.setdefault((p % mr) * nv + p // mr // vw, {})[p - q * vw] = p // mr % vw
    parts = []
    for pair in [list(src.items())[i:i + 2] for i in range(0, len(src), 2)]:
      (a, fa), (b, fb) = pair[0], pair[-1]
      mask = [fa[p] if p in fa else vw + fb[p] if p in fb else 0 for p in range(vw)]
      parts.append((self.em.shuffle(self.b, res[a], res[b], mask, V, V), {**fa, **fb}))
    while len(parts) > 1:
      (a, fa), (b, fb) = parts[0], parts[1]
      parts = parts[2:] + [(self.em.shuffle(self.b, a, b, [p if p in fa else vw + p for p in range(vw)], V, V), {**fa, **fb})]
    return parts[0][0]
