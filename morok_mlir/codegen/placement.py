"""Placement: which loop each op of a kernel lives in, apart from how a target prints it.

Ranges closed by one `uop.end` (or `uop.reduce`) become nested loops in the order of their `axis`; every op is
emitted in the innermost open loop among the ranges it depends on (so loop-invariant loads and index math are
hoisted), a reduce opens its loops (carrying the accumulator as `iter_args`) where its result is needed.

Targets differ by a `Policy` object the placement asks at each of its decisions, not by subclasses: what a loop nest
becomes (CPU: scf.for, the outer one over a thread's chunk; GPU: global ids, grid strides, block reductions), which
per-op table prints the ops, whether scratch rows are kept, and the function's head. lower_cpu.CPU and lower_gpu.GPU
are the two policies (the GPU emulator's is lower_gpu.GPU with ids read from arguments); lower_cpu.Lowerer adds each
op's semantics (the rules the tables cannot hold) to this placement."""
from __future__ import annotations
from math import prod
from morok_mlir.ir.bridge import Func, arg_buffer, attr_text, const_text, type_text
from morok_mlir.core.dtype import DType, dtypes
from morok_mlir.core.uop import UOp, attrs
from morok_mlir.dialects.ops import Ops, REDUCE_IDENTITY
from morok_mlir.core import index_math as im
from morok_mlir.core.index_math import at_lane
from morok_mlir.core.kernel_facts import blocked, in_place, rsize, twin
from morok_mlir.ir.registry import PassError
from morok_mlir.codegen.emitter import Block, Emitter, Loop, arg
from morok_mlir.codegen.tables import ALU, COMPUTE, UNSUPPORTED, cls, mem_type, sl

def _axis(r: UOp) -> int: return r.attrs.get("axis", 0)

def _int_attr(f: Func, name: str, default: int = 0) -> int:
  if type(v := f.attrs.get(name, default)) is not int: raise PassError(f"@{f.name}: attribute {name} must be an i64 integer, got {attr_text(v)}")
  return v

def kernel_calls(f: Func, kernels: dict[str, Func]):
  """The kernels @schedule f calls, in order, as (callee, slots), each checked against its callee's arguments."""
  for u in f.roots[0].toposort if f.roots else []:
    if u.op is not Ops.KERNEL: continue
    callee, slots = u.attrs.get("callee", ("", ""))[1], u.attrs.get("slots", ())
    if callee not in kernels: raise PassError(f"uop.kernel calls @{callee}, which is not a kernel of this module", u.loc)
    if any(not 0 <= s < len(f.args) for s in slots):
      raise PassError(f"uop.kernel slots {list(slots)} out of range for {len(f.args)} buffers", u.loc)
    k = kernels[callee]
    if [f.args[s].dtype for s in slots] != [a.dtype for a in k.args]:
      raise PassError(f"uop.kernel passes ({', '.join(type_text(f.args[s].dtype) for s in slots)}) to @{callee}"
                      f"({', '.join(type_text(a.dtype) for a in k.args)})", u.loc)
    yield callee, slots

def outer_range(f: Func) -> UOp | None:
  """The outermost loop range of a kernel (the first axis its store's `end` closes), or None."""
  ends = [u for u in f.roots[0].toposort if u.op is Ops.END] if f.roots else []
  rngs = [r for e in ends for r in e.src[1:] if r.op is Ops.RANGE]
  return min(rngs, key=_axis, default=None)

# ops whose operands `value` does not lower first in operand order (they open loops, run effects or take addresses)
_OWN_OPERANDS = frozenset((Ops.RANGE, Ops.BUFFER, Ops.AFTER, Ops.REDUCE, Ops.LOAD, Ops.INDEX))

