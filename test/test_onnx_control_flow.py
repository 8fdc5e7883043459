"""ONNX models with control flow, carried state and small per-call work (test/onnx_cf_models.py): their outputs against
onnxruntime's (the test extra installs it); later calls replay the recorded kernels without
interpreting the graph again (run_node is not called), whichever way an If goes; quantized integer outputs are exact."""
import pathlib, sys
import numpy as np
import pytest
onnx = pytest.importorskip("onnx")
from onnx import helper as h, TensorProto as TP, numpy_helper as nh
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import onnx_cf_models as M
from morok_mlir.onnx import OnnxModel, InvalidModel
from morok_mlir import host
import morok_mlir.onnx.model as model_mod

ort = pytest.importorskip("onnxruntime", reason="the reference outputs are onnxruntime's: pip install 'morok-mlir[test]'")

def reference(m: onnx.ModelProto):
  """f(feeds) -> {output name: array}: onnxruntime's CPU session."""
  s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
  names = [o.name for o in s.get_outputs()]
  return lambda feeds: dict(zip(names, s.run(None, feeds)))

@pytest.fixture
def interpreted(monkeypatch):
  """A list that grows by one for each graph node the model interprets (a replay interprets none)."""
  seen = []
  run = model_mod.run_node
  def counted(node, *a):
    seen.append(node.op_type)
    return run(node, *a)
  monkeypatch.setattr(model_mod, "run_node", counted)
  return seen

def stream(name, calls, feeds_of, interpreted, exact=()):
  """calls calls of model name, each output named in carry fed back as its input (both sides carry their own);
  every output matches the reference; the last three calls interpret no node."""
  m, feeds, carry = M.MODELS[name]()
  om, ref = OnnxModel(m), reference(m)
  mine = theirs = {}
  for k in range(calls):
    f = feeds_of(feeds, k)
    got = om({**f, **{i: mine[o] for o, i in carry.items() if o in mine}})
    want = ref({**f, **{i: theirs[o] for o, i in carry.items() if o in theirs}})
    for n, w in want.items():
      assert got[n].dtype == w.dtype and got[n].shape == w.shape, n
      if n in exact: np.testing.assert_array_equal(got[n], w, err_msg=f"call {k}: {n}")
      else: np.testing.assert_allclose(got[n], w, rtol=1e-4, atol=1e-5, err_msg=f"call {k}: {n}")
    mine, theirs = got, want
    if k == calls - 4: interpreted.clear()
  assert interpreted == [], f"the last calls interpreted {interpreted}"
  return om

def test_streaming_if_taken_both_ways_replays(interpreted):
  """The VAD-like model: an If on the sample-rate input, taken both ways in consecutive calls, with the LSTM state fed
  back: each sample rate is one straight graph, replayed (the If's value is keyed, not read on the host per call)."""
  om = stream("vad", 12, lambda feeds, k: feeds(k, 16000 if k % 2 else 8000), interpreted)
  assert om._control == {"sr"}

def test_streaming_if_one_way(interpreted):
  stream("vad", 8, lambda feeds, k: feeds(k), interpreted)

def test_loop_static_trip_count_replays(interpreted): stream("loop", 7, lambda feeds, k: feeds(k), interpreted)
def test_scan_replays(interpreted): stream("scan", 7, lambda feeds, k: feeds(k), interpreted)
def test_tiny_graph_replays(interpreted): stream("tiny", 7, lambda feeds, k: feeds(k), interpreted)

def test_detector_head_stores_its_concat_part_by_part(interpreted):
  """A detector's head (three scales transposed, sigmoided, concatenated): the reference's outputs, each part of the
  output concat stored by a kernel of its own over its own rows (one kernel selecting among the three per element
  computed every part's sigmoid for every element)."""
  from morok_mlir import realize as R
  R._schedule_cache.clear()
  stream("detect", 6, lambda feeds, k: feeds(k), interpreted)
  names = [it.name for s in R._schedule_cache.values() for it in s.items]
  # (a part may be computed by its scale's convolution itself: r_4800_85_64)
  assert all(any(f"_{rows}_85" in n for n in names) for rows in (4800, 1200, 300)) and not any("6300" in n for n in names), names

