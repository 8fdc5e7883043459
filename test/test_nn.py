"""nn layers, state dicts, safetensors files and optimizers, against numpy references (the update rules in float64)."""
import json, os, threading
import numpy as np
import pytest
import morok_mlir.tensor as tensor_mod
from morok_mlir import Tensor, dtypes
from morok_mlir.nn import Linear, Conv2d, LayerNorm, Embedding, BatchNorm, BatchNorm2d
from morok_mlir.nn.state import get_parameters, get_state_dict, load_state_dict, safe_save, safe_load
from morok_mlir.nn.optim import SGD, Adam, AdamW, LAMB

def rnd(*shape, seed=0): return np.random.default_rng(seed).standard_normal(shape)
def raises_here(exc, fn, match=None):
  with pytest.raises(exc, match=match) as e: fn()
  assert f"{__file__}:{fn.__code__.co_firstlineno}:" in str(e.value), str(e.value)

# ---- layers
def test_linear():
  l = Linear(3, 4)
  assert l.weight.shape == (4, 3) and l.bias.shape == (4,) and np.abs(l.weight.numpy()).max() <= 3 ** -0.5
  x = rnd(2, 3).astype(np.float32)
  np.testing.assert_allclose(l(Tensor(x)).numpy(), x @ l.weight.numpy().T + l.bias.numpy(), rtol=1e-5, atol=1e-6)
  assert Linear(3, 4, bias=False).bias is None
def test_conv2d():
  c = Conv2d(4, 6, 3, stride=2, padding=1, groups=2)
  assert c.weight.shape == (6, 2, 3, 3) and c.bias.shape == (6,) and np.abs(c.weight.numpy()).max() <= (4 * 9) ** -0.5
  x = rnd(1, 4, 5, 5).astype(np.float32)
  out, w, b = c(Tensor(x)).numpy(), c.weight.numpy(), c.bias.numpy()
  xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
  ref = np.zeros((1, 6, 3, 3))
  for o in range(6):
    g = o // 3
    for i in range(3):
      for j in range(3): ref[0, o, i, j] = (xp[0, 2 * g:2 * g + 2, 2 * i:2 * i + 3, 2 * j:2 * j + 3] * w[o]).sum() + b[o]
  np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-5)
def test_layernorm():
  ln = LayerNorm((3, 4))
  ln.weight, ln.bias = Tensor(rnd(3, 4, seed=1)), Tensor(rnd(3, 4, seed=2))
  x = rnd(2, 3, 4)
  xm = x - x.mean((1, 2), keepdims=True)
  ref = xm / np.sqrt((xm ** 2).mean((1, 2), keepdims=True) + 1e-5) * ln.weight.numpy() + ln.bias.numpy()
  np.testing.assert_allclose(ln(Tensor(x)).numpy(), ref, rtol=1e-10)
  raises_here(ValueError, lambda: ln(Tensor(rnd(2, 4, 3))), "cannot normalize")
def test_embedding():
  e = Embedding(10, 3)
  ids = np.array([[1, 9], [0, 1]])
  np.testing.assert_array_equal(e(Tensor(ids)).numpy(), e.weight.numpy()[ids])
  raises_here(TypeError, lambda: e(Tensor([1.0])), "integer")
