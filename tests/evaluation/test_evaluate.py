"""Metrics against hand-computed values and trec_eval, and evaluation of a small real BEIR folder (all data
from the bundled sample, sample_data/xquad)."""

import json
import math
import re
from pathlib import Path

import pytest

from retrieval.cli.main import main
from retrieval.evaluation.candidates import about
from retrieval.evaluation.evaluate import evaluate_run, run_from_rankings, worst_queries

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "xquad"  # the bundled BEIR sample


def test_an_estimate_in_words():
    assert [about(s) for s in (0.2, 8.4, 89, 91, 170, 3600)] == [
        "about 1 s", "about 8 s", "about 89 s", "about 2 min", "about 3 min", "about 60 min"]


def test_run_from_rankings_keeps_our_order_even_for_ties():
    assert run_from_rankings({"q": ["b", "a", "c", "a"]}) == {"q": {"b": 3.0, "a": 2.0, "c": 1.0}}


def test_metrics_hand_computed():
    qrels = {"q1": {"a": 2, "b": 1}, "q2": {"c": 1}, "q3": {"z": 1}}
    run = run_from_rankings({"q1": ["x", "a", "b"], "q2": ["c"], "q3": []})
    mean, per_query = evaluate_run(qrels, run, ["ndcg@10", "mrr@10", "recall@100", "precision@10", "map"])
    # q1: DCG = 2/log2(3) + 1/log2(4); IDCG = 2/log2(2) + 1/log2(3)
    dcg = 2 / math.log2(3) + 1 / 2
    idcg = 2 + 1 / math.log2(3)
    assert per_query["q1"]["ndcg@10"] == pytest.approx(dcg / idcg, abs=1e-9)
    assert per_query["q1"]["mrr@10"] == pytest.approx(0.5)
    assert per_query["q1"]["precision@10"] == pytest.approx(0.2)
    assert per_query["q1"]["map"] == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert per_query["q2"] == {"ndcg@10": 1.0, "mrr@10": 1.0, "recall@100": 1.0, "precision@10": 0.1, "map": 1.0}
    # a judged query with nothing retrieved counts, as 0
    assert per_query["q3"]["ndcg@10"] == 0.0
    assert mean["mrr@10"] == pytest.approx((0.5 + 1 + 0) / 3)


