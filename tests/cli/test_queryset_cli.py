"""Judgments travel: a query set judged in the app is exported with its texts and grades in one
file, imported into another database, and judged by `evaluate` and `sweep` with --queryset."""

import json

from corpora import ANIMALS

from retrieval.cli import main as cli
from retrieval.evaluation.evaluate import evaluate_collection
from retrieval.indexing.readers.parse import parse_bytes
from retrieval.search.config import SearchConfig
from retrieval.search.workbench import Workbench
from retrieval.store import Store

RATINGS = [("small animals that hunt mice", "cat", 2), ("small animals that hunt mice", "fox", 1),
           ("what sees well at night", "owl", 2), ("who makes honey", "bee", 2), ("who makes honey", "cow", 0)]


def test_a_query_set_judged_in_the_app_travels_and_is_evaluated(tmp_path, capsys):
    here, there = str(tmp_path / "here"), str(tmp_path / "there")
    for db in (here, there):
        Workbench(Store(db)).create("animals", parse_bytes(ANIMALS.encode(), "animals.csv"))
    judged = Workbench(Store(here))
    for query, doc_id, grade in RATINGS:  # as the Search page's rating buttons store them
        judged.judgments.rate("animals", "mine", query, doc_id, grade)
    judged.judgments.save_query_set("animals", "mine", {"extra": "not judged yet"}, replace=False)

    assert cli.main(["--db", here, "queryset", "export", "animals", "mine"]) == 0
    exported = capsys.readouterr().out
    assert exported == judged.judgments.export_query_set("animals", "mine")
    (tmp_path / "mine.jsonl").write_text(exported, encoding="utf-8")
    assert cli.main(["--db", there, "queryset", "import", "animals", "mine", str(tmp_path / "mine.jsonl")]) == 0
    assert "query set 'mine' of 'animals': 4 queries, 5 judgments" in capsys.readouterr().err
    moved = Workbench(Store(there)).judgments
    assert moved.queries("animals", "mine") == judged.judgments.queries("animals", "mine")
    assert moved.qrels("animals", "mine") == judged.judgments.qrels("animals", "mine")
    assert cli.main(["--db", there, "queryset", "list", "animals"]) == 0
    assert capsys.readouterr().out == "mine\t4 queries\t3 judged\t5 judgments\n"

    assert cli.main(["--db", there, "evaluate", "animals", "--queryset", "mine", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    queries, qrels = moved.queries("animals", "mine"), moved.qrels("animals", "mine")
    expected = evaluate_collection(Workbench(Store(there)), "animals", queries, {q: d for q, d in qrels.items() if d},
                                   SearchConfig())
    assert report["n_queries"] == 3
    assert report["metrics"] == {system: {m: round(expected.metrics[system][m], 6) for m in values}
                                 for system, values in report["metrics"].items()}
    assert set(report["metrics"]) == set(expected.metrics)
    assert cli.main(["--db", there, "sweep", "animals", "--queryset", "mine", "--top", "2"]) == 0
    assert "variants, 3 queries on animals (mine), best first" in capsys.readouterr().out


def test_bad_query_set_commands_are_one_line_errors(tmp_path, capsys):
    db = str(tmp_path / "db")
    workbench = Workbench(Store(db))
    workbench.create("animals", parse_bytes(ANIMALS.encode(), "animals.csv"))
    workbench.judgments.save_query_set("animals", "mine", {"q1": "mice"})
    (tmp_path / "q.tsv").write_text("q1\tmice\n", encoding="utf-8")
    cases = [
        (["evaluate", "animals"], "animals is not a BEIR folder"),
        (["evaluate", "animals", "--queryset", "nope"], "nope"),
        (["evaluate", "animals", "--queryset", "mine"], "Query set 'mine' of 'animals' has no judgments yet"),
        (["queryset", "export", "animals"], "needs the query set's name"),
        (["queryset", "import", "animals", "mine", str(tmp_path / "q.tsv")], "exists: add --replace"),
        (["queryset", "import", "animals", "new", str(tmp_path / "missing.tsv")], "Cannot read"),
        (["queryset", "import", "animals", "new"], "needs a queries file"),
    ]
    for args, message in cases:
        assert cli.main(["--db", db, *args]) == 2, args
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1 and "Traceback" not in err, (args, err)
