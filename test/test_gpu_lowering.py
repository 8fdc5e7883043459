from morok_mlir.core.dtype import dtypes
"""uop-lower-gpu and the PTX pipeline without a GPU: every case runs the real passes (rangeify, kernel split,
uop-lower-gpu, gpu-lower-to-nvvm-pipeline) and checks the launch sizes and the PTX."""
import math, os, re, subprocess, sys
import numpy as np
import pytest
from morok_mlir import Tensor, Variable
from morok_mlir.ir.emit import normalize, graph_func
from morok_mlir.ir.pipeline import lower_to_kernels
from morok_mlir.codegen.lower_gpu import lower_kernel, lower_module, GROUP_MAX, LOCAL_MAX
from morok_mlir.ir.registry import PassError
from morok_mlir.device import Device
from morok_mlir.device.ptx import ptx_for as _ptx_for, ptxas, kernel_names, PTXError, CHIPS
from morok_mlir.device.cuda import chip_for, CUDAError
from morok_mlir.dialects.ops import Ops
from morok_mlir.codegen.emitter import Emitter

def ptx_for(text: str, chip: str = "sm_90") -> str:
  """Every PTX these tests make is also assembled by NVIDIA's ptxas, as the driver would: an error or a spilled
  register fails the test."""
  ptx = _ptx_for(text, chip)
  try: info = ptxas(ptx, chip)
  except PTXError as e:   # a CUDA 13 toolkit's ptxas (on the PATH, without the pinned wheel) has dropped sm_70 and sm_72
    if f"Value '{chip}' is not defined" in str(e) and chip in ("sm_70", "sm_72"): return ptx
    raise
  assert sorted(info) == sorted(kernel_names(ptx)), (chip, info)
  for k, v in info.items(): assert v["spill_stores"] == v["spill_loads"] == 0, (chip, k, v)
  return ptx

def R(*s, dt=np.float32, seed=0): return Tensor(np.random.default_rng(seed).random(s).astype(dt))
def I(*s, hi: int, seed=1): return Tensor(np.random.default_rng(seed).integers(-2, hi, s).astype(np.int32))   # some out of range
def kernels(t: Tensor) -> list:
  """t's kernels as a GPU compiles them: uop-optimize's copies for narrower bounds of symbolic sizes are the CPU's only."""
  return [f for f in lower_to_kernels(graph_func(normalize([t.lazydata])[0])) if "uop.kernel" in f.attrs and "uop.variant_of" not in f.attrs]

CASES = {  # name: (tensor builder, expect a GROUP kernel)
  "elementwise": (lambda: (R(64, 1024) * 2 + 1).exp().sqrt(), False),
  "broadcast": (lambda: R(64, 1024) + R(1024), False),
  "tail": (lambda: R(7, 1000).relu(), False),
  "pad": (lambda: R(33, 65).pad(((1, 1), (2, 2))), False),
  "rowsum": (lambda: R(64, 1024).sum(axis=1), True),
  "fullsum": (lambda: R(1 << 15).sum(), True),                      # one GROUP block (a longer one splits: test_gpu_split_reduce.py)
  "colmax": (lambda: R(1024, 64).max(axis=0), True),
  "mean_int": (lambda: Tensor(np.arange(4096, dtype=np.int32)).sum(), True),
  "f64": (lambda: R(300, 70, dt=np.float64).sum(axis=1), True),
  "i64max": (lambda: Tensor(np.arange(1000, dtype=np.int64)).max(), True),
  "half_sum": (lambda: R(33, 7).half().sum(axis=0), False),        # accumulates in f32 over 33: too short for GROUP
  "bool_any": (lambda: (R(64, 1024) > 0.5).any(axis=1), False),    # 8-bit: no shuffles
  "softmax": (lambda: R(64, 1024).softmax(axis=1), True),          # ROW: a block per row
  "matmul": (lambda: R(256, 256) @ R(256, 256), False),            # 65536 outputs: one thread each, k loop inside
  "small_matmul": (lambda: R(16, 512) @ R(512, 16), True),
  "argmax": (lambda: R(64, 1024).argmax(axis=1), True),
  "int_colsum": (lambda: I(300, 1000, hi=9).sum(axis=0), False),     # rows a serial loop, each output accumulated in place (outer_reduce)
  # scatter: the indexed axis (duplicates) is a loop inside each thread, the other axes are threads
  "scatter_rows": (lambda: R(50, 64, seed=2).scatter(0, I(200, 64, hi=50), R(200, 64), reduce="add"), False),
  "scatter_1d": (lambda: R(100).scatter_reduce(0, I(1000, hi=120), R(1000), "amax"), False),
}

