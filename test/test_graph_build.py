"""Graph building's shortcuts against the general forms: the shape a node starts with is its rule's, the argument forms
with a fast path build the same (hash-consed, so identical) nodes as the general ones, and a scalar operand's cached
conversion keeps apart what == merges."""
import math
import numpy as np
import pytest
from morok_mlir import Tensor
from morok_mlir.core.uop import SHAPE_RULES, UOp, Variable, arg_of
from morok_mlir.core.mixin import _bshape
from morok_mlir.dialects.ops import Ops

def _graphs():
  rng = np.random.default_rng(0)
  a, b = Tensor(rng.standard_normal((4, 6), dtype=np.float32)), Tensor(rng.standard_normal((6, 5), dtype=np.float32))
  v = Variable("n", 1, 8).bind(3)
  s = Tensor(rng.standard_normal((8, 6), dtype=np.float32)).shrink(((0, v), None))   # a symbolic dim
  yield ((a @ b + 1).relu() @ b.T[:, :4] + 0.5).log_softmax(axis=1)
  yield a.reshape(2, 3, 4).permute(2, 0, 1).expand(5, 4, 2, 3).sum((0, 2), keepdim=True).max(-1)
  yield a.pad(((1, 2), (0, 3))).shrink(((1, 5), (2, 8))).flip(0) * a.unsqueeze(0)
  yield a[1:, ::2].where(a[1:, ::2].gt(0), 2.0).cast("float16").softmax(0).contiguous()
  yield s.pad(((1, 1), (0, 0))).sum(0) + s.reshape(-1, 2).max(1).sum()
  yield Tensor.arange(12).reshape(3, 4)[Tensor([2, 0])].float().std(0)
  yield a.reshape(1, 1, 4, 6).conv2d(Tensor.ones(2, 1, 2, 2), padding=1)

@pytest.mark.parametrize("i", range(7))
def test_seeded_shape_is_the_rule(i):
  t = list(_graphs())[i]
  for u in t.uop.toposort:
    if (rule := SHAPE_RULES.get(u.op)) is not None and "shape" in u.__dict__: assert rule(u) == u.shape, (u.op, u.shape, rule(u))

def test_fast_argument_forms_build_the_same_nodes():
  a = Tensor(np.arange(24, dtype=np.float32).reshape(2, 3, 4))
  assert a.reshape(4, 6).uop is a.reshape((np.int64(4), 6)).uop is a.reshape([4, -1]).uop
  assert a.reshape((None, 12)).uop is a.reshape(2, 12).uop
  assert a.permute(2, 0, 1).uop is a.permute((-1, 0, np.int64(1))).uop
  assert a.sum(1).uop is a.sum((1,)).uop is a.sum(np.int64(-2)).uop
  assert (a @ Tensor.ones(4, 5)).uop is (a.reshape(2, 3, 1, 4) * Tensor.ones(4, 5).reshape(1, 4, 5).permute(0, 2, 1)).sum(-1).uop
  assert (a @ Tensor.ones(4)).uop is (a * Tensor.ones(4)).sum(-1).uop
  assert a.expand(5, 2, 3, 4).uop is a.reshape(1, 2, 3, 4).expand((5, -1, -1, -1)).uop
  with pytest.raises(ValueError, match="not a permutation"): a.permute(0, 0, 1)
  with pytest.raises(IndexError, match="out of range"): a.permute(0, 1, 3)

@pytest.mark.parametrize("x,y", [((3, 1), (1, 4)), ((1,), (5,)), ((2, 3), (2, 3)), ((0, 1), (1, 7)), ((2, 3), (3, 2)), ((1, 1), (1, 1))])
def test_bshape_fast_path(x, y):
  def ref(*shapes):   # numpy's rule
    try: return np.broadcast_shapes(*shapes)
    except ValueError: return None
  want = ref(x, y)
  if want is None:
    with pytest.raises(ValueError, match=r"cannot be broadcast together"): _bshape(x, y)
  else: assert _bshape(x, y) == want

def test_scalar_operands_cached_apart():
  a = Tensor(np.ones(3, np.float32))
  for _ in range(2):   # the second time from the cache
    assert np.signbit((a * 0.0).numpy()).tolist() == [False] * 3 and np.signbit((a * -0.0).numpy()).tolist() == [True] * 3
    assert np.isnan((a + math.nan).numpy()).all()
    assert (a + 1).dtype == (a + 1.0).dtype and (Tensor([1, 2]) + 1).dtype != (Tensor([1, 2]) + 1.5).dtype
    assert (Tensor([True]) + True).dtype.is_bool and (Tensor([1], dtype="int8") + 1).dtype.name == "int8"
  with pytest.raises(OverflowError): Tensor([1], dtype="int8") + 2 ** 70

def test_arg_of_orders_by_name():
  assert arg_of({"b": [1, 2], "a": 3}) == (("a", 3), ("b", (1, 2))) == arg_of({"a": 3, "b": (1, 2)})
  assert arg_of({"c": 1, "a": 2, "b": 3}) == (("a", 2), ("b", 3), ("c", 1))

def test_view_bookkeeping_unchanged():
  a = Tensor(np.zeros((2, 3), np.float32))
  v = a.reshape(3, 2).permute(1, 0)[0]
  v[1] = 5
  assert a.numpy().tolist() == [[0, 0, 5], [0, 0, 0]]
  with Tensor.test():
    w = Tensor(np.ones(2, np.float32), requires_grad=True)
    assert (w * 2).requires_grad is False and (w * 2).uop.op is Ops.DETACH
  assert (w * 2).requires_grad is True and (Tensor(np.ones(2, np.float32)) * 2).requires_grad is None

def test_loss_rebuilt_is_the_same_graph():
  """The same loss on the same tensors is the same (hash-consed) graph, so realize finds its key without a walk: the
  one-hot's class range is one buffer, not a new input each time."""
  x, y = Tensor(np.ones((4, 3), np.float32)), Tensor(np.array([0, 2, 1, 2], np.int32))
  assert x.cross_entropy(y).uop is x.cross_entropy(y).uop

def test_scalar_operand_follows_the_default_float(monkeypatch):
  """An int tensor with a Python float takes the default float at the time of the call, also for an operand seen before
  under another default."""
  from morok_mlir import dtypes
  i = Tensor(np.arange(4, dtype=np.int32))
  assert (i + 1.5).dtype == dtypes.float32
  monkeypatch.setattr(dtypes, "default_float", dtypes.float64)
  assert (i + 1.5).dtype == dtypes.float64 and (i * 1.5).numpy().dtype == np.float64
  monkeypatch.setattr(dtypes, "default_int", dtypes.int64)
  b = Tensor(np.array([True, False]))
  assert (b + 2).dtype == dtypes.int64
