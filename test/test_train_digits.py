"""examples/train_digits.py trains its CNN to >= 97% test accuracy on scikit-learn's digits (fewer epochs than the
example's default, same model, optimizer and TinyJit step)."""
import pathlib, sys
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
import train_digits

def test_digits_cnn_reaches_97_percent():
  acc, ms = train_digits.train(epochs=6, progress=False)
  assert acc >= 0.97, acc
