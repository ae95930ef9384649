"""A static (bag-of-tokens) encoder distilled offline from the bundled all-MiniLM-L6-v2, for the
scale benchmark's large runs, where embedding a million documents with MiniLM would take days of
CPU on this machine. Nothing is downloaded.

    nice -n 19 .venv/bin/python benchmarks/distill_static.py [OUT]   # default data/models/minilm-static

How (model2vec's idea, without its PCA and Zipf weighting): every WordPiece of MiniLM's
vocabulary is run through MiniLM alone (`[CLS] piece [SEP]`, mean pooled, as MiniLM pools a
sentence); those 384-d vectors become the embedding table of a sentence-transformers
`StaticEmbedding`, so a text's vector is the mean of its pieces' vectors (the workbench normalises
it). It is a much weaker model than MiniLM (no context), but a real 384-d embedding of real text,
so vector search costs and ANN recall are measured on a realistic distribution. The folder loads
like any local model: `bench_scale.py --encoder data/models/minilm-static`.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]


def distill(out: Path, batch_size: int = 512) -> Path:
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import StaticEmbedding

    from retrieval.models.embed import MINILM, resolve_model

    teacher = SentenceTransformer(resolve_model(MINILM).path, device="cpu", local_files_only=True)
    tokenizer = teacher.tokenizer
    transformer = teacher[0].auto_model
    vocab = len(tokenizer)
    table = np.zeros((vocab, transformer.config.hidden_size), dtype=np.float32)
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    started = time.perf_counter()
    with torch.inference_mode():
        for start in range(0, vocab, batch_size):
            ids = torch.arange(start, min(start + batch_size, vocab)).unsqueeze(1)
            inputs = torch.cat([torch.full_like(ids, cls), ids, torch.full_like(ids, sep)], dim=1)
            hidden = transformer(input_ids=inputs, attention_mask=torch.ones_like(inputs)).last_hidden_state
            table[start:start + len(ids)] = hidden.mean(dim=1).numpy()
    print(f"{vocab} pieces embedded in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    static = StaticEmbedding(tokenizer, embedding_weights=table)
    SentenceTransformer(modules=[static], device="cpu").save(str(out))
    return out


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO / "data" / "models" / "minilm-static"
    print(distill(target))
