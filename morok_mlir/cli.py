"""morok-opt: an mlir-opt for the `uop` dialect. Reads MLIR, runs a pipeline mixing our passes and upstream ones,
prints the result. Every user error is a diagnostic and exit code 1, never an abort."""
from __future__ import annotations
import argparse, json, os, re, sys, tempfile
from contextlib import contextmanager
from dataclasses import dataclass
import numpy as np
from morok_mlir.ir.diagnostics import format_mlir_error

def _register() -> None:
  """Our passes and code generators register themselves in the pass table when imported."""
  import morok_mlir.passes, morok_mlir.codegen  # noqa: F401

def _list_passes() -> str:
  from morok_mlir.ir.registry import PASSES
  _register()
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

# Limits that keep MLIR's parser (and printer) inside the stack and linear time; each was measured on these wheels by
# feeding ir.Module.parse one construct at growing sizes (the numbers in the comments). Real IR stays far below them.
MAX_INPUT = 64 << 20     # bytes of one input: more is refused before it is read (`morok-opt /dev/zero` ate memory)
MAX_NESTING = 256        # ( [ { < levels: the parser recurses per level; 10k levels of [ or ({ overflow the stack (SIGSEGV)
MAX_DIGITS = 4096        # digits of one decimal or hex literal: quadratic (10k decimal digits 1.3 s, 1M hex digits > 40 s),
                         # and 20k digits after a float's '.' abort in APFloat
MAX_RANK = 256           # dims of one shape: `1x1x...` is re-lexed once per dim (quadratic: 4096 dims cost 5.6 us per byte)
MAX_INT_BITS = 256       # width of an integer type: each dense element takes width bits (1000 elements of i16777215: 37 s)
MAX_AFFINE = 1024        # tokens of one affine map, set or affine-op subscript: a unary minus recurses (30k: SIGSEGV), a
                         # floordiv chain nests (300k: SIGSEGV), distinct dims and terms simplify in quadratic time
MAX_PRINTED = 64 << 20   # printed size of attribute and type aliases: `#a1 = [#a0, #a0]` doubles per line when printed
LIMITS_DOC = (f"Input limits: {MAX_INPUT >> 20} MiB, nesting {MAX_NESTING}, {MAX_DIGITS} digits per number, {MAX_RANK} dims per "
              f"shape, i{MAX_INT_BITS}, {MAX_AFFINE} tokens per affine map, aliases printing to {MAX_PRINTED >> 20} MiB.")

_SKIP = re.compile(r'"(?:[^"\\\n]|\\.)*"|//[^\n]*|->|>=')  # strings, comments and arrows hold no brackets
# Every scan below runs at C speed (bytes.translate/find, numpy, regexes with a literal first character): Python loops
# over 64 MiB of brackets or digits would take minutes, and a regex tried at every digit of a run is quadratic.
_DEPTH = np.zeros(256, np.int8)
_DEPTH[list(b"([{<")], _DEPTH[list(b")]}>")] = 1, -1
_DIGITS, _HEX, _DIMS = (bytes(to if c in chars else 32 for c in range(256)) for chars, to in
                        ((b"0123456789", 100), (b"0123456789abcdefABCDEF", 104), (b"0123456789x", 100)))
