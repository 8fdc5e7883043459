"""The ONNX operator table: op_type -> fn(inputs, attrs, opset) -> output or tuple of outputs (tinygrad's onnx.py).
inputs are Tensors (None for an omitted optional input, a list for a sequence), attrs the node's attributes as Python
values (graph attributes as callables), opset the model's default-domain opset. Values an output's shape depends on
(shapes, axes, pads, k, ...) are read from their small tensors on the host; a value an op cannot take raises a
ValueError or IndexError, which the model reports as the node's. The model checks before anything runs: INVALID (attribute
values ONNX forbids), REFUSE (values this front end does not run), AXIS_OPS (axes against the ranks inference finds)."""
from __future__ import annotations
import itertools, math, os, re, threading
import numpy as np
import onnx
from morok_mlir.tensor import Tensor
from morok_mlir.core.dtype import dtypes, DType
from morok_mlir.dialects.ops import Ops, GRAPH_ALU
from morok_mlir.core.provenance import user_loc
from morok_mlir.realize import new_buffer
from morok_mlir.onnx import fold
from morok_mlir import host

def _dt(t: int) -> DType:
  from morok_mlir.onnx.model import dtype_of
  return dtype_of(t)
def _vals(t) -> list:
  """A small tensor's values as Python numbers (it is realized: the values decide a shape)."""
  return [] if t is None else np.asarray(t.numpy()).reshape(-1).tolist()
def _ints(t) -> list[int]: return [int(v) for v in _vals(t)]
def _scalar(t): return _vals(t)[0]
def _ax(a: int, n: int, end: bool = False) -> int:
  """An axis of n dims: -n..n-1, or -n..n where the end is one (Flatten's)."""
  if not -n <= a < n + end: raise IndexError(f"axis {a} is out of range for {n} dims (-{n}..{n - 1 + end})")
  return a + n if a < 0 else a
def _rank(x: Tensor, n: int, what: str) -> Tensor:
  if x.ndim != n: raise ValueError(f"{what} of shape {x.shape} must have {n} dims")
  return x
def _pos(p: int, n: int, end: bool = False) -> int:
  """A position in a sequence of n: -n..n-1, or -n..n where its end is one (SequenceInsert's)."""
  if not -n <= p < n + end: raise IndexError(f"position {p} is out of range for a sequence of {n}")
  return p + n if p < 0 else p
def _unique_axes(axes: list[int]) -> list[int]:
  if len(set(axes)) != len(axes): raise ValueError(f"axes {axes} name a dim twice")
  return axes
try: HOST_BYTES = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
except (ValueError, OSError, AttributeError): HOST_BYTES = 1 << 40
def host_bytes(shape, dt: DType, what: str) -> tuple[int, ...]:
  """shape, once a value of it is known to fit this machine's memory: refused before anything is allocated."""
  shape = tuple(shape)
  if any(s < 0 for s in shape): raise ValueError(f"{what} of shape {list(shape)} has a negative dim")
  if (n := math.prod(shape) * dt.itemsize) > HOST_BYTES:
    raise ValueError(f"{what} of shape {list(shape)} needs {n} bytes, more than this machine has")
  return shape
def _axes(x: Tensor, a: dict, inputs: list, i: int, opset: int, since: int) -> list[int] | None:
  """Axes from the attribute (opsets before `since`) or from input i."""
  axes = a.get("axes") if opset < since else (_ints(inputs[i]) if len(inputs) > i and inputs[i] is not None else None)
  return None if axes is None else [_ax(v, x.ndim) for v in axes]
def _f(x: Tensor) -> Tensor: return x if x.dtype.is_float else x.float()
def owned(a: np.ndarray) -> Tensor:
  """A Tensor over an array this front end made (no copy: Tensor(array) copies, as a user may change theirs)."""
  return Tensor(new_buffer(a, user_loc()))

# ---- elementwise
def _bin(fn): return lambda i, a, o: fn(i[0], i[1])
def _un(fn): return lambda i, a, o: fn(i[0])
def _div(x, y):
  if x.dtype.is_float: return x / y
  return x.idiv(y)   # ONNX (and numpy's astype after division) truncates toward zero
def _pow(x, y):
  if x.dtype.is_float: return x.pow(y.cast(x.dtype))
  return _f(x).cast(dtypes.float64).pow(y.cast(dtypes.float64)).cast(x.dtype) if y.dtype.is_float else x.pow(y.cast(x.dtype))
def _mod(i, a, o):
  x, y = i
  if a.get("fmod", 0): return x.fmod(y)
  return x.mod(y)
def _variadic(fn): return lambda i, a, o: _fold(fn, [t for t in i if t is not None])
def _fold(fn, ts):
  r = ts[0]
  for t in ts[1:]: r = fn(r, t)
  return r
def _bitshift(i, a, o): return i[0].lshift(i[1]) if a["direction"] == "LEFT" else i[0].rshift(i[1])
def _clip(i, a, o):
  x = i[0]
  lo, hi = (a.get("min"), a.get("max")) if o < 11 else (i[1] if len(i) > 1 else None, i[2] if len(i) > 2 else None)
  if lo is not None: x = x.maximum(lo if not isinstance(lo, Tensor) else lo.cast(x.dtype))
  if hi is not None: x = x.minimum(hi if not isinstance(hi, Tensor) else hi.cast(x.dtype))
  return x
def _gelu(i, a, o): return i[0].gelu("tanh") if a.get("approximate", "none") == "tanh" else 0.5 * i[0] * (1 + (i[0] * (1 / math.sqrt(2))).erf())
def _isinf(i, a, o):
  x = i[0]
  return x.isinf(bool(a.get("detect_positive", 1)), bool(a.get("detect_negative", 1)))
def _shrink(i, a, o):
  x, b, l = i[0], a.get("bias", 0.0), a.get("lambd", 0.5)
  return x.lt(-l).where(x + b, x.gt(l).where(x - b, 0)).cast(x.dtype)
def _cast(x: Tensor, dt: DType) -> Tensor:
  if x.dtype.is_float and not dt.is_float and not dt.is_bool:   # NaN/inf to int is undefined; numpy's astype truncates
    return x.trunc().cast(dt)
  return x.cast(dt)

# ---- reductions
_RED = {"ReduceSum": lambda x, ax, k: x.sum(ax, k), "ReduceMean": lambda x, ax, k: x.mean(ax, k),
        # ONNX's max/min of an empty set is the identity (-inf, ints the dtype's min): the reduce without max()'s check
        "ReduceMax": lambda x, ax, k: x._reduce(Ops.MAX, ax, k), "ReduceMin": lambda x, ax, k: x._reduce(Ops.MIN, ax, k),
        "ReduceProd": lambda x, ax, k: x.prod(ax, k), "ReduceL1": lambda x, ax, k: x.abs().sum(ax, k),
        "ReduceL2": lambda x, ax, k: _f(x).square().sum(ax, k).sqrt().cast(x.dtype),
        "ReduceSumSquare": lambda x, ax, k: x.square().sum(ax, k), "ReduceLogSum": lambda x, ax, k: _f(x).sum(ax, k).log(),
        "ReduceLogSumExp": lambda x, ax, k: _lse(_f(x), ax, k)}
def _lse(x, ax, k):
  if 0 in x.shape: return x.exp().sum(ax, k).log()
  return x.logsumexp(ax, k)
def _reduce(name):
  since = 13 if name == "ReduceSum" else 18
  def fn(i, a, o):
    x, k = i[0], bool(a.get("keepdims", 1))
    axes = _axes(x, a, i, 1, o, since)
    if not axes:
      if a.get("noop_with_empty_axes", 0) and axes is not None or a.get("noop_with_empty_axes", 0): return x
      axes = list(range(x.ndim))
    r = _RED[name](x, tuple(axes), k)
    return r.cast(x.dtype) if name not in ("ReduceLogSum", "ReduceLogSumExp") or x.dtype.is_float else r
  return fn
def _argm(largest):
  def fn(i, a, o):
    x, ax, k = i[0], _ax(a.get("axis", 0), i[0].ndim), bool(a.get("keepdims", 1))
    if a.get("select_last_index", 0):
      n = x.shape[ax]
      r = n - 1 - (x.flip(ax).argmax(ax, k) if largest else x.flip(ax).argmin(ax, k))
    else: r = x.argmax(ax, k) if largest else x.argmin(ax, k)
    return r.cast(dtypes.int64)
  return fn

# ---- shapes and movement
def _reshape(i, a, o):
  x, shape = i[0], _ints(i[1]) if o >= 5 and len(i) > 1 else list(a["shape"])
  if not a.get("allowzero", 0): shape = [x.shape[j] if s == 0 else s for j, s in enumerate(shape)]
  return x.reshape(shape)
def _flatten(i, a, o):
  x = i[0]
  ax = _ax(a.get("axis", 1), x.ndim, end=True)
  return x.reshape(math.prod(x.shape[:ax]), math.prod(x.shape[ax:]))
def _squeeze(i, a, o):
  x = i[0]
  axes = _axes(x, a, i, 1, o, 13)
  if axes is None: axes = [d for d, s in enumerate(x.shape) if s == 1]
  if bad := [d for d in axes if x.shape[d] != 1]: raise ValueError(f"cannot squeeze dim {bad[0]} of shape {x.shape}: its size is not 1")
  return x.reshape([s for d, s in enumerate(x.shape) if d not in axes])
def _unsqueeze(i, a, o):
  x = i[0]
  axes = a["axes"] if o < 13 else _ints(i[1])
  n = x.ndim + len(axes)
  axes, shape, it = sorted(_unique_axes([_ax(v, n) for v in axes])), [], iter(x.shape)
  return x.reshape([1 if d in axes else next(it) for d in range(n)])
def _transpose(i, a, o):
  x = i[0]
  return x.permute(a.get("perm", list(range(x.ndim))[::-1]))
def _expand(i, a, o):
  x, shape = i[0], _ints(i[1])
  n = max(len(shape), x.ndim)
  xs, ss = (1,) * (n - x.ndim) + x.shape, (1,) * (n - len(shape)) + tuple(shape)
  if any(b < 0 or a_ != b and 1 not in (a_, b) for a_, b in zip(xs, ss)): raise ValueError(f"cannot expand shape {x.shape} to {shape}")
  return x.reshape(xs).expand(tuple(b if a_ == 1 else a_ for a_, b in zip(xs, ss)))
def _concat(i, a, o):
  ts = [t for t in i if t is not None]
  return ts[0].cat(*ts[1:], dim=_ax(a["axis"], ts[0].ndim)) if len(ts) > 1 else ts[0]
