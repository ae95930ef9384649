"""Store integration: real files, real bundled models, a LanceDB folder per test module."""

import pytest

from retrieval.indexing.pipeline import add_documents, create_collection
from retrieval.indexing.readers.parse import parse_bytes
from retrieval.store import Store, validate_collection_name
from retrieval.types import IngestError, RetrievalError

PETS_CSV = """id,title,text,category,quality
p1,Dogs,Dogs are loyal animals that love long walks in the park.,pets,4.5
p2,Cats,Cats sleep most of the day and hunt mice at night.,pets,3.0
p3,Parrots,Parrots can imitate human speech and live for decades.,birds,4.0
p4,Goldfish,A goldfish needs a clean tank and a filter.,fish,2.5
"""

# The same kind of table, GBK-encoded, as Chinese spreadsheets are often saved.
TEA_CSV_GBK = """编号,标题,正文
t1,龙井茶,龙井茶产于浙江杭州西湖，是著名的绿茶。
t2,普洱茶,普洱茶产于云南，是一种发酵茶，越陈越香。
t3,铁观音,铁观音是福建安溪出产的乌龙茶。
""".encode("gbk")

HISTORY_MD = """# 三国战役

## 赤壁之战
公元208年，孙权与刘备联军在赤壁以火攻大败曹操。

## 官渡之战
公元200年，曹操在官渡击败袁绍，奠定统一北方的基础。
"""


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return Store(str(tmp_path_factory.mktemp("lancedb")))


@pytest.fixture(scope="module")
def pets(store):
    create_collection(store, "pets", parse_bytes(PETS_CSV.encode(), "pets.csv"))
    return "pets"


def test_collection_names_are_validated():
    assert validate_collection_name("nf-corpus_2") == "nf-corpus_2"
    for bad in ("", "Upper", "../etc", "a b", "_catalogue", "x" * 65, "a.b"):
        with pytest.raises(RetrievalError, match="Invalid collection name"):
            validate_collection_name(bad)


def test_create_records_catalogue_and_stats(store, pets):
    info = store.info(pets)
    assert (info.model, info.dim, info.language, info.doc_count) == ("all-MiniLM-L6-v2", 384, "en", 4)
    assert info.tokenizer == "jieba+snowball-english/v2"
    assert [i.name for i in store.list_collections()] == ["pets"]
    assert store.collection_names() == ["pets"]
    stats = store.stats(pets)
    assert stats.doc_count == 4 and stats.language_mix == {"en": 4, "zh": 0}
    assert stats.metadata_fields == ["category", "quality"]
    row = store.documents(pets, ["p1"])["p1"]
    assert row["metadata"] == {"category": "pets", "quality": 4.5}
    # title and text are tokenised together; stopwords dropped, stems kept
    assert row["tokens"] == "dog dog loyal anim love long walk park"


def test_rejected_add_leaves_collection_exactly_as_it_was(store, pets):
    before_version, before_count = store.version(pets), store.info(pets).doc_count
    clash = parse_bytes(b"id,text\np9,A new hamster\np2,Duplicate of the cats row\n", "more.csv")
    with pytest.raises(IngestError, match="already exist") as err:
        add_documents(store, pets, clash)
    assert "id 'p2' is already in the collection" in err.value.problems
    assert store.version(pets) == before_version
    assert store.info(pets).doc_count == before_count
    assert "p9" not in store.documents(pets, ["p9"])


def test_add_then_clear_then_delete(store, tmp_path):
    name = "scratch"
    create_collection(store, name, parse_bytes(b"id,text\na,first text\n", "a.csv"))
    with pytest.raises(RetrievalError, match="already exists"):
        create_collection(store, name, parse_bytes(b"id,text\nb,second\n", "b.csv"))
    info = add_documents(store, name, parse_bytes(b"id,text\nb,second text\n", "b.csv")).info
    assert info.doc_count == 2
    assert store.clear(name).doc_count == 0
    assert store.stats(name).doc_count == 0
    store.delete(name)
    assert not store.exists(name)
    with pytest.raises(RetrievalError, match="No collection named 'scratch'"):
        store.info(name)


