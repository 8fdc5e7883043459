"""Buffer on the CPU: lazy allocation, copies, views, zero-copy host access, memory back to the pool, threads. The same
on a fake CUDA driver is in test_cuda.py."""
import gc, sys, threading
import numpy as np, pytest
from morok_mlir import Tensor, dtypes
from morok_mlir.device import Device
from morok_mlir.device.buffer import Buffer
from morok_mlir.realize import new_buffer

def test_lazy_allocation_and_copies():
  b = Buffer("cpu", 6, dtypes.int32)
  assert b.device == "CPU" and b.nbytes == 24 and not b.is_allocated and b.ptr == 0
  b.copyin(np.arange(6, dtype=np.int32).reshape(2, 3))
  assert b.is_allocated and b.ptr == b.as_numpy().ctypes.data
  out = b.copyout()
  assert out.tolist() == list(range(6)) and not np.shares_memory(out, b.as_numpy())
  assert np.shares_memory(b.numpy(), b.as_numpy())               # host memory: numpy() is the memory itself
  into = np.zeros(6, np.int32)
  assert b.copyout(into) is into and into.tolist() == list(range(6))
  with pytest.raises(ValueError, match="24 bytes"): b.copyin(np.zeros(5, np.int32))
  with pytest.raises(ValueError, match="24 bytes"): b.copyout(np.zeros(7, np.int32))

def test_views_share_memory_at_byte_offsets():
  b = Buffer("CPU", 8, dtypes.float32).allocate()
  b.copyin(np.arange(8, dtype=np.float32))
  v = b.view(4, dtypes.float32, 8)                              # bytes 8..24: elements 2..5
  assert v.is_allocated and v.base is b and v.ptr == b.ptr + 8 and v.numpy().tolist() == [2, 3, 4, 5]
  w = v.view(2, dtypes.int32, 4)                                # a view of a view is a view of the base, at 12
  assert w.base is b and w.offset == 12 and w.numpy().view(np.float32).tolist() == [3, 4]
  v.copyin(np.zeros(4, np.float32))
  assert b.numpy().tolist() == [0, 1, 0, 0, 0, 0, 6, 7]
  lazy = Buffer("CPU", 4, dtypes.uint8).view(2, dtypes.uint8, 1)
  assert not lazy.is_allocated and lazy.allocate().base.is_allocated
  with pytest.raises(ValueError, match="outside"): b.view(8, dtypes.float32, 4)
  for h in (b.head(3), b.view(3, dtypes.float32, 0)):            # at 0, of the base's dtype (a TinyJit replay's outputs)
    assert h.base is b and h.ptr == b.ptr and h.numpy().tolist() == [0, 1, 0] and np.shares_memory(h.numpy(), b.numpy())
  assert b.view(2, dtypes.int32, 0).numpy().view(np.float32).tolist() == [0, 1]   # at 0, of another dtype

def test_copy_to_the_same_device():
  b = Buffer("CPU", 3, dtypes.float64).copyin(np.array([1.0, 2.0, 3.0]))
  c = b.copy_to("CPU")
  assert c is not b and c.numpy().tolist() == [1, 2, 3] and not np.shares_memory(c.numpy(), b.numpy())

def test_graph_inputs_are_buffers_without_copies():
  a = np.arange(12, dtype=np.float32)
  u = new_buffer(a)
  assert u.buffer.ptr == a.ctypes.data and not a.flags.writeable   # a native C-contiguous array is used in place
  assert new_buffer(np.arange(3, dtype=">i4")).buffer.numpy().tolist() == [0, 1, 2]   # made native
  t = (Tensor(np.ones(4, np.float32)) + 1).realize()
  b = t.uop.buffer
  assert b.device == "CPU" and not b.numpy().flags.writeable and np.shares_memory(b.numpy(), b.as_numpy())
  out = t.numpy()
  assert out.flags.writeable and out.tolist() == [2, 2, 2, 2] and not np.shares_memory(out, b.numpy())

def test_memory_back_to_the_pool_cpu():
  """A realized tensor's block goes back to the allocator's pool when the last tensor using it dies."""
  alloc = Device["CPU"].allocator
  n = alloc.SMALL // 4                                          # big enough to be pooled
  x = Tensor(np.ones(n, np.float32))
  y = (x + 1).realize()
  ptr = y.uop.buffer.ptr
  assert ptr in alloc.live
  z = Tensor(y.uop)                                             # a second tensor on the same buffer keeps it
  del y; gc.collect()
  assert ptr in alloc.live
  del z; gc.collect()
  pooled = {blk.ctypes.data for blk in alloc.pool.get(alloc.SMALL, [])}
  assert ptr not in alloc.live and ptr in pooled
  # handed out again: a pooled block, not a new one (which one: the collection above may have pooled blocks of this size
  # that earlier tests' graphs held, after this one)
  assert (x + 2).realize().uop.buffer.ptr in pooled

def test_lazy_allocate_from_threads():
  old = sys.getswitchinterval()
  sys.setswitchinterval(1e-6)
  try:
    for _ in range(200):
      b, ptrs = Buffer("CPU", 20000, dtypes.float32), []
      ts = [threading.Thread(target=lambda: ptrs.append(b.allocate().ptr)) for _ in range(4)]
      for t in ts: t.start()
      for t in ts: t.join()
      assert len(set(ptrs)) == 1 and ptrs[0] == b.ptr
  finally: sys.setswitchinterval(old)

