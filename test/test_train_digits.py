"""examples/train_digits.py, as run by default (12 epochs, Adam, the TinyJit step), trains its CNN to >= 97% test
accuracy on scikit-learn's digits."""
import pathlib, sys
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1] / "examples"))
import train_digits

def test_digits_cnn_reaches_97_percent():
  acc, ms = train_digits.train(epochs=12, progress=False)
  assert acc >= 0.97, acc
