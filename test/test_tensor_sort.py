"""Cumulative ops (cumsum, cumprod, cummax, logcumsumexp) and ordering ops (sort, argsort, topk) differential against
numpy: dtypes, ties (stable indices), NaN, -0.0, empty and length-1 axes, non-power-of-two lengths, negative dims,
descending, non-contiguous inputs, and the block structure that keeps a long cumsum small."""
import numpy as np
import pytest
from morok_mlir import Tensor, dtypes
from morok_mlir.core.uop import UOp
from morok_mlir.realize import GlobalCounters

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
F32, I32 = dtypes.float32, dtypes.int32

def data(shape, dt, lo=-4, hi=4, seed=0):
  r = np.random.default_rng(seed)
  if dt.is_bool: return r.random(shape) < 0.5
  if dt.is_float: return r.uniform(lo, hi, shape).astype(dt.np)
  return r.integers(lo, hi, shape, dtype=dt.np, endpoint=True)

def close(out, ref, rtol=2e-6, atol=0.0):
  assert out.shape == ref.shape and out.dtype == ref.dtype, (out.shape, out.dtype, ref.shape, ref.dtype)
  if ref.dtype.kind == "f": np.testing.assert_allclose(out, ref, rtol=rtol, atol=atol, equal_nan=True)
  else: np.testing.assert_array_equal(out, ref)

def both(a: Tensor, b: Tensor):
  Tensor.realize(a, b)   # one schedule: values and indices come from the same network
  return a.numpy(), b.numpy()

# ---------------------------------------------------------------- cumulative ops
ACC = {dtypes.float32: np.float32, dtypes.int32: np.int64, dtypes.int8: np.int64, dtypes.bool: np.int64}   # numpy's and PyTorch's

@pytest.mark.parametrize("dt", [F32, I32, dtypes.int8, dtypes.bool], ids=lambda d: d.name)
@pytest.mark.parametrize("shape,axis", [((3, 5), 1), ((3, 5), -2), ((4, 0), 1)])
def test_cumsum(dt, shape, axis):
  x = data(shape, dt)
  close(Tensor(x).cumsum(axis).numpy(), np.cumsum(x, axis, dtype=ACC[dt]), rtol=1e-5, atol=1e-5)

@pytest.mark.parametrize("dt", [F32, I32], ids=lambda d: d.name)
def test_cumprod_zeros_and_negatives(dt):
  x = data((3, 9), dt, -2, 2)
  x[1, 4] = 0
  close(Tensor(x).cumprod(1).numpy(), np.cumprod(x, 1), rtol=1e-5)
  close(Tensor(x).cumprod(-2).numpy(), np.cumprod(x, 0), rtol=1e-5)

@pytest.mark.parametrize("dt", [F32, I32, dtypes.int8, dtypes.bool], ids=lambda d: d.name)
def test_cummax(dt):
  x = data((3, 11), dt, -3, 3)   # small range: many ties
  v, i = both(*Tensor(x).cummax(1))
  close(v, np.maximum.accumulate(x, 1))
  ref_i = np.array([[max(j for j in range(c + 1) if x[r, j] == v[r, c]) for c in range(11)] for r in range(3)])  # latest index, as PyTorch
  np.testing.assert_array_equal(i, ref_i)

def test_cummax_nan_propagates_with_its_latest_index():
  x = np.array([1, 3, np.nan, 5, np.nan, 2], np.float32)
  v, i = both(*Tensor(x).cummax(0))
  close(v, np.maximum.accumulate(x))
  np.testing.assert_array_equal(i, [0, 1, 2, 2, 4, 4])

def test_logcumsumexp():
  x = data((2, 13), F32, -30, 30)
  close(Tensor(x).logcumsumexp(1).numpy(), np.logaddexp.accumulate(x, 1), rtol=1e-5)
  x = np.array([-np.inf, -np.inf, 0, np.inf, 1, np.nan, 2], np.float32)
  close(Tensor(x).logcumsumexp().numpy(), np.logaddexp.accumulate(x), rtol=1e-5)
  close(Tensor(np.arange(5, dtype=np.int32)).logcumsumexp().numpy(), np.logaddexp.accumulate(np.arange(5, dtype=np.float32)), rtol=1e-5)

def test_cumulative_of_a_noncontiguous_input():
  x = data((6, 5), F32)
  close(Tensor(x)[::-2, 1:].T.cumsum(1).numpy(), np.cumsum(x[::-2, 1:].T, 1), rtol=1e-5, atol=1e-5)

def test_blocked_scans_match_numpy():
  """1000 elements: four blocks of 256 and a scan of their totals."""
  n = 1000
  x = data((n,), F32, -1, 1)
  close(Tensor(x).cumsum().numpy(), np.cumsum(x.astype(np.float64)).astype(np.float32), rtol=1e-4, atol=1e-4)
  xi = data((2, n), I32, -2, 2)
  close(Tensor(xi).cumsum(1).numpy(), np.cumsum(xi, 1))
  v, i = both(*Tensor(xi).cummax(1))
  close(v, np.maximum.accumulate(xi, 1))
  close(Tensor(x).logcumsumexp().numpy(), np.logaddexp.accumulate(x.astype(np.float64)).astype(np.float32), rtol=1e-4)
  p = np.where(np.arange(n) % 97 == 0, -1, 1).astype(np.int32)
  close(Tensor(p).cumprod(0).numpy(), np.cumprod(p))

