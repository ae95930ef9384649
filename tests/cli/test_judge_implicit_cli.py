"""`python -m retrieval judge implicit`: the JSON the issue names, SRW's COEC values, errors as
one line and a non-zero exit."""

import json
from pathlib import Path

from retrieval.cli import main as cli

DATA = Path(__file__).resolve().parents[1] / "data" / "implicit"
UBI = ["--events", str(DATA / "ubi_events.ndjson"), "--queries", str(DATA / "ubi_queries.ndjson")]


def test_coec_json(capsys):
    assert cli.main(["judge", "implicit", *UBI, "--model", "coec", "--max-rank", "3", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"] == "coec" and out["position_ctr"] == {"0": 0.75, "1": 0.5, "2": 0.5}
    assert out["judgments"][0] == {"query": "red dress", "doc": "B", "score": 1.333, "grade": 2, "clicks": 2,
                                   "impressions": 2, "position": 0}
    assert {(j["query"], j["doc"]): j["score"] for j in out["judgments"]} == {
        ("red dress", "A"): 0.0, ("red dress", "B"): 1.333, ("red dress", "C"): 1.0, ("shoes", "S1"): 0.667,
        ("shoes", "S2"): 0.667, ("shoes", "S3"): 0.0}  # S5: a click without an impression, unjudged
    assert out["skipped"]["below_min_impressions"] == 1 and out["skipped"]["beyond_max_rank"] == 1
    assert out["skipped"]["bad_lines"]["not JSON"] == {"count": 1, "lines": ["ubi_events.ndjson:10"]}


def test_the_curve_is_drawn(capsys):
    assert cli.main(["judge", "implicit", *UBI, "--model", "coec", "--max-rank", "3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:4] == ["coec: position ctr by position",
                         f"   0 {'█' * 40} 0.750",
                         f"   1 {'█' * 27}{' ' * 13} 0.500",
                         f"   2 {'█' * 27}{' ' * 13} 0.500"]
    assert lines[4] == "2\t1.3330\t2/2\tred dress\tB"


def test_models_and_csv(capsys):
    assert cli.main(["judge", "implicit", "--csv", str(DATA / "clicks.tsv"), "--model", "dbn", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["model"] == "sdbn" and "examination" in out
    # clicks.tsv: search 1 shows A@0, B@1 (clicked); search 2 shows B@0 (clicked): B a = 2/2, s = 2/2.
    assert {(j["doc"], j["score"]) for j in out["judgments"] if j["query"] == "red dress"} == {("B", 1.0), ("A", 0.0)}


def test_bad_input_is_one_line_and_exit_2(capsys):
    assert cli.main(["judge", "implicit", "--model", "ctr"]) == 2
    assert "--events" in capsys.readouterr().err
    assert cli.main(["judge", "implicit", "--csv", str(DATA / "missing.csv"), "--model", "ctr"]) == 2
    assert "Cannot read" in capsys.readouterr().err
    assert cli.main(["judge", "implicit", *UBI, "--model", "coec", "--thresholds", "2,1,3"]) == 2
    assert "increasing" in capsys.readouterr().err


def test_saved_in_a_set_then_two_configs_evaluated_on_it(tmp_path, capsys):
    from corpora import ANIMALS

    from retrieval.indexing.readers.parse import parse_bytes
    from retrieval.search.workbench import Workbench
    from retrieval.store import Store

    db = str(tmp_path / "db")
    workbench = Workbench(Store(db))
    workbench.create("animals", parse_bytes(ANIMALS.encode(), "animals.csv"))
    workbench.judgments.save_query_set("animals", "s", {"q1": "mice", "q2": "night"},
                                       {"q1": {"cat": 3, "fox": 2, "dog": 0}, "q2": {"owl": 3}})
    log = tmp_path / "clicks.csv"  # unicorn is not in the collection; boots is not in the set
    log.write_text("query,doc,position,clicked,session\n"
                   "mice,cat,0,1,a\nmice,fox,1,1,a\nmice,dog,2,0,a\nmice,unicorn,3,1,a\n"
                   "mice,fox,0,1,b\nmice,cat,1,1,b\nmice,dog,2,0,b\nnight,owl,0,1,c\nboots,cow,0,1,d\n",
                   encoding="utf-8")
    argv = ["--db", db, "judge", "implicit", "--csv", str(log), "--model", "ctr", "--collection", "animals",
            "--query-set", "s", "--json"]
    assert cli.main(argv) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["skipped"]["unknown_docs"] == 1
    assert out["saved"] == {"rater": "implicit:ctr", "saved": 4, "queries_matched": 2, "queries_not_in_set": 1,
                            "queries_added": 0}
    # ctr grades (0.1, 0.3, 0.6): cat 1 → 3, fox 1 → 3, dog 0 → 0, owl 1 → 3; explicit 3 2 0 3: κ over 4 pairs.
    assert out["agreement"]["pairs"][0]["n"] == 4
    assert workbench.judgments.qrels("animals", "s", source="implicit:ctr") == {
        "q1": {"cat": 3, "dog": 0, "fox": 3}, "q2": {"owl": 3}}
    for name, fusion in (("a", "rrf"), ("b", "weighted")):
        assert cli.main(["--db", db, "evaluate", "animals", "--queryset", "s", "--judgments", "implicit:ctr",
                         "--fusion", fusion, "--snapshot", name, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["n_queries"] == 2
    assert cli.main(["--db", db, "snapshot", "diff", "a", "b", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_queries"] == 2
    assert cli.main(["--db", db, "snapshot", "create", "animals", "--name", "c", "--queryset", "s",
                     "--judgments", "implicit:ctr", "--fusion", "rrf"]) == 0
    capsys.readouterr()
    assert cli.main(["--db", db, "snapshot", "list"]) == 0
    listed = {line.split("\t")[0]: line.split("\t")[3] for line in capsys.readouterr().out.splitlines()}
    assert listed == {"a": "s (implicit:ctr)", "b": "s (implicit:ctr)", "c": "s (implicit:ctr)"}
    assert cli.main(["--db", db, "snapshot", "diff", "a", "c", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["delta"] == 0  # the same config and judgments
    assert cli.main(["--db", db, "evaluate", "animals", "--queryset", "s", "--judgments", "implicit:pbm"]) == 2
    assert "no judgments from 'implicit:pbm'" in capsys.readouterr().err
