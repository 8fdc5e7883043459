"""uop-elide-copies: a kernel that copies a whole intermediate buffer into a run of another (a concatenation's part,
written part by part: densenet's features, each dense layer's concat of the one before and its new channels) is
dropped, the source becoming a view of its place in the destination (`uop.views` on @schedule: source slot, destination
slot, element offset; the memory planner places it there), so whatever wrote the source writes the concatenation.

A copy `dst[lo + i] = src[i]` over all of src may also fill a run past it (`where(i < n, src[i], 0)`: a cat's first
part, padded over the whole buffer). It is dropped only where nothing else writes its run of dst, the fill is written
again by kernels after it (the cat's other parts), every write of src comes before it, and the view's start keeps the
arena's alignment. A kernel's store is understood here when it is one ungated store at lo + the row-major index of its
loops (each element of [lo, hi) once); a destination written any other way keeps its copies."""
from __future__ import annotations
from math import prod
from morok_mlir.core.uop import UOp
from morok_mlir.core import index_math as im
from morok_mlir.ir.bridge import Func
from morok_mlir.ir.registry import register
from morok_mlir.dialects.ops import Ops
from morok_mlir.host import VIEW_ALIGN
from morok_mlir.core.views import chain

def _run(idx: UOp, rngs: tuple) -> tuple[int, dict] | None:
  """(lo, form) where idx is lo + the row-major linear index of rngs (static sizes, in some order of them)."""
  if (form := im.affine(idx, {})) is None or set(form) - {1} != set(rngs) or any(im.cval(r.src[0]) is None for r in rngs): return None
  stride = 1
  for r in sorted(rngs, key=lambda r: form[r]):
    if form[r] != stride: return None
    stride *= im.cval(r.src[0])
  return form.get(1, 0), form

def span(k: Func) -> tuple[int, int, int, int, UOp, dict] | None:
  """(kernel argument stored, lo, mid, hi, the value, the index form) of a kernel that stores each element of [lo, hi)
  once: the value in [lo, mid), a constant past it (`where(i < mid - lo, value, c)`: a cat's part padded over it)."""
  body = k.roots[0].src[0] if len(k.roots) == 1 and len(k.roots[0].src) == 1 else None
  st, rngs = (body.src[0], body.src[1:]) if body is not None and body.op is Ops.END else (body, ())
  if st is None or st.op is not Ops.STORE or (idx := st.src[0]).op is not Ops.INDEX or len(idx.src) != 2: return None
  if idx.src[0].op is not Ops.BUFFER: return None
  if (run := _run(idx.src[1], rngs)) is None: return None
  (lo, form), v = run, st.src[1]
  hi = mid = lo + prod(im.cval(r.src[0]) for r in rngs)
  if v.op is Ops.WHERE and v.src[2].op is Ops.CONST and (g := v.src[0]).op is Ops.CMPLT and (c := im.cval(g.src[1])) is not None:
    if g.src[0] is not max(rngs, key=lambda r: form[r], default=None): return None   # i < n: the outermost loop below a bound
    mid = lo + max(0, min(c, im.cval(g.src[0].src[0]))) * form[g.src[0]]
  return idx.src[0].attrs["slot"], lo, mid, hi, v, form

def copy_of(k: Func) -> tuple[int, int, int, int, int] | None:
  """(dst argument, src argument, lo, mid, hi) of a kernel storing dst[lo + i] = src[i] for all of src (i < mid - lo),
  and a constant fill of [mid, hi)."""
  if (s := span(k)) is None: return None
  dst, lo, mid, hi, v, form = s
  gate = v.src[0] if mid < hi else None
  if gate is not None: v = v.src[1]
  if v.op is not Ops.LOAD or (ix := v.src[0]).op is not Ops.INDEX or ix.src[0].op is not Ops.BUFFER: return None
  if len(ix.src) != (2 if gate is None else 3) or gate is not None and ix.src[2] is not gate: return None
  lf = im.affine(ix.src[1], {})
  if lf is None or lf.get(1, 0) or {r: c for r, c in lf.items() if r != 1} != {r: c for r, c in form.items() if r != 1}: return None   # src[i]
  return (dst, ix.src[0].attrs["slot"], lo, mid, hi) if ix.src[0].dtype.size == mid - lo else None

def _stores(k: Func) -> set[int]:
  return {u.src[0].src[0].attrs["slot"] for u in k.roots[0].toposort if u.op is Ops.STORE and u.src[0].op is Ops.INDEX}