def test_quantized_encoder_exact(interpreted):
  """DynamicQuantizeLinear + MatMulInteger (int32 out) and QLinearMatMul (uint8 out): integers equal to the reference's."""
  stream("qenc", 7, lambda feeds, k: feeds(k), interpreted, exact=("acc", "q"))

def test_qdq_layer(interpreted):
  """The QDQ form (QuantizeLinear/DequantizeLinear around a float MatMul, int8 weights with a scale per column)."""
  stream("qdq", 6, lambda feeds, k: feeds(k), interpreted)

def _if_on_data(then_op="Relu", else_op="Neg", else_shape=4):
  br = lambda name, op, n: h.make_graph([h.make_node(op, ["x"], [name])] if n == 4 else
                                        [h.make_node("Slice", ["x", "z1", "n1"], [name])], name, [], [h.make_tensor_value_info(name, TP.FLOAT, None)])
  nodes = [h.make_node("ReduceSum", ["x"], ["s"], keepdims=0), h.make_node("Greater", ["s", "zero"], ["c"]),
           h.make_node("If", ["c"], ["y"], then_branch=br("t", then_op, 4), else_branch=br("e", else_op, else_shape))]
  inits = [nh.from_array(np.array(0, np.float32), "zero"), nh.from_array(np.array([0], np.int64), "z1"), nh.from_array(np.array([2], np.int64), "n1")]
  return h.make_model(h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TP.FLOAT, [4])], [h.make_tensor_value_info("y", TP.FLOAT, None)],
                                   inits), opset_imports=[h.make_opsetid("", 17)])

def test_if_on_data_is_one_graph(interpreted):
  """An If whose condition is computed from a float input: both (small) branches run and where picks, so a replay
  follows the data both ways."""
  om = OnnxModel(_if_on_data())
  for k in range(8):
    x = np.random.default_rng(k).standard_normal(4).astype(np.float32) + (1 if k % 2 else -1)
    np.testing.assert_allclose(om({"x": x})["y"], np.maximum(x, 0) if x.sum() > 0 else -x)
    if k == 4: interpreted.clear()
  assert interpreted == []

def test_if_on_data_with_branches_of_other_shapes():
  """Branches whose outputs differ in shape cannot be merged: each call reads the condition and follows it."""
  om = OnnxModel(_if_on_data(else_shape=2))
  for k in range(6):
    x = np.random.default_rng(k).standard_normal(4).astype(np.float32) + (1 if k % 2 else -1)
    np.testing.assert_allclose(om({"x": x})["y"], np.maximum(x, 0) if x.sum() > 0 else x[:2])

def test_if_on_data_with_a_branch_that_cannot_run():
  """A branch that fails on these inputs (a Reshape to 3 elements of a 4-element tensor) is not the one taken: the If
  gives the other branch's value; taken, it raises the model's error."""
  shape = nh.from_array(np.array([3], np.int64), "three")
  br = lambda name, node: h.make_graph([node], name, [], [h.make_tensor_value_info(name, TP.FLOAT, None)])
  nodes = [h.make_node("ReduceSum", ["x"], ["s"], keepdims=0), h.make_node("Greater", ["s", "zero"], ["c"]),
           h.make_node("If", ["c"], ["y"], then_branch=br("t", h.make_node("Relu", ["x"], ["t"])),
                       else_branch=br("e", h.make_node("Reshape", ["x", "three"], ["e"])))]
  g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TP.FLOAT, [4])], [h.make_tensor_value_info("y", TP.FLOAT, None)],
                   [nh.from_array(np.array(0, np.float32), "zero"), shape])
  om = OnnxModel(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]))
  for k in range(4):
    x = np.arange(4, dtype=np.float32) + k
    np.testing.assert_array_equal(om({"x": x})["y"], x)
  with pytest.raises(InvalidModel, match="Reshape"): om({"x": -np.ones(4, np.float32)})

