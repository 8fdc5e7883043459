"""The CUDA device on a GPU: memory, copies, launches, errors, and the Tensor differential suite against numpy.
Skipped, with the reason, where cuda-python, libcuda or a GPU is missing (PTX generation is tested without one in
test_gpu_lowering.py). The whole Tensor suite runs on CUDA with `DEVICE=CUDA pytest test/test_tensor_ops.py`."""
import numpy as np
import pytest
from morok_mlir.device.cuda import available, CUDA, CUDAError, CUDAProgram, CompiledSpec

OK, WHY = available()
pytestmark = pytest.mark.skipif(not OK, reason=f"no CUDA GPU: {WHY}")

def test_memory_roundtrip():
  a = np.arange(1000, dtype=np.float32)
  buf = CUDA.allocator.from_numpy(a)
  other = CUDA.allocator.alloc(1000, "float32")
  CUDA.allocator.copy(other, buf)
  np.testing.assert_array_equal(CUDA.allocator.to_numpy(other), a)
  ptr = other.ptr
  CUDA.allocator.free(other)
  again = CUDA.allocator.alloc(1000, "float32")
  assert again.ptr == ptr                       # the pool hands the freed block back
  for b in (buf, again): CUDA.allocator.free(b)
  with pytest.raises(ValueError): CUDA.allocator.copyin(buf, np.zeros(3, np.float32))

def _kernels(t):
  from morok_mlir.emit import normalize, graph_func
  from morok_mlir.realize import lower_to_kernels
  key, inputs = normalize([t.lazydata])
  return [f for f in lower_to_kernels(graph_func(key)) if "uop.kernel" in f.attrs], inputs

def test_program_on_device_buffers():
  from morok_mlir import Tensor
  a = np.random.default_rng(0).random((64, 1024), dtype=np.float32)
  (k,), _ = _kernels(Tensor(a).sum(axis=1))
  p = CUDA.compile(k)
  assert CUDA.compile(k) is p                   # method cache
  out, inp = CUDA.allocator.alloc(64, "float32"), CUDA.allocator.from_numpy(a)
  assert p(out, inp, wait=True) > 0
  np.testing.assert_allclose(CUDA.allocator.to_numpy(out), a.sum(axis=1), rtol=1e-5)
  with pytest.raises(TypeError): p(out)
  with pytest.raises(ValueError): p(inp, out)

def test_errors_name_the_kernel():
  from morok_mlir import Tensor
  (k,), _ = _kernels(Tensor(np.ones(8, np.float32)) + 1)
  spec = CUDA.renderer.render(k)
  with pytest.raises(CUDAError, match="loading kernel my_kernel.*CUDA_ERROR"):
    CUDA.init(); CUDAProgram(CUDA, CompiledSpec(spec, "garbage", CUDA.chip), "my_kernel")

CASES = {  # name: (tensor op, numpy op, input shapes)
  "add_broadcast": (lambda a, b: a + b, lambda a, b: a + b, [(64, 1000), (1000,)]),
  "exp_sqrt": (lambda a: (a * 2).exp().sqrt(), lambda a: np.sqrt(np.exp(a * 2)), [(7, 1000)]),
  "rowsum": (lambda a: a.sum(axis=1), lambda a: a.sum(axis=1), [(64, 1024)]),
  "colmax": (lambda a: a.max(axis=0), lambda a: a.max(axis=0), [(1000, 33)]),
  "fullsum": (lambda a: a.sum(), lambda a: a.sum(), [(1 << 20,)]),
  "softmax": (lambda a: a.softmax(axis=1), lambda a: np.exp(a - a.max(1, keepdims=True)) / np.exp(a - a.max(1, keepdims=True)).sum(1, keepdims=True), [(32, 512)]),
  "matmul": (lambda a, b: a @ b, lambda a, b: a @ b, [(256, 300), (300, 200)]),
  "small_matmul": (lambda a, b: a @ b, lambda a, b: a @ b, [(16, 512), (512, 16)]),
  "pad": (lambda a: a.pad(((1, 1), (2, 2))) * 3, lambda a: np.pad(a, ((1, 1), (2, 2))) * 3, [(33, 65)]),
  "argmax": (lambda a: a.argmax(axis=1), lambda a: a.argmax(axis=1), [(64, 1024)]),
}

@pytest.mark.parametrize("name", list(CASES))
def test_differential(name, monkeypatch):
  from morok_mlir import Tensor
  from morok_mlir import realize
  from morok_mlir.device import Device
  monkeypatch.setattr(Device, "DEFAULT", "CUDA")
  monkeypatch.setattr(realize, "_schedule_cache", {})   # schedules compiled for the CPU must not be reused
  top, ref, shapes = CASES[name]
  xs = [np.random.default_rng(i).standard_normal(s).astype(np.float32) for i, s in enumerate(shapes)]
  out = top(*[Tensor(x) for x in xs]).numpy()
  want = ref(*xs)
  if out.dtype.kind == "f": np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
  else: np.testing.assert_array_equal(out, want.astype(out.dtype))
