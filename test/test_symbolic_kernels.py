"""Kernels over symbolic sizes (a bound Variable: rows of a matmul, a sequence length) get the tiles and vector lanes of
static ones, laid out for the Variable's largest value, and handle the remainder at run time: each value checked
against numpy at the sizes where remainders show (1, a lane group -1/+1, a register tile +1, primes, the extremes),
under TinyJit (one capture, every value a kernel argument) and without it."""
import numpy as np
import pytest
from morok_mlir import Tensor, Variable
from morok_mlir.jit import TinyJit
from morok_mlir.realize import GlobalCounters

MAX = 128
# 1, lanes of AVX2/AVX-512 -1 and +1, register tiles (8, 6 rows; 32, 64 columns) +1, primes, the largest
SIZES = (1, 7, 9, 15, 16, 17, 31, 33, 37, 65, 97, MAX - 1, MAX)

def rnd(*s, seed=0): return np.random.default_rng(seed).standard_normal(s).astype(np.float32)

def check(f, calls, rtol=1e-4, atol=1e-4):
  """calls: (args, want) pairs; every result checked, nothing compiled once the capture replays."""
  compiled = []
  for args, want in calls:
    np.testing.assert_allclose(f(*args).numpy(), want, rtol=rtol, atol=atol)
    compiled.append(GlobalCounters.compiled)
  assert f.plan is not None and compiled[1:] == compiled[1:2] * (len(compiled) - 1)

def test_matmul_symbolic_rows_jit():
  X, W, B = rnd(MAX, 96), rnd(96, 100, seed=1), rnd(100, seed=2)
  v, w, b = Variable("rows_mm", 1, MAX), Tensor(W), Tensor(B)
  @TinyJit
  def f(x, m): return (x[:m] @ w + b).relu()   # the epilogue (bias, relu) on the tiles
  x = Tensor(X)
  check(f, [((x, v.bind(m)), np.maximum(X[:m] @ W + B, 0)) for m in SIZES])

def test_matmul_symbolic_columns_and_depth_jit():
  A, Bm = rnd(64, MAX), rnd(MAX, MAX, seed=1)
  v = Variable("cols_mm", 1, MAX)
  a, bm = Tensor(A), Tensor(Bm)
  @TinyJit
  def cols(n): return a @ bm[:, :n]          # N symbolic
  check(cols, [((v.bind(n),), A @ Bm[:, :n]) for n in SIZES])
  @TinyJit
  def depth(n): return a[:, :n] @ bm[:n]     # K symbolic: the sum runs to n
  check(depth, [((v.bind(n),), A[:, :n] @ Bm[:n]) for n in SIZES])

def test_matmul_symbolic_without_jit():
  X, W = rnd(MAX, 80), rnd(80, 72, seed=1)
  v, x, w = Variable("rows_plain", 1, MAX), Tensor(X), Tensor(W)
  for m in (1, 17, 97, MAX):
    np.testing.assert_allclose((x[:v.bind(m)] @ w).numpy(), X[:m] @ W, rtol=1e-4, atol=1e-4)

def attention_ref(q, k, v):
  s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(q.shape[-1])
  s = np.exp(s - s.max(-1, keepdims=True))
  return (s / s.sum(-1, keepdims=True)) @ v

def test_attention_symbolic_length_jit():
  H, D = 2, 32
  Q, K, V = (rnd(1, H, MAX, D, seed=i) for i in range(3))
  var = Variable("len_att", 1, MAX)
  @TinyJit
  def f(q, k, v, n): return (q[:, :, :n] @ k[:, :, :n].transpose(-1, -2) / np.sqrt(D)).softmax(-1) @ v[:, :, :n]
  q, k, v = Tensor(Q), Tensor(K), Tensor(V)
  check(f, [((q, k, v, var.bind(n)), attention_ref(Q[:, :, :n], K[:, :, :n], V[:, :, :n])) for n in SIZES])

def test_decode_attention_over_a_symbolic_cache_jit():
  # one query row against the first n cached positions (a KV cache under TinyJit): M = 1, N and K symbolic
  H, D = 2, 64
  Q, K, V = rnd(1, H, 1, D), rnd(1, H, MAX, D, seed=1), rnd(1, H, MAX, D, seed=2)
  var = Variable("pos_att", 1, MAX)
  k, v = Tensor(K), Tensor(V)
  @TinyJit
  def f(q, n): return (q @ k[:, :, :n].transpose(-1, -2) / 8).softmax(-1) @ v[:, :, :n]
  q = Tensor(Q)
  check(f, [((q, var.bind(n)), attention_ref(Q, K[:, :, :n], V[:, :, :n])) for n in SIZES])