MORE = {  # further cases for the emulated runs
  "where_flip": (lambda: Tensor.where(R(33, 40) > 0.5, R(33, 40).flip(1), 0.25), False),
  "int_div": (lambda: Tensor(np.arange(-500, 500, dtype=np.int32)) // 7 + Tensor(np.arange(-500, 500, dtype=np.int32)) % -3, False),
  "permute_pad": (lambda: R(5, 6, 7).permute(2, 0, 1).pad(((0, 1), (1, 0), (2, 2))) * 3, False),
  "pad_upcast": (lambda: R(30, 60).pad(((1, 1), (2, 2))) + 1, False),   # gated loads in every lane (64 columns)
  "cast_upcast": (lambda: (R(16, 32) * 100).cast(np.int32) // 3, False),
  "colsum_upcast": (lambda: R(8, 64).sum(axis=0), False),             # short reduce: lanes share one loop
  "conv_upcast": (lambda: R(2, 4, 10, 12).conv2d(R(8, 4, 3, 3), padding=1), False),   # three reduce ranges, flattened
  "two_kernels": (lambda: (R(64, 130) - R(64, 130).max(axis=1, keepdim=True)).exp().sum(axis=0), True),
  # a row of each output's own (uop-optimize's reduce_lanes, a CPU choice: the GPU lowers the same graph its own way)
  "matvec_rows": (lambda: (R(1, 512) @ R(100, 512, seed=3).T).relu(), True),
  # the CPU lowering's accurate forms, shared: cos as math.cos, a shifted sine and pow in f64 steps, exp's exact product
  "trig_pow_exp": (lambda: (R(33, 40).cos() + (R(33, 40, seed=3) + 1).sin()) * R(33, 40, seed=4) ** R(33, 40, seed=5) + (R(33, 40) * 3).exp(), False),
}

@pytest.mark.parametrize("chip", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", list(CASES))
def test_ptx(name, chip):
  build, group = CASES[name]
  ks = kernels(build())
  ptx = ptx_for(lower_module(ks + []), chip)
  assert kernel_names(ptx) == [k.name for k in ks]
  for k in ks:
    body = ptx.split(f".entry {k.name}(")[1].split(".entry")[0]
    _, l = lower_kernel(k)
    assert re.search(r"ld\.global", body) and re.search(r"st\.global", body), k.name
    assert f".maxntid {l.local_size[0]}, 1, 1" in body
    # a block of one warp combines by shuffles alone; more warps meet in shared memory after a barrier
    assert ("shfl.sync" in body, ".shared" in body and "bar.sync" in body) == (l.group, l.group and l.local_size[0] > 32), k.name
    if l.upcast > 1 and name in ("elementwise", "broadcast", "matmul"):   # 4 lanes per thread: 16-byte loads and stores
      assert re.search(r"ld\.global(\.nc)?\.v4\.[bf]32", body) and re.search(r"st\.global\.v4\.[bf]32", body), k.name
  assert any(lower_kernel(k)[1].group for k in ks) == group

@pytest.mark.parametrize("name", list(CASES))
def test_launch_sizes(name):
  for k in kernels(CASES[name][0]()):
    text, l = lower_kernel(k)
    outs = [int(m) for m in re.findall(r"memref<(\d+)x", text)[:1]]
    (gx, gy, gz), (lx, ly, lz) = l.global_size, l.local_size
    assert gy == gz == ly == lz == 1 and 1 <= lx <= max(GROUP_MAX, LOCAL_MAX) <= 1024
    ends = [u for u in k.roots[0].toposort if u.op is Ops.END]
    rngs = sorted(ends[0].src[1:], key=lambda r: r.attrs["axis"]) if ends else []
    sizes = [int(r.src[0].attrs["value"]) for r in rngs if r.attrs["kind"] != "serial"]
    n = math.prod(sizes)
    if l.row: assert lx % 32 == 0 and gx == n // sizes[-1] and l.group and l.upcast == 1   # one block per row
    elif l.group: assert lx % 32 == 0 and gx == n and l.upcast == 1   # one block per output
    else: assert gx * lx * l.upcast >= n and (gx - 1) * lx * l.upcast < n and n % l.upcast == 0

@pytest.mark.parametrize("name", list(CASES) + list(MORE))
def test_emulated_on_cpu(name):
  """The GPU lowering's index math, run: gpu.funcs executed on the CPU one thread per loop iteration (GROUP kernels
  with one thread per block), against the CPU backend."""
  from morok_mlir.device.gpu_emulator import emulate
  t = {**CASES, **MORE}[name][0]()
  got, want = emulate([t.lazydata])[0], t.numpy()
  if want.dtype.kind == "f": np.testing.assert_allclose(got, want, rtol=1e-5 if want.dtype != np.float16 else 1e-3, atol=1e-6)  # sums: other order
  else: np.testing.assert_array_equal(got, want)

def _hostile(dt) -> tuple[np.ndarray, np.ndarray]:
  """Operands of a float remainder where a naive x - trunc(x / y) * y goes wrong: quotients of 2^200+ (f64: 2^2000+),
  subnormal divisors, infinities, NaN, signed zeros, y = 0, and random magnitudes over 10 decades."""
  fi, rng = np.finfo(dt), np.random.default_rng(0)
  xs = [5.5, -7.25, fi.max / 3, fi.max, -fi.max, fi.tiny, fi.smallest_subnormal, 0.0, -0.0, np.inf, -np.inf, np.nan, 3.0, 1.0, -1e-3, 1.0]
  ys = [2.0, 3.0, -7.0, fi.smallest_subnormal, 3.3e-3, fi.smallest_subnormal * 3, fi.tiny, 1.0, -2.0, 1.0, 2.0, 1.0, 0.0, np.inf, fi.max, np.nan]
  with np.errstate(over="ignore"):
    r = [(rng.standard_normal(100) * 10.0 ** rng.integers(-5, 5, 100)).astype(dt) for _ in range(2)]
  return np.concatenate([np.array(xs, dt), r[0]]), np.concatenate([np.array(ys, dt), r[1]])

@pytest.mark.parametrize("dt", [np.float16, np.float32, np.float64])
def test_float_remainder_on_gpu(dt):
  """PTX has no float remainder (NVVM refuses llvm.frem): uop-lower-gpu computes C's fmod exactly itself. Its PTX
  assembles, and % and // (built on it) equal the CPU's bit for bit on hostile operands, run by the emulator."""
  from morok_mlir.device.gpu_emulator import emulate
  X, Y = _hostile(dt)
  for f in (lambda a, b: a % b, lambda a, b: a // b):
    t = f(Tensor(X), Tensor(Y))
    for chip in ("sm_80", "sm_90"): ptx_for(lower_module(kernels(t)), chip)
    got, want = emulate([t.lazydata])[0], t.numpy()
    num = ~np.isnan(want)   # (a NaN's sign is the hardware's: x86 makes -NaN)
    np.testing.assert_array_equal(np.isnan(got), ~num)
    np.testing.assert_array_equal(np.signbit(got[num]), np.signbit(want[num]))
    np.testing.assert_array_equal(got, want)

def test_big_outputs_store_plainly_on_gpu():
  """uop-optimize marks a big elementwise output for the CPU's nontemporal vector stores (uop.nontemporal); a GPU
  thread's lanes are not a loop's iterations, so the GPU lowering ignores it. (It wrote 16-wide vector stores at
  offsets 4 apart: overlapping, and a misaligned address on the GPU.)"""
  from morok_mlir.passes.optimize import NT_MIN_BYTES
  from morok_mlir.device.gpu_emulator import emulate
  x = np.random.default_rng(0).standard_normal(NT_MIN_BYTES // 4).astype(np.float32)
  t = Tensor(x) * 2 + 1
  ks = kernels(t)
  assert any("uop.nontemporal" in k.attrs for k in ks)
  text = lower_module(ks)
  assert "nontemporal" not in text and "vector.store" not in text
  np.testing.assert_array_equal(emulate([t.lazydata])[0], x * 2 + 1)

def test_chips():
  ks = kernels(R(64, 1024).sum(axis=1))
  text = lower_module(ks)
  for chip, feat in CHIPS.items():
    ptx = ptx_for(text, chip)
    assert f".target {chip}" in ptx and f".version {feat[4]}.{feat[5:]}" in ptx
  with pytest.raises(ValueError, match="unknown CUDA chip 'sm_100'"): ptx_for(text, "sm_100")
  with pytest.raises(ValueError, match="unknown CUDA chip"): ptx_for(text, "sm_90; rm -rf")
  with pytest.raises(PTXError): ptx_for("module {", "sm_80")
  with pytest.raises(PTXError, match="one gpu.module"): ptx_for("module {}", "sm_80")

def test_chip_for_gpu():
  assert (chip_for(8, 0), chip_for(8, 6), chip_for(8, 9), chip_for(9, 0), chip_for(12, 0)) == ("sm_80", "sm_86", "sm_89", "sm_90", "sm_90")
  with pytest.raises(CUDAError): chip_for(6, 1)

def test_device_renders_without_gpu():
  (k,) = kernels(R(8, 8) + 1)
  ptx = Device["CUDA"].compile_ptx(k, "sm_80")
  assert kernel_names(ptx) == ["kernel"] and ".target sm_80" in ptx and ptxas(ptx, "sm_80")["kernel"]["spill_stores"] == 0

def test_ptxas_rejects_bad_ptx():
  with pytest.raises(PTXError, match="ptxas -arch=sm_90"): ptxas(".version 8.0\n.target sm_90\n.address_size 64\nnot ptx", "sm_90")

def test_define_var_left_in_a_kernel_raises():
  """A kernel reads a symbolic size from the values' buffer (uop-rangeify); a define_var left in it is a PassError."""
  from morok_mlir.ir.bridge import Func
  from morok_mlir.core.uop import UOp, attrs
  n = UOp(Ops.DEFINE_VAR, dtypes.index, (), attrs(max=8, min=1, name="n"))
  r = UOp(Ops.RANGE, dtypes.index, (n,), attrs(axis=0, kind="loop"))
  buf = UOp(Ops.BUFFER, dtypes.float32.ptr(8), (), attrs(slot=0))
  st = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, dtypes.float32.ptr(), (buf, r)), UOp(Ops.CONST, dtypes.float32, (), attrs(value=1.0))))
  f = Func("k", [buf], [], [UOp(Ops.SINK, dtypes.void, (UOp(Ops.END, dtypes.void, (st, r)),))], {"uop.kernel": None})
  with pytest.raises(PassError, match=r"uop-lower-gpu does not support .*\(uop.define_var\)"): lower_kernel(f)

def test_import_needs_no_cuda():
  code = ("import sys, morok_mlir; from morok_mlir.device import Device; d = Device['CUDA']; import morok_mlir.passes\n"
          "assert not [m for m in sys.modules if m == 'cuda' or m.startswith('cuda.')], 'cuda imported'")
  subprocess.run([sys.executable, "-c", code], check=True, env={**os.environ, "DEVICE": "CPU"})

def test_upcast_lanes_share_one_reduce_loop():
  """A one-thread-per-output matmul upcast by 4: the 4 lanes' reduces are one loop with 4 accumulators, A[m, k] is
  loaded once for them, and B's 4 neighbours in one 16-byte load."""
  (k,) = kernels(R(256, 256) @ R(256, 256))
  text, l = lower_kernel(k)
  assert l.upcast == 4 and text.count("scf.for") == 1 and ":4 = scf.for" in text and text.count("memref.load %arg1") == 1

def test_accurate_forms_assemble():
  """cos (math.cos), a shifted sine (f64), pow (f64 log2, product, exp2) and exp (an FMA-exact product) make PTX that
  ptxas assembles."""
  ks = kernels(MORE["trig_pow_exp"][0]())
  ptx = ptx_for(lower_module(ks), "sm_90")
  assert kernel_names(ptx) == [k.name for k in ks]

ROW_REDUCES = {  # name: (builder, a GROUP thread reads 4 neighbours per step: 16-byte loads)
  "rowsum_1024": (lambda: R(64, 1024).sum(axis=1), True),
  "rowmax_1027": (lambda: R(64, 1027).max(axis=1), False),     # rows of 1027 start unaligned: 4 scalar loads a step, then 3
  "rowsum_64": (lambda: R(3, 64).sum(axis=1), True),            # 16 steps of 4: 32 threads, half of them idle
  "rows_of_1": (lambda: R(64, 1).sum(axis=1), None),            # no reduction left: elementwise
  "fullsum_4096": (lambda: R(1, 4096).sum(), True),
  "fullsum_4099": (lambda: R(4099).sum(), True),                # 1024 vectors, then 3 elements one per step
  "fullmax_67": (lambda: R(67).max(), True),                     # 16 vectors and 3
  "two_axes": (lambda: R(5, 7, 64).sum(axis=(1, 2)), True),     # two reduce ranges flattened, the last in groups of 4
  "f64_rows": (lambda: R(9, 256, dt=np.float64).sum(axis=1), True),
  "int_rows": (lambda: Tensor(np.arange(-6000, 6000, dtype=np.int32).reshape(12, 1000)).max(axis=1), True),
}

@pytest.mark.parametrize("name", list(ROW_REDUCES))
def test_group_reduce_vector_loads(name):
  """A GROUP reduce whose last range divides by 4 reads 4 neighbours per step (one 16-byte load for a contiguous row,
  on sm_80 and sm_90, no spills); the emulated kernels match numpy at every shape."""
  from morok_mlir.device.gpu_emulator import emulate
  build, vec = ROW_REDUCES[name]
  t = build()
  ks, got = kernels(t), emulate([t.lazydata])[0]
  want = t.numpy()
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6) if want.dtype.kind == "f" else np.testing.assert_array_equal(got, want)
  assert any(lower_kernel(k)[1].group for k in ks) == (vec is not None)
  for chip in ("sm_80", "sm_90"):
    ptx = _ptx_for(lower_module(ks), chip)
    for k in ks:
      info, (_, l) = ptxas(ptx, chip)[k.name], lower_kernel(k)
      assert info["spill_stores"] == info["spill_loads"] == info["stack"] == 0 and info["registers"] <= 40, (chip, info)
      body = ptx.split(f".entry {k.name}(")[1]
      if l.group:   # (a block of one warp combines by shuffles alone: no shared memory)
        assert bool(re.search(r"ld\.global(\.nc)?\.v[24]\.[bf](32|64)", body)) == vec and (info["smem"] > 0) == (l.local_size[0] > 32), (chip, info)
        assert info["smem"] <= 1024, (chip, info)

GRID_STRIDE = {  # name: builder of an elementwise kernel of more than 2 blocks
  "relu_tail": lambda: R(7, 1000).relu(),                  # 1750 groups of 4: the last pass of the loop is partial
  "odd": lambda: R(3, 1001) * 2 + R(1001),                  # no upcast (1001 is odd): 3003 threads' worth
  "pad": lambda: R(33, 65).pad(((1, 1), (2, 2))) + 1,
  "int_cast": lambda: (R(16, 640) * 100).cast(np.int32) // 3,
  "symbolic_rows": lambda: (R(40, 100)[:Variable("rows_gs", 1, 40).bind(13)] * 2).exp(),   # the loop runs to the value
}

@pytest.mark.parametrize("name", list(GRID_STRIDE))
def test_grid_stride(name, monkeypatch):
  """Past GRID_MAX blocks an elementwise kernel's threads loop over the outputs (a grid-stride scf.for, no guard):
  emulated against numpy, and assembled for sm_80 and sm_90 without spills."""
  from morok_mlir.codegen import lower_gpu
  from morok_mlir.device.gpu_emulator import emulate
  monkeypatch.setattr(lower_gpu, "GRID_MAX", 2)
  t = GRID_STRIDE[name]()
  ks, got = kernels(t), emulate([t.lazydata])[0]
  np.testing.assert_allclose(got, t.numpy(), rtol=1e-5, atol=1e-6)
  last = ks[-1]
  text, l = lower_kernel(last)
  assert l.global_size == (2, 1, 1) and not l.group and "scf.for %i" in text and "arith.cmpi ult" not in text
  for chip in ("sm_80", "sm_90"): ptx_for(lower_module(ks), chip)

@pytest.mark.parametrize("name", ["elementwise", "broadcast", "rowsum", "matmul", "small_matmul", "scatter_rows", "softmax"])
def test_read_only_cache(name):
  """Buffers a kernel only reads are `noalias readonly` kernel parameters, loaded through the read-only cache
  (ld.global.nc, sm_80 and sm_90); a buffer it stores to never is, and a kernel that loads one it stores to (a scatter's
  accumulation) loads it with a plain ld.global."""
  from morok_mlir.device.cpu import stored_slots
  for k in kernels(CASES[name][0]()):
    text, _ = lower_kernel(k)
    head = text.split(") kernel")[0]
    params = re.findall(r"%arg(\d+): memref<[^>]*> \{([^}]*)\}", head)
    assert {int(i) for i, a in params if "llvm.readonly" not in a} == (stored_slots(k) if name != "matmul" else {0, 1, 2}), (k.name, head)
    for chip in ("sm_80", "sm_90"):
      ptx = ptx_for(Emitter.gpu_module([text]), chip)
      assert bool(re.search(r"ld\.global\.nc\.", ptx)) == (name != "matmul"), (k.name, chip)   # (its lanes' accumulators: plain loads)
      if name == "scatter_rows" and k is kernels(CASES[name][0]())[-1]: assert re.search(r"ld\.global\.[bfuv]", ptx), (k.name, chip)

def _softmax(x, axis=-1): return (e := np.exp(x - x.max(axis, keepdims=True))) / e.sum(axis, keepdims=True)
def _layernorm(x, eps=1e-5): return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)
ROWS = {  # name: (input shape, tensor op, numpy op, ROW kernel); rows of every length, a tail, rows of 1
  "softmax_1024": ((64, 1024), lambda t: t.softmax(-1), _softmax, True),
  "softmax_1027": ((5, 1027), lambda t: t.softmax(-1), _softmax, True),
  "softmax_64": ((3, 64), lambda t: t.softmax(-1), _softmax, True),
  "softmax_3d": ((2, 3, 256), lambda t: t.softmax(-1), _softmax, True),
  "softmax_one_row": ((1, 4096), lambda t: t.softmax(-1), _softmax, True),
  "softmax_rows_of_1": ((64, 1), lambda t: t.softmax(-1), _softmax, False),
  "log_softmax": ((7, 300), lambda t: t.log_softmax(-1), lambda x: np.log(_softmax(x)), True),
  "layernorm_768": ((16, 768), lambda t: t.layernorm(), _layernorm, True),
  "layernorm_1001": ((3, 1001), lambda t: t.layernorm(), _layernorm, True),
  "layernorm_f64": ((4, 130), lambda t: t.cast(np.float64).layernorm(), _layernorm, True),
}

