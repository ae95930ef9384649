"""An LLM as a rater of its own: graded judgments (0–3) from any OpenAI-compatible endpoint.

Off until configured (`LLMSettings`): a base URL (a local server such as Ollama's
`http://127.0.0.1:11434/v1`, vLLM's or llama.cpp's, or a hosted one; requests go to
`{base_url}/chat/completions`), a model, and the NAME of the environment variable that holds the
key ('' for none). The key itself is read from the environment at request time and is never
written anywhere. The settings live in the store's `_llm_judge` table (`save_settings`), one row
of JSON; a name without '__' never clashes with a collection or its `_<kind>__<collection>` tables.

The prompt is an editable template with `{query}`, `{passage}` and optionally `{need}` (the
query's information need); `{{` and `}}` write literal braces. It is filled in one pass, so text
in a query or a document is never read as a placeholder. The default is UMBRELA's zero-shot
prompt (`UMBRELA_PROMPT`: Upadhyay, Pradeep, Thakur, Craswell & Lin 2024, "UMBRELA: UMbrela is
the (Open-Source Reproduction of the) Bing RELevance Assessor", arXiv:2406.06519; the text of
castorini/umbrela's `prompts/qrel_zeroshot_bing.txt`, sent after its system message, as there).
The grade is the last `final score: N` of the answer, else its last number, if it is 0–3
(`parse_grade`). An answer without one is a failure of that pair: nothing is saved for it and it
is not cached, so the next run asks again (a "can't tell" would stop it ever being asked again).

Every answer is cached (`JudgeCache`, SQLite in `$WORKBENCH_CACHE/judge_cache.sqlite`) under the
sha256 of what was asked: base URL, model, temperature, system message and the filled-in prompt
(so the template, the query, the need where the template uses it, and the document's title and
text). The base URL is part of it because one model name on two servers can be two models (two
quantisations, a fine-tune under the same tag). Each answer is committed when it arrives, before
it is saved as a judgment: a run that is killed keeps every answer it got, and the next run saves
them without asking.

A run (`judge`) asks the first uncached pair alone — a refused connection, a 401/403 (the key) or
a 404 (the URL or the model) then fails at once with a clear `RetrievalError` — and then keeps at
most `concurrency` requests in flight. Connection errors, timeouts, HTTP 429 and 5xx are retried
`retries` times with exponential backoff (or the server's Retry-After); when `FAILURES_IN_A_ROW`
pairs fail one after the other even so, the run ends with a `RetrievalError`. Grades are saved from
the calling thread every `SAVE_EVERY` answers or `SAVE_INTERVAL_S` seconds, so each commit is
small and little waits unsaved. A `stop` event ends dispatching; the requests in flight finish
(each bounded by the timeout), what they answered is saved, and the run returns.

`estimate` says what a run would cost before it starts: tokens ≈ characters / 4 (a rule of thumb
for English with OpenAI's tokenizers), seconds from the latency measured in the cache for this
server and model (else `SECONDS_PER_REQUEST`) over the concurrency, cost from the settings' prices.
"""

from __future__ import annotations

import hashlib
import http.client
import ipaddress
import json
import math
import os
import re
import socket
import sqlite3
import threading
import time
import unicodedata
import urllib.error
import urllib.request
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import pyarrow as pa

from retrieval.judging.raters import LLM_PREFIX, MAX_RATER_CHARS, RATER_PUNCTUATION
from retrieval.types import RetrievalError

if TYPE_CHECKING:
    from retrieval.search.workbench import Workbench
    from retrieval.store import Store

# UMBRELA's zero-shot prompt, verbatim (spaces at line ends included).
UMBRELA_PROMPT = (
    "Given a query and a passage, you must provide a score on an integer scale of 0 to 3 with the following "
    "meanings:\n"
    "0 = represent that the passage has nothing to do with the query, \n"
    "1 = represents that the passage seems related to the query but does not answer it, \n"
    "2 = represents that the passage has some answer for the query, but the answer may be a bit unclear, or "
    "hidden amongst extraneous information and \n"
    "3 = represents that the passage is dedicated to the query and contains the exact answer.\n"
    "\n"
    "Important Instruction: Assign category 1 if the passage is somewhat related to the topic but not "
    "completely, category 2 if passage presents something very important related to the entire topic but also "
    "has some extra information and category 3 if the passage only and entirely refers to the topic. If none of "
    "the above satisfies give it category 0.\n"
    "\n"
    "Query: {query}\n"
    "Passage: {passage}\n"
    "\n"
    "Split this problem into steps:\n"
    "Consider the underlying intent of the search.\n"
    "Measure how well the content matches a likely intent of the query (M).\n"
    "Measure how trustworthy the passage is (T).\n"
    "Consider the aspects above and the relative importance of each, and decide on a final score (O). Final "
    "score must be an integer value only.\n"
    "Do not provide any code in result. Provide each score in the format of: ##final score: score without "
    "providing any reasoning."
)
SYSTEM_MESSAGE = "You are a helpful assistant."  # UMBRELA's (gpt_judge.py)
PLACEHOLDERS = ("query", "passage", "need")
REQUIRED_PLACEHOLDERS = ("query", "passage")
_PLACEHOLDER_RE = re.compile(r"\{\{|\}\}|\{([A-Za-z_][A-Za-z0-9_]*)\}")
MAX_PROMPT_CHARS = 20_000
MAX_PASSAGE_CHARS = 8_000  # a document's title and text are cut here: ~2,000 tokens

