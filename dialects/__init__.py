"""The `uop` MLIR dialect. ops.py is the op table: plain data the UOp core reads (importing this package loads only
it); the MLIR parts made from it (IRDL definition and contexts in uop.py, builders, verifier, docs) load on first use."""
from morok_mlir.dialects.ops import OPS, OpDef, Ops, GRAPH_ALU, BINARY, UNARY, COMPARE, MOVEMENT

def __getattr__(name: str):
  if name in ("IRDL_SOURCE", "load_uop_dialect", "new_context"):
    from morok_mlir.dialects import uop
    return getattr(uop, name)
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
