"""morok_mlir.dist: the Communicator on MPI (mpiexec -n 2 over loopback), start-up checks, faults; NCCL's parts that
need no GPU."""
import os, re, shutil, socket, subprocess, sys, threading, time
from pathlib import Path
import numpy as np
import pytest
from test_cuda import fake_cuda  # noqa: F401 (a fixture)

ROOT = Path(__file__).resolve().parent.parent
MPIEXEC = shutil.which("mpiexec", path=str(Path(sys.executable).parent)) or shutil.which("mpiexec")
pytest.importorskip("mpi4py", reason="the dist extra (mpi4py, mpich) is not installed: pip install '.[dist]'")
need_mpi = pytest.mark.skipif(MPIEXEC is None, reason="no mpiexec (the mpich wheel of the dist extra provides one)")

def mpirun(mode: str, n: int = 2, timeout: float = 120, extra=(), env=None) -> subprocess.CompletedProcess:
  e = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")} | {"PYTHONPATH": str(ROOT)} | (env or {})
  return subprocess.run([MPIEXEC, *extra, "-n", str(n), sys.executable, str(ROOT / "test/dist_worker.py"), mode],
                        capture_output=True, text=True, timeout=timeout, env=e, cwd=ROOT)

@need_mpi
@pytest.mark.parametrize("n", [2, 3])
def test_collectives_match_numpy(n):
  p = mpirun("ops", n)
  assert p.returncode == 0, p.stdout + p.stderr
  # (the ranks' lines reach mpiexec's stdout in any order, one possibly inside another's)
  assert sorted(re.findall(r"rank \d+ of \d+ ok \(local rank \d+\)", p.stdout)) == [f"rank {r} of {n} ok (local rank {r})" for r in range(n)]

@need_mpi
@pytest.mark.parametrize("mode,msg", [("shape", "rank 0 has float32[2, 3], rank 1 has float32[2, 4]"),
                                      ("dtype", "rank 0 has float32[2, 3], rank 1 has int32[2, 3]"),
                                      ("recv", "expected float32[3, 4], rank 0 sent float32[4, 3]"),
                                      # a tensor split over the ranks
                                      ("shard_shape", "shard: ranks disagree on the tensor: rank 0 has float32[8, 6], rank 1 has float32[9, 6]"),
                                      ("shard_diverge", "allreduce: ranks disagree on the tensor: rank 0 has float32[1, 3], rank 1 has float32[1, 2]"),
                                      ("local_shape", "from_local along dim 0: rank 0 has float32[2, 3], rank 1 has float32[2, 4]")])
def test_mismatch_across_ranks_names_both(mode, msg):
  p = mpirun(mode)
  assert p.returncode != 0 and msg in p.stderr and "dist_worker.py:" in p.stderr, p.stderr

def _caught(p, rank: int, t: float) -> str:
  """rank's caught DistError (from dist_worker's dead/hang modes), checked to have come within the timeout."""
  m = re.search(rf"rank {rank} caught after ([\d.]+) s: (.*)", p.stdout)
  assert m, p.stdout + p.stderr
  assert float(m.group(1)) <= t + 2, m.group(0)   # the deadline, and slack for a loaded host's scheduling
  assert re.search(rf"rank {rank} then: rank {rank}: barrier: this communicator is unusable since allreduce", p.stdout), p.stdout
  return m.group(2)

@need_mpi
@pytest.mark.parametrize("n,inplace", [(2, ""), (3, ""), (2, "1")])
def test_hung_rank_is_an_exception_within_the_timeout(n, inplace):
  p = mpirun("hang", n, timeout=60, env={"T": "2", "INPLACE": inplace})
  msg = _caught(p, 0, 2)
  assert re.match(rf"rank 0: allreduce.* did not complete within 2 s: no word from ranks? (1, )?{n - 1} \(died, hangs", msg), msg
  assert "unusable now" in msg and p.returncode != 0   # the process's exit aborted the job: the hung rank did not outlive it

