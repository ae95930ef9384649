"""SDBN in closed form, computed by hand on a three-session log."""

from retrieval.judging.implicit.counts import ClickCounts
from retrieval.judging.implicit.logs import ClickEvent
from retrieval.judging.implicit.sdbn import fit_sdbn


def session(name, shown, clicked):
    return ([ClickEvent(name, "q", d, r, "impression") for r, d in enumerate(shown)]
            + [ClickEvent(name, "q", d, shown.index(d), "click") for d in clicked])


def test_attractiveness_times_satisfaction_by_hand():
    events = session("s1", "abc", "ab") + session("s2", "bac", "") + session("s3", "cab", "c")
    relevance, examination = fit_sdbn(ClickCounts().add_all(events))
    # s1: last click b@1, so a, b examined (c not); s2: no click, all examined; s3: last click c@0.
    # a: examined s1, s2 → 2; clicks 1; last clicks 0 → a = 1/2, s = 0.
    # b: examined s1, s2 → 2; clicks 1 (last in s1) → a = 1/2, s = 1 → 0.5.
    # c: examined s2, s3 → 2; clicks 1 (last in s3) → 0.5.
    assert relevance == {("q", "a"): 0.0, ("q", "b"): 0.5, ("q", "c"): 0.5}
    # position 0: examined 3 of 3; 1: s1, s2 of 3; 2: s2 of 3.
    assert examination == {0: 1.0, 1: 2 / 3, 2: 1 / 3}