_HEXLIT, _SHAPE = re.compile(rb"0x([0-9a-fA-F]{%d,})" % (MAX_DIGITS + 1)), re.compile(rb"(?<!\d)(?:\d++x){%d}" % (MAX_RANK + 1))
_WIDE_INT = re.compile(rb"i(\d{3,})")
_AFFINE = re.compile(rb"affine_map<|affine_set<|encoding<|affine\.\w+")
_AFFINE_WHAT = {b"affine_map<": "affine map", b"affine_set<": "integer set", b"encoding<": "encoding map"}
_AFFINE_TOKEN = re.compile(r"[(\[{<)\]}>:]|[\w$.%#@^!]+|[-+*=]")
_ALIAS_DEF = re.compile(rb"(?:^|\n)[ \t]*[#!][\w$.\-]+[ \t]*=")
_ALIAS = re.compile(r'"(?:[^"\\\n]|\\.)*"|//[^\n]*|^[ \t]*([#!][\w$.\-]+)[ \t]*=|[#!][\w$.\-]+', re.M)
_IDENT = frozenset(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_$.%@#^!-")

def _too_deep(b: bytes) -> int | None:
  """Position of the first bracket nested deeper than MAX_NESTING (closers never take the depth below 0)."""
  a, depth, step = np.frombuffer(b, np.uint8), 0, 1 << 20
  c, m = np.empty(step, np.int32), np.empty(step, np.int32)
  for i in range(0, len(a), step):
    x = _DEPTH[a[i:i + step]]; n = len(x); cn, mn = c[:n], m[:n]
    np.cumsum(x, dtype=np.int32, out=cn); cn += depth
    np.minimum.accumulate(cn, out=mn); np.minimum(mn, 0, out=mn); np.subtract(cn, mn, out=cn)  # the running sum clamped at 0
    if cn.max() > MAX_NESTING: return i + int(np.argmax(cn > MAX_NESTING))
    depth = int(cn[-1])
  return None

def _long_runs(t: bytes, needle: bytes):
  """(start, end) of each run of t that contains needle (a run of one class character)."""
  i = 0
  while (i := t.find(needle, i)) >= 0:
    start, end = t.rfind(b" ", 0, i) + 1, t.find(b" ", i)
    yield start, (len(t) if end < 0 else end)
    i = len(t) if end < 0 else end

def _affine_end(s: str, pos: int, op: str | None) -> tuple[int, bool]:
  """(end, too long) of the affine map/set at s[pos] == '<', or of the operands of affine op `op` from pos: up to its ':',
  '{' or the next statement's '=' (affine.parallel's bounds follow its '=')."""
  depth, stops = 0, () if op is None else (":", "{") if op == "affine.parallel" else (":", "{", "=")
  for n, m in enumerate(_AFFINE_TOKEN.finditer(s, pos)):
    if n >= MAX_AFFINE: return m.start(), True
    t = m.group()
    if depth == 0 and t in stops: return m.start(), False
    depth += (t in ("(", "[", "{", "<")) - (t in (")", "]", "}", ">"))
    if depth < 0 or (depth == 0 and op is None and t == ">"): return m.end(), False
  return len(s), False

def _alias_overflow(text: str) -> tuple[int, str, int] | None:
  """(position, name, size) of the first alias whose printed expansion passes MAX_PRINTED. A definition is taken to run to
  the next one, so the last one also counts the uses in the operations after it: an over-estimate, never an under-."""
  size, cur, start, extra = {}, None, 0, 0
  for m in _ALIAS.finditer(text):
    if m.group(1):
      if cur and (n := m.start() - start + extra) > MAX_PRINTED: return start, cur, n
      if cur: size[cur] = n
      cur, start, extra = m.group(1), m.start(), 0
    elif m.group()[0] in "#!" and (k := size.get(m.group())): extra += k - len(m.group())
  if cur and (n := len(text) - start + extra) > MAX_PRINTED: return start, cur, n
  return None

def check_input(text: str) -> str | None:
  """'line:col: error: ...' if text holds a construct MLIR's parser cannot take in bounded stack and time; else None."""
  def err(pos: int, msg: str, stripped: bool = True) -> str:
    if stripped:  # position in text of position pos of s, the text without _SKIP's matches
      for m in _SKIP.finditer(text):
        if m.start() > pos: break
        pos += m.end() - m.start()
    return f"{text.count(chr(10), 0, pos) + 1}:{pos - text.rfind(chr(10), 0, pos)}: error: {msg}"
  s = _SKIP.sub("", text)
  b = s.encode("ascii", "replace")  # one byte per character
  if (p := _too_deep(b)) is not None: return err(p, f"nesting deeper than {MAX_NESTING} levels")
  if (run := next(_long_runs(b.translate(_DIGITS), b"d" * (MAX_DIGITS + 1)), None)):
    return err(run[0], f"number literal of {len(re.match(r'[0-9.]*', s[run[0]:]).group())} characters (at most {MAX_DIGITS})")
  for st, en in _long_runs(b.translate(_HEX), b"h" * (MAX_DIGITS + 1)):
    if (m := _HEXLIT.search(b, max(st - 2, 0), en)):
      return err(m.start(), f"hexadecimal literal of {len(m.group(1))} digits (at most {MAX_DIGITS})")
  for st, en in _long_runs(b.translate(_DIMS), b"d" * (2 * MAX_RANK + 2)):  # a shape of more dims has a run this long
    if (m := _SHAPE.search(b, st, en)): return err(m.start(), f"shape with more than {MAX_RANK} dimensions")
  for m in _WIDE_INT.finditer(b):
    i = m.start() - (m.start() > 0 and b[m.start() - 1] in b"su")  # si512, ui512
    before = b[max(i - 2, 0):i].rjust(2)
    if int(m.group(1)) > MAX_INT_BITS and (before[1] not in _IDENT or (before[1] == 120 and before[0] in b"0123456789?]")):  # `4xi512`
      return err(i, f"integer type {b[i:m.end()].decode()} is wider than {MAX_INT_BITS} bits")
  scanned = 0
  for m in _AFFINE.finditer(b):
    attr = m.group() in _AFFINE_WHAT
    if m.start() < scanned or (not attr and m.start() and b[m.start() - 1] in _IDENT): continue  # measured, or a longer name
    scanned, long = _affine_end(s, m.end() - attr, None if attr else m.group().decode())
    if long: return err(m.start(), f"{_AFFINE_WHAT.get(m.group(), 'affine expression')} longer than {MAX_AFFINE} tokens")
  if _ALIAS_DEF.search(b) and (a := _alias_overflow(text)):
    return err(a[0], f"alias {a[1]} prints as at least {a[2]} characters (at most {MAX_PRINTED >> 20} MiB): aliases nest exponentially", False)
  return None

def _diag(err: Exception, fname: str) -> str: return format_mlir_error(str(err), fname)

# ---------------------------------------------------------------- mlir-opt's IR printing and timing
@dataclass
class Instrument:
  """mlir-opt's --mlir-print-ir-* and --mlir-timing: which IR dumps go to stderr (before/after: the passes named, by
  their pipeline argument; None: every pass; empty: none), and whether the timing report follows the run."""
  before: frozenset | None = frozenset()
  after: frozenset | None = frozenset()
  after_change: bool = False
  after_failure: bool = False
  module_scope: bool = False
  timing: bool = False
  local_scope: bool = False   # --mlir-print-local-scope: the output's locations and attributes inline, not as #aliases
  def printing(self) -> bool: return self.before != frozenset() or self.after != frozenset() or self.after_failure

# The banner MLIR's IR printer writes before each dump: `// -----// IR Dump After CSE (cse) //----- //`, with ` Failed`
# before the argument after a failure and ` ('func.func' operation: @f)` after it at module scope.
_DUMP = re.compile(r"^// -----// IR Dump (Before|After) .*?\(([^()\n]*)\)[^\n]* //----- //\n", re.M)

def select_dumps(text: str, ins: Instrument) -> str:
  """MLIR's stderr during a run, with only the dumps of the passes selected: MLIR's bindings print before or after all
  passes or none, mlir-opt's --mlir-print-ir-before/after=PASS name some."""
  out, pos, keep = [], 0, True
  for m in _DUMP.finditer(text):
    if keep: out.append(text[pos:m.start()])
    sel = ins.before if m.group(1) == "Before" else ins.after
    keep, pos = sel is None or m.group(2) in sel or (ins.after_failure and " Failed (" in m.group()), m.start()
  if keep: out.append(text[pos:])
  return "".join(out)

@contextmanager
def _stderr_through(edit):
  """What the block writes to fd 2 (where MLIR's C++ code prints), passed through edit(text) onto stderr when it ends,
  also when it raises (a dump after a failed pass comes with the failure)."""
  with tempfile.TemporaryFile("w+b") as f:
    sys.stderr.flush(); saved = os.dup(2); os.dup2(f.fileno(), 2)
    try: yield
    finally:
      sys.stderr.flush(); os.dup2(saved, 2); os.close(saved)
      f.seek(0); sys.stderr.write(edit(f.read().decode("utf-8", "replace"))); sys.stderr.flush()

def _run_instrumented(module, pipeline: str, verify_each: bool, debuginfo: bool, ins: Instrument, fname: str) -> None:
  """The pipeline on module, its IR dumps (selected, their locations under the input's name) and timing on stderr."""
  from morok_mlir.ir.pipeline import build_pass_manager
  pm = build_pass_manager(pipeline, module.context, verify_each)
  if ins.printing():
    # MLIR aborts when module-scope printing is set up on a multi-threaded context (its dumps would race)
    if ins.module_scope: module.context.enable_multithreading(False)
    pm.enable_ir_printing(print_before_all=ins.before != frozenset(), print_after_all=ins.after != frozenset() or ins.after_failure,
                          print_module_scope=ins.module_scope, print_after_change=ins.after_change,
                          print_after_failure=ins.after_failure, enable_debug_info=debuginfo)
  if ins.timing: pm.enable_timing()
  try:
    if not ins.printing(): pm.run(module.operation); return
    with _stderr_through(lambda text: select_dumps(text, ins).replace('loc("-":', f"loc({json.dumps(fname)}:")): pm.run(module.operation)
  finally:
    sys.stderr.flush()
    del pm   # MLIR prints the timing report when the pass manager goes

_CTX = None

def process(text: str, fname: str, pipeline: str, verify_each: bool, debuginfo: bool, ins: Instrument | None = None) -> tuple[str, str | None]:
  """-> (printed output, error message or None)."""
  from mlir import ir
  from morok_mlir.dialects import new_context
  from morok_mlir.dialects.verify import verify_module
  from morok_mlir.ir.pipeline import PipelineError
  from morok_mlir.device import search   # noqa: F401 (uop-optimize{beam=n} compiles and times kernels on the CPU)
  global _CTX
  if (err := check_input(text)): return "", f"{fname}:{err}"
  _CTX = _CTX or new_context()  # one per process, as in mlir-opt: loading the dialect costs ~30 ms
  with _CTX:
    try: module = ir.Module.parse(text)
    except ir.MLIRError as e: return "", _diag(e, fname)
    problems = lambda: "\n".join(_diag(Exception(f"{str(l)[4:-1]}: error: {m}"), fname) for l, m in verify_module(module.operation))
    if (err := problems()): return "", err
    ins = ins or Instrument()
    if pipeline:
      try: _run_instrumented(module, pipeline, verify_each, debuginfo, ins, fname)
      except PipelineError as e: return "", f"morok-opt: error: {e}"
      except ir.MLIRError as e: return "", _diag(e, fname)
      if not verify_each:  # still say so when the result is invalid, but print it (generic form) for debugging
        try: module.operation.verify()
        except ir.MLIRError as e: err = _diag(e, fname)
        err = err or problems()
    out = module.operation.get_asm(enable_debug_info=debuginfo, use_local_scope=ins.local_scope)
    # Module.parse names every source "-": give locations the real file name
    return (out.replace('loc("-":', f"loc({json.dumps(fname)}:") if debuginfo else out), err or None

class _ArgError(Exception): pass

# mlir-opt's spelling: PASS lists are pipeline arguments (uop-rangeify, cse), comma-separated, the flag repeatable
_PRINT_FLAGS = {
  "--mlir-print-ir-before-all": dict(action="store_true", help="print the IR (on stderr) before every pass"),
  "--mlir-print-ir-after-all": dict(action="store_true", help="print the IR (on stderr) after every pass"),
  "--mlir-print-ir-before": dict(action="append", default=[], metavar="PASS", help="print the IR before the passes named"),
  "--mlir-print-ir-after": dict(action="append", default=[], metavar="PASS", help="print the IR after the passes named"),
  "--mlir-print-ir-after-change": dict(action="store_true", help="print the IR after a pass only where it changed it"),
  "--mlir-print-ir-after-failure": dict(action="store_true", help="print the IR after a pass only where it failed"),
  "--mlir-print-ir-module-scope": dict(action="store_true", help="print the whole module, not only the op a pass ran on"),
  "--mlir-print-local-scope": dict(action="store_true", help="print locations and attributes inline, not as #aliases"),
  "--mlir-timing": dict(action="store_true", help="print each pass's wall time (on stderr) after the run"),
}

def _pass_names(lists: list[str], flag: str) -> frozenset:
  """The pass arguments of repeated, comma-separated flags; each must name one of ours or an upstream pass."""
  from mlir import ir
  from mlir.passmanager import PassManager
  from morok_mlir.ir.pipeline import PipelineError
  from morok_mlir.ir.registry import PASSES
  names = frozenset(n.strip() for l in lists for n in l.split(",") if n.strip())
  for n in sorted(names - PASSES.keys()):
    try:
      with ir.Context(): PassManager("builtin.module").add(n)
    except ValueError: raise PipelineError(f"{flag}: no pass named '{n}' (morok-opt --list-passes lists ours, mlir-opt --help upstream's)") from None
  return names

def _instrument(args) -> Instrument:
  sel = lambda every, lists, flag: None if every else _pass_names(lists, flag)
  return Instrument(sel(args.mlir_print_ir_before_all, args.mlir_print_ir_before, "--mlir-print-ir-before"),
                    sel(args.mlir_print_ir_after_all, args.mlir_print_ir_after, "--mlir-print-ir-after"),
                    args.mlir_print_ir_after_change, args.mlir_print_ir_after_failure, args.mlir_print_ir_module_scope, args.mlir_timing,
                    args.mlir_print_local_scope)

def _version() -> str:
  from importlib.metadata import version, PackageNotFoundError
  def v(pkg):
    try: return version(pkg)
    except PackageNotFoundError: return "unknown"
  from morok_mlir import __version__
  return (f"morok-opt (morok-mlir {__version__}):\n  MLIR version {v('xtc-mlir-python-bindings')} (xtc-mlir-python-bindings)\n"
          f"  Python {sys.version.split()[0]}, numpy {v('numpy')}, z3 {v('z3-solver')}")

class _Parser(argparse.ArgumentParser):
  def error(self, message): raise _ArgError(message)  # argparse exits 2; every morok-opt error exits 1

def _read(path: str) -> bytes:
  """At most MAX_INPUT + 1 bytes: `morok-opt /dev/zero` must not read until memory runs out."""
  if path == "-": return sys.stdin.buffer.read(MAX_INPUT + 1)
  with open(path, "rb") as f: return f.read(MAX_INPUT + 1)

def main(argv=None) -> int:
  """morok-opt. A reader that stops early (`| head`) ends it quietly, as it ends other Unix tools."""
  from morok_mlir.core.env import EnvError
  try: return _run(argv)
  except EnvError as e: print(f"morok-opt: error: {e}", file=sys.stderr); return 1
  except BrokenPipeError:
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())   # the interpreter's last flush must not fail again
    return 1

