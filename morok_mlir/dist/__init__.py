"""Several processes: a Communicator (allreduce, allgather, reduce_scatter, broadcast, send/recv, barrier) over an
existing engine: MPI (mpi4py, CPU buffers, one host or many) or NCCL (nccl4py, CUDA buffers, zero-copy on device
pointers). No transport of our own: a backend moves the bytes of realized Buffers.

  comm = dist.init()              # the launcher's environment: mpiexec (PMI_RANK/PMI_SIZE, OMPI_COMM_WORLD_*) or
                                  # torchrun/Slurm (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT)
  comm.allreduce(t, op="sum")     # -> a new Tensor: the elementwise sum (or max/min/prod) over ranks
  comm.all_reduce(t, op="sum")    # t's value replaced by it (torch.distributed.all_reduce), in t's memory where safe
  comm.allgather(t)               # the ranks' tensors concatenated along dim 0
  comm.reduce_scatter(t)          # the sum over ranks, rank r keeping its part r of dim 0
  comm.broadcast(t, root=0); comm.send(t, dst); comm.recv(shape, dtype, src); comm.barrier()

Faults are errors, not hangs: every operation completes within `timeout` seconds (MOROK_DIST_TIMEOUT, default 300)
or raises a DistError naming the rank, the operation and the ranks that did not answer (died, hang, or called another
collective); the communicator is unusable after it (later calls raise at once; MPI: the process aborts the job at
exit; NCCL: the communicator aborted). Before a collective the ranks compare shapes and dtypes, and a mismatch is a
DistError naming both ranks' (MOROK_DIST_CHECK=0 skips that small extra message, and so does a call every rank
expects: a repeat, or the next of a cycle of calls seen twice, as a training step's); a WORLD_SIZE or RANK that
disagrees with the engine's is refused at init."""
from __future__ import annotations
import math, os
from sys import getrefcount
from weakref import getweakrefcount
import numpy as np
from morok_mlir.core import env as knobs
from morok_mlir.core.dtype import DType, dtypes, to_dtype
from morok_mlir.core.provenance import error as _err
from morok_mlir.device.buffer import Buffer
from morok_mlir import realize as R
from morok_mlir.realize import new_buffer
from morok_mlir.tensor import Tensor, _data
from morok_mlir.dialects.ops import Ops
from morok_mlir.device import Device
from morok_mlir import multi_realize as _multi
from morok_mlir.core import multi as _core_multi

class DistError(RuntimeError): pass

OPS = ("sum", "max", "min", "prod")
_DTYPES = [dtypes.bool, dtypes.int8, dtypes.uint8, dtypes.int16, dtypes.uint16, dtypes.int32, dtypes.uint32, dtypes.int64,
           dtypes.uint64, dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64]

def launch_env(environ=os.environ) -> dict:
  """rank, world_size, local_rank as the launcher says (None where it does not), and the launcher's name."""
  def num(*keys):
    for k in keys:
      if (v := environ.get(k)) is not None:
        if not v.strip().isdigit(): raise DistError(f"{k}={v!r} is not a non-negative integer")
        return int(v)
    return None
  mpi = num("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK") is not None
  return {"rank": num("RANK"), "world_size": num("WORLD_SIZE"), "local_rank": num("LOCAL_RANK", "MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK"),
          "master": (environ.get("MASTER_ADDR"), num("MASTER_PORT")), "launcher": "mpiexec" if mpi else "torchrun" if num("RANK") is not None else None}

def _check_world(env: dict, rank: int, size: int, engine: str):
  """The launcher's RANK/WORLD_SIZE must be the engine's: a mismatch (a torchrun run of an MPI program, two mpiexec
  sizes) would otherwise hang in the first collective."""
  if env["world_size"] is not None and env["world_size"] != size:
    raise DistError(f"WORLD_SIZE={env['world_size']} but {engine} sees {size} process(es): launch with `mpiexec -n {env['world_size']}`"
                    f"{' (torchrun starts processes MPI does not connect)' if env['launcher'] == 'torchrun' else ''}")
  if env["rank"] is not None and env["rank"] != rank: raise DistError(f"RANK={env['rank']} but {engine} numbers this process {rank}")

