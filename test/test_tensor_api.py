"""Graph construction by the Tensor API: shapes, dtypes, the ops in the graph, promotion, provenance and errors.
Nothing here runs the compiler."""
import itertools, math
import numpy as np
import pytest
import morok_mlir.realize
from morok_mlir import Tensor, dtypes
from morok_mlir.core.dtype import least_upper_dtype
from morok_mlir.dialects.ops import Ops

@pytest.fixture(autouse=True)
def no_compute(monkeypatch):
  """Building graphs must never compute: any call into realize fails the test."""
  def boom(*a, **k): raise AssertionError("realize called while building a graph")
  monkeypatch.setattr(morok_mlir.realize, "realize", boom)

def ops(t: Tensor) -> list[str]: return [u.op for u in t.uop.toposort]
def raises_here(exc, fn, match=None):
  """fn is a one-line lambda: the error must name this test file and the lambda's line."""
  with pytest.raises(exc, match=match) as e: fn()
  assert f"{__file__}:{fn.__code__.co_firstlineno}:" in str(e.value), str(e.value)

# ---------------------------------------------------------------- creation
@pytest.mark.parametrize("data,dt,shape", [
  (1.5, dtypes.float32, ()), (3, dtypes.int32, ()), (True, dtypes.bool, ()),
  ([1, 2, 3], dtypes.int32, (3,)), ([1, 2.0], dtypes.float32, (2,)), ([True, False], dtypes.bool, (2,)),
  ([[1, 2], [3, 4]], dtypes.int32, (2, 2)), ([], dtypes.float32, (0,)), ([[True, 2]], dtypes.int32, (1, 2)),
  (np.zeros((2, 3), np.float64), dtypes.float64, (2, 3)), (np.arange(4, dtype=np.uint8), dtypes.uint8, (4,)),
  (np.float16(2), dtypes.float16, ()), (np.int64(2), dtypes.int64, ())])
def test_creation_dtype(data, dt, shape):
  t = Tensor(data)
  assert (t.dtype, t.shape) == (dt, shape)

def test_creation_explicit_dtype():
  assert Tensor([1, 2], dtype=dtypes.float16).dtype == dtypes.float16
  assert Tensor(3, dtype="int8").dtype == dtypes.int8
  assert Tensor(np.zeros(3), dtype=dtypes.int32).dtype == dtypes.int32
  assert Tensor([300], dtype=dtypes.uint8).dtype == dtypes.uint8

def test_scalar_is_const():
  t = Tensor(2.5)
  assert t.uop.op is Ops.CONST and t.uop.attrs["value"] == 2.5 and t.shape == ()

def test_full_is_small_graph():
  t = Tensor.full((3, 4), 7)
  assert ops(t) == ["const", "reshape", "expand"] and t.dtype == dtypes.int32 and t.shape == (3, 4)
  assert Tensor.zeros(2, 3).dtype == dtypes.float32 and Tensor.ones((2, 3), dtype=dtypes.int8).dtype == dtypes.int8
  assert Tensor.full((), 1.0).uop.op is Ops.CONST

def test_like():
  a = Tensor(np.zeros((2, 3), np.int16))
  assert (a.zeros_like().dtype, a.ones_like().shape, a.full_like(2.0).dtype) == (dtypes.int16, (2, 3), dtypes.int16)
  assert a.zeros_like(dtype=dtypes.float32).dtype == dtypes.float32

def test_creation_helpers():
  assert Tensor.arange(5).dtype == dtypes.int32 and Tensor.arange(0, 1, 0.25).shape == (4,)
  assert Tensor.arange(0, 1, 0.25).dtype == dtypes.float32 and Tensor.arange(10, 0, -3).shape == (4,)
  assert Tensor.eye(3).shape == (3, 3) and Tensor.eye(2, 4).shape == (2, 4)
  assert "buffer" not in ops(Tensor.eye(3))  # pure movement of a constant
  Tensor.manual_seed(0)
  r = Tensor.rand(2, 3)
  assert r.shape == (2, 3) and r.dtype == dtypes.float32 and Tensor.randn(4).shape == (4,)
  assert Tensor.empty(2, 2).shape == (2, 2)

def test_input_is_copied():
  x = np.ones(3, np.float32)
  t = Tensor(x)
  x[0] = 5
  assert t.uop.buffer.numpy()[0] == 1

# ---------------------------------------------------------------- elementwise graphs
def test_binary_graph_broadcast():
  a, b = Tensor(np.zeros((3, 4), np.float32)), Tensor(np.zeros(4, np.float32))
  c = a + b
  assert c.shape == (3, 4) and c.uop.op is Ops.ADD
  assert [s.op for s in c.uop.src] == ["buffer", "expand"] and c.uop.src[1].src[0].op is Ops.RESHAPE

