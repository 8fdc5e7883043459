"""morok-opt as a user runs it: input from a file or stdin, -o, --split-input-file, --mlir-print-debuginfo, exit codes,
and robustness: no input may end the process by a signal; each gives exit 0, or exit 1 with a diagnostic."""
import json, os, pathlib, random, re, subprocess, sys, textwrap, time
import pytest
from morok_mlir.dialects import OPS
from morok_mlir.dialects.ops import example_module
from morok_mlir.cli import MAX_NESTING, MAX_INPUT, check_input

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

@pytest.mark.parametrize("args", [["-p"], ["--bogus"], ["-o"], ["a.mlir", "b.mlir"], ["--pass-pipeline"]])
def test_bad_arguments_exit_1(args):
  """argparse would exit 2; every morok-opt error exits 1 with a message."""
  r = opt(*args)
  assert r.returncode == 1 and b"morok-opt: error: " in r.stderr, r.stderr

def test_input_size_limit():
  """An endless or huge input is refused after MAX_INPUT + 1 bytes instead of eating memory."""
  r = subprocess.run([OPT, "/dev/zero"], capture_output=True, timeout=60)
  assert r.returncode == 1 and r.stderr == b"/dev/zero: error: input larger than 64 MiB (the limit of morok-opt)\n", r.stderr
  assert opt("-", input=b" " * (MAX_INPUT + 1)).stderr.startswith(b"<stdin>: error: input larger than 64 MiB")

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
  from morok_mlir.ir.registry import register
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

# --- what MLIR's parser cannot take: each construct measured to crash (a signal), abort, or take quadratic time or
# exponential output (the sizes here crashed or took seconds to minutes before the guard); each is a located error

W = lambda attr: '%0 = "uop.const"() {value = 1 : i64, x = ' + attr + '} : () -> i64\n'
A = lambda body, dims="d0": W(f"affine_map<({dims}) -> ({body})>")
GUARDED = [  # (input, 'line:col: error: message' it gives)
  (W("0x" + "f" * 10**6), "1:42: error: hexadecimal literal of 1000000 digits (at most 4096)"),  # 66 s
  (W("0x" + "f" * 10**5 + " : f32"), "1:42: error: hexadecimal literal of 100000 digits"),
  (W("1." + "1" * 20000), "1:44: error: number literal of 20000 characters"),  # APFloat aborts
  (A("-" * 50000 + "d0"), "1:42: error: affine map longer than 1024 tokens"),  # SIGSEGV
  (A("d0" + " floordiv 2" * 300000), "1:42: error: affine map longer than 1024 tokens"),  # SIGSEGV
  (A("d0" + "".join(f" mod {i + 2}" for i in range(20000))), "1:42: error: affine map longer than 1024 tokens"),  # quadratic
  (A("d0", ", ".join(f"d{i}" for i in range(30000))), "1:42: error: affine map longer than 1024 tokens"),  # quadratic
  (W("affine_set<(d0) : (" + ", ".join(["d0 >= 0"] * 5000) + ")>"), "1:42: error: integer set longer than 1024 tokens"),
  ("func.func @f(%m: memref<4xf32>, %i: index) {\n  %0 = affine.load %m[" + "-" * 50000 + "%i] : memref<4xf32>\n  return\n}\n",
   "2:8: error: affine expression longer than 1024 tokens"),  # SIGSEGV
  (W("#sparse_tensor.encoding<{ map = (d0) -> (" + "-" * 50000 + "d0 : dense) }>"), "1:57: error: encoding map longer than 1024 tokens"),
  (W("tensor<" + "1x" * 30000 + "f32>"), "1:49: error: shape with more than 256 dimensions"),  # quadratic
  (W("tensor<4x?x" + "2x" * 300 + "f32>"), "1:53: error: shape with more than 256 dimensions"),
  (W("dense<[" + ", ".join(["1"] * 200) + "]> : tensor<200xi16777215>"), "1:663: error: integer type i16777215 is wider than 256 bits"),
  (W("dense<1> : tensor<2xsi4096>"), "1:62: error: integer type si4096 is wider than 256 bits"),
  ("#a0 = 1 : i64\n" + "".join(f"#a{i + 1} = [#a{i}, #a{i}]\n" for i in range(24)) + W("#a24"),
   "23:1: error: alias #a22 prints as at least 104865780 characters (at most 64 MiB)"),  # printing doubles per alias
  ("!t0 = f32\n" + "".join(f"!t{i + 1} = tuple<!t{i}, !t{i}>\n" for i in range(24)) + W("!t24"), "23:1: error: alias !t22 prints as at least"),
  ('"builtin.module"() ({' * 10000 + '}) : () -> ()' * 10000, "1:2705: error: nesting deeper than 256 levels"),
  ('// "(((\n%0 = "uop.const"() {value = 1 : i64, s = "' + "(" * 1000 + '", x = ' + "[" * 300 + "]" * 300 + "} : () -> i64\n",
   "2:1305: error: nesting deeper than 256 levels"),  # brackets in comments and strings do not count, positions do
]

