"""Fusion: how several sources' scores become one ranking.

    methods.py    the registry of fusion methods (RRF, weighted sum, DBSF) and combinations:
                  formulas, display factors, parameters, help, labels, sweep points
    normalize.py  score normalisation (min-max, z-score, …)
    fuse.py       the engine the plan calls: prepared sources, fused scores, thresholds, and each
                  result's explanation (`ExplainedRanking`)

A new fusion method is one entry of `methods.FUSION_METHODS`; nothing else compares method names
(tests/test_architecture.py).
"""

from retrieval.search.fusion.methods import COMBINATIONS, FUSION_METHODS, method_of

__all__ = ["COMBINATIONS", "FUSION_METHODS", "method_of"]
