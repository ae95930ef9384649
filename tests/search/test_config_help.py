"""search/config_help.py: one home for what each config parameter does (the Search page's
tooltips and the MCP server's describe_config read it)."""

from dataclasses import fields

from retrieval.search.config import SearchConfig
from retrieval.search.config_help import FIELD_HELP, describe_parameters
from retrieval.sources import SOURCES


def test_every_plain_field_a_control_sets_has_a_label_and_help():
    names = {f.name for f in fields(SearchConfig)}
    # dict fields (weights, min_raw, keyword, graph) and source parameters (bm25_k1 …) are described
    # by the source descriptors; filters and tie_field are set outside the sliders; ranker and
    # query_weights are the optimiser's
    by_sources = {p.path for spec in SOURCES.values() for p in spec.params if p.group is None}
    assert by_sources == {"bm25_k1", "bm25_b"}
    assert set(FIELD_HELP) == names - by_sources - {"weights", "min_raw", "keyword", "graph", "filters", "tie_field",
                                                    "ranker", "query_weights"}
    assert all(label and len(text) > 20 for label, text in FIELD_HELP.values())


def test_the_page_tooltips_come_from_the_registry():
    from ui.search.knobs import ADVANCED_KNOBS, MAIN_KNOBS

    knobs = {k.key: (k.label, k.help) for k in (*MAIN_KNOBS, *ADVANCED_KNOBS)}
    assert knobs["rrf_k"] == FIELD_HELP["rrf_k"] and knobs["min_display"] == FIELD_HELP["min_display_score"]
    assert knobs["bm25_k1"] == (SOURCES["bm25"].params[0].label, SOURCES["bm25"].params[0].help)


def test_parameters_of_a_config_say_what_takes_effect():
    rrf = {p["name"]: p for p in describe_parameters(SearchConfig(fusion="rrf", rrf_k=10.0,
                                                                  weights={"bm25": 1.0, "keyword": 0.5}))}
    assert rrf["rrf_k"]["value"] == 10.0 and rrf["rrf_k"]["used"]
    assert not rrf["normalization"]["used"] and not rrf["combination"]["used"]  # RRF reads ranks only
    assert rrf["weights.keyword"] == {"name": "weights.keyword", "label": "keyword weight",
                                      "help": SOURCES["keyword"].weight_help, "value": 0.5, "used": True}
    assert not rrf["weights.dense"]["used"] and rrf["weights.dense"]["value"] == 0.0
    assert rrf["keyword.tag"]["used"] and not rrf["graph.depth"]["used"]
    assert not rrf["rerank_lambda"]["used"]
    weighted = {p["name"]: p for p in describe_parameters(SearchConfig())}
    assert weighted["normalization"]["used"] and not weighted["rrf_k"]["used"]
