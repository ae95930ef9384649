"""AppTest fixtures: one small real collection in a temporary LanceDB for the whole session.

The app and the tests share one Workbench (the app's `st.cache_resource` one, keyed by the
database location), so expected values are computed from the very candidates the page fused.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from streamlit.testing.v1 import AppTest

from retrieval.indexing.pipeline import create_collection
from retrieval.indexing.readers.parse import parse_path
from retrieval.search.config import SearchConfig
from retrieval.search.workbench import Workbench
from retrieval.store import Store
from retrieval.types import Document, ParsedCorpus

REPO = Path(__file__).resolve().parents[2]
APP = REPO / "app.py"  # the entry script: the frame around every page (st.navigation)
COLLECTION = "small"
QUERY = "How many points did the Panthers defense surrender?"
TIMEOUT = 180  # first runs load embedding models (~10 s each on two cores)

# A document whose text is markup: the page must show it literally.
UNSAFE = Document(
    id="unsafe-1",
    title="<b>Markup</b> **title**",
    text="Unsafe <script>alert(1)</script> text with **x** markdown, _y_ and [a link](http://example.com) "
         "that must stay literal.",
    metadata={"source": "test", "quality": 3},
)


@pytest.fixture(scope="session")
def app_db(tmp_path_factory):
    """WORKBENCH_DB -> a temp folder holding collection 'small': 8 English and 8 Chinese sample
    paragraphs plus one markup document (mixed language: multilingual-e5-small)."""
    db = tmp_path_factory.mktemp("app_lancedb")
    patch = pytest.MonkeyPatch()
    patch.setenv("WORKBENCH_DB", str(db))
    sample = parse_path(REPO / "sample_data" / "xquad")
    wanted = {f"{lang}-{i:03d}" for lang in ("en", "zh") for i in range(1, 9)}
    documents = [d for d in sample.documents if d.id in wanted] + [UNSAFE]
    create_collection(Store(str(db)), COLLECTION, ParsedCorpus(documents))
    yield SimpleNamespace(uri=str(db), collection=COLLECTION, n_docs=len(documents))
    patch.undo()


@pytest.fixture(autouse=True)
def on_the_app_db(app_db):
    """Every app test opens the app on the session's database; a test that wants another sets
    WORKBENCH_DB itself. (On an empty one the app first ingests the bundled sample: ~13 s a test.)"""


@pytest.fixture
def workbench(app_db) -> Workbench:
    from ui.resources import workbench

    wb = workbench()
    assert wb.store.uri == app_db.uri
    return wb


def open_page(page: str | None = None, **params: str) -> AppTest:
    """A new session opened on `page` (e.g. 'pages/1_Search.py'; None: Home) with URL `params`,
    as when a shared link is opened. The link names the test collection unless `params` do
    (other tests add collections, and without a link the first one by name is picked)."""
    params.setdefault("collection", COLLECTION)
    at = AppTest.from_file(str(APP), default_timeout=TIMEOUT)
    for key, value in params.items():
        at.query_params[key] = value
    if page:
        at.switch_page(page)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def fused(workbench: Workbench, query: str = QUERY, **config):
    """What the core computes for `config` on the test collection: (config, FusionOutcome)."""
    config = SearchConfig(**config)
    candidates = workbench.candidates(COLLECTION, query, config)
    return config, workbench.rank(candidates, config).outcome


def nullable(values) -> list:
    """A frame column as plain values, <NA>/NaN -> None."""
    return [None if (v is None or (isinstance(v, float) and math.isnan(v)) or v is pd.NA) else v for v in values]


def all_widgets(at: AppTest) -> list:
    kinds = ("selectbox", "slider", "toggle", "number_input", "text_input", "radio", "multiselect",
             "file_uploader", "button", "checkbox")
    return [w for kind in kinds for w in at.get(kind)]


def plain(markdown: str) -> str:
    """Markdown with our backslash escapes removed: the text a reader sees."""
    import re

    return re.sub(r"\\(.)", r"\1", markdown)
