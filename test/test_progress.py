"""Progress bars of long work: on a terminal's stderr only, silent elsewhere and under MOROK_PROGRESS=0. The bar's 2 s delay
is set to 0 here, so whether it shows depends on the terminal and the knob, never on this machine's speed."""
import io, sys
import numpy as np
import pytest
from morok_mlir import Tensor
from morok_mlir.core import progress as P

class Terminal(io.StringIO):
  def isatty(self): return True

def many_kernels(cols: int) -> np.ndarray:
  """A first realize of 6 kernels (each step a max and a sum over other axes), of a shape no other test realizes."""
  x = Tensor(np.linspace(-1, 1, 8 * cols, dtype=np.float32).reshape(8, cols))
  for _ in range(3): x = x - x.max(1, keepdim=True) * 0.5 + x.sum(0, keepdim=True) * 0.001
  return x.numpy()

@pytest.fixture
def no_delay(monkeypatch):
  pytest.importorskip("tqdm", reason="the bars are tqdm's (the examples extra)")
  monkeypatch.setattr(P, "DELAY", 0)
  monkeypatch.delenv("MOROK_PROGRESS", raising=False)

def test_bar_on_a_terminal(no_delay, monkeypatch):
  monkeypatch.setattr(sys, "stderr", err := Terminal())
  many_kernels(11)
  assert "compile" in err.getvalue() and "kernel" in err.getvalue(), err.getvalue()

def test_silent_without_a_terminal(no_delay, monkeypatch):
  monkeypatch.setattr(sys, "stderr", err := io.StringIO())
  many_kernels(12)
  assert err.getvalue() == ""

def test_silent_under_morok_progress_0(no_delay, monkeypatch):
  monkeypatch.setenv("MOROK_PROGRESS", "0")
  monkeypatch.setattr(sys, "stderr", err := Terminal())
  many_kernels(13)
  assert err.getvalue() == ""

def test_not_a_terminal_costs_nothing(monkeypatch):
  """Where no bar may show, progress hands back the iterable itself: no wrapper on the hot path."""
  monkeypatch.setattr(sys, "stderr", io.StringIO())
  xs = [1, 2]
  assert P.progress(xs, "x") is xs
