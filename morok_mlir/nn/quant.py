"""Block-quantized weights read in place: GGML's block formats (the layouts of llama.cpp's ggml-quants.c) as Tensor ops.

A quantized matrix stays a uint8 Tensor of its raw blocks, shape (nblocks, block bytes); `dequantize` decodes it with
elementwise ops (byte slices, `&`/`>>` of the uint8 values, fp16 scales assembled from two bytes and bitcast, casts,
multiplies), so the decode fuses into the kernel that reads the weight: `x @ dequantize(...).T` reads the blocks
(4.5-8.5 bits per weight), never a float32 copy of the matrix.

QUANTS: name -> QuantFormat(block: weights per block, nbytes: bytes per block, decode: (n, nbytes) uint8 -> (n, block) f32).
"""
from __future__ import annotations
import functools, math, operator
from dataclasses import dataclass
from typing import Callable
from morok_mlir.core.dtype import dtypes
from morok_mlir.core.provenance import error as _err
from morok_mlir.tensor import Tensor

def _f16(b: Tensor, at: int) -> Tensor:
  """the little-endian fp16 at byte `at` of each block, as a float32 column (n, 1)."""
  lo, hi = b[:, at:at + 1].cast(dtypes.uint16), b[:, at + 1:at + 2].cast(dtypes.uint16)
  return (lo | (hi << 8)).bitcast(dtypes.float16).cast(dtypes.float32)

