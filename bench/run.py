"""morok-mlir vs numpy vs PyTorch (eager) on the CPU, in one process, 2 threads each.

  python bench/run.py [--beam N] [workload ...]   workloads: ew sum softmax mm1024 mm2048 conv mlp overhead gather
                                          layernorm sort attention train trainmlp traincnn minilm compile symbolic
                                          (or a row's letter: d = mm1024 mm2048, e = conv, f = mlp, ...)
                                          light (onnx's nine light models against onnxruntime), light_<model> (one)
                                          coldlight, coldlight_<model> (each one's first call in a new process, empty cache)
                                          onnxcf (small control-flow/state/int8 ONNX models against onnxruntime), onnxcf_<model>

--beam N adds a "searched" line under the matmul, conv and MLP rows: their kernels searched with BEAM=N (the search's
own time, then heuristic and searched timed alternately in rounds, medians) and the attributes the search chose.

Each timing is the median of >= 7 runs after warm-up, each library in its own block after a pause (see blocks());
morok's is `.realize()` (the result computed into its buffer, as numpy and torch return theirs; `.numpy()` of a
temporary hands that buffer over, row a measures it too). numpy's OpenBLAS is run without OPENBLAS_CORETYPE (a machine
setting that pins it to an older kernel); the machine's limits (copy bandwidth, fp32 FMA peak) are measured here too."""
import os, sys, time, subprocess, statistics, platform, datetime
os.environ.pop("OPENBLAS_CORETYPE", None)   # numpy must use the kernel a user's machine would pick
THREADS = 2
for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"): os.environ[v] = str(THREADS)
# idle threads sleep instead of spinning: three libraries' pools share 2 cores in this process
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("MOROK_THREADS", str(THREADS))
import numpy as np
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from morok_mlir import Tensor
from morok_mlir.host import CACHES, CPU_NAME, VEC_WIDTH
from morok_mlir.core.progress import progress, write
try:
  import torch
  torch.set_num_threads(THREADS)
except ImportError: torch = None

RUNS, WARM = 7, 2
def timeit(fn, runs=RUNS, warm=WARM, best=False) -> float:
  """Median (or best) seconds of fn() over runs calls, after >= warm calls and >= 0.2 s of them (caches, clocks)."""
  t0, n = time.perf_counter(), 0
  while n < warm or time.perf_counter() - t0 < 0.2: fn(); n += 1
  ts = []
  for _ in range(runs):
    t0 = time.perf_counter(); fn(); ts.append(time.perf_counter() - t0)
  return min(ts) if best else statistics.median(ts)

def blocks(fns: dict, runs: int, extra: dict | None = None) -> dict:
  """Median seconds per function, each timed in its own block after a pause: OpenBLAS's and OpenMP's workers spin
  for tens of ms after a call, and would halve the speed of whichever library runs next on these 2 cores."""
  out = {}
  for k in ("morok", "numpy", "torch"):
    if k in fns: time.sleep(0.3); out[k] = timeit(fns[k], runs=runs)
    else: out[k] = None
  for k, fn in (extra or {}).items(): time.sleep(0.3); out[k] = timeit(fn, runs=runs)
  return out

# ---------------------------------------------------------------- machine limits
def copy_bandwidth() -> float:
  """GB/s (read + write) of a 2-thread copy of 2 x 64 MiB; numpy releases the GIL in copyto."""
  import threading
  src, dst = np.ones(1 << 25, np.float32), np.zeros(1 << 25, np.float32)
  def run():
    h = len(src) // THREADS
    ts = [threading.Thread(target=np.copyto, args=(dst[i * h:(i + 1) * h], src[i * h:(i + 1) * h])) for i in range(THREADS)]
    for t in ts: t.start()
    for t in ts: t.join()
  return 2 * src.nbytes / timeit(run, runs=9, best=True) / 1e9   # a limit: the best run

PEAK_MLIR = """module { func.func @peak(%n: index, %out: memref<64xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %a = arith.constant dense<1.0000001> : vector<W>
  INITS
  %r:12 = scf.for %i = %c0 to %n step %c1 iter_args(%x0 = %z0, %x1 = %z1, %x2 = %z2, %x3 = %z3, %x4 = %z4, %x5 = %z5, %x6 = %z6,
      %x7 = %z7, %x8 = %z8, %x9 = %z9, %x10 = %z10, %x11 = %z11) -> (vector<W>, vector<W>, vector<W>, vector<W>, vector<W>, vector<W>, vector<W>,
      vector<W>, vector<W>, vector<W>, vector<W>, vector<W>) {
    FMAS
    scf.yield %y0, %y1, %y2, %y3, %y4, %y5, %y6, %y7, %y8, %y9, %y10, %y11 : vector<W>, vector<W>, vector<W>, vector<W>, vector<W>,
      vector<W>, vector<W>, vector<W>, vector<W>, vector<W>, vector<W>, vector<W>
  }
  SUMS
  vector.store %s11, %out[%c0] : memref<64xf32>, vector<W>
  return } }"""
