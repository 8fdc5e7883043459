"""The CPU's worker threads: the chunks of a parallel phase handed over through shared memory, not through locks.

Waking a thread blocked on a lock costs 30-160 us on these VMs (measured: a two-chunk phase of empty chunks, 33 us
median back to back, 160 us after 50 ms idle; about 150 such phases per resnet50 call), so each worker spends its life
in a native loop (`morok_worker`, below, compiled once by the JIT; ctypes releases the GIL while it runs): it watches
its control block's job number, calls the posted function pointer on the posted argument pack, and publishes the
number it finished (4 us per phase, measured). Idle, it spins (x86 `pause`) for SPIN rounds (1-2 ms), then parks: it
returns to Python and blocks on a lock, which the next post releases. Sleeping in short naps instead of parking was
measured no better: a 50 us nap oversleeps to ~110, so a post then waits 60-110 us. The caller waits for a chunk in
native code too: it spins for WAIT_SPIN rounds (a worker's chunk rarely runs that much longer than the caller's), then
yields the core between looks (to a thread with work, where there is one).

Control block (i64, one 64-byte line per worker): 0 job posted, 1 function, 2 argument, 3 job done, 4 parked (0 or 1),
5 the worker's spin rounds, 6 the caller's, 7 the last job taken. A job is run by whoever takes it first (an atomic
exchange of its number into field 7): the worker when it sees it, or the caller once its own chunks are done, so a
worker that is descheduled (other processes hold the cores) or parked costs the caller a chunk's time, not a
scheduler's time slice (measured: 2-thread kernels 10-300x slower than 1-thread ones at load 4-8 on 2 cores). With more threads than cores both are 0: a spinning thread would take a
core from one that has work (MOROK_THREADS above the core count).
Park handshake: the worker sets parked by compare-and-swap and reads the job number again; the caller stores the job
number and then exchanges parked for 0: whichever goes second sees the other's write, so a posted job is never missed.
The lock holds at most one wake: the caller releases it only while it is locked (it alone releases, the worker alone
acquires), so a wake the worker did not need only makes it look once more.
Python callables run through a ctypes trampoline; a worker's exception is re-raised by the caller once every chunk it
handed out is done.
A Chain runs many kernels' phases in one native call (`morok_run`): each phase's chunks posted and waited for as run()
does, so a replay of a model's kernels does not come back to Python between them. Parked workers are woken before the
call; one that parks during it (a phase more than SPIN rounds after the last) is woken through a ctypes callback."""
from __future__ import annotations
import atexit, ctypes, functools, os, platform, threading

SPIN, WAIT_SPIN = 50000, 200000
PAUSE = "pause" if platform.machine().lower() in ("x86_64", "amd64", "i686", "i386") else "yield"

