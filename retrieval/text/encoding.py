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

Anything else is rejected with the byte offset (and line) at which UTF-8 decoding failed, rather
than decoded as Latin-1 mojibake that would be indexed silently.
"""

from __future__ import annotations

import codecs

from retrieval.types import IngestError

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def decode_bytes(data: bytes) -> tuple[str, str]:
    """Return (text, encoding name); the name is a Python codec that decodes `data` to `text`.

    Raises IngestError when the data is neither UTF-8 (with or without BOM), UTF-16 with BOM, GBK
    nor GB18030; the message gives the byte offset and line of the first invalid UTF-8 byte.
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
        for name in ("gbk", "gb18030"):
            try:
                return data.decode(name), name
            except UnicodeDecodeError:
                continue
        offset = utf8_error.start
        line = data.count(b"\n", 0, offset) + 1
        raise IngestError(
            f"the file is not UTF-8, GBK or GB18030 text: UTF-8 decoding failed at byte offset "
            f"{offset} (line {line}, byte 0x{data[offset]:02x}); save it as UTF-8 and try again"
        ) from utf8_error
