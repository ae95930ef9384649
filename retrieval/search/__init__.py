"""Search: a query against a collection, ranked by a config and explained.

    workbench.py         the facade every front end uses (collections, search, judgments, saved
                         configs, ingest): `Workbench`
    config.py            `SearchConfig`: validation, JSON and URL forms
    config_help.py       what each config parameter does (labels and help: the page's tooltips, MCP)
    saved_configs.py     named configs in the store's `_configs` table (`ConfigStore`)
    filters.py           metadata filters: field=value, alternatives, ranges
    retriever.py         candidates: every source's hits per query, cached per collection state
    search_result.py     what a search hands back: the candidates of a query and the search's result
    collection_reads.py  what a search reads besides the sources: language, metadata, titles, rows
    plan.py              the ranking plan: a config's stages in order, run explained or lean
    fusion/              the fusion methods' registry, score normalisation, the fusion engine
    language.py          language-aware fusion (a query in one script, a collection in another)
    query_features.py    query features and query-dependent weights
    learned_ranker.py    LambdaMART over each candidate's features; ranker_models.py keeps models
    rerank.py            rerankers and the rerank stage
    rules/               query rules (Querqy's common rules, PIN, HIDE): read, written, matched, applied
    whynot/              "why not this document?": where it stands, the stage that dropped it, the
                         smallest config change that brings it into the top-K; recall gaps
    result_json.py       the JSON of one search (CLI `--json`, MCP)

A search only reads: everything a source needs is made on the write path (`retrieval/indexing/`).
Entry points: `Workbench`, `SearchConfig`, `RankingPlan`, `SearchResult`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from retrieval.search.config import SearchConfig
    from retrieval.search.plan import RankingPlan
    from retrieval.search.search_result import SearchResult
    from retrieval.search.workbench import Workbench

# The entry points are imported when first asked for (PEP 562), so that importing one module of the
# package (the CLI's parser reads `search.config`) does not import the Workbench and all it needs.
_ENTRY_POINTS = {"SearchConfig": "config", "RankingPlan": "plan", "SearchResult": "search_result",
                 "Workbench": "workbench"}


def __getattr__(name: str):
    if name not in _ENTRY_POINTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_ENTRY_POINTS[name]}"), name)


__all__ = ["RankingPlan", "SearchConfig", "SearchResult", "Workbench"]
