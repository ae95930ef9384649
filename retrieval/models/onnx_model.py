"""A sentence encoder on ONNX Runtime: an export (`retrieval.models.onnx_export`, built on first use
by `load_onnx_model`) run in a session on the CPU, `OnnxSentenceModel`. Loading an export needs only
onnxruntime and its tokenizer: neither torch nor transformers is imported.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from retrieval.models.onnx_export import (
    MANIFEST,
    MODEL_FILE,
    ONNX_INT8,
    TOKENIZER_DIR,
    ensure_onnx_model,
    load_tokenizer,
)

# Per-text runs of an int8 export at once: one per core measured faster on 2 cores; each run holds
# its own activations in the session's arena, so many cores do not get one each unmeasured.
MAX_RUNS_AT_ONCE = 4


class OnnxSentenceModel:
    """An export run by ONNX Runtime on the CPU, with the ``encode`` that `encoder.Encoder` calls.

    Texts are tokenised ``batch_size`` at a time (longest first, padded to the batch's longest,
    truncated to ``max_seq_length`` tokens) and returned in input order. An int8 export runs each
    text alone (`per_text`): its activations' quantisation scale is then the text's own, so a
    text's vector does not depend on what it is encoded with. Those runs go `threads` at a time,
    at most `MAX_RUNS_AT_ONCE` (ONNX Runtime's `run` is thread-safe and releases the GIL; texts are
    tokenised in the calling thread, whose tokenizer settings `max_seq_length` may change): a text
    alone keeps too few rows to busy every intra-op thread (2 cores, passages of the 1M scale
    corpus: 10–25% more documents/s, the same vectors to the bit; docs/experiments/encoder.md).
    Like the ONNX Runtime session it holds, a model is not usable in a forked child.
    """

    def __init__(self, folder: Path, threads: int | None = None):
        import onnxruntime as ort

        manifest = json.loads((Path(folder) / MANIFEST).read_text(encoding="utf-8"))
        self.folder = Path(folder)
        self.variant = manifest["variant"]
        self.inputs: list[str] = manifest["inputs"]
        self._max_seq_length: int = manifest["max_seq_length"]
        self.dim: int = manifest["dim"]
        self.per_text = self.variant == ONNX_INT8  # dynamic activation scales span the whole input
        self.tokenizer = load_tokenizer(self.folder / TOKENIZER_DIR, self._max_seq_length)
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads or _default_threads()
        # Idle threads sleep rather than spin, as embed.py asks of torch's OpenMP threads: on
        # 2 cores shared with other busy processes spinning threads slow everything down.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(self.folder / MODEL_FILE), options, providers=["CPUExecutionProvider"])
        self.threads = options.intra_op_num_threads
        self._runs: ThreadPoolExecutor | None = None  # the per-text runs' threads, made on first use

    @property
    def max_seq_length(self) -> int:
        """Tokens a text is cut to (special tokens included); settable, as a SentenceTransformer's."""
        return self._max_seq_length

    @max_seq_length.setter
    def max_seq_length(self, value: int) -> None:
        self._max_seq_length = int(value)
        truncation = dict(self.tokenizer.truncation)
        truncation["max_length"] = self._max_seq_length
        self.tokenizer.enable_truncation(**truncation)

    def get_embedding_dimension(self) -> int:
        return self.dim

    def encode(self, texts: Sequence[str], prompt: str = "", batch_size: int = 32, **_ignored) -> np.ndarray:
        """(n, dim) float32 unit vectors of ``prompt + text``; extra keywords (sentence-transformers'
        ``normalize_embeddings``, ``convert_to_numpy``, ``show_progress_bar``) are accepted: the
        graph always normalises and the output is always numpy."""
        texts = [prompt + t for t in texts]
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        if self.per_text:
            if len(texts) < 2 or self.threads < 2:
                for i, text in enumerate(texts):
                    out[i] = self.encode_batch([text])[0]
                return out
            if self._runs is None:
                self._runs = ThreadPoolExecutor(min(self.threads, MAX_RUNS_AT_ONCE), thread_name_prefix="onnx-runs")
            for i, vectors in enumerate(self._runs.map(self._run, (self._feed([text]) for text in texts))):
                out[i] = vectors[0]
            return out
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        for start in range(0, len(texts), batch_size):
            idx = order[start : start + batch_size]
            out[idx] = self.encode_batch([texts[i] for i in idx])
        return out

    def encode_batch(self, texts: list[str]) -> np.ndarray:
        return self._run(self._feed(texts))

    def _feed(self, texts: list[str]) -> dict[str, np.ndarray]:
        """The graph's inputs for `texts`: token ids (and masks) padded to the longest."""
        encodings = self.tokenizer.encode_batch(texts)
        columns = {"input_ids": "ids", "attention_mask": "attention_mask", "token_type_ids": "type_ids"}
        return {name: np.array([getattr(e, columns[name]) for e in encodings], dtype=np.int64)
                for name in self.inputs}

    def token_lengths(self, texts: Sequence[str]) -> list[int]:
        """Each text's length in tokens before truncation, special tokens included: its tokens
        without them (what truncation cut is kept as the encoding's overflow; padding is masked)
        plus what the post-processor adds. One tokenizer serves both this and `_feed`: E5's takes
        ~280 MB, a second copy untruncated would double it."""
        processor = self.tokenizer.post_processor
        specials = processor.num_special_tokens_to_add(False) if processor is not None else 0
        return [sum(e.attention_mask) + sum(sum(o.attention_mask) for o in e.overflowing) + specials
                for e in self.tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    def _run(self, feed: dict[str, np.ndarray]) -> np.ndarray:
        return self.session.run(None, feed)[0]


def _default_threads() -> int:
    """One intra-op thread per core the process may use (torch's default too)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def load_onnx_model(model_path: Path, cache_root: Path, variant: str) -> OnnxSentenceModel:
    """The export of `model_path` as `variant` (built on first use), ready to encode."""
    return OnnxSentenceModel(ensure_onnx_model(model_path, cache_root, variant))
