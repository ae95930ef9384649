"""The filter picker's entries (ui/search/filter_controls.py): a metadata value is one literal
value, also when it holds the filter language's `|` (`category=public|secret` is not two values)."""

from retrieval.search.filters import parse_filter
from ui.search.filter_controls import _join_filters, _split_filters


def test_a_value_with_a_bar_stays_one_value_through_the_picker():
    picked, other = _split_filters(["category=public\\|secret|news", "year>=2010"])
    assert picked == ["category=public\\|secret", "category=news"] and other == ["year>=2010"]
    joined = _join_filters(picked, other)
    assert joined == ["category=public\\|secret|news", "year>=2010"]
    assert parse_filter(joined[0]).values == ("public|secret", "news")
    assert _split_filters(["category=a|b"])[0] == ["category=a", "category=b"]
