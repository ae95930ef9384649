"""Request templates: a descriptor's `params`, `body`, `arguments`, URL and header values filled
for one query, by substitution only (no expression is ever evaluated).

In any JSON value of a template, a string that is exactly a placeholder becomes the value with
its own type, and a placeholder inside a longer string becomes text:

    {query}         the query text                          "{query}"        -> "sore throat"
    {depth}         candidates asked for (an int)           "{depth}"        -> 100;  "n={depth}" -> "n=100"
    {filters}       the config's metadata filters (a list)  "{filters}"      -> ["year>=2010"];  in text: "year>=2010"
    {query_vector}  the query embedded by the collection's  "{query_vector}" -> [0.01, …] (floats)
                    own encoder (a list of floats)

`${NAME}` is replaced by the environment variable NAME (credentials: never stored). Other braces
are left as they are, so a template may hold literal JSON text.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any

from retrieval.types import RetrievalError

PLACEHOLDERS = ("query", "depth", "filters", "query_vector")
PLACEHOLDER_RE = re.compile(r"\{(" + "|".join(PLACEHOLDERS) + r")\}")
ENV_RE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def resolve_env(text: str) -> str:
    """`text` with every `${NAME}` replaced by the environment's value (a RetrievalError naming
    an unset variable: a credential is never guessed)."""
    def value(match: re.Match) -> str:
        name = match.group(1)
        if name not in os.environ:
            raise RetrievalError(f"environment variable {name} (named in the source descriptor) is not set")
        return os.environ[name]
    return ENV_RE.sub(value, text)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return ",".join(value)
    return json.dumps(value)


def fill(template: Any, values: Mapping[str, Any]) -> Any:
    """`template` (any JSON value) with its placeholders replaced from `values` (see the module
    doc) and `${NAME}` from the environment; dict keys are left as written."""
    if isinstance(template, str):
        whole = PLACEHOLDER_RE.fullmatch(template)
        if whole:
            return values[whole.group(1)]
        return resolve_env(PLACEHOLDER_RE.sub(lambda m: _as_text(values[m.group(1)]), template))
    if isinstance(template, list):
        return [fill(item, values) for item in template]
    if isinstance(template, dict):
        return {key: fill(value, values) for key, value in template.items()}
    return template


def placeholders_in(templates: Iterable[Any]) -> set[str]:
    """The placeholder names used anywhere in `templates`."""
    found: set[str] = set()
    for template in templates:
        if isinstance(template, str):
            found.update(PLACEHOLDER_RE.findall(template))
        elif isinstance(template, list):
            found |= placeholders_in(template)
        elif isinstance(template, dict):
            found |= placeholders_in(template.values())
    return found