@pytest.fixture(scope="module")
def small_beir(tmp_path_factory):
    """The sample's first 30 English paragraphs with their questions: a real, small BEIR folder."""
    source = SAMPLE
    folder = tmp_path_factory.mktemp("beir") / "xquad-small"
    (folder / "qrels").mkdir(parents=True)
    docs = (source / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:30]
    keep = {json.loads(d)["_id"] for d in docs}
    qrel_lines = (source / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()
    kept_qrels = [line for line in qrel_lines[1:] if line.split("\t")[1] in keep][:40]
    kept_queries = {line.split("\t")[0] for line in kept_qrels}
    queries = [q for q in (source / "queries.jsonl").read_text(encoding="utf-8").splitlines()
               if json.loads(q)["_id"] in kept_queries]
    (folder / "corpus.jsonl").write_text("\n".join(docs) + "\n", encoding="utf-8")
    (folder / "queries.jsonl").write_text("\n".join(queries) + "\n", encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text("\n".join([qrel_lines[0], *kept_qrels]) + "\n", encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def small_db(small_beir, tmp_path_factory):
    """A database with `small_beir` ingested as collection 'small' through the CLI, once for the
    tests that only search it."""
    db = tmp_path_factory.mktemp("small-db") / "db"
    assert main(["--db", str(db), "ingest", str(small_beir), "--collection", "small"]) == 0
    return db


class CliRun:
    def __init__(self, returncode, stdout, stderr):
        self.returncode, self.stdout, self.stderr = returncode, stdout, stderr


@pytest.fixture
def run_cli(capsys):
    """`python -m retrieval …` in this process (no re-import of torch per call)."""

    def run(*args, db):
        capsys.readouterr()
        code = main(["--db", str(db), *args])
        out = capsys.readouterr()
        return CliRun(code, out.out, out.err)

    return run


def test_cli_evaluate_prints_one_json_object_and_reuses_its_cache(small_beir, tmp_path, run_cli):
    db = tmp_path / "db"
    first = run_cli("evaluate", str(small_beir), "--json", "--fusion", "rrf", "--k", "60", db=db)
    assert first.returncode == 0, first.stderr
    report = json.loads(first.stdout)  # stdout is exactly one JSON object
    assert report["n_queries"] == 40
    assert set(report["metrics"]) == {"bm25", "dense", "hybrid"}
    for values in report["metrics"].values():
        assert set(values) == {"ndcg@10", "mrr@10", "recall@100"}
        assert 0.5 < values["ndcg@10"] <= 1.0  # one relevant paragraph among 30: easy
    assert report["config"]["rrf_k"] == 60.0
    assert "ingesting 30 documents" in first.stderr
    # long work says how long first: measured on 16 queries (their vectors and candidates kept for the run)
    estimate = re.search(r"40 queries: about \d+ (s|min) to embed and retrieve them \(timed on 16\)", first.stderr)
    assert estimate and estimate.start() < first.stderr.index("queries 40/40"), first.stderr
    second = run_cli("evaluate", str(small_beir), "--json", "--weights", "bm25=0.3,dense=0.7", db=db)
    assert second.returncode == 0, second.stderr
    assert "reusing cached collection" in second.stderr
    assert json.loads(second.stdout)["config"]["weights"] == {"bm25": 0.3, "dense": 0.7}


def test_the_cache_collection_follows_the_encoder_backend(small_beir, monkeypatch):
    """A cache ingested on one encoder backend is not reused on another (its vectors would be
    another backend's than the queries'): the name holds the backends of the models it may use."""
    from retrieval.evaluation.beir_cache import beir_collection_name
    from retrieval.models import embed
    from retrieval.models.embed import BACKEND_ENV

    monkeypatch.setattr(embed, "device", lambda: "cpu")  # the environment variable chooses on a CPU only
    monkeypatch.delenv(BACKEND_ENV, raising=False)
    shipped = beir_collection_name(small_beir, None)
    assert shipped == beir_collection_name(small_beir, None) and shipped.startswith("eval-xquad-small-")
    monkeypatch.setenv(BACKEND_ENV, "torch")
    assert beir_collection_name(small_beir, None) not in (shipped, beir_collection_name(small_beir, "all-MiniLM-L6-v2"))
    monkeypatch.setenv(BACKEND_ENV, "onnx-int8")
    assert beir_collection_name(small_beir, None) == shipped  # what a CPU runs when nothing is set


def test_cli_search_json_has_meta_and_errors_are_readable(small_db, run_cli):
    db = small_db
    out = run_cli("search", "small", "How many points did the Panthers defense surrender?", "--json",
                  "--fusion", "rrf", "--weights", "bm25=0.5,dense=0.5", "--k", "10", "--top-k", "3", db=db)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert len(data["results"]) == 3
    meta = data["results"][0]["_meta"]
    assert meta["rank"] == 1 and meta["rrf_k"] == 10.0
    assert {"bm25_rank", "dense_rank", "bm25_score", "dense_score"} <= set(meta)
    expected = sum(0.5 / (10 + meta[f"{s}_rank"]) for s in ("bm25", "dense") if meta[f"{s}_rank"])
    assert data["results"][0]["score"] == pytest.approx(expected)
    bad = run_cli("search", "nope", "x", db=db)
    assert bad.returncode == 2 and "No collection named 'nope'" in bad.stderr
    bad_k = run_cli("search", "small", "x", "--k", "0", db=db)
    assert bad_k.returncode == 2 and "rrf_k must be ≥ 1" in bad_k.stderr


def test_evaluate_rankings_equals_the_run_path():
    from retrieval.evaluation.evaluate import QrelsEvaluator

    qrels = {"q1": {"a": 2, "b": 1, "z": 0}, "q2": {"c": 1}, "q3": {"z": 1}, "q4": {}}
    rankings = {"q1": ["x", "a", "y", "b", "a"], "q2": ["c", "d"], "q3": [], "q5": ["a"]}
    evaluator = QrelsEvaluator(qrels)
    fast = evaluator.evaluate_rankings(rankings)
    slow = evaluate_run(qrels, run_from_rankings(rankings))
    assert fast == slow
    assert list(fast[1]) == ["q1", "q2", "q3"]  # judged queries only, q3 (nothing retrieved) as 0
    assert fast[1]["q1"]["mrr@10"] == 0.5 and fast[1]["q3"]["ndcg@10"] == 0.0
    # the evaluator is reusable: a second, different ranking
    assert evaluator.evaluate_rankings({"q2": ["c"]})[1]["q2"]["precision@10"] == pytest.approx(0.1)


def test_trec_run_lines_and_metrics_csv():
    from retrieval.evaluation.evaluate import metrics_csv, trec_run
    from retrieval.types import RetrievalError

    run = run_from_rankings({"q1": ["b", "a", "c"], "q2": ["d"]})
    assert trec_run(run, "bm25") == ("q1 Q0 b 1 3 bm25\nq1 Q0 a 2 2 bm25\nq1 Q0 c 3 1 bm25\n"
                                     "q2 Q0 d 1 1 bm25\n")
    # ties in score: doc id order
    assert trec_run({"q": {"y": 0.5, "x": 0.5}}, "t") == "q Q0 x 1 0.5 t\nq Q0 y 2 0.5 t\n"
    with pytest.raises(RetrievalError, match="run tag"):
        trec_run(run, "my run")
    with pytest.raises(RetrievalError, match="document id"):
        trec_run({"q": {"a b": 1.0}}, "t")
    per_query = {"q1": {"ndcg@10": 0.5, "map": 0.25}, "q,2": {"ndcg@10": 1.0, "map": 0.75}}
    assert metrics_csv(per_query, ["ndcg@10", "map"]) == 'query_id,ndcg@10,map\nq1,0.5,0.25\n"q,2",1.0,0.75\n'
    assert metrics_csv(per_query, ["map"], mean_row=True).splitlines()[-1] == "mean,0.5"
    # A query id or a metric name that a spreadsheet would run as a formula gets a quote.
    hostile = {"=HYPERLINK(\"http://evil.example\")": {"@x": 0.5}, "-1": {"@x": 1.0}}
    assert metrics_csv(hostile, ["@x"]) == ("query_id,'@x\n\"'=HYPERLINK(\"\"http://evil.example\"\")\",0.5\n"
                                            "'-1,1.0\n")


def test_a_single_metric_works_on_both_paths():
    from retrieval.evaluation.evaluate import QrelsEvaluator

    qrels = {"q1": {"a": 1}, "q2": {"b": 1}}
    rankings = {"q1": ["x", "a"], "q2": ["b"]}
    for metric in ("ndcg@10", "precision@1"):
        mean, per_query = evaluate_run(qrels, run_from_rankings(rankings), [metric])
        assert set(mean) == {metric} and set(per_query["q1"]) == {metric}
        assert QrelsEvaluator(qrels).evaluate_rankings(rankings, [metric]) == (mean, per_query)
    assert evaluate_run(qrels, run_from_rankings(rankings), ["mrr@10"])[0] == {"mrr@10": pytest.approx(0.75)}


TREC_EVAL_MEASURES = {"ndcg@10": "ndcg_cut_10", "mrr@10": "recip_rank", "recall@100": "recall_100",
                      "precision@10": "P_10", "map": "map"}
# Two judged queries BM25 cannot match: only stopwords, and words no paragraph has.
UNMATCHED = {"x-stopwords": "is it not in the", "x-unknown": "eggnog amnesia"}


def graded_sample_qrels(qrels: dict[str, dict[str, int]]) -> dict[str, dict[str, int]]:
    """The sample's judgments made graded: the answering paragraph 2, its translation 1 (it
    answers too, in the other language), the next paragraph judged 0 (not relevant)."""
    graded = {}
    for qid, judged in qrels.items():
        (doc,) = judged
        lang, number = doc.split("-")
        graded[qid] = {doc: 2, f"{'zh' if lang == 'en' else 'en'}-{number}": 1,
                       f"{lang}-{int(number) % 60 + 1:03d}": 0}
    return graded


def test_metrics_equal_trec_eval_on_a_real_bm25_run_over_the_sample():
    """Our metrics (both paths) against trec_eval's own C code (pytrec_eval) to 1e-6, on a
    real BM25 run over the whole bundled sample (120 paragraphs, 638 questions in two languages
    plus two that match nothing) with graded judgments (2, 1 and 0).

    trec_eval semantics kept in mind: scores are unique (n − rank + 1), so its tie order
    (score, then doc id descending) never applies; RR@10 is trec_eval's recip_rank on the run cut
    at 10; P@10 counts missing results as misses in both; grades ≥ 1 are relevant in both.
    """
    import pytrec_eval

    from retrieval.evaluation.evaluate import QrelsEvaluator
    from retrieval.indexing.readers.parse import parse_path
    from retrieval.sources.bm25 import RankBM25Source
    from retrieval.text.passages import embedding_text
    from retrieval.text.tokenize import tokenize

    corpus = parse_path(SAMPLE)
    assert len(corpus.documents) == 120 and len(corpus.qrels) == 638
    queries = {**corpus.queries, **UNMATCHED}
    qrels = {**graded_sample_qrels(corpus.qrels), "x-stopwords": {"en-001": 1}, "x-unknown": {"zh-002": 2}}
    token_lists = [tokenize(embedding_text(d)) for d in corpus.documents]
    source = RankBM25Source([d.id for d in corpus.documents], token_lists, k1=0.9, b=0.4)
    rankings = {q: [h.doc_id for h in source.search(queries[q], 100)] for q in qrels}
    empty = [q for q, ids in rankings.items() if not ids]
    vocabulary = {t for tokens in token_lists for t in tokens}
    assert empty == [q for q in qrels if not set(tokenize(queries[q])) & vocabulary] == list(UNMATCHED)
    run = run_from_rankings(rankings)
    metrics = list(TREC_EVAL_MEASURES)
    mean, per_query = evaluate_run(qrels, run, metrics)
    fast_mean, fast_per_query = QrelsEvaluator(qrels).evaluate_rankings(rankings, metrics)

    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut.10", "recall.100", "P.10", "map"})
    retrieved = {q: docs for q, docs in run.items() if docs}
    reference = evaluator.evaluate(retrieved)
    top10 = {q: dict(sorted(docs.items(), key=lambda kv: -kv[1])[:10]) for q, docs in retrieved.items()}
    rr10 = pytrec_eval.RelevanceEvaluator(qrels, {"recip_rank"}).evaluate(top10)
    for qid in retrieved:
        reference[qid]["recip_rank"] = rr10[qid]["recip_rank"]
    for qid in empty:  # trec_eval -c: a judged query missing from the run scores 0 on every measure
        reference[qid] = dict.fromkeys(TREC_EVAL_MEASURES.values(), 0.0)
    assert set(reference) == set(per_query) == set(fast_per_query)
    for metric, measure in TREC_EVAL_MEASURES.items():
        for qid in per_query:
            assert per_query[qid][metric] == pytest.approx(reference[qid][measure], abs=1e-6), (qid, metric)
            assert fast_per_query[qid][metric] == pytest.approx(reference[qid][measure], abs=1e-6), (qid, metric)
        trec_mean = sum(reference[q][measure] for q in reference) / len(reference)
        assert mean[metric] == pytest.approx(trec_mean, abs=1e-6)
        assert fast_mean[metric] == pytest.approx(trec_mean, abs=1e-6)
    # Graded, with the translations relevant: BM25 rarely crosses languages (trec_eval: 0.7626
    # nDCG@10, 0.6008 recall@100 over the 640 queries; 0.7568 and 0.6016 with analyser v1, which
    # indexed one-letter words and Chinese function words).
    assert mean["ndcg@10"] == pytest.approx(0.7626, abs=5e-4)
    assert mean["recall@100"] == pytest.approx(0.6008, abs=5e-4)
    # One judgment per question, as published: the evaluation sets' README measures BM25 nDCG@10
    # 0.964 (xquad-en) and 0.965 (xquad-zh) on all 240 paragraphs; on this half-size sample
    # trec_eval gives 0.9695.
    plain, _ = evaluate_run(corpus.qrels, run_from_rankings({q: rankings[q] for q in corpus.qrels}), ["ndcg@10"])
    assert 0.955 < plain["ndcg@10"] < 0.98


def test_cli_sweep_json_and_table(small_beir, tmp_path, run_cli):
    db = tmp_path / "db"
    out = run_cli("sweep", str(small_beir), "--json", "--max-queries", "12", "--depth", "20", db=db)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)  # stdout is exactly one JSON list
    assert len(rows) == 132
    assert {"label", "config", "metrics"} == set(rows[0])
    assert set(rows[0]["metrics"]) == {"ndcg@10", "mrr@10", "recall@100", "precision@10", "map"}
    firsts = [row["metrics"]["ndcg@10"] for row in rows]
    assert firsts == sorted(firsts, reverse=True)
    assert all(row["config"]["depth"] == 20 for row in rows)
    assert "132 variants over 12 queries" in out.stderr
    table = run_cli("sweep", str(small_beir), "--max-queries", "12", "--top", "5", db=db)
    assert table.returncode == 0, table.stderr
    assert "reusing cached collection" in table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].startswith("132 variants, 12 queries") and len(lines) == 2 + 5 + 1 + 8 + 2
    assert lines[7] == "best of each family:"  # rrf, dbsf, weighted × {minmax, l2} × 3 combinations
    assert sum(line.startswith("    rrf k=") for line in lines[8:16]) == 1
    assert sum(line.startswith("    dbsf ") for line in lines[8:16]) == 1
    assert lines[-1].startswith("held-out ndcg@10 of taking the best variant (5-fold over queries)")
    assert lines[-2].startswith("Current config: nDCG@10 ") and "Best of 132 variants: " in lines[-2]
    # with the JSON, on stderr: the options' config (the default at depth 20, a grid point) beside the best
    best = rows[0]["metrics"]["ndcg@10"]
    default = next(r for r in rows if r["label"] == "weighted l2 arithmetic bm25=0.4 dense=0.6")["metrics"]["ndcg@10"]
    tied = sum(abs(r["metrics"]["ndcg@10"] - best) < 1e-6 for r in rows)
    assert f"Current config: nDCG@10 {default:.4f}. Best of 132 variants: {best:.4f}" in out.stderr
    assert default == best and tied > 1  # on these 12 easy queries most variants tie: said, not hidden
    assert f"the current config is already the best, tied with {tied - 1} other variant(s)" in out.stderr
    bad = run_cli("sweep", str(small_beir), "--sources", "bm25", db=db)
    assert bad.returncode == 2 and "two different sources" in bad.stderr


def test_cli_sweep_rerank_grid(small_beir, tmp_path, run_cli):
    db = tmp_path / "db"
    out = run_cli("sweep", str(small_beir), "--json", "--max-queries", "6", "--depth", "20", "--rerank-grid",
                  "--rerank-top-ns", "5,10", db=db)
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)
    assert len(rows) == 132 + 2 * 11  # the default first stage is in the grid: no separate baseline
    reranked = [row for row in rows if row["config"]["rerank"]]
    assert sorted((r["config"]["rerank_top_n"], r["config"]["rerank_lambda"]) for r in reranked) == sorted(
        (n, lam / 10) for n in (5, 10) for lam in range(11))
    assert "rerank e5 top-5 λ=0.3 · weighted l2 arithmetic bm25=0.4 dense=0.6" in {r["label"] for r in rows}
    assert "154 variants over 6 queries" in out.stderr
    bad = run_cli("sweep", str(small_beir), "--rerank-grid", "--rerank-top-ns", "5,x", db=db)
    assert bad.returncode == 2 and "--rerank-top-ns takes whole numbers ≥ 1, got 'x'" in bad.stderr
    bad = run_cli("sweep", str(small_beir), "--rerank-top-ns", "5", db=db)
    assert bad.returncode == 2 and "--rerank-top-ns needs --rerank-grid" in bad.stderr


