"""Command line:
`python -m retrieval {ingest,search,evaluate,sweep,optimize,collections,snapshot,queryset,judge,serve,prepare} …`
(`judge`: cli_judge.py).

Results and JSON go to stdout; progress and messages go to stderr. search, evaluate, sweep,
optimize and snapshot take the fusion config as options (or a saved config with `--config
FILE.json` or `--config NAME`); serve takes `--config` per collection.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path

import retrieval.cli.judge as cli_judge
import retrieval.serve.server as serve
from retrieval import limits
from retrieval.indexing.readers.stream import STREAM_BATCH
from retrieval.search.config import (
    BM25_BACKENDS,
    COMBINATIONS,
    FUSION_METHODS,
    NORMALIZATIONS,
    PARAM_GROUPS,
    SearchConfig,
    parse_weights,
)
from retrieval.search.fusion.methods import COMBINATIONS as COMBINATION_REGISTRY
from retrieval.search.fusion.methods import FUSION_METHODS as METHOD_REGISTRY
from retrieval.search.result_json import search_json
from retrieval.sources import SOURCES
from retrieval.types import RetrievalError


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _progress(stage: str, done: int, total: int) -> None:
    if done == total or done % 1000 < 32:
        _log(f"  {stage} {done}/{total}")


def add_config_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("search config")
    g.add_argument("--config", metavar="FILE.json|NAME",
                   help="a SearchConfig JSON file, or the name of a config saved on the Evaluate page; the "
                        "options below override it")
    g.add_argument("--fusion", choices=FUSION_METHODS,
                   help=" ".join(f"{m.name}: {m.help}" for m in METHOD_REGISTRY.values()))
    g.add_argument("--k", type=float, dest="rrf_k", help="RRF k (≥ 1)")
    g.add_argument("--weights", help="per-source weights, e.g. bm25=0.4,dense=0.6")
    g.add_argument("--norm", choices=NORMALIZATIONS, dest="normalization")
    g.add_argument("--combination", choices=COMBINATIONS,
                   help="weighted fusion: " + " ".join(c.help for c in COMBINATION_REGISTRY.values()))
    g.add_argument("--depth", type=int, help="candidates per source")
    g.add_argument("--top-k", type=int, dest="top_k")
    g.add_argument("--min-score", type=float, dest="min_score")
    g.add_argument("--min-display-score", type=float, dest="min_display_score")
    g.add_argument("--min-raw", dest="min_raw", help="per-source minimum raw score, e.g. bm25=2.5")
    g.add_argument("--tie-field", dest="tie_field", help="numeric metadata field that breaks ties")
    g.add_argument("--filter", dest="filters", action="append",
                   help="metadata filter applied before ranking, repeatable (all must pass): "
                        "'category=hair_problem', 'tags=a|b', 'year>=2010', 'date<2024-01-01'")
    g.add_argument("--bm25-backend", choices=BM25_BACKENDS, dest="bm25_backend")
    g.add_argument("--k1", type=float, dest="bm25_k1")
    g.add_argument("--b", type=float, dest="bm25_b")
    g.add_argument("--rerank", action="store_true", default=None, help="rerank the top-N fused results")
    g.add_argument("--rerank-top-n", type=int, dest="rerank_top_n")
    g.add_argument("--rerank-lambda", type=float, dest="rerank_lambda",
                   help="λ in final = λ·norm(fused) + (1 − λ)·norm(rerank); 0 = the reranker's order")
    g.add_argument("--reranker", help="'e5' (offline default) or a CrossEncoder folder / id")
    g.add_argument("--no-language-aware", dest="language_aware", action="store_false", default=None,
                   help="keep BM25 and keyword weights when the query's script differs from the collection's")
    for group in PARAM_GROUPS:  # one option per source with its own parameters, from its descriptor
        names = [p.key for p in SOURCES[group].params if p.group == group]
        g.add_argument(f"--{group}",
                       help=f"{SOURCES[group].label} parameters as name=value,…; names: {', '.join(names)}")
    g.add_argument("--focus", dest="graph_focus", help="entity graph focus topics, comma-separated")


def add_judged_options(parser: argparse.ArgumentParser) -> None:
    """What `evaluate`, `sweep` and `optimize` judge (`_judged`): SOURCE, --queryset, --model,
    --max-queries, --skip-invalid."""
    parser.add_argument("source", type=Path, metavar="DIR|COLLECTION",
                        help="a BEIR folder, or with --queryset a collection")
    parser.add_argument("--queryset", metavar="NAME", help="judge the collection with its query set NAME (judged "
                                                           "in the app, or imported with 'queryset import')")
    parser.add_argument("--model", help="embedding model (default: by corpus language)")
    parser.add_argument("--max-queries", type=at_least(1), help="use only the first N judged queries")
    parser.add_argument("--skip-invalid", dest="skip_invalid", action="store_true",
                        help="BEIR folder: leave out corpus lines with a problem (listed) and load the rest; their "
                             "judgments stay, so they count as relevant documents never found")


def config_from_args(args: argparse.Namespace) -> SearchConfig:
    """The config the options give: `--config` (a JSON file or a saved config's name,
    `ConfigStore.resolve`), then each option over it."""
    data = {}
    if args.config:
        from retrieval.search.saved_configs import ConfigStore
        from retrieval.store import Store

        data = ConfigStore(Store(args.db)).resolve(args.config)[0].to_dict()
    for name in ("fusion", "rrf_k", "normalization", "combination", "depth", "top_k", "min_score", "min_display_score",
                 "tie_field", "bm25_backend", "bm25_k1", "bm25_b", "rerank", "rerank_top_n", "rerank_lambda",
                 "reranker", "graph_focus", "language_aware"):
        value = getattr(args, name)
        if value is not None:
            data[name] = value
    if args.weights:
        data["weights"] = parse_weights(args.weights)
    if args.min_raw:
        data["min_raw"] = parse_weights(args.min_raw)
    if args.filters:
        data["filters"] = [*data.get("filters", []), *args.filters]
    for group in PARAM_GROUPS:
        if getattr(args, group):
            data[group] = {**data.get(group, {}), **parse_weights(getattr(args, group))}
    return SearchConfig.from_dict(data)


def at_least(minimum: int):
    """An argparse type: an integer ≥ `minimum`, else argparse's clear usage error (exit 2)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be at least {minimum}, got {value}")
        return value
    return parse


