"""The project is an installable package: the console script and `python -m retrieval` work from
any folder, nothing edits sys.path, and every test gets its own database."""

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_the_console_script_and_the_module_run_from_anywhere(tmp_path):
    script = Path(sys.executable).with_name("retrieval")
    assert script.is_file(), "the console script is missing: pip install -e . (./run.sh does it)"
    for command in ([str(script), "--help"], [sys.executable, "-m", "retrieval", "--help"]):
        done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=120,
                              env={**os.environ, "PYTHONPATH": ""})
        assert done.returncode == 0, done.stderr[-2000:]
        # the commands as argparse lists them (the docstring's copy may wrap)
        commands = ("ingest,search,evaluate,sweep,optimize,rules,snapshot,collections,sources,queryset,judge,serve,"
                    "prepare")
        assert "{" + commands + "}" in done.stdout


def test_nothing_edits_sys_path():
    edits = re.compile(r"sys\.path\.(insert|append|extend)|sys\.path\s*\+?=|[\"']PYTHONPATH[\"']\s*:\s*(?![\"'][\"'])")
    found = []
    for path in REPO.rglob("*.py"):
        parts = path.relative_to(REPO).parts
        if parts[0] in (".venv", "data", ".cache") or path == Path(__file__):
            continue
        found += [f"{path.relative_to(REPO)}:{n}" for n, line in enumerate(path.read_text("utf-8").splitlines(), 1)
                  if edits.search(line)]
    assert not found, found


SEEN: list[str] = []


def test_every_test_has_its_own_database(tmp_path_factory):
    db = Path(os.environ["WORKBENCH_DB"])
    assert db.is_relative_to(tmp_path_factory.getbasetemp()) and not db.is_relative_to(REPO)
    assert Path(os.environ["WORKBENCH_LOCK_DIR"]).is_relative_to(tmp_path_factory.getbasetemp())
    SEEN.append(str(db))


def test_and_the_next_test_another_one():
    from retrieval.store import Store

    assert len(SEEN) == 1 and os.environ["WORKBENCH_DB"] != SEEN[0]  # the test above had its own
    assert Store().uri == os.environ["WORKBENCH_DB"]


def test_lance_gets_two_compute_threads_unless_the_user_sets_them():
    """Lance computes on cores − 2 threads (at least 1): on 2 cores a search's BM25 and vector
    queries would queue for one thread (docs/experiments/peers.md). Importing the package sets
    `LANCE_CPU_THREADS` (before Lance first computes), never over the user's own value."""
    probe = "import os, retrieval; print(os.environ['LANCE_CPU_THREADS'])"
    env = {k: v for k, v in os.environ.items() if k != "LANCE_CPU_THREADS"}
    default = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, env=env)
    assert default.stdout.strip() == str(max(2, (os.cpu_count() or 2) - 2)), default.stderr[-2000:]
    own = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120,
                         env={**env, "LANCE_CPU_THREADS": "3"})
    assert own.stdout.strip() == "3", own.stderr[-2000:]
