"""The Judge page: hours of judging made bearable, and several raters made measurable.

- **Judge**: a queue of unjudged (query, document) pairs — what to judge next for the configs
  being compared (`judge_next.next_to_judge`: the pairs one judgment can change the comparison
  most by) or the plain depth-10 pool — shown one document at a time, blind by default (no
  source, score or rank; a query's documents in an order shuffled per rater). Grades 0–3, "can't
  tell" and skip, each on a key (0 1 2 3 X S, U undoes); the query's information need and
  guidelines, written per query; progress per query set.
- **Raters**: agreement per pair of raters (Cohen's κ, plain and weighted) and overall
  (Krippendorff's α), per query; the disagreements, each settled here by an adjudicated grade;
  import and export of ratings (CSV with raters, Quepid, TREC).
- **LLM judge**: any OpenAI-compatible endpoint judges the same queue as a rater of its own, in
  the background (the page stays usable; Stop keeps every answer so far).

Ratings go into the query set under the rater's name (`JudgmentStore.rate_many`); the metrics
read the raters' consensus (`raters.consensus`), as the Evaluate page says.
"""

from __future__ import annotations

import dataclasses
import hashlib
import random
import threading
from dataclasses import dataclass, field

import streamlit as st

from retrieval.judging.judgments import UNNAMED
from retrieval.judging.raters import ADJUDICATED, agreement, disagreements, is_llm_rater, validate_rater
from retrieval.search.config import SearchConfig
from retrieval.types import RetrievalError
from ui import state
from ui.search import views
from ui.state import memo_read

GRADE_BUTTONS = ((0, "0 · not relevant"), (1, "1 · related"), (2, "2 · relevant"), (3, "3 · perfect"))
SCALE_GUIDELINES = """\
- **3 · perfect**: the document is dedicated to the query and answers it fully; nothing else is needed.
- **2 · relevant**: it answers the query, but with other matter around it or only in part.
- **1 · related**: it is on the query's topic but does not answer it.
- **0 · not relevant**: it has nothing to do with the query.
- **Can't tell** (X): you cannot decide (missing context, a language you do not read); nothing is counted and
  the pair is not asked of you again. **Skip** (S) moves it to the end of the queue.
"""
BUDGETS = (50, 100, 200, 500, 1000)
NEXT, POOL = "What to judge next", "Depth-10 pool"
CONFIG_A, CONFIG_B, DEFAULT, BM25_ALONE = "Config A", "Config B", "Default", "BM25 alone"
ABSENT = object()  # undo: the rater had not rated the pair before
SESSION_KEY = "judge.session"
LLM_RUN_KEY = "judge.llm_run"


@dataclass
class Session:
    """What the page remembers while a rater works: skipped pairs and what undo restores."""

    owner: tuple = ()  # (collection, query set, rater): another one starts a new session
    skipped: list[tuple[str, str]] = field(default_factory=list)
    undo: list[tuple[str, str, object]] = field(default_factory=list)  # (query, doc, previous grade | ABSENT)
    message: str = ""


def session(owner: tuple | None = None) -> Session:
    """This browser session's judging state; a new one when `owner` changed."""
    work = st.session_state.get(SESSION_KEY)
    if work is None or (owner is not None and work.owner != owner):
        work = st.session_state[SESSION_KEY] = Session(owner or ())
    return work


def judge_page(workbench, collection: str) -> None:
    st.title("Judge")
    judgments = workbench.judgments
    try:
        sets = memo_read(workbench, ("sets", collection), lambda: judgments.query_sets(collection))
    except Exception as exc:
        views.show_error(exc)
        return
    if not sets:
        st.info("This collection has no query set yet: upload queries on the Evaluate page, or rate results on "
                "the Search page (the first rating creates the set 'judgments').")
        return
    view = state.view()
    if view.query_set not in sets:
        view.query_set = sets[0]

    def write_set(value: str) -> None:
        state.view().query_set = value

    left, right = st.columns(2)
    with left:
        set_name = state.bound(st.selectbox, "Query set", "judge.set", lambda: state.view().query_set, write_set,
                               options=sets, help="The queries judged here; ratings go into this set, and the "
                                                  "Evaluate page scores rankings with the raters' consensus.")
    with right:
        rater = rater_input()
    if rater is None:
        return
    tab_judge, tab_raters, tab_llm = st.tabs(["Judge", "Raters and agreement", "LLM judge"])
    with tab_judge:
        judging_session(workbench, collection, set_name, rater)
    with tab_raters:
        raters_section(workbench, collection, set_name)
    with tab_llm:
        llm_section(workbench, collection, set_name)


