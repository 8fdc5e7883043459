"""Small ONNX models of the kinds whose per-call cost is control flow and Python rather than arithmetic, built with
onnx's helper API (no stored files): a streaming voice-activity-like model (a conv front end, an If on a scalar input
choosing between two subgraphs that read the outer scope, an LSTM whose state is an input and an output), a Loop with
a static trip count, a Scan, an int8-quantized encoder (DynamicQuantizeLinear + MatMulInteger, QLinearMatMul,
QuantizeLinear/DequantizeLinear), an int8 layer in QDQ form, a tiny elementwise graph and a detector's output head. Each builder returns (model,
feeds(k) -> the k-th call's inputs, carry: {output name: input name} a streaming caller feeds back)."""
import numpy as np
import onnx
from onnx import helper as h, numpy_helper as nh, TensorProto as TP

OPSET = 17
def _rng(seed: int) -> np.random.Generator: return np.random.default_rng(seed)
def _init(name: str, a) -> onnx.TensorProto: return nh.from_array(np.asarray(a), name)
def _model(nodes, name, inputs, outputs, inits, opset=OPSET) -> onnx.ModelProto:
  m = h.make_model(h.make_graph(nodes, name, inputs, outputs, inits), opset_imports=[h.make_opsetid("", opset)])
  m.ir_version = 8
  onnx.checker.check_model(m, full_check=True)
  return m
def _w(r: np.random.Generator, *shape, scale=None) -> np.ndarray:
  return (r.standard_normal(shape) * (scale if scale is not None else 1 / np.sqrt(shape[0]))).astype(np.float32)

CHUNK, HID, CH = 512, 64, 16
def vad():
  """x [1, 512] (a 32 ms chunk at 16 kHz), state [2, 1, 64] (LSTM h and c), sr int64 scalar -> prob [1, 1], stateN.
  Conv(1->16, k 32, stride 16) + Relu -> If(sr == 16000): then MatMul + Relu, else MatMul + Tanh (both [1, 64], reading
  the outer scope's features) -> LSTM(64) from the state -> MatMul + Sigmoid."""
  r = _rng(0)
  T = (CHUNK - 32) // 16 + 1
  branch = lambda name, w, act: h.make_graph(
    [h.make_node("MatMul", ["feat", w], [name + "_mm"]), h.make_node(act, [name + "_mm"], [name + "_out"])],
    name, [], [h.make_tensor_value_info(name + "_out", TP.FLOAT, [1, HID])])
  nodes = [
    h.make_node("Reshape", ["x", "shape3"], ["x3"]),
    h.make_node("Conv", ["x3", "cw", "cb"], ["c"], kernel_shape=[32], strides=[16]),
    h.make_node("Relu", ["c"], ["cr"]),
    h.make_node("Flatten", ["cr"], ["feat"]),
    h.make_node("Equal", ["sr", "sr16k"], ["is16k"]),
    h.make_node("If", ["is16k"], ["proj"], then_branch=branch("then", "wa", "Relu"), else_branch=branch("else", "wb", "Tanh")),
    h.make_node("Unsqueeze", ["proj", "ax0"], ["seq"]),
    h.make_node("Split", ["state", "split11"], ["h0", "c0"], axis=0),
    h.make_node("LSTM", ["seq", "lw", "lr", "lb", "", "h0", "c0"], ["", "hN", "cN"], hidden_size=HID),
    h.make_node("Concat", ["hN", "cN"], ["stateN"], axis=0),
    h.make_node("Squeeze", ["hN", "ax0"], ["h2"]),
    h.make_node("MatMul", ["h2", "wo"], ["logit"]),
    h.make_node("Sigmoid", ["logit"], ["prob"])]
  inits = [_init("shape3", np.array([1, 1, CHUNK], np.int64)), _init("cw", _w(r, CH, 1, 32, scale=0.2)), _init("cb", _w(r, CH, scale=0.1)),
           _init("sr16k", np.array(16000, np.int64)), _init("wa", _w(r, CH * T, HID)), _init("wb", _w(r, CH * T, HID)),
           _init("ax0", np.array([0], np.int64)), _init("split11", np.array([1, 1], np.int64)),
           _init("lw", _w(r, 1, 4 * HID, HID, scale=0.15)), _init("lr", _w(r, 1, 4 * HID, HID, scale=0.15)),
           _init("lb", _w(r, 1, 8 * HID, scale=0.1)), _init("wo", _w(r, HID, 1))]
  m = _model(nodes, "vad", [h.make_tensor_value_info("x", TP.FLOAT, [1, CHUNK]), h.make_tensor_value_info("state", TP.FLOAT, [2, 1, HID]),
                            h.make_tensor_value_info("sr", TP.INT64, [])],
             [h.make_tensor_value_info("prob", TP.FLOAT, [1, 1]), h.make_tensor_value_info("stateN", TP.FLOAT, [2, 1, HID])], inits)
  audio = _rng(1).standard_normal((64, CHUNK)).astype(np.float32) * 0.3
  def feeds(k: int, sr: int = 16000) -> dict:
    return {"x": audio[k % len(audio)][None], "state": np.zeros((2, 1, HID), np.float32), "sr": np.array(sr, np.int64)}
  return m, feeds, {"stateN": "state"}

