"""The lazy Tensor API (tinygrad/PyTorch names and semantics). Each op builds hash-consed graph-level UOps; nothing runs
until realize()/numpy(). Derived ops are written with the primitive ops of the `uop` dialect, as tinygrad does."""
from __future__ import annotations
import functools, math, sys
from typing import Any
import numpy as np
from morok_mlir.core.dtype import DType, dtypes
from morok_mlir.core.uop import UOp, SHAPE_ATTR, SYM_ATTR, attrs, split_sym, sym_val
from morok_mlir.dialects.ops import Ops
from morok_mlir.core.mixin import OpMixin, BINARY_OPS, _argfix, _bshape, _cv, _dtype, _prod, _shape, _err
from morok_mlir.core.provenance import scope as _scope, user_loc as _loc
from morok_mlir.ir.emit import buffer_data
from morok_mlir.realize import new_buffer, realize as _realize

_KNOWN_DEVICES: dict = {}  # name as given -> canonical name, for names already checked
def _device(name) -> str:
  """A device name in canonical form (Device.DEFAULT for None); unknown names raise at the user's line."""
  if type(name) is str and (dev := _KNOWN_DEVICES.get(name)) is not None: return dev
  from morok_mlir.device import Device
  if name is None: return Device.DEFAULT  # not remembered: the default may change (Device.DEFAULT = ...)
  if not isinstance(name, str): _err(TypeError, f"a device is a name such as 'CPU', got {type(name).__name__}")
  try: Device[name]
  except KeyError as e: _err(ValueError, str(e.args[0]))
  dev = _KNOWN_DEVICES[name] = Device.canonicalize(name)
  return dev


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

def _is_data(u: UOp) -> bool: return u.op is Ops.BUFFER or (u.op is Ops.RESHAPE and u.src[0].op is Ops.BUFFER)



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


_rng = np.random.default_rng(0)