def test_gbk_csv_chooses_multilingual_model_and_keeps_chinese(store):
    corpus = parse_bytes(TEA_CSV_GBK, "tea.csv")
    assert corpus.encoding == "gbk"
    info = create_collection(store, "tea", corpus).info
    assert (info.model, info.language) == ("multilingual-e5-small", "zh")
    row = store.documents("tea", ["t2"])["t2"]
    assert row["text"] == "普洱茶产于云南，是一种发酵茶，越陈越香。"
    assert row["tokens"].split()[:3] == ["普洱茶", "普洱茶", "产于"]


def test_markdown_chunks_keep_positions(store):
    corpus = parse_bytes(HISTORY_MD.encode(), "battles.md")
    create_collection(store, "battles", corpus)
    rows = store.documents("battles", [d.id for d in corpus.documents])
    chibi = next(r for r in rows.values() if r["title"] == "赤壁之战")
    assert chibi["parent_id"] == "battles"
    # the heading is line 3; the chunk text is exactly line 4
    assert (chibi["start_line"], chibi["end_line"]) == (4, 4)
    assert chibi["text"] == "公元208年，孙权与刘备联军在赤壁以火攻大败曹操。"


def test_no_title_is_stored_as_null_and_read_back_as_empty(store):
    """Lance lays out an all-"" column so that a 10-row take from 1M rows reads 7.5 ms of it
    (null: 2 ms; docs/experiments/peers.md): a document without a title stores null, and every
    reader gets "" back, as it always did."""
    from retrieval.indexing.derive import document_records, documents_of
    from retrieval.types import Document

    documents = [Document("a", "Hens lay eggs.", title="Hens"), Document("b", "Owls hunt at night.")]
    assert document_records(documents).column("title").to_pylist() == ["Hens", None]
    assert [d.title for d in documents_of(document_records(documents))] == ["Hens", ""]
    corpus = parse_bytes(b"id,text\nb,Owls hunt mice at night.\nc,Cats sleep by day.\n", "untitled.csv")
    name = create_collection(store, "untitled", corpus).info.name
    assert store.column(name, ["id", "title"]).to_pylist() == [{"id": "b", "title": None}, {"id": "c", "title": None}]
    rows = store.documents(name, ["b", "c"])
    assert rows["b"]["title"] == rows["c"]["title"] == "" and rows["b"]["text"] == "Owls hunt mice at night."
    row_ids = {r["id"]: r["_rowid"] for r in store.table(name).search().select(["id"]).with_row_id(True)
               .limit(None).to_arrow().to_pylist()}
    assert store.documents(name, ["b"], row_ids) == {"b": rows["b"]}  # taken by row id: the same row


def test_a_handle_at_a_state_reads_that_version_whatever_is_written_after(store):
    corpus = parse_bytes(b"id,text\na,Owls hunt mice at night.\nb,Cats sleep by day.\n", "pinned.csv")
    name = create_collection(store, "pinned", corpus).info.name
    state = store.state_key(name)
    handle = store.table_at(name, state)
    assert store.table_at(name, state) is handle and handle.version == state[1]
    add_documents(store, name, parse_bytes(b"id,text\nc,Hens lay eggs.\n", "more.csv"))
    later = store.state_key(name)
    assert later[1] > state[1] and store.table_at(name, later) is not handle
    assert handle.count_rows() == 2 and store.table(name).count_rows() == 3
    assert sorted(store.column(name, ["id"], state).column("id").to_pylist()) == ["a", "b"]
    assert sorted(store.column(name, ["id"], later).column("id").to_pylist()) == ["a", "b", "c"]
    # a state of a collection deleted since (a re-created one gets a new handle id) is refused
    store.delete(name)
    create_collection(store, name, corpus)
    with pytest.raises(RetrievalError, match="deleted or restored while it was being read"):
        store.table_at(name, later)


