"""Edge cases of the Tensor API, differential against numpy (float64 or plain-Python references where numpy lacks the
op): empty and 0-d tensors, negative and out-of-range dims, non-contiguous inputs, NaN and ties in the ordering ops,
int/bool/float16 inputs, and degenerate arguments that must raise at the user's line. Few shapes, shared between tests,
so that compiled kernels are reused."""
import math
import numpy as np
import pytest
from morok_mlir import Tensor, dtypes

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
nan, inf = math.nan, math.inf
X = np.arange(12, dtype=np.float32).reshape(3, 4) * 0.75 - 4     # (3, 4): the shape most tests share
E = np.zeros((0, 3), np.float32)
S = np.float32(2.5)
XN = np.array([[3, nan, 1, nan, 2, -inf], [nan, 0, -0.0, -1, 5, inf]], np.float32)   # NaN, infinities, -0.0
XT = np.array([[1, 2, 2, 1, 2, 1], [0, 0, 0, 0, 0, 0]], np.float32)                  # ties

def check(out, ref, rtol=1e-5, atol=1e-6):
  out = out.numpy() if isinstance(out, Tensor) else out
  ref = np.asarray(ref)
  assert out.shape == ref.shape and out.dtype.kind == ref.dtype.kind, (out.shape, out.dtype, ref.shape, ref.dtype)
  if ref.dtype.kind == "f": np.testing.assert_allclose(out.astype(np.float64), ref.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)
  else: np.testing.assert_array_equal(out, ref)

def raises_at(exc, f, *args, match=None):
  """f is a one-line lambda calling the Tensor API: its error must name f's line, not an internal one."""
  with pytest.raises(exc, match=match) as e: f(*args)
  assert f"{__file__}:{f.__code__.co_firstlineno}:" in str(e.value) and "internal error" not in str(e.value), str(e.value)

def lse_ref(x, axis=None, keepdims=False):
  x = np.asarray(x, np.float64)
  m = np.max(x, axis, keepdims=True, initial=-inf)
  m = np.where(np.isinf(m), 0, m)
  r = np.log(np.sum(np.exp(x - m), axis, keepdims=True)) + m
  return r if keepdims else r.reshape(np.sum(x, axis).shape)

def sort_ref(x, descending=False):
  """Stable sort of the last axis with NaN largest (last ascending, first descending), as numpy/PyTorch."""
  def order(row):
    key = (lambda i: (not math.isnan(row[i]), 0.0 if math.isnan(row[i]) else -row[i])) if descending else \
          (lambda i: (math.isnan(row[i]), 0.0 if math.isnan(row[i]) else row[i]))
    return sorted(range(len(row)), key=key)
  idx = np.array([order(r) for r in x.reshape(-1, x.shape[-1])], np.int64).reshape(x.shape)
  return np.take_along_axis(x, idx, -1), idx

# ---------------------------------------------------------------- empty tensors
REDUCE = {"sum": (lambda x, a: x.sum(a), lambda x, a: np.sum(x, a)), "mean": (lambda x, a: x.mean(a), lambda x, a: np.mean(x, a)),
          "prod": (lambda x, a: x.prod(a), lambda x, a: np.prod(x, a)), "var": (lambda x, a: x.var(a), lambda x, a: np.var(x, a, ddof=1)),
          "std": (lambda x, a: x.std(a), lambda x, a: np.std(x, a, ddof=1)), "logsumexp": (lambda x, a: x.logsumexp(a), lse_ref),
          "any": (lambda x, a: x.any(a), lambda x, a: np.any(x, a)), "all": (lambda x, a: x.all(a), lambda x, a: np.all(x, a))}

@pytest.mark.parametrize("axis", [None, 0, 1, -1])
@pytest.mark.parametrize("op", REDUCE)
def test_empty_reduce_gives_numpys_value(op, axis):
  f, ref = REDUCE[op]
  check(f(Tensor(E), axis), ref(E, axis))

