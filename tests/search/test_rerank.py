"""The rerank stage with real models: E5 re-scoring, and a tiny CrossEncoder built here."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval.cache import LRU, RerankCache
from retrieval.models.embed import E5, load_encoder
from retrieval.search.rerank import (
    CrossEncoderReranker,
    E5Reranker,
    get_reranker,
    interpolate,
    interpolated_order,
    rerank,
)
from retrieval.types import FusedResult, RetrievalError

WORDS = "the a cat dog sat on mat sun is hot cold paris capital of france bread bake".split()


def fused_list(doc_ids: list[str]) -> list[FusedResult]:
    """Fused results in rank order, scores falling with rank."""
    return [
        FusedResult(doc_id=d, rank=i, score=1 / (60 + i), display_score=1 / i, sources={})
        for i, d in enumerate(doc_ids, start=1)
    ]


@pytest.fixture(scope="module")
def e5_reranker() -> E5Reranker:
    reranker = get_reranker("e5")
    assert isinstance(reranker, E5Reranker)
    return reranker


@pytest.fixture(scope="module")
def tiny_cross_encoder_dir(tmp_path_factory):
    """A 1-layer BERT sequence classifier with a word-level tokenizer: real, tiny, meaningless."""
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors
    from transformers import BertConfig, BertForSequenceClassification, PreTrainedTokenizerFast

    folder = tmp_path_factory.mktemp("tiny-cross-encoder")
    vocab = {t: i for i, t in enumerate(["[PAD]", "[UNK]", "[CLS]", "[SEP]", *WORDS])}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.post_processor = processors.BertProcessing(("[SEP]", 3), ("[CLS]", 2))
    PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]",
        sep_token="[SEP]", model_max_length=64,
    ).save_pretrained(folder)  # fmt: skip
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=64, num_labels=1,
                        initializer_range=0.5)  # wide init, so that scores differ visibly
    BertForSequenceClassification(config).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def cross(tiny_cross_encoder_dir) -> CrossEncoderReranker:
    return CrossEncoderReranker(str(tiny_cross_encoder_dir), batch_size=2)


@pytest.fixture
def batches(cross):
    """Sizes of the batches the cross-encoder's transformer sees, recorded while a test runs."""
    sizes: list[int] = []
    hook = cross.model[0].register_forward_pre_hook(
        lambda module, args, kwargs: sizes.append(int(args[0]["input_ids"].shape[0])), with_kwargs=True
    )
    yield sizes
    hook.remove()


DOCS = {
    "d1": "the dog sat on the mat",
    "d2": "paris is the capital of france",
    "d3": "the sun is hot",
    "d4": "bake bread",
    "d5": "the cat is cold",
    "d6": "a dog",
}


# --- E5 re-scoring -----------------------------------------------------------------------------------


def test_e5_reranker_describes_itself(e5_reranker):
    assert e5_reranker.name == "e5"
    assert e5_reranker.kind == "bi-encoder re-scoring (multilingual-e5-small, full text)"
    assert get_reranker("e5") is e5_reranker


def test_e5_reranker_has_its_own_512_token_instance(e5_reranker):
    assert e5_reranker.encoder.model.max_seq_length == 512
    assert e5_reranker.encoder.model is not load_encoder(E5).model


def test_e5_reranker_moves_the_relevant_passage_first(e5_reranker):
    texts = {
        "stocks": "Markets\nShares fell sharply on Wall Street after the interest rate decision.",
        "weather": "Forecast\nRain is expected across the north tomorrow afternoon.",
        "paris": "Paris\nParis is the capital and largest city of France.",
    }
    out = rerank("What is the capital of France?", fused_list(list(texts)), texts, e5_reranker, top_n=3)
    assert out[0].doc_id == "paris"
    assert (out[0].rank, out[0].first_stage_rank, out[0].rank_change) == (1, 3, 2)
    assert [r.rerank_score for r in out] == sorted((r.rerank_score for r in out), reverse=True)