def test_replayed_calls_read_the_arrays_given_now():
  """A replayed call copies its arrays: one changed in place after a call gives the new result, the arrays returned
  are the caller's own, and an input of another dtype is still refused."""
  m, feeds, _ = M.tiny()
  om = OnnxModel(m)
  a, b = np.arange(16, dtype=np.float32), np.ones(16, np.float32)
  outs = [om({"a": a, "b": b})["y"] for _ in range(4)]
  a[:] = 2
  y = om({"a": a, "b": b})["y"]
  np.testing.assert_array_equal(y, np.full(16, 6, np.float32))
  outs[-1][:] = -1
  np.testing.assert_array_equal(outs[-2], (np.arange(16) + 1) * np.arange(16))
  with pytest.raises(InvalidModel, match="must be dtypes.float32"): om({"a": a.astype(np.float64), "b": b})

@pytest.mark.parametrize("K", [7, 256, 600])
def test_matmul_integer_exact_at_the_extremes(K):
  """MatMulInteger of uint8 x int8 at their extreme values and zero points, for reductions past what float32 holds
  exactly in one sum: the int32 result equals numpy's integer matmul."""
  r = np.random.default_rng(K)
  A = np.where(r.random((5, K)) < 0.5, 255, 0).astype(np.uint8)
  B = np.where(r.random((K, 3)) < 0.5, 127, -128).astype(np.int8)
  nodes = [h.make_node("MatMulInteger", ["A", "B", "za", "zb"], ["Y"])]
  g = h.make_graph(nodes, "mmi", [h.make_tensor_value_info("A", TP.UINT8, [5, K])], [h.make_tensor_value_info("Y", TP.INT32, [5, 3])],
                   [nh.from_array(B, "B"), nh.from_array(np.uint8(0), "za"), nh.from_array(np.int8(-128), "zb")])
  om = OnnxModel(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]))
  want = A.astype(np.int64) @ (B.astype(np.int64) + 128)
  for _ in range(3): np.testing.assert_array_equal(om({"A": A})["Y"], want.astype(np.int32))

def test_control_inputs_found_through_nodes_and_subgraphs():
  """The inputs whose values decide a branch, a trip count or a shape, through nodes and an inner graph's outer-scope
  reads."""
  m, _, _ = M.vad()
  assert model_mod.control_inputs(m.graph) == {"sr", "sr16k", "shape3", "ax0", "split11"}   # (initializers: shapes, axes)
  inner = h.make_graph([h.make_node("If", ["flag"], ["o"], then_branch=h.make_graph([h.make_node("Identity", ["x"], ["t"])], "t", [],
                        [h.make_tensor_value_info("t", TP.FLOAT, None)]), else_branch=h.make_graph([h.make_node("Neg", ["x"], ["e"])], "e", [],
                        [h.make_tensor_value_info("e", TP.FLOAT, None)]))], "b", [], [h.make_tensor_value_info("o", TP.FLOAT, None)])
  g = h.make_graph([h.make_node("Not", ["n"], ["flag"]), h.make_node("If", ["k"], ["y"], then_branch=inner, else_branch=inner)], "g",
                   [h.make_tensor_value_info(n, t, []) for n, t in (("n", TP.BOOL), ("k", TP.BOOL), ("x", TP.FLOAT))],
                   [h.make_tensor_value_info("y", TP.FLOAT, None)])
  assert model_mod.control_inputs(g) == {"n", "k"}

