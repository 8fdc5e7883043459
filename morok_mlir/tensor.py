"""The lazy Tensor API (tinygrad/PyTorch names and semantics). Each op builds hash-consed graph-level UOps; nothing runs
until realize()/numpy(). Derived ops are written with the primitive ops of the `uop` dialect, as tinygrad does."""
from __future__ import annotations
import functools, math, os, sys, threading
from typing import Any, Sequence
import numpy as np
from .dtype import DType, dtypes, least_upper_dtype, to_dtype
from .uop import UOp, SHAPE_ATTR, SYM_ATTR, attrs, split_sym, sprod, sadd, ssub, salu, sym_val
from .dialects.ops import Ops, REDUCE_IDENTITY
from .realize import new_buffer, buffer_data, realize as _realize

# ---------------------------------------------------------------- provenance
_PKG = os.path.dirname(os.path.abspath(__file__)) + os.sep
_POS: dict = {}  # code object -> its instruction positions (for the column)

_OURS: dict = {}  # code object -> is it this package's (checked once per code object, not per frame)

class _Scope(threading.local):
  loc: str | None = None   # the user's line of the Tensor API call in progress (set by the outermost public method)
_scope = _Scope()

def _loc() -> str:
  """file:line:col of the user's line: the one the public Tensor method in progress was called from, else the
  first stack frame outside this package."""
  return _scope.loc or _walk_loc()

def _walk_loc() -> str:
  f = sys._getframe(1)
  while f is not None:
    c = f.f_code
    if (ours := _OURS.get(c)) is None: ours = _OURS[c] = c.co_filename.startswith(_PKG)
    if not ours: break
    f = f.f_back
  if f is None: return "<unknown>:0:0"
  if (pos := _POS.get(c := f.f_code)) is None: pos = _POS[c] = list(c.co_positions())
  i = f.f_lasti // 2
  col = pos[i][2] if 0 <= i < len(pos) and pos[i][2] is not None else -1
  return f"{c.co_filename}:{f.f_lineno}:{col + 1}"

_KNOWN_DEVICES: dict = {}  # name as given -> canonical name, for names already checked
def _device(name) -> str:
  """A device name in canonical form (Device.DEFAULT for None); unknown names raise at the user's line."""
  if type(name) is str and (dev := _KNOWN_DEVICES.get(name)) is not None: return dev
  from .device import Device
  if name is None: return Device.DEFAULT  # not remembered: the default may change (Device.DEFAULT = ...)
  if not isinstance(name, str): _err(TypeError, f"a device is a name such as 'CPU', got {type(name).__name__}")
  try: Device[name]
  except KeyError as e: _err(ValueError, str(e.args[0]))
  dev = _KNOWN_DEVICES[name] = Device.canonicalize(name)
  return dev

def _err(exc: type, msg: str):
  raise exc(f"{_loc()}: {msg}")

# ---------------------------------------------------------------- helpers
def _prod(xs): return sprod(xs)   # an int, or an index UOp when a size is symbolic
def _argfix(*x) -> tuple:
  return tuple(x[0]) if x and isinstance(x[0], (tuple, list)) else x

def _cv(v, dt: DType):
  """A Python or numpy scalar as a constant of dtype dt. Integers wrap at the dtype's width (a cast, as in PyTorch), but
  a Python int must be a 64-bit integer of dt's signedness (PyTorch's "Overflow when unpacking long"); a float given to
  an integer dtype must be finite and in its range (as torch.full checks): no other value is silently changed."""
  if dt.is_float:   # through float64, as numpy converts a Python int
    try: return float(v) if dt is dtypes.float64 else float(dt.np(float(v)))
    except OverflowError: _err(OverflowError, f"{v} is out of range for {dt}")
  if dt.is_bool: return bool(v)
  if isinstance(v, (float, np.floating)):
    if not math.isfinite(v): _err(ValueError, f"cannot convert {v} to {dt}")
    if not dt.min <= math.trunc(v) <= dt.max: _err(OverflowError, f"{v} is out of range for {dt}")
  elif not isinstance(v, np.integer) and not -(1 << 63) <= v < 1 << (64 if dt.is_unsigned else 63):
    _err(OverflowError, f"Python int {v} is out of range for {dt} (it does not fit a 64-bit {'un' * dt.is_unsigned}signed integer)")
  v, m = int(v) & ((1 << dt.bits) - 1), 1 << dt.bits
  return v - m if not dt.is_unsigned and v >= m >> 1 else v

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

MAX_NUMEL = 1 << 62   # index math (passes/index_math.py) is 64-bit: linear indices, strides and pad offsets stay below 2^63
def _sz(s, what: str = "size"):
  """A size: an int, or a symbolic index UOp whose variables are all bound (Variable(...).bind(value))."""
  if isinstance(s, UOp):
    try: sym_val(s)
    except (TypeError, KeyError): _err(TypeError, f"{what} {s!r} is not a bound size: use a Variable's .bind(value)")
    return s
  if not isinstance(s, (int, np.integer)) or isinstance(s, (bool, np.bool_)): _err(TypeError, f"{what} must be an int, got {type(s).__name__}")
  return int(s)

def _shape(shape, what: str = "shape") -> tuple:
  """A shape as a tuple of sizes (ints or bound symbolic UOps), checked up front: every dim non-negative (its bound value
  for a symbolic one), the element count what index math holds."""
  if bad := [s for s in shape if not isinstance(s, (int, np.integer, UOp)) or isinstance(s, (bool, np.bool_))]:
    _err(TypeError, f"{what} {tuple(shape)} must hold ints, got {type(bad[0]).__name__}")
  shape = tuple(_sz(s, what) for s in shape)
  if any(sym_val(s) < 0 for s in shape): _err(ValueError, f"{what} {shape} has a negative dimension")
  if (n := sym_val(_prod(shape))) >= MAX_NUMEL: _err(ValueError, f"{what} {shape} has {n} elements, more than index math supports ({MAX_NUMEL})")
  return shape

def _bshape(*shapes: tuple[int, ...]) -> tuple[int, ...]:
  """numpy broadcasting of shapes."""
  nd = max(len(s) for s in shapes)
  out = []
  for dims in zip(*((1,) * (nd - len(s)) + tuple(s) for s in shapes)):
    if len(big := {d for d in dims if d != 1}) > 1:
      _err(ValueError, f"shapes {' and '.join(str(tuple(s)) for s in shapes)} cannot be broadcast together")
    out.append(big.pop() if big else 1)
  return tuple(out)

def _buf(arr: np.ndarray, loc: str | None = None) -> UOp:
  return new_buffer(arr, loc or _loc())

def _is_data(u: UOp) -> bool: return u.op is Ops.BUFFER or (u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER)

def _dtype(x) -> DType:
  try: dt = to_dtype(x)
  except (AttributeError, TypeError): dt = None
  if not isinstance(dt, DType) or dt == dtypes.index: _err(TypeError, f"{x!r} is not a dtype")
  return dt

def _float(dt: DType) -> DType: return dt if dt.is_float else dtypes.default_float
def _sum_acc(dt: DType) -> DType:
  """tinygrad's accumulation dtype of sum: small ints widen to int32/uint32, half accumulates in float32."""
  if dt.is_unsigned: return least_upper_dtype(dt, dtypes.uint32)
  if dt.is_int or dt.is_bool: return least_upper_dtype(dt, dtypes.int32)
  return least_upper_dtype(dt, dtypes.float32)

