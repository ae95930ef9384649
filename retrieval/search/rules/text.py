"""Querqy's common-rules text, read and written back.

    # a comment
    notebook =>                 an input: the terms the query must hold in a row
      SYNONYM: laptop           also search 'laptop' (lexical sources)
      SYNONYM(0.5): netbook     weighted: counts half as much as the query's own terms
      UP(2): * category:guide   raise documents whose metadata passes the filter
      DOWN(0.5): * year<2000    lower them
      FILTER: * category:guide  only documents that pass (joins the config's filters)
      DELETE: notebook          stop searching these input terms (`DELETE` alone: the whole input)
      PIN: doc-42, doc-7        these documents first, in this order (Elasticsearch's pinned)
      HIDE: doc-13              never show this document (Elasticsearch's exclude)
    "apple" =>                  `"` boundaries: `"a` at the query's start, `a"` at its end,
      ...                       `"a"` the whole query

A filter after `*` is Lucene's `field:value` (`category:guide`, read as `category=guide`) or the
workbench's own (`year>=2010`, `category=a|b`: `search.filters`). Instruction names are read in
any case. UP/DOWN/FILTER on a term (not `*`) would need each candidate's text at ranking time and
Querqy's `@` properties are not supported: both are refused with their line number.

`parse_rules` reads all of a text or none of it (a `RetrievalError` listing every bad line with its
number); `write_rules` gives back the same text for a text in the writer's form (instruction names
upper case, one space after the colon, the file's instruction indent), comments and blank lines kept.
"""

from __future__ import annotations

import functools
import re

from retrieval.search.filters import parse_filter
from retrieval.search.rules.model import KINDS, WEIGHTED, Comment, Instruction, Rule, RuleSet, normalize_term
from retrieval.types import RetrievalError

RULES_MAX_CHARS = 2_000_000  # a rules text (a config field) is at most this long
RULES_MAX = 20_000  # rules in one set
ERRORS_SHOWN = 10  # bad lines named in one message
SYNONYM_WEIGHT_MIN = 0.25  # SYNONYM(w): w in [0.25, 1], applied in quarters (`rewrite.lexical_text`)
BOOST_MAX = 1000.0  # UP(w) / DOWN(w): w in (0, 1000]

_INSTRUCTION = re.compile(r"^([A-Za-z]+)\s*(?:\(\s*([^)]*?)\s*\))?\s*(?::\s*(.*))?$")
_LUCENE_TERM = re.compile(r"^([^\s:=<>|]+):(.+)$")


class _LineError(Exception):
    pass


def parse_rules(text: str) -> RuleSet:
    """The rule set of a common-rules `text`; a `RetrievalError` naming each bad line (its number
    and what is wrong), so a text is taken whole or not at all. Cached per text."""
    if not isinstance(text, str):
        raise RetrievalError(f"Rules must be text, got {type(text).__name__}")
    return _parse_cached(text)


@functools.lru_cache(maxsize=32)
def _parse_cached(text: str) -> RuleSet:
    if len(text) > RULES_MAX_CHARS:
        raise RetrievalError(f"Rules are at most {RULES_MAX_CHARS:,} characters, got {len(text):,}")
    items: list[Rule | Comment] = []
    errors: list[str] = []
    indent: str | None = None
    current: dict | None = None  # the rule being read: its input and instructions so far

    def close() -> None:
        nonlocal current
        if current is None:
            return
        if not any(isinstance(i, Instruction) for i in current["body"]):
            errors.append(f"line {current['line']}: rule '{current['input']} =>' has no instructions")
        else:
            items.append(Rule(sum(isinstance(i, Rule) for i in items) + 1, current["terms"], current["starts"],
                              current["ends"], tuple(current["body"]), current["line"]))
        current = None

    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        try:
            if not stripped:  # a blank line ends a rule
                close()
                items.append(Comment(""))
                continue
            if stripped.startswith("#"):
                (current["body"] if current is not None else items).append(Comment(raw.rstrip()))
                continue
            if stripped.startswith("@"):
                raise _LineError("Querqy properties (@…) are not supported")
            if "=>" in stripped:
                close()
                current = _input(stripped, number)
                continue
            if current is None:
                raise _LineError(f"an instruction before any input ('term =>'): {stripped!r}")
            if indent is None:
                indent = raw[: len(raw) - len(raw.lstrip())]
            current["body"].append(_instruction(stripped, number, current["terms"]))
        except _LineError as exc:
            errors.append(f"line {number}: {exc}")
    close()
    if len([i for i in items if isinstance(i, Rule)]) > RULES_MAX:
        errors.append(f"at most {RULES_MAX:,} rules")
    if errors:
        more = f" (and {len(errors) - ERRORS_SHOWN} more)" if len(errors) > ERRORS_SHOWN else ""
        raise RetrievalError("Bad rules: " + "; ".join(errors[:ERRORS_SHOWN]) + more)
    return RuleSet(tuple(items), "  " if indent is None else indent)