NOT_CONFIGURED = ("The LLM judge is not configured: set its base URL and model on the Judge page "
                  "(or --base-url/--model)")
MAX_CONCURRENCY = 32
MAX_RETRIES = 10
MAX_TIMEOUT_S = 3600.0
# The key variable's name: the server sends that variable's value to the configured URL, which a
# browser user may set, so only a name made for an API key qualifies (never AWS_SECRET_ACCESS_KEY,
# WORKBENCH_MCP_TOKEN or any other secret the process holds).
_ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*_API_KEY")

SAVE_EVERY = 8  # answers per save at most …
SAVE_INTERVAL_S = 1.0  # … or this long after the oldest unsaved one
CACHED_SAVE_BATCH = 500  # cached answers are saved in bigger commits: they come all at once
TICK_S = 0.2  # how often the run looks at `stop` and the save clock while requests are out
BACKOFF_S = 0.5  # the first retry's wait; doubling after
FAILURES_IN_A_ROW = 8  # pairs failed after their retries, with no answer between: the server is down
MAX_BACKOFF_S = 30.0

CHARS_PER_TOKEN = 4
ANSWER_TOKENS = 8  # "##final score: 2", when the cache has measured nothing for the model
SECONDS_PER_REQUEST = 2.0  # latency assumed when the cache has measured nothing
CACHE_FILE = "judge_cache.sqlite"
_KEY_VERSION = 1  # bump when what a key covers changes

SETTINGS_TABLE = "_llm_judge"
SETTINGS_ROW = "default"
SETTINGS_SCHEMA = pa.schema([
    pa.field("name", pa.string(), nullable=False),
    pa.field("settings", pa.string(), nullable=False),  # LLMSettings.to_dict as JSON
    pa.field("saved", pa.string(), nullable=False),
])

Pair = tuple[str, str]  # (query id, doc id)


# ---- the prompt and the answer ---------------------------------------------------------------
def validate_prompt(template: str) -> str:
    """A template with `{query}` and `{passage}`, optionally `{need}`, and no other placeholder."""
    if not isinstance(template, str) or not template.strip():
        raise RetrievalError("The prompt template is empty")
    if len(template) > MAX_PROMPT_CHARS:
        raise RetrievalError(f"The prompt template is {len(template):,} characters long; the limit is "
                             f"{MAX_PROMPT_CHARS:,}")
    names = {m.group(1) for m in _PLACEHOLDER_RE.finditer(template) if m.group(1)}
    unknown = sorted(names - set(PLACEHOLDERS))
    if unknown:
        shown = ", ".join("{" + n + "}" for n in unknown)
        raise RetrievalError(f"The prompt template has unknown placeholder(s) {shown}: use {{query}}, {{passage}} "
                             "and optionally {need} (write {{ and }} for literal braces)")
    missing = [n for n in REQUIRED_PLACEHOLDERS if n not in names]
    if missing:
        shown = " and ".join("{" + n + "}" for n in missing)
        raise RetrievalError(f"The prompt template must contain {{query}} and {{passage}}; {shown} is missing")
    return template


def render_prompt(template: str, query: str, passage: str, need: str = "") -> str:
    """The template filled in, in one pass: braces in the texts are kept as they are."""
    values = {"query": query, "passage": passage, "need": need}

    def fill(match: re.Match) -> str:
        name = match.group(1)
        return match.group(0)[0] if name is None else values[name]

    return _PLACEHOLDER_RE.sub(fill, template)


_THINK_RE = re.compile(r"<think>.*?(</think>|$)", re.S | re.I)  # reasoning models' thoughts
_FINAL_SCORE_RE = re.compile(r"final[\s_]*score[\s*:=#]*(\d+(?:\.\d+)?)", re.I)
_NUMBER_RE = re.compile(r"\d+(?:\.\d+)?")


def parse_grade(answer: str) -> int | None:
    """The grade in an answer: its last `final score: N`, else its last number, when that is an
    integer 0–3; None otherwise."""
    text = _THINK_RE.sub(" ", answer or "")
    found = _FINAL_SCORE_RE.findall(text) or _NUMBER_RE.findall(text)
    if not found:
        return None
    value = float(found[-1])
    return int(value) if value.is_integer() and 0 <= value <= 3 else None


def rater_name(model: str) -> str:
    """The LLM's rater name: "llm:" + the model name, characters a rater name cannot have
    (`raters.validate_rater`) turned into '-', cut to the rater name's length."""
    def allowed(char: str) -> bool:
        return char in RATER_PUNCTUATION or unicodedata.category(char)[0] in "LMN"

    clean = "".join(c if allowed(c) else "-" for c in model.strip())
    return (LLM_PREFIX + clean)[:MAX_RATER_CHARS].rstrip() or LLM_PREFIX


