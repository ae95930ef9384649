"""Query-term highlighting: which spans of a text match the query, a snippet around the best
match, and safe HTML for both.

Matching uses the BM25 analyser (`retrieval.text.tokenize.tokenize`) on both sides, word by word, so a
span is highlighted exactly when BM25 would count it as a query term: "running" in the query
highlights "runs" (both stem to "run"), stopwords highlight nothing, and Chinese is compared by
the jieba segments of each run of Han characters (the segments the index holds).

Rendering: `to_html` escapes every character of the user's text with `html.escape` and adds
only its own `<mark>` tags, so a document holding `<script>…</script>` shows those characters
literally. The HTML is meant for `st.html` (no Markdown pass); for Markdown contexts such as
widget labels use `escape_markdown`.
"""

from __future__ import annotations

import html
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

from retrieval.text.tokenize import SEGMENT_RE, segment_han, tokenize

_SPACE_RE = re.compile(r"\s")
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>~$:=^&])")


@dataclass(frozen=True)
class Span:
    """text[start:end] matched; `term` is the analysed query term it matched (e.g. 'run')."""

    start: int
    end: int
    term: str


@dataclass(frozen=True)
class Snippet:
    """A window text[start:end] of the original text, whitespace flattened to spaces, with the
    spans inside it (offsets relative to the window) and whether text was cut on either side."""

    text: str
    spans: tuple[Span, ...]
    start: int
    end: int

    @property
    def cut_left(self) -> bool:
        return self.start > 0

    def plain(self, total_length: int) -> str:
        """The snippet as plain text with '…' where it was cut."""
        return ("…" if self.cut_left else "") + self.text + ("…" if self.end < total_length else "")


def query_terms(query: str) -> frozenset[str]:
    """The analysed terms of a query, as BM25 sees them."""
    return frozenset(tokenize(query))


def match_spans(text: str, query: str | Iterable[str]) -> list[Span]:
    """Spans of `text` whose analysed form is a query term, in text order, non-overlapping.

    `query` is the query string, or its already analysed terms (e.g. from `query_terms`).
    """
    terms = query_terms(query) if isinstance(query, str) else frozenset(query)
    if not terms or not text:
        return []
    spans: list[Span] = []
    for match in SEGMENT_RE.finditer(text):
        if match.group("han") is not None:
            spans.extend(_han_spans(match.group("han"), match.start(), terms))
            continue
        for token in tokenize(match.group("word")):
            if token in terms:
                spans.append(Span(match.start(), match.end(), token))
                break
    return spans


def _han_spans(run: str, offset: int, terms: frozenset[str]) -> list[Span]:
    """Spans of the jieba segments of a Han run that are query terms.

    jieba's segmentation of a pure Han run (`segment_han`, what `tokenize` filters) is a partition
    of the run, so the segments' positions follow from their lengths (NFKC keeps Han characters
    one for one); a function word is a segment but never a query term.
    """
    segments = segment_han(unicodedata.normalize("NFKC", run))
    normalized = unicodedata.normalize("NFKC", run)
    if "".join(segments) != normalized or len(normalized) != len(run):
        return []  # not a clean partition: better no highlight than a misplaced one
    spans = []
    position = offset
    for segment in segments:
        if segment in terms:
            spans.append(Span(position, position + len(segment), segment))
        position += len(segment)
    return spans


def snippet(text: str, query: str | Iterable[str], width: int = 240, spans: list[Span] | None = None) -> Snippet:
    """A window of about `width` characters around the best match.

    The best window is the one holding the most distinct query terms (then the most matches,
    then the earliest); it starts a quarter of the width before its first match and is moved to
    a word boundary when one is near. Text shorter than `width` is returned whole. Whitespace is
    flattened to single spaces one for one, so offsets keep pointing into the original text.
    """
    if width < 1:
        raise ValueError(f"width must be ≥ 1, got {width}")
    if spans is None:
        spans = match_spans(text, query)
    if len(text) <= width:
        start, end = 0, len(text)
    else:
        start = _best_start(text, spans, width)
        end = min(len(text), start + width)
        start, end = _snap(text, start, end)
    inside = tuple(Span(s.start - start, s.end - start, s.term) for s in spans if s.start >= start and s.end <= end)
    return Snippet(_SPACE_RE.sub(" ", text[start:end]), inside, start, end)


def _best_start(text: str, spans: list[Span], width: int) -> int:
    if not spans:
        return 0
    lead = width // 4
    best_key, best_start = None, 0
    for i, first in enumerate(spans):
        start = max(0, min(first.start - lead, len(text) - width))
        end = start + width
        inside = [s for s in spans[i:] if s.end <= end]
        key = (len({s.term for s in inside}), len(inside))
        if best_key is None or key > best_key:
            best_key, best_start = key, start
    return best_start


def _snap(text: str, start: int, end: int, reach: int = 20) -> tuple[int, int]:
    """Move a cut start forward to just after a space, and a cut end back to a space, if near."""
    if start > 0 and not text[start - 1].isspace():
        space = text.find(" ", start, min(end, start + reach))
        if space != -1:
            start = space + 1
    if end < len(text) and not text[end].isspace():
        space = text.rfind(" ", max(start, end - reach), end)
        if space != -1:
            end = space
    return start, end


def to_html(text: str, spans: Iterable[Span], tag: str = "mark") -> str:
    """`text` HTML-escaped, with each span wrapped in <tag>…</tag> (overlapping spans merged)."""
    parts: list[str] = []
    position = 0
    for start, end in _merged(spans):
        start, end = max(start, position), min(end, len(text))
        if start >= end:
            continue
        parts.append(html.escape(text[position:start]))
        parts.append(f"<{tag}>{html.escape(text[start:end])}</{tag}>")
        position = end
    parts.append(html.escape(text[position:]))
    return "".join(parts)


def snippet_html(text: str, query: str | Iterable[str], width: int = 240) -> str:
    """A highlighted snippet as escaped HTML, with '…' where the text was cut."""
    cut = snippet(text, query, width)
    body = to_html(cut.text, cut.spans)
    return ("…" if cut.cut_left else "") + body + ("…" if cut.end < len(text) else "")


def _merged(spans: Iterable[Span]) -> list[tuple[int, int]]:
    merged: list[tuple[int, int]] = []
    for span in sorted(spans, key=lambda s: (s.start, s.end)):
        if merged and span.start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], span.end))
        else:
            merged.append((span.start, span.end))
    return merged


def escape_markdown(text: str) -> str:
    """Backslash-escape Markdown (and Streamlit's :color[…] / $…$) syntax so text shows literally."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", _SPACE_RE.sub(" ", text))
