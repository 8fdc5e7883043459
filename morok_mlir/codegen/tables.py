"""The per-op tables the lowerings share: each op's MLIR op by dtype class (ALU, CMP, CASTS), the storage dtypes that
compute in a wider one (COMPUTE), what no lowering supports yet, and the register and memory types of a dtype. The ops
that take more than one MLIR op are rules (lower_cpu.RULES, lower_gpu.GPU_RULES, lanes.VRULES) built on these."""
from __future__ import annotations
from morok_mlir.core.dtype import DType, PtrDType, dtypes
from morok_mlir.ir.registry import PassError

# dtype class: f(loat) s(igned int, and index) u(nsigned) b(ool)
def cls(dt: DType) -> str: return "f" if dt.is_float else "u" if dt.is_unsigned else "b" if dt.is_bool else "s"

F, S, U, B = "fsub"
def _t(f=None, s=None, u=None, b=None): return {k: v for k, v in zip("fsub", (f, s, u, b)) if v}
ALU = {  # op -> dtype class -> MLIR op taking (a, b[, c]) of one type
  "add": _t("arith.addf", "arith.addi", "arith.addi", "arith.ori"), "sub": _t("arith.subf", "arith.subi", "arith.subi", "arith.xori"),
  "mul": _t("arith.mulf", "arith.muli", "arith.muli", "arith.andi"), "fdiv": _t("arith.divf"),
  "idiv": _t(None, "arith.divsi", "arith.divui"), "mod": _t("arith.remf", "arith.remsi", "arith.remui"),
  "max": _t("arith.maximumf", "arith.maxsi", "arith.maxui", "arith.ori"), "min": _t("arith.minimumf", "arith.minsi", "arith.minui", "arith.andi"),
  "and": _t(None, "arith.andi", "arith.andi", "arith.andi"), "or": _t(None, "arith.ori", "arith.ori", "arith.ori"),
  "xor": _t(None, "arith.xori", "arith.xori", "arith.xori"), "shl": _t(None, "arith.shli", "arith.shli"),
  "shr": _t(None, "arith.shrsi", "arith.shrui"), "pow": _t("math.powf"),
  "sqrt": _t("math.sqrt"), "exp2": _t("math.exp2"), "log2": _t("math.log2"), "sin": _t("math.sin"), "trunc": _t("math.trunc"),
  "mulacc": _t("math.fma"),
}
CMP = {"cmplt": _t("arith.cmpf olt", "arith.cmpi slt", "arith.cmpi ult", "arith.cmpi ult"),
       "cmpeq": _t("arith.cmpf oeq", "arith.cmpi eq", "arith.cmpi eq", "arith.cmpi eq"),
       "cmpne": _t("arith.cmpf une", "arith.cmpi ne", "arith.cmpi ne", "arith.cmpi ne")}
# (source class, destination class) -> cast op; None: decided by width below
CASTS = {(F, S): "fptosi", (F, U): "fptoui", (S, F): "sitofp", (U, F): "uitofp", (B, F): "uitofp", (B, S): "extui", (B, U): "extui"}
def cast_op(s: DType, d: DType) -> str:
  """The arith cast between two numeric register types (neither bool, index nor a COMPUTE storage type): by class, else
  by width within one class (integer widening follows the source's signedness)."""
  cs, cd = cls(s), cls(d)
  if (mop := CASTS.get((cs, cd))) is not None: return mop
  if cs == F: return "extf" if d.bits > s.bits else "truncf"
  return ("extui" if cs == U else "extsi") if d.bits > s.bits else "trunci"
UNSUPPORTED = {"bufferize": "a bufferize left in a kernel (run uop-kernel-split first)", "special": "GPU ids", "wmma": "tensor cores",
               "vectorize": "vectors", "gep": "vectors", "if": "if blocks", "endif": "if blocks", "barrier": "barriers",
               "define_var": "symbolic sizes", "bind": "symbolic sizes", "threefry": "threefry (decompose it first)"}

def mem_type(dt: DType) -> str:
  """The memref type of a buffer in memory: signless, bool as bytes."""
  if not isinstance(dt, PtrDType) or dt.size is None: raise PassError(f"kernel arguments must be flat static memrefs, got {dt}")
  return f"memref<{dt.size}x{'i8' if dt.base.is_bool else dt.base.signless}>"

def sl(dt: DType) -> str: return dt.signless  # register type (index stays index, bool i1)

# storage dtype -> the dtype its ops compute in (LLVM has no bf16 arithmetic on most targets; where it has, it flushes
# subnormals or rounds per target, so bf16 is widened here, computed, and rounded back by lower_cpu.Bf16; fp8 likewise)
COMPUTE = {dtypes.bfloat16: dtypes.float32, dtypes.fp8e4m3: dtypes.float32, dtypes.fp8e5m2: dtypes.float32}
