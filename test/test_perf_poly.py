"""The f32 polynomial exp2/log2 of uop-lower-cpu (lower_cpu.Poly) against float64, with the bounds its docstring states:
exp2 <= 2 ulp where the result is a normal float (absolute <= 2^-148 below), log2 <= 2 ulp; IEEE edge values exact."""
import numpy as np
import pytest
from morok_mlir.tensor import Tensor

def ulps(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
  """|got - ref| in units of the float32 spacing at ref (ref in float64)."""
  return np.abs(got.astype(np.float64) - ref) / np.spacing(np.abs(ref.astype(np.float32))).astype(np.float64)

def test_exp2_ulp():
  rng = np.random.default_rng(0)
  x = np.concatenate([np.linspace(-150, 128, 1_000_001, dtype=np.float32), rng.uniform(-10, 10, 500_000).astype(np.float32),
                      rng.uniform(-1e-6, 1e-6, 100_000).astype(np.float32)])
  got, ref = Tensor(x).exp2().numpy(), np.exp2(x.astype(np.float64))
  normal = (ref >= 2.0 ** -126) & (ref <= np.finfo(np.float32).max)
  assert ulps(got[normal], ref[normal]).max() <= 2
  assert np.abs(got[ref < 2.0 ** -126] - ref[ref < 2.0 ** -126]).max() <= 2.0 ** -148
  assert np.isinf(got[ref > np.finfo(np.float32).max]).all()

def test_log2_ulp():
  rng = np.random.default_rng(1)
  bits = rng.integers(1, 0x7f800000, 1_000_000).astype(np.uint32).view(np.float32)   # every positive finite float, subnormals too
  x = np.concatenate([bits, np.linspace(0.5, 2, 500_001, dtype=np.float32), 1 + rng.uniform(-1e-3, 1e-3, 100_000).astype(np.float32)])
  got, ref = Tensor(x).log2().numpy(), np.log2(x.astype(np.float64))
  nz = ref != 0
  assert ulps(got[nz], ref[nz]).max() <= 2
  assert (got[~nz] == 0).all()

F32 = np.finfo(np.float32)
@pytest.mark.parametrize("fn,ref,vals", [
  ("exp2", np.exp2, [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 127.99, 128.0, -126.0, -149.0, -150.0, -160.0, 1e30, -1e30, F32.max, -F32.max]),
  ("log2", np.log2, [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, 1e-40, F32.tiny, 1.0, 2.0, 0.5, -1.0, -1e-45, F32.max, 3.0])])
def test_edge_values(fn, ref, vals):
  x = np.array(vals, np.float32)
  got = getattr(Tensor(x), fn)().numpy()
  with np.errstate(all="ignore"): want = ref(x.astype(np.float64)).astype(np.float32)
  assert np.array_equal(np.isnan(got), np.isnan(want)), (x, got, want)
  ok = ~np.isnan(want)
  assert (np.isinf(got[ok]) == np.isinf(want[ok])).all() and (got[ok][np.isinf(want[ok])] == want[ok][np.isinf(want[ok])]).all()
  fin = ok & np.isfinite(want)
  assert ulps(got[fin], want[fin].astype(np.float64)).max() <= 2 or np.abs(got[fin] - want[fin]).max() <= 2.0 ** -148

def test_fused_softmax_sum_within_tolerance():
  """fastmath reduces (reassociated, vectorized) stay within float32 summation error of the float64 result."""
  x = np.random.default_rng(2).standard_normal((64, 4096), dtype=np.float32)
  got, ref = Tensor(x).softmax(1).numpy(), np.exp(x - x.max(1, keepdims=True)); ref /= ref.sum(1, keepdims=True)
  np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-8)
  s = np.random.default_rng(3).uniform(0, 1, 1 << 22).astype(np.float32)
  assert abs(float(Tensor(s).sum().numpy()) - s.astype(np.float64).sum()) <= 1e-6 * s.size
