"""Writes without a model, for tests of the write path itself: a deterministic encoder of
MiniLM's dimension and a new collection's catalogue entry (`indexing.writer.write_batches`)."""

from __future__ import annotations

import numpy as np

from retrieval.store import CollectionInfo, now_iso

DIM = 384


class FixedEncoder:
    """Deterministic unit vectors of MiniLM's dimension, without a model."""

    class spec:  # mirrors Encoder.spec
        name, dim = "all-MiniLM-L6-v2", DIM

    def encode_passages(self, texts, progress=None):
        vectors = np.random.default_rng(len(texts)).normal(size=(len(texts), DIM)).astype(np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def new_info(name: str, language: str = "en") -> CollectionInfo:
    """The catalogue entry of a collection about to be created by `write_batches`."""
    now = now_iso()
    return CollectionInfo(name=name, model=FixedEncoder.spec.name, dim=DIM, language=language,
                          tokenizer="jieba" if language == "zh" else "t", doc_count=0, created=now,
                          updated=now, lancedb_version="x")