def _if_on_step():
  """y = x * 2 on the first call of a stream (step == 0), else x + 1: an If on a counter input."""
  br = lambda name, op: h.make_graph([h.make_node(op, ["x", "one" if op == "Add" else "two"], [name])], name, [],
                                     [h.make_tensor_value_info(name, TP.FLOAT, [4])])
  nodes = [h.make_node("Equal", ["step", "zero"], ["first"]),
           h.make_node("If", ["first"], ["y"], then_branch=br("t", "Mul"), else_branch=br("e", "Add"))]
  inits = [nh.from_array(np.array(0, np.int64), "zero"), nh.from_array(np.array(1, np.float32), "one"), nh.from_array(np.array(2, np.float32), "two")]
  return h.make_model(h.make_graph(nodes, "g", [h.make_tensor_value_info("x", TP.FLOAT, [4]), h.make_tensor_value_info("step", TP.INT64, [])],
                                   [h.make_tensor_value_info("y", TP.FLOAT, [4])], inits), opset_imports=[h.make_opsetid("", 17)])

def test_if_on_a_counter_stops_keying(interpreted):
  """A control input whose value changes every call (a step counter) keys a few replays, then is the call's data: the
  If on it is merged and one replay serves every later step."""
  om = OnnxModel(_if_on_step())
  x = np.arange(4, dtype=np.float32)
  for k in range(12):
    np.testing.assert_array_equal(om({"x": x, "step": np.array(k % 12 if k < 8 else 0 if k == 10 else k, np.int64)})["y"],
                                  x * 2 if k == 0 or k == 10 else x + 1)
    if k == 8: interpreted.clear()
  assert interpreted == []

def test_replayed_outputs_are_the_callers_own():
  """Outputs that are a constant, an input and a computed value, written to by the caller after each replayed call:
  later calls still give the right values."""
  g = h.make_graph([h.make_node("Identity", ["c"], ["y1"]), h.make_node("Add", ["x", "c"], ["y2"]), h.make_node("Identity", ["x"], ["y3"])], "g",
                   [h.make_tensor_value_info("x", TP.FLOAT, [4])], [h.make_tensor_value_info(n, TP.FLOAT, [4]) for n in ("y1", "y2", "y3")],
                   [nh.from_array(np.ones(4, np.float32), "c")])
  om = OnnxModel(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]))
  for k in range(6):
    x = np.full(4, k, np.float32)
    out = om({"x": x})
    np.testing.assert_array_equal(np.stack([out["y1"], out["y2"], out["y3"]]), np.stack([np.ones(4), x + 1, x]))
    for v in out.values(): v[:] = -7

def test_streaming_state_kept_as_tensors(interpreted):
  """The VAD-like stream with Tensors in and out (the state stays a Tensor between calls): the same results as arrays."""
  from morok_mlir import Tensor
  m, feeds, _ = M.vad()
  om, ref = OnnxModel(m), reference(m)
  state = theirs = np.zeros((2, 1, M.HID), np.float32)
  state = Tensor(state)
  for k in range(9):
    f = feeds(k, 16000 if k % 2 else 8000)
    got = om({"x": Tensor(f["x"]), "sr": Tensor(f["sr"]), "state": state}, as_numpy=False)
    want = ref({**f, "state": theirs})
    np.testing.assert_allclose(got["prob"].numpy(), want["prob"], rtol=1e-4, atol=1e-5)
    state, theirs = got["stateN"], want["stateN"]
    if k == 5: interpreted.clear()
  np.testing.assert_allclose(state.numpy(), theirs, rtol=1e-4, atol=1e-5)
  assert interpreted == []

