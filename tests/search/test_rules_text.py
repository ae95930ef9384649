"""The common-rules text: read (every instruction, boundaries, errors with line numbers, all or
nothing) and written back unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval.search.filters import Filter
from retrieval.search.rules import parse_rules, write_rules
from retrieval.types import RetrievalError

DATA = Path(__file__).resolve().parent.parent / "data" / "rules"


def test_the_hand_made_file_is_read_instruction_by_instruction():
    rules = parse_rules((DATA / "common_rules.txt").read_text(encoding="utf-8"))
    assert [(r.number, r.terms, r.starts, r.ends, r.line) for r in rules.rules] == [
        (1, ("job",), False, False, 3),
        (2, ("notebook",), True, True, 6),
        (3, ("cheap", "laptop"), False, False, 9),
        (4, ("home", "page"), False, False, 15),
    ]
    job, notebook, cheap, home = rules.rules
    assert [(i.kind, i.weight, i.terms) for i in job.instructions] == [
        ("SYNONYM", None, ("employment",)), ("SYNONYM", 0.5, ("work",))]
    assert [(i.kind, i.terms) for i in notebook.instructions] == [("SYNONYM", ("laptop",)), ("DELETE", ("notebook",))]
    assert [(i.kind, i.weight, i.filter) for i in cheap.instructions] == [
        ("UP", 1.5, Filter("category", "=", ("guide",))),
        ("DOWN", 0.5, Filter("year", "<", ("2000",))),
        ("FILTER", None, Filter("lang", "=", ("en",))),
    ]
    assert [(i.kind, i.doc_ids) for i in home.instructions] == [("PIN", ("doc-42", "doc-7")), ("HIDE", ("doc-13",))]
    assert len(rules) == 4


def test_the_text_is_written_back_unchanged():
    text = (DATA / "common_rules.txt").read_text(encoding="utf-8")
    assert write_rules(parse_rules(text)) == text
    # and another indent, kept as the file's
    four = "a b =>\n    SYNONYM(0.25): c\n    UP(100): * year>=2010\n    DELETE\n"
    assert write_rules(parse_rules(four)) == four


def test_a_loose_text_is_written_in_the_writers_form():
    loose = "Job=>\n\tsynonym ( 0.50 ) :Employment\n"
    written = write_rules(parse_rules(loose))
    assert written == "job =>\n\tSYNONYM(0.5): Employment\n"
    assert write_rules(parse_rules(written)) == written


def test_every_bad_line_is_named_with_its_number_and_nothing_is_read():
    with pytest.raises(RetrievalError) as caught:
        parse_rules((DATA / "bad_rules.txt").read_text(encoding="utf-8"))
    message = str(caught.value)
    assert message.startswith("Bad rules: line 3: unknown instruction 'BOOST'")
    assert "line 4: an instruction before any input" not in message  # UP(...) follows rule 1's lines
    assert "line 6: UP on a term is not supported" in message
    assert "line 7: DELETE may only delete terms of its input (laptop), not phone" in message


@pytest.mark.parametrize(("text", "expected"), [
    ("SYNONYM: a\n", "line 1: an instruction before any input ('term =>')"),
    ("a =>\n", "line 1: rule 'a =>' has no instructions"),
    ("a =>\n  SYNONYM\n", "line 2: SYNONYM needs a colon and its argument"),
    ("a =>\n  SYNONYM(2): b\n", "line 2: SYNONYM's weight must be in [0.25, 1], got 2"),
    ("a =>\n  UP(x): * c:d\n", "line 2: UP's weight must be a number, got 'x'"),
    ("a =>\n  UP(0): * c:d\n", "line 2: UP's weight must be > 0"),
    ("a =>\n  PIN(2): d1\n", "line 2: PIN takes no weight"),
    ("a =>\n  PIN: d1,,d2\n", "line 2: PIN needs document ids separated by commas"),
    ("a =>\n  FILTER: * year>=soon\n", "line 2: Filter 'year>=soon': >= needs a number or an ISO date"),
    ("=>\n  SYNONYM: b\n", "line 1: an input needs terms before '=>'"),
    ("a => b\n", "line 1: nothing may follow '=>'"),
    ("a =>\n  @{ _id: \"1\" }@\n", "line 2: Querqy properties (@…) are not supported"),
    ('a "b =>\n  SYNONYM: c\n', "line 1: a quote may only open or close an input"),
])
def test_each_kind_of_bad_line(text, expected):
    with pytest.raises(RetrievalError, match="Bad rules") as caught:
        parse_rules(text)
    assert expected in str(caught.value)


def test_an_empty_text_is_no_rules():
    rules = parse_rules("")
    assert len(rules) == 0 and write_rules(rules) == "" and rules.matches("anything") == []


def test_matching_follows_querqys_inputs_and_boundaries():
    rules = parse_rules('job =>\n  SYNONYM: work\n"new york =>\n  SYNONYM: nyc\nshoes" =>\n  SYNONYM: boots\n'
                        '"tv" =>\n  SYNONYM: television\n')

    def fired(query):
        return [m.rule.number for m in rules.matches(query)]

    assert fired("Job offers") == [1] and fired("a JOB, now") == [1] and fired("jobs") == []
    assert fired("new york hotels") == [2] and fired("hotels new york") == []  # `"` at the start
    assert fired("red shoes") == [3] and fired("shoes red") == []  # `"` at the end
    assert fired("tv") == [4] and fired("tv stand") == []  # the whole query
    assert fired("new york job tv") == [1, 2]


def test_a_rule_left_out_keeps_the_others_numbers():
    rules = parse_rules((DATA / "common_rules.txt").read_text(encoding="utf-8"))
    assert [r.number for r in rules.without(2).rules] == [1, 3, 4]
    assert [m.rule.number for m in rules.without(1).matches("job")] == []
