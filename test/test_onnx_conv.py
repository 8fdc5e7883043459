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
