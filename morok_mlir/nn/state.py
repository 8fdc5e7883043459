"""Parameters and state dicts of a model (any object holding Tensors in attributes, lists, tuples and dicts),
safetensors files (written by the `safetensors` package's numpy API, read and checked here) and PyTorch checkpoints
(read without torch, by an unpickler that knows only what a state dict holds)."""
from __future__ import annotations
import collections, json, math, os, pickle, stat, zipfile
import numpy as np
from morok_mlir.core.dtype import dtypes
from morok_mlir.core.provenance import error as _err, user_loc
from morok_mlir.realize import new_buffer
from morok_mlir.tensor import Tensor

def get_state_dict(obj, prefix: str = "") -> dict[str, Tensor]:
  """Every Tensor reachable from obj, named by its path of attributes, indices and keys ("layers.0.weight")."""
  if isinstance(obj, Tensor): return {prefix.strip("."): obj}
  if hasattr(obj, "_asdict"): return get_state_dict(obj._asdict(), prefix)   # a namedtuple
  if isinstance(obj, (list, tuple)): items = enumerate(obj)
  elif isinstance(obj, dict): items = obj.items()
  elif hasattr(obj, "__dict__"): items = vars(obj).items()
  else: return {}
  return {k: v for key, x in items for k, v in get_state_dict(x, f"{prefix}{key}.").items()}

def get_parameters(obj) -> list[Tensor]:
  """The model's tensors, each once (in state-dict order)."""
  return list({id(t): t for t in get_state_dict(obj).values()}.values())

def load_state_dict(model, state_dict: dict[str, Tensor], strict: bool = True, realize: bool = True) -> None:
  """Assign each of the model's tensors its entry of state_dict (cast to its dtype, moved to its device), then realize
  them all in one call. strict: missing or unexpected keys raise (PyTorch's); a shape mismatch always raises."""
  mine = get_state_dict(model)
  if strict and (missing := [k for k in mine if k not in state_dict]) + (unexpected := [k for k in state_dict if k not in mine]):
    _err(RuntimeError, f"error loading state_dict: missing keys {missing}, unexpected keys {unexpected}")
  for k, v in mine.items():
    if (w := state_dict.get(k)) is None: continue
    if not isinstance(w, Tensor): w = Tensor(np.asarray(w))
    if w.shape != v.shape: _err(ValueError, f"shape mismatch in `{k}`: the model has {v.shape}, the state dict {w.shape}")
    v.assign(w.to(v.device).cast(v.dtype))
  if realize and mine: Tensor.realize(*mine.values())

def safe_save(tensors: dict[str, Tensor], fn: str, metadata: dict[str, str] | None = None) -> None:
  from safetensors.numpy import save_file
  save_file({k: np.ascontiguousarray(t.numpy()) for k, t in tensors.items()}, fn, metadata)

_SAFE_DTYPES = {"BOOL": dtypes.bool, "U8": dtypes.uint8, "I8": dtypes.int8, "U16": dtypes.uint16, "I16": dtypes.int16,
                "F16": dtypes.float16, "BF16": dtypes.bfloat16, "U32": dtypes.uint32, "I32": dtypes.int32, "F32": dtypes.float32,
                "U64": dtypes.uint64, "I64": dtypes.int64, "F64": dtypes.float64, "F8_E4M3": dtypes.fp8e4m3, "F8_E5M2": dtypes.fp8e5m2}
SAFE_MAX_HEADER = 100 << 20   # the safetensors library's own limit

def safe_load(fn) -> dict[str, Tensor]:
  """The tensors of a safetensors file, each read into memory of its own. The file is checked before anything is read
  or allocated: a regular file (reading a FIFO or a device could block or never end), a header inside the file and at
  most SAFE_MAX_HEADER bytes, entries of a known dtype whose shape's bytes are their data_offsets' span, spans inside the
  data and not overlapping; anything else raises ValueError."""
  if not stat.S_ISREG(os.stat(fn).st_mode): _err(ValueError, f"safe_load: {fn} is not a regular file")
  with os.fdopen(os.open(fn, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0)), "rb") as f:   # (no wait if it was swapped since)
    if not stat.S_ISREG((st := os.fstat(f.fileno())).st_mode): _err(ValueError, f"safe_load: {fn} is not a regular file")
    ret = {}
    for name, (dt, shape, begin, end) in _safe_header(f, st.st_size, fn).items():
      arr = np.empty(shape, dt.np)
      f.seek(begin)
      if f.readinto(arr.reshape(-1).view(np.uint8)) != end - begin: _err(ValueError, f"safe_load: {fn} changed while being read")
      if dt is dtypes.bool and (arr.view(np.uint8) > 1).any():
        _err(ValueError, f"safe_load: {fn}: bool tensor {name!r} holds bytes other than 0 and 1")
      ret[name] = Tensor(new_buffer(arr, user_loc()))   # the array is ours: no copy
    return ret

