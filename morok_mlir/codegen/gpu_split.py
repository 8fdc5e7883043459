"""The GPU's two-phase reduce. A kernel with few outputs and one long reduce (a full sum, a max over long rows) is a GROUP
kernel of one block per output: a few SMs of the chip work and the rest idle. split(f) makes it two kernels run in
order over the kernel's arguments and a scratch buffer of partials: the first reduces each output's reduce in S chunks,
one block per (output, chunk), into partials[output * S + chunk]; the second is the kernel itself with the reduce read
as the reduce of that output's S partials (GROUP again where S is long enough), so its epilogue and stores are the
kernel's own. The partials are in the reduce's compute dtype (bf16 accumulates in f32). A reduce over one range that S
does not divide leaves a tail past the chunks, which the second phase reduces too. Static sizes only."""
from __future__ import annotations
import math
from dataclasses import dataclass
from morok_mlir.ir.bridge import Func, arg_buffer
from morok_mlir.core.dtype import DType, dtypes
from morok_mlir.core.uop import UOp, attrs
from morok_mlir.dialects.ops import Ops
from morok_mlir.core import index_math as im
from morok_mlir.codegen.tables import COMPUTE
from morok_mlir.codegen.placement import _axis
from morok_mlir.codegen.lower_gpu import _pow2_at_least, block_reduce

SPLIT_OUTPUTS = 264     # split a kernel of fewer outputs than 2 blocks per SM of the largest chips (H100, H200: 132 SMs)
SPLIT_REDUCE = 1 << 16  # ... whose reduce is at least this long
SPLIT_BLOCKS = 1024     # blocks of the first phase to aim for: several per SM, for enough loads in flight
CHUNK_MIN = 4096        # elements a block of the first phase reduces at least
KEEP = ("uop.kernel", "uop.fastmath")   # the attributes the phases keep (the others are the CPU's choices)

@dataclass(frozen=True)
class Split:
  phases: tuple[Func, ...]                 # kernels run in order, each over the kernel's arguments then the scratch buffers
  scratch: tuple[tuple[int, DType], ...]   # (elements, dtype) per scratch buffer

def _size(r: UOp) -> int: return im.cval(r.src[0])
def _pow2_floor(n: int) -> int: return 1 << (n.bit_length() - 1) if n >= 1 else 0
def _chunk_range(f: Func, S: int) -> UOp:   # the chunk number: the first phase's innermost output range
  return UOp(Ops.RANGE, dtypes.index, (im.const(S),), attrs(axis=im.next_axis(f.roots[0]), kind="loop"))

