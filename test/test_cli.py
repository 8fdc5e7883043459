"""morok-opt as a user runs it: input from a file or stdin, -o, --split-input-file, --mlir-print-debuginfo, exit codes,
and robustness: no input may end the process by a signal; each gives exit 0, or exit 1 with a diagnostic."""
import json, os, pathlib, random, subprocess, sys, textwrap
import pytest
from morok_mlir.dialects import OPS
from morok_mlir.dialects.ops import example_module
from morok_mlir.cli import MAX_NESTING

OPT = str(pathlib.Path(sys.executable).with_name("morok-opt"))
ALL = "".join(example_module(o) for o in OPS.values())
ADD = 'func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {\n  %0 = "uop.add"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n  return %0 : tensor<4xf32>\n}\n'

def opt(*args, input=b""):
  return subprocess.run([OPT, *args], input=input, capture_output=True, timeout=120)

def test_file_and_stdin_agree(tmp_path):
  f = tmp_path / "all.mlir"; f.write_text(ALL)
  a, b = opt(str(f)), opt("-", input=ALL.encode())
  assert a.returncode == b.returncode == 0 and a.stdout == b.stdout
  assert all(f'"uop.{n}"' in a.stdout.decode() for n in OPS)

def test_output_file(tmp_path):
  out = tmp_path / "out.mlir"
  r = opt("-", "-o", str(out), input=ADD.encode())
  assert r.returncode == 0 and r.stdout == b"" and '"uop.add"' in out.read_text()
  r = opt("-", "-o", str(tmp_path), input=ADD.encode())  # a directory
  assert r.returncode == 1 and b"cannot write" in r.stderr

def test_missing_input():
  r = opt("/nonexistent/x.mlir")
  assert r.returncode == 1 and b"cannot read /nonexistent/x.mlir" in r.stderr

def test_split_input_file(tmp_path):
  bad = 'func.func @g(%a: tensor<2x3xf32>) {\n  %0 = "uop.reshape"(%a) : (tensor<2x3xf32>) -> tensor<5xf32>\n  return\n}\n'
  f = tmp_path / "s.mlir"; f.write_text(ADD + "// -----\n" + bad + "// -----\n" + ADD.replace("@f", "@h"))
  r = opt(str(f), "--split-input-file")
  out, err = r.stdout.decode(), r.stderr.decode()
  assert r.returncode == 1 and out.count("// -----") == 1 and "@f" in out and "@h" in out and "@g" not in out
  assert f"{f}:7:8: error: 'uop.reshape' op reshape" in err  # line numbers count from the top of the file
  r = opt(str(f))  # without the flag the three chunks are one module: the bad one fails it all
  assert r.returncode == 1 and r.stdout == b""

def test_debuginfo_prints_locations(tmp_path):
  f = tmp_path / "loc.mlir"; f.write_text(ADD)
  r = opt(str(f), "--mlir-print-debuginfo", "-p", "uop-cse")
  assert r.returncode == 0 and f'loc("{f}":2:8)' in r.stdout.decode()
  assert b"loc(" not in opt(str(f)).stdout

def test_list_passes():
  r = opt("--list-passes")
  from morok_mlir.passes import PASSES
  assert r.returncode == 0 and all(p in r.stdout.decode() for p in PASSES) and b"upstream MLIR pass" in r.stdout

def test_pipeline_mixes_ours_and_upstream():
  r = opt("-", "-p", "builtin.module(uop-cse,uop-dce,canonicalize,func.func(cse))", input=ADD.encode())
  assert r.returncode == 0 and '"uop.add"' in r.stdout.decode()

BREAK = textwrap.dedent("""
  import sys
  from morok_mlir.passes.registry import register
  from morok_mlir.cli import main
  @register("uop-test-break", "moves the first op of the first function after the second: use before def", on_uops=False)
  def brk(module_op):
    ops = list(module_op.regions[0].blocks[0].operations[0].regions[0].blocks[0].operations)
    ops[0].move_after(ops[1])
  sys.exit(main(sys.argv[1:]))
""")

@pytest.mark.parametrize("verify", ["--verify-each", "--no-verify-each"])
def test_pass_leaving_invalid_ir(tmp_path, verify):
  """Invalid IR after a pass, with verification on or off, with locations printed: exit 1 and a message, no abort.
  Without verification the broken IR is still printed (generic form), for debugging."""
  f = tmp_path / "two.mlir"
  f.write_text('func.func @f(%a: f32) {\n  %0 = "uop.neg"(%a) : (f32) -> f32\n  %1 = "uop.neg"(%0) : (f32) -> f32\n  return\n}\n')
  r = subprocess.run([sys.executable, "-c", BREAK, str(f), verify, "--mlir-print-debuginfo", "-p", "uop-test-break,canonicalize"],
                     capture_output=True, timeout=60)
  assert r.returncode == 1 and b"does not dominate" in r.stderr, r.stderr[-500:]
  assert (b'"uop.neg"(%1)' in r.stdout) == (verify == "--no-verify-each")

