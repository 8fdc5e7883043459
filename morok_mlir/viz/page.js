// The VIZ page: one record per compile; for the chosen record and stage, the graph laid out by dagre (vendored) beside
// the stage's MLIR text, lines new since the stage before highlighted; an op's source line on hover and click.
const D = JSON.parse(document.getElementById("data").textContent);
const NS = "http://www.w3.org/2000/svg", CH = 6.8;   // width of one character of the SVG's 11px monospace font
const MAX_AUTO = 800;   // a function of more ops is laid out on request (dagre: ~1 s for 700 ops on a busy 2-core machine)
// node colours by op family, as tinygrad's VIZ groups them
const COLOR = [[/^(buffer|load|store|index|bufferize|define_var|bind|copy|assign)$/, "#cfe2ff"],
               [/^(reshape|permute|expand|pad|shrink|flip)$/, "#fff1b8"],
               [/^(reduce_axis|reduce|mulacc|wmma)$/, "#ffc9c9"], [/^(range|end|special|if|endif|barrier)$/, "#e5d4ff"],
               [/^(kernel|sink|after|group)$/, "#c3f0c8"], [/^const$/, "#eceff3"]];
const color = op => (COLOR.find(([re]) => re.test(op)) || [0, "#ffffff"])[1];
const el = (tag, attrs = {}, text) => {
  const e = document.createElementNS(NS, tag);
  for (const k in attrs) e.setAttribute(k, attrs[k]);
  if (text != null) e.textContent = text;
  return e;
};
const short = loc => loc ? loc.replace(/^.*\//, "") : "";
let cur = { rec: 0, stage: 0 }, selected = null;

function where(loc) { return loc ? `${loc}\n    ${D.sources[loc] || "(source not found)"}` : "no source line (made by the compiler)"; }
function show(what, loc) { document.getElementById("info").textContent = `${what}   ${where(loc)}`; }
function select(loc, what) {   // every op of the same source line, in the graph and the text
  selected = { loc, what }; show(what, loc);
  document.querySelectorAll("[data-loc]").forEach(e => e.classList.toggle("sel", loc != null && e.dataset.loc === loc));
}

function drawGraph(g, box) {
  box.replaceChildren();
  if (!g) { box.innerHTML = '<div class="note">no graph at this stage: its text is the upstream MLIR or LLVM IR</div>'; return; }
  if (g.too_many) { box.innerHTML = `<div class="note">${g.too_many} ops: too many to draw; the text is beside</div>`; return; }
  // each function laid out on its own (dagre's time grows faster than its graph): one SVG per function, in module order
  for (const c of g.groups) {
    const nodes = g.nodes.filter(n => n.g === c.id), ids = new Set(nodes.map(n => n.id));
    const head = document.createElement("div"); head.className = "fn"; head.textContent = `${c.label}  (${nodes.length} ops)`;
    box.appendChild(head);
    const draw = () => box.insertBefore(layoutSvg(nodes, g.edges.filter(([a]) => ids.has(a)), box), head.nextSibling);
    if (nodes.length <= MAX_AUTO) { draw(); continue; }
    const b = document.createElement("button"); b.textContent = `lay out ${nodes.length} ops (slow)`;
    b.addEventListener("click", () => { b.remove(); draw(); });
    head.appendChild(b);
  }
}

function layoutSvg(nodes, edges, box) {
  const G = new dagre.graphlib.Graph();
  G.setGraph({ rankdir: "TB", nodesep: 12, ranksep: 26, marginx: 10, marginy: 10 });
  G.setDefaultEdgeLabel(() => ({}));
  for (const n of nodes) G.setNode(n.id, { width: Math.max(n.op.length, n.sub.length) * CH + 14, height: 32 });
  for (const [a, b] of edges) G.setEdge(a, b);
  dagre.layout(G);
  const { width, height } = G.graph();
  // as wide as the pane at most (a wide graph is scaled down, never below half size: then the pane scrolls)
  const w = Math.min(width + 20, Math.max(box.clientWidth - 4, (width + 20) / 2));
  const svg = el("svg", { width: w, height: (height + 20) * w / (width + 20), viewBox: `0 0 ${width + 20} ${height + 20}` });
  const defs = el("defs"), m = el("marker", { id: "arrow", viewBox: "0 0 8 8", refX: 8, refY: 4, markerWidth: 7, markerHeight: 7, orient: "auto" });
  m.appendChild(el("path", { d: "M0,0 L8,4 L0,8 z", fill: "#8f98a6" })); defs.appendChild(m); svg.appendChild(defs);
  for (const e of G.edges()) svg.appendChild(el("path", { class: "edge", d: "M" + G.edge(e).points.map(p => `${p.x},${p.y}`).join(" L") }));
  for (const n of nodes) {
    const v = G.node(n.id);
    const gr = el("g", { class: "node" + (n.new ? " new" : ""), transform: `translate(${v.x - v.width / 2},${v.y - v.height / 2})` });
    if (n.loc) gr.dataset.loc = n.loc;
    gr.appendChild(el("title", {}, `${n.op} ${n.sub}\n${where(n.loc)}`));
    gr.appendChild(el("rect", { width: v.width, height: v.height, rx: 4, fill: color(n.op) }));
    gr.appendChild(el("text", { x: 7, y: 13, "font-weight": "bold" }, n.op));
    gr.appendChild(el("text", { x: 7, y: 26, fill: "#4a5361" }, n.sub));
    gr.addEventListener("mouseenter", () => show(`${n.op} ${n.sub}`, n.loc));
    gr.addEventListener("mouseleave", () => selected && show(selected.what, selected.loc));
    gr.addEventListener("click", () => select(n.loc, `${n.op} ${n.sub}`));
    svg.appendChild(gr);
  }
  return svg;
}

function drawText(st, pre) {
  pre.replaceChildren();
  const frag = document.createDocumentFragment();
  for (const [line, loc, isNew] of st.lines) {
    const s = document.createElement("span");
    s.textContent = line || " ";
    if (isNew) s.className = "new";
    if (loc) {
      s.classList.add("loc"); s.dataset.loc = loc; s.title = where(loc);
      s.addEventListener("click", () => select(loc, line.trim().slice(0, 80)));
    }
    frag.appendChild(s);
  }
  if (st.gone) {
    const g = document.createElement("span");
    g.className = "gone"; g.textContent = `(${st.gone} lines of the stage before are gone)`;
    frag.appendChild(g);
  }
  pre.appendChild(frag);
}

function drawKernels(rec) {
  const body = document.querySelector("#kernels tbody");
  body.replaceChildren();
  for (const k of rec.kernels) {
    const ts = [...k.times_us].sort((a, b) => a - b), fmt = t => t == null ? "" : t < 1000 ? `${t.toFixed(1)} us` : `${(t / 1000).toFixed(2)} ms`;
    const tr = document.createElement("tr");
    const attrs = Object.entries(k.attrs).map(([a, v]) => v === "None" ? a : `${a} = ${v}`).join("\n");
    for (const [cell, pre] of [[k.name], [(k.choices || "(defaults)") + "\n" + attrs, true], [String(ts.length)],
                               [fmt(ts[Math.floor((ts.length - 1) / 2)])], [fmt(ts[0])], [k.loops.join("\n"), true]]) {
      const td = document.createElement("td");
      if (pre) { const p = document.createElement("pre"); p.textContent = cell; td.appendChild(p); } else td.textContent = cell;
      tr.appendChild(td);
    }
    body.appendChild(tr);
  }
}

function render() {
  const rec = D.records[cur.rec];
  document.querySelectorAll("nav button").forEach((b, i) => b.classList.toggle("on", i === cur.rec));
  if (!rec) { document.getElementById("title").textContent = "no compile recorded yet: realize something, then reload"; return; }
  document.getElementById("title").textContent = `#${cur.rec} realize at ${rec.title}` +
    (rec.done ? "" : ` (stopped after ${rec.stages.length ? rec.stages[rec.stages.length - 1].name : "no stage"}: the compile failed or is running)`);
  document.getElementById("source").textContent = D.sources[rec.title] || "";
  const tabs = document.getElementById("tabs");
  tabs.replaceChildren(...rec.stages.map((st, i) => {
    const b = document.createElement("button");
    b.textContent = st.name; b.dataset.stage = st.name; b.className = i === cur.stage ? "on" : "";
    b.addEventListener("click", () => { cur.stage = i; render(); });
    return b;
  }));
  const st = rec.stages[Math.min(cur.stage, rec.stages.length - 1)];
  document.getElementById("graph").style.display = st && st.graph ? "" : "none";
  if (st) { drawGraph(st.graph, document.getElementById("graph")); drawText(st, document.getElementById("text")); }
  drawKernels(rec);
  if (selected) select(selected.loc, selected.what);
  document.body.dataset.ready = `${cur.rec}:${st ? st.name : ""}`;   // for tests and scripts: what is drawn
}

const nav = document.getElementById("records");
D.records.forEach((r, i) => {
  const b = document.createElement("button");
  b.textContent = `#${i} ${short(r.title)} · ${r.kernels.length} kernel${r.kernels.length === 1 ? "" : "s"}`;
  b.title = r.title;
  b.addEventListener("click", () => { cur = { rec: i, stage: 0 }; render(); });
  nav.appendChild(b);
});
render();