def test_scalar_operand_is_expanded_const():
  c = Tensor(np.zeros((3, 4), np.float32)) * 2
  e = c.uop.src[1]
  assert e.op is Ops.EXPAND and e.src[0].op is Ops.RESHAPE and e.src[0].src[0].op is Ops.CONST and e.src[0].src[0].shape == ()

@pytest.mark.parametrize("op,prim", [(lambda a, b: a + b, "add"), (lambda a, b: a * b, "mul"), (lambda a, b: a - b, "sub"),
                                     (lambda a, b: a / b, "fdiv"), (lambda a, b: a.maximum(b), "max"), (lambda a, b: a ** b, "pow"),
                                     (lambda a, b: a < b, "cmplt"), (lambda a, b: a == b, "cmpeq"), (lambda a, b: a != b, "cmpne")])
def test_binary_primitive(op, prim):
  a, b = Tensor(np.zeros(4, np.float32)), Tensor(np.ones(4, np.float32))
  assert op(a, b).uop.op == prim

def test_bool_arithmetic_is_logic():
  a, b = Tensor([True, False]), Tensor([False, False])
  assert (a + b).uop.op is Ops.OR and (a * b).uop.op is Ops.AND and a.maximum(b).uop.op is Ops.OR and (a + b).dtype == dtypes.bool

@pytest.mark.parametrize("name,prims", [("exp", {"exp2", "mul"}), ("log", {"log2", "mul"}), ("cos", {"sin", "sub"}),
                                        ("sqrt", {"sqrt"}), ("rsqrt", {"sqrt", "recip"}), ("sigmoid", {"exp2", "recip"}),
                                        ("trunc", {"trunc"}), ("floor", {"trunc", "where"}), ("relu", {"cmplt", "where"})])
def test_unary_built_from_primitives(name, prims):
  t = getattr(Tensor(np.zeros(4, np.float32)), name)()
  assert prims <= set(ops(t)) and t.dtype == dtypes.float32

def test_float_functions_of_ints_are_float():
  a = Tensor([1, 2, 3])
  for f in ("exp", "log", "sqrt", "sin", "cos", "sigmoid", "tanh", "reciprocal", "exp2", "log2", "rsqrt"):
    assert getattr(a, f)().dtype == dtypes.float32, f
  assert a.abs().dtype == dtypes.int32 and a.floor().dtype == dtypes.int32 and a.relu().dtype == dtypes.int32

def test_comparisons_are_bool():
  a = Tensor([1, 2, 3])
  for t in (a < 2, a <= 2, a > 2, a >= 2, a == 2, a != 2, 2 < a, a.eq(a)): assert t.dtype == dtypes.bool and t.shape == (3,)

def test_where_promotes_and_broadcasts():
  c = Tensor([True, False, True])
  assert c.where(1, 2.5).dtype == dtypes.float32 and c.where(1, 2).dtype == dtypes.int32
  t = Tensor([[1], [2]]).where(Tensor([1.0, 2.0, 3.0]), 0)
  assert t.shape == (2, 3) and t.dtype == dtypes.float32 and t.uop.src[0].dtype == dtypes.bool

def test_constant_divisor_needs_no_guard():
  a = Tensor([1, 2, 3])
  assert "cmpeq" not in ops(a.idiv(3)) and "cmpeq" in ops(a.idiv(a))  # a tensor divisor may be 0 or -1

# ---------------------------------------------------------------- promotion (tinygrad's table)
# pairs from tinygrad's test_dtype.py (TestTypePromotion)
TINYGRAD_PAIRS = [(dtypes.bool, dtypes.int8, dtypes.int8), (dtypes.int8, dtypes.uint8, dtypes.int16), (dtypes.uint8, dtypes.int16, dtypes.int16),
                  (dtypes.int16, dtypes.uint16, dtypes.int32), (dtypes.uint16, dtypes.int32, dtypes.int32), (dtypes.int32, dtypes.uint32, dtypes.int64),
                  (dtypes.uint32, dtypes.int64, dtypes.int64), (dtypes.int64, dtypes.uint64, dtypes.float16), (dtypes.float16, dtypes.float32, dtypes.float32),
                  (dtypes.float32, dtypes.float64, dtypes.float64), (dtypes.bool, dtypes.float32, dtypes.float32), (dtypes.bool, dtypes.float64, dtypes.float64),
                  (dtypes.float16, dtypes.int64, dtypes.float16), (dtypes.float16, dtypes.uint64, dtypes.float16)]

