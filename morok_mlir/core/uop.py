"""UOp: the hash-consed node of the compute graph, as in tinygrad. Passes work on UOp DAGs; MLIR is their text form."""
from __future__ import annotations
import math, operator, os, threading, weakref
import numpy as np
from _weakref import _remove_dead_weakref
from typing import Any
from morok_mlir.core.dtype import DType, PtrDType, dtypes
from morok_mlir.dialects.ops import Op, Ops, GRAPH_ALU
from morok_mlir.core.mixin import OpMixin, _cv
from morok_mlir.core.provenance import error as _err

class cached_property:
  """functools.cached_property without its per-access lock (3.11 takes an RLock on every first access): UOps are
  immutable, so a racing double computation gives the same value."""
  def __init__(self, fn): self.fn, self.name = fn, fn.__name__
  def __get__(self, obj, cls=None):
    if obj is None: return self
    v = obj.__dict__[self.name] = self.fn(obj)
    return v

def _pairs(a: tuple) -> list[tuple[int, int]]: return [(a[i], a[i + 1]) for i in range(0, len(a), 2)]
def _src0(u: UOp): return u.src[0].shape

# ---- symbolic sizes: a dimension (or a shrink/pad bound) is an int or an index UOp of define_var/bind and arithmetic.
# An int-array attribute holds DYN (MLIR's ShapedType::kDynamic) for each symbolic entry, whose UOp is a trailing source
# (after the tensor operand), in order: so toposort, substitute and the MLIR text (`?` dims, `index` operands) see it.
DYN = -(1 << 63)
SYM_ATTR = {Ops.RESHAPE: "shape", Ops.EXPAND: "shape", Ops.SHRINK: "bounds", Ops.PAD: "padding"}
def split_sym(v: tuple) -> tuple[tuple, tuple]:
  """An attribute tuple with UOp entries -> (the tuple with DYN in their place, the UOps)."""
  if UOp not in map(type, v): return v, ()   # (UOp has no subclasses)
  return tuple(DYN if isinstance(x, UOp) else x for x in v), tuple(x for x in v if isinstance(x, UOp))
def sym_attr(u: UOp, name: str) -> tuple:
  """Attribute `name` of u with its DYN entries filled from u's trailing sources."""
  v = u.attrs[name]
  if len(u.src) < 2: return v
  dyn = iter(u.src[1:])
  return tuple(next(dyn) if x == DYN else x for x in v)

def box(w: UOp, tgt: UOp) -> tuple[UOp, tuple] | None:
  """(v, the box's low corner) when w is tgt written through a slice, `where(pad(all true, p), pad(v, p), tgt)` as
  Tensor.__setitem__ builds it: w differs from tgt only inside the box v fills."""
  if w.op is not Ops.WHERE or w.src[2] is not tgt: return None
  c, p, _ = w.src
  if p.op is not Ops.PAD or c.op is not Ops.PAD or sym_attr(c, "padding") != sym_attr(p, "padding"): return None
  m = c.src[0]
  while m.op in (Ops.RESHAPE, Ops.EXPAND): m = m.src[0]
  return (p.src[0], sym_attr(p, "padding")[::2]) if m.op is Ops.CONST and m.attrs["value"] is True else None

def as_index(x) -> UOp: return x if isinstance(x, UOp) else UOp(Ops.CONST, dtypes.index, (), attrs(value=int(x)))
SYM_PY = {Ops.ADD: operator.add, Ops.SUB: operator.sub, Ops.MUL: operator.mul, Ops.IDIV: operator.floordiv, Ops.MOD: operator.mod,
          Ops.MAX: max, Ops.MIN: min}
