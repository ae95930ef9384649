"""`python -m retrieval serve`, through the official MCP SDK's own clients: stdio (read-only) and
streamable HTTP (a bearer token, write tools enabled), one server process each for the module.

Collections live in a temporary LanceDB: the bundled XQuAD sample's English paragraphs, the
bundled data-source catalogue and a small Q&A CSV written here, all embedded with MiniLM (one
model load per process)."""

from __future__ import annotations

import dataclasses
import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp_client import run_async, server_env, tool_data, tool_ranking

from retrieval.cli.main import main
from retrieval.indexing.pipeline import create_collection
from retrieval.indexing.readers.parse import parse_path
from retrieval.models.embed import MINILM
from retrieval.search.config import SearchConfig
from retrieval.search.workbench import Workbench
from retrieval.serve.tuning_tools import TUNING_TOOLS
from retrieval.store import Store
from retrieval.types import Document, ParsedCorpus

REPO = Path(__file__).resolve().parents[2]
TOKEN = "test-token-0123456789abcdef"
TOOLS = {"retrieve_knowledge", "kb_qa", "add_knowledge", "list_knowledge_collections", "get_knowledge_stats",
         "clear_collection", "search_datasources", *TUNING_TOOLS}  # the tuning tools: test_tuning_session.py
TUNED = SearchConfig(fusion="weighted", weights={"bm25": 0.4, "dense": 0.6}, normalization="minmax", depth=40)
_QUERY_LINES = (REPO / "sample_data/xquad/queries.jsonl").read_text("utf-8").splitlines()
QUERIES = [q["text"] for q in map(json.loads, _QUERY_LINES) if q["_id"].startswith("en-")][:6]
# The kb collection is served with a filter from its config file: scalp entries are never found.
KB_CONFIG = SearchConfig(fusion="rrf", rrf_k=10, depth=20, filters=["category=hair|c1|c2"])
QA_CSV = """id,title,text,category
faq-1,Oily hair,"Wash oily hair every other day with a gentle shampoo; hot water makes scalps oilier.",hair
faq-2,Dandruff,"Dandruff is usually a yeast called malassezia; a zinc pyrithione shampoo helps.",scalp
faq-3,Split ends,"Split ends cannot be repaired: trim them every eight weeks and use less heat.",hair
faq-4,Hair loss,"Losing 50 to 100 hairs a day is normal; sudden patches need a dermatologist.",scalp
"""


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("serve")
    path = root / "db"
    store = Store(str(path))
    english = [Document(id=d["_id"], text=d["text"], title=d.get("title", "")) for d in
               map(json.loads, (REPO / "sample_data/xquad/corpus.jsonl").read_text("utf-8").splitlines())
               if d["_id"].startswith("en-")][:40]
    create_collection(store, "xq", ParsedCorpus(english), MINILM)
    create_collection(store, "records", parse_path(REPO / "sample_data/catalogue/records.json"), MINILM)
    (root / "faq.csv").write_text(QA_CSV, encoding="utf-8")
    create_collection(store, "kb", parse_path(root / "faq.csv"), MINILM)
    create_collection(store, "empty", parse_path(root / "faq.csv"), MINILM)
    store.clear("empty")  # served with no documents: a clear answer, not a source's failure
    Workbench(store).configs.save("tuned", TUNED)
    (root / "kb.json").write_text(KB_CONFIG.to_json(), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def workbench(db) -> Workbench:
    return Workbench(Store(str(db)))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def http_server(db):
    """One HTTP server for the module (token required, write tools on), started at once so it loads
    while the stdio test runs."""
    port = _free_port()
    args = [sys.executable, "-m", "retrieval", "--db", str(db), "serve", "--collection", "xq", "--config", "tuned",
            "--collection", "kb", "--config", str(db.parent / "kb.json"), "--collection", "records",
            "--config", "tuned", "--records", "records", "--collection", "empty", "--config", "tuned",
            "--allow-write", "--http", f"127.0.0.1:{port}"]
    log = (db.parent / "http.log").open("w")
    proc = subprocess.Popen(args, cwd=REPO, env={**server_env(), "WORKBENCH_MCP_TOKEN": TOKEN}, stdout=log,
                            stderr=subprocess.STDOUT)
    yield proc, port
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
    log.close()


@pytest.fixture(scope="module")
def http_url(db, http_server):
    proc, port = http_server
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail("server exited: " + (db.parent / "http.log").read_text())
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.2)
    else:
        proc.kill()
        pytest.fail("server did not start: " + (db.parent / "http.log").read_text())
    return f"http://127.0.0.1:{port}/mcp"