@pytest.mark.parametrize("op", ["sum0", "sum1", "max1", "mean0", "softmax1"])
def test_reductions_symbolic_jit(op):
  X = rnd(MAX, 300)
  v = Variable(f"red_{op}", 1, MAX)
  fns = {"sum0": (lambda t: t.sum(0), lambda a: a.sum(0)), "sum1": (lambda t: t.sum(1), lambda a: a.sum(1)),
         "max1": (lambda t: t.max(1), lambda a: a.max(1)), "mean0": (lambda t: t.mean(0), lambda a: a.mean(0)),
         "softmax1": (lambda t: t.softmax(1), lambda a: (e := np.exp(a - a.max(1, keepdims=True))) / e.sum(1, keepdims=True))}
  mine, ref = fns[op]
  @TinyJit
  def f(x, m): return mine(x[:m]) if op.endswith("0") else mine(x[:, :m].T.contiguous().T)
  x = Tensor(X)
  check(f, [((x, v.bind(m)), ref(X[:m]) if op.endswith("0") else ref(np.ascontiguousarray(X[:, :m]))) for m in SIZES])

def test_pooling_lanes_symbolic_width_jit():
  # a store stepping along a symbolic innermost loop, its value a reduce inside it (uop.lanes: vector lanes, the last
  # group's lanes past the size masked off)
  X = rnd(4, 5, MAX)
  v = Variable("pool_w", 1, MAX)
  @TinyJit
  def f(x, n): return x[:, :, :n].max(1) + x[:, :, :n].sum(1)
  x = Tensor(X)
  check(f, [((x, v.bind(n)), X[:, :, :n].max(1) + X[:, :, :n].sum(1)) for n in SIZES])

def test_elementwise_symbolic_jit():
  X = rnd(MAX, 33)
  v = Variable("ew_rows", 1, MAX)
  @TinyJit
  def f(x, m): return (x[:m] * 2 + 1).exp() - x[:m].sigmoid()
  x = Tensor(X)
  check(f, [((x, v.bind(m)), np.exp(X[:m] * 2 + 1) - 1 / (1 + np.exp(-X[:m]))) for m in SIZES], rtol=1e-5, atol=1e-5)

def test_matmul_symbolic_inner_row_range_jit():
  # rows (b, i) with the symbolic i inside the static b: the contraction's rows are not a prefix of its layout there,
  # so the kernel keeps plain loops; its values are right at every size
  X, W = rnd(3, MAX, 40), rnd(40, 72, seed=1)
  v, w = Variable("rows_inner", 1, MAX), Tensor(W)
  @TinyJit
  def f(x, m): return x[:, :m] @ w
  x = Tensor(X)
  check(f, [((x, v.bind(m)), X[:, :m] @ W) for m in (1, 9, 17, 97, MAX)])

def test_copies_for_narrower_bounds_at_every_value():
  # a kernel of symbolic sizes also runs as copies compiled for narrower bounds of its values (plain loops where the
  # product is too small to pack, panels for fewer rows): at every value of the range, each copy's bound and the next
  # value included, the result equals the static kernel's, under TinyJit and without it
  from morok_mlir.realize import Variants
  top = 40
  X, W = rnd(top, 256), rnd(256, 96, seed=1)
  q, k, v = (rnd(1, 2, top, 16, seed=s) for s in (3, 4, 5))
  x, w, tq, tk, tv = map(Tensor, (X, W, q, k, v))
  m = Variable("rows_copies", 1, top)
  mm = lambda n: (x[:n] @ w).realize()
  att = lambda n: (tq[:, :, :n] @ tk[:, :, :n].transpose(-1, -2) / 4).softmax(-1) @ tv[:, :, :n]
  jmm, jatt = TinyJit(mm), TinyJit(lambda n: att(n).realize())
  def ref(n):
    s = q[:, :, :n] @ k[:, :, :n].transpose(0, 1, 3, 2) / 4
    e = np.exp(s - s.max(-1, keepdims=True))
    return X[:n] @ W, e / e.sum(-1, keepdims=True) @ v[:, :, :n]
  for n in [*range(1, top + 1), 1, top, 2]:
    for f, j, want in zip((mm, att), (jmm, jatt), ref(n)):
      if n in (1, 2, top): want = f(n).numpy()   # the static kernels' own result at the extremes
      np.testing.assert_allclose(f(m.bind(n)).numpy(), want, rtol=1e-4, atol=1e-4)
      np.testing.assert_allclose(j(m.bind(n)).numpy(), want, rtol=1e-4, atol=1e-4)
  # (the product over 40 rows is packed, over one row it is not: the copies exist on every machine)
  assert any(isinstance(s.prog, Variants) for s in jmm.plan.steps)

