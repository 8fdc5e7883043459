"""Constants a model computes from its initializers alone (a batchnorm's scale and shift, a quantized weight less its
zero point), evaluated in numpy where their graph is plain arithmetic and movement over host data: each runs once,
where compiling it costs a kernel's LLVM time per distinct size (densenet121's batchnorms: 31 kernels, 0.67 s of a
first call). Each op is one that numpy computes as the compiled kernel does (IEEE-rounded arithmetic, integer wraps,
comparisons, selects; float sums may differ in their last bits, as two summation orders do); anything else (another op,
dtype or device, a symbolic size, a value of more than FOLD_MAX elements) gives None and is compiled as before."""
from __future__ import annotations
import numpy as np
from morok_mlir.core.dtype import dtypes
from morok_mlir.core.uop import UOp
from morok_mlir.dialects.ops import Ops

DTYPES = frozenset((dtypes.float32, dtypes.float64, dtypes.bool, dtypes.int8, dtypes.int16, dtypes.int32, dtypes.int64,
                    dtypes.uint8, dtypes.uint16, dtypes.uint32, dtypes.uint64))
FLOATS = frozenset((dtypes.float32, dtypes.float64))
ANY = {Ops.ADD: np.add, Ops.SUB: np.subtract, Ops.MUL: np.multiply, Ops.NEG: np.negative,
       Ops.CMPLT: np.less, Ops.CMPNE: np.not_equal, Ops.CMPEQ: np.equal, Ops.WHERE: np.where}
FLOAT = {Ops.FDIV: np.divide, Ops.SQRT: np.sqrt, Ops.RECIP: np.reciprocal}   # float operands only (an int recip truncates)
INT = {Ops.MAX: np.maximum, Ops.MIN: np.minimum}   # int operands only (a float max's NaN differs between numpy and LLVM)
REDUCE = {Ops.ADD: np.add, Ops.MUL: np.multiply}   # (and INT's, over int operands)
MOVE = {Ops.RESHAPE: lambda x, a: x.reshape(a["shape"]), Ops.EXPAND: lambda x, a: np.broadcast_to(x, a["shape"]),
        Ops.PERMUTE: lambda x, a: x.transpose(a["order"]), Ops.FLIP: lambda x, a: np.flip(x, a["axes"]),
        Ops.PAD: lambda x, a: np.pad(x, list(zip(a["padding"][::2], a["padding"][1::2]))),
        Ops.SHRINK: lambda x, a: x[tuple(slice(b, e) for b, e in zip(a["bounds"][::2], a["bounds"][1::2]))],
        Ops.CONTIGUOUS: lambda x, a: x, Ops.DETACH: lambda x, a: x}
FOLD_MAX = 1 << 22   # elements of any value on the way (an expand of a scalar over a big shape is left to a kernel)

def _ints(a: dict) -> bool:
  return all(type(v) is int or type(v) is tuple and all(type(x) is int for x in v) for k, v in a.items() if k != "value")

def _one(u: UOp, src: list) -> np.ndarray | None:
  srcd = [s.dtype for s in u.src]
  if u.op is Ops.BUFFER:
    b = u.buffer
    return None if b is None or b.device != "CPU" else b.as_numpy().reshape(u.shape)
  if u.op is Ops.CONST: return np.full(u.shape, u.attrs["value"], u.dtype.np)
  if u.op in MOVE: return MOVE[u.op](src[0], u.attrs) if _ints(u.attrs) else None
  if u.op is Ops.CAST:   # (a float to an int: numpy and LLVM disagree out of range)
    return src[0].astype(u.dtype.np) if not (srcd[0] in FLOATS and u.dtype not in FLOATS | {dtypes.bool}) else None
  if u.op is Ops.REDUCE_AXIS:
    fn = REDUCE.get(u.attrs["op"]) or (INT.get(u.attrs["op"]) if srcd[0] not in FLOATS else None)
    return None if fn is None else fn.reduce(src[0], axis=tuple(u.attrs["axes"]), keepdims=True)
  if dtypes.bool in srcd and u.op in (Ops.ADD, Ops.SUB, Ops.MUL, Ops.NEG): return None   # (numpy's bool sums are ors)
  fn = ANY.get(u.op) or (FLOAT.get(u.op) if all(d in FLOATS for d in srcd) else INT.get(u.op) if not set(srcd) & FLOATS else None)
  return None if fn is None else fn(*src)

def evaluate(u: UOp) -> np.ndarray | None:
  """u's value (a new array of u's shape and dtype) where every node below it is one numpy computes as the kernels do;
  else None."""
  vals: dict[UOp, np.ndarray] = {}
  for x in u.toposort:
    if x.dtype not in DTYPES or not all(type(d) is int for d in (x.shape or ())): return None
    try:
      with np.errstate(all="ignore"): v = _one(x, [vals[s] for s in x.src])   # (a division by zero is inf, as a kernel's)
    except (ValueError, TypeError, IndexError): return None   # (an op's attributes numpy does not take: negative padding)
    if v is None or v.size > FOLD_MAX: return None
    vals[x] = np.asarray(v, x.dtype.np)
  out = vals[u]
  return np.array(out, copy=True) if out.shape == u.shape else None
