"""The realize driver: DEBUG output, compile errors at the user's line, trivial outputs."""
import os, subprocess, sys, textwrap
import numpy as np, pytest
from morok_mlir import Tensor
from morok_mlir.realize import realize, new_buffer
from morok_mlir.ir.pipeline import CompileError
from morok_mlir.core.uop import UOp, attrs
from morok_mlir.core.dtype import dtypes
from morok_mlir.dialects.ops import Ops

def run_script(src: str, **env) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "-c", textwrap.dedent(src)], capture_output=True, text=True, timeout=120,
                        env={**os.environ, **{k: str(v) for k, v in env.items()}})

SCRIPT = """
  import numpy as np
  from morok_mlir import Tensor
  a = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
  print((a - a.max(axis=0, keepdim=True)).numpy().tolist())
"""

def test_debug2_prints_kernel_names_and_times():
  p = run_script(SCRIPT, DEBUG=2)
  assert p.returncode == 0, p.stderr
  lines = [l for l in p.stdout.splitlines() if " us" in l]
  assert len(lines) == 2 and lines[0].split()[0].startswith("r_") and lines[1].split()[0].startswith("E_")
  assert "[[-3.0, -3.0, -3.0], [0.0, 0.0, 0.0]]" in p.stdout

def test_debug4_prints_ir_after_each_pass():
  p = run_script(SCRIPT, DEBUG=4)
  assert p.returncode == 0, p.stderr
  assert "// ----- after uop-rangeify" in p.stdout and "// ----- after uop-kernel-split" in p.stdout
  assert '"uop.bufferize"' in p.stdout and "@schedule" in p.stdout

def test_compile_error_names_user_line():
  x = new_buffer(np.zeros(4, np.int32))
  bad = UOp(Ops.THREEFRY, dtypes.int32, (x, x), loc="my_model.py:42:7")
  with pytest.raises(CompileError, match=r"my_model\.py:42:7.*threefry"):
    realize([bad])

def test_trivial_outputs_need_no_kernel():
  from morok_mlir.realize import GlobalCounters
  GlobalCounters.reset()
  e, b = Tensor(np.zeros((0, 3), np.float32)), Tensor(np.arange(3))
  assert e.numpy().shape == (0, 3) and b.numpy().tolist() == [0, 1, 2]
  assert GlobalCounters.kernel_count == 0

def test_allocator_blocks_live_as_long_as_their_arrays():
  from morok_mlir.device import Device
  alloc = Device["CPU"].allocator
  x, y = alloc.alloc(3, "float32"), alloc.alloc(3, "float32")
  assert x.ctypes.data != y.ctypes.data
  v = x.reshape(1, 3); del x
  z = alloc.alloc(3, "float32")
  assert z.ctypes.data != v.ctypes.data  # a view keeps the block in use

def test_reduce_of_value_with_reduce_uses_distinct_temporaries():
  x = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
  m = Tensor(x) + Tensor(x).sum(0, keepdim=True)
  rm = x + x.sum(0, keepdims=True)
  np.testing.assert_allclose((m + m.sum(0, keepdim=True)).numpy(), rm + rm.sum(0, keepdims=True))

def test_devices_on_tensors():
  from morok_mlir import Device
  a = Tensor([1.0, 2.0])
  assert a.device == Device.DEFAULT == "CPU" and (a + 1).device == "CPU" and a.to("cpu:0") is a
  with pytest.raises(ValueError, match=r"test_realize\.py:\d+.*unknown device"):
    a.to("TPU")
  from morok_mlir.device.cuda import available
  if not available()[0]:
    with pytest.raises(RuntimeError, match=r"test_realize\.py:\d+.*'CUDA' is not available"): a.to("CUDA")
  else:
    c = a.to("CUDA")
    assert c.device == "CUDA" and c.uop.op is Ops.COPY and (c * 2).device == "CUDA"
    with pytest.raises(RuntimeError, match=r"test_realize\.py:\d+.*one device"):
      a + c

# ---- the schedule cache's key: one compiled schedule per graph structure, never one shared by different graphs
def test_same_structure_fresh_inputs_hits_the_schedule_cache():
  from morok_mlir.realize import GlobalCounters, _schedule_cache
  r = np.random.default_rng(0)
  b = r.standard_normal(5, dtype=np.float32)
  x, B, want = Tensor(r.standard_normal(5, dtype=np.float32)), Tensor(b), None
  want = x.numpy()
  x = (x * 0.5 + B).realize(); want = want * 0.5 + b   # compiles
  GlobalCounters.reset(); n = len(_schedule_cache)
  for _ in range(4):   # each step's input is the last step's result: a new buffer, a new graph of the same structure
    x = (x * 0.5 + B).realize(); want = want * 0.5 + b
  assert GlobalCounters.compiled == 0 and GlobalCounters.kernel_count == 4 and len(_schedule_cache) == n
  np.testing.assert_allclose(x.numpy(), want, rtol=1e-6)