@need_mpi
def test_dead_rank_is_an_exception_within_the_timeout():
  p = mpirun("dead", timeout=60, env={"T": "3"})   # mpiexec's default: a rank's death ends the job with its exit status
  assert p.returncode == 3, p.stdout + p.stderr
  p = mpirun("dead", timeout=60, env={"T": "2"}, extra=["-disable-auto-cleanup"])   # the others live on: they raise
  assert re.match(r"rank 0: allreduce.* did not complete within 2 s: no word from rank 1 ", _caught(p, 0, 2)), p.stdout

@need_mpi
def test_mismatch_after_a_skipped_shape_check_is_an_exception():
  """Rank 0 repeats the call all ranks agreed on (no shape check), rank 1 changes the shape (checks): no wrong answer,
  both wait on different communicators until the timeout."""
  p = mpirun("stale", timeout=60, env={"T": "2"})
  assert re.match(r"rank 0: allreduce\(sum\) of float32\[4, 3\] did not complete within 2 s: ", _caught(p, 0, 2)), p.stdout

@need_mpi
def test_all_reduce_in_place():
  """comm.all_reduce(t) (torch.distributed.all_reduce): t holds the sum over ranks, in its own memory when nothing else
  reads it, else in a new buffer (a held numpy view, a lazy graph over t keep the old value); a view writes its base."""
  p = mpirun("inplace")
  assert p.returncode == 0, p.stdout + p.stderr
  assert sorted(re.findall(r"rank \d inplace ok", p.stdout)) == ["rank 0 inplace ok", "rank 1 inplace ok"], p.stdout

@need_mpi
@pytest.mark.parametrize("mode,n", [("shard", 2), ("shard", 3), ("shard_grad", 2), ("shard_jit", 2), ("bucket", 2)])
def test_tensors_split_over_ranks(mode, n):
  """Tensor.shard(dist.devices(), axis): each process holds its own shard; reduces over the split axis (and gathers)
  run through the Communicator; every rank's results equal the unsharded ones (dist_worker.py's asserts)."""
  p = mpirun(mode, n)
  assert p.returncode == 0, p.stdout + p.stderr
  assert sorted(re.findall(rf"rank \d {mode} ok", p.stdout)) == [f"rank {r} {mode} ok" for r in range(n)], p.stdout


def test_rank_devices_need_init(monkeypatch):
  from morok_mlir import Tensor, dist
  from morok_mlir.core import multi
  from morok_mlir.device import Device
  assert Device.canonicalize("cpu@1") == "CPU@1" and Device["CPU@1"].name == "CPU@1"
  monkeypatch.setattr(dist._multi, "COMM", None); monkeypatch.setattr(multi, "RANK", None)
  with pytest.raises(RuntimeError, match="test_dist.py:.*dist.devices\\(\\) needs dist.init\\(\\) first"): dist.devices()
  with pytest.raises(RuntimeError, match="call morok_mlir.dist.init\\(\\) first"): Tensor([1.0, 2.0]).shard(("CPU@0", "CPU@1"), axis=0)

def test_split_over_a_world_of_one():
  from morok_mlir import Tensor, dist
  comm, a = dist.init(timeout=30), np.arange(12, dtype=np.float32).reshape(4, 3)
  x = Tensor(a).shard(dist.devices(), axis=0)
  assert x.device == ("CPU@0",) and comm.world_size == 1
  np.testing.assert_array_equal(x.sum(0).numpy(), a.sum(0))
  np.testing.assert_array_equal((x * 2).numpy(), a * 2)

class _Loopback:
  """A world of one that records the calls a Communicator makes of its backend."""
  rank, world_size, local_rank, broken = 0, 1, 0, None
  def __init__(self): self.calls = []
  def usable(self, what):
    from morok_mlir.dist import DistError
    raise DistError(f"{what}: unusable since {self.broken} timed out")
  def array(self, b): return b.as_numpy()
  def agree(self, src, out, what):
    self.calls.append("check"); out[...] = src
    return out
  def allreduce(self, src, out, op, what): self.calls.append("allreduce"); out[...] = out if src is None else src
  def allgather(self, src, out, what): self.calls.append("allgather"); out[...] = src

