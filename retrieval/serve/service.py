"""What the MCP server's tools do, over one Workbench (`KnowledgeService`: each method returns its
tool's JSON); `server.py` registers them as tools. No `mcp` here.

Each served collection has one `SearchConfig`: a config saved on the Evaluate page
(`Workbench.configs`), a JSON file, or the defaults. A front end like the CLI (`retrieval/cli/`):
every result is `Workbench.search(collection, query, config)` as it is, formatted with the CLI's
own per-result JSON (`result_json.result_items`); nothing here computes a score.

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
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from retrieval.search.config import SearchConfig
from retrieval.search.fusion.methods import method_of
from retrieval.search.result_json import result_items
from retrieval.serve.arguments import ToolProblem, call_filters, entry_documents
from retrieval.text.records import (
    is_catalogue_record,
    record_descriptions,
    record_domains,
    record_names,
    record_organization,
    record_tags,
)
from retrieval.types import ParsedCorpus, RetrievalError

DEFAULT_TOP_K = 5  # seed 003's default
MAX_TOP_K = 100
MAX_QUERY_CHARS = 4000
DEFAULT_LIMIT = 10  # seed 000's default result limit (1–50)
QA_SCORES = ("similarity", "rerank")  # or a source name: that source's raw score (dense: cosine)


def _finite(value: Any, what: str) -> float:
    """A finite number (NaN compares false with every score, so it would pass them all)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ToolProblem(f"{what} must be a finite number, got {value!r}")
    return float(value)


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
        self.qa_min_score = _finite(qa_min_score, "--qa-min-score")
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
            # The method's own parameters (`fusion.methods`): null where the method reads none.
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
        minimum = self.qa_min_score if min_score is None else _finite(min_score, "min_score")
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
