"""device.memory.plan: intermediates at offsets of one arena by lifetime. Property: two buffers some kernel holds live at
once never share a byte, every offset is aligned, and the arena is no larger than the buffers' sum; a schedule's stored
intermediates whose lives do not overlap share bytes, with results equal to numpy's, eager and under TinyJit."""
import numpy as np
from hypothesis import given, settings, strategies as st
from morok_mlir import Tensor, TinyJit
from morok_mlir.device.memory import ALIGN, plan
from morok_mlir import realize as R

def lifetimes(uses, n):
  first, last = {}, {}
  for k, bs in enumerate(uses):
    for b in bs: first.setdefault(b, k); last[b] = k
  return [(first.get(b, 0), last.get(b, len(uses))) for b in range(n)]

@settings(max_examples=300, deadline=None)
@given(st.integers(1, 12).flatmap(lambda n: st.tuples(
  st.lists(st.lists(st.integers(0, n - 1), max_size=4), min_size=1, max_size=10), st.lists(st.integers(0, 5000), min_size=n, max_size=n))))
def test_plan_never_overlaps_live_buffers(case):
  uses, nbytes = case
  offs, arena = plan(uses, nbytes)
  size = [-(-n // ALIGN) * ALIGN for n in nbytes]
  assert all(o % ALIGN == 0 for o in offs) and arena <= sum(size)
  assert all(o + s <= arena for o, s in zip(offs, size))
  life = lifetimes(uses, len(nbytes))
  for a in range(len(nbytes)):
    for b in range(a):
      if life[a][0] <= life[b][1] and life[b][0] <= life[a][1] and size[a] and size[b]:   # both live at some kernel
        assert offs[a] + size[a] <= offs[b] or offs[b] + size[b] <= offs[a], (a, b, offs, life)

def test_plan_reuses_dead_buffers():
  # a chain: kernel k reads buffer k - 1 and writes buffer k, so only neighbours live together
  offs, arena = plan([[0], [0, 1], [1, 2], [2, 3], [3]], [4096] * 4)
  assert arena == 2 * 4096 and offs[0] == offs[2] and offs[1] == offs[3]

def chain(x: Tensor) -> Tensor:
  # each step stored (contiguous): a chain of kernels, each intermediate read by the next one only
  for i in range(4): x = ((x * 0.5 + i) if i % 2 else (x - x.max(axis=1, keepdim=True)).exp()).contiguous()
  return x.sum(axis=0) * 1e-3 + x

def chain_np(x):
  for i in range(4): x = (x * 0.5 + i) if i % 2 else np.exp(x - x.max(axis=1, keepdims=True))
  return x.sum(axis=0) * 1e-3 + x

def test_schedule_intermediates_share_an_arena(monkeypatch):
  monkeypatch.setattr(R, "_schedule_cache", {})   # this graph's schedule alone
  a = np.random.default_rng(0).standard_normal((96, 80)).astype(np.float32)
  np.testing.assert_allclose(chain(Tensor(a)).numpy(), chain_np(a), rtol=1e-5, atol=1e-6)
  (sched,) = R._schedule_cache.values()
  nbytes = [n * dt.itemsize for n, dt, _ in sched.allocs[sched.n_out:]]
  first, last = {}, {}
  for k, it in enumerate(sched.items):
    for s in it.slots:
      if (b := s - sched.n_in - sched.n_out) >= 0: first.setdefault(b, k); last[b] = k
  assert any(last[a] < first[b] for a in first for b in first), [it.slots for it in sched.items]   # the first and third step live apart
  size = [-(-n // ALIGN) * ALIGN for n in nbytes]
  live = max(sum(size[b] for b in first if first[b] <= k <= last[b]) for k in range(len(sched.items)))
  assert live <= sched.arena < sum(size), (live, sched.arena, sum(size))

def test_arena_under_tinyjit_replays_right():
  rng = np.random.default_rng(1)
  f = TinyJit(lambda x: chain(x).realize())
  for _ in range(4):
    a = rng.standard_normal((96, 80)).astype(np.float32)
    np.testing.assert_allclose(f(Tensor(a)).numpy(), chain_np(a), rtol=1e-5, atol=1e-6)