def passage_of(row: Mapping[str, Any]) -> str:
    """What the LLM reads of a document: its title and text, cut at `MAX_PASSAGE_CHARS`."""
    title = str(row.get("title") or "").strip()
    text = str(row.get("text") or "").strip()
    passage = f"{title}\n{text}" if title and not text.startswith(title) else text or title
    return passage if len(passage) <= MAX_PASSAGE_CHARS else passage[:MAX_PASSAGE_CHARS - 1] + "…"


# ---- settings --------------------------------------------------------------------------------
@dataclass(frozen=True)
class LLMSettings:
    """How to reach the LLM judge and what to ask it (see the module docstring). Never the key:
    `api_key_env` names the environment variable that holds it."""

    base_url: str = ""
    model: str = ""
    api_key_env: str = ""
    prompt: str = UMBRELA_PROMPT
    concurrency: int = 4
    retries: int = 3  # further attempts after the first
    timeout_s: float = 60.0
    price_per_1k_input_tokens: float = 0.0
    price_per_1k_output_tokens: float = 0.0
    temperature: float = 0.0

    @property
    def configured(self) -> bool:
        return bool(self.base_url.strip() and self.model.strip())

    @property
    def rater(self) -> str:
        """The rater its judgments are saved under: "llm:<model>" (`rater_name`)."""
        return rater_name(self.model)

    @property
    def endpoint(self) -> str:
        return self.base_url.strip().rstrip("/") + "/chat/completions"

    def validate(self, check_key: bool = True) -> LLMSettings:
        """Refuse settings that cannot work, with a message that says what to set; `check_key`:
        also that the named key variable is set in this process."""
        if not self.configured:
            raise RetrievalError(NOT_CONFIGURED)
        url = urlsplit(self.base_url.strip())
        if url.scheme not in ("http", "https") or not url.netloc:
            raise RetrievalError(f"The LLM base URL must start with http:// or https://, such as "
                                 f"http://127.0.0.1:11434/v1; got {self.base_url.strip()!r}")
        if len(self.model) > 200 or any(c.isspace() for c in self.model.strip()):
            raise RetrievalError(f"Invalid model name {self.model!r}: the name the server knows, without spaces")
        validate_prompt(self.prompt)
        _check_number(self.concurrency, "concurrency", 1, MAX_CONCURRENCY, whole=True)
        _check_number(self.retries, "retries", 0, MAX_RETRIES, whole=True)
        _check_number(self.timeout_s, "timeout", 1, MAX_TIMEOUT_S)
        _check_number(self.price_per_1k_input_tokens, "price per 1,000 input tokens", 0, math.inf)
        _check_number(self.price_per_1k_output_tokens, "price per 1,000 output tokens", 0, math.inf)
        _check_number(self.temperature, "temperature", 0, 2)
        if self.api_key_env.strip() and not _ENV_NAME_RE.fullmatch(self.api_key_env.strip()):
            # Never echo the value: it may be a key pasted into the wrong field.
            raise RetrievalError("The key's environment variable must be a name of letters, digits and '_' ending in "
                                 "_API_KEY (such as OPENAI_API_KEY): give the name of the variable that holds the key, "
                                 "never the key (only such a variable is ever sent to the LLM server)")
        if check_key:
            self.api_key()
        return self

    def api_key(self) -> str:
        """The key, read from the named environment variable now ('' when none is named)."""
        name = self.api_key_env.strip()
        if not name:
            return ""
        value = os.environ.get(name, "") if _ENV_NAME_RE.fullmatch(name) else ""
        if not value:
            raise RetrievalError(f"The environment variable ${name}, named to hold the LLM's key, is not set (or is "
                                 "empty) in the process running the workbench")
        return value

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe; holds the key variable's name, never a key."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> LLMSettings:
        """Settings from `to_dict`'s output; unknown fields are ignored (a later version's), a
        value of the wrong type is a `RetrievalError`."""
        values: dict[str, Any] = {}
        for f in fields(cls):
            if f.name not in data:
                continue
            value, kind = data[f.name], type(f.default)
            if kind is float and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            if type(value) is not kind:
                raise RetrievalError(f"LLM settings: {f.name} must be {kind.__name__}, got {value!r}")
            values[f.name] = value
        return cls(**values)


def _check_number(value: Any, what: str, low: float, high: float, whole: bool = False) -> None:
    kinds = (int,) if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kinds) or not low <= value <= high:
        span = f"from {low:g} to {high:g}" if high != math.inf else f"of at least {low:g}"
        raise RetrievalError(f"The LLM judge's {what} must be a {'whole ' if whole else ''}number {span}, "
                             f"got {value!r}")


def _store_of(store: Store | Workbench) -> Store:
    return getattr(store, "store", store)