@pytest.mark.parametrize("op", ["max", "min", "argmax", "argmin"])
def test_empty_max_raises(op):
  """max/min have no identity: reducing an empty dim raises (PyTorch, numpy); a reduction of a non-empty dim of an empty
  tensor is an empty result."""
  raises_at(ValueError if op in ("max", "min") else IndexError, lambda: getattr(Tensor(E), op)())
  raises_at(IndexError, lambda: getattr(Tensor(E), op)(0))
  raises_at(IndexError, lambda: getattr(Tensor(E), op)(-2))
  assert getattr(Tensor(E), op)(1).numpy().shape == (0,)

def test_empty_softmax_and_var_mean():
  z = np.zeros((2, 0), np.float32)
  check(Tensor(z).softmax(-1), z)
  check(Tensor(z).log_softmax(1), z)
  v, m = Tensor(E).var_mean(0)
  check(v, np.full(3, nan, np.float32)), check(m, np.full(3, nan, np.float32))

EE = np.zeros((2, 0, 3), np.float32)   # an empty dim that is not the one operated on
@pytest.mark.parametrize("name,f,ref", [
  ("sort", lambda x: x.sort(-1)[0], lambda x: np.sort(x, -1)), ("argsort", lambda x: x.argsort(2), lambda x: np.zeros(x.shape, np.int32)),
  ("topk", lambda x: x.topk(2)[1], lambda x: np.zeros((2, 0, 2), np.int32)), ("sort1", lambda x: x.sort(1)[0], lambda x: x),
  ("cumsum", lambda x: x.cumsum(-1), lambda x: x), ("cummax", lambda x: x.cummax(2)[0], lambda x: x),
  ("logcumsumexp", lambda x: x.logcumsumexp(1), lambda x: x), ("softmax", lambda x: x.softmax(-1), lambda x: x),
  ("cat", lambda x: x.cat(x, dim=1), lambda x: np.concatenate([x, x], 1)), ("roll", lambda x: x.roll(1), lambda x: x),
  ("repeat_interleave", lambda x: x.repeat_interleave(2, 2), lambda x: np.repeat(x, 2, 2)), ("tril", lambda x: x.tril(), lambda x: x),
  ("max", lambda x: x.max(-1), lambda x: np.zeros((2, 0), np.float32)), ("argmax", lambda x: x.argmax(2), lambda x: np.zeros((2, 0), np.int32)),
  ("max_pool2d", lambda x: x.reshape(0, 2, 3, 3).max_pool2d(2), lambda x: np.zeros((0, 2, 1, 1), np.float32)),
  ("avg_pool2d", lambda x: x.reshape(0, 2, 3, 3).avg_pool2d(2, 1), lambda x: np.zeros((0, 2, 2, 2), np.float32))],
  ids=lambda v: v if isinstance(v, str) else "")
def test_empty_other_dim(name, f, ref):
  check(f(Tensor(EE)), ref(EE))

def test_cat_skips_1d_empty():
  """PyTorch's cat skips a (0,) tensor among tensors of another rank; its dtype still takes part in the promotion."""
  a, z = np.arange(6, dtype=np.int32).reshape(2, 3), np.zeros(0, np.float32)
  check(Tensor(z).cat(Tensor(a), dim=1), a.astype(np.float32))
  check(Tensor.cat(Tensor(a), Tensor(z), Tensor(a)), np.concatenate([a, a]).astype(np.float32))
  check(Tensor(z).cat(Tensor(z)), np.zeros(0, np.float32))
  check(Tensor(np.zeros((2, 0), np.float32)).cat(Tensor(a), dim=1), a.astype(np.float32))

