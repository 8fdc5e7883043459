"""The ONNX front end: OnnxModel's interface, the backend interface, validation before running, and onnx's node
conformance cases as a regression floor (test/onnx_expected_pass.txt, written by test/onnx_conformance.py)."""
import pathlib, sys, warnings
import numpy as np
import pytest
onnx = pytest.importorskip("onnx")
from onnx import helper, numpy_helper, TensorProto
from morok_mlir.onnx import OnnxModel
from morok_mlir.dialects.ops import Ops
import morok_mlir.onnx.backend as backend

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import onnx_conformance as conf

def _model(nodes, inputs, outputs, inits=(), opset=17):
  g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
  return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
def _vi(name, dt=TensorProto.FLOAT, shape=None): return helper.make_tensor_value_info(name, dt, shape)

def _mlp():
  w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4) / 10, "w")
  b = numpy_helper.from_array(np.array([1, -1, 0.5, 0], np.float32), "b")
  nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"], ["z"]), helper.make_node("Relu", ["z"], ["y"])]
  return _model(nodes, [_vi("x", shape=[2, 3])], [_vi("y")], [w, b])

def _mlp_ref(x):
  return np.maximum(x @ (np.arange(12, dtype=np.float32).reshape(3, 4) / 10) + np.array([1, -1, 0.5, 0], np.float32), 0)

def test_model_from_proto_bytes_and_path(tmp_path):
  x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
  m = _mlp()
  onnx.save(m, p := tmp_path / "m.onnx")
  onnx.save(m, txt := tmp_path / "m.onnxtxt")   # onnx.load's formats, by the file's extension
  for src in (m, m.SerializeToString(), p, str(p), txt):
    om = OnnxModel(src)
    assert om.input_names == ["x"] and om.output_names == ["y"]
    np.testing.assert_allclose(om(x=x)["y"], _mlp_ref(x), rtol=1e-6)
    np.testing.assert_allclose(om({"x": x})["y"], _mlp_ref(x), rtol=1e-6)

def test_external_data(tmp_path):
  m = _mlp()
  onnx.save(m, p := tmp_path / "ext.onnx", save_as_external_data=True, all_tensors_to_one_file=True, location="w.bin", size_threshold=0)
  assert (tmp_path / "w.bin").exists()
  x = np.ones((2, 3), np.float32)
  np.testing.assert_allclose(OnnxModel(p)(x=x)["y"], _mlp_ref(x), rtol=1e-6)

def test_tensor_outputs_and_missing_input():
  from morok_mlir import Tensor
  om = OnnxModel(_mlp())
  out = om({"x": Tensor(np.zeros((2, 3), np.float32))}, as_numpy=False)["y"]
  assert isinstance(out, Tensor) and out.shape == (2, 4)
  with pytest.raises(ValueError, match="missing inputs: x"): om()

def test_unsupported_op_refused_before_running():
  nodes = [helper.make_node("Relu", ["x"], ["a"], name="first"), helper.make_node("StringNormalizer", ["a"], ["y"], name="late")]
  with pytest.raises(NotImplementedError, match=r"node 'late' \(StringNormalizer, opset 17\)"):
    OnnxModel(_model(nodes, [_vi("x")], [_vi("y")]))
  # an attribute value it refuses, inside a subgraph too
  bad = helper.make_graph([helper.make_node("Resize", ["x", "", "s"], ["y"], name="rs", mode="nearest", antialias=1)], "b", [], [_vi("y")])
  node = helper.make_node("If", ["c"], ["y"], then_branch=bad, else_branch=bad)
  with pytest.raises(NotImplementedError, match=r"rs.*antialias=1"):
    OnnxModel(_model([node], [_vi("c", TensorProto.BOOL, []), _vi("x"), _vi("s")], [_vi("y")], opset=19))

