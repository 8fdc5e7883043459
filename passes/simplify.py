"""uop-simplify: the Z3-proven rules of `symbolic.py` (constant folding, identities, index algebra over ranges),
applied bottom-up to a fixpoint over every func of a module, graph level and kernel level alike."""
from __future__ import annotations
from morok_mlir.ir.bridge import Func
from morok_mlir.core.uop import UOp
from morok_mlir.core.pattern import PatternMatcher, graph_rewrite
from morok_mlir.ir.registry import register
from morok_mlir.core.symbolic import SYMBOLIC

def simplify(roots: list[UOp], pm: PatternMatcher = SYMBOLIC) -> list[UOp]:
  memo: dict[UOp, UOp] = {}  # shared: a node reachable from several roots is rewritten once
  return [graph_rewrite(r, pm, memo) for r in roots]

@register("uop-simplify", "Constant folding, algebraic identities and index algebra (Z3-proven rewrite rules)")
def uop_simplify(funcs: list[Func]) -> list[Func]:
  for f in funcs:
    new = simplify(f.results + f.roots)
    f.results, f.roots = new[:len(f.results)], new[len(f.results):]
  return funcs
