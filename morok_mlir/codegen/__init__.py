"""Code generators: uop kernels -> upstream MLIR. Importing the package registers uop-lower-cpu (program.py: each kernel
as the phases of its template, lower_cpu.py: one kernel as loops) and uop-lower-gpu."""
from morok_mlir.codegen import program, lower_gpu  # noqa: F401
