"""A run of the LLM judge: what it would cost (`estimate`), asking (`judge`), and a query set's judging queue.

A run (`judge`) asks the first uncached pair alone — a refused connection, a 401/403 (the key) or
a 404 (the URL or the model) then fails at once with a clear `RetrievalError` — and then keeps at
most `concurrency` requests in flight. Connection errors, timeouts, HTTP 429 and 5xx are retried
`retries` times with exponential backoff (or the server's Retry-After: `client.ask_with_retries`);
when `FAILURES_IN_A_ROW` pairs fail one after the other even so, the run ends with a
`RetrievalError`. Each answer is cached as it arrives (`cache.JudgeCache`); a failed request is
never a grade. Grades are saved from the calling thread every `SAVE_EVERY` answers or
`SAVE_INTERVAL_S` seconds, so each commit is small and little waits unsaved. A `stop` event ends
dispatching; the requests in flight finish (each bounded by the timeout), what they answered is
saved, and the run returns.

`estimate` says what a run would cost before it starts: tokens ≈ characters / 4 (a rule of thumb
for English with OpenAI's tokenizers), seconds from the latency measured in the cache for this
server and model (else `SECONDS_PER_REQUEST`) over the concurrency, cost from the settings' prices.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from retrieval.judging.llm.cache import JudgeCache, answer_key, cache_of
from retrieval.judging.llm.client import CHARS_PER_TOKEN, STOPPED, Answer, LLMClient
from retrieval.judging.llm.settings import SYSTEM_MESSAGE, LLMSettings, passage_of, render_prompt
from retrieval.types import RetrievalError

if TYPE_CHECKING:
    from retrieval.search.workbench import Workbench

SAVE_EVERY = 8  # answers per save at most …
SAVE_INTERVAL_S = 1.0  # … or this long after the oldest unsaved one
CACHED_SAVE_BATCH = 500  # cached answers are saved in bigger commits: they come all at once
TICK_S = 0.2  # how often the run looks at `stop` and the save clock while requests are out
FAILURES_IN_A_ROW = 8  # pairs failed after their retries, with no answer between: the server is down

ANSWER_TOKENS = 8  # "##final score: 2", when the cache has measured nothing for the model
SECONDS_PER_REQUEST = 2.0  # latency assumed when the cache has measured nothing

Pair = tuple[str, str]  # (query id, doc id)


# ---- what is asked ----------------------------------------------------------------------------
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
    cache, opened = cache_of(cache)
    try:
        cached = cache.get_many(asked)
        for answer_id, answer in cached.items():
            saver.add((item.pair for item in asked[answer_id]), answer.grade)
            run.from_cache += len(asked[answer_id])
        saver.flush(force=True, batch=CACHED_SAVE_BATCH)
        todo = deque(a for a in asked if a not in cached)
        with LLMClient(settings, key) as client:
            fatal = _run_requests(todo, asked, prompts, client, cache, stop, saver, run)
    finally:
        if opened:
            cache.close()
    saver.flush(force=True)
    run.seconds = time.monotonic() - started
    if fatal is not None:
        saved = f" ({run.saved} judgments saved before)" if run.saved else ""
        raise RetrievalError(f"{fatal}{saved}")
    return run


def _ask_and_keep(client: LLMClient, prompt: str, answer_id: str, cache: JudgeCache, stop: threading.Event | None,
                  first: bool) -> Answer | str | object:
    """A worker's job: the answer (cached as soon as it came), a failure's reason, or `STOPPED`.
    Raises `RetrievalError` for what no retry can mend."""
    outcome = client.ask_with_retries(prompt, stop, first)
    if isinstance(outcome, Answer):
        cache.put(answer_id, client.settings, outcome)
    return outcome


def _run_requests(todo: deque[str], asked: Mapping[str, list[JudgeItem]], prompts: Mapping[str, str],
                  client: LLMClient, cache: JudgeCache, stop: threading.Event | None,
                  saver: _Saver, run: JudgeRun) -> RetrievalError | None:
    """Ask for the answers of `todo`, the first alone; the fatal error that ended it, if any."""
    settings = client.settings
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
                pending[pool.submit(_ask_and_keep, client, prompts[answer_id], answer_id, cache, stop,
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
                if outcome is STOPPED:
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
    cache, opened = cache_of(cache)
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
