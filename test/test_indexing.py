"""Indexing with tensors, lists and arrays (through gather), bool masks, one_hot and masked_fill, against numpy."""
import sys
import numpy as np, pytest
from morok_mlir import Tensor, dtypes

A = np.arange(2 * 3 * 4 * 5).reshape(2, 3, 4, 5).astype(np.float32)
CASES = [([1, 0, 1],), (slice(None), [2, 0, -1]), (0, slice(None), np.array([[3, 1], [0, -1]])), (Ellipsis, [4, 0]),
         (None, [1, 0]), (1, [2, 2, 0]), (slice(None), slice(1, None), [0, 3]), (1, slice(None), [3, 0], 2),
         (slice(None, None, -1), Ellipsis, np.array([[0], [4]])), (np.array(1),), (slice(None), [],)]

@pytest.mark.parametrize("ix", CASES, ids=[str(i)[:40] for i in CASES])
@pytest.mark.parametrize("dt", [np.float32, np.int32])
def test_array_index_matches_numpy(ix, dt):
  a = A.astype(dt)
  got = Tensor(a)[tuple(Tensor(i) if isinstance(i, np.ndarray) and i.ndim else i for i in ix)].numpy()
  want = a[tuple(i.tolist() if isinstance(i, np.ndarray) and i.ndim == 0 else i for i in ix)]
  assert got.shape == want.shape and (got == want).all()

def test_transposed_source_and_tensor_index():
  a = np.arange(12, dtype=np.int32).reshape(3, 4)
  np.testing.assert_array_equal(Tensor(a).T[Tensor(np.array([3, 0, 3]))].numpy(), a.T[[3, 0, 3]])

def test_out_of_range_array_index_gives_zero():
  np.testing.assert_array_equal(Tensor(np.arange(1.0, 5.0))[[0, 9, -9, 3]].numpy(), [1.0, 0.0, 0.0, 4.0])

def test_bool_mask_index_and_masked_select():
  a = np.arange(-6, 6, dtype=np.float32).reshape(3, 4)
  np.testing.assert_array_equal(Tensor(a)[Tensor(a > 1)].numpy(), a[a > 1])
  np.testing.assert_array_equal(Tensor(a).masked_select(Tensor(np.array([True, False, False, True]))).numpy(), a[:, [True, False, False, True]].T.reshape(-1)[[0, 3, 1, 4, 2, 5]])
  assert Tensor(a)[Tensor(a > 100)].shape == (0,)

def test_one_hot_and_masked_fill():
  idx = np.array([[0, 3], [2, 5]])
  oh = Tensor(idx).one_hot(4).numpy()
  assert oh.dtype == np.int32 and oh.shape == (2, 2, 4) and (oh == (idx[..., None] == np.arange(4))).all()   # 5: an all-zero row
  assert Tensor(np.array([1, 0, 2])).one_hot().shape == (3, 3)
  a = np.arange(6, dtype=np.float32).reshape(2, 3)
  np.testing.assert_array_equal(Tensor(a).masked_fill(Tensor(np.array([True, False, True])), -1.5).numpy(), np.where([True, False, True], -1.5, a))

def test_errors_name_the_line():
  t = Tensor(np.zeros((3, 4), np.float32))
  line = sys._getframe().f_lineno + 1
  with pytest.raises(IndexError, match=rf"test_indexing.py:{line}:\d+: shape mismatch"): t[[0, 1], [1, 2, 3]]
  with pytest.raises(IndexError, match="integer or bool"): t[Tensor(np.array([0.5]))]
  with pytest.raises(TypeError, match="one_hot needs integer"): t.one_hot(3)
  with pytest.raises(TypeError, match="bool mask"): t.masked_fill(t, 1.0)