def save_settings(store: Store | Workbench, settings: LLMSettings) -> None:
    """Keep the settings in the store's `_llm_judge` table (one row, one commit). They must be
    complete and valid; the key variable need not be set in this process."""
    settings.validate(check_key=False)
    store = _store_of(store)
    row = {"name": SETTINGS_ROW, "settings": json.dumps(settings.to_dict(), ensure_ascii=False),
           "saved": datetime.now(UTC).isoformat(timespec="seconds")}
    try:
        with store._lock(SETTINGS_TABLE):
            table = store.side_table(SETTINGS_TABLE, SETTINGS_SCHEMA, create=True)
            (table.merge_insert("name").when_matched_update_all().when_not_matched_insert_all()
             .execute(pa.Table.from_pylist([row], schema=SETTINGS_SCHEMA)))
    finally:
        store.note_write()


def load_settings(store: Store | Workbench) -> LLMSettings | None:
    """The saved settings, or None when none were saved."""
    table = _store_of(store).side_table(SETTINGS_TABLE, SETTINGS_SCHEMA)
    if table is None:
        return None
    rows = table.search().where(f"name = '{SETTINGS_ROW}'").limit(1).to_arrow().to_pylist()
    if not rows:
        return None
    try:
        data = json.loads(rows[0]["settings"])
    except ValueError as exc:
        raise RetrievalError(f"The saved LLM settings are not readable JSON: {exc}") from None
    return LLMSettings.from_dict(data)


# ---- what is asked, and the cache of answers -------------------------------------------------
@dataclass(frozen=True)
class JudgeItem:
    """One (query, document) pair to judge, with the texts the prompt is filled with."""

    query_id: str
    doc_id: str
    query: str
    passage: str
    need: str = ""

    @property
    def pair(self) -> Pair:
        return (self.query_id, self.doc_id)

    def prompt(self, settings: LLMSettings) -> str:
        return render_prompt(settings.prompt, self.query, self.passage, self.need)


@dataclass(frozen=True)
class Answer:
    """One answer of the LLM: its text, the grade in it (None: none found), tokens (the
    server's count, else characters / 4) and how long the request took."""

    text: str
    grade: int | None
    input_tokens: int
    output_tokens: int
    seconds: float


def answer_key(settings: LLMSettings, prompt: str) -> str:
    """The cache key of asking `prompt` with these settings (module docstring: what it covers)."""
    asked = [_KEY_VERSION, settings.base_url.strip().rstrip("/"), settings.model.strip(), settings.temperature,
             SYSTEM_MESSAGE, prompt]
    return hashlib.sha256(json.dumps(asked, ensure_ascii=False).encode("utf-8")).hexdigest()


def default_cache_path() -> Path:
    from retrieval.models.embed import cache_dir  # the one place that reads $WORKBENCH_CACHE

    return cache_dir() / CACHE_FILE


class JudgeCache:
    """Answers by `answer_key`, in SQLite (WAL: readers never wait for the writer, and a commit
    survives the process being killed). Safe to share between threads; several processes may
    use one file."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else default_cache_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        # Autocommit (isolation_level None): every `put` is its own commit.
        self._db = sqlite3.connect(self.path, timeout=30, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")  # with WAL: durable against a killed process
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS answers (key TEXT PRIMARY KEY, base_url TEXT NOT NULL, model TEXT NOT NULL, "
            "grade INTEGER NOT NULL, answer TEXT NOT NULL, input_tokens INTEGER NOT NULL, "
            "output_tokens INTEGER NOT NULL, seconds REAL NOT NULL, created TEXT NOT NULL)")

    def get_many(self, keys: Iterable[str]) -> dict[str, Answer]:
        keys = list(dict.fromkeys(keys))
        found: dict[str, Answer] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = keys[start:start + 500]
                marks = ",".join("?" * len(chunk))
                for key, text, grade, tin, tout, seconds in self._db.execute(
                        f"SELECT key, answer, grade, input_tokens, output_tokens, seconds FROM answers "
                        f"WHERE key IN ({marks})", chunk):
                    found[key] = Answer(text, grade, tin, tout, seconds)
        return found

    def put(self, key: str, settings: LLMSettings, answer: Answer) -> None:
        """Keep an answer with a grade (one commit)."""
        if answer.grade is None:
            return  # asked again next time (module docstring)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO answers VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (key, settings.base_url.strip().rstrip("/"), settings.model.strip(), answer.grade, answer.text,
                 answer.input_tokens, answer.output_tokens, answer.seconds,
                 datetime.now(UTC).isoformat(timespec="seconds")))

    def measured(self, settings: LLMSettings) -> tuple[int, float | None, float | None]:
        """(answers, mean seconds per request, mean output tokens) recorded for this server and
        model; the means None when there are none."""
        with self._lock:
            n, seconds, tokens = self._db.execute(
                "SELECT COUNT(*), AVG(seconds), AVG(output_tokens) FROM answers WHERE base_url = ? AND model = ?",
                (settings.base_url.strip().rstrip("/"), settings.model.strip())).fetchone()
        return n, seconds, tokens

    def __len__(self) -> int:
        with self._lock:
            return self._db.execute("SELECT COUNT(*) FROM answers").fetchone()[0]

    def close(self) -> None:
        with self._lock:
            self._db.close()

    def __enter__(self) -> JudgeCache:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _cache_of(cache: JudgeCache | str | Path | None) -> tuple[JudgeCache, bool]:
    """The cache to use, and whether it was opened here (and is closed here)."""
    return (cache, False) if isinstance(cache, JudgeCache) else (JudgeCache(cache), True)


# ---- one request -----------------------------------------------------------------------------
class _Retry(Exception):
    """Worth asking again: a timeout, a dropped connection, 429 or 5xx."""

    def __init__(self, reason: str, after: float | None = None):
        super().__init__(reason)
        self.reason, self.after = reason, after


class _Unreachable(_Retry):
    """The connection was refused: fatal at a run's first request, retried later."""


