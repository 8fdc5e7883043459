from morok_mlir.core.dtype import dtypes
"""realize() from many Python threads at once: shared programs (argument sets per call), the caches, the allocator's
pool, the worker pool and the hash-consing table. The harness runs in a subprocess, so a crash is a failure, not the end
of the test run."""
import ctypes, os, subprocess, sys, textwrap, threading, time
import numpy as np
import pytest
from morok_mlir.core.uop import UOp
from morok_mlir.device.cpu import CPUAllocator
from morok_mlir.device.pool import SPIN, Chain, Pool
from morok_mlir.dialects.ops import Ops

HARNESS = textwrap.dedent("""
  import sys, threading, numpy as np, faulthandler
  faulthandler.enable()
  from morok_mlir import Tensor
  NT, ITERS = 4, int(sys.argv[1])
  W = np.random.default_rng(99).standard_normal((96, 128), dtype=np.float32)
  TW = Tensor(W)     # shared by every thread: its packed B panels are kept by the contraction program
  errors, runs = [], [0]
  def check(got, want, what, rtol=1e-5, atol=1e-6):
    runs[0] += 1
    if got.shape != want.shape or not np.allclose(got, want, rtol=rtol, atol=atol): errors.append(what)
  def worker(t):
    r = np.random.default_rng(t)
    try:
      for i in range(ITERS):
        a = r.random((64, 96), dtype=np.float32)
        check((Tensor(a) * 2 + 1).numpy(), a * 2 + 1, "elementwise")
        b = a.reshape(96, 64)    # another schedule, the same flat kernel
        check((Tensor(b) * 2 + 1).numpy(), b * 2 + 1, "elementwise, another shape")
        check(Tensor(a).sum(1).numpy(), a.sum(1), "reduce", rtol=1e-4)
        big = r.random((512, 520), dtype=np.float32)   # threaded over rows
        check((Tensor(big) * 3 - Tensor(big).exp()).numpy(), big * 3 - np.exp(big), "threaded elementwise", rtol=1e-5)
        x = r.standard_normal((128, 96), dtype=np.float32)
        check((Tensor(x) @ TW).numpy(), x @ W, "matmul (contraction, kept B)", rtol=1e-4, atol=1e-4)
        if i % 4 == t % 4:    # new kernels, compiled while the other threads run theirs
          n = 1000 + 50 * t + i
          c = np.arange(n, dtype=np.float32)
          check((Tensor(c) * 3 - 1).numpy(), c * 3 - 1, f"new kernel {n}")
    except Exception as e: errors.append(repr(e))
  ts = [threading.Thread(target=worker, args=(t,)) for t in range(NT)]
  for t in ts: t.start()
  for t in ts: t.join()
  print("RESULT", runs[0], len(errors), sorted(set(errors))[:5])
""")

def test_threads_share_programs(tmp_path):
  env = {**os.environ, "MOROK_CACHE_DIR": str(tmp_path), "MOROK_DISK_CACHE": "1", "MOROK_THREADS": "2"}
  p = subprocess.run([sys.executable, "-c", HARNESS, "12"], env=env, capture_output=True, text=True, timeout=120)
  out = [l for l in p.stdout.splitlines() if l.startswith("RESULT")]
  assert p.returncode == 0 and out, f"crashed (rc {p.returncode}):\n{p.stderr[-3000:]}"
  _, runs, wrong, what = out[0].split(" ", 3)
  assert int(runs) == 4 * 12 * 5 + 12 and int(wrong) == 0, f"{wrong} of {runs} wrong: {what}"

def test_hash_consing_one_uop_per_key():
  # two threads building the same node at once must get the same object: equality of UOps is identity
  old = sys.getswitchinterval()
  sys.setswitchinterval(1e-6)
  try:
    n, got, go = 20000, [None] * 4, threading.Barrier(4)
    def build(t):
      go.wait()
      got[t] = [UOp(Ops.CONST, dtypes.float32, (), 0.25 + i) for i in range(n)]   # kept alive: no entry dies meanwhile
    ts = [threading.Thread(target=build, args=(t,)) for t in range(4)]
    for t in ts: t.start()
    for t in ts: t.join()
  finally: sys.setswitchinterval(old)
  dups = sum(any(g[i] is not got[0][i] for g in got[1:]) for i in range(n))
  assert dups == 0, f"{dups} keys got two distinct UOps"

