"""BEAM: a timed search over uop-optimize's choices, cached on disk (device/search.py). Differential against numpy;
the cache hit path is checked to compile and time nothing."""
import json, pathlib, re
import numpy as np
import pytest
from morok_mlir import Tensor
from morok_mlir import realize as rz
from morok_mlir.device import Device, search
from morok_mlir.host import THREADS, VEC_WIDTH
from morok_mlir.ir.emit import normalize, graph_func
from morok_mlir.ir.pipeline import lower_to_kernels, run_pipeline

R = np.random.default_rng(1)

@pytest.fixture
def cache(tmp_path, monkeypatch):
  """A fresh beam cache in tmp_path and no schedules or choices remembered by this process."""
  monkeypatch.setattr(search, "_path", lambda k: str(tmp_path / f"beam-{k}.json"))
  monkeypatch.setattr(search, "_memo", {})
  monkeypatch.setattr(rz, "_schedule_cache", {})
  monkeypatch.delenv("BEAM", raising=False)
  monkeypatch.setattr(search, "busy", lambda: False)   # a loaded test machine still writes its entries
  return tmp_path

def delta(before: dict) -> dict: return {k: search.stats[k] - before[k] for k in before}

def kernels(t: Tensor, beam: int) -> list:
  key, _, _ = normalize([t.uop])
  return [f for f in lower_to_kernels(graph_func(key), beam=beam) if "uop.kernel" in f.attrs]

CASES = {
  "matmul": (lambda a, b: a @ b, [(128, 192), (192, 160)], 1e-4),
  "matmul_bias_relu": (lambda a, b, c: (a @ b + c).relu(), [(96, 256), (256, 130), (130,)], 1e-4),
  "batched": (lambda a, b: a @ b, [(3, 64, 96), (3, 96, 80)], 1e-4),
  "conv": (lambda x, w: x.conv2d(w, padding=1), [(2, 16, 16, 16), (16, 16, 3, 3)], 1e-4),
  "winograd": (lambda x, w: x.conv2d(w, padding=1), [(1, 64, 28, 28), (64, 64, 3, 3)], 1e-4),   # Winograd or the plain contraction
  "sum": (lambda a: a.sum(), [(1 << 19,)], 1e-4),
  "rows": (lambda a: (a.exp() * 0.5).sum(1), [(512, 1024)], 1e-5),
}
def conv_np(x, w):
  return np.einsum("nchwij,ocij->nohw", np.lib.stride_tricks.sliding_window_view(np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))), (3, 3), axis=(2, 3)), w)
NP = {"matmul": lambda a, b: a @ b, "matmul_bias_relu": lambda a, b, c: np.maximum(a @ b + c, 0), "batched": lambda a, b: a @ b,
      "conv": conv_np, "winograd": conv_np,
      "sum": lambda a: a.sum(), "rows": lambda a: (np.exp(a) * 0.5).sum(1)}

@pytest.mark.parametrize("name", list(CASES))
def test_beam_matches_numpy_and_hits_cache(name, cache):
  fn, shapes, tol = CASES[name]
  xs = [R.standard_normal(s).astype(np.float32) for s in shapes]
  ref = NP[name](*[x.astype(np.float64) for x in xs])
  before = dict(search.stats)
  got = fn(*[Tensor(x) for x in xs]).realize(beam=2).numpy()
  np.testing.assert_allclose(got, ref, rtol=tol, atol=tol * max(1.0, np.abs(ref).max()))
  d = delta(before)
  assert d["searches"] >= 1 and d["compiles"] >= 2 and d["runs"] > 0 and d["hits"] == 0
  assert list(cache.glob("beam-*.json"))
  # a new process's view: no schedule or choice in memory, the disk entry is applied without compiling or timing
  rz._schedule_cache.clear(); search._memo.clear()
  before = dict(search.stats)
  got2 = fn(*[Tensor(x) for x in xs]).realize(beam=2).numpy()
  np.testing.assert_allclose(got2, ref, rtol=tol, atol=tol * max(1.0, np.abs(ref).max()))
  assert delta(before) == {"searches": 0, "compiles": 0, "runs": 0, "hits": d["searches"]}

