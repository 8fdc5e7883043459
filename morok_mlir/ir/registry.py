"""The pass registry. MLIR cannot register Python passes by name, so we keep our own table and split a pipeline
string between our passes and upstream ones (see `pipeline.py`)."""
from __future__ import annotations
from dataclasses import dataclass, field
from typing import Callable

@dataclass
class Option:
  type: type
  default: object
  help: str

@dataclass
class PassInfo:
  name: str
  summary: str
  run: Callable          # run(funcs: list[Func], **options) -> list[Func]   (UOp level), or run(module_op, **options)
  options: dict[str, Option] = field(default_factory=dict)
  on_uops: bool = True   # True: the pass works on imported UOp DAGs; False: directly on the MLIR module
  @property
  def pass_name(self) -> str:
    """The name MLIR's IR dumps and timing report show, spelled as upstream's (uop-kernel-split -> UopKernelSplit)."""
    return "".join(w.capitalize() for w in self.name.split("-"))

PASSES: dict[str, PassInfo] = {}
# imports that register passes, run before a pipeline is parsed (the realize driver's: its passes load with the first
# compile, not with the driver)
LOADERS: list[Callable] = []


class PassError(Exception):
  """A pass could not do its work; loc is the user's file:line of the offending op."""
  def __init__(self, msg: str, loc: str | None = None):
    super().__init__(msg); self.loc = loc

def register(name: str, summary: str, on_uops: bool = True, **options: Option):
  def deco(fn):
    # the source tree's passes/ imported a second time under another name (`import passes.x`, not morok_mlir.passes.x)
    # would silently replace the pass with a copy whose module state (optimize.SEARCH) was never set
    if (old := PASSES.get(name)) is not None and old.run.__module__ != fn.__module__:
      raise ImportError(f"pass {name} registered by {old.run.__module__} and again by {fn.__module__}: import it as morok_mlir.passes.*")
    PASSES[name] = PassInfo(name, summary, fn, options, on_uops)
    return fn
  return deco
