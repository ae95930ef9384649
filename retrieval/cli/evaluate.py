"""`evaluate`, `sweep`, `optimize`: judge configs on judged queries (a BEIR folder, or a collection
with one of its query sets): one config's metrics (kept as a snapshot, gated against a baseline),
the fusion grid, the learned config."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from retrieval.cli.common import (
    add_config_options,
    at_least,
    config_from_args,
    log,
    log_progress,
    open_workbench,
    positive_seconds,
    source_names,
)
from retrieval.types import RetrievalError

GATE_ALPHA = 0.05  # `--fail-if-worse`: a fall counts when the paired randomization p is below this


def add_judged_options(parser: argparse.ArgumentParser) -> None:
    """What `evaluate`, `sweep` and `optimize` judge (`_judged`): SOURCE, --queryset, --model,
    --max-queries, --skip-invalid, --no-cross-lingual."""
    parser.add_argument("source", type=Path, metavar="DIR|COLLECTION",
                        help="a BEIR folder, or with --queryset a collection")
    parser.add_argument("--queryset", metavar="NAME", help="judge the collection with its query set NAME (judged "
                                                           "in the app, or imported with 'queryset import')")
    parser.add_argument("--model", help="embedding model (default: by corpus language)")
    parser.add_argument("--max-queries", type=at_least(1), help="use only the first N judged queries")
    parser.add_argument("--judgments", metavar="SOURCE",
                        help="with --queryset: the judgment source, 'consensus' (the raters', the default) or "
                             "one implicit list of the set, e.g. implicit:pbm ('judge implicit' saves them)")
    parser.add_argument("--skip-invalid", dest="skip_invalid", action="store_true",
                        help="BEIR folder: leave out corpus lines with a problem (listed) and load the rest; their "
                             "judgments stay, so they count as relevant documents never found")
    parser.add_argument("--no-cross-lingual", dest="cross_lingual", action="store_const", const=False, default=None,
                        help="BEIR folder: embed with the collection's model only, not also with multilingual-e5-small "
                             "for questions in the other language (by default below 20,000 documents: about 3× the "
                             "ingest's CPU); cached apart from the default's collection")


def add_parser(sub) -> None:
    """The `evaluate`, `sweep` and `optimize` commands (`main.build_parser` calls this)."""
    p = sub.add_parser("evaluate", help="evaluate on a BEIR folder (ingested once into a cache collection)")
    add_judged_options(p)
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--snapshot", metavar="NAME", help="also keep this evaluation as snapshot NAME")
    p.add_argument("--baseline", metavar="NAME", help="compare with snapshot NAME (a CI gate with --fail-if-worse)")
    p.add_argument("--fail-if-worse", type=float, dest="fail_if_worse", metavar="MARGIN",
                   help="with --baseline: exit 2 when the metric falls by more than MARGIN with p < 0.05; also "
                        "exit 2 when the queries paired with the baseline are too few for any fall to reach "
                        "p < 0.05 (a gate that cannot fail)")
    p.add_argument("--allow-underpowered", action="store_true", dest="allow_underpowered",
                   help="with --fail-if-worse: let a gate that cannot fail (too few paired queries) pass, with "
                        "a warning")
    p.add_argument("--metric", default="ndcg@10", help="the metric --baseline compares (default ndcg@10)")
    add_config_options(p)

    p = sub.add_parser("sweep", help="judge the fusion grid (every method × 11 weight splits) on a BEIR folder "
                                         "(retrieval once per query)")
    add_judged_options(p)
    p.add_argument("--sources", default="bm25,dense", help="the two sources the grid splits weight between")
    p.add_argument("--top", type=at_least(1), help="print only the N best variants")
    p.add_argument("--rerank-grid", action="store_true",
                   help="add rerank variants: the config's first stage reranked for λ = 0, 0.1, …, 1 at each "
                        "--rerank-top-ns (the reranker scores each query's top-N once)")
    p.add_argument("--rerank-top-ns", help="comma-separated top-N values of the rerank variants (default: "
                                           "--rerank-top-n)")
    p.add_argument("--json", action="store_true", help="print a JSON list (best first): label, config, metrics")
    add_config_options(p)

    p = sub.add_parser("optimize", help="search the fusion parameters on judged queries (Bayesian, Optuna TPE), "
                                        "cross-validated over queries; retrieval once per query")
    add_judged_options(p)
    p.add_argument("--method", default="bayes", choices=("bayes", "query-dependent", "lambdamart"),
                   help="bayes: TPE over the weights, fusion method, normalisation, combination, RRF k, depth, "
                        "per-source minimums (and λ with --rerank); query-dependent: the same, with the two "
                        "sources' split set per query from its features (length, script, unknown terms, BM25's "
                        "top-score gap); lambdamart: a learned ranker (LightGBM) over each candidate's scores, "
                        "ranks, the query's features, document length and title match, reordering the config's "
                        "candidates")
    p.add_argument("--trials", type=at_least(1), default=50, help="trials per study (default 50; k + 1 studies)")
    p.add_argument("--seconds", type=positive_seconds,
                   help="stop after this many seconds in all (the best so far is kept)")
    p.add_argument("--folds", type=at_least(2), default=5, help="cross-validation folds over queries (default 5)")
    p.add_argument("--seed", type=at_least(0), default=0,
                   help="folds and sampler seed (default 0): same seed, same result")
    p.add_argument("--metric", default="ndcg@10", help="the metric maximised (default ndcg@10)")
    p.add_argument("--sources", help="the sources weighed (default: the config's)")
    p.add_argument("--save", metavar="NAME", help="save the learned config under NAME (as the Evaluate page does)")
    p.add_argument("--overwrite", action="store_true", help="with --save: replace a saved config of that name")
    p.add_argument("--json", action="store_true", help="print one JSON object: method, cv and in_sample (each "
                   "with the metric and ci95), default, gain, config, seconds, …")
    add_config_options(p)


def _judged(args, workbench) -> tuple[str, dict[str, str], dict, str, list[str]]:
    """What `evaluate`, `sweep` and `optimize` judge: the collection, the queries, the judgments
    (the first `--max-queries` judged queries when that is given), the query set's name for
    snapshots and the corpus lines `--skip-invalid` left out (each with its reason).
    SOURCE is a BEIR folder (ingested once into a cache collection), or with `--queryset NAME` a
    collection whose query set NAME was judged in the app (or imported)."""
    from retrieval.evaluation.snapshots import judged_label

    if args.queryset:
        name = workbench.resolve(str(args.source))
        queries, qrels = workbench.judgments.judged_queries(name, args.queryset, args.max_queries,
                                                            source=args.judgments)
        return name, queries, qrels, judged_label(args.queryset, args.judgments), []
    if args.judgments:
        raise RetrievalError("--judgments chooses among a query set's judgment sources: add --queryset NAME")
    from retrieval.evaluation.beir_cache import ensure_beir_collection

    if not args.source.is_dir():
        raise RetrievalError(f"{args.source} is not a BEIR folder (corpus.jsonl, queries.jsonl, qrels/); to "
                             "judge a collection with a query set of its own, add --queryset NAME")
    name, corpus = ensure_beir_collection(workbench.store, args.source, args.model, log, log_progress,
                                          skip_invalid=args.skip_invalid, cross_lingual=args.cross_lingual)
    queries, qrels, label = corpus.queries, corpus.qrels, f"beir:{args.source.name}"
    skipped = corpus.skipped
    if args.max_queries:
        qrels = dict(list(qrels.items())[: args.max_queries])
    return name, queries, qrels, label, skipped


def announce_estimate(workbench, name: str, queries: dict[str, str], qrels: dict, config, then: str) -> bool:
    """Long work says how long first (`candidates.estimate_seconds`, timed on a few queries whose
    vectors and candidates the run then reuses): on stderr, before it; whether it did (not for a
    handful of queries)."""
    from retrieval.evaluation.candidates import ESTIMATE_SAMPLE, about, estimate_seconds

    texts = [queries[q] for q in qrels if qrels[q] and q in queries]
    if len(texts) <= ESTIMATE_SAMPLE:
        return False
    log(f"{len(texts)} queries: {about(estimate_seconds(workbench, name, texts, config))} to embed and retrieve "
        f"them (timed on {ESTIMATE_SAMPLE}), then {then}")
    return True


def with_skipped(payload: dict, skipped: list[str]) -> dict:
    """A command's JSON object with what --skip-invalid left out: `skipped` (how many corpus
    lines) and `skipped_records` (each with its reason), so a script reads it from stdout."""
    return {**payload, "skipped": len(skipped), "skipped_records": skipped}


def cmd_evaluate(args) -> int:
    from retrieval.evaluation.evaluate import evaluate_collection
    from retrieval.evaluation.snapshots import SnapshotStore

    config = config_from_args(args)
    workbench = open_workbench(args)
    name, queries, qrels, label, skipped = _judged(args, workbench)
    started = time.perf_counter()

    def progress(done: int, total: int) -> None:
        if done == total or done % 100 == 0:
            seconds = time.perf_counter() - started
            log(f"  queries {done}/{total} ({seconds:.0f} s, {done / max(seconds, 1e-9):.1f} queries/s)")

    if args.fail_if_worse is not None and not args.baseline:
        raise RetrievalError("--fail-if-worse needs --baseline NAME")
    if args.allow_underpowered and args.fail_if_worse is None:
        raise RetrievalError("--allow-underpowered needs --fail-if-worse MARGIN")
    if args.fail_if_worse is not None and not 0 <= args.fail_if_worse < 1:
        raise RetrievalError(f"--fail-if-worse takes a margin from 0 to below 1 (metrics are 0–1), got "
                             f"{args.fail_if_worse:g}")
    snapshots = SnapshotStore(workbench.store)
    # bad names and damaged baselines fail before the work
    baseline = snapshots.get(args.baseline).check_metrics((args.metric,)) if args.baseline else None
    if args.snapshot:
        snapshots.check_free(args.snapshot)
    if announce_estimate(workbench, name, queries, qrels, config, "they are scored"):
        started = time.perf_counter()
    report = evaluate_collection(workbench, name, queries, qrels, config, progress=progress)
    for source, (failed, first) in report.errors.items():  # e.g. an outside engine stopped mid-run
        log(f"warning: source {source} failed on {failed} of {report.n_queries} queries (counted as retrieving "
            f"nothing); first error: {first}")
    if args.json:
        print(json.dumps(with_skipped(report.to_json_dict(), skipped), ensure_ascii=False))
    else:
        metric_names = list(next(iter(report.metrics.values())))
        print(f"{report.n_queries} queries on {args.source}" + (f" ({label})" if args.queryset else ""))
        print(f"{'system':<8} " + " ".join(f"{m:>12}" for m in metric_names))
        for system, values in report.metrics.items():
            print(f"{system:<8} " + " ".join(f"{values[m]:>12.4f}" for m in metric_names))
    if args.snapshot or args.baseline:
        return _snapshot_and_gate(args, snapshots, baseline, workbench, name, queries, qrels, config, label)
    return 0


def _snapshot_and_gate(args, snapshots, baseline, workbench, collection: str, queries, qrels, config,
                       query_set: str) -> int:
    """`evaluate … --snapshot NAME` keeps the evaluation; `--baseline NAME` diffs it against that
    snapshot and, with `--fail-if-worse MARGIN`, returns 2 when the metric fell by more than MARGIN
    with p < `GATE_ALPHA` (the losers printed to stderr), or when the paired queries are too few
    for that ever to happen (`paired.gate_blind_spot`) unless `--allow-underpowered`, else 0."""
    from retrieval.evaluation.paired import gate_blind_spot
    from retrieval.evaluation.snapshot_diff import diff, paired_queries, summary
    from retrieval.evaluation.snapshots import rerun_at, take_snapshot

    current = take_snapshot(workbench, collection, args.snapshot or "current", config, queries, qrels, query_set)
    if args.snapshot:
        snapshots.add(current)
        log(f"kept snapshot {current.name!r}")
    if baseline is None:
        return 0
    d = diff(baseline, current, args.metric, rerun=rerun_at(workbench, collection))
    log(summary(d))
    if args.fail_if_worse is None:
        return 0
    blind = gate_blind_spot([baseline.per_query[q][args.metric] for q in paired_queries(baseline, current)],
                            GATE_ALPHA)
    if blind and not args.allow_underpowered:
        log(f"The gate cannot fail: {blind}. Judge more queries (or keep a baseline with more), or pass "
            "--allow-underpowered to let it pass anyway.")
        return 2
    if blind:
        log(f"warning: the gate cannot fail ({blind}); passing because of --allow-underpowered")
    if d["delta"] < -args.fail_if_worse and d["p_value"] < GATE_ALPHA:
        log(f"worse than the baseline by more than {args.fail_if_worse:g} (p < {GATE_ALPHA:g}); the queries that "
            "lost most:")
        for entry in d["losers"]:
            log(f"  {entry['delta']:+.4f}  {entry['query_id']}  {entry['query']}")
        return 2
    return 0


def cmd_sweep(args) -> int:
    """Ingest once (cache collection), fetch candidates once per query, rank every variant of
    `sweep.default_grid(config)` in memory and print the variants best first."""
    from retrieval.evaluation.evaluate import DEFAULT_METRICS
    from retrieval.evaluation.sweep import (
        RERANK_LAMBDAS,
        default_grid,
        headline,
        held_out_estimate,
        run_sweep,
        with_current,
        with_rerank_grid,
    )

    base = config_from_args(args)
    sources = tuple(source_names(args.sources, args))
    variants = default_grid(base, sources)
    if args.rerank_top_ns and not args.rerank_grid:
        raise RetrievalError("--rerank-top-ns needs --rerank-grid")
    if args.rerank_grid:
        top_ns = [_positive_int(n, "--rerank-top-ns") for n in (args.rerank_top_ns or "").split(",") if n.strip()]
        variants = with_rerank_grid(variants, base, RERANK_LAMBDAS, top_ns or None)
    variants, current = with_current(variants, base)  # the config the options give, scored beside the grid
    workbench = open_workbench(args)
    name, queries, qrels, label, _ = _judged(args, workbench)  # its --json is a list: skipped stays on stderr
    announce_estimate(workbench, name, queries, qrels, base, f"the {len(variants)} variants are fused and scored")
    started = time.perf_counter()

    def progress(done: int, total: int) -> None:
        if done == total or done % 100 == 0:
            log(f"  {done}/{total} steps (queries, then variants) ({time.perf_counter() - started:.0f} s)")

    result = run_sweep(workbench, name, queries, qrels, variants, DEFAULT_METRICS, progress)
    log(f"{len(variants)} variants over {result.n_queries} queries: retrieval "
        f"{result.seconds['retrieval']:.1f} s, fusion + metrics {result.seconds['fusion+metrics']:.1f} s")
    rows = result.to_json_list()[: args.top] if args.top else result.to_json_list()
    held_out = held_out_estimate(result, folds=min(5, result.n_queries)) if result.n_queries >= 2 else None
    held_out_line = (f"held-out {held_out.metric} of taking the best variant ({held_out.folds}-fold over queries): "
                     f"{held_out.score:.4f} (in-sample best {held_out.in_sample:.4f})") if held_out else ""
    said = headline(result, current).sentence()
    if args.json:
        print(json.dumps(rows, ensure_ascii=False))
        log(said)
        if held_out_line:
            log(held_out_line)
        return 0
    metrics = list(result.metrics)
    print(f"{len(variants)} variants, {result.n_queries} queries on {args.source}"
          + (f" ({label})" if args.queryset else "") + ", best first")
    print(f"{'#':>3} {'variant':<46} " + " ".join(f"{m:>12}" for m in metrics))
    for rank, row in enumerate(rows, start=1):
        print(f"{rank:>3} {row['label']:<46} " + " ".join(f"{row['metrics'][m]:>12.4f}" for m in metrics))
    print("best of each family:")
    seen = set()
    for row in result.rows:
        family = (row["fusion"], row["normalization"], row["combination"], row["rerank_lambda"] is not None)
        if family not in seen:
            seen.add(family)
            print(f"    {row['label']:<46} " + " ".join(f"{row[m]:>12.4f}" for m in metrics))
    print(said)
    if held_out_line:
        print(held_out_line)
    return 0


def cmd_optimize(args) -> int:
    """Fetch each judged query's candidates once, run k + 1 studies (`optimize.cross_validate`),
    print the cross-validated and in-sample scores beside the base config's, and the config."""
    from retrieval.evaluation.optimize import cross_validate
    from retrieval.evaluation.study import prepare

    base = config_from_args(args)
    sources = source_names(args.sources, args) if args.sources else None
    workbench = open_workbench(args)
    if args.save:  # a bad or taken name fails before the work
        from retrieval.search.saved_configs import validate_config_name

        validate_config_name(args.save)
        if args.save in workbench.configs.names() and not args.overwrite:
            raise RetrievalError(f"A config named {args.save!r} exists; add --overwrite to replace it")
    name, queries, qrels, label, skipped = _judged(args, workbench)
    announce_estimate(workbench, name, queries, qrels, base, f"{args.trials} trials per study (--seconds bounds them)")
    started = time.perf_counter()
    prepared = prepare(workbench, name, queries, qrels, base, sources, args.metric,
                       lambda done, total: log(f"  candidates {done}/{total}") if done == total or done % 200 == 0
                       else None, args.method)
    log(f"candidates of {prepared.queries_fetched} queries fetched in {time.perf_counter() - started:.1f} s")

    def progress(event: dict) -> None:
        if event["trial"] == event["trials"] or event["trial"] % 10 == 0:
            log(f"  {event['label']}: trial {event['trial']}/{event['trials']}, best {event['best']:.4f}")

    result = cross_validate(prepared, args.trials, args.folds, args.seed, args.seconds, progress=progress)
    result.seconds["total"] = time.perf_counter() - started
    if result.model_text:  # the learned config names its model: keep it in the store
        from retrieval.search.ranker_models import RankerModels

        RankerModels(workbench.store).save(result.model_text)
        log(f"kept the learned ranker {result.config.ranker}")
    if args.save:
        workbench.configs.save(args.save, result.config, overwrite=args.overwrite)
        log(f"saved the learned config as {args.save!r}")
    if args.json:
        print(json.dumps(with_skipped(result.to_json(), skipped), ensure_ascii=False))
        return 0
    print(f"{prepared.queries_fetched} queries on {args.source}" + (f" ({label})" if args.queryset else ""))
    print(result.summary())
    print("learned config: " + json.dumps({k: v for k, v in result.config.to_dict().items()
                                          if v != base.to_dict().get(k)}, ensure_ascii=False))
    if result.full.importance:
        print("parameter importance: " + ", ".join(f"{k} {v:.2f}" for k, v in result.importance_labels().items()))
    return 0


def _positive_int(text: str, option: str) -> int:
    """`text` as an int ≥ 1, or a RetrievalError naming `option`."""
    try:
        value = int(text.strip())
    except ValueError:
        value = 0
    if value < 1:
        raise RetrievalError(f"{option} takes whole numbers ≥ 1, got {text.strip()!r}")
    return value


COMMANDS = {"evaluate": cmd_evaluate, "sweep": cmd_sweep, "optimize": cmd_optimize}
