import json

import pytest

from retrieval import limits
from retrieval.text.json_values import parse_json


def test_nesting_up_to_the_limit_parses_and_one_level_more_is_refused_where_it_starts():
    depth = limits.DOCUMENT_JSON_MAX_DEPTH
    assert parse_json("[" * depth + "]" * depth) == json.loads("[" * depth + "]" * depth)
    with pytest.raises(json.JSONDecodeError) as err:
        parse_json('{"a": "[[[", "b": ' + "[" * depth + "]" * depth + "}")  # brackets in a string do not count
    assert (err.value.msg, err.value.pos) == (f"nested more than {depth} levels deep", 18 + depth - 1)


def test_past_the_parser_s_own_limit_the_item_of_the_array_is_named():
    text = '[1, "x,y", {"k": [2, 3]},\n' + "[" * 5000 + "]" * 5000 + "]"
    with pytest.raises(json.JSONDecodeError) as err:
        parse_json(text)  # json.loads alone: RecursionError
    assert (err.value.msg, err.value.lineno, err.value.colno) == (
        f"nested more than {limits.DOCUMENT_JSON_MAX_DEPTH} levels deep (item 4)", 2, limits.DOCUMENT_JSON_MAX_DEPTH)