def test_backend_interface():
  x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
  assert backend.supports_device("CPU") and not backend.supports_device("TPU")
  rep = backend.prepare(_mlp(), "CPU")
  y, = rep.run([x])
  np.testing.assert_allclose(y, _mlp_ref(x), rtol=1e-6)
  np.testing.assert_allclose(backend.run_model(_mlp(), [x])[0], _mlp_ref(x), rtol=1e-6)
  out, = backend.run_node(helper.make_node("Softmax", ["a"], ["b"], axis=0), [x])
  e = np.exp(x - x.max(0))
  np.testing.assert_allclose(out, e / e.sum(0), rtol=1e-5)
  with pytest.raises(ValueError, match="2 inputs given"): rep.run([x, x])

def test_control_flow_reads_condition():
  then = helper.make_graph([helper.make_node("Add", ["x", "x"], ["t"])], "t", [], [_vi("t")])
  els = helper.make_graph([helper.make_node("Neg", ["x"], ["e"])], "e", [], [_vi("e")])
  m = _model([helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=els)], [_vi("c", TensorProto.BOOL, []), _vi("x")], [_vi("y")])
  x = np.array([1.5, -2], np.float32)
  np.testing.assert_equal(OnnxModel(m)(c=np.array(True), x=x)["y"], 2 * x)
  np.testing.assert_equal(OnnxModel(m)(c=np.array(False), x=x)["y"], -x)

def test_node_conformance_no_regressions():
  """Every case in onnx_expected_pass.txt still passes; cases that pass beyond the list are reported, not failed."""
  expected = set(conf.EXPECTED.read_text().split())
  res = conf.run_all()
  assert expected <= set(res), f"cases missing from this onnx: {sorted(expected - set(res))[:5]}"
  regressed = {n: res[n] for n in sorted(expected) if res[n] is not None}
  newly = sorted(n for n, r in res.items() if r is None and n not in expected)
  if newly: warnings.warn(f"{len(newly)} ONNX cases pass beyond onnx_expected_pass.txt (rerun test/onnx_conformance.py): {newly[:10]}")
  print(f"\nONNX node cases: {sum(r is None for r in res.values())} of {len(res)} pass, {len(newly)} beyond the expected list")
  assert not regressed, f"{len(regressed)} ONNX cases regressed:\n" + "\n".join(f"{n}: {r}" for n, r in list(regressed.items())[:20])

@pytest.mark.parametrize("shape", [(3, 3), (2, 5, 5), (1, 1)])
def test_det_matches_numpy(shape):
  rng = np.random.default_rng(2)
  x = rng.standard_normal(shape).astype(np.float32)
  if len(shape) == 3: x[1, 2] = x[1, 0] * 2   # a singular matrix in the batch
  out, = backend.run_node(helper.make_node("Det", ["x"], ["y"]), [x])
  np.testing.assert_allclose(out, np.linalg.det(x.astype(np.float64)), rtol=1e-5, atol=1e-5)

def test_inputs_checked_against_the_graph():
  om = OnnxModel(_mlp())
  with pytest.raises(TypeError, match="input 'x' must be dtypes.float32, got dtypes.float64"): om(x=np.zeros((2, 3)))
  with pytest.raises(ValueError, match=r"input 'x' must have shape \[2, 3\], got \(3, 2\)"): om(x=np.zeros((3, 2), np.float32))

