"""fp8 (OCP e4m3fn and e5m2: dtypes.fp8e4m3 and fp8e5m2, tinygrad's names) end to end, differential against numpy
through ml_dtypes (what PyTorch's float8_e4m3fn and float8_e5m2 compute): every bit pattern to and from numpy, casts
with every dtype (round to nearest even, subnormals kept, e4m3 overflow and inf to NaN, e5m2 overflow to inf),
elementwise ops computed in float32 and rounded once, reductions and matmul accumulated in float32, constant folding,
promotion, safetensors, the `uop` dialect text, and the GPU lowering (PTX from ptxas, kernels on the CPU emulator)."""
import pathlib, subprocess, sys, tempfile
import ml_dtypes
import numpy as np
import pytest
from morok_mlir import Tensor
from morok_mlir.core.dtype import dtypes, least_upper_dtype
from morok_mlir.nn.state import safe_load, safe_save

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")   # the numpy references cast NaN, inf and overflows on purpose
F32 = np.float32
FP8 = {dtypes.fp8e4m3: ml_dtypes.float8_e4m3fn, dtypes.fp8e5m2: ml_dtypes.float8_e5m2}
ids = lambda d: d.name
rng = np.random.default_rng(0)

def every(dt) -> np.ndarray: return np.arange(256, dtype=np.uint8).view(FP8[dt])   # every bit pattern
def same(got: np.ndarray, want: np.ndarray):
  """Equal values of equal dtype and shape, signed zeros told apart, NaN equal to any NaN."""
  assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
  g, w = got.astype(np.float64), want.astype(np.float64)
  nan = np.isnan(w)
  bad = (np.isnan(g) != nan) | (~nan & ((g != w) | (np.signbit(g) != np.signbit(w))))
  assert not bad.any(), (got[bad][:8], want[bad][:8])

# float32 edges: signed zeros, each format's largest finite value, the ties just past it (to even: e4m3 464 -> 448,
# e5m2 61440 -> inf), overflow, inf, NaN, subnormal ties (to even), values one f32 ulp off a tie, f32 subnormals
EDGE32 = np.array([0.0, -0.0, 1.0, -1.0, 448, 464, 464.00003, 480, -465, 57344, 61440, 61439.996, 1e5, 3.4e38, np.inf, -np.inf, np.nan,
                   2.0 ** -10, 3 * 2.0 ** -10, 2.0 ** -9, 2.0 ** -7 * 1.5, 2.0 ** -17, 3 * 2.0 ** -17, 2.0 ** -16, 1e-45, -1e-40,
                   1 + 2 ** -4, 1 + 3 * 2 ** -4, 1 + 2 ** -3, 1 + 3 * 2 ** -3, 1 + 2 ** -4 + 2 ** -23, 1 + 2 ** -4 - 2 ** -23, 0.1, 1 / 3], F32)

# ---------------------------------------------------------------- the dtypes and numpy
@pytest.mark.parametrize("dt", list(FP8), ids=ids)
def test_dtype(dt):
  np_t = FP8[dt]
  assert dt.itemsize == 1 and dt.bitsize == 8 and dt.is_float and not dt.is_int and dt in dtypes.floats and dt in dtypes.fp8s
  assert dtypes.from_np(np_t) is dt and dtypes.from_np(np.dtype(np_t)) is dt and dtypes.from_py(np_t(1.0)) is dt and dtypes.from_mlir(dt.mlir) is dt
  assert dt.finfo.max == float(ml_dtypes.finfo(np_t).max) == {dtypes.fp8e4m3: 448.0, dtypes.fp8e5m2: 57344.0}[dt]
  assert dt.fbits == {dtypes.fp8e4m3: (4, 4), dtypes.fp8e5m2: (5, 3)}[dt] and dt.min == -np.inf and dt.max == np.inf
  assert (dtypes.float8_e4m3fn, dtypes.float8_e5m2) == (dtypes.fp8e4m3, dtypes.fp8e5m2) and getattr(dtypes, dt.name) is dt

@pytest.mark.parametrize("dt", list(FP8), ids=ids)
def test_numpy_round_trip(dt):
  x = every(dt)
  got = Tensor(x).numpy()
  assert Tensor(x).dtype is dt and got.dtype == np.dtype(FP8[dt]) and np.array_equal(got.view(np.uint8), x.view(np.uint8))   # NaN payloads too
  same(Tensor(x[::-2].reshape(8, -1)[:, 1::3]).numpy(), x[::-2].reshape(8, -1)[:, 1::3])   # strided input
  e = Tensor(np.zeros((0, 3), FP8[dt]))
  assert e.numpy().shape == (0, 3) and e.numpy().dtype == np.dtype(FP8[dt]) and float(e.sum().numpy()) == 0.0

