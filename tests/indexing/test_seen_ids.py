"""The ids a streaming ingest has met (`indexing.seen_ids`): the same answers as a set of str,
in 8 bytes an id."""

import random

from retrieval.indexing.derive import check_documents
from retrieval.indexing.seen_ids import SeenIds
from retrieval.types import Document, IngestError


def test_seen_ids_answer_as_a_set_of_str_does_over_many_batches():
    rng = random.Random(7)
    pool = [f"doc-{i}" for i in range(3000)]
    seen, reference = SeenIds(), set()
    for size in [1, 5, 300, 2, 700, 64, 64, 1, 999, 40]:
        batch = [rng.choice(pool) for _ in range(size)]
        assert list(seen.seen_before(batch)) == [i in reference for i in batch]
        seen.add(batch)
        reference.update(batch)
    assert [i in seen for i in pool] == [i in reference for i in pool]
    # Runs merged like a binary counter: no more than log2(n) + 1 of them.
    assert 1 <= len(seen._runs) <= 12
    assert all(len(a) > len(b) for a, b in zip(seen._runs, seen._runs[1:], strict=False))


def test_seen_ids_at_the_ends_of_a_run_and_when_empty():
    seen = SeenIds()
    assert list(seen.seen_before(["a", "b"])) == [False, False]
    seen.add([])
    assert len(seen) == 0
    seen.add(["a"])
    run = seen._runs[0]
    assert len(run) == 1
    # An id whose hash is above or below every stored one is not found; the stored one is.
    assert "a" in seen and "b" not in seen and "" not in seen
    assert len(seen) == 1


def test_a_repeat_in_a_later_batch_is_refused_and_the_set_stays_small():
    seen = SeenIds()
    first = [Document(id=f"d{i}", text="x") for i in range(2048)]
    assert check_documents(first, seen) == first
    again = [Document(id="new", text="x"), Document(id="d17", text="x"), Document(id="new", text="y")]
    try:
        check_documents(again, seen)
    except IngestError as exc:
        assert exc.problems == ["id 'd17' appears more than once", "id 'new' appears more than once"]
    else:
        raise AssertionError("a repeated id was let through")
    assert len(seen) == 2048 + 2  # "new" once in its run, "d17" in two runs until they merge
    assert sum(run.nbytes for run in seen._runs) == 8 * (2048 + 2)
