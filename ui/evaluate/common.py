"""What the Evaluate page's sections share: the session's run results, memoised reads, and the
short label of a config.

Long runs (evaluate, sweep, A/B) happen only on a button press; their results are kept in the
session (`RESULTS_KEY`) with the inputs they were computed from, so a rerun redraws them without
re-querying, and says so (`stale_note`) when the config or the judgments have changed since.
"""

from __future__ import annotations

from typing import Any

import streamlit as st

from retrieval.search.config import SearchConfig
from retrieval.search.fusion.methods import method_of
from ui.search import views

RESULTS_KEY = "_workbench_eval_results"
READS_KEY = "_workbench_eval_reads"


# ---- session results ------------------------------------------------------------------------
def results() -> dict[str, dict[str, Any]]:
    if RESULTS_KEY not in st.session_state:
        st.session_state[RESULTS_KEY] = {}
    return st.session_state[RESULTS_KEY]


def stale_note(workbench, kind: str, stored: dict[str, Any], key: tuple) -> None:
    if stored["key"] != key:
        st.info(views.markdown_safe(
            f"Shown: the {kind} of {stored['when']} (query set '{stored['key'][1]}' on "
            f"'{workbench.label(stored['key'][0])}'). The config, the collection or the judgments changed since: "
            "run it again to update."), icon=":material/schedule:")


# ---- labels ----------------------------------------------------------------------------------
def config_label(config: SearchConfig) -> str:
    """A short description of a config: 'RRF k=60, BM25 0.5, vector 0.5, depth 100'."""
    from ui.search.results import label

    weights = ", ".join(f"{label(s)} {w:g}" for s, w in config.weights.items())
    head = method_of(config).title(config)
    return f"{head}, {weights}, depth {config.depth}" + (", rerank" if config.rerank else "")


def shown_p(p: float | None) -> str:
    """A p-value in a metric box or table cell: 0.0123, < 0.001, or "not enough queries"
    (`paired.p_text` without its "p")."""
    from retrieval.evaluation.paired import p_text

    return p_text(p).removeprefix("p = ").removeprefix("p ")
