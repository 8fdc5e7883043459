"""Data types: tinygrad's names and promotion lattice, with their MLIR and numpy spellings."""
from __future__ import annotations
from dataclasses import dataclass
import ml_dtypes, numpy as np

@dataclass(frozen=True, eq=False)
class DType:
  """One instance per dtype (the attributes of `dtypes`), so equality is identity: fast, and hashable by id."""
  priority: int    # order in tinygrad's promotion lattice
  itemsize: int
  name: str
  np: type         # numpy scalar type
  mlir: str        # element type in the `uop` dialect (keeps signedness: ui8, i8, ...)
  def __post_init__(self): object.__setattr__(self, "npdt", np.dtype(self.np))   # the np.dtype, for identity checks
  def __repr__(self): return f"dtypes.{self.name}"
  @property
  def base(self) -> DType: return self   # the element type (of a pointer or vector: what it points to / holds)
  def ptr(self, size: int | None = None) -> PtrDType:
    """A buffer of `size` elements (MLIR memref<size x T>), or with size None an address of one (!uop.ptr<T>)."""
    if (p := _DERIVED.get(k := ("ptr", self, size))) is None: p = _DERIVED[k] = PtrDType(-1, self.itemsize, f"{self.name}*", self.np, self.mlir, self, size)
    return p
  def vec(self, n: int) -> VecDType:
    if (v := _DERIVED.get(k := ("vec", self, n))) is None: v = _DERIVED[k] = VecDType(-1, self.itemsize * n, f"{self.name}{n}", self.np, self.mlir, self, n)
    return v
  # the kind: plain attributes (every op asks), True on the dtypes of that kind (set below `dtypes`); pointers and vectors
  # are of no kind
  is_float = is_int = is_unsigned = is_bool = False
  @property
  def bits(self) -> int: return 1 if self.is_bool else self.itemsize * 8
  bitsize = bits   # tinygrad's name
  @property
  def signless(self) -> str:
    """The element type arith/memref use: MLIR's arith ops want signless integers."""
    return self.mlir.lstrip("u") if self.is_unsigned else self.mlir
  @property
  def finfo(self):
    """numpy's finfo of a float dtype (ml_dtypes' for bfloat16 and fp8, which numpy does not know)."""
    return ml_dtypes.finfo(self.np)
  @property
  def fbits(self) -> tuple[int, int]:
    """(exponent bits, significand bits with the implicit one) of a float dtype: what conversions between them keep."""
    return self.finfo.nexp, self.finfo.nmant + 1
  @property
  def min(self): return self.limits[0]
  @property
  def max(self): return self.limits[1]
  @property
  def limits(self) -> tuple:
    """(min, max), computed once per dtype (np.iinfo costs ~3 us a call; comparisons with Python ints ask it)."""
    if (v := self.__dict__.get("_limits")) is None:
      v = (-float("inf"), float("inf")) if self.is_float else (False, True) if self.is_bool else \
          (int((i := np.iinfo(self.np)).min), int(i.max))
      object.__setattr__(self, "_limits", v)
    return v

_DERIVED: dict[tuple, DType] = {}   # pointer and vector dtypes, one instance each

@dataclass(frozen=True, eq=False)
class PtrDType(DType):
  _base: DType = None
  size: int | None = None
  @property
  def base(self) -> DType: return self._base
  def __repr__(self): return f"{self._base!r}.ptr({'' if self.size is None else self.size})"

@dataclass(frozen=True, eq=False)
class VecDType(DType):
  _base: DType = None
  count: int = 1
  @property
  def base(self) -> DType: return self._base
  def __repr__(self): return f"{self._base!r}.vec({self.count})"