GRAPHS = {   # name -> (inputs' shapes and dtype, morok, numpy): alike in shape, so a key that lost a detail would merge them
  "x*0.5+y": (((6,), (6,)), np.float32, lambda x, y: x * 0.5 + y),
  "x*0.25+y": (((6,), (6,)), np.float32, lambda x, y: x * 0.25 + y),
  "x*2+y int": (((6,), (6,)), np.int32, lambda x, y: x * 2 + y),
  "x*0.5+y 7": (((7,), (7,)), np.float32, lambda x, y: x * 0.5 + y),
  "y*0.5+x": (((6,), (6,)), np.float32, lambda x, y: y * 0.5 + x),
  "x+y": (((6,), (6,)), np.float32, lambda x, y: x + y),
  "x+x": (((6,), (6,)), np.float32, lambda x, y: x + x),
  "(x+y)*(z+w)": (((6,), (6,), (6,), (6,)), np.float32, lambda x, y, z, w: (x + y) * (z + w)),
  "(x+y)*(x+y)": (((6,), (6,), (6,), (6,)), np.float32, lambda x, y, z, w: (x + y) * (x + y)),
  "(x+y)*(y+x)": (((6,), (6,), (6,), (6,)), np.float32, lambda x, y, z, w: (x + y) * (y + x)),
  "(x+x)*(y+y)": (((6,), (6,), (6,), (6,)), np.float32, lambda x, y, z, w: (x + x) * (y + y)),
  "(x+y)*(z+x)": (((6,), (6,), (6,), (6,)), np.float32, lambda x, y, z, w: (x + y) * (z + x)),
  "x 2x3 sum0": (((2, 3), (6,)), np.float32, lambda x, y: x.sum(0)),
  "x 3x2 sum0": (((3, 2), (6,)), np.float32, lambda x, y: x.sum(0)),
}

@pytest.mark.parametrize("order", [1, -1])
def test_graphs_that_differ_get_schedules_of_their_own(order):
  """Every pair of these graphs differs in one detail (a constant, a dtype, a size, an operand's order, which inputs are
  one buffer): each realized twice on fresh inputs, alternately, gives its own numpy result every time."""
  r = np.random.default_rng(1)
  for _ in range(2):
    for name, (shapes, dt, f) in list(GRAPHS.items())[::order]:
      arrs = [(r.standard_normal(s) * 4).astype(dt) for s in shapes]
      got = f(*[Tensor(a) for a in arrs]).numpy()
      np.testing.assert_allclose(got, f(*arrs), rtol=1e-5, err_msg=name)

def test_key_of_several_outputs_keeps_their_order():
  r = np.random.default_rng(2)
  for _ in range(2):
    a, b = r.standard_normal(4, dtype=np.float32), r.standard_normal(4, dtype=np.float32)
    A, B = Tensor(a), Tensor(b)
    s, d = A + B, A - B
    Tensor.realize(s, d)
    np.testing.assert_allclose(s.numpy(), a + b); np.testing.assert_allclose(d.numpy(), a - b)
    s, d = A + B, A - B
    Tensor.realize(d, s)
    np.testing.assert_allclose(s.numpy(), a + b); np.testing.assert_allclose(d.numpy(), a - b)

def test_constant_subgraph_seen_alone_then_under_inputs():
  """A subgraph without inputs is its own key (normalize marks it once); later graphs that use it with inputs still
  number and substitute their inputs."""
  c = Tensor.arange(5).float() * 3
  np.testing.assert_allclose(c.numpy(), np.arange(5) * 3)
  for k in range(2):
    x = np.full(5, k + 1, np.float32)
    np.testing.assert_allclose((Tensor(x) + c).numpy(), x + np.arange(5) * 3)
    np.testing.assert_allclose((c * Tensor(x)).numpy(), np.arange(5) * 3 * x)

def test_prepared_calls_follow_a_program_onto_its_shared_object(tmp_path):
  """A schedule run before and after its JIT-compiled kernel moved onto its shared object gives the same results, and
  the engine is not kept (the run's prepared calls are made once the code stays)."""
  p = run_script("""
    import gc, numpy as np
    from morok_mlir import Tensor
    from morok_mlir.device.cpu import CPU, _Code
    B = Tensor(np.arange(3, dtype=np.float32))
    x = Tensor(np.ones(3, np.float32))
    outs = [(x := (x * 0.5 + B).realize()).numpy() for _ in range(3)]
    CPU.disk.flush(); gc.collect()
    outs += [(x := (x * 0.5 + B).realize()).numpy() for _ in range(3)]
    CPU.disk.flush(); gc.collect()
    want, w = [], np.ones(3, np.float32)
    for _ in range(6): w = w * 0.5 + np.arange(3, dtype=np.float32); want.append(w)
    print("RESULT", all(np.allclose(o, w) for o, w in zip(outs, want)), sum(hasattr(c, "engine") for c in gc.get_objects() if isinstance(c, _Code)))
  """, MOROK_CACHE_DIR=tmp_path, MOROK_DISK_CACHE=1)
  assert p.returncode == 0, p.stderr[-3000:]
  assert "RESULT True 0" in p.stdout, p.stdout + p.stderr[-2000:]

