"""Reverse-mode autograd (core/gradient.py, Tensor.backward/gradient): every differentiable op against float64 central
finite differences of its forward and against closed forms; random graphs (hypothesis); second order; the API's
flags, contexts and errors; the kernels of an MLP's training step."""
import math
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck
import morok_mlir
from morok_mlir import Tensor, dtypes
from morok_mlir.core.gradient import compute_gradient
from morok_mlir.dialects.ops import Ops
from morok_mlir.realize import GlobalCounters

def rnd(*shape, seed=0, lo=None, hi=None):
  r = np.random.default_rng(seed)
  return r.standard_normal(shape) if lo is None else r.uniform(lo, hi, shape)
def raises_here(exc, fn, match=None):
  """fn is a one-line lambda: the error must name this test file and the lambda's line."""
  with pytest.raises(exc, match=match) as e: fn()
  assert f"{__file__}:{fn.__code__.co_firstlineno}:" in str(e.value), str(e.value)

def fd_check(f, *arrays, eps=1e-6, tol=1e-6, seed=1):
  """The gradients of sum(f(*inputs) * R) (R fixed random weights, so every output element counts) from backward,
  against float64 central differences of the same forward."""
  arrays = [np.asarray(a, np.float64) for a in arrays]
  out_shape = f(*[Tensor(a) for a in arrays]).shape
  R = np.random.default_rng(seed).uniform(0.5, 1.5, out_shape)
  loss = lambda *ts: (f(*ts) * Tensor(R)).sum()
  ts = [Tensor(a, requires_grad=True) for a in arrays]
  loss(*ts).backward()
  for i, (t, a) in enumerate(zip(ts, arrays)):
    num = np.zeros_like(a)
    for j in np.ndindex(a.shape):
      vals = []
      for d in (eps, -eps):
        b = a.copy(); b[j] += d
        vals.append(loss(*[Tensor(b if k == i else c) for k, c in enumerate(arrays)]).item())
      num[j] = (vals[0] - vals[1]) / (2 * eps)
    assert t.grad is not None and t.grad.shape == a.shape and t.grad.dtype == dtypes.float64
    np.testing.assert_allclose(t.grad.numpy(), num, rtol=tol, atol=tol, err_msg=f"input {i}")

A, B = rnd(3, 4), rnd(3, 4, seed=2)
POS = rnd(3, 4, lo=0.5, hi=2.0)
UNARY = {"neg": lambda x: -x, "exp": Tensor.exp, "exp2": Tensor.exp2, "sin": Tensor.sin, "cos": Tensor.cos, "tanh": Tensor.tanh,
         "sigmoid": Tensor.sigmoid, "relu": Tensor.relu, "abs": Tensor.abs, "square": Tensor.square, "gelu": Tensor.gelu,
         "softplus": Tensor.softplus, "atan": Tensor.atan, "erf": Tensor.erf, "leaky_relu": Tensor.leaky_relu, "elu": Tensor.elu,
         "clip": lambda x: x.clip(-0.5, 0.7), "silu": Tensor.silu}
POSITIVE = {"log": Tensor.log, "log2": Tensor.log2, "sqrt": Tensor.sqrt, "reciprocal": Tensor.reciprocal, "rsqrt": Tensor.rsqrt,
            "pow_const": lambda x: x ** 2.5, "const_pow": lambda x: 1.7 ** x, "log1p": lambda x: x._log1p()}
BINARY = {"add": Tensor.add, "sub": Tensor.sub, "mul": Tensor.mul, "div": Tensor.div, "maximum": Tensor.maximum, "minimum": Tensor.minimum,
          "fmod": lambda a, b: a.fmod(b.abs() + 0.5), "pow": lambda a, b: a.abs() ** b, "where": lambda a, b: a.gt(0).where(a, b),
          "broadcast": lambda a, b: a[:, :1] * b[:1], "lerp": lambda a, b: a.lerp(b, 0.3), "logaddexp": Tensor.logaddexp}

@pytest.mark.parametrize("name", UNARY)
def test_unary(name): fd_check(UNARY[name], A)
@pytest.mark.parametrize("name", POSITIVE)
def test_unary_positive(name): fd_check(POSITIVE[name], POS)
@pytest.mark.parametrize("name", BINARY)
def test_binary(name): fd_check(BINARY[name], A, B)