def test_shape_check_skipped_while_the_call_repeats():
  from morok_mlir import Tensor, dist
  c, a, b = dist.Communicator(lb := _Loopback(), check=True), Tensor(np.ones((2, 3), np.float32)), Tensor(np.ones((3, 2), np.float32))
  for t, f in [(a, c.allreduce), (a, c.allreduce), (b, c.allreduce), (a, c.allreduce), (a, c.allgather), (a, c.allgather)]:
    np.testing.assert_array_equal(f(t).numpy(), t.numpy())
  assert lb.calls == ["check", "allreduce", "allreduce", "check", "allreduce", "check", "allreduce", "check", "allgather", "allgather"]
  assert dist.Communicator(lb := _Loopback(), check=False).allreduce(a).shape == (2, 3) and lb.calls == ["allreduce"]

def test_shape_check_skipped_once_a_cycle_of_calls_repeats():
  """A training step's collectives of several shapes: checked while the cycle is seen the first two times, then not;
  a call off the cycle is checked again."""
  from morok_mlir import Tensor, dist
  c, a, b = dist.Communicator(lb := _Loopback(), check=True), Tensor(np.ones((2, 3), np.float32)), Tensor(np.ones(5, np.int32))
  for t in (a, b, a, b, a, b, a, b, b): c.allreduce(t)
  assert lb.calls == ["check", "allreduce"] * 4 + ["allreduce"] * 4 + ["check", "allreduce"]

def test_all_reduce_of_a_lazy_tensor_and_of_a_non_tensor():
  from morok_mlir import Tensor, dist
  c, t = dist.Communicator(_Loopback(), check=True), Tensor(np.ones(3, np.float32)) + 1
  assert c.all_reduce(t) is t and t.numpy().tolist() == [2, 2, 2]
  with pytest.raises(TypeError, match=r"test_dist.py:\d+.*all_reduce takes a Tensor, got ndarray"): c.all_reduce(np.ones(3))

def test_a_broken_communicator_raises_before_calling_its_backend():
  from morok_mlir import Tensor, dist
  c = dist.Communicator(lb := _Loopback(), check=True)
  lb.broken = "allreduce(sum) of float32[2]"
  for f in (lambda: c.allreduce(Tensor([1.0, 2.0])), lambda: c.all_reduce(Tensor([1.0, 2.0]).realize()), lambda: c.allgather(Tensor([1.0])),
            c.barrier):
    with pytest.raises(dist.DistError, match=r"unusable since allreduce\(sum\) of float32\[2\] timed out"): f()
  assert lb.calls == []

def _init_alone(env: dict) -> subprocess.CompletedProcess:
  e = {k: v for k, v in os.environ.items() if not k.startswith(("PMI", "OMPI", "RANK", "WORLD_SIZE", "LOCAL_RANK"))} | {"PYTHONPATH": str(ROOT)} | env
  code = "from morok_mlir import dist; c = dist.init(); print(c.rank, c.world_size)"
  return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=e, cwd=ROOT)

def test_world_of_one_without_a_launcher():
  p = _init_alone({})
  assert p.returncode == 0 and p.stdout.split() == ["0", "1"], p.stderr

