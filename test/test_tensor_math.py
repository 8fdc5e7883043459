"""Differential tests of the math functions, activations and losses against float64 numpy references (closed forms;
math.erf for erf): edge cases (0, -0, tiny, large, inf, NaN), empty and transposed inputs, float16/32/64; and the
kernel counts of activations and losses (they fuse into their producer)."""
import math
import numpy as np
import pytest
from morok_mlir import Tensor, dtypes
from morok_mlir.core.mixin import OpMixin
from morok_mlir.realize import GlobalCounters

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
FLOATS = (dtypes.float16, dtypes.float32, dtypes.float64)
# a few ulps; float32's erf approximation (Abramowitz-Stegun 7.1.26) is 1.5e-7 absolute
TOL = {dtypes.float16: (4e-3, 1e-3), dtypes.float32: (1e-5, 1e-6), dtypes.float64: (1e-12, 1e-14)}
POLY_TOL = {dtypes.float16: (4e-3, 1e-3), dtypes.float32: (2e-6, 5e-7), dtypes.float64: (1e-12, 1e-14)}

def edges(dt, domain: str) -> np.ndarray:
  """Edge cases of a domain, then random values in it (64 in all), as dt."""
  big = 1e4 if dt is dtypes.float16 else 1e30
  e = {"all": [0, -0.0, 1e-6, -1e-6, 0.25, -0.5, 1, -1, 3, -3, 15, -15, 40, -40, 200, -200, big, -big, np.inf, -np.inf, np.nan],
       "unit": [0, -0.0, 1e-6, -1e-6, 0.5, -0.5, 0.999, -0.999, 1, -1, 1.5, -1.5, np.inf, np.nan],
       "ge1": [1, 1.001, 1.5, 2, 10, 1e3, big, np.inf, 0.5, -2, np.nan]}[domain]
  lo, hi = {"all": (-6, 6), "unit": (-1, 1), "ge1": (1, 12)}[domain]
  r = np.random.default_rng(len(e)).uniform(lo, hi, 64 - len(e))
  return np.concatenate([np.array(e, np.float64), r]).astype(dt.np)

sig = lambda x: 1 / (1 + np.exp(-x))
softplus = lambda x, b=1.0, t=20.0: np.where(x * b > t, x, np.log1p(np.exp(x * b)) / b)
logsig = lambda x: -np.logaddexp(0, -x)
elu = lambda x, a=1.0: np.where(x > 0, x, a * np.expm1(x))
erf = np.vectorize(math.erf, otypes=[np.float64])
UNARY = {  # name: (op, float64 reference, domain, polynomial accuracy)
  "atan": (lambda x: x.atan(), np.arctan, "all", False),
  "asin": (lambda x: x.asin(), np.arcsin, "unit", False),
  "acos": (lambda x: x.acos(), np.arccos, "unit", False),
  "sinh": (lambda x: x.sinh(), np.sinh, "all", False),
  "cosh": (lambda x: x.cosh(), np.cosh, "all", False),
  "asinh": (lambda x: x.asinh(), np.arcsinh, "all", False),
  "acosh": (lambda x: x.acosh(), np.arccosh, "ge1", False),
  "atanh": (lambda x: x.atanh(), np.arctanh, "unit", False),
  "erf": (lambda x: x.erf(), erf, "all", True),
  "gelu": (lambda x: x.gelu(), lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3))), "all", False),
  "gelu_none": (lambda x: x.gelu(approximate="none"), lambda x: 0.5 * x * (1 + erf(x / math.sqrt(2))), "all", True),
  "quick_gelu": (lambda x: x.quick_gelu(), lambda x: x * sig(1.702 * x), "all", False),
  "silu": (lambda x: x.silu(), lambda x: x * sig(x), "all", False),
  "swish": (lambda x: x.swish(), lambda x: x * sig(x), "all", False),
  "elu": (lambda x: x.elu(), elu, "all", False),
  "elu_alpha": (lambda x: x.elu(alpha=0.5), lambda x: elu(x, 0.5), "all", False),
  "celu": (lambda x: x.celu(alpha=2.0), lambda x: np.maximum(0, x) + np.minimum(0, 2.0 * np.expm1(x / 2.0)), "all", False),
  "selu": (lambda x: x.selu(), lambda x: 1.0507009873554805 * elu(x, 1.6732632423543772), "all", False),
  "leaky_relu": (lambda x: x.leaky_relu(), lambda x: np.where(x < 0, 0.01 * x, x), "all", False),
  "leaky_relu_slope": (lambda x: x.leaky_relu(0.2), lambda x: np.where(x < 0, 0.2 * x, x), "all", False),
  "relu6": (lambda x: x.relu6(), lambda x: np.minimum(np.maximum(x, 0), 6), "all", False),
  "hardtanh": (lambda x: x.hardtanh(), lambda x: np.clip(x, -1, 1), "all", False),
  "hardtanh_range": (lambda x: x.hardtanh(-2, 0.5), lambda x: np.clip(x, -2, 0.5), "all", False),
  "hardsigmoid": (lambda x: x.hardsigmoid(), lambda x: np.clip(x / 6 + 0.5, 0, 1), "all", False),
  "hardswish": (lambda x: x.hardswish(), lambda x: x * np.clip(x + 3, 0, 6) / 6, "all", False),
  "mish": (lambda x: x.mish(), lambda x: x * np.tanh(softplus(x)), "all", False),
  "softplus": (lambda x: x.softplus(), softplus, "all", False),
  "softplus_beta": (lambda x: x.softplus(beta=2.0, threshold=5.0), lambda x: softplus(x, 2.0, 5.0), "all", False),
  "softsign": (lambda x: x.softsign(), lambda x: x / (1 + np.abs(x)), "all", False),
  "logsigmoid": (lambda x: x.logsigmoid(), logsig, "all", False),
}

