"""BEAM: a timed search over uop-optimize's choices for one CPU kernel, cached on disk (tinygrad's BEAM=n).

uop-optimize (beam=n, or BEAM=n for realize) hands each kernel, with its heuristic attributes, to `search`. The choices
are axes of alternatives around the heuristic (`axes`): a Winograd convolution or the plain contraction; a
contraction's register tile (MR x NR of VW lanes), its KC depth, its MC rows, then threads on or off; other kernels'
threads, split reduce, reduce block and nontemporal stores.
The search is stepwise, as tinygrad's: each of the n fastest candidates so far is expanded along the next axis, every
new candidate compiled and timed, and the n fastest of all kept. A full cartesian table (4 tiles x 3 KC x 3 MC x 2
thread counts = 72 compiles at 0.3-1 s each) costs minutes per kernel; the steps cost 4 + 2n + 2n + n.

A candidate is kept only if it compiles (any exception drops it), within COMPILE_S, and gives the heuristic's results
on the same random inputs (float buffers standard normal, others zero: an index read from a zero buffer is in bounds);
its time is the best of RUNS runs after a checked one, and one whose first two runs are SLOW times the best so far is dropped.
The finalists (the fastest max(2, n)) are then timed again against the heuristic, in pairs, ROUNDS rounds, and the
heuristic is kept unless one is MARGIN faster by its median ratio and by its best time: on a loaded machine a sample
can be another process's burst, and the choice is cached for good. The winner's attributes are written to
`<cache dir>/beam-<key>.json`, the key hashing the kernel's text (locations left out), the CPU's model name and
features, threads and vec: a later compile of the kernel, in any process on this machine, applies them without timing.
A search run while other processes keep the cores busy (`busy`) is kept for this process only: its timings favour
fewer threads than a quiet machine would. An entry is used only if it is one of the choices the axes can reach (a
damaged or foreign one is searched again and rewritten). `stats` counts searches, compiles, timed runs and cache
hits; `log` lists what each kernel got.

On CUDA (`search_gpu`, through CUDADevice.search): a tiled contraction's block tile (codegen.gpu_tiles) is the one
choice. Every candidate the plan accepts on the device's chip (gpu_tiles.candidates) is compiled (PTX, loaded by the
driver, which assembles it), run once on the same random inputs and checked against the heuristic tile's results, then
timed by CUDA events around GPU_RUNS launches; the fastest is kept (one axis: n does not narrow it), as
`uop.gpu_tile` (its place in TILES), in memory and in `beam-<key>.json`, the key hashing the kernel's text, the chip
and tf32. Other kernels have no choice searched on a GPU."""
from __future__ import annotations
import collections, hashlib, json, os, tempfile, time
from dataclasses import replace
import numpy as np
from morok_mlir.ir.bridge import FILE_LOC, Func, module_text
from morok_mlir.core.dtype import PtrDType
from morok_mlir.core import index_math as im
from morok_mlir.dialects.ops import Ops
from morok_mlir.host import CPU_FLAGS, CPU_NAME
from morok_mlir.core import env
from morok_mlir.passes import optimize
from morok_mlir.codegen import winograd

CHOICES = ("uop.threads", "uop.grain", "uop.contraction", "uop.winograd", "uop.split_reduce", "uop.reduce_block", "uop.nontemporal")
RUNS, RUN_S, SLOW, COMPILE_S = 5, 0.5, 4.0, 30.0   # timed runs (at least 2, stopping past RUN_S s), drop limits
ROUNDS, MARGIN = 5, 0.03   # finalists' alternating rounds; how much faster than the heuristic a choice must be
# register tiles (MR rows, NR / VW vectors) around the heuristic's: MR*NV accumulators + NV B vectors + 1 broadcast
# fit the vector registers (16 without AVX-512, 32 with)
TILES = {16: ((6, 2), (4, 3), (8, 1), (4, 2)), 32: ((8, 2), (12, 2), (6, 4), (4, 4))}
DEBUG = env.get("DEBUG")
stats = {"searches": 0, "compiles": 0, "runs": 0, "hits": 0}
log: collections.deque = collections.deque(maxlen=256)   # (kernel, heuristic's choices, chosen) per search or hit, for benchmarks
_memo: dict[str, dict] = {}