def _infer(data) -> DType:
  """tinygrad's dtype of a Python (nested) list: all bools -> bool, any float -> float32, else int32."""
  flat = [x.dtype if isinstance(x, Tensor) else _scalar_dtype(x, "a list holding ") for x in _flat(data)]
  if not flat: return dtypes.default_float
  if all(d.is_bool for d in flat): return dtypes.bool
  return dtypes.default_float if any(d.is_float for d in flat) else dtypes.default_int

def _scalar_dtype(x, what: str = "") -> DType:
  try: return dtypes.from_py(x)
  except TypeError: _err(TypeError, f"cannot make a tensor from {what}{type(x).__name__} (supported: bool, int, float and numpy's "
                                    f"{', '.join(d.name for d in dtypes.all)})")

def _opposite(r: Tensor, b: Tensor) -> Tensor:
  """r is nonzero with the sign opposite to b's: where a truncating quotient/remainder needs the floor correction.
  A constant divisor's sign is known here, which keeps `x // 4` and `x % 4` small."""
  if (cv := b._const_value()) is None: return (r != 0) & ((r < 0) != (b < 0))
  return r < 0 if cv > 0 else r > 0

# bools have no arithmetic: add/max are or, mul/min are and (as tinygrad rewrites them)
_BOOL_ALU = {Ops.ADD: Ops.OR, Ops.MUL: Ops.AND, Ops.MAX: Ops.OR, Ops.MIN: Ops.AND}
_rng = np.random.default_rng(0)

