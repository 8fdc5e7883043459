"""A Llama-architecture decoder (Llama 2/3, SmolLM2) in morok_mlir.nn terms: RMSNorm, rotary position embeddings on
interleaved pairs (GGML's "normal" mode, for which llama.cpp's converter permutes the rows of attn_q/attn_k), grouped-
query attention over a KV cache per layer, a SwiGLU feed-forward. Weights come as a dict keyed by GGUF tensor names.

The cache has a length (its context, at most max_context; Llama.grow lengthens it); a call writes its T rows at
start_pos and attends over the start_pos + T rows so far. start_pos is a bound Variable, so one compiled step (and one
TinyJit capture) serves every position."""
from __future__ import annotations
import dataclasses, math
import numpy as np
from morok_mlir import nn
from morok_mlir.core.provenance import error as _err
from morok_mlir.tensor import Tensor
from morok_mlir.core.uop import UOp, Variable
from morok_mlir.core.dtype import DType, dtypes
from morok_mlir.device import Device
from morok_mlir import realize as R

@dataclasses.dataclass(frozen=True)
class LlamaConfig:
  dim: int
  n_layers: int
  n_heads: int
  n_kv_heads: int
  vocab_size: int
  hidden_dim: int
  norm_eps: float = 1e-5
  rope_theta: float = 10000.0
  max_context: int = 512
  kv_dtype: DType = dtypes.float32   # the KV cache's storage: float16 (llama.cpp's default) halves it, each value rounded once
  @property
  def head_dim(self) -> int: return self.dim // self.n_heads

  @staticmethod
  def from_gguf(metadata: dict, tensors: dict, max_context: int | None = None, kv_dtype: DType = dtypes.float32) -> LlamaConfig:
    """The hyperparameters of a GGUF file's llama.* keys; max_context is capped by llama.context_length."""
    m = lambda k, d=None: metadata.get(f"llama.{k}", d)
    ctx = int(m("context_length", 2048))
    return LlamaConfig(dim=int(m("embedding_length")), n_layers=int(m("block_count")), n_heads=int(m("attention.head_count")),
                       n_kv_heads=int(m("attention.head_count_kv", m("attention.head_count"))),
                       vocab_size=tensors["token_embd.weight"].shape[0], hidden_dim=int(m("feed_forward_length")),
                       norm_eps=float(m("attention.layer_norm_rms_epsilon", 1e-5)), rope_theta=float(m("rope.freq_base", 10000.0)),
                       max_context=min(ctx, max_context or ctx), kv_dtype=kv_dtype)

def rope_table(cfg: LlamaConfig) -> tuple[Tensor, Tensor]:
  """cos and sin of position * theta^(-2i/head_dim), (max_context, head_dim/2), computed in float64 on the host."""
  freqs = np.outer(np.arange(cfg.max_context), cfg.rope_theta ** (-np.arange(0, cfg.head_dim, 2) / cfg.head_dim))
  return Tensor(np.cos(freqs).astype(np.float32)), Tensor(np.sin(freqs).astype(np.float32))

