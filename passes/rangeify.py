"""uop-rangeify: movement ops become index arithmetic over `uop.range` loop counters.

For each result of a graph function we open one `loop` range per dimension (size-1 dims index 0) and compute the
value at those indices, walking the graph: movement ops only transform the index expressions (no copies), pad
gates loads and selects 0 outside, expand indexes 0, reduce_axis opens `reduce` ranges and becomes `uop.reduce`.

What gets materialised (`uop.bufferize`): `contiguous`, a reduce_axis whose result is broadcast along a
loop that is *outer* to the loops it depends on (inlining it there would recompute it per outer iteration), a
value that a second kernel needs when it costs SHARED_COST ops or more (`Rangeifier.note`), the elementwise chain on a
reduce worth a kernel when a later reduce reads it (`epilogue`: the bias and relu run once in the product's kernel,
instead of per read), a second product met inline in a kernel that computes one already (uop-optimize tiles one), and a cat of CAT_PARTS
parts or more read where it cannot be inlined (a convolution's operand: `cat_parts`), written part by part.
A reduce that depends only on a prefix of the loop nest stays inline: the CPU lowering computes it once per
iteration of that prefix, so `x - x.max(1, keepdim=True)` and softmax are one kernel each.

Symbolic sizes: the function's define_vars (sorted by emit.var_order) are read from one more input, an int64 buffer of
their values (after the graph's inputs), each clamped to its [min, max] so index math keeps its bounds and no value can
reach past a buffer. Loops run to those values; a buffer whose size depends on a variable (an output, a bufferize) is
allocated for the variable's max (its memref has the max size), and realize() returns the outputs' leading elements."""
from __future__ import annotations
from math import prod
from morok_mlir.core.uop import UOp, attrs, sym_attr, box
from morok_mlir.ir.bridge import Func, arg_buffer
from morok_mlir.ir.emit import var_order
from morok_mlir.core.dtype import dtypes
from morok_mlir.dialects.ops import Ops, MOVEMENT, REDUCE_IDENTITY
from morok_mlir.ir.registry import register, PassError
from morok_mlir.core import index_math as im
from morok_mlir.core.kernel_facts import ranges_of
from morok_mlir.core.threefry import threefry2x32


VIEWS = MOVEMENT | {Ops.DETACH}   # ops that only re-index their source: never stored, never counted as work
SHARED_COST = 16   # a value recomputed by several kernels is stored once when its inline graph has this many ops
# what an op counts for there, in plain ops (an add), where a kernel reads the value inside a reduce (a window's taps,
# each computing it again): a vector exp2 or log2 is a polynomial of ~10 instructions, sin's with its range reduction
# twice that, a division or square root a few times an add's latency (default 1). Read once an element (an optimizer's
# updates), recomputing them costs less than storing and loading them: Adam's MLP step took 20 kernels and 2% longer
OP_COST = {Ops.EXP2: 8, Ops.LOG2: 8, Ops.SIN: 16, Ops.POW: 16, Ops.SQRT: 4, Ops.RECIP: 4, Ops.FDIV: 4}
REREAD_OPS = 1 << 16   # ops a value recomputed per output would cost before a kernel storing it once pays (see broadcast)
INLINE_LIMIT = 4096   # nodes a shared value's inline graph is searched for (see `inline`)

