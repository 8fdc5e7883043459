"""Affine index forms (index_math.affine_simplify): the rebuilt expression equals the original at every value of its
ranges (hypothesis, random expressions over shared ranges, so forms remembered on nodes by earlier examples are read
again), and what the nodes remember never holds the node itself."""
import itertools
from hypothesis import given, settings, HealthCheck
from morok_mlir.core import index_math as im
from morok_mlir.core.uop import UOp
from morok_mlir.core.dtype import dtypes
from morok_mlir.dialects.ops import Ops
from test_lane_frac import R, exprs, value

@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(e=exprs(3))
def test_affine_simplify_is_sound(e):
  s = im.affine_simplify(e)
  assert im.affine_simplify(e) is s   # remembered
  for u in e.walk():   # what a node remembers never holds the node itself (a reference cycle would keep its graph alive)
    form = u.__dict__.get("_aform")
    assert form is None or u not in form
    for simple in (u.__dict__.get("_affine"), u.__dict__.get("_aexpr")):
      assert simple is None or simple is True or u not in simple.walk()
  for vals in itertools.product(*(range(im.cval(r.src[0])) for r in R)):
    env = dict(zip(R, vals))
    assert value(s, env) == value(e, env)

def test_forms_are_canonical_and_shared():
  """Sums of the same terms in another order, with the constant anywhere, become one node; a subexpression simplified
  inside a larger one is the node affine_simplify gives for it alone."""
  r0, r1 = R[0], R[1]
  e1 = UOp(Ops.ADD, dtypes.index, (UOp(Ops.ADD, dtypes.index, (im.const(3), UOp(Ops.MUL, dtypes.index, (r1, im.const(4))))), r0))
  e2 = UOp(Ops.ADD, dtypes.index, (UOp(Ops.ADD, dtypes.index, (r0, UOp(Ops.MUL, dtypes.index, (r1, im.const(4))))), im.const(3)))
  assert im.affine_simplify(e1) is im.affine_simplify(e2)
  big = UOp(Ops.MUL, dtypes.index, (e1, im.const(2)))
  assert im.affine_simplify(big) is im.affine_simplify(UOp(Ops.MUL, dtypes.index, (im.affine_simplify(e1), im.const(2))))

def test_a_node_seen_inside_another_still_simplifies_alone():
  """A node without an affine form of its own (a division that does not fold) met inside a larger expression: simplified
  alone afterwards, its sources still take their canonical forms (the per-node memo once answered "unchanged")."""
  r = R[0]
  u = UOp(Ops.IDIV, dtypes.index, (UOp(Ops.ADD, dtypes.index, (im.const(5), UOp(Ops.MUL, dtypes.index, (r, im.const(3))))), im.const(4)))
  im.affine_simplify(UOp(Ops.MAX, dtypes.index, (u, im.const(0))))
  s = im.affine_simplify(u)
  assert s is not u and s.src[0] is UOp(Ops.ADD, dtypes.index, (UOp(Ops.MUL, dtypes.index, (r, im.const(3))), im.const(5)))

@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(e=exprs(3))
def test_affine_in_some_ranges_is_sound(e):
  """affine_in's form (subexpressions without the chosen ranges kept whole as atoms) sums to e at every point."""
  for over in ({R[0]}, {R[1], R[2]}):
    if (form := im.affine_in(e, over, {})) is None: continue
    assert all(k == 1 or k in over or not over & set(k.toposort) for k in form)
    for vals in itertools.product(*(range(im.cval(r.src[0])) for r in R)):
      env = dict(zip(R, vals))
      assert sum(v * (1 if k == 1 else value(k, env)) for k, v in form.items()) == value(e, env)
