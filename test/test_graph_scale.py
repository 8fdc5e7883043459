"""Deep, wide and long graphs: depth costs heap memory, never the C stack, and compile work grows linearly with the graph.

These guard against regressions that only show at scale: a recursive walk that overflows the C stack (a segfault), a
pass that substitutes over the whole graph per kernel, a fusion choice that recomputes a growing prefix in every kernel."""
import os, subprocess, sys
import numpy as np
import pytest
from morok_mlir import Tensor
from morok_mlir.ir.emit import normalize, graph_func
from morok_mlir.ir.pipeline import lower_to_kernels

def _chain(x: Tensor, n: int) -> Tensor:
  for _ in range(n): x = x - x.max(1, keepdim=True) * 0.5 + x.sum(0, keepdim=True) * 0.001
  return x

def _kernels(t: Tensor):
  return [f for f in lower_to_kernels(graph_func(normalize([t.uop])[0])) if f.name != "schedule"]

def test_chain_of_reduces_compiles_linearly():
  """Kernel k used to inline every earlier step of the chain (O(n^2) ops in all), and kernel-split substituted over the
  whole graph once per kernel. Now each step's x is stored once, so the ops per kernel stay bounded and the kernels of
  every step after the first few are the same IR (the method cache compiles each once)."""
  x = Tensor(np.random.default_rng(0).random((8, 8), dtype=np.float32))
  small, big = _kernels(_chain(x, 10)), _kernels(_chain(x, 40))
  ops = lambda ks: sum(len(f.roots[0].toposort) for f in ks)
  assert len(big) <= 4.5 * len(small)
  assert ops(big) <= 4.5 * ops(small), (ops(small), ops(big))
  assert max(len(f.roots[0].toposort) for f in big) <= max(len(f.roots[0].toposort) for f in small)

def test_chain_of_reduces_values():
  rng = np.random.default_rng(1)
  a = rng.random((8, 8), dtype=np.float32)
  x, ref = Tensor(a), a.astype(np.float64)
  for _ in range(30): ref = ref - ref.max(1, keepdims=True) * 0.5 + ref.sum(0, keepdims=True) * 0.001
  np.testing.assert_allclose(_chain(x, 30).numpy(), ref, rtol=1e-5, atol=1e-5)

def test_shared_value_stored_once_not_for_cheap_values():
  """A cheap value two kernels need is recomputed by each (fusion), not stored: softmax stays one kernel."""
  x = Tensor(np.random.default_rng(2).random((4, 16), dtype=np.float32))
  assert len(_kernels(x.softmax(1))) == 1
  assert len(_kernels(x - x.max(1, keepdim=True))) == 1

def test_deep_chain_100k():
  """100,000 chained ops (the C stack overflowed at ~18,000): realized in pieces of MAX_DEPTH levels, which share one
  compiled schedule."""
  x = Tensor(np.arange(4, dtype=np.float32))
  for _ in range(100_000): x = x + 1
  np.testing.assert_array_equal(x.numpy(), np.arange(4, dtype=np.float32) + 100_000)

