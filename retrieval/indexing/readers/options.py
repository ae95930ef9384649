"""How a file is read: `ParseOptions` and its `ColumnMapping`. What each option does is said where it
applies: the formats in `readers.formats`, the columns and `skip_invalid` in `readers.documents`."""

from __future__ import annotations

from dataclasses import dataclass

from retrieval.types import IngestError

TEXT_MODES = ("paragraphs", "file")


@dataclass(frozen=True)
class ColumnMapping:
    """Which input column holds the id, title and text; None: detect it (see `readers.documents`)."""

    id: str | None = None
    title: str | None = None
    text: str | None = None


@dataclass(frozen=True)
class ParseOptions:
    """How to read input. Frozen, so it can be a default argument and part of a cache key."""

    mapping: ColumnMapping = ColumnMapping()
    text_mode: str = "paragraphs"  # .txt only: "paragraphs" or "file"
    markdown_max_chars: int = 1500
    json_key: str | None = None  # .json only: the key of the array of documents
    skip_invalid: bool = False  # leave out records with problems (listed) instead of loading nothing

    def __post_init__(self) -> None:
        problems = []
        if self.text_mode not in TEXT_MODES:
            problems.append(f"text_mode must be one of {TEXT_MODES}, got {self.text_mode!r}")
        if self.markdown_max_chars < 1:
            problems.append(f"markdown_max_chars must be ≥ 1, got {self.markdown_max_chars}")
        if problems:
            raise IngestError("Invalid parse options", problems)
