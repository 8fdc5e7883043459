"""VIZ: the page of a small program's realize, written (VIZ=PATH.html) and served (VIZ=1), opened in headless Chromium:
the graph of every stage drawn with its ops' names, the text beside it, each op's source line, the kernels with their loop
nests and run times. The screenshot of the written page is docs/viz.png (MOROK_VIZ_PNG=docs/viz.png refreshes it)."""
import json, os, pathlib, re, shutil, subprocess, sys, threading, urllib.request
import pytest
from morok_mlir.ir.pipeline import PIPELINE

ROOT = pathlib.Path(__file__).resolve().parent.parent
STAGES = ["graph", *PIPELINE, "lowered", "llvm"]
PROG = """import numpy as np
from morok_mlir import Tensor
x = Tensor(np.linspace(-1, 1, 24, dtype=np.float32).reshape(4, 6))
w = Tensor(np.linspace(0, 1, 18, dtype=np.float32).reshape(6, 3))
y = (x @ w).relu().sum(1) * 2
print(y.numpy().round(4).tolist(), flush=True)
"""
LINE = 'y = (x @ w).relu().sum(1) * 2'
# op names each stage's graph must show: the user's ops, then ranges and loads, then kernels
OPS = {"graph": {"buffer", "mul", "reduce_axis", "permute"}, "uop-rangeify": {"range", "load", "store", "reduce"},
       "uop-simplify": {"range", "load", "store"}, "uop-kernel-split": {"kernel", "range", "store"}, "uop-optimize": {"kernel", "range"}}
TEXT = {"lowered": "scf.for", "llvm": "define void @kernel"}

def env(tmp_path, **kw) -> dict:
  return {**os.environ, "MOROK_DISK_CACHE": "0", "MOROK_CACHE_DIR": str(tmp_path / "cache"), "DEBUG": "0", **kw}

def run(tmp_path, viz: str, prog: str = PROG, **kw) -> subprocess.CompletedProcess:
  (tmp_path / "prog.py").write_text(prog)
  return subprocess.run([sys.executable, str(tmp_path / "prog.py")], capture_output=True, text=True, timeout=300, cwd=tmp_path,
                        env=env(tmp_path, VIZ=viz, **kw))

@pytest.fixture(scope="module")
def browser():
  missing = [p for p in ("chromium", "chromedriver") if shutil.which(p) is None]
  if missing: pytest.skip(f"no {' or '.join(missing)}: `make setup` installs Debian's chromium and chromium-driver where apt-get can (as root)")
  webdriver = pytest.importorskip("selenium.webdriver", reason="selenium (the test extra) is not installed")
  from selenium.webdriver.chrome.service import Service
  o = webdriver.ChromeOptions()
  o.binary_location = shutil.which("chromium")
  for a in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--window-size=1500,1000"): o.add_argument(a)
  d = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=o)
  yield d
  d.quit()

def stage_views(d) -> dict[str, tuple[set[str], str, int]]:
  """Click every stage's tab: stage -> (the op names its graph draws, its text, how many of its lines are marked new)."""
  from selenium.webdriver.common.by import By
  out = {}
  for i in range(len(d.find_elements(By.CSS_SELECTOR, "#tabs button"))):
    tab = d.find_elements(By.CSS_SELECTOR, "#tabs button")[i]
    name = tab.text
    tab.click()
    assert d.find_element(By.TAG_NAME, "body").get_attribute("data-ready") == f"0:{name}"
    ops = {t.text for t in d.find_elements(By.CSS_SELECTOR, "#graph svg .node text[font-weight=bold]")}
    out[name] = ops, d.find_element(By.ID, "text").get_attribute("textContent"), len(d.find_elements(By.CSS_SELECTOR, "#text span.new"))
  return out

def test_written_page_in_browser(tmp_path, browser):
  from selenium.webdriver.common.by import By
  r = run(tmp_path, str(tmp_path / "page.html"))
  assert r.returncode == 0, r.stderr
  assert f"VIZ: wrote {tmp_path / 'page.html'}" in r.stderr
  d = browser
  d.get((tmp_path / "page.html").as_uri())
  assert d.find_element(By.ID, "title").text == f"#0 realize at {tmp_path / 'prog.py'}:6:7"   # the line that realized
  views = stage_views(d)
  assert list(views) == STAGES
  for stage, ops in OPS.items(): assert ops <= views[stage][0], (stage, views[stage][0])
  for stage, mark in TEXT.items(): assert mark in views[stage][1] and not views[stage][0], stage
  assert '"uop.reduce_axis"' in views["graph"][1] and '"uop.range"' in views["uop-rangeify"][1]
  assert views["uop-rangeify"][2] and views["uop-optimize"][2] and not views["graph"][2], "what a pass changed is highlighted"
  # provenance: an op of the user's line names it on hover (its title) and on click (the info bar), in the graph and the text
  d.find_elements(By.CSS_SELECTOR, "#tabs button")[0].click()
  mul = next(n for n in d.find_elements(By.CSS_SELECTOR, "#graph svg .node") if n.find_element(By.TAG_NAME, "text").text == "reduce_axis")
  assert f"prog.py:5:" in mul.find_element(By.TAG_NAME, "title").get_attribute("textContent")
  d.execute_script("arguments[0].dispatchEvent(new MouseEvent('click'))", mul)
  info = d.find_element(By.ID, "info").text
  assert "prog.py:5:" in info and LINE in info, info
  assert d.find_elements(By.CSS_SELECTOR, "#text span.sel"), "the text lines of the clicked op's source line are marked"
  # kernels: one row each, with uop-optimize's attributes, a measured run and a loop nest
  rows = d.find_elements(By.CSS_SELECTOR, "#kernels tbody tr")
  assert rows
  for row in rows:
    cells = row.find_elements(By.TAG_NAME, "td")
    assert cells[2].text == "1" and re.fullmatch(r"[\d.]+ (us|ms)", cells[3].text), [c.text for c in cells]
    assert "scf.for" in cells[5].get_attribute("textContent")
  # the graph as built, the clicked op's source line and its ops marked; MOROK_VIZ_PNG=docs/viz.png refreshes the README's picture
  assert d.save_screenshot(png := os.environ.get("MOROK_VIZ_PNG", str(tmp_path / "viz.png"))) and os.path.getsize(png) > 10_000