class _PairFailed(Exception):
    """This pair's request was refused (e.g. 400: too long for the model); others may work."""


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def _open(settings: LLMSettings, request: urllib.request.Request):
    # A local server is reached directly, never through an http_proxy of the environment.
    host = urlsplit(settings.base_url.strip()).hostname or ""
    handlers = [urllib.request.ProxyHandler({})] if _is_loopback(host) else []
    return urllib.request.build_opener(*handlers).open(request, timeout=settings.timeout_s)


def _error_detail(exc: urllib.error.HTTPError) -> str:
    """The server's error message, short ('' when it gave none)."""
    try:
        body = exc.read(2000).decode("utf-8", "replace")
    except OSError:
        return ""
    try:
        error = json.loads(body).get("error", body)
        message = error.get("message", "") if isinstance(error, dict) else str(error)
    except (ValueError, AttributeError):
        message = body
    message = " ".join(message.split())[:200]
    return f" ({message})" if message else ""


def _request(settings: LLMSettings, key: str, path: str, body: bytes | None) -> bytes:
    """One request to the server: its body, or an exception saying what to do about it."""
    base = settings.base_url.strip().rstrip("/")
    headers = {"Accept": "application/json"}
    if body is not None:
        headers["Content-Type"] = "application/json"
    if key:
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(base + path, data=body, headers=headers, method="POST" if body else "GET")
    try:
        with _open(settings, request) as response:
            return response.read()
    except urllib.error.HTTPError as exc:
        code, detail = exc.code, _error_detail(exc)
        if code in (401, 403):
            fix = (f"check the key in ${settings.api_key_env.strip()}" if settings.api_key_env.strip() else
                   "it wants a key: name the environment variable that holds it")
            raise RetrievalError(f"The LLM server at {base} answered {code}: {fix}{detail}") from None
        if code == 404:
            raise RetrievalError(f"The LLM server at {base} answered 404 for {path}: check the base URL (the part "
                                 f"before /chat/completions, often ending in /v1) and the model name "
                                 f"{settings.model.strip()!r}{detail}") from None
        if code in (408, 429) or code >= 500:
            raise _Retry(f"HTTP {code}{detail}", _retry_after(exc.headers.get("Retry-After"))) from None
        raise _PairFailed(f"HTTP {code}{detail}") from None
    except urllib.error.URLError as exc:
        reason = exc.reason
        if isinstance(reason, ConnectionRefusedError):
            raise _Unreachable("connection refused") from None
        if isinstance(reason, TimeoutError):
            raise _Retry(f"no answer within {settings.timeout_s:g} s") from None
        if isinstance(reason, socket.gaierror):
            raise RetrievalError(f"Cannot reach the LLM at {base}: unknown host {urlsplit(base).hostname!r}") from None
        if isinstance(reason, ConnectionError):
            raise _Retry(f"connection lost ({reason})") from None
        raise _Unreachable(str(reason)) from None
    except ConnectionRefusedError:
        raise _Unreachable("connection refused") from None
    except TimeoutError:
        raise _Retry(f"no answer within {settings.timeout_s:g} s") from None
    except (ConnectionError, http.client.HTTPException) as exc:
        raise _Retry(f"connection lost ({type(exc).__name__})") from None


def _retry_after(value: str | None) -> float | None:
    try:
        return max(0.0, float(value)) if value is not None else None
    except ValueError:
        return None  # an HTTP date: use our own backoff


