"""morok-mlir: a tinygrad-style ML compiler whose IR is MLIR."""
import os as _os, importlib.util as _iu
# a source checkout on PYTHONPATH, not installed: dialects/ and passes/ sit beside this package (pyproject maps them in;
# an install, editable or not, finds them without this)
if _iu.find_spec(f"{__name__}.dialects") is None and _os.path.isfile(_os.path.join(
   _root := _os.path.dirname(_os.path.dirname(_os.path.abspath(__file__))), "dialects", "__init__.py")): __path__.append(_root)
from morok_mlir.core.dtype import dtypes, DType
from morok_mlir.tensor import Tensor
from morok_mlir.core.uop import Variable
from morok_mlir.device import Device
from morok_mlir.jit import TinyJit
no_grad = Tensor.test   # PyTorch's torch.no_grad(): a context manager and decorator
from morok_mlir.core import env as _env
if _env.get("VIZ") != "0":   # VIZ=1: the compiler's stages on a local web page; VIZ=PATH.html: written at exit
  from morok_mlir import viz as _viz
  _viz.start(_env.get("VIZ"))

def __getattr__(name: str):
  """__version__: pyproject.toml's version, as installed (one source), read when first asked: importlib.metadata imports
  ~5 MB of modules a process that never asks does not need."""
  if name != "__version__": raise AttributeError(f"module 'morok_mlir' has no attribute {name!r}")
  from importlib.metadata import version, PackageNotFoundError
  try: v = version("morok-mlir")
  except PackageNotFoundError: v = "0+unknown"   # run from a source tree that was never installed
  globals()["__version__"] = v
  return v
