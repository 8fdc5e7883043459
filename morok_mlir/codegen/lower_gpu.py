"""uop-lower-gpu: kernel-level `uop` functions (docs/pipeline.md section 2) -> `gpu.module` / `gpu.func` + host launches.

The placement and each op's semantics are the CPU's (placement.Placement, lower_cpu.Lowerer); the policy `GPU` changes
where loops go, the op table (GPU_RULES: the GPU's float math) and the function's head.
- The output ranges of a kernel (the `uop.end` after its store) become one flat global id, row-major with the last
  axis fastest, so neighbouring threads touch neighbouring elements (coalesced). `local` threads per block,
  `global` blocks; a `scf.if gid < N` guards the tail when `local` does not divide N. Past GRID_MAX blocks, a grid-stride
  `scf.for` from gid to N by the launch's thread count instead.
- GROUP (tinygrad's name): when the kernel has few outputs and a long reduction, each block computes one output;
  its threads stride over the reduce ranges (coalesced again), then the partials combine through warp shuffles
  (`gpu.shuffle xor`), shared memory and a `gpu.barrier` (GPU.combine), and thread 0 stores. Only 32/64-bit
  reductions: shuffles move 32-bit words. A GROUP kernel of few outputs and one long reduce (a full sum) would keep
  most SMs idle: codegen.gpu_split runs it as two launches, the reduce's chunks on many blocks into a scratch buffer of
  partials, then the kernel over those (lower_module: a host function's gpu.alloc for them).
- ROW: when every reduce of a kernel is a value of its row (softmax's max and sum, layernorm's mean and variance), a
  block per row computes each reduce once as GROUP does (shuffles in each warp, shared memory and a barrier across
  warps), then its threads stride over the row writing the outputs, 4 neighbours a step where 4 divides
  the row. Where a thread's share of a static row fits ROW_REGS registers (`held`), each thread loads its elements of
  the row once, unrolled (steps of 4 or 8 neighbours: 16-byte loads), every reduce folds values computed from those
  registers (softmax's exp(x - max), layernorm's (x - mean)^2) and the outputs are written from them (`registers`); a
  longer row is read once per reduce and once to write it (softmax, layernorm: 3 times; the later reads of a block's
  row mostly hit the cache).
- GROUP and ROW reduces read 4 neighbours of the reduce's last range a step (16-byte loads; 8 where the kernel's
  narrowest buffer is 16-bit, `lanes`) where its size divides by that, or where it is the only range (the remainder
  after the vectors, one element a step); in a ROW kernel a reduce of the row's reduces (softmax's sum of exp(x - max))
  too, those standing in as named leaves (`stand_ins`). Buffers a kernel only reads
  are `noalias readonly` parameters, loaded through the read-only cache (ld.global.nc).
- Everything else (inner reduces, matmul's k loop) stays a `scf.for` inside the thread, exactly as on the CPU.
- UPCAST (tinygrad's name): a thread computes 4 neighbours along the last axis when it divides it (8 over f16/bf16
  buffers: 16 bytes of them, `lanes`); the lanes' index
  math is in affine form, so their addresses are base + 0..3, and with the buffers marked `llvm.align = 16` (the
  runtime's allocations are 256-byte aligned) the NVPTX back end emits 16-byte `ld/st.global.v4` for contiguous
  operands (others stay scalar). The lanes' reduces run as one loop with 4 accumulators: a matmul thread loads
  A[m, k] once for 4 outputs (register tiling along N; no shared-memory tiling yet).
- Symbolic sizes (a range to a Variable's value, read from the int64 buffer of the values): the launch is sized for the
  largest values, so launch sizes stay static (one launch configuration for every value: a replay sends only the new
  value, and a captured CUDA graph can keep its launches); the output digits divide by the values read at run time, so
  the positions in use are the first threads, and a thread (a block, in GROUP kernels) past them does nothing; reduce
  loops run to the values. A value far below its maximum leaves idle blocks, each exiting at its first branch.
- Contractions (matmul, batched matmul, convolution) of f16/bf16 operands, and of f32 ones where tf32 is allowed, on a
  chip with tensor cores (sm_80 on; the `chip` a caller names) are tiled instead: codegen.gpu_tiles (shared-memory
  stages filled by cp.async, barriers, mma.sync per warp).
- `morok_mlir.device.gpu_emulator` lowers the same kernels with its own policy (ids from a loop counter, launches as
  loops of calls) to run them on the CPU.

Public API: `lower_kernel(f, name) -> (text of one gpu.func, Launch)`, `lower_module(funcs) -> str` (one `gpu.module
@kernels` with every kernel plus a host `@schedule` of `gpu.launch_func`s), the pass `uop-lower-gpu`."""
from __future__ import annotations
import functools, math
from dataclasses import dataclass
from morok_mlir.ir.bridge import Func, import_module, replace_module_body
from morok_mlir.core.dtype import DType, dtypes
from morok_mlir.core.uop import UOp, attrs
from morok_mlir.dialects.ops import Ops, REDUCE_IDENTITY
from morok_mlir.ir.registry import register, Option, PassError
from morok_mlir.codegen.tables import COMPUTE, cls, mem_type, sl
from morok_mlir.codegen.placement import Frame, Placement, Policy, _axis, kernel_calls
from morok_mlir.codegen.lower_cpu import RULES, Lowerer
from morok_mlir.codegen.emitter import GPU_CONTAINER, Block, Emitter, arg, params
from morok_mlir.core import index_math as im
from morok_mlir.core.index_math import at_lane
from morok_mlir.core.kernel_facts import rsize

