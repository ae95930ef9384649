"""The `http` kind: one request per query to an outside engine's JSON search API.

One `httpx2.Client` per engine (its connections reused by every query), at most
`max_concurrent` requests in flight (a semaphore: more wait their turn), each bounded by
`timeout_s` (to connect, and each read and write) and its body by `max_bytes` (read in chunks,
refused once over). Redirects are not followed (a redirect could lead to a refused address); a
loopback engine is reached directly, any other through the environment's proxies. Before the
first request every address the host resolves to is checked (`check_resolved`: no link-local or
metadata address). Nothing is retried: a failure is that query's error (`ExternalError`), with
what happened in words.
"""

from __future__ import annotations

import json
import socket
import threading
from typing import Any
from urllib.parse import urlsplit

import httpx2

from retrieval.addresses import ip_address_of, is_loopback
from retrieval.sources.external.descriptor import Descriptor, address_problem
from retrieval.sources.external.templates import fill, resolve_env
from retrieval.types import RetrievalError


class ExternalError(RetrievalError):
    """A call to an outside engine failed; the message says how (no traceback needed)."""


def check_resolved(host: str, port: int) -> None:
    """Refuse `host` when any address it resolves to is link-local, multicast or unspecified."""
    try:
        infos = socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
    except socket.gaierror as exc:
        raise ExternalError(f"unknown host {host!r} ({exc.strerror})") from None
    for info in infos:
        problem = address_problem(ip_address_of(str(info[4][0])))
        if problem:
            raise ExternalError(f"{host} resolves to {problem}")


def _cause(exc: BaseException) -> BaseException:
    for _ in range(10):
        under = exc.__cause__ or exc.__context__
        if under is None:
            break
        exc = under
    return exc


class HttpEngine:
    """Calls the engine of one `http` descriptor (thread-safe; close it when done)."""

    def __init__(self, descriptor: Descriptor):
        self.descriptor = descriptor
        parts = urlsplit(descriptor.url)
        self.host, self.port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
        self.where = f"{parts.scheme}://{parts.netloc}"
        self._slots = threading.BoundedSemaphore(descriptor.max_concurrent)
        self._checked = False
        self._http = httpx2.Client(timeout=descriptor.timeout_s, trust_env=not is_loopback(self.host),
                                   follow_redirects=False, headers={"Accept": "application/json"})

    def close(self) -> None:
        self._http.close()

    def request(self, values: dict[str, Any]) -> dict[str, Any]:
        """What is sent for placeholder `values`: method, url, params, json (no header: they may
        hold credentials, and they do not change the answer's key)."""
        d = self.descriptor
        return {"method": d.method, "url": fill(d.url, values),
                "params": fill(d.params, values) if d.params is not None else None,
                "json": fill(d.body, values) if d.body is not None else None}

    def call(self, request: dict[str, Any]) -> Any:
        """The engine's JSON answer to `request` (from `request`), or an ExternalError."""
        if not self._checked:
            check_resolved(self.host, self.port)
            self._checked = True
        headers = {key: resolve_env(value) for key, value in self.descriptor.headers.items()}
        params = {k: (json.dumps(v) if isinstance(v, dict | list) else v) for k, v in (request["params"] or {}).items()}
        with self._slots:
            return self._send(request, params, headers)

    def _send(self, request: dict[str, Any], params: dict[str, Any], headers: dict[str, str]) -> Any:
        d = self.descriptor
        try:
            with self._http.stream(request["method"], request["url"], params=params or None, json=request["json"],
                                   headers=headers) as response:
                body = self._read(response)
        except httpx2.TimeoutException:
            raise ExternalError(f"no answer from {self.where} within {d.timeout_s:g} s") from None
        except httpx2.ConnectError as exc:
            reason = _cause(exc)
            what = "connection refused" if isinstance(reason, ConnectionRefusedError) else str(reason) or str(exc)
            raise ExternalError(f"cannot reach {self.where}: {what}") from None
        except (httpx2.NetworkError, httpx2.ProtocolError) as exc:
            raise ExternalError(f"connection to {self.where} lost ({type(exc).__name__})") from None
        except httpx2.RequestError as exc:
            raise ExternalError(f"request to {self.where} failed: {exc or type(exc).__name__}") from None
        try:
            return json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ExternalError(f"{self.where} answered with malformed JSON ({exc}): {body[:80]!r}") from None

    def _read(self, response) -> bytes:
        d = self.descriptor
        if response.is_redirect:
            raise ExternalError(f"{self.where} answered {response.status_code} (a redirect to "
                                f"{response.headers.get('location', '?')!r}); redirects are not followed: "
                                "put the final URL in the descriptor")
        declared = response.headers.get("content-length")
        if declared and declared.isdigit() and int(declared) > d.max_bytes:
            raise ExternalError(f"{self.where} answered {int(declared):,} bytes, over max_bytes {d.max_bytes:,}")
        chunks, size = [], 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > d.max_bytes:
                raise ExternalError(f"{self.where}'s answer is over max_bytes {d.max_bytes:,}")
            chunks.append(chunk)
        body = b"".join(chunks)
        if not response.is_success:
            detail = " ".join(body[:300].decode("utf-8", "replace").split())
            raise ExternalError(f"{self.where} answered HTTP {response.status_code}"
                                + (f": {detail}" if detail else ""))
        return body
