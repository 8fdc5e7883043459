"""bfloat16 end to end, differential against numpy computing in float32 and rounding through ml_dtypes.bfloat16 (what
PyTorch's CPU kernels compute): creation, casts with every dtype, elementwise math, reductions, matmul, promotion,
the `uop` dialect text, and the GPU lowering (PTX assembled by ptxas, kernels run on the CPU emulator)."""
import math, pathlib, re, subprocess, sys
import ml_dtypes
import numpy as np
import pytest
from morok_mlir import Tensor
from morok_mlir.core.dtype import dtypes, least_upper_dtype

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")   # the numpy references cast NaN, inf and overflows on purpose
BF = ml_dtypes.bfloat16
F32 = np.float32
TINY = float(ml_dtypes.finfo(BF).smallest_subnormal)   # 2^-133
rng = np.random.default_rng(0)

def bf(a) -> np.ndarray: return np.asarray(a, F32).astype(BF)   # float32 -> bfloat16, round to nearest even
def ref(fn, *xs) -> np.ndarray:
  """fn computed in float32 on the bf16 values, rounded once to bf16."""
  with np.errstate(all="ignore"): return bf(fn(*(np.asarray(x).astype(F32) for x in xs)))
def same(got: np.ndarray, want: np.ndarray):
  """Bit-for-bit, NaN equal to any NaN."""
  assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
  g, w = got.astype(np.float64), want.astype(np.float64)
  nan = np.isnan(w)
  assert (np.isnan(g) == nan).all() and (g[~nan] == w[~nan]).all() and (np.signbit(g[~nan]) == np.signbit(w[~nan])).all(), (got, want)
def ulps(got: np.ndarray, want: np.ndarray) -> int:
  """The largest distance in bf16 steps (same-sign finite values)."""
  g, w = got.view(np.int16).astype(np.int64), want.view(np.int16).astype(np.int64)
  return int(np.abs(g - w).max(initial=0))

# the edge values: signed zeros, subnormals, the largest finite, overflow, NaN/inf, and float32 values exactly half way
# between two bf16 neighbours (round to even both ways) and one float32 ulp off a tie
EDGE32 = np.array([0.0, -0.0, 1.0, -1.0, TINY, -TINY, TINY * 3, 2.0 ** -126, 2.0 ** -127 * 3, 3.3895313892515355e38, 3.4e38, -3.4e38,
                   np.inf, -np.inf, np.nan, 1 + 2 ** -8, 1 + 3 * 2 ** -8, -(1 + 2 ** -8), 1 + 2 ** -8 + 2 ** -23, 1 + 2 ** -8 - 2 ** -23,
                   256.5, 257.0, 65504.0, 1e-40, 0.1, 1 / 3, 1e30], F32)
U16 = np.arange(0, 1 << 16, dtype=np.uint16)   # every bf16 bit pattern
ALL_BF = U16.view(BF)

# ---------------------------------------------------------------- creation and back to numpy
def test_from_numpy_every_bit_pattern():
  got = Tensor(ALL_BF).numpy()
  assert got.dtype == np.dtype(BF) and np.array_equal(got.view(np.uint16), U16)   # NaN payloads too: no arithmetic ran
  assert Tensor(ALL_BF).dtype is dtypes.bfloat16 is dtypes.bf16

def test_from_list_and_scalars():
  vals = [0.1, -2.5, 1e-40, 3.4e38, float("inf"), -0.0]
  same(Tensor(vals, dtype=dtypes.bfloat16).numpy(), np.array(vals, np.float64).astype(BF))   # through float32 (ml_dtypes')
  same(Tensor(vals, dtype="bfloat16").numpy(), bf(vals))
  assert Tensor(BF(3.5)).dtype is dtypes.bfloat16 and Tensor(BF(3.5)).item() == 3.5
  assert Tensor([BF(1.5), 2]).dtype is dtypes.float32   # a list of floats infers the default float (tinygrad)
  t = Tensor([[1.5, -0.0], [3.0, 1e-40]], dtype=dtypes.bf16)
  assert t.tolist() == [[1.5, -0.0], [3.0, float(BF(1e-40))]] and isinstance(t.tolist()[0][0], float)
  assert dtypes.from_np(BF) is dtypes.bfloat16 and dtypes.from_py(BF(1)) is dtypes.bfloat16
  assert (dtypes.short, dtypes.ushort) == (dtypes.int16, dtypes.uint16)

