"""indexing/overlap.py: a stage made in a worker thread, at most `depth` items ahead of its
consumer (the memory bound of a streaming ingest), in order, its errors raised in order, stopped
by close. No timing is asserted: the bound is read when the worker is blocked on a full queue."""

from __future__ import annotations

import threading
import time

import pytest

from retrieval.indexing.overlap import Ahead


class Source:
    """`n` items, counting how many the worker has pulled; `fail_at`: raise instead of that item."""

    def __init__(self, n: int, fail_at: int | None = None):
        self.n, self.fail_at, self.pulled, self.closed = n, fail_at, 0, False

    def __iter__(self):
        try:
            for i in range(self.n):
                if i == self.fail_at:
                    raise ValueError(f"bad batch {i}")
                self.pulled += 1
                yield i
        finally:
            self.closed = True


def blocked_or_done(stage: Ahead, source: Source, taken: int) -> None:
    """Wait until the worker can pull no more: the queue full and one more item pulled (it waits
    to queue it), or the source exhausted. An unbounded queue is never full: then only the
    source's end stops the wait. `taken`: items the consumer has taken. (The deadline only guards
    against a hang.)"""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if source.pulled == source.n or (stage.queue.full() and source.pulled == stage.depth + 1 + taken):
            return
        time.sleep(0.001)
    raise AssertionError("the worker neither filled the queue nor ended")


@pytest.mark.parametrize("depth", [1, 3])
def test_the_worker_runs_at_most_depth_items_ahead(depth):
    source = Source(20)
    with Ahead(source, depth) as stage:
        assert source.pulled == 0  # nothing is made before the first request
        assert next(stage) == 0
        blocked_or_done(stage, source, taken=1)
        # depth items queued, one more made and waiting for room, the one taken: depth + 2 in all
        assert source.pulled == depth + 2 < source.n
        assert stage.queue.qsize() == depth
        assert list(stage) == list(range(1, 20))  # the rest, in order
    assert source.closed


def test_an_error_is_raised_after_the_items_before_it():
    source = Source(10, fail_at=3)
    stage = Ahead(source, 2)
    assert [next(stage) for _ in range(3)] == [0, 1, 2]
    with pytest.raises(ValueError, match="bad batch 3"):
        next(stage)
    with pytest.raises(StopIteration):
        next(stage)
    assert source.closed


def test_close_stops_a_worker_waiting_on_a_full_queue():
    source = Source(100)
    stage = Ahead(source, 1, name="test-ahead")
    assert next(stage) == 0
    blocked_or_done(stage, source, taken=1)
    stage.close()
    assert not any(t.name == "test-ahead" for t in threading.enumerate())
    assert source.pulled == 3 and source.closed  # nothing more was made after close
    with pytest.raises(StopIteration):
        next(stage)


def test_depth_must_be_positive():
    with pytest.raises(ValueError, match="at least 1"):
        Ahead([], 0)
