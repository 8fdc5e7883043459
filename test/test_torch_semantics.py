"""Where PyTorch's semantics are finer than "the same values": which exception type an op raises, the gradient at a
kink or a bound (|x|, relu, sign and clip at their corners), gradients of targets reached only through ops without one,
and small API points (dtypes.max/min, dtype= of reductions). References are numpy or hand-derived, so these always run."""
import math
import numpy as np
import pytest
from morok_mlir import Tensor, dtypes

def raises_at(exc, f, match=None):
  """f is a one-line lambda calling the Tensor API: the error is exc and names f's line."""
  with pytest.raises(exc, match=match) as e: f()
  assert f"{__file__}:{f.__code__.co_firstlineno}:" in str(e.value), str(e.value)

def grad(f, *vals):
  xs = [Tensor(np.asarray(v, np.float32)) for v in vals]
  return [g.numpy() for g in f(*xs).sum().gradient(*xs)]

F, I = Tensor([1.0, 2.0]), Tensor([1, 2])

# ---------------------------------------------------------------- exception types: PyTorch raises RuntimeError
@pytest.mark.parametrize("f", [lambda: F & F, lambda: F | F, lambda: F ^ F, lambda: ~F, lambda: F << 1])
def test_bitwise_on_floats_is_a_type_and_runtime_error(f):
  for exc in (TypeError, RuntimeError): raises_at(exc, f, match="not supported for dtypes.float32")

@pytest.mark.parametrize("f,match", [
  (lambda: Tensor.ones(2, 4) @ Tensor.ones(1, 3), "cannot matmul"),
  (lambda: Tensor(3.0) @ Tensor.ones(3, 3), "at least 1D"),
  (lambda: F.div(F, rounding_mode="typo"), "rounding_mode"),
  (lambda: F.clip(None, None), "clip"),
  (lambda: Tensor.ones(2, 3).permute(0, 0), "permutation"),
  (lambda: Tensor.ones(3, 4).reshape(-1, -1, 2), "shape"),
  (lambda: Tensor.ones(3, 4).flip(1, -1), "multiple times"),
])
def test_rejected_arguments_are_value_and_runtime_errors(f, match):
  for exc in (ValueError, RuntimeError): raises_at(exc, f, match=match)

def test_cat_of_0d_is_an_index_error():
  raises_at(IndexError, lambda: Tensor(3.0).cat(Tensor(3.0)), match="0-d")

def test_int_to_negative_power_raises():
  for exc in (ValueError, RuntimeError): raises_at(exc, lambda: I ** -2, match="negative integer powers")
  np.testing.assert_array_equal((Tensor([-2, 0, 3]) ** 3).numpy(), np.array([-2, 0, 3]) ** 3)   # non-negative: exact

def test_linspace_rejects_bool():
  raises_at(ValueError, lambda: Tensor.linspace(0, 1, 3, dtype="bool"), match="bool")

def test_reduction_dtype_is_taken_as_given():
  for exc in (TypeError, AttributeError):   # a name that is no dtype: PyTorch's TypeError, tinygrad's AttributeError
    raises_at(exc, lambda: F.prod(dtype=""), match="not a dtype")
    raises_at(exc, lambda: F.sum(dtype="float33"), match="not a dtype")
  assert F.prod(dtype=dtypes.float64).dtype is dtypes.float64 and F.sum(dtype="float64").item() == 3.0

def test_dtypes_max_min():
  assert (dtypes.max(dtypes.int32), dtypes.min(dtypes.int32)) == (2 ** 31 - 1, -2 ** 31)
  assert (dtypes.max("uint8"), dtypes.min(dtypes.int8), dtypes.max(dtypes.bool)) == (255, -128, True)
  assert dtypes.max(dtypes.float32) == math.inf and dtypes.min(dtypes.float16) == -math.inf

# ---------------------------------------------------------------- values and gradients at corners
V = [-2.0, -0.0, 0.0, 1.5, math.nan, -math.inf]

@pytest.mark.parametrize("name", ["abs", "sign", "relu"])
def test_corner_values_match_numpy(name):
  ref = {"abs": np.abs, "sign": np.sign, "relu": lambda a: np.maximum(a, np.float32(0))}[name](np.array(V, np.float32))
  out = getattr(Tensor(V), name)().numpy()
  np.testing.assert_array_equal(out, ref)
  assert not np.signbit(out[1:3]).any()   # -0.0 gives +0 (numpy's)

