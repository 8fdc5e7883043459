"""Run by test_dist.py under mpiexec: `dist_worker.py MODE`; each rank checks its results and exits 0."""
import os, sys, time, weakref
import numpy as np
from morok_mlir import Tensor, dist

comm = dist.init(timeout=float(os.environ.get("T", "20")))
r, n, mode = comm.rank, comm.world_size, sys.argv[1]
x = np.arange(12, dtype=np.float32).reshape(4, 3) + r
if mode == "ops":
  every = [np.arange(12, dtype=np.float32).reshape(4, 3) + k for k in range(n)]
  np.testing.assert_array_equal(comm.allreduce(Tensor(x)).numpy(), sum(every))
  np.testing.assert_array_equal(comm.allreduce(Tensor(x), "max").numpy(), every[-1])
  np.testing.assert_array_equal(comm.allreduce(Tensor(x.astype(np.int32)), "min").numpy(), every[0].astype(np.int32))
  bits = [e % (k + 2) == 0 for k, e in enumerate(every)]   # bools: sum and max are or, min and prod and
  np.testing.assert_array_equal(comm.allreduce(Tensor(bits[r])).numpy(), np.logical_or.reduce(bits))
  np.testing.assert_array_equal(comm.allreduce(Tensor(bits[r]), "min").numpy(), np.logical_and.reduce(bits))
  np.testing.assert_array_equal(comm.allgather(Tensor(x) * 2).numpy(), np.concatenate(every) * 2)
  bf = lambda a: Tensor(a, dtype="bfloat16")   # no MPI type: reduced in float32, moved as bytes
  np.testing.assert_array_equal(comm.allreduce(bf(x)).numpy(), bf(sum(every)).numpy())
  np.testing.assert_array_equal(comm.allgather(bf(x)).numpy(), bf(np.concatenate(every)).numpy())
  np.testing.assert_array_equal(comm.reduce_scatter(Tensor(np.ones((2 * n, 3), np.float32) * (r + 1))).numpy(), np.full((2, 3), n * (n + 1) / 2))
  np.testing.assert_array_equal(comm.broadcast(Tensor(x), root=n - 1).numpy(), every[-1])
  if r == 0: comm.send(Tensor(x) + 100, 1)
  if r == 1: np.testing.assert_array_equal(comm.recv((4, 3), "float32", 0).numpy(), every[0] + 100)
  comm.barrier()
  print(f"rank {r} of {n} ok (local rank {comm.local_rank})", flush=True)
elif mode == "shard":   # tensors split over the ranks' devices: every rank's results equal numpy's on the whole value
  rng, devs = np.random.default_rng(0), dist.devices()
  A, B, W = (rng.standard_normal(s).astype(np.float32) for s in ((8, 6), (8, 6), (6, 6)))
  close = lambda t, ref: np.testing.assert_allclose(t.numpy(), ref, rtol=1e-5, atol=1e-5)
  x = Tensor(A).shard(devs, axis=0).realize()
  assert devs == tuple(f"CPU@{k}" for k in range(n)) and x.device == devs and x.shape == A.shape
  assert [s.buffer.is_allocated for s in x.uop.src] == [k == r for k in range(n)]   # this rank's shard only
  y = (x * Tensor(B).shard(devs, axis=0) + 1).relu().realize()   # elementwise stays split
  assert y.uop.attrs["axis"] == 0 and [s.buffer.is_allocated for s in y.uop.src] == [k == r for k in range(n)]
  close(y, np.maximum(A * B + 1, 0))   # .numpy(): an allgather
  for ax in (0, 1):
    xs = Tensor(A).shard(devs, axis=ax)
    close(xs.sum(ax), A.sum(ax)); close(xs.max(ax), A.max(ax)); close(xs.sum(), A.sum()); close(xs.mean(1 - ax), A.mean(1 - ax))
    close(xs.softmax(ax), np.exp(A) / np.exp(A).sum(ax, keepdims=True))   # an allreduce reading another's result
  for xa, wa in ((0, None), (None, 1), (1, 0)):   # data-, column- and row-parallel matmul
    close(Tensor(A).shard(devs, axis=xa) @ Tensor(W).shard(devs, axis=wa), A @ W)
  close(Tensor(A[:5]).shard(devs, axis=0).sum(0), A[:5].sum(0))   # uneven shards (3 and 2 rows)
  close(Tensor(A).shard(devs, axis=0).reshape(6, 8).to("CPU"), A.reshape(6, 8))   # no per-shard form: gathered
  parts = np.array_split(A, [5] if n == 2 else n)
  close(dist.from_local(Tensor(parts[r]), 0).sum(0) * 2, A.sum(0) * 2)
  try: Tensor(A).shard(devs + ("CPU@9",), axis=0)
  except ValueError as e: assert "dist_worker.py:" in str(e) and f"are not the {n} ranks' ({','.join(devs)}" in str(e), e
  else: raise AssertionError(f"a split over {n + 1} ranks ran on {n}")
  try: Tensor(A).shard(devs, axis=0) @ Tensor(A).shard(devs)
  except Exception as e: assert "dist_worker.py:" in str(e) and "6" in str(e), e
  else: raise AssertionError("a matmul of mismatched shapes ran")
  print(f"rank {r} shard ok", flush=True)
