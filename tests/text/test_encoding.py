import codecs

import pytest

from retrieval.text.encoding import decode_bytes
from retrieval.types import IngestError


def test_plain_utf8():
    assert decode_bytes("héllo 检索".encode()) == ("héllo 检索", "utf-8")


def test_utf8_chinese_is_not_taken_for_gbk():
    data = "搜索引擎".encode()
    assert data.decode("gbk") == "鎼滅储寮曟搸"  # also valid GBK, as mojibake: why UTF-8 goes first
    assert decode_bytes(data) == ("搜索引擎", "utf-8")


def test_utf8_bom_is_stripped():
    assert decode_bytes(codecs.BOM_UTF8 + "id,标题\n".encode()) == ("id,标题\n", "utf-8-sig")


def test_gbk():
    assert decode_bytes("检索,相关性\n".encode("gbk")) == ("检索,相关性\n", "gbk")


def test_gb18030_for_characters_beyond_gbk():
    text = "生僻字𠀀 and 😀"
    with pytest.raises(UnicodeEncodeError):
        text.encode("gbk")
    assert decode_bytes(text.encode("gb18030")) == (text, "gb18030")


@pytest.mark.parametrize(
    "encoded", ["文本".encode("utf-16"), codecs.BOM_UTF16_BE + "文本".encode("utf-16-be")]
)
def test_utf16_with_bom(encoded):
    assert decode_bytes(encoded) == ("文本", "utf-16")


def test_empty_input_is_utf8():
    assert decode_bytes(b"") == ("", "utf-8")


def test_undecodable_bytes_name_the_offset_and_line():
    with pytest.raises(IngestError) as caught:
        decode_bytes(b"line one\nbad \x80 byte")
    message = str(caught.value)
    assert "not UTF-8, GBK or GB18030" in message
    assert "byte offset 13 (line 2, byte 0x80)" in message


# ---- files mixing UTF-8 and GBK lines (refused, not decoded as GBK) -------------------------------
MIXED = b"id,text\n" + "1,检索质量\n".encode("gbk") + "2,café crème\n".encode() + "3,相关性\n".encode("gbk")


def test_a_file_mixing_utf8_and_gbk_lines_is_refused_naming_the_lines():
    with pytest.raises(IngestError, match=r"^the file mixes encodings: line 3 is UTF-8 \('2,café crème'\) but "
                                          r"line 2 is not \(byte offset 10, byte 0xbc\); save the whole file as "
                                          r"UTF-8 and try again"):
        decode_bytes(MIXED)


def test_utf8_chinese_lines_in_a_gbk_file_are_found_too():
    data = "1,检索\n".encode("gbk") + "2,搜索引擎\n".encode()
    with pytest.raises(IngestError, match=r"line 2 is UTF-8 \('2,搜索引擎'\) but line 1 is not"):
        decode_bytes(data)


def test_a_gbk_file_whose_words_happen_to_be_valid_utf8_still_reads_as_gbk():
    """小 (GBK d0 a1) is also UTF-8 for Cyrillic С, 毛 (c3 ab) for ë: alone between commas they are
    read as GBK; only text that reads as UTF-8 words (an accented letter inside a Latin word, a
    CJK character) counts as a UTF-8 line."""
    text = "id,text\n1,小\n2,毛,枚\n3,检索质量\n"
    assert "小".encode("gbk").decode() == "С" and "毛".encode("gbk").decode() == "ë"
    assert decode_bytes(text.encode("gbk")) == (text, "gbk")


def test_pure_files_keep_their_encoding():
    text = "id,text\n1,café crème\n2,检索质量\n"
    assert decode_bytes(text.encode()) == (text, "utf-8")
    gbk = "id,text\n1,检索质量\n2,相关性 relevance\n"
    assert decode_bytes(gbk.encode("gbk")) == (gbk, "gbk")
