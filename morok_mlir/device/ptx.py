"""PTX from upstream MLIR with a `gpu.module`: `gpu-lower-to-nvvm-pipeline{cubin-format=isa}` serialises each
gpu.module to PTX text inside a `gpu.binary`; we read it from the binary's object. Needs no GPU, driver or toolkit.

  ptx_for(module_text, chip="sm_90") -> str      the PTX of the module's only gpu.module
  ptx_modules(module_text, chip) -> {name: ptx}
  ptxas(ptx, chip) -> {kernel: {registers, stack, spill_stores, spill_loads, smem}}   assembled by NVIDIA's ptxas (tests)
  python -m morok_mlir.device.ptx [--chip sm_90] [file]   prints the PTX of a module (stdin by default)

The chip is checked against CHIPS before MLIR sees it: the NVPTX back end aborts the process on a chip whose PTX
version it was not given (`+ptxNN`), so an unknown chip must be a Python error."""
from __future__ import annotations
import os, re, shutil, subprocess, sys, tempfile, threading

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

_PTXAS_INFO = re.compile(r"Compiling entry function '(\w+)'.*?(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads"
                         r".*?Used (\d+) registers([^\n]*)", re.S)

def ptxas_path() -> str | None:
  """NVIDIA's PTX assembler: from the nvidia-cuda-nvcc-cu12 wheel (a test dependency), else a CUDA toolkit's on the PATH, or None."""
  try: from nvidia.cuda_nvcc import __path__ as dirs
  except ImportError: dirs = []
  return next((p for d in dirs if os.access(p := os.path.join(d, "bin", "ptxas"), os.X_OK)), None) or shutil.which("ptxas")

def ptxas(ptx: str, chip: str) -> dict[str, dict[str, int]]:
  """Assemble ptx for chip with `ptxas -v` (what the driver's JIT would do on a GPU): per kernel, its registers,
  stack frame, spilled bytes and static shared memory (smem, bytes). An error of the assembler is a PTXError with its message."""
  check_chip(chip)
  if (exe := ptxas_path()) is None: raise PTXError("ptxas not found: pip install nvidia-cuda-nvcc-cu12")
  with tempfile.TemporaryDirectory() as d:
    src = os.path.join(d, "k.ptx")
    with open(src, "w") as f: f.write(ptx)
    r = subprocess.run([exe, f"-arch={chip}", "-v", src, "-o", os.path.join(d, "k.cubin")], capture_output=True, text=True)
  if r.returncode: raise PTXError(f"ptxas -arch={chip}: {r.stderr.strip()}")
  return {m[0]: {"stack": int(m[1]), "spill_stores": int(m[2]), "spill_loads": int(m[3]), "registers": int(m[4]),
                 "smem": int(x[1]) if (x := re.search(r"(\d+) bytes smem", m[5])) else 0}
          for m in _PTXAS_INFO.findall(r.stdout + r.stderr)}

def main(argv: list[str] | None = None) -> int:
  import argparse
  ap = argparse.ArgumentParser(prog="python -m morok_mlir.device.ptx", description="Print the PTX of an MLIR module with a gpu.module")
  ap.add_argument("file", nargs="?", default="-")
  ap.add_argument("--chip", default="sm_90", help=f"one of {', '.join(CHIPS)}")
  ap.add_argument("-O", dest="opt", type=int, default=3)
  ap.add_argument("--ptxas", action="store_true", help="also assemble it with ptxas; an error or a spill fails")
  a = ap.parse_args(argv)
  try:
    text = sys.stdin.read() if a.file == "-" else open(a.file).read()
    ptx = "".join(ptx_modules(text, a.chip, a.opt).values())
    sys.stdout.write(ptx)
    if a.ptxas and (spilled := [k for k, v in ptxas(ptx, a.chip).items() if v["spill_stores"] or v["spill_loads"]]):
      raise PTXError(f"ptxas -arch={a.chip}: registers spilled in {', '.join(spilled)}")
  except (OSError, ValueError, PTXError) as e:
    print(f"error: {e}", file=sys.stderr); return 1
  return 0

if __name__ == "__main__": sys.exit(main())
