"""How data enters a Tensor: every supported dtype in both byte orders and every memory layout, through a few ops
against numpy; lists, tuples, scalars, assign, round trips; unsupported numpy dtypes; and a list of hostile Tensor API
calls, each of which must raise a Python exception naming the caller's line or give numpy's answer."""
import sys
import numpy as np
import pytest
from morok_mlir import Tensor, dtypes
from morok_mlir.dialects.ops import Ops

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
NATIVE = "<" if sys.byteorder == "little" else ">"

def base(dt, shape=(4, 6), seed=0) -> np.ndarray:
  r = np.random.default_rng(seed)
  if dt.is_bool: return r.random(shape) < 0.5
  if dt.is_float: return r.uniform(-8, 8, shape).astype(dt.np)
  return r.integers(max(dt.min, -100), min(dt.max, 100), shape, endpoint=True).astype(dt.np)

LAYOUTS = {  # name -> a view (or copy) of x in that layout
  "c": lambda x: np.ascontiguousarray(x), "fortran": lambda x: np.asfortranarray(x), "transposed": lambda x: x.T,
  "strided": lambda x: np.repeat(x, 2, axis=1)[:, ::2], "negative": lambda x: x[::-1, ::-2], "0d": lambda x: x[1, 2, ...],
  "readonly": lambda x: _readonly(x.copy()), "broadcast": lambda x: np.broadcast_to(x[:1], x.shape),
}
def _readonly(x):
  x.flags.writeable = False
  return x

def orders(dt) -> list[str]: return ["|"] if dt.itemsize == 1 else ["<", ">"]
CASES = [(dt, bo, lay) for dt in dtypes.all for bo in orders(dt) for lay in LAYOUTS]

def close(out, ref, dt, rtol=None):
  ref = np.asarray(ref)
  assert out.shape == ref.shape and out.dtype == ref.dtype.newbyteorder("="), (out.shape, out.dtype, ref.shape, ref.dtype)
  if dt.is_float: np.testing.assert_allclose(out, ref, rtol=rtol or {1: 1e-7, 2: 1e-2, 4: 1e-6, 8: 1e-12}[dt.itemsize])
  else: np.testing.assert_array_equal(out, ref)

@pytest.mark.parametrize("dt,bo,layout", CASES, ids=[f"{d.name}-{'native' if b in '|' + NATIVE else 'swapped'}-{l}" for d, b, l in CASES])
def test_byte_order_and_layout(dt, bo, layout):
  x = LAYOUTS[layout](base(dt).astype(dt.npdt.newbyteorder(bo)))
  nat = x.astype(dt.np)   # the same numbers, native
  t = Tensor(x)
  assert t.dtype == dt and t.shape == x.shape and x.dtype.byteorder in "|" + bo + "=" * (dt.itemsize == 1)   # (ml_dtypes' fp8 says '=')
  close(t.numpy(), nat, dt)
  close((t + t).numpy(), nat + nat, dt)
  close(t.cast(dtypes.float32).mul(2).numpy(), nat.astype(np.float32) * 2, dtypes.float32)
  narrow = dt.is_float and dt.itemsize < 4   # float16, bfloat16, fp8: accumulated in float32, rounded once
  close(t.sum().numpy(), np.sum(nat, dtype=np.float32 if narrow else t.sum().dtype.np).astype(t.sum().dtype.np), dt, rtol=1e-2 if narrow else 1e-5)
  close(t.max().numpy(), nat.max(), dt)
  if x.ndim: close(t.flip(0)[..., 1:].numpy(), nat[::-1, ..., 1:], dt)
  close(Tensor(x, dtype=dtypes.float64).numpy(), nat.astype(np.float64), dtypes.float64)   # converted on the way in
  close(Tensor(t.numpy()).numpy(), nat, dt)   # round trip

@pytest.mark.parametrize("dt", dtypes.all, ids=lambda d: d.name)
def test_lists_tuples_scalars(dt):
  x = base(dt, (2, 3))
  for data in (x.tolist(), tuple(tuple(r) for r in x.tolist()), [list(r) for r in x], [x[0], x[1]]):
    close(Tensor(data, dtype=dt).numpy(), x, dt)
  for s in (x[1, 2], x[1, 2].item(), x.astype(x.dtype.newbyteorder(">" if dt.itemsize > 1 else "|"))[1, 2]):
    t = Tensor(s)
    assert t.dtype == (dt if isinstance(s, np.generic) else dtypes.from_py(s)), (s, t.dtype)
    assert t.item() == t.dtype.np(s)   # a Python float is the default float32
  assert Tensor(x[1, 2]).uop.op is Ops.CONST and Tensor(np.asarray(x[1, 2])).uop.op is Ops.BUFFER   # a 0-d array is data

