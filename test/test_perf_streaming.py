"""Nontemporal (streaming) stores of big elementwise outputs: uop.nontemporal = VW lanes per iteration of the
innermost loop, one aligned vector store (optimize.streaming_store picks them, lower_cpu.store_lanes writes them)."""
import numpy as np
import pytest
from morok_mlir.tensor import Tensor
from morok_mlir import realize as R

N = 1 << 22   # 16 MiB of f32: the smallest streamed output

def programs(t: Tensor):
  R._schedule_cache.clear()
  t.realize()
  return [it.program for s in R._schedule_cache.values() for it in s.items]

@pytest.mark.parametrize("shape", [(N,), (2048, 4096)])
def test_streamed_and_correct(shape):
  r = np.random.default_rng(0)
  a, b = r.standard_normal(shape, dtype=np.float32), r.standard_normal(shape[-1:], dtype=np.float32)
  t = ((Tensor(a) * Tensor(b)).relu() * 2 - Tensor(a)).exp()
  (p,) = programs(t)
  assert p.spec.align == 32 or p.spec.align == 64   # 8 or 16 lanes of f32
  np.testing.assert_allclose(t.numpy(), np.exp(np.maximum(a * b, 0) * 2 - a), rtol=2e-6)

def test_row_normalization_streamed():
  """A reduce computed once per row (layernorm's mean and variance) is shared by the lanes: the output still streams."""
  x = np.random.default_rng(2).standard_normal((4096, 1024), dtype=np.float32)
  (p,) = programs(Tensor(x).layernorm())
  assert p.spec.align in (32, 64)
  y = x.astype(np.float64) - x.mean(-1, keepdims=True, dtype=np.float64)
  np.testing.assert_allclose(Tensor(x).layernorm().numpy(), y / np.sqrt((y * y).mean(-1, keepdims=True) + 1e-5), rtol=1e-4, atol=1e-5)

def test_not_streamed():
  r = np.random.default_rng(1)
  small, odd = r.standard_normal((64, 64), dtype=np.float32), r.standard_normal((2049, 4097), dtype=np.float32)
  for x in (small, odd):   # too small; inner axis not a multiple of the lanes
    (p,) = programs(Tensor(x) * 3)
    assert p.spec.align == 1
    np.testing.assert_array_equal((Tensor(x) * 3).numpy(), x * 3)

def test_misaligned_output_is_an_error():
  x = np.ones(N, np.float32)
  (p,) = programs(Tensor(x) + 1)
  raw = np.zeros(N + 16, np.float32)
  out = raw[1:N + 1] if raw[1:].ctypes.data % p.spec.align else raw[2:N + 2]
  with pytest.raises(ValueError, match="aligned"): p(out, x)
  good = np.zeros(N + 16, np.float32)
  good = good[(-good.ctypes.data % 64) // 4:][:N]
  p(good, x)
  assert (good == 2).all()
