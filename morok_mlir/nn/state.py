"""Parameters and state dicts of a model (any object holding Tensors in attributes, lists, tuples and dicts), and
safetensors files through the `safetensors` package's numpy API."""
from __future__ import annotations
import numpy as np
from morok_mlir.core.provenance import error as _err
from morok_mlir.tensor import Tensor

def get_state_dict(obj, prefix: str = "") -> dict[str, Tensor]:
  """Every Tensor reachable from obj, named by its path of attributes, indices and keys ("layers.0.weight")."""
  if isinstance(obj, Tensor): return {prefix.strip("."): obj}
  if hasattr(obj, "_asdict"): return get_state_dict(obj._asdict(), prefix)   # a namedtuple
  if isinstance(obj, (list, tuple)): items = enumerate(obj)
  elif isinstance(obj, dict): items = obj.items()
  elif hasattr(obj, "__dict__"): items = vars(obj).items()
  else: return {}
  return {k: v for key, x in items for k, v in get_state_dict(x, f"{prefix}{key}.").items()}

def get_parameters(obj) -> list[Tensor]:
  """The model's tensors, each once (in state-dict order)."""
  return list({id(t): t for t in get_state_dict(obj).values()}.values())

def load_state_dict(model, state_dict: dict[str, Tensor], strict: bool = True, realize: bool = True) -> None:
  """Assign each of the model's tensors its entry of state_dict (cast to its dtype, moved to its device), then realize
  them all in one call. strict: missing or unexpected keys raise (PyTorch's); a shape mismatch always raises."""
  mine = get_state_dict(model)
  if strict and (missing := [k for k in mine if k not in state_dict]) + (unexpected := [k for k in state_dict if k not in mine]):
    _err(RuntimeError, f"error loading state_dict: missing keys {missing}, unexpected keys {unexpected}")
  for k, v in mine.items():
    if (w := state_dict.get(k)) is None: continue
    if not isinstance(w, Tensor): w = Tensor(np.asarray(w))
    if w.shape != v.shape: _err(ValueError, f"shape mismatch in `{k}`: the model has {v.shape}, the state dict {w.shape}")
    v.assign(w.to(v.device).cast(v.dtype))
  if realize and mine: Tensor.realize(*mine.values())

def safe_save(tensors: dict[str, Tensor], fn: str, metadata: dict[str, str] | None = None) -> None:
  from safetensors.numpy import save_file
  save_file({k: np.ascontiguousarray(t.numpy()) for k, t in tensors.items()}, fn, metadata)

def safe_load(fn: str) -> dict[str, Tensor]:
  from safetensors.numpy import load_file
  return {k: Tensor(v) for k, v in load_file(fn).items()}