def test_issue_example():
  assert Tensor(np.array([1., 2., 3.], dtype=">f4")).sum().item() == 6.0
  assert Tensor(np.array([1, 2, 3], dtype=">i8")).sum().item() == 6

@pytest.mark.parametrize("layout", LAYOUTS)
def test_users_array_is_copied_and_stays_writable(layout):
  b = base(dtypes.float32).astype(">f4")
  x = LAYOUTS[layout](b)
  before = x.astype(np.float32)
  t = Tensor(x)
  if x.flags.writeable: x[...] = 0   # changing the user's array (or a view's base) later does not change the tensor
  b[...] = 0
  np.testing.assert_array_equal(t.numpy(), before)
  assert x.flags.writeable == (layout not in ("readonly", "broadcast"))   # and it is still the user's to change

def test_assign_and_ops_with_arrays():
  t = Tensor(np.zeros(3, np.float32))
  t.assign(np.array([1, 2, 3], ">f4"))
  np.testing.assert_array_equal(t.numpy(), [1, 2, 3])
  t.assign(np.array([4, 5, 6], ">f8"))   # converted to the tensor's dtype
  np.testing.assert_array_equal(t.numpy(), [4, 5, 6])
  u = Tensor(np.arange(6, dtype=">i2").reshape(2, 3)[:, ::-1])
  np.testing.assert_array_equal((u * 2 + Tensor(np.array([1, 1, 1], ">i2"))).numpy(), np.arange(6).reshape(2, 3)[:, ::-1] * 2 + 1)

def test_other_int_spellings():
  for t in (np.longlong, np.ulonglong, np.intc, np.uintc, np.int_, np.uint, np.byte, np.short, np.half, np.single, np.double):
    x = np.arange(4).astype(t)
    out = Tensor(x).numpy()
    assert out.dtype == x.dtype and (out == x).all(), t

# ---------------------------------------------------------------- unsupported numpy dtypes: TypeError at the user's line
UNSUPPORTED = [np.array([1 + 2j]), np.array([1 + 2j], np.complex64), np.array([1, "a"], dtype=object), np.array(["a"]), np.array([b"a"]),
               np.array(["2020-01-01"], "datetime64[D]"), np.array([1], "timedelta64[s]"), np.zeros(2, [("a", "i4"), ("b", "f4")]),
               np.zeros(2, np.longdouble), np.zeros(2, "V4")]

def raises_here(exc, fn, match=None):
  """fn is a one-line lambda: the error must name this file and the lambda's line, and not be an internal error."""
  with pytest.raises(exc, match=match) as e: fn()
  assert f"{__file__}:{fn.__code__.co_firstlineno}:" in str(e.value) and "internal error" not in str(e.value), str(e.value)

@pytest.mark.parametrize("x", UNSUPPORTED, ids=lambda x: str(x.dtype))
def test_unsupported_numpy_dtypes(x):
  raises_here(TypeError, lambda: Tensor(x), "unsupported numpy dtype")
  raises_here(TypeError, lambda: Tensor(x, dtype=dtypes.float32), "unsupported numpy dtype")
  if isinstance(x[0], np.generic): raises_here(TypeError, lambda: Tensor(x[0]))   # the numpy scalar (an object array holds Python's)
  raises_here(TypeError, lambda: Tensor(x[:1].reshape(())))  # a 0-d array
  raises_here(TypeError, lambda: Tensor(np.zeros(2, np.float32)).assign(x[:1].repeat(2)))

def test_unsupported_python_values():
  raises_here(TypeError, lambda: Tensor([1 + 2j]), "complex")
  raises_here(TypeError, lambda: Tensor([1, None]), "NoneType")
  raises_here(TypeError, lambda: Tensor(["a"]))
  raises_here(TypeError, lambda: Tensor(1 + 2j))
  raises_here(TypeError, lambda: Tensor(np.str_("a")))
  raises_here(TypeError, lambda: Tensor(np.datetime64("2020")))

# ---------------------------------------------------------------- hostile calls
t = Tensor(np.zeros((2, 3), np.float32))
x4 = Tensor(np.ones((1, 1, 5, 5), np.float32))
w3 = Tensor(np.ones((1, 1, 3, 3), np.float32))
NAN_INF = np.array([np.nan, np.inf, -np.inf, 1e10, -1e10, 3.7, -3.7], np.float32)
def nan_inf_as(dt) -> np.ndarray:
  with np.errstate(invalid="ignore"): return NAN_INF.astype(dt)
