"""Products of 8-bit integers summed in int32 (uop.int8, codegen.int8): each int8 dot product the CPU may run (VNNI's
vpdpbusd at 16 and 8 lanes, vpmaddwd at 16 and 8: the AVX2 kind's), chosen by host.INT8_DOT and forced here to every
one this CPU can execute, gives numpy's int64 result exactly, the extremes 0/255 x -128/127 included (a pair of them
saturates vpmaddubsw's i16 sums); MatMulInteger and QLinearMatMul of every 8-bit kind and zero point run on it."""
import re
import numpy as np
import pytest
from morok_mlir import Tensor, dtypes, host
import morok_mlir.realize as R

# and "": none (int32 loops; onnx's 8-bit products as exact float32 contractions)
KINDS = [k for k, (need, _, _) in host.INT8_DOTS.items() if need <= host.CPU_FLAGS] + [""]

@pytest.fixture(params=KINDS)
def kind(request, monkeypatch):
  """An int8 dot product this CPU can run (or none), made the one uop-optimize chooses (a schedule cache of the test's own)."""
  monkeypatch.setattr(host, "INT8_DOT", request.param)
  monkeypatch.setattr(R, "_schedule_cache", {})
  return request.param

def extremes(r, shape, dt) -> np.ndarray:
  """Random 8-bit values, a third of them at the kind's two ends."""
  info = np.iinfo(dt)
  x = r.integers(info.min, info.max + 1, shape)
  return np.where(r.random(shape) < 0.33, np.where(r.random(shape) < 0.5, info.min, info.max), x).astype(dt)

@pytest.mark.parametrize("M,K,N", [(16, 128, 256), (5, 7, 3), (33, 130, 70), (8, 600, 40), (1, 256, 64), (100, 1024, 520)])
@pytest.mark.parametrize("ua", [True, False])
def test_int8_product_exact(kind, M, K, N, ua):
  """u8 x s8 (and s8 x u8) cast to int32 and multiplied: the int8 kernel (its uop.int8 attribute in the optimized
  kernel) and numpy's int64 product agree exactly, K past a multiple of the dot's group, rows and columns past a tile."""
  r = np.random.default_rng(M * 1000 + K + N)
  a, b = extremes(r, (M, K), np.uint8 if ua else np.int8), extremes(r, (K, N), np.int8 if ua else np.uint8)
  c = Tensor(a).cast(dtypes.int32) @ Tensor(b).cast(dtypes.int32)
  if kind and 2 * M * N * K >= 1 << 20: assert re.search(r"uop.int8 = array<i64: \d+, \d+, %d, %d>" % host.INT8_DOTS[kind][1:], c.mlir("uop-optimize"))
  np.testing.assert_array_equal(c.numpy(), (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32))

def test_int8_product_at_saturation(kind):
  """Every product at 255 x -128 or 255 x 127 over K = 1024: sums of +-33 million, far past i16 and float32's 2^24."""
  a, b = np.full((16, 1024), 255, np.uint8), np.where(np.arange(64) % 2, 127, -128).astype(np.int8)[None].repeat(1024, 0)
  c = (Tensor(a).cast(dtypes.int32) @ Tensor(b).cast(dtypes.int32)).numpy()
  np.testing.assert_array_equal(c, (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32))

def test_int8_epilogue_and_weights_kept(kind):
  """The contraction's epilogue (a bias and a scale in float, the reduce's other operations) runs on the int32 sums;
  new activations against the same weights (whose packed panels are kept) give new, exact results."""
  r = np.random.default_rng(1)
  w = extremes(r, (96, 130), np.int8)
  W = Tensor(w)
  for k in range(3):
    a = extremes(np.random.default_rng(10 + k), (24, 96), np.uint8)
    y = ((Tensor(a).cast(dtypes.int32) @ W.cast(dtypes.int32)).cast(dtypes.float32) * 0.5 + 1).numpy()
    np.testing.assert_array_equal(y, (a.astype(np.int64) @ w.astype(np.int64)).astype(np.float32) * 0.5 + 1)

onnx = pytest.importorskip("onnx")
from onnx import helper as h, TensorProto as TP, numpy_helper as nh   # noqa: E402
from morok_mlir.onnx import OnnxModel   # noqa: E402

ONNX_T = {np.uint8: TP.UINT8, np.int8: TP.INT8}