def loop(trips: int = 6):
  """x [1, 32], h0 [1, 32] -> hN (h = tanh(h @ W + x), a static trip count of 6 as an initializer), hs [6, 1, 32]."""
  r = _rng(2)
  body = h.make_graph(
    [h.make_node("Identity", ["cond_in"], ["cond_out"]), h.make_node("MatMul", ["h_in", "W"], ["hw"]),
     h.make_node("Add", ["hw", "x"], ["pre"]), h.make_node("Tanh", ["pre"], ["h_out"]), h.make_node("Identity", ["h_out"], ["h_scan"])],
    "body", [h.make_tensor_value_info("i", TP.INT64, []), h.make_tensor_value_info("cond_in", TP.BOOL, []),
             h.make_tensor_value_info("h_in", TP.FLOAT, [1, 32])],
    [h.make_tensor_value_info("cond_out", TP.BOOL, []), h.make_tensor_value_info("h_out", TP.FLOAT, [1, 32]),
     h.make_tensor_value_info("h_scan", TP.FLOAT, [1, 32])])
  nodes = [h.make_node("Loop", ["M", "", "h0"], ["hN", "hs"], body=body)]
  m = _model(nodes, "loop", [h.make_tensor_value_info("x", TP.FLOAT, [1, 32]), h.make_tensor_value_info("h0", TP.FLOAT, [1, 32])],
             [h.make_tensor_value_info("hN", TP.FLOAT, [1, 32]), h.make_tensor_value_info("hs", TP.FLOAT, [trips, 1, 32])],
             [_init("M", np.array(trips, np.int64)), _init("W", _w(r, 32, 32))])
  xs = _rng(3).standard_normal((8, 1, 32)).astype(np.float32)
  return m, lambda k: {"x": xs[k % 8], "h0": np.zeros((1, 32), np.float32)}, {"hN": "h0"}

