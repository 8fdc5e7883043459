from morok_mlir.core import uop  # noqa: F401  (first: uop and mixin import each other, uop must start)
