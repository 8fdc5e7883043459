"""Numeric semantics against numpy where the machine's own answer differs: long float sums (blocked accumulation keeps
f32 sums of 2^31 terms right) and shifts by any amount (LLVM leaves shifts by >= the bit width undefined)."""
import numpy as np
import pytest
from morok_mlir import Tensor, dtypes

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

# ---------------------------------------------------------------- shifts by any amount, as numpy
def _shift_data(dt):
  vals = [0, 1, -1, 2, 3, 5, 100, dt.min, dt.max, dt.min + 1, dt.max - 1, 0x55 % (dt.max + 1)]
  return np.array([v for v in vals if dt.min <= v <= dt.max], dt.np)

@pytest.mark.parametrize("dt", dtypes.ints, ids=lambda d: d.name)
def test_shift_every_amount(dt):
  """Amounts 0..2*bits and, for signed types, negative ones (numpy reads them as unsigned: every bit shifts out)."""
  a = _shift_data(dt)
  amounts = list(range(0, 2 * dt.bits + 1)) + ([] if dt.is_unsigned else [-1, -2, -dt.bits, -dt.bits - 1, dt.min])
  A, B = np.repeat(a, len(amounts)), np.tile(np.array(amounts, dt.np), len(a))
  np.testing.assert_array_equal((Tensor(A) << Tensor(B)).numpy(), np.left_shift(A, B))
  np.testing.assert_array_equal((Tensor(A) >> Tensor(B)).numpy(), np.right_shift(A, B))
  for s in (0, 1, dt.bits - 1, dt.bits, dt.bits + 3, 2 * dt.bits) + (() if dt.is_unsigned else (-1, -dt.bits)):  # constant amounts
    np.testing.assert_array_equal((Tensor(a) << s).numpy(), np.left_shift(a, dt.np(s)), err_msg=f"<< {s}")
    np.testing.assert_array_equal((Tensor(a) >> s).numpy(), np.right_shift(a, dt.np(s)), err_msg=f">> {s}")

def test_shift_issue_examples():
  x = Tensor(np.array([1, 5, -7], np.int32))
  assert (x << 40).tolist() == [0, 0, 0] and (x >> 40).tolist() == [0, 0, -1] and (x << -1).tolist() == [0, 0, 0]
  assert (Tensor(np.array([1], np.uint8)) << 9).tolist() == [0] and (2 << Tensor(np.array([31, 32], np.int32))).tolist() == [0, 0]
  # mixed dtypes promote first (int8 << int32 is an int32 shift), as in numpy
  a, b = np.array([1, -3], np.int8), np.array([9, 33], np.int32)
  np.testing.assert_array_equal((Tensor(a) << Tensor(b)).numpy(), a << b)

@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.int32, dtypes.uint16, dtypes.uint64], ids=lambda d: d.name)
def test_shift_every_amount_gpu_lowering(dt):
  """uop-lower-gpu shares uop-lower-cpu's scalar code: the same guards, run here by the CPU emulator of GPU kernels."""
  from morok_mlir.device.gpu_emulator import emulate
  a, amounts = _shift_data(dt), list(range(0, 2 * dt.bits + 1)) + ([] if dt.is_unsigned else [-1, dt.min])
  A, B = np.repeat(a, len(amounts)), np.tile(np.array(amounts, dt.np), len(a))
  A, B = np.append(A, A[:1]), np.append(B, np.array([dt.bits], dt.np))   # odd length: scalar code (x86's vector shifts give 0)
  shl, shr = emulate([(Tensor(A) << Tensor(B)).uop, (Tensor(A) >> Tensor(B)).uop])
  np.testing.assert_array_equal(shl, np.left_shift(A, B))
  np.testing.assert_array_equal(shr, np.right_shift(A, B))

# ---- comparisons with an int scalar the dtype cannot hold: exact (numpy 2), not after wrapping (int8 256 -> 0)
CMPS = {"lt": lambda x, y: x < y, "gt": lambda x, y: x > y, "le": lambda x, y: x <= y, "ge": lambda x, y: x >= y,
        "eq": lambda x, y: x == y, "ne": lambda x, y: x != y}

@pytest.mark.parametrize("dt", ["int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64"])
def test_compare_with_out_of_range_int(dt):
  info = np.iinfo(dt)
  a = np.array([info.min, 0, 1, info.max], dt)
  t = Tensor(a)
  for v in (int(info.min) - 1, int(info.max) + 1, -2**63, 2**64 - 1, 300, -300, np.int64(-1000)):
    for name, f in CMPS.items():
      try: ref = f(a, v)
      except OverflowError: continue
      np.testing.assert_array_equal(f(t, v).numpy(), ref, err_msg=f"{dt} {name} {v!r}")
      if type(v) is int: np.testing.assert_array_equal(f(v, t).numpy(), f(v, a), err_msg=f"{v!r} {name} {dt}")

@pytest.mark.parametrize("shape", [(256, 512), (300, 77), (64, 1000), (3, 100000), (1000, 17), (2, 33, 40)])
def test_column_sums_as_contractions(shape):
  """Sums over a leading axis (bias gradients) run as a contraction with a ones vector once they are big enough: the
  values, of a plain load and of a fused elementwise source, match numpy's (float64 reference)."""
  r = np.random.default_rng(len(shape) + shape[0])
  a, b = r.standard_normal(shape, dtype=np.float32), r.standard_normal(shape[1:], dtype=np.float32)
  A, B = Tensor(a), Tensor(b)
  np.testing.assert_allclose(A.sum(0).numpy(), a.astype(np.float64).sum(0), rtol=1e-4, atol=1e-3)
  np.testing.assert_allclose(((A > 0).where(A * B, 0)).sum(0).numpy(), np.where(a > 0, a * b, 0).astype(np.float64).sum(0), rtol=1e-4, atol=1e-3)

@pytest.mark.parametrize("op", ["max", "min"])
@pytest.mark.parametrize("shape", [(256, 512), (300, 77), (3, 100000), (2, 33, 40)])
def test_column_max_min_as_contractions(op, shape):
  """max/min over a leading axis run as a contraction of the rows with max/min in place of the FMA: values, NaN (which
  propagates, as numpy's), infinities and an all-infinite column match numpy."""
  r = np.random.default_rng(shape[0])
  a = r.standard_normal(shape, dtype=np.float32)
  flat = a.reshape(a.shape[0], -1)
  flat[1, 3], flat[0, 5], flat[:, 7] = np.nan, np.inf, -np.inf
  flat[:, 9] = np.inf
  got, want = getattr(Tensor(a), op)(0).numpy(), getattr(np, op)(a, 0)
  np.testing.assert_array_equal(got, want)
  np.testing.assert_array_equal(getattr(Tensor(a) * 2 - 1, op)(0).numpy(), getattr(np, op)(a * 2 - 1, 0))
