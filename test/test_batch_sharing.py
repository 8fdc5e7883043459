"""A batched contraction whose operand reads a batch range only as r // d or r % d packs it once per problem of its
own: a detector head's 1x1 convolution written transposed ([1, 3, h, w, 85]) runs as a batch over (anchor, image row),
its weights the same for an anchor's h rows and its image the same for the 3 anchors (the weights' panels kept across
calls were h times their size). shared_by's answer is checked to hold at every point (hypothesis), the products against
numpy, and every float the micro-kernel reads from the shrunken scratch is written by the call. Its bias, read per
anchor, no longer keeps the epilogue off the tiles."""
import itertools
import numpy as np
from hypothesis import assume, given, settings, HealthCheck, strategies as st
from morok_mlir import Tensor
from morok_mlir.codegen.contraction import Contraction, shared_by
from morok_mlir.core import index_math as im
from test_lane_frac import R, exprs, value
from test_scratch_written import left_junk, products

@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(e=exprs(3), which=st.sampled_from(R))
def test_shared_problems_read_the_same(e, which):
  """x at r equals x at r's representative problem (d * (r // d), or r % d) everywhere."""
  d, mod = shared_by(e, which)
  for vals in itertools.product(*(range(im.cval(r.src[0])) for r in R)):
    env = dict(zip(R, vals))
    v = env[which]
    assert value(e, env) == value(e, {**env, which: v % d if mod else d * (v // d)})

def head(c: int, hw: int, anchors: int, cls: int, seed: int = 0):
  r = np.random.default_rng(seed)
  x, w, b = r.standard_normal((1, c, hw, hw), dtype=np.float32), r.standard_normal((anchors * cls, c, 1, 1), dtype=np.float32), \
    r.standard_normal(anchors * cls, dtype=np.float32)
  t = Tensor(x).conv2d(Tensor(w), Tensor(b)).reshape(1, anchors, cls, hw, hw).permute(0, 1, 3, 4, 2).sigmoid().reshape(1, -1, cls)
  ref = (np.einsum("ok,khw->ohw", w[:, :, 0, 0].astype(np.float64), x[0]) + b[:, None, None]).reshape(anchors, cls, hw, hw)
  return t, 1 / (1 + np.exp(-ref.transpose(0, 2, 3, 1).reshape(1, -1, cls)))

def test_detector_head_packs_each_operand_once_per_own_problem():
  t, ref = head(64, 40, 3, 85)
  (f,) = products(t)
  c = Contraction(f, f.name)
  assert c.batch == 3 * 40
  assert c.scratch[0] == 40 * c.Mp * c.ka   # the image: one problem per image row, shared by the anchors
  assert c.scratch[1] == 3 * c.Np * c.K     # the weights: one per anchor, shared by its rows
  # the bias, read at ((t*40 + w) // 1600)*85 + c, steps along the tile's columns as the output does: the epilogue runs
  # on each tile as mm finishes it (index_math.affine_in), and C, 4800 x 96 floats, takes no scratch
  assert c.epi_tile is not None and c.scratch[2] == 1
  assert not left_junk(f)
  np.testing.assert_allclose(t.numpy(), ref, rtol=1e-5, atol=1e-6)

@settings(max_examples=8, deadline=None)
@given(st.integers(16, 80), st.integers(12, 32), st.integers(2, 4), st.integers(9, 90))
def test_detector_heads_match_numpy(c, hw, anchors, cls):
  assume(2 * c * hw * hw * anchors * cls >= 1 << 21)   # (a smaller product stays plain loops)
  t, ref = head(c, hw, anchors, cls, seed=c * hw)
  assert (fs := products(t)), "a product big enough to be a contraction"
  for f in fs:
    assert not left_junk(f), f"{f.name}: {f.attrs['uop.contraction']}"
  np.testing.assert_allclose(t.numpy(), ref, rtol=1e-4, atol=1e-5)
