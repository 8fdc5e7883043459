"""Tiled GPU contractions (codegen/gpu_tiles.py) without a GPU: the kernels uop-lower-gpu writes for f16/bf16 (and tf32)
matmuls, batched matmuls and convolutions on sm_80+ are run by the SIMT emulator (device/simt.py: shared memory,
barriers, cp.async groups and mma.sync fragments with their hardware semantics) against numpy, through the CUDA runtime
on the fake driver, and assembled by ptxas for sm_80 and sm_90. A kernel with one of its barriers or waits taken out
must fail: the emulator sees the race."""
import ctypes, json
import numpy as np
import pytest
from morok_mlir import Tensor
from morok_mlir.ir.emit import normalize, graph_func
from morok_mlir.ir.pipeline import lower_to_kernels
from morok_mlir.codegen.lower_gpu import lower_kernel
from morok_mlir.codegen.gpu_tiles import FFMA, MMAS, TILES, TARGETS, candidates, plan, smem
from morok_mlir.core.dtype import dtypes
from morok_mlir.codegen.emitter import Emitter
from morok_mlir.device import simt
from morok_mlir.device.ptx import ptx_for, ptxas
from test_cuda import fake_cuda, gpu  # noqa: F401 (the fixture)

rng = np.random.default_rng(0)
def H(*s, dt=np.float16): return rng.standard_normal(s).astype(dt)
def contraction_kernel(t: Tensor):
  return [f for f in lower_to_kernels(graph_func(normalize([t.lazydata])[0])) if "uop.kernel" in f.attrs][-1]
def tol(ref: np.ndarray, k: int, out_dt) -> float:
  """f32 sums of k exact f16 products in another order, plus the output's rounding (f16: 2^-11 of the value)."""
  return 1e-5 * k * np.abs(ref).max() + (np.abs(ref).max() * 2.0 ** -10 if out_dt == np.float16 else 0)

def run_kernel(f, bufs: list[np.ndarray], chip="sm_80", drop: str | None = None, **kw) -> None:
  """f lowered for chip, optionally with the nth line equal to `drop` taken out (drop = 'gpu.barrier#1'), run by the emulator."""
  text, launch = lower_kernel(f, "k", chip=chip, **kw)
  assert launch.tiles
  src = Emitter.gpu_module([text])
  if drop:
    what, n = drop.split("#")
    lines = src.splitlines()
    at = [i for i, x in enumerate(lines) if x.strip().startswith(what)][int(n)]
    src = "\n".join(lines[:at] + lines[at + 1:])
  simt.run(src, bufs, launch.global_size[0], launch.local_size[0])

def matmul_case(M, N, K):
  a, b = H(M, K), H(K, N)
  f = contraction_kernel(Tensor(a) @ Tensor(b))
  assert [x.dtype.size for x in f.args] == [M * N, M * K, K * N]   # (output, a, b)
  out = np.full(M * N, np.nan, np.float16)
  return f, [out, a.reshape(-1), b.reshape(-1)], a.astype(np.float32) @ b.astype(np.float32)

# sizes that are not multiples of any tile (rows, columns and k), and one that is
@pytest.mark.parametrize("M,N,K", [(130, 72, 200), (64, 128, 96)])
@pytest.mark.parametrize("tile", [-1, *range(len(TILES))])
def test_f16_matmul_emulated(M, N, K, tile):
  """The heuristic's tile and every candidate a BEAM search on a GPU may pick."""
  f, bufs, ref = matmul_case(M, N, K)
  assert tile == -1 or tile in candidates(f, "sm_80")
  run_kernel(f, bufs, tile=tile)
  np.testing.assert_allclose(bufs[0].reshape(M, N).astype(np.float32), ref, atol=tol(ref, K, np.float16), rtol=0)