def _run(argv=None) -> int:
  ap = _Parser(prog="morok-opt", description="Run morok-mlir and upstream MLIR passes on MLIR files.", epilog=LIMITS_DOC)
  ap.add_argument("input", nargs="?", default="-", help="input file, or - for stdin")
  ap.add_argument("-o", dest="output", default="-", help="output file")
  ap.add_argument("-p", "--pass-pipeline", default="", help="comma-separated passes, ours and upstream")
  ap.add_argument("--split-input-file", action="store_true", help="process chunks separated by '// -----' independently")
  ap.add_argument("--list-passes", action="store_true", help="list our passes and how to name upstream ones")
  ap.add_argument("--mlir-print-debuginfo", action="store_true", help="print locations")
  ap.add_argument("--verify-each", dest="verify_each", action="store_true", default=True, help="verify after every pass (default)")
  ap.add_argument("--no-verify-each", dest="verify_each", action="store_false")
  ap.add_argument("--verify-rules", action="store_true", help="prove every rewrite rule with Z3 and print the verdicts")
  for flag, kw in _PRINT_FLAGS.items(): ap.add_argument(flag, **kw)
  ap.add_argument("--version", action="store_true", help="print the versions of morok-mlir and of its MLIR")
  try: args = ap.parse_args(argv)
  except _ArgError as e: print(f"{ap.format_usage()}morok-opt: error: {e}", file=sys.stderr); return 1
  if args.version: print(_version()); return 0
  if args.list_passes: print(_list_passes()); return 0
  if args.verify_rules:
    from morok_mlir.core.prove import main as prove_main
    return prove_main()
  try: data = _read(args.input)
  except OSError as e: print(f"morok-opt: error: cannot read {args.input}: {e.strerror or e}", file=sys.stderr); return 1
  fname = "<stdin>" if args.input == "-" else args.input
  if len(data) > MAX_INPUT: print(f"{fname}: error: input larger than {MAX_INPUT >> 20} MiB (the limit of morok-opt)", file=sys.stderr); return 1
  try: text = data.decode("utf-8")
  except UnicodeDecodeError as e: print(f"{fname}: error: input is not UTF-8 text (byte {e.start})", file=sys.stderr); return 1
  if "\x00" in text: print(f"{fname}: error: input contains NUL bytes (binary data?)", file=sys.stderr); return 1
  from morok_mlir.ir.pipeline import parse_pipeline, PipelineError  # outside the try: an import error is ours, not the user's
  _register()
  try:
    parse_pipeline(args.pass_pipeline)  # reject a bad pipeline before reading any IR
    ins = _instrument(args)
  except PipelineError as e: print(f"morok-opt: error: {e}", file=sys.stderr); return 1
  outs, failed = [], False
  for first, chunk in _chunks(text, args.split_input_file):
    out, err = process("\n" * first + chunk, fname, args.pass_pipeline, args.verify_each, args.mlir_print_debuginfo, ins)
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
