"""uop-kernel-split: one kernel per store, per `bufferize` and per store an `after` waits for, plus a `@schedule` that runs them in order.

Each bufferize becomes an intermediate buffer (a schedule argument after the inputs and outputs) written by its
own kernel; its consumers load from that buffer and wait for that kernel (`uop.kernel` operands). Kernels of one body
(over their own arguments) are one function that the schedule calls on each one's buffers: a chain of repeated steps
is optimized and compiled once per distinct step, not once per call."""
from __future__ import annotations
from morok_mlir.core.uop import UOp, attrs, arg_of
from morok_mlir.core.dtype import dtypes
from morok_mlir.ir.bridge import Func, arg_buffer
from morok_mlir.ir.registry import register
from morok_mlir.core import index_math as im
from morok_mlir.dialects.ops import Ops

def _kernel_name(root: UOp, n: int) -> str:
  """tinygrad-style: E_ for elementwise, r_ with a reduce; then the loop sizes (`n` for a symbolic one)."""
  nodes = root.toposort
  size = lambda r: "n" if (c := im.cval(r.src[0])) is None else str(c)
  sizes = [size(r) for r in nodes if r.op is Ops.RANGE and r.attrs["kind"] in ("loop", "serial")]
  red = [size(r) for r in nodes if r.op is Ops.RANGE and r.attrs["kind"] == "reduce"]
  return ("r_" if red else "E_") + "_".join(sizes + red or ["1"]) + f"_k{n}"

def _canonical(body: UOp, remap: dict[UOp, UOp]) -> UOp:
  """body over the kernel's own arguments (remap: schedule buffer -> argument) with its ranges numbered 0, 1, ... in
  their order: the same computation at two places of a graph (whose ranges rangeify numbered apart) is one node."""
  axes = {a: i for i, a in enumerate(sorted({u.attrs["axis"] for u in body.toposort if u.op is Ops.RANGE}))}
  new: dict[UOp, UOp] = {}
  for u in body.toposort:
    if u in remap: new[u] = remap[u]; continue
    src = tuple(new[s] for s in u.src)
    arg = arg_of({**u.attrs, "axis": axes[u.attrs["axis"]]}) if u.op is Ops.RANGE else u.arg
    new[u] = u if src == u.src and arg == u.arg else u.replace(src=src, arg=arg)
  return new[body]

def split_func(f: Func, prefix: str = "") -> list[Func]:
  """The kernels of one graph function and its schedule; prefix keeps the names of several graphs in one module apart."""
  sink = f.roots[0]
  n_args = len(f.args)
  temps: dict[UOp, UOp] = {}                 # bufferize -> schedule buffer
  bodies: list[UOp] = []                     # kernel roots in schedule order (schedule-slot buffers)
  new: dict[UOp, UOp] = {}                   # node -> node with every bufferize below it replaced by its buffer
  for u in sink.toposort:                    # one bottom-up rebuild: sources come first, so each is final when met
    if u.op is Ops.AFTER:                    # a buffer once the stores into it are done: each store is a kernel
      new[u] = new[u.src[0]]
      bodies.extend(new[d] for d in u.src[1:])
      continue
    if u.op is not Ops.BUFFERIZE:
      src = tuple(new[s] for s in u.src)
      new[u] = u if src == u.src else u.replace(src=src)
      continue
    buf = new[u] = temps[u] = arg_buffer(n_args + len(temps), u.dtype)
    val, rngs = new[u.src[0]], u.src[1:]
    lin = im.linearize(rngs, [im.smax(r.src[0]) for r in rngs])   # laid out for a symbolic size's largest (rangeify.laid)
    st = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, u.dtype.base.ptr(), (buf, lin)), val), loc=u.loc)
    bodies.append(UOp(Ops.END, dtypes.void, (st, *rngs), loc=u.loc) if rngs else st)
  bodies = list(dict.fromkeys(bodies + [new[s] for s in sink.src]))   # an output updated in place was met as an `after`
  writer: dict[int, int] = {}                # schedule slot -> index of the kernel that writes it
  kernels, calls, names = [], [], {}        # names: kernel sink (hash-consed: equal bodies are one node) -> function name
  own: dict[str, frozenset[int]] = {}
  for k, body in enumerate(bodies):
    bufs = [u for u in body.toposort if u.op is Ops.BUFFER]
    stored = [s.src[0].src[0] for s in body.toposort if s.op is Ops.STORE]
    order = stored + [b for b in bufs if b not in stored]
    remap = {b: arg_buffer(i, b.dtype) for i, b in enumerate(order)}
    if (name := names.get(ksink := UOp(Ops.SINK, dtypes.void, (_canonical(body, remap),)))) is None:
      names[ksink] = name = prefix + _kernel_name(body, k)
      kernels.append(Func(name, [remap[b] for b in order], [], [ksink], {"uop.kernel": None}, visibility="private"))
    # the arguments that are this schedule's own buffers at every call of the kernel (written by its kernels each run,
    # never a caller's constant)
    mine = frozenset(i for i, b in enumerate(order) if b.attrs["slot"] >= n_args)
    own[name] = own.get(name, mine) & mine
    # after the last writer of every buffer it reads or writes (a kernel may update a buffer in place: scatter)
    deps = tuple(dict.fromkeys(calls[writer[b.attrs["slot"]]] for b in order if b.attrs["slot"] in writer))
    calls.append(UOp(Ops.KERNEL, dtypes.void, deps, attrs(callee=("@sym", name), slots=tuple(b.attrs["slot"] for b in order)), body.loc))
    for b in stored: writer[b.attrs["slot"]] = k
  for kf in kernels:
    if own[kf.name]: kf.attrs["uop.temps"] = tuple(sorted(own[kf.name]))
  sched_args = f.args + list(temps.values())
  sched = Func(prefix + "schedule", sched_args, [], [UOp(Ops.SINK, dtypes.void, tuple(calls))],
               {"uop.schedule": None, **{k: v for k, v in f.attrs.items() if k.startswith(("uop.num_", "uop.aliases"))}})
  return kernels + [sched]

@register("uop-kernel-split", "Split at store/bufferize boundaries into kernels and a @schedule")
def uop_kernel_split(funcs: list[Func]) -> list[Func]:
  graphs = [f for f in funcs if f.roots and f.roots[0].op is Ops.SINK and "uop.num_inputs" in f.attrs and "uop.kernel" not in f.attrs]
  return [k for f in funcs for k in (split_func(f, f"{f.name}_" if len(graphs) > 1 else "") if f in graphs else [f])]
