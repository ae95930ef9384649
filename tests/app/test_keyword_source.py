"""The keyword source in the app: picked on Search, each source's own ranking on Compare, its
points per field shown, and a points slider re-scoring exactly as the core does."""

import pytest
from conftest import REPO, nullable, open_page

from retrieval.indexing.pipeline import create_collection
from retrieval.indexing.readers.parse import parse_path
from retrieval.search.config import SearchConfig
from retrieval.search.workbench import Workbench
from retrieval.store import Store
from retrieval.types import ParsedCorpus

SEARCH, COMPARE = "pages/1_Search.py", "pages/2_Compare.py"
CATALOGUE = "catalogue"
RECORDS = REPO / "sample_data" / "catalogue" / "records.json"
SUBSET = ("cn-nbs-labour-force", "cn-cgss", "ml-benchmarks", "us-bls-employment-situation", "eu-eurostat-lfs",
          "int-wb-wdi", "us-noaa-ghcnd", "int-who-gho")
THREE = "bm25=0.5,dense=0.5,keyword=0.5"


@pytest.fixture(scope="module")
def catalogue(app_db):
    """Eight records of the bundled catalogue as collection 'catalogue' in the app's database."""
    store = Store(app_db.uri)
    if not store.exists(CATALOGUE):
        documents = [d for d in parse_path(RECORDS).documents if d.id in SUBSET]
        create_collection(store, CATALOGUE, ParsedCorpus(documents))
    return CATALOGUE


def keyword_hits(workbench, query, **points):
    config = SearchConfig(weights={"keyword": 1.0}, keyword=points)
    return workbench.candidates(CATALOGUE, query, config).sources["keyword"].hits


def test_keyword_source_picked_on_search_shows_its_points(workbench, catalogue):
    at = open_page(SEARCH, collection=catalogue, q="chin", weights="bm25=0.5,dense=0.5")
    at.multiselect(key="a.extra_sources").select("keyword").run()
    assert not at.exception
    assert at.query_params["weights"] == THREE
    assert at.slider(key="a.w_keyword").value == 0.5
    config = SearchConfig(weights={"bm25": 0.5, "dense": 0.5, "keyword": 0.5})
    expected = workbench.search(catalogue, "chin", config).outcome.results
    frame = at.dataframe[0].value
    assert list(frame["id"]) == [r.doc_id for r in expected]
    # name 10 (one-word query inside the name) + description 3 + tag 2 + organisation 2 = 17; the social
    # survey: 10 + 3 + 2 = 15; machine learning: 10 + tag 2 = 12; no other record contains "chin"
    shown = dict(zip(frame["id"], nullable(frame["keyword score"]), strict=True))
    assert {k: v for k, v in shown.items() if v is not None} == {
        "cn-nbs-labour-force": 17, "cn-cgss": 15, "ml-benchmarks": 12}
    assert nullable(frame["BM25 score"]) == [None] * len(frame)


def test_compare_sources_mode_shows_each_ranking_and_a_slider_rescores(workbench, catalogue):
    at = open_page(COMPARE, collection=catalogue, q="chin", mode="sources", weights=THREE)
    assert at.radio(key="view.compare_mode").value == "sources"
    bm25, vector, keyword, points = (d.value for d in at.dataframe)  # three rankings, then the points
    assert bm25.empty  # BM25 matches whole indexed words: "chin" is none
    assert set(vector["id"]) == set(SUBSET)  # cosine similarity ranks every record
    assert list(keyword["id"]) == list(points["id"]) == ["cn-nbs-labour-force", "cn-cgss", "ml-benchmarks"]
    assert list(keyword["raw score"]) == list(points["raw score"]) == [17, 15, 12]
    assert "tags" not in keyword.columns  # the narrow column has no room: points per field below
    keyword = points
    assert list(keyword["name"]) == ["+10 (exact: chin)"] * 3  # "chin" inside "Machine Learning …" too
    assert list(keyword["tags"]) == ["+2 (china)", "0", "+2 (machine learning)"]
    assert list(keyword["organization"]) == ["+2 (chin)", "+2 (chin)", "0"]
    assert list(keyword["description"]) == ["+3 (chin)", "+3 (chin)", "0"]
    assert keyword["quality"][2] == pytest.approx(round(21 / 6, 4))  # (3 + 4 + 4 + 3 + 4 + 3) / 6

    at.slider(key="a.keyword.tag").set_value(6).run()
    assert not at.exception
    keyword = at.dataframe[3].value
    core = keyword_hits(workbench, "chin", tag=6)
    assert list(keyword["id"]) == [h.doc_id for h in core] == ["cn-nbs-labour-force", "ml-benchmarks", "cn-cgss"]
    assert list(keyword["raw score"]) == [h.raw_score for h in core] == [21, 16, 15]
    assert list(keyword["tags"]) == ["+6 (china)", "+6 (machine learning)", "0"]
    assert "tag=6," in at.query_params["keyword"]  # the link reproduces the moved slider


