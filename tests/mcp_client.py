"""What the MCP server's tests share: an event loop of their own, the server process's environment,
and a tool result's data and ranking (used by tests/serve and tests/search/test_learned_ranker.py)."""

from __future__ import annotations

import os

import anyio


def run_async(fn, *args):
    """`anyio.run` in a thread of its own: the browser tests' session-wide Playwright (sync API)
    keeps an event loop running in the main thread, where a second loop cannot start."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(anyio.run, fn, *args).result()


def server_env() -> dict[str, str]:
    return {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
            "OMP_WAIT_POLICY": "PASSIVE", "LANCEDB_LOG": "error"}


def tool_data(result) -> dict:
    assert not result.is_error, result.content[0].text
    return result.structured_content


def tool_ranking(data: dict) -> list[tuple]:
    return [(r["id"], r["score"], r["similarity"]) for r in data["results"]]
