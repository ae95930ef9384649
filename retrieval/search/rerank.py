"""The rerank stage: re-score the first top-N fused results with a second model and reorder them.

The new order follows an interpolation of the two stages (`interpolate`):
final = λ·minmax(fused score) + (1 − λ)·minmax(rerank score) over the reranked head; λ = 0 is a
pure replacement by the reranker's order, λ = 1 keeps the first stage's.

Rerankers are pluggable (`Reranker`): the offline default re-scores with multilingual-e5-small
(`E5Reranker`); with a local folder (or a hub id, where the network exists) a sentence-transformers
`CrossEncoder` does it (`CrossEncoderReranker`). `get_reranker` picks one by name.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from retrieval.cache import LRU, RerankCache
from retrieval.models.embed import E5, device, load_failure, looks_like_path, open_encoder
from retrieval.types import FusedResult, RerankedResult, RetrievalError

if TYPE_CHECKING:
    from sentence_transformers import CrossEncoder

E5_RERANKER = "e5"
_E5_MAX_TOKENS = 512  # the model's own limit: re-scoring reads as much text as E5 can
# Characters of a text handed to the E5 tokenizer: 16 per token is far more than any real token
# takes, so the model reads exactly what it would read of the whole text, and a 1 MB document is
# not tokenised in full only to be cut at 512 tokens.
_E5_MAX_CHARS = 16 * _E5_MAX_TOKENS


# What E5 re-scoring (on its CPU backend, the int8 export) did to nDCG@10 at the shipped top-N
# and λ, on the five evaluation sets, against the shipped first stage (benchmarks/
# relevance_study.py rerank; the whole table is in docs/experiments/rerank.md). The rerank switch
# shows it.
MEASURED_RERANK: dict = {
    "top_n": 20, "lambda": 0.6, "first_stage": "weighted sum, l2, BM25 0.4 / vector 0.6, depth 100",
    "delta_ndcg10": {"nfcorpus": 0.0049, "vaswani": 0.0018, "xquad-en": 0.0035, "xquad-zh": 0.0087,
                     "cmrc2018-dev": 0.0052},
}


def measured_effect(config) -> str:
    """One sentence for beside the rerank switch: the measured ΔnDCG@10 of the shipped rerank
    settings per evaluation set, and whether `config` is using those settings."""
    if config.reranker != E5_RERANKER:
        return (f"Reranker {config.reranker!r} was not measured here: compare first stage and reranked on "
                "your own judgments (Evaluate → A/B).")
    deltas = MEASURED_RERANK["delta_ndcg10"]
    if not deltas:
        return "The E5 reranker's effect has not been measured yet (docs/experiments/rerank.md)."
    top_n, lam = MEASURED_RERANK["top_n"], MEASURED_RERANK["lambda"]
    per_set = ", ".join(f"{name} {delta:+.4f}" for name, delta in deltas.items())
    text = (f"Measured with E5, top-{top_n}, λ = {lam:g} over the default first stage, nDCG@10: {per_set} "
            "(docs/experiments/rerank.md).")
    if (config.rerank_top_n, config.rerank_lambda) != (top_n, lam):
        text += f" Your top-N {config.rerank_top_n} / λ {config.rerank_lambda:g} differ from what was measured."
    return text


class Reranker(Protocol):
    """Scores (query, text) pairs; a higher score means more relevant.

    `name` identifies the model (it keys the score cache); `kind` says in words what it is. A
    bi-encoder reranker also has `passage_model` (the embedding model of its passages) and takes
    a passage-embedding cache: `score(query, texts, passages)`, seeded by `seed_passages`.
    """

    name: str
    kind: str

    def score(self, query: str, texts: list[str]) -> list[float]: ...


def passage_key(model: str, text: str) -> tuple[str, int]:
    """The key of a passage embedding in `Caches.passage_vectors`: the model and the text's hash."""
    return (model, hash(text))


