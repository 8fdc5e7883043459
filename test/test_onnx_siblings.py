"""Sibling convolutions (onnx/siblings.py): Convs on one input with equal attributes and constant weights run as one Conv
over the concatenated weights, split after; results bit-identical to the Convs run one by one, one kernel for the group."""
import numpy as np
from onnx import TensorProto, helper, numpy_helper
from morok_mlir.onnx import OnnxModel, siblings
import morok_mlir.jit as J

r = np.random.default_rng(7)
vi = lambda n, s=None: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)

def model(nodes, inits, inputs, outputs):
  inits = [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in inits.items()]
  return helper.make_model(helper.make_graph(nodes, "g", [vi(n, list(s)) for n, s in inputs.items()], [vi(o) for o in outputs], inits),
                           opset_imports=[helper.make_opsetid("", 17)])

def run(proto, feeds, monkeypatch, merge: bool):
  """(outputs of the 4th call, kernels of its replay that read the first input: x, the convolutions' image)."""
  with monkeypatch.context() as mp:
    if not merge: mp.setattr(siblings, "groups", lambda g: {})
    m = OnnxModel(proto)
    for _ in range(4): out = m(feeds)
  plan = next(iter(m._jits.values())).plan
  return out, sum(isinstance(s, J._Kernel) and 0 in s.slots for s in plan.steps)

def conv1x1(x, w, b=None):
  y = np.einsum("oc,nchw->nohw", w[:, :, 0, 0].astype(np.float64), x.astype(np.float64))
  return y + b[None, :, None, None] if b is not None else y

def conv3x3(x, w):
  xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
  return np.einsum("ocij,nchwij->nohw", w.astype(np.float64), np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3)))

def fire():
  """x -> three 1x1 Convs (8 channels with a bias, 12 without, 4 with) each with a Relu and read by a 3x3 Conv (as an
  inception block's reduce branches), and a 3x3 on x (other attributes)."""
  w = {"wa": r.standard_normal((8, 16, 1, 1)), "ba": r.standard_normal(8), "wb": r.standard_normal((12, 16, 1, 1)),
       "wc": r.standard_normal((4, 16, 1, 1)), "bc": r.standard_normal(4), "wd": r.standard_normal((6, 16, 3, 3)) * 0.3,
       **{f"w3{k}": r.standard_normal((5, c, 3, 3)) * 0.3 for k, c in (("a", 8), ("b", 12), ("c", 4))}}
  nodes = [helper.make_node("Conv", ["x", "wa", "ba"], ["ya"]), helper.make_node("Relu", ["ya"], ["a"]),
           helper.make_node("Conv", ["x", "wd"], ["d"], pads=[1, 1, 1, 1]),
           helper.make_node("Conv", ["x", "wb"], ["yb"]), helper.make_node("Relu", ["yb"], ["b"]),
           helper.make_node("Conv", ["x", "wc", "bc"], ["yc"]), helper.make_node("Relu", ["yc"], ["c"])]
  nodes += [helper.make_node("Conv", [k, f"w3{k}"], [f"o{k}"], pads=[1, 1, 1, 1]) for k in "abc"]
  return nodes, w

def test_siblings_run_as_one_conv(monkeypatch):
  nodes, w = fire()
  proto = model(nodes, w, {"x": (1, 16, 10, 10)}, ["oa", "ob", "oc", "d"])
  assert siblings.groups(proto.graph) == {0: [0, 3, 5]}   # the 3x3 (pads) is not theirs
  x = r.standard_normal((1, 16, 10, 10)).astype(np.float32)
  (got, n_merged), (plain, n_plain) = run(proto, {"x": x}, monkeypatch, True), run(proto, {"x": x}, monkeypatch, False)
  for k in ("oa", "ob", "oc", "d"): np.testing.assert_array_equal(got[k], plain[k])   # each channel's sum the same, in the same order
  for k, b in (("a", w["ba"]), ("b", None), ("c", w["bc"])):
    np.testing.assert_allclose(got["o" + k], conv3x3(np.maximum(conv1x1(x, w["w" + k], b), 0), w["w3" + k]), rtol=1e-4, atol=1e-4)
  assert (n_merged, n_plain) == (2, 4)   # the 3x3 and the three 1x1s' one

def test_conv_into_a_concat_left_alone():
  """A conv whose output (through its activation) is a Concat's part is stored straight into the concatenation: not merged."""
  nodes, w = fire()
  nodes += [helper.make_node("Concat", ["a", "d"], ["cat"], axis=1)]
  proto = model(nodes, w, {"x": (1, 16, 10, 10)}, ["cat", "ob", "oc", "oa"])
  assert siblings.groups(proto.graph) == {3: [3, 5]}

