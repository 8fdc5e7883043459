"""Buffer: `size` elements of `dtype` in one device's memory (tinygrad's Buffer, the buffer of Morok's device.rs).

  Buffer(device, size, dtype, base=None, offset=0)   nothing is allocated until allocate() (or a copy into it)
  buf.allocate(opaque=None) -> buf                    memory from the device's allocator, or `opaque`, a handle it made
  buf.copyin(arr) / buf.copyout(out=None) -> arr      host <-> device, whole buffer; copyout makes `out` when not given
  buf.numpy()                                         host devices: the memory itself (no copy); others: a copy
  buf.as_numpy()                                      host devices only: the flat numpy array over the memory
  buf.view(size, dtype, offset) -> Buffer             a Buffer in the same memory, `offset` in bytes (tinygrad's unit)
  buf.head(size) -> Buffer                            view(size, buf.dtype, 0) of an allocated buffer, unchecked (hot paths)
  buf.copy_to(device) -> Buffer                       a new allocated Buffer on device with the same contents
  buf.ptr                                             the device address of element 0 (an int), once allocated

Every device's allocator has one interface: alloc(size, dtype) -> handle, free(handle), copyin(handle, arr),
copyout(arr, handle), copy(dst, src), offset(handle, nbytes, size, dtype) -> handle of a view, ptr(handle) -> int, and
host allocators as_numpy(handle). A handle returns its memory to the allocator's pool when it dies (or at free()), so
a Buffer needs no finalizer: the memory goes back when the last Buffer (views hold their base) and, on the CPU, the
last numpy array over it are gone. Buffers are safe to share between threads; the allocators lock their pools."""
from __future__ import annotations
import threading
from sys import getrefcount
from weakref import getweakrefcount
import numpy as np
from morok_mlir.core.dtype import DType, to_dtype
from morok_mlir.device import Device

_lock = threading.Lock()   # a lazy allocate() from two threads allocates once

