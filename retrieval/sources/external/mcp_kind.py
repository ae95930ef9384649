"""The `mcp` kind: an MCP server's search tool called once per query, through the official MCP SDK
(`mcp` 2.x): a server started by `command` over stdio, or reached at `url` over streamable HTTP.

One session per engine, opened at the first query and kept (a server started over stdio loads
its models once), on an event loop of its own (`anyio`'s blocking portal: a thread), so the
sources' threads call it synchronously; at most `max_concurrent` calls in flight. Every call is
bounded by `timeout_s`. The tool's structured result is the response the paths read (else its
first text content parsed as JSON); a tool error, a timeout or a lost server is that query's
`ExternalError`, and the session is closed so that the next query opens a new one (once: nothing
is retried in a loop). Starting a command runs a program on this machine: a front end a browser
reaches does not register such descriptors (docs/sources.md).
"""

from __future__ import annotations

import json
import os
import threading
from typing import Any

import anyio
from anyio.from_thread import start_blocking_portal

from retrieval.sources.external.descriptor import Descriptor
from retrieval.sources.external.http_kind import ExternalError, check_resolved
from retrieval.sources.external.templates import fill, resolve_env

CONNECT_S = 120.0  # a stdio server may load its models before it answers `initialize`


class McpEngine:
    """Calls the search tool of one `mcp` descriptor (thread-safe; close it when done)."""

    def __init__(self, descriptor: Descriptor):
        self.descriptor = descriptor
        self.where = descriptor.url or " ".join(descriptor.command)
        self._slots = threading.BoundedSemaphore(descriptor.max_concurrent)
        self._lock = threading.Lock()
        self._portal_cm = self._portal = self._session = self._stop = self._holder = None

    def request(self, values: dict[str, Any]) -> dict[str, Any]:
        return {"tool": self.descriptor.tool, "arguments": fill(self.descriptor.arguments, values)}

    def call(self, request: dict[str, Any]) -> Any:
        with self._slots:
            session, portal = self._connected()
            try:
                result = portal.call(self._call_tool, session, request["tool"], request["arguments"])
            except ExternalError:
                self.close()
                raise
            except Exception as exc:  # the server went away, or its stream broke
                self.close()
                raise ExternalError(f"MCP server {self.where} failed: {type(exc).__name__}: {exc}") from None
        if result.is_error:
            text = result.content[0].text if result.content else "no message"
            raise ExternalError(f"MCP tool {request['tool']!r} of {self.where} answered an error: {text[:300]}")
        if result.structured_content is not None:
            return result.structured_content
        text = next((c.text for c in result.content if getattr(c, "text", None)), "")
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            raise ExternalError(f"MCP tool {request['tool']!r} answered text that is not JSON: {text[:80]!r}") from None

    async def _call_tool(self, session, tool: str, arguments: dict[str, Any]):
        try:
            with anyio.fail_after(self.descriptor.timeout_s):
                return await session.call_tool(tool, arguments)
        except TimeoutError:
            raise ExternalError(f"no answer from MCP server {self.where} within {self.descriptor.timeout_s:g} s") \
                from None

    def _connected(self):
        with self._lock:
            if self._session is None:
                self._open()
            return self._session, self._portal

    def _open(self) -> None:
        d = self.descriptor
        if d.url:
            from urllib.parse import urlsplit

            parts = urlsplit(d.url)
            check_resolved(parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80))
        cm = start_blocking_portal()
        portal = cm.__enter__()
        try:
            stop = portal.call(anyio.Event)
            future, session = portal.start_task(self._hold, stop)
        except Exception as exc:
            cm.__exit__(None, None, None)
            raise ExternalError(f"cannot start or reach MCP server {self.where}: {_reason(exc)}") from None
        self._portal_cm, self._portal, self._session, self._stop, self._holder = cm, portal, session, stop, future

    async def _hold(self, stop, task_status=anyio.TASK_STATUS_IGNORED) -> None:
        """Open the transport and the session, hand the session out, keep them open until `stop`."""
        from mcp import ClientSession

        async with self._transport() as streams, ClientSession(streams[0], streams[1]) as session:
            with anyio.fail_after(CONNECT_S):
                await session.initialize()
            task_status.started(session)
            await stop.wait()

    def _transport(self):
        d = self.descriptor
        headers = {key: resolve_env(value) for key, value in d.headers.items()}
        if d.url:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            return _HttpTransport(create_mcp_http_client(headers=headers or None), streamable_http_client, d.url)
        from mcp import StdioServerParameters
        from mcp.client.stdio import stdio_client

        env = {**os.environ, **{key: resolve_env(value) for key, value in d.env.items()}}
        return stdio_client(StdioServerParameters(command=d.command[0], args=list(d.command[1:]), env=env))

    def close(self) -> None:
        with self._lock:
            portal, cm, stop, holder = self._portal, self._portal_cm, self._stop, self._holder
            self._portal_cm = self._portal = self._session = self._stop = self._holder = None
        if portal is None:
            return
        try:
            portal.call(stop.set)
            holder.result(timeout=10)
        except Exception:  # a session that broke has nothing left to close
            pass
        finally:
            cm.__exit__(None, None, None)


class _HttpTransport:
    """The streamable HTTP transport with its own HTTP client, entered and left as one."""

    def __init__(self, client, transport, url: str):
        self.client, self.transport_of, self.url = client, transport, url

    async def __aenter__(self):
        http = await self.client.__aenter__()
        self.transport = self.transport_of(self.url, http_client=http)
        streams = await self.transport.__aenter__()
        return streams[0], streams[1]

    async def __aexit__(self, *exc):
        try:
            await self.transport.__aexit__(*exc)
        finally:
            await self.client.__aexit__(*exc)


def _reason(exc: BaseException) -> str:
    """An exception (an exception group's first leaf) in words."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
