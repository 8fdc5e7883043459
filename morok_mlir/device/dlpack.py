"""DLPack capsules made and read through the C ABI (ctypes), for what numpy's own exporter cannot describe: device
memory (CUDA) and element types numpy lacks (bfloat16, fp8).

A capsule we make points at a struct that holds the memory's owner. Its deleter and destructor must be C: a consumer
calls the deleter, and Python drops an unconsumed capsule, at any time, exceptions pending included, when a Python
callback (ctypes) fails. So the deleter is libc's time(), a C function that writes through its one pointer argument:
its write over the struct's first 8 bytes says the consumer is done; the capsule has no destructor, and `sweep()`, run
at every export and import, lets go of structs marked so and of capsules nobody but us holds, unconsumed.
A capsule we read is renamed "used_..." as the protocol asks, and its producer's deleter runs when the memory's last
user here dies (a weakref finalizer: CPython keeps a pending exception aside for those)."""
from __future__ import annotations
import ctypes, sys, threading, weakref
from ctypes import POINTER, Structure, c_char_p, c_int32, c_int64, c_uint8, c_uint16, c_uint32, c_uint64, c_void_p
from morok_mlir.core.dtype import DType, dtypes

class DLDevice(Structure): _fields_ = [("device_type", c_int32), ("device_id", c_int32)]
class DLDataType(Structure): _fields_ = [("code", c_uint8), ("bits", c_uint8), ("lanes", c_uint16)]
class DLTensor(Structure):
  _fields_ = [("data", c_void_p), ("device", DLDevice), ("ndim", c_int32), ("dtype", DLDataType),
              ("shape", POINTER(c_int64)), ("strides", POINTER(c_int64)), ("byte_offset", c_uint64)]
DELETER = ctypes.CFUNCTYPE(None, c_void_p)
class DLManagedTensor(Structure): _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", c_void_p), ("deleter", DELETER)]
class DLPackVersion(Structure): _fields_ = [("major", c_uint32), ("minor", c_uint32)]
class DLManagedTensorVersioned(Structure):
  _fields_ = [("version", DLPackVersion), ("manager_ctx", c_void_p), ("deleter", DELETER), ("flags", c_uint64), ("dl_tensor", DLTensor)]

KDL_CPU, KDL_CUDA = 1, 2
READ_ONLY = 1                                   # DLPACK_FLAG_BITMASK_READ_ONLY
VERSION = (1, 1)                                # the fp8 codes came with 1.1
# (code, bits) of each dtype: kDLInt 0, kDLUInt 1, kDLFloat 2, kDLBfloat 4, kDLBool 6, kDLFloat8_e4m3fn 10, kDLFloat8_e5m2 12
CODES: dict[DType, tuple[int, int]] = {**{d: (1 if d.is_unsigned else 0, d.bits) for d in dtypes.ints},
  **{d: (2, d.bits) for d in dtypes.floats}, dtypes.bool: (6, 8), dtypes.bfloat16: (4, 16), dtypes.fp8e4m3: (10, 8), dtypes.fp8e5m2: (12, 8)}
DTYPES = {v: k for k, v in CODES.items()}
NAMES = {False: (b"dltensor", b"used_dltensor"), True: (b"dltensor_versioned", b"used_dltensor_versioned")}

_api = ctypes.pythonapi
_api.PyCapsule_New.restype, _api.PyCapsule_New.argtypes = ctypes.py_object, [c_void_p, c_char_p, c_void_p]
_api.PyCapsule_IsValid.restype, _api.PyCapsule_IsValid.argtypes = ctypes.c_int, [ctypes.py_object, c_char_p]
_api.PyCapsule_GetPointer.restype, _api.PyCapsule_GetPointer.argtypes = c_void_p, [ctypes.py_object, c_char_p]
_api.PyCapsule_GetName.restype, _api.PyCapsule_GetName.argtypes = ctypes.c_char_p, [ctypes.py_object]
_api.PyCapsule_SetName.restype, _api.PyCapsule_SetName.argtypes = ctypes.c_int, [ctypes.py_object, c_char_p]
_MARK = ctypes.cast(ctypes.CDLL(None).time, DELETER)   # time(p): *(int64 *)p = now
_alive: dict[int, tuple] = {}   # address of a struct we made -> (its first 8 bytes as made, the capsule, what the struct holds)
_lock = threading.Lock()

