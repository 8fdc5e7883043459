"""The dtype rules of accumulating ops (docs/tensor.md, "Reductions and scans"), differential against numpy (and PyTorch
where installed): sum, prod, cumsum and cumprod of bools and ints in 64 bits; mean/var/std of ints in float64 returned
as float32, of float16/bfloat16 in float32 rounded once; mixed-dtype contractions (matmul, einsum, conv2d) and float
ops rounding every operand to the promoted dtype first, as the elementwise ops do."""
import numpy as np
import pytest
from morok_mlir import Tensor, dtypes

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
INTS = (dtypes.bool,) + dtypes.ints
NARROW = (dtypes.float16, dtypes.bfloat16)

def wide(dt, n=6, seed=0) -> np.ndarray:
  """Values that wrap a sum or product kept in dt (bools: all True, so that a bool result would differ from a count)."""
  if dt.is_bool: return np.ones(n, bool)
  r = np.random.default_rng(seed)
  return r.integers(dt.max // 2 if dt.is_unsigned else dt.min // 2, dt.max // 2 + 1, n, dtype=dt.np, endpoint=True)

# ---------------------------------------------------------------- sum, prod, cumsum, cumprod: numpy's dtypes and values
@pytest.mark.parametrize("dt", INTS, ids=lambda d: d.name)
def test_integer_accumulations_are_64_bit_as_numpy(dt):
  a = wide(dt)
  for t, ref in ((Tensor(a).sum(), np.sum(a)), (Tensor(a).prod(), np.prod(a)), (Tensor(a).cumsum(), np.cumsum(a)),
                 (Tensor(a).cumprod(0), np.cumprod(a)), (Tensor(a.reshape(2, 3)).sum(1, keepdim=True), a.reshape(2, 3).sum(1, keepdims=True))):
    out = t.numpy()
    assert out.dtype == ref.dtype and t.dtype is (dtypes.uint64 if dt.is_unsigned else dtypes.int64), (out.dtype, ref.dtype)
    np.testing.assert_array_equal(out, ref)

def test_int32_sum_and_cumsum_past_2_31():
  assert Tensor([2 ** 30] * 3).sum().item() == 3 * 2 ** 30   # int32 would wrap to -2^30
  assert Tensor([2 ** 30] * 3).cumsum().tolist() == [2 ** 30, 2 ** 31, 3 * 2 ** 30]

@pytest.mark.parametrize("dt", [d for d in INTS if not d.is_unsigned], ids=lambda d: d.name)
def test_signed_and_bool_accumulations_match_torch(dt):
  torch = pytest.importorskip("torch")
  a = wide(dt)
  ta = torch.from_numpy(a)
  for ours, theirs in ((Tensor(a).sum(), ta.sum()), (Tensor(a).prod(), ta.prod()), (Tensor(a).cumsum(), ta.cumsum(0)),
                       (Tensor(a).cumprod(0), ta.cumprod(0))):
    assert str(theirs.dtype) == "torch.int64" and ours.dtype is dtypes.int64
    np.testing.assert_array_equal(ours.numpy(), theirs.numpy())

@pytest.mark.parametrize("dt", NARROW, ids=lambda d: d.name)
def test_narrow_float_prod_rounds_once(dt):
  """float16/bfloat16 products accumulate in float32 as sums do: 256 * 256 = 65536 overflows float16 only in between."""
  a = np.array([256, 256, 1 / 512, 1 / 128], np.float32)
  assert Tensor(a.astype(dt.np)).prod().dtype is dt and float(Tensor(a.astype(dt.np)).prod().item()) == 1.0
  assert float(Tensor(a.astype(dt.np)).cumprod(0)[-1].item()) == 1.0

# ---------------------------------------------------------------- mean, var, std of ints
@pytest.mark.parametrize("vals,dt", [([2 ** 30] * 3, dtypes.int32), ([2 ** 62, 2 ** 62, 2 ** 62 + 8], dtypes.int64),
                                     ([2 ** 63, 2 ** 63 + 2], dtypes.uint64), ([2 ** 30, 2 ** 30 + 1, 2 ** 30 + 3], dtypes.int32),
                                     ([True, False, True], dtypes.bool), ([250, 251, 255], dtypes.uint8)])
def test_mean_var_std_of_ints_do_not_wrap(vals, dt):
  a = np.array(vals, dt.np)
  for t, ref in ((Tensor(a).mean(), np.mean(a)), (Tensor(a).var(), np.var(a, ddof=1)), (Tensor(a).std(correction=0), np.std(a)),
                 (Tensor(a).var_mean()[1], np.mean(a))):
    assert t.dtype is dtypes.float32
    np.testing.assert_allclose(t.numpy(), np.float32(ref), rtol=1e-6)

@pytest.mark.parametrize("dt,vals", [(dtypes.float16, [1000, 1000, 1000.5]), (dtypes.bfloat16, [256, 256, 258])])
def test_narrow_float_var_std_round_once(dt, vals):
  """float16/bfloat16 mean and var compute in float32 and round once (PyTorch's opmath): a mean rounded to the input's
  dtype before the subtraction made var 0.125 for the float16 values here (the variance is 1/12)."""
  a = np.array(vals, np.float32).astype(dt.np)
  x = a.astype(np.float64)
  for t, ref in ((Tensor(a).var(), np.var(x, ddof=1)), (Tensor(a).std(), np.std(x, ddof=1)), (Tensor(a).mean(), np.mean(x)),
                 (Tensor(a).var_mean()[0], np.var(x, ddof=1)), (Tensor(a).std_mean(correction=0)[0], np.std(x))):
    assert t.dtype is dt and t.numpy().astype(np.float64) == np.float64(ref).astype(dt.np).astype(np.float64), (t.numpy(), ref)

def test_int_mean_of_the_issue():
  assert Tensor([2 ** 30] * 3).mean().item() == 2 ** 30
  assert Tensor([2 ** 30, 2 ** 30 + 1]).var().item() == 0.5   # not 0: the ints are not rounded to float32 before subtracting

# ---------------------------------------------------------------- mixed dtypes: every operand rounded to the promoted dtype
# 2049 is not a float16 (it rounds to 2048), 257 not a bfloat16 (256): 1 * 2049 - 1 * 2048 is 0 once rounded, as x * y gives it
MIXED = [(dtypes.float16, 2049, 2048), (dtypes.bfloat16, 257, 256)]

@pytest.mark.parametrize("fdt,big,low", MIXED, ids=lambda v: getattr(v, "name", str(v)))
def test_mixed_matmul_rounds_the_int_operand_first(fdt, big, low):
  a, b = Tensor([[1, -1]], dtype=fdt), Tensor([[big], [low]], dtype=dtypes.int32)
  elementwise = (a * b.T).sum().item()
  assert elementwise == 0
  for t in (a @ b, a.dot(b), (b.T @ a.T).T, Tensor.einsum("ij,jk->ik", a, b), a.matmul(b, dtype=dtypes.float32)):
    assert t.numpy().tolist() == [[0.0]], t.numpy()
  assert (a @ b).dtype is fdt and a.matmul(b, dtype=dtypes.float32).dtype is dtypes.float32
  w = Tensor([big, low], dtype=dtypes.int32).reshape(1, 2, 1, 1)   # conv2d: one output channel over two input channels
  x = Tensor([1, -1], dtype=fdt).reshape(1, 2, 1, 1)
  assert x.conv2d(w).dtype is fdt and x.conv2d(w).numpy().item() == 0

@pytest.mark.parametrize("op", ["matmul", "einsum", "conv2d"])
def test_float16_contraction_products_are_exact(op):
  """One op, one rounding: (1 + 2^-10)^2 - (1 + 2^-9) is 2^-20 (a float16), 0 if each product were rounded to float16."""
  e = 1 + 2 ** -10
  a, b = np.array([e, 1], np.float16), np.array([e, -(1 + 2 ** -9)], np.float16)
  f = {"matmul": lambda x, y: x @ y, "einsum": lambda x, y: Tensor.einsum("i,i->", x, y),
       "conv2d": lambda x, y: x.reshape(1, 2, 1, 1).conv2d(y.reshape(1, 2, 1, 1)).reshape(())}[op]
  t = f(Tensor(a), Tensor(b))
  assert t.dtype is dtypes.float16 and t.item() == 2 ** -20 == float(np.float16(a.astype(np.float64) @ b.astype(np.float64)))

@pytest.mark.parametrize("dt", [dtypes.int8, dtypes.int32, dtypes.uint8, dtypes.bool], ids=lambda d: d.name)
def test_int_contractions_keep_their_dtype(dt):
  """matmul, einsum and conv2d of ints stay in their dtype and wrap as numpy's matmul (PyTorch's too)."""
  r = np.random.default_rng(1)
  a, b = (r.integers(0, 2, s).astype(dt.np) if dt.is_bool else r.integers(dt.min, dt.max, s, dtype=dt.np, endpoint=True) for s in ((3, 4), (4, 2)))
  ref = a @ b
  for t in (Tensor(a) @ Tensor(b), Tensor.einsum("ij,jk->ik", Tensor(a), Tensor(b))):
    assert t.dtype is dt
    np.testing.assert_array_equal(t.numpy(), ref)
  c = Tensor(a).reshape(3, 4, 1, 1).conv2d(Tensor(b.T.copy()).reshape(2, 4, 1, 1))
  assert c.dtype is dt
  np.testing.assert_array_equal(c.numpy().reshape(3, 2), ref)

@pytest.mark.parametrize("op", ["logaddexp", "copysign"])
def test_float_binary_ops_promote_an_int_self_with_a_float16_other(op):
  """An int tensor with a float16 tensor is float16 (the promotion lattice), the int rounded to float16 first, whichever
  operand is self: logaddexp and copysign are symmetric in the dtype they compute in."""
  i, h = Tensor([2049, -2049, 3]), Tensor([1.0, -1.0, 2.0], dtype=dtypes.float16)
  t = getattr(i, op)(h)
  assert t.dtype is dtypes.float16
  ref = getattr(np, op)(np.array([2049, -2049, 3]).astype(np.float16).astype(np.float32), h.numpy().astype(np.float32)).astype(np.float16)
  np.testing.assert_allclose(t.numpy().astype(np.float32), ref.astype(np.float32), rtol=1e-3)
  if op == "logaddexp": np.testing.assert_array_equal(h.logaddexp(i).numpy(), t.numpy())

def test_float_binary_ops_with_a_negative_scalar_on_an_unsigned_self():
  assert Tensor([3], dtype=dtypes.uint8).copysign(-1).tolist() == [-3.0]
  assert Tensor([0], dtype=dtypes.uint8).logaddexp(-1).dtype is dtypes.float32
