"""The CPU back end: uop-lower-cpu + the JIT, checked against numpy on hand-written kernels and on edge values of
every ALU op x dtype (many ops per kernel: each JIT costs tens of ms)."""
import itertools, math, os
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from mlir import ir
from morok_mlir.ir.bridge import Func, import_module
from morok_mlir.dialects import new_context
from morok_mlir.core.dtype import dtypes, DType
from morok_mlir.core.uop import UOp, attrs
from morok_mlir.ir.bridge import arg_buffer
from morok_mlir.device import Device, _Device
from morok_mlir.device.cpu import CPU, compile_module
from morok_mlir.passes import PassError
from morok_mlir.codegen.lower_cpu import lower_kernel
from morok_mlir.dialects.ops import Ops

def parse(text: str) -> dict[str, Func]:
  with new_context(): return {f.name: f for f in import_module(ir.Module.parse(text))}

# ---------------------------------------------------------------- hand-written kernel-level IR
BROADCAST = """
func.func private @k(%arg0: memref<12xf32>, %arg1: memref<12xf32>, %arg2: memref<4xf32>, %arg3: memref<3xf32>) attributes {uop.kernel} {
  %n = "uop.const"() {value = 12 : index} : () -> index
  %c4 = "uop.const"() {value = 4 : index} : () -> index
  %r = "uop.range"(%n) {axis = 0 : i64, kind = "loop"} : (index) -> index
  %row = "uop.idiv"(%r, %c4) : (index, index) -> index
  %col = "uop.mod"(%r, %c4) : (index, index) -> index
  %pa = "uop.index"(%arg1, %r) : (memref<12xf32>, index) -> !uop.ptr<f32>
  %pb = "uop.index"(%arg2, %col) : (memref<4xf32>, index) -> !uop.ptr<f32>
  %pc = "uop.index"(%arg3, %row) : (memref<3xf32>, index) -> !uop.ptr<f32>
  %a = "uop.load"(%pa) : (!uop.ptr<f32>) -> f32
  %b = "uop.load"(%pb) : (!uop.ptr<f32>) -> f32
  %c = "uop.load"(%pc) : (!uop.ptr<f32>) -> f32
  %m = "uop.mulacc"(%a, %b, %c) : (f32, f32, f32) -> f32
  %po = "uop.index"(%arg0, %r) : (memref<12xf32>, index) -> !uop.ptr<f32>
  %s = "uop.store"(%po, %m) : (!uop.ptr<f32>, f32) -> !uop.token
  %e = "uop.end"(%s, %r) : (!uop.token, index) -> !uop.token
  "uop.sink"(%e) : (!uop.token) -> ()
  return
}"""

def test_elementwise_broadcast():
  p = CPU.compile(parse(BROADCAST)["k"])
  a, b, c = (np.random.default_rng(0).standard_normal(n).astype(np.float32) for n in (12, 4, 3))
  out = np.full(12, np.nan, np.float32)
  p(out, a, b, c)
  np.testing.assert_allclose(out.reshape(3, 4), a.reshape(3, 4) * b[None, :] + c[:, None], rtol=1e-6)

def test_lanes_store_steps_two_elements_a_lane():
  """uop.lanes on a store two elements apart a lane (out[2i] = 2 in[i], 60 outputs: the last of 8 lane groups partial):
  the lanes spread over twice their width, the elements between, and those past the end, left unwritten."""
  text = open(os.path.join(os.path.dirname(__file__), "lit", "uop-lower-cpu", "lanes-strided-store.mlir")).read()
  f = parse(text.replace("%c64 = \"uop.const\"() {value = 64", "%c64 = \"uop.const\"() {value = 60"))["spread"]
  x, out = np.arange(64, dtype=np.float32), np.full(128, np.nan, np.float32)
  CPU.compile(f)(out, x)
  np.testing.assert_array_equal(out[0:120:2], 2 * x[:60])
  assert np.isnan(out[1::2]).all() and np.isnan(out[120:]).all()

def test_lanes_load_one_element_every_two_lanes():
  """uop.lanes on out[i] = 2 in[i // 2] (a nearest upsample along the lanes), 60 outputs: each element read once per two
  lanes, the last group partial; the outputs past 60 left unwritten."""
  text = open(os.path.join(os.path.dirname(__file__), "lit", "uop-lower-cpu", "lanes-upsample.mlir")).read()
  x = np.arange(32, dtype=np.float32)
  for name, n in (("upsample", 64), ("upsample_tail", 60)):
    out = np.full(64, np.nan, np.float32)
    CPU.compile(parse(text)[name])(out, x)
    np.testing.assert_array_equal(out[:n], 2 * np.repeat(x, 2)[:n])
    assert np.isnan(out[n:]).all()

# out[i] = sum_j a[i, j] and max_j a[i, j] of a 3x5 int32 matrix, two reduces over one range in one loop nest
REDUCE = """
func.func private @k(%arg0: memref<3xi32>, %arg1: memref<3xi32>, %arg2: memref<15xi32>) attributes {uop.kernel} {
  %c3 = "uop.const"() {value = 3 : index} : () -> index
  %c5 = "uop.const"() {value = 5 : index} : () -> index
  %i = "uop.range"(%c3) {axis = 0 : i64, kind = "loop"} : (index) -> index
  %j = "uop.range"(%c5) {axis = 1 : i64, kind = "reduce"} : (index) -> index
  %row = "uop.mul"(%i, %c5) : (index, index) -> index
  %x = "uop.add"(%row, %j) : (index, index) -> index
  %p = "uop.index"(%arg2, %x) : (memref<15xi32>, index) -> !uop.ptr<i32>
  %v = "uop.load"(%p) : (!uop.ptr<i32>) -> i32
  %s = "uop.reduce"(%v, %j) {op = "add"} : (i32, index) -> i32
  %m = "uop.reduce"(%v, %j) {op = "max"} : (i32, index) -> i32
  %q0 = "uop.index"(%arg0, %i) : (memref<3xi32>, index) -> !uop.ptr<i32>
  %q1 = "uop.index"(%arg1, %i) : (memref<3xi32>, index) -> !uop.ptr<i32>
  %s0 = "uop.store"(%q0, %s) : (!uop.ptr<i32>, i32) -> !uop.token
  %s1 = "uop.store"(%q1, %m) : (!uop.ptr<i32>, i32) -> !uop.token
  %e0 = "uop.end"(%s0, %i) : (!uop.token, index) -> !uop.token
  %e1 = "uop.end"(%s1, %i) : (!uop.token, index) -> !uop.token
  "uop.sink"(%e0, %e1) : (!uop.token, !uop.token) -> ()
  return
}"""

