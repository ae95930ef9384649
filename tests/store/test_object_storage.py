"""The store on object storage: an S3-compatible server on 127.0.0.1 (moto's server mode), the
real pipeline and models, `s3://…` URIs with LanceDB's storage options (docs/scale.md).

Ingest, search (BM25 both backends, dense), add, a failed add, a rating, a saved config, clear
and delete against
`s3://bucket/…`, with the same rankings as on local disk; and two real processes opening one
`s3://` store (the second configured only by environment variables, as `./run.sh app` is) seeing
each other's writes.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
from moto.server import ThreadedMotoServer

from retrieval.indexing.readers.parse import parse_bytes
from retrieval.search.config import SearchConfig
from retrieval.search.workbench import Workbench
from retrieval.store import Store, default_storage_options, lock_dir
from retrieval.types import Document, ParsedCorpus, RetrievalError

REPO = Path(__file__).resolve().parents[2]
PEER = REPO / "tests" / "object_storage_peer.py"
BUCKET = "workbench-test"
# The first 20 English paragraphs of the bundled sample, through the real parser.
EN_LINES = [line for line in (REPO / "sample_data" / "xquad" / "corpus.jsonl").read_text("utf-8").splitlines()
            if '"_id": "en-' in line][:20]
# Sample questions and the paragraph their judgment names (sample_data/xquad/qrels/test.tsv).
KNOWN = {"How many career sacks did Jared Allen have?": "en-001",
         "Who lost to the Broncos in the divisional round?": "en-002"}
SOURCES = {"bm25 (rank-bm25)": SearchConfig(weights={"bm25": 1.0}),
           "bm25 (LanceDB native index)": SearchConfig(weights={"bm25": 1.0}, bm25_backend="lancedb"),
           "dense": SearchConfig(weights={"dense": 1.0})}


def corpus() -> object:
    return parse_bytes("\n".join(EN_LINES).encode(), "corpus.jsonl")


@pytest.fixture(scope="module")
def s3():
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one access-log line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    options = {"aws_endpoint": endpoint, "aws_access_key_id": "test", "aws_secret_access_key": "test",
               "aws_region": "us-east-1", "allow_http": "true"}
    client = boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="test", aws_secret_access_key="test",
                          region_name="us-east-1")
    client.create_bucket(Bucket=BUCKET)
    yield {"options": options, "client": client, "endpoint": endpoint}
    server.stop()


@pytest.fixture
def locks(tmp_path, monkeypatch):
    folder = tmp_path / "locks"
    monkeypatch.setenv("WORKBENCH_LOCK_DIR", str(folder))
    return folder


def keys(s3, prefix: str) -> list[str]:
    pages = s3["client"].get_paginator("list_objects_v2").paginate(Bucket=BUCKET, Prefix=prefix)
    return [item["Key"] for page in pages for item in page.get("Contents", [])]


def ranking(workbench: Workbench, collection: str, query: str, config: SearchConfig) -> list[str]:
    return [r.doc_id for r in workbench.search(collection, query, config).outcome.results]


def test_ingest_search_add_clear_delete_on_s3(s3, locks, tmp_path, monkeypatch):
    uri = f"s3://{BUCKET}/single/db"
    remote = Workbench(Store(uri, storage_options=s3["options"]))
    local = Workbench(Store(str(tmp_path / "local")))
    for workbench in (remote, local):
        info = workbench.create("xquad-en", corpus()).info
        assert (info.doc_count, info.model) == (20, "all-MiniLM-L6-v2")

    # The tables are objects in the bucket; locally there are only the lock files.
    assert any(k.startswith("single/db/xquad-en.lance/") for k in keys(s3, "single/db/"))
    assert any(k.startswith("single/db/_catalogue.lance/") for k in keys(s3, "single/db/"))
    assert remote.store.lock_dir == lock_dir(uri) and remote.store.lock_dir.parent == locks
    assert not list(locks.rglob("*.lance")) and not list(locks.rglob("*.journal.json"))
    assert remote.collection_names() == ["xquad-en"] and remote.info("xquad-en").doc_count == 20

    for label, config in SOURCES.items():
        for query, expected in KNOWN.items():
            on_s3 = ranking(remote, "xquad-en", query, config)
            assert on_s3[0] == expected, (label, query, on_s3[:3])
            assert on_s3 == ranking(local, "xquad-en", query, config), (label, query)

    # add, then a failing add (after its rows and index were written) rolled back on S3
    remote.add("xquad-en", ParsedCorpus([Document("zep", "The zeppelin Hindenburg burned at Lakehurst in 1937.")]))
    for label, config in SOURCES.items():
        assert ranking(remote, "xquad-en", "zeppelin Hindenburg Lakehurst", config)[0] == "zep", label
    version = remote.store.version("xquad-en")

    def fail(info):
        raise RuntimeError("catalogue write failed")

    monkeypatch.setattr(remote.store, "write_info", fail)
    with pytest.raises(RuntimeError, match="catalogue write failed"):
        remote.add("xquad-en", ParsedCorpus([Document("lost", "A balloon crossed the Channel.")]))
    monkeypatch.undo()
    ids = remote.store.column("xquad-en", ["id"]).column("id").to_pylist()
    assert len(ids) == 21 and "lost" not in ids and "zep" in ids
    assert remote.store.version("xquad-en") > version  # restored by a new version
    assert remote.info("xquad-en").doc_count == 21
    assert ranking(remote, "xquad-en", "balloon Channel", SOURCES["bm25 (LanceDB native index)"]) == []
    assert not list(locks.rglob("*.journal.json"))

    # ratings (query set and judgment tables beside the collection) and saved configs
    remote.judgments.rate("xquad-en", "mine", "zeppelin", "zep", 3)
    assert remote.judgments.ratings("xquad-en", "mine", "zeppelin") == {"zep": 3}
    remote.configs.save("dense-only", SOURCES["dense"])
    assert Workbench(Store(uri, storage_options=s3["options"])).configs.load("dense-only") == SOURCES["dense"]

    assert remote.clear("xquad-en").doc_count == 0
    assert remote.judgments.ratings("xquad-en", "mine", "zeppelin") == {"zep": 3}  # clear keeps judgments
    assert remote.store.column("xquad-en", ["id"]).num_rows == 0
    with pytest.raises(RetrievalError, match="'xquad-en' has no documents"):
        ranking(remote, "xquad-en", "zeppelin", SOURCES["bm25 (rank-bm25)"])

    remote.delete("xquad-en")
    assert remote.collection_names() == [] and not remote.exists("xquad-en")
    with pytest.raises(RetrievalError, match="No collection named 'xquad-en'"):
        remote.search("xquad-en", "zeppelin", SOURCES["dense"])
    assert not Workbench(Store(uri, storage_options=s3["options"])).collection_names()  # a fresh connection too
    assert not [k for k in keys(s3, "single/db/") if k.startswith("single/db/xquad-en.lance/")]


def peer(s3, uri: str, locks: Path, *args: str) -> dict:
    """The second app process: a real interpreter configured by the environment only."""
    env = {**os.environ, "WORKBENCH_DB": uri, "WORKBENCH_STORAGE_OPTIONS": json.dumps(s3["options"]),
           "WORKBENCH_LOCK_DIR": str(locks), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "OMP_WAIT_POLICY": "PASSIVE", "LANCEDB_LOG": "error"}
    done = subprocess.run([sys.executable, str(PEER), *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_two_app_processes_sharing_an_s3_store_see_each_others_writes(s3, locks):
    uri = f"s3://{BUCKET}/shared/db"
    first = Workbench(Store(uri, storage_options=s3["options"]))
    first.create("common", corpus())
    query = "How many career sacks did Jared Allen have?"
    assert ranking(first, "common", query, SOURCES["bm25 (rank-bm25)"])[0] == "en-001"
    zeppelin = "zeppelin Hindenburg Lakehurst"
    assert ranking(first, "common", zeppelin, SOURCES["bm25 (rank-bm25)"]) == []  # cached: not there yet

    # The second process sees the collection the first created, with the same answer; then it
    # writes, and the first process, its handles and caches warm, sees the write at its next read.
    seen = peer(s3, uri, locks, "common", query, "zep", "The zeppelin Hindenburg burned at Lakehurst in 1937.")
    added = seen.pop("added")
    assert seen == {"uri": uri, "collections": ["common"], "top": "en-001", "doc_count": 20}
    assert added["doc_count"] == 21
    assert first.store.version("common") == added["version"]
    assert first.info("common").doc_count == 21
    for label, config in SOURCES.items():
        assert ranking(first, "common", zeppelin, config)[0] == "zep", label

    # The first deletes; the second no longer lists it.
    first.delete("common")
    assert peer(s3, uri, locks, "common", query) == {"uri": uri, "collections": []}


def test_remote_locks_are_local_and_one_folder_per_uri(locks):
    a, b = lock_dir("s3://bucket/one"), lock_dir("s3://bucket/two")
    assert a.parent == b.parent == locks and a != b and a == lock_dir("s3://bucket/one/")
    assert lock_dir("/data/db") == Path("/data/db") / "_workbench_locks"


def test_storage_options_come_from_the_environment(monkeypatch):
    monkeypatch.delenv("WORKBENCH_STORAGE_OPTIONS", raising=False)
    assert default_storage_options() is None
    monkeypatch.setenv("WORKBENCH_STORAGE_OPTIONS", '{"aws_endpoint": "http://127.0.0.1:9", "allow_http": "true"}')
    assert default_storage_options() == {"aws_endpoint": "http://127.0.0.1:9", "allow_http": "true"}
    for bad in ("{not json", '["a"]', '{"allow_http": true}'):
        monkeypatch.setenv("WORKBENCH_STORAGE_OPTIONS", bad)
        with pytest.raises(RetrievalError, match="WORKBENCH_STORAGE_OPTIONS"):
            default_storage_options()
