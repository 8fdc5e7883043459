"""Run uop-lower-gpu's kernels on the CPU: every GPU thread becomes one iteration of a host loop.

What it is for: testing the GPU lowering's index math (flat global ids, tail guards, upcast lanes, GROUP strides over
reduce ranges) against numpy on machines without a GPU. The kernels are lowered by uop-lower-gpu itself with the policy
`Emulated`: the same placement, index math and op table, with a thread's ids computed from its number, the kernel
function's last argument (thread = i % local, block = i // local, global = i), and each launch a loop over its threads
calling the kernel; a GROUP or ROW block is one call that runs its threads in turn (Emulated), their parts of a
reduce combined through an array as the GPU's shared memory combines them.

  emulate(outs) -> [np.ndarray]   realize graph-level UOps through uop-lower-gpu, on the CPU
  kernel_program(spec) -> CPUProgram
                                  one CUDA kernel (its ProgramSpec) as a CPU program on the same buffer pointers,
                                  running every thread of its launch: what a fake CUDA driver launches (a tiled
                                  contraction's kernel: its text run by device.simt, shared memory and all)"""
from __future__ import annotations
from math import prod
import numpy as np
from morok_mlir.ir.bridge import Func
from morok_mlir.ir.emit import normalize, graph_func
from morok_mlir.ir.pipeline import lower_to_kernels
from morok_mlir import passes as _passes   # noqa: F401 (registers the passes lower_to_kernels runs)
from morok_mlir.core.dtype import DType, dtypes
from morok_mlir.core.uop import UOp, sym_val
from morok_mlir.codegen.emitter import THREAD, Block, Emitter, arg, params
from morok_mlir.codegen.tables import mem_type, sl
from morok_mlir.codegen.placement import Frame, Placement
from morok_mlir.codegen.lower_gpu import GPU, Launch, lower_kernel, lower_module
from morok_mlir.device.cpu import CPUCompiler, CPUProgram, ProgramSpec, _arg


class Emulated(GPU):
  """uop-lower-gpu's policy for a CPU: a kernel is a func.func of (buffers..., thread number), its ids arithmetic on that
  number; a launch is a loop over its threads calling it. A GROUP (or ROW) block is one call, thread 0's, that runs the
  block's threads in turn between the points where they meet (MCUDA's thread loops): each thread's part of a reduce,
  the same strided loop as on the GPU, goes to a shared array, then the parts combine in a tree (the GPU's shuffles and
  shared memory pair them in another order: sums may differ in rounding)."""
  def gpu_id(self, lw: Placement, kind: str) -> str:
    if kind == "global_id": return THREAD
    return lw.em.arith(lw.root, "remui" if kind == "thread_id" else "divui", "index", THREAD, lw.const(self.local, dtypes.index))
  def threads(self, lw: Placement, fr: Frame, body) -> None:
    c = lambda v: lw.const(v, dtypes.index)
    with lw.em.for_(fr, c(0), c(self.local), c(1)) as lp: body(lp.body, lp.iv)
  def combine(self, lw: Placement, fr: Frame, u: UOp, dt: DType, part) -> str:
    c, em, mt = (lambda v: lw.const(v, dtypes.index)), lw.em, f"memref<{self.local}x{sl(dt)}>"
    sh = em.alloca(lw.root, mt)
    self.threads(lw, fr, lambda b, tid: em.store(b, part(b, tid), sh, tid, mt))
    for half in (self.local >> k for k in range(1, self.local.bit_length())):   # local is a power of 2
      step = Frame(fr); step.chain = fr.chain
      with em.for_(fr, c(0), c(half), c(1)) as lp:
        step.lines = lp.body.lines
        a, b = em.load(step, sh, lp.iv, mt), em.load(step, sh, em.arith(step, "addi", "index", lp.iv, c(half)), mt)
        em.store(step, lw.scalar_alu(u.attrs["op"], dt, [a, b], dt, step, u), sh, lp.iv, mt)
    return em.load(fr, sh, c(0), mt)
  def func(self, lw: Placement, name: str, private: bool = False) -> str:
    return Emitter.func(name, params([mem_type(t.dtype) for t in lw.f.args], THREAD), lw.root)
  @staticmethod
  def launch_call(em: Emitter, b: Block, launch: Launch, args: list[str], tys: list[str], c) -> None:
    step = prod(launch.local_size) if launch.group else 1   # a GROUP block: one call, its thread 0's
    with em.for_(b, c(0), c(prod(launch.global_size) * prod(launch.local_size)), c(step)) as lp:
      em.call(lp.body, launch.name, args + [lp.iv], tys + ["index"])
  @staticmethod
  def alloc(em: Emitter, b: Block, mt: str) -> str: return em.alloca(b, mt, heap=True)
  @staticmethod
  def free(em: Emitter, b: Block, x: str, mt: str) -> None: em.dealloc(b, x, mt)
  @staticmethod
  def module(kernels: list[str], host: list[str]) -> str: return Emitter.module(kernels + host)

def emulate(outs: list[UOp]) -> list[np.ndarray]:
  """Graph-level UOps computed by the GPU lowering, run on the CPU (see the module docstring). Symbolic sizes' values
  go in as the schedule's int64 input. Outputs and intermediates start as 0xFF bytes (NaN, -1), so an element no thread
  stored shows; a symbolic output is a view of the first elements of its buffer (laid out for the largest values), whose
  `.base` is the whole buffer: the elements past the values' must keep their fill."""
  key, inputs, vals = normalize(outs)
  funcs = lower_to_kernels(graph_func(key))
  sched = next(f for f in funcs if f.name == "schedule")
  args = tuple(_arg(t) for t in sched.args)
  prog = CPUProgram(CPUCompiler().compile(ProgramSpec("schedule", lower_module(funcs, policy=Emulated), args, ())))
  bufs = [u.buffer.numpy() for u in inputs] + ([np.array(vals, np.int64)] if vals else [])
  n_in = len(bufs)
  for size, dt in args[n_in:]: (b := np.empty(size, dt.np)).view(np.uint8).fill(0xFF); bufs.append(b)
  prog.call_ptrs(*[b.ctypes.data for b in bufs])
  shapes = [tuple(sym_val(d) for d in o.shape) for o in outs]
  return [bufs[n_in + i][:prod(s)].reshape(s) for i, s in enumerate(shapes)]

def kernel_program(spec) -> CPUProgram:
  """A CUDA ProgramSpec's kernel (its func, lowered again with the policy Emulated) run on the CPU over every thread of
  its launch; call it with call_ptrs(*buffer addresses)."""
  if spec.func is None: raise ValueError(f"kernel {spec.name}: its ProgramSpec carries no kernel func (CUDARenderer.render makes one that does)")
  if spec.tiled:   # shared memory, barriers, cp.async, mma.sync: its own text, run thread by thread
    from morok_mlir.device.simt import Program
    return Program(spec)
  text, launch = lower_kernel(spec.func, spec.name, policy=Emulated)
  em, b, consts = Emitter("e"), Block(), {}
  def c(v: int) -> str:
    if v not in consts: consts[v] = em.const(b, v)
    return consts[v]
  tys = [mem_type(dt.ptr(size)) for size, dt in spec.args]
  Emulated.launch_call(em, b, launch, [arg(i) for i in range(len(tys))], tys, c)
  src = Emitter.module([text, Emitter.func("emu", params(tys), b)])
  return CPUProgram(CPUCompiler().compile(ProgramSpec("emu", src, spec.args, ())))