def fma_peak() -> float:
  """GFLOP/s of 12 independent vector FMA chains per thread at the CPU's native width, THREADS threads."""
  import threading
  from mlir import ir
  from mlir.passmanager import PassManager
  from mlir.execution_engine import ExecutionEngine
  from morok_mlir.host import VEC_WIDTH
  w = f"{VEC_WIDTH}xf32"
  src = PEAK_MLIR.replace("FMAS", "\n    ".join(f"%y{i} = vector.fma %a, %x{i}, %a : vector<W>" for i in range(12)))
  # every chain reaches the stored sum: a chain whose result is unused is deleted by LLVM and would count as free flops
  src = src.replace("SUMS", "\n  ".join(["%s0 = arith.addf %r#0, %r#0 : vector<W>"] + [f"%s{i} = arith.addf %s{i - 1}, %r#{i} : vector<W>" for i in range(1, 12)]))
  src = src.replace("INITS", "\n  ".join(f"%z{i} = arith.constant dense<{i}.5> : vector<W>" for i in range(12))).replace("W", w)
  with ir.Context():
    m = ir.Module.parse(src)
    PassManager.parse("builtin.module(convert-scf-to-cf,convert-vector-to-llvm,convert-arith-to-llvm,convert-cf-to-llvm,"
                      "convert-func-to-llvm{use-bare-ptr-memref-call-conv=1},reconcile-unrealized-casts)").run(m.operation)
    ee = ExecutionEngine(m, opt_level=3)
    import ctypes
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(ee.raw_lookup("peak"))   # packed: void _mlir_peak(void **args)
  n, outs = 20_000_000, [np.zeros(64, np.float32) for _ in range(THREADS)]
  vals = [(ctypes.c_void_p * 2)(n, o.ctypes.data) for o in outs]
  packs = [(ctypes.c_void_p * 2)(ctypes.addressof(v), ctypes.addressof(v) + 8) for v in vals]
  def run():
    ts = [threading.Thread(target=fn, args=(p,)) for p in packs]
    for t in ts: t.start()
    for t in ts: t.join()
  return THREADS * n * 12 * VEC_WIDTH * 2 / timeit(run, runs=5, warm=1, best=True) / 1e9

READ_MLIR = """module { func.func @rd(%a: memref<NxBf32>, %out: memref<64xf32>, %lo: index, %hi: index) {
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %z = arith.constant dense<0.0> : vector<Wxf32>
  %r:4 = scf.for %i = %lo to %hi step %c4 iter_args(%x0 = %z, %x1 = %z, %x2 = %z, %x3 = %z) -> (vector<Wxf32>, vector<Wxf32>, vector<Wxf32>, vector<Wxf32>) {
    %i1 = arith.addi %i, %c1 : index
    %i2 = arith.addi %i1, %c1 : index
    %i3 = arith.addi %i2, %c1 : index
    %v0 = vector.load %a[%i, %c0] : memref<NxBf32>, vector<Wxf32>
    %v1 = vector.load %a[%i1, %c0] : memref<NxBf32>, vector<Wxf32>
    %v2 = vector.load %a[%i2, %c0] : memref<NxBf32>, vector<Wxf32>
    %v3 = vector.load %a[%i3, %c0] : memref<NxBf32>, vector<Wxf32>
    %y0 = arith.addf %x0, %v0 : vector<Wxf32>
    %y1 = arith.addf %x1, %v1 : vector<Wxf32>
    %y2 = arith.addf %x2, %v2 : vector<Wxf32>
    %y3 = arith.addf %x3, %v3 : vector<Wxf32>
    scf.yield %y0, %y1, %y2, %y3 : vector<Wxf32>, vector<Wxf32>, vector<Wxf32>, vector<Wxf32>
  }
  %s0 = arith.addf %r#0, %r#1 : vector<Wxf32>
  %s1 = arith.addf %r#2, %r#3 : vector<Wxf32>
  %s = arith.addf %s0, %s1 : vector<Wxf32>
  vector.store %s, %out[%c0] : memref<64xf32>, vector<Wxf32>
  return } }"""
