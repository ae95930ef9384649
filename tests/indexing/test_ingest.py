import codecs
import json
from pathlib import Path

import pytest

from retrieval.indexing.readers.options import ColumnMapping, ParseOptions
from retrieval.indexing.readers.parse import parse_bytes, parse_files, parse_path
from retrieval.types import Document, IngestError

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "xquad"  # the bundled BEIR sample


def problems_of(data: bytes, filename: str, options: ParseOptions = ParseOptions()) -> list[str]:
    with pytest.raises(IngestError) as caught:
        parse_bytes(data, filename, options)
    return caught.value.problems


# --- CSV / TSV -----------------------------------------------------------------------------------


def test_gbk_csv_with_chinese_text():
    data = "id,标题,text,价格\nA1,苹果,红色的水果,3.5\nA2,香蕉,黄色的水果,12\n".encode("gbk")
    corpus = parse_bytes(data, "水果.csv")

    assert (corpus.encoding, corpus.format) == ("gbk", "csv")
    assert corpus.documents == [
        Document(id="A1", text="红色的水果", title="苹果", metadata={"价格": 3.5}),
        Document(id="A2", text="黄色的水果", title="香蕉", metadata={"价格": 12}),
    ]
    assert corpus.notes == [
        "text column 'text'", "title column '标题'", "id column 'id'", "metadata columns: 价格",
    ]


def test_utf8_bom_csv_header_is_clean():
    data = codecs.BOM_UTF8 + b"ID,Content\nx,hello\n"
    corpus = parse_bytes(data, "bom.csv")
    assert corpus.encoding == "utf-8-sig"
    assert corpus.documents == [Document(id="x", text="hello")]


def test_generated_ids_use_the_row_number_in_the_file():
    data = b'title,body\nOne,"first\nspans two lines"\n\nTwo,second\n'
    corpus = parse_bytes(data, "notes.csv")
    assert [(d.id, d.title, d.text) for d in corpus.documents] == [
        ("notes-2", "One", "first\nspans two lines"),  # header is row 1
        ("notes-5", "Two", "second"),  # the row starts on line 5 of the file
    ]
    assert "no id column: ids are 'notes-<row number>'" in corpus.notes


def test_csv_metadata_cells_become_numbers_and_empty_cells_are_dropped():
    data = b"id,text,stars,score,zip,big,sci,tag\n1,t, 4 ,-0.5,007,123456789012345678901,1e3,\n"
    (document,) = parse_bytes(data, "m.csv").documents
    assert document.metadata == {
        "stars": 4, "score": -0.5, "zip": "007", "big": "123456789012345678901", "sci": 1000.0,
    }


def test_all_row_problems_are_reported_together():
    data = b"id,text\na,one\nb,\n,three\na,four\nc,five,extra\n 7 ,seven\n"
    assert problems_of(data, "bad.csv") == [
        "row 3 (id 'b'): text is empty",  # the row named by its id too
        "row 4: id is empty",
        "row 6: 3 cells but the header has 2",
        "id 'a' appears in rows 2 and 5",
    ]


def test_explicit_mapping():
    data = b"key,headline,summary,text\nk1,H,the summary,ignored text\n"
    mapping = ColumnMapping(id="key", title="headline", text="summary")
    (document,) = parse_bytes(data, "m.csv", ParseOptions(mapping=mapping)).documents
    assert document == Document(id="k1", text="the summary", title="H", metadata={"text": "ignored text"})


def test_mapping_to_a_missing_column_lists_the_columns():
    expected = r"m\.csv: title column 'Title' not found; available columns: 'title', 'text'"
    with pytest.raises(IngestError, match=expected):
        parse_bytes(b"title,text\na,b\n", "m.csv", ParseOptions(mapping=ColumnMapping(title="Title")))


def test_no_text_column_lists_the_columns():
    with pytest.raises(IngestError, match=r"no text column .* available columns: 'id', 'label'"):
        parse_bytes(b"id,label\n1,x\n", "m.csv")


def test_semicolon_separated_csv():
    corpus = parse_bytes(b"id;text;prix\n1;bonjour;2,5\n", "fr.csv")
    assert corpus.documents == [Document(id="1", text="bonjour", metadata={"prix": "2,5"})]
    assert "read as ';'-separated (the header has no comma)" in corpus.notes


