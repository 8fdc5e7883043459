"""device.memory.plan: intermediates at offsets of one arena by lifetime. Property: two buffers some kernel holds live at
once never share a byte, every offset is aligned, and the arena is no larger than the buffers' sum; a schedule's
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
  # each step a reduce over a different axis: separate kernels, each intermediate read by the next only
  for i in range(6): x = (x - x.max(axis=i % 2, keepdim=True)).exp() * 0.5 + x.sum(axis=(i + 1) % 2, keepdim=True) * 1e-3
  return x

def chain_np(x):
  for i in range(6): x = np.exp(x - x.max(axis=i % 2, keepdims=True)) * 0.5 + x.sum(axis=(i + 1) % 2, keepdims=True) * 1e-3
  return x

def test_schedule_intermediates_share_an_arena(monkeypatch):
  monkeypatch.setattr(R, "_schedule_cache", {})   # this graph's schedule alone
  a = np.random.default_rng(0).standard_normal((96, 80)).astype(np.float32)
  np.testing.assert_allclose(chain(Tensor(a)).numpy(), chain_np(a), rtol=1e-5, atol=1e-6)
  (sched,) = R._schedule_cache.values()
  assert len(sched.offsets) >= 3   # the steps' reduces are kernels of their own, their rows intermediates
  assert sched.arena < sum(-(-n * dt.itemsize // ALIGN) * ALIGN for n, dt, _ in sched.allocs[sched.n_out:])

def test_arena_under_tinyjit_replays_right():
  rng = np.random.default_rng(1)
  f = TinyJit(lambda x: chain(x).realize())
  for _ in range(4):
    a = rng.standard_normal((96, 80)).astype(np.float32)
    np.testing.assert_allclose(f(Tensor(a)).numpy(), chain_np(a), rtol=1e-5, atol=1e-6)
