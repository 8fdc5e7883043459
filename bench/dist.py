"""Several processes on one host (loopback MPI): allreduce bandwidth of morok_mlir.dist against mpi4py's own Allreduce on
numpy arrays, per message size; and the data-parallel training step of examples/train_digits.py on 2 processes x 1
thread against 1 process x 2 threads.

  python bench/dist.py            # runs both (spawns mpiexec -n 2)
  mpiexec -n 2 python bench/dist.py --allreduce"""
import os, re, subprocess, sys, time
from pathlib import Path
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SIZES = [1 << 10, 1 << 14, 1 << 18, 1 << 22, 1 << 24, 1 << 26]   # bytes of float32

def best(fns, reps: int) -> list[float]:
  """The fastest of reps timed calls of each fn, the fns taking turns (a shared machine's load then hits them alike)."""
  for f in fns: f()
  ts = [[] for _ in fns]
  for _ in range(reps):
    for f, t in zip(fns, ts):
      t0 = time.perf_counter(); f(); t.append(time.perf_counter() - t0)
  return [min(t) for t in ts]

def allreduce_bench():
  from mpi4py import MPI
  from morok_mlir import Tensor, dist
  comm, mc = dist.init(check=True), MPI.COMM_WORLD
  fast = dist.Communicator(comm.b, check=False)
  rows = []
  for nbytes in SIZES:
    a = np.random.default_rng(comm.rank).standard_normal(nbytes // 4).astype(np.float32)
    out, t = np.empty_like(a), Tensor(a).realize()
    reps = max(20, min(200, (1 << 26) // nbytes))
    mpi, ours, nochk = best([lambda: mc.Allreduce(a, out, MPI.SUM), lambda: comm.allreduce(t), lambda: fast.allreduce(t)], reps)
    rows.append((nbytes, mpi, ours, nochk))
  if comm.rank == 0:
    print(f"{'bytes':>10} {'mpi4py GB/s':>12} {'ours GB/s':>10} {'ratio':>6} {'no check GB/s':>14} {'ratio':>6}")
    for n, m, o, c in rows: print(f"{n:>10} {n / m / 1e9:12.3f} {n / o / 1e9:10.3f} {m / o:6.2f} {n / c / 1e9:14.3f} {m / c:6.2f}")

def step_ms(cmd: list[str], env: dict) -> float:
  p = subprocess.run(cmd, capture_output=True, text=True, env=os.environ | {"PYTHONPATH": str(ROOT)} | env, cwd=ROOT, timeout=600)
  if p.returncode: raise RuntimeError(p.stdout + p.stderr)
  return float(re.search(r"([\d.]+) ms per training step", p.stdout).group(1))

def dp_bench(steps: int = 40):
  mpiexec = str(Path(sys.executable).parent / "mpiexec")
  train = [sys.executable, str(ROOT / "examples/train_digits.py"), "--epochs", "2", "--steps", str(steps)]
  runs = {"2 processes x 1 thread (--dp, mpiexec -n 2)": step_ms([mpiexec, "-n", "2", *train, "--dp"], {"MOROK_THREADS": "1"}),
          "1 process x 2 threads (--dp, a world of one)": step_ms([*train, "--dp"], {"MOROK_THREADS": "2"}),
          "1 process x 2 threads (TinyJit step, no --dp)": step_ms(train, {"MOROK_THREADS": "2"}),
          "1 process x 1 thread (--dp, a world of one)": step_ms([*train, "--dp"], {"MOROK_THREADS": "1"})}
  for k, v in runs.items(): print(f"{k:<48} {v:8.2f} ms per step (global batch 64)")

if __name__ == "__main__":
  if "--allreduce" in sys.argv: allreduce_bench()
  else:
    subprocess.run([str(Path(sys.executable).parent / "mpiexec"), "-n", "2", sys.executable, __file__, "--allreduce"], check=True,
                   env=os.environ | {"PYTHONPATH": str(ROOT), "MOROK_THREADS": "1"})
    dp_bench()