@pytest.mark.parametrize("ta,tb", [(np.uint8, np.int8), (np.int8, np.uint8), (np.uint8, np.uint8), (np.int8, np.int8)])
@pytest.mark.parametrize("zp", ["none", "scalar", "per_row_col"])
def test_matmul_integer_kinds_and_zero_points(kind, ta, tb, zp):
  """MatMulInteger of every 8-bit kind pair, zero points none, per tensor, or per row of A and per column of B, B a
  constant (its column sums folded once), A a call's data of 3 dims: int32 equal to numpy's (A - za) @ (B - zb)."""
  r = np.random.default_rng(7)
  M, K, N = 64, 130, 72
  b = extremes(r, (K, N), tb)
  za = {"none": None, "scalar": extremes(r, (), ta), "per_row_col": extremes(r, (M,), ta)}[zp]
  zb = {"none": None, "scalar": extremes(r, (), tb), "per_row_col": extremes(r, (N,), tb)}[zp]
  ins, inits = ["A", "B"], [nh.from_array(b, "B")]
  if zp == "per_row_col": za_s, shape = za.reshape(2, M // 2, 1), (2, M // 2, K)   # onnx: per row of an N-D A is [D1, M, 1]
  else: za_s, shape = za, (2, M // 2, K)
  for n, z in (("za", za_s), ("zb", zb)):
    if z is not None: ins.append(n); inits.append(nh.from_array(np.asarray(z), n))
  g = h.make_graph([h.make_node("MatMulInteger", ins, ["Y"])], "mmi", [h.make_tensor_value_info("A", ONNX_T[ta], list(shape))],
                   [h.make_tensor_value_info("Y", TP.INT32, None)], inits)
  om = OnnxModel(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]))
  for k in range(3):
    a = extremes(np.random.default_rng(k), shape, ta)
    i64 = lambda x: 0 if x is None else np.asarray(x, np.int64)
    want = (a.astype(np.int64) - i64(za_s)) @ (b.astype(np.int64) - i64(zb))
    np.testing.assert_array_equal(om({"A": a})["Y"], want.astype(np.int32), err_msg=f"call {k}")

@pytest.mark.parametrize("start", [0, 4, 3])
def test_int8_product_of_a_slice(kind, start):
  """A a column slice of a wider 8-bit matrix (read in place where its rows start at whole 4-byte words, else packed)."""
  r = np.random.default_rng(start)
  big, b = extremes(r, (48, 200), np.uint8), extremes(r, (128, 130), np.int8)
  c = Tensor(big)[:, start:start + 128].cast(dtypes.int32) @ Tensor(b).cast(dtypes.int32)
  np.testing.assert_array_equal(c.numpy(), (big[:, start:start + 128].astype(np.int64) @ b.astype(np.int64)).astype(np.int32))

@pytest.mark.parametrize("dt", [np.uint8, np.int8])
def test_quantize_rounds_half_to_even(dt):
  """QuantizeLinear (and DynamicQuantizeLinear's values) round x / scale half to even, as onnx says, at every tie
  between -300 and 300, past the 8-bit range and at +-1e9 and +-inf (saturated)."""
  x = np.concatenate([np.arange(-600, 601) / 2, [1e9, -1e9, np.inf, -np.inf, 2.0 ** 22 + 1, -(2.0 ** 23)]]).astype(np.float32)
  zp = dt(3)
  g = h.make_graph([h.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])], "q", [h.make_tensor_value_info("x", TP.FLOAT, [x.size])],
                   [h.make_tensor_value_info("y", ONNX_T[dt], None)], [nh.from_array(np.float32(1.0), "s"), nh.from_array(zp, "z")])
  om = OnnxModel(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]))
  info = np.iinfo(dt)
  np.testing.assert_array_equal(om({"x": x})["y"], np.clip(np.round(x.astype(np.float64)) + int(zp), info.min, info.max).astype(dt))

def test_int8_kernel_calls_the_dot_product(kind):
  """The LLVM IR of the product holds the kind's instruction (the intrinsic the micro-kernel calls)."""
  if not kind: pytest.skip("no int8 dot product")
  from morok_mlir.codegen.int8 import DOTS
  c = Tensor(np.zeros((16, 128), np.uint8)).cast(dtypes.int32) @ Tensor(np.zeros((128, 256), np.int8)).cast(dtypes.int32)
  assert DOTS[host.INT8_DOTS[kind][1:]][0] in c.mlir("llvm")