def positive_seconds(text: str) -> float:
    """An argparse type: a number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m retrieval", description=__doc__)
    parser.add_argument("--db", help="LanceDB location: a folder or s3://bucket/path (default $WORKBENCH_DB or "
                        "./data/lancedb; object storage options from $WORKBENCH_STORAGE_OPTIONS, docs/scale.md)")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("ingest", help="parse a file or folder and store it as a collection")
    p.add_argument("path", type=Path)
    p.add_argument("--collection", required=True,
                   help="the collection's name, in any script (1–64 characters); a name that is not a–z, 0–9, "
                        "'_', '-' is kept as its display name and a safe table name is derived from it")
    p.add_argument("--model", help="embedding model alias, folder or id (default: by corpus language)")
    p.add_argument("--add", action="store_true", help="add to an existing collection")
    p.add_argument("--skip-invalid", dest="skip_invalid", action="store_true",
                   help="leave out records with a problem (an empty text, a repeated id …) and load the rest, "
                        "listing what was skipped (default: any problem loads nothing)")
    xl = p.add_mutually_exclusive_group()
    xl.add_argument("--cross-lingual", dest="cross_lingual", action="store_true", default=None,
                    help="also embed with multilingual-e5-small for questions in the other language "
                         "(default: for an English or Chinese collection whose model reads one language, "
                         "below 20,000 documents: ~3× the ingest time)")
    xl.add_argument("--no-cross-lingual", dest="cross_lingual", action="store_false",
                    help="one embedding model only")
    p.add_argument("--id-column")
    p.add_argument("--title-column")
    p.add_argument("--text-column")
    p.add_argument("--text-mode", choices=("paragraphs", "file"), default="paragraphs")
    p.add_argument("--max-chunk-chars", type=at_least(1), default=1500)
    p.add_argument("--batch-size", type=at_least(1), default=STREAM_BATCH,
                   help="documents read, embedded and written per batch (memory holds one batch; default "
                        f"{STREAM_BATCH}); the whole ingest is still all or nothing")

    p = sub.add_parser("search", help="search a collection and explain each result")
    p.add_argument("collection", help="its table name or display name")
    p.add_argument("query")
    p.add_argument("--json", action="store_true")
    p.add_argument("--explain-doc", dest="explain_doc", metavar="ID",
                   help="why not this document: per source its score and whole-collection rank, the first "
                        "stage that dropped it, and the smallest single config change that brings it into the top-K")
    p.add_argument("--at-version", dest="at_version", type=int, metavar="N",
                   help="search the collection as it was at table version N (read-only; "
                        "'collections versions NAME' lists them)")
    add_config_options(p)

    p = sub.add_parser("evaluate", help="evaluate on a BEIR folder (ingested once into a cache collection)")
    add_judged_options(p)
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument("--snapshot", metavar="NAME", help="also keep this evaluation as snapshot NAME")
    p.add_argument("--baseline", metavar="NAME", help="compare with snapshot NAME (a CI gate with --fail-if-worse)")
    p.add_argument("--fail-if-worse", type=float, dest="fail_if_worse", metavar="MARGIN",
                   help="with --baseline: exit 2 when the metric falls by more than MARGIN with p < 0.05")
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

    p = sub.add_parser("snapshot", help="keep an evaluation of a collection's query set as a named snapshot, list, "
                                        "rename, delete or export snapshots, and diff two or more")
    p.add_argument("action", choices=("create", "list", "rename", "delete", "export", "diff", "report"))
    p.add_argument("names", nargs="*", help="create: COLLECTION; rename: OLD NEW; delete, export: NAME; "
                                            "diff: A B [C …] (each later one against A); report: A B; "
                                            "list: [COLLECTION]")
    p.add_argument("--html", type=Path, metavar="FILE", help="report: the self-contained HTML file to write")
    p.add_argument("--name", help="create: the new snapshot's name")
    p.add_argument("--queryset", default="default", help="create: the query set to evaluate (default: default)")
    p.add_argument("--metric", default="ndcg@10", help="diff: the metric compared")
    p.add_argument("--trec", action="store_true", help="export: the run in TREC format instead of JSON")
    p.add_argument("--json", action="store_true", help="diff: print JSON")
    add_config_options(p)

    p = sub.add_parser("collections", help="list, show stats or versions, build a vector index or the entity graph, "
                                           "delete or clear collections")
    p.add_argument("action", choices=("list", "stats", "versions", "index", "graph", "delete", "clear"), nargs="?",
                   default="list")
    p.add_argument("name", nargs="?", help="the collection's table name or display name")

    p = sub.add_parser("queryset", help="a collection's query sets: list them, export one (queries and judgments "
                                        "in one JSONL file), import one")
    p.add_argument("action", choices=("list", "export", "import"))
    p.add_argument("collection", help="its table name or display name")
    p.add_argument("name", nargs="?", help="the query set")
    p.add_argument("file", nargs="?", type=Path, help="import: a queries file (JSONL, TSV or CSV); a query set "
                                                        "exported here carries its judgments")
    p.add_argument("--qrels", type=Path, help="import: a judgments file (TREC, BEIR tsv or CSV)")
    p.add_argument("--replace", action="store_true", help="import: replace a query set of the same name")

    cli_judge.add_parser(sub)

    p = sub.add_parser("serve", help="serve collections with their saved configs to agents (MCP: stdio or HTTP)")
    serve.add_arguments(p)

    sub.add_parser("prepare", help="make the built-in models' files for this machine now (E5's conversion, the "
                   "ONNX exports a CPU runs; about a minute, once), not at the first ingest, and delete outdated "
                   "or unfinished exports; ./run.sh does it after an install")
    return parser


def console() -> None:
    """The `retrieval` console script (pyproject.toml): `python -m retrieval` under another name."""
    sys.exit(main())


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    # Warnings and tracebacks of the core's module loggers (a failing source …) go to stderr.
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        return COMMANDS[args.command](args)
    except RetrievalError as exc:
        _log(f"error: {exc}")
        return 2
    except OSError as exc:  # a file named on the command line that cannot be read or written
        if exc.filename is None:
            raise
        _log(f"error: {exc.filename}: {exc.strerror or exc}")
        return 2


def _workbench(args):
    from retrieval.search.workbench import Workbench
    from retrieval.store import Store

    return Workbench(Store(args.db))


def _judged(args, workbench) -> tuple[str, dict[str, str], dict, str]:
    """What `evaluate` and `sweep` judge: the collection, the queries, the judgments (the first
    `--max-queries` judged queries when that is given) and the query set's name for snapshots.
    SOURCE is a BEIR folder (ingested once into a cache collection), or with `--queryset NAME` a
    collection whose query set NAME was judged in the app (or imported)."""
    if args.queryset:
        name = workbench.resolve(str(args.source))
        queries = workbench.judgments.queries(name, args.queryset)
        qrels = {q: d for q, d in workbench.judgments.qrels(name, args.queryset).items() if d}
        if not qrels:
            raise RetrievalError(f"Query set {args.queryset!r} of {name!r} has no judgments yet")
        label = args.queryset
    else:
        from retrieval.evaluation.beir_cache import ensure_beir_collection

        if not args.source.is_dir():
            raise RetrievalError(f"{args.source} is not a BEIR folder (corpus.jsonl, queries.jsonl, qrels/); to "
                                 "judge a collection with a query set of its own, add --queryset NAME")
        name, corpus = ensure_beir_collection(workbench.store, args.source, args.model, _log, _progress,
                                              skip_invalid=args.skip_invalid)
        queries, qrels, label = corpus.queries, corpus.qrels, f"beir:{args.source.name}"
    if args.max_queries:
        qrels = dict(list(qrels.items())[: args.max_queries])
    return name, queries, qrels, label


def cmd_ingest(args) -> int:
    """Streaming ingest (indexing.pipeline.ingest_stream): files of any size, one batch in memory, all or
    nothing; tqdm bars on stderr show documents/s and the time left."""
    from retrieval.indexing.readers.options import ColumnMapping, ParseOptions
    from retrieval.indexing.readers.stream import open_stream

    options = ParseOptions(
        mapping=ColumnMapping(id=args.id_column, title=args.title_column, text=args.text_column),
        text_mode=args.text_mode, markdown_max_chars=args.max_chunk_chars, skip_invalid=args.skip_invalid,
    )
    stream = open_stream(args.path, options, args.batch_size)
    _log(f"found {stream.total} documents ({stream.format}, encoding {stream.encoding}); "
         f"ingesting in batches of {stream.batch_size}")
    for note in stream.notes:
        _log(f"  note: {note}")
    shown = len(stream.notes)
    workbench = _workbench(args)
    started = time.perf_counter()
    with StageBars() as bars:
        if args.add:
            result = workbench.ingest_stream(workbench.resolve(args.collection), stream, add=True, progress=bars)
        else:
            result = workbench.ingest_stream(args.collection, stream, model=args.model, progress=bars,
                                             cross_lingual=args.cross_lingual)
    seconds = time.perf_counter() - started
    for note in stream.notes[shown:]:  # decided while reading (columns of each file's first batch)
        _log(f"  note: {note}")
    info = result.info
    xl = f", cross-lingual vectors {info.xl_model}" if info.xl_model else ""
    _log(f"collection {collection_label(info)}: {info.doc_count} documents, model {info.model} ({info.dim}-d){xl}, "
         f"language {info.language}; {ingest_rate(result.documents, seconds)}")
    if result.note:
        _log(f"note: {result.note}")
    if stream.skipped:
        from retrieval.indexing.readers.parse import skipped_note

        _log(f"note: {skipped_note(stream.skipped)}")
    return 0


class StageBars:
    """A `Progress` callback drawing one tqdm bar per stage on stderr (documents, docs/s, time
    left when the total is known; 0 = unknown), closed when the stage changes or the block ends."""

    def __init__(self, file=None):
        self._file = file
        self._stage: str | None = None
        self._bar = None

    def __enter__(self) -> StageBars:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __call__(self, stage: str, done: int, total: int) -> None:
        from tqdm import tqdm

        if stage != self._stage:
            self.close()
            self._stage = stage
            self._bar = tqdm(total=total or None, desc=stage, unit="doc", file=self._file or sys.stderr,
                             mininterval=0.5, dynamic_ncols=True)
        if done > self._bar.n:
            self._bar.update(done - self._bar.n)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
        self._stage = None


def collection_label(info) -> str:
    """A collection as the CLI names it: its display name, and its table name in brackets when
    they differ ("中文集合 (table c-3f1a2b4c)"): either works wherever a collection is named."""
    return info.name if info.label == info.name else f"{info.label} (table {info.name})"


def ingest_rate(documents: int, seconds: float) -> str:
    """'120 documents in 3.2 s, 37.5 docs/s': one decimal below 100 docs/s (a small ingest no
    longer reads '0 docs/s'); no rate when the time is too short to measure."""
    counted = f"{documents} document{'' if documents == 1 else 's'}"
    if seconds < 0.01:
        return f"{counted} in under 10 ms"
    rate = documents / seconds
    return f"{counted} in {seconds:.1f} s, {rate:.{1 if rate < 100 else 0}f} docs/s"


def cmd_search(args) -> int:
    config = config_from_args(args)
    if args.explain_doc is not None:
        return explain_doc(args, config)
    workbench, collection = _searched(args)
    result = workbench.search(collection, args.query, config)
    data = search_json(result)
    if args.json:
        print(json.dumps(data, ensure_ascii=False, indent=2))
        return 0
    for note in data["notes"]:
        _log(f"note: {note}")
    why = " (no query text)" if not args.query.strip() else ""
    print(f"{data['n_candidates']} candidates{why}; removed: "
          + ", ".join(f"{k} {v}" for k, v in data["removed"].items()))
    for item in data["results"]:
        meta = item["_meta"]
        parts = [f"{s}#{meta[f'{s}_rank'] or '-'}" for s in config.sources]
        print(f"{meta['rank']:>3}. {item['display_score']:.3f} ({item['score']:.5f}) [{' '.join(parts)}] "
              f"{item['id']}  {(item['title'] or item['text'])[:70]}")
    return 0


def _searched(args):
    """The Workbench a search runs on (at `--at-version N` when given) and the collection's table name."""
    workbench = _workbench(args)
    collection = workbench.resolve(args.collection)
    if args.at_version is not None:
        workbench = workbench.at_version(collection, args.at_version)
        _log(f"searching {collection!r} as it was at version {args.at_version} (read-only)")
    return workbench, collection