def test_conv_transpose_empty_output():
  """An output size of exactly 0 is an empty result (PyTorch); a negative one or an empty input plane raises."""
  x, w = Tensor(np.ones((2, 4, 5, 1), np.float32)), Tensor(np.ones((4, 2, 2, 2), np.float32))
  check(x.conv_transpose2d(w, groups=2, stride=2, dilation=(2, 1), padding=(2, 1), output_padding=(1, 0)), np.zeros((2, 4, 8, 0), np.float32))
  raises_at(ValueError, lambda: x.conv_transpose2d(w, padding=(3, 3)), match="negative size")
  raises_at(ValueError, lambda: Tensor(np.ones((2, 4, 0, 3), np.float32)).conv_transpose2d(w), match="empty spatial")

# ---------------------------------------------------------------- 0-d tensors
@pytest.mark.parametrize("name,f,ref", [
  ("sum", lambda x: x.sum(0), S), ("max", lambda x: x.max(-1), S), ("argmax", lambda x: x.argmax(0), 0), ("cumsum", lambda x: x.cumsum(0), S),
  ("cumprod", lambda x: x.cumprod(-1), S), ("logcumsumexp", lambda x: x.logcumsumexp(0), S), ("sort", lambda x: x.sort(0)[0], S),
  ("argsort", lambda x: x.argsort(-1), 0), ("cummax", lambda x: x.cummax(0)[1], 0), ("softmax", lambda x: x.softmax(-1), np.float32(1)),
  ("log_softmax", lambda x: x.log_softmax(0), np.float32(0)), ("logsumexp", lambda x: x.logsumexp(0), S), ("var", lambda x: x.var(), np.float32(nan)),
  ("flip", lambda x: x.flip(0), S), ("transpose", lambda x: x.transpose(0, -1), S), ("squeeze", lambda x: x.squeeze(-1), S),
  ("roll", lambda x: x.roll(1), S), ("gather", lambda x: x.gather(0, Tensor(np.int32(0))), S), ("unsqueeze", lambda x: x.unsqueeze(-1), [S])],
  ids=lambda v: v if isinstance(v, str) else "")
def test_0d(name, f, ref):
  check(f(Tensor(S)), np.asarray(ref))

# ---------------------------------------------------------------- dims: negative, out of range
DIM_OPS = {
  "cumsum": lambda x, d: x.cumsum(d),
  "cumprod": lambda x, d: x.cumprod(d),
  "cummax": lambda x, d: x.cummax(d)[1],
  "logcumsumexp": lambda x, d: x.logcumsumexp(d),
  "sort": lambda x, d: x.sort(d)[1],
  "topk": lambda x, d: x.topk(2, d)[0],
  "softmax": lambda x, d: x.softmax(d),
  "logsumexp": lambda x, d: x.logsumexp(d),
  "var": lambda x, d: x.var(d),
  "argmax": lambda x, d: x.argmax(d),
  "max": lambda x, d: x.max(d),
  "cat": lambda x, d: x.cat(x, dim=d),
  "split": lambda x, d: x.split(2, d)[0],
  "chunk": lambda x, d: x.chunk(2, d)[1],
  "roll": lambda x, d: x.roll(1, d),
  "unfold": lambda x, d: x.unfold(d, 2, 1),
  "repeat_interleave": lambda x, d: x.repeat_interleave(2, d),
  "gather": lambda x, d: x.gather(d, Tensor(np.ones((2, 2), np.int32))),
  "flip": lambda x, d: x.flip(d),
  "transpose": lambda x, d: x.transpose(d, 0),
  "squeeze": lambda x, d: x.squeeze(d),
  "flatten": lambda x, d: x.flatten(d),
}

@pytest.mark.parametrize("d", [0, 1])
@pytest.mark.parametrize("op", DIM_OPS)
def test_negative_dim(op, d):
  check(DIM_OPS[op](Tensor(X), d - 2), DIM_OPS[op](Tensor(X), d).numpy())

@pytest.mark.parametrize("d", [2, -3])
@pytest.mark.parametrize("op", DIM_OPS)
def test_dim_out_of_range(op, d):
  raises_at(IndexError, DIM_OPS[op], Tensor(X), d, match="out of range")