# the worker's native loop and the caller's two halves (post a job, wait for it), in the LLVM dialect
def _src() -> str:
  i64, ptr = "i64", "!llvm.ptr"
  field = lambda i, name: f"    %{name} = llvm.getelementptr %ctl[{i}] : (!llvm.ptr) -> !llvm.ptr, i64\n"
  const = lambda name, v, t="i64": f"    %{name} = llvm.mlir.constant({v} : {t}) : {t}\n"
  load = lambda name, p, order="acquire": f"    %{name} = llvm.load %{p} atomic {order} {{alignment = 8 : i64}} : !llvm.ptr -> i64\n"
  pause = f'    llvm.inline_asm has_side_effects "{PAUSE}", "" : () -> ()\n'
  return f"""module {{
  llvm.func @sched_yield() -> i32
  llvm.func @morok_worker(%ctl: {ptr}) -> {i64} {{
{const('c0', 0)}{const('c1', 1)}{const('quit', -1)}\
{field(1, 'pfn')}{field(2, 'parg')}{field(3, 'pdone')}{field(4, 'pstate')}{field(5, 'pspin')}{field(7, 'ptaken')}{load('last0', 'pdone')}\
    %spin = llvm.load %pspin {{alignment = 8 : i64}} : !llvm.ptr -> i64
    llvm.br ^wait(%last0, %c0 : i64, i64)
  ^wait(%last: i64, %n: i64):
{load('s', 'ctl')}\
    %new = llvm.icmp "ne" %s, %last : i64
    %n1 = llvm.add %n, %c1 : i64
    llvm.cond_br %new, ^run(%s : i64), ^idle
  ^idle:
    %spinning = llvm.icmp "ult" %n, %spin : i64
    llvm.cond_br %spinning, ^pause, ^park
  ^pause:
{pause}    llvm.br ^wait(%last, %n1 : i64, i64)
  ^park:
    %old = llvm.cmpxchg %pstate, %c0, %c1 seq_cst seq_cst : !llvm.ptr, i64
{load('s2', 'ctl', 'seq_cst')}\
    %new2 = llvm.icmp "ne" %s2, %last : i64
    llvm.cond_br %new2, ^unpark, ^parked
  ^unpark:
    %old2 = llvm.cmpxchg %pstate, %c1, %c0 seq_cst seq_cst : !llvm.ptr, i64
    llvm.br ^run(%s2 : i64)
  ^parked:
    llvm.return %c0 : i64
  ^run(%job: i64):
    %stop = llvm.icmp "eq" %job, %quit : i64
    llvm.cond_br %stop, ^stop, ^claim
  ^claim:
    %prev = llvm.atomicrmw xchg %ptaken, %job seq_cst : !llvm.ptr, i64
    %mine = llvm.icmp "ne" %prev, %job : i64
    llvm.cond_br %mine, ^call, ^wait(%job, %c0 : i64, i64)
  ^call:
    %fn = llvm.load %pfn {{alignment = 8 : i64}} : !llvm.ptr -> !llvm.ptr
    %arg = llvm.load %parg {{alignment = 8 : i64}} : !llvm.ptr -> !llvm.ptr
    llvm.call %fn(%arg) : !llvm.ptr, (!llvm.ptr) -> ()
    llvm.store %job, %pdone atomic release {{alignment = 8 : i64}} : i64, !llvm.ptr
    llvm.br ^wait(%job, %c0 : i64, i64)
  ^stop:
    llvm.return %c1 : i64
  }}
  llvm.func @morok_post(%ctl: {ptr}, %fn: {ptr}, %arg: {ptr}, %seq: {i64}) -> {i64} {{
{const('c0', 0)}{field(1, 'pfn')}{field(2, 'parg')}{field(4, 'pstate')}\
    llvm.store %fn, %pfn {{alignment = 8 : i64}} : !llvm.ptr, !llvm.ptr
    llvm.store %arg, %parg {{alignment = 8 : i64}} : !llvm.ptr, !llvm.ptr
    llvm.store %seq, %ctl atomic seq_cst {{alignment = 8 : i64}} : i64, !llvm.ptr
    %old = llvm.atomicrmw xchg %pstate, %c0 seq_cst : !llvm.ptr, i64
    llvm.return %old : i64
  }}
  llvm.func @morok_wait(%ctl: {ptr}, %seq: {i64}) -> {i64} {{
{const('c0', 0)}{const('c1', 1)}{field(3, 'pdone')}{field(6, 'pspin')}{field(7, 'ptaken')}\
    %spin = llvm.load %pspin {{alignment = 8 : i64}} : !llvm.ptr -> i64
    %prev = llvm.atomicrmw xchg %ptaken, %seq seq_cst : !llvm.ptr, i64
    %stolen = llvm.icmp "ne" %prev, %seq : i64
    llvm.cond_br %stolen, ^steal, ^wait(%c0 : i64)
  ^steal:
    llvm.return %c1 : i64
  ^wait(%n: i64):
{load('d', 'pdone')}\
    %ok = llvm.icmp "eq" %d, %seq : i64
    %n1 = llvm.add %n, %c1 : i64
    llvm.cond_br %ok, ^done, ^idle
  ^idle:
    %spinning = llvm.icmp "ult" %n, %spin : i64
    llvm.cond_br %spinning, ^pause, ^sleep
  ^pause:
{pause}    llvm.br ^wait(%n1 : i64)
  ^sleep:
    %r = llvm.call @sched_yield() : () -> i32
    llvm.br ^wait(%n1 : i64)
  ^done:
    llvm.return %c0 : i64
  }}
  llvm.func @morok_run(%ctls: {ptr}, %nw: {i64}, %steps: {ptr}, %nsteps: {i64}, %wake: {ptr}) -> {i64} {{
{const('c0', 0)}{const('c1', 1)}{const('c3', 3)}{const('c8', 8)}\
    llvm.br ^step(%c0 : i64)
  ^step(%s: i64):
    %more = llvm.icmp "ult" %s, %nsteps : i64
    llvm.cond_br %more, ^body, ^end
  ^body:
    %s3 = llvm.mul %s, %c3 : i64
    %pfn = llvm.getelementptr %steps[%s3] : (!llvm.ptr, i64) -> !llvm.ptr, i64
    %fn = llvm.load %pfn {{alignment = 8 : i64}} : !llvm.ptr -> !llvm.ptr
    %pn = llvm.getelementptr %pfn[1] : (!llvm.ptr) -> !llvm.ptr, i64
    %n = llvm.load %pn {{alignment = 8 : i64}} : !llvm.ptr -> i64
    %pp = llvm.getelementptr %pfn[2] : (!llvm.ptr) -> !llvm.ptr, i64
    %packs = llvm.load %pp {{alignment = 8 : i64}} : !llvm.ptr -> !llvm.ptr
    %n1 = llvm.sub %n, %c1 : i64
    %few = llvm.icmp "ult" %n1, %nw : i64
    %k = llvm.select %few, %n1, %nw : i1, i64
    %k1 = llvm.add %k, %c1 : i64
    %s1 = llvm.add %s, %c1 : i64
    llvm.br ^post(%c0 : i64)
  ^post(%i: i64):
    %posting = llvm.icmp "ult" %i, %k : i64
    llvm.cond_br %posting, ^postb, ^extra(%k1 : i64)
  ^postb:
    %i8 = llvm.mul %i, %c8 : i64
    %ctl = llvm.getelementptr %ctls[%i8] : (!llvm.ptr, i64) -> !llvm.ptr, i64
    %last = llvm.load %ctl {{alignment = 8 : i64}} : !llvm.ptr -> i64
    %seq = llvm.add %last, %c1 : i64
    %ip1 = llvm.add %i, %c1 : i64
    %ppk = llvm.getelementptr %packs[%ip1] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    %pk = llvm.load %ppk {{alignment = 8 : i64}} : !llvm.ptr -> !llvm.ptr
    %old = llvm.call @morok_post(%ctl, %fn, %pk, %seq) : (!llvm.ptr, !llvm.ptr, !llvm.ptr, i64) -> i64
    %parked = llvm.icmp "eq" %old, %c1 : i64
    llvm.cond_br %parked, ^wake, ^post(%ip1 : i64)
  ^wake:
    llvm.call %wake(%i) : !llvm.ptr, (i64) -> ()
    llvm.br ^post(%ip1 : i64)
  ^extra(%j: i64):
    %extra = llvm.icmp "ult" %j, %n : i64
    %j1 = llvm.add %j, %c1 : i64
    llvm.cond_br %extra, ^extrab, ^own
  ^extrab:
    %pej = llvm.getelementptr %packs[%j] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    %ej = llvm.load %pej {{alignment = 8 : i64}} : !llvm.ptr -> !llvm.ptr
    llvm.call %fn(%ej) : !llvm.ptr, (!llvm.ptr) -> ()
    llvm.br ^extra(%j1 : i64)
  ^own:
    %p0 = llvm.load %packs {{alignment = 8 : i64}} : !llvm.ptr -> !llvm.ptr
    llvm.call %fn(%p0) : !llvm.ptr, (!llvm.ptr) -> ()
    llvm.br ^wait(%c0 : i64)
  ^wait(%w: i64):
    %waiting = llvm.icmp "ult" %w, %k : i64
    %w1 = llvm.add %w, %c1 : i64
    llvm.cond_br %waiting, ^waitb, ^step(%s1 : i64)
  ^waitb:
    %w8 = llvm.mul %w, %c8 : i64
    %wctl = llvm.getelementptr %ctls[%w8] : (!llvm.ptr, i64) -> !llvm.ptr, i64
    %wseq = llvm.load %wctl {{alignment = 8 : i64}} : !llvm.ptr -> i64
    %r = llvm.call @morok_wait(%wctl, %wseq) : (!llvm.ptr, i64) -> i64
    %stolen = llvm.icmp "eq" %r, %c1 : i64
    llvm.cond_br %stolen, ^steal, ^wait(%w1 : i64)
  ^steal:
    %psw = llvm.getelementptr %packs[%w1] : (!llvm.ptr, i64) -> !llvm.ptr, !llvm.ptr
    %sw = llvm.load %psw {{alignment = 8 : i64}} : !llvm.ptr -> !llvm.ptr
    llvm.call %fn(%sw) : !llvm.ptr, (!llvm.ptr) -> ()
    llvm.br ^wait(%w1 : i64)
  ^end:
    llvm.return %c0 : i64
  }}
}}
"""

