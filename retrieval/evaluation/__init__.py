"""Evaluation: how good a config is on judged queries, and whether a difference is real.

    evaluate.py       runs from cached candidates, scored per query and on average
    metrics.py        the metrics, vectorised over queries (trec_eval's definitions, ranx's values)
    beir_cache.py     a BEIR folder ingested once into a cache collection, reused after
    candidates.py     candidates fetched once per query, any config's ranking run on them
    sweep.py          a grid of fusion variants judged on one query set, retrieval done once
    study.py          one optimiser study: search space, TPE trials or a LambdaMART model
    optimize.py       the optimiser: studies cross-validated over query folds (k-fold)
    abtest.py         A/B of two runs with a paired significance test
    paired.py         paired statistics: randomization test, t-test, bootstrap intervals
    trust.py          how far a metric holds when judgments have holes (judged@k, nDCG', bpref)
    compare.py        two rankings side by side: rank changes, overlap@k, rank-biased overlap
    snapshots.py      named, immutable records of one evaluation (`SnapshotStore`)
    snapshot_diff.py  two snapshots' per-query diff, with each cause's Shapley share of Δ
    snapshot_report.py  a diff as one self-contained HTML file
    judging_queue.py  the Judge page's queue: each config's rankings pooled by `judge_next`

Entry points: `evaluate_collection`, `QrelsEvaluator`, `run_sweep`, `SnapshotStore`, `diff`.
"""

from retrieval.evaluation.evaluate import QrelsEvaluator, evaluate_collection
from retrieval.evaluation.snapshot_diff import diff
from retrieval.evaluation.snapshots import SnapshotStore
from retrieval.evaluation.sweep import run_sweep

__all__ = ["QrelsEvaluator", "SnapshotStore", "diff", "evaluate_collection", "run_sweep"]