def rater_input() -> str | None:
    """Your name as a rater ('' is the unnamed rater of the Search page), bound to the View (URL
    `rater=NAME`: each rater can be sent a link); None when the name is not valid."""
    def write(value: str) -> None:
        state.view().rater = value.strip()

    name = state.bound(st.text_input, "Your name (rater)", "judge.rater", lambda: state.view().rater, write,
                       max_chars=64, help="Ratings are kept per rater, so several people can judge the same pairs "
                                          "and their agreement can be measured. Empty: the unnamed rater, the same "
                                          "as the Search page's ratings. No login: a name is all it takes (and "
                                          "the link of this page carries it).").strip()
    if not name:
        return UNNAMED
    try:
        return validate_rater(name)
    except RetrievalError as exc:
        views.show_error(exc)
        return None


# ---- the queue --------------------------------------------------------------------------------
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
                                  "of its best rank). Depth-10 pool: "
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


def full_queue(workbench, collection: str, set_name: str, selection: str, names: list[str]) -> list:
    """Every pair of the configs' top 10s in queue order (judged ones included: the page filters
    them), kept per collection state, set and configs, so a judgment costs no search."""
    from retrieval.evaluation.judging_queue import judging_queue

    choices = config_choices(workbench)
    configs = [choices[n] for n in names if n in choices]
    key = ("judge.queue", collection, set_name, selection, tuple(c.to_json() for c in configs),
           workbench.state(collection))
    cache = st.session_state.setdefault("judge.queues", {})
    if key not in cache:
        with st.spinner("Ranking the query set with each config…"):
            cache.clear()
            cache[key] = judging_queue(workbench, collection, set_name, configs, budget=None,
                                       pool=selection == POOL, qrels={})
    return cache[key]


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


def judging_session(workbench, collection: str, set_name: str, rater: str) -> None:
    judgments = workbench.judgments
    selection, names, budget, others, blind = queue_controls(workbench)
    if selection == NEXT and len(names) < 2:
        st.info("Pick two or more configs to compare, or the depth-10 pool.")
        return
    if not names:
        st.info("Pick at least one config whose top 10s make the pool.")
        return
    try:
        queue = full_queue(workbench, collection, set_name, selection, names)
        queries, notes, ratings, consensus = memo_read(workbench, ("judge.set", collection, set_name), lambda: (
            judgments.queries(collection, set_name), judgments.notes(collection, set_name),
            judgments.ratings_of(collection, set_name), judgments.qrels(collection, set_name)))
    except Exception as exc:
        views.show_error(exc)
        return
    mine = {(r.query_id, r.doc_id): r.grade for r in ratings if r.rater == rater}
    others_judged = {(r.query_id, r.doc_id) for r in ratings if r.rater != rater and r.grade is not None}
    work = session((collection, set_name, rater))
    window = queue_window(queue, others_judged, others, budget)
    pending = pending_pairs(window, mine, work.skipped)
    done = len(window) - len(pending)
    st.progress(done / len(window) if window else 1.0,
                text=f"{done} of {len(window)} pairs of this queue judged by {rater or 'the unnamed rater'} · "
                     f"{sum(1 for q in queries if consensus.get(q))} of {len(queries)} queries of '{set_name}' have "
                     "judgments")
    if work.message:
        st.caption(views.markdown_safe(work.message))
    pair = current_pair(pending, rater, set_name, blind, work.skipped)
    buttons_disabled = pair is None
    if pair is None:
        st.success("Nothing left in this queue. Raise the budget, compare other configs, or look at the raters' "
                   "agreement.")
    else:
        show_pair(workbench, collection, set_name, pair, queries, notes, pending, blind)
    grade_buttons(judgments, collection, set_name, rater, pair, mine, buttons_disabled)
    with st.expander("Grading guidelines"):
        st.markdown(SCALE_GUIDELINES)


