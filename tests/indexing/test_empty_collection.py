"""A collection without documents (new, or cleared) is a clear message in the core, the CLI and
"why not?", never a source's failure or a traceback; adding documents makes it searchable again."""

import pyarrow as pa
import pytest
from corpora import ANIMALS

from retrieval.cli import main as cli
from retrieval.indexing.readers.parse import parse_bytes
from retrieval.search.config import SearchConfig
from retrieval.search.workbench import Workbench
from retrieval.store import Store, vector_matrix
from retrieval.types import RetrievalError

EMPTY = ("'animals' has no documents — add some on the Corpus page, or with "
         "`python -m retrieval ingest FILE --collection animals --add`")


@pytest.fixture
def cleared(tmp_path):
    workbench = Workbench(Store(str(tmp_path / "db")))
    workbench.create("animals", parse_bytes(ANIMALS.encode(), "animals.csv"))
    workbench.search("animals", "mice", SearchConfig())  # sources built on the full collection first
    workbench.clear("animals")
    return workbench


def test_searching_an_empty_collection_says_so(cleared):
    every_source = SearchConfig(weights={"bm25": 1.0, "dense": 1.0, "keyword": 1.0, "graph": 1.0})
    for config in (SearchConfig(), every_source, SearchConfig(fusion="rrf")):
        with pytest.raises(RetrievalError) as caught:
            cleared.search("animals", "mice", config)
        assert str(caught.value) == EMPTY
    with pytest.raises(RetrievalError, match="'animals' has no documents"):
        cleared.explain_document("animals", "mice", SearchConfig(), "cat")
    with pytest.raises(RetrievalError, match="'animals' has no documents"):
        cleared.source_results("animals", ["mice"], SearchConfig())
    cleared.add("animals", parse_bytes(ANIMALS.encode(), "animals.csv"))
    assert [r.doc_id for r in cleared.search("animals", "mice", SearchConfig()).outcome.results][:2] == ["cat", "fox"]


def test_the_cli_says_it_in_one_line(cleared, capsys):
    db = cleared.store.uri
    for extra in ([], ["--explain-doc", "cat"], ["--json"]):
        assert cli.main(["--db", db, "search", "animals", "mice", *extra]) == 2
        err = capsys.readouterr().err
        assert err == f"error: {EMPTY}\n"


def test_no_rows_make_an_empty_matrix_of_the_column_dimension():
    rows = pa.table({"vector": pa.array([], type=pa.list_(pa.float32(), 384))})
    assert vector_matrix(rows, "vector").shape == (0, 384)