class E5Reranker:
    """Bi-encoder re-scoring with multilingual-e5-small, on its own model instance.

    score = cos(E("query: " + query), E("passage: " + text)), text truncated at 512 tokens.
    Pass the document's full text (title + "\\n" + text).
    """

    name = E5_RERANKER
    kind = f"bi-encoder re-scoring ({E5}, full text)"
    # Its passage embeddings are E5's of "passage: " + the text, as a collection stores them in
    # an E5 vector column: `seed_passages` takes those instead of embedding again, when the
    # collection's were computed on the reranker's own backend (`backend`).
    passage_model = E5

    def __init__(self, batch_size: int = 16):
        self.batch_size = batch_size
        # The backend E5 embeds with at ingest (`embed.backend_for`: the int8 export on a CPU), so
        # that stored passage vectors are the reranker's own; the measured effect
        # (MEASURED_RERANK) is this backend's.
        self.encoder = open_encoder(E5, max_seq_length=_E5_MAX_TOKENS)
        self.backend = self.encoder.backend

    def score(self, query: str, texts: list[str], passages: LRU | None = None) -> list[float]:
        """Cosines of the query to each text. With `passages` (an LRU keyed by `passage_key`),
        each text is embedded once per model and text, in batches, and reused for every query."""
        if not texts:
            return []
        import numpy as np

        q = self.encoder.encode_queries([query])[0]
        texts = [t[:_E5_MAX_CHARS] for t in texts]
        if passages is None:
            vectors = self.encoder.encode_passages(texts, batch_size=self.batch_size)
        else:
            keys = [passage_key(self.name, t) for t in texts]
            found = [passages.get(k) for k in keys]
            todo = list(dict.fromkeys(t for t, v in zip(texts, found, strict=True) if v is None))
            if todo:
                fresh = self.encoder.encode_passages(todo, batch_size=self.batch_size)
                for text, vector in zip(todo, fresh, strict=True):
                    passages.put(passage_key(self.name, text), vector)
                new = dict(zip(todo, fresh, strict=True))
                found = [v if v is not None else new[t] for t, v in zip(texts, found, strict=True)]
            vectors = np.stack(found)
        return [float(s) for s in vectors @ q]


