"""index_math.split_ranges: a range that index math divides or takes modulo by a constant runs as two or more ranges
(r = ro * f + ri), so the divisions fold. Random block-style index expressions (hypothesis): every value is the same at
every iteration, the iterations of the parts in order being r's, and a GGUF block's byte/nibble math folds completely."""
import itertools, math
from hypothesis import given, settings, HealthCheck, strategies as st
from morok_mlir.core import index_math as im
from morok_mlir.core.uop import UOp, attrs
from morok_mlir.core.dtype import dtypes
from morok_mlir.dialects.ops import Ops

PY = {Ops.ADD: lambda a, b: a + b, Ops.SUB: lambda a, b: a - b, Ops.MUL: lambda a, b: a * b, Ops.IDIV: lambda a, b: a // b,
      Ops.MOD: lambda a, b: a % b}
def value(u: UOp, env: dict) -> int:
  if u.op is Ops.CONST: return u.attrs["value"]
  if u.op is Ops.RANGE: return env[u]
  return PY[u.op](*(value(s, env) for s in u.src))

def rng(n: int, axis: int, kind: str) -> UOp: return UOp(Ops.RANGE, dtypes.index, (im.const(n),), attrs(axis=axis, kind=kind))
def reduce_of(exprs: list[UOp], *rs: UOp) -> UOp:
  return UOp(Ops.REDUCE, dtypes.index, (UOp(Ops.SINK, dtypes.void, tuple(exprs)), *rs), attrs(op="add"))

def same_values(before: UOp, after: UOp, row: UOp, r: UOp):
  """after's reduce runs r's iterations as its parts in mixed radix (the outer part first); every expression agrees."""
  parts = after.src[1:]
  sizes = [im.cval(p.src[0]) for p in parts]
  assert math.prod(sizes) == im.cval(r.src[0])
  for i in range(im.cval(row.src[0])):
    for vals in itertools.product(*map(range, sizes)):
      k = 0
      for v, n in zip(vals, sizes): k = k * n + v
      assert [value(e, {row: i, r: k}) for e in before.src[0].src] == [value(e, {row: i, **dict(zip(parts, vals))}) for e in after.src[0].src]

def divmods(x: UOp) -> int: return sum(1 for u in x.toposort if u.op in (Ops.IDIV, Ops.MOD))

@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(block=st.sampled_from([8, 16, 32]), nb=st.integers(1, 4), rows=st.integers(1, 3), nbytes=st.integers(18, 40),
       half=st.sampled_from([2, 4]), off=st.integers(0, 3))
def test_block_index_math(block, nb, rows, nbytes, half, off):
  """Weight k of row o in blocks of `block`: the block (o*K + k) // block, its byte (o*K + k) % (block/half) and field
  ((o*K + k) % block) // (block/half), as a quantized format's decode indexes them: all divisions fold away."""
  K = block * nb
  o, k = rng(rows, 0, "loop"), rng(K, 1, "reduce")
  e = im.add(im.mul(o, im.const(K)), k)
  sub = block // half
  exprs = [im.add(im.add(im.mul(im.idiv(e, block), im.const(nbytes)), im.mod(e, sub)), im.const(off)), im.idiv(im.mod(e, block), sub)]
  before = reduce_of(exprs, k)
  after = im.split_ranges(before, lambda r: r.attrs["kind"] == "reduce")
  assert divmods(after) == 0
  same_values(before, after, o, k)

@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.sampled_from([6, 12, 24, 36, 48, 64, 96]), a=st.integers(1, 40), b=st.integers(0, 50), c=st.integers(2, 24),
       d=st.integers(2, 12), e0=st.integers(0, 5))
def test_any_division_keeps_its_values(n, a, b, c, d, e0):
  """Random coefficients and divisors, foldable or not: the values stay, and no division is added."""
  row, r = rng(3, 0, "loop"), rng(n, 1, "reduce")
  x = im.add(im.add(im.mul(row, im.const(b)), im.mul(r, im.const(a))), im.const(e0))
  exprs = [im.idiv(x, c), im.mod(x, c), im.idiv(im.mod(x, c), d), im.mod(im.idiv(x, d), c)]
  before = reduce_of(exprs, r)
  after = im.split_ranges(before, lambda u: u.attrs["kind"] == "reduce")
  assert divmods(after) <= divmods(before)
  same_values(before, after, row, r)

def test_only_ranges_the_predicate_allows():
  """A loop range (the caller allows reduce ranges only) keeps its divisions."""
  o = rng(64, 0, "loop")
  x = UOp(Ops.END, dtypes.void, (UOp(Ops.SINK, dtypes.void, (im.mod(o, 16), im.idiv(o, 16))), o))
  assert im.split_ranges(x, lambda r: r.attrs["kind"] == "reduce") is x