def test_tsv_quotes_are_plain_characters():
    data = b'id\ttext\n1\t"quoted start\n2\tplain\n'
    corpus = parse_bytes(data, "t.tsv")
    assert corpus.format == "tsv"
    assert [(d.id, d.text) for d in corpus.documents] == [("1", '"quoted start'), ("2", "plain")]


def test_unclosed_quote_is_an_error_not_a_swallowed_file():
    with pytest.raises(IngestError, match=r"q\.csv: line 3: a quoted cell opened in this record is never closed"):
        parse_bytes(b'id,text\n1,fine\n2,"unclosed\n3,swallowed\n', "q.csv")

def test_repeated_header_columns_are_rejected():
    with pytest.raises(IngestError, match="repeats column"):
        parse_bytes(b"text,text\na,b\n", "r.csv")


# --- JSON / JSONL ---------------------------------------------------------------------------------


def test_json_array_keeps_metadata_values():
    data = json.dumps([{"doc_id": 7, "content": "seven", "tags": ["a"], "n": None}]).encode()
    corpus = parse_bytes(data, "docs.json")
    assert corpus.documents == [Document(id="7", text="seven", metadata={"tags": ["a"], "n": None})]


def test_json_object_with_one_array_of_objects():
    data = json.dumps({"version": 2, "items": [{"text": "a"}, {"text": "b"}]}).encode()
    corpus = parse_bytes(data, "export.json")
    assert [d.id for d in corpus.documents] == ["export-1", "export-2"]
    assert "documents read from key 'items'" in corpus.notes


def test_json_object_with_several_arrays_needs_json_key():
    data = json.dumps({"docs": [{"text": "a"}], "drafts": [{"text": "b"}]}).encode()
    with pytest.raises(IngestError, match=r"several keys hold arrays of objects \('docs', 'drafts'\); set json_key"):
        parse_bytes(data, "two.json")
    corpus = parse_bytes(data, "two.json", ParseOptions(json_key="drafts"))
    assert [d.text for d in corpus.documents] == ["b"]


def test_json_items_that_are_not_objects():
    data = b'[{"text": "ok"}, "loose string", {"text": {"nested": 1}}]'
    assert problems_of(data, "j.json") == [
        "item 2: expected an object, got a string",
        "item 3: text is not a string or number",
    ]


def test_invalid_json_names_the_position():
    with pytest.raises(IngestError, match=r"bad\.json: invalid JSON at line 2, column 1"):
        parse_bytes(b'[{"text": "a"},\n]', "bad.json")
    # json's message cut before its position ("Unterminated string starting at, column 42") in words
    with pytest.raises(IngestError) as caught:
        parse_bytes(b'[{"text": "a"},\n {"id": "b", "text": "never closed}]', "open.json")
    assert str(caught.value) == ('open.json: invalid JSON at line 2, column 22: a string starts here and is never '
                                 'closed (a missing ")')
    assert problems_of(b'{"id": "a", "text": "one\ttab"}\n{"id": "b", "text": "open\n', "t.jsonl") == [
        "line 1: invalid JSON at column 25: a tab or line break inside a string (write it as \\t or \\n)",
        'line 2: invalid JSON at column 21: a string starts here and is never closed (a missing ")',
    ]


def test_jsonl_skips_blank_lines_and_names_bad_ones():
    good = b'{"id": "a", "text": "one", "year": 2020}\n\n{"id": "b", "text": "two"}\n'
    corpus = parse_bytes(good, "c.ndjson")
    assert corpus.format == "jsonl"
    assert corpus.documents == [
        Document(id="a", text="one", metadata={"year": 2020}),
        Document(id="b", text="two"),
    ]
    bad = good + b'{"id": "c", "text": "three"\n[1]\n{"id": "a", "text": "again"}\n'
    assert problems_of(bad, "c.jsonl") == [
        "line 4: invalid JSON at column 28: Expecting ',' delimiter",
        "line 5: expected an object, got an array",
        "id 'a' appears in lines 1 and 6",
    ]