MOVEMENT = {"reshape": lambda x: x.reshape(2, 6), "permute": lambda x: x.permute(1, 0), "expand": lambda x: x.reshape(3, 1, 4).expand(3, 2, 4),
            "pad": lambda x: x.pad(((1, 2), (0, 1))), "shrink": lambda x: x.shrink(((1, 3), (0, 2))), "flip": lambda x: x.flip(0, 1),
            "getitem": lambda x: x[1:, ::2], "cat": lambda x: x.cat(x * 2, dim=1), "repeat": lambda x: x.repeat(2, 1),
            "pad_reflect": lambda x: x.pad(((1, 1), (2, 1)), mode="reflect"), "transpose_contig": lambda x: x.T.contiguous() * 1,
            "roll": lambda x: x.roll(1, 1), "unfold": lambda x: x.unfold(1, 2, 1), "cumsum": lambda x: x.cumsum(1),
            "triu": lambda x: x.triu(), "neg_pad": lambda x: x.pad(((-1, 1), (1, -2)))}
@pytest.mark.parametrize("name", MOVEMENT)
def test_movement(name): fd_check(MOVEMENT[name], A)

REDUCE = {"sum": lambda x: x.sum(), "sum1": lambda x: x.sum(1), "mean": lambda x: x.mean(0, keepdim=True), "max": lambda x: x.max(1),
          "min": lambda x: x.min(0), "prod": lambda x: x.prod(1), "var": lambda x: x.var(1), "std": lambda x: x.std(),
          "logsumexp": lambda x: x.logsumexp(1), "softmax": lambda x: x.softmax(1), "log_softmax": lambda x: x.log_softmax(0),
          "layernorm": lambda x: x.layernorm(), "cumprod": lambda x: x.cumprod(1), "norm_sq": lambda x: (x * x).sum().sqrt()}
@pytest.mark.parametrize("name", REDUCE)
def test_reduce(name): fd_check(REDUCE[name], A)

def test_matmul(): fd_check(lambda a, b: a @ b, rnd(3, 4), rnd(4, 5, seed=3))
def test_matmul_batched_broadcast(): fd_check(lambda a, b: a @ b, rnd(2, 3, 4), rnd(4, 2, seed=3))
def test_linear(): fd_check(lambda x, w, b: x.linear(w, b), rnd(2, 3), rnd(3, 4, seed=3), rnd(4, seed=4))
@pytest.mark.parametrize("kw", [{}, {"stride": 2, "padding": 1}, {"groups": 2, "dilation": (1, 2)}])
def test_conv2d(kw):
  cin = 2 * kw.get("groups", 1)
  fd_check(lambda x, w, b: x.conv2d(w, b, **kw), rnd(2, cin, 5, 5), rnd(4, 2, 3, 2, seed=3), rnd(4, seed=4), tol=1e-5)
def test_pools(): fd_check(lambda x: x.avg_pool2d(2) + x.max_pool2d(2), rnd(1, 2, 4, 4))
def test_layernorm_affine(): fd_check(lambda x, w, b: x.layernorm() * w + b, rnd(3, 5), rnd(5, seed=3), rnd(5, seed=4))
def test_cast_float():
  fd_check(lambda x: (x.cast(dtypes.float32) * 3).cast(dtypes.float64), A, eps=1e-2, tol=1e-4)
  x = Tensor(A, requires_grad=True)
  x.cast(dtypes.float32).sum().backward()
  assert x.grad.dtype == dtypes.float64 and np.array_equal(x.grad.numpy(), np.ones_like(A))
def test_cast_int_stops():
  x = Tensor(A, requires_grad=True)
  (x.cast(dtypes.int32).cast(dtypes.float64) + x).sum().backward()   # the int path adds nothing
  assert np.array_equal(x.grad.numpy(), np.ones_like(A))
def test_floor_round_zero():
  x = Tensor(A, requires_grad=True)
  (x.floor() + x.round() + x.ceil()).sum().backward()
  assert np.array_equal(x.grad.numpy(), np.zeros_like(A))

# ---- losses and indexing
Y = np.array([0, 2, 1])
def test_cross_entropy():
  fd_check(lambda x: x.cross_entropy(Tensor(Y)), A)
  fd_check(lambda x: x.cross_entropy(Tensor(Y), label_smoothing=0.1, reduction="sum"), A)
  fd_check(lambda x: x.sparse_categorical_crossentropy(Tensor(Y)), A)
  fd_check(lambda x: x.log_softmax(1).nll_loss(Tensor(Y)), A)
