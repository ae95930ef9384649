"""Search against an earlier version of a collection (versions.StoreAtVersion, Workbench.at_version):
what version N returns now is what it returned when N was current, on every source and backend."""

from datetime import timedelta

import pytest
from corpora import ANIMALS

from retrieval.indexing.readers.parse import parse_bytes
from retrieval.search.config import SearchConfig
from retrieval.search.result_json import search_json
from retrieval.search.workbench import Workbench
from retrieval.store import Store
from retrieval.types import RetrievalError

MORE = (b"id,title,text\n"
        b"bat,Bats,\"Bats hunt insects at night with echoes and sleep all day.\"\n"
        b"moth,Moths,\"Moths fly at night and are hunted by bats and owls.\"\n")
QUERIES = ["hunt at night", "small animals that hunt mice", "birds of prey"]
CONFIGS = {
    "weighted": SearchConfig(),
    "native bm25": SearchConfig(weights={"bm25": 1.0}, bm25_backend="lancedb"),
    "all sources, rrf": SearchConfig(weights={"bm25": 1.0, "dense": 1.0, "keyword": 0.5, "graph": 0.5},
                                     fusion="rrf"),
}


def shown(workbench: Workbench, collection: str, query: str, config: SearchConfig) -> dict:
    """What a search shows (ids, every score, every source's rank and contribution, notes)."""
    out = search_json(workbench.search(collection, query, config))
    out.pop("backends")
    return out


@pytest.fixture
def changed(tmp_path):
    """A collection searched at version N, then grown by two documents; the answers of then."""
    workbench = Workbench(Store(str(tmp_path / "db")))
    workbench.graph.in_background = False
    workbench.create("animals", parse_bytes(ANIMALS.encode(), "animals.csv"))
    version = workbench.store.version("animals")
    then = {(name, q): shown(workbench, "animals", q, c) for name, c in CONFIGS.items() for q in QUERIES}
    workbench.add("animals", parse_bytes(MORE, "more.csv"))
    return workbench, version, then


def test_a_search_at_version_n_returns_what_it_returned_then(changed):
    workbench, version, then = changed
    now = {(name, q): shown(workbench, "animals", q, c) for name, c in CONFIGS.items() for q in QUERIES}
    assert now != then  # the two new documents changed today's answers ...
    assert any("bat" in [r["id"] for r in answer["results"]] for answer in now.values())
    past = workbench.at_version("animals", version)
    again = {(name, q): shown(past, "animals", q, c) for name, c in CONFIGS.items() for q in QUERIES}
    assert again == then  # ... not version N's: same ids, scores, ranks, contributions and notes
    assert past.info("animals").doc_count == 6 and workbench.info("animals").doc_count == 8
    assert past.store.version("animals") == version < workbench.store.version("animals")
    assert workbench.at_version("animals", version) is past  # kept


def test_an_earlier_version_is_read_only(changed):
    workbench, version, _ = changed
    past = workbench.at_version("animals", version)
    for write in (lambda: past.add("animals", parse_bytes(MORE, "more.csv")), lambda: past.clear("animals"),
                  lambda: past.delete("animals")):
        with pytest.raises(RetrievalError, match=f"read-only at version {version}"):
            write()
    assert workbench.info("animals").doc_count == 8  # nothing was changed
    assert past.info("animals").doc_count == 6


def test_an_unknown_or_compacted_version_is_a_clear_error(changed):
    workbench, version, _ = changed
    latest = workbench.store.version("animals")
    with pytest.raises(RetrievalError, match=rf"'animals' has no version 999 \(its versions: v1–v{latest}\)"):
        workbench.at_version("animals", 999)
    with pytest.warns(UserWarning, match="removes every version except the latest"):
        workbench.store.table("animals").optimize(cleanup_older_than=timedelta(0), delete_unverified=True)
    [kept] = [v["version"] for v in workbench.store.table("animals").list_versions()]
    with pytest.raises(RetrievalError, match=rf"Version {version} of 'animals' no longer exists: a compaction "
                                             rf"removed it \(versions kept: v{kept}\)"):
        Workbench(workbench.store).at_version("animals", version)


def test_before_a_clear_the_graph_is_read_from_the_documents_of_then(changed):
    """A clear drops the entity tables, so the graph of a version before it is extracted from that
    version's own documents: the graph source still ranks the six animals, not today's one bat."""
    workbench, version, _ = changed
    workbench.clear("animals")
    workbench.add("animals", parse_bytes(MORE, "more.csv"))
    past = workbench.at_version("animals", version)
    assert not past.store.has_graph_tables("animals") and workbench.store.has_graph_tables("animals")
    result = past.search("animals", "hunt mice at night", SearchConfig(weights={"graph": 1.0, "bm25": 1.0}))
    ids = {r.doc_id for r in result.outcome.results}
    assert ids and ids <= {"cat", "dog", "owl", "bee", "fox", "cow"}


def test_the_cli_searches_an_earlier_version(changed, capsys):
    """`search … --at-version N --json` prints what version N returned; a compacted or unknown
    version is a one-line error (exit 2)."""
    import json

    from retrieval.cli import main as cli

    workbench, version, then = changed
    db = workbench.store.uri
    assert cli.main(["--db", db, "search", "animals", QUERIES[0], "--at-version", str(version), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    out.pop("backends")
    assert out == then[("weighted", QUERIES[0])]
    assert cli.main(["--db", db, "search", "animals", QUERIES[0], "--at-version", "999"]) == 2
    assert "'animals' has no version 999" in capsys.readouterr().err