def check(out: Tensor, ref, dt, poly=False):
  o, r = out.numpy(), np.asarray(ref)
  assert o.shape == r.shape and out.dtype is dt, (o.shape, r.shape, out.dtype, dt)
  rtol, atol = (POLY_TOL if poly else TOL)[dt]
  np.testing.assert_allclose(o.astype(np.float64), r.astype(dt.np).astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)

@pytest.mark.parametrize("dt", FLOATS, ids=[d.name for d in FLOATS])
@pytest.mark.parametrize("name", UNARY)
def test_unary(name, dt):
  f, ref, domain, poly = UNARY[name]
  x = edges(dt, domain)
  with np.errstate(all="ignore"): r = ref(x.astype(np.float64))
  check(f(Tensor(x)), r, dt, poly)

@pytest.mark.parametrize("name", ["atan", "erf", "gelu", "softplus", "logsigmoid", "asinh", "elu"])
def test_unary_transposed_and_empty(name):
  f, ref, domain, poly = UNARY[name]
  x = edges(dtypes.float32, domain)[:60].reshape(6, 10)
  with np.errstate(all="ignore"): check(f(Tensor(x).T), ref(x.T.astype(np.float64)), dtypes.float32, poly)
  assert f(Tensor(np.zeros((0, 3), np.float32))).numpy().shape == (0, 3)

def test_unary_ints_compute_in_float():
  x = np.arange(-3, 4, dtype=np.int32)
  check(Tensor(x).atan(), np.arctan(x.astype(np.float64)), dtypes.float32, True)
  check(Tensor(x).softplus(), softplus(x.astype(np.float64)), dtypes.float32)
  check(Tensor(x).elu(), elu(x.astype(np.float64)), dtypes.float32)

def test_small_arguments_keep_relative_accuracy():
  # the cancellation-free forms: sinh, asinh, atanh, erf, asin, atan ~ x and logsigmoid(x) ~ -exp(-x) in the tails
  x = np.array([1e-7, -3e-6, 1e-4, 2e-3], np.float32)
  for f, ref in [("sinh", np.sinh), ("asinh", np.arcsinh), ("atanh", np.arctanh), ("asin", np.arcsin), ("atan", np.arctan)]:
    np.testing.assert_allclose(getattr(Tensor(x), f)().numpy(), ref(x.astype(np.float64)), rtol=1e-6, err_msg=f)
  np.testing.assert_allclose(Tensor(x).erf().numpy(), erf(x.astype(np.float64)), rtol=1e-6)
  y = np.array([30, 60, 80], np.float32)
  np.testing.assert_allclose(Tensor(y).logsigmoid().numpy(), -np.exp(-y.astype(np.float64)), rtol=1e-5)   # exp's own error
  np.testing.assert_allclose(Tensor(-y).softplus().numpy(), np.exp(-y.astype(np.float64)), rtol=1e-5)
  np.testing.assert_allclose(Tensor(np.float32(1 - 1e-6)).acos().numpy(), np.arccos(np.float64(np.float32(1 - 1e-6))), rtol=1e-5)

