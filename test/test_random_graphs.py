"""Random graphs (elementwise, movement, reduce, mixed dtypes) built with the Tensor API and mirrored in numpy.
Float graphs only use ops that are continuous, so rounding differences cannot flip a result; shapes come from a small
set so the compiler's caches get reused."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck
from morok_mlir import Tensor, dtypes
from morok_mlir.core.dtype import least_upper_dtype
from morok_mlir.device.gpu_emulator import emulate
import morok_mlir.passes  # noqa: F401  (raises the recursion limit at import, not inside a hypothesis test)

DTS = [dtypes.float32, dtypes.int32, dtypes.int8, dtypes.uint8, dtypes.bool]
SHAPES = [(2, 3, 4), (3, 4), (4,), (3, 1)]

def leaf(shape, dt, seed):
  r = np.random.default_rng(seed)
  if dt.is_bool: return r.random(shape) < 0.5
  if dt.is_float: return r.uniform(-2, 2, shape).astype(dt.np)
  return r.integers(dt.min, dt.max, shape, dtype=dt.np, endpoint=True)

def _promote(a, b):
  dt = least_upper_dtype(dtypes.from_np(a.dtype), dtypes.from_np(b.dtype)).np
  return a.astype(dt), b.astype(dt)

# name: (applies to dtype, tensor op, numpy op)
UNARY = {
  "neg": (lambda d: not d.is_bool, lambda t: -t, lambda a: -a),
  "abs": (lambda d: True, lambda t: t.abs(), np.abs),
  "relu": (lambda d: not d.is_bool, lambda t: t.relu(), lambda a: np.maximum(a, 0).astype(a.dtype)),
  "sin": (lambda d: d.is_float, lambda t: t.sin(), np.sin),
  "tanh": (lambda d: d.is_float, lambda t: t.tanh(), np.tanh),
  "sigmoid": (lambda d: d.is_float, lambda t: t.sigmoid(), lambda a: (1 / (1 + np.exp(-a))).astype(a.dtype)),
  "invert": (lambda d: d.is_int or d.is_bool, lambda t: ~t, np.invert),
  "floordiv3": (lambda d: d.is_int, lambda t: t // 3, lambda a: a // a.dtype.type(3)),
  "mod-5": (lambda d: d in dtypes.sints, lambda t: t % -5, lambda a: a % a.dtype.type(-5)),
  "is_pos": (lambda d: d.is_int, lambda t: t > 0, lambda a: a > 0),
  "to_f32": (lambda d: not d.is_float, lambda t: t.cast(dtypes.float32), lambda a: a.astype(np.float32)),
  "to_i8": (lambda d: d.is_int or d.is_bool, lambda t: t.cast(dtypes.int8), lambda a: a.astype(np.int8)),
}
BINARY = {
  "add": (lambda d: True, lambda a, b: a + b, np.add),
  "sub": (lambda d: not d.is_bool, lambda a, b: a - b, np.subtract),
  "mul": (lambda d: True, lambda a, b: a * b, np.multiply),
  "max": (lambda d: True, lambda a, b: a.maximum(b), np.maximum),
  "min": (lambda d: True, lambda a, b: a.minimum(b), np.minimum),
  "xor": (lambda d: d.is_int or d.is_bool, lambda a, b: a ^ b, np.bitwise_xor),
  "and": (lambda d: d.is_int or d.is_bool, lambda a, b: a & b, np.bitwise_and),
  "lt": (lambda d: not d.is_float, lambda a, b: a < b, np.less),
  "eq": (lambda d: not d.is_float, lambda a, b: a == b, np.equal),
  "floordiv": (lambda d: d.is_int, lambda a, b: a // b, lambda a, b: np.where(b == 0, 0, a // np.where(b == 0, 1, b)).astype(a.dtype)),
  "mod": (lambda d: d.is_int, lambda a, b: a % b, lambda a, b: np.where(b == 0, 0, a % np.where(b == 0, 1, b)).astype(a.dtype)),
}

def broadcastable(s, t):
  return all(x == y or x == 1 or y == 1 for x, y in zip(s[::-1], t[::-1]))

@st.composite
def step(draw, pool):
  """One new (Tensor, ndarray) pair built from the pool."""
  t, a = draw(st.sampled_from(pool))
  dt, shape = t.dtype, t.shape
  kind = draw(st.sampled_from(["unary", "binary", "binary", "movement", "movement", "reduce", "where"]))
  if kind == "unary":
    name = draw(st.sampled_from([n for n, v in UNARY.items() if v[0](dt)]))
    return UNARY[name][1](t), UNARY[name][2](a)
  if kind in ("binary", "where"):
    others = [(u, b) for u, b in pool if broadcastable(u.shape, shape)]
    u, b = draw(st.sampled_from(others))
    if kind == "where":
      c = a != 0 if not dt.is_float else a > 0
      ref = np.where(c, *_promote(b, a))
      return (t != 0 if not dt.is_float else t > 0).where(u, t), ref
    pa, pb = _promote(a, b)
    name = draw(st.sampled_from([n for n, v in BINARY.items() if v[0](dtypes.from_np(pa.dtype))]))
    if draw(st.booleans()): return BINARY[name][1](t, u), BINARY[name][2](pa, pb)
    return BINARY[name][1](u, t), BINARY[name][2](pb, pa)
  if kind == "reduce" and shape:
    ax = draw(st.sampled_from([None] + list(range(-len(shape), len(shape)))))
    keep = draw(st.booleans())
    op = draw(st.sampled_from(["sum", "max", "min"]))
    if op == "sum": return t.sum(ax, keepdim=keep), np.sum(a, ax, keepdims=keep)
    return getattr(t, op)(ax, keepdim=keep), getattr(np, op)(a, ax, keepdims=keep)
  # movement
  n = len(shape)
  mv = draw(st.sampled_from(["permute", "flip", "slice", "pad", "reshape", "expand"] if n else ["reshape"]))
  if mv == "permute":
    order = draw(st.permutations(range(n)))
    return t.permute(order), a.transpose(order)
  if mv == "flip":
    axes = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=n, unique=True))
    return t.flip(axes), np.flip(a, axes)
  if mv == "slice":
    idx = tuple(slice(draw(st.integers(-s, s)), draw(st.integers(-s, s)), draw(st.sampled_from([1, 2, -1, -2]))) for s in shape)
    if 0 in a[idx].shape: idx = tuple(slice(None, None, -1) for _ in shape)  # keep graphs non-empty
    return t[idx], a[idx]
  if mv == "pad":
    pads = tuple((draw(st.integers(0, 2)), draw(st.integers(0, 2))) for _ in shape)
    return t.pad(pads), np.pad(a, pads)
  if mv == "expand" and 1 in shape:
    new = tuple(draw(st.integers(1, 3)) if s == 1 else s for s in shape)
    return t.expand(new), np.broadcast_to(a, new)
  new = draw(st.sampled_from([(-1,), (1, -1), (-1, 1)] + ([(shape[0], -1)] if n else [])))
  return t.reshape(new), a.reshape(new)

def compare(out, ref):
  assert out.shape == ref.shape and out.dtype == ref.dtype, (out.shape, out.dtype, ref.shape, ref.dtype)
  if out.dtype.kind == "f":
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4 * max(1.0, float(np.nanmax(np.abs(ref), initial=0))), equal_nan=True)
  else: np.testing.assert_array_equal(out, ref)

def random_graph(data) -> tuple[Tensor, np.ndarray]:
  pool = []
  for i in range(data.draw(st.integers(1, 3), label="inputs")):
    a = leaf(data.draw(st.sampled_from(SHAPES)), data.draw(st.sampled_from(DTS)), i)
    pool.append((Tensor(a), a))
  for _ in range(data.draw(st.integers(1, 6), label="steps")):
    pool.append(data.draw(step(pool)))
  return pool[-1]

SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@settings(max_examples=300, **SETTINGS)
@given(st.data())
def test_random_graph(data):
  t, ref = random_graph(data)
  with np.errstate(all="ignore"): compare(t.numpy(), np.asarray(ref))

@pytest.mark.filterwarnings("ignore::RuntimeWarning")
@settings(max_examples=100, **SETTINGS)
@given(st.data())
def test_random_graph_gpu_lowering(data):
  """The same graphs through uop-lower-gpu, run by the CPU emulator (one loop iteration per GPU thread)."""
  t, ref = random_graph(data)
  with np.errstate(all="ignore"): compare(emulate([t.lazydata])[0], np.asarray(ref))

@st.composite
def layout(draw):
  """A float tensor of 2-4 dims (sizes where loops merge or leave a remainder), then one movement op and an elementwise
  op with a tensor broadcast along some of its axes: the index patterns uop-optimize's merge_loops must merge only where
  every address allows."""
  shape = tuple(draw(st.lists(st.sampled_from([1, 2, 3, 5, 7, 14, 16]), min_size=2, max_size=4)))
  move = draw(st.sampled_from(["none", "permute", "slice", "pad", "flip"]))
  keep = tuple(draw(st.lists(st.booleans(), min_size=len(shape), max_size=len(shape))))
  return shape, move, keep, draw(st.integers(0, 2**16))

@settings(max_examples=60, derandomize=True, **SETTINGS)
@given(layout())
def test_merged_loop_layouts(case):
  shape, move, keep, seed = case
  r = np.random.default_rng(seed)
  x = r.standard_normal(shape).astype(np.float32)
  mv = {"none": (lambda t: t, lambda a: a),
        "permute": (lambda t: t.permute(*range(t.ndim)[::-1]), lambda a: a.transpose(range(a.ndim)[::-1])),
        "slice": (lambda t: t[..., : max(1, t.shape[-1] - 1)], lambda a: a[..., : max(1, a.shape[-1] - 1)]),
        "pad": (lambda t: t.pad(((0, 0),) * (t.ndim - 1) + ((1, 2),)), lambda a: np.pad(a, ((0, 0),) * (a.ndim - 1) + ((1, 2),))),
        "flip": (lambda t: t.flip(0), lambda a: a[::-1])}[move]
  y = mv[1](x)
  b = r.standard_normal(tuple(d if k else 1 for d, k in zip(y.shape, keep))).astype(np.float32)
  got = (mv[0](Tensor(x)) * 2 + Tensor(b)).relu().numpy()
  np.testing.assert_allclose(got, np.maximum(y * 2 + b, 0), rtol=1e-6, atol=1e-6)
