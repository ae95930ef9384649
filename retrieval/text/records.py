"""Catalogue records: structured descriptions of data sources (seed 000's DataSource Hub shape).

A record is a JSON object; `name` as an object is what marks one:

    {"id": "cn-nbs-employment",
     "name": {"en": "…", "zh": "…"},                 # required: at least one of en / zh
     "description": {"en": "…", "zh": "…"},          # or a plain string
     "tags": ["…", …],
     "coverage": {"domains": ["economics", …]},
     "organization": {"name": "…"},                  # or a plain string
     "data_content": {"en": ["…", …], "zh": [ …]},   # or a plain list
     "quality": {"authority": 5, "methodology": 4, "timeliness": 4,
                 "completeness": 5, "documentation": 4, "citations": 3}}

Every field but `id` and `name` is optional. The quality score is the mean of the quality
dimensions present (`QUALITY_DIMENSIONS`, or the seed's long names in `QUALITY_ALIASES`);
a record with none has no quality score.

Ingest turns a record into a `Document` (`record_document`): title = the names ("en / zh"),
text = descriptions, tags, domains, organisation and content items, one field per line, so
BM25 and the vector source index the same fields the keyword source scores; the whole record is
kept in `metadata`, where the keyword source reads it back.
"""

from __future__ import annotations

import math
from typing import Any

from retrieval.types import Document

QUALITY_DIMENSIONS = ("authority", "methodology", "timeliness", "completeness", "documentation", "citations")
# The seed names its six dimensions at length; both spellings count as the same dimension.
QUALITY_ALIASES = {
    "authority_level": "authority", "methodology_transparency": "methodology",
    "update_timeliness": "timeliness", "data_completeness": "completeness",
    "documentation_quality": "documentation", "citation_count": "citations",
}
LANGUAGES = ("en", "zh")


def is_catalogue_record(item: Any) -> bool:
    """A JSON object whose `name` is an object ({en, zh}): the mark of a catalogue record."""
    return isinstance(item, dict) and isinstance(item.get("name"), dict)


# ---- reading fields (lenient: a wrong type reads as empty; `record_problems` reports it) -----
def _strings(values: Any) -> tuple[str, ...]:
    """The non-blank strings of a list, stripped (anything else reads as nothing)."""
    if not isinstance(values, list):
        return ()
    return tuple(v.strip() for v in values if isinstance(v, str) and v.strip())


def bilingual_texts(value: Any) -> tuple[str, ...]:
    """{en, zh} -> its non-blank strings, English first; a plain string -> itself."""
    if isinstance(value, str):
        return (value.strip(),) if value.strip() else ()
    if not isinstance(value, dict):
        return ()
    return tuple(value[lang].strip() for lang in LANGUAGES
                 if isinstance(value.get(lang), str) and value[lang].strip())


def bilingual_lists(value: Any) -> tuple[str, ...]:
    """{en: [...], zh: [...]} -> every item, English first; a plain list -> its items."""
    if isinstance(value, list):
        return _strings(value)
    if not isinstance(value, dict):
        return ()
    return tuple(item for lang in LANGUAGES for item in _strings(value.get(lang)))


def record_names(record: dict) -> tuple[str, ...]:
    return bilingual_texts(record.get("name"))


def record_descriptions(record: dict) -> tuple[str, ...]:
    return bilingual_texts(record.get("description"))


def record_tags(record: dict) -> tuple[str, ...]:
    return _strings(record.get("tags"))


def record_domains(record: dict) -> tuple[str, ...]:
    coverage = record.get("coverage")
    return _strings(coverage.get("domains")) if isinstance(coverage, dict) else ()


def record_organization(record: dict) -> str:
    organization = record.get("organization")
    if isinstance(organization, dict):
        organization = organization.get("name")
    return organization.strip() if isinstance(organization, str) else ""