@pytest.mark.parametrize("op,ref", [("ADD", np.add), ("MUL", np.multiply), ("MAX", np.maximum), ("lse", np.logaddexp)])
def test_scan_recursion_with_small_blocks(op, ref):
  """Blocks of 3 over 50 elements: three levels of block totals, each level's exclusive scan combined in."""
  from morok_mlir.dialects.ops import Ops
  x = data((2, 50), F32, -1.2, 1.2, seed=3)
  close(Tensor(x)._scan(getattr(Ops, op, op), block=3).numpy(), ref.accumulate(x.astype(np.float64), 1).astype(np.float32), rtol=1e-4, atol=1e-5)

def test_cumsum_of_100000_is_small():
  """Blocks of 256 (window sums) and a scan of the block totals: a few kernels and a small graph, not an n*n window."""
  x = np.ones(100000, np.float32)
  t = Tensor(x).cumsum()
  assert len(t.uop.toposort) < 400
  GlobalCounters.reset()
  out = t.numpy()
  assert GlobalCounters.kernel_count <= 4
  np.testing.assert_array_equal(out, np.arange(1, 100001, dtype=np.float32))

def test_cumulative_0d_and_bad_dims():
  close(Tensor(np.float32(2.5)).cumsum().numpy(), np.array(2.5, np.float32))
  with pytest.raises(IndexError): Tensor(np.ones(3, np.float32)).cumsum(1)

# ---------------------------------------------------------------- sort, argsort, topk
@pytest.mark.parametrize("dt", [F32, I32, dtypes.int8, dtypes.bool], ids=lambda d: d.name)
@pytest.mark.parametrize("descending", [False, True])
def test_sort_stable(dt, descending, n=13):
  x = data((3, n), dt, -3, 3, seed=n)   # small range: ties everywhere
  v, i = both(*Tensor(x).sort(-1, descending))
  ref_i = np.argsort(-x.astype(np.float64) if descending else x, -1, kind="stable")
  np.testing.assert_array_equal(i, ref_i)
  close(v, np.take_along_axis(x, ref_i, -1))
  assert i.dtype == np.int32

def test_sort_is_one_kernel_per_network_step():
  """13 elements pad to 16: 4 stages of 1..4 compare-exchange steps, each one kernel on the (key, index) pairs."""
  x = data((3, 13), F32)
  v, i = Tensor(x).sort()
  GlobalCounters.reset()
  Tensor.realize(v, i)
  assert GlobalCounters.kernel_count <= 10 + 2   # the steps, the index arange, the final split into values and indices
  np.testing.assert_array_equal(i.numpy(), np.argsort(x, -1, kind="stable"))

@pytest.mark.parametrize("n", [1, 2, 8])
def test_sort_lengths(n):
  x = data((2, n), F32, seed=n)
  v, i = both(*Tensor(x).sort())
  close(v, np.sort(x, -1))
  np.testing.assert_array_equal(i, np.argsort(x, -1, kind="stable"))

def test_sort_nan_inf_and_signed_zero():
  x = np.array([np.nan, 1, -0.0, np.inf, 0.0, -np.inf, np.nan, -0.0, 2, np.inf], np.float32)
  v, i = both(*Tensor(x).sort())
  ref = np.argsort(x, kind="stable")
  np.testing.assert_array_equal(i, ref)
  np.testing.assert_array_equal(np.signbit(v), np.signbit(x[ref]))   # -0.0 and 0.0 tie: kept in order, signs preserved
  close(v, x[ref])
  v, i = both(*Tensor(x).sort(descending=True))   # NaN is largest: first, as PyTorch
  np.testing.assert_array_equal(i, [0, 6, 3, 9, 8, 1, 2, 4, 7, 5])

@pytest.mark.parametrize("dim", [1, -3])
def test_sort_dims_and_noncontiguous(dim):
  x = data((5, 6, 3), F32, seed=1)
  t = Tensor(x)[:, ::-1].permute(0, 1, 2)
  xs = x[:, ::-1]
  v, i = both(*t.sort(dim))
  close(v, np.sort(xs, dim))
  np.testing.assert_array_equal(i, np.argsort(xs, dim, kind="stable"))
  np.testing.assert_array_equal(Tensor(x).T.argsort(dim).numpy(), np.argsort(x.T, dim, kind="stable"))

def test_sort_empty_and_0d():
  v, i = both(*Tensor(np.zeros((2, 0), np.float32)).sort())
  assert v.shape == i.shape == (2, 0)
  v, i = both(*Tensor(np.float32(3)).sort())
  assert v == 3 and i == 0

@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dt", [F32, I32], ids=lambda d: d.name)
def test_topk(largest, dt):
  x = data((4, 7), dt, -3, 3)
  v, i = both(*Tensor(x).topk(3, largest=largest))
  ref_i = np.argsort(-x.astype(np.float64) if largest else x, -1, kind="stable")[:, :3]
  np.testing.assert_array_equal(i, ref_i)
  close(v, np.take_along_axis(x, ref_i, -1))
  v, i = both(*Tensor(x).topk(2, dim=0))
  np.testing.assert_array_equal(i, np.argsort(-x.astype(np.float64), 0, kind="stable")[:2])
  with pytest.raises(IndexError): Tensor(x).topk(8)

def test_ordering_ops_on_uops():
  x = Tensor(np.array([2, 0, 1], np.float32))
  assert isinstance(x.uop.sort()[1], UOp) and isinstance(x.uop.cumsum(), UOp) and isinstance(x.uop.cummax()[1], UOp)
  # a Tensor's arange is data, a UOp's is built from movement ops: equal values, not the identical graph
  for f in (lambda t: t.cumsum(), lambda t: t.argsort(), lambda t: t.sort()[0]):
    np.testing.assert_array_equal(Tensor(f(x.uop)).numpy(), f(x).numpy())
