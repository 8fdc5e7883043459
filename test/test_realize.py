"""The realize driver: DEBUG output, compile errors at the user's line, trivial outputs."""
import os, subprocess, sys, textwrap
import numpy as np, pytest
from morok_mlir import Tensor
from morok_mlir.realize import realize, new_buffer
from morok_mlir.ir.pipeline import CompileError
from morok_mlir.core.uop import UOp, attrs
from morok_mlir.core.dtype import dtypes
from morok_mlir.dialects.ops import Ops

def run_script(src: str, **env) -> subprocess.CompletedProcess:
  return subprocess.run([sys.executable, "-c", textwrap.dedent(src)], capture_output=True, text=True, timeout=120,
                        env={**os.environ, **{k: str(v) for k, v in env.items()}})

SCRIPT = """
  import numpy as np
  from morok_mlir import Tensor
  a = Tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
  print((a - a.max(axis=0, keepdim=True)).numpy().tolist())
"""

def test_debug2_prints_kernel_names_and_times():
  p = run_script(SCRIPT, DEBUG=2)
  assert p.returncode == 0, p.stderr
  lines = [l for l in p.stdout.splitlines() if " us" in l]
  assert len(lines) == 2 and lines[0].split()[0].startswith("r_") and lines[1].split()[0].startswith("E_")
  assert "[[-3.0, -3.0, -3.0], [0.0, 0.0, 0.0]]" in p.stdout

def test_debug4_prints_ir_after_each_pass():
  p = run_script(SCRIPT, DEBUG=4)
  assert p.returncode == 0, p.stderr
  assert "// ----- after uop-rangeify" in p.stdout and "// ----- after uop-kernel-split" in p.stdout
  assert '"uop.bufferize"' in p.stdout and "@schedule" in p.stdout

def test_compile_error_names_user_line():
  x = new_buffer(np.zeros(4, np.int32))
  bad = UOp(Ops.THREEFRY, dtypes.int32, (x, x), loc="my_model.py:42:7")
  with pytest.raises(CompileError, match=r"my_model\.py:42:7.*threefry"):
    realize([bad])

def test_trivial_outputs_need_no_kernel():
  from morok_mlir.realize import GlobalCounters
  GlobalCounters.reset()
  e, b = Tensor(np.zeros((0, 3), np.float32)), Tensor(np.arange(3))
  assert e.numpy().shape == (0, 3) and b.numpy().tolist() == [0, 1, 2]
  assert GlobalCounters.kernel_count == 0

def test_allocator_blocks_live_as_long_as_their_arrays():
  from morok_mlir.device import Device
  alloc = Device["CPU"].allocator
  x, y = alloc.alloc(3, "float32"), alloc.alloc(3, "float32")
  assert x.ctypes.data != y.ctypes.data
  v = x.reshape(1, 3); del x
  z = alloc.alloc(3, "float32")
  assert z.ctypes.data != v.ctypes.data  # a view keeps the block in use

def test_reduce_of_value_with_reduce_uses_distinct_temporaries():
  x = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
  m = Tensor(x) + Tensor(x).sum(0, keepdim=True)
  rm = x + x.sum(0, keepdims=True)
  np.testing.assert_allclose((m + m.sum(0, keepdim=True)).numpy(), rm + rm.sum(0, keepdims=True))

def test_devices_on_tensors():
  from morok_mlir import Device
  a = Tensor([1.0, 2.0])
  assert a.device == Device.DEFAULT == "CPU" and (a + 1).device == "CPU" and a.to("cpu:0") is a
  with pytest.raises(ValueError, match=r"test_realize\.py:\d+.*unknown device"):
    a.to("TPU")
  from morok_mlir.device.cuda import available
  if not available()[0]:
    with pytest.raises(RuntimeError, match=r"test_realize\.py:\d+.*'CUDA' is not available"): a.to("CUDA")
  else:
    c = a.to("CUDA")
    assert c.device == "CUDA" and c.uop.op is Ops.COPY and (c * 2).device == "CUDA"
    with pytest.raises(RuntimeError, match=r"test_realize\.py:\d+.*one device"):
      a + c
