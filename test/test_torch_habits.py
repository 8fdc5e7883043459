"""PyTorch habits a new user brings: keywords (dim=, keepdim=, clamp's min=/max=), Python conversions, printing, and
PyTorch's small methods. Differential against numpy; against torch too where it is installed (the suite needs no torch)."""
import numpy as np, pytest
from morok_mlir import Tensor, dtypes

try: import torch
except ImportError: torch = None
needs_torch = pytest.mark.skipif(torch is None, reason="torch not installed")

A = (np.arange(12, dtype=np.float32).reshape(3, 4) * 7 % 5) - 1.5   # distinct maxima per row/column: indices are defined

# ---- keywords
@pytest.mark.parametrize("name,ref", [("sum", np.sum), ("mean", np.mean), ("prod", np.prod), ("any", np.any), ("all", np.all),
                                      ("argmax", np.argmax), ("argmin", np.argmin), ("cumsum", np.cumsum)])
def test_dim_keyword(name, ref):
  for d in (0, 1, -1):
    np.testing.assert_allclose(getattr(Tensor(A), name)(dim=d).numpy(), ref(A, axis=d), rtol=1e-6)
  if name != "cumsum":
    assert getattr(Tensor(A), name)(dim=1, keepdim=True).shape == ref(A, axis=1, keepdims=True).shape

def test_dim_keyword_softmax_and_layout():
  e = np.exp(A - A.max(0)); np.testing.assert_allclose(Tensor(A).softmax(dim=0).numpy(), e / e.sum(0), rtol=1e-5)
  t = Tensor(A)
  assert Tensor.cat(t, t, dim=1).shape == (3, 8) and Tensor.stack(t, t, dim=1).shape == (3, 2, 4)
  assert t.unsqueeze(dim=0).shape == (1, 3, 4) and t.reshape(3, 1, 4).squeeze(dim=1).shape == (3, 4)
  assert t.flatten(start_dim=0).shape == (12,)

@pytest.mark.parametrize("name", ["max", "min"])
def test_max_min_dim_returns_values_and_indices(name):
  r = getattr(Tensor(A), name)(dim=1)
  np.testing.assert_array_equal(r.values.numpy(), getattr(A, name)(axis=1))
  np.testing.assert_array_equal(r.indices.numpy(), getattr(A, "arg" + name)(axis=1))
  v, i = getattr(Tensor(A), name)(dim=0, keepdim=True)
  assert v.shape == i.shape == (1, 4) and type(r).__name__ == name and r._fields == ("values", "indices")
  # axis= (tinygrad's) gives the values only
  np.testing.assert_array_equal(getattr(Tensor(A), name)(axis=1).numpy(), getattr(A, name)(axis=1))

def test_clamp_keywords():
  np.testing.assert_array_equal(Tensor(A).clamp(min=0).numpy(), np.clip(A, 0, None))
  np.testing.assert_array_equal(Tensor(A).clamp(max=1).numpy(), np.clip(A, None, 1))
  np.testing.assert_array_equal(Tensor(A).clamp(min=-1, max=1).numpy(), np.clip(A, -1, 1))

def test_unknown_keyword_names_the_users_line():
  for call in (lambda: Tensor(A).sum(dims=1), lambda: Tensor(A).max(dim=1, foo=2), lambda: Tensor(A).clamp(lo=0),
               lambda: Tensor(A).softmax(axes=0)):
    with pytest.raises(TypeError, match=r"test_torch_habits\.py:\d+"): call()

@needs_torch
def test_keywords_against_torch():
  x, t = torch.tensor(A), Tensor(A)
  for d in (0, 1):
    rv, ti = t.max(dim=d), x.max(dim=d)
    np.testing.assert_array_equal(rv.values.numpy(), ti.values.numpy()); np.testing.assert_array_equal(rv.indices.numpy(), ti.indices.numpy())
    np.testing.assert_allclose(t.sum(dim=d, keepdim=True).numpy(), x.sum(dim=d, keepdim=True).numpy(), rtol=1e-6)
  np.testing.assert_array_equal(t.clamp(min=0.5).numpy(), x.clamp(min=0.5).numpy())

# ---- Python conversions, formatting, printing, to()
def test_python_scalar_conversions():
  assert float(Tensor([2.5])) == 2.5 and int(Tensor(3.9)) == 3 and int(Tensor([[-7]], dtype=dtypes.int64)) == -7
  assert bool(Tensor([0.0])) is False and bool(Tensor(1)) is True and f"{Tensor(3.14159):.2f}" == "3.14" and f"{Tensor([7]):>3d}" == "  7"
  assert float(Tensor(np.float32(0.1))) == float(np.float32(0.1))

def test_conversion_of_several_elements_names_the_users_line():
  t = Tensor([1.0, 2.0])
  for conv in (float, int):
    with pytest.raises(ValueError, match=r"test_torch_habits\.py:\d+.*one element"): conv(t)
  with pytest.raises(RuntimeError, match=r"test_torch_habits\.py:\d+.*ambiguous"): bool(t)
  with pytest.raises(TypeError, match=r"test_torch_habits\.py:\d+.*one element"): f"{t:.2f}"

def test_repr_shows_values_like_pytorch():
  assert repr(Tensor([1.0, 2.5])) == str(Tensor([1.0, 2.5])) == f"{Tensor([1.0, 2.5])}" == "tensor([1.0000, 2.5000])"
  assert repr(Tensor([[1, 2], [3, 4]])) == "tensor([[1, 2],\n        [3, 4]])"
  assert repr(Tensor([1, 2], dtype=dtypes.int16)) == "tensor([1, 2], dtype=dtypes.int16)"
  assert repr(Tensor(3.0)) == "tensor(3.)" and repr(Tensor.ones(2, requires_grad=True)) == "tensor([1., 1.], requires_grad=True)"
  assert repr(Tensor([1e-6, 1.0])) == "tensor([1.0000e-06, 1.0000e+00])" and repr(Tensor([-1.0, float("nan")])) == "tensor([-1., nan])"
  assert repr(Tensor.zeros(0, 3)) == "tensor([], size=(0, 3))"
  assert repr(Tensor([1.0, 2.0]) * 2) == "tensor([2., 4.])"   # a lazy tensor is realized to be shown

def test_to_dtype_and_device():
  t = Tensor([1.5, -2.5])
  assert t.to(dtypes.int32).tolist() == [1, -2] and t.to(dtypes.float16).dtype is dtypes.float16
  u = t.to("CPU", dtypes.float64)
  assert u.dtype is dtypes.float64 and u.device == "CPU" and u.tolist() == [1.5, -2.5]
  assert t.to(device="CPU", dtype=dtypes.int64).tolist() == [1, -2] and t.to("CPU") is t

@needs_torch
def test_conversions_against_torch():
  for v in ([2.5], 3.9, [[-7.0]]):
    assert float(Tensor(v)) == float(torch.tensor(v)) and int(Tensor(v)) == int(torch.tensor(v))
  assert repr(Tensor([1.0, 2.5])) == repr(torch.tensor([1.0, 2.5])) and f"{Tensor(2.0):.3f}" == f"{torch.tensor(2.0):.3f}"