def axes(a: dict, threads: int, vec: int, direct: tuple | None = None) -> list[list]:
  """Alternatives per axis, in search order; each a function of a choices dict (CHOICES' keys) -> another, or None.
  direct: a Winograd convolution's tiles as a plain contraction (the first axis: Winograd or not)."""
  def put(**kv):
    def f(c: dict) -> dict:
      c = dict(c)
      for k, v in kv.items():
        if v is None: c.pop(f"uop.{k}", None)
        else: c[f"uop.{k}"] = v
      return c
    return f
  out = []
  if "uop.winograd" in a and direct is not None: out.append([put(), put(winograd=None, contraction=direct)])
  if (mm := a.get("uop.contraction")) is not None:
    mr, nr, kc, mc, vw = mm
    def tile(**kw):   # MC stays a multiple of MR: the row blocks hold whole MR-row panels
      def g(c: dict) -> dict:
        d = dict(zip(("mr", "nr", "kc", "panels"), c["uop.contraction"][:3] + (c["uop.contraction"][3] // c["uop.contraction"][0],)), **kw)
        return {**c, "uop.contraction": (d["mr"], d["nr"], d["kc"], d["mr"] * d["panels"], vw)}
      return g
    out.append([tile(mr=m, nr=nv * vw) for m, nv in dict.fromkeys([(mr, nr // vw), *TILES[32 if vec >= 16 else 16]])])
    out.append([tile(kc=x) for x in dict.fromkeys((kc, kc // 2, kc * 2))])
    out.append([tile(panels=x) for x in dict.fromkeys((mc // mr, max(1, mc // mr // 2), mc // mr * 2))])
    if "uop.threads" in a: out.append([put(), put(threads=None)])
    return out
  if "uop.split_reduce" in a: out.append([put(), put(split_reduce=None, threads=None)])
  elif "uop.threads" in a: out.append([put(), put(threads=None, grain=None)])
  if (b := a.get("uop.reduce_block")) is not None: out.append([put(reduce_block=x) for x in dict.fromkeys((b, max(64, b // 4)))])
  if (nt := a.get("uop.nontemporal")) is not None:
    alts = [put(nontemporal=None, grain=None)] + ([put(nontemporal=nt // 2, grain=nt // 2 if "uop.grain" in a else None)] if nt >= 8 else [])
    out.append([put()] + alts)
  return out

def reachable(a: dict, ax: list[list]) -> list[dict]:
  """Every choices dict the axes can make from a's (the cartesian product, built without compiling)."""
  cs = [{k: a[k] for k in CHOICES if k in a}]
  for alts in ax: cs = [n for c in cs for g in alts if (n := g(c)) is not None]
  return cs

def key(f: Func, threads: int, vec: int) -> str:
  text = FILE_LOC.sub("", module_text([replace(f, name="kernel")]))
  salt = f"beam-4|{CPU_NAME}|{','.join(sorted(CPU_FLAGS))}|{threads}|{vec}|"
  return hashlib.sha256((salt + text).encode()).hexdigest()[:40]

def _path(k: str) -> str | None:
  from morok_mlir.device import Device
  disk = Device["CPU"].disk
  return os.path.join(disk.dir, f"beam-{k}.json") if disk.enabled else None

def _load(k: str) -> dict | None:
  if (c := _memo.get(k)) is not None: return c
  if (p := _path(k)) is None: return None
  try:
    with open(p) as fh: d = json.load(fh)
    return {kk: tuple(v) if isinstance(v, list) else v for kk, v in d["choices"].items()}
  except (OSError, ValueError, KeyError, TypeError, AttributeError): return None

def busy() -> bool:
  """Whether other processes keep this process's cores busy (1-minute load average past the cores it may use, plus
  one for itself): timings then favour fewer threads and need not hold on a quiet machine."""
  return os.getloadavg()[0] > len(os.sched_getaffinity(0)) + 1

def _store(k: str, choices: dict, info: dict, disk: bool = True) -> None:
  _memo[k] = choices
  if not disk or (p := _path(k)) is None: return
  try:
    os.makedirs(os.path.dirname(p), exist_ok=True)
    fd, tmp = tempfile.mkstemp(".tmp", "beam-", os.path.dirname(p))
    with os.fdopen(fd, "w") as fh: json.dump({"choices": choices, **info}, fh)
    os.replace(tmp, p)
  except OSError: pass   # a read-only cache: the result lives in this process only

def apply(f: Func, choices: dict) -> Func:
  return replace(f, attrs={**{k: v for k, v in f.attrs.items() if k not in CHOICES}, **choices})

def _inputs(spec) -> list[np.ndarray]:
  from morok_mlir.device import Device
  rng, out = np.random.default_rng(0), []
  for size, dt in spec.args:
    arr = Device["CPU"].allocator.alloc(size, dt)
    arr[...] = rng.standard_normal(size).astype(arr.dtype) if dt.is_float else 0
    out.append(arr)
  return out

def _same(got: np.ndarray, ref: np.ndarray) -> bool:
  if not np.issubdtype(ref.dtype, np.floating): return np.array_equal(got, ref)
  g, r = got.astype(np.float64), ref.astype(np.float64)
  scale = float(np.abs(r[np.isfinite(r)]).max(initial=1.0))   # reassociated sums differ by rounding relative to the largest
  return np.allclose(g, r, rtol=1e-3, atol=1e-3 * scale, equal_nan=True)

def search(f: Func, beam: int, threads: int, vec: int) -> Func:
  """f with the fastest choices found (or cached) for it; f itself when it has nothing to choose or is not static, or
  when the search itself fails (a search is an optimization: it never turns a compile into an error)."""
  try: return _search(f, beam, threads, vec)
  except Exception as e:
    if DEBUG: print(f"beam {f.name}: search failed, heuristic kept ({type(e).__name__}: {e})")
    return f

def _search(f: Func, beam: int, threads: int, vec: int) -> Func:
  if any(not isinstance(t.dtype, PtrDType) or t.dtype.size is None for t in f.args) or not f.roots or \
      any(u.op is Ops.RANGE and im.cval(u.src[0]) is None for u in f.roots[0].toposort): return f
  base = {k: f.attrs[k] for k in CHOICES if k in f.attrs}
  direct = winograd.direct(f).attrs["uop.contraction"] if "uop.winograd" in base else None
  ax = [alts for alts in axes(base, threads, vec, direct) if len(alts) > 1]
  if not ax: return f
  k = key(f, threads, vec)
  if (hit := _load(k)) is not None and hit in reachable(base, ax):
    stats["hits"] += 1; _memo[k] = hit; log.append((f.name, base, hit))
    return apply(f, hit)
  from morok_mlir.device import Device
  dev = Device["CPU"]
  stats["searches"] += 1
  bufs, pristine, ref, outs = None, None, None, ()
  times: dict[tuple, float] = {}
  dropped: set[tuple] = set()
  progs: dict[tuple, object] = {}
  def measure(c: dict) -> float | str:
    nonlocal bufs, pristine, ref, outs
    t0 = time.perf_counter()
    try: prog = dev.compile(apply(f, c))
    except Exception as e: return f"does not compile: {type(e).__name__}"   # a choice lowering rejects, a compiler failure
    finally: stats["compiles"] += 1
    if time.perf_counter() - t0 > COMPILE_S: return "compiles too slowly"
    if bufs is None:
      bufs, outs = _inputs(prog.spec), prog.spec.outs
      pristine = [b.copy() for b in bufs]
    for b, p in zip(bufs, pristine): b[...] = p
    best = times and min(times.values())
    try: prog(*bufs)   # the first call also faults in scratch buffers: checked, not timed
    except Exception as e: return f"fails to run: {type(e).__name__}"
    if ref is None: ref = [bufs[j].copy() for j in outs]
    elif not all(_same(bufs[j], r) for j, r in zip(outs, ref)): return "differs from the heuristic's results"
    progs[frozen(c)] = prog
    ts = bench(prog, RUNS)
    return "slow" if best and min(ts[:2]) > SLOW * best else min(ts)   # two runs: one can meet another process's burst
  def bench(prog, runs: int) -> list[float]:
    ts = []
    for i in range(runs):
      t0 = time.perf_counter(); prog(*bufs); ts.append(time.perf_counter() - t0); stats["runs"] += 1
      if i and sum(ts) > RUN_S: break   # (a big kernel's runs vary little; its search is mostly these runs)
    return ts
  frozen = lambda c: tuple(sorted(c.items()))
  def timed(c: dict) -> float | None:
    if (fc := frozen(c)) not in times and fc not in dropped:
      t = measure(c)
      if DEBUG >= 2: print(f"  beam {f.name}: {' '.join(f'{k[4:]}={v}' for k, v in fc)}: {f'{t * 1e3:.3f} ms' if isinstance(t, float) else t}")
      if isinstance(t, float): times[fc] = t
      else: dropped.add(fc)
    return times.get(fc)
  if timed(base) is None: return f   # the heuristic's own kernel does not compile here: nothing to compare with
  loaded = busy()
  beams = [base]
  for alts in ax:
    cands = {frozen(n): n for c in beams for g in alts if (n := g(c)) is not None}
    scored = [(t, n) for n in cands.values() if (t := timed(n)) is not None]
    beams = [n for _, n in sorted(scored + [(times[frozen(c)], c) for c in beams if frozen(c) not in cands], key=lambda x: x[0])[:beam]]
  # the finalists again in ROUNDS rounds, each one's best-of-3 against the heuristic's in the same round (order alternating):
  # a choice is kept if the median of its per-round ratios is MARGIN under 1. Adjacent samples share the machine's load,
  # which on a busy machine moves more between rounds than the candidates differ
  hfc = frozen(base)
  final = [fc for fc in dict.fromkeys(sorted(times, key=times.get)[:max(2, beam)]) if fc != hfc]
  ratios: dict[tuple, list[float]] = {fc: [] for fc in final}
  low = {fc: times[fc] for fc in final + [hfc]}   # best time seen: the machine's quietest moments
  for r in range(ROUNDS):
    for fc in final:
      t = {x: min(bench(progs[x], 3)) for x in ((hfc, fc) if r % 2 == 0 else (fc, hfc))}
      ratios[fc].append(t[fc] / t[hfc])
      for x, v in t.items(): low[x] = min(low[x], v)
  med = {fc: sorted(x)[len(x) // 2] for fc, x in ratios.items()}
  # kept only if faster both typically (median of pairs) and at best (the quietest moments): a choice is cached for good,
  # so neither a burst of another process's work nor a stretch of load may decide it alone
  wins = [fc for fc in final if med[fc] < 1 - MARGIN and low[fc] < (1 - MARGIN) * low[hfc]]
  best = min(wins, key=med.get, default=hfc)
  choices = dict(best)
  log.append((f.name, base, choices))
  _store(k, choices, {"ms": low.get(best, times[best]) * 1e3, "heuristic_ms": low[hfc] * 1e3, "x_heuristic": med.get(best, 1.0),
                      "beam": beam, "timed": len(times)}, disk=not (loaded or busy()))
  return apply(f, choices)

optimize.SEARCH = search

# ---------------------------------------------------------------- CUDA: a tiled contraction's block tile
TILE = "uop.gpu_tile"   # the Func attribute CUDA's renderer reads: uop-lower-gpu{tile=i}
GPU_RUNS = 20           # launches per timing: event resolution is ~0.5 us, a tiled kernel runs 10 us to a few ms
gpu_ms: dict[str, dict[int, float]] = {}   # kernel name -> ms per candidate tile of its last search, for benchmarks

def gpu_key(f: Func, chip: str, tf32: bool) -> str:
  text = FILE_LOC.sub("", module_text([replace(f, name="kernel", attrs={k: v for k, v in f.attrs.items() if k != TILE})]))
  return hashlib.sha256(f"beam-gpu-1|{chip}|{tf32}|{text}".encode()).hexdigest()[:40]

def search_gpu(f: Func, beam: int, dev) -> Func:
  """f with the fastest block tile found (or cached) for it on CUDA device dev; f itself where it is not a tiled
  contraction with a choice of tiles, or where the search fails (a launch the driver refuses, say)."""
  try: return _search_gpu(f, dev)
  except Exception as e:
    if DEBUG: print(f"beam {f.name}: GPU search failed, heuristic kept ({type(e).__name__}: {e})")
    return f

def _search_gpu(f: Func, dev) -> Func:
  from morok_mlir.codegen import gpu_tiles
  dev.init()
  chip, tf32 = dev.chip, dev.allow_tf32
  if len(cands := gpu_tiles.candidates(f, chip, tf32)) < 2: return f
  with_tile = lambda i: replace(f, attrs={**f.attrs, TILE: i})
  k = gpu_key(f, chip, tf32)
  if (hit := _load(k)) is not None and hit.keys() == {TILE} and hit[TILE] in cands:
    stats["hits"] += 1; _memo[k] = hit; log.append((f.name, {}, hit))
    return with_tile(hit[TILE])
  stats["searches"] += 1
  heur = gpu_tiles.TILES.index(gpu_tiles.plan(f, chip, tf32).tile)
  spec, al, ref, times = dev.renderer.render(f), dev.allocator, None, {}
  rng = np.random.default_rng(0)   # as the CPU's: floats standard normal, others zero (an index read is in bounds)
  host = [rng.standard_normal(size).astype(dt.np) if dt.is_float else np.zeros(size, dt.np) for size, dt in spec.args]
  bufs = [al.alloc(size, dt) for size, dt in spec.args]
  def measure(i: int) -> float | str:
    nonlocal ref
    try:
      prog = dev.compile(with_tile(i))
      for b, a in zip(bufs, host): al.copyin(b, a)
      prog(*bufs)
    except Exception as e:
      if i == heur: raise   # nothing to compare with
      return f"fails: {type(e).__name__}: {e}"
    finally: stats["compiles"] += 1
    got = [x.astype(np.float64) if spec.args[j][1].is_float else x for j in spec.outs for x in (al.to_numpy(bufs[j]),)]
    if ref is None: ref = got
    elif not all(_same(x, r) for x, r in zip(got, ref)): return "differs from the heuristic's results"
    ptrs = [b.ptr for b in bufs]
    stats["runs"] += GPU_RUNS + 1
    return dev.time_ms(lambda: prog.launch_ptrs(*ptrs), GPU_RUNS)
  for i in sorted(cands, key=lambda i: i != heur):   # the heuristic's first: the results the others must give
    t = measure(i)
    if DEBUG >= 2: print(f"  beam {f.name}: tile {gpu_tiles.TILES[i]}: {f'{t:.4f} ms' if isinstance(t, float) else t}")
    if isinstance(t, float): times[i] = t
  best = min(times, key=lambda i: (times[i], i != heur))
  log.append((f.name, {TILE: heur}, {TILE: best})); gpu_ms[f.name] = times
  _store(k, {TILE: best}, {"ms": times[best], "heuristic_ms": times[heur], "chip": chip, "timed": len(times), "tiles_ms": times})
  return with_tile(best)
