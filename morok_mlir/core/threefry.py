"""Threefry2x32-20 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", 2011; Random123's threefry2x32 with
20 rounds), the counter-based generator behind `uop.threefry`: a pure function of a 64-bit counter and a 64-bit key,
so every element of a random tensor is computed independently, in any kernel, on any device, with the same bits.

uop-rangeify expands each `threefry` into these uint32 adds, rotations and xors (scalar kernel-level UOps), so both
back ends and the GPU emulator run it without a special case."""
from __future__ import annotations
from morok_mlir.core.dtype import dtypes
from morok_mlir.core.uop import UOp, attrs
from morok_mlir.dialects.ops import Ops

ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))   # R_32x2, four rounds each, alternating
PARITY = 0x1BD11BDA                                 # Skein's key schedule parity constant

def _c(v: int, dt=dtypes.uint32) -> UOp: return UOp(Ops.CONST, dt, (), attrs(value=v))
def _op(op, *src: UOp) -> UOp: return UOp(op, src[0].dtype, src)

def threefry2x32(x: UOp, key: UOp) -> UOp:
  """x and key are uint64 scalars, each read as two 32-bit words (low word first); the result packs the two output words
  the same way."""
  u32, u64 = dtypes.uint32, dtypes.uint64
  lo = lambda v: UOp(Ops.CAST, u32, (_op(Ops.AND, v, _c(0xFFFFFFFF, u64)),))
  hi = lambda v: UOp(Ops.CAST, u32, (_op(Ops.SHR, v, _c(32, u64)),))
  ks = (lo(key), hi(key), _op(Ops.XOR, _op(Ops.XOR, lo(key), hi(key)), _c(PARITY)))
  x0, x1 = _op(Ops.ADD, lo(x), ks[0]), _op(Ops.ADD, hi(x), ks[1])
  for i in range(5):
    for r in ROTATIONS[i % 2]:
      x0 = _op(Ops.ADD, x0, x1)
      x1 = _op(Ops.XOR, _op(Ops.OR, _op(Ops.SHL, x1, _c(r)), _op(Ops.SHR, x1, _c(32 - r))), x0)
    x0, x1 = _op(Ops.ADD, x0, ks[(i + 1) % 3]), _op(Ops.ADD, _op(Ops.ADD, x1, ks[(i + 2) % 3]), _c(i + 1))
  return _op(Ops.OR, _op(Ops.SHL, UOp(Ops.CAST, u64, (x1,)), _c(32, u64)), UOp(Ops.CAST, u64, (x0,)))

def threefry2x32_py(x: int, key: int) -> int:
  """The same function on Python ints (the reference the tests check the kernels against)."""
  m = 0xFFFFFFFF
  ks = (key & m, key >> 32, (key & m) ^ (key >> 32) ^ PARITY)
  x0, x1 = ((x & m) + ks[0]) & m, ((x >> 32) + ks[1]) & m
  for i in range(5):
    for r in ROTATIONS[i % 2]:
      x0 = (x0 + x1) & m
      x1 = (((x1 << r) | (x1 >> (32 - r))) & m) ^ x0
    x0, x1 = (x0 + ks[(i + 1) % 3]) & m, (x1 + ks[(i + 2) % 3] + i + 1) & m
  return (x1 << 32) | x0