def test_deep_chain_mixed_with_reduces():
  rng = np.random.default_rng(3)
  a = rng.random((3, 5), dtype=np.float32)
  x, ref = Tensor(a), a.astype(np.float64)
  for i in range(1500):
    if i % 300 == 299: x, ref = x - x.mean(1, keepdim=True), ref - ref.mean(1, keepdims=True)
    else: x, ref = x * 0.999 + 0.01, ref * 0.999 + 0.01
  np.testing.assert_allclose(x.numpy(), ref, rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize("shape", ["chain", "tree"])
def test_wide_graph(shape):
  """2,000 input buffers in one expression: realized in pieces of at most MAX_INPUTS inputs (a 3,000-argument kernel
  took LLVM minutes)."""
  arrs = [np.full(3, i, np.float32) for i in range(2000)]
  ts = [Tensor(a) for a in arrs]
  if shape == "chain":
    acc = ts[0]
    for t in ts[1:]: acc = acc + t
  else:
    while len(ts) > 1: ts = [ts[i] + ts[i + 1] if i + 1 < len(ts) else ts[i] for i in range(0, len(ts), 2)]
    acc = ts[0]
  np.testing.assert_array_equal(acc.numpy(), np.full(3, sum(range(2000)), np.float32))

def test_many_outputs():
  ts = [Tensor(np.full(2, i, np.float32)) * 2 for i in range(300)]
  Tensor.realize(*ts)
  assert [t.numpy()[0] for t in ts] == [2.0 * i for i in range(300)]

@pytest.mark.parametrize("lower,n", [("uop-lower-cpu", 20_000), ("uop-lower-gpu", 5_000)])
def test_morok_opt_deep_file(tmp_path, lower, n):
  """A chain of n ops through the whole pipeline: the passes used to overflow the C stack (SIGSEGV), and the GPU
  lowering toposorted the whole chain below every upcast lane it built (O(n^2))."""
  lines = ["func.func @graph(%arg0: tensor<64xf32>) -> tensor<64xf32> {", '  %c = "uop.const"() {value = 1.5 : f32} : () -> tensor<64xf32>']
  lines += [f'  %v{i} = "uop.{"add" if i % 2 else "mul"}"({f"%v{i - 1}" if i else "%arg0"}, %c) : (tensor<64xf32>, tensor<64xf32>) -> tensor<64xf32>'
            for i in range(n)]
  (tmp_path / "deep.mlir").write_text("\n".join(lines + [f"  return %v{n - 1} : tensor<64xf32>", "}"]) + "\n")
  r = subprocess.run([sys.executable, "-m", "morok_mlir.cli", str(tmp_path / "deep.mlir"), "-p",
                      f"uop-rangeify,uop-simplify,uop-kernel-split,uop-optimize,{lower}"], capture_output=True, text=True, timeout=300)
  assert r.returncode == 0, r.stderr[-2000:]
  assert r.stdout.count("arith.mulf") >= n // 2

def test_a_cut_realizes_what_later_nodes_still_read():
  """Residual blocks x = relu(x @ w_i) + x over more weights than MAX_INPUTS: the graph is cut in pieces, and a cut
  also realizes each value a later node still reads (the block input the shortcut adds), so no product runs twice
  (resnet50 computed most of itself twice: 124 kernels a call, now 66)."""
  from morok_mlir.realize import MAX_INPUTS, GlobalCounters
  r = np.random.default_rng(0)
  n = MAX_INPUTS + 44
  ws = [r.standard_normal((64, 64), dtype=np.float32) * 0.05 for _ in range(n)]
  x0 = r.standard_normal((64, 64), dtype=np.float32)
  x = Tensor(x0)
  for w in ws: x = (x @ Tensor(w)).relu() + x
  GlobalCounters.reset()
  got = x.numpy()
  assert GlobalCounters.kernel_count <= 1.1 * n, GlobalCounters.kernel_count   # a product each, a few sums (1,504 before)
  ref = x0
  for w in ws: ref = np.maximum(ref @ w, 0) + ref
  np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-3)

def test_a_cut_rebuilds_views_over_what_it_realized():
  """Residual blocks x = x.T.reshape(64, 64).T + relu(x @ w_i) over more weights than MAX_INPUTS: the shortcut reads the
  block input through two views, the first read by nothing else once the graph is cut. Each cut rebuilds every node
  since the last over the values it realized, so no product runs twice (946 kernels for 300 blocks, now 376, as without
  the views)."""
  from morok_mlir.realize import MAX_INPUTS, GlobalCounters
  r = np.random.default_rng(1)
  n = MAX_INPUTS + 44
  ws = [r.standard_normal((64, 64), dtype=np.float32) * 0.05 for _ in range(n)]
  x0 = r.standard_normal((64, 64), dtype=np.float32)
  x = Tensor(x0)
  for w in ws: x = x.T.reshape(64, 64).T + (x @ Tensor(w)).relu()
  GlobalCounters.reset()
  got = x.numpy()
  assert GlobalCounters.kernel_count <= 1.5 * n, GlobalCounters.kernel_count
  ref = x0
  for w in ws: ref = ref + np.maximum(ref @ w, 0)
  np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-3)

def _relu_chain(x, n: int, xp=None):
  for i in range(n): x = (np.maximum(x * 1.0001, 0) if xp else (x * 1.0001).relu()) if i % 2 == 0 else x - 0.5
  return x

def test_chain_read_by_two_kernels_is_stored_once():
  """A long elementwise chain that two kernels read (an output and a reduce of it) is stored once at its top: each node
  below used to count as needed by a second kernel (the top's), so a 300-op chain became 739 kernels."""
  x = _relu_chain(Tensor(np.array([[0.3, -0.2, 1.5]], np.float32)), 300)
  for outs in ([x.sum(), x], [x, x.sum()], [x.exp(), x]):
    ks = [f for f in lower_to_kernels(graph_func(normalize([o.uop for o in outs])[0])) if f.name != "schedule"]
    assert len(ks) <= 3, len(ks)

def test_long_elementwise_chain_few_kernels():
  """2,600 alternating (x*1.0001).relu() / x-0.5 on 3 floats: cut in pieces of MAX_DEPTH levels (a cut also realizes the
  value a later node still reads, so a piece has two outputs), a kernel or two each; it compiled 2,036 kernels."""
  from morok_mlir.realize import GlobalCounters
  a = np.array([0.3, -0.2, 1.5], np.float32)
  x = _relu_chain(Tensor(a), 2600)
  GlobalCounters.reset()
  got = x.numpy()
  assert GlobalCounters.kernel_count <= 12, GlobalCounters.kernel_count
  np.testing.assert_allclose(got, _relu_chain(a.astype(np.float64), 2600, xp=True), rtol=1e-4, atol=1e-4)
