"""The Corpus page's "Outside engines" section: the registered outside search engines (an HTTP
search API, an MCP server's search tool, `retrieval.sources.external`), registering one from its
JSON descriptor and removing one; the Search page then offers each as a source with its weight.

A descriptor that starts a program (an `mcp` one with `command`) is refused here: the browser's
user may not be on the server, so that one is registered from the command line
(`python -m retrieval sources add FILE`, docs/sources.md). For the same reason a descriptor
registered here may read only environment variables named `WORKBENCH_SOURCE_…` (a header naming
any other would send the server's secrets wherever its URL points).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from retrieval.search.workbench import Workbench
from retrieval.sources.external import parse_descriptor
from retrieval.sources.external.templates import ENV_RE
from retrieval.types import RetrievalError
from ui.search import views

FLASH_KEY = "corpus.outside_flash"
UI_ENV_PREFIX = "WORKBENCH_SOURCE_"
EXAMPLE = ('{"name": "prod", "kind": "http", "url": "https://search.example.com/api/search",\n'
           ' "params": {"q": "{query}", "size": "{depth}"},\n'
           ' "hits": "hits.hits", "id": "_id", "score": "_score", "title": "_source.title"}')


def register(workbench: Workbench, text: str) -> str:
    """Register the descriptor `text` (JSON); the message to show. RetrievalError when refused."""
    descriptor = parse_descriptor(text)
    if descriptor.command:
        raise RetrievalError("a descriptor that starts a program (command) is registered from the command line: "
                             "python -m retrieval sources add FILE")
    others = sorted(n for n in ENV_RE.findall(descriptor.to_json()) if not n.startswith(UI_ENV_PREFIX))
    if others:
        raise RetrievalError(f"from the browser a descriptor reads only environment variables named "
                             f"{UI_ENV_PREFIX}…, not {', '.join(others)} (or register it from the command line)")
    workbench.outside_sources().add(descriptor)
    return f"Registered outside engine '{descriptor.name}': pick it under “Outside engines” on the Search page."


def outside_engines(workbench: Workbench) -> None:
    """The section (see the module doc)."""
    message = st.session_state.pop(FLASH_KEY, None)
    if message:
        st.success(views.markdown_safe(message))
    try:
        rows = workbench.outside_sources().rows()
    except RetrievalError as exc:
        views.show_error(exc)
        rows = []
    if rows:
        st.dataframe(pd.DataFrame(rows), hide_index=True)
    else:
        st.caption("No outside engine registered: a team's own search (an HTTP JSON API, an MCP search tool) can be "
                   "a source beside BM25 and vectors (docs/sources.md).")
    text = st.text_area("Descriptor (JSON)", key="corpus.outside_descriptor", placeholder=EXAMPLE, height=160,
                        help="name, kind (http or mcp), url, params or body templates ({query}, {depth}, {filters}), "
                             "and JMESPath paths to the hits, each hit's id and score (docs/sources.md). "
                             "Credentials only as ${ENV_NAME}: read from the server's environment, never saved.")
    if st.button("Register", key="corpus.outside_add", help="Validate the descriptor and keep it in the database."):
        try:
            st.session_state[FLASH_KEY] = register(workbench, text)
        except RetrievalError as exc:
            views.show_error(exc)
        else:
            st.rerun()
    if rows:
        name = st.selectbox("Registered engine", [r["name"] for r in rows], key="corpus.outside_name",
                            help="The outside engine the Remove button forgets.")
        if st.button("Remove", key="corpus.outside_remove", help="Forget this engine (configs naming it then report "
                                                                   "it as an unknown source)."):
            try:
                workbench.outside_sources().remove(name)
            except RetrievalError as exc:
                views.show_error(exc)
            else:
                st.session_state[FLASH_KEY] = f"Removed outside engine '{name}'."
                st.rerun()