LOCAL_MAX = 256        # threads per block for elementwise kernels
UPCAST = 4             # outputs per thread of an elementwise kernel whose last axis it divides: 16-byte accesses
UPCAST_MAX = 8         # ... 8 where the kernel's narrowest buffer holds 16-bit elements (f16, bf16): 16 bytes of those
GROUP_MAX = 256        # threads per block that share one reduction
GROUP_OUTPUTS = 16384  # GROUP only when there are at most this many outputs (else one thread per output is enough work)
GROUP_MIN_REDUCE = 64  # ... and the reduction is at least this long
GRID_MAX = 1 << 16     # blocks of an elementwise kernel at most: a bigger one loops its threads over the outputs (grid stride)
ROW_REGS = 32          # 32-bit registers a ROW thread may hold its share of the row in (its elements in the reduces' dtype)
BLOCK_REDUCE = ("add", "mul", "max", "min")   # the reduces a block combines through shuffles
GPU_MATH = {  # float op -> template: sqrt.rn (IEEE, as on the CPU; math.sqrt becomes libdevice's sqrt.approx), and the
  # hardware ex2/lg2 through libdevice rather than the CPU's vectorizable polynomials
  "sqrt": 'llvm.call_intrinsic "llvm.sqrt.{t}"({x}) : ({t}) -> {t}', "exp2": "math.exp2 {x} : {t}", "log2": "math.log2 {x} : {t}"}

@dataclass(frozen=True)
class Launch:
  name: str
  global_size: tuple[int, int, int]   # blocks
  local_size: tuple[int, int, int]    # threads per block
  group: bool = False                 # one block per output, reductions across the block
  upcast: int = 1                     # consecutive outputs (of the last axis) per thread
  row: bool = False                   # (ROW) one block per row: the row's reduces across the block, then its outputs
  tiles: bool = False                 # a tiled contraction (codegen.gpu_tiles): shared memory, barriers, cp.async, mma.sync

