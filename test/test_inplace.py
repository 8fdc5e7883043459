"""Writes through a slice of a realized tensor (`t[a:b] = v`) stored in place: into the tensor's own buffer, only the
written box, when nothing else can read the old contents; a copy otherwise (functional semantics), differential
against numpy, hazards included (views taken before the write, the old value read in the same schedule, a value that
reads its own target, a second tensor over one buffer, copies on other devices), eager and under TinyJit with the
rows' position a bound Variable."""
import numpy as np, pytest
from hypothesis import given, settings, strategies as st, HealthCheck
from morok_mlir import Tensor
from morok_mlir.core.uop import Variable
from morok_mlir.jit import TinyJit
import morok_mlir.passes  # noqa: F401  (raises the recursion limit at import, not inside a hypothesis test)

def realized(a: np.ndarray) -> Tensor:
  """a in a buffer the driver made (a schedule's output: memory no one else views)."""
  return Tensor(a).contiguous().realize()

def ptr(t: Tensor) -> int: return t.uop.buffer.ptr
REF = np.arange(48, dtype=np.float32).reshape(4, 3, 4)

def test_write_in_place():
  t = realized(REF); p = ptr(t)
  t[1:3] = np.full((2, 3, 4), 7, np.float32); t.realize()
  t[0, :, 2:4] = 5.0; t.realize()
  ref = REF.copy(); ref[1:3] = 7; ref[0, :, 2:4] = 5
  assert ptr(t) == p and np.array_equal(t.numpy(), ref)

def test_write_symbolic_start_in_place():
  sp = Variable("sp", 0, 3)
  t = realized(REF); p = ptr(t); ref = REF.copy()
  for i in (2, 0, 3):
    t[sp.bind(i):sp.bind(i) + 1] = Tensor(np.full((1, 3, 4), 10 + i, np.float32)); t.realize(); ref[i] = 10 + i
    assert ptr(t) == p and np.array_equal(t.numpy(), ref)

def test_zeros_buffer_is_written_in_place():
  """realize.zeros: zeros (on CPU in a mapping whose pages are unwritten) that slice writes change in place, as a
  schedule's output."""
  from morok_mlir import realize as R
  from morok_mlir.core.dtype import dtypes
  t = Tensor(R.zeros((4, 3, 4), dtypes.float32, "CPU"), device="CPU"); p = ptr(t); ref = np.zeros((4, 3, 4), np.float32)
  assert np.array_equal(t.numpy(), ref)
  t[1:3] = np.full((2, 3, 4), 7, np.float32); t.realize(); ref[1:3] = 7
  assert ptr(t) == p and np.array_equal(t.numpy(), ref)
  assert np.array_equal((t + 1).numpy(), ref + 1)

def test_assign_through_a_slice_view():
  t = realized(REF); p = ptr(t); sp = Variable("sp", 0, 3)
  t[1:3].assign(Tensor(np.full((2, 3, 4), 7, np.float32))).realize()
  t[:, :, sp.bind(1):sp.bind(1) + 2].assign(Tensor(np.full((4, 3, 2), -1, np.float32))).realize()
  ref = REF.copy(); ref[1:3] = 7; ref[:, :, 1:3] = -1
  assert ptr(t) == p and np.array_equal(t.numpy(), ref)

def test_view_taken_before_keeps_old_values():
  t = realized(REF); p = ptr(t)
  old = t[1:3]   # lazy, over the old buffer
  t[1:3] = 0.0; t.realize()
  assert ptr(t) != p and np.array_equal(old.numpy(), REF[1:3]) and not t.numpy()[1:3].any()

def test_old_value_read_in_the_same_schedule():
  t = realized(REF); p = ptr(t)
  c = t + 1
  t[0:2] = 5.0
  Tensor.realize(c, t)
  ref = REF.copy(); ref[0:2] = 5
  assert ptr(t) == p and np.array_equal(c.numpy(), REF + 1) and np.array_equal(t.numpy(), ref)

@pytest.mark.parametrize("dst,src", [((0, 3), (1, 4)), ((1, 4), (0, 3)), ((0, 2), (2, 4))])
def test_value_reads_its_target(dst, src):
  t = realized(REF); p = ptr(t)
  t[dst[0]:dst[1]] = t[src[0]:src[1]] * 2; t.realize()
  ref = REF.copy(); ref[dst[0]:dst[1]] = REF[src[0]:src[1]] * 2
  assert ptr(t) == p and np.array_equal(t.numpy(), ref)

