"""Suggested query rules on a judged set: in-sample gains on the queries each touches, and whether
synonym gains hold on held-out folds. Prints a table (or --json).

Run: .venv/bin/python benchmarks/rules_evidence.py ../shared/eval/nfcorpus [--weights bm25=1] [--folds 3]
     [--limit 10] [--json]

The BEIR folder is ingested once into a cache collection (as `evaluate` does). `rules suggest`'s
suggestions (`rule_tuning.suggest_rules`) on every judged query, then `rule_tuning.held_out`:
synonyms chosen on k − 1 folds, measured on the queries of the fold left out that they fire on.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from retrieval.evaluation.beir_cache import ensure_beir_collection
from retrieval.rule_tuning.suggest import held_out, suggest_rules
from retrieval.search.config import SearchConfig, parse_weights
from retrieval.search.workbench import Workbench
from retrieval.store import Store


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("beir", type=Path)
    parser.add_argument("--db", default=None)
    parser.add_argument("--weights", default="bm25=1")
    parser.add_argument("--metric", default="ndcg@10")
    parser.add_argument("--folds", type=int, default=3)
    parser.add_argument("--limit", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    store = Store(args.db) if args.db else Store()
    name, corpus = ensure_beir_collection(store, args.beir, log=lambda m: print(m, file=sys.stderr))
    wb = Workbench(store)
    config = SearchConfig(weights=parse_weights(args.weights))
    suggestions = suggest_rules(wb, name, corpus.queries, corpus.qrels, config, args.metric, limit=args.limit)
    folds = held_out(wb, name, corpus.queries, corpus.qrels, config, args.metric, folds=args.folds,
                     limit=args.limit)
    if args.json:
        print(json.dumps({"suggestions": [s.to_json_dict() for s in suggestions], "held_out": folds}))
        return
    print(f"{args.beir.name}, weights {args.weights}, {args.metric}: suggestions on all judged queries (in-sample)")
    for s in suggestions:
        rule = s.text.strip().replace("\n  ", " ⏎ ")
        print(f"  {s.delta:+.4f} on {len(s.touched):>3} queries ({s.before:.4f} → {s.after:.4f})  {rule}")
    print(f"held out ({args.folds} folds): synonyms chosen on the other folds, measured on the fold left out")
    measured = [f for f in folds if f["test_delta"] is not None]
    for f in folds:
        rule = f["rule"].strip().replace("\n  ", " ⏎ ")
        test = "fires on no held-out query" if f["test_delta"] is None else (
            f"{f['test_delta']:+.4f} on {f['test_touched']:>3} held-out")
        print(f"  fold {f['fold']}: train {f['train_delta']:+.4f} on {f['train_touched']:>3}; {test}  {rule}")
    if measured:
        touched = sum(f["test_touched"] for f in measured)
        gain = sum(f["test_delta"] * f["test_touched"] for f in measured) / touched
        better = sum(f["test_delta"] > 0 for f in measured)
        print(f"held-out: {better} of {len(measured)} measured rules raise the metric; mean Δ per touched "
              f"query {gain:+.4f} over {touched} (query, rule) pairs")


if __name__ == "__main__":
    main()
