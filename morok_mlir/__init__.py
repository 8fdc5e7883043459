"""morok-mlir: a tinygrad-style ML compiler whose IR is MLIR."""
from .dtype import dtypes, DType
from .tensor import Tensor
from .uop import Variable
from .device import Device
