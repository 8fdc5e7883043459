"""Compile work is done once per distinct kernel: uop-kernel-split makes equal kernels one function that the schedule
calls on each one's buffers, realize compiles each function once, and the graph pipeline's passes hand their graphs
on in Python (the module is written and verified once, after the last) with the same result as pass by pass."""
import dataclasses, os, subprocess, sys, time
import numpy as np
from mlir import ir
from morok_mlir import Tensor
from morok_mlir import realize as rz
from morok_mlir.device.cpu import CPU, CPUDevice
from morok_mlir.host import THREADS, spare_cores
from morok_mlir.ir.bridge import FILE_LOC, import_module, module_text
from morok_mlir.ir.emit import normalize, graph_func
from morok_mlir.ir.pipeline import PIPELINE, lower_to_kernels, mlir_context, compile_lock, run_pipeline

def chain(x: np.ndarray, n: int):
  """The same step n times: a row max and a column sum feeding an elementwise update (tensor and numpy)."""
  t = Tensor(x)
  for _ in range(n):
    t = t - t.max(1, keepdim=True) * 0.5 + t.sum(0, keepdim=True) * 0.001
    x = x - x.max(1, keepdims=True) * 0.5 + x.sum(0, keepdims=True) * 0.001
  return t, x

def test_equal_kernels_are_one_function():
  t, _ = chain(np.linspace(-1, 1, 64, dtype=np.float32).reshape(8, 8), 12)
  funcs = lower_to_kernels(graph_func(normalize([t.uop])[0]))
  kernels, sched = [f for f in funcs if "uop.kernel" in f.attrs], funcs[-1]
  calls = [k.attrs["callee"][1] for k in sched.roots[0].src]
  assert len(calls) == 24 and set(calls) == {k.name for k in kernels}
  assert len(kernels) <= len(calls) // 2, f"{len(kernels)} kernel functions for {len(calls)} calls of a repeated step"

def test_each_kernel_function_compiles_once(monkeypatch):
  monkeypatch.setattr(rz, "_schedule_cache", {})
  x = np.linspace(-1, 1, 48, dtype=np.float32).reshape(6, 8)
  t, want = chain(x, 10)
  compiled, real = [], CPU.compile_many
  monkeypatch.setattr(CPU, "compile_many", lambda fs: (compiled.extend(f.name for f in fs), real(fs))[1])
  np.testing.assert_allclose(t.numpy(), want, rtol=1e-5, atol=1e-5)
  (sched,) = rz._schedule_cache.values()
  assert sorted(compiled) == sorted({it.name for it in sched.items}) and len(compiled) < len(sched.items) // 2, compiled

def test_kernels_compiled_together_are_each_cached(tmp_path):
  """Kernels JIT-compiled in one engine run right, and each is then in the disk cache under its own key: a new device
  loads every one of them from there, compiles nothing, and gets the same results."""
  r = np.random.default_rng(2)
  xs = [r.standard_normal((5, 7)).astype(np.float32) for _ in range(3)]
  outs = [Tensor(xs[0]).exp2() * 3, Tensor(xs[1]).max(1), Tensor(xs[2]).abs().sum(0).sqrt()]
  want = [np.exp2(xs[0]) * 3, xs[1].max(1), np.sqrt(np.abs(xs[2]).sum(0))]
  funcs = [[f for f in lower_to_kernels(graph_func(normalize([o.uop])[0])) if "uop.kernel" in f.attrs] for o in outs]
  assert all(len(fs) == 1 for fs in funcs)
  results = []
  for _ in range(2):   # compiled together, then loaded from the disk cache by a new device
    dev = CPUDevice()
    dev.disk.enabled, dev.disk.dir = True, str(tmp_path)
    progs = dev.compile_many([fs[0] for fs in funcs])
    dev.disk.flush()
    got = []
    for p, x, w in zip(progs, xs, want):
      out = np.zeros(w.size, np.float32)
      p(out, x.reshape(-1))
      got.append(out.reshape(w.shape))
    results.append((dev.disk.hits, dev.disk.misses, got))
  assert results[0][:2] == (0, 3) and results[1][:2] == (3, 0)
  # one object under three names, which the loaded programs count once between them
  sos = [os.path.join(tmp_path, f) for f in os.listdir(tmp_path) if f.endswith(".so")]
  assert len(sos) == 3 and len({os.stat(f).st_ino for f in sos}) == 1
  assert sum(p.code.nbytes for p in progs) <= os.path.getsize(sos[0])
  for _, _, got in results:
    for g, w in zip(got, want): np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)