@pytest.mark.parametrize("name", list(ROWS))
def test_row_kernels(name):
  """Softmax and layernorm are ONE kernel with a block per row: the row's reduces (max and sum; mean and variance)
  computed once each across the block (warp shuffles, then shared memory and a barrier across warps), then the block's
  threads write the row (4 neighbours a step where 4 divides it: 16-byte stores, and 16-byte loads in every pass over
  the row, softmax's sum of exp(x - max) included). Emulated against numpy at every shape; assembled for sm_80 and
  sm_90 without spills, ptxas's registers and shared memory recorded."""
  from morok_mlir.device.gpu_emulator import emulate
  shape, op, ref, row = ROWS[name]
  x = np.random.default_rng(3).standard_normal(shape).astype(np.float32) * 3
  t = op(Tensor(x))
  ks, got = kernels(t), emulate([t.lazydata])[0]
  np.testing.assert_allclose(got, ref(x.astype(got.dtype)), rtol=2e-5, atol=2e-6)
  if not row: assert not any(lower_kernel(k)[1].row for k in ks); return
  (k,) = ks
  _, l = lower_kernel(k)
  assert l.row and l.global_size[0] == math.prod(shape[:-1]) and l.local_size[0] == min(256, max(32, 1 << (shape[-1] - 1).bit_length()))
  for chip in ("sm_80", "sm_90"):
    ptx = ptx_for(lower_module(ks), chip)
    info = ptxas(ptx, chip)[k.name]
    assert ptx.count("bar.sync") >= 2 and "shfl.sync.bfly" in ptx and re.search(r"ld\.global\.nc", ptx), chip
    assert bool(re.search(r"st\.global\.v[24]\.", ptx)) == (shape[-1] % 4 == 0), chip   # 4 outputs a step: vector stores
    if shape[-1] % 4 == 0 and shape[-1] >= 64:   # every load of the row a vector
      assert not re.search(r"ld\.global(\.nc)?\.[bfu]\d+\s", ptx), (chip, re.findall(r"ld\.global\S*", ptx))
    assert info["registers"] <= 48 and 0 < info["smem"] <= 512, (chip, info)

