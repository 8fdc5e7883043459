"""Reduces over a leading axis that are no contraction (products, integer and bool reduces): uop-optimize's outer_reduce
runs them row by row, each output accumulated in place. Differential against numpy: ops, dtypes, odd and prime sizes,
a middle axis, post-ops on the reduce, padding, a reduce whose output is a slice of its own input."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from morok_mlir import Tensor

def data(shape, dt):
  rng = np.random.default_rng([*shape, np.dtype(dt).num])   # (its own draw: the same data in any test order)
  if dt == np.bool_: return rng.random(shape) > 0.3
  if np.dtype(dt).kind == "f": return (rng.standard_normal(shape) * 0.05 + 1).astype(dt)
  return rng.integers(-3 if np.dtype(dt).kind == "i" else 0, 4, shape).astype(dt)

OPS = {"sum": (lambda t, a: t.sum(a), lambda x, a: x.sum(a)), "prod": (lambda t, a: t.prod(a), lambda x, a: x.prod(a)),
       "max": (lambda t, a: t.max(a), lambda x, a: x.max(a)), "min": (lambda t, a: t.min(a), lambda x, a: x.min(a)),
       "any": (lambda t, a: t.any(a), lambda x, a: x.any(a)), "all": (lambda t, a: t.all(a), lambda x, a: x.all(a))}

def check(got, want):
  assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
  if want.dtype.kind == "f": np.testing.assert_allclose(got, want, rtol=1e-5)
  else: np.testing.assert_array_equal(got, want)

@pytest.mark.parametrize("op,dt", [("sum", np.int32), ("sum", np.int8), ("sum", np.uint8), ("prod", np.float32), ("prod", np.int64),
                                   ("max", np.int32), ("min", np.int16), ("max", np.uint16), ("any", np.bool_), ("all", np.bool_)])
@pytest.mark.parametrize("shape,axis", [((64, 4096), 0), ((37, 53), 0), ((5, 96, 131), 1), ((3, 17, 64), 0), ((1, 40), 0)])
def test_leading_axis_reduce_matches_numpy(op, dt, shape, axis):
  x = data(shape, dt)
  f, g = OPS[op]
  check(f(Tensor(x), axis).numpy(), g(x, axis))

def test_post_ops_and_padding():
  """What the kernel computes of the reduce (a scale, an offset, a comparison) applies once, at the last row; a padded
  input's gates stay on its loads."""
  x = data((50, 300), np.int32)
  check((Tensor(x).max(0) * 2 + 1).numpy(), x.max(0) * 2 + 1)
  check((Tensor(x).sum(0) > 10).numpy(), x.sum(0) > 10)
  check(Tensor(x).pad(((2, 3), (4, 5))).prod(0).numpy(), np.pad(x, ((2, 3), (4, 5))).prod(0))
  check(Tensor(x).max(0, keepdim=True).numpy(), x.max(0, keepdims=True))

def test_output_written_into_its_input():
  """A reduce stored into a row of the buffer it reads (setitem on a realized tensor): the rows must all be read
  before the row is written, so it is not accumulated in place."""
  x = data((6, 70), np.int32)
  t = Tensor(x).contiguous().realize()
  t[0] = t.max(0)
  want = x.copy(); want[0] = x.max(0)
  check(t.numpy(), want)

def test_rewritten_kernel_is_rows_outside():
  """The kernel after uop-optimize: no reduce left, a serial row loop, chunks of the innermost loop split by threads."""
  t = Tensor(data((64, 4096), np.int32)).sum(0)
  text = t.mlir("uop-optimize")
  kern = text[text.index("func.func private"):text.index("func.func @schedule")]
  assert "uop.reduce" not in kern and 'kind = "serial"' in kern, kern

@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 30), cols=st.integers(1, 90), op=st.sampled_from(sorted(OPS)),
       dt=st.sampled_from([np.int32, np.uint8, np.float32, np.bool_]))
def test_leading_axis_reduce_property(rows, cols, op, dt):
  if (op in ("any", "all")) != (dt == np.bool_) or op == "sum" and dt == np.float32: return   # (bool ops on bools; f32 sums are contractions)
  x = data((rows, cols), dt)
  f, g = OPS[op]
  check(f(Tensor(x), 0).numpy(), g(x, 0))
