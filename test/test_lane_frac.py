"""Loads whose address steps one element every d lanes (kernel_facts.lane_frac: a nearest upsample read along its
output's lanes) and the divisibility facts they rest on (index_math.multiple_of): a proof of `e % d == 0` must hold at
every value of e's ranges (hypothesis, random expressions); upsampled operands in vector lanes against numpy."""
import itertools
import numpy as np
import pytest
from hypothesis import given, settings, HealthCheck, strategies as st
from morok_mlir import Tensor
from morok_mlir.core import index_math as im
from morok_mlir.core.kernel_facts import lane_frac, lane_supported
from morok_mlir.core.uop import UOp, attrs
from morok_mlir.core.dtype import dtypes
from morok_mlir.dialects.ops import Ops

PY = {Ops.ADD: lambda a, b: a + b, Ops.SUB: lambda a, b: a - b, Ops.MUL: lambda a, b: a * b, Ops.MOD: lambda a, b: a % b,
      Ops.IDIV: lambda a, b: a // b, Ops.MIN: min, Ops.MAX: max}
def value(u: UOp, env: dict) -> int:
  if u.op is Ops.CONST: return u.attrs["value"]
  if u.op is Ops.RANGE: return env[u]
  return PY[u.op](*(value(s, env) for s in u.src))
def rng(n: int, axis: int, kind: str = "loop") -> UOp: return UOp(Ops.RANGE, dtypes.index, (im.const(n),), attrs(axis=axis, kind=kind))
R = [rng(5, 0), rng(4, 1), rng(3, 2)]

def exprs(depth: int):
  leaf = st.one_of(st.sampled_from(R), st.integers(-12, 12).map(im.const))
  if depth == 0: return leaf
  sub = exprs(depth - 1)
  bin_ = lambda op: st.tuples(sub, sub).map(lambda t: UOp(op, dtypes.index, t))
  by = lambda op: st.tuples(sub, st.integers(1, 8)).map(lambda t: UOp(op, dtypes.index, (t[0], im.const(t[1]))))
  return st.one_of(leaf, bin_(Ops.ADD), bin_(Ops.SUB), bin_(Ops.MIN), bin_(Ops.MAX), by(Ops.MUL), by(Ops.MOD), by(Ops.IDIV))

@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(e=exprs(3), d=st.sampled_from([2, 3, 4, 8]))
def test_multiple_of_is_sound(e, d):
  """Where multiple_of proves e a multiple of d, every value of e over its ranges is one."""
  if im.multiple_of(e, d):
    for vals in itertools.product(*(range(im.cval(r.src[0])) for r in R)):
      assert value(e, dict(zip(R, vals))) % d == 0

def test_multiple_of_cases():
  r, s = R[0], R[1]
  assert im.multiple_of(im.add(im.mul(r, im.const(32)), im.mul(s, im.const(16))), 16)
  assert im.multiple_of(UOp(Ops.MOD, dtypes.index, (im.mul(r, im.const(16)), im.const(40))), 8)   # (16 r) % 40: 8 | 40
  assert not im.multiple_of(UOp(Ops.MOD, dtypes.index, (im.mul(r, im.const(16)), im.const(20))), 8)
  assert not im.multiple_of(r, 2) and not im.multiple_of(UOp(Ops.IDIV, dtypes.index, (im.mul(r, im.const(4)), im.const(2))), 2)

def test_lane_frac_forms():
  """h // d + g with the lane stepping h by 1 and h a multiple of d at lane 0; nothing else."""
  lane, g = UOp(Ops.RANGE, dtypes.index, (im.const(16),), attrs(axis=9, kind="lane")), R[0]
  h = im.add(im.mul(g, im.const(16)), lane)
  up = lambda h, d=2: UOp(Ops.IDIV, dtypes.index, (h, im.const(d)))
  assert lane_frac(im.add(up(h), im.mul(R[1], im.const(100))), lane) == (2, h)
  assert lane_frac(up(h, 4), lane) == (4, h)
  assert lane_frac(up(im.add(im.mul(g, im.const(3)), lane)), lane) is None       # 3g + lane: odd at lane 0 for odd g
  assert lane_frac(up(h, 3), lane) is None                                         # 3 lanes an element: not a power of two
  assert lane_frac(up(im.mul(lane, im.const(2))), lane) is None                    # steps 2 every 2 lanes: lane_coef's case
  assert lane_frac(im.add(up(h), lane), lane) is None                              # the lane outside the division too
  assert lane_frac(im.mul(up(h), im.const(2)), lane) is None                       # an element two apart every two lanes

@pytest.mark.parametrize("f,shape", [(2, (3, 5, 7)), (2, (2, 16, 16)), (4, (1, 3, 33)), (2, (1, 64, 20, 20))])
def test_upsampled_values_in_lanes(f, shape):
  """Elementwise kernels over a nearest upsample (repeat_interleave along the last dims), padded or not: in lanes,
  exactly numpy's values."""
  v = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
  up = Tensor(v).repeat_interleave(f, -1).repeat_interleave(f, -2)
  ref = v.repeat(f, -1).repeat(f, -2)
  np.testing.assert_array_equal((up * 3 + 1).numpy(), ref * 3 + 1)
  pad = ((0, 0),) * (v.ndim - 1) + ((3, 5),)
  np.testing.assert_array_equal(up.pad(pad, value=2.0).numpy(), np.pad(ref, pad, constant_values=2.0))

def test_conv_over_a_cat_with_an_upsampled_part():
  """A detector neck's 1x1 convolution over cat(upsample(a), b): its image pack reads the upsampled part in lanes."""
  r = np.random.default_rng(0)
  a, b = r.standard_normal((1, 64, 20, 20)).astype(np.float32), r.standard_normal((1, 64, 40, 40)).astype(np.float32)
  w = r.standard_normal((32, 128, 1, 1)).astype(np.float32)
  y = Tensor(a).repeat_interleave(2, 2).repeat_interleave(2, 3).cat(Tensor(b), dim=1).conv2d(Tensor(w)).numpy()
  ref = np.einsum("oc,nchw->nohw", w[:, :, 0, 0], np.concatenate([a.repeat(2, 2).repeat(2, 3), b], 1))
  np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)

def test_lane_supported_takes_the_upsampled_load():
  lane = UOp(Ops.RANGE, dtypes.index, (im.const(8),), attrs(axis=9, kind="lane"))
  buf = UOp(Ops.BUFFER, dtypes.float32.ptr(64), (), attrs(slot=0))
  h = im.add(im.mul(R[0], im.const(8)), lane)
  ld = lambda i: UOp(Ops.LOAD, dtypes.float32, (UOp(Ops.INDEX, dtypes.float32.ptr(), (buf, i)),))
  assert lane_supported(ld(UOp(Ops.IDIV, dtypes.index, (h, im.const(2)))), lane)
  assert not lane_supported(ld(UOp(Ops.IDIV, dtypes.index, (h, im.const(3)))), lane)
