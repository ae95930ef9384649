"""The Evaluate page's judgment source: the raters' consensus, or a click model's implicit list.

Shown only when the query set holds implicit lists (`judge implicit … --collection C --query-set S`
saves them as `implicit:<model>`): a picker, and per list the pairs it covers and its agreement
with the explicit judgments (the consensus of the other raters: κ, weighted κ, Krippendorff's α,
`judging.implicit.source`), so the list is checked before it is used. The chosen source is what the
run, the sweep, A/B, the optimiser and snapshots on this page are judged with.
"""

from __future__ import annotations

import streamlit as st

from retrieval.judging.implicit.source import EXPLICIT, agreement_with_explicit, coverage
from retrieval.judging.judgments import CONSENSUS
from retrieval.judging.raters import is_implicit_rater
from ui.search import views
from ui.state import memo_read


def source_rows(ratings, sources: list[str]) -> list[dict]:
    """One row per implicit source: pairs covered, pairs shared with the explicit judgments, κ,
    weighted κ, α (None when undefined or nothing is shared)."""
    covered = coverage(ratings)
    rows = []
    for source in sources:
        result = agreement_with_explicit(ratings, source)
        pair = result.pairs[0] if result.pairs else None
        rows.append({"judgments": source, "pairs": covered.get(source, 0),
                     "pairs also judged explicitly": pair.n if pair else 0,
                     "κ": pair.cohen_kappa if pair else None, "weighted κ": pair.weighted_kappa if pair else None,
                     "α": result.krippendorff_alpha if pair else None})
    return rows


def source_picker(workbench, collection: str, set_name: str, raters: list[str]) -> str:
    """The judgment source chosen (`CONSENSUS` when the set has no implicit list), with the
    coverage and agreement table."""
    implicit = [r for r in raters if is_implicit_rater(r)]
    if not implicit:
        return CONSENSUS
    ratings = memo_read(workbench, ("ratings", collection, set_name),
                        lambda: workbench.judgments.ratings_of(collection, set_name))
    rows = memo_read(workbench, ("implicit-rows", collection, set_name), lambda: source_rows(ratings, implicit))
    explicit = coverage(ratings)[EXPLICIT]
    source = st.selectbox(
        "Judgments", [CONSENSUS] + implicit, key=f"eval.source.{collection}.{set_name}",
        format_func=lambda s: f"Raters' consensus ({explicit} pairs)" if s == CONSENSUS else
        f"{s}: from click logs ({next(r['pairs'] for r in rows if r['judgments'] == s)} pairs)",
        help="What the metrics here are judged with: the consensus of the people (and LLM) who rated, or one "
             "judgment list a click model made from behaviour logs (python -m retrieval judge implicit). Check "
             "its agreement with the explicit judgments below before trusting it.")
    st.dataframe(rows, hide_index=True, use_container_width=True)
    st.caption(views.markdown_safe(
        "Agreement of each click-model list with the explicit judgments (their consensus), over the pairs both "
        "judged: Cohen's κ, weighted κ (quadratic) and Krippendorff's α (ordinal); empty where they share no "
        "pair or the figure is undefined. Implicit lists never count in the raters' consensus."))
    return source
