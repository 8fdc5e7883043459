"""The lazy Tensor API (tinygrad/PyTorch names and semantics). Each op builds hash-consed graph-level UOps; nothing runs
until realize()/numpy(). Derived ops are written with the primitive ops of the `uop` dialect, as tinygrad does."""
from __future__ import annotations
import collections, contextlib, copy, ctypes, functools, inspect, math, operator, os, sys, threading, weakref
from typing import Any
import numpy as np
from morok_mlir.core.dtype import DType, dtypes
from morok_mlir.core.uop import UOp, attrs, sym_val, sym_range, salu, ssub
from morok_mlir.dialects.ops import Ops
from morok_mlir.core.mixin import OpMixin, BINARY_OPS, _argfix, _basic_plan, _bshape, _cv, _dtype, _isint, _prod, _shape, _err, vkey
from morok_mlir.core.provenance import scope as _scope, user_loc as _loc, walk_loc, OpTypeError
from morok_mlir.core.gradient import compute_gradient
from morok_mlir.core.index_math import smax
from morok_mlir.realize import new_buffer, in_place as _in_place, realize as _realize, capture as _capture, compile_stages as _compile_stages
from morok_mlir.device import Device, dlpack
from morok_mlir.device.buffer import Buffer
from morok_mlir import multi_realize as _multi
from morok_mlir.ir.emit import normalize as _normalize, structure as _structure
from morok_mlir.lru import LRU

_KNOWN_DEVICES: dict = {}  # name as given -> canonical name, for names already checked
def _device(name) -> str:
  """A device name in canonical form (Device.DEFAULT for None); unknown names raise at the user's line."""
  if type(name) is str and (dev := _KNOWN_DEVICES.get(name)) is not None: return dev
  from morok_mlir.device import Device
  if name is None: return Device.DEFAULT  # not remembered: the default may change (Device.DEFAULT = ...)
  if type(name) is tuple:   # several devices: a multi tensor's (tinygrad's)
    if not name: _err(ValueError, "a tensor on several devices needs at least one")
    if len(devs := tuple(_device(n) for n in name)) != len(set(devs)): _err(ValueError, f"a device appears twice in {devs}")
    return devs
  if not isinstance(name, str): _err(TypeError, f"a device is a name such as 'CPU', got {type(name).__name__}")
  try: d = Device[name]
  except KeyError as e: _err(ValueError, str(e.args[0]))
  if (init := getattr(d, "init", None)) is None: _KNOWN_DEVICES[name] = Device.canonicalize(name)
  else:   # a device that may be absent (no driver, no GPU) says so here, at the user's line, not at a later realize
    try: init(); why = None
    except RuntimeError as e: why = str(e)
    if why is not None: _err(RuntimeError, f"device {name!r} is not available: {why}")
  return Device.canonicalize(name)


# ---------------------------------------------------------------- helpers


def _fit_default(v, dt: DType):
  """A Python int of a tensor whose dtype was inferred (the default int) must fit it: wrapping would be a silent change."""
  if not dt.min <= v <= dt.max:
    _err(OverflowError, f"{v} does not fit {dt}, the default int dtype: pass one that holds it (e.g. dtype=dtypes.int64)")

def _from_list(data, dt: DType, inferred: bool) -> np.ndarray:
  """A (nested) list of Python/numpy scalars and arrays as an array of dtype dt, with _cv's rules for every value."""
  floats = dt.is_float or not inferred and any(isinstance(x, (float, np.floating)) or isinstance(x, np.ndarray) and x.dtype.kind == "f"
                                               for x in _flat(data))   # an inferred int dtype means no floats
  wide = None
  try:
    if floats: arr = np.array(data, dtype=np.float64)
    else:
      try: arr = np.array(data, dtype=np.int64)
      except OverflowError: arr, wide = np.array(data, dtype=object), dtypes.uint64 if dt.is_unsigned else dtypes.int64
  except ValueError as e: _err(ValueError, f"cannot make a tensor from a ragged list ({e})")
  except OverflowError as e: _err(OverflowError, f"cannot make a tensor from this list ({e})")
  if wide is not None:   # Python ints past int64: each one checked, then wrapped as a cast does
    if not all(isinstance(x, (int, np.integer)) for x in arr.flat): _err(ValueError, "cannot make a tensor from a ragged list")
    if inferred: _fit_default(max(arr.flat, key=abs), dt)
    arr = np.array([_cv(x, wide) for x in arr.flat], wide.np).reshape(arr.shape)
  if floats and not (dt.is_float or dt.is_bool) and arr.size:
    if not np.isfinite(arr).all(): _err(ValueError, f"cannot convert {arr[~np.isfinite(arr)].flat[0]} to {dt}")
    if not dt.min <= np.trunc(arr.min()) <= np.trunc(arr.max()) <= dt.max:
      _err(OverflowError, f"values in [{arr.min()}, {arr.max()}] are out of range for {dt}")
  if inferred and arr.size and dt.is_int: _fit_default(int(arr.min()), dt), _fit_default(int(arr.max()), dt)
  return arr.astype(dt.np)

def _flat(data):
  """The leaves of a nested list (in no particular order)."""
  stack = [data]
  while stack:
    if isinstance(x := stack.pop(), (list, tuple)): stack.extend(x)
    else: yield x



def _buf(arr: np.ndarray, loc: str | None = None) -> UOp:
  return new_buffer(arr, loc or _loc())

def _is_data(u: UOp) -> bool:
  return u.op is Ops.BUFFER or (u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER) or (u.op is Ops.MULTI and all(map(_is_data, u.src)))
def _data(u: UOp) -> UOp: return u if u.op is Ops.BUFFER else u.src[0]   # the buffer UOp of data



def _host_array(x) -> np.ndarray:
  """The values of an object from another array library: through DLPack, or numpy's __array__ (a device tensor's DLPack
  is refused by numpy, its __array__ may copy it to the host)."""
  for f in ((np.from_dlpack,) if hasattr(x, "__dlpack__") else ()) + ((np.asarray,) if hasattr(x, "__array__") else ()):
    try: return f(x)
    except (BufferError, TypeError, RuntimeError, ValueError) as e: err = e
  _err(TypeError, f"cannot make a tensor from {type(x).__name__}: {err}")

def _host_array_at(ptr: int, shape: tuple[int, ...], dt: DType, owner=None) -> np.ndarray:
  """An array over the host memory at ptr (not copied); owner lives while the array does."""
  if not (nbytes := math.prod(shape) * dt.itemsize): return np.empty(shape, dt.np)
  mem = (ctypes.c_char * nbytes).from_address(int(ptr))
  mem.owner = owner
  return np.frombuffer(mem, dt.np).reshape(shape)

def _from_capsule(x, kind: int) -> UOp:
  """The buffer UOp over the memory x's DLPack capsule describes: host memory of any dtype here, or CUDA memory."""
  if kind not in (dlpack.KDL_CPU, dlpack.KDL_CUDA): raise BufferError(f"DLPack device type {kind} is not supported (CPU and CUDA are)")
  # stream 1, the legacy default stream: our stream is a blocking one, ordered after the producer's work there
  try: cap = x.__dlpack__(max_version=dlpack.VERSION, **({"stream": 1} if kind == dlpack.KDL_CUDA else {}))
  except TypeError: cap = x.__dlpack__()   # a producer before DLPack 1.0
  imp = dlpack.Imported(cap)
  if not imp.contiguous: raise BufferError(f"a DLPack tensor with strides {imp.strides} for shape {imp.shape}: make it contiguous first")
  n = math.prod(imp.shape)
  if kind == dlpack.KDL_CPU: return new_buffer(_host_array_at(imp.ptr, imp.shape, imp.dtype, imp), _loc(), dtype=imp.dtype)
  from morok_mlir.device.cuda import CUDABuffer
  if imp.device[1] != (dev := Device["CUDA"]).ordinal: raise BufferError(f"DLPack memory of CUDA device {imp.device[1]}, not {dev.ordinal}")
  cb = CUDABuffer(imp.ptr, n, imp.dtype, n * imp.dtype.itemsize)
  cb.owner = imp   # not the allocator's: freeing it returns the memory to its producer
  return new_buffer(Buffer("CUDA", n, imp.dtype).allocate(opaque=cb), _loc(), shape=imp.shape)

def _infer(data) -> DType:
  """tinygrad's dtype of a Python (nested) list: all bools -> bool, any float -> float32, else int32."""
  flat = [x.dtype if isinstance(x, Tensor) else _np_dtype(x.dtype) if isinstance(x, np.ndarray) else _scalar_dtype(x, "a list holding ")
          for x in _flat(data)]
  if not flat: return dtypes.default_float
  if all(d.is_bool for d in flat): return dtypes.bool
  return dtypes.default_float if any(d.is_float for d in flat) else dtypes.default_int

def _np_dtype(t) -> DType:
  try: return dtypes.from_np(t)
  except TypeError as e: _err(TypeError, f"cannot make a tensor from an array of {e}")

def _scalar_dtype(x, what: str = "") -> DType:
  try: return dtypes.from_py(x)
  except TypeError: _err(TypeError, f"cannot make a tensor from {what}{type(x).__name__} (supported: bool, int, float and numpy's "
                                    f"{', '.join(d.name for d in dtypes.all)})")


_rng = None   # the host generator (randperm, multinomial), seeded 0 when first used: numpy.random loads then, not at import
def _host_rng():
  global _rng
  if _rng is None: _rng = np.random.default_rng(0)
  return _rng
class _RNG:   # the device generator's state: the seed (threefry key) and the number of values drawn (the next counter)
  seed, drawn, lock = 0, 0, threading.Lock()

# tensors the user marked requires_grad=True (by id; weak: a tensor nobody holds takes no gradient), which backward fills
_leaves: dict[int, weakref.ref] = {}
# a realized tensor that requires grad keeps the graph it came from, so a backward through it reaches its inputs
_realized: weakref.WeakKeyDictionary[UOp, UOp] = weakref.WeakKeyDictionary()
def _graph(u: UOp, keep=frozenset()) -> tuple[UOp, dict[UOp, UOp]]:
  """u with realized values that require grad (but those in keep) replaced by the graphs they came from, again inside
  those; and the way back: each such graph, as it appears in u, to the value realized from it."""
  if not _realized: return u, {}   # (the common case: a walk of the graph's nodes less)
  found: dict[UOp, UOp] = {}
  while m := {v: g for v in u.walk() if v not in keep and (g := _realized.get(v)) is not None}: found.update(m); u = u.substitute(m)
  back = {}
  for v, g in found.items():
    while m := {w: found[w] for w in g.walk() if w in found}: g = g.substitute(m)
    back[g] = v
  return u, back

