"""benchmarks/bench_scale.py's corpus builder and metric helpers, on the bundled XQuAD sample."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("bench_scale", REPO / "benchmarks" / "bench_scale.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def sample_pools() -> dict[str, list[str]]:
    pools: dict[str, list[str]] = {"en": [], "zh": []}
    for line in (REPO / "sample_data" / "xquad" / "corpus.jsonl").read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        language = "zh" if row["_id"].startswith("zh") else "en"
        pools[language].extend(bench.split_sentences(row["text"], language))
    return pools


def test_split_sentences_by_language_and_word_windows():
    assert bench.split_sentences("One two three. Four five six! Seven eight nine?", "en") == [
        "One two three.", "Four five six!", "Seven eight nine?"]
    assert bench.split_sentences("黑豹队的防守很好。他们赢了比赛！真的吗？", "zh") == [
        "黑豹队的防守很好。", "他们赢了比赛！", "真的吗？"]
    words = " ".join(f"w{i}" for i in range(42))  # no punctuation: windows of 12, 13, … words
    windows = bench.split_sentences(words, "en")
    assert [len(w.split()) for w in windows] == [12, 13, 14, 3]
    assert " ".join(windows) == words


def test_corpus_is_deterministic_and_queries_come_from_their_document():
    pools = sample_pools()
    assert pools["en"] and pools["zh"]
    docs, queries, qrels = bench.build_corpus(pools, 200, 50, seed=3)
    assert (docs, queries, qrels) == bench.build_corpus(pools, 200, 50, seed=3)
    assert docs != bench.build_corpus(pools, 200, 50, seed=4)[0]
    assert len({d["_id"] for d in docs}) == 200
    zh = sum(d["lang"] == "zh" for d in docs)
    assert 20 <= zh <= 60  # 20 % Chinese
    by_id = {d["_id"]: d for d in docs}
    for qid, text in queries.items():
        (doc_id, grade), = qrels[qid].items()
        assert grade == 1
        doc = by_id[doc_id]
        if doc["lang"] == "zh":  # two phrases of consecutive characters
            assert all(phrase in doc["text"].replace(" ", "") for phrase in text.split(" "))
        else:  # two phrases of consecutive words
            assert all(word in doc["text"].split() for word in text.split())


def test_write_beir_parses_back(tmp_path):
    from retrieval.indexing.readers.parse import parse_path

    docs, queries, qrels = bench.build_corpus(sample_pools(), 30, 10)
    bench.write_beir(tmp_path / "c", docs, queries, qrels)
    corpus = parse_path(tmp_path / "c")
    assert [d.id for d in corpus.documents] == [d["_id"] for d in docs]
    assert corpus.queries == queries and corpus.qrels == qrels
    assert corpus.documents[0].metadata == {"lang": docs[0]["lang"]}


def test_recall_and_exact_top():
    rng = np.random.default_rng(0)
    matrix = rng.standard_normal((50, 8)).astype(np.float32)
    ids = [f"d{i}" for i in range(50)]
    query = matrix[7]
    top = bench.exact_top(matrix, ids, query, k=10)
    sims = matrix @ query
    assert top == [ids[i] for i in np.argsort(-sims)[:10]]
    assert bench.recall_at(top, top) == 1.0
    assert bench.recall_at(top[:5] + ["x"] * 5, top) == 0.5
    assert bench.recall_at([], []) == 1.0


def test_precomputed_vectors_are_the_ingests_own_and_a_shard_out_of_step_stops_it(tmp_path, monkeypatch):
    """precompute_vectors.py's shards, read back by `PrecomputedPassages` in corpus order across
    shard ends, are what the model gives each text; a shard out of step, another corpus, or a
    passage past the last vector stops the ingest; a shard not written yet is waited for only
    when asked."""
    import pytest

    from retrieval.models import embed
    from retrieval.text.passages import title_and_text

    path = REPO / "benchmarks" / "precompute_vectors.py"
    pre_spec = importlib.util.spec_from_file_location("precompute_vectors", path)
    precompute = importlib.util.module_from_spec(pre_spec)
    pre_spec.loader.exec_module(precompute)
    corpus = tmp_path / "five"
    corpus.mkdir()
    rows = [json.loads(line) for line in (REPO / "sample_data" / "xquad" / "corpus.jsonl").read_text(
        encoding="utf-8").splitlines()[:5]]
    (corpus / "corpus.jsonl").write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in rows) + "\n",
                                         encoding="utf-8")
    out = tmp_path / "vectors"
    precompute.main([str(corpus), "--shard", "2", "--out", str(out)])
    assert sorted(p.name for p in out.glob("shard-*.npy")) == ["shard-00000.npy", "shard-00001.npy", "shard-00002.npy"]
    encoder = embed.load_encoder(embed.MINILM)
    texts = [title_and_text(r.get("title", ""), r["text"]) for r in rows]
    expected = np.stack([encoder.encode_passages([t])[0] for t in texts])

    passages = bench.PrecomputedPassages(encoder, out, corpus)
    got = np.concatenate([passages.encode_passages(texts[:3]), passages.encode_passages(texts[3:])])
    assert np.abs(got - expected).max() <= 1e-6 and (passages.position, passages.checked) == (5, 2)
    assert passages.waited_s == 0.0  # nothing was missing: no wait is reported
    with pytest.raises(SystemExit, match="past the vectors"):
        passages.encode_passages(texts[:1])
    with pytest.raises(SystemExit, match="not of"):
        bench.PrecomputedPassages(encoder, out, tmp_path)
    first, second = np.load(out / "shard-00000.npy"), np.load(out / "shard-00001.npy")
    np.save(out / "shard-00000.npy", second)
    np.save(out / "shard-00001.npy", first)
    with pytest.raises(SystemExit, match="passage 0 differs"):
        bench.PrecomputedPassages(encoder, out, corpus).encode_passages(texts)

    # An export format change keeps the shards when their vectors stay equal to the bit (first and
    # last shard re-encoded), and stops the run, leaving the old format recorded, when they do not.
    from retrieval.models import onnx_export

    np.save(out / "shard-00000.npy", first)
    np.save(out / "shard-00001.npy", second)

    # A shard not written yet stops the ingest, or, with a wait, is read once it is renamed into
    # place (as the precompute does) by a run still going.
    import os
    import threading

    last = np.load(out / "shard-00002.npy")
    (out / "shard-00002.npy").unlink()
    with pytest.raises(SystemExit, match=r"shard-00002\.npy is missing"):
        bench.PrecomputedPassages(encoder, out, corpus).encode_passages(texts)

    def write_last() -> None:
        np.save(out / "shard-00002.partial.npy", last)
        os.replace(out / "shard-00002.partial.npy", out / "shard-00002.npy")

    monkeypatch.setattr(bench.PrecomputedPassages, "POLL_S", 0.05)
    later = threading.Timer(1.0, write_last)
    later.start()
    passages = bench.PrecomputedPassages(encoder, out, corpus, wait_s=30)
    got = passages.encode_passages(texts)
    later.join()
    assert np.abs(got - expected).max() <= 1e-6 and 0.05 <= passages.waited_s < 30  # at least one poll

    manifest = json.loads((out / "manifest.json").read_text())
    (out / "manifest.json").write_text(json.dumps({**manifest, "onnx_format": onnx_export.FORMAT - 1}))
    precompute.main([str(corpus), "--shard", "2", "--out", str(out)])
    after = json.loads((out / "manifest.json").read_text())
    assert after["onnx_format"] == onnx_export.FORMAT
    assert [(c["from"], c["to"], c["shard"], c["passages"]) for c in after["format_checks"]] == [
        (onnx_export.FORMAT - 1, onnx_export.FORMAT, 0, 2), (onnx_export.FORMAT - 1, onnx_export.FORMAT, 2, 1)]
    np.save(out / "shard-00002.npy", first[:1] + np.float32(1e-3))
    (out / "manifest.json").write_text(json.dumps({**after, "onnx_format": onnx_export.FORMAT - 1}))
    with pytest.raises(SystemExit, match="shard 2 was made by export format"):
        precompute.main([str(corpus), "--shard", "2", "--out", str(out)])
    assert json.loads((out / "manifest.json").read_text())["onnx_format"] == onnx_export.FORMAT - 1
    with pytest.raises(SystemExit, match="another run"):
        precompute.main([str(corpus), "--shard", "3", "--out", str(out)])