def test_shape_from_a_small_input_replays(interpreted):
  """A Reshape whose shape is a graph input (int64 [2]): keyed by its value like a condition, each shape replays."""
  g = h.make_graph([h.make_node("Reshape", ["x", "shape"], ["r"]), h.make_node("Mul", ["r", "r"], ["y"])], "g",
                   [h.make_tensor_value_info("x", TP.FLOAT, [12]), h.make_tensor_value_info("shape", TP.INT64, [2])],
                   [h.make_tensor_value_info("y", TP.FLOAT, None)])
  om = OnnxModel(h.make_model(g, opset_imports=[h.make_opsetid("", 17)]))
  x = np.arange(12, dtype=np.float32)
  for k in range(10):
    s = (3, 4) if k % 2 else (6, 2)
    np.testing.assert_array_equal(om({"x": x, "shape": np.array(s, np.int64)})["y"], (x * x).reshape(s))
    if k == 7: interpreted.clear()
  assert interpreted == []

@pytest.mark.parametrize("kind,lens", [("LSTM", None), ("LSTM", [5, 3]), ("GRU", None), ("RNN", [2, 5])])
def test_rnn_sequence_against_the_reference(kind, lens):
  """A bidirectional RNN over 5 steps (the input's part of every step's gates is one contraction), with and without
  sequence lengths, against the reference."""
  T, N, I, H, G = 5, 2, 8, 6, {"RNN": 1, "GRU": 3, "LSTM": 4}[kind]
  r = np.random.default_rng(G)
  ins = ["x", "W", "R", "B"] + (["lens"] if lens else [])
  outs = ["Y", "Yh"] + (["Yc"] if kind == "LSTM" else [])
  inits = [nh.from_array((r.standard_normal((2, G * H, I)) * 0.3).astype(np.float32), "W"),
           nh.from_array((r.standard_normal((2, G * H, H)) * 0.3).astype(np.float32), "R"),
           nh.from_array((r.standard_normal((2, 2 * G * H)) * 0.3).astype(np.float32), "B")]
  if lens: inits.append(nh.from_array(np.array(lens, np.int32), "lens"))
  g = h.make_graph([h.make_node(kind, ins, outs, hidden_size=H, direction="bidirectional")], "g",
                   [h.make_tensor_value_info("x", TP.FLOAT, [T, N, I])], [h.make_tensor_value_info(o, TP.FLOAT, None) for o in outs], inits)
  m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
  x = r.standard_normal((T, N, I)).astype(np.float32)
  got, want = OnnxModel(m)({"x": x}), reference(m)({"x": x})
  for o in outs: np.testing.assert_allclose(got[o], want[o], rtol=1e-4, atol=1e-5, err_msg=o)

def test_loop_until_a_condition_on_data(interpreted):
  """A Loop of at most 8 trips that stops when the carried sum passes a bound (its condition is the data): the trips
  it takes follow each call's input, and the calls replay."""
  body = h.make_graph(
    [h.make_node("Mul", ["h_in", "half"], ["hh"]), h.make_node("Add", ["hh", "x"], ["h_out"]),
     h.make_node("ReduceSum", ["h_out"], ["s"], keepdims=0), h.make_node("Less", ["s", "bound"], ["cond_out"])],
    "body", [h.make_tensor_value_info("i", TP.INT64, []), h.make_tensor_value_info("cond_in", TP.BOOL, []),
             h.make_tensor_value_info("h_in", TP.FLOAT, [4])],
    [h.make_tensor_value_info("cond_out", TP.BOOL, []), h.make_tensor_value_info("h_out", TP.FLOAT, [4])])
  g = h.make_graph([h.make_node("Loop", ["M", "go", "h0"], ["hN"], body=body)], "g",
                   [h.make_tensor_value_info("x", TP.FLOAT, [4]), h.make_tensor_value_info("h0", TP.FLOAT, [4])],
                   [h.make_tensor_value_info("hN", TP.FLOAT, [4])],
                   [nh.from_array(np.array(8, np.int64), "M"), nh.from_array(np.array(True), "go"),
                    nh.from_array(np.float32(0.5), "half"), nh.from_array(np.float32(10), "bound")])
  m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
  om, ref = OnnxModel(m), reference(m)
  for k in range(8):
    f = {"x": np.full(4, 0.4 * (k + 1), np.float32), "h0": np.zeros(4, np.float32)}
    np.testing.assert_allclose(om(f)["hN"], ref(f)["hN"], rtol=1e-6)
    if k == 4: interpreted.clear()
  assert interpreted == []

