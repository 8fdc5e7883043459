"""Train a small CNN on scikit-learn's handwritten digits (1,797 8x8 images shipped inside the wheel: no download).

Two conv + relu + max-pool blocks, then a linear layer; Adam; each training step (forward, backward, the optimizer
update of every parameter and moment) is one lazy graph that TinyJit records on its second call and replays after.

  python examples/train_digits.py [--epochs N] [--batch B] [--lr LR]

Data-parallel on several processes (each rank computes the gradient of its slice of every global batch, the ranks
average them with one allreduce, and every rank applies the same update: the weights equal one process's on the same
global batches, to rounding):

  mpiexec -n 2 python examples/train_digits.py --dp [--steps N] [--save weights.npz]"""
import argparse, time
import numpy as np
from sklearn.datasets import load_digits
from tqdm import tqdm
from morok_mlir import Tensor, TinyJit
from morok_mlir.nn import Conv2d, Linear
from morok_mlir.nn.optim import Adam
from morok_mlir.nn.state import get_parameters, get_state_dict

class DigitsCNN:
  def __init__(self):
    self.c1, self.c2, self.fc = Conv2d(1, 16, 3, padding=1), Conv2d(16, 32, 3, padding=1), Linear(32 * 2 * 2, 10)
  def __call__(self, x: Tensor) -> Tensor:
    x = self.c1(x).relu().max_pool2d(2)      # 16 x 4 x 4
    x = self.c2(x).relu().max_pool2d(2)      # 32 x 2 x 2
    return self.fc(x.flatten(1))

def data(seed: int = 0):
  """(train images, train labels, test images, test labels): a fixed quarter held out, pixels scaled to [0, 1]."""
  d = load_digits()
  x, y = (d.images / 16.0).astype(np.float32)[:, None], d.target.astype(np.int32)
  perm = np.random.default_rng(seed).permutation(len(y))
  cut = len(y) * 3 // 4
  return x[perm[:cut]], y[perm[:cut]], x[perm[cut:]], y[perm[cut:]]

def accuracy(model, x: np.ndarray, y: np.ndarray) -> float:
  return float((model(Tensor(x)).argmax(1).numpy() == y).mean())

def train(epochs: int = 12, batch: int = 64, lr: float = 3e-3, seed: int = 0, progress: bool = True, comm=None,
          max_steps: int | None = None, model: DigitsCNN | None = None) -> tuple[float, float]:
  """Returns (test accuracy, mean milliseconds per step after the first two). comm: a morok_mlir.dist Communicator for
  data-parallel training (batch is the global batch; rank r takes its r-th slice); max_steps: stop after so many."""
  Tensor.manual_seed(seed)
  xtr, ytr, xte, yte = data(seed)
  model = model or DigitsCNN()
  params = get_parameters(model)
  opt = Adam(params, lr=lr)
  if comm is not None:
    if batch % comm.world_size: raise SystemExit(f"--batch {batch} must be divisible by the {comm.world_size} ranks")
    for p in params: p.assign(comm.broadcast(p, root=0)).realize()   # every rank starts from rank 0's weights

  @TinyJit
  def step(x: Tensor, y: Tensor) -> Tensor:
    opt.zero_grad()
    loss = model(x).cross_entropy(y).backward()
    Tensor.realize(loss, *opt.schedule_step())   # the loss with the update: one schedule, the forward pass run once
    return loss

  # data-parallel: the allreduce is a host call between two jitted graphs, the gradients and the update
  @TinyJit
  def grads(x: Tensor, y: Tensor, *ps: Tensor) -> tuple[Tensor, Tensor]:   # ps: the parameters, which a replay reads anew
    opt.zero_grad()
    loss = model(x).cross_entropy(y).backward()
    flat = Tensor.cat(*[p.grad.flatten() for p in params])   # every gradient in one message
    return loss.realize(flat), flat
  @TinyJit
  def update(total: Tensor):
    flat, o = total / comm.world_size, 0   # the mean of the ranks' means: the global batch's mean (in the update's kernels)
    for p in params: p.grad, o = flat[o:o + p.numel()].reshape(p.shape), o + p.numel()
    Tensor.realize(*opt.schedule_step())
  def dp_step(x: Tensor, y: Tensor) -> Tensor:
    loss, flat = grads(x, y, *params)
    update(comm.allreduce(flat))
    return loss

  if comm is not None: step = dp_step
  rng, times = np.random.default_rng(seed), []
  steps = len(ytr) // batch   # whole batches only: one shape, one recorded step
  with Tensor.train():
    for epoch in range(epochs):
      perm = rng.permutation(len(ytr))
      bar = tqdm(range(steps), desc=f"epoch {epoch + 1}/{epochs}", disable=not progress, leave=False)
      for i in bar:
        if max_steps is not None and len(times) >= max_steps: break
        idx = perm[i * batch:(i + 1) * batch]
        if comm is not None: idx = idx[comm.rank * batch // comm.world_size:(comm.rank + 1) * batch // comm.world_size]
        t0 = time.perf_counter()
        loss = step(Tensor(xtr[idx]), Tensor(ytr[idx])).item()
        times.append(time.perf_counter() - t0)
        if i % 5 == 0: bar.set_postfix(loss=f"{loss:.3f}")
      if progress: print(f"epoch {epoch + 1}: loss {loss:.4f}, test accuracy {accuracy(model, xte, yte):.4f}")
  return accuracy(model, xte, yte), 1e3 * float(np.mean(times[2:]))

if __name__ == "__main__":
  p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  p.add_argument("--epochs", type=int, default=12)
  p.add_argument("--batch", type=int, default=64)
  p.add_argument("--lr", type=float, default=3e-3)
  p.add_argument("--dp", action="store_true", help="data-parallel over the processes mpiexec (or torchrun) started")
  p.add_argument("--steps", type=int, default=None, help="stop after this many steps")
  p.add_argument("--save", default=None, help="write the trained weights to this .npz file (rank 0)")
  a = p.parse_args()
  comm = None
  if a.dp:
    from morok_mlir import dist
    comm = dist.init()
  Tensor.manual_seed(0)
  model = DigitsCNN()
  acc, ms = train(a.epochs, a.batch, a.lr, progress=comm is None or comm.rank == 0, comm=comm, max_steps=a.steps, model=model)
  if comm is None or comm.rank == 0:
    print(f"test accuracy {acc:.4f}, {ms:.2f} ms per training step (batch {a.batch}{f' over {comm.world_size} ranks' if comm else ''})")
    if a.save: np.savez(a.save, **{k: v.numpy() for k, v in get_state_dict(model).items()})