def read_bandwidth() -> float:
  """GB/s of a 2-thread vector read (sum) of 64 MiB: the limit of read-only kernels (copy also writes)."""
  import threading, ctypes
  from mlir import ir
  from mlir.passmanager import PassManager
  from mlir.execution_engine import ExecutionEngine
  from morok_mlir.host import VEC_WIDTH
  from morok_mlir.device.cpu import LLVM_PIPELINE
  n = (1 << 24) // VEC_WIDTH
  src = READ_MLIR.replace("%c1 = ", "%c0 = arith.constant 0 : index\n  %c1 = ", 1).replace("NxB", f"{n}x{VEC_WIDTH}x").replace("W", str(VEC_WIDTH))
  with ir.Context():
    m = ir.Module.parse(src)
    PassManager.parse(LLVM_PIPELINE).run(m.operation)
    ee = ExecutionEngine(m, opt_level=3)
    fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(ee.raw_lookup("rd"))
  a, outs = np.ones(1 << 24, np.float32), [np.zeros(64, np.float32) for _ in range(THREADS)]
  vals = [(ctypes.c_void_p * 4)(a.ctypes.data, o.ctypes.data, t * n // THREADS, (t + 1) * n // THREADS) for t, o in enumerate(outs)]
  packs = [(ctypes.c_void_p * 4)(*[ctypes.addressof(v) + 8 * i for i in range(4)]) for v in vals]
  def run():
    ts = [threading.Thread(target=fn, args=(p,)) for p in packs]
    for t in ts: t.start()
    for t in ts: t.join()
  return a.nbytes / timeit(run, runs=9, best=True) / 1e9

# ---------------------------------------------------------------- workloads
R = np.random.default_rng(0)
def rnd(*shape): return R.standard_normal(shape, dtype=np.float32)
def tt(a): return torch.from_numpy(a) if torch is not None else None

def w_ew():
  a, b, c = rnd(1 << 24), rnd(1 << 24), rnd(1 << 24)
  A, B, C = Tensor(a), Tensor(b), Tensor(c)
  ta, tb, tc = tt(a), tt(b), tt(c)
  return dict(name="a. elementwise exp(relu(a*b+c)*2-a) 16M", bytes=4 * 4 * a.size,
    morok=lambda: ((A * B + C).relu() * 2 - A).exp().realize(),
    numpy=lambda: np.exp(np.maximum(a * b + c, 0) * 2 - a),
    torch=lambda: torch.exp(torch.relu(ta * tb + tc) * 2 - ta), tol=1e-5,
    extra={".numpy() of the same (no second pass)": lambda: ((A * B + C).relu() * 2 - A).exp().numpy()})
def w_sum():
  a = rnd(1 << 24); A, ta = Tensor(a), tt(a)
  return dict(name="b. sum 16M", bytes=4 * a.size, read_only=True, morok=lambda: A.sum().realize(), numpy=lambda: a.sum(), torch=lambda: ta.sum(), tol=1e-3)
def w_softmax():
  a = rnd(4096, 4096); A, ta = Tensor(a), tt(a)
  def np_softmax():
    e = np.exp(a - a.max(1, keepdims=True)); return e / e.sum(1, keepdims=True)
  return dict(name="c. softmax rows 4096x4096", bytes=2 * 4 * a.size, morok=lambda: A.softmax(1).realize(), numpy=np_softmax,
              torch=lambda: torch.softmax(ta, 1), tol=1e-5)
def w_mm(n):
  def f():
    a, b = rnd(n, n), rnd(n, n); A, B, ta, tb = Tensor(a), Tensor(b), tt(a), tt(b)
    return dict(name=f"d. matmul {n}^3", flops=2 * n ** 3, morok=lambda: (A @ B).realize(), numpy=lambda: a @ b, torch=lambda: ta @ tb, tol=1e-3)
  return f
def w_conv():
  x, w = rnd(8, 64, 56, 56), rnd(64, 64, 3, 3) * 0.05
  X, W, tx, tw = Tensor(x), Tensor(w), tt(x), tt(w)
  def np_conv():  # im2col with a strided view + one BLAS matmul
    win = np.lib.stride_tricks.sliding_window_view(np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), axis=(2, 3))
    return np.tensordot(w, win, axes=([1, 2, 3], [1, 4, 5])).transpose(1, 0, 2, 3)
  return dict(name="e. conv2d 8x64x56x56 * 64x64x3x3 p1", flops=2 * 8 * 64 * 56 * 56 * 64 * 9,
    morok=lambda: X.conv2d(W, padding=1).realize(), numpy=np_conv,
    torch=lambda: torch.nn.functional.conv2d(tx, tw, padding=1), tol=1e-3)
MLP_SHAPES = ((256, 784), (784, 512), (512,), (512, 10), (10,))
def w_mlp():
  x, w1, b1, w2, b2 = (rnd(*s) * (0.05 if i else 1) for i, s in enumerate(MLP_SHAPES))
  ts = [tt(v) for v in (x, w1, b1, w2, b2)]
  Ts = [Tensor(v) for v in (x, w1, b1, w2, b2)]
  from morok_mlir import TinyJit
  jitted = TinyJit(mlp)
  def np_mlp():
    h = np.maximum(x @ w1 + b1, 0) @ w2 + b2
    m = h - h.max(1, keepdims=True); return m - np.log(np.exp(m).sum(1, keepdims=True))
  return dict(name="f. MLP 256x784 -> 512 -> 10", flops=2 * 256 * (784 * 512 + 512 * 10),
    morok=lambda: mlp(*Ts).realize(), numpy=np_mlp,
    torch=lambda: torch.log_softmax(torch.relu(ts[0] @ ts[1] + ts[2]) @ ts[3] + ts[4], 1), tol=1e-4,
    extra={"TinyJit replay of the same": lambda: jitted(*Ts), "building its lazy graph only (no realize)": lambda: mlp(*Ts)})
def mlp(x, w1, b1, w2, b2): return ((x @ w1 + b1).relu() @ w2 + b2).log_softmax(axis=1)
def w_train():
  """One SGD step of the MLP (f) on a cross-entropy loss: forward, backward and the update of the four parameters.
  morok: the lazy backward and update realized in one call; numpy: the backward written out; torch: autograd."""
  x, *ws = (rnd(*s) * (0.05 if i else 1) for i, s in enumerate(MLP_SHAPES))
  y, lr = np.random.default_rng(1).integers(0, 10, 256), 0.01
  X, Y, P = Tensor(x), Tensor(y.astype(np.int32)), [Tensor(w, requires_grad=True) for w in ws]
  def morok_step():
    for p in P: p.grad = None
    ((X @ P[0] + P[1]).relu() @ P[2] + P[3]).cross_entropy(Y).backward()
    with Tensor.test():
      for p in P: p.assign(p - lr * p.grad)
    return Tensor.realize(*P)   # the first parameter, all realized
  nw, oh = [w.copy() for w in ws], np.eye(10, dtype=np.float32)[y]
  def np_step():
    w1, b1, w2, b2 = nw
    h = x @ w1 + b1; a = np.maximum(h, 0); z = a @ w2 + b2
    e = np.exp(z - z.max(1, keepdims=True)); dz = (e / e.sum(1, keepdims=True) - oh) / len(x)
    dh = (dz @ w2.T) * (h > 0)
    for w, g in zip(nw, (x.T @ dh, dh.sum(0), a.T @ dz, dz.sum(0))): w -= lr * g
    return w1
  tw = [torch.tensor(w, requires_grad=True) for w in ws] if torch is not None else None
  tx, ty = tt(x), torch.from_numpy(y) if torch is not None else None
  def torch_step():
    loss = torch.nn.functional.cross_entropy(torch.relu(tx @ tw[0] + tw[1]) @ tw[2] + tw[3], ty)
    with torch.no_grad():
      for w, g in zip(tw, torch.autograd.grad(loss, tw)): w -= lr * g
    return tw[0]
  from morok_mlir import TinyJit
  from morok_mlir.nn.optim import SGD
  JP = [Tensor(w, requires_grad=True) for w in ws]
  opt = SGD(JP, lr=lr)
  @TinyJit
  def jit_step(xb: Tensor, yb: Tensor) -> Tensor:
    opt.zero_grad()
    loss = ((xb @ JP[0] + JP[1]).relu() @ JP[2] + JP[3]).cross_entropy(yb).backward()
    Tensor.realize(loss, *opt.schedule_step())
    return loss
  def jitted():
    with Tensor.train(): return jit_step(X, Y)
  return dict(name="k. MLP (f) SGD step: fwd + bwd + update", flops=3 * 2 * 256 * (784 * 512 + 512 * 10),
              morok=morok_step, numpy=np_step, torch=torch_step, tol=1e-4, extra={"TinyJit replay of the same (nn.optim.SGD)": jitted})
def _adam_step(name: str, model, tmodel, x: np.ndarray, y: np.ndarray, lr: float = 1e-3) -> dict:
  """One Adam step (forward, cross-entropy, backward, update) of model under TinyJit (its replay: what a training loop
  runs) and of the same torch.nn model in eager mode; the name gets the kernels of morok's step."""
  from morok_mlir import TinyJit
  from morok_mlir.nn.optim import Adam
  from morok_mlir.nn.state import get_parameters
  from morok_mlir.realize import GlobalCounters
  opt = Adam(get_parameters(model), lr=lr)
  X, Y = Tensor(x), Tensor(y.astype(np.int32))
  @TinyJit
  def step(xb: Tensor, yb: Tensor) -> Tensor:
    opt.zero_grad()
    loss = model(xb).cross_entropy(yb).backward()
    Tensor.realize(loss, *opt.schedule_step())
    return loss
  def morok_step():
    with Tensor.train(): return step(X, Y)
  for _ in range(3): morok_step()
  GlobalCounters.reset(); morok_step()
  w = dict(name=f"{name} ({GlobalCounters.kernel_count} kernels)", morok=morok_step, tol=0)
  if torch is not None:
    topt, tx, ty = torch.optim.Adam(tmodel.parameters(), lr=lr), tt(x), torch.from_numpy(y.astype(np.int64))
    def torch_step():
      topt.zero_grad()
      loss = torch.nn.functional.cross_entropy(tmodel(tx), ty)
      loss.backward(); topt.step()
      return loss
    w["torch"] = torch_step
  return w
def w_train_mlp():
  from morok_mlir.nn import Linear
  class MLP:
    def __init__(self): self.l1, self.l2 = Linear(784, 512), Linear(512, 10)
    def __call__(self, x): return self.l2(self.l1(x).relu())
  tm = torch.nn.Sequential(torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)) if torch is not None else None
  return _adam_step("o. MLP (f) Adam step, jit", MLP(), tm, rnd(256, 784), np.random.default_rng(2).integers(0, 10, 256))