def test_reduce_sum_and_max():
  p = CPU.compile(parse(REDUCE)["k"])
  a = np.random.default_rng(1).integers(-2**31, 2**31 - 1, 15, dtype=np.int32)
  a[5:10] = -7  # a row of negatives: max's identity must be INT_MIN, not 0
  s, m = np.zeros(3, np.int32), np.zeros(3, np.int32)
  p(s, m, a)
  np.testing.assert_array_equal(s, a.reshape(3, 5).sum(1, dtype=np.int32))  # wraps like int32
  np.testing.assert_array_equal(m, a.reshape(3, 5).max(1))

# out = pad(a, (2, 3)) for a 4-element buffer: addresses -2..6 outside the gate must never be read
PAD = """
func.func private @k(%arg0: memref<9xf64>, %arg1: memref<4xf64>) attributes {uop.kernel} {
  %c9 = "uop.const"() {value = 9 : index} : () -> index
  %c2 = "uop.const"() {value = 2 : index} : () -> index
  %c4 = "uop.const"() {value = 4 : index} : () -> index
  %i = "uop.range"(%c9) {axis = 0 : i64, kind = "loop"} : (index) -> index
  %x = "uop.sub"(%i, %c2) : (index, index) -> index
  %c0 = "uop.const"() {value = 0 : index} : () -> index
  %lt0 = "uop.cmplt"(%x, %c0) : (index, index) -> i1
  %ge0 = "uop.neg"(%lt0) : (i1) -> i1
  %lt4 = "uop.cmplt"(%x, %c4) : (index, index) -> i1
  %g = "uop.and"(%ge0, %lt4) : (i1, i1) -> i1
  %p = "uop.index"(%arg1, %x, %g) : (memref<4xf64>, index, i1) -> !uop.ptr<f64>
  %v = "uop.load"(%p) : (!uop.ptr<f64>) -> f64
  %q = "uop.index"(%arg0, %i) : (memref<9xf64>, index) -> !uop.ptr<f64>
  %s = "uop.store"(%q, %v) : (!uop.ptr<f64>, f64) -> !uop.token
  %e = "uop.end"(%s, %i) : (!uop.token, index) -> !uop.token
  "uop.sink"(%e) : (!uop.token) -> ()
  return
}"""

def test_gated_load_pads_with_zero():
  p = CPU.compile(parse(PAD)["k"])
  a, out = np.array([1.5, -2.0, np.inf, 4.0]), np.full(9, np.nan)
  p(out, a)
  np.testing.assert_array_equal(out, np.pad(a, (2, 3)))
  assert "arith.select" in lower_kernel(parse(PAD)["k"])

# k0: t = a * 2 (over 6), k1: out[i] = sum(t) + a[i]; the schedule runs k0 before k1
SCHEDULE = """
module {
func.func private @k0(%arg0: memref<6xf32>, %arg1: memref<6xf32>) attributes {uop.kernel} {
  %c6 = "uop.const"() {value = 6 : index} : () -> index
  %two = "uop.const"() {value = 2.0 : f32} : () -> f32
  %i = "uop.range"(%c6) {axis = 0 : i64, kind = "loop"} : (index) -> index
  %p = "uop.index"(%arg1, %i) : (memref<6xf32>, index) -> !uop.ptr<f32>
  %v = "uop.load"(%p) : (!uop.ptr<f32>) -> f32
  %m = "uop.mul"(%v, %two) : (f32, f32) -> f32
  %q = "uop.index"(%arg0, %i) : (memref<6xf32>, index) -> !uop.ptr<f32>
  %s = "uop.store"(%q, %m) : (!uop.ptr<f32>, f32) -> !uop.token
  %e = "uop.end"(%s, %i) : (!uop.token, index) -> !uop.token
  "uop.sink"(%e) : (!uop.token) -> ()
  return
}
func.func private @k1(%arg0: memref<6xf32>, %arg1: memref<6xf32>, %arg2: memref<6xf32>) attributes {uop.kernel} {
  %c6 = "uop.const"() {value = 6 : index} : () -> index
  %i = "uop.range"(%c6) {axis = 0 : i64, kind = "loop"} : (index) -> index
  %j = "uop.range"(%c6) {axis = 1 : i64, kind = "reduce"} : (index) -> index
  %pt = "uop.index"(%arg1, %j) : (memref<6xf32>, index) -> !uop.ptr<f32>
  %t = "uop.load"(%pt) : (!uop.ptr<f32>) -> f32
  %sum = "uop.reduce"(%t, %j) {op = "add"} : (f32, index) -> f32
  %pa = "uop.index"(%arg2, %i) : (memref<6xf32>, index) -> !uop.ptr<f32>
  %a = "uop.load"(%pa) : (!uop.ptr<f32>) -> f32
  %r = "uop.add"(%sum, %a) : (f32, f32) -> f32
  %q = "uop.index"(%arg0, %i) : (memref<6xf32>, index) -> !uop.ptr<f32>
  %s = "uop.store"(%q, %r) : (!uop.ptr<f32>, f32) -> !uop.token
  %e = "uop.end"(%s, %i) : (!uop.token, index) -> !uop.token
  "uop.sink"(%e) : (!uop.token) -> ()
  return
}
func.func @schedule(%arg0: memref<6xf32>, %arg1: memref<6xf32>, %arg2: memref<6xf32>)
    attributes {uop.schedule, uop.num_inputs = 1 : i64, uop.num_outputs = 1 : i64} {
  %0 = "uop.kernel"() {callee = @k0, slots = array<i64: 2, 0>} : () -> !uop.token
  %1 = "uop.kernel"(%0) {callee = @k1, slots = array<i64: 1, 2, 0>} : (!uop.token) -> !uop.token
  "uop.sink"(%1) : (!uop.token) -> ()
  return
}
}"""

