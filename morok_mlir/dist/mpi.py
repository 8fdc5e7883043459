"""The MPI backend: mpi4py's nonblocking collectives on the host memory of CPU Buffers themselves (no copy), each
polled (Test) against a deadline, so that a rank that died, hangs or called another collective is a DistError the
caller can catch. MPI cannot cancel a started collective: after a timeout the communicator is unusable (every later
call raises at once), and at exit the process aborts the MPI job (MPI_Finalize would wait for the lost rank), which
makes mpiexec end the other ranks. Started by mpiexec (its PMI environment), or alone as a world of one."""
from __future__ import annotations
import atexit, os, sys, time
import numpy as np
from morok_mlir.device.buffer import Buffer
from morok_mlir.core.provenance import error as _err
from morok_mlir.dist import DistError, _check_world, name

NOTE = 256   # bytes of a fault notice: what the rank that gave up was waiting in
BOOL = np.dtype(np.bool_)
SPIN = 1e-4   # seconds a wait spins before it yields the core at each test (MPIBackend._wait)
ABORT_GRACE = 0.5   # seconds between the last flush and MPI_Abort at exit (see MPIBackend._abort)

def raw(a: np.ndarray) -> np.ndarray:
  """a, or its bytes as unsigned ints where numpy's buffer protocol does not take its dtype (ml_dtypes' bfloat16, fp8)."""
  return a.view(f"u{a.itemsize}") if a.dtype.kind == "V" else a