def explain_doc(args, config: SearchConfig) -> int:
    """`search … --explain-doc ID`: the why-not report (`Workbench.explain_document`)."""
    from retrieval.search.whynot import standing_cells

    workbench, collection = _searched(args)
    e = workbench.explain_document(collection, args.query, config, args.explain_doc)
    if args.json:
        print(json.dumps(e.to_json_dict(), ensure_ascii=False, indent=2))
        return 0
    print(f"document {e.doc_id}" + (f"  {e.title[:70]}" if e.title else ""))
    if e.over_whole_collection:
        print("(the filters remove it: scores and ranks below are over the whole collection)")
    rows = [standing_cells(s, config.depth) for s in e.standings]
    columns = list(rows[0]) if rows else []
    widths = {c: max(len(c), *(len(r[c]) for r in rows)) for c in columns if c != "note"}
    print("  ".join(c.ljust(widths[c]) for c in widths))
    for row in rows:
        print("  ".join(row[c].ljust(widths[c]) for c in widths) + (f"  {row['note']}" if row["note"] else ""))
    print("rank: 1 + documents the source scores strictly higher (ties: others with the same score); "
          "position: its place in the source's order, what the depth cuts")
    print(f"stage: {e.stage}: {e.reason}")
    if e.stage == "shown":
        return 0
    if e.best is None:
        print(f"no single change of the {e.tried} tried brings it into the top {config.top_k}")
        return 0
    print(f"smallest change ({e.tried} tried): {e.best.describe()}")
    for change in e.changes[1:]:
        print(f"  also: {change.describe()}")
    return 0