class dtypes:
  bool = DType(0, 1, "bool", np.bool_, "i1")
  int8 = DType(1, 1, "int8", np.int8, "i8")
  uint8 = DType(2, 1, "uint8", np.uint8, "ui8")
  int16 = DType(3, 2, "int16", np.int16, "i16")
  uint16 = DType(4, 2, "uint16", np.uint16, "ui16")
  int32 = DType(5, 4, "int32", np.int32, "i32")
  uint32 = DType(6, 4, "uint32", np.uint32, "ui32")
  int64 = DType(7, 8, "int64", np.int64, "i64")
  uint64 = DType(8, 8, "uint64", np.uint64, "ui64")
  # OCP fp8 (PyTorch's float8_e4m3fn and float8_e5m2): e4m3 has no infinity (0x7f is NaN, 448 its largest), e5m2 is
  # IEEE-like (57344, inf); numpy interop through ml_dtypes' types of the same bits
  fp8e4m3 = DType(9, 1, "fp8e4m3", ml_dtypes.float8_e4m3fn, "f8E4M3FN")
  fp8e5m2 = DType(10, 1, "fp8e5m2", ml_dtypes.float8_e5m2, "f8E5M2")
  float16 = DType(11, 2, "float16", np.float16, "f16")
  bfloat16 = DType(12, 2, "bfloat16", ml_dtypes.bfloat16, "bf16")   # numpy interop through ml_dtypes, as JAX's
  float32 = DType(13, 4, "float32", np.float32, "f32")
  float64 = DType(14, 8, "float64", np.float64, "f64")
  index = DType(-1, 8, "index", np.int64, "index")  # loop counters and addresses inside kernels
  void = DType(-1, 0, "void", np.void, "none")      # no value: the ordering token of stores, kernels and sinks
  # aliases (tinygrad/PyTorch spellings)
  half, float, double, int, long, char, uchar, short, ushort = float16, float32, float64, int32, int64, int8, uint8, int16, uint16
  bf16 = bfloat16
  float8_e4m3fn, float8_e5m2 = fp8e4m3, fp8e5m2
  default_float = float32
  default_int = int32
  sints = (int8, int16, int32, int64)
  uints = (uint8, uint16, uint32, uint64)
  ints = sints + uints
  fp8s = (fp8e4m3, fp8e5m2)
  floats = fp8s + (float16, bfloat16, float32, float64)
  all = (bool,) + ints + floats

  @staticmethod
  def max(dt) -> int | float | bool:
    """The largest value of a dtype (tinygrad's dtypes.max; inf for floats)."""
    return to_dtype(dt).max
  @staticmethod
  def min(dt) -> int | float | bool:
    """The smallest value of a dtype (tinygrad's dtypes.min; -inf for floats)."""
    return to_dtype(dt).min
  @staticmethod
  def from_np(t) -> DType:
    """The dtype of a numpy dtype, by kind and size: np.longlong is int64 and '>f4' is float32 (new_buffer makes the
    bytes native). Complex, object, str, datetime, structured and longdouble are not supported. ml_dtypes' bfloat16
    and fp8 types have numpy kind 'V' (raw voids): each is known by the dtype itself, in either byte order."""
    t = np.dtype(t)
    if (d := _NP.get(t.newbyteorder("=") if t.kind == "V" else (t.kind, t.itemsize))) is None or t.fields is not None or t.shape:
      raise TypeError(f"unsupported numpy dtype {t} (supported: {', '.join(d.name for d in dtypes.all)})")
    return d
  @staticmethod
  def from_mlir(s: str) -> DType:
    for d in dtypes.all + (dtypes.index,):
      if d.mlir == s: return d
    raise TypeError(f"unsupported element type {s}")
  @staticmethod
  def from_py(x) -> DType:
    if isinstance(x, (bool, np.bool_)): return dtypes.bool
    if isinstance(x, (int, np.integer)): return dtypes.default_int if not isinstance(x, np.integer) else dtypes.from_np(type(x))
    if isinstance(x, (ml_dtypes.bfloat16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2)): return dtypes.from_np(type(x))
    if isinstance(x, (float, np.floating)): return dtypes.default_float if not isinstance(x, np.floating) else dtypes.from_np(type(x))
    raise TypeError(f"cannot infer a dtype for {type(x).__name__}")

for _d in dtypes.all:
  for _k, _of in (("is_float", dtypes.floats), ("is_int", dtypes.ints), ("is_unsigned", dtypes.uints), ("is_bool", (dtypes.bool,))):
    if _d in _of: object.__setattr__(_d, _k, True)

_NP = {d.npdt if d.npdt.kind == "V" else (d.npdt.kind, d.itemsize): d for d in dtypes.all}

# tinygrad's promotion lattice: the least upper bound of two dtypes
_parents = {dtypes.bool: (dtypes.int8, dtypes.uint8), dtypes.int8: (dtypes.int16,), dtypes.uint8: (dtypes.int16, dtypes.uint16),
            dtypes.int16: (dtypes.int32,), dtypes.uint16: (dtypes.int32, dtypes.uint32), dtypes.int32: (dtypes.int64,),
            dtypes.uint32: (dtypes.int64, dtypes.uint64), dtypes.int64: (dtypes.float16, dtypes.bfloat16),
            dtypes.uint64: (dtypes.float16, dtypes.bfloat16), dtypes.float16: (dtypes.float32,), dtypes.bfloat16: (dtypes.float32,),
            dtypes.float32: (dtypes.float64,), dtypes.float64: (), dtypes.fp8e4m3: (dtypes.float16, dtypes.bfloat16),
            dtypes.fp8e5m2: (dtypes.float16, dtypes.bfloat16)}
# tinygrad puts the fp8s between the 64-bit ints and float16/bfloat16 (an int with an fp8 is the fp8); an fp8 is the
# answer only where an operand is one, so int64 with uint64 stays float16 (tinygrad's lattice would give fp8e4m3)
for _d in (dtypes.int64, dtypes.uint64): _parents[_d] += dtypes.fp8s

def _ancestors(d: DType) -> frozenset[DType]:
  return frozenset({d}).union(*(_ancestors(p) for p in _parents[d]))
_ANCESTORS = {d: _ancestors(d) for d in _parents}

_LUB: dict[tuple[DType, ...], DType] = {}
def least_upper_dtype(*ds: DType) -> DType:
  if (r := _LUB.get(ds)) is None:   # every op of the Tensor API asks: remember the answer
    r = _LUB[ds] = min(frozenset.intersection(*(_ANCESTORS[d] for d in ds)), key=lambda d: (d in dtypes.fp8s and d not in ds, d.priority))
  return r

def to_dtype(x) -> DType:
  if isinstance(x, DType): return x
  if isinstance(x, str): return getattr(dtypes, x)
  return dtypes.from_np(x)
