"""A config's query rules (Querqy's common rules, plus PIN and HIDE: `retrieval.search.rules`):
typed as text, checked as they are typed (every bad line named with its number, the config's own
validation), exported as `rules.txt`. Bound to the session's View (`state.bound`)."""

from __future__ import annotations

import streamlit as st

from retrieval.search.rules import parse_rules, write_rules
from retrieval.types import RetrievalError
from ui import state

RULES_HELP = ("One rule per input: `words =>`, then instructions on the lines under it: `SYNONYM: w`, "
              "`SYNONYM(0.5): w`, `DELETE: w`, `FILTER: * field:value`, `UP(2): * field:value`, "
              "`DOWN(1): * year<2000`, `PIN: id, id`, `HIDE: id`. `\"w` only at the query's start, `w\"` at its "
              "end. UP(w) adds w to the display score. See docs/guide/rules.md.")


def rule_controls(which: str) -> None:
    """The rules text of config `which`: an unreadable text is said with its line numbers (the
    search then says the same and does not run), a readable one can be downloaded back."""
    config = state.view().config(which)
    text = config.rules if isinstance(config.rules, str) else ""
    try:
        count = len(parse_rules(text))
        problem = None
    except RetrievalError as exc:
        count, problem = None, str(exc)
    title = "Query rules" + (f" ({count})" if count else " (invalid)" if problem else "")
    with st.expander(title):
        def write(value: str) -> None:
            state.view().set_config(which, state.view().config(which).edited(rules=value or ""))

        state.bound(st.text_area, "Rules (Querqy common rules)", f"{which}.rules",
                    lambda: state.view().config(which).rules, write, height=120,
                    placeholder='kitten =>\n  SYNONYM: cats\n"home page" =>\n  PIN: doc-42', help=RULES_HELP)
        if problem:
            st.error(problem)
        elif count:
            st.download_button("Export rules.txt", write_rules(parse_rules(text)), file_name="rules.txt",
                               key=f"{which}.rules_export")