# ---------------------------------------------------------------- binary math
@pytest.mark.parametrize("dt", FLOATS, ids=[d.name for d in FLOATS])
def test_logaddexp(dt):
  a = edges(dt, "all")
  b = np.concatenate([a[:21], np.random.default_rng(1).uniform(-6, 6, 43)]).astype(dt.np)[::-1].copy()
  pairs = np.array([[np.inf, np.inf], [-np.inf, -np.inf], [np.inf, -np.inf], [1e4, 1e4], [-1e4, -1e4], [2.0, 2.0]], dt.np)
  a, b = np.concatenate([a, pairs[:, 0]]), np.concatenate([b, pairs[:, 1]])
  with np.errstate(all="ignore"): check(Tensor(a).logaddexp(Tensor(b)), np.logaddexp(a.astype(np.float64), b.astype(np.float64)), dt)
  check(Tensor(a).logaddexp(1.5), np.logaddexp(a.astype(np.float64), 1.5), dt)

@pytest.mark.parametrize("dt", FLOATS, ids=[d.name for d in FLOATS])
def test_copysign(dt):
  a = np.array([1.5, -2, 0, -0.0, np.inf, -np.inf, np.nan, 3], dt.np)
  b = np.array([-1, 1, -0.0, 0, -np.inf, np.inf, -1, np.nan], dt.np)
  o = Tensor(a).copysign(Tensor(b)).numpy()
  np.testing.assert_array_equal(np.signbit(o), np.signbit(np.copysign(a, b)))
  np.testing.assert_array_equal(o, np.copysign(a, b))
  assert Tensor(np.array([1, -2], np.int32)).copysign(-1).numpy().tolist() == [-1.0, -2.0]   # ints: a float result
  np.testing.assert_array_equal(Tensor(a.reshape(2, 4)).copysign(Tensor(b[:4])).numpy(), np.copysign(a.reshape(2, 4), b[:4]))

@pytest.mark.parametrize("dt", FLOATS, ids=[d.name for d in FLOATS])
def test_isinf_isfinite_isnan(dt):
  x = np.array([0, -1, np.inf, -np.inf, np.nan, 65504, -0.0], dt.np)
  t = Tensor(x)
  np.testing.assert_array_equal(t.isinf().numpy(), np.isinf(x))
  np.testing.assert_array_equal(t.isinf(detect_negative=False).numpy(), np.isposinf(x))
  np.testing.assert_array_equal(t.isinf(detect_positive=False).numpy(), np.isneginf(x))
  assert not t.isinf(False, False).numpy().any()
  np.testing.assert_array_equal(t.isfinite().numpy(), np.isfinite(x))
  np.testing.assert_array_equal(t.isnan().numpy(), np.isnan(x))
  i = Tensor(np.array([0, -5, 7], np.int8))
  assert i.isfinite().numpy().all() and not i.isinf().numpy().any() and not i.isnan().numpy().any()
  assert i.isfinite().dtype is dtypes.bool

@pytest.mark.parametrize("dt", FLOATS, ids=[d.name for d in FLOATS])
def test_isclose(dt):
  a = np.array([1, 1, 0, 0, np.inf, np.inf, -np.inf, np.nan, np.nan, 100, 1e-9, 3], dt.np)
  b = np.array([1, 1 + 1e-6, 1e-9, 1e-7, np.inf, -np.inf, -np.inf, np.nan, 1, 100.0001, 0, np.nan], dt.np)
  for kw in [{}, {"equal_nan": True}, {"rtol": 0.0, "atol": 0.0}, {"rtol": 1e-2, "atol": 1e-3}, {"rtol": 0.1, "atol": 0.5, "equal_nan": True}]:
    np.testing.assert_array_equal(Tensor(a).isclose(Tensor(b), **kw).numpy(), np.isclose(a, b, **kw), err_msg=str(kw))
  np.testing.assert_array_equal(Tensor(a.reshape(3, 4)).isclose(Tensor(b[:4])).numpy(), np.isclose(a.reshape(3, 4), b[:4]))
  np.testing.assert_array_equal(Tensor(a).isclose(1.0).numpy(), np.isclose(a, 1.0))