def test_cross_entropy_closed_form():
  x = Tensor(A, requires_grad=True)
  x.cross_entropy(Tensor(Y)).backward()
  p = np.exp(A - A.max(1, keepdims=True)); p /= p.sum(1, keepdims=True)
  np.testing.assert_allclose(x.grad.numpy(), (p - np.eye(4)[Y]) / 3, atol=1e-12)
def test_binary_crossentropy(): fd_check(lambda x: x.binary_crossentropy_logits(Tensor((A > 0) * 1.0)), B)
@pytest.mark.parametrize("dim", [0, 1, -1])
def test_gather(dim):
  idx = np.random.default_rng(5).integers(0, A.shape[dim], (2, 3) if dim == 0 else (3, 3))
  fd_check(lambda x: x.gather(dim, Tensor(idx.astype(np.int32))), A)
def test_gather_repeated_and_out_of_range():   # the gradient is a scatter-add
  x = Tensor(A, requires_grad=True)
  idx = np.array([[0, 0, 3, 9], [1, 1, 1, -1], [2, 2, 0, 0]], np.int32)   # 9 and -1 are outside the axis: read 0, get 0
  x.gather(1, Tensor(idx)).sum().backward()
  ref = np.zeros_like(A)
  for i, j in np.ndindex(idx.shape):
    if 0 <= idx[i, j] < 4: ref[i, idx[i, j]] += 1
  assert np.array_equal(x.grad.numpy(), ref)
def test_tensor_index(): fd_check(lambda x: x[Tensor([2, 0, 0, -1])] * x[:, [1, 3]].sum(), A)
def test_embedding_rows():
  w = Tensor(rnd(6, 3), requires_grad=True)
  ids = np.array([[1, 4], [4, 0]])
  w[Tensor(ids)].sum().backward()
  assert np.array_equal(w.grad.numpy(), np.bincount(ids.ravel(), minlength=6)[:, None] * np.ones((6, 3)))

# ---- ties and edge values, against closed forms
def test_max_ties_share():
  m = Tensor([[1.0, 3.0, 3.0], [2.0, 0.0, 1.0], [5.0, 5.0, 5.0]], requires_grad=True)
  m.max(1).sum().backward()
  np.testing.assert_allclose(m.grad.numpy(), [[0, .5, .5], [1, 0, 0], [1 / 3] * 3])
  n = Tensor([[1.0, 1.0], [0.0, 2.0]], requires_grad=True)
  n.min().backward()
  np.testing.assert_allclose(n.grad.numpy(), [[0, 0], [1, 0]])
def test_maximum_ties_half():
  a, b = Tensor([1.0, 2.0, 3.0], requires_grad=True), Tensor([1.0, 0.0, 4.0], requires_grad=True)
  (a.maximum(b) + a.minimum(b) * 2).sum().backward()
  np.testing.assert_allclose(a.grad.numpy(), [1.5, 1, 2]); np.testing.assert_allclose(b.grad.numpy(), [1.5, 2, 1])
def test_relu_at_zero():
  x = Tensor([-1.0, 0.0, 2.0], requires_grad=True)
  x.relu().sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), [0, 0, 1])   # 0 at 0: PyTorch's (and tinygrad's test_ops)
def test_prod_with_zeros():
  x = Tensor([[2.0, 0.0, 3.0], [0.0, 0.0, 4.0], [1.0, 2.0, 3.0]], requires_grad=True)
  x.prod(1).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), [[0, 6, 0], [0, 0, 0], [6, 3, 2]])
def test_pow_at_zero():
  x = Tensor([0.0, 0.0, 0.0, 2.0], requires_grad=True)
  y = Tensor([0.0, 1.0, 2.0, 3.0], requires_grad=True)
  (x ** y).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), [0, 1, 0, 12]); np.testing.assert_allclose(y.grad.numpy(), [0, 0, 0, 8 * math.log(2)])
def test_where_gradient_both_sides():
  c = Tensor([True, False, True])
  a, b = Tensor([1.0, 2.0, 3.0], requires_grad=True), Tensor([4.0, 5.0, 6.0], requires_grad=True)
  (c.where(a, b) * Tensor([1.0, 2.0, 3.0])).sum().backward()
  assert a.grad.tolist() == [1, 0, 3] and b.grad.tolist() == [0, 2, 0]