def test_recent_graphs_let_their_inputs_go_at_the_next_collection():
  """The driver keeps the last few realized graphs (a loop realizing one graph again finds its key) only until the next
  garbage collection: a deleted tensor's buffer is freed by gc.collect(), as it would be were the graph cyclic garbage."""
  import gc, weakref
  x = Tensor(np.ones(1000, np.float32))
  buf = weakref.ref(x.uop.buffer)
  for _ in range(2): (x * 2 + 1).realize()
  del x; gc.collect()
  assert buf() is None

# a script's calls of check(seed) on new inputs, at its line `# RUNS`: 3, then 5 once its programs moved onto their shared
# objects (the disk cache in tmp_path), then 15 from each of 4 threads at once (ok: the first 8 right; errs: the threads'
# wrong ones)
RUNS = """ok = all(check(i) for i in range(3))
CPU.disk.flush()
ok = ok and all(check(i) for i in range(3, 8))
errs = []
ts = [threading.Thread(target=lambda t=t: errs.extend(k for k in range(15) if not check(100 * t + k))) for t in range(4)]
for t in ts: t.start()
for t in ts: t.join()"""
def run_checks(src: str, tmp_path) -> subprocess.CompletedProcess:
  src = textwrap.dedent(src)
  return run_script(src.replace("# RUNS", RUNS), MOROK_CACHE_DIR=tmp_path, MOROK_DISK_CACHE=1)

def test_a_run_keeps_its_small_arena_and_runs_scratch_kernels_on_it(tmp_path):
  """A plain run keeps its schedule's arena (intermediates and scratch panels, up to KEEP_ARENA) for its next run, where
  kernels with scratch run from prepared argument sets over it: new inputs every call, from several threads at once,
  give their own results (each thread's run its own arena); a TinyJit plan built over the schedule lets its arena go."""
  p = run_checks("""
    import threading, numpy as np
    from morok_mlir import Tensor, TinyJit
    from morok_mlir.device.cpu import CPU, Batch
    from morok_mlir import realize as R
    SHAPES = ((96, 200), (200, 40), (200, 40), (40, 8))
    # operands computed from two inputs: packed into scratch each call, nothing kept per input
    def f(x, w, u, v): return ((x * 2).relu() @ (w * u)).relu() @ v
    def want(x, w, u, v): return np.maximum(np.maximum(x * 2, 0) @ (w * u), 0) @ v
    def check(seed):
      r = np.random.default_rng(seed)
      xs = [r.standard_normal(s, dtype=np.float32) for s in SHAPES]
      return np.allclose(f(*map(Tensor, xs)).numpy(), want(*xs), rtol=1e-3, atol=1e-3)
    # RUNS
    sched = next(s for s in R._schedule_cache.values() if len(s.items) >= 2)
    kept = bool(sched.calls) and all(r.mem is not None for r in sched.calls) and 0 < sched.arena <= R.KEEP_ARENA
    scr = {k for k, it in enumerate(sched.items) if it.program.spec.scratch}
    batched = any(c.k in scr and c.args is not None for r in sched.calls for c in r.calls) and any(type(g) is Batch for r in sched.calls for g in r.segs)
    jf = TinyJit(lambda *a: f(*a).realize())
    r = np.random.default_rng(7)
    args = [Tensor(r.standard_normal(s, dtype=np.float32)) for s in SHAPES]
    for _ in range(3): out = jf(*args)
    ok = ok and np.allclose(out.numpy(), want(*(a.numpy() for a in args)), rtol=1e-3, atol=1e-3)
    print("RESULT", ok and not errs, kept, batched, not sched.calls)
  """, tmp_path)
  assert p.returncode == 0, p.stderr[-3000:]
  assert "RESULT True True True True" in p.stdout, p.stdout + p.stderr[-2000:]

def test_a_cached_schedule_runs_its_kernels_natively_on_new_inputs(tmp_path):
  """Once its programs stay on their shared objects, a cached schedule's prepared kernels run as native batches (one
  call each run of them): new inputs every call, an intermediate and a threaded kernel among them, give their own
  results, from several threads at once too."""
  p = run_checks("""
    import threading, numpy as np
    from morok_mlir import Tensor
    from morok_mlir.device.cpu import CPU, Batch
    from morok_mlir import realize as R
    def f(x, y): return (x.exp() * 2 - x).sum(1).realize(), (y * 3 + 1).relu().realize()
    def want(x, y): return (np.exp(x) * 2 - x).sum(1), np.maximum(y * 3 + 1, 0)
    def check(seed):
      r = np.random.default_rng(seed)
      x, y = r.standard_normal((64, 33), dtype=np.float32), r.standard_normal((600, 600), dtype=np.float32)
      return all(np.allclose(g.numpy(), w, rtol=1e-4, atol=1e-4) for g, w in zip(f(Tensor(x), Tensor(y)), want(x, y)))
    # RUNS
    batched = sum(type(g) is Batch for s in R._schedule_cache.values() for run in s.calls for g in (run.segs or ()))
    print("RESULT", ok and not errs, batched >= 2)
  """, tmp_path)
  assert p.returncode == 0, p.stderr[-3000:]
  assert "RESULT True True" in p.stdout, p.stdout + p.stderr[-2000:]