def test_two_kernel_schedule():
  funcs = parse(SCHEDULE)
  a = np.arange(6, dtype=np.float32)
  want = (a * 2).sum() + a
  out, tmp = np.zeros(6, np.float32), np.zeros(6, np.float32)
  compile_module(list(funcs.values()))(a, out, tmp)  # the lowered @schedule calls both kernels
  np.testing.assert_array_equal(out, want)
  out2, tmp2 = np.zeros(6, np.float32), np.zeros(6, np.float32)  # and kernel by kernel, as the realize driver does
  bufs = [a, out2, tmp2]
  for k in funcs["schedule"].roots[0].src[0].toposort:
    if k.op is Ops.KERNEL: CPU.compile(funcs[k.attrs["callee"][1]])(*[bufs[s] for s in k.attrs["slots"]])
  np.testing.assert_array_equal(out2, want)

# ---------------------------------------------------------------- kernels built from UOps
IDX = dtypes.index
def const(v, dt: DType = IDX): return UOp(Ops.CONST, dt, (), attrs(value=v))
def alu(op, *src):
  dt = dtypes.bool if op in ("cmplt", "cmpne", "cmpeq") else src[1].dtype if op == "where" else src[0].dtype
  return UOp(Ops(op), dt, src)

def elementwise(n: int, in_dts: list[DType], body) -> Func:
  """A kernel over one loop of n: inputs are slots 0..k-1, then one output per value body(loads) returns."""
  r = UOp(Ops.RANGE, IDX, (const(n),), attrs(axis=0, kind="loop"))
  ins = [arg_buffer(i, dt.ptr(n)) for i, dt in enumerate(in_dts)]
  loads = [UOp(Ops.LOAD, dt, (UOp(Ops.INDEX, dt.ptr(), (b, r)),)) for b, dt in zip(ins, in_dts)]
  vals = body(*loads)
  ends, outs = [], []
  for k, v in enumerate(vals):
    out = arg_buffer(len(ins) + k, v.dtype.ptr(n))
    outs.append(out)
    ends.append(UOp(Ops.END, dtypes.void, (UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, v.dtype.ptr(), (out, r)), v)), r)))
  return Func("k", ins + outs, [], [UOp(Ops.SINK, dtypes.void, tuple(ends))], {"uop.kernel": None})

def run(f: Func, *inputs):
  outs = [np.zeros(len(inputs[0]), t.dtype.base.np) for t in f.args[len(inputs):]]
  CPU.compile(f)(*inputs, *outs)
  return outs

def edge_values(dt: DType) -> list:
  if dt.is_bool: return [False, True]
  if dt.is_float: return [0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0, 7.25, 1e30, -1e-30, math.inf, -math.inf, math.nan]
  lo, hi = dt.min, dt.max
  vals = [0, 1, 2, 3, 7, hi, hi - 1, hi // 2, hi // 2 + 1] + ([-1, -2, -3, -7, lo, lo + 1] if lo else [])
  return sorted(set(vals))

def wrap(x: int, dt: DType) -> int:
  if dt.is_bool: return bool(x)
  m = 1 << dt.bits
  x %= m
  return x - m if not dt.is_unsigned and x >= m >> 1 else x

def tdiv(a, b): return 0 if b == 0 else abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
def tmod(a, b): return 0 if b == 0 else a - b * tdiv(a, b)

INT_REF = {"idiv": tdiv, "mod": tmod}
BINARY = ["add", "sub", "mul", "idiv", "fdiv", "mod", "pow", "max", "min", "and", "or", "xor", "cmplt", "cmpne", "cmpeq"]
UNARY = ["neg", "exp2", "log2", "sin", "sqrt", "recip", "trunc"]
NP_REF = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "fdiv": np.divide, "mod": np.fmod, "pow": np.power,
          "max": np.maximum, "min": np.minimum, "and": np.bitwise_and, "or": np.bitwise_or, "xor": np.bitwise_xor,
          "cmplt": np.less, "cmpne": np.not_equal, "cmpeq": np.equal, "neg": np.negative, "exp2": np.exp2, "log2": np.log2,
          "sin": np.sin, "sqrt": np.sqrt, "recip": np.reciprocal, "trunc": np.trunc}
BOOL_REF = {"add": np.logical_or, "sub": np.logical_xor, "mul": np.logical_and, "max": np.logical_or, "min": np.logical_and,
            "and": np.logical_and, "or": np.logical_or, "xor": np.logical_xor, "neg": np.logical_not, "trunc": lambda a: a,
            "cmplt": np.less, "cmpne": np.not_equal, "cmpeq": np.equal, "mulacc": lambda a, b, c: (a & b) | c}

def supported(op: str, dt: DType) -> bool:
  if dt.is_bool: return op in BOOL_REF or op in ("where", "mulacc")
  if dt.is_float: return op not in ("and", "or", "xor", "idiv", "shl", "shr")
  return op not in ("fdiv", "pow", "exp2", "log2", "sin", "sqrt", "recip")

def reference(op: str, dt: DType, *args: np.ndarray) -> np.ndarray:
  with np.errstate(all="ignore"): return _reference(op, dt, *args)
