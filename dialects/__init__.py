"""The `uop` MLIR dialect: its op table, IRDL definition, Python builders and extra verifier."""
from .ops import OPS, OpDef, GRAPH_ALU, BINARY, UNARY, COMPARE, MOVEMENT
from .uop import IRDL_SOURCE, load_uop_dialect, new_context
from . import builders