def test_replays_of_arrays_make_no_buffer_uop(monkeypatch):
  """A replayed call of numpy arrays runs the recorded kernels on the replay's own buffers, its inputs copied in and
  outputs copied out: no buffer UOp (Tensor, Buffer) per call; strided arrays and calls from threads still give the
  reference's results, each output the caller's own."""
  import threading
  import morok_mlir.realize as R
  m, feeds, _ = M.loop()
  om, ref = OnnxModel(m), reference(m)
  for k in range(4): om(feeds(k))
  made = []
  new_buffer = R.new_buffer
  monkeypatch.setattr(R, "new_buffer", lambda *a, **kw: made.append(1) or new_buffer(*a, **kw))
  wide = np.random.default_rng(0).standard_normal((1, 64)).astype(np.float32)
  f = {"x": wide[:, ::2], "h0": np.zeros((1, 32), np.float32)}   # (a strided view)
  want = ref({"x": np.ascontiguousarray(f["x"]), "h0": f["h0"]})
  got = [om(f) for _ in range(3)]
  assert made == []
  for g in got: np.testing.assert_allclose(g["hs"], want["hs"], rtol=1e-4, atol=1e-5)
  got[0]["hs"][:] = 0
  np.testing.assert_allclose(got[1]["hs"], want["hs"], rtol=1e-4, atol=1e-5)
  errs = []
  def work(seed):
    for k in range(20):
      f = feeds(seed + k)
      if not np.allclose(om(f)["hN"], ref(f)["hN"], rtol=1e-4, atol=1e-5): errs.append((seed, k))
  ts = [threading.Thread(target=work, args=(s,)) for s in range(4)]
  for t in ts: t.start()
  for t in ts: t.join()
  assert not errs

def test_constants_of_quantized_layers_fold_once(interpreted):
  """Values computed from initializers alone are realized once, as onnxruntime folds constants: the QDQ layer's
  dequantized weight (a folded node) and the int8 encoder's weights minus their zero points (inside MatMulInteger and
  QLinearMatMul) become float32 buffers that replays read; the outputs stay the reference's (integers exactly)."""
  from morok_mlir.dialects.ops import Ops
  from morok_mlir.core.dtype import dtypes
  om = stream("qdq", 6, lambda feeds, k: feeds(k), interpreted)
  assert om._folded["wd"].uop.op is Ops.BUFFER
  # every kernel of the replay runs on an argument set of its own, the weight's panels packed once and read from there
  assert all(k.args is not None for v in om._fast.values() for k in v[6].steps)
  interpreted.clear()
  om = stream("qenc", 6, lambda feeds, k: feeds(k), interpreted, exact=("acc", "q"))
  # the weights' column sums (the zero points' corrections of int8 products), or on a CPU without an int8 dot product
  # the weights minus their zero points in float32
  want = dtypes.int32 if host.INT8_DOT else dtypes.float32
  assert len(om._consts) == 2 and all(t.uop.op is Ops.BUFFER and t.dtype == want for t in om._consts.values())
  # DynamicQuantizeLinear's range in one kernel: 7 kernels in all (its values stored as uint8 for the int8 products)
  assert next(iter(om._fast.values()))[0].plan.nkernels <= (7 if host.INT8_DOT else 5)