def test_the_catalogue_records_which_backend_computed_the_vectors(tmp_path, monkeypatch):
    """A new collection records its encoder's backend; an add on another backend records both,
    and the vector source then says its query vectors and the collection's differ."""
    from retrieval.indexing.plan import vectors_backend
    from retrieval.models import embed
    from retrieval.search.workbench import Workbench

    assert vectors_backend("", ["onnx-int8"], new=True) == "onnx-int8"
    assert vectors_backend("onnx-int8", ["onnx-int8"]) == "onnx-int8"
    assert vectors_backend("torch", ["onnx-int8"]) == vectors_backend("onnx-int8+torch", ["torch"]) == "onnx-int8+torch"
    assert vectors_backend("", ["onnx-int8"]) == ""  # not recorded before: one write does not tell

    store = Store(str(tmp_path))
    create_collection(store, "pets", parse_bytes(PETS_CSV.encode(), "pets.csv"), model="all-MiniLM-L6-v2",
                      cross_lingual=False)
    assert store.info("pets").encoder_backend == embed.CPU_BACKENDS["all-MiniLM-L6-v2"] == "onnx-int8"
    assert "query vectors" not in Workbench(store).backends("pets")["dense"]

    with monkeypatch.context() as patch:  # the next write embeds on torch
        patch.setattr(embed, "_encoders", {})
        patch.setenv(embed.BACKEND_ENV, "torch")
        add_documents(store, "pets", parse_bytes(b"id,text\np9,Hamsters store food in their cheeks.\n", "more.csv"))
    assert store.info("pets").encoder_backend == "onnx-int8+torch"
    dense = Workbench(Store(str(tmp_path))).backends("pets")["dense"]
    assert dense.endswith("; query vectors from onnx-int8, the collection's from onnx-int8+torch "
                          "(re-ingest it to match)"), dense


def test_every_spelling_of_a_database_takes_the_same_locks(tmp_path, monkeypatch):
    """The writer locks are found by the database's URI: `file://` and the folder, or two spellings
    of one bucket path, must not take two sets of locks (a rollback could then undo the other's commit)."""
    from retrieval.store.tables import canonical_uri

    folder = tmp_path / "db"
    plain, url = Store(str(folder)), Store(f"file://{folder}")
    assert url.uri == str(folder) and url.lock_dir == plain.lock_dir == folder / "_workbench_locks"
    assert Store(f"FILE://localhost{folder}").uri == str(folder)
    assert canonical_uri("S3://bucket//workbench/db/") == canonical_uri("s3://bucket/workbench/db") == \
        "s3://bucket/workbench/db"
    monkeypatch.setenv("WORKBENCH_LOCK_DIR", str(tmp_path / "locks"))
    from retrieval.store.locks import lock_dir

    assert lock_dir(canonical_uri("s3://bucket//workbench/db/")) == lock_dir(canonical_uri("s3://bucket/workbench/db"))
    assert canonical_uri("S3+DDB://bucket/db/?ddbTableName=commits") == "s3+ddb://bucket/db?ddbTableName=commits"
    assert canonical_uri("s3://bucket/") == canonical_uri("s3://bucket") == "s3://bucket"
    for bad, message in [("s3://bucket/db?region=x", "query or fragment"), ("file://elsewhere/db", "another host")]:
        with pytest.raises(RetrievalError, match=message):
            Store(bad)


def test_an_add_prepared_for_a_collection_deleted_and_created_again_writes_nothing(store):
    """An add derives its rows (model, vector columns) from the entry it read before taking the
    lock; another process may delete the collection and create it again meanwhile, with another
    model of the same dimension: under the lock the add is refused, nothing written."""
    from retrieval.indexing.pipeline import write_documents
    from retrieval.models.embed import E5, MINILM

    create_collection(store, "race", parse_bytes(PETS_CSV.encode(), "pets.csv"), model=MINILM, cross_lingual=False)
    prepared = store.info("race")
    store.delete("race")
    create_collection(store, "race", parse_bytes(PETS_CSV.encode(), "pets.csv"), model=E5, cross_lingual=False)
    before = (store.version("race"), store.info("race"))
    more = parse_bytes(b"id,text\np9,A new hamster runs in its wheel\n", "more.csv").documents
    with pytest.raises(RetrievalError, match=r"'race' was deleted and created again \(.*model.*\)"):
        write_documents(store, prepared, [more], 1, create=False)
    assert (store.version("race"), store.info("race")) == before and not store.documents("race", ["p9"])