def test_cli_search_takes_the_combination_and_l2(small_db, run_cli):
    db = small_db
    out = run_cli("search", "small", "How many points did the Panthers defense surrender?", "--json",
                  "--fusion", "weighted", "--norm", "l2", "--combination", "harmonic", "--weights",
                  "bm25=0.5,dense=0.5", db=db)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert (data["config"]["normalization"], data["config"]["combination"]) == ("l2", "harmonic")
    top = data["results"][0]
    parts = [(0.5, top["_meta"][f"{s}_normalized"]) for s in ("bm25", "dense")
             if top["_meta"][f"{s}_normalized"] is not None and top["_meta"][f"{s}_normalized"] > 0]
    assert top["score"] == pytest.approx(sum(w for w, _ in parts) / sum(w / x for w, x in parts), abs=1e-12)


def test_cli_search_json_meta_covers_every_fused_source(small_db, run_cli):
    db = small_db
    sources = ("bm25", "dense", "keyword", "graph")
    out = run_cli("search", "small", "Panthers defense points", "--json", "--fusion", "rrf", "--k", "10",
                  "--weights", "bm25=0.5,dense=0.5,keyword=0.5,graph=0.5", "--keyword", "description=4",
                  "--graph", "depth=1", "--focus", "football", db=db)
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["config"]["keyword"]["description"] == 4.0 and data["config"]["graph"]["depth"] == 1.0
    assert data["config"]["graph_focus"] == "football"
    for item in data["results"]:
        meta = item["_meta"]
        assert {f"{s}_rank" for s in sources} <= set(meta)
        assert item["score"] == pytest.approx(sum(0.5 / (10 + meta[f"{s}_rank"]) for s in sources if meta[f"{s}_rank"]))
    keyword_hits = [item["_meta"] for item in data["results"] if item["_meta"]["keyword_rank"]]
    assert keyword_hits and all("description" in meta["keyword_detail"] for meta in keyword_hits)
    bad = run_cli("search", "small", "x", "--keyword", "colour=1", db=db)
    assert bad.returncode == 2 and "unknown keyword parameter" in bad.stderr


def test_worst_queries_lowest_first_ties_by_id():
    per_query = {"q2": {"ndcg@10": 0.5}, "q1": {"ndcg@10": 0.5}, "q3": {"ndcg@10": 0.0}, "q4": {}}
    assert worst_queries(per_query, "ndcg@10", 3) == ["q3", "q4", "q1"]  # a missing value counts as 0, then by id
    assert worst_queries(per_query, n=10) == ["q3", "q4", "q1", "q2"]