def test_copies_alternating_inside_one_native_batch():
  # a replay runs the copy each call's values pick inside its native batch (the choice made once per value): values
  # alternating between copies' bounds, again and again, each equal to numpy, and the picked copies batched
  from morok_mlir.device.cpu import Batch
  from morok_mlir.jit import _Native
  top = 40
  X, W = rnd(top, 256), rnd(256, 96, seed=1)
  x, w, m = Tensor(X), Tensor(W), Variable("rows_alternating", 1, top)
  j = TinyJit(lambda n: (x[:n] @ w + 1).relu().realize())
  for n in [top, 1, top, 1, 1, 2, 39, 39, 1, top, 17, 2, top, 1] * 2:
    np.testing.assert_allclose(j(m.bind(n)).numpy(), np.maximum(X[:n] @ W + 1, 0), rtol=1e-4, atol=1e-4)
  # results still held keep their values while later replays (at the same value or another) reuse the plan's memory
  held = [(n, j(m.bind(n))) for n in (3, 3, top, 3, 1, top)]
  for n, r in held: np.testing.assert_allclose(r.numpy(), np.maximum(X[:n] @ W + 1, 0), rtol=1e-4, atol=1e-4)
  natives = [s for s in j.plan.run if type(s) is _Native]
  assert any(type(g) is Batch and any(k in s.picks for k in s.kernels) for s in natives for segs in s.chosen.values() for g in segs)

def test_attention_copies_alternating_replays():
  # two kernels with copies each: values alternating so that one kernel keeps its copy while the other's changes, each
  # replay equal to numpy (a copy's kept panels are those of the call's values, whichever copies ran in between)
  top = 128
  q, k, v = (rnd(1, 2, top, 16, seed=s) for s in (3, 4, 5))
  tq, tk, tv, m = Tensor(q), Tensor(k), Tensor(v), Variable("len_alternating", 1, top)
  j = TinyJit(lambda n: ((tq[:, :, :n] @ tk[:, :, :n].transpose(-1, -2) / 4).softmax(-1) @ tv[:, :, :n]).realize())
  def ref(n):
    s = q[:, :, :n] @ k[:, :, :n].transpose(0, 1, 3, 2) / 4
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True) @ v[:, :, :n]
  for n in [100, 20, 100, 20, 100, 3, 100, 3, 20, 100, top, 7, top, 1, 2, 1, 30, 30, top] * 2:
    np.testing.assert_allclose(j(m.bind(n)).numpy(), ref(n), rtol=1e-4, atol=1e-4)

def lanes(monkeypatch, vec):
  """Kernels compiled for vec f32 lanes (AVX2's 8, AVX-512's 16) whatever this machine's, in a schedule cache of their own."""
  import morok_mlir.passes.optimize as opt
  from morok_mlir import realize as R
  monkeypatch.setattr(opt, "VEC_WIDTH", vec)
  monkeypatch.setattr(R, "_schedule_cache", {})

