"""uop-lower-cpu: each kernel as CPU code, the phases of the template uop-optimize chose for it (a contraction, a
Winograd convolution, a split reduce, vector lanes) or one function (lower_cpu.lower_kernel); @schedule as the calls
of those phases in order."""
from __future__ import annotations
from morok_mlir.ir.bridge import Func, import_module, replace_module_body
from morok_mlir.dialects.ops import Ops
from morok_mlir.core import index_math as im
from morok_mlir.ir.registry import register, PassError
from morok_mlir.codegen.lower_cpu import _int_attr, lower_kernel, mem_type, parallel_info
from morok_mlir.codegen.lanes import LaneLowerer, LaneReduce, lane_split, reduce_lane_split, row_lanes
from morok_mlir.codegen.contraction import Contraction
from morok_mlir.codegen.int8 import Int8Contraction
from morok_mlir.codegen.split_reduce import SplitReduce
from morok_mlir.codegen.winograd import Winograd, direct
from morok_mlir.codegen.emitter import Block, Emitter, arg, params
from morok_mlir.codegen.placement import kernel_calls

# choices made for static loop sizes (a contraction's and lanes' run to symbolic sizes too)
STATIC_ONLY = ("uop.int8", "uop.winograd", "uop.split_reduce", "uop.nontemporal")

def lower_program(f: Func, name: str) -> tuple[str, list[tuple[str, tuple | None]], list[int], list[tuple[int, int, int, tuple]]]:
  """A kernel as device code: (module body text, [(entry, parallel info)] run in order, scratch f32 buffer sizes,
  [(phase, argument, scratch, keys)] phases whose result depends on one argument alone, and on the contents of the small
  arguments keys: the symbolic sizes' values). A loop may run to a symbolic size
  (its end read at run time) only in a kernel without the choices in STATIC_ONLY."""
  if (k := next((a for a in STATIC_ONLY if a in f.attrs), None)) and f.roots and any(
      u.op is Ops.RANGE and im.cval(u.src[0]) is None for u in f.roots[0].toposort):
    raise PassError(f"@{f.name}: {k} needs static range sizes (a loop here runs to a symbolic size)")
  if "uop.winograd" in f.attrs:
    try: return (c := Winograd(f, name)).text(), c.phases(), c.scratch, c.reuse()
    except NotImplementedError: f = direct(f)   # an image its lanes cannot read (a flipped or channels-last one)
  if "uop.int8" in f.attrs: return (c := Int8Contraction(f, name)).text(), c.phases(), c.scratch, c.reuse()
  if "uop.contraction" in f.attrs: return (c := Contraction(f, name)).text(), c.phases(), c.scratch, c.reuse()
  if "uop.split_reduce" in f.attrs: return (c := SplitReduce(f, name)).text(), c.phases(), c.scratch, []
  if "uop.reduce_lanes" in f.attrs and (ls := reduce_lane_split(f, w := _int_attr(f, "uop.reduce_lanes"))) is not None:
    return (c := LaneReduce(f, name, w, *ls)).text(), c.phases(), c.scratch, []
  if "uop.row_lanes" in f.attrs and (ls := row_lanes(f, _int_attr(f, "uop.row_lanes"))) is not None:
    return lower_kernel(ls[0], name, LaneLowerer(*ls)), [(name, parallel_info(ls[0]))], [], []
  if "uop.lanes" in f.attrs and (ls := lane_split(f, _int_attr(f, "uop.lanes"))) is not None:
    return lower_kernel(ls[0], name, LaneLowerer(*ls)), [(name, parallel_info(ls[0]))], [], []
  return lower_kernel(f, name), [(name, parallel_info(f))], [], []

def lower_schedule(f: Func, kernels: dict[str, Func], progs: dict[str, tuple] | None = None) -> str:
  """@schedule -> func.call of each kernel's phases (see lower_program) in order."""
  progs = progs or {n: ([(n, parallel_info(k))], []) for n, k in kernels.items()}
  em, b = Emitter("s"), Block()
  for callee, slots in kernel_calls(f, kernels):
    k, (phases, scratch) = kernels[callee], progs[callee]
    # a contraction's packed operands and tile buffer, for this call only
    tys, ops = [mem_type(t.dtype) for t in k.args] + [f"memref<{n}xf32>" for n in scratch], [arg(s) for s in slots]
    ops += [em.alloca(b, t, heap=True) for t in tys[len(k.args):]]
    for entry, par in phases:
      pt, po = tys, ops
      if par is not None:  # the whole outer loop in one call (as chunk 0, for phases that take the chunk index)
        lo, hi = em.const(b, 0), em.const(b, par[0])
        bounds = [lo, hi] + [lo] * (len(par) > 3 and par[3])
        pt, po = tys + ["index"] * len(bounds), ops + bounds
      em.call(b, entry, po, pt)
    for o, t in zip(ops[len(k.args):], tys[len(k.args):]): em.dealloc(b, o, t)
  return Emitter.func(f.name, params([mem_type(t.dtype) for t in f.args]), b)

def lower_module(funcs: list[Func]) -> str:
  kernels = {f.name: f for f in funcs if "uop.kernel" in f.attrs}
  out, progs = [], {}
  for f in funcs:
    if f.name in kernels:
      text, phases, scratch, _ = lower_program(f, f.name)
      out.append(text); progs[f.name] = (phases, scratch)
  for f in funcs:
    if f.name in kernels: continue
    elif "uop.schedule" in f.attrs: out.append(lower_schedule(f, kernels, progs))
    else: raise PassError(f"@{f.name} is neither a kernel (uop.kernel) nor the schedule (uop.schedule): run uop-kernel-split first")
  return Emitter.module(out)

@register("uop-lower-cpu", "Kernels -> func.func with scf.for, memref, arith, math; @schedule -> func.call of the kernels", on_uops=False)
def uop_lower_cpu(module_op):
  replace_module_body(module_op, lower_module(import_module(module_op)))