def w_train_cnn():
  sys.path.insert(0, os.path.join(ROOT, "examples"))
  from train_digits import DigitsCNN, data
  xtr, ytr, _, _ = data()
  tm = torch.nn.Sequential(torch.nn.Conv2d(1, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Conv2d(16, 32, 3, padding=1),
                           torch.nn.ReLU(), torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(128, 10)) if torch is not None else None
  return _adam_step("p. digits CNN Adam b64, jit", DigitsCNN(), tm, xtr[:64], ytr[:64])
def w_gather():
  tab, ids = rnd(30522, 384), np.random.default_rng(0).integers(0, 30522, (32, 128)).astype(np.int32)
  T, I, tt_, ti = Tensor(tab), Tensor(ids), tt(tab), tt(ids.astype(np.int64))
  out = 4 * 32 * 128 * 384
  return dict(name="j. embedding gather 30522x384[32x128]", bytes=2 * out,
              morok=lambda: T.gather(0, I.reshape(-1, 1).expand(-1, 384)).reshape(32, 128, 384).realize(),
              numpy=lambda: np.take(tab, ids, axis=0), torch=lambda: torch.nn.functional.embedding(ti, tt_), tol=0)
def w_layernorm():
  a = rnd(4096, 1024); A, ta = Tensor(a), tt(a)
  def np_ln():
    y = a - a.mean(-1, keepdims=True); return y / np.sqrt((y * y).mean(-1, keepdims=True) + 1e-5)
  return dict(name="l. layernorm 4096x1024", bytes=2 * 4 * a.size, morok=lambda: A.layernorm().realize(), numpy=np_ln,
              torch=lambda: torch.nn.functional.layer_norm(ta, (1024,)), tol=1e-4)
def w_sort():
  a = rnd(1 << 20); A, ta = Tensor(a), tt(a)
  return dict(name="m. sort 1M float32 (values + indices)", bytes=3 * 4 * a.size, runs=5,
              morok=lambda: Tensor.realize(*A.sort()), numpy=lambda: (np.sort(a, kind="stable"), np.argsort(a, kind="stable")),
              torch=lambda: torch.sort(ta, stable=True), check=lambda: np.array_equal(A.sort()[0].numpy(), np.sort(a)), tol=0)
def w_attention():
  q, k, v = rnd(8, 12, 128, 64), rnd(8, 12, 128, 64), rnd(8, 12, 128, 64)
  Q, K, V, tq, tk, tv = Tensor(q), Tensor(k), Tensor(v), tt(q), tt(k), tt(v)
  def np_sdpa():
    s = q @ k.swapaxes(-1, -2) / 8.0
    e = np.exp(s - s.max(-1, keepdims=True)); return (e / e.sum(-1, keepdims=True)) @ v
  return dict(name="n. attention B8 H12 T128 D64", flops=2 * 2 * 8 * 12 * 128 * 128 * 64,
              morok=lambda: Q.scaled_dot_product_attention(K, V).realize(), numpy=np_sdpa,
              torch=lambda: torch.nn.functional.scaled_dot_product_attention(tq, tk, tv), tol=1e-4)
def w_minilm():
  """all-MiniLM-L6-v2 (examples/sentence_embeddings.py) on a batch of 32 x 128 tokens; torch runs the same weights in
  transformers' BertModel (a re-implementation below if transformers is missing), onnxruntime its torch.onnx export."""
  sys.path.insert(0, os.path.join(ROOT, "examples"))
  import sentence_embeddings as se
  model, _, _ = se.load()
  ids = np.random.default_rng(0).integers(1000, 30000, (32, 128)).astype(np.int32)
  mask = np.ones((32, 128), np.float32)
  I, M = Tensor(ids), Tensor(mask)
  w = dict(name="q. MiniLM-L6 sentence embeddings 32x128", items=32, runs=3, tol=0, morok=lambda: model(I, M).realize())
  if torch is None: print("  (torch and onnxruntime not measured for MiniLM: torch is not installed; onnxruntime runs its export)"); return w
  tm, ti, tmask = torch_minilm(se.model_path()), torch.from_numpy(ids.astype(np.int64)), torch.from_numpy(mask)
  def torch_fn():
    with torch.no_grad(): return tm(ti, tmask)
  w["torch"] = torch_fn
  ref, got = torch_fn().numpy(), model(I, M).numpy()
  if (c := (ref * got).sum(1).min()) < 0.9999: print(f"  !! minilm: morok's embeddings differ from torch's (cosine {c})")
  try:
    import onnxruntime as ort, tempfile, warnings
    # the TorchScript exporter: offline (dynamo=True needs onnxscript); its deprecation warning would land in the table
    with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
      warnings.simplefilter("ignore", DeprecationWarning)
      torch.onnx.export(tm, (ti, tmask), fn := os.path.join(d, "minilm.onnx"), input_names=["ids", "mask"], dynamo=False)
      opts = ort.SessionOptions(); opts.intra_op_num_threads, opts.inter_op_num_threads = THREADS, 1
      sess = ort.InferenceSession(fn, opts, providers=["CPUExecutionProvider"])
    feed = {"ids": ids.astype(np.int64), "mask": mask}
    w["extra"] = {"onnxruntime": lambda: sess.run(None, feed)}
  except Exception as e: print(f"  (onnxruntime not measured: {type(e).__name__}: {str(e)[:100]})")
  return w
def torch_minilm(path):
  """BertModel + masked mean pooling + L2 normalisation as a torch module (sentence-transformers' computation)."""
  import json
  from safetensors.torch import load_file
  class Pooled(torch.nn.Module):
    def __init__(self, bert): super().__init__(); self.bert = bert
    def forward(self, ids, mask):
      h, m = self.bert(ids, mask), mask.unsqueeze(-1)
      return torch.nn.functional.normalize((h * m).sum(1) / m.sum(1).clamp(min=1e-9), p=2, dim=1)
  try:
    from transformers import BertModel
    bert = BertModel.from_pretrained(path, add_pooling_layer=False).eval().requires_grad_(False)   # exportable as constants
    return Pooled(lambda ids, mask: bert(input_ids=ids, attention_mask=mask).last_hidden_state).eval()
  except ImportError: pass
  cfg, sd = json.load(open(os.path.join(path, "config.json"))), load_file(os.path.join(path, "model.safetensors"))
  sd = {k: v.float() for k, v in sd.items()}
  F, nh, eps = torch.nn.functional, cfg["num_attention_heads"], cfg["layer_norm_eps"]
  lin = lambda x, p: F.linear(x, sd[p + ".weight"], sd[p + ".bias"])
  ln = lambda x, p: F.layer_norm(x, x.shape[-1:], sd[p + ".weight"], sd[p + ".bias"], eps)
  def bert(ids, mask):
    B, L = ids.shape
    x = ln(sd["embeddings.word_embeddings.weight"][ids] + sd["embeddings.position_embeddings.weight"][:L] +
           sd["embeddings.token_type_embeddings.weight"][0], "embeddings.LayerNorm")
    for i in range(cfg["num_hidden_layers"]):
      p = f"encoder.layer.{i}."
      q, k, v = (lin(x, p + "attention.self." + n).view(B, L, nh, -1).transpose(1, 2) for n in ("query", "key", "value"))
      a = F.scaled_dot_product_attention(q, k, v, attn_mask=mask[:, None, None, :].bool()).transpose(1, 2).reshape(B, L, -1)
      x = ln(lin(a, p + "attention.output.dense") + x, p + "attention.output.LayerNorm")
      x = ln(lin(F.gelu(lin(x, p + "intermediate.dense")), p + "output.dense") + x, p + "output.LayerNorm")
    return x
  return Pooled(bert).eval()
LIGHT_RUNS = 3
def light_rows(models) -> None:
  """onnx's light model-zoo graphs (test/onnx_conformance.py light_case: onnx's backend runner's dummy input,
  arange(n).reshape(shape) / n in float32) through OnnxModel (from its fourth call on with inputs of one shape, a TinyJit
  replay of the graph's kernels: what a user's repeated call costs) and onnxruntime's CPU provider (2 intra-op threads, default graph
  optimizations), both checked against the stored output first; timed in alternating blocks, median of the blocks'
  medians."""
  try: import onnxruntime as ort
  except ImportError: print("\nonnx light models not measured: onnxruntime is not installed (pip install -e '.[bench]')"); return
  sys.path.insert(0, os.path.join(ROOT, "test"))
  import onnx_conformance as conf
  from morok_mlir.onnx import OnnxModel
  print(f"\nr. onnx light models (batch 1, 224x224) against onnxruntime {ort.__version__}, CPU, {THREADS} threads; x ort = ort ms / morok ms\n")
  print(f"| {'model':<14} | {'morok ms':>9} | {'ort ms':>9} | {'x ort':>6} | {'first call s':>12} |")
  print(f"|{'-' * 16}|{'-' * 11}|{'-' * 11}|{'-' * 8}|{'-' * 14}|")
  for name in models:
    model, feeds, ref, rtol, atol = conf.light_case(name)
    m = OnnxModel(model)
    t0 = time.perf_counter(); got = m(feeds)[m.output_names[0]]; first = time.perf_counter() - t0
    opts = ort.SessionOptions(); opts.intra_op_num_threads, opts.inter_op_num_threads = THREADS, 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    for who, out in (("morok", got), ("onnxruntime", sess.run(None, feeds)[0])):
      if not np.allclose(out, ref, rtol=rtol, atol=atol): print(f"  !! {name}: {who} differs from the stored output by {np.abs(out - ref).max()}")
    ts = [blocks({"morok": lambda: m(feeds, as_numpy=False)}, LIGHT_RUNS, {"ort": lambda: sess.run(None, feeds)}) for _ in range(2)]
    mk, ot = statistics.median(t["morok"] for t in ts), statistics.median(t["ort"] for t in ts)
    print(f"| {name:<14} | {mk * 1e3:9.1f} | {ot * 1e3:9.1f} | {ot / mk:6.2f} | {first:12.1f} |", flush=True)
    del m, sess

CF_RUNS = 300
def cf_rows(models) -> None:
  """Small ONNX models of control flow, carried state and microseconds of work (test/onnx_cf_models.py: a VAD-like
  streaming model with an If and an LSTM, a Loop, a Scan, an int8 encoder, an int8 QDQ layer, a 2-op graph, a detector's
  output head) through OnnxModel (numpy arrays in and out, as a streaming caller feeds them; the replay from the fourth
  call on) and onnxruntime's CPU provider (2 intra-op threads), outputs checked against onnxruntime's first; per-call
  microseconds, alternating blocks."""
  try: import onnxruntime as ort
  except ImportError: print("\nonnx control-flow models not measured: onnxruntime is not installed (pip install -e '.[bench]')"); return
  sys.path.insert(0, os.path.join(ROOT, "test"))
  import onnx_cf_models as cf
  from morok_mlir.onnx import OnnxModel
  print(f"\ns. small ONNX models (control flow, state, int8) against onnxruntime {ort.__version__}, CPU, {THREADS} threads; "
        "x ort = ort us / morok us\n")
  print(f"| {'model':<8} | {'morok us':>9} | {'ort us':>9} | {'x ort':>6} |")
  print(f"|{'-' * 10}|{'-' * 11}|{'-' * 11}|{'-' * 8}|")
  for name in models:
    model, feeds, carry = cf.MODELS[name]()
    m, f = OnnxModel(model), feeds(0)
    opts = ort.SessionOptions(); opts.intra_op_num_threads, opts.inter_op_num_threads = THREADS, 1
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    got, want = [m(f) for _ in range(4)][-1], dict(zip([o.name for o in sess.get_outputs()], sess.run(None, f)))
    for k, w in want.items():
      if not np.allclose(got[k], w, rtol=1e-4, atol=1e-5): print(f"  !! {name}: {k} differs from onnxruntime's by {np.abs(got[k] - w).max()}")
    f = {**f, **{i: got[o] for o, i in carry.items()}}   # the state a stream feeds back: the previous call's output
    ts = [blocks({"morok": lambda: m(f)}, CF_RUNS, {"ort": lambda: sess.run(None, f)}) for _ in range(2)]
    mk, ot = statistics.median(t["morok"] for t in ts), statistics.median(t["ort"] for t in ts)
    print(f"| {name:<8} | {mk * 1e6:9.1f} | {ot * 1e6:9.1f} | {ot / mk:6.2f} |", flush=True)

def w_overhead():
  a = np.arange(3, dtype=np.float32); A, ta = Tensor(a), tt(a)
  from morok_mlir import TinyJit
  add = TinyJit(lambda x: x + x)
  return dict(name="g. per-call overhead: 3-element add (us)", us=True, runs=1000,
              morok=lambda: (A + A).realize(), numpy=lambda: a + a, torch=lambda: ta + ta, tol=0, extra={"TinyJit replay of the add": lambda: add(A)})

COMPILE_SRC = """import sys, time; t0 = time.perf_counter()
sys.path.insert(0, {root!r})
import numpy as np
from morok_mlir import Tensor
def mlp(x, w1, b1, w2, b2): return ((x @ w1 + b1).relu() @ w2 + b2).log_softmax(axis=1)
Ts = [Tensor(np.ones(s, np.float32)) for s in {shapes!r}]
t1 = time.perf_counter(); mlp(*Ts).numpy(); t2 = time.perf_counter()
print(t2 - t1, t2 - t0)"""
# n steps of a reduce-fed update: 2n kernels, each needing the x of the step before
CHAIN_SRC = """import sys, time
sys.path.insert(0, {root!r})
import numpy as np
from morok_mlir import Tensor
x = Tensor(np.ones((8, 8), np.float32))
for _ in range({n}): x = x - x.max(1, keepdim=True) * 0.5 + x.sum(0, keepdim=True) * 0.001
t1, c1 = time.perf_counter(), time.process_time(); x.numpy(); print(time.perf_counter() - t1, time.process_time() - c1)"""
# a light model's first call: the graph's kernels compiled (here and in forked compile processes) and run once
LIGHT_COLD_SRC = """import os, sys, time
sys.path[:0] = [{root!r}, {test!r}]
import onnx_conformance as conf
from morok_mlir.onnx import OnnxModel
model, feeds, *_ = conf.light_case({name!r})
m = OnnxModel(model)
t1, c1 = time.perf_counter(), time.process_time(); m(feeds); t = os.times()
print(time.perf_counter() - t1, time.process_time() - c1 + t.children_user + t.children_system)"""
def fresh_process(src: str, cache_dir: str) -> tuple[float, float]:
  """The two numbers src prints, run in a new process with the disk cache in cache_dir."""
  r = subprocess.run([sys.executable, "-c", src], env={**os.environ, "MOROK_CACHE_DIR": cache_dir}, capture_output=True, text=True)
  if r.returncode: raise RuntimeError(r.stderr)
  a, b = map(float, r.stdout.split())
  return a, b
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
def compile_times() -> list[tuple[str, float, float]]:
  """First realize of the MLP in a fresh process: with an empty disk cache, then again with the cache it left."""
  import tempfile
  with tempfile.TemporaryDirectory() as d:
    return [(label, *fresh_process(COMPILE_SRC.format(root=ROOT, shapes=MLP_SHAPES), d)) for label in ("cold (empty disk cache)", "warm disk cache")]
def chain_compile_times(ns=(25, 50, 100, 200)) -> list[tuple[int, float, float]]:
  """Realize of the n-step chain in a fresh process with an empty disk cache, against n (compile time is linear in n):
  (n, wall s, CPU s)."""
  import tempfile
  out = []
  for n in ns:
    with tempfile.TemporaryDirectory() as d: out.append((n, *fresh_process(CHAIN_SRC.format(root=ROOT, n=n), d)))
  return out
def light_cold_times(models) -> None:
  """Each light model's first call in a fresh process with an empty disk cache: wall time, and CPU time of the process
  and its forked compile processes together (the machine is shared: the load average says what else ran)."""
  import tempfile
  print(f"\nr. first call of each light model in a new process, empty disk cache (s), load average {os.getloadavg()[0]:.2f}\n")
  print(f"| {'model':<14} | {'wall s':>7} | {'CPU s':>7} |")
  print(f"|{'-' * 16}|{'-' * 9}|{'-' * 9}|")
  for name in models:
    with tempfile.TemporaryDirectory() as d:
      wall, cpu = fresh_process(LIGHT_COLD_SRC.format(root=ROOT, test=os.path.join(ROOT, "test"), name=name), d)
    print(f"| {name:<14} | {wall:7.2f} | {cpu:7.2f} |", flush=True)
  print(f"load average at the end {os.getloadavg()[0]:.2f}")

CF = ("vad", "loop", "scan", "qenc", "qdq", "tiny", "detect")
LIGHT = ("resnet50", "bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "shufflenet", "squeezenet", "vgg19", "zfnet512")
WORKLOADS = {"ew": w_ew, "sum": w_sum, "softmax": w_softmax, "mm1024": w_mm(1024), "mm2048": w_mm(2048), "conv": w_conv,
             "mlp": w_mlp, "overhead": w_overhead, "gather": w_gather, "layernorm": w_layernorm, "sort": w_sort,
             "attention": w_attention, "train": w_train, "trainmlp": w_train_mlp, "traincnn": w_train_cnn, "minilm": w_minilm}

BEAM_ROWS = ("mm1024", "mm2048", "conv", "mlp")

def searched(w: dict, beam: int) -> None:
  """The row's morok function with BEAM=beam against the heuristic's, alternating in ROUNDS rounds; prints a line."""
  from morok_mlir.device import search
  search.log.clear()
  os.environ["BEAM"] = str(beam)
  try:
    t0 = time.perf_counter(); w["morok"]()
    cost = time.perf_counter() - t0
    ref, got = w["numpy"](), w["morok"]().numpy()
    if w["tol"] and not np.allclose(got, ref, rtol=w["tol"], atol=w["tol"]): print(f"  !! searched differs from numpy by {np.abs(got - ref).max()}")
  finally: os.environ.pop("BEAM")
  chosen = list(search.log)
  heur, srch = [], []
  for _ in range(ROUNDS):
    time.sleep(0.2); heur.append(timeit(w["morok"]))
    os.environ["BEAM"] = str(beam)
    try: time.sleep(0.2); srch.append(timeit(w["morok"]))
    finally: os.environ.pop("BEAM")
  h, s = statistics.median(heur), statistics.median(srch)
  print(f"|   {'searched (BEAM=' + str(beam) + ')':<40} | {s * 1e3:9.2f} | {'':>9} | {'':>9} | {'':>12} | {'':>7} | {'':>7} | {'':>7} |"
        f"  heuristic {h * 1e3:.2f} ms in the same {ROUNDS} rounds, x heuristic {h / s:.2f}, search {cost:.1f} s")
  for name, base, ch in chosen:
    fmt = lambda c: " ".join(f"{k[4:]}={list(v) if isinstance(v, tuple) else v}" for k, v in sorted(c.items())) or "-"
    print(f"|     {name[:38]:<38} |  {'same as heuristic' if ch == base else fmt(base) + ' -> ' + fmt(ch)}")

ROUNDS = 5
LETTERS = {"a": ["ew"], "b": ["sum"], "c": ["softmax"], "d": ["mm1024", "mm2048"], "e": ["conv"], "f": ["mlp"]}

def ab(fa, fb, runs: int = 15) -> tuple[float, float]:
  """Median seconds of fa and fb, called alternately (interleaved A/B: both see the same machine state), after warm-up."""
  for _ in range(3): fa(); fb()
  ta, tb = [], []
  for _ in range(runs):
    for f, ts in ((fa, ta), (fb, tb)):
      t0 = time.perf_counter(); f(); ts.append(time.perf_counter() - t0)
  return statistics.median(ta), statistics.median(tb)

def symbolic_rows() -> None:
  """s. a kernel over a symbolic size (a bound Variable, one TinyJit capture for every value) against the same kernel at
  that size as a static one (a TinyJit per size), interleaved in one process, at sizes off the tile and lane widths and
  at the Variable's extremes: x[:m] @ W (512 x 512), m in [1, 512]; softmax(q k^T / 8) v over L positions, 12 heads of
  64, L in [1, 512]; and a kernel too small to time, so the row shows what a replay with a Variable costs besides."""
  from morok_mlir import Variable
  from morok_mlir.jit import TinyJit
  x, w = Tensor(rnd(512, 512)).realize(), Tensor(rnd(512, 512)).realize()
  q, k, v = (Tensor(rnd(1, 12, 512, 64)).realize() for _ in range(3))
  att = lambda n: ((q[:, :, :n] @ k[:, :, :n].transpose(-1, -2)) / 8).softmax(-1) @ v[:, :, :n]
  rows = [("s. matmul x[:m] @ W, 512x512", "m", lambda n: (x[:n] @ w).realize(), (1, 7, 17, 100, 257, 512)),
          ("s. attention H12 D64 over L", "L", lambda n: att(n).realize(), (1, 17, 100, 257, 512)),
          ("s. replay cost: x[:m, :16] * 2", "m", lambda n: (x[:n, :16] * 2).realize(), (1, 512))]
  print(f"\n| {'workload (symbolic size in [1, 512])':<38} | {'size':>5} | {'static ms':>9} | {'symbolic ms':>11} | {'x static':>8} |")
  print(f"|{'-' * 40}|{'-' * 7}|{'-' * 11}|{'-' * 13}|{'-' * 10}|")
  for name, var, fn, sizes in rows:
    V, sym = Variable(var, 1, 512), TinyJit(fn)
    for n in sizes:
      sta = TinyJit(fn)
      if not np.allclose(sym(V.bind(n)).numpy(), sta(n).numpy(), rtol=1e-4, atol=1e-4): print(f"  !! {name}: symbolic differs from static at {n}")
      ts, ty = ab(lambda: sta(n), lambda: sym(V.bind(n)))
      print(f"| {name:<38} | {n:>5} | {ts * 1e3:9.3f} | {ty * 1e3:11.3f} | {ty / ts:8.2f} |", flush=True)

def main(names, beam: int = 0):
  if beam: os.environ.pop("BEAM", None)   # the rows themselves are the heuristic's
  load = os.getloadavg()
  print(f"# morok-mlir CPU bench, {datetime.date.today()}, {platform.processor() or platform.machine()} "
        f"({CPU_NAME}, {os.cpu_count()} cores), {THREADS} threads, load average {load[0]:.2f}")
  isa = {16: "AVX-512", 8: "AVX2"}.get(VEC_WIDTH, "SSE")
  print(f"ISA {isa} ({VEC_WIDTH} f32 lanes), caches L1d {CACHES[0] >> 10} KiB, L2 {CACHES[1] >> 10} KiB, L3 {CACHES[2] >> 20} MiB")
  print(f"numpy {np.__version__} (OpenBLAS, OPENBLAS_CORETYPE unset), torch {torch.__version__ if torch else 'not installed'}")
  bw, rbw, peak = copy_bandwidth(), read_bandwidth(), fma_peak()
  print(f"machine limits measured now (best of 9, {THREADS} threads): copy bandwidth {bw:.1f} GB/s (read + write), "
        f"read bandwidth {rbw:.1f} GB/s, fp32 FMA peak {peak:.0f} GFLOP/s\n")
  hdr = f"| {'workload':<42} | {'morok ms':>9} | {'numpy ms':>9} | {'torch ms':>9} | {'morok rate':>12} | {'x numpy':>7} | {'x torch':>7} | {'% limit':>7} |"
  print(hdr); print("|" + "|".join("-" * (len(c)) for c in hdr.split("|")[1:-1]) + "|")
  compiles = []
  for n in progress(names, "bench", "row"):
    if n in ("compile", "symbolic") or n.startswith(("light", "coldlight", "onnxcf")): continue
    w = WORKLOADS[n]()
    runs = w.get("runs", RUNS)
    t0 = time.perf_counter(); out = w["morok"]()
    if (first := time.perf_counter() - t0) > 1: compiles.append((w["name"], first))   # compile dominates the first realize
    if "check" in w and not w["check"](): write(f"  !! {n}: morok differs from numpy")
    if w["tol"]:   # the first call's result against numpy's first: a training step moves its state every call
      ref, got = w["numpy"](), out.numpy()
      if not np.allclose(got, ref, rtol=w["tol"], atol=w["tol"]): write(f"  !! {n}: morok differs from numpy by {np.abs(got - ref).max()}")
    t = blocks({k: w[k] for k in ("morok", "numpy", "torch") if w.get(k) and (k != "torch" or torch)}, runs, w.get("extra"))
    ms = lambda k: "-" if t[k] is None else f"{t[k] * (1e6 if w.get('us') else 1e3):9.2f}"
    ratio = lambda k: "-" if t[k] is None else f"{t[k] / t['morok']:.2f}"
    if "bytes" in w:
      lim = rbw if w.get("read_only") else bw
      rate, pct = f"{w['bytes'] / t['morok'] / 1e9:.1f} GB/s", f"{100 * w['bytes'] / t['morok'] / 1e9 / lim:.0f}%"
    elif "items" in w: rate, pct = f"{w['items'] / t['morok']:.1f} sent/s", "-"
    elif "flops" in w: rate, pct = f"{w['flops'] / t['morok'] / 1e9:.0f} GFLOP/s", f"{100 * w['flops'] / t['morok'] / 1e9 / peak:.0f}%"
    else: rate, pct = "-", "-"
    write(f"| {w['name']:<42} | {ms('morok'):>9} | {ms('numpy'):>9} | {ms('torch'):>9} | {rate:>12} | {ratio('numpy'):>7} | {ratio('torch'):>7} | {pct:>7} |")
    for k in w.get("extra", {}):   # a replay of the same work is compared with numpy and torch as the row is
      vs = lambda o: f"{t[o] / t[k]:.2f}" if t[o] is not None and k.startswith("TinyJit replay of the same") else ""
      write(f"|   {k:<40} | {ms(k):>9} | {'':>9} | {'':>9} | {'':>12} | {vs('numpy'):>7} | {vs('torch'):>7} | {'':>7} |"
            f"  x morok {t[k] / t['morok']:.2f}")
    if beam and n in BEAM_ROWS: searched(w, beam)
  if "symbolic" in names: symbolic_rows()
  if light := [n[6:] for n in names if n.startswith("light")]: light_rows([x for x in LIGHT if x in light or "" in light])
  if cold := [n[10:] for n in names if n.startswith("coldlight")]: light_cold_times([x for x in LIGHT if x in cold or "" in cold])
  if cf := [n[7:] for n in names if n.startswith("onnxcf")]: cf_rows([x for x in CF if x in cf or "" in cf])
  for name, first in compiles: print(f"\nfirst realize of {name.split('. ', 1)[1]} in this process (compiles its kernels): {first:.1f} s")
  if "compile" in names:
    print("\nh. compile time, first realize of the MLP (f) in a new process (s): first realize / whole process")
    for label, first, total in compile_times(): print(f"  {label:<26} {first:6.3f} / {total:6.3f}")
    print("\ni. compile time against graph size: n steps of x = x - x.max(1)*0.5 + x.sum(0)*0.001 on 8x8 (2n kernels), "
          "first realize in a new process, empty disk cache (s)")
    for n, t, cpu in chain_compile_times(): print(f"  n = {n:<4} {t:6.2f}   (CPU {cpu:.2f})")
  print(f"\nratios are numpy or torch time / morok time (> 1: morok is faster); load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
  args, beam = sys.argv[1:], 0
  if "--beam" in args:
    i = args.index("--beam"); beam = int(args[i + 1]); del args[i:i + 2]
  # sort (row m) runs only when named: its 210 kernels compile for minutes
  main([x for a in args for x in LETTERS.get(a, [a])] or [w for w in WORKLOADS if w != "sort"] + ["compile", "symbolic", "light"], beam)