def test_pool_waits_for_its_workers():
  # a call whose own chunk raises still waits for the chunks it handed out: a worker never outlives the call
  pool, done = Pool(2), []
  def fn(i):
    if i == 0: raise ValueError("caller's chunk")
    time.sleep(0.05); done.append(i)
  with pytest.raises(ValueError): pool.run(fn, [0, 1, 2])
  assert sorted(done) == [1, 2]
  out = []
  pool.run(lambda i: (time.sleep(0.02 * i), out.append(i)), [0, 1, 2])   # and the next call waits for its own
  assert sorted(out) == [0, 1, 2]

def test_allocator_pool_from_threads():
  a, old = CPUAllocator(), sys.getswitchinterval()
  sys.setswitchinterval(1e-6)
  try:
    errors = []
    def churn(t):
      try:
        for i in range(1500):
          arrs = [a.alloc(n, np.float32) for n in (100, 3000, 20000, 100 + t)]
          for j, x in enumerate(arrs): x[:] = 4 * t + j
          for j, x in enumerate(arrs):
            if not (x == 4 * t + j).all(): errors.append("a block handed out twice")
          for x in arrs[::2]: a.free(x)
          del arrs, x   # the others return through their finalizers
      except Exception as e: errors.append(repr(e))
    ts = [threading.Thread(target=churn, args=(t,)) for t in range(4)]
    for t in ts: t.start()
    for t in ts: t.join()
  finally: sys.setswitchinterval(old)
  assert not errors, errors[:3]
  assert a.pooled == sum(k * len(v) for k, v in a.pool.items())
  assert not a.live

def test_cuda_launches_from_threads(monkeypatch):
  # each launch passes its own parameter array: a driver that reads them at launch sees every call's own pointers
  import ctypes
  from types import SimpleNamespace
  from morok_mlir.device import cuda
  seen = []
  class Driver:
    def cuLaunchKernel(self, fn, gx, gy, gz, lx, ly, lz, shm, stream, params, extra):
      pp = ctypes.cast(params, ctypes.POINTER(ctypes.c_void_p))
      seen.append(tuple(ctypes.c_void_p.from_address(pp[i]).value for i in range(2)))
      return (0,)
  monkeypatch.setattr(cuda, "_drv", Driver())
  p = cuda.CUDAProgram.__new__(cuda.CUDAProgram)   # no module to load: just the launch path
  p.dev, p.fn, p.label, p._free = SimpleNamespace(stream=None, prof=None), "k", "k", []
  p.spec = SimpleNamespace(args=((1, None), (1, None)), global_size=(1, 1, 1), local_size=(1, 1, 1))
  old = sys.getswitchinterval()
  sys.setswitchinterval(1e-6)
  try:
    ts = [threading.Thread(target=lambda t=t: [p.launch_ptrs((2 * t + 1) << 20, (2 * t + 2) << 20) for _ in range(5000)]) for t in range(4)]
    for t in ts: t.start()
    for t in ts: t.join()
  finally: sys.setswitchinterval(old)
  assert len(seen) == 20000 and set(seen) == {((2 * t + 1) << 20, (2 * t + 2) << 20) for t in range(4)}

def _ctl(pool: Pool, i: int, field: int) -> int: return ctypes.c_int64.from_address(pool.workers[i].ctl + 8 * field).value