@pytest.mark.parametrize("vec", [8, 16])
def test_attention_rows_ignore_scores_past_the_length(vec, monkeypatch):
  # the softmax rows run as vector lanes to the length read at run time, the last group's lanes past it masked off:
  # the scores a longer call left past the length (far larger than any within it: they would take the row's max and
  # zero every exp) are never read, at lengths in the whole steps, in the last group and both
  lanes(monkeypatch, vec)
  top = 128
  q, k, v = (rnd(1, 2, top, 16, seed=s) for s in (6, 7, 8))
  k[:, :, 40:] *= 50
  tq, tk, tv, m = Tensor(q), Tensor(k), Tensor(v), Variable("len_stale", 1, top)
  j = TinyJit(lambda n: ((tq[:, :, :n] @ tk[:, :, :n].transpose(-1, -2) / 4).softmax(-1) @ tv[:, :, :n]).realize())
  for n in (top, 37, top, 20, 100, 64, top, 17, 79, 1, 16, top, 33):
    np.testing.assert_allclose(j(m.bind(n)).numpy(), attention_ref(q[:, :, :n], k[:, :, :n], v[:, :, :n]), rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize("vec", [8, 16])
def test_matmul_symbolic_columns_epilogue_and_long_k_jit(vec, monkeypatch):
  # N symbolic: a last panel at most half full runs half-width tiles, the rest of its tile never computed; the epilogue
  # (bias, relu) reads only the columns within n, also where K takes several slices (C kept between them)
  lanes(monkeypatch, vec)
  A, Bm, bias = rnd(40, 1200), rnd(1200, MAX, seed=1), rnd(MAX, seed=2)
  v, a, bm, b = Variable("cols_epi", 1, MAX), Tensor(A), Tensor(Bm), Tensor(bias)
  @TinyJit
  def f(n): return (a @ bm[:, :n] + b[:n]).relu()
  check(f, [((v.bind(n),), np.maximum(A @ Bm[:, :n] + bias[:n], 0)) for n in (MAX, *SIZES, 16, MAX, 48, 49)], rtol=2e-4, atol=2e-4)

@pytest.mark.parametrize("vec", [8, 16])
def test_attention_rows_nan_within_the_length_only(vec, monkeypatch):
  # a NaN key at position 50: rows over a length past it are NaN (the max and the sum see it, in a whole step or in
  # the last group), rows over a length up to 50 never read it
  lanes(monkeypatch, vec)
  top = 128
  q, k, v = (rnd(1, 2, top, 16, seed=s) for s in (9, 10, 11))
  k[0, 1, 50, 3] = np.nan
  tq, tk, tv, m = Tensor(q), Tensor(k), Tensor(v), Variable("len_nan", 1, top)
  j = TinyJit(lambda n: ((tq[:, :, :n] @ tk[:, :, :n].transpose(-1, -2) / 4).softmax(-1) @ tv[:, :, :n]).realize())
  for n in (top, 50, 51, 64, 65, 100, 1, 49, top):
    out, want = j(m.bind(n)).numpy(), attention_ref(q[:, :, :n], k[:, :, :n], v[:, :, :n])
    assert np.isnan(out[0, 1]).all() == (n > 50) and not np.isnan(out[0, 0]).any()
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)

def softmax_rows_ref(s, v):
  s = s.astype(np.float64)
  with np.errstate(invalid="ignore", over="ignore"):
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ v

@pytest.mark.parametrize("vec", [8, 16])
@pytest.mark.parametrize("n", [33, 65, 100, 131, 257])
def test_static_softmax_rows_match_numpy(n, vec, monkeypatch):
  # rows of a static length packed as vector lanes (whole steps, then groups, the last one masked): a row with a NaN,
  # +inf (NaN rows, as numpy's), -inf terms (zero weight), all -inf (NaN), huge values (stable: exp(s - max)), each in
  # the whole steps or in the last group; the other rows plain
  lanes(monkeypatch, vec)
  s, v = rnd(2, n, n, seed=12) * 4, rnd(2, n, 16, seed=13)
  s[0, 1, n // 3], s[0, 2, n - 1], s[1, 3, :] = np.nan, np.inf, -np.inf
  s[0, 4, ::3], s[1, 5, n - 2:], s[1, 6, 0] = -np.inf, -np.inf, np.inf
  s[1, 7, :] += 1e30
  s[0, 8, :] *= 1e4
  out = (Tensor(s).softmax(-1) @ Tensor(v)).numpy()
  want = softmax_rows_ref(s, v)
  np.testing.assert_allclose(out, want, rtol=2e-4, atol=2e-4)
  assert np.isnan(out[0, 1]).all() and np.isnan(out[0, 2]).all() and np.isnan(out[1, 3]).all() and np.isnan(out[1, 6]).all()
  assert not np.isnan(np.delete(out.reshape(-1, 16), [1, 2, n + 3, n + 6], 0)).any()