HOSTILE = [  # (call, the exception it raises, or numpy's answer); one call per line: the error must name that line
  # Python ints a dtype cannot hold, and values that would change
  (lambda: Tensor([2 ** 70]), OverflowError),
  (lambda: Tensor([2 ** 40]), OverflowError),
  (lambda: Tensor(2 ** 40), OverflowError),
  (lambda: Tensor(2 ** 64, dtype="int64"), OverflowError),
  (lambda: Tensor(2 ** 63, dtype="int64"), OverflowError),
  (lambda: Tensor([2 ** 64], dtype="uint64"), OverflowError),
  (lambda: Tensor([1, 2]) + 2 ** 100, OverflowError),
  (lambda: 2 ** 100 * Tensor([1, 2]), OverflowError),
  (lambda: Tensor([1, 2]) << 2 ** 70, OverflowError),
  (lambda: Tensor([1], dtype="int64") + 2 ** 63, OverflowError),
  (lambda: Tensor([True]).where(2 ** 100, 0), OverflowError),
  (lambda: Tensor.full((2,), 2 ** 100), OverflowError),
  (lambda: Tensor(2 ** 1030, dtype="float32"), OverflowError),
  (lambda: Tensor(1e30, dtype="int32"), OverflowError),
  (lambda: Tensor([1e30], dtype="int64"), OverflowError),
  (lambda: Tensor(float("nan"), dtype="int32"), ValueError),
  (lambda: Tensor([1.0, float("inf")], dtype="int16"), ValueError),
  (lambda: Tensor.arange(2 ** 31 - 2, 2 ** 31 + 2), OverflowError),
  (lambda: Tensor.arange(2 ** 70), ValueError),
  (lambda: Tensor.arange(0, float("inf")), ValueError),
  (lambda: Tensor.arange("a"), TypeError),
  # values that fit: wrapped (as PyTorch casts them) or exact
  (lambda: Tensor([300, -1], dtype="uint8"), np.array([44, 255], np.uint8)),
  (lambda: Tensor([2 ** 63, 2 ** 64 - 1], dtype="uint64"), np.array([2 ** 63, 2 ** 64 - 1], np.uint64)),
  (lambda: Tensor([1], dtype="uint64") + (2 ** 64 - 2), np.array([2 ** 64 - 1], np.uint64)),
  (lambda: Tensor.arange(2 ** 31 - 2, 2 ** 31 + 2, dtype="int64"), np.arange(2 ** 31 - 2, 2 ** 31 + 2)),
  # shapes
  (lambda: Tensor.zeros(2 ** 63 - 1), ValueError),
  (lambda: Tensor.zeros(2 ** 40, 2 ** 40), ValueError),
  (lambda: Tensor.ones(2 ** 31, 2 ** 31), ValueError),
  (lambda: Tensor.zeros(-1), ValueError),
  (lambda: Tensor.zeros(3, -2), ValueError),
  (lambda: Tensor.zeros(2.0), TypeError),
  (lambda: Tensor.zeros(True), TypeError),
  (lambda: Tensor.zeros("3"), TypeError),
  (lambda: Tensor.full((2.5,), 1), TypeError),
  (lambda: Tensor.rand(-1), ValueError),
  (lambda: Tensor.randn(2 ** 40, 2 ** 40), ValueError),
  (lambda: Tensor.randint(3, low=0, high=2 ** 70), ValueError),
  (lambda: Tensor.randint(3, low=5, high=5), ValueError),
  (lambda: Tensor.eye(-1), ValueError),
  (lambda: Tensor.eye(2.5), TypeError),
  (lambda: Tensor([1.0]).expand(-2), ValueError),
  (lambda: Tensor([[1.0]]).expand(2 ** 40, 2 ** 40), ValueError),
  (lambda: Tensor.ones(2 ** 40, 1) + Tensor.ones(1, 2 ** 40), ValueError),
  (lambda: t.pad(((0, 2 ** 62), (0, 0))), ValueError),
  (lambda: t.pad(((0, 2 ** 40), (0, 2 ** 40))), ValueError),
  (lambda: t.pad(((0, 1.5), None)), TypeError),
  (lambda: t.pad(3), TypeError),
  (lambda: t.pad(((-5, 0), None)), ValueError),
  (lambda: t.reshape(-2, -3), ValueError),
  (lambda: t.reshape(7), ValueError),
  (lambda: t.shrink(((0, 5), None)), ValueError),
  (lambda: Tensor.zeros(0, 3).sum(1), np.zeros(0, np.float32)),
  (lambda: Tensor.zeros(0, 3).sum(0), np.zeros(3, np.float32)),
  (lambda: Tensor.zeros(0).prod(), np.float32(1)),
  (lambda: Tensor([]), np.zeros(0, np.float32)),
  (lambda: Tensor([[]]), np.zeros((1, 0), np.float32)),
  # axes
  (lambda: t.sum(5), IndexError),
  (lambda: t.sum(1.0), TypeError),
  (lambda: t.softmax(4), IndexError),
  (lambda: t.permute(0, 0), ValueError),
  (lambda: t.flip(3), IndexError),
  (lambda: t.transpose(0, 5), IndexError),
  (lambda: t.unsqueeze(5), IndexError),
  (lambda: t.argmax(7), IndexError),
  (lambda: t[2 ** 70], IndexError),
  (lambda: t[1.5], TypeError),
  # dtypes and devices
  (lambda: Tensor([1], dtype="complex64"), TypeError),
  (lambda: t.cast("foo"), TypeError),
  (lambda: t.cast(np.complex64), TypeError),
  (lambda: t.cast(dtypes.index), TypeError),
  (lambda: Tensor.zeros(2, dtype=str), TypeError),
  (lambda: t.bitcast(dtypes.float64), TypeError),
  (lambda: Tensor([1], device="TPU"), ValueError),
  (lambda: t.to(5), TypeError),
  (lambda: Tensor([1], device=["CPU"]), TypeError),
  (lambda: Tensor({1: 2}), TypeError),
  (lambda: Tensor.zeros(0).item(), ValueError),
  # NaN and infinities cast to ints: numpy's answer (x86's "integer indefinite" for what does not fit)
  (lambda: Tensor(NAN_INF).cast(dtypes.int32), nan_inf_as(np.int32)),
  (lambda: Tensor(NAN_INF).cast(dtypes.int64), nan_inf_as(np.int64)),
  (lambda: Tensor(NAN_INF).cast(dtypes.int8), nan_inf_as(np.int8)),
  (lambda: Tensor(NAN_INF).cast(dtypes.bool), nan_inf_as(np.bool_)),
  # conv2d arguments, checked as PyTorch checks them
  (lambda: x4.conv2d(w3, dilation=0), ValueError),
  (lambda: x4.conv2d(w3, stride=0), ValueError),
  (lambda: x4.conv2d(w3, stride=(1, -1)), ValueError),
  (lambda: x4.conv2d(w3, groups=0), ValueError),
  (lambda: x4.conv2d(w3, padding=-1), ValueError),
  (lambda: x4.conv2d(w3, stride=(1, 1, 1)), ValueError),
  (lambda: x4.conv2d(w3, padding=(1, 1, 1)), ValueError),
  (lambda: x4.conv2d(w3, dilation=1.5), TypeError),
  (lambda: x4.conv2d(w3, padding="full"), ValueError),
  (lambda: x4.conv2d(w3, bias=Tensor.ones(2)), ValueError),
  (lambda: x4.conv2d(np.ones((1, 1, 3, 3))), TypeError),
  (lambda: Tensor.ones(5, 5).conv2d(Tensor.ones(3, 3)), ValueError),
  (lambda: x4.conv2d(Tensor.ones(2, 1, 3, 3), groups=2), ValueError),
  (lambda: x4.conv2d(w3, dilation=2, stride=(2, 1), padding=(1, 0)), None),   # valid: compared with a direct loop below
]

def _conv_ref():
  x, w = np.ones((5, 5), np.float32), np.ones((3, 3), np.float32)
  xp = np.pad(x, ((1, 1), (0, 0)))
  return np.array([[sum(xp[i * 2 + 2 * a, j + 2 * b] * w[a, b] for a in range(3) for b in range(3)) for j in range(1)] for i in range(2)],
                  np.float32)[None, None]

@pytest.mark.parametrize("fn,want", HOSTILE, ids=[f"line{fn.__code__.co_firstlineno}" for fn, _ in HOSTILE])
def test_hostile_calls(fn, want):
  if isinstance(want, type) and issubclass(want, Exception): return raises_here(want, fn)
  out = fn()
  ref = _conv_ref() if want is None else np.asarray(want)
  got = out.numpy()
  assert got.shape == ref.shape and got.dtype == ref.dtype, (got.shape, got.dtype, ref.shape, ref.dtype)
  np.testing.assert_array_equal(got, ref)