def _row_mask(t): return (t == t.max(-1, keepdim=True)).where(t, 0.0)   # a row max as a mask of the row
def _onehot_argmax(t): return (t.argmax(-1, keepdim=True) == Tensor.arange(t.shape[-1])).where(1.0, 0.0)   # index values
HELD = {  # name: (shape, dtype, tensor op, held in registers): rows whose share a thread holds (ROW_REGS), ragged ones, longer
  "softmax_1024": ((3, 1024), "float32", lambda t: t.softmax(-1), True),        # one step of 4 neighbours a thread
  "softmax_8192": ((2, 8192), "float32", lambda t: t.softmax(-1), True),        # 8 steps of 4: the 32 registers
  "softmax_16384": ((2, 16384), "float32", lambda t: t.softmax(-1), False),     # 64 values a thread: read per pass
  "softmax_1027": ((3, 1027), "float32", lambda t: t.softmax(-1), True),        # one element a step, the last step partial
  "softmax_4100": ((3, 4100), "float32", lambda t: t.softmax(-1), True),        # 4 full steps of 4, then 1 of 256 threads
  "log_softmax_300": ((5, 300), "float32", lambda t: t.log_softmax(-1), True),
  "layernorm_768": ((4, 768), "float32", lambda t: t.layernorm(), True),        # 192 groups of 4 for 256 threads
  "layernorm_1001": ((3, 1001), "float32", lambda t: t.layernorm(), True),
  "layernorm_f64_4096": ((2, 4096), "float64", lambda t: t.layernorm(), True),  # 16 values of 2 registers
  "layernorm_f64_8192": ((2, 8192), "float64", lambda t: t.layernorm(), False),
  "row_max_mask": ((3, 1000), "float32", _row_mask, True),
  "onehot_argmax": ((3, 1000), "float32", _onehot_argmax, True),                # a reduce of the row's index values
  "f16_layernorm_1024": ((4, 1024), "float16", lambda t: t.layernorm(), True),  # 8 neighbours a step
  "f16_softmax_2000": ((3, 2000), "float16", lambda t: t.softmax(-1), True),    # 250 groups of 8: one partial step
  "bf16_softmax_2048": ((3, 2048), "bfloat16", lambda t: t.softmax(-1), True),
  "f16_softmax_16384": ((2, 16384), "float16", lambda t: t.softmax(-1), False),
}