def test_constants_folded_once():
  """Values that depend on no graph input (a ConstantOfShape weight, a Transpose of an initializer) are made on the first
  call and reused; the ConstantOfShape weight is a buffer, so the MatMul on it is a contraction of two buffers. A call
  that feeds an initializer (a graph input with a default) folds nothing and sees the value it feeds."""
  shape = numpy_helper.from_array(np.array([3, 4], np.int64), "shape")
  w0 = numpy_helper.from_array(np.arange(20, dtype=np.float32).reshape(5, 4), "w0")
  nodes = [helper.make_node("ConstantOfShape", ["shape"], ["w"], value=numpy_helper.from_array(np.array([0.5], np.float32))),
           helper.make_node("Transpose", ["w0"], ["wt"]), helper.make_node("MatMul", ["x", "w"], ["h"]),
           helper.make_node("MatMul", ["h", "wt"], ["y"])]
  m = OnnxModel(_model(nodes, [_vi("x", shape=[2, 3]), _vi("w0", shape=[5, 4])], [_vi("y")], [shape, w0]))
  x = np.arange(6, dtype=np.float32).reshape(2, 3)
  want = lambda w0v: (x @ np.full((3, 4), 0.5, np.float32)) @ w0v.T
  for _ in range(2): np.testing.assert_allclose(m({"x": x})["y"], want(numpy_helper.to_array(w0)), rtol=1e-6)
  folded = dict(m._folded)
  assert {"w", "wt"} <= set(folded) and folded["w"].uop.op is Ops.BUFFER
  m({"x": x})
  assert all(m._folded[k] is v for k, v in folded.items())   # reused, not rebuilt
  other = np.ones((5, 4), np.float32)
  np.testing.assert_allclose(m({"x": x, "w0": other})["y"], want(other), rtol=1e-6)
  np.testing.assert_allclose(m({"x": x})["y"], want(numpy_helper.to_array(w0)), rtol=1e-6)

def test_repeated_calls_replay_and_data_dependent_graphs_do_not():
  """Calls with inputs of one shape replay the recorded kernels (no interpretation of the graph); a graph whose
  shapes come from an input's data (NonZero) runs normally on each call and follows the data."""
  m = OnnxModel(_mlp())
  for i in range(5):
    x = np.random.default_rng(i).standard_normal((2, 3)).astype(np.float32)
    np.testing.assert_allclose(m(x=x)["y"], _mlp_ref(x), rtol=1e-5, atol=1e-6)
  assert any(j.plan is not None for j in m._jits.values())
  nz = OnnxModel(_model([helper.make_node("NonZero", ["x"], ["i"]), helper.make_node("Cast", ["i"], ["y"], to=TensorProto.FLOAT)],
                        [_vi("x", shape=[6])], [_vi("y")]))
  for i in range(5):
    x = (np.random.default_rng(i).standard_normal(6) > 0).astype(np.float32)
    np.testing.assert_equal(nz(x=x)["y"], np.array(np.nonzero(x), np.float32))
  assert all(j.plan is None for j in nz._jits.values())

def test_calls_from_threads_share_one_replay():
  """Four threads call one model with their own inputs while it is recorded and replayed: every result is right."""
  import threading
  m, errs = OnnxModel(_mlp()), []
  def work(seed):
    r = np.random.default_rng(seed)
    for _ in range(12):
      x = r.standard_normal((2, 3)).astype(np.float32)
      if not np.allclose(got := m(x=x)["y"], _mlp_ref(x), rtol=1e-5, atol=1e-6): errs.append(np.abs(got - _mlp_ref(x)).max())
  ts = [threading.Thread(target=work, args=(s,)) for s in range(4)]
  for t in ts: t.start()
  for t in ts: t.join()
  assert not errs

def test_external_data_read_next_to_the_model(tmp_path, monkeypatch):
  """A path model reads its external data from its own folder (load_external_data or not), never from the process's
  working folder; a model given in memory reads it only from the base_dir its caller names."""
  m = _mlp()
  (folder := tmp_path / "model").mkdir()
  onnx.save(m, p := folder / "ext.onnx", save_as_external_data=True, all_tensors_to_one_file=True, location="w.bin", size_threshold=0)
  (cwd := tmp_path / "cwd").mkdir()
  (cwd / "w.bin").write_bytes(b"\0" * (folder / "w.bin").stat().st_size)   # the same layout, other values
  monkeypatch.chdir(cwd)
  x = np.ones((2, 3), np.float32)
  for flag in (True, False): np.testing.assert_allclose(OnnxModel(p, load_external_data=flag)(x=x)["y"], _mlp_ref(x), rtol=1e-6)
  proto = onnx.load(str(p), load_external_data=False)
  for src in (proto, proto.SerializeToString()):
    np.testing.assert_allclose(OnnxModel(src, base_dir=folder)(x=x)["y"], _mlp_ref(x), rtol=1e-6)
    with pytest.raises(ValueError, match="base_dir"): OnnxModel(src)
  assert all(t.data_location == TensorProto.EXTERNAL for t in proto.graph.initializer)   # the caller's proto is left as it was

