"""Symbolic shapes (tinygrad's Variable API): a dimension bound to a value compiles once for every value in [min, max]."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from morok_mlir import Tensor, Variable, dtypes
from morok_mlir.core.uop import UOp, sym_val
from morok_mlir.dialects.ops import Ops
from morok_mlir.ir.emit import normalize, graph_func
from morok_mlir.realize import GlobalCounters

X = np.random.default_rng(0).standard_normal((64, 16)).astype(np.float32)

def test_ten_values_one_compile():
  v, x = Variable("rows_once", 1, 64), Tensor(X)
  GlobalCounters.reset()
  for k in (1, 2, 5, 9, 16, 23, 31, 40, 63, 64):
    y = (x.shrink(((0, v.bind(k)), None)) * 2 + 1).sum(1)
    np.testing.assert_allclose(y.numpy(), (X[:k] * 2 + 1).sum(1), rtol=1e-5, atol=1e-5)
  assert GlobalCounters.compiled == 1   # the schedule cache hits for every later value

def test_cache_key_has_no_value():
  v, x = Variable("n", 1, 64), Tensor(X)
  (k1, _, v1), (k2, _, v2) = (normalize([x.shrink(((0, v.bind(k)), None)).uop]) for k in (3, 7))
  assert k1 == k2 and (v1, v2) == ((3,), (7,))
  assert not any(u.op is Ops.BIND for u in k1[0].toposort)
  assert normalize([(x + 1).uop])[2] == ()   # no symbolic size: no values

def test_shape_shows_bound_var():
  v = Variable("n", 1, 64)
  t = Tensor.empty(v.bind(10), 64)
  assert isinstance(t.shape[0], UOp) and t.shape[0].op is Ops.BIND and t.shape[1] == 64
  assert sym_val(t.shape[0]) == 10 and "bind(10)" in repr(t.shape)
  assert t.numpy().shape == (10, 64)

def test_reshape():
  v = Variable("n", 1, 64)
  a = np.arange(37 * 64, dtype=np.float32)
  y = Tensor(a).reshape(v.bind(37), 64)
  assert y.shape[1] == 64 and sym_val(y.shape[0]) == 37
  np.testing.assert_allclose(y.sum(0).numpy(), a.reshape(37, 64).sum(0))
  np.testing.assert_allclose(y.sum(1).numpy(), a.reshape(37, 64).sum(1))
  np.testing.assert_allclose(y.reshape(-1).numpy(), a)
  with pytest.raises(ValueError, match="invalid for input of size 2368"): Tensor(a).reshape(v.bind(36), 64)

@pytest.mark.parametrize("k", [1, 6, 16])
def test_shrink_and_elementwise(k):
  v, w = Variable("n", 1, 64), Variable("m", 1, 16)
  x, y = Tensor(X), Tensor(X[::-1].copy())
  a, b = x.shrink(((0, v.bind(k)), None)), y.shrink(((0, v.bind(k)), None))
  np.testing.assert_allclose((a * b - a).numpy(), X[:k] * X[::-1][:k] - X[:k], rtol=1e-6)
  np.testing.assert_allclose(x.shrink((None, (0, w.bind(k)))).max(1).numpy(), X[:, :k].max(1))
  np.testing.assert_allclose(x.shrink(((1, v.bind(k + 1)), (0, w.bind(k)))).T.numpy(), X[1:k + 1, :k].T)

@pytest.mark.parametrize("k", [1, 10])
def test_zeros_empty(k):
  v = Variable("n", 0, 64)
  np.testing.assert_array_equal((Tensor.zeros(v.bind(k), 64) + 3).numpy(), np.full((k, 64), 3, np.float32))
  assert Tensor.empty(v.bind(k), 64).numpy().shape == (k, 64)
  assert (Tensor.zeros(v.bind(0), 4) + 1).numpy().shape == (0, 4)

@pytest.mark.parametrize("k", [2, 33])
def test_reduce(k):
  v, x = Variable("n", 1, 64), Tensor(X)
  s = x.shrink(((0, v.bind(k)), None))
  np.testing.assert_allclose(s.sum(0).numpy(), X[:k].sum(0), rtol=1e-5, atol=1e-5)     # over the symbolic axis
  np.testing.assert_allclose(s.sum(1).numpy(), X[:k].sum(1), rtol=1e-5, atol=1e-5)     # over the other
  np.testing.assert_allclose(s.sum().numpy(), X[:k].sum(), rtol=1e-5, atol=1e-4)
  sm = (s - s.max(1, keepdim=True)).exp()
  np.testing.assert_allclose((sm / sm.sum(1, keepdim=True)).numpy(), (e := np.exp(X[:k] - X[:k].max(1, keepdims=True))) / e.sum(1, keepdims=True),
                             rtol=1e-5, atol=1e-6)

def test_movement_over_symbolic():
  v, x, k = Variable("n", 1, 64), Tensor(X), 7
  s = x.shrink(((0, v.bind(k)), None))
  np.testing.assert_allclose(s.pad(((1, 2), (0, 3))).numpy(), np.pad(X[:k], ((1, 2), (0, 3))))
  np.testing.assert_allclose(s.flip(0).numpy(), X[:k][::-1])
  np.testing.assert_allclose((s.contiguous() * 2).sum(0).numpy(), (X[:k] * 2).sum(0), rtol=1e-5)   # a buffer of n's max rows
  np.testing.assert_allclose((s * x[0:1]).numpy(), X[:k] * X[0:1])

def test_bind_out_of_range():
  v = Variable("n", 1, 64)
  with pytest.raises(ValueError, match=r"test_symbolic_shapes.py:\d+:\d+: n = 65 is outside \[1, 64\]"): v.bind(65)
  with pytest.raises(ValueError, match="outside"): v.bind(0)
  with pytest.raises(TypeError, match="bound size"): Tensor.zeros(v, 4)

def test_one_var_two_values_in_a_graph():
  v, x = Variable("n", 1, 64), Tensor(X)
  with pytest.raises(ValueError, match=r"test_symbolic_shapes.py:\d+:\d+: Variable\('n', 1, 64\) is bound to both 3 and 4 in one graph: realize"):
    (x.shrink(((0, v.bind(3)), None)).sum() + x.shrink(((0, v.bind(4)), None)).sum()).numpy()

def test_graph_mlir_roundtrip():
  from mlir import ir
  from morok_mlir.ir.bridge import module_text, import_module
  from morok_mlir.ir.pipeline import mlir_context, compile_lock as _compile_lock
  v, x = Variable("n", 1, 64), Tensor(X)
  t = (x.shrink(((0, v.bind(5)), None)) + 1).pad(((0, 1), None)).reshape(-1).uop
  key = normalize([t])[0]
  text = module_text([graph_func(key)])
  assert "tensor<?xf32>" in text and '"uop.define_var"()' in text
  with _compile_lock, mlir_context():
    assert import_module(ir.Module.parse(text))[0].results == list(key)   # the same (hash-consed) UOps

@settings(max_examples=20, deadline=None)
@given(st.integers(1, 32), st.integers(1, 16))
def test_random_values(k, j):
  v, w = Variable("hk", 1, 32), Variable("hj", 1, 16)
  x, y = Tensor(X[:32]), Tensor(X[32:])
  a, b = x.shrink(((0, v.bind(k)), (0, w.bind(j)))), y.shrink(((0, v.bind(k)), (0, w.bind(j))))
  out = ((a + b) * 3).sum(0) - a.max(0)
  np.testing.assert_allclose(out.numpy(), ((X[:k, :j] + X[32:32 + k, :j]) * 3).sum(0) - X[:k, :j].max(0), rtol=1e-5, atol=1e-4)

def test_mean_var_over_symbolic_axis_one_compile():
  # the count each mean/var divides by is read at run time (a sum of ones in the reduce's kernel): one schedule for
  # every value, each result numpy's (these raised an internal KeyError before)
  v, x = Variable("stat_rows", 1, 64), Tensor(X)
  compiled = []
  for k in (2, 7, 33, 64):
    s, a = x.shrink(((0, v.bind(k)), None)), X[:k]
    Tensor.realize(*(got := (s.mean(0), s.var(0), s.std(0, correction=0), s.mean(), s.var(), s.mean(1, keepdim=True), s.layernorm(axis=0))))
    want = (a.mean(0), a.var(0, ddof=1), a.std(0), a.mean(), a.var(ddof=1), a.mean(1, keepdims=True),
            (a - a.mean(0)) / np.sqrt(a.var(0) + 1e-5))
    for g, w in zip(got, want): np.testing.assert_allclose(g.numpy(), w, rtol=1e-4, atol=1e-5)
    compiled.append(GlobalCounters.compiled)
  assert compiled[1:] == compiled[:1] * 3   # nothing compiled after the first value

@pytest.mark.parametrize("k", [1, 2])
def test_var_correction_at_least_the_count(k):
  # n - correction <= 0 divides by 0, as PyTorch (inf or nan), for a symbolic count as for a static one
  v, x = Variable("n", 1, 64), Tensor(X)
  s = x.shrink(((0, v.bind(k)), None))
  static = Tensor(X[:k])
  np.testing.assert_array_equal(s.var(0, correction=2).numpy(), static.var(0, correction=2).numpy())
  np.testing.assert_allclose(s.var(0, correction=0.5).numpy(), static.var(0, correction=0.5).numpy(), rtol=1e-5)

def test_mean_int_over_symbolic_axis():
  v = Variable("n", 1, 64)
  a = np.arange(64 * 3, dtype=np.int32).reshape(64, 3)
  got = Tensor(a).shrink(((0, v.bind(5)), None)).mean(0)
  assert got.dtype == Tensor(a).mean(0).dtype
  np.testing.assert_allclose(got.numpy(), a[:5].mean(0), rtol=1e-6)

def test_batchnorm_training_with_symbolic_batch():
  # the running variance's unbiased factor n / (n - 1) from the count of a symbolic batch
  from morok_mlir import nn
  a = np.random.default_rng(1).standard_normal((16, 3, 4, 4)).astype(np.float32)
  v, k = Variable("batch", 1, 16), 5
  bn = nn.BatchNorm2d(3)
  with Tensor.train(): y = bn(Tensor(a).shrink(((0, v.bind(k)), None, None, None))).numpy()
  x = a[:k]
  np.testing.assert_allclose(y, (x - x.mean((0, 2, 3), keepdims=True)) / np.sqrt(x.var((0, 2, 3), keepdims=True) + 1e-5), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(bn.running_var.numpy(), 0.9 + 0.1 * x.var((0, 2, 3), ddof=1), rtol=1e-5)
  np.testing.assert_allclose(bn.running_mean.numpy(), 0.1 * x.mean((0, 2, 3)), rtol=1e-5, atol=1e-7)

INDEXES = [0, -1, 3, -4, slice(None), slice(2, 5), slice(-3, None), slice(None, -2), slice(5, None), slice(-20, 4), slice(0, 100),
           (slice(None), 1), (Ellipsis, slice(1, 3)), (None, slice(1, None)), (slice(2, None), -1)]

@settings(max_examples=60, deadline=None)
@given(st.integers(1, 12), st.sampled_from(INDEXES))
def test_basic_index_along_symbolic_dim(k, idx):
  # ints and step-1 slices along a symbolic dim (and any index along the static ones) as numpy at the bound value;
  # an index numpy refuses at that value raises IndexError
  v, a = Variable("rows_ix", 1, 12), X[:12]
  s = Tensor(a).shrink(((0, v.bind(k)), None))
  try: want = a[:k][idx]
  except IndexError:
    with pytest.raises(IndexError): s[idx]
    return
  np.testing.assert_array_equal(s[idx].numpy(), want)

@settings(max_examples=40, deadline=None)
@given(st.integers(1, 12), st.sampled_from(INDEXES))
def test_setitem_along_symbolic_dim(k, idx):
  v, a = Variable("rows_set", 1, 12), X[:12]
  s = Tensor(a).shrink(((0, v.bind(k)), None)).contiguous()
  want = a[:k].copy()
  try: want[idx] = 7.0
  except IndexError: return
  s[idx] = 7.0
  np.testing.assert_array_equal(s.numpy(), want)

def test_index_forms_share_a_schedule():
  # x[2:5] and x[-1] compile once for every value that takes the same form (the bounds hold no value)
  v, x = Variable("rows_form", 1, 64), Tensor(X)
  compiled = []
  for k in (5, 9, 40, 64):
    s = x.shrink(((0, v.bind(k)), None))
    Tensor.realize(a := s[2:5] * 2, b := s[-1] + 1, c := s[1:].sum(0))
    np.testing.assert_array_equal(a.numpy(), X[:k][2:5] * 2)
    np.testing.assert_array_equal(b.numpy(), X[:k][-1] + 1)
    np.testing.assert_allclose(c.numpy(), X[1:k].sum(0), rtol=1e-5, atol=1e-5)
    compiled.append(GlobalCounters.compiled)
  assert compiled[1:] == compiled[:1] * 3

def test_strided_slice_along_symbolic_dim_refused():
  v = Variable("n", 1, 64)
  s = Tensor(X).shrink(((0, v.bind(10)), None))
  with pytest.raises(IndexError, match=r"test_symbolic_shapes.py:\d+:\d+: slice step 2 along dimension 0 of symbolic size"): s[::2]
  np.testing.assert_array_equal(s[:, ::2].numpy(), X[:10, ::2])   # a static dim keeps every step

@pytest.mark.parametrize("k", [1, 4, 64])
def test_argmax_along_symbolic_dim(k):
  # the first max (a NaN counts as the max, as numpy) as the least position of a max: no value of the size in the graph
  v = Variable("rows_arg", 1, 64)
  a = np.random.default_rng(2).integers(0, 5, (64, 8)).astype(np.float32)
  a[3, 2] = np.nan
  s = Tensor(a).shrink(((0, v.bind(k)), None))
  for got, want in ((s.argmax(0), a[:k].argmax(0)), (s.argmin(0, keepdim=True), a[:k].argmin(0)[None]), (s.argmax(1), a[:k].argmax(1))):
    assert got.dtype == dtypes.int32
    np.testing.assert_array_equal(got.numpy(), want)

def test_static_only_ops_refuse_symbolic_sizes_at_the_users_line():
  # ops that need a static size name it at the caller's line (these raised internal TypeErrors before)
  v = Variable("n", 1, 64)
  s = Tensor(X).shrink(((0, v.bind(10)), None))
  line = r"test_symbolic_shapes.py:\d+:\d+: "
  with pytest.raises(TypeError, match=line + "a windowed op"): s.reshape(1, 1, v.bind(10), 16).conv2d(Tensor.ones(1, 1, 3, 3))
  with pytest.raises(TypeError, match=line + "random tensors need static sizes"): Tensor.rand(v.bind(10), 3)
  with pytest.raises(TypeError, match=line + "eye needs static sizes"): Tensor.eye(v.bind(10))
  assert len(s) == 10   # the bound value, as .numpy() has it

@pytest.mark.parametrize("k", [1, 5])
def test_symbolic_pad_width(k):
  # zero padding by a bound size (what a setitem along a symbolic dim builds); other modes and negative widths refused
  v = Variable("padw", 0, 8)
  x = Tensor(X[:4, :3])
  np.testing.assert_array_equal(x.pad(((0, v.bind(k)), (v.bind(k), 1))).numpy(), np.pad(X[:4, :3], ((0, k), (k, 1))))
  with pytest.raises(ValueError, match="a symbolic width must be a bound size >= 0, in constant mode"):
    x.pad(((0, v.bind(k)), None), mode="reflect")

def test_symbolic_outer_loop_on_threads():
  # a kernel whose outer loop runs to a symbolic size runs on threads, each taking its part of the size read at run time
  # (n * i / T .. n * (i + 1) / T): every row written once for any n (odd, smaller than the thread count, the largest)
  from morok_mlir.ir.emit import normalize, graph_func
  from morok_mlir.ir.pipeline import lower_to_kernels
  from morok_mlir.host import THREADS
  v, a = Variable("rows_par", 1, 2048), np.random.default_rng(3).standard_normal((2048, 256)).astype(np.float32)
  x = Tensor(a)
  ks = [f for f in lower_to_kernels(graph_func(normalize([(x.shrink(((0, v.bind(7)), None)) * 2 + 1).uop])[0]))
        if "uop.kernel" in f.attrs and "uop.variant_of" not in f.attrs]   # (copies for fewer rows may run on one thread)
  assert THREADS == 1 or all(k.attrs.get("uop.threads") == THREADS for k in ks)
  compiled = []
  for k in (1, 2, 3, 7, 1000, 2047, 2048):
    s = x.shrink(((0, v.bind(k)), None))
    np.testing.assert_allclose((s * 2 + 1).exp().numpy(), np.exp(a[:k] * 2 + 1), rtol=2e-6)
    np.testing.assert_allclose(s.sum(1).numpy(), a[:k].sum(1), rtol=1e-5, atol=1e-4)
    compiled.append(GlobalCounters.compiled)
  assert compiled[1:] == compiled[:1] * 6

def test_size_arithmetic_and_val():
  # a bound Variable is a size: arithmetic with ints builds expressions whose .val is the bound value's (tinygrad's)
  v = Variable("sa", 1, 10)
  vi = v.bind(4)
  assert (vi + 2).val == 6 and (2 + vi).val == 6 and (vi * 3).val == 12 and (3 * vi).val == 12 and (vi - 1).val == 3
  assert (vi // 3).val == 1 and (vi % 3).val == 1 and vi.val == 4 and (vi + 2 - 2) is vi
  assert vi.unbind() == (v, 4) and repr(vi + 2) == "(Variable('sa', 1, 10).bind(4) + 2)"
  with pytest.raises(ValueError, match=r"test_symbolic_shapes.py:\d+:\d+: Variable\('sa', 1, 10\) is not bound"): (v + 1).val
  with pytest.raises(TypeError, match="only a bound Variable"): v.unbind()

@pytest.mark.parametrize("k", [1, 3, 8])
def test_slice_static_dim_with_bound_size(k):
  # a[:, :vi], a[:, vi:vi+2] and shrink(((0, vi),)) cut a static dim to a symbolic size: one schedule for every value
  v, a = Variable("cut", 1, 8), X[:4, :10]
  vi, x = v.bind(k), Tensor(a)
  np.testing.assert_array_equal(x[:, :vi].numpy(), a[:, :k])
  np.testing.assert_array_equal(x[:, vi:vi + 2].numpy(), a[:, k:k + 2])
  np.testing.assert_allclose(x[1:, :vi].sum(1).numpy(), a[1:, :k].sum(1), rtol=1e-6)
  np.testing.assert_array_equal(x.shrink((None, (0, vi))).numpy(), a[:, :k])
  np.testing.assert_allclose((x[:, :vi] @ x[:, :vi].T).numpy(), a[:, :k] @ a[:, :k].T, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(x[:, :vi].softmax(-1).numpy(), (e := np.exp(a[:, :k] - a[:, :k].max(1, keepdims=True))) / e.sum(1, keepdims=True),
                             rtol=1e-5, atol=1e-7)

def test_slice_bound_past_the_dim_raises():
  # checked at the bound value, as numpy's bounds are (a TinyJit replay checks the values it is given: test_symbolic_jit.py)
  v, a = Variable("past", 1, 12), X[:4, :11]
  np.testing.assert_array_equal(Tensor(a)[:, v.bind(9):v.bind(9) + 2].numpy(), a[:, 9:11])   # tinygrad's a[3:5, vi:vi+2]
  with pytest.raises(IndexError, match=r"test_symbolic_shapes.py:\d+:\d+: slice bound .* is outside dimension 1 of size 11"):
    Tensor(a)[:, v.bind(10):v.bind(10) + 2]
  with pytest.raises(ValueError, match="invalid shrink"): Tensor(a).shrink((None, (0, v.bind(12))))

@pytest.mark.parametrize("k", [1, 6])
def test_bound_size_as_index(k):
  vi, a = Variable("at", 1, 8).bind(k), X[:4, :9]
  np.testing.assert_array_equal(Tensor(a)[:, vi].numpy(), a[:, k])
  np.testing.assert_array_equal(Tensor(a.T.copy())[vi - 1].numpy(), a.T[k - 1])
  np.testing.assert_array_equal(Tensor(a)[:, :vi][:, vi - 1].numpy(), a[:, k - 1])

@pytest.mark.parametrize("k", [1, 5])
def test_setitem_and_assign_at_bound_offset(k):
  # the KV-cache write: cache[:, k:k+2] = x through a bound start
  vi = Variable("wpos", 0, 8).bind(k)
  want = np.zeros((2, 10), np.float32)
  want[:, k:k + 2] = 1
  c = Tensor.zeros(2, 10).contiguous().realize()
  c[:, vi:vi + 2] = Tensor.ones(2, 2)
  np.testing.assert_array_equal(c.numpy(), want)
  d = Tensor.zeros(2, 10).contiguous().realize()
  d[:, vi:vi + 2].assign(Tensor.ones(2, 2))
  np.testing.assert_array_equal(d.numpy(), want)

@pytest.mark.parametrize("k", [1, 4, 9])
def test_arange_to_bound_size_and_size_as_value(k):
  vi = Variable("ar", 1, 9).bind(k)
  np.testing.assert_array_equal(Tensor.arange(vi).numpy(), np.arange(k))
  np.testing.assert_array_equal(Tensor.arange(vi + 2).numpy(), np.arange(k + 2))
  np.testing.assert_array_equal(Tensor.arange(1, vi + 2, 2).numpy(), np.arange(1, k + 2, 2))
  np.testing.assert_array_equal(Tensor.arange(vi, 12).numpy(), np.arange(k, 12))          # a symbolic start: its value added
  np.testing.assert_array_equal(Tensor.arange(vi, vi + 3).numpy(), np.arange(k, k + 3))   # (a static size: 3)
  np.testing.assert_array_equal(Tensor.arange(vi - 1, vi * 2, 3, dtype=dtypes.float32).numpy(), np.arange(k - 1, 2 * k, 3, dtype=np.float32))
  # a size in an elementwise op is its value, read at run time: the causal mask of T=2 new rows after k cached ones
  mask = Tensor.arange(vi + 2)[None, :] <= Tensor.arange(2)[:, None] + vi
  np.testing.assert_array_equal(mask.numpy(), np.arange(k + 2)[None, :] <= np.arange(2)[:, None] + k)
  np.testing.assert_allclose((Tensor(X[:3, :3]) * vi).numpy(), X[:3, :3] * k)
  np.testing.assert_array_equal((vi + Tensor.ones(3, dtype=dtypes.int32)).numpy(), np.full(3, k + 1))

def test_arange_of_sizes_shares_a_schedule():
  v = Variable("ar_once", 1, 64)
  compiled = []
  for k in (3, 17, 64):
    np.testing.assert_array_equal((Tensor.arange(v.bind(k)) * 2).numpy(), np.arange(k) * 2)
    compiled.append(GlobalCounters.compiled)
  assert compiled[1:] == compiled[:1] * 2

def test_cat_along_symbolic_dims_one_compile():
  # cat pads each piece by the others' sizes: symbolic ones are zero padding by a bound size; sizes that cancel fold
  v, w = Variable("cat_i", 1, 10), Variable("cat_j", 1, 10)
  compiled = []
  for i, j in ((3, 4), (5, 1), (10, 10)):
    a, b = X[:3, :i], X[3:6, :j]
    A, B = Tensor(X[:3, :10]).shrink((None, (0, v.bind(i)))), Tensor(X[3:6, :10]).shrink((None, (0, w.bind(j))))
    np.testing.assert_array_equal(A.cat(B, dim=1).numpy(), np.concatenate([a, b], 1))
    np.testing.assert_array_equal(A.cat(A, dim=1).numpy(), np.concatenate([a, a], 1))
    np.testing.assert_array_equal(A.T.cat(Tensor(X[:2, :3]), B.T, dim=0).numpy(), np.concatenate([a.T, X[:2, :3], b.T], 0))
    compiled.append(GlobalCounters.compiled)
  assert compiled[1:] == compiled[:1] * 2
  assert (v.bind(3) + v.bind(3)) - v.bind(3) - v.bind(3) == 0 and (v.bind(3) + 2) * 3 - v.bind(3) * 3 == 6

@pytest.mark.parametrize("k", [0, 3, 7])
def test_triu_tril_with_symbolic_sizes_and_diagonal(k):
  # tinygrad's causal mask: full((1, 1, T, start_pos + T), -inf).triu(start_pos + 1)
  vi = Variable("tri", 0, 10).bind(k)
  np.testing.assert_array_equal(Tensor.full((1, 1, 2, vi + 2), float("-inf")).triu(vi + 1).numpy(),
                                np.triu(np.full((1, 1, 2, k + 2), -np.inf, np.float32), k + 1))
  x = np.arange(4 * (k + 2), dtype=np.float32).reshape(4, k + 2)
  np.testing.assert_array_equal(Tensor(x).reshape(4, vi + 2).tril(-1).numpy(), np.tril(x, -1))
  np.testing.assert_array_equal(Tensor(x).triu(vi).numpy(), np.triu(x, k))

def test_realizing_a_written_view_realizes_its_base():
  # tinygrad's KV-cache idiom cache[:, sp:sp+1].assign(x).realize(): the write reaches the cache's buffer, so the next
  # step's write at another value is a graph of one value (this raised "bound to both" before)
  v = Variable("step_pos", 0, 7)
  c, want = Tensor.zeros(2, 8).contiguous().realize(), np.zeros((2, 8), np.float32)
  for i in range(5):
    c[:, v.bind(i):v.bind(i) + 1].assign(Tensor.full((2, 1), i + 1.0)).realize()
    want[:, i] = i + 1
  np.testing.assert_array_equal(c.numpy(), want)
  y = (x := Tensor(X) + 1)[0]   # a view only read: its base stays lazy
  y.realize()
  assert x.uop.op is not Ops.BUFFER

def test_arange_over_a_huge_variable_is_a_clear_error():
  """An arange over a Variable is made at the Variable's largest size: a maximum no memory can hold is a MemoryError
  naming the caller's line and the bytes, not numpy's bare one (nor an attempt to fill terabytes)."""
  with pytest.raises(MemoryError, match=r"test_symbolic_shapes\.py:\d+.*arange\(0, 1099511627776, 1\): 1099511627776 int64 values"):
    Tensor.arange(Variable("n", 1, 2 ** 40).bind(3), dtype=dtypes.int64)

def test_narrow_copy_threads_split_columns(monkeypatch, tmp_path):
  # x[:m] @ W: the copy for m's least bound (one row) has no loop over the rows, so its threads split the columns as the
  # static kernel's do, not one row on one thread; results right for few rows on 2 threads
  import morok_mlir.passes.optimize as O
  from morok_mlir.ir.pipeline import lower_to_kernels
  monkeypatch.setenv("MOROK_CACHE_DIR", str(tmp_path))
  monkeypatch.setattr(O, "THREADS", 2)
  rng = np.random.default_rng(5)
  a, w = rng.standard_normal((512, 512)).astype(np.float32), rng.standard_normal((512, 512)).astype(np.float32) / 16
  v, x, W = Variable("rows_mm", 1, 512), Tensor(a), Tensor(w)
  ks = [f for f in lower_to_kernels(graph_func(normalize([(x[:v.bind(3)] @ W).uop])[0])) if "uop.kernel" in f.attrs]
  one = [k for k in ks if k.attrs.get("uop.variant", (0, 0, 0))[2:] == (1,)]
  assert len(one) == 1 and one[0].attrs.get("uop.threads") == 2
  assert not any(u.op is Ops.RANGE and u.attrs.get("kind") == "loop" and u.src[0].op is not Ops.CONST for u in one[0].roots[0].toposort)
  for m in (1, 2, 3, 17):
    np.testing.assert_allclose((x[:v.bind(m)] @ W).numpy(), a[:m] @ w, rtol=1e-4, atol=1e-4)