@pytest.mark.parametrize("a,b,out", TINYGRAD_PAIRS)
def test_promotion_tinygrad_pairs(a, b, out):
  assert least_upper_dtype(a, b) == out
  x, y = Tensor(np.zeros(2, a.np)), Tensor(np.zeros(2, b.np))
  assert (x + y).dtype == out and (y * x).dtype == out and (x < y).dtype == dtypes.bool

def test_promotion_table_all_pairs():
  for a, b in itertools.product(dtypes.all, repeat=2):
    x, y = Tensor(np.zeros(2, a.np)), Tensor(np.zeros(2, b.np))
    out = least_upper_dtype(a, b)
    assert (x.maximum(y)).dtype == out and (x / y).dtype == (out if out.is_float else dtypes.float32), (a, b)

@pytest.mark.parametrize("dt,scalar,out", [
  (dtypes.int8, 3, dtypes.int8), (dtypes.uint8, 3, dtypes.uint8), (dtypes.int8, 2.5, dtypes.float32), (dtypes.int64, 2.5, dtypes.float32),
  (dtypes.float16, 2.5, dtypes.float16), (dtypes.float16, 2, dtypes.float16), (dtypes.float64, 1, dtypes.float64),
  (dtypes.bool, 1, dtypes.int32), (dtypes.bool, 1.5, dtypes.float32), (dtypes.bool, True, dtypes.bool), (dtypes.int16, True, dtypes.int16)])
def test_python_scalar_promotion(dt, scalar, out):
  t = Tensor(np.zeros(3, dt.np))
  assert (t + scalar).dtype == out and (scalar + t).dtype == out

