"""Hostile use of the front end's modes from several threads: Tensor.training and Tensor.no_grad are per thread (as
PyTorch's grad mode), so one thread's train(), no_grad or optimizer step changes nothing in another, and every thread
starts with the defaults."""
import threading
import numpy as np
import pytest
from morok_mlir import Tensor, no_grad
from morok_mlir.nn.optim import SGD

def run(*fns):
  """Run each fn in its own thread; re-raise the first failure here."""
  errors = []
  def wrap(fn):
    try: fn()
    except BaseException as e: errors.append(e)
  ts = [threading.Thread(target=wrap, args=(fn,)) for fn in fns]
  for t in ts: t.start()
  for t in ts: t.join(120)
  assert not any(t.is_alive() for t in ts), "a thread hung"
  if errors: raise errors[0]

def holding(ctx, entered: threading.Event, release: threading.Event):
  """A thread body: enter ctx, say so, wait until released."""
  def body():
    with ctx:
      entered.set()
      assert release.wait(60)
  return body

def test_train_in_one_thread_leaves_inference_in_another():
  entered, release, seen = threading.Event(), threading.Event(), {}
  def infer():
    assert entered.wait(60)
    try:
      x = Tensor.ones(1000)
      seen["training"], seen["identity"] = Tensor.training, x.dropout(0.5) is x
      seen["zeros"] = int((x.dropout(0.5).numpy() == 0).sum())
    finally: release.set()
  run(holding(Tensor.train(), entered, release), infer)
  assert seen == {"training": False, "identity": True, "zeros": 0}
  assert Tensor.training is False and Tensor.no_grad is False

def test_no_grad_in_one_thread_leaves_backward_in_another():
  entered, release, grads = threading.Event(), threading.Event(), []
  def learn():
    assert entered.wait(60)
    try:
      x = Tensor([1.0, 2.0], requires_grad=True)
      (x * x).sum().backward()
      grads.append(x.grad.tolist())
    finally: release.set()
  run(holding(no_grad(), entered, release), learn)
  assert grads == [[2.0, 4.0]] and Tensor.no_grad is False

def test_optimizer_steps_beside_inference():
  """One thread trains (train(), SGD steps: each step builds its update under no_grad) while another runs inference
  with dropout and a backward of its own: neither sees the other's modes."""
  stop, results = threading.Event(), []
  def trainer():
    w = Tensor([1.0, 2.0])
    opt = SGD([w], lr=0.1)
    with Tensor.train():
      while not stop.is_set():
        opt.zero_grad()
        (w * w).sum().backward()
        opt.step()
  def infer():
    try:
      for _ in range(8):
        x = Tensor.ones(1000)
        y = Tensor([3.0], requires_grad=True)
        (y * y).sum().backward()
        results.append((int((x.dropout(0.5).numpy() == 0).sum()), y.grad.item()))
    finally: stop.set()
  run(trainer, infer)
  assert results == [(0, 6.0)] * 8
  assert Tensor.training is False and Tensor.no_grad is False

def test_new_threads_start_with_the_defaults(monkeypatch):
  monkeypatch.setattr(Tensor, "training", True)
  monkeypatch.setattr(Tensor, "no_grad", True)
  seen = []
  run(lambda: seen.append((Tensor.training, Tensor.no_grad)))
  assert seen == [(False, False)] and Tensor.training is True and Tensor.no_grad is True

@pytest.mark.parametrize("deco,name", [(Tensor.train(), "training"), (no_grad(), "no_grad")])
def test_one_decorator_in_two_threads(deco, name):
  """A decorated function entered by two threads at once: each restores its own thread's mode on exit."""
  barrier = threading.Barrier(2, timeout=60)
  @deco
  def f(): barrier.wait(); assert getattr(Tensor, name) is True; barrier.wait()
  modes = []
  def call(): f(); modes.append(getattr(Tensor, name))
  run(call, call)
  assert modes == [False, False] and getattr(Tensor, name) is False

def test_assignment_is_seen_in_this_thread_only():
  entered, release, seen = threading.Event(), threading.Event(), []
  def setter():
    Tensor.training = True
    entered.set()
    assert release.wait(60)
  def reader():
    assert entered.wait(60)
    seen.append(Tensor.training)
    release.set()
  run(setter, reader)
  assert seen == [False] and Tensor.training is False

def test_monkeypatched_modes_come_back(monkeypatch):
  with monkeypatch.context() as m:
    m.setattr(Tensor, "training", True)
    assert Tensor.training is True
  assert Tensor.training is False

def test_a_threads_default_device_is_its_own():
  """Device.default(name) (what the ONNX backend runs a graph under) sets the default device of its thread only;
  Device.DEFAULT = name stays the process's."""
  from morok_mlir.device import Device
  entered, release, seen = threading.Event(), threading.Event(), []
  def reader():
    assert entered.wait(60)
    seen.append(Device.DEFAULT)
    release.set()
  process = Device.DEFAULT
  run(holding(Device.default("ELSEWHERE"), entered, release), reader)
  assert seen == [process] and Device.DEFAULT == process
  with Device.default("ELSEWHERE"): assert Device.DEFAULT == "ELSEWHERE"
  assert Device.DEFAULT == process