HEAD_DIMS = 8   # a collective's (ndim, dtype, shape) header, as every rank sends and receives it: 2 + HEAD_DIMS int64s
def _header(shape, dtype: DType) -> np.ndarray:
  return np.array([len(shape), _DTYPES.index(dtype) if dtype in _DTYPES else -1, *shape, *[0] * (HEAD_DIMS - len(shape))], np.int64)
def _describe(head: np.ndarray) -> str: return f"{_DTYPES[head[1]].name if head[1] >= 0 else '?'}{head[2:2 + head[0]].tolist()}"

CYCLE = 64   # calls: the longest cycle of collectives (a training step's) whose shape checks are skipped once seen twice
HOST = 1 << 21   # bytes: a host result under this is numpy's memory (Communicator._out)
RING = 1 << 19   # bytes: an allreduce result under this reuses one of the last two of its signature nothing references (Results)
_BUF, _ND = Ops.BUFFER, np.ndarray   # (module names: a global's lookup is cheaper than np's attribute, in every call)

def name(what) -> str:
  """An operation's name for an error: a str, or a function making it (formatted only when an error needs it)."""
  return what() if callable(what) else what

def _sole(x: Tensor) -> Buffer | None:
  """x's Buffer when x may be written in place: x alone holds its buffer node (and the node's cached toposort), the node
  alone its Buffer, the Buffer alone its memory, which no one else views (numpy's own, or the driver's: realize._made)
  and no other device holds a cached copy of (a weak reference). The references counted here: getrefcount's, the names
  u, b and h (b._buf, counted before h is bound), and _made's weak one."""
  u = x.uop
  if u.op is not _BUF or getrefcount(u) != 3 + ("toposort" in u.__dict__) or (b := u.buffer) is None or b.base is not None or \
     getrefcount(b) != 3 or getrefcount(b._buf) != 2: return None
  h = b._buf   # numpy's own memory: h's, or that of the array h views, held by h alone
  own = type(h) is _ND and ((a := h.base) is None or type(a) is _ND and a.base is None and getrefcount(a) == 3)
  return b if getweakrefcount(b) == (0 if own else 1) and (own or b in R._made) else None

def _writable(a) -> bool:
  """A backend's array made writable (a Tensor's host memory is read-only, and so is the array a flat one views)."""
  if type(a) is not _ND: return True
  try: a.setflags(True)   # (write=True: the keyword costs 60 ns more)
  except ValueError:
    if a.base is None: return False
    try: a.base.setflags(True); a.setflags(True)
    except ValueError: return False
  return True

class Results:
  """The last two results of one host allreduce signature, each handed out again once nothing references it, its node,
  its Buffer or its memory, even weakly (a loop's `y = comm.allreduce(x)` drops the one from two calls back): making a
  result (Buffer, node, Tensor) costs a third of a 1 KiB allreduce. A reused result's memory is rewritten, as all_reduce
  rewrites a node's (_sole): nothing can read the old contents. A slot: the Tensor, its node, its Buffer and the writable
  array w whose read-only view the Buffer holds (MPI writes w: no flag flips per call)."""
  __slots__ = ("slots", "turn", "n", "dtype", "shape", "device")
  def __init__(self, shape: tuple, dtype: DType, device: str):
    self.slots, self.turn, self.n, self.dtype, self.shape, self.device = [None, None], 0, math.prod(shape), dtype, shape, device
  def take(self) -> tuple[Tensor, np.ndarray]:
    """A result Tensor and the array MPI writes its value into."""
    s = (slots := self.slots)[i := self.turn]; self.turn = i ^ 1
    if s is not None:
      t, u, b, w = s
      # the references when no one else holds them: the slot's, the names t, u, b, w and getrefcount's; t.uop's to u (and
      # that of u's cached toposort, which lists u), u.buffer's to b, b's to its view of w, the view's to w (a view anyone
      # made of either is one of w: numpy collapses views of views)
      if getrefcount(t) == 3 and t.uop is u and getrefcount(u) == 4 + ("toposort" in u.__dict__) and getrefcount(b) == 4 and \
         getrefcount(b._buf) == 2 and getrefcount(w) == 4 and not (getweakrefcount(t) or getweakrefcount(u) or getweakrefcount(b)):
        t._requires_grad = t.grad = t._view = None
        return t, w
    b = Buffer.fresh("CPU", self.n, self.dtype, (w := np.empty(self.n, self.dtype.np))[:])
    slots[i] = (t := Tensor._of(u := new_buffer(b, shape=self.shape), self.device), u, b, w)   # (new_buffer: b's view read-only)
    return t, w