@pytest.mark.parametrize("M,N,K", [(130, 72, 200), (64, 128, 96)])
@pytest.mark.parametrize("tile", [-1, *range(len(TILES))])
def test_f32_ffma_emulated(M, N, K, tile):
  """f32 without tf32: tiles of fma.rn.f32 (every candidate tile, ragged sizes), to f32's precision, with no
  tensor-core instruction."""
  a, b = H(M, K, dt=np.float32), H(K, N, dt=np.float32)
  f = contraction_kernel(Tensor(a) @ Tensor(b))
  if tile != -1 and tile not in candidates(f, "sm_80"):   # a 128-row f32 tile of bk 32: its stages pass 48 KB of shared memory
    p = plan(f, "sm_80")
    assert smem(TILES[tile], p.a, p.b) > TARGETS["sm_80"].smem and TILES[tile].bk == 32 and 128 in (TILES[tile].bm, TILES[tile].bn)
    return
  text, _ = lower_kernel(f, "k", chip="sm_80", tile=tile)
  assert "nvvm.mma.sync" not in text and "math.fma" in text
  out = np.full(M * N, np.nan, np.float32)
  run_kernel(f, [out, a.reshape(-1), b.reshape(-1)], tile=tile)
  np.testing.assert_allclose(out.reshape(M, N), a @ b, atol=tol(a @ b, K, np.float32), rtol=0)

@pytest.mark.parametrize("drop", ["gpu.barrier#0", "gpu.barrier#1", "nvgpu.device_async_wait#0", "nvgpu.device_async_wait#1"])
def test_missing_barrier_or_wait_fails(drop):
  """The stage is read after `wait_group` and a barrier, and refilled only after another barrier: without any one of
  them threads would read shared memory another thread has not written yet (or is overwriting)."""
  f, bufs, ref = matmul_case(130, 72, 200)
  run_kernel(f, bufs, tile=0)   # the intact kernel runs clean
  with pytest.raises(simt.RaceError): run_kernel(f, bufs, tile=0, drop=drop)

def test_bf16_tf32_and_plain_f32():
  """bf16 on tensor cores; f32 on them only with tf32 allowed, then accurate to tf32's 10 bits (without: fma.rn.f32
  tiles, test_f32_ffma_emulated)."""
  M, N, K = 96, 80, 64
  a, b = H(M, K, dt=np.float32), H(K, N, dt=np.float32)
  f32 = contraction_kernel(Tensor(a) @ Tensor(b))
  assert plan(f32, "sm_90").mma is FFMA and plan(f32, "sm_90", tf32=True).mma is MMAS[dtypes.float32]
  assert plan(f32, "sm_75") is None and plan(f32, "sm_75", tf32=True) is None   # (no cp.async)
  out = np.full(M * N, np.nan, np.float32)
  run_kernel(f32, [out, a.reshape(-1), b.reshape(-1)], tf32=True)
  np.testing.assert_allclose(out.reshape(M, N), a @ b, atol=2.0 ** -9 * np.sqrt(K) * 4, rtol=0)
  ab, bb = Tensor(a).cast("bfloat16").realize(), Tensor(b).cast("bfloat16").realize()
  fb = contraction_kernel(ab @ bb)
  bits = lambda t: t.bitcast("uint16").numpy().reshape(-1)
  out = np.full(M * N, 0xFFFF, np.uint16)
  run_kernel(fb, [out, bits(ab), bits(bb)])
  ref = ab.float().numpy() @ bb.float().numpy()
  np.testing.assert_allclose(simt.bf16_value(out).reshape(M, N), ref, atol=np.abs(ref).max() * 2.0 ** -7, rtol=0)

