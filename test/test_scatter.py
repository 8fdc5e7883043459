"""scatter / scatter_reduce against a reference that walks the indices in row-major order (PyTorch's CPU order)."""
import sys
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck
from morok_mlir import Tensor
from morok_mlir.realize import GlobalCounters

FOLD = {"store": lambda a, b: b, "sum": np.add, "add": np.add, "prod": np.multiply, "multiply": np.multiply, "mean": np.add,
        "amax": lambda a, b: np.fmax(a, b) if np.isnan(b) or np.isnan(a) else max(a, b), "amin": lambda a, b: min(a, b)}

def ref(x, dim, idx, src, reduce="store", include_self=True):
  """float64 (or the int/bool dtype itself) reference; an index outside the axis is skipped."""
  out, n = x.copy(), np.zeros(x.shape, np.int64) + include_self
  src = np.broadcast_to(src, idx.shape) if np.ndim(src) == 0 else src
  if not include_self:
    for p in np.ndindex(idx.shape):
      q = p[:dim] + (idx[p],) + p[dim + 1:]
      if 0 <= idx[p] < x.shape[dim]: out[q] = {"sum": 0, "mean": 0, "prod": 1, "amax": -np.inf, "amin": np.inf}[reduce] if x.dtype.kind == "f" else \
        {"sum": 0, "mean": 0, "prod": 1, "amax": np.iinfo(x.dtype).min, "amin": np.iinfo(x.dtype).max}[reduce]
  for p in np.ndindex(idx.shape):
    if not 0 <= idx[p] < x.shape[dim]: continue
    q = p[:dim] + (idx[p],) + p[dim + 1:]
    out[q] = FOLD[reduce](out[q], src[p]); n[q] += 1
  if reduce == "mean":
    hit = n > 0
    out[hit] = out[hit] / n[hit] if x.dtype.kind == "f" else out[hit] // n[hit]
  return out

def rnd(*s, dt=np.float32, seed=0):
  r = np.random.default_rng(seed)
  return r.standard_normal(s).astype(dt) if np.dtype(dt).kind == "f" else r.integers(-20, 20, s).astype(dt)
def ids(*s, hi, seed=1, lo=0): return np.random.default_rng(seed).integers(lo, hi, s).astype(np.int32)

@pytest.mark.parametrize("dim", [0, 1, -1])
@pytest.mark.parametrize("reduce", [None, "add", "multiply"])
@pytest.mark.parametrize("dt", [np.float32, np.int32])
def test_scatter(dim, reduce, dt):
  x, src = rnd(5, 6, dt=dt), rnd(4, 7, dt=dt, seed=2)
  i = ids(4, 5, hi=x.shape[dim], seed=3)   # duplicates along every axis; src larger than the index: its leading block is used
  got = Tensor(x).scatter(dim, Tensor(i), Tensor(src), reduce=reduce).numpy()
  want = ref(x, dim % 2, i, src[:4, :5], {None: "store", "add": "add", "multiply": "multiply"}[reduce])
  np.testing.assert_allclose(got, want, rtol=1e-6) if dt == np.float32 else np.testing.assert_array_equal(got, want)

@pytest.mark.parametrize("reduce", ["sum", "prod", "mean", "amax", "amin"])
@pytest.mark.parametrize("include_self", [True, False])
@pytest.mark.parametrize("dt", [np.float32, np.int32])
def test_scatter_reduce(reduce, include_self, dt):
  x, src, i = rnd(6, 4, dt=dt), rnd(9, 4, dt=dt, seed=4), ids(9, 4, hi=6, seed=5)
  i[0, 0] = i[1, 0] = i[2, 0] = 2   # a three-way duplicate; row 5 of column 3 is probably never hit
  got = Tensor(x).scatter_reduce(0, Tensor(i), Tensor(src), reduce, include_self=include_self).numpy()
  want = ref(x.astype(np.float64) if dt == np.float32 else x, 0, i, src, reduce, include_self)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6) if dt == np.float32 else np.testing.assert_array_equal(got, want)

def test_last_store_wins_and_out_of_range_writes_nothing():
  x = np.zeros(5, np.float32)
  i = np.array([1, 3, 1, -1, 5, 99, 3], np.int32)
  v = np.arange(1, 8, dtype=np.float32)
  np.testing.assert_array_equal(Tensor(x).scatter(0, Tensor(i), Tensor(v)).numpy(), [0, 3, 0, 7, 0])
  np.testing.assert_array_equal(Tensor(x).scatter(0, Tensor(i), Tensor(v), reduce="add").numpy(), [0, 4, 0, 9, 0])

def test_scalar_src_bool_and_int64_index():
  b = np.zeros((3, 4), bool)
  i = np.array([[0, 2, 1, 2]], np.int64)
  got = Tensor(b).scatter(0, Tensor(i), True).numpy()
  np.testing.assert_array_equal(got, ref(b, 0, i, True))
  np.testing.assert_array_equal(Tensor(b).scatter_reduce(0, Tensor(i), Tensor(np.ones((1, 4), bool)), "sum").numpy(), got)
  np.testing.assert_allclose(Tensor(rnd(3, 4)).scatter(1, Tensor(i), 2.5).numpy(), ref(rnd(3, 4), 1, i, np.float32(2.5)))