@pytest.mark.parametrize("name,ref", [("abs", [-1, 0, 1]), ("relu", [0, 0, 1]), ("sign", [0, 0, 0])])
def test_gradient_at_zero_is_zero(name, ref):
  np.testing.assert_array_equal(grad(lambda x: getattr(x, name)(), [-1.0, 0.0, 1.0])[0], np.array(ref, np.float32))

def test_clip_gradient_is_one_at_the_bounds():
  x = [-3.0, -2.5, 0.0, 1.5, 2.0]
  np.testing.assert_array_equal(grad(lambda t: t.clip(-2.5, 1.5), x)[0], [0, 1, 1, 1, 0])
  np.testing.assert_array_equal(Tensor(x).clip(3, 0).numpy(), np.minimum(np.maximum(x, 3), 0))   # min > max: max
  np.testing.assert_array_equal(Tensor([math.nan, 5.0]).clip(0, 1).numpy(), [math.nan, 1.0])
  assert Tensor([1, 5]).clip(1.5, 3).numpy().tolist() == [1.5, 3.0]   # a float bound promotes an int tensor

def test_copysign_gradients():
  a, b = np.array([-1, 0, 1, -0.0, 2, 3], np.float32), np.array([1, -1, -1, 1, -0.0, math.nan], np.float32)
  ga, gb = grad(lambda x, y: x.copysign(y), a, b)
  np.testing.assert_array_equal(ga, np.where(a == 0, 0, np.sign(a) * np.sign(np.copysign(1, np.copysign(a, b)))))
  np.testing.assert_array_equal(gb, np.zeros_like(b))   # reached only through sign bits: a zero gradient, not an error

def test_gradient_of_a_target_reached_only_through_comparisons_is_zero():
  x, y = Tensor([1.0, -2.0]), Tensor([0.5, 0.5])
  gx, gy = (x * (y > 0)).sum().gradient(x, y)
  assert gx.numpy().tolist() == [1.0, 1.0] and gy.numpy().tolist() == [0.0, 0.0]
  with pytest.raises(RuntimeError, match="not part of the graph"): (x * 2).sum().gradient(y)

def test_gradient_of_an_empty_target_dropped_by_cat():
  x, e = Tensor(np.ones((2, 3), np.float32)), Tensor(np.ones((2, 0), np.float32))
  gx, ge = x.cat(e, dim=1).sum().gradient(x, e)
  assert gx.numpy().tolist() == [[1.0] * 3] * 2 and ge.shape == (2, 0)

# ---------------------------------------------------------------- saturated gradients: 0, not 0 * inf = NaN
XS = np.array([-400, -300, -90, -20, -1, 0, 1, 20, 90, 300, 400], np.float64)
SIG = 1 / (1 + np.exp(-XS))

@pytest.mark.parametrize("name,ref", [
  ("sigmoid", SIG * (1 - SIG)), ("tanh", 1 - np.tanh(XS) ** 2), ("softplus", SIG), ("logsigmoid", 1 - SIG),
  ("quick_gelu", (s := 1 / (1 + np.exp(-1.702 * XS))) + XS * 1.702 * s * (1 - s)),
  ("gelu", 0.5 * (1 + np.tanh(k := 0.7978845608 * (XS + 0.044715 * XS ** 3))) + 0.5 * XS * (1 - np.tanh(k) ** 2) * 0.7978845608 * (1 + 3 * 0.044715 * XS ** 2)),
])
def test_gradient_in_the_tails_is_finite(name, ref):
  with np.errstate(all="ignore"): ref = np.nan_to_num(ref, nan=0.0)
  np.testing.assert_allclose(grad(lambda x: getattr(x, name)(), XS)[0], ref, rtol=1e-4, atol=1e-6)

