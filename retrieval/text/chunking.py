"""Split Markdown into heading-titled chunks and plain text into paragraphs, keeping line numbers.

Line numbers are 1-based and inclusive, and refer to the original input: "\\n", "\\r\\n" and "\\r"
each end a line (as in an editor; form feeds and Unicode separators do not). A chunk's text joins
its lines with "\\n".

Markdown rules (`chunk_markdown`):

- A section starts at an ATX heading of level 1 or 2: a line `# Title` or `## Title` (up to three
  spaces of indentation; a closing `#` sequence is dropped). `###` and deeper headings stay inside
  their section, as does `#tag` (no space). Lines in fenced code blocks (``` or ~~~, closed by a
  fence of the same character at least as long, or by the end of the file) are never headings.
- The heading text becomes the title of every chunk of its section; text before the first
  heading is titled with the document title, or the source id (the file stem) when there is none.
- A chunk's text never includes its heading line: it is exactly the original lines
  `start_line..end_line` joined by "\\n", with no blank line at either edge. (The one exception is a
  hard cut, below, whose text is a slice of one line.)
- A section with no non-blank line under its heading yields no chunk.
- A section longer than `max_chars` is split, each level used only where the previous one cannot
  make pieces small enough:
  1. into runs of whole paragraphs (separated by blank lines; a blank line inside a fenced block
     separates nothing), each run as long as fits;
  2. a paragraph longer than `max_chars` on its own is split, by itself, into runs of whole lines;
  3. a line longer than `max_chars` is hard-cut into slices of `max_chars` characters, each with
     `start_line == end_line` == that line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from retrieval.types import Document

_LINE_BREAK = re.compile(r"\r\n|\r|\n")
_HEADING = re.compile(r" {0,3}#{1,2}(?:[ \t]+(.*?))?[ \t]*")
_CLOSING_HASHES = re.compile(r"(?:^|[ \t]+)#+$")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")

Span = tuple[int, int]  # first and last line index (0-based, inclusive)
Piece = tuple[int, int, str]  # first and last line index, text


@dataclass(frozen=True)
class _Lines:
    """The lines of a text, with O(1) length of any run of lines joined by "\\n"."""

    lines: list[str]
    offsets: list[int]  # offsets[i]: characters before line i, one per line break

    @classmethod
    def of(cls, text: str) -> _Lines:
        lines = _LINE_BREAK.split(text)
        offsets = [0]
        for line in lines:
            offsets.append(offsets[-1] + len(line) + 1)
        return cls(lines, offsets)

    def length(self, span: Span) -> int:
        first, last = span
        return self.offsets[last + 1] - self.offsets[first] - 1

    def text(self, span: Span) -> str:
        first, last = span
        return "\n".join(self.lines[first : last + 1])


def chunk_markdown(text: str, source_id: str, max_chars: int = 1500, title: str = "") -> list[Document]:
    """Chunk Markdown by `#`/`##` headings, splitting sections longer than `max_chars` (see module doc).

    Each chunk is a Document with id f"{source_id}#{chunk_index}", parent_id `source_id`,
    chunk_index 0-based and consecutive over the whole text, and 1-based inclusive line numbers.
    """
    if max_chars < 1:
        raise ValueError(f"max_chars must be ≥ 1, got {max_chars}")
    doc = _Lines.of(text)
    fenced = _fenced_lines(doc.lines)
    chunks: list[Document] = []
    for section_title, first, last in _sections(doc.lines, fenced, title or source_id):
        paragraphs = _paragraphs(doc.lines, fenced, first, last)
        for start, end, piece in _split_paragraphs_to_fit(doc, paragraphs, max_chars):
            index = len(chunks)
            chunks.append(
                Document(
                    id=f"{source_id}#{index}",
                    text=piece,
                    title=section_title,
                    parent_id=source_id,
                    chunk_index=index,
                    start_line=start + 1,
                    end_line=end + 1,
                )
            )
    return chunks


def split_paragraphs(text: str) -> list[tuple[str, int, int]]:
    """Split plain text at blank (empty or whitespace-only) lines.

    Returns (paragraph, start_line, end_line) per paragraph, lines 1-based and inclusive; the
    paragraph is its original lines joined by "\\n".
    """
    doc = _Lines.of(text)
    spans = _paragraphs(doc.lines, [False] * len(doc.lines), 0, len(doc.lines) - 1)
    return [(doc.text(span), span[0] + 1, span[1] + 1) for span in spans]


def _heading_text(line: str) -> str | None:
    """The text of a level-1/2 ATX heading line, or None when the line is not one."""
    match = _HEADING.fullmatch(line)
    if match is None:
        return None
    return _CLOSING_HASHES.sub("", match.group(1) or "").strip()


def _fenced_lines(lines: list[str]) -> list[bool]:
    """Per line: whether it belongs to a fenced code block (its fence lines included)."""
    flags = []
    open_fence: str | None = None
    for line in lines:
        match = _FENCE.fullmatch(line)
        if open_fence is None:
            fence, info = match.groups() if match else ("", "")
            # A backtick fence's info string cannot hold a backtick (``` a ``` is inline code).
            if match and not (fence[0] == "`" and "`" in info):
                open_fence = fence
            flags.append(open_fence is not None)
            continue
        flags.append(True)
        if (match and match.group(1)[0] == open_fence[0] and len(match.group(1)) >= len(open_fence)
                and not match.group(2).strip()):
            open_fence = None
    return flags


def _sections(lines: list[str], fenced: list[bool], default_title: str) -> list[tuple[str, int, int]]:
    """(title, first body line, last body line) per section, heading lines excluded."""
    sections = []
    title, first = default_title, 0
    for index, line in enumerate(lines):
        heading = None if fenced[index] else _heading_text(line)
        if heading is not None:
            sections.append((title, first, index - 1))
            title, first = heading or default_title, index + 1
    sections.append((title, first, len(lines) - 1))
    return sections


def _paragraphs(lines: list[str], fenced: list[bool], first: int, last: int) -> list[Span]:
    """Spans of the paragraphs in lines first..last, trimmed to their first and last non-blank line."""
    spans = []
    start: int | None = None
    for index in range(first, last + 2):
        separator = index > last or (not lines[index].strip() and not fenced[index])
        if separator and start is not None:
            spans.append(_trim(lines, (start, index - 1)))
            start = None
        elif not separator and start is None:
            start = index
    return [span for span in spans if span[0] <= span[1]]


def _trim(lines: list[str], span: Span) -> Span:
    first, last = span
    while first <= last and not lines[first].strip():
        first += 1
    while last >= first and not lines[last].strip():
        last -= 1
    return first, last


def _split_paragraphs_to_fit(doc: _Lines, paragraphs: list[Span], max_chars: int) -> list[Piece]:
    def split_paragraph(span: Span) -> list[Piece]:
        nonblank = [(i, i) for i in range(span[0], span[1] + 1) if doc.lines[i].strip()]
        return _pack_or_split(doc, nonblank, max_chars, lambda line: _hard_cut(doc, line[0], max_chars))

    return _pack_or_split(doc, paragraphs, max_chars, split_paragraph)


def _pack_or_split(
    doc: _Lines, units: list[Span], max_chars: int, split: Callable[[Span], list[Piece]]
) -> list[Piece]:
    """Greedily join consecutive units that fit into runs ≤ max_chars; `split` each unit that does not.

    An oversized unit is split on its own, so a run never starts or ends inside it.
    """
    pieces: list[Piece] = []
    runs: list[Span] = []
    for unit in units:
        if doc.length(unit) > max_chars:
            pieces += [(*run, doc.text(run)) for run in runs] + split(unit)
            runs = []
        elif runs and doc.length((runs[-1][0], unit[1])) <= max_chars:
            runs[-1] = (runs[-1][0], unit[1])
        else:
            runs.append(unit)
    return pieces + [(*run, doc.text(run)) for run in runs]


def _hard_cut(doc: _Lines, index: int, max_chars: int) -> list[Piece]:
    line = doc.lines[index]
    slices = (line[start : start + max_chars] for start in range(0, len(line), max_chars))
    return [(index, index, piece) for piece in slices if piece.strip()]
