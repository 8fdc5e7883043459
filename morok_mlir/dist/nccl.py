"""The NCCL backend: nccl4py's Communicator on CUDA Buffers, passed as their device pointers (zero-copy) through the
CUDA Array Interface. Ranks meet as torchrun says (MASTER_ADDR:MASTER_PORT: rank 0 hands every other rank the NCCL
unique id over one TCP connection each) or, under mpiexec, through MPI's broadcast. Each rank uses CUDA device
LOCAL_RANK (CUDA_VISIBLE_DEVICES is set to it when unset, so it is this process's device 0). NCCL runs on the CUDA
device's stream, ordered with its kernels; each operation waits for the stream against the deadline."""
from __future__ import annotations
import os, socket, time
from morok_mlir.device import Device
from morok_mlir.device.buffer import Buffer
from morok_mlir.core.provenance import error as _err
from morok_mlir.dist import DistError, _check_world, name

_TYPESTR = {"bool": "|b1", "int8": "|i1", "uint8": "|u1", "int16": "<i2", "uint16": "<u2", "int32": "<i4", "uint32": "<u4", "int64": "<i8",
            "uint64": "<u8", "float16": "<f2", "float32": "<f4", "float64": "<f8"}

def _status(r) -> int: return int(r[0] if isinstance(r, tuple) else r)   # cuda-python's calls return (CUresult, ...)

class DeviceArray:
  """A CUDA Buffer seen through the CUDA Array Interface (version 3): what nccl4py reads the pointer, count and dtype of."""
  def __init__(self, b: Buffer, shape):
    if b.dtype.name not in _TYPESTR: raise DistError(f"NCCL has no {b.dtype.name} type here")
    self.buffer, self.shape = b, tuple(shape)
    self.__cuda_array_interface__ = {"shape": self.shape, "typestr": _TYPESTR[b.dtype.name], "data": (b.allocate().ptr, False),
                                     "version": 3, "strides": None, "stream": None}

def rendezvous(addr: str, port: int, rank: int, world: int, payload: bytes | None, timeout: float) -> bytes:
  """Rank 0 serves payload to the world-1 other ranks (each sends its rank and world size first, checked); they get it."""
  deadline = time.monotonic() + timeout
  if rank == 0:
    with socket.create_server((addr, port), reuse_port=False) as srv:
      srv.settimeout(timeout)
      seen = set()
      while len(seen) < world - 1:
        try: conn, _ = srv.accept()
        except socket.timeout: raise DistError(f"rank 0: only ranks {sorted(seen | {0})} of {world} reached {addr}:{port} within {timeout:g} s") from None
        with conn:
          r, w = (int(v) for v in conn.recv(64).decode().split())
          if w != world: raise DistError(f"WORLD_SIZE differs between ranks: rank 0 has {world}, rank {r} has {w}")
          seen.add(r); conn.sendall(payload)
    return payload
  while True:
    try:
      with socket.create_connection((addr, port), timeout=max(deadline - time.monotonic(), 0.1)) as c:
        c.sendall(f"{rank} {world}".encode())
        data = b""
        while chunk := c.recv(4096): data += chunk
      if not data: raise DistError(f"rank {rank}: rank 0 at {addr}:{port} refused this rank (its error says why)")
      return data
    except OSError:
      if time.monotonic() > deadline: raise DistError(f"rank {rank}: rank 0 did not answer at {addr}:{port} within {timeout:g} s") from None
      time.sleep(0.1)