def test_swap_between_two_targets():
  a, b = realized(REF), realized(-REF)
  a[0:2], b[0:2] = b[0:2], a[0:2]
  Tensor.realize(a, b)
  ra, rb = REF.copy(), -REF
  ra[0:2], rb[0:2] = -REF[0:2], REF[0:2]
  assert np.array_equal(a.numpy(), ra) and np.array_equal(b.numpy(), rb)

def test_view_after_write_keeps_its_value():
  t = realized(REF)
  t[0:1] = 9.0
  s = t[0:2]   # a view of the written value, taken before it is realized
  t.realize(); t[1:2] = 8.0; t.realize()
  ref = REF.copy(); ref[0] = 9
  assert np.array_equal(s.numpy(), ref[0:2]) and t.numpy()[1].min() == 8

def test_two_tensors_over_one_buffer():
  a, b = Tensor.zeros(4, 4).contiguous(), Tensor.zeros(4, 4).contiguous()   # one graph node: one buffer, two nodes over it
  Tensor.realize(a, b)
  a[1:2] = 1.0; a.realize()
  assert not b.numpy().any() and a.numpy()[1].min() == 1

def test_copy_on_another_device_is_not_stale():
  t = realized(REF)
  assert np.array_equal(t.to("CPU:1").numpy(), REF)   # (the driver keeps the input's copy on CPU:1)
  t[0:1] = -1.0; t.realize()
  ref = REF.copy(); ref[0] = -1
  assert np.array_equal(t.to("CPU:1").numpy(), ref)

def test_numpy_result_is_the_callers_own():
  t = realized(REF)
  a = t.numpy()
  t[0:1] = 3.0; t.realize()
  assert np.array_equal(a, REF)

SETTINGS = dict(deadline=None, max_examples=25, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@st.composite
def writes(draw):
  """A few steps on one (6, 5) tensor: a slice write of random bounds along dim 0 or 1 (a constant, or another slice
  of the tensor), each realized at once or with the next, some keeping a view of the value before them."""
  steps = []
  for _ in range(draw(st.integers(1, 5))):
    d, n = draw(st.sampled_from([(0, 6), (1, 5)]))
    lo = draw(st.integers(0, n - 1)); hi = draw(st.integers(lo + 1, n))
    src = draw(st.none() | st.integers(0, n - (hi - lo)))
    steps.append((d, lo, hi, src, draw(st.booleans()), draw(st.booleans())))
  return steps

@settings(**SETTINGS)
@given(writes())
def test_random_slice_writes(steps):
  ref = np.arange(30, dtype=np.float32).reshape(6, 5)
  t, held = realized(ref), []
  ref = ref.copy()
  for k, (d, lo, hi, src, keep, now) in enumerate(steps):
    if keep: held.append((t[1:4, 0:3], ref[1:4, 0:3].copy()))
    at = (slice(lo, hi),) if d == 0 else (slice(None), slice(lo, hi))
    if src is None: t[at], ref[at] = float(k), k
    else:
      s = (slice(src, src + hi - lo),) if d == 0 else (slice(None), slice(src, src + hi - lo))
      t[at], ref[at] = t[s] + 1, ref[s] + 1
    if now: t.realize()
  assert np.array_equal(t.numpy(), ref)
  for v, r in held: assert np.array_equal(v.numpy(), r)

def test_kv_cache_under_tinyjit():
  """A cache written at a bound Variable's rows per call: every replay writes the right rows, in place (after the first
  replay), and reads what it wrote; a view held across a replay keeps its values (the replay writes a copy)."""
  cache, sp = realized(np.zeros((1, 2, 16, 4), np.float32)), Variable("sp", 0, 15)
  def step(x: Tensor, pos) -> Tensor:
    cache[:, :, pos:pos + 1] = x
    cache.realize()
    return (cache[:, :, :pos + 1].sum(2) * 1).realize()
  f, ref, rng = TinyJit(step), np.zeros((1, 2, 16, 4), np.float32), np.random.default_rng(0)
  ptrs = []
  for p in range(8):
    x = rng.standard_normal((1, 2, 1, 4)).astype(np.float32); ref[:, :, p:p + 1] = x
    out = f(Tensor(x), sp.bind(p))
    np.testing.assert_allclose(out.numpy(), ref[:, :, :p + 1].sum(2), rtol=1e-5, atol=1e-6)
    assert np.array_equal(cache.numpy(), ref)
    ptrs.append(ptr(cache))
  assert f.plan is not None and f.plan.written and len(set(ptrs[3:])) == 1
  old, snap = cache[:, :, 0:3], ref.copy()
  x = rng.standard_normal((1, 2, 1, 4)).astype(np.float32); ref[:, :, 8:9] = x
  f(Tensor(x), sp.bind(8))
  assert np.array_equal(old.numpy(), snap[:, :, 0:3]) and np.array_equal(cache.numpy(), ref)
