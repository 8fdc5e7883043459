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
