"""The LLM judge's HTTP client: one OpenAI-compatible server's chat completions and model list.

One `httpx2.Client` per run (`LLMClient`), its connections shared by the run's threads. Every
request is bounded by the settings' timeout (to connect, and each read and write). A server on a
loopback address (127.0.0.0/8, ::1, localhost) is reached directly, never through a proxy of the
environment (`trust_env=False`); any other server as any client reaches it, through the
environment's proxies. The request URLs are built from the parsed base URL (`endpoint.py`), and
a host name resolving to a link-local or metadata address is refused before any request.

No redirect is followed: the key (in the `Authorization` header) and the prompts (the documents)
go to the configured server only, and a POST turned into a GET is never taken for an answer. A
3xx is an error naming where it pointed (its origin only), to be set as the base URL. An answer
must have the shape asked for (a chat completion whose content is text, a models list), else it
is an error, never a grade. A reply's body is never shown: an error message carries only the
`error.message` of an error in OpenAI's format, cut at 200 characters.

What a failed request means: a 401/403 (the key), a 404 (the URL or the model) or an unknown host
is a `RetrievalError` no retry mends; a refused connection cannot reach the server (fatal at a
run's first request, else retried); a timeout, a lost connection, HTTP 408, 429 and 5xx are worth
asking again; any other status fails that pair only (e.g. 400: too long for the model). Each
message ends with the server's own error message, when it sent one in OpenAI's format.

The retry policy is ours, in one place (`ask_with_retries`): `retries` attempts after the first,
waiting the server's Retry-After (in seconds), else `BACKOFF_S` doubling each time, never more
than `MAX_BACKOFF_S` (`backoff`); a `stop` event cuts a wait short. The HTTP layer retries nothing
itself, so a refused connection at a run's first request fails at once.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

import httpx2

from retrieval.addresses import is_loopback
from retrieval.judging.llm.endpoint import check_resolved, parse_base, request_url
from retrieval.judging.llm.settings import SYSTEM_MESSAGE, LLMSettings, parse_grade
from retrieval.types import RetrievalError

BACKOFF_S = 0.5  # the first retry's wait; doubling after
MAX_BACKOFF_S = 30.0
CHARS_PER_TOKEN = 4  # tokens ≈ characters / 4: a rule of thumb for English with OpenAI's tokenizers

STOPPED = object()  # a request given up because the run was stopped


@dataclass(frozen=True)
class Answer:
    """One answer of the LLM: its text, the grade in it (None: none found), tokens (the
    server's count, else characters / 4) and how long the request took."""

    text: str
    grade: int | None
    input_tokens: int
    output_tokens: int
    seconds: float


class _Retry(Exception):
    """Worth asking again: a timeout, a dropped connection, 429 or 5xx."""

    def __init__(self, reason: str, after: float | None = None):
        super().__init__(reason)
        self.reason, self.after = reason, after


class _Unreachable(_Retry):
    """The connection was refused: fatal at a run's first request, retried later."""


class _PairFailed(Exception):
    """This pair's request was refused (e.g. 400: too long for the model); others may work."""


def backoff(attempt: int, retry_after: float | None = None) -> float:
    """Seconds to wait after attempt `attempt` (0: the first) failed: the server's Retry-After,
    else `BACKOFF_S` doubled per attempt; never more than `MAX_BACKOFF_S`."""
    return min(MAX_BACKOFF_S, BACKOFF_S * 2 ** attempt if retry_after is None else retry_after)


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None  # an HTTP date: use our own backoff


def _server_message(response: httpx2.Response) -> str:
    """The server's error message, short ('' when it gave none): only the `error.message` (or a
    string `error`) of a JSON error in OpenAI's format, never the body itself (a server that is
    not an LLM's may answer with anything, credentials included)."""
    try:
        error = json.loads(response.content[:4000]).get("error")
    except (ValueError, AttributeError, UnicodeDecodeError):
        return ""
    message = error.get("message") if isinstance(error, dict) else error
    if not isinstance(message, str):
        return ""
    message = "".join(c for c in " ".join(message.split()) if c.isprintable())[:200]
    return f" ({message})" if message else ""


def _redirect_target(response: httpx2.Response) -> str:
    """The origin a redirect points at (scheme, host, port: never its path or query), or ''."""
    try:
        target = urlsplit(str(response.url.join(response.headers.get("Location", ""))))
        origin = f"{target.scheme}://{target.hostname}" + (f":{target.port}" if target.port else "")
    except ValueError:
        return ""
    return f" to {origin}" if target.scheme in ("http", "https") and target.hostname else ""


def _count(value: object) -> int:
    """A server's token count, 0 when it is not a whole number (then ours is used)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _cause(exc: BaseException) -> BaseException:
    """The error under httpx's (and httpcore's): the socket's."""
    for _ in range(10):  # a chain of a few links; never a loop
        under = exc.__cause__ or exc.__context__
        if under is None:
            break
        exc = under
    return exc