def apply_rope(x: Tensor, cos: Tensor, sin: Tensor) -> Tensor:
  """x (B, T, H, D) rotated on the pairs (x[2i], x[2i+1]) by the angles of cos/sin (T, D/2)."""
  B, T, H, D = x.shape
  x = x.reshape(B, T, H, D // 2, 2)
  x0, x1 = x[..., 0], x[..., 1]
  c, s = cos.reshape(1, T, 1, D // 2), sin.reshape(1, T, 1, D // 2)
  return Tensor.stack(x0 * c - x1 * s, x0 * s + x1 * c, dim=-1).reshape(B, T, H, D)

def _zeros(shape: tuple[int, ...], dtype: DType) -> Tensor:
  """Zeros whose rows take memory (CPU) only once written: a float32 cache of 512 positions that a 272-token generation
  filled holds ~half its 23.6 MB (SmolLM2-135M)."""
  return Tensor(R.zeros(shape, dtype, dev := Device.DEFAULT), device=dev)

class KVCache:
  """Keys and values of every position so far, (1, n_kv_heads, rows, head_dim) each (rows: max_context unless given), in
  cfg.kv_dtype; read as float32."""
  def __init__(self, cfg: LlamaConfig, rows: int | None = None):
    self.k, self.v = (_zeros((1, cfg.n_kv_heads, rows or cfg.max_context, cfg.head_dim), cfg.kv_dtype) for _ in range(2))
  def grow(self, rows: int) -> None:
    """rows rows, those so far kept."""
    new = [_zeros((*self.k.shape[:2], rows, self.k.shape[3]), self.k.dtype) for _ in range(2)]
    for t, old in zip(new, (self.k, self.v)): t[:, :, :old.shape[2]] = old
    Tensor.realize(*new); self.k, self.v = new
  def update(self, k: Tensor, v: Tensor, start_pos) -> tuple[Tensor, Tensor]:
    """Write k, v (1, KV, T, D) at rows start_pos.. start_pos+T-1; the rows 0.. start_pos+T-1 (a symbolic length)."""
    T = k.shape[2]
    self.k[:, :, start_pos:start_pos + T] = k.cast(self.k.dtype)
    self.v[:, :, start_pos:start_pos + T] = v.cast(self.v.dtype)
    Tensor.realize(self.k, self.v)
    return self.k[:, :, :start_pos + T].float(), self.v[:, :, :start_pos + T].float()

class Attention:
  def __init__(self, cfg: LlamaConfig, rows: int | None = None):
    self.cfg = cfg
    self.wq, self.wo = nn.Linear(cfg.dim, cfg.dim, bias=False), nn.Linear(cfg.dim, cfg.dim, bias=False)
    self.wk, self.wv = (nn.Linear(cfg.dim, cfg.n_kv_heads * cfg.head_dim, bias=False) for _ in range(2))
    self.cache = KVCache(cfg, rows)
  def __call__(self, x: Tensor, start_pos, cos: Tensor, sin: Tensor, mask: Tensor) -> Tensor:
    c, (B, T, _) = self.cfg, x.shape
    H, KV, D = c.n_heads, c.n_kv_heads, c.head_dim
    # stored: read inline, the rotation would be computed again for every cached position the scores run over
    q = apply_rope(self.wq(x).reshape(B, T, H, D), cos, sin).contiguous()
    k = apply_rope(self.wk(x).reshape(B, T, KV, D), cos, sin)
    keys, values = self.cache.update(k.transpose(1, 2), self.wv(x).reshape(B, T, KV, D).transpose(1, 2), start_pos)
    # grouped-query attention: the H/KV query heads of a group (dim 2) share one key/value head
    q = q.reshape(B, T, KV, H // KV, D).permute(0, 2, 3, 1, 4)
    att = q @ keys.unsqueeze(2).transpose(-1, -2) * (1 / D ** 0.5) + mask   # (B, KV, G, T, start_pos + T)
    # the softmax's weights inline in the product with the values (each exp runs once per output column group): stored,
    # they were a second scores-sized buffer live beside the scores (4.7 MB of a 256-token prefill's 10)
    out = att.softmax(-1) @ values.unsqueeze(2)
    return self.wo(out.permute(0, 3, 1, 2, 4).reshape(B, T, H * D))

class FeedForward:
  def __init__(self, cfg: LlamaConfig):
    self.w1, self.w3 = (nn.Linear(cfg.dim, cfg.hidden_dim, bias=False) for _ in range(2))
    self.w2 = nn.Linear(cfg.hidden_dim, cfg.dim, bias=False)
  def __call__(self, x: Tensor) -> Tensor: return self.w2(self.w1(x).silu() * self.w3(x))

class Block:
  def __init__(self, cfg: LlamaConfig, rows: int | None = None):
    self.attention, self.feed_forward = Attention(cfg, rows), FeedForward(cfg)
    self.attention_norm, self.ffn_norm = nn.RMSNorm(cfg.dim, cfg.norm_eps), nn.RMSNorm(cfg.dim, cfg.norm_eps)
  def __call__(self, x: Tensor, start_pos, cos: Tensor, sin: Tensor, mask: Tensor) -> Tensor:
    # the normalized rows stored once: read inline, every projection's kernel would normalize them again per weight row
    h = x + self.attention(self.attention_norm(x).contiguous(), start_pos, cos, sin, mask)
    return h + self.feed_forward(self.ffn_norm(h).contiguous())

# GGUF tensor name (per block: "blk.{i}." + name) -> attribute path in Block / Llama
BLOCK_NAMES = {"attn_norm.weight": "attention_norm.weight", "attn_q.weight": "attention.wq.weight", "attn_k.weight": "attention.wk.weight",
               "attn_v.weight": "attention.wv.weight", "attn_output.weight": "attention.wo.weight", "ffn_norm.weight": "ffn_norm.weight",
               "ffn_gate.weight": "feed_forward.w1.weight", "ffn_up.weight": "feed_forward.w3.weight", "ffn_down.weight": "feed_forward.w2.weight"}
TOP_NAMES = {"token_embd.weight": "tok_embeddings.weight", "output_norm.weight": "norm.weight", "output.weight": "output.weight"}

def _set(obj, path: str, t: Tensor):
  """obj's attribute at a dotted path (digits index lists) replaced by t, of the same shape."""
  *parents, last = path.split(".")
  for p in parents: obj = obj[int(p)] if p.isdigit() else getattr(obj, p)
  if getattr(obj, last).shape != t.shape: _err(ValueError, f"{path}: expected shape {getattr(obj, last).shape}, got {t.shape}")
  setattr(obj, last, t)

class Llama:
  """forward(tokens (1, T) int32, start_pos) -> logits (1, vocab) of the last position, the caches updated. context: the
  positions the caches hold to begin with (default max_context; grow() lengthens them)."""
  def __init__(self, cfg: LlamaConfig, weights: dict[str, Tensor], context: int | None = None):
    self.cfg, self.context = cfg, min(context or cfg.max_context, cfg.max_context)
    self.tok_embeddings = nn.Embedding(cfg.vocab_size, cfg.dim)
    self.layers = [Block(cfg, self.context) for _ in range(cfg.n_layers)]
    self.norm, self.output = nn.RMSNorm(cfg.dim, cfg.norm_eps), nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
    weights = dict(weights)
    weights.setdefault("output.weight", weights.get("token_embd.weight"))   # tied embeddings (SmolLM2)
    names = {**TOP_NAMES, **{f"blk.{i}.{k}": f"layers.{i}.{v}" for i in range(cfg.n_layers) for k, v in BLOCK_NAMES.items()}}
    if missing := [k for k in names if weights.get(k) is None]: _err(KeyError, f"Llama weights missing: {missing[:5]}")
    for k, path in names.items(): _set(self, path, weights[k])
    self.cos, self.sin = rope_table(cfg)
    self.start_pos = Variable("start_pos", 0, self.context - 1)

  def grow(self, n: int) -> bool:
    """Room for n positions (at most max_context): the caches, their positions kept, and start_pos's bound doubled until
    they hold n. True when they grew: the steps compiled and captured for the old length no longer apply."""
    if n <= self.context: return False
    while self.context < n: self.context = min(2 * self.context, self.cfg.max_context)
    for layer in self.layers: layer.attention.cache.grow(self.context)
    self.start_pos = Variable("start_pos", 0, self.context - 1)
    return True

  def position(self, T: int) -> UOp:
    """start_pos for a call of T tokens: 0 .. context - T, as its rows must fit the caches (what a step allocates for the
    largest start_pos + T, attention scores among it, then holds the context, not context + T - 1); self.start_pos for T = 1."""
    return self.start_pos if T == 1 else Variable("start_pos", 0, max(1, self.context - T))

  def forward(self, tokens: Tensor, start_pos, last: Tensor | None = None) -> Tensor:
    """start_pos: an int, or self.position(T) bound (an int is bound here: one compiled schedule serves every position).
    last (1,) int32: the position within tokens whose logits are returned (default T - 1; a prompt padded to a
    compiled length reads its last real token)."""
    T = tokens.shape[1]
    if isinstance(start_pos, int): start_pos = self.position(T).bind(start_pos)
    cos, sin = self.cos[start_pos:start_pos + T], self.sin[start_pos:start_pos + T]
    # query t (at position start_pos + t) sees cache rows r <= start_pos + t
    mask = (Tensor.arange(start_pos + T).reshape(1, -1) <= (Tensor.arange(T) + start_pos).reshape(T, 1)).where(0.0, float("-inf"))
    h = self.tok_embeddings(tokens)
    for layer in self.layers:   # realized layer by layer: every layer has one graph structure, so one compiled schedule serves all
      h = layer(h, start_pos, cos, sin, mask).realize()   # (the layer's cache is stored by its update, before attention reads it)
    h = h[:, -1:, :] if last is None else h[:, last.reshape(1), :]
    return self.output(self.norm(h).contiguous()).reshape(1, self.cfg.vocab_size)
  __call__ = forward

  def caches(self) -> list[Tensor]: return [t for l in self.layers for t in (l.attention.cache.k, l.attention.cache.v)]
  def step(self, tokens: Tensor, start_pos, last: Tensor | None = None, sampling: tuple = ()) -> Tensor:
    """One call's work, realized: the next token (sample(logits, *sampling)) and the caches (state of a TinyJit, each
    stored by its layer's KVCache.update)."""
    return sample(self(tokens, start_pos, last), *sampling).realize()

def sample(logits: Tensor, temperature: float = 0.0, top_k: int = 0, top_p: float = 1.0) -> Tensor:
  """A token id (1,) int32 per the last dim of logits (1, V), drawn on the device: argmax for temperature 0, else
  the Gumbel-max trick (argmax of logits / temperature + Gumbel noise from Tensor.rand, seeded by Tensor.manual_seed) over
  the top_k largest logits (0: all), further cut to the smallest prefix of them whose probability reaches top_p."""
  if temperature < 0 or top_k < 0 or not 0 < top_p <= 1:
    _err(ValueError, f"sample needs temperature >= 0, top_k >= 0 and top_p in (0, 1], got {temperature}, {top_k}, {top_p}")
  if temperature == 0: return logits.argmax(-1).int()
  V = logits.shape[-1]
  if 0 < top_k < V: vals, idx = logits.topk(top_k)
  elif top_p < 1: vals, idx = logits.sort(-1, descending=True)
  else: vals, idx = logits, None
  z = vals / temperature
  if top_p < 1:   # vals are sorted: keep entry i while the probability before it is below top_p (the first always)
    probs = z.softmax(-1)
    z = ((probs.cumsum(-1) - probs) < top_p).where(z, float("-inf"))
  choice = (z - (-Tensor.rand(*z.shape, device=z.device).log()).log()).argmax(-1)
  return (choice if idx is None else idx.gather(-1, choice.reshape(1, 1)).reshape(1)).int()
