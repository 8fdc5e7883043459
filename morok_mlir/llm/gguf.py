"""GGUF files (llama.cpp's format) read with the `gguf` package into lazy Tensors whose quantized weights stay raw blocks.

  load_gguf(path, in_memory=None) -> GGUFModel(arch, metadata, tensors)

metadata: every key/value of the file (strings decoded, arrays as lists; the header's GGUF.* entries left out).
tensors: by the file's names ("token_embd.weight", "blk.0.attn_q.weight", ...), float32 values, shapes in PyTorch order
(gguf's ne reversed: a matrix is (out_features, in_features), so a linear layer is `x @ W.T`). A quantized tensor is a
uint8 Tensor over the file's bytes followed by its format's decode (morok_mlir.nn.quant), which fuses into the kernel
that reads the weight: nothing is decoded at load. The bytes are read into huge pages of this process (in_memory), or
left in the file's read-only mapping (4 KiB pages of the page cache): a decode step reads every weight, and on a virtual
machine each 4 KiB page missing from the TLB costs a nested page walk (bench/RESULTS.md). Resident memory is about the
file's size either way.

Layout facts a llama model needs:
- attn_q / attn_k rows are NOT in Hugging Face's order. llama.cpp's converter (convert_hf_to_gguf.py, LlamaModel) permutes
  them per head, `w.reshape(n_head, 2, head_dim // 2, dim).swapaxes(1, 2)`, so that within each head the rotary pairs
  are adjacent rows (2i, 2i+1) (Meta's original layout, GGML's "normal" RoPE). With these tensors apply RoPE to
  interleaved pairs: (x[2i], x[2i+1]) rotated by angle pos * base^(-2i/head_dim). HF's rotate_half (pairs (i, i + d/2))
  on them is wrong; `unpermute_qk` undoes the permutation if HF's form is wanted. attn_k uses n_head_kv heads.
- A file without output.weight (SmolLM2) ties the output projection to token_embd.weight.
- Use the tensors as they are, inside the model's graph: realizing one (`.realize()`, `.numpy()`, load_state_dict's
  assign + realize) stores its float32 values in a buffer of their own, four to seven times the blocks' size.
"""
from __future__ import annotations
import math, os, stat, sys
from dataclasses import dataclass, field
import numpy as np
from gguf import GGUFReader, GGUFValueType, GGMLQuantizationType, GGML_QUANT_SIZES
from morok_mlir.core.dtype import dtypes
from morok_mlir.core.provenance import error as _err, user_loc
from morok_mlir.device import Device
from morok_mlir.nn.quant import QUANTS, dequantize
from morok_mlir.realize import new_buffer
from morok_mlir.tensor import Tensor

# unquantized types: GGML type name -> the numpy dtype of its elements
PLAIN = {"F32": np.float32, "F16": np.float16, "BF16": dtypes.bfloat16.np}
GGML_MAX_DIMS = 4

@dataclass
class GGUFModel:
  arch: str                                                       # general.architecture, e.g. "llama"
  metadata: dict[str, object] = field(repr=False)
  tensors: dict[str, Tensor] = field(repr=False)

