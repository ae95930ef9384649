"""Search latency with 1,000 query rules loaded against none; prints a table (or --json).

Run: .venv/bin/python benchmarks/bench_rules.py [--beir DIR] [--queries N] [--rounds R] [--json]

A BEIR folder (default: the bundled sample_data/xquad, English queries) is ingested into a
temporary store; the config is the default hybrid (BM25 + vector). Rows, medians over queries ×
rounds (rounds interleaved, so load on the machine hits both alike):

- search (cached candidates): `Workbench.search` of a query whose candidates are cached (what a
  slider move or a repeated query costs): the rules' share of a search is largest here;
- search (first time): a fresh Workbench per round (candidates not cached; encoder loaded);
- rule matching alone: `RuleSet.matches` per query (the first-term dict lookup).

The rule set is 1,000 rules (SYNONYM, DELETE, UP, PIN, HIDE) whose inputs are words of the
corpus that no benchmark query holds, so no rule fires: the cost measured is having them loaded
(parsing is cached per text; matching is one dict lookup per query term), not what a firing rule
does (a rewritten query searches again, by design). Target: within 5 % of no rules.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

from retrieval.indexing.pipeline import create_collection  # noqa: E402
from retrieval.indexing.readers.parse import parse_path  # noqa: E402
from retrieval.search.config import SearchConfig  # noqa: E402
from retrieval.search.rules import parse_rules  # noqa: E402
from retrieval.search.rules.model import query_terms  # noqa: E402
from retrieval.search.workbench import Workbench  # noqa: E402
from retrieval.store import Store  # noqa: E402

N_RULES = 1000


def rules_text(corpus_words: list[str], asked: set[str], doc_ids: list[str], n: int = N_RULES) -> str:
    """`n` rules over corpus words no query holds, cycling through five instruction kinds."""
    inputs = [w for w in corpus_words if w not in asked and w.isalpha()][:n]
    if len(inputs) < n:
        raise SystemExit(f"the corpus has only {len(inputs)} usable words for {n} rule inputs")
    lines = []
    for i, word in enumerate(inputs):
        kind = i % 5
        lines.append(f"{word} =>")
        lines.append(["  SYNONYM: alternative", "  DELETE", "  UP(2): * year>=2000",
                      f"  PIN: {doc_ids[i % len(doc_ids)]}", f"  HIDE: {doc_ids[i % len(doc_ids)]}"][kind])
    return "\n".join(lines) + "\n"


def median_ms(values: list[float]) -> float:
    return statistics.median(values) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--beir", type=Path, default=REPO / "sample_data" / "xquad")
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    parsed = parse_path(args.beir)
    documents = [d for d in parsed.documents if not d.id.startswith("zh-")]
    parsed.documents[:] = documents
    queries = [t for q, t in parsed.queries.items() if not q.startswith("zh-")][: args.queries]
    asked = {t for q in queries for t in query_terms(q)}
    words = sorted({t for d in documents for t in query_terms(f"{d.title} {d.text}")})
    rules = rules_text(words, asked, [d.id for d in documents])
    assert len(parse_rules(rules)) == N_RULES
    store = Store(tempfile.mkdtemp(prefix="bench_rules_"))
    create_collection(store, "bench", parsed)
    plain = SearchConfig()
    ruled = plain.replace(rules=rules)
    loaded = parse_rules(rules)
    fired = sum(bool(loaded.matches(q)) for q in queries)

    cached = {"none": [], "1,000 rules": []}
    first = {"none": [], "1,000 rules": []}
    matching = []
    warm = Workbench(store)
    for query in queries:  # candidates cached and models loaded before any timing
        warm.search("bench", query, plain)
    for _ in range(args.rounds):
        for label, config in (("none", plain), ("1,000 rules", ruled)):
            fresh = Workbench(store)
            for query in queries:
                started = time.perf_counter()
                fresh.search("bench", query, config)
                first[label].append(time.perf_counter() - started)
            for query in queries:
                started = time.perf_counter()
                warm.search("bench", query, config)
                cached[label].append(time.perf_counter() - started)
        for query in queries:
            started = time.perf_counter()
            loaded.matches(query)
            matching.append(time.perf_counter() - started)

    rows = []
    for name, timings in (("search (cached candidates)", cached), ("search (first time)", first)):
        none, ruled_ms = median_ms(timings["none"]), median_ms(timings["1,000 rules"])
        rows.append({"row": name, "none_ms": round(none, 3), "rules_ms": round(ruled_ms, 3),
                     "overhead_pct": round((ruled_ms / none - 1) * 100, 1)})
    rows.append({"row": "rule matching alone", "none_ms": None, "rules_ms": round(median_ms(matching), 4),
                 "overhead_pct": None})
    summary = {"collection_docs": len(documents), "queries": len(queries), "rounds": args.rounds,
               "rules": N_RULES, "queries_a_rule_fires_on": fired, "rows": rows}
    if args.json:
        print(json.dumps(summary))
        return
    print(f"{len(documents)} documents, {len(queries)} queries × {args.rounds} rounds, {N_RULES} rules "
          f"(fire on {fired} of the queries); medians")
    print(f"{'':<28} {'no rules':>10} {'1,000 rules':>12} {'overhead':>9}")
    for row in rows:
        none = f"{row['none_ms']:.3f} ms" if row["none_ms"] is not None else "-"
        over = f"{row['overhead_pct']:+.1f} %" if row["overhead_pct"] is not None else "-"
        print(f"{row['row']:<28} {none:>10} {row['rules_ms']:>9.4f} ms {over:>9}")


if __name__ == "__main__":
    main()