def _reference(op: str, dt: DType, *args: np.ndarray) -> np.ndarray:
  if dt.is_bool: return BOOL_REF[op](*args)
  if dt.is_int and op in ("add", "sub", "mul", "neg", "idiv", "mod", "mulacc"):  # exact integers, then wrap
    py = [[int(x) for x in a] for a in args]
    f = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b, "neg": lambda a: -a,
         "mulacc": lambda a, b, c: a * b + c, **INT_REF}[op]
    return np.array([wrap(f(*xs), dt) for xs in zip(*py)], dt.np)
  if op == "mulacc": return (args[0].astype(np.float64) * args[1] + args[2]).astype(dt.np) if dt.itemsize < 8 else args[0] * args[1] + args[2]
  if op == "trunc" and dt.is_int: return args[0]
  return NP_REF[op](*args)

def check(got: np.ndarray, want: np.ndarray, op: str, dt: DType, ctx):
  want = np.asarray(want)
  if want.dtype == np.bool_ or dt.is_int or dt.is_bool: np.testing.assert_array_equal(got, want, err_msg=str(ctx)); return
  inexact = op in ("exp2", "log2", "sin", "pow", "mulacc")
  tol = {1: 0.25, 2: 1e-3, 4: 2e-6, 8: 1e-13}[dt.itemsize] if inexact else 0   # (fp8: one step of e5m2's 2 mantissa bits)
  np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 1e-3, equal_nan=True, err_msg=str(ctx))
  if op not in ("max", "min") and not inexact:  # -0.0 must stay -0.0 (max/min may pick either zero of equal ones)
    ok = np.isnan(want) | (np.signbit(got) == np.signbit(want))
    assert ok.all(), (ctx, got[~ok], want[~ok])

@pytest.mark.parametrize("dt", dtypes.all, ids=lambda d: d.name)
def test_alu_differential(dt: DType):
  """Every binary, unary and ternary op supported on dt, over all pairs of edge values, in one kernel."""
  vals = edge_values(dt)
  pairs = list(itertools.product(vals, vals))
  with np.errstate(over="ignore"): a, b = np.array([p[0] for p in pairs], dt.np), np.array([p[1] for p in pairs], dt.np)
  c = np.roll(a, 1)
  bins, uns = [op for op in BINARY if supported(op, dt)], [op for op in UNARY if supported(op, dt)]
  f = elementwise(len(a), [dt] * 3, lambda x, y, z: [alu(op, x, y) for op in bins] + [alu(op, x) for op in uns]
                  + [alu("where", alu("cmplt", x, y), x, y), alu("mulacc", x, y, z)])
  outs = run(f, a, b, c)
  for op, got in zip(bins, outs): check(got, reference(op, dt, a, b), op, dt, (op, dt, a, b))
  for op, got in zip(uns, outs[len(bins):]): check(got, reference(op, dt, a), op, dt, (op, dt, a))
  check(outs[-2], np.where(a < b, a, b), "where", dt, ("where", dt))
  check(outs[-1], reference("mulacc", dt, a, b, c), "mulacc", dt, ("mulacc", dt, a, b, c))

@pytest.mark.parametrize("dt", dtypes.ints, ids=lambda d: d.name)
def test_shifts(dt: DType):
  vals = edge_values(dt)
  pairs = list(itertools.product(vals, range(dt.bits)))  # amounts >= bits are undefined, as in C
  a, b = np.array([p[0] for p in pairs], dt.np), np.array([p[1] for p in pairs], dt.np)
  shl, shr = run(elementwise(len(a), [dt, dt], lambda x, y: [alu("shl", x, y), alu("shr", x, y)]), a, b)
  np.testing.assert_array_equal(shl, np.left_shift(a, b))
  np.testing.assert_array_equal(shr, np.right_shift(a, b))  # arithmetic for signed, logical for unsigned

def _cmp(x: np.ndarray) -> np.ndarray:
  """numpy's array comparisons see NaN only in its own float kinds: ml_dtypes' bfloat16 and fp8 are compared as float64."""
  return x.astype(np.float64) if x.dtype in (dtypes.bfloat16.npdt, dtypes.fp8e4m3.npdt, dtypes.fp8e5m2.npdt) else x

def cast_values(src: DType) -> list:
  """Values whose conversion to every dtype is defined (float->int truncates toward zero; out of range is undefined)."""
  if src.is_float: return [0.0, -0.0, 0.5, 1.0, 2.5, 3.75, 100.9, 127.0, -0.9]
  return edge_values(src)

@pytest.mark.parametrize("src", dtypes.all, ids=lambda d: d.name)
def test_casts(src: DType):
  a = np.array(cast_values(src), src.np)
  same_width = [d for d in dtypes.all if d.itemsize == src.itemsize and d is not src and not d.is_bool and not src.is_bool]
  outs = run(elementwise(len(a), [src], lambda x: [UOp(Ops.CAST, d, (x,)) for d in dtypes.all]
                         + [UOp(Ops.BITCAST, d, (x,)) for d in same_width]), a)
  with np.errstate(all="ignore"):
    for d, got in zip(dtypes.all, outs): np.testing.assert_array_equal(_cmp(got), _cmp(a.astype(d.np)), err_msg=f"cast {src.name} -> {d.name}")
  for d, got in zip(same_width, outs[len(dtypes.all):]):   # bit for bit (NaN payloads too)
    np.testing.assert_array_equal(got.view(np.uint8), a.view(d.np).view(np.uint8), err_msg=f"bitcast {src.name} -> {d.name}")

def test_float_special_casts():
  """NaN, infinities and -0.0 between float widths and to bool (NaN is truthy, as in numpy)."""
  for src in dtypes.floats:
    with np.errstate(over="ignore"): a = np.array([math.nan, math.inf, -math.inf, -0.0, 0.0, 1e-30, 65504.0, 70000.0], src.np)
    targets = list(dtypes.floats) + [dtypes.bool]
    outs = run(elementwise(len(a), [src], lambda x: [UOp(Ops.CAST, d, (x,)) for d in targets]), a)
    with np.errstate(all="ignore"):
      for d, got in zip(targets, outs):
        want = a.astype(d.np)
        np.testing.assert_array_equal(_cmp(got), _cmp(want), err_msg=f"{src.name} -> {d.name}")
        if d.is_float: assert (np.signbit(got) == np.signbit(want)).all()

