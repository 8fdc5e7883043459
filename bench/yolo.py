"""A YOLOv5n-style detector at 320x320 (Conv+BN+SiLU blocks, C3 bottlenecks, SPPF, an FPN/PAN neck with nearest
upsampling and concats, a three-scale head of sigmoids over transposed outputs, 6300 x 85 boxes), built in torch with
seeded random weights, exported to ONNX and run by morok-mlir (OnnxModel) and onnxruntime on 2 threads, alternating.

  python bench/yolo.py [rounds]      needs torch (the model's definition) and onnxruntime: pip install -e '.[bench]'

Prints the first call's time (interpretation and compile with the disk cache as it is), the largest difference from
onnxruntime's output, and per round the minimum and median ms of 30 calls of each."""
import os, sys, tempfile, time, statistics
os.environ.setdefault("MOROK_THREADS", "2")
import numpy as np
try:
  import torch, torch.nn as nn, onnx, onnxruntime as ort
except ImportError as e: sys.exit(f"bench/yolo.py needs torch, onnx and onnxruntime ({e.name} is missing): pip install -e '.[bench]'")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from morok_mlir.onnx import OnnxModel

class Conv(nn.Module):
  def __init__(s, c1, c2, k=1, st=1, p=None):
    super().__init__(); s.c, s.bn, s.a = nn.Conv2d(c1, c2, k, st, k // 2 if p is None else p, bias=False), nn.BatchNorm2d(c2), nn.SiLU()
  def forward(s, x): return s.a(s.bn(s.c(x)))
class Bottleneck(nn.Module):
  def __init__(s, c, shortcut=True): super().__init__(); s.c1, s.c2, s.add = Conv(c, c, 1), Conv(c, c, 3), shortcut
  def forward(s, x): return x + s.c2(s.c1(x)) if s.add else s.c2(s.c1(x))
class C3(nn.Module):
  def __init__(s, c1, c2, n=1, shortcut=True):
    super().__init__(); h = c2 // 2
    s.cv1, s.cv2, s.cv3, s.m = Conv(c1, h), Conv(c1, h), Conv(2 * h, c2), nn.Sequential(*[Bottleneck(h, shortcut) for _ in range(n)])
  def forward(s, x): return s.cv3(torch.cat([s.m(s.cv1(x)), s.cv2(x)], 1))
class SPPF(nn.Module):
  def __init__(s, c1, c2): super().__init__(); h = c1 // 2; s.cv1, s.cv2, s.m = Conv(c1, h), Conv(4 * h, c2), nn.MaxPool2d(5, 1, 2)
  def forward(s, x):
    x = s.cv1(x); y1 = s.m(x); y2 = s.m(y1); return s.cv2(torch.cat([x, y1, y2, s.m(y2)], 1))
class YoloN(nn.Module):
  def __init__(s, nc=80):
    super().__init__()
    s.backbone = nn.ModuleList([Conv(3, 16, 6, 2, 2), Conv(16, 32, 3, 2), C3(32, 32, 1), Conv(32, 64, 3, 2), C3(64, 64, 2),
                                Conv(64, 128, 3, 2), C3(128, 128, 3), Conv(128, 256, 3, 2), C3(256, 256, 1), SPPF(256, 256)])
    s.h10, s.h13, s.h14, s.h17 = Conv(256, 128), C3(256, 128, 1, False), Conv(128, 64), C3(128, 64, 1, False)
    s.h18, s.h20, s.h21, s.h23 = Conv(64, 64, 3, 2), C3(128, 128, 1, False), Conv(128, 128, 3, 2), C3(256, 256, 1, False)
    s.up, s.det = nn.Upsample(scale_factor=2, mode="nearest"), nn.ModuleList(nn.Conv2d(c, 3 * (nc + 5), 1) for c in (64, 128, 256))
  def forward(s, x):
    feats = []
    for i, b in enumerate(s.backbone):
      x = b(x)
      if i in (4, 6): feats.append(x)
    p3, p4 = feats
    h10 = s.h10(x); x = s.h13(torch.cat([s.up(h10), p4], 1))
    h14 = s.h14(x); o3 = s.h17(torch.cat([s.up(h14), p3], 1))
    o4 = s.h20(torch.cat([s.h18(o3), h14], 1))
    o5 = s.h23(torch.cat([s.h21(o4), h10], 1))
    outs = []
    for o, d in zip((o3, o4, o5), s.det):
      y = d(o); b, c, hh, ww = y.shape
      outs.append(y.view(b, 3, c // 3, hh, ww).permute(0, 1, 3, 4, 2).sigmoid().reshape(b, -1, c // 3))
    return torch.cat(outs, 1)

def export(path: str) -> None:
  torch.manual_seed(0)
  m = YoloN().eval()
  for mod in m.modules():
    if isinstance(mod, nn.BatchNorm2d): mod.running_mean.normal_(0, 0.1); mod.running_var.uniform_(0.5, 1.5)
  torch.onnx.export(m, (torch.randn(1, 3, 320, 320),), path, opset_version=17, input_names=["images"], output_names=["out"], dynamo=False)

def main(rounds: int) -> None:
  with tempfile.TemporaryDirectory() as d:
    export(path := os.path.join(d, "yolon.onnx"))
    model = onnx.load(path)
  x = {"images": np.random.default_rng(0).standard_normal((1, 3, 320, 320)).astype(np.float32)}
  o = ort.SessionOptions(); o.intra_op_num_threads, o.inter_op_num_threads = int(os.environ["MOROK_THREADS"]), 1
  sess = ort.InferenceSession(model.SerializeToString(), o, providers=["CPUExecutionProvider"])
  want = sess.run(None, x)[0]
  t0 = time.perf_counter(); m = OnnxModel(model); got = m(x)["out"]; first = time.perf_counter() - t0
  print(f"YOLOv5n-style detector 320x320, {os.environ['MOROK_THREADS']} threads, onnxruntime {ort.__version__}: first call {first:.2f} s, "
        f"largest difference from onnxruntime {np.abs(got - want).max():.1e} (outputs in [0, 1])")
  def timed(f, n=30):
    for _ in range(3): f()
    ts = []
    for _ in range(n): t0 = time.perf_counter(); f(); ts.append(time.perf_counter() - t0)
    return min(ts) * 1e3, statistics.median(ts) * 1e3
  for r in range(rounds):
    (mm, md), (om, od) = timed(lambda: m(x, as_numpy=False)), timed(lambda: sess.run(None, x))
    print(f"round {r}: morok min {mm:.2f} median {md:.2f} ms, onnxruntime min {om:.2f} median {od:.2f} ms, x ort {om / mm:.2f}")

if __name__ == "__main__": main(int(sys.argv[1]) if len(sys.argv) > 1 else 3)
