"""VIZ: every compile of this process on one web page. Per realize that compiles: the UOp graph as built, the module after
each pass (its graph laid out by dagre beside its MLIR text, what changed since the stage before highlighted), the lowered
kernels and their LLVM IR, each kernel's loop nest, uop-optimize's choices and measured run times, and each op's user
source line on hover or click. `VIZ=1` serves the page on 127.0.0.1 (the URL is printed once on stderr); `VIZ=PATH.html`
writes it, self-contained, when the process exits. The page is made from the stage recorder (ir/stages.py), which VIZ
turns on for every compile of realize()."""
from __future__ import annotations
import atexit, difflib, html, json, linecache, os, re, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from morok_mlir.core import env
from morok_mlir.core.provenance import user_loc
from morok_mlir.core.uop import UOp
from morok_mlir.dialects.ops import Ops
from morok_mlir.ir import stages
from morok_mlir.ir.bridge import Func
from morok_mlir.ir.stages import Stages, strip_locs
from morok_mlir.realize import choices

HERE = os.path.dirname(os.path.abspath(__file__))
MAX_RECORDS = 256    # the most recent compiles kept: each holds its stages' texts and UOps
MAX_NODES = 5000     # a stage with more ops is not drawn, its text only shown (its graph would swell the page)
MAX_DIFF_LINES = 20000
records: list[Stages] = []
_lock = threading.Lock()

def _watch(echo: bool) -> Stages:
  rec = Stages(echo=echo, viz=True)
  rec.title, rec.when = user_loc(), time.time()   # the user's line whose realize compiles
  with _lock:
    records.append(rec)
    del records[:-MAX_RECORDS]
  return rec

def enable() -> None:
  """Record every compile of realize() from now on (what VIZ does at import)."""
  stages.WATCH = _watch

# ---------------------------------------------------------------- a record as the page's data
def _sub(u: UOp) -> str:
  """The second line of a node: a constant's value, else its type and the attributes that tell it apart."""
  a = {k: v for k, v in u.attrs.items() if k not in ("shape", "value", "slot")} if isinstance(u.arg, tuple) else {}
  ty = u.dtype.name if u.shape is None else f"{u.dtype.name}[{','.join(map(str, u.shape))}]"
  if u.op is Ops.CONST: return f"{u.attrs.get('value')} {ty}"
  if u.op is Ops.BUFFER and "slot" in u.attrs: ty = f"arg{u.attrs['slot']} {ty}"
  extra = " ".join(f"{k}={v[1] if isinstance(v, tuple) and len(v) == 2 else v}" for k, v in a.items())
  return (ty + " " + extra)[:48]

def _graph(funcs: list[Func], prev: set | None) -> dict:
  """Nodes and edges of each function. A constant is drawn inside each op that reads it (`<- value`), not as a node: its
  edges would cross the whole graph (and dagre's time grows with every rank they cross)."""
  nodes, edges, groups = [], [], []
  for fi, f in enumerate(funcs):
    roots = set(f.all_roots())
    order = [u for u in dict.fromkeys(u for r in f.all_roots() for u in r.toposort) if u.op is not Ops.CONST or u in roots]
    ids = {u: f"n{fi}_{i}" for i, u in enumerate(order)}
    groups.append({"id": f"f{fi}", "label": "@" + f.name})
    for u in order:
      try: sub = _sub(u)
      except Exception: sub = u.dtype.name   # a kernel-level node without a shape rule
      if consts := [str(s.attrs.get("value")) for s in u.src if s not in ids]: sub = f"{sub} <- {', '.join(consts)}"[:56]
      nodes.append({"id": ids[u], "op": str(u.op), "sub": sub, "loc": u.loc, "g": f"f{fi}", "new": prev is not None and u not in prev})
      edges += [[ids[s], ids[u]] for s in dict.fromkeys(u.src) if s in ids]
  return {"too_many": len(nodes)} if len(nodes) > MAX_NODES else {"nodes": nodes, "edges": edges, "groups": groups}

_SSA = re.compile(r"%[\w#]+")
def _diff(prev: list[str], cur: list[str]) -> tuple[set[int], int]:
  """Lines of cur that are new or changed since prev, and how many of prev's are gone. Values are compared without
  their SSA names, which renumber after every inserted op."""
  if len(prev) + len(cur) > MAX_DIFF_LINES: return set(), 0
  sm = difflib.SequenceMatcher(None, [_SSA.sub("%", s) for s in prev], [_SSA.sub("%", s) for s in cur], autojunk=False)
  new, gone = set(), 0
  for tag, i1, i2, j1, j2 in sm.get_opcodes():
    if tag != "equal": new.update(range(j1, j2)); gone += i2 - i1
  return new, gone

_CONST = re.compile(r"(%\w+) = arith\.constant (-?\d+) : index")
_NEST = re.compile(r"\bscf\.(for|parallel|if)\b|func\.func|\b(memref|vector)\.(store|transfer_write)\b|vector\.fma|gpu\.")
def loop_nest(kernel_text: str) -> list[str]:
  """A lowered kernel's loops, branches and stores, indented as in the text, loop bounds as numbers where constant."""
  consts = dict(_CONST.findall(kernel_text))
  out = [_SSA.sub(lambda m: consts.get(m.group(), m.group()), line.split(" attributes ")[0]).rstrip(" {")
         for line in kernel_text.splitlines() if _NEST.search(line)]
  return out[:300]

