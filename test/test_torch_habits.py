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

# ---- PyTorch's small methods
B = np.array([[1., -2., 0.], [3., 0., 4.]], np.float32)

def test_dim_t_mm_cpu():
  t = Tensor(B)
  assert t.dim() == 2 and Tensor(1.0).dim() == 0 and t.cpu().device == "CPU"
  np.testing.assert_array_equal(t.t().numpy(), B.T); assert Tensor([1, 2]).t().shape == (2,)
  np.testing.assert_allclose(t.mm(t.t()).numpy(), B @ B.T)
  with pytest.raises(ValueError, match=r"test_torch_habits\.py:\d+"): Tensor.ones(2, 2, 2).t()
  with pytest.raises(ValueError, match=r"test_torch_habits\.py:\d+"): Tensor.ones(3).mm(Tensor.ones(3, 1))

def test_in_place_ops_return_self():
  x = Tensor([1., 2.])
  assert x.add_(1) is x and x.tolist() == [2., 3.]
  assert x.sub_(Tensor([1., 1.]), alpha=2) is x and x.tolist() == [0., 1.]
  assert x.mul_(3) is x and x.tolist() == [0., 3.]
  assert x.fill_(7) is x and x.tolist() == [7., 7.] and x.zero_() is x and x.tolist() == [0., 0.]
  m = Tensor(np.zeros((2, 2), np.float32)); m[0].fill_(5)   # a view writes its base, as t[0] = 5
  assert m.tolist() == [[5., 5.], [0., 0.]]

def test_unbind():
  for d in (0, 1, -1):
    parts = Tensor(B).unbind(d)
    assert len(parts) == B.shape[d]
    for i, p in enumerate(parts): np.testing.assert_array_equal(p.numpy(), np.take(B, i, axis=d))

@pytest.mark.parametrize("p", [2, 1, 3, 0.5, 0, float("inf"), float("-inf"), "fro"])
def test_norm(p):
  q = 2 if p == "fro" else p
  ref = lambda axis, keep: np.linalg.norm(B.reshape(-1) if axis is None else B, ord=q, axis=0 if axis is None else axis, keepdims=keep)
  np.testing.assert_allclose(Tensor(B).norm(p).numpy(), ref(None, False), rtol=1e-5)
  np.testing.assert_allclose(Tensor(B).norm(p, dim=1).numpy(), ref(1, False), rtol=1e-5)
  np.testing.assert_allclose(Tensor(B).norm(p, dim=0, keepdim=True).numpy(), ref(0, True), rtol=1e-5)

def test_nonzero():
  np.testing.assert_array_equal(Tensor(B).nonzero().numpy(), np.argwhere(B))
  for got, want in zip(Tensor(B).nonzero(as_tuple=True), np.nonzero(B), strict=True): np.testing.assert_array_equal(got.numpy(), want)
  assert Tensor(3).nonzero().shape == (1, 0) and Tensor(0).nonzero().shape == (0, 0) and Tensor.zeros(4).nonzero().shape == (0, 1)

def test_sequential():
  np.testing.assert_array_equal(Tensor(B).sequential([lambda z: z * 2, Tensor.relu]).numpy(), np.maximum(B * 2, 0))
  assert Tensor(B).sequential([]).tolist() == B.tolist()

def test_tensor_from_list_of_arrays_tensors_and_bytes():
  np.testing.assert_array_equal(Tensor([np.ones(2), np.zeros(2)]).numpy(), [[1, 1], [0, 0]])
  assert Tensor([np.ones(2), np.zeros(2)]).dtype is dtypes.float32 and Tensor([np.arange(2), np.arange(2)]).dtype is dtypes.int32
  np.testing.assert_array_equal(Tensor([Tensor([1., 2.]), Tensor([3., 4.])]).numpy(), [[1, 2], [3, 4]])
  b = Tensor(b"ab\x01")
  assert b.dtype is dtypes.uint8 and b.tolist() == [97, 98, 1] and Tensor(bytearray(b"\x02")).tolist() == [2]
  assert Tensor(np.int32(258).tobytes(), dtype=dtypes.int32).tolist() == [258]
  with pytest.raises(ValueError, match=r"test_torch_habits\.py:\d+"): Tensor(b"abc", dtype=dtypes.int32)
  with pytest.raises(TypeError, match=r"test_torch_habits\.py:\d+"): Tensor([np.ones(2, np.complex64)])

@needs_torch
def test_small_methods_against_torch():
  x, t = torch.tensor(B), Tensor(B)
  np.testing.assert_allclose(t.norm().numpy(), x.norm().numpy(), rtol=1e-6)
  np.testing.assert_allclose(t.norm(1, dim=1).numpy(), x.norm(1, dim=1).numpy(), rtol=1e-6)
  np.testing.assert_array_equal(t.nonzero().numpy(), x.nonzero().numpy())
  np.testing.assert_array_equal(t.t().numpy(), x.t().numpy()); np.testing.assert_allclose(t.mm(t.t()).numpy(), x.mm(x.t()).numpy())
  for a, b in zip(t.unbind(1), x.unbind(1), strict=True): np.testing.assert_array_equal(a.numpy(), b.numpy())
