"""Tensors on several devices in one process (virtual CPU devices CPU:0, CPU:1, ...), against the unsharded result."""
import numpy as np
import pytest
from morok_mlir import Tensor
from morok_mlir.jit import TinyJit
from morok_mlir.device import Device

D2, D3 = ("CPU:0", "CPU:1"), ("CPU:0", "CPU:1", "CPU:2")
rng = np.random.default_rng(0)
A = rng.standard_normal((8, 6)).astype(np.float32)
B = rng.standard_normal((8, 6)).astype(np.float32)
W = rng.standard_normal((6, 4)).astype(np.float32)

def close(t: Tensor, ref): np.testing.assert_allclose(t.numpy(), ref, rtol=1e-5, atol=1e-5)

def test_virtual_devices_own_their_buffers():
  assert Device["CPU:1"].name == "CPU:1" and Device["cpu:0"].name == "CPU" and Device["CPU:2"].allocator is Device["CPU"].allocator
  x = Tensor(A).shard(D3, axis=0).realize()
  assert x.device == ("CPU", "CPU:1", "CPU:2") and x.shape == A.shape
  assert [s.buffer.device for s in x.uop.src] == ["CPU", "CPU:1", "CPU:2"] and [s.shape for s in x.uop.src] == [(3, 6), (3, 6), (2, 6)]

@pytest.mark.parametrize("axis", [None, 0, 1])
def test_elementwise(axis):
  x, y = Tensor(A).shard(D2, axis=axis), Tensor(B).shard(D2, axis=axis)
  out = (x * y + 1).relu() - x.exp() / 4
  assert out.device == ("CPU", "CPU:1")
  close(out, np.maximum(A * B + 1, 0) - np.exp(A) / 4)

def test_elementwise_split_with_replicated_and_broadcast():
  x, y = Tensor(A).shard(D2, axis=0), Tensor(B).shard(D2)
  close(x + y * 2, A + B * 2)
  close(x * Tensor(B[0]).shard(D2), A * B[0])   # a row broadcast over the split rows

@pytest.mark.parametrize("axis", [0, 1])
@pytest.mark.parametrize("red", [0, 1, None])
def test_reductions(axis, red):
  x = Tensor(A).shard(D3, axis=axis)
  close(x.sum(red), A.sum(red))
  close(x.max(red), A.max(red))
  close(x.mean(red, keepdim=True), A.mean(red, keepdims=True))
  close(x.min(red), A.min(red))   # min has no allreduce: gathered first

def test_ring_allreduce(monkeypatch):
  monkeypatch.setenv("RING_BYTES", "0")   # every allreduce around the ring
  for devs in (D2, D3):
    close(Tensor(A).shard(devs, axis=0).sum(0), A.sum(0))
    close(Tensor(A).shard(devs, axis=1).max(1), A.max(1))

@pytest.mark.parametrize("xa,wa", [(0, None), (None, 1), (1, 0)], ids=["data", "column", "row"])
def test_matmul(xa, wa):
  close(Tensor(A).shard(D2, axis=xa) @ Tensor(W).shard(D2, axis=wa), A @ W)

def test_movement_along_the_split_axis():
  x = Tensor(A).shard(D2, axis=0)
  close(x.reshape(48), A.reshape(48))
  close(x.reshape(2, 4, 6).permute(2, 0, 1), A.reshape(2, 4, 6).transpose(2, 0, 1))
  close(x.reshape(6, 8), A.reshape(6, 8))   # no per-shard form: gathered, then run whole on each device
  close(x[1:7], A[1:7])
  close(x.flip(0), A[::-1])
  close(x.pad(((1, 2), (0, 1))), np.pad(A, ((1, 2), (0, 1))))

def test_uneven_split():
  x = Tensor(A[:5]).shard(D2, axis=0)
  assert [s.shape for s in x.uop.src] == [(3, 6), (2, 6)]
  close((x * 2).sum(0), A[:5].sum(0) * 2)
  with pytest.raises(ValueError, match=r"test_multitensor.py:\d+.*a shard would be empty"): Tensor(A[:2]).shard(D3, axis=0)

def test_to_and_back():
  x = Tensor(A).to(D2)
  assert x.device == ("CPU", "CPU:1") and x.uop.attrs["axis"] == -1
  back = (x * 3).to("CPU:1")
  assert back.device == "CPU:1"
  close(back, A * 3)
  close(Tensor(A).shard(D2, axis=1).to(D3), A)

def test_mixed_devices_refused():
  with pytest.raises(RuntimeError, match="test_multitensor.py:.*one device"): Tensor(A).shard(D2) + Tensor(B)

def _loss_and_grad(xa, wa):
  x, w = Tensor(A), Tensor(W)
  if xa != "none": x = x.shard(D2, axis=xa)
  if wa != "none": w = w.shard(D2, axis=wa)
  w.requires_grad = True
  loss = ((x @ w).relu() - 0.5).square().mean()
  loss.backward()
  return loss.numpy(), w.grad.numpy()

@pytest.mark.parametrize("xa,wa", [(0, None), (None, 1), (1, 0)], ids=["data-parallel", "column", "row"])
def test_gradients_equal_unsharded(xa, wa):
  ref, got = _loss_and_grad("none", "none"), _loss_and_grad(xa, wa)
  np.testing.assert_allclose(got[0], ref[0], rtol=1e-5)
  np.testing.assert_allclose(got[1], ref[1], rtol=1e-5, atol=1e-6)

