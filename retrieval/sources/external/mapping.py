"""From an outside engine's JSON response to ranked hits, by JMESPath expressions
(https://jmespath.org: a query language over JSON, parsed by the `jmespath` package; data, never
code).

    hits   where the list of results is, from the response's root ("hits.hits", "results", "@")
    id     from each result, the document id (a string or a whole number) ("_id", "id")
    score  from each result, the engine's score (a number)                 ("_score", "score")
    title, text (optional)  from each result, what to show when the local collection lacks it

The engine's order is the ranking (rank 1 = its first result); its scores are the raw scores,
as given. A path that matches nothing, a list that is not a list, an id or a score of the wrong
type: the whole response is refused with a message naming the path (`MappingError`), so the
source reports an error instead of fusing half a response. A repeated id keeps its first place.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Any

import jmespath
from jmespath.exceptions import JMESPathError

from retrieval.types import RetrievalError

REQUIRED = ("hits", "id", "score")
OPTIONAL = ("title", "text")


class MappingError(RetrievalError):
    """The response does not have the shape the descriptor's paths describe."""


@dataclass(frozen=True)
class ResultPaths:
    """A descriptor's compiled paths (None: not mapped)."""

    hits: Any
    id: Any
    score: Any
    title: Any = None
    text: Any = None


@dataclass(frozen=True)
class OutsideHit:
    doc_id: str
    score: float
    title: str | None = None
    text: str | None = None


def compile_paths(data: dict) -> ResultPaths:
    """The descriptor's `hits`, `id`, `score` (required) and `title`, `text` paths compiled, or a
    RetrievalError naming every missing or unreadable one."""
    problems, compiled = [], {}
    for key in REQUIRED + OPTIONAL:
        expression = data.get(key)
        if expression is None:
            if key in REQUIRED:
                problems.append(f"{key} (a JMESPath expression) is required")
            compiled[key] = None
            continue
        if not isinstance(expression, str) or not expression.strip():
            problems.append(f"{key} must be a JMESPath expression, got {expression!r}")
            continue
        try:
            compiled[key] = jmespath.compile(expression)
        except JMESPathError as exc:
            problems.append(f"{key} path {expression!r} is not JMESPath: {str(exc).splitlines()[0]}")
    if problems:
        raise RetrievalError("; ".join(problems))
    return ResultPaths(**compiled)


def _shape(value: Any) -> str:
    if isinstance(value, dict):
        return "an object with keys " + ", ".join(list(map(str, value))[:8])
    return f"a {type(value).__name__}"


def map_hits(response: Any, paths: ResultPaths, depth: int) -> list[OutsideHit]:
    """The first `depth` results of `response` as `OutsideHit`s (see the module doc)."""
    results = paths.hits.search(response)
    if results is None:
        raise MappingError(f"hits path {paths.hits.expression!r} matched nothing in the response "
                           f"({_shape(response)})")
    if not isinstance(results, list):
        raise MappingError(f"hits path {paths.hits.expression!r} matched {_shape(results)}, not a list")
    hits: dict[str, OutsideHit] = {}
    for position, item in enumerate(results, start=1):
        if len(hits) >= depth:
            break
        doc_id = paths.id.search(item)
        if isinstance(doc_id, int) and not isinstance(doc_id, bool):
            doc_id = str(doc_id)
        if not isinstance(doc_id, str) or not doc_id:
            raise MappingError(f"id path {paths.id.expression!r} matched {doc_id!r} in result {position}, "
                               f"not an id ({_shape(item)})")
        score = paths.score.search(item)
        if isinstance(score, str):  # Solr and others may send numbers as strings
            with contextlib.suppress(ValueError):
                score = float(score)
        if not isinstance(score, int | float) or isinstance(score, bool) or not math.isfinite(score):
            raise MappingError(f"score path {paths.score.expression!r} matched {score!r} in result {position}, "
                               "not a finite number")
        if doc_id not in hits:
            hits[doc_id] = OutsideHit(doc_id, float(score), _text(paths.title, item), _text(paths.text, item))
    return list(hits.values())


def _text(path: Any, item: Any) -> str | None:
    if path is None:
        return None
    value = path.search(item)
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)
