"""Every rule of uop-simplify is proven by Z3 for every op and dtype its pattern matches; wrong rules are refused."""
import pytest
from morok_mlir.passes.pattern import UPat
from morok_mlir.passes.symbolic import RULES, Rule, FLOATS, INTS, alu, const_like
import morok_mlir.passes.symbolic as sym
from morok_mlir.passes.prove import prove_rule, main

def test_rule_count(): assert len(RULES) >= 60 and len({r.name for r in RULES}) == len(RULES)

@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_rule_proven(rule):
  verdict, why, n = prove_rule(rule)
  assert verdict == "proven", why
  assert n > 0

P, V, C = lambda op, *s: UPat(op, src=s), UPat.var, UPat.cvar
WRONG = [
  Rule("add-zero-float", P("add", V("x", FLOATS), UPat.const(0.0)), lambda r, x: x),           # -0.0 + 0.0 = +0.0
  Rule("mul-zero-float", P("mul", V("x", FLOATS), UPat.const(0.0)), lambda r, x: r.src[1]),        # NaN*0, inf*0
  Rule("mul-idiv-unguarded", P("idiv", P("mul", V("x", INTS), C("c", INTS)), V("c")), lambda r, x, c: x,
       lambda r, x, c: sym.SEM.val(c) != 0, proof_dts=("i8",)),                                   # x*c may wrap
  Rule("idiv2-is-shr", P("idiv", V("x", INTS), C("c", INTS)), lambda r, x, c: alu("shr", x, const_like(c, 1)),
       lambda r, x, c: sym.SEM.val(c) == 2, proof_dts=("i8",)),                                   # -1 // 2 == 0, -1 >> 1 == -1
]

@pytest.mark.parametrize("rule", WRONG, ids=lambda r: r.name)
def test_wrong_rule_rejected(rule):
  verdict, why, _ = prove_rule(rule)
  assert verdict == "failed" and "counterexample" in why, (verdict, why)

def test_verify_rules_cli(capsys, monkeypatch):
  import morok_mlir.passes.prove as prove
  monkeypatch.setattr(prove, "RULES", RULES[:3] + WRONG[:1])
  assert prove.main() == 1
  out = capsys.readouterr().out
  assert "fold-unary" in out and "add-zero-float" in out and "failed" in out and "3/4 rules proven" in out
