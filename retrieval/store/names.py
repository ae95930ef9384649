"""Collection names: the safe table name a collection is stored under, and the display name a
user gave it (any script).

A table name (`TABLE_NAME_RE`, also `store.COLLECTION_NAME_RE`: 1–64 of a–z, 0–9, '_', '-', starting with a letter or
digit) names LanceDB tables, lock files and journals, so nothing else may be in it. A display
name is what the user typed — `中文集合`, `My Notes` — and what every front end shows:

* a display name is the text stripped of surrounding white space and put in Unicode NFKC form
  (full-width `Ｔｅａ` is `Tea`, a ligature its letters), 1–64 characters long, with no control
  characters (category Cc), line or paragraph separators (Zl, Zp), lone surrogates (Cs), nor
  invisible or bidirectional controls (Cf: zero-width spaces and joiners, RLO/LRO and the
  isolates, the BOM, the soft hyphen; and the invisible fillers `INVISIBLE`), which would make
  two names look the same or a name read backwards;
* a new name that looks like an existing one but is spelled with other characters (Cyrillic
  `Теа` beside Latin `Tea`: `confusable_of`, over `skeleton`) is allowed with a warning, and
  `labels` shows the table names beside such names;
* a display name that is itself a valid table name is its own table name;
* any other gets a derived table name (`table_name_for`): its ASCII slug when it has letters
  or digits from a–z / 0–9, else ``"c-"`` + the first 8 hex digits of the SHA-1 of its UTF-8
  bytes; ``-2``, ``-3`` … appended while the name is taken.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections.abc import Iterable

from retrieval.types import RetrievalError

MAX_DISPLAY_CHARS = 64
_REFUSED_CATEGORIES = {"Cc": "a control character", "Cs": "a lone surrogate", "Zl": "a line separator",
                       "Zp": "a paragraph separator"}
# Invisible characters outside category Cf (Unicode's Default_Ignorable_Code_Point, in part).
INVISIBLE = frozenset("\u034f\u115f\u1160\u180b\u180c\u180d\u180f\u2800\u3164\uffa0")
# Letters of other scripts that look like Latin ones: a subset of Unicode's confusables
# (UTS #39, confusables.txt) for Cyrillic and Greek, the scripts a look-alike name uses.
_LOOKALIKES = str.maketrans(
    "АВСЕНІЈКМОРЅТХУҮԚԜӀасԁеһіјӏорԛѕԝхуү"  # Cyrillic
    "ΑΒΕΖΗΙΚΜΝΟΡΤΥΧαιονρυχγ"  # Greek
    "ı",  # Latin dotless i
    "ABCEHIJKMOPSTXYYQWIacdehijlopqswxyy"
    "ABEZHIKMNOPTYXaiovpuxy"
    "i")
TABLE_NAME_RE = re.compile(r"[a-z0-9][a-z0-9_-]{0,63}")  # fullmatch: no trailing newline
_SLUG_CHARS = 56  # room for a "-NNN" suffix within 64


def display_name(text: object) -> str:
    """`text` as a display name: stripped, NFKC, 1–64 characters, no control, invisible or
    bidirectional control characters. A clear `RetrievalError` otherwise (naming the first
    offending character, as typed)."""
    if not isinstance(text, str):
        raise RetrievalError(f"A collection name must be text, got {type(text).__name__}")
    for position, char in enumerate(text.strip(), start=1):
        if char in INVISIBLE or unicodedata.category(char) == "Cf":
            raise RetrievalError(f"Collection name contains an invisible or bidirectional control character "
                                 f"(U+{ord(char):04X} {unicodedata.name(char, 'unnamed')}, character {position}); "
                                 "use visible characters only")
    name = unicodedata.normalize("NFKC", text.strip())
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


def skeleton(name: str) -> str:
    """What `name` looks like: NFKC, then each Cyrillic or Greek letter that looks like a Latin
    one replaced by it (UTS #39's skeleton, for those scripts). `Теа` and `Tea` share one."""
    return unicodedata.normalize("NFKC", name).translate(_LOOKALIKES)


def confusable_of(name: str, existing: Iterable[str]) -> str | None:
    """The first of `existing` that looks like `name` (the same `skeleton`) but is spelled
    otherwise; None when none does."""
    shape = skeleton(name)
    return next((other for other in existing if other != name and skeleton(other) == shape), None)


def confusable_note(name: str, existing: Iterable[str]) -> str:
    """The warning for a new name that looks like an existing one ('' when it looks like none),
    naming the characters that differ."""
    other = confusable_of(name, existing)
    if other is None:
        return ""
    differ = ([c for c, o in zip(name, other, strict=True) if c != o] if len(name) == len(other)
              else [c for c in name if c not in other])
    shown = ", ".join(f"U+{ord(c):04X} {unicodedata.name(c, 'unnamed')}" for c in dict.fromkeys(differ))
    return (f"the name {name!r} looks like the existing collection {other!r} but is spelled with other characters "
            f"({shown}): rename it if that was not meant")


def labels(display_names: dict[str, str]) -> dict[str, str]:
    """What to show for each collection (table name → display name): its display name, and
    "display (table)" when two collections would otherwise read the same (display names with
    one `skeleton`, or a display name equal to another collection's table name)."""
    counts: dict[str, int] = {}
    for display in display_names.values():
        counts[skeleton(display)] = counts.get(skeleton(display), 0) + 1
    out = {}
    for table, display in display_names.items():
        clash = counts[skeleton(display)] > 1 or (display != table and display in display_names)
        out[table] = f"{display} ({table})" if clash else display
    return out
