"""A loaded sentence encoder (`Encoder`): a model and its spec (`ModelSpec`), encoding queries and
passages with the model's prompts, and counting the passages it truncates.

The model is a sentence-transformers model on torch (`TORCH`) or an ONNX Runtime export
(`retrieval.models.onnx_model`). Every vector returned is L2-normalised float32, so a dot product is
the cosine similarity. A torch model's weights dtype and passage batch size follow where it runs
(`torch_settings`). Which model, backend and device, and loading once per process, are
`retrieval.models.embed`'s.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

import retrieval.models.onnx_model as onnx_model

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

# The backend of a sentence-transformers model; the others are the ONNX exports' variants
# (`onnx_export.VARIANTS`).
TORCH = "torch"
# Texts per forward pass: 16 encoded ~8% more documents per CPU-second than 32 with both models
# on torch (docs/experiments/encoder.md); larger batches were slower still.
BATCH_SIZE = 16
# On a GPU: fp16 weights and activations, and passages in batches of this many (a GPU is
# underused by 16 texts at a time; 128 × 256 tokens of MiniLM or E5-small in fp16 fit any card).
GPU_BATCH_SIZE = 128
# A static-embedding model (sentence-transformers' StaticEmbedding: a token table averaged, no
# attention, no padding) gets its passages in batches of this many: its cost per text is tiny, so
# the per-batch overhead of `SentenceTransformer.encode` bounded it at batches of 16 (vaswani's
# texts on 2 cores: 4,600 docs/s at 16, 10,400 at 256, 12,300 at 1,024; docs/experiments/ingest.md).
STATIC_BATCH_SIZE = 1024
# Passages are sorted by length and encoded in chunks of this many batches, one progress
# report per chunk.
_BATCHES_PER_CHUNK = 8


@dataclass(frozen=True)
class ModelSpec:
    """What an embedding model is and how to feed it.

    `name` is what the caller asked for (alias, folder or id) and what a collection records;
    `path` is where it loads from. Queries are encoded as ``query_prompt + text`` and passages as
    ``passage_prompt + text``; input is truncated to `max_seq_length` tokens.
    """

    name: str
    path: str
    dim: int
    query_prompt: str
    passage_prompt: str
    max_seq_length: int


ProgressFn = Callable[[int, int], None]


class Encoder:
    """A loaded sentence-transformers model and its spec.

    ``encode_*`` return an ``(n, dim)`` float32 array of unit vectors: v = f(prompt + text) / ‖f(·)‖.
    Calls are serialised per encoder: a fast tokenizer raises "Already borrowed" when two threads
    use it at once, and on a CPU two concurrent encodes only compete for the same cores.
    """

    def __init__(self, spec: ModelSpec, model: SentenceTransformer | onnx_model.OnnxSentenceModel,
                 backend: str = TORCH):
        self.spec = spec
        self.model = model
        self.backend = backend
        self._lock = threading.Lock()
        on = str(getattr(model, "device", "cpu"))  # an ONNX model has none: the CPU
        self.passage_batch_size = (STATIC_BATCH_SIZE if is_static(model)
                                   else torch_settings("cuda" if on.startswith("cuda") else "cpu")[1])

    def encode_queries(self, texts: Sequence[str], batch_size: int = BATCH_SIZE) -> np.ndarray:
        """Embeddings of ``query_prompt + text`` for each text."""
        return self._encode(list(texts), self.spec.query_prompt, batch_size)

    def encode_passages(
        self,
        texts: Sequence[str],
        batch_size: int | None = None,
        progress: ProgressFn | None = None,
    ) -> np.ndarray:
        """Embeddings of ``passage_prompt + text`` for each text, in input order.

        Texts are encoded longest first, so that each batch pads to similar lengths, `batch_size`
        at a time (default: `torch_settings`' for where the model runs); `progress` gets
        ``(done, total)`` before the first chunk and after every chunk.
        """
        batch_size = batch_size or self.passage_batch_size
        texts = list(texts)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.empty((len(texts), self.spec.dim), dtype=np.float32)
        chunk = batch_size * _BATCHES_PER_CHUNK
        if progress:
            progress(0, len(texts))
        for start in range(0, len(texts), chunk):
            idx = order[start : start + chunk]
            out[idx] = self._encode([texts[i] for i in idx], self.spec.passage_prompt, batch_size)
            if progress:
                progress(min(start + chunk, len(texts)), len(texts))
        return out

    def count_truncated(self, texts: Sequence[str], batch_size: int = 256) -> int:
        """How many passages the model truncates: those whose ``passage_prompt + text`` is more
        than `max_seq_length` tokens by the model's own tokenizer (`token_lengths`). Every text is
        tokenised, in batches: an exact count, and cheap next to embedding (the 120 XQuAD
        paragraphs: ~30 ms, against ~2 s to embed 32 of them); a text's character length bounds
        nothing (NFKC turns one character into up to 18, a byte-level BPE a character into up to
        4 tokens). 0 for a model without a window or a tokenizer that counts."""
        window = self.spec.max_seq_length
        # A static-embedding model (sentence-transformers' StaticEmbedding) has no window (inf).
        if not window or window == float("inf"):
            return 0
        lengths = self.token_lengths(texts, batch_size)
        return 0 if lengths is None else sum(n > window for n in lengths)

    def token_lengths(self, texts: Sequence[str], batch_size: int = 256) -> list[int] | None:
        """Each passage's length in tokens before truncation (``passage_prompt + text``, special
        tokens included, as the model counts them); None for a model whose tokenizer does not
        count (a bare `tokenizers.Tokenizer` of a static-embedding model is not callable)."""
        if isinstance(self.model, onnx_model.OnnxSentenceModel):
            count = self.model.token_lengths
        else:
            tokenizer = getattr(self.model, "tokenizer", None)
            if tokenizer is None or not callable(tokenizer):
                return None

            def count(batch: list[str]) -> list[int]:
                ids = tokenizer(batch, add_special_tokens=True, truncation=False, verbose=False,
                                return_attention_mask=False, return_token_type_ids=False)["input_ids"]
                return [len(i) for i in ids]
        prompt = self.spec.passage_prompt
        lengths: list[int] = []
        with self._lock:
            for start in range(0, len(texts), batch_size):
                lengths += count([prompt + t for t in texts[start:start + batch_size]])
        return lengths

    def _encode(self, texts: list[str], prompt: str, batch_size: int) -> np.ndarray:
        if not texts:
            return np.empty((0, self.spec.dim), dtype=np.float32)
        with self._lock:
            vectors = self.model.encode(
                texts,
                prompt=prompt,
                batch_size=batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32)


def is_static(model) -> bool:
    """Whether `model` is a sentence-transformers model whose first module is a StaticEmbedding
    (a model2vec-style token table: no window, no attention)."""
    modules = getattr(model, "_modules", None)  # a torch Sequential's; an ONNX model has none
    return bool(modules) and type(next(iter(modules.values()))).__name__ == "StaticEmbedding"


def torch_settings(where: str) -> tuple[str, int]:
    """(weights dtype, passages per batch) of a torch encoder on `where` ("cuda" or "cpu"): fp16
    and `GPU_BATCH_SIZE` on a GPU, fp32 and `BATCH_SIZE` on a CPU (fp16 matmuls are slow or
    missing on CPUs; docs/experiments/encoder.md has the CPU batch sizes)."""
    return ("float16", GPU_BATCH_SIZE) if where == "cuda" else ("float32", BATCH_SIZE)
