"""PBM by EM: exact on a log where position cannot matter; on simulated position-based users it
recovers the examination curve and the relevance better than raw CTR (stated tolerances)."""

import numpy as np
import pytest
from scipy.stats import kendalltau

from retrieval.judging.implicit.coec import ctr_scores, position_ctr
from retrieval.judging.implicit.counts import ClickCounts
from retrieval.judging.implicit.logs import ClickEvent
from retrieval.judging.implicit.pbm import fit_pbm
from retrieval.judging.implicit.simulate import attractiveness, examination_curve, simulate

# 5 queries × 10 documents, grades 0–3 (seeded); 2000 sessions of PBM users (γ_r = 1/(r+1)), noise
# ε = 0.05, a fixed ranker error N(0, 2²) and a per-session jitter N(0, 1): about a second in all.
RELEVANCE = {f"q{i}": {f"d{j}": int(g) for j, g in enumerate(row)}
             for i, row in enumerate(np.random.default_rng(1).integers(0, 4, (5, 10)))}
GAMMA_TOLERANCE = 0.06  # |γ̂_r − γ_r| at every position
ALPHA_TOLERANCE = 0.08  # mean |α̂ − α(g)| over the pairs


def test_one_position_gives_ctr():
    # Every document at position 0: γ_0 = 1 after scaling and α is the CTR (to EM's stopping point).
    events = [ClickEvent(f"s{i}", "q", doc, 0, "impression") for i, doc in enumerate("aaaabb")]
    events += [ClickEvent("s0", "q", "a", 0, "click"), ClickEvent("s4", "q", "b", 0, "click")]
    alpha, gamma = fit_pbm(ClickCounts().add_all(events))
    assert gamma == {0: 1.0}
    assert alpha["q", "a"] == pytest.approx(0.25, abs=1e-5) and alpha["q", "b"] == pytest.approx(0.5, abs=1e-5)


@pytest.fixture(scope="module")
def simulated():
    counts = ClickCounts().add_all(simulate(RELEVANCE, 2000, user="pbm", ranker_noise=2.0, seed=3))
    return counts, fit_pbm(counts)


def test_recovers_the_examination_curve_better_than_ctr(simulated):
    counts, (_, gamma) = simulated
    true = examination_curve(10)
    pbm_error = max(abs(gamma[r] - true[r]) for r in range(10))
    ctr = position_ctr(counts)
    ctr_error = max(abs(ctr[r] / ctr[0] - true[r]) for r in range(10))  # raw CTR, scaled to 1 at the top
    assert pbm_error <= GAMMA_TOLERANCE
    assert ctr_error >= 2 * pbm_error


def test_recovers_relevance_better_than_ctr(simulated):
    counts, (alpha, _) = simulated
    ctr = ctr_scores(counts)

    def mean_tau(scores):
        return np.mean([kendalltau(list(docs.values()), [scores[q, d] for d in docs]).statistic
                        for q, docs in RELEVANCE.items()])

    assert mean_tau(alpha) >= mean_tau(ctr) + 0.05
    pairs = [(q, d, g) for q, docs in RELEVANCE.items() for d, g in docs.items()]
    assert np.mean([abs(alpha[q, d] - attractiveness(g)) for q, d, g in pairs]) <= ALPHA_TOLERANCE
    assert np.mean([abs(ctr[q, d] - attractiveness(g)) for q, d, g in pairs]) > 2 * ALPHA_TOLERANCE
