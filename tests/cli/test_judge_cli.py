"""`python -m retrieval judge …`: agreement of a ratings CSV equal to scikit-learn and krippendorff,
what to judge next for two configs (weights checked against the rankings), ratings import and
export round trips, disagreements and their adjudication, and one-line errors."""

import json
import math
from itertools import zip_longest

import krippendorff
import numpy as np
import pytest
from corpora import ANIMALS
from sklearn.metrics import cohen_kappa_score

from retrieval.cli import main as cli
from retrieval.evaluation.evaluate import fused_rankings
from retrieval.indexing.readers.parse import parse_bytes
from retrieval.judging.raters import ADJUDICATED, Rating
from retrieval.search.config import SearchConfig
from retrieval.search.workbench import Workbench
from retrieval.store import Store

# Three raters over eight (query, doc) pairs; cy skips two and says "can't tell" once.
RATINGS_CSV = """query,doc,grade,rater
q1,cat,3,ann
q1,cat,2,bo
q1,cat,3,cy
q1,fox,2,ann
q1,fox,2,bo
q1,fox,1,cy
q1,dog,0,ann
q1,dog,1,bo
q1,dog,0,cy
q2,owl,3,ann
q2,owl,3,bo
q2,cat,1,ann
q2,cat,0,bo
q2,cat,can't tell,cy
q3,bee,2,ann
q3,bee,3,bo
q3,bee,3,cy
q3,cow,0,ann
q3,cow,0,bo
"""


def grades_by_rater() -> dict[str, dict[tuple[str, str], int]]:
    out: dict[str, dict[tuple[str, str], int]] = {}
    for line in RATINGS_CSV.splitlines()[1:]:
        q, d, g, r = line.split(",")
        if g.isdigit():
            out.setdefault(r, {})[(q, d)] = int(g)
    return out


