"""PTX from upstream MLIR with a `gpu.module`: `gpu-lower-to-nvvm-pipeline{cubin-format=isa}` serialises each
gpu.module to PTX text inside a `gpu.binary`; we read it from the binary's object. Needs no GPU, driver or toolkit.

  ptx_for(module_text, chip="sm_90") -> str      the PTX of the module's only gpu.module
  ptx_modules(module_text, chip) -> {name: ptx}
  python -m morok_mlir.device.ptx [--chip sm_90] [file]   prints the PTX of a module (stdin by default)

The chip is checked against CHIPS before MLIR sees it: the NVPTX back end aborts the process on a chip whose PTX
version it was not given (`+ptxNN`), so an unknown chip must be a Python error."""
from __future__ import annotations
import re, sys, threading

# chip -> the lowest PTX ISA that supports it (CUDA 10.0 .. 12.0 drivers load these)
CHIPS = {"sm_70": "+ptx60", "sm_72": "+ptx61", "sm_75": "+ptx63", "sm_80": "+ptx70", "sm_86": "+ptx71", "sm_87": "+ptx74",
         "sm_89": "+ptx78", "sm_90": "+ptx80", "sm_90a": "+ptx80"}
# kernels get bare pointers (one .u64 param per buffer), matching how the runtime launches them
PIPELINE = ("builtin.module(gpu-lower-to-nvvm-pipeline{{cubin-chip={chip} cubin-features={features} cubin-format=isa "
            "kernel-bare-ptr-calling-convention=1 opt-level={opt}}})")
_lock = threading.Lock()
_ctx = None

class PTXError(RuntimeError):
  """MLIR could not lower or serialise the module; the message carries its diagnostics."""

def check_chip(chip: str) -> str:
  if chip not in CHIPS: raise ValueError(f"unknown CUDA chip {chip!r} (known: {', '.join(CHIPS)})")
  return CHIPS[chip]

def ptx_modules(module_text: str, chip: str = "sm_90", opt: int = 3) -> dict[str, str]:
  global _ctx
  features = check_chip(chip)
  if not isinstance(opt, int) or not 0 <= opt <= 3: raise ValueError(f"opt must be 0..3, got {opt!r}")
  from mlir import ir
  from mlir.dialects import gpu
  from mlir.passmanager import PassManager
  with _lock:
    if _ctx is None: _ctx = ir.Context()
    with _ctx:
      try:
        mod = ir.Module.parse(module_text)
        PassManager.parse(PIPELINE.format(chip=chip, features=features, opt=opt)).run(mod.operation)
      except ir.MLIRError as e: raise PTXError(str(e)) from None
      out = {}
      for op in mod.body.operations:
        if op.operation.name == "gpu.binary":
          name = ir.StringAttr(op.attributes["sym_name"]).value
          out[name] = bytes(gpu.ObjectAttr(op.attributes["objects"][0]).object).decode()
      return out

def ptx_for(module_text: str, chip: str = "sm_90", opt: int = 3) -> str:
  """The PTX of the module's gpu.module (exactly one)."""
  mods = ptx_modules(module_text, chip, opt)
  if len(mods) != 1: raise PTXError(f"expected one gpu.module, found {len(mods)}: {', '.join(mods) or 'none'}")
  return next(iter(mods.values()))

def kernel_names(ptx: str) -> list[str]: return re.findall(r"^\.visible \.entry (\w+)\(", ptx, re.M)

def main(argv: list[str] | None = None) -> int:
  import argparse
  ap = argparse.ArgumentParser(prog="python -m morok_mlir.device.ptx", description="Print the PTX of an MLIR module with a gpu.module")
  ap.add_argument("file", nargs="?", default="-")
  ap.add_argument("--chip", default="sm_90", help=f"one of {', '.join(CHIPS)}")
  ap.add_argument("-O", dest="opt", type=int, default=3)
  a = ap.parse_args(argv)
  try:
    text = sys.stdin.read() if a.file == "-" else open(a.file).read()
    sys.stdout.write("".join(ptx_modules(text, a.chip, a.opt).values()))
  except (OSError, ValueError, PTXError) as e:
    print(f"error: {e}", file=sys.stderr); return 1
  return 0

if __name__ == "__main__": sys.exit(main())
