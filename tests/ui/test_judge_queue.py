"""The Judge page's queue, pure parts: the window a rater works through, what is left of it, and
the blind order of a query's documents."""

from retrieval.judging.judge_next import Candidate
from ui.judging.queue import current_pair, pending_pairs, progress_text, queue_window


def pairs(*keys: str) -> list[Candidate]:
    return [Candidate(k[0], k[1:], 1.0, (1, None)) for k in keys]


def test_the_window_leaves_out_what_others_judged_unless_asked_and_keeps_its_budget():
    queue = pairs("qa", "qb", "qc", "rd", "re")
    assert queue_window(queue, {("q", "b")}, others=False, budget=3) == [queue[0], queue[2], queue[3]]
    assert queue_window(queue, {("q", "b")}, others=True, budget=3) == queue[:3]


def test_what_is_left_skips_any_answer_of_mine_and_puts_skipped_pairs_last():
    window = pairs("qa", "qb", "qc", "rd")
    mine = {("q", "a"): 2, ("q", "c"): None}  # None: "can't tell" is an answer too
    assert pending_pairs(window, mine, [("q", "b")]) == [window[3], window[1]]


def test_blind_order_is_a_shuffle_per_rater_and_query_and_skipped_pairs_wait():
    window = pairs("qa", "qb", "qc", "qd", "qe", "rf")
    first = current_pair(window, "ann", "s", blind=True)
    assert first.query_id == "q" and current_pair(window, "ann", "s", blind=True) == first  # stable
    shown = {current_pair(window, rater, "s", blind=True).doc_id for rater in ("ann", "bo", "cy", "di", "ed")}
    assert len(shown) > 1  # raters see the query's documents in different orders
    assert current_pair(window, "ann", "s", blind=False) == window[0]
    assert current_pair(window, "ann", "s", blind=True, skipped=[("q", first.doc_id)]).doc_id != first.doc_id


def test_the_progress_line_names_no_one_before_any_judging():
    assert progress_text(0, 50, "", 0, 40, "sample") == (
        "0 of 50 pairs of this queue judged · 0 of 40 queries of 'sample' have judgments")
    assert progress_text(2, 50, "", 1, 40, "sample") == (
        "2 of 50 pairs of this queue judged by you (no rater name given) · 1 of 40 queries of 'sample' have judgments")
    assert progress_text(2, 50, "ann", 1, 40, "sample").startswith("2 of 50 pairs of this queue judged by ann · ")
