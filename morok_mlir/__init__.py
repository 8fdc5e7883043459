"""morok-mlir: a tinygrad-style ML compiler whose IR is MLIR."""
from morok_mlir.core.dtype import dtypes, DType
from morok_mlir.tensor import Tensor
from morok_mlir.core.uop import Variable
from morok_mlir.device import Device
from morok_mlir.jit import TinyJit
