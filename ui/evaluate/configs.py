"""The Evaluate page's saved configs: save config A under a name, export and import it as JSON,
and load, export or delete a saved config (`Workbench.configs`)."""

from __future__ import annotations

import json

import streamlit as st

from retrieval.search.config import SearchConfig
from retrieval.serve.launch import client_config, serve_command
from retrieval.types import RetrievalError
from ui import state
from ui.evaluate.common import config_label
from ui.search import views
from ui.state import memo_read


def configs_section(workbench) -> None:
    configs = workbench.configs
    view = state.view()
    message = st.session_state.pop("configs.flash", None)
    if message:
        st.success(views.markdown_safe(message))
    left, right = st.columns(2)
    with left:
        st.markdown("**Save config A**")
        name = st.text_input("Config name", key="configs.name",
                             help="The name config A (the sidebar) is saved under; saved configs can be loaded "
                                  "later and compared in the A/B test.")
        overwrite = st.checkbox("Overwrite a config of the same name", key="configs.overwrite",
                                help="Replace a saved config with this name.")
        if st.button("Save", key="configs.save", help="Save config A as it is now under the name above."):
            try:
                configs.save((name or "").strip(), view.config_a, overwrite=overwrite)
            except Exception as exc:  # bad name or a failing database: readable, the page stays up
                views.show_error(exc)
            else:  # st.rerun raises: outside the try
                st.session_state["configs.flash"] = f"Saved config A as '{name.strip()}'."
                st.rerun()
        st.download_button("Export config A (JSON)", view.config_a.to_json(), file_name="config-a.json",
                           mime="application/json", key="configs.export_a",
                           help="Config A as a JSON file (the CLI reads it with --config FILE.json).")
        imported = st.file_uploader("Import a config (JSON)", type=["json"], key="configs.import_file",
                                    help="A config JSON file (as exported here or written by hand); loading it "
                                         "replaces config A.")
        if st.button("Load the file into config A", key="configs.import", disabled=imported is None,
                     help="Read the JSON file and make it config A; an invalid file changes nothing."):
            try:
                config = SearchConfig.from_json(imported.getvalue().decode("utf-8-sig"))
                view.config_a = state.with_ui_sources(config)
                st.session_state["configs.flash"] = f"Config A loaded from {imported.name}: {config_label(config)}."
                st.rerun()
            except UnicodeDecodeError:
                views.show_error(RetrievalError(f"{imported.name} is not UTF-8 text"))
            except RetrievalError as exc:
                views.show_error(exc)
            except (TypeError, ValueError, AttributeError) as exc:  # e.g. "depth": "ten"
                views.show_error(RetrievalError(f"{imported.name} is not a valid search config: {exc}"))
    with right:
        st.markdown("**Saved configs**")
        try:
            names = memo_read(workbench, ("configs",), configs.names)
        except Exception as exc:
            views.show_error(exc)
            return
        if not names:
            st.caption("None saved yet.")
            return
        chosen = st.selectbox("Saved config", names, key="configs.saved",
                              help="A saved config to load into config A, export or delete.")
        try:
            config = memo_read(workbench, ("config", chosen), lambda: configs.load(chosen))
        except Exception as exc:
            views.show_error(exc)
            return
        st.caption(views.markdown_safe(config_label(config)))
        if st.button("Load into config A", key="configs.load",
                     help="Replace config A (the sidebar, shared by every page) with this saved config."):
            view.config_a = state.with_ui_sources(config)
            st.session_state["configs.flash"] = f"Config A is now '{chosen}': {config_label(config)}."
            st.rerun()
        st.download_button("Export (JSON)", config.to_json(), file_name=f"{chosen}.json", mime="application/json",
                           key="configs.export", help="This saved config as a JSON file.")
        with st.expander("Serve this config to agents (MCP)"):
            collection = view.collection or "COLLECTION"
            st.caption(views.markdown_safe(
                f"Agents search {workbench.label(collection)} ranked exactly like this: the command serves it "
                "over stdio (add --http 8765 for HTTP, --allow-write to let agents add entries); the JSON goes "
                "in an MCP client's configuration. Tools and options: docs/mcp.md."))
            st.code(serve_command(collection, chosen, workbench.store.uri), language="bash")
            st.code(json.dumps(client_config(collection, chosen, workbench.store.uri), indent=2), language="json")
        if st.button("Delete", key="configs.delete", help="Remove this saved config (config A is not changed)."):
            try:
                configs.delete(chosen)
            except Exception as exc:
                views.show_error(exc)
            else:
                st.session_state["configs.flash"] = f"Deleted config '{chosen}'."
                st.rerun()
