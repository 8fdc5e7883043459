"""Train a small CNN on scikit-learn's handwritten digits (1,797 8x8 images shipped inside the wheel: no download).

Two conv + relu + max-pool blocks, then a linear layer; Adam; each training step (forward, backward, the optimizer
update of every parameter and moment) is one lazy graph that TinyJit records on its second call and replays after.

  python examples/train_digits.py [--epochs N] [--batch B] [--lr LR]"""
import argparse, time
import numpy as np
from sklearn.datasets import load_digits
from tqdm import tqdm
from morok_mlir import Tensor, TinyJit
from morok_mlir.nn import Conv2d, Linear
from morok_mlir.nn.optim import Adam
from morok_mlir.nn.state import get_parameters

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

def train(epochs: int = 12, batch: int = 64, lr: float = 3e-3, seed: int = 0, progress: bool = True) -> tuple[float, float]:
  """Returns (test accuracy, mean milliseconds per step after the first two)."""
  Tensor.manual_seed(seed)
  xtr, ytr, xte, yte = data(seed)
  model = DigitsCNN()
  opt = Adam(get_parameters(model), lr=lr)

  @TinyJit
  def step(x: Tensor, y: Tensor) -> Tensor:
    opt.zero_grad()
    loss = model(x).cross_entropy(y).backward()
    Tensor.realize(loss, *opt.schedule_step())   # the loss with the update: one schedule, the forward pass run once
    return loss

  rng, times = np.random.default_rng(seed), []
  steps = len(ytr) // batch   # whole batches only: one shape, one recorded step
  with Tensor.train():
    for epoch in range(epochs):
      perm = rng.permutation(len(ytr))
      bar = tqdm(range(steps), desc=f"epoch {epoch + 1}/{epochs}", disable=not progress, leave=False)
      for i in bar:
        idx = perm[i * batch:(i + 1) * batch]
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
  a = p.parse_args()
  acc, ms = train(a.epochs, a.batch, a.lr)
  print(f"test accuracy {acc:.4f}, {ms:.2f} ms per training step (batch {a.batch})")