def test_batchnorm_train_and_eval():
  bn = BatchNorm2d(3)
  x = rnd(4, 3, 2, 2)
  with Tensor.train(): out = bn(Tensor(x)).numpy()
  m, v = x.mean((0, 2, 3)), x.var((0, 2, 3))
  np.testing.assert_allclose(out, (x - m[:, None, None]) / np.sqrt(v[:, None, None] + 1e-5), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(bn.running_mean.numpy(), 0.1 * m, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(bn.running_var.numpy(), 0.9 + 0.1 * x.var((0, 2, 3), ddof=1), rtol=1e-5)
  assert bn.num_batches_tracked.tolist() == [1]
  rm, rv = bn.running_mean.numpy(), bn.running_var.numpy()
  np.testing.assert_allclose(bn(Tensor(x)).numpy(), (x - rm[:, None, None]) / np.sqrt(rv[:, None, None] + 1e-5), rtol=1e-5, atol=1e-5)
  assert BatchNorm is BatchNorm2d

# ---- state
class Net:
  def __init__(self): self.l1, self.layers, self.extra = Linear(2, 3), [LayerNorm(3), {"out": Linear(3, 1, bias=False)}], 7
  def __call__(self, x): return self.layers[1]["out"](self.layers[0](self.l1(x)).relu())
def test_state_dict_names():
  n = Net()
  sd = get_state_dict(n)
  assert list(sd) == ["l1.weight", "l1.bias", "layers.0.weight", "layers.0.bias", "layers.1.out.weight"]
  assert get_parameters(n) == list(sd.values())
  n.alias = n.l1.weight   # a tensor held twice is one parameter
  assert len(get_parameters(n)) == 5
def test_load_state_dict():
  a, b = Net(), Net()
  sd = {k: Tensor(v.numpy().astype(np.float64)) for k, v in get_state_dict(a).items()}   # cast to the model's dtype
  load_state_dict(b, sd)
  for k, v in get_state_dict(b).items(): assert v.dtype == dtypes.float32 and np.array_equal(v.numpy(), get_state_dict(a)[k].numpy()), k
  x = Tensor(rnd(4, 2).astype(np.float32))
  np.testing.assert_array_equal(a(x).numpy(), b(x).numpy())
  raises_here(RuntimeError, lambda: load_state_dict(b, {**sd, "zzz": Tensor([1.0])}), "unexpected keys \\['zzz'\\]")
  raises_here(RuntimeError, lambda: load_state_dict(b, {k: v for k, v in sd.items() if k != "l1.bias"}), "missing keys \\['l1.bias'\\]")
  load_state_dict(b, {"l1.bias": Tensor([1.0, 2.0, 3.0])}, strict=False)
  assert b.l1.bias.tolist() == [1, 2, 3]
  raises_here(ValueError, lambda: load_state_dict(b, {**sd, "l1.bias": Tensor([1.0])}), "shape mismatch")
def test_safetensors_roundtrip(tmp_path):
  ts = {"a": Tensor(rnd(2, 3)), "b": Tensor(np.arange(5, dtype=np.int32)), "c": Tensor(rnd(4).astype(np.float16)),
        "e": Tensor(np.zeros((0, 2), np.float32))}
  safe_save(ts, fn := str(tmp_path / "m.safetensors"), {"note": "x"})
  back = safe_load(fn)
  assert set(back) == set(ts)
  for k in ts: assert back[k].dtype == ts[k].dtype and np.array_equal(back[k].numpy(), ts[k].numpy()), k
  n, m = Net(), Net()
  safe_save(get_state_dict(n), fn)
  load_state_dict(m, safe_load(fn))
  assert all(np.array_equal(v.numpy(), get_state_dict(n)[k].numpy()) for k, v in get_state_dict(m).items())

def test_safetensors_dtypes_and_shapes(tmp_path):
  import ml_dtypes, safetensors.numpy
  arrs = {"bool": np.array([True, False, True]), "u8": np.arange(6, dtype=np.uint8).reshape(2, 3), "i64": np.array(-7, np.int64),
          "f64": rnd(2, 1, 2), "u16": np.array([1, 65535], np.uint16), "empty": np.zeros((3, 0), np.int16)}
  safetensors.numpy.save_file(arrs, fn := str(tmp_path / "d.safetensors"))
  back = safe_load(fn)
  for k, a in arrs.items(): assert back[k].shape == a.shape and np.array_equal(back[k].numpy(), a), k
  bf = np.array([1.5, -2.0], ml_dtypes.bfloat16)   # written by hand: the package's numpy API has no bfloat16
  raw = json.dumps({"w": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]}}).encode()
  (tmp_path / "bf.safetensors").write_bytes(len(raw).to_bytes(8, "little") + raw + bf.tobytes())
  w = safe_load(tmp_path / "bf.safetensors")["w"]
  assert w.dtype == dtypes.bfloat16 and w.tolist() == [1.5, -2.0]