def show_pair(workbench, collection: str, set_name: str, pair, queries: dict, notes: dict, pending: list,
              blind: bool) -> None:
    left_in_query = sum(1 for c in pending if c.query_id == pair.query_id)
    st.caption(views.markdown_safe(f"Query {pair.query_id} · {left_in_query} document(s) of it left in the queue"))
    st.subheader(views.markdown_safe(queries.get(pair.query_id, pair.query_id)))
    need, guidelines = notes.get(pair.query_id, ("", ""))
    if need:
        st.markdown(views.markdown_safe(f"**Information need:** {need}"))
    if guidelines:
        st.markdown(views.markdown_safe(f"**Guidelines for this query:** {guidelines}"))
    notes_form(workbench, collection, set_name, pair.query_id, need, guidelines)
    try:
        row = workbench.documents(collection, [pair.doc_id]).get(pair.doc_id)
    except Exception as exc:
        views.show_error(exc)
        return
    with st.container(border=True):
        if row is None:
            st.warning(views.markdown_safe(f"Document {pair.doc_id} is no longer in the collection."))
            return
        title = (row.get("title") or "").strip()
        if title:
            st.markdown(views.markdown_safe(f"**{title}**"))
        st.markdown(views.markdown_safe(row.get("text") or ""))
        if not blind:
            ranks = ", ".join(f"config {i + 1}: {'–' if r is None else r}" for i, r in enumerate(pair.ranks))
            st.caption(views.markdown_safe(f"{pair.doc_id} · ranks {ranks} · weight {pair.weight:.3f}"))


def notes_form(workbench, collection: str, set_name: str, query_id: str, need: str, guidelines: str) -> None:
    with st.expander("Edit this query's information need and guidelines"), \
            st.form(f"judge.notes.{hashlib.sha1(query_id.encode()).hexdigest()[:12]}"):
        new_need = st.text_area("Information need", value=need, max_chars=4000,
                                help="What the person asking wants to know: every rater reads it above the document.")
        new_guidelines = st.text_area("Guidelines", value=guidelines, max_chars=4000,
                                      help="What counts as relevant for this query, e.g. 'a dosage is a 3'.")
        if st.form_submit_button("Save"):
            try:
                workbench.judgments.set_notes(collection, set_name, query_id, new_need, new_guidelines)
            except Exception as exc:
                views.show_error(exc)
            else:
                st.rerun()  # drawn above the form: show what was just saved


def grade_buttons(judgments, collection: str, set_name: str, rater: str, pair, mine: dict, disabled: bool) -> None:
    columns = st.columns(7)
    target = None if pair is None else (pair.query_id, pair.doc_id)
    for column, (grade, label) in zip(columns, GRADE_BUTTONS, strict=False):
        column.button(label, key=f"judge.grade{grade}", shortcut=str(grade), disabled=disabled,
                      on_click=_rate, args=(judgments, collection, set_name, rater, target, grade, mine),
                      use_container_width=True)
    columns[4].button("Can't tell", key="judge.cant", shortcut="X", disabled=disabled, use_container_width=True,
                      on_click=_rate, args=(judgments, collection, set_name, rater, target, None, mine))
    columns[5].button("Skip", key="judge.skip", shortcut="S", disabled=disabled, use_container_width=True,
                      on_click=_skip, args=(target,))
    columns[6].button("Undo", key="judge.undo", shortcut="U", disabled=not session().undo, use_container_width=True,
                      on_click=_undo, args=(judgments, collection, set_name, rater))


def _rate(judgments, collection: str, set_name: str, rater: str, target, grade, mine: dict) -> None:
    work = session()
    try:
        judgments.rate_many(collection, set_name, {target: grade}, rater=rater)
    except Exception as exc:
        work.message = f"Not saved: {exc}"
        return
    work.undo.append((*target, mine.get(target, ABSENT)))
    if target in work.skipped:
        work.skipped.remove(target)
    said = "can't tell" if grade is None else f"grade {grade}"
    work.message = f"Saved {said} for {target[1]} (query {target[0]}). U undoes it."


def _skip(target) -> None:
    work = session()
    if target not in work.skipped:
        work.skipped.append(target)
    work.message = f"Skipped {target[1]}: it comes back at the end of the queue."