def _split(i, a, o, n_out=None):
  x = i[0]
  ax = _ax(a.get("axis", 0), x.ndim)
  sizes = a.get("split") if o < 13 else (_ints(i[1]) if len(i) > 1 and i[1] is not None else None)
  if sizes is None:
    if (n := a.get("num_outputs", n_out)) < 1: raise ValueError(f"num_outputs {n} must be at least 1")
    c = -(-x.shape[ax] // n)
    sizes = [min(c, x.shape[ax] - c * j) for j in range(n)]
  return tuple(x.split(list(sizes), ax))
def _slice(i, a, o):
  x = i[0]
  if o < 10: starts, ends, axes, steps = a["starts"], a["ends"], a.get("axes"), None
  else: starts, ends, axes, steps = _ints(i[1]), _ints(i[2]), (_ints(i[3]) if len(i) > 3 and i[3] is not None else None), \
                                    (_ints(i[4]) if len(i) > 4 and i[4] is not None else None)
  axes = list(range(len(starts))) if axes is None else _unique_axes([_ax(v, x.ndim) for v in axes])
  if not len(starts) == len(ends) == len(axes) == len(steps or axes): raise ValueError("starts, ends, axes and steps differ in length")
  if steps and 0 in steps: raise ValueError(f"steps {steps} hold a 0")
  idx = [slice(None)] * x.ndim
  for j, ax in enumerate(axes):
    st = steps[j] if steps else 1
    lo, hi = starts[j], ends[j]
    n = x.shape[ax]
    lo, hi = max(min(lo, 2 * n + 1), -2 * n - 1), max(min(hi, 2 * n + 1), -2 * n - 1)   # ONNX's INT_MAX ends, kept in range
    if st < 0 and hi < -n: hi = None
    idx[ax] = slice(lo, hi, st)
  return x[tuple(idx)]
def _pad(i, a, o):
  x, mode = i[0], a.get("mode", "constant")
  if o < 11: pads, value, axes = a.get("pads", a.get("paddings")), a.get("value", 0.0), None
  else:
    pads = _ints(i[1])
    value = _scalar(i[2]) if len(i) > 2 and i[2] is not None and i[2].numel() else 0
    axes = [_ax(v, x.ndim) for v in _ints(i[3])] if len(i) > 3 and i[3] is not None else None
  axes = list(range(x.ndim)) if axes is None else axes
  per = [(0, 0)] * x.ndim
  for j, ax in enumerate(axes): per[ax] = (pads[j], pads[j + len(axes)])
  if mode == "constant": return x.pad(tuple(per), value=value)
  if mode == "wrap": mode = "circular"
  if mode == "edge": mode = "replicate"
  # reflect/edge/wrap with negative pads: cut first, then pad the rest
  cut = tuple((max(-b, 0), s - max(-e, 0)) for s, (b, e) in zip(x.shape, per))
  x = x.shrink(cut)
  return x.pad(tuple((max(b, 0), max(e, 0)) for b, e in per), mode=mode)
def _tile(i, a, o): return i[0].repeat(_ints(i[1]))
def _const_of_shape(i, a, o):
  v = a.get("value", np.zeros(1, np.float32))
  return Tensor.full(host_bytes(_ints(i[0]), dt := _np_dt(v.dtype), "ConstantOfShape's output"), v.reshape(-1)[0].item(), dtype=dt)
def _np_dt(d) -> DType: return dtypes.from_np(np.dtype(d))
def _constant(i, a, o):
  for k, f in (("value", lambda v: v), ("value_float", lambda v: np.array(v, np.float32)), ("value_floats", lambda v: np.array(v, np.float32)),
               ("value_int", lambda v: np.array(v, np.int64)), ("value_ints", lambda v: np.array(v, np.int64))):
    if k in a: return Tensor(np.array(f(a[k]), order="C"))
  raise NotImplementedError(f"Constant with attributes {sorted(a)}")
def _range(i, a, o):
  s, l, d = (_scalar(t) for t in i)
  if d == 0 or not all(math.isfinite(v) for v in (s, l, d)): raise ValueError(f"Range({s}, {l}, {d}): delta 0 or a value not finite")
  dt = i[0].dtype
  n = max(math.ceil((l - s) / d) if dt.is_float else -((s - l) // d), 0)
  out = np.empty(host_bytes((n,), dt, "Range's output"), dt.np)
  for k in range(0, n, step := 1 << 16):   # s + k * d exactly (in float64), in pieces: the output is the only full-size array
    out[k:k + step] = np.arange(k, min(k + step, n), dtype=np.float64 if dt.is_float else np.int64) * d + s
  return owned(out)
def _shape(i, a, o):
  s = i[0].shape
  st, en = a.get("start", 0), a.get("end", len(s))
  return Tensor(np.array(s[slice(st, en)], np.int64))
def _gather(i, a, o):
  x, idx = i
  ax = _ax(a.get("axis", 0), x.ndim)
  if idx.numel() == 0: return Tensor.zeros(*x.shape[:ax], *idx.shape, *x.shape[ax + 1:], dtype=x.dtype)
  return x[(slice(None),) * ax + (idx,)]
def _norm_idx(idx, n): return idx.lt(0).where(idx + n, idx)
def _gather_elements(i, a, o):
  x, idx = i
  ax = _ax(a.get("axis", 0), x.ndim)
  return x.gather(ax, _norm_idx(idx, x.shape[ax]))
_SRED = {"add": "sum", "mul": "prod", "max": "amax", "min": "amin"}
def _scatter_elements(i, a, o):
  x, idx, upd = i
  ax = _ax(a.get("axis", 0), x.ndim)
  idx, red = _norm_idx(idx, x.shape[ax]), a.get("reduction", "none")
  return x.scatter(ax, idx, upd) if red == "none" else x.scatter_reduce(ax, idx, upd, _SRED[red])
def _nd_lin(shape, idx: Tensor, b: int) -> Tensor:
  """Linear offsets of GatherND/ScatterND index tuples (last dim of idx) into shape[b:b+k]."""
  k = idx.shape[-1]
  dims = shape[b:b + k]
  strides = [math.prod(dims[j + 1:]) for j in range(k)]
  idx = idx.cast(dtypes.int64)
  idx = idx.lt(0).where(idx + Tensor(np.array(dims, np.int64)), idx)
  return (idx * Tensor(np.array(strides, np.int64))).sum(-1)
def _gather_nd(i, a, o):
  x, idx = i
  b, k = a.get("batch_dims", 0), idx.shape[-1]
  B, rest = math.prod(x.shape[:b]), x.shape[b + k:]
  lin = _nd_lin(x.shape, idx, b).reshape(B, -1)   # (B, Q)
  q = lin.shape[1]
  xr = x.reshape(B, math.prod(x.shape[b:b + k]), *rest)
  ix = lin.reshape(B, q, *(1,) * len(rest)).expand(B, q, *rest)
  return xr.gather(1, ix).reshape(*idx.shape[:-1], *rest)
def _scatter_nd(i, a, o):
  x, idx, upd = i
  k, red = idx.shape[-1], a.get("reduction", "none")
  rest = x.shape[k:]
  lin = _nd_lin(x.shape, idx, 0).reshape(-1)
  q = lin.shape[0]
  xr, ur = x.reshape(math.prod(x.shape[:k]), *rest), upd.reshape(q, *rest)
  ix = lin.reshape(q, *(1,) * len(rest)).expand(q, *rest)
  r = xr.scatter(0, ix, ur) if red == "none" else xr.scatter_reduce(0, ix, ur, _SRED[red])
  return r.reshape(x.shape)
def _onehot(i, a, o):
  idx, depth, vals = i
  d = int(_scalar(depth))
  ax = _ax(a.get("axis", -1), idx.ndim + 1)
  idx = idx.cast(dtypes.int64)
  idx = idx.lt(0).where(idx + d, idx)
  shape = [1] * (idx.ndim + 1)
  shape[ax] = d
  oh = idx.unsqueeze(ax).eq(Tensor.arange(d, dtype=dtypes.int64).reshape(shape))
  off, on = vals[0], vals[1]
  return oh.where(on, off)
def _nonzero(i, a, o):
  v = np.asarray(i[0].numpy()).reshape(i[0].shape or (1,))   # numpy: a 0-d input is one element
  return Tensor(np.stack(np.nonzero(v)).astype(np.int64))
def _compress(i, a, o):
  x, c = i
  pos = np.flatnonzero(np.asarray(c.numpy()))
  if "axis" not in a: x, ax = x.reshape(-1), 0
  else: ax = _ax(a["axis"], x.ndim)
  if pos.size and pos[-1] >= x.shape[ax]: raise IndexError(f"the condition selects index {pos[-1]} of dim {ax}, of size {x.shape[ax]}")
  return _take(x, ax, pos)
def _runs(idx: np.ndarray) -> tuple[int, int, int] | None:
  """(start, step, repeats) when idx is start + (j // repeats) * step for j in 0..len-1, step >= 1 (a nearest resize by an
  integer factor, a strided slice, both), else None."""
  k = int(np.argmax(idx != idx[0])) or len(idx)   # the first run's length
  if len(idx) % k: return None
  q = idx[::k]
  st = int(q[1] - q[0]) if len(q) > 1 else 1
  if st < 1 or not np.array_equal(idx, np.repeat(q[0] + st * np.arange(len(q)), k)): return None
  return int(q[0]), st, k
def _take(x: Tensor, ax: int, idx: np.ndarray) -> Tensor:
  """x along ax at the host-known positions idx (a 1-d int array): a slice and a repeat where idx has that form (movement
  ops: a kernel reads x's elements through index arithmetic), else a gather of them."""
  if len(idx) == 0: return Tensor.zeros(*x.shape[:ax], 0, *x.shape[ax + 1:], dtype=x.dtype)
  if (r := _runs(idx := np.asarray(idx))) is not None and 0 <= (start := r[0]) and (end := start + r[1] * (len(idx) // r[2] - 1) + 1) <= x.shape[ax]:
    x = x[(slice(None),) * ax + (slice(start, end, r[1]),)]
    return x.repeat_interleave(r[2], ax) if r[2] > 1 else x
  shape = [1] * x.ndim
  shape[ax] = len(idx)
  t = Tensor(np.asarray(idx, np.int32).reshape(shape)).expand(tuple(len(idx) if d == ax else s for d, s in enumerate(x.shape)))
  return x.gather(ax, t)
def _trilu(i, a, o):
  x, k = i[0], int(_scalar(i[1])) if len(i) > 1 and i[1] is not None else 0
  if x.numel() == 0: return x
  return x.triu(k) if a.get("upper", 1) else x.tril(k)
def _cumulative(i, a, o, kind="sum"):
  if len(v := _ints(i[1])) != 1: raise ValueError(f"axis {v} must be one value")
  x, ax = i[0], _ax(v[0], i[0].ndim)
  if a.get("reverse", 0): x = x.flip(ax)
  if a.get("exclusive", 0): x = x.pad(tuple((1, -1) if d == ax else (0, 0) for d in range(x.ndim)), value=0 if kind == "sum" else 1)
  r = (x.cumsum(ax) if kind == "sum" else x.cumprod(ax)).cast(x.dtype)
  return r.flip(ax) if a.get("reverse", 0) else r
def _d2s(i, a, o):
  x, b = _rank(i[0], 4, "the input"), a["blocksize"]
  n, c, h, w = x.shape
  if b < 1 or c % (b * b): raise ValueError(f"blocksize {b}: {c} channels are not a multiple of {b}x{b}")
  if a.get("mode", "DCR") == "DCR": x = x.reshape(n, b, b, c // b // b, h, w).permute(0, 3, 4, 1, 5, 2)
  else: x = x.reshape(n, c // b // b, b, b, h, w).permute(0, 1, 4, 2, 5, 3)
  return x.reshape(n, c // b // b, h * b, w * b)
def _s2d(i, a, o):
  x, b = _rank(i[0], 4, "the input"), a["blocksize"]
  n, c, h, w = x.shape
  if b < 1 or h % b or w % b: raise ValueError(f"blocksize {b} does not divide the spatial dims {h}x{w}")
  x = x.reshape(n, c, h // b, b, w // b, b)
  x = x.permute(0, 1, 3, 5, 2, 4) if a.get("mode", "DCR") == "CRD" else x.permute(0, 3, 5, 1, 2, 4)
  return x.reshape(n, c * b * b, h // b, w // b)
def _topk(i, a, o):
  x, k = i[0], int(_scalar(i[1])) if o >= 10 else a["k"]
  v, ix = x.topk(k, _ax(a.get("axis", -1), x.ndim), bool(a.get("largest", 1)))
  return v, ix.cast(dtypes.int64)
def _eyelike(i, a, o):
  x = i[0]
  dt = _dt(a["dtype"]) if "dtype" in a else x.dtype
  return Tensor(np.eye(x.shape[0], x.shape[1], a.get("k", 0), dtype=dt.np))
def _where(i, a, o): return i[0].cast(dtypes.bool).where(i[1], i[2])
def _reverse_seq(i, a, o):
  x, lens = i
  ba, ta = a.get("batch_axis", 1), a.get("time_axis", 0)
  lens, T = _ints(lens), x.shape[ta]
  src = np.zeros((x.shape[ba], T), np.int64)
  for b, L in enumerate(lens): src[b] = [L - 1 - t if t < L else t for t in range(T)]
  shape = [1] * x.ndim
  shape[ba], shape[ta] = x.shape[ba], T
  idx = Tensor(src if ba < ta else src.T).reshape(shape).expand(x.shape)
  return x.gather(ta, idx)

# ---- neural network
def _auto_pads(a, in_sp, k, s, d) -> list[tuple[int, int]]:
  """(begin, end) padding per spatial dim from pads or auto_pad."""
  n, ap = len(k), a.get("auto_pad", "NOTSET")
  if ap in ("SAME_UPPER", "SAME_LOWER"):
    out = []
    for i, kk, ss, dd in zip(in_sp, k, s, d):
      tot = max((-(-i // ss) - 1) * ss + (kk - 1) * dd + 1 - i, 0)
      out.append((tot // 2, tot - tot // 2) if ap == "SAME_UPPER" else (tot - tot // 2, tot // 2))
    return out
  if ap == "VALID": return [(0, 0)] * n
  p = a.get("pads", [0] * 2 * n)
  return [(p[j], p[j + n]) for j in range(n)]
def _conv(i, a, o):
  x, w, b = i[0], i[1], i[2] if len(i) > 2 else None
  k = a.get("kernel_shape", w.shape[2:])
  if tuple(k) != tuple(w.shape[2:]): raise ValueError(f"kernel_shape {list(k)} is not the weight's {list(w.shape[2:])}")
  n = len(k)
  _rank(x, _rank(w, n + 2, "the weight").ndim, "the input")
  s, d = a.get("strides", [1] * n), a.get("dilations", [1] * n)
  pads = _auto_pads(a, x.shape[2:], k, s, d)
  x = x.pad(((0, 0), (0, 0), *pads))
  return x.conv2d(w, b, groups=a.get("group", 1), stride=s, dilation=d)
def _conv_transpose(i, a, o):
  x, w, b = i[0], i[1], i[2] if len(i) > 2 else None
  k = a.get("kernel_shape", w.shape[2:])
  n = len(k)
  s, d, op = a.get("strides", [1] * n), a.get("dilations", [1] * n), a.get("output_padding", [0] * n)
  full = [(i_ - 1) * ss + (kk - 1) * dd + 1 for i_, ss, kk, dd in zip(x.shape[2:], s, k, d)]
  if "output_shape" in a or a.get("auto_pad", "NOTSET") in ("SAME_UPPER", "SAME_LOWER"):
    outs = a["output_shape"][-n:] if "output_shape" in a else [i_ * ss for i_, ss in zip(x.shape[2:], s)]
    tot = [f + p - t for f, p, t in zip(full, op, outs)]
    up = a.get("auto_pad", "NOTSET") == "SAME_UPPER"
    pads = [(t // 2, t - t // 2) if up else (t - t // 2, t // 2) for t in tot]
  elif a.get("auto_pad", "NOTSET") == "VALID": pads = [(0, 0)] * n
  else: pads = [(p, q) for p, q in zip(a.get("pads", [0] * 2 * n)[:n], a.get("pads", [0] * 2 * n)[n:])]
  y = x.conv_transpose2d(w, None, groups=a.get("group", 1), stride=s, dilation=d)
  y = y.pad(((0, 0), (0, 0), *[(-pb, p - pe) for (pb, pe), p in zip(pads, op)]))
  return y if b is None else y + b.reshape(1, -1, *[1] * n)
def _pool_geom(x, a, o, k):
  """Strides, dilations and (begin, end) pads of a pool, with ceil_mode's extra room after each dim."""
  n = len(k)
  _rank(x, n + 2, "the input")
  s, d = a.get("strides", [1] * n), a.get("dilations", [1] * n)
  pads = _auto_pads(a, x.shape[2:], k, s, d)
  if a.get("ceil_mode", 0):
    new = []
    for i_, kk, ss, dd, (pb, pe) in zip(x.shape[2:], k, s, d, pads):
      e = (kk - 1) * dd + 1
      out = -(-(i_ + pb + pe - e) // ss) + 1
      if (out - 1) * ss >= i_ + pb: out -= 1   # a window starting in the padding after the input is dropped
      new.append((pb, max(pe, (out - 1) * ss + e - i_ - pb)))
    return s, d, pads, new
  return s, d, pads, pads
def _maxpool(i, a, o):
  x, k = i[0], a["kernel_shape"]
  s, d, _, pads = _pool_geom(x, a, o, k)
  n = len(k)
  axes = tuple(range(-n, 0))
  win = x.pad(((0, 0), (0, 0), *pads), value=x.dtype.min)._pool(k, s, d)
  out = win.max(axes)
  if a.get("_outputs", 1) < 2: return out
  sp = x.shape[2:]
  tot = math.prod(sp)
  # indices: each max's flat position in the input (N, C included), the first on ties
  pos = Tensor(np.arange(tot, dtype=np.int64).reshape(sp) if not a.get("storage_order", 0) else
               np.arange(tot, dtype=np.int64).reshape(sp[::-1]).T.copy())
  pos = (tot - pos).pad(tuple(pads))._pool(k, s, d)
  m = win.eq(out.reshape(*out.shape, *(1,) * n))
  idx = tot - m.where(pos, 0).max(axes)
  nc = Tensor(np.arange(x.shape[0] * x.shape[1], dtype=np.int64).reshape(x.shape[0], x.shape[1], *(1,) * n) * tot)
  return out, idx + nc
def _avgpool(i, a, o):
  x, k = i[0], a["kernel_shape"]
  s, d, pads, cpads = _pool_geom(x, a, o, k)
  n = len(k)
  axes = tuple(range(-n, 0))
  win = x.pad(((0, 0), (0, 0), *cpads))._pool(k, s, d).sum(axes)
  if a.get("count_include_pad", 0):   # the explicit padding counts, ceil_mode's extra room does not
    ones = Tensor.ones(*[i_ + b + e for i_, (b, e) in zip(x.shape[2:], pads)], dtype=x.dtype)
    ones = ones.pad(tuple((0, c[1] - p[1]) for c, p in zip(cpads, pads)))
  else: ones = Tensor.ones(*x.shape[2:], dtype=x.dtype).pad(tuple(cpads))
  return win / ones._pool(k, s, d).sum(axes)
def _lppool(i, a, o):
  x, k, p = i[0], a["kernel_shape"], a.get("p", 2)
  s, d, _, pads = _pool_geom(x, a, o, k)
  axes = tuple(range(-len(k), 0))
  return x.abs().pow(p).pad(((0, 0), (0, 0), *pads))._pool(k, s, d).sum(axes).pow(1 / p)
def _global(fn): return lambda i, a, o: fn(i[0], tuple(range(2, i[0].ndim)))
def _batchnorm(i, a, o):
  x, sc, b, mean, var = i
  eps, sh = a.get("epsilon", 1e-5), (1, -1) + (1,) * (x.ndim - 2)
  if a.get("training_mode", 0):
    axes = tuple(d for d in range(x.ndim) if d != 1)
    m, v = x.mean(axes), x.var(axes, correction=0)
    mom = a.get("momentum", 0.9)
    y = (x - m.reshape(sh)) * (v.reshape(sh) + eps).rsqrt() * sc.reshape(sh) + b.reshape(sh)
    return y, mean * mom + m * (1 - mom), var * mom + v * (1 - mom)
  # one multiply-add per element, as onnxruntime: the scale and shift depend on the statistics only (realized once when
  # they are the model's constants: hoisted), so a convolution's epilogue, or a depthwise convolution reading its input
  # through it per tap, computes two ops, not five, and no square root per tile
  scale = (var + eps).rsqrt() * sc
  return x * hoisted(scale).reshape(sh) + hoisted(b - mean * scale).reshape(sh)
def _instancenorm(i, a, o):
  x, sc, b = i
  axes, sh = tuple(range(2, x.ndim)), (1, -1) + (1,) * (x.ndim - 2)
  m, v = x.mean(axes, True), x.var(axes, True, correction=0)
  return (x - m) * (v + a.get("epsilon", 1e-5)).rsqrt() * sc.reshape(sh) + b.reshape(sh)
def _layernorm(i, a, o):
  x, sc, b = i[0], i[1], i[2] if len(i) > 2 else None
  ax = _ax(a.get("axis", -1), x.ndim)
  axes = tuple(range(ax, x.ndim))
  xf = x.cast(dtypes.float32) if a.get("stash_type", 1) == 1 and x.dtype != dtypes.float64 else x
  m = xf.mean(axes, True)
  inv = ((xf - m).square().mean(axes, True) + a.get("epsilon", 1e-5)).rsqrt()
  y = ((xf - m) * inv).cast(x.dtype) * sc
  return (y if b is None else y + b), m, inv
def _groupnorm(i, a, o):
  x, sc, b = i
  g, eps = a["num_groups"], a.get("epsilon", 1e-5)
  n, c = x.shape[:2]
  xg = x.reshape(n, g, -1)
  m, v = xg.mean(-1, True), xg.var(-1, True, correction=0)
  y = ((xg - m) * (v + eps).rsqrt()).reshape(x.shape)
  sh = (1, -1) + (1,) * (x.ndim - 2)
  if o < 21: sc, b = sc.reshape(g, 1).expand(g, c // g).reshape(c), b.reshape(g, 1).expand(g, c // g).reshape(c)
  return y * sc.reshape(sh) + b.reshape(sh)
def _rmsnorm(i, a, o):
  x, sc = i
  ax = _ax(a.get("axis", -1), x.ndim)
  axes = tuple(range(ax, x.ndim))
  xf = x.cast(dtypes.float32) if a.get("stash_type", 1) == 1 and x.dtype != dtypes.float64 else x
  return (xf * (xf.square().mean(axes, True) + a.get("epsilon", 1e-5)).rsqrt()).cast(x.dtype) * sc
def _lrn(i, a, o):
  x, size = i[0], a["size"]
  al, be, bi = a.get("alpha", 1e-4), a.get("beta", 0.75), a.get("bias", 1.0)
  sq = x.square().transpose(1, -1)
  sq = sq.pad(((0, 0),) * (x.ndim - 1) + (((size - 1) // 2, size // 2),))._pool((size,)).sum(-1).transpose(1, -1)
  return x / (bi + al / size * sq).pow(be)
def _mvn(i, a, o):
  x, axes = i[0], tuple(a.get("axes", [0, 2, 3]))
  m = x.mean(axes, True)
  return (x - m) / ((x - m).square().mean(axes, True).sqrt() + 1e-9)
def _softmax_like(fn):
  def f(i, a, o):
    x = i[0]
    if o < 13:   # the input is coerced to 2-d at axis
      ax = _ax(a.get("axis", 1), x.ndim)
      return fn(x.reshape(math.prod(x.shape[:ax]), -1), -1).reshape(x.shape)
    return fn(x, _ax(a.get("axis", -1), x.ndim))
  return f
def _hardmax(x, ax):
  if x.numel() == 0: return x
  return Tensor.arange(x.shape[ax], dtype=dtypes.int64).reshape([x.shape[ax] if d == ax else 1 for d in range(x.ndim)]).eq(
    x.argmax(ax, True).cast(dtypes.int64)).cast(x.dtype)
def _gemm(i, a, o):
  A, B, C = i[0], i[1], i[2] if len(i) > 2 else None
  if a.get("transA", 0): A = A.T
  if a.get("transB", 0): B = B.T
  r = (A @ B) * a.get("alpha", 1.0) if a.get("alpha", 1.0) != 1.0 else A @ B
  if C is not None: r = r + (C * a.get("beta", 1.0) if a.get("beta", 1.0) != 1.0 else C)
  return r.cast(A.dtype)
def _dropout(i, a, o):
  x = i[0]
  training = bool(_scalar(i[2])) if o >= 12 and len(i) > 2 and i[2] is not None else False
  ratio = (_scalar(i[1]) if o >= 12 and len(i) > 1 and i[1] is not None else a.get("ratio", 0.5))
  if not training or ratio == 0: return x, Tensor.ones(*x.shape, dtype=dtypes.bool)
  mask = Tensor.rand(*x.shape).ge(ratio)
  return mask.where(x / (1 - ratio), 0).cast(x.dtype), mask
def _lpnorm(i, a, o):
  x, ax, p = i[0], a.get("axis", -1), a.get("p", 2)
  n = x.abs().sum(ax, True) if p == 1 else x.square().sum(ax, True).sqrt()
  return n.eq(0).where(0, x / n).cast(x.dtype)
def _nll(x: Tensor, t: Tensor, w: Tensor | None, red: str, ig):
  """NegativeLogLikelihoodLoss: x (N, C, ...), t (N, ...)."""
  c = x.shape[1]
  t = t.cast(dtypes.int64)
  keep = t.ne(ig) if ig is not None else None
  ts = keep.where(t, 0) if keep is not None else t
  pick = x.gather(1, ts.unsqueeze(1)).squeeze(1)
  wt = w[ts] if w is not None else Tensor.ones(*t.shape, dtype=x.dtype)
  if keep is not None: wt = keep.where(wt, 0).cast(x.dtype)
  loss = -pick * wt
  if red == "none": return loss
  if red == "sum": return loss.sum()
  return loss.sum() / wt.sum()
def _nllloss(i, a, o): return _nll(i[0], i[1], i[2] if len(i) > 2 else None, a.get("reduction", "mean"), a.get("ignore_index"))
def _sce(i, a, o):
  x, t, w = i[0], i[1], i[2] if len(i) > 2 else None
  lp = x.log_softmax(1)
  return _nll(lp, t, w, a.get("reduction", "mean"), a.get("ignore_index")), lp

def _heads(x: Tensor, n: int) -> Tensor: return x.reshape(x.shape[0], x.shape[1], n, -1).permute(0, 2, 1, 3)
def _attention(i, a, o):
  """Attention (opset 23+) as onnx's reference computes it: q and k scaled by sqrt(scale) each, a bias from the mask,
  causality and the non-padded kv lengths, grouped heads repeated, rows masked everywhere giving 0."""
  Q, K, V = i[:3]
  mask, pk, pv, nonpad = (i[j] if len(i) > j else None for j in range(3, 7))
  three = Q.ndim == 3
  if three: Q, K, V = _heads(Q, a["q_num_heads"]), _heads(K, a["kv_num_heads"]), _heads(V, a["kv_num_heads"])
  sc = a.get("scale", 1 / math.sqrt(Q.shape[3]))
  sq = math.sqrt(sc)
  if pk is not None: K, V = pk.cat(K, dim=2), pv.cat(V, dim=2)
  pres_k, pres_v = K, V
  nq, nk = Q.shape[2], K.shape[2]
  bias = Tensor.zeros(nq, nk, dtype=Q.dtype)
  if mask is not None and mask.shape[-1] < nk:
    mask = mask.pad(((0, 0),) * (mask.ndim - 1) + ((0, nk - mask.shape[-1]),), value=False if mask.dtype.is_bool else -math.inf)
  if mask is not None: mask = mask.where(0.0, -math.inf).cast(Q.dtype) if mask.dtype.is_bool else mask
  jj, ii = np.arange(nk).reshape(1, nk), np.arange(nq).reshape(nq, 1)
  L, R = a.get("left_window_size", -1), a.get("right_window_size", -1)
  if pk is None and nonpad is not None: off = np.array(_ints(nonpad)).reshape(-1, 1, 1, 1) - nq   # per batch
  else: off = pk.shape[2] if pk is not None else 0
  if a.get("is_causal", 0): bias = bias + Tensor(np.where(jj <= ii + off, 0, -np.inf).astype(Q.dtype.np))
  if mask is not None: bias = bias + mask
  if L >= 0 or R >= 0:
    diff = ii + off - jj
    ok = np.ones(diff.shape, bool) & ((diff <= L) if L >= 0 else True) & ((-diff <= R) if R >= 0 else True)
    bias = bias + Tensor(np.where(ok, 0, -np.inf).astype(Q.dtype.np))
  if nonpad is not None:
    bias = bias + Tensor(np.where(np.arange(nk) < np.array(_ints(nonpad))[:, None], 0, -np.inf).astype(Q.dtype.np).reshape(-1, 1, 1, nk))
  if Q.shape[1] != K.shape[1]:
    r = Q.shape[1] // K.shape[1]
    K, V = K.repeat_interleave(r, 1), V.repeat_interleave(r, 1)
  qk = (Q * sq) @ (K * sq).transpose(-1, -2)
  if (cap := a.get("softcap", 0.0)) > 0: qk = (qk / cap).tanh() * cap
  qkb = qk + bias
  mode = a.get("qk_matmul_output_mode", 0)
  qk_out = qkb if mode == 2 else qk
  x = qkb.cast(_dt(a["softmax_precision"])) if a.get("softmax_precision") else qkb
  m = x.max(-1, keepdim=True)
  e = (x - m.isinf().where(0, m)).exp()
  ssum = e.sum(-1, keepdim=True)
  smx = e / ssum.eq(0).where(1, ssum)
  smx = bias.max(-1, keepdim=True).isinf().where(0, smx) if bias.ndim else smx
  if mode == 3: qk_out = smx
  y = smx.cast(Q.dtype) @ V
  if three: y = y.permute(0, 2, 1, 3).reshape(y.shape[0], y.shape[2], -1)
  return y, pres_k, pres_v, qk_out.cast(Q.dtype)

def _rotary(i, a, o):
  x, cos, sin, pos = i[0], i[1], i[2], (i[3] if len(i) > 3 else None)
  shape4 = x.ndim == 4
  if shape4: x = x.permute(0, 2, 1, 3)
  else: x = x.reshape(x.shape[0], x.shape[1], a["num_heads"], -1)
  rd = a.get("rotary_embedding_dim", 0) or x.shape[3]
  xr, xp = x[..., :rd], x[..., rd:]
  if pos is not None: cos, sin = cos[pos], sin[pos]
  cos, sin = cos.unsqueeze(2), sin.unsqueeze(2)
  x1, x2 = (xr[..., 0::2], xr[..., 1::2]) if a.get("interleaved", 0) else (xr[..., :rd // 2], xr[..., rd // 2:])
  re, im = cos * x1 - sin * x2, sin * x1 + cos * x2
  xr = re.unsqueeze(-1).cat(im.unsqueeze(-1), dim=-1).reshape(xr.shape) if a.get("interleaved", 0) else re.cat(im, dim=-1)
  y = xr.cat(xp, dim=-1) if xp.shape[-1] else xr
  return y.permute(0, 2, 1, 3) if shape4 else y.reshape(i[0].shape)
def _center_crop_pad(i, a, o):
  x, shape = i[0], _ints(i[1])
  axes = [_ax(v, x.ndim) for v in a.get("axes", range(x.ndim))]
  per = [(0, 0)] * x.ndim
  for ax, sh in zip(axes, shape):
    d = sh - x.shape[ax]   # > 0 pads, < 0 crops; the odd element goes after
    per[ax] = (d // 2, d - d // 2) if d >= 0 else (-((-d) // 2), -(-d - (-d) // 2))
  return x.pad(tuple(per))
def _window(fn):
  def f(i, a, o):
    n = int(_scalar(i[0]))
    N = n if a.get("periodic", 1) else n - 1
    t = Tensor.arange(n, dtype=dtypes.float64) * (2 * math.pi / N) if N else Tensor.zeros(n, dtype=dtypes.float64)
    return fn(t).cast(_dt(a.get("output_datatype", onnx.TensorProto.FLOAT)))
  return f
def _tensor_scatter(i, a, o):
  past, upd, wi = i[0], i[1], (i[2] if len(i) > 2 else None)
  ax = _ax(a.get("axis", -2), past.ndim)
  L, S, B = past.shape[ax], upd.shape[ax], past.shape[0]
  w = Tensor.zeros(B, dtype=dtypes.int64) if wi is None else wi.cast(dtypes.int64)
  idx = w.reshape(B, *(1,) * (past.ndim - 1)) + Tensor.arange(S, dtype=dtypes.int64).reshape([S if d == ax else 1 for d in range(past.ndim)])
  if a.get("mode", "linear") == "circular": idx = idx.mod(L)
  return past.scatter(ax, idx.expand(upd.shape), upd)
def _causal_conv(i, a, o):
  """CausalConvWithState: a depthwise conv over the past state and the input, the last k-1 steps kept as the state."""
  x, w, b, past = i[0], i[1], (i[2] if len(i) > 2 else None), (i[3] if len(i) > 3 else None)
  k = w.shape[2]
  padded = (past if past is not None else Tensor.zeros(x.shape[0], x.shape[1], k - 1, dtype=x.dtype)).cat(x, dim=2)
  y = padded.conv2d(w, b, groups=x.shape[1]).cast(x.dtype)
  if a.get("activation", "none") in ("silu", "swish"): y = (y.float() * y.float().sigmoid()).cast(x.dtype)
  return y, padded[:, :, padded.shape[2] - (k - 1):]
def _linear_attention(i, a, o):
  """LinearAttention (linear, gated, delta, gated_delta): the recurrent state (B, H, dk, dv) updated step by step in float32."""
  q, k, v = i[:3]
  past, decay, beta = (i[j] if len(i) > j else None for j in (3, 4, 5))
  hq, hk, rule = a["q_num_heads"], a["kv_num_heads"], a.get("update_rule", "gated_delta")
  B, T = q.shape[:2]
  dk, dv = q.shape[-1] // hq, v.shape[-1] // hk
  q4, k4, v4 = (_heads(t, n).float() for t, n in ((q, hq), (k, hk), (v, hk)))
  if decay is not None:
    decay = (decay.reshape(B, T, hk, 1).permute(0, 2, 1, 3) if decay.shape[-1] == hk else _heads(decay, hk)).float()
  if beta is not None: beta = beta.reshape(B, T, beta.shape[-1], 1).permute(0, 2, 1, 3).float()
  state = past.float() if past is not None else Tensor.zeros(B, hk, dk, dv)
  sc = a.get("scale", 0.0) or 1 / math.sqrt(dk)
  outs = []
  for t in range(T):
    qt, kt, vt = q4[:, :, t], k4[:, :, t], v4[:, :, t]
    if rule in ("gated", "gated_delta"): state = state * decay[:, :, t].exp().unsqueeze(-1)
    if rule in ("delta", "gated_delta"): vt = beta[:, :, t] * (vt - (state * kt.unsqueeze(-1)).sum(2))
    state = state + kt.unsqueeze(-1) * vt.unsqueeze(-2)
    rd = state.repeat_interleave(hq // hk, 1) if hq != hk else state
    outs.append((qt.unsqueeze(-1) * rd).sum(2) * sc)
  y = Tensor.stack(*outs, dim=2).permute(0, 2, 1, 3).reshape(B, T, hq * dv).cast(q.dtype)
  return y, state.cast(past.dtype if past is not None else q.dtype)
def _reflect(v: Tensor, lo: float, hi: float) -> Tensor:
  """v folded into [lo, hi] by reflection at both ends (onnx's GridSample)."""
  rng = hi - lo
  if rng <= 0: return v * 0 + lo
  below, dx = v.lt(lo), v.lt(lo).where(lo - v, v - hi)
  n = (dx / rng).floor()
  r, even = dx - n * rng, (n - (n / 2).floor() * 2).eq(0)
  inner = below.where(even.where(lo + r, hi - r), even.where(hi - r, lo + r))
  return (v.lt(lo) | v.gt(hi)).where(inner, v)
def _cubic_t(t: Tensor) -> list[Tensor]:
  A = -0.75
  return [((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A, ((A + 2) * t - (A + 3)) * t * t + 1,
          ((A + 2) * (1 - t) - (A + 3)) * (1 - t) * (1 - t) + 1, ((A * (2 - t) - 5 * A) * (2 - t) + 8 * A) * (2 - t) - 4 * A]
def _grid_sample(i, a, o):
  """GridSample over any number of spatial dims: each output point's taps (1, 2^n or 4^n of them) read through one
  gather each from the flattened spatial plane, weighted by products of the per-dim weights."""
  X, grid = i
  mode, pm, ac = a.get("mode", "linear" if o >= 20 else "bilinear"), a.get("padding_mode", "zeros"), bool(a.get("align_corners", 0))
  mode = {"bilinear": "linear", "bicubic": "cubic"}.get(mode, mode)
  N, C, dims = X.shape[0], X.shape[1], X.shape[2:]
  n, out = len(dims), grid.shape[1:-1]
  Q, P = math.prod(out), math.prod(dims)
  g = grid.reshape(N, Q, n).cast(dtypes.float32 if X.dtype != dtypes.float64 else dtypes.float64)
  taps_per_dim = []
  for j, d in enumerate(dims):
    v = g[:, :, n - 1 - j]
    v = (v + 1) / 2 * (d - 1) if ac else ((v + 1) * d - 1) / 2
    lo, hi = (0.0, d - 1.0) if ac else (-0.5, d - 0.5)
    if mode == "nearest": v = v.round()
    if pm == "border": v = v.clip(0, d - 1)
    elif pm == "reflection": v = _reflect(v, lo, hi)
    if mode == "nearest": taps_per_dim.append([(v, None)]); continue
    x0 = v.floor()
    t = v - x0
    taps_per_dim.append([(x0, 1 - t), (x0 + 1, t)] if mode == "linear" else list(zip([x0 - 1, x0, x0 + 1, x0 + 2], _cubic_t(t))))
  Xf, out_t = X.reshape(N, C, P), None
  for combo in itertools.product(*taps_per_dim):
    flat, valid, w = None, None, None
    for j, ((ix, wt), d) in enumerate(zip(combo, dims)):
      if pm == "zeros": ok, ix = ix.ge(0) & ix.le(d - 1), ix.clip(0, d - 1)
      elif pm == "border": ok, ix = None, ix.clip(0, d - 1)
      else: ok, ix = None, _reflect(ix, *((0.0, d - 1.0) if ac else (-0.5, d - 0.5))).trunc().clip(0, d - 1)
      valid = ok if valid is None else (valid if ok is None else valid & ok)
      term = ix.cast(dtypes.int64) * math.prod(dims[j + 1:])
      flat = term if flat is None else flat + term
      if wt is not None: w = wt if w is None else w * wt
    v = Xf.gather(2, flat.unsqueeze(1).expand(N, C, Q))
    if valid is not None: v = valid.unsqueeze(1).where(v, 0)
    if w is not None: v = v * w.unsqueeze(1)
    out_t = v if out_t is None else out_t + v
  return out_t.cast(X.dtype).reshape(N, C, *out)
def _dft_core(x: Tensor, ax: int, L: int | None, inverse: bool, onesided: bool) -> Tensor:
  """numpy's fft / ifft / irfft along ax of x (..., 1 or 2: real or real+imag), as dense matmuls with host-computed
  cos/sin matrices; the result has a last dim of 2 (1 for irfft)."""
  re, im = x[..., 0].double(), (x[..., 1].double() if x.shape[-1] == 2 else None)   # float64: near-zero outputs meet atol
  n_in = re.shape[ax]
  if L is None: L = 2 * (n_in - 1) if inverse and onesided else n_in
  K = L // 2 + 1 if onesided or (inverse and onesided) else L
  if inverse and onesided: n_use, K = min(n_in, L // 2 + 1), L   # irfft reads L//2+1 frequencies and makes L samples
  else: n_use = min(n_in, L)
  re = re.transpose(ax, -1)[..., :n_use]
  im = im.transpose(ax, -1)[..., :n_use] if im is not None else None
  n, k = np.arange(n_use).reshape(-1, 1), np.arange(K).reshape(1, -1)
  ang = 2 * np.pi * (n * k % L) / L
  dt = np.float64
  C, S = Tensor(np.cos(ang).astype(dt)), Tensor(np.sin(ang).astype(dt))
  if inverse and onesided:
    c = np.where((n == 0) | ((L % 2 == 0) & (n == L // 2)), 1.0, 2.0) / L   # the Hermitian half counted twice
    C, S = Tensor((np.cos(ang) * c).astype(dt)), Tensor((np.sin(ang) * c).astype(dt))
    out = re @ C - (im @ S if im is not None else 0)
    return out.transpose(ax, -1).unsqueeze(-1).cast(x.dtype)
  sg = 1 if inverse else -1
  ore = re @ C - sg * (im @ S) if im is not None else re @ C
  oim = (im @ C if im is not None else 0) + sg * (re @ S)
  if inverse: ore, oim = ore / L, oim / L
  return ore.transpose(ax, -1).unsqueeze(-1).cat(oim.transpose(ax, -1).unsqueeze(-1), dim=-1).cast(x.dtype)
def _dft(i, a, o):
  x = i[0]
  L = int(_scalar(i[1])) if len(i) > 1 and i[1] is not None and i[1].numel() else None
  ax = _ax(int(_scalar(i[2])) if o >= 20 and len(i) > 2 and i[2] is not None else a.get("axis", -2 if o >= 20 else 1), x.ndim)
  return _dft_core(x, ax, L, bool(a.get("inverse", 0)), bool(a.get("onesided", 0)))
def _stft(i, a, o):
  x, step = i[0], int(_scalar(i[1]))
  win, fl = (i[2] if len(i) > 2 else None), (i[3] if len(i) > 3 else None)
  fl = int(_scalar(fl)) if fl is not None else (win.shape[0] if win is not None else x.shape[-2])
  nf = 1 + (x.shape[-2] - fl) // step
  frames = Tensor.stack(*[x[:, f * step:f * step + fl] for f in range(nf)], dim=1)   # (batch, frames, fl, c)
  if win is not None: frames = frames * win.reshape(1, 1, fl, 1)
  return _dft_core(frames, 2, fl, False, bool(a.get("onesided", 1)))
def _unique(i, a, o):
  """The output's size is data: x is read on the host for the positions (first occurrences, inverse, counts, numpy's
  rules); the values are then gathered from x."""
  x = i[0]
  ax = a.get("axis")
  xv = x.numpy()
  _, idx, inv, cnt = np.unique(xv if ax is None else xv, True, True, True, axis=None if ax is None else _ax(ax, x.ndim))
  if not a.get("sorted", 1):
    order = np.argsort(idx)
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    idx, cnt, inv = idx[order], cnt[order], rank[inv.reshape(-1)]
  y = _take(x.reshape(-1), 0, idx) if ax is None else _take(x, _ax(ax, x.ndim), idx)
  return y, Tensor(idx.astype(np.int64)), Tensor(inv.reshape(-1).astype(np.int64)), Tensor(cnt.astype(np.int64))
def _affine_grid(i, a, o):
  theta, size = i[0], _ints(i[1])
  sp, ac = size[2:], a.get("align_corners", 0)
  axes = [np.linspace(-1, 1, n) if ac else (np.arange(n) * 2 + 1) / n - 1 for n in sp]
  mesh = np.meshgrid(*axes, indexing="ij")
  base = np.stack([*mesh[::-1], np.ones(sp)], axis=-1).reshape(-1, len(sp) + 1)   # (points, x y [z] 1)
  g = Tensor(base.astype(theta.dtype.np)) @ theta.transpose(1, 2)   # (N, points, dims)
  return g.reshape(size[0], *sp, len(sp))
def _max_unpool(i, a, o):
  """Values scattered to their flat indices in the inferred (N, C, *spatial) output, which output_shape then pads at the
  end of each dim (onnx's reference)."""
  x, idx = i[0], i[1]
  k = a["kernel_shape"]
  n = len(k)
  s, p = a.get("strides", [1] * n), a.get("pads", [0] * 2 * n)
  inf = list(x.shape[:2]) + [(d - 1) * st - p[j] - p[j + n] + kk for j, (d, st, kk) in enumerate(zip(x.shape[2:], s, k))]
  y = Tensor.zeros(math.prod(inf), dtype=x.dtype).scatter(0, idx.reshape(-1).cast(dtypes.int64), x.reshape(-1)).reshape(inf)
  if len(i) > 2 and i[2] is not None: y = y.pad(tuple((0, t - d) for d, t in zip(inf, _ints(i[2]))))
  return y
def _nms(i, a, o):
  """NonMaxSuppression on the host: the number of selected boxes is data."""
  boxes, scores = i[0].numpy().astype(np.float64), i[1].numpy().astype(np.float64)
  mx = int(_scalar(i[2])) if len(i) > 2 and i[2] is not None and i[2].numel() else 0
  iou_t = _scalar(i[3]) if len(i) > 3 and i[3] is not None and i[3].numel() else 0.0
  sc_t = _scalar(i[4]) if len(i) > 4 and i[4] is not None and i[4].numel() else None
  if a.get("center_point_box", 0):
    c = boxes
    boxes = np.stack([c[..., 1] - c[..., 3] / 2, c[..., 0] - c[..., 2] / 2, c[..., 1] + c[..., 3] / 2, c[..., 0] + c[..., 2] / 2], -1)
  y1, x1 = np.minimum(boxes[..., 0], boxes[..., 2]), np.minimum(boxes[..., 1], boxes[..., 3])
  y2, x2 = np.maximum(boxes[..., 0], boxes[..., 2]), np.maximum(boxes[..., 1], boxes[..., 3])
  sel = []
  for b in range(scores.shape[0]):
    area = (y2[b] - y1[b]) * (x2[b] - x1[b])
    for c in range(scores.shape[1]):
      sc = scores[b, c]
      order = [j for j in np.argsort(-sc, kind="stable") if sc_t is None or sc[j] > sc_t]
      keep = []
      for j in order:
        if len(keep) >= mx: break
        ok = True
        for q in keep:
          ih = max(0.0, min(y2[b, j], y2[b, q]) - max(y1[b, j], y1[b, q]))
          iw = max(0.0, min(x2[b, j], x2[b, q]) - max(x1[b, j], x1[b, q]))
          inter = ih * iw
          union = area[j] + area[q] - inter
          if union > 0 and inter / union > iou_t: ok = False; break
        if ok: keep.append(j)
      sel += [[b, c, j] for j in keep]
  return Tensor(np.array(sel, np.int64).reshape(-1, 3))
def _flex_attention(i, a, o):
  Q, K, V = i[:3]
  sc = a.get("scale", 1 / math.sqrt(Q.shape[3]))
  if Q.shape[1] != K.shape[1]: K, V = K.repeat_interleave(Q.shape[1] // K.shape[1], 1), V.repeat_interleave(Q.shape[1] // K.shape[1], 1)
  sq = Tensor(np.array(np.sqrt(np.float32(sc)), Q.dtype.np))
  cdt = _dt(a["softmax_precision"]) if a.get("softmax_precision") else dtypes.float32 if Q.dtype.itemsize < 4 else Q.dtype
  s_ = ((Q * sq) @ (K * sq).transpose(-1, -2)).cast(cdt)
  if "score_mod" in a: s_ = a["score_mod"](s_)[0].cast(cdt)
  p = s_.softmax(-1)
  if "prob_mod" in a: p = a["prob_mod"](p)[0].cast(cdt)
  return (p @ V.cast(cdt)).cast(V.dtype)
def _optimizer(kind: str):
  """ai.onnx.preview.training's Adagrad, Momentum and Adam over n tensors: (R, T, X.., G.., state..) -> (X'.., state'..)."""
  nstate = {"Adagrad": 1, "Momentum": 1, "Adam": 2}[kind]
  def fn(i, a, o):
    r, t = i[0].cast(dtypes.float64), i[1].cast(dtypes.float64)
    n = (len(i) - 2) // (2 + nstate)
    xs, gs, st = i[2:2 + n], i[2 + n:2 + 2 * n], [i[2 + (2 + k) * n:2 + (3 + k) * n] for k in range(nstate)]
    outs_x, outs_s = [], [[] for _ in range(nstate)]
    nc = a.get("norm_coefficient", 0.0)
    for j in range(n):
      x, g = xs[j], gs[j]
      gr = nc * x + g
      if kind == "Adagrad":
        h = st[0][j] + gr * gr
        xn = x - (r / (1 + t * a.get("decay_factor", 0.0))).cast(x.dtype) * gr / (h.sqrt() + a.get("epsilon", 0.0))
        new = [h]
      elif kind == "Momentum":
        al, be = a["alpha"], a["beta"]
        v = al * st[0][j] + t.gt(0).where(be, 1.0).cast(x.dtype) * gr
        xn = x - r.cast(x.dtype) * (v if a.get("mode", "standard") == "standard" else gr + al * v)
        new = [v]
      else:
        al, be, eps = a.get("alpha", 0.9), a.get("beta", 0.999), a.get("epsilon", 1e-6)
        v, h = al * st[0][j] + (1 - al) * gr, be * st[1][j] + (1 - be) * gr * gr
        ra = t.gt(0).where(r * (1 - (t * math.log(be)).exp()).sqrt() / (1 - (t * math.log(al)).exp()), r)
        xn = (1 - a.get("norm_coefficient_post", 0.0)) * (x - ra.cast(x.dtype) * (v / (h.sqrt() + eps)))
        new = [v, h]
      outs_x.append(xn.cast(x.dtype))
      for k in range(nstate): outs_s[k].append(new[k].cast(x.dtype))
    return tuple(outs_x + [s for ss in outs_s for s in ss])
  return fn
def _tfidf(i, a, o):
  """TfIdfVectorizer over int n-grams: each pool n-gram's matches counted by elementwise compares of shifted views
  (unigrams once, longer n-grams at every skip distance 1..max_skip_count+1)."""
  x = i[0]
  x2 = x.reshape(1, -1) if x.ndim == 1 else x
  pool, counts, idxs = list(a["pool_int64s"]), list(a["ngram_counts"]), list(a["ngram_indexes"])
  lo, hi, ms = a["min_gram_length"], a["max_gram_length"], a.get("max_skip_count", 0)
  L, size = x2.shape[1], max(idxs) + 1
  cols, gid = [None] * size, 0
  for k, st in enumerate(counts):
    n, en = k + 1, counts[k + 1] if k + 1 < len(counts) else len(pool)
    for g in range((en - st) // n):
      gram, col = pool[st + g * n:st + (g + 1) * n], None
      if lo <= n <= hi:
        for d in (range(1, ms + 2) if n > 1 else [1]):
          m = L - (n - 1) * d
          if m <= 0: continue
          hit = None
          for t, v in enumerate(gram):
            e = x2[:, t * d:t * d + m].eq(v)
            hit = e if hit is None else hit & e
          c = hit.cast(dtypes.float32).sum(1)
          col = c if col is None else col + c
      j = idxs[gid]
      if col is not None: cols[j] = col if cols[j] is None else cols[j] + col
      gid += 1
  f = Tensor.stack(*[c if c is not None else Tensor.zeros(x2.shape[0]) for c in cols], dim=1)
  w, mode = a.get("weights"), a["mode"]
  if mode == "IDF": f = f.gt(0).where(Tensor(np.array(w, np.float32)) if w else 1.0, 0.0).cast(dtypes.float32)
  elif mode == "TFIDF" and w: f = f * Tensor(np.array(w, np.float32))
  return f.reshape(size) if x.ndim == 1 else f
def _det(i, a, o):
  """Determinant by Gaussian elimination with partial pivoting, unrolled over the (static) matrix size; the pivot row is
  picked by an argmax and moved by one-hot selects."""
  x = i[0]
  A, n = x.cast(dtypes.float64), x.shape[-1]
  det = Tensor.ones(*x.shape[:-2], dtype=dtypes.float64)
  for k in range(n):
    sub = A[..., k:, :]
    oh = Tensor.arange(n - k).reshape(*(1,) * (x.ndim - 2), n - k).eq(sub[..., k].abs().argmax(-1).unsqueeze(-1)).unsqueeze(-1)
    prow, rowk = oh.where(sub, 0).sum(-2), sub[..., 0, :]
    sub = oh.where(rowk.unsqueeze(-2), sub)   # the pivot's old place takes row k
    first = Tensor.arange(n - k).reshape(*(1,) * (x.ndim - 2), n - k, 1).eq(0)
    sub = first.where(prow.unsqueeze(-2), sub)
    piv = prow[..., k]
    det = det * piv * oh[..., 0, 0].where(1.0, -1.0)   # a swap flips the sign
    f = sub[..., :, k] / piv.eq(0).where(1.0, piv).unsqueeze(-1)
    sub = first.where(sub, sub - f.unsqueeze(-1) * prow.unsqueeze(-2))
    A = A[..., :k, :].cat(sub, dim=-2) if k else sub
  return det.cast(x.dtype)
def _roi_align(i, a, o):
  """RoiAlign: the sample points and their 4 bilinear taps are computed on the host from the (small) rois, the values
  gathered from the roi's image; avg averages the samples of a bin, max takes the largest weighted tap (onnx's rules)."""
  X, rois, bidx = i
  N, C, H, W = X.shape
  oh, ow, sr, sc = a.get("output_height", 1), a.get("output_width", 1), a.get("sampling_ratio", 0), a.get("spatial_scale", 1.0)
  half = a.get("coordinate_transformation_mode", "half_pixel") == "half_pixel"
  rv = rois.numpy().astype(np.float64)
  R = rv.shape[0]
  per = []
  for r in range(R):
    x1, y1, x2, y2 = rv[r] * sc - (0.5 if half else 0.0)
    rw, rh = x2 - x1, y2 - y1
    if not half: rw, rh = max(rw, 1.0), max(rh, 1.0)
    bh, bw = rh / oh, rw / ow
    gh, gw = sr if sr > 0 else int(np.ceil(rh / oh)), sr if sr > 0 else int(np.ceil(rw / ow))
    iy, ix = (np.arange(gh) + 0.5) * bh / gh, (np.arange(gw) + 0.5) * bw / gw
    y = y1 + np.arange(oh)[:, None, None, None] * bh + iy[None, None, :, None]   # (oh, 1, gh, 1)
    x = x1 + np.arange(ow)[None, :, None, None] * bw + ix[None, None, None, :]   # (1, ow, 1, gw)
    y, x = np.broadcast_arrays(y, x)
    out = (y < -1) | (y > H) | (x < -1) | (x > W)
    y, x = np.maximum(y, 0), np.maximum(x, 0)
    yl, xl = y.astype(np.int64), x.astype(np.int64)
    ycap, xcap = yl >= H - 1, xl >= W - 1
    yl, xl = np.where(ycap, H - 1, yl), np.where(xcap, W - 1, xl)
    y, x = np.where(ycap, yl, y), np.where(xcap, xl, x)
    yh, xh = np.where(ycap, yl, yl + 1), np.where(xcap, xl, xl + 1)
    ly, lx = y - yl, x - xl
    pos = np.stack([yl * W + xl, yl * W + xh, yh * W + xl, yh * W + xh], -1)
    w = np.where(out[..., None], 0, np.stack([(1 - ly) * (1 - lx), (1 - ly) * lx, ly * (1 - lx), ly * lx], -1))
    per.append((pos.reshape(oh, ow, -1), w.reshape(oh, ow, -1), max(gh * gw, 1)))
  M = max(p.shape[-1] for p, _, _ in per)
  pos = np.stack([np.pad(p, ((0, 0), (0, 0), (0, M - p.shape[-1]))) for p, _, _ in per])
  wts = np.stack([np.pad(w, ((0, 0), (0, 0), (0, M - w.shape[-1])), constant_values=np.nan if a.get("mode", "avg") == "max" else 0)
                  for _, w, _ in per])
  xr = X.reshape(N, C, H * W)[bidx.cast(dtypes.int64)]   # (R, C, H*W): each roi's image
  v = xr.gather(2, Tensor(pos.reshape(R, 1, -1)).expand(R, C, oh * ow * M)).reshape(R, C, oh, ow, M)
  wt = Tensor(np.nan_to_num(wts).astype(X.dtype.np)).reshape(R, 1, oh, ow, M)
  if a.get("mode", "avg") == "avg":
    return ((v * wt).sum(-1) / Tensor(np.array([c for _, _, c in per], X.dtype.np)).reshape(R, 1, 1, 1)).cast(X.dtype)
  pad = Tensor(np.isnan(wts)).reshape(R, 1, oh, ow, M)   # taps past a roi's own sample count
  return pad.where(-math.inf, v * wt).max(-1).cast(X.dtype)
def _mel(i, a, o):
  """MelWeightMatrix: a constant of the scalar inputs (triangular filters on onnx's mel grid), made on the host."""
  nb, L, sr = (int(_scalar(t)) for t in i[:3])
  lo_hz, hi_hz = (float(_scalar(t)) for t in i[3:5])
  mel = lambda hz: 2595 * np.log1p(hz / 700) / np.log(10)
  f = np.arange(nb + 2) * ((mel(hi_hz) - mel(lo_hz)) / (nb + 2)) + mel(lo_hz)
  f = (((L + 1) * (700 * np.expm1(f / 2595 * np.log(10)))) // sr).astype(int)
  j, lo, c, hi = np.arange(L // 2 + 1)[:, None], f[None, :-2], f[None, 1:-1], f[None, 2:]
  up = np.where(c == lo, (j == c) * 1.0, np.where((lo <= j) & (j <= c), (j - lo) / np.maximum(c - lo, 1), 0.0))
  w = np.where((hi > c) & (c <= j) & (j < hi), (hi - j) / np.maximum(hi - c, 1), up)
  return Tensor(w.astype(_dt(a.get("output_datatype", onnx.TensorProto.FLOAT)).np))
def _deform_conv(i, a, o):
  """DeformConv (2-d): every kernel tap samples the input bilinearly (zeros outside) at its offset position, times the
  mask; the sampled columns are then contracted with the weight per group."""
  X, Wt, off = i[:3]
  B, mask = (i[3] if len(i) > 3 else None), (i[4] if len(i) > 4 else None)
  if X.ndim != 4: raise NotImplementedError(f"DeformConv on {X.ndim - 2}-d inputs")
  N, C, H, W_ = X.shape
  kh, kw = a.get("kernel_shape", Wt.shape[2:])
  sh, sw = a.get("strides", [1, 1])
  dh, dw = a.get("dilations", [1, 1])
  p = a.get("pads", [0, 0, 0, 0])
  G, Go, (oh, ow) = a.get("group", 1), a.get("offset_group", 1), off.shape[2:]
  K, O = kh * kw, oh * ow
  off = off.reshape(N, Go, kh, kw, 2, oh, ow)
  mask = mask.reshape(N, Go, K * O) if mask is not None else None
  by = Tensor((np.arange(kh) * dh)[:, None, None, None] + (np.arange(oh) * sh - p[0])[None, None, :, None]).reshape(1, kh, 1, oh, 1)
  bx = Tensor((np.arange(kw) * dw)[None, :, None, None] + (np.arange(ow) * sw - p[1])[None, None, None, :]).reshape(1, 1, kw, 1, ow)
  cols = []
  for g in range(Go):
    y, x = (by + off[:, g, :, :, 0]).reshape(N, K * O), (bx + off[:, g, :, :, 1]).reshape(N, K * O)
    y0, x0 = y.floor(), x.floor()
    xg = X[:, g * C // Go:(g + 1) * C // Go].reshape(N, C // Go, H * W_)
    v = None
    for yy, wy in ((y0, 1 - (y - y0)), (y0 + 1, y - y0)):
      for xx, wx in ((x0, 1 - (x - x0)), (x0 + 1, x - x0)):
        ok = yy.ge(0) & yy.le(H - 1) & xx.ge(0) & xx.le(W_ - 1)
        flat = (yy.clip(0, H - 1) * W_ + xx.clip(0, W_ - 1)).cast(dtypes.int64)
        t = xg.gather(2, flat.unsqueeze(1).expand(N, C // Go, K * O)) * ok.where(wy * wx, 0).unsqueeze(1)
        v = t if v is None else v + t
    cols.append(v if mask is None else v * mask[:, g].unsqueeze(1))
  col = Tensor.cat(*cols, dim=1) if Go > 1 else cols[0]   # (N, C, K*O)
  icg, ocg = C // G, Wt.shape[0] // G
  col = col.reshape(N, G, 1, icg * K, O)
  out = (col * Wt.reshape(1, G, ocg, icg * K, 1)).sum(3).reshape(N, G * ocg, oh, ow)
  return (out if B is None else out + B.reshape(1, -1, 1, 1)).cast(X.dtype)
_TREE_CMP = {0: Tensor.le, 1: Tensor.lt, 2: Tensor.ge, 3: Tensor.gt, 4: Tensor.eq, 5: Tensor.ne}
def _tree_ensemble(i, a, o):
  """ai.onnx.ml TreeEnsemble: the trees are static, so each leaf is reached where the conjunction of the compares on
  its path holds; every tree adds its reached leaf's weight to the leaf's target (sum, average, min or max)."""
  X = i[0]
  modes, splits = np.asarray(a["nodes_modes"]).reshape(-1), np.asarray(a["nodes_splits"]).reshape(-1)
  feat, tn, fn_, tl, fl = (a[k] for k in ("nodes_featureids", "nodes_truenodeids", "nodes_falsenodeids", "nodes_trueleafs",
                                          "nodes_falseleafs"))
  lw, lt = np.asarray(a["leaf_weights"]).reshape(-1), a["leaf_targetids"]
  miss = a.get("nodes_missing_value_tracks_true") or [0] * len(feat)
  members, sets = iter(np.asarray(a.get("membership_values", [])).reshape(-1).tolist()), {}
  for k, m in enumerate(modes):   # each MEMBER node owns the next NaN-terminated run of membership_values
    if m == 6: sets[k] = list(_until_nan(members))
  def cond(k):
    x = X[:, feat[k]]
    if modes[k] == 6: c = Tensor.stack(*[x.eq(v) for v in sets[k]]).any(0) if sets[k] else Tensor(np.zeros(X.shape[0], bool))
    else: c = _TREE_CMP[int(modes[k])](x, float(splits[k]))
    return c | x.isnan() if miss[k] else c
  agg, nt, N = a.get("aggregate_function", 1), a["n_targets"], X.shape[0]
  init = {0: 0.0, 1: 0.0, 2: np.finfo(X.dtype.np).max, 3: np.finfo(X.dtype.np).min}[agg]
  out = [Tensor.full((N,), init, dtype=X.dtype) for _ in range(nt)]
  roots = a["tree_roots"]
  for r in roots:
    stack = [(r, None, bool(tl[r] and fl[r] and tn[r] == fn_[r]))]
    while stack:
      k, path, leaf = stack.pop()
      if leaf:
        val, t = float(lw[k]), lt[k]
        hit = path if path is not None else Tensor(np.ones(N, bool))
        prev = out[t]
        out[t] = {0: lambda: prev + hit.where(val / len(roots), 0.0), 1: lambda: prev + hit.where(val, 0.0),
                  2: lambda: hit.where(prev.minimum(val), prev), 3: lambda: hit.where(prev.maximum(val), prev)}[agg]().cast(X.dtype)
        continue
      c = cond(k)
      stack.append((tn[k], c if path is None else path & c, bool(tl[k])))
      stack.append((fn_[k], c.logical_not() if path is None else path & c.logical_not(), bool(fl[k])))
  return Tensor.stack(*out, dim=1)
def _until_nan(it):
  for v in it:
    if math.isnan(v): return
    yield v
def _bitcast(i, a, o):
  x, dt = i[0], _dt(a["to"])
  if x.dtype.is_bool or dt.is_bool: return x.cast(dt)   # a bool is one byte, 0 or 1, in ONNX as in numpy
  return x.bitcast(dt)
def _col2im(i, a, o):
  x, img, k = i[0], _ints(i[1]), _ints(i[2])
  n = len(k)
  s, d, p = a.get("strides", [1] * n), a.get("dilations", [1] * n), a.get("pads", [0] * 2 * n)
  blocks = [(im + p[j] + p[j + n] - (d[j] * (k[j] - 1) + 1)) // s[j] + 1 for j, im in enumerate(img)]
  N, C = x.shape[0], x.shape[1] // math.prod(k)
  x = x.reshape(N, C, *k, *blocks)
  full = [im + p[j] + p[j + n] for j, im in enumerate(img)]
  out = None
  for off in np.ndindex(*k):
    v = x[(slice(None), slice(None), *off)]   # (N, C, *blocks) placed at off*d + b*s of the padded image
    for j in range(n):
      ax = 2 + j
      if s[j] > 1:   # zero insertion between the blocks
        v = v.unsqueeze(ax + 1).pad(tuple((0, s[j] - 1) if q == ax + 1 else (0, 0) for q in range(v.ndim + 1)))
        v = v.reshape(*v.shape[:ax], -1, *v.shape[ax + 2:])
      st = off[j] * d[j]
      v = v.pad(tuple((st, full[j] - st - v.shape[ax]) if q == ax else (0, 0) for q in range(v.ndim)))
    out = v if out is None else out + v
  return out.shrink(((0, N), (0, C), *[(p[j], p[j] + img[j]) for j in range(n)]))

_ACT = {"Tanh": lambda x, al, be: x.tanh(), "Sigmoid": lambda x, al, be: x.sigmoid(), "Relu": lambda x, al, be: x.relu(),
        "LeakyRelu": lambda x, al, be: x.leaky_relu(al), "ThresholdedRelu": lambda x, al, be: x.gt(al).where(x, 0).cast(x.dtype),
        "ScaledTanh": lambda x, al, be: (x * be).tanh() * al, "HardSigmoid": lambda x, al, be: (x * al + be).clip(0, 1),
        "Elu": lambda x, al, be: x.elu(al), "Softsign": lambda x, al, be: x.softsign(), "Softplus": lambda x, al, be: (1 + x.exp()).log(),
        "Affine": lambda x, al, be: x * al + be}
def _rnn(kind: str):
  """RNN, GRU and LSTM (ONNX's gate orders: GRU z r h, LSTM i o f c), unrolled over the sequence; a batch row past its
  sequence_lens keeps its state and gives zeros."""
  G, defaults = {"RNN": (1, ["Tanh"]), "GRU": (3, ["Sigmoid", "Tanh"]), "LSTM": (4, ["Sigmoid", "Tanh", "Tanh"])}[kind]
  def fn(i, a, o):
    X, W, R = i[:3]
    B, lens, h0 = (i[j] if len(i) > j else None for j in (3, 4, 5))
    c0, P = (i[6] if len(i) > 6 else None), (i[7] if len(i) > 7 else None)
    if a.get("layout", 0): X = X.transpose(0, 1)
    T, N, H = X.shape[0], X.shape[1], a["hidden_size"]
    dirs = {"forward": [False], "reverse": [True], "bidirectional": [False, True]}[a.get("direction", "forward")]
    acts, al, be = a.get("activations", defaults * len(dirs)), a.get("activation_alpha", []), a.get("activation_beta", [])
    clip = a.get("clip")
    L = _ints(lens) if lens is not None else [T] * N
    ys, hs, cs = [], [], []
    for d, rev in enumerate(dirs):
      na = len(defaults)
      f = [(lambda x, n=acts[d * na + j], k=d * na + j: _ACT[n](x, al[k] if k < len(al) else 0.01 if n == "LeakyRelu" else 1.0,
                                                                   be[k] if k < len(be) else 0.0)) for j in range(na)]
      w, r = W[d], R[d]
      b = B[d] if B is not None else Tensor.zeros(2 * G * H, dtype=X.dtype)
      wb, rb = b[:G * H], b[G * H:]
      h = h0[d] if h0 is not None else Tensor.zeros(N, H, dtype=X.dtype)
      c = c0[d] if c0 is not None else Tensor.zeros(N, H, dtype=X.dtype)
      p = P[d] if P is not None else None
      out = [None] * T
      XW = X @ w.T + wb if T > 1 else None   # the input's part of every step's gates in one contraction
      for t in (range(T - 1, -1, -1) if rev else range(T)):
        xw = XW[t] if XW is not None else X[t] @ w.T + wb
        live = Tensor(np.array([t < n for n in L]).reshape(N, 1)) if lens is not None else None
        if kind == "RNN": hn, cn = f[0](_clipv(xw + h @ r.T + rb, clip)), c
        elif kind == "GRU":
          xz, xr, xh = xw.split(H, 1)
          rz, rr, rh = r.split(H, 0)
          bz, br, bh = rb.split(H, 0)
          z = f[0](_clipv(xz + h @ rz.T + bz, clip))
          rt = f[0](_clipv(xr + h @ rr.T + br, clip))
          ht = f[1](_clipv(xh + rt * (h @ rh.T + bh), clip)) if a.get("linear_before_reset", 0) else f[1](_clipv(xh + (rt * h) @ rh.T + bh, clip))
          hn, cn = (1 - z) * ht + z * h, c
        else:
          g = xw + h @ r.T + rb
          gi, go, gf, gc = g.split(H, 1)
          if p is not None:
            pi, po, pf = p.split(H, 0)
            gi, gf = gi + pi * c, gf + pf * c
          it = f[0](_clipv(gi, clip))
          ft = 1 - it if a.get("input_forget", 0) else f[0](_clipv(gf, clip))
          cn = ft * c + it * f[1](_clipv(gc, clip))
          ot = f[0](_clipv(go + (p.split(H, 0)[1] * cn if p is not None else 0), clip))
          hn = ot * f[2](cn)
        if lens is None: h, c, out[t] = hn, cn, hn   # (every row lives every step)
        else: h, c, out[t] = live.where(hn, h), live.where(cn, c), live.where(hn, 0).cast(X.dtype)
      ys.append(Tensor.stack(*out) if T else Tensor.zeros(0, N, H, dtype=X.dtype))
      hs.append(h)
      cs.append(c)
    Y, Yh, Yc = Tensor.stack(*ys, dim=1), Tensor.stack(*hs), Tensor.stack(*cs)
    if a.get("layout", 0): Y, Yh, Yc = Y.permute(2, 0, 1, 3), Yh.transpose(0, 1), Yc.transpose(0, 1)
    return (Y, Yh, Yc) if kind == "LSTM" else (Y, Yh)
  return fn
def _clipv(x, c): return x if c is None else x.clip(-c, c)

# ---- quantization
ROUND_MAGIC = 12582912.0   # 1.5 * 2^23: float32 sums with it in [2^23, 2^24] are whole numbers, rounded half to even
def _qround(x: Tensor) -> Tensor:
  """round(x) of float32 x (half to even) whose result is clipped to an integer dtype's range later: x clamped to
  +-2^22 (no clipped result changes), then x + 1.5 * 2^23 - 1.5 * 2^23: two adds (Tensor.round takes about fifteen ops)."""
  return (x.clip(-(1 << 22), 1 << 22) + ROUND_MAGIC) - ROUND_MAGIC
def _sat(x: Tensor, dt: DType) -> Tensor: return _qround(x.cast(dtypes.float32)).clip(dt.min, dt.max).cast(dt)
def _qaxis(s: Tensor, x: Tensor, a) -> Tensor:
  """A scale or zero point shaped to broadcast against x: per tensor, per axis, or per block along axis."""
  if (bs := a.get("block_size", 0)) and s.ndim == x.ndim:
    ax = _ax(a.get("axis", 1), x.ndim)
    return s.repeat_interleave(bs, ax).shrink(tuple((0, n) if d == ax else None for d, n in enumerate(x.shape)))
  if s.ndim == 1 and s.numel() > 1 and x.ndim > 1:
    ax = _ax(a.get("axis", 1), x.ndim)
    return s.reshape([s.shape[0] if d == ax else 1 for d in range(x.ndim)])
  return s
def _quant(i, a, o):
  x, s, zp = i[0], i[1], i[2] if len(i) > 2 else None
  dt = zp.dtype if zp is not None else _dt(a["output_dtype"]) if a.get("output_dtype") else dtypes.uint8
  r = _qround(x.cast(dtypes.float32) / _qaxis(s, x, a).cast(dtypes.float32))
  if zp is not None: r = r + _qaxis(zp, x, a).cast(dtypes.float32)
  return r.clip(dt.min, dt.max).cast(dt)
def _dequant(i, a, o):
  x, s, zp = i[0], i[1], i[2] if len(i) > 2 else None
  r = x.cast(dtypes.float32)
  if zp is not None: r = r - _qaxis(zp, x, a).cast(dtypes.float32)
  return (r * _qaxis(s, x, a)).cast(s.dtype)
def _dyn_quant(i, a, o):
  # the range's ends made once (one kernel of both reduces), not again for every element that reads them; the scale,
  # zero point and quantized values are computed from them where they are read (in a consumer's kernel)
  x = i[0]
  # one max reduce over -x and x (the range's ends, each a pass over x)
  nlo, hi = Tensor.stack(-x.flatten(), x.flatten()).max(1).maximum(0).contiguous()
  lo = -nlo
  s = (hi - lo) / 255
  zp = _qround(0 - lo / s).clip(0, 255)
  return _qround(x / s).add(zp).clip(0, 255).cast(dtypes.uint8), s, zp.cast(dtypes.uint8)
def _int_in(t, zp): return hoisted(t.cast(dtypes.int32) - (zp.cast(dtypes.int32) if zp is not None else 0))
def _float_in(t, zp): return hoisted(t.cast(dtypes.float32) - (zp.cast(dtypes.float32) if zp is not None else 0))
def _small_ints(*ts) -> bool:
  """Whether ts are 8-bit integers on the CPU: minus their zero points each value lies in [-255, 255], a product's in
  [-65025, 65025], and a sum of 258 of them is below 2^24, exact in float32 whatever the order of the adds."""
  return all(t.dtype in (dtypes.int8, dtypes.uint8) and t.device == "CPU" for t in ts)
EXACT_K = 256   # the reduction chunk whose float32 sum of 8-bit products is exact (see _small_ints)
def _zero(t: Tensor) -> bool:
  """Whether t is the model's constant (no call data, nothing computed) and all zeros: a zero point that corrects nothing."""
  return not _reads_call(t) and {u.op for u in t.uop.toposort}.isdisjoint(GRAPH_ALU | {Ops.REDUCE_AXIS}) and not any(_vals(t))
def _dot_operands(A: Tensor, za, B: Tensor, zb) -> tuple:
  """A as uint8 and B as int8 values or the other way round (the CPU's int8 dot product multiplies u8 by s8), each
  zero point (int32, or 0) moved with its values by 128 where both are of one kind: A - za and B - zb unchanged."""
  za, zb = (0 if z is None or _zero(z) else z.cast(dtypes.int32) for z in (za, zb))
  if A.dtype is not B.dtype: return A, za, B, zb
  if A.dtype is dtypes.uint8: return A, za, hoisted((B.cast(dtypes.int32) - 128).cast(dtypes.int8)), zb - 128
  return (A.cast(dtypes.int32) + 128).cast(dtypes.uint8), za + 128, B, zb
def _int8_matmul(A: Tensor, za, B: Tensor, zb) -> Tensor:
  """(A - za) @ (B - zb) as A @ B - za * colsum(B) - zb * rowsum(A) + K * za * zb: a product of the 8-bit values
  themselves in int32 (uop-optimize's uop.int8: codegen.int8 on the CPU's int8 dot product), B's column sums made once
  where B is the model's constant (hoisted), A's leading dimensions its rows."""
  A, za, B, zb = _dot_operands(A, za, B, zb)
  nz = lambda z: isinstance(z, Tensor) or z != 0
  # A's values computed (a quantization): stored once as 8-bit values, by an elementwise kernel in vector lanes, which
  # the product reads in place and its row sums read too (left lazy, its packing would compute them element by element,
  # and the two readers would share its int32 cast, stored: the product would not be one of 8-bit values)
  if not {u.op for u in A.uop.toposort}.isdisjoint(GRAPH_ALU): A = A.contiguous()
  i32, lead = dtypes.int32, A.shape[:-1]
  a = A.reshape(-1, K := A.shape[-1])
  r = (a.cast(i32) @ B.cast(i32)).reshape(*lead, B.shape[-1])
  if nz(za): r = r - za * hoisted(B.cast(i32).sum(0, keepdim=True, dtype=i32))
  if nz(zb): r = r - zb * A.cast(i32).sum(-1, keepdim=True, dtype=i32)
  return r + K * za * zb if nz(za) and nz(zb) else r
def _int_matmul(A: Tensor, za, B: Tensor, zb) -> Tensor:
  """(A - za) @ (B - zb) in int32 as onnx defines it. Of 8-bit operands on a CPU with an int8 dot product, B a matrix:
  _int8_matmul. Else float32 matmuls (the packed contraction, the int8 weight's panels packed once) over chunks of
  EXACT_K of the reduction, each exact, added in int32."""
  if not (_small_ints(A, B) and A.ndim >= 2 and B.ndim >= 2): return _int_in(A, za) @ _int_in(B, zb)
  if host.INT8_DOT and B.ndim == 2: return _int8_matmul(A, za, B, zb)
  a, b, K = _float_in(A, za), _float_in(B, zb), A.shape[-1]
  if K <= EXACT_K: return (a @ b).cast(dtypes.int32)
  n = -(-K // EXACT_K)
  a = a.pad((0, n * EXACT_K - K)).reshape(*a.shape[:-1], n, EXACT_K).transpose(-3, -2)
  b = b.pad(((0, n * EXACT_K - K), (0, 0))).reshape(*b.shape[:-2], n, EXACT_K, b.shape[-1])
  return (a @ b).cast(dtypes.int32).sum(-3, dtype=dtypes.int32)
def _matmul_int(i, a, o):
  A, B = i[0], i[1]
  za, zb = (i[2] if len(i) > 2 else None), (i[3] if len(i) > 3 else None)
  if zb is not None and zb.ndim == 1 and zb.numel() > 1: zb = zb.reshape(1, -1)
  if za is not None and za.ndim == 1 and za.numel() > 1: za = za.reshape(-1, 1)
  return _int_matmul(A, za, B, zb).contiguous()
def _int_conv(x, zx, w, zw, b, a, o) -> Tensor:
  """ConvInteger's int32 result (plus int32 bias b); of 8-bit operands whose output sums at most EXACT_K products, a
  float32 conv (exact, see _small_ints)."""
  if zw is not None and zw.numel() > 1: zw = zw.reshape(-1, *(1,) * (w.ndim - 1))   # one zero point per output channel
  if not (_small_ints(x, w) and math.prod(w.shape[1:]) <= EXACT_K): return _conv([_int_in(x, zx), _int_in(w, zw), b], a, o)
  r = _conv([_float_in(x, zx), _float_in(w, zw)], a, o).cast(dtypes.int32)
  return r if b is None else r + b.cast(dtypes.int32).reshape(1, -1, *(1,) * (x.ndim - 2))
def _conv_int(i, a, o):
  return _int_conv(i[0], i[2] if len(i) > 2 else None, i[1], i[3] if len(i) > 3 else None, None, a, o)
def _qlinear_matmul(i, a, o):
  A, sa, za, B, sb, zb, sy, zy = i
  r = _int_matmul(A, za, B, zb).cast(dtypes.float32) * (sa * sb / sy).cast(dtypes.float32)
  return _sat(r + zy.cast(dtypes.float32), zy.dtype)
def _qlinear_conv(i, a, o):
  x, sx, zx, w, sw, zw, sy, zy = i[:8]
  b = i[8] if len(i) > 8 else None
  r = _int_conv(x, zx, w, zw, b, a, o).cast(dtypes.float32)
  sw = sw.reshape(1, -1, *(1,) * (x.ndim - 2)) if sw.numel() > 1 else sw
  return _sat(r * (sx * sw / sy) + zy.cast(dtypes.float32), zy.dtype)

# ---- resize
def _src_coords(mode: str, n_out: int, n_in: int, scale: float, roi: tuple[float, float] | None) -> np.ndarray:
  """Source coordinate of each output index (onnx's Resize): w = scale * n_in is the output width before rounding."""
  j, w = np.arange(n_out, dtype=np.float64), scale * n_in
  if mode == "half_pixel": return (j + 0.5) / scale - 0.5
  if mode == "half_pixel_symmetric": return n_in / 2 * (1 - n_out / w) + (j + 0.5) / scale - 0.5
  if mode == "pytorch_half_pixel": return (j + 0.5) / scale - 0.5 if w != 1 else np.full(n_out, -0.5)
  if mode == "align_corners": return j * (n_in - 1) / (w - 1) if w != 1 else np.zeros(n_out)
  if mode == "asymmetric": return j / scale
  if mode == "tf_crop_and_resize":
    s, e = roi
    return (j * (e - s) * (n_in - 1) / (w - 1) if w != 1 else np.full(n_out, (e - s) * (n_in - 1) / 2)) + s * (n_in - 1)
  raise NotImplementedError(f"coordinate_transformation_mode {mode}")
def _cubic_w(t: np.ndarray, A: float) -> np.ndarray:
  t = np.abs(t)
  return np.where(t <= 1, ((A + 2) * t - (A + 3)) * t * t + 1, np.where(t < 2, ((A * t - 5 * A) * t + 8 * A) * t - 4 * A, 0))
def _resize_axis(x: Tensor, ax: int, n_out: int, scale: float, a: dict, roi) -> Tensor:
  n_in = x.shape[ax]
  mode, ctm = a.get("mode", "nearest"), a.get("coordinate_transformation_mode", "half_pixel")
  c = _src_coords(ctm, n_out, n_in, scale, roi)
  outside = (c < 0) | (c > n_in - 1) if ctm == "tf_crop_and_resize" else None
  if mode == "nearest":
    nm = a.get("nearest_mode", "round_prefer_floor")
    r = {"round_prefer_floor": lambda v: np.where(v - np.floor(v) == 0.5, np.floor(v), np.round(v)),
         "round_prefer_ceil": lambda v: np.where(v - np.floor(v) == 0.5, np.ceil(v), np.round(v)),
         "floor": np.floor, "ceil": np.ceil}[nm](c)
    taps = [(np.clip(r, 0, n_in - 1).astype(np.int64), np.ones(n_out))]
  elif a.get("antialias", 0) and scale < 1:   # the filter widened by 1/scale, normalized (onnx's reference)
    x0 = np.where(c == np.floor(c), c - 1, np.floor(c))
    r = c - x0
    if mode == "linear":
      st = int(np.floor(-1 / scale) + 1)
      k = np.arange(st, st + 2 - 2 * st)
      w = np.clip(1 - np.abs((k[None, :] - r[:, None]) * scale), 0, 1)
    else:
      A, st = a.get("cubic_coeff_a", -0.75), int(np.floor(-2 / scale) + 1)
      k = np.arange(st, 2 - st)
      w = _cubic_w(scale * (k[None, :] - r[:, None]), A)
    w = w / w.sum(1, keepdims=True)
    n = w.shape[1]
    pos = x0[:, None] - n // 2 + 1 + np.arange(n)[None, :]
    if a.get("exclude_outside", 0):
      w = np.where((pos < 0) | (pos > n_in - 1), 0, w)
      w = w / w.sum(1, keepdims=True)
    taps = [(np.clip(pos[:, t], 0, n_in - 1).astype(np.int64), w[:, t]) for t in range(n)]
  elif mode == "linear":
    c = np.clip(c, 0, n_in - 1) if ctm != "tf_crop_and_resize" else c
    lo = np.floor(c)
    w = c - lo
    taps = [(np.clip(lo, 0, n_in - 1).astype(np.int64), 1 - w), (np.clip(lo + 1, 0, n_in - 1).astype(np.int64), w)]
  else:   # cubic
    A = a.get("cubic_coeff_a", -0.75)
    lo = np.floor(c)
    taps = []
    for t in (-1, 0, 1, 2):
      pos = lo + t
      w = _cubic_w(c - pos, A)
      if a.get("exclude_outside", 0): w = np.where((pos < 0) | (pos > n_in - 1), 0, w)
      taps.append((np.clip(pos, 0, n_in - 1).astype(np.int64), w))
    if a.get("exclude_outside", 0):
      tot = sum(w for _, w in taps)
      taps = [(p, w / tot) for p, w in taps]
  shape = [1] * x.ndim
  shape[ax] = n_out
  out = None
  xf = x if x.dtype.is_float else x.float()
  for p, w in taps:
    v = _take(xf, ax, p)
    if mode != "nearest": v = v * Tensor(w.astype(np.float32 if xf.dtype != dtypes.float64 else np.float64)).reshape(shape)
    out = v if out is None else out + v
  if outside is not None and outside.any():
    out = Tensor(outside.reshape(shape)).where(a.get("extrapolation_value", 0.0), out)
  return out.cast(x.dtype)
def _resize(i, a, o):
  x = i[0]
  if o < 10:   # Upsample
    scales, sizes, roi = list(a["scales"]) if "scales" in a else _vals(i[1]), None, None
    a = {**a, "coordinate_transformation_mode": "asymmetric", "nearest_mode": "floor"}
  elif o < 11: scales, sizes, roi = _vals(i[1]), None, None
  else:
    roi = _vals(i[1]) if len(i) > 1 and i[1] is not None else []
    scales = _vals(i[2]) if len(i) > 2 and i[2] is not None else []
    sizes = _ints(i[3]) if len(i) > 3 and i[3] is not None else None
  axes = [_ax(v, x.ndim) for v in a.get("axes", range(x.ndim))]
  if sizes:
    pol = a.get("keep_aspect_ratio_policy", "stretch")
    in_sz = [x.shape[d] for d in axes]
    if pol != "stretch":
      r = (min if pol == "not_larger" else max)(s / n for s, n in zip(sizes, in_sz))
      sizes = [int(math.floor(r * n + 0.5)) for n in in_sz]
      scales = [r] * len(axes)
    else: scales = [s / n for s, n in zip(sizes, in_sz)]
  else:
    scales = list(scales)[-len(axes):] if len(scales) != len(axes) else list(scales)
    sizes = [int(math.floor(x.shape[d] * s)) for d, s in zip(axes, scales)]
  rois = {}
  if roi: rois = {d: (roi[j], roi[j + len(axes)]) for j, d in enumerate(axes)}
  for d, n, s in zip(axes, sizes, scales):
    if n == x.shape[d] and s == 1 and a.get("coordinate_transformation_mode") != "tf_crop_and_resize": continue
    x = _resize_axis(x, d, n, s, a, rois.get(d))
  return x

# ---- control flow and sequences
# the graph inputs' data a call computes on (set by the model around a call); an If whose condition reads one
CALL = threading.local()
MERGE_NODES = 64   # an If on data runs both branches (and picks with where) when they hold at most this many nodes together
def _nodes(g: onnx.GraphProto) -> int:
  return sum(1 + sum(_nodes(x.g) for x in n.attribute if x.type == onnx.AttributeProto.GRAPH) for n in g.node)
def _merged(c: Tensor, then, other) -> tuple | None:
  """Both branches' outputs picked by c with where: one straight graph that a replay runs whatever c holds; None when
  the branches are not small or give outputs of other shapes or dtypes."""
  if _nodes(then.graph) + _nodes(other.graph) > MERGE_NODES: return None
  try: t, e = then(), other()
  except Exception: return None   # a branch that cannot run on these values: the one c picks runs alone (and raises if it is that one)
  if len(t) != len(e) or not all(isinstance(x, Tensor) and isinstance(y, Tensor) and x.shape == y.shape and x.dtype == y.dtype
                                 for x, y in zip(t, e)): return None
  c = c.reshape(()).cast(dtypes.bool)
  return tuple(c.where(x, y) for x, y in zip(t, e))
def _if(i, a, o):
  if (n := i[0].numel()) != 1: raise ValueError(f"the condition has {n} elements (shape {i[0].shape}), If takes one")
  # a condition computed from the call's data would be read on the host each call (no replay): where of both branches
  if _reads_call(i[0]) and (out := _merged(i[0], a["then_branch"], a["else_branch"])) is not None: return out
  return tuple((a["then_branch"] if bool(_vals(i[0])[0]) else a["else_branch"])())
LOOP_UNROLL = 64   # a Loop whose condition is the call's data runs all its trips, masked, up to this many
def _reads_call(t: Tensor) -> bool:
  """Whether t is computed from the call's data (ops.CALL): reading it on the host would stop replays."""
  return bool(args := getattr(CALL, "args", None)) and any(id(u) in args for u in t.uop.toposort)
def computed(t: Tensor) -> bool:
  """Whether t's graph computes values (more than views of data and constants) without drawing random numbers, into
  no more elements than the data it reads: stored once, it takes no more memory than that data (a broadcast of a
  computed value is left lazy)."""
  nodes = t.uop.toposort
  ops = {u.op for u in nodes}
  if ops.isdisjoint(GRAPH_ALU | {Ops.REDUCE_AXIS}) or Ops.THREEFRY in ops or not isinstance(n := t.uop.size, int): return False
  return n <= sum(u.size for u in nodes if u.op is Ops.BUFFER and isinstance(u.size, int))
def hoisted(t: Tensor) -> Tensor:
  """t, where a recorded call (CALL.args) computes it from the model's constants alone (a quantized weight minus its
  zero point): its value realized once (CALL.consts, by t's graph), so replays read it as data, as onnxruntime folds
  constants; a contraction then keeps such a weight's packed panels between calls. One numpy computes as a kernel would
  (fold.py: a batchnorm's scale and shift) is data at once, so even the first call compiles no kernel for it; any other
  is t itself until the call ends (the model realizes CALL.pending)."""
  if not getattr(CALL, "args", None) or _reads_call(t) or not computed(t): return t
  if (v := CALL.consts.get(t.uop)) is not None: return v
  if t.device == "CPU" and (a := fold.evaluate(t.uop)) is not None:   # numpy computes it as a kernel would: data now,
    CALL.consts[t.uop] = v = Tensor._of(new_buffer(a, t.uop.loc), "CPU")   # so the first call compiles no kernel for it
    return v
  CALL.pending.append((t.uop, t))
  return t
def _masked_loop(n: int, cond: Tensor, carried: list, body) -> list | None:
  """A Loop of n trips at most whose condition is the call's data, as one straight graph: every trip runs and a trip
  after the condition fell keeps the carried values (where); None when the condition is not the call's data, the body
  gives scan outputs or carried values of other shapes, or fails on a trip past the end."""
  if len(body.graph.output) != 1 + len(carried): return None
  alive = cond.reshape(()).cast(dtypes.bool)
  try:
    for it in range(n):
      outs = body(Tensor(np.array(it, np.int64)), alive, *carried)
      if it == 0 and not (_reads_call(cond) or _reads_call(outs[0])): return None
      if not all(isinstance(x, Tensor) and x.shape == y.shape and x.dtype == y.dtype for x, y in zip(outs[1:], carried)): return None
      carried = [alive.where(x, y) for x, y in zip(outs[1:], carried)]
      alive = alive & outs[0].reshape(()).cast(dtypes.bool)
  except Exception: return None   # (the plain loop runs it, and raises what a trip it runs raises)
  return carried
def _carried(new: list, old: list, scans: list) -> tuple[list, list]:
  """A trip's carried values, each one that the trip computed through a reduce of the carried values made contiguous,
  and its scan outputs reading those: the next trip's reduce reads such a value from memory anyway, and stored where
  it is made, after its elementwise tail, that tail runs in the reduce's kernel instead of a kernel of its own (and
  is not computed again by each reader, a scan output's stack among them)."""
  stop = {t.uop for t in old if isinstance(t, Tensor)}
  def through_reduce(u) -> bool:
    dep = set()
    for x in u.toposort:
      if x in stop or any(s in dep for s in x.src):
        dep.add(x)
        if x.op is Ops.REDUCE_AXIS: return True
    return False
  made = {t.uop: t.contiguous() for t in new if isinstance(t, Tensor) and t.uop not in stop and through_reduce(t.uop)}
  subst = {u: t.uop for u, t in made.items()}
  def pick(t):
    if not made or not isinstance(t, Tensor): return t
    return made[t.uop] if t.uop in made else t if (u := t.uop.substitute(subst)) is t.uop else Tensor._of(u, t.device)
  return [pick(t) for t in new], [pick(t) for t in scans]
def _loop(i, a, o):
  M, cond, carried = i[0], i[1], list(i[2:])
  body = a["body"]
  if M is None and cond is None: raise NotImplementedError("Loop with neither a trip count nor a condition (it never ends)")
  n = int(_scalar(M)) if M is not None else None
  if n is not None and n <= LOOP_UNROLL and cond is not None and getattr(CALL, "args", None) and \
     (out := _masked_loop(n, cond, carried, body)) is not None: return tuple(out)
  c = bool(_scalar(cond)) if cond is not None else True
  scans, it = [], 0
  while c and (n is None or it < n):
    outs = body(Tensor(np.array(it, np.int64)), Tensor(np.array(c)), *carried)
    if cond is not None: c = bool(_scalar(outs[0]))   # without a condition input the body's condition is ignored (spec)
    carried, sc = _carried(list(outs[1:1 + len(carried)]), carried, outs[1 + len(carried):])
    scans.append(sc)
    it += 1
  nsc = len(body.graph.output) - 1 - len(carried)
  stacked = [Tensor.stack(*[s[j] for s in scans]) if scans else Tensor.zeros(0) for j in range(nsc)]
  return tuple(carried + stacked)
def _scan(i, a, o):
  body = a["body"]
  nsc_in = a["num_scan_inputs"]
  if o < 9:   # opset 8: a batch dim first on every input, an optional sequence_lens input; each batch row is scanned alone
    if i[0] is not None: raise NotImplementedError("Scan-8 with sequence_lens")
    rows = [_scan([x[b] for x in i[1:]], a, 9) for b in range(i[1].shape[0])]
    return tuple(Tensor.stack(*[r[j] for r in rows]) for j in range(len(rows[0])))
  states, xs = list(i[:len(i) - nsc_in]), list(i[len(i) - nsc_in:])
  in_axes = [_ax(v, xs[j].ndim) for j, v in enumerate(a.get("scan_input_axes", [0] * nsc_in))]
  in_dirs = a.get("scan_input_directions", [0] * nsc_in)
  if len(lens := {x.shape[ax] for x, ax in zip(xs, in_axes)}) > 1: raise ValueError(f"the scan inputs have different lengths {sorted(lens)}")
  T = xs[0].shape[in_axes[0]]
  outs_all = []
  for t in range(T):
    sl = [x.shrink(tuple(((T - 1 - t, T - t) if dr else (t, t + 1)) if d == ax else None for d in range(x.ndim))).squeeze(ax)
          for x, ax, dr in zip(xs, in_axes, in_dirs)]
    outs = body(*states, *sl)
    states, ys = _carried(list(outs[:len(states)]), states, outs[len(states):])
    outs_all.append(ys)
  nout = len(body.graph.output) - len(states)
  out_axes, out_dirs = a.get("scan_output_axes", [0] * nout), a.get("scan_output_directions", [0] * nout)
  res = []
  for j in range(nout):
    seq = [y[j] for y in outs_all]
    if out_dirs[j]: seq = seq[::-1]
    res.append(Tensor.stack(*seq, dim=_ax(out_axes[j], seq[0].ndim + 1)))
  return tuple(states + res)
def _seq_map(i, a, o):
  body = a["body"]
  outs = [body(*[x[k] if isinstance(x, list) else x for x in i]) for k in range(len(i[0]))]
  return tuple([r[j] for r in outs] for j in range(len(body.graph.output)))
def _seq_insert(i, a, o):
  s, t = list(i[0]), i[1]
  pos = _pos(int(_scalar(i[2])), len(s), end=True) if len(i) > 2 and i[2] is not None else len(s)
  s.insert(pos, t)
  return s
def _seq_erase(i, a, o):
  s = list(i[0])
  del s[_pos(int(_scalar(i[1])) if len(i) > 1 and i[1] is not None else -1, len(s))]
  return s
def _split_to_seq(i, a, o):
  x, sp = i[0], i[1] if len(i) > 1 else None
  ax = _ax(a.get("axis", 0), x.ndim)
  if sp is None:
    parts = list(x.split(1, ax))
    return parts if a.get("keepdims", 1) else [p.squeeze(ax) for p in parts]
  v = _ints(sp)
  return list(x.split(v[0] if sp.ndim == 0 else v, ax))
def _concat_from_seq(i, a, o):
  s, ax = i[0], a["axis"]
  if not s: raise ValueError("an empty sequence has no shape to concatenate")
  if a.get("new_axis", 0): return Tensor.stack(*s, dim=_ax(ax, s[0].ndim + 1))
  return _concat(s, {"axis": ax}, o)
def _opt_get(i, a, o):
  if i[0] is None: raise ValueError("OptionalGetElement of an empty optional")
  return i[0]

_U = {"Abs": Tensor.abs, "Neg": Tensor.neg, "Sqrt": Tensor.sqrt, "Exp": Tensor.exp, "Log": Tensor.log, "Reciprocal": Tensor.reciprocal,
      "Floor": Tensor.floor, "Ceil": Tensor.ceil, "Round": Tensor.round, "Sin": Tensor.sin, "Cos": Tensor.cos, "Tan": Tensor.tan,
      "Asin": Tensor.asin, "Acos": Tensor.acos, "Atan": Tensor.atan, "Sinh": Tensor.sinh, "Cosh": Tensor.cosh, "Asinh": Tensor.asinh,
      "Acosh": Tensor.acosh, "Atanh": Tensor.atanh, "Tanh": Tensor.tanh, "Sigmoid": Tensor.sigmoid, "Relu": Tensor.relu, "Erf": Tensor.erf,
      "Sign": Tensor.sign, "Not": Tensor.logical_not, "IsNaN": Tensor.isnan, "Softsign": Tensor.softsign,
      "Mish": lambda x: x.double().mish().cast(x.dtype) if x.dtype == dtypes.float32 else x.mish(),
      "HardSwish": Tensor.hardswish, "Identity": lambda x: x, "BitwiseNot": Tensor.bitwise_not,
      "Softplus": lambda x: (1 + x.exp()).log()}
_B = {"Add": Tensor.add, "Sub": Tensor.sub, "Mul": Tensor.mul, "Div": _div, "Pow": _pow, "Equal": Tensor.eq, "Less": Tensor.lt,
      "LessOrEqual": Tensor.le, "Greater": Tensor.gt, "GreaterOrEqual": Tensor.ge, "And": Tensor.bitwise_and, "Or": Tensor.bitwise_or,
      "Xor": Tensor.bitwise_xor, "BitwiseAnd": Tensor.bitwise_and, "BitwiseOr": Tensor.bitwise_or, "BitwiseXor": Tensor.bitwise_xor,
      "PRelu": lambda x, s: x.lt(0).where(x * s, x).cast(x.dtype), "MatMul": Tensor.matmul}

OPS = {**{k: _un(f) for k, f in _U.items()}, **{k: _bin(f) for k, f in _B.items()}, **{k: _reduce(k) for k in _RED},
  "Max": _variadic(Tensor.maximum), "Min": _variadic(Tensor.minimum), "Sum": _variadic(Tensor.add),
  "Mean": lambda i, a, o: _variadic(Tensor.add)(i, a, o) / len([t for t in i if t is not None]),
  "Mod": _mod, "BitShift": _bitshift, "Clip": _clip, "Gelu": _gelu, "IsInf": _isinf, "Shrink": _shrink, "Where": _where,
  "Elu": lambda i, a, o: i[0].elu(a.get("alpha", 1.0)), "Celu": lambda i, a, o: i[0].celu(a.get("alpha", 1.0)),
  "Selu": lambda i, a, o: i[0].selu(a.get("alpha", 1.67326319217681884765625), a.get("gamma", 1.05070102214813232421875)),
  "LeakyRelu": lambda i, a, o: i[0].leaky_relu(a.get("alpha", 0.01)),
  "ThresholdedRelu": lambda i, a, o: i[0].gt(a.get("alpha", 1.0)).where(i[0], 0).cast(i[0].dtype),
  "HardSigmoid": lambda i, a, o: i[0].hardsigmoid(a.get("alpha", 0.2), a.get("beta", 0.5)),
  "Cast": lambda i, a, o: _cast(i[0], _dt(a["to"])), "CastLike": lambda i, a, o: _cast(i[0], i[1].dtype),
  "ArgMax": _argm(True), "ArgMin": _argm(False),
  "Reshape": _reshape, "Flatten": _flatten, "Squeeze": _squeeze, "Unsqueeze": _unsqueeze, "Transpose": _transpose, "Expand": _expand,
  "Concat": _concat, "Split": lambda i, a, o: _split(i, a, o, a.get("_outputs")), "Slice": _slice, "Pad": _pad, "Tile": _tile,
  "ConstantOfShape": _const_of_shape, "Constant": _constant, "Range": _range, "Shape": _shape,
  "Size": lambda i, a, o: Tensor(np.array(i[0].numel(), np.int64)),
  "Gather": _gather, "GatherElements": _gather_elements, "GatherND": _gather_nd, "ScatterElements": _scatter_elements,
  "Scatter": _scatter_elements, "ScatterND": _scatter_nd, "OneHot": _onehot, "NonZero": _nonzero, "Compress": _compress,
  "Trilu": _trilu, "CumSum": _cumulative, "DepthToSpace": _d2s, "SpaceToDepth": _s2d, "TopK": _topk, "EyeLike": _eyelike,
  "ReverseSequence": _reverse_seq, "Einsum": lambda i, a, o: Tensor.einsum(a["equation"], *i),
  "Conv": _conv, "ConvTranspose": _conv_transpose, "MaxPool": _maxpool, "AveragePool": _avgpool, "LpPool": _lppool,
  "GlobalAveragePool": _global(lambda x, ax: x.mean(ax, True)), "GlobalMaxPool": _global(lambda x, ax: x.max(ax, True)),
  "GlobalLpPool": lambda i, a, o: i[0].abs().pow(a.get("p", 2)).sum(tuple(range(2, i[0].ndim)), True).pow(1 / a.get("p", 2)),
  "BatchNormalization": _batchnorm, "InstanceNormalization": _instancenorm, "LayerNormalization": _layernorm,
  "GroupNormalization": _groupnorm, "RMSNormalization": _rmsnorm, "LRN": _lrn, "MeanVarianceNormalization": _mvn,
  "Softmax": _softmax_like(lambda x, ax: x.softmax(ax)), "LogSoftmax": _softmax_like(lambda x, ax: x.log_softmax(ax)),
  "Hardmax": _softmax_like(_hardmax), "Gemm": _gemm, "Dropout": _dropout, "LpNormalization": _lpnorm,
  "NegativeLogLikelihoodLoss": _nllloss, "SoftmaxCrossEntropyLoss": _sce,
  "QuantizeLinear": _quant, "DequantizeLinear": _dequant, "DynamicQuantizeLinear": _dyn_quant, "MatMulInteger": _matmul_int,
  "ConvInteger": _conv_int, "QLinearMatMul": _qlinear_matmul, "QLinearConv": _qlinear_conv, "Resize": _resize, "Upsample": _resize,
  "RNN": _rnn("RNN"), "GRU": _rnn("GRU"), "LSTM": _rnn("LSTM"), "Attention": _attention, "LinearAttention": _linear_attention,
  "RotaryEmbedding": _rotary, "CausalConvWithState": _causal_conv, "DeformConv": _deform_conv, "RoiAlign": _roi_align,
  "GridSample": _grid_sample, "AffineGrid": _affine_grid, "Col2Im": _col2im, "MaxUnpool": _max_unpool, "CenterCropPad": _center_crop_pad,
  "TensorScatter": _tensor_scatter, "Det": _det, "DFT": _dft, "STFT": _stft, "MelWeightMatrix": _mel, "TfIdfVectorizer": _tfidf,
  "Unique": _unique, "NonMaxSuppression": _nms, "BitCast": _bitcast, "CumProd": lambda i, a, o: _cumulative(i, a, o, "prod"),
  "SwiGLU": lambda i, a, o: (i[0] * (i[0] * a.get("alpha", 1.0)).sigmoid() * i[1]).cast(i[0].dtype),
  "Swish": lambda i, a, o: i[0] * (i[0] * a.get("alpha", 1.0)).sigmoid(),
  "HannWindow": _window(lambda t: 0.5 - 0.5 * t.cos()), "HammingWindow": _window(lambda t: 25 / 46 - 21 / 46 * t.cos()),
  "BlackmanWindow": _window(lambda t: 0.42 - 0.5 * t.cos() + 0.08 * (2 * t).cos()),
  "If": _if, "Loop": _loop, "Scan": _scan,
  "SequenceConstruct": lambda i, a, o: list(i), "SequenceEmpty": lambda i, a, o: [],
  "SequenceAt": lambda i, a, o: i[0][_pos(int(_scalar(i[1])), len(i[0]))],
  "SequenceInsert": _seq_insert, "SequenceErase": _seq_erase, "SequenceMap": _seq_map, "SplitToSequence": _split_to_seq,
  "SequenceLength": lambda i, a, o: Tensor(np.array(len(i[0]), np.int64)), "ConcatFromSequence": _concat_from_seq,
  "Optional": lambda i, a, o: i[0] if i else None, "OptionalHasElement": lambda i, a, o: Tensor(np.array(bool(i) and i[0] is not None)),
  "OptionalGetElement": _opt_get,
  # other domains
  "ai.onnx.preview:FlexAttention": _flex_attention,
  **{f"ai.onnx.preview.training:{k}": _optimizer(k) for k in ("Adagrad", "Momentum", "Adam")},
  "ai.onnx.ml:TreeEnsemble": _tree_ensemble,
  "ai.onnx.ml:Binarizer": lambda i, a, o: i[0].gt(a.get("threshold", 0.0)).cast(i[0].dtype),
  "ai.onnx.ml:ArrayFeatureExtractor": lambda i, a, o: _gather([i[0], i[1].reshape(-1)], {"axis": -1}, o),
}

def _no(cond, msg): return msg if cond else None
def _acts(a, o): return _no(bad := [x for x in a.get("activations", []) if x not in _ACT], f"activations {bad}")
# ops whose axis, axes, batch_axis or time_axis (attribute, or the constant input AXES_INPUT names) name dims of input 0;
# AXIS_RANGE: the ones whose range is not [-r, r-1] for input 0's rank r (k: how many axes the node names)
AXIS_OPS = {"Softmax", "LogSoftmax", "Hardmax", "Concat", "Split", "Gather", "GatherElements", "ArgMax", "ArgMin", "LpNormalization",
            "LayerNormalization", "Compress", "TopK", "ScatterElements", "Scatter", "QuantizeLinear", "DequantizeLinear", "Unique",
            "SplitToSequence", "ReverseSequence", "CumSum", "CumProd", "Squeeze", "Unsqueeze", "MeanVarianceNormalization", "Slice",
            "Pad", "Flatten", "OneHot", "Resize", *_RED}
AXES_INPUT = {"CumSum": 1, "CumProd": 1, "Squeeze": 1, "Unsqueeze": 1, "Slice": 3, "Pad": 3, **{k: 1 for k in _RED}}
AXIS_RANGE = {"Flatten": lambda r, k: (-r, r), "OneHot": lambda r, k: (-r - 1, r), "Unsqueeze": lambda r, k: (-r - k, r + k - 1)}

def _only(attr: str, default, ok):
  """A REFUSE rule: the attribute's value (default where absent) outside ok is not run."""
  return lambda a, o: _no(a.get(attr, default) not in ok, f"{attr}={a.get(attr)}")
def _first(*rules): return lambda a, o: next((why for r in rules if (why := r(a, o))), None)
_reduction = _only("reduction", "none", ("none", *_SRED))

REFUSE = {
  "RNN": _acts, "GRU": _acts, "LSTM": _acts,
  "Gelu": _only("approximate", "none", ("none", "tanh")),
  "GridSample": _first(_only("mode", "linear", ("linear", "bilinear", "nearest", "cubic", "bicubic")),
                       _only("padding_mode", "zeros", ("zeros", "border", "reflection"))),
  "ScatterElements": _reduction, "ScatterND": _reduction,
  "TfIdfVectorizer": lambda a, o: _no("pool_strings" in a, "string n-grams"),
  "ai.onnx.ml:TreeEnsemble": _first(lambda a, o: _no(a.get("post_transform", 0), f"post_transform={a.get('post_transform')}"),
                                    _only("aggregate_function", 1, (0, 1, 2, 3))),
  "Resize": _first(lambda a, o: _no(a.get("antialias", 0) and a.get("mode", "nearest") == "nearest", "antialias=1 with nearest"),
                   _only("mode", "nearest", ("nearest", "linear", "cubic"))),
  "Upsample": _only("mode", "nearest", ("nearest", "linear")),
  "Pad": _only("mode", "constant", ("constant", "reflect", "edge", "wrap")),
  "Cast": lambda a, o: _unsupported_dtype(a.get("to")), "EyeLike": lambda a, o: _unsupported_dtype(a.get("dtype")),
  "Constant": lambda a, o: _no("value_string" in a or "value_strings" in a or "sparse_value" in a, "string or sparse constants"),
}
_TERM = r"\s*(?:[A-Za-z]\s*)*(?:\.\.\.\s*)?(?:[A-Za-z]\s*)*"   # einsum subscripts: letters, at most one ellipsis
# attribute values ONNX forbids, checked before onnx's shape inference (which loops forever on some of them)
INVALID = {"Einsum": lambda a, o: _no(not isinstance(eq := a.get("equation"), str) or not re.fullmatch(rf"{_TERM}(,{_TERM})*(->{_TERM})?", eq),
                                      f"equation {a.get('equation')!r} is not an einsum equation (letters, one '...', ',' and '->')")}
def _unsupported_dtype(t):
  if t is None: return None
  try: _dt(t)
  except NotImplementedError as e: return f"to={e}"
  return None
