"""Symbolic sizes on the GPU without a GPU: uop-lower-gpu sizes the launch for each Variable's largest value and every
thread (every block, in GROUP kernels) guards its position against the value read at run time from the int64 buffer of
the values; reduce loops run to it. Checked as the other GPU code is: the kernels run by the CPU emulator against numpy
at 1, a middle value and the largest (the elements past the value's must stay unwritten), the PTX assembled by ptxas for
sm_80 and sm_90, and the runtime, TinyJit replays included, on the fake driver of test_cuda.py."""
import functools, re
import numpy as np
import pytest
from morok_mlir import Tensor, Variable
from morok_mlir.codegen.emitter import Emitter
from morok_mlir.codegen.lower_gpu import lower_kernel
from morok_mlir.device.gpu_emulator import emulate
from morok_mlir.device.ptx import kernel_names, ptxas
from morok_mlir.jit import TinyJit
from morok_mlir.realize import GlobalCounters
from morok_mlir.core.dtype import dtypes
from test_gpu_lowering import kernels, ptx_for
from test_cuda import fake_cuda  # noqa: F401 (the fixture)

MAX = 64
def rnd(*s, seed=0): return np.random.default_rng(seed).standard_normal(s).astype(np.float32)
A, B, S = rnd(MAX, 100), rnd(100, 36, seed=1), rnd(MAX, MAX, seed=2)

def sm(x): return (e := np.exp(x - x.max(-1, keepdims=True))) / e.sum(-1, keepdims=True)
CASES = {  # name: (tensor at n, numpy at n); n is a Variable in [1, MAX]
  "rows_upcast": (lambda n: (Tensor(A)[:n] * 2).exp(), lambda k: np.exp(A[:k] * 2)),          # 4 lanes per thread, guarded
  "cols": (lambda n: Tensor(A)[:, :n] + 1, lambda k: A[:, :k] + 1),                           # an inner symbolic digit
  "rowsum": (lambda n: Tensor(A)[:n].sum(1), lambda k: A[:k].sum(1)),                          # GROUP blocks guarded
  "sum_to_n": (lambda n: Tensor(S)[:, :n].sum(1), lambda k: S[:, :k].sum(1)),                  # GROUP loop to n
  "colmax": (lambda n: Tensor(A)[:n].max(0), lambda k: A[:k].max(0)),
  "full_sum": (lambda n: Tensor(A)[:n].sum(), lambda k: A[:k].sum()),
  "matmul_rows": (lambda n: Tensor(A)[:n] @ Tensor(B), lambda k: A[:k] @ B),
  "matmul_depth": (lambda n: Tensor(S)[:, :n] @ Tensor(A)[:n, :36], lambda k: S[:, :k] @ A[:k, :36]),   # k loop to n, 4 lanes
  "matmul_cols": (lambda n: Tensor(S) @ Tensor(A)[:, :n], lambda k: S @ A[:, :k]),
  "attention": (lambda n: (Tensor(S)[:n, :n] * 0.5).softmax(-1) @ Tensor(A)[:n], lambda k: sm(S[:k, :k] * 0.5) @ A[:k]),
}

@pytest.mark.parametrize("k", [1, 37, MAX])
@pytest.mark.parametrize("name", list(CASES))
def test_emulated_symbolic(name, k):
  build, ref = CASES[name]
  got = emulate([build(Variable("n", 1, MAX).bind(k)).lazydata])[0]
  np.testing.assert_allclose(got, ref(k), rtol=1e-5, atol=1e-5)
  # the output buffer is laid out for n = MAX: what is past the value's elements kept the emulator's fill (NaN bytes)
  tail = got.base[got.size:] if got.base is not None else got[:0]
  assert np.isnan(tail).all(), f"{(~np.isnan(tail)).sum()} elements stored past the value's {got.size}"

@pytest.mark.parametrize("name", ["cols", "rowsum", "sum_to_n", "matmul_depth", "matmul_cols"])
def test_emulated_value_zero(name):
  """A Variable at 0: no thread passes its guard (an inner digit would divide by 0), reduces give their identity."""
  build, ref = CASES[name]
  got = emulate([build(Variable("n0", 0, MAX).bind(0)).lazydata])[0]
  np.testing.assert_array_equal(got, ref(0))

def test_one_lowering_for_every_value():
  """The launch is sized for n's largest value and the kernel reads n: every value lowers to the same text."""
  texts = {tuple(lower_kernel(f)[0] for f in kernels(CASES["cols"][0](Variable("n", 1, MAX).bind(k)))) for k in (1, 37, MAX)}
  assert len(texts) == 1
  (k,) = kernels(CASES["rows_upcast"][0](Variable("n", 1, MAX).bind(5)))
  _, l = lower_kernel(k)
  assert l.upcast == 4 and l.global_size[0] * l.local_size[0] * 4 >= MAX * 100