def _undo(judgments, collection: str, set_name: str, rater: str) -> None:
    work = session()
    if not work.undo:
        return
    query_id, doc_id, previous = work.undo[-1]
    try:
        if previous is ABSENT:
            judgments.unrate_many(collection, set_name, [(query_id, doc_id)], rater=rater)
        else:
            judgments.rate_many(collection, set_name, {(query_id, doc_id): previous}, rater=rater)
    except Exception as exc:
        work.message = f"Undo failed: {exc}"
        return
    work.undo.pop()
    work.message = f"Undone: {doc_id} (query {query_id}) is back in the queue."


# ---- raters and agreement ---------------------------------------------------------------------
def raters_section(workbench, collection: str, set_name: str) -> None:
    judgments = workbench.judgments
    try:
        ratings = memo_read(workbench, ("judge.ratings", collection, set_name),
                            lambda: judgments.ratings_of(collection, set_name))
    except Exception as exc:
        views.show_error(exc)
        return
    counts: dict[str, int] = {}
    for r in ratings:
        counts[r.rater] = counts.get(r.rater, 0) + 1
    st.caption(views.markdown_safe(
        "Raters: " + (", ".join(f"{rater_label(n)} ({c})" for n, c in sorted(counts.items())) or "none yet") +
        ". The metrics use the consensus per (query, document): the adjudicated grade, else the grade more than "
        "half the raters gave, else the mean grade rounded half up."))
    result = agreement(ratings)
    if result.pairs:
        st.dataframe([{"raters": " vs ".join(rater_label(n) for n in p.raters), "documents both graded": p.n,
                       "Cohen's κ": p.cohen_kappa, "weighted κ (quadratic)": p.weighted_kappa} for p in result.pairs],
                     hide_index=True, use_container_width=True)
        alpha = result.krippendorff_alpha
        shown = "undefined" if alpha is None else f"{alpha:.3f}"
        st.markdown(f"Krippendorff's α (ordinal) over every rater: **{shown}**"
                    " — 1 is perfect agreement, 0 what chance gives, below 0.667 is usually too low to rely on.")
        with st.expander("Agreement per query"):
            st.dataframe([{"query": q, "α": a.alpha, "documents": a.n_units, "disagreements": a.n_disagreements}
                          for q, a in result.per_query.items()], hide_index=True, use_container_width=True)
    else:
        st.info("Agreement needs two raters who graded the same documents: ask a second person to judge with "
                "'Also pairs other raters judged' on.")
    adjudication(workbench, collection, set_name, ratings)
    ratings_files(workbench, collection, set_name)


def rater_label(name: str) -> str:
    return "(unnamed)" if name == UNNAMED else name


def adjudication(workbench, collection: str, set_name: str, ratings) -> None:
    found = disagreements(ratings)
    st.subheader("Disagreements")
    if not found:
        st.caption("No disagreement left to settle.")
        return
    st.dataframe([{"query": d.query_id, "document": d.doc_id, "spread": d.spread,
                   "grades": ", ".join(f"{rater_label(r)} {g}" for r, g in d.grades.items())} for d in found],
                 hide_index=True, use_container_width=True)
    with st.form("judge.adjudicate"):
        options = [f"{d.query_id} · {d.doc_id}" for d in found]
        chosen = st.selectbox("Settle", range(len(found)), format_func=options.__getitem__,
                              help="The adjudicated grade is the consensus the metrics use, whatever the raters gave.")
        grade = st.radio("Adjudicated grade", [g for g, _ in GRADE_BUTTONS], format_func=dict(GRADE_BUTTONS).get,
                         index=2, horizontal=True, key="judge.adjudicated_grade")
        if st.form_submit_button("Adjudicate"):
            d = found[chosen]
            try:
                workbench.judgments.rate_many(collection, set_name, {(d.query_id, d.doc_id): int(grade)},
                                              rater=ADJUDICATED)
                st.success(views.markdown_safe(f"{d.doc_id} for query {d.query_id}: adjudicated {grade}."))
            except Exception as exc:
                views.show_error(exc)


