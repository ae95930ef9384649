"""A small outside search engine for the tests: BM25 (rank-bm25's Okapi, k1 1.5, b 0.75, over
lowercased words) of a few documents, served as a JSON search API on 127.0.0.1 by http.server in a
thread — a real server on a real port, as a team's engine would be.

    GET  /search?q=TEXT&size=N   {"took": 1, "hits": {"total": n, "hits": [{"_id", "_score",
                                  "_source": {"title", "text"}}, …]}}   (Elasticsearch's shape)
    POST /search  {"query": TEXT, "size": N}                            the same answer
    GET  /broken?q=…             HTTP 500 with a message
    GET  /garbled?q=…            200 with a body that is not JSON
    GET  /slow?q=…               answers after `slow_s` seconds
    GET  /big?q=…                200 with a JSON body of 2 MB
    GET  /moved?q=…              302 to /search
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from rank_bm25 import BM25Okapi


def words(text: str) -> list[str]:
    return re.findall(r"\w+", text.lower())


class Engine:
    """BM25 over `documents` (id → (title, text)); `calls` counts the searches answered."""

    def __init__(self, documents: dict[str, tuple[str, str]], slow_s: float = 2.0):
        self.ids = list(documents)
        self.documents = documents
        self.bm25 = BM25Okapi([words(f"{t} {x}") for t, x in documents.values()])
        self.slow_s = slow_s
        self.calls = 0
        self.requests: list[dict] = []
        self.server: ThreadingHTTPServer | None = None

    def search(self, query: str, size: int) -> list[tuple[str, float]]:
        """Positive-scored documents, best first (ties by id), at most `size`."""
        scores = self.bm25.get_scores(words(query))
        ranked = sorted(((-s, i) for i, s in zip(self.ids, scores, strict=True) if s > 0))
        return [(i, -s) for s, i in ranked[:size]]

    def answer(self, query: str, size: int) -> dict:
        self.calls += 1
        hits = [{"_id": i, "_score": s, "_source": {"title": self.documents[i][0], "text": self.documents[i][1]}}
                for i, s in self.search(query, size)]
        return {"took": 1, "hits": {"total": len(hits), "hits": hits}}

    def start(self) -> str:
        engine = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _send(self, code: int, body: bytes, content_type: str = "application/json", headers=()):
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                for key, value in headers:
                    self.send_header(key, value)
                self.end_headers()
                # The client may stop reading (/big: past its size limit), as the test wants.
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(body)

            def do_GET(self):
                parts = urlsplit(self.path)
                args = {k: v[0] for k, v in parse_qs(parts.query).items()}
                engine.requests.append({"path": parts.path, "args": args, "auth": self.headers.get("Authorization")})
                if parts.path == "/search":
                    body = engine.answer(args.get("q", ""), int(args.get("size", "10")))
                    return self._send(200, json.dumps(body).encode())
                if parts.path == "/broken":
                    return self._send(500, b'{"error": "index unavailable"}')
                if parts.path == "/garbled":
                    return self._send(200, b"<html>not json</html>", "text/html")
                if parts.path == "/slow":
                    time.sleep(engine.slow_s)
                    return self._send(200, json.dumps(engine.answer(args.get("q", ""), 10)).encode())
                if parts.path == "/big":
                    return self._send(200, json.dumps({"hits": [], "pad": "x" * 2_000_000}).encode())
                if parts.path == "/moved":
                    return self._send(302, b"", headers=[("Location", "/search?" + parts.query)])
                return self._send(404, b'{"error": "no such path"}')

            def do_POST(self):
                length = int(self.headers.get("Content-Length", "0"))
                request = json.loads(self.rfile.read(length) or b"{}")
                engine.requests.append({"path": self.path, "json": request})
                body = engine.answer(request.get("query", ""), int(request.get("size", 10)))
                return self._send(200, json.dumps(body).encode())

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()
            self.server = None


def descriptor(base: str, name: str = "engine", path: str = "/search", **extra) -> dict:
    """The descriptor of the engine at `base` (GET `path`), Elasticsearch-style paths."""
    return {"name": name, "kind": "http", "url": base + path, "params": {"q": "{query}", "size": "{depth}"},
            "hits": "hits.hits", "id": "_id", "score": "_score", "title": "_source.title", "text": "_source.text",
            **extra}