def _safe_header(f, size: int, fn) -> dict[str, tuple]:
  """name -> (dtype, shape, first byte, end byte in the file) of a safetensors file's entries, every one checked."""
  def bad(msg: str): _err(ValueError, f"safe_load: {fn} is not a valid safetensors file: {msg}")
  if size < 8: bad(f"{size} bytes is too short for the header's length")
  if (n := int.from_bytes(f.read(8), "little")) > min(size - 8, SAFE_MAX_HEADER):
    bad(f"its header is {n} bytes long, more than the file's {size - 8} or the limit of {SAFE_MAX_HEADER}")
  try: head = json.loads(f.read(n))
  except (ValueError, RecursionError) as e: bad(f"its header is not JSON ({type(e).__name__}: {e})")
  if not isinstance(head, dict) or not isinstance(head.pop("__metadata__", {}), dict): bad("its header is not a JSON object of entries")
  data, ret = size - 8 - n, {}
  for name, e in head.items():
    if not (isinstance(e, dict) and set(e) == {"dtype", "shape", "data_offsets"}): bad(f"entry {name!r} is not {{dtype, shape, data_offsets}}")
    if (dt := _SAFE_DTYPES.get(e["dtype"]) if isinstance(e["dtype"], str) else None) is None:
      bad(f"entry {name!r} has unsupported dtype {e['dtype']!r}")
    shape, offs = e["shape"], e["data_offsets"]
    if not (isinstance(shape, list) and all(type(d) is int and d >= 0 for d in shape)): bad(f"entry {name!r} has shape {shape!r}")
    if not (isinstance(offs, list) and len(offs) == 2 and all(type(o) is int for o in offs) and 0 <= offs[0] <= offs[1] <= data):
      bad(f"entry {name!r} has data_offsets {offs!r}, not a span inside the {data} bytes of data")
    if offs[1] - offs[0] != math.prod(shape) * dt.itemsize:
      bad(f"entry {name!r} of {e['dtype']} {shape} needs {math.prod(shape) * dt.itemsize} bytes, its data_offsets span {offs[1] - offs[0]}")
    ret[name] = dt, tuple(shape), 8 + n + offs[0], 8 + n + offs[1]
  spans = sorted((b, e, k) for k, (_, _, b, e) in ret.items() if e > b)
  for (_, e0, k0), (b1, _, k1) in zip(spans, spans[1:]):
    if b1 < e0: bad(f"the data of entries {k0!r} and {k1!r} overlap")
  return ret

_TORCH_STORAGES = {"FloatStorage": dtypes.float32, "DoubleStorage": dtypes.float64, "HalfStorage": dtypes.float16,
                   "BFloat16Storage": dtypes.bfloat16, "LongStorage": dtypes.int64, "IntStorage": dtypes.int32,
                   "ShortStorage": dtypes.int16, "CharStorage": dtypes.int8, "ByteStorage": dtypes.uint8, "BoolStorage": dtypes.bool,
                   "Float8_e4m3fnStorage": dtypes.fp8e4m3, "Float8_e5m2Storage": dtypes.fp8e5m2}