def test_unsupported_numpy_voids_still_refused():
  for t in ("V2", ml_dtypes.float8_e4m3fnuz, [("a", "u1"), ("b", "u1")]):
    with pytest.raises(TypeError, match="unsupported numpy dtype"): Tensor(np.zeros(3, t))

def test_empty_and_noncontiguous():
  e = Tensor(np.zeros((0, 3), BF))
  assert e.numpy().dtype == np.dtype(BF) and e.numpy().shape == (0, 3)
  assert e.sum().numpy().dtype == np.dtype(BF) and float(e.sum().numpy()) == 0.0 and (e + 1).numpy().shape == (0, 3)
  a = bf(rng.standard_normal((6, 8)))
  same((Tensor(a).T[::2, 1:] * 3).numpy(), ref(lambda x: x * 3, a.T[::2, 1:]))
  same(Tensor(a[:, ::-2]).numpy(), a[:, ::-2])   # a strided numpy input
  same(Tensor(a).sum(-1).numpy(), ref(lambda x: x.sum(-1), a))

def test_dtype_limits():
  b = dtypes.bfloat16
  assert b.itemsize == 2 and b.is_float and b.fbits == (8, 8) and b.min == -math.inf and b.max == math.inf
  assert b.finfo.max == float(ml_dtypes.finfo(BF).max) and b.finfo.eps == 2 ** -7

# ---------------------------------------------------------------- casts
OTHERS = [d for d in dtypes.all if d is not dtypes.bfloat16]

@pytest.mark.parametrize("src", OTHERS, ids=lambda d: d.name)
def test_cast_to_bf16(src):
  """Every dtype's edge values to bf16: float32 first (float64 -> float32 -> bf16, as ml_dtypes and PyTorch), then round
  to nearest even; NaN stays NaN, overflow is inf, subnormals are kept."""
  if src.is_float: x = np.concatenate([EDGE32.astype(src.np), rng.standard_normal(200).astype(src.np) * 1000])
  elif src.is_bool: x = np.array([True, False, True])
  else:
    info = np.iinfo(src.np)
    edge = [v for v in (info.min, info.max, 0, 1, -1, 257, 255, 16777217, 2 ** 31 + 2 ** 23 + 1, 2 ** 63 + 2 ** 39 + 1) if info.min <= v <= info.max]
    x = np.concatenate([np.array(edge, src.np), rng.integers(info.min, info.max, 200, dtype=src.np, endpoint=True)])
  with np.errstate(all="ignore"): want = x.astype(F32).astype(BF) if src is not dtypes.float64 else x.astype(BF)
  same(Tensor(x).cast(dtypes.bfloat16).numpy(), want)

@pytest.mark.parametrize("dst", OTHERS, ids=lambda d: d.name)
def test_cast_from_bf16(dst):
  """bf16 -> every dtype. Floats: exact widening (float16 rounds, and overflows to inf); bool: != 0 (NaN is true);
  ints: truncation toward zero where the value fits, and out of range (and NaN) exactly what float32 -> int gives."""
  check_cast_from(ALL_BF, dst)

def check_cast_from(x: np.ndarray, dst) -> None:
  """Tensor(x).cast(dst) against float32's widening (floats, bool) or truncation toward zero where the value fits (ints)."""
  got = Tensor(x).cast(dst).numpy()
  if dst.is_float or dst.is_bool:
    with np.errstate(all="ignore"): same(got, x.astype(F32).astype(dst.np))
    return
  f = x.astype(np.float64)
  info = np.iinfo(dst.np)
  fits = np.isfinite(f) & (np.trunc(f) >= info.min) & (np.trunc(f) < 2.0 ** (info.bits - (info.min < 0)))   # 2^64 itself does not fit
  assert fits.sum() > 50 and np.array_equal(got[fits], np.trunc(f[fits]).astype(dst.np))
  assert np.array_equal(got, Tensor(x.astype(F32)).cast(dst).numpy())   # the float32 cast's out-of-range behaviour