class Rangeifier:
  def __init__(self, bufs: dict[int, UOp], force: frozenset = frozenset(), users: dict | None = None, outputs: frozenset = frozenset()):
    self.bufs = bufs                      # graph input slot -> kernel-level memref buffer
    self.force = force                    # nodes known to be materialised: every use loads them
    self.axis = 0
    self.memo: dict[tuple, UOp] = {}
    self.loops: list[UOp] = []            # loop ranges of the value being built, outermost first
    self.outer: list[UOp] = []            # those the innermost reduce being built moves with (see broadcast)
    self.root: UOp | None = None          # the node whose store or bufferize is being built
    self.users, self.outputs = users, outputs   # node -> the graph nodes reading it; given, `note` decides what is shared
    self.first_root: dict[UOp, UOp | None] = {}       # graph node -> the first root whose kernel needed it
    self.shared: set[UOp] = set()         # values several kernels need, stored once (see note)
    self.cheap: set[UOp] = set()          # values several kernels need, recomputed by each
    self.windowed: set[UOp] = set()       # values a kernel reads inside a reduce (a window's taps: computed inline per tap)
    self.regions: dict[UOp, set[UOp]] = {}   # memo of inline
    self.materialised: dict[UOp, UOp] = {}
    self.tops: dict[UOp, bool] = {}       # memo of chain_top
    self.contracted: dict[UOp, UOp] = {}  # root -> the contraction its kernel computes inline
    self.late: set[UOp] = set()           # chain tops stored (see rangeify_func)
    # the buffers assigns write in place (kernels that read them run before the assigns' kernels)
    self.targets = {bufs[o.src[0].attrs["slot"]] for o in outputs if o.op is Ops.ASSIGN}
    # an output that is a contiguous() read by nothing else is computed straight into its output buffer (its store is
    # the materialisation contiguous asks for): stored to a buffer of its own first, it would cost a kernel and a copy
    if cont := {o for o in outputs if o.op is Ops.CONTIGUOUS}: cont -= {s for r in outputs for u in r.toposort for s in u.src}
    self.sole = cont

  def new_range(self, size, kind: str) -> UOp:
    self.axis += 1
    return UOp(Ops.RANGE, dtypes.index, (im.sint(size),), attrs(axis=self.axis - 1, kind=kind))

  def loop_ranges(self, shape) -> tuple[list[UOp], list[UOp]]:
    rngs = [self.new_range(s, "loop") if s != 1 else None for s in shape]
    return [r for r in rngs if r is not None], [r if r is not None else im.const(0) for r in rngs]

  def store(self, buf: UOp, node: UOp) -> UOp:
    """Compute node over fresh loops and store it to buf; returns the closed (end) token. A scatter not stored yet is
    updated in place in buf (its target is stored there first), so no copy follows it."""
    saved = self.loops, self.root
    (self.loops, idx), self.root = self.loop_ranges(node.shape), node
    inplace = node.op is Ops.SCATTER and node not in self.materialised
    val = self.value(node, tuple(idx), None, inplace or node in self.sole)
    tok = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, node.dtype.ptr(), (buf, im.linearize(idx, node.shape))), val), loc=node.loc)
    out = UOp(Ops.END, dtypes.void, (tok, *self.loops), loc=node.loc) if self.loops else tok
    if inplace:
      self.materialised[node] = done = self.run(self.scatter(node, UOp(Ops.AFTER, buf.dtype, (buf, out), loc=node.loc)))
      if done.op is Ops.AFTER and done.src[0].op is Ops.AFTER: out = done.src[1]
    self.loops, self.root = saved
    return out

  def store_outputs(self, bufs: list[UOp], nodes: list[UOp]) -> list[UOp]:
    """A store per output, but outputs of one static shape whose values need no reduce share one loop nest: a kernel
    with several stores (a `group`), where what they share is computed once and what they read is read once (an
    optimizer step, a backward pass). A reduce keeps its own kernel: uop-optimize tiles a contraction alone.
    Assigns come last, each in a kernel of its own: every other kernel reads their targets' old contents first."""
    groups: dict = {}
    # cats stored part by part, each on its own; a part that is a cat in a buffer already (densenet's features before
    # the last layer's) is copied whole rather than from its parts again
    tiled = {n: parts for n in nodes if (parts := tiling(n, lambda x: x in self.force)) is not None}
    for k, (b, n) in enumerate(zip(bufs, nodes)):
      joins = all(isinstance(d, int) for d in n.shape) and n.op not in (Ops.SCATTER, Ops.ASSIGN) and self.elementwise(n) and n not in tiled
      groups.setdefault(n.shape if joins else k, []).append((b, n))
    out = []
    for g in groups.values():
      if g[0][1].op is Ops.ASSIGN: continue
      if len(g) > 1: out.append(self.store_group(g))
      elif g[0][1] in tiled: out += self.store_parts(*g[0], tiled[g[0][1]])
      else: out.append(self.store(*g[0]))
    return out + [self.assign(*g[0]) for g in groups.values() if g[0][1].op is Ops.ASSIGN]

  def store_parts(self, buf: UOp, node: UOp, parts: list[tuple[UOp, tuple]]) -> list[UOp]:
    """A cat stored part by part (`tiling`): each part computed over loops of its own shape into its box of buf."""
    saved, out = (self.loops, self.root), []
    for x, pad in parts:
      (self.loops, xidx), self.root = self.loop_ranges(x.shape), node
      out.append(self.store_part(buf, node, xidx, pad[::2], self.value(x, tuple(xidx), None, False), node.loc))
    self.loops, self.root = saved
    return out

  def store_part(self, buf: UOp, node: UOp, idx: list[UOp], lo, v: UOp, loc) -> UOp:
    """v, a part of cat node, stored at idx + lo in buf (node's buffer), closed over the current loops."""
    at = UOp(Ops.INDEX, node.dtype.ptr(), (buf, im.linearize([im.add(i, im.const(o)) for i, o in zip(idx, lo)], laid(buf, node.shape))))
    st = UOp(Ops.STORE, dtypes.void, (at, v), loc=loc)
    return UOp(Ops.END, dtypes.void, (st, *self.loops), loc=loc) if self.loops else st

  def assign(self, buf: UOp, node: UOp) -> UOp:
    """assign(target, value) stored into the target's own buffer (buf), over the box where value differs from the target
    when value is a write through a slice (`where(pad(all true), pad(v), target)`, see `box`: a KV cache's new rows),
    else over all of it. Where the value reads buf at another element than the one stored (`t[0:2] = t[1:3]`, a read of
    an assign's target by another assign), it is stored to a buffer of its own first, read whole before the store."""
    saved = self.loops, self.root
    tgt, w = node.src
    v, lo = box(w, tgt) or (w, (0,) * len(w.shape))
    (self.loops, idx), self.root = self.loop_ranges(v.shape), node
    at = UOp(Ops.INDEX, node.dtype.ptr(), (buf, im.linearize([im.add(i, im.sint(o)) for i, o in zip(idx, lo)], node.shape)))
    val = self.value(v, tuple(idx), None, False)
    if any(u.op is Ops.INDEX and u.src[0] in self.targets and (u.src[0] is not buf or u.src[1] is not at.src[1]) for u in val.toposort):
      val = self.load(self.run(self.bufferize(v)), v, tuple(idx), None)
    tok = UOp(Ops.STORE, dtypes.void, (at, val), loc=node.loc)
    out = UOp(Ops.END, dtypes.void, (tok, *self.loops), loc=node.loc) if self.loops else tok
    self.loops, self.root = saved
    return out

  def store_group(self, group: list[tuple[UOp, UOp]]) -> UOp:
    saved, shape = (self.loops, self.root), group[0][1].shape
    (self.loops, idx), self.root = self.loop_ranges(shape), group[0][1]
    lin = im.linearize(idx, shape)
    sts = tuple(UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, n.dtype.ptr(), (b, lin)), self.value(n, tuple(idx), None, n in self.sole)), loc=n.loc)
                for b, n in group)
    tok = UOp(Ops.GROUP, dtypes.void, sts, loc=group[0][1].loc)
    out = UOp(Ops.END, dtypes.void, (tok, *self.loops), loc=tok.loc) if self.loops else tok
    self.loops, self.root = saved
    return out

  def elementwise(self, node: UOp) -> bool:
    """Whether node's value at an index needs no reduce or scatter, down to the values that are loaded from buffers."""
    seen, todo = {node}, [node]
    while todo:
      x = todo.pop()
      if x is not node and (x in self.force or x.op in (Ops.BUFFER, Ops.CONST)): continue
      if x.op in (Ops.REDUCE_AXIS, Ops.SCATTER): return False
      for y in x.src:
        if y not in seen: seen.add(y); todo.append(y)
    return True

  def run(self, gen):
    """Drive a generator of value requests (see `value`) to its result."""
    v = None
    try:
      while True: v = self.value(*gen.send(v))
    except StopIteration as e: return e.value

  def bufferize(self, node: UOp):
    """(generator, see `value`) The buffer node is materialised into, computed over fresh loops once. A cat is written
    part by part (see `cat_parts`): its last part padded over the whole buffer, then each other part into its slice."""
    if node not in self.materialised:
      saved = self.loops, self.root
      parts = cat_parts(node, lambda x: x in self.force or x in self.materialised)
      (self.loops, idx), self.root = self.loop_ranges(node.shape), node
      val = yield (parts[0], tuple(idx), None, False) if parts else (node, tuple(idx), None, True)
      buf = UOp(Ops.BUFFERIZE, node.dtype.ptr(im.smax(node.size)), (val, *self.loops), loc=node.loc)
      if node.op is Ops.SCATTER: buf = yield from self.scatter(node, buf)
      for p in (parts or [])[1:]:
        x, lo = p.src[0], sym_attr(p, "padding")[::2]
        self.loops, xidx = self.loop_ranges(x.shape)
        v = yield (x, tuple(xidx), None, False)
        buf = UOp(Ops.AFTER, buf.dtype, (buf, self.store_part(buf, node, xidx, lo, v, p.loc)), loc=p.loc)
      self.materialised[node] = buf
      self.loops, self.root = saved
    return self.materialised[node]

  def scatter(self, node: UOp, buf: UOp):
    """(generator) buf (holding node's target) after node's updates: a loop nest over the indices that stores each value,
    or combines it with what is there, at its data-dependent position; gated, so an index outside the axis writes
    nothing. The loops run in the indices' row-major order; the indexed axis is a `serial` loop: two values can meet in
    one element only along it, so the loops outside it may still run on threads."""
    ax, op, ish = node.attrs["axis"], node.attrs["op"], node.src[1].shape
    if 0 in ish: return buf
    rngs = [self.new_range(n, "serial" if d == ax else "loop") if n != 1 else None for d, n in enumerate(ish)]
    self.loops, idx = [r for r in rngs if r is not None], tuple(r if r is not None else im.const(0) for r in rngs)
    i = (yield (node.src[1], idx, None, False))
    i = i if node.src[1].dtype is dtypes.index else UOp(Ops.CAST, dtypes.index, (i,), loc=node.loc)
    if (valid := im.in_bounds(i, 0, node.shape[ax])) is False: return buf
    v = (yield (node.src[2], idx, None, False))
    at = UOp(Ops.INDEX, node.dtype.ptr(), (buf, im.linearize(idx[:ax] + (i,) + idx[ax + 1:], laid(buf, node.shape)))
             + ((valid,) if valid is not None else ()))
    if op != "store": v = UOp(Ops(op), node.dtype, (UOp(Ops.LOAD, node.dtype, (at,), loc=node.loc), v), loc=node.loc)
    st = UOp(Ops.STORE, dtypes.void, (at, v), loc=node.loc)
    return UOp(Ops.AFTER, buf.dtype, (buf, UOp(Ops.END, dtypes.void, (st, *self.loops), loc=node.loc) if self.loops else st), loc=node.loc)


  def load(self, buf: UOp, node: UOp, idx, gate) -> UOp:
    src = (buf, im.linearize(idx, laid(buf, node.shape))) + ((gate,) if gate is not None else ())
    return UOp(Ops.LOAD, node.dtype, (UOp(Ops.INDEX, node.dtype.ptr(), src),), loc=node.loc)

  def value(self, node: UOp, idx: tuple, gate, inline_root=False) -> UOp:
    """The value of node at idx. `_value` is a generator that yields (node, idx, gate, inline_root) for each operand
    value it needs and is sent the answer: this loop runs them on an explicit stack, so a graph's depth costs heap
    memory, never the C stack."""
    self.note(node, idx)
    if (v := self.memo.get(key := (node, idx, gate, inline_root))) is not None: return v
    stack, v = [(key, self._value(*key))], None
    while stack:
      k, g = stack[-1]
      try: req = g.send(v)
      except StopIteration as e:
        stack.pop(); v = self.memo[k] = e.value
        continue
      self.note(req[0], req[1])
      if (v := self.memo.get(req)) is None: stack.append((req, self._value(*req)))
    return v

  def _value(self, u: UOp, idx: tuple, gate, inline_root) -> UOp:
    op, a, s = u.op, u.attrs, u.src
    sh = s[0].shape if s and s[0].shape is not None else None
    if op is Ops.BUFFER: return self.load(self.bufs[a["slot"]], u, idx, gate)
    if op is Ops.CONST: return UOp(Ops.CONST, u.dtype, (), attrs(value=a["value"]))
    if (u in self.force or u in self.shared) and not inline_root and op not in VIEWS: return self.load((yield from self.bufferize(u)), u, idx, gate)
    if op in (Ops.CONTIGUOUS, Ops.COPY, Ops.SCATTER) and not inline_root: return self.load((yield from self.bufferize(u)), u, idx, gate)
    if op in (Ops.CONTIGUOUS, Ops.COPY, Ops.DETACH, Ops.SCATTER): return (yield (s[0], idx, gate, False))   # scatter: its target
    # assign: the result is the new value; realize() rebinds the target to the buffer it is stored in
    if op is Ops.ASSIGN: return (yield (s[1], idx, gate, False))
    if op is Ops.RESHAPE: return (yield (s[0], im.reshape_index(idx, u.shape, sh), gate, False))
    if op is Ops.PERMUTE:
      inv = [0] * len(a["order"])
      for i, p in enumerate(a["order"]): inv[p] = i
      return (yield (s[0], tuple(idx[inv[d]] for d in range(len(sh))), gate, False))
    if op is Ops.EXPAND: return (yield (s[0], tuple(im.const(0) if d == 1 else i for d, i in zip(sh, idx)), gate, False))
    if op is Ops.SHRINK: return (yield (s[0], tuple(im.add(i, im.sint(b)) for i, b in zip(idx, sym_attr(u, "bounds")[::2])), gate, False))
    if op is Ops.FLIP:
      return (yield (s[0], tuple(im.sub(im.sub(im.sint(sh[d]), im.const(1)), i) if d in a["axes"] else i for d, i in enumerate(idx)), gate, False))
    if op is Ops.PAD:
      p, valid, cidx = sym_attr(u, "padding"), None, []
      for d, i in enumerate(idx):
        lo, n = p[2 * d], sh[d]
        cidx.append(im.sub(i, im.sint(lo)))
        valid = im.and_(valid, im.in_bounds(i, lo, im.add(im.sint(lo), im.sint(n)) if isinstance(lo, UOp) or isinstance(n, UOp) else lo + n))
      if valid is None: return (yield (s[0], tuple(cidx), gate, False))
      if valid is False: return UOp(Ops.CONST, u.dtype, (), attrs(value=REDUCE_IDENTITY[Ops.ADD](u.dtype)))
      inner = (yield (s[0], tuple(cidx), im.and_(gate, valid), False))
      return UOp(Ops.WHERE, u.dtype, (valid, inner, UOp(Ops.CONST, u.dtype, (), attrs(value=REDUCE_IDENTITY[Ops.ADD](u.dtype)))), loc=u.loc)
    if op is Ops.GATHER:   # a data-dependent index: element idx of the indices, cast to index, replaces dim `axis`
      ax = a["axis"]
      i = (yield (s[1], idx, gate, False))
      i = i if s[1].dtype is dtypes.index else UOp(Ops.CAST, dtypes.index, (i,), loc=u.loc)
      if (valid := im.in_bounds(i, 0, sh[ax])) is False: return UOp(Ops.CONST, u.dtype, (), attrs(value=REDUCE_IDENTITY[Ops.ADD](u.dtype)))
      inner = (yield (s[0], idx[:ax] + (i,) + idx[ax + 1:], im.and_(gate, valid), False))
      if valid is None: return inner
      return UOp(Ops.WHERE, u.dtype, (valid, inner, UOp(Ops.CONST, u.dtype, (), attrs(value=REDUCE_IDENTITY[Ops.ADD](u.dtype)))), loc=u.loc)
    if op is Ops.REDUCE_AXIS:
      # under a gate (a pad or cat of the reduce's result) the lowering computes the reduce at every place, kept or not:
      # cat(a @ b, c @ d) would run both products over the whole output; one worth a kernel is stored where it is valid
      # a kernel holds one contraction (uop-optimize tiles one): a second one met inline is stored by its own kernel, and
      # so is another reduce of one value for the whole contraction (an RMSNorm's before a matrix-vector product): inline,
      # it keeps the kernel off the tiled contraction, for a few stored elements (one read per row, as softmax's max in
      # attention, is computed where the contraction packs its rows)
      big = reduced(u, 1) > 1
      mm = product(u, big)
      if not inline_root and (u in self.force or u in self.materialised or not self.inlinable(idx) or gate is not None and big
                              or mm and self.contracted.setdefault(self.root, u) is not u
                              or not mm and self.contracted.get(self.root, u) is not u and not any(map(ranges_of, idx))):
        return self.load((yield from self.bufferize(u)), u, idx, gate)
      if mm: self.contracted.setdefault(self.root, u)
      rngs, cidx = [], []
      for d, n in enumerate(sh):
        if d in a["axes"] and n != 1:
          rngs.append(self.new_range(n, "reduce")); cidx.append(rngs[-1])
        else: cidx.append(im.const(0) if d in a["axes"] else idx[d])
      # the loops the reduce's value moves with: its operand is computed once per their values (see broadcast)
      outer, self.outer = self.outer, [r for x in cidx if isinstance(x, UOp) for r in ranges_of(x) if r.attrs["kind"] == "loop"]
      inner = (yield (s[0], tuple(cidx), gate, False))
      self.outer = outer
      if 0 in [sh[d] for d in a["axes"]]:  # empty reduction: the identity
        return UOp(Ops.CONST, u.dtype, (), attrs(value=REDUCE_IDENTITY[a["op"]](u.dtype)))
      return UOp(Ops.REDUCE, u.dtype, (inner, *rngs), attrs(op=a["op"]), loc=u.loc) if rngs else inner
    if op in (Ops.DEFINE_VAR, Ops.BIND): raise PassError(f"uop-rangeify: '{op}' is not supported yet", u.loc)
    if op is Ops.THREEFRY:
      if any(x.dtype is not dtypes.uint64 for x in (u, *s)): raise PassError("uop-rangeify: threefry works on uint64 counters and keys", u.loc)
      return threefry2x32((yield (s[0], idx, gate, False)), (yield (s[1], idx, gate, False)))
    # elementwise: same index into every source; the top of an elementwise chain on a reduce worth a kernel, read at
    # indices it cannot be inlined at (a contraction's operand), is stored whole: its reduce's kernel computes it in the
    # epilogue (bias, relu, a mask) and the reader loads it, instead of storing the reduce and redoing the chain per read
    # a cat read where it cannot be inlined (a convolution's operand) would select among all its parts per element read
    if op is Ops.WHERE and not inline_root and not self.inlinable(idx) and cat_parts(u):
      return self.load((yield from self.bufferize(u)), u, idx, gate)
    if not inline_root and u not in self.outputs and not self.inlinable(idx) and isinstance(u.size, int) and self.chain_top(u):
      self.late.add(u)
      return self.load((yield from self.bufferize(u)), u, idx, gate)
    if not inline_root and u not in self.outputs and isinstance(u.size, int) and self.broadcast(u, idx):
      return self.load((yield from self.bufferize(u)), u, idx, gate)
    vals = []
    for x in s: vals.append((yield (x, idx, gate, False)))
    return UOp(op, u.dtype, tuple(vals), u.arg, u.loc)

  def note(self, u: UOp, idx: tuple) -> None:
    """u's value is needed by the kernel of self.root, at idx. A value that a second kernel needs too is stored once
    instead of recomputed when it costs SHARED_COST ops or more per element, a reduce counting the elements it reduces:
    otherwise a chain like `x = f(x, x.max(1), x.sum(0))` has kernel k recompute every earlier x, and n steps cost
    O(n^2) ops to compile and to run; and an optimizer step's three updates (moments, weight) would each redo the
    weight's gradient, a contraction. A value some kernel reads inside a reduce (a pool's window, whose every tap would
    compute it again) counts its dear ops as what they take (OP_COST)."""
    if self.users is None or u.op in VIEWS or u.op in (Ops.BUFFER, Ops.CONST) or u in self.outputs or u in self.force or u in self.shared: return
    if u not in self.windowed and rereads(u, idx):
      self.windowed.add(u)
      if u in self.cheap and self.cost(u, True) >= SHARED_COST: self.cheap.discard(u); self.shared.add(u); return
    if (first := self.first_root.setdefault(u, self.root)) is self.root or u in self.cheap: return
    # a shared value's kernel takes over the elementwise nodes below it that only its inline graph reads (the kernel that
    # first needed them loads the value now): a long chain that two kernels read is stored once at its top, not once per
    # node. A reduce is still stored when needed twice: the first kernel may read it by another path too
    if self.root in self.shared and u.op is not Ops.REDUCE_AXIS and first is self.first_root.get(self.root) and \
       all(p in self.inline(self.root) for p in self.users[u]):
      self.first_root[u] = self.root
      return
    (self.shared if self.cost(u, u in self.windowed) >= SHARED_COST else self.cheap).add(u)

  def inline(self, v: UOp) -> set[UOp]:
    """v and the nodes below it down to stored values (at most INLINE_LIMIT: a bigger graph shares more)."""
    if (seen := self.regions.get(v)) is None:
      seen = self.regions[v] = {v}
      todo = [v]
      while todo and len(seen) < INLINE_LIMIT:
        for s in todo.pop().src:
          if s not in seen and self.inlined(s): seen.add(s); todo.append(s)
    return seen

  def inlined(self, s: UOp) -> bool:
    """Whether s is computed inline where it is read (not an input, a constant or a stored value)."""
    return s.op not in (Ops.BUFFER, Ops.CONST) and s not in self.materialised and s not in self.shared

  def cost(self, u: UOp, dear: bool = False) -> int:
    """Ops per element of u's inline graph, counted up to SHARED_COST; dear: its transcendental ops as what they take."""
    n, seen, todo = 0, {u}, [u]
    while todo and n < SHARED_COST:
      x = todo.pop()
      n += reduced(x, self.cost(x.src[0])) if x.op is Ops.REDUCE_AXIS else 0 if x.op in VIEWS else OP_COST.get(x.op, 1) if dear else 1
      for s in x.src:
        if s not in seen and self.inlined(s): seen.add(s); todo.append(s)
    return n

  def chain_top(self, u: UOp) -> bool:
    """Whether u is an epilogue (see `epilogue`) of a reduce not stored yet."""
    if (v := self.tops.get(u)) is None:
      self.tops[u] = v = epilogue(u, lambda x: x in self.force or x in self.shared or x in self.materialised) is not None
    return v

  def broadcast(self, u: UOp, idx: tuple) -> bool:
    """Whether u is read inside a reduce at an index that moves with none of the loops the reduce's value moves with (a
    matrix-vector product's vector: the same elements for every output, where no pack computes them once; not a
    softmax row's sum, one value for the row) and recomputing it for each of their values costs more than a kernel of
    its own (REREAD_OPS): then it is stored. resnet50's classifier read its pool's sums divided by the window's count,
    a division per weight (2M of them): 239 us alone, 741 in the model, for an 8 MB matrix."""
    rs = set().union(*(ranges_of(x) for x in idx if isinstance(x, UOp)))
    outer = [r for r in self.outer if r in self.loops]   # (the kernel's: not one a bufferize left)
    if not rs or not outer or any(r.attrs["kind"] != "reduce" for r in rs): return False
    return (prod(im.smax(r.src[0]) for r in outer) - 1) * u.size * self.cost(u, True) >= REREAD_OPS

  def inlinable(self, idx) -> bool:
    """A reduce can stay inline when the loops its indices use are a prefix of the loop nest (no recompute)."""
    used = set().union(*map(ranges_of, idx))
    loops = list(self.loops)
    if not used <= set(loops): return False  # depends on an enclosing reduce's counter: recomputed each step
    depth = max((loops.index(r) for r in used if r in loops), default=-1)
    return all(r in used for r in loops[:depth + 1])

