"""Symbolic shapes (tinygrad's Variable API): a dimension bound to a value compiles once for every value in [min, max]."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from morok_mlir import Tensor, Variable
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
  with pytest.raises(ValueError, match="bound to both"):
    (x.shrink(((0, v.bind(3)), None)).sum() + x.shrink(((0, v.bind(4)), None)).sum()).numpy()

def test_graph_mlir_roundtrip():
  from mlir import ir
  from morok_mlir.ir.bridge import module_text, import_module
  from morok_mlir.passes.pipeline import mlir_context, compile_lock as _compile_lock
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
