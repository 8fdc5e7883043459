"""Text generation with a Llama-architecture GGUF model: `LLM(path).generate(prompt, max_tokens=N, temperature=0.0)`
yields the text piece by piece. The prompt is prefilled in one call (padded to a power of two, one compiled step per
length; only the part after what the KV cache holds from the previous generation, so a chat's earlier turns are not
computed again) and each new token is one decode call; both run under TinyJit with the position a bound Variable, the sampling
in the same kernels."""
from __future__ import annotations
from typing import Iterator
import numpy as np
from morok_mlir.core.provenance import error as _err
from morok_mlir.device.cpu import CPU
from morok_mlir.jit import TinyJit
from morok_mlir.tensor import Tensor
from morok_mlir.llm.model import Llama, LlamaConfig
from morok_mlir.core.dtype import dtypes, to_dtype

KV_DTYPES = (dtypes.float32, dtypes.float16, dtypes.bfloat16)

def render_chat(template: str, messages: list[dict], bos: str = "", eos: str = "") -> str:
  """The file's chat template (Jinja, as Hugging Face's apply_chat_template renders it) with a generation prompt."""
  try: import jinja2
  except ImportError: _err(ImportError, "chat mode renders the model's chat template with jinja2: pip install 'morok-mlir[llm]' (or jinja2)")
  env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True)
  env.globals["raise_exception"] = lambda msg: _err(ValueError, f"chat template: {msg}")
  return env.from_string(template).render(messages=messages, add_generation_prompt=True, bos_token=bos, eos_token=eos)