# ---------------------------------------------------------------- Tensor
class Tensor(OpMixin):
  """A lazy tensor: its graph UOp, its device. The op methods (elementwise, movement, reductions) are OpMixin's,
  shared with UOp; what is Tensor's own is here: data, devices, realization, creation and the user's line."""
  __slots__ = ("uop", "device", "requires_grad")
  __hash__ = object.__hash__  # == is elementwise
  training = False   # dropout (and attention's dropout_p) act only while True, as tinygrad's Tensor.training

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
  def lazydata(self) -> UOp: return self.uop
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
        if out.size != sym_val(u.size) or out.dtype != u.dtype: raise RuntimeError(f"{u.loc}: realize returned {out} for {u.shape} {u.dtype}")
        b = new_buffer(out, u.loc, shape=tuple(sym_val(d) for d in u.shape))  # keeps the provenance of what computed it
        for t in ts: t.uop = b
    return self
  def numpy(self) -> np.ndarray:
    u = self.realize().uop
    return buffer_data(u if u.op is Ops.BUFFER else u.src[0]).copyout().reshape(self.shape)
  def item(self):
    if self.numel() != 1: _err(ValueError, f"item() needs a tensor with one element, got shape {self.shape}")
    return self.numpy().item()
  def tolist(self): return self.numpy().tolist()
  def data(self) -> np.ndarray: return self.numpy()

  # ---- graph building (OpMixin's primitives)
  @property
  def _node(self) -> UOp: return self.uop
  def _const(self, value, dtype: DType | None = None) -> Tensor: return Tensor(value, dtype, device=self.device)
  def _op(self, _op: Ops, shape: tuple[int, ...], dtype: DType | None = None, src: tuple[Tensor, ...] = (), **kw) -> Tensor:
    if src and any(s.device != self.device for s in src):
      _err(RuntimeError, f"expected all tensors on one device, got {', '.join(sorted({self.device, *(s.device for s in src)}))}")
    t = object.__new__(Tensor)   # __init__'s checks hold by construction here
    if _op in SHAPE_ATTR: kw["shape"] = tuple(shape)   # the others' shapes follow from their sources
    dyn = ()   # symbolic sizes are sources after the tensor operand (see uop.SYM_ATTR)
    if (name := SYM_ATTR.get(_op)) is not None: kw[name], dyn = split_sym(kw[name])
    t.uop = UOp(_op, dtype or self.dtype, (self.uop,) + tuple(s.uop for s in src) + dyn, attrs(**kw) if kw else (), _loc())
    t.device, t.requires_grad = self.device, None
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
  @staticmethod
  def linspace(start, stop, steps: int, dtype=None, **kw) -> Tensor:
    """steps values from start to stop, both included (PyTorch's linspace; float unless dtype says otherwise)."""
    if not isinstance(steps, (int, np.integer)) or isinstance(steps, bool) or steps < 0: _err(ValueError, f"linspace: steps must be an int >= 0, got {steps!r}")
    if not all(isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) and math.isfinite(x) for x in (start, stop)):
      _err(TypeError, f"linspace takes finite int or float bounds, got ({start!r}, {stop!r})")
    return Tensor(np.linspace(start, stop, int(steps), dtype=np.float64), _dtype(dtype) if dtype else dtypes.default_float, **kw)
  @staticmethod
  def normal(*shape, mean=0.0, std=1.0, dtype=None, **kw) -> Tensor:
    return Tensor(np.asarray(_rng.normal(mean, std, _shape(_argfix(*shape)))), dtype or dtypes.default_float, **kw)
  @staticmethod
  def randperm(n: int, dtype=dtypes.int32, **kw) -> Tensor:
    """A random permutation of 0..n-1 (from the seeded generator of manual_seed)."""
    n, = _shape((n,), "randperm size")
    return Tensor(_rng.permutation(n), _dtype(dtype), **kw)
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
    generator of manual_seed: the weights are realized and sampled on the host (threefry on the device comes later)."""
    if self.ndim not in (1, 2): _err(ValueError, f"multinomial needs a 1-d or 2-d tensor of weights, got {self.shape}")
    if not isinstance(num_samples, (int, np.integer)) or isinstance(num_samples, bool) or num_samples <= 0:
      _err(ValueError, f"multinomial: cannot sample {num_samples!r} samples (a positive int)")
    if self.ndim == 2 and self.shape[0] == 0: return Tensor(np.zeros((0, num_samples), np.int32), device=self.device)   # no rows
    w = self.cast(dtypes.float64).numpy().reshape(-1, self.shape[-1])
    if (w < 0).any() or not np.isfinite(w).all() or (w.sum(1) <= 0).any(): _err(ValueError, "multinomial: weights must be finite, >= 0, and not all 0")
    if not replacement and num_samples > (w > 0).sum(1).min(): _err(ValueError, f"multinomial: cannot draw {num_samples} samples without replacement")
    out = np.stack([_rng.choice(w.shape[1], num_samples, replace=replacement, p=r / r.sum()) for r in w]).astype(np.int32)
    return Tensor(out.reshape(self.shape[:-1] + (num_samples,)), device=self.device)

  # ---- devices
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
    idx = m * Tensor.arange(n, 0, -1).reshape((n,) + (1,) * (self.ndim - a - 1))
    return (n - idx.max(a, keepdim=keepdim)).cast(dtypes.int32)
  def argmin(self, axis=None, keepdim=False) -> Tensor:
    return (-self if self.dtype.is_float else ~self).argmax(axis, keepdim)  # ~ reverses the order of ints and bools

  # ---- indexing with tensors (data-dependent: Tensor only)
  def __getitem__(self, idx) -> Tensor:
    """numpy indexing: basic indices (ints, slices, None, ...; OpMixin's) with at most one integer array index (a
    Tensor, list or numpy array, negative entries counting from the end), read through gather: O(result). An array index
    outside the dim gives 0 (numpy raises, but the indices are data: they are not read here). A bool mask index selects
    (masked_select's rules), which realizes the mask: the result's shape depends on its data."""
    tup = idx if isinstance(idx, tuple) else (idx,)
    adv = [k for k, i in enumerate(tup) if isinstance(i, (Tensor, list, np.ndarray))]
    if not adv: return OpMixin.__getitem__(self, idx)
    if len(adv) > 1: _err(IndexError, "only one tensor, list or array index is supported (with any basic indices)")
    k, t = adv[0], tup[adv[0]]
    if not isinstance(t, Tensor): t = Tensor(t if np.size(t) else np.zeros(np.shape(t), np.int64), device=self.device)   # [] indexes nothing
    if t.dtype.is_bool:
      if len(tup) != 1: _err(IndexError, "a bool mask index must be the only index")
      return self.masked_select(t)
    if not t.dtype.is_int: _err(IndexError, f"tensors used as indices must be integer or bool, got {t.dtype}")
    # the dim the array index takes, after the basic indices before it (None adds a dim, an int removes one)
    pos = sum(1 for i in tup[:k] if i is not None and i is not Ellipsis) if Ellipsis not in tup[:k] else \
          self.ndim - sum(1 for i in tup[k + 1:] if i is not None and i is not Ellipsis) - 1
    x = OpMixin.__getitem__(self, tup[:k] + (slice(None),) + tup[k + 1:])   # basic indices first; dim `pos` kept whole
    d = pos - sum(1 for i in tup[:k] if isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_))) + \
        sum(1 for i in tup[:k] if i is None)
    n, flat = x.shape[d], t.reshape(-1)
    flat = flat.lt(0).where(flat + n, flat)
    ix = flat.reshape((1,) * d + (flat.shape[0],) + (1,) * (x.ndim - d - 1)).expand(x.shape[:d] + flat.shape + x.shape[d + 1:])
    ret = x.gather(d, ix).reshape(x.shape[:d] + t.shape + x.shape[d + 1:])
    # numpy: with an int index apart from the array index (a slice, None or ... between), both are advanced and the
    # result's indexed dims come first
    ints = [j for j, i in enumerate(tup) if isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_))] + [k]
    if max(ints) - min(ints) + 1 == len(ints) or d == 0: return ret
    return ret.permute(*range(d, d + t.ndim), *range(d), *range(d + t.ndim, ret.ndim))
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
    return Tensor.arange(n, dtype=dtypes.int32, device=self.device)
  def allclose(self, other, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> bool:
    """isclose everywhere, as a Python bool (it realizes)."""
    return bool(self.isclose(other, rtol, atol, equal_nan).all().item())

# in-place operators rebind the tensor, as in tinygrad
for _name, _fn in BINARY_OPS.items(): setattr(Tensor, f"__i{_name}__", lambda self, x, f=_fn: self.assign(f(self, x)))

# ---------------------------------------------------------------- provenance scopes
def _api(fn):
  """The outermost public Tensor call finds the user's line once; the ops it builds inside reuse it. (Walking the
  stack for every UOp materialises a Python frame object per level, ~4 us per op.)"""
  @functools.wraps(fn)
  def call(*args, **kw):
    if _scope.frame is not None: return fn(*args, **kw)
    _scope.frame = sys._getframe(1)
    try: return fn(*args, **kw)
    finally: _scope.frame = _scope.loc = None
  return call

for _name, _v in list({k: v for c in reversed(Tensor.__mro__[:-1]) for k, v in vars(c).items()}.items()):   # OpMixin's too
  if _name.startswith("_") and not (_name.startswith("__") and _name not in ("__hash__", "__init_subclass__", "__class_getitem__")): continue
  if isinstance(_v, staticmethod): setattr(Tensor, _name, staticmethod(_api(_v.__func__)))
  elif isinstance(_v, classmethod): setattr(Tensor, _name, classmethod(_api(_v.__func__)))
  elif callable(_v) and not isinstance(_v, type): setattr(Tensor, _name, _api(_v))