SYM_TEXT = {Ops.ADD: "+", Ops.SUB: "-", Ops.MUL: "*", Ops.IDIV: "//", Ops.MOD: "%"}
def _terms(x, k: int, out: dict) -> dict:
  """out += k * x as {term: coefficient} (None: the constant): sums, differences and constant multiples open up."""
  if not isinstance(x, UOp) or x.op is Ops.CONST: out[None] = out.get(None, 0) + k * (x if not isinstance(x, UOp) else x.attrs["value"])
  elif x.op in (Ops.ADD, Ops.SUB): _terms(x.src[0], k, out); _terms(x.src[1], k if x.op is Ops.ADD else -k, out)
  elif x.op is Ops.MUL and x.src[1].op is Ops.CONST: _terms(x.src[0], k * x.src[1].attrs["value"], out)
  else: out[x] = out.get(x, 0) + k
  return out
def _skey(x: UOp) -> str:
  """An order for terms that does not depend on bound values (so every value gives one graph)."""
  if x.op is Ops.BIND: return _skey(x.src[0])
  if x.op in (Ops.DEFINE_VAR, Ops.CONST): return f"{x.op}:{x.arg}"
  return f"{x.op}({','.join(map(_skey, x.src))})"
def _linear(out: dict):
  """A size from its terms, in one order: the positive terms added, the negative subtracted, then the constant."""
  c, acc = out.pop(None, 0), None
  terms = sorted(((t, k) for t, k in out.items() if k), key=lambda tk: _skey(tk[0]))
  for t, k in sorted(terms, key=lambda tk: tk[1] < 0):
    term = t if abs(k) == 1 else UOp(Ops.MUL, dtypes.index, (t, as_index(abs(k))), ())
    if k > 0: acc = term if acc is None else UOp(Ops.ADD, dtypes.index, (acc, term), ())
    else: acc = UOp(Ops.SUB, dtypes.index, (as_index(0) if acc is None else acc, term), ())
  if acc is None: return c
  return acc if c == 0 else UOp(Ops.ADD if c > 0 else Ops.SUB, dtypes.index, (acc, as_index(abs(c))), ())
def salu(op: Ops, a, b):
  """Index arithmetic on sizes (int or UOp): ints fold; sums, differences and constant multiples gather into one
  canonical sum of terms (so a shrink undone by a pad gives back the size it started from: (s - 5) + 5 is s, and
  cat's (n + n) - n - n is 0)."""
  if not isinstance(a, UOp) and not isinstance(b, UOp): return SYM_PY[op](a, b)
  if op in (Ops.ADD, Ops.SUB): return _linear(_terms(b, 1 if op is Ops.ADD else -1, _terms(a, 1, {})))
  if op is Ops.MUL and not isinstance(b, UOp): return _linear(_terms(a, b, {}))
  if op is Ops.MUL and not isinstance(a, UOp): return _linear(_terms(b, a, {}))
  if op is Ops.IDIV and not isinstance(b, UOp) and b == 1: return a
  return UOp(op, dtypes.index, (as_index(a), as_index(b)), ())
def sadd(a, b): return salu(Ops.ADD, a, b)
def ssub(a, b): return salu(Ops.SUB, a, b)
def smul(a, b): return salu(Ops.MUL, a, b)
def sprod(xs):
  xs = tuple(xs)
  if not any(isinstance(x, UOp) for x in xs): return math.prod(xs)
  out = 1
  for x in xs: out = smul(out, x)
  return out
def sym_val(x, env: dict | None = None) -> int:
  """The value of a size: binds give theirs, a define_var its value in env."""
  if not isinstance(x, UOp): return x
  if x.op is Ops.CONST: return x.attrs["value"]
  if x.op is Ops.BIND: return sym_val(x.src[1])
  if x.op is Ops.DEFINE_VAR: return env[x]
  return SYM_PY[x.op](*(sym_val(s, env) for s in x.src))

