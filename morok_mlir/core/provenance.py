"""Provenance: the user's file:line:col that every graph node and every error names. The outermost public Tensor call
finds it once (a `scope`); code outside a scope walks the stack to the first frame outside this package."""
from __future__ import annotations
import os, sys, threading
import numpy as np

_PKG = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep   # morok_mlir/
_NUMPY = os.path.dirname(os.path.abspath(np.__file__)) + os.sep   # numpy calls a Tensor's methods for np.sum(t): not the user's line
# keyed by the code object's id, the code object kept in the value (so the id stays its own): a code object's hash is
# computed from its whole contents each time (~0.4 us for a long function)
_POS: dict = {}   # code object -> its instruction positions (for the column)
_OURS: dict = {}  # id(code) -> (code, is it this package's): checked once per code object, not per frame
_LOCS: dict = {}  # (id(code), instruction offset) -> (code, its file:line:col): the line number is a walk of the line table

class _Scope(threading.local):
  loc: str | None = None   # the user's file:line:col of the outermost public Tensor call in progress (set by its wrapper)
scope = _Scope()

def user_loc() -> str:
  """file:line:col of the user's line: the one the public Tensor method in progress was called from, else the
  first stack frame outside this package."""
  if (loc := scope.loc) is not None: return loc
  return walk_loc(sys._getframe(1))

def walk_loc(f) -> str:
  """file:line:col of the first frame outside this package, from frame f outward."""
  while f is not None:
    c = f.f_code
    if (ours := _OURS.get(id(c))) is None: ours = _OURS[id(c)] = (c, c.co_filename.startswith((_PKG, _NUMPY)))
    if not ours[1]: break
    f = f.f_back
  if f is None: return "<unknown>:0:0"
  if (loc := _LOCS.get(key := (id(c), f.f_lasti))) is not None: return loc[1]
  if (pos := _POS.get(c)) is None: pos = _POS[c] = list(c.co_positions())
  i = f.f_lasti // 2
  col = pos[i][2] if 0 <= i < len(pos) and pos[i][2] is not None else -1
  if len(_LOCS) >= 1 << 16: _LOCS.clear()
  loc = _LOCS[key] = (c, f"{c.co_filename}:{f.f_lineno}:{col + 1}")
  return loc[1]

class OpValueError(ValueError, RuntimeError):
  """An argument or shape an op rejects: a ValueError, and a RuntimeError as PyTorch raises for it."""
class OpIndexError(IndexError, RuntimeError):
  """A dim or index out of range for an op: an IndexError, and a RuntimeError as PyTorch raises for some (topk's k)."""
class OpTypeError(TypeError, RuntimeError):
  """A dtype an op does not support: a TypeError, and a RuntimeError as PyTorch raises for it."""

def error(exc: type, msg: str):
  """Raise exc with msg at the user's line."""
  raise exc(f"{user_loc()}: {msg}")