def test_jsonl_with_no_readable_line_says_why():
    with pytest.raises(IngestError, match=r"j\.jsonl: no documents found") as caught:
        parse_bytes(b"oops\n\n[]\n", "j.jsonl")
    assert caught.value.problems == [
        "line 1: invalid JSON at column 1: Expecting value",
        "line 3: expected an object, got an array",
    ]


# --- text and Markdown ----------------------------------------------------------------------------


def test_text_paragraphs():
    corpus = parse_bytes(b"First para\ncontinues.\n\n\nSecond.\n", "story.txt")
    assert corpus.format == "text"
    assert corpus.documents == [
        Document("story-p1", "First para\ncontinues.", "story", {}, "story", 0, 1, 2),
        Document("story-p2", "Second.", "story", {}, "story", 1, 5, 5),
    ]


def test_text_whole_file():
    corpus = parse_bytes(b"\nFirst.\n\nSecond.\n", "story.txt", ParseOptions(text_mode="file"))
    assert corpus.documents == [Document(id="story", text="First.\n\nSecond.", title="story")]


def test_markdown_is_chunked_with_the_stem_as_source():
    text = "前言\n\n# 官渡之战\n公元200年。\n\n## 赤壁之战\n公元208年。\n\n更多内容。\n"
    corpus = parse_bytes(text.encode("utf-8"), "battles.md", ParseOptions(markdown_max_chars=8))
    assert corpus.format == "markdown"
    assert [(d.id, d.title, d.start_line, d.end_line, d.text) for d in corpus.documents] == [
        ("battles#0", "battles", 1, 1, "前言"),
        ("battles#1", "官渡之战", 4, 4, "公元200年。"),
        ("battles#2", "赤壁之战", 7, 7, "公元208年。"),
        ("battles#3", "赤壁之战", 9, 9, "更多内容。"),
    ]
    assert {d.parent_id for d in corpus.documents} == {"battles"}


# --- rejected input -------------------------------------------------------------------------------


def test_unsupported_extension_lists_supported_ones():
    with pytest.raises(IngestError, match=r"x\.pdf: unsupported file type '\.pdf'; supported: \.csv, \.tsv"):
        parse_bytes(b"%PDF", "x.pdf")


@pytest.mark.parametrize("data", [b"", b"  \n", codecs.BOM_UTF8])
def test_empty_file(data):
    with pytest.raises(IngestError, match=r"e\.txt: the file is empty"):
        parse_bytes(data, "e.txt")


def test_header_only_csv_has_no_documents():
    with pytest.raises(IngestError, match=r"h\.csv: no documents found"):
        parse_bytes(b"id,text\n", "h.csv")


def test_undecodable_file_names_the_file():
    with pytest.raises(IngestError, match=r"x\.txt: the file is not UTF-8, GBK or GB18030 text"):
        parse_bytes(b"ok \x80", "x.txt")


def test_invalid_options():
    with pytest.raises(IngestError, match="text_mode"):
        ParseOptions(text_mode="lines")


# --- several files and folders --------------------------------------------------------------------


def test_parse_files_one_document_per_text_file():
    files = [("a.txt", "甲文本".encode("gbk")), ("b.txt", b"plain b")]
    corpus = parse_files(files, ParseOptions(text_mode="file"))
    assert [(d.id, d.text) for d in corpus.documents] == [("a", "甲文本"), ("b", "plain b")]
    assert corpus.encoding is None  # the files differ
    assert corpus.notes == ["a.txt: gbk, 1 documents", "b.txt: utf-8, 1 documents"]


def test_parse_files_rejects_ids_repeated_across_files():
    files = [("x.csv", b"id,text\n1,a\n"), ("y.jsonl", b'{"id": "1", "text": "b"}\n')]
    with pytest.raises(IngestError) as caught:
        parse_files(files)
    assert caught.value.problems == ["id '1' appears in x.csv and y.jsonl"]


def test_one_failing_file_is_named_by_its_own_message_not_1_of_1_files():
    with pytest.raises(IngestError) as caught:
        parse_files([("bad.csv", b"id,text\nk1,fine\nk2,\n")])
    assert str(caught.value) == "bad.csv: 1 problem(s); nothing was loaded\n  - row 3 (id 'k2'): text is empty"
    assert caught.value.skippable