def _stages(rec: Stages) -> list[dict]:
  out, prev_lines, prev_uops = [], None, None
  for name, text in list(rec.texts.items()):
    lines = strip_locs(text) if name not in ("lowered", "llvm") else [(s, None) for s in text.splitlines()]
    plain = [s for s, _ in lines]
    new, gone = _diff(prev_lines, plain) if prev_lines is not None and name not in ("lowered", "llvm") else (set(), 0)
    funcs = rec.funcs.get(name)
    st = {"name": name, "lines": [[s, loc, i in new] for i, (s, loc) in enumerate(lines)], "gone": gone,
          "graph": _graph(funcs, prev_uops) if funcs is not None else None}
    out.append(st)
    prev_lines, prev_uops = plain, ({u for f in funcs for r in f.all_roots() for u in r.toposort} if funcs else None)
  return out

def _kernels(rec: Stages) -> list[dict]:
  chunks = dict(re.findall(r"// ----- kernel (\S+)\n(.*?)(?=// ----- kernel |\Z)", rec.texts.get("lowered", ""), re.S))
  return [{"name": f.name, "choices": choices(f.attrs), "attrs": {k: str(v) for k, v in f.attrs.items() if k != "uop.kernel"},
           "loops": loop_nest(chunks.get(f.name, "")), "times_us": [t * 1e6 for t in rec.times.get(f.name, [])]} for f in rec.kernels]

def _source(loc: str | None) -> str | None:
  m = re.fullmatch(r"(.*):(\d+):\d+", loc or "")
  return linecache.getline(m.group(1), int(m.group(2))).strip() or None if m else None

def data(recs: list[Stages] | None = None) -> dict:
  """The page's data: per record its title, stages and kernels, and the source line of every location it names."""
  with _lock: recs = list(records if recs is None else recs)
  out, locs = [], set()
  for rec in recs:
    if (st := getattr(rec, "_viz_stages", None)) is None:
      st = _stages(rec)
      if "lowered" in rec.texts: rec._viz_stages = st   # complete: its stages no longer change (its run times do)
    locs.update(line[1] for s in st for line in s["lines"] if line[1])
    locs.update(n["loc"] for s in st if s["graph"] and "nodes" in s["graph"] for n in s["graph"]["nodes"] if n["loc"])
    title = getattr(rec, "title", "")
    locs.add(title)
    out.append({"title": title, "stages": st, "kernels": _kernels(rec), "done": "lowered" in rec.texts})
  return {"records": out, "sources": {loc: src for loc in locs if (src := _source(loc))}}

def page(recs: list[Stages] | None = None) -> str:
  """The page as one self-contained HTML document: its script, style, layout library and data inline."""
  read = lambda f: open(os.path.join(HERE, f), encoding="utf-8").read()
  blob = json.dumps(data(recs), separators=(",", ":")).replace("</", "<\\/")
  return (read("page.html").replace("/*STYLE*/", read("page.css"))
          .replace("/*DAGRE*/", read("dagre.min.js").replace("</", "<\\/"))
          .replace("/*APP*/", read("page.js")).replace("/*DATA*/", blob)
          .replace("<!--TITLE-->", html.escape(f"morok-mlir VIZ: {os.path.basename(sys.argv[0] or 'python')}")))

def write(path: str) -> str:
  with open(path, "w", encoding="utf-8") as f: f.write(page())
  return path

# ---------------------------------------------------------------- VIZ=1: the page served on 127.0.0.1
class _Handler(BaseHTTPRequestHandler):
  def do_GET(self):
    if self.path not in ("/", "/index.html"): return self.send_error(404)
    body = page().encode()
    self.send_response(200)
    self.send_header("Content-Type", "text/html; charset=utf-8"); self.send_header("Content-Length", str(len(body)))
    self.end_headers()
    self.wfile.write(body)
  def log_message(self, *args): pass   # the user's program owns stderr

def serve(port: int = 0) -> tuple[ThreadingHTTPServer, str]:
  """Serve the page (made afresh at each request) on 127.0.0.1:port (0: a free port) from a daemon thread."""
  srv = ThreadingHTTPServer(("127.0.0.1", port), _Handler)
  srv.daemon_threads = True
  threading.Thread(target=srv.serve_forever, name="morok-viz", daemon=True).start()
  return srv, f"http://127.0.0.1:{srv.server_address[1]}/"

def _hold(url: str) -> None:
  """At exit of an interactive run, keep serving until the user is done (the page dies with the process)."""
  if not (sys.stdin and sys.stdin.isatty() and sys.stderr.isatty()): return
  try: input(f"VIZ: still serving {url} -- press Enter to exit\n")
  except (EOFError, KeyboardInterrupt): pass

def start(value: str) -> None:
  """VIZ's value: 1 serves the page (port VIZ_PORT, default 8000, or a free one when that is taken), PATH.html writes it at exit."""
  if value.endswith((".html", ".htm")):
    enable()
    atexit.register(lambda: print(f"VIZ: wrote {write(value)}", file=sys.stderr))
  elif value == "1":
    enable()
    try: _, url = serve(env.get("VIZ_PORT"))
    except OSError: _, url = serve(0)
    print(f"VIZ: {url}", file=sys.stderr)
    atexit.register(_hold, url)
  elif value not in ("", "0"):
    raise ValueError(f"VIZ={value!r}: expected 0 (off), 1 (serve the page on 127.0.0.1) or a path ending in .html (write it at exit)")
