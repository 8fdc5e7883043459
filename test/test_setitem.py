"""numpy's indexing, read (__getitem__) and written (__setitem__: movement and a mask, or scatter), differential against
numpy: random index tuples of ints, slices, None, ..., integer arrays and bool masks over a few shapes (kernels compile
once per graph: shapes are reused), views writing their bases, kernel counts and the errors."""
import sys
import numpy as np, pytest
from hypothesis import given, settings, strategies as st, HealthCheck
from morok_mlir import Tensor
import morok_mlir.passes  # noqa: F401  (raises the recursion limit at import, not inside a hypothesis test)
from morok_mlir.realize import GlobalCounters

SHAPES = [(5,), (3, 4), (2, 3, 4), (4, 1, 3)]
DTYPES = [np.float32, np.int32, np.bool_]
SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

def source(shape, dt, layout, seed=0):
  """(numpy array, Tensor) of the same values; layout 'T' and 'flip' give a non-contiguous Tensor (a permute, a flip)."""
  a = (np.random.default_rng(seed).standard_normal(shape[::-1] if layout == "T" else shape) * 10).astype(dt)
  t = Tensor(a)
  if layout == "T": a, t = a.T, t.T
  if layout == "flip": a, t = a[::-1], t.flip(0)
  return np.ascontiguousarray(a), t

@st.composite
def index_tuples(draw, shape, arrays=True):
  """A numpy-valid index of `shape`: ints, slices (any step), None, at most one ..., and (with arrays) integer arrays
  of shapes that broadcast to one drawn shape and bool masks; arrays are numpy arrays, lists or Tensors."""
  bshape = draw(st.sampled_from([(2,), (3,), (2, 1), (1, 3), ()]))
  ents, d, ell = [], 0, False
  while d < len(shape) and draw(st.integers(0, 4)):
    s = shape[d]
    kind = draw(st.sampled_from(["int", "slice", "slice", "none", "ellipsis"] + ["array", "array", "mask", "bool"] * arrays))
    if kind == "int": ents.append(draw(st.integers(-s, s - 1))); d += 1
    elif kind == "slice":
      bnd = st.none() | st.integers(-s - 2, s + 2)
      ents.append(slice(draw(bnd), draw(bnd), draw(st.none() | st.sampled_from([1, 2, 3, -1, -2])))); d += 1
    elif kind == "none": ents.append(None)
    elif kind == "ellipsis" and not ell: ents.append(Ellipsis); ell, d = True, len(shape)   # the rest of the dims
    elif kind == "array":
      sh = tuple(draw(st.sampled_from([n, 1])) for n in bshape[draw(st.integers(0, len(bshape))):])
      a = np.asarray(draw(st.lists(st.integers(-s, s - 1), min_size=int(np.prod(sh)), max_size=int(np.prod(sh))))).reshape(sh)
      ents.append(draw(st.sampled_from([lambda: a, lambda: a.tolist(), lambda: Tensor(a.astype(np.int32))]))()); d += 1
    elif kind == "mask":
      k = draw(st.integers(1, len(shape) - d))
      n = int(np.prod(shape[d:d + k]))
      ents.append(np.asarray(draw(st.lists(st.booleans(), min_size=n, max_size=n))).reshape(shape[d:d + k])); d += k
    elif kind == "bool": ents.append(draw(st.booleans()))
  return tuple(ents)

def np_index(ix):
  return tuple(i.numpy() if isinstance(i, Tensor) else i for i in ix)

def same(got, want):
  assert got.shape == want.shape and got.dtype == want.dtype, (got.shape, want.shape, got.dtype, want.dtype)
  np.testing.assert_array_equal(got, want)

@st.composite
def cases(draw, arrays=True):
  shape = draw(st.sampled_from(SHAPES))
  return shape, draw(st.sampled_from(DTYPES)), draw(st.sampled_from(["plain", "T", "flip"])), draw(index_tuples(shape, arrays))

@settings(max_examples=50, **SETTINGS)
@given(cases())
def test_getitem_matches_numpy(case):
  shape, dt, layout, ix = case
  a, t = source(shape, dt, layout)
  try: want = a[np_index(ix)]
  except IndexError:   # arrays that do not broadcast (a mask's count against another array): ours raises the same
    with pytest.raises(IndexError): t[ix]
    return
  same(t[ix].numpy(), want)

@settings(max_examples=40, **SETTINGS)
@given(cases(arrays=False), st.booleans())
def test_basic_setitem_matches_numpy(case, scalar):
  shape, dt, layout, ix = case
  a, t = source(shape, dt, layout)
  n = a[ix].shape
  v = np.asarray(7.5).astype(dt) if scalar else (np.arange(int(np.prod(n))).reshape(n) * 3 - 5).astype(dt)
  a[ix] = v
  t[ix] = v if scalar else Tensor(v)
  same(t.numpy(), a)

