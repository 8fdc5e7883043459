"""emit: the graph of UOps a realize() asks for -> the graph-level `uop` function (see docs/pipeline.md).

Input data enters a graph as `buffer` UOps made by `new_buffer`, each owning its Buffer (device/buffer.py). Input buffers
are numbered by first use, so two graphs of the same structure on different data give the same
(hash-consed) UOps: that tuple is the schedule cache's key, found before any MLIR is built."""
from __future__ import annotations
import itertools, weakref
import numpy as np
from morok_mlir.core.uop import UOp, attrs
from morok_mlir.core.provenance import error as _err
from morok_mlir.core.dtype import dtypes
from morok_mlir.ir.bridge import Func
from morok_mlir.dialects.ops import Ops

# ---------------------------------------------------------------- graph -> function
def var_order(v: UOp) -> tuple: return v.attrs["name"], v.attrs["min"], v.attrs["max"]

def normalize(outs: list[UOp]) -> tuple[tuple[UOp, ...], list[UOp], tuple[int, ...]]:
  """Number the graph's input buffers by first use and unbind its symbolic sizes (each `bind` becomes its define_var,
  tinygrad's unbind), so graphs of the same structure share one key whatever their sizes' values; returns the key, the
  input buffers and the variables' values in var_order (what the compiled schedule takes at run time).
  UOps are immutable, so the answer for the same output UOps is remembered (while they live): a hot loop that
  rebuilds the same graph on the same tensors pays a dictionary lookup, not a graph walk."""
  if (memo := outs[0].__dict__.get("_normalized")) is None: memo = outs[0].__dict__["_normalized"] = {}   # lives and dies with the UOp
  rest = tuple([id(o) for o in outs[1:]]) if len(outs) > 1 else ()
  if (hit := memo.get(rest)) is None or rest and any(r() is not o for r, o in zip(hit[0], outs[1:])):
    key, bufs, vals = _walk(outs)
    hit = memo[rest] = ([weakref.ref(o) for o in outs[1:]], key, bufs, tuple(vals[v] for v in sorted(vals, key=var_order)) if vals else ())
  return hit[1], hit[2], hit[3]

# a node with no input buffer or bind below it is its own normalized form: marked once (in its __dict__), never walked again
_PURE = "_pure"
_slots: dict[tuple, UOp] = {}   # (dtype, shape, slot) -> the numbered buffer UOp (hash-consed anyway: this skips building its key)

def _walk(outs: list[UOp]) -> tuple[tuple[UOp, ...], list[UOp], dict]:
  """One walk over all outputs (they share most of their graph: an SGD step's four updates, walked one at a time, cost
  494-553 us, together 147), sources in order, so buffers are numbered by first use; a node is rebuilt only when a
  source changed. Iterative: graphs can be deep."""
  new: dict[UOp, UOp] = {}
  bufs: list[UOp] = []
  vals: dict[UOp, int] = {}
  for o in outs:
    stack = [o]
    while stack:
      u = stack[-1]
      if u in new: stack.pop(); continue
      if u.buffer is not None:
        if (b := _slots.get(k := (u.dtype, u.shape, len(bufs)))) is None:
          if len(_slots) >= 4096: _slots.clear()
          b = _slots[k] = UOp(Ops.BUFFER, u.dtype, (), attrs(shape=u.shape, slot=len(bufs)))
        new[u] = b; bufs.append(u); stack.pop(); continue
      if _PURE in (d := u.__dict__): new[u] = u; stack.pop(); continue
      if u.op is Ops.BIND:
        if vals.setdefault(u.src[0], v := u.src[1].attrs["value"]) != v:
          _err(ValueError, f"{u.src[0]!r} is bound to both {vals[u.src[0]]} and {v} in one graph: "
                           "realize a tensor written at one value before writing it at another (a KV cache: realize() it each step)")
        new[u] = u.src[0]; stack.pop(); continue
      todo = [s for s in u.src if s not in new]
      if todo: todo.reverse(); stack += todo; continue   # sources first, the first one's subgraph first
      stack.pop()
      src = tuple([new[s] for s in u.src])
      if src == u.src: new[u] = u; d[_PURE] = True
      else: new[u] = UOp(u.op, u.dtype, src, u.arg, u.loc)
  return tuple([new[o] for o in outs]), bufs, vals

def graph_func(key: tuple[UOp, ...]) -> Func:
  """One func.func whose arguments are the input buffers (slot = argument number) and whose results are key."""
  ins: dict[int, UOp] = {}
  for o in key:
    for u in o.toposort:
      if u.op is Ops.BUFFER: ins[u.attrs["slot"]] = u
  return Func("graph", [ins[i] for i in range(len(ins))], list(key))

