"""uop-dce: erase side-effect-free uop ops whose results are unused (IRDL ops have no traits for upstream DCE)."""
from morok_mlir.dialects.ops import SIDE_EFFECTS as _EFFECTS
from morok_mlir.ir.registry import register

SIDE_EFFECTS = frozenset("uop." + n for n in _EFFECTS)   # MLIR op names

def dead(op) -> bool:
  return op.name.startswith("uop.") and op.name not in SIDE_EFFECTS and all(not list(r.uses) for r in op.results)

@register("uop-dce", "Erase unused side-effect-free uop ops", on_uops=False)
def uop_dce(module_op):
  changed = True
  while changed:
    changed = False
    for fn in module_op.regions[0].blocks[0].operations:
      for region in fn.regions:
        for block in region.blocks:
          for op in reversed(list(block.operations)):
            if dead(op.operation): op.operation.erase(); changed = True
