"""The LLM judge's client against hostile servers: the key and the prompts never follow a redirect,
an answer of the wrong shape is an error (never a grade), a reply's body is never echoed, the base
URL cannot point at a link-local or metadata address nor hide a path behind `#` or `?`.

Real HTTP servers on 127.0.0.1, started here (`http.server` in a thread): a redirecting server and a
second one, on another port (another origin), that records every request it gets.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from retrieval.judging.llm import endpoint
from retrieval.judging.llm.client import LLMClient, server_models
from retrieval.judging.llm.run import JudgeItem, judge
from retrieval.judging.llm.settings import LLMSettings
from retrieval.types import RetrievalError

KEY = "sk-test-do-not-forward"
KEY_ENV = "LLM_CLIENT_TEST_API_KEY"
SECRET = "AKIA-FAKE-METADATA-CREDENTIAL"
COMPLETION = {"object": "chat.completion",
              "choices": [{"index": 0, "message": {"role": "assistant", "content": "##final score: 3"}}]}


class Server:
    """A server on 127.0.0.1 whose answer to each request is `answer(method, path)` → (status,
    headers, body bytes); it records (method, path, Authorization header, body) of each."""

    def __init__(self, answer):
        self.answer, self.seen = answer, []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args) -> None:
                pass

            def _any(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner.seen.append((self.command, self.path, self.headers.get("Authorization"), body))
                status, headers, data = owner.answer(self.command, self.path)
                self.send_response(status)
                for name, value in {"Content-Length": str(len(data)), **headers}.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_HEAD = _any

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextlib.contextmanager
def serving(answer) -> Iterator[Server]:
    server = Server(answer)
    try:
        yield server
    finally:
        server.close()


def grades_anything(method: str, path: str):
    """The other origin: a models list and a chat completion with a grade, to any method."""
    body = {"object": "list", "data": [{"id": "m"}]} if path.endswith("/models") else COMPLETION
    return 200, {"Content-Type": "application/json"}, json.dumps(body).encode()


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    return KEY


# ---- item 1: redirects -----------------------------------------------------------------------
@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
@pytest.mark.parametrize("request_kind", ["models", "chat"])
def test_no_redirect_is_followed_so_the_key_and_the_prompt_stay_with_the_server(key, tmp_path, status,
                                                                                request_kind):
    with serving(grades_anything) as other, \
            serving(lambda method, path: (status, {"Location": other.url + path}, b"")) as redirector:
        settings = LLMSettings(base_url=redirector.url + "/v1", model="m", api_key_env=KEY_ENV, retries=0)
        saved: dict = {}
        with pytest.raises(RetrievalError, match=rf"answered {status}, a redirect to {other.url}: the judge "
                                                 r"never follows one"):
            if request_kind == "models":
                server_models(settings)
            else:
                judge([JudgeItem("q", "d", "cats", "cats hunt")], settings, saved.update, cache=tmp_path / "c.sqlite")
        # The redirecting server got the key (it is the configured server); the other origin got
        # nothing at all: no key, no prompt, no GET turned into a grade.
        assert [s[2] for s in redirector.seen] == [f"Bearer {KEY}"]
        assert other.seen == [] and saved == {}


def test_an_answer_of_the_wrong_shape_is_an_error_never_a_grade(tmp_path):
    shapes = [{"choices": [{"message": {"content": 3}}]},  # a number, not text: "3" would be a grade
              {"choices": [{"message": {"content": ["##final score: 2"]}}]},
              {"choices": []}, {"choices": [{"text": "##final score: 2"}]}, ["##final score: 2"]]
    for shape in shapes:
        with serving(lambda method, path, shape=shape: (200, {"Content-Type": "application/json"},
                                                        json.dumps(shape).encode())) as server:
            saved: dict = {}
            settings = LLMSettings(base_url=server.url + "/v1", model="m", retries=0)
            with pytest.raises(RetrievalError, match="did not answer in the chat-completions format"):
                judge([JudgeItem("q", "d", "cats", "cats hunt")], settings, saved.update, cache=tmp_path / "c.sqlite")
            assert saved == {} and [s[0] for s in server.seen] == ["POST"]
    # Token counts that are not numbers are replaced by ours, never a traceback.
    odd = {**COMPLETION, "usage": {"prompt_tokens": "many", "completion_tokens": 2.5}}
    with serving(lambda method, path: (200, {}, json.dumps(odd).encode())) as server:
        with LLMClient(LLMSettings(base_url=server.url + "/v1", model="m")) as client:
            answer = client.ask("cats")
        assert answer.grade == 3 and answer.output_tokens == 4 and answer.input_tokens > 0
    with serving(lambda method, path: (200, {}, b'{"data": "not a list"}')) as server, \
            pytest.raises(RetrievalError, match="did not answer in the models-list format"):
        server_models(LLMSettings(base_url=server.url + "/v1", model="m"))


# ---- item 7: the base URL and the bodies ------------------------------------------------------
@pytest.mark.parametrize("status", [200, 400, 500])
def test_a_reply_body_is_never_echoed(tmp_path, status):
    body = f"<html>{SECRET} {{\"Code\": \"Success\", \"SecretAccessKey\": \"{SECRET}\"}}</html>".encode()
    with serving(lambda method, path: (status, {"Content-Type": "text/html"}, body)) as server:
        settings = LLMSettings(base_url=server.url + "/v1", model="m", retries=0)
        errors = []
        for call in (lambda: server_models(settings),
                     lambda: judge([JudgeItem("q", "d", "c", "c")], settings, errors.append, cache=tmp_path / "c")):
            try:
                run = call()
                errors.append(str(getattr(run, "failed", run)))
            except RetrievalError as exc:
                errors.append(str(exc))
        assert len(errors) == 2 and not any(SECRET in e for e in errors), errors
    # An error in OpenAI's format is the server's message for the user: that (only) is shown, cut short.
    error = json.dumps({"error": {"message": "model is loading " + "x" * 500}}).encode()
    with serving(lambda method, path: (400, {"Content-Type": "application/json"}, error)) as server:
        run = judge([JudgeItem("q", "d", "c", "c")], LLMSettings(base_url=server.url + "/v1", model="m", retries=0),
                    {}.update, cache=tmp_path / "c2")
        assert run.failed == {("q", "d"): "HTTP 400 (model is loading " + "x" * 183 + ")"}


@pytest.mark.parametrize("tail", ["#", "?x=", "/#/../../latest/meta-data", "?#"])
def test_a_fragment_or_query_in_the_base_url_is_refused_before_any_request(tail):
    with serving(grades_anything) as server:
        settings = LLMSettings(base_url=f"{server.url}/latest/meta-data{tail}", model="m")
        with pytest.raises(RetrievalError, match=r"must not contain '\?' or '#'"):
            server_models(settings)
        assert server.seen == []


def test_request_urls_are_built_from_the_parsed_base():
    assert endpoint.request_url("http://127.0.0.1:8000/v1/", "/models") == "http://127.0.0.1:8000/v1/models"
    assert endpoint.request_url(" https://Example.com/api/v1 ", "/chat/completions") == \
        "https://Example.com/api/v1/chat/completions"
    assert LLMSettings(base_url="http://h:1/v1//", model="m").endpoint == "http://h:1/v1/chat/completions"
    for bad in ("http://user:pass@h/v1", "http://h/v1 /x", "http://h/v\n1"):
        with pytest.raises(RetrievalError, match="LLM base URL"):
            LLMSettings(base_url=bad, model="m").validate()


LINK_LOCAL_OR_METADATA = [
    "http://169.254.169.254/latest", "http://169.254.170.2/v2", "http://169.254.1.1:8000/v1",
    "http://[fe80::1]/v1", "http://[fe80::1%25eth0]:80/v1", "http://[fd00:ec2::254]/latest",
    "http://[::ffff:169.254.169.254]/", "http://[::ffff:a9fe:a9fe]/", "http://100.100.100.200/latest",
    "http://168.63.129.16/machine", "http://metadata.google.internal/computeMetadata/v1",
    "http://METADATA.Google.Internal./v1", "http://metadata/computeMetadata", "http://metadata.goog/",
    "http://instance-data/latest", "http://2852039166/latest", "http://0xa9.0xfe.0xa9.0xfe/latest",
    "http://0251.0376.0251.0376/", "http://169.254.43518/",
]


@pytest.mark.parametrize("url", LINK_LOCAL_OR_METADATA)
def test_link_local_and_metadata_addresses_are_refused_unless_allowed(url):
    with pytest.raises(RetrievalError, match=r"link-local or cloud metadata address.*allow_link_local"):
        LLMSettings(base_url=url, model="m").validate()
    allowed = LLMSettings(base_url=url, model="m", allow_link_local=True)
    assert allowed.validate() is allowed


def test_ordinary_addresses_are_accepted():
    for url in ("http://127.0.0.1:11434/v1", "http://localhost:8000/v1", "https://api.openai.com/v1",
                "http://10.0.0.5:8000/v1", "http://[::1]:8000/v1", "http://192.168.1.20/v1",
                "http://metadata-server.example.com/v1", "http://169.255.0.1/v1"):
        assert LLMSettings(base_url=url, model="m").validate(check_key=False).base_url == url


def test_a_name_resolving_to_a_link_local_address_is_refused_before_the_key_is_sent(monkeypatch):
    # Name resolution is this machine's (no HTTP involved): a name that resolves to the metadata address.
    real = socket.getaddrinfo

    def resolve(host, *args, **kwargs):
        if host == "llm.internal.test":
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("169.254.169.254", 80))]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", resolve)
    settings = LLMSettings(base_url="http://llm.internal.test/v1", model="m")
    assert settings.validate() is settings  # the name itself is not a metadata name
    with pytest.raises(RetrievalError, match=r"llm.internal.test resolves to 169\.254\.169\.254, a link-local"):
        LLMClient(settings)
    LLMClient(LLMSettings(base_url="http://llm.internal.test/v1", model="m", allow_link_local=True)).close()