class _Reader(GGUFReader):
  """gguf 0.19's reader, made to fail with a clear message: its reads stop at the end of the file (the base class returns
  short arrays and fails later, obscurely), and each tensor's type, dims and data span are checked before they are used."""
  def __init__(self, path, size: int):
    self.size = size
    super().__init__(path, mode="r")
  def _get(self, offset, dtype, count=1, override_order=None):
    if (end := int(offset) + np.dtype(dtype).itemsize * int(count)) > self.size:
      raise ValueError(f"it is truncated: a read at byte {int(offset)} needs {end - int(offset)} bytes, the file has {self.size}")
    return super()._get(offset, dtype, count, override_order)
  def _get_field_parts(self, orig_offs, raw_type):
    if int(raw_type) not in GGUFValueType._value2member_map_: raise ValueError(f"unknown value type {int(raw_type)} at byte {orig_offs}")
    if raw_type != GGUFValueType.ARRAY: return super()._get_field_parts(orig_offs, raw_type)
    # its length must fit in the file before anything is walked
    itype, n = int(self._get(orig_offs, np.uint32)[0]), int(self._get(orig_offs + 4, np.uint64)[0])
    least = np.dtype(self.gguf_scalar_to_np[GGUFValueType(itype)]).itemsize if itype in self.gguf_scalar_to_np else 8
    if orig_offs + 12 + n * least > self.size:
      raise ValueError(f"an array at byte {orig_offs} of {n} items needs at least {n * least} bytes, the file has {self.size}")
    # the base class makes one to three numpy arrays per item (a vocabulary's 100k strings: ~100 MB of Python objects);
    # an array of numbers or strings is one part here, its items' bytes, that _value decodes (arrays of arrays: the base's)
    if itype != GGUFValueType.STRING and itype not in self.gguf_scalar_to_np: return super()._get_field_parts(orig_offs, raw_type)
    start, head = orig_offs + 12, [self._get(orig_offs, np.uint32), self._get(orig_offs + 4, np.uint64)]
    if itype == GGUFValueType.STRING: items = self._get(start, np.uint8, _strings(self.data[start:], n, self._order, start, self.size)[0])
    else: items = self._get(start, self.gguf_scalar_to_np[GGUFValueType(itype)], n)
    return 12 + items.nbytes, [*head, items], [2], [GGUFValueType.ARRAY, GGUFValueType(itype)]
  @property
  def _order(self) -> str: return sys.byteorder if self.byte_order == "I" else {"little": "big", "big": "little"}[sys.byteorder]
  # the counts of the header, before the base class reads entry by entry: each entry takes at least these many bytes
  def _build_fields(self, offs, count):
    self._fits(offs, int(count), 13, "metadata entries")   # key length, type, a 1-byte value
    return super()._build_fields(offs, count)
  def _build_tensor_info(self, offs, count):
    self._fits(offs, int(count), 24, "tensors")   # name length, dim count, type, offset
    return super()._build_tensor_info(offs, count)
  def _fits(self, offs: int, n: int, least: int, what: str):
    if offs + n * least > self.size: raise ValueError(f"its header lists {n} {what}, more than the {self.size} bytes of the file can hold")
  def _build_tensors(self, start_offs: int, fields) -> None:
    for f in fields:
      _, _, _, dims, raw_type, offset = f.parts
      name, dims, t = f.name, [int(d) for d in dims], int(raw_type[0])
      if t not in GGMLQuantizationType._value2member_map_: raise ValueError(f"tensor {name!r} has unknown type id {t}")
      qt = GGMLQuantizationType(t)
      if qt.name not in PLAIN and qt.name not in QUANTS:
        raise ValueError(f"tensor {name!r} has type {qt.name}, which is not supported (supported: {sorted({*PLAIN, *QUANTS})})")
      if not 1 <= len(dims) <= GGML_MAX_DIMS or min(dims) < 1:
        raise ValueError(f"tensor {name!r} has dims {dims}: 1 to {GGML_MAX_DIMS} dims, each at least 1")
      block, nbytes = GGML_QUANT_SIZES[qt]
      if dims[0] % block: raise ValueError(f"tensor {name!r} of {qt.name} has a row of {dims[0]}, not a multiple of its block of {block}")
      begin, span = start_offs + int(offset[0]), math.prod(dims) // block * nbytes
      if begin % self.alignment: raise ValueError(f"tensor {name!r} starts at byte {begin}, not a multiple of the alignment {self.alignment}")
      if begin + span > self.size:
        raise ValueError(f"tensor {name!r} ({qt.name} {dims}) needs bytes {begin}..{begin + span}, past the end of the file"
                         f" ({self.size} bytes): it is truncated, or its dims or offset are wrong")
    super()._build_tensors(start_offs, fields)

def _tensor(t, loc: str, fd: int | None) -> Tensor:
  shape, name = tuple(int(d) for d in reversed(t.shape.tolist())), t.tensor_type.name
  raw = np.asarray(t.data).reshape(-1)   # the memmap's bytes (or elements), no copy
  if fd is not None: raw = _read(fd, t, raw)
  if name in PLAIN:
    x = Tensor(new_buffer(raw.view(PLAIN[name]), loc)).reshape(shape)
    return x if name == "F32" else x.cast(dtypes.float32)
  return dequantize(Tensor(new_buffer(raw.view(np.uint8), loc)), name, shape)

def _read(fd: int, t, raw: np.ndarray) -> np.ndarray:
  """raw's bytes (tensor t's, in the file at fd) read into a lasting block of the CPU allocator (huge pages), not
  through the mapping (whose pages would then be resident too)."""
  buf, at, done = Device["CPU"].allocator.alloc(raw.nbytes, dtypes.uint8, lasting=True), int(t.data_offset), 0
  while done < raw.nbytes:   # (a read may return less than asked: Linux reads at most 0x7ffff000 bytes a call)
    if not (n := os.preadv(fd, [memoryview(buf)[done:]], at + done)):
      raise ValueError(f"tensor {t.name!r}: read {done} of its {raw.nbytes} bytes: the file changed while it was loaded")
    done += n
  return buf.view(raw.dtype)