def test_tinyjit_over_sharded_inputs():
  w = Tensor(W).shard(D2).realize()
  @TinyJit
  def f(x): return (x @ w).relu().sum(0).to("CPU").realize()
  for _ in range(4):
    a = rng.standard_normal((8, 6)).astype(np.float32)
    close(f(Tensor(a).shard(D2, axis=0)), np.maximum(a @ W, 0).sum(0))
  assert f.plan is not None   # replayed, not re-run

def test_softmax_along_the_split_axis(monkeypatch):
  """The sum's allreduce reads the max's (exp(x - max)): allreduces inside allreduces are lowered bottom-up."""
  for ring in ("0", str(1 << 20)):
    monkeypatch.setenv("RING_BYTES", ring)
    close(Tensor(A).shard(D2, axis=1).softmax(1), np.exp(A) / np.exp(A).sum(1, keepdims=True))

def test_creation_on_devices():
  assert Tensor.zeros(3, device=D2).device == ("CPU", "CPU:1")
  close(Tensor.zeros(3, device=D2) + 1, np.ones(3))
  close(Tensor.arange(4, device=D2) * 2, np.arange(4) * 2)
  close(Tensor([1.0, 2.0], device=D2), [1.0, 2.0])
  Tensor.manual_seed(1)
  r = Tensor.rand(5, device=D2)
  Tensor.manual_seed(1)
  assert r.device == ("CPU", "CPU:1") and np.array_equal(r.numpy(), Tensor.rand(5).numpy())   # drawn once, the same numbers

@pytest.mark.parametrize("wa", [None, 1], ids=["replicated", "column"])
def test_gradient_reaches_a_leaf_sharded_lazily(wa):
  """w stays on one device; w.shard(...) in the graph: its gradient comes back to w's device (the copies' slices summed)."""
  w = Tensor(W, requires_grad=True)
  loss = (Tensor(A).shard(D2, axis=0 if wa is None else None) @ w.shard(D2, axis=wa)).relu().sum()
  loss.backward()
  assert w.grad.device == "CPU"
  np.testing.assert_allclose(w.grad.numpy(), A.T @ (A @ W > 0).astype(np.float32), rtol=1e-5, atol=1e-5)

def _linear_adam(devs):
  """A seeded Linear(6, 4), its parameters replicated on devs (none: one device), and Adam over them."""
  from morok_mlir.nn import Linear
  from morok_mlir.nn.optim import Adam
  from morok_mlir.nn.state import get_parameters
  Tensor.manual_seed(0)
  m = Linear(6, 4)
  for p in get_parameters(m) if devs else (): p.shard_(devs)
  return m, Adam(get_parameters(m), lr=0.01)

def adam_steps(devs, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
  """3 Adam steps of _linear_adam's Linear on the batch (x, y), split along it over devs (None: one device): the weight
  and bias after them (dist_worker.py's data-parallel case over processes calls it too)."""
  m, opt = _linear_adam(devs)
  with Tensor.train():
    for _ in range(3):
      xb, yb = (Tensor(x), Tensor(y)) if not devs else (Tensor(x).shard(devs, axis=0), Tensor(y).shard(devs, axis=0))
      opt.zero_grad()
      m(xb).cross_entropy(yb).backward()
      opt.step()
  return m.weight.numpy(), m.bias.numpy()

def test_data_parallel_training_in_one_process():
  """Replicated parameters, batches split over the devices, Adam: the weights after 3 steps equal one device's."""
  y = rng.integers(0, 4, 8).astype(np.int32)
  for got, want in zip(adam_steps(D2, A, y), adam_steps(None, A, y)): np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

def test_tinyjit_replays_a_data_parallel_step():
  """Sharded parameters and Adam's moments are the step's state, each shard rebound by a replay: the weights after 5
  jitted steps equal 5 unjitted steps on one device."""
  xs = [rng.standard_normal((8, 6)).astype(np.float32) for _ in range(5)]
  ys = [rng.integers(0, 4, 8).astype(np.int32) for _ in range(5)]
  def train(devs):
    m, opt = _linear_adam(devs)
    def step(x, y):
      opt.zero_grad()
      loss = m(x).cross_entropy(y).backward()
      Tensor.realize(*opt.schedule_step())
      return loss.to("CPU")
    f = TinyJit(step) if devs else step
    with Tensor.train():
      for x, y in zip(xs, ys): f(*((Tensor(x), Tensor(y)) if not devs else (Tensor(x).shard(devs, axis=0), Tensor(y).shard(devs, axis=0))))
    return m.weight.numpy(), f
  (want, _), (got, f) = train(None), train(D2)
  assert f.plan is not None   # replayed
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)

def test_tinyjit_replays_a_function_returning_a_multi_tensor():
  @TinyJit
  def f(x, w): return (x @ w).relu().realize()
  w = Tensor(W).shard(D2).realize()
  for _ in range(4):
    a = rng.standard_normal((8, 6)).astype(np.float32)
    out = f(Tensor(a).shard(D2, axis=0), w)
    assert out.device == ("CPU", "CPU:1") and out.uop.attrs["axis"] == 0
    close(out, np.maximum(a @ W, 0))
  assert f.plan is not None