def test_empty():
  x = Tensor(np.zeros((0, 3)), requires_grad=True)
  (x * 2).sum().backward()
  assert x.grad.shape == (0, 3) and x.grad.numpy().shape == (0, 3)
def test_non_contiguous_input():
  base = Tensor(rnd(4, 3), requires_grad=True)
  x = base.T[:, 1:]
  (x * x).sum().backward()
  ref = 2 * base.numpy(); ref[0] = 0
  np.testing.assert_allclose(base.grad.numpy(), ref)
def test_float32_and_float16():
  for dt, tol in ((dtypes.float32, 1e-6), (dtypes.float16, 1e-2)):
    x = Tensor(A, dt, requires_grad=True)
    x.exp().sum().backward()
    assert x.grad.dtype == dt
    np.testing.assert_allclose(x.grad.numpy().astype(np.float64), np.exp(A), rtol=tol)

# ---- second order: gradients of gradients
def test_second_order_cube():
  x = Tensor([1.0, -2.0, 3.0], requires_grad=True)
  dx, = (x * x * x).sum().gradient(x)
  d2, = dx.sum().gradient(x)
  d3, = d2.sum().gradient(x)
  np.testing.assert_allclose(dx.numpy(), 3 * x.numpy() ** 2); np.testing.assert_allclose(d2.numpy(), 6 * x.numpy())
  np.testing.assert_allclose(d3.numpy(), [6, 6, 6])
def test_second_order_sin():
  x = Tensor(A, requires_grad=True)
  dx, = x.sin().sum().gradient(x)
  d2, = dx.sum().gradient(x)
  np.testing.assert_allclose(dx.numpy(), np.cos(A), atol=1e-12); np.testing.assert_allclose(d2.numpy(), -np.sin(A), atol=1e-12)
def test_second_order_backward_and_mixed():
  x, y = Tensor([0.5, 1.5], requires_grad=True), Tensor([2.0, -1.0], requires_grad=True)
  gx, = (x * x * y + y.exp()).sum().gradient(x)   # 2xy
  gx.sum().backward()                              # d/dx = 2y, d/dy = 2x
  np.testing.assert_allclose(x.grad.numpy(), [4, -2]); np.testing.assert_allclose(y.grad.numpy(), [1, 3])
def test_hessian_vector_of_tanh():
  x = Tensor(A, requires_grad=True)
  g, = x.tanh().sum().gradient(x)
  h, = g.gradient(x, gradient=Tensor(np.ones_like(A)))
  t = np.tanh(A)
  np.testing.assert_allclose(h.numpy(), -2 * t * (1 - t * t), atol=1e-12)

# ---- random graphs against finite differences
UN = [lambda x: x.sin(), lambda x: x.exp() * 0.1, lambda x: x.tanh(), lambda x: (x * x + 1).log(), lambda x: x.sigmoid(),
      lambda x: x.reshape(4, 3).T, lambda x: x.flip(1), lambda x: x.softmax(1), lambda x: x - x.mean(1, keepdim=True),
      lambda x: x.pad(((0, 0), (1, 0)))[:, :4], lambda x: (x * x + 0.5).sqrt(), lambda x: x.sum(0, keepdim=True).expand(3, 4)]
# max and where compare a with b + 0.25, not b: programs make values that tie up to rounding (v - v.mean(), then that
# minus its mean), where central differences flip the comparison and measure the jump, not the gradient
BIN = [lambda a, b: a + b, lambda a, b: a * b, lambda a, b: a - b * 0.5, lambda a, b: a / (b * b + 1), lambda a, b: a.maximum(b + 0.25),
       lambda a, b: a.gt(b + 0.25).where(a * 2, b), lambda a, b: (a @ b.T) @ b * 0.3]
@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(st.tuples(st.integers(0, len(UN) - 1), st.integers(0, len(BIN) - 1), st.integers(0, 5), st.booleans()), min_size=1, max_size=5),
       st.integers(0, 1000))
def test_random_graphs(prog, seed):
  def f(x, y):
    vals = [x, y]
    for u, b, j, unary in prog:
      v = vals[j % len(vals)]
      vals.append(UN[u](v) if unary else BIN[b](v, vals[(j + 1) % len(vals)]))
    return vals[-1] + vals[0] * 0 + vals[1] * 0   # both inputs take part (their gradient may be 0)
  fd_check(f, rnd(3, 4, seed=seed), rnd(3, 4, seed=seed + 1), tol=2e-6)

