"""Run a textual pass pipeline mixing our registered Python passes and upstream MLIR passes.

`uop-rangeify,uop-simplify{max-iters=4},canonicalize,func.func(cse)` -> one PassManager in which each of our passes
is a Python callback and each upstream element is added as MLIR parses it. Everything is validated before MLIR sees
it: unknown names and bad options raise PipelineError instead of reaching MLIR's asserts."""
from __future__ import annotations
import re, threading
from morok_mlir.ir import load as _load_mlir
_load_mlir()
from mlir import ir
from mlir.passmanager import PassManager
from morok_mlir.ir.bridge import Func, import_module, module_text, replace_module_body, IRImportError
from morok_mlir.ir.diagnostics import format_mlir_error
from morok_mlir.dialects import new_context
from morok_mlir.dialects.verify import verify_module, signature_problem
from morok_mlir.ir.registry import LOADERS, PASSES, PassError, PassInfo
from morok_mlir.ir import stages

class PipelineError(ValueError): pass

def split_top(s: str, sep: str = ",") -> list[str]:
  out, depth, cur = [], 0, ""
  for ch in s:
    if ch in "({": depth += 1
    elif ch in ")}": depth -= 1
    if depth < 0: raise PipelineError(f"unbalanced '{ch}' in pass pipeline {s!r}")
    if ch == sep and depth == 0: out.append(cur.strip()); cur = ""
    else: cur += ch
  if depth: raise PipelineError(f"unbalanced brackets in pass pipeline {s!r}")
  return [p for p in out + [cur.strip()] if p]

def _parse_options(info: PassInfo, text: str) -> dict:
  opts = {}
  for item in filter(None, text.split()):
    if "=" not in item: raise PipelineError(f"pass '{info.name}': option '{item}' needs a value (name=value)")
    k, v = item.split("=", 1)
    if k not in info.options:
      known = ", ".join(info.options) or "none"
      raise PipelineError(f"pass '{info.name}' has no option '{k}' (options: {known})")
    o = info.options[k]
    try: opts[k.replace("-", "_")] = (v.lower() in ("1", "true")) if o.type is bool else o.type(v)
    except ValueError: raise PipelineError(f"pass '{info.name}': option '{k}' expects {o.type.__name__}, got {v!r}") from None
  return opts

def parse_pipeline(text: str) -> list[tuple[PassInfo, dict] | str]:
  """Elements of the pipeline: (our pass, options) or an upstream pipeline string."""
  while LOADERS: LOADERS.pop()()
  text = text.strip()
  if (m := re.fullmatch(r"builtin\.module\((.*)\)", text, re.S)): text = m.group(1)  # accept mlir-opt's spelling
  out = []
  for el in split_top(text):
    m = re.fullmatch(r"([\w.\-]+)\s*(?:\{(.*)\})?", el, re.S)
    if m and m.group(1) in PASSES: out.append((PASSES[m.group(1)], _parse_options(PASSES[m.group(1)], m.group(2) or "")))
    elif m and m.group(1).startswith("uop-"):
      raise PipelineError(f"unknown pass '{m.group(1)}' (morok-opt --list-passes lists ours)")
    else: out.append(el)
  return out

def _python_pass(info: PassInfo, opts: dict, verify: bool, func_locs: dict, carry: dict, hand_on: bool, hand_back: bool):
  """Our pass as a PassManager callback. hand_on: the next element is also a pass of ours on uop graphs, which takes
  this one's functions from carry instead of the module (not written, printed, parsed, verified and imported again in
  between: for a big graph that round trip costs more than the passes); the last of such a run writes the module.
  hand_back: the pipeline's last element, whose caller takes its functions in Python (carry["out"]: realize's kernels)."""
  def run(op, pass_):
    if not func_locs:  # the first of our passes sees the functions where the input had them: rebuilt ones lose their place
      func_locs.update((ir.StringAttr(f.operation.attributes["sym_name"]).value, f.operation.location)
                       for f in op.regions[0].blocks[0].operations if f.operation.name == "func.func")
    try:
      if info.on_uops:  # every function is imported as a uop graph: one the import cannot represent is the user's error
        if (funcs := carry.pop("funcs", None)) is None:
          for f in op.regions[0].blocks[0].operations:
            if f.operation.name == "func.func" and (msg := signature_problem(f.operation)): raise PassError(msg, f.operation.location)
          funcs = import_module(op)
        out = info.run(funcs, **opts)
        if hand_on: carry["funcs"] = out; return
        if hand_back: carry["out"] = out; return
        replace_module_body(op, module_text(out))
      else: info.run(op, **opts)
      errs = verify_module(op) if verify else []
    except (PassError, IRImportError) as e:
      errs = [(e.loc, str(e))]
    except Exception as e:  # a bug of ours must not become an abort inside MLIR
      errs = [(None, f"internal error in {info.name}: {type(e).__name__}: {e}")]
    for loc, msg in errs:
      _location(loc, op, msg, func_locs).emit_error(f"{info.name}: {msg}" if not msg.startswith(info.name) else msg)
    if errs: pass_.signal_pass_failure()
  return run

