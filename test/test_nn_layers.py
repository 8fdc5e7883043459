"""The normalisation and convolution layers beyond Linear/Conv2d/LayerNorm/Embedding/BatchNorm, against numpy."""
import numpy as np
import pytest
from morok_mlir import Tensor
from morok_mlir import nn
from morok_mlir.nn.state import get_parameters

def rnd(*s, seed=0): return np.random.default_rng(seed).standard_normal(s).astype(np.float32)
def norm(x, axes, eps):
  x = x.astype(np.float64)
  return (x - x.mean(axes, keepdims=True)) / np.sqrt(x.var(axes, keepdims=True) + eps)

def test_group_and_instance_norm():
  x = rnd(2, 6, 5, 4)
  g = nn.GroupNorm(3, 6)
  g.weight, g.bias = Tensor(rnd(6, seed=1)), Tensor(rnd(6, seed=2))
  want = norm(x.reshape(2, 3, -1), 2, 1e-5).reshape(x.shape) * g.weight.numpy()[None, :, None, None] + g.bias.numpy()[None, :, None, None]
  np.testing.assert_allclose(g(Tensor(x)).numpy(), want, rtol=1e-4, atol=1e-5)
  i = nn.InstanceNorm(6, affine=False)
  np.testing.assert_allclose(i(Tensor(x)).numpy(), norm(x, (2, 3), 1e-5), rtol=1e-4, atol=1e-5)
  with pytest.raises(ValueError, match="groups"): nn.GroupNorm(4, 6)
  with pytest.raises(ValueError, match="channels"): g(Tensor(rnd(2, 4, 3)))

def test_rmsnorm():
  x = rnd(3, 7)
  r = nn.RMSNorm(7)
  r.weight = Tensor(rnd(7, seed=3))
  xd = x.astype(np.float64)
  np.testing.assert_allclose(r(Tensor(x)).numpy(), xd / np.sqrt((xd ** 2).mean(-1, keepdims=True) + 1e-6) * r.weight.numpy(), rtol=1e-5)

def test_conv1d_and_conv_transpose2d():
  c = nn.Conv1d(3, 4, 3, padding=1)
  x = rnd(2, 3, 9)
  w, b = c.weight.numpy(), c.bias.numpy()
  xp = np.pad(x, ((0, 0), (0, 0), (1, 1)))
  want = np.stack([np.einsum("nck,ock->no", xp[:, :, i:i + 3], w) for i in range(9)], -1) + b[None, :, None]
  np.testing.assert_allclose(c(Tensor(x)).numpy(), want, rtol=1e-4, atol=1e-5)
  t = nn.ConvTranspose2d(3, 2, 2, stride=2)
  y = rnd(1, 3, 4, 4, seed=5)
  w, b = t.weight.numpy(), t.bias.numpy()   # (in, out, 2, 2): each input pixel paints a 2x2 block
  want = np.einsum("nchw,cokl->nohkwl", y, w).reshape(1, 2, 8, 8) + b[None, :, None, None]
  np.testing.assert_allclose(t(Tensor(y)).numpy(), want, rtol=1e-4, atol=1e-5)
  assert len(get_parameters(t)) == 2 and nn.BatchNorm1d is nn.BatchNorm

def test_layers_train():
  """Gradients reach every parameter of the new layers."""
  layers = [nn.GroupNorm(2, 4), nn.InstanceNorm(4), nn.RMSNorm(5), nn.Conv1d(4, 4, 3, padding=1)]
  params = get_parameters(layers)
  for p in params: p.requires_grad = True
  y = Tensor(rnd(2, 4, 5))
  for l in layers: y = l(y)
  y.square().sum().backward()
  assert all(p.grad is not None and np.isfinite(p.grad.numpy()).all() for p in params)