def test_e5_reranker_chinese(e5_reranker):
    scores = e5_reranker.score("如何保持身体健康",
                               ["这台笔记本电脑的屏幕分辨率很高。", "坚持锻炼和均衡饮食有助于保持健康。"])
    assert scores[1] > scores[0]


def test_e5_score_is_the_cosine_of_prompted_embeddings(e5_reranker):
    query, text = "bread recipe", "Bread\nMix flour, water, salt and yeast, then bake."
    encoder = e5_reranker.encoder
    expected = float(encoder.encode_passages([text])[0] @ encoder.encode_queries([query])[0])
    assert e5_reranker.score(query, [text]) == pytest.approx([expected], abs=1e-5)


def test_e5_passages_are_embedded_once_per_text_across_queries(e5_reranker, monkeypatch):
    texts = ["Bread\nMix flour, water, salt and yeast, then bake.", "Paris is the capital of France."]
    plain = e5_reranker.score("bread recipe", texts)
    encoded: list[int] = []
    real = e5_reranker.encoder.encode_passages
    monkeypatch.setattr(e5_reranker.encoder, "encode_passages",
                        lambda batch, **kw: encoded.append(len(batch)) or real(batch, **kw))
    passages = LRU(10)
    assert e5_reranker.score("bread recipe", texts, passages) == pytest.approx(plain, abs=1e-6)
    assert e5_reranker.score("capital of France", texts + texts[:1], passages) == pytest.approx(
        e5_reranker.score("capital of France", texts + texts[:1]), abs=1e-6)
    # the cached call embedded 2 passages once; the uncached comparison call embedded 3 again
    assert encoded == [2, 3]


# --- interpolation ------------------------------------------------------------------------------------


class FixedScores:
    """A reranker with given scores per text: tests the ordering arithmetic, nothing else."""

    name, kind = "fixed", "fixed scores (test)"

    def __init__(self, scores: dict[str, float]):
        self.scores = scores

    def score(self, query, texts):
        return [self.scores[t] for t in texts]


def test_interpolate_hand_computed():
    # a = minmax(3, 2, 1) = (1, 0.5, 0); b = minmax(0.1, 0.9, 0.5) = (0, 1, 0.5)
    a, b, final = interpolate([3.0, 2.0, 1.0], [0.1, 0.9, 0.5], 0.5)
    assert a == [1.0, 0.5, 0.0]
    assert b == pytest.approx([0.0, 1.0, 0.5])
    assert final == pytest.approx([0.5, 0.75, 0.25])
    assert interpolate([3.0, 2.0, 1.0], [0.1, 0.9, 0.5], 0.25)[2] == pytest.approx([0.25, 0.875, 0.375])
    # a NaN rerank score: normalised without it, final NaN (sorted last by rerank)
    _, b, final = interpolate([2.0, 1.0, 0.0], [0.2, float("nan"), 0.6], 0.5)
    assert b[0] == 0.0 and b[2] == pytest.approx(1.0) and b[1] != b[1] and final[1] != final[1]
    with pytest.raises(RetrievalError, match="λ must be in"):
        interpolate([1.0], [1.0], 1.5)


def test_rerank_order_follows_lambda():
    texts = {"d1": "t1", "d2": "t2", "d3": "t3"}
    reranker = FixedScores({"t1": 0.1, "t2": 0.9, "t3": 0.5})
    head = [FusedResult(doc_id=d, rank=i, score=s, display_score=s, sources={})
            for i, (d, s) in enumerate((("d1", 3.0), ("d2", 2.0), ("d3", 1.0)), start=1)]

    def order(lam):
        return [r.doc_id for r in rerank("q", head, texts, reranker, 3, first_stage_weight=lam)]

    assert order(0.0) == ["d2", "d3", "d1"]  # the reranker's order: a replacement
    assert order(0.5) == ["d2", "d1", "d3"]  # finals 0.75, 0.5, 0.25
    assert order(1.0) == ["d1", "d2", "d3"]  # the first stage's
    top = rerank("q", head, texts, reranker, 3, first_stage_weight=0.5)[0]
    assert (top.doc_id, top.first_stage_norm, top.rerank_norm, top.final_score, top.first_stage_weight) == (
        "d2", 0.5, 1.0, 0.75, 0.5)


