"""Interop with other array libraries: DLPack both ways, Tensor(x) of foreign arrays, PyTorch checkpoints."""
import gc
import numpy as np, pytest
from morok_mlir import Tensor

class Foreign:   # an exporter that is neither numpy nor a Tensor (as a torch CPU tensor is to us)
  def __init__(self, a): self.a = a
  def __dlpack__(self, **kw): return self.a.__dlpack__(**kw)
  def __dlpack_device__(self): return self.a.__dlpack_device__()

@pytest.mark.parametrize("dt", ["float32", "int64", "bool", "float16", "uint8", "float64"])
def test_numpy_from_dlpack_values_and_dtype(dt):
  x = (np.arange(12) % 3).reshape(3, 4).astype(dt)
  a = np.from_dlpack(Tensor(x) + Tensor(np.zeros_like(x)) if dt != "bool" else Tensor(x) | False)
  assert a.dtype == np.dtype(dt) and a.shape == (3, 4) and (a == x).all()

def test_dlpack_device_and_bfloat16_refused():
  assert Tensor([1.0]).__dlpack_device__() == (1, 0)
  with pytest.raises(BufferError, match="bfloat16"): np.from_dlpack(Tensor([1.0], dtype="bfloat16"))

def test_dlpack_hands_out_the_buffer_read_only():
  x = np.arange(64, dtype=np.float32)
  t = Tensor.from_dlpack(x)   # zero-copy in, zero-copy out
  a = np.from_dlpack(t)
  assert np.shares_memory(a, x) and not a.flags.writeable
  assert np.from_dlpack(Tensor(x)).flags.writeable is False and not np.shares_memory(np.from_dlpack(Tensor(x)), x)   # Tensor() copies

def test_legacy_dlpack_exports_a_copy():
  t = Tensor(np.arange(4, dtype=np.float32)).realize()
  assert "dltensor" in repr(t.__dlpack__())
  with pytest.raises(BufferError, match="copy"): t.__dlpack__(copy=False)

def test_dlpack_lifetime():
  t = Tensor(np.arange(4096, dtype=np.float32)) * 2   # pooled memory: a recycled block would be overwritten below
  a = np.from_dlpack(t)
  del t; gc.collect()
  junk = [(Tensor(np.full(4096, 7.0, np.float32)) + 1).realize() for _ in range(4)]
  assert (a == np.arange(4096, dtype=np.float32) * 2).all() and len(junk) == 4

def test_round_trip_and_foreign_objects():
  x = np.arange(6, dtype=np.int64).reshape(2, 3)
  assert (Tensor.from_dlpack(Tensor(x)).numpy() == x).all()
  assert (Tensor.from_dlpack(Foreign(x)).numpy() == x).all()
  t = Tensor(Foreign(x), dtype="float32")
  assert t.dtype.name == "float32" and (t.numpy() == x).all()
  assert (Tensor(Foreign(x[:, ::2])).numpy() == x[:, ::2]).all()   # non-contiguous input is laid out anew
  class ArrayLike:
    def __array__(self, dtype=None, copy=None): return x
  assert (Tensor(ArrayLike()).numpy() == x).all()
  with pytest.raises(TypeError, match="from_dlpack"): Tensor.from_dlpack(object())

def test_torch_dlpack():
  torch = pytest.importorskip("torch")
  x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
  assert (Tensor(x).numpy() == x.numpy()).all() and (Tensor.from_dlpack(x).numpy() == x.numpy()).all()
  assert (torch.from_dlpack(Tensor(x) * 2) == x * 2).all()
