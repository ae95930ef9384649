"""Collection names in any script (issue 11, item 4): the display name, the derived safe table
name, the catalogue that predates them, and the CLI that accepts either name."""

from __future__ import annotations

import pyarrow as pa
import pytest

from retrieval.cli.main import main
from retrieval.indexing.pipeline import add_documents, create_collection
from retrieval.indexing.readers.parse import parse_bytes
from retrieval.store import CATALOGUE_TABLE, Store
from retrieval.store.names import confusable_of, display_name, hashed, labels, slug, table_name_for
from retrieval.types import RetrievalError

TEA = "id,text\nt1,龙井茶产于浙江杭州西湖，是著名的绿茶。\nt2,普洱茶产于云南，是一种发酵茶。\n".encode()
MINILM = "all-MiniLM-L6-v2"  # the small model: these tests are about names, not embeddings
# by hand: "c-" + the first 8 hex digits of sha1("中文集合".encode("utf-8"))
CHINESE_TABLE = "c-bcbf6ef0"
GREEN = b"id,text\ng1,Green tea is steamed or pan-fired\n"  # English: no cross-lingual vectors to build


# ---- the pure rules (names.py) -----------------------------------------------------------------
def test_display_names_are_stripped_nfc_and_bounded():
    assert display_name("  中文集合 \n") == "中文集合"
    assert display_name("Cafe\u0301") == "Café"  # NFC: e + combining acute -> é (one character)
    assert display_name("x" * 64) == "x" * 64
    assert display_name("Ἀθῆναι (Athens) 🏛") == "Ἀθῆναι (Athens) 🏛"


@pytest.mark.parametrize("bad, message", [
    ("", "Give the collection a name (1–64 characters, any script)"),
    ("   \t ", "Give the collection a name (1–64 characters, any script)"),
    ("x" * 65, "Collection name is 65 characters long; use 1–64"),
    ("中" * 65, "Collection name is 65 characters long; use 1–64"),
    ("bad\x00name", "Collection name contains a control character (U+0000, character 4)"),
    ("tab\tinside", "Collection name contains a control character (U+0009, character 4)"),
    ("a\u2028b", "Collection name contains a line separator (U+2028, character 2)"),
    (None, "A collection name must be text, got NoneType"),
])
def test_bad_display_names_get_a_clear_error(bad, message):
    with pytest.raises(RetrievalError) as err:
        display_name(bad)
    assert str(err.value).startswith(message)


def test_table_names_are_derived_safely():
    assert table_name_for("notes", set()) == "notes"  # a valid table name is its own
    assert slug("Café Notes (2024)") == "cafe-notes-2024"
    assert table_name_for("Café Notes (2024)", set()) == "cafe-notes-2024"
    assert table_name_for("中文 notes", set()) == "notes"  # the ASCII part when there is one
    assert hashed("中文集合") == CHINESE_TABLE
    assert table_name_for("中文集合", set()) == CHINESE_TABLE
    assert table_name_for("My Docs", {"my-docs", "my-docs-2"}) == "my-docs-3"
    assert table_name_for("../../etc/passwd", set()) == "etc-passwd"
    long = table_name_for("X" * 63 + "中", set())
    assert long == "x" * 56 and table_name_for("X" * 63 + "中", {long}) == "x" * 56 + "-2"


def test_labels_add_the_table_name_only_when_two_read_the_same():
    assert labels({"notes": "notes", CHINESE_TABLE: "中文集合"}) == {"notes": "notes", CHINESE_TABLE: "中文集合"}
    assert labels({"my-docs": "My Docs", "my-docs-2": "My Docs", "x": "x"}) == {
        "my-docs": "My Docs (my-docs)", "my-docs-2": "My Docs (my-docs-2)", "x": "x"}


# ---- the store ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def store(tmp_path_factory):
    store = Store(str(tmp_path_factory.mktemp("lancedb")))
    create_collection(store, "中文集合", parse_bytes(TEA, "tea.csv"), model=MINILM)
    create_collection(store, "notes", parse_bytes(b"id,text\nn1,Green tea is steamed\n", "n.csv"), model=MINILM)
    return store


