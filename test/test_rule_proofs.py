from morok_mlir.core.dtype import dtypes
"""Every rule of uop-simplify is proven by Z3 for every op and dtype its pattern matches; wrong rules are refused."""
import pytest
from morok_mlir.core.uop import UOp, attrs
from morok_mlir.core.pattern import UPat
from morok_mlir.core.symbolic import RULES, Rule, FLOATS, INTS, alu, const_like, in_range
from morok_mlir.passes.simplify import simplify
import morok_mlir.core.symbolic as sym
from morok_mlir.core.prove import prove_rule, IDTS
from morok_mlir.dialects.ops import Ops

def test_rule_count(): assert len(RULES) >= 60 and len({r.name for r in RULES}) == len(RULES)

@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_rule_proven(rule):
  verdict, why, n, dts = prove_rule(rule)
  assert verdict == "proven", why
  assert n > 0 and not rule.proof_dts  # every dtype, not a sample
  if rule.proof == "int": assert dts == list(IDTS)  # the division rules: every integer width

P, V, C = lambda op, *s: UPat(op, src=s), UPat.var, UPat.cvar
S = lambda: sym.SEM
x, y, c, c1, c2 = V("x", INTS), V("y", INTS), C("c", INTS), C("c1", INTS), C("c2", INTS)
WRONG = [
  Rule("add-zero-float", P(Ops.ADD, V("x", FLOATS), UPat.const(0.0)), lambda r, x: x),           # -0.0 + 0.0 = +0.0
  Rule("mul-zero-float", P(Ops.MUL, V("x", FLOATS), UPat.const(0.0)), lambda r, x: r.src[1]),        # NaN*0, inf*0
  Rule("mul-idiv-unguarded", P(Ops.IDIV, P(Ops.MUL, x, c), V("c")), lambda r, x, c: x,
       lambda r, x, c: S().val(c) != 0, proof_dts=("i8",)),                                       # x*c may wrap
  Rule("idiv2-is-shr", P(Ops.IDIV, x, c), lambda r, x, c: alu(Ops.SHR, x, const_like(c, 1)),
       lambda r, x, c: S().val(c) == 2, proof_dts=("i8",)),                                       # -1 // 2 == 0, -1 >> 1 == -1
  # the integer method (counterexamples are checked at the width before they are reported)
  Rule("mul-idiv-unguarded-i32", P(Ops.IDIV, P(Ops.MUL, x, c), V("c")), lambda r, x, c: x,
       lambda r, x, c: S().val(c) != 0, proof="int", proof_dts=("i32",)),                         # x*c may wrap
  Rule("mod-mod-not-divides", P(Ops.MOD, P(Ops.MOD, x, c1), c2), lambda r, x, c1, c2: alu(Ops.MOD, x, c2),
       lambda r, x, c1, c2: S().all(S().val(c1) > 0, S().val(c2) > 0), proof="int", proof_dts=("i64",)),  # (5%3)%2
  Rule("muladd-idiv-negative", P(Ops.IDIV, P(Ops.ADD, P(Ops.MUL, x, c), y), V("c")), lambda r, x, c, y: alu(Ops.ADD, x, alu(Ops.IDIV, y, c)),
       lambda r, x, c, y: S().all(S().val(c) > 0, in_range(x, S().vmin(x) * S().val(c) + S().vmin(y), S().vmax(x) * S().val(c) + S().vmax(y))),
       proof="int", proof_dts=("index",)),                                                        # (2*1 - 1)/2 = 0, 1 + -1/2 = 1
  Rule("idiv-idiv-wraps", P(Ops.IDIV, P(Ops.IDIV, x, c1), c2), lambda r, x, c1, c2: alu(Ops.IDIV, x, alu(Ops.MUL, c1, c2)),
       lambda r, x, c1, c2: S().all(S().val(c1) > 0, S().val(c2) > 0), proof="int", proof_dts=("ui32", "i64")),  # c1*c2 wraps
  Rule("divmod-sub", P(Ops.SUB, P(Ops.MUL, P(Ops.IDIV, x, c), V("c")), P(Ops.MOD, V("x"), V("c"))), lambda r, x, c: x,
       lambda r, x, c: S().val(c) != 0, proof="int", proof_dts=("i16",)),
]