def test_agreement_of_a_csv_equals_sklearn_and_krippendorff(tmp_path, capsys):
    path = tmp_path / "ratings.csv"
    path.write_text(RATINGS_CSV, encoding="utf-8")
    assert cli.main(["judge", "agreement", str(path), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    by_rater = grades_by_rater()
    labels = result["labels"]
    assert [p["raters"] for p in result["pairs"]] == [["ann", "bo"], ["ann", "cy"], ["bo", "cy"]]
    for pair in result["pairs"]:
        a, b = (by_rater[r] for r in pair["raters"])
        both = sorted(set(a) & set(b))
        x, y = [a[k] for k in both], [b[k] for k in both]
        assert pair["n"] == len(both)
        assert pair["cohen_kappa"] == pytest.approx(cohen_kappa_score(x, y), abs=1e-12)
        assert pair["weighted_kappa"] == pytest.approx(
            cohen_kappa_score(x, y, weights="quadratic", labels=labels), abs=1e-12)
    units = sorted({k for grades in by_rater.values() for k in grades})
    matrix = np.array([[by_rater[r].get(u, np.nan) for u in units] for r in sorted(by_rater)], dtype=float)
    assert result["krippendorff_alpha"] == pytest.approx(
        krippendorff.alpha(reliability_data=matrix, level_of_measurement="ordinal"), abs=1e-12)
    # ann–bo by hand: 7 documents both graded; they agree on q1 fox (2), q2 owl (3), q3 cow (0):
    # p_o = 3/7; ann's grades 3,2,0,3,1,2,0 and bo's 2,2,1,3,0,3,0 give p_e = Σ_g p_ann(g)·p_bo(g)
    # = (2·2 + 1·1 + 2·2 + 2·2)/49 = 13/49 (g = 0: 2·2, 1: 1·1, 2: 2·2, 3: 2·2), κ = (3/7 − 13/49)/(1 − 13/49) = 8/36
    ann_bo = result["pairs"][0]
    assert ann_bo["n"] == 7 and ann_bo["cohen_kappa"] == pytest.approx(8 / 36, abs=1e-12)


def test_ratings_travel_and_disagreements_are_settled(tmp_path, capsys):
    db = str(tmp_path / "db")
    workbench = Workbench(Store(db))
    workbench.create("animals", parse_bytes(ANIMALS.encode(), "animals.csv"))
    workbench.judgments.save_query_set("animals", "s", {"q1": "mice", "q2": "night", "q3": "honey, please"})
    path = tmp_path / "ratings.csv"
    path.write_text(RATINGS_CSV, encoding="utf-8")
    assert cli.main(["--db", db, "judge", "import", "animals", "--queryset", "s", str(path)]) == 0
    assert "19 ratings imported from ratings.csv (csv)" in capsys.readouterr().err
    assert cli.main(["--db", db, "judge", "export", "animals", "--queryset", "s"]) == 0
    exported = capsys.readouterr().out
    assert sorted(exported.splitlines()[1:]) == sorted(RATINGS_CSV.splitlines()[1:])  # exact, as lines

    # consensus: q1 cat {3,2,3} → 3; q1 fox {2,2,1} → 2; q1 dog {0,1,0} → 0; q2 owl 3; q2 cat {1,0} → mean 0.5 → 1;
    # q3 bee {2,3,3} → 3; q3 cow 0
    consensus = {"q1": {"cat": 3, "dog": 0, "fox": 2}, "q2": {"cat": 1, "owl": 3}, "q3": {"bee": 3, "cow": 0}}
    assert workbench.judgments.qrels("animals", "s") == consensus
    assert cli.main(["--db", db, "judge", "export", "animals", "--queryset", "s", "--format", "trec"]) == 0
    assert capsys.readouterr().out.splitlines() == [f"{q} 0 {d} {g}" for q, docs in consensus.items()
                                                    for d, g in docs.items()]

    assert cli.main(["--db", db, "judge", "disagreements", "animals", "--queryset", "s", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert [(d["query_id"], d["doc_id"], d["spread"]) for d in found] == [
        ("q1", "cat", 1), ("q1", "dog", 1), ("q1", "fox", 1), ("q2", "cat", 1), ("q3", "bee", 1)]
    assert cli.main(["--db", db, "judge", "adjudicate", "animals", "--queryset", "s", "q2", "cat", "0"]) == 0
    assert workbench.judgments.qrels("animals", "s")["q2"]["cat"] == 0
    assert Rating("q2", "cat", ADJUDICATED, 0) in workbench.judgments.ratings_of("animals", "s")
    assert cli.main(["--db", db, "judge", "disagreements", "animals", "--queryset", "s", "--json"]) == 0
    assert ("q2", "cat") not in {(d["query_id"], d["doc_id"]) for d in json.loads(capsys.readouterr().out)}

    # Quepid: the consensus per query text, read back into another set by text
    assert cli.main(["--db", db, "judge", "export", "animals", "--queryset", "s", "--format", "quepid"]) == 0
    quepid = tmp_path / "quepid.csv"
    quepid.write_text(capsys.readouterr().out, encoding="utf-8")
    assert cli.main(["--db", db, "judge", "import", "animals", "--queryset", "copy", str(quepid),
                     "--format", "quepid"]) == 0
    capsys.readouterr()
    copied = workbench.judgments
    assert sorted(copied.queries("animals", "copy").values()) == ["honey, please", "mice", "night"]
    by_text = {copied.queries("animals", "copy")[q]: docs for q, docs in copied.qrels("animals", "copy").items()}
    now = workbench.judgments.qrels("animals", "s")
    assert by_text == {workbench.judgments.queries("animals", "s")[q]: docs for q, docs in now.items()}
    assert copied.raters("animals", "copy") == ["quepid"]


def test_judge_next_lists_the_pairs_that_can_change_the_comparison(tmp_path, capsys):
    db = str(tmp_path / "db")
    workbench = Workbench(Store(db))
    workbench.create("animals", parse_bytes(ANIMALS.encode(), "animals.csv"))
    queries = {"q1": "small animals that hunt mice", "q2": "what sees well at night"}
    workbench.judgments.save_query_set("animals", "s", queries, {"q1": {"cat": 2}})
    a, b = SearchConfig(weights={"bm25": 1.0}), SearchConfig(weights={"dense": 1.0})
    (tmp_path / "a.json").write_text(a.to_json(), encoding="utf-8")
    (tmp_path / "b.json").write_text(b.to_json(), encoding="utf-8")
    configs = f"{tmp_path / 'a.json'},{tmp_path / 'b.json'}"
    assert cli.main(["--db", db, "judge", "next", "animals", "--queryset", "s", "--configs", configs,
                     "--budget", "100", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert listed["selection"] == "next"
    # the weights by hand from the two rankings (judge_next.change_weight): how far one relevant grade
    # g ≤ 2 (the highest judged) moves the query's nDCG difference, normalised as the workbench does by
    # the IDCG of its judgments so far. q2 has none: |disc_A(d) − disc_B(d)| (MTC's weight, 0 outside
    # both top 10s); q1 has cat judged 2: D = 2·(disc_A(cat) − disc_B(cat)), I = 2, I′ = 2 + g/log2 3.
    ranking_a, ranking_b = (fused_rankings(workbench, "animals", queries, c) for c in (a, b))

    def discount(ranking, doc):
        top = ranking[:10]
        return 1 / math.log2(top.index(doc) + 2) if doc in top else 0.0

    def weight(q, d):
        diff = discount(ranking_a[q], d) - discount(ranking_b[q], d)
        if q == "q2":
            return abs(diff)
        judged = 2 * (discount(ranking_a[q], "cat") - discount(ranking_b[q], "cat"))
        return max(abs((judged + g * diff) / (2 + g / math.log2(3)) - judged / 2) for g in (1, 2))

    expected = {(q, d): weight(q, d)
                for q in queries for d in set(ranking_a[q][:10]) | set(ranking_b[q][:10]) if (q, d) != ("q1", "cat")}
    got = {(p["query_id"], p["doc_id"]): p["weight"] for p in listed["pairs"]}
    assert set(got) <= set(expected) and ("q1", "cat") not in got  # the judged pair is never asked again
    assert {k: pytest.approx(v, abs=1e-12) for k, v in got.items()} == {k: expected[k] for k in got}
    # the queue's order: priority = weight × disc(best rank), highest first
    for p in listed["pairs"]:
        best = min(r for r in p["ranks"] if r is not None)
        assert p["priority"] == pytest.approx(p["weight"] / math.log2(1 + best), abs=1e-12)
    priorities = [p["priority"] for p in listed["pairs"]]
    assert priorities == sorted(priorities, reverse=True)
    assert {k for k, w in expected.items() if w > 0} <= set(got)  # every pair that can change Δ is listed

    assert cli.main(["--db", db, "judge", "next", "animals", "--queryset", "s", "--configs", configs,
                     "--pool", "--budget", "3", "--json"]) == 0
    pool = json.loads(capsys.readouterr().out)
    assert pool["selection"] == "pool" and len(pool["pairs"]) == 3
    interleaved = (x for pair in zip_longest(ranking_a["q1"][:10], ranking_b["q1"][:10]) for x in pair if x)
    first = [d for d in dict.fromkeys(interleaved) if d != "cat"][:3]
    assert [p["doc_id"] for p in pool["pairs"]] == first  # query 1 first, rank by rank, A before B


@pytest.mark.parametrize(("argv", "message"), [
    (["judge", "next", "animals", "--queryset", "s", "--configs", "a.json"], "needs two or more configs"),
    (["judge", "next", "animals", "--queryset", "nope", "--configs", "x.json,y.json"], "Cannot read config file"),
    (["judge", "agreement", "animals"], "is not a file"),
    (["judge", "adjudicate", "animals", "--queryset", "s", "q9", "cat", "2"], "has no query 'q9'"),
    (["judge", "llm", "animals", "--queryset", "s"], "The LLM judge is not configured"),
])
def test_bad_judge_commands_are_one_line_errors(tmp_path, capsys, argv, message):
    db = str(tmp_path / "db")
    workbench = Workbench(Store(db))
    workbench.create("animals", parse_bytes(ANIMALS.encode(), "animals.csv"))
    workbench.judgments.save_query_set("animals", "s", {"q1": "mice"})
    assert cli.main(["--db", db, *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and err.count("\n") == 1
