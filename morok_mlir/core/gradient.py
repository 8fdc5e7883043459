"""Reverse-mode autodiff as graph rewriting (tinygrad's gradient.py): one rule per op maps the gradient of a node's
result (`ctx`) to the gradients of its sources, as lazy UOps built with OpMixin's methods. compute_gradient walks the
graph once in reverse topological order, so a whole backward is one graph the compiler fuses, and gradients of
gradients work (the rules only use ops that have rules). A rule gives None for a source that takes no gradient."""
from __future__ import annotations
import math
from morok_mlir.core.dtype import dtypes
from morok_mlir.core.pattern import UPat, PatternMatcher
from morok_mlir.core.uop import UOp, sym_attr, _pairs, sadd, ssub
from morok_mlir.dialects.ops import Ops

def _argsort(x) -> tuple[int, ...]: return tuple(sorted(range(len(x)), key=x.__getitem__))

def _reduce_grad(ctx: UOp, ret: UOp) -> tuple:
  x, axes = ret.src[0], ret.attrs["axes"]
  bc = lambda v: v.expand(x.shape)   # a reduced value (its axes kept with size 1) back over the input's shape
  match ret.attrs["op"]:
    case Ops.ADD: return (bc(ctx),)
    case Ops.MAX | Ops.MIN:   # the extreme positions share the gradient equally (tinygrad's)
      mask = x.eq(bc(ret)).cast(ctx.dtype)
      return (mask / bc(mask.sum(axes, keepdim=True).cast(ctx.dtype)) * bc(ctx),)
    case Ops.MUL:   # the product of the others: ret / x, except where x is one of the zeros
      zero = x.eq(0)
      nz, rest = bc(zero.cast(dtypes.int32).sum(axes, keepdim=True)), bc(zero.where(1, x)._reduce(Ops.MUL, axes, keepdim=True))
      return (bc(ctx) * nz.eq(0).where(bc(ret) / zero.where(1, x), (nz.eq(1) & zero).where(rest, 0)),)

def _gather_grad(ctx: UOp, ret: UOp) -> tuple:
  """The gradient of a gather is a scatter-add of ctx into zeros: O(source + index); indices outside the axis add nothing."""
  x, idx, d = ret.src[0], ret.src[1], ret.attrs["axis"]
  return x._full(x.shape, 0, ctx.dtype)._scatter(d, idx, ctx, "add"), None

def _scatter_grad(ctx: UOp, ret: UOp) -> tuple | None:
  """store: the overwritten elements of a take no gradient, each src element its target's (PyTorch's, duplicates
  included); add: both take ctx; mul: see _scatter_prod_grad; max/min: the elements equal to the result share its gradient equally (PyTorch's amax)."""
  a, idx, src, d, op = *ret.src, ret.attrs["axis"], ret.attrs["op"]
  if op == "store": return a._full(a.shape, False, dtypes.bool)._scatter(d, idx, True, "store").where(0, ctx), None, ctx.gather(d, idx)
  if op == "add": return ctx, None, ctx.gather(d, idx)
  if op == "mul": return _scatter_prod_grad(ctx, ret)
  if op not in ("max", "min"): return None
  ma, ms = a.eq(ret).cast(ctx.dtype), src.eq(ret.gather(d, idx)).cast(ctx.dtype)
  share = ctx / ma._scatter(d, idx, ms, "add")
  return ma * share, None, ms * share.gather(d, idx)

def _scatter_prod_grad(ctx: UOp, ret: UOp) -> tuple:
  """Each factor's gradient is ctx times the product of the others, never a division by a zero factor (PyTorch's):
  a's from a product taken with a's zeros as 1; a src element that is its target's only zero src takes the product
  with it as 1, any other the result over itself (0 when its target holds another zero)."""
  a, idx, src, d = *ret.src, ret.attrs["axis"]
  one_a, zero = a.eq(0).where(1, a), src.eq(0)
  alone = zero & a._full(a.shape, 0, dtypes.int32)._scatter(d, idx, zero.cast(dtypes.int32), "add").gather(d, idx).eq(1)
  return (ctx * one_a._scatter(d, idx, src, "mul") / one_a, None,
          alone.where((ctx * a._scatter(d, idx, alone.where(1, src), "mul")).gather(d, idx), (ctx * ret).gather(d, idx) / zero.where(1, src)))