_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)   # an engine's packed wrapper: void f(void **args)
_WAKE = ctypes.CFUNCTYPE(None, ctypes.c_int64)

def _packed(*vals) -> tuple:
  """A packed-call argument array pointing at vals (kept alive with it)."""
  return (ctypes.c_void_p * len(vals))(*[ctypes.addressof(v) for v in vals]), vals

NAMES = ("morok_worker", "morok_post", "morok_wait", "morok_run")
# (src, names, lock) -> (what holds the code, each name's packed entry point): device/cpu.py sets it to its disk cache's
# (the loops' object kept as a kernel's, so a process that compiles nothing loads no MLIR)
BUILD = None

_engine_lock, _compiled = threading.Lock(), []
def _engine(lock: threading.Lock | None = None) -> tuple:
  """(engine, worker, post, wait, run): the native loops, compiled once per process (by whichever of the pool and a
  Chain needs them first; lock: the one MLIR's compiles take)."""
  with _engine_lock:
    if not _compiled:
      if BUILD is not None: eng, addrs = BUILD(_src(), NAMES, lock or threading.Lock())
      else:
        from morok_mlir.ir import load
        load()
        from mlir import ir
        from mlir.execution_engine import ExecutionEngine
        with lock or threading.Lock(), ir.Context(), ir.Location.unknown(): eng = ExecutionEngine(ir.Module.parse(_src()), opt_level=3)
        addrs = [eng.raw_lookup(name) for name in NAMES]
      _compiled.append((eng, *map(_FN, addrs)))
  return _compiled[0]