def rereads(u: UOp, idx: tuple) -> bool:
  """Whether reading u at idx inside a reduce reads its elements more than once each (a window's taps overlap: a 5x5
  pool's, 25 reads an element), where a sum over a row reads each once: the ranges idx moves with outnumber u's elements."""
  rs = set().union(*(ranges_of(x) for x in idx if isinstance(x, UOp)))
  return any(r.attrs["kind"] == "reduce" for r in rs) and isinstance(n := u.size, int) and prod(im.smax(r.src[0]) for r in rs) > n

def merges(src: tuple, dst: tuple) -> bool:
  """Whether a reshape from src to dst (static) only merges neighbouring dims: each of dst's dims a run of src's."""
  if not all(isinstance(d, int) for d in (*src, *dst)): return False
  i, src = 0, [d for d in src if d != 1]
  for d in (d for d in dst if d != 1):
    n = 1
    while n < d and i < len(src): n, i = n * src[i], i + 1
    if n != d: return False
  return i == len(src)

def epilogue(u: UOp, stored) -> set[UOp] | None:
  """The nodes from u down to the one reduce worth a kernel (of u's size) that u is an epilogue of, when u is one:
  elementwise ops and views over that reduce, whose other operands reduce nothing (weights, a bias, a mask read from
  buffers) or are products too, which their own kernels store (a kernel computes one contraction: a residual block's
  relu(conv + shortcut conv)). stored(x): x is read from a buffer (the walk stops there)."""
  todo, seen, reds = [u], {u}, []
  while todo:
    x = todo.pop()
    if x is not u and x.op is Ops.REDUCE_AXIS and not stored(x):
      if x.size != u.size or reds and not (product(x) and product(reds[0])): return None
      reds.append(x)
    # a reshape that splits or merges dims indexes what is below it through div/mod of the stored node's loops, which
    # the kernel could not tile as a batch of products; but for the one merge of a reduce's own dims (a grouped
    # convolution's groups and channels into channels) uop-optimize splits the loop back (split_groups)
    elif x.op is Ops.RESHAPE and [d for d in x.shape if d != 1] != [d for d in x.src[0].shape if d != 1] and \
        not (x.src[0].op is Ops.REDUCE_AXIS and merges(x.src[0].shape, x.shape)): return None
    elif x is u or not stored(x): todo += [s for s in x.src if s not in seen and not seen.add(s)]
  return seen if reds and reduced(reds[0], 1) > 1 else None

