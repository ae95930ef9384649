"""Hardened inputs without Streamlit running: model names from links, user text in plotly
figures and Markdown, bounded cards, upload limits and the parse-once preview cache.
See docs/reliability.md, "Hardened inputs and limits"."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from retrieval import limits
from retrieval.models.embed import MINILM
from retrieval.search.workbench import Workbench
from retrieval.store import Store
from retrieval.text.highlight import Span
from retrieval.types import Document, FusedResult, ParsedCorpus, RetrievalError, SourceContribution
from ui import state
from ui.corpus import actions as corpus
from ui.evaluate import charts as eval_charts
from ui.graph import charts as graph_charts
from ui.search import charts, views
from ui.search.results import ResultRow

EVIL_FILE = "[Click me](https:evil.example) ![t](https:evil.example).csv"
EVIL_SOURCE = "<b>x</b><a href='https:evil.example'>y</a><img src=x>%{y}"


# ---- models named by a link ----------------------------------------------------------------
@pytest.fixture
def model_dirs(tmp_path, monkeypatch) -> Path:
    allowed = tmp_path / "models"
    (allowed / "ce").mkdir(parents=True)
    monkeypatch.setenv(limits.MODEL_DIRS_ENV, str(allowed))
    return allowed


def test_a_link_cannot_name_a_reranker_outside_the_allowed_folders(monkeypatch):
    monkeypatch.delenv(limits.MODEL_DIRS_ENV, raising=False)
    answers = set()
    for name in ("/etc", "/etc/passwd", "/nonexistent/model", "~/models", "cross-encoder/ms-marco-MiniLM-L6-v2",
                 "../models", "e5\n"):
        view = state.view_from_params({"reranker": name})
        assert view.config_a.reranker == "e5"  # the default stays
        [notice] = view.notices
        assert "not allowed from the browser" in notice and "WORKBENCH_MODEL_DIRS" in notice
        answers.add(notice.replace(repr(name), "NAME"))
    # the same answer whether the path exists or not: it tells nothing about the server's files
    assert len(answers) == 1
    assert state.view_from_params({"reranker": "e5"}).notices == []


def test_folders_inside_workbench_model_dirs_are_allowed_and_nothing_else(model_dirs):
    inside = str(model_dirs / "ce")
    assert state.view_from_params({"reranker": inside}).config_a.reranker == inside
    assert state.view_from_params({"b.reranker": str(model_dirs / "missing")}).notices == []
    for outside in (str(model_dirs / ".." / "other"), str(model_dirs.parent), "ce", "/etc"):
        view = state.view_from_params({"b.reranker": outside})
        assert view.config_b.reranker == "e5" and len(view.notices) == 1, outside
    link = model_dirs / "ce" / "escape"
    link.symlink_to("/etc")
    assert not limits.model_allowed(str(link), ())  # a symlink out of the folder is followed and refused


def test_the_browser_workbench_refuses_models_before_loading_them(tmp_path, monkeypatch):
    monkeypatch.delenv(limits.MODEL_DIRS_ENV, raising=False)
    workbench = Workbench(Store(str(tmp_path / "db")))
    workbench.model_check = state.browser_model_check
    corpus_ = ParsedCorpus([Document(id="a", text="some text")])
    with pytest.raises(RetrievalError, match="Embedding model '/etc' is not allowed from the browser"):
        workbench.create("x", corpus_, model="/etc")
    assert not workbench.exists("x")
    result = SimpleNamespace(config=SimpleNamespace(reranker="/tmp"))
    with pytest.raises(RetrievalError, match="Reranker '/tmp' is not allowed from the browser"):
        workbench.apply_rerank(result)
    state.browser_model_check("embedding model", MINILM)  # built-ins pass
    state.browser_model_check("reranker", "e5")


def test_the_cli_workbench_still_takes_any_path(tmp_path):
    assert Workbench(Store(str(tmp_path / "db"))).model_check is None


# ---- user text in plotly figures -----------------------------------------------------------
def _figure_strings(fig) -> list[str]:
    out = []

    def walk(value):
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict):
            for item in value.values():
                walk(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk(item)

    walk(json.loads(fig.to_json()))
    return out


def _assert_literal(fig) -> None:
    for text in _figure_strings(fig):
        assert "<b>x" not in text and "<a " not in text and "<img" not in text, text
        assert "%{y}</" not in text


def test_source_names_in_every_figure_are_escaped():
    _assert_literal(charts.score_histograms({EVIL_SOURCE: [1.0, 2.0]}, {EVIL_SOURCE: [0.0, 1.0]},
                                            {EVIL_SOURCE: 1.5}, "minmax"))
    points = [{"id": EVIL_SOURCE, "title": EVIL_SOURCE, "x": 1, "y": None, "fused_rank": 1}]
    _assert_literal(charts.rank_scatter(points, 10, x_source=EVIL_SOURCE, y_source="dense"))
    metrics = {EVIL_SOURCE: {"ndcg@10": 0.5}, "hybrid": {"ndcg@10": 0.6}}
    fig = eval_charts.metrics_chart(metrics, ["ndcg@10"])
    _assert_literal(fig)
    assert "&#37;{y}" in fig.data[0].hovertemplate  # a '%{y}' in a name is not a placeholder
    rows = [{"fusion": "rrf", "weight": 0.5, "rrf_k": 60, "ndcg@10": 0.5}]
    _assert_literal(eval_charts.sweep_heatmap(rows, weight_name=EVIL_SOURCE))
    _assert_literal(eval_charts.importance_chart({f"{EVIL_SOURCE} weight": 1.0}, EVIL_SOURCE))
    _assert_literal(eval_charts.delta_chart({EVIL_SOURCE: 0.1}, {EVIL_SOURCE: EVIL_SOURCE}))


def test_graph_titles_are_cut_before_escaping():
    trace = [SimpleNamespace(hop=0, entities=[("person", "x")], events=["e1"],
                             edges=[("query", ("person", "x"), "e1")])]
    info = {"e1": {"title": "a" * 20 + "<b>bold</b>", "score": 0.5, "hop": 0, "completed": False}}
    fig = graph_charts.activation_network(trace, 0, info, {("person", "x"): EVIL_SOURCE})
    _assert_literal(fig)
    events = next(t for t in fig.data if t.customdata is not None and "e1" in list(t.customdata))
    assert events.text[0] == "a" * 20 + "&lt;b&gt;b"  # 24 characters of the title, then escaped: no broken entity


# ---- user text in Markdown -----------------------------------------------------------------
def test_markdown_safe_leaves_no_live_link_or_image():
    safe = views.markdown_safe(f"Preview of {EVIL_FILE}")
    assert not re.search(r"(?<!\\)\]\(", safe) and not re.search(r"(?<!\\)!\[", safe)
    assert re.sub(r"\\(.)", r"\1", safe) == f"Preview of {EVIL_FILE}"  # the reader sees the name as it is


def test_bold_user_text_is_bold_and_literal():
    """The Judge card's title and the snapshot diff's headings: `markdown_safe(f"**{t}**")`
    escaped the asterisks it meant to keep, so the page showed **…**. Rendered as CommonMark
    (markdown-it, what Streamlit's renderer follows)."""
    from markdown_it import MarkdownIt

    render = MarkdownIt().render
    assert render(views.bold("Tea *for* two [x](http://e) <b>")) == (
        "<p><strong>Tea *for* two [x](http://e) &lt;b&gt;</strong></p>\n")
    assert render(views.bold("  a title\nover two lines ")) == "<p><strong>a title over two lines</strong></p>\n"
    assert render(views.labelled("Information need:", "find *all* of it")) == (
        "<p><strong>Information need:</strong> find *all* of it</p>\n")
    assert views.bold("   ") == ""


# ---- bounded cards -------------------------------------------------------------------------
def _huge_row(n: int) -> ResultRow:
    text = ("quokka " * (n // 7 + 1))[:n]
    contribution = SourceContribution("bm25", 1.0, 1.0, 1, 1.0)
    fused = FusedResult("big", 1, 1.0, 1.0, {"bm25": contribution})
    document = {"title": "T" * 100_000, "text": text, "tokens": "quokka " * (n // 7),
                "metadata": {"blob": "m" * n}}
    return ResultRow(1, fused, None, document)


def test_a_huge_document_makes_a_bounded_card():
    row = _huge_row(5_000_000)
    assert row.cut and len(row.text) == limits.EXCERPT_CHARS and len(row.full_text) == 5_000_000
    assert len(row.title) == limits.TITLE_CHARS
    spans = [Span(0, 6, "quokka")]
    html = views.card_html(row, [], False, [], spans, False)
    assert len(html) < 6 * limits.EXCERPT_CHARS  # text, tokens and metadata excerpts: not 15 MB
    assert f"The first {limits.EXCERPT_CHARS:,} of 5,000,000 characters" in html
    small = _huge_row(100)
    assert not small.cut and "The first" not in views.card_html(small, [], False, [], [], False)


def test_limits_from_the_environment_fall_back_on_bad_values(monkeypatch):
    monkeypatch.setenv("X_LIMIT", "12")
    assert limits._env_int("X_LIMIT", 5, 1, 100) == 12
    for bad in ("", "ten", "0", "1e9", "-3"):
        monkeypatch.setenv("X_LIMIT", bad)
        assert limits._env_int("X_LIMIT", 5, 1, 100) == 5


# ---- uploads -------------------------------------------------------------------------------
CSV = b"id,text\na,Green tea is steamed.\nb,Coffee is roasted.\n"


def test_an_upload_is_parsed_once_per_content(monkeypatch):
    calls = []
    real = corpus.preview

    def counting(data, name, options, n_rows=5):
        calls.append(name)
        return real(data, name, options, n_rows=n_rows)

    monkeypatch.setattr(corpus, "preview", counting)
    monkeypatch.setattr(corpus, "PREVIEWS", type(corpus.PREVIEWS)(32))
    options = corpus.parse_options()
    for _ in range(3):  # three reruns of the Corpus page
        [p] = corpus.preview_files([("notes.csv", CSV)], options)
        assert p.columns == ["id", "text"] and p.error is None
    assert calls == ["notes.csv"]
    corpus.preview_files([("notes.csv", CSV + b"c,Cocoa.\n")], options)  # new content: parsed again
    corpus.preview_files([("notes.csv", CSV)], corpus.parse_options(text_mode="file"))  # other options too
    assert calls == ["notes.csv"] * 3


def test_uploads_over_the_limits_are_refused_with_the_limit_named(monkeypatch, tmp_path):
    monkeypatch.setattr(corpus, "PREVIEWS", type(corpus.PREVIEWS)(32))
    monkeypatch.setattr(limits, "MAX_FILE_MB", 1)
    big = b"id,text\n" + b"a,x\n" * (limits.MB // 4 + 1)
    [p] = corpus.preview_files([("big.csv", big)], corpus.parse_options())
    assert p.error and "at most 1 MB (WORKBENCH_MAX_FILE_MB)" in p.error and p.rows == []
    workbench = Workbench(Store(str(tmp_path / "db")))
    with pytest.raises(RetrievalError, match="WORKBENCH_MAX_FILE_MB"):
        corpus.ingest(workbench, [("big.csv", big)], corpus.parse_options(), "big")
    monkeypatch.setattr(limits, "MAX_FILE_MB", 10)
    monkeypatch.setattr(limits, "MAX_UPLOAD_MB", 1)
    with pytest.raises(RetrievalError, match="one ingest reads at most 1 MB"):
        corpus.ingest(workbench, [("a.csv", big[: limits.MB]), ("b.csv", big[: limits.MB])],
                      corpus.parse_options(), "big")
    assert not workbench.exists("big")


def test_the_ingest_bar_shows_documents_per_second_and_time_left():
    times = iter([0.0, 4.0, 10.0, 12.0])
    stages = corpus.StageProgress(clock=lambda: next(times))
    assert stages("tokenising", 1, 400) == (0.0025, "Tokenising: 1 of 400 documents")
    assert stages("tokenising", 201, 400) == (0.5025, "Tokenising: 201 of 400 documents · 50.2 docs/s · about 4 s left")
    assert stages("embedding", 0, 400) == (0.0, "Embedding: 0 of 400 documents")  # a new stage: a new rate
    assert stages("embedding", 100, 400) == (0.25, "Embedding: 100 of 400 documents · 50.0 docs/s · about 6 s left")
    assert stages("loading the embedding models", 0, 0) == (0.0, "Loading the embedding models…")  # nothing to count
    assert "python -m retrieval ingest PATH --collection NAME" in corpus.LARGE_FILES_HINT