def test_isclose_ints_and_allclose():
  a, b = np.array([0, 100000, -5, 127], np.int32), np.array([0, 100001, -6, 127], np.int32)
  np.testing.assert_array_equal(Tensor(a).isclose(Tensor(b)).numpy(), np.isclose(a, b))
  np.testing.assert_array_equal(Tensor(a).isclose(Tensor(b), rtol=0.0, atol=0.0).numpy(), a == b)
  x = np.random.default_rng(2).standard_normal(10).astype(np.float32)
  assert Tensor(x).allclose(Tensor(x + 1e-7)) is True and Tensor(x).allclose(Tensor(x + 1e-3)) is False
  assert Tensor(np.array([np.nan])).allclose(Tensor(np.array([np.nan])), equal_nan=True) is True
  assert Tensor(np.zeros((0,), np.float32)).allclose(Tensor(np.zeros((0,), np.float32))) is True
  with pytest.raises(ValueError, match="non-negative"): Tensor(x).isclose(Tensor(x), rtol=-1.0)

# ---------------------------------------------------------------- reductions with dtypes, var_mean/std_mean, bools
def test_reduction_dtypes():
  x = np.random.default_rng(3).uniform(-3, 3, (4, 5)).astype(np.float32)
  s = Tensor(x).sum(1, dtype=dtypes.float64)
  assert s.dtype is dtypes.float64 and np.allclose(s.numpy(), x.astype(np.float64).sum(1))
  i = np.array([[1, -2, 3], [4, 5, -6]], np.int8)
  p = Tensor(i).prod(1, dtype=dtypes.int64)
  assert p.dtype is dtypes.int64 and p.numpy().tolist() == i.astype(np.int64).prod(1).tolist()
  m = Tensor(i).mean(0, dtype=dtypes.float64)
  assert m.dtype is dtypes.float64 and np.allclose(m.numpy(), i.astype(np.float64).mean(0))
  assert Tensor(x).mean(dtype="float16").dtype is dtypes.float16
  np.testing.assert_allclose(Tensor(x).mean(dtype=dtypes.float64).numpy(), x.astype(np.float64).mean(), rtol=1e-12)
  with pytest.raises(TypeError, match="floating point"): Tensor(i).mean(dtype=dtypes.int32)

@pytest.mark.parametrize("axis,keepdim,correction", [(None, False, 1), (1, False, 1), (0, True, 0), ((0, 2), False, 1)])
def test_var_mean_std_mean(axis, keepdim, correction):
  x = np.random.default_rng(4).standard_normal((3, 4, 5)).astype(np.float32)
  ax = axis if not isinstance(axis, tuple) else axis
  v, m = Tensor(x).var_mean(axis, keepdim, correction)
  s, m2 = Tensor(x).std_mean(axis, keepdim, correction)
  rv, rm = x.var(ax, ddof=correction, keepdims=keepdim), x.mean(ax, keepdims=keepdim)
  for out, ref in [(v, rv), (m, rm), (s, np.sqrt(rv)), (m2, rm)]: np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-6)
  GlobalCounters.reset()
  Tensor(x).T.var_mean(0)[0].realize(Tensor(x).T.var_mean(0)[1])
  assert GlobalCounters.kernel_count <= 2

def test_bool_bitwise():
  r = np.random.default_rng(5)
  a, b = r.random((3, 4)) < 0.5, r.random(4) < 0.5
  A, B = Tensor(a), Tensor(b)
  for out, ref in [(A & B, a & b), (A | B, a | b), (A ^ B, a ^ b), (~A, ~a), (A.bitwise_not(), ~a), (A.logical_not(), ~a),
                   (A & True, a & True), (False | A, False | a), (A ^ True, a ^ True), (A.T & A.T, a.T & a.T)]:
    assert out.dtype is dtypes.bool
    np.testing.assert_array_equal(out.numpy(), ref)
  i = np.array([1, 2, 3, 4], np.int16)
  assert (A & Tensor(i)).dtype is dtypes.int16 and ((A & Tensor(i)).numpy() == (a & i)).all()   # bool promotes to int
  with pytest.raises(TypeError): Tensor(np.ones(4, np.float32)) & A

