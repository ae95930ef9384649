"""`python -m retrieval serve`: the workbench as an MCP server, so agents search what was tuned.

    python -m retrieval serve --collection sample-xquad --config tuned             # stdio
    python -m retrieval serve --collection kb --config tuned.json --http 8765      # streamable HTTP

Each served collection has one `SearchConfig`: a config saved on the Evaluate page
(`Workbench.configs`), a JSON file, or the defaults. A front end like `cli.py`: every result is
`Workbench.search(collection, query, config)` as it is, formatted with the CLI's own per-result
JSON (`result_json.result_items`); nothing here computes a score.

Tools (names and shapes of seed 003's knowledge-base server, plus seed 000's `search_datasources`):

    retrieve_knowledge(query, top_k=5, use_rerank, collection_name, filter_category, filters)
        -> {query, results: [{id, content, metadata, similarity, score, rerank_score, _meta}], count,
            search_info}
    kb_qa(question, report, top_k, use_rerank, collection_name, min_score)
        -> {answer, sources, context, has_knowledge}; no LLM: `answer` is the assembled context
    add_knowledge(entries, collection_name)          write: refused unless --allow-write
    list_knowledge_collections()
    get_knowledge_stats(collection_name)
    clear_collection(collection_name)                write: refused unless --allow-write
    search_datasources(query, limit=10)              the keyword source alone, on --records

Safety: write tools are refused unless the server was started with `--allow-write`. Over HTTP the
server binds 127.0.0.1; a non-loopback host is refused unless a bearer token is configured in
`WORKBENCH_MCP_TOKEN`, and with a token every request must carry `Authorization: Bearer <token>`.
Every problem with a tool's arguments comes back as a tool error (`is_error`) with a readable
message. In stdio mode nothing is printed to stdout (the JSON-RPC stream): messages and logs go to
stderr. `mcp` is imported only when a server is built, so the rest of the CLI does not pay for it.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import hmac
import ipaddress
import json
import logging
import os
import sys
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from retrieval.search.config import SearchConfig
from retrieval.search.fusion.methods import method_of
from retrieval.search.result_json import result_items
from retrieval.text.records import (
    is_catalogue_record,
    record_descriptions,
    record_domains,
    record_names,
    record_organization,
    record_tags,
)
from retrieval.types import Document, ParsedCorpus, RetrievalError

log = logging.getLogger(__name__)

TOKEN_ENV = "WORKBENCH_MCP_TOKEN"
MIN_TOKEN_CHARS = 16
DEFAULT_TOP_K = 5  # seed 003's default
MAX_TOP_K = 100
MAX_QUERY_CHARS = 4000
MAX_ENTRIES = 1000  # per add_knowledge call
DEFAULT_LIMIT = 10  # seed 000's default result limit (1–50)
QA_SCORES = ("similarity", "rerank")  # or a source name: that source's raw score (dense: cosine)
LOOPBACK_NAMES = ("localhost",)
RANGE_OPERATORS = {"gte": ">=", "lte": "<=", "gt": ">", "lt": "<"}


def call_filters(filter_category: str | None, filters: Any) -> list[str]:
    """A tool call's filters as `retrieval.search.filters` strings: `filter_category` is `category=…`;
    `filters` maps a field to a value, a list of values (any of them), or a range object
    {"gte": …, "lte": …, "gt": …, "lt": …} (numbers or ISO dates), or is a list of filter strings."""
    out = [] if filter_category in (None, "") else [f"category={filter_category}"]
    if filters in (None, {}, []):
        return out
    if isinstance(filters, list) and all(isinstance(f, str) for f in filters):
        return out + filters
    if not isinstance(filters, dict):
        raise ToolProblem("filters must be an object {field: value | [values] | {gte, lte, gt, lt}} or a list "
                          "of strings like 'category=a'")
    for field, value in filters.items():
        if isinstance(value, dict):
            unknown = sorted(set(value) - set(RANGE_OPERATORS))
            if unknown or not value:
                raise ToolProblem(f"filters.{field}: a range takes gte, lte, gt, lt; got {sorted(value)}")
            out += [f"{field}{RANGE_OPERATORS[op]}{bound}" for op, bound in value.items()]
        elif isinstance(value, list) and value:
            out.append(f"{field}={'|'.join(str(v) for v in value)}")
        elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
            out.append(f"{field}={value}")
        else:
            raise ToolProblem(f"filters.{field}: give a value, a list of values or a range, got {value!r}")
    return out


class ToolProblem(RetrievalError):
    """A bad tool call: the message is what the client reads (an MCP tool error)."""


@dataclass
class Served:
    """One served collection and the config it is searched with."""

    collection: str
    config: SearchConfig
    config_name: str  # "saved config 'tuned'", "file tuned.json" or "defaults"
    model: str = ""  # the collection's embedding model (read at start: adding or clearing keeps it)
    display_name: str = ""  # what the user named it (any script); the table name when the same

    @property
    def label(self) -> str:
        """Its display name, with the table name in brackets when they differ."""
        shown = self.display_name or self.collection
        return shown if shown == self.collection else f"{shown} ({self.collection})"


# ---- the tools' logic, without MCP -------------------------------------------------------------
class KnowledgeService:
    """What each tool does, over one Workbench; methods return the tool's JSON or raise
    `RetrievalError` (a tool error with its message)."""

    def __init__(self, workbench, served: list[Served], default: str | None = None, allow_write: bool = False,
                 records: str | None = None, qa_min_score: float = 0.0, qa_score: str = "similarity"):
        if not served:
            raise RetrievalError("Serve at least one collection (--collection NAME)")
        self.workbench = workbench
        self.served = {s.collection: s for s in served}
        if len(self.served) != len(served):
            raise RetrievalError("A collection is named twice in --collection")
        self.default = default or served[0].collection
        self.records = records or ("sample-catalogue" if "sample-catalogue" in self.served else self.default)
        for what, name in (("--default", self.default), ("--records", self.records)):
            if name not in self.served:
                raise RetrievalError(f"{what} {name!r} is not one of the served collections "
                                     f"({', '.join(self.served)})")
        self.allow_write = allow_write
        self.qa_min_score = qa_min_score
        self.qa_score = qa_score

    # ---- arguments ---------------------------------------------------------------------------
    def _served(self, collection_name: str | None) -> Served:
        """The served collection a call names by table name or display name (default: the default)."""
        name = collection_name if collection_name not in (None, "") else self.default
        if isinstance(name, str) and name not in self.served:
            shown = {s.display_name.strip(): c for c, s in self.served.items()}
            name = shown.get(name.strip(), name)
        if not isinstance(name, str) or name not in self.served:
            served = ", ".join(s.label for s in self.served.values())
            raise ToolProblem(f"Collection {collection_name!r} is not served here; served: {served} "
                              f"(default {self.served[self.default].label})")
        return self.served[name]

    @staticmethod
    def _text(value: Any, what: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ToolProblem(f"{what} must be a non-empty string")
        if len(value) > MAX_QUERY_CHARS:
            raise ToolProblem(f"{what} is {len(value)} characters long; the limit is {MAX_QUERY_CHARS}")
        return value

    @staticmethod
    def _top_k(top_k: Any) -> int:
        if isinstance(top_k, bool) or not isinstance(top_k, int) or not 1 <= top_k <= MAX_TOP_K:
            raise ToolProblem(f"top_k must be a whole number from 1 to {MAX_TOP_K}, got {top_k!r}")
        return top_k

    def _writable(self, tool: str) -> None:
        if not self.allow_write:
            raise ToolProblem(f"{tool} changes the knowledge base and this server is read-only: "
                              "start it with --allow-write to allow it")

    def config_for(self, served: Served, top_k: int, use_rerank: bool | None) -> SearchConfig:
        """The served config with the call's top-K (and rerank, when the call sets it)."""
        changes: dict[str, Any] = {"top_k": top_k}
        if use_rerank is not None:
            changes["rerank"] = bool(use_rerank)
        return dataclasses.replace(served.config, **changes)

    # ---- search ------------------------------------------------------------------------------
    def search_info(self, served: Served, result) -> dict[str, Any]:
        config = result.config
        backends: dict[str, Any] = {}
        for source in config.sources:
            if source == "bm25":
                backends[source] = {"backend": config.bm25_backend, "k1": config.bm25_k1, "b": config.bm25_b}
            elif source == "dense":
                # What served this query: the collection's own vectors, or its cross-lingual ones
                # (named in the text) for a query in the other language.
                returned = result.candidates.sources.get(source)
                backends[source] = {"backend": returned.backend if returned else "", "model": served.model}
            elif source in ("keyword", "graph"):
                backends[source] = {"params": getattr(config, source)}
            else:
                backends[source] = {}
        return {
            "collection": served.collection,
            "config": served.config_name,
            "fusion": config.fusion,
            "weights": dict(config.weights),
            "bm25_weight": config.weights.get("bm25"),  # seed 003's two fields
            "vector_weight": config.weights.get("dense"),
            # The method's own parameters (`fusion_methods`): null where the method reads none.
            **{name: getattr(config, name) if method_of(config).uses(name) else None
               for name in ("rrf_k", "normalization", "combination")},
            "filters": list(config.filters),  # the served config's own (applied inside each source)
            "depth": config.depth,
            "top_k": config.top_k,
            "use_rerank": config.rerank,
            "reranker": result.reranker_name,
            "backends": backends,
            "n_candidates": result.outcome.n_candidates,
            "removed": result.outcome.removed,
            "notes": result.outcome.notes,
        }

    def _search(self, query: str, top_k: int, use_rerank: bool | None, collection_name: str | None,
                filters: list[str] | None = None):
        served = self._served(collection_name)
        config = self.config_for(served, self._top_k(top_k), use_rerank)
        if filters:  # the call's filters join the served config's own (all must pass)
            config = dataclasses.replace(config, filters=[*config.filters, *filters])
        return served, self.workbench.search(served.collection, query, config)

    def retrieve(self, query: str, top_k: int = DEFAULT_TOP_K, use_rerank: bool | None = None,
                 collection_name: str | None = None, filter_category: str | None = None,
                 filters: dict | None = None) -> dict[str, Any]:
        extra = call_filters(filter_category, filters)
        query = self._text(query, "query")
        served, result = self._search(query, top_k, use_rerank, collection_name, extra)
        results = []
        for item in result_items(result):
            row = result.documents.get(item["id"], {})
            results.append({
                "id": item["id"],
                "content": f"{item['title']}\n{item['text']}" if item["title"] else item["text"],
                "metadata": row.get("metadata", {}),
                "similarity": item["display_score"],
                "score": item["score"],
                "rerank_score": item["_meta"].get("rerank_score"),
                "_meta": item["_meta"],
            })
        return {"query": query, "results": results, "count": len(results),
                "search_info": self.search_info(served, result)}

    def qa_value(self, item: dict[str, Any]) -> float | None:
        """The score `has_knowledge` is decided on (`--qa-score`)."""
        if self.qa_score == "similarity":
            return item["similarity"]
        if self.qa_score == "rerank":
            return item["rerank_score"]
        return item["_meta"].get(f"{self.qa_score}_score")

    def qa(self, question: str, report: str | None = None, top_k: int = DEFAULT_TOP_K,
           use_rerank: bool | None = None, collection_name: str | None = None,
           min_score: float | None = None) -> dict[str, Any]:
        question = self._text(question, "question")
        if report is not None and not isinstance(report, str):
            raise ToolProblem("report must be a string")
        minimum = self.qa_min_score if min_score is None else min_score
        found = self.retrieve(question, top_k, use_rerank, collection_name)
        sources, blocks = [], []
        for item in found["results"]:
            value = self.qa_value(item)
            if value is None or value < minimum:
                continue
            meta = item["metadata"]
            sources.append({"id": item["id"], "similarity": item["similarity"], "qa_score": value,
                            "question": meta.get("question"), "answer": meta.get("answer"),
                            "category": meta.get("category"), "content": item["content"]})
            blocks.append(f"[{len(blocks) + 1}] ({item['id']}) {item['content']}")
        context = "\n\n".join(blocks)
        has_knowledge = bool(sources)
        lines = ["No language model wrote this: it is the knowledge base's best matches for the question, to "
                 "answer from.", "", f"Question: {question}"]
        if report:
            lines += ["", f"Report: {report}"]
        lines += ["", "Relevant knowledge:" if has_knowledge else
                  f"The knowledge base has nothing with {self.qa_score} ≥ {minimum:g} for this question.", ""]
        return {"answer": "\n".join(lines) + context, "sources": sources, "context": context,
                "has_knowledge": has_knowledge,
                "search_info": {**found["search_info"], "qa_score": self.qa_score, "qa_min_score": minimum}}

    def search_datasources(self, query: str, limit: int = DEFAULT_LIMIT) -> dict[str, Any]:
        """Seed 000: the keyword source alone over the records collection, with the served
        config's keyword points, at most `limit` records."""
        query = self._text(query, "query")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 50:
            raise ToolProblem(f"limit must be a whole number from 1 to 50, got {limit!r}")
        served = self.served[self.records]
        base = served.config
        config = SearchConfig(fusion="rrf", weights={"keyword": 1.0}, rrf_k=base.rrf_k,
                              depth=max(base.depth, limit), top_k=limit, tie_field=base.tie_field,
                              keyword={**base.keyword, "limit": float(limit)}, filters=list(base.filters))
        result = self.workbench.search(served.collection, query, config)
        results = []
        for item in result_items(result):
            meta = item["_meta"]
            detail = meta.get("keyword_detail") or {}
            row = result.documents.get(item["id"], {})
            record = row.get("metadata", {})
            if is_catalogue_record(record):
                names, descriptions = record_names(record), record_descriptions(record)
                fields = {"name": record.get("name"), "description": record.get("description"),
                          "organization": record_organization(record) or None, "tags": list(record_tags(record)),
                          "domains": list(record_domains(record))}
            else:
                names, descriptions = (row.get("title") or "",), (row.get("text") or "",)
                fields = {"name": names[0] or None, "description": descriptions[0], "organization": None,
                          "tags": [], "domains": []}
            results.append({"id": item["id"], **fields, "relevance_score": meta.get("keyword_score"),
                            "quality_score": detail.get("quality"),
                            "points": {k: v for k, v in detail.items() if k != "quality"}, "_meta": meta})
        info = {"collection": served.collection, "config": served.config_name, "source": "keyword",
                "keyword": config.keyword, "filters": config.filters, "notes": result.outcome.notes}
        return {"query": query, "results": results, "count": len(results), "search_info": info}

    # ---- collections -------------------------------------------------------------------------
    def list_collections(self) -> dict[str, Any]:
        rows = []
        for name, served in self.served.items():
            row: dict[str, Any] = {"name": name, "display_name": served.display_name or name,
                                   "config": served.config_name, "default": name == self.default,
                                   "records": name == self.records}
            try:
                info = self.workbench.info(name)
            except RetrievalError as exc:
                row["error"] = str(exc)
            else:
                row.update(display_name=info.label, doc_count=info.doc_count, truncated=info.truncated,
                           model=info.model, language=info.language, description=info.description,
                           updated=info.updated)
            rows.append(row)
        return {"collections": rows, "count": len(rows), "default": self.default, "write_enabled": self.allow_write}

    def stats(self, collection_name: str | None = None) -> dict[str, Any]:
        served = self._served(collection_name)
        stats = self.workbench.stats(served.collection)
        data = {k: v for k, v in dataclasses.asdict(stats).items() if k != "info"}
        return {"collection": served.collection, "info": dataclasses.asdict(stats.info), **data,
                "config": served.config_name, "search_config": served.config.to_dict()}

    def add(self, entries: list[dict[str, Any]], collection_name: str | None = None) -> dict[str, Any]:
        self._writable("add_knowledge")
        served = self._served(collection_name)
        corpus = ParsedCorpus(entry_documents(entries), format="mcp entries")
        result = self.workbench.add(served.collection, corpus)
        out = {"collection": served.collection, "added": len(corpus.documents),
               "ids": [d.id for d in corpus.documents], "doc_count": result.info.doc_count}
        if result.note:
            out["note"] = result.note
        return out

    def clear(self, collection_name: str | None = None) -> dict[str, Any]:
        self._writable("clear_collection")
        served = self._served(collection_name)
        info = self.workbench.clear(served.collection)
        return {"collection": served.collection, "cleared": True, "doc_count": info.doc_count}