# --- cross-encoder plumbing ---------------------------------------------------------------------------


def test_cross_encoder_describes_itself(cross, tiny_cross_encoder_dir):
    assert cross.name == str(tiny_cross_encoder_dir)
    assert cross.kind == f"cross-encoder ({tiny_cross_encoder_dir})"
    assert get_reranker(str(tiny_cross_encoder_dir)) is get_reranker(str(tiny_cross_encoder_dir))


def test_cross_encoder_batches(cross, batches):
    texts = list(DOCS.values())[:5]
    scores = cross.score("the cat", texts)
    assert sorted(batches) == [1, 2, 2]
    unbatched = cross.model.predict([("the cat", t) for t in texts], batch_size=64)
    assert np.allclose(scores, unbatched, atol=1e-5)
    assert len(set(np.round(scores, 6))) == 5  # distinct, so the ordering test below means something


def test_rerank_orders_by_cross_encoder_scores(cross):
    ids = list(DOCS)
    out = rerank("the cat", fused_list(ids), DOCS, cross, top_n=6)
    own = dict(zip(ids, cross.score("the cat", [DOCS[d] for d in ids]), strict=True))
    assert [r.doc_id for r in out] == sorted(ids, key=lambda d: -own[d])
    assert [r.rank for r in out] == [1, 2, 3, 4, 5, 6]
    assert all(r.first_stage_rank == ids.index(r.doc_id) + 1 for r in out)
    assert all(r.rerank_score == pytest.approx(own[r.doc_id]) and r.fused.doc_id == r.doc_id for r in out)


def test_rerank_ties_keep_first_stage_order(cross):
    texts = {"a": "the sun is hot", "b": "bake bread", "c": "the sun is hot"}
    out = rerank("the cat", fused_list(["a", "b", "c"]), texts, cross, top_n=3)
    tied = [r for r in out if r.doc_id in ("a", "c")]
    assert tied[0].rerank_score == tied[1].rerank_score
    assert [r.doc_id for r in tied] == ["a", "c"]


def test_rerank_cuts_at_top_n(cross):
    fused = fused_list(list(DOCS))
    out = rerank("the cat", fused, DOCS, cross, top_n=3)
    assert sorted(r.doc_id for r in out) == ["d1", "d2", "d3"]
    assert len(rerank("the cat", fused, DOCS, cross, top_n=50)) == 6
    with pytest.raises(RetrievalError, match="top_n"):
        rerank("the cat", fused, DOCS, cross, top_n=0)


def test_rerank_cache_scores_each_pair_once(cross, batches):
    cache = RerankCache()
    fused = fused_list(list(DOCS))
    first = rerank("the dog", fused, DOCS, cross, top_n=4, cache=cache)
    assert sum(batches) == 4 and len(cache) == 4
    batches.clear()
    again = rerank("the dog", fused, DOCS, cross, top_n=4, cache=cache)
    assert batches == [] and again == first  # nothing computed the second time
    deeper = rerank("the dog", fused, DOCS, cross, top_n=6, cache=cache)
    assert sum(batches) == 2  # only the two new documents
    assert {r.doc_id: r.rerank_score for r in deeper if r.doc_id in {x.doc_id for x in first}} == {
        r.doc_id: r.rerank_score for r in first
    }
    batches.clear()
    changed = dict(DOCS, d1="the cat sat on the mat")
    rerank("the dog", fused, changed, cross, top_n=6, cache=cache)
    assert sum(batches) == 1  # a changed text is a new entry


def test_rerank_needs_every_text(cross):
    with pytest.raises(RetrievalError, match="d2"):
        rerank("the cat", fused_list(["d1", "d2"]), {"d1": DOCS["d1"]}, cross, top_n=2)