def test_a_chinese_name_is_kept_as_the_display_name(store):
    info = store.info(CHINESE_TABLE)
    assert (info.name, info.display_name, info.label, info.doc_count) == (CHINESE_TABLE, "中文集合", "中文集合", 2)
    assert [(i.name, i.label) for i in store.list_collections()] == [(CHINESE_TABLE, "中文集合"), ("notes", "notes")]
    assert store.display_names() == {CHINESE_TABLE: "中文集合", "notes": "notes"}
    assert store.documents(CHINESE_TABLE, ["t2"])["t2"]["text"] == "普洱茶产于云南，是一种发酵茶。"


def test_resolve_takes_either_name_and_says_what_is_wrong(store):
    assert store.resolve("中文集合") == CHINESE_TABLE
    assert store.resolve(" 中文集合 ") == CHINESE_TABLE
    assert store.resolve(CHINESE_TABLE) == CHINESE_TABLE
    assert store.resolve("notes") == "notes"
    with pytest.raises(RetrievalError, match=r"^No collection named '英文集合' \(collections: 中文集合, notes\)$"):
        store.resolve("英文集合")
    with pytest.raises(RetrievalError, match="control character"):
        store.resolve("中文\x07")


def test_a_taken_name_is_refused_before_any_work(store):
    for taken in ("中文集合", " 中文集合", CHINESE_TABLE, "notes"):
        with pytest.raises(RetrievalError, match="already exists: add to it, or delete it first"):
            create_collection(store, taken, parse_bytes(TEA, "tea.csv"), model=MINILM)
    assert store.info(CHINESE_TABLE).doc_count == 2


def test_bad_display_names_write_nothing(store):
    before = store.display_names()
    for bad, message in (("", "Give the collection a name"), ("x" * 65, "65 characters long"),
                         ("a\x1bb", "control character")):
        with pytest.raises(RetrievalError, match=message):
            create_collection(store, bad, parse_bytes(TEA, "tea.csv"), model=MINILM)
    assert store.display_names() == before


def test_same_display_names_from_a_race_are_an_ambiguity_error(tmp_path):
    """Two catalogue entries with one display name (two processes racing on different table
    names): resolving that name asks for the table name instead of picking one."""
    store = Store(str(tmp_path))
    create_collection(store, "My Docs", parse_bytes(b"id,text\na,one\n", "a.csv"), model=MINILM)
    create_collection(store, "my docs", parse_bytes(b"id,text\nb,two\n", "b.csv"), model=MINILM)
    assert store.display_names() == {"my-docs": "My Docs", "my-docs-2": "my docs"}
    info = store.info("my-docs-2")
    info.display_name = "My Docs"
    store.write_info(info)
    with pytest.raises(RetrievalError, match=r"^2 collections are named 'My Docs' \(tables my-docs, my-docs-2\): "
                                             r"give the table name$"):
        store.resolve("My Docs")
    assert store.resolve("my-docs-2") == "my-docs-2"


# ---- a catalogue written before display names and truncation counts ------------------------------
OLD_FIELDS = ["name", "model", "dim", "tokenizer", "language", "doc_count", "created", "updated",
              "lancedb_version", "description"]


def to_old_catalogue(store: Store) -> None:
    """Rewrite the catalogue in the schema it had before `display_name` and `truncated`."""
    rows = store.db.open_table(CATALOGUE_TABLE).to_arrow().select(OLD_FIELDS)
    store.db.drop_table(CATALOGUE_TABLE)
    store.db.create_table(CATALOGUE_TABLE, rows)
    assert store.db.open_table(CATALOGUE_TABLE).schema.names == OLD_FIELDS