# ---------------------------------------------------------------- losses
def log_softmax(x, axis): return x - np.log(np.exp(x - x.max(axis, keepdims=True)).sum(axis, keepdims=True)) - x.max(axis, keepdims=True)
def reduce(l, reduction): return l.mean() if reduction == "mean" else l.sum() if reduction == "sum" else l
rng = np.random.default_rng(6)
LOGITS = rng.standard_normal((8, 5)).astype(np.float32) * 3
TARGET = rng.integers(0, 5, 8).astype(np.int32)

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ls", [0.0, 0.1])
def test_cross_entropy(reduction, ls):
  lp = log_softmax(LOGITS.astype(np.float64), 1)
  ref = -(1 - ls) * lp[np.arange(8), TARGET] - ls * lp.mean(1)
  out = Tensor(LOGITS).cross_entropy(Tensor(TARGET), reduction=reduction, label_smoothing=ls)
  np.testing.assert_allclose(out.numpy(), reduce(ref, reduction), rtol=1e-5, atol=1e-6)
  probs = np.random.default_rng(7).dirichlet(np.ones(5), 8).astype(np.float32)
  ref = -((probs * (1 - ls) + ls / 5) * lp).sum(1)
  np.testing.assert_allclose(Tensor(LOGITS).cross_entropy(Tensor(probs), reduction, ls).numpy(), reduce(ref, reduction), rtol=1e-5, atol=1e-6)

def test_cross_entropy_spatial_and_edges():
  x = rng.standard_normal((2, 4, 3)).astype(np.float32)   # (N, C, d): classes at dim 1
  y = rng.integers(0, 4, (2, 3)).astype(np.int64)
  lp = log_softmax(x.astype(np.float64), 1)
  ref = -np.take_along_axis(lp, y[:, None], 1)[:, 0]
  np.testing.assert_allclose(Tensor(x).cross_entropy(Tensor(y), reduction="none").numpy(), ref, rtol=1e-5)
  big = np.array([[1e4, 0, -1e4], [-np.inf, 2, 1]], np.float32)   # a -inf logit of another class is no NaN
  ref = [0, -log_softmax(big[1:2].astype(np.float64), 1)[0, 1]]
  np.testing.assert_allclose(Tensor(big).cross_entropy(Tensor(np.array([0, 1])), reduction="none").numpy(), ref, rtol=1e-5)
  with pytest.raises(ValueError, match="label_smoothing"): Tensor(LOGITS).cross_entropy(Tensor(TARGET), label_smoothing=1.5)
  with pytest.raises(ValueError, match="reduction"): Tensor(LOGITS).cross_entropy(Tensor(TARGET), reduction="avg")
  with pytest.raises(ValueError, match="neither"): Tensor(LOGITS).cross_entropy(Tensor(TARGET[:4]))

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("ignore_index,ls", [(-1, 0.0), (2, 0.0), (2, 0.2), (-1, 0.3)])
def test_sparse_categorical_crossentropy(reduction, ignore_index, ls):
  x = rng.standard_normal((2, 6, 4)).astype(np.float32)   # classes last
  y = np.array([[0, 1, 2, 3, 2, 1], [3, 2, 2, 0, 1, -1]], np.int32)
  lp = log_softmax(x.astype(np.float64), -1)
  mask = (y != ignore_index) if ignore_index != -1 else np.ones_like(y, bool)
  picked = np.where((y >= 0)[..., None], np.take_along_axis(lp, np.maximum(y, 0)[..., None], -1), 0)[..., 0] * mask
  un = (1 - ls) * picked + ls * lp.mean(-1) * mask
  ref = -(un.sum() / mask.sum()) if reduction == "mean" else -un.sum() if reduction == "sum" else -un
  out = Tensor(x).sparse_categorical_crossentropy(Tensor(y), ignore_index=ignore_index, label_smoothing=ls, reduction=reduction)
  np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-6)

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("weighted,ignore_index", [(False, None), (True, None), (False, 1), (True, 3)])
def test_nll_loss(reduction, weighted, ignore_index):
  lp = log_softmax(LOGITS.astype(np.float64), 1)
  w = np.array([0.5, 1, 2, 0.25, 3], np.float32)
  wy = (w[TARGET] if weighted else np.ones(8)) * (TARGET != ignore_index if ignore_index is not None else 1)
  nll = -lp[np.arange(8), TARGET] * wy
  ref = nll.sum() / wy.sum() if reduction == "mean" else reduce(nll, reduction)
  out = Tensor(lp.astype(np.float32)).nll_loss(Tensor(TARGET), Tensor(w) if weighted else None, ignore_index, reduction)
  np.testing.assert_allclose(out.numpy(), ref, rtol=1e-5, atol=1e-6)

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_binary_crossentropy(reduction):
  p = np.array([0, 1, 0.5, 1e-6, 0.999, 0.3, 0, 1], np.float32)
  y = np.array([0, 1, 1, 0, 1, 0.25, 1, 0], np.float32)   # p = 0 or 1 against the other label: the log clamps at -100
  p64 = p.astype(np.float64)
  with np.errstate(all="ignore"): ref = -(y * np.maximum(np.log(p64), -100) + (1 - y) * np.maximum(np.log1p(-p64), -100))
  np.testing.assert_allclose(Tensor(p).binary_crossentropy(Tensor(y), reduction).numpy(), reduce(ref, reduction), rtol=1e-5, atol=1e-6)