@pytest.mark.parametrize("n", [1, 2 * len(os.sched_getaffinity(0))])
def test_pool_runs_native_functions_on_their_packs(n):
  # a ctypes function is called by the worker's native loop on the address of its pack (not through Python's run);
  # with more threads than cores, nobody spins: workers park after each chunk and the caller yields while it waits.
  # Each pack runs exactly once: on its worker, or on the caller when the worker has not taken it by the time the
  # caller's own chunk is done (the caller's chunk here takes 20 ms: time for every worker to take its own)
  pool, seen, me, workers = Pool(n), [], threading.get_ident(), set()
  assert ctypes.c_int64.from_address(pool.workers[0].ctl + 40).value == (0 if n + 1 > len(os.sched_getaffinity(0)) else SPIN)
  def body(p):
    seen.append((p, threading.get_ident()))
    if threading.get_ident() == me and len(seen) == 1: time.sleep(0.02)
  fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(body)
  packs = [(ctypes.c_int64 * 1)(i) for i in range(n + 1)]
  for _ in range(50):
    seen.clear()
    pool.run(fn, packs)
    assert sorted(p for p, _ in seen) == sorted(ctypes.addressof(p) for p in packs)
    workers |= {t for _, t in seen} - {me}
  assert len(workers) == n   # every worker took chunks
  pool.close()

def test_pool_caller_takes_a_chunk_its_worker_has_not():
  """A worker that has not taken its chunk when the caller's are done (descheduled by other processes, or parked)
  does not make the caller wait for it: the caller runs that chunk, and the worker, seeing it taken, skips it."""
  pool = Pool(1)
  go = pool.workers[0].go
  seen = []
  fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(lambda p: seen.append((p, threading.get_ident())))
  packs = [(ctypes.c_int64 * 1)(i) for i in range(2)]
  # hold the worker away: stop it spinning (park) and keep its wake from reaching it
  ctypes.c_int64.from_address(pool.workers[0].ctl + 40).value = 0
  deadline = time.time() + 10
  while _ctl(pool, 0, 4) != 1 and time.time() < deadline: time.sleep(0.001)   # parked
  with pool.busy: pass
  pool.workers[0].go = threading.Lock(); pool.workers[0].go.acquire()   # a wake lock nobody releases
  t0 = time.perf_counter()
  pool.run(fn, packs)
  assert sorted(p for p, _ in seen) == sorted(ctypes.addressof(p) for p in packs)
  assert {t for _, t in seen} == {threading.get_ident()} and time.perf_counter() - t0 < 5
  pool.workers[0].go = go
  if go.locked(): go.release()   # let the worker see the taken job, skip it, and stop
  pool.close()

def test_pool_parks_and_wakes():
  # idle past its spins, a worker parks (blocks in Python); the next post wakes it. Posts around the moment it
  # parks (the handshake's race) must never be missed: a missed one would hang here
  pool, out = Pool(1), []
  pool.run(lambda i: out.append(i), [0, 1])
  deadline = time.time() + 5
  while _ctl(pool, 0, 4) != 1 and time.time() < deadline: time.sleep(0.01)
  assert _ctl(pool, 0, 4) == 1, "the worker never parked"
  pool.run(lambda i: out.append(i), [2, 3])
  assert sorted(out) == [0, 1, 2, 3]   # woken (it may have parked again since: it spins only 1-2 ms)
  rng = np.random.default_rng(0)
  for t in rng.uniform(0, 0.03, 60):
    time.sleep(t)
    got = []
    pool.run(lambda i: got.append(i), [0, 1])
    assert sorted(got) == [0, 1]
  pool.close()
  ran = []
  pool.run(lambda i: ran.append(i), [0, 1])   # after close: the caller runs every chunk
  pool.workers[0].thread.join(30)   # close waits 1 s for it; a loaded machine may take longer
  assert ran == [0, 1] and not pool.workers[0].thread.is_alive()

def _chain(pool, nsteps: int, extra: int, log: list, slow=None):
  """A Chain of nsteps phases, phase k of workers + 1 + k * extra chunks, each chunk logging (start, k, pack) and
  (end, k, pack) with its thread."""
  packs = [[(ctypes.c_int64 * 1)(k) for _ in range(len(pool.workers) + 1 + k * extra)] for k in range(nsteps)]
  def body(p):
    k = ctypes.c_int64.from_address(p).value
    log.append(("start", k, p, threading.get_ident()))
    if slow is not None: slow(k, p)
    log.append(("end", k, p, threading.get_ident()))
  fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(body)
  chain = Chain([(ctypes.cast(fn, ctypes.c_void_p).value, [ctypes.addressof(p) for p in ps]) for ps in packs], pool)
  chain.packs_kept = packs   # the chunks' arguments live as long as the chain that points at them
  return chain, fn, [[ctypes.addressof(p) for p in ps] for ps in packs]