def test_an_old_catalogue_reads_and_is_migrated_by_the_first_write(tmp_path):
    store = Store(str(tmp_path))
    # (no cross-lingual vectors: collections from before them had none)
    create_collection(store, "pets", parse_bytes(b"id,text\np1,Dogs love walks\n", "p.csv"), model=MINILM,
                      cross_lingual=False)
    long_doc = " ".join(["word"] * 300).encode()
    create_collection(store, "long", parse_bytes(b"id,text\nl1," + long_doc + b"\n", "l.csv"), model=MINILM,
                      cross_lingual=False)
    to_old_catalogue(store)

    # reading: display name = table name, truncation not counted
    fresh = Store(str(tmp_path))
    assert [(i.name, i.label, i.truncated) for i in fresh.list_collections()] == [
        ("long", "long", None), ("pets", "pets", None)]
    assert fresh.info("pets").display_name == "pets" and fresh.resolve("pets") == "pets"
    assert fresh.display_names() == {"long": "long", "pets": "pets"}

    # the first write adds the new columns (one commit under the catalogue lock), then writes its entry
    more = parse_bytes(b"id,text\nl2," + long_doc + b"\nl3,short\n", "m.csv")
    result = add_documents(fresh, "long", more)
    assert result.truncated == 1
    schema = fresh.db.open_table(CATALOGUE_TABLE).schema
    assert schema.names == OLD_FIELDS + ["display_name", "truncated", "graph", "xl_model", "xl_dim", "encoder_backend"]
    assert schema.field("truncated").type == pa.int64() and schema.field("xl_dim").type == pa.int64()
    assert (fresh.info("pets").xl_model, fresh.info("pets").xl_dim) == ("", 0)  # null: no cross-lingual vectors
    assert {r["name"]: r["graph"] for r in fresh.db.open_table(CATALOGUE_TABLE).to_arrow().to_pylist()} == \
        {"pets": None, "long": ""}  # null reads as "" (built at ingest), the write set it
    assert fresh.info("pets").graph == ""
    rows = {r["name"]: r for r in fresh.db.open_table(CATALOGUE_TABLE).to_arrow().to_pylist()}
    assert (rows["pets"]["display_name"], rows["pets"]["truncated"]) == ("pets", None)  # filled, not counted
    # the add counted the stored long document too: 1 stored + 1 added
    assert (rows["long"]["display_name"], rows["long"]["truncated"], rows["long"]["doc_count"]) == ("long", 2, 3)
    assert fresh.info("long").truncated == 2
    # the backend that computed the vectors was not recorded, and one added batch does not tell it
    assert (rows["pets"]["encoder_backend"], rows["long"]["encoder_backend"]) == (None, "")
    assert fresh.info("pets").encoder_backend == fresh.info("long").encoder_backend == ""
    # a new collection with a display name now lands in the migrated catalogue
    create_collection(fresh, "中文集合", parse_bytes(TEA, "tea.csv"), model=MINILM)
    assert fresh.display_names() == {CHINESE_TABLE: "中文集合", "long": "long", "pets": "pets"}
    # clearing empties the count
    assert fresh.clear("long").truncated == 0 and fresh.info("long").truncated == 0