class CrossEncoderReranker:
    """A sentence-transformers CrossEncoder: score = model(query, text), one output per pair.

    Pairs go through the model `batch_size` at a time. Calls are serialised: a fast tokenizer
    raises "Already borrowed" when two threads use it at once.
    """

    def __init__(self, model: str, batch_size: int = 32):
        self.name = model
        self.kind = f"cross-encoder ({model})"
        self.batch_size = batch_size
        self.model = _load_cross_encoder(model)
        self._lock = threading.Lock()

    def score(self, query: str, texts: list[str]) -> list[float]:
        if not texts:
            return []
        with self._lock:
            scores = self.model.predict(
                [(query, t) for t in texts],
                batch_size=self.batch_size,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        if scores.ndim != 1:
            raise RetrievalError(
                f"Cross-encoder {self.name!r} gives {scores.shape[-1]} outputs per pair; "
                "a reranker needs a model with a single relevance score"
            )
        return [float(s) for s in scores]


def _load_cross_encoder(model: str) -> CrossEncoder:
    from sentence_transformers import CrossEncoder

    source = str(Path(model).expanduser()) if looks_like_path(model) else model
    try:
        return CrossEncoder(source, device=device())
    except Exception as exc:  # OSError, ValueError, HF hub errors … all mean "cannot load"
        offline = f"a local CrossEncoder folder, or {E5_RERANKER!r} (E5 re-scoring)"
        raise RetrievalError(load_failure("cross-encoder", model, exc, offline)) from exc


_rerankers: dict[str, Reranker] = {}
_rerankers_lock = threading.Lock()


def get_reranker(name: str) -> Reranker:
    """'e5' -> E5Reranker; anything else -> CrossEncoderReranker(name). One instance per process."""
    with _rerankers_lock:
        if name not in _rerankers:
            _rerankers[name] = E5Reranker() if name == E5_RERANKER else CrossEncoderReranker(name)
        return _rerankers[name]


def seed_passages(passages: LRU, reranker: Reranker, texts: dict[str, str], doc_ids: Iterable[str],
                  stored: Callable[[list[str]], dict[str, Any]]) -> int:
    """Put the collection's stored passage embeddings of `doc_ids` (`stored(ids)`: doc id ->
    vector by the reranker's `passage_model`, embedded at ingest from the same text) into the
    passage cache, so re-scoring them costs one query embedding. Only passages not cached yet are
    read (a rerun of the same head reads nothing), and only texts the reranker reads whole
    (≤ `_E5_MAX_CHARS`; the model truncates both alike at its token window) are seeded, so a
    seeded vector is the one the reranker would compute. Returns how many were seeded."""
    keys = {d: passage_key(reranker.name, texts[d]) for d in doc_ids
            if d in texts and len(texts[d]) <= _E5_MAX_CHARS}
    missing = [d for d, key in keys.items() if passages.get(key) is None]
    if not missing:
        return 0
    found = stored(missing)
    for doc_id, vector in found.items():
        passages.put(keys[doc_id], vector)
    return len(found)


def interpolate(first_stage: list[float], rerank_scores: list[float], first_stage_weight: float
                ) -> tuple[list[float], list[float], list[float]]:
    """final_i = λ·a_i + (1 − λ)·b_i with a = minmax(first_stage), b = minmax(rerank_scores),
    λ = `first_stage_weight` ∈ [0, 1]; returns (a, b, final).

    Min-max over the reranked head puts both stages on [0, 1] (equal scores all map to 1.0, see
    `normalize.min_max`). A NaN rerank score (a model that failed on one text) gets a NaN final
    score and sorts last; the other texts are normalised without it.
    """
    from retrieval.search.fusion.normalize import min_max

    if not 0.0 <= first_stage_weight <= 1.0:
        raise RetrievalError(f"the rerank interpolation weight λ must be in [0, 1], got {first_stage_weight}")
    a = min_max(first_stage)
    finite = [s for s in rerank_scores if not math.isnan(s)]
    normed = iter(min_max(finite))
    b = [math.nan if math.isnan(s) else next(normed) for s in rerank_scores]
    lam = first_stage_weight
    return a, b, [lam * x + (1.0 - lam) * y for x, y in zip(a, b, strict=True)]


def rerank(
    query: str,
    fused: list[FusedResult],
    texts: dict[str, str],
    reranker: Reranker,
    top_n: int,
    cache: RerankCache | None = None,
    first_stage_weight: float = 0.0,
    passages: LRU | None = None,
) -> list[RerankedResult]:
    """Re-score the first `top_n` of `fused` (taken in list order, i.e. fused rank order).

    rerank_score = reranker.score(query, texts[doc_id]); the head is ordered by
    final = λ·minmax(fused score) + (1 − λ)·minmax(rerank_score) descending (`interpolate`, λ =
    `first_stage_weight`; NaN last), ties by rerank_score descending, then first-stage rank. So λ = 0
    orders by the rerank score alone (a replacement), λ = 1 keeps the fused order.
    `rank` is the new 1-based position, `first_stage_rank` the fused rank. Results beyond
    `top_n` are not returned (the caller shows them as not reranked). Only documents without a
    cached score are sent to the model; `passages` caches E5 passage embeddings across queries.
    """
    if top_n < 1:
        raise RetrievalError(f"rerank top_n must be ≥ 1, got {top_n}")
    head = fused[:top_n]
    docs = _texts_for(head, texts)
    scores = rerank_scores(query, docs, reranker, cache, passages)
    rerank_values = [scores[r.doc_id] for r in head]
    first_norm, rerank_norm, final, order = interpolated_order([r.score for r in head], rerank_values,
                                                               first_stage_weight)
    return [
        RerankedResult(doc_id=head[j].doc_id, rank=i, first_stage_rank=head[j].rank, rerank_score=rerank_values[j],
                       fused=head[j], first_stage_norm=first_norm[j], rerank_norm=rerank_norm[j],
                       final_score=final[j], first_stage_weight=first_stage_weight)
        for i, j in enumerate(order, start=1)
    ]


def interpolated_order(first_stage: list[float], rerank_scores: list[float], first_stage_weight: float
                       ) -> tuple[list[float], list[float], list[float], list[int]]:
    """`interpolate`'s (a, b, final) for a head given in first-stage order, plus `order`: the
    head's positions best first, by final descending (NaN last), then rerank score descending
    (NaN last), then first-stage position. `rerank` and the sweep's rerank variants both order
    by it."""
    a, b, final = interpolate(first_stage, rerank_scores, first_stage_weight)
    order = sorted(range(len(final)), key=lambda i: (_sort_score(final[i]), _sort_score(rerank_scores[i]), i))
    return a, b, final, order


def _texts_for(results: Iterable[FusedResult], texts: dict[str, str]) -> dict[str, str]:
    missing = [r.doc_id for r in results if r.doc_id not in texts]
    if missing:
        raise RetrievalError(f"No text for document(s) to rerank: {', '.join(missing[:10])}")
    return {r.doc_id: texts[r.doc_id] for r in results}


def rerank_scores(query: str, docs: dict[str, str], reranker: Reranker, cache: RerankCache | None,
                  passages: LRU | None = None) -> dict[str, float]:
    """reranker.score(query, text) for each doc id -> text of `docs`: the cached scores plus fresh
    ones for the rest (stored back in the cache)."""
    scores = cache.get_many(reranker.name, query, docs) if cache is not None else {}
    todo = [d for d in docs if d not in scores]
    if todo:
        texts = [docs[d] for d in todo]
        # A bi-encoder reranker (one with a `passage_model`) takes the passage-embedding cache.
        bi_encoder = passages is not None and getattr(reranker, "passage_model", None) is not None
        fresh = reranker.score(query, texts, passages) if bi_encoder else reranker.score(query, texts)
        if len(fresh) != len(todo):
            raise RetrievalError(f"Reranker {reranker.name!r} returned {len(fresh)} scores for {len(todo)} texts")
        fresh_scores = dict(zip(todo, map(float, fresh), strict=True))
        if cache is not None:
            cache.put_many(reranker.name, query, docs, fresh_scores)
        scores.update(fresh_scores)
    return scores


def _sort_score(score: float) -> float:
    """Sort key for descending score with NaN last."""
    return -score if not math.isnan(score) else math.inf
