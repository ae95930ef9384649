"""The click simulator: seeded, the formulas of its docstring, cascade users stop when satisfied."""

import pytest

from retrieval.judging.implicit.simulate import attractiveness, examination_curve, simulate
from retrieval.types import RetrievalError

RELEVANCE = {"q": {"a": 3, "b": 0, "c": 1}, "r": {"x": 2}}


def test_formulas():
    assert attractiveness(0, 0.05) == pytest.approx(0.05) and attractiveness(3, 0.05) == pytest.approx(0.95)
    assert attractiveness(1, 0.0) == pytest.approx(1 / 7)
    assert examination_curve(3, 1.0) == [1.0, 0.5, 1 / 3]


def test_seeded_and_well_formed():
    first = list(simulate(RELEVANCE, 50, user="cascade", seed=7))
    assert first == list(simulate(RELEVANCE, 50, user="cascade", seed=7))
    assert first != list(simulate(RELEVANCE, 50, user="cascade", seed=8))
    by_session = {}
    for e in first:
        by_session.setdefault(e.session, []).append(e)
    assert len(by_session) == 50
    for events in by_session.values():
        shown = [e for e in events if e.action == "impression"]
        assert [e.position for e in shown] == list(range(len(shown)))
        assert {e.doc for e in events if e.action == "click"} <= {e.doc for e in shown}


def test_unknown_user():
    with pytest.raises(RetrievalError, match="pbm, cascade"):
        list(simulate(RELEVANCE, 1, user="dcm"))
