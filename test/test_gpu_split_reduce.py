"""The GPU's two-phase reduce (codegen.gpu_split) without a GPU: a kernel with few outputs and a long reduce runs as two
launches on the fake CUDA driver (kernels run by the CPU emulator of GPU kernels), the first on many blocks, with a
scratch buffer of partials; results against numpy in f64; the PTX of each launch assembled by ptxas; a TinyJit replay
one CUDA graph with a node per launch; kernels that must stay one launch do."""
import re
import numpy as np
import pytest
from morok_mlir import Tensor, TinyJit, Variable
from morok_mlir.ir.emit import normalize, graph_func
from morok_mlir.ir.pipeline import lower_to_kernels
from morok_mlir.codegen.gpu_split import SPLIT_OUTPUTS, plan
from morok_mlir.codegen.lower_gpu import lower_module
from morok_mlir.device.gpu_emulator import emulate
from morok_mlir.device.cuda import CUDAGraph, CUDARenderer
from morok_mlir.device.ptx import kernel_names
from test_cuda import fake_cuda  # noqa: F401 (the fixture)
from test_gpu_lowering import kernels, ptx_for

def data(*shape, seed=0) -> np.ndarray: return np.random.default_rng(seed).uniform(0.5, 1.5, shape).astype(np.float32)

CASES = {  # name: (tensor of the input, numpy of the input in f64, outputs)
  "sum_2^20": (lambda t: t.sum(), lambda a: a.sum(), (1 << 20,), 1),
  "max_2^21": (lambda t: (t - 1).max(), lambda a: (a - 1).max(), (1 << 21,), 1),
  "min_2^21": (lambda t: t.min(), lambda a: a.min(), (1 << 21,), 1),
  "mean_2^22": (lambda t: t.mean(), lambda a: a.mean(), (1 << 22,), 1),
  "rows_sum": (lambda t: t.sum(axis=1), lambda a: a.sum(axis=1), (4, 1 << 18), 4),
  "rows_max": (lambda t: t.max(axis=1), lambda a: a.max(axis=1), (4, 1 << 18), 4),
  "two_axes_mean": (lambda t: t.mean(axis=(1, 2)), lambda a: a.mean(axis=(1, 2)), (4, 8, 1 << 14), 4),   # two reduce ranges
  "odd_sum": (lambda t: t.sum(), lambda a: a.sum(), (65537 * 17,), 1),   # chunks of a multiple of 4, then a tail
  "odd_rows_max": (lambda t: t.max(axis=1), lambda a: a.max(axis=1), (3, 400009), 3),
  "odd_axes_sum": (lambda t: t.sum(axis=(1, 2)), lambda a: a.sum(axis=(1, 2)), (2, 64, 16411), 2),   # chunks: the outer range's digits
  # a bf16 reduce: f32 partials (only the result is rounded to bf16: relative error 2^-8 at most)
  "bf16_rows_sum": (lambda t: t.cast("bfloat16").sum(axis=1, dtype="bfloat16").cast("float32"), lambda a: a.sum(axis=1), (2, 1 << 18), 2),
  "matmul_long_k": (lambda t: t.reshape(16, 1 << 16) @ t.reshape(1 << 16, 16), lambda a: a.reshape(16, 1 << 16) @ a.reshape(1 << 16, 16),
                    (1 << 20,), 256),
  "epilogue": (lambda t: (t * 2).sum(axis=1).sqrt() + 1, lambda a: np.sqrt((a * 2).sum(axis=1)) + 1, (3, 1 << 18), 3),
}

def _launches(fake, since: int) -> list[tuple[str, int]]:
  return [(name.decode(), grid[0] * grid[1] * grid[2]) for name, grid, *_ in fake.launches[since:]]