def test_index_casts_and_reduce_identities():
  """index <-> numbers, and each reduce op's identity on a range of length 0 (the loop never runs)."""
  n = 5
  r = UOp(Ops.RANGE, IDX, (const(n),), attrs(axis=0, kind="loop"))
  z = UOp(Ops.RANGE, IDX, (const(0),), attrs(axis=1, kind="reduce"))
  vals = [UOp(Ops.CAST, d, (alu("sub", r, const(2)),)) for d in (dtypes.int8, dtypes.uint16, dtypes.float32, dtypes.bool)]
  vals.append(UOp(Ops.CAST, dtypes.int64, (UOp(Ops.CAST, IDX, (UOp(Ops.CAST, dtypes.uint8, (alu("sub", r, const(2)),)),)),)))
  for op, dt in itertools.product(("add", "mul", "max", "min"), (dtypes.float32, dtypes.int16, dtypes.uint8, dtypes.bool)):
    vals.append(UOp(Ops.REDUCE, dt, (UOp(Ops.CAST, dt, (r,)), z), attrs(op=Ops(op))))
  ends = [UOp(Ops.END, dtypes.void, (UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, v.dtype.ptr(), (arg_buffer(k, v.dtype.ptr(n)), r)), v)), r))
          for k, v in enumerate(vals)]
  f = Func("k", [arg_buffer(k, v.dtype.ptr(n)) for k, v in enumerate(vals)], [], [UOp(Ops.SINK, dtypes.void, tuple(ends))], {"uop.kernel": None})
  outs = [np.zeros(n, v.dtype.np) for v in vals]
  CPU.compile(f)(*outs)
  i = np.arange(n) - 2
  for got, want in zip(outs, [i.astype(np.int8), i.astype(np.uint16), i.astype(np.float32), i != 0, i.astype(np.uint8).astype(np.int64)]):
    np.testing.assert_array_equal(got, want)
  ident = {"add": 0, "mul": 1, "max": {dtypes.float32: -np.inf, dtypes.int16: -32768, dtypes.uint8: 0, dtypes.bool: False},
           "min": {dtypes.float32: np.inf, dtypes.int16: 32767, dtypes.uint8: 255, dtypes.bool: True}}
  for (op, dt), got in zip(itertools.product(("add", "mul", "max", "min"), (dtypes.float32, dtypes.int16, dtypes.uint8, dtypes.bool)), outs[5:]):
    want = ident[op] if op in ("add", "mul") else ident[op][dt]
    np.testing.assert_array_equal(got, np.full(n, want, dt.np), err_msg=f"{op} {dt}")

# ---------------------------------------------------------------- the device: cache, checks, allocator, registry
def test_method_cache_and_argument_checks():
  f = parse(BROADCAST)["k"]
  p = CPU.compile(f)
  assert CPU.compile(parse(BROADCAST.replace("@k(", "@other("))["other"]) is p  # same code, other name
  with pytest.raises(TypeError, match="takes 4 buffers"): p(np.zeros(12, np.float32))
  bufs = [np.zeros(12, np.float32), np.zeros(12, np.float32), np.zeros(4, np.float32), np.zeros(3, np.float32)]
  with pytest.raises(ValueError, match="float32"): p(*bufs[:3], np.zeros(3, np.float64))
  with pytest.raises(ValueError, match="at least 4"): p(bufs[0], bufs[1], np.zeros(3, np.float32), bufs[3])
  with pytest.raises(ValueError, match="contiguous"): p(bufs[0], np.zeros(24, np.float32)[::2], bufs[2], bufs[3])
  ro = np.zeros(12, np.float32); ro.flags.writeable = False
  with pytest.raises(ValueError, match="read-only"): p(ro, *bufs[1:])
  p(bufs[0], ro, bufs[2], bufs[3])  # read-only inputs are fine
  # int8 and uint8 kernels lower to the same i8 text but are different programs (their checks differ)
  k8, ku8 = (elementwise(4, [d], lambda x: [alu("max", x, x)]) for d in (dtypes.int8, dtypes.uint8))
  assert CPU.compile(k8) is not CPU.compile(ku8)

def test_unsupported_input_raises():
  with pytest.raises(PassError, match="sqrt is not defined on int32"):
    lower_kernel(elementwise(4, [dtypes.int32], lambda x: [alu("sqrt", x)]))
  with pytest.raises(PassError, match="shl is not defined on float32"):
    lower_kernel(elementwise(4, [dtypes.float32], lambda x: [alu("shl", x, x)]))
  r = UOp(Ops.RANGE, IDX, (const(4),), attrs(axis=0, kind="loop"))
  buf = arg_buffer(0, dtypes.int32.ptr(4))
  st = UOp(Ops.STORE, dtypes.void, (UOp(Ops.INDEX, dtypes.int32.ptr(), (buf, r)), UOp(Ops.CAST, dtypes.int32, (r,))))
  with pytest.raises(PassError, match="outside the loop"):  # a store whose range no end closes
    lower_kernel(Func("k", [buf], [], [UOp(Ops.SINK, dtypes.void, (st,))], {"uop.kernel": None}))

def test_allocator():
  al = Device["CPU"].allocator
  a = al.alloc(1000, dtypes.float32)
  assert a.dtype == np.float32 and a.size == 1000 and a.ctypes.data % 64 == 0 and a.flags.c_contiguous and a.flags.writeable
  addr = a.ctypes.data
  al.free(a)
  b = al.alloc(500, dtypes.float64)  # same byte size: the pooled block comes back
  assert b.ctypes.data == addr and b.dtype == np.float64
  c = al.alloc(4, np.bool_)
  assert c.dtype == np.bool_ and c.itemsize == 1
  with pytest.raises(ValueError): al.alloc(-1, dtypes.int8)

