"""morok-opt: an mlir-opt for the `uop` dialect. Reads MLIR, runs a pipeline mixing our passes and upstream ones,
prints the result. Every user error is a diagnostic and exit code 1, never an abort."""
from __future__ import annotations
import argparse, json, re, sys
from morok_mlir.diagnostics import format_mlir_error

def _list_passes() -> str:
  from morok_mlir.passes import PASSES
  out = ["morok-mlir passes (Python, run inside MLIR's PassManager):"]
  for p in PASSES.values():
    out.append(f"  {p.name:<22} {p.summary}")
    for k, o in p.options.items(): out.append(f"      {k}={o.type.__name__} (default {o.default}): {o.help}")
  out += ["", "Any upstream MLIR pass can be named in the same pipeline by its mlir-opt name, with its options and",
          "nesting: e.g. -p 'uop-cse,canonicalize,func.func(cse),convert-scf-to-cf'  (`mlir-opt --help` lists them)."]
  return "\n".join(out)

def _chunks(text: str, split: bool):
  """(first line number, text) per input chunk; `// -----` separates chunks as in mlir-opt."""
  if not split: return [(0, text)]
  out, line = [], 0
  for part in re.split(r"^// -----[^\n]*\n?", text, flags=re.M):
    out.append((line, part)); line += part.count("\n") + 1
  return out

# MLIR's parser recurses once per nesting level and overflows the C stack (SIGSEGV) a few thousand levels deep, and
# parses integer literals in quadratic time. Real IR stays far below these limits, so reject beyond them up front.
MAX_NESTING, MAX_DIGITS = 256, 4096
_TOKENS = re.compile(r'"(?:[^"\\\n]|\\.)*"|//[^\n]*|->|>=|[\w!#]<|[(\[{<)\]}>]' + rf'|\d{{{MAX_DIGITS + 1},}}')

def check_input(text: str) -> str | None:
  """'line:col: error: ...' if text nests deeper or has longer number literals than MLIR survives; else None."""
  where = lambda pos: f"{text.count(chr(10), 0, pos) + 1}:{pos - text.rfind(chr(10), 0, pos)}"
  depth = 0
  for m in _TOKENS.finditer(text):
    t = m.group()
    if t[0].isdigit(): return f"{where(m.start())}: error: number literal of {len(re.match(r'[0-9.]*', text[m.start():]).group())} characters (at most {MAX_DIGITS})"
    if t[-1] in "([{<" and (len(t) == 1 or t[-1] == "<"):
      depth += 1
      if depth > MAX_NESTING: return f"{where(m.start())}: error: nesting deeper than {MAX_NESTING} levels"
    elif t in ")]}>": depth = max(depth - 1, 0)
  return None

def _diag(err: Exception, fname: str) -> str: return format_mlir_error(str(err), fname)

_CTX = None

def process(text: str, fname: str, pipeline: str, verify_each: bool, debuginfo: bool) -> tuple[str, str | None]:
  """-> (printed output, error message or None)."""
  from mlir import ir
  from morok_mlir.dialects import new_context
  from morok_mlir.dialects.verify import verify_module
  from morok_mlir.passes.pipeline import run_pipeline, PipelineError
  global _CTX
  if (err := check_input(text)): return "", f"{fname}:{err}"
  _CTX = _CTX or new_context()  # one per process, as in mlir-opt: loading the dialect costs ~30 ms
  with _CTX:
    try: module = ir.Module.parse(text)
    except ir.MLIRError as e: return "", _diag(e, fname)
    problems = lambda: "\n".join(_diag(Exception(f"{str(l)[4:-1]}: error: {m}"), fname) for l, m in verify_module(module.operation))
    if (err := problems()): return "", err
    if pipeline:
      try: run_pipeline(module, pipeline, verify_each)
      except PipelineError as e: return "", f"morok-opt: error: {e}"
      except ir.MLIRError as e: return "", _diag(e, fname)
      if not verify_each:  # still say so when the result is invalid, but print it (generic form) for debugging
        try: module.operation.verify()
        except ir.MLIRError as e: err = _diag(e, fname)
        err = err or problems()
    out = module.operation.get_asm(enable_debug_info=debuginfo)
    # Module.parse names every source "-": give locations the real file name
    return (out.replace('loc("-":', f"loc({json.dumps(fname)}:") if debuginfo else out), err or None

def main(argv=None) -> int:
  ap = argparse.ArgumentParser(prog="morok-opt", description="Run morok-mlir and upstream MLIR passes on MLIR files.")
  ap.add_argument("input", nargs="?", default="-", help="input file, or - for stdin")
  ap.add_argument("-o", dest="output", default="-", help="output file")
  ap.add_argument("-p", "--pass-pipeline", default="", help="comma-separated passes, ours and upstream")
  ap.add_argument("--split-input-file", action="store_true", help="process chunks separated by '// -----' independently")
  ap.add_argument("--list-passes", action="store_true", help="list our passes and how to name upstream ones")
  ap.add_argument("--mlir-print-debuginfo", action="store_true", help="print locations")
  ap.add_argument("--verify-each", dest="verify_each", action="store_true", default=True, help="verify after every pass (default)")
  ap.add_argument("--no-verify-each", dest="verify_each", action="store_false")
  ap.add_argument("--verify-rules", action="store_true", help="prove every rewrite rule with Z3 and print the verdicts")
  args = ap.parse_args(argv)
  if args.list_passes: print(_list_passes()); return 0
  if args.verify_rules:
    from morok_mlir.passes.prove import main as prove_main
    return prove_main()
  try:
    data = sys.stdin.buffer.read() if args.input == "-" else open(args.input, "rb").read()
  except OSError as e: print(f"morok-opt: error: cannot read {args.input}: {e.strerror}", file=sys.stderr); return 1
  fname = "<stdin>" if args.input == "-" else args.input
  try: text = data.decode("utf-8")
  except UnicodeDecodeError as e: print(f"{fname}: error: input is not UTF-8 text (byte {e.start})", file=sys.stderr); return 1
  if "\x00" in text: print(f"{fname}: error: input contains NUL bytes (binary data?)", file=sys.stderr); return 1
  from morok_mlir.passes.pipeline import parse_pipeline, PipelineError  # outside the try: an import error is ours, not the user's
  try:
    parse_pipeline(args.pass_pipeline)  # reject a bad pipeline before reading any IR
  except PipelineError as e: print(f"morok-opt: error: {e}", file=sys.stderr); return 1
  outs, failed = [], False
  for first, chunk in _chunks(text, args.split_input_file):
    out, err = process("\n" * first + chunk, fname, args.pass_pipeline, args.verify_each, args.mlir_print_debuginfo)
    if err: print(err, file=sys.stderr); failed = True
    if out: outs.append(out)
  result = "// -----\n".join(outs)
  if args.output == "-": sys.stdout.write(result)
  else:
    try:
      with open(args.output, "w") as f: f.write(result)
    except OSError as e: print(f"morok-opt: error: cannot write {args.output}: {e.strerror}", file=sys.stderr); return 1
  return 1 if failed else 0

if __name__ == "__main__": sys.exit(main())