def test_parser_limits(tmp_path):
  res = run_batch(tmp_path, [(t.encode(), []) for t, _ in GUARDED])
  for (text, want), (rc, err) in zip(GUARDED, res):
    assert rc == 1 and re.match(r"\S+\.mlir:\d+:\d+: error: ", err) and want in err, (want, err, text[:100])

LEGIT = """#map = affine_map<(d0, d1)[s0] -> (d0 * 4 + d1 floordiv 2 - s0 + -d1 mod 3)>
#set = affine_set<(d0)[s0] : (d0 - 1 >= 0, s0 - d0 == 0)>
#sp = #sparse_tensor.encoding<{ map = (d0, d1) -> (d0 floordiv 2 : dense, d1 : compressed, d0 mod 2 : dense) }>
#big = [#map, #map, #map]
!t = tuple<f32, !uop.token>
func.func @f(%m: memref<16xf32>, %i: index, %n: index, %w: memref<4x4xf32, affine_map<(d0, d1) -> (d0 * 4 + d1)>>) -> f32 {
  %c = arith.constant 0x7FC00000 : f32
  %big = arith.constant 123456789012345678901234567890 : i128
  %w2 = arith.constant 1 : i256
  %v = affine.load %m[%i * 2 + 1] : memref<16xf32>
  %a = affine.apply #map(%i, %n)[%n]
  affine.for %j = 0 to 16 step 2 {
    %x = affine.load %m[%j + symbol(%n) - 1] : memref<16xf32>
    affine.store %x, %m[-%j + 15] : memref<16xf32>
  }
  affine.if #set(%i)[%n] {
  }
  affine.parallel (%p, %q) = (0, 0) to (4, %n - 1) step (1, 2) {
  }
  %d = arith.constant dense<[1.0e+10, -2.5e-3, 0x7F800000]> : tensor<3xf32>
  return %v : f32
}
func.func @g() {
  %s = "uop.const"() {value = 1.0 : f32, x = #big, y = "((((<<<<[[[[", z = dense<"0xDEADBEEF"> : tensor<4xi8>} : () -> tensor<2x3x4x5x6x7xf32>
  return
}
"""

def test_parser_limits_keep_legit_input():
  r = opt("-", input=LEGIT.encode())
  assert r.returncode == 0 and b"affine.parallel" in r.stdout, r.stderr
  assert check_input("%0 = " + "(" * MAX_NESTING + ")" * MAX_NESTING) is None
  assert check_input(W("tensor<" + "1x" * 256 + "f32>")) is None and check_input(W("1." + "1" * 4096)) is None

def test_input_checks_are_linear():
  """The checks themselves: a regex retried at every digit of a 4096-digit run was quadratic (15 s for 1 MB), a
  Python loop per bracket 2 s per 4 MB. Four times the input must cost about four times the time (quadratic: 16x);
  a ratio, so a loaded machine does not fail it."""
  def best(text: str) -> float:
    ts = []
    for _ in range(3):
      t = time.perf_counter()
      assert check_input(text) is None
      ts.append(time.perf_counter() - t)
    return min(ts)
  for make in (lambda k: ("9" * (64 * k) + " ") * 256, lambda k: "()" * (32000 * k), lambda k: ("[" * 200 + "]" * 200) * (80 * k),
               lambda k: (A("d0 + " * 500 + "d0") + "\n") * (8 * k)):
    small, big = best(make(16)), best(make(64))
    assert big < 8 * small + 0.02, (make(1)[:50], small, big)

# --- element types the verifier accepts were TypeErrors inside passes; slots past the arguments KeyErrors; huge shapes
# failed when a pass re-parsed its output. Each input through each pass: exit 1 with a diagnostic at the op (line 2) or
# the function (line 1), never an internal error or a signal.

