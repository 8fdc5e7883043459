"""Run uop-lower-gpu's output on the CPU: every GPU thread becomes one iteration of a host loop.

What it is for: testing the GPU lowering's index math (flat global ids, tail guards, upcast lanes, GROUP strides over
reduce ranges) against numpy on machines without a GPU. The gpu.func bodies are kept as they are, with the ids made
from the loop counter: thread = i % local, block = i // local, global = i. Threads never talk to each other here, so
GROUP kernels are lowered with one thread per block (`group_threads=1`), where `gpu.all_reduce` of one value is that
value; what this does not test is the combine across threads, which only the GPU itself can.

  emulate(outs) -> [np.ndarray]   realize graph-level UOps through uop-lower-gpu, on the CPU
  kernel_program(spec) -> CPUProgram
                                  one CUDA kernel (its ProgramSpec) as a CPU program on the same buffer pointers,
                                  running every thread of its launch: what a fake CUDA driver launches"""
from __future__ import annotations
import itertools, re
import numpy as np
from morok_mlir.ir.emit import normalize, graph_func
from morok_mlir.ir.pipeline import lower_to_kernels
from morok_mlir import passes as _passes   # noqa: F401 (registers the passes lower_to_kernels runs)
from morok_mlir.codegen.lower_gpu import lower_module
from morok_mlir.codegen.lower_cpu import mem_type
from morok_mlir.core.uop import UOp
from morok_mlir.device.cpu import CPUCompiler, CPUProgram, ProgramSpec, _arg

_FUNC = re.compile(r"gpu\.func @(\w+)\((.*)\) kernel attributes \{[^}]*\} \{")
_LAUNCH = re.compile(r"gpu\.launch_func @kernels::@(\w+) blocks in \((%\w+), %\w+, %\w+\) threads in \((%\w+), %\w+, %\w+\) args\((.*)\)")
_IDS = {"thread_id": "arith.remui %emu_gid, %emu_local", "block_id": "arith.divui %emu_gid, %emu_local", "global_id": "arith.maxui %emu_gid, %emu_gid"}

def cpu_text(gpu_text: str) -> str:
  """A uop-lower-gpu module as a CPU module: kernels are func.funcs taking (buffers..., gid, local), and each
  gpu.launch_func is a scf.for over blocks x threads calling its kernel."""
  n, out, in_gpu_module = itertools.count(), [], False
  for line in gpu_text.splitlines():
    s = line.strip()
    if s.startswith("module attributes {gpu.container_module}"): out.append("module {"); continue
    if s.startswith("gpu.module @"): in_gpu_module = True; continue
    if in_gpu_module and line == "  }": in_gpu_module = False; continue   # the gpu.module's own closing brace
    if (m := _FUNC.search(line)):
      out.append(f"  func.func @{m.group(1)}({m.group(2)}, %emu_gid: index, %emu_local: index) {{")
      out.append("    %emu_true = arith.constant true"); continue
    if (m := re.match(r"(\s*)(%\w+) = gpu\.(thread_id|block_id|global_id) x$", line)):
      out.append(f"{m.group(1)}{m.group(2)} = {_IDS[m.group(3)]} : index"); continue
    if (m := re.match(r"(\s*)(%\w+) = gpu\.all_reduce \w+ (%\w+) uniform \{\} : \((\w+)\) -> \(\w+\)$", line)):
      out.append(f"{m.group(1)}{m.group(2)} = arith.select %emu_true, {m.group(3)}, {m.group(3)} : {m.group(4)}"); continue
    if s == "gpu.return": out.append(line.replace("gpu.return", "return")); continue
    if (m := _LAUNCH.search(line)):
      k, args = next(n), [a.split(" : ") for a in m.group(4).split(", ")]
      out += [f"    %emu_n{k} = arith.muli {m.group(2)}, {m.group(3)} : index",
              f"    %emu_z{k} = arith.constant 0 : index", f"    %emu_o{k} = arith.constant 1 : index",
              f"    scf.for %emu_i{k} = %emu_z{k} to %emu_n{k} step %emu_o{k} {{",
              f"      func.call @{m.group(1)}({', '.join(a for a, _ in args)}, %emu_i{k}, {m.group(3)}) : ({', '.join(t for _, t in args)}, index, index) -> ()",
              "    }"]
      continue
    out.append(line)
  return "\n".join(out) + "\n"

def emulate(outs: list[UOp]) -> list[np.ndarray]:
  """Graph-level UOps computed by the GPU lowering, run on the CPU (see the module docstring)."""
  key, inputs, _ = normalize(outs)
  funcs = lower_to_kernels(graph_func(key))
  sched = next(f for f in funcs if f.name == "schedule")
  text = cpu_text(lower_module(funcs, group_threads=1))
  args = tuple(_arg(t) for t in sched.args)
  prog = CPUProgram(CPUCompiler().compile(ProgramSpec("schedule", text, args, ())))
  bufs = [u.buffer.numpy() for u in inputs]
  bufs += [np.zeros(size, dt.np) for size, dt in args[len(inputs):]]
  prog.call_ptrs(*[b.ctypes.data for b in bufs])
  return [bufs[len(inputs) + i].reshape(o.shape) for i, o in enumerate(outs)]

def kernel_program(spec) -> CPUProgram:
  """A CUDA ProgramSpec's kernel (lowered with group_threads=1 where it reduces across threads) run on the CPU over its
  1-D launch; call it with call_ptrs(*buffer addresses)."""
  (g, *gyz), (l, *lyz) = spec.global_size, spec.local_size
  if gyz != [1, 1] or lyz != [1, 1]: raise ValueError(f"1-D launches only, got {spec.global_size} x {spec.local_size}")
  tys = [mem_type(dt.ptr(size)) for size, dt in spec.args]
  text = cpu_text(spec.src).rstrip()[:-1] + f"""  func.func @emu({', '.join(f'%a{i}: {t}' for i, t in enumerate(tys))}) {{
    %n = arith.constant {g * l} : index
    %l = arith.constant {l} : index
    %z = arith.constant 0 : index
    %o = arith.constant 1 : index
    scf.for %i = %z to %n step %o {{
      func.call @{spec.name}({', '.join(f'%a{i}' for i in range(len(tys)))}, %i, %l) : ({', '.join(tys)}, index, index) -> ()
    }}
    return
  }}
}}
"""
  return CPUProgram(CPUCompiler().compile(ProgramSpec("emu", text, spec.args, ())))
