"""Kernel families: kernels whose upstream MLIR texts differ only in integer constants (a dense block's 1x1 convolutions,
one per input width; the batchnorm folds of each width) compile as one generic kernel that takes those constants as
trailing arguments. LLVM's time is per kernel text (60-100 ms for a contraction), so a family of n costs one compile
instead of n. Each member keeps its own spec and disk cache entry: the shared object holds the generic kernel and, per
member, a record (`k<key>_fam`) naming it and the member's constants, which its program passes after its arguments.

Texts are compared canonical (each use of a constant its own definition, SSA values renumbered), so two roles one
kernel's emitter gave a single constant because their values met do not split a family. The generic text is the first
member's with each differing constant a parameter (one per distinct tuple of the members' values), passed on to the
module's own calls, and each differing 1-D memref size at the family's largest (with bare-pointer arguments a memref's
static size is only a type: the index arithmetic, all explicit, is the member's own): it computes, op for op, what each
member's text does. Kept apart: a family whose parameters would reach a divisor (a division by a value known only at
run time is a real division) and kernels whose short loops differ in count (see skeleton)."""
from __future__ import annotations
import _ctypes, ctypes, functools, re
try: from _sha256 import sha256   # (CPython's own, as cpu.py's: hashlib's maps OpenSSL)
except ImportError: from hashlib import sha256
from morok_mlir.dialects.ops import Ops

# the integer constants and 1-D memref sizes a family's texts may differ in, in text order
DEF = r"(%[\w$.-]+) = arith\.constant (-?\d+) : (index|i64|i32)"
CONST = re.compile(rf"(?m)^\s*{DEF}\n")
TOKEN = re.compile(rf"(?m)^(\s*){DEF}$|(memref<)(\d+)x")
FUNC = re.compile(r"(?ms)^  func\.func (private )?@([\w$.]+)\(([^\n]*?)\)( attributes \{[^\n]*\})? \{\n(.*?)^  \}\n")
CALL = re.compile(r"func\.call @([\w$.]+)\(([^)]*)\) : \(([^)]*)\)")
DIVISION = re.compile(r"arith\.(?:divui|divsi|remui|remsi|floordivsi|ceildivsi|ceildivui) ")
SSA = re.compile(r"%[\w$.-]+")
LOOP = re.compile(r"scf\.for %[\w$.-]+ = (%[\w$.-]+) to (%[\w$.-]+) step (%[\w$.-]+)")
SHORT = 64        # loop bounds below this stay constants (see skeleton)
MAX_PARAMS = 48   # differing constants a family may have (a function's arguments)

@functools.lru_cache(maxsize=256)   # (a compile's batches and its engines read each text's twice; forget() empties it)
def canonical(src: str) -> str | None:
  """src with each use of an integer constant given a definition of its own at the top of its function, and each
  function's SSA values renumbered in order of appearance: kernels that differ only in their constants' values get
  texts equal up to those values (two roles one kernel's emitter gave one constant because their values met, and
  another kernel two, no longer change the text's shape). None: a text not made of functions only."""
  funcs = list(FUNC.finditer(src))
  if "%__c" in src or "module {\n" + "".join(m[0] for m in funcs) + "}\n" != src: return None
  out = []
  for m in funcs:
    consts = {d[1]: (d[2], d[3]) for d in CONST.finditer(m[5])}
    uses: list[tuple[str, str]] = []
    def use(t: re.Match) -> str:
      if t[0] not in consts: return t[0]
      uses.append(consts[t[0]])
      return f"%__c{len(uses) - 1}"
    body = SSA.sub(use, CONST.sub("", m[5]))
    text = m[0][:m.start(5) - m.start()] + "".join(f"    %__c{i} = arith.constant {v} : {t}\n" for i, (v, t) in enumerate(uses)) + body + "  }\n"
    names: dict[str, str] = {}
    out.append(SSA.sub(lambda t: names.setdefault(t[0], f"%{len(names)}"), text))
  return "module {\n" + "".join(out) + "}\n"

