"""Seed 000's field-weighted keyword scorer over structured records, with tunable points.

Query: lowercased, split on whitespace into distinct terms (first-seen order). A text *matches*
(`contains_term`) when any term is a substring of the lowercased text, or the whole lowercased
query is: OR logic and substring matching, so "employ" matches "Employment", "chin" matches
"machine" as well as "China", and "job" never matches "employment" (no synonyms, no stemming).
An empty query matches nothing.

Points per record, P = `config.keyword` (seed defaults in brackets):

    name      P.name_exact   [10] if the whole query is a substring of an English or Chinese name,
              elif any term matches a name: P.name_partial [5]
    description   P.description  [3]  once, if any description (en or zh) matches
    tags          P.tag          [2]  × number of matching tags
    domains       P.domain       [2]  × number of matching coverage domains
    organisation  P.organization [2]  if the organisation's name matches
    content       P.content      [1]  × number of matching data-content items (en and zh)

    score = the sum; quality = mean of the record's quality dimensions (`records.record_quality`).

A record is returned when score ≥ P.min_relevance [5] and at least one field matched (so a
threshold of 0 does not return every record); the ranking is score descending, then quality
descending (a record without quality after those with one), then id; at most
min(P.limit [10], depth) hits. Each hit's `detail` gives every field's points and what matched,
e.g. {"name": "+5 (partial: china)", "tags": "+4 (unemployment, china)", "domains": "0",
"quality": 4.2}; matched items are shown lowercased, as they were compared, cut to 40 characters.

Documents that are not catalogue records (a CSV of articles, a Markdown chunk …) are mapped onto
the same fields, so the source works on any collection: name ← title, description ← text,
tags ← metadata "tags" (a list, or a comma-separated string), domains ← metadata "domains" or
"category", organisation ← metadata "organization" or "source" (a string), content items ← the
text's sentences (so a paragraph without a title can still reach the default minimum of 5: its
description 3 plus one point per matching sentence), quality ← a numeric metadata "quality".

`build` reads the records once per collection version into memory (from the stored `metadata`,
`title` and `text` columns); the points are only applied at search time, so a slider move
re-scores in memory without reading the table again.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from retrieval.sources.base import Derives, LoadContext, Param, SourceSpec
from retrieval.text.records import (
    is_catalogue_record,
    record_contents,
    record_descriptions,
    record_domains,
    record_names,
    record_organization,
    record_quality,
    record_tags,
)
from retrieval.types import Hit

if TYPE_CHECKING:
    from retrieval.search.config import SearchConfig

FIELDS = ("name", "description", "tags", "domains", "organization", "content")

_FIELD_HELP = "Points a record gets when a query term (lowercased, split on spaces) is a substring of "
# Seed 000's field points, its minimum relevance and its result limit (1–50).
PARAMS: tuple[Param, ...] = (
    Param("keyword.name_exact", "Name: whole query", "Points when the whole lowercased query is a substring of "
          "the record's English or Chinese name (default 10).", 0, 30, 1, default=10.0),
    Param("keyword.name_partial", "Name: any term", _FIELD_HELP + "the name, when the whole query is not "
          "(default 5).", 0, 30, 1, default=5.0),
    Param("keyword.description", "Description", _FIELD_HELP + "the English or Chinese description (once per "
          "record; default 3).", 0, 20, 1, default=3.0),
    Param("keyword.tag", "Each tag", _FIELD_HELP + "a tag, for every matching tag (default 2).",
          0, 10, 0.5, default=2.0),
    Param("keyword.domain", "Each domain", _FIELD_HELP + "a coverage domain, for every matching domain "
          "(default 2).", 0, 10, 0.5, default=2.0),
    Param("keyword.organization", "Organisation", _FIELD_HELP + "the organisation's name (default 2).",
          0, 10, 0.5, default=2.0),
    Param("keyword.content", "Each content item", _FIELD_HELP + "a data-content item, for every matching item "
          "(default 1).", 0, 5, 0.5, default=1.0),
    Param("keyword.min_relevance", "Minimum relevance", "Records scoring fewer points are not returned by the "
          "keyword source at all (default 5).", 0, 30, 0.5, default=5.0),
    Param("keyword.limit", "Result limit", "How many records the keyword source returns, best first "
          "(1–50, default 10); ties are broken by the mean quality score.", 1, 50, 1, default=10.0),
)
KEYWORD_DEFAULTS: dict[str, float] = {p.key: p.default for p in PARAMS}
PARAM_ORDER = tuple(KEYWORD_DEFAULTS)


def key(config: SearchConfig) -> tuple:
    """The points, threshold and limit, in `KEYWORD_DEFAULTS` order: they decide the candidates."""
    return tuple(config.keyword[name] for name in PARAM_ORDER)


def build(records: list[KeywordFields], config: SearchConfig) -> KeywordSource:
    return KeywordSource(records, config.keyword)


# ---- query and matching ----------------------------------------------------------------------
@dataclass(frozen=True)
class KeywordQuery:
    whole: str  # the lowercased query, surrounding whitespace removed
    terms: tuple[str, ...]  # its distinct whitespace-separated terms, first-seen order


def parse_query(query: str) -> KeywordQuery:
    """Lowercase, split on whitespace, drop repeated terms: "China  china GDP" -> (china, gdp)."""
    lowered = query.lower().strip()
    return KeywordQuery(lowered, tuple(dict.fromkeys(lowered.split())))


def matched_terms(text: str, query: KeywordQuery) -> tuple[str, ...]:
    """The query terms that are substrings of `text` (already lowercased); the whole query when
    it is a substring and no term is (never for a non-empty query, kept for the seed's rule)."""
    if not query.terms:
        return ()
    found = tuple(term for term in query.terms if term in text)
    return found or ((query.whole,) if query.whole in text else ())


def contains_term(text: str, query: KeywordQuery) -> bool:
    """Any term of the query, or the whole query, is a substring of `text` (lowercased)."""
    return bool(matched_terms(text, query))


# ---- records as fields -----------------------------------------------------------------------
@dataclass(frozen=True)
class KeywordFields:
    """What the scorer compares, every string lowercased once at load."""

    doc_id: str
    names: tuple[str, ...] = ()
    descriptions: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    domains: tuple[str, ...] = ()
    organization: str = ""
    contents: tuple[str, ...] = ()
    quality: float | None = None


def _lowered(values) -> tuple[str, ...]:
    return tuple(v.lower() for v in values)


def catalogue_fields(doc_id: str, record: dict) -> KeywordFields:
    """A catalogue record's fields (shape in `retrieval.text.records`)."""
    return KeywordFields(
        doc_id=doc_id, names=_lowered(record_names(record)), descriptions=_lowered(record_descriptions(record)),
        tags=_lowered(record_tags(record)), domains=_lowered(record_domains(record)),
        organization=record_organization(record).lower(), contents=_lowered(record_contents(record)),
        quality=record_quality(record),
    )


def _metadata_list(value: Any) -> tuple[str, ...]:
    """A metadata list of strings, or a comma-separated string, as stripped items."""
    items = value.split(",") if isinstance(value, str) else value if isinstance(value, list) else []
    return tuple(item.strip() for item in items if isinstance(item, str) and item.strip())


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|(?<=[。！？；;])|\n+")


def sentences(text: str) -> tuple[str, ...]:
    """The text cut after . ! ? (before whitespace), after 。！？；; and at line breaks."""
    return tuple(part.strip() for part in _SENTENCE_END.split(text) if part.strip())


def document_fields(doc_id: str, title: str, text: str, metadata: dict) -> KeywordFields:
    """Any other document mapped onto the record fields (see the module doc)."""
    organization = next((metadata[k] for k in ("organization", "source") if isinstance(metadata.get(k), str)), "")
    domains = _metadata_list(metadata.get("domains")) or _metadata_list(metadata.get("category"))
    return KeywordFields(
        doc_id=doc_id, names=_lowered([title] if title.strip() else []), descriptions=_lowered([text] if text else []),
        tags=_lowered(_metadata_list(metadata.get("tags"))), domains=_lowered(domains),
        organization=organization.strip().lower(), contents=_lowered(sentences(text)),
        quality=record_quality({"quality": metadata.get("quality")}),
    )


def row_fields(doc_id: str, title: str | None, text: str | None, metadata: dict) -> KeywordFields:
    """A stored row's fields: a catalogue record's own, else the mapping of `document_fields`."""
    if is_catalogue_record(metadata):
        return catalogue_fields(doc_id, metadata)
    return document_fields(doc_id, title or "", text or "", metadata)


# ---- scoring ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class KeywordScore:
    doc_id: str
    total: float
    points: dict[str, float]  # field -> points, for every field of `FIELDS`
    matched: dict[str, tuple[str, ...]]  # field -> what matched (terms, or the matching items)
    name_match: str  # "exact", "partial" or ""
    quality: float | None

    def detail(self) -> dict[str, Any]:
        """JSON-friendly explanation: "+5 (partial: china)", "+4 (unemployment, china)", "0" …"""
        out: dict[str, Any] = {}
        for name in FIELDS:
            matched = self.matched[name]
            if not matched:
                out[name] = "0"
                continue
            what = ", ".join(_shortened(item) for item in matched)
            if name == "name":
                what = f"{self.name_match}: {what}"
            out[name] = f"+{self.points[name]:g} ({what})"
        out["quality"] = None if self.quality is None else round(self.quality, 4)
        return out


def _shortened(item: str, width: int = 40) -> str:
    """A matched item as shown: long ones (a document's sentences) cut to `width` characters."""
    return item if len(item) <= width else item[: width - 1].rstrip() + "…"


def _matching_items(items: tuple[str, ...], query: KeywordQuery) -> tuple[str, ...]:
    return tuple(item for item in items if contains_term(item, query))


def _terms_in_any(texts: tuple[str, ...], query: KeywordQuery) -> tuple[str, ...]:
    """Distinct terms matched in any of `texts`, first-seen order."""
    return tuple(dict.fromkeys(term for text in texts for term in matched_terms(text, query)))


def score_fields(fields: KeywordFields, query: KeywordQuery, points: dict[str, float]) -> KeywordScore:
    """The module doc's points for one record: name exact or (elif) partial, description once,
    each tag, each domain, organisation once, each content item."""
    exact = tuple(query.whole for name in fields.names if query.terms and query.whole in name)[:1]
    partial = () if exact else _terms_in_any(fields.names, query)
    matched = {
        "name": exact or partial,
        "description": _terms_in_any(fields.descriptions, query),
        "tags": _matching_items(fields.tags, query),
        "domains": _matching_items(fields.domains, query),
        "organization": matched_terms(fields.organization, query),
        "content": _matching_items(fields.contents, query),
    }
    earned = {
        "name": points["name_exact"] if exact else points["name_partial"] if partial else 0.0,
        "description": points["description"] if matched["description"] else 0.0,
        "tags": points["tag"] * len(matched["tags"]),
        "domains": points["domain"] * len(matched["domains"]),
        "organization": points["organization"] if matched["organization"] else 0.0,
        "content": points["content"] * len(matched["content"]),
    }
    name_match = "exact" if exact else "partial" if partial else ""
    return KeywordScore(fields.doc_id, sum(earned.values()), earned, matched, name_match, fields.quality)


def rank_key(score: KeywordScore) -> tuple:
    """Score descending, then quality descending (none last), then id."""
    no_quality = score.quality is None
    return (-score.total, no_quality, -(score.quality or 0.0), score.doc_id)


def rank_records(records: list[KeywordFields], query: str, points: dict[str, float], depth: int) -> list[KeywordScore]:
    """Every record scoring ≥ min_relevance with at least one match, ranked by `rank_key`, cut
    at min(limit, depth)."""
    parsed = parse_query(query)
    if not parsed.terms:
        return []
    scored = (score_fields(fields, parsed, points) for fields in records)
    kept = [s for s in scored if any(s.matched.values()) and s.total >= points["min_relevance"]]
    kept.sort(key=rank_key)
    return kept[: max(0, min(int(points["limit"]), depth))]


class KeywordSource:
    name = "keyword"
    unscored = "no field of it contains a query term"

    def __init__(self, records: list[KeywordFields], points: dict[str, float] | None = None):
        self.records = records
        self.points = {**KEYWORD_DEFAULTS, **(points or {})}

    def search(self, query: str, depth: int, allowed: frozenset[str] | None = None) -> list[Hit]:
        records = self.records if allowed is None else [r for r in self.records if r.doc_id in allowed]
        ranked = rank_records(records, query, self.points, depth)
        return [Hit(s.doc_id, s.total, rank, s.detail()) for rank, s in enumerate(ranked, start=1)]

    def ranking(self, query: str, allowed: frozenset[str] | None = None) -> list[Hit]:
        """Every record with at least one matching field, ranked like `search` but with neither
        the minimum relevance nor the result limit: its points and whole-collection rank (why-not)."""
        parsed = parse_query(query)
        if not parsed.terms:
            return []
        records = self.records if allowed is None else [r for r in self.records if r.doc_id in allowed]
        scored = sorted((s for s in (score_fields(f, parsed, self.points) for f in records)
                         if any(s.matched.values())), key=rank_key)
        return [Hit(s.doc_id, s.total, rank, s.detail()) for rank, s in enumerate(scored, start=1)]


# ---- loading, once per collection version ----------------------------------------------------
def _metadata(text: str | None) -> dict:
    value = json.loads(text or "{}")
    return value if isinstance(value, dict) else {}


def load_fields(context: LoadContext, collection: str) -> list[KeywordFields]:
    """Every row of the collection as `KeywordFields` (the Workbench caches them per collection
    state, so rebuilding the source for new points reuses them)."""
    rows = context.column(collection, ["id", "title", "text", "metadata"]).to_pylist()
    return [row_fields(r["id"], r["title"], r["text"], _metadata(r["metadata"])) for r in rows]


SPEC = SourceSpec(
    name="keyword", label="keyword", load=load_fields, build=build, key=key, params=PARAMS, optional=True,
    derives=Derives(),  # nothing: it scores the stored title, text and metadata as they are
    lexical=True,
    weight_help="Multiplies the keyword scorer's part of the fused score: RRF adds w/(k + keyword rank), "
                "weighted sum adds w × normalised keyword points.",
    description="Keyword: a field-weighted substring scorer over structured records (name, "
                "description, tags, domains, organisation, content).",
)