def _fields(q: Tensor, bits: int) -> Tensor:
  """(..., k) bytes -> (..., 8 // bits, k): field f of each byte is its bits f*bits .. (f+1)*bits - 1. Shifts by constants
  (a shift by a tensor of amounts keeps LLVM from vectorizing the decode), stacked two by two: uop-rangeify stores a
  cat of 3 parts or more apart, and the decode would no longer fuse into the kernel reading the weight."""
  fs, d = [q & ((1 << bits) - 1), *[(q >> f) & ((1 << bits) - 1) for f in range(bits, 8 - bits, bits)], q >> (8 - bits)], -2
  while len(fs) > 1: fs, d = [a.stack(b, dim=d) for a, b in zip(fs[::2], fs[1::2])], d - 1
  return fs[0].reshape(*q.shape[:-1], 8 // bits, q.shape[-1])

def _nibbles(q: Tensor) -> Tensor:
  """(..., k) bytes -> (..., 2k) 4-bit values: the k low nibbles, then the k high ones (GGML's order within a run)."""
  return _fields(q, 4).reshape(*q.shape[:-1], 2 * q.shape[-1])

def _q4_0(b: Tensor) -> Tensor:   # d f16, 16 bytes of nibbles: w = (q - 8) * d
  return (_nibbles(b[:, 2:18]).cast(dtypes.float32) - 8) * _f16(b, 0)

def _q4_1(b: Tensor) -> Tensor:   # d f16, m f16, 16 bytes of nibbles: w = q * d + m
  return _nibbles(b[:, 4:20]).cast(dtypes.float32) * _f16(b, 0) + _f16(b, 2)

def _fifth_bits(qh: Tensor) -> Tensor:
  """(n, 4) bytes of a little-endian uint32 -> (n, 32) bits, bit k for weight k: the word shifted right by k. Weight k's
  lane takes its own amount (one vector shift by a vector of amounts); per-byte fields would step 1/8 byte per lane."""
  word = functools.reduce(operator.or_, [qh[:, i:i + 1].cast(dtypes.uint32) << (8 * i) for i in range(4)])
  return ((word >> Tensor.arange(32, dtype=dtypes.uint32, device=qh.device)) & 1).cast(dtypes.uint8)

def _q5_0(b: Tensor) -> Tensor:   # d f16, 32 high bits, 16 bytes of nibbles: w = (q + 16 * high - 16) * d
  return ((_nibbles(b[:, 6:22]) | (_fifth_bits(b[:, 2:6]) << 4)).cast(dtypes.float32) - 16) * _f16(b, 0)

def _q5_1(b: Tensor) -> Tensor:   # d f16, m f16, 32 high bits, 16 bytes of nibbles: w = (q + 16 * high) * d + m
  return (_nibbles(b[:, 8:24]) | (_fifth_bits(b[:, 4:8]) << 4)).cast(dtypes.float32) * _f16(b, 0) + _f16(b, 2)

def _q8_0(b: Tensor) -> Tensor:   # d f16, 32 int8: w = q * d
  return b[:, 2:34].bitcast(dtypes.int8).cast(dtypes.float32) * _f16(b, 0)

def _k_scales(s: Tensor) -> tuple[Tensor, Tensor]:
  """12 bytes of eight 6-bit (scale, min) pairs (Q4_K, Q5_K) -> two (n, 8, 1) float32 columns."""
  lo, mid, hi = s[:, 0:4], s[:, 4:8], s[:, 8:12]
  sc = (lo & 63).cat((hi & 15) | ((lo >> 6) << 4), dim=1)
  mn = (mid & 63).cat((hi >> 4) | ((mid >> 6) << 4), dim=1)
  return sc.cast(dtypes.float32).unsqueeze(-1), mn.cast(dtypes.float32).unsqueeze(-1)

def _q4_k(b: Tensor) -> Tensor:
  """d f16, dmin f16, 12 bytes of scales and mins, 128 bytes of nibbles in 4 runs of 32 bytes (each run's low nibbles
  are one sub-block of 32, its high nibbles the next): w = d * scale * q - dmin * min, per sub-block."""
  sc, mn = _k_scales(b[:, 4:16])
  q = _nibbles(b[:, 16:144].reshape(-1, 4, 32)).reshape(-1, 8, 32).cast(dtypes.float32)
  return ((_f16(b, 0).unsqueeze(-1) * sc) * q - _f16(b, 2).unsqueeze(-1) * mn).reshape(-1, 256)

def _q5_k(b: Tensor) -> Tensor:
  """Q4_K's layout with 32 bytes of fifth bits after the scales (bit s of byte l: sub-block s's weight l) before the
  nibbles: w = d * scale * (q + 16 * high) - dmin * min."""
  sc, mn = _k_scales(b[:, 4:16])
  q = (_nibbles(b[:, 48:176].reshape(-1, 4, 32)).reshape(-1, 8, 32) | (_fields(b[:, 16:48], 1) << 4)).cast(dtypes.float32)
  return ((_f16(b, 0).unsqueeze(-1) * sc) * q - _f16(b, 2).unsqueeze(-1) * mn).reshape(-1, 256)

def _q6_k(b: Tensor) -> Tensor:
  """128 bytes of low nibbles, 64 bytes of 2-bit high parts, 16 int8 scales, d f16. Each half of 128 weights: 64 low
  bytes (low nibbles: sub-runs 0, 1; high nibbles: 2, 3) and 32 high bytes (bits 2k..2k+1 for sub-run k); the
  scale of weight j of the half's sub-run k is scales[half * 8 + k * 2 + j // 16]: w = d * scale * (q - 32)."""
  low = _nibbles(b[:, 0:128].reshape(-1, 2, 64))                       # (n, 2 halves, 128): sub-run k at k*32
  high = _fields(b[:, 128:192].reshape(-1, 2, 32), 2).reshape(-1, 2, 128)
  q = (low | (high << 4)).cast(dtypes.float32) - 32
  sc = b[:, 192:208].bitcast(dtypes.int8).cast(dtypes.float32).reshape(-1, 2, 8, 1)
  return (_f16(b, 208).reshape(-1, 1, 1, 1) * sc * q.reshape(-1, 2, 8, 16)).reshape(-1, 256)

@dataclass(frozen=True)
class QuantFormat:
  block: int                              # weights per block
  nbytes: int                             # bytes per block
  decode: Callable[[Tensor], Tensor]      # (n, nbytes) uint8 -> (n, block) float32
  @property
  def bits(self) -> float: return 8 * self.nbytes / self.block

QUANTS: dict[str, QuantFormat] = {
  "Q4_0": QuantFormat(32, 18, _q4_0), "Q4_1": QuantFormat(32, 20, _q4_1), "Q5_0": QuantFormat(32, 22, _q5_0),
  "Q5_1": QuantFormat(32, 24, _q5_1), "Q8_0": QuantFormat(32, 34, _q8_0),
  "Q4_K": QuantFormat(256, 144, _q4_k), "Q5_K": QuantFormat(256, 176, _q5_k), "Q6_K": QuantFormat(256, 210, _q6_k),
}

def dequantize(raw: Tensor, fmt: str, shape: tuple[int, ...]) -> Tensor:
  """The float32 tensor of `shape` whose values the blocks `raw` (uint8, any shape of nblocks * nbytes bytes) hold in
  format `fmt` (a key of QUANTS), row-major: block i holds elements i*block .. (i+1)*block - 1. Lazy: nothing is decoded
  until a kernel reads it."""
  if (f := QUANTS.get(fmt)) is None: _err(ValueError, f"unknown quantization format {fmt!r}: known are {sorted(QUANTS)}")
  n = math.prod(shape)
  if raw.dtype != dtypes.uint8 or n % f.block or raw.numel() * f.block != n * f.nbytes:
    _err(ValueError, f"{fmt} blocks of {f.block} weights in {f.nbytes} bytes: {raw.dtype} {raw.shape} cannot hold {shape}")
  return f.decode(raw.reshape(n // f.block, f.nbytes)).reshape(shape)