def test_served_page(tmp_path, browser):
  """VIZ=1 serves the page on 127.0.0.1 while the program runs (a free port when VIZ_PORT is taken or 0): the URL is on stderr once."""
  from selenium.webdriver.common.by import By
  (tmp_path / "prog.py").write_text(PROG + "import sys; print('ready', flush=True); sys.stdin.read()\n")
  p = subprocess.Popen([sys.executable, str(tmp_path / "prog.py")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, cwd=tmp_path, env=env(tmp_path, VIZ="1", VIZ_PORT="0"))
  guard = threading.Timer(300, p.kill)   # a hung child ends the test's reads
  guard.start()
  try:
    url = next((line.strip() for line in p.stderr if line.startswith("VIZ:")), "")
    assert re.fullmatch(r"VIZ: http://127\.0\.0\.1:\d+/", url), url
    assert p.stdout.readline().strip().startswith("[") and p.stdout.readline().strip() == "ready"
    url = url[5:]
    page = urllib.request.urlopen(url, timeout=60).read().decode()
    assert '"uop.reduce_axis' in page and "dagre" in page
    browser.get(url)
    assert set(stage_views(browser)) == set(STAGES)
  finally:
    p.stdin.close()
    p.wait(timeout=60)
    guard.cancel()
    err = p.stderr.read()
  assert p.returncode == 0 and "VIZ:" not in err, err

def test_bad_viz_value_is_one_clear_error(tmp_path):
  r = run(tmp_path, "yes")
  assert r.returncode != 0
  assert "VIZ='yes': VIZ must be 0 (off), 1 (serve the page on 127.0.0.1) or a path ending in .html" in r.stderr.splitlines()[-1]

def test_page_data_and_loop_nests():
  """The page's data without a browser: every stage, graphs for the uop stages, text diffs that ignore SSA renumbering."""
  import numpy as np
  from morok_mlir import Tensor
  from morok_mlir.ir import stages
  from morok_mlir.realize import compile_schedule
  from morok_mlir.ir.emit import normalize, graph_func
  from morok_mlir import viz
  t = (Tensor(np.ones((4, 6), np.float32)) * 3).sum(1)
  with stages.recording(rec := stages.Stages(viz=True)): compile_schedule(graph_func(normalize([t.uop])[0]), "CPU")
  rec.title = "x.py:1:1"
  page = viz.data([rec])["records"][0]
  assert [s["name"] for s in page["stages"]] == STAGES
  assert all(("nodes" in s["graph"]) == (s["name"] not in TEXT) for s in page["stages"] if s["graph"]) and page["stages"][-1]["graph"] is None
  simplify = next(s for s in page["stages"] if s["name"] == "uop-simplify")
  assert not any(new for _, _, new in simplify["lines"]) and simplify["gone"] == 0, "a pass that changes nothing highlights nothing"
  assert viz._diff(["%1 = a(%0)", "%2 = b(%1)"], ["%1 = z", "%2 = a(%1)", "%3 = b(%2)"]) == ({0}, 0)
  k, = page["kernels"]
  assert any("scf.for" in line and " to 4 " in line for line in k["loops"]), k["loops"]
  rec.title = "x.py:1:1 </script>"   # data that holds the closing tag stays inside its script element
  blob = viz.page([rec]).split('<script type="application/json" id="data">')[1].split("</script>")[0]
  assert json.loads(blob)["records"][0]["title"] == rec.title

def test_a_failed_compile_keeps_its_stages(monkeypatch):
  """A pass that fails: the record shows the stages before it and says where the compile stopped."""
  import dataclasses
  import numpy as np
  from morok_mlir import Tensor, viz
  from morok_mlir.ir import stages
  from morok_mlir.ir.registry import PASSES, PassError
  from morok_mlir.ir.pipeline import CompileError
  def fail(funcs, **kw): raise PassError("no kernels today")
  monkeypatch.setattr(stages, "WATCH", viz._watch)
  monkeypatch.setattr(viz, "records", [])
  monkeypatch.setitem(PASSES, "uop-kernel-split", dataclasses.replace(PASSES["uop-kernel-split"], run=fail))
  with pytest.raises(CompileError, match="no kernels today"): (Tensor(np.ones(5, np.float32)) * 9.5 - 0.25).numpy()
  rec, = viz.data()["records"]
  assert [s["name"] for s in rec["stages"]] == ["graph", "uop-rangeify", "uop-simplify"] and not rec["done"] and not rec["kernels"]
  assert rec["title"].startswith(f"{__file__}:")