@pytest.mark.parametrize("dt", list(FP8), ids=ids)
def test_from_python(dt):
  vals = [-1, 1, 2.5, 0.1, 1e-3, 1e9, float("inf"), -0.0, float("nan")]
  same(Tensor(vals, dtype=dt).numpy(), np.array(vals, np.float64).astype(FP8[dt]))
  t = Tensor([[1.5, -0.0], [3.0, 1e-3]], dtype=dt.name)
  assert t.tolist() == [[1.5, -0.0], [3.0, float(FP8[dt](1e-3))]] and isinstance(t.tolist()[0][0], float)
  assert Tensor(FP8[dt](3.5)).dtype is dt and Tensor(FP8[dt](3.5)).item() == 3.5
  assert Tensor.full((2, 2), 1.5, dtype=dt).numpy().dtype == np.dtype(FP8[dt]) and np.isnan(Tensor.full((2,), float("nan"), dtype=dt).numpy()).all()

# ---------------------------------------------------------------- casts
OTHERS = [d for d in dtypes.all if d not in FP8]

@pytest.mark.parametrize("dt", list(FP8), ids=ids)
@pytest.mark.parametrize("src", OTHERS + list(FP8), ids=ids)
def test_cast_to_fp8(src, dt):
  """Every dtype's edge values to fp8 as ml_dtypes rounds them (float64 and ints through float32, as ml_dtypes does)."""
  if src.is_float:
    x = np.concatenate([EDGE32.astype(src.np), (rng.standard_normal(500) * 10.0 ** rng.integers(-7, 6, 500)).astype(F32).astype(src.np)])
  elif src.is_bool: x = np.array([True, False, True])
  else:
    info = np.iinfo(src.np)
    edge = [v for v in (info.min, info.max, 0, 1, -1, 7, 9, 17, 19, 255, 447, 449, 465, 57343, 61441, 2 ** 31 + 1) if info.min <= v <= info.max]
    x = np.concatenate([np.array(edge, src.np), rng.integers(max(info.min, -1000), min(info.max, 1000), 200, dtype=src.np, endpoint=True)])
  with np.errstate(all="ignore"): want = x.astype(F32).astype(FP8[dt]) if not src.is_float else x.astype(FP8[dt])
  same(Tensor(x).cast(dt).numpy(), want)

def test_cast_rounding_bits():
  """Ties to even (down and up) in the normal and the subnormal range, and each format's saturation, as bit patterns."""
  x = np.array([1 + 2 ** -4, 1 + 3 * 2 ** -4, 2.0 ** -10, 3 * 2.0 ** -10, 448, 464, 465, np.inf, -np.inf, np.nan, -1e-45], F32)
  assert list(Tensor(x).cast(dtypes.fp8e4m3).numpy().view(np.uint8)) == [0x38, 0x3A, 0x00, 0x02, 0x7E, 0x7E, 0x7F, 0x7F, 0xFF, 0x7F, 0x80]
  y = np.array([1 + 2 ** -3, 1 + 3 * 2 ** -3, 2.0 ** -17, 3 * 2.0 ** -17, 57344, 61439, 61440, np.inf, -np.inf, -1e-45], F32)
  assert list(Tensor(y).cast(dtypes.fp8e5m2).numpy().view(np.uint8)) == [0x3C, 0x3E, 0x00, 0x02, 0x7B, 0x7B, 0x7C, 0x7C, 0xFC, 0x80]

@pytest.mark.parametrize("dt", list(FP8), ids=ids)
@pytest.mark.parametrize("dst", OTHERS + list(FP8), ids=ids)
def test_cast_from_fp8(dt, dst):
  """Every fp8 bit pattern to every dtype: exact widening to floats (float16 and bfloat16 hold every fp8 value),
  bool is != 0 (NaN is true), ints truncate toward zero where the value fits (float32's cast elsewhere)."""
  from test_bfloat16 import check_cast_from
  check_cast_from(x := every(dt), dst)
  if not (dst.is_float or dst.is_bool):   # ints out of range: what float32's cast gives
    assert np.array_equal(Tensor(x).cast(dst).numpy(), Tensor(x.astype(F32)).cast(dst).numpy())