@pytest.mark.parametrize("name", list(CASES))
def test_split_reduce_matches_numpy(fake_cuda, name):
  """Two launches, the first on outputs * S >= 128 blocks, the second on one block per output; the results equal
  numpy's in f64 (the order of summation differs from numpy's)."""
  dev, fake = fake_cuda
  build, ref, shape, outs = CASES[name]
  a = data(*shape)
  x = Tensor(a).to("CUDA").realize()
  n = len(fake.launches)
  got = build(x).numpy()
  np.testing.assert_allclose(got, ref(a.astype(np.float64)), rtol=1e-2 if "bf16" in name else 2e-6)
  (first, blocks), (second, out_blocks) = _launches(fake, n)
  assert first.endswith("_0") and second.endswith("_1") and blocks >= 128 and blocks % outs == 0 and out_blocks <= outs

@pytest.mark.parametrize("chip", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", ["sum_2^20", "rows_max", "two_axes_mean", "odd_sum"])
def test_split_reduce_ptx(name, chip):
  """Each launch's PTX assembles for the chip without spills (ptx_for runs ptxas)."""
  build, _, shape, _ = CASES[name]
  (f,) = kernels(build(Tensor(data(*shape))))
  spec = CUDARenderer(chip).render(f)
  assert len(spec.launches) == 2 and spec.temps and spec.launches[0].global_size[0] >= 128
  for s in spec.launches: assert kernel_names(ptx_for(s.src, chip)) == [s.name] and f"gpu.func @{s.name}(" in spec.src

@pytest.mark.parametrize("name", ["sum_2^20", "mean_2^22", "rows_max", "two_axes_mean", "odd_rows_max"])
def test_split_reduce_emulated(name):
  """uop-lower-gpu's module (the pass): both phases launched in order over the call's scratch buffer, run on the CPU."""
  build, ref, shape, _ = CASES[name]
  a = data(*shape)
  np.testing.assert_allclose(emulate([build(Tensor(a)).lazydata])[0], ref(a.astype(np.float64)), rtol=2e-6)

def test_split_reduce_broadcast_along_an_output_axis():
  """A reduce broadcast along an output axis: the first phase reduces each row once (its partials per row, not per
  output), the second reads them for every output of the row."""
  a = data(4, 1 << 18)
  t = Tensor(a).sum(axis=1, keepdim=True).expand(4, 8) * Tensor(np.arange(8, dtype=np.float32))
  (f,) = kernels(t)
  spec = CUDARenderer("sm_90").render(f)
  ((n, _),) = spec.temps
  assert len(spec.launches) == 2 and spec.launches[0].global_size[0] == n >= 128 and n % 4 == 0
  np.testing.assert_allclose(emulate([t.lazydata])[0], a.astype(np.float64).sum(1, keepdims=True) * np.arange(8), rtol=2e-6)

def test_pass_launches_both_phases_on_scratch():
  """The pass's host function allocates the partials on the GPU (gpu.alloc), launches both phases on them, frees them;
  the module's PTX holds both kernels."""
  funcs = lower_to_kernels(graph_func(normalize([Tensor(data(1 << 20)).sum().lazydata])[0]))
  (k,) = [f.name for f in funcs if "uop.kernel" in f.attrs]
  text = lower_module(funcs)
  (tmp,) = re.findall(r"(%\w+) = gpu.alloc \(\) : (memref<\d+xf32>)", text)
  assert re.findall(r"gpu.launch_func @kernels::@(\w+) .*args\(.*" + tmp[0] + " : ", text) == [f"{k}_0", f"{k}_1"]
  assert f"gpu.dealloc {tmp[0]} : {tmp[1]}" in text and kernel_names(ptx_for(text, "sm_90")) == [f"{k}_0", f"{k}_1"]

NOT_SPLIT = {  # kernels that stay one launch
  "many_outputs": lambda: Tensor(data(SPLIT_OUTPUTS, 1 << 16)).sum(axis=1),
  "short_reduce": lambda: Tensor(data(4, 1 << 12)).sum(axis=1),
  "symbolic": lambda: Tensor(data(1 << 17))[:Variable("n_split", 1, 1 << 17).bind(1 << 17)].sum(),
}

@pytest.mark.parametrize("name", list(NOT_SPLIT))
def test_kernels_not_split(name):
  for f in kernels(NOT_SPLIT[name]()):
    assert plan(f) is None and CUDARenderer("sm_90").render(f).launches == ()

def test_not_split_runs_one_launch(fake_cuda):
  dev, fake = fake_cuda
  a = data(4, 1 << 12)
  x = Tensor(a).to("CUDA").realize()
  n = len(fake.launches)
  np.testing.assert_allclose(x.sum(axis=1).numpy(), a.astype(np.float64).sum(axis=1), rtol=2e-6)
  assert [name for name, _ in _launches(fake, n)] == ["kernel"]

def test_split_reduce_scratch_back_to_the_pool(fake_cuda):
  """A call's scratch buffer goes back to the caching allocator once its launches are queued, and the next call takes
  it from there: repeated calls allocate nothing more from the driver and hold no more memory."""
  import gc
  dev, fake = fake_cuda
  x = Tensor(data(1 << 20)).to("CUDA").realize()
  outs, seen = [x.sum().realize()], []
  for _ in range(4): outs.append(x.max().realize()); del outs[0]; gc.collect(); seen.append((len(fake.mem), dev.allocator.used))
  assert seen[1:] == seen[:1] * 3, seen

def test_split_reduce_from_threads(fake_cuda):
  """Threads realizing split reduces of their own inputs at once: each call's partials are its own."""
  import threading
  dev, fake = fake_cuda
  xs = [data(1 << 17, seed=t) for t in range(4)]
  ts, errors = [Tensor(a).to("CUDA").realize() for a in xs], []
  def work(t):
    try:
      for _ in range(5): np.testing.assert_allclose(ts[t].sum().numpy(), xs[t].astype(np.float64).sum(), rtol=2e-6)
    except Exception as e: errors.append(e)
  threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
  for th in threads: th.start()
  for th in threads: th.join()
  assert not errors, errors[0]

def test_tinyjit_replays_split_reduce_in_one_graph(fake_cuda):
  """A replay of a split reduce is one CUDA graph with a node per launch (both phases), on scratch the graph holds."""
  _, fake = fake_cuda
  @TinyJit
  def f(x): return (x * 2).sum()
  for i in range(5):
    a = data(1 << 20, seed=i)
    x = Tensor(a).to("CUDA").realize()
    direct, launched, n = fake.direct, fake.graph_launches, len(fake.launches)
    np.testing.assert_allclose(f(x).numpy(), (a.astype(np.float64) * 2).sum(), rtol=2e-6)
    if i < 2: continue
    assert fake.graph_launches == launched + 1 and fake.direct == direct
    (g,) = [s for s in f.plan.run if type(s) is CUDAGraph]
    names = [name for name, _ in _launches(fake, n)]
    assert len(g.nodes) == len(names) == len(g.kernels) + 1 and any(a.endswith("_0") and b.endswith("_1") for a, b in zip(names, names[1:]))

def test_split_reduce_replays_launch_by_launch_without_a_graph(fake_cuda):
  """Where the driver refuses the CUDA graph, a replay launches the split reduce's kernels one by one, each call on
  scratch of its own, and the results stay right."""
  _, fake = fake_cuda
  fake.fail.add("cuGraphInstantiateWithFlags")
  @TinyJit
  def f(x): return (x + 1).max()
  for i in range(4):
    a = data(1 << 20, seed=i)
    x = Tensor(a).to("CUDA").realize()
    n = len(fake.launches)
    if i == 2:
      with pytest.warns(RuntimeWarning, match="launched one by one"): got = f(x).numpy()
    else: got = f(x).numpy()
    np.testing.assert_allclose(got, (a.astype(np.float64) + 1).max(), rtol=1e-7)
    if i >= 2: assert fake.graph_launches == 0 and any(a.endswith("_0") and b.endswith("_1") for (a, _), (b, _) in
                                                       zip(_launches(fake, n), _launches(fake, n)[1:]))