def test_world_size_mismatch_caught_at_start():
  p = _init_alone({"RANK": "0", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"})   # torchrun's variables
  assert p.returncode != 0 and "WORLD_SIZE=2 but MPI sees 1 process(es)" in p.stderr and "mpiexec -n 2" in p.stderr, p.stderr

def test_launch_env():
  from morok_mlir.dist import launch_env, DistError
  e = launch_env({"RANK": "1", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500"})
  assert (e["rank"], e["world_size"], e["local_rank"], e["master"], e["launcher"]) == (1, 4, 1, ("10.0.0.1", 29500), "torchrun")
  assert launch_env({"PMI_RANK": "0", "PMI_SIZE": "2"})["launcher"] == "mpiexec"
  with pytest.raises(DistError, match="WORLD_SIZE='two'"): launch_env({"WORLD_SIZE": "two"})

def test_argument_checks():
  from morok_mlir import Tensor, dist
  c = dist.init(timeout=30)
  with pytest.raises(ValueError, match="op must be one of"): c.allreduce(Tensor([1.0]), op="mean")
  with pytest.raises(ValueError, match="divisible by the world size"): c.reduce_scatter(Tensor(1.0))
  with pytest.raises(ValueError, match="root 1 is not a rank"): c.broadcast(Tensor([1.0]), root=1)
  with pytest.raises(TypeError, match="several devices"): c.allreduce(Tensor([1.0, 2.0]).shard(("CPU:0", "CPU:1")))
  np.testing.assert_array_equal(c.allreduce(Tensor([1.0, 2.0])).numpy(), [1.0, 2.0])   # a world of one

def test_results_are_their_own_read_only_memory():
  """A collective's result on the host, small (numpy's memory) or from a huge page up (the allocator's), of any dtype:
  the values, in memory of its own that nothing writes."""
  from morok_mlir import Tensor, dist
  from morok_mlir.core.dtype import dtypes
  c = dist.init(timeout=30)
  for n in (0, 1, 300, (1 << 19) + 1):   # (the last: float32's and float64's above a 2 MiB page)
    for dt in (dtypes.bool, dtypes.int8, dtypes.bfloat16, dtypes.float32, dtypes.float64):
      x = Tensor(np.arange(n).astype(dt.np) if dt is not dtypes.bool else np.arange(n) % 3 == 0, dtype=dt).realize()
      for got in (c.allreduce(x), c.allreduce(x, "max"), c.broadcast(x)):
        assert got.dtype is dt and got.shape == (n,) and np.array_equal(got.numpy(), x.numpy())
        arr = got.uop.buffer.as_numpy()
        assert not arr.flags.writeable and not np.shares_memory(arr, x.uop.buffer.as_numpy())

def test_allreduce_results_are_their_own_while_anything_holds_them():
  """A result is a tensor of its own: in-place ops on the input leave it as it was, and no later allreduce rewrites it
  while anything holds it, its node (a lazy tensor built on it, what a program derived from it) or its memory (an array,
  a view of one, a weak reference, a copy on another device), though the memory of results nothing holds is used again."""
  import gc, weakref
  from morok_mlir import Tensor, dist
  c = dist.init(timeout=30)
  x = Tensor(np.arange(4, dtype=np.float32)).realize()
  y = c.allreduce(x)
  x += 1; c.all_reduce(x); x[0] = 9
  assert y.numpy().tolist() == [0, 1, 2, 3] and x.numpy().tolist() == [9, 2, 3, 4]
  make = lambda k: c.allreduce(Tensor(np.full(4, k, np.float32)).realize())
  held = {"tensor": make(1), "lazy": make(2) * 2, "array": make(3).uop.buffer.as_numpy(), "view": make(4).uop.buffer.as_numpy()[1:],
          "weak": weakref.ref(make(5)), "detached": make(6).detach(), "grad": make(7).requires_grad_(), "buffer": make(8).uop.buffer}
  held["node"] = (r := make(9)).uop   # (r holds another node after the assign; one holds its first)
  r.assign(Tensor(np.zeros(4, np.float32))).realize()
  del r
  for k in range(10, 20): make(k)
  got = {k: v() if k == "weak" else v for k, v in held.items()}
  got = {k: v if v is None or isinstance(v, np.ndarray) else v.as_numpy() if k == "buffer" else v.buffer.as_numpy() if k == "node" else v.numpy()
         for k, v in got.items()}
  assert {k: None if v is None else v.tolist() for k, v in got.items()} == {"tensor": [1] * 4, "lazy": [4] * 4, "array": [3] * 4,
    "view": [4] * 3, "weak": None if got["weak"] is None else [5] * 4, "detached": [6] * 4, "grad": [7] * 4, "buffer": [8] * 4, "node": [9] * 4}
  assert y.numpy().tolist() == [0, 1, 2, 3]
  assert len({make(k).uop.buffer.ptr for k in range(6)}) <= 2   # (results dropped at once: the same two memories)
  # what is derived from a result and kept while it lives: its copy on another device, a matmul's packed copy of it
  ones = Tensor(np.ones((128, 128), np.float32)).realize()
  for k in range(1, 5):
    gc.collect()   # (realize keeps its last outputs, and so their inputs, until the next collection)
    assert make(k).to("CPU:1").numpy().tolist() == [k] * 4
    w = c.allreduce(Tensor(np.full((128, 128), k, np.float32)).realize())
    assert ((ones @ w).numpy() == 128 * k).all()

# ---- NCCL: what runs without a GPU
def _free_port() -> int:
  with socket.socket() as s: s.bind(("127.0.0.1", 0)); return s.getsockname()[1]

def test_nccl_rendezvous_hands_out_the_id():
  from morok_mlir.dist.nccl import rendezvous
  port, got = _free_port(), {}
  ts = [threading.Thread(target=lambda r: got.__setitem__(r, rendezvous("127.0.0.1", port, r, 3, b"id" * 64 if r == 0 else None, 20)), args=(r,))
        for r in range(3)]
  for t in ts: t.start()
  for t in ts: t.join()
  assert got == {r: b"id" * 64 for r in range(3)}

def test_nccl_rendezvous_faults():
  from morok_mlir.dist import DistError
  from morok_mlir.dist.nccl import rendezvous
  with pytest.raises(DistError, match=r"only ranks \[0\] of 2 reached"): rendezvous("127.0.0.1", _free_port(), 0, 2, b"x", 0.5)
  with pytest.raises(DistError, match="rank 1: rank 0 did not answer"): rendezvous("127.0.0.1", _free_port(), 1, 2, None, 0.5)
  port, err = _free_port(), []
  def zero():
    try: rendezvous("127.0.0.1", port, 0, 2, b"x", 10)
    except DistError as e: err.append(str(e))
  t = threading.Thread(target=zero); t.start()
  with pytest.raises(DistError, match="rank 0 at .* refused this rank"): rendezvous("127.0.0.1", port, 1, 3, None, 2)
  t.join()
  assert err == ["WORLD_SIZE differs between ranks: rank 0 has 2, rank 1 has 3"]

def test_nccl_backend_needs_nccl4py_or_a_gpu(monkeypatch):
  from morok_mlir import dist
  try: import nccl.core  # noqa: F401
  except ImportError:
    with pytest.raises(dist.DistError, match=r"needs nccl4py: pip install 'morok-mlir\[nccl\]'"): dist.init("nccl")
    return
  monkeypatch.delenv("RANK", raising=False)
  with pytest.raises(dist.DistError, match="needs a launcher"): dist.init("nccl")

class _FakeNCCL:
  """nccl4py's parts the NCCL backend calls (nccl.core: get_unique_id, UniqueId, Communicator.init, the collectives on
  CUDA Array Interface objects with a stream=, abort, destroy, the ops), for a world of one: a collective copies its
  source into its result, on the fake CUDA driver's memory. It checks what the backend hands it, not NCCL itself."""
  SUM, MAX, MIN, PROD = "sum", "max", "min", "prod"
  class UniqueId:
    @staticmethod
    def from_bytes(b): assert len(b) == 128; return "uid"
  def __init__(self, stream): self.stream, self.calls = stream, []
  def get_unique_id(self): return b"u" * 128
  class Communicator:
    @classmethod
    def init(cls, n, r, uid):
      assert (n, r, uid) == (1, 0, "uid")
      return cls.fake
  def _copy(self, name, src, out, *a, stream):
    import ctypes
    i, o = src.__cuda_array_interface__, out.__cuda_array_interface__
    nbytes = lambda c: int(np.prod(c["shape"])) * np.dtype(c["typestr"]).itemsize
    assert stream == self.stream and nbytes(i) == nbytes(o) and o["data"][1] is False
    self.calls.append((name, *a)); ctypes.memmove(o["data"][0], i["data"][0], nbytes(i))
  def allreduce(self, src, out, op, *, stream): self._copy("allreduce", src, out, op, stream=stream)
  def allgather(self, src, out, *, stream): self._copy("allgather", src, out, stream=stream)
  def reduce_scatter(self, src, out, op, *, stream): self._copy("reduce_scatter", src, out, op, stream=stream)
  def broadcast(self, src, out, root, *, stream): self._copy("broadcast", src, out, root, stream=stream)
  def abort(self): self.calls.append(("abort",))

def test_nccl_backend_on_fake_nccl_and_cuda(fake_cuda, monkeypatch):
  """The NCCL backend's own code (start-up under torchrun's variables, CUDA buffers handed over as device pointers, the
  stream polled against the deadline, the host path of the shape check, a timeout aborting the communicator) on fakes
  of nccl4py and of the CUDA driver: no GPU and no NCCL here."""
  import types
  from morok_mlir import Tensor, dist
  from morok_mlir.core import multi
  for m, k in ((dist._multi, "COMM"), (multi, "RANK"), (multi, "WORLD")): monkeypatch.setattr(m, k, getattr(m, k))   # init's globals, restored
  dev, drv = fake_cuda
  drv.cuStreamCreate = lambda flags: (0, 7)   # an int, as int(CUstream) is
  drv.cuStreamQuery = lambda s: (600,) if s in drv.busy else (0,)   # CUDA_ERROR_NOT_READY while the stream works
  nccl = _FakeNCCL(7)
  nccl.Communicator.fake = nccl
  monkeypatch.setitem(sys.modules, "nccl", types.ModuleType("nccl"))
  monkeypatch.setitem(sys.modules, "nccl.core", nccl)
  for k, v in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()),
               "CUDA_VISIBLE_DEVICES": "0"}.items(): monkeypatch.setenv(k, v)
  comm = dist.init("nccl", timeout=0.3)
  a = np.arange(12, dtype=np.float32).reshape(3, 4)
  x = Tensor(a).to("CUDA").realize()
  for got in (comm.allreduce(x, "max"), comm.allgather(x), comm.reduce_scatter(x), comm.broadcast(x)):
    assert got.device == "CUDA" and np.array_equal(got.numpy(), a)
  comm.barrier()
  check = ("allgather",)   # the shape check before each collective, and the barrier: an allgather of small headers
  assert nccl.calls == [check, ("allreduce", "max"), check, ("allgather",), check, ("reduce_scatter", "sum"), check, ("broadcast", 0), check]
  with pytest.raises(dist.DistError, match=r"test_dist.py:\d+.*CPU tensors go through .to\('CUDA'\)"): comm.allreduce(Tensor(np.ones(2, np.int8)))
  from morok_mlir.device.buffer import Buffer
  parts, out = [x, Tensor(a[:2, :3]).to("CUDA").realize()], Buffer("CUDA", 18, "float32")
  comm.bucket([p.uop.buffer for p in parts], out, ((3, 4), (2, 3)))   # device memory: one call per part into its place
  assert np.array_equal(out.copyout(), np.concatenate([a.ravel(), a[:2, :3].ravel()])) and nccl.calls[-2:] == [("allreduce", "sum")] * 2
  y = comm.allreduce(x, "max")
  ptr = y.uop.buffer.ptr
  assert comm.all_reduce(y, "max") is y and y.uop.buffer.ptr == ptr and np.array_equal(y.numpy(), a)   # in place: NCCL's src is out
  assert nccl.calls[-1] == ("allreduce", "max")
  comm.allreduce(x)   # (a repeat: not checked)
  drv.busy.add(7)   # the stream never finishes: the peer died or hangs
  with pytest.raises(dist.DistError, match=r"rank 0: allreduce\(sum\) of float32\[3, 4\] did not complete within 0.3 s"): comm.allreduce(x)
  assert nccl.calls[-1] == ("abort",)
  with pytest.raises(dist.DistError, match="unusable since allreduce"): comm.allgather(x)

def _no_nccl_gpu() -> str | None:
  try: import nccl.core  # noqa: F401
  except ImportError as e: return f"nccl4py is not installed (pip install 'morok-mlir[nccl]'): {e}"
  from morok_mlir.device.cuda import available
  ok, why = available()
  return None if ok else f"no CUDA GPU: {why}"

@pytest.mark.skipif(_no_nccl_gpu() is not None, reason=str(_no_nccl_gpu()))
def test_nccl_one_rank_collectives_on_a_gpu(monkeypatch):
  """A 1-rank NCCL communicator under torchrun's environment: each collective of a CUDA tensor is the tensor itself."""
  from morok_mlir import Tensor, dist
  with socket.socket() as s: s.bind(("127.0.0.1", 0)); port = s.getsockname()[1]
  for k, v in {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}.items():
    monkeypatch.setenv(k, v)
  comm = dist.init("nccl")
  x = Tensor(np.arange(12, dtype=np.float32).reshape(3, 4)).to("CUDA")
  for got in (comm.allreduce(x), comm.allreduce(x, op="max"), comm.allgather(x), comm.reduce_scatter(x), comm.broadcast(x, root=0)):
    assert got.device == "CUDA" and np.array_equal(got.numpy(), x.numpy())
