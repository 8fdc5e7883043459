"""Our MLIR passes, written in Python: one module per pass, registered by kebab-case name in the pass table
(morok_mlir/ir/registry.py) when imported. The code generators (morok_mlir.codegen: uop-lower-cpu, uop-lower-gpu)
register themselves there too: whoever runs a pipeline imports both packages."""
from morok_mlir.ir.registry import PASSES, PassInfo, PassError, register, Option
from morok_mlir.passes import dce, cse  # noqa: F401  (registration order: dce and cse first)
from morok_mlir.passes import optimize  # noqa: F401
from morok_mlir.passes import rangeify, kernel_split, copy_elide  # noqa: F401
from morok_mlir.passes import simplify  # noqa: F401
from morok_mlir.passes import allreduce  # noqa: F401
