"""examples/train_digits.py, as run by default (12 epochs, Adam, the TinyJit step), trains its CNN to >= 97% test
accuracy on scikit-learn's digits."""
import pathlib, sys
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
import train_digits

def test_digits_cnn_reaches_97_percent():
  acc, ms = train_digits.train(epochs=12, progress=False)
  assert acc >= 0.97, acc

def test_data_parallel_on_two_processes_equals_one(tmp_path):
  """`mpiexec -n 2 train_digits.py --dp`: each rank the gradient of half of every global batch, averaged by allreduce;
  the weights after a few steps equal one process's (the TinyJit path) on the same global batches, to rounding."""
  import os, shutil, subprocess
  import numpy as np, pytest
  pytest.importorskip("mpi4py", reason="the dist extra (mpi4py, mpich) is not installed")
  from morok_mlir import Tensor
  from morok_mlir.nn.state import get_state_dict
  root = pathlib.Path(__file__).resolve().parents[1]
  mpiexec = shutil.which("mpiexec", path=str(pathlib.Path(sys.executable).parent))
  env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")} | {"PYTHONPATH": str(root), "MOROK_THREADS": "1"}
  p = subprocess.run([mpiexec, "-n", "2", sys.executable, str(root / "examples/train_digits.py"), "--dp", "--epochs", "1", "--steps", "6",
                      "--save", str(tmp_path / "dp.npz")], capture_output=True, text=True, timeout=300, env=env, cwd=root)
  assert p.returncode == 0, p.stdout + p.stderr
  Tensor.manual_seed(0)
  model = train_digits.DigitsCNN()
  train_digits.train(epochs=1, max_steps=6, model=model, progress=False)
  got = np.load(tmp_path / "dp.npz")
  for k, v in get_state_dict(model).items(): np.testing.assert_allclose(got[k], v.numpy(), rtol=1e-4, atol=1e-5, err_msg=k)
