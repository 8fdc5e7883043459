"""The op methods are written once (OpMixin) and shared by Tensor and UOp: the same call builds the same graph."""
import numpy as np, pytest
from morok_mlir import Tensor
from morok_mlir.core.uop import UOp
from morok_mlir.dialects.ops import Ops
from morok_mlir.core.dtype import dtypes

CALLS = {
  "add-broadcast": lambda x, y: x + y.reshape(1, 4),
  "promote-int-float": lambda x, y: x.cast(dtypes.int8) * 2.5,
  "compare-where": lambda x, y: x.lt(y).where(x, -y),
  "divmod": lambda x, y: x.cast(dtypes.int32).floordiv(3) + x.cast(dtypes.int32).mod(-3),
  "movement": lambda x, y: x.permute(1, 0).pad(((1, 0), (0, 2))).shrink(((0, 3), (1, 4))).flip(0)[::2, 1:],
  "reduce": lambda x, y: x.softmax(1).sum(0, keepdim=True).max(),
  "matmul": lambda x, y: x @ y.reshape(4, 1),
  "conv": lambda x, y: x.reshape(1, 1, 3, 4).conv2d(y.reshape(1, 1, 2, 2), padding=1),
}

@pytest.mark.parametrize("name", CALLS)
def test_tensor_and_uop_build_the_same_graph(name):
  a, b = np.arange(12, dtype=np.float32).reshape(3, 4), np.arange(4, dtype=np.float32)
  x, y = Tensor(a), Tensor(b)
  t = CALLS[name](x, y)
  u = CALLS[name](x.uop, y.uop)
  assert isinstance(u, UOp) and u is t.uop and u.shape == t.shape and u.dtype is t.dtype   # hash-consed: identical nodes

def test_uop_keeps_identity_equality():
  x = Tensor(np.ones(3, np.float32)).uop
  assert (x == x) is True and x != x.add(1) and {x: 1}[x] == 1   # hash-consing relies on it
  assert x.eq(x).op is Ops.CMPEQ and x.eq(x).dtype is dtypes.bool

def test_shape_errors_name_the_line():
  x = Tensor(np.ones((2, 3), np.float32)).uop
  with pytest.raises(ValueError, match=r"test_mixin\.py:\d+:\d+: .*cannot be broadcast"): x + x.reshape(3, 2)

def test_tensor_nodes_are_built_by_uop_op(monkeypatch):
  """Tensor._op adds only what a Tensor has (device, requires_grad, views, the user's line): its node comes from UOp._op."""
  from morok_mlir.core.uop import Variable
  built, op = [], UOp._op
  monkeypatch.setattr(UOp, "_op", lambda self, *a, **kw: built.append(a[0]) or op(self, *a, **kw))
  n = Variable("n", 1, 8).bind(3)
  x = Tensor(np.ones((2, 3), np.float32))
  t = (x * x).permute(1, 0).reshape(n, 2).pad(((0, 1), (0, 0)))
  assert built == [Ops.MUL, Ops.PERMUTE, Ops.RESHAPE, Ops.PAD]
  assert t.uop.loc == t.uop.src[0].loc and __file__ in t.uop.loc   # the user's line, not the source node's

def test_op_families_one_per_file():
  """OpMixin is composed of tinygrad-style families, one file each; a method is defined by one family only (none shadows another)."""
  from morok_mlir.core.mixin import OpMixin
  where = {"pad": "movement", "cat": "layout", "scatter": "indexing", "__add__": "elementwise", "gelu": "activation", "one_hot": "creation",
           "softmax": "reduce", "sort": "scan", "matmul": "linalg", "cross_entropy": "loss", "conv2d": "nn", "dropout": "random"}
  assert {n: getattr(OpMixin, n).__module__.rsplit(".", 1)[1] for n in where} == where
  seen: dict[str, str] = {}
  for fam in OpMixin.__mro__[1:-2]:
    for n in vars(fam):
      if not n.startswith("__") or n in ("__add__", "__getitem__", "__matmul__"):
        assert seen.setdefault(n, fam.__name__) == fam.__name__, f"{n} in {seen[n]} and {fam.__name__}"