@pytest.mark.parametrize("op", ["ConvInteger", "QLinearConv", "MatMulIntegerData"])
def test_quantized_ops_with_constant_or_data_weights(op):
  """ConvInteger and QLinearConv of int8 weights with a zero point and a scale per output channel (folded once), and MatMulInteger
  of two call inputs (nothing folded): equal to the reference's integers over several calls."""
  r = np.random.default_rng(3)
  x = r.integers(0, 256, (1, 3, 9, 9), dtype=np.uint8)
  if op == "MatMulIntegerData":
    nodes, ins = [h.make_node("MatMulInteger", ["A", "B", "za"], ["y"])], [("A", TP.UINT8, [6, 40]), ("B", TP.INT8, [40, 5])]
    inits, out = [nh.from_array(np.uint8(9), "za")], ("y", TP.INT32)
    feeds = lambda k: {"A": r.integers(0, 256, (6, 40), dtype=np.uint8), "B": r.integers(-128, 128, (40, 5), dtype=np.int8)}
  else:
    w = r.integers(-128, 128, (4, 3, 3, 3), dtype=np.int8)
    inits = [nh.from_array(w, "w"), nh.from_array(np.uint8(7), "zx"), nh.from_array(np.array([0, 3, -2, 5], np.int8), "zw")]
    ins, feeds = [("x", TP.UINT8, [1, 3, 9, 9])], lambda k: {"x": r.integers(0, 256, (1, 3, 9, 9), dtype=np.uint8)}
    if op == "ConvInteger":   # (onnxruntime's ConvInteger takes one weight zero point)
      inits[2] = nh.from_array(np.int8(3), "zw")
      nodes, out = [h.make_node("ConvInteger", ["x", "w", "zx", "zw"], ["y"], pads=[1, 1, 1, 1])], ("y", TP.INT32)
    else:
      inits += [nh.from_array(np.float32(0.02), "sx"), nh.from_array(np.array([0.01, 0.02, 0.015, 0.03], np.float32), "sw"),
                nh.from_array(np.float32(0.5), "sy"), nh.from_array(np.uint8(100), "zy")]
      inits[2] = nh.from_array(np.zeros(4, np.int8), "zw")   # (onnxruntime's QLinearConv takes int8 weights of zero point 0)
      nodes, out = [h.make_node("QLinearConv", ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy"], ["y"], pads=[1, 1, 1, 1])], ("y", TP.UINT8)
  g = h.make_graph(nodes, "g", [h.make_tensor_value_info(*i) for i in ins], [h.make_tensor_value_info(out[0], out[1], None)], inits)
  m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
  om, ref = OnnxModel(m), reference(m)
  for k in range(5):
    f = feeds(k)
    np.testing.assert_array_equal(om(f)["y"], ref(f)["y"], err_msg=f"call {k}")
  assert (len(om._consts) == 0) == (op == "MatMulIntegerData")

def _ew_loop(trips: int = 6):
  """x [4], h0 [4] -> hN, hs [trips, 4] with h = h * 0.5 + x: a Loop whose body computes no reduce."""
  body = h.make_graph(
    [h.make_node("Identity", ["cond_in"], ["cond_out"]), h.make_node("Mul", ["h_in", "half"], ["hh"]), h.make_node("Add", ["hh", "x"], ["h_out"]),
     h.make_node("Identity", ["h_out"], ["h_scan"])],
    "body", [h.make_tensor_value_info(n, t, s) for n, t, s in (("i", TP.INT64, []), ("cond_in", TP.BOOL, []), ("h_in", TP.FLOAT, [4]))],
    [h.make_tensor_value_info(n, t, s) for n, t, s in (("cond_out", TP.BOOL, []), ("h_out", TP.FLOAT, [4]), ("h_scan", TP.FLOAT, [4]))])
  g = h.make_graph([h.make_node("Loop", ["M", "", "h0"], ["hN", "hs"], body=body)], "g",
                   [h.make_tensor_value_info("x", TP.FLOAT, [4]), h.make_tensor_value_info("h0", TP.FLOAT, [4])],
                   [h.make_tensor_value_info("hN", TP.FLOAT, [4]), h.make_tensor_value_info("hs", TP.FLOAT, [trips, 4])],
                   [nh.from_array(np.array(trips, np.int64), "M"), nh.from_array(np.float32(0.5), "half")])
  return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])

