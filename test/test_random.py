"""Random numbers made in the kernel: threefry2x32-20 against Random123's known answers and a Python reference, and the
distributions, seeding and counters of rand/randn/randint/dropout built on it."""
import math, threading
import numpy as np
import pytest
from morok_mlir import Tensor, dtypes
from morok_mlir.dialects.ops import Ops
from morok_mlir.core.threefry import threefry2x32_py
from morok_mlir.realize import GlobalCounters

def threefry(x: np.ndarray, key: np.ndarray) -> np.ndarray:
  t = Tensor(x.astype(np.uint64))
  return t._op(Ops.THREEFRY, t.shape, dtypes.uint64, (Tensor(key.astype(np.uint64)),)).numpy()

# Random123's kat_vectors for threefry2x32 with 20 rounds: (counter words, key words) -> output words
KAT = [((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6b200159, 0x99ba4efe)),
       ((0xffffffff, 0xffffffff), (0xffffffff, 0xffffffff), (0x1cb996fc, 0xbb002be7)),
       ((0x243f6a88, 0x85a308d3), (0x13198a2e, 0x03707344), (0xc4923a9c, 0x483df7a0))]

def test_known_answers_in_a_kernel():
  w = lambda p: (p[1] << 32) | p[0]
  got = threefry(np.array([w(c) for c, _, _ in KAT], np.uint64), np.array([w(k) for _, k, _ in KAT], np.uint64))
  assert [int(g) for g in got] == [w(o) for _, _, o in KAT]
  assert [threefry2x32_py(w(c), w(k)) for c, k, _ in KAT] == [w(o) for _, _, o in KAT]

def test_matches_the_reference_on_random_words():
  r = np.random.default_rng(0)
  x, k = r.integers(0, 2**64, 500, dtype=np.uint64), r.integers(0, 2**64, 500, dtype=np.uint64)
  assert [int(v) for v in threefry(x, k)] == [threefry2x32_py(int(a), int(b)) for a, b in zip(x, k)]

def test_uniform_distribution():
  Tensor.manual_seed(1)
  a = Tensor.rand(1 << 20).numpy()
  assert a.dtype == np.float32 and a.min() >= 0 and a.max() < 1
  n = a.size
  assert abs(a.mean() - 0.5) < 5 * math.sqrt(1 / 12 / n) and abs(a.var() - 1 / 12) < 1e-3
  counts = np.histogram(a, 64, (0, 1))[0]
  chi2 = ((counts - n / 64) ** 2 / (n / 64)).sum()
  assert chi2 < 63 + 6 * math.sqrt(2 * 63), chi2   # 63 degrees of freedom, 6 sigma
  assert abs(np.corrcoef(a[:-1], a[1:])[0, 1]) < 5 / math.sqrt(n)   # neighbours uncorrelated

@pytest.mark.parametrize("dt", [dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64])
def test_rand_dtypes_stay_below_one(dt):
  a = Tensor.rand(4096, 16, dtype=dt).numpy()
  assert a.dtype == dt.np and a.min() >= 0 and a.max() < 1 and len(np.unique(a)) >= min(100, 2 ** dt.finfo.nmant)
  assert abs(a.astype(np.float64).mean() - 0.5) < 0.01

def test_seeds_counters_and_no_recompiles():
  Tensor.manual_seed(42)
  a, b = Tensor.rand(100).numpy(), Tensor.rand(3, 50).numpy()
  Tensor.manual_seed(42)
  c = Tensor.rand(250).numpy()
  np.testing.assert_array_equal(np.concatenate([a, b.ravel()]), c)   # the counter runs on across calls
  assert not np.array_equal(a, b.ravel()[:100])
  Tensor.manual_seed(43)
  GlobalCounters.reset()
  d = Tensor.rand(100).numpy()
  assert GlobalCounters.compiled == 0 and GlobalCounters.kernel_count == 1   # seed and counter are data
  assert not np.array_equal(a, d)

def test_randn_normal_uniform_randint():
  Tensor.manual_seed(5)
  z = Tensor.randn(512, 1024).numpy().astype(np.float64)
  assert abs(z.mean()) < 0.01 and abs(z.std() - 1) < 0.01 and np.isfinite(z).all()
  for q, want in ((0.1587, -1.0), (0.5, 0.0), (0.8413, 1.0)):   # quantiles of the standard normal
    assert abs(np.quantile(z, q) - want) < 0.02
  m = Tensor.normal(1000, 100, mean=3.0, std=0.5).numpy()
  assert abs(m.mean() - 3) < 0.01 and abs(m.std() - 0.5) < 0.01
  u = Tensor.uniform(10000, low=-2.0, high=5.0).numpy()
  assert u.min() >= -2 and u.max() < 5 and abs(u.mean() - 1.5) < 0.1
  i = Tensor.randint(100000, low=-3, high=4, dtype=dtypes.int64).numpy()
  assert i.dtype == np.int64 and set(np.unique(i)) == set(range(-3, 4))
  assert np.abs(np.bincount(i + 3) / i.size - 1 / 7).max() < 0.01
  assert Tensor.randint(5, low=2**31 - 3, high=2**31).numpy().min() >= 2**31 - 3

def test_dropout_mask_is_made_in_the_kernel():
  x = Tensor.ones(256, 256)
  with_training = Tensor.training
  Tensor.training = True
  try:
    GlobalCounters.reset()
    y = x.dropout(0.25).numpy()
    assert GlobalCounters.kernel_count == 1
  finally: Tensor.training = with_training
  assert set(np.unique(y)) <= {0.0, np.float32(1 / 0.75)} and abs((y == 0).mean() - 0.25) < 0.01

def test_threads_draw_disjoint_counters():
  out = []
  def draw():
    for _ in range(5): out.append(Tensor._random_bits((64,), "CPU").numpy())
  ts = [threading.Thread(target=draw) for _ in range(4)]
  for t in ts: t.start()
  for t in ts: t.join()
  bits = np.concatenate(out)
  assert len(np.unique(bits)) == bits.size == 4 * 5 * 64

def test_same_bits_through_the_gpu_lowering():
  from morok_mlir.device.gpu_emulator import emulate
  Tensor.manual_seed(9)
  t = Tensor.rand(33, 17)
  got = emulate([t.lazydata])[0]
  np.testing.assert_array_equal(got, t.numpy())

def test_errors():
  with pytest.raises(TypeError, match="floats"): Tensor.rand(3, dtype=dtypes.int32)
  with pytest.raises(TypeError, match="int"): Tensor.manual_seed(1.5)
  assert Tensor.rand(0, 3).numpy().shape == (0, 3) and Tensor.randn(2, 0).numpy().shape == (2, 0)