# ---------------------------------------------------------------- NaN and ties
@pytest.mark.parametrize("descending", [False, True])
@pytest.mark.parametrize("x", [XN, XT], ids=["nan", "ties"])
def test_sort_nan_ties(x, descending):
  v, i = Tensor(x).sort(-1, descending)
  rv, ri = sort_ref(x, descending)
  check(v, rv), check(i, ri.astype(np.int32))
  check(Tensor(x).argsort(1, descending), ri.astype(np.int32))
  tv, ti = Tensor(x).topk(3, largest=descending)
  check(tv, rv[:, :3]), check(ti, ri[:, :3].astype(np.int32))

@pytest.mark.parametrize("x", [XN, XT], ids=["nan", "ties"])
def test_max_argmax_nan_ties(x):
  """NaN propagates through max/min and is where argmax/argmin point; ties give the first index (numpy, PyTorch)."""
  for a in (None, 0, 1):
    check(Tensor(x).max(a), np.max(x, a)), check(Tensor(x).min(a), np.min(x, a))
    check(Tensor(x).argmax(a), np.argmax(x, a).astype(np.int32)), check(Tensor(x).argmin(a), np.argmin(x, a).astype(np.int32))

@pytest.mark.parametrize("x", [XN, XT], ids=["nan", "ties"])
def test_cummax_nan_ties(x):
  """PyTorch's cummax: NaN propagates and takes the index of the latest NaN; ties take the latest index."""
  rv, ri = np.empty_like(x), np.empty(x.shape, np.int32)
  for r, row in enumerate(x):
    best, bi = -inf, 0
    for j, v in enumerate(row):
      if math.isnan(v) or (not math.isnan(best) and v >= best): best, bi = v, j
      rv[r, j], ri[r, j] = best, bi
  v, i = Tensor(x).cummax(1)
  check(v, rv), check(i, ri)

@pytest.mark.parametrize("shape,axis", [((600, 7), 0), ((3, 1100, 5), 1), ((530, 2, 3), 0)])
def test_scans_along_a_long_leading_axis(shape, axis):
  """Scans along an axis other than the last, longer than one window reduce (over 2 x 256): stored moved last, then
  scanned in blocks (_cumalu), against numpy's accumulations."""
  x = (np.random.default_rng(3).standard_normal(shape) * 0.1 + 1).astype(np.float32)
  np.testing.assert_allclose(Tensor(x).cumsum(axis).numpy(), np.cumsum(x.astype(np.float64), axis), rtol=1e-4, atol=1e-3)
  np.testing.assert_allclose(Tensor(x).cumprod(axis).numpy(), np.cumprod(x.astype(np.float64), axis), rtol=2e-3)
  np.testing.assert_array_equal(Tensor(x).cummax(axis)[0].numpy(), np.maximum.accumulate(x, axis))
  lse = np.log(np.cumsum(np.exp(x.astype(np.float64)), axis))
  np.testing.assert_allclose(Tensor(x).logcumsumexp(axis).numpy(), lse, rtol=1e-5)
  i = (x * 10).astype(np.int32)
  np.testing.assert_array_equal(Tensor(i).cumsum(axis).numpy(), np.cumsum(i, axis))

@pytest.mark.parametrize("equal_nan", [False, True])
def test_isclose_nan_inf(equal_nan):
  y = XN[::-1].copy()
  check(Tensor(XN).isclose(Tensor(XN), equal_nan=equal_nan), np.isclose(XN, XN, equal_nan=equal_nan))
  check(Tensor(XN).isclose(Tensor(y), equal_nan=equal_nan), np.isclose(XN, y, equal_nan=equal_nan))
  assert Tensor(XN).allclose(Tensor(XN), equal_nan=True) and not Tensor(XN).allclose(Tensor(XN))