def safetensors_file(path, header, data: bytes = b"", length=None) -> str:
  raw = header if isinstance(header, bytes) else json.dumps(header).encode()
  path.write_bytes((len(raw) if length is None else length).to_bytes(8, "little") + raw + data)
  return str(path)
F32x2 = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}
@pytest.mark.parametrize("header,data,length,match", [
  ({"a": F32x2}, b"\0" * 8, 1 << 40, "header is 1099511627776 bytes"),
  ({"a": F32x2}, b"\0" * 8, (1 << 64) - 1, "header is"),
  (b"{not json", b"", None, "not JSON"),
  (b"\xff\xfe", b"", None, "not JSON"),
  (b"[" * 100000 + b"]" * 100000, b"", None, "not JSON"),
  ([1, 2], b"", None, "JSON object"),
  ({"a": F32x2, "__metadata__": 3}, b"\0" * 8, None, "JSON object"),
  ({"a": {"dtype": "F32", "shape": [2]}}, b"\0" * 8, None, "data_offsets"),
  ({"a": {**F32x2, "dtype": "C64"}}, b"\0" * 8, None, "unsupported dtype"),
  ({"a": {**F32x2, "shape": [-2]}}, b"\0" * 8, None, "shape"),
  ({"a": {**F32x2, "data_offsets": [0, 16]}}, b"\0" * 8, None, "not a span inside the 8 bytes"),
  ({"a": {**F32x2, "data_offsets": [-8, 0]}}, b"\0" * 8, None, "not a span"),
  ({"a": {**F32x2, "data_offsets": [8, 0]}}, b"\0" * 8, None, "not a span"),
  ({"a": {**F32x2, "data_offsets": [0, 8.0]}}, b"\0" * 8, None, "not a span"),
  ({"a": {**F32x2, "shape": [3]}}, b"\0" * 8, None, "needs 12 bytes"),
  ({"a": {**F32x2, "shape": [1 << 40, 1 << 40]}}, b"\0" * 8, None, "needs"),
  ({"a": F32x2, "b": {**F32x2, "data_offsets": [4, 12]}}, b"\0" * 12, None, "overlap"),
  ({"a": {"dtype": "BOOL", "shape": [2], "data_offsets": [0, 2]}}, b"\1\2", None, "bytes other than 0 and 1")])
def test_safe_load_refuses_hostile_headers(tmp_path, header, data, length, match):
  fn = safetensors_file(tmp_path / "h.safetensors", header, data, length)
  raises_here(ValueError, lambda: safe_load(fn), match)
def test_safe_load_short_file_and_empty_entries(tmp_path):
  (tmp_path / "short").write_bytes(b"\1\0")
  raises_here(ValueError, lambda: safe_load(tmp_path / "short"), "too short")
  empty = {"dtype": "F32", "shape": [0], "data_offsets": [4, 4]}   # an empty span inside another is no overlap
  back = safe_load(safetensors_file(tmp_path / "e.safetensors", {"a": F32x2, "e": empty}, np.float32([1, 2]).tobytes()))
  assert back["a"].tolist() == [1, 2] and back["e"].shape == (0,)

def test_safe_load_refuses_what_is_not_a_regular_file(tmp_path):
  raises_here(ValueError, lambda: safe_load(tmp_path), "not a regular file")
  os.mkfifo(fifo := str(tmp_path / "fifo"))
  errors = []
  def load():
    try: safe_load(fifo)
    except ValueError as e: errors.append(e)
  t = threading.Thread(target=load)
  t.start()
  t.join(60)
  if t.is_alive():   # blocked in open(): a writer lets it go on (and fail), so the test run does not hang
    with open(fifo, "wb"): pass
    t.join(60)
    pytest.fail("safe_load blocked on a FIFO")
  assert len(errors) == 1 and "not a regular file" in str(errors[0])