@pytest.mark.parametrize("case", ["batched", "conv", "epilogue", "a_t", "a_t_odd", "b_t", "bf16"])
def test_through_the_cuda_runtime(fake_cuda, case):
  """Tensor programs on CUDA (a fake driver whose GPU, compute capability 8.6, runs kernels in the emulator): a batched
  matmul, a convolution (its image staged by each thread's gated loads), a bias + relu epilogue, and operands laid out
  along their rows (a.T: copied along m, or loaded by each thread where 70 rows do not split in 16-byte chunks; b.T: k
  contiguous), against numpy."""
  dev, fake = fake_cuda
  if case in ("a_t", "a_t_odd", "b_t"):
    m = 70 if case == "a_t_odd" else 72
    a, b = (H(64, m), H(64, 72)) if case != "b_t" else (H(m, 64), H(72, 64))
    t = Tensor(a).to("CUDA").T @ Tensor(b).to("CUDA") if case != "b_t" else Tensor(a).to("CUDA") @ Tensor(b).to("CUDA").T
    ref = a.T.astype(np.float32) @ b.astype(np.float32) if case != "b_t" else a.astype(np.float32) @ b.T.astype(np.float32)
  elif case == "bf16":
    a, b = H(80, 96, dt=np.float32), H(96, 64, dt=np.float32)
    ta, tb = Tensor(a).to("CUDA").cast("bfloat16"), Tensor(b).to("CUDA").cast("bfloat16")
    t, ref = (ta.realize() @ tb.realize()).float(), ta.float().numpy() @ tb.float().numpy()
  elif case == "batched":
    a, b = H(3, 70, 40), H(3, 40, 90)
    t, ref = Tensor(a).to("CUDA") @ Tensor(b).to("CUDA"), a.astype(np.float32) @ b.astype(np.float32)
  elif case == "conv":
    x, w = H(2, 16, 12, 12), H(32, 16, 3, 3)
    t = Tensor(x).to("CUDA").conv2d(Tensor(w).to("CUDA"), padding=1)
    ref = Tensor(x.astype(np.float32)).conv2d(Tensor(w.astype(np.float32)), padding=1).numpy()
  else:
    a, b, c = H(100, 64), H(64, 48), H(48)
    t = (Tensor(a).to("CUDA") @ Tensor(b).to("CUDA") + Tensor(c).to("CUDA")).relu()
    ref = np.maximum(a.astype(np.float32) @ b.astype(np.float32) + c.astype(np.float32), 0)
  out = t.numpy()
  assert any(s is not None and s.tiled for s in fake.launch_specs), "no tiled kernel ran"
  np.testing.assert_allclose(out.astype(np.float32), ref, atol=tol(ref, 144, np.float16) + (2e-2 if case != "bf16" else 0.1), rtol=0)

def _half(*s): return Tensor(H(*s, dt=np.float32)).half().realize()
PTXAS_CASES = {  # name: the tensor whose contraction kernel is assembled at every candidate tile
  "f16": lambda: _half(512, 512) @ _half(512, 512),
  "bf16": lambda: Tensor(H(512, 512, dt=np.float32)).cast("bfloat16").realize() @ Tensor(H(512, 512, dt=np.float32)).cast("bfloat16").realize(),
  "tf32": lambda: Tensor(H(512, 512, dt=np.float32)) @ Tensor(H(512, 512, dt=np.float32)),
  "f32_ffma": lambda: Tensor(H(512, 512, dt=np.float32)) @ Tensor(H(512, 512, dt=np.float32)),   # tf32 not allowed
  "conv_f32_ffma": lambda: Tensor(H(8, 64, 28, 28, dt=np.float32)).conv2d(Tensor(H(64, 64, 3, 3, dt=np.float32)), padding=1),
  "conv": lambda: _half(8, 64, 28, 28).conv2d(_half(64, 64, 3, 3), padding=1),   # the image gathered by each thread
  "batched": lambda: _half(4, 256, 128) @ _half(4, 128, 256),
  "a_t": lambda: _half(256, 512).T @ _half(256, 384),                              # A copied along its rows
  "epilogue": lambda: (_half(512, 256) @ _half(256, 384) + _half(384)).relu(),
  "ragged": lambda: (_half(500, 264) @ _half(264, 392) + _half(392)).relu(),        # every edge guarded
}
TWO_BLOCKS = {"f16", "bf16", "tf32", "f32_ffma", "batched", "a_t", "epilogue"}   # their 256-thread tiles fit 128 registers