def test_logaddexp_gradient_far_apart():
  a, b = np.array([1, 2000, 30000, -100, 5], np.float64), np.array([-1, 2, 3, -1, 5], np.float64)
  m = np.maximum(a, b)
  lae = m + np.log(np.exp(a - m) + np.exp(b - m))
  ga, gb = grad(lambda x, y: x.logaddexp(y), a, b)
  np.testing.assert_allclose(ga, np.exp(a - lae), rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(gb, np.exp(b - lae), rtol=1e-5, atol=1e-7)

def test_log1p_based_values_unchanged():
  x = np.array([-0.5, -1e-8, 0, 1e-8, 1e-3, 3, 1e30, np.inf], np.float32)
  np.testing.assert_allclose(Tensor(x).softplus().numpy(), np.logaddexp(0, x.astype(np.float64)), rtol=1e-6)
  np.testing.assert_allclose(Tensor(x).logaddexp(Tensor(np.zeros_like(x))).numpy(), np.logaddexp(x.astype(np.float64), 0), rtol=1e-6)

def test_topk_k_out_of_range_is_index_and_runtime_error():
  for exc in (IndexError, RuntimeError): raises_at(exc, lambda: F.topk(3), match="out of range")

def test_stack_and_cat_take_a_sequence_or_tensors_not_both():
  a, b = Tensor([1, 2]), Tensor([3, 4])
  raises_at(ValueError, lambda: Tensor.stack((a, b), Tensor([5, 6])), match="not both")
  raises_at(ValueError, lambda: Tensor.cat([a, b], b), match="not both")
  assert Tensor.stack((a, b)).numpy().tolist() == [[1, 2], [3, 4]] and Tensor.cat([a, b]).numpy().tolist() == [1, 2, 3, 4]

# ---------------------------------------------------------------- windows with a step past the input
@pytest.mark.parametrize("dim,size,step", [(2, 2, 8), (1, 0, 8), (0, 1, 5), (-1, 3, 100), (2, 1, 2)])
def test_unfold_step_larger_than_the_input(dim, size, step):
  x = np.arange(27, dtype=np.float32).reshape(3, 3, 3)
  w = np.lib.stride_tricks.sliding_window_view(x, size, axis=dim)
  ref = np.take(w, range(0, w.shape[dim % 3], step), axis=dim % 3)
  out = Tensor(x).unfold(dim, size, step).numpy()
  assert out.shape == ref.shape and np.array_equal(out, ref)

def test_max_pool_stride_past_the_input():
  x = np.random.default_rng(0).standard_normal((1, 2, 7, 5)).astype(np.float32)
  w = np.lib.stride_tricks.sliding_window_view(x, (2, 2), axis=(2, 3))[:, :, ::6, ::9]
  np.testing.assert_array_equal(Tensor(x).max_pool2d((2, 2), stride=(6, 9)).numpy(), w.max(axis=(-2, -1)))

def test_attention_with_grouped_query_heads():
  rng = np.random.default_rng(1)
  q, k, v = (rng.standard_normal(s).astype(np.float32) for s in [(2, 6, 4, 8), (2, 2, 5, 8), (2, 2, 5, 8)])
  kk, vv = np.repeat(k, 3, axis=1), np.repeat(v, 3, axis=1)   # query heads 0-2 share key head 0, 3-5 head 1
  s = q.astype(np.float64) @ kk.transpose(0, 1, 3, 2) / np.sqrt(8)
  p = np.exp(s - s.max(-1, keepdims=True))
  ref = (p / p.sum(-1, keepdims=True)) @ vv
  np.testing.assert_allclose(Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), enable_gqa=True).numpy(), ref, rtol=1e-5, atol=1e-6)
  raises_at(ValueError, lambda: Tensor(q[:, :5]).scaled_dot_product_attention(Tensor(k), Tensor(v), enable_gqa=True), match="divide")

def test_empty_unfold_windows_have_zero_gradients():
  x = Tensor(np.ones((3, 3, 3), np.float32))
  assert x.unfold(1, 0, 8).shape == (3, 1, 3, 0) and x.unfold(2, 0, 1).shape == (3, 3, 4, 0)
  g, = x.unfold(1, 0, 8).sum().gradient(x)
  assert g.numpy().tolist() == np.zeros((3, 3, 3)).tolist()

def test_var_without_degrees_of_freedom_keeps_nan_gradients():
  x = Tensor(np.arange(10, dtype=np.float32).reshape(2, 5))
  assert np.isinf(x.std(0, correction=5).numpy()).all() and np.isnan(x.std(0, correction=5).sum().gradient(x)[0].numpy()).all()
