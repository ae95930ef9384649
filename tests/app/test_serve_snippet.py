"""Evaluate page → saved configs: how to serve the chosen config to agents (`python -m retrieval
serve`), as a command and as the JSON an MCP client puts in its configuration."""

import json
import sys

from conftest import COLLECTION, REPO, open_page

from retrieval.search.config import SearchConfig
from retrieval.search.saved_configs import ConfigStore


def test_a_saved_config_shows_how_to_serve_it(workbench):
    ConfigStore(workbench.store).save("served k9", SearchConfig(rrf_k=9), overwrite=True)
    at = open_page("pages/5_Evaluate.py")
    at.selectbox(key="configs.saved").set_value("served k9").run()
    assert not at.exception and not at.error, [e.value for e in at.error]
    codes = [c.value for c in at.code]
    command = next(c for c in codes if " serve " in c)
    assert f"serve --collection {COLLECTION} --config 'served k9'" in command
    assert f"--db {workbench.store.uri}" in command and command.startswith(sys.executable)
    server = json.loads(next(c for c in codes if c.startswith("{")))["mcpServers"]["search-workbench"]
    assert server["command"] == sys.executable and server["cwd"] == str(REPO)
    assert server["args"][-4:] == ["--collection", COLLECTION, "--config", "served k9"]