@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("pos_weight", [None, 2.5])
def test_binary_crossentropy_logits(reduction, pos_weight):
  x = np.array([[-200, -20, -1, 0], [1, 20, 200, 3]], np.float32)   # large logits: no overflow through logsigmoid
  y = np.array([[0, 1, 1, 0], [1, 0, 1, 0.5]], np.float32)
  pw = np.array([1, pos_weight or 1, 2, 0.5], np.float32)
  x64 = x.astype(np.float64)
  ref = -((pw if pos_weight else 1) * y * logsig(x64) + (1 - y) * logsig(-x64))
  out = Tensor(x).binary_crossentropy_logits(Tensor(y), reduction, Tensor(pw) if pos_weight else None)
  np.testing.assert_allclose(out.numpy(), reduce(ref, reduction), rtol=1e-5, atol=1e-6)

def test_one_hot_and_arange_from_movement():
  for n in (1, 2, 3, 5, 8, 13, 64, 100):   # the UOp's arange (a Tensor's is data)
    np.testing.assert_array_equal(OpMixin._arange(Tensor(np.zeros(1, np.float32)), n).numpy(), np.arange(n))
  y = np.array([0, 4, 2, 7, -1], np.int32)   # outside [0, n): no class
  np.testing.assert_array_equal(Tensor(y)._one_hot(5, -1).numpy(), y[:, None] == np.arange(5))

def test_uop_builds_the_same_graphs():
  x, y = Tensor(LOGITS), Tensor(TARGET)
  assert x.uop.erf().gelu().logaddexp(x.uop).atan().sum() is x.erf().gelu().logaddexp(x).atan().sum().uop
  u, t = x.uop.cross_entropy(y.uop, label_smoothing=0.1), x.cross_entropy(y, label_smoothing=0.1)   # one-hots against different aranges
  assert u.shape == t.shape == () and u.dtype is t.dtype

# ---------------------------------------------------------------- kernel counts
def kernels(fn, *arrays):
  ts = [Tensor(a) for a in arrays]
  GlobalCounters.reset()
  out = fn(*ts).numpy()
  return GlobalCounters.kernel_count, out

X, W = rng.standard_normal((16, 32)).astype(np.float32), rng.standard_normal((32, 24)).astype(np.float32)

@pytest.mark.parametrize("act", ["gelu", "silu", "mish", "elu", "erf", "logsigmoid", "hardswish", "atan"])
def test_activation_fuses_into_matmul(act):
  base, _ = kernels(lambda x, w: x @ w, X, W)
  n, out = kernels(lambda x, w: getattr(x @ w, act)(), X, W)
  assert n == base == 1, f"{act}: {n} kernels, the matmul alone {base}"
  ref = UNARY.get(act, (None, {"erf": erf, "atan": np.arctan}.get(act)))[1]
  np.testing.assert_allclose(out, ref((X.astype(np.float64) @ W)), rtol=1e-4, atol=1e-4)

def test_elementwise_chain_with_activations_is_one_kernel():
  n, out = kernels(lambda a, b: (a * b + 1).gelu().softplus().leaky_relu().logaddexp(a).tanh(), X, X.T.copy().T)
  assert n == 1
  assert np.isfinite(out).all()

def test_cross_entropy_kernels():
  n, out = kernels(lambda x, y: x.cross_entropy(y), LOGITS, TARGET)
  assert n <= 2, n
  n2, _ = kernels(lambda x, y: x.cross_entropy(y, label_smoothing=0.1), LOGITS, TARGET)
  n3, _ = kernels(lambda x, y: x.sparse_categorical_crossentropy(y), LOGITS, TARGET)
  assert n2 <= 2 and n3 <= 2, (n2, n3)
