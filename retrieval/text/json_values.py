"""JSON text parsed with its nesting bounded: `json.loads` recurses once per level and stops near
1,000 levels with a RecursionError (a traceback in the CLI, the Corpus preview raising), and the
later steps that handle the values (the metadata's JSON, a table's cells) recurse too. A document
nested past `limits.DOCUMENT_JSON_MAX_DEPTH` is a `json.JSONDecodeError` instead, so every reader's usual
"invalid JSON at line …, column …" message names where."""

from __future__ import annotations

import json
import re
from typing import Any

from retrieval import limits

_JSON_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{},]')  # strings (skipped whole), brackets, commas


def parse_json(text: str) -> Any:
    """`json.loads`, with nesting bounded by `limits.DOCUMENT_JSON_MAX_DEPTH`: a document nested deeper is
    a `json.JSONDecodeError` ("nested more than 100 levels deep", at the bracket opening the
    level past it, with its item when the document is an array), never a RecursionError nor a
    value the later steps cannot handle."""
    try:
        value = json.loads(text)
    except RecursionError:
        value, deep = None, True
    else:
        deep = _deeper_than(value, limits.DOCUMENT_JSON_MAX_DEPTH)
    if deep:
        offset, item = _too_deep_at(text, limits.DOCUMENT_JSON_MAX_DEPTH)
        where = f" (item {item})" if item is not None else ""
        limit = limits.DOCUMENT_JSON_MAX_DEPTH
        raise json.JSONDecodeError(f"nested more than {limit} levels deep{where}", text, offset)
    return value


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether parsed JSON has more than `limit` levels of arrays and objects (without recursion)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def _too_deep_at(text: str, limit: int) -> tuple[int, int | None]:
    """(offset of the bracket opening level `limit` + 1, the item of the top-level array it is
    in, from 1, or None when the document is not an array)."""
    depth, item = 0, None
    for token in _JSON_TOKENS.finditer(text):
        char = token.group()
        if char in ("[", "{"):
            depth += 1
            if depth == 1 and char == "[":
                item = 1
            if depth > limit:
                return token.start(), item
        elif char in ("]", "}"):
            depth -= 1
        elif char == "," and depth == 1 and item is not None:
            item += 1
    return len(text), item
