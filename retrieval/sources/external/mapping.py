"""From an outside engine's JSON response to ranked hits, by JMESPath expressions
(https://jmespath.org: a query language over JSON, parsed by the `jmespath` package; data, never
code).

    hits   where the list of results is, from the response's root ("hits.hits", "results", "@")
    id     from each result, the document id (a string or a whole number) ("_id", "id")
    score  from each result, the engine's score (a number)                 ("_score", "score")
    title, text (optional)  from each result, what to show when the local collection lacks it

Besides JMESPath's own functions, paths may call `zip(array, …)` (JMESPath Community's, spec at
https://jmespath.site: the i-th element of each array as one array, as long as the shortest), for
an engine that answers with parallel arrays instead of a list of results — Chroma's
`{"ids": [[…]], "distances": [[…]], "documents": [[…]]}` is read by the hits path
`zip(ids[0], distances[0], documents[0])`, then id `[0]`, score `[1]`, text `[2]`.

The engine's order is the ranking (rank 1 = its first result); its scores are the raw scores,
as given, unless the descriptor's `score_order` is "ascending" (lower is better: a distance d ≥ 0),
when the source's score is the similarity 1 / (1 + d), in (0, 1]: higher is better, as fusion
expects of every source, and positive, so a document the engine did not return (0) still counts
less than any it did under every normalisation (−d would rank it above them all under l2 or
none); the engine's d is kept as the hit's `engine_score`. A negative distance is refused.

A path that matches nothing, a path whose function fails (`zip` of a missing array), a list
that is not a list, an id or a score of the wrong type: the whole response is refused with a
message naming the path (`MappingError`), so the source reports an error instead of fusing half
a response. A repeated id keeps its first place.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass
from typing import Any

import jmespath
from jmespath import functions
from jmespath.exceptions import JMESPathError

from retrieval.types import RetrievalError

REQUIRED = ("hits", "id", "score")
OPTIONAL = ("title", "text")
SCORE_ORDERS = ("descending", "ascending")  # higher is better (a relevance score) | lower is (a distance)


class _Functions(functions.Functions):
    """JMESPath's functions plus JMESPath Community's `zip` (see the module doc)."""

    @functions.signature({"types": ["array"], "variadic": True})
    def _func_zip(self, *arrays):
        for value in arrays[1:]:  # jmespath type-checks only the first of a variadic's arguments
            self._type_check_single(value, ["array"], "zip")
        return [list(items) for items in zip(*arrays, strict=False)]


_OPTIONS = jmespath.Options(custom_functions=_Functions())


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
    lower_is_better: bool = False  # `score_order` "ascending": the source's score is 1 / (1 + raw)


@dataclass(frozen=True)
class OutsideHit:
    doc_id: str
    score: float  # higher is better: the engine's score, or 1 / (1 + it) when lower is better
    title: str | None = None
    text: str | None = None
    engine_score: float | None = None  # the engine's own value when lower is better (a distance)


def compile_paths(data: dict) -> ResultPaths:
    """The descriptor's `hits`, `id`, `score` (required) and `title`, `text` paths compiled, and
    its `score_order`, or a RetrievalError naming every missing or unreadable one."""
    problems, compiled = [], {}
    order = data.get("score_order", "descending")
    if order not in SCORE_ORDERS:
        problems.append(f"score_order must be one of {SCORE_ORDERS} (descending: higher is better), got {order!r}")
    compiled["lower_is_better"] = order == "ascending"
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
    results = _search(paths.hits, "hits", response)
    if results is None:
        raise MappingError(f"hits path {paths.hits.expression!r} matched nothing in the response "
                           f"({_shape(response)})")
    if not isinstance(results, list):
        raise MappingError(f"hits path {paths.hits.expression!r} matched {_shape(results)}, not a list")
    hits: dict[str, OutsideHit] = {}
    for position, item in enumerate(results, start=1):
        if len(hits) >= depth:
            break
        doc_id = _search(paths.id, "id", item, position)
        if isinstance(doc_id, int) and not isinstance(doc_id, bool):
            doc_id = str(doc_id)
        if not isinstance(doc_id, str) or not doc_id:
            raise MappingError(f"id path {paths.id.expression!r} matched {doc_id!r} in result {position}, "
                               f"not an id ({_shape(item)})")
        score = _search(paths.score, "score", item, position)
        if isinstance(score, str):  # Solr and others may send numbers as strings
            with contextlib.suppress(ValueError):
                score = float(score)
        if not isinstance(score, int | float) or isinstance(score, bool) or not math.isfinite(score):
            raise MappingError(f"score path {paths.score.expression!r} matched {score!r} in result {position}, "
                               "not a finite number")
        if doc_id not in hits:
            score, engine_score = float(score), None
            if paths.lower_is_better:
                if score < 0:
                    raise MappingError(f"score path {paths.score.expression!r} matched {score!r} in result "
                                       f"{position}: score_order 'ascending' reads a distance, never negative")
                score, engine_score = similarity(score), score
            hits[doc_id] = OutsideHit(doc_id, score, _text(paths.title, "title", item, position),
                                      _text(paths.text, "text", item, position), engine_score)
    return list(hits.values())


def similarity(distance: float) -> float:
    """1 / (1 + d): a distance d ≥ 0 as a score in (0, 1], higher for nearer (1 at d = 0)."""
    return 1.0 / (1.0 + distance)


def _search(path: Any, key: str, value: Any, position: int | None = None) -> Any:
    """`path` applied to `value`; a function's failure (a wrong argument type) is a MappingError."""
    try:
        return path.search(value, options=_OPTIONS)
    except JMESPathError as exc:
        where = f" in result {position}" if position else ""
        raise MappingError(f"{key} path {path.expression!r} failed{where}: {str(exc).splitlines()[0]}") from None


def _text(path: Any, key: str, item: Any, position: int) -> str | None:
    if path is None:
        return None
    value = _search(path, key, item, position)
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)
