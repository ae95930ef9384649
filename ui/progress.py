"""The progress bar of a long run (evaluate, sweep, A/B test): one `st.progress` that the run
reports to through a `progress(done, total)` callback, emptied when the run ends or fails."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from functools import partial

import streamlit as st


class Progress:
    """`progress(done, total)`: the callback a run reports to. A run made of several equal parts
    (the A/B test evaluates two configs) reports each part through `part(i)`, which fills the
    i-th of `len(parts)` equal stretches of the bar."""

    def __init__(self, bar, text: str, parts: Sequence[str]):
        self._bar, self._text, self._parts = bar, text, parts

    def __call__(self, done: int, total: int) -> None:
        self._show(0, done, total)

    def part(self, i: int) -> Callable[[int, int], None]:
        return partial(self._show, i)

    def _show(self, i: int, done: int, total: int) -> None:
        self._bar.progress(min(1.0, (i * total + done) / max(len(self._parts) * total, 1)),
                           text=self._text.format(done=done, total=total, part=self._parts[i]))


@contextmanager
def progress_bar(start: str, text: str, parts: Sequence[str] = ("",)) -> Iterator[Progress]:
    """A progress bar reading `start` until the first report, then `text` formatted with the
    report's `done`, `total` and (for a run in parts) the part's name `part`. The bar is emptied
    at the end of the block, also when the run raises (the caller shows the error)."""
    bar = st.progress(0.0, text=start)
    try:
        yield Progress(bar, text, parts)
    finally:
        bar.empty()
