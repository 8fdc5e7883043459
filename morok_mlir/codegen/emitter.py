"""The one place MLIR text is built: SSA names, nesting and indentation of a function body (Emitter), as text, not
through the bindings' `ir.Value`s (building ops through the bindings costs tens of microseconds an op: a compile's
hundred thousand ops would take seconds).

A `Block` is a region body being written (a loop's, an if's, a function's); an op's text goes into the block it is
placed in, and a block's lines go into its parent's, indented, when the op that owns it closes. A value is its SSA
name, a str that formats into op text; its type is the caller's (the typed helpers take it)."""
from __future__ import annotations
import contextvars
from contextlib import contextmanager
from dataclasses import dataclass, field

class Block:
  """A region body being written: its lines go into the parent's when the op that owns it closes."""
  def __init__(self): self.lines: list[str] = []

def indent(lines: list[str], by: str = "  ") -> list[str]: return [by + l for l in lines]

@dataclass
class Loop:
  """An open scf.for: body (a Block of the caller's kind), its induction variable, and its iter_args (accs), whose values
  after the loop are `results` (once the loop is closed with what the body yields)."""
  body: Block
  iv: str
  lo: str
  hi: str
  step: str
  accs: list[str] = field(default_factory=list)
  inits: list[str] = field(default_factory=list)
  res: str = ""
  yields: list[str] = field(default_factory=list)   # what the body yields (a `for_` body sets it)
  results: list[str] = field(default_factory=list)
  unroll: bool = True   # False: LLVM is not to unroll it (the loop's latch annotated)

NO_UNROLL = " {loop_annotation = #llvm.loop_annotation<unroll = #llvm.loop_unroll<disable = true>>}"

_PUBLIC = contextvars.ContextVar("public_attrs", default="")
@contextmanager
def public_attrs(text: str):
  """The attributes of every public func.func written meanwhile (in this thread): a device's choice, such as the CPU's
  noinline, for the functions it calls."""
  token = _PUBLIC.set(text)
  try: yield
  finally: _PUBLIC.reset(token)