def record_contents(record: dict) -> tuple[str, ...]:
    return bilingual_lists(record.get("data_content"))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def quality_dimensions(record: dict) -> dict[str, float]:
    """The quality dimensions a record states, by short name (long seed names mapped)."""
    quality = record.get("quality")
    if not isinstance(quality, dict):
        return {}
    found: dict[str, float] = {}
    for key, value in quality.items():
        dimension = QUALITY_ALIASES.get(key, key)
        if dimension in QUALITY_DIMENSIONS and _is_number(value):
            found[dimension] = float(value)
    return found


def record_quality(record: dict) -> float | None:
    """Mean of the quality dimensions present, Σ d / n; a plain number is taken as it is;
    None when the record states no dimension."""
    quality = record.get("quality")
    if _is_number(quality):
        return float(quality)
    dimensions = quality_dimensions(record)
    return sum(dimensions.values()) / len(dimensions) if dimensions else None


# ---- validation and conversion ---------------------------------------------------------------
def _bilingual_problem(field_name: str, value: Any, allow_string: bool) -> str | None:
    if allow_string and isinstance(value, str):
        return None
    if not isinstance(value, dict):
        shape = "an {en, zh} object or a string" if allow_string else "an {en, zh} object"
        return f"{field_name} must be {shape}"
    bad = [lang for lang in LANGUAGES if lang in value and not isinstance(value[lang], str)]
    return f"{field_name}.{bad[0]} must be a string" if bad else None


def _list_problem(field_name: str, value: Any) -> str | None:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return f"{field_name} must be an array of strings"
    return None


def record_problems(record: dict) -> list[str]:
    """What is wrong with a catalogue record, field by field (empty: nothing)."""
    problems = []
    record_id = record.get("id")
    if isinstance(record_id, bool) or not isinstance(record_id, (str, int)) or not str(record_id).strip():
        problems.append("id is missing or not a non-empty string or integer")
    problem = _bilingual_problem("name", record.get("name"), allow_string=False)
    if problem:
        problems.append(problem)
    elif not record_names(record):
        problems.append("name has neither an English nor a Chinese text")
    if "description" in record:
        problems.append(_bilingual_problem("description", record["description"], allow_string=True))
    if "tags" in record:
        problems.append(_list_problem("tags", record["tags"]))
    coverage = record.get("coverage")
    if coverage is not None:
        if not isinstance(coverage, dict):
            problems.append("coverage must be an object")
        elif "domains" in coverage:
            problems.append(_list_problem("coverage.domains", coverage["domains"]))
    organization = record.get("organization")
    if organization is not None and not isinstance(organization, str) and (
            not isinstance(organization, dict) or not isinstance(organization.get("name", ""), str)):
        problems.append("organization must be a string or an object with a string name")
    content = record.get("data_content")
    if content is not None:
        if isinstance(content, dict):
            problems += [_list_problem(f"data_content.{lang}", content[lang]) for lang in LANGUAGES if lang in content]
        else:
            problems.append(_list_problem("data_content", content))
    quality = record.get("quality")
    if quality is not None and not _is_number(quality):
        if not isinstance(quality, dict):
            problems.append("quality must be an object of numbers or a number")
        else:
            problems += [f"quality.{key} must be a finite number" for key, value in quality.items()
                         if QUALITY_ALIASES.get(key, key) in QUALITY_DIMENSIONS and not _is_number(value)]
    problems = [p for p in problems if p]
    if not problems and not record_text(record):
        problems.append("nothing to index besides the name: no description, tags, domains, organisation or content")
    return problems


def record_title(record: dict) -> str:
    """The names, English first: "China Employment Statistics / 中国就业统计"."""
    return " / ".join(dict.fromkeys(record_names(record)))


def record_text(record: dict) -> str:
    """Descriptions, then tags, domains, organisation and content items, one field per line."""
    lines = list(record_descriptions(record))
    lines += [", ".join(items) for items in (record_tags(record), record_domains(record)) if items]
    lines += [record_organization(record)] if record_organization(record) else []
    lines += ["; ".join(record_contents(record))] if record_contents(record) else []
    return "\n".join(lines)


def record_document(record: dict) -> Document:
    """A valid record (see `record_problems`) as a Document; the whole record is the metadata."""
    return Document(id=str(record["id"]).strip(), text=record_text(record), title=record_title(record),
                    metadata=dict(record))