elif mode == "shard_grad":   # data-parallel: the batch split over the ranks, the weights replicated
  from test_multitensor import adam_steps
  rng, devs = np.random.default_rng(0), dist.devices()
  A, W = rng.standard_normal((8, 6)).astype(np.float32), rng.standard_normal((6, 4)).astype(np.float32)
  def loss_grad(x, w):
    loss = ((x @ w).relu() - 0.5).square().mean()
    loss.backward()
    return loss.numpy(), w.grad.numpy()
  ref = loss_grad(Tensor(A), Tensor(W, requires_grad=True))
  got = loss_grad(Tensor(A).shard(devs, axis=0), Tensor(W).shard(devs).requires_grad_())
  np.testing.assert_allclose(got[0], ref[0], rtol=1e-5); np.testing.assert_allclose(got[1], ref[1], rtol=1e-5, atol=1e-6)
  w = Tensor(W, requires_grad=True)   # a one-device leaf replicated in the graph: its gradient comes back to it
  ((Tensor(A).shard(devs, axis=0) @ w.shard(devs)).relu() - 0.5).square().mean().backward()
  assert w.grad.device == "CPU"
  np.testing.assert_allclose(w.grad.numpy(), ref[1], rtol=1e-5, atol=1e-6)
  y = rng.integers(0, 4, 8).astype(np.int32)
  for g, want in zip(adam_steps(devs, A, y), adam_steps(None, A, y)): np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)
  print(f"rank {r} shard_grad ok", flush=True)
elif mode == "shard_shape": Tensor(np.ones((8 + r, 6), np.float32)).shard(dist.devices(), axis=0)
elif mode == "shard_diverge":   # the ranks build different graphs (not SPMD): the collective's shape check names both
  t = Tensor(x).shard(dist.devices(), axis=0)
  (t if r == 0 else t[:, :2]).sum(0).numpy()
elif mode == "local_shape": dist.from_local(Tensor(np.ones((2, 3 + r), np.float32)), 0)
elif mode == "shard_jit":   # a data-parallel step under TinyJit: its replays call the Communicator as the recorded call did
  from morok_mlir.jit import TinyJit
  from morok_mlir.nn import Linear
  from morok_mlir.nn.optim import Adam
  from morok_mlir.nn.state import get_parameters
  rng, devs = np.random.default_rng(0), dist.devices()
  xs = [rng.standard_normal((8, 6)).astype(np.float32) for _ in range(5)]
  ys = [rng.integers(0, 4, 8).astype(np.int32) for _ in range(5)]
  def train(devs):
    Tensor.manual_seed(0)
    m = Linear(6, 4)
    for p in get_parameters(m) if devs else (): p.shard_(devs)
    opt = Adam(get_parameters(m), lr=0.01)
    def step(x, y):
      opt.zero_grad()
      loss = m(x).cross_entropy(y).backward()
      Tensor.realize(*opt.schedule_step())
      return loss.realize()
    f = TinyJit(step) if devs else step
    with Tensor.train():
      losses = [f(*((Tensor(x), Tensor(y)) if not devs else (Tensor(x).shard(devs, axis=0), Tensor(y).shard(devs, axis=0)))).numpy()
                for x, y in zip(xs, ys)]
    return m.weight.numpy(), losses, f
  (want, wl, _), (got, gl, f) = train(None), train(devs)
  assert f.plan is not None   # replayed
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6); np.testing.assert_allclose(gl, wl, rtol=1e-5)
  print(f"rank {r} shard_jit ok", flush=True)
elif mode == "bucket":   # a jitted data-parallel step: its gradients (and loss) summed in one message, checked once
  from morok_mlir.jit import TinyJit
  from morok_mlir.nn import Linear
  from morok_mlir.nn.optim import SGD
  from morok_mlir.nn.state import get_parameters
  calls, devs, rng = [], dist.devices(), np.random.default_rng(0)
  for f in ("allreduce", "agree"):
    setattr(comm.b, f, (lambda f, real: lambda src, out, *a: (calls.append((f, src.size)), real(src, out, *a))[1])(f, getattr(comm.b, f)))
  l1, l2 = Linear(6, 5), Linear(5, 3)
  for p in get_parameters([l1, l2]): p.shard_(devs)
  opt = SGD(get_parameters([l1, l2]), lr=0.1)
  @TinyJit
  def step(x, y):
    opt.zero_grad()
    loss = l2(l1(x).relu()).cross_entropy(y).backward()
    Tensor.realize(loss, *opt.schedule_step())
    return loss
  with Tensor.train():
    for i in range(5):
      calls.clear()
      x, y = rng.standard_normal((8, 6)).astype(np.float32), rng.integers(0, 3, 8).astype(np.int32)
      step(Tensor(x).shard(devs, axis=0), Tensor(y).shard(devs, axis=0))
  # a replay: no shape check, and the 4 gradients (30, 5, 15 and 3 numbers) in one message (besides the loss's scalars)
  assert step.plan is not None and {f for f, _ in calls} == {"allreduce"} and [k for _, k in calls if k > 1] == [53], calls
  print(f"rank {r} bucket ok", flush=True)
