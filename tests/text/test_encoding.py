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