class Emitter:
  """SSA names (`%{stem}{n}`, n counting up: a name is never reused in a function) and the text of ops and regions."""
  def __init__(self, stem: str = "", start: int = 0): self.stem, self.n = stem, start
  def fresh(self, stem: str | None = None) -> str:
    name = f"%{self.stem if stem is None else stem}{self.n}"; self.n += 1
    return name
  def op(self, b: Block, text: str) -> str:
    """A one-result op placed at the end of b: its name (a kernel has a hundred thousand of these: fresh() is inlined)."""
    name = f"%{self.stem}{self.n}"; self.n += 1
    b.lines.append(f"{name} = {text}")
    return name
  def const(self, b: Block, v, ty: str = "index") -> str: return self.op(b, f"arith.constant {v} : {ty}")

  # -- typed ops: the text of arith/memref ops from operand names and their MLIR types (op: the name without `arith.`)
  def arith(self, b: Block, op: str, ty: str, *xs: str) -> str: return self.op(b, f"arith.{op} {', '.join(xs)} : {ty}")
  def math(self, b: Block, op: str, ty: str, *xs: str) -> str: return self.op(b, f"math.{op} {', '.join(xs)} : {ty}")
  def cast(self, b: Block, op: str, x: str, src: str, dst: str) -> str: return self.op(b, f"arith.{op} {x} : {src} to {dst}")
  def cmpi(self, b: Block, pred: str, x: str, y: str, ty: str) -> str: return self.op(b, f"arith.cmpi {pred}, {x}, {y} : {ty}")
  def cmpf(self, b: Block, pred: str, x: str, y: str, ty: str) -> str: return self.op(b, f"arith.cmpf {pred}, {x}, {y} : {ty}")
  def select(self, b: Block, cond: str, x: str, y: str, ty: str, cty: str = "") -> str:
    """cond ? x : y; cty, the condition's type where it is a vector of i1 (a scalar i1 is implied)."""
    return self.op(b, f"arith.select {cond}, {x}, {y} : {cty + ', ' if cty else ''}{ty}")
  def load(self, b: Block, buf: str, i: str, mt: str) -> str: return self.op(b, f"memref.load {buf}[{i}] : {mt}")
  def store(self, b: Block, v: str, buf: str, i: str, mt: str): b.lines.append(f"memref.store {v}, {buf}[{i}] : {mt}")
  def constant(self, b: Block, text: str) -> str: return self.op(b, f"arith.constant {text}")   # text: `value : type`
  def vload(self, b: Block, buf: str, i: str, mt: str, vt: str) -> str: return self.op(b, f"vector.load {buf}[{i}] : {mt}, {vt}")
  def vstore(self, b: Block, v: str, buf: str, i: str, mt: str, vt: str, attrs: str = ""):
    b.lines.append(f"vector.store {v}, {buf}[{i}]{' {' + attrs + '}' if attrs else ''} : {mt}, {vt}")
  def from_elements(self, b: Block, xs: list[str], vt: str) -> str: return self.op(b, f"vector.from_elements {', '.join(xs)} : {vt}")
  def broadcast(self, b: Block, x: str, ty: str, vt: str) -> str: return self.op(b, f"vector.broadcast {x} : {ty} to {vt}")
  def reduction(self, b: Block, kind: str, x: str, vt: str, ty: str, fm: str = "") -> str:
    return self.op(b, f"vector.reduction <{kind}>, {x}{fm} : {vt} into {ty}")
  def shuffle(self, b: Block, x: str, y: str, mask: list[int], xt: str, yt: str) -> str:
    return self.op(b, f"vector.shuffle {x}, {y} {mask} : {xt}, {yt}")
  def create_mask(self, b: Block, n: str, mask_t: str) -> str: return self.op(b, f"vector.create_mask {n} : {mask_t}")   # lanes < n
  def maskedload(self, b: Block, buf: str, i: str, mask: str, other: str, mt: str, mask_t: str, vt: str) -> str:
    return self.op(b, f"vector.maskedload {buf}[{i}], {mask}, {other} : {mt}, {mask_t}, {vt} into {vt}")
  def maskedstore(self, b: Block, buf: str, i: str, mask: str, v: str, mt: str, mask_t: str, vt: str):
    b.lines.append(f"vector.maskedstore {buf}[{i}], {mask}, {v} : {mt}, {mask_t}, {vt}")
  def prefetch(self, b: Block, buf: str, i: str, write: bool, mt: str, locality: int = 3):
    b.lines.append(f"memref.prefetch {buf}[{i}], {'write' if write else 'read'}, locality<{locality}>, data : {mt}")
  def fma(self, b: Block, x: str, y: str, z: str, vt: str) -> str: return self.op(b, f"vector.fma {x}, {y}, {z} : {vt}")
  def vbitcast(self, b: Block, x: str, src: str, dst: str) -> str: return self.op(b, f"vector.bitcast {x} : {src} to {dst}")
  def intrinsic(self, b: Block, name: str, xs: list[str], tys: list[str], ret: str) -> str:
    """A call of LLVM intrinsic `name` (a CPU instruction the vector ops do not say, VNNI's vpdpbusd)."""
    return self.op(b, f"llvm.call_intrinsic \"{name}\"({', '.join(xs)}) : ({', '.join(tys)}) -> {ret}")
  def alloca(self, b: Block, mt: str, align: int = 64, heap: bool = False) -> str:
    """Memory of type mt, on the stack (alloca) or the heap (alloc: dealloc it)."""
    return self.op(b, f"memref.{'alloc' if heap else 'alloca'}() {{alignment = {align} : i64}} : {mt}")
  def dealloc(self, b: Block, x: str, mt: str): b.lines.append(f"memref.dealloc {x} : {mt}")
  def call(self, b: Block, fn: str, args: list[str], tys: list[str]):
    """A call of @fn, which returns nothing, on args of types tys."""
    b.lines.append(f"func.call @{fn}({', '.join(args)}) : ({', '.join(tys)}) -> ()")

  # -- gpu ops
  def gpu_id(self, b: Block, kind: str) -> str: return self.op(b, f"gpu.{kind} x")   # kind: thread_id, block_id, global_id
  def barrier(self, b: Block): b.lines.append("gpu.barrier")
  def shuffle_xor(self, b: Block, x: str, offset: str, width: str, ty: str) -> str:
    """x of the lane whose number differs from this one's by xor offset, among `width` lanes (gpu.shuffle xor)."""
    name = self.fresh()
    b.lines.append(f"{name}:2 = gpu.shuffle xor {x}, {offset}, {width} : {ty}")
    return f"{name}#0"
  def async_copy(self, b: Block, src: str, i: str, dst: str, j: str, n: int, valid: str, smt: str, dmt: str) -> str:
    """cp.async of n elements src[i..] -> dst[j..] (dst in shared memory), `valid` of them read (the rest zero-filled),
    past the L1 cache (cp.async.cg: the tile is read once, from shared memory)."""
    return self.op(b, f"nvgpu.device_async_copy {src}[{i}], {dst}[{j}], {n}, {valid} {{bypassL1}} : {smt} to {dmt}")
  def async_commit(self, b: Block, tokens: list[str]) -> str: return self.op(b, f"nvgpu.device_async_create_group {', '.join(tokens)}")
  def async_wait(self, b: Block, group: str, pending: int): b.lines.append(f"nvgpu.device_async_wait {group} {{numGroups = {pending} : i32}}")
  def mma_sync(self, b: Block, a: list[str], bb: list[str], c: list[str], shape: tuple[int, int, int], ptx: str, reg: str) -> str:
    """A warp's D = A x B + C (nvvm.mma.sync, row x col, f32 accumulators): a, bb its registers of type reg, c its 4 f32."""
    m, n, k = shape
    types = f", multiplicandAPtxType = #nvvm.mma_type<{ptx}>, multiplicandBPtxType = #nvvm.mma_type<{ptx}>" if ptx != "f16" else ""
    return self.op(b, f"nvvm.mma.sync A[{', '.join(a)}] B[{', '.join(bb)}] C[{', '.join(c)}] {{layoutA = #nvvm.mma_layout<row>, "
                      f"layoutB = #nvvm.mma_layout<col>{types}, shape = #nvvm.shape<m = {m}, n = {n}, k = {k}>}} : ({reg}, {reg}, f32) "
                      f"-> !llvm.struct<({', '.join(['f32'] * len(c))})>")
  def extract(self, b: Block, x: str, i: int, n: int) -> str:
    """Field i of an mma.sync's n f32 results."""
    return self.op(b, f"llvm.extractvalue {x}[{i}] : !llvm.struct<({', '.join(['f32'] * n)})>")
  def ldmatrix(self, b: Block, sh: str, i: str, n: int, trans: bool, mt: str, elem: str) -> str:
    """A warp's n 8x8 matrices of 16-bit elements from shared memory (ldmatrix, .trans where trans): each lane gives
    the address of one matrix row and gets register r of each (nvgpu.ldmatrix: vector<n x 2 x elem>)."""
    return self.op(b, f"nvgpu.ldmatrix {sh}[{i}] {{numTiles = {n} : i32, transpose = {str(trans).lower()}}} : {mt} -> vector<{n}x2x{elem}>")
  def vextract(self, b: Block, x: str, i: int, row: str, vt: str) -> str: return self.op(b, f"vector.extract {x}[{i}] : {row} from {vt}")
  def tf32(self, b: Block, x: str) -> str:
    """An f32 rounded to tf32 (to nearest, ties away: cvt.rna.tf32.f32), as an mma.sync register."""
    return self.op(b, f"nvvm.convert.float.to.tf32 {x} {{rnd = #nvvm.fp_rnd_mode<rna>}}")
  def llvm_bitcast(self, b: Block, x: str, src: str, dst: str) -> str: return self.op(b, f"llvm.bitcast {x} : {src} to {dst}")
  def launch(self, b: Block, kernel: str, blocks: list[str], threads: list[str], args: list[str], tys: list[str]):
    """A launch of @kernels::@kernel over blocks x threads (three sizes each)."""
    b.lines.append(f"gpu.launch_func @kernels::@{kernel} blocks in ({', '.join(blocks)}) threads in ({', '.join(threads)}) "
                   f"args({', '.join(f'{a} : {t}' for a, t in zip(args, tys))})")
  def gpu_alloc(self, b: Block, mt: str) -> str: return self.op(b, f"gpu.alloc () : {mt}")   # device memory, from the host
  def gpu_dealloc(self, b: Block, x: str, mt: str): b.lines.append(f"gpu.dealloc {x} : {mt}")

  # -- scf.for: open (names), write the body, close (the text goes into the parent)
  def open_for(self, lo: str, hi: str, step: str, inits: list[str] = (), ty: str = "", body: Block | None = None) -> Loop:
    """An scf.for's names (counter, iter_args, results) before its body is written; bounds may be set until it closes."""
    lp = Loop(body if body is not None else Block(), self.fresh("i"), lo, hi, step, [self.fresh("acc") for _ in inits], list(inits))
    if inits: lp.res = self.fresh("")
    return lp
  def close_for(self, parent: Block, lp: Loop, yields: list[str] = (), ty: str = "", ity: str = ""):
    """The loop's text at the end of parent, its body yielding `yields` (of type ty) to the next iteration; ity: the
    counter's integer type where it is not index."""
    head, end = f"scf.for {lp.iv} = {lp.lo} to {lp.hi} step {lp.step}", "}" + ("" if lp.unroll else NO_UNROLL)
    if not lp.inits:
      parent.lines.extend([head + " {", *indent(lp.body.lines), end]); return
    res = lp.res
    n = f":{len(lp.inits)}" if len(lp.inits) > 1 else ""
    tys = ", ".join([ty] * len(lp.inits))
    args = ', '.join(f'{a} = {i}' for a, i in zip(lp.accs, lp.inits))
    parent.lines.extend([f"{res}{n} = {head} iter_args({args}) -> ({tys}){' : ' + ity if ity else ''} {{",
                         *indent(lp.body.lines), f"  scf.yield {', '.join(yields)} : {tys}", end])
    lp.results = [res] if len(lp.inits) == 1 else [f"{res}#{k}" for k in range(len(lp.inits))]
  @contextmanager
  def for_(self, parent: Block, lo: str, hi: str, step: str, inits: list[str] = (), ty: str = ""):
    """`with em.for_(b, lo, hi, step) as lp:` writes lp.body; with inits, the body ends by setting lp.yields."""
    lp = self.open_for(lo, hi, step, inits, ty)
    yield lp
    self.close_for(parent, lp, lp.yields, ty)

  @contextmanager
  def if_(self, parent: Block, cond: str, orelse: bool = False):
    """`with em.if_(b, c) as (then, other):` an scf.if without results (other: the else block, when orelse)."""
    then, other = Block(), Block() if orelse else None
    yield then, other
    parent.lines.extend([f"scf.if {cond} {{", *indent(then.lines)] + (["} else {", *indent(other.lines)] if orelse else []) + ["}"])
  def if_value(self, parent: Block, cond: str, then: tuple[Block, str], other: tuple[Block, str], ty: str) -> str:
    """An scf.if with one result of type ty: each branch a (Block, the value it yields) pair."""
    r, body = self.fresh(""), lambda b, v: indent(b.lines + [f"scf.yield {v} : {ty}"])
    parent.lines.extend([f"{r} = scf.if {cond} -> ({ty}) {{", *body(*then), "} else {", *body(*other), "}"])
    return r
  def splice(self, parent: Block, b: Block, cond: str | None = None):
    """b's lines at the end of parent (a body with no op of its own), under scf.if cond when given."""
    parent.lines.extend([f"scf.if {cond} {{", *indent(b.lines), "}"] if cond else b.lines)
  def wrap_if(self, b: Block, cond: str, start: int):
    """The lines of b from start on, under scf.if cond."""
    b.lines[start:] = [f"scf.if {cond} {{", *indent(b.lines[start:]), "}"]

  # -- functions
  @staticmethod
  def func(name: str, args: list[str], body: Block, head: str = "func.func", attrs: str = "", ret: str = "return", depth: int = 1,
           private: bool = False) -> str:
    """The text of a function whose body is b, the function `depth` levels into its module; private: a func.func only its
    module calls, of internal linkage: LLVM then inlines a helper into its one caller and keeps no copy of its own (an
    external one would also get the JIT engine's packed wrapper, a second copy inlined: LLVM's time for it thrice)."""
    if private: head, attrs = "func.func private", attrs or " attributes {llvm.linkage = #llvm.linkage<internal>}"
    by, attrs = "  " * depth, attrs or (_PUBLIC.get() if head == "func.func" else "")
    lines = "".join(f"{by}  {l}\n" for l in body.lines)
    return f"{by}{head} @{name}({', '.join(args)}){attrs} {{\n{lines}{by}  {ret}\n{by}}}\n"
  @staticmethod
  def module(funcs: list[str], head: str = "module", depth: int = 0) -> str:
    """A module (or gpu.module @name: head) of functions' texts."""
    by = "  " * depth
    return f"{by}{head} {{\n{''.join(funcs)}{by}}}\n"
  @staticmethod
  def gpu_func(name: str, args: list[str], body: Block, block_size: int, readonly: frozenset[int] = frozenset(),
               workgroup: list[str] = (), min_blocks: int = 0) -> str:
    """A gpu.func kernel run by blocks of block_size threads (inside a gpu.module); args: `name: type`, each 16-byte
    aligned (the runtime's allocations are 256-byte aligned: the back end may then use 16-byte loads and stores); the
    readonly ones `noalias readonly`, which the NVPTX back end loads through the read-only cache (ld.global.nc);
    workgroup: `name: memref type` of the block's shared memory (16-byte aligned: cp.async writes 16 bytes); min_blocks:
    the blocks a multiprocessor must hold at once (`.minnctapersm`), which lets ptxas use every register that leaves."""
    args = [f"{a} {{llvm.align = 16 : i64{', llvm.noalias, llvm.readonly' if i in readonly else ''}}}" for i, a in enumerate(args)]
    shared = f" workgroup({', '.join(f'{w} {{llvm.align = 16 : i64}}' for w in workgroup)})" if workgroup else ""
    occ = f", nvvm.minctasm = {min_blocks} : i32" if min_blocks else ""
    head = f"{shared} kernel attributes {{known_block_size = array<i32: {block_size}, 1, 1>{occ}}}"
    return Emitter.func(name, args, body, "gpu.func", head, "gpu.return", 2)
  @staticmethod
  def gpu_module(kernels: list[str], host: list[str] = ()) -> str:
    """A module of GPU kernels (in `gpu.module @kernels`) and the host functions that launch them."""
    gpu = [Emitter.module(kernels, "gpu.module @kernels", 1)] if kernels else []
    return Emitter.module(gpu + list(host), f"module attributes {{{GPU_CONTAINER}}}")

# a function's parameters: the kernel's buffers %arg0.. in slot order, then index parameters its callers pass
LO, HI, TID = "%lo", "%hi", "%tid"   # the bounds of the chunk a thread runs, and that thread's index
THREAD = "%thread"                   # an emulated GPU kernel's last parameter: the number of the thread it runs as
def arg(i: int) -> str: return f"%arg{i}"
def params(types: list[str], *index: str) -> list[str]:
  """`%argI: type` per buffer type, then `name: index` per index parameter (LO, HI, TID)."""
  return [f"{arg(i)}: {t}" for i, t in enumerate(types)] + [f"{x}: index" for x in index]

GPU_CONTAINER = "gpu.container_module"   # the unit attribute of a module holding gpu.modules