def ask(settings: LLMSettings, prompt: str, key: str = "") -> Answer:
    """Ask the chat-completions endpoint once (no retry) and read the grade in the answer."""
    body = json.dumps({"model": settings.model.strip(), "temperature": settings.temperature,
                       "messages": [{"role": "system", "content": SYSTEM_MESSAGE},
                                    {"role": "user", "content": prompt}]}).encode("utf-8")
    started = time.monotonic()
    raw = _request(settings, key, "/chat/completions", body)
    seconds = time.monotonic() - started
    try:
        data = json.loads(raw)
        content = data["choices"][0]["message"].get("content") or ""
        usage = data.get("usage") or {}
    except (ValueError, KeyError, IndexError, TypeError, AttributeError):
        raise RetrievalError(f"The LLM server at {settings.base_url.strip()} did not answer in the chat-completions "
                             f"format: {raw[:200].decode('utf-8', 'replace')!r}") from None
    if isinstance(content, list):  # content parts, as some servers send them
        content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
    text = str(content)
    input_tokens = usage.get("prompt_tokens") or (len(SYSTEM_MESSAGE) + len(prompt)) // CHARS_PER_TOKEN
    output_tokens = usage.get("completion_tokens") or max(1, len(text) // CHARS_PER_TOKEN)
    return Answer(text, parse_grade(text), int(input_tokens), int(output_tokens), seconds)


def server_models(settings: LLMSettings) -> list[str]:
    """The models the server lists (GET {base_url}/models), to check the settings before a run;
    the same clear errors as a run's first request."""
    settings.validate()
    try:
        raw = _request(settings, settings.api_key(), "/models", None)
    except _Retry as exc:
        raise RetrievalError(f"Cannot reach the LLM at {settings.base_url.strip()}: {exc.reason}") from None
    except _PairFailed as exc:
        raise RetrievalError(f"The LLM server at {settings.base_url.strip()} answered {exc}") from None
    try:
        return [str(m["id"]) for m in json.loads(raw).get("data", [])]
    except (ValueError, KeyError, TypeError, AttributeError):
        return []


_STOPPED = object()  # a request given up because the run was stopped


def _ask_with_retries(settings: LLMSettings, key: str, prompt: str, answer_id: str, cache: JudgeCache,
                      stop: threading.Event | None, first: bool) -> Answer | str | object:
    """A worker's job: the answer (cached as soon as it came), a failure's reason, or `_STOPPED`.
    Raises `RetrievalError` for what no retry can mend."""
    attempts = settings.retries + 1
    for attempt in range(attempts):
        try:
            answer = ask(settings, prompt, key)
        except _Unreachable as exc:
            if first or attempt == attempts - 1:
                raise RetrievalError(f"Cannot reach the LLM at {settings.base_url.strip()}: {exc.reason}") from None
            delay = exc.after
        except _Retry as exc:
            if attempt == attempts - 1:
                return f"{exc.reason} (asked {attempts} times)"
            delay = exc.after
        except _PairFailed as exc:
            return str(exc)
        else:
            cache.put(answer_id, settings, answer)
            return answer
        delay = min(MAX_BACKOFF_S, BACKOFF_S * 2 ** attempt if delay is None else delay)
        if stop is not None and stop.wait(delay):
            return _STOPPED
        if stop is None:
            time.sleep(delay)
    return _STOPPED  # not reached: the loop returns or raises


# ---- a run -----------------------------------------------------------------------------------
@dataclass
class JudgeRun:
    """What a run did: pairs graded from answers received now and from the cache, pairs that
    failed (pair -> why), whether it was stopped, its time and the tokens it used."""

    pairs: int = 0
    judged: int = 0
    from_cache: int = 0
    failed: dict[Pair, str] = field(default_factory=dict)
    stopped: bool = False
    seconds: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0

    @property
    def saved(self) -> int:
        return self.judged + self.from_cache

    def sentence(self) -> str:
        parts = [f"LLM judge: {self.saved} of {self.pairs} pairs graded ({self.judged} asked, "
                 f"{self.from_cache} from the cache) in {_duration(self.seconds)}"]
        if self.input_tokens or self.output_tokens:
            parts.append(f"{self.input_tokens:,} input and {self.output_tokens:,} output tokens")
        if self.failed:
            reasons = sorted(set(self.failed.values()))
            parts.append(f"{len(self.failed)} failed ({'; '.join(reasons[:3])}{'; …' if len(reasons) > 3 else ''})")
        if self.stopped:
            parts.append("stopped before the end")
        return "; ".join(parts) + "."


class _Saver:
    """Grades waiting to be saved, saved in small batches from the calling thread, and progress."""

    def __init__(self, save: Callable[[dict[Pair, int]], Any], progress: Callable[[int, int], None] | None,
                 total: int):
        self.save, self.progress, self.total = save, progress, total
        self.unsaved: dict[Pair, int] = {}
        self.oldest = 0.0
        self.done = 0
        self.reported = -1

    def add(self, pairs: Iterable[Pair], grade: int | None) -> None:
        """Count the pairs as done; keep their grade to save unless None (failed)."""
        pairs = list(pairs)
        if grade is not None:
            if not self.unsaved:
                self.oldest = time.monotonic()
            self.unsaved.update(dict.fromkeys(pairs, grade))
        self.done += len(pairs)

    def flush(self, force: bool = False, batch: int = SAVE_EVERY) -> None:
        """Save when `batch` grades wait, or the oldest has waited `SAVE_INTERVAL_S`, or `force`;
        at most `batch` a commit."""
        while self.unsaved and (force or len(self.unsaved) >= batch
                                or time.monotonic() - self.oldest >= SAVE_INTERVAL_S):
            chunk = dict(list(self.unsaved.items())[:batch])
            for pair in chunk:
                del self.unsaved[pair]
            self.oldest = time.monotonic()
            self.save(chunk)
        if self.progress is not None and self.done != self.reported:
            self.reported = self.done
            self.progress(self.done, self.total)


def _prompts(items: Iterable[JudgeItem], settings: LLMSettings
             ) -> tuple[list[JudgeItem], dict[str, list[JudgeItem]], dict[str, str]]:
    """The items, one per pair (the last wins); answer key -> the items asking it (pairs with
    the same prompt are asked once); answer key -> prompt."""
    items = list({item.pair: item for item in items}.values())
    asked: dict[str, list[JudgeItem]] = {}
    prompts: dict[str, str] = {}
    for item in items:
        prompt = item.prompt(settings)
        answer_id = answer_key(settings, prompt)
        asked.setdefault(answer_id, []).append(item)
        prompts[answer_id] = prompt
    return items, asked, prompts


def judge(items: Iterable[JudgeItem], settings: LLMSettings, save: Callable[[dict[Pair, int]], Any], *,
          cache: JudgeCache | str | Path | None = None, stop: threading.Event | None = None,
          progress: Callable[[int, int], None] | None = None) -> JudgeRun:
    """Grade the items with the LLM (module docstring): cached answers without a request, the
    rest with at most `settings.concurrency` requests in flight. `save({pair: grade})` and
    `progress(done, total)` are called from this thread. A pair appears once (the last item
    wins); pairs whose prompts are the same are asked once."""
    settings.validate()
    key = settings.api_key()
    started = time.monotonic()
    items, asked, prompts = _prompts(items, settings)
    run = JudgeRun(pairs=len(items))
    saver = _Saver(save, progress, len(items))
    cache, opened = _cache_of(cache)
    try:
        cached = cache.get_many(asked)
        for answer_id, answer in cached.items():
            saver.add((item.pair for item in asked[answer_id]), answer.grade)
            run.from_cache += len(asked[answer_id])
        saver.flush(force=True, batch=CACHED_SAVE_BATCH)
        todo = deque(a for a in asked if a not in cached)
        fatal = _run_requests(todo, asked, prompts, settings, key, cache, stop, saver, run)
    finally:
        if opened:
            cache.close()
    saver.flush(force=True)
    run.seconds = time.monotonic() - started
    if fatal is not None:
        saved = f" ({run.saved} judgments saved before)" if run.saved else ""
        raise RetrievalError(f"{fatal}{saved}")
    return run


def _run_requests(todo: deque[str], asked: Mapping[str, list[JudgeItem]], prompts: Mapping[str, str],
                  settings: LLMSettings, key: str, cache: JudgeCache, stop: threading.Event | None,
                  saver: _Saver, run: JudgeRun) -> RetrievalError | None:
    """Ask for the answers of `todo`, the first alone; the fatal error that ended it, if any."""
    fatal: RetrievalError | None = None
    reached = False  # whether the server has answered anything in this run
    failures_in_a_row = 0
    with ThreadPoolExecutor(max_workers=settings.concurrency, thread_name_prefix="llm-judge") as pool:
        pending: dict = {}
        while True:
            stopping = fatal is not None or (stop is not None and stop.is_set())
            room = settings.concurrency if reached else 1
            while todo and not stopping and len(pending) < room:
                answer_id = todo.popleft()
                pending[pool.submit(_ask_with_retries, settings, key, prompts[answer_id], answer_id, cache, stop,
                                    not reached)] = answer_id
            if not pending:
                break
            done, _ = wait(pending, timeout=TICK_S, return_when=FIRST_COMPLETED)
            for future in done:
                answer_id = pending.pop(future)
                pairs = [item.pair for item in asked[answer_id]]
                try:
                    outcome = future.result()
                except RetrievalError as exc:
                    fatal = fatal or exc
                    continue
                if outcome is _STOPPED:
                    continue
                reached = True
                failures_in_a_row = 0 if isinstance(outcome, Answer) else failures_in_a_row + 1
                if failures_in_a_row >= FAILURES_IN_A_ROW and fatal is None:
                    fatal = RetrievalError(f"The LLM server at {settings.base_url.strip()} failed {failures_in_a_row} "
                                           f"pairs in a row (the last: {outcome}); the run was stopped")
                if isinstance(outcome, Answer):
                    run.input_tokens += outcome.input_tokens
                    run.output_tokens += outcome.output_tokens
                    if outcome.grade is not None:
                        run.judged += len(pairs)
                    else:
                        shown = " ".join(outcome.text.split())[:80]
                        run.failed.update(dict.fromkeys(pairs, f"no 0–3 score in the answer {shown!r}"))
                    saver.add(pairs, outcome.grade)
                else:
                    run.failed.update(dict.fromkeys(pairs, str(outcome)))
                    saver.add(pairs, None)
            saver.flush()
    run.stopped = stop is not None and stop.is_set() and saver.done < saver.total
    return fatal


# ---- estimate ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Estimate:
    """What a run would take: pairs, those the cache answers, requests to send, tokens ≈
    characters / 4, seconds and cost (`measured`: the latency and answer length come from the
    cache's record of this server and model, not from assumptions)."""

    pairs: int
    cached: int
    to_ask: int
    input_tokens: int
    output_tokens: int
    seconds: float
    cost: float
    measured: bool = False

    def sentence(self) -> str:
        basis = "measured latency" if self.measured else f"{SECONDS_PER_REQUEST:g} s a request assumed"
        cost = f", about ${self.cost:,.2f}" if self.cost else ""
        return (f"{self.pairs} pairs: {self.cached} answered from the cache, {self.to_ask} requests to send "
                f"(~{self.input_tokens:,} input and ~{self.output_tokens:,} output tokens at ~4 characters a token"
                f"{cost}); about {_duration(self.seconds)} ({basis}).")


def estimate(items: Iterable[JudgeItem], settings: LLMSettings, *, cache: JudgeCache | str | Path | None = None,
             seconds_per_request: float | None = None) -> Estimate:
    """What `judge` would ask and spend on these items (nothing is sent)."""
    items, asked, prompts = _prompts(items, settings)
    cache, opened = _cache_of(cache)
    try:
        cached_ids = set(cache.get_many(asked))
        _, latency, answer_tokens = cache.measured(settings)
    finally:
        if opened:
            cache.close()
    cached = sum(len(asked[a]) for a in cached_ids)
    to_ask = [p for a, p in prompts.items() if a not in cached_ids]
    input_tokens = sum(len(SYSTEM_MESSAGE) + len(p) for p in to_ask) // CHARS_PER_TOKEN
    output_tokens = round(len(to_ask) * (answer_tokens or ANSWER_TOKENS))
    per_request = seconds_per_request or latency or SECONDS_PER_REQUEST
    seconds = math.ceil(len(to_ask) / max(1, settings.concurrency)) * per_request
    cost = (input_tokens * settings.price_per_1k_input_tokens + output_tokens * settings.price_per_1k_output_tokens
            ) / 1000
    return Estimate(len(items), cached, len(to_ask), input_tokens, output_tokens, seconds, cost,
                    measured=seconds_per_request is None and latency is not None)


def _duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


# ---- the judging queue of a collection --------------------------------------------------------
def _queue(workbench: Workbench, collection: str, set_name: str, pairs: Iterable[Pair], settings: LLMSettings
           ) -> tuple[list[JudgeItem], list[Pair]]:
    """The items of the pairs the LLM rater has not rated yet, and the pairs whose document is
    not in the collection."""
    judgments = workbench.judgments
    queries = judgments.queries(collection, set_name)
    notes = judgments.notes(collection, set_name)
    rated = {(r.query_id, r.doc_id) for r in judgments.ratings_of(collection, set_name, rater=settings.rater)}
    wanted = [p for p in dict.fromkeys((str(q), str(d)) for q, d in pairs) if p not in rated]
    unknown = sorted({q for q, _ in wanted if q not in queries})
    if unknown:
        more = f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""
        raise RetrievalError(f"Query set {set_name!r} has no query {unknown[0]!r}{more}")
    rows = workbench.documents(collection, {d for _, d in wanted})
    items = [JudgeItem(q, d, queries[q], passage_of(rows[d]), notes.get(q, ("", ""))[0])
             for q, d in wanted if d in rows]
    return items, [(q, d) for q, d in wanted if d not in rows]


def queue_items(workbench: Workbench, collection: str, set_name: str, pairs: Iterable[Pair],
                settings: LLMSettings) -> list[JudgeItem]:
    """What `judge_queue` would ask about these pairs: those the LLM rater has not rated yet
    (a "can't tell" counts as rated) whose document is in the collection, with the query's
    text and information need and the document's title and text."""
    return _queue(workbench, collection, set_name, pairs, settings)[0]


def judge_queue(workbench: Workbench, collection: str, set_name: str, pairs: Iterable[Pair],
                settings: LLMSettings, *, stop: threading.Event | None = None,
                progress: Callable[[int, int], None] | None = None,
                cache: JudgeCache | str | Path | None = None) -> JudgeRun:
    """Grade the (query id, doc id) pairs of a query set with the LLM (`judge`), saving the
    grades as the rater `settings.rater` ("llm:<model>"); pairs it rated already are skipped,
    pairs whose document is gone are reported as failed."""
    settings.validate()  # refuse before reading anything
    items, missing = _queue(workbench, collection, set_name, pairs, settings)

    def save(grades: dict[Pair, int]) -> None:
        workbench.judgments.rate_many(collection, set_name, grades, rater=settings.rater)

    run = judge(items, settings, save, cache=cache, stop=stop, progress=progress)
    run.pairs += len(missing)
    run.failed.update(dict.fromkeys(missing, "the document is not in the collection"))
    return run