def test_allocator_tiny():
  # buffers under a cache line or a few take a short path: the same answers as the checked one
  al = Device["CPU"].allocator
  for n, dt in [(3, dtypes.float32), (1, dtypes.int8), (31, dtypes.float64), (np.int64(2), dtypes.int32)]:
    a = al.alloc(n, dt)
    assert type(a) is np.ndarray and a.size == n and a.dtype == dt.np and a.flags.c_contiguous and a.flags.writeable and al.ptr(a) == a.ctypes.data
  assert al.alloc(0, dtypes.float32).size == 0
  with pytest.raises(ValueError): al.alloc(-3, dtypes.float32)
  with pytest.raises(ValueError): al.alloc(2.0, dtypes.float32)

def test_device_registry(monkeypatch):
  assert Device["cpu"] is Device["CPU:0"] is CPU and Device.DEFAULT == os.environ.get("DEVICE", "CPU").upper()
  with pytest.raises(KeyError, match="unknown device"): Device["TPU"]
  monkeypatch.setenv("DEVICE", "cuda")
  assert _Device().DEFAULT == "CUDA"

@pytest.mark.parametrize("name", ["maxpool 3x3 s2 p1", "avgpool 2x2", "maxpool 2x2 odd", "depthwise 3x3 s1", "depthwise 3x3 s2 p1", "pairs",
                                  "batchnorm relu depthwise", "scaled, padded with 2, depthwise", "log of a pool of exp"])
def test_lane_kernels(name):
  """Kernels whose output loop holds a reduce (pooling, depthwise convolutions) run 4-16 outputs as vector lanes
  (uop.lanes), with vector accumulators and strided, padding-gated loads; against numpy's direct sums."""
  from morok_mlir import Tensor
  r = np.random.default_rng(5)
  x = r.standard_normal((2, 16, 34, 32), dtype=np.float32)   # outputs 16 or 32 wide: lanes (odd: plain loops)
  w = r.standard_normal((16, 1, 3, 3), dtype=np.float32)
  v = r.uniform(0.5, 2, (1, 16, 1, 1)).astype(np.float32)
  def windows(a, k, s, p, fill):   # (n, c, oh, ow, k*k) of a padded with fill
    a = np.pad(a, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=fill)
    oh, ow = (a.shape[2] - k) // s + 1, (a.shape[3] - k) // s + 1
    return np.stack([a[:, :, i:i + s * oh:s, j:j + s * ow:s] for i in range(k) for j in range(k)], -1)
  X = Tensor(x)
  got, ref = {
    "maxpool 3x3 s2 p1": lambda: (X.max_pool2d(kernel_size=3, stride=2, padding=1), windows(x, 3, 2, 1, -np.inf).max(-1)),
    "avgpool 2x2": lambda: (X.avg_pool2d(kernel_size=2), windows(x, 2, 2, 0, 0).mean(-1)),
    "maxpool 2x2 odd": lambda: (Tensor(x[:, :, :31, :29]).max_pool2d(kernel_size=2), windows(x[:, :, :31, :29], 2, 2, 0, 0).max(-1)),
    "depthwise 3x3 s1": lambda: (X.conv2d(Tensor(w), groups=16, padding=1), (windows(x, 3, 1, 1, 0) * w.reshape(1, 16, 1, 1, 9)).sum(-1)),
    "depthwise 3x3 s2 p1": lambda: (X.conv2d(Tensor(w), groups=16, padding=1, stride=2), (windows(x, 3, 2, 1, 0) * w.reshape(1, 16, 1, 1, 9)).sum(-1)),
    "pairs": lambda: (X.reshape(2, 16, 34, 16, 2).max(-1), x.reshape(2, 16, 34, 16, 2).max(-1)),
    # the normalisation (a division, a square root, a reciprocal) and relu of the input, recomputed per tap in lanes
    "batchnorm relu depthwise": lambda: (((X - 0.1) / (Tensor(v) + 1e-5).sqrt() * (1 / Tensor(v))).relu().conv2d(Tensor(w), groups=16, padding=1),
                                         (windows(np.maximum((x - 0.1) / np.sqrt(v + 1e-5) * (1 / v), 0), 3, 1, 1, 0) * w.reshape(1, 16, 1, 1, 9)).sum(-1)),
    # the per-channel scale loads lose their padding gate (optimize.ungate): the pad value still fills the border
    "scaled, padded with 2, depthwise": lambda: ((X * Tensor(v).sqrt()).pad(((0, 0), (0, 0), (1, 1), (1, 1)), value=2.0).conv2d(Tensor(w), groups=16),
                                                 (windows(x * np.sqrt(v), 3, 1, 1, 2.0) * w.reshape(1, 16, 1, 1, 9)).sum(-1)),
    # exp2 and log2 as vector polynomials in the lanes (inside the reduce and after it)
    "log of a pool of exp": lambda: ((X * 0.5).exp().avg_pool2d(kernel_size=2).log(), np.log(windows(np.exp(x * 0.5), 2, 2, 0, 0).mean(-1))),
  }[name]()
  np.testing.assert_allclose(got.numpy(), ref, rtol=1e-5, atol=1e-5)

@pytest.mark.parametrize("k,s,p,kind", [(1, 1, 0, "max"), (3, 2, 1, "max"), (5, 2, 2, "depthwise"), (5, 1, 2, "avg"), (6, 1, 0, "max"),
                                         (7, 1, 3, "depthwise")])