def sym_range(x) -> tuple[int, int]:
  """The least and greatest value of a size over its variables' ranges (a bound one too: the value may change, the
  range may not), by interval arithmetic."""
  if not isinstance(x, UOp): return x, x
  if x.op is Ops.CONST: return (v := x.attrs["value"]), v
  if x.op is Ops.BIND: return sym_range(x.src[0])
  if x.op is Ops.DEFINE_VAR: return x.attrs["min"], x.attrs["max"]
  (a0, a1), (b0, b1) = sym_range(x.src[0]), sym_range(x.src[1])
  if x.op is Ops.SUB: return a0 - b1, a1 - b0
  if x.op in (Ops.ADD, Ops.MAX, Ops.MIN): return SYM_PY[x.op](a0, b0), SYM_PY[x.op](a1, b1)
  if x.op is Ops.MOD and b0 > 0: return (a0 % b0, a1 % b0) if b0 == b1 and a0 >= 0 and a1 - a0 < b0 and a0 % b0 <= a1 % b0 else (0, b1 - 1)
  if x.op is Ops.IDIV and b0 > 0: return min(a0 // b0, a0 // b1), max(a1 // b0, a1 // b1)
  if x.op is Ops.MUL: return min(p := (a0 * b0, a0 * b1, a1 * b0, a1 * b1)), max(p)
  _err(TypeError, f"no range for the size {x!r}")

class _Guards(threading.local):
  log: list | None = None   # while a TinyJit records: (a, b, held) for each test a <= b of sizes a graph was built under
guards = _Guards()
def _unbound(x):
  if not isinstance(x, UOp): return x
  return x.substitute(b) if (b := {u: u.src[0] for u in x.toposort if u.op is Ops.BIND}) else x
def assume(a, b) -> bool:
  """Whether size a <= size b at their bound values: a choice made on a value (a slice's form along a symbolic dim) is
  logged for a TinyJit recording, whose replays at other values must make the same one."""
  held = sym_val(a) <= sym_val(b)
  if guards.log is not None and (isinstance(a, UOp) or isinstance(b, UOp)): guards.log.append((_unbound(a), _unbound(b), held))
  return held

def Variable(name: str, min: int, max: int) -> UOp:
  """A symbolic size in [min, max] (tinygrad's Variable): `.bind(value)` gives a size usable as a tensor dimension."""
  if not isinstance(name, str) or not all(isinstance(x, int) and not isinstance(x, bool) for x in (min, max)) or not 0 <= min <= max:
    _err(ValueError, f"Variable needs a name and int bounds 0 <= min <= max, got ({name!r}, {min!r}, {max!r})")
  return UOp(Ops.DEFINE_VAR, dtypes.index, (), attrs(max=max, min=min, name=name))
# the shape of a graph-level value per op, from its sources and attributes (tinygrad's `_shape`); ops whose shape no
# source gives (buffer, const, reshape, expand) carry it as the `shape` attribute; kernel-level values have none (None)
SHAPE_ATTR = frozenset((Ops.BUFFER, Ops.CONST, Ops.RESHAPE, Ops.EXPAND))
# what UOp._op does for an op besides building it: (shape attribute?, the attribute whose symbolic sizes become sources or None)
BUILD_ATTRS = {op: (op in SHAPE_ATTR, SYM_ATTR.get(op)) for op in (*SHAPE_ATTR, *SYM_ATTR)}
SRC0_SHAPED = frozenset(GRAPH_ALU | {Ops.CONTIGUOUS, Ops.COPY, Ops.ASSIGN, Ops.DETACH, Ops.THREEFRY, Ops.FLIP, Ops.SCATTER})
# ops whose shape, as the op methods compute it to build them, is the rule's own expression (the same tuple): a node
# built by an op method starts with its shape known (see seed_shape)
SHAPE_GIVEN = frozenset(SHAPE_ATTR | {Ops.PERMUTE, Ops.REDUCE_AXIS, Ops.SHRINK})
def seed_shape(d: dict, op: Ops, src0: UOp, shape: tuple) -> None:
  """Start a node an op method just built (its __dict__ d, its first source src0, the shape the method computed for
  it) with its shape known, where that is the rule's own value: the rule's call per node is most of a small op's cost."""
  if op in SRC0_SHAPED: d["shape"] = src0.shape
  elif op in SHAPE_GIVEN and shape.__class__ is tuple: d["shape"] = shape
SHAPE_RULES = {
  **{o: _src0 for o in SRC0_SHAPED},
  **{o: lambda u: u.attrs.get("shape") for o in SHAPE_ATTR},
  **{o: lambda u: sym_attr(u, "shape") for o in (Ops.RESHAPE, Ops.EXPAND)},
  Ops.GATHER: lambda u: u.src[1].shape,
  Ops.PERMUTE: lambda u: tuple(u.src[0].shape[i] for i in u.attrs["order"]),
  Ops.PAD: lambda u: tuple(sadd(sadd(s, b), a) for s, (b, a) in zip(u.src[0].shape, _pairs(sym_attr(u, "padding")))),
  Ops.SHRINK: lambda u: tuple(ssub(e, b) for b, e in _pairs(sym_attr(u, "bounds"))),
  Ops.REDUCE_AXIS: lambda u: tuple(1 if i in u.attrs["axes"] else s for i, s in enumerate(u.src[0].shape)),
  Ops.ALLREDUCE: _src0,
  Ops.MULTI: lambda u: u.src[0].shape if (ax := u.attrs["axis"]) < 0 else
    tuple(sum(s.shape[ax] for s in u.src) if i == ax else d for i, d in enumerate(u.src[0].shape)),
}

# the hash-consing table: a plain dict of weak references (WeakValueDictionary costs ~2x more per node built). A key
# holds its sources themselves (the node holds them anyway, and the entry goes when the node does), so no id is reused
# while its key lives. Safe from any number of threads: an entry is added with setdefault (one atomic step, so two
# threads never make two UOps for one key), a dead one is removed only while it is still dead, and replacing one whose
# callback has not run yet takes a lock
_interned: dict[tuple, weakref.ref] = {}
_replace_lock = threading.Lock()
def _new_lock() -> None:   # a forked compile process builds UOps: another thread of its parent may have held the lock
  global _replace_lock
  _replace_lock = threading.Lock()
os.register_at_fork(after_in_child=_new_lock)
class _Ref(weakref.ref):
  """A table entry's weak reference, which carries its key for the callback (no closure per node)."""
  __slots__ = ("key",)
def _forget(r: _Ref) -> None: _remove_dead_weakref(_interned, r.key)

class UOp(OpMixin):
  """One operation: `op` its Ops member, `dtype` its result's element type (a pointer dtype for a buffer, void for an
  ordering token), `arg` its attributes (a hashable value: int, str, tuple, or a tuple of (name, value) pairs).
  A graph-level value's `shape` is computed from its sources (SHAPE_RULES). Equal (op, dtype, src, arg) means the
  same object, so structural equality is identity and CSE is free. `loc` (the user's file:line) is not part of identity.
  `buffer` is the Buffer a graph input holds (a `buffer` node made by realize.new_buffer, unique by its id, which sets it
  once before the node is seen anywhere), else None: not part of identity either, and read per call by a TinyJit replay."""
  __slots__ = ("op", "dtype", "src", "arg", "loc", "buffer", "__weakref__", "__dict__")
  def __new__(cls, op: Ops, dtype: DType = dtypes.void, src: tuple[UOp, ...] = (), arg: Any = None, loc: str | None = None):
    assert op.__class__ is Op and isinstance(dtype, DType), (op, dtype)
    if src.__class__ is not tuple: src = tuple(src)
    # repr keeps 0.0 and -0.0 (and 1 vs True) apart in constants, which == would merge
    key = (op, dtype, src, repr(arg) if op is Ops.CONST else arg)
    if (r := _interned.get(key)) is not None and (u := r()) is not None: return u
    u = object.__new__(cls)
    u.op, u.dtype, u.src, u.arg, u.loc, u.buffer = op, dtype, src, arg, loc, None
    ref = _Ref(u, _forget)
    ref.key = key
    if (r := _interned.setdefault(key, ref)) is not ref:   # another thread's, or dead
      with _replace_lock:
        if (r := _interned.get(key)) is not None and (v := r()) is not None: return v
        _interned[key] = ref
    return u
  @classmethod
  def unique(cls, op: Ops, dtype: DType, arg: Any, loc: str | None = None) -> UOp:
    """A source-less node whose arg makes it unique (a buffer's id): no other node can equal it, so it skips the
    hash-consing table (a TinyJit replay makes one per output: ~1 us of a ~7 us call)."""
    u = object.__new__(cls)
    u.op, u.dtype, u.src, u.arg, u.loc, u.buffer = op, dtype, (), arg, loc, None
    return u
  def __reduce__(self): return UOp, (self.op, self.dtype, self.src, self.arg, self.loc)
  def __repr__(self):
    if self.op is Ops.DEFINE_VAR: return "Variable({name!r}, {min}, {max})".format(**self.attrs)
    if self.op is Ops.BIND: return f"{self.src[0]!r}.bind({sym_val(self)})"
    if self.dtype is dtypes.index and (sym := SYM_TEXT.get(self.op)): return f"({self.src[0]!r} {sym} {self.src[1]!r})"
    if self.dtype is dtypes.index and self.op is Ops.CONST: return repr(self.attrs["value"])
    return f"UOp({self.op}, {self.dtype!r}, {len(self.src)} srcs, arg={self.arg!r})"
  def bind(self, value: int) -> UOp:
    """This define_var bound to value (checked to lie in [min, max]): a size whose value travels apart from the graph."""
    if self.op is not Ops.DEFINE_VAR: _err(TypeError, f"only a Variable can be bound, not a {self.op}")
    a = self.attrs
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or not a["min"] <= value <= a["max"]:
      _err(ValueError, f"{a['name']} = {value!r} is outside [{a['min']}, {a['max']}]")
    return UOp(Ops.BIND, dtypes.index, (self, UOp(Ops.CONST, dtypes.index, (), (('value', int(value)),))), ())   # (attrs(value=))

  @property
  def val(self) -> int:
    """The value of a bound size (a bound Variable, or an expression of them: `(v.bind(3) + 2).val` is 5)."""
    try: return sym_val(self, {})
    except KeyError as e: _err(ValueError, f"{e.args[0]!r} is not bound: use .bind(value)")
  def unbind(self) -> tuple[UOp, int]:
    """A bound Variable as (the Variable, its value)."""
    if self.op is not Ops.BIND: _err(TypeError, f"only a bound Variable can be unbound, not a {self.op}")
    return self.src[0], self.src[1].attrs["value"]

  def replace(self, **kw) -> UOp:
    f = dict(op=self.op, dtype=self.dtype, src=self.src, arg=self.arg, loc=self.loc) | kw
    return UOp(f["op"], f["dtype"], f["src"], f["arg"], f["loc"])

  # ---- OpMixin's primitives: graph-level op methods build UOps directly (used by rewrite rules, gradients, importers)
  @property
  def _node(self) -> UOp: return self
  def _op(self, _op: Ops, shape: tuple, dtype: DType | None = None, src: tuple[UOp, ...] = (), loc: str | None = None, **kw) -> UOp:
    """Node _op of self and src with attributes kw, at loc (default: self's). shape is the op method's: a reshape or
    expand carries it as its attribute, and a new node starts with it known (seed_shape)."""
    if (mv := BUILD_ATTRS.get(_op)) is None: u = UOp(_op, dtype or self.dtype, (self,) + src, arg_of(kw) if kw else (), loc or self.loc)
    else:
      if mv[0]: kw["shape"] = shape = tuple(shape)
      dyn = ()   # symbolic sizes are sources after the operands (SYM_ATTR)
      if (name := mv[1]) is not None: kw[name], dyn = split_sym(kw[name])
      u = UOp(_op, dtype or self.dtype, (self, *src, *dyn), arg_of(kw), loc or self.loc)
    if "shape" not in (d := u.__dict__): seed_shape(d, _op, self, shape)
    return u
  def _const(self, value, dtype: DType | None = None) -> UOp:
    dt = dtype or dtypes.from_py(value)
    return UOp(Ops.CONST, dt, (), attrs(value=_cv(value, dt), shape=()), self.loc)

  # ---- shape
  @cached_property
  def shape(self) -> tuple | None:
    """Each dimension an int (or a symbolic index UOp); None for a kernel-level scalar, pointer or token."""
    # the rules read src[0]'s shape only: compute down that chain iteratively first (graphs can be deep)
    chain, u = [], self
    while u.src and "shape" not in (s := u.src[0]).__dict__: chain.append(s); u = s
    for u in reversed(chain): u.__dict__["shape"] = None if (rule := SHAPE_RULES.get(u.op)) is None else rule(u)
    return None if (rule := SHAPE_RULES.get(self.op)) is None else rule(self)
  @cached_property
  def size(self):
    """Elements: of the shape (an index UOp when it is symbolic), of a sized buffer, 1 for a scalar."""
    if (sh := self.shape) is None: return self.dtype.size if isinstance(self.dtype, PtrDType) and self.dtype.size is not None else 1
    n = 1
    for s in sh:
      if isinstance(s, UOp): return sprod(sh)
      n *= s
    return n

  # ---- graph helpers
  @cached_property
  def toposort(self) -> list[UOp]:
    """Every node reachable from self, sources first (iterative: graphs can be deep)."""
    return self.walk()
  def walk(self) -> list[UOp]:
    """toposort, not kept on the node: the list holds the node, so a node that keeps it lives, with its whole graph and
    the buffers below, until a garbage collection (a training step's loss, walked once, kept last step's weights)."""
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

  @cached_property
  def attrs(self) -> dict[str, Any]:
    """The attributes as a dict (read-only by convention: computed once per node)."""
    return dict(self.arg) if isinstance(self.arg, tuple) and all(isinstance(a, tuple) and len(a) == 2 and isinstance(a[0], str) for a in self.arg) else {}

def attrs(**kw) -> tuple: return arg_of(kw)
def arg_of(kw: dict) -> tuple:
  """Attributes (name -> value) as a hashable arg, ordered by name (lists become tuples); one or two without a sort."""
  if len(kw) == 1:
    (k, v), = kw.items()
    return ((k, tuple(v) if isinstance(v, list) else v),)
  if len(kw) == 2:
    (k, v), (k2, v2) = kw.items()
    a, b = (k, tuple(v) if isinstance(v, list) else v), (k2, tuple(v2) if isinstance(v2, list) else v2)
    return (a, b) if k < k2 else (b, a)
  return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in kw.items()))

# arithmetic on sizes: an index UOp (a Variable, bound or not, or an expression of them) with an int or another builds
# the symbolic size (tinygrad's `vi + 2`, whose .val is vi.val + 2); any other UOp takes the graph-level op
def _size_op(name: str, op: Ops):
  graph = getattr(OpMixin, f"__{name}__")
  def fwd(self, x, reverse=False):
    if self.dtype is dtypes.index:
      if isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_)): x = int(x)
      elif x.__class__ is not UOp or x.dtype is not dtypes.index: return NotImplemented   # a Tensor takes it (Tensor + size)
      return salu(op, x, self) if reverse else salu(op, self, x)
    return graph(self, x, reverse)
  setattr(UOp, f"__{name}__", fwd)
  setattr(UOp, f"__r{name}__", lambda self, x: fwd(self, x, True))
for _n, _o in (("add", Ops.ADD), ("sub", Ops.SUB), ("mul", Ops.MUL), ("floordiv", Ops.IDIV), ("mod", Ops.MOD)): _size_op(_n, _o)
