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

def _released():   # every capsule we made was let go (consumer done, or dropped unconsumed)
  from morok_mlir.device import dlpack
  gc.collect(); dlpack.sweep()
  return not dlpack._alive

@pytest.mark.parametrize("dt", ["bfloat16", "fp8e4m3", "fp8e5m2"])
def test_dlpack_of_types_numpy_lacks(dt):
  """bfloat16 and fp8 travel in our own capsules (type codes 4, 10, 12): the memory is shared, the dtype kept, and the
  struct let go once the importer's tensor dies; numpy refuses them with its own error, and nothing leaks."""
  t = Tensor([0.5, -2.0, 448.0, 3.0]).cast(dt).realize()
  assert t.__dlpack_device__() == (1, 0)
  u = Tensor.from_dlpack(Foreign(t))
  assert u.dtype == t.dtype and u.uop.buffer.ptr == t.uop.buffer.ptr
  assert (u.numpy().astype(np.float32) == t.numpy().astype(np.float32)).all()   # u's memory is t's
  with pytest.raises((BufferError, RuntimeError)): np.from_dlpack(t)
  del u
  assert _released()

def test_an_unconsumed_capsule_is_let_go():
  t = Tensor([1.0, 2.0]).cast("bfloat16").realize()
  cap = t.__dlpack__(max_version=(1, 1))
  assert "dltensor_versioned" in repr(cap) and not _released()
  del cap
  assert _released()

def test_dlpack_import_refuses_strided_memory_it_cannot_read():
  """A producer's non-contiguous bfloat16 view is refused at the caller's line (numpy's types are copied by numpy)."""
  from morok_mlir.device import dlpack
  base = Tensor(np.arange(8, dtype=np.float32)).cast("bfloat16").realize()
  class Strided:
    def __dlpack_device__(self): return (1, 0)
    def __dlpack__(self, **kw):
      cap = dlpack.to_capsule(base.uop.buffer.ptr, (1, 0), (4,), base.dtype, base, True, True)
      dlpack.DLManagedTensorVersioned.from_address(dlpack._api.PyCapsule_GetPointer(cap, b"dltensor_versioned")).dl_tensor.strides[0] = 2
      return cap
  with pytest.raises(BufferError, match=r"test_interop.py:\d+.*strides \(2,\)"): Tensor.from_dlpack(Strided())
  assert _released()

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
  t = Tensor(np.arange(1 << 15, dtype=np.float32)) * 2   # pooled memory: a recycled block would be overwritten below
  a = np.from_dlpack(t)
  del t; gc.collect()
  junk = [(Tensor(np.full(1 << 15, 7.0, np.float32)) + 1).realize() for _ in range(4)]
  assert (a == np.arange(1 << 15, dtype=np.float32) * 2).all() and len(junk) == 4

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

# ---- torch_load: checkpoints in torch.save's zip format, written here without torch: stand-ins whose names pickle writes
# as torch's globals (fake torch modules for the pickler's lookup)
import collections, io, os, pickle, sys, types, zipfile
from morok_mlir.nn.state import torch_load

_STORAGES = {np.dtype(k): type(v, (), {"__module__": "torch"}) for k, v in [("float32", "FloatStorage"), ("int64", "LongStorage"),
             ("float16", "HalfStorage"), ("bool", "BoolStorage"), ("uint8", "ByteStorage"), ("int32", "IntStorage")]}
def _rebuild_tensor_v2(*a): pass
def _rebuild_parameter(*a): pass
_rebuild_tensor_v2.__module__ = _rebuild_parameter.__module__ = "torch._utils"

class St:      # a storage: a flat array
  def __init__(self, arr): self.arr = arr
class T:       # a tensor over a storage
  def __init__(self, st, offset, shape, stride): self.st, self.args = st, (offset, shape, stride)
  def __reduce__(self): return _rebuild_tensor_v2, (self.st, *self.args, False, collections.OrderedDict())
