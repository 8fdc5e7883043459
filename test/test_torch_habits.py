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