# --- robustness, batched: one interpreter runs many inputs through cli.main; a signal names the last case started

HARNESS = textwrap.dedent("""
  import contextlib, io, json, sys, traceback
  from morok_mlir.cli import main
  for i, (path, args) in enumerate(json.load(open(sys.argv[1]))):
    print("START", i, flush=True)
    err = io.StringIO()
    try:
      with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err): rc = main([path, *args])
    except SystemExit as e: rc = e.code
    except BaseException: rc = "traceback: " + traceback.format_exc()[-400:]
    print("DONE", i, json.dumps([rc, err.getvalue()[:300]]), flush=True)
""")

def run_batch(tmp_path, cases: list[tuple[bytes, list]]):
  """-> [(rc, stderr)] per case; fails the test on a signal, a traceback or an exit 1 without a message."""
  spec = []
  for i, (data, args) in enumerate(cases):
    p = tmp_path / f"c{i}.mlir"; p.write_bytes(data); spec.append((str(p), args))
  (tmp_path / "cases.json").write_text(json.dumps(spec))
  r = subprocess.run([sys.executable, "-c", HARNESS, str(tmp_path / "cases.json")], capture_output=True, timeout=600)
  lines = r.stdout.decode().splitlines()
  started = [int(l.split()[1]) for l in lines if l.startswith("START")]
  assert r.returncode == 0, f"died with {r.returncode} on case {started[-1] if started else '?'}: {cases[started[-1]] if started else ''!r:.300}"
  res = [json.loads(l.split(" ", 2)[2]) for l in lines if l.startswith("DONE")]
  assert len(res) == len(cases)
  for (data, args), (rc, err) in zip(cases, res):
    assert rc in (0, 1), f"{rc!r} for {data[:200]!r} {args}"
    assert rc == 0 or "error" in err, f"exit 1 without a message for {data[:200]!r}"
  return res

BAD = [
  '%0 = "uop.nosuch"() : () -> f32', '%0 = "foo.bar"() : () -> f32', '"uop.add"() : () -> ()',
  '%0 = "uop.const"() : () -> f32', '%0 = "uop.const"() {value = "s"} : () -> f32', '%0 = "uop.const"() {value = unit} : () -> i1',
  '%0 = "uop.const"() {value = dense<1.0> : tensor<4xf32>} : () -> tensor<4xf32>', '%0 = "uop.const"() {value = 1 : i64} : () -> !uop.token',
  '%0 = "uop.const"() {value = 1 : i8} : () -> tensor<?xi8>', '%0 = "uop.const"() {value = 1 : i8} : () -> vector<[4]xi8>',
  '%0 = "uop.buffer"() {slot = 99999999999999999999999 : i64} : () -> f32', '%0 = "uop.buffer"() {slot = 1 : i2048} : () -> f32',
  '%0 = "uop.buffer"() {slot = 1 : i64} : () -> tensor<99999999999999999999xf32>',
  '%0 = "uop.buffer"() {slot = 0 : i64} : () -> !uop.ptr', '%0 = "uop.buffer"() {slot = 0 : i64} : () -> !uop.ptr<f32, f32>',
  '%0 = "uop.buffer"() {slot = 0 : i64} : () -> !uop.token<f32>', '%0 = "uop.buffer"() {slot = 0 : i64} : () -> !uop.nosuch',
  '%0 = "uop.buffer"() {slot = #uop.ptr<f32>} : () -> f32', '%0 = "uop.buffer"() ({ ^bb0: }) {slot = 0 : i64} : () -> f32',
  '%0 = "uop.buffer"() <{slot = 0 : i64}> : () -> f32', '%0:2 = "uop.buffer"() {slot = 0 : i64} : () -> (f32, f32)',
  '%0 = "uop.kernel"() {callee = "x", slots = array<i32: 1>} : () -> !uop.token',
  'func.func @f(%a: tensor<4x4xf32>) { %0 = "uop.permute"(%a) {order = array<f32: 1.0, 0.0>} : (tensor<4x4xf32>) -> tensor<4x4xf32> return }',
  'func.func @f(%a: tensor<4x4xf32>) { %0 = "uop.permute"(%a) {order = array<i64: 5, -1>} : (tensor<4x4xf32>) -> tensor<4x4xf32> return }',
  'func.func @f(%a: tensor<?x4xf32>) { %0 = "uop.permute"(%a) {order = array<i64: 1, 0>} : (tensor<?x4xf32>) -> tensor<4x?xf32> return }',
  'func.func @f(%a: f32) { %0 = "uop.bitcast"(%a) : (f32) -> !uop.token return }',
  'func.func @f() { %0 = "uop.barrier"(%0) : (!uop.token) -> !uop.token return }',
  'func.func @f(%a: f32) { %0 = "uop.add"(%a, %a) : (f32, f32) -> f32 loc(fused["a":1:2, callsite("b" at "c":3:4)]) return }',
  'module { module { func.func @f(%a: f32) { %0 = "uop.add"(%a, %a) : (f32, f32) -> f32 return } } }',
  '#map = affine_map<(d0) -> (d0', '{-#', '{-# dialect_resources: { builtin: { r: "0x0400" } } #-}', '"func.func"() ({}) : () -> ()',
  '%0 = "uop.const"() {value = 0xFFFFFFFFFF : f32} : () -> f32', '%0 = "uop.const"() {value = 1.0e99999 : f32} : () -> f32',
  '%0 = "uop.const"() {value = ' + "9" * 5000 + ' : i64} : () -> i64',  # MLIR parses digits in quadratic time
]
NESTED = ['"builtin.module"() ({' * 3000 + '}) : () -> ()' * 3000, "module {" * 3000 + "}" * 3000,
          '%0 = "uop.buffer"() {slot = 0 : i64} : () -> ' + "!uop.ptr<" * 20000 + "f32" + ">" * 20000,
          '%0 = "uop.const"() {value = 1 : i64, x = ' + "[" * 20000 + "]" * 20000 + '} : () -> i64',
          '#m = affine_map<(d0) -> (' + "(" * 40000 + "d0" + ")" * 40000 + ")>", "(" * 100000, "{" * 100000,
          '%0 = "uop.special"() {dim = "g", size = 4 : i64} : () -> index loc(' + "callsite(" * 40000 + '"a":1:1' + ' at "b":1:1)' * 40000 + ")"]

