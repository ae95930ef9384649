"""The server the reliability tests fork their writer processes from (test_writers.Writer)."""

from __future__ import annotations

import multiprocessing
import multiprocessing.forkserver
import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session", autouse=True)
def fork_server():
    """multiprocessing's forkserver, with writer.py (numpy, pyarrow, lancedb) and reader.py (the
    CLI) imported once: each writer or reader forked from it is a process of its own without ~2 s
    of imports. Python 3.11's forkserver ignores the parent's sys.path, so PYTHONPATH has this
    folder and tests/ (the writers' model-free encoder, `model_free`). It never opens a database,
    so lancedb's warning that a fork may catch its runtime mid-operation does not apply: silenced
    there."""
    multiprocessing.set_forkserver_preload(["writer", "reader"])
    with pytest.MonkeyPatch.context() as patch:
        paths = [str(HERE), str(HERE.parent), os.environ.get("PYTHONPATH")]
        patch.setenv("PYTHONPATH", os.pathsep.join(filter(None, paths)))
        patch.setenv("PYTHONWARNINGS", "ignore:lancedb fork support is experimental:RuntimeWarning")
        multiprocessing.forkserver.ensure_running()
    yield
