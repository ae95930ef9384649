"""Query rules: Querqy's common rules (SYNONYM, UP/DOWN, FILTER, DELETE) and Elasticsearch's
pinned and excluded documents (PIN, HIDE), read from text, matched per query, applied by the
ranking plan and the retriever.

    model.py   rules as data (`RuleSet`, `Rule`, `Instruction`) and the first-term index matching uses
    text.py    the common-rules text read (errors with line numbers, all or nothing) and written back
    apply.py   what the rules do to one query (`QueryRules`: rewrites, filters, boosts, pins, hides)
               and the ranking stages that apply them (`boosted_scores`, `pinned_order`)

Entry points: `parse_rules`, `write_rules`, `query_rules`.
"""

from retrieval.search.rules.apply import (
    QueryRules,
    boosted_scores,
    pinned_entries,
    pinned_order,
    query_rules,
    rules_for,
)
from retrieval.search.rules.model import Instruction, Rule, RuleSet
from retrieval.search.rules.text import parse_rules, write_rules

__all__ = ["Instruction", "QueryRules", "Rule", "RuleSet", "boosted_scores", "parse_rules", "pinned_entries",
           "pinned_order", "query_rules", "rules_for", "write_rules"]
