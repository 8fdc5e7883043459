"""Schedules kept on disk (realize.save_plan / load_plan): a process whose graphs were all compiled before runs them
without importing MLIR, LLVM or Z3, with the same numbers; a damaged or foreign entry is ignored and compiled again."""
import glob, json, os, subprocess, sys, textwrap
from morok_mlir.device.cpu import DiskCache

SCRIPT = textwrap.dedent("""
  import json, sys, numpy as np
  from morok_mlir import Tensor, TinyJit, Variable
  data = lambda *shape, k=1: np.sin(np.arange(np.prod(shape), dtype=np.float32) * 0.37 * k).reshape(shape)   # (numpy.random imports OpenSSL)
  x, w = data(24, 40), data(40, 56, k=2)
  out = [((Tensor(x) @ Tensor(w)).relu().sum(1) * 0.5).numpy().tolist()]
  rows = Variable("rows", 1, 24)   # a product of symbolic rows: copies compiled for narrower bounds (realize.Variants)
  out += [(Tensor(x)[:rows.bind(n)] @ Tensor(w)).numpy().tolist() for n in (3, 24)]
  cache = Tensor.zeros(8, 16).contiguous().realize()
  v = Variable("pos", 0, 7)
  @TinyJit
  def step(row, pos):   # a jitted write at a bound position, as an LLM's KV cache is written
    cache[pos:pos + 1] = row
    cache.realize()
    return cache[:pos + 1].sum(0).realize()
  for p in range(5): out.append(step(Tensor(data(1, 16, k=p + 3)), v.bind(p)).numpy().tolist())
  x = Tensor(data(1, 16, 4, 4))   # concatenations as densenet's: a copy dropped, its source a view (uop-elide-copies)
  c1 = x.cat(x.conv2d(Tensor(data(16, 16, 1, 1, k=5))), dim=1)
  c2 = c1.cat(c1.conv2d(Tensor(data(16, 32, 1, 1, k=6))), dim=1)
  out.append(c2.conv2d(Tensor(data(8, 48, 1, 1, k=7))).numpy().tolist())
  maps = open("/proc/self/maps").read()
  print(json.dumps([out, "mlir" in sys.modules or "z3" in sys.modules or any(n in maps for n in ("libMLIR", "libLLVM", "libz3")),
                    [m for m in ("_hashlib", "importlib.metadata", "numpy.random") if m in sys.modules] + ["libcrypto"] * ("libcrypto" in maps)]))
""")

def run(cache) -> tuple[list, bool, bool]:
  """(the numbers, whether the process loaded MLIR, LLVM or Z3 in any way, the modules it loaded that it needs not)."""
  env = {**os.environ, "MOROK_CACHE_DIR": str(cache), "MOROK_DISK_CACHE": "1", "DEBUG": "0"}
  p = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
  assert p.returncode == 0, p.stderr
  return tuple(json.loads(p.stdout.splitlines()[-1]))

def test_warm_process_runs_without_the_compiler(tmp_path):
  cold, loaded, _ = run(tmp_path)
  plans = [json.load(open(p)) for p in glob.glob(str(tmp_path / "*.plan"))]
  assert loaded and any(it[4] for d in plans for it in d["items"])   # (a kernel with copies among them)
  assert any(d["views"] for d in plans)
  warm, loaded, extra = run(tmp_path)
  assert not loaded and warm == cold
  assert not extra   # (OpenSSL: ~3.4 MB mapped, for sums CPython's own SHA-256 makes; importlib.metadata ~5 MB, for versions)

def _rewrite(path: str, data: bytes, sum_too: bool = True) -> None:
  with open(path, "wb") as f: f.write(data)
  if sum_too:
    key = os.path.basename(path)[:-5]
    with open(path[:-5] + ".sum", "wb") as f: f.write(DiskCache.digest(key, data))

def _slot_out_of_range(d: dict) -> dict:
  d["items"][0][1][0] = len(d["buffers"]) + 3
  return d

def _views_moved(b: bytes, by: int) -> bytes:
  """A plan with views, each moved by `by` elements (out of its buffer, or off its alignment); any other unchanged."""
  if not (d := json.loads(b))["views"]: return b
  return json.dumps({**d, "views": [[s, dst, o + by] for s, dst, o in d["views"]]}).encode()

DAMAGE = {   # each: a plan's bytes -> damaged bytes, and whether its sum is made to match them (a mismatched sum is damage too)
  "view-outside": (lambda b: _views_moved(b, 1 << 20), True),
  "view-unaligned": (lambda b: _views_moved(b, 1), True),
  "garbage": (lambda b: b"\x00not json" + b[:40], True),
  "truncated": (lambda b: b[:len(b) // 2], False),
  "other-version": (lambda b: json.dumps({**json.loads(b), "version": 0}).encode(), True),
  "slot-out-of-range": (lambda b: json.dumps(_slot_out_of_range(json.loads(b))).encode(), True),
  "wrong-types": (lambda b: json.dumps({**json.loads(b), "n_in": "2"}).encode(), True),
  "kernel-gone": (lambda b: json.dumps({**json.loads(b), "kernels": [["0" * 40, k[1]] for k in json.loads(b)["kernels"]]}).encode(), True),
}

def test_damaged_plans_are_compiled_again(tmp_path):
  want, _, _ = run(tmp_path)
  plans = sorted(glob.glob(str(tmp_path / "*.plan")))
  good = {p: open(p, "rb").read() for p in plans}
  for kind, (f, sum_too) in DAMAGE.items():
    for p, b in good.items(): _rewrite(p, f(b), sum_too)
    got, loaded, _ = run(tmp_path)
    assert got == want and loaded, kind   # compiled, the right numbers
    assert {p: open(p, "rb").read() for p in plans} == good, kind   # and each entry written again as it was