# ---- optimizers against numpy float64 references; loss = sum(C * p) + 0.5 * sum(p ** 2), so g = C + p
P0, C = rnd(3, 4, seed=5), rnd(3, 4, seed=6)
def run(make, steps=4):
  p = Tensor(P0, requires_grad=True)
  opt = make([p])
  with Tensor.train():
    for _ in range(steps):
      opt.zero_grad()
      ((Tensor(C) * p).sum() + 0.5 * (p * p).sum()).backward()
      opt.step()
  return p.numpy()
def sgd_ref(lr, momentum=0.0, wd=0.0, nesterov=False, steps=4):
  p, b = P0.copy(), np.zeros_like(P0)
  for _ in range(steps):
    g = C + p + wd * p
    if momentum:
      b = momentum * b + g
      g = g + momentum * b if nesterov else b
    p = p - lr * g
  return p
def adam_ref(lr, b1=0.9, b2=0.999, eps=1e-8, wd=0.0, steps=4):
  p, m, v = P0.copy(), np.zeros_like(P0), np.zeros_like(P0)
  for t in range(1, steps + 1):
    g = C + p
    p = p - lr * wd * p   # decoupled (AdamW)
    m, v = b1 * m + (1 - b1) * g, b2 * v + (1 - b2) * g * g
    p = p - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
  return p
@pytest.mark.parametrize("kw", [{}, {"momentum": 0.9}, {"momentum": 0.9, "nesterov": True}, {"momentum": 0.5, "weight_decay": 0.1},
                                {"weight_decay": 0.3}])
def test_sgd(kw):
  ref = sgd_ref(0.1, kw.get("momentum", 0.0), kw.get("weight_decay", 0.0), kw.get("nesterov", False))
  np.testing.assert_allclose(run(lambda ps: SGD(ps, lr=0.1, **kw)), ref, rtol=1e-6, atol=1e-6)
def test_adam(): np.testing.assert_allclose(run(lambda ps: Adam(ps, lr=0.05)), adam_ref(0.05), rtol=1e-5, atol=1e-5)
def test_adamw(): np.testing.assert_allclose(run(lambda ps: AdamW(ps, lr=0.05, weight_decay=0.2)), adam_ref(0.05, wd=0.2), rtol=1e-5, atol=1e-5)
def test_lamb():
  p, m, v = P0.copy(), np.zeros_like(P0), np.zeros_like(P0)
  for t in range(1, 4):
    g = C + p
    m, v = 0.9 * m + 0.1 * g, 0.999 * v + 0.001 * g * g
    up = (m / (1 - 0.9 ** t)) / (np.sqrt(v / (1 - 0.999 ** t)) + 1e-6) + 0.01 * p
    p = p - 0.02 * np.linalg.norm(p) / np.linalg.norm(up) * up
  np.testing.assert_allclose(run(lambda ps: LAMB(ps, lr=0.02, weight_decay=0.01), steps=3), p, rtol=1e-5, atol=1e-6)

@pytest.mark.parametrize("make", [lambda ps: SGD(ps, lr=0.1, momentum=0.9), lambda ps: Adam(ps, lr=0.1), lambda ps: LAMB(ps, lr=0.1)])
def test_scalar_parameters_stay_scalars(make):
  """A 0-d parameter's update is 0-d (the learning rate and Adam's bias corrections are (1,) tensors: they must not
  broadcast it to (1,))."""
  w = Tensor(2.0)
  opt = make([w])
  with Tensor.train():
    for _ in range(2): opt.zero_grad(); (w * w).backward(); opt.step()
  assert w.shape == () and 0 < w.item() < 2.0

