"""A model's constants computed in numpy (morok_mlir/onnx/fold.py): each graph of the ops fold takes gives the values the
compiled kernels give; anything else is left to them (None); an ONNX model's batchnorms then compile no kernel of
their own."""
import warnings
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from morok_mlir import Tensor, Variable, dtypes
from morok_mlir.onnx import OnnxModel, fold
import morok_mlir.realize as R

r = np.random.default_rng(0)
F = lambda *s: Tensor(r.standard_normal(s).astype(np.float32))
I8 = lambda *s: Tensor(r.integers(-128, 128, s).astype(np.int8))

GRAPHS = {   # each: () -> a lazy Tensor of host data
  "batchnorm": lambda: (lambda g, b, m, v: (b - m * ((v.abs() + 1e-5).sqrt().reciprocal() * g)))(F(64), F(64), F(64), F(64)),
  "divide": lambda: F(3, 5) / (F(3, 5).abs() + 0.5),
  "zero point": lambda: I8(16, 8).cast(dtypes.int32) - I8(1, 8).cast(dtypes.int32),
  "int sum": lambda: I8(40, 24).cast(dtypes.int32).sum(0, keepdim=True),
  "int max": lambda: I8(6, 7).cast(dtypes.int32).max(1),
  "movement": lambda: F(2, 3, 4).permute(2, 0, 1).pad(((1, 0), (0, 2), (1, 1))).flip(0)[1:, :, 2:].reshape(4, -1),
  "expand, where": lambda: (F(1, 6) < F(5, 1)).where(F(5, 6), F(1, 6).expand(5, 6)),
  "casts": lambda: F(4, 4).cast(dtypes.float64) * 3 + I8(4, 4).cast(dtypes.float64),
  "division by zero": lambda: F(2, 3) / Tensor(np.array([0, 1, -0.0], np.float32)),
  "negative padding": lambda: F(3, 6).pad(((0, 0), (-2, 1))) * 2,
}

@pytest.mark.parametrize("name", GRAPHS)
def test_values_as_compiled(name):
  t = GRAPHS[name]()
  got = fold.evaluate(t.uop)
  assert got is not None
  want = t.numpy()
  assert got.dtype == want.dtype and got.shape == want.shape
  with warnings.catch_warnings():
    warnings.simplefilter("error")   # (no numpy warning reaches the user)
    got = fold.evaluate(t.uop)
  np.testing.assert_allclose(got, want, rtol=2e-7 if want.dtype == np.float32 else 0, atol=0)

LEFT = {   # each: a graph fold leaves to a kernel
  "float max": lambda: F(4, 4).maximum(F(4, 4)),
  "float to int": lambda: F(4).cast(dtypes.int32),
  "exp": lambda: F(4).exp(),
  "half": lambda: F(4).cast(dtypes.float16) * 2,
  "huge expand": lambda: F(1).expand(1 << 23) + 1,
  "symbolic": lambda: Tensor.ones(8)[:Variable("n", 1, 8).bind(3)] * 2,
}

@pytest.mark.parametrize("name", LEFT)
def test_others_left_to_kernels(name):
  assert fold.evaluate(LEFT[name]().uop) is None

def test_batchnorm_constants_compile_no_kernel(monkeypatch):
  """Conv -> BatchNormalization -> Relu: the batchnorm's scale and shift are the model's constants, folded in numpy at
  the first calls (no schedule compiled computes them: each computes the model's output), the outputs numpy's."""
  c = 24
  x = r.standard_normal((1, 8, 9, 9)).astype(np.float32)
  arrays = {"w": r.standard_normal((c, 8, 3, 3)).astype(np.float32) * 0.2, "s": r.uniform(0.5, 2, c), "b": r.standard_normal(c),
            "m": r.standard_normal(c), "v": r.uniform(0.2, 2, c)}
  inits = [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in arrays.items()]
  nodes = [helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1]), helper.make_node("BatchNormalization", ["y", "s", "b", "m", "v"], ["n"]),
           helper.make_node("Relu", ["n"], ["o"])]
  vi = lambda n, s=None: helper.make_tensor_value_info(n, TensorProto.FLOAT, s)
  m = OnnxModel(helper.make_model(helper.make_graph(nodes, "g", [vi("x", list(x.shape))], [vi("o")], inits),
                                  opset_imports=[helper.make_opsetid("", 17)]))
  compiled = []
  orig = R.compile_schedule
  monkeypatch.setattr(R, "compile_schedule", lambda g, d, beam=0: compiled.append(g) or orig(g, d, beam))
  xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
  conv = np.einsum("ocij,nchwij->nohw", arrays["w"].astype(np.float64),
                   np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3)))
  sc = arrays["s"] / np.sqrt(arrays["v"] + 1e-5)
  want = np.maximum(conv * sc[None, :, None, None] + (arrays["b"] - arrays["m"] * sc)[None, :, None, None], 0)
  for _ in range(4): np.testing.assert_allclose(m({"x": x})["o"], want, rtol=1e-4, atol=1e-4)
  assert compiled and all(r.shape == want.shape for g in compiled for r in g.results)   # (none computes a (24,) constant)