def test_a_collection_created_again_by_another_process_is_a_new_state_for_every_reader(tmp_path):
    """LanceDB restarts a table's version numbers when it is dropped and created again, so another
    process's delete and re-create can end at the version a reader's caches know; the id the
    create records beside the lock changes every process's state key, and its searches read the
    new collection."""
    from retrieval.search.config import SearchConfig
    from retrieval.search.workbench import Workbench

    db = str(tmp_path / "db")
    reader, writer = Workbench(Store(db)), Workbench(Store(db))  # two processes' stores and caches
    bm25 = SearchConfig(weights={"bm25": 1.0, "dense": 0.0})
    bm25_hits = lambda: [h.doc_id for h in reader.search("c", "goldfish", bm25).candidates.sources["bm25"].hits]  # noqa: E731
    create_collection(writer.store, "c", parse_bytes(PETS_CSV.encode(), "pets.csv"))
    before = reader.store.state_key("c")
    assert bm25_hits() == ["p4"]
    writer.store.delete("c")
    tea = PETS_CSV.replace("p4,Goldfish,A goldfish needs a clean tank and a filter.",
                           "p4,Tea,Green tea is steamed after picking.")
    create_collection(writer.store, "c", parse_bytes(tea.encode(), "pets.csv"))
    after = reader.store.state_key("c")
    assert after[1] == before[1] and after[0] != before[0]  # the same version number, another collection
    assert after == writer.store.state_key("c")  # one id for every process
    assert bm25_hits() == []  # not the old collection's cached index
    assert reader.store.documents("c", ["p4"])["p4"]["text"] == "Green tea is steamed after picking."


def test_two_creates_of_one_display_name_cannot_both_commit(tmp_path):
    """Two creates of "My Docs" get different table names once the first has written a table
    ("my-docs", "my-docs-2"), so different collection locks; the display name is claimed from
    start to commit, and the second is told at once (here: two stores, as two processes)."""
    db = str(tmp_path / "db")
    first, second = Store(db), Store(db)
    pets = parse_bytes(PETS_CSV.encode(), "pets.csv")
    busy = "'My Docs' is being created by another writer right now"
    # the first create, between its first batch and its commit
    with first.claim_display_name("My Docs"), pytest.raises(RetrievalError, match=busy):
        create_collection(second, "My Docs", pets, cross_lingual=False)
    assert second.collection_names() == []
    create_collection(second, "My Docs", pets, cross_lingual=False)
    with pytest.raises(RetrievalError, match="'My Docs' already exists"):
        create_collection(first, "My Docs", pets, cross_lingual=False)
    assert [i.label for i in first.list_collections()] == ["My Docs"]


def test_the_journal_is_on_disk_before_any_table_is_touched(tmp_path, monkeypatch):
    """A power cut, not only a kill, must leave no journal (and no table changed) or the whole one:
    the journal's file and its folder are synced before the write's first step."""
    from retrieval.judging.judgments import JudgmentStore
    from retrieval.store import journal as store_journal

    store = Store(str(tmp_path / "db"))
    create_collection(store, "pets", parse_bytes(PETS_CSV.encode(), "pets.csv"), cross_lingual=False)
    events: list[str] = []
    real_fsync, real_crash_point = store_journal.os.fsync, store_journal.crash_point
    monkeypatch.setattr(store_journal.os, "fsync", lambda fd: events.append("fsync") or real_fsync(fd))
    monkeypatch.setattr(store_journal, "crash_point", lambda step: events.append(step) or real_crash_point(step))
    JudgmentStore(store).rate("pets", "default", "which pet hunts mice", "p2", 2)
    assert events[:3] == ["fsync", "fsync", "ratings:journal"]
    assert not list(store.lock_dir.glob("*.journal.json")) and not list(store.lock_dir.glob("*.tmp"))