def test_non_contiguous_inputs():
  x, src, i = rnd(4, 6), rnd(6, 4, seed=1), ids(3, 6, hi=4, seed=2)
  got = Tensor(np.ascontiguousarray(x.T)).T.scatter(0, Tensor(i[::-1].copy()).flip(0), Tensor(src).T, reduce="add").numpy()
  np.testing.assert_allclose(got, ref(x, 0, i, src.T[:3], "add"), rtol=1e-6)

def test_kernels_and_chains():
  x, i, v = rnd(64, 32), ids(100, 32, hi=64), rnd(100, 32, seed=7)
  GlobalCounters.reset()
  got = Tensor(x).scatter(0, Tensor(i), Tensor(v), reduce="add").numpy()
  assert GlobalCounters.kernel_count == 2   # the target into the output, then the updates in place: no copy after
  np.testing.assert_allclose(got, ref(x, 0, i, v, "add"), rtol=1e-5, atol=1e-6)
  # a scatter read by later ops, and a scatter of a scatter
  t = Tensor(x).scatter(0, Tensor(i), Tensor(v))
  u = (t * 2).scatter(1, Tensor(ids(64, 8, hi=32, seed=8)), 1.0, reduce="add")
  r1 = ref(x, 0, i, v)
  np.testing.assert_allclose((t.sum(0) + 1).numpy(), r1.sum(0) + 1, rtol=1e-5)
  np.testing.assert_allclose(u.numpy(), ref(r1 * 2, 1, ids(64, 8, hi=32, seed=8), np.float32(1), "add"), rtol=1e-6)

def test_scatter_add_of_many_rows_is_linear():
  """An embedding gradient's shape: 30522 rows, 2048 tokens of 64 features; no O(rows x tokens) work."""
  i = ids(2048, hi=30522)
  g = rnd(2048, 64)
  got = Tensor.zeros(30522, 64).scatter_reduce(0, Tensor(np.repeat(i[:, None], 64, 1)), Tensor(g), "sum").numpy()
  want = np.zeros((30522, 64), np.float32); np.add.at(want, i, g)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

def test_empty_and_errors():
  x = Tensor(rnd(3, 4))
  np.testing.assert_array_equal(x.scatter(0, Tensor(np.zeros((0, 4), np.int32)), 1.0).numpy(), x.numpy())
  line = sys._getframe().f_lineno + 1
  with pytest.raises(TypeError, match=rf"test_scatter.py:{line}:\d+: scatter needs an integer index"): x.scatter(0, x, x)
  with pytest.raises(ValueError, match="rank"): x.scatter(0, Tensor(np.zeros(2, np.int32)), 1.0)
  with pytest.raises(ValueError, match="larger than"): x.scatter(0, Tensor(np.zeros((2, 5), np.int32)), 1.0)
  with pytest.raises(ValueError, match="at least index"): x.scatter(0, Tensor(np.zeros((2, 4), np.int32)), Tensor(rnd(1, 4)))
  with pytest.raises(ValueError, match="reduce"): x.scatter(0, Tensor(np.zeros((2, 4), np.int32)), 1.0, reduce="max")
  with pytest.raises(ValueError, match="reduce"): x.scatter_reduce(0, Tensor(np.zeros((2, 4), np.int32)), x, "median")
  with pytest.raises(IndexError): x.scatter(2, Tensor(np.zeros((2, 2), np.int32)), 1.0)
  with pytest.raises(TypeError, match="tensor or a number"): x.scatter(0, Tensor(np.zeros((2, 4), np.int32)), "a")

@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_scatters(data):
  nd = data.draw(st.integers(1, 3))
  shape = tuple(data.draw(st.lists(st.integers(1, 4), min_size=nd, max_size=nd)))
  dim = data.draw(st.integers(-nd, nd - 1))
  ishape = tuple(data.draw(st.integers(0 if d == dim % nd else 1, 5 if d == dim % nd else s)) for d, s in enumerate(shape))
  reduce = data.draw(st.sampled_from(["sum", "prod", "mean", "amax", "amin"]))
  include_self = data.draw(st.booleans())
  seed = data.draw(st.integers(0, 1000))
  x, src = rnd(*shape, seed=seed), rnd(*ishape, seed=seed + 1)
  i = ids(*ishape, lo=-1, hi=shape[dim] + 1, seed=seed + 2)
  got = Tensor(x).scatter_reduce(dim, Tensor(i), Tensor(src), reduce, include_self=include_self).numpy()
  np.testing.assert_allclose(got, ref(x.astype(np.float64), dim % nd, i, src, reduce, include_self), rtol=1e-5, atol=1e-6)