def test_loop_state_through_a_reduce_is_stored_by_its_kernel(interpreted):
  """A Loop or Scan whose carried value is a matmul's (h = tanh(h @ W + x)) stores each trip's value in the matmul's
  kernel: one kernel per trip and the outputs' (not a reduce kernel and an elementwise one per trip, and the stack
  computing trips again); a body without a reduce stays fused across trips. All against the reference."""
  om = stream("loop", 6, lambda feeds, k: feeds(k), interpreted)
  assert next(iter(om._fast.values()))[0].plan.nkernels <= 6 + 2
  om = stream("scan", 6, lambda feeds, k: feeds(k), interpreted)   # (its scan output y = s * 2 reads the stored s)
  assert next(iter(om._fast.values()))[0].plan.nkernels <= 8 + 2
  m = _ew_loop()
  om, ref = OnnxModel(m), reference(m)
  for k in range(5):
    f = {"x": np.full(4, k, np.float32), "h0": np.arange(4, dtype=np.float32)}
    got, want = om(f), ref(f)
    for n in want: np.testing.assert_allclose(got[n], want[n], rtol=1e-6, err_msg=n)
  assert next(iter(om._fast.values()))[0].plan.nkernels <= 2

def test_threaded_kernels_of_a_replay_run_either_way():
  """A direct replay times each kernel split for threads both ways in its first calls and keeps one: after those calls
  each such kernel has chosen, and the results are the reference's on threads and with every chunk on the calling
  thread alike."""
  from morok_mlir.host import THREADS
  if THREADS < 2: pytest.skip("one thread: no kernel is split")
  g = h.make_graph([h.make_node("Mul", ["x", "x"], ["s"]), h.make_node("Add", ["s", "x"], ["y"])], "g",
                   [h.make_tensor_value_info("x", TP.FLOAT, [1 << 20])], [h.make_tensor_value_info("y", TP.FLOAT, [1 << 20])])
  m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
  om, x = OnnxModel(m), np.random.default_rng(0).standard_normal(1 << 20).astype(np.float32)
  want = x * x + x
  for _ in range(4 + 2 * model_mod._Direct.TUNE): np.testing.assert_allclose(om({"x": x})["y"], want, rtol=1e-6)
  d = om._fast[om._fast_key({"x": x})][6]
  split = [k for k in d.steps if k.args is not None and any(len(p) > 1 for _, p in k.args.phases)]
  assert split and not d.tuning and all(type(k.serial) is bool for k in split)
  for serial in (True, False):
    for k in split: k.serial = serial; k.prepare()
    np.testing.assert_allclose(om({"x": x})["y"], want, rtol=1e-6)

def test_folded_broadcast_stays_lazy():
  """A value computed from initializers is stored once, but its broadcast is not: Expand(c * 2) to 512x512 keeps
  reading the stored 512 values (no 1 MiB constant), with the reference's result."""
  from morok_mlir.dialects.ops import Ops
  g = h.make_graph([h.make_node("Mul", ["c", "two"], ["c2"]), h.make_node("Expand", ["c2", "shape"], ["big"]), h.make_node("Add", ["x", "big"], ["y"])],
                   "g", [h.make_tensor_value_info("x", TP.FLOAT, [512, 512])], [h.make_tensor_value_info("y", TP.FLOAT, [512, 512])],
                   [nh.from_array(np.arange(512, dtype=np.float32), "c"), nh.from_array(np.float32(2), "two"),
                    nh.from_array(np.array([512, 512], np.int64), "shape")])
  m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
  om, ref = OnnxModel(m), reference(m)
  x = np.random.default_rng(0).standard_normal((512, 512)).astype(np.float32)
  for _ in range(4): np.testing.assert_array_equal(om({"x": x})["y"], ref({"x": x})["y"])
  assert om._folded["c2"].uop.op is Ops.BUFFER and om._folded["big"].uop.op is Ops.EXPAND