# ---------------------------------------------------------------- Tensor
class Tensor:
  __slots__ = ("uop", "device", "requires_grad")
  __hash__ = object.__hash__  # == is elementwise

  def __init__(self, data: Any, dtype: DType | str | None = None, device: str | None = None, requires_grad: bool | None = None):
    dt = None if dtype is None else _dtype(dtype)
    self.device, self.requires_grad = _device(device), requires_grad
    if isinstance(data, UOp): self.uop = data if dt is None or data.dtype == dt else Tensor(data).cast(dt).uop
    elif isinstance(data, Tensor): self.uop = (data if dt is None else data.cast(dt)).uop
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
        try: dtypes.from_np(data.dtype)
        except TypeError as e: _err(TypeError, f"cannot make a tensor from an array of {e}")
        self.uop = _buf(data.astype(dt.np))
    elif data is None: self.uop = _buf(np.empty((0,), dtype=(dt or dtypes.default_float).np))
    else: _err(TypeError, f"cannot make a tensor from {type(data).__name__}")

  # ---- properties
  @property
  def shape(self) -> tuple[int, ...]: return self.uop.shape
  @property
  def dtype(self) -> DType: return self.uop.dtype
  @property
  def ndim(self) -> int: return len(self.shape)
  @property
  def lazydata(self) -> UOp: return self.uop
  def numel(self) -> int: return _prod(self.shape)
  def size(self, dim: int | None = None): return self.shape if dim is None else self.shape[self._dim(dim)]
  def element_size(self) -> int: return self.dtype.itemsize
  def nbytes(self) -> int: return self.numel() * self.dtype.itemsize
  def is_floating_point(self) -> bool: return self.dtype.is_float
  def __len__(self) -> int:
    if not self.shape: _err(TypeError, "len() of a 0-d tensor")
    return self.shape[0]
  def __repr__(self) -> str: return f"<Tensor {self.uop.op} shape={self.shape} dtype={self.dtype} device={self.device}>"
  def __bool__(self): _err(TypeError, "__bool__ on a Tensor is ambiguous; use .item() or .numpy()")

  # ---- realization
  def realize(self, *lst: Tensor) -> Tensor:
    """Compute self and lst in one graph; afterwards each holds its result as an input buffer."""
    todo: dict[UOp, list[Tensor]] = {}
    for t in (self,) + lst:
      if _is_data(t.uop): continue
      if t.numel() == 0: t.uop = _buf(np.empty(t.shape, t.dtype.np)); continue  # nothing to compute
      todo.setdefault(t.uop, []).append(t)
    if todo:
      devs = {ts[0].device for ts in todo.values()}
      if len(devs) > 1: _err(RuntimeError, f"realize() of tensors on different devices ({', '.join(sorted(devs))}): realize them separately")
      outs = _realize(list(todo), device=devs.pop())
      for (u, ts), out in zip(todo.items(), outs):
        if type(out) is not np.ndarray: out = np.asarray(out)
        if out.shape != tuple(sym_val(d) for d in u.shape) or (out.dtype is not u.dtype.npdt and out.dtype != u.dtype.npdt):
          raise RuntimeError(f"{u.loc}: realize returned {out.shape} {out.dtype} for {u.shape} {u.dtype}")
        b = new_buffer(out, u.loc, u.dtype)  # the realized value keeps the provenance of what computed it
        for t in ts: t.uop = b
    return self
  def numpy(self) -> np.ndarray:
    u = self.realize().uop
    return buffer_data(u if u.op is Ops.BUFFER else u.src[0]).reshape(self.shape).copy()
  def item(self):
    if self.numel() != 1: _err(ValueError, f"item() needs a tensor with one element, got shape {self.shape}")
    return self.numpy().item()
  def tolist(self): return self.numpy().tolist()
  def data(self) -> np.ndarray: return self.numpy()

  # ---- graph building
  def _op(self, _op: Ops, shape: tuple[int, ...], dtype: DType | None = None, src: tuple[Tensor, ...] = (), **kw) -> Tensor:
    if any(s.device != self.device for s in src):
      _err(RuntimeError, f"expected all tensors on one device, got {', '.join(sorted({self.device, *(s.device for s in src)}))}")
    t = object.__new__(Tensor)   # __init__'s checks hold by construction here
    if _op in SHAPE_ATTR: kw["shape"] = tuple(shape)   # the others' shapes follow from their sources
    dyn = ()   # symbolic sizes are sources after the tensor operand (see uop.SYM_ATTR)
    if (name := SYM_ATTR.get(_op)) is not None: kw[name], dyn = split_sym(kw[name])
    t.uop = UOp(_op, dtype or self.dtype, (self.uop,) + tuple(s.uop for s in src) + dyn, attrs(**kw) if kw else (), _loc())
    t.device, t.requires_grad = self.device, None
    return t
  def _alu(self, op: Ops, *src: Tensor, dtype: DType | None = None) -> Tensor:
    if self.dtype.is_bool and dtype is None: op = _BOOL_ALU.get(op, op)
    return self._op(op, self.shape, dtype, src)
  def _const_value(self):
    """The scalar this tensor is known to hold everywhere (a const seen through reshape/expand), else None."""
    u = self.uop
    while u.op in (Ops.RESHAPE, Ops.EXPAND): u = u.src[0]
    return u.attrs["value"] if u.op is Ops.CONST else None

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
  def full_like(self, fill_value, dtype=None, **kw) -> Tensor: return Tensor.full(self.shape, fill_value, dtype or self.dtype, **kw)
  def zeros_like(self, **kw) -> Tensor: return self.full_like(0, **kw)
  def ones_like(self, **kw) -> Tensor: return self.full_like(1, **kw)
  @staticmethod
  def arange(start, stop=None, step=1, dtype=None, **kw) -> Tensor:
    if stop is None: start, stop = 0, start
    if any(not isinstance(x, (int, float, np.integer, np.floating)) or isinstance(x, (bool, np.bool_)) for x in (start, stop, step)):
      _err(TypeError, f"arange takes int or float bounds, got ({start!r}, {stop!r}, {step!r})")
    if step == 0: _err(ValueError, "arange: step must be nonzero")
    if not all(math.isfinite(x) for x in (start, stop, step)): _err(ValueError, f"arange: bounds must be finite, got ({start}, {stop}, {step})")
    fl = any(isinstance(x, (float, np.floating)) for x in (start, stop, step))
    dt = _dtype(dtype) if dtype else dtypes.default_float if fl else dtypes.default_int
    n, = _shape((max(0, math.ceil((stop - start) / step) if fl else -((int(start) - int(stop)) // int(step))),), "arange size")
    if n and dt.is_int and not (dt.min <= start <= dt.max and dt.min <= start + (n - 1) * step <= dt.max):
      _err(OverflowError, f"arange({start}, {stop}, {step}) has values out of range for {dt}" + " (pass dtype=dtypes.int64)" * (dtype is None))
    return Tensor(np.arange(start, stop, step, dtype=np.float64 if dt.is_float else np.int64).astype(dt.np), **kw)
  @staticmethod
  def eye(n: int, m: int | None = None, dtype=None, **kw) -> Tensor:
    """The identity as pure movement (tinygrad's trick): ones (n,1) padded to rows of n+1, flattened, cut to n*n."""
    n, m = _shape((n, n if m is None else m), "eye size")
    k = max(n, m)
    x = Tensor.ones(k, 1, dtype=dtype or dtypes.default_float, **kw).pad(((0, 0), (0, k))).flatten().shrink(((0, k * k),)).reshape(k, k)
    return x.shrink(((0, n), (0, m)))
  @staticmethod
  def manual_seed(seed: int = 0):
    global _rng
    _rng = np.random.default_rng(seed)
  @staticmethod
  def rand(*shape, dtype=None, **kw) -> Tensor:
    return Tensor(np.asarray(_rng.random(_shape(_argfix(*shape)))), dtype or dtypes.default_float, **kw)
  @staticmethod
  def randn(*shape, dtype=None, **kw) -> Tensor:
    return Tensor(np.asarray(_rng.standard_normal(_shape(_argfix(*shape)))), dtype or dtypes.default_float, **kw)
  @staticmethod
  def uniform(*shape, low=0.0, high=1.0, dtype=None, **kw) -> Tensor:
    return Tensor(np.asarray(_rng.uniform(low, high, _shape(_argfix(*shape)))), dtype or dtypes.default_float, **kw)
  @staticmethod
  def randint(*shape, low=0, high=10, dtype=dtypes.int32, **kw) -> Tensor:
    dt = _dtype(dtype)
    if not (isinstance(low, (int, np.integer)) and isinstance(high, (int, np.integer)) and dt.is_int):
      _err(TypeError, f"randint needs int bounds and an int dtype, got {low!r}, {high!r}, {dt}")
    if not dt.min <= low < high <= dt.max + 1: _err(ValueError, f"randint: [{low}, {high}) is empty or out of range for {dt}")
    return Tensor(np.asarray(_rng.integers(low, high, _shape(_argfix(*shape)))), dt, **kw)

  # ---- movement
  def _dim(self, d: int, extra: int = 0) -> int:
    n = self.ndim + extra
    if not isinstance(d, (int, np.integer)): _err(TypeError, f"dimension must be an int, got {type(d).__name__}")
    if not (-max(n, 1) <= d < max(n, 1)): _err(IndexError, f"dimension out of range (expected to be in range of [{-max(n, 1)}, {max(n, 1) - 1}], but got {d})")
    return d + n if d < 0 else d
  def reshape(self, shape, *args) -> Tensor:
    shape = tuple(s if s is not None else self.shape[i] for i, s in enumerate(_argfix(shape, *args)))
    if any(not isinstance(s, (int, np.integer, UOp)) or not isinstance(s, UOp) and s < -1 for s in shape) or shape.count(-1) > 1:
      _err(ValueError, f"invalid shape {shape}")
    shape = tuple(_sz(s) if isinstance(s, UOp) else int(s) for s in shape)
    n = sym_val(self.numel())   # a symbolic size is checked at its bound value
    if -1 in shape:
      rest = _prod(s for s in shape if s != -1)
      if sym_val(rest) == 0 or n % sym_val(rest): _err(ValueError, f"shape {shape} is invalid for input of size {n}")
      shape = tuple(salu(Ops.IDIV, self.numel(), rest) if s == -1 else s for s in shape)
    if sym_val(_prod(shape)) != n: _err(ValueError, f"shape {shape} is invalid for input of size {n}")
    return self if shape == self.shape else self._op(Ops.RESHAPE, shape)
  view = reshape
  def _broadcast_to(self, shape: tuple[int, ...]) -> Tensor:
    if self.shape == shape: return self
    if len(shape) < self.ndim or any(s != 1 and s != t for s, t in zip(self.shape[::-1], shape[::-1])):
      _err(ValueError, f"cannot broadcast {self.shape} to {shape}")
    shape = _shape(shape)   # the only movement op besides pad that makes more elements
    x = self.reshape((1,) * (len(shape) - self.ndim) + self.shape)
    return x if x.shape == shape else x._op(Ops.EXPAND, shape)
  def expand(self, shape, *args) -> Tensor:
    shape = _argfix(shape, *args)
    if len(shape) < self.ndim: _err(ValueError, f"cannot expand {self.shape} to {shape}: fewer dimensions")
    old = (None,) * (len(shape) - self.ndim) + self.shape
    return self._broadcast_to(tuple(o if s == -1 and o is not None else s for o, s in zip(old, shape)))
  def broadcast_to(self, shape) -> Tensor: return self.expand(shape)
  def expand_as(self, other: Tensor) -> Tensor: return self.expand(other.shape)
  def permute(self, order, *args) -> Tensor:
    order = tuple(self._dim(o) for o in _argfix(order, *args))
    if sorted(order) != list(range(self.ndim)): _err(ValueError, f"{order} is not a permutation of the {self.ndim} dims of {self.shape}")
    return self if order == tuple(range(self.ndim)) else self._op(Ops.PERMUTE, tuple(self.shape[o] for o in order), order=order)
  def pad(self, padding, mode: str = "constant", value=0.0) -> Tensor:
    """padding: (before, after) or None per dim, or PyTorch's flat (left, right, top, bottom, ...) starting at the last dim.
    Negative padding cuts, as in PyTorch."""
    if mode != "constant": _err(NotImplementedError, f"pad mode {mode!r} is not supported (only 'constant')")
    if not isinstance(padding, (tuple, list)): _err(TypeError, f"padding must be a tuple or list, got {type(padding).__name__}")
    if all(isinstance(p, (int, np.integer)) for p in padding):
      if len(padding) % 2 or len(padding) > 2 * self.ndim: _err(ValueError, f"flat padding {tuple(padding)} must have an even length <= {2 * self.ndim}")
      pads = ((0, 0),) * (self.ndim - len(padding) // 2) + tuple(zip(padding[-2::-2], padding[::-2]))
    else:
      if len(padding) != self.ndim: _err(ValueError, f"padding {tuple(padding)} needs one entry per dim of {self.shape}")
      pads = tuple((0, 0) if p is None else tuple(p) if isinstance(p, (tuple, list)) else (p,) for p in padding)
    if any(len(p) != 2 for p in pads): _err(ValueError, f"invalid padding {tuple(padding)}")
    if any(not isinstance(v, (int, np.integer)) or isinstance(v, (bool, np.bool_)) for p in pads for v in p):
      _err(TypeError, f"padding {tuple(padding)} must hold ints")
    if any(sym_val(s) + b + a < 0 for s, (b, a) in zip(self.shape, pads)): _err(ValueError, f"padding {pads} cuts more than {self.shape}")
    x = self.shrink(tuple((-min(b, 0), sadd(s, min(a, 0))) for s, (b, a) in zip(self.shape, pads)))
    pads = tuple((max(b, 0), max(a, 0)) for b, a in pads)
    if all(p == (0, 0) for p in pads): return x
    ret = x._op(Ops.PAD, _shape(tuple(sadd(s, b + a) for s, (b, a) in zip(x.shape, pads))), padding=tuple(v for p in pads for v in p))
    if value == 0: return ret
    return Tensor.ones(x.shape, dtype=dtypes.bool, device=self.device).pad(pads).where(ret, Tensor(value, self.dtype, device=self.device))  # the padded region holds `value`
  def shrink(self, arg) -> Tensor:
    if len(arg) != self.ndim: _err(ValueError, f"shrink {tuple(arg)} needs one entry per dim of {self.shape}")
    bnd = lambda x: _sz(x, "shrink bound") if isinstance(x, UOp) else int(x)
    arg = tuple((0, s) if a is None else (bnd(a[0]), bnd(a[1])) for s, a in zip(self.shape, arg))
    if any(not (0 <= sym_val(b) <= sym_val(e) <= sym_val(s)) for s, (b, e) in zip(self.shape, arg)):
      _err(ValueError, f"invalid shrink {arg} of {self.shape}")
    if all(a == (0, s) for s, a in zip(self.shape, arg)): return self
    return self._op(Ops.SHRINK, tuple(ssub(e, b) for b, e in arg), bounds=tuple(v for a in arg for v in a))
  def flip(self, axis, *args) -> Tensor:
    axes = tuple(self._dim(a) for a in _argfix(axis, *args))
    if len(set(axes)) != len(axes): _err(ValueError, f"dim appears multiple times in {axes}")
    axes = tuple(sorted(a for a in axes if isinstance(self.shape[a], UOp) or self.shape[a] > 1))  # flipping a size-0/1 dim is a no-op
    return self._op(Ops.FLIP, self.shape, axes=axes) if axes else self
  def transpose(self, dim0: int = 1, dim1: int = 0) -> Tensor:
    order = list(range(self.ndim))
    order[self._dim(dim0)], order[self._dim(dim1)] = order[self._dim(dim1)], order[self._dim(dim0)]
    return self.permute(order)
  @property
  def T(self) -> Tensor: return self.permute(tuple(range(self.ndim))[::-1])
  def squeeze(self, dim: int | None = None) -> Tensor:
    if dim is None: return self.reshape(tuple(s for s in self.shape if s != 1))
    if self.ndim == 0: self._dim(dim); return self
    d = self._dim(dim)
    return self if self.shape[d] != 1 else self.reshape(self.shape[:d] + self.shape[d + 1:])
  def unsqueeze(self, dim: int) -> Tensor:
    d = self._dim(dim, extra=1)
    return self.reshape(self.shape[:d] + (1,) + self.shape[d:])
  def flatten(self, start_dim: int = 0, end_dim: int = -1) -> Tensor:
    if self.ndim == 0: return self.reshape(1)
    s, e = self._dim(start_dim), self._dim(end_dim)
    return self.reshape(self.shape[:s] + (_prod(self.shape[s:e + 1]),) + self.shape[e + 1:])
  def unflatten(self, dim: int, sizes) -> Tensor:
    d = self._dim(dim)
    return self.reshape(self.shape[:d] + tuple(sizes) + self.shape[d + 1:])

  def __getitem__(self, idx) -> Tensor:
    """Basic indexing: ints, slices (any step, negative included), None and Ellipsis."""
    idx = idx if isinstance(idx, tuple) else (idx,)
    for i in idx:
      if not (i is None or i is Ellipsis or isinstance(i, (int, np.integer, slice))) or isinstance(i, (bool, np.bool_)):
        _err(TypeError, f"unsupported index {i!r} (ints, slices, None and ... are supported)")
    if sum(i is Ellipsis for i in idx) > 1: _err(IndexError, "an index can only have a single ellipsis ('...')")
    used = sum(i is not None and i is not Ellipsis for i in idx)
    if used > self.ndim: _err(IndexError, f"too many indices for tensor of dimension {self.ndim}")
    e = idx.index(Ellipsis) if Ellipsis in idx else len(idx)
    idx = idx[:e] + (slice(None),) * (self.ndim - used) + idx[e + 1:]
    bounds, flips, steps, out, d = [], [], [], [], 0
    for i in idx:
      if i is None: out.append(1); continue
      s = self.shape[d]
      if isinstance(i, slice):
        start, stop, step = i.indices(s) if i.step != 0 else _err(ValueError, "slice step cannot be zero")
        n = len(range(start, stop, step))
        lo, hi = (start, start + (n - 1) * step + 1) if step > 0 else (start + (n - 1) * step, start + 1)
        bounds.append((lo, hi) if n else (0, 0)); steps.append(abs(step) if n > 1 else 1); out.append(n)
        if step < 0 and n > 1: flips.append(d)
      else:
        if not -s <= i < s: _err(IndexError, f"index {i} is out of bounds for dimension {d} with size {s}")
        bounds.append((i % s, i % s + 1)); steps.append(1)
      d += 1
    x = self.shrink(bounds).flip(flips) if flips else self.shrink(bounds)
    for d, st in enumerate(steps):  # stride: pad to a multiple of st, split the dim into (n, st), keep column 0
      if st == 1: continue
      n = -(-x.shape[d] // st)
      x = x.pad(tuple((0, n * st - x.shape[d]) if j == d else None for j in range(x.ndim)))
      x = x.reshape(x.shape[:d] + (n, st) + x.shape[d + 1:]).shrink(tuple((0, 1) if j == d + 1 else None for j in range(x.ndim + 1)))
      x = x.reshape(x.shape[:d] + (n,) + x.shape[d + 2:])
    return x.reshape(tuple(out))

  # ---- dtypes
  def cast(self, dtype) -> Tensor:
    dt = _dtype(dtype)
    return self if dt == self.dtype else self._op(Ops.CAST, self.shape, dt)
  def bitcast(self, dtype) -> Tensor:
    dt = _dtype(dtype)
    if dt.itemsize != self.dtype.itemsize or dt.is_bool != self.dtype.is_bool: _err(TypeError, f"bitcast {self.dtype} -> {dt} needs equal item sizes")
    return self if dt == self.dtype else self._op(Ops.BITCAST, self.shape, dt)
  def float(self) -> Tensor: return self.cast(dtypes.float32)
  def half(self) -> Tensor: return self.cast(dtypes.float16)
  def double(self) -> Tensor: return self.cast(dtypes.float64)
  def int(self) -> Tensor: return self.cast(dtypes.int32)
  def long(self) -> Tensor: return self.cast(dtypes.int64)
  def bool(self) -> Tensor: return self.cast(dtypes.bool)
  def contiguous(self) -> Tensor: return self._op(Ops.CONTIGUOUS, self.shape)
  def detach(self) -> Tensor: return self._op(Ops.DETACH, self.shape)
  def clone(self) -> Tensor: return self.contiguous()
  def to(self, device=None) -> Tensor:
    """The same values on another device (a `copy` in the graph); self when already there."""
    if (dev := _device(device)) == self.device: return self
    return Tensor(UOp(Ops.COPY, self.dtype, (self.uop,), attrs(device=dev), _loc()), device=dev)
  def assign(self, x) -> Tensor:
    """Replace the value held by self (functional: tensors built from the old value keep it)."""
    x = x if isinstance(x, Tensor) else Tensor(x, self.dtype, device=self.device)
    if x.shape != self.shape: x = x._broadcast_to(self.shape) if x.ndim <= self.ndim else _err(ValueError, f"assign {x.shape} to {self.shape}")
    if x.dtype != self.dtype: _err(TypeError, f"assign {x.dtype} to a {self.dtype} tensor")
    self.uop = x.uop
    return self

  # ---- broadcasting and promotion
  def _broadcasted(self, y, reverse: bool = False, match_dtype: bool = True) -> tuple[Tensor, Tensor]:
    x = self
    if not isinstance(y, Tensor):
      if not isinstance(y, (bool, int, float, np.generic)): _err(TypeError, f"unsupported operand type {type(y).__name__}")
      # a Python scalar takes the tensor's dtype class; an int tensor with a float scalar becomes the default float
      ydt = x.dtype if x.dtype.is_float or (x.dtype.is_int and isinstance(y, (int, np.integer))) else dtypes.from_py(y)
      out = least_upper_dtype(x.dtype, ydt) if match_dtype else ydt
      y = Tensor(_cv(_cv(y, ydt), out), out, device=x.device)
    if match_dtype and x.dtype != y.dtype:
      out = least_upper_dtype(x.dtype, y.dtype)
      x, y = x.cast(out), y.cast(out)
    if reverse: x, y = y, x
    if (shape := x.shape) == y.shape: return x, y
    shape = _bshape(shape, y.shape)
    return x._broadcast_to(shape), y._broadcast_to(shape)
  def _binop(self, op: str, y, reverse=False, dtype=None) -> Tensor:
    a, b = self._broadcasted(y, reverse)
    return a._alu(op, b, dtype=dtype)
  def _need(self, ok, what: str, *others: Tensor):
    if not all(ok(t.dtype) for t in (self,) + others): _err(TypeError, f"{what} is not supported for {', '.join(str(t.dtype) for t in (self,) + others)}")

  # ---- elementwise: primitives
  def add(self, x, reverse=False) -> Tensor: return self._binop(Ops.ADD, x, reverse)
  def mul(self, x, reverse=False) -> Tensor: return self._binop(Ops.MUL, x, reverse)
  def sub(self, x, reverse=False) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    if a.dtype.is_bool: _err(TypeError, "subtraction with bool tensors is not supported; use ^ or logical_not")
    return a._alu(Ops.SUB, b)
  def maximum(self, x) -> Tensor: return self._binop(Ops.MAX, x)
  def minimum(self, x) -> Tensor: return self._binop(Ops.MIN, x)
  def neg(self) -> Tensor: return self.logical_not() if self.dtype.is_bool else self._alu(Ops.NEG)
  def logical_not(self) -> Tensor: return self.cast(dtypes.bool)._binop(Ops.CMPNE, True, dtype=dtypes.bool)
  def _bitwise(self, op, x, reverse=False) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    a._need(lambda d: d.is_int or d.is_bool, f"bitwise {op}")
    return a._alu(op, b)
  def bitwise_and(self, x, reverse=False) -> Tensor: return self._bitwise(Ops.AND, x, reverse)
  def bitwise_or(self, x, reverse=False) -> Tensor: return self._bitwise(Ops.OR, x, reverse)
  def bitwise_xor(self, x, reverse=False) -> Tensor: return self._bitwise(Ops.XOR, x, reverse)
  def bitwise_not(self) -> Tensor:
    self._need(lambda d: d.is_int or d.is_bool, "bitwise not")
    return self.logical_not() if self.dtype.is_bool else self ^ -1
  def _shift(self, op, x, reverse=False) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    a._need(lambda d: d.is_int, f"shift {op}")
    return a._alu(op, b)
  def lshift(self, x, reverse=False) -> Tensor: return self._shift(Ops.SHL, x, reverse)
  def rshift(self, x, reverse=False) -> Tensor: return self._shift(Ops.SHR, x, reverse)
  def pow(self, x, reverse=False) -> Tensor:
    a, b = self._broadcasted(x, reverse)
    if a.dtype.is_bool: a, b = a.cast(dtypes.int32), b.cast(dtypes.int32)
    return a._alu(Ops.POW, b)

  # ---- comparisons (bool results; written so that NaN compares false, as in numpy)
  def _outside(self, x) -> int:
    """+1 / -1 when x is a Python or numpy int above / below what self's integer dtype holds, else 0. Such a scalar
    would wrap on conversion (int8 256 -> 0), so comparisons with it are answered exactly, as numpy 2 does."""
    if type(x) is bool or isinstance(x, np.bool_) or not isinstance(x, (int, np.integer)) or not self.dtype.is_int: return 0
    return 1 if x > self.dtype.max else -1 if x < self.dtype.min else 0
  def _known(self, value: bool) -> Tensor: return Tensor.full(self.shape, value, dtype=dtypes.bool, device=self.device)
  def _cmp(self, op, x, reverse=False) -> Tensor:
    if (side := self._outside(x)): return self._known(op is Ops.CMPNE or (op is Ops.CMPLT and (side > 0) != reverse))
    a, b = self._broadcasted(x, reverse)
    if op is Ops.CMPLT and a.dtype.is_bool: return a.logical_not()._alu(Ops.AND, b)  # False < True, whatever i1's signedness
    return a._alu(op, b, dtype=dtypes.bool)
  def __lt__(self, x) -> Tensor: return self._cmp(Ops.CMPLT, x)
  def __gt__(self, x) -> Tensor: return self._cmp(Ops.CMPLT, x, True)
  def __le__(self, x) -> Tensor:
    if (side := self._outside(x)): return self._known(side > 0)
    a, b = self._broadcasted(x)
    return (a < b) | (a == b) if a.dtype.is_float else (b < a).logical_not()
  def __ge__(self, x) -> Tensor:
    if (side := self._outside(x)): return self._known(side < 0)
    a, b = self._broadcasted(x)
    return b <= a
  def __eq__(self, x) -> Tensor: return self._cmp(Ops.CMPEQ, x)  # type: ignore[override]
  def __ne__(self, x) -> Tensor: return self._cmp(Ops.CMPNE, x)  # type: ignore[override]
  def eq(self, x) -> Tensor: return self == x
  def ne(self, x) -> Tensor: return self != x
  def lt(self, x) -> Tensor: return self < x
  def gt(self, x) -> Tensor: return self > x
  def le(self, x) -> Tensor: return self <= x
  def ge(self, x) -> Tensor: return self >= x

  def where(self, x, y) -> Tensor:
    """self ? x : y, with x and y promoted together and everything broadcast."""
    if isinstance(x, Tensor): x, y = x._broadcasted(y)
    elif isinstance(y, Tensor): y, x = y._broadcasted(x)
    else: x, y = Tensor(x, device=self.device)._broadcasted(y)
    shape = _bshape(self.shape, x.shape, y.shape)
    c, x, y = self.cast(dtypes.bool)._broadcast_to(shape), x._broadcast_to(shape), y._broadcast_to(shape)
    return c._op(Ops.WHERE, shape, x.dtype, (x, y))

  # ---- division
  def _trunc_divmod(self, b: Tensor) -> tuple[Tensor, Tensor]:
    """Truncating integer quotient and remainder. Division by 0 gives 0 (as numpy) and MIN // -1 wraps; the divisor
    is made safe so that no kernel ever divides by 0 or overflows (both trap on CPUs), unless it is a safe constant."""
    a, cv = self, b._const_value()
    if cv is not None and cv != 0 and not (cv == -1 and not a.dtype.is_unsigned): return a._alu(Ops.IDIV, b), a._alu(Ops.MOD, b)
    bad = (b == 0) if a.dtype.is_unsigned else (b == 0) | (b == -1)
    bs = bad.where(1, b)
    q, r = a._alu(Ops.IDIV, bs), a._alu(Ops.MOD, bs)
    if not a.dtype.is_unsigned: q = (b == -1).where(-a, q)
    return (b == 0).where(0, q), r
  def div(self, x, reverse=False, rounding_mode: str | None = None) -> Tensor:
    """True division (float result); rounding_mode "trunc" or "floor" rounds the quotient (ints stay ints)."""
    a, b = self._broadcasted(x, reverse)
    if rounding_mode not in (None, "trunc", "floor"): _err(ValueError, f"div expected rounding_mode to be one of None, 'trunc', or 'floor' but found {rounding_mode!r}")
    if rounding_mode is not None and (a.dtype.is_int or a.dtype.is_bool):
      if a.dtype.is_bool: a, b = a.cast(dtypes.int32), b.cast(dtypes.int32)
      q, r = a._trunc_divmod(b)
      if rounding_mode == "trunc" or a.dtype.is_unsigned: return q
      return _opposite(r, b).where(q - 1, q)
    dt = _float(a.dtype)
    a, b = a.cast(dt), b.cast(dt)
    if rounding_mode is None: return a._alu(Ops.FDIV, b)
    if rounding_mode == "trunc": return a._alu(Ops.FDIV, b).trunc()
    # floor of a float quotient as numpy/Python do it: the exact quotient (a - fmod(a, b)) / b, corrected and rounded
    m = a._alu(Ops.MOD, b)
    q = (a - m)._alu(Ops.FDIV, b)
    q = _opposite(m, b).where(q - 1, q)
    fq = q.floor()
    return (b == 0).where(a._alu(Ops.FDIV, b), (q - fq > 0.5).where(fq + 1, fq))
  def idiv(self, x, reverse=False) -> Tensor:
    """Integer division truncating toward zero (tinygrad's idiv)."""
    a, b = self._broadcasted(x, reverse)
    a._need(lambda d: d.is_int, "idiv")
    return a._trunc_divmod(b)[0]
  def floordiv(self, x, reverse=False) -> Tensor: return self.div(x, reverse, "floor")
  def mod(self, x, reverse=False) -> Tensor:
    """Remainder with the sign of the divisor (Python/numpy/PyTorch), from the truncating mod plus a correction."""
    a, b = self._broadcasted(x, reverse)
    if a.dtype.is_bool: a, b = a.cast(dtypes.int32), b.cast(dtypes.int32)
    r = a._trunc_divmod(b)[1] if a.dtype.is_int else a._alu(Ops.MOD, b)
    if a.dtype.is_unsigned: return r
    return _opposite(r, b).where(r + b, r)  # fmod(a, 0) is already NaN
  def fmod(self, x) -> Tensor:
    a, b = self._broadcasted(x)
    return a._trunc_divmod(b)[1] if a.dtype.is_int else a._alu(Ops.MOD, b)

  # ---- elementwise: float functions (ints are cast to the default float first)
  def _fl(self) -> Tensor: return self.cast(_float(self.dtype))
  def exp2(self) -> Tensor: return self._fl()._alu(Ops.EXP2)
  def log2(self) -> Tensor: return self._fl()._alu(Ops.LOG2)
  def sin(self) -> Tensor: return self._fl()._alu(Ops.SIN)
  def sqrt(self) -> Tensor: return self._fl()._alu(Ops.SQRT)
  def reciprocal(self) -> Tensor: return self._fl()._alu(Ops.RECIP)
  def exp(self) -> Tensor: return (self._fl() * (1 / math.log(2))).exp2()
  def log(self) -> Tensor: return self.log2() * math.log(2)
  def cos(self) -> Tensor: return ((math.pi / 2) - self._fl()).sin()
  def tan(self) -> Tensor: return self.sin() / self.cos()
  def rsqrt(self) -> Tensor: return self.sqrt().reciprocal()
  def square(self) -> Tensor: return self * self
  def trunc(self) -> Tensor: return self._alu(Ops.TRUNC) if self.dtype.is_float else self
  def floor(self) -> Tensor:
    if not self.dtype.is_float: return self
    return ((b := self.trunc()) > self).where(b - 1, b)
  def ceil(self) -> Tensor:
    if not self.dtype.is_float: return self
    return ((b := self.trunc()) < self).where(b + 1, b)
  def round(self) -> Tensor:
    """Round half to even (numpy/PyTorch); x - floor(x) is exact, so no x + 0.5 rounding error."""
    if not self.dtype.is_float: return self
    f = self.floor()
    d, even = self - f, (f * 0.5).floor() * 2 == f
    return (d > 0.5).where(f + 1, (d < 0.5).where(f, even.where(f, f + 1)))
  def abs(self) -> Tensor: return self if self.dtype.is_unsigned or self.dtype.is_bool else (self < 0).where(-self, self)
  def sign(self) -> Tensor: return (self < 0).where(-1, (self > 0).where(1, self))
  def relu(self) -> Tensor: return self.maximum(0)
  def sigmoid(self) -> Tensor: return (1 + (self._fl() * (-1 / math.log(2))).exp2()).reciprocal()
  def tanh(self) -> Tensor: return 2.0 * (2.0 * self._fl()).sigmoid() - 1.0
  def clip(self, min_=None, max_=None) -> Tensor:
    if min_ is None and max_ is None: _err(ValueError, "clip needs min_ or max_")
    x = self if min_ is None else self.maximum(min_)
    return x if max_ is None else x.minimum(max_)
  clamp = clip
  def lerp(self, end, weight) -> Tensor: return self + (end - self) * weight
  def isnan(self) -> Tensor: return self != self
  def isinf(self) -> Tensor: return (self == math.inf) | (self == -math.inf)

  # ---- reductions
  def _axes(self, axis) -> tuple[int, ...]:
    if axis is None: return tuple(range(self.ndim))
    axes = tuple(self._dim(a) for a in (axis if isinstance(axis, (tuple, list)) else (axis,)))
    if len(set(axes)) != len(axes): _err(ValueError, f"dim appears multiple times in {tuple(axis)}")
    return tuple(sorted(a for a in axes if self.ndim))  # a 0-d tensor accepts axis 0/-1 and reduces nothing
  def _reduce(self, op: Ops, axis=None, keepdim=False) -> Tensor:
    axes = self._axes(axis)
    kept = tuple(1 if i in axes else s for i, s in enumerate(self.shape))
    out = kept if keepdim else tuple(s for i, s in enumerate(self.shape) if i not in axes)
    if self.dtype.is_bool and op is not Ops.ADD: return self.cast(dtypes.uint8)._reduce(op, axis, keepdim).cast(dtypes.bool)  # no i1 ordering
    if not axes: return self.reshape(out)
    if 0 in self.shape and 0 not in kept: return Tensor.full(out, REDUCE_IDENTITY[op](self.dtype), self.dtype)  # empty reduce
    return self._op(Ops.REDUCE_AXIS, kept, op=op, axes=axes).reshape(out)
  def sum(self, axis=None, keepdim=False, dtype=None) -> Tensor:
    ret = self.cast(dtype or _sum_acc(self.dtype))._reduce(Ops.ADD, axis, keepdim)
    return ret.cast(self.dtype) if dtype is None and self.dtype == dtypes.float16 else ret
  def prod(self, axis=None, keepdim=False, dtype=None) -> Tensor: return self.cast(dtype or self.dtype)._reduce(Ops.MUL, axis, keepdim)
  def max(self, axis=None, keepdim=False) -> Tensor: return self._reduce(Ops.MAX, axis, keepdim)
  def min(self, axis=None, keepdim=False) -> Tensor: return self._reduce(Ops.MIN, axis, keepdim)
  def any(self, axis=None, keepdim=False) -> Tensor: return self.bool().max(axis, keepdim)
  def all(self, axis=None, keepdim=False) -> Tensor: return self.logical_not().any(axis, keepdim).logical_not()
  def mean(self, axis=None, keepdim=False) -> Tensor:
    out = self.dtype if self.dtype.is_float else dtypes.float32
    n = _prod(self.shape[a] for a in self._axes(axis))
    return self.cast(_sum_acc(self.dtype)).sum(axis, keepdim).div(n).cast(out)
  def var(self, axis=None, keepdim=False, correction=1) -> Tensor:
    n = _prod(self.shape[a] for a in self._axes(axis))
    return (self - self.mean(axis, keepdim=True)).square().sum(axis, keepdim).div(max(0, n - correction))
  def std(self, axis=None, keepdim=False, correction=1) -> Tensor: return self.var(axis, keepdim, correction).sqrt()
  def _softmax(self, axis, dtype=None):
    x = self.cast(dtype) if dtype is not None else self
    m = x - x.max(axis, keepdim=True)  # subtract the max: exp never overflows
    e = m.exp()
    return m, e, e.sum(axis, keepdim=True)
  def softmax(self, axis=-1, dtype=None) -> Tensor:
    _, e, ss = self._softmax(axis, dtype)
    return e / ss
  def log_softmax(self, axis=-1, dtype=None) -> Tensor:
    m, _, ss = self._softmax(axis, dtype)
    return m - ss.log()
  def logsumexp(self, axis=None, keepdim=False) -> Tensor:
    m = self.max(axis, keepdim=True)
    return (self - m).exp().sum(axis, keepdim=True).log().add(m).reshape(self.max(axis, keepdim).shape)
  def argmax(self, axis=None, keepdim=False) -> Tensor:
    """First index of the max (tinygrad's trick: mask of maxima times a descending arange, then max)."""
    if axis is None or self.ndim == 0:
      if axis is not None: self._dim(axis)
      return self.flatten().argmax(0).reshape((1,) * self.ndim if keepdim else ())
    a, n = self._dim(axis), self.shape[self._dim(axis)]
    if n == 0: _err(IndexError, "argmax of an empty dimension")
    m = self == self.max(a, keepdim=True)
    if self.dtype.is_float: m = m | (self != self)  # a NaN is the max (numpy): its first position wins
    idx = m * Tensor.arange(n, 0, -1).reshape((n,) + (1,) * (self.ndim - a - 1))
    return (n - idx.max(a, keepdim=keepdim)).cast(dtypes.int32)
  def argmin(self, axis=None, keepdim=False) -> Tensor:
    return (-self if self.dtype.is_float else ~self).argmax(axis, keepdim)  # ~ reverses the order of ints and bools

  # ---- matmul: broadcasted multiply and a sum over the last axis (recognisable as a contraction)
  def dot(self, w: Tensor, dtype=None) -> Tensor:
    x, dx, dw = self, self.ndim, w.ndim
    if not (dx > 0 and dw > 0): _err(ValueError, f"both tensors need to be at least 1D, got {dx}D and {dw}D")
    if x.shape[-1] != w.shape[axis_w := -min(w.ndim, 2)]: _err(ValueError, f"cannot matmul {x.shape} and {w.shape}: {x.shape[-1]} != {w.shape[axis_w]}")
    x = x.reshape(*x.shape[0:-1], *[1] * min(dx - 1, dw - 1, 1), x.shape[-1])
    w = w.reshape(*w.shape[0:-2], *[1] * min(dx - 1, dw - 1, 1), *w.shape[axis_w:]).transpose(-1, axis_w)
    return (x * w).sum(-1, dtype=dtype).cast(least_upper_dtype(x.dtype, w.dtype) if dtype is None else dtype)
  def matmul(self, x: Tensor, reverse=False, dtype=None) -> Tensor:
    return x.dot(self, dtype) if reverse else self.dot(x, dtype)
  def __matmul__(self, x) -> Tensor: return self.matmul(x)
  def __rmatmul__(self, x) -> Tensor: return self.matmul(x, True)

  # ---- operators
  def __neg__(self) -> Tensor: return self.neg()
  def __invert__(self) -> Tensor: return self.bitwise_not()
  def __abs__(self) -> Tensor: return self.abs()

# binary operators and their reflected and in-place forms (in-place ones rebind the tensor, as in tinygrad)
for _name, _fn in {"add": Tensor.add, "sub": Tensor.sub, "mul": Tensor.mul, "pow": Tensor.pow, "floordiv": Tensor.floordiv,
                   "mod": Tensor.mod, "and": Tensor.bitwise_and, "or": Tensor.bitwise_or, "xor": Tensor.bitwise_xor,
                   "lshift": Tensor.lshift, "rshift": Tensor.rshift, "truediv": Tensor.div}.items():
  setattr(Tensor, f"__{_name}__", lambda self, x, f=_fn: f(self, x))
  setattr(Tensor, f"__r{_name}__", lambda self, x, f=_fn: f(self, x, True))
  setattr(Tensor, f"__i{_name}__", lambda self, x, f=_fn: self.assign(f(self, x)))

# ---- convolution, tinygrad's formulation: sliding windows by movement ops only (repeat, shrink, reshape, permute),
# then one multiply-reduce, which uop-optimize recognises as a contraction (packed operands, register-tiled FMAs)
def _pool(self: Tensor, k_: tuple[int, ...], stride=1, dilation=1) -> Tensor:
  """(..., *i_) -> (..., *o_, *k_): every k_ window at the given stride and dilation."""
  n = len(k_)
  s_, d_ = (stride,) * n if isinstance(stride, int) else tuple(stride), (dilation,) * n if isinstance(dilation, int) else tuple(dilation)
  noop, i_ = [None] * (self.ndim - n), self.shape[-n:]
  if any(d * (k - 1) + 1 > i for k, i, d in zip(k_, i_, d_)): _err(ValueError, f"kernel {k_} (dilation {d_}) is larger than the input {i_}")
  o_ = [(i - d * (k - 1) - 1) // s + 1 for i, d, k, s in zip(i_, d_, k_, s_)]
  f_ = [1 + int(o * s > i + d) for o, s, i, d in zip(o_, s_, i_, d_)]
  reps = [-(-k * (i * f + d) // i) for k, i, d, f in zip(k_, i_, d_, f_)]
  lead = list(self.shape[:-n])
  x = self.reshape(*lead, *[v for i in i_ for v in (1, i)]).expand(*lead, *[v for r, i in zip(reps, i_) for v in (r, i)])
  x = x.reshape(*lead, *[r * i for r, i in zip(reps, i_)])
  x = x.shrink(tuple([(0, s) for s in lead] + [(0, k * (i * f + d)) for k, i, d, f in zip(k_, i_, d_, f_)]))
  x = x.reshape(*lead, *[v for k, i, d, f in zip(k_, i_, d_, f_) for v in (k, i * f + d)])
  x = x.shrink(tuple([(0, s) for s in lead] + [v for k, o, s in zip(k_, o_, s_) for v in ((0, k), (0, o * s))]))
  x = x.reshape(*lead, *[v for k, o, s in zip(k_, o_, s_) for v in (k, o, s)])
  x = x.shrink(tuple([(0, s) for s in lead] + [v for k, o in zip(k_, o_) for v in ((0, k), (0, o), (0, 1))]))
  x = x.reshape(*lead, *[v for k, o in zip(k_, o_) for v in (k, o)])
  return x.permute(*range(len(noop)), *[len(noop) + i * 2 + 1 for i in range(n)], *[len(noop) + i * 2 for i in range(n)])

def _ints(v, n: int, name: str, least: int, counts: tuple[int, ...] = (1,)) -> tuple[int, ...]:
  """A conv argument as n ints >= least (an int stands for all n), checked as PyTorch checks it."""
  vs = (v,) if isinstance(v, (int, np.integer)) else tuple(v) if isinstance(v, (tuple, list)) else None
  if vs is None or any(not isinstance(x, (int, np.integer)) or isinstance(x, (bool, np.bool_)) for x in vs):
    _err(TypeError, f"{name} must be an int or a tuple of ints, got {v!r}")
  if len(vs) != 1 and len(vs) not in [c * n for c in counts]:
    _err(ValueError, f"expected {name} to be a single integer value or a list of {' or '.join(str(c * n) for c in counts)} values to match "
                     f"the convolution dimensions, but got {name}={list(vs)}")
  if any(x < least for x in vs): _err(ValueError, f"{name} must be {'positive' if least else 'non-negative'}, got {name}={v}")
  return tuple(int(x) for x in vs) * (n if len(vs) == 1 else 1)

def conv2d(self: Tensor, weight: Tensor, bias: Tensor | None = None, groups=1, stride=1, dilation=1, padding=0, dtype=None) -> Tensor:
  """tinygrad's / PyTorch's conv2d (NCHW input, (cout, cin/groups, kh, kw) weight); padding: int, one per spatial dim,
  or PyTorch's flat (left, right, top, bottom). Arguments are checked as PyTorch checks them: groups, stride and dilation
  positive, padding non-negative, one value or one per spatial dim."""
  if not isinstance(weight, Tensor) or not (bias is None or isinstance(bias, Tensor)):
    _err(TypeError, "conv2d takes a weight Tensor and an optional bias Tensor")
  if weight.ndim < 3 or self.ndim != weight.ndim:
    _err(ValueError, f"conv2d needs an input and a weight of equal rank >= 3 (batch, channels, spatial dims), got {self.shape} and {weight.shape}")
  (bs, cin_), (cout, cin), HW = self.shape[:2], weight.shape[:2], weight.shape[2:]
  groups, = _ints(groups, 1, "groups", 1)
  stride, dilation = _ints(stride, len(HW), "stride", 1), _ints(dilation, len(HW), "dilation", 1)
  pads = _ints(padding, len(HW), "padding", 0, (1, 2))
  if groups * cin != cin_ or cout % groups:
    _err(ValueError, f"input {self.shape} does not match weight {weight.shape} with groups={groups}")
  if bias is not None and bias.shape != (cout,):
    _err(ValueError, f"bias {bias.shape} does not match the {cout} output channels of weight {weight.shape}")
  pads = [p for p in pads for _ in range(2)][::-1] if len(pads) == len(HW) else list(pads)
  x = (self.pad(pads) if any(pads) else self)._pool(HW, stride, dilation)   # (bs, groups*cin, *oyx, *HW)
  rcout, oyx = cout // groups, x.shape[2:-len(HW)]
  x = x.reshape(bs, groups, cin, 1, *oyx, *HW).expand(bs, groups, cin, rcout, *oyx, *HW)
  x = x.permute(0, 1, 3, *[4 + i for i in range(len(oyx))], 2, *[4 + len(oyx) + i for i in range(len(HW))])
  ret = (x * weight.reshape(1, groups, rcout, *[1] * len(oyx), cin, *HW)).sum([-1 - i for i in range(1 + len(oyx))], keepdim=True, dtype=dtype)
  ret = ret.reshape(bs, cout, *oyx)
  return ret if bias is None else ret.add(bias.reshape(1, -1, *[1] * len(HW)))

Tensor._pool, Tensor.conv2d = _pool, conv2d

# ---------------------------------------------------------------- provenance scopes
def _api(fn):
  """The outermost public Tensor call finds the user's line once; the ops it builds inside reuse it. (Walking the
  stack for every UOp materialises a Python frame object per level, ~4 us per op.)"""
  @functools.wraps(fn)
  def call(*args, **kw):
    if _scope.loc is not None: return fn(*args, **kw)
    _scope.loc = _walk_loc()
    try: return fn(*args, **kw)
    finally: _scope.loc = None
  return call

for _name, _v in list(Tensor.__dict__.items()):
  if _name.startswith("_") and not (_name.startswith("__") and _name not in ("__hash__", "__init_subclass__", "__class_getitem__")): continue
  if isinstance(_v, staticmethod): setattr(Tensor, _name, staticmethod(_api(_v.__func__)))
  elif isinstance(_v, classmethod): setattr(Tensor, _name, classmethod(_api(_v.__func__)))
  elif callable(_v) and not isinstance(_v, type): setattr(Tensor, _name, _api(_v))
