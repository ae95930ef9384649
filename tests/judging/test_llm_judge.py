"""The LLM judge against a real HTTP server on 127.0.0.1 speaking OpenAI's chat completions
(tests/openai_stub.py): refusals, the prompt, the cache, concurrency, retries, stopping, the HTTP
client (proxies, timeouts, the server's error messages), the judging queue of a collection, and a
run killed with SIGKILL that loses no answer."""

import os
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from corpora import ANIMALS
from openai_stub import MODEL, StubLLM, prompt_digest, stub_grade

from retrieval.indexing.readers.parse import parse_bytes
from retrieval.judging.llm import client as llm_client
from retrieval.judging.llm.cache import CACHE_FILE, JudgeCache, answer_key
from retrieval.judging.llm.client import MAX_BACKOFF_S, LLMClient, backoff, server_models
from retrieval.judging.llm.run import ANSWER_TOKENS, JudgeItem, estimate, judge, judge_queue, queue_items
from retrieval.judging.llm.settings import (
    NOT_CONFIGURED,
    SETTINGS_SCHEMA,
    SYSTEM_MESSAGE,
    UMBRELA_PROMPT,
    LLMSettings,
    load_settings,
    parse_grade,
    passage_of,
    rater_name,
    render_prompt,
    save_settings,
    validate_prompt,
)
from retrieval.models import embed
from retrieval.search.workbench import Workbench
from retrieval.store import Store
from retrieval.types import RetrievalError

REPO = Path(__file__).resolve().parents[2]
QUERY = "cats hunt mice at night"
RATER = "llm:" + MODEL


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch):
    monkeypatch.setattr(llm_client, "BACKOFF_S", 0.01)


@pytest.fixture
def stub():
    with StubLLM() as server:
        yield server


def settings_for(server: StubLLM, **changes) -> LLMSettings:
    return LLMSettings(base_url=server.base_url, model=MODEL, **changes)


def items(n: int, query: str = QUERY) -> list[JudgeItem]:
    """n items whose passages share 0 to 4 words with the query (grades 0–3)."""
    words = query.split()
    return [JudgeItem(f"q{i % 3}", f"d{i}", query, " ".join(words[: i % 5]) + f" passage number {i}")
            for i in range(n)]