def graphs():
  r = np.random.default_rng(0)
  a, w = Tensor(r.standard_normal((4, 6), dtype=np.float32)), Tensor(r.standard_normal((6, 5), dtype=np.float32))
  img, k = Tensor(r.standard_normal((1, 2, 6, 6), dtype=np.float32)), Tensor(r.standard_normal((3, 2, 3, 3), dtype=np.float32))
  yield ((a * 2).exp2().sum(1, keepdim=True) + a).max(0)
  yield (a @ w).relu().softmax(1)
  yield img.conv2d(k, padding=1).max_pool2d()
  yield chain(np.ones((4, 4), np.float32), 3)[0]

def test_handed_on_pipeline_matches_pass_by_pass():
  """The graph pipeline with its passes handing their graphs on writes the module that running it pass by pass writes."""
  for t in graphs():
    text = module_text([graph_func(normalize([t.uop])[0])])
    with compile_lock, mlir_context():
      out = []
      for fuse in (False, True):
        run_pipeline(m := ir.Module.parse(text), ",".join(PIPELINE), fuse=fuse)
        out.append(str(m))
    assert out[0] == out[1]

def printed(funcs) -> str:
  """funcs as module text less locations (a node two places build is one UOp, with the place that built it first; an
  import hash-conses the printed ones in another order), function attributes in MLIR's sorted order; an op without
  attributes prints alike whether its arg is () (imported) or None (built by a pass)."""
  return FILE_LOC.sub("", module_text([dataclasses.replace(f, attrs=dict(sorted(f.attrs.items()))) for f in funcs]))

def test_kernels_handed_back_match_the_module():
  """realize's pipeline hands its last pass's kernels back in Python (the module left unwritten): they are the module's
  that the pipeline run without it writes, imported back."""
  for t in graphs():
    g = graph_func(normalize([t.uop])[0])
    with compile_lock, mlir_context():
      run_pipeline(m := ir.Module.parse(module_text([g])), ",".join(PIPELINE), fuse=True)
      written = import_module(m)
    assert printed(lower_to_kernels(g)) == printed(written)

def test_kernels_handed_back_after_an_upstream_pass():
  """With an upstream pass inside the pipeline, the run of our passes before it writes the module (the upstream pass and
  the passes after it read that); only the pipeline's last pass hands its functions back."""
  t = next(graphs())
  text, pipeline = module_text([graph_func(normalize([t.uop])[0])]), "uop-rangeify,canonicalize,uop-simplify,uop-kernel-split"
  with compile_lock, mlir_context():
    run_pipeline(m := ir.Module.parse(text), pipeline, fuse=True)
    run_pipeline(ir.Module.parse(text), pipeline, fuse=True, carry=(carry := {"out": None}))
    assert printed(carry["out"]) == printed(import_module(m))

def test_equal_code_in_one_batch(tmp_path):
  """int8 and uint8 kernels lower to the same code (i8): compiled in one engine they share it, each checked as its dtype."""
  a, b = np.array([1, 0, 3], np.int8), np.array([1, 0, 3], np.uint8)
  fs = [[f for f in lower_to_kernels(graph_func(normalize([(Tensor(x).neg() * 3).uop])[0])) if "uop.kernel" in f.attrs][0] for x in (a, b)]
  dev = CPUDevice()
  dev.disk.enabled, dev.disk.dir = True, str(tmp_path)
  progs = dev.compile_many(fs)
  for p, x in zip(progs, (a, b)):
    out = np.zeros(3, x.dtype)
    p(out, x)
    np.testing.assert_array_equal(out, -x * x.dtype.type(3))
  dev.disk.flush()

# four kernels of different ops (kernels that differ only in sizes are one family: compiled in one process together)
OPS = [(lambda t, i: (t * (i + 3)).exp2(), lambda x, i: np.exp2(x * (i + 3))), (lambda t, i: t.abs().sqrt(), lambda x, i: np.sqrt(np.abs(x))),
       (lambda t, i: t.sin() * 2, lambda x, i: np.sin(x) * 2), (lambda t, i: (t * t).log2(), lambda x, i: np.log2(x * x))]

