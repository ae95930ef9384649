"""What every test shares: offline model loading, its own database, markers by folder.

- Every test gets its own `WORKBENCH_DB` (and `WORKBENCH_LOCK_DIR`), a fresh folder, unless a
  fixture already pointed it somewhere (the app tests' session database): nothing a test does
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
WORKING_TREE_DATA = REPO / "data" / "lancedb"


def pytest_collection_modifyitems(items):
    for item in items:
        parts = Path(str(item.fspath)).relative_to(REPO).parts
        for marker in FOLDER_MARKERS:
            if marker in parts[:2]:
                item.add_marker(marker)


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


@pytest.fixture(autouse=True)
def own_db(session_db, tmp_path_factory, monkeypatch):
    """This test's own WORKBENCH_DB, unless a fixture of a broader scope set one for it."""
    if os.environ.get("WORKBENCH_DB") == session_db:
        monkeypatch.setenv("WORKBENCH_DB", str(tmp_path_factory.mktemp("lancedb")))
        monkeypatch.setenv("WORKBENCH_LOCK_DIR", str(tmp_path_factory.mktemp("locks")))
