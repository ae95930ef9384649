"""No emoji in the UI's source (ui/, pages/, app.py): a machine without an emoji font (Debian's
chromium without fonts-noto-color-emoji) draws one as an empty box. Icons are Material Symbols
(`:material/name:`, a font Streamlit bundles) or plain characters of the text fonts."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# Where a browser may take the glyph from an emoji font: the pictographic blocks (nearly every
# character an emoji, most of them drawn as one by default), the BMP symbols Unicode gives emoji
# presentation, and the parts of emoji sequences (VS16 asks for emoji presentation of the
# character before it, e.g. ⚠️; ZWJ joins emoji; keycaps; the tags of flag sequences).
EMOJI_RANGES = (
    (0x1F000, 0x1FAFF),  # Mahjong tiles … Symbols and Pictographs Extended-A (🔎 🕒 🔁 🇨 …)
    (0x2600, 0x27BF),    # Miscellaneous Symbols, Dingbats (☕ ⚠ ⚡ ✅ ❌ ➕)
    (0x231A, 0x231B),    # ⌚ ⌛
    (0x23E9, 0x23FA),    # ⏩ … ⏺ (⏰ ⏳)
    (0x2B1B, 0x2B1C),    # ⬛ ⬜
    (0x2B50, 0x2B50),    # ⭐
    (0x2B55, 0x2B55),    # ⭕
    (0x200D, 0x200D),    # zero width joiner
    (0x20E3, 0x20E3),    # combining enclosing keycap
    (0xFE0F, 0xFE0F),    # variation selector 16: emoji presentation
    (0xE0020, 0xE007F),  # tags
)


# Inside those blocks but not emoji (Unicode's emoji-data.txt lists neither) and drawn by the text
# fonts (DejaVu Sans, which fontconfig brings on Debian): the star marking a heatmap's best cell.
TEXT_SYMBOLS = frozenset("★☆")


def is_emoji(char: str) -> bool:
    """Whether the code point `char` lies in one of `EMOJI_RANGES` and is not one of `TEXT_SYMBOLS`."""
    return char not in TEXT_SYMBOLS and any(low <= ord(char) <= high for low, high in EMOJI_RANGES)


def emoji_in(text: str) -> list[tuple[int, str]]:
    """(line number from 1, 'U+XXXX') of every emoji code point of `text`."""
    return [(n, f"U+{ord(c):04X}") for n, line in enumerate(text.splitlines(), start=1) for c in line if is_emoji(c)]


def ui_sources() -> list[Path]:
    return [REPO / "app.py", *sorted((REPO / "pages").glob("*.py")), *sorted((REPO / "ui").rglob("*.py"))]


def test_is_emoji_by_hand():
    for char in "🔎🕒🔁⚠\ufe0f⭐⌛✅❌\u200d🇨":
        assert is_emoji(char), f"U+{ord(char):04X}"
    # plain characters the UI uses, which the text fonts have: arrows, triangles, Greek, CJK, dashes
    for char in "→←↗▲▼λΔ·—…–★☆曹操赤壁aZ0 ":
        assert not is_emoji(char), f"U+{ord(char):04X}"
    assert emoji_in('st.title("🔎 Search")\nok\nst.error(x, icon="⚠️")') == [(1, "U+1F50E"), (3, "U+26A0"),
                                                                             (3, "U+FE0F")]


def test_the_ui_source_has_no_emoji():
    sources = ui_sources()
    assert len(sources) > 40 and REPO / "ui" / "page.py" in sources  # the walk finds the UI
    found = {str(p.relative_to(REPO)): hits for p in sources if (hits := emoji_in(p.read_text(encoding="utf-8")))}
    assert found == {}, "emoji in the UI (use a :material/...: icon or plain text instead)"