@functools.lru_cache(maxsize=256)
def skeleton(src: str) -> str:
  """The canonical text with its varying parts (TOKEN's integers) blanked: kernels of one family have equal skeletons.
  A loop's bounds and step stay where they are small: LLVM unrolls a short loop it knows the count of, and then folds
  the bounds checks inside it (a depthwise convolution's rows ran 1.7x slower with them read at run time)."""
  if (c := canonical(src)) is None: return src
  def blank(fn: str) -> str:   # (per function: SSA names repeat across functions)
    fixed = {x for m in LOOP.finditer(fn) for x in m.groups()}
    return TOKEN.sub(lambda m: m[0] if m[2] in fixed and abs(int(m[3])) < SHORT else
                     f"{m[1]}{m[2]} = arith.constant # : {m[4]}" if m[2] else f"{m[5]}#x", fn)
  return "".join(blank(m[0]) for m in FUNC.finditer(c))

def forget() -> None:
  """Drop the texts canonical and skeleton keep (tens of KB each): a compile's work is done."""
  canonical.cache_clear(); skeleton.cache_clear()

def _values(src: str) -> list[int]: return [int(m[3] if m[2] else m[6]) for m in TOKEN.finditer(src)]

def _split(args: str) -> list[str]:
  """A signature's or call's comma-separated items (commas inside <>, [], {} or () are not separators)."""
  out, depth, cur = [], 0, ""
  for ch in args:
    depth += (ch in "<[{(") - (ch in ">]})")
    if ch == "," and depth == 0: out.append(cur.strip()); cur = ""
    else: cur += ch
  return out + [cur.strip()] if cur.strip() else out

def generic(srcs: list[str]) -> tuple[str, list[list[int]]] | None:
  """srcs (canonical texts of one family: equal skeletons) -> (the generic text, each member's values of its
  parameters), or None where the family does not share code (nothing or too much differs, a division)."""
  vals = [_values(s) for s in srcs]
  toks = list(TOKEN.finditer(srcs[0]))
  differ = [j for j in range(len(toks)) if len({v[j] for v in vals}) > 1]
  # one parameter per distinct tuple of the members' values (K read in five places is one parameter)
  seen: dict[tuple, int] = {}
  params = {j: seen.setdefault(tuple(v[j] for v in vals), len(seen)) for j in differ if toks[j][2]}
  first = {p: j for j, p in reversed(params.items())}
  if not differ or len(first) > MAX_PARAMS: return None
  # the text with the differing memref sizes at their largest and the differing constants' definitions dropped
  out, at, names = [], 0, {}
  for j in differ:
    m = toks[j]
    out.append(srcs[0][at:m.start()])
    if m[2]: names[m.start()] = (m[2], f"%gp{params[j]}")
    else: out.append(f"{m[5]}{max(v[j] for v in vals)}x")
    at = m.end() if not m[2] else m.end() + 1   # (a constant's whole line, newline included)
  text = "".join(out) + srcs[0][at:]
  types = [toks[first[p]][4] for p in range(len(first))]
  local = {m[2] for m in FUNC.finditer(text)}
  # each function's own constants renamed to the parameters: at which function a definition sat decides the scope
  starts = sorted((m.start(), m.end()) for m in FUNC.finditer(srcs[0]))
  scoped = [{old: new for pos, (old, new) in names.items() if s <= pos < e} for s, e in starts]
  pieces, extra = [], ", ".join(f"%gp{i}: {t}" for i, t in enumerate(types))
  for m, renames in zip(FUNC.finditer(text), scoped):
    body = SSA.sub(lambda t: renames.get(t[0], t[0]), m[5])
    body = CALL.sub(lambda c: c[0] if c[1] not in local else
                    f"func.call @{c[1]}({', '.join(_split(c[2]) + [f'%gp{i}' for i in range(len(types))])}) : "
                    f"({', '.join(_split(c[3]) + types)})", body)
    if _divides(body): return None
    pieces.append(f"  func.func {m[1] or ''}@{m[2]}({', '.join(_split(m[3]) + ([extra] if extra else []))}){m[4] or ''} {{\n{body}  }}\n")
  return "module {\n" + "".join(pieces) + "}\n", [[v[first[p]] for p in range(len(first))] for v in vals]