def expected(batch: list[JudgeItem]) -> dict:
    return {item.pair: stub_grade(item.query, item.passage) for item in batch}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_until(condition, timeout: float = 120.0, what: str = "the condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


# ---- settings ---------------------------------------------------------------------------------
def test_unconfigured_refuses_clearly(tmp_path):
    with pytest.raises(RetrievalError) as caught:
        LLMSettings().validate()
    assert str(caught.value) == NOT_CONFIGURED
    assert "base URL and model" in NOT_CONFIGURED and "--base-url/--model" in NOT_CONFIGURED
    with pytest.raises(RetrievalError, match="not configured"):
        judge(items(2), LLMSettings(model="m"), lambda batch: None, cache=tmp_path / "c.sqlite")
    with pytest.raises(RetrievalError, match="not configured"):
        judge_queue(None, "nothing", "set", [("q", "d")], LLMSettings(base_url="http://127.0.0.1:1/v1"))


def test_settings_validation_messages(monkeypatch):
    good = LLMSettings(base_url="http://127.0.0.1:11434/v1", model="llama3.1:8b")
    assert good.validate() is good and good.rater == "llm:llama3.1:8b"
    assert good.endpoint == "http://127.0.0.1:11434/v1/chat/completions"
    with pytest.raises(RetrievalError, match="must start with http:// or https://"):
        LLMSettings(base_url="ftp://host/v1", model="m").validate()
    with pytest.raises(RetrievalError, match="must start with http:// or https://"):
        LLMSettings(base_url="127.0.0.1:11434", model="m").validate()
    for bad in ({"concurrency": 0}, {"concurrency": 33}, {"retries": -1}, {"timeout_s": 0}, {"temperature": 3},
                {"price_per_1k_input_tokens": -1.0}):
        with pytest.raises(RetrievalError, match="LLM judge's"):
            LLMSettings(base_url="http://h/v1", model="m", **bad).validate()
    # A key pasted where the variable's name belongs is refused without being repeated.
    pasted = "sk-proj-0123456789abcdef"
    with pytest.raises(RetrievalError) as caught:
        LLMSettings(base_url="http://h/v1", model="m", api_key_env=pasted).validate()
    assert pasted not in str(caught.value) and "never the key" in str(caught.value)
    # Only a variable made for an API key: the URL is the user's to set, the process's other secrets are not theirs.
    for secret in ("AWS_SECRET_ACCESS_KEY", "WORKBENCH_MCP_TOKEN", "HOME"):
        with pytest.raises(RetrievalError, match="ending in _API_KEY"):
            LLMSettings(base_url="http://h/v1", model="m", api_key_env=secret).validate(check_key=False)
        monkeypatch.setenv(secret, "not-for-the-llm")
        with pytest.raises(RetrievalError, match="is not set"):  # its value is never read out
            LLMSettings(base_url="http://h/v1", model="m", api_key_env=secret).api_key()
    monkeypatch.delenv("LLM_JUDGE_TEST_API_KEY", raising=False)
    unset = LLMSettings(base_url="http://h/v1", model="m", api_key_env="LLM_JUDGE_TEST_API_KEY")
    with pytest.raises(RetrievalError, match=r"\$LLM_JUDGE_TEST_API_KEY, named to hold the LLM's key, is not set"):
        unset.validate()
    assert unset.validate(check_key=False) is unset
    monkeypatch.setenv("LLM_JUDGE_TEST_API_KEY", "secret-value")
    assert unset.validate().api_key() == "secret-value"


def test_settings_round_trip_and_store_never_the_key(tmp_path, monkeypatch):
    monkeypatch.setenv("LLM_JUDGE_TEST_API_KEY", "secret-value")
    settings = LLMSettings(base_url="http://127.0.0.1:8000/v1", model="Qwen/Qwen2.5-7B-Instruct",
                           api_key_env="LLM_JUDGE_TEST_API_KEY", concurrency=8, price_per_1k_input_tokens=0.15)
    data = settings.to_dict()
    assert LLMSettings.from_dict(data) == settings
    assert "secret-value" not in repr(data)
    assert LLMSettings.from_dict({**data, "concurrency": 2, "from_a_later_version": 1}).concurrency == 2
    assert LLMSettings.from_dict({"base_url": "http://h", "model": "m", "timeout_s": 5}).timeout_s == 5.0
    with pytest.raises(RetrievalError, match="concurrency must be int"):
        LLMSettings.from_dict({**data, "concurrency": "8"})
    store = Store(str(tmp_path / "db"))
    assert load_settings(store) is None
    save_settings(store, settings)
    save_settings(store, settings)  # one row, replaced
    assert load_settings(Workbench(store)) == settings
    assert load_settings(Store(str(tmp_path / "db"))) == settings
    assert "_llm_judge" in store.table_names() and store.collection_names() == []
    rows = store.side_table("_llm_judge", SETTINGS_SCHEMA).to_arrow().to_pylist()
    assert len(rows) == 1 and "secret-value" not in repr(rows)
    with pytest.raises(RetrievalError, match="not configured"):
        save_settings(store, LLMSettings())


def test_rater_names_are_valid_rater_names():
    from retrieval.judging.raters import validate_rater

    assert rater_name("gpt-4o-mini") == "llm:gpt-4o-mini"
    assert rater_name("Qwen/Qwen2.5-7B-Instruct") == "llm:Qwen/Qwen2.5-7B-Instruct"
    for model in ("weird<model>|name*", "x" * 200, "llama3.1:8b-instruct-q4_K_M", "模型 v2"):
        assert validate_rater(rater_name(model)) == rater_name(model)
        assert rater_name(model).startswith("llm:")
    assert rater_name("a|b") == "llm:a-b"


# ---- the prompt and the answer ------------------------------------------------------------------
def test_prompt_template_validation():
    assert validate_prompt(UMBRELA_PROMPT) is UMBRELA_PROMPT
    assert "Query: {query}\nPassage: {passage}" in UMBRELA_PROMPT and "##final score" in UMBRELA_PROMPT
    validate_prompt("Need: {need}\nQ: {query}\nP: {passage}\nAnswer as JSON {{\"score\": N}}")
    with pytest.raises(RetrievalError, match=r"must contain \{query\} and \{passage\}; \{passage\} is missing"):
        validate_prompt("Query: {query}")
    with pytest.raises(RetrievalError, match=r"unknown placeholder\(s\) \{document\}, \{title\}"):
        validate_prompt("{query} {document} {title} {passage}")
    with pytest.raises(RetrievalError, match="empty"):
        validate_prompt("  ")
    with pytest.raises(RetrievalError, match="unknown placeholder"):
        LLMSettings(base_url="http://h/v1", model="m", prompt="{query}{passage}{0}{x}").validate()


def test_user_text_is_never_read_as_a_placeholder():
    template = "N={need} Q={query} P={passage} {{query}}"
    text = render_prompt(template, "what is {passage}?", "see {query} and {0} and {{x}}", need="{need}")
    assert text == "N={need} Q=what is {passage}? P=see {query} and {0} and {{x}} {query}"
    assert render_prompt(UMBRELA_PROMPT, "q", "p").count("Query: q\nPassage: p\n") == 1


def test_parse_grade():
    assert parse_grade("M: 2, T: 1\n##final score: 2") == 2
    assert parse_grade("##Final Score: 3") == 3
    assert parse_grade("final_score = 1. Overall it is related.") == 1
    assert parse_grade("**Final score:** 0") == 0
    assert parse_grade("##final score: 1 ... on reflection ##final score: 3") == 3  # the last one
    assert parse_grade("<think>maybe 3? final score: 3</think>\n2") == 2
    assert parse_grade("2") == 2 and parse_grade("The answer is 1.") == 1
    assert parse_grade("##final score: 7") is None and parse_grade("score 9") is None
    assert parse_grade("I cannot judge this.") is None and parse_grade("") is None


@pytest.mark.parametrize(("answer", "grade"), [
    ("2/3", 2),  # N/M is N
    ("I'd rate it 2 out of 3.", 2),
    ("Score: 2 (on a scale of 0-3)", 2),  # the number after the label, not the scale's end
    ("O: 1, M: 2, T: 3", 1),  # UMBRELA's overall grade beside its aspects
    ("Overall: 2. M: 1, T: 3", 2),
    ("Final score (O): 2", 2),
    ("final score: -1", None),  # out of range under a label: rejected, not read as 1
    ("M: 2, T: 3", None),  # two grade-like numbers and no overall one: not guessed
    ("Score: 2. Score: 3", None),
    ("score: 2-3", None),
    ("On a scale of 0 to 3, I'd give it 2.", 2),
    ("The passage from 1990 is relevant: 2", 2),  # 1990 is no grade
    ("2.0", 2), ("2.5", None), ("-1", None), ("Overall score: 3/3", 3),
])
def test_parse_grade_reads_the_labelled_grade_and_refuses_to_guess(answer, grade):
    assert parse_grade(answer) == grade


def test_cached_grades_read_by_an_older_parser_are_read_again(tmp_path):
    from retrieval.judging.llm.client import Answer
    from retrieval.judging.llm.settings import PARSER_VERSION

    path = tmp_path / "old.sqlite"
    db = sqlite3.connect(path)  # a cache written before grades named their parser (it read "the last number")
    db.execute("CREATE TABLE answers (key TEXT PRIMARY KEY, base_url TEXT NOT NULL, model TEXT NOT NULL, "
               "grade INTEGER NOT NULL, answer TEXT NOT NULL, input_tokens INTEGER NOT NULL, "
               "output_tokens INTEGER NOT NULL, seconds REAL NOT NULL, created TEXT NOT NULL)")
    db.executemany("INSERT INTO answers VALUES (?, 'http://h/v1', 'm', ?, ?, 10, 2, 0.5, '2026-01-01')",
                   [("k1", 3, "2/3"), ("k2", 3, "O: 1, M: 2, T: 3"), ("k3", 3, "M: 2, T: 3"),
                    ("k4", 1, "##final score: 1")])
    db.commit()
    db.close()
    with JudgeCache(path) as cache:
        found = cache.get_many(["k1", "k2", "k3", "k4"])
        assert {k: a.grade for k, a in found.items()} == {"k1": 2, "k2": 1, "k4": 1}  # k3: asked again
        settings = LLMSettings(base_url="http://h/v1", model="m")
        cache.put("k5", settings, Answer("Score: 2 (on a scale of 0-3)", 2, 10, 2, 0.5))
        assert cache.get_many(["k5"])["k5"].grade == 2
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT parser FROM answers WHERE key = 'k5'").fetchone() == (PARSER_VERSION,)
        assert db.execute("SELECT parser FROM answers WHERE key = 'k1'").fetchone() == (1,)


def test_passage_of_a_document():
    assert passage_of({"title": "Cats", "text": "Cats sleep."}) == "Cats sleep."  # the title starts the text
    assert passage_of({"title": "Owls", "text": "Birds of prey."}) == "Owls\nBirds of prey."
    assert passage_of({"text": "x" * 9000}).endswith("…") and len(passage_of({"text": "x" * 9000})) == 8000


# ---- runs against the stub --------------------------------------------------------------------------
def test_grades_are_the_servers_and_a_second_run_asks_nothing(stub, tmp_path):
    batch = items(12)
    saved: dict = {}
    seen = []
    run = judge(batch, settings_for(stub), saved.update, cache=tmp_path / "cache.sqlite",
                progress=lambda done, total: seen.append((done, total)))
    assert saved == expected(batch) and set(saved.values()) == {0, 1, 2, 3}
    assert (run.pairs, run.judged, run.from_cache, run.failed, run.stopped) == (12, 12, 0, {}, False)
    assert run.input_tokens > 0 and run.output_tokens > 0
    assert seen[-1] == (12, 12) and [d for d, _ in seen] == sorted(d for d, _ in seen)
    assert stub.requests == 12
    # The prompt the server got: UMBRELA's, filled in, after UMBRELA's system message.
    assert render_prompt(UMBRELA_PROMPT, batch[0].query, batch[0].passage) in stub.prompts
    again: dict = {}
    rerun = judge(batch, settings_for(stub), again.update, cache=tmp_path / "cache.sqlite")
    assert again == saved and (rerun.judged, rerun.from_cache) == (0, 12)
    assert stub.requests == 12  # nothing asked
    # A change in what is asked is another key: another model, server or prompt asks again.
    judge(batch[:2], settings_for(stub, prompt="Query: {query}\nPassage: {passage}\n\nGrade 0-3."),
          again.update, cache=tmp_path / "cache.sqlite")
    assert stub.requests == 14
    with JudgeCache(tmp_path / "cache.sqlite") as cache:
        assert len(cache) == 14


def test_at_most_concurrency_requests_in_flight(tmp_path):
    # The stub holds each request until 3 are in flight (or 2 s pass), so the most in flight
    # is what the client allows, whatever the timing.
    with StubLLM(gather=3) as server:
        saved: dict = {}
        judge(items(7), settings_for(server, concurrency=3), saved.update, cache=tmp_path / "c.sqlite")
        assert saved == expected(items(7))
        assert server.max_in_flight == 3
    with StubLLM(gather=3, gather_timeout=0.3) as server:
        judge(items(5), settings_for(server, concurrency=2), {}.update, cache=tmp_path / "c2.sqlite")
        assert server.max_in_flight == 2


@pytest.mark.parametrize("status", [500, 429])
def test_retries_on_server_errors_and_rate_limits(tmp_path, status):
    with StubLLM(fail_first=3, fail_status=status) as server:
        saved: dict = {}
        run = judge(items(6), settings_for(server, retries=3), saved.update, cache=tmp_path / "c.sqlite")
        assert saved == expected(items(6)) and not run.failed
        assert server.requests == 6 + 3
    with StubLLM(fail_first=1000, fail_status=status) as server:
        run = judge(items(3), settings_for(server, retries=1), {}.update, cache=tmp_path / "c2.sqlite")
        assert set(run.failed) == {item.pair for item in items(3)} and run.judged == 0
        assert all(f"HTTP {status}" in reason and "asked 2 times" in reason for reason in run.failed.values())
        assert server.requests == 3 * 2


def test_a_server_that_keeps_failing_ends_the_run(tmp_path):
    with StubLLM(fail_first=1000) as server:
        with pytest.raises(RetrievalError, match=r"failed 8 pairs in a row \(the last: HTTP 500"):
            judge(items(40), settings_for(server, retries=1, concurrency=2), {}.update, cache=tmp_path / "c.sqlite")
        assert server.requests < 40


def test_unreachable_server_fails_at_the_first_request(tmp_path, monkeypatch):
    calls = []
    real_ask = LLMClient.ask
    monkeypatch.setattr(LLMClient, "ask", lambda *a, **k: calls.append(1) or real_ask(*a, **k))
    port = free_port()  # nothing listens there
    settings = LLMSettings(base_url=f"http://127.0.0.1:{port}/v1", model=MODEL)
    with pytest.raises(RetrievalError) as caught:
        judge(items(5), settings, {}.update, cache=tmp_path / "c.sqlite")
    assert str(caught.value) == f"Cannot reach the LLM at http://127.0.0.1:{port}/v1: connection refused"
    assert len(calls) == 1  # no retry, no second request
    with pytest.raises(RetrievalError, match="connection refused"):
        server_models(settings)


def test_a_wrong_key_fails_at_once_naming_the_variable(tmp_path, monkeypatch):
    with StubLLM(expected_key="right-key") as server:
        monkeypatch.setenv("LLM_JUDGE_TEST_API_KEY", "wrong-key")
        settings = settings_for(server, api_key_env="LLM_JUDGE_TEST_API_KEY")
        with pytest.raises(RetrievalError) as caught:
            judge(items(5), settings, {}.update, cache=tmp_path / "c.sqlite")
        assert str(caught.value).startswith(f"The LLM server at {server.base_url} answered 401: check the key in "
                                            "$LLM_JUDGE_TEST_API_KEY")
        assert "wrong-key" not in str(caught.value)
        assert server.requests == 1
        with pytest.raises(RetrievalError, match="answered 401: it wants a key"):
            judge(items(5), settings_for(server), {}.update, cache=tmp_path / "c.sqlite")
        monkeypatch.setenv("LLM_JUDGE_TEST_API_KEY", "right-key")
        saved: dict = {}
        judge(items(5), settings, saved.update, cache=tmp_path / "c.sqlite")
        assert saved == expected(items(5))


def test_a_wrong_url_fails_at_once(stub, tmp_path):
    settings = LLMSettings(base_url=f"http://127.0.0.1:{stub.port}", model=MODEL)  # without /v1
    with pytest.raises(RetrievalError, match="answered 404 for /chat/completions: check the base URL"):
        judge(items(5), settings, {}.update, cache=tmp_path / "c.sqlite")
    assert stub.requests == 0  # the stub counts chat requests on its own route only
    assert server_models(settings_for(stub)) == [MODEL]


def test_an_answer_without_a_grade_fails_that_pair_only_and_is_asked_again(stub, tmp_path):
    batch = items(4) + [JudgeItem("q9", "dx", QUERY, "an unjudgeable passage")]
    saved: dict = {}
    run = judge(batch, settings_for(stub), saved.update, cache=tmp_path / "c.sqlite")
    assert saved == expected(items(4))
    assert list(run.failed) == [("q9", "dx")] and "no 0–3 score" in run.failed[("q9", "dx")]
    assert "failed" in run.sentence()
    judge(batch, settings_for(stub), {}.update, cache=tmp_path / "c.sqlite")
    assert stub.requests == 6  # only the unparseable one again


def test_pairs_with_the_same_prompt_are_asked_once(stub, tmp_path):
    batch = [JudgeItem("q1", "a", QUERY, "cats"), JudgeItem("q2", "b", QUERY, "cats"),
             JudgeItem("q1", "a", QUERY, "cats")]
    saved: dict = {}
    run = judge(batch, settings_for(stub), saved.update, cache=tmp_path / "c.sqlite")
    assert saved == {("q1", "a"): 1, ("q2", "b"): 1} and run.pairs == 2 and run.judged == 2
    assert stub.requests == 1


def test_stop_halts_dispatch_and_keeps_what_was_answered(tmp_path):
    # The stub answers 3 requests and holds the rest: the run is stopped from another thread
    # (as the Judge page does) while requests hang; they time out, are not retried, and the
    # run returns with the 3 answers saved.
    with StubLLM(hang_after=3) as server:
        saved: dict = {}
        stop = threading.Event()
        result: dict = {}
        worker = threading.Thread(target=lambda: result.update(run=judge(
            items(20), settings_for(server, concurrency=2, timeout_s=3), saved.update,
            cache=tmp_path / "c.sqlite", stop=stop)))
        worker.start()
        wait_until(lambda: server.answered == 3 and server.requests == 5, 60, "3 answers and 2 held")
        stop.set()
        worker.join(60)
        assert not worker.is_alive()
        run = result["run"]
        assert run.stopped and run.judged == 3 and not run.failed and "stopped" in run.sentence()
        assert len(saved) == 3 and saved == {p: g for p, g in expected(items(20)).items() if p in saved}
        assert server.requests == 5  # nothing dispatched after the stop
        with JudgeCache(tmp_path / "c.sqlite") as cache:
            assert len(cache) == 3


def test_estimate_before_a_run(stub, tmp_path):
    cache = tmp_path / "c.sqlite"
    batch = items(10)
    settings = settings_for(stub, concurrency=2, price_per_1k_input_tokens=1.0, price_per_1k_output_tokens=2.0)
    guess = estimate(batch, settings, cache=cache, seconds_per_request=3.0)
    prompt_chars = sum(len(SYSTEM_MESSAGE) + len(item.prompt(settings)) for item in batch)
    assert (guess.pairs, guess.cached, guess.to_ask) == (10, 0, 10)
    assert guess.input_tokens == prompt_chars // 4 and guess.output_tokens == 10 * ANSWER_TOKENS
    assert guess.seconds == 5 * 3.0 and not guess.measured
    assert guess.cost == pytest.approx((guess.input_tokens * 1.0 + guess.output_tokens * 2.0) / 1000)
    assert "10 requests to send" in guess.sentence()
    judge(batch[:4], settings, {}.update, cache=cache)
    after = estimate(batch, settings, cache=cache)
    assert (after.cached, after.to_ask) == (4, 6) and after.measured
    assert stub.requests == 4  # estimating asks nothing


# ---- the HTTP client ----------------------------------------------------------------------------
def test_backoff_doubles_honours_retry_after_and_is_capped():
    base = llm_client.BACKOFF_S
    assert [backoff(a) for a in range(4)] == [base, 2 * base, 4 * base, 8 * base]
    assert backoff(2, retry_after=7.0) == 7.0 and backoff(0, retry_after=0.0) == 0.0
    assert backoff(60) == MAX_BACKOFF_S and backoff(0, retry_after=3600.0) == MAX_BACKOFF_S


def test_a_loopback_server_is_reached_without_the_environments_proxy(stub, tmp_path, monkeypatch):
    dead_proxy = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(name, dead_proxy)
        monkeypatch.setenv(name.lower(), dead_proxy)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    saved: dict = {}
    judge(items(3), settings_for(stub), saved.update, cache=tmp_path / "c.sqlite")
    assert saved == expected(items(3)) and server_models(settings_for(stub)) == [MODEL]
    # Any other server goes through the environment's proxy: here the stub, which has no route
    # for a proxied request's full URL (so the host's name is never looked up).
    for name in ("HTTP_PROXY", "http_proxy"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{stub.port}")
    with pytest.raises(RetrievalError, match="answered 404 for /models"):
        server_models(LLMSettings(base_url="http://llm.invalid:8000/v1", model=MODEL))


def test_error_messages_carry_the_servers_own_message(tmp_path):
    with StubLLM(expected_key="right-key") as server, \
            pytest.raises(RetrievalError, match=r"answered 401: it wants a key.*\(Incorrect API key provided\)"):
        judge(items(2), settings_for(server), {}.update, cache=tmp_path / "c.sqlite")
    with StubLLM(fail_first=1000) as server:
        run = judge(items(1), settings_for(server, retries=0), {}.update, cache=tmp_path / "c.sqlite")
        assert run.failed == {("q0", "d0"): "HTTP 500 (stub failure 1) (asked 1 times)"}


def test_a_request_is_bounded_by_the_timeout_and_never_a_grade(tmp_path):
    with StubLLM(hang_after=0) as server:
        started = time.monotonic()
        saved: dict = {}
        run = judge(items(1), settings_for(server, retries=0, timeout_s=1), saved.update,
                    cache=tmp_path / "c.sqlite")
        assert time.monotonic() - started < 30
        assert run.failed == {("q0", "d0"): "no answer within 1 s (asked 1 times)"} and saved == {}
        with JudgeCache(tmp_path / "c.sqlite") as cache:
            assert len(cache) == 0


# ---- the judging queue of a collection ----------------------------------------------------------
@pytest.fixture
def animals(tmp_path):
    """Collection 'animals' (six documents) with query set 'pets' of three queries."""
    from retrieval.indexing.pipeline import create_collection

    workbench = Workbench(Store(str(tmp_path / "db")))
    create_collection(workbench.store, "animals", parse_bytes(ANIMALS.encode(), "animals.csv"))
    queries = {"p1": "cats hunt mice at night", "p2": "birds with night vision", "p3": "honey bees"}
    workbench.judgments.save_query_set("animals", "pets", queries, {"p1": {"cat": 3}})
    workbench.judgments.set_notes("animals", "pets", "p2", "nocturnal birds of prey", "owls count")
    return workbench


def test_judge_queue_saves_the_grades_as_the_llm_rater(animals, stub, tmp_path):
    docs = ["cat", "dog", "owl", "bee", "fox", "cow"]
    pairs = [(q, d) for q in ("p1", "p2", "p3") for d in docs]
    settings = settings_for(stub, prompt="Need: {need}\n" + UMBRELA_PROMPT)
    batch = queue_items(animals, "animals", "pets", pairs, settings)
    assert [i.pair for i in batch] == pairs
    assert batch[6].need == "nocturnal birds of prey" and batch[0].need == ""
    rows = animals.documents("animals", docs)
    assert batch[0].passage == passage_of(rows["cat"]) and "Cats are small felines" in batch[0].passage
    run = judge_queue(animals, "animals", "pets", pairs + [("p1", "no-such-doc")], settings,
                      cache=tmp_path / "c.sqlite")
    assert run.judged == 18 and run.failed == {("p1", "no-such-doc"): "the document is not in the collection"}
    ratings = animals.judgments.ratings_of("animals", "pets", rater=RATER)
    queries = animals.judgments.queries("animals", "pets")
    assert {(r.query_id, r.doc_id): r.grade for r in ratings} == {
        (q, d): stub_grade(queries[q], passage_of(rows[d])) for q, d in pairs}
    assert any(r.grade for r in ratings)
    # The human's judgment is kept beside the LLM's; the LLM is a rater of its own.
    assert animals.judgments.raters("animals", "pets") == ["", RATER]
    assert "Need: nocturnal birds of prey" in "".join(stub.prompts)
    # Rated pairs are not asked again, not even from the cache.
    assert queue_items(animals, "animals", "pets", pairs, settings) == []
    again = judge_queue(animals, "animals", "pets", pairs, settings, cache=tmp_path / "c.sqlite")
    assert (again.pairs, again.judged, again.from_cache) == (0, 0, 0) and stub.requests == 18
    with pytest.raises(RetrievalError, match="has no query 'p9'"):
        judge_queue(animals, "animals", "pets", [("p9", "cat")], settings, cache=tmp_path / "c.sqlite")


@pytest.mark.slow
def test_a_killed_run_loses_no_answer(tmp_path):
    """`python -m retrieval judge llm` killed with SIGKILL after 5 answers (the stub holds every
    later request): what it saved is readable and right, every answer it got is in the cache, and
    a re-run saves those without asking and asks only for the rest."""
    from retrieval.indexing.pipeline import create_collection

    db, cache_dir = tmp_path / "db", tmp_path / "cache"
    # A judge cache of its own, beside the model files the session already made (the CLI
    # processes would otherwise build the int8 export again: ~20 s of this test's time).
    cache_dir.mkdir()
    for made in ("models", "onnx"):
        (embed.cache_dir() / made).mkdir(parents=True, exist_ok=True)
        (cache_dir / made).symlink_to(embed.cache_dir() / made, target_is_directory=True)
    workbench = Workbench(Store(str(db)))
    create_collection(workbench.store, "animals", parse_bytes(ANIMALS.encode(), "animals.csv"))
    queries = {"p1": "cats hunt mice at night", "p2": "birds with night vision", "p3": "honey bees",
               "p4": "dogs need walks"}
    workbench.judgments.save_query_set("animals", "pets", queries)
    env = {**os.environ, "WORKBENCH_DB": str(db), "WORKBENCH_CACHE": str(cache_dir), "PYTHONUNBUFFERED": "1"}
    stub = subprocess.Popen([sys.executable, str(REPO / "tests" / "openai_stub.py"), "--hang-after", "5"],
                            stdout=subprocess.PIPE, text=True, cwd=REPO, env=env)
    driver = None
    try:
        port = int(stub.stdout.readline())
        base_url = f"http://127.0.0.1:{port}/v1"

        def stats() -> dict:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats", timeout=10) as response:
                import json

                return json.loads(response.read())

        command = [sys.executable, "-m", "retrieval", "judge", "llm", "animals", "--queryset", "pets",
                   "--base-url", base_url, "--model", MODEL, "--concurrency", "2"]
        driver = subprocess.Popen(command, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)
        cache_file = cache_dir / CACHE_FILE

        def cached() -> int:
            assert driver.poll() is None, f"the run ended by itself: {driver.communicate()[1][-2000:]}"
            if not cache_file.exists():
                return 0
            try:
                with sqlite3.connect(f"file:{cache_file}?mode=ro", uri=True) as db_file:
                    return db_file.execute("SELECT COUNT(*) FROM answers").fetchone()[0]
            except sqlite3.OperationalError:  # not created yet
                return 0

        wait_until(lambda: cached() >= 5, 180, "5 answers in the cache")
        driver.send_signal(signal.SIGKILL)
        driver.wait(30)
        assert driver.returncode == -signal.SIGKILL

        # What was saved is readable, right, and among what was answered.
        settings = LLMSettings(base_url=base_url, model=MODEL)
        judgments = Workbench(Store(str(db))).judgments
        rows = workbench.documents("animals", [d.split(",")[0] for d in ANIMALS.splitlines()[1:]])
        every = [JudgeItem(q, d, queries[q], passage_of(rows[d])) for q in queries for d in rows]
        key_of = {answer_key(settings, item.prompt(settings)): item.pair for item in every}
        with JudgeCache(cache_file) as cache:
            answers = cache.get_many(key_of)
        assert len(answers) == 5
        in_cache = {key_of[k]: a.grade for k, a in answers.items()}
        saved = {(r.query_id, r.doc_id): r.grade for r in judgments.ratings_of("animals", "pets", rater=RATER)}
        assert set(saved) <= set(in_cache) and all(saved[p] == in_cache[p] for p in saved)
        assert all(g == stub_grade(queries[q], passage_of(rows[d])) for (q, d), g in in_cache.items())

        # The re-run saves the cached answers without asking and asks for the rest only.
        urllib.request.urlopen(f"http://127.0.0.1:{port}/release", timeout=10).close()
        before = stats()["requests"]
        rerun = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
        assert rerun.returncode == 0, rerun.stderr[-3000:]
        asked = stats()["asked"][before:]
        rated = {(r.query_id, r.doc_id): r.grade for r in judgments.ratings_of("animals", "pets", rater=RATER)}
        assert set(rated) == {item.pair for item in every}  # the whole depth-10 pool: 4 queries × 6 documents
        assert rated == {item.pair: stub_grade(item.query, item.passage) for item in every}
        digest_of = {item.pair: prompt_digest(item.prompt(settings)) for item in every}
        assert not {digest_of[p] for p in in_cache} & set(asked)
        assert sorted(asked) == sorted(digest_of[p] for p in rated if p not in in_cache)
    finally:
        for process in (driver, stub):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait(30)
