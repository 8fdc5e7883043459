"""TinyJit with symbolic sizes (tinygrad's test_symbolic_jit semantics): bound Variables in a jitted function's arguments;
one capture replays for every value (the value is a kernel argument: nothing is compiled again, no JitError)."""
import sys
import numpy as np
import pytest
from morok_mlir import Tensor, Variable
from morok_mlir.jit import TinyJit, JitError
from morok_mlir.realize import GlobalCounters
from morok_mlir.device.cpu import CPU

def rnd(*s, seed=0): return np.random.default_rng(seed).standard_normal(s).astype(np.float32)
A = rnd(4, 16)

def run(f, calls):
  """calls: (args, want) pairs; checks every result and that nothing compiles once the jit replays."""
  compiled = []
  for args, want in calls:
    got = f(*args)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)
    compiled.append(GlobalCounters.compiled)
  assert f.plan is not None and compiled[1:] == compiled[1:2] * (len(compiled) - 1)   # captured by the second call

def test_variable_argument_slices_a_static_dim():
  v = Variable("vi_slice", 1, 16)
  @TinyJit
  def f(a, vi): return (a[:, :vi] * 2).sum(1) + vi
  x = Tensor(A)
  run(f, [((x, v.bind(k)), (A[:, :k] * 2).sum(1) + k) for k in (3, 5, 1, 16, 2, 9)])

def test_symbolic_result_has_the_values_shape():
  v = Variable("vi_out", 1, 16)
  @TinyJit
  def g(a, vi): return a.shrink((None, (0, vi))).exp() * 3
  x = Tensor(A)
  for k in (4, 7, 2, 16, 1):
    out = g(x, v.bind(k))
    assert out.shape == (4, k)
    np.testing.assert_allclose(out.numpy(), np.exp(A[:, :k]) * 3, rtol=1e-6)
  assert g.plan is not None

def test_size_expressions_and_arange():
  v = Variable("vi_expr", 1, 12)
  @TinyJit
  def f(a, vi): return (Tensor.arange(vi + 2) * (vi * 3)).float() + a[0, vi:vi + 2].sum()
  x = Tensor(A)
  run(f, [((x, v.bind(k)), np.arange(k + 2) * 3 * k + A[0, k:k + 2].sum()) for k in (1, 4, 12, 7)])