CAT_PARTS = 3   # a cat of this many parts or more is stored part by part where a reduce reads it
def _cat(u: UOp, stored=lambda x: False) -> list[tuple[UOp, tuple]] | None:
  """(part, its padding) pairs of a cat as mixin.cat builds it, `where(pad(all true), pad(part), rest)` down to a last
  `pad(part)`, last first; a part that is itself a cat (a cat of a cat: densenet's features) is replaced by its parts,
  unless stored(it) (it is in a buffer already: copied as one part)."""
  parts = []
  while u.op is Ops.WHERE:
    c, p, u = u.src
    if p.op is not Ops.PAD or c.op is not Ops.PAD or sym_attr(c, "padding") != sym_attr(p, "padding"): return None
    m = c.src[0]
    while m.op in (Ops.RESHAPE, Ops.EXPAND): m = m.src[0]
    if m.op is not Ops.CONST or m.attrs["value"] is not True: return None
    parts.append(p)
  if u.op is not Ops.PAD: return None
  out = []
  for p in [u] + parts[::-1]:
    pad = sym_attr(p, "padding")
    if not all(isinstance(v, int) for v in pad): return None
    inner = _cat(p.src[0], stored) if p.src[0].op is Ops.WHERE and not stored(p.src[0]) else None
    out += [(x, tuple(a + b for a, b in zip(pad, q))) for x, q in inner] if inner else [(p.src[0], pad)]
  return out

