"""An outside engine's descriptor: validation with every problem named, safety refusals, templates
filled by substitution only, and JMESPath mapping with its refusals (retrieval/sources/external/)."""

import pytest

from retrieval.sources.external.descriptor import parse_descriptor, url_problem
from retrieval.sources.external.mapping import MappingError, compile_paths, map_hits
from retrieval.sources.external.templates import fill
from retrieval.types import RetrievalError

GOOD = {"name": "prod", "kind": "http", "url": "https://search.example.com/api", "params": {"q": "{query}"},
        "hits": "hits.hits", "id": "_id", "score": "_score"}


def test_a_good_descriptor_parses_with_defaults_and_a_stable_fingerprint():
    d = parse_descriptor(GOOD)
    assert (d.name, d.kind, d.label, d.method, d.timeout_s, d.max_concurrent, d.max_bytes) == (
        "prod", "http", "prod", "GET", 10.0, 4, 5_000_000)
    assert d.fingerprint == parse_descriptor(dict(reversed(list(GOOD.items())))).fingerprint
    assert d.fingerprint != parse_descriptor({**GOOD, "score": "score"}).fingerprint
    assert not d.uses_query_vector and parse_descriptor({**GOOD, "params": {"v": "{query_vector}"}}).uses_query_vector


def test_every_problem_is_named_at_once():
    with pytest.raises(RetrievalError) as caught:
        parse_descriptor({"name": "9bad", "kind": "ftp", "hits": "a[", "timeout_s": 0, "colour": "red"})
    message = str(caught.value)
    for part in ("unknown field(s) colour", "name must be", "kind must be one of", "timeout_s must be",
                 "hits path 'a[' is not JMESPath", "id (a JMESPath expression) is required"):
        assert part in message, part


@pytest.mark.parametrize(("url", "problem"), [
    ("file:///etc/passwd", "url must be http or https, got 'file'"),
    ("gopher://x", "url must be http or https"),
    ("http://169.254.169.254/latest/meta-data", "169.254.169.254 is a link-local"),
    ("http://[fe80::1]/x", "fe80::1 is a link-local"),
    ("http://[::ffff:169.254.169.254]/x", "169.254.169.254 is a link-local"),
    ("http://metadata.google.internal/computeMetadata", "cloud metadata host"),
    ("http://0.0.0.0:9200/", "0.0.0.0 is a link-local, multicast or unspecified"),
    ("http://user:pw@example.com/", "must not hold credentials"),
    ("http://{query}.example.com/", "must name its host literally"),
])
def test_unsafe_urls_are_refused(url, problem):
    assert problem in url_problem(url)
    with pytest.raises(RetrievalError, match="url"):
        parse_descriptor({**GOOD, "url": url})


def test_safe_urls_pass():
    assert url_problem("http://127.0.0.1:9200/_search") is None
    assert url_problem("https://search.example.com/{query}?k=${KEY}") is None


def test_a_literal_credential_is_refused_and_a_placeholder_is_kept_as_written():
    with pytest.raises(RetrievalError, match="header 'Authorization' holds a credential"):
        parse_descriptor({**GOOD, "headers": {"Authorization": "Bearer abc123"}})
    with pytest.raises(RetrievalError, match="header 'X-Api-Key' holds a credential"):
        parse_descriptor({**GOOD, "headers": {"X-Api-Key": "abc123"}})
    d = parse_descriptor({**GOOD, "headers": {"Authorization": "Bearer ${PROD_KEY}", "X-Team": "search"}})
    assert '"Bearer ${PROD_KEY}"' in d.to_json()


def test_kind_specific_fields():
    with pytest.raises(RetrievalError, match="a GET request has no body"):
        parse_descriptor({**GOOD, "body": {"q": "{query}"}})
    post = parse_descriptor({**GOOD, "method": "POST", "params": None, "body": {"query": {"match": {"t": "{query}"}}}})
    assert post.body == {"query": {"match": {"t": "{query}"}}}
    with pytest.raises(RetrievalError, match=r"either command .* or url"):
        parse_descriptor({"name": "m", "kind": "mcp", "tool": "t", "hits": "r", "id": "id", "score": "s"})
    mcp = parse_descriptor({"name": "m", "kind": "mcp", "command": ["python", "-m", "x"], "tool": "search",
                            "hits": "results", "id": "id", "score": "score"})
    assert mcp.command == ("python", "-m", "x") and mcp.arguments == {"query": "{query}"}