# ---- compute_gradient on UOps
def test_compute_gradient_uops():
  x = Tensor(A).uop
  y = (x * x).sum()
  g = compute_gradient(y, y._const(1.0, y.dtype), {x})
  assert g[x].op is not None and Tensor(g[x]).numpy().tolist() == (2 * A).tolist()
def test_deep_graph():
  x = Tensor([1.0], dtypes.float64, requires_grad=True)
  y = x
  for _ in range(20000): y = y * 1.0001 + 0.5   # deep: the walk is iterative
  y.sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), [1.0001 ** 20000], rtol=1e-9)
def test_detach_stops():
  x = Tensor(A, requires_grad=True)
  (x * x.detach()).sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), A)
  assert x.detach().requires_grad is False and x.detach().uop.op is Ops.DETACH

# ---- the Tensor API
def test_requires_grad_flags():
  assert Tensor([1.0]).requires_grad is None and Tensor([1.0], requires_grad=False).requires_grad is False
  x, c = Tensor([1.0], requires_grad=True), Tensor([2.0])
  assert (x * c).requires_grad is True and (c * 2).requires_grad is None
  assert (Tensor([1.0], requires_grad=False) * 2).requires_grad is False
  assert c.requires_grad_().requires_grad is True and c.requires_grad_(False).requires_grad is False
  assert Tensor.randn(2, 2, requires_grad=True).requires_grad and Tensor.ones(2, requires_grad=True).requires_grad
def test_constant_leaves_are_distinct():
  w, b = Tensor.zeros(3, requires_grad=True), Tensor.zeros(3, requires_grad=True)
  e = Tensor.eye(2, requires_grad=True)
  ((w + 1) * 2 + (b + 1) * 3).sum().backward()
  (e * 5).sum().backward()
  assert w.grad.tolist() == [2] * 3 and b.grad.tolist() == [3] * 3 and e.grad.tolist() == [[5, 5], [5, 5]]
  assert w.numpy().tolist() == [0] * 3 and e.numpy().tolist() == [[1, 0], [0, 1]]
def test_backward_accumulates():
  x = Tensor([1.0, 2.0], requires_grad=True)
  (x * 3).sum().backward()
  g = x.grad
  (x * x).sum().backward()
  assert g is x.grad and x.grad.tolist() == [5, 7]
def test_gradient_leaves_grad_alone():
  x = Tensor([1.0, 2.0], requires_grad=True)
  g, = (x * x).sum().gradient(x)
  assert x.grad is None and g.tolist() == [2, 4]
def test_backward_with_seed():
  x = Tensor([1.0, 2.0], requires_grad=True)
  (x * x).backward(Tensor([1.0, 10.0]))
  assert x.grad.tolist() == [2, 40]
def test_backward_after_realize():
  x = Tensor([1.0, 2.0], requires_grad=True)
  h = (x * x).realize()            # a realized intermediate keeps its graph for backward
  loss = (h * 3).sum()
  assert loss.item() == 15
  loss.backward()
  assert x.grad.tolist() == [6, 12]
  assert loss.gradient(h)[0].tolist() == [3, 3] and loss.gradient(x)[0].tolist() == [6, 12]
def test_backward_reads_realized_values():
  """A rule that needs a realized forward value (exp's result) reads its buffer: the backward graph holds no exp."""
  x = Tensor([0.5, 1.0, 2.0], requires_grad=True)
  e = (x * 2).exp().realize()
  g, = (e * e).sum().gradient(x)
  assert not any(u.op is Ops.EXP2 for u in g.uop.toposort)
  np.testing.assert_allclose(g.numpy(), 4 * np.exp(4 * np.array([0.5, 1.0, 2.0])), rtol=1e-5)
def test_backward_after_write_to_realized():
  """Writing to a realized intermediate gives it a new value; a backward through the graph built before the write
  uses the values that graph read."""
  x = Tensor([0.5, 1.0, 2.0], requires_grad=True)
  e = (x * 2).exp().realize()
  y = e * 3
  e[0] = 5.0
  e.realize()
  y.sum().backward()
  np.testing.assert_allclose(x.grad.numpy(), 6 * np.exp(2 * np.array([0.5, 1.0, 2.0])), rtol=1e-5)
