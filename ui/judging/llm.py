"""The LLM judge tab: any OpenAI-compatible endpoint judges the Judge tab's queue as a rater of
its own, in the background (the page stays usable; Stop keeps every answer so far); its agreement
with the people."""

from __future__ import annotations

import dataclasses
import threading
from dataclasses import dataclass

import streamlit as st

from retrieval.judging.raters import agreement, is_llm_rater
from retrieval.types import RetrievalError
from ui.judging.agreement import rater_label
from ui.judging.queue import CONFIG_A, CONFIG_B, NEXT, full_queue, judged_set
from ui.search import views

LLM_RUN_KEY = "judge.llm_run"


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
    from retrieval.judging.llm.settings import UMBRELA_PROMPT, LLMSettings, load_settings, save_settings

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
                # A link-local or metadata address is the operator's to allow (judge llm --allow-link-local),
                # never the browser's.
                settings = dataclasses.replace(saved, base_url=base_url.strip(), model=model.strip(),
                                               api_key_env=key_env.strip(), concurrency=int(concurrency), prompt=prompt,
                                               allow_link_local=False)
                settings.validate()
                save_settings(workbench.store, settings)
                saved = settings
                st.success("Saved.")
            except Exception as exc:
                views.show_error(exc)
    llm_run_panel(workbench, collection, set_name, saved)
    llm_agreement(workbench, collection, set_name)


def llm_run_panel(workbench, collection: str, set_name: str, settings) -> None:
    from retrieval.judging.llm.run import estimate, queue_items

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
        # the queue as the grading tab shows it: ordered given the judgments so far (its read)
        consensus = judged_set(workbench, collection, set_name)[3]
        queue = full_queue(workbench, collection, set_name, selection, names, consensus)[:budget]
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
    from retrieval.judging.llm.run import judge_queue

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
