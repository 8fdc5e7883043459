"""Train a small MLP on synthetic 3-class data: forward, backward and the Adam update build one lazy graph per step,
which opt.step() realizes in one call (one compiled schedule, reused every step)."""
import time
import numpy as np
from morok_mlir import Tensor
from morok_mlir.nn import Linear
from morok_mlir.nn.optim import Adam
from morok_mlir.nn.state import get_parameters
from morok_mlir.realize import GlobalCounters

rng = np.random.default_rng(0)
centers = rng.standard_normal((3, 16)) * 2
labels = rng.integers(0, 3, 512)
X = Tensor((centers[labels] + rng.standard_normal((512, 16))).astype(np.float32))
Y = Tensor(labels.astype(np.int32))

class MLP:
  def __init__(self): self.l1, self.l2 = Linear(16, 64), Linear(64, 3)
  def __call__(self, x: Tensor) -> Tensor: return self.l2(self.l1(x).relu())

model = MLP()
opt = Adam(get_parameters(model), lr=0.01)
with Tensor.train():
  for step in range(30):
    GlobalCounters.reset()
    t0 = time.perf_counter()
    opt.zero_grad()
    loss = model(X).cross_entropy(Y).backward()
    opt.step()
    dt = time.perf_counter() - t0
    if step % 10 == 0 or step == 29:
      print(f"step {step:2d}: loss {loss.item():.4f}, {GlobalCounters.kernel_count} kernels in the step, {dt * 1e3:.1f} ms")
acc = (model(X).argmax(1) == Y).float().mean().item()
print(f"training accuracy {acc:.3f}")
