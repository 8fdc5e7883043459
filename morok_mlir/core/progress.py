"""Progress bars for long work: a compile of many kernels, an ONNX model's first call, BEAM searches, the bench.
A bar is tqdm's, on stderr, and only where stderr is a terminal, tqdm is installed (the `examples` extra) and
MOROK_PROGRESS is not 0; it appears once the work has run DELAY seconds, so work that ends sooner prints nothing."""
from __future__ import annotations
import sys, time
from typing import Iterable
from morok_mlir.core import env

DELAY = 2.0   # seconds of work before a bar shows: the count alone does not tell a cached compile from a fresh one

def _tqdm():
  """tqdm's class where a bar may be shown now, else None."""
  try: tty = sys.stderr.isatty()
  except (AttributeError, ValueError): return None   # no stderr, or a closed one
  if not tty or not env.get("MOROK_PROGRESS"): return None
  try: from tqdm import tqdm
  except ImportError: return None
  return tqdm

def progress(it: Iterable, desc: str, unit: str = "it", total: int | None = None, since: float | None = None) -> Iterable:
  """it, counted by a bar labelled desc where one may be shown (see the module's docstring); else it itself. since: the
  time.perf_counter() at which the work began, when it began before the loop (a compile's passes run before its kernels)."""
  if (tqdm := _tqdm()) is None: return it
  delay = DELAY if since is None else max(0.0, DELAY - (time.perf_counter() - since))
  return tqdm(it, desc=desc, unit=unit, total=total, file=sys.stderr, delay=delay, leave=False, dynamic_ncols=True)

def write(text: str) -> None:
  """A line on stdout that does not tear a bar drawn meanwhile (tqdm clears it, prints, and draws it again)."""
  if (tqdm := _tqdm()) is None: print(text, flush=True)
  else: tqdm.write(text, file=sys.stdout)
