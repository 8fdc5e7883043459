"""gather: a data-dependent index, read through the loaded indices (O(output) reads), differential against numpy."""
import sys
import numpy as np, pytest
from morok_mlir import Tensor, dtypes, Variable
from morok_mlir.realize import GlobalCounters

def ref(a, dim, idx):
  """numpy's take_along_axis, with tinygrad's rule for an index outside the axis: 0."""
  ok = (idx >= 0) & (idx < a.shape[dim])
  a = a[tuple(slice(None) if d == dim else slice(0, n) for d, n in enumerate(idx.shape))]   # the index's extent, as PyTorch reads
  return np.where(ok, np.take_along_axis(a, np.where(ok, idx, 0), dim), np.zeros((), a.dtype))

@pytest.mark.parametrize("dt", [np.float32, np.int32, np.bool_, np.float16])
@pytest.mark.parametrize("idt", [np.int32, np.int64, np.uint8, np.int8])
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather_matches_numpy(dt, idt, dim):
  rng = np.random.default_rng(0)
  a = (rng.standard_normal((6, 5)) * 10).astype(dt)
  idx = rng.integers(-2, 8, (4, 3)).astype(idt) if np.issubdtype(idt, np.signedinteger) else rng.integers(0, 8, (4, 3)).astype(idt)
  got = Tensor(a).gather(dim, Tensor(idx)).numpy()
  np.testing.assert_array_equal(got, ref(a, dim % 2, idx.astype(np.int64)))

def test_out_of_range_gives_zero_also_for_expressions():
  a, idx = np.arange(12, dtype=np.float32).reshape(4, 3), np.array([[5, -1, 2]], np.int32)
  got = (Tensor(a) * 2 + 1).gather(0, Tensor(idx)).numpy()     # the expression would give 1 at a gated-off 0
  np.testing.assert_array_equal(got, [[0, 0, 2 * a[2, 2] + 1]])

def test_non_contiguous_source_and_index():
  a, idx = np.arange(24, dtype=np.int32).reshape(4, 6), np.array([[0, 3, 1, 2], [3, 3, 0, 1], [2, 0, 0, 3]], np.int64)
  got = Tensor(a).T.gather(1, Tensor(idx).T).numpy()          # (6, 4) source, (4, 3) index
  np.testing.assert_array_equal(got, ref(a.T, 1, idx.T))

def test_embedding_lookup_is_one_kernel_reading_through_indices():
  rng = np.random.default_rng(1)
  table, ids = rng.standard_normal((1000, 16)).astype(np.float32), rng.integers(0, 1000, (3, 7)).astype(np.int32)
  T, I = Tensor(table), Tensor(ids)
  emb = T.gather(0, I.reshape(-1, 1).expand(-1, 16)).reshape(3, 7, 16)
  GlobalCounters.reset()
  np.testing.assert_array_equal(emb.numpy(), table[ids])
  assert GlobalCounters.kernel_count == 1

@pytest.mark.parametrize("width", [1, 7, 64])
def test_row_gather_out_of_range_rows_are_zero(width):
  """A row gather clamps the row base once per row (see lower_cpu.gated_base): indices far outside the table, both
  signs, still read inside the buffer and give 0 rows."""
  rng = np.random.default_rng(2)
  table = rng.standard_normal((50, width)).astype(np.float32)
  ids = np.array([0, 49, 50, -1, -50, 2**31 - 1, -2**31, 17], np.int32)
  got = Tensor(table).gather(0, Tensor(ids).reshape(-1, 1).expand(-1, width)).numpy()
  np.testing.assert_array_equal(got, ref(table, 0, np.broadcast_to(ids.astype(np.int64)[:, None], (8, width))))

def test_row_gather_clamps_outside_the_row_loop():
  """The innermost loop of a row gather addresses base + j: no per-element address select (LLVM vectorizes the copy)."""
  from morok_mlir import realize as R
  T, I = Tensor(np.arange(3200, dtype=np.float32).reshape(100, 32)), Tensor(np.array([3, 140, -7, 99], np.int32))
  R._schedule_cache.clear()
  got = T.gather(0, I.reshape(-1, 1).expand(-1, 32)).numpy()
  np.testing.assert_array_equal(got[[0, 3]], np.arange(3200, dtype=np.float32).reshape(100, 32)[[3, 99]])
  assert not got[[1, 2]].any()
  (src,) = [it.program.spec.src for s in R._schedule_cache.values() for it in s.items]
  inner = src[src.rindex("scf.for"):]
  assert "memref.load" in inner and not any("arith.select" in l and l.endswith(": index") for l in inner.splitlines())

def test_empty_and_errors():
  a = Tensor(np.ones((3, 2), np.float32))
  assert a.gather(0, Tensor(np.zeros((0, 2), np.int32))).numpy().shape == (0, 2)
  line = sys._getframe().f_lineno + 1
  with pytest.raises(TypeError, match=rf"test_gather.py:{line}:\d+: gather needs an integer index"): a.gather(0, a)
  with pytest.raises(TypeError, match="got a ndarray of int32"): a.gather(0, np.zeros((1, 2), np.int32))   # a Tensor, as PyTorch
  with pytest.raises(ValueError, match="rank"): a.gather(0, Tensor(np.zeros(2, np.int32)))
  with pytest.raises(ValueError, match="larger than"): a.gather(0, Tensor(np.zeros((2, 3), np.int32)))
  with pytest.raises(IndexError): a.gather(2, Tensor(np.zeros((2, 2), np.int32)))
  with pytest.raises(TypeError, match="static"): a.reshape(Variable("n", 1, 8).bind(3), 2).gather(0, Tensor(np.zeros((1, 2), np.int32)))

def test_uop_gather_builds_the_same_node():
  a, i = Tensor(np.ones((3, 2), np.float32)), Tensor(np.zeros((2, 2), np.int32))
  assert a.uop.gather(0, i.uop) is a.gather(0, i).uop

def test_gather_through_the_gpu_lowering():
  from morok_mlir.device.gpu_emulator import emulate
  a, idx = np.arange(15, dtype=np.float32).reshape(5, 3), np.array([[4, 0, 2], [1, 7, -3]], np.int32)
  got, = emulate([Tensor(a).gather(0, Tensor(idx)).uop])
  np.testing.assert_array_equal(got, ref(a, 0, idx.astype(np.int64)))
