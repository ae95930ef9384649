"""Hostile files the readers must refuse or read within bounds (docs/reliability.md, "Hostile
files"): workbooks declaring a huge sheet or expanding without limit, deeply nested JSON. Every
file is made here, small on disk."""

from __future__ import annotations

import io
import json
import re
import signal
import zipfile
from contextlib import contextmanager

import pytest

from retrieval import limits
from retrieval.indexing.readers.parse import parse_bytes, preview
from retrieval.types import IngestError


@contextmanager
def at_most(seconds: int):
    """Fail (rather than hang the suite) when the block runs longer than `seconds`: the files
    below kept the readers busy for hours before they were bounded."""
    def stop(*_):
        raise TimeoutError(f"still reading after {seconds} s")
    previous = signal.signal(signal.SIGALRM, stop)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def workbook(rows: list[list], far_cells: int = 0) -> bytes:
    """A workbook written by openpyxl; `far_cells` rows more, each with one cell in the last
    column Excel has (XFD)."""
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    for row in rows:
        sheet.append(row)
    for n in range(far_cells):
        sheet.cell(row=len(rows) + 1 + n, column=16384, value="far")
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def patched(data: bytes, part: str, edit, added: dict[str, bytes] | None = None) -> bytes:
    """The workbook with one part's XML replaced by `edit(xml)` and the `added` parts, deflated at
    the highest level."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(data)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED,
                                                                    compresslevel=9) as dst:
        for info in src.infolist():
            body = src.read(info)
            dst.writestr(info.filename, edit(body) if info.filename == part else body)
        for filename, body in (added or {}).items():
            dst.writestr(filename, body)
    return out.getvalue()


PLACEHOLDER = "PLACEHOLDER"  # a cell's text, replaced in the XML (openpyxl cuts what it writes to 32,767)


def with_text(data: bytes, text: bytes) -> bytes:
    """Every PLACEHOLDER cell holding `text` (inline)."""
    return patched(data, "xl/worksheets/sheet1.xml", lambda xml: xml.replace(PLACEHOLDER.encode(), text))


def sharing(data: bytes, text: bytes) -> bytes:
    """Every PLACEHOLDER cell pointing at one shared string holding `text`."""
    cell = re.compile(rb'(<c r="[A-Z]+[0-9]+") t="inlineStr"><is><t>' + PLACEHOLDER.encode() + rb"</t></is></c>")
    shared = (b'<sst xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main" count="1" uniqueCount="1">'
              b"<si><t>" + text + b"</t></si></sst>")
    data = patched(data, "xl/worksheets/sheet1.xml", lambda xml: cell.sub(rb'\1 t="s"><v>0</v></c>', xml),
                   {"xl/sharedStrings.xml": shared})
    override = (b'<Override PartName="/xl/sharedStrings.xml" ContentType="application/vnd.openxmlformats-'
                b'officedocument.spreadsheetml.sharedStrings+xml"/></Types>')
    return patched(data, "[Content_Types].xml", lambda xml: xml.replace(b"</Types>", override))


def declaring_the_whole_sheet(data: bytes) -> bytes:
    """The workbook with its first sheet declared `A1:XFD1048576` and an empty last row element
    (as a sheet formatted to its end has): 4.7 KB."""
    def edit(xml: bytes) -> bytes:
        xml = re.sub(rb'<dimension ref="[^"]*"', b'<dimension ref="A1:XFD1048576"', xml)
        return xml.replace(b"</sheetData>", b'<row r="1048576"/></sheetData>')
    return patched(data, "xl/worksheets/sheet1.xml", edit)


ROWS = [["id", "text"], ["a", "alpha tea"], ["b", "beta tea"]]


def test_a_tiny_workbook_declaring_the_whole_sheet_reads_only_its_cells():
    data = declaring_the_whole_sheet(workbook(ROWS))
    assert len(data) < 5_000
    with at_most(30):  # before: every row up to 1,048,576 padded to 16,384 cells, for hours
        corpus = parse_bytes(data, "tiny.xlsx")
        columns, rows = preview(data, "tiny.xlsx")
    assert [(d.id, d.text) for d in corpus.documents] == [("a", "alpha tea"), ("b", "beta tea")]
    assert columns == ["id", "text"] and rows == [{"id": "a", "text": "alpha tea"}, {"id": "b", "text": "beta tea"}]


def test_a_workbook_spanning_too_many_cells_is_refused(monkeypatch):
    monkeypatch.setattr(limits, "XLSX_MAX_CELLS", 100_000)
    # 3 rows of 2 cells, then rows of 16,384 (a cell in column XFD): 6 + 7 × 16,384 > 100,000 at row 10
    data = workbook(ROWS, far_cells=10)
    with at_most(30), pytest.raises(IngestError, match=r"^wide\.xlsx: the first sheet spans more than 100,000 "
                                                       r"cells \(rows × columns, row 10\)"):
        parse_bytes(data, "wide.xlsx")


def test_a_workbook_expanding_past_the_limit_is_refused_before_it_is_read(monkeypatch):
    monkeypatch.setattr(limits, "XLSX_MAX_UNCOMPRESSED_MB", 1)
    data = with_text(workbook([["id", "text"], ["a", PLACEHOLDER]]), b"a" * (3 * limits.MB))
    assert len(data) < 20_000  # 3 MB of text deflated
    with pytest.raises(IngestError, match=r"^bomb\.xlsx: the workbook expands to 3\.0 MB when unzipped; the "
                                          r"workbench reads workbooks of at most 1 MB unzipped "
                                          r"\(WORKBENCH_XLSX_MAX_UNCOMPRESSED_MB\)"):
        parse_bytes(data, "bomb.xlsx")
    with pytest.raises(IngestError, match=r"expands to 3\.0 MB"):
        preview(data, "bomb.xlsx")


def test_one_long_text_shared_by_many_cells_is_counted_while_reading(monkeypatch):
    """Small unzipped (one shared string) but 400 cells × 30,000 characters: the text read is
    counted against the same limit."""
    monkeypatch.setattr(limits, "XLSX_MAX_UNCOMPRESSED_MB", 1)
    data = sharing(workbook([["id", "text"], *([f"d{i}", PLACEHOLDER] for i in range(400))]), b"tea " * 7_500)
    assert sum(i.file_size for i in zipfile.ZipFile(io.BytesIO(data)).infolist()) < limits.MB
    # 35 cells × 30,000 = 1,050,000 characters > 1 MB (1,048,576): the 35th data row is row 36
    with pytest.raises(IngestError, match=r"^many\.xlsx: the first sheet holds more than 1 MB of text "
                                          r"\(row 36\); the workbench reads"):
        parse_bytes(data, "many.xlsx")


def test_a_cell_longer_than_excel_allows_is_refused():
    data = with_text(workbook([["id", "text"], ["a", "fine"], ["b", PLACEHOLDER]]), b"x" * 40_000)
    with pytest.raises(IngestError, match=r"^long\.xlsx: row 3, column 'text' holds 40,000 characters; an Excel "
                                          r"cell holds at most 32,767"):
        parse_bytes(data, "long.xlsx")


# ---- a file mixing UTF-8 and GBK lines: refused by the one-shot and the streaming reader ----------
def test_a_csv_mixing_utf8_and_gbk_lines_is_refused_by_both_readers(tmp_path):
    from retrieval.indexing.readers.stream import open_stream

    path = tmp_path / "menu.csv"
    path.write_bytes(b"id,text\n" + "1,检索质量\n".encode("gbk") + "2,café crème\n".encode())
    message = (r"^menu\.csv: the file mixes encodings: line 3 is UTF-8 \('2,café crème'\) but line 2 is not "
               r"\(byte offset 10, byte 0xbc\); save the whole file as UTF-8")
    with pytest.raises(IngestError, match=message):
        parse_bytes(path.read_bytes(), "menu.csv")
    with pytest.raises(IngestError, match=message):
        open_stream(path)  # the CLI's ingest: nothing written
    path.write_bytes(b"id,text\n" + "1,检索质量\n2,相关性\n".encode("gbk"))
    assert open_stream(path).encoding == "gbk" and parse_bytes(path.read_bytes(), "menu.csv").encoding == "gbk"


# ---- deeply nested JSON: a message naming the item or line, never a RecursionError ---------------
def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


def test_a_deeply_nested_json_file_names_the_item():
    text = '[{"id": "a", "text": "tea"},\n {"id": "b", "text": "deep", "meta": ' + nested(100_000) + "}]"
    for read in (parse_bytes, preview):
        with pytest.raises(IngestError, match=r"^deep\.json: invalid JSON at line 2, column 136: nested more than "
                                              r"100 levels deep \(item 2\)$"):
            read(text.encode(), "deep.json")


def test_json_nested_past_the_limit_but_parseable_is_refused_too():
    text = '[{"id": "a", "text": "tea", "meta": ' + nested(150) + "}]"
    with pytest.raises(IngestError, match=r"nested more than 100 levels deep \(item 1\)"):
        parse_bytes(text.encode(), "deep.json")
    ok = '[{"id": "a", "text": "tea", "meta": {"m": ' + nested(97) + "}}]"  # 100 levels: array, item, meta, 97
    assert parse_bytes(ok.encode(), "ok.json").documents[0].metadata == {"meta": {"m": json.loads(nested(97))}}


def test_a_deeply_nested_jsonl_line_is_named_by_both_readers(tmp_path):
    from retrieval.indexing.readers.stream import open_stream

    path = tmp_path / "deep.jsonl"
    path.write_text('{"id": "a", "text": "tea"}\n\n{"id": "b", "text": "x", "m": ' + nested(50_000) + "}\n",
                    encoding="utf-8")
    problem = r"line 3: invalid JSON at column 130: nested more than 100 levels deep"
    with pytest.raises(IngestError) as one_shot:
        parse_bytes(path.read_bytes(), "deep.jsonl")
    assert re.search(problem, "\n".join([str(one_shot.value), *one_shot.value.problems]))
    with pytest.raises(IngestError) as streamed:
        list(open_stream(path).batches())
    assert re.search(problem, "\n".join([str(streamed.value), *streamed.value.problems]))


def test_the_cli_ingest_of_a_deeply_nested_file_is_a_message_and_writes_nothing(tmp_path, capsys):
    from retrieval.cli.main import main as cli
    from retrieval.store import Store

    path = tmp_path / "deep.json"
    path.write_text('[{"id": "a", "text": "tea", "meta": ' + nested(100_000) + "}]", encoding="utf-8")
    db = tmp_path / "db"
    assert cli(["--db", str(db), "ingest", str(path), "--collection", "c"]) == 2
    assert "error: deep.json: invalid JSON at line 1, column 135: nested more than 100 levels deep (item 1)" in (
        capsys.readouterr().err)
    assert Store(str(db)).table_names() == []