def test_job_reaches_employment_only_through_vectors(workbench, catalogue):
    at = open_page(COMPARE, collection=catalogue, q="job", mode="sources", weights=THREE)
    bm25, vector, keyword = (d.value for d in at.dataframe)  # nothing to explain: no points table
    assert bm25.empty and keyword.empty  # no record contains the string "job"
    labour = {"cn-nbs-labour-force", "us-bls-employment-situation", "eu-eurostat-lfs"}
    assert labour & set(vector["id"][:3])


def test_first_run_also_ingests_the_catalogue(tmp_path):
    from ui import resources

    workbench = Workbench(Store(str(tmp_path / "db")))
    assert resources.ingest_catalogue(workbench) is True
    info = workbench.info(resources.CATALOGUE_COLLECTION)
    assert info.doc_count == len(parse_path(RECORDS).documents)
    assert resources.ingest_catalogue(workbench) is False  # already there: nothing written


def test_a_first_run_stopped_half_way_resumes_and_a_finished_one_never_seeds_again(tmp_path, monkeypatch):
    """A first run's seeding leaves a marker until its last step: a run killed half-way is resumed
    at the next start (only what is missing is created); once finished, a bundled collection the
    user deletes is not brought back; a session that finds a bundled collection being created by
    another session leaves it to that one (no error)."""
    from retrieval.indexing.readers.parse import parse_bytes
    from ui import resources

    workbench = Workbench(Store(str(tmp_path / "db")))
    made: list[str] = []

    def create_missing(wb, name, path, progress, description):  # a tiny real collection per step
        if wb.store.exists(name):
            return None
        made.append(name)
        corpus = parse_bytes(b"id,text\na,apples and pears\nb,green tea\n", "tiny.csv")
        wb.create(name, corpus, cross_lingual=False)
        return corpus

    def killed(wb, progress=None):
        raise RuntimeError("killed")

    monkeypatch.setattr(resources, "_create_missing", create_missing)
    monkeypatch.setattr(resources, "store_sample_queries", lambda wb, corpus: None)
    assert resources.needs_sample(workbench)
    with monkeypatch.context() as patch:
        patch.setattr(resources, "ingest_three_kingdoms", killed)
        with pytest.raises(RuntimeError, match="killed"):
            resources.ingest_sample(workbench)
    assert made == [resources.SAMPLE_COLLECTION, resources.CATALOGUE_COLLECTION]
    assert resources.needs_sample(workbench)  # the marker is still there
    assert resources.ingest_sample(workbench) is False  # resumed; the sample was there already
    assert made[2:] == [resources.GRAPH_COLLECTION] and not resources.needs_sample(workbench)
    workbench.store.delete(resources.SAMPLE_COLLECTION)
    assert not resources.needs_sample(workbench)  # deleted by the user: not brought back
    monkeypatch.undo()
    workbench.store.delete(resources.CATALOGUE_COLLECTION)
    with Store(str(tmp_path / "db")).claim_display_name(resources.CATALOGUE_COLLECTION):  # another session
        assert resources.ingest_catalogue(workbench) is False
    assert not workbench.store.exists(resources.CATALOGUE_COLLECTION)