def elidable(i: int, calls: list[UOp], kernels: dict[str, Func], writes: dict[UOp, set[int]], temps: range, views: dict,
             bts: list[UOp]) -> tuple[int, int, int] | None:
  """(src slot, dst slot, element offset) where calls[i] is a copy that can be dropped (see the module's doc); writes:
  each call's slots stored. A write of a view (an earlier copy's source) is a write of the buffers it lies in, of its
  run there. Another kernel's constant fill of the copied run is allowed before every write of src: those writes then
  replace it, as the copy did."""
  k = kernels[calls[i].attrs["callee"][1]]
  if (cp := copy_of(k)) is None: return None
  slots = calls[i].attrs["slots"]
  dst, src, lo, mid, hi = slots[cp[0]], slots[cp[1]], *cp[2:]
  if dst == src or dst not in temps or src not in temps or src in views or bts[src].dtype.base != bts[dst].dtype.base: return None
  if lo * bts[dst].dtype.base.itemsize % VIEW_ALIGN or src in dict(chain(dst, views)): return None
  # per call: (the buffers it writes, directly or through views, each with the run it writes there or None: its store)
  runs = [[(b, None if b == w else (o, o + bts[w].dtype.size)) for w in writes[c] for b, o in chain(w, views)] for c in calls]
  src_at = [j for j, r in enumerate(runs) if any(b == src for b, _ in r)]
  if any(j > i for j in src_at): return None
  fill, cover = [(mid, hi)] if mid < hi else [], []
  for j, r in enumerate(runs):
    for b, run in r:
      if j == i or b != dst: continue
      if run is not None:   # a view's writer (an earlier copy's source): its run in dst, written before that copy
        if run[0] < mid and lo < run[1]: return None
        continue
      if len(writes[calls[j]]) != 1 or (s := span(kernels[calls[j].attrs["callee"][1]])) is None: return None
      if s[1] < mid and lo < s[2]: return None   # the copied run written again
      if s[2] < mid and lo < s[3] and any(x < j for x in src_at): return None   # a fill of it after a write of src
      if j > i: cover.append(s[1:3])
  for a, b in sorted(cover):   # the fill written again after the copy
    if fill and a <= fill[0][0] < b: fill = [(b, fill[0][1])] if b < fill[0][1] else []
  return None if fill else (src, dst, lo)

def elide(kernels: dict[str, Func], sched: Func) -> tuple[list[UOp], dict[int, tuple[int, int]]]:
  """The schedule's calls less the copies dropped (a call that waited for one waits for what it waited for), and the
  views made: src slot -> (dst slot, element offset)."""
  calls, bts = list(sched.roots[0].src), sched.args
  first = sched.attrs["uop.num_inputs"] + sched.attrs["uop.num_outputs"]
  temps, views, dropped = range(first, len(bts)), {}, {}
  writes = {c: {c.attrs["slots"][a] for a in _stores(kernels[c.attrs["callee"][1]])} for c in calls}
  i = 0
  while i < len(calls):
    if (v := elidable(i, calls, kernels, writes, temps, views, bts)) is None: i += 1; continue
    views[v[0]] = v[1:]
    dropped[calls.pop(i)] = None
  new: dict[UOp, UOp] = {}
  def deps(c: UOp) -> tuple[UOp, ...]:
    return tuple(x for d in c.src for x in (deps(d) if d in dropped else (new[d],)))
  for c in sched.roots[0].src:
    if c not in dropped: new[c] = c.replace(src=tuple(dict.fromkeys(deps(c))))
  return [new[c] for c in calls], views

@register("uop-elide-copies", "Drop kernels that copy a whole intermediate into a run of another: the source becomes a view of it")
def uop_elide_copies(funcs: list[Func]) -> list[Func]:
  kernels = {f.name: f for f in funcs if "uop.kernel" in f.attrs}
  out = []
  for f in funcs:
    if "uop.schedule" not in f.attrs or not f.roots: out.append(f); continue
    calls, views = elide(kernels, f)
    if not views: out.append(f); continue
    flat = tuple(x for s, (d, o) in sorted(views.items()) for x in (s, d, o))
    sink = UOp(Ops.SINK, f.roots[0].dtype, tuple(calls))
    out.append(Func(f.name, f.args, f.results, [sink], {**f.attrs, "uop.views": flat}, f.arg_attrs, f.visibility))
  called = {c.attrs["callee"][1] for f in out if "uop.schedule" in f.attrs and f.roots for c in f.roots[0].src}
  return [f for f in out if "uop.kernel" not in f.attrs or f.name in called]