def _fn(ty: str, op: str = "add", n: int = 2) -> str:
  args, names = ", ".join(f"%a{i}: {ty}" for i in range(n)), ", ".join(f"%a{i}" for i in range(n))
  return f'func.func @f({args}) -> {ty} {{\n  %0 = "uop.{op}"({names}) : ({", ".join([ty] * n)}) -> {ty}\n  return %0 : {ty}\n}}\n'
BUF = 'func.func @f(%a: tensor<4xf32>) -> {1} {{\n  %0 = "uop.buffer"() {{slot = {0} : i64}} : () -> {1}\n  return %0 : {1}\n}}\n'
HOSTILE = {
  **{f"elem-{e}": _fn(f"tensor<4x{e}>") for e in ("i3", "i128", "f8E4M3FNUZ", "tf32", "f80", "f128",
                                                    "si32", "ui3", "i0", "complex<f32>", "vector<4xf32>", "!uop.token")},
  **{f"scalar-{e}": _fn(e) for e in ("tf32", "i128", "complex<f32>", "none")},
  "dynamic": _fn("tensor<?x4xf32>"), "dynamic-1": _fn("tensor<?xf32>", "neg", 1), "unranked": _fn("tensor<*xf32>"),
  "scalable": _fn("vector<[4]xf32>"), "vector-2d": _fn("vector<2x4xf32>"), "encoding": _fn('tensor<4xf32, "enc">'),
  "memref-space": _fn("memref<4xf32, 3>"), "memref-strided": _fn("memref<4xf32, strided<[2]>>"), "tuple": _fn("tuple<f32>"),
  "huge": _fn("tensor<99999999999x99999999999xf32>"), "huge-bytes": _fn("tensor<4611686018427387904xf32>"),
  "ptr-tf32": _fn("!uop.ptr<tf32>", "detach", 1),
  "slot-99999": BUF.format(99999, "tensor<4xf32>"), "slot-negative": BUF.format(-1, "tensor<4xf32>"),
  "slot-type": BUF.format(0, "tensor<8xf32>"), "slot-no-args": BUF.format(0, "tensor<4xf32>").replace("%a: tensor<4xf32>", ""),
  "unused-arg-tf32": 'func.func @f(%a: tensor<4xtf32>) {\n  %0 = "uop.const"() {value = 1.0 : f32} : () -> tensor<4xf32>\n  return\n}\n',
  "result-tf32": 'func.func @f(%a: tensor<4xtf32>) -> tensor<4xtf32> {\n  "uop.sink"() : () -> ()\n  return %a : tensor<4xtf32>\n}\n',
}
# valid but odd: each pass takes them (exit 0) or refuses them with a located diagnostic (exit 1)
EDGE = {"rank-0": _fn("tensor<f32>"), "one": _fn("tensor<1xf32>"), "bool": _fn("tensor<4xi1>", "and"), "index": _fn("tensor<4xindex>"),
        "ui64": _fn("tensor<4xui64>", "mul"), "f16": _fn("tensor<3xf16>", "exp2", 1), "4-TiB": _fn("tensor<100000x100000x100xf32>"),
        "2^47-bytes": _fn("tensor<35184372088832xf32>"), "scalar": _fn("f32"), "vector": _fn("vector<4xf32>"), "memref": _fn("memref<4xf32>"),
        "rank-256": _fn("tensor<" + "1x" * 256 + "f32>"), "shl-float": _fn("tensor<4xf32>", "shl"), "sin-int": _fn("tensor<4xi32>", "sin", 1),
        "threefry": _fn("tensor<4xui64>", "threefry"), "declaration": "func.func private @ext(tensor<4xf32>) -> tensor<4xf32>\n",
        "unused-tf32-no-uop": "func.func @f(%a: tensor<4xtf32>) {\n  return\n}\n",
        "upstream-op": ADD.replace('"uop.add"(%a, %a) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>', "arith.addf %a, %a : tensor<4xf32>"),
        "slot-ok": BUF.format(0, "tensor<4xf32>"), "empty": _fn("tensor<0x4xf32>"),
        "fp8": _fn("tensor<4xf8E4M3FN>"), "fp8-scalar": _fn("f8E5M2"),
        "two-functions": _fn("tensor<4xf32>") + _fn("tensor<4xf32>").replace("@f", "@g")}
PIPELINES = ["", "uop-rangeify", "uop-simplify", "uop-rangeify,uop-kernel-split", "uop-rangeify,uop-kernel-split,uop-optimize",
             "uop-rangeify,uop-simplify,uop-kernel-split,uop-optimize,uop-lower-cpu", "uop-rangeify,uop-kernel-split,uop-lower-gpu",
             "uop-dce", "uop-cse"]
