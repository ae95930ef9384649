"""The ranking plan: a `SearchConfig` compiled into the stages every ranking runs.

    candidates (per source, `depth` each) ──► query-dependent weights, language rule
    (`fused_config`) ──► per-source minimum raw score and normalisation (`prepare`) ──► fused
    scores (`scores`) ──► a learned ranker's scores, when the config names one ──► order (score,
    tie field, id) ──► minimum fused score, minimum display score (`eligible`) ──► rerank of the
    top-N (`reranked`) ──► top-K

Query rules (`config.rules`, `search.rules`): their rewrites and FILTERs change the candidates
(the `Retriever` searches each source's rewritten text); here UP/DOWN move the fused (or learned)
scores after they are computed, before the order (`rules.boosted_scores`), and PIN/HIDE act last,
after the rerank, before top-K (`rules.pinned_order`; the explained path: `SearchResult.final_ranking`).

A search runs it explained (`explain`: every result's per-source parts, what each threshold
removed), evaluation, the sweep and "why not?" run it lean (`first_stage`, `final_ids`: ids and
scores only); both are these same methods, so the four can only differ in what they are asked,
never in how they rank (tests/search/test_plan.py). An evaluation run is the plan of
`evaluation_config(config)`: no fused-score thresholds, top-K = depth.

The formulas come from the fusion method's registry entry (`fusion.methods.FUSION_METHODS`); the
fusion engine (`fusion.py`) computes them; this module decides their order.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import Any

from retrieval.limits import WEIGHT_MIN
from retrieval.search.config import SearchConfig
from retrieval.search.fusion.fuse import (
    ExplainedRanking,
    PreparedSource,
    explain,
    passes_thresholds,
    prepare_source,
    rank_ids,
    scores_from_prepared,
    top_norms,
)
from retrieval.search.fusion.methods import FusionMethod, method_of
from retrieval.search.language import language_rule
from retrieval.search.learned_ranker import LearnedRanker
from retrieval.search.query_features import QueryWeights, query_features
from retrieval.search.rerank import interpolated_order
from retrieval.search.rules import QueryRules, boosted_scores, parse_rules, pinned_order, query_rules
from retrieval.sources import source_params
from retrieval.types import FusedResult, FusionOutcome, RetrievalError, SourceResult

_NO_HITS = PreparedSource((), (), (), (), ())


def evaluation_config(config: SearchConfig) -> SearchConfig:
    """The config an evaluation judges: `config` with top-K = depth and no fused-score thresholds
    (a run is judged on a list as long as each source's), per-source minimums kept."""
    return dataclasses.replace(config, top_k=config.depth, min_score=None, min_display_score=None)


class RankingPlan:
    """`config` compiled once: its fusion method, and per query the config the fusion uses (the
    language rule's). Cheap to build; holds no candidates."""

    __slots__ = ("config", "learned", "members", "method", "query_weights", "rules")

    def __init__(self, config: SearchConfig, learned: LearnedRanker | None = None,
                 members: Callable[[tuple[str, ...]], frozenset[str]] | None = None):
        """`learned`: the model `config.ranker` names, loaded (`Workbench.plan` loads it).
        `members(filters)`: the ids of the collection passing every filter (text) of `filters`,
        what UP/DOWN and PIN rules need (`Workbench.plan` gives it); without it an UP/DOWN rule
        that fires is an error and a pin is not checked against the collection."""
        self.config = config
        self.rules = parse_rules(config.rules) if config.rules else None
        self.members = members
        self.method: FusionMethod = method_of(config)
        self.query_weights = QueryWeights.from_dict(config.query_weights) if config.query_weights else None
        if config.ranker and (learned is None or learned.model_id != config.ranker):
            raise RetrievalError(f"The config's learned ranker {config.ranker!r} is not loaded: rank it through "
                                 "the Workbench (Workbench.plan)")
        self.learned = learned if config.ranker else None

    # ---- per query ------------------------------------------------------------------------
    def fused_config(self, query: str, language: str | None, sources: Mapping[str, SourceResult] | None = None,
                     explained: bool = True) -> tuple[SearchConfig, str | None]:
        """The config the fusion uses for `query` on a collection in `language`, and the notes
        for its explanation: with query-dependent weights, the two sources' split for this query
        (`query_features.QueryWeights`, from the query and its candidates `sources`), then the
        language rule (`language.language_rule`: lexical sources weigh 0 across languages)."""
        config, notes = self.config, []
        if self.query_weights is not None:
            features = query_features(query, sources or {})
            model = self.query_weights
            total = config.weights[model.sources[0]] + config.weights[model.sources[1]]
            # a share under WEIGHT_MIN of the total is 0 (a weight must be 0 or ≥ WEIGHT_MIN)
            split = {s: share * total if share * total >= WEIGHT_MIN else 0.0
                     for s, share in zip(model.sources, model.shares(features), strict=True)}
            # applied: the fused config is this query's, with plain weights
            config = config.derived(weights={**config.weights, **split}, query_weights={})
            if explained:  # the lean paths never show it
                notes.append(model.explain(features))
        config, note = language_rule(config, query, language)
        if note:
            notes.append(note)
        return config, "; ".join(notes) or None

    def query_rules(self, query: str) -> QueryRules | None:
        """The config's rules that fire on `query` and what they do (`rules.query_rules`)."""
        return query_rules(self.rules, query)

    def boosted(self, scores: dict[str, float], rules: QueryRules | None, factor: float
                ) -> tuple[dict[str, float], dict[str, list[str]]]:
        """`scores` after the UP/DOWN rules of this query (`rules.boosted_scores`: + w / `factor`
        each, i.e. + w on the display score), and what each rule did per document."""
        if rules is None or not rules.boosts:
            return scores, {}
        if self.members is None:
            raise RetrievalError("UP/DOWN rules need the collection's metadata: rank through the Workbench "
                                 "(Workbench.plan)")
        unit = 1.0 / factor if factor > 0 and factor != float("inf") else 1.0
        return boosted_scores(scores, rules, unit, lambda flt: self.members((str(flt),)))

    def pinnable(self, rules: QueryRules) -> QueryRules:
        """`rules` with only the pins of documents that exist and pass the config's and the rules'
        filters (all of them when the plan has no `members`)."""
        if not rules.pins or self.members is None:
            return rules
        allowed = self.members(tuple(self.config.filters) + tuple(rules.filter_texts))
        return dataclasses.replace(rules, pins=tuple(p for p in rules.pins if p[1] in allowed))

    def prepare(self, sources: Mapping[str, SourceResult], fused: SearchConfig, explained: bool = False,
                memo: MutableMapping[tuple, PreparedSource] | None = None, memo_key: Any = None
                ) -> dict[str, PreparedSource]:
        """Each fused source's hits cut at `depth`, under its minimum raw score dropped, and
        normalised as the method prepares them (`explained`: normalised for every method, as a
        result shows them). `memo` keeps a preparation per (`memo_key`, source parameters,
        depth, minimum, normalisation) for a caller that fuses the same candidates many ways."""
        normalization = self.method.preparation(fused)
        normalizer = None if normalization is None and not explained else (
            lambda scores: self.method.normalize(scores, fused))
        how = (normalization, explained)  # what a memoised preparation depends on besides the hits
        prepared = {}
        for source in fused.weights:
            result = sources.get(source)
            if result is None:
                prepared[source] = _NO_HITS
                continue
            minimum = fused.min_raw.get(source)
            if memo is None:
                prepared[source] = prepare_source(result.hits[: fused.depth], minimum, normalizer)
                continue
            key = (memo_key, source_params(source, fused), fused.depth, minimum, how)
            entry = memo.get(key)
            if entry is None:
                entry = memo[key] = prepare_source(result.hits[: fused.depth], minimum, normalizer)
            prepared[source] = entry
        return prepared

    def scores(self, prepared: Mapping[str, PreparedSource], fused: SearchConfig) -> dict[str, float]:
        """Every kept candidate's fused score (`fusion.fuse.scores_from_prepared` with this method)."""
        return scores_from_prepared(prepared, fused, self.method)

    def display_factor(self, fused: SearchConfig, prepared: Mapping[str, PreparedSource]) -> float:
        """display score = fused score × this, for the query whose candidates are `prepared`
        (`FusionMethod.display_factor`: 1 / the score of a document every source ranks first)."""
        return self.method.display_factor(fused, None if self.method.by_rank else top_norms(prepared))

    def first_stage(self, sources: Mapping[str, SourceResult], query: str, language: str | None,
                    tie_values: Mapping[str, float] | None = None, limit: int | None = None,
                    memo: MutableMapping[tuple, PreparedSource] | None = None, memo_key: Any = None
                    ) -> tuple[list[str], dict[str, float]]:
        """The fused ranking's ids best first (every kept candidate, before the fused-score
        thresholds; at most `limit`) and every kept candidate's fused score."""
        ids, scores, _ = self._first_stage(sources, query, language, tie_values, limit, memo, memo_key)
        return ids, scores

    def _first_stage(self, sources, query, language, tie_values, limit, memo, memo_key
                     ) -> tuple[list[str], dict[str, float], float]:
        """`first_stage`, and the display factor of the query's candidates."""
        fused, _ = self.fused_config(query, language, sources, explained=False)
        prepared = self.prepare(sources, fused, memo=memo, memo_key=memo_key)
        scores = self.scores(prepared, fused)
        if self.learned is not None:  # the model's score orders; it is also what is shown
            scores = self.learned.scores(query, sources, prepared, scores)
            factor = 1.0
        else:
            factor = self.display_factor(fused, prepared)
        if self.rules is not None:
            scores = self.boosted(scores, self.query_rules(query), factor)[0]
        return rank_ids(scores, tie_values, limit), scores, factor

    def eligible(self, ranked_ids: Sequence[str], scores: Mapping[str, float], factor: float) -> list[str]:
        """The prefix of `ranked_ids` (best first) that passes the fused-score thresholds."""
        config = self.config
        if config.min_score is None and config.min_display_score is None:
            return list(ranked_ids)
        n = 0
        while n < len(ranked_ids) and passes_thresholds(scores[ranked_ids[n]], scores[ranked_ids[n]] * factor, config):
            n += 1
        return list(ranked_ids[:n])

    def reranked(self, eligible: Sequence[str], scores: Mapping[str, float], rerank_scores: Mapping[str, float]
                 ) -> list[str]:
        """`eligible` with its top-N reordered by `rerank.interpolated_order` (λ·minmax(fused) +
        (1 − λ)·minmax(rerank)) and the rest in fused order: the order a reranked search shows."""
        top_n = self.config.rerank_top_n
        head = list(eligible[:top_n])
        if head:  # a query without candidates has nothing to rerank
            order = interpolated_order([scores[d] for d in head], [rerank_scores[d] for d in head],
                                       self.config.rerank_lambda)[3]
            head = [head[i] for i in order]
        return head + list(eligible[top_n:])

    def final_ids(self, sources: Mapping[str, SourceResult], query: str, language: str | None,
                  tie_values: Mapping[str, float] | None = None,
                  rerank_scores: Callable[[list[str]], Mapping[str, float]] | None = None,
                  memo: MutableMapping[tuple, PreparedSource] | None = None, memo_key: Any = None) -> list[str]:
        """What the search shows, as ids: the first stage, the thresholds, the rerank of the top-N
        when the config reranks (`rerank_scores(head ids)` gives the reranker's scores), top-K."""
        config = self.config
        rules = self.query_rules(query) if self.rules is not None else None
        limit = None if config.min_score is not None or config.min_display_score is not None else (
            max(config.top_k, config.rerank_top_n) if config.rerank else config.top_k)
        if limit is not None and rules is not None:
            limit += len(rules.hides)  # hidden documents leave the list after the cut
        ids, scores, factor = self._first_stage(sources, query, language, tie_values, limit, memo, memo_key)
        if config.min_score is not None or config.min_display_score is not None:
            ids = self.eligible(ids, scores, factor)
        if config.rerank:
            head = ids[: config.rerank_top_n]
            ids = self.reranked(ids, scores, rerank_scores(head) if head else {})
        if rules is not None and (rules.pins or rules.hides):
            ids = pinned_order(ids, self.pinnable(rules))[0]
        return ids[: config.top_k]

    def explain(self, sources: Mapping[str, SourceResult], query: str, language: str | None,
                tie_values: Mapping[str, float] | None = None) -> FusionOutcome:
        """The fusion explained (`fusion.fuse.explain`): the same preparation, scores and order as
        `first_stage`, with every result's per-source parts; the language rule's note first."""
        tie_values = tie_values or {}
        fused, note = self.fused_config(query, language, sources)
        prepared = self.prepare(sources, fused, explained=True)
        scores = self.scores(prepared, fused)
        rules = self.query_rules(query) if self.rules is not None else None
        if self.learned is not None:
            outcome = self._explain_learned(sources, query, fused, prepared, scores, tie_values, rules)
        else:
            factor = self.display_factor(fused, prepared)
            boosted, effects = self.boosted(scores, rules, factor)
            order = rank_ids(boosted, tie_values)
            outcome = explain(sources, fused, prepared, boosted, order, tie_values, factor)  # thresholds: boosted
            if effects:  # each result's parts are the fusion's; the rules' boost is added to its score
                plain = explain(sources, fused, prepared, scores, order, tie_values, factor).ranked

                def boosted_result(rank: int, doc_id: str) -> FusedResult:
                    return dataclasses.replace(plain[rank - 1], score=boosted[doc_id],
                                               display_score=boosted[doc_id] * factor,
                                               rules=tuple(effects.get(doc_id, ())))

                outcome.ranked = ExplainedRanking(order, boosted_result)
                outcome.results = outcome.ranked[: len(outcome.results)]
        if rules is not None:
            outcome.notes[:0] = rules.notes()
        if note:
            outcome.notes.insert(0, note)
        return outcome

    def _explain_learned(self, sources, query, fused, prepared, scores, tie_values,
                         rules: QueryRules | None = None) -> FusionOutcome:
        """The fusion explained in the learned ranker's order: each result's score (and display
        score) is the model's, its `learned` the features' contributions (TreeSHAP, adding up to
        it), its per-source parts the fusion's, whose fused score is the feature 'fused'."""
        learned = self.learned.scores(query, sources, prepared, scores)  # the lean path's scores, to the bit
        parts = self.learned.contributions(query, sources, prepared, scores)
        learned, effects = self.boosted(learned, rules, 1.0)
        order = rank_ids(learned, tie_values)
        outcome = explain(sources, fused, prepared, scores, order, tie_values, 1.0)

        def relabel(result: FusedResult) -> FusedResult:
            return dataclasses.replace(result, score=learned[result.doc_id], display_score=learned[result.doc_id],
                                       learned=parts[result.doc_id], rules=tuple(effects.get(result.doc_id, ())))

        fused_ranking = outcome.ranked
        outcome.ranked = ExplainedRanking(order, lambda rank, _doc_id: relabel(fused_ranking[rank - 1]))
        outcome.results = outcome.ranked[: len(outcome.results)]
        outcome.notes.append(f"learned ranker {self.learned.model_id}: the order is the model's score over "
                             f"{len(self.learned.names)} features (each result lists what each added)")
        return outcome


def fuse(candidates: Mapping[str, SourceResult], config: SearchConfig,
         tie_values: Mapping[str, float] | None = None) -> FusionOutcome:
    """`config`'s fusion of `candidates`, explained, with no language rule (no query): the plan's
    `explain`."""
    return RankingPlan(config).explain(candidates, "", None, tie_values)


def fused_order(candidates: Mapping[str, SourceResult], config: SearchConfig,
                tie_values: Mapping[str, float] | None = None, limit: int | None = None) -> list[str]:
    """The ids of `fuse(candidates, config, tie_values).ranked`, at most `limit`: the plan's
    `first_stage`, no explanation built."""
    return RankingPlan(config).first_stage(candidates, "", None, tie_values, limit)[0]


def fused_scores(candidates: Mapping[str, SourceResult], config: SearchConfig) -> dict[str, float]:
    """Every kept candidate's fused score, as `fuse` computes it."""
    return RankingPlan(config).first_stage(candidates, "", None)[1]