class MPIBackend:
  def __init__(self, env: dict, timeout: float):
    try:
      import mpi4py
      mpi4py.rc.threads = False
      from mpi4py import MPI
    except ImportError as e: raise DistError(f"the MPI backend needs mpi4py and an MPI library: pip install 'morok-mlir[dist]' ({e})") from None
    self.MPI, self.comm, self.timeout = MPI, MPI.COMM_WORLD, timeout
    self.rank, self.world_size = self.comm.Get_rank(), self.comm.Get_size()
    _check_world(env, self.rank, self.world_size, "MPI")
    local = self.comm.Split_type(MPI.COMM_TYPE_SHARED, key=self.rank)
    self.local_rank = local.Get_rank()
    local.Free()
    # the shape check and the fault notices on communicators of their own: their messages never match a collective's
    self.checks, self.faults = self.comm.Dup(), self.comm.Dup()
    self.OPS = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN, "prod": MPI.PROD}
    # MPI_C_BOOL takes logical ops only: a sum or max of bools is their or, a min or prod their and (as cast to bool)
    self.BOOL_OPS = {"sum": MPI.LOR, "max": MPI.LOR, "min": MPI.LAND, "prod": MPI.LAND}
    self.broken, self.notes = None, []   # what timed out (None: usable); the notices' send requests

  def array(self, b: Buffer) -> np.ndarray:
    """The flat host array MPI reads or writes: a CPU Buffer's own memory."""
    if type(h := b._buf) is np.ndarray and b.base is None: return h   # (a CPU Buffer's handle is its array)
    if hasattr(b.allocator, "as_numpy"): return b.as_numpy()
    _err(DistError, f"the MPI backend moves host memory: {b.device} tensors go through .to('CPU') first (or use the nccl backend)")

  def usable(self, what):
    if self.broken is not None:
      raise DistError(f"rank {self.rank}: {name(what)}: this communicator is unusable since {self.broken} timed out (MPI cannot cancel a "
                      "started collective): end the process")
  def run(self, what, start, *args):
    """start(*args), an MPI nonblocking call, tested until done or the deadline."""
    if self.broken is not None: self.usable(what)
    try:
      if not (req := start(*args)).Test(): self._wait(req, what)
    except self.MPI.Exception as e: self._failed(what, e)
  def _wait(self, req, what):
    """req tested until done or the deadline: the clock is read only once a first Test found it running, and after SPIN
    each test yields the core (where ranks outnumber free cores, the rank this one waits for may need it). The last
    part of the timeout (a tenth, at most 1 s) is left to learn which ranks also gave up."""
    t0 = time.monotonic()
    end, spin = t0 + self.timeout - min(1.0, self.timeout / 10), t0 + SPIN
    while not req.Test():
      if (t := time.monotonic()) > spin:
        if t > end: self._fault(what, t0 + self.timeout)
        os.sched_yield()
  def _failed(self, what, e):
    self._broke(what := name(what))
    raise DistError(f"rank {self.rank}: {what} failed in MPI: {e.Get_error_string()}") from None
  def _fault(self, what, deadline: float):
    """Tell the other ranks what this one gave up on, hear what they gave up on until the deadline, and raise."""
    self._broke(what := name(what))
    note = np.frombuffer(what.encode()[:NOTE].ljust(NOTE), np.uint8)
    for p in range(self.world_size):
      if p != self.rank:
        try: self.notes.append(self.faults.Isend(note, p, 0))
        except self.MPI.Exception: pass
    heard, buf, st = {}, np.empty(NOTE, np.uint8), self.MPI.Status()
    while len(heard) < self.world_size - 1 and time.monotonic() < deadline:
      if self.faults.Iprobe(self.MPI.ANY_SOURCE, 0, st):
        self.faults.Recv(buf, st.Get_source(), 0)
        heard[st.Get_source()] = buf.tobytes().rstrip().decode(errors="replace")
      else: time.sleep(1e-3)
    lost = [p for p in range(self.world_size) if p != self.rank and p not in heard]
    why = ([f"no word from rank{'s' * (len(lost) > 1)} {', '.join(map(str, lost))} (died, hangs, or is busy elsewhere)"] if lost else []) + \
          [f"rank {p} gave up in {w}" for p, w in sorted(heard.items())]
    raise DistError(f"rank {self.rank}: {what} did not complete within {self.timeout:g} s: {'; '.join(why)}. This communicator is unusable "
                    "now: later calls raise, and at exit this process aborts the MPI job")
  def _broke(self, what: str):
    if self.broken is None: atexit.register(self._abort)
    self.broken = what
  def _abort(self):
    sys.stdout.flush(); sys.stderr.flush()
    # mpiexec forwards a rank's output through its proxy, and an abort tears the proxy down: the last lines the process
    # wrote (the error it caught, typically) were lost about one time in ten without a moment to forward them
    time.sleep(ABORT_GRACE)
    self.comm.Abort(1)

  def reduce(self, start, what, src, out, op: str):
    """start(src, out, MPI op), a reduction; src None: in place (MPI_IN_PLACE, out the source). MPI has no bfloat16 or
    fp8 (ml_dtypes' kind "V", which numpy's buffer protocol does not take either): those reduce in float32, rounded back once."""
    if (dt := out.dtype).kind != "V":
      return self.run(what, start, self.MPI.IN_PLACE if src is None else src, out, (self.BOOL_OPS if dt is BOOL else self.OPS)[op])
    wide = np.empty(out.size, np.float32)
    self.run(what, start, (out if src is None else src).astype(np.float32), wide, self.OPS[op])
    out[...] = wide
  def allreduce(self, src, out, op: str, what):
    """reduce's usual case (no bool or float32 stand-in) as one call: its own time is most of a small allreduce's."""
    if out.dtype.kind in "bV": return self.reduce(self.comm.Iallreduce, what, src, out, op)
    if self.broken is not None: self.usable(what)
    try:
      if not (req := self.comm.Iallreduce(self.MPI.IN_PLACE if src is None else src, out, self.OPS[op])).Test(): self._wait(req, what)
    except self.MPI.Exception as e: self._failed(what, e)
  def allreduce_fn(self, op: str, dtype: np.dtype):
    """allreduce for one op and dtype as run(src, out, what), its MPI op and bound calls looked up once (the caller has
    checked `broken`): a 1 KiB allreduce's Python is most of its time."""
    if dtype.kind in "bV": return lambda src, out, what: self.reduce(self.comm.Iallreduce, what, src, out, op)
    start, mop, in_place, exc, wait = self.comm.Iallreduce, self.OPS[op], self.MPI.IN_PLACE, self.MPI.Exception, self._wait
    def run(src, out, what):
      try:
        if not (req := start(in_place if src is None else src, out, mop)).Test(): wait(req, what)
      except exc as e: self._failed(what, e)
    return run
  def allgather(self, src, out, what): self.run(what, self.comm.Iallgather, raw(src), raw(out))
  def agree(self, src, out, what: str) -> np.ndarray:
    self.run(what, self.checks.Iallgather, src, out)
    return out
  def reduce_scatter(self, src, out, op: str, what): self.reduce(self.comm.Ireduce_scatter_block, what, src, out, op)
  def broadcast(self, src, out, root: int, what):
    if self.rank == root: out[...] = src
    self.run(what, self.comm.Ibcast, raw(out), root)
  def send(self, arr, dst: int, what: str, tag: int = 0): self.run(what, self.comm.Isend, raw(arr), dst, tag)
  def recv(self, arr, src: int, what: str, tag: int = 0):
    self.run(what, self.comm.Irecv, raw(arr), src, tag)
    return arr
  def barrier(self): self.run("barrier", self.comm.Ibarrier)
  def close(self): pass