def cmd_evaluate(args) -> int:
    from retrieval.evaluation.evaluate import evaluate_collection
    from retrieval.evaluation.snapshots import SnapshotStore

    config = config_from_args(args)
    workbench = _workbench(args)
    name, queries, qrels, label = _judged(args, workbench)
    started = time.perf_counter()

    def progress(done: int, total: int) -> None:
        if done == total or done % 100 == 0:
            _log(f"  queries {done}/{total} ({time.perf_counter() - started:.0f} s)")

    if args.fail_if_worse is not None and not args.baseline:
        raise RetrievalError("--fail-if-worse needs --baseline NAME")
    snapshots = SnapshotStore(workbench.store)
    baseline = snapshots.get(args.baseline) if args.baseline else None  # bad names fail before the work
    if args.snapshot:
        snapshots.check_free(args.snapshot)
    report = evaluate_collection(workbench, name, queries, qrels, config, progress=progress)
    if args.json:
        print(json.dumps(report.to_json_dict(), ensure_ascii=False))
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
    with p < 0.05 (the losers printed to stderr), else 0."""
    from retrieval.evaluation.snapshot_diff import diff, summary
    from retrieval.evaluation.snapshots import rerun_at, take_snapshot

    current = take_snapshot(workbench, collection, args.snapshot or "current", config, queries, qrels, query_set)
    if args.snapshot:
        snapshots.add(current)
        _log(f"kept snapshot {current.name!r}")
    if baseline is None:
        return 0
    d = diff(baseline, current, args.metric, rerun=rerun_at(workbench, collection))
    _log(summary(d))
    if args.fail_if_worse is not None and d["delta"] < -args.fail_if_worse and d["p_value"] < 0.05:
        _log(f"worse than the baseline by more than {args.fail_if_worse:g} (p < 0.05); the queries that lost most:")
        for entry in d["losers"]:
            _log(f"  {entry['delta']:+.4f}  {entry['query_id']}  {entry['query']}")
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
    sources = tuple(s.strip() for s in args.sources.split(",") if s.strip())
    variants = default_grid(base, sources)
    if args.rerank_top_ns and not args.rerank_grid:
        raise RetrievalError("--rerank-top-ns needs --rerank-grid")
    if args.rerank_grid:
        top_ns = [_positive_int(n, "--rerank-top-ns") for n in (args.rerank_top_ns or "").split(",") if n.strip()]
        variants = with_rerank_grid(variants, base, RERANK_LAMBDAS, top_ns or None)
    variants, current = with_current(variants, base)  # the config the options give, scored beside the grid
    workbench = _workbench(args)
    name, queries, qrels, label = _judged(args, workbench)
    started = time.perf_counter()

    def progress(done: int, total: int) -> None:
        if done == total or done % 100 == 0:
            _log(f"  {done}/{total} steps (queries, then variants) ({time.perf_counter() - started:.0f} s)")

    result = run_sweep(workbench, name, queries, qrels, variants, DEFAULT_METRICS, progress)
    _log(f"{len(variants)} variants over {result.n_queries} queries: retrieval "
         f"{result.seconds['retrieval']:.1f} s, fusion + metrics {result.seconds['fusion+metrics']:.1f} s")
    rows = result.to_json_list()[: args.top] if args.top else result.to_json_list()
    held_out = held_out_estimate(result, folds=min(5, result.n_queries)) if result.n_queries >= 2 else None
    held_out_line = (f"held-out {held_out.metric} of taking the best variant ({held_out.folds}-fold over queries): "
                     f"{held_out.score:.4f} (in-sample best {held_out.in_sample:.4f})") if held_out else ""
    said = headline(result, current).sentence()
    if args.json:
        print(json.dumps(rows, ensure_ascii=False))
        _log(said)
        if held_out_line:
            _log(held_out_line)
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
    workbench = _workbench(args)
    if args.save:  # a bad or taken name fails before the work
        from retrieval.search.saved_configs import validate_config_name

        validate_config_name(args.save)
        if args.save in workbench.configs.names() and not args.overwrite:
            raise RetrievalError(f"A config named {args.save!r} exists; add --overwrite to replace it")
    name, queries, qrels, label = _judged(args, workbench)
    sources = [s.strip() for s in args.sources.split(",") if s.strip()] if args.sources else None
    started = time.perf_counter()
    prepared = prepare(workbench, name, queries, qrels, base, sources, args.metric,
                       lambda done, total: _log(f"  candidates {done}/{total}") if done == total or done % 200 == 0
                       else None, args.method)
    _log(f"candidates of {prepared.queries_fetched} queries fetched in {time.perf_counter() - started:.1f} s")

    def progress(event: dict) -> None:
        if event["trial"] == event["trials"] or event["trial"] % 10 == 0:
            _log(f"  {event['label']}: trial {event['trial']}/{event['trials']}, best {event['best']:.4f}")

    result = cross_validate(prepared, args.trials, args.folds, args.seed, args.seconds, progress=progress)
    result.seconds["total"] = time.perf_counter() - started
    if result.model_text:  # the learned config names its model: keep it in the store
        from retrieval.search.ranker_models import RankerModels

        RankerModels(workbench.store).save(result.model_text)
        _log(f"kept the learned ranker {result.config.ranker}")
    if args.save:
        workbench.configs.save(args.save, result.config, overwrite=args.overwrite)
        _log(f"saved the learned config as {args.save!r}")
    if args.json:
        print(json.dumps(result.to_json(), ensure_ascii=False))
        return 0
    print(f"{prepared.queries_fetched} queries on {args.source}" + (f" ({label})" if args.queryset else ""))
    print(result.summary())
    print("learned config: " + json.dumps({k: v for k, v in result.config.to_dict().items()
                                          if v != base.to_dict().get(k)}, ensure_ascii=False))
    if result.full.importance:
        print("parameter importance: " + ", ".join(f"{k} {v:.2f}" for k, v in result.full.importance.items()))
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


def cmd_collections(args) -> int:
    workbench = _workbench(args)
    if args.action == "list":
        for info in workbench.collections():
            truncated = "truncated not counted" if info.truncated is None else f"{info.truncated} truncated"
            graph = "graph pending" if info.graph == "pending" else "graph built"
            backend = f" ({info.encoder_backend})" if info.encoder_backend else ""
            print(f"{info.label}\t{info.name}\t{info.doc_count} docs\t{truncated}\t{info.model}{backend}\t"
                  f"{info.language}\t{info.created}\t{graph}")
        return 0
    if not args.name:
        raise RetrievalError(f"'collections {args.action}' needs a collection name")
    name = workbench.resolve(args.name)
    shown = collection_label(workbench.info(name)) if workbench.exists(name) else name
    if args.action == "stats":
        stats = workbench.stats(name)
        print(json.dumps({"info": stats.info.__dict__, **{k: v for k, v in stats.__dict__.items() if k != "info"},
                          "backends": workbench.backends(name)}, ensure_ascii=False, indent=2))
        note = workbench.truncation_note(stats.info)
        if note:
            _log(f"note: {note}")
    elif args.action == "versions":
        from retrieval.store.versions import collection_versions

        for v in collection_versions(workbench.store, name):
            print(f"v{v.version}\t{v.timestamp}\t{v.documents} documents\t{v.summary}")
    elif args.action == "index":
        workbench.build_vector_index(name)
        extra = (" and, at this size, the id index and a compaction"
                 if workbench.info(name).doc_count >= limits.SCALE_DOCS else "")
        _log(f"built an {limits.ANN_INDEX} vector index on {shown}{extra} (searches refine to exact similarities)")
    elif args.action == "graph":
        started = time.perf_counter()
        with StageBars() as bars:
            info = workbench.graph.build(name, progress=bars)
        _log(f"built the entity graph of {shown}: {ingest_rate(info.doc_count, time.perf_counter() - started)}")
    elif args.action == "delete":
        workbench.delete(name)
        _log(f"deleted {shown}")
    else:
        workbench.clear(name)
        _log(f"cleared {shown}")
    return 0


def cmd_serve(args) -> int:
    return serve.run(args, _workbench(args))


def cmd_snapshot(args) -> int:
    from retrieval.evaluation.snapshot_diff import diff_many, summary
    from retrieval.evaluation.snapshots import SnapshotStore, rerun_at

    wanted = {"create": 1, "rename": 2, "delete": 1, "export": 1, "report": 2}.get(args.action)
    if wanted is not None and len(args.names) != wanted:
        raise RetrievalError(f"'snapshot {args.action}' needs {wanted} name(s), got {len(args.names)}")
    if args.action == "diff" and len(args.names) < 2:
        raise RetrievalError(f"'snapshot diff' needs two or more snapshot names, got {len(args.names)}")
    workbench = _workbench(args)
    snapshots = SnapshotStore(workbench.store)
    if args.action == "create":
        if not args.name:
            raise RetrievalError("'snapshot create' needs --name NAME")
        collection = workbench.resolve(args.names[0])
        snap = snapshots.create(workbench, collection, args.name, config_from_args(args), args.queryset)
        _log(f"snapshot {snap.name!r}: {len(snap.per_query)} judged queries of {snap.query_set!r} on "
             f"{collection} (version {snap.table_version}, {snap.doc_count} documents)")
        print(json.dumps({"name": snap.name, "mean": snap.mean}, ensure_ascii=False))
    elif args.action == "list":
        collection = workbench.resolve(args.names[0]) if args.names else None
        for snap in snapshots.list(collection):
            means = " ".join(f"{m} {v:.4f}" for m, v in snap.mean.items())
            print(f"{snap.name}\t{snap.collection}\tv{snap.table_version}\t{snap.query_set}\t"
                  f"{len(snap.per_query)} queries\t{snap.created}\t{means}")
    elif args.action == "rename":
        snapshots.rename(*args.names)
    elif args.action == "delete":
        snapshots.delete(args.names[0])
    elif args.action == "report":
        from retrieval.evaluation.snapshot_diff import diff
        from retrieval.evaluation.snapshot_report import report_html

        if not args.html:
            raise RetrievalError("'snapshot report' needs --html FILE")
        a, b = (snapshots.get(n) for n in args.names)
        d = diff(a, b, args.metric, rerun=rerun_at(workbench, a.collection))
        args.html.write_text(report_html(d, a, b), encoding="utf-8")
        _log(f"wrote {args.html}")
    elif args.action == "export":
        print(snapshots.export_trec(args.names[0]) if args.trec else snapshots.export_json(args.names[0]), end="")
    else:
        chosen = [snapshots.get(n) for n in args.names]
        diffs = diff_many(chosen, args.metric, rerun=rerun_at(workbench, chosen[0].collection))
        if args.json:
            print(json.dumps(diffs[0] if len(diffs) == 1 else diffs, ensure_ascii=False))
            return 0
        for d in diffs:
            print(summary(d if len(diffs) > 1 else {k: v for k, v in d.items() if k != "p_holm"}))
            for cause, share in d["causes"].items():
                print(f"  {cause}: {share:+.4f}")
            for note in d["notes"]:
                print(f"  note: {note}")
            for entry in d["losers"]:
                print(f"  worse {entry['delta']:+.4f}  {entry['query_id']}  {entry['query']}")
    return 0


def cmd_queryset(args) -> int:
    """`queryset list|export|import`: what the Evaluate page's query set section does."""
    workbench = _workbench(args)
    collection = workbench.resolve(args.collection)
    judgments = workbench.judgments
    if args.action == "list":
        for name in judgments.query_sets(collection):
            qrels = judgments.qrels(collection, name)
            print(f"{name}\t{len(judgments.queries(collection, name))} queries\t{sum(1 for d in qrels.values() if d)} "
                  f"judged\t{sum(len(d) for d in qrels.values())} judgments")
        return 0
    if not args.name:
        raise RetrievalError(f"'queryset {args.action}' needs the query set's name")
    if args.action == "export":
        print(judgments.export_query_set(collection, args.name), end="")
        return 0
    if args.file is None:
        raise RetrievalError("'queryset import' needs a queries file")
    if args.name in judgments.query_sets(collection) and not args.replace:
        raise RetrievalError(f"Query set {args.name!r} exists: add --replace to overwrite it, or pick another name")
    try:
        data = args.file.read_bytes()
        qrels = args.qrels.read_bytes() if args.qrels else None
    except OSError as exc:
        raise RetrievalError(f"Cannot read {exc.filename}: {exc.strerror}") from exc
    n_queries, n_judgments = judgments.import_files(collection, args.name, data, args.file.name, qrels,
                                                    qrels_filename=args.qrels.name if args.qrels else "qrels")
    _log(f"query set {args.name!r} of {collection!r}: {n_queries} queries, {n_judgments} judgments")
    return 0


def cmd_prepare(args) -> int:
    from retrieval.models import embed

    def announce(model: str, backend: str) -> None:
        _log(f"{model}: making its files for {backend} (once) …")

    for done in embed.prepare_builtin_models(announce):
        state = f"made in {done.seconds:.0f} s" if done.made else "ready"
        _log(f"{done.model} ({done.backend}): {state}")
    removed = embed.remove_stale_exports()
    if removed:
        _log(f"removed {len(removed)} outdated or unfinished export(s) ({sum(b for _, b in removed) / 1e6:,.0f} MB): "
             + ", ".join(name for name, _ in removed))
    return 0


COMMANDS = {"ingest": cmd_ingest, "search": cmd_search, "evaluate": cmd_evaluate, "sweep": cmd_sweep,
            "optimize": cmd_optimize, "collections": cmd_collections, "serve": cmd_serve, "snapshot": cmd_snapshot,
            "queryset": cmd_queryset,
            "judge": cli_judge.cmd_judge, "prepare": cmd_prepare}