LOCATED = re.compile(r"\S+\.mlir:[1-9]\d*:\d+: error: ")

@pytest.mark.parametrize("pipeline", PIPELINES, ids=[p.split(",")[-1] or "parse" for p in PIPELINES])
def test_hostile_types_through_passes(tmp_path, pipeline):
  cases = {**{k: (v, 1) for k, v in HOSTILE.items()}, **{k: (v, None) for k, v in EDGE.items()}}
  res = run_batch(tmp_path, [(t.encode(), ["-p", pipeline] if pipeline else []) for t, _ in cases.values()])
  for (name, (text, want)), (rc, err) in zip(cases.items(), res):
    assert rc == (want if want is not None else rc) and (rc == 0 or LOCATED.match(err)) and "internal error" not in err, (name, rc, err)
    if want: assert re.match(r"\S+\.mlir:[12]:\d+: error: '(uop\.\w+|func\.func)' op ", err), (name, err)  # from verify.py, at the op

def test_deep_graph(tmp_path):
  """A 20,000-op chain: parsed, verified and compiled without recursion (rangeify segfaulted on it)."""
  n = 20000
  f = tmp_path / "chain.mlir"
  ops = "".join(f'  %v{i + 1} = "uop.neg"(%v{i}) : (tensor<4xf32>) -> tensor<4xf32>\n' for i in range(n))
  f.write_text(f"func.func @f(%v0: tensor<4xf32>) -> tensor<4xf32> {{\n{ops}  return %v{n} : tensor<4xf32>\n}}\n")
  assert opt(str(f)).returncode == 0
  r = opt(str(f), "-p", PIPELINES[5])
  assert r.returncode == 0 and b"scf.for" in r.stdout, r.stderr[-500:]

def test_reader_that_stops_early_ends_it_quietly():
  """`morok-opt --list-passes | head -0`: the closed pipe ends it with status 1 and no traceback."""
  r, w = os.pipe()
  os.close(r)   # the reader is gone before anything is written
  p = subprocess.run([sys.executable, "-m", "morok_mlir.cli", "--list-passes"], stdout=w, stderr=subprocess.PIPE, text=True, timeout=120)
  os.close(w)
  assert "Traceback" not in p.stderr and p.returncode == 1, p.stderr

def test_version():
  r = opt("--version")
  assert r.returncode == 0 and re.match(rb"morok-opt \(morok-mlir \S+\):\n  MLIR version 22\.", r.stdout), r.stdout

def test_ir_dumps_name_the_input_file(tmp_path):
  """--mlir-print-ir-after-all with --mlir-print-debuginfo: the dumps' locations are the input's, under its name."""
  f = tmp_path / "g.mlir"; f.write_text(ADD)
  r = opt(str(f), "-p", "uop-rangeify", "--mlir-print-ir-after-all", "--mlir-print-debuginfo")
  assert r.returncode == 0 and b"IR Dump After UopRangeify (uop-rangeify)" in r.stderr, r.stderr
  locs = set(re.findall(rb'loc\("([^"]*)":(\d+)', r.stderr))
  assert locs and all(n == str(f).encode() and int(l) <= 4 for n, l in locs), locs

def test_graph_printout_has_only_the_users_lines():
  """Tensor.mlir's graph, morok-opt's input: the function, its arguments, its ops and its return are at the user's lines,
  none at a line of the text printed for MLIR."""
  from mlir import ir
  from morok_mlir import Tensor
  from morok_mlir.dialects import new_context
  t = (Tensor([1.0, 2.0, 3.0]) * 2 + 1).sum()
  with new_context():
    m = ir.Module.parse(t.mlir("graph", debuginfo=True))
    ops = []
    m.body.operations[0].operation.walk(lambda op: (ops.append(op), ir.WalkResult.ADVANCE)[1], ir.WalkOrder.PRE_ORDER)
    args = list(m.body.operations[0].regions[0].blocks[0].arguments)
    # (a node equal to one built earlier, a constant, is that one: shared by hash-consing, with its first creator's line)
    assert len(ops) > 3 and all(x.location.filename.endswith(".py") for x in ops + args), [str(x.location) for x in ops + args]
    assert [x for x in ops if x.name == "uop.reduce_axis" and x.location.filename == __file__], [str(x.location) for x in ops]
