"""A full reduction split across threads: a kernel uop-optimize marked `uop.split_reduce = T` as T partial reduces and
one over the partials (SplitReduce)."""
from __future__ import annotations
from morok_mlir.ir.bridge import Func, arg_buffer
from morok_mlir.core.dtype import dtypes
from morok_mlir.core.uop import UOp, attrs
from morok_mlir.dialects.ops import Ops
from morok_mlir.core import index_math as im
from morok_mlir.codegen.lower_cpu import _int_attr, lower_kernel, parallel_info

class SplitReduce:
  """A kernel uop-optimize marked `uop.split_reduce = T` (one output, one f32 reduce over range r of size N) as two
  phases: partial[t] = reduce over r in [t*N/T, (t+1)*N/T) (threaded over t), then the kernel's store with the reduce
  replaced by the reduce over the T partials."""
  def __init__(self, f: Func, name: str):
    self.name, T = name, _int_attr(f, "uop.split_reduce")
    red = next(u for u in f.roots[0].toposort if u.op is Ops.REDUCE)
    r, n = red.src[1], int(red.src[1].src[0].attrs["value"])
    self.scratch, args = [T], list(f.args) + [arg_buffer(len(f.args), dtypes.float32.ptr(T))]
    part = args[-1]
    t, r2 = (UOp(Ops.RANGE, dtypes.index, (im.const(sz),), attrs(axis=1000 + i, kind=k)) for i, (sz, k) in enumerate(((T, "loop"), (n // T, "reduce"))))
    chunk = UOp(Ops.REDUCE, red.dtype, (red.src[0].substitute({r: im.add(im.mul(t, im.const(n // T)), r2)}), r2), red.arg)
    st = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, dtypes.float32.ptr(), (part, t)), chunk))
    opt = {k: v for k, v in f.attrs.items() if k in ("uop.threads", "uop.fastmath", "uop.reduce_block")}
    self.partial = Func(f"{name}_part", args, [], [UOp(Ops.SINK, dtypes.void, (UOp(Ops.END, dtypes.void, (st, t)),))], {"uop.kernel": None, **opt})
    t2 = UOp(Ops.RANGE, dtypes.index, (im.const(T),), attrs(axis=1002, kind="reduce"))
    total = UOp(Ops.REDUCE, red.dtype, (UOp(Ops.LOAD, dtypes.float32, (UOp(Ops.INDEX, dtypes.float32.ptr(), (part, t2)),)), t2), red.arg)
    self.final = Func(f"{name}_final", args, [], [f.roots[0].substitute({red: total})], {"uop.kernel": None})
  def text(self) -> str: return lower_kernel(self.partial, f"{self.name}_part") + lower_kernel(self.final, f"{self.name}_final")
  def phases(self): return [(f"{self.name}_part", parallel_info(self.partial)), (f"{self.name}_final", None)]
