"""A rule set as data: rules (an input and its instructions), comments kept for the writer, and
the index that finds a query's rules with one dict lookup per query term.

Matching follows Querqy's common rules (whitespace tokens, case-insensitive): an input of n terms
fires where the query holds those n terms in a row; `"a b` only at the query's start, `a b"` only
at its end, `"a b"` only when the query is exactly those terms. Query and input terms are
normalised alike (`normalize_term`: case folded, surrounding punctuation stripped).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from retrieval.search.filters import Filter

# Instruction kinds, as the text writes them. SYNONYM, UP, DOWN, FILTER and DELETE are Querqy's
# common rules; PIN and HIDE are Elasticsearch query rules' pinned and excluded documents.
KINDS = ("SYNONYM", "UP", "DOWN", "FILTER", "DELETE", "PIN", "HIDE")
WEIGHTED = ("SYNONYM", "UP", "DOWN")
_PUNCTUATION = "\"'.,;:!?()[]{}<>«»“”‘’、。，；：！？（）【】《》"


def normalize_term(term: str) -> str:
    """A term as rules compare it: case folded, surrounding punctuation stripped."""
    return term.strip(_PUNCTUATION).casefold()


def query_terms(query: str) -> list[str]:
    """The query's terms as rules see them (whitespace tokens, normalised; empty ones dropped)."""
    return [t for t in (normalize_term(w) for w in query.split()) if t]


@dataclass(frozen=True)
class Instruction:
    """One instruction line. `text` is what follows the colon, as written (the writer gives it
    back); `terms` the SYNONYM's or DELETE's terms; `filter` an UP/DOWN/FILTER's metadata filter;
    `doc_ids` a PIN's or HIDE's documents. `weight` None: written without one (1 applies)."""

    kind: str
    text: str
    weight: float | None = None
    terms: tuple[str, ...] = ()
    filter: Filter | None = None
    doc_ids: tuple[str, ...] = ()
    line: int = 0

    @property
    def effective_weight(self) -> float:
        return 1.0 if self.weight is None else self.weight


@dataclass(frozen=True)
class Comment:
    """A comment or blank line (between rules, or a comment among a rule's instructions), kept so
    the writer gives the file back."""

    text: str


@dataclass(frozen=True)
class Rule:
    """An input (its normalised terms; `starts`/`ends`: Querqy's `"` boundaries) and its
    instructions. `number`: its place in the file (1 = the first rule), what explanations cite."""

    number: int
    terms: tuple[str, ...]
    starts: bool
    ends: bool
    body: tuple[Instruction | Comment, ...]  # its instruction lines and any comment lines among them
    line: int = 0

    @property
    def instructions(self) -> tuple[Instruction, ...]:
        return tuple(i for i in self.body if isinstance(i, Instruction))

    @property
    def input_text(self) -> str:
        return ('"' if self.starts else "") + " ".join(self.terms) + ('"' if self.ends else "")


@dataclass(frozen=True)
class Match:
    """One rule firing on a query: the rule and where its input sits among the query's terms."""

    rule: Rule
    start: int  # index of its first term in `query_terms(query)`


@dataclass
class RuleSet:
    """The rules of one text, in file order, with the first-term index matching uses."""

    items: tuple[Rule | Comment, ...] = ()
    indent: str = "  "  # how instruction lines are indented (the file's own, for the writer)
    _by_first: dict[str, list[Rule]] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        for rule in self.rules:
            self._by_first.setdefault(rule.terms[0], []).append(rule)

    @property
    def rules(self) -> list[Rule]:
        return [item for item in self.items if isinstance(item, Rule)]

    def __len__(self) -> int:
        return sum(isinstance(item, Rule) for item in self.items)

    def without(self, number: int) -> RuleSet:
        """This set with rule `number` left out (the others keep their numbers): what the rule
        impact measures."""
        return RuleSet(tuple(i for i in self.items if not (isinstance(i, Rule) and i.number == number)), self.indent)

    def matches(self, query: str) -> list[Match]:
        """The rules that fire on `query`, in file order: per query term one dict lookup for the
        rules whose input starts with it, then a comparison of the following terms (so the cost
        grows with the query's length and the rules sharing a first term, not with the set)."""
        if not self._by_first:
            return []
        terms = query_terms(query)
        found: list[Match] = []
        for start, term in enumerate(terms):
            for rule in self._by_first.get(term, ()):
                end = start + len(rule.terms)
                if tuple(terms[start:end]) != rule.terms:
                    continue
                if (rule.starts and start != 0) or (rule.ends and end != len(terms)):
                    continue
                found.append(Match(rule, start))
        found.sort(key=lambda m: (m.rule.number, m.start))
        return found