@pytest.mark.parametrize("name", list(HELD))
def test_row_held_in_registers(name, monkeypatch):
  """A ROW kernel whose thread's share of a static row fits its registers (ROW_REGS) loads it once, with no loop: every
  reduce of the row (softmax's max and sum of exp(x - max), layernorm's mean and variance) and the outputs compute from
  those registers, so the SIMT emulator sees each element of the row loaded once (the row's last neighbours again by the
  threads past its end, clamped); a longer row keeps reading it per pass. Both emulators agree with the CPU backend; the
  PTX assembles for sm_80 and sm_90 without spills or stack."""
  from morok_mlir.device import simt
  from morok_mlir.device.gpu_emulator import emulate
  shape, dt, op, held = HELD[name]
  x = Tensor(np.random.default_rng(3).standard_normal(shape).astype(np.float32) * 3).cast(dt).realize()
  t = op(x)
  ks, want = kernels(t), t.numpy()
  tol = dict(rtol=2e-5, atol=2e-6) if dt in ("float32", "float64") else dict(rtol=2e-2, atol=2e-3)
  f32 = lambda a: np.asarray(a, np.float32)
  np.testing.assert_allclose(f32(emulate([t.lazydata])[0]), f32(want), **tol)
  (k,) = ks
  text, l = lower_kernel(k)
  assert l.row and ("scf.for" not in text) == held, text
  if name == "onehot_argmax": np.testing.assert_array_equal(want.argmax(-1), x.numpy().argmax(-1)); return   # (more inputs)
  xs, seen = x.numpy().reshape(-1), []
  run = simt.RUN["memref.load"]
  def load(kn, o, mask, ins):   # the elements of x each active thread loads
    if isinstance(ins[0], np.ndarray) and np.shares_memory(ins[0], xs): seen.append(ins[1][mask])
    return run(kn, o, mask, ins)
  monkeypatch.setitem(simt.RUN, "memref.load", load)
  out = np.full(want.size, np.nan, want.dtype)
  simt.run(Emitter.gpu_module([text]), [out, xs], l.global_size[0], l.local_size[0])
  np.testing.assert_allclose(f32(out), f32(want).reshape(-1), **tol)
  counts = np.bincount(np.concatenate(seen), minlength=xs.size).reshape(-1, shape[-1])
  if held: assert counts.min() == 1 and counts[:, :-8].max() == 1, np.unique(counts, return_counts=True)
  else: assert counts.min() >= 2   # (max and sum, mean and variance: a pass each)
  for chip in ("sm_80", "sm_90"):
    info = ptxas(ptx_for(lower_module(ks), chip), chip)[k.name]
    assert info["stack"] == 0 and info["registers"] <= 72, (chip, info)   # (the pinned ptxas: 54 for f32 rows of 8192, 60 for f64 of 4096)