IN_MEMORY_SHARE = 4   # a file read into memory (in_memory=None) takes at most 1/this of the memory available
def _available() -> int:
  """Bytes of memory available now (/proc/meminfo's MemAvailable), 0 where unknown."""
  try:
    with open("/proc/meminfo") as f: return next(int(l.split()[1]) * 1024 for l in f if l.startswith("MemAvailable:"))
  except (OSError, StopIteration, ValueError): return 0

def _strings(buf, n: int, order: str, at: int = 0, size: int = 0) -> tuple[int, list[bytes]]:
  """n GGUF strings (a uint64 length, then the bytes) from the start of buf, which begins at byte `at` of a file of
  `size` bytes (for the message when one runs past its end): (the bytes they take, the strings)."""
  mv, out, o = memoryview(buf).cast("B"), [], 0
  for _ in range(n):
    ln = int.from_bytes(mv[o:o + 8], order) if o + 8 <= len(mv) else -1
    if ln < 0 or o + 8 + ln > len(mv):
      raise ValueError(f"it is truncated: a string at byte {at + o} needs {8 + max(ln, 0)} bytes, the file has {size or at + len(mv)}")
    out.append(bytes(mv[o + 8:o + 8 + ln])); o += 8 + ln
  return o, out

def _value(f, order: str):
  if f.types[0] == GGUFValueType.ARRAY and len(f.data) == 1 and len(f.types) == 2:   # _Reader's one part of items
    items = f.parts[f.data[0]]
    v = _strings(items, int(f.parts[-2][0]), order)[1] if f.types[1] == GGUFValueType.STRING else items.tolist()
  else: v = f.contents()
  dec = lambda x: x.decode("utf-8", "replace") if isinstance(x, bytes) else x
  return [dec(x) for x in v] if isinstance(v, list) else dec(v)

def load_gguf(path, in_memory: bool | None = None) -> GGUFModel:
  """The GGUF file at path as a GGUFModel. Its tensors' bytes are read into huge pages of this process (in_memory; None:
  where the file takes at most 1/IN_MEMORY_SHARE of the memory available), else left in the file's read-only mapping:
  memory stays about the file's size however many times its tensors are used. A file that is not a valid GGUF (not a
  regular file, wrong magic, truncated, an unknown or unsupported tensor type, absurd dims, data outside the file,
  big-endian) raises ValueError saying what is wrong."""
  loc, path = user_loc(), os.fspath(path)
  def bad(msg: str): _err(ValueError, f"load_gguf: {path} is not a valid GGUF file: {msg}")
  if not stat.S_ISREG((st := os.stat(path)).st_mode): _err(ValueError, f"load_gguf: {path} is not a regular file")
  if st.st_size < 24: bad(f"it is truncated: {st.st_size} bytes is too short for the header")
  with open(path, "rb") as fh:
    if (magic := fh.read(4)) != b"GGUF": bad(f"its magic is {magic!r}, not b'GGUF'")
  try: r = _Reader(path, st.st_size)
  except (ValueError, KeyError, IndexError, OverflowError) as e: bad(str(e).strip("'\""))
  if r.byte_order != "I": bad("it is big-endian: its tensors' bytes are not this machine's numbers")
  metadata = {k: _value(f, r._order) for k, f in r.fields.items() if not k.startswith("GGUF.")}
  if not isinstance(arch := metadata.get("general.architecture"), str): bad("it has no general.architecture string")
  if in_memory is None: in_memory = st.st_size * IN_MEMORY_SHARE <= _available()
  fd = os.open(path, os.O_RDONLY) if in_memory else None
  try:
    try: return GGUFModel(arch, metadata, {t.name: _tensor(t, loc, fd) for t in r.tensors})
    except MemoryError as e: _err(MemoryError, f"load_gguf: {path}: no memory for its tensors ({e}): in_memory=False maps them instead")
  finally:
    if fd is not None: os.close(fd)

def unpermute_qk(w: Tensor, n_head: int) -> Tensor:
  """attn_q / attn_k rows from the file's per-head interleaved rotary order back to Hugging Face's (rotate_half) order:
  the inverse of llama.cpp's converter permutation."""
  rows = w.shape[0]
  return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).transpose(1, 2).reshape(w.shape)
