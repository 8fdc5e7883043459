"""Code generators: uop kernels -> upstream MLIR. Importing the package registers uop-lower-cpu and uop-lower-gpu."""
from morok_mlir.codegen import lower_cpu, lower_gpu  # noqa: F401