CAT_STORE_MIN = 1 << 12   # elements of a stored cat from which each part gets its own loops
def tiling(u: UOp, stored=lambda x: False) -> list[tuple[UOp, tuple]] | None:
  """A cat's (part, padding) pairs (`_cat`, a cat in a buffer one part: stored) when the cat is an output worth storing
  part by part (CAT_STORE_MIN elements or more, static shapes) and the parts' boxes tile it: disjoint, inside it, their
  sizes summing to its size. Stored as one loop nest, each element would select among every part's value, each part's
  computed (a detector's head: every scale's sigmoid and transposed index math for every one of its boxes)."""
  if u.op is not Ops.WHERE or not isinstance(u.size, int) or u.size < CAT_STORE_MIN or (parts := _cat(u, stored)) is None: return None
  if not all(isinstance(d, int) for x, _ in parts for d in x.shape) or any(v < 0 for _, pad in parts for v in pad): return None
  boxes = [tuple(zip(pad[::2], (lo + n for lo, n in zip(pad[::2], x.shape)))) for x, pad in parts]
  if sum(prod(x.shape) for x, _ in parts) != u.size or any(hi > n for b in boxes for (_, hi), n in zip(b, u.shape)): return None
  apart = lambda a, b: any(ha <= lb or hb <= la for (la, ha), (lb, hb) in zip(a, b))
  return parts if all(apart(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:]) else None

