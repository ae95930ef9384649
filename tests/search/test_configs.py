"""Saved configs in the `_configs` LanceDB table: save, load, list, delete, JSON import/export."""

import json

import pytest

from retrieval.search.config import SearchConfig
from retrieval.search.saved_configs import CONFIGS_TABLE, ConfigStore
from retrieval.store import Store
from retrieval.types import RetrievalError


@pytest.fixture
def configs(tmp_path):
    return ConfigStore(Store(str(tmp_path / "db")))


def test_save_load_names_delete(configs):
    assert configs.names() == []
    tuned = SearchConfig(fusion="weighted", normalization="l2", combination="geometric",
                         weights={"bm25": 0.7, "dense": 0.3}, depth=50, min_raw={"bm25": 1.5})
    configs.save("Best nDCG v2", tuned)
    configs.save("baseline", SearchConfig())
    assert configs.names() == ["baseline", "Best nDCG v2"]
    assert configs.load("Best nDCG v2") == tuned
    with pytest.raises(RetrievalError, match="already exists"):
        configs.save("baseline", tuned)
    assert configs.load("baseline") == SearchConfig()
    configs.save("baseline", tuned, overwrite=True)
    assert configs.load("baseline") == tuned
    configs.delete("baseline")
    assert configs.names() == ["Best nDCG v2"]
    with pytest.raises(RetrievalError, match="No saved config named 'baseline' \\(saved: Best nDCG v2\\)"):
        configs.load("baseline")
    with pytest.raises(RetrievalError, match="No saved config"):
        configs.delete("baseline")
    # the table starts with '_': never a collection
    assert CONFIGS_TABLE in configs.store.table_names() and configs.store.collection_names() == []


def test_names_are_validated(configs):
    for bad in ("", " lead", "trail ", "../etc/passwd", "a/b", "x'; delete", "é", "x" * 65):
        with pytest.raises(RetrievalError, match="Invalid config name"):
            configs.save(bad, SearchConfig())
    configs.save("it.s_fine-1 2", SearchConfig())
    assert configs.names() == ["it.s_fine-1 2"]


def test_json_export_and_import(configs):
    tuned = SearchConfig(fusion="rrf", rrf_k=10, weights={"bm25": 0.4, "dense": 0.6})
    configs.save("rrf10", tuned)
    text = configs.export_json("rrf10")
    assert json.loads(text)["rrf_k"] == 10.0
    assert configs.import_json("copy", text) == tuned and configs.load("copy") == tuned
    with pytest.raises(RetrievalError, match="Unknown config field\\(s\\): colour"):
        configs.import_json("bad", json.dumps({"rrf_k": 5, "colour": "red"}))
    with pytest.raises(RetrievalError, match="rrf_k must be ≥ 1"):
        configs.import_json("bad", json.dumps({"rrf_k": 0}))
    with pytest.raises(RetrievalError, match="not valid JSON"):
        configs.import_json("bad", "{nope")
    with pytest.raises(RetrievalError, match="Invalid search config"):
        configs.import_json("bad", json.dumps({"depth": "ten"}))
    assert configs.names() == ["copy", "rrf10"]  # nothing saved by the failed imports


def test_search_evaluate_and_sweep_take_a_saved_config_by_name(tmp_path, capsys):
    """`--config NAME` reads a config saved on the Evaluate page, `--config FILE.json` a file; a
    missing name or file, or a bad file, is one line on stderr and exit 2 (never a traceback)."""
    import json

    from corpora import ANIMALS

    from retrieval.cli import main as cli
    from retrieval.indexing.readers.parse import parse_bytes
    from retrieval.search.workbench import Workbench

    db = str(tmp_path / "db")
    workbench = Workbench(Store(db))
    workbench.create("animals", parse_bytes(ANIMALS.encode(), "animals.csv"))
    workbench.configs.save("bm25 only", SearchConfig(weights={"bm25": 1.0}, top_k=2))
    (tmp_path / "bad.json").write_text('{"depth": "ten"}', encoding="utf-8")
    (tmp_path / "latin.json").write_bytes(b'{"depth": 5, "name": "caf\xe9"}')  # Latin-1, not UTF-8
    search = lambda *extra: cli.main(["--db", db, "search", "animals", "mice", "--json", *extra])  # noqa: E731
    assert search("--config", "bm25 only") == 0
    out = json.loads(capsys.readouterr().out)
    assert out["config"]["weights"] == {"bm25": 1.0} and [r["id"] for r in out["results"]] == ["cat", "fox"]
    assert search("--config", "bm25 only", "--top-k", "1") == 0  # an option overrides the saved config
    assert [r["id"] for r in json.loads(capsys.readouterr().out)["results"]] == ["cat"]
    for spec, message in [("nope", "No saved config named 'nope' (saved: bm25 only)"),
                          (str(tmp_path / "missing.json"), "Cannot read config file"),
                          (str(tmp_path / "missing"), "Cannot read config file"),
                          (str(tmp_path / "bad.json"), "bad.json"),
                          (str(tmp_path / "latin.json"), "latin.json is not UTF-8 text")]:
        for command in (["search", "animals", "mice"], ["evaluate", str(tmp_path)], ["sweep", str(tmp_path)]):
            assert cli.main(["--db", db, *command, "--config", spec]) == 2, (command, spec)
            err = capsys.readouterr().err
            assert err.startswith("error: ") and message in err and err.count("\n") == 1, (command, spec, err)
            assert "Traceback" not in err
