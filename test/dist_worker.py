"""Run by test_dist.py under mpiexec: `dist_worker.py MODE`; each rank checks its results and exits 0."""
import os, sys, time
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
  np.testing.assert_array_equal(comm.allgather(Tensor(x) * 2).numpy(), np.concatenate(every) * 2)
  np.testing.assert_array_equal(comm.reduce_scatter(Tensor(np.ones((2 * n, 3), np.float32) * (r + 1))).numpy(), np.full((2, 3), n * (n + 1) / 2))
  np.testing.assert_array_equal(comm.broadcast(Tensor(x), root=n - 1).numpy(), every[-1])
  if r == 0: comm.send(Tensor(x) + 100, 1)
  if r == 1: np.testing.assert_array_equal(comm.recv((4, 3), "float32", 0).numpy(), every[0] + 100)
  comm.barrier()
  print(f"rank {r} of {n} ok (local rank {comm.local_rank})", flush=True)
elif mode == "shape": comm.allreduce(Tensor(np.ones((2, 3 + r), np.float32)))
elif mode == "dtype": comm.allreduce(Tensor(np.ones((2, 3), np.float32 if r == 0 else np.int32)))
elif mode == "recv":
  if r == 0: comm.send(Tensor(x), 1)
  if r == 1: comm.recv((3, 4), "float32", 0)
elif mode in ("dead", "hang", "stale"):   # a rank dies, hangs, or (stale) calls another shape where the others skip the
  if mode == "stale":                        # shape check; the others catch the timeout and go on without MPI
    comm.allreduce(Tensor(x)); comm.allreduce(Tensor(x))   # agreed, so skipped from now on while the call stays the same
    if r == n - 1: x = np.ones((4, 4), np.float32)
  elif r == n - 1: os._exit(3) if mode == "dead" else time.sleep(120)
  t0 = time.monotonic()
  try: comm.allreduce(Tensor(x))
  except dist.DistError as e: print(f"rank {r} caught after {time.monotonic() - t0:.2f} s: {e}", flush=True)
  try: comm.barrier()
  except dist.DistError as e: print(f"rank {r} then: {e}", flush=True)
  if r: time.sleep(60)   # rank 0's exit ends the job (this rank's message printed first)
