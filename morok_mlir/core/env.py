"""The environment variables morok-mlir reads, in one table: each knob's default, what it accepts, and its parser.
`get(name)` parses the variable's current value (unset or empty: the default); a value the knob does not accept raises
EnvError where it is first read, naming the variable, the value and what is accepted. docs/environment.md is the table
for users; test_env checks that the two agree."""
from __future__ import annotations
import os, re, sys
from dataclasses import dataclass
from typing import Callable

class EnvError(ValueError):
  """An environment variable holds a value its knob does not accept."""

@dataclass(frozen=True)
class Knob:
  default: str
  accepted: str                  # what the error message says is accepted
  parse: Callable[[str], object]  # the value's text -> its value; ValueError where it is not accepted
  doc: str

def _int(lo: int, hi: float = float("inf")) -> Callable[[str], int]:
  def parse(s: str) -> int:
    if not re.fullmatch(r"\s*[+-]?\d+\s*", s) or not lo <= (v := int(s)) <= hi: raise ValueError(s)
    return v
  return parse

def _number(s: str) -> float:
  if not (v := float(s)) >= 0 or v == float("inf"): raise ValueError(s)   # NaN, negative and inf are not sizes
  return v

def _flag(s: str) -> bool:
  if s.strip() not in ("0", "1"): raise ValueError(s)
  return s.strip() == "1"

def _device(s: str) -> str:
  if not re.fullmatch(r"(?i)(cpu|cuda)(:\d+)?", s.strip()): raise ValueError(s)
  return s.strip()

def _viz(s: str) -> str:
  if s.strip() not in ("0", "1") and not s.endswith((".html", ".htm")): raise ValueError(s)
  return s.strip() if s.strip() in ("0", "1") else s

def _path(s: str) -> str: return s

def _one_of(*names: str) -> Callable[[str], str]:
  def parse(s: str) -> str:
    if s.strip().lower() not in names: raise ValueError(s)
    return s.strip().lower()
  return parse

def _seconds(s: str) -> float:
  if not (v := float(s)) > 0 or v == float("inf"): raise ValueError(s)
  return v

KNOBS: dict[str, Knob] = {
  "DEBUG": Knob("0", "an integer >= 0", _int(0), "1: compile times; 2: each kernel's name, run time and CPU choices; "
                "3: each kernel's IR; 4: the module after every pass"),
  "BEAM": Knob("0", "an integer >= 0", _int(0), "beam width of uop-optimize's search of each new kernel's choices (0: heuristics)"),
  "DEVICE": Knob("CPU", "CPU or CUDA (any case, optionally :N)", _device, "the default device of new tensors"),
  "MOROK_THREADS": Knob("0", "an integer >= 0", _int(0), "CPU threads (0: every core this process may use)"),
  "MOROK_CACHE_DIR": Knob("", "a folder path", _path, "where compiled kernels are cached on disk (empty: ~/.cache/morok-mlir)"),
  "MOROK_DISK_CACHE": Knob("1", "0 or 1", _flag, "0 turns the disk cache of compiled kernels off"),
  "MOROK_CACHE_MAX_MB": Knob("512", "a number of megabytes >= 0", _number, "the disk cache's size, oldest entries pruned past it"),
  "MOROK_MEM_CACHE_ENTRIES": Knob("1024", "an integer >= 1", _int(1), "entries of each in-memory cache (schedules, programs)"),
  "MOROK_MEM_CACHE_MB": Knob("512", "a number of megabytes >= 0 (0: the default)", _number, "bytes of each in-memory cache"),
  "WINO": Knob("1", "0 or 1", _flag, "0 turns Winograd convolutions off (uop-optimize)"),
  "MOROK_PROGRESS": Knob("1", "0 or 1", _flag, "0 hides the progress bars of long work (shown only on a terminal, with tqdm)"),
  "VIZ": Knob("0", "0 (off), 1 (serve the page on 127.0.0.1) or a path ending in .html (write it at exit)", _viz,
              "the web page of every compile's stages: 1 serves it, PATH.html writes it as one file at exit"),
  "VIZ_PORT": Knob("8000", "a port number 0..65535", _int(0, 65535), "the port VIZ=1 serves on (0, or a port taken: a free one)"),
  "RING_BYTES": Knob("1048576", "an integer >= 0", _int(0), "allreduces of this many bytes or more run as a ring (uop-allreduce), smaller ones naive"),
  "MOROK_DIST_BACKEND": Knob("mpi", "mpi or nccl", _one_of("mpi", "nccl"), "dist.init()'s engine: MPI (CPU buffers) or NCCL (CUDA buffers)"),
  "MOROK_DIST_TIMEOUT": Knob("300", "a number of seconds > 0", _seconds, "seconds a collective may take before its rank reports the others dead or hung"),
  "MOROK_DIST_CHECK": Knob("1", "0 or 1", _flag, "0 skips the shape/dtype comparison between ranks before each collective"),
}

_seen: dict[tuple, object] = {}   # (name, raw text) -> value: a knob read per call (BEAM, at every realize) costs two lookups
# os.environ.get encodes the name at each call (~0.7 us): the names are encoded once and looked up in os.environ's own
# table (bytes on POSIX), as its get() would, where the platform has one (and os.environ is still that mapping)
_environ = os.environ
_table = _environ._data if hasattr(_environ, "_data") and hasattr(_environ, "encodekey") else None
_names: dict[str, object] = {}

def get(name: str):
  """Knob name's value from the environment now (unset or empty: its default)."""
  if _table is not None and os.environ is _environ: raw = _table.get(_names.get(name) or _names.setdefault(name, _environ.encodekey(name)))
  else: raw = os.environ.get(name)
  if (v := _seen.get(key := (name, raw), _seen)) is not _seen: return v
  k = KNOBS[name]
  text = (os.fsdecode(raw) if isinstance(raw, bytes) else raw) or k.default
  try: v = _seen[key] = k.parse(text)
  except ValueError:
    _one_line_when_uncaught()
    raise EnvError(f"environment variable {name}={text!r}: {name} must be {k.accepted} (default {k.default!r})") from None
  return v

def _one_line_when_uncaught() -> None:
  """A bad knob read at import (DEBUG, MOROK_THREADS) ends `python script.py` and morok-opt before any code of theirs
  can catch it: say it in one line, without a traceback through the package's imports. Other exceptions are untouched."""
  prev = sys.excepthook
  if getattr(prev, "_env_one_line", False): return
  def hook(t, e, tb):
    if isinstance(e, EnvError): print(f"morok-mlir: error: {e}", file=sys.stderr)
    else: prev(t, e, tb)
  hook._env_one_line = True
  sys.excepthook = hook