# ---------------------------------------------------------------- logsumexp, softmax: infinities, unsigned and bool inputs
@pytest.mark.parametrize("x", [[-inf, -inf, -inf], [inf, 1, -inf], [1, -inf, 2], [inf, inf, 0], [nan, 1, 2]], ids=str)
def test_logsumexp_infinities(x):
  """An infinite max shifts by 0: all -inf gives -inf and +inf gives +inf, not NaN (PyTorch)."""
  a = np.array(x, np.float32)
  check(Tensor(a).logsumexp(0), lse_ref(a, 0).astype(np.float32))
  check(Tensor(a).logcumsumexp(0), np.array([lse_ref(a[:k + 1], 0) for k in range(3)], np.float32))

U8 = np.array([[0, 200, 3], [255, 1, 7]], np.uint8)
@pytest.mark.parametrize("x", [U8, U8.astype(np.int32) * 10 ** 6 - 10 ** 8, U8 > 2], ids=["uint8", "int32", "bool"])
def test_softmax_int_inputs(x):
  """int/bool inputs compute in float: the max shift of an unsigned dtype would wrap (x - max < 0), an int32 one overflow."""
  f = x.astype(np.float64)
  e = np.exp(f - f.max(1, keepdims=True))
  check(Tensor(x).softmax(1), e / e.sum(1, keepdims=True), atol=1e-6)
  check(Tensor(x).log_softmax(-1), f - lse_ref(f, 1, keepdims=True), rtol=1e-5, atol=1e-4)
  check(Tensor(x).logsumexp(1), lse_ref(f, 1), rtol=1e-6)

@pytest.mark.parametrize("op", ["softmax", "log_softmax", "logsumexp", "logcumsumexp", "layernorm"])
def test_half_softmax_rounds_once(op):
  """float16 softmax, logcumsumexp, layernorm compute in float32 (PyTorch's opmath) and round once: within an ulp of the
  float64 value (in float16 they were 6 to 77 ulps off)."""
  x = (np.random.default_rng(0).standard_normal((4, 50)) * 3).astype(np.float16)
  f = x.astype(np.float64)
  ref = {"softmax": lambda: np.exp(f - lse_ref(f, 1, True)), "log_softmax": lambda: f - lse_ref(f, 1, True), "logsumexp": lambda: lse_ref(f, 1),
         "logcumsumexp": lambda: np.logaddexp.accumulate(f, 1), "layernorm": lambda: (f - f.mean(1, keepdims=True)) / np.sqrt(f.var(1, keepdims=True) + 1e-5)}[op]()
  out = getattr(Tensor(x), op)(1).numpy()
  assert out.dtype == np.float16
  assert np.all(np.abs(out - ref) <= np.spacing(np.abs(ref).astype(np.float16)).astype(np.float64)), op

TINY = np.array([5.6e-8, -3e-6, 1e-4, -0.02, -0.999999, 0.9999, -0.0, 0.0, 20, -inf, nan], np.float32)
@pytest.mark.parametrize("op,ref", [("tanh", np.tanh), ("atanh", np.arctanh), ("asinh", np.arcsinh), ("atan", np.arctan)], ids=lambda v: v if isinstance(v, str) else "")
@pytest.mark.parametrize("dt", [dtypes.float32, dtypes.float16], ids=lambda d: d.name)
def test_odd_functions_small_and_near_one(op, ref, dt):
  """Relative accuracy near 0 and near |x| = 1, -0.0 kept: tanh(5.6e-8) was 1.2e-7 (2 sigmoid(2x) - 1 cancels), atanh(-0.999999)
  was 0.4% off (log1p of an argument near -1), atanh/asinh/atan(-0.0) gave +0.0."""
  x = TINY.astype(dt.np)
  with np.errstate(all="ignore"): r = ref(x.astype(np.float64))
  out = getattr(Tensor(x), op)().numpy()
  np.testing.assert_allclose(out.astype(np.float64), r, rtol=4e-7 if dt == dtypes.float32 else 1e-3, atol=0, equal_nan=True)
  assert (np.signbit(out) == np.signbit(r))[~np.isnan(r)].all()

