"""Process-wide resources: one Workbench (and its Store, LanceDB connection and caches) per
database location, created once per process with `st.cache_resource`. Embedding and rerank
models are loaded once per process by `retrieval.models.embed` / `retrieval.search.rerank` themselves.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import streamlit as st

from retrieval.paths import REPO_DIR
from retrieval.search.workbench import Workbench
from retrieval.store import Progress, Store, default_db_uri
from ui.corpus.actions import is_eval_cache

# The app's log (the terminal that runs Streamlit): the core's and the UI's module loggers, where an
# unexpected error leaves its traceback while the page shows a one-line message. A no-op when the
# root logger is configured already.
logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
for _name in ("retrieval", "ui"):
    logging.getLogger(_name).setLevel(logging.INFO)

SAMPLE_COLLECTION = "sample-xquad"
CATALOGUE_COLLECTION = "sample-catalogue"  # data-source records for the keyword source (seed 000)
GRAPH_COLLECTION = "sample-three-kingdoms"  # a Markdown history for the entity graph (seed 002)
SAMPLE_QUERY_SET = "sample"  # the sample's queries and judgments (ui.judging.rating.SAMPLE_SET)


def sample_dir() -> Path:
    """The bundled BEIR sample (`$WORKBENCH_SAMPLE` overrides it, e.g. for tests)."""
    return Path(os.environ.get("WORKBENCH_SAMPLE") or REPO_DIR / "sample_data" / "xquad")


@st.cache_resource(show_spinner="Opening the collection database…")
def _workbench(uri: str) -> Workbench:
    from ui.state import browser_model_check

    workbench = Workbench(Store(uri))
    workbench.model_check = browser_model_check  # links and widgets name no model outside the allowed ones
    # An ingest that leaves a large collection's entity graph pending starts its build in the
    # background; the Corpus and Graph pages show how far it is.
    workbench.graph.in_background = True
    return workbench


def workbench() -> Workbench:
    """The Workbench for the current database location ($WORKBENCH_DB or data/lancedb)."""
    return _workbench(default_db_uri())


def needs_sample(workbench: Workbench) -> bool:
    """True on a first run: no collection yet apart from evaluation caches, or a first run that
    was stopped half-way (its marker beside the locks is still there), which this one resumes."""
    return _seeding_marker(workbench).exists() or all(is_eval_cache(info.name) for info in workbench.collections())


def _seeding_marker(workbench: Workbench) -> Path:
    """Present from the start of a first run's seeding to its end: a killed or failed first run
    leaves it, so the next start creates what is missing (and only then)."""
    return workbench.store.lock_dir / "first-run.seeding"


def default_collection(names: list[str]) -> str:
    """The collection a new session starts on: the sample, else the first that is not an
    evaluation cache, else the first."""
    if SAMPLE_COLLECTION in names:
        return SAMPLE_COLLECTION
    return next((n for n in names if not is_eval_cache(n)), names[0])


def ingest_sample(workbench: Workbench, progress: Progress | None = None) -> bool:
    """On a first run (see `needs_sample`): the XQuAD sample with its queries and judgments, the
    data-source catalogue and the Three Kingdoms history. True when the sample was created."""
    if not needs_sample(workbench):
        return False
    marker = _seeding_marker(workbench)
    marker.write_text("a first run is creating the bundled collections\n", encoding="utf-8")
    corpus = _create_missing(workbench, SAMPLE_COLLECTION, sample_dir(), progress,
                             lambda c: "XQuAD sample (60 English + 60 Chinese paragraphs)")
    if corpus is not None:
        store_sample_queries(workbench, corpus)
    ingest_catalogue(workbench, progress)
    ingest_three_kingdoms(workbench, progress)
    marker.unlink(missing_ok=True)  # every step done: a collection deleted later is not brought back
    return corpus is not None


def ingest_catalogue(workbench: Workbench, progress: Progress | None = None) -> bool:
    """Create the bundled data-source catalogue (`sample_data/catalogue/records.json`) as
    CATALOGUE_COLLECTION, so the keyword source has records out of the box. True when created."""
    path = REPO_DIR / "sample_data" / "catalogue" / "records.json"
    return _create_missing(workbench, CATALOGUE_COLLECTION, path, progress,
                           lambda c: f"Data-source catalogue ({len(c.documents)} bilingual records)") is not None


def ingest_three_kingdoms(workbench: Workbench, progress: Progress | None = None) -> bool:
    """Create the bundled Markdown history (`sample_data/three_kingdoms/`) as GRAPH_COLLECTION, so
    the entity graph and the Graph page have people, places and years out of the box."""
    return _create_missing(workbench, GRAPH_COLLECTION, REPO_DIR / "sample_data" / "three_kingdoms", progress,
                           lambda c: f"Battles of the Three Kingdoms (Markdown, {len(c.documents)} chunks)") is not None


def _create_missing(workbench: Workbench, name: str, path: Path, progress: Progress | None, description):
    """Parse `path` and create collection `name` from it unless it exists; the parsed corpus, or
    None when nothing was created. Safe when two sessions race: the loser finds it exists, or
    being created by the other."""
    from retrieval.indexing.readers.parse import parse_path
    from retrieval.types import NameBeingCreated, RetrievalError

    if workbench.exists(name):
        return None
    corpus = parse_path(path)
    try:
        workbench.create(name, corpus, description=description(corpus), progress=progress)
    except NameBeingCreated:
        return None
    except RetrievalError:
        if workbench.exists(name):
            return None
        raise
    return corpus


def store_sample_queries(workbench: Workbench, corpus) -> None:
    """The sample's queries and judgments as query set SAMPLE_QUERY_SET of the sample collection,
    so the Evaluate page works out of the box (nothing when the sample has no queries)."""
    if corpus.queries:
        workbench.judgments.save_query_set(SAMPLE_COLLECTION, SAMPLE_QUERY_SET, dict(corpus.queries),
                                           {q: dict(d) for q, d in corpus.qrels.items()} or None)