def test_division_dtypes():
  i, h = Tensor([1, 2]), Tensor(np.ones(2, np.float16))
  assert (i / 2).dtype == dtypes.float32 and (i / i).dtype == dtypes.float32 and (h / 2).dtype == dtypes.float16
  assert (i // 2).dtype == dtypes.int32 and (i % 2).dtype == dtypes.int32 and (h // 2).dtype == dtypes.float16
  assert i.div(2, rounding_mode="trunc").dtype == dtypes.int32 and Tensor([1.5]).div(2, rounding_mode="floor").dtype == dtypes.float32

def test_scalar_constant_wraps():
  c = (Tensor(np.zeros(2, np.int8)) + 300).uop.src[1]
  while c.op is not Ops.CONST: c = c.src[0]
  assert c.attrs["value"] == 44 and c.dtype == dtypes.int8

# ---------------------------------------------------------------- reductions
@pytest.mark.parametrize("dt,acc", [(dtypes.bool, dtypes.int64), (dtypes.int8, dtypes.int64), (dtypes.int16, dtypes.int64),
                                    (dtypes.int32, dtypes.int64), (dtypes.int64, dtypes.int64), (dtypes.uint8, dtypes.uint64),
                                    (dtypes.uint16, dtypes.uint64), (dtypes.uint32, dtypes.uint64),
                                    (dtypes.uint64, dtypes.uint64), (dtypes.float16, dtypes.float16), (dtypes.float32, dtypes.float32), (dtypes.float64, dtypes.float64)])
def test_sum_dtype(dt, acc):
  t = Tensor(np.zeros((2, 3), dt.np))
  assert t.sum().dtype == acc and t.max().dtype == dt and t.prod().dtype == acc and t.cumsum().dtype == t.cumprod(0).dtype == acc
  assert t.mean().dtype == (dt if dt.is_float else dtypes.float32)

def test_half_sum_accumulates_in_float():
  t = Tensor(np.zeros(8, np.float16)).sum()
  red = [u for u in t.uop.toposort if u.op is Ops.REDUCE_AXIS][0]
  assert red.dtype == dtypes.float32 and t.dtype == dtypes.float16

@pytest.mark.parametrize("axis,keepdim,shape", [(None, False, ()), (None, True, (1, 1, 1)), (0, False, (3, 4)), (-1, False, (2, 3)),
                                                ((0, 2), False, (3,)), ((0, -1), True, (1, 3, 1)), (1, True, (2, 1, 4)), ((), False, (2, 3, 4))])
def test_reduce_shapes(axis, keepdim, shape):
  t = Tensor(np.zeros((2, 3, 4), np.float32))
  for f in ("sum", "max", "min", "prod", "mean"): assert getattr(t, f)(axis, keepdim=keepdim).shape == shape

def test_reduce_graph_keeps_dims():
  t = Tensor(np.zeros((2, 3), np.float32)).sum(1)
  assert t.uop.op is Ops.RESHAPE and t.uop.src[0].op is Ops.REDUCE_AXIS and t.uop.src[0].shape == (2, 1)
  assert t.uop.src[0].attrs == {"op": "add", "axes": (1,)}

def test_empty_reduce_is_identity():
  t = Tensor(np.zeros((0, 3), np.float32))
  assert "reduce_axis" not in ops(t.sum(0)) and t.sum(0).shape == (3,) and t.max(1).shape == (0,)

def test_softmax_subtracts_max():
  t = Tensor(np.zeros((2, 3), np.float32)).softmax()
  assert t.shape == (2, 3) and "max" in [u.attrs.get("op") for u in t.uop.toposort]
  assert Tensor(np.zeros((2, 3), np.float32)).log_softmax(0).shape == (2, 3)

# ---------------------------------------------------------------- matmul
@pytest.mark.parametrize("sa,sb,out", [((3, 4), (4, 5), (3, 5)), ((4,), (4, 5), (5,)), ((3, 4), (4,), (3,)), ((4,), (4,), ()),
                                       ((2, 3, 4), (4, 5), (2, 3, 5)), ((2, 3, 4), (2, 4, 5), (2, 3, 5)), ((1, 3, 4), (2, 4, 5), (2, 3, 5))])
def test_matmul_shapes(sa, sb, out):
  c = Tensor(np.zeros(sa, np.float32)) @ Tensor(np.zeros(sb, np.float32))
  assert c.shape == out
  red = [u for u in c.uop.toposort if u.op is Ops.REDUCE_AXIS][0]
  assert red.attrs["op"] == "add" and red.attrs["axes"] == (len(red.shape) - 1,) and red.src[0].op is Ops.MUL

def test_matmul_dtype():
  assert (Tensor(np.zeros((2, 2), np.int8)) @ Tensor(np.zeros((2, 2), np.int8))).dtype == dtypes.int8
  assert (Tensor(np.zeros((2, 2), np.float16)) @ Tensor(np.zeros((2, 2), np.float32))).dtype == dtypes.float32

# ---------------------------------------------------------------- movement
def test_movement_shapes():
  t = Tensor(np.zeros((2, 3, 4), np.float32))
  assert t.reshape(6, -1).shape == (6, 4) and t.reshape((-1,)).shape == (24,) and t.view(4, 6).shape == (4, 6)
  assert t.permute(2, 0, 1).shape == (4, 2, 3) and t.permute((-1, 0, 1)).uop.attrs["order"] == (2, 0, 1)
  assert t.transpose(0, 2).shape == (4, 3, 2) and t.T.shape == (4, 3, 2)
  assert t[:, :1].expand(2, 5, 4).shape == (2, 5, 4) and t[:, :1].expand(-1, 3, -1).shape == (2, 3, 4)
  assert t.unsqueeze(0).shape == (1, 2, 3, 4) and t.unsqueeze(-1).shape == (2, 3, 4, 1) and t[:, :1].squeeze(1).shape == (2, 4)
  assert t.flatten().shape == (24,) and t.flatten(1).shape == (2, 12) and t.reshape(1, 2, 1, 12).squeeze().shape == (2, 12)
  assert t.flip(0).uop.attrs["axes"] == (0,) and t.shrink(((0, 1), None, (1, 3))).shape == (1, 3, 2)

def test_pad_forms():
  t = Tensor(np.zeros((2, 3), np.float32))
  p = t.pad(((1, 2), None))
  assert p.shape == (5, 3) and p.uop.attrs["padding"] == (1, 2, 0, 0)
  assert t.pad((1, 2)).shape == (2, 6) and t.pad((1, 2, 3, 4)).shape == (9, 6)  # flat: last dim first (PyTorch)
  assert t.pad(((0, 0), (-1, 1))).shape == (2, 3) and t.pad(((1, 1), (1, 1)), value=5.0).shape == (4, 5)

def test_identity_movement_is_free():
  t = Tensor(np.zeros((2, 3), np.float32))
  assert t.reshape(2, 3) is t and t.permute(0, 1) is t and t.shrink((None, None)) is t and t.expand(2, 3) is t

@pytest.mark.parametrize("idx", [1, -1, (0, 1), slice(None, None, -1), (slice(None), slice(1, None, 2)), (Ellipsis, 0), (None, 1),
                                 (slice(None, None, -2), None, Ellipsis), (slice(5, 0, -1), 2), slice(0, 0), (1, slice(-2, None), None, -1),
                                 slice(-100, 100, 3), (Ellipsis, None)])
def test_getitem_shapes(idx):
  x = np.zeros((3, 4, 5), np.float32)
  assert Tensor(x)[idx].shape == x[idx].shape

# ---------------------------------------------------------------- misc API
def test_properties():
  t = Tensor(np.zeros((2, 3), np.int16))
  assert (t.ndim, t.numel(), t.size(), t.size(-1), len(t), t.element_size(), t.nbytes()) == (2, 6, (2, 3), 3, 2, 2, 12)
  assert "int16" in repr(t) and repr(t).startswith("tensor([[0, 0, 0],")
  assert t.cast(dtypes.float32).uop.op is Ops.CAST and t.cast(dtypes.int16) is t and t.bitcast(dtypes.uint16).uop.op is Ops.BITCAST
  assert t.detach().uop.op is Ops.DETACH and t.contiguous().uop.op is Ops.CONTIGUOUS

def test_assign_replaces_value():
  t = Tensor(np.zeros(3, np.float32))
  old = t.uop
  t.assign(Tensor(np.ones(3, np.float32)))
  assert t.uop is not old
  t += 1
  assert t.uop.op is Ops.ADD

def test_provenance_on_every_node():
  a = Tensor(np.zeros((2, 3), np.float32)); line = test_provenance_on_every_node.__code__.co_firstlineno + 1
  b = (a * 2.125 + 1.0625).exp().sum(1).softmax()[::-1]; line_b = line + 1
  for u in b.uop.toposort:
    assert u.loc is not None and "morok_mlir" not in u.loc.rsplit("/", 1)[0], (u, u.loc)
    # constant-only subgraphs are hash-consed across the program: they keep the line that made them first
    if any(s.op is Ops.BUFFER for s in u.toposort): assert u.loc.startswith(f"{__file__}:") and int(u.loc.split(":")[-2]) in (line, line_b), (u, u.loc)

def test_hash_and_eq():
  t = Tensor([1, 2])
  assert {t: 1}[t] == 1 and isinstance(t == t, Tensor)
  with pytest.raises(TypeError): bool(t)

# ---------------------------------------------------------------- user errors name the user's line
def test_errors_name_the_line():
  a, f = Tensor(np.zeros((2, 3), np.float32)), Tensor(np.zeros(3, np.float32))
  raises_here(ValueError, lambda: a.reshape(4, 2), "invalid for input of size 6")
  raises_here(ValueError, lambda: a.reshape(-1, -1))
  raises_here(ValueError, lambda: a + Tensor(np.zeros(2, np.float32)), "broadcast")
  raises_here(ValueError, lambda: a.expand(4, 3))
  raises_here(IndexError, lambda: a.sum(2), "out of range")
  raises_here(IndexError, lambda: a.max(-3))
  raises_here(ValueError, lambda: a.sum((0, 0)), "multiple times")
  raises_here(ValueError, lambda: a.permute(0, 0), "permutation")
  raises_here(IndexError, lambda: a.permute(0, 2))
  raises_here(TypeError, lambda: f & f, "bitwise")
  raises_here(TypeError, lambda: ~f)
  raises_here(TypeError, lambda: f << 1)
  raises_here(TypeError, lambda: f.idiv(f))
  raises_here(IndexError, lambda: a[2], "out of bounds")
  raises_here(IndexError, lambda: a[0, 0, 0], "too many")
  raises_here(IndexError, lambda: a[..., ...])
  raises_here(ValueError, lambda: a[::0], "zero")
  raises_here(TypeError, lambda: a["x"])
  raises_here(ValueError, lambda: a.shrink(((0, 3), None)))
  raises_here(ValueError, lambda: a.pad((1, 2, 3)))
  raises_here(ValueError, lambda: a @ a, "matmul")
  raises_here(ValueError, lambda: Tensor(1.0) @ a)
  raises_here(TypeError, lambda: a.bitcast(dtypes.float64))
  raises_here(TypeError, lambda: Tensor([True]) - Tensor([False]))
  raises_here(TypeError, lambda: a + "x")
  raises_here(TypeError, lambda: Tensor({1: 2}))
  raises_here(ValueError, lambda: Tensor([[1, 2], [3]]))
  raises_here(ValueError, lambda: Tensor(np.zeros(4, np.float32)).item())
  raises_here(TypeError, lambda: len(Tensor(1.0)))
  raises_here(ValueError, lambda: a.div(2, rounding_mode="round"))
  raises_here(IndexError, lambda: a.unsqueeze(3))
  raises_here(TypeError, lambda: a.assign(Tensor(np.zeros((2, 3), np.int32))))
