"""A small MLP forward pass on the CPU: lazy Tensor code, compiled through MLIR when .numpy() asks for it."""
import time
import numpy as np
from morok_mlir import Tensor
from morok_mlir.realize import GlobalCounters

rng = np.random.default_rng(0)
x = rng.standard_normal((256, 784), dtype=np.float32)
w1, b1 = rng.standard_normal((784, 512), dtype=np.float32) * 0.05, np.zeros(512, np.float32)
w2, b2 = rng.standard_normal((512, 10), dtype=np.float32) * 0.05, np.zeros(10, np.float32)

def mlp(x, w1, b1, w2, b2):
  return ((x @ w1 + b1).relu() @ w2 + b2).log_softmax(axis=1)

for run in ("first run (compiles)", "second run (cached)"):
  GlobalCounters.reset()
  t0 = time.perf_counter()
  out = mlp(*(Tensor(a) for a in (x, w1, b1, w2, b2))).numpy()
  dt = time.perf_counter() - t0
  print(f"{run}: {GlobalCounters.kernel_count} kernels, {dt * 1e3:.1f} ms")

ref = np.maximum(x @ w1 + b1, 0) @ w2 + b2
ref = ref - ref.max(1, keepdims=True); ref = ref - np.log(np.exp(ref).sum(1, keepdims=True))
print("log-probabilities of the first 2 samples:\n", np.round(out[:2], 3))
print("predicted classes:", out.argmax(1)[:16])
print("max abs difference to numpy:", float(np.abs(out - ref).max()))