@pytest.mark.parametrize("op", ["Range", "ConstantOfShape"])
def test_host_constants_made_once_in_their_dtype(op):
  """Range's and ConstantOfShape's outputs (folded: they depend on no input) are made on the host in their dtype, in the
  one array the Tensor then holds: no float64 temporaries, no copy; the call's peak is about the output's size."""
  import tracemalloc
  n = 1 << 21
  if op == "Range":
    node = helper.make_node("Range", ["s", "l", "d"], ["y"])
    inits = [numpy_helper.from_array(np.array(v, np.float32), k) for k, v in zip("sld", (0, n, 1))]
  else:
    node = helper.make_node("ConstantOfShape", ["s"], ["y"], value=numpy_helper.from_array(np.array([2], np.float32)))
    inits = [numpy_helper.from_array(np.array([n]), "s")]
  m = OnnxModel(_model([node], [], [_vi("y")], inits))
  tracemalloc.start()
  try: y = m(as_numpy=False)["y"]
  finally: peak = tracemalloc.get_traced_memory()[1]; tracemalloc.stop()
  assert y.shape == (n,) and peak < 1.3 * n * 4, f"peak {peak / (n * 4):.2f}x the output"
  np.testing.assert_equal(y.numpy()[[0, 1, -1]], [0, 1, n - 1] if op == "Range" else [2, 2, 2])

@pytest.mark.parametrize("ctm,nm,scales,moves", [("asymmetric", "floor", [1, 1, 2, 2], True), ("half_pixel", "round_prefer_floor", [1, 1, 2, 3], True),
                                                 ("asymmetric", "floor", [1, 1, 0.5, 0.5], True), ("half_pixel", "round_prefer_floor", [1, 1, 1.5, 1.5], False),
                                                 ("align_corners", "round_prefer_floor", [1, 1, 2, 2], True), ("asymmetric", "floor", [1, 1, 3, 1], True)])
def test_resize_nearest_by_integer_factors_as_movement(ctm, nm, scales, moves):
  """A nearest Resize whose picks are a repeat or a strided slice (an integer factor: a detector's upsampling) builds
  movement ops, which a kernel reads through index arithmetic, not a gather of a table of positions; other picks
  gather. Both equal onnx's reference."""
  from onnx.reference import ReferenceEvaluator
  from morok_mlir import Tensor
  from morok_mlir.onnx.ops import _resize
  x = np.random.default_rng(0).standard_normal((1, 2, 5, 6)).astype(np.float32)
  a = {"mode": "nearest", "coordinate_transformation_mode": ctm, "nearest_mode": nm}
  m = _model([helper.make_node("Resize", ["x", "", "s"], ["y"], **a)], [_vi("x", shape=list(x.shape))], [_vi("y")],
             [numpy_helper.from_array(np.array(scales, np.float32), "s")])
  np.testing.assert_array_equal(OnnxModel(m)({"x": x})["y"], ReferenceEvaluator(m).run(None, {"x": x})[0])
  y = _resize([Tensor(x), None, Tensor(np.array(scales, np.float32))], a, 17)
  assert (Ops.GATHER not in {u.op for u in y.uop.toposort}) == moves

def test_take_runs():
  """The positions _take turns into a slice and a repeat: start + (j // repeats) * step, nothing else."""
  from morok_mlir.onnx.ops import _runs
  assert _runs(np.arange(10) // 2) == (0, 1, 2) and _runs(np.arange(5)) == (0, 1, 1) and _runs(np.arange(2, 11, 3)) == (2, 3, 1)
  assert _runs(np.repeat(np.arange(1, 9, 2), 3)) == (1, 2, 3) and _runs(np.array([3, 3, 3])) == (3, 1, 3)
  assert _runs(np.array([0, 1, 1])) is _runs(np.array([2, 1, 0])) is _runs(np.array([0, 0, 1, 1, 2])) is _runs(np.array([0, 0, 1, 2])) is None
