"""UOp: the hash-consed node of the compute graph, as in tinygrad. Passes work on UOp DAGs; MLIR is their text form."""
from __future__ import annotations
import re, threading, weakref
from _weakref import _remove_dead_weakref
from typing import Any
from .dtype import DType, dtypes

TOKEN, INDEX = "!uop.token", "index"

_TENSOR_TYPES: dict[tuple, str] = {}
def tensor_type(shape: tuple[int, ...], dtype: DType) -> str:
  """The MLIR tensor type; the parsed form is remembered with it, so a UOp of this type never parses its string."""
  if (t := _TENSOR_TYPES.get(k := (shape, dtype))) is None:
    t = _TENSOR_TYPES[k] = "tensor<" + "".join(f"{s}x" for s in shape) + dtype.mlir + ">"
    _PARSED[t] = ("tensor", tuple(int(s) for s in shape), dtype)
  return t
_PARSED: dict[str, tuple] = {}
def memref_type(size: int, dtype: DType) -> str: return f"memref<{size}x{dtype.mlir}>"
def ptr_type(dtype: DType) -> str: return f"!uop.ptr<{dtype.mlir}>"

class cached_property:
  """functools.cached_property without its per-access lock (3.11 takes an RLock on every first access): UOps are
  immutable, so a racing double computation gives the same value."""
  def __init__(self, fn): self.fn, self.name = fn, fn.__name__
  def __get__(self, obj, cls=None):
    if obj is None: return self
    v = obj.__dict__[self.name] = self.fn(obj)
    return v

_SHAPED = re.compile(r"(tensor|memref|vector)<((?:\d+x)*)([a-z0-9]+)>")

def _parse_type(ty: str) -> tuple[str, tuple[int, ...] | None, DType | None]:
  if (m := _SHAPED.fullmatch(ty)):
    return m.group(1), tuple(int(x) for x in m.group(2).split("x")[:-1]), dtypes.from_mlir(m.group(3))
  if ty == TOKEN: return "token", None, None
  if ty.startswith("!uop.ptr<"): return "ptr", None, dtypes.from_mlir(ty[9:-1])
  return "scalar", None, dtypes.from_mlir(ty)

# the hash-consing table: a plain dict of weak references (WeakValueDictionary costs ~2x more per node built). Safe
# from any number of threads: an entry is added with setdefault (one atomic step, so two threads never make two
# UOps for one key), a dead one is removed only while it is still dead, and replacing one whose callback has not run
# yet takes a lock
_interned: dict[tuple, weakref.KeyedRef] = {}
_replace_lock = threading.Lock()
def _forget(r: weakref.KeyedRef) -> None: _remove_dead_weakref(_interned, r.key)

class UOp:
  """One operation: `op` is the `uop` dialect name, `ty` the MLIR type of its result, `arg` its attributes
  (a hashable value: int, str, tuple, or a tuple of (name, value) pairs). Equal (op, ty, src, arg) means the same
  object, so structural equality is identity and CSE is free. `loc` (the user's file:line) is not part of identity."""
  __slots__ = ("op", "ty", "src", "arg", "loc", "__weakref__", "__dict__")
  def __new__(cls, op: str, ty: str, src: tuple[UOp, ...] = (), arg: Any = None, loc: str | None = None):
    # repr keeps 0.0 and -0.0 (and 1 vs True) apart in constants, which == would merge
    key = (op, ty, tuple(id(s) for s in src), repr(arg) if op == "const" else arg)
    if (r := _interned.get(key)) is not None and (u := r()) is not None and u.src == src: return u
    u = super().__new__(cls)
    u.op, u.ty, u.src, u.arg, u.loc = op, ty, tuple(src), arg, loc
    if (r := _interned.setdefault(key, ref := weakref.KeyedRef(u, _forget, key))) is not ref:   # another thread's, or dead
      with _replace_lock:
        if (r := _interned.get(key)) is not None and (v := r()) is not None and v.src == u.src: return v
        _interned[key] = ref
    return u
  def __reduce__(self): return UOp, (self.op, self.ty, self.src, self.arg, self.loc)
  def __repr__(self): return f"UOp({self.op!r}, {self.ty!r}, {len(self.src)} srcs, arg={self.arg!r})"

  def replace(self, **kw) -> UOp:
    f = dict(op=self.op, ty=self.ty, src=self.src, arg=self.arg, loc=self.loc) | kw
    return UOp(f["op"], f["ty"], f["src"], f["arg"], f["loc"])

  # ---- type helpers, parsed once from `ty`
  @cached_property
  def _parsed(self) -> tuple[str, tuple[int, ...] | None, DType | None]:
    if (p := _PARSED.get(self.ty)) is None: p = _PARSED[self.ty] = _parse_type(self.ty)
    return p
  @property
  def kind(self) -> str: return self._parsed[0]
  @property
  def shape(self) -> tuple[int, ...] | None: return self._parsed[1]
  @property
  def dtype(self) -> DType | None: return self._parsed[2]
  @property
  def size(self) -> int:
    n = 1
    for s in self.shape or (): n *= s
    return n

  # ---- graph helpers
  @cached_property
  def toposort(self) -> list[UOp]:
    """Every node reachable from self, sources first (iterative: graphs can be deep)."""
    order, seen, stack = [], set(), [(self, False)]
    while stack:
      u, done = stack.pop()
      if done: order.append(u); continue
      if u in seen: continue
      seen.add(u)
      stack.append((u, True))
      stack.extend((s, False) for s in reversed(u.src) if s not in seen)
    return order
  def substitute(self, mapping: dict[UOp, UOp]) -> UOp:
    """Rebuild self with nodes replaced by mapping (bottom-up)."""
    new: dict[UOp, UOp] = {}
    for u in self.toposort:
      if u in mapping: new[u] = mapping[u]; continue
      src = tuple(new[s] for s in u.src)
      new[u] = u if src == u.src else u.replace(src=src)
    return new[self]

  @property
  def attrs(self) -> dict[str, Any]:
    return dict(self.arg) if isinstance(self.arg, tuple) and all(isinstance(a, tuple) and len(a) == 2 and isinstance(a[0], str) for a in self.arg) else {}

def attrs(**kw) -> tuple:
  """Attributes as a hashable, ordered arg."""
  return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in kw.items()))
