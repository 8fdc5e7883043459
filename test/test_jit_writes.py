"""A TinyJit function that writes into its tensor arguments (t[a:b] = v, t[idx] = v, t.assign(v), t += v): every call,
replays included, equals the same function run without TinyJit, in what it returns and in the arguments the caller
reads afterwards (new tensors each call, or one tensor passed again); state written in place (a KV cache) stays so."""
import numpy as np, pytest
from hypothesis import given, settings, strategies as st, HealthCheck
from morok_mlir import Tensor, Variable
from morok_mlir.jit import TinyJit
import morok_mlir.passes  # noqa: F401  (raises the recursion limit at import, not inside a hypothesis test)

def slice_ret(a, b): a[0:2] = b; return (a * 2).realize()
def slice_realized(a, b): a[0:2] = b; a.realize(); return (a * 2).realize()
def slice_noret(a, b): a[1:3] = b; a.realize()
def assign_read(a, b): a.assign(a + b); return (a * 2).realize()
def assign_ret(a, b): a.assign(a + b).realize(); return a
def assign_noret(a, b): a.assign(a * b).realize()
def index_write(a, b): a[Tensor([1, 3])] = b; a.realize(); return (a - 1).realize()
def iadd(a, b): a += b; a.realize(); return (a.sum(0)).realize()
def two_args(a, b): a[0:2] = b[2:4]; b[2:4] = 1.0; Tensor.realize(a, b)
FNS = {f.__name__: (f, s) for f, s in [(slice_ret, (2, 4)), (slice_realized, (2, 4)), (slice_noret, (2, 4)), (assign_read, (4, 4)),
                                         (assign_ret, (4, 4)), (assign_noret, (4, 4)), (index_write, (2, 4)), (iadd, (4, 4)), (two_args, (4, 4))]}

def arr(rng, shape): return rng.standard_normal(shape).astype(np.float32)
def calls(f, bshape: tuple, same: list[bool], seed: int = 0) -> list:
  """Each call's result and its arguments' values after it, as arrays; same[i]: call i gets the previous call's a."""
  rng, out, a = np.random.default_rng(seed), [], None
  for s in same:
    if not (s and a is not None): a = Tensor(arr(rng, (4, 4))).contiguous().realize()
    b = Tensor(arr(rng, bshape)).contiguous().realize()
    r = f(a, b)
    out.append((None if r is None else r.numpy(), a.numpy(), b.numpy()))
  return out

def check(f, bshape, same, seed=0):
  want, got = calls(f, bshape, same, seed), calls(TinyJit(f), bshape, same, seed)
  for i, (w, g) in enumerate(zip(want, got)):
    for x, y in zip(w, g): assert (x is None) == (y is None) and (x is None or np.array_equal(x, y)), f"call {i}"

@pytest.mark.parametrize("name", FNS)
@pytest.mark.parametrize("same", ["new", "same", "mixed"])
def test_writes_to_arguments_match_eager(name, same):
  f, bshape = FNS[name]
  check(f, bshape, {"new": [False] * 5, "same": [True] * 5, "mixed": [False, True, False, False, True, True]}[same])

def test_argument_written_is_replayed():
  j = TinyJit(assign_noret)
  check(j, (4, 4), [False] * 4)
  assert j.jit_cache   # (replayed: not run normally)

def test_state_cache_and_argument_written():
  """A KV cache (state, written in place at a bound position) beside an argument written in place."""
  sp = Variable("sp_w", 0, 7)
  def run(jit: bool):
    cache = Tensor.zeros(8, 4).contiguous().realize()
    def step(x, acc, pos):
      cache[pos:pos + 1] = x; cache.realize()
      acc.assign(acc + cache.sum(0, keepdim=True)).realize()
      return (cache * 1).realize()
    f, rng, out = TinyJit(step) if jit else step, np.random.default_rng(1), []
    for i in range(6):
      x, acc = Tensor(arr(rng, (1, 4))).contiguous().realize(), Tensor(arr(rng, (1, 4))).contiguous().realize()
      r = f(x, acc, sp.bind(i))
      out.append((r.numpy(), acc.numpy(), cache.numpy())); ptrs.append(cache.uop.buffer.ptr)
    return out, f
  ptrs: list[int] = []
  (want, _), (got, j) = run(False), run(True)
  assert j.jit_cache and len(set(ptrs[-4:])) == 1   # replayed, the cache written in place
  for w, g in zip(want, got):
    for x, y in zip(w, g): np.testing.assert_allclose(y, x, rtol=1e-6)

def test_symbolic_argument_written():
  n = Variable("n_w", 1, 8)
  def f(a): a.assign(a + 1).realize(); return (a * 2).realize()
  j, rng = TinyJit(f), np.random.default_rng(2)
  for k in (3, 5, 2, 4):
    base = Tensor(arr(rng, (8, 4))).contiguous().realize()
    a, ref = base[:n.bind(k)], base.numpy()[:k]
    r = j(a)
    np.testing.assert_allclose(a.numpy(), ref + 1); np.testing.assert_allclose(r.numpy()[:k], (ref + 1) * 2)

def test_multi_device_argument_written():
  D2 = ("CPU:0", "CPU:1")
  def f(a, b): a.assign(a + b).realize(); return (a * 2).realize()
  j, rng = TinyJit(f), np.random.default_rng(3)
  for _ in range(4):
    x, y = arr(rng, (4, 4)), arr(rng, (4, 4))
    a, b = Tensor(x).shard(D2, axis=0).realize(), Tensor(y).shard(D2, axis=0).realize()
    r = j(a, b)
    np.testing.assert_allclose(a.numpy(), x + y, rtol=1e-6); np.testing.assert_allclose(r.numpy(), (x + y) * 2, rtol=1e-6)

@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.sampled_from(sorted(FNS)), st.lists(st.booleans(), min_size=3, max_size=7), st.integers(0, 2**16))
def test_writes_to_arguments_fuzz(name, same, seed):
  check(*FNS[name], same, seed)

def test_argument_in_a_list_written():
  def f(xs, b=None): xs[1][0:2] = b; xs[1].realize(); return (xs[0] + xs[1]).realize()
  def run(g):
    rng, out = np.random.default_rng(4), []
    for _ in range(5):
      xs = [Tensor(arr(rng, (4, 4))).contiguous().realize() for _ in range(2)]
      r = g(xs, b=Tensor(arr(rng, (2, 4))).contiguous().realize())
      out.append((r.numpy(), xs[1].numpy()))
    return out
  for w, g in zip(run(f), run(TinyJit(f))): assert all(np.array_equal(x, y) for x, y in zip(w, g))