@pytest.mark.parametrize("name", list(PTXAS_CASES))
def test_ptxas(name):
  """Every candidate tile (the plan's and BEAM's: gpu_tiles.candidates) of matmuls, a convolution, a batched matmul, a
  transposed operand and epilogues (one with sizes no tile divides), lowered for and assembled by ptxas for sm_80 and
  sm_90: no spilled byte and no stack, shared memory within the chip's static limit, and a matmul's 256-thread tiles
  within 128 registers (two blocks a multiprocessor). ptxas's registers and shared memory per tile are printed (-s):
  f16 512^3 takes 102/98/127/131/94/86/100/90 registers on sm_80 in the order of TILES, the ragged epilogue 152 to 255
  (1 block; 128 threads: .minnctapersm 1)."""
  f = contraction_kernel(PTXAS_CASES[name]())
  seen = {}
  tf32 = not name.endswith("_ffma")
  for chip in ("sm_80", "sm_90"):
    for i in candidates(f, chip, tf32=tf32):
      text, _ = lower_kernel(f, "k", chip=chip, tf32=tf32, tile=i)
      info = ptxas(ptx_for(Emitter.gpu_module([text]), chip), chip)["k"]
      assert info["spill_stores"] == info["spill_loads"] == info["stack"] == 0, (chip, TILES[i], info)
      assert 0 < info["smem"] <= TARGETS[chip].smem and info["registers"] <= 255, (chip, TILES[i], info)
      assert name not in TWO_BLOCKS or TILES[i].threads < 256 or info["registers"] <= 128, (chip, TILES[i], info)
      seen[(chip, TILES[i])] = (info["registers"], info["smem"])
  assert len(seen) >= (8 if tf32 else 6), seen
  print(f"\n{name}: " + "; ".join(f"{c} {t.bm}x{t.bn}x{t.bk}/{t.wm}x{t.wn}: {r} regs, {s} B smem" for (c, t), (r, s) in seen.items()))

def test_allow_tf32(fake_cuda):
  """f32 matmuls on CUDA run on tensor cores only once allow_tf32 is set (off by default, as PyTorch's), then to tf32's
  precision."""
  dev, fake = fake_cuda
  a, b = H(96, 128, dt=np.float32), H(128, 80, dt=np.float32)
  tc = lambda: [s is not None and s.tiled and "nvvm.mma.sync" in s.src for s in fake.launch_specs]
  assert dev.allow_tf32 is False
  np.testing.assert_allclose((Tensor(a).to("CUDA") @ Tensor(b).to("CUDA")).numpy(), a @ b, rtol=1e-4, atol=1e-4)
  assert any(s is not None and s.tiled for s in fake.launch_specs) and not any(tc())   # fma.rn.f32 tiles
  dev.allow_tf32 = True
  out = (Tensor(a).to("CUDA") @ Tensor(b).to("CUDA")).numpy()   # the same graph: its schedule is compiled again
  assert any(tc())
  np.testing.assert_allclose(out, a @ b, atol=2.0 ** -9 * np.sqrt(128) * 4, rtol=0)
  dev.allow_tf32 = False   # and back: f32's precision again, not the tf32 schedule cached a moment ago
  fake.launch_specs.clear()
  np.testing.assert_allclose((Tensor(a).to("CUDA") @ Tensor(b).to("CUDA")).numpy(), a @ b, rtol=1e-4, atol=1e-4)
  assert fake.launch_specs and not any(tc())