def test_equal_constant_parameters_are_separate_leaves():
  """Tensors made from equal values are separate leaves, realized together (an optimizer does) or not: each gets the
  gradient of its own uses."""
  from morok_mlir.nn.optim import SGD
  w1, w2 = Tensor(3.5), Tensor(3.5)
  opt = SGD([w1, w2], lr=0.5)
  (w1 + w2).backward()
  assert w1.grad.item() == 1.0 and w2.grad.item() == 1.0
  with Tensor.train(): opt.step()
  assert w1.item() == 3.0 and w2.item() == 3.0
  a, b = Tensor.ones(3), Tensor.ones(3)
  Tensor.realize(a, b)
  a.requires_grad, b.requires_grad = True, True
  (a * 3 + b).sum().backward()
  assert a.grad.tolist() == [3.0] * 3 and b.grad.tolist() == [1.0] * 3
  c, d = Tensor(2.0), Tensor(2.0)   # not leaves: one node, whose gradient would be the sum of both tensors' uses
  raises_here(RuntimeError, lambda: (c * d).gradient(c, d), "cannot be told apart")
  c.requires_grad, d.requires_grad = True, True
  assert [g.item() for g in (c * d * 3).gradient(c, d)] == [6.0, 6.0]
def test_only_reached_leaves_get_grad():
  x, z = Tensor([1.0], requires_grad=True), Tensor([1.0], requires_grad=True)
  (x * 2).sum().backward()
  assert z.grad is None and x.grad.tolist() == [2]
def test_no_grad_contexts():
  x = Tensor([1.0, 2.0], requires_grad=True)
  with Tensor.test():
    assert Tensor.no_grad
    y = x * 2
  assert not Tensor.no_grad and y.requires_grad is False
  with morok_mlir.no_grad(): z = x * x
  (x * z).sum().backward()   # z is a constant here
  assert x.grad.tolist() == [1, 4]
  @morok_mlir.no_grad()
  def f(t): return t + 1
  assert f(x).requires_grad is False and (x + 1).requires_grad is True
def test_train_context():
  assert Tensor.training is False
  with Tensor.train():
    assert Tensor.training
    with Tensor.train(False): assert not Tensor.training
  assert Tensor.training is False
def test_to_device_keeps_flag():
  x = Tensor([1.0], requires_grad=True)
  assert x.to("CPU").requires_grad is True

# ---- errors name the user's line
def test_errors():
  x = Tensor([1.0, 2.0], requires_grad=True)
  raises_here(RuntimeError, lambda: (x * 2).backward(), "scalar outputs")
  raises_here(RuntimeError, lambda: Tensor([1.0, 2.0]).sum().backward(), "does not require grad")
  raises_here(RuntimeError, lambda: (x * 2).sum().detach().backward(), "does not require grad")
  raises_here(RuntimeError, lambda: Tensor([1, 2], requires_grad=True), "floating point")
  raises_here(RuntimeError, lambda: (x * 2).backward(Tensor([1.0])), "shape")
  raises_here(RuntimeError, lambda: (x * 2).sum().gradient(Tensor([1.0])), "not part of the graph")
  raises_here(RuntimeError, lambda: (x * 2).sum().cast(dtypes.int32).gradient(x), "only float")
  raises_here(TypeError, lambda: x.requires_grad_("yes"), "bool")
  raises_here(TypeError, lambda: (x * 2).sum().gradient(np.ones(2)), "Tensors")

# ---- a training step's kernels
def test_mlp_step_kernels():
  rng = np.random.default_rng(0)
  X, Yc = Tensor(rng.standard_normal((16, 8)).astype(np.float32)), Tensor(rng.integers(0, 4, 16).astype(np.int32))
  w1, b1 = Tensor(rng.standard_normal((8, 32)).astype(np.float32) * 0.3, requires_grad=True), Tensor.zeros(32, requires_grad=True)
  w2, b2 = Tensor(rng.standard_normal((32, 4)).astype(np.float32) * 0.3, requires_grad=True), Tensor.zeros(4, requires_grad=True)
  params = (w1, b1, w2, b2)
  ref = [p.numpy().astype(np.float64) for p in params]
  losses = []
  for _ in range(3):
    loss = X.linear(w1, b1).relu().linear(w2, b2).cross_entropy(Yc)
    loss.backward()
    with Tensor.test():
      for p in params: p.assign(p - 0.5 * p.grad)
    GlobalCounters.reset()
    Tensor.realize(*params, loss)
    assert GlobalCounters.kernel_count <= 12   # forward, backward and update of all four parameters in one schedule
    losses.append(loss.item())
    for p in params: p.grad = None
  # the same steps in numpy (float64)
  x, y = X.numpy().astype(np.float64), np.eye(4)[Yc.numpy()]
  for step in range(3):
    w1_, b1_, w2_, b2_ = ref
    h = x @ w1_ + b1_; a = np.maximum(h, 0); z = a @ w2_ + b2_
    p = np.exp(z - z.max(1, keepdims=True)); p /= p.sum(1, keepdims=True)
    assert abs(-np.mean(np.log((p * y).sum(1))) - losses[step]) < 1e-5
    dz = (p - y) / 16; da = dz @ w2_.T; dh = da * (h > 0)
    ref = [w1_ - 0.5 * x.T @ dh, b1_ - 0.5 * dh.sum(0), w2_ - 0.5 * a.T @ dz, b2_ - 0.5 * dz.sum(0)]
  for p, r in zip(params, ref): np.testing.assert_allclose(p.numpy(), r, rtol=1e-4, atol=1e-5)

