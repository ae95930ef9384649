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