elif mode == "shape": comm.allreduce(Tensor(np.ones((2, 3 + r), np.float32)))
elif mode == "dtype": comm.allreduce(Tensor(np.ones((2, 3), np.float32 if r == 0 else np.int32)))
elif mode == "recv":
  if r == 0: comm.send(Tensor(x), 1)
  if r == 1: comm.recv((3, 4), "float32", 0)
elif mode == "inplace":   # all_reduce(t): t's value replaced by the sum, in t's own memory when no one else reads it
  every = [np.arange(12, dtype=np.float32).reshape(4, 3) + k for k in range(n)]
  t = Tensor(x).realize()
  mem = t.uop.buffer.ptr   # (ids and addresses: holding the Buffer or node would read the old value)
  assert comm.all_reduce(t) is t and t.uop.buffer.ptr == mem   # in place
  node = id(t.uop)
  comm.all_reduce(t, "max")   # (the same sum on every rank: max keeps it)
  assert t.uop.buffer.ptr == mem and id(t.uop) == node   # in place, the same node: nothing else refers to it
  weak = weakref.ref(t.uop)   # a weak holder (what a program derived from the node's contents): a new node
  comm.all_reduce(t, "max")
  assert t.uop.buffer.ptr == mem and weak() is not t.uop
  np.testing.assert_array_equal((t * 1).numpy(), sum(every))
  held, lazy = t.numpy(), t + 0   # readers of the old value: written into a new buffer instead
  comm.all_reduce(t)
  assert t.uop.buffer.ptr != mem
  np.testing.assert_array_equal(held, sum(every)); np.testing.assert_array_equal(lazy.numpy(), sum(every))
  np.testing.assert_array_equal(t.numpy(), n * sum(every))
  on = Tensor(every[r] > 5 + 2 * r).realize()   # bools: MPI's logical or, in place (rank 0's has the most)
  np.testing.assert_array_equal(comm.all_reduce(on).numpy(), every[0] > 5)
  bf = Tensor(x, dtype="bfloat16").realize()   # no MPI type: reduced in float32 in place
  np.testing.assert_array_equal(comm.all_reduce(bf, "max").numpy(), Tensor(every[-1], dtype="bfloat16").numpy())
  base = Tensor(x).realize()
  comm.all_reduce(base[1:3])   # a view: its base's rows written, as PyTorch's view semantics
  np.testing.assert_array_equal(base.numpy(), np.concatenate([x[:1], sum(every)[1:3], x[3:]]))
  kept = [comm.allreduce(Tensor(x + k)) for k in range(4)]   # results held: none reused while held
  np.testing.assert_array_equal(np.stack([k.numpy() for k in kept]), np.stack([sum(every) + n * k for k in range(4)]))
  view = comm.allreduce(Tensor(x)).numpy()   # a numpy view of a dropped result: its memory not reused either
  for k in range(3): comm.allreduce(Tensor(x + k))
  np.testing.assert_array_equal(view, sum(every))
  print(f"rank {r} inplace ok", flush=True)
elif mode in ("dead", "hang", "stale"):   # a rank dies, hangs, or (stale) calls another shape where the others skip the
  if mode == "stale":                        # shape check; the others catch the timeout and go on without MPI
    comm.allreduce(Tensor(x)); comm.allreduce(Tensor(x))   # agreed, so skipped from now on while the call stays the same
    if r == n - 1: x = np.ones((4, 4), np.float32)
  else:
    comm.barrier()   # every rank's start-up done (a rank dead before the others' init finished is another case)
    if r == n - 1: os._exit(3) if mode == "dead" else time.sleep(120)
  t0 = time.monotonic()
  try: comm.all_reduce(Tensor(x).realize()) if os.environ.get("INPLACE") else comm.allreduce(Tensor(x))
  except dist.DistError as e: print(f"rank {r} caught after {time.monotonic() - t0:.2f} s: {e}", flush=True)
  try: comm.barrier()
  except dist.DistError as e: print(f"rank {r} then: {e}", flush=True)
  if r: time.sleep(60)   # rank 0's exit ends the job (this rank's message printed first)