@pytest.mark.parametrize("rule", WRONG, ids=lambda r: r.name)
def test_wrong_rule_rejected(rule):
  verdict, why, _, _ = prove_rule(rule)
  assert verdict == "failed" and "counterexample" in why, (verdict, why)

def test_int_method_claims_nothing_vacuous_or_outside_it():
  never = Rule("idiv-never", P(Ops.IDIV, x, c), lambda r, x, c: x, lambda r, x, c: S().all(S().val(c) > 0, S().val(c) < 0), proof="int")
  assert prove_rule(never)[0] == "failed"  # a guard that never holds proves nothing
  shr = Rule("shr-int", P(Ops.SHR, x, c), lambda r, x, c: x, lambda r, x, c: S().val(c) == 0, proof="int", proof_dts=("i32",))
  verdict, why, _, _ = prove_rule(shr)
  assert verdict == "unknown" and "outside the integer method" in why

def test_guards_total_on_zero_divisors():  # guards evaluate every condition: divides(0, c) must not raise
  k = lambda v: UOp(Ops.CONST, dtypes.index, (), attrs(value=v))
  r = UOp(Ops.RANGE, dtypes.index, (k(10),), attrs(axis=0, kind="loop"))
  for e in (UOp(Ops.MOD, dtypes.index, (UOp(Ops.MOD, dtypes.index, (r, k(6))), k(0))), UOp(Ops.IDIV, dtypes.index, (UOp(Ops.MUL, dtypes.index, (r, k(6))), k(0)))):
    assert simplify([e]) == [e]

def test_verify_rules_cli(capsys, monkeypatch):
  import morok_mlir.core.prove as prove
  div = [r for r in RULES if r.proof == "int"]
  assert len(div) == 8
  monkeypatch.setattr(prove, "RULES", RULES[:3] + div + WRONG[:1])
  assert prove.main() == 1
  out = capsys.readouterr().out
  assert "fold-unary" in out and "add-zero-float" in out and "failed" in out and "11/12 rules proven" in out
  for r in div:
    line = next(l for l in out.splitlines() if l.startswith(r.name + " "))
    assert " proven " in line and line.endswith(f"(int + no-overflow) at {' '.join(IDTS)}"), line
  assert "only" not in out

def test_zsem_encodes_loaded_data_as_free_values():
  """An index that holds data (a load, a reduce over loads: a gather's index) is encoded as a free value, one per node,
  instead of failing: the same load is the same value, loads at different addresses may differ."""
  import z3
  from morok_mlir.core.uop import UOp, attrs
  from morok_mlir.core.dtype import dtypes
  from morok_mlir.dialects.ops import Ops
  from morok_mlir.core import index_math as im
  from morok_mlir.core.prove import ZSem
  r, r2 = (UOp(Ops.RANGE, dtypes.index, (im.const(8),), attrs(axis=k, kind="loop")) for k in (0, 1))
  buf = UOp(Ops.BUFFER, dtypes.int64, (), attrs(shape=(8,), slot=0))
  ld = lambda i: UOp(Ops.CAST, dtypes.index, (UOp(Ops.LOAD, dtypes.int64, (UOp(Ops.INDEX, dtypes.int64.ptr(), (buf, i)),)),))
  ctx = ZSem()
  s = z3.Solver(); s.add(*ctx.facts, ctx.enc(im.add(ld(r2), r))[0] != ctx.enc(im.add(ld(r2), r))[0])
  assert s.check() == z3.unsat
  s = z3.Solver(); s.add(*ctx.facts, ctx.enc(ld(r))[0] != ctx.enc(ld(r2))[0])
  assert s.check() == z3.sat
