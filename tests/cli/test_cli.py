"""The command line's refusals (retrieval/cli/): a bad number or a missing argument is one clear
line and exit 2 before anything is loaded or fetched; a file that cannot be read or written is
named, never a traceback."""

from __future__ import annotations

import pytest

from retrieval.cli import main as cli


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
