"""The command line's refusals (retrieval/cli/): a bad number or a missing argument is one clear
line and exit 2 before anything is loaded or fetched; a file that cannot be read or written is
named, never a traceback."""

from __future__ import annotations

import pytest

from retrieval.cli import main as cli
from retrieval.types import RetrievalError


@pytest.mark.parametrize("argv, message", [
    (["evaluate", "x", "--max-queries", "-1"], "--max-queries: must be at least 1, got -1"),
    (["evaluate", "x", "--max-queries", "0"], "--max-queries: must be at least 1, got 0"),
    (["sweep", "x", "--top", "-3"], "--top: must be at least 1, got -3"),
    (["optimize", "x", "--seed", "-1"], "--seed: must be at least 0, got -1"),
    (["optimize", "x", "--seconds", "-0.8"], "--seconds: must be more than 0, got -0.8"),
    (["optimize", "x", "--seconds", "0"], "--seconds: must be more than 0, got 0"),
    (["optimize", "x", "--trials", "0"], "--trials: must be at least 1, got 0"),
    (["optimize", "x", "--folds", "1"], "--folds: must be at least 2, got 1"),
    (["ingest", "x", "--collection", "c", "--batch-size", "0"], "--batch-size: must be at least 1, got 0"),
    (["ingest", "x", "--collection", "c", "--max-chunk-chars", "ten"], "--max-chunk-chars: expected a whole number"),
])
def test_bad_numbers_are_refused_by_the_parser(tmp_path, capsys, argv, message):
    with pytest.raises(SystemExit) as stop:
        cli.main(["--db", str(tmp_path / "db"), *argv])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "db").exists()  # refused before the store was opened


def test_a_diff_of_fewer_than_two_snapshots_is_refused(tmp_path, capsys):
    for names in ([], ["only"]):
        assert cli.main(["--db", str(tmp_path / "db"), "snapshot", "diff", *names]) == 2
        err = capsys.readouterr().err
        assert err == f"error: 'snapshot diff' needs two or more snapshot names, got {len(names)}\n"


def test_a_file_that_cannot_be_read_or_written_is_named(tmp_path, capsys, monkeypatch):
    def fails(args):
        raise PermissionError(13, "Permission denied", "/reports/r.html")

    monkeypatch.setitem(cli.COMMANDS, "collections", fails)
    assert cli.main(["--db", str(tmp_path / "db"), "collections"]) == 2
    assert capsys.readouterr().err == "error: /reports/r.html: Permission denied\n"

    def fails_without_a_file(args):
        raise OSError(98, "Address already in use")

    monkeypatch.setitem(cli.COMMANDS, "collections", fails_without_a_file)
    with pytest.raises(OSError, match="Address already in use"):  # not a file's: not ours to word
        cli.main(["--db", str(tmp_path / "db"), "collections"])


@pytest.mark.parametrize("argv", [
    ["search", "c", "tea", "--weights", "bm25=0.4,vectr=0.6"],
    ["evaluate", "x", "--min-raw", "bm2=1"],
    ["sweep", "x", "--sources", "bm25,dens"],
    ["optimize", "x", "--sources", "bm25,nothing"],
])
def test_an_unknown_source_is_an_error_naming_the_sources(tmp_path, capsys, argv):
    assert cli.main(["--db", str(tmp_path / "db"), *argv]) == 2
    err = capsys.readouterr().err
    assert "error: unknown source" in err and "known: bm25, dense, keyword, graph (also 'vector' for dense" in err


def test_vector_is_dense_as_the_app_calls_it():
    """One home for the alias (`sources.SOURCE_ALIASES`): the CLI's options and any config."""
    from retrieval.cli.common import config_from_args, source_names
    from retrieval.search.config import SearchConfig

    args = cli.build_parser().parse_args(["search", "c", "q", "--weights", "bm25=0.4,vector=0.6", "--min-raw",
                                          "vector=0.2"])
    config = config_from_args(args)
    assert config.weights == {"bm25": 0.4, "dense": 0.6} and config.min_raw == {"dense": 0.2}
    assert source_names("bm25, vector") == ["bm25", "dense"]
    assert SearchConfig.from_dict({"weights": {"vector": 1.0}}).weights == {"dense": 1.0}
    assert SearchConfig.from_query_params({"weights": "bm25=1,vector=2"}).weights == {"bm25": 1.0, "dense": 2.0}
    with pytest.raises(RetrievalError, match="weights name a source twice: 'vector' is 'dense'"):
        SearchConfig(weights={"dense": 1.0, "vector": 1.0})


def test_help_imports_no_model_nor_lancedb():
    """`--help` (and every parse) pays no heavy import: LanceDB, torch and the encoders are
    imported inside the commands that use them (about 12 s of a loaded machine before)."""
    import subprocess
    import sys
    from pathlib import Path

    heavy = ("torch", "lancedb", "sentence_transformers", "transformers", "onnxruntime", "pandas",
             "retrieval.search.workbench")
    code = ("import sys\nfrom retrieval.cli.main import main\ntry:\n    main(['--help'])\n"
            "except SystemExit:\n    pass\n"
            f"print(sorted(m for m in {heavy!r} if m in sys.modules), file=sys.stderr)")
    root = str(Path(__file__).resolve().parents[2])
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=root)
    assert done.returncode == 0, done.stderr
    assert "usage: python -m retrieval" in done.stdout
    assert done.stderr.strip().splitlines()[-1] == "[]"
