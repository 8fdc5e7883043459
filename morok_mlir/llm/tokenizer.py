"""A `tokenizers.Tokenizer` built from a GGUF file's tokenizer.ggml.* metadata (the vocab, merges and token types that
llama.cpp's converter copied from the model's tokenizer.json), for byte-level BPE models (tokenizer.ggml.model "gpt2",
as SmolLM2, GPT-2, Llama 3 and Qwen use).

The pre-tokenizer is chosen by tokenizer.ggml.pre, llama.cpp's name for the model's split regex (PRE_TOKENIZERS). Tokens of
type CONTROL (3) are special tokens (encoded whole, skipped by decode(skip_special_tokens=True)); USER_DEFINED (4) ones
are added tokens matched whole. The chat template stays in metadata["tokenizer.chat_template"] (a Jinja string)."""
from __future__ import annotations
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers
from morok_mlir.core.provenance import error as _err

LLAMA3_SPLIT = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"

def _bytelevel(): return pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
def _split(regex: str): return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(regex), "isolated"), _bytelevel()])
def _digits_then_gpt2(): return pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), _bytelevel()])

# tokenizer.ggml.pre -> the pre-tokenizer of the model's tokenizer.json (llama.cpp's llama-vocab.cpp groups them so)
PRE_TOKENIZERS = {
  "default": _bytelevel, "gpt2": _bytelevel, "gpt-2": _bytelevel, "mpt": _bytelevel, "olmo": _bytelevel,
  "smollm": _digits_then_gpt2, "starcoder": _digits_then_gpt2, "refact": _digits_then_gpt2, "codeshell": _digits_then_gpt2,
  "llama-bpe": lambda: _split(LLAMA3_SPLIT), "llama3": lambda: _split(LLAMA3_SPLIT),
}
CONTROL, USER_DEFINED = 3, 4

def tokenizer_from_gguf(metadata: dict) -> Tokenizer:
  """The tokenizer that metadata (GGUFModel.metadata) describes. Adds no BOS/EOS by itself: metadata's
  tokenizer.ggml.add_bos_token says whether the model wants one (SmolLM2: no)."""
  if (kind := metadata.get("tokenizer.ggml.model")) != "gpt2":
    _err(ValueError, f"tokenizer.ggml.model {kind!r} is not supported: only byte-level BPE ('gpt2')")
  if (pre := PRE_TOKENIZERS.get(name := metadata.get("tokenizer.ggml.pre", "default"))) is None:
    _err(ValueError, f"tokenizer.ggml.pre {name!r} is not supported (supported: {sorted(PRE_TOKENIZERS)})")
  tokens, merges = list(metadata["tokenizer.ggml.tokens"]), metadata.get("tokenizer.ggml.merges", [])
  types = list(metadata.get("tokenizer.ggml.token_type", [1] * len(tokens)))
  vocab = {t: i for i, t in enumerate(tokens)}
  if len(vocab) != len(tokens): _err(ValueError, "tokenizer.ggml.tokens holds a token twice")
  # byte-level BPE covers every byte, so there is no unknown token (tokenizer.json's unk_token is null for these models)
  tok = Tokenizer(models.BPE(vocab, [tuple(m.split(" ", 1)) for m in merges], ignore_merges=name in ("llama-bpe", "llama3")))
  tok.pre_tokenizer, tok.decoder = pre(), decoders.ByteLevel()
  added = lambda kind: [AddedToken(tokens[i], special=kind == CONTROL, normalized=False) for i, t in enumerate(types) if t == kind]
  tok.add_special_tokens(added(CONTROL))
  tok.add_tokens(added(USER_DEFINED))
  return tok
