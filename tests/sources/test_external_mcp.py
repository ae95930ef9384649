"""The project's own MCP server (`python -m retrieval serve`) as an outside MCP source: started by
command over stdio, and reached over streamable HTTP; its hits are the served config's ranking,
fuse with local BM25, evaluate like any source; a server stopped mid-run is that source's error
while BM25 still fuses."""

import json
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mcp_client import server_env

from retrieval.evaluation.evaluate import evaluate_collection
from retrieval.search.config import SearchConfig
from retrieval.search.workbench import Workbench
from retrieval.sources.external import close_engines, parse_descriptor

REPO = Path(__file__).resolve().parents[2]
SERVED = SearchConfig(weights={"bm25": 1.0}, fusion="weighted", normalization="minmax")
PATHS = {"tool": "retrieve_knowledge", "arguments": {"query": "{query}", "top_k": "{depth}"},
         "hits": "results", "id": "id", "score": "score", "text": "content"}
ENV = {k: v for k, v in server_env().items() if k in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "LANCEDB_LOG",
                                                       "OMP_WAIT_POLICY", "PYTHONPATH")}


@pytest.fixture(scope="module")
def served(xsmall, tmp_path_factory):
    config = tmp_path_factory.mktemp("served") / "served.json"
    config.write_text(SERVED.to_json(), encoding="utf-8")
    yield ["-m", "retrieval", "--db", str(xsmall.store.uri), "serve", "--collection", "xsmall", "--config", str(config)]
    close_engines()


def served_ranking(xsmall, query: str, depth: int) -> list[tuple[str, float]]:
    result = Workbench(xsmall.store).search("xsmall", query, SERVED.replace(top_k=depth))
    return [(r.doc_id, r.score) for r, _ in result.final_ranking()]


@pytest.mark.slow
def test_the_served_config_over_stdio_is_a_source_equal_to_its_own_ranking(xsmall, served):
    peer = parse_descriptor({"name": "peer", "kind": "mcp", "command": [sys.executable, *served], "env": ENV,
                             "timeout_s": 60, **PATHS})
    wb = Workbench(xsmall.store)
    wb.use_source(peer)
    english = dict([(q, g) for q, g in xsmall.qrels.items() if q.startswith("en-")][:8])
    query = xsmall.queries[next(iter(english))]
    result = wb.search("xsmall", query, SearchConfig(weights={"bm25": 1.0, "peer": 1.0}, depth=20))
    got = result.candidates.sources["peer"]
    assert got.error is None, got.error
    assert [(h.doc_id, h.raw_score) for h in got.hits] == served_ranking(xsmall, query, 20)
    assert got.hits[0].detail["text"]  # the tool's content, kept for a document the collection would lack
    assert {"bm25", "peer"} <= set(result.outcome.results[0].sources)
    report = evaluate_collection(wb, "xsmall", xsmall.queries, english, SearchConfig(weights={"peer": 1.0}, depth=20))
    local = evaluate_collection(Workbench(xsmall.store), "xsmall", xsmall.queries, english,
                                SearchConfig(weights={"bm25": 1.0}, depth=20))
    assert report.metrics["peer"]["ndcg@10"] == pytest.approx(local.metrics["hybrid"]["ndcg@10"], abs=1e-12)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_a_server_over_streamable_http_then_stopped_mid_run(xsmall, served, tmp_path):
    port = _free_port()
    log = (tmp_path / "http.log").open("w")
    proc = subprocess.Popen([sys.executable, *served, "--http", f"127.0.0.1:{port}"], cwd=REPO, env=server_env(),
                            stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.3)
        assert proc.poll() is None, (tmp_path / "http.log").read_text()
        remote = parse_descriptor({"name": "remote", "kind": "mcp", "url": f"http://127.0.0.1:{port}/mcp",
                                   "timeout_s": 30, **PATHS})
        wb = Workbench(xsmall.store)
        wb.use_source(remote)
        config = SearchConfig(weights={"bm25": 1.0, "remote": 1.0}, depth=10)
        query = "Which NFL team represented the AFC at Super Bowl 50?"
        first = wb.search("xsmall", query, config).candidates.sources["remote"]
        assert first.error is None, first.error
        assert [(h.doc_id, h.raw_score) for h in first.hits] == served_ranking(xsmall, query, 10)
        proc.terminate()
        proc.wait(timeout=30)
        assert wb.search("xsmall", query, config).candidates.sources["remote"].error is None  # cached
        after = wb.search("xsmall", "Where was Super Bowl 50 played?", config)
        error = after.candidates.sources["remote"].error
        assert error.startswith("ExternalError: ") and f"127.0.0.1:{port}/mcp" in error, error
        assert after.outcome.results and all(r.sources["remote"].contribution == 0 for r in after.outcome.results)
        assert json.dumps(after.outcome.notes).count("remote") >= 1
    finally:
        proc.kill()
        log.close()
