"""A collection's versions and what each changed (retrieval/store/versions.py), on a real ingest, add and clear."""

from corpora import ANIMALS

from retrieval.indexing.pipeline import add_documents, create_collection
from retrieval.indexing.readers.parse import parse_bytes
from retrieval.store import Store
from retrieval.store.versions import collection_versions

MORE = b"id,title,text\nbat,Bats,\"Bats hunt insects at night with echoes.\"\n"


def test_versions_say_what_each_write_changed(tmp_path, capsys):
    store = Store(str(tmp_path / "db"))
    create_collection(store, "animals", parse_bytes(ANIMALS.encode(), "animals.csv"))
    add_documents(store, "animals", parse_bytes(MORE, "more.csv"))
    store.clear("animals")
    versions = collection_versions(store, "animals", limit=100)
    assert [v.version for v in versions] == sorted((v.version for v in versions), reverse=True)  # newest first
    assert versions[0].version == store.table("animals").version and versions[-1].first
    assert sum(v.added - v.removed for v in versions) == 0 == versions[0].documents  # everything was cleared
    added = [v for v in versions if v.added and not v.first]
    assert [(v.added, v.removed, v.documents) for v in added] == [(1, 0, 7)]  # the bat
    assert added[0].summary == "1 added"
    cleared = [v for v in versions if v.removed]
    assert [(v.added, v.removed, v.documents, v.summary) for v in cleared] == [(0, 7, 0, "7 removed")]
    quiet = [v for v in versions if not v.first and not v.added and not v.removed]
    assert all(v.summary.startswith("no document changed") for v in quiet)
    # only the newest two, each still measured against the version before it
    assert collection_versions(store, "animals", limit=2) == versions[:2]
    from retrieval.cli import main as cli

    assert cli.main(["--db", str(tmp_path / "db"), "collections", "versions", "animals"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [f"v{v.version}\t{v.timestamp}\t{v.documents} documents\t{v.summary}" for v in versions[:20]]
