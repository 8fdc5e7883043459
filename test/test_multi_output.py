"""Several outputs of one shape without a reduce are one kernel with several stores (uop-rangeify's `group`)."""
import numpy as np
from morok_mlir import Tensor
from morok_mlir.realize import GlobalCounters

def rnd(*s, seed=0): return np.random.default_rng(seed).standard_normal(s).astype(np.float32)

def test_an_optimizer_step_is_one_kernel():
  p, m, v, g = (rnd(64, 48, seed=i) for i in range(4))
  v = np.abs(v)
  P, M, V, G = map(Tensor, (p, m, v, g))
  m2, v2 = M * 0.9 + G * 0.1, V * 0.999 + G * G * 0.001
  p2 = P - 0.01 * m2 / (v2.sqrt() + 1e-8)
  GlobalCounters.reset()
  p2.realize(m2, v2)
  assert GlobalCounters.kernel_count == 1
  rm, rv = m * 0.9 + g * 0.1, v * np.float32(0.999) + g * g * np.float32(0.001)
  np.testing.assert_allclose(m2.numpy(), rm, rtol=1e-6)
  np.testing.assert_allclose(v2.numpy(), rv, rtol=1e-6)
  np.testing.assert_allclose(p2.numpy(), p - 0.01 * rm / (np.sqrt(rv) + 1e-8), rtol=1e-5, atol=1e-6)

def test_shapes_and_reduces_keep_their_own_kernels():
  a, b = Tensor(rnd(8, 16)), Tensor(rnd(16, seed=1))
  outs = [a + 1, a * b, a.T + 0, a.sum(1), (a * 2).max(0)]
  GlobalCounters.reset()
  outs[0].realize(*outs[1:])
  assert GlobalCounters.kernel_count == 4   # (8,16) x2 as one; (16,8); and each reduce alone
  x, y = a.numpy(), b.numpy()
  for o, want in zip(outs, [x + 1, x * y, x.T, x.sum(1), (x * 2).max(0)]): np.testing.assert_allclose(o.numpy(), want, rtol=1e-6)

def test_outputs_of_mixed_dtypes_and_scalars():
  a = Tensor(rnd(5, 7))
  outs = [a > 0, (a * 3).cast("int32"), a.exp()]
  s1, s2 = Tensor(2.0) * 3, Tensor(4) + 1
  GlobalCounters.reset()
  outs[0].realize(*outs[1:], s1, s2)
  assert GlobalCounters.kernel_count == 2
  x = a.numpy()
  np.testing.assert_array_equal(outs[0].numpy(), x > 0)
  np.testing.assert_array_equal(outs[1].numpy(), (x * 3).astype(np.int32))
  np.testing.assert_allclose(outs[2].numpy(), np.exp(x), rtol=1e-6)
  assert s1.item() == 6.0 and s2.item() == 5

def test_several_stores_through_the_gpu_lowering():
  from morok_mlir.device.gpu_emulator import emulate
  from morok_mlir.device.ptx import ptx_for, ptxas
  from morok_mlir.codegen.lower_gpu import lower_module
  from morok_mlir.ir.emit import normalize, graph_func
  from morok_mlir.ir.pipeline import lower_to_kernels
  a, b = Tensor(rnd(33, 40)), Tensor(rnd(33, 40, seed=1))
  outs = [a * b + 1, (a - b).abs(), a.maximum(b)]
  got = emulate([o.lazydata for o in outs])
  for g, o in zip(got, outs): np.testing.assert_allclose(g, o.numpy(), rtol=1e-6)
  ks = [f for f in lower_to_kernels(graph_func(normalize([o.lazydata for o in outs])[0])) if "uop.kernel" in f.attrs]
  assert len(ks) == 1
  ptxas(ptx_for(lower_module(ks), "sm_90"), "sm_90")