class LLM:
  """A GGUF file's model, tokenizer and chat template. max_context bounds prompt + generated tokens; the KV cache holds
  `context` of them to begin with and doubles (up to max_context) when a generation needs more, so a short chat does not
  hold a long one's cache (SmolLM2-135M: 46 KB per position).
  float32: decode the quantized weights once into float32 buffers (about 4 bytes a weight instead of 0.6 for Q4_1;
  faster, as every call's kernels then read plain floats) instead of in the kernels that read them.
  metadata: the file's, less the tokenizer's arrays (vocab, merges, token types: the tokenizer holds them; as Python
  lists, ~15 MB for a 49k vocabulary).
  kv_dtype: the KV cache's storage: "float16" (llama.cpp's default: each key and value rounded once when stored), "float32"
  (twice the memory, the projections' values exactly) or "bfloat16"."""
  def __init__(self, path: str, max_context: int = 1024, float32: bool = False, context: int = 256, kv_dtype: str = "float16"):
    from morok_mlir.llm.gguf import load_gguf
    from morok_mlir.llm.tokenizer import tokenizer_from_gguf
    if (kv := to_dtype(kv_dtype)) not in KV_DTYPES: _err(ValueError, f"kv_dtype must be one of {[str(d) for d in KV_DTYPES]}, got {kv_dtype!r}")
    g = load_gguf(path)
    if g.arch != "llama": _err(ValueError, f"{path}: architecture {g.arch!r} is not supported (llama only)")
    weights = {k: v.contiguous().realize() for k, v in g.tensors.items()} if float32 else g.tensors
    meta = {k: v for k, v in g.metadata.items() if not (k.startswith("tokenizer.ggml.") and isinstance(v, list))}
    cfg = LlamaConfig.from_gguf(g.metadata, weights, max_context, kv)
    self._init(Llama(cfg, weights, context), tokenizer_from_gguf(g.metadata), meta)
    # the free heap pages the load's transient objects left (the metadata's lists, the vocabulary's dict and merge pairs:
    # freed as g goes) given back: the prompt's first call would not reuse them (its buffers are mappings of their own)
    del g, weights; CPU.allocator.trim()

  @classmethod
  def from_model(cls, model: Llama, tokenizer=None, metadata: dict | None = None) -> LLM:
    """An LLM over a model built elsewhere (weights from another source); without a tokenizer, generate_ids only."""
    self = cls.__new__(cls)
    self._init(model, tokenizer, metadata or {})
    return self
  def _init(self, model: Llama, tokenizer, metadata: dict):
    self.model, self.tokenizer, self.metadata, self._steps = model, tokenizer, metadata, {}
    self._cached: list[int] = []   # the tokens whose keys and values the cache holds, from position 0
    self.bos_id, self.eos_id = metadata.get("tokenizer.ggml.bos_token_id"), metadata.get("tokenizer.ggml.eos_token_id")

  def chat_prompt(self, messages: str | list[dict]) -> str:
    """The chat template rendered for messages ({"role", "content"} dicts; a str is one user message), with the
    assistant's turn opened."""
    if (t := self.metadata.get("tokenizer.chat_template")) is None: _err(ValueError, "this model file has no chat template")
    tok = lambda i: self.tokenizer.id_to_token(i) if i is not None else ""
    msgs = [{"role": "user", "content": messages}] if isinstance(messages, str) else messages
    return render_chat(t, msgs, tok(self.bos_id), tok(self.eos_id))

  def _step(self, T: int, sampling: tuple) -> TinyJit:
    """The jitted call for T tokens (a padded prompt, or 1 for decode) and one sampling setting."""
    if (f := self._steps.get((T, sampling))) is None:
      f = self._steps[(T, sampling)] = TinyJit(lambda toks, pos, last: self.model.step(toks, pos, last, sampling))
    return f

  def generate_ids(self, ids: list[int], max_tokens: int = 64, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
                   seed: int | None = None) -> Iterator[int]:
    """Token ids after ids, one per decode call, until eos or max_tokens; seed restarts Tensor's generator."""
    n = self.model.cfg.max_context
    if not ids or len(ids) + max_tokens > n: _err(ValueError, f"{len(ids)} prompt tokens + {max_tokens} new ones do not fit max_context={n}")
    if self.model.grow(len(ids) + max_tokens): self._steps.clear()
    if seed is not None: Tensor.manual_seed(seed)
    sampling, i32 = (float(temperature), int(top_k), float(top_p)), lambda *x: Tensor(np.array(x, np.int32))
    # a prompt that starts with what the cache holds (a conversation's earlier turns) prefills only what follows it
    keep = next((i for i, (a, b) in enumerate(zip(self._cached, ids[:-1])) if a != b), min(len(self._cached), len(ids) - 1))
    new, pos = ids[keep:], self.model.start_pos.bind
    T = min(self.model.context - keep, max(8, 1 << (len(new) - 1).bit_length()))
    self._cached = ids[:keep]
    tok = self._step(T, sampling)(Tensor(np.array([new + [0] * (T - len(new))], np.int32)), self.model.position(T).bind(keep),
                                  i32(len(new) - 1))
    self._cached = list(ids)
    # the prefill's freed buffers (its intermediates' arena: ~10 MB for 256 tokens) given back: the decode steps that follow
    # would not reuse them, and they would sit beside the decode's own through the generation
    CPU.allocator.trim()
    for p in range(len(ids), len(ids) + max_tokens):
      if (t := int(tok.numpy()[0])) == self.eos_id: return
      yield t
      if p + 1 < len(ids) + max_tokens:
        tok = self._step(1, sampling)(Tensor(np.array([[t]], np.int32)), pos(p), i32(0))
        self._cached.append(t)

  def generate(self, prompt: str | list[dict], max_tokens: int = 64, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0,
               seed: int | None = None, chat: bool = False) -> Iterator[str]:
    """The text after prompt, piece by piece as tokens are made (chat: prompt is a user message, or a conversation's
    messages, in the chat template)."""
    text = self.chat_prompt(prompt) if chat else prompt
    ids = self.tokenizer.encode(text, add_special_tokens=not chat).ids
    out, shown = [], ""
    for t in self.generate_ids(ids, max_tokens, temperature, top_k, top_p, seed):
      out.append(t)
      if (s := self.tokenizer.decode(out)).endswith("\ufffd"): continue   # a character split across tokens
      yield s[len(shown):]
      shown = s
