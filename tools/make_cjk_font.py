"""Rebuild static/fonts/NotoSansSC-subset.woff2: the Chinese glyphs the app's theme uses
(.streamlit/config.toml, [[theme.fontFaces]]), so Chinese text renders on machines without a CJK
font (Debian's chromium shows empty boxes otherwise).

The subset: every Han character of GB2312 (the 6,763 of everyday Simplified Chinese), the CJK
symbols and punctuation, the full-width forms, and every such character of the bundled samples
(sample_data/), from Noto Sans CJK SC Regular (SIL Open Font License 1.1, see
static/fonts/README.md). Characters outside it fall back to the browser's fonts.

Needs Debian's fonts-noto-cjk and fontTools with brotli (for WOFF2), e.g. in a throwaway venv:

    apt-get install fonts-noto-cjk
    python3 -m venv /tmp/fontenv && /tmp/fontenv/bin/pip install fonttools brotli
    /tmp/fontenv/bin/python tools/make_cjk_font.py [path/to/NotoSansCJK-Regular.ttc]
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCE = Path("/usr/share/fonts/opentype/noto/NotoSansCJK-Regular.ttc")
SC_INDEX = 2  # in the collection: JP, KR, SC, TC, HK, then the Mono ones
OUT = REPO / "static" / "fonts" / "NotoSansSC-subset.woff2"
# What the font covers, as CSS unicode-range (the theme's fontFaces entry states the same ranges,
# so Latin text keeps Streamlit's own font).
RANGES = [(0x3000, 0x303F), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xF900, 0xFAFF), (0xFF00, 0xFFEF)]


def in_ranges(code: int) -> bool:
    return any(lo <= code <= hi for lo, hi in RANGES)


def gb2312() -> set[int]:
    """Every character GB2312 encodes (rows 0xA1–0xF7, cells 0xA1–0xFE)."""
    found = set()
    for row in range(0xA1, 0xF8):
        for cell in range(0xA1, 0xFF):
            with contextlib.suppress(UnicodeDecodeError):  # an unassigned cell
                found.update(map(ord, bytes([row, cell]).decode("gb2312")))
    return found


def sample_characters() -> set[int]:
    found = set()
    for path in (REPO / "sample_data").rglob("*"):
        if path.is_file() and path.suffix in {".jsonl", ".json", ".md", ".tsv", ".txt"}:
            found.update(map(ord, path.read_text(encoding="utf-8")))
    return found


def main() -> None:
    from fontTools import subset
    from fontTools.ttLib import TTCollection

    source = Path(sys.argv[1]) if len(sys.argv) > 1 else SOURCE
    if not source.is_file():
        sys.exit(f"{source} is missing: apt-get install fonts-noto-cjk (or give the .ttc's path)")
    font = TTCollection(str(source)).fonts[SC_INDEX]
    assert font["name"].getDebugName(4) == "Noto Sans CJK SC", font["name"].getDebugName(4)
    cmap = font.getBestCmap()
    wanted = {c for c in gb2312() | sample_characters() | set(range(0x3000, 0x3040)) | set(range(0xFF00, 0xFFF0))
              if in_ranges(c) and c in cmap}
    options = subset.Options()
    options.flavor = "woff2"
    options.name_IDs = ["*"]  # keep the copyright, licence and font names (OFL: the notice travels with it)
    options.name_languages = ["*"]
    options.layout_features = ["*"]
    options.hinting = False
    options.desubroutinize = True  # compresses better under WOFF2
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=sorted(wanted))
    subsetter.subset(font)
    OUT.parent.mkdir(parents=True, exist_ok=True)
    font.flavor = "woff2"
    font.save(str(OUT))
    print(f"{len(wanted)} characters, {OUT.stat().st_size / 1e6:.2f} MB: {OUT.relative_to(REPO)}")


if __name__ == "__main__":
    main()