def _location(loc, module_op, msg: str, func_locs: dict) -> ir.Location:
  """Where to report a pass's error. One without a location is reported where the input had the function it names
  (`@f`), else at the module: an error with no place in the file is no help."""
  if isinstance(loc, ir.Location): return loc
  if loc and (m := re.fullmatch(r"(.*):(\d+):(\d+)", loc)): return ir.Location.file(m.group(1), int(m.group(2)), int(m.group(3)), module_op.context)
  return next((func_locs[n] for n in re.findall(r"@([\w.$\-]+)", msg) if n in func_locs), module_op.location)

def build_pass_manager(pipeline: str, ctx: ir.Context, verify_each: bool = True, fuse: bool = False, carry: dict | None = None) -> PassManager:
  """fuse: consecutive passes of ours on uop graphs hand their functions on in Python, and the module is written (and
  verified) after the last of each such run only. carry (with fuse): with an "out" key, where the pipeline ends in a pass
  of ours, that pass's functions go there and the module is left as the passes before it wrote it."""
  carry = {} if carry is None else carry
  with ctx:
    pm = PassManager("builtin.module")
    pm.enable_verifier(verify_each)
    func_locs: dict = {}
    els = parse_pipeline(pipeline)
    ours = [not isinstance(el, str) and el[0].on_uops for el in els] + [False]
    for i, el in enumerate(els):
      if isinstance(el, str):
        try: pm.add(el)
        except ValueError as e: raise PipelineError(f"upstream pass '{el}': {str(e).strip()}") from None
      else:
        run = _python_pass(el[0], el[1], verify_each, func_locs, carry, fuse and ours[i] and ours[i + 1],
                           fuse and ours[i] and "out" in carry and i == len(els) - 1)
        pm.add(run, name=el[0].pass_name, argument=el[0].name)
  return pm

def run_pipeline(module: ir.Module, pipeline: str, verify_each: bool = True, fuse: bool = False, carry: dict | None = None) -> None:
  """Run pipeline on module in place; raises PipelineError (bad pipeline) or ir.MLIRError (a pass failed). fuse, carry:
  see build_pass_manager."""
  build_pass_manager(pipeline, module.context, verify_each, fuse, carry).run(module.operation)

# ---------------------------------------------------------------- the graph pipeline of realize()
PIPELINE = ["uop-rangeify", "uop-simplify", "uop-kernel-split", "uop-elide-copies", "uop-optimize"]

class CompileError(RuntimeError):
  """A pass rejected the graph; the message carries MLIR's diagnostics at the user's file:line."""

from morok_mlir.ir import compile_lock   # noqa: E402 (one compile at a time: MLIR contexts are not thread-safe)

_ctx, _ctx_uses = None, 0
def mlir_context():
  """The context the `uop` dialect is parsed in (use it holding compile_lock). A context keeps every type and attribute
  it ever uniqued (tens of KB per graph) until it dies, so a fresh one replaces it every 64 uses (17 ms)."""
  global _ctx, _ctx_uses
  with compile_lock:
    if _ctx is None or _ctx_uses >= 64:
      _ctx, _ctx_uses = new_context(), 0
    _ctx_uses += 1
  return _ctx

def lower_to_kernels(graph: Func, debug: int = 0, beam: int = 0) -> list[Func]:
  """A graph function -> its kernels and @schedule: printed as a `uop` module, the PIPELINE run inside MLIR's
  PassManager (its passes registered by importing morok_mlir.passes; they hand their graphs on in Python, the last its
  kernels to this function). beam > 0: uop-optimize searches each kernel's choices with that beam width. With a stage
  recorder active (ir/stages.py), or debug >= 4 (which prints them), the passes run one by one and the module is
  recorded before the first and after each."""
  pipeline = [p + f"{{beam={beam}}}" if beam and p == "uop-optimize" else p for p in PIPELINE]
  rec = stages.active() or (stages.Stages(echo=True) if debug >= 4 else None)
  with compile_lock, mlir_context():
    module = ir.Module.parse(module_text([graph]))
    if rec is not None: rec.add("graph", module, [graph])
    # unrecorded, the last pass hands its kernels back in Python: not printed, verified and imported again
    carry = {"out": None} if rec is None else None
    for p in (pipeline if rec is not None else [",".join(pipeline)]):
      try: run_pipeline(module, p, fuse=True, carry=carry)
      except ir.MLIRError as e: raise CompileError(format_mlir_error(str(e))) from None
      if rec is not None: rec.add(p.split("{")[0], module)
    return import_module(module) if carry is None else carry["out"]