def test_row_held_with_symbolic_rows():
  """A symbolic count of static rows holds each row in registers too (blocks past the count's value do nothing); a
  symbolic row length keeps the per-pass loops."""
  from morok_mlir.device.gpu_emulator import emulate
  x = np.random.default_rng(0).standard_normal((40, 256)).astype(np.float32)
  for t, want, held in ((Tensor(x)[:Variable("rows_held", 1, 40).bind(13)].softmax(-1), _softmax(x[:13]), True),
                        (Tensor(x)[:, :Variable("cols_held", 64, 256).bind(100)].softmax(-1), _softmax(x[:, :100]), False)):
    (k,) = kernels(t)
    text, l = lower_kernel(k)
    assert l.row and ("scf.for" not in text) == held, text
    np.testing.assert_allclose(emulate([t.lazydata])[0], want, rtol=2e-5, atol=2e-6)

def test_emulator_runs_every_thread_of_a_block(monkeypatch):
  """A GROUP block is emulated with all its threads, each with its own part of the reduce, combined through a shared
  array: a lowering in which every thread took thread 0's part (right with one thread per block) computes wrong sums."""
  from morok_mlir.codegen.lower_gpu import GPU
  from morok_mlir.device.gpu_emulator import emulate
  t = R(64, 1024).sum(axis=1)
  np.testing.assert_allclose(emulate([t.lazydata])[0], want := t.numpy(), rtol=1e-5)
  part = GPU.partial
  monkeypatch.setattr(GPU, "partial", lambda self, lw, u, dt, b, tid: part(self, lw, u, dt, b, lw.const(0, dtypes.index)))
  assert not np.allclose(emulate([R(64, 1024).sum(axis=1).lazydata])[0], want, rtol=1e-3)

