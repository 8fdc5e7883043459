"""The realize driver: graph-level UOps -> `uop` module -> passes -> kernels -> run.

Input data enters the graph as `buffer` UOps made by `new_buffer`; their arrays live in a table that frees each
array when its UOp is garbage-collected."""
from __future__ import annotations
import itertools, weakref
import numpy as np
from .uop import UOp, attrs, tensor_type
from .dtype import dtypes

_BUFFERS: dict[int, np.ndarray] = {}
_ids = itertools.count()

def new_buffer(data: np.ndarray) -> UOp:
  """A graph input holding `data` (any shape; stored C-contiguous). The array is kept while the UOp lives."""
  data = np.ascontiguousarray(data)
  u = UOp("buffer", tensor_type(data.shape, dtypes.from_np(data.dtype)), (), attrs(id=(n := next(_ids))))
  _BUFFERS[n] = data
  weakref.finalize(u, _BUFFERS.pop, n, None)
  return u

def buffer_data(u: UOp) -> np.ndarray: return _BUFFERS[u.attrs["id"]]