def scan(T: int = 8):
  """xs [8, 16], s0 [16] -> sN, ys [8, 16] (s = tanh(s @ W + x_t), y_t = s * 2)."""
  r = _rng(4)
  body = h.make_graph(
    [h.make_node("MatMul", ["s_in", "W"], ["sw"]), h.make_node("Add", ["sw", "x_t"], ["pre"]), h.make_node("Tanh", ["pre"], ["s_out"]),
     h.make_node("Mul", ["s_out", "two"], ["y_t"])],
    "body", [h.make_tensor_value_info("s_in", TP.FLOAT, [16]), h.make_tensor_value_info("x_t", TP.FLOAT, [16])],
    [h.make_tensor_value_info("s_out", TP.FLOAT, [16]), h.make_tensor_value_info("y_t", TP.FLOAT, [16])])
  nodes = [h.make_node("Scan", ["s0", "xs"], ["sN", "ys"], body=body, num_scan_inputs=1)]
  m = _model(nodes, "scan", [h.make_tensor_value_info("s0", TP.FLOAT, [16]), h.make_tensor_value_info("xs", TP.FLOAT, [T, 16])],
             [h.make_tensor_value_info("sN", TP.FLOAT, [16]), h.make_tensor_value_info("ys", TP.FLOAT, [T, 16])],
             [_init("W", _w(r, 16, 16)), _init("two", np.array(2, np.float32))])
  xs = _rng(5).standard_normal((4, T, 16)).astype(np.float32)
  return m, lambda k: {"s0": np.zeros(16, np.float32), "xs": xs[k % 4]}, {"sN": "s0"}

def qenc(n: int = 16, d: int = 128, f: int = 256):
  """x [16, 128] float -> DynamicQuantizeLinear -> MatMulInteger(int8 weights [128, 256], per-column zero points) -> acc
  (int32, an output) -> scaled + bias + Relu -> QuantizeLinear(uint8) -> QLinearMatMul(int8 weights [256, 128]) -> q
  (uint8, an output) -> DequantizeLinear -> y: an int8 encoder layer, as onnxruntime's quantizer writes one."""
  r = _rng(6)
  w1 = r.integers(-127, 128, (d, f), dtype=np.int8)
  w2 = r.integers(-127, 128, (f, d), dtype=np.int8)
  nodes = [
    h.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
    h.make_node("MatMulInteger", ["xq", "w1", "xz", "w1z"], ["acc"]),
    h.make_node("Cast", ["acc"], ["accf"], to=TP.FLOAT),
    h.make_node("Mul", ["xs", "w1s"], ["s1"]),
    h.make_node("Mul", ["accf", "s1"], ["y1"]),
    h.make_node("Add", ["y1", "b1"], ["y1b"]),
    h.make_node("Relu", ["y1b"], ["y1r"]),
    h.make_node("QuantizeLinear", ["y1r", "ys", "yz"], ["yq"]),
    h.make_node("QLinearMatMul", ["yq", "ys", "yz", "w2", "w2s", "w2z", "qs", "qz"], ["q"]),
    h.make_node("DequantizeLinear", ["q", "qs", "qz"], ["y"])]
  inits = [_init("w1", w1), _init("w1z", r.integers(-3, 4, f, dtype=np.int8)), _init("w1s", np.float32(0.02)),
           _init("b1", _w(r, f, scale=0.5)), _init("ys", np.float32(0.05)), _init("yz", np.uint8(3)), _init("w2", w2),
           _init("w2s", np.float32(0.01)), _init("w2z", np.int8(0)), _init("qs", np.float32(0.4)), _init("qz", np.uint8(128))]
  m = _model(nodes, "qenc", [h.make_tensor_value_info("x", TP.FLOAT, [n, d])],
             [h.make_tensor_value_info("acc", TP.INT32, [n, f]), h.make_tensor_value_info("q", TP.UINT8, [n, d]),
              h.make_tensor_value_info("y", TP.FLOAT, [n, d])], inits)
  xs = _rng(7).standard_normal((4, n, d)).astype(np.float32)
  return m, lambda k: {"x": xs[k % 4]}, {}

