"""MLIR's error text in the order compilers print it: `file:line:col: error: message`."""
import re

def format_mlir_error(text: str, fname: str | None = None) -> str:
  if fname: text = text.replace('"-":', f"{fname}:")
  text = re.sub(r"^(Unable to parse module assembly|Failure while executing pass pipeline):\n", "", text)
  text = re.sub(r'"([^"\n]*)":(\d+):(\d+)', r"\1:\2:\3", text)  # unquote file names in locations
  return re.sub(r"(?m)^(\s*)(error|note|warning): (\S+?:\d+:\d+): ", r"\1\3: \2: ", text).rstrip()