def test_input_buffer_is_the_nodes_slot():
  """A graph input's Buffer is the `buffer` slot of its node (not hidden state); every other node has None there."""
  t = Tensor(np.arange(3, dtype=np.float32))
  u, y = t.uop, (t + 1).uop
  assert u.buffer is not None and u.buffer.numpy().tolist() == [0, 1, 2] and "buffer" not in u.__dict__
  assert y.buffer is None and (t + 1).realize().uop.buffer.numpy().tolist() == [1, 2, 3]

def test_large_blocks_serve_nearby_sizes():
  """A large block (a mapping of its own, whose unwritten pages take no memory) serves later requests down to 1/FIT of
  its size; one made anew replaces the pooled blocks it could serve, so two schedules whose arenas differ a little
  (an LLM's first layer and the others) pool one block, not two."""
  from morok_mlir.device.cpu import CPUAllocator
  al, mb = CPUAllocator(), 1 << 20
  a = al.alloc(8 * mb, dtypes.uint8); del a; gc.collect()
  assert al.pooled == 8 * mb
  b = al.alloc(9 * mb, dtypes.uint8)                    # larger: a block of its own, the pooled 8 MiB one given back
  assert al.pooled == 0 and b.nbytes == 9 * mb and al.ptr(b) % al.HUGE == 0   # (from a huge page's boundary)
  b[:] = 7; pb = al.ptr(b); del b; gc.collect()
  c = al.alloc(8 * mb, dtypes.uint8)
  assert al.ptr(c) == pb and c.nbytes == 8 * mb and al.used == 9 * mb and al.pooled == 0   # the 9 MiB block, serving 8
  del c; gc.collect()
  assert al.used == 0 and al.pooled == 9 * mb
  d = al.alloc(4 * mb, dtypes.uint8)                    # more than FIT times smaller than the pooled block: its own
  assert al.ptr(d) != pb and d.nbytes == 4 * mb and al.pooled == 9 * mb

def test_lasting_blocks_share_huge_page_slabs():
  """Lasting blocks (a weight's kept panels) under HUGE bytes are carved one after another from 2 MiB-aligned slabs
  asked for as huge pages: small and mid-sized ones share a slab, each 64-byte aligned; one that does not fit a slab's
  tail opens another; a dead one goes back to the pool by its size and serves the next request of that size; a slab's
  memory goes when its last block, live or pooled, does."""
  import mmap, weakref
  from morok_mlir.device.cpu import CPUAllocator
  al = CPUAllocator()
  a, b = al.alloc(5000, dtypes.float32, lasting=True), al.alloc(300 << 10, dtypes.uint8, lasting=True)
  pa, pb = al.ptr(a), al.ptr(b)
  assert pa % al.ALIGN == 0 and pb % al.ALIGN == 0 and pa // al.HUGE == pb // al.HUGE and pb >= pa + a.nbytes
  c = al.alloc(1800 << 10, dtypes.uint8, lasting=True)   # past the first slab's tail: a second one
  assert al.ptr(c) // al.HUGE != pa // al.HUGE and al.ptr(c) % al.HUGE == 0
  a[:], b[:], c[:] = 1, 2, 3
  assert a.sum() == 5000 and b.sum() == 2 * (300 << 10) and int(c.sum()) == 3 * (1800 << 10)
  del b; gc.collect()
  assert al.ptr(al.alloc(300 << 10, dtypes.uint8)) == pb   # (from the pool: any request of its size)
  m = c
  while not isinstance(m, mmap.mmap): m = m.obj if isinstance(m, memoryview) else m.base   # (the slab's mapping)
  slab = weakref.ref(m); del m
  al.trim(); gc.collect()
  assert slab() is not None   # (c lives)
  del c; gc.collect()
  assert slab() is not None   # (c's block pooled)
  al.trim(); gc.collect()
  assert slab() is None

def test_kept_panels_are_lasting():
  """A contraction's weight panels kept across calls are lasting blocks, carved from a huge-page slab."""
  import mmap
  import morok_mlir.realize as R
  al = Device["CPU"].allocator
  al.trim()   # (no pooled block of the panels' size from an earlier test)
  r = np.random.default_rng(0)
  w = Tensor(r.standard_normal((300, 200), dtype=np.float32)).realize()
  x = Tensor(r.standard_normal((256, 300), dtype=np.float32))
  np.testing.assert_allclose((x @ w).numpy(), x.numpy() @ w.numpy(), rtol=1e-4, atol=1e-4)
  kept = [a for s in R._schedule_cache.values() for it in s.items for u, d in getattr(it.program, "_kept", {}).items() for a in d.values()
          if u is w.uop]
  assert kept, "the weight's panels are kept"
  for a in kept:
    m = a
    while m is not None and not isinstance(m, mmap.mmap): m = m.obj if isinstance(m, memoryview) else m.base
    assert isinstance(m, mmap.mmap) and len(m) == 2 * al.HUGE, "carved from a slab"
