import pytest

from retrieval.text.chunking import chunk_markdown, split_paragraphs
from retrieval.types import Document

# Line numbers matter below: line 1 is "Welcome…", line 3 "# Installation", line 27 the last.
HANDBOOK = """Welcome to the handbook.

# Installation

Run the installer.

## Configuration

```bash
# set the port
export PORT=8080
```

### Advanced
Edit config.toml.

## Empty section


## Troubleshooting ##

First paragraph about errors.
It has a second line.

Second paragraph.

Third paragraph, a longer one to force a split.
"""


def spans(chunks: list[Document]) -> list[tuple[str, str, int | None, int | None]]:
    return [(c.id, c.title, c.start_line, c.end_line) for c in chunks]


def test_handbook_sections_titles_and_lines():
    chunks = chunk_markdown(HANDBOOK, "handbook")

    assert spans(chunks) == [
        ("handbook#0", "handbook", 1, 1),  # before the first heading: titled with the source id
        ("handbook#1", "Installation", 5, 5),
        ("handbook#2", "Configuration", 9, 15),  # '# set the port' in the fence and '###' stay inside
        # '## Empty section' (lines 17-19) has no text and yields no chunk
        ("handbook#3", "Troubleshooting", 22, 27),  # closing '##' dropped from the title
    ]
    assert [c.text for c in chunks[:3]] == [
        "Welcome to the handbook.",
        "Run the installer.",
        "```bash\n# set the port\nexport PORT=8080\n```\n\n### Advanced\nEdit config.toml.",
    ]
    assert [(c.parent_id, c.chunk_index) for c in chunks] == [("handbook", i) for i in range(4)]


def test_long_section_splits_at_paragraphs_packing_as_many_as_fit():
    chunks = chunk_markdown(HANDBOOK, "handbook", max_chars=80)

    assert spans(chunks)[3:] == [
        ("handbook#3", "Troubleshooting", 22, 25),  # 51 + blank line + 17 characters = 70 ≤ 80
        ("handbook#4", "Troubleshooting", 27, 27),
    ]
    assert chunks[3].text == "First paragraph about errors.\nIt has a second line.\n\nSecond paragraph."
    assert chunks[4].text == "Third paragraph, a longer one to force a split."


def test_chunk_text_is_exactly_its_original_lines():
    lines = HANDBOOK.split("\n")
    for max_chars in (1500, 80, 50):
        for chunk in chunk_markdown("\n".join(lines), "h", max_chars=max_chars):
            assert chunk.text == "\n".join(lines[chunk.start_line - 1 : chunk.end_line])
            assert len(chunk.text) <= max_chars


def test_document_title_names_the_preamble():
    chunks = chunk_markdown("Intro.\n# A\nBody.", "notes", title="My Notes")
    assert [(c.title, c.text) for c in chunks] == [("My Notes", "Intro."), ("A", "Body.")]


def test_oversized_paragraph_splits_at_lines_on_its_own():
    text = "# T\nshort one\n\naaaa aaaa\nbbbb bbbb\ncccc cccc\n\nshort two"
    chunks = chunk_markdown(text, "d", max_chars=20)

    assert [(c.start_line, c.end_line, c.text) for c in chunks] == [
        (2, 2, "short one"),  # not merged with the oversized paragraph's first lines
        (4, 5, "aaaa aaaa\nbbbb bbbb"),
        (6, 6, "cccc cccc"),
        (8, 8, "short two"),
    ]
    assert {c.title for c in chunks} == {"T"}


def test_overlong_line_is_hard_cut():
    chunks = chunk_markdown("## Log\n" + "x" * 25, "log", max_chars=10)
    assert [(c.id, c.title, c.start_line, c.end_line, c.text) for c in chunks] == [
        ("log#0", "Log", 2, 2, "x" * 10),
        ("log#1", "Log", 2, 2, "x" * 10),
        ("log#2", "Log", 2, 2, "x" * 5),
    ]


def test_only_level_one_and_two_atx_headings_split():
    text = "#tag line\n### Deep\n  ## Indented two\n    # code, not a heading\n#\nafter empty heading"
    chunks = chunk_markdown(text, "doc")
    assert spans(chunks) == [
        ("doc#0", "doc", 1, 2),
        ("doc#1", "Indented two", 4, 4),
        ("doc#2", "doc", 6, 6),  # an empty heading falls back to the document title
    ]


def test_tilde_fences_and_longer_closing_fences():
    text = "# A\n~~~\n# in tilde fence\n```\n~~~~\n# B\nb"
    chunks = chunk_markdown(text, "doc")
    assert spans(chunks) == [("doc#0", "A", 2, 5), ("doc#1", "B", 7, 7)]


def test_unclosed_fence_runs_to_the_end():
    text = "# A\n```\n# not a heading\n\n## nor this"
    chunks = chunk_markdown(text, "doc")
    assert spans(chunks) == [("doc#0", "A", 2, 5)]


def test_blank_line_inside_a_fence_does_not_separate_paragraphs():
    text = "# A\n```\none\n\ntwo\n```\nafter"
    chunks = chunk_markdown(text, "doc", max_chars=30)
    assert [(c.start_line, c.end_line) for c in chunks] == [(2, 7)]


def test_crlf_and_cr_line_breaks_count_as_lines():
    chunks = chunk_markdown("# A\r\none\r\n\r\n# B\rtwo\r", "doc")
    assert [(c.title, c.start_line, c.end_line, c.text) for c in chunks] == [
        ("A", 2, 2, "one"),
        ("B", 5, 5, "two"),
    ]


def test_empty_and_heading_only_text_yield_nothing():
    assert chunk_markdown("", "doc") == []
    assert chunk_markdown("# A\n\n## B\n   \n", "doc") == []


def test_max_chars_must_be_positive():
    with pytest.raises(ValueError, match="max_chars"):
        chunk_markdown("text", "doc", max_chars=0)


def test_split_paragraphs_gives_text_and_lines():
    text = "\nFirst line\nsecond line\n  \n\nNext one\n"
    assert split_paragraphs(text) == [("First line\nsecond line", 2, 3), ("Next one", 6, 6)]
    assert split_paragraphs(" \n\n") == []
