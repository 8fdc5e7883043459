"""The disk cache's sweep (see cpu.DiskCache): delete the least recently used entries until the directory holds at most
max_bytes, and temporaries an hour old. Only names the cache itself makes are touched (ENTRY, TEMP), never a folder,
whatever else shares the directory. The cache runs it as a script in a child process at the lowest CPU priority: a
sweep of a big cache is seconds of Python work, which in the process itself would hold the GIL against every kernel launch.

  python disk_prune.py DIR MAX_BYTES"""
import os, re, stat, sys, time

# an entry: <key>.so (a kernel's object) or <key>.plan (a schedule: realize.save_plan) and <key>.sum, the key 40 hex digits
ENTRY = re.compile(r"[0-9a-f]{40}\.(?:so|plan|sum)")
# a temporary: mkstemp(f".{ext}.tmp", f"{key}.{pid}.{n}."), and the names earlier versions of the cache used
TEMP = re.compile(r"[0-9a-f]{40}(?:\.\d+\.\d+\.[a-z0-9_]{8}\.(?:o|so|plan|sum)\.tmp|\.so\.\d+\.\d+\.tmp(?:\.sum)?|[a-z0-9_]{8}\.o)")

def unlink(path: str) -> None:
  try: os.unlink(path)
  except OSError: pass

def prune(d: str, max_bytes: int) -> None:
  try: names = set(os.listdir(d))
  except OSError: return
  ents, total, now = [], 0, time.time()
  for f in names:
    if not (entry := ENTRY.fullmatch(f)) and not TEMP.fullmatch(f): continue
    path = os.path.join(d, f)
    try: st = os.lstat(path)
    except OSError: continue
    if stat.S_ISDIR(st.st_mode): continue   # the cache never makes one; cpu.DiskCache replaces one in an entry's place
    if entry and not f.endswith(".sum"):
      try: n = st.st_size + os.lstat(os.path.splitext(path)[0] + ".sum").st_size
      except OSError: n = st.st_size
      ents.append((st.st_mtime, path, n)); total += n
    elif now - st.st_mtime > 3600 and not (entry and (f[:-4] + ".so" in names or f[:-4] + ".plan" in names)): unlink(path)
  for _, path, n in sorted(ents):
    if total <= max_bytes: break
    unlink(path); unlink(os.path.splitext(path)[0] + ".sum"); total -= n

if __name__ == "__main__": prune(sys.argv[1], int(sys.argv[2]))
