"""The Judge tab's queue: which unjudged (query, document) pairs a rater is asked about, in what order.

What to judge next for the configs being compared (`judge_next.next_to_judge`: the pairs one
judgment can change the comparison most by, re-made after every judgment from the judgments so far)
or the plain depth-10 pool; in blind mode a query's documents come in an order shuffled per rater.
"""

from __future__ import annotations

import hashlib
import random

import streamlit as st

from retrieval.search.config import SearchConfig
from ui import state
from ui.search import views
from ui.state import memo_read

BUDGETS = (50, 100, 200, 500, 1000)
NEXT, POOL = "What to judge next", "Depth-10 pool"
CONFIG_A, CONFIG_B, DEFAULT, BM25_ALONE = "Config A", "Config B", "Default", "BM25 alone"


def progress_text(done: int, total: int, rater: str, judged_queries: int, queries: int, set_name: str) -> str:
    """The queue's progress line. The rater is named only when there is one ('' is the
    unnamed rater, which a newcomer read as someone else having judged)."""
    by = f" by {rater}" if rater else " by you (no rater name given)" if done else ""
    return (f"{done} of {total} pairs of this queue judged{by} · {judged_queries} of {queries} queries of "
            f"'{set_name}' have judgments")


def judged_set(workbench, collection: str, set_name: str) -> tuple:
    """(queries, notes, ratings, consensus qrels) of a query set, read once until the next write
    (`memo_read`): the grading and LLM tabs, drawn on every rerun, share the one read."""
    judgments = workbench.judgments
    return memo_read(workbench, ("judge.set", collection, set_name), lambda: (
        judgments.queries(collection, set_name), judgments.notes(collection, set_name),
        judgments.ratings_of(collection, set_name), judgments.qrels(collection, set_name)))


def config_choices(workbench) -> dict[str, SearchConfig]:
    """The configs a queue can compare: the Search/Compare pages' A and B, the defaults, BM25
    alone, and every saved config."""
    view = state.view()
    choices = {CONFIG_A: view.config_a, CONFIG_B: view.config_b, DEFAULT: SearchConfig(),
               BM25_ALONE: SearchConfig(weights={"bm25": 1.0})}
    try:
        for name in memo_read(workbench, ("config_names",), lambda: workbench.configs.names()):
            choices[f"saved: {name}"] = workbench.configs.load(name)
    except Exception as exc:
        views.show_error(exc)
    return choices


def queue_controls(workbench) -> tuple[str, list[str], int, bool, bool]:
    choices = config_choices(workbench)
    with st.expander("Queue: which pairs, in what order", expanded=False):
        selection = st.radio("Order", (NEXT, POOL), key="judge.selection", horizontal=True,
                             help="What to judge next: the unjudged pairs of the chosen configs' top 10s, those whose "
                                  "judgment can change the comparison most first (minimal test collection weight: the "
                                  "difference in rank discount the document gets in the rankings, times the discount "
                                  "of its best rank). Measured with the normaliser this page computes (the ideal "
                                  "DCG from the judgments so far) and re-made after every judgment, it reached the "
                                  "right sign of the difference with far fewer judgments than the pool on "
                                  "xquad-en (8 against 239), but not on nfcorpus (17 against 69 in the set's "
                                  "query order, 84 against 26 with the queries shuffled) nor vaswani (17 against "
                                  "3; shuffled 20 against 48): it is not always better than the pool. Depth-10 "
                                  "pool: "
                                  "every unjudged document of the top 10s, query by query, rank by rank.")
        default = [CONFIG_A, CONFIG_B]
        names = st.multiselect("Configs compared", list(choices), default=default, key="judge.configs",
                               help="The rankings whose comparison the judgments should settle (two or more for "
                                    "'what to judge next'; the pool takes one or more).")
        budget = st.select_slider("Budget (pairs)", BUDGETS, value=100, key="judge.budget",
                                  help="How many pairs the queue holds.")
        others = st.checkbox("Also pairs other raters judged", key="judge.others",
                             help="For an agreement study: you are asked about pairs that already have a judgment "
                                  "from someone else (never about pairs you judged).")
        blind = st.toggle("Blind", value=True, key="judge.blind",
                          help="No source, score or rank is shown, and a query's documents come in an order "
                               "shuffled for you, so what you know about the rankings cannot sway a grade.")
    return selection, names, budget, others, blind


def full_queue(workbench, collection: str, set_name: str, selection: str, names: list[str],
               consensus: dict[str, dict[str, int]]) -> list:
    """Every pair of the configs' top 10s in queue order (`judging_queue.page_queue`: the pairs
    the consensus judges first, the page filters them, then the unjudged ones in the order of
    `selection` given the consensus, re-made whenever a judgment changes it). The rankings are
    kept per collection state, set and configs, so a judgment costs no search; the order per
    consensus, so a rerun without a new judgment (a slider moved) costs no re-ordering either."""
    from retrieval.evaluation.judging_queue import page_queue, queue_rankings

    choices = config_choices(workbench)
    configs = [choices[n] for n in names if n in choices]
    key = ("judge.queue", collection, set_name, tuple(c.to_json() for c in configs), workbench.state(collection))
    cache = st.session_state.setdefault("judge.queues", {})
    if key not in cache:
        with st.spinner("Ranking the query set with each config…"):
            cache.clear()
            cache[key] = {"rankings": queue_rankings(workbench, collection, set_name, configs), "memo": {}}
    held = cache[key]
    judged = (selection, frozenset((q, d, g) for q, docs in consensus.items() for d, g in docs.items()))
    if held.get("judged") != judged:
        held["order"] = page_queue(held["rankings"], consensus, pool=selection == POOL, memo=held["memo"])
        held["judged"] = judged
    return held["order"]


def queue_window(queue: list, others_judged: set, others: bool, budget: int) -> list:
    """The queue this rater works through: the first `budget` pairs of `queue` in its order,
    leaving out (unless `others`) the pairs someone else has judged already."""
    return [c for c in queue if others or (c.query_id, c.doc_id) not in others_judged][:budget]


def pending_pairs(window: list, mine: dict, skipped: list) -> list:
    """The window without what this rater answered (any answer, "can't tell" too); skipped
    pairs last."""
    out = [c for c in window if (c.query_id, c.doc_id) not in mine]
    skipped_set = set(skipped)
    return [c for c in out if (c.query_id, c.doc_id) not in skipped_set] + \
        [c for c in out if (c.query_id, c.doc_id) in skipped_set]


def current_pair(pending: list, rater: str, set_name: str, blind: bool, skipped: list = ()):
    """The next pair to show: the first pending pair's query, and within it (skipped pairs last),
    in blind mode, a document drawn in an order shuffled per (rater, set, query), else the
    queue's first."""
    if not pending:
        return None
    query_id = pending[0].query_id
    skipped = set(skipped)
    same = [c for c in pending if c.query_id == query_id and (c.query_id, c.doc_id) not in skipped] or \
        [c for c in pending if c.query_id == query_id]
    if not blind:
        return same[0]
    seed = hashlib.sha1("\x1f".join((rater, set_name, query_id)).encode()).hexdigest()
    order = sorted(same, key=lambda c: c.doc_id)
    random.Random(seed).shuffle(order)
    return order[0]