def test_fragment_layouts_as_the_ptx_isa_tables():
  """The emulator's fragments, spot-checked against the PTX ISA's figures (lane 5: groupID 1, threadID_in_group 1), and
  the lowering's tables (gpu_tiles.FRAG_*) agreeing with them for every lane."""
  from morok_mlir.codegen.gpu_tiles import FRAG_A, FRAG_B, FRAG_C
  a, b, c = simt.frag(16, "f16")
  assert [(int(r[5]), int(k[5])) for r, k in a] == [(1, 2), (1, 3), (9, 2), (9, 3), (1, 10), (1, 11), (9, 10), (9, 11)]
  assert [(int(k[5]), int(n[5])) for k, n in b] == [(2, 1), (3, 1), (10, 1), (11, 1)]
  assert [(int(r[5]), int(n[5])) for r, n in c] == [(1, 2), (1, 3), (9, 2), (9, 3)]
  a8, b8, _ = simt.frag(8, "tf32")
  assert [(int(r[5]), int(k[5])) for r, k in a8] == [(1, 1), (9, 1), (1, 5), (9, 5)] and [(int(k[5]), int(n[5])) for k, n in b8] == [(1, 1), (5, 1)]
  lane = np.arange(32)
  for kk, pack in ((16, 2), (8, 1)):
    ea, eb, ec = simt.frag(kk, "")
    assert all((r == lane // 4 + dr).all() and (k == pack * (lane % 4) + dk).all() for (r, k), (dr, dk) in zip(ea, FRAG_A[kk]))
    assert all((k == pack * (lane % 4) + dk).all() and (n == lane // 4).all() for (k, n), dk in zip(eb, FRAG_B[kk]))
    assert all((r == lane // 4 + dr).all() and (n == 2 * (lane % 4) + dc).all() for (r, n), (dr, dc) in zip(ec, FRAG_C))

def test_beam_times_every_tile_and_caches_the_fastest(fake_cuda, tmp_path, monkeypatch):
  """BEAM on CUDA: each candidate tile of a tiled matmul is compiled, run, checked against the heuristic tile's results
  and timed by CUDA events (the fake driver's clock, each tile's time set here); the fastest is the one launched, cached
  in memory and on disk under a key with the chip, so that a new process's view compiles and times nothing. A faster
  tile the driver refuses to load, or one whose results are wrong, is dropped."""
  from morok_mlir.device.cuda import CompiledSpec
  from morok_mlir import realize as rz
  from morok_mlir.device import search
  dev, fake = fake_cuda
  monkeypatch.setattr(search, "_path", lambda k: str(tmp_path / f"beam-{k}.json"))
  monkeypatch.setattr(search, "_memo", {})
  monkeypatch.setattr(search, "GPU_RUNS", 2)
  monkeypatch.delenv("BEAM", raising=False)
  M, N, K = 96, 80, 64
  a, b = H(M, K), H(K, N)
  f = contraction_kernel(Tensor(a) @ Tensor(b))
  cands, heur = candidates(f, "sm_86"), TILES.index(plan(f, "sm_86").tile)
  refused, wrong, fastest = [i for i in cands if i != heur][:3]
  ms = {i: {refused: 0.1, wrong: 0.2, fastest: 0.25}.get(i, 1.0 + i) for i in cands}
  tile_of = lambda spec: spec.func.attrs.get("uop.gpu_tile") if spec is not None else None
  fake.kernel_ms = lambda spec: ms.get(tile_of(spec), 0.01)
  compile, run0 = dev.compiler.compile, fake._run
  def bad_ptx(spec, chip): return CompiledSpec(spec, "garbage", chip) if tile_of(spec) == refused else compile(spec, chip)
  def wrong_out(fn, grid, block, addrs):
    run0(fn, grid, block, addrs)
    if tile_of(spec := fake.specs.get(fn[0])) == wrong: ctypes.memset(addrs[0], 0, spec.args[0][0] * spec.args[0][1].itemsize)   # (the output)
  monkeypatch.setattr(dev.compiler, "compile", bad_ptx)
  monkeypatch.setattr(fake, "_run", wrong_out)
  ref = a.astype(np.float32) @ b.astype(np.float32)
  def run():
    fake.launch_specs.clear()
    out = (Tensor(a).to("CUDA") @ Tensor(b).to("CUDA")).realize(beam=2).numpy()
    np.testing.assert_allclose(out.astype(np.float32), ref, atol=tol(ref, K, np.float16), rtol=0)
    return [s.func.attrs.get("uop.gpu_tile") for s in fake.launch_specs if s is not None and s.tiled]
  before = dict(search.stats)
  launched = run()
  assert search.stats["searches"] - before["searches"] == 1 and search.stats["compiles"] - before["compiles"] == len(cands)
  assert set(launched) == set(cands) - {refused} and launched[-1] == fastest   # each run, then the chosen one is the kernel run
  [entry] = [json.loads(p.read_text()) for p in tmp_path.glob("beam-*.json")]
  assert entry["choices"] == {"uop.gpu_tile": fastest} and entry["chip"] == "sm_86" and entry["timed"] == len(cands) - 2
  assert {int(i) for i in entry["tiles_ms"]} == set(cands) - {refused, wrong}
  rz._schedule_cache.clear(); search._memo.clear()   # a new process: only the disk entry is left
  before = dict(search.stats)
  assert run() == [fastest]
  assert {k: search.stats[k] - before[k] for k in before} == {"searches": 0, "compiles": 0, "runs": 0, "hits": 1}
  keys = {search.gpu_key(f, chip, tf32) for chip in ("sm_80", "sm_86", "sm_90") for tf32 in (False, True)}
  assert len(keys) == 6   # another chip, or tf32 allowed, is searched again

@gpu
def test_every_tile_and_beam_on_gpu(tmp_path, monkeypatch):
  """On a GPU: an f16 matmul through each candidate tile against numpy, then BEAM=2 (its tiles timed by CUDA events)
  gives the same results and caches its choice: the next compile of the graph searches nothing."""
  from dataclasses import replace
  from morok_mlir import realize as rz
  from morok_mlir.lru import LRU
  from morok_mlir.device import cuda, search
  monkeypatch.setattr(search, "_path", lambda k: str(tmp_path / f"beam-{k}.json"))
  monkeypatch.setattr(search, "_memo", {})
  monkeypatch.setattr(rz, "_schedule_cache", LRU(rz.schedule_nbytes))
  M, N, K = 256, 136, 72
  a, b = H(M, K), H(K, N)
  ref = a.astype(np.float32) @ b.astype(np.float32)
  f, dev = contraction_kernel(Tensor(a) @ Tensor(b)), cuda.CUDA
  dev.init()
  al, cands = dev.allocator, candidates(f, dev.chip)
  assert len(cands) >= 2 and dev.time_ms(lambda: None, 1) >= 0
  bx, by = al.from_numpy(a.reshape(-1)), al.from_numpy(b.reshape(-1))
  for i in cands:
    out = al.alloc(M * N, "float16")
    dev.compile(replace(f, attrs={**f.attrs, "uop.gpu_tile": i}))(out, bx, by, wait=True)
    np.testing.assert_allclose(al.to_numpy(out).reshape(M, N).astype(np.float32), ref, atol=tol(ref, K, np.float16), rtol=0, err_msg=str(TILES[i]))
  before = dict(search.stats)
  for n in (1, 2):
    got = (Tensor(a).to("CUDA") @ Tensor(b).to("CUDA")).realize(beam=2).numpy()
    np.testing.assert_allclose(got.astype(np.float32), ref, atol=tol(ref, K, np.float16), rtol=0)
    if n == 1: rz._schedule_cache.clear(); search._memo.clear()
  assert search.stats["searches"] - before["searches"] == 1 and search.stats["hits"] - before["hits"] == 1

@gpu
def test_every_ffma_tile_on_gpu():
  """On a GPU: an f32 matmul (tf32 not allowed) through each candidate FFMA tile against numpy, to f32's precision."""
  from dataclasses import replace
  from morok_mlir.device import cuda
  M, N, K = 200, 136, 300
  a, b = H(M, K, dt=np.float32), H(K, N, dt=np.float32)
  f, dev = contraction_kernel(Tensor(a) @ Tensor(b)), cuda.CUDA
  dev.init()
  assert dev.allow_tf32 is False and plan(f, dev.chip).mma is FFMA
  al = dev.allocator
  bx, by = al.from_numpy(a.reshape(-1)), al.from_numpy(b.reshape(-1))
  for i in candidates(f, dev.chip):
    out = al.alloc(M * N, "float32")
    dev.compile(replace(f, attrs={**f.attrs, "uop.gpu_tile": i}))(out, bx, by, wait=True)
    np.testing.assert_allclose(al.to_numpy(out).reshape(M, N), a @ b, atol=tol(a @ b, K, np.float32), rtol=0, err_msg=str(TILES[i]))