def test_step_is_one_realize(monkeypatch):
  calls = []
  real = tensor_mod._realize
  monkeypatch.setattr(tensor_mod, "_realize", lambda outs, **kw: calls.append(len(outs)) or real(outs, **kw))
  n = Net()
  for opt in (SGD(get_parameters(n), lr=0.1, momentum=0.9), Adam(get_parameters(n))):
    with Tensor.train():
      n(Tensor(rnd(4, 2).astype(np.float32))).sum().backward()
      calls.clear()
      opt.step()
    assert len(calls) == 1 and calls[0] >= 5   # every parameter (and the optimizer's state) in one call
    assert all(p.uop.op == "buffer" or p.uop.src[0].op == "buffer" for p in get_parameters(n))
    opt.zero_grad()
    assert all(p.grad is None for p in get_parameters(n))

def test_optimizer_flags_and_errors():
  w, frozen, buf = Tensor([1.0, 2.0]), Tensor([3.0], requires_grad=False), Tensor([1], dtype=dtypes.int32)
  opt = SGD([w, frozen, buf], lr=1.0)
  assert w.requires_grad is True and opt.params == [w] and opt.buffers == [frozen, buf]
  (w * w).sum().backward()
  raises_here(RuntimeError, lambda: opt.step(), "training")
  with Tensor.train(): opt.step()
  assert w.tolist() == [-1, -2] and frozen.tolist() == [3]
  raises_here(ValueError, lambda: SGD([frozen], lr=1.0), "at least one")
def test_lr_change_reuses_the_step():
  from morok_mlir.realize import GlobalCounters
  p = Tensor([1.0, 2.0], requires_grad=True)
  opt = SGD([p], lr=0.5)
  with Tensor.train():
    for lr in (0.1, 0.2):
      opt.lr.assign(Tensor([lr]))
      opt.zero_grad(); (p * p).sum().backward()
      GlobalCounters.reset(); opt.step()
  assert GlobalCounters.compiled == 0   # the second step ran the first one's schedule
  np.testing.assert_allclose(p.numpy(), np.array([1.0, 2.0]) * (1 - 2 * 0.1) * (1 - 2 * 0.2), rtol=1e-6)
def test_params_without_grad_stay():
  a, b = Tensor([1.0], requires_grad=True), Tensor([5.0], requires_grad=True)
  opt = Adam([a, b], lr=0.1)
  with Tensor.train():
    (a * 2).sum().backward()
    opt.step()
  assert b.tolist() == [5] and a.item() < 1

def test_jitted_training_step():
  """A training step (forward, batchnorm's running statistics, backward, Adam) under TinyJit replays without compiling
  and matches the plain step."""
  from morok_mlir.jit import TinyJit
  from morok_mlir.realize import GlobalCounters
  rng = np.random.default_rng(0)
  data = [(rng.standard_normal((8, 4)).astype(np.float32), rng.integers(0, 3, 8).astype(np.int32)) for _ in range(5)]
  def run(jit):
    Tensor.manual_seed(1)
    l1, bn, l2 = Linear(4, 8), BatchNorm(8), Linear(8, 3)
    opt = Adam(get_parameters([l1, bn, l2]), lr=0.05)
    def step(x, y):
      opt.zero_grad()
      loss = l2(bn(l1(x)).relu()).cross_entropy(y).backward()
      opt.step()
      return loss.realize()
    f, losses = TinyJit(step) if jit else step, []
    with Tensor.train():
      for i, (x, y) in enumerate(data):
        GlobalCounters.reset()
        losses.append(f(Tensor(x), Tensor(y)).item())
        if jit and i >= 2: assert f.plan is not None and GlobalCounters.compiled == 0
    return losses, [p.numpy() for p in get_parameters([l1, bn, l2])]
  (la, pa), (lb, pb) = run(False), run(True)
  assert la == lb and all(np.array_equal(a, b) for a, b in zip(pa, pb))
