"""Sibling convolutions: Conv nodes that read one input with equal attributes (an inception block's 1x1 reduces) run as
one Conv over their weights concatenated along the output channels, then split: the input is packed once for all of
them and the product's tiles run over the summed channels, instead of each kernel packing the input again for a few
output channels. Each output channel's sum is the same one, in the same order: the results are bit-identical. Only
where every member's weight and bias are constants (folded: they depend on no graph input), so the concatenation is
made once, group is 1 (a grouped conv's channels interleave its groups), no member feeds a Concat (catted) and merging
pays (mergeable)."""
from __future__ import annotations
from collections import defaultdict
import math
import onnx
from onnx import helper

# ops that compute an output element from the same element of their inputs (a conv's epilogue: bias, activation, batchnorm)
ELEMENTWISE = frozenset(("Relu", "Sigmoid", "Tanh", "Mul", "Add", "Sub", "Div", "Clip", "LeakyRelu", "Elu", "Selu", "PRelu", "HardSigmoid",
                         "HardSwish", "Softplus", "Mish", "Gelu", "BatchNormalization", "Identity"))

def catted(graph: onnx.GraphProto) -> set[str]:
  """Names whose values reach a Concat through elementwise ops alone: such a conv's kernel stores its output (epilogue
  and all) straight into its part of the concatenation's buffer; as a slice of a merged conv's output, the part would
  be copied there, or the concatenation read from two buffers by its reader (a detector's C3 blocks: the reading
  convolution 20-50% slower, more than the merge saved)."""
  out, todo = set(), [x for n in graph.node if n.op_type == "Concat" for x in n.input if x]
  made = {o: n for n in graph.node for o in n.output if o}
  while todo:
    if (x := todo.pop()) in out: continue
    out.add(x)
    if (n := made.get(x)) is not None and n.op_type in ELEMENTWISE: todo += [i for i in n.input if i]
  return out

def groups(graph: onnx.GraphProto) -> dict[int, list[int]]:
  """Index of each group's first Conv -> the indices of the Convs of its group (two or more), in node order."""
  by: dict[tuple, list[int]] = defaultdict(list)
  cat = catted(graph)
  for i, n in enumerate(graph.node):
    if n.op_type != "Conv" or n.domain not in ("", "ai.onnx") or len(n.input) < 2 or not n.input[0] or not n.input[1]: continue
    if n.output and n.output[0] in cat: continue
    if (attrs := normalized(n)) is not None: by[(n.input[0], attrs)].append(i)
  return {g[0]: g for g in by.values() if len(g) > 1}

# attribute values that mean what their absence means (a model may write the defaults out or not); kernel_shape is the
# weight's, which mergeable compares
DEFAULT = {"group": lambda v: v == 1, "auto_pad": lambda v: v in (b"NOTSET", "NOTSET"), "kernel_shape": lambda v: True,
           "strides": lambda v: all(x == 1 for x in v), "dilations": lambda v: all(x == 1 for x in v), "pads": lambda v: not any(v)}

def normalized(n: onnx.NodeProto) -> tuple | None:
  """A Conv's attributes less those at their defaults, as a key; None for a grouped conv (its channels interleave)."""
  vals = {a.name: helper.get_attribute_value(a) for a in n.attribute}
  if vals.get("group", 1) != 1: return None
  return tuple(sorted((k, repr(v)) for k, v in vals.items() if not (k in DEFAULT and DEFAULT[k](v))))

def mergeable(ws: list, bs: list) -> bool:
  """Whether weights ws (and biases bs, None where absent) concatenate along the output channels (equal trailing dims),
  and merging pays: every member has at most as many output channels as taps (K = C_in x kernel), so reading and
  packing the input is a good part of its time (inception's reduces, 16-192 channels from 192-1024). A member with more
  (resnet50's projection, 64 -> 256 at 56x56, beside its 64 -> 64) computes enough per input element that the merge
  saved nothing, and the readers of the merged output (its batchnorm and relu applied as they load it) lost more:
  resnet50 1.01-1.02x its time."""
  if any(w is None or not hasattr(w, "shape") or w.ndim < 3 or w.shape[1:] != ws[0].shape[1:] or w.dtype != ws[0].dtype for w in ws): return False
  if any(w.shape[0] > math.prod(w.shape[1:]) for w in ws): return False
  return all(b is None or (hasattr(b, "shape") and b.shape == (w.shape[0],) and b.dtype == w.dtype) for w, b in zip(ws, bs))