# ---- scatter
IDX = np.array([[0, 2, 2, 1], [1, 1, 0, 0]], np.int32)   # duplicates along dim 0's target rows
@pytest.mark.parametrize("reduce", ["sum", "amax", "amin", "mean"])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_reduce(reduce, include_self):
  fd_check(lambda a, s: a.scatter_reduce(0, Tensor(IDX), s, reduce, include_self=include_self), A, rnd(2, 4, seed=7))
def test_scatter_add_and_store():
  fd_check(lambda a, s: a.scatter(1, Tensor(np.array([[0, 3], [1, 1], [2, 0]], np.int32)), s, reduce="add"), A, rnd(3, 2, seed=8))
  a, s = Tensor(A, requires_grad=True), Tensor(rnd(1, 4, seed=9), requires_grad=True)
  (a.scatter(0, Tensor(np.array([[2, 0, 1, 2]], np.int32)), s) * Tensor(B)).sum().backward()
  ref = B.copy(); ref[[2, 0, 1, 2], [0, 1, 2, 3]] = 0   # overwritten elements take no gradient
  np.testing.assert_allclose(a.grad.numpy(), ref)
  np.testing.assert_allclose(s.grad.numpy(), B[[2, 0, 1, 2], [0, 1, 2, 3]][None])
def test_scatter_max_ties():
  a, s = Tensor([[1.0, 5.0]], requires_grad=True), Tensor([[1.0, 2.0], [1.0, 5.0]], requires_grad=True)
  a.scatter_reduce(0, Tensor([[0, 0], [0, 0]]), s, "amax").sum().backward()
  np.testing.assert_allclose(a.grad.numpy(), [[1 / 3, 0.5]]); np.testing.assert_allclose(s.grad.numpy(), [[1 / 3, 0], [1 / 3, 0.5]])
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_prod(include_self):
  fd_check(lambda a, s: a.scatter_reduce(0, Tensor(IDX), s, "prod", include_self=include_self), A, rnd(2, 4, seed=7))
# zeros among the factors: a zero target, a target's only zero src, a target with two zero srcs, an index past the dim
@pytest.mark.parametrize("include_self", [True, False])
def test_scatter_prod_zeros(include_self):
  a, s = A.copy(), rnd(3, 4, seed=11)
  a[0, 0] = 0; s[0, 1] = 0; s[1, 2] = s[2, 2] = 0
  idx = np.array([[0, 2, 1, 1], [1, 1, 1, 3], [2, 0, 1, 0]], np.int32)
  fd_check(lambda a, s: a.scatter_reduce(0, Tensor(idx), s, "prod", include_self=include_self), a, s)
def test_scatter_multiply_scalar():
  a = Tensor(A, requires_grad=True)
  (a.scatter(0, Tensor(IDX[:, :1]), 2.0, reduce="multiply") * Tensor(B)).sum().backward()
  ref = B.copy(); ref[[0, 1], [0, 0]] *= 2
  np.testing.assert_allclose(a.grad.numpy(), ref, rtol=1e-6)

