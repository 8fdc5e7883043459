"""docs/tensor.md lists every public Tensor attribute (a method added without a line there fails here)."""
import pathlib, re
from morok_mlir import Tensor

DOC = pathlib.Path(__file__).resolve().parents[1] / "docs" / "tensor.md"

def test_every_public_tensor_name_is_documented():
  text = DOC.read_text()
  named = {w for span in re.findall(r"`([^`]+)`", text) for w in re.findall(r"[A-Za-z_][A-Za-z0-9_]*", span)}
  public = {n for n in dir(Tensor) if not n.startswith("_")}
  assert sorted(public - named) == []

def test_readme_points_to_it():
  assert "docs/tensor.md" in (DOC.parents[1] / "README.md").read_text()