def _divides(body: str) -> bool:
  """Whether a value computed from the parameters divides another (in text order: SSA values are defined before use)."""
  seen: set[str] = set()
  for line in body.splitlines():
    if not (m := re.match(r"\s*(%[\w$.-]+)(?::\d+)? = ([\w.]+) (.*)", line)): continue
    dep = [o.startswith("%gp") or o in seen for o in SSA.findall(m[3].split(" : ")[0])]
    if DIVISION.match(m[2] + " ") and len(dep) > 1 and dep[1]: return True
    if any(dep): seen.add(m[1])
  return False

def record(pre: str, gid: int, consts: list[int]) -> str:
  """A member's record in its object: `<pre>fam` = [the count of its constants, the generic's id, the constants...]
  (int64), read by a process that loads the member from the disk cache (see entry)."""
  vals = [len(consts), gid, *consts]
  return f"module {{\n  memref.global constant @{pre}fam : memref<{len(vals)}xi64> = dense<{vals}>\n}}\n"

def entry(path: str, pre: str) -> tuple[str, tuple[int, ...]] | None:
  """(the generic's prefix, the constants) of the member whose functions would be named pre in the shared object at
  path, or None where it is no family's member. (The object is closed again: a path still loaded would be the one a
  later load of a rebuilt entry at that path gets.)"""
  lib = ctypes.CDLL(path)
  try:
    try: n = ctypes.c_int64.in_dll(lib, pre + "fam").value
    except ValueError: return None
    if not 0 < n <= MAX_PARAMS: return None
    _, gid, *consts = (ctypes.c_int64 * (n + 2)).in_dll(lib, pre + "fam")
    return prefix(gid), tuple(consts)
  finally: _ctypes.dlclose(lib._handle)

def prefix(gid: int) -> str: return f"g{gid:015x}_"   # a generic kernel's functions' names: g<its text's hash>_<name>

def units(items: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], dict[str, tuple[str, tuple[int, ...]]]]:
  """items: (prefix, src) of kernels compiled together -> ((prefix, src) texts to lower in their place, {a family
  member's prefix: (its generic's prefix, its constants)}): a kernel alone as it is; a family (two or more equal
  skeletons that share code) as its generic text and a record per member."""
  fams: dict[str, list[tuple[str, str]]] = {}
  for pre, src in items: fams.setdefault(skeleton(src), []).append((pre, src))
  out, members = [], {}
  for fam in fams.values():
    if len(fam) < 2 or canonical(fam[0][1]) is None or (g := generic([canonical(s) for _, s in fam])) is None: out += fam; continue
    text, consts = g
    gid = int(sha256(text.encode()).hexdigest()[:15], 16)
    out.append((prefix(gid), text))
    for (pre, _), c in zip(fam, consts):
      out.append((pre, record(pre, gid, c)))
      members[pre] = (prefix(gid), tuple(c))
  return out, members

def batches(items: list, src, n: int) -> list[list]:
  """items in batches of at most n families each (members of a family together: one compile for them)."""
  fams: dict[str, list] = {}
  for it in items: fams.setdefault(skeleton(src(it)), []).append(it)
  groups = list(fams.values())
  return [[it for g in groups[i:i + n] for it in g] for i in range(0, len(groups), n)]

def fkey(f) -> tuple:
  """A kernel Func's shape before it is rendered, for sharing out compile work: its attributes (the lowering's choices)
  and its ops and element types in order (a family's members have equal ones; kernels of several skeletons seldom do)."""
  return (tuple(sorted((k, repr(v)) for k, v in f.attrs.items())),
          tuple((x.op, getattr(x.dtype, "base", x.dtype)) for r in f.roots for x in r.toposort if x.op is not Ops.CONST))
