"""The f32 polynomial exp2/log2 of uop-lower-cpu (lower_cpu.Poly) against float64, with the bounds its docstring states:
exp2 <= 2 ulp where the result is a normal float (absolute <= 2^-148 below), log2 <= 2 ulp; IEEE edge values exact."""
import numpy as np
import pytest
from morok_mlir.tensor import Tensor

@pytest.fixture(params=["host", "no-avx512"])
def scaling(request, monkeypatch):
  """exp2's scaling by 2^n as the host does it (AVX-512: vscalefps, through llvm.ldexp where LLVM vectorizes) and as a
  machine without AVX-512 does (integer shifts into two normal factors): both paths checked on any machine."""
  if request.param == "no-avx512":
    from morok_mlir import realize
    from morok_mlir.codegen import lower_cpu
    from morok_mlir.device.cpu import CPU
    monkeypatch.setattr(lower_cpu, "CPU_FLAGS", frozenset())
    monkeypatch.setattr(CPU.disk, "enabled", False)   # (nor schedules compiled with the host's path from disk)
    monkeypatch.setattr(realize, "_schedule_cache", {})
  return request.param

def ulps(got: np.ndarray, ref: np.ndarray) -> np.ndarray:
  """|got - ref| in units of the float32 spacing at ref (ref in float64)."""
  return np.abs(got.astype(np.float64) - ref) / np.spacing(np.abs(ref.astype(np.float32))).astype(np.float64)

def test_exp2_ulp(scaling):
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
def test_edge_values(fn, ref, vals, scaling):
  x = np.array(vals, np.float32)
  got = getattr(Tensor(x), fn)().numpy()
  with np.errstate(all="ignore"): want = ref(x.astype(np.float64)).astype(np.float32)
  assert np.array_equal(np.isnan(got), np.isnan(want)), (x, got, want)
  ok = ~np.isnan(want)
  assert (np.isinf(got[ok]) == np.isinf(want[ok])).all() and (got[ok][np.isinf(want[ok])] == want[ok][np.isinf(want[ok])]).all()
  fin = ok & np.isfinite(want)
  assert ulps(got[fin], want[fin].astype(np.float64)).max() <= 2 or np.abs(got[fin] - want[fin]).max() <= 2.0 ** -148

def test_fused_softmax_sum_within_tolerance(scaling):
  """fastmath reduces (reassociated, vectorized) stay within float32 summation error of the float64 result."""
  x = np.random.default_rng(2).standard_normal((64, 4096), dtype=np.float32)
  got, ref = Tensor(x).softmax(1).numpy(), np.exp(x - x.max(1, keepdims=True)); ref /= ref.sum(1, keepdims=True)
  np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-8)
  s = np.random.default_rng(3).uniform(0, 1, 1 << 22).astype(np.float32)
  assert abs(float(Tensor(s).sum().numpy()) - s.astype(np.float64).sum()) <= 1e-6 * s.size

def test_pow_ulp():
  """f32 pow (log2|x|, its product with y and exp2 in f64, rounded once): <= 1.5 ulp wherever the result is a normal
  float, for a large |y| too (x near 1: 1.16 measured), a subnormal x, a negative x to integer powers; <= 1 for a
  constant exponent (LRN's 0.75: 0.52 measured)."""
  rng = np.random.default_rng(4)
  cases = [(np.exp(rng.uniform(-20, 20, 200_000)), rng.uniform(-6, 6, 200_000)),
           (rng.uniform(0.9, 1.1, 200_000), rng.uniform(-800, 800, 200_000)),
           (rng.integers(1, 0x800000, 50_000).astype(np.uint32).view(np.float32), rng.uniform(0.01, 1, 50_000)),
           (-np.exp(rng.uniform(-5, 5, 50_000)), rng.integers(-20, 20, 50_000))]
  for x, y in cases:
    x, y = x.astype(np.float32), y.astype(np.float32)
    got, ref = (Tensor(x) ** Tensor(y)).numpy(), np.power(x.astype(np.float64), y.astype(np.float64))
    normal = (np.abs(ref) >= 2.0 ** -126) & (np.abs(ref) <= F32.max)
    assert normal.mean() > 0.5 and ulps(got[normal], ref[normal]).max() <= 1.5
  x = rng.uniform(0.5, 3, 10_000).astype(np.float32)
  assert ulps((Tensor(x) ** 0.75).numpy(), np.power(x.astype(np.float64), 0.75)).max() <= 1

