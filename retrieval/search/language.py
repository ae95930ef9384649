"""Language-aware fusion: a query in one script over a collection in another.

Sources that match the query's words literally (`SourceSpec.lexical`: BM25, the keyword scorer)
find nothing meaningful when a Chinese question meets English paragraphs, or the reverse: their
candidates are noise, and RRF still mixes that noise in (measured on XQuAD: the English-question /
Chinese-paragraph hybrid loses 0.07 nDCG@10 to the dense source alone; docs/experiments/
cross-lingual.md). So when the query's language differs from the collection's and the config is
`language_aware`, those sources' weights drop to 0 for the fusion (they are still retrieved and
shown), and the explanation says so.

Languages are told apart by script only (`tokenize.document_language`: Han vs Latin), which is
what decides whether literal matching can work at all. A 'mixed' collection is never crossed.
"""

from __future__ import annotations

import dataclasses

from retrieval.search.config import SearchConfig
from retrieval.sources import SOURCES, label
from retrieval.text.tokenize import LANGUAGE_NAMES, crosses_languages, document_language

__all__ = ["LANGUAGE_NAMES", "crosses_languages", "language_rule", "lexical_sources", "query_language"]


def query_language(query: str) -> str:
    """'zh' or 'en', by the rule documents are labelled with (`tokenize.document_language`)."""
    return document_language(query)


def lexical_sources(config: SearchConfig) -> list[str]:
    """The config's sources with a weight > 0 that match words literally."""
    return [name for name, weight in config.weights.items()
            if weight > 0 and name in SOURCES and SOURCES[name].lexical]


def language_rule(config: SearchConfig, query: str, collection_language: str | None
                  ) -> tuple[SearchConfig, str | None]:
    """The config the fusion uses, and the explanation's note (None: nothing to say).

    Across languages, with `config.language_aware`, every lexical source leaves the fusion's
    weights (weight 0 leaves a source out, like the sweep's weight-0 variants) unless that would
    leave no source at all. Without `language_aware` the config is kept and the note still marks
    the query as crossing languages.
    """
    if not crosses_languages(query, collection_language):
        return config, None
    query_name = LANGUAGE_NAMES[query_language(query)]
    collection_name = LANGUAGE_NAMES[collection_language]
    crossing = f"query looks {query_name}, collection is {collection_name}"
    lexical = lexical_sources(config)
    if not lexical:
        return config, f"{crossing}: no word-matching source is weighted, so nothing changes"
    names = " and ".join(label(name) for name in lexical)
    if not config.language_aware:
        return config, (f"{crossing}: {names} can match no words across languages, but language-aware "
                        "fusion is off, so it still counts")
    kept = {name: weight for name, weight in config.weights.items() if name not in lexical}
    if not any(weight > 0 for weight in kept.values()):
        return config, f"{crossing}: {names} is the only weighted source, so it is kept"
    was = ", ".join(f"{label(name)} {config.weights[name]:g}" for name in lexical)
    return dataclasses.replace(config, weights=kept), (
        f"{crossing}: weight of {was} → 0 (language-aware fusion: words cannot match across "
        "languages; switch it off to count them)")