def _in_order(log: list, packs: list) -> bool:
  """Every chunk ran exactly once, and each phase's chunks all ended before the next phase's first started."""
  starts = [(k, p) for e, k, p, _ in log if e == "start"]
  if sorted(starts) != sorted((k, p) for k, ps in enumerate(packs) for p in ps): return False
  last_end = {k: max(i for i, (e, kk, _, _) in enumerate(log) if e == "end" and kk == k) for k in range(len(packs))}
  first = {k: min(i for i, (e, kk, _, _) in enumerate(log) if e == "start" and kk == k) for k in range(len(packs))}
  return all(last_end[k] < first[k + 1] for k in range(len(packs) - 1))

@pytest.mark.parametrize("n", [1, 2 * len(os.sched_getaffinity(0))])
def test_chain_runs_phases_in_order_on_the_workers(n):
  # one native call runs every phase: each chunk exactly once, a phase's chunks all done before the next phase's
  # start, chunks beyond the workers on the caller; the caller's first chunk takes 20 ms: time for every worker to take its own
  pool, log, me = Pool(n), [], threading.get_ident()
  slow = lambda k, p: time.sleep(0.02) if k == 0 and threading.get_ident() == me and p == packs[0][0] else None
  chain, fn, packs = _chain(pool, 3, 2, log, slow)
  workers = set()
  for _ in range(20):
    log.clear()
    chain()
    assert _in_order(log, packs)
    workers |= {t for *_, t in log} - {me}
  assert len(workers) == n
  pool.close()

def test_chain_without_the_workers_runs_on_the_caller():
  """While another caller holds the workers, after close, and with a worker parked and its wake lost, a Chain's caller
  runs the chunks itself (a parked worker's is taken back), in order, without waiting on the workers."""
  pool, log, me = Pool(1), [], threading.get_ident()
  chain, fn, packs = _chain(pool, 2, 1, log)
  with pool.busy: chain()
  assert _in_order(log, packs) and {t for *_, t in log} == {me}
  ctypes.c_int64.from_address(pool.workers[0].ctl + 40).value = 0   # stop it spinning: it parks
  deadline = time.time() + 10
  while _ctl(pool, 0, 4) != 1 and time.time() < deadline: time.sleep(0.001)
  go = pool.workers[0].go
  pool.workers[0].go = threading.Lock(); pool.workers[0].go.acquire()   # a wake lock nobody releases
  log.clear(); chain()
  assert _in_order(log, packs) and {t for *_, t in log} == {me}
  pool.workers[0].go = go
  if go.locked(): go.release()
  pool.close()
  log.clear(); chain()
  assert _in_order(log, packs) and {t for *_, t in log} == {me}

def test_chain_wakes_parked_workers():
  # posts around the moment a worker parks (the handshake's race) are never missed, and a wake reaches it: a worker
  # parked before the call (woken before it) and one that parks during it (the caller's first chunk takes 100 ms, far
  # past the worker's spins: the next phase's post wakes it) take their chunks while the caller's take 20 ms
  pool, log, me, slow = Pool(1), [], threading.get_ident(), [0, 0]
  chain, fn, packs = _chain(pool, 2, 0, log, lambda k, p: time.sleep(slow[k]) if threading.get_ident() == me and p == packs[k][0] else None)
  rng = np.random.default_rng(0)
  for t in rng.uniform(0, 0.01, 40):
    time.sleep(t)
    log.clear(); chain()
    assert _in_order(log, packs)
  def parked():
    deadline = time.time() + 5
    while _ctl(pool, 0, 4) != 1 and time.time() < deadline: time.sleep(0.01)
    return _ctl(pool, 0, 4) == 1
  assert parked(), "the worker never parked"
  slow[:] = [0.02, 0.02]
  log.clear(); chain()
  assert _in_order(log, packs) and {t for _, k, _, t in log if k == 0} != {me}
  assert parked()
  slow[:] = [0.1, 0.02]
  log.clear(); chain()
  assert _in_order(log, packs) and {t for _, k, _, t in log if k == 1} != {me}
  pool.close()