def test_robust_malformed_input(tmp_path):
  rnd = random.Random(0)
  mutated = []
  for _ in range(30):
    s = bytearray(ALL.encode())
    for _ in range(6): s[rnd.randrange(len(s))] = rnd.choice(b'()<>{}[]%"@:,x0#!^ \n')
    mutated.append(bytes(s))
  cases = [(ALL.encode()[:n], []) for n in range(0, len(ALL), 53)]  # truncated prefixes
  cases += [(b.encode(), a) for b in BAD for a in ([], ["--mlir-print-debuginfo"])]
  cases += [(n.encode(), []) for n in NESTED]
  cases += [(bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 500))), []) for _ in range(30)]  # random bytes
  cases += [(b"\xff\xfe\x00garbage", []), (b"\x00", []), (b"", []), ("// \u00e9\n".encode("latin-1"), []), (b"\xef\xbb\xbf" + ADD.encode(), [])]
  cases += [(m, a) for m in mutated for a in ([], ["--split-input-file", "--no-verify-each", "--mlir-print-debuginfo", "-p", "uop-dce,uop-cse,canonicalize"])]
  res = run_batch(tmp_path, cases)
  by = {c[0]: r for c, r in zip(cases, res)}
  assert by[b""] == [0, ""]
  assert by[NESTED[0].encode()][0] == 1 and f"deeper than {MAX_NESTING}" in by[NESTED[0].encode()][1]
  assert by[BAD[-1].encode()][0] == 1 and "number literal" in by[BAD[-1].encode()][1]
  assert "not UTF-8" in by[b"\xff\xfe\x00garbage"][1] and "NUL" in by[b"\x00"][1]
  assert sum(r[0] == 1 for r in res) > len(res) // 2  # most of these inputs are errors, each with a message

PIPES = ["canonicalize{max-iterations=-5}", "canonicalize{max-iterations=99999999999999999999}", "canonicalize{region-simplify=maybe}",
         "canonicalize{nosuch=1}", "func.func(canonicalize{max-iterations=abc})", "inline{default-pipeline=nosuch}",
         "inline{op-pipelines=func.func(nosuch)}", "cse{", "cse}", "func.func(cse))", "func.func(uop-cse)", "any(cse)",
         "builtin.module(cse", "uop-dce{x=1}", "uop-dce{=}", "uop-dce,,uop-cse", ",", "()", "{}", "func.func", "nosuch-pass",
         "convert-to-llvm", "convert-func-to-llvm", "gpu-lower-to-nvvm-pipeline", "one-shot-bufferize", "remove-dead-values",
         "symbol-dce,sccp,loop-invariant-code-motion", "uop-rangeify,uop-kernel-split,uop-lower-cpu", "uop-simplify"]

def test_robust_pipelines(tmp_path):
  cases = [(ALL.encode(), ["--split-input-file", *v, "-p", p]) for p in PIPES for v in ([], ["--no-verify-each", "--mlir-print-debuginfo"])]
  res = run_batch(tmp_path, cases)
  by = {tuple(c[1]): r for c, r in zip(cases, res)}
  assert by[("--split-input-file", "-p", "canonicalize{nosuch=1}")][0] == 1
  assert "unknown pass" not in by[("--split-input-file", "-p", "uop-simplify")][1]

def test_exit_codes_of_the_entry_point():
  """The installed script itself (not only main()): a signal would show as a negative return code."""
  for data, rc in ((ADD.encode(), 0), ('"builtin.module"() ({'.encode() * 5000, 1)):
    r = opt("-", input=data)
    assert r.returncode == rc and (rc == 0 or r.stderr.startswith(b"<stdin>")), r.stderr[:300]