def test_templates_keep_types_for_whole_placeholders_and_never_evaluate(monkeypatch):
    monkeypatch.setenv("TEAM", "search")
    values = {"query": "sore throat", "depth": 25, "filters": ["year>=2010"], "query_vector": [0.5, -1.0]}
    template = {"q": "{query}", "size": "{depth}", "text": "n={depth} for {query}", "vec": "{query_vector}",
                "f": "{filters}", "in": "only {filters}", "team": "${TEAM}", "code": "{__import__('os')}",
                "nested": [{"k": "{depth}"}], "n": 3}
    assert fill(template, values) == {
        "q": "sore throat", "size": 25, "text": "n=25 for sore throat", "vec": [0.5, -1.0], "f": ["year>=2010"],
        "in": "only year>=2010", "team": "search", "code": "{__import__('os')}", "nested": [{"k": 25}], "n": 3}
    monkeypatch.delenv("TEAM")
    with pytest.raises(RetrievalError, match=r"environment variable TEAM .* is not set"):
        fill("${TEAM}", values)


PATHS = compile_paths({"hits": "hits.hits", "id": "_id", "score": "_score", "title": "_source.title"})


def test_mapping_takes_the_engines_order_ids_and_scores():
    response = {"hits": {"hits": [{"_id": "b", "_score": 2.5, "_source": {"title": "B"}}, {"_id": 7, "_score": "1.5"},
                                  {"_id": "b", "_score": 1.0}, {"_id": "c", "_score": 0.5}]}}
    hits = map_hits(response, PATHS, depth=10)
    assert [(h.doc_id, h.score, h.title) for h in hits] == [("b", 2.5, "B"), ("7", 1.5, None), ("c", 0.5, None)]
    assert [h.doc_id for h in map_hits(response, PATHS, depth=2)] == ["b", "7"]


@pytest.mark.parametrize(("response", "message"), [
    ({"results": []}, "hits path 'hits.hits' matched nothing in the response (an object with keys results)"),
    ({"hits": {"hits": {"a": 1}}}, "matched an object with keys a, not a list"),
    ({"hits": {"hits": [{"id": "a", "_score": 1}]}}, "id path '_id' matched None in result 1"),
    ({"hits": {"hits": [{"_id": "a", "_score": "high"}]}}, "score path '_score' matched 'high' in result 1"),
    ({"hits": {"hits": [{"_id": "a"}]}}, "score path '_score' matched None in result 1"),
])
def test_a_response_of_another_shape_is_refused_naming_the_path(response, message):
    with pytest.raises(MappingError) as caught:
        map_hits(response, PATHS, depth=10)
    assert message in str(caught.value)


CHROMA_PATHS = compile_paths({"hits": "zip(ids[0], distances[0], documents[0], metadatas[0])", "id": "[0]",
                              "score": "[1]", "text": "[2]", "title": "[3].title", "score_order": "ascending"})


def test_parallel_arrays_are_read_by_zip_and_a_distance_becomes_one_over_one_plus_itself():
    response = {"ids": [["a", "c", "b"]], "distances": [[0.25, 0.5, 1.5]], "documents": [["alpha", "gamma", "beta"]],
                "metadatas": [[{"title": "A"}, None, {"title": "B"}]]}
    hits = map_hits(response, CHROMA_PATHS, depth=10)
    assert [(h.doc_id, h.score, h.engine_score, h.title, h.text) for h in hits] == [
        ("a", 0.8, 0.25, "A", "alpha"), ("c", 2 / 3, 0.5, None, "gamma"), ("b", 0.4, 1.5, "B", "beta")]
    assert [h.doc_id for h in map_hits(response, CHROMA_PATHS, depth=2)] == ["a", "c"]
    # zip stops at the shortest array; the descending default keeps the score and no engine_score
    plain = compile_paths({"hits": "zip(ids[0], distances[0])", "id": "[0]", "score": "[1]"})
    assert [(h.doc_id, h.score, h.engine_score) for h in map_hits({"ids": [["x", "y"]], "distances": [[3]]}, plain,
                                                                   depth=10)] == [("x", 3.0, None)]


def test_a_zip_of_a_missing_array_and_an_unknown_score_order_are_refused():
    with pytest.raises(MappingError) as caught:
        map_hits({"ids": [["a"]], "distances": [[0.1]], "documents": None}, CHROMA_PATHS, depth=10)
    assert str(caught.value).startswith("hits path 'zip(ids[0], distances[0], documents[0], metadatas[0])' failed: "
                                        "In function zip(), invalid type for value: None")
    with pytest.raises(RetrievalError, match=r"score_order must be one of \('descending', 'ascending'\)"):
        parse_descriptor({**GOOD, "score_order": "lowest"})
    assert parse_descriptor({**GOOD, "score_order": "ascending"}).paths.lower_is_better
    with pytest.raises(MappingError, match=r"score path '\[1\]' matched -0.5 in result 2: score_order 'ascending' "
                                           "reads a distance, never negative"):
        map_hits({"ids": [["a", "b"]], "distances": [[0.1, -0.5]], "documents": [["x", "y"]], "metadatas": [[{}, {}]]},
                 CHROMA_PATHS, depth=10)