def ratings_files(workbench, collection: str, set_name: str) -> None:
    from retrieval.judging.qrels import format_quepid_csv, format_ratings_csv
    from retrieval.judging.raters import Rating

    judgments = workbench.judgments
    st.subheader("Import and export")
    try:
        ratings = judgments.ratings_of(collection, set_name)
        consensus = judgments.qrels(collection, set_name)
        queries = judgments.queries(collection, set_name)
    except Exception as exc:
        views.show_error(exc)
        return
    left, middle, right = st.columns(3)
    left.download_button("Ratings (CSV, every rater)", format_ratings_csv(ratings), file_name=f"{set_name}-ratings.csv",
                         mime="text/csv", key="judge.export_csv",
                         help="query, doc, grade, rater per line; 'can't tell' has an empty grade.")
    middle.download_button("Quepid ratings (CSV)", format_quepid_csv(
        queries, [Rating(q, d, "quepid", g) for q, docs in consensus.items() for d, g in docs.items()]),
        file_name=f"{set_name}-quepid.csv", mime="text/csv", key="judge.export_quepid",
        help="Quepid's ratings import format: one grade per query text and document (the consensus).")
    right.download_button("TREC qrels (consensus)", judgments.export_qrels(collection, set_name, "trec"),
                          file_name=f"{set_name}.qrels", mime="text/plain", key="judge.export_trec")
    with st.form("judge.import", clear_on_submit=True):
        upload = st.file_uploader("Import ratings", type=["csv", "txt", "qrels", "tsv"], key="judge.import_file",
                                  help="A CSV with columns query, doc, grade, rater (as exported here), Quepid's "
                                       "ratings CSV (query text, doc id, rating), or TREC qrels.")
        fmt = st.radio("Format", ("csv", "quepid", "trec"), horizontal=True, key="judge.import_format")
        replace = st.checkbox("Replace the set's ratings", key="judge.import_replace")
        if st.form_submit_button("Import") and upload is not None:
            try:
                saved = import_ratings(judgments, collection, set_name, upload.name, upload.getvalue(), fmt, replace)
                st.success(f"Imported {saved} ratings.")
            except Exception as exc:
                views.show_error(exc)


def import_ratings(judgments, collection: str, set_name: str, filename: str, data: bytes, fmt: str,
                   replace: bool) -> int:
    """Read a ratings file of format `fmt` and save it into the set (`JudgmentStore.save_ratings`)."""
    from retrieval.judging.judgments import read_qrels_file
    from retrieval.judging.qrels import parse_quepid_csv, parse_ratings_csv
    from retrieval.judging.raters import Rating
    from retrieval.text.encoding import decode_bytes

    queries = None
    if fmt == "trec":
        qrels = read_qrels_file((filename, data))
        ratings = [Rating(q, d, UNNAMED, g) for q, docs in qrels.items() for d, g in docs.items()]
    elif fmt == "csv":
        ratings = parse_ratings_csv(decode_bytes(data)[0], default_rater=UNNAMED)
    else:
        known = judgments.queries(collection, set_name) if set_name in judgments.query_sets(collection) else {}
        queries, ratings = parse_quepid_csv(decode_bytes(data)[0], {t: q for q, t in known.items()})
    return judgments.save_ratings(collection, set_name, ratings, queries=queries, replace=replace)


# ---- the LLM judge ----------------------------------------------------------------------------
@dataclass
class LLMBackground:
    """An LLM run in a thread of its own: the page polls it, Stop sets `stop`."""

    thread: threading.Thread
    stop: threading.Event
    done: int = 0
    total: int = 0
    result: object = None
    error: str = ""


def llm_section(workbench, collection: str, set_name: str) -> None:
    from retrieval.judging.llm_judge import UMBRELA_PROMPT, LLMSettings, load_settings, save_settings

    st.caption("Off until you set it up: an OpenAI-compatible server (Ollama, vLLM, llama.cpp's server, or a hosted "
               "one) judges the Judge tab's queue as the rater 'llm:<model>'. Its agreement with the people is shown "
               "below before you count it; the Evaluate page computes metrics with or without it.")
    try:
        saved = load_settings(workbench.store) or LLMSettings(base_url="", model="")
    except Exception as exc:
        views.show_error(exc)
        return
    with st.form("judge.llm_settings"):
        base_url = st.text_input("Base URL", value=saved.base_url, placeholder="http://127.0.0.1:11434/v1")
        model = st.text_input("Model", value=saved.model, placeholder="qwen2.5:7b-instruct")
        key_env = st.text_input("Environment variable holding the key", value=saved.api_key_env,
                                help="Its NAME, ending in _API_KEY, e.g. OPENAI_API_KEY; the key itself is never "
                                     "stored. Empty for a "
                                     "local server without a key.")
        concurrency = st.number_input("Requests at once", 1, 32, value=saved.concurrency)
        prompt = st.text_area("Prompt template", value=saved.prompt or UMBRELA_PROMPT, height=220,
                              help="{query} and {passage} are filled in ({need}: the query's information need); the "
                                   "answer must end with a grade 0–3. Default: UMBRELA (Upadhyay et al. 2024).")
        if st.form_submit_button("Save settings"):
            try:
                settings = dataclasses.replace(saved, base_url=base_url.strip(), model=model.strip(),
                                               api_key_env=key_env.strip(), concurrency=int(concurrency), prompt=prompt)
                settings.validate()
                save_settings(workbench.store, settings)
                saved = settings
                st.success("Saved.")
            except Exception as exc:
                views.show_error(exc)
    llm_run_panel(workbench, collection, set_name, saved)
    llm_agreement(workbench, collection, set_name)