@pytest.mark.parametrize("name", ["rowsum", "fullsum", "colmax", "softmax", "layernorm", "f64"])
def test_block_reductions_run_by_the_simt_emulator(name):
  """GROUP and ROW kernels as the GPU gets them (shuffles in each warp, the warps' values through shared memory after a
  barrier), run thread by thread in lock step by device.simt against numpy; without their barrier, the threads that
  fold the warps' values read what other threads wrote since the last barrier: the emulator raises RaceError."""
  from morok_mlir.device import simt
  x = np.random.default_rng(3).standard_normal((48, 1000) if name != "colmax" else (1000, 48))
  cases = {"rowsum": (lambda t: t.sum(axis=1), lambda a: a.sum(1)), "fullsum": (lambda t: t.sum(), lambda a: a.sum()),
           "colmax": (lambda t: t.max(axis=0), lambda a: a.max(0)), "softmax": (lambda t: t.softmax(axis=1), _softmax),
           "layernorm": (lambda t: t.layernorm(), _layernorm), "f64": (lambda t: t.sum(axis=1), lambda a: a.sum(1))}
  x = x.astype(np.float64 if name == "f64" else np.float32)
  (f,) = kernels(cases[name][0](Tensor(x)))
  text, launch = lower_kernel(f)
  assert launch.group
  src, ref = Emitter.gpu_module([text]), cases[name][1](x)
  out = np.full(ref.size, np.nan, x.dtype)
  simt.run(src, [out, x.reshape(-1)], launch.global_size[0], launch.local_size[0])
  np.testing.assert_allclose(out, ref.reshape(-1), rtol=1e-5, atol=1e-5)
  lines = src.splitlines()
  barriers = [i for i, l in enumerate(lines) if l.strip() == "gpu.barrier"]
  assert barriers
  for i in barriers:
    with pytest.raises(simt.RaceError):
      simt.run("\n".join(lines[:i] + lines[i + 1:]), [out, x.reshape(-1)], launch.global_size[0], launch.local_size[0])

