"""python -m morok_mlir.llm --model PATH "prompt": the text streamed as it is made; --chat for a conversation in the
model's chat template (a prompt given is the first message)."""
from __future__ import annotations
import argparse, sys, time

def main(argv: list[str] | None = None) -> int:
  ap = argparse.ArgumentParser(prog="python -m morok_mlir.llm", description="Generate text with a Llama-architecture GGUF model.")
  ap.add_argument("prompt", nargs="?", help="the text to continue (with --chat: the first message)")
  ap.add_argument("--model", required=True, help="path of a .gguf file (llama architecture)")
  ap.add_argument("--chat", action="store_true", help="talk in the model's chat template (needs jinja2); an empty line ends")
  ap.add_argument("--max-tokens", type=int, default=128)
  ap.add_argument("--temperature", type=float, default=0.0, help="0: greedy")
  ap.add_argument("--top-k", type=int, default=0, help="0: every token")
  ap.add_argument("--top-p", type=float, default=1.0)
  ap.add_argument("--seed", type=int, default=None)
  ap.add_argument("--max-context", type=int, default=1024, help="prompt + generated tokens (the KV cache's length)")
  ap.add_argument("--float32", action="store_true", help="decode the quantized weights once (more memory, faster)")
  ap.add_argument("--kv-dtype", default="float16", choices=["float16", "float32", "bfloat16"], help="the KV cache's storage")
  ap.add_argument("--timing", action="store_true", help="print tokens/s to stderr")
  args = ap.parse_args(argv)
  if not args.chat and args.prompt is None: ap.error("a prompt is needed (or --chat)")
  from morok_mlir.llm import LLM
  llm = LLM(args.model, max_context=args.max_context, float32=args.float32, kv_dtype=args.kv_dtype)
  opts = dict(max_tokens=args.max_tokens, temperature=args.temperature, top_k=args.top_k, top_p=args.top_p, seed=args.seed)

  def stream(prompt, chat: bool) -> str:
    t0, pieces = time.perf_counter(), []
    for piece in llm.generate(prompt, chat=chat, **opts):
      print(piece, end="", flush=True)
      pieces.append(piece)
    print(flush=True)
    if args.timing: print(f"[{len(pieces)} pieces in {time.perf_counter() - t0:.2f} s]", file=sys.stderr)
    return "".join(pieces)

  if not args.chat:
    stream(args.prompt, False)
    return 0
  messages, message = [], args.prompt
  while True:   # each turn prefills only what follows the conversation the KV cache holds
    if message is None:
      try: message = input("> ")
      except (EOFError, KeyboardInterrupt): return 0
    if not message.strip(): return 0
    messages.append({"role": "user", "content": message})
    messages.append({"role": "assistant", "content": stream(messages, True)})
    message = None

if __name__ == "__main__": sys.exit(main())
