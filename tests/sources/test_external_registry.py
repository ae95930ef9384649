"""Registered outside engines: kept by name in the store's side table, as given (no secret), and a
source name's spec found for the Retriever (built-ins first, then run-only descriptors, then the
registered ones, a change by another handle seen)."""

import pytest

from retrieval.sources import SOURCES
from retrieval.sources.external import ExternalSources, SourceSpecs, parse_descriptor
from retrieval.sources.external import registry as registry_module
from retrieval.store import Store
from retrieval.types import RetrievalError


def engine(name: str, **extra) -> dict:
    return {"name": name, "kind": "http", "url": "http://127.0.0.1:9/search", "params": {"q": "{query}"},
            "headers": {"Authorization": "Bearer ${ENGINE_KEY}"}, "hits": "hits", "id": "id", "score": "score",
            **extra}


def test_add_list_replace_remove(tmp_path):
    registry = ExternalSources(Store(str(tmp_path)))
    assert registry.names() == [] and registry.rows() == []
    registry.add(parse_descriptor(engine("prod", label="production")))
    [row] = registry.rows()
    assert {k: row[k] for k in ("name", "kind", "label", "where")} == {
        "name": "prod", "kind": "http", "label": "production", "where": "http://127.0.0.1:9/search"}
    assert registry.get("prod").headers == {"Authorization": "Bearer ${ENGINE_KEY}"}  # the placeholder, as saved
    with pytest.raises(RetrievalError, match="a source named 'prod' is registered already"):
        registry.add(parse_descriptor(engine("prod")))
    registry.add(parse_descriptor(engine("prod", score="_score")), replace=True)
    assert registry.get("prod").paths.score.expression == "_score"
    with pytest.raises(RetrievalError, match="'dense' is a built-in source's name"):
        registry.add(parse_descriptor(engine("dense")))
    registry.remove("prod")
    assert registry.get("prod") is None
    with pytest.raises(RetrievalError, match="no outside source named 'prod'; registered: none"):
        registry.remove("prod")


def test_a_names_spec_builtins_then_run_only_then_registered(tmp_path, monkeypatch):
    store = Store(str(tmp_path))
    specs = SourceSpecs(store)
    assert specs.get("bm25") is SOURCES["bm25"] and specs.get("prod") is None
    ExternalSources(store).add(parse_descriptor(engine("prod")))  # another handle registers it
    registered = specs.get("prod")
    assert registered.name == "prod" and registered.optional and not registered.embeds_query
    specs.use(parse_descriptor(engine("prod", score="_score")))  # run-only: over the registered one
    assert specs.get("prod").key(None) != registered.key(None)  # another descriptor: another cache key
    with pytest.raises(RetrievalError, match="built-in"):
        specs.use(parse_descriptor(engine("bm25")))
    other = SourceSpecs(store)
    assert other.get("prod").key(None) == registered.key(None)
    monkeypatch.setattr(registry_module, "RECHECK_S", 0.0)
    ExternalSources(store).remove("prod")
    assert other.get("prod") is None
