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
  memo = outs[0].__dict__.setdefault("_normalized", {})   # lives and dies with the UOp
  rest = tuple(id(o) for o in outs[1:])
  hit = memo.get(rest)
  if hit is None or any(r() is not o for r, o in zip(hit[0], outs[1:])):
    mapping, bufs, vals = {}, [], {}
    # one walk and one rebuild over all outputs (they share most of their graph: an SGD step's four updates, walked
    # one at a time, cost 494-553 us, together 147)
    sink = UOp(Ops.SINK, dtypes.void, tuple(outs))
    for u in sink.toposort:
      if u.buffer is not None and u not in mapping:
        mapping[u] = UOp(Ops.BUFFER, u.dtype, (), attrs(shape=u.shape, slot=len(bufs)))
        bufs.append(u)
      elif u.op is Ops.BIND:
        if vals.setdefault(u.src[0], v := u.src[1].attrs["value"]) != v:
          _err(ValueError, f"{u.src[0]!r} is bound to both {vals[u.src[0]]} and {v} in one graph: "
                           "realize a tensor written at one value before writing it at another (a KV cache: realize() it each step)")
        mapping[u] = u.src[0]
    hit = memo[rest] = ([weakref.ref(o) for o in outs[1:]], sink.substitute(mapping).src, bufs,
                        tuple(vals[v] for v in sorted(vals, key=var_order)))
  return hit[1], hit[2], hit[3]

def graph_func(key: tuple[UOp, ...]) -> Func:
  """One func.func whose arguments are the input buffers (slot = argument number) and whose results are key."""
  ins: dict[int, UOp] = {}
  for o in key:
    for u in o.toposort:
      if u.op is Ops.BUFFER: ins[u.attrs["slot"]] = u
  return Func("graph", [ins[i] for i in range(len(ins))], list(key))