def sweep() -> None:
  """Let go of the structs whose consumer called the deleter, and of capsules only _alive holds, still unconsumed."""
  with _lock:
    for addr, (first, cap, *_) in list(_alive.items()):
      marked = c_int64.from_address(addr).value != first
      if marked or (sys.getrefcount(cap) <= 3 and _api.PyCapsule_GetName(cap) in (NAMES[False][0], NAMES[True][0])): del _alive[addr]

def to_capsule(ptr: int, device: tuple[int, int], shape: tuple[int, ...], dtype: DType, owner, versioned: bool, read_only: bool):
  """A capsule describing `shape` C-contiguous elements of dtype at address ptr on device (kDL type, ordinal); owner is
  held until the consumer is done."""
  if dtype not in CODES: raise BufferError(f"DLPack has no type code for {dtype}")
  n = len(shape)
  shp, st = (c_int64 * n)(*shape), (c_int64 * n)(*compact_strides(shape))
  m = DLManagedTensorVersioned() if versioned else DLManagedTensor()
  m.dl_tensor = DLTensor(ptr or None, DLDevice(*device), n, DLDataType(*CODES[dtype], 1), shp, st, 0)
  m.deleter = _MARK
  if versioned: m.version, m.flags = DLPackVersion(*VERSION), READ_ONLY if read_only else 0
  sweep()
  cap = _api.PyCapsule_New(addr := ctypes.addressof(m), NAMES[versioned][0], None)
  with _lock: _alive[addr] = (c_int64.from_address(addr).value, cap, m, shp, st, owner)
  return cap

class Imported:
  """What a consumed capsule says: data address, device, shape, dtype; `release()` (or this object's death) runs the
  producer's deleter once."""
  def __init__(self, capsule):
    sweep()
    versioned = bool(_api.PyCapsule_IsValid(capsule, NAMES[True][0]))
    if not versioned and not _api.PyCapsule_IsValid(capsule, NAMES[False][0]):
      raise BufferError("not an unconsumed DLPack capsule (a capsule can be consumed once)")
    addr = _api.PyCapsule_GetPointer(capsule, NAMES[versioned][0])
    m = (DLManagedTensorVersioned if versioned else DLManagedTensor).from_address(addr)
    if versioned and m.version.major != 1: raise BufferError(f"DLPack {m.version.major}.{m.version.minor} is not understood (1.x is)")
    t = m.dl_tensor
    if (t.dtype.code, t.dtype.bits) not in DTYPES or t.dtype.lanes != 1:
      raise BufferError(f"DLPack type code {t.dtype.code} of {t.dtype.bits} bits x {t.dtype.lanes} has no dtype here")
    if not 0 <= t.ndim <= 64: raise BufferError(f"DLPack tensor of {t.ndim} dims")
    self.dtype, self.device = DTYPES[(t.dtype.code, t.dtype.bits)], (t.device.device_type, t.device.device_id)
    self.shape = tuple(t.shape[i] for i in range(t.ndim))
    if any(s < 0 for s in self.shape): raise BufferError(f"DLPack shape {self.shape}")
    strides = tuple(t.strides[i] for i in range(t.ndim)) if t.strides else compact_strides(self.shape)
    # C-contiguous: the strides of every dim longer than 1 are the compact ones (a dim of 1 may have any stride)
    self.contiguous = all(a == b for a, b, s in zip(strides, compact_strides(self.shape), self.shape) if s > 1)
    self.strides, self.read_only = strides, bool(versioned and m.flags & READ_ONLY)
    self.ptr = (t.data or 0) + t.byte_offset
    _api.PyCapsule_SetName(capsule, NAMES[versioned][1])
    self._release = weakref.finalize(self, _call_deleter, m.deleter, addr) if m.deleter else None
  def release(self) -> None:
    if self._release is not None: self._release()

def compact_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
  """Row-major strides in elements."""
  out, acc = [], 1
  for s in reversed(shape): out.append(acc); acc *= max(s, 1)
  return tuple(reversed(out))

def _call_deleter(deleter, addr: int) -> None: deleter(addr)