def test_bitcast():
  for dt in FP8:
    x = every(dt)
    assert np.array_equal(Tensor(x).bitcast(dtypes.uint8).numpy(), x.view(np.uint8))
    assert np.array_equal(Tensor(x.view(np.int8)).bitcast(dt).numpy().view(np.uint8), x.view(np.uint8))
    assert np.array_equal(Tensor(x.reshape(64, 4)).bitcast(dtypes.uint32).numpy(), x.reshape(64, 4).view(np.uint32))   # 4 fp8s per item

# ---------------------------------------------------------------- arithmetic in float32, rounded once
def ref(dt, fn, *xs) -> np.ndarray:
  with np.errstate(all="ignore"): return np.asarray(fn(*(np.asarray(x).astype(F32) for x in xs))).astype(FP8[dt])

@pytest.mark.parametrize("dt", list(FP8), ids=ids)
@pytest.mark.parametrize("name,fn,npfn", [
  ("add", lambda a, b: a + b, np.add), ("sub", lambda a, b: a - b, np.subtract), ("mul", lambda a, b: a * b, np.multiply),
  ("div", lambda a, b: a / b, np.divide), ("max", lambda a, b: a.maximum(b), np.maximum), ("neg", lambda a, b: -a, lambda a, b: -a),
  ("sqrt", lambda a, b: a.sqrt(), lambda a, b: np.sqrt(a)), ("where", lambda a, b: (a > b).where(a, b), lambda a, b: np.where(a > b, a, b))])
def test_elementwise(dt, name, fn, npfn):
  a, b = every(dt), every(dt)[rng.permutation(256)]
  same(fn(Tensor(a), Tensor(b)).numpy(), ref(dt, npfn, a, b))

@pytest.mark.parametrize("dt", list(FP8), ids=ids)
def test_constants_fold_as_kernels_compute(dt):
  """A Python scalar becomes an fp8 constant (tinygrad's); an op folded in Python (both operands constant) rounds as
  the kernel's float32 op does."""
  c = float(FP8[dt](0.1))
  same((Tensor(every(dt)) * 0.1).numpy(), ref(dt, lambda x: x * F32(c), every(dt)))
  for v in (1.5, 3.0, -0.75):
    assert (Tensor(v, dtype=dt) * 0.1).numpy() == (Tensor([v], dtype=dt) * 0.1).numpy()[0] == ref(dt, lambda x: x * F32(c), np.array([v]))[0]
  assert (Tensor(every(dt)) + 1).dtype is dt

@pytest.mark.parametrize("dt", list(FP8), ids=ids)
def test_reductions_and_matmul(dt):
  """Accumulated in float32 and rounded once: on small integers (exact in float32) equal to numpy's sums rounded."""
  x = rng.integers(-3, 4, (12, 40)).astype(F32).astype(FP8[dt])
  for axis in (None, 0, 1):
    same(Tensor(x).sum(axis).numpy(), x.astype(F32).sum(axis=axis).astype(FP8[dt]))
    same(Tensor(x).max(axis).numpy(), x.astype(F32).max(axis=axis).astype(FP8[dt]))
  assert float(Tensor(np.ones(300, FP8[dt])).sum().numpy()) == float(FP8[dt](300))   # an fp8 accumulator would stop at 16 or 32
  w = rng.integers(-2, 3, (40, 7)).astype(F32).astype(FP8[dt])
  same((Tensor(x) @ Tensor(w)).numpy(), (x.astype(F32) @ w.astype(F32)).astype(FP8[dt]))
  a, b = (rng.integers(-2, 3, s).astype(F32).astype(FP8[dt]) for s in ((64, 256), (256, 128)))   # the packed micro-kernel's sizes
  same((Tensor(a) @ Tensor(b)).numpy(), (a.astype(F32) @ b.astype(F32)).astype(FP8[dt]))
  got = Tensor(x).softmax(1).numpy()
  assert got.dtype == np.dtype(FP8[dt]) and np.allclose(got.astype(F32).sum(1), 1, atol=0.2)

# ---------------------------------------------------------------- promotion, files, the dialect
@pytest.mark.parametrize("a,b,want", [(dtypes.fp8e4m3, dtypes.int32, dtypes.fp8e4m3), (dtypes.fp8e5m2, dtypes.bool, dtypes.fp8e5m2),
                                      (dtypes.fp8e4m3, dtypes.fp8e5m2, dtypes.float16), (dtypes.fp8e4m3, dtypes.bfloat16, dtypes.bfloat16),
                                      (dtypes.fp8e5m2, dtypes.float32, dtypes.float32), (dtypes.uint64, dtypes.fp8e5m2, dtypes.fp8e5m2),
                                      (dtypes.int64, dtypes.uint64, dtypes.float16)], ids=str)
