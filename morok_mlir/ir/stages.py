"""Stages: one compile's module at every step, as text: `graph` (as built, before any pass), each pass's name (the module
after it), `lowered` (the kernels in upstream MLIR) and `llvm` (their LLVM IR). Nothing is printed unless a recorder is
active in this thread (Tensor.mlir, DEBUG=4, VIZ): without one the pipeline runs as one PassManager."""
from __future__ import annotations
import re, threading
from contextlib import contextmanager, nullcontext
from typing import Callable
from morok_mlir.ir import load as _load_mlir
_load_mlir()
from mlir import ir
from morok_mlir.ir.bridge import FILE_LOC, Func, import_module

_LOC = re.compile(r'\s*\bloc\((?:[^()"]|"[^"]*"|\((?:[^()"]|"[^"]*")*\))*\)')   # a location, inline or an alias use
_ALIAS = re.compile(r'^(#loc\d*) = (loc\(.*\))$')

def strip_locs(text: str) -> list[tuple[str, str | None]]:
  """MLIR text printed with debug info -> its lines without locations, each with the file:line:col of the last location
  on it (the op's own; None for none or for the printout's own places, file "-"). Alias definitions are dropped."""
  aliases = dict(m.groups() for line in text.splitlines() if (m := _ALIAS.match(line)))
  out = []
  for line in text.splitlines():
    if _ALIAS.match(line): continue
    locs = _LOC.findall(line)
    loc = aliases.get(locs[-1].strip()[4:-1], locs[-1].strip()) if locs else ""
    m = FILE_LOC.search(loc)
    out.append((_LOC.sub("", line), f"{m.group(1)}:{m.group(2)}:{m.group(3)}" if m and m.group(1) != "-" else None))
  while out and not out[0][0].strip(): out.pop(0)
  return out

class Stages:
  """The stages of one compile, in order. echo: print each as it is recorded (DEBUG=4); viz: also keep each stage's
  UOps, the kernels' functions and their run times (VIZ)."""
  def __init__(self, echo: bool = False, viz: bool = False):
    self.echo, self.viz = echo, viz
    self.texts: dict[str, str] = {}           # stage -> module text with locations (debug info)
    self.funcs: dict[str, list[Func]] = {}    # stage -> its functions as UOps (viz)
    self.kernels: list[Func] = []             # the schedule's kernels, in run order (viz)
    self.times: dict[str, list[float]] = {}   # kernel -> measured run times in seconds (viz; the first 32 runs)

  def add(self, name: str, text_or_module, funcs: list[Func] | None = None) -> None:
    m = text_or_module
    self.texts[name] = m if isinstance(m, str) else m.operation.get_asm(enable_debug_info=True)
    if self.viz and funcs is None and not isinstance(m, str): funcs = import_module(m)
    if self.viz and funcs is not None: self.funcs[name] = funcs
    if self.echo: print(f"// ----- {name if name in ('graph', 'lowered', 'llvm') else 'after ' + name}\n{self.text(name)}", flush=True)

  def lower(self, dev, kernels: list[Func]) -> None:
    """The `lowered` and `llvm` stages: each kernel as its device renders it (upstream MLIR) and, on the CPU, the LLVM IR
    its compiler makes of it; one `// -----` chunk per kernel (morok-opt --split-input-file reads them)."""
    if self.viz: self.kernels = kernels
    with getattr(dev, "lock", None) or nullcontext(): specs = [(f.name, dev.renderer.render(f)) for f in kernels]   # as dev.compile renders
    self.add("lowered", "".join(f"// ----- kernel {n}\n{s.src}" for n, s in specs))
    if dev.name != "CPU": return
    ctx = ir.Context()   # the LLVM dialect module is parsed apart from the compiler's context (its lock is the device's)
    with ctx: self.add("llvm", "".join(f"; ----- kernel {n}\n" + llvm_ir(dev.compiler.compile(s).src) for n, s in specs))

  def ran(self, kernel: str, seconds: float) -> None:
    if len(ts := self.times.setdefault(kernel, [])) < 32: ts.append(seconds)

  def text(self, stage: str, debuginfo: bool = False) -> str:
    """The module at `stage`; debuginfo: with its locations (the user's file:line of each op)."""
    if stage not in self.texts:
      raise ValueError(f"unknown stage {stage!r} (stages: {', '.join(self.texts) or 'none: the graph computes nothing'})")
    t = self.texts[stage]
    return t if debuginfo or stage in ("lowered", "llvm") else "\n".join(line for line, _ in strip_locs(t)) + "\n"

def llvm_ir(llvm_dialect: str) -> str:
  """LLVM IR of an LLVM-dialect module (parsed in the current context)."""
  from mlir.dialects.llvm import translate_module_to_llvmir
  return translate_module_to_llvmir(ir.Module.parse(llvm_dialect).operation)

# ---------------------------------------------------------------- the recorder of the current thread
class _Active(threading.local):
  rec: Stages | None = None
_active = _Active()
WATCH: Callable[[bool], Stages] | None = None   # VIZ installs it: a new recorder for each compile (echo: DEBUG >= 4)

def active() -> Stages | None: return _active.rec

def new(debug: int) -> Stages | None:
  """The recorder for one of realize's compiles: VIZ's, a printing one under DEBUG >= 4, else None (nothing recorded)."""
  if WATCH is not None: return WATCH(debug >= 4)
  return Stages(echo=True) if debug >= 4 else None

@contextmanager
def recording(rec: Stages | None):
  prev, _active.rec = _active.rec, rec
  try: yield rec
  finally: _active.rec = prev