def entry_id(question: str, answer: str) -> str:
    """Seed 003's id from the content: the same question and answer always get the same id."""
    return "kb_" + hashlib.sha256(f"{question}\n{answer}".encode()).hexdigest()[:16]


def entry_documents(entries: Any) -> list[Document]:
    """Seed 003's entries ({question, answer, category?, metadata?}) as documents: text is the
    question and the answer on two lines; metadata keeps them with the category. The ingest
    pipeline checks them again before anything is written (`indexing.derive.check_documents`)."""
    if not isinstance(entries, list) or not entries:
        raise ToolProblem("entries must be a non-empty list of {question, answer, category?, metadata?}")
    if len(entries) > MAX_ENTRIES:
        raise ToolProblem(f"{len(entries)} entries in one call; the limit is {MAX_ENTRIES}")
    documents, problems, seen = [], [], {}
    for number, entry in enumerate(entries, start=1):
        if not isinstance(entry, dict):
            problems.append(f"entry {number}: not an object")
            continue
        unknown = sorted(set(entry) - {"question", "answer", "category", "metadata"})
        question, answer = entry.get("question"), entry.get("answer")
        category, metadata = entry.get("category"), entry.get("metadata")
        bad = [f"unknown field(s) {', '.join(unknown)}"] if unknown else []
        bad += [f"{name} must be a non-empty string" for name, value in (("question", question), ("answer", answer))
                if not isinstance(value, str) or not value.strip()]
        if category is not None and not isinstance(category, str):
            bad.append("category must be a string")
        if metadata is not None and not isinstance(metadata, dict):
            bad.append("metadata must be an object")
        if bad:
            problems.append(f"entry {number}: " + "; ".join(bad))
            continue
        doc_id = entry_id(question, answer)
        if doc_id in seen:
            problems.append(f"entry {number}: same question and answer as entry {seen[doc_id]}")
            continue
        seen[doc_id] = number
        meta = {**(metadata or {}), "question": question, "answer": answer}
        if category:
            meta["category"] = category
        try:
            json.dumps(meta, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            problems.append(f"entry {number}: metadata is not plain JSON ({exc})")
            continue
        documents.append(Document(id=doc_id, text=f"{question.strip()}\n{answer.strip()}", metadata=meta))
    if problems:
        raise ToolProblem("Entries rejected; nothing was added:\n  - " + "\n  - ".join(problems[:20])
                          + (f"\n  … and {len(problems) - 20} more" if len(problems) > 20 else ""))
    return documents


# ---- MCP --------------------------------------------------------------------------------------
# The tools' argument types (module level: the SDK resolves the annotations in this module).
class KnowledgeEntry(BaseModel):
    """Seed 003's entry."""

    model_config = ConfigDict(extra="forbid")
    question: str = Field(description="The question (required).")
    answer: str = Field(description="The answer (required).")
    category: str | None = Field(None, description="A category, kept in the metadata.")
    metadata: dict[str, Any] | None = Field(None, description="Other metadata (plain JSON).")


Collection = Annotated[str | None, Field(description="A served collection, by name or display name (default: the "
                                                     "server's default one; "
                                                     "see list_knowledge_collections).")]
TopK = Annotated[int, Field(description=f"How many results, 1–{MAX_TOP_K}.")]
Rerank = Annotated[bool | None, Field(description="Rerank the top results; default: as the served config says.")]
MinScore = Annotated[float | None, Field(description="Minimum score for a result to count as knowledge (default: "
                                                     "the server's --qa-min-score).")]
Limit = Annotated[int, Field(description="How many records, 1–50.")]


def build_server(service: KnowledgeService, name: str = "search-workbench", token: str | None = None,
                 host: str = "127.0.0.1", port: int = 8000):
    """The `MCPServer` with the tools above; `token` makes every HTTP request need it."""
    from mcp.server import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    auth_kwargs: dict[str, Any] = {}
    if token:
        from mcp.server.auth.provider import AccessToken
        from mcp.server.auth.settings import AuthSettings

        class StaticToken:
            """Accepts exactly the configured token (compared in constant time)."""

            async def verify_token(self, presented: str) -> AccessToken | None:
                if hmac.compare_digest(presented.encode(), token.encode()):
                    return AccessToken(token=presented, client_id="workbench", scopes=[])
                return None

        # issuer_url is required by the SDK but unused: no OAuth routes without a resource URL.
        auth_kwargs = {"token_verifier": StaticToken(),
                       "auth": AuthSettings(issuer_url=f"http://{url_host(host)}:{port}", resource_server_url=None)}

    served = ", ".join(f"{s.label} ({s.config_name})" for s in service.served.values())
    server = MCPServer(name, instructions=f"Search relevance workbench: hybrid search over {served}; default "
                       f"collection {service.default}. Results are ranked exactly as the tuned config ranks them.",
                       log_level="WARNING", **auth_kwargs)

    def call(fn, *args, **kwargs) -> dict[str, Any]:
        try:
            return fn(*args, **kwargs)
        except RetrievalError as exc:  # bad arguments, unknown collection, rejected entries …
            raise ToolError(str(exc)) from exc

    write_note = "" if service.allow_write else " Refused: this server was started without --allow-write."

    @server.tool()
    def retrieve_knowledge(query: str, top_k: TopK = DEFAULT_TOP_K, use_rerank: Rerank = None,
                           collection_name: Collection = None, filter_category: str | None = None,
                           filters: dict[str, Any] | list[str] | None = None) -> dict[str, Any]:
        """Hybrid search (BM25 + vectors, and whatever sources the tuned config fuses) of a knowledge
        collection, ranked exactly as the workbench ranks it with the served config. Each result: id,
        content, metadata, similarity (the fused display score), score (the fused score), rerank_score
        and _meta (per-source ranks, raw and normalised scores, contributions, as `python -m retrieval
        search --json` gives them). search_info names the config, fusion, weights and backends.
        filter_category keeps documents whose metadata category equals it; filters maps a metadata field
        to a value, a list of values (any of them) or a range {gte, lte, gt, lt} on numbers or ISO dates
        (or is a list of strings like "year>=2010"). Filters apply before ranking in every source and
        add to the served config's own; search_info.filters lists them all."""
        return call(service.retrieve, query, top_k, use_rerank, collection_name, filter_category, filters)

    @server.tool()
    def kb_qa(question: str, report: str | None = None, top_k: TopK = DEFAULT_TOP_K, use_rerank: Rerank = None,
              collection_name: Collection = None,
              min_score: MinScore = None) -> dict[str, Any]:
        """Knowledge-base question answering WITHOUT a language model: retrieves with the served config
        and returns the assembled context (answer = the question, the optional report and the numbered
        passages to answer from), the sources (id, similarity, question, answer) and has_knowledge:
        true when at least one result's score reaches the minimum. You write the final answer."""
        return call(service.qa, question, report, top_k, use_rerank, collection_name, min_score)

    @server.tool(description="Add knowledge entries ({question, answer, category?, metadata?}) to a served "
                 "collection, embedded with the collection's model; all or nothing. Ids come from the content, so "
                 "an entry already present is refused." + write_note)
    def add_knowledge(entries: list[KnowledgeEntry], collection_name: Collection = None) -> dict[str, Any]:
        return call(service.add, [e.model_dump(exclude_none=True) for e in entries], collection_name)

    @server.tool()
    def list_knowledge_collections() -> dict[str, Any]:
        """The served collections: documents, model, language, the config each is searched with,
        which one is the default and whether write tools are enabled."""
        return call(service.list_collections)

    @server.tool()
    def get_knowledge_stats(collection_name: Collection = None) -> dict[str, Any]:
        """Statistics of a served collection (documents, tokens, languages, metadata fields, version)
        and the search config it is served with."""
        return call(service.stats, collection_name)

    @server.tool(description="Remove every document of a served collection (it keeps its model and history)."
                 + write_note)
    def clear_collection(collection_name: Collection = None) -> dict[str, Any]:
        return call(service.clear, collection_name)

    @server.tool()
    def search_datasources(query: str, limit: Limit = DEFAULT_LIMIT) -> dict[str, Any]:
        """Seed 000's data-source search: the field-weighted keyword scorer alone over the records
        collection (query terms matched as substrings, OR; name, description, tags, domains,
        organisation and content points), with the served config's keyword points. Each result gives
        relevance_score, quality_score and the points of every field."""
        return call(service.search_datasources, query, limit)

    return server


# ---- command line -----------------------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The `serve` subcommand's options (`cli.py` builds the parser)."""
    parser.add_argument("--collection", action="append", dest="collections", metavar="NAME", required=True,
                        help="a collection to serve (repeat for more; the first is the default)")
    parser.add_argument("--config", action="append", dest="configs", metavar="NAME|FILE.json",
                        help="the config to serve with: a config saved on the Evaluate page or a JSON file; "
                             "once for every collection, or once per --collection in the same order "
                             "(default: the default SearchConfig)")
    parser.add_argument("--default", help="the collection used when a call names none (default: the first)")
    parser.add_argument("--records", help="the records collection search_datasources searches "
                                          "(default: sample-catalogue when served, else the default collection)")
    parser.add_argument("--http", metavar="[HOST:]PORT",
                        help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio (HOST 127.0.0.1; "
                             f"another host needs a bearer token in ${TOKEN_ENV})")
    parser.add_argument("--allow-write", action="store_true", help="enable add_knowledge and clear_collection")
    parser.add_argument("--qa-score", default="similarity",
                        help="the score kb_qa's has_knowledge reads: similarity (fused display score), rerank, "
                             "or a source name for its raw score (dense: cosine similarity)")
    parser.add_argument("--qa-min-score", type=float, default=0.0,
                        help="kb_qa: results below this score are not knowledge (default 0)")
    parser.add_argument("--name", default="search-workbench", help="the server name clients see")


def parse_http(spec: str) -> tuple[str, int]:
    """'8765' -> ('127.0.0.1', 8765); 'HOST:PORT' and '[::1]:PORT' as written."""
    host, sep, port_text = spec.rpartition(":")
    if not sep:
        host = "127.0.0.1"
    host = host.strip("[]") or "127.0.0.1"
    try:
        port = int(port_text)
    except ValueError:
        raise RetrievalError(f"--http takes [HOST:]PORT, e.g. 8765 or 127.0.0.1:8765; got {spec!r}") from None
    if not 0 < port < 65536:
        raise RetrievalError(f"--http port must be 1–65535, got {port}")
    return host, port


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def http_token(host: str) -> str | None:
    """The bearer token from the environment; refuse a non-loopback bind without one."""
    token = os.environ.get(TOKEN_ENV, "").strip() or None
    if token is not None and len(token) < MIN_TOKEN_CHARS:
        raise RetrievalError(f"${TOKEN_ENV} is too short: use at least {MIN_TOKEN_CHARS} characters")
    if token is None and not is_loopback(host):
        raise RetrievalError(f"Refusing to serve on {host} without a bearer token: set ${TOKEN_ENV} (clients then "
                             "send 'Authorization: Bearer <token>'), or bind 127.0.0.1")
    return token


def transport_security(host: str):
    """The Host and Origin check against DNS rebinding for a loopback bind, which serves without a
    token: the SDK turns it on by itself only for the names 127.0.0.1, localhost and ::1, so
    127.0.0.2 or 0:0:0:0:0:0:0:1 would have had neither. None elsewhere (a token is required)."""
    if not is_loopback(host):
        return None
    from mcp.server.transport_security import TransportSecuritySettings

    hosts = sorted({url_host(host), "127.0.0.1", "localhost", "[::1]"})
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=[f"{h}:*" for h in hosts],
                                     allowed_origins=[f"http://{h}:*" for h in hosts])


def build_service(workbench, args: argparse.Namespace) -> KnowledgeService:
    names = args.collections
    configs = args.configs or []
    if len(configs) not in (0, 1, len(names)):
        raise RetrievalError(f"Give --config once for every collection or once per --collection: "
                             f"{len(names)} collections, {len(configs)} configs")
    served = []
    for i, given in enumerate(names):
        name = workbench.resolve(given)  # a table or display name; unknown: a readable error, before serving
        info = workbench.info(name)
        spec = configs[i] if len(configs) == len(names) else (configs[0] if configs else None)
        config, label = workbench.configs.resolve(spec)
        served.append(Served(name, config, label, info.model, info.label))
    if args.qa_score not in QA_SCORES and not any(args.qa_score in s.config.sources for s in served):
        raise RetrievalError(f"--qa-score must be one of {', '.join(QA_SCORES)} or a served source name, "
                             f"got {args.qa_score!r}")
    default, records = (workbench.resolve(n) if n else None for n in (args.default, args.records))
    return KnowledgeService(workbench, served, default, args.allow_write, records,
                            args.qa_min_score, args.qa_score)


def warm_up(service: KnowledgeService) -> None:
    """One search per served collection: models loaded and sources built before the first call."""
    for served in service.served.values():
        try:
            service.workbench.search(served.collection, "warm up", served.config)
        except RetrievalError as exc:  # e.g. no documents yet: said once, each call says it again
            log.warning("not warmed up: %s", exc)
        except Exception:  # the call itself will report it; serving goes on
            log.warning("warm-up search on %s failed", served.collection, exc_info=True)


def run(args: argparse.Namespace, workbench) -> int:
    """Validate everything, warm up, then serve until stopped. Messages go to stderr only."""
    host, port = parse_http(args.http) if args.http else (None, None)
    token = http_token(host) if host else None
    with contextlib.redirect_stdout(sys.stderr):  # nothing may reach stdout before stdio serving
        service = build_service(workbench, args)
        server = build_server(service, args.name, token, host or "127.0.0.1", port or 8000)
        warm_up(service)
    where = f"http://{url_host(host)}:{port}/mcp" + (" (bearer token required)" if token else "") if host else "stdio"
    print(f"serving {', '.join(s.label for s in service.served.values())} on {where}; write tools "
          f"{'enabled' if service.allow_write else 'disabled'}", file=sys.stderr, flush=True)
    try:
        if host:
            server.run("streamable-http", host=host, port=port, transport_security=transport_security(host))
        else:
            server.run()
    except KeyboardInterrupt:  # Ctrl-C: a quiet stop, no traceback
        print("stopped", file=sys.stderr)
    return 0