def cat_parts(u: UOp, stored=None) -> list[UOp] | None:
  """The parts of a cat (see `_cat`) as PAD nodes over the whole cat, last first (the order they are written in, so
  the outer where's part wins where pads overlap, as where does), when it has at least CAT_PARTS parts of static shape
  all flattened; with stored, the parts to write, a cat already in a buffer being one."""
  if u.op is not Ops.WHERE or (parts := _cat(u)) is None or len(parts) < CAT_PARTS: return None
  if stored is not None: parts = _cat(u, stored)
  if not all(isinstance(d, int) for x, _ in parts for d in x.shape): return None
  return [UOp(Ops.PAD, x.dtype, (x,), attrs(padding=pad), u.loc) for x, pad in parts]

def product(u: UOp, big: bool | None = None) -> bool:
  """Whether reduce_axis u is a contraction worth a kernel (a sum of products: uop-optimize tiles one per kernel);
  big: whether it is worth a kernel (reduced(u, 1) > 1), where the caller knows already."""
  return u.attrs["op"] is Ops.ADD and u.src[0].op is Ops.MUL and (reduced(u, 1) > 1 if big is None else big)

RECOMPUTE_WORK = 1 << 16   # a reduce doing less work in all than this is recomputed where needed: cheaper than a kernel
def reduced(u: UOp, body: int) -> int:
  """The ops per element a reduce_axis counts for: the elements it folds, when its whole work (the elements it reads
  times the ops of its inline body, `body`) is worth a kernel."""
  sizes = [im.smax(u.src[0].shape[a]) for a in u.attrs["axes"]]   # symbolic sizes at their largest (as kernels are laid out)
  return prod(sizes) if prod(sizes) * prod(map(im.smax, u.shape)) * max(body, 1) >= RECOMPUTE_WORK else 1