class P:       # an nn.Parameter
  def __init__(self, t): self.t = t
  def __reduce__(self): return _rebuild_parameter, (self.t, True, collections.OrderedDict())

def _fake_torch(monkeypatch):
  torch, utils = types.ModuleType("torch"), types.ModuleType("torch._utils")
  for c in _STORAGES.values(): setattr(torch, c.__name__, c)
  utils._rebuild_tensor_v2, utils._rebuild_parameter = _rebuild_tensor_v2, _rebuild_parameter
  monkeypatch.setitem(sys.modules, "torch", torch); monkeypatch.setitem(sys.modules, "torch._utils", utils)

def _pickle(f, obj, monkeypatch, *pid_tail) -> list[St]:
  """Pickle obj into f as torch.save does, storages as persistent ids ("storage", class, key, "cpu", numel, *pid_tail);
  the storages in key order."""
  _fake_torch(monkeypatch)
  sts: dict[int, St] = {}
  class Pickler(pickle.Pickler):
    def persistent_id(self, obj):
      if not isinstance(obj, St): return None
      sts.setdefault(id(obj), obj)
      return ("storage", _STORAGES[obj.arr.dtype], str(list(sts).index(id(obj))), "cpu", obj.arr.size, *pid_tail)
  Pickler(f, protocol=2).dump(obj)
  return list(sts.values())

def _save(path, obj, monkeypatch, storage_bytes=None):
  sts = _pickle(buf := io.BytesIO(), obj, monkeypatch)
  with zipfile.ZipFile(path, "w") as z:
    z.writestr("archive/data.pkl", buf.getvalue()); z.writestr("archive/byteorder", "little"); z.writestr("archive/version", "3\n")
    for i, st in enumerate(sts): z.writestr(f"archive/data/{i}", storage_bytes if storage_bytes is not None else st.arr.tobytes())

def test_torch_load_state_dict(tmp_path, monkeypatch):
  w = np.arange(12, dtype=np.float32)
  shared = St(w)
  sd = collections.OrderedDict([("w", P(T(shared, 0, (3, 4), (4, 1)))), ("wT", T(shared, 0, (4, 3), (1, 4))),   # strides honoured
                                ("row", T(shared, 5, (3,), (1,))), ("b", T(St(np.array([1, -2], np.int64)), 0, (2,), (1,))),
                                ("h", T(St(np.array([0.5, 2], np.float16)), 1, (), ())),
                                ("m", T(St(np.array([True, False, True])), 0, (3,), (1,))), ("step", 7)])
  _save(fn := tmp_path / "m.pt", sd, monkeypatch)
  got = torch_load(fn)
  assert list(got) == list(sd) and got["step"] == 7
  assert (got["w"].numpy() == w.reshape(3, 4)).all() and (got["wT"].numpy() == w.reshape(3, 4).T).all()
  assert (got["row"].numpy() == w[5:8]).all() and got["b"].numpy().tolist() == [1, -2] and got["b"].dtype.name == "int64"
  assert got["h"].numpy().dtype == np.float16 and got["h"].item() == 2 and got["m"].numpy().tolist() == [True, False, True]

@pytest.mark.parametrize("offset, shape, stride", [(10, (3,), (1,)), (0, (3, 4), (5, 1)), (0, (2,), (-1,)), (0, (2, 2), (1,))])
def test_torch_load_checks_views(tmp_path, monkeypatch, offset, shape, stride):
  _save(fn := tmp_path / "m.pt", {"x": T(St(np.arange(12, dtype=np.float32)), offset, shape, stride)}, monkeypatch)
  with pytest.raises(ValueError, match="torch_load"): torch_load(fn)

def test_torch_load_checks_storage_size(tmp_path, monkeypatch):
  _save(fn := tmp_path / "m.pt", {"x": T(St(np.arange(4, dtype=np.float32)), 0, (4,), (1,))}, monkeypatch, storage_bytes=b"\0" * 8)
  with pytest.raises(ValueError, match="holds 8 bytes"): torch_load(fn)

