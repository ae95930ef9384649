"""An outside engine's descriptor: parsed, validated and checked for safety before anything is
called, so a bad descriptor is refused with a message naming every problem.

    {"name": "prod", "kind": "http", "url": "https://search.example.com/api/search",
     "method": "GET" | "POST", "headers": {"Authorization": "Bearer ${PROD_KEY}"},
     "params": {"q": "{query}", "size": "{depth}"}  (GET)  |  "body": {...}  (POST),
     "hits": "hits.hits", "id": "_id", "score": "_score", "title": "_source.title"?, "text": ...?,
     "score_order": "descending" (higher is better) | "ascending" (lower is better: a distance)?,
     "timeout_s": 10?, "max_concurrent": 4?, "max_bytes": 5000000?, "max_depth": 1000?, "label": "production"?}

    {"name": "other-workbench", "kind": "mcp", "command": ["python", "-m", "retrieval", "serve", …]
     | "url": "http://127.0.0.1:8765/mcp", "tool": "retrieve_knowledge",
     "arguments": {"query": "{query}", "top_k": "{depth}"}, "hits": "results", "id": "id", …}

Templates (`params`, `body`, `arguments`, `url`, header values) fill `{query}`, `{depth}`,
`{filters}` and `{query_vector}` (`templates.py`); paths are JMESPath expressions, compiled here
(`mapping.py`): data, never code. Credentials come only from environment variables named as
`${NAME}` and are read at call time, so the descriptor as saved holds no secret: a credential
header (`Authorization`, `*key*`, `*token*`, `*secret*`, `Cookie`) whose value is not made of
`${NAME}` placeholders is refused.

Safety: only http and https URLs; a URL whose host is a link-local address (169.254.0.0/16,
fe80::/10: cloud metadata services live there) or a metadata host name is refused here, and again
at call time for every address its host resolves to (`http_kind.check_resolved`). Every call is
bounded by `timeout_s`, its response by `max_bytes`, the engine's calls in flight by
`max_concurrent`; nothing is retried.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from retrieval.addresses import Address, carried_ipv4, ip_address_of, is_link_local_or_metadata, is_metadata_host
from retrieval.limits import DEPTH_MAX, NAME_MAX
from retrieval.sources.external.mapping import ResultPaths, compile_paths
from retrieval.sources.external.templates import ENV_RE, placeholders_in
from retrieval.types import RetrievalError

KINDS = ("http", "mcp")
METHODS = ("GET", "POST")
TIMEOUT_DEFAULT_S, TIMEOUT_MAX_S = 10.0, 120.0
CONCURRENT_DEFAULT, CONCURRENT_MAX = 4, 32
BYTES_DEFAULT, BYTES_MAX = 5_000_000, 100_000_000
DEPTH_DEFAULT = 1000  # results asked for at most: "why not?" asks for the whole collection's depth
NAME_RE = re.compile(r"[A-Za-z][A-Za-z0-9_\-]{0,63}")
CREDENTIAL_HEADER = re.compile(r"authorization|cookie|key|token|secret|password", re.IGNORECASE)
_FIELDS = {"name", "kind", "label", "url", "method", "headers", "params", "body", "command", "env", "tool",
           "arguments", "hits", "id", "score", "score_order", "title", "text", "timeout_s", "max_concurrent",
           "max_bytes",
           "max_depth"}


@dataclass(frozen=True)
class Descriptor:
    """A validated descriptor (`parse_descriptor`); `data` is its JSON form as given (saved as is)."""

    name: str
    kind: str
    label: str
    paths: ResultPaths
    url: str = ""
    method: str = "GET"
    headers: dict[str, str] = field(default_factory=dict)
    params: Any = None
    body: Any = None
    command: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    tool: str = ""
    arguments: Any = None
    timeout_s: float = TIMEOUT_DEFAULT_S
    max_concurrent: int = CONCURRENT_DEFAULT
    max_bytes: int = BYTES_DEFAULT
    max_depth: int = DEPTH_DEFAULT
    data: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def fingerprint(self) -> str:
        """A hash of the descriptor's JSON: what its cached responses are keyed by, so a changed
        descriptor under the same name never reads an old answer."""
        return hashlib.sha256(json.dumps(self.data, sort_keys=True).encode()).hexdigest()[:16]

    @property
    def uses_query_vector(self) -> bool:
        return "query_vector" in placeholders_in([self.params, self.body, self.arguments, self.url])

    def to_json(self) -> str:
        return json.dumps(self.data, ensure_ascii=False, sort_keys=True)


def parse_descriptor(data: Any) -> Descriptor:
    """A `Descriptor` from its JSON (a dict or its text), or a RetrievalError naming every problem."""
    if isinstance(data, str | bytes):
        try:
            data = json.loads(data)
        except json.JSONDecodeError as exc:
            raise RetrievalError(f"source descriptor is not valid JSON: {exc}") from exc
    if not isinstance(data, dict):
        raise RetrievalError("source descriptor must be a JSON object")
    problems: list[str] = []
    unknown = sorted(set(map(str, data)) - _FIELDS)
    if unknown:
        problems.append(f"unknown field(s) {', '.join(unknown)}; known: {', '.join(sorted(_FIELDS))}")
    name = data.get("name")
    if not isinstance(name, str) or not NAME_RE.fullmatch(name) or len(name) > NAME_MAX:
        problems.append(f"name must be a letter then up to 63 letters, digits, '_' or '-', got {name!r}")
    kind = data.get("kind")
    if kind not in KINDS:
        problems.append(f"kind must be one of {KINDS}, got {kind!r}")
    label = data.get("label", name)
    if not isinstance(label, str):
        problems.append(f"label must be a string, got {label!r}")
    timeout_s = _number(data, "timeout_s", TIMEOUT_DEFAULT_S, 0.1, TIMEOUT_MAX_S, problems)
    max_concurrent = int(_number(data, "max_concurrent", CONCURRENT_DEFAULT, 1, CONCURRENT_MAX, problems, whole=True))
    max_bytes = int(_number(data, "max_bytes", BYTES_DEFAULT, 1_000, BYTES_MAX, problems, whole=True))
    max_depth = int(_number(data, "max_depth", DEPTH_DEFAULT, 1, DEPTH_MAX, problems, whole=True))
    try:
        paths = compile_paths(data)
    except RetrievalError as exc:
        problems.append(str(exc))
        paths = None
    fields: dict[str, Any] = {}
    if kind == "http":
        fields = _http_fields(data, problems)
    elif kind == "mcp":
        fields = _mcp_fields(data, problems)
    if problems:
        shown = name if isinstance(name, str) else "?"
        raise RetrievalError(f"source descriptor {shown!r}: " + "; ".join(problems))
    return Descriptor(name=name, kind=kind, label=label, paths=paths, timeout_s=timeout_s,
                      max_concurrent=max_concurrent, max_bytes=max_bytes, max_depth=max_depth, data=dict(data),
                      **fields)


def _number(data: dict, key: str, default: float, low: float, high: float, problems: list[str],
            whole: bool = False) -> float:
    value = data.get(key, default)
    ok = isinstance(value, int | float) and not isinstance(value, bool) and (not whole or float(value).is_integer())
    if not ok or not low <= value <= high:
        problems.append(f"{key} must be a {'whole ' if whole else ''}number in [{low:g}, {high:g}], got {value!r}")
        return default
    return value


def _http_fields(data: dict, problems: list[str]) -> dict[str, Any]:
    url = data.get("url")
    problem = url_problem(url)
    if problem:
        problems.append(problem)
    method = data.get("method", "GET")
    if method not in METHODS:
        problems.append(f"method must be one of {METHODS}, got {method!r}")
    if method == "GET" and "body" in data:
        problems.append("a GET request has no body: use params (or method POST)")
    params, body = data.get("params"), data.get("body")
    if params is not None and not isinstance(params, dict):
        problems.append("params must be an object of name → template")
    headers = _headers(data.get("headers", {}), problems)
    return {"url": url, "method": method, "headers": headers, "params": params, "body": body}


def _mcp_fields(data: dict, problems: list[str]) -> dict[str, Any]:
    command, url = data.get("command"), data.get("url")
    if (command is None) == (url is None):
        problems.append("an mcp source has either command (a list: the server started over stdio) or url "
                        "(streamable HTTP), not both")
    if command is not None and (not isinstance(command, list) or not command
                                or not all(isinstance(c, str) and c for c in command)):
        problems.append(f"command must be a non-empty list of strings, got {command!r}")
    if url is not None:
        problem = url_problem(url)
        if problem:
            problems.append(problem)
    env = data.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
        problems.append("env must be an object of name → string")
        env = {}
    tool = data.get("tool")
    if not isinstance(tool, str) or not tool:
        problems.append(f"tool must name the server's search tool, got {tool!r}")
    arguments = data.get("arguments", {"query": "{query}"})
    if not isinstance(arguments, dict):
        problems.append("arguments must be an object of name → template")
    return {"url": url or "", "command": tuple(command or ()), "env": env, "tool": tool or "",
            "arguments": arguments, "headers": _headers(data.get("headers", {}), problems)}


def _headers(headers: Any, problems: list[str]) -> dict[str, str]:
    if not isinstance(headers, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items()):
        problems.append("headers must be an object of name → string")
        return {}
    for key, value in headers.items():
        if CREDENTIAL_HEADER.search(key) and ENV_RE.sub("", value).strip() not in ("", "Bearer", "Basic", "Token"):
            problems.append(f"header {key!r} holds a credential: write it as ${{ENV_NAME}} (read from the "
                            "environment at call time, never saved)")
    return headers


def url_problem(url: Any) -> str | None:
    """Why `url` may not be called (not http(s), no host, a link-local or metadata host), or None.
    `${NAME}` and `{…}` placeholders in the path and query are allowed; the host must be literal."""
    if not isinstance(url, str) or not url:
        return f"url must be an http(s) URL, got {url!r}"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https"):
        return f"url must be http or https, got {parts.scheme or 'no scheme'!r} in {url!r}"
    host = parts.hostname or ""
    if not host or "{" in parts.netloc or "$" in parts.netloc:
        return f"url must name its host literally, got {url!r}"
    if parts.username or parts.password:
        return "url must not hold credentials (user:password@): use a header with ${ENV_NAME}"
    problem = host_problem(host)
    return f"url {url!r}: {problem}" if problem else None


def host_problem(host: str) -> str | None:
    """Why `host` (a name or an address) may not be called, or None (`retrieval.addresses`)."""
    if is_metadata_host(host):
        return f"{host!r} is a cloud metadata host: refused"
    address = ip_address_of(host)
    return address_problem(address) if address is not None else None


def address_problem(address: Address) -> str | None:
    shown = carried_ipv4(address) or address
    if is_link_local_or_metadata(address) or shown.is_multicast or shown.is_unspecified:
        return (f"{shown} is a link-local, multicast or unspecified address, or a cloud metadata service's: "
                "refused")
    return None


def read_descriptor(path) -> Descriptor:
    """A descriptor from a JSON file."""
    from pathlib import Path

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise RetrievalError(f"cannot read {path}: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise RetrievalError(f"{path} is not UTF-8 text") from exc
    return parse_descriptor(text)
