"""What a query set may hold, and the ids of queries typed on the Search page."""

import hashlib

from retrieval.judging.validation import ui_query_id


def test_ui_query_id_lengthens_on_a_clash():
    text = "abc"
    short = ui_query_id(text)
    assert short == "ui-" + hashlib.sha1(b"abc").hexdigest()[:8] == "ui-a9993e36"
    assert ui_query_id(text, {short: "another text"}) == "ui-a9993e364"
    assert ui_query_id(text, {short: text}) == short  # the same text keeps its id