class Evil:
  def __init__(self, f, arg): self.f, self.arg = f, arg
  def __reduce__(self): return self.f, (self.arg,)

@pytest.mark.parametrize("f", [os.system, eval, getattr(__import__("builtins"), "exec")])
@pytest.mark.parametrize("zipped", [True, False])
def test_torch_load_refuses_code(tmp_path, f, zipped):
  marker = tmp_path / "ran"
  code = f"touch {marker}" if f is os.system else f"open({str(marker)!r}, 'w')"
  evil = pickle.dumps({"x": Evil(f, code)}, protocol=2)
  if not zipped: (fn := tmp_path / "evil.pt").write_bytes(evil)
  else:
    with zipfile.ZipFile(fn := tmp_path / "evil.pt", "w") as z: z.writestr("archive/data.pkl", evil)
  with pytest.raises(ValueError, match="refused"): torch_load(fn)
  assert not marker.exists()

@pytest.mark.parametrize("data, msg", [(pickle.dumps({"a": 1}), "not a PyTorch checkpoint"), (b"\x80\x02garbage", "pickle is broken"),
                                       (b"", "pickle is broken")])
def test_torch_load_not_a_checkpoint(tmp_path, data, msg):
  (fn := tmp_path / "x.pt").write_bytes(data)
  with pytest.raises(ValueError, match=msg): torch_load(fn)

def _save_legacy(path, obj, monkeypatch, numel_delta=0):   # torch.save(..., _use_new_zipfile_serialization=False)
  with open(path, "wb") as f:
    for x in (0x1950a86a20f9469cfc6c, 1001, {"protocol_version": 1001, "little_endian": True}): pickle.dump(x, f, protocol=2)
    sts = _pickle(f, obj, monkeypatch, None)
    pickle.dump([str(i) for i in range(len(sts))], f, protocol=2)
    for st in sts: f.write((st.arr.size + numel_delta).to_bytes(8, "little") + st.arr.tobytes())

def test_torch_load_legacy_format(tmp_path, monkeypatch):
  w = np.arange(6, dtype=np.float32)
  _save_legacy(fn := tmp_path / "m.pt", {"w": P(T(st := St(w), 0, (2, 3), (3, 1))), "wT": T(st, 0, (3, 2), (1, 3)),
                                         "b": T(St(np.array([3, 4], np.int32)), 1, (1,), (1,))}, monkeypatch)
  got = torch_load(fn)
  assert (got["w"].numpy() == w.reshape(2, 3)).all() and (got["wT"].numpy() == w.reshape(2, 3).T).all() and got["b"].tolist() == [4]
  _save_legacy(fn, {"w": T(St(w), 0, (6,), (1,))}, monkeypatch, numel_delta=1)
  with pytest.raises(ValueError, match="storage '0' is not 6"): torch_load(fn)

def test_torch_load_of_torch_save(tmp_path):
  torch = pytest.importorskip("torch")
  m = torch.nn.Linear(3, 2)
  torch.save(m.state_dict(), fn := tmp_path / "m.pt")
  got = torch_load(fn)
  assert all((got[k].numpy() == v.detach().numpy()).all() for k, v in m.state_dict().items())

def test_torch_dlpack_of_bfloat16_and_fp8_both_ways():
  torch = pytest.importorskip("torch")
  t = Tensor([1.5, -2.0, 3.0]).cast("bfloat16").realize()
  assert torch.equal(torch.from_dlpack(t), torch.tensor([1.5, -2.0, 3.0], dtype=torch.bfloat16))
  for name, tdt in (("bfloat16", torch.bfloat16), ("fp8e4m3", torch.float8_e4m3fn), ("fp8e5m2", torch.float8_e5m2)):
    u = Tensor.from_dlpack(torch.tensor([0.5, 448.0, -3.0]).to(tdt))
    assert u.dtype.name == name and (u.cast("float32").numpy() == [0.5, 448.0, -3.0]).all()
  assert _released()
