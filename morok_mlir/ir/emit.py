"""emit: the graph of UOps a realize() asks for -> the graph-level `uop` function (see docs/pipeline.md).

Input data enters a graph as `buffer` UOps made by `new_buffer`, each owning its Buffer (device/buffer.py). Input buffers
are numbered by first use, so two graphs of the same structure on different data give the same (hash-consed) UOps
(normalize: what is compiled) and the same tuple (structure: the schedule cache's key, found before any MLIR is built).
Only graph_func reaches MLIR (the bridge): the rest runs where no compile happens."""
from __future__ import annotations
import itertools, weakref
import numpy as np
from morok_mlir.core.uop import UOp, attrs
from morok_mlir.core.provenance import error as _err
from morok_mlir.core.dtype import dtypes
from morok_mlir.dialects.ops import Ops

# ---------------------------------------------------------------- graph -> function
def var_order(v: UOp) -> tuple: return v.attrs["name"], v.attrs["min"], v.attrs["max"]

def normalize(outs: list[UOp]) -> tuple[tuple[UOp, ...], list[UOp], tuple[int, ...]]:
  """Number the graph's input buffers by first use and unbind its symbolic sizes (each `bind` becomes its define_var,
  tinygrad's unbind), so graphs of the same structure give the same graph whatever their data and sizes' values; returns
  that graph's outputs, the input buffers and the variables' values in var_order (what the compiled schedule takes at
  run time). This graph is what is compiled; `structure` is the key a realize looks it up by.
  One walk over all outputs (they share most of their graph: an SGD step's four updates, walked one at a time, cost
  494-553 us, together 147); a node is rebuilt only when a source changed."""
  new: dict[UOp, UOp] = {}
  bufs: list[UOp] = []
  vals: dict[UOp, int] = {}
  for u in _order(outs, new):
    if _PURE in u.__dict__: new[u] = u
    elif u.op is Ops.BIND: new[u] = unbind(u, vals)
    elif u.buffer is not None:
      if (b := _slots.get(k := (u.dtype, u.shape, len(bufs)))) is None:
        if len(_slots) >= 4096: _slots.clear()
        b = _slots[k] = UOp(Ops.BUFFER, u.dtype, (), attrs(shape=u.shape, slot=len(bufs)))
      new[u] = b; bufs.append(u)
    elif (src := tuple([new[s] for s in u.src])) == u.src: new[u] = u; u.__dict__[_PURE] = True
    else: new[u] = UOp(u.op, u.dtype, src, u.arg, u.loc)
  return tuple(new[o] for o in outs), bufs, _values(vals)

def structure(outs: list[UOp]) -> tuple[tuple, list[UOp], tuple[int, ...]]:
  """normalize's graph as a key (the schedule cache's), with the same input buffers and values: its nodes in the order
  of normalize's walk, an input as (dtype, shape), a bind as its define_var, any other node above an input or bind as
  (op, dtype, arg, its sources' positions), a node without either below it as itself (hash-consed: equal means the
  same; it comes where an entry first names it, so the key is the same whether or not its subgraph was walked); then
  the outputs' positions. Equal keys decode to one normalized graph, so they share its schedule; the key costs a tuple
  per node where normalize builds a hash-consed UOp (an SGD step's: ~300 -> ~100 us).
  UOps are immutable, so the answer for the same output UOps is remembered (while they live): a hot loop that
  rebuilds the same graph on the same tensors pays a dictionary lookup, not a graph walk."""
  if (memo := outs[0].__dict__.get("_structure")) is None: memo = outs[0].__dict__["_structure"] = {}   # lives and dies with the UOp
  rest = tuple([id(o) for o in outs[1:]]) if len(outs) > 1 else ()
  if (hit := memo.get(rest)) is None or rest and any(r() is not o for r, o in zip(hit[0], outs[1:])):
    pos: dict[UOp, int | None] = {}   # None: a node without inputs below, given its entry where an entry first names it
    enc: list = []
    bufs: list[UOp] = []
    vals: dict[UOp, int] = {}
    impure: set[UOp] = set()   # inputs, binds and the nodes above them
    opened: set[UOp] = set()   # nodes whose sources were pushed: back on top, every source has its entry
    for o in outs:   # _order's walk, inline: this is the hot path
      stack = [o]
      while stack:
        u = stack[-1]
        if u in pos: stack.pop(); continue
        if _PURE in (d := u.__dict__): pos[u] = None; stack.pop(); continue
        if u.op is BIND: e = unbind(u, vals)
        elif u.buffer is not None: e = (u.dtype, u.shape); bufs.append(u)
        elif u not in opened and (todo := [s for s in u.src if s not in pos]): opened.add(u); todo.reverse(); stack += todo; continue
        elif impure.isdisjoint(src := u.src): d[_PURE] = True; pos[u] = None; stack.pop(); continue
        else:
          for s in src:
            if pos[s] is None: pos[s] = len(enc); enc.append(s)
          e = (u.op, u.dtype, u.arg, tuple([pos[s] for s in src]))
        stack.pop(); impure.add(u); pos[u] = len(enc); enc.append(e)
    for o in outs:
      if pos[o] is None: pos[o] = len(enc); enc.append(o)
    hit = memo[rest] = ([weakref.ref(o) for o in outs[1:]], (*enc, tuple(pos[o] for o in outs)), bufs, _values(vals))
  return hit[1], hit[2], hit[3]

BIND = Ops.BIND
# a node with no input buffer or bind below it is its own normalized form: marked once (in its __dict__), never walked again
_PURE = "_pure"
_slots: dict[tuple, UOp] = {}   # (dtype, shape, slot) -> the numbered buffer UOp (hash-consed anyway: this skips building its key)

def _order(outs: list[UOp], done: dict):
  """The nodes of outs' graph, sources first and in order (so inputs come by first use), each once: the caller puts each
  node it is given in `done`. The walk does not enter inputs, binds and marked nodes. Iterative: graphs can be deep."""
  for o in outs:
    stack = [o]
    while stack:
      u = stack[-1]
      if u in done: stack.pop(); continue
      if _PURE not in u.__dict__ and u.op is not Ops.BIND and u.buffer is None and (todo := [s for s in u.src if s not in done]):
        todo.reverse(); stack += todo; continue   # the first source's subgraph first
      stack.pop()
      yield u

TWICE = ("{var!r} is bound to both {old} and {new} in one graph: "
         "realize a tensor written at one value before writing it at another (a KV cache: realize() it each step)")

def unbind(u: UOp, vals: dict, error: type = ValueError, twice: str = TWICE) -> UOp:
  """A bind's define_var, its value noted in vals (one per variable: in a graph; TinyJit's, in a call); another value
  for it raises error, saying `twice`."""
  if vals.setdefault(var := u.src[0], new := u.src[1].attrs["value"]) != new: _err(error, twice.format(var=var, old=vals[var], new=new))
  return var

def _values(vals: dict) -> tuple[int, ...]: return tuple(vals[v] for v in sorted(vals, key=var_order)) if vals else ()

def graph_func(key: tuple[UOp, ...]) -> Func:
  """One func.func whose arguments are the input buffers (slot = argument number) and whose results are key."""
  from morok_mlir.ir.bridge import Func   # (MLIR loads with the first compile: running cached schedules needs none)
  ins: dict[int, UOp] = {}
  for o in key:
    for u in o.toposort:
      if u.op is Ops.BUFFER: ins[u.attrs["slot"]] = u
  return Func("graph", [ins[i] for i in range(len(ins))], list(key))

