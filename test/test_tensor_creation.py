"""Creation and random tensors: values against numpy, distributions by their moments, errors at the user's line."""
import math, sys
import numpy as np, pytest
from morok_mlir import Tensor, dtypes

@pytest.mark.parametrize("start,stop,steps", [(0, 1, 5), (-3, 7, 1), (2.5, -1.5, 9), (0, 10, 0)])
def test_linspace(start, stop, steps):
  np.testing.assert_allclose(Tensor.linspace(start, stop, steps).numpy(), np.linspace(start, stop, steps, dtype=np.float32), rtol=1e-6)
  assert Tensor.linspace(start, stop, steps, dtype=dtypes.float64).dtype is dtypes.float64

def test_linspace_errors():
  line = sys._getframe().f_lineno + 1
  with pytest.raises(ValueError, match=rf"test_tensor_creation.py:{line}:\d+: linspace: steps"): Tensor.linspace(0, 1, -1)
  with pytest.raises(TypeError, match="finite"): Tensor.linspace(0, math.inf, 3)

def test_randperm_is_a_permutation_and_seeded():
  Tensor.manual_seed(3); a = Tensor.randperm(100).numpy()
  Tensor.manual_seed(3); b = Tensor.randperm(100).numpy()
  assert sorted(a.tolist()) == list(range(100)) and (a == b).all() and a.dtype == np.int32 and Tensor.randperm(0).shape == (0,)

@pytest.mark.parametrize("init,std", [
  (lambda: Tensor.scaled_uniform(256, 64), (1 / math.sqrt(256 * 64)) / math.sqrt(3)),
  (lambda: Tensor.glorot_uniform(256, 64), math.sqrt(6 / (256 + 64)) / math.sqrt(3)),
  (lambda: Tensor.kaiming_uniform(256, 64), math.sqrt(2 / (1 + 0.01 ** 2)) / math.sqrt(64)),
  (lambda: Tensor.kaiming_normal(256, 64), math.sqrt(2 / (1 + 0.01 ** 2)) / math.sqrt(64)),
  (lambda: Tensor.normal(256, 64, mean=0.0, std=0.5), 0.5)])
def test_initialisations_have_their_scale(init, std):
  x = init().numpy()
  assert x.shape == (256, 64) and x.dtype == np.float32
  assert abs(x.mean()) < 4 * std / math.sqrt(x.size) + 1e-7 and abs(x.std() / std - 1) < 0.03

def test_like_constructors():
  x = Tensor.ones(2, 3, dtype=dtypes.float16).permute(1, 0)
  for t in (x.empty_like(), x.rand_like(), x.randn_like()): assert t.shape == (3, 2) and t.dtype is dtypes.float16
  assert x.rand_like(dtype=dtypes.float64).dtype is dtypes.float64
  r = Tensor.ones(4, 5, dtype=dtypes.int32).rand_like().numpy()   # an int tensor gives the default float
  assert r.dtype == np.float32 and ((0 <= r) & (r < 1)).all()

def test_multinomial():
  Tensor.manual_seed(0)
  w = Tensor([[0.0, 1.0, 3.0], [5.0, 0.0, 0.0]])
  s = w.multinomial(4000, replacement=True).numpy()
  assert s.shape == (2, 4000) and s.dtype == np.int32 and (s[1] == 0).all() and not (s[0] == 0).any()
  assert abs((s[0] == 2).mean() - 0.75) < 0.03
  assert sorted(Tensor([1.0, 1.0, 1.0]).multinomial(3).numpy().tolist()) == [0, 1, 2]   # without replacement: each once
  with pytest.raises(ValueError, match="without replacement"): w.multinomial(2)
  with pytest.raises(ValueError, match="weights"): Tensor([1.0, -1.0]).multinomial()
