"""Rules measured (each left out in turn) and proposed from the judgments, on a hand-made judged
set; and the `rules` command over it."""

from __future__ import annotations

import json

import pytest
from corpora import ANIMALS_WITH_CATEGORY

from retrieval.cli import main as cli
from retrieval.indexing.pipeline import create_collection
from retrieval.indexing.readers.parse import parse_bytes
from retrieval.rule_tuning import rule_impact, suggest_rules
from retrieval.search.config import SearchConfig
from retrieval.search.workbench import Workbench
from retrieval.store import Store

ANIMALS = ANIMALS_WITH_CATEGORY.encode()
QUERIES = {"q1": "kitten", "q2": "mice", "q3": "honey"}
QRELS = {"q1": {"cat": 1}, "q2": {"cat": 1}, "q3": {"bee": 1}}
RULES = ("kitten =>\n  SYNONYM: cats\nmice =>\n  HIDE: cat\nzebra =>\n  SYNONYM: stripes\n"
         "mice =>\n  UP(0.001): * category:farm\n")
BM25 = {"weights": {"bm25": 1.0}, "depth": 10}


@pytest.fixture(scope="module")
def db(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("rule_tuning"))
    wb = Workbench(Store(path))
    create_collection(wb.store, "animals", parse_bytes(ANIMALS, "animals.csv"))
    wb.judgments.save_query_set("animals", "judged", QUERIES, QRELS)
    return path


def test_each_rule_left_out_shows_what_it_does(db):
    wb = Workbench(Store(db))
    report = rule_impact(wb, "animals", QUERIES, QRELS, SearchConfig(**BM25, rules=RULES))
    mice = [r.doc_id for r in wb.search("animals", "mice", SearchConfig(**BM25)).outcome.ranked]
    cat_ndcg = 1.0 if mice[0] == "cat" else 1 / 1.584962500721156  # rank 2: 1 / log2(3)
    helps, hurts, dead, idle = report.rules
    assert (helps.fires_on, helps.changed, helps.delta, helps.ci, helps.verdict) == (["q1"], ["q1"], 1.0,
                                                                                     (1.0, 1.0), "helps")
    assert helps.delta_all == pytest.approx(1 / 3)
    assert (hurts.fires_on, hurts.verdict) == (["q2"], "hurts") and hurts.delta == pytest.approx(-cat_ndcg)
    assert (dead.fires_on, dead.verdict) == ([], "dead")
    assert (idle.fires_on, idle.changed, idle.verdict) == (["q2"], [], "no effect")
    assert report.without_rules == pytest.approx((0 + cat_ndcg + 1) / 3)
    assert report.with_rules == pytest.approx((1 + 0 + 1) / 3)


def test_a_suggested_synonym_and_pin_fix_a_measured_miss(db):
    wb = Workbench(Store(db))
    found = {s.text: s for s in suggest_rules(wb, "animals", QUERIES, QRELS, SearchConfig(**BM25), limit=50)}
    synonym = found["kitten =>\n  SYNONYM: felines\n"]
    assert (synonym.kind, synonym.touched, synonym.before, synonym.after) == ("synonym", ["q1"], 0.0, 1.0)
    assert synonym.why == ("'felines' is in 1 of query q1's 1 relevant document(s) and in 0 of its first 20 "
                           "non-relevant results")
    pin = found['"kitten" =>\n  PIN: cat\n']
    assert (pin.kind, pin.delta) == ("pin", 1.0)
    assert all(s.delta > 0 for s in found.values())


def test_the_rules_command_checks_measures_and_suggests(db, tmp_path, capsys):
    rules = tmp_path / "rules.txt"
    rules.write_text(RULES, encoding="utf-8")
    assert cli.main(["rules", "check", str(rules)]) == 0
    assert capsys.readouterr().out == RULES
    assert cli.main(["--db", db, "rules", "impact", "animals", "--queryset", "judged", "--weights", "bm25=1",
                     "--rules", str(rules), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(r["rule"], r["verdict"]) for r in data["rules"]] == [(1, "helps"), (2, "hurts"), (3, "dead"),
                                                                  (4, "no effect")]
    assert cli.main(["--db", db, "rules", "impact", "animals", "--queryset", "judged", "--weights", "bm25=1",
                     "--rules", str(rules)]) == 0
    table = capsys.readouterr().out
    assert "   1     1  kitten                       1       1    +1.0000 [ +1.0000,  +1.0000]  1.000  +0.3333  helps" \
        "  changes: q1" in table
    assert cli.main(["--db", db, "rules", "suggest", "animals", "--queryset", "judged", "--weights", "bm25=1",
                     "--json"]) == 0
    assert "kitten =>\n  SYNONYM: felines\n" in [s["rule"] for s in json.loads(capsys.readouterr().out)]
    assert cli.main(["--db", db, "search", "animals", "kitten", "--weights", "bm25=1", "--rules", str(rules)]) == 0
    assert "cat" in capsys.readouterr().out


def test_a_bad_rules_file_is_a_one_line_error_with_its_line(tmp_path, capsys):
    bad = tmp_path / "bad.txt"
    bad.write_text("kitten =>\n  SYNONYM: cats\n  BOOST: x\n", encoding="utf-8")
    assert cli.main(["rules", "check", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"{bad}: Bad rules: line 3: unknown instruction 'BOOST'" in err
    assert cli.main(["rules", "check", str(tmp_path / "none.txt")]) == 2
    assert "No rules file" in capsys.readouterr().err


def test_rules_are_evaluated_saved_and_served_with_their_config(db, tmp_path, capsys):
    rules = tmp_path / "rules.txt"
    rules.write_text(RULES, encoding="utf-8")
    assert cli.main(["--db", db, "evaluate", "animals", "--queryset", "judged", "--weights", "bm25=1",
                     "--rules", str(rules), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["metrics"]["hybrid"]["ndcg@10"] == pytest.approx(2 / 3, abs=1e-6)
    wb = Workbench(Store(db))
    wb.configs.save("with-rules", SearchConfig(**BM25, rules=RULES), overwrite=True)
    assert wb.configs.load("with-rules").rules == RULES
    assert cli.main(["--db", db, "search", "animals", "kitten", "--config", "with-rules", "--json"]) == 0
    [item] = json.loads(capsys.readouterr().out)["results"]
    assert (item["id"], item["_meta"].get("rules")) == ("cat", None)  # found by the synonym: no per-result effect
