"""A CPU program's scratch buffers (a contraction's packed panels) when it is called outside a TinyJit plan: large ones
are held during a call only, so the programs a model compiles do not each keep theirs for the process's life."""
import gc
import numpy as np
from morok_mlir.tensor import Tensor
from morok_mlir import realize as R
from morok_mlir.device import Device
from morok_mlir.device.cpu import CPUProgram

def test_large_scratch_is_held_during_a_call_only(monkeypatch):
  monkeypatch.setattr(CPUProgram, "LEND_BYTES", 1, raising=False)   # every program with scratch lends it (the panels here are ~90 KB)
  rng, alloc = np.random.default_rng(0), Device["CPU"].allocator
  x, w = rng.standard_normal((67, 232), dtype=np.float32), rng.standard_normal((232, 104), dtype=np.float32)
  gc.collect(); before = alloc.used
  W = Tensor(w)
  np.testing.assert_allclose((Tensor(x) @ W).numpy(), x @ w, rtol=1e-4, atol=1e-4)
  p = next(it.program for s in R._schedule_cache.values() for it in s.items if getattr(it.program, "spec", None) is not None
           and it.program.spec.scratch and it.program.spec.args[0][0] == 67 * 104)
  out = np.zeros(67 * 104, np.float32)
  for _ in range(2):   # called directly (no inputs: the panels are packed into the call's scratch), twice
    p(out, x.reshape(-1).copy(), w.reshape(-1).copy())
    np.testing.assert_allclose(out.reshape(67, 104), x @ w, rtol=1e-4, atol=1e-4)
  del W; gc.collect()   # (the panels kept for W go with it)
  # what stays: the schedule's own arena (a small one is kept by its run for the next: realize.KEEP_ARENA)
  kept = sum(r.mem[0].nbytes for s in R._schedule_cache.values() for r in s.calls if r.mem is not None)
  assert alloc.used - before - kept < 4 * max(p.spec.scratch), (alloc.used - before, kept, p.spec.scratch)