def test_grouped_and_input_weights_not_merged(monkeypatch):
  """group > 1 interleaves channels per group: never grouped; weights that are graph inputs (not constants) are grouped
  but not merged (their concatenation would be a kernel per call): the same kernels, the same values."""
  w = {"wa": r.standard_normal((4, 4, 1, 1)), "wb": r.standard_normal((6, 4, 1, 1))}
  grouped = [helper.make_node("Conv", ["x", "wa"], ["a"], group=2), helper.make_node("Conv", ["x", "wb"], ["b"], group=2)]
  assert siblings.groups(model(grouped, {"wa": w["wa"][:, :2], "wb": w["wb"][:, :2]}, {"x": (1, 4, 5, 5)}, ["a", "b"]).graph) == {}
  nodes = [helper.make_node("Conv", ["x", "wa"], ["a"]), helper.make_node("Conv", ["x", "wb"], ["b"])]
  proto = model(nodes, {}, {"x": (1, 4, 5, 5), "wa": (4, 4, 1, 1), "wb": (6, 4, 1, 1)}, ["a", "b"])
  feeds = {"x": r.standard_normal((1, 4, 5, 5)).astype(np.float32), **{k: v.astype(np.float32) for k, v in w.items()}}
  (got, n1), (plain, n2) = run(proto, feeds, monkeypatch, True), run(proto, feeds, monkeypatch, False)
  assert n1 == n2
  for k in "ab": np.testing.assert_allclose(got[k], conv1x1(feeds["x"], w["w" + k]), rtol=1e-4, atol=1e-4)

def test_attributes_at_their_defaults_group():
  """Defaults written out (strides 1, pads 0, dilations 1, group 1, kernel_shape) or left out mean the same conv; other
  strides do not."""
  conv = lambda w, y, **a: helper.make_node("Conv", ["x", w], [y], **a)
  nodes = [conv("wa", "a", strides=[1, 1], pads=[0, 0, 0, 0], dilations=[1, 1], group=1, kernel_shape=[1, 1], auto_pad="NOTSET"),
           conv("wb", "b"), conv("wc", "c", strides=[2, 2]), conv("wd", "d", strides=[2, 2], pads=[0, 0, 0, 0])]
  w = {k: r.standard_normal((4, 4, 1, 1)) for k in ("wa", "wb", "wc", "wd")}
  assert siblings.groups(model(nodes, w, {"x": (1, 4, 6, 6)}, ["a", "b", "c", "d"]).graph) == {0: [0, 1], 2: [2, 3]}

def test_mergeable():
  """Equal trailing dims and dtypes, biases of each one's channels, and no member with more output channels than taps."""
  from morok_mlir import Tensor
  w = lambda *s: Tensor(np.zeros(s, np.float32))
  assert siblings.mergeable([w(8, 16, 1, 1), w(16, 16, 1, 1)], [Tensor(np.zeros(8, np.float32)), None])
  assert siblings.mergeable([w(8, 4, 3, 3), w(36, 4, 3, 3)], [None, None])          # 36 channels, 4 x 3 x 3 taps
  assert not siblings.mergeable([w(8, 4, 3, 3), w(37, 4, 3, 3)], [None, None])
  assert not siblings.mergeable([w(8, 16, 1, 1), w(8, 16, 3, 3)], [None, None])
  assert not siblings.mergeable([w(8, 16, 1, 1), w(8, 16, 1, 1)], [Tensor(np.zeros(4, np.float32)), None])
  assert not siblings.mergeable([w(8, 16, 1, 1), None], [None, None])

def test_a_kernel_shape_that_does_not_fit_its_weight_raises_alone():
  """A member whose kernel_shape is not its weight's (an invalid model) is not merged away: its node raises."""
  import pytest
  from morok_mlir.onnx.model import InvalidModel
  nodes = [helper.make_node("Conv", ["x", "wa"], ["a"]), helper.make_node("Conv", ["x", "wb"], ["b"], kernel_shape=[3, 3])]
  w = {"wa": r.standard_normal((4, 4, 1, 1)), "wb": r.standard_normal((4, 4, 1, 1))}
  with pytest.raises((InvalidModel, ValueError)):
    OnnxModel(model(nodes, w, {"x": (1, 4, 6, 6)}, ["a", "b"]))({"x": np.ones((1, 4, 6, 6), np.float32)})
