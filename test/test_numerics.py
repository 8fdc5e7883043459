"""Numeric semantics against numpy where the machine's own answer differs: long float sums (blocked accumulation keeps
f32 sums of 2^31 terms right)."""
import numpy as np
import pytest
from morok_mlir import Tensor

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

def rel(x, exact) -> float: return float(np.max(np.abs(np.asarray(x, np.float64) - exact) / np.abs(exact)))

# ---------------------------------------------------------------- long float sums
# One f32 accumulator stops growing at 2^24 (adding 1 is a tie that rounds back); LLVM's vector loop keeps one per lane
# (32 or 64 of them), so before blocked accumulation a sum of 2^31 ones was 2^29 = 536870912 (numpy: 2147483648).
N = 2 ** 31 + 5

def test_sum_of_2_31_ones():
  assert Tensor.ones(N).sum().item() == np.float32(N) == 2147483648.0

def test_row_sums_and_mean_of_2_31_ones():
  assert Tensor.ones(2, N).sum(1).tolist() == [2147483648.0] * 2
  assert Tensor.ones(N).mean().item() == 1.0
  assert Tensor.ones(2, N).mean(1).tolist() == [1.0, 1.0]

@pytest.mark.parametrize("lo,hi", [(0, 1), (-1, 1.5)])
def test_sum_of_2_31_random_terms(lo, hi):
  """x[i, j] = a[i] + b[j] (2^16 x 2^15, broadcast: nothing is materialised) has an exact sum from a's and b's; one
  accumulator per lane was off by 1.5e-2, blocks are as close as numpy's pairwise sum of a small array."""
  r = np.random.default_rng(0)
  a, b = r.uniform(lo, hi, 1 << 16).astype(np.float32), r.uniform(lo, hi, 1 << 15).astype(np.float32)
  sa, sb = np.sum(a, dtype=np.float64), np.sum(b, dtype=np.float64)
  assert rel((Tensor(a).reshape(-1, 1) + Tensor(b)).sum().item(), sa * b.size + sb * a.size) < 1e-6
  rows = (Tensor(a[:3]).reshape(-1, 1, 1) + Tensor(a).reshape(1, -1, 1) + Tensor(b)).sum((1, 2))  # rows of 2^31 terms
  assert rel(rows.numpy(), a[:3].astype(np.float64) * (a.size * b.size) + sa * b.size + sb * a.size) < 1e-6

@pytest.mark.parametrize("dist", ["uniform", "normal+1", "lognormal"])
def test_sum_precision_like_numpy(dist):
  """16M f32 values: relative error of the sum against the float64 sum, next to numpy's (pairwise) error. One
  accumulator per vector lane was 1e-7..6e-7 here; blocks measured 8e-9..7e-8 (numpy 8e-9..2e-8)."""
  r = np.random.default_rng(1)
  x = {"uniform": lambda: r.random(1 << 24, dtype=np.float32), "normal+1": lambda: r.standard_normal(1 << 24, dtype=np.float32) + 1,
       "lognormal": lambda: np.exp(r.standard_normal(1 << 24)).astype(np.float32)}[dist]()
  exact, t = np.sum(x, dtype=np.float64), Tensor(x)
  assert rel(t.sum().item(), exact) < max(3e-7, 4 * rel(np.sum(x), exact))
  assert rel(t.mean().item(), exact / x.size) < max(3e-7, 4 * rel(np.mean(x), exact / x.size))
  rows = x.reshape(4, -1)
  assert rel(Tensor(rows).sum(1).numpy(), np.sum(rows, 1, dtype=np.float64)) < 3e-7

@pytest.mark.parametrize("shape,axis", [((10000,), None), ((3, 10007), 1), ((5000, 3), 0), ((7, 13, 257), (1, 2)), ((2, 4099, 2), (0, 1))])
def test_blocked_sums_are_sums(shape, axis):
  """Block and tail bookkeeping: every term counted once, whatever the sizes and reduce axes (ints identify terms)."""
  x = np.arange(np.prod(shape), dtype=np.float32).reshape(shape) % 1024
  np.testing.assert_allclose(Tensor(x).sum(axis).numpy(), np.sum(x, axis, dtype=np.float64), rtol=1e-6)
