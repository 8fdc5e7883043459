"""Several processes on one host (loopback MPI): allreduce bandwidth of morok_mlir.dist against mpi4py's own Allreduce on
numpy arrays, per message size; a data-parallel step of a model split over the processes (the scheduler's bucketed
allreduces); and the data-parallel training step of examples/train_digits.py on 2 processes x 1 thread against 1
process x 2 threads.

  python bench/dist.py            # runs all (spawns mpiexec -n 2)
  mpiexec -n 2 python bench/dist.py --allreduce [--sizes 1024,16384] | --shard-step"""
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
  sizes = [int(n) for n in sys.argv[sys.argv.index("--sizes") + 1].split(",")] if "--sizes" in sys.argv else SIZES
  for nbytes in sizes:
    a = np.random.default_rng(comm.rank).standard_normal(nbytes // 4).astype(np.float32)
    out, t, ti = np.empty_like(a), Tensor(a).realize(), Tensor(np.zeros_like(a)).realize()
    reps = max(20, min(2000, (1 << 28) // nbytes))   # (the fastest of many: a 1 KiB call is a few us, and a busy host spreads them)
    # (all_reduce sums into ti again and again: zeros stay finite, and a float add costs the same on any finite value)
    rows.append((nbytes, *best([lambda: mc.Allreduce(a, out, MPI.SUM), lambda: comm.allreduce(t), lambda: comm.all_reduce(ti),
                                lambda: fast.allreduce(t)], reps)))
  if comm.rank == 0:
    print("ratio: mpi4py's time / ours; allreduce(t): a new Tensor, all_reduce(t): in place (torch.distributed.all_reduce)")
    print(f"{'bytes':>10} {'mpi4py GB/s':>12} {'allreduce GB/s':>15} {'ratio':>6} {'all_reduce GB/s':>16} {'ratio':>6}"
          f" {'no check GB/s':>14} {'ratio':>6}")
    for n, m, o, i, c in rows:
      print(f"{n:>10} {n / m / 1e9:12.3f} {n / o / 1e9:15.3f} {m / o:6.2f} {n / i / 1e9:16.3f} {m / i:6.2f} {n / c / 1e9:14.3f} {m / c:6.2f}")

def shard_step_bench(steps: int = 30):
  """A jitted data-parallel Adam step of a 3-layer MLP (6 parameters) whose batch of 64 is split over the processes
  (Tensor.shard over dist.devices(): the scheduler's allreduces, bucketed): ms per step, the mean after 10 steps."""
  from morok_mlir import Tensor, TinyJit, dist
  from morok_mlir.nn import Linear
  from morok_mlir.nn.optim import Adam
  from morok_mlir.nn.state import get_parameters
  comm = dist.init()
  devs = dist.devices()
  Tensor.manual_seed(0)
  layers = [Linear(64, 128), Linear(128, 128), Linear(128, 10)]
  for p in (params := get_parameters(layers)): p.shard_(devs)
  opt = Adam(params, lr=1e-3)
  @TinyJit
  def step(x, y):
    opt.zero_grad()
    for l in layers[:-1]: x = l(x).relu()
    loss = layers[-1](x).cross_entropy(y).backward()
    Tensor.realize(loss, *opt.schedule_step())
    return loss
  rng, ts = np.random.default_rng(0), []
  x, y = rng.standard_normal((64, 64)).astype(np.float32), rng.integers(0, 10, 64).astype(np.int32)
  with Tensor.train():
    for _ in range(steps):
      t0 = time.perf_counter()
      step(Tensor(x).shard(devs, axis=0), Tensor(y).shard(devs, axis=0)).item()
      ts.append(time.perf_counter() - t0)
  if comm.rank == 0: print(f"{'2 processes x 1 thread, MLP split over processes':<48} {1e3 * np.mean(ts[10:]):8.2f} ms per step (batch 64)")

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
  elif "--shard-step" in sys.argv: shard_step_bench()
  else:
    print(f"load average {os.getloadavg()[0]:.2f}")
    for mode in ("--allreduce", "--shard-step"):
      subprocess.run([str(Path(sys.executable).parent / "mpiexec"), "-n", "2", sys.executable, __file__, mode], check=True,
                     env=os.environ | {"PYTHONPATH": str(ROOT), "MOROK_THREADS": "1"})
    dp_bench()
    print(f"load average {os.getloadavg()[0]:.2f}")