def test_beam_env_and_zero_cost_without(cache, monkeypatch):
  a, b = R.standard_normal((128, 160)).astype(np.float32), R.standard_normal((160, 144)).astype(np.float32)
  before = dict(search.stats)
  np.testing.assert_allclose((Tensor(a) @ Tensor(b)).numpy(), a @ b, rtol=1e-4, atol=1e-3)
  assert delta(before) == {"searches": 0, "compiles": 0, "runs": 0, "hits": 0} and not list(cache.glob("beam-*"))
  monkeypatch.setenv("BEAM", "1")
  np.testing.assert_allclose((Tensor(a) @ Tensor(b)).numpy(), a @ b, rtol=1e-4, atol=1e-3)
  assert delta(before)["searches"] == 1
  monkeypatch.setenv("BEAM", "-1")
  for bad in ("-1", "two", "1.5"):
    monkeypatch.setenv("BEAM", bad)
    with pytest.raises(ValueError, match="BEAM must be an integer >= 0"): (Tensor(a) @ Tensor(b) + 2).numpy()
  with pytest.raises(ValueError, match="BEAM must be an integer >= 0"): (Tensor(a) @ Tensor(b) + 3).realize(beam=-2)

def test_beam_choices_are_reachable_and_heuristic_without_search(cache):
  t = Tensor(R.standard_normal((128, 192)).astype(np.float32)) @ Tensor(R.standard_normal((192, 160)).astype(np.float32))
  [h] = kernels(t, 0)
  [s] = kernels(t, 2)
  base = {k: h.attrs[k] for k in search.CHOICES if k in h.attrs}
  assert h.attrs["uop.contraction"][4] == VEC_WIDTH and ("uop.threads" in h.attrs) == (THREADS > 1)
  assert {k: s.attrs[k] for k in search.CHOICES if k in s.attrs} in search.reachable(base, search.axes(base, THREADS, VEC_WIDTH))
  assert {k: v for k, v in s.attrs.items() if k not in search.CHOICES} == {k: v for k, v in h.attrs.items() if k not in search.CHOICES}

def test_beam_damaged_or_foreign_entry_is_searched_again(cache):
  a, b = R.standard_normal((128, 192)).astype(np.float32), R.standard_normal((192, 160)).astype(np.float32)
  (Tensor(a) @ Tensor(b)).realize(beam=1)
  [entry] = cache.glob("beam-*.json")
  for text in ("{not json", json.dumps({"choices": {"uop.contraction": [7, 24, 100, 70, 8]}}), json.dumps({"choices": [1]}), ""):
    entry.write_text(text)
    rz._schedule_cache.clear(); search._memo.clear()
    before = dict(search.stats)
    np.testing.assert_allclose((Tensor(a) @ Tensor(b)).realize(beam=1).numpy(), a @ b, rtol=1e-4, atol=1e-3)
    assert delta(before)["searches"] == 1 and delta(before)["hits"] == 0
    assert json.loads(entry.read_text())["choices"]   # rewritten whole

def test_beam_on_a_busy_machine_is_not_cached_on_disk(cache, monkeypatch):
  monkeypatch.setattr(search, "busy", lambda: True)
  a, b = R.standard_normal((128, 192)).astype(np.float32), R.standard_normal((192, 160)).astype(np.float32)
  before = dict(search.stats)
  np.testing.assert_allclose((Tensor(a) @ Tensor(b)).realize(beam=1).numpy(), a @ b, rtol=1e-4, atol=1e-3)
  assert delta(before)["searches"] == 1 and not list(cache.glob("beam-*"))
  rz._schedule_cache.clear()
  np.testing.assert_allclose((Tensor(a) @ Tensor(b)).realize(beam=1).numpy(), a @ b, rtol=1e-4, atol=1e-3)
  assert delta(before)["searches"] == 1 and delta(before)["hits"] == 1   # this process remembers it