def _four(tmp_path):
  r = np.random.default_rng(4)
  xs = [r.standard_normal((4, 6 + i)).astype(np.float32) for i in range(4)]
  funcs = [[f for f in lower_to_kernels(graph_func(normalize([op(Tensor(x), i).uop])[0])) if "uop.kernel" in f.attrs][0]
           for i, (x, (op, _)) in enumerate(zip(xs, OPS))]
  dev = CPUDevice()
  dev.disk.enabled, dev.disk.dir, dev.WORKERS = True, str(tmp_path), 1
  return dev, funcs, xs

def _check(progs, xs):
  for i, (p, x, (_, ref)) in enumerate(zip(progs, xs, OPS)):
    out = np.zeros(x.size, np.float32)
    p(out, x.reshape(-1))
    np.testing.assert_allclose(out, ref(x.reshape(-1), i), rtol=1e-5, atol=1e-6)

def test_kernels_compiled_in_a_forked_process(tmp_path):
  """With a compile process forked (WORKERS=1), its share of the kernels reaches this process through the disk cache
  it wrote: loaded from there, not compiled here, with the same results as the kernels compiled here."""
  dev, funcs, xs = _four(tmp_path)
  progs = dev.compile_many(funcs)
  dev.disk.flush()
  assert (dev.disk.hits, dev.disk.misses) == (2, 2)
  _check(progs, xs)

def test_a_compile_process_renders_its_share(tmp_path, monkeypatch):
  """The forked process renders its share too and hands the specs back: this process renders only its own."""
  dev, funcs, xs = _four(tmp_path)
  rendered, orig = [], dev.renderer.render
  monkeypatch.setattr(dev.renderer, "render", lambda f, name="kernel": rendered.append(f) or orig(f, name))
  progs = dev.compile_many(funcs)
  assert len(rendered) == 2 and (dev.disk.hits, dev.disk.misses) == (2, 2)
  _check(progs, xs)

def test_a_failed_compile_process_leaves_its_share_here(tmp_path, monkeypatch):
  """A compile process that hands nothing back (it died): its share is rendered and compiled here."""
  dev, funcs, xs = _four(tmp_path)
  monkeypatch.setattr(CPUDevice, "_child", lambda self, funcs, path: None)
  progs = dev.compile_many(funcs)
  assert (dev.disk.hits, dev.disk.misses) == (0, 4)
  _check(progs, xs)

def test_compile_shares_balance_work():
  """The kernels left to compile are split over the processes by their work, not their count: no share holds more text
  than an equal split plus the largest kernel, whatever the order they come in (a model's big contractions and small
  elementwise kernels alternate)."""
  sizes = [40_000, 500, 38_000, 800, 35_000, 600, 30_000, 400, 500, 700]
  for n in (1, 2, 3):
    shares = CPUDevice.shares(list(range(len(sizes))), sizes, n)
    assert sorted(k for s in shares for k in s) == list(range(len(sizes)))   # each kernel once
    assert max(sum(sizes[k] for k in s) for s in shares) <= sum(sizes) / n + max(sizes), n

def test_spare_cores_counts_other_processes_busy_now():
  """The cores a compile forks processes for: never this thread's, and one fewer while another process keeps a core busy
  (a busy loop started a moment ago, which the one-minute load average would not show yet); other load only lowers it.
  The busy process is seen within a few samplings (one may catch it descheduled while this process's own threads, a
  worker pool spinning down after an earlier test's kernels, hold the cores)."""
  cores = min(THREADS, len(os.sched_getaffinity(0)))
  assert 0 <= spare_cores() <= cores - 1
  p = subprocess.Popen([sys.executable, "-c", "while True: pass"])
  try:
    time.sleep(0.3)
    assert any(spare_cores() <= max(0, cores - 2) or time.sleep(0.05) for _ in range(10))
  finally: p.kill(); p.wait()

def test_yielding_tasks_are_seen_as_such():
  """A busy task at nice 19 (how this device's linker runs) is a yielding one, which spare_cores does not count as a
  busy core: host.yielding_running sees it running within a few samplings, with its nice read from /proc."""
  from morok_mlir.host import YIELDING_NICE, _task_states, yielding_running
  p = subprocess.Popen([sys.executable, "-c", "import os; os.nice(19)\nwhile True: pass"])
  try:
    time.sleep(0.3)
    assert all(nice >= YIELDING_NICE for _, nice in _task_states(str(p.pid))) and _task_states(str(p.pid))
    assert any(yielding_running() >= 1 or time.sleep(0.05) for _ in range(10))
  finally: p.kill(); p.wait()
  assert _task_states(str(p.pid)) == []   # a process gone: no threads, no error
