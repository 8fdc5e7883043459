"""Random index expressions over bounded ranges: after uop-simplify each is proven equal to the original by Z3
(ranges as bit-vectors constrained to [0, end)) and evaluated equal on samples."""
import random, z3
from hypothesis import given, settings, HealthCheck, strategies as st
from morok_mlir.core.uop import UOp, attrs
from morok_mlir.passes.simplify import simplify
from morok_mlir.core.symbolic import exec_alu
from morok_mlir.core.prove import ZSem
from morok_mlir.core.dtype import dtypes
from morok_mlir.dialects.ops import Ops

def c(v): return UOp(Ops.CONST, dtypes.index, (), attrs(value=v))
RANGES = [UOp(Ops.RANGE, dtypes.index, (c(n),), attrs(axis=i, kind="loop")) for i, n in enumerate((3, 4, 6, 8))]

@st.composite
def expr(draw, depth=4):
  if depth == 0 or draw(st.integers(0, 3)) == 0:
    return draw(st.sampled_from(RANGES)) if draw(st.booleans()) else c(draw(st.integers(-8, 24)))
  op = draw(st.sampled_from((Ops.ADD, Ops.MUL, Ops.SUB, Ops.IDIV, Ops.MOD, Ops.MAX, Ops.MIN)))
  a = draw(expr(depth - 1))
  b = c(draw(st.integers(1, 12))) if op in (Ops.IDIV, Ops.MOD) else draw(expr(depth - 1))  # divide by positive constants
  return UOp(op, dtypes.index, (a, b))

def evaluate(u, env):
  if u.op is Ops.CONST: return u.attrs["value"]
  if u.op is Ops.RANGE: return env[u]
  return exec_alu(u.op, dtypes.index, [evaluate(s, env) for s in u.src])

@settings(max_examples=500, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(expr())
def test_simplify_preserves_value(e):
  (s,) = simplify([e])
  ctx = ZSem()
  (a, _), (b, _) = ctx.enc(e), ctx.enc(s)
  solver = z3.Solver(); solver.set("timeout", 20000)
  solver.add(*ctx.facts, a != b)
  assert solver.check() == z3.unsat, f"{e} -> {s}"
  rng = random.Random(0)
  for _ in range(8):
    env = {r: rng.randrange(r.src[0].attrs["value"]) for r in RANGES}
    assert evaluate(e, env) == evaluate(s, env)

def test_simplify_reduces_reshape_index():
  r0, r1 = RANGES[0], RANGES[1]
  lin = UOp(Ops.ADD, dtypes.index, (UOp(Ops.MUL, dtypes.index, (r0, c(4))), r1))
  back = UOp(Ops.ADD, dtypes.index, (UOp(Ops.MUL, dtypes.index, (UOp(Ops.IDIV, dtypes.index, (lin, c(6))), c(6))), UOp(Ops.MOD, dtypes.index, (lin, c(6)))))
  assert simplify([back]) == [lin]
  assert simplify([UOp(Ops.IDIV, dtypes.index, (lin, c(4)))]) == [r0] and simplify([UOp(Ops.MOD, dtypes.index, (lin, c(4)))]) == [r1]
