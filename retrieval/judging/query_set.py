"""One query set as read from the judgment store (`QuerySet`: queries, the judgments of one
judgment source, its fingerprint and summary) and the name of the raters' consensus source."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

CONSENSUS = "consensus"  # the judgment source of the raters' consensus (`JudgmentStore.qrels`)


@dataclass
class QuerySet:
    """One query set as read from a `JudgmentStore`: its queries (id -> text) and qrels
    (query id -> doc id -> grade)."""

    name: str
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    source: str = CONSENSUS  # the judgment source the qrels are (`JudgmentStore.qrels`)

    @property
    def judged(self) -> list[str]:
        """Query ids with at least one judgment and a text: the ones evaluation scores."""
        return [q for q, docs in self.qrels.items() if docs and q in self.queries]

    def fingerprint(self) -> str:
        data = json.dumps([self.queries, self.qrels], sort_keys=True, ensure_ascii=False)
        return hashlib.sha1(data.encode()).hexdigest()

    def summary(self) -> str:
        n_judgments = sum(len(d) for d in self.qrels.values())
        relevant = sum(1 for d in self.qrels.values() for g in d.values() if g > 0)
        return (f"Query set '{self.name}': {_plural(len(self.queries), 'query', 'queries')}, "
                f"{len(self.judged)} of them judged ({_plural(n_judgments, 'judgment')}, {relevant} relevant).")


def _plural(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else many or one + 's'}"
