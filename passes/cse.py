"""uop-cse: merge uop ops with the same name, operands, attributes and result types (IRDL ops have no traits for
upstream CSE). Dominance is trivial: ops are compared within one block, earlier op wins."""
from morok_mlir.ir.registry import register
from morok_mlir.passes.dce import SIDE_EFFECTS

@register("uop-cse", "Merge identical side-effect-free uop ops", on_uops=False)
def uop_cse(module_op):
  for fn in module_op.regions[0].blocks[0].operations:
    for region in fn.regions:
      for block in region.blocks:
        seen = {}
        for op in list(block.operations):
          o = op.operation
          if not o.name.startswith("uop.") or o.name in SIDE_EFFECTS: continue
          key = (o.name, tuple(o.operands), tuple(sorted((k, str(v)) for k, v in o.attributes.items())), tuple(str(r.type) for r in o.results))
          if (prev := seen.get(key)) is None: seen[key] = o; continue
          for r, pr in zip(o.results, prev.results): r.replace_all_uses_with(pr)
          o.erase()