def chunked(rngs: list[UOp], s: UOp, S: int) -> tuple[dict[UOp, UOp], list[UOp], int] | None:
  """The reduce's ranges (outermost first) in S chunks numbered by s: (substitution, the chunk's ranges, the elements
  past the chunks). One range r of n: chunks of C, the multiple of 4 at most n / S (so a chunk's 16-byte loads stay
  aligned), r = s * C + r'; the n - S * C after them are the tail, reduced by the second phase. Several: the outer ranges
  as whole digits of s, the next one split (r = digit * n / parts + r', r' a range of n / parts in r's place), the rest
  kept, or None where S does not divide them so."""
  if len(rngs) == 1:
    r, C = rngs[0], _size(rngs[0]) // S // 4 * 4
    r2 = UOp(Ops.RANGE, dtypes.index, (im.const(C),), r.arg)
    return {r: im.add(im.mul(s, im.const(C)), r2)}, [r2], _size(r) - S * C
  sub, inner, need = {}, [], S
  for r in rngs:
    n = _size(r)
    if need == 1: inner.append(r)
    elif need % n == 0: need //= n; sub[r] = im.mod(im.idiv(s, need), n)
    elif n % need == 0:
      inner.append(r2 := UOp(Ops.RANGE, dtypes.index, (im.const(n // need),), r.arg))
      sub[r], need = im.add(im.mul(im.mod(s, need), im.const(n // need)), r2), 1
    else: return None
  return (sub, inner, 0) if need == 1 and inner else None

def plan(f: Func) -> tuple[UOp, list[UOp], int] | None:
  """(the reduce, the output ranges it depends on, chunks S) where f is to be split, else None: one reduce, one that a
  block combines, fewer than SPLIT_OUTPUTS outputs, at least SPLIT_REDUCE long, static sizes."""
  if len(f.roots) != 1 or len(ends := [u for u in f.roots[0].src if u.op is Ops.END]) > 1: return None
  nodes = f.roots[0].toposort
  rngs, reds = [u for u in nodes if u.op is Ops.RANGE], [u for u in nodes if u.op is Ops.REDUCE]
  if len(reds) != 1 or not block_reduce(red := reds[0]) or any(_size(r) is None or r.attrs["kind"] == "serial" for r in rngs): return None
  outs = sorted(ends[0].src[1:], key=_axis) if ends else []
  n_out, n = math.prod(map(_size, outs)), math.prod(_size(r) for r in red.src[1:])
  if not 1 <= n_out < SPLIT_OUTPUTS or n < SPLIT_REDUCE: return None
  # the first phase's outputs: those the reduce depends on (a reduce broadcast along an output axis is computed once)
  outs = [r for r in outs if r in red.src[0].toposort]
  S = min(_pow2_at_least(-(-SPLIT_BLOCKS // math.prod(map(_size, outs)))), _pow2_floor(n // CHUNK_MIN))
  while S >= 2 and chunked(sorted(red.src[1:], key=_axis), _chunk_range(f, S), S) is None: S //= 2
  return (red, outs, S) if S >= 2 else None

def split(f: Func) -> Split | None:
  """f as two phases (see the module docstring), or None where plan() declines it."""
  if (p := plan(f)) is None: return None
  red, outs, S = p
  pdt, n_out = COMPUTE.get(red.dtype, red.dtype), math.prod(map(_size, outs))
  part = arg_buffer(len(f.args), pdt.ptr(n_out * S))
  # (uop.split_phase: no tiles for a phase, gpu_tiles.plan: a long-k contraction's few outputs would make a few blocks)
  args, keep = [*f.args, part], {**{k: v for k, v in f.attrs.items() if k in KEEP}, "uop.split_phase": None}
  at = lambda i: UOp(Ops.INDEX, pdt.ptr(), (part, im.add(im.mul(im.linearize(outs, [_size(r) for r in outs]), im.const(S)), i)))
  # phase 1: block (output, chunk) reduces its chunk
  sub, inner, tail = chunked(rngs := sorted(red.src[1:], key=_axis), s := _chunk_range(f, S), S)
  def part_of(sub: dict) -> UOp:   # the reduce's operand at ranges sub, in the partials' dtype
    x = red.src[0].substitute(sub)
    return x if pdt is red.dtype else UOp(Ops.CAST, pdt, (x,))
  chunk = UOp(Ops.REDUCE, pdt, (part_of(sub), *inner), red.arg)
  st = UOp(Ops.STORE, dtypes.void, (at(s), chunk))
  first = Func(f"{f.name}_0", args, [], [UOp(Ops.SINK, dtypes.void, (UOp(Ops.END, dtypes.void, (st, *outs, s)),))], keep)
  # phase 2: the kernel, its reduce over the output's partials (and the tail past the chunks)
  ax = im.next_axis(f.roots[0])
  t, q = (UOp(Ops.RANGE, dtypes.index, (im.const(n),), attrs(axis=ax + i, kind="reduce")) for i, n in enumerate((S, tail)))
  total = UOp(Ops.REDUCE, pdt, (UOp(Ops.LOAD, pdt, (at(t),)), t), red.arg)
  if tail:
    rest = UOp(Ops.REDUCE, pdt, (part_of({rngs[0]: im.add(im.const(_size(rngs[0]) - tail), q)}), q), red.arg)
    total = UOp(red.attrs["op"], pdt, (total, rest))
  total = total if pdt is red.dtype else UOp(Ops.CAST, red.dtype, (total,))
  second = Func(f"{f.name}_1", args, [], [f.roots[0].substitute({red: total})], keep)
  return Split((first, second), ((n_out * S, pdt),))
