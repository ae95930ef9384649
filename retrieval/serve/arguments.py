"""A tool call's arguments in the core's terms: its filters as `retrieval.search.filters` strings
(`call_filters`) and seed 003's knowledge entries as documents (`entry_documents`, each id from
its content); a bad argument is a `ToolProblem`, whose message the client reads as a tool error.
"""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from retrieval.search.filters import escape_value
from retrieval.types import Document, RetrievalError

MAX_ENTRIES = 1000  # per add_knowledge call
RANGE_OPERATORS = {"gte": ">=", "lte": "<=", "gt": ">", "lt": "<"}


def call_filters(filter_category: str | None, filters: Any) -> list[str]:
    """A tool call's filters as `retrieval.search.filters` strings: `filter_category` is `category=…`;
    `filters` maps a field to a value, a list of values (any of them), or a range object
    {"gte": …, "lte": …, "gt": …, "lt": …} (numbers or ISO dates), or is a list of filter strings.
    Values are literals (`escape_value`: `public|secret` is one category), numbers finite; a field
    name is a name, never an operator."""
    out = [] if filter_category in (None, "") else [f"category={_literal(filter_category, 'filter_category')}"]
    if filters in (None, {}, []):
        return out
    if isinstance(filters, list) and all(isinstance(f, str) for f in filters):
        return out + filters  # filter strings: the language itself, as the CLI's --filter takes it
    if not isinstance(filters, dict):
        raise ToolProblem("filters must be an object {field: value | [values] | {gte, lte, gt, lt}} or a list "
                          "of strings like 'category=a'")
    for field, value in filters.items():
        if not isinstance(field, str) or not field.strip() or field != field.strip() or _FIELD_SYNTAX & set(field):
            raise ToolProblem(f"filters: a field name is a metadata field without = < > | \\ or spaces at either "
                              f"end; got {field!r}")
        if isinstance(value, dict):
            unknown = sorted(set(value) - set(RANGE_OPERATORS))
            if unknown or not value:
                raise ToolProblem(f"filters.{field}: a range takes gte, lte, gt, lt; got {sorted(value)}")
            out += [f"{field}{RANGE_OPERATORS[op]}{_bound(bound, field)}" for op, bound in value.items()]
        elif isinstance(value, list) and value:
            out.append(f"{field}={'|'.join(_literal(v, f'filters.{field}') for v in value)}")
        elif isinstance(value, (str, int, float)) and not isinstance(value, bool):
            out.append(f"{field}={_literal(value, f'filters.{field}')}")
        else:
            raise ToolProblem(f"filters.{field}: give a value, a list of values or a range, got {value!r}")
    return out


_FIELD_SYNTAX = set("=<>|\\")


def _literal(value: Any, what: str) -> str:
    """One value, escaped so that the filter language reads it as itself."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise ToolProblem(f"{what}: a value is a string or a number, got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolProblem(f"{what}: a number must be finite, got {value!r}")
    if isinstance(value, str) and not value.strip():
        raise ToolProblem(f"{what}: a value must not be empty")
    return escape_value(str(value))


def _bound(value: Any, field: str) -> str:
    """A range's bound: a finite number or an ISO date, never more syntax."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolProblem(f"filters.{field}: a range bound must be a finite number or an ISO date, got {value!r}")
    if isinstance(value, bool) or not isinstance(value, (str, int, float)) or (
            isinstance(value, str) and (not value.strip() or set(value) & set("|\\=<>"))):
        raise ToolProblem(f"filters.{field}: a range bound must be a finite number or an ISO date, got {value!r}")
    return str(value).strip()


class ToolProblem(RetrievalError):
    """A bad tool call: the message is what the client reads (an MCP tool error)."""


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