@settings(max_examples=50, **SETTINGS)
@given(cases(), st.booleans())
def test_setitem_matches_numpy(case, scalar):
  """Index arrays write through one scatter; repeated positions: the last in index order wins, as numpy does."""
  shape, dt, layout, ix = case
  a, t = source(shape, dt, layout)
  try: n = a[np_index(ix)].shape
  except IndexError:
    with pytest.raises(IndexError): t[ix] = 1
    return
  v = np.asarray(7.5).astype(dt) if scalar else (np.arange(int(np.prod(n))).reshape(n) * 3 - 5).astype(dt)
  a[np_index(ix)] = v
  t[ix] = v if scalar else Tensor(v)
  same(t.numpy(), a)

# numpy's placement of the indexed dims: in place when the advanced indices (ints too) are adjacent, else first
I2 = np.array([[0, 1], [1, 0]])
PLACEMENT = [([0, 1], slice(None), [1, 2]), (slice(None), [0, 1], [1, 2]), (0, slice(None), [1, 2]), (I2, None, slice(1, 3), I2),
             (slice(None), [0, 1], Ellipsis, [1, 2]), (slice(None), 1, [0, 2]), (Ellipsis, [0, -1], 0), (0, Ellipsis, [1, 2]),
             (True,), (slice(None), True, [0, 1]), (False, [0]), (slice(None), np.array(1), slice(None), [1]),
             (slice(None, None, -1), [[-1], [0]], slice(None), [1, 2, 3]), (np.arange(24).reshape(2, 3, 4) % 2 == 0,),
             (slice(None), np.array([[True, False, True, True]] * 3), [0, 1, 3, 4, 0, 2, 0, 1, 4])]

@pytest.mark.parametrize("ix", PLACEMENT, ids=[str(i)[:40] for i in PLACEMENT])
def test_getitem_placement_and_one_kernel(ix):
  a = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
  got = Tensor(a)[tuple(Tensor(i) if isinstance(i, np.ndarray) and i.ndim else i for i in ix)]
  GlobalCounters.reset()
  same(got.numpy(), a[ix])
  assert GlobalCounters.kernel_count == (a[ix].size > 0)   # one gather over the linear index, whatever the number of arrays

def test_array_entries_outside_give_zero_and_negative_count_from_the_end():
  a = np.arange(12, dtype=np.float32).reshape(3, 4)
  same(Tensor(a)[[0, -1, 5], [1, -4, 0]].numpy(), np.array([1, 8, 0], np.float32))   # (5, 0) is outside: 0
  same(Tensor(a)[Tensor(np.array([-3, 3, 2])), 1:].numpy(), np.array([a[0, 1:], [0, 0, 0], a[2, 1:]], np.float32))
  i = Tensor(np.array([[0, 4], [-1, 1]], np.int64))
  same(Tensor(a)[i, Tensor(np.array([3, -5], np.int8))].numpy(), np.array([[3, 0], [11, 0]], np.float32))

def test_empty_results():
  a = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
  for ix in [([],), (slice(None), [], 0), (a[..., 0] > 100,), (slice(2, 2), [0, 1]), (slice(None), np.zeros((0, 2), np.int64))]:
    same(Tensor(a)[ix].numpy(), a[ix])
  same(Tensor(np.zeros((0, 3), np.float32))[:, [0, 2]].numpy(), np.zeros((0, 2), np.float32))
  same(Tensor(np.zeros((2, 0), np.float32))[:, [1]].numpy(), np.zeros((2, 1), np.float32))   # an empty dim: every entry outside

def test_basic_setitem_is_one_kernel_and_keeps_the_object():
  a = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
  t = Tensor(a)
  before = t
  t[1:, ::-2, None, 3] = Tensor(np.array([[10.0], [20.0]], np.float32))
  t[..., 0] = 2.5
  a[1:, ::-2, None, 3], a[..., 0] = np.array([[10.0], [20.0]], np.float32), 2.5
  GlobalCounters.reset()
  same(t.numpy(), a)
  assert t is before and GlobalCounters.kernel_count == 1

def test_setitem_casts_and_broadcasts_values():
  t = Tensor(np.zeros((2, 3), np.int32))
  t[0] = 2.9                                  # cast to the tensor's dtype, as PyTorch does
  t[1] = np.array([[1.5, -2.5, 3.0]])         # a leading 1-dim beyond the index is dropped
  t[:, 2] = Tensor([True, False])
  same(t.numpy(), np.array([[2, 2, 1], [1, -2, 0]], np.int32))
  b = Tensor(np.zeros(4, np.bool_))
  b[1::2] = 1
  same(b.numpy(), np.array([False, True, False, True]))

def test_writes_through_views_reach_the_base():
  a = np.arange(24, dtype=np.float32).reshape(4, 6)
  x, want = Tensor(a), a.copy()
  x[0][1] = 5; want[0][1] = 5                   # PyTorch's x[0][1] = 5
  y = x[1:3]; y[:, ::2] = -1; want[1:3][:, ::2] = -1
  want_y = want[1:3].copy()    # y keeps these: the writes below are through other views (graphs are immutable)
  z = x.T; z[5] = 7; want.T[5] = 7
  w = x.reshape(3, 8)[1]; w += 100; want.reshape(3, 8)[1] += 100     # through a temporary reshape
  same(x.numpy(), want)
  same(y.numpy(), want_y)       # a view is rebound by a write through itself
  same(w.numpy(), want.reshape(3, 8)[1])