class Communicator:
  """Tensor-level collectives over a backend's buffer-level ones (backend: .rank, .world_size, .local_rank, .broken
  (what timed out, None while usable) and usable(what) raising when broken, and
  allreduce/allgather/reduce_scatter/broadcast/send/recv/barrier on host or device arrays, see mpi.py; each takes the
  operation's name, or a function making it, for its errors). A call costs a few microseconds of Python on top of the
  backend's: the shape check is skipped for a call every rank expects (_checked)."""
  def __init__(self, backend, check: bool | None = None):
    self.b, self.rank, self.world_size, self.local_rank = backend, backend.rank, backend.world_size, backend.local_rank
    self.check = knobs.get("MOROK_DIST_CHECK") if check is None else check
    self.calls, self.period = [], 0   # the checked or expected calls (what, shape, dtype), the last few; their cycle's length
    self.sigs: dict = {}   # (op, shape, dtype, device) -> an allreduce's parts made once: (its call for _checked, its name, its Results,
                           # the backend's allreduce for its op and dtype)
  def __repr__(self): return f"<Communicator {type(self.b).__name__} rank {self.rank} of {self.world_size}>"

  def _in(self, x: Tensor, what: str, check: bool = True):
    if self.b.broken is not None: self.b.usable(what)
    if type(x) is not Tensor and not isinstance(x, Tensor): _err(TypeError, f"{what} takes a Tensor, got {type(x).__name__}")
    if type(x.device) is tuple: _err(TypeError, f"{what} of a tensor on several devices ({x.device}): .to() one device first")
    if check and self.check: self._checked((what, x.shape, x.dtype))
    return self.b.array(u.buffer if (u := x.uop).op is Ops.BUFFER and u.buffer._buf is not None else _data(x.realize().uop).buffer)
  def agree(self, shape, dtype: DType, what: str) -> None:
    """Every rank calls `what` on a value of this shape and dtype, else a DistError (at the user's line) naming two."""
    if self.b.broken is not None: self.b.usable(what)
    if self.check: self._checked((what, tuple(shape), dtype))
  def _checked(self, c: tuple):
    """Every rank calls `what` with this shape and dtype, else a DistError naming two that differ. The check is skipped
    for the call every rank expects after the calls so far (the same on every rank): the next of the cycle the last
    calls went round twice (a training step's collectives), else a repeat of the last. As every rank expects the same
    call, either all skip (all make it) or some check on a communicator of their own while the others run the
    collective, and both time out naming what the other waits in: never a wrong answer."""
    h, p = self.calls, self.period
    if c != (h[-p] if p else h[-1] if h else None): self._agree(c[1], c[2], c[0]); p = 0
    h.append(c)
    if len(h) > 4 * CYCLE: del h[:-2 * CYCLE]
    if not p: self.period = next((q for q in range(1, min(CYCLE, len(h) // 2) + 1) if h[-1] == h[-1 - q] and h[-q:] == h[-2 * q:-q]), 0)
  def _agree(self, shape, dtype, what: str):
    """The check itself: one small allgather of every rank's (ndim, dtype, shape) header."""
    if len(shape) > HEAD_DIMS: return
    mine = _header(shape, dtype)
    allm = self.b.agree(mine, np.empty((self.world_size, len(mine)), np.int64), f"{what} (shape check)")
    if (allm == mine).all(): return
    r = next(i for i in range(self.world_size) if (allm[i] != allm[0]).any())
    _err(DistError, f"{what}: ranks disagree on the tensor: rank 0 has {_describe(allm[0])}, rank {r} has {_describe(allm[r])}")
  def _out(self, shape, dtype: DType, device: str) -> tuple[Buffer, object]:
    """A result's Buffer and the backend's array over it. One on the host under a huge page is numpy's memory, as a
    user's array is (the source was a host array, so the backend moves host memory): the allocator's pool, alignment
    and huge pages serve kernels' outputs and large blocks, and a result is only ever read."""
    n = math.prod(shape)
    if device == "CPU" and n * dtype.itemsize < HOST: return Buffer.fresh("CPU", n, dtype, out := np.empty(n, dtype.np)), out
    R._made.add(b := Buffer.fresh(Device[device].name, n, dtype))   # (memory no one else views: all_reduce may write it)
    return b, self.b.array(b)
  def _tensor(self, b: Buffer, shape, device) -> Tensor: return Tensor._of(new_buffer(b, shape=tuple(shape)), device)
  def _op(self, op: str) -> str:
    if op not in OPS: _err(ValueError, f"op must be one of {', '.join(OPS)}, got {op!r}")
    return op

  def _sig(self, op: str, shape: tuple, dt: DType, device: str) -> tuple:
    """An allreduce's parts for its signature, made on its first call (op checked); a few signatures are kept."""
    if (s := self.sigs.get(k := (op, shape, dt, device))) is None:
      self._op(op)
      if len(self.sigs) >= CYCLE: self.sigs.clear()
      n = math.prod(shape)
      ring = Results(shape, dt, device) if device == "CPU" and n * dt.itemsize < RING else None
      run = self.b.allreduce_fn(op, dt.npdt) if hasattr(self.b, "allreduce_fn") else lambda src, out, what: self.b.allreduce(src, out, op, what)
      s = self.sigs[k] = (("allreduce", shape, dt), lambda: f"allreduce({op}) of {dt.name}{list(shape)}", ring, run)
    return s
  def allreduce(self, x: Tensor, op: str = "sum") -> Tensor:
    if type(x) is Tensor and (u := x.uop).op is _BUF and (b := u.buffer)._buf is not None:   # a realized tensor: the usual call
      if (s := self.sigs.get((op, u.shape, u.dtype, x.device))) is None: s = self._sig(op, u.shape, u.dtype, x.device)
      c, what, ring, run = s
      if self.b.broken is not None: self.b.usable(what)
      if self.check: self._checked(c)
      src = self.b.array(b)
    else:
      src = self._in(x, "allreduce")
      c, what, ring, run = self._sig(op, x.shape, x.dtype, x.device)
    if ring is not None:
      t, out = ring.take()
      run(src, out, what)   # (broken checked above, and by _in)
      return t
    b, out = self._out(c[1], c[2], x.device)
    run(src, out, what)
    return Tensor._of(new_buffer(b, shape=c[1]), x.device)
  def all_reduce(self, x: Tensor, op: str = "sum") -> Tensor:
    """x's value replaced by allreduce(x, op) (torch.distributed.all_reduce), and x returned. Written into x's own
    memory when nothing else can read its old contents (_sole), as the in-place writes of realize.in_place are; else x
    holds a new buffer (a view writes its bases, as assign does). x keeps its buffer node where nothing refers to it
    even weakly (what is derived from a node's contents, a program's packed copy of a constant input, a cached copy on
    another device, refers to it), else gets a new one, as a node's contents are promised never to change."""
    if not isinstance(x, Tensor): _err(TypeError, f"all_reduce takes a Tensor, got {type(x).__name__}")
    if x._view is not None or (b := _sole(x)) is None: return x.assign(self.allreduce(x, op))
    if (s := self.sigs.get((op, (u := x.uop).shape, b.dtype, x.device))) is None: s = self._sig(op, u.shape, b.dtype, x.device)
    c, what, _, run = s   # (op checked before anything is written)
    if not _writable(out := self.b.array(b)): return x.assign(self.allreduce(x, op))
    try:
      if self.b.broken is not None: self.b.usable(what)
      if self.check: self._checked(c)
      run(None, out, what)
    finally:
      if getweakrefcount(u := x.uop) or type(out) is not _ND: x.uop = new_buffer(b, u.loc, shape=c[1])
      else: out.setflags(False)   # (write=False, as new_buffer leaves it)
    return x
  def allgather(self, x: Tensor) -> Tensor:
    if x.ndim == 0: _err(ValueError, "allgather of a 0-d tensor: reshape it to (1,)")
    src = self._in(x, "allgather")
    shape = (x.shape[0] * self.world_size, *x.shape[1:])
    b, out = self._out(shape, x.dtype, x.device)
    self.b.allgather(src, out, lambda: f"allgather of {x.dtype.name}{list(x.shape)}")
    return self._tensor(b, shape, x.device)
  def reduce_scatter(self, x: Tensor, op: str = "sum") -> Tensor:
    if x.ndim == 0 or x.shape[0] % self.world_size:
      _err(ValueError, f"reduce_scatter needs dim 0 divisible by the world size {self.world_size}, got shape {x.shape}")
    src = self._in(x, "reduce_scatter")
    shape = (x.shape[0] // self.world_size, *x.shape[1:])
    b, out = self._out(shape, x.dtype, x.device)
    self.b.reduce_scatter(src, out, self._op(op), lambda: f"reduce_scatter({op}) of {x.dtype.name}{list(x.shape)}")
    return self._tensor(b, shape, x.device)
  def broadcast(self, x: Tensor, root: int = 0) -> Tensor:
    if not 0 <= root < self.world_size: _err(ValueError, f"root {root} is not a rank (world size {self.world_size})")
    src = self._in(x, "broadcast")
    b, out = self._out(x.shape, x.dtype, x.device)
    self.b.broadcast(src, out, root, lambda: f"broadcast of {x.dtype.name}{list(x.shape)} from rank {root}")
    return self._tensor(b, x.shape, x.device)
  def send(self, x: Tensor, dst: int) -> None:
    if not 0 <= dst < self.world_size or dst == self.rank: _err(ValueError, f"dst {dst} is not another rank (world size {self.world_size})")
    if len(x.shape) > HEAD_DIMS: _err(ValueError, f"send of a tensor of {len(x.shape)} dims: at most {HEAD_DIMS}")
    src = self._in(x, "send", check=False)
    self.b.send(_header(x.shape, x.dtype), dst, f"send header to rank {dst}", tag=1)
    self.b.send(src, dst, f"send of {x.dtype.name}{list(x.shape)} to rank {dst}")
  def recv(self, shape, dtype, src: int, device: str = "CPU") -> Tensor:
    shape, dtype = tuple(shape), to_dtype(dtype)
    if not 0 <= src < self.world_size or src == self.rank: _err(ValueError, f"src {src} is not another rank (world size {self.world_size})")
    if self.b.broken is not None: self.b.usable("recv")
    head = self.b.recv(np.empty(2 + HEAD_DIMS, np.int64), src, f"recv header from rank {src}", tag=1)
    got = _describe(head)
    if got != f"{dtype.name}{list(shape)}": _err(DistError, f"recv from rank {src}: expected {dtype.name}{list(shape)}, rank {src} sent {got}")
    b, out = self._out(shape, dtype, device)
    self.b.recv(out, src, f"recv of {got} from rank {src}")
    return self._tensor(b, shape, device)
  def barrier(self) -> None:
    if self.b.broken is not None: self.b.usable("barrier")
    self.b.barrier()
  def close(self) -> None: self.b.close()
  def into(self, fn: str, src: Buffer, out: Buffer, shape: tuple, op: str = "sum") -> None:
    """fn ("allreduce" with op, or "allgather") of src, a Buffer holding a value of `shape`, written into out; checked as
    the Tensor methods are. The realize driver's collectives for tensors split over the ranks (multi_realize.py)."""
    if self.b.broken is not None: self.b.usable(fn)
    if self.check: self._checked((fn, shape, src.dtype))
    what = lambda: f"{fn}{f'({op})' if fn == 'allreduce' else ''} of {src.dtype.name}{list(shape)}"
    if fn == "allreduce": self.b.allreduce(self.b.array(src), self.b.array(out), self._op(op), what)
    else: self.b.allgather(self.b.array(src), self.b.array(out), what)

  def bucket(self, srcs: list[Buffer], out: Buffer, shapes: tuple, op: str = "sum") -> None:
    """The allreduce of several Buffers (src i holding a value of shapes[i]) as one message, written into out, their
    concatenation (PyTorch DDP's gradient bucket; the realize driver's, multi_realize.py). The ranks check the number of
    parts and the total size. Device memory (NCCL) goes one call per part into its place in out."""
    if self.b.broken is not None: self.b.usable("allreduce")
    if self.check: self._checked(("allreduce (bucket)", (len(srcs), out.size), out.dtype))
    what = lambda: f"allreduce({op}) of a bucket of {len(srcs)} {out.dtype.name} values ({out.size} elements)"
    if isinstance(o := self.b.array(out), np.ndarray): return self.b.allreduce(np.concatenate([self.b.array(s) for s in srcs]), o, self._op(op), what)
    off = 0
    for s in srcs: self.b.allreduce(self.b.array(s), self.b.array(out.view(s.size, s.dtype, off)), self._op(op), what); off += s.nbytes

def init(backend: str | None = None, timeout: float | None = None, check: bool | None = None) -> Communicator:
  """A Communicator for this process. backend: "mpi" or "nccl" (None: MOROK_DIST_BACKEND, else mpi). timeout: seconds
  any one operation may take (None: MOROK_DIST_TIMEOUT, else 300)."""
  backend = (backend or knobs.get("MOROK_DIST_BACKEND")).lower()
  timeout = float(knobs.get("MOROK_DIST_TIMEOUT") if timeout is None else timeout)
  if timeout <= 0: _err(ValueError, f"timeout must be > 0 seconds, got {timeout}")
  env = launch_env()
  if backend == "mpi":
    from morok_mlir.dist.mpi import MPIBackend
    return use(Communicator(MPIBackend(env, timeout), check))
  if backend == "nccl":
    from morok_mlir.dist.nccl import NCCLBackend
    return use(Communicator(NCCLBackend(env, timeout), check))
  _err(ValueError, f"unknown backend {backend!r} (mpi, nccl)")

def use(comm: Communicator) -> Communicator:
  """comm becomes the one the ranks' devices (devices()) run their collectives on."""
  _multi.COMM, _core_multi.RANK, _core_multi.WORLD = comm, comm.rank, comm.world_size
  return comm

def devices(device: str = "CPU") -> tuple[str, ...]:
  """The ranks' devices of the communicator init() made (`CPU@0`, `CPU@1`, ...): `Tensor.shard(dist.devices(), axis)`
  splits a value over the processes, each holding its own shard; reduces over the split axis call the Communicator."""
  if _multi.COMM is None: _err(RuntimeError, "dist.devices() needs dist.init() first")
  if "@" in device or ":" in device: _err(ValueError, f"devices(): a device kind such as 'CPU', got {device!r}")
  return tuple(f"{device.upper()}@{r}" for r in range(_multi.COMM.world_size))

def from_local(t: Tensor, axis: int = 0) -> Tensor:
  """The tensor split along axis over the ranks' devices whose shard on this rank is t (PyTorch's DTensor.from_local
  with Shard(axis)): every rank gives its own part, of any size along axis but none empty, every other dim and the
  dtype the same on all (else a DistError naming two ranks'). One small allgather of the shapes."""
  devs = devices()
  if not isinstance(t, Tensor) or type(t.device) is tuple: _err(TypeError, "from_local takes a Tensor on one device")
  if t.ndim == 0 or t.ndim > HEAD_DIMS: _err(ValueError, f"from_local of a tensor of {t.ndim} dims: 1 to {HEAD_DIMS}")
  comm, ax = _multi.COMM, t._dim(axis)
  heads = comm.b.agree(head := _header(t.shape, t.dtype), np.empty((comm.world_size, len(head)), np.int64), "from_local (shapes)")
  rest = lambda h: (h[:2].tolist(), [d for i, d in enumerate(h[2:2 + h[0]]) if i != ax])
  for r in range(comm.world_size):
    if rest(heads[r]) != rest(heads[0]) or heads[r][2 + ax] == 0:
      _err(DistError, f"from_local along dim {ax}: rank 0 has {_describe(heads[0])}, rank {r} has {_describe(heads[r])}"
           f"{' (an empty shard)' if heads[r][2 + ax] == 0 else ' (only dim ' + str(ax) + ' may differ)'}")
  shape = lambda h: tuple(h[2:2 + h[0]].tolist())
  srcs = tuple(_core_multi.copy(t.uop, d) if r == comm.rank else _multi.placeholder(shape(heads[r]), t.dtype, d, t.uop.loc)
               for r, d in enumerate(devs))
  ret = Tensor(_core_multi.multi(srcs, ax, devs, t.uop.loc), device=devs)
  ret._requires_grad = t._requires_grad
  return ret