POW_EDGES = [0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3e38, -3e38, 1.5, -1.5,
             2.5, 1e30, 16777216.0, -16777217.0, 1e-40]
def test_pow_edge_values():
  """C's powf on every pair of edge values (numpy's answers): NaN, infinities and signed zeros exact, signs of odd powers."""
  a, b = (np.array(v, np.float32) for v in zip(*[(p, q) for p in POW_EDGES for q in POW_EDGES]))
  got = (Tensor(a) ** Tensor(b)).numpy()
  with np.errstate(all="ignore"): want = np.power(a, b)
  assert np.array_equal(np.isnan(got), np.isnan(want))
  ok = ~np.isnan(want)
  assert np.array_equal(np.signbit(got[ok]), np.signbit(want[ok])) and np.array_equal(np.isinf(got[ok]), np.isinf(want[ok]))
  fin = ok & np.isfinite(want) & (want != 0)
  assert (got[ok & (want == 0)] == 0).all() and (ulps(got[fin], want[fin].astype(np.float64)) <= 2).all()

@pytest.mark.parametrize("build,ref,rtol", [
  (lambda x, y: (x.permute(1, 0) ** y.permute(1, 0)).contiguous(), lambda x, y: x.T ** y.T, 2e-7),   # a transposed read
  (lambda x, y: ((x @ y).abs() + 1) ** 0.75, lambda x, y: (np.abs(x @ y) + 1) ** 0.75, 1e-5)])       # a contraction's epilogue
def test_pow_in_lanes_and_epilogues(build, ref, rtol):
  rng = np.random.default_rng(5)
  x, y = rng.uniform(0.1, 2, (96, 96)).astype(np.float32), rng.uniform(-3, 3, (96, 96)).astype(np.float32)
  np.testing.assert_allclose(build(Tensor(x), Tensor(y)).numpy(), ref(x.astype(np.float64), y.astype(np.float64)), rtol=rtol)

def test_exp_and_sigmoid_ulp(scaling):
  """exp(x) = exp2(x / ln 2) with the product's rounding recovered (an FMA) and 1/ln 2 in two f32 parts
  (lower_cpu.Poly.exp2_mul): <= 1.5 ulp over the whole normal range (a plain exp2 of the rounded product was 64 ulp
  off at exp(80)); sigmoid within 3e-7 relative; the IEEE edges exact."""
  x = np.concatenate([np.linspace(-87, 88.7, 1_000_001, dtype=np.float32), np.linspace(-1, 1, 100_001, dtype=np.float32)])
  got, ref = Tensor(x).exp().numpy(), np.exp(x.astype(np.float64))
  assert ulps(got, ref).max() <= 1.5
  x = np.linspace(-30, 30, 200_001, dtype=np.float32)
  got, ref = Tensor(x).sigmoid().numpy(), 1 / (1 + np.exp(-x.astype(np.float64)))
  assert (np.abs(got - ref) / ref).max() <= 3e-7
  e = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 88.73, 100.0, -104.0, -1e30, 1e30], np.float32)
  with np.errstate(all="ignore"): want = np.exp(e)
  got = Tensor(e).exp().numpy()
  assert np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(got[~np.isnan(want)], want[~np.isnan(want)])

def test_cos_and_shifted_sin_ulp():
  """cos (sin(pi/2 - x) in the graph) lowers to libm's cos of x: <= 1 ulp near its zeros and for huge x, where the f32
  subtraction lost everything (0.75 relative at x ~ 100); sin(x + c) computes the shift and the sine in f64."""
  rng = np.random.default_rng(6)
  for x in (rng.uniform(-100, 100, 200_000), rng.uniform(1.5, 1.65, 100_000), rng.uniform(-1e30, 1e30, 100_000)):
    x = x.astype(np.float32)
    got, ref = Tensor(x).cos().numpy(), np.cos(x.astype(np.float64))
    assert (ulps(got, ref) <= 1).all()
  x = rng.uniform(-10, 10, 100_000).astype(np.float32)
  assert (ulps((Tensor(x) + 1).sin().numpy(), np.sin(x.astype(np.float64) + 1)) <= 1).all()
  e = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], np.float32)
  with np.errstate(all="ignore"): want = np.cos(e)
  got = Tensor(e).cos().numpy()
  assert np.array_equal(np.isnan(got), np.isnan(want)) and np.array_equal(got[~np.isnan(want)], want[~np.isnan(want)])