def test_unsigned_with_negative_scalar():
  """copysign/logaddexp take a float view first: a -1 given to a uint8 tensor must not wrap to 255."""
  check(Tensor(U8).copysign(-1), np.copysign(U8.astype(np.float32), -1))
  check(Tensor(U8).logaddexp(-1), np.logaddexp(U8.astype(np.float64), -1).astype(np.float32))

def test_sign_bool():
  b = np.array([True, False])
  check(Tensor(b).sign(), b)   # PyTorch: sign of bool is bool

# ---------------------------------------------------------------- einsum broadcasting, gather/multinomial/attention corners
@pytest.mark.parametrize("f,shapes", [("ij,ij->i", [(1, 3), (2, 3)]), ("ij,jk->ik", [(2, 1), (3, 4)]), ("bij,bjk->bik", [(1, 2, 3), (4, 3, 2)])], ids=str)
def test_einsum_size1_broadcasts(f, shapes):
  ops = [np.arange(math.prod(s), dtype=np.float32).reshape(s) - 2 for s in shapes]
  check(Tensor.einsum(f, *map(Tensor, ops)), np.einsum(f, *ops))

def test_masked_ops_broadcast_both_ways():
  """PyTorch's masked_fill and masked_select broadcast the mask and the tensor together (a larger mask raised)."""
  a, m = X[0], np.arange(12).reshape(3, 4) % 3 == 0
  check(Tensor(a).masked_fill(Tensor(m), 9.0), np.where(m, np.float32(9), a))
  check(Tensor(a).masked_select(Tensor(m)), np.broadcast_to(a, m.shape)[m])
  check(Tensor(X).masked_select(Tensor(m[0])), X[np.broadcast_to(m[0], X.shape)])

NP_MODE = {"reflect": "reflect", "replicate": "edge", "circular": "wrap"}
@pytest.mark.parametrize("pads", [(1, -2), (-1, 2), (-1, 1), (2, -1)], ids=str)
@pytest.mark.parametrize("mode", NP_MODE)
def test_pad_mode_negative_and_positive(mode, pads):
  """PyTorch: a negative pad cuts after reflect/replicate padding of the other side (reflect (1, -2) of [a, b, c] is [b, a];
  it raised, cutting first), before circular padding."""
  a, (b, e) = np.arange(1, 4, dtype=np.float32).reshape(1, 3) * np.float32(1.5), pads
  cut = lambda x: x[:, -min(b, 0):x.shape[1] + min(e, 0)]
  grow = lambda x: np.pad(x, ((0, 0), (max(b, 0), max(e, 0))), NP_MODE[mode])
  check(Tensor(a).pad(pads, mode=mode), grow(cut(a)) if mode == "circular" else cut(grow(a)))

def test_multinomial_corners():
  assert Tensor(np.ones((0, 3), np.float32)).multinomial(2).numpy().shape == (0, 2)
  raises_at(ValueError, lambda: Tensor(np.ones(3, np.float32)).multinomial(-1))
  raises_at(ValueError, lambda: Tensor(np.ones(3, np.float32)).multinomial(0))

def test_attention_fully_masked_row():
  """A query that sees no key gives 0 (PyTorch's safe softmax), not NaN; the other rows are unchanged."""
  q, k, v = (np.arange(6, dtype=np.float32).reshape(2, 3) * 0.1, np.ones((4, 3), np.float32), np.arange(8, dtype=np.float32).reshape(4, 2))
  m = np.array([[True] * 4, [False] * 4])
  out = Tensor(q).scaled_dot_product_attention(Tensor(k), Tensor(v), attn_mask=Tensor(m)).numpy()
  check(out, np.stack([v.mean(0), np.zeros(2, np.float32)]))
  check(Tensor(q).scaled_dot_product_attention(Tensor(k[:0]), Tensor(v[:0])), np.zeros((2, 2), np.float32))