def test_lane_window_sizes(k, s, p, kind):
  """A window's taps in lanes, whether unrolled into a tree of combines (a few dozen at most) or a loop (larger), on an
  odd output width (masked tail lanes): every tap counted once, with padding and strides, against numpy's windows."""
  from morok_mlir import Tensor
  r = np.random.default_rng(k * 10 + s)
  x = r.standard_normal((1, 5, 23, 29), dtype=np.float32)
  a = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=-np.inf if kind == "max" else 0)
  oh, ow = (a.shape[2] - k) // s + 1, (a.shape[3] - k) // s + 1
  win = np.stack([a[:, :, i:i + s * oh:s, j:j + s * ow:s] for i in range(k) for j in range(k)], -1)
  wt = r.standard_normal((5, 1, k, k), dtype=np.float32)
  got, ref = {"max": lambda: (Tensor(x).max_pool2d(kernel_size=k, stride=s, padding=p), win.max(-1)),
              "avg": lambda: (Tensor(x).avg_pool2d(kernel_size=k, stride=s, padding=p), win.mean(-1)),
              "depthwise": lambda: (Tensor(x).conv2d(Tensor(wt), groups=5, stride=s, padding=p),
                                    (win * wt.reshape(1, 5, 1, 1, k * k)).sum(-1))}[kind]()
  np.testing.assert_allclose(got.numpy(), ref, rtol=1e-5, atol=1e-5)

def test_lane_max_pool_propagates_nan():
  """A NaN anywhere in a window makes that window's max NaN, whichever tap it is (the taps combined in any order)."""
  from morok_mlir import Tensor
  x = np.arange(2 * 3 * 20 * 36, dtype=np.float32).reshape(2, 3, 20, 36) % 7
  x[0, 1, 4, 9] = x[1, 2, 13, 30] = np.nan
  a = x.reshape(2, 3, 10, 2, 18, 2)
  np.testing.assert_array_equal(Tensor(x).max_pool2d(kernel_size=2).numpy(), a.max((3, 5)))

@pytest.mark.parametrize("vec", [8, 16])
@pytest.mark.parametrize("op", ["max", "min"])
def test_lane_window_max_min_specials(op, vec, monkeypatch):
  """A 3x3 stride-2 window's max/min in lanes of either width (AVX2's 8, AVX-512's 16; odd output width: masked
  tails) with NaN, infinities and zeros among the taps: NaN wherever a window holds one, whichever tap, else numpy's
  max/min (either zero of equal zeros)."""
  import morok_mlir.passes.optimize as opt
  from morok_mlir import Tensor, realize as R
  monkeypatch.setattr(opt, "VEC_WIDTH", vec)
  monkeypatch.setattr(R, "_schedule_cache", {})
  r = np.random.default_rng(vec)
  x = r.choice(np.array([0.0, -0.0, 1.5, -2.0, np.inf, -np.inf, 3.0], np.float32), size=(1, 3, 21, 39)).astype(np.float32)
  x.flat[r.choice(x.size, 12, replace=False)] = np.nan
  win = np.stack([x[:, :, i:i + 2 * 10:2, j:j + 2 * 19:2] for i in range(3) for j in range(3)], -1)
  got = getattr(Tensor(x)._pool((3, 3), 2), op)((-2, -1)).numpy()
  np.testing.assert_array_equal(got, getattr(win, op)(-1))

@pytest.mark.parametrize("vec", [8, 16])
@pytest.mark.parametrize("kind", ["max", "depthwise"])
def test_lane_window_over_a_cat(kind, vec, monkeypatch):
  """A pool and a padded depthwise convolution reading a cat of three parts along the channels (each part's loads gated
  by the channel, padded rows by the row: gates every lane shares), odd widths (masked tails), either lane width."""
  import morok_mlir.passes.optimize as opt
  from morok_mlir import Tensor, realize as R
  monkeypatch.setattr(opt, "VEC_WIDTH", vec)
  monkeypatch.setattr(R, "_schedule_cache", {})
  r = np.random.default_rng(vec + len(kind))
  parts = [r.standard_normal((1, c, 19, 37), dtype=np.float32) for c in (3, 2, 4)]
  x = np.concatenate(parts, 1)
  a = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf if kind == "max" else 0)
  win = np.stack([a[:, :, i:i + 2 * 10:2, j:j + 2 * 19:2] for i in range(3) for j in range(3)], -1)
  t = Tensor(parts[0]).cat(Tensor(parts[1]), Tensor(parts[2]), dim=1)
  if kind == "max": got, ref = t.max_pool2d(3, 2, padding=1), win.max(-1)
  else:
    w = r.standard_normal((9, 1, 3, 3), dtype=np.float32)
    got, ref = t.conv2d(Tensor(w), groups=9, stride=2, padding=1), (win * w.reshape(1, 9, 1, 1, 9)).sum(-1)
  np.testing.assert_allclose(got.numpy(), ref, rtol=1e-5, atol=1e-5)

@pytest.mark.parametrize("vec", [8, 16])
@pytest.mark.parametrize("k,s,p,d", [(3, 2, 1, 1), (3, 2, 0, 1), (2, 2, 1, 1), (3, 3, 1, 1), (5, 2, 2, 1), (3, 2, 2, 2), (3, 1, 1, 1)])
def test_lane_window_strided_padded(k, s, p, d, vec, monkeypatch):
  """Windows whose taps step s per lane with padding (each lane's padding and tail gates compared at the load's s*lanes
  width): a max pool and a depthwise convolution over a batchnorm+relu (zero padding after the relu: the gate, not the
  value, pads), odd sizes whose last lane group is partial, either lane width, against numpy's windows."""
  import morok_mlir.passes.optimize as opt
  from morok_mlir import Tensor, realize as R
  monkeypatch.setattr(opt, "VEC_WIDTH", vec)
  monkeypatch.setattr(R, "_schedule_cache", {})
  r = np.random.default_rng(k * 100 + s * 10 + p + vec)
  x = r.standard_normal((1, 3, 23, 2 * vec + 7), dtype=np.float32)
  def win(a, fill):
    a = np.pad(a, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=fill)
    ek = d * (k - 1) + 1
    oh, ow = (a.shape[2] - ek) // s + 1, (a.shape[3] - ek) // s + 1
    return np.stack([a[:, :, i * d:i * d + s * oh:s, j * d:j * d + s * ow:s] for i in range(k) for j in range(k)], -1)
  np.testing.assert_array_equal(Tensor(x).max_pool2d(kernel_size=k, stride=s, padding=p, dilation=d).numpy(), win(x, -np.inf).max(-1))
  w, b = r.standard_normal((3, 1, k, k), dtype=np.float32), r.standard_normal((1, 3, 1, 1), dtype=np.float32)
  g = r.uniform(0.5, 2, (1, 3, 1, 1)).astype(np.float32)
  got = (Tensor(x) * Tensor(g) + Tensor(b)).relu().conv2d(Tensor(w), groups=3, stride=s, padding=p, dilation=d)
  ref = (win(np.maximum(x * g + b, 0), 0) * w.reshape(1, 3, 1, 1, k * k)).sum(-1)
  np.testing.assert_allclose(got.numpy(), ref, rtol=1e-5, atol=1e-5)

