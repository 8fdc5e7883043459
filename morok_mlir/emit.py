"""emit: the graph of UOps a realize() asks for -> the graph-level `uop` function (see docs/pipeline.md).

Input buffers are numbered by first use, so two graphs of the same structure on different data give the same
(hash-consed) UOps: that tuple is the schedule cache's key, found before any MLIR is built."""
from __future__ import annotations
import numpy as np
from .uop import UOp, attrs
from .bridge import Func

def normalize(outs: list[UOp]) -> tuple[tuple[UOp, ...], list[np.ndarray]]:
  """Number the graph's input buffers by first use, so graphs of the same structure share one key."""
  mapping, inputs = {}, []
  for o in outs:
    for u in o.toposort:
      if u.op == "buffer" and u not in mapping and "id" in u.attrs:
        mapping[u] = UOp("buffer", u.ty, (), attrs(slot=len(inputs)))
        inputs.append(_data(u))
  return tuple(o.substitute(mapping) for o in outs), inputs

def graph_func(key: tuple[UOp, ...]) -> Func:
  """One func.func whose arguments are the input buffers (slot = argument number) and whose results are key."""
  ins: dict[int, UOp] = {}
  for o in key:
    for u in o.toposort:
      if u.op == "buffer": ins[u.attrs["slot"]] = u
  return Func("graph", [ins[i].ty for i in range(len(ins))], list(key))

def _data(u: UOp) -> np.ndarray:
  from .realize import buffer_data
  return buffer_data(u)