def test_backward_through_gpu_lowering():
  """A backward graph (matmul, relu, softmax, gather's scatter-add) through uop-lower-gpu, emulated on the CPU."""
  from morok_mlir.device.gpu_emulator import emulate
  x, w = Tensor(rnd(4, 6).astype(np.float32), requires_grad=True), Tensor(rnd(6, 5, seed=3).astype(np.float32), requires_grad=True)
  loss = (x @ w).relu().log_softmax(1).gather(1, Tensor(np.array([[0], [4], [2], [2]], np.int32))).sum()
  gx, gw = loss.gradient(x, w)
  for got, g in zip(emulate([gx.lazydata, gw.lazydata]), (gx, gw)): np.testing.assert_allclose(got, g.numpy(), rtol=1e-5, atol=1e-6)

def test_symbolic_sizes():
  from morok_mlir import Variable
  v = Variable("n", 1, 64)
  x, y = Tensor(A, requires_grad=True), Tensor(rnd(37, 2), requires_grad=True)
  (x.shrink(((0, v.bind(2)), None)).exp().sum() + (y.reshape(v.bind(37), 2) ** 2).sum(0).max()).backward()
  np.testing.assert_allclose(x.grad.numpy(), np.exp(A) * (np.arange(3) < 2)[:, None])
  yn = (y.numpy() ** 2).sum(0); np.testing.assert_allclose(y.grad.numpy(), 2 * y.numpy() * (yn == yn.max()))

def test_leaves_are_data():
  w = Tensor.rand(3, requires_grad=True)   # a lazy random tensor becomes data when it becomes a leaf
  loss = (w * 2).sum()
  w.numpy()                                # so realizing it later changes nothing under the loss
  loss.backward()
  assert w.grad.tolist() == [2, 2, 2]
  x = Tensor([1.0], requires_grad=True)
  y = (x * 3).requires_grad_()             # requires grad through x: stays a graph and takes a grad too
  (y * y).sum().backward()
  assert y.grad.tolist() == [6] and x.grad.tolist() == [18]

def test_every_graph_op_has_a_rule():
  """A graph op added to the table needs a gradient rule (None for sources that take none), or to be a leaf here."""
  from morok_mlir.dialects.ops import OPS
  from morok_mlir.core.gradient import pm_gradient
  leaves = {"buffer", "const", "define_var", "bind", "detach"}   # no sources to differentiate, or the gradient stops
  assert [n for n, o in OPS.items() if o.level == "graph" and n not in leaves and n not in pm_gradient.by_op] == []

def test_backward_built_once_per_structure(monkeypatch):
  """A training loop's backward is the same graph on new weights each step: its rules run once per structure, and each
  step's gradients are its own data's (the inputs put in the structure's slots)."""
  import morok_mlir.tensor as T
  calls = []
  monkeypatch.setattr(T, "compute_gradient", lambda *a: calls.append(1) or compute_gradient(*a))
  monkeypatch.setattr(T, "_GRADS", type(T._GRADS)(max_entries=64))   # an empty cache of this test's own
  x, y = rnd(8, 5, seed=3), np.random.default_rng(4).integers(0, 3, 8)
  for seed in range(3):
    w, b = rnd(5, 3, seed=seed), rnd(3, seed=seed + 10)
    W, B = Tensor(w, requires_grad=True), Tensor(b, requires_grad=True)
    (Tensor(x) @ W + B).cross_entropy(Tensor(y.astype(np.int32))).backward()
    z = x @ w + b
    p = np.exp(z - z.max(1, keepdims=True)); p /= p.sum(1, keepdims=True)
    dz = (p - np.eye(3)[y]) / len(x)
    np.testing.assert_allclose(W.grad.numpy(), x.T @ dz, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(B.grad.numpy(), dz.sum(0), rtol=1e-6, atol=1e-9)
  assert len(calls) == 1
  W = Tensor(rnd(5, 3, seed=7), requires_grad=True)   # another structure (no bias): its own rules
  (Tensor(x) @ W).cross_entropy(Tensor(y.astype(np.int32))).backward()
  assert len(calls) == 2

def test_backward_leaves_no_cycle():
  """A loss's backward keeps no reference cycle: the weights a step used are freed when their last tensor goes (no
  garbage collection needed, which a training loop would otherwise wait for with last step's memory)."""
  import gc, weakref
  x = Tensor(rnd(8, 5, seed=3).astype(np.float32))
  gc.disable()
  try:
    w = Tensor(rnd(5, 3, seed=1).astype(np.float32), requires_grad=True)
    (x @ w).relu().sum().backward()
    ref = weakref.ref(w.uop)
    del w
    assert ref() is None
  finally: gc.enable()