def test_attention_int_inputs():
  """int q, k, v: the scores stay float (they were cast back to int, truncating them before the softmax)."""
  x = np.arange(6, dtype=np.int32).reshape(2, 3)
  f = x.astype(np.float64)
  s = f @ f.T / math.sqrt(3)
  e = np.exp(s - s.max(1, keepdims=True))
  check(Tensor(x).scaled_dot_product_attention(Tensor(x), Tensor(x)), (e / e.sum(1, keepdims=True) @ f).astype(np.float32))

# ---------------------------------------------------------------- non-contiguous inputs
A = np.arange(60, dtype=np.float32).reshape(3, 4, 5) % 7 - 3   # ties, signs
VIEWS = {"permute": lambda t: t.permute(2, 0, 1), "flip": lambda t: t.flip(1), "stride": lambda t: t[:, ::-2, 1:],
         "expand": lambda t: t[:, :1].expand(3, 4, 5)}
NP_VIEWS = {"permute": lambda a: a.transpose(2, 0, 1), "flip": lambda a: a[:, ::-1], "stride": lambda a: a[:, ::-2, 1:],
            "expand": lambda a: np.broadcast_to(a[:, :1], (3, 4, 5))}
@pytest.mark.parametrize("view", VIEWS)
def test_non_contiguous(view):
  t, a = VIEWS[view](Tensor(A)), np.ascontiguousarray(NP_VIEWS[view](A))
  check(t.cumsum(-1), np.cumsum(a, -1))
  check(t.sort(1)[1], sort_ref(a.swapaxes(1, -1))[1].swapaxes(1, -1).astype(np.int32))
  check(t.argmax(0), np.argmax(a, 0).astype(np.int32))
  check(t.logsumexp(-1), lse_ref(a, -1).astype(np.float32))
  check(t.roll(2, 1), np.roll(a, 2, 1))
  check(t.pad(((0, 0), (1, 1), (2, 1)), mode="reflect"), np.pad(a, ((0, 0), (1, 1), (2, 1)), mode="reflect"))
  check(t.gather(1, Tensor(np.zeros((2, 2, 2), np.int32) + 1)), np.take_along_axis(a[:2, :, :2], np.ones((2, 2, 2), np.int64), 1))

# ---------------------------------------------------------------- degenerate arguments raise at the user's line
P = np.zeros((1, 2, 3, 3), np.float32)
BAD = [
  (ValueError, lambda: Tensor(X).reshape(5, 3)),
  (ValueError, lambda: Tensor(X).reshape(-1, -1)),
  (ValueError, lambda: Tensor.zeros(-1, 3)),
  (ValueError, lambda: Tensor.rand(2, -3)),
  (ValueError, lambda: Tensor(P).max_pool2d(4)),
  (ValueError, lambda: Tensor(P).avg_pool2d(2, 0)),
  (ValueError, lambda: Tensor(P).conv2d(Tensor(np.zeros((2, 1, 2, 2), np.float32)), groups=3)),
  (ValueError, lambda: Tensor(P).conv2d(Tensor(np.zeros((3, 1, 2, 2), np.float32)), groups=2)),
  (ValueError, lambda: Tensor(P).conv2d(Tensor(np.zeros((2, 2, 4, 4), np.float32)))),
  (ValueError, lambda: Tensor(P).interpolate((0, 2))),
  (ValueError, lambda: Tensor(P[:, :, :0]).interpolate((2, 2))),
  (IndexError, lambda: Tensor(X).topk(5)),
  (ValueError, lambda: Tensor(X).unfold(1, 5, 1)),
  (ValueError, lambda: Tensor(X).pad((4, 0), mode="reflect")),
  (ValueError, lambda: Tensor(X).split(-1)),
  (ValueError, lambda: Tensor(X).repeat(-1, 1)),
  (ValueError, lambda: Tensor(X).max_pool2d(2, dilation=3)),
]
@pytest.mark.parametrize("exc,f", BAD, ids=[str(i) for i in range(len(BAD))])
def test_degenerate_raises(exc, f):
  raises_at(exc, f)
