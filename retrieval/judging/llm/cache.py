"""The LLM judge's answers, cached: a question is never asked twice.

Every answer is cached (`JudgeCache`, SQLite in `$WORKBENCH_CACHE/judge_cache.sqlite`) under the
sha256 of what was asked: base URL, model, temperature, system message and the filled-in prompt
(so the template, the query, the need where the template uses it, and the document's title and
text). The base URL is part of it because one model name on two servers can be two models (two
quantisations, a fine-tune under the same tag). Each answer is committed when it arrives, before
it is saved as a judgment: a run that is killed keeps every answer it got, and the next run saves
them without asking. An answer without a grade is not cached: the next run asks again.

Each grade is kept with the version of the rules that read it from the answer
(`settings.PARSER_VERSION`): a grade read by other rules (an older parser) is not reused but read
again from the kept answer, and an answer the current rules find no grade in counts as not
cached (asked again).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

from retrieval.judging.llm.client import Answer
from retrieval.judging.llm.settings import PARSER_VERSION, SYSTEM_MESSAGE, LLMSettings, parse_grade

CACHE_FILE = "judge_cache.sqlite"
_KEY_VERSION = 1  # bump when what a key covers changes


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
            "output_tokens INTEGER NOT NULL, seconds REAL NOT NULL, created TEXT NOT NULL, "
            f"parser INTEGER NOT NULL DEFAULT {PARSER_VERSION})")
        columns = {row[1] for row in self._db.execute("PRAGMA table_info(answers)")}
        if "parser" not in columns:  # a cache from before grades named their parser: version 1
            try:
                self._db.execute("ALTER TABLE answers ADD COLUMN parser INTEGER NOT NULL DEFAULT 1")
            except sqlite3.OperationalError as exc:  # another process added it between the two statements
                if "duplicate column" not in str(exc):
                    raise

    def get_many(self, keys: Iterable[str]) -> dict[str, Answer]:
        keys = list(dict.fromkeys(keys))
        found: dict[str, Answer] = {}
        with self._lock:
            for start in range(0, len(keys), 500):
                chunk = keys[start:start + 500]
                marks = ",".join("?" * len(chunk))
                for key, text, grade, tin, tout, seconds, parser in self._db.execute(
                        f"SELECT key, answer, grade, input_tokens, output_tokens, seconds, parser FROM answers "
                        f"WHERE key IN ({marks})", chunk):
                    if parser != PARSER_VERSION:  # read by other rules: read the answer again
                        grade = parse_grade(text)
                    if grade is not None:
                        found[key] = Answer(text, grade, tin, tout, seconds)
        return found

    def put(self, key: str, settings: LLMSettings, answer: Answer) -> None:
        """Keep an answer with a grade (one commit)."""
        if answer.grade is None:
            return  # asked again next time (module docstring)
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO answers (key, base_url, model, grade, answer, input_tokens, output_tokens, "
                "seconds, created, parser) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (key, settings.base_url.strip().rstrip("/"), settings.model.strip(), answer.grade, answer.text,
                 answer.input_tokens, answer.output_tokens, answer.seconds,
                 datetime.now(UTC).isoformat(timespec="seconds"), PARSER_VERSION))

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


def cache_of(cache: JudgeCache | str | Path | None) -> tuple[JudgeCache, bool]:
    """The cache to use, and whether it was opened here (and is closed here)."""
    return (cache, False) if isinstance(cache, JudgeCache) else (JudgeCache(cache), True)