def test_cast_round_to_nearest_even_ties():
  one = np.uint32(0x3F800000)
  bits = np.array([one | 0x8000, one | 0x18000, one | 0x8001, one | 0x7FFF, 0x00008000, 0x00018000, 0x7F7F8000, 0xFF7FFFFF, 0x7FC00001, 0xFF800001],
                  np.uint32)   # ties to even (down, up), just above/below a tie, subnormal ties, max -> inf, NaNs with payloads
  got = Tensor(bits.view(F32)).cast(dtypes.bf16).numpy()
  same(got, bits.view(F32).astype(BF))
  assert list(got.view(np.uint16)[:8]) == [0x3F80, 0x3F82, 0x3F81, 0x3F80, 0x0000, 0x0002, 0x7F80, 0xFF80]

def test_bitcast():
  x = ALL_BF[::97]
  assert np.array_equal(Tensor(x).bitcast(dtypes.int16).numpy(), x.view(np.int16))
  assert np.array_equal(Tensor(x.view(np.uint16)).bitcast(dtypes.bfloat16).numpy().view(np.uint16), x.view(np.uint16))
  same(Tensor(x).bitcast(dtypes.float16).numpy(), x.view(np.float16))

# ---------------------------------------------------------------- elementwise
A = bf(np.concatenate([rng.standard_normal(300) * 4, EDGE32]))
B = bf(np.concatenate([rng.standard_normal(300) * 4, EDGE32[::-1]]))

@pytest.mark.parametrize("name,fn,npfn", [
  ("add", lambda a, b: a + b, np.add), ("sub", lambda a, b: a - b, np.subtract), ("mul", lambda a, b: a * b, np.multiply),
  ("div", lambda a, b: a / b, np.divide), ("max", lambda a, b: a.maximum(b), np.maximum), ("neg", lambda a, b: -a, lambda a, b: -a),
  ("sqrt", lambda a, b: a.sqrt(), lambda a, b: np.sqrt(a)), ("const", lambda a, b: a * 0.1 + 3, lambda a, b: a * F32(bf(0.1)) + 3)])
def test_exact_ops(name, fn, npfn):
  """+ - * / sqrt max computed in float32 and rounded once are the correctly rounded bf16 results: bit-exact. A Python
  scalar becomes a bf16 constant first (tinygrad's constants have the tensor's dtype)."""
  got = fn(Tensor(A), Tensor(B)).numpy()
  want = ref(npfn, A, B) if name != "const" else bf(ref(lambda a: a * F32(bf(0.1)), A).astype(F32) + 3)
  same(got, want)