HALVES = {  # name: (builder, a GROUP or ROW kernel); 16-bit buffers: 8 neighbours a thread step, 16 bytes
  "f16_elementwise": (lambda: (R(64, 1024, dt=np.float16) * 2 + R(1024, dt=np.float16)).relu(), False),
  "bf16_elementwise": (lambda: (R(48, 512).cast("bfloat16") * 3).exp(), False),
  "f16_rowsum": (lambda: R(64, 1024, dt=np.float16).sum(axis=1), True),
  "f16_layernorm": (lambda: R(64, 1024, dt=np.float16).layernorm(), True),
}

@pytest.mark.parametrize("name", list(HALVES))
def test_16_bit_elements_move_16_bytes(name):
  """Kernels over f16/bf16 buffers take 8 neighbours a thread step (elementwise) or a reduce step (GROUP, ROW): 16-byte
  loads and stores (ld.global.nc.v4.b32 of 8 halves) on sm_80 and sm_90, not the 8 bytes of 4 halves; emulated against
  the CPU backend."""
  from morok_mlir.device.gpu_emulator import emulate
  build, group = HALVES[name]
  t = build()
  ks = kernels(t)
  for chip in ("sm_80", "sm_90"):
    ptx = ptx_for(lower_module(ks), chip)
    loads = re.findall(r"ld\.global(?:\.nc)?(?:\.v\d)?\.\w+", ptx)
    assert "ld.global.nc.v4.b32" in loads and not any(x.endswith((".v4.b16", ".v2.b16")) for x in loads), (chip, loads)
    if not group: assert "st.global.v4.b32" in ptx, chip
  assert any(lower_kernel(k)[1].group for k in ks) == group
  got, want = emulate([t.lazydata])[0], t.numpy()
  np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32), rtol=2e-2, atol=2e-2)
