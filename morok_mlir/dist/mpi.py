"""The MPI backend: mpi4py's nonblocking collectives on the host memory of CPU Buffers (no copy), each one polled to
completion against a deadline, so a rank that died or hangs is a DistError here, not a hang. A Buffer on another
device crosses to the host first (no CUDA-aware MPI is assumed). Started by mpiexec (its PMI environment), or alone as
a world of one."""
from __future__ import annotations
import atexit, os, sys, time
import numpy as np
from morok_mlir.device.buffer import Buffer
from morok_mlir.dist import DistError, _check_world

_aborting = []   # set once an operation timed out: the process leaves without MPI_Finalize, which would wait for the lost
                 # rank; mpiexec ends the job when a rank exits so (MPI_Abort instead could cut the error's text short)

def _abort_at_exit():
  if _aborting:
    sys.stdout.flush(); sys.stderr.flush()
    os._exit(1)

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
    self.OPS = {"sum": MPI.SUM, "max": MPI.MAX, "min": MPI.MIN, "prod": MPI.PROD}
    atexit.register(_abort_at_exit)

  def array(self, b: Buffer, shape) -> np.ndarray:
    """The host array MPI reads or writes: a CPU Buffer's own memory, else a host copy (written back by the caller)."""
    if hasattr(b.allocator, "as_numpy"): return b.as_numpy().reshape(shape)
    raise DistError(f"the MPI backend moves host memory: {b.device} tensors go through .to('CPU') first (or use the nccl backend)")

  def wait(self, req, what: str):
    """Poll req until done: MPI progresses only inside Test, so it spins (as a blocking call would) for a second, then
    naps 1 ms between tests until the deadline."""
    test, t0 = req.Test, time.monotonic()
    while not test():
      for _ in range(256):
        if test(): return
      if (dt := time.monotonic() - t0) > self.timeout:
        _aborting.append(what)
        raise DistError(f"rank {self.rank}: {what} did not complete within {self.timeout:g} s: another rank died, hangs, or called a "
                        "different collective (the job ends when this process exits)")
      if dt > 1.0: time.sleep(1e-3)

  def allreduce(self, src, out, op: str, what: str): self.wait(self.comm.Iallreduce(src, out, self.OPS[op]), what)
  def allgather(self, src, out, what: str) -> np.ndarray:
    self.wait(self.comm.Iallgather(src, out), what)
    return out
  def reduce_scatter(self, src, out, op: str, what: str): self.wait(self.comm.Ireduce_scatter_block(src, out, self.OPS[op]), what)
  def broadcast(self, src, out, root: int, what: str):
    if self.rank == root: out[...] = src
    self.wait(self.comm.Ibcast(out, root), what)
  def send(self, arr, dst: int, what: str, tag: int = 0): self.wait(self.comm.Isend(arr, dst, tag), what)
  def recv(self, arr, src: int, what: str, tag: int = 0, count: bool = False):
    self.wait(self.comm.Irecv(arr, src, tag), what)
    return arr
  def barrier(self): self.wait(self.comm.Ibarrier(), "barrier")
  def close(self): pass
