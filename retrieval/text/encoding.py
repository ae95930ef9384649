"""Turn uploaded bytes into text, for the encodings Chinese and English users actually produce.

`decode_bytes` tries, in this order:

1. a byte-order mark: UTF-8 with BOM -> "utf-8-sig", UTF-16 with BOM -> "utf-16" (the BOM is
   stripped). A BOM is an explicit statement by the writing program (Excel's "CSV UTF-8", Notepad's
   "Unicode"), so it beats any guess;
2. strict UTF-8 -> "utf-8". UTF-8 has a rigid multi-byte structure, so GBK text almost never
   decodes as valid UTF-8 by accident; the reverse is not true (most UTF-8 Chinese text is *also*
   valid GBK, as mojibake), which is why UTF-8 must be tried before GBK;
3. strict GBK -> "gbk": what Windows in simplified Chinese (and Excel's plain "CSV") writes;
4. strict GB18030 -> "gb18030": the superset of GBK that adds four-byte sequences (rare CJK
   characters, emoji). Tried after GBK only so that a plain GBK file is reported by the name the
   user knows; any GBK file decodes to the same text either way.

A file that is not UTF-8 as a whole but has a line that evidently is (its UTF-8 reading holds
a CJK character, or an accented letter inside a Latin word: `café crème`, which GBK would read
as `caf茅 cr猫me`) mixes encodings and is refused, naming both lines: no one decoding is right
for all of it. A GBK word alone may happen to be valid UTF-8 too (小, d0 a1, is Cyrillic С; 3.6 %
of 16,820 distinct words of cmrc2018 in GBK, none of its 12,853 sentences), so such a reading
(a letter of another script, or an accented letter with no Latin letter beside it) is not taken
as evidence.

Anything else is rejected with the byte offset (and line) at which UTF-8 decoding failed, rather
than decoded as Latin-1 mojibake that would be indexed silently.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterable

from retrieval.types import IngestError

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


# What only UTF-8 text reads as: CJK ideographs, CJK punctuation, full-width forms; or an accented
# Latin letter (Latin-1 letters, Latin Extended-A) next to an ASCII letter, inside a word.
_CJK = "\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef"
_ACCENTED = "\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u017f"
_UTF8_EVIDENCE = re.compile(f"[{_CJK}]|[A-Za-z][{_ACCENTED}]|[{_ACCENTED}][A-Za-z]")


def evident_utf8_line(lines: Iterable[bytes]) -> tuple[int, str] | None:
    """(number from 1, text) of the first line that is evidently UTF-8 (see the module
    docstring), None when there is none."""
    for number, raw in enumerate(lines, 1):
        if raw.isascii():
            continue
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            continue
        if _UTF8_EVIDENCE.search(text):
            return number, text.rstrip("\r")
    return None


def mixed_encodings(utf8_line: tuple[int, str], line: int, offset: int, byte: int) -> IngestError:
    """The error for a file whose line `utf8_line` is UTF-8 while line `line` is not (its first
    invalid byte `byte` at `offset`)."""
    number, text = utf8_line
    shown = text if len(text) <= 40 else text[:40] + "…"
    return IngestError(f"the file mixes encodings: line {number} is UTF-8 ({shown!r}) but line {line} is not "
                       f"(byte offset {offset}, byte 0x{byte:02x}); save the whole file as UTF-8 and try again")


def decode_bytes(data: bytes) -> tuple[str, str]:
    """Return (text, encoding name); the name is a Python codec that decodes `data` to `text`.

    Raises IngestError when the data is neither UTF-8 (with or without BOM), UTF-16 with BOM, GBK
    nor GB18030, or mixes UTF-8 lines with others; the message gives the byte offset and line of
    the first invalid UTF-8 byte (and the first UTF-8 line).
    """
    for bom, name in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(name), name
            except UnicodeDecodeError as err:
                raise IngestError(
                    f"the file starts with a {name.upper()} byte-order mark but is not valid "
                    f"{name.upper()} (byte offset {err.start})"
                ) from err
    try:
        return data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError as utf8_error:
        offset = utf8_error.start
        line = data.count(b"\n", 0, offset) + 1
        for name in ("gbk", "gb18030"):
            try:
                text = data.decode(name)
            except UnicodeDecodeError:
                continue
            utf8_line = evident_utf8_line(data.split(b"\n"))
            if utf8_line is not None:
                raise mixed_encodings(utf8_line, line, offset, data[offset]) from None
            return text, name
        raise IngestError(
            f"the file is not UTF-8, GBK or GB18030 text: UTF-8 decoding failed at byte offset "
            f"{offset} (line {line}, byte 0x{data[offset]:02x}); save it as UTF-8 and try again"
        ) from utf8_error