# ---- the CLI ---------------------------------------------------------------------------------
def test_the_cli_ingests_into_a_chinese_name_and_searches_by_it(tmp_path, capsys):
    (tmp_path / "tea.csv").write_bytes(TEA)
    db = str(tmp_path / "db")
    assert main(["--db", db, "ingest", str(tmp_path / "tea.csv"), "--collection", "中文集合", "--model", MINILM]) == 0
    err = capsys.readouterr().err
    assert (f"collection 中文集合 (table {CHINESE_TABLE}): 2 documents, model {MINILM} (384-d), cross-lingual "
            "vectors multilingual-e5-small, language zh;") in err

    assert main(["--db", db, "search", "中文集合", "普洱茶", "--json"]) == 0
    import json

    found = json.loads(capsys.readouterr().out)
    assert found["results"][0]["id"] == "t2"
    assert main(["--db", db, "search", CHINESE_TABLE, "普洱茶", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["results"][0]["id"] == "t2"

    assert main(["--db", db, "collections"]) == 0
    line = capsys.readouterr().out.splitlines()[0].split("\t")
    assert line[:5] == ["中文集合", CHINESE_TABLE, "2 docs", "0 truncated", f"{MINILM} (onnx-int8)"]
    assert main(["--db", db, "collections", "stats", "中文集合"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert (stats["info"]["display_name"], stats["info"]["name"], stats["doc_count"]) == ("中文集合", CHINESE_TABLE, 2)

    (tmp_path / "more.csv").write_bytes("id,text\nt3,铁观音是福建安溪出产的乌龙茶。\n".encode())
    assert main(["--db", db, "ingest", str(tmp_path / "more.csv"), "--collection", "中文集合", "--add"]) == 0
    assert f"collection 中文集合 (table {CHINESE_TABLE}): 3 documents" in capsys.readouterr().err

    assert main(["--db", db, "search", "英文集合", "茶"]) == 2
    assert "error: No collection named '英文集合' (collections: 中文集合)" in capsys.readouterr().err
    assert main(["--db", db, "ingest", str(tmp_path / "tea.csv"), "--collection", "中文集合"]) == 2
    assert "error: Collection '中文集合' already exists" in capsys.readouterr().err
    assert main(["--db", db, "collections", "delete", "中文集合"]) == 0
    assert f"deleted 中文集合 (table {CHINESE_TABLE})" in capsys.readouterr().err
    assert Store(db).collection_names() == []


# ---- the MCP server ----------------------------------------------------------------------------
def test_the_mcp_tools_show_and_accept_the_display_name(store):
    from retrieval.cli.main import build_parser
    from retrieval.search.workbench import Workbench
    from retrieval.serve.arguments import ToolProblem
    from retrieval.serve.server import build_service

    args = build_parser().parse_args(["--db", store.uri, "serve", "--collection", "中文集合", "--collection", "notes"])
    service = build_service(Workbench(store), args)
    assert service.default == CHINESE_TABLE
    listed = service.list_collections()["collections"]
    assert [(c["name"], c["display_name"], c["doc_count"]) for c in listed] == [
        (CHINESE_TABLE, "中文集合", 2), ("notes", "notes", 1)]
    found = service.retrieve("普洱茶", top_k=1, collection_name="中文集合")
    assert [r["id"] for r in found["results"]] == ["t2"] and found["search_info"]["collection"] == CHINESE_TABLE
    assert service.stats("中文集合")["info"]["display_name"] == "中文集合"
    with pytest.raises(ToolProblem, match=rf"^Collection '英文集合' is not served here; served: 中文集合 "
                                          rf"\({CHINESE_TABLE}\), notes \(default 中文集合 \({CHINESE_TABLE}\)\)$"):
        service.retrieve("茶", collection_name="英文集合")


# ---- invisible characters, compatibility forms and look-alikes (issue 41, item 14) --------------
@pytest.mark.parametrize("bad, code", [
    ("Te\u200da", "U+200D ZERO WIDTH JOINER, character 3"),
    ("Tea\u200b", "U+200B ZERO WIDTH SPACE, character 4"),
    ("\u202eaeT", "U+202E RIGHT-TO-LEFT OVERRIDE, character 1"),
    ("a\u202db", "U+202D LEFT-TO-RIGHT OVERRIDE, character 2"),
    ("a\u2067b\u2069", "U+2067 RIGHT-TO-LEFT ISOLATE, character 2"),
    ("\ufeffTea", "U+FEFF ZERO WIDTH NO-BREAK SPACE, character 1"),
    ("Te\u00ada", "U+00AD SOFT HYPHEN, character 3"),
    ("Tea\u3164", "U+3164 HANGUL FILLER, character 4"),
    ("T\u034fea", "U+034F COMBINING GRAPHEME JOINER, character 2"),
])
def test_invisible_and_bidi_control_characters_are_refused(bad, code):
    with pytest.raises(RetrievalError) as err:
        display_name(bad)
    assert str(err.value) == (f"Collection name contains an invisible or bidirectional control character ({code}); "
                              "use visible characters only")


def test_display_names_are_nfkc():
    assert display_name("Ｔｅａ") == "Tea"  # full-width letters
    assert display_name("ﬁles №1") == "files No1"  # ligature, numero sign
    assert display_name("Cafe\u0301") == "Café" and display_name("中文集合") == "中文集合"
    assert display_name("Ἀθῆναι (Athens) 🏛") == "Ἀθῆναι (Athens) 🏛"


def test_confusables_of_existing_names_are_found():
    cyrillic, greek = "\u0422\u0435\u0430", "\u03a4\u0435\u03b1"  # Теа, Τеα
    assert confusable_of(cyrillic, ["notes", "Tea"]) == "Tea"
    assert confusable_of("Tea", [cyrillic]) == cyrillic and confusable_of(greek, ["Tea"]) == "Tea"
    assert confusable_of("Tea", ["Tea", "Tee", "tea", "中文集合"]) is None  # itself, other names
    assert confusable_of("\u0440\u0430\u0443\u0440\u0430\u04cf", ["paypal"]) == "paypal"  # раураӏ
    assert confusable_of("中文集合", ["中文集合"]) is None
    # The list shows a table name beside names that read the same.
    assert labels({"tea": "Tea", "c-1": cyrillic, "notes": "notes"}) == {
        "tea": "Tea (tea)", "c-1": f"{cyrillic} (c-1)", "notes": "notes"}


def test_a_look_alike_name_is_created_with_a_warning_in_every_front_end(tmp_path, capsys):
    from retrieval.indexing.readers.options import ParseOptions
    from retrieval.search.workbench import Workbench
    from ui.corpus.actions import ingest as ui_ingest

    store = Store(str(tmp_path / "db"))
    create_collection(store, "Tea", parse_bytes(GREEN, "tea.csv"), model=MINILM)
    cyrillic = "\u0422\u0435\u0430"
    warning = (f"the name '{cyrillic}' looks like the existing collection 'Tea' but is spelled with other "
               "characters (U+0422 CYRILLIC CAPITAL LETTER TE, U+0435 CYRILLIC SMALL LETTER IE, U+0430 CYRILLIC "
               "SMALL LETTER A): rename it if that was not meant")
    result = create_collection(store, cyrillic, parse_bytes(GREEN, "tea.csv"), model=MINILM)
    assert warning in result.note
    report = ui_ingest(Workbench(store), [("tea.csv", GREEN)], ParseOptions(), "\u03a4ea", model=MINILM)
    assert "The name 'Τea' looks like the existing collection" in report.message
    (tmp_path / "tea.csv").write_bytes(GREEN)
    db = str(tmp_path / "db")
    capsys.readouterr()
    assert main(["--db", db, "ingest", str(tmp_path / "tea.csv"), "--collection", "T\u0435a", "--model", MINILM]) == 0
    assert "the name 'Tеa' looks like the existing collection" in capsys.readouterr().err
    # An invisible character: the same refusal in the CLI and the UI, nothing written.
    before = store.display_names()
    assert main(["--db", db, "ingest", str(tmp_path / "tea.csv"), "--collection", "Te\u200da", "--model", MINILM]) == 2
    assert "invisible or bidirectional control character (U+200D ZERO WIDTH JOINER" in capsys.readouterr().err
    with pytest.raises(RetrievalError, match="invisible or bidirectional control character"):
        ui_ingest(Workbench(store), [("tea.csv", GREEN)], ParseOptions(), "Te\u200da", model=MINILM)
    assert store.display_names() == before
    # `serve --collection` resolves its names through the same check.
    assert main(["--db", db, "serve", "--collection", "Te\u200da"]) == 2
    assert "invisible or bidirectional control character (U+200D" in capsys.readouterr().err