@settings(max_examples=30, deadline=None)
@given(st.integers(1, 9), st.integers(3, 37), st.integers(3, 37), st.integers(1, 3), st.integers(1, 3), st.integers(0, 1),
       st.integers(1, 2), st.sampled_from(["max", "depthwise", "avg"]))
def test_lane_kernels_any_shape(c, h, w, k, s, p, d, kind):
  """Pooling and depthwise convolutions of random sizes, strides, padding and dilation (lanes with masked tails where
  the output width is no multiple of the lane count), against numpy's windows."""
  from morok_mlir import Tensor
  if d * (k - 1) + 1 > min(h, w) + 2 * p or kind == "avg" and d != 1 or p > k // 2: return
  r = np.random.default_rng(c * 1000 + h * 37 + w)
  x = r.standard_normal((2, c, h, w), dtype=np.float32)
  def windows(a, fill):
    a = np.pad(a, ((0, 0), (0, 0), (p, p), (p, p)), constant_values=fill)
    ek = d * (k - 1) + 1
    oh, ow = (a.shape[2] - ek) // s + 1, (a.shape[3] - ek) // s + 1
    return np.stack([a[:, :, i * d:i * d + s * oh:s, j * d:j * d + s * ow:s] for i in range(k) for j in range(k)], -1)
  if kind == "max": got, ref = Tensor(x).max_pool2d(kernel_size=k, stride=s, padding=p, dilation=d), windows(x, -np.inf).max(-1)
  elif kind == "avg": got, ref = Tensor(x).avg_pool2d(kernel_size=k, stride=s, padding=p, count_include_pad=True), windows(x, 0).mean(-1)
  else:
    wt = r.standard_normal((c, 1, k, k), dtype=np.float32)
    got, ref = Tensor(x).conv2d(Tensor(wt), groups=c, stride=s, padding=p, dilation=d), (windows(x, 0) * wt.reshape(1, c, 1, 1, k * k)).sum(-1)
  np.testing.assert_allclose(got.numpy(), ref, rtol=1e-4, atol=1e-4)

@pytest.mark.parametrize("vec", [8, 16])
@pytest.mark.parametrize("k,s,d", [(3, 2, 1), (2, 2, 1), (5, 3, 1), (3, 2, 2), (4, 4, 1), (2, 3, 1), (3, 3, 2), (4, 2, 1)])
@pytest.mark.parametrize("op", ["max", "min", "sum"])
def test_lane_window_rows_first(op, k, s, d, vec, monkeypatch):
  """Unpadded windows stepping s >= 2 elements per lane, which LaneLowerer may combine rows first (each window row's
  elements as one wide vector, combined across the rows, then one shuffle per column): odd output widths whose last lane
  group is partial, an input whose last window ends at the buffer's end, dilations, windows narrower than the stride,
  either lane width; max/min with NaN, infinities and signed zeros among the taps, against numpy's windows."""
  import morok_mlir.passes.optimize as opt
  from morok_mlir import Tensor, realize as R
  monkeypatch.setattr(opt, "VEC_WIDTH", vec)
  monkeypatch.setattr(R, "_schedule_cache", {})
  r = np.random.default_rng(k * 100 + s * 10 + d + vec)
  ek = d * (k - 1) + 1
  oh, ow = 5, 2 * vec + 3
  x = r.standard_normal((2, 3, s * (oh - 1) + ek, s * (ow - 1) + ek), dtype=np.float32)
  if op != "sum":
    x.flat[r.choice(x.size, 40, replace=False)] = r.choice(np.array([np.inf, -np.inf, 0.0, -0.0], np.float32), 40)
    x.flat[r.choice(x.size, 6, replace=False)] = np.nan
  win = np.stack([x[:, :, i * d:i * d + s * oh:s, j * d:j * d + s * ow:s] for i in range(k) for j in range(k)], -1)
  got = getattr(Tensor(x)._pool((k, k), s, d), op)((-2, -1)).numpy()
  ref = getattr(win, op)(-1)
  if op == "sum": np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)
  else: np.testing.assert_array_equal(got, ref)

def test_llvm_vectorizes_at_the_kernels_width():
  """The loops codegen leaves scalar (a softmax's rows) are vectorized by LLVM at VEC_WIDTH lanes: tuned for recent
  Intel cores, its own choice is 256-bit vectors on a core with 512-bit ones (a 4096x1024 softmax ran 25% slower)."""
  from morok_mlir.device.cpu import CPUCompiler, CPURenderer
  from morok_mlir.host import VEC_WIDTH
  f = parse(BROADCAST)["k"]
  llvm = CPUCompiler().compile(CPURenderer().render(f)).src
  assert f'["prefer-vector-width", "{32 * VEC_WIDTH}"]' in llvm and "noinline" in llvm