def _prod(xs) -> int: return math.prod(xs)
def _size(r: UOp) -> int: return rsize(r)   # a symbolic size's largest value: what the launch is sized for
def _ends(rngs: list[UOp], upcast: int = 1) -> list[UOp]:
  """The ranges' sizes as index UOps (a symbolic one is its value read at run time), the last in groups of upcast (static)."""
  return [r.src[0] for r in rngs[:-1]] + [im.const(im.cval(rngs[-1].src[0]) // upcast) if upcast > 1 else rngs[-1].src[0]] if rngs else []
def _count(sizes: list[UOp]) -> UOp: return functools.reduce(im.mul, sizes, im.const(1))
def _pow2_at_least(n: int) -> int: return 1 << max(n - 1, 0).bit_length()
def read_only(f: Func) -> frozenset[int]:
  """The kernel's arguments it never stores to. A realize writes every kernel's outputs to buffers of their own (an
  assign rebinds its target to a new one), so no other argument of the launch aliases them: `noalias readonly` holds."""
  stores = [st.src[0] for r in f.roots for st in r.toposort if st.op is Ops.STORE]
  if not all(x.op is Ops.INDEX and x.src[0].op is Ops.BUFFER for x in stores): return frozenset()   # a store we cannot place
  written = {x.src[0].attrs["slot"] for x in stores}
  return frozenset(i for i, a in enumerate(f.args) if a.attrs.get("slot", i) not in written)
def _nested(u: UOp) -> bool: return any(v.op is Ops.REDUCE for v in u.src[0].toposort)
def lanes(f: Func) -> int:
  """Neighbours a thread takes along the last axis: 16 bytes of the kernel's narrowest buffer, UPCAST to UPCAST_MAX."""
  narrow = min((a.dtype.base.itemsize for a in f.args if getattr(a.dtype, "base", None) is not None), default=4)
  return max(UPCAST, min(UPCAST_MAX, 16 // max(narrow, 1)))
def _dividing(n: int, widest: int) -> int:
  """The widest of widest and UPCAST that divides n (1: neither)."""
  return next((v for v in (widest, UPCAST) if n % v == 0), 1)

def block_reduce(u: UOp) -> bool:
  """A reduce u a block combines through shuffles: 32/64-bit words (bf16 accumulates in f32)."""
  return (u.attrs.get("op") in BLOCK_REDUCE and cls(u.dtype) in "fsu" and COMPUTE.get(u.dtype, u.dtype).bits in (32, 64)
          and u.dtype is not dtypes.index)

def fmod(lw, op, srcs, names: list[str], sdt: DType, dt: DType, fr, u) -> str:
  """C's fmod on PTX, which has no float remainder (NVVM refuses llvm.frem), exact as the CPU's: r = |x| loses, once
  per bit of the quotient, the largest |y| * 2^k not above it (Sterbenz: each subtraction is exact), then takes x's sign;
  NaN where x is not finite or y is 0 or NaN. The trip count is fixed before the loop: the exponent gap plus one.
  f16 runs in f32, where the remainder of two f16 values is exact."""
  em = lw.em
  if sdt.bits == 16:
    x, y = (em.cast(fr, "extf", n, "f16", "f32") for n in names)
    return em.cast(fr, "truncf", fmod(lw, op, srcs, [x, y], dtypes.float32, dtypes.float32, fr, u), "f32", "f16")
  W, t, it, mb, bias = sdt.bits, sl(sdt), f"i{sdt.bits}", sdt.finfo.nmant, sdt.finfo.maxexp - 1
  ones = ((1 << W - 1 - mb) - 1) << mb   # +inf: the exponent's bits all set; a quiet NaN adds the mantissa's top bit
  inf, nan = f"0x{ones:X}", f"0x{ones | 1 << mb - 1:X}"
  C = lambda v, ty=it: em.constant(fr, f"{v} : {ty}")
  c0, c1, c2, c3, cmb, cbias, cw, cmask, csign = (C(v) for v in (0, 1, 2, 3, mb, bias, W - bias - mb, (1 << W - 1) - 1, -(1 << W - 1)))
  finf, fnan, fzero, fhalf = C(inf, t), C(nan, t), C("0.0", t), C("0.5", t)
  bits = lambda b, v: em.cast(b, "bitcast", v, t, it)
  def ilogb(b, v):   # the exponent of v > 0 (of its leading bit where v is subnormal)
    bv = bits(b, v)
    ef = em.arith(b, "shrui", it, bv, cmb)
    sub = em.arith(b, "subi", it, cw, em.math(b, "ctlz", it, bv))
    return em.select(b, em.cmpi(b, "eq", ef, c0, it), sub, em.arith(b, "subi", it, ef, cbias), it)
  pow2 = lambda b, k: em.cast(b, "bitcast", em.arith(b, "shli", it, em.arith(b, "addi", it, k, cbias), cmb), it, t)
  x, y = names
  ax, ay = (em.cast(fr, "bitcast", em.arith(fr, "andi", it, bits(fr, v), cmask), it, t) for v in (x, y))
  ok = em.arith(fr, "andi", "i1", em.cmpf(fr, "olt", ax, finf, t), em.cmpf(fr, "ogt", ay, fzero, t))
  r0, ey = em.select(fr, ok, ax, fzero, t), ilogb(fr, ay)
  gap = em.arith(fr, "maxsi", it, em.arith(fr, "subi", it, ilogb(fr, r0), ey), c0)
  n = em.cast(fr, "index_cast", em.select(fr, ok, em.arith(fr, "addi", it, gap, c1), c0, it), it, "index")
  with em.for_(fr, C(0, "index"), n, C(1, "index"), inits=[r0], ty=t) as lp:
    (r,), B = lp.accs, lp.body
    d = em.arith(B, "maxsi", it, em.arith(B, "subi", it, ilogb(B, r), ey), c0)
    d1 = em.arith(B, "divui", it, d, c3)   # 2^d in three factors: 2^2097 (f64's widest gap) is not a double
    p1, p3 = pow2(B, d1), pow2(B, em.arith(B, "subi", it, d, em.arith(B, "muli", it, d1, c2)))
    top = em.arith(B, "mulf", t, em.arith(B, "mulf", t, em.arith(B, "mulf", t, ay, p1), p1), p3)
    top = em.select(B, em.cmpf(B, "ogt", top, r, t), em.arith(B, "mulf", t, top, fhalf), top, t)
    lp.yields = [em.select(B, em.cmpf(B, "oge", r, ay, t), em.arith(B, "subf", t, r, top), r, t)]
  sign = em.arith(fr, "andi", it, bits(fr, x), csign)
  out = em.cast(fr, "bitcast", em.arith(fr, "ori", it, bits(fr, lp.results[0]), sign), it, t)
  return em.select(fr, ok, out, fnan, t)

# the CPU's table with the GPU's float math (GPU_MATH) in place of its polynomials and libm calls
GPU_RULES = {**RULES, **{(Ops(op), "f"): (lambda lw, op, srcs, names, sdt, dt, fr, u: lw.line(fr, GPU_MATH[op].format(x=names[0], t=sl(dt))))
                         for op in GPU_MATH}, (Ops.MOD, "f"): fmod}

class GPU(Policy):
  """The GPU's policy: the output nest as global ids (GROUP: block ids, the reduces strided over a block's threads),
  UPCAST lanes, GPU_RULES. What the ids and a block's combine are made of is the target's (`ids`, `combine`):
  `gpu` ops here, arithmetic on the thread's number in the emulator's policy (Emulated)."""
  name, rules, keeps, streams = "uop-lower-gpu", GPU_RULES, False, False   # a scratch row per GPU thread would live in local memory: recompute
  def __init__(self, f: Func, group_threads: int = GROUP_MAX):
    if group_threads < 1 or group_threads & (group_threads - 1): raise ValueError(f"group_threads must be a power of 2, got {group_threads}")
    self.group_threads, self.tid = group_threads, None
    ends = [s for s in f.roots[0].src if s.op is Ops.END] if f.roots else []
    if len(ends) > 1: raise PassError(f"uop-lower-gpu maps one loop nest per kernel, @{f.name} has {len(ends)}", ends[1].loc)
    self.end = ends[0] if ends else None
    # serial ranges (a scatter's indexed axis: iterations may write one element) stay loops inside each thread
    rngs = sorted(self.end.src[1:], key=_axis) if self.end else []
    self.out_rngs, self.serial = [r for r in rngs if r.attrs["kind"] != "serial"], [r for r in rngs if r.attrs["kind"] == "serial"]
    self.lane_groups: dict[UOp, list[UOp]] = {}   # a reduce of one lane -> the same reduce of every lane
    self.workgroup: list[tuple[str, str]] = []     # the block's shared memory: (name, memref type) per block reduce
    self.stood = 0   # sets of stand_ins made (each set's leaves named apart)
    self.regs: Frame | None = None   # (ROW, the row held) the frame of a thread's share of the row, while its names hold
    self.at: list[tuple[UOp, str | None]] = []   # ... its elements' positions, and whether each is in the row (None: always)

  def bind(self, lw: Placement):
    n = _prod(_size(r) for r in self.out_rngs)
    top = [u for u in lw.sink.toposort if u.op is Ops.REDUCE and lw.ranges[u] <= set(self.out_rngs)]
    red = max((_prod(_size(r) for r in u.src[1:]) for u in top), default=0)
    def invariant(u: UOp) -> bool: return not any(v.op is Ops.REDUCE and lw.rs(v) & set(u.src[1:]) for v in u.src[0].toposort)
    self.group = set(top) if top and all(map(block_reduce, top)) and n <= GROUP_OUTPUTS and red >= GROUP_MIN_REDUCE else set()
    # ROW: every reduce of the kernel is a value of its row (no output range but the last in it), as softmax's max and
    # sum or layernorm's mean and variance: a block per row computes each reduce once, across its threads, then its
    # threads stride over the row's outputs
    reds = [u for u in lw.sink.toposort if u.op is Ops.REDUCE]
    rows = set(self.out_rngs[:-1])
    self.row = bool(reds) and not self.serial and len(self.out_rngs) >= 1 and _size(self.out_rngs[-1]) > 1 and \
      all(block_reduce(u) and lw.rs(u) <= rows and invariant(u) for u in reds) and \
      max(_prod(_size(r) for r in u.src[1:]) for u in reds) >= GROUP_MIN_REDUCE
    if self.row: self.group = set(reds)
    # a GROUP thread reads UPCAST neighbours of the reduce's last range per step (16-byte loads of a contiguous row)
    # where that range's static size divides by UPCAST, or is the reduce's only range (the remainder then one element
    # per step, after the vectors); otherwise (a symbolic row, a reduce of a reduce, which the lanes' index math would
    # rebuild) one element per step
    self.lanes = lanes(lw.f)
    def vec(u: UOp) -> int:
      n = im.cval(max(u.src[1:], key=_axis).src[0]) or 1
      if _nested(u) and not self.row: return 1   # (a ROW kernel's reduces below u are computed before it)
      return _dividing(n, self.lanes) if n % UPCAST == 0 else self.lanes if len(u.src) == 2 and n >= self.lanes else 1
    self.vec = {u: vec(u) for u in self.group}
    # UPCAST (tinygrad's name): a thread computes UPCAST neighbours along the last axis, so its loads and stores of
    # contiguous operands are 16-byte vectors (the last range becomes digit * UPCAST + j: the back end sees the
    # alignment in the address), and the lanes' reduces share one loop (a matmul thread then loads A[m, k] once for 4
    # outputs). Not with nested reduces, nor along a symbolic last axis (its value need not be a multiple of UPCAST).
    last = (im.cval(self.out_rngs[-1].src[0]) or 0) if self.out_rngs else 0
    nested = any(_nested(u) for u in lw.sink.toposort if u.op is Ops.REDUCE)
    self.upcast = _dividing(last, self.lanes) if not self.group and last and not nested and not self.serial else 1
    steps = max((_prod(_size(r) for r in u.src[1:]) // self.vec[u] for u in self.group), default=0)   # a GROUP thread's steps
    if self.row: steps, n = max(steps, _size(self.out_rngs[-1])), _prod(_size(r) for r in self.out_rngs[:-1])   # a block per row
    if self.group: self.local, self.glob = min(self.group_threads, max(32, _pow2_at_least(steps))), n
    else: self.local = max(1, min(n // self.upcast, LOCAL_MAX)); self.glob = max(1, -(-(n // self.upcast) // self.local))  # empty: one idle thread
    # grid stride: past GRID_MAX blocks, thread g computes outputs g, g + threads, ... (a launch that fits any size; more
    # blocks would only queue behind the ones resident on the chip)
    self.stride = not self.group and self.glob > GRID_MAX
    if self.stride: self.glob = GRID_MAX
    if self.glob >= 1 << 31:
      raise PassError(f"uop-lower-gpu: {n} outputs need {self.glob} blocks, more than a launch holds (2^31 - 1)", self.end.loc)
    self.n_out = n
    self.hold = self.held(reds) if self.row else None

  def held(self, reds: list[UOp]) -> tuple[int, int] | None:
    """(vec, steps) where a ROW kernel's threads hold the row in registers: a static row every reduce runs over (one
    range of its length) of which a thread's share, `steps` steps of `vec` neighbours (16 bytes where vec divides the row),
    fits in ROW_REGS registers; None: the row is read once per reduce and once for the outputs."""
    n = im.cval(self.out_rngs[-1].src[0])
    if n is None or any(len(u.src) != 2 or im.cval(u.src[1].src[0]) != n for u in reds): return None
    vec = _dividing(n, self.lanes)
    steps, words = -(-n // vec // self.local), max(max(COMPUTE.get(u.dtype, u.dtype).itemsize // 4, 1) for u in reds)
    if steps * vec * words > ROW_REGS: return None
    axis = im.next_axis(self.end)   # a thread's first element of its full steps, and of its last step where that is partial
    self.pos = [UOp(Ops.RANGE, dtypes.index, (im.const(n),), attrs(axis=axis + k, kind="loop")) for k in range(2)]
    return vec, steps

  def launch(self, name: str) -> Launch: return Launch(name, (self.glob, 1, 1), (self.local, 1, 1), bool(self.group), self.upcast, self.row)

  # -- what the ids, a block's combine and the function are made of
  def gpu_id(self, lw: Placement, kind: str) -> str: return lw.em.gpu_id(lw.root, kind)   # at the top of the kernel
  def ids(self, lw: Placement):
    if self.tid is None: self.tid, self.bid = self.gpu_id(lw, "thread_id"), self.gpu_id(lw, "block_id")
  def threads(self, lw: Placement, fr: Frame, body) -> None:
    """body(block, thread id) as every thread of the block runs it: here, this thread in fr."""
    body(fr, self.tid)
  def combine(self, lw: Placement, fr: Frame, u: UOp, dt: DType, part) -> str:
    """The reduce u of the block's threads' parts (part(block, thread id) -> name) in every thread: each warp folds its
    lanes' parts by shuffles (xor 16, 8, .. 1), lane 0 of each warp writes the warp's to shared memory (a buffer per
    reduce), a barrier, then every thread folds the warps' (a second barrier where a serial loop may come back to it)."""
    em, op, t, c = lw.em, u.attrs["op"], sl(dt), (lambda v, d=dtypes.index: lw.const(v, d))
    x, width, warps = part(fr, self.tid), min(32, self.local), max(1, self.local // 32)
    for off in (width >> k for k in range(1, width.bit_length())):
      x = lw.scalar_alu(op, dt, [x, em.shuffle_xor(fr, x, c(off, dtypes.int32), c(width, dtypes.int32), t)], dt, fr, u)
    if warps == 1: return x
    self.workgroup.append((sh := f"%partials{len(self.workgroup)}", mt := f"memref<{warps}x{t}, #gpu.address_space<workgroup>>"))
    warp = em.arith(fr, "divui", "index", self.tid, c(32))
    with em.if_(fr, em.cmpi(fr, "eq", em.arith(fr, "remui", "index", self.tid, c(32)), c(0), "index")) as (then, _):
      em.store(then, x, sh, warp, mt)
    em.barrier(fr)
    for w in range(warps): x = em.load(fr, sh, c(w), mt) if w == 0 else lw.scalar_alu(op, dt, [x, em.load(fr, sh, c(w), mt)], dt, fr, u)
    if self.serial: em.barrier(fr)
    return x
  def func(self, lw: Placement, name: str, private: bool = False) -> str:
    # read-only buffers through the read-only cache (ld.global.nc), except in a thread with its lanes' accumulators (a
    # register-tiled matmul), where ptxas then trades spills for 32 registers (sm_80 and sm_90)
    return Emitter.gpu_func(name, params([mem_type(t.dtype) for t in lw.f.args]), lw.root, self.local,
                            frozenset() if self.lane_groups else read_only(lw.f), [f"{n}: {t}" for n, t in self.workgroup])
  @staticmethod
  def launch_call(em: Emitter, b: Block, launch: Launch, args: list[str], tys: list[str], c) -> None:
    """The host's launch of a kernel on args (c: an index constant of the host function)."""
    em.launch(b, launch.name, [c(x) for x in launch.global_size], [c(x) for x in launch.local_size], args, tys)
  @staticmethod
  def alloc(em: Emitter, b: Block, mt: str) -> str: return em.gpu_alloc(b, mt)   # a split reduce's partials, for one call
  @staticmethod
  def free(em: Emitter, b: Block, x: str, mt: str) -> None: em.gpu_dealloc(b, x, mt)
  @staticmethod
  def module(kernels: list[str], host: list[str]) -> str: return Emitter.gpu_module(kernels, host)

  # -- the output ranges: digits of the thread's number
  def digits(self, lw: Placement, fr: Frame, rngs: list[UOp], lin: str, upcast: int = 1) -> list[str]:
    """Each range's digit of the row-major linear index lin (last range fastest); with upcast, lin counts groups of
    `upcast` along the last range and the last digit is the group's first element. Symbolic sizes divide at their values
    read at run time, so the positions in use are lin < their product, packed into the first threads (a symbolic
    outermost range, the usual one, divides nothing: its digit is lin over the static sizes inside it)."""
    sizes, out = _ends(rngs, upcast), []
    for k, size in enumerate(sizes):
      iv = lin if im.cval(stride := _count(sizes[k + 1:])) == 1 else lw.em.arith(fr, "divui", "index", lin, lw.value(stride))
      out.append(lw.em.arith(fr, "remui", "index", iv, lw.value(size)) if k else iv)
    if upcast > 1: out[-1] = lw.em.arith(fr, "muli", "index", out[-1], lw.const(upcast, dtypes.index))
    return out

  def flat_ivs(self, lw: Placement, fr: Frame, rngs: list[UOp], lin: str | list[str]):
    """Bind each range to its digit of lin (a linear index, or digits already computed)."""
    for r, iv in zip(rngs, self.digits(lw, fr, rngs, lin) if isinstance(lin, str) else lin):
      lw.open[r] = fr; lw.place(r, fr, iv)

  @staticmethod
  def close_flat(lw: Placement, fr: Frame, rngs: list[UOp]):
    for u in fr.placed: del lw.names[u]
    for r in rngs: del lw.open[r]

  def lane(self, x: UOp, j: int) -> UOp:
    """x at lane j of an upcast thread (last output range + j)."""
    return x if self.upcast == 1 else at_lane(x, self.out_rngs[-1], j)

  # -- side effects: the output nest, a GROUP kernel's store by thread 0
  def effect(self, lw: Placement, u: UOp) -> bool:
    if u is self.end: self.nest_rows(lw, u) if self.row else self.nest(lw, u)
    elif u.op is Ops.STORE and self.group and not self.row: self.store0(lw, u)
    else: return False
    return True

  def nest(self, lw: Placement, u: UOp):
    """The output loop nest as the thread's number (a block's in GROUP kernels), its serial ranges loops inside."""
    lw.done.add(u)
    if not self.n_out: return   # an empty output: the kernel stores nothing
    self.ids(lw)
    guard, lin = None, self.bid if self.group else self.gpu_id(lw, "global_id")
    # the launch is sized for the largest sizes: threads (blocks, in GROUP) past the sizes' values at run time do nothing
    count = _count(_ends(self.out_rngs, self.upcast))
    fr = Frame(lw.root, self.out_rngs[0] if self.out_rngs else None); fr.chain = frozenset(self.out_rngs)
    if self.stride: lp = lw.em.open_for(lin, lw.value(count), lw.const(self.glob * self.local, dtypes.index), body=fr); lin = lp.iv
    elif im.cval(count) is None or not self.group and self.glob * self.local * self.upcast != self.n_out:
      guard = lw.em.cmpi(lw.root, "ult", lin, lw.value(count), "index")
    self.flat_ivs(lw, fr, self.out_rngs, self.digits(lw, fr, self.out_rngs, lin, self.upcast))
    stores = []
    for st0 in (u.src[0].src if u.src[0].op is Ops.GROUP else (u.src[0],)):   # a kernel with several outputs: each store's lanes
      lanes = [self.lane(st0, j) for j in range(self.upcast)]
      for ru in (x for x in lanes[0].toposort if self.upcast > 1 and x.op is Ops.REDUCE and self.out_rngs[-1] in lw.rs(x)):
        group = [self.lane(ru, j) for j in range(self.upcast)]
        if all(g in st.toposort for g, st in zip(group, lanes)): self.lane_groups.update((g, group) for g in group)
      stores += lanes
    inner = lw.open_loops(fr, self.serial)
    for st in stores:   # every lane's loads before any store: a store might alias them and keep them from merging
      if st.op is Ops.STORE and st.src[0].op is Ops.INDEX: lw.address(st.src[0]); lw.value(st.src[1])
    for st in stores: lw.effect(st)
    lw.close_loops(inner)
    self.close_flat(lw, fr, self.out_rngs)
    lw.em.close_for(lw.root, lp) if self.stride else lw.em.splice(lw.root, fr, guard)

  def nest_rows(self, lw: Placement, u: UOp):
    """ROW: the block's number is the row (the output ranges but the last); the row's reduces go ahead of a loop of
    the block's threads over the last range, in which each thread computes and stores its outputs."""
    lw.done.add(u)
    self.ids(lw)
    rows, last = self.out_rngs[:-1], self.out_rngs[-1]
    count = _count(_ends(rows))
    guard = lw.em.cmpi(lw.root, "ult", self.bid, lw.value(count), "index") if im.cval(count) is None else None
    fr = Frame(lw.root, rows[0] if rows else None); fr.chain = frozenset(rows)
    self.flat_ivs(lw, fr, rows, self.bid)
    sts = list(u.src[0].src if u.src[0].op is Ops.GROUP else (u.src[0],))
    if self.hold:   # the row in registers: its reduces first (each folds the thread's registers), then the outputs from them
      at = self.row_frame = fr if rows else lw.root   # (a kernel of one row places its reduces in the kernel's frame)
      sts = [st.substitute(self.stand_ins(lw, at, st)) for st in sts]
      self.threads(lw, at, lambda b, tid: self.held_outputs(lw, b, tid, sts))
      self.forget(lw)
      self.close_flat(lw, fr, rows)
      return lw.em.splice(lw.root, fr, guard)
    # UPCAST outputs per step along a static last range that divides by it (16-byte loads and stores of the row). The
    # lanes' index math would rebuild the row's reduces inside them: they are computed first and stand in as named leaves
    vec = _dividing(im.cval(last.src[0]) or 1, self.lanes)
    if vec > 1:
      sts = [st.substitute(self.stand_ins(lw, fr, st)) for st in sts]
      sts = [at_lane(st, last, j) for st in sts for j in range(vec)]
    def outputs(b: Block, tid: str):
      inner = Frame(fr, last)
      lp = lw.em.open_for(tid, lw.value(_ends([last], vec)[0]), lw.const(self.local, dtypes.index), body=inner)
      lw.open[last] = inner
      lw.place(last, inner, lp.iv if vec == 1 else lw.em.arith(inner, "muli", "index", lp.iv, lw.const(vec, dtypes.index)))
      for st in sts:   # every lane's loads before any store (a store might alias them and keep them from merging)
        if st.op is Ops.STORE and st.src[0].op is Ops.INDEX: lw.address(st.src[0]); lw.value(st.src[1])
      for st in sts: lw.effect(st)
      self.close_flat(lw, inner, [last])
      lw.em.close_for(b, lp)
    self.threads(lw, fr, outputs)
    self.close_flat(lw, fr, rows)
    lw.em.splice(lw.root, fr, guard)

  def registers(self, lw: Placement, b: Block, tid: str) -> Frame:
    """The frame, in b, of thread tid's share of the row: step s of the thread holds elements (tid + s * local) * vec +
    0..vec-1, whose positions (`self.at`) are affine in two ranges standing for the thread (`pos`): tid * vec and, where
    the last step is partial, that step's first element clamped into the row (a thread past the row's end re-reads the
    row's last neighbours, which it neither folds nor stores). A value is named once per frame: where b is the block of
    the previous call (the GPU: every thread runs in place, in the row's frame) the frame is that one, so each element is
    loaded once for every reduce and the outputs; another block (the emulator's loop over threads) gets a new one."""
    if self.regs is not None and self.regs.lines is b.lines: return self.regs
    self.forget(lw)
    (vec, steps), (p, q), em = self.hold, self.pos, lw.em
    c, ok, fr = (lambda v: lw.const(v, dtypes.index)), None, self.row_frame
    R = self.regs = Frame(fr, p)
    R.lines, R.chain = b.lines, fr.chain | {p, q}
    lw.open[p] = lw.open[q] = R
    n = im.cval(self.out_rngs[-1].src[0]) // vec   # the row's steps of vec
    full = n // self.local
    if full: lw.place(p, R, em.arith(R, "muli", "index", tid, c(vec)))
    self.at = [(im.add(p, im.const((s * self.local) * vec + j)), None) for s in range(full) for j in range(vec)]
    if steps > full:
      k = em.arith(R, "addi", "index", tid, c(full * self.local)) if full else tid
      ok = em.cmpi(R, "ult", k, c(n), "index")
      lw.place(q, R, em.arith(R, "muli", "index", em.arith(R, "minui", "index", k, c(n - 1)), c(vec)))
      self.at += [(im.add(q, im.const(j)), ok) for j in range(vec)]
    return R

  def forget(self, lw: Placement):
    """The registers' frame closed: its names are out of scope."""
    if self.regs is None: return
    for u in self.regs.placed: del lw.names[u]
    for r in self.pos: del lw.open[r]
    self.regs = None

  def held_partial(self, lw: Placement, u: UOp, dt: DType, b: Block, tid: str) -> str:
    """Thread tid's part of the ROW reduce u from its share of the row in registers: u's source at each of its elements
    (loads shared with the row's other reduces and its outputs; the reduces below u are values by now), folded in pairs;
    the threads past the row's end fold the identity."""
    op, sdt, (r,) = u.attrs["op"], u.dtype, u.src[1:]
    src = u.src[0].substitute(self.stand_ins(lw, lw.target(u), u.src[0])) if _nested(u) else u.src[0]
    R, ident = self.registers(lw, b, tid), lw.const(REDUCE_IDENTITY[op](dt), dt)
    xs = [lw.cast(lw.value(im.affine_simplify(src.substitute({r: at}))), sdt, dt, R) for at, _ in self.at]
    xs = [x if ok is None else lw.em.select(R, ok, x, ident, sl(dt)) for x, (_, ok) in zip(xs, self.at)]
    while len(xs) > 1: xs = [lw.scalar_alu(op, dt, xs[i:i + 2], dt, R, u) if i + 1 < len(xs) else xs[i] for i in range(0, len(xs), 2)]
    return xs[0]

  def held_outputs(self, lw: Placement, b: Block, tid: str, sts: list[UOp]):
    """Thread tid's outputs of the row from its registers, a step's vec neighbours at a time (16-byte stores); a partial
    step's stores only by the threads within the row."""
    R, vec, last = self.registers(lw, b, tid), self.hold[0], self.out_rngs[-1]
    for k in range(0, len(self.at), vec):
      lanes = [im.affine_simplify(st.substitute({last: at})) for at, _ in self.at[k:k + vec] for st in sts]
      for st in lanes:   # every lane's loads before any store (a store might alias them and keep them from merging)
        if st.op is Ops.STORE and st.src[0].op is Ops.INDEX: lw.address(st.src[0]); lw.value(st.src[1])
      n = len(R.lines)
      for st in lanes: lw.effect(st)
      if (ok := self.at[k][1]) is not None: lw.em.wrap_if(R, ok, n)

  def stand_ins(self, lw: Placement, fr: Frame, of: UOp) -> dict[UOp, UOp]:
    """The row's reduces below `of` (values once computed) as named leaves placed in fr: lanes built by at_lane keep them,
    where its index math would rebuild each reduce inside them."""
    n, self.stood = self.stood, self.stood + 1   # (computing one reduce may make the stand-ins of those below it)
    stand = {r: UOp(Ops.DEFINE_VAR, r.dtype, (), attrs(name=f"row_reduce_{n}_{k}", min=0, max=0))
             for k, r in enumerate(v for v in of.toposort if v in self.group)}
    for r, x in stand.items(): lw.ranges[x] = lw.rs(r); lw.place(x, fr, lw.value(r))
    return stand

  def store0(self, lw: Placement, u: UOp):
    """Every thread holds the reduced value; thread 0 writes it."""
    lw.done.add(u)
    idx, v = u.src
    if idx.op is Ops.INDEX: lw.address(idx); lw.value(v)
    fr = lw.target(u)
    t0 = lw.em.cmpi(fr, "eq", self.tid, lw.const(0, dtypes.index), "index")
    n = len(fr.lines)
    lw.store(u)
    lw.em.wrap_if(fr, t0, n)

  # -- reductions across the block
  def reduce(self, lw: Placement, u: UOp) -> str | None:
    if u in self.lane_groups: return self.reduce_lanes(lw, self.lane_groups[u], u)
    if u not in self.group: return None
    self.ids(lw)
    op, sdt = u.attrs["op"], u.dtype
    dt = COMPUTE.get(sdt, sdt)
    fr = lw.target(u)
    return lw.place(u, fr, lw.cast(self.combine(lw, fr, u, dt, lambda b, tid: self.partial(lw, u, dt, b, tid)), dt, sdt, fr))

  def partial(self, lw: Placement, u: UOp, dt: DType, b: Block, tid: str) -> str:
    """Thread tid's part of the GROUP reduce u (in dtype dt): steps tid, tid + local, ... of its flattened ranges, in b."""
    if self.hold: return self.held_partial(lw, u, dt, b, tid)
    op, sdt, fr, rngs, t = u.attrs["op"], u.dtype, lw.target(u), sorted(u.src[1:], key=_axis), sl(dt)
    init = lw.const(REDUCE_IDENTITY[op](dt), dt)
    loop = Frame(fr, rngs[0]); loop.chain = fr.chain | set(rngs)
    lp = lw.em.open_for(tid, "", "", [init], t, body=loop)
    # step i of the thread reads elements i*vec .. i*vec+vec-1 of the last range: every lane's value first, so their
    # loads sit together (the back end merges them into one vector load), then the lanes fold into the one accumulator
    self.flat_ivs(lw, loop, rngs, self.digits(lw, loop, rngs, lp.iv, vec := self.vec[u]))
    new = lp.accs[0]
    src = u.src[0]
    if vec > 1 and _nested(u):   # (ROW: softmax's sum of exp(x - max)) the reduces below it are values by now
      src = src.substitute(self.stand_ins(lw, fr, src))
    lanes = [at_lane(src, rngs[-1], j) for j in range(vec)] if vec > 1 else [src]   # (at_lane rebuilds even lane 0)
    for x in [lw.cast(lw.value(x), sdt, dt, loop) for x in lanes]: new = lw.scalar_alu(op, dt, [new, x], dt, loop, u)
    self.close_flat(lw, loop, rngs)
    lp.hi, lp.step = lw.value(_count(_ends(rngs, vec))), lw.const(self.local, dtypes.index)
    lw.em.close_for(b, lp, [new], t)
    if not (tail := (im.cval(rngs[-1].src[0]) or 0) % vec): return lp.results[0]
    # the remainder of the only range (n % vec elements at n - tail ..): one element per step, from the same threads
    rest = Frame(fr, rngs[0]); rest.chain = loop.chain
    lp2 = lw.em.open_for(tid, lw.const(tail, dtypes.index), lw.const(self.local, dtypes.index), lp.results, t, body=rest)
    self.flat_ivs(lw, rest, rngs, [lw.em.arith(rest, "addi", "index", lp2.iv, lw.const(im.cval(rngs[-1].src[0]) - tail, dtypes.index))])
    new = lw.scalar_alu(op, dt, [lp2.accs[0], lw.cast(lw.value(u.src[0]), sdt, dt, rest)], dt, rest, u)
    self.close_flat(lw, rest, rngs)
    lw.em.close_for(b, lp2, [new], t)
    return lp2.results[0]

  def reduce_lanes(self, lw: Placement, us: list[UOp], want: UOp) -> str:
    """The same reduce of every upcast lane in one loop over its ranges (flattened), one accumulator per lane."""
    fr, dt, accs = self.flat_reduce(lw, us, None, 1)
    for u, acc in zip(us, accs): lw.place(u, fr, lw.cast(acc, dt, u.dtype, fr))
    return lw.names[want]

  def flat_reduce(self, lw: Placement, us: list[UOp], lo: str | None, step: int) -> tuple[Frame, DType, list[str]]:
    """One loop over the ranges of reduces us (the same op over the same ranges), flattened, from lo (None: 0) by step,
    one accumulator per reduce in the compute dtype (rounded once, as uop-lower-cpu); returns the frame the loop is in,
    that dtype and the accumulators' results."""
    op, sdt = us[0].attrs["op"], us[0].dtype
    dt = COMPUTE.get(sdt, sdt)
    fr, rngs, t = lw.target(us[0]), sorted(us[0].src[1:], key=_axis), sl(dt)
    init = lw.const(REDUCE_IDENTITY[op](dt), dt)
    loop = Frame(fr, rngs[0]); loop.chain = fr.chain | set(rngs)
    lp = lw.em.open_for(lo or "", "", "", [init] * len(us), t, body=loop)
    self.flat_ivs(lw, loop, rngs, lp.iv)
    new = [lw.scalar_alu(op, dt, [acc, lw.cast(lw.value(u.src[0]), sdt, dt, loop)], dt, loop, u) for u, acc in zip(us, lp.accs)]
    self.close_flat(lw, loop, rngs)
    lp.hi = lw.value(_count(_ends(rngs)))
    if lo is None: lp.lo = lw.const(0, dtypes.index)
    lp.step = lw.const(step, dtypes.index)
    lw.em.close_for(fr, lp, new, t)
    return fr, dt, lp.results


def lower_kernel(f: Func, name: str | None = None, group_threads: int = GROUP_MAX, policy: type[GPU] = GPU, chip: str | None = None,
                 tf32: bool = False, tile: int = -1) -> tuple[str, Launch]:
  """One kernel func (uop dialect, kernel level) -> (a `gpu.func ... kernel` over signless memrefs, its launch sizes).
  group_threads: threads per block of GROUP kernels at most; policy: GPU, or a policy that runs it elsewhere (the
  emulator's); chip (None: no target's facts), tf32 and tile: a contraction's tiled lowering (codegen.gpu_tiles) where
  its plan accepts the kernel on that chip."""
  from morok_mlir.codegen import gpu_tiles   # (built on this module's policy)
  p = gpu_tiles.plan(f, chip, tf32, tile) if policy is GPU else None
  lw = Lowerer(f, pol := gpu_tiles.Tiled(f, p) if p is not None else policy(f, group_threads))
  lw.effect(lw.sink)
  return pol.func(lw, name := name or f.name), pol.launch(name)

def lower_schedule(f: Func, launches: dict[str, list[Launch]], kernels: dict[str, Func], policy: type[GPU] = GPU,
                   temps: dict[str, tuple] | None = None) -> str:
  """@schedule -> a host function of the kernels' launches (policy.launch_call), in schedule order (one stream: order is
  the dependency); a kernel of several launches (a split reduce) on scratch buffers temps[kernel] ((elements, dtype)
  each) of its call, after its arguments."""
  em, head, body, consts = Emitter("c"), Block(), Block(), {}
  def c(v: int) -> str:   # launch sizes: one constant each, ahead of the launches
    if v not in consts: consts[v] = em.const(head, v)
    return consts[v]
  for callee, slots in kernel_calls(f, kernels):
    tts = [mem_type(dt.ptr(n)) for n, dt in (temps or {}).get(callee, ())]
    tmp = [policy.alloc(em, body, t) for t in tts]
    for l in launches[callee]:
      policy.launch_call(em, body, l, [arg(s) for s in slots] + tmp, [mem_type(f.args[s].dtype) for s in slots] + tts, c)
    for x, t in zip(tmp, tts): policy.free(em, body, x, t)
  em.splice(head, body)
  return Emitter.func(f.name, params([mem_type(t.dtype) for t in f.args]), head)

def lower_module(funcs: list[Func], group_threads: int = GROUP_MAX, policy: type[GPU] = GPU, **target) -> str:
  """Every kernel (lower_kernel; target: its chip, tf32, tile; a split reduce's phases, codegen.gpu_split) and the
  schedule's launches, as one module."""
  from morok_mlir.codegen.gpu_split import split   # (built on this module)
  kernels = {f.name: f for f in funcs if "uop.kernel" in f.attrs}
  texts, launches, temps = [], {}, {}
  for f in funcs:
    if f.name in kernels:
      sp = split(f)
      temps[f.name], launches[f.name] = sp.scratch if sp else (), []
      for g in sp.phases if sp else (f,):
        t, l = lower_kernel(g, group_threads=group_threads, policy=policy, **target); texts.append(t); launches[f.name].append(l)
    elif "uop.schedule" not in f.attrs: raise PassError(f"@{f.name} is neither a kernel (uop.kernel) nor the schedule (uop.schedule): run uop-kernel-split first")
  return policy.module(texts, [lower_schedule(f, launches, kernels, policy, temps) for f in funcs if "uop.schedule" in f.attrs])

@register("uop-lower-gpu", "Kernels -> gpu.func in gpu.module @kernels (ids for output ranges, GROUP reductions by shuffles and shared memory, "
          "tiled contractions on tensor cores for a chip); "
          "@schedule -> gpu.launch_func", on_uops=False,
          chip=Option(str, "", "the target chip (sm_80, sm_90, ...): contractions tiled for its tensor cores (empty: none)"),
          tf32=Option(bool, False, "f32 contractions may run on tensor cores as tf32 (PyTorch's allow_tf32)"),
          tile=Option(int, -1, "a tiled contraction's block tile: its place in gpu_tiles.TILES (-1: the heuristic's)"))
def uop_lower_gpu(module_op, chip: str = "", tf32: bool = False, tile: int = -1):
  from mlir import ir
  from morok_mlir.codegen.gpu_tiles import TARGETS
  if chip and chip not in TARGETS: raise PassError(f"uop-lower-gpu: unknown chip {chip!r}")
  replace_module_body(module_op, lower_module(import_module(module_op), chip=chip or None, tf32=tf32, tile=tile))
  with module_op.context: module_op.attributes[GPU_CONTAINER] = ir.UnitAttr.get()
