"""The rewrite DSL: matching semantics, dispatch, graph_rewrite, and its speed."""
import time
from morok_mlir.uop import UOp, attrs
from morok_mlir.passes.pattern import UPat, PatternMatcher, graph_rewrite
from morok_mlir.passes.symbolic import SYMBOLIC

def c(v, ty="i32"): return UOp("const", ty, (), attrs(value=v))
def var(n, ty="i32"): return UOp("define_var", ty, (), attrs(name=n, min=0, max=10))
x, y = var("x"), var("y")

def test_commutative_and_repeated_names():
  p = UPat("add", src=(UPat.var("a"), UPat.const(0)))
  assert p.match(UOp("add", "i32", (c(0), x)), {}) == [{"a": x}]     # either operand order
  same = UPat("sub", src=(UPat.var("a"), UPat.var("a")))
  assert same.match(UOp("sub", "i32", (x, x)), {}) == [{"a": x}]
  assert same.match(UOp("sub", "i32", (x, y)), {}) == []             # a repeated name is the same value
  assert UPat("sub", src=(UPat.var("a"), UPat.const(0))).match(UOp("sub", "i32", (c(0), x)), {}) == []  # sub does not commute

def test_const_matchers_and_dtypes():
  assert UPat.const(0.0).match(c(-0.0, "f32"), {}) == []             # -0.0 is not 0.0
  assert UPat.const(-0.0).match(c(-0.0, "f32"), {}) != []
  assert UPat.const(float("nan")).match(c(float("nan"), "f32"), {}) != []
  assert UPat.cvar("k").match(c(7), {})[0]["k"].attrs["value"] == 7
  assert UPat.cvar("k").match(x, {}) == []
  assert UPat.var("v", dtype={"f32"}).match(x, {}) == []
  assert UPat.var("v", dtype={"i32"}).match(x, {}) == [{"v": x}]

def test_family_dispatch_and_no_match_convention():
  seen = []
  pm = PatternMatcher([(UPat(("add", "mul"), src=(UPat.var("a"), UPat.var("b")), name="r"), lambda r, a, b: seen.append(r.op)),
                       (UPat("mul", src=(UPat.var("a"), UPat.const(2))), lambda a: UOp("add", a.ty, (a, a)))])
  assert set(pm.by_op) == {"add", "mul"}
  assert pm.rewrite(UOp("sub", "i32", (x, y))) is None                # not dispatched at all
  assert pm.rewrite(UOp("add", "i32", (x, y))) is None and seen == ["add", "add"]  # None: no match (tried in both operand orders)
  assert pm.rewrite(UOp("mul", "i32", (x, c(2)))) is UOp("add", "i32", (x, x))  # the next rule gets its turn

def test_graph_rewrite_fixpoint():
  e = UOp("add", "i32", (UOp("add", "i32", (UOp("mul", "i32", (x, c(1))), c(2))), c(3)))
  assert graph_rewrite(e, SYMBOLIC) is UOp("add", "i32", (x, c(5)))
  deep = x
  for i in range(3000): deep = UOp("add", "i32", (deep, c(0)))     # deep graphs: no recursion limit
  assert graph_rewrite(deep, SYMBOLIC) is x

def test_speed_per_matched_op():
  exprs = [UOp("add", "index", (UOp("mul", "index", (var(f"v{i}", "index"), c(1, "index"))), c(0, "index"))) for i in range(2000)]
  t = time.perf_counter()
  for e in exprs: graph_rewrite(e, SYMBOLIC)
  us = (time.perf_counter() - t) / (2 * len(exprs)) * 1e6           # two matched ops per expression
  print(f"graph_rewrite: {us:.1f} us per matched op")
  assert us < 500
