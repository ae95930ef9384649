"""Collection names: the safe table name a collection is stored under, and the display name a
user gave it (any script).

A table name (`TABLE_NAME_RE`, also `store.COLLECTION_NAME_RE`: 1–64 of a–z, 0–9, '_', '-', starting with a letter or
digit) names LanceDB tables, lock files and journals, so nothing else may be in it. A display
name is what the user typed — `中文集合`, `My Notes` — and what every front end shows:

* a display name is the text stripped of surrounding white space and put in Unicode NFC form,
  1–64 characters long, with no control characters (category Cc), line or paragraph
  separators (Zl, Zp) or lone surrogates (Cs);
* a display name that is itself a valid table name is its own table name;
* any other gets a derived table name (`table_name_for`): its ASCII slug when it has letters
  or digits from a–z / 0–9, else ``"c-"`` + the first 8 hex digits of the SHA-1 of its UTF-8
  bytes; ``-2``, ``-3`` … appended while the name is taken.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

from retrieval.types import RetrievalError

MAX_DISPLAY_CHARS = 64
_REFUSED_CATEGORIES = {"Cc": "a control character", "Cs": "a lone surrogate", "Zl": "a line separator",
                       "Zp": "a paragraph separator"}
TABLE_NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")  # fullmatch: no trailing newline
_SLUG_CHARS = 56  # room for a "-NNN" suffix within 64


def display_name(text: object) -> str:
    """`text` as a display name: stripped, NFC, 1–64 characters, no control characters.
    A clear `RetrievalError` otherwise (naming the first offending character)."""
    if not isinstance(text, str):
        raise RetrievalError(f"A collection name must be text, got {type(text).__name__}")
    name = unicodedata.normalize("NFC", text.strip())
    if not name:
        raise RetrievalError("Give the collection a name (1–64 characters, any script)")
    if len(name) > MAX_DISPLAY_CHARS:
        raise RetrievalError(f"Collection name is {len(name)} characters long; use 1–{MAX_DISPLAY_CHARS}")
    for position, char in enumerate(name, start=1):
        what = _REFUSED_CATEGORIES.get(unicodedata.category(char))
        if what:
            raise RetrievalError(f"Collection name contains {what} (U+{ord(char):04X}, character {position}); "
                                 "use printable characters only")
    return name


def is_table_name(name: str) -> bool:
    """Whether `name` is a valid safe table name as it is."""
    return isinstance(name, str) and TABLE_NAME_RE.fullmatch(name) is not None


def slug(name: str) -> str:
    """The ASCII slug of a display name: NFKD, accents dropped, lowercased, every run of other
    characters one '-', no leading or trailing '-', at most 56 characters; '' when nothing of
    a–z / 0–9 is left. "Café Notes (2024)" → "cafe-notes-2024"."""
    ascii_text = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode().lower()
    return re.sub(r"[^a-z0-9]+", "-", ascii_text).strip("-")[:_SLUG_CHARS].strip("-")


def hashed(name: str) -> str:
    """"c-" + the first 8 hex digits of SHA-1(UTF-8 of the name): stable across processes."""
    return "c-" + hashlib.sha1(name.encode("utf-8")).hexdigest()[:8]


def table_name_for(name: str, taken: set[str]) -> str:
    """The safe table name of a new collection whose display name is `name` (already checked by
    `display_name`): the name itself when it is a valid table name; else its slug, or the
    hashed form when the slug is empty; then the first of base, base-2, base-3 … not in `taken`."""
    if is_table_name(name):
        return name
    base = slug(name) or hashed(name)
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{base}-{n}"
    return candidate


def labels(display_names: dict[str, str]) -> dict[str, str]:
    """What to show for each collection (table name → display name): its display name, and
    "display (table)" when two collections would otherwise read the same (the same display
    name, or a display name equal to another collection's table name)."""
    counts: dict[str, int] = {}
    for display in display_names.values():
        counts[display] = counts.get(display, 0) + 1
    out = {}
    for table, display in display_names.items():
        clash = counts[display] > 1 or (display != table and display in display_names)
        out[table] = f"{display} ({table})" if clash else display
    return out