def qdq(n: int = 16, d: int = 128, f: int = 256):
  """x [16, 128] float -> QuantizeLinear/DequantizeLinear (uint8) -> MatMul with DequantizeLinear(int8 weights [128, 256],
  a scale per output column) -> + bias -> Relu -> y: the QDQ form of an int8 layer, as onnxruntime's quantizer writes it."""
  r = _rng(9)
  nodes = [h.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]), h.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"]),
           h.make_node("DequantizeLinear", ["w", "ws"], ["wd"], axis=1), h.make_node("MatMul", ["xd", "wd"], ["mm"]),
           h.make_node("Add", ["mm", "b"], ["yb"]), h.make_node("Relu", ["yb"], ["y"])]
  inits = [_init("xs", np.float32(0.03)), _init("xz", np.uint8(128)), _init("w", r.integers(-127, 128, (d, f), dtype=np.int8)),
           _init("ws", (r.random(f) * 0.01 + 0.005).astype(np.float32)), _init("b", _w(r, f, scale=0.5))]
  m = _model(nodes, "qdq", [h.make_tensor_value_info("x", TP.FLOAT, [n, d])], [h.make_tensor_value_info("y", TP.FLOAT, [n, f])], inits)
  xs = _rng(10).standard_normal((4, n, d)).astype(np.float32)
  return m, lambda k: {"x": xs[k % 4]}, {}

def tiny():
  """a [16], b [16] -> (a + b) * a: a call of a few nanoseconds of arithmetic."""
  nodes = [h.make_node("Add", ["a", "b"], ["s"]), h.make_node("Mul", ["s", "a"], ["y"])]
  m = _model(nodes, "tiny", [h.make_tensor_value_info("a", TP.FLOAT, [16]), h.make_tensor_value_info("b", TP.FLOAT, [16])],
             [h.make_tensor_value_info("y", TP.FLOAT, [16])], [])
  xs = _rng(8).standard_normal((4, 2, 16)).astype(np.float32)
  return m, lambda k: {"a": xs[k % 4, 0], "b": xs[k % 4, 1]}, {}

def detect():
  """A YOLO-style detector's output head: three scales' 1x1 convolutions [1, 255, h, w] (h = 40, 20, 10; 3 anchors of 85
  values) each reshaped, transposed to [1, 3, h, w, 85], sigmoided and flattened to [1, 3hw, 85], the three concatenated
  into out [1, 6300, 85]: a transposing, elementwise output whose parts come from three inputs."""
  r, nodes, inits, ins = _rng(11), [], [], []
  for i, (c, hw) in enumerate(((64, 40), (128, 20), (256, 10))):
    ins.append(h.make_tensor_value_info(f"p{i}", TP.FLOAT, [1, c, hw, hw]))
    inits += [_init(f"w{i}", _w(r, 255, c, 1, 1, scale=0.1)), _init(f"b{i}", _w(r, 255, scale=0.5)),
              _init(f"s{i}", np.array([1, 3, 85, hw, hw], np.int64)), _init(f"f{i}", np.array([1, -1, 85], np.int64))]
    nodes += [h.make_node("Conv", [f"p{i}", f"w{i}", f"b{i}"], [f"c{i}"]), h.make_node("Reshape", [f"c{i}", f"s{i}"], [f"r{i}"]),
              h.make_node("Transpose", [f"r{i}"], [f"t{i}"], perm=[0, 1, 3, 4, 2]), h.make_node("Sigmoid", [f"t{i}"], [f"g{i}"]),
              h.make_node("Reshape", [f"g{i}", f"f{i}"], [f"o{i}"])]
  nodes.append(h.make_node("Concat", ["o0", "o1", "o2"], ["out"], axis=1))
  m = _model(nodes, "detect", ins, [h.make_tensor_value_info("out", TP.FLOAT, [1, 6300, 85])], inits)
  xs = [_rng(12 + i).standard_normal((2, 1, c, hw, hw)).astype(np.float32) for i, (c, hw) in enumerate(((64, 40), (128, 20), (256, 10)))]
  return m, lambda k: {f"p{i}": x[k % 2] for i, x in enumerate(xs)}, {}

MODELS = {"vad": vad, "loop": loop, "scan": scan, "qenc": qenc, "qdq": qdq, "tiny": tiny, "detect": detect}
