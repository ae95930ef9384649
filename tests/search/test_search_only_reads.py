"""A search only reads (issue 35, item 4): everything a source needs is made on the write path or by
an explicit background job, never inside a search. On a collection whose entity graph is pending
(a large ingest defers it) and a Workbench that builds graphs in the background (the app's), a
search with every source, rerank and a filter, "why not?" and a batch of queries leave every
file of the database as it was (no table, version, index or manifest written), and run only the
search, sources, models, store and text packages (and the core's types, limits and caches) —
never indexing, judging or evaluation."""

from __future__ import annotations

import dataclasses
import sys
import threading
from pathlib import Path

import pytest

from retrieval import limits
from retrieval.indexing.pipeline import create_collection
from retrieval.search.config import SearchConfig
from retrieval.search.workbench import Workbench
from retrieval.store import Store
from retrieval.text.chunking import chunk_markdown
from retrieval.types import ParsedCorpus

REPO = Path(__file__).resolve().parents[2]
SAMPLE = REPO / "sample_data" / "three_kingdoms"
QUERY = "曹操和刘备的战役"
CONFIG = SearchConfig(weights={"bm25": 1.0, "dense": 1.0, "keyword": 0.5, "graph": 1.0}, graph={"threshold": 0.1},
                      rerank=True, rerank_top_n=5)
# What a search may run: its own package and the ones below it that it reads through.
READ_PACKAGES = {"retrieval.search", "retrieval.sources", "retrieval.models", "retrieval.store", "retrieval.text",
                 "retrieval.types", "retrieval.limits", "retrieval.cache", "retrieval"}


def files(folder: Path) -> dict[str, tuple[int, int]]:
    """Every file under `folder`: relative path -> (size, modification time in ns)."""
    return {str(p.relative_to(folder)): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def package_of(filename: str) -> str | None:
    """The project package a code file belongs to ('retrieval.search', 'retrieval.types' …), None outside."""
    path = Path(filename)
    try:
        parts = path.resolve().relative_to(REPO / "retrieval").with_suffix("").parts
    except ValueError:
        return None
    return "retrieval" if parts in ((), ("__init__",)) else f"retrieval.{parts[0]}"


@pytest.fixture
def pending(tmp_path, monkeypatch):
    monkeypatch.setattr(limits, "GRAPH_INLINE_MAX", 5)
    documents = []
    for path in sorted(SAMPLE.glob("*.md")):
        documents += chunk_markdown(path.read_text(encoding="utf-8"), path.stem)
    # a metadata field for the filter: every other chunk
    documents = [dataclasses.replace(d, metadata={"part": "ab"[i % 2]}) for i, d in enumerate(documents)]
    assert len(documents) >= 8
    store = Store(str(tmp_path / "db"))
    create_collection(store, "big", ParsedCorpus(documents))
    assert store.info("big").graph == "pending"
    return store


def test_package_of_reads_the_project_tree():
    assert package_of(str(REPO / "retrieval" / "search" / "plan.py")) == "retrieval.search"
    assert package_of(str(REPO / "retrieval" / "types.py")) == "retrieval.types"
    assert package_of(str(REPO / "retrieval" / "__init__.py")) == "retrieval"
    assert package_of(str(REPO / "ui" / "page.py")) is None


def test_a_search_writes_nothing_and_runs_only_the_read_side(pending):
    store = pending
    before, state = files(Path(store.uri)), store.state_key("big")
    ran: set[str] = set()

    def profile(frame, event, arg):
        if event == "call" and (package := package_of(frame.f_code.co_filename)):
            ran.add(package)

    workbench = Workbench(store)
    workbench.graph.in_background = True  # as the app's: a write would start the graph build
    threading.setprofile(profile)  # threads started from here on (the Workbench's pools) are watched too
    sys.setprofile(profile)
    try:
        result = workbench.search("big", QUERY, CONFIG)
        filtered = workbench.search("big", QUERY, SearchConfig(filters=["part=a"]))
        doc = result.outcome.results[0].doc_id
        why = workbench.explain_document("big", QUERY, CONFIG, doc)
        batch = workbench.source_results("big", [QUERY, "诸葛亮北伐"], CONFIG)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    workbench.graph.wait("big")

    assert result.outcome.results and filtered.outcome is not None and why is not None and batch
    graph = result.candidates.sources["graph"]
    assert graph.hits == () and graph.notes[0].startswith("graph index: pending")  # said, not built
    assert workbench.graph.status("big").state == "pending" and store.info("big").graph == "pending"
    assert files(Path(store.uri)) == before
    assert store.state_key("big") == state
    assert "retrieval.search" in ran and "retrieval.sources" in ran and "retrieval.models" in ran
    assert ran <= READ_PACKAGES, sorted(ran - READ_PACKAGES)