class _Worker:
  __slots__ = ("ctl", "go", "wres", "wargs", "err", "job", "seq", "thread")
  def __init__(self, ctl: int):
    self.ctl, self.go, self.wres, self.err, self.job, self.seq = ctl, threading.Lock(), ctypes.c_int64(), None, None, 0
    self.go.acquire()   # locked: no wake pending
    self.wargs = _packed(ctypes.c_void_p(ctl), self.wres)

class Pool:
  """n worker threads; run(fn, packs) calls fn on each pack, one on the caller's thread. fn is a ctypes function (its
  packs ctypes arrays, passed by address) or any Python callable. One caller at a time: a second thread calling in
  meanwhile runs its chunks itself. The caller waits for every chunk it handed out even when its own raises, so no
  worker outlives the call that handed it a chunk."""
  def __init__(self, n: int, lock: threading.Lock | None = None):
    self.engine, self.worker_fn, post, wait, _ = _engine(lock)
    self.ctl = (ctypes.c_int64 * (8 * n + 8))()
    base = -(-ctypes.addressof(self.ctl) // 64) * 64   # each worker's block on its own cache line
    self.workers = [_Worker(base + 64 * i) for i in range(n)]
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    for w in self.workers:
      for field, v in ((5, SPIN), (6, WAIT_SPIN)): ctypes.c_int64.from_address(w.ctl + 8 * field).value = v if n + 1 <= cores else 0
    # the caller's halves, on argument holders it rewrites per call (busy serializes callers)
    self.fn, self.arg, self.seq, self.res, self.at = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_int64(), ctypes.c_int64(), ctypes.c_void_p()
    (pa, self._pa), (wa, self._wa) = _packed(self.at, self.fn, self.arg, self.seq, self.res), _packed(self.at, self.seq, self.res)
    self.post, self.wait = lambda: post(pa), lambda: wait(wa)
    self.tramp = _FN(self._python)   # Python callables: the worker calls back into Python with its index
    self.wake = _WAKE(self._wake)    # a Chain's post found worker i parked
    self.busy, self.closed = threading.Lock(), False
    self.parked = [(w, ctypes.c_int64.from_address(w.ctl + 32)) for w in self.workers]   # (field 4, read by a Chain)
    for w in self.workers:
      w.thread = threading.Thread(target=self._loop, args=(w,), daemon=True, name="morok-cpu")
      w.thread.start()
    atexit.register(self.close)

  def _loop(self, w: _Worker) -> None:
    while True:
      self.worker_fn(w.wargs[0])   # native until parked (0) or told to quit (1)
      if w.wres.value == 1: return
      w.go.acquire()

  def _python(self, i: int) -> None:
    w = self.workers[i - 1]
    try: w.job[0](w.job[1])
    except BaseException as e: w.err = e

  def _wake(self, i: int) -> None:
    if (w := self.workers[i]).go.locked(): w.go.release()

  def _hand(self, w: _Worker, i: int, fn, pack, seq: int | None = None) -> None:
    # (the job number from the control block: a Chain posts jobs too)
    w.seq = ctypes.c_int64.from_address(w.ctl).value + 1 if seq is None else seq
    if isinstance(fn, ctypes._CFuncPtr): self.fn.value, self.arg.value = ctypes.cast(fn, ctypes.c_void_p).value, pack and ctypes.addressof(pack)
    else: w.job, self.fn.value, self.arg.value = (fn, pack), ctypes.cast(self.tramp, ctypes.c_void_p).value, i + 1
    self.at.value, self.seq.value = w.ctl, w.seq
    self.post()
    if self.res.value == 1 and w.go.locked(): w.go.release()   # it had parked

  def run(self, fn, packs) -> None:
    if (mine := self.busy.acquire(blocking=False)) and self.closed: self.busy.release(); mine = False
    if not mine:   # another caller has the workers, or they are stopped
      for p in packs: fn(p)
      return
    started, err = [], None
    try:
      for i, (w, p) in enumerate(zip(self.workers, packs[1:])): self._hand(w, i, fn, p); started.append((w, p))
      for p in packs[len(started) + 1:]: fn(p)
      fn(packs[0])
    finally:
      for w, p in started:
        self.at.value, self.seq.value = w.ctl, w.seq
        self.wait()
        if self.res.value == 1:   # the worker had not taken its chunk yet (descheduled, or parked): the caller runs it
          try: fn(p)
          except BaseException as e: err = err or e
        w.job = None
        if w.err is not None: err, w.err = w.err, None
      self.busy.release()
    if err is not None: raise err

  def close(self) -> None:
    """Stop the workers (at exit: none may be running the engine's code when it is freed)."""
    with self.busy:
      self.closed = True
      for i, w in enumerate(self.workers):
        self._hand(w, i, _FN(), None, seq=-1)
        w.thread.join(1.0)

class Chain:
  """Kernel phases run in order by one native call: steps is [(function address, [argument pack address per chunk])],
  each function an engine's packed wrapper. A phase of several chunks hands them to pool's workers as Pool.run does
  (the caller runs the first, those beyond the workers, and any a worker has not taken yet); without the pool's
  workers (another caller has them, or pool is None: no phase has several chunks) the caller runs every chunk. lock:
  the one MLIR's compiles take (as Pool's)."""
  def __init__(self, steps: list[tuple[int, list[int]]], pool: Pool | None, lock: threading.Lock | None = None):
    run = _engine(lock)[4]
    self.packs = [(ctypes.c_void_p * len(packs))(*packs) for _, packs in steps]
    self.steps = (ctypes.c_int64 * (3 * len(steps) or 1))(*[x for (fn, packs), a in zip(steps, self.packs)
                                                            for x in (fn, len(packs), ctypes.addressof(a))])
    def call(nw: int):
      args = _packed(ctypes.c_void_p(pool.workers[0].ctl if nw else 0), ctypes.c_int64(nw), ctypes.c_void_p(ctypes.addressof(self.steps)),
                     ctypes.c_int64(len(steps)), ctypes.c_void_p(ctypes.cast(pool.wake, ctypes.c_void_p).value if nw else 0), ctypes.c_int64())
      return functools.partial(run, args[0]), args
    (self.serial, self._s), self.pool = call(0), pool if pool is not None and pool.workers else None
    if self.pool is not None: self.par, self._p = call(len(pool.workers))
  def __call__(self) -> None:
    if (pool := self.pool) is None: return self.serial()
    if not pool.busy.acquire(blocking=False): return self.serial()
    try:
      if pool.closed: return self.serial()
      # a parked worker is woken here, where the GIL is held, rather than by the native call's callback (which takes the
      # GIL: another thread running Python may hold it for up to its switch interval); no job is posted meanwhile (busy
      # is held), so the worker only looks again and spins. One that parks during the call is woken by the callback.
      for w, parked in pool.parked:
        if parked.value:
          parked.value = 0
          if w.go.locked(): w.go.release()
      self.par()
    finally: pool.busy.release()