class Buffer:
  __slots__ = ("device", "size", "dtype", "base", "offset", "allocator", "_buf", "ptr", "__weakref__")
  def __init__(self, device: str, size: int, dtype: DType, base: Buffer | None = None, offset: int = 0):
    dev = Device[device]
    self.device, self.allocator, self.size, self.dtype = dev.name, dev.allocator, size, dtype if type(dtype) is DType else to_dtype(dtype)
    self.base, self.offset, self._buf, self.ptr = base, offset, None, 0
    if base is not None:
      if base.base is not None: raise ValueError("a view's base must not be a view")
      if base.device != self.device: raise ValueError(f"a view on {self.device} of a {base.device} buffer")
      if offset < 0 or offset + self.nbytes > base.nbytes: raise ValueError(f"view of {self.nbytes} bytes at {offset} outside {base.nbytes}")
  @classmethod
  def fresh(cls, device: str, size: int, dtype: DType, opaque=None) -> Buffer:
    """Buffer(device, size, dtype).allocate(opaque) for a hot path (a TinyJit replay's outputs): device a canonical
    name, dtype a DType, no view; no lock, as no other thread sees the Buffer yet."""
    b = object.__new__(cls)
    b.device, b.allocator, b.size, b.dtype, b.base, b.offset = device, (a := Device[device].allocator), size, dtype, None, 0
    b._buf = h = a.alloc(size, dtype) if opaque is None else opaque
    b.ptr = a.ptr(h)
    return b
  @property
  def nbytes(self) -> int: return self.size * self.dtype.itemsize
  @property
  def is_allocated(self) -> bool: return self._buf is not None
  def __repr__(self) -> str:
    return f"<Buffer {self.device} {self.dtype.name}[{self.size}]{f' view at {self.offset}' if self.base is not None else ''}" \
           f"{'' if self._buf is not None else ' unallocated'}>"

  def allocate(self, opaque=None) -> Buffer:
    if self._buf is not None: return self
    if self.base is not None: self.base.allocate()
    with _lock:
      if self._buf is None:
        if self.base is not None: h = self.allocator.offset(self.base._buf, self.offset, self.size, self.dtype)
        else: h = opaque if opaque is not None else self.allocator.alloc(self.size, self.dtype)
        self.ptr, self._buf = self.allocator.ptr(h), h
    return self
  def deallocate(self) -> None:
    """Give the memory back now (the caller promises nothing reads it again); a view only lets go of its base."""
    if self._buf is not None and self.base is None: self.allocator.free(self._buf)
    self._buf, self.ptr = None, 0

  def copyin(self, arr: np.ndarray) -> Buffer:
    """Fill the buffer from a host array of the same byte size (any shape; it is read as raw bytes in C order)."""
    self.allocate().allocator.copyin(self._buf, self._host(arr))
    return self
  def copyout(self, out: np.ndarray | None = None) -> np.ndarray:
    """The contents in a new flat array of dtype, or written into `out` (a C-contiguous array of the same byte size)."""
    self.allocate().allocator.copyout(ret := np.empty(self.size, self.dtype.np) if out is None else self._host(out), self._buf)
    return ret if out is None else out
  def _host(self, arr: np.ndarray) -> np.ndarray:
    if type(arr) is not np.ndarray or not arr.flags.c_contiguous or arr.nbytes != self.nbytes:
      raise ValueError(f"{self!r}: need a C-contiguous array of {self.nbytes} bytes, got {getattr(arr, 'nbytes', type(arr).__name__)}")
    return arr.reshape(-1).view(self.dtype.np) if arr.dtype != self.dtype.npdt else arr.reshape(-1)
  def as_numpy(self) -> np.ndarray:
    if (f := getattr(self.allocator, "as_numpy", None)) is None: raise TypeError(f"{self.device} memory is not host memory: use copyout()")
    return f(self.allocate()._buf)
  def numpy(self) -> np.ndarray:
    return self.as_numpy() if hasattr(self.allocator, "as_numpy") else self.copyout()
  def view(self, size: int, dtype: DType, offset: int) -> Buffer:
    """`size` elements of `dtype` starting `offset` bytes into this buffer (a view of a view is one of the base);
    allocated when this buffer is."""
    base, off = (self, offset) if self.base is None else (self.base, self.offset + offset)
    v = Buffer(self.device, size, dtype, base, off)
    return v.allocate() if self._buf is not None else v
  def head(self, size: int) -> Buffer:
    """view(size, self.dtype, 0) of an allocated buffer that is no view, for a hot path (a TinyJit replay's outputs of
    symbolic size): no checks, no lock, as no other thread sees the view yet."""
    v = object.__new__(Buffer)
    v.device, v.allocator, v.size, v.dtype, v.base, v.offset, v.ptr = self.device, self.allocator, size, self.dtype, self, 0, self.ptr
    v._buf = self.allocator.offset(self._buf, 0, size, self.dtype)
    return v
  def copy_to(self, device: str) -> Buffer:
    """A new buffer on device holding these contents: one device-to-device copy, or one host <-> device transfer."""
    dst = Buffer(device, self.size, self.dtype).allocate()
    if dst.allocator is self.allocator: dst.allocator.copy(dst._buf, self.allocate()._buf)
    elif hasattr(dst.allocator, "as_numpy"): self.copyout(dst.as_numpy())
    elif hasattr(self.allocator, "as_numpy"): dst.copyin(self.as_numpy())
    else: dst.copyin(self.copyout())   # between two devices without a direct path: through the host
    return dst

class Ring:
  """The last two Buffers a call site made for its results, each handed out again once nothing references it any more
  (a loop's `y = f(x)` drops the one from two calls back: nothing can read it again), as making a Buffer costs what a
  small call's own work does (a TinyJit replay's kernel, a small allreduce). new() makes one; the caller locks."""
  __slots__ = ("bufs", "turn", "new")
  def __init__(self, new): self.bufs, self.turn, self.new = [None, None], 0, new
  def take(self) -> Buffer:
    b = (bufs := self.bufs)[t := self.turn]; self.turn = t ^ 1
    # 3 references to b (the ring's, b, getrefcount's), 2 to its array (b's, getrefcount's) and 2 to the array that
    # array views (numpy makes a view of a view a view of that one), and no weak one (a copy on another device)
    if b is None or getrefcount(b) != 3 or getrefcount(b._buf) != 2 or type(b._buf.base) is np.ndarray and getrefcount(b._buf.base) != 2 \
       or getweakrefcount(b): b = bufs[t] = self.new()
    return b
