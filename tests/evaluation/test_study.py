"""The optimiser's search space (retrieval/evaluation/study.py): its parameters give the base config back,
the base's own per-source minimums included."""

from retrieval.evaluation.study import SearchSpace
from retrieval.search.config import SearchConfig


def test_the_space_gives_the_base_config_back():
    for base in (SearchConfig(), SearchConfig(fusion="rrf", rrf_k=60, weights={"bm25": 1, "dense": 3}, depth=50),
                 SearchConfig(fusion="dbsf", weights={"bm25": 0.5, "dense": 0.5})):
        space = SearchSpace.of(base)
        config = space.config(space.params_of(base), lambda source, q: 0.0)
        expected = SearchConfig.from_dict({**base.to_dict(), "weights": {
            s: round(w / sum(base.weights.values()), 4) for s, w in base.weights.items()}})
        assert config == expected


def test_the_first_trial_is_the_base_config_with_its_minimums():
    base = SearchConfig(min_raw={"bm25": 1.5}, weights={"bm25": 1.0, "dense": 3.0}, depth=40)
    space = SearchSpace.of(base)
    config = space.config(space.params_of(base), lambda source, q: 99.0)
    assert config == SearchConfig.from_dict({**base.to_dict(), "weights": {"bm25": 0.25, "dense": 0.75}})
    raised = space.config({**space.params_of(base), "min_q.dense": 0.3}, lambda source, q: 0.61)
    assert raised.min_raw == {"bm25": 1.5, "dense": 0.61}
