"""Query-term spans, snippets and the escaping of highlighted text."""

import pytest

from retrieval.text.highlight import Span, escape_markdown, match_spans, query_terms, snippet, snippet_html, to_html


def words(text, spans):
    return [text[s.start:s.end] for s in spans]


def test_stemmed_forms_match_each_other():
    text = "She runs daily; running is what a runner does. Ran yesterday."
    spans = match_spans(text, "running")
    # "running" and "runs" stem to "run"; "runner" and "ran" do not
    assert words(text, spans) == ["runs", "running"]
    assert {s.term for s in spans} == {"run"}


def test_case_and_full_width_letters_match():
    text = "PANTHERS and ｐａｎｔｈｅｒｓ"
    assert words(text, match_spans(text, "panthers")) == ["PANTHERS", "ｐａｎｔｈｅｒｓ"]


def test_stopwords_highlight_nothing():
    assert match_spans("the cat and the dog", "the and") == []
    assert query_terms("the and of") == frozenset()


def test_chinese_matches_jieba_segments():
    text = "知识图谱是一种知识表示方法。"
    spans = match_spans(text, "知识图谱")
    assert words(text, spans) == ["知识", "图谱", "知识"]
    assert all(text[s.start:s.end] == s.term for s in spans)


def test_mixed_text_and_precomputed_terms():
    text = "Beyoncé 在 2003 年发行了专辑 Dangerously in Love。"
    terms = query_terms("Dangerously 专辑")
    assert words(text, match_spans(text, terms)) == ["专辑", "Dangerously"]


def test_snippet_window_centres_on_the_densest_match():
    filler = "lorem ipsum dolor sit amet " * 20
    text = filler + "the panthers defense was strong " + filler
    cut = snippet(text, "panthers defense", width=80)
    assert len(cut.text) <= 80
    assert "panthers defense" in cut.text
    assert [cut.text[s.start:s.end] for s in cut.spans] == ["panthers", "defense"]
    assert cut.start > 0 and cut.end < len(text)
    # offsets point into the original text
    assert text[cut.start:cut.end] == cut.text
    html = snippet_html(text, "panthers defense", width=80)
    assert html.startswith("…") and html.endswith("…")
    assert "<mark>panthers</mark> <mark>defense</mark>" in html


def test_short_text_is_whole_and_newlines_flatten():
    cut = snippet("one\ntwo three", "two")
    assert cut.text == "one two three"
    assert cut.start == 0 and cut.end == 13 and not cut.cut_left
    assert cut.plain(13) == "one two three"


def test_snippet_without_match_starts_at_the_beginning():
    text = "word " * 100
    cut = snippet(text, "absent", width=50)
    assert cut.start == 0 and cut.spans == ()


def test_script_and_markdown_are_shown_literally():
    text = "Runs <script>alert(1)</script> and **x** and <b>bold</b> & more"
    html = to_html(text, match_spans(text, "running alert"))
    assert "<script>" not in html and "<b>" not in html
    assert "&lt;script&gt;<mark>alert</mark>(1)&lt;/script&gt;" in html
    assert "**x**" in html  # st.html renders no Markdown: the asterisks stay
    assert html.startswith("<mark>Runs</mark> ")
    assert "&amp; more" in html
    # the only tags in the output are our own
    import re

    assert set(re.findall(r"</?([a-z]+)", html)) == {"mark"}


def test_overlapping_spans_merge():
    assert to_html("abcdef", [Span(0, 3, "x"), Span(2, 4, "y")]) == "<mark>abcd</mark>ef"


def test_escape_markdown():
    assert escape_markdown("**x** [a](b)") == r"\*\*x\*\* \[a\]\(b\)"
    assert escape_markdown(":red[y] $z$") == r"\:red\[y\] \$z\$"
    assert escape_markdown("a\nb") == "a b"


def test_bad_width():
    with pytest.raises(ValueError):
        snippet("x", "x", width=0)


def test_chinese_function_words_are_never_highlighted_content_words_still_are():
    text = "黑豹队的防守在比赛中丢了十分。"
    spans = match_spans(text, "黑豹队的防守丢了多少分？")
    assert [(text[s.start:s.end], s.term) for s in spans] == [
        ("黑豹", "黑豹"), ("队", "队"), ("防守", "防守"), ("丢", "丢")]
