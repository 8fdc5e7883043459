"""The disk cache's sweep (see cpu.DiskCache): delete the least recently used entries until the directory holds at most
max_bytes, and temporaries an hour old. Only the cache's files are touched (named by a key: 40 hex digits), whatever
else shares the directory. The cache runs it as a script in a child process at the lowest CPU priority: a sweep of a
big cache is seconds of Python work, which in the process itself would hold the GIL against every kernel launch.

  python disk_prune.py DIR MAX_BYTES"""
import os, re, shutil, sys, time

KEYED = re.compile(r"[0-9a-f]{40}[.\w]")

def unlink(path: str) -> None:
  try:
    if os.path.isdir(path) and not os.path.islink(path): shutil.rmtree(path, ignore_errors=True)
    else: os.unlink(path)
  except OSError: pass

def prune(d: str, max_bytes: int) -> None:
  try: names = set(os.listdir(d))
  except OSError: return
  ents, total, now = [], 0, time.time()
  for f in names:
    if not KEYED.match(f): continue
    path = os.path.join(d, f)
    try: st = os.lstat(path)
    except OSError: continue
    if f.endswith(".so"):
      try: n = st.st_size + os.lstat(path[:-3] + ".sum").st_size
      except OSError: n = st.st_size
      ents.append((st.st_mtime, path, n)); total += n
    elif now - st.st_mtime > 3600 and not (f.endswith(".sum") and f[:-4] + ".so" in names): unlink(path)
  for _, path, n in sorted(ents):
    if total <= max_bytes: break
    unlink(path); unlink(path[:-3] + ".sum"); total -= n

if __name__ == "__main__": prune(sys.argv[1], int(sys.argv[2]))
