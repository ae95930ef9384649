"""What each `SearchConfig` parameter does, in one place: the label and help of every plain field
(`FIELD_HELP`: the Search page's tooltips, `ui/search/knobs.py`) and, from the source
descriptors (`retrieval.sources`: weights, minimum scores, source parameters) and the fusion
registry (`fusion/methods.py`), the rest; `describe_parameters(config)` lists them all with a
config's values (the MCP server's `describe_config`).
"""

from __future__ import annotations

from typing import Any

from retrieval.search.config import SearchConfig
from retrieval.search.fusion.methods import COMBINATIONS, display_help, method_of, methods_help
from retrieval.sources import SOURCES, label

# field -> (label, help). The fusion method's own parameters (rrf_k, normalization, combination)
# are greyed out on the page when the method does not read them (`FusionMethod.uses`).
FIELD_HELP: dict[str, tuple[str, str]] = {
    "fusion": ("Fusion method", "How the ranked lists become one score. " + methods_help()),
    "rrf_k": ("RRF k",
              "RRF only: each source adds w/(k + rank). A small k makes rank 1 worth far more than rank 10 "
              "(k=1: 1/2 vs 1/11); a large k flattens the curve (k=60: 1/61 vs 1/70), which squeezes raw "
              "fused scores into 0.014–0.016. The display score rescales by (k + 1)/Σw so rank 1 everywhere reads "
              "1.0. Greyed out for a method that does not use k."),
    "normalization": ("Score normalisation",
                      "Weighted sum: puts each source's raw scores on one scale before weighting, over this "
                      "query's candidates. min-max: (x − min)/(max − min) in [0, 1]; z-score: (x − mean)/std; none: "
                      "raw values (BM25's 0–30 would swamp cosine's 0–1). Greyed out for a fusion method that does "
                      "not use it (one that ranks, or normalises in its own way: see the fusion method's help)."),
    "combination": ("Combination",
                    "Weighted sum only: how the weighted, normalised scores combine. "
                    + " ".join(c.help for c in COMBINATIONS.values())
                    + " Harmonic and geometric leave out a source whose normalised score is 0 or missing for that "
                      "document."),
    "min_display_score": ("Minimum fused score (display scale)",
                          "Cuts results whose display score is below this (0 = off); ranks above the cut do not "
                          "change. The display score is the fused score as a share of the best possible for this "
                          "query, a document every source ranks first: " + display_help() + ". So 1.0 is the best "
                          "possible result and 0.5 keeps results with at least half of its fused score."),
    "top_k": ("Top-K results", "How many fused results are shown, after the thresholds. Cuts the tail only: no score "
                               "changes."),
    "depth": ("Candidate depth (per source)",
              "How many candidates each source retrieves. A document outside a source's depth adds 0 from that "
              "source, and normalisation is computed over these candidates. Retrieved once per query and cached: "
              "lowering it reuses the cache, raising it retrieves again."),
    "language_aware": ("Language-aware fusion",
                       "When the query's script differs from the collection's (Chinese question, English documents "
                       "or the reverse), word-matching sources (BM25, keyword) cannot match anything real, so their "
                       "weight drops to 0 for the fusion; they are still retrieved and shown, and the explanation "
                       "says so. Off: they count."),
    "rerank": ("Rerank", "Re-scores the first top-N fused results with a second model and reorders them by "
                         "final = λ·norm(fused) + (1 − λ)·norm(rerank); fused scores stay as they were and are still "
                         "shown."),
    "rerank_top_n": ("Rerank top-N", "How many of the best fused results the reranker re-scores; results below them "
                                     "keep their fused order (marked 'not reranked')."),
    "rerank_lambda": ("Rerank interpolation λ",
                      "final = λ·norm(fused) + (1 − λ)·norm(rerank), both min-max over the reranked top-N: 0 replaces "
                      "the fused order by the reranker's, 1 keeps the fused order. Only reorders: no new retrieval."),
    "min_score": ("Minimum fused score (raw scale)",
                  "Cuts results whose fused score, before display rescaling, is below this; empty = off. RRF scores "
                  "are at most Σw/(k + 1), e.g. 0.0164 at k = 60."),
    "bm25_backend": ("BM25 backend",
                     "Which BM25 implementation scores the text: auto (rank_bm25 below the scale threshold, "
                     "WORKBENCH_SCALE_DOCS, default 50,000 documents; the native index from there on), rank_bm25 in "
                     "memory with the k1 and b below, or LanceDB's native full-text index (its own fixed k1 = 1.2, "
                     "b = 0.75, milliseconds at a million documents). Retrieves BM25 candidates again."),
    "reranker": ("Reranker",
                 "'e5' re-scores with multilingual-e5-small (offline); or a CrossEncoder folder inside a folder the "
                 "server allows (WORKBENCH_MODEL_DIRS). Changes only the rerank score and the reranked order."),
    "rules": ("Query rules",
              "Querqy's common rules (SYNONYM, UP/DOWN, FILTER, DELETE) plus PIN and HIDE, one input per rule: "
              "synonyms and deletes change what the word-matching sources search, filters join the metadata "
              "filters, UP/DOWN add to the fused score, pins and hides act last (docs/guide/rules.md)."),
    "graph_focus": ("Focus topics", "Comma-separated topics or tags a user cares about; a chunk whose topics or tags "
                                    "include one gets a higher preference score."),
}


def describe_parameters(config: SearchConfig) -> list[dict[str, Any]]:
    """Every parameter of `config`: name (a field, or `weights.SOURCE`, `min_raw.SOURCE`, a source
    parameter's path), label, help, value, `used` (False where the fusion method or the sources
    fused leave it without effect) and, for a slider, its range."""
    method = method_of(config)
    out: list[dict[str, Any]] = []
    for name, (shown, text) in FIELD_HELP.items():
        used = method.uses(name) if name in ("rrf_k", "normalization", "combination") else True
        if name in ("rerank_top_n", "rerank_lambda", "reranker"):
            used = config.rerank
        if name == "graph_focus":
            used = "graph" in config.sources
        out.append({"name": name, "label": shown, "help": text, "value": getattr(config, name), "used": used})
    for source, spec in SOURCES.items():
        out.append({"name": f"weights.{source}", "label": f"{label(source)} weight", "help": spec.weight_help,
                    "value": config.weights.get(source, 0.0), "used": source in config.sources})
        params = ([spec.min_raw] if spec.min_raw is not None else []) + list(spec.params)
        for param in params:
            is_minimum = param is spec.min_raw
            if is_minimum:
                name, value = f"min_raw.{source}", config.min_raw.get(source)
            elif param.group:
                name, value = param.path, getattr(config, param.group).get(param.key, param.default)
            else:
                name, value = param.path, getattr(config, param.key)
            out.append({"name": name, "label": param.label, "help": param.help, "value": value,
                        "used": source in config.sources, "range": [param.low, param.high]})
    return out