class Frame(Block):
  """A loop body being written (the emitter's Block) and what placement knows of it: its range, the values placed in
  it (forgotten when it closes), its depth and the ranges open around it."""
  def __init__(self, parent: Frame | None, rng: UOp | None = None):
    self.parent, self.rng, self.lines, self.placed, self.step, self.loop = parent, rng, [], [], 1, None
    self.iv = self.end = self.acc = self.res = None
    self.depth = parent.depth + 1 if parent else 0
    self.chain = (parent.chain | {rng}) if parent else frozenset()

class Policy:
  """What a target makes of the placement's loops; the defaults are plain scf.for loops. One per kernel: lower_cpu.CPU
  (a parallel kernel's outer loop over a thread's chunk), lower_gpu.GPU (the output nest as global ids)."""
  name = "uop-lower-cpu"   # the pass, for messages
  rules: dict = {}         # the per-op table, (op, dtype class) -> rule: lower_cpu.RULES, lower_gpu.GPU_RULES
  keeps = True             # whether uop.keep's scratch rows are honoured (stack memory per thread)
  streams = True           # whether uop.nontemporal's vector stores are (a CPU's cache bypass: a GPU thread's lanes are not its loop's)
  def bind(self, lw: Placement) -> None:
    """The target's decisions on a kernel, once its ranges are known."""
  def effect(self, lw: Placement, u: UOp) -> bool:
    """Place the side effect u the target's way and return True, or return False for the plain loops."""
    return False
  def reduce(self, lw: Placement, u: UOp) -> str | None:
    """The value of reduce u run the target's way, or None for a loop carrying the accumulator."""
    return None
  def bounds(self, lw: Placement, fr: Frame, lp: Loop) -> None:
    """Set the bounds of the closing loop lp of frame fr where the target decides them (from 0 by 1 to its size else)."""
  def func(self, lw: Placement, name: str, private: bool) -> str:
    """The text of the kernel's function once placed."""
    raise NotImplementedError

