"""Relevance study (issue 12): which defaults to ship, measured on every evaluation set.

    .venv/bin/python benchmarks/relevance_study.py PART [PART …] [--eval-dir DIR] [--out DIR]

PART is one of:

- `models`   dense and hybrid nDCG@10 of all-MiniLM-L6-v2 vs multilingual-e5-small on the English
             sets, plus each model's passage-encoding speed (what ingest costs);
- `cross`    XQuAD across languages (folders built by benchmarks/xquad_cross.py): the default
             ingest (an English corpus: MiniLM + cross-lingual E5 vectors) and E5 for everything,
             BM25 weight 0.5 vs language-aware fusion (BM25 weight 0 and the cross-lingual
             vectors when the query's language differs from the collection's);
- `ingest`   what each cross-lingual option costs at ingest (first 1,000 nfcorpus documents);
- `latency`  the rerank stage as the app runs it (E5, top-20), passage vectors read from the store;
- `fusion`   the sweep's 121-variant grid on each of the five sets, and the shipped default chosen
             by leave-one-set-out (`choose_held_out`), against RRF k=60 / 0.5 / 0.5;
- `rerank`   E5 re-scoring of the default first stage: top-N ∈ {10, 20, 50} × λ ∈ {0, 0.1, …, 1},
             and (top-N, λ) chosen by leave-one-set-out so that no training set loses nDCG@10;
             plus the rerank latency per query (cold and warm passage cache).

Every figure is nDCG@10 over a ranked list of `depth` (100) results, as `python -m retrieval
evaluate` reports it. Collections are the evaluation cache collections (`eval-<set>-<hash>`),
ingested once. Each part writes OUT/<part>.json and prints Markdown tables.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from retrieval.evaluation.beir_cache import ensure_beir_collection  # noqa: E402
from retrieval.evaluation.evaluate import QrelsEvaluator, evaluate_collection  # noqa: E402
from retrieval.models.embed import E5, MINILM  # noqa: E402
from retrieval.search.config import SearchConfig  # noqa: E402
from retrieval.search.workbench import Workbench  # noqa: E402
from retrieval.store import Store  # noqa: E402
from retrieval.text.passages import embedding_text_of  # noqa: E402

SETS = ("nfcorpus", "vaswani", "xquad-en", "xquad-zh", "cmrc2018-dev")
ENGLISH_SETS = ("nfcorpus", "vaswani", "xquad-en")
CROSS_SETS = ("xquad-en2zh", "xquad-zh2en")
TOP_NS = (10, 20, 50)
LAMBDAS = tuple(round(i / 10, 1) for i in range(11))
METRIC = "ndcg@10"
TIMING = os.environ.get("STUDY_TIMING", "1") != "0"  # 0: skip the rerank latency loops (scores reused)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


class Study:
    def __init__(self, eval_dir: Path, cross_dir: Path, out: Path):
        self.eval_dir, self.cross_dir, self.out = eval_dir, cross_dir, out
        self.workbench = Workbench(Store())
        out.mkdir(parents=True, exist_ok=True)

    def folder(self, name: str) -> Path:
        folder = (self.cross_dir if name in CROSS_SETS else self.eval_dir) / name
        if not (folder / "corpus.jsonl").is_file():
            hint = " (run benchmarks/xquad_cross.py first)" if name in CROSS_SETS else ""
            raise SystemExit(f"{folder} is missing: no BEIR folder for {name}{hint}")
        return folder

    def collection(self, name: str, model: str | None = None):
        """(collection, queries, judged qrels) of an evaluation set, ingested once per model."""
        collection, corpus = ensure_beir_collection(self.workbench.store, self.folder(name), model, log)
        qrels = {q: d for q, d in corpus.qrels.items() if d and q in corpus.queries}
        return collection, corpus.queries, qrels

    def evaluate(self, name: str, config: SearchConfig, model: str | None = None) -> dict[str, float]:
        collection, queries, qrels = self.collection(name, model)
        report = evaluate_collection(self.workbench, collection, queries, qrels, config, metrics=(METRIC, "recall@100"))
        return {system: values[METRIC] for system, values in report.metrics.items()}

    def save(self, part: str, data) -> None:
        (self.out / f"{part}.json").write_text(json.dumps(data, indent=1, ensure_ascii=False), encoding="utf-8")


# ---- models ---------------------------------------------------------------------------------
def encoder_speed(folder: Path, model: str, n: int = 1000) -> float:
    """Passages per second of `model` on the first `n` documents of a BEIR corpus (title + text)."""
    from retrieval.models.embed import load_encoder

    with (folder / "corpus.jsonl").open(encoding="utf-8") as f:
        rows = [json.loads(line) for line, _ in zip(f, range(n), strict=False)]
    texts = [(r.get("title") or "") + "\n" + r["text"] for r in rows]
    encoder = load_encoder(model)
    encoder.encode_passages(texts[:32])  # warm-up
    started = time.perf_counter()
    encoder.encode_passages(texts)
    return len(texts) / (time.perf_counter() - started)


def part_models(study: Study) -> None:
    rows = []
    for name in ENGLISH_SETS:
        for model in (None, E5):  # None: the default for English, MiniLM (the same cache collection)
            log(f"models: {name} {model or MINILM}")
            figures = study.evaluate(name, SearchConfig(), model)
            rows.append({"set": name, "model": model or MINILM, **figures})
    speed = {model: encoder_speed(study.folder("nfcorpus"), model) for model in (MINILM, E5)}
    study.save("models", {"rows": rows, "passages_per_s": speed})
    print("| set | model | BM25 | dense | hybrid (RRF 60, 0.5/0.5) |\n| --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['set']} | {r['model']} | {r['bm25']:.4f} | {r['dense']:.4f} | {r['hybrid']:.4f} |")
    print("\npassages/s on the first 1,000 nfcorpus documents (title + abstract): "
          + ", ".join(f"{m} {v:.1f}" for m, v in speed.items()))


# ---- cross-lingual ----------------------------------------------------------------------------
def part_cross(study: Study) -> None:
    """Each set with the default model (None: what an ingest with no model named gives — for the
    English paragraphs MiniLM plus the cross-lingual E5 vectors) and with E5 for everything."""
    rows = []
    for name in CROSS_SETS:
        for model in (None, E5):
            for label, overrides in (("BM25 0.4 (not language-aware)", {"language_aware": False}),
                                     ("language-aware", {"language_aware": True})):
                log(f"cross: {name} {model} {label}")
                figures = study.evaluate(name, SearchConfig.from_dict(overrides), model)
                info = study.workbench.info(study.collection(name, model)[0])
                shown = info.model + (f" + cross-lingual {info.xl_model}" if info.xl_model else "")
                rows.append({"set": name, "model": f"{shown}{'' if model else ' (default)'}", "fusion": label,
                             **figures})
    study.save("cross", rows)
    print("| set | model | fusion | BM25 | dense | hybrid |\n| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['set']} | {r['model']} | {r['fusion']} | {r['bm25']:.4f} | {r['dense']:.4f} | {r['hybrid']:.4f} |")


# ---- ingest cost of each cross-lingual option -------------------------------------------------
def part_ingest(study: Study, n: int = 1000) -> None:
    """Ingest (`indexing.pipeline.create_collection`, the Corpus page's path) of the first `n` nfcorpus
    documents three ways: MiniLM alone, MiniLM + cross-lingual E5 vectors (the default for an
    English corpus), E5 alone; documents/s of wall time and CPU seconds (all threads), each in a
    fresh temporary database after one warm-up ingest of 50 documents (models loaded)."""
    import tempfile

    from retrieval.indexing.pipeline import create_collection
    from retrieval.indexing.readers.parse import parse_path
    from retrieval.types import ParsedCorpus

    documents = parse_path(study.folder("nfcorpus")).documents[:n]
    options = (("all-MiniLM-L6-v2 only", MINILM, False), ("all-MiniLM-L6-v2 + cross-lingual E5 (default)", None, None),
               ("multilingual-e5-small only", E5, None))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(tmp)
        for i, (label, model, cross) in enumerate(options):
            create_collection(store, f"warm{i}", ParsedCorpus(documents[:50]), model, cross_lingual=cross)
            wall, cpu = time.perf_counter(), time.process_time()
            info = create_collection(store, f"run{i}", ParsedCorpus(documents), model, cross_lingual=cross).info
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            rows.append({"option": label, "model": info.model, "xl_model": info.xl_model, "docs": n,
                         "docs_per_s": n / wall, "wall_s": wall, "cpu_s": cpu})
            log(f"ingest: {label}: {n / wall:.1f} docs/s")
    study.save("ingest", rows)
    print(f"| option (first {n} nfcorpus documents) | docs/s (wall) | wall s | CPU s |\n| --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['option']} | {r['docs_per_s']:.1f} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} |")


# ---- rerank latency in the app's path ----------------------------------------------------------
def part_latency(study: Study, sets: tuple[str, ...], n: int = 50, top_n: int = 20) -> None:
    """The rerank stage as a search in the app runs it (`Workbench.apply_rerank`, E5, top-`top_n`)
    on a fresh Workbench per set: passage embeddings come from the collection's stored E5 vectors
    (an E5 collection's own, an English one's cross-lingual column; `rerank.seed_passages`) or
    are embedded; p50 over the first `n` judged queries, each never reranked before in the process."""
    import dataclasses

    rows = []
    for name in sets:
        collection, queries, qrels = study.collection(name)
        wb = Workbench(study.workbench.store)
        config = dataclasses.replace(SearchConfig(), rerank=True, rerank_top_n=top_n)
        first = dataclasses.replace(config, rerank=False)
        wb.apply_rerank(wb.search(collection, "warm up the models", config))
        times = []
        for qid in list(qrels)[:n]:
            result = wb.search(collection, queries[qid], first)
            result.config = config
            started = time.perf_counter()
            wb.apply_rerank(result)
            times.append(time.perf_counter() - started)
        info = wb.info(collection)
        stored = "own vectors" if info.model == E5 else "cross-lingual column" if info.xl_model == E5 else "none"
        rows.append({"set": name, "stored_e5_vectors": stored, "p50_ms": 1000 * statistics.median(times),
                     "p95_ms": 1000 * sorted(times)[int(0.95 * (len(times) - 1))]})
        log(f"latency: {name} {rows[-1]['p50_ms']:.0f} ms")
    study.save("latency", rows)
    print(f"| set | stored E5 passage vectors | rerank top-{top_n}, p50 ms | p95 ms |\n| --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r['set']} | {r['stored_e5_vectors']} | {r['p50_ms']:.0f} | {r['p95_ms']:.0f} |")


# ---- fusion default -------------------------------------------------------------------------
def choose_held_out(table: dict[str, dict[str, float]], baseline: str) -> dict:
    """Leave-one-set-out choice of a variant: table = variant -> set -> mean metric.

    For each set s, the variant with the best mean over the other sets is chosen (ties: the first
    in table order) and scored on s. Returns per-set rows (chosen, its score on s, the baseline's)
    and the means of both over the held-out sets, plus the variant best on all sets together.
    """
    variants = list(table)
    sets = list(next(iter(table.values())))
    rows = []
    for held in sets:
        train = [s for s in sets if s != held]
        chosen = max(variants, key=lambda v: (statistics.fmean(table[v][s] for s in train), -variants.index(v)))
        rows.append({"held_out": held, "chosen": chosen, "chosen_score": table[chosen][held],
                     "baseline_score": table[baseline][held]})
    overall = max(variants, key=lambda v: (statistics.fmean(table[v].values()), -variants.index(v)))
    return {"rows": rows, "held_out_mean": statistics.fmean(r["chosen_score"] for r in rows),
            "baseline_mean": statistics.fmean(r["baseline_score"] for r in rows), "overall": overall,
            "overall_scores": table[overall]}


def part_fusion(study: Study) -> None:
    from retrieval.evaluation.sweep import default_grid, run_sweep

    grid = default_grid(SearchConfig())
    table: dict[str, dict[str, float]] = {v.label: {} for v in grid}
    for name in SETS:
        log(f"fusion: sweeping {name}")
        collection, queries, qrels = study.collection(name)
        result = run_sweep(study.workbench, collection, queries, qrels, grid, metrics=(METRIC,))
        for row in result.rows:
            table[row["label"]][name] = row[METRIC]
    baseline = "rrf k=60 bm25=0.5 dense=0.5"
    chosen = choose_held_out(table, baseline)
    study.save("fusion", {"table": table, "choice": chosen,
                          "configs": {v.label: v.config.to_dict() for v in grid}})
    print("| held-out set | chosen on the other four | its nDCG@10 | RRF 60 0.5/0.5 | Δ |\n"
          "| --- | --- | --- | --- | --- |")
    for r in chosen["rows"]:
        print(f"| {r['held_out']} | {r['chosen']} | {r['chosen_score']:.4f} | {r['baseline_score']:.4f} "
              f"| {r['chosen_score'] - r['baseline_score']:+.4f} |")
    print(f"| mean | | {chosen['held_out_mean']:.4f} | {chosen['baseline_mean']:.4f} "
          f"| {chosen['held_out_mean'] - chosen['baseline_mean']:+.4f} |")
    print(f"\nbest on all five: {chosen['overall']}: "
          + ", ".join(f"{s} {v:.4f}" for s, v in chosen["overall_scores"].items()))
    top = sorted(table, key=lambda v: -statistics.fmean(table[v].values()))[:10]
    print("\n| variant | " + " | ".join(SETS) + " | mean |\n|---" * 1 + "|---" * (len(SETS) + 1) + "|")
    for v in [*top, baseline]:
        print(f"| {v} | " + " | ".join(f"{table[v][s]:.4f}" for s in SETS)
              + f" | {statistics.fmean(table[v].values()):.4f} |")


# ---- rerank ---------------------------------------------------------------------------------
def rerank_table(study: Study, name: str, base: SearchConfig) -> tuple[dict, dict]:
    """nDCG@10 of the first stage and of every (top-N, λ) on one set, plus timings."""
    from retrieval.search.rerank import get_reranker, rerank

    collection, queries, qrels = study.collection(name)
    wb = study.workbench
    reranker = get_reranker("e5")
    config = SearchConfig.from_dict({**base.to_dict(), "top_k": base.depth, "min_score": None,
                                     "min_display_score": None, "rerank": False})
    heads, cold, warm = {}, [], []
    # Rerank scores of earlier runs (query id, doc id) -> score, so a second run on another first
    # stage only scores the documents it adds.
    saved_path = study.out / f"rerank-scores-{name}-{reranker.backend}.json"  # one backend's scores
    saved = json.loads(saved_path.read_text(encoding="utf-8")) if saved_path.exists() else {}
    for i, qid in enumerate(qrels):
        result = wb.search(collection, queries[qid], config)
        eligible = result.eligible()
        texts = {d: embedding_text_of(row) for d, row in result.documents.items()}
        known = {d: saved[f"{qid}|{d}"] for d in texts if f"{qid}|{d}" in saved}
        wb.caches.rerank.put_many(reranker.name, queries[qid], texts, known)
        started = time.perf_counter()
        # As the app reranks: the collection's stored E5 passage vectors seeded when they are the
        # reranker's own (same model, text and backend), the rest embedded by the reranker.
        wb.reranker_for(collection, "e5", texts, [r.doc_id for r in eligible[: max(TOP_NS)]])
        rerank(queries[qid], eligible, texts, reranker, max(TOP_NS), wb.caches.rerank, 0.0, wb.caches.passage_vectors)
        if i < 20:  # the first queries find few of their passages embedded yet
            cold.append(time.perf_counter() - started)
        heads[qid] = (eligible, texts)
        for r in eligible[: max(TOP_NS)]:
            saved[f"{qid}|{r.doc_id}"] = wb.caches.rerank.get_many(reranker.name, queries[qid],
                                                                   {r.doc_id: texts[r.doc_id]})[r.doc_id]
        if i % 200 == 0:
            saved_path.write_text(json.dumps(saved), encoding="utf-8")
            log(f"rerank: {name} {i}/{len(qrels)}")
    saved_path.write_text(json.dumps(saved), encoding="utf-8")
    # Warm latency: top-20 of queries whose passages are cached, a new query text each time (the
    # score cache would otherwise answer), i.e. one query embedding plus dot products.
    for qid in list(qrels)[:50] if TIMING else []:
        eligible, texts = heads[qid]
        started = time.perf_counter()
        rerank(queries[qid] + " ?", eligible, texts, reranker, 20, wb.caches.rerank, 0.0, wb.caches.passage_vectors)
        warm.append(time.perf_counter() - started)
    evaluator = QrelsEvaluator(qrels)
    first = evaluator.evaluate_rankings({q: [r.doc_id for r in heads[q][0]] for q in qrels}, (METRIC, "mrr@10"))[0]
    scores = {}
    for top_n in TOP_NS:
        for lam in LAMBDAS:
            rankings = {}
            for qid in qrels:
                eligible, texts = heads[qid]
                # The saved scores, not the Workbench's bounded caches: 3,219 queries × 50 pairs
                # overflow them, and every evicted pair would cost an E5 query embedding again.
                reranked = rerank(queries[qid], eligible, {d: d for d in texts}, SavedScores(saved, qid), top_n,
                                  None, lam)
                ids = [r.doc_id for r in reranked]
                rankings[qid] = ids + [r.doc_id for r in eligible[top_n:]]
            scores[f"{top_n}|{lam}"] = evaluator.evaluate_rankings(rankings, (METRIC, "mrr@10"))[0][METRIC]
    timing = {"cold_top50_ms_p50": 1000 * statistics.median(cold) if cold and TIMING else None,
              "warm_top20_ms_p50": 1000 * statistics.median(warm[-50:]) if warm else None}
    return {"first_stage": first[METRIC], "reranked": scores}, timing


class SavedScores:
    """A reranker that answers from the study's saved E5 scores of one query ("query id|doc id"
    -> score); it is handed doc ids as its "texts". `rerank.rerank` orders as in the app."""

    name, kind = "e5 (saved scores)", "saved E5 scores"

    def __init__(self, saved: dict[str, float], qid: str):
        self.saved, self.qid = saved, qid

    def score(self, query: str, doc_ids: list[str]) -> list[float]:
        return [self.saved[f"{self.qid}|{d}"] for d in doc_ids]


def choose_rerank(deltas: dict[str, dict[str, float]]) -> dict:
    """Leave-one-set-out choice of (top-N, λ): deltas = set -> variant -> ΔnDCG@10 vs first stage.

    On the training sets, keep the variants that lower no set (Δ ≥ 0 on each); among them take
    the best mean Δ (λ = 1, the first stage itself, always qualifies). Scored on the held-out set.
    """
    sets = list(deltas)
    variants = list(next(iter(deltas.values())))

    def pick(train: list[str]) -> str:
        safe = [v for v in variants if all(deltas[s][v] >= 0 for s in train)]
        return max(safe, key=lambda v: (statistics.fmean(deltas[s][v] for s in train), -variants.index(v)))

    rows = [{"held_out": s, "chosen": (chosen := pick([t for t in sets if t != s])), "delta": deltas[s][chosen]}
            for s in sets]
    return {"rows": rows, "overall": pick(sets)}


def part_rerank(study: Study, base: SearchConfig, sets: tuple[str, ...] = SETS) -> None:
    results, timings = {}, {}
    for name in sets:
        results[name], timings[name] = rerank_table(study, name, base)
    deltas = {s: {v: x - results[s]["first_stage"] for v, x in results[s]["reranked"].items()} for s in sets}
    choice = choose_rerank(deltas)
    study.save("rerank", {"base": base.to_dict(), "results": results, "timings": timings, "choice": choice})
    for top_n in TOP_NS:
        print(f"\ntop-N = {top_n}: nDCG@10 (Δ vs first stage)\n\n| set | first stage | "
              + " | ".join(f"λ={lam:g}" for lam in LAMBDAS) + " |\n|---|---|" + "---|" * len(LAMBDAS))
        for s in sets:
            cells = [f"{results[s]['reranked'][f'{top_n}|{lam}']:.4f} ({deltas[s][f'{top_n}|{lam}']:+.3f})"
                     for lam in LAMBDAS]
            print(f"| {s} | {results[s]['first_stage']:.4f} | " + " | ".join(cells) + " |")
    print("\n| held-out set | (top-N, λ) chosen on the other four | Δ nDCG@10 held out |\n| --- | --- | --- |")
    for r in choice["rows"]:
        print(f"| {r['held_out']} | {r['chosen']} | {r['delta']:+.4f} |")
    print(f"\nchosen on all five: {choice['overall']}")
    print("\n| set | rerank top-50, cold passage cache (ms, p50 of 20) | top-20, passages cached (ms, p50 of 50) |"
          "\n| --- | --- | --- |")
    for s in sets:
        cold = timings[s]["cold_top50_ms_p50"]
        warm = timings[s]["warm_top20_ms_p50"]
        print(f"| {s} | {'—' if cold is None else f'{cold:.0f}'} | {'—' if warm is None else f'{warm:.1f}'} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("parts", nargs="+", choices=("models", "cross", "ingest", "fusion", "rerank", "latency"))
    parser.add_argument("--eval-dir", type=Path, default=REPO.parent / "shared" / "eval")
    parser.add_argument("--cross-dir", type=Path, default=REPO / "data" / "eval-cross")
    parser.add_argument("--out", type=Path, default=REPO / "data" / "study")
    parser.add_argument("--sets", default=",".join(SETS), help="the evaluation sets of the rerank part")
    parser.add_argument("--ingest-docs", type=int, default=1000, help="nfcorpus documents the ingest part ingests")
    parser.add_argument("--base", help="first-stage SearchConfig JSON for the rerank part (default: the shipped one)")
    args = parser.parse_args()
    study = Study(args.eval_dir, args.cross_dir, args.out)
    base = SearchConfig.from_json(args.base) if args.base else SearchConfig()
    sets = tuple(args.sets.split(","))
    parts = {"models": part_models, "cross": part_cross, "ingest": lambda s: part_ingest(s, args.ingest_docs),
             "fusion": part_fusion, "latency": lambda s: part_latency(s, sets),
             "rerank": lambda s: part_rerank(s, base, sets)}
    for part in args.parts:
        started = time.perf_counter()
        print(f"\n## {part}\n", flush=True)
        parts[part](study)
        log(f"{part}: {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
