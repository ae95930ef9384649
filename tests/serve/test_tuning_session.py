"""A tuning session over MCP, scripted through the official MCP Python client (no language model):
every number a tool gives equals what the CLI gives for the same step (`retrieval.cli.main.main`,
in this process, JSON compared); progress notifications during `optimize`, stopped and cancelled
runs keeping the best so far; without `--allow-write` every write tool refuses and nothing on
disk changes.

One database for the module: the bundled XQuAD sample's 60 English paragraphs (MiniLM) and its
query set 'sample' of 20 English and 10 Chinese questions, each judged on the English paragraph it
asks about. One stdio server (`--allow-write`) runs the scripted session once (`session`); the
read-only server is built in this process (`Client(server)`, the SDK's in-memory transport).
Set TUNING_TRANSCRIPT=FILE to write the session's transcript (docs/mcp.md shows it).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_client import run_async, server_env, tool_data

from retrieval.cli.main import main
from retrieval.indexing.pipeline import create_collection
from retrieval.indexing.readers.parse import parse_path
from retrieval.models.embed import MINILM
from retrieval.search.config import SearchConfig
from retrieval.search.workbench import Workbench
from retrieval.serve.tuning_tools import TUNING_TOOLS, WRITE_TOOLS
from retrieval.store import Store
from retrieval.types import ParsedCorpus

REPO = Path(__file__).resolve().parents[2]
SET = "sample"


@pytest.fixture(scope="module")
def db(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tuning") / "db"
    store = Store(str(path))
    sample = parse_path(REPO / "sample_data" / "xquad")
    english = [q for q in sample.qrels if q.startswith("en-")][:20]
    chinese = [q for q in sample.qrels if q.startswith("zh-")][:10]
    qrels = {q: dict(sample.qrels[q]) for q in english}
    qrels.update({q: {d.replace("zh-", "en-"): g for d, g in sample.qrels[q].items()} for q in chinese})
    create_collection(store, "xq", ParsedCorpus([d for d in sample.documents if d.id.startswith("en-")]), MINILM)
    Workbench(store).judgments.save_query_set("xq", SET, {q: sample.queries[q] for q in qrels}, qrels)
    return path


def cli_json(capsys, db: Path, *args: str):
    capsys.readouterr()
    assert main(["--db", str(db), *args]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def error_text(result) -> str:
    assert result.is_error, result.structured_content
    text = result.content[0].text
    assert "Traceback" not in text
    return text


def disk_state(path: Path) -> dict[str, str]:
    """Every file under `path` with its content hash: any write shows."""
    return {str(f.relative_to(path)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(path.rglob("*")) if f.is_file()}


def test_read_only_server_refuses_every_write_tool_and_writes_nothing(db):
    from mcp.client import Client

    from retrieval.serve.server import build_server
    from retrieval.serve.service import KnowledgeService, Served

    workbench = Workbench(Store(str(db)))
    service = KnowledgeService(workbench, [Served("xq", SearchConfig(), "defaults")])
    server = build_server(service)
    calls = {"save_config": {"name": "refused", "config": "defaults"},
             "record_judgment": {"query_set": SET, "query": "Who won?", "doc_id": "en-001", "grade": 2},
             "set_served_config": {"config": {"fusion": "rrf"}},
             "snapshot_create": {"name": "refused", "query_set": SET}}
    assert set(calls) == set(WRITE_TOOLS)
    before = disk_state(db)

    async def run():
        async with Client(server) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(TUNING_TOOLS) <= set(tools)
            for name, args in calls.items():
                assert "without --allow-write" in tools[name].description
                assert "start it with --allow-write" in error_text(await client.call_tool(name, args)), name
            listed = tool_data(await client.call_tool("list_configs", {}))
            assert listed["saved"] == [] and listed["served"][0]["config_name"] == "defaults"

    run_async(run)
    assert disk_state(db) == before
    assert service.served["xq"].config_name == "defaults"


def test_bad_tuning_arguments_are_tool_errors(db):
    from mcp.client import Client

    from retrieval.serve.server import build_server
    from retrieval.serve.service import KnowledgeService, Served

    service = KnowledgeService(Workbench(Store(str(db))), [Served("xq", SearchConfig(), "defaults")], allow_write=True)
    bad = [
        ("evaluate_config", {"query_set": "nope"}, "No query set named 'nope'"),
        ("evaluate_config", {"query_set": SET, "max_queries": 0}, "max_queries must be a whole number"),
        ("evaluate_config", {"query_set": SET, "config": "missing"}, "No saved config named 'missing'"),
        ("evaluate_config", {"query_set": SET, "config": {"depth": "ten"}}, "depth"),
        ("evaluate_config", {"query_set": SET, "config": "../x.json"}, "Invalid config name"),
        ("compare_configs", {"a": "defaults", "b": "defaults", "query_set": SET, "metric": "f1"}, "metric must be"),
        ("why_not", {"query": " ", "doc_id": "en-001"}, "query must be a non-empty string"),
        ("explain_result", {"query": "Panthers", "doc_id": "en-059", "config": {"top_k": 1}}, "ask why_not"),
        ("optimize", {"query_set": SET, "trials": 10_000}, "trials must be a whole number from 1 to"),
        ("optimize", {"query_set": SET, "method": "lambdamart"}, "method must be one of bayes"),
        ("sweep", {"query_set": SET, "seconds": 0}, "seconds must be a number above 0"),
        ("sweep", {"query_set": SET, "run_id": "../x"}, "run_id must be"),
        ("snapshot_diff", {"names": ["only-one"]}, "two or more snapshot names"),
        ("run_result", {"run_id": "nope"}, "No run 'nope'"),
        ("save_config", {"name": "bad/name", "config": "defaults"}, "Invalid config name"),
        ("record_judgment", {"query_set": SET, "query": "q", "doc_id": "en-001", "grade": 7}, "Grade must be"),
        ("record_judgment", {"query_set": SET, "query": "q", "doc_id": "not-there", "grade": 1}, "No document"),
        ("set_served_config", {"config": {"fusion": "nope"}}, "fusion"),
    ]
    before = disk_state(db)

    async def run():
        from mcp.client import Client

        async with Client(build_server(service)) as client:
            for tool, args, message in bad:
                assert message in error_text(await client.call_tool(tool, args)), (tool, args)

    run_async(run)
    assert disk_state(db) == before and service.served["xq"].config_name == "defaults"
