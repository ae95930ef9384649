"""The MCP tools' arguments are data, never syntax (retrieval/serve/arguments.py, service.py): a
category or filter value is matched literally, a non-finite number is a tool error.

The server's own tools (`server.build_server`), called in this process through the SDK's
`MCPServer.call_tool`, over a tiny collection whose categories include one literally named
`public|secret`."""

from __future__ import annotations

import math

import anyio
import pytest
from mcp.server.mcpserver.exceptions import ToolError

from retrieval.indexing.pipeline import create_collection
from retrieval.search.config import SearchConfig
from retrieval.search.workbench import Workbench
from retrieval.serve.arguments import call_filters
from retrieval.serve.server import build_server
from retrieval.serve.service import KnowledgeService, Served
from retrieval.store import Store
from retrieval.types import Document, ParsedCorpus

CATEGORIES = {"pub": "public", "sec": "secret", "both": "public|secret", "slash": "a\\|b", "eq": ">=5",
              "pad": " padded "}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    store = Store(str(tmp_path_factory.mktemp("tools") / "db"))
    documents = [Document(doc_id, f"river notes number {i}", metadata={"category": category, "year": 2000 + i})
                 for i, (doc_id, category) in enumerate(CATEGORIES.items())]
    create_collection(store, "kb", ParsedCorpus(documents))
    service = KnowledgeService(Workbench(store), [Served("kb", SearchConfig(top_k=10), "defaults")])
    return build_server(service)


def call(server, tool: str, **arguments) -> dict:
    async def run():
        return await server.call_tool(tool, arguments)

    result = anyio.run(run)
    assert not result.is_error, result.content
    return result.structured_content


def error(server, tool: str, **arguments) -> str:
    async def run():
        return await server.call_tool(tool, arguments)

    with pytest.raises(ToolError) as caught:
        anyio.run(run)
    assert "Traceback" not in str(caught.value)
    return str(caught.value)


def ids(data: dict) -> set[str]:
    return {r["id"] for r in data["results"]}


# ---- item 9: values are literals ----------------------------------------------------------------
@pytest.mark.parametrize(("category", "expected"), [
    ("public|secret", {"both"}), ("public", {"pub"}), ("a\\|b", {"slash"}), (">=5", {"eq"}), ("secret", {"sec"}),
    ("public\\|secret", set()), (" padded ", {"pad"}),
])
def test_filter_category_is_matched_literally(server, category, expected):
    assert ids(call(server, "retrieve_knowledge", query="river", top_k=10, filter_category=category)) == expected


def test_filter_values_are_matched_literally(server):
    found = call(server, "retrieve_knowledge", query="river", top_k=10, filters={"category": "public|secret"})
    assert ids(found) == {"both"}
    # A list is any of its values, each literal.
    found = call(server, "retrieve_knowledge", query="river", top_k=10,
                 filters={"category": ["public|secret", "a\\|b"]})
    assert ids(found) == {"both", "slash"}
    found = call(server, "retrieve_knowledge", query="river", top_k=10, filters={"category": ["public", "secret"]})
    assert ids(found) == {"pub", "sec"}
    assert ids(call(server, "retrieve_knowledge", query="river", top_k=10,
                    filters={"year": {"gte": 2001, "lt": 2003}})) == {"sec", "both"}


def test_a_field_name_cannot_carry_an_operator(server):
    for field in ("category=public|x", "year>", "a|b", " category", ""):
        assert "filters: a field name" in error(server, "retrieve_knowledge", query="river",
                                                  filters={field: "public"}), field
    assert "a range bound" in error(server, "retrieve_knowledge", query="river",
                                    filters={"year": {"gte": "2001|2002"}})


def test_call_filters_escape_the_filter_language():
    assert call_filters("public|secret", None) == ["category=public\\|secret"]
    assert call_filters(None, {"tags": ["x|y", "z\\"], "year": {"gte": 2001}}) == [
        "tags=x\\|y|z\\\\", "year>=2001"]
    assert call_filters(None, ["category=a|b"]) == ["category=a|b"]  # filter strings are the language itself


# ---- item 11: numbers are finite ------------------------------------------------------------------
@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_kb_qa_refuses_a_non_finite_min_score(server, bad):
    assert "min_score must be a finite number" in error(server, "kb_qa", question="river notes", min_score=bad)


def test_kb_qa_min_score_still_decides_has_knowledge(server):
    assert call(server, "kb_qa", question="river notes", min_score=0.0)["has_knowledge"] is True
    assert call(server, "kb_qa", question="river notes", min_score=1e9)["has_knowledge"] is False


def test_other_numbers_of_the_tools_refuse_non_finite_values(server):
    for tool, arguments, message in (
            ("retrieve_knowledge", {"query": "river", "filters": {"year": math.nan}}, "finite"),
            ("retrieve_knowledge", {"query": "river", "filters": {"year": [1.0, math.inf]}}, "finite"),
            ("retrieve_knowledge", {"query": "river", "filters": {"year": {"gte": math.nan}}}, "finite"),
            ("retrieve_knowledge", {"query": "river", "top_k": 5.5}, "top_k"),
            ("search_datasources", {"query": "river", "limit": 2.5}, "limit")):
        assert message in error(server, tool, **arguments), (tool, arguments)


def test_the_servers_qa_min_score_must_be_finite(tmp_path):
    from retrieval.types import RetrievalError

    with pytest.raises(RetrievalError, match="--qa-min-score must be a finite number"):
        KnowledgeService(None, [Served("kb", SearchConfig(), "defaults")], qa_min_score=math.nan)