def test_promotion(a, b, want):
  assert least_upper_dtype(a, b) is want and least_upper_dtype(b, a) is want
  x, y = Tensor(np.array([1, 2]).astype(a.np)), Tensor(np.array([3, 0]).astype(b.np))
  assert (x + y).dtype is want and (x + y).tolist() == list(np.array([1, 2]).astype(a.np).astype(float) + np.array([3, 0]).astype(b.np).astype(float))

def test_safetensors_round_trip():
  t = {"a": Tensor(every(dtypes.fp8e4m3)), "b": Tensor(every(dtypes.fp8e5m2).reshape(16, 16))}
  with tempfile.TemporaryDirectory() as d:
    safe_save(t, fn := str(pathlib.Path(d) / "m.safetensors"))
    back = safe_load(fn)
  for k in t: assert back[k].dtype is t[k].dtype and np.array_equal(back[k].numpy().view(np.uint8), t[k].numpy().view(np.uint8))

def test_uop_dialect_round_trip():
  """fp8 tensor types are element types of the dialect: morok-opt prints what it parsed and lowers them to f32 compute."""
  src = ('func.func @f(%a: tensor<4xf8E4M3FN>, %b: tensor<4xf8E5M2>) -> tensor<4xf32> {\n'
         '  %0 = "uop.const"() {value = 1.5 : f8E4M3FN} : () -> tensor<4xf8E4M3FN>\n'
         '  %1 = "uop.mul"(%a, %0) : (tensor<4xf8E4M3FN>, tensor<4xf8E4M3FN>) -> tensor<4xf8E4M3FN>\n'
         '  %2 = "uop.cast"(%1) : (tensor<4xf8E4M3FN>) -> tensor<4xf32>\n'
         '  %3 = "uop.cast"(%b) : (tensor<4xf8E5M2>) -> tensor<4xf32>\n'
         '  %4 = "uop.add"(%2, %3) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n'
         '  return %4 : tensor<4xf32>\n}\n')
  from test_bfloat16 import morok_opt_round_trip
  once, low = morok_opt_round_trip(src)
  assert "tensor<4xf8E4M3FN>" in once and "1.500000e+00 : f8E4M3FN" in once
  assert "memref<4xf8E4M3FN>" in low and "memref<4xf8E5M2>" in low

# ---------------------------------------------------------------- the GPU lowering, without a GPU
def _kernels(t: Tensor) -> list:
  from morok_mlir.ir.emit import normalize, graph_func
  from morok_mlir.ir.pipeline import lower_to_kernels
  return [f for f in lower_to_kernels(graph_func(normalize([t.lazydata])[0])) if "uop.kernel" in f.attrs]

X8 = rng.standard_normal((37, 64)).astype(F32)
GPU_CASES = {"cast": lambda: Tensor(X8 * 100).cast(dtypes.fp8e4m3).cast(dtypes.float32) + Tensor(X8 * 1e4).cast(dtypes.fp8e5m2).cast(dtypes.float32),
             "elementwise": lambda: (Tensor(X8).cast(dtypes.fp8e5m2) * 3 + 1).sqrt(), "rowsum": lambda: Tensor(X8).cast(dtypes.fp8e4m3).sum(1)}

@pytest.mark.parametrize("name", list(GPU_CASES))
def test_gpu_ptx_and_emulator(name):
  """uop-lower-gpu's fp8 kernels: PTX that ptxas assembles for sm_90, and the kernels run on the CPU emulator equal the
  CPU backend's results bit for bit."""
  from morok_mlir.codegen.lower_gpu import lower_module
  from morok_mlir.device.ptx import ptx_for, ptxas, ptxas_path, kernel_names
  from morok_mlir.device.gpu_emulator import emulate
  t = GPU_CASES[name]()
  ks = _kernels(t)
  if ptxas_path() is None: pytest.fail("ptxas is a test dependency (nvidia-cuda-nvcc-cu12)")
  ptx = ptx_for(lower_module(ks), "sm_90")
  assert sorted(ptxas(ptx, "sm_90")) == sorted(kernel_names(ptx)) == sorted(k.name for k in ks)
  got, want = emulate([t.lazydata])[0], t.numpy()
  same(got, want)