def _max_grad(ctx: UOp, a: UOp, b: UOp, ab: UOp, ba: UOp) -> tuple:
  """max/min: the gradient goes to the operand that wins, half to each on a tie (tinygrad's); ab: a wins, ba: b wins."""
  tie = a.eq(b).where(ctx * 0.5, 0)
  return ab.where(ctx, tie), ba.where(ctx, tie)

def _nz(ctx: UOp, g: UOp) -> UOp:
  """g where ctx is nonzero, else 0: a zero upstream gradient stays zero through a local derivative that is infinite
  (exp2 of a large x, 1/x, log2 and sqrt at 0; not a division by 0, whose NaN PyTorch keeps, as in var with no degrees
  of freedom), so that a branch a where did not pick or a saturated sigmoid passes
  0, not 0 * inf = NaN (PyTorch's fused backwards of sigmoid, softplus, tanh give 0 there)."""
  return ctx.eq(0).where(0, g)

def _float_cast(ret: UOp) -> bool: return ret.dtype.is_float and ret.src[0].dtype.is_float

def _multi_grad(ctx: UOp, ret: UOp) -> tuple:
  """A split value's sources take their slices of the gradient; a replicated one's first source takes it whole (the value
  is any one copy: giving every copy the gradient would count it once per device)."""
  if (ax := ret.attrs["axis"]) < 0: return (ctx,) + (None,) * (len(ret.src) - 1)
  ends = [0]
  for s in ret.src: ends.append(ends[-1] + s.shape[ax])
  return tuple(ctx.shrink(tuple((lo, hi) if i == ax else (0, d) for i, d in enumerate(ctx.shape))) for lo, hi in zip(ends, ends[1:]))