def _nodes(u: UOp) -> set[UOp]:
  """Every node reachable from u (a walk without toposort's order: half its cost)."""
  seen, stack = {u}, [u]
  while stack:
    for s in stack.pop().src:
      if s not in seen: seen.add(s); stack.append(s)
  return seen

# The gradient rules read a graph's structure only (ops, dtypes, attributes, shapes, constants), never its data, so the
# gradients of a graph are built once per structure (emit.structure's key, the schedule cache's), on its normalized
# form whose inputs are numbered slots, and a graph of that structure puts its own inputs in the slots: a training loop
# builds the same backward on new weights every step (an SGD step's: ~425 us of rules -> ~150 us of rebuilt nodes).
_GRADS = LRU(max_entries=64)   # structure key -> _template's program
def _gradients(root: UOp, seed: UOp, targets: list[UOp]) -> list[UOp | None]:
  """compute_gradient(root, seed, targets)'s gradient of each target (None where it has none)."""
  try: key, bufs, vals = _structure(outs := [root, seed, *targets])
  except ValueError: vals = True   # a variable bound to two values: fine for gradients, never for one realize
  if vals:   # symbolic sizes: the rules see them bound
    grads = compute_gradient(root, seed, targets)
    return [grads.get(t) for t in targets]
  if (tpl := _GRADS.get(key)) is None: tpl = _GRADS[key] = _template(outs)
  consts, nodes, res = tpl
  vals = [*bufs, *consts]
  for op, dt, ix, arg, loc in nodes: vals.append(UOp(op, dt, tuple([vals[i] for i in ix]), arg, loc))
  return [None if i is None else vals[i] for i in res]

def _template(outs: list[UOp]) -> tuple:
  """The gradients of outs' graph (root, seed, targets) over its normalized form, as a program over a list of values:
  the inputs (by slot), then consts (the nodes without an input below that the others read), then each node above an
  input as (op, dtype, its sources' places, arg, loc), appended in order; and each target's place (None: no gradient)."""
  (nroot, nseed, *nts), nbufs, _ = _normalize(outs)
  grads = list(map((g := compute_gradient(nroot, nseed, nts)).get, nts))
  slots = [UOp(Ops.BUFFER, b.dtype, (), attrs(shape=b.shape, slot=i)) for i, b in enumerate(nbufs)]
  above = dict.fromkeys(slots)   # the inputs, then every node with one below, sources first
  for u in UOp(Ops.SINK, dtypes.void, tuple(g for g in grads if g is not None)).walk()[:-1]:
    if any(s in above for s in u.src): above[u] = None
  nodes = list(above)[len(slots):]
  consts = list(dict.fromkeys([s for u in nodes for s in u.src if s not in above] + [g for g in grads if g is not None and g not in above]))
  place = {u: i for i, u in enumerate([*slots, *consts, *nodes])}
  return consts, [(u.op, u.dtype, tuple(place[s] for s in u.src), u.arg, u.loc) for u in nodes], [None if g is None else place[g] for g in grads]

# A view (PyTorch's: what basic indexing, reshape, permute, shrink and expand return) remembers its base (weakly: a base
# nobody holds needs no write), the base's shape and how to move a value of its shape back into the base's (0 outside),
# followed by its base's own view: a write to the view also writes every base still held, through temporaries too.
def _argsort(order) -> tuple[int, ...]: return tuple(int(i) for i in np.argsort(order))   # the inverse permutation
_VIEWS = {Ops.RESHAPE: "shape", Ops.PERMUTE: "order", Ops.SHRINK: "bounds", Ops.EXPAND: "shape"}
_UNVIEW = {Ops.RESHAPE: lambda shape, arg, v: v.reshape(shape),
           Ops.PERMUTE: lambda shape, arg, v: v.permute(_argsort(arg)),
           Ops.SHRINK: lambda shape, arg, v: v.pad(tuple((lo, s - hi) for s, lo, hi in zip(shape, arg[::2], arg[1::2]))),
           "index": lambda shape, arg, v: v._basic_put(shape, arg)}

def _index_shape(shapes: list[tuple[int, ...]]) -> tuple[int, ...]:
  """The broadcast shape of index arrays (numpy's IndexError when they do not broadcast)."""
  nd = max(map(len, shapes), default=0)
  out = [{d for d in dims if d != 1} for dims in zip(*((1,) * (nd - len(s)) + tuple(s) for s in shapes))]
  if any(len(o) > 1 for o in out):
    _err(IndexError, f"shape mismatch: indexing arrays could not be broadcast together with shapes {' '.join(str(tuple(s)) for s in shapes)}")
  return tuple(o.pop() if o else 1 for o in out)

def _torch_floats(a: np.ndarray) -> dict | None:
  """PyTorch's way to print floats, as numpy's formatter: integral values as `2.`, others with 4 decimals, scientific
  when the finite magnitudes span over 1000x or leave [1e-4, 1e8]; one width for all."""
  if a.dtype.kind != "f" or not a.size: return None
  m = np.abs(a[np.isfinite(a) & (a != 0)].astype(np.float64))
  sci = m.size > 0 and (m.max() > 1e8 or (not np.all(m == np.round(m)) and (m.max() / m.min() > 1000 or m.min() < 1e-4)))
  fmt = "{:.4e}" if sci else "{:.0f}." if np.all(m == np.round(m)) else "{:.4f}"
  text = lambda x: fmt.format(x) if np.isfinite(x) else str(float(x))
  width = max(len(text(x)) for x in a.flat)
  return {"float_kind": lambda x: text(x).rjust(width)}

# ---------------------------------------------------------------- Tensor
class _Modes(threading.local):
  """Tensor.training and Tensor.no_grad, per thread (PyTorch's grad mode is): one thread's train() or optimizer step
  changes no other thread's dropout or gradients. Every thread starts with these defaults."""
  training = False   # dropout (and attention's dropout_p) act only while True, as tinygrad's Tensor.training
  no_grad = False    # while True, ops record no gradient path: their results are detached (tinygrad's Tensor.no_grad)
_modes = _Modes()
def _mode(name: str) -> property:   # del (monkeypatch's undo) restores the default
  return property(lambda cls: getattr(_modes, name), lambda cls, v: setattr(_modes, name, v), lambda cls: delattr(_modes, name), _Modes.__doc__)

class _ModeContext(contextlib.ContextDecorator):
  """Sets one of the thread's modes inside a block and restores it after."""
  name = ""
  def __init__(self, mode: bool = True): self.mode = mode
  def _recreate_cm(self): return type(self)(self.mode)   # each call of a decorated function (in any thread) its own prev
  def __enter__(self): self.prev = getattr(_modes, self.name); setattr(_modes, self.name, self.mode)
  def __exit__(self, *exc): setattr(_modes, self.name, self.prev)

class _TensorType(type):
  """`Tensor.training = True` and reading `Tensor.training` (tinygrad's spelling) go to the calling thread's modes."""
  training, no_grad = _mode("training"), _mode("no_grad")

# the machine's memory: no host array bigger than it is ever attempted
_PHYS_BYTES = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") and "SC_PHYS_PAGES" in os.sysconf_names else 1 << 62