def test_parse_files_reports_every_failing_file():
    files = [("ok.txt", b"fine"), ("bad.csv", b"id,text\n1,\n"), ("x.doc", b"?")]
    with pytest.raises(IngestError, match="2 of 3 files could not be parsed") as caught:
        parse_files(files)
    assert caught.value.problems[0] == "bad.csv: row 2 (id '1'): text is empty"
    assert caught.value.problems[1].startswith("x.doc: unsupported file type '.doc'")


def test_parse_path_folder_reads_supported_files_in_order(tmp_path):
    (tmp_path / "b.txt").write_text("bee", encoding="utf-8")
    (tmp_path / "a.md").write_text("# A\nalpha", encoding="utf-8")
    (tmp_path / "image.png").write_bytes(b"\x89PNG")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.txt").write_text("not read", encoding="utf-8")
    corpus = parse_path(tmp_path, ParseOptions(text_mode="file"))
    assert [d.id for d in corpus.documents] == ["a#0", "b"]
    assert corpus.format == "mixed"
    assert corpus.encoding == "utf-8"
    assert corpus.notes[-1] == "skipped unsupported files: image.png"


def test_parse_path_single_file(tmp_path):
    path = tmp_path / "one.tsv"
    path.write_bytes(b"id\ttext\n1\tx\n")
    assert parse_path(path).documents == [Document(id="1", text="x")]


def test_parse_path_missing():
    with pytest.raises(IngestError, match="no such file or folder"):
        parse_path("/nonexistent/corpus")