class LLMClient:
    """The server of `settings`, asked with `key` ('' for none); close it (or use `with`)."""

    def __init__(self, settings: LLMSettings, key: str = ""):
        self.settings = settings
        self.base = settings.base_url.strip().rstrip("/")
        # Before any request: a name that resolves to a link-local or metadata address.
        check_resolved(settings.base_url, settings.allow_link_local)
        headers = {"Accept": "application/json"}
        if key:
            headers["Authorization"] = f"Bearer {key}"
        # A local server is reached directly, never through an http_proxy of the environment.
        local = is_loopback(parse_base(self.base).hostname or "")
        try:
            self._http = httpx2.Client(headers=headers, timeout=settings.timeout_s, trust_env=not local,
                                       follow_redirects=False)
        except ImportError as exc:  # a SOCKS proxy in the environment needs a package not installed
            raise RetrievalError(f"Cannot reach the LLM at {self.base} through the environment's proxy "
                                 f"({exc}); unset ALL_PROXY / HTTPS_PROXY or use an HTTP proxy") from None

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> LLMClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _request(self, path: str, body: dict | None = None) -> bytes:
        """One request to the server (GET, or POST of `body` as JSON): its body, or an exception
        saying what to do about it."""
        settings, base = self.settings, self.base
        url = request_url(base, path)
        try:
            response = self._http.get(url) if body is None else self._http.post(url, json=body)
        except httpx2.TimeoutException:
            raise _Retry(f"no answer within {settings.timeout_s:g} s") from None
        except httpx2.ConnectError as exc:
            reason = _cause(exc)
            if isinstance(reason, ConnectionRefusedError):
                raise _Unreachable("connection refused") from None
            if isinstance(reason, socket.gaierror):
                raise RetrievalError(f"Cannot reach the LLM at {base}: unknown host {urlsplit(base).hostname!r}"
                                     ) from None
            if isinstance(reason, ConnectionError):
                raise _Retry(f"connection lost ({reason})") from None
            raise _Unreachable(str(exc) or type(reason).__name__) from None
        except (httpx2.NetworkError, httpx2.ProtocolError) as exc:
            raise _Retry(f"connection lost ({type(exc).__name__})") from None
        except httpx2.RequestError as exc:  # a proxy's refusal, too many redirects
            raise _Unreachable(str(exc) or type(exc).__name__) from None
        if response.is_success:
            return response.content
        code, detail = response.status_code, _server_message(response)
        if response.is_redirect or 300 <= code < 400:
            raise RetrievalError(f"The LLM server at {base} answered {code}, a redirect{_redirect_target(response)}: "
                                 f"the judge never follows one (the key and the documents go to the configured "
                                 f"server only); set the base URL to the server's own address")
        if code in (401, 403):
            fix = (f"check the key in ${settings.api_key_env.strip()}" if settings.api_key_env.strip() else
                   "it wants a key: name the environment variable that holds it")
            raise RetrievalError(f"The LLM server at {base} answered {code}: {fix}{detail}")
        if code == 404:
            raise RetrievalError(f"The LLM server at {base} answered 404 for {path}: check the base URL (the part "
                                 f"before /chat/completions, often ending in /v1) and the model name "
                                 f"{settings.model.strip()!r}{detail}")
        if code in (408, 429) or code >= 500:
            raise _Retry(f"HTTP {code}{detail}", _retry_after(response.headers.get("Retry-After")))
        raise _PairFailed(f"HTTP {code}{detail}")

    def ask(self, prompt: str) -> Answer:
        """Ask the chat-completions endpoint once (no retry) and read the grade in the answer."""
        settings = self.settings
        body = {"model": settings.model.strip(), "temperature": settings.temperature,
                "messages": [{"role": "system", "content": SYSTEM_MESSAGE}, {"role": "user", "content": prompt}]}
        started = time.monotonic()
        raw = self._request("/chat/completions", body)
        seconds = time.monotonic() - started
        try:
            data = json.loads(raw)
            content = data["choices"][0]["message"].get("content") or ""
            usage = data.get("usage") or {}
            if isinstance(content, list):  # content parts, as some servers send them
                content = "".join(part["text"] for part in content if part.get("type", "text") == "text")
            if not isinstance(content, str) or not isinstance(usage, dict):
                raise TypeError("not text")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError):
            # Never its body: the server may be no LLM's (see _server_message).
            raise RetrievalError(f"The LLM server at {settings.base_url.strip()} did not answer in the "
                                 f"chat-completions format (a JSON object with choices[0].message.content, "
                                 f"text)") from None
        text = content
        input_tokens = _count(usage.get("prompt_tokens")) or (len(SYSTEM_MESSAGE) + len(prompt)) // CHARS_PER_TOKEN
        output_tokens = _count(usage.get("completion_tokens")) or max(1, len(text) // CHARS_PER_TOKEN)
        return Answer(text, parse_grade(text), input_tokens, output_tokens, seconds)

    def ask_with_retries(self, prompt: str, stop: threading.Event | None, first: bool) -> Answer | str | object:
        """The answer, a failure's reason (this pair's), or `STOPPED`. Raises `RetrievalError`
        for what no retry can mend, and when the server cannot be reached at a run's `first`
        request or after the last attempt."""
        attempts = self.settings.retries + 1
        for attempt in range(attempts):
            try:
                return self.ask(prompt)
            except _Retry as exc:
                last = attempt == attempts - 1
                if isinstance(exc, _Unreachable) and (first or last):
                    raise RetrievalError(f"Cannot reach the LLM at {self.settings.base_url.strip()}: "
                                         f"{exc.reason}") from None
                if last:
                    return f"{exc.reason} (asked {attempts} times)"
                delay = backoff(attempt, exc.after)
            except _PairFailed as exc:
                return str(exc)
            if stop is not None and stop.wait(delay):
                return STOPPED
            if stop is None:
                time.sleep(delay)
        return STOPPED  # not reached: the loop returns or raises

    def models(self) -> list[str]:
        """The models the server lists (GET {base_url}/models); the same clear errors as a run's
        first request."""
        try:
            raw = self._request("/models")
        except _Retry as exc:
            raise RetrievalError(f"Cannot reach the LLM at {self.settings.base_url.strip()}: {exc.reason}") from None
        except _PairFailed as exc:
            raise RetrievalError(f"The LLM server at {self.settings.base_url.strip()} answered {exc}") from None
        try:
            listed = json.loads(raw).get("data", [])
            if not isinstance(listed, list):
                raise TypeError("not a list")
            return [str(m["id"]) for m in listed]
        except (ValueError, KeyError, TypeError, AttributeError):
            raise RetrievalError(f"The LLM server at {self.settings.base_url.strip()} did not answer in the "
                                 f"models-list format (a JSON object whose data lists models with an id)") from None


def server_models(settings: LLMSettings) -> list[str]:
    """The models the server lists (GET {base_url}/models), to check the settings before a run;
    the same clear errors as a run's first request."""
    settings.validate()
    with LLMClient(settings, settings.api_key()) as client:
        return client.models()