class Tensor(OpMixin, metaclass=_TensorType):
  """A lazy tensor: its graph UOp, its device. The op methods (elementwise, movement, reductions) are OpMixin's,
  shared with UOp; what is Tensor's own is here: data, devices, realization, creation and the user's line."""
  __slots__ = ("uop", "device", "_requires_grad", "grad", "_view", "__weakref__")
  __hash__ = object.__hash__  # == is elementwise

  def __init__(self, data: Any, dtype: DType | str | None = None, device: str | None = None, requires_grad: bool | None = None):
    dt = None if dtype is None else _dtype(dtype)
    self.device, self._requires_grad, self.grad, self._view = _device(device), None, None, None
    if isinstance(data, UOp): self.uop = data if dt is None or data.dtype == dt else Tensor(data).cast(dt).uop
    elif isinstance(data, Tensor):
      self.uop = (data if dt is None else data.cast(dt)).uop
      if device is None: self.device = data.device   # (a multi tensor's graph stays on its devices)
    elif isinstance(data, (bool, int, float, np.generic)):
      if dt is None or isinstance(data, np.generic):   # a numpy scalar may be complex, str, ...
        sdt = _scalar_dtype(data)
        if dt is None and type(data) is int: _fit_default(data, sdt)
        dt = dt or sdt
      self.uop = UOp(Ops.CONST, dt, (), attrs(value=_cv(data, dt), shape=()), _loc())
    elif isinstance(data, (list, tuple)):
      inferred, dt = dt is None, dt or _infer(data)
      self.uop = _buf(_from_list([x.numpy() if isinstance(x, Tensor) else x for x in data], dt, inferred))
    elif isinstance(data, np.ndarray):  # new_buffer copies: the user may change the array later
      if dt is None or data.dtype == dt.npdt: self.uop = new_buffer(data, _loc(), copy=True)
      else:
        _np_dtype(data.dtype)
        self.uop = _buf(data.astype(dt.np))
    elif isinstance(data, (bytes, bytearray, memoryview)):   # tinygrad's: the bytes as uint8, or read as dtype
      try: self.uop = _buf(np.frombuffer(bytes(data), (dt or dtypes.uint8).np).copy())
      except ValueError as e: _err(ValueError, f"cannot read {len(bytes(data))} bytes as {dt}: {e}")
    elif data is None: self.uop = _buf(np.empty((0,), dtype=(dt or dtypes.default_float).np))
    elif hasattr(data, "__dlpack__") or hasattr(data, "__array__"):   # a torch/jax/cupy... host tensor: copied, as an ndarray
      self.uop = new_buffer(_host_array(data), _loc(), copy=True) if dt is None else Tensor(_host_array(data), dt).uop
    else: _err(TypeError, f"cannot make a tensor from {type(data).__name__}")
    if type(self.device) is tuple and self.uop.op is not Ops.MULTI and any(u.buffer is not None for u in self.uop.toposort):
      self.uop = _multi.replicated(self.uop, self.device)   # data given for several devices: a copy on each
    if requires_grad is not None: self.requires_grad = requires_grad

  @staticmethod
  def _of(u: UOp, device: str) -> Tensor:
    """Tensor(u, device=device) for a hot path (a TinyJit replay's outputs): u a data UOp, device a canonical name; every
    slot as __init__ sets it (test_jit checks that they agree)."""
    t = object.__new__(Tensor)
    t.uop, t.device, t._requires_grad, t.grad, t._view = u, device, None, None, None
    return t

  # ---- autograd (tinygrad's Tensor.gradient and Tensor.backward; gradients are lazy graphs, see core/gradient.py)
  @property
  def requires_grad(self) -> bool | None:
    """True: gradients flow to this tensor and backward() fills its .grad; False: none do; None: unset (tinygrad's).
    An op's result requires grad when one of its sources does."""
    return self._requires_grad
  @requires_grad.setter
  def requires_grad(self, v: bool | None):
    if v is not None and not isinstance(v, (bool, np.bool_)): _err(TypeError, f"requires_grad must be a bool or None, got {type(v).__name__}")
    if v and not self.dtype.is_float: _err(RuntimeError, f"only tensors of floating point dtype can require gradients, got {self.dtype}")
    if v and id(self) not in _leaves:
      # a leaf is data: its own node (constants are hash-consed: two zeros(3) are one UOp), which no later realize replaces
      # under the graphs built from it. A tensor that requires grad through its sources stays a graph (tinygrad's).
      if self._requires_grad is not True and not _is_data(self.uop):
        if (cv := self._const_value()) is not None and all(isinstance(s, int) for s in self.shape):
          self.uop = _buf(np.full(self.shape, cv, self.dtype.np))
        else: self.realize()
      _leaves[id(self)] = weakref.ref(self, lambda r, k=id(self): _leaves.pop(k, None) if _leaves.get(k) is r else None)
    self._requires_grad = None if v is None else bool(v)
  def requires_grad_(self, requires_grad: bool = True) -> Tensor:
    self.requires_grad = requires_grad
    return self
  def detach(self) -> Tensor:
    """The same value, cut from the gradient graph."""
    u = self.uop if self.uop.op is Ops.DETACH else UOp(Ops.DETACH, self.dtype, (self.uop,), (), _loc())
    return Tensor(u, device=self.device, requires_grad=False)
  def gradient(self, *targets: Tensor, gradient: Tensor | None = None, materialize_grads: bool = False) -> list[Tensor]:
    """The gradients of self with respect to targets, as lazy tensors (tinygrad's: .grad is not touched). gradient: the
    seed, of self's shape (1 for a scalar). A target self depends on only through ops without a gradient (comparisons,
    bit casts, integer ops) gets zeros; one self does not depend on raises unless materialize_grads (zeros) or empty."""
    if not all(isinstance(t, Tensor) for t in targets): _err(TypeError, "gradient() takes Tensors as targets")
    if gradient is None:
      if self.shape != (): _err(RuntimeError, f"grad can be implicitly created only for scalar outputs, got shape {self.shape}: pass gradient=")
      gradient = Tensor(1.0, self.dtype, device=self.device)
    elif not isinstance(gradient, Tensor) or gradient.shape != self.shape:
      _err(RuntimeError, f"gradient must be a Tensor of shape {self.shape}, got {getattr(gradient, 'shape', type(gradient).__name__)}")
    if not (self.dtype.is_float and all(t.dtype.is_float for t in targets)):
      _err(RuntimeError, f"only float tensors have gradients, got {self.dtype} and {', '.join(str(t.dtype) for t in targets)}")
    if len(tu := {t.uop for t in targets}) < len({id(t) for t in targets}):   # equal constants are one node: their uses are one
      _err(RuntimeError, "two targets are one graph node (equal constants, or a tensor made from another), so their gradients cannot be "
                         "told apart: make each a leaf first (requires_grad=True)")
    root, back = _graph(self.uop, tu)
    grads = dict(zip(tl := list(dict.fromkeys(t.uop for t in targets)), _gradients(root, gradient.cast(self.dtype).uop, tl)))
    ret, in_graph = [], None
    for t in targets:
      if (g := grads[t.uop]) is None:
        # a target reached only through ops without a gradient (comparisons, bit casts) has a zero one, so has an empty
        # target, and any target of an empty result
        if not (materialize_grads or t.numel() == 0 or self.numel() == 0 or t.uop in (in_graph := in_graph or _nodes(root))):
          _err(RuntimeError, f"a target {t.shape} {t.dtype} is not part of the graph of this tensor")
        g = Tensor.zeros(t.shape, dtype=t.dtype, device=t.device).uop
      # forward values the rules use (exp's result, a product's operands) are read from what was realized, not recomputed
      if back: g = g.substitute(back)
      if type(self.device) is tuple and type(t.device) is str: g = _multi.realize_on(g, t.device)   # from several devices to one
      ret.append(Tensor(g, device=t.device))
    return ret
  def backward(self, gradient: Tensor | None = None) -> Tensor:
    """Accumulate d self / d t into t.grad for every tensor t marked requires_grad=True that self depends on."""
    root = _graph(self.uop)[0]
    in_graph = _nodes(root)
    leaves = [t for r in list(_leaves.values()) if (t := r()) is not None and t._requires_grad and t.uop in in_graph]
    if self._requires_grad is False or not leaves:
      _err(RuntimeError, "backward() of a tensor that does not require grad: no tensor it depends on has requires_grad=True")
    for t, g in zip(leaves, self.gradient(*leaves, gradient=gradient, materialize_grads=True)):
      if t.grad is None: t.grad = g
      else: t.grad.assign(t.grad + g)
    return self

  class train(_ModeContext):
    """Sets Tensor.training (dropout acts) in this thread inside the block: `with Tensor.train():`, or as a decorator."""
    name = "training"
  class test(_ModeContext):
    """Sets Tensor.no_grad in this thread inside the block (tinygrad's name; morok_mlir.no_grad() is PyTorch's)."""
    name = "no_grad"

  # ---- properties
  # read through C getters: op methods ask for these dozens of times per op, and a Python property's frame costs more
  shape = property(operator.attrgetter("uop.shape"), doc="Each dimension an int (or a bound symbolic size).")
  dtype = property(operator.attrgetter("uop.dtype"), doc="The element type.")
  @property
  def lazydata(self) -> UOp: return self.uop
  def size(self, dim: int | None = None): return self.shape if dim is None else self.shape[self._dim(dim)]
  def dim(self) -> int: return self.ndim
  def element_size(self) -> int: return self.dtype.itemsize
  def nbytes(self) -> int: return self.numel() * self.dtype.itemsize
  def is_floating_point(self) -> bool: return self.dtype.is_float
  def __len__(self) -> int:
    if not self.shape: _err(TypeError, "len() of a 0-d tensor")
    return sym_val(self.shape[0])   # a symbolic size: its bound value, the length .numpy() gives
  def __repr__(self) -> str:
    """PyTorch's: the values (it realizes), then dtype, device and requires_grad where they are not the default ones."""
    try: vals = np.array2string(a := self.numpy(), separator=", ", prefix="tensor(", formatter=_torch_floats(a))
    except Exception as e: return f"<Tensor {self.uop.op} shape={self.shape} dtype={self.dtype} device={self.device} (unreadable: {e})>"
    extra = [f"size={self.shape}"] * (self.numel() == 0 and self.ndim > 1)
    if self.dtype not in (dtypes.default_float, dtypes.default_int, dtypes.bool): extra.append(f"dtype={self.dtype!r}")
    if self.device != Device.DEFAULT: extra.append(f"device={self.device!r}")
    if self.requires_grad: extra.append("requires_grad=True")
    return f"tensor({', '.join([vals, *extra])})"
  def _scalar(self, what: str):
    """The one element's value for a Python conversion (PyTorch's: any tensor of one element, it realizes)."""
    if self.numel() != 1: _err(ValueError, f"only one element tensors can be converted to Python scalars ({what} of shape {self.shape})")
    return self.numpy().item()
  def __float__(self) -> float: return float(self._scalar("float()"))
  def __int__(self) -> int: return int(self._scalar("int()"))
  def __bool__(self) -> bool:
    if self.numel() != 1: _err(OpTypeError, f"the truth value of a tensor of shape {self.shape} is ambiguous: use .any() or .all()")
    return bool(self._scalar("bool()"))
  def __format__(self, spec: str) -> str:
    """A format spec formats the one element's value (f"{t:.2f}"); no spec is str(t)."""
    if not spec: return str(self)
    if self.numel() != 1: _err(TypeError, f"a format spec ({spec!r}) needs a tensor of one element, got shape {self.shape}: format t.tolist()")
    return format(self._scalar("format"), spec)
  def __deepcopy__(self, memo: dict) -> Tensor:
    """An independent tensor with the same values, dtype, device, requires_grad and (copied) grad."""
    ret = memo[id(self)] = Tensor(self.numpy(), self.dtype, device=self.device, requires_grad=self.requires_grad)
    if self.grad is not None: ret.grad = copy.deepcopy(self.grad, memo)
    return ret
  def __reduce__(self):   # pickle (and copy.copy): the values, dtype, device and requires_grad
    return _unpickle, (self.numpy(), self.dtype.name, self.device, self.requires_grad)

  # ---- numpy's protocols, as PyTorch's CPU tensors: numpy reads a Tensor's values (np.asarray(t), np.array(t)); a numpy
  # function of a Tensor computes on them and gives back a Tensor (np.exp(t)); an operator with an ndarray defers to the
  # Tensor's (ndarray + t is t.__radd__), which takes the array as a tensor
  __array_priority__ = 1000
  def __array__(self, dtype=None, copy=None) -> np.ndarray:
    """The realized values in a new array (numpy 2's protocol: copy=False, which asks for the tensor's own memory, raises)."""
    if copy is False: _err(ValueError, "a Tensor's values cannot be read without a copy (copy=False): use np.asarray(t) or t.numpy()")
    ret = self.numpy()
    return ret if dtype is None else ret.astype(dtype, copy=False)
  def __array_wrap__(self, arr, context=None, return_scalar=False) -> Tensor: return Tensor(np.asarray(arr), device=self.device)
  def _broadcasted(self, y, reverse: bool = False, match_dtype: bool = True):
    if isinstance(y, UOp): y = self._size_value(y)
    return OpMixin._broadcasted(self, Tensor(y, device=self.device) if isinstance(y, np.ndarray) else y, reverse, match_dtype)
  def _tri_sym(self, r, c, diagonal) -> Tensor:
    """The mask col - row >= diagonal of shape (r, c) with a symbolic size or diagonal, from aranges (the movement
    mask needs static sizes): tinygrad's causal mask full((T, start_pos + T), -inf).triu(start_pos + 1)."""
    return (Tensor.arange(c, device=self.device)[None, :] - Tensor.arange(r, device=self.device)[:, None]) >= diagonal
  def _size_value(self, n: UOp) -> Tensor:
    """A bound size as a 0-d tensor of self's dtype (as a Python int would take; int32 beside bools), read at run time:
    the element at offset n of an arange over n's range, so the graph holds no value."""
    lo, hi = sym_range(_shape((n,), "size")[0])
    dt = dtypes.default_int if self.dtype.is_bool else self.dtype
    return Tensor.arange(lo, hi + 1, dtype=dt if dt.is_int and dt.min <= lo and hi <= dt.max else dtypes.int64,
                         device=self.device).shrink(((n - lo, n - lo + 1),)).reshape(()).cast(dt)
  def dot(self, w, dtype=None) -> Tensor: return OpMixin.dot(self, Tensor(w, device=self.device) if isinstance(w, np.ndarray) else w, dtype)
  def matmul(self, x, reverse=False, dtype=None) -> Tensor:
    return OpMixin.matmul(self, Tensor(x, device=self.device) if isinstance(x, np.ndarray) else x, reverse, dtype)

  # ---- realization
  def realize(self, *lst: Tensor, beam: int | None = None) -> Tensor:
    """Compute self and lst in one graph; afterwards each holds its result as an input buffer. beam: BEAM's width for
    kernels compiled here (None: the BEAM environment variable; 0: uop-optimize's heuristics only)."""
    todo: dict[UOp, list[Tensor]] = {}
    ts = (self, *lst)
    if self._view is not None or lst and any(t._view is not None for t in lst):
      ts += tuple(b for t in ts if t._view is not None for b in t._written())
    dev = None
    for t in ts:
      if _is_data(u := t.uop): continue
      if u.size == 0: t.uop = _buf(np.empty(t.shape, t.dtype.np)); continue  # nothing to compute
      if (same := todo.get(u)) is not None: same.append(t); continue
      if dev is not None and t.device != dev:
        _err(RuntimeError, f"realize() of tensors on different devices ({', '.join(sorted(map(str, {dev, t.device})))}): realize them separately")
      dev, todo[u] = t.device, [t]
    if todo:
      u = same = us = None   # (names that would hold an output: in_place counts the references to it)
      us = list(todo)
      if type(dev) is str: us = _in_place(us, [len(ts) + 2 for ts in todo.values()], dev)   # (+ todo's key and us)
      outs = _realize(us, device=dev, beam=beam) if type(dev) is str else _multi.realize_multi(us, dev, beam)
      for (u, ts), out in zip(todo.items(), outs):
        if type(out) is Buffer and (out.size != sym_val(u.size) or out.dtype != u.dtype):
          raise RuntimeError(f"{u.loc}: realize returned {out} for {u.shape} {u.dtype}")
        shape = u.shape if u.size.__class__ is int else tuple(sym_val(d) for d in u.shape)
        for t in ts:   # tensors that were one node (equal constants) get a node each over the one Buffer: each its own leaf
          b = t.uop = new_buffer(out, u.loc, shape=shape) if type(out) is Buffer else out  # keeps the provenance of what computed it
          if t._requires_grad and id(t) not in _leaves: _realized[b] = u
      # a root's cached toposort holds the root (a cycle): dropped, the graph and the buffers it read go back when the
      # tensors let go of it, not at the next collection (an LLM's prefill held every layer's until then)
      for u in (*todo, *us): u.__dict__.pop("toposort", None)
    return self
  def mlir(self, stage: str = "graph", debuginfo: bool = False) -> str:
    """The module that computes this tensor at a stage of the compiler, as MLIR text: "graph" (as built, before any pass;
    what morok-opt reads), a pass's name (the module after it: uop-rangeify, uop-simplify, uop-kernel-split,
    uop-optimize), "lowered" (the kernels in upstream MLIR) or "llvm" (their LLVM IR, on the CPU). Nothing runs.
    debuginfo: with each op's location (the user's file:line)."""
    if not isinstance(stage, str): _err(TypeError, f"mlir(): stage must be a str, got {type(stage).__name__}")
    try: return _compile_stages([self.uop], self.device).text(stage, debuginfo)
    except ValueError as e: _err(ValueError, f"mlir(): {e}")
  def numpy(self) -> np.ndarray:
    """The value in a numpy array of the caller's own: writing to it changes no tensor, and no later write to a tensor
    changes it. A lazy tensor no one else holds (a temporary: `(a * b).exp().numpy()`) is computed into fresh host memory
    that becomes the array, without a copy (the tensor stays lazy: nothing can read it again); any other tensor is
    realized (it keeps its value, whose memory stays immutable: compiled programs keep what they derive from inputs)
    and its buffer copied."""
    u = self.uop
    if type(self.device) is tuple: return self.to(_multi.mine(self.device) or self.device[0]).numpy()   # over ranks: gathered here
    if sys.getrefcount(self) <= _TEMP_REFS and not _is_data(u) and all(type(d) is int for d in u.shape):
      b = _realize([u], device=self.device)[0]   # a fresh buffer (u is no input): no UOp, so no graph can read it
      if b.size != u.size or b.dtype != u.dtype: raise RuntimeError(f"{u.loc}: realize returned {b} for {u.shape} {u.dtype}")
      if (rec := _capture.rec) is not None: rec.host_read(b)
      return b.numpy().reshape(u.shape)   # host memory itself (alive while the array is), or a device's copy
    b = _data(self.realize().uop).buffer
    if (rec := _capture.rec) is not None: rec.host_read(b)
    # the copy in recycled host memory (the CPU allocator's pool: no page faults on a repeated call)
    return b.copyout(Device["CPU"].allocator.alloc(b.size, b.dtype)).reshape(self.shape)
  # ---- DLPack (the array API's exchange protocol): host memory of numpy's types through numpy's exporter (the realized
  # buffer's own memory, read-only, its capsule holding the array); device memory and bfloat16/fp8 through our own
  # capsules (device/dlpack.py), which hold the buffer
  def __dlpack_device__(self) -> tuple[int, int]:
    return (dlpack.KDL_CPU, 0) if self.device == "CPU" else (dlpack.KDL_CUDA, Device["CUDA"].ordinal) if self.device == "CUDA" else \
      _err(BufferError, f"DLPack export of a {self.device} tensor is not supported: use .to('CPU')")
  def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
    here, versioned = self.__dlpack_device__(), max_version is not None and max_version[0] >= 1
    if dl_device is not None and tuple(dl_device) != here:
      if tuple(dl_device) != (dlpack.KDL_CPU, 0) or copy is False: raise BufferError(f"DLPack export of a {self.device} tensor to {dl_device}")
      return self.to("CPU").__dlpack__(stream, max_version, None, copy)
    b = _data(self.realize().uop).buffer
    if not versioned:   # the legacy capsule cannot say read-only: export a copy, where allowed
      if copy is False: raise BufferError("DLPack before 1.0 cannot export a tensor's read-only memory without a copy (copy=False)")
      b = b.copy_to(self.device)
    if self.device == "CPU" and self.dtype.npdt.isbuiltin == 1:   # numpy's own types (not ml_dtypes')
      return b.as_numpy().reshape(self.shape).__dlpack__(stream=stream, max_version=max_version, copy=False if versioned else None)
    if self.device != "CPU": Device[self.device].synchronize("DLPack export")   # the consumer's stream then sees finished data
    return dlpack.to_capsule(b.ptr, here, self.shape, self.dtype, b, versioned, read_only=versioned)
  @staticmethod
  def from_dlpack(x) -> Tensor:
    """A tensor over the memory of x (any DLPack exporter: torch, jax, numpy, cupy), without a copy where the layout
    allows (C-contiguous, native byte order): the memory is shared; the exporter must not write to it while the tensor
    lives. Host memory and, with a CUDA device here, CUDA memory."""
    try:
      kind = x.__dlpack_device__()[0] if hasattr(x, "__dlpack_device__") else dlpack.KDL_CPU
      if kind == dlpack.KDL_CPU:
        try: return Tensor(new_buffer(np.from_dlpack(x), _loc()))
        except (BufferError, TypeError, RuntimeError) as e:   # a type numpy lacks (bfloat16, fp8): read the capsule here
          if not hasattr(x, "__dlpack__"): raise e
      return Tensor(_from_capsule(x, kind), device="CUDA" if kind == dlpack.KDL_CUDA else "CPU")
    except (BufferError, TypeError, RuntimeError, AttributeError, ValueError) as e:   # (no __dlpack__ is an AttributeError)
      _err(BufferError if isinstance(e, BufferError) else TypeError, f"from_dlpack: {e}")
  @staticmethod
  def from_blob(ptr: int, shape, dtype=None, device=None, **kw) -> Tensor:
    """A tensor over the host memory at address ptr (tinygrad's): C-contiguous elements of dtype (default float32), not
    copied and not owned. The memory must stay valid, and unchanged, for as long as the tensor and tensors computed from
    it live (compiled programs may keep what they derive from an input). device: CPU only (host memory)."""
    dt, shape = _dtype(dtype or dtypes.default_float), _shape(_argfix(shape) if isinstance(shape, (tuple, list)) else (shape,))
    if _device(device) != "CPU": _err(NotImplementedError, f"from_blob of host memory onto {_device(device)}: make it on the CPU, then .to()")
    if not isinstance(ptr, (int, np.integer)) or isinstance(ptr, bool) or (ptr <= 0 and math.prod(shape)):
      _err(TypeError, f"from_blob needs a memory address (a positive int), got {ptr!r}")
    return Tensor(new_buffer(_host_array_at(ptr, shape, dt), _loc(), dt), **kw)
  def item(self):
    if self.numel() != 1: _err(ValueError, f"item() needs a tensor with one element, got shape {self.shape}")
    return self.numpy().item()
  def tolist(self): return self.numpy().tolist()
  def data(self) -> np.ndarray: return self.numpy()

  # ---- graph building (OpMixin's primitives)
  _node = property(operator.attrgetter("uop"))
  def _const(self, value, dtype: DType | None = None) -> Tensor: return Tensor(value, dtype, device=self.device, requires_grad=False)
  _CONSTS: dict = {}   # (value, dtype, shape, device) -> the broadcast constant's UOp: `x + 1` builds no new nodes for the 1
  def _const_shaped(self, value, dtype: DType, shape) -> Tensor:
    if (u := Tensor._CONSTS.get(key := (value.__class__, vkey(value), dtype, shape, self.device))) is None:
      if len(Tensor._CONSTS) >= 4096: Tensor._CONSTS.clear()
      u = Tensor._CONSTS[key] = self._const(value, dtype)._broadcast_to(shape).uop
    t = Tensor._of(u, self.device)
    t._requires_grad = False
    return t
  def _op(self, _op: Ops, shape: tuple[int, ...], dtype: DType | None = None, src: tuple[Tensor, ...] = (), **kw) -> Tensor:
    """UOp._op on the sources' nodes, at the user's line, plus what only a Tensor has: one device, requires_grad, views."""
    dev, u, rg, srcs = self.device, self.uop, self._requires_grad, ()
    for x in src:
      if x.device != dev:
        _err(RuntimeError, f"expected all tensors on one device, got {', '.join(sorted(map(str, {dev, *(s.device for s in src)})))}")
      srcs += (x.uop,)
      # True if a source requires grad, else None if one is unset, else False (tinygrad's)
      if rg is not True and (r := x._requires_grad) is not False: rg = r
    t = object.__new__(Tensor)   # __init__'s checks hold by construction here
    loc = _scope.loc or _loc()
    t.uop = v = u._op(_op, shape, dtype, srcs, loc, **kw) if kw else u._op(_op, shape, dtype, srcs, loc)   # a plain call is cheaper
    if (view := _VIEWS.get(_op)) is None: t._view = None
    else: t._view = (weakref.ref(self), u.shape, _op, kw[view] if view in kw else tuple(shape), self._view)   # reshape, expand: shape
    t.device, t.grad, t._requires_grad = dev, None, rg
    if _modes.no_grad: t._requires_grad, t.uop = False, v if rg is not True else UOp(Ops.DETACH, v.dtype, (v,), (), v.loc)
    return t

  # ---- creation
  @staticmethod
  def full(shape, fill_value, dtype=None, **kw) -> Tensor:
    shape = _shape(_argfix(shape) if isinstance(shape, (tuple, list)) else (shape,))
    return Tensor(fill_value, dtype, **kw).reshape((1,) * len(shape)).expand(shape)
  @staticmethod
  def zeros(*shape, dtype=None, **kw) -> Tensor: return Tensor.full(_argfix(*shape), 0.0, dtype or dtypes.default_float, **kw)
  @staticmethod
  def ones(*shape, dtype=None, **kw) -> Tensor: return Tensor.full(_argfix(*shape), 1.0, dtype or dtypes.default_float, **kw)
  empty = zeros
  def full_like(self, fill_value, dtype=None, **kw) -> Tensor:   # on self's device unless told (PyTorch's *_like)
    return Tensor.full(self.shape, fill_value, dtype or self.dtype, device=kw.pop("device", self.device), **kw)
  def zeros_like(self, **kw) -> Tensor: return self.full_like(0, **kw)
  def ones_like(self, **kw) -> Tensor: return self.full_like(1, **kw)
  @staticmethod
  def arange(start, stop=None, step=1, dtype=None, **kw) -> Tensor:
    if stop is None: start, stop = 0, start
    if isinstance(stop, UOp) or isinstance(start, UOp): return Tensor._arange_to(start, stop, step, dtype, **kw)
    if any(not isinstance(x, (int, float, np.integer, np.floating)) or isinstance(x, (bool, np.bool_)) for x in (start, stop, step)):
      _err(TypeError, f"arange takes int or float bounds, got ({start!r}, {stop!r}, {step!r})")
    if step == 0: _err(ValueError, "arange: step must be nonzero")
    if not all(math.isfinite(x) for x in (start, stop, step)): _err(ValueError, f"arange: bounds must be finite, got ({start}, {stop}, {step})")
    fl = any(isinstance(x, (float, np.floating)) for x in (start, stop, step))
    dt = _dtype(dtype) if dtype else dtypes.default_float if fl else dtypes.default_int
    n, = _shape((max(0, math.ceil((stop - start) / step) if fl else -((int(start) - int(stop)) // int(step))),), "arange size")
    if n and dt.is_int and not (dt.min <= start <= dt.max and dt.min <= start + (n - 1) * step <= dt.max):
      _err(OverflowError, f"arange({start}, {stop}, {step}) has values out of range for {dt}" + " (pass dtype=dtypes.int64)" * (dtype is None))
    # an int range in dt's bounds is made in dt directly (a wide array and a cast cost 3x the time and memory)
    # (an arange over a Variable is made at its largest size: refused past the machine's memory before numpy, which
    # under overcommit would try to fill it)
    big = lambda: _err(MemoryError, f"arange({start}, {stop}, {step}): {n} {dt.name} values ({n * dt.itemsize} bytes) cannot be allocated")
    if n * max(dt.itemsize, 8) > _PHYS_BYTES: big()
    try:
      if dt.is_int and not fl: arr = np.arange(int(start), int(start) + n * int(step), int(step), dtype=dt.np)
      else: arr = np.arange(start, stop, step, dtype=np.float64 if dt.is_float else np.int64).astype(dt.np)
    except MemoryError: big()
    return Tensor(_buf(arr), **kw)
  @staticmethod
  def _arange_to(start, stop, step, dtype, **kw) -> Tensor:
    """arange with a bound size as a bound: the first elements of the arange to the size's greatest count (plus the
    start's value, read at run time, when it is the symbolic one), so one graph serves every value."""
    ok = lambda x: isinstance(x, UOp) or isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))
    if not (ok(start) and ok(stop) and ok(step) and not isinstance(step, UOp)) or step <= 0:
      _err(TypeError, f"arange with a symbolic bound takes int or bound-size bounds and a positive int step, got ({start!r}, {stop!r}, {step!r})")
    start, stop = (_shape((x,), "arange bound")[0] if isinstance(x, UOp) else int(x) for x in (start, stop))
    n = salu(Ops.IDIV, ssub(stop, start) + (int(step) - 1), int(step))
    lo, top = sym_range(n)
    if top <= 0 or lo < 0:
      _err(ValueError, f"arange({start!r}, {stop!r}, {step}) has a negative size at some value of its Variables")
    if isinstance(start, UOp): return Tensor.arange(0, top * step, step, dtype, **kw).shrink(((0, n),)) + start
    return Tensor.arange(start, start + top * step, step, dtype, **kw).shrink(((0, n),))
  @staticmethod
  def eye(n: int, m: int | None = None, dtype=None, **kw) -> Tensor:
    """The identity as pure movement (tinygrad's trick): ones (n,1) padded to rows of n+1, flattened, cut to n*n."""
    n, m = _shape((n, n if m is None else m), "eye size")
    if isinstance(n, UOp) or isinstance(m, UOp): _err(TypeError, f"eye needs static sizes, got ({n!r}, {m!r})")
    k = max(n, m)
    x = Tensor.ones(k, 1, dtype=dtype or dtypes.default_float, **kw).pad(((0, 0), (0, k))).flatten().shrink(((0, k * k),)).reshape(k, k)
    return x.shrink(((0, n), (0, m)))
  # ---- random numbers: threefry2x32 of a counter per element under the seed's key, computed in the kernel that uses
  # them (tinygrad's scheme). The key and the first counter enter as data, so every call reuses the compiled kernels;
  # one counter for all devices, so a seed gives the same numbers on the CPU and on CUDA.
  @staticmethod
  def manual_seed(seed: int = 0):
    """Restart the generator: the device's threefry stream and the host generator (randperm, multinomial)."""
    global _rng
    if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool): _err(TypeError, f"manual_seed takes an int, got {seed!r}")
    with _RNG.lock: _RNG.seed, _RNG.drawn = int(seed) % (1 << 64), 0
    _rng = np.random.default_rng(int(seed) % (1 << 64))
  @staticmethod
  def _random_bits(shape: tuple[int, ...], device: str) -> Tensor:
    """64 random bits (uint64) per element of shape: threefry of counters drawn .. drawn + n - 1 under the seed."""
    if any(isinstance(x, UOp) for x in shape): _err(TypeError, f"random tensors need static sizes, got {shape}")
    if type(device) is tuple: return Tensor._random_bits(shape, device[0]).to(device)   # drawn once, the same on every device
    n = _prod(shape)
    if n >= 1 << 31: _err(ValueError, f"random tensors of 2^31 or more elements are not supported, got {shape}")
    kc = Tensor(Tensor._counter_input(n), device=device)
    k, c0 = kc[0], kc[1]
    # the counter is the flat index, summed from one arange per dim (data, read at a loop counter: affine loads the
    # kernel vectorizes; an arange from movement ops costs index math per binary digit, one split into blocks a gather)
    ctr, stride = c0.reshape((1,) * len(shape)), n
    for d, size in enumerate(shape):
      stride //= size
      if size > 1: ctr = ctr + Tensor.arange(size, dtype=dtypes.uint32, device=device).cast(dtypes.uint64).reshape(
        tuple(size if j == d else 1 for j in range(len(shape)))) * stride
    ctr = ctr.expand(shape)
    return ctr._op(Ops.THREEFRY, shape, dtypes.uint64, (k.reshape((1,) * len(shape)).expand(shape),))
  @staticmethod
  def _counter_input(n: int) -> UOp:
    """The generator's (key, first counter) as a uint64 input buffer, n values drawn (a TinyJit replay draws anew)."""
    with _RNG.lock: key, start, _RNG.drawn = _RNG.seed, _RNG.drawn, (_RNG.drawn + n) % (1 << 64)
    u = new_buffer(np.array([key, start], np.uint64), _loc())
    if (rec := _capture.rec) is not None: rec.random(u, n)
    return u
  @staticmethod
  def rand(*shape, dtype=None, device=None, requires_grad=None, contiguous=None) -> Tensor:
    """Uniform in [0, 1): the top mantissa-many random bits under the exponent of 1.0, minus 1 (exact: never 1.0)."""
    shape, dt = _shape(_argfix(*shape)), _dtype(dtype) if dtype is not None else dtypes.default_float
    if not dt.is_float: _err(TypeError, f"rand makes floats, got dtype {dt}")
    if _prod(shape) == 0: return Tensor.zeros(shape, dtype=dt, device=device, requires_grad=requires_grad)
    u = {2: dtypes.uint16, 4: dtypes.uint32, 8: dtypes.uint64}[dt.itemsize]
    one, mant = int(np.array(1, dt.np).view(u.np)), dt.finfo.nmant
    bits = Tensor._random_bits(shape, _device(device)).rshift(64 - mant).cast(u).bitwise_or(one)
    return Tensor(bits.bitcast(dt) - 1, requires_grad=requires_grad)
  @staticmethod
  def randn(*shape, dtype=None, device=None, requires_grad=None, **kw) -> Tensor:
    """Standard normal by Box-Muller over two uniforms, in float32 at least."""
    shape, dt = _shape(_argfix(*shape)), _dtype(dtype) if dtype is not None else dtypes.default_float
    u = Tensor.rand((2,) + shape, dtype=dtypes.float64 if dt is dtypes.float64 else dtypes.float32, device=device)
    z = (u[0] * (2 * math.pi)).cos() * ((1 - u[1]).log() * -2).sqrt()
    return Tensor(z.cast(dt), requires_grad=requires_grad)
  @staticmethod
  def uniform(*shape, low=0.0, high=1.0, dtype=None, requires_grad=None, **kw) -> Tensor:
    return Tensor(Tensor.rand(*shape, dtype=dtype, **kw) * (high - low) + low, requires_grad=requires_grad)
  @staticmethod
  def randint(*shape, low=0, high=10, dtype=dtypes.int32, device=None, requires_grad=None) -> Tensor:
    """Integers in [low, high): 64 random bits modulo the range (bias below range / 2^64)."""
    dt = _dtype(dtype)
    if not (isinstance(low, (int, np.integer)) and isinstance(high, (int, np.integer)) and dt.is_int):
      _err(TypeError, f"randint needs int bounds and an int dtype, got {low!r}, {high!r}, {dt}")
    if not dt.min <= low < high <= dt.max + 1: _err(ValueError, f"randint: [{low}, {high}) is empty or out of range for {dt}")
    shape = _shape(_argfix(*shape))
    if _prod(shape) == 0: return Tensor.zeros(shape, dtype=dt, device=device, requires_grad=requires_grad)
    r = Tensor._random_bits(shape, _device(device)).mod(int(high) - int(low))
    return Tensor((r.cast(dtypes.int64) + int(low)).cast(dt) if low else r.cast(dt), requires_grad=requires_grad)
  @staticmethod
  def linspace(start, stop, steps: int, dtype=None, **kw) -> Tensor:
    """steps values from start to stop, both included (PyTorch's linspace; float unless dtype says otherwise)."""
    if not isinstance(steps, (int, np.integer)) or isinstance(steps, bool) or steps < 0: _err(ValueError, f"linspace: steps must be an int >= 0, got {steps!r}")
    if not all(isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) and math.isfinite(x) for x in (start, stop)):
      _err(TypeError, f"linspace takes finite int or float bounds, got ({start!r}, {stop!r})")
    if (dt := _dtype(dtype) if dtype else dtypes.default_float).is_bool: _err(ValueError, "linspace does not support bool")
    return Tensor(np.linspace(start, stop, int(steps), dtype=np.float64), dt, **kw)
  @staticmethod
  def normal(*shape, mean=0.0, std=1.0, dtype=None, requires_grad=None, **kw) -> Tensor:
    return Tensor(Tensor.randn(*shape, dtype=dtype, **kw) * std + mean, requires_grad=requires_grad)
  @staticmethod
  def randperm(n: int, dtype=dtypes.int32, **kw) -> Tensor:
    """A random permutation of 0..n-1 (from the seeded generator of manual_seed)."""
    n, = _shape((n,), "randperm size")
    return Tensor(_host_rng().permutation(n), _dtype(dtype), **kw)
  # tinygrad's weight initialisations: the fan-in is the product of the dims after the first
  @staticmethod
  def scaled_uniform(*shape, **kw) -> Tensor:
    shape = _shape(_argfix(*shape))
    return Tensor.uniform(*shape, low=-1.0, high=1.0, **kw) * (math.prod(shape) ** -0.5 if math.prod(shape) else 1.0)
  @staticmethod
  def glorot_uniform(*shape, **kw) -> Tensor:
    shape = _shape(_argfix(*shape))
    return Tensor.uniform(*shape, low=-1.0, high=1.0, **kw) * math.sqrt(6 / max(1, shape[0] + math.prod(shape[1:])))
  @staticmethod
  def kaiming_uniform(*shape, a: float = 0.01, **kw) -> Tensor:
    shape = _shape(_argfix(*shape))
    bound = math.sqrt(3.0) * math.sqrt(2.0 / (1 + a ** 2)) / math.sqrt(max(1, math.prod(shape[1:])))
    return Tensor.uniform(*shape, low=-bound, high=bound, **kw)
  @staticmethod
  def kaiming_normal(*shape, a: float = 0.01, **kw) -> Tensor:
    shape = _shape(_argfix(*shape))
    return Tensor.normal(*shape, std=math.sqrt(2.0 / (1 + a ** 2)) / math.sqrt(max(1, math.prod(shape[1:]))), **kw)
  def empty_like(self, **kw) -> Tensor: return Tensor.empty(self.shape, dtype=kw.pop("dtype", self.dtype), device=kw.pop("device", self.device), **kw)
  def _rand_like(self) -> Tensor: return Tensor.rand(self.shape, device=self.device)   # dropout's masks
  def rand_like(self, **kw) -> Tensor:
    return Tensor.rand(self.shape, dtype=kw.pop("dtype", self.dtype if self.dtype.is_float else None), device=kw.pop("device", self.device), **kw)
  def randn_like(self, **kw) -> Tensor:
    return Tensor.randn(self.shape, dtype=kw.pop("dtype", self.dtype if self.dtype.is_float else None), device=kw.pop("device", self.device), **kw)
  def multinomial(self, num_samples: int = 1, replacement: bool = False) -> Tensor:
    """num_samples class indices (int32) drawn per row of self's non-negative weights (1-d or 2-d), from the seeded
    generator of manual_seed: the weights are realized and sampled on the host."""
    if self.ndim not in (1, 2): _err(ValueError, f"multinomial needs a 1-d or 2-d tensor of weights, got {self.shape}")
    if not isinstance(num_samples, (int, np.integer)) or isinstance(num_samples, bool) or num_samples <= 0:
      _err(ValueError, f"multinomial: cannot sample {num_samples!r} samples (a positive int)")
    if self.ndim == 2 and self.shape[0] == 0: return Tensor(np.zeros((0, num_samples), np.int32), device=self.device)   # no rows
    w = self.cast(dtypes.float64).numpy().reshape(-1, self.shape[-1])
    if (w < 0).any() or not np.isfinite(w).all() or (w.sum(1) <= 0).any(): _err(ValueError, "multinomial: weights must be finite, >= 0, and not all 0")
    if not replacement and num_samples > (w > 0).sum(1).min(): _err(ValueError, f"multinomial: cannot draw {num_samples} samples without replacement")
    out = np.stack([_host_rng().choice(w.shape[1], num_samples, replace=replacement, p=r / r.sum()) for r in w]).astype(np.int32)
    return Tensor(out.reshape(self.shape[:-1] + (num_samples,)), device=self.device)

  # ---- devices
  def to(self, device=None, dtype=None) -> Tensor:
    """The same values on another device (a `copy` in the graph), self when already there; PyTorch's forms too:
    to(dtype) casts, to(device, dtype) both."""
    if isinstance(device, DType): device, dtype = None if dtype is None else _err(TypeError, "to(): two dtypes given"), device
    if dtype is not None: return self.cast(dtype).to(self.device if device is None else device)
    if (dev := _device(device)) == self.device: return self
    if type(dev) is tuple: return (self if type(self.device) is str else self.to(self.device[0])).shard(dev)
    if type(self.device) is tuple: return Tensor(_multi.gather_to(self.realize().uop, dev), device=dev)   # gathered on dev
    ret = Tensor(UOp(Ops.COPY, self.dtype, (self.uop,), attrs(device=dev), _loc()), device=dev)
    ret._requires_grad = self._requires_grad
    return ret
  def to_(self, device) -> Tensor:
    """to(device) in place (tinygrad's): self (and its grad) now live on device; self, returned, is no longer a view."""
    ret = self.to(device)
    if self.grad is not None: self.grad = self.grad.to(device)
    self.uop, self.device, self._view = ret.uop, ret.device, None
    return self
  def cpu(self) -> Tensor: return self.to("CPU")
  def shard(self, devices, axis: int | None = None) -> Tensor:
    """The value on several devices (tinygrad's): split along axis (shards of ceil(n / len(devices)), the last one
    shorter; refused where one would be empty), or a whole copy on each (axis None). Ops on it run on every device."""
    devs = _device(tuple(devices) if isinstance(devices, (tuple, list)) else (devices,))
    if type(self.device) is tuple: _err(RuntimeError, f"shard() of a tensor already on {self.device}: .to() one device first")
    try: ret = Tensor(_multi.shard(self.uop, devs, None if axis is None else self._dim(axis)), device=devs)
    except ValueError as e: _err(ValueError, str(e))
    ret._requires_grad = self._requires_grad
    return ret
  def shard_(self, devices, axis: int | None = None) -> Tensor:
    self.uop, self.device = (t := self.shard(devices, axis)).uop, t.device
    return self
  # PyTorch's in-place ops, through assign (tinygrad's semantics: self is rebound, views write their bases); they return self
  def add_(self, x, alpha=1) -> Tensor: return self.assign(self + (x if alpha == 1 else x * alpha))
  def sub_(self, x, alpha=1) -> Tensor: return self.assign(self - (x if alpha == 1 else x * alpha))
  def mul_(self, x) -> Tensor: return self.assign(self * x)
  def zero_(self) -> Tensor: return self.fill_(0)
  def fill_(self, value) -> Tensor: return self.assign(self.full_like(value))
  def assign(self, x) -> Tensor:
    """Replace the value held by self (functional: tensors built from the old value keep it)."""
    x = x if isinstance(x, Tensor) else Tensor(x, self.dtype, device=self.device)
    if x.shape != self.shape: x = x._broadcast_to(self.shape) if x.ndim <= self.ndim else _err(ValueError, f"assign {x.shape} to {self.shape}")
    if x.dtype != self.dtype: _err(TypeError, f"assign {x.dtype} to a {self.dtype} tensor")
    return self._write(x, None)
  def _written(self) -> list[Tensor]:
    """The lazy bases a write through this view changed (their graphs hold its value): realizing the view realizes them,
    as tinygrad's cache[:, sp:sp + 1].assign(k).realize() writes the cache."""
    out = []
    for ref, *_ in self._chain():
      if (b := ref()) is not None and not _is_data(b.uop) and any(u is self.uop for u in b.uop.toposort): out.append(b)
    return out
  def _chain(self) -> list[tuple]:
    """The steps (base, its shape, how, arg) from self up to the last base of its view chain still held."""
    chain, link = [], self._view
    while link is not None: chain.append(link[:4]); link = link[4]
    return chain[:max((k + 1 for k, (ref, *_) in enumerate(chain) if ref() is not None), default=0)]
  def _write(self, v: Tensor, mask: Tensor | None) -> Tensor:
    """self's elements where mask holds (all of them for None) become v's, and so do the elements of the bases self is
    a view of (PyTorch's view semantics), each base written where its view's mask lands. Graphs are immutable: views
    taken from a base before the write keep the old values (unless they are written through themselves)."""
    chain = self._chain()
    for _, shape, how, _ in chain:   # checked before anything is written
      if how is Ops.EXPAND:
        _err(RuntimeError, f"cannot write to a view expanded from {shape}: several of its elements are one element of a base that is "
                           "still held (PyTorch raises too); write to a .contiguous() copy")
      if any(not isinstance(d, int) for d in shape): _err(TypeError, f"cannot write through a view of a tensor of symbolic shape {shape}")
    self.uop = v.uop if mask is None else mask.where(v, self).uop
    for ref, shape, how, arg in chain:
      if mask is None: mask = v._full(v.shape, True, dtypes.bool)
      v, mask = _UNVIEW[how](shape, arg, v), _UNVIEW[how](shape, arg, mask)
      if (b := ref()) is not None: b.uop = mask.where(v, b).uop
    return self

  # ---- comparisons: operators (OpMixin's named methods; NaN compares false, as in numpy)
  def __lt__(self, x) -> Tensor: return self.lt(x)
  def __gt__(self, x) -> Tensor: return self.gt(x)
  def __le__(self, x) -> Tensor: return self.le(x)
  def __ge__(self, x) -> Tensor: return self.ge(x)
  def __eq__(self, x) -> Tensor: return self.eq(x)  # type: ignore[override]
  def __ne__(self, x) -> Tensor: return self.ne(x)  # type: ignore[override]

  # ---- reductions
  def argmax(self, axis=None, keepdim=False) -> Tensor:
    """First index of the max (tinygrad's trick: mask of maxima times a descending arange, then max)."""
    if axis is None or self.ndim == 0:
      if axis is not None: self._dim(axis)
      return self.flatten().argmax(0).reshape((1,) * self.ndim if keepdim else ())
    a, n = self._dim(axis), self.shape[self._dim(axis)]
    if n == 0: _err(IndexError, "argmax of an empty dimension")
    m = self == self.max(a, keepdim=True)
    if self.dtype.is_float: m = m | (self != self)  # a NaN is the max (numpy): its first position wins
    if isinstance(n, UOp):   # a symbolic dim: the least position of a max, positions a prefix of its largest arange
      top = smax(n)
      pos = Tensor.arange(top, dtype=dtypes.int32, device=self.device).shrink(((0, n),)).reshape((n,) + (1,) * (self.ndim - a - 1))
      return m.where(pos, top).min(a, keepdim=keepdim)
    idx = m * Tensor.arange(n, 0, -1, device=self.device).reshape((n,) + (1,) * (self.ndim - a - 1))
    return (n - idx.max(a, keepdim=keepdim)).cast(dtypes.int32)
  def argmin(self, axis=None, keepdim=False) -> Tensor:
    return (-self if self.dtype.is_float else ~self).argmax(axis, keepdim)  # ~ reverses the order of ints and bools

  # ---- indexing with tensors (data-dependent: Tensor only)
  def __getitem__(self, idx) -> Tensor:
    """numpy indexing. Basic indices (ints, slices, None, ...) give a view (OpMixin's movement; a write to it writes self
    too). Index arrays (Tensors, lists, numpy arrays; negative entries count from the end) and bool masks (their nonzero
    positions: a Tensor mask is realized, the result's shape is data) combine with them as in numpy, read by one gather
    over the linear index into the indexed dims: O(result). An array entry outside its dim gives 0 (numpy raises, but a
    Tensor's entries are data: they are not read here)."""
    basic, adv = self._advanced(idx if isinstance(idx, tuple) else (idx,))
    if adv is None:
      if (ret := OpMixin.__getitem__(self, basic)) is not self: ret._view = (weakref.ref(self), self.shape, "index", basic, self._view)
      return ret
    x, lin, order = self._linear(basic, *adv)
    ret = x.gather(0, lin) if x.shape[0] else x._full(lin.shape, 0, self.dtype)   # an empty dim: every entry is outside
    return ret.reshape(adv[2] + x.shape[1:]).permute(order)
  def __setitem__(self, idx, v):
    """x[idx] = v (PyTorch's, in place: x is rebound to the new graph, the object stays): v, a Tensor or Python/numpy
    value, broadcast to x[idx]'s shape and cast to x's dtype. Basic indices place v with movement ops and a mask (one fused
    kernel, no scatter). If x is a view (basic indexing, reshape, permute, shrink) of a tensor still held, that base is
    written too, so `x[0][1] = 5` and `x[:, 0][mask] = 0` write x; other views taken before the write keep the old
    values (graphs are immutable). Writing to an expanded view raises. `x[mask] = value` (one bool Tensor, one value) is
    a where, the mask is not realized. Other index arrays and masks write through scatter: of repeated positions the
    last in index order wins, an entry outside its dim writes nothing."""
    m = idx[0] if isinstance(idx, tuple) and len(idx) == 1 else idx
    if isinstance(m, Tensor) and m.dtype.is_bool and m.ndim and (v.numel() if isinstance(v, Tensor) else np.size(v)) == 1:
      # x[mask] = one value: a where over the mask, which stays lazy (no realize, one kernel)
      if m.shape != self.shape[:m.ndim]: self._advanced((m.numpy(),))   # numpy's error for a mask of the wrong shape
      m = m.reshape(m.shape + (1,) * (self.ndim - m.ndim))._broadcast_to(self.shape)
      return self._write(self._value(v, ()).reshape((1,) * self.ndim)._broadcast_to(self.shape), m)
    basic, adv = self._advanced(idx if isinstance(idx, tuple) else (idx,))
    if adv is None:
      out = _basic_plan(self.shape, basic)[3]
      self._write(self._value(v, out)._basic_put(self.shape, basic), self._full(out, True, dtypes.bool)._basic_put(self.shape, basic))
      return
    x, lin, order = self._linear(basic, *adv)   # x: self[basic] with the indexed dims in front, merged into dim 0
    if x.shape[0] == 0: return   # every entry is outside an empty dim: nothing is written
    val = self._value(v, tuple((adv[2] + x.shape[1:])[o] for o in order)).permute(_argsort(order)).reshape(lin.shape)
    sub = _basic_plan(self.shape, basic)[3]   # self[basic]'s shape; perm puts its indexed dims in front
    perm = adv[0] + [d for d in range(len(sub)) if d not in adv[0]]
    put = lambda t: t.reshape(tuple(sub[d] for d in perm)).permute(_argsort(perm))._basic_put(self.shape, basic)
    # self[basic] is rewritten whole (exact for self; no mask when that is all of self); the bases still held get only
    # the scattered elements (self's other values may be older than theirs)
    if self._chain(): mask = put(x._full(x.shape, False, dtypes.bool).scatter(0, lin, True))
    else: mask = None if all(i == slice(None) for i in basic) else self._full(sub, True, dtypes.bool)._basic_put(self.shape, basic)
    self._write(put(x.scatter(0, lin, val)), mask)
  def _value(self, v, shape: tuple[int, ...]) -> Tensor:
    """A setitem's value as a Tensor of self's dtype and device broadcast to shape (leading 1-dims beyond it dropped)."""
    v = v.cast(self.dtype) if isinstance(v, Tensor) else Tensor(v, self.dtype, device=self.device)
    while v.ndim > len(shape) and v.shape[0] == 1: v = v.reshape(v.shape[1:])
    if v.ndim > len(shape) or any(s != 1 and s != t for s, t in zip(v.shape[::-1], shape[::-1])):
      _err(ValueError, f"cannot assign a value of shape {v.shape} to an index of shape {tuple(shape)}")
    return v._broadcast_to(tuple(shape))
  def _advanced(self, tup: tuple):
    """numpy's advanced indexing taken apart: the basic index of self that keeps each indexed dim whole, and (the dims of
    self[basic] the index arrays index, the arrays, their broadcast shape, where the result's dims of the arrays go), or
    None when tup holds no array. Ints stay basic (they shrink) but count as advanced for placement, as in numpy."""
    ents = []   # (kind, index): "b" basic, "a" integer array (Tensor or numpy), "m" bool mask (numpy, 0-d for a bool)
    for i in tup:
      if isinstance(i, Tensor):
        if i.dtype.is_int: ents.append(("a", i)); continue
        if not i.dtype.is_bool: _err(IndexError, f"tensors used as indices must be integer or bool, got {i.dtype}")
        i = i.numpy()   # a mask's positions are data: realized, as in numpy and PyTorch
      if isinstance(i, (list, tuple, np.ndarray, bool, np.bool_)):
        try: a = np.asarray(i)
        except ValueError: _err(IndexError, f"an index array must not be ragged: {i!r}")
        if a.size == 0 and a.dtype.kind == "f": a = a.astype(np.int64)   # [] indexes nothing
        if a.dtype.kind not in "biu": _err(IndexError, f"arrays used as indices must be integer or bool, got {a.dtype}")
        ents.append(("m", a) if a.dtype.kind == "b" else ("a", a) if a.ndim else ("b", int(a)))
      else: ents.append(("b", i))
    if all(k == "b" for k, _ in ents): return tuple(i for _, i in ents), None
    if sum(i is Ellipsis for _, i in ents) > 1: _err(IndexError, "an index can only have a single ellipsis ('...')")
    used = sum(i.ndim if k == "m" else i is not None and i is not Ellipsis for k, i in ents)
    if used > self.ndim: _err(IndexError, f"too many indices for tensor of dimension {self.ndim}")
    adv = [j for j, (k, i) in enumerate(ents) if k != "b" or _isint(i)]
    basic, arrs, dims, nd, sd, ins = [], [], [], 0, 0, 0   # nd: dims of self[basic] so far, sd: dims of self
    for j, (k, i) in enumerate(ents):
      if j == adv[0]: ins = nd
      if k == "a": basic.append(slice(None)); arrs.append(i); dims.append(nd); nd, sd = nd + 1, sd + 1
      elif k == "m" and i.ndim == 0:   # numpy: True is a new dim indexed by [0], False one indexed by []
        basic.append(None); arrs.append(np.zeros(int(i), np.int64)); dims.append(nd); nd += 1
      elif k == "m":
        if bad := [d for d in range(i.ndim) if i.shape[d] != self.shape[sd + d]]:
          _err(IndexError, f"boolean index did not match indexed tensor along dim {sd + bad[0]}; size of dim is "
                           f"{self.shape[sd + bad[0]]} but size of corresponding boolean dim is {i.shape[bad[0]]}")
        basic += [slice(None)] * i.ndim; arrs += list(np.nonzero(i)); dims += range(nd, nd + i.ndim); nd, sd = nd + i.ndim, sd + i.ndim
      elif i is Ellipsis: basic += [slice(None)] * (self.ndim - used); nd, sd = nd + self.ndim - used, sd + self.ndim - used
      else: basic.append(i); nd, sd = nd + (not _isint(i)), sd + (i is not None)   # (others: the basic plan names them)
    shape = _index_shape([tuple(a.shape) for a in arrs])
    return tuple(basic), (dims, arrs, shape, ins if adv == list(range(adv[0], adv[-1] + 1)) else 0)
  def _linear(self, basic: tuple, dims: list[int], arrs: list, shape: tuple[int, ...], ins: int):
    """(self[basic] with the indexed dims permuted to the front and merged into dim 0, the linear index into that
    dim broadcast over the others (outside [0, dim 0) where any entry is outside its dim), the permutation that puts the
    result's array dims in numpy's place)."""
    x = OpMixin.__getitem__(self, basic)
    rest = [d for d in range(x.ndim) if d not in dims]
    sizes, R = [x.shape[d] for d in dims], tuple(x.shape[d] for d in rest)
    S = _prod(sizes)
    idt = dtypes.int64 if 2 * S >= 2 ** 31 or any(isinstance(a, Tensor) and a.dtype.itemsize == 8 for a in arrs) else dtypes.int32
    host, lin, ok, stride = None, None, None, S
    for a, s in zip(arrs, sizes):
      stride //= s if s else 1
      if isinstance(a, np.ndarray):   # known entries, summed here: one outside its dim takes the sum to <= -S - stride
        a = np.where(a < 0, a.astype(np.int64) + s, a.astype(np.int64))
        a = np.where((a >= 0) & (a < s), a, -S // max(stride, 1) - 1) * stride
        host = a if host is None else host + a
        continue
      a = a.cast(idt)
      a = a.lt(0).where(a + s, a)
      if len(arrs) > 1: ok = a.ge(0) & a.lt(s) if ok is None else ok & a.ge(0) & a.lt(s)
      lin = a * stride if lin is None else lin + a * stride
    if host is not None:   # clipped to -S - 1 (fits idt): below 0 still with the other terms (< S) added
      host = Tensor(np.maximum(host, -S - 1).astype(idt.np), device=self.device)
      lin = host if lin is None else lin + host
    if ok is not None: lin = ok.where(lin, -1)
    n = _prod(shape)
    lin = lin._broadcast_to(shape).reshape((n,) + (1,) * len(R)).expand((n,) + R)
    nb = len(shape)
    order = (*range(nb, nb + ins), *range(nb), *range(nb + ins, nb + len(R)))
    return x.permute(dims + rest).reshape((S,) + R), lin, order
  def unbind(self, dim: int = 0) -> tuple[Tensor, ...]:
    """The slices along dim, that dim removed (PyTorch's)."""
    d = self._dim(dim)
    return tuple(self[(slice(None),) * d + (i,)] for i in range(self._static(d, "unbind")))
  def nonzero(self, as_tuple: bool = False):
    """The indices of the nonzero elements, one row each (int32, as argmax): it realizes, as in PyTorch, since the
    result's size is data. as_tuple: one 1-d tensor per dim instead (numpy's nonzero)."""
    v = self.numpy()
    idx = np.argwhere(v.reshape(-1) if as_tuple and v.ndim == 0 else v).astype(np.int32)   # as_tuple: a 0-d tensor as 1-d, as PyTorch
    return tuple(Tensor(np.ascontiguousarray(c), device=self.device) for c in idx.T) if as_tuple else Tensor(idx, device=self.device)
  def sequential(self, layers) -> Tensor:
    """Each layer (a callable) applied in turn, starting from self (tinygrad's)."""
    return functools.reduce(lambda x, f: f(x), layers, self)
  def masked_select(self, mask: Tensor) -> Tensor:
    """The elements where mask (broadcast with self) is True, flattened: the mask is realized, as in PyTorch (the
    result's size is data)."""
    if not isinstance(mask, Tensor) or not mask.dtype.is_bool: _err(TypeError, "masked_select needs a bool mask tensor")
    x = self.expand(_bshape(self.shape, mask.shape))
    pos = np.flatnonzero(mask._broadcast_to(x.shape).numpy().reshape(-1)).astype(np.int32)
    return x.reshape(-1).gather(0, Tensor(pos, device=self.device))
  def _arange(self, n: int) -> Tensor:
    """0..n-1 as data: a one-hot against it is ~10x faster than against OpMixin's arange from movement ops."""
    if not isinstance(n, int): _err(TypeError, f"a class count must be an int, got {n!r}")
    # one buffer per (n, device), as _CONSTS keeps constants: a loss in a training loop builds no new input each step
    if (u := Tensor._ARANGES.get(key := (n, self.device))) is None:
      if len(Tensor._ARANGES) >= 256: Tensor._ARANGES.clear()
      u = Tensor._ARANGES[key] = Tensor.arange(n, dtype=dtypes.int32, device=self.device).uop
    return Tensor._of(u, self.device)
  _ARANGES: dict = {}
  def allclose(self, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """isclose everywhere, as a Python bool (it realizes)."""
    return bool(self.isclose(other, rtol, atol, equal_nan).all().item())

def _unpickle(arr: np.ndarray, dtype: str, device: str, requires_grad: bool | None) -> Tensor:
  return Tensor(arr, dtype, device=device, requires_grad=requires_grad)

_KW_ALIAS = {"dim": "axis", "min": "min_", "max": "max_"}   # PyTorch's keyword -> this method's parameter
_NUMPY_KW = {"keepdims": "keepdim", "ddof": "correction", "dtype": "dtype"}   # numpy's keyword (None: not given) -> parameter
return_types = {n: collections.namedtuple(n, ("values", "indices")) for n in ("max", "min")}   # torch.return_types.max/min
def _kw(fn, numpy: bool):
  """PyTorch's keywords where the parameter has tinygrad's name (dim= for axis=, clamp's min=/max=); an unknown keyword
  is a TypeError at the user's line. max/min given dim= answer as PyTorch's: (values, indices), a named tuple; given
  axis= (or positionally) they stay tinygrad's, the values only. numpy: a reduction numpy's functions call as a method
  (np.sum(t) is t.sum(axis=None, out=None)): numpy's keywords are taken too (keepdims, ddof, dtype=None), out= only as
  None (the result is a new Tensor)."""
  params = inspect.signature(fn).parameters
  pair = fn.__name__ in return_types and "dim" not in params
  @functools.wraps(fn)
  def call(self, *args, **kw):
    if numpy and kw:
      if kw.pop("out", None) is not None: _err(TypeError, f"{fn.__name__}() of a Tensor returns a new Tensor: out= is not supported")
      for k, to in _NUMPY_KW.items():
        if (v := kw.pop(k, None)) is not None: kw[to] = v
    if pair and "dim" in kw:
      d, keep = kw.pop("dim"), kw.pop("keepdim", False)
      if args or kw: _err(TypeError, f"{fn.__name__}(dim=) takes only keepdim= besides, got {args or next(iter(kw))!r}")
      return return_types[fn.__name__](fn(self, d, keep), getattr(self, "arg" + fn.__name__)(d, keep))
    for k in [k for k in kw if k not in params]:
      if (to := _KW_ALIAS.get(k)) in params and to not in kw: kw[to] = kw.pop(k)
      else: _err(TypeError, f"{fn.__name__}() got an unexpected keyword argument {k!r}")
    return fn(self, *args, **kw)
  return call
_TORCH_KW = ("prod", "any", "all", "mean", "std", "var", "var_mean", "std_mean", "logsumexp", "argmax", "argmin", "softmax", "log_softmax",
             "cumsum", "cumprod", "logcumsumexp", "cummax", "cat", "stack", "squeeze", "unsqueeze", "flatten", "split", "chunk", "clip", "clamp",
             "norm", "unbind")
_NUMPY = ("sum", "prod", "max", "min", "any", "all", "mean", "std", "var")
for _name in ("sum", "max", "min") + _TORCH_KW: setattr(Tensor, _name, _kw(getattr(Tensor, _name), _name in _NUMPY))

# in-place operators rebind the tensor, as in tinygrad
for _name, _fn in BINARY_OPS.items(): setattr(Tensor, f"__i{_name}__", lambda self, x, f=_fn: self.assign(f(self, x)))

# ---------------------------------------------------------------- provenance scopes
def _api(fn):
  """The outermost public Tensor call finds the user's line once; the ops it builds inside reuse it. (Walking the
  stack for every UOp materialises a Python frame object per level, ~4 us per op.) Found on entry: a call site's
  line is cached (provenance.walk_loc), and one thread-local slot is then both the flag and the line."""
  @functools.wraps(fn)
  def call(*args, **kw):
    if _scope.loc is not None: return fn(*args, **kw)
    _scope.loc = walk_loc(sys._getframe(1))
    try: return fn(*args, **kw)
    finally: _scope.loc = None
  return call

class _Probe:   # how many references a temporary has inside a public method (CPython's count; another only means a copy)
  refs = _api(lambda self: sys.getrefcount(self))
_TEMP_REFS = _Probe().refs()

def _creation(fn):
  """A creation function's requires_grad applies to the tensor it returns (a leaf), not to the ones it is built from."""
  @functools.wraps(fn)
  def make(*args, requires_grad: bool | None = None, **kw):
    ret = fn(*args, **kw)
    return ret if requires_grad is None else ret.requires_grad_(requires_grad)
  return make
for _name in ("full", "zeros", "ones", "empty", "arange", "eye", "rand", "randn", "uniform", "randint", "linspace", "normal", "randperm",
              "scaled_uniform", "glorot_uniform", "kaiming_uniform", "kaiming_normal"):
  setattr(Tensor, _name, staticmethod(_creation(vars(Tensor)[_name].__func__)))
for _name in ("full_like", "zeros_like", "ones_like", "empty_like", "rand_like", "randn_like"): setattr(Tensor, _name, _creation(vars(Tensor)[_name]))

for _name, _v in list({k: v for c in reversed(Tensor.__mro__[:-1]) for k, v in vars(c).items()}.items()):   # OpMixin's too
  if _name.startswith("_") and not (_name.startswith("__") and _name not in ("__hash__", "__init_subclass__", "__class_getitem__")): continue
  if _name == "realize": continue   # builds no op (its errors walk the stack): the scope would be ~1 us of a ~10 us realize
  if isinstance(_v, staticmethod): setattr(Tensor, _name, staticmethod(_api(_v.__func__)))
  elif isinstance(_v, classmethod): setattr(Tensor, _name, classmethod(_api(_v.__func__)))
  elif callable(_v) and not isinstance(_v, type): setattr(Tensor, _name, _api(_v))