def test_array_setitem_repeats_outside_and_views():
  a = np.arange(12, dtype=np.float32).reshape(3, 4)
  t = Tensor(a)
  t[[0, 2, 0], [1, 1, 1]] = Tensor(np.array([10, 20, 30], np.float32))   # (0, 1) twice: the last write wins
  t[Tensor(np.array([5, -1])), 0] = -7                                    # 5 is outside: writes nothing
  want = a.copy(); want[[0, 2, 0], [1, 1, 1]] = [10, 20, 30]; want[-1, 0] = -7
  same(t.numpy(), want)
  x, b = Tensor(a), a.copy()
  m = a[:, 0] > 3
  x[:, 0][m] = 0; b[:, 0][m] = 0                  # PyTorch's x[:, 0][mask] = 0: a write through a view
  x[1][Tensor(np.array([3, 0]))] += 100; b[1][[3, 0]] += 100
  same(x.numpy(), b)
  e = Tensor(np.zeros((2, 0), np.float32))
  e[:, [1]] = 5                                   # an empty dim: every entry is outside
  assert e.numpy().shape == (2, 0)

def test_mask_setitem_of_one_value_is_a_lazy_where():
  a = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
  t, want = Tensor(a), a.copy()
  GlobalCounters.reset()
  t[t % 3 == 0] = -1; want[a % 3 == 0] = -1
  t[Tensor(np.array([[True, False, True], [False, False, True]]))] = Tensor([7]); want[[[True, False, True], [False, False, True]]] = 7
  assert GlobalCounters.kernel_count == 0   # the masks are not realized
  same(t.numpy(), want)
  assert GlobalCounters.kernel_count == 1
  with pytest.raises(IndexError, match="boolean index did not match"): t[Tensor(np.ones(3, np.bool_))] = 1

def test_views_taken_before_a_write_keep_the_old_values():
  x = Tensor(np.zeros((2, 3), np.float32))
  old, y = x[0], x[1]
  x[0] = 1                      # graphs are immutable: `old` was read before
  y[2] = 9                      # writes x[1, 2] only: x[0] keeps its 1
  x[1, 0] = 4
  y[[1, 1]] = 6                 # through scatter: x[1, 1] only, x[1, 0] keeps its 4
  same(x.numpy(), np.array([[1, 1, 1], [4, 6, 9]], np.float32))
  same(old.numpy(), np.zeros(3, np.float32))
  same(y.numpy(), np.array([0, 6, 9], np.float32))   # y was taken before x[1, 0] = 4

def test_writing_an_expanded_view_raises():
  b = Tensor(np.ones(3, np.float32))
  e = b.expand(2, 3)
  line = sys._getframe().f_lineno + 1
  with pytest.raises(RuntimeError, match=rf"test_setitem.py:{line}:\d+: cannot write to a view expanded"): e[0] = 2
  same(b.numpy(), np.ones(3, np.float32))   # nothing was written
  z = Tensor.zeros(2, 3)                   # expanded from a constant nobody holds: writable
  z[1, 1] = 4
  same(z.numpy(), np.array([[0, 0, 0], [0, 4, 0]], np.float32))

def test_index_errors_name_the_line():
  t = Tensor(np.zeros((3, 4), np.float32))
  line = sys._getframe().f_lineno + 1
  with pytest.raises(IndexError, match=rf"test_setitem.py:{line}:\d+: too many indices"): t[0, [1], 2]
  with pytest.raises(IndexError, match="too many indices"): t[0, 1, 2]
  with pytest.raises(IndexError, match="integer or bool"): t[[0.5]]
  with pytest.raises(IndexError, match="integer or bool"): t[Tensor(np.array([0.5]))]
  with pytest.raises(IndexError, match="could not be broadcast"): t[[0, 1], [0, 1, 2]]
  with pytest.raises(IndexError, match="out of bounds"): t[3, [0]]
  with pytest.raises(IndexError, match="out of bounds"): t[-5]
  with pytest.raises(IndexError, match="boolean index did not match"): t[np.ones(4, np.bool_)]
  with pytest.raises(IndexError, match="boolean index did not match"): t[:, Tensor(np.ones(3, np.bool_))]
  with pytest.raises(IndexError, match="single ellipsis"): t[..., [0], ...]
  with pytest.raises(TypeError, match="unsupported index"): t[1.5, [0]]
  with pytest.raises(ValueError, match="cannot assign a value of shape"): t[0] = np.ones(3)
  with pytest.raises(IndexError, match="too many indices"): t[0, 0, 0] = 1

def test_indexing_through_the_gpu_lowering():
  from morok_mlir.device.gpu_emulator import emulate
  a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
  got, = emulate([Tensor(a)[[1, 0], :, Tensor(np.array([3, -1]))].uop])
  same(got, a[[1, 0], :, [3, -1]])
  t, want = Tensor(a), a.copy()
  t[:, 1:, ::2] = 7.0; want[:, 1:, ::2] = 7
  t[0, [2, 0]] = -1.0; want[0, [2, 0]] = -1
  got, = emulate([t.uop])
  same(got, want)
