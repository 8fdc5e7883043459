"""Python's and numpy's protocols on Tensor: numpy reads a Tensor's values (np.asarray, np.array), a numpy function of a
Tensor gives a Tensor (np.exp(t), np.sum(t)), an operator with an ndarray defers to the Tensor (ndarray + t is a Tensor,
as PyTorch's), never an object array of 0-d Tensors; copy.deepcopy gives an independent Tensor."""
import copy, pickle
import numpy as np
import pytest
from morok_mlir import Tensor, dtypes

def raises_here(exc, fn, match=None):
  with pytest.raises(exc, match=match) as e: fn()
  assert f"{__file__}:{fn.__code__.co_firstlineno}:" in str(e.value), str(e.value)

X = np.array([[1.0, -2.0, 3.0], [0.5, 4.0, -1.5]], np.float32)

@pytest.mark.parametrize("read", [np.asarray, np.array, lambda t: np.array(t, copy=True), lambda t: np.asarray(t, dtype=np.float32)])
def test_numpy_reads_the_values(read):
  t = Tensor(X) * 2
  a = read(t)
  assert type(a) is np.ndarray and a.dtype == np.float32 and a.shape == (2, 3)
  np.testing.assert_array_equal(a, X * 2)
  a[0, 0] = 100   # the array is the caller's own
  assert t.numpy()[0, 0] == 2

def test_array_protocol_details():
  np.testing.assert_array_equal(np.asarray(Tensor(X), dtype=np.float64), X.astype(np.float64))
  assert np.asarray(Tensor(2.5)).shape == () and np.asarray(Tensor([1, 2], dtype=dtypes.int16)).dtype == np.int16
  np.testing.assert_array_equal(np.array([Tensor([1.0, 2.0]), Tensor([3.0, 4.0])]), [[1, 2], [3, 4]])
  np.testing.assert_allclose(Tensor(X).exp(), np.exp(X), rtol=1e-6)   # numpy's testing functions take Tensors
  raises_here(ValueError, lambda: np.asarray(Tensor(X), copy=False), "without a copy")

@pytest.mark.parametrize("op", ["+", "-", "*", "/", "<", "==", "@"])
def test_operators_with_an_ndarray_give_tensors(op):
  a, b = np.array([1.5, 2.0, -3.0], np.float32), np.array([0.5, 4.0, 2.0], np.float32)
  f = eval(f"lambda x, y: x {op} y")
  for got in (f(a, Tensor(b)), f(Tensor(a), b)):
    assert isinstance(got, Tensor)
    np.testing.assert_allclose(got.numpy(), f(a, b), rtol=1e-6)
  c = a.copy()
  c += Tensor(b)   # the ndarray defers here too: c is rebound to a Tensor
  assert isinstance(c, Tensor) and c.tolist() == (a + b).tolist()

def test_ndarray_operand_promotes_as_a_tensor():
  got = np.arange(3, dtype=np.float64) + Tensor([1.0, 2.0, 3.0])
  assert got.dtype == dtypes.float64 and got.tolist() == [1.0, 3.0, 5.0]
  assert (Tensor([1, 2]) * np.array([2, 3], np.int8)).dtype == dtypes.int32

@pytest.mark.parametrize("fn", [np.exp, np.sqrt, np.abs, np.negative, lambda x: np.add(x, 1), lambda x: np.maximum(x, 0.5)])
def test_ufuncs_compute_on_the_values_and_give_a_tensor(fn):
  t = Tensor(np.abs(X))
  got = fn(t)
  assert isinstance(got, Tensor) and got.device == t.device
  np.testing.assert_allclose(got.numpy(), fn(np.abs(X)), rtol=1e-6)

@pytest.mark.parametrize("fn,kw", [(np.sum, {}), (np.sum, {"axis": 1}), (np.sum, {"axis": 0, "keepdims": True}), (np.mean, {}),
                                   (np.max, {"axis": 1}), (np.min, {}), (np.prod, {"axis": 0}), (np.std, {}), (np.var, {"axis": 1}),
                                   (np.std, {"ddof": 1}), (np.any, {}), (np.all, {"axis": 0})])
def test_numpy_reductions(fn, kw):
  got = fn(Tensor(X), **kw)
  assert isinstance(got, Tensor)
  np.testing.assert_allclose(got.numpy(), fn(X, **kw), rtol=1e-5, atol=1e-6)

def test_numpy_reduction_into_out_raises_here():
  raises_here(TypeError, lambda: np.sum(Tensor(X), out=np.zeros(3, np.float32)), "out=")

@pytest.mark.parametrize("make", [lambda: Tensor.ones((3, 3, 3)), lambda: Tensor.ones((3, 3, 3)).realize(), lambda: Tensor(X) * 2,
                                  lambda: Tensor([1, 2, 3], dtype=dtypes.int8), lambda: Tensor(2.5, dtype=dtypes.bfloat16)])
def test_deepcopy_is_independent(make):
  t = make()
  c = copy.deepcopy(t)
  assert c is not t and (c.shape, c.dtype, c.device, c.requires_grad) == (t.shape, t.dtype, t.device, t.requires_grad)
  np.testing.assert_array_equal(c.numpy(), t.numpy())
  c += 1
  assert not np.array_equal(c.numpy(), t.numpy())

def test_deepcopy_keeps_requires_grad_and_grad():
  w = Tensor([1.0, 2.0], requires_grad=True)
  (w * w).sum().backward()
  model = {"w": w, "same": w}
  c = copy.deepcopy(model)
  assert c["w"] is c["same"] and c["w"] is not w and c["w"].requires_grad is True
  assert c["w"].grad.tolist() == [2.0, 4.0]
  (c["w"] * 3).sum().backward()   # the copy is a leaf of its own
  assert c["w"].grad.tolist() == [5.0, 7.0] and w.grad.tolist() == [2.0, 4.0]

@pytest.mark.parametrize("make", [lambda: Tensor(X) * 2, lambda: Tensor([1.5, -2.0], dtype=dtypes.bfloat16), lambda: Tensor(True),
                                  lambda: Tensor([1.0, 2.0], requires_grad=True)])
def test_pickle_and_copy(make):
  t = make()
  for c in (pickle.loads(pickle.dumps(t)), copy.copy(t)):
    assert c is not t and (c.shape, c.dtype, c.device, c.requires_grad) == (t.shape, t.dtype, t.device, t.requires_grad)
    np.testing.assert_array_equal(c.numpy(), t.numpy())

def test_numpy_scalar_operands_give_tensors():
  t = Tensor([1.0, 2.0])
  for got, want in ((np.float32(2) * t, [2.0, 4.0]), (np.float64(2) + t, [3.0, 4.0]), (np.int64(3) - t, [2.0, 1.0])):
    assert isinstance(got, Tensor) and got.dtype == dtypes.float32 and got.tolist() == want