def llm_run_panel(workbench, collection: str, set_name: str, settings) -> None:
    from retrieval.judging.llm_judge import estimate, queue_items

    running = st.session_state.get(LLM_RUN_KEY)
    if running is not None and running.thread.is_alive():
        llm_progress()
        return
    if running is not None:
        llm_finished(running)
    try:
        settings.validate()
    except RetrievalError as exc:
        st.info(views.markdown_safe(str(exc)))
        return
    selection, names = st.session_state.get("judge.selection", NEXT), st.session_state.get("judge.configs",
                                                                                           [CONFIG_A, CONFIG_B])
    budget = st.session_state.get("judge.budget", 100)
    try:
        queue = full_queue(workbench, collection, set_name, selection, names)[:budget]
        pairs = [(c.query_id, c.doc_id) for c in queue]
        items = queue_items(workbench, collection, set_name, pairs, settings)
        guess = estimate(items, settings)
    except Exception as exc:
        views.show_error(exc)
        return
    st.caption(views.markdown_safe(guess.sentence()))
    if st.button("Judge the queue with the LLM", key="judge.llm_start", disabled=not items):
        start_llm(workbench, collection, set_name, pairs, settings)
        st.rerun()


def start_llm(workbench, collection: str, set_name: str, pairs: list, settings) -> None:
    from retrieval.judging.llm_judge import judge_queue

    stop = threading.Event()

    def work() -> None:
        try:
            run.result = judge_queue(workbench, collection, set_name, pairs, settings, stop=stop, progress=progress)
        except Exception as exc:  # shown by the page when it polls
            run.error = str(exc) if isinstance(exc, RetrievalError) else f"{type(exc).__name__}: {exc}"

    def progress(done: int, total: int) -> None:
        run.done, run.total = done, total

    run = LLMBackground(threading.Thread(target=work, daemon=True, name="llm-judge"), stop)
    st.session_state[LLM_RUN_KEY] = run
    run.thread.start()


@st.fragment(run_every=1.0)
def llm_progress() -> None:
    run = st.session_state.get(LLM_RUN_KEY)
    if run is None:
        return
    if not run.thread.is_alive():
        st.rerun()  # the whole page: the finished run's result and the fresh ratings
    st.progress(run.done / run.total if run.total else 0.0, text=f"LLM judging: {run.done} of {run.total or '…'}")
    if st.button("Stop", key="judge.llm_stop", help="Stops sending; every answer so far is saved."):
        run.stop.set()


def llm_finished(run: LLMBackground) -> None:
    if run.error:
        views.show_error(run.error)
    elif run.result is not None:
        st.success(views.markdown_safe(run.result.sentence()))


def llm_agreement(workbench, collection: str, set_name: str) -> None:
    try:
        ratings = workbench.judgments.ratings_of(collection, set_name)
    except Exception as exc:
        views.show_error(exc)
        return
    pairs = [p for p in agreement(ratings).pairs if is_llm_rater(p.raters[0]) != is_llm_rater(p.raters[1])]
    if not pairs:
        return
    st.subheader("The LLM against the people")
    st.dataframe([{"LLM": next(r for r in p.raters if is_llm_rater(r)),
                   "person": rater_label(next(r for r in p.raters if not is_llm_rater(r))),
                   "documents both graded": p.n, "Cohen's κ": p.cohen_kappa, "weighted κ": p.weighted_kappa}
                  for p in pairs], hide_index=True, use_container_width=True)