@pytest.mark.parametrize("chip", ["sm_80", "sm_90"])
def test_symbolic_ptx(chip):
  """Every symbolic kernel assembles with ptxas (no spills, checked by ptx_for), reading the bound from the values'
  buffer (an 8-byte global load) and branching on it; ptxas -v's registers stay within 64 (1024 threads
  resident per SM), shared memory is used by the GROUP kernels' combine only."""
  ks = [f for name in CASES for f in kernels(CASES[name][0](Variable("n", 1, MAX).bind(9)))]
  names = [f"{f.name}_{i}" for i, f in enumerate(ks)]   # the cases' kernels, in one module
  ptx = ptx_for(Emitter.gpu_module([lower_kernel(f, name)[0] for f, name in zip(ks, names)]), chip)
  assert kernel_names(ptx) == names
  info = ptxas(ptx, chip)
  for f, name in zip(ks, names):
    body = ptx.split(f".entry {name}(")[1].split(".entry")[0]
    assert re.search(r"ld\.global(\.nc)?\.b64", body) and "setp." in body, name
    assert info[name]["registers"] <= 64 and (info[name]["smem"] > 0) == ((l := lower_kernel(f)[1]).group and l.local_size[0] > 32), (name, info[name])

def test_symbolic_on_fake_cuda(fake_cuda):
  """Without TinyJit: one compiled schedule serves every value, the values' buffer goes to each kernel like any buffer."""
  dev, fake = fake_cuda
  x, w = Tensor(A).to("CUDA"), Tensor(B).to("CUDA")
  v = Variable("n_fake", 1, MAX)
  compiled = []
  for k in (1, 37, MAX, 5):
    y = (x[:v.bind(k)] @ w).relu().realize()
    assert read_values(fake) == [k]
    np.testing.assert_allclose(y.numpy(), np.maximum(A[:k] @ B, 0), rtol=1e-5, atol=1e-5)
    compiled.append(GlobalCounters.compiled)
  assert compiled[1:] == compiled[:1] * 3

def read_values(fake, i: int = -1) -> list[int]:
  """The values in launch i's int64 buffer of one value."""
  args = fake.launch_specs[i].args
  return [int(fake.mem[a].view(np.int64)[0]) for a, arg in zip(fake.launches[i][3], args) if arg == (1, dtypes.int64)]

def test_tinyjit_symbolic_replays_fake_cuda(fake_cuda):
  """A jitted function over a symbolic length on CUDA: captured once, each replay writes the call's value into the
  values' buffer its kernels read (nothing compiled again), the results right at each value."""
  _, fake = fake_cuda
  x = Tensor(S).to("CUDA").realize()
  v = Variable("n_jit", 1, MAX)
  @TinyJit
  def f(a, n): return ((a[:n, :n] * 0.5).softmax(-1) * 2).sum(0) + n
  compiled, sent = [], []
  for k in (3, 9, 1, MAX, 37, 9):
    launches, copies = len(fake.launches), fake.copies["HtoD"]
    got = f(x, v.bind(k))
    assert got.shape == (k,) and got.device == "CUDA" and len(fake.launches) > launches
    assert read_values(fake) == [k]
    sent.append(fake.copies["HtoD"] - copies)
    np.testing.assert_allclose(got.numpy(), (sm(S[:k, :k] * 0.5) * 2).sum(0) + k, rtol=1e-5, atol=1e-5)
    compiled.append(GlobalCounters.compiled)
  assert f.plan is not None and compiled[1:] == compiled[1:2] * 5
  assert sent[2:] == [1] * 4   # a replay sends the value to the device, nothing else

def test_decoder_attention_step_fake_cuda(fake_cuda):
  """A decoder's attention step on CUDA under TinyJit (test_symbolic_jit's kv-cache case): the new keys and values
  written into caches of MAX positions at start_pos, attention over the start_pos + T cached positions under a causal
  mask; one capture replays for every position."""
  from test_symbolic_jit import kv_cache_steps
  step, compiled, _ = kv_cache_steps("CUDA", "start_pos_cuda")
  assert step.plan is not None and compiled[1:] == compiled[1:2] * 6

def test_tiny_llama_decode_fake_cuda(fake_cuda, monkeypatch):
  """The LLM decode path on CUDA: test_llm's tiny Llama (GQA, RoPE, KV cache) with CUDA the default device, prefill of
  5 tokens, then 4 decode steps at the symbolic start_pos under TinyJit, against the float64 reference."""
  from morok_mlir.device import Device
  from test_llm import tiny_llama_prefill_and_decode
  _, fake = fake_cuda
  monkeypatch.setattr(Device, "DEFAULT", "CUDA")
  def launched(step, toks, pos):   # each decode step on CUDA, by kernels on the driver
    n = len(fake.launches)
    out = step(toks, pos)
    assert out.device == "CUDA" and len(fake.launches) > n
    return out
  step = tiny_llama_prefill_and_decode(lambda step: functools.partial(launched, step))
  assert step.plan is not None

def test_a_huge_maximum_is_a_grid_stride_launch():
  """Sized for its maximum, a Variable's launch would exceed 2^31 - 1 blocks: it is GRID_MAX blocks whose threads loop
  over the rows in use (a grid stride to the value read at run time)."""
  from morok_mlir.codegen.lower_gpu import GRID_MAX
  big = Variable("rows_big", 1, 1 << 33)
  (k,) = kernels(Tensor.full((big.bind(3), 1024), 2.0).contiguous())
  text, l = lower_kernel(k)
  assert l.global_size == (GRID_MAX, 1, 1) and "scf.for" in text