pm_gradient = PatternMatcher([
  (UPat(Ops.ADD), lambda ctx: (ctx, ctx)),
  (UPat(Ops.SUB), lambda ctx: (ctx, -ctx)),
  (UPat(Ops.MUL, name="ret"), lambda ctx, ret: (ret.src[1] * ctx, ret.src[0] * ctx)),
  (UPat(Ops.FDIV, name="ret"), lambda ctx, ret: (ctx / ret.src[1], -ctx * ret / ret.src[1])),
  (UPat(Ops.MOD, name="ret"), lambda ctx, ret: (ctx, -ctx * (ret.src[0] / ret.src[1]).trunc()) if ret.dtype.is_float else (None, None)),
  (UPat(Ops.MULACC, name="ret"), lambda ctx, ret: (ret.src[1] * ctx, ret.src[0] * ctx, ctx)),
  (UPat(Ops.NEG), lambda ctx: (-ctx,)),
  (UPat(Ops.RECIP, name="ret"), lambda ctx, ret: (_nz(ctx, -ctx * ret * ret),)),
  (UPat(Ops.SIN, name="ret"), lambda ctx, ret: ((math.pi / 2 - ret.src[0]).sin() * ctx,)),
  (UPat(Ops.LOG2, name="ret"), lambda ctx, ret: (_nz(ctx, ctx / (ret.src[0] * math.log(2))),)),
  (UPat(Ops.EXP2, name="ret"), lambda ctx, ret: (_nz(ctx, ret * ctx * math.log(2)),)),
  (UPat(Ops.SQRT, name="ret"), lambda ctx, ret: (_nz(ctx, ctx / (ret * 2)),)),
  # x ** y: y * x ** (y - 1) (0 for y = 0, as PyTorch) and x ** y * log x (tinygrad's limits at x = 0)
  (UPat(Ops.POW, name="ret"), lambda ctx, ret: (ctx * (y := ret.src[1]).eq(0).where(0, y * (x := ret.src[0]).pow(y - 1)),
    x.eq(0).where(y.lt(0).where(-math.inf, 0.0), ctx * ret * x.log2() * math.log(2))) if ret.dtype.is_float else (None, None)),
  (UPat(Ops.MAX, name="ret"), lambda ctx, ret: _max_grad(ctx, *(s := ret.src), s[0].gt(s[1]), s[1].gt(s[0]))),
  (UPat(Ops.MIN, name="ret"), lambda ctx, ret: _max_grad(ctx, *(s := ret.src), s[0].lt(s[1]), s[1].lt(s[0]))),
  (UPat(Ops.WHERE, name="ret"), lambda ctx, ret: (None, ret.src[0].where(ctx, 0), ret.src[0].where(0, ctx))),
  (UPat(Ops.CAST, name="ret"), lambda ctx, ret: (ctx.cast(ret.src[0].dtype),) if _float_cast(ret) else (None,)),
  # no gradient: integer and bitwise ops, comparisons, rounding (zero almost everywhere), bit reinterpretation, random bits
  (UPat((Ops.IDIV, Ops.AND, Ops.OR, Ops.XOR, Ops.SHL, Ops.SHR, Ops.CMPLT, Ops.CMPNE, Ops.CMPEQ, Ops.THREEFRY)), lambda ctx: (None, None)),
  (UPat((Ops.TRUNC, Ops.BITCAST)), lambda ctx: (None,)),
  (UPat(Ops.REDUCE_AXIS, name="ret"), _reduce_grad),
  (UPat(Ops.GATHER, name="ret"), _gather_grad),
  (UPat(Ops.SCATTER, name="ret"), _scatter_grad),
  (UPat(Ops.RESHAPE, name="ret"), lambda ctx, ret: (ctx.reshape(ret.src[0].shape),)),
  (UPat(Ops.EXPAND, name="ret"), lambda ctx, ret: (ctx.sum(tuple(i for i, (si, so) in enumerate(zip(ret.src[0].shape, ret.shape))
                                                                 if si != so), keepdim=True).cast(ctx.dtype),)),
  (UPat(Ops.PERMUTE, name="ret"), lambda ctx, ret: (ctx.permute(_argsort(ret.attrs["order"])),)),
  (UPat(Ops.FLIP, name="ret"), lambda ctx, ret: (ctx.flip(ret.attrs["axes"]),)),
  (UPat(Ops.PAD, name="ret"), lambda ctx, ret: (ctx.shrink(tuple((b, sadd(b, s)) for s, (b, _) in
                                                                 zip(ret.src[0].shape, _pairs(sym_attr(ret, "padding"))))),)),
  (UPat(Ops.SHRINK, name="ret"), lambda ctx, ret: (ctx._op(Ops.PAD, ret.src[0].shape, padding=tuple(
    v for s, (b, e) in zip(ret.src[0].shape, _pairs(sym_attr(ret, "bounds"))) for v in (b, ssub(s, e)))),)),
  (UPat((Ops.CONTIGUOUS, Ops.COPY)), lambda ctx: (ctx,)),
  (UPat(Ops.MULTI, name="ret"), _multi_grad),
  (UPat(Ops.ALLREDUCE, name="ret"), lambda ctx, ret: tuple(ctx if ret.attrs["op"] == Ops.ADD else s.eq(ret).cast(ctx.dtype) * ctx for s in ret.src)),
  (UPat(Ops.ASSIGN), lambda ctx: (None, ctx)),   # the result is the value written
])

def _rule(u: UOp, ctx: UOp) -> tuple | None:
  for p, fn in pm_gradient.by_op.get(u.op, pm_gradient.wild):
    for store in p.match(u, {}): return fn(ctx=ctx, **store)
  return None

def compute_gradient(root: UOp, root_grad: UOp, targets) -> dict[UOp, UOp]:
  """Gradients of root (seeded with root_grad, root's shape) with respect to every node on a path from root to one of
  targets, targets included when reached; a detach stops the flow. Iterative: graphs can be deep."""
  targets, order = set(targets), root.walk()
  on_path: dict[UOp, bool] = {}
  for u in order: on_path[u] = u in targets or u.op is not Ops.DETACH and any(on_path[s] for s in u.src)
  grads: dict[UOp, UOp] = {root: root_grad}
  for u in reversed(order):
    if (g := grads.get(u)) is None or u in targets and not any(on_path[s] for s in u.src): continue
    if (lgrads := _rule(u, g)) is None: raise RuntimeError(f"{u.loc or '<unknown>:0:0'}: no gradient for {u.op} ({u.dtype})")
    for s, v in zip(u.src, lgrads):
      if v is None or not on_path[s]: continue
      grads[s] = v if (old := grads.get(s)) is None else old + v
  return grads