def torch_load(fn) -> dict:
  """The object of a PyTorch checkpoint (torch.save's zip format since PyTorch 1.6, or the format before it): a state dict
  (nested dicts, lists and tuples of Tensors, numbers and strings), its tensors in memory of their own. Nothing in the file
  can run code: the unpickler resolves only OrderedDict, the storage classes and torch._utils' _rebuild_tensor_v2 and
  _rebuild_parameter (a pickled module, or anything else, raises ValueError); storages are checked against the bytes the
  file holds, each tensor's offset, shape and strides against its storage, its dtype taken from the storage's class."""
  def bad(msg: str): _err(_TorchLoadError, f"torch_load: {fn}: {msg}")
  def rebuild(st, offset, shape, strides, *_) -> Tensor:
    if not (isinstance(st, np.ndarray) and all(type(x) is int and x >= 0 for x in (offset, *shape, *strides)) and len(shape) == len(strides)):
      bad(f"a tensor with offset {offset!r}, shape {shape!r}, strides {strides!r}")
    if math.prod(shape) and offset + sum((d - 1) * s for d, s in zip(shape, strides)) >= st.size:
      bad(f"a tensor of shape {tuple(shape)}, strides {tuple(strides)} at offset {offset} reads past its storage of {st.size}")
    arr = np.lib.stride_tricks.as_strided(st[offset:] if math.prod(shape) else st[:0], tuple(shape),
                                          tuple(s * st.itemsize for s in strides), writeable=False)
    return Tensor(new_buffer(np.array(arr, order="C"), user_loc()))   # the copy is ours
  storages: dict[str, np.ndarray] = {}
  def storage(key: str, dt, numel: int, read) -> np.ndarray:
    if key not in storages:
      raw = read(key, numel * dt.itemsize)
      arr = np.frombuffer(raw, f"u{dt.itemsize}")
      if dt is dtypes.bool and (arr > 1).any(): bad(f"bool storage {key!r} holds bytes other than 0 and 1")
      storages[key] = (arr.byteswap() if big else arr).view(dt.npdt)   # read only here: each tensor copies its part
    if storages[key].dtype != dt.npdt or storages[key].size != numel: bad(f"storage {key!r} is read as two dtypes or sizes")
    return storages[key]
  def load(f, storage=storage, rebuild=rebuild):
    return _torch_unpickle(f, lambda pid: storage(*_torch_pid(pid, bad)), rebuild, bad)
  if zipfile.is_zipfile(fn):
    with zipfile.ZipFile(fn) as z:
      if len(pkls := [n for n in z.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]) != 1: bad("no single <archive>/data.pkl")
      prefix = pkls[0][:-len("data.pkl")]
      big = f"{prefix}byteorder" in z.namelist() and z.read(f"{prefix}byteorder").strip() == b"big"
      def read(key: str, nbytes: int) -> bytes:
        try: info = z.getinfo(f"{prefix}data/{key}")
        except KeyError: bad(f"storage {key!r} is missing")
        if info.file_size != nbytes: bad(f"storage {key!r} holds {info.file_size} bytes, not {nbytes}")
        if len(raw := z.read(info)) != nbytes: bad(f"storage {key!r} is shorter than its zip entry says")
        return raw
      with z.open(pkls[0]) as f: return load(f, lambda *a: storage(*a, read))
  with open(fn, "rb") as f:   # before 1.6: pickles of a magic number, 1001, system info, the object, its storages' keys; the storages
    for want in (0x1950a86a20f9469cfc6c, 1001):
      if _torch_unpickle(f, None, None, bad) != want: bad("not a PyTorch checkpoint")
    if not isinstance(info := _torch_unpickle(f, None, None, bad), dict): bad("not a PyTorch checkpoint")
    big, start, sizes = info.get("little_endian") is False, f.tell(), {}
    load(f, lambda key, dt, numel: sizes.setdefault(key, (dt, numel)) and np.empty(0), lambda *a: None)   # a pass to find the storages
    if sorted(keys := _torch_unpickle(f, None, None, bad)) != sorted(sizes): bad(f"its storage keys {keys!r} are not the pickle's")
    end = os.fstat(f.fileno()).st_size
    for key in keys:
      dt, numel = sizes[key]
      if int.from_bytes(f.read(8), "little") != numel or numel * dt.itemsize > end - f.tell(): bad(f"storage {key!r} is not {numel} {dt}")
      storage(key, dt, numel, lambda _, n: f.read(n))
    f.seek(start)
    return load(f, lambda *a: storage(*a, None))

def _torch_pid(pid, bad) -> tuple:
  """(key, dtype, numel) of a storage's persistent id: ("storage", class, key, location, numel) and a view's None before 1.6."""
  if not (isinstance(pid, tuple) and len(pid) in (5, 6) and pid[0] == "storage" and isinstance(pid[1], _TorchStorage)
          and isinstance(pid[2], str) and type(pid[4]) is int and pid[4] >= 0 and pid[5:] in ((), (None,))): bad(f"unknown persistent id {pid!r}")
  return pid[2], pid[1].dtype, pid[4]

def _torch_unpickle(f, storage, rebuild, bad):
  """One pickle from f, its globals restricted to a state dict's (none at all without rebuild)."""
  globs = {} if rebuild is None else {("collections", "OrderedDict"): collections.OrderedDict, ("torch._utils", "_rebuild_tensor_v2"): rebuild,
           ("torch._utils", "_rebuild_parameter"): lambda t, *_: t, **{("torch", k): _TorchStorage(dt) for k, dt in _TORCH_STORAGES.items()}}
  class Unpickler(pickle.Unpickler):
    def find_class(self, module, name):
      if (g := globs.get((module, name))) is None: bad(f"it references {module}.{name}, which a state dict does not hold (refused)")
      return g
    def persistent_load(self, pid): return storage(pid) if storage else bad(f"unexpected persistent id {pid!r}")
  try: return Unpickler(f).load()
  except _TorchLoadError: raise
  except (pickle.UnpicklingError, EOFError, TypeError, AttributeError, IndexError, ValueError, KeyError) as e:
    bad(f"its pickle is broken ({type(e).__name__}: {e})")

class _TorchLoadError(ValueError): pass
class _TorchStorage:
  def __init__(self, dtype): self.dtype = dtype