class Placement:
  """One kernel placed into loops as its values are asked for (`value`, `effect`), printed through `em` and the policy's
  table; the op semantics beyond the table are lower_cpu.Lowerer's."""
  def __init__(self, f: Func, policy: Policy):
    self.f, self.em, self.policy, self.rules = f, Emitter(), policy, policy.rules
    self.line = self.em.op   # line(frame, op text) -> the op's result, placed at the end of the frame
    if len(f.roots) != 1 or f.roots[0].op is not Ops.SINK or f.results: raise PassError(f"kernel @{f.name} must end in one uop.sink and return nothing")
    self.sink = f.roots[0]
    self.root = Frame(None)
    self.fm = " fastmath<reassoc,contract>" if "uop.fastmath" in f.attrs else ""
    self.lanes = _int_attr(f, "uop.nontemporal", 0) if policy.streams else 0   # see store_lanes
    self.block = _int_attr(f, "uop.reduce_block", 0)   # float add reduces longer than this accumulate in blocks
    self.names: dict[UOp, str] = {}      # values valid at the current point
    self.open: dict[UOp, Frame] = {}     # range -> the loop frame it is the counter of
    self.done: set[UOp] = set()          # side effects emitted
    self.ranges: dict[UOp, frozenset] = {}
    for i, t in enumerate(f.args): self.names[t] = arg(i)
    self.scratch: set[UOp] = set()
    self.kept_stores: set[UOp] = set()   # stores of kept values (plain stores, whatever uop.nontemporal says)
    if policy.keeps and "uop.keep" in f.attrs: self.keep(tuple(f.attrs["uop.keep"]))
    self.rs(self.sink)
    policy.bind(self)

  def keep(self, axes: tuple[int, ...]):
    """uop.keep (optimize.kept): each named reduce stores its source, element by element as it reduces it, where the
    loops that compute the same value at their own indices (`twin`) then load it instead (an `after` on the reduce
    orders them). That place is the output itself when the kernel's one store writes each of those elements once and
    has the source's dtype (a softmax row is scaled in place, from cache: one row of cache, not two), else a scratch row
    on the stack (one per call, so per thread)."""
    loops = [r for e in self.sink.toposort if e.op is Ops.END for r in e.src[1:]]
    nodes, sub = set(self.sink.toposort), {}
    reds = [u for u in self.sink.toposort if u.op is Ops.REDUCE and u.src[1:] and min(_axis(r) for r in u.src[1:]) in axes]
    for n, red in enumerate(sorted(reds, key=lambda u: min(_axis(r) for r in u.src[1:]))):
      if (tw := twin(red, nodes, loops)) is None: raise PassError(f"@{self.f.name}: uop.keep names a reduce its loops do not recompute", red.loc)
      (t, K, J), src = tw, red.src[0]
      sizes = [rsize(r) for r in K]   # a symbolic size: its row laid out for the largest
      # the output row (stored for k, loaded back at j), unless the output goes out in nontemporal lanes (past the cache)
      if n == 0 and not self.lanes and (out := in_place(self.sink, red, t, J)) is not None:
        buf, at = out.src[0].src
        kat, jat = at.substitute(dict(zip(J, K))), at
      else:
        buf = arg_buffer(-1 - len(self.scratch), src.dtype.ptr(prod(sizes)))
        self.scratch.add(buf)
        self.names[buf] = self.em.alloca(self.root, mem_type(buf.dtype))
        kat, jat = im.linearize(K, sizes), im.linearize(J, sizes)
      st = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, src.dtype.ptr(), (buf, kat)), src), loc=red.loc)
      self.kept_stores.add(st)
      sub[red] = new = red.replace(src=(UOp(Ops.AFTER, src.dtype, (src, st), loc=red.loc), *red.src[1:]))
      sub[t] = UOp(Ops.LOAD, t.dtype, (UOp(Ops.INDEX, t.dtype.ptr(), (UOp(Ops.AFTER, buf.dtype, (buf, new)), jat)),), loc=t.loc)
    self.sink = self.sink.substitute(sub)

  # -- placement
  def rs(self, u: UOp) -> frozenset:
    """The open ranges u depends on: those of its sources, plus itself for a range, minus those a reduce/end closes.
    Only nodes not seen yet are walked (nodes built later, such as upcast lanes, reuse what is known below them)."""
    if (known := self.ranges.get(u)) is not None: return known
    stack = [(u, False)]
    while stack:
      x, post = stack.pop()
      if x in self.ranges: continue
      if not post:
        stack.append((x, True)); stack.extend((s, False) for s in x.src if s not in self.ranges)
        continue
      rs = frozenset().union(*(self.ranges[s] for s in x.src))
      if x.op is Ops.RANGE: rs |= {x}
      if x.op in (Ops.REDUCE, Ops.END):
        if any(r.op is not Ops.RANGE for r in x.src[1:]): raise PassError(f"uop.{x.op} closes a non-range", x.loc)
        rs -= set(x.src[1:])
      self.ranges[x] = rs
    return self.ranges[u]
  def target(self, u: UOp) -> Frame:
    if (missing := [r for r in self.rs(u) if r not in self.open]):
      raise PassError(f"uop.{u.op} uses range axis={_axis(missing[0])} outside the loop that closes it", u.loc)
    fr = max((self.open[r] for r in self.ranges[u]), key=lambda fr: fr.depth, default=self.root)
    if not self.ranges[u] <= fr.chain: raise PassError(f"uop.{u.op} mixes ranges of different loop nests", u.loc)
    return fr
  def place(self, u: UOp, fr: Frame, name: str) -> str:
    self.names[u] = name; fr.placed.append(u)
    return name
  def const(self, v, dt: DType) -> str: return self.value(UOp(Ops.CONST, dt, (), attrs(value=v)))

  def open_loops(self, parent: Frame, rngs: list[UOp], inits: list[str] | None = None) -> list[Frame]:
    """Nested loops over rngs (sorted by axis) under parent; with inits, each carries one accumulator."""
    frames = []
    for r in sorted(rngs, key=_axis):
      if r in self.open: raise PassError(f"range axis={_axis(r)} is closed while its loop is already open", r.loc)
      end = self.value(r.src[0])
      fr = Frame(frames[-1] if frames else parent, r)
      fr.loop = lp = self.em.open_for("", end, "", [""] if inits is not None else [], body=fr)
      fr.iv, fr.end, fr.acc, fr.res = lp.iv, end, lp.accs[0] if lp.accs else None, lp.res   # the loop's names, for its body
      self.open[r] = fr; frames.append(fr)
    if inits is not None:   # each loop's accumulator starts from the enclosing loop's
      for i, fr in enumerate(frames): fr.loop.inits = [frames[i - 1].acc if i else inits[0]]
    return frames
  def close_loops(self, frames: list[Frame], ty: str | None = None, yielded: str | None = None):
    c0, c1 = self.const(0, dtypes.index), self.const(1, dtypes.index)
    for i, fr in reversed(list(enumerate(frames))):
      for u in fr.placed: del self.names[u]
      del self.open[fr.rng]
      lp = fr.loop
      lp.lo = c0
      self.policy.bounds(self, fr, lp)
      lp.step = c1 if fr.step == 1 else self.const(fr.step, dtypes.index)
      self.em.close_for(fr.parent, lp, [frames[i + 1].res if i + 1 < len(frames) else yielded] if ty is not None else [], ty or "")

  # -- side effects
  def effect(self, u: UOp):
    if u in self.done or self.policy.effect(self, u): return
    self.done.add(u)
    if u.op in (Ops.SINK, Ops.GROUP):
      for s in u.src: self.effect(s)
    elif u.op is Ops.END:
      frames = self.open_loops(self.target(u), list(u.src[1:]))
      self.effect(u.src[0])
      self.close_loops(frames)
    elif u.op is Ops.STORE: self.store(u)
    elif u.op is Ops.AFTER: self.value(u)
    elif u.op is Ops.REDUCE: self.value(u)   # a kept reduce (see keep): its loop has filled the scratch row
    else: raise PassError(f"uop.{u.op} cannot be lowered as a side effect", u.loc)

  def store(self, u: UOp):
    idx, v = u.src
    if idx.op is not Ops.INDEX: raise PassError("uop.store must store through a uop.index", u.loc)
    # a kept value's store (to a scratch row) is no output store: lowering rebuilds its node (affine index forms),
    # so it is known by its buffer too
    if self.lanes and u not in self.kept_stores and idx.src[0] not in self.scratch: return self.store_lanes(u)
    buf, i, gate = self.address(idx)
    val = self.value(v)
    fr = self.target(u)
    if idx.dtype.base.is_bool: val = self.em.cast(fr, "extui", val, "i1", "i8")
    n = len(fr.lines)
    self.em.store(fr, val, buf, i, mem_type(idx.src[0].dtype))
    if gate: self.em.wrap_if(fr, gate, n)

  def store_lanes(self, u: UOp):
    """uop.nontemporal = VW (optimize.streaming_store chose the kernel): the innermost loop steps VW; the store's value
    is computed for lanes r .. r+VW-1 (index math in affine form, so the lanes' loads are base + 0..VW-1 and LLVM's
    SLP vectorizer turns the VW isomorphic scalar chains into vector code), then one nontemporal vector store."""
    fr = self.target(u)
    fr.step = self.lanes
    lanes = [at_lane(u, fr.rng, j) for j in range(self.lanes)]
    vals = [self.value(st.src[1]) for st in lanes]
    buf, i, _ = self.address(lanes[0].src[0])
    vt = f"vector<{self.lanes}xf32>"
    vec = self.em.from_elements(fr, vals, vt)
    # aligned: the address is a multiple of VW (streaming_store checks the index) in a buffer the runtime aligns
    self.em.vstore(fr, vec, buf, i, mem_type(u.src[0].src[0].dtype), vt, f"alignment = {4 * self.lanes} : i64, nontemporal = true")

  def address(self, idx: UOp) -> tuple[str, str, str | None]:
    return self.value(idx.src[0]), self.value(idx.src[1]), self.value(idx.src[2]) if len(idx.src) > 2 else None

  # -- values
  def value(self, u: UOp) -> str:
    """The SSA name of u's value, emitting it (and its operands, in operand order) where it is first needed."""
    if (n := self.names.get(u)) is not None: return n
    if u.op not in _OWN_OPERANDS:
      # a chain of plain ops is lowered operands first from an explicit post-order (the order the recursion below
      # would take), so each nested call finds its operands named: depth costs heap, not the C stack
      for x in self._operands_first(u): self._value(x)
    return self._value(u)
  def _operands_first(self, u: UOp) -> list[UOp]:
    order, seen, stack = [], set(), [(u, False)]
    while stack:
      x, post = stack.pop()
      if post: order.append(x); continue
      if x in seen or x in self.names: continue
      seen.add(x); stack.append((x, True))
      if x.op not in _OWN_OPERANDS: stack.extend((s, False) for s in reversed(x.src))
    return order[:-1]
  def _value(self, u: UOp) -> str:
    if (n := self.names.get(u)) is not None: return n
    if u.op in UNSUPPORTED: raise PassError(f"{self.policy.name} does not support {UNSUPPORTED[u.op]} yet (uop.{u.op})", u.loc)
    if u.op is Ops.RANGE:
      if u not in self.open: raise PassError(f"range axis={_axis(u)} is used outside the loop that closes it", u.loc)
      return self.open[u].iv
    if u.op is Ops.BUFFER: raise PassError(f"buffer slot {u.attrs.get('slot')} is not an argument of @{self.f.name}", u.loc)
    if u.op is Ops.AFTER:
      for d in u.src[1:]: self.effect(d)
      return self.value(u.src[0])
    if u.op is Ops.REDUCE: return self.reduce(u)
    srcs = [self.value(s) for s in u.src] if u.op not in (Ops.LOAD, Ops.INDEX) else []
    fr = self.target(u)
    if u.op is Ops.CONST: return self.place(u, fr, self.em.constant(fr, const_text(u.attrs['value'], u.dtype.mlir)))
    if u.op is Ops.LOAD: return self.place(u, fr, self.load(u, fr))
    if u.op is Ops.INDEX: raise PassError("uop.index used as a value (only loads and stores take addresses)", u.loc)
    return self.place(u, fr, self.alu(u.op, u.src, srcs, u.dtype, fr, u))

  def reduce(self, u: UOp) -> str:
    op, dt = u.attrs.get("op"), u.dtype
    if op not in REDUCE_IDENTITY: raise PassError(f"reduce op must be add|mul|max|min, got {op!r}", u.loc)
    if cls(dt) not in ALU[op]: raise PassError(f"reduce {op} is not defined on {dt.name}", u.loc)
    if (r := self.policy.reduce(self, u)) is not None: return r
    fr = self.target(u)
    if self.block and op is Ops.ADD and dt.is_float and None not in (n := [im.cval(r.src[0]) for r in u.src[1:]]) and prod(n) > self.block:
      return self.place(u, fr, self.value(blocked(u, self.block)))
    cdt = COMPUTE.get(dt, dt)   # the accumulator's dtype: rounded to dt once, after the loop
    init = self.const(REDUCE_IDENTITY[op](cdt), cdt)
    frames = self.open_loops(fr, list(u.src[1:]), inits=[init])
    if not frames: return self.place(u, fr, self.value(u.src[0]))  # a reduce over no ranges is its source
    v = self.cast(self.value(u.src[0]), dt, cdt, frames[-1])
    acc = self.scalar_alu(op, cdt, [frames[-1].acc, v], cdt, frames[-1], u, self.fm if dt.is_float else "")
    self.close_loops(frames, sl(cdt), acc)
    return self.place(u, fr, self.cast(frames[0].res, cdt, dt, fr))
