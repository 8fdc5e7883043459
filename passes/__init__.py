"""Our MLIR passes, written in Python: one module per pass, registered by kebab-case name."""
from .registry import PASSES, PassInfo, PassError, register, Option
from . import dce, cse  # noqa: F401  (registration order: dce and cse first)
from . import optimize, lower_cpu  # noqa: F401
from . import lower_gpu  # noqa: F401
from . import rangeify, kernel_split  # noqa: F401
from . import simplify  # noqa: F401
