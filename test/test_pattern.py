from morok_mlir.core.dtype import dtypes
"""The rewrite DSL: matching semantics, dispatch, graph_rewrite, and its speed."""
import time
from morok_mlir.core.uop import UOp, attrs
from morok_mlir.core.pattern import UPat, PatternMatcher, graph_rewrite
from morok_mlir.core.symbolic import SYMBOLIC
from morok_mlir.dialects.ops import Ops

def c(v, ty=dtypes.int32): return UOp(Ops.CONST, ty, (), attrs(value=v))
def var(n, ty=dtypes.int32): return UOp(Ops.DEFINE_VAR, ty, (), attrs(name=n, min=0, max=10))
x, y = var("x"), var("y")

def test_commutative_and_repeated_names():
  p = UPat(Ops.ADD, src=(UPat.var("a"), UPat.const(0)))
  assert p.match(UOp(Ops.ADD, dtypes.int32, (c(0), x)), {}) == [{"a": x}]     # either operand order
  same = UPat(Ops.SUB, src=(UPat.var("a"), UPat.var("a")))
  assert same.match(UOp(Ops.SUB, dtypes.int32, (x, x)), {}) == [{"a": x}]
  assert same.match(UOp(Ops.SUB, dtypes.int32, (x, y)), {}) == []             # a repeated name is the same value
  assert UPat(Ops.SUB, src=(UPat.var("a"), UPat.const(0))).match(UOp(Ops.SUB, dtypes.int32, (c(0), x)), {}) == []  # sub does not commute

def test_const_matchers_and_dtypes():
  assert UPat.const(0.0).match(c(-0.0, dtypes.float32), {}) == []             # -0.0 is not 0.0
  assert UPat.const(-0.0).match(c(-0.0, dtypes.float32), {}) != []
  assert UPat.const(float("nan")).match(c(float("nan"), dtypes.float32), {}) != []
  assert UPat.cvar("k").match(c(7), {})[0]["k"].attrs["value"] == 7
  assert UPat.cvar("k").match(x, {}) == []
  assert UPat.var("v", dtype={dtypes.float32}).match(x, {}) == []
  assert UPat.var("v", dtype={dtypes.int32}).match(x, {}) == [{"v": x}]

def test_family_dispatch_and_no_match_convention():
  seen = []
  pm = PatternMatcher([(UPat((Ops.ADD, Ops.MUL), src=(UPat.var("a"), UPat.var("b")), name="r"), lambda r, a, b: seen.append(r.op)),
                       (UPat(Ops.MUL, src=(UPat.var("a"), UPat.const(2))), lambda a: UOp(Ops.ADD, a.dtype, (a, a)))])
  assert set(pm.by_op) == {"add", "mul"}
  assert pm.rewrite(UOp(Ops.SUB, dtypes.int32, (x, y))) is None                # not dispatched at all
  assert pm.rewrite(UOp(Ops.ADD, dtypes.int32, (x, y))) is None and seen == ["add", "add"]  # None: no match (tried in both operand orders)
  assert pm.rewrite(UOp(Ops.MUL, dtypes.int32, (x, c(2)))) is UOp(Ops.ADD, dtypes.int32, (x, x))  # the next rule gets its turn

def test_graph_rewrite_fixpoint():
  e = UOp(Ops.ADD, dtypes.int32, (UOp(Ops.ADD, dtypes.int32, (UOp(Ops.MUL, dtypes.int32, (x, c(1))), c(2))), c(3)))
  assert graph_rewrite(e, SYMBOLIC) is UOp(Ops.ADD, dtypes.int32, (x, c(5)))
  deep = x
  for i in range(3000): deep = UOp(Ops.ADD, dtypes.int32, (deep, c(0)))     # deep graphs: no recursion limit
  assert graph_rewrite(deep, SYMBOLIC) is x

def test_speed_per_matched_op():
  exprs = [UOp(Ops.ADD, dtypes.index, (UOp(Ops.MUL, dtypes.index, (var(f"v{i}", dtypes.index), c(1, dtypes.index))), c(0, dtypes.index))) for i in range(2000)]
  t = time.perf_counter()
  for e in exprs: graph_rewrite(e, SYMBOLIC)
  us = (time.perf_counter() - t) / (2 * len(exprs)) * 1e6           # two matched ops per expression
  print(f"graph_rewrite: {us:.1f} us per matched op")
  assert us < 500
