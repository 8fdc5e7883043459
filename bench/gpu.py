"""matmul 4096^3 f16 (f32 accumulation) on CUDA beside torch (cuBLAS) on the same GPU, and, with --tiles, each block
tile of codegen.gpu_tiles.TILES the plan accepts for it (the space a timed search explores: uop-lower-gpu{tile=i}).
Needs an NVIDIA GPU, cuda-python and torch; prints one row per line, the card's name first.

  python bench/gpu.py [--n 4096] [--runs 20] [--tiles] [--tf32]"""
import argparse, time
import numpy as np

def best(fn, runs: int, sync) -> float:
  fn(); sync()
  ts = []
  for _ in range(runs):
    t0 = time.perf_counter(); fn(); sync(); ts.append(time.perf_counter() - t0)
  return min(ts)

def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--n", type=int, default=4096); ap.add_argument("--runs", type=int, default=20)
  ap.add_argument("--tiles", action="store_true"); ap.add_argument("--tf32", action="store_true", help="f32 inputs on tf32 tensor cores")
  a = ap.parse_args()
  import torch
  from morok_mlir import Tensor
  from morok_mlir.device import cuda
  from morok_mlir.ir.emit import normalize, graph_func
  from morok_mlir.ir.pipeline import lower_to_kernels
  from morok_mlir.codegen.lower_gpu import lower_kernel
  from morok_mlir.codegen.emitter import Emitter
  from morok_mlir.codegen.gpu_tiles import TILES, candidates
  dev, n, dt = cuda.CUDA, a.n, np.float32 if a.tf32 else np.float16
  dev.init(); dev.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = a.tf32
  rng = np.random.default_rng(0)
  x, y = rng.standard_normal((n, n)).astype(dt), rng.standard_normal((n, n)).astype(dt)
  flop = 2 * n ** 3
  print(f"{torch.cuda.get_device_name()} ({dev.chip}), matmul {n}^3 {'tf32' if a.tf32 else 'f16'}")
  tx, ty = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
  t_torch = best(lambda: tx @ ty, a.runs, torch.cuda.synchronize)
  print(f"torch (cuBLAS)   {t_torch * 1e3:8.3f} ms  {flop / t_torch / 1e12:7.1f} TFLOP/s")
  mx, my = Tensor(x).to("CUDA").realize(), Tensor(y).to("CUDA").realize()
  t_ours = best(lambda: (mx @ my).realize(), a.runs, dev.synchronize)
  err = np.abs((mx @ my).numpy().astype(np.float32) - (tx @ ty).float().cpu().numpy()).max()
  print(f"morok-mlir       {t_ours * 1e3:8.3f} ms  {flop / t_ours / 1e12:7.1f} TFLOP/s  {100 * t_torch / t_ours:5.1f}% of cuBLAS  "
        f"(max |diff| vs torch {err:.3g})")
  if not a.tiles: return
  f = [k for k in lower_to_kernels(graph_func(normalize([(Tensor(x) @ Tensor(y)).uop])[0])) if "uop.kernel" in k.attrs][-1]
  bx, by, bo = (dev.allocator.from_numpy(v) for v in (x, y, np.zeros((n, n), dt)))
  for i in candidates(f, dev.chip, a.tf32):
    text, launch = lower_kernel(f, "kernel", chip=dev.chip, tf32=a.tf32, tile=i)
    spec = cuda.ProgramSpec("kernel", Emitter.gpu_module([text]), tuple((b.size, b.dtype) for b in (bo, bx, by)), (0,),
                            launch.global_size, launch.local_size, f, True)
    prog = cuda.CUDAProgram(dev, dev.compiler.compile(spec, dev.chip), f"tile {i}")
    t = best(lambda: prog(bo, bx, by), a.runs, dev.synchronize)
    print(f"  tile {i} {TILES[i]}: {t * 1e3:8.3f} ms  {flop / t / 1e12:7.1f} TFLOP/s  {100 * t_torch / t:5.1f}% of cuBLAS")

if __name__ == "__main__": main()