def laid(buf: UOp, shape) -> tuple:
  """The shape buf's elements are laid out in: an input's or output's own (row-major at the values' sizes), a buffer the
  schedule makes (bufferize) at its sizes' largest values (uop-kernel-split stores it so): reading it back is then
  affine in the loops, whatever the values."""
  while buf.op is Ops.AFTER: buf = buf.src[0]
  return shape if buf.op is Ops.BUFFER else tuple(im.smax(d) for d in shape)

def var_loads(dvs: list[UOp], buf: UOp) -> dict[UOp, UOp]:
  """Each define_var -> its value read from buf (int64, one per variable), clamped to [min, max]."""
  load = lambda k: UOp(Ops.CAST, dtypes.index, (UOp(Ops.LOAD, dtypes.int64, (UOp(Ops.INDEX, dtypes.int64.ptr(), (buf, im.const(k))),)),))
  return {v: UOp(Ops.MIN, dtypes.index, (UOp(Ops.MAX, dtypes.index, (load(k), im.const(v.attrs["min"]))), im.const(v.attrs["max"])))
          for k, v in enumerate(dvs)}

def rangeify_func(f: Func) -> Func:
  """Graph-level function -> one function over flat buffers: args are the inputs, the variables' values (when the graph
  has symbolic sizes), then the outputs."""
  for r in f.results:
    if r.shape is None: raise PassError(f"uop-rangeify: @{f.name} must return tensors", r.loc)
  in_bufs = {i: arg_buffer(i, t.dtype.ptr(t.size)) for i, t in enumerate(f.args)}
  if dvs := sorted({u for r in f.results for u in r.toposort if u.op is Ops.DEFINE_VAR}, key=var_order):
    if (bad := next((u for r in f.results for u in r.toposort if u.op is Ops.BIND), None)) is not None:
      raise PassError("uop-rangeify: a bind left in the graph (realize unbinds sizes: their values are inputs)", bad.loc)
    in_bufs[len(f.args)] = arg_buffer(len(f.args), dtypes.int64.ptr(len(dvs)))
    vmap = var_loads(dvs, in_bufs[len(f.args)])
    f = Func(f.name, f.args, [r.substitute(vmap) for r in f.results], f.roots, f.attrs)
  outs = [arg_buffer(len(in_bufs) + j, r.dtype.ptr(im.smax(r.size))) for j, r in enumerate(f.results)]
  # an assign's result is its target's buffer (an input, written in place): the driver passes that buffer as the output
  aliases = {}
  for j, r in enumerate(f.results):
    if r.op is not Ops.ASSIGN: continue
    if r.src[0].op is not Ops.BUFFER or "slot" not in r.src[0].attrs or r.src[0].attrs["slot"] in aliases.values():
      raise PassError("uop-rangeify: an assign's target must be an input buffer, assigned once per graph", r.loc)
    aliases[j] = r.src[0].attrs["slot"]
  stored = [in_bufs[aliases[j]] if j in aliases else b for j, b in enumerate(outs)]
  # Whether a node is materialised is found while walking its uses; a use met before the one that forces the
  # buffer would have inlined (recomputed) it. So walk once to learn the set, then build with it fixed.
  # A chain top found stored (a bias and relu on a product that a reduce reads, or one several kernels share) may have
  # been inlined by uses met before, which noted its product as shared by two kernels too; and of a chain several nodes
  # may have been found shared (a training step's pre-activation, its relu, the relu's mask), each one a kernel. One more
  # walk with the lowest chain top of each chain fixed decides again: the product's kernel stores that node, and what is
  # above it costs a few ops per element from there (recomputed where it is read).
  users: dict[UOp, list[UOp]] = {}
  for u in dict.fromkeys(x for r in f.results for x in r.toposort):
    for s in u.src: users.setdefault(s, []).append(u)
  walk = Rangeifier(in_bufs, users=users, outputs=frozenset(f.results))
  walk.store_outputs(stored, f.results)   # the kernels the build makes: outputs computed in one loop nest share their values
  chains = {u: c for u in walk.late | walk.shared if isinstance(u.size, int) and (c := epilogue(u, lambda x: False)) is not None}
  if tops := {u for u, c in chains.items() if not any(d is not u and d in c for d in chains)}:   # the lowest of each chain
    walk = Rangeifier(in_bufs, frozenset(tops), users, outputs=frozenset(f.results))
    walk.store_outputs(stored, f.results)
  # a chain top whose product ended up stored anyway (another kernel needs it) is a few ops per element over loads:
  # its readers compute it (a kernel of its own would only copy)
  force = set(walk.materialised)
  force -= {u for u in walk.late | walk.force if epilogue(u, lambda x: x is not u and x in force) is None}
  rf = Rangeifier(in_bufs, frozenset(force), outputs=frozenset(f.results))
  stores = rf.store_outputs(stored, f.results)
  alias = {"uop.aliases": tuple(x for j, i in aliases.items() for x in (j, i))} if aliases else {}   # (output, input) pairs
  return Func(f.name, list(in_bufs.values()) + outs, [], [UOp(Ops.SINK, dtypes.void, tuple(stores))],
              {"uop.num_inputs": len(in_bufs), "uop.num_outputs": len(outs), **alias})

@register("uop-rangeify", "Movement ops -> index arithmetic over loop ranges; mark what is materialised (bufferize)")
def uop_rangeify(funcs: list[Func]) -> list[Func]:
  return [rangeify_func(f) if f.args is not None and all(t.shape is not None for t in f.args) and f.results else f for f in funcs]