def test_missing_cross_encoder_folder(tmp_path):
    with pytest.raises(RetrievalError, match="no such folder"):
        CrossEncoderReranker(str(tmp_path / "absent"))
    with pytest.raises(RetrievalError, match="not a loadable cross-encoder"):
        get_reranker(str(tmp_path))  # exists, holds no model
    with pytest.raises(RetrievalError, match="without network"):
        get_reranker("some-org/some-reranker")


# --- the cache itself ---------------------------------------------------------------------------------


def test_rerank_cache_is_a_bounded_lru():
    cache = RerankCache(max_entries=2)
    docs = {"a": "A", "b": "B", "c": "C"}
    cache.put_many("m", "q", docs, {"a": 1.0, "b": 2.0})
    assert cache.get_many("m", "q", {"a": "A"}) == {"a": 1.0}  # touches a: b is now oldest
    cache.put_many("m", "q", docs, {"c": 3.0})
    assert cache.get_many("m", "q", docs) == {"a": 1.0, "c": 3.0}
    assert cache.get_many("other-model", "q", docs) == {}
    assert cache.get_many("m", "other query", docs) == {}
    cache.clear()
    assert len(cache) == 0


# --- the measured effect shown beside the rerank switch ---------------------------------------------------


def test_measured_effect_states_the_measured_deltas_and_whether_the_config_uses_them(monkeypatch):
    from retrieval.search import rerank as rerank_module
    from retrieval.search.config import SearchConfig

    monkeypatch.setattr(rerank_module, "MEASURED_RERANK", {
        "top_n": 20, "lambda": 0.7, "first_stage": "x", "delta_ndcg10": {"nfcorpus": 0.0123, "vaswani": -0.0004}})
    same = SearchConfig(rerank=True, rerank_top_n=20, rerank_lambda=0.7)
    assert rerank_module.measured_effect(same) == (
        "Measured with E5, top-20, λ = 0.7 over the default first stage, nDCG@10: nfcorpus +0.0123, "
        "vaswani -0.0004 (docs/experiments/rerank.md).")
    other = SearchConfig(rerank=True, rerank_top_n=50, rerank_lambda=0.0)
    assert rerank_module.measured_effect(other).endswith(
        " Your top-N 50 / λ 0 differ from what was measured.")
    assert "was not measured here" in rerank_module.measured_effect(SearchConfig(reranker="/models/bge"))
    monkeypatch.setattr(rerank_module, "MEASURED_RERANK", {"top_n": None, "lambda": None, "delta_ndcg10": {}})
    assert rerank_module.measured_effect(same) == (
        "The E5 reranker's effect has not been measured yet (docs/experiments/rerank.md).")


def test_interpolated_order_hand_computed():
    # a = [1, 0.5, 0], b = [0, 1, 0.5]; λ 0.5: final = [0.5, 0.75, 0.25] -> positions 1, 0, 2
    a, b, final, order = interpolated_order([3.0, 2.0, 1.0], [0.1, 0.9, 0.5], 0.5)
    assert (a, b) == ([1.0, 0.5, 0.0], [0.0, 1.0, 0.5]) and final == pytest.approx([0.5, 0.75, 0.25])
    assert order == [1, 0, 2]
    # λ 1 keeps the first stage; λ 0 is the reranker's order
    assert interpolated_order([3.0, 2.0, 1.0], [0.1, 0.9, 0.5], 1.0)[3] == [0, 1, 2]
    assert interpolated_order([3.0, 2.0, 1.0], [0.1, 0.9, 0.5], 0.0)[3] == [1, 2, 0]
    # equal final scores (0.5 and 0.5): the higher rerank score first
    assert interpolated_order([2.0, 1.0], [1.0, 2.0], 0.5)[3] == [1, 0]
    # equal final and rerank scores: first-stage position
    assert interpolated_order([1.0, 1.0, 1.0], [0.3, 0.3, 0.3], 0.5)[3] == [0, 1, 2]
    # a NaN rerank score sorts last whatever its first-stage score
    assert interpolated_order([3.0, 2.0, 1.0], [float("nan"), 0.2, 0.6], 0.9)[3] == [1, 2, 0]
