"""What the command groups share: messages on stderr (`log`, `log_progress`), the search config's
options and the config they give (`add_config_options`, `config_from_args`), argparse's number
types (`at_least`, `positive_seconds`), the Workbench a command opens (`open_workbench`), and how
ingests and collections are printed (`StageBars`, `collection_label`, `ingest_rate`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

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
from retrieval.sources import SOURCES, known_source, source_name
from retrieval.types import RetrievalError


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def log_progress(stage: str, done: int, total: int) -> None:
    if done == total or done % 1000 < 32:
        log(f"  {stage} {done}/{total}")


def add_config_options(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("search config")
    g.add_argument("--config", metavar="FILE.json|NAME",
                   help="a SearchConfig JSON file, or the name of a config saved on the Evaluate page; the "
                        "options below override it")
    g.add_argument("--fusion", choices=FUSION_METHODS,
                   help=" ".join(f"{m.name}: {m.help}" for m in METHOD_REGISTRY.values()))
    g.add_argument("--k", type=float, dest="rrf_k", help="RRF k (≥ 1)")
    g.add_argument("--weights", help="per-source weights, e.g. bm25=0.4,dense=0.6 (sources: "
                                     f"{', '.join(SOURCES)}; 'vector' is dense, as the app calls it)")
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
    g.add_argument("--rules", metavar="FILE", type=Path,
                   help="query rules in Querqy's common-rules text (SYNONYM, UP/DOWN, FILTER, DELETE, PIN, HIDE; "
                        "docs/guide/rules.md); replaces the config's rules")
    g.add_argument("--source", dest="outside", action="append", metavar="FILE",
                   help="an outside engine's descriptor (JSON, docs/sources.md) used as a source for this run "
                        "without registering it, repeatable; weigh it by its name in --weights")


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
        data["weights"] = source_weights(args.weights, args)
    if args.min_raw:
        data["min_raw"] = source_weights(args.min_raw, args)
    if args.filters:
        data["filters"] = [*data.get("filters", []), *args.filters]
    for group in PARAM_GROUPS:
        if getattr(args, group):
            data[group] = {**data.get(group, {}), **parse_weights(getattr(args, group))}
    if getattr(args, "rules", None) is not None:
        data["rules"] = read_rules_file(args.rules)
    return SearchConfig.from_dict(data)


def read_rules_file(path: Path) -> str:
    """A rules file's text, checked (`search.rules.parse_rules`: every bad line named by number)."""
    from retrieval.search.rules import parse_rules

    if not path.is_file():
        raise RetrievalError(f"No rules file {path}")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RetrievalError(f"Cannot read rules file {path}: {exc}") from exc
    try:
        parse_rules(text)
    except RetrievalError as exc:
        raise RetrievalError(f"{path}: {exc}") from exc
    return text


def source_weights(text: str, args: argparse.Namespace | None = None) -> dict[str, float]:
    """`--weights` / `--min-raw`: 'bm25=0.4,vector=0.6' → {'bm25': 0.4, 'dense': 0.6}; a source
    is named by its name or its label (`sources.known_source`), or is an outside engine of the
    command (`outside_names`); any other word is an error listing the sources (a typo would
    otherwise only be a note under the results)."""
    return {command_source(name, args): value for name, value in parse_weights(text).items()}


def source_names(text: str, args: argparse.Namespace | None = None) -> list[str]:
    """`--sources bm25,vector` → ['bm25', 'dense'] (`command_source` for each)."""
    return [command_source(name.strip(), args) for name in text.split(",") if name.strip()]


def command_source(name: str, args: argparse.Namespace | None) -> str:
    """A source name of a command's option: a built-in source or its label, else one of the
    outside engines the command can use (read only then: opening the store costs an import)."""
    if args is None or source_name(name) in SOURCES:
        return known_source(name)
    return known_source(name, outside_names(args))


def outside_names(args: argparse.Namespace) -> tuple[str, ...]:
    """The outside engines a command may name (docs/sources.md): those given by `--source FILE`
    and those registered in the store (`sources add`)."""
    from retrieval.sources.external import read_descriptor
    from retrieval.sources.external.registry import ExternalSources
    from retrieval.store import Store

    names = [read_descriptor(path).name for path in getattr(args, "outside", None) or ()]
    return tuple(dict.fromkeys(names + ExternalSources(Store(args.db)).names()))


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


def open_workbench(args):
    from retrieval.search.workbench import Workbench
    from retrieval.store import Store

    workbench = Workbench(Store(args.db))
    if getattr(args, "outside", None):  # `--source FILE`: outside engines for this run only
        from retrieval.sources.external import read_descriptor

        for path in args.outside:
            workbench.use_source(read_descriptor(path))
    return workbench


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