@pytest.mark.parametrize("name,fn,npfn", [("exp", Tensor.exp, np.exp), ("log", Tensor.log, np.log), ("sin", Tensor.sin, np.sin),
                                          ("exp2", Tensor.exp2, np.exp2), ("sigmoid", Tensor.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
                                          ("tanh", Tensor.tanh, np.tanh), ("cos", Tensor.cos, np.cos)])
def test_transcendentals(name, fn, npfn):
  """Computed in float32 (a polynomial with a 2-ulp float32 error bound) and rounded once: within one bf16 step of
  numpy's float32 result rounded, and special values (NaN, +-inf, 0, negative logs) as numpy's."""
  x = A if name != "log" else bf(np.concatenate([np.abs(A.astype(F32)), [-1.0, 0.0, -0.0]]))
  if name in ("sin", "cos"): x = x[np.abs(x.astype(F32)) < 1e4]   # sin's range reduction is float32 accurate up to here
  got, want = fn(Tensor(x)).numpy(), ref(npfn, x)
  assert got.dtype == np.dtype(BF)
  g, w = got.astype(np.float64), want.astype(np.float64)
  assert (np.isnan(g) == np.isnan(w)).all() and (np.isinf(g) == np.isinf(w)).all() and (g[np.isinf(w)] == w[np.isinf(w)]).all()
  fin = np.isfinite(w) & (np.abs(w) > 1e-30)
  assert ulps(got[fin], want[fin]) <= 1, name

def test_comparisons_and_where():
  a, b = Tensor(A), Tensor(B)
  for op in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"):
    assert np.array_equal(getattr(a, op)(b).numpy(), getattr(A.astype(F32), op)(B.astype(F32))), op
  same(Tensor.where(a > b, a, b).numpy(), np.where(A.astype(F32) > B.astype(F32), A, B))
  same((a > 0).where(a, 0.5).numpy(), np.where(A.astype(F32) > 0, A, BF(0.5)))
  assert np.array_equal(a.isnan().numpy(), np.isnan(A.astype(F32))) and np.array_equal(a.isinf().numpy(), np.isinf(A.astype(F32)))

# ---------------------------------------------------------------- reductions, matmul, softmax
X = bf(rng.standard_normal((37, 300)) * 3)

def test_sum_mean_accumulate_in_float32():
  """Accumulated in float32 and rounded once (PyTorch): the bf16 result is within one step of the float64 sum rounded.
  A bf16 accumulator would be far off: a sum of ones would stop at 256."""
  for axis in (None, 0, 1, -1):
    for fn, npfn in ((Tensor.sum, np.sum), (Tensor.mean, np.mean)):
      got = fn(Tensor(X), axis).numpy()
      want = bf(npfn(X.astype(np.float64), axis=axis))
      assert got.dtype == np.dtype(BF) and got.shape == want.shape and ulps(got, want) <= 1, (fn, axis)
  assert float(Tensor(np.ones(2000, BF)).sum().numpy()) == 2000.0 and float(Tensor(np.ones(3000, BF)).sum().numpy()) == 3008.0   # a tie: to even
  assert Tensor(X).sum(dtype=dtypes.float32).numpy().dtype == np.float32

def test_max_min_argmax():
  for axis in (None, 0, 1):
    same(Tensor(X).max(axis).numpy(), X.astype(F32).max(axis=axis).astype(BF))
    same(Tensor(X).min(axis).numpy(), X.astype(F32).min(axis=axis).astype(BF))
  assert np.array_equal(Tensor(X).argmax(1).numpy(), X.astype(F32).argmax(1))
  same(Tensor(A).max().numpy(), np.array(np.nan, BF))   # NaN propagates

@pytest.mark.parametrize("shape", [(8, 16, 4), (33, 130, 65), (64, 256, 128)])
def test_matmul(shape):
  """Products exact in float32, summed in float32, rounded once: against numpy's float32 matmul of the bf16 values."""
  m, k, n = shape
  a, b = bf(rng.standard_normal((m, k))), bf(rng.standard_normal((k, n)))
  got = (Tensor(a) @ Tensor(b)).numpy()
  want = a.astype(F32) @ b.astype(F32)
  assert got.dtype == np.dtype(BF)
  np.testing.assert_allclose(got.astype(F32), want, rtol=1e-2, atol=1e-2 * np.sqrt(k))
  assert ulps(got[np.abs(want) > 1], bf(want)[np.abs(want) > 1]) <= 1

def test_softmax():
  got = Tensor(X).softmax(1).numpy()
  x = X.astype(np.float64)
  e = np.exp(x - x.max(1, keepdims=True))
  assert got.dtype == np.dtype(BF)
  np.testing.assert_allclose(got.astype(F32), e / e.sum(1, keepdims=True), rtol=1e-2, atol=1e-6)
  np.testing.assert_allclose(Tensor(X).log_softmax(1).numpy().astype(F32), x - x.max(1, keepdims=True) - np.log(e.sum(1, keepdims=True)),
                             rtol=1e-2, atol=2e-2)

# ---------------------------------------------------------------- promotion
@pytest.mark.parametrize("other,want", [(dtypes.float16, dtypes.float32), (dtypes.float32, dtypes.float32), (dtypes.float64, dtypes.float64),
                                        (dtypes.int32, dtypes.bfloat16), (dtypes.int64, dtypes.bfloat16), (dtypes.uint8, dtypes.bfloat16),
                                        (dtypes.bool, dtypes.bfloat16), (dtypes.bfloat16, dtypes.bfloat16)])
def test_promotion(other, want):
  assert least_upper_dtype(dtypes.bfloat16, other) is want and least_upper_dtype(other, dtypes.bfloat16) is want
  a, b = Tensor(bf([1.5, 2.5])), Tensor(np.array([1, 0]).astype(other.np))
  assert (a + b).dtype is want and (b * a).dtype is want
  np.testing.assert_array_equal((a + b).numpy().astype(np.float64), np.array([1.5, 2.5]) + np.array([1, 0]).astype(other.np).astype(np.float64))

def test_promotion_with_python_scalars():
  a = Tensor(bf([1.5, 2.5]))
  assert (a + 1).dtype is (a * 0.5).dtype is (2 ** a).dtype is dtypes.bfloat16
  assert least_upper_dtype(dtypes.int64, dtypes.uint64) is dtypes.float16   # unchanged by the new lattice node

# ---------------------------------------------------------------- the dialect
def morok_opt_round_trip(src: str) -> tuple[str, str]:
  """morok-opt's printout of src (which it must parse back to the same text) and src lowered by the CPU pipeline."""
  opt = str(pathlib.Path(sys.executable).with_name("morok-opt"))
  run = lambda *a, input: subprocess.run([opt, *a], input=input, capture_output=True, timeout=120)
  once = run("-", input=src.encode())
  assert once.returncode == 0, once.stderr.decode()
  assert run("-", input=once.stdout).stdout == once.stdout
  low = run("-", "-p", "uop-rangeify,uop-simplify,uop-kernel-split,uop-optimize,uop-lower-cpu", input=src.encode())
  assert low.returncode == 0, low.stderr.decode()
  return once.stdout.decode(), low.stdout.decode()

def test_uop_dialect_round_trip():
  """A bf16 tensor type is an element type of the dialect: morok-opt prints what it parsed, and the whole CPU pipeline
  lowers it to bf16 memrefs with the float32 compute in between."""
  src = ('func.func @f(%a: tensor<4xbf16>, %b: tensor<4xf16>) -> tensor<4xf32> {\n'
         '  %0 = "uop.const"() {value = 1.5 : bf16} : () -> tensor<4xbf16>\n'
         '  %1 = "uop.mul"(%a, %0) : (tensor<4xbf16>, tensor<4xbf16>) -> tensor<4xbf16>\n'
         '  %2 = "uop.cast"(%1) : (tensor<4xbf16>) -> tensor<4xf32>\n'
         '  %3 = "uop.cast"(%b) : (tensor<4xf16>) -> tensor<4xf32>\n'
         '  %4 = "uop.add"(%2, %3) : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>\n'
         '  return %4 : tensor<4xf32>\n}\n')
  once, text = morok_opt_round_trip(src)
  assert "tensor<4xbf16>" in once and "1.500000e+00 : bf16" in once
  assert "memref<4xbf16>" in text and "arith.bitcast" in text and re.search(r"arith\.mulf .* : f32", text)

def test_bad_bitcast_is_a_python_error():
  with pytest.raises(TypeError, match="equal item sizes"): Tensor(bf([1.0])).bitcast(dtypes.float32)

# ---------------------------------------------------------------- the GPU lowering, without a GPU
def _kernels(t: Tensor) -> list:
  from morok_mlir.ir.emit import normalize, graph_func
  from morok_mlir.ir.pipeline import lower_to_kernels
  return [f for f in lower_to_kernels(graph_func(normalize([t.lazydata])[0])) if "uop.kernel" in f.attrs]

GPU_CASES = {"elementwise": lambda: (Tensor(X) * 2 + 1).exp().sqrt(), "rowsum": lambda: Tensor(X).sum(1), "colmax": lambda: Tensor(X).max(0),
             "cast": lambda: Tensor(X).cast(dtypes.int32) + Tensor(X.astype(F32)).cast(dtypes.bfloat16).cast(dtypes.int32),
             "matmul": lambda: Tensor(X[:, :64]) @ Tensor(X[:32, :64]).T}

@pytest.mark.parametrize("name", list(GPU_CASES))
def test_gpu_ptx_and_emulator(name):
  """uop-lower-gpu's bf16 kernels: PTX that NVIDIA's ptxas assembles for sm_80 and sm_90 without spills, and the same
  kernels run on the CPU emulator equal the CPU backend bit for bit (the same integer rounding)."""
  from morok_mlir.codegen.lower_gpu import lower_module
  from morok_mlir.device.ptx import ptx_for, ptxas, ptxas_path, kernel_names
  from morok_mlir.device.gpu_emulator import emulate
  t = GPU_CASES[name]()
  ks = _kernels(t)
  if ptxas_path() is None: pytest.fail("ptxas is a test dependency (nvidia-cuda-nvcc-cu12)")
  for chip in ("sm_80", "sm_90"):
    ptx = ptx_for(lower_module(ks), chip)
    info = ptxas(ptx, chip)
    assert sorted(info) == sorted(kernel_names(ptx)) == sorted(k.name for k in ks)
    assert all(v["spill_stores"] == v["spill_loads"] == 0 for v in info.values()), info
  got, want = emulate([t.lazydata])[0], t.numpy()
  same(got, want) if want.dtype == np.dtype(BF) else np.testing.assert_array_equal(got, want)
