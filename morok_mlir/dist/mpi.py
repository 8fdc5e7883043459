"""The MPI backend: mpi4py's blocking collectives on the host memory of CPU Buffers themselves (no copy). A watchdog
thread holds each call to a deadline: past it, the process reports a DistError naming the rank and the operation and
exits without MPI_Finalize (which would wait for the lost rank), and mpiexec ends the job. (Nonblocking calls polled
against the deadline would raise in the caller instead, but MPICH runs them 1.5-6x slower than the blocking ones on
large messages.) Started by mpiexec (its PMI environment), or alone as a world of one."""
from __future__ import annotations
import os, sys, threading, time
import numpy as np
from morok_mlir.device.buffer import Buffer
from morok_mlir.dist import DistError, _check_world

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
    self.watch = None   # (deadline, what) of the call in progress
    threading.Thread(target=self._watchdog, daemon=True, name="morok-dist-watchdog").start()

  def array(self, b: Buffer, shape) -> np.ndarray:
    """The host array MPI reads or writes: a CPU Buffer's own memory, else a host copy (written back by the caller)."""
    if hasattr(b.allocator, "as_numpy"): return b.as_numpy().reshape(shape)
    raise DistError(f"the MPI backend moves host memory: {b.device} tensors go through .to('CPU') first (or use the nccl backend)")

  def run(self, what: str, fn, *args):
    """fn(*args), a blocking MPI call (mpi4py releases the GIL in it, so the watchdog runs)."""
    self.watch = (time.monotonic() + self.timeout, what)
    try: return fn(*args)
    finally: self.watch = None
  def _watchdog(self):
    while True:
      time.sleep(0.05)
      if (w := self.watch) is not None and time.monotonic() > w[0]:
        sys.stderr.write(f"morok_mlir.dist.DistError: rank {self.rank}: {w[1]} did not complete within {self.timeout:g} s: another rank "
                         "died, hangs, or called a different collective (this process exits; mpiexec ends the job)\n")
        sys.stderr.flush(); sys.stdout.flush()
        os._exit(1)

  def allreduce(self, src, out, op: str, what: str): self.run(what, self.comm.Allreduce, src, out, self.OPS[op])
  def allgather(self, src, out, what: str) -> np.ndarray:
    self.run(what, self.comm.Allgather, src, out)
    return out
  def reduce_scatter(self, src, out, op: str, what: str): self.run(what, self.comm.Reduce_scatter_block, src, out, self.OPS[op])
  def broadcast(self, src, out, root: int, what: str):
    if self.rank == root: out[...] = src
    self.run(what, self.comm.Bcast, out, root)
  def send(self, arr, dst: int, what: str, tag: int = 0): self.run(what, self.comm.Send, arr, dst, tag)
  def recv(self, arr, src: int, what: str, tag: int = 0):
    self.run(what, self.comm.Recv, arr, src, tag)
    return arr
  def barrier(self): self.run("barrier", self.comm.Barrier)
  def close(self): pass