class NCCLBackend:
  def __init__(self, env: dict, timeout: float):
    try: import nccl.core as nccl
    except ImportError as e: raise DistError(f"the NCCL backend needs nccl4py: pip install 'morok-mlir[nccl]' ({e})") from None
    self.nccl, self.timeout = nccl, timeout
    if env["launcher"] == "mpiexec":
      from morok_mlir.dist.mpi import MPIBackend
      m = MPIBackend(env, timeout)
      self.rank, self.world_size, self.local_rank = m.rank, m.world_size, m.local_rank
      uid = m.comm.bcast(bytes(nccl.get_unique_id()) if m.rank == 0 else None, root=0)
    else:
      if env["rank"] is None or env["world_size"] is None:
        raise DistError("the NCCL backend needs a launcher: torchrun (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) or mpiexec")
      (addr, port), self.rank, self.world_size = env["master"], env["rank"], env["world_size"]
      if addr is None or port is None: raise DistError("torchrun's MASTER_ADDR and MASTER_PORT must be set")
      self.local_rank = env["local_rank"] or 0
      _check_world(env, self.rank, self.world_size, "the launcher")
      uid = rendezvous(addr, port, self.rank, self.world_size, bytes(nccl.get_unique_id()) if self.rank == 0 else None, timeout)
    os.environ.setdefault("CUDA_VISIBLE_DEVICES", str(self.local_rank))   # before CUDA starts: LOCAL_RANK's GPU is device 0
    self.device, self.cuda = "CUDA", Device["CUDA"]
    self.cuda.init()
    self.stream = int(self.cuda.stream)
    self.comm = nccl.Communicator.init(self.world_size, self.rank, nccl.UniqueId.from_bytes(uid))
    self.OPS = {"sum": nccl.SUM, "max": nccl.MAX, "min": nccl.MIN, "prod": nccl.PROD}
    self.broken = None   # what timed out (None: usable)

  def array(self, b: Buffer) -> DeviceArray:
    if Device.canonicalize(b.device) != "CUDA":
      _err(DistError, f"the NCCL backend moves CUDA memory: {b.device} tensors go through .to('CUDA') first")
    return DeviceArray(b, (b.size,))
  def usable(self, what):
    if self.broken is not None:
      raise DistError(f"rank {self.rank}: {name(what)}: this communicator is unusable since {self.broken} timed out (its NCCL communicator "
                      "was aborted): end the process")
  def wait(self, what):
    """The stream's work done within the deadline, else abort the communicator (its peers then fail too)."""
    from morok_mlir.device.cuda import driver
    t0 = time.monotonic()
    while _status(driver().cuStreamQuery(self.cuda.stream)):   # CUDA_ERROR_NOT_READY: running
      if time.monotonic() - t0 > self.timeout:
        self.comm.abort()
        self.broken = name(what)
        raise DistError(f"rank {self.rank}: {name(what)} did not complete within {self.timeout:g} s: another rank died or hangs")
      time.sleep(1e-4)
  def allreduce(self, src, out, op, what):   # (src None: in place)
    self.comm.allreduce(out if src is None else src, out, self.OPS[op], stream=self.stream); self.wait(what)
  def allgather(self, src, out, what): self.comm.allgather(src, out, stream=self.stream); self.wait(what)
  def agree(self, src, out, what):   # the small shape check: through a device copy of the host array
    return self._host(lambda s, o: self.comm.allgather(s, o, stream=self.stream), src, out, what)
  def reduce_scatter(self, src, out, op, what): self.comm.reduce_scatter(src, out, self.OPS[op], stream=self.stream); self.wait(what)
  def broadcast(self, src, out, root, what): self.comm.broadcast(src, out, root, stream=self.stream); self.wait(what)
  def send(self, arr, dst, what, tag=0):
    if not hasattr(arr, "__cuda_array_interface__"): return self._host(lambda s, o: self.comm.send(s, dst, stream=self.stream), arr, None, what)
    self.comm.send(arr, dst, stream=self.stream); self.wait(what)
  def recv(self, arr, src, what, tag=0):
    if not hasattr(arr, "__cuda_array_interface__"): return self._host(lambda s, o: self.comm.recv(o, src, stream=self.stream), None, arr, what)
    self.comm.recv(arr, src, stream=self.stream); self.wait(what)
    return arr
  def _host(self, fn, src, out, what):
    """fn on device copies of host arrays (headers, shape checks); out, when given, filled from the result."""
    from morok_mlir.core.dtype import dtypes
    s = Buffer(self.device, src.size, dtypes.int64).copyin(src.reshape(-1)) if src is not None else None
    o = Buffer(self.device, out.size, dtypes.int64).allocate() if out is not None else None
    fn(s and DeviceArray(s, src.shape), o and DeviceArray(o, out.shape))
    self.wait(what)
    if o is not None: o.copyout(out.reshape(-1))
    return out
  def barrier(self):
    import numpy as np
    self.agree(np.zeros(1, np.int64), np.zeros(self.world_size, np.int64), "barrier")
  def close(self): self.comm.destroy()