def test_beir_folder_prefers_test_qrels(tmp_path):
    lines = [{"_id": "d1", "title": "T", "text": "one", "url": "u"}, {"_id": "d2", "text": "two"}]
    (tmp_path / "corpus.jsonl").write_text("\n".join(map(json.dumps, lines)), encoding="utf-8")
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "find one"}\n', encoding="utf-8")
    (tmp_path / "qrels").mkdir()
    (tmp_path / "qrels" / "dev.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td2\t1\n", encoding="utf-8")
    (tmp_path / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\nq1\td1\t2\n", encoding="utf-8")
    corpus = parse_path(tmp_path)
    assert corpus.format == "beir"
    assert corpus.documents == [
        Document(id="d1", text="one", title="T", metadata={"url": "u"}),
        Document(id="d2", text="two"),
    ]
    assert corpus.queries == {"q1": "find one"}
    assert corpus.qrels == {"q1": {"d1": 2}}
    assert corpus.notes[-1] == "judgments for 1 queries from qrels/test.tsv (also present: dev.tsv)"


def test_beir_bundled_xquad_sample():
    corpus = parse_path(SAMPLE)
    assert (corpus.format, corpus.encoding) == ("beir", "utf-8")
    # 60 English paragraphs, then their 60 Chinese translations; 320 + 318 questions (wc -l: 638
    # query lines, 638 qrels lines after the header), one judgment each.
    assert [d.id for d in corpus.documents] == [f"{lang}-{i:03d}" for lang in ("en", "zh") for i in range(1, 61)]
    assert len(corpus.queries) == 638
    assert len(corpus.qrels) == 638
    assert corpus.qrels["zh-56beb4343aeaaa14008c925b"] == {"zh-001": 1}
    assert corpus.qrels["en-56beb4343aeaaa14008c925b"] == {corpus.documents[0].id: 1}
    assert corpus.documents[60].text.startswith("黑豹队")
    assert corpus.documents[0].metadata == {"lang": "en"}


def test_beir_large_corpus_parses_whole(tmp_path):
    """11,429 documents, 3.5 MB (the size of the Vaswani collection), parsed whole with distinct
    ids and the last document's text intact. (Its speed is a benchmark's business, not a test's:
    a timed assertion fails on a loaded machine without saying anything about the code.)"""
    words = "quantum field electron lattice spin magnetic wave energy state theory measured".split()
    with open(tmp_path / "corpus.jsonl", "w", encoding="utf-8") as out:
        for i in range(11429):
            text = " ".join(words[(i * 7 + j) % len(words)] for j in range(45))
            out.write(json.dumps({"_id": str(i + 1), "title": "", "text": text}) + "\n")
    assert (tmp_path / "corpus.jsonl").stat().st_size > 3_000_000
    corpus = parse_path(tmp_path)
    assert len(corpus.documents) == 11429
    last = 11428
    assert corpus.documents[-1].text == " ".join(words[(last * 7 + j) % len(words)] for j in range(45))
    assert len({d.id for d in corpus.documents}) == 11429


def test_preview_lists_columns_and_first_rows_before_mapping():
    from retrieval.indexing.readers.parse import preview

    data = "名称,内容,分数\n甲,第一行,1\n乙,第二行,2\n丙,第三行,3\n".encode("gbk")
    columns, rows = preview(data, "t.csv", n_rows=2)
    assert columns == ["名称", "内容", "分数"]
    assert rows == [{"名称": "甲", "内容": "第一行", "分数": "1"}, {"名称": "乙", "内容": "第二行", "分数": "2"}]
    # a line that cannot be read is shown in its place, not hidden
    columns, rows = preview(b'{"id": "a", "text": "x"}\n{"id": "b", "text": \n[1]\n{"id": "c", "text": "z"}\n',
                            "p.jsonl")
    assert columns == ["id", "text"]
    assert rows == [{"id": "a", "text": "x"},
                    {"(problem)": "line 2: invalid JSON at column 21: Expecting value"},
                    {"(problem)": "line 3: expected an object, got an array"}, {"id": "c", "text": "z"}]
    columns, rows = preview(b"# A\nalpha\n\n# B\nbeta\n", "n.md")
    assert columns == ["id", "title", "text"]
    assert rows == [{"id": "n#0", "title": "A", "text": "alpha"}, {"id": "n#1", "title": "B", "text": "beta"}]


def _xlsx(rows: list[list]) -> bytes:
    """A workbook made here (openpyxl), its first sheet holding `rows`."""
    import io

    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    sheet.title = "products"
    for row in rows:
        sheet.append(row)
    book.create_sheet("notes").append(["ignored"])
    out = io.BytesIO()
    book.save(out)
    return out.getvalue()


def test_an_excel_workbook_is_read_like_a_csv():
    import datetime as dt

    from retrieval.indexing.readers.documents import detected_columns
    from retrieval.indexing.readers.options import ColumnMapping
    from retrieval.indexing.readers.parse import parse_bytes, preview

    data = _xlsx([[], ["sku", "name", "description", "price", "added", "colour"],
                  [1001, "Green tea", "  Steamed leaves from Japan ", 4.5, dt.date(2024, 3, 1), None],
                  [None, None, None, None, None, None],
                  ["A-7", "Pu-erh 普洱", "Fermented for years", 12, dt.datetime(2023, 1, 2, 8, 30), "dark"]])
    corpus = parse_bytes(data, "products.xlsx")
    assert [(d.id, d.title, d.text) for d in corpus.documents] == [
        ("1001", "Green tea", "Steamed leaves from Japan"), ("A-7", "Pu-erh 普洱", "Fermented for years")]
    assert corpus.documents[0].metadata == {"price": 4.5, "added": "2024-03-01"}
    assert corpus.documents[1].metadata == {"price": 12, "added": "2023-01-02T08:30:00", "colour": "dark"}
    assert corpus.format == "xlsx" and "read the first sheet, 'products', of 2" in corpus.notes
    assert "id column 'sku'" in corpus.notes  # a sku column is taken as the id
    columns, rows = preview(data, "products.xlsx")
    assert columns == ["sku", "name", "description", "price", "added", "colour"] and rows[0]["sku"] == 1001
    assert detected_columns(columns) == {"id": "sku", "title": "name", "text": "description"}
    assert detected_columns(["name", "body"], ColumnMapping(title="body", text="name")) == {
        "id": None, "title": "body", "text": "name"}
    with pytest.raises(IngestError, match=r"broken\.xlsx: not a readable \.xlsx workbook .*save it again as Excel "
                                          r"\.xlsx, or as CSV UTF-8"):
        parse_bytes(b"id,text\n1,not a workbook\n", "broken.xlsx")
    with pytest.raises(IngestError, match=r"row 3 \(id 'b'\): text is empty"):
        parse_bytes(_xlsx([["id", "text"], ["a", "fine"], ["b", None]]), "holes.xlsx")
