"""The ONNX front end's convolution layers: Conv, BatchNormalization, Relu, Concat and MaxPool as a network chains them
(a squeezenet fire module, a shufflenet unit's depthwise convolution), against numpy, on first calls and replays."""
import numpy as np
import pytest
onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper, TensorProto
from morok_mlir.onnx import OnnxModel

def _windows(a, k, s, p, fill):
  a = np.pad(a, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=fill)
  o = (a.shape[2] - k) // s + 1, (a.shape[3] - k) // s + 1
  return np.stack([a[:, :, i:i + s * o[0]:s, j:j + s * o[1]:s] for i in range(k) for j in range(k)], -1)

def _conv(x, w, b, s=1, p=0, groups=1):
  n, c, k, win = x.shape[0], w.shape[0], w.shape[-1], _windows(x, w.shape[-1], s, p, 0)
  win = win.reshape(n, groups, x.shape[1] // groups, *win.shape[2:4], k * k)
  wg = w.reshape(groups, c // groups, -1, k * k)
  return np.einsum("ngihwt,goit->ngohw", win, wg).reshape(n, c, *win.shape[3:5]) + b.reshape(1, -1, 1, 1)

def test_batchnorm_relu_depthwise_and_pool_over_a_cat():
  """conv -> batchnorm -> relu, twice, concatenated along the channels, then a padded depthwise convolution and a 3x3
  stride-2 max pool of the cat: the batchnorm as a scale and shift folded from its statistics (its mean close to the
  values, so (x - mean) and x * scale - mean * scale differ most), every call the same to 1e-4."""
  r = np.random.default_rng(7)
  x = r.standard_normal((1, 5, 23, 31), dtype=np.float32)
  inits, nodes, ref = [], [], {}
  def init(name, v): inits.append(numpy_helper.from_array(v.astype(np.float32), name)); return v.astype(np.float32)
  for i, (co, k) in enumerate([(6, 1), (4, 3)]):
    w, b = init(f"w{i}", r.standard_normal((co, 5, k, k)) * 0.3), init(f"b{i}", r.standard_normal(co))
    y = _conv(x, w, b, p=k // 2)
    g, bb, var = init(f"g{i}", r.uniform(0.5, 2, co)), init(f"bb{i}", r.standard_normal(co)), init(f"v{i}", r.uniform(0.1, 3, co))
    mean = init(f"m{i}", y.mean((0, 2, 3)) + 0.01)
    nodes += [helper.make_node("Conv", ["x", f"w{i}", f"b{i}"], [f"c{i}"], pads=[k // 2] * 4),
              helper.make_node("BatchNormalization", [f"c{i}", f"g{i}", f"bb{i}", f"m{i}", f"v{i}"], [f"n{i}"], epsilon=1e-3),
              helper.make_node("Relu", [f"n{i}"], [f"r{i}"])]
    sh = (1, -1, 1, 1)
    ref[i] = np.maximum((y - mean.reshape(sh)) / np.sqrt(var.reshape(sh) + 1e-3) * g.reshape(sh) + bb.reshape(sh), 0)
  cat = np.concatenate([ref[0], ref[1]], 1)
  wd, bd = init("wd", r.standard_normal((10, 1, 3, 3)) * 0.5), init("bd", r.standard_normal(10))
  nodes += [helper.make_node("Concat", ["r0", "r1"], ["cat"], axis=1),
            helper.make_node("Conv", ["cat", "wd", "bd"], ["dw"], group=10, pads=[1, 1, 1, 1], strides=[2, 2]),
            helper.make_node("MaxPool", ["cat"], ["mp"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])]
  vi = lambda n, s=None: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
  g = helper.make_graph(nodes, "g", [vi("x", list(x.shape))], [vi("dw"), vi("mp")], inits)
  m = OnnxModel(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
  want = {"dw": _conv(cat, wd, bd, s=2, p=1, groups=10), "mp": _windows(cat, 3, 2, 1, -np.inf).max(-1)}
  for _ in range(5):   # the first calls, then replays reading the folded scale and shift
    out = m({"x": x})
    for k, v in want.items(): np.testing.assert_allclose(out[k], v, rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize("stats", ["initializers", "inputs"])
def test_shuffle_unit_batchnorm_folds_once(stats):
  """A shufflenet unit: grouped 1x1 conv (4 groups of 20 channels: k = 20) -> batchnorm -> relu -> channel shuffle
  (Reshape, Transpose, Reshape) -> 3x3 stride-2 depthwise conv -> batchnorm, odd sizes, new data every call (first
  calls, then replays), against numpy. Statistics that are initializers make each batchnorm's scale and shift once
  (the model's constants: replays read them as data); the first batchnorm's statistics as graph inputs (new ones every
  call) are the call's data: nothing is made from them once."""
  r = np.random.default_rng(11)
  c, g, h, w = 80, 4, 15, 17
  stats_of = lambda: [r.uniform(0.5, 2, c), r.standard_normal(c), r.standard_normal(c), r.uniform(0.2, 2, c)]   # scale, bias, mean, var
  arrays = {"w1": r.standard_normal((c, c // g, 1, 1)) * 0.2, "c1b": r.standard_normal(c), "wd": r.standard_normal((c, 1, 3, 3)) * 0.5,
            "dwb": r.standard_normal(c), **dict(zip(("s2", "b2", "m2", "v2"), stats_of()))}
  bn1 = ("s1", "b1", "m1", "v1")
  if stats == "initializers": arrays.update(zip(bn1, stats_of()))
  arrays = {k: v.astype(np.float32) for k, v in arrays.items()}
  inits = [numpy_helper.from_array(v, k) for k, v in arrays.items()]
  inits += [numpy_helper.from_array(np.array(v, np.int64), k) for k, v in (("sh5", [1, g, c // g, h, w]), ("sh4", [1, c, h, w]))]
  nodes = [helper.make_node("Conv", ["x", "w1", "c1b"], ["c1"], group=g),
           helper.make_node("BatchNormalization", ["c1", *bn1], ["n1"]), helper.make_node("Relu", ["n1"], ["r1"]),
           helper.make_node("Reshape", ["r1", "sh5"], ["r5"]), helper.make_node("Transpose", ["r5"], ["t5"], perm=[0, 2, 1, 3, 4]),
           helper.make_node("Reshape", ["t5", "sh4"], ["sh"]),
           helper.make_node("Conv", ["sh", "wd", "dwb"], ["dw"], group=c, pads=[1, 1, 1, 1], strides=[2, 2]),
           helper.make_node("BatchNormalization", ["dw", "s2", "b2", "m2", "v2"], ["y"])]
  vi = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
  ins = [vi("x", [1, c, h, w])] + ([vi(n, [c]) for n in bn1] if stats == "inputs" else [])
  m = OnnxModel(helper.make_model(helper.make_graph(nodes, "g", ins, [vi("y", None)], inits), opset_imports=[helper.make_opsetid("", 17)]))
  sh = (1, -1, 1, 1)
  bn = lambda y, s, b, mu, v: (y - mu.reshape(sh)) / np.sqrt(v.reshape(sh) + 1e-5) * s.reshape(sh) + b.reshape(sh)
  for k in range(5):
    feeds = {"x": r.standard_normal((1, c, h, w)).astype(np.float32)}
    if stats == "inputs": feeds.update(zip(bn1, (v.astype(np.float32) for v in stats_of())))
    a = {**arrays, **feeds}
    y1 = np.maximum(bn(_conv(feeds["x"], a["w1"], a["c1b"], groups=g), *(a[n] for n in bn1)), 0)
    shuffled = y1.reshape(1, g, c // g, h, w).transpose(0, 2, 1, 3, 4).reshape(1, c, h, w)
    want = bn(_conv(shuffled, a["wd"], a["dwb"], s=2, p=1, groups=c), a["s2"], a["b2"], a["m2"], a["v2"])
    np.testing.assert_allclose(m(feeds)["y"], want, rtol=1e-4, atol=1e-4, err_msg=f"call {k}")
  # each batchnorm of constant statistics: its scale and its shift, buffers the replays read
  from morok_mlir.dialects.ops import Ops
  assert len(m._consts) == (4 if stats == "initializers" else 2) and all(t.uop.op is Ops.BUFFER for t in m._consts.values())

def test_batchnorm_constants_compile_no_kernel(monkeypatch):
  """A batchnorm's scale and shift from initializers are computed in numpy when the first call meets them (fold.py), not
  by kernels compiled to run once: no kernel of any call takes a square root."""
  from morok_mlir import realize as rz
  from morok_mlir.device.cpu import CPU
  from morok_mlir.dialects.ops import Ops
  r = np.random.default_rng(3)
  c = 24
  arrays = {"w": r.standard_normal((c, 8, 3, 3)) * 0.2, "s": r.uniform(0.5, 2, c), "b": r.standard_normal(c),
            "m": r.standard_normal(c), "v": r.uniform(0.2, 2, c)}
  inits = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in arrays.items()]
  nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], ["y"])]
  vi = lambda n, s: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
  m = OnnxModel(helper.make_model(helper.make_graph(nodes, "g", [vi("x", [1, 8, 9, 11])], [vi("y", None)], inits), opset_imports=[helper.make_opsetid("", 17)]))
  monkeypatch.setattr(rz, "_schedule_cache", {})
  CPU.method_cache.clear()
  seen, many, one = [], CPU.compile_many, CPU.compile
  monkeypatch.setattr(CPU, "compile_many", lambda fs: (seen.extend(fs), many(fs))[1])
  monkeypatch.setattr(CPU, "compile", lambda f: (seen.append(f), one(f))[1])
  x = r.standard_normal((1, 8, 9, 11)).astype(np.float32)
  a = {k: v.astype(np.float64) for k, v in arrays.items()}
  conv = np.zeros((1, c, 9, 11))
  xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
  for i in range(3):
    for j in range(3): conv += np.einsum("oc,nchw->nohw", a["w"][:, :, i, j], xp[:, :, i:i + 9, j:j + 11])
  sh = (1, -1, 1, 1)
  want = (conv - a["m"].reshape(sh)) / np.sqrt(a["v"].reshape(sh) + 1e-5) * a["s"].reshape(sh) + a["b"].reshape(sh)
  for _ in range(3): np.testing.assert_allclose(m({"x": x})["y"], want, rtol=1e-4, atol=1e-4)
  assert seen and not any(u.op is Ops.SQRT for f in seen for root in f.roots for u in root.toposort)
