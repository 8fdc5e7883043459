"""Op methods shared by Tensor and UOp (tinygrad's mixins): broadcasting, dtype promotion, shape checks and the ops
composed from the primitives, written once. A class using OpMixin provides `shape`, `dtype`, `_node` (its graph UOp),
`_op(op, shape, dtype, src, **attrs)` (one primitive node of the same class) and `_const(value, dtype)` (a 0-d constant).
Comparisons are the named methods lt/gt/le/ge/eq/ne: Tensor maps its operators to them, a UOp keeps identity equality
(UOps are hash-consed dictionary keys).

One family per file, as tinygrad's mixin/ divides them; OpMixin is all of them:
  helpers.py      argument and shape checks, shape broadcasting, scalar constants, accumulation dtypes (OpBase: the root)
  elementwise.py  casts, broadcasting and promotion, arithmetic, comparisons, where, division, math functions
  activation.py   relu6, gelu, silu, softplus, ...: elementwise compositions
  movement.py     reshape, expand, permute, pad, shrink, flip, their compositions, basic indexing
  layout.py       cat, stack, split, repeat, roll, unfold, diag, triu: joining and splitting by movement ops only
  indexing.py     gather, scatter, scatter_reduce
  creation.py     filled tensors, ranges, one-hot rows
  reduce.py       sum, prod, max, mean, var, std, softmax, logsumexp
  scan.py         cumsum, cumprod, cummax, logcumsumexp; sort, argsort, topk
  linalg.py       dot, matmul, einsum
  loss.py         cross entropy, nll, binary cross entropy
  nn.py           pooling, convolution, interpolation, attention, norms, linear
  random.py       the random draw (Tensor's) and dropout"""
from morok_mlir.core.mixin.helpers import OpBase, _argfix, _bshape, _cv, _dtype, _err, _isint, _prod, _shape, vkey
from morok_mlir.core.mixin.elementwise import ElementwiseMixin, BINARY_OPS
from morok_mlir.core.mixin.activation import ActivationMixin
from morok_mlir.core.mixin.movement import MovementMixin, _basic_plan
from morok_mlir.core.mixin.layout import LayoutMixin
from morok_mlir.core.mixin.indexing import IndexingMixin
from morok_mlir.core.mixin.creation import CreationMixin
from morok_mlir.core.mixin.reduce import ReduceMixin
from morok_mlir.core.mixin.scan import ScanMixin
from morok_mlir.core.mixin.linalg import LinalgMixin
from morok_mlir.core.mixin.loss import LossMixin
from morok_mlir.core.mixin.nn import NNMixin
from morok_mlir.core.mixin.random import RandomMixin

class OpMixin(ElementwiseMixin, ActivationMixin, MovementMixin, LayoutMixin, IndexingMixin, CreationMixin, ReduceMixin, ScanMixin,
              LinalgMixin, LossMixin, NNMixin, RandomMixin):
  __slots__ = ()

__all__ = ["OpMixin", "OpBase", "BINARY_OPS", "_argfix", "_basic_plan", "_bshape", "_cv", "_dtype", "_err", "_isint", "_prod", "_shape", "vkey"]
