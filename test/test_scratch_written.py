"""Every float a contraction's micro-kernel reads from scratch (A's and B's packed panels, C between k slices) is
written by the same call, whatever the scratch held: scratch and kept panels are recycled memory, and a denormal read
by an FMA costs an Intel core a microcode assist per instruction (a pad row left unwritten made shufflenet 3.6x slower
and Winograd's 3x3s 3.5x, by what the memory held). Each kernel runs on scratch filled with a denormal first (stride-1 3x3s are Winograd's:
test_winograd checks those)."""
import numpy as np
from hypothesis import assume, given, settings, strategies as st
from morok_mlir import Tensor
from morok_mlir.device.cpu import CPU
from morok_mlir.ir.emit import graph_func, normalize
from morok_mlir.ir.pipeline import lower_to_kernels

JUNK = np.float32(1e-40)

def products(t: Tensor) -> list:
  return [f for f in lower_to_kernels(graph_func(normalize([t.uop])[0])) if "uop.contraction" in f.attrs]

def left_junk(f) -> list[int]:
  """The scratch buffers (Ap, Bp, C: the micro-kernel's operands and result) that still hold the junk after a call."""
  prog = CPU.compile(f)
  rng = np.random.default_rng(0)
  args = [rng.standard_normal(a.dtype.size).astype(np.float32) for a in f.args]
  scratch = {i: np.full(n, JUNK, np.float32) for i, n in enumerate(prog.spec.scratch)}
  prog.call_ptrs(*[a.ctypes.data for a in args], scratch=scratch)
  return [i for i in range(min(3, len(scratch))) if scratch[i].size > 1 and (scratch[i] == JUNK).any()]

@settings(max_examples=12, deadline=None)
@given(st.integers(1, 96), st.integers(1, 96), st.integers(16, 700), st.integers(1, 3))
def test_matmul_scratch_written(m, n, k, batch):
  assume(2 * m * n * k * batch >= 1 << 21)   # (a smaller product stays plain loops)
  r = np.random.default_rng(1)
  a, b = Tensor(r.standard_normal((batch, m, k), dtype=np.float32)), Tensor(r.standard_normal((batch, k, n), dtype=np.float32))
  assert (fs := products((a @ b).relu())), "a product big enough to be a contraction"
  for f in fs:
    assert not left_junk(f), f"{f.name}: {f.attrs['uop.contraction']}"

@settings(max_examples=10, deadline=None)
@given(st.integers(3, 40), st.integers(5, 70), st.integers(12, 40), st.sampled_from([(1, 1, 0), (1, 2, 0), (3, 2, 1), (5, 1, 2), (5, 2, 2)]))
def test_conv_scratch_written(ci, co, hw, kind):
  ks, stride, pad = kind
  assume(2 * co * ci * ks * ks * ((hw + 2 * pad - ks) // stride + 1) ** 2 >= 1 << 21)
  r = np.random.default_rng(2)
  x, w = Tensor(r.standard_normal((1, ci, hw, hw), dtype=np.float32)), Tensor(r.standard_normal((co, ci, ks, ks), dtype=np.float32))
  assert (fs := products(x.conv2d(w, stride=stride, padding=pad).relu())), "a convolution big enough to be a contraction"
  for f in fs:
    assert not left_junk(f), f"{f.name}: {f.attrs['uop.contraction']}"