def test_beam_drops_candidates_that_fail(cache, monkeypatch):
  """A candidate whose compile raises, or whose results differ from the heuristic's, never wins and never crashes."""
  a, b = R.standard_normal((128, 192)).astype(np.float32), R.standard_normal((192, 160)).astype(np.float32)
  t = Tensor(a) @ Tensor(b)
  h = kernels(t, 0)[0].attrs["uop.contraction"]
  cpu = Device["CPU"]
  real = cpu.compile
  def flaky(f):
    c = f.attrs.get("uop.contraction")
    if c is not None and c[2] != h[2]: raise RuntimeError("compiler failure")
    p = real(f)
    if c is None or c[3] // c[0] == h[3] // h[0]: return p
    class Wrong:   # a miscompiled candidate: every output doubled
      spec = p.spec
      def __call__(self, *bufs):
        p(*bufs)
        for i in p.spec.outs: bufs[i][...] *= 2
    return Wrong()
  monkeypatch.setattr(cpu, "compile", flaky)
  before = dict(search.stats)
  [s] = kernels(t, 3)
  assert delta(before)["searches"] == 1 and delta(before)["compiles"] > 4
  c = s.attrs["uop.contraction"]
  assert c[2] == h[2] and c[3] // c[0] == h[3] // h[0]
  monkeypatch.setattr(cpu, "compile", real)
  rz._schedule_cache.clear()
  np.testing.assert_allclose(t.realize(beam=3).numpy(), a @ b, rtol=1e-4, atol=1e-3)

def test_beam_option_of_the_pass():
  from mlir import ir
  from morok_mlir.dialects import new_context
  with new_context():
    m = ir.Module.parse("module {}")
    with pytest.raises(ir.MLIRError, match="beam must be >= 0"): run_pipeline(m, "uop-optimize{beam=-1}")

def test_beam_in_morok_opt(cache, tmp_path):
  """morok-opt's uop-optimize{beam=n}: the searched attributes are among the reachable choices; kernels with nothing to
  choose print as without beam."""
  from morok_mlir.cli import main
  src = str(pathlib.Path(__file__).parent / "lit/uop-optimize/choices.mlir")
  outs = {b: tmp_path / f"out{b}.mlir" for b in (0, 1)}
  for b, out in outs.items(): assert main([src, "-p", f"uop-optimize{{threads=2 vec=8 beam={b}}}", "-o", str(out)]) == 0
  heur, found = (re.findall(r"func\.func private @(\w+)\(.*attributes \{(.*)\} \{", outs[b].read_text()) for b in (0, 1))
  assert [n for n, _ in heur] == [n for n, _ in found] and "mm" in dict(heur)
  for (name, h), (_, s) in zip(heur, found):
    keep = lambda a: sorted(x for x in re.split(r", (?=uop\.)", a) if not x.startswith(tuple(search.CHOICES)))
    assert keep(h) == keep(s), name
  mm = re.search(r"uop\.contraction = array<i64: ([\d, ]+)>", dict(found)["mm"])
  h = tuple(int(x) for x in re.search(r"uop\.contraction = array<i64: ([\d, ]+)>", dict(heur)["mm"]).group(1).split(", "))
  base = {"uop.contraction": h, "uop.threads": 2}
  assert tuple(int(x) for x in mm.group(1).split(", ")) in {c["uop.contraction"] for c in search.reachable(base, search.axes(base, 2, 8))}

def test_beam_axis_winograd_or_contraction():
  # a Winograd convolution's first axis: itself, or the plain contraction with that product's own tiles
  x, w = Tensor(R.standard_normal((1, 64, 28, 28)).astype(np.float32)), Tensor(R.standard_normal((64, 64, 3, 3)).astype(np.float32))
  f = next(k for k in kernels(x.conv2d(w, padding=1), 0) if "uop.winograd" in k.attrs)
  from morok_mlir.codegen.winograd import direct
  base = {k: f.attrs[k] for k in search.CHOICES if k in f.attrs}
  first = search.axes(base, THREADS, VEC_WIDTH, direct(f).attrs["uop.contraction"])[0]
  assert [("uop.winograd" in g(base), "uop.contraction" in g(base)) for g in first] == [(True, False), (False, True)]