def _input(line: str, number: int) -> dict:
    """An input line `terms =>` read: its normalised terms and `"` boundaries."""
    before, _, after = line.partition("=>")
    if after.strip():
        raise _LineError(f"nothing may follow '=>' on an input line, got {after.strip()!r}")
    words = before.strip()
    starts, ends = words.startswith('"'), len(words) > 1 and words.endswith('"')
    words = words[1 if starts else 0: len(words) - (1 if ends else 0)]
    if '"' in words:
        raise _LineError('a quote may only open or close an input ("a b" / "a / b")')
    terms = tuple(normalize_term(w) for w in words.split())
    if not terms or not all(terms):
        raise _LineError(f"an input needs terms before '=>', got {before.strip()!r}")
    return {"terms": terms, "starts": starts, "ends": ends, "body": [], "line": number,
            "input": before.strip()}


def _instruction(line: str, number: int, input_terms: tuple[str, ...]) -> Instruction:
    match = _INSTRUCTION.match(line)
    if not match:
        raise _LineError(f"expected an instruction like 'SYNONYM: term' or an input 'term =>', got {line!r}")
    name, weight_text, body = match.group(1).upper(), match.group(2), (match.group(3) or "").strip()
    if name not in KINDS:
        raise _LineError(f"unknown instruction {match.group(1)!r}; known: {', '.join(KINDS)}")
    if match.group(3) is None and name != "DELETE":
        raise _LineError(f"{name} needs a colon and its argument: '{name}: …'")
    weight = _weight(name, weight_text) if weight_text is not None else None
    if name == "SYNONYM":
        terms = tuple(normalize_term(w) for w in body.split())
        if not terms or not all(terms) or body.startswith("*"):
            raise _LineError(f"SYNONYM needs one or more terms, got {body!r}")
        return Instruction(name, body, weight, terms=terms, line=number)
    if name == "DELETE":
        terms = tuple(normalize_term(w) for w in body.split())
        outside = [t for t in terms if t not in input_terms]
        if outside:
            raise _LineError(f"DELETE may only delete terms of its input ({' '.join(input_terms)}), "
                             f"not {' '.join(outside)}")
        return Instruction(name, body, terms=terms or input_terms, line=number)
    if name in ("PIN", "HIDE"):
        ids = tuple(i.strip() for i in body.split(","))
        if not body or not all(ids):
            raise _LineError(f"{name} needs document ids separated by commas, got {body!r}")
        return Instruction(name, body, doc_ids=ids, line=number)
    # UP, DOWN, FILTER: a metadata filter after '*'
    if not body.startswith("*"):
        raise _LineError(f"{name} on a term is not supported; give a metadata filter: '{name}: * category:guide'")
    return Instruction(name, body, weight, filter=_filter(body[1:].strip()), line=number)


def _weight(name: str, text: str) -> float:
    if name not in WEIGHTED:
        raise _LineError(f"{name} takes no weight")
    try:
        weight = float(text)
    except ValueError:
        raise _LineError(f"{name}'s weight must be a number, got {text!r}") from None
    if name == "SYNONYM" and not SYNONYM_WEIGHT_MIN <= weight <= 1:
        raise _LineError(f"SYNONYM's weight must be in [{SYNONYM_WEIGHT_MIN:g}, 1], got {text}")
    if name != "SYNONYM" and not 0 < weight <= BOOST_MAX:
        raise _LineError(f"{name}'s weight must be > 0 and ≤ {BOOST_MAX:g}, got {text}")
    return weight


def _filter(text: str):
    """`field:value` (Lucene's form) or the workbench's own filter text, as a `Filter`."""
    lucene = _LUCENE_TERM.match(text)
    try:
        return parse_filter(f"{lucene.group(1)}={lucene.group(2)}" if lucene else text)
    except RetrievalError as exc:
        raise _LineError(f"{exc} (write '* field:value' or '* field>=number')") from None


def format_weight(weight: float) -> str:
    """A weight as the writer gives it: 100.0 → '100', 0.5 → '0.5' (shortest round-trip form)."""
    text = repr(float(weight))
    return text[:-2] if text.endswith(".0") else text


def write_rules(rules: RuleSet) -> str:
    """The common-rules text of `rules`: each input `terms =>`, its instructions indented as the
    file's, each `NAME(weight): text`; comments and blank lines where they were."""
    lines: list[str] = []
    for item in rules.items:
        if isinstance(item, Comment):
            lines.append(item.text)
            continue
        lines.append(f"{item.input_text} =>")
        for ins in item.body:
            if isinstance(ins, Comment):
                lines.append(ins.text)
                continue
            weight = f"({format_weight(ins.weight)})" if ins.weight is not None else ""
            lines.append(f"{rules.indent}{ins.kind}{weight}{': ' + ins.text if ins.text else ''}")
    return "\n".join(lines) + "\n" if lines else ""
