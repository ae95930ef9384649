"""A real HTTP server on 127.0.0.1 that speaks OpenAI's chat completions, for the LLM judge's tests.

POST /v1/chat/completions with {model, messages, temperature} answers a chat.completion whose
content ends in "##final score: N". N is a function of the request (`stub_grade`): the number
of distinct words of the prompt's `Query:` line found in its `Passage:` text, capped at 3; a
passage with the word "unjudgeable" gets an answer without a score. GET /v1/models lists the
model; GET /stats gives the counters as JSON.

Knobs (`StubLLM(...)` or the command line): a delay per answer; the first N chat requests
answered with a status (500, or 429 with Retry-After: 0); 401 unless the expected key comes as
"Authorization: Bearer KEY"; `gather`: a request waits (up to `gather_timeout` s) until that
many are in flight, so the most the client ever has in flight is seen, not guessed from timing;
`hang_after`: requests after the first N are held until GET /release (or the server stops), then
answered. GET /stats also lists the sha256 of every chat request's prompt, in arrival order.

    python tests/openai_stub.py [--port P] [--delay S] [--hang-after N] [--key K]
    (prints the port once listening)
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import re
import sys
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODEL = "stub-model"
_WORD_RE = re.compile(r"\w+")


def stub_grade(query: str, passage: str) -> int | None:
    """The grade the stub gives: distinct query words in the passage, at most 3 (None:
    "unjudgeable" in the passage)."""
    passage_words = set(_WORD_RE.findall(passage.lower()))
    if "unjudgeable" in passage_words:
        return None
    return min(3, len(set(_WORD_RE.findall(query.lower())) & passage_words))


def prompt_digest(prompt: str) -> str:
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()


def grade_of_prompt(prompt: str) -> int | None:
    """`stub_grade` of the `Query:` line and the `Passage:` text (up to a blank line) of a prompt."""
    query = re.search(r"^Query: (.*)$", prompt, re.M)
    passage = re.search(r"^Passage: (.*?)(?:\n\n|\Z)", prompt, re.M | re.S)
    return stub_grade(query.group(1) if query else "", passage.group(1) if passage else "")


class StubLLM:
    """The server, in a thread of this process (`start`/`stop`, or `with StubLLM() as stub`)."""

    def __init__(self, *, delay: float = 0.0, fail_first: int = 0, fail_status: int = 500,
                 expected_key: str | None = None, gather: int = 0, gather_timeout: float = 2.0,
                 hang_after: int | None = None, grader: Callable[[str], int | None] = grade_of_prompt,
                 port: int = 0):
        self.delay, self.fail_first, self.fail_status = delay, fail_first, fail_status
        self.expected_key, self.gather, self.gather_timeout = expected_key, gather, gather_timeout
        self.hang_after, self.grader = hang_after, grader
        self.requests = 0  # chat requests received, whatever the answer
        self.answered = 0  # chat requests answered with a completion
        self.in_flight = 0
        self.max_in_flight = 0
        self.prompts: list[str] = []  # the prompts answered
        self.asked: list[str] = []  # sha256 of each request's prompt, as they arrived
        self.condition = threading.Condition()
        self.stopping = threading.Event()
        self.released = threading.Event()
        self.server = ThreadingHTTPServer(("127.0.0.1", port), _handler(self))
        self.server.daemon_threads = True
        self.thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stats(self) -> dict:
        with self.condition:
            return {"requests": self.requests, "answered": self.answered, "max_in_flight": self.max_in_flight,
                    "asked": list(self.asked)}

    def start(self) -> StubLLM:
        self.thread = threading.Thread(target=self.server.serve_forever, name="openai-stub", daemon=True)
        self.thread.start()
        return self

    def release(self) -> None:
        """Answer the held requests (`hang_after`) and hold no more."""
        self.released.set()

    def stop(self) -> None:
        self.stopping.set()
        self.released.set()
        with self.condition:
            self.condition.notify_all()
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> StubLLM:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ---- one chat request --------------------------------------------------------------------
    def chat(self, headers, body: bytes) -> tuple[int, dict, dict]:
        """(status, extra headers, JSON body) of the answer to one chat request."""
        try:
            request = json.loads(body)
            prompt = next(m["content"] for m in reversed(request["messages"]) if m["role"] == "user")
        except (ValueError, KeyError, StopIteration, TypeError):
            return 400, {}, _error("not a chat completions request", "invalid_request_error")
        with self.condition:
            self.requests += 1
            self.asked.append(prompt_digest(prompt))
            number = self.requests
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            self.condition.notify_all()
        try:
            if self.expected_key is not None and headers.get("Authorization") != f"Bearer {self.expected_key}":
                return 401, {}, _error("Incorrect API key provided", "invalid_api_key")
            if number <= self.fail_first:
                extra = {"Retry-After": "0"} if self.fail_status == 429 else {}
                return self.fail_status, extra, _error(f"stub failure {number}", "server_error")
            if self.hang_after is not None and number > self.hang_after:
                self.released.wait()
            self._gather()
            time.sleep(self.delay)
            grade = self.grader(prompt)
            with self.condition:
                self.prompts.append(prompt)
                self.answered += 1
            content = "I cannot judge this passage." if grade is None else f"M: {grade}, T: 1\n##final score: {grade}"
            return 200, {}, {
                "id": f"chatcmpl-stub-{number}", "object": "chat.completion", "created": int(time.time()),
                "model": request.get("model", MODEL),
                "choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                             "finish_reason": "stop"}],
                "usage": {"prompt_tokens": len(prompt) // 4, "completion_tokens": len(content) // 4,
                          "total_tokens": len(prompt) // 4 + len(content) // 4}}
        finally:
            with self.condition:
                self.in_flight -= 1

    def _gather(self) -> None:
        if self.gather > 1:
            with self.condition:
                self.condition.wait_for(lambda: self.in_flight >= self.gather or self.stopping.is_set(),
                                        timeout=self.gather_timeout)


def _error(message: str, code: str) -> dict:
    return {"error": {"message": message, "type": code, "code": code}}


def _handler(stub: StubLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet
            pass

        def _send(self, status: int, body: dict, headers: dict | None = None) -> None:
            data = json.dumps(body).encode()
            # The client may have given up (a timeout, a stopped or killed run).
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        def do_GET(self) -> None:
            if self.path == "/v1/models":
                self._send(200, {"object": "list", "data": [{"id": MODEL, "object": "model"}]})
            elif self.path == "/stats":
                self._send(200, stub.stats())
            elif self.path == "/release":
                stub.release()
                self._send(200, {"released": True})
            else:
                self._send(404, _error(f"no route {self.path}", "not_found"))

        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.path != "/v1/chat/completions":
                self._send(404, _error(f"no route {self.path}", "not_found"))
                return
            status, headers, answer = stub.chat(self.headers, body)
            self._send(status, answer, headers)

    return Handler


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="An OpenAI chat-completions stub on 127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before each answer")
    parser.add_argument("--hang-after", type=int, help="hold every chat request after the first N")
    parser.add_argument("--key", help="answer 401 unless this key is sent")
    args = parser.parse_args(argv)
    stub = StubLLM(delay=args.delay, hang_after=args.hang_after, expected_key=args.key, port=args.port)
    print(stub.port, flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        stub.server.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
