"""Hardened inputs on the pages (AppTest): a file name with Markdown links, source names with
plotly markup from a link, model paths from a link or a text box, and a huge document's card.
See docs/reliability.md, "Hardened inputs and limits"."""

from __future__ import annotations

import json
import re

import pytest
from conftest import QUERY, open_page, plain

from retrieval.types import Document, ParsedCorpus

EVIL_FILE = "[Click me](https:evil.example) ![t](https:evil.example).csv"
EVIL_SOURCE = "<b>x</b>"
LIVE_MARKDOWN = re.compile(r"(?<!\\)\]\(|(?<!\\)!\[")  # an unescaped link or image


def markdown_texts(at) -> list[str]:
    """Every string the page renders through Markdown: text elements and widget/expander labels."""
    texts = []
    for kind in ("markdown", "caption", "info", "warning", "success", "error", "subheader", "title"):
        texts += [e.value for e in at.get(kind)]
    for kind in ("expander", "button", "checkbox", "selectbox", "text_input", "toggle", "slider"):
        texts += [getattr(e, "label", "") or "" for e in at.get(kind)]
    return texts


def test_a_file_name_with_markdown_links_is_shown_literally(app_db):
    at = open_page("pages/4_Corpus.py")
    at.file_uploader(key="corpus.files").set_value([(EVIL_FILE, b"id,text\na,Some text.\n", "text/csv")]).run()
    assert not at.exception, [e.value for e in at.exception]
    labels = [e.label for e in at.get("expander")]
    assert any(plain(label) == f"Preview of {EVIL_FILE}" for label in labels), labels
    for text in markdown_texts(at):
        assert not LIVE_MARKDOWN.search(text), text


def test_source_names_from_a_link_are_literal_in_figures_and_text(app_db):
    weights = f"bm25=0.5,dense=0.5,{EVIL_SOURCE}=0.5"
    at = open_page("pages/3_Distributions.py", q=QUERY, weights=weights)
    specs = [chart.proto.spec for chart in at.get("plotly_chart")]
    assert specs and all(EVIL_SOURCE not in spec for spec in specs)
    assert any("&lt;b&gt;x&lt;/b&gt;" in json.dumps(json.loads(spec)) for spec in specs)
    at = open_page("pages/1_Search.py", q=QUERY, weights=weights)
    assert not at.exception
    for text in markdown_texts(at):
        assert "<b>" not in text, text  # the source's note and timings are escaped
    assert any("\\<b\\>x\\</b\\>" in text for text in markdown_texts(at))


def test_a_link_naming_a_local_model_path_is_refused_with_a_notice(app_db, monkeypatch):
    monkeypatch.delenv("WORKBENCH_MODEL_DIRS", raising=False)
    at = open_page("pages/1_Search.py", q=QUERY, reranker="/etc")
    [notice] = [w.value for w in at.warning if "reranker" in plain(w.value).lower()]
    assert "not allowed from the browser" in plain(notice)
    assert at.text_input(key="a.reranker").value == "e5"


def test_a_typed_model_path_is_refused_before_any_load(app_db, monkeypatch):
    monkeypatch.delenv("WORKBENCH_MODEL_DIRS", raising=False)
    at = open_page("pages/1_Search.py", q=QUERY)
    at.text_input(key="a.reranker").set_value("/etc").run()
    at.toggle(key="a.rerank").set_value(True).run()
    errors = [plain(e.value) for e in at.error]
    assert any("Reranker '/etc' is not allowed from the browser" in e for e in errors), errors
    assert not any("folder exists" in e or "not a loadable" in e for e in errors)


@pytest.fixture
def long_collection(workbench):
    """'long-docs': one 60,000-character document among two short ones."""
    from retrieval.models.embed import E5

    text = "The quokka festival. " + "Lorem ipsum dolor sit amet. " * 2200
    docs = [Document(id="long", title="Long", text=text[:60_000]),
            Document(id="s1", text="A short note on quokka habits."),
            Document(id="s2", text="Tea and coffee.")]
    if not workbench.exists("long-docs"):
        workbench.create("long-docs", ParsedCorpus(docs), model=E5)
    return "long-docs"


def test_a_huge_document_shows_an_excerpt_and_its_full_text_on_demand(app_db, long_collection):
    from retrieval.limits import EXCERPT_CHARS

    at = open_page("pages/1_Search.py", collection=long_collection, q="quokka festival")
    card = next(h.value for h in at.get("html") if 'class="wb-card"' in h.value and "(long)" in h.value)
    assert len(card) < 4 * EXCERPT_CHARS
    assert f"The first {EXCERPT_CHARS:,} of 60,000 characters" in card
    [button] = [b for b in at.button if b.label.startswith("Full text")]
    assert button.label == "Full text (60,000 characters)"
    assert not [t for t in at.get("text") if len(t.value) == 60_000]  # not sent before the click
    button.click().run()
    assert [t for t in at.get("text") if len(t.value) == 60_000]
    at.slider(key="a.top_k").set_value(5).run()  # the next rerun sends the excerpt only again
    assert not [t for t in at.get("text") if len(t.value) == 60_000]


def test_a_link_with_deeply_nested_json_opens_the_page_with_a_notice(app_db):
    deep = "[" * 5_000 + "]" * 5_000  # raised RecursionError on every page of the session
    at = open_page("pages/1_Search.py", q=QUERY, filters=deep, query_weights='{"a":' * 3_000)
    assert not at.exception, [e.value for e in at.exception]
    notices = [plain(w.value) for w in at.warning]
    assert any("filters in the link is JSON nested more than 32 deep" in n for n in notices), notices
    assert any("query_weights in the link is JSON nested more than 32 deep" in n for n in notices), notices