async def _http_session(url: str, token: str | None, body):
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with create_mcp_http_client(headers=headers) as http, streamable_http_client(url, http_client=http) as (
            read, write), ClientSession(read, write) as session:
        await session.initialize()
        return await body(session)


def _error(result) -> str:
    assert result.is_error, result.structured_content
    text = result.content[0].text
    assert "Traceback" not in text
    return text


def _expected(workbench: Workbench, collection: str, query: str, config: SearchConfig) -> list[tuple]:
    result = workbench.search(collection, query, config)
    return [(r.doc_id, r.score, r.display_score) for r, _ in result.final_ranking()]


def test_stdio_read_only_server(db, workbench, http_server, capsys):
    args = ["-m", "retrieval", "--db", str(db), "serve", "--collection", "xq", "--config", "tuned"]
    params = StdioServerParameters(command=sys.executable, cwd=str(REPO), env=server_env(), args=args)
    # A server whose stdin ends at once: starts, warms up, stops, and never writes to stdout.
    silent = subprocess.Popen([sys.executable, *args], cwd=REPO, env=server_env(), stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    async def run():
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            tools = {t.name: t for t in (await session.list_tools()).tools}
            assert set(tools) == TOOLS
            assert "without --allow-write" in tools["add_knowledge"].description
            assert "WITHOUT a language model" in tools["kb_qa"].description
            for query in QUERIES[:3]:
                data = tool_data(await session.call_tool("retrieve_knowledge", {"query": query}))
                assert data["count"] == 5 and data["query"] == query
                assert tool_ranking(data) == _expected(workbench, "xq", query, dataclasses.replace(TUNED, top_k=5))
                info = data["search_info"]
                assert info["config"] == "saved config 'tuned'" and info["weights"] == {"bm25": 0.4, "dense": 0.6}
                assert info["backends"]["dense"]["model"] == MINILM and info["backends"]["bm25"]["backend"]
            top3 = tool_data(await session.call_tool("retrieve_knowledge", {"query": QUERIES[0], "top_k": 3}))
            for tool, args in (("add_knowledge", {"entries": [{"question": "q", "answer": "a"}]}),
                               ("clear_collection", {"collection_name": "xq"})):
                assert "--allow-write" in _error(await session.call_tool(tool, args))
            listed = tool_data(await session.call_tool("list_knowledge_collections", {}))
            assert listed["default"] == "xq" and listed["write_enabled"] is False
            assert listed["collections"][0]["doc_count"] == 40
        return top3

    top3 = run_async(run)
    assert workbench.info("xq").doc_count == 40  # nothing was written
    # _meta is exactly what `search --json` prints for the same query and config
    (db.parent / "tuned.json").write_text(TUNED.to_json(), encoding="utf-8")
    capsys.readouterr()
    assert main(["--db", str(db), "search", "xq", QUERIES[0], "--json", "--config", str(db.parent / "tuned.json"),
                 "--top-k", "3"]) == 0
    cli = json.loads(capsys.readouterr().out)
    assert [r["_meta"] for r in top3["results"]] == [r["_meta"] for r in cli["results"]]
    out, err = silent.communicate(timeout=120)
    assert silent.returncode == 0 and out == "", err
    assert "serving xq on stdio; write tools disabled" in err


def test_http_tools_and_exact_results(http_url, workbench):
    async def body(session):
        assert {t.name for t in (await session.list_tools()).tools} == TOOLS
        for query in QUERIES[3:6]:
            data = tool_data(await session.call_tool("retrieve_knowledge", {"query": query, "top_k": 7}))
            assert tool_ranking(data) == _expected(workbench, "xq", query, dataclasses.replace(TUNED, top_k=7))
        for query in ("oily hair", "dandruff shampoo"):
            data = tool_data(await session.call_tool("retrieve_knowledge", {"query": query, "top_k": 4,
                                                                          "collection_name": "kb"}))
            assert tool_ranking(data) == _expected(workbench, "kb", query, dataclasses.replace(KB_CONFIG, top_k=4))
            assert {r["metadata"]["category"] for r in data["results"]} == {"hair"}  # the config's filter
        assert data["search_info"]["config"] == "file kb.json" and data["search_info"]["rrf_k"] == 10
        assert data["search_info"]["filters"] == ["category=hair|c1|c2"]
        # a call's own filters join the config's, before ranking, exactly as Workbench.search does
        for args, extra in (({"filter_category": "scalp"}, ["category=scalp"]),
                            ({"filters": ["category=scalp"]}, ["category=scalp"])):
            data = tool_data(await session.call_tool("retrieve_knowledge", {"query": "shampoo", "top_k": 4,
                                                                          "collection_name": "kb", **args}))
            config = dataclasses.replace(KB_CONFIG, top_k=4, filters=[*KB_CONFIG.filters, *extra])
            assert tool_ranking(data) == _expected(workbench, "kb", "shampoo", config)
            assert data["results"] == [] and data["search_info"]["filters"] == config.filters  # hair AND scalp
        data = tool_data(await session.call_tool("retrieve_knowledge", {
            "query": "shampoo", "collection_name": "kb", "filters": {"category": ["hair", "c1"]}}))
        config = dataclasses.replace(KB_CONFIG, filters=[*KB_CONFIG.filters, "category=hair|c1"])
        assert tool_ranking(data) == _expected(workbench, "kb", "shampoo", config) and data["count"] >= 1

        qa = tool_data(await session.call_tool("kb_qa", {"question": "How often should I wash oily hair?",
                                                     "collection_name": "kb", "top_k": 2}))
        assert qa["has_knowledge"] and qa["sources"][0]["id"] == "faq-1"
        assert "gentle shampoo" in qa["context"] and qa["context"] in qa["answer"]
        none = tool_data(await session.call_tool("kb_qa", {"question": "How often should I wash oily hair?",
                                                       "collection_name": "kb", "min_score": 5}))
        assert not none["has_knowledge"] and none["sources"] == [] and none["context"] == ""

        found = tool_data(await session.call_tool("search_datasources", {"query": "unemployment China", "limit": 3}))
        assert 1 <= found["count"] <= 3
        top = found["results"][0]
        assert top["relevance_score"] >= 5 and top["points"]["name"].startswith("+")
        keyword_only = SearchConfig(weights={"keyword": 1.0}, top_k=3, depth=100, keyword={**TUNED.keyword,
                                                                                             "limit": 3})
        expected = workbench.search("records", "unemployment China", keyword_only)
        assert [r["id"] for r in found["results"]] == [r.doc_id for r in expected.outcome.results]
        assert [r["relevance_score"] for r in found["results"]] == [
            r.sources["keyword"].raw_score for r in expected.outcome.results]

        stats = tool_data(await session.call_tool("get_knowledge_stats", {"collection_name": "records"}))
        assert stats["doc_count"] == 35 and stats["config"] == "saved config 'tuned'"
        return True

    assert run_async(_http_session, http_url, TOKEN, body)


def test_http_bad_arguments_are_tool_errors(http_url):
    bad = [
        ("retrieve_knowledge", {"query": "x", "top_k": 0}, "top_k must be"),
        ("retrieve_knowledge", {"query": "x", "top_k": "many"}, "top_k"),
        ("retrieve_knowledge", {"query": "   "}, "query must be a non-empty string"),
        ("retrieve_knowledge", {"query": "x", "collection_name": "nope"}, "not served here"),
        ("retrieve_knowledge", {"query": "x", "filters": {"colour": "red"}}, "unknown metadata field 'colour'"),
        ("retrieve_knowledge", {"query": "x", "filters": {"n": {"between": 1}}}, "a range takes gte, lte, gt, lt"),
        ("retrieve_knowledge", {"query": "x", "filters": 5}, "filters"),
        ("retrieve_knowledge", {}, "query"),
        ("kb_qa", {"question": ""}, "question must be a non-empty string"),
        ("search_datasources", {"query": "china", "limit": 99}, "limit must be"),
        ("get_knowledge_stats", {"collection_name": "../etc"}, "not served here"),
        ("add_knowledge", {"entries": []}, "non-empty list"),
        ("add_knowledge", {"entries": [{"question": "q"}]}, "answer"),
        ("add_knowledge", {"entries": [{"question": "q", "answer": " "}]}, "answer must be a non-empty string"),
        ("add_knowledge", {"entries": [{"question": "q", "answer": "a", "colour": "red"}]}, "colour"),
        ("add_knowledge", {"entries": [{"question": "q", "answer": "a"}, {"question": "q", "answer": "a"}]},
         "same question and answer"),
        ("no_such_tool", {}, "no_such_tool"),
        ("retrieve_knowledge", {"query": "x", "collection_name": "empty"}, "'empty' has no documents — add some"),
        ("kb_qa", {"question": "x", "collection_name": "empty"}, "'empty' has no documents"),
    ]

    async def body(session):
        for tool, args, message in bad:
            assert message in _error(await session.call_tool(tool, args)), (tool, args)
        return True

    assert run_async(_http_session, http_url, TOKEN, body)


def test_http_two_clients_adding_at_once_lose_nothing(http_url, workbench):
    before = workbench.info("kb").doc_count

    def entries(client: int) -> list[dict]:
        return [{"question": f"Client {client} question {i}?", "answer": f"Answer {i} from client {client}.",
                 "category": f"c{client}", "metadata": {"n": i}} for i in range(5)]

    added: dict[int, dict] = {}

    async def add(client: int):
        async def body(session):
            added[client] = tool_data(await session.call_tool("add_knowledge", {"entries": entries(client),
                                                                            "collection_name": "kb"}))
        await _http_session(http_url, TOKEN, body)

    async def both():
        async with anyio.create_task_group() as group:
            group.start_soon(add, 1)
            group.start_soon(add, 2)

    run_async(both)
    ids = added[1]["ids"] + added[2]["ids"]
    assert len(set(ids)) == 10
    assert workbench.info("kb").doc_count == before + 10
    rows = workbench.documents("kb", ids)
    assert set(rows) == set(ids) and rows[added[2]["ids"][0]]["metadata"]["category"] == "c2"

    async def after(session):
        again = await session.call_tool("add_knowledge", {"entries": entries(1)[:1], "collection_name": "kb"})
        assert "already" in _error(again)
        found = tool_data(await session.call_tool("retrieve_knowledge", {"query": "Client 2 question 3",
                                                                      "collection_name": "kb", "top_k": 1}))
        assert found["results"][0]["id"] == added[2]["ids"][3]
        cleared = tool_data(await session.call_tool("clear_collection", {"collection_name": "kb"}))
        assert cleared["doc_count"] == 0
        return tool_data(await session.call_tool("get_knowledge_stats", {"collection_name": "kb"}))["doc_count"]

    assert run_async(_http_session, http_url, TOKEN, after) == 0


def test_http_token_required(http_url):
    import httpx2

    for headers in ({}, {"Authorization": "Bearer wrong-token-0123456789"}, {"Authorization": TOKEN}):
        response = httpx2.post(http_url, headers={**headers, "Accept": "application/json, text/event-stream"},
                               json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
        assert response.status_code == 401, headers

    async def body(session):
        return True

    with pytest.raises(Exception):  # noqa: B017 - the SDK surfaces a 401 as its own error types
        run_async(_http_session, http_url, None, body)


def test_non_loopback_bind_needs_a_token(db, monkeypatch, capsys):
    monkeypatch.delenv("WORKBENCH_MCP_TOKEN", raising=False)
    assert main(["--db", str(db), "serve", "--collection", "xq", "--http", "0.0.0.0:8765"]) == 2
    assert "without a bearer token" in capsys.readouterr().err
    monkeypatch.setenv("WORKBENCH_MCP_TOKEN", "short")
    assert main(["--db", str(db), "serve", "--collection", "xq", "--http", "8765"]) == 2
    assert "too short" in capsys.readouterr().err
    monkeypatch.delenv("WORKBENCH_MCP_TOKEN")
    assert main(["--db", str(db), "serve", "--collection", "nope"]) == 2
    assert "No collection named 'nope'" in capsys.readouterr().err
    assert main(["--db", str(db), "serve", "--collection", "xq", "--config", "missing"]) == 2
    assert "No saved config named 'missing'" in capsys.readouterr().err


def test_every_loopback_bind_checks_host_and_origin(db):
    """Without a token the server is reachable by a web page through DNS rebinding unless it checks
    the Host and Origin headers: on 127.0.0.2 (loopback, but not a name the SDK protects by itself)
    a request naming another host or coming from another origin is refused."""
    import httpx2

    port = _free_port()
    env = {k: v for k, v in server_env().items() if k != "WORKBENCH_MCP_TOKEN"}
    proc = subprocess.Popen([sys.executable, "-m", "retrieval", "--db", str(db), "serve", "--collection", "xq",
                             "--http", f"127.0.0.2:{port}"], cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while True:
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            assert time.monotonic() < deadline, "server did not start"
            try:
                socket.create_connection(("127.0.0.2", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.2)
        url = f"http://127.0.0.2:{port}/mcp"
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        accept = {"Accept": "application/json, text/event-stream"}
        assert httpx2.post(url, headers={**accept, "Host": f"evil.example:{port}"}, json=ping).status_code == 421
        assert httpx2.post(url, headers={**accept, "Origin": "http://evil.example"}, json=ping).status_code == 403
        assert httpx2.post(url, headers=accept, json=ping).status_code not in (401, 403, 421)
    finally:
        proc.kill()
        proc.wait(timeout=30)


def test_client_config_snippet():
    from retrieval.serve.launch import client_config, serve_command

    snippet = client_config("sample-xquad", "tuned")
    server = snippet["mcpServers"]["search-workbench"]
    assert server["command"] == sys.executable and server["cwd"] == str(REPO)
    assert server["args"] == ["-m", "retrieval", "serve", "--collection", "sample-xquad", "--config", "tuned"]
    assert "--db /tmp/x" in serve_command("c", "my config", "/tmp/x")
    assert "'my config'" in serve_command("c", "my config")