def kv_cache_steps(device: str, name: str) -> tuple[TinyJit, list[int], list[int]]:
  """A decoder's attention step on device under TinyJit: the new keys and values written into caches of MAX positions at
  start_pos (setitem and assign through a view), RoPE-like frequencies sliced at start_pos, attention over the
  start_pos + T cached positions under a causal mask from arange compares; run at 7 positions, each output and both
  caches checked against numpy. (step, compiled counts, kernel counts) after each call."""
  MAX, H, D, T = 16, 2, 8, 2
  var = Variable(name, 0, MAX - T)
  freqs = rnd(MAX, D, seed=1)
  ck, cv = (Tensor.zeros(1, H, MAX, D, device=device).contiguous().realize() for _ in range(2))
  fr = Tensor(freqs).to(device)
  @TinyJit
  def step(q, k, v, sp):
    ck[:, :, sp:sp + T] = k * fr[sp:sp + T]
    cv[:, :, sp:sp + T].assign(v)
    Tensor.realize(ck, cv)
    s = q @ ck[:, :, :sp + T].transpose(-1, -2) / np.sqrt(D)
    mask = Tensor.arange(sp + T, device=device)[None, :] <= Tensor.arange(T, device=device)[:, None] + sp
    return mask.where(s, float("-inf")).softmax(-1) @ cv[:, :, :sp + T]
  nk, nv = np.zeros((1, H, MAX, D), np.float32), np.zeros((1, H, MAX, D), np.float32)
  compiled, kernels = [], []
  for i, sp in enumerate((0, 2, 4, 6, 9, 14, 5)):
    q, k, v = (rnd(1, H, T, D, seed=10 * i + j) for j in range(3))
    nk[:, :, sp:sp + T], nv[:, :, sp:sp + T] = k * freqs[sp:sp + T], v
    s = q @ nk[:, :, :sp + T].transpose(0, 1, 3, 2) / np.sqrt(D)
    s = np.where(np.arange(sp + T)[None, :] <= np.arange(T)[:, None] + sp, s, -np.inf)
    e = np.exp(s - s.max(-1, keepdims=True))
    GlobalCounters.kernel_count = 0
    got = step(*(Tensor(x).to(device) for x in (q, k, v)), var.bind(sp))
    kernels.append(GlobalCounters.kernel_count)
    assert got.device == device
    np.testing.assert_allclose(got.numpy(), (e / e.sum(-1, keepdims=True)) @ nv[:, :, :sp + T], rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(ck.numpy(), nk)
    np.testing.assert_array_equal(cv.numpy(), nv)
    compiled.append(GlobalCounters.compiled)
  return step, compiled, kernels

def test_kv_cache_attention_one_capture():
  step, compiled, kernels = kv_cache_steps("CPU", "start_pos")
  assert step.plan is not None and compiled[1:] == compiled[1:2] * 6 and kernels[2:] == kernels[2:3] * 5

def test_values_outside_the_range_raise_at_the_callers_line():
  v = Variable("vi_range", 1, 16)
  @TinyJit
  def f(a, vi): return a[:, :vi] + 1
  for k in (3, 4, 5): f(Tensor(A), v.bind(k))
  line = sys._getframe().f_lineno + 1
  with pytest.raises(ValueError, match=rf"test_symbolic_jit.py:{line}:\d+: vi_range = 17 is outside \[1, 16\]"): f(Tensor(A), v.bind(17))
  with pytest.raises(ValueError, match="outside"): f(Tensor(A), v.bind(0))
  np.testing.assert_array_equal(f(Tensor(A), v.bind(16)).numpy(), A + 1)   # the jit still replays

def test_a_form_picked_for_another_value_raises():
  # x[:, 1:3] along a dim of symbolic size vi is a slice of two columns for vi >= 3, a shorter one below: a replay at a
  # value the recorded form does not fit raises (it would read past the data), naming the values and the caller's line
  v = Variable("vi_form", 1, 16)
  @TinyJit
  def f(a, vi): return a[:, :vi][:, 1:3] * 2
  for k in (5, 6, 9): np.testing.assert_array_equal(f(Tensor(A), v.bind(k)).numpy(), A[:, 1:3] * 2)
  line = sys._getframe().f_lineno + 1
  with pytest.raises(JitError, match=rf"test_symbolic_jit.py:{line}:\d+: TinyJit: vi_form=2 does not fit the recorded graph"): f(Tensor(A), v.bind(2))
  np.testing.assert_array_equal(f(Tensor(A), v.bind(3)).numpy(), A[:, 1:3] * 2)

def test_other_arguments_still_checked():
  v, w = Variable("vi_chk", 1, 16), Variable("vj_chk", 1, 16)
  @TinyJit
  def f(a, vi): return a[:, :vi] + 1
  for k in (3, 4, 5): f(Tensor(A), v.bind(k))
  with pytest.raises(JitError, match="arguments changed"): f(Tensor(A), w.bind(4))   # another Variable
  with pytest.raises(JitError, match="arguments changed"): f(Tensor(A), 4)
  @TinyJit
  def g(a, vi, vj): return a[:, :vi] + a[:, :vj]
  with pytest.raises(JitError, match="bound to both 3 and 4"): g(Tensor(A), v.bind(3), v.bind(4))

def test_tensors_of_symbolic_shape_as_arguments():
  # tinygrad's form: data reshaped to a bound size (a.reshape(3, vi)), or a lazy slice of a bigger tensor (b[:, :vi])
  v = Variable("vi_arg", 1, 10)
  @TinyJit
  def add(a, b): return (a + b).realize()
  @TinyJit
  def mm(a): return a @ a.T
  @TinyJit
  def red(a, vi): return a.sum(1) * vi
  big = rnd(3, 10, seed=5)
  B, compiled = Tensor(big), []
  for k in (1, 2, 7, 10, 3):
    a = rnd(3, k, seed=k)
    vi = v.bind(k)
    out = add(Tensor(a).reshape(3, vi), Tensor(a * 2).reshape(3, vi))
    assert out.shape == (3, k)
    np.testing.assert_allclose(out.numpy(), a * 3, rtol=1e-6)
    np.testing.assert_allclose(mm(B[:, :vi]).numpy(), big[:, :k] @ big[:, :k].T, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(red(Tensor(a).reshape(3, vi), vi).numpy(), a.sum(1) * k, rtol=1e-5, atol=1e-6)
    compiled.append(GlobalCounters.compiled)
  assert add.plan is not None and mm.plan is not None and red.plan is not None and compiled[1:] == compiled[1:2] * 4

def test_two_variables_in_shapes():
  v, w = Variable("vi_two", 1, 8), Variable("vj_two", 1, 8)
  @TinyJit
  def f(a, b): return (a @ b).realize()
  compiled = []
  for i, j in ((2, 3), (5, 1), (8, 8), (1, 6)):
    a, b = rnd(i, 4, seed=i), rnd(4, j, seed=10 + j)
    out = f(Tensor(a).reshape(v.bind(i), 4), Tensor(b).reshape(4, w.bind(j)))
    np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-5, atol=1e-6)
    compiled.append(GlobalCounters.compiled)
  assert f.plan is not None and compiled[1:] == compiled[1:2] * 3

def test_shape_and_argument_must_agree():
  v = Variable("vi_agree", 1, 8)
  @TinyJit
  def f(a, vi): return a[:, :vi].sum(1)
  with pytest.raises(JitError, match="bound to both 4 and 3 in one call"): f(Tensor(rnd(3, 3)).reshape(3, v.bind(3)), v.bind(4))

def test_slice_past_the_dim_at_a_replays_value_raises():
  # a[:, vi:vi+2] fits a dim of 11 for vi <= 9 only (tinygrad's Variable ranges need not fit): a replay at 10 raises
  v = Variable("vi_past", 1, 12)
  @TinyJit
  def f(a, vi): return a[:, vi:vi + 2] + 1
  a = A[:, :11]
  for k in (3, 9, 1): np.testing.assert_array_equal(f(Tensor(a), v.bind(k)).numpy(), a[:, k:k + 2] + 1)
  line = sys._getframe().f_lineno + 1
  with pytest.raises(JitError, match=rf"test_symbolic_jit.py:{line}:\d+: TinyJit: vi_past=10 does not fit"): f(Tensor(a), v.bind(10))

def _attn(q, k, v):
  s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(8)
  e = np.exp(s - s.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True) @ v
CASES = {   # name: (function, numpy's, argument shapes at size k, the Variable's dim in each)
  "plus1_pad": (lambda a: (a + 1).pad(((0, 0), (1, 1))), lambda a: np.pad(a + 1, ((0, 0), (1, 1))), [(3, None)]),
  "add": (lambda a, b: a + b, lambda a, b: a + b, [(3, None), (3, None)]),
  "matmul": (lambda a, b: a @ b, lambda a, b: a @ b, [(3, None), (None, 5)]),
  "matmul_plus_static": (lambda a, b: a @ b + Tensor.ones(3, 5), lambda a, b: a @ b + 1, [(3, None), (None, 5)]),
  "cat_dim0": (lambda a, b: a.cat(b, dim=0), lambda a, b: np.concatenate([a, b], 0), [(None, 3), (None, 3)]),
  "cat_dim1": (lambda a, b: a.cat(b, dim=1), lambda a, b: np.concatenate([a, b], 1), [(3, None), (3, None)]),
  "mean": (lambda a: a.mean(1), lambda a: a.mean(1), [(3, None)]),
  "var": (lambda a: a.var(), lambda a: a.var(ddof=1), [(3, None)]),
  "softmax": (lambda a: a.softmax(1), lambda a: np.exp(a) / np.exp(a).sum(1, keepdims=True), [(3, None)]),
  "attention": (lambda q, k, v: q.scaled_dot_product_attention(k, v), _attn, [(2, 4, None, 8)] * 3),
}

@pytest.mark.parametrize("name", list(CASES))
def test_jitted_ops_over_a_symbolic_dim(name):
  # tinygrad's test_symbolic_jit forms: arguments reshaped to a bound size, one capture for every value
  fn, ref, shapes = CASES[name]
  v = Variable(f"i_{name}", 1, 10)
  def call(k, seed):
    arrs = [rnd(*(k if d is None else d for d in sh), seed=seed + i) for i, sh in enumerate(shapes)]
    ts = [Tensor(a).reshape(tuple(v.bind(k) if d is None else d for d in sh)) for a, sh in zip(arrs, shapes)]
    return ts, ref(*arrs)
  run(TinyJit(fn), [call(k, 7 * k) for k in (1, 4, 2, 10, 7)])

def test_causal_mask_by_triu_one_capture():
  # tinygrad's llama mask: scores of T new rows against start_pos + T positions, masked by triu(start_pos + 1)
  MAX, T = 12, 3
  var, keys = Variable("start_pos_m", 0, MAX - T), rnd(MAX, 4, seed=3)
  K = Tensor(keys)
  @TinyJit
  def f(q, sp):
    s = q @ K[:sp + T].T + Tensor.full((1, 1, T, sp + T), float("-inf")).triu(sp + 1)
    return s.softmax(-1)
  def want(q, sp):
    s = q @ keys[:sp + T].T + np.triu(np.full((1, 1, T, sp + T), -np.inf, np.float32), sp + 1)
    e = np.exp(s - s.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)
  run(f, [((Tensor(q := rnd(1, 1, T, 4, seed=sp)), var.bind(sp)), want(q, sp)) for sp in (0, 4, 9, 1, 6)])

def test_toy_decoder_kv_cache_one_capture():
  # a decoder layer as an LLM runs it token by token: embedding, RMSNorm, q/k/v, RoPE from cos/sin sliced at
  # start_pos, grouped KV caches written at start_pos and read to start_pos + 1, the triu mask, logits. The jitted step
  # (start_pos a bound Variable) gives what the step with start_pos a Python int gives, and compiles nothing once captured
  MAX, DIM, H, KVH, V, HD = 16, 16, 4, 2, 20, 4
  rng = np.random.default_rng(0)
  W = {n: Tensor(rng.standard_normal(s).astype(np.float32) * 0.3) for n, s in
       dict(emb=(V, DIM), wq=(DIM, DIM), wk=(DIM, KVH * HD), wv=(DIM, KVH * HD), wo=(DIM, DIM), out=(DIM, V), norm=(DIM,)).items()}
  fr = np.outer(np.arange(MAX), 1.0 / 10000 ** (np.arange(0, HD, 2) / HD)).astype(np.float32)
  COS, SIN = Tensor(np.cos(fr)), Tensor(np.sin(fr))
  def rope(x, c, s):
    x = x.reshape(1, 1, x.shape[2], HD // 2, 2)
    a, b, c, s = x[..., 0], x[..., 1], c.reshape(1, 1, 1, HD // 2), s.reshape(1, 1, 1, HD // 2)
    return Tensor.stack(a * c - b * s, a * s + b * c, dim=-1).reshape(1, 1, -1, HD)
  def make():
    ck, cv = Tensor.zeros(1, MAX, KVH, HD).contiguous().realize(), Tensor.zeros(1, MAX, KVH, HD).contiguous().realize()
    def step(tok, sp):
      x = W["emb"][tok].reshape(1, 1, DIM)
      h = x * (x.square().mean(-1, keepdim=True) + 1e-5).rsqrt() * W["norm"]
      q, k, v = (h @ W["wq"]).reshape(1, 1, H, HD), (h @ W["wk"]).reshape(1, 1, KVH, HD), (h @ W["wv"]).reshape(1, 1, KVH, HD)
      q, k = rope(q, COS[sp:sp + 1], SIN[sp:sp + 1]), rope(k, COS[sp:sp + 1], SIN[sp:sp + 1])
      ck[:, sp:sp + 1].assign(k)
      cv[:, sp:sp + 1].assign(v)
      Tensor.realize(ck, cv)
      keys, vals = (c[:, :sp + 1].repeat_interleave(H // KVH, dim=2).transpose(1, 2) for c in (ck, cv))
      mask = Tensor.full((1, 1, 1, sp + 1), float("-inf")).triu(sp + 1)
      a = ((q.transpose(1, 2) @ keys.transpose(-1, -2)) / np.sqrt(HD) + mask).softmax(-1) @ vals
      return ((x + a.transpose(1, 2).reshape(1, 1, DIM) @ W["wo"]) @ W["out"]).realize()
    return step
  ref, jit, var = make(), TinyJit(make()), Variable("start_pos_dec", 0, MAX - 1)
  compiled = []
  for i, t in enumerate(rng.integers(0, V, MAX)):
    c0 = GlobalCounters.compiled
    got = jit(Tensor([int(t)]), var.bind(i))
    compiled.append(GlobalCounters.compiled - c0)   # (the reference compiles per position: counted apart)
    np.testing.assert_allclose(got.numpy(), ref(Tensor([int(t)]), i).numpy(), rtol=1e-4, atol=1e-5)
  assert jit.plan is not None and compiled[0] > 0 and compiled[2:] == [0] * (MAX - 2)

def test_one_variable_given_twice():
  v = Variable("vi_twice", 1, 16)
  @TinyJit
  def f(a, vi, vj): return a[:, :vi] + a[:, :vj]
  for k in (2, 5, 9): np.testing.assert_array_equal(f(Tensor(A), v.bind(k), v.bind(k)).numpy(), A[:, :k] * 2)
  with pytest.raises(JitError, match="bound to both 3 and 4"): f(Tensor(A), v.bind(3), v.bind(4))

def test_host_read_of_a_symbolic_argument_is_never_replayed():
  # a branch on a value read on the host from an argument of symbolic shape: the function runs every call
  v = Variable("vi_host", 1, 16)
  @TinyJit
  def f(a): return a * 2 if a.sum().item() > 0 else a * 3
  for k, sign in ((3, 1), (5, 1), (7, 1), (2, -1), (4, -1)):
    a = np.abs(rnd(2, k, seed=k)) * sign
    np.testing.assert_allclose(f(Tensor(a).reshape(2, v.bind(k))).numpy(), a * (2 if sign > 0 else 3), rtol=1e-6)
  assert f.plan is None

def test_arange_from_a_bound_start():
  # the positions start_pos .. start_pos + T (RoPE's, or a mask's rows) from arange(sp, sp + T): a static size
  v = Variable("vi_pos", 0, 12)
  @TinyJit
  def f(sp): return Tensor.arange(sp, sp + 3) * 2 + Tensor.arange(sp, 14).sum()
  run(f, [((v.bind(k),), np.arange(k, k + 3) * 2 + np.arange(k, 14).sum()) for k in (0, 5, 12, 1, 7)])

def test_reshape_to_a_static_shape_checked_at_each_replay():
  # (a + 1).reshape(3, 4) of a (3, vi) argument holds for vi = 4 only: another value raises, not a read past the data
  v = Variable("vi_rs", 1, 16)
  @TinyJit
  def f(a): return (a + 1).reshape(3, 4) * 2
  a = rnd(3, 4)
  for _ in range(3): np.testing.assert_allclose(f(Tensor(a).reshape(3, v.bind(4))).numpy(), (a + 1) * 2, rtol=1e-6)
  with pytest.raises(JitError, match="vi_rs=5 does not fit the recorded graph"): f(Tensor(rnd(3, 5)).reshape(3, v.bind(5)))

def test_kv_cache_with_tinygrads_assign_realize():
  MAX = 8
  var, ck = Variable("start_pos_ar", 0, MAX - 1), Tensor.zeros(1, MAX, 2).contiguous().realize()
  @TinyJit
  def f(k, sp):
    ck[:, sp:sp + 1].assign(k).realize()
    return ck[:, :sp + 1].sum(1)
  run(f, [((Tensor(np.full((1, 1, 2), i + 1, np.float32)), var.bind(i)), np.full((1, 2), (i + 1) * (i + 2) / 2)) for i in range(MAX)])

def test_replays_write_each_schedules_values_from_threads():
  # a replay writes the values into the plan's own buffer of each schedule (two realizes: two schedules) under the lock
  # its kernels run under: calls from two threads at different values each get their own value's result
  import threading
  v = Variable("vi_threads", 1, 16)
  @TinyJit
  def f(a, vi): return ((a[:, :vi] * 2).sum(1) + vi).realize(), (a[:, :vi] + 1).realize()
  x = Tensor(A)
  def same(k) -> bool:
    s, p = f(x, v.bind(k))
    return p.shape == (4, k) and np.allclose(s.numpy(), (A[:, :k] * 2).sum(1) + k, rtol=1e-5) and np.array_equal(p.numpy(), A[:, :k] + 1)
  assert all([same(k) for k in (3, 5, 1, 16, 2)]) and len(f.plan.execs) == 2
  bad = []
  def worker(ks):
    for k in ks * 20:
      if not same(k): bad.append(k)
  ts = [threading.Thread(target=worker, args=(ks,)) for ks in ((1, 16, 7), (16, 2, 1))]
  for t in ts: t.start()
  for t in ts: t.join()
  assert not bad

def test_replay_at_a_seen_value_is_one_native_call(monkeypatch):
  # kernels with copies for narrower bounds (the copy picked by the value) run, at a value replayed before whose copies
  # make one batch (none reading the value per call: at L=1 no contraction packs panels), as that batch: one native
  # call, no per-step Python (the general steps are _Native.__call__)
  import morok_mlir.jit as J
  v = Variable("L_one_call", 1, 32)
  q, k, w = (Tensor(rnd(1, 2, 32, 8, seed=s)).realize() for s in (1, 2, 3))
  @TinyJit
  def att(n): return ((q[:, :, :n] @ k[:, :, :n].transpose(-1, -2)) / 8).softmax(-1) @ w[:, :, :n]
  def want(n):
    s = q.numpy()[:, :, :n] @ k.numpy()[:, :, :n].transpose(0, 1, 3, 2) / 8
    e = np.exp(s - s.max(-1, keepdims=True))
    return (e / e.sum(-1, keepdims=True)) @ w.numpy()[:, :, :n]
  sizes = (1, 5, 17)
  for n in sizes * 4: np.testing.assert_allclose(att(v.bind(n)).numpy(), want(n), rtol=1e-5, atol=1e-6)
  # kernels compiled here run on their JIT engine until their shared object is linked (in the background: later under
  # load): the plan binds them again on the call after, and only then may they make one batch
  CPU.disk.flush()
  for n in sizes: att(v.bind(n))
  nat = att.plan.native
  one = [n for n in sizes if len(nat.chosen.get((n,), ())) == 1 and type(nat.chosen[(n,)][0]) is J.Batch]
  assert att.plan.replay == att.plan._replay_one and 1 in one
  general = []
  call = J._Native.__call__
  monkeypatch.setattr(J._Native, "__call__", lambda self, *a: general.append(1) or call(self, *a))
  for n in one * 2:
    GlobalCounters.kernel_count = 0
    np.testing.assert_allclose(att(v.bind(n)).numpy(), want(n), rtol=1e-5, atol=1e-6)
    assert GlobalCounters.kernel_count == att.plan.nkernels
  assert not general
  # a value not seen before (a decode loop's next position) whose copies make a batch already made runs as it too
  fresh = []
  for n in (2, 3, 4, 6, 7):
    before = len(general)
    np.testing.assert_allclose(att(v.bind(n)).numpy(), want(n), rtol=1e-5, atol=1e-6)
    if nat.chosen[(n,)] is nat.chosen[(1,)]: fresh.append(len(general) - before)
  assert fresh and not any(fresh)
