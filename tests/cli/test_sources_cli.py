"""`python -m retrieval sources add FILE | list | remove NAME`, and an outside engine evaluated on a
BEIR folder alone and fused with BM25 (`evaluate DIR --source FILE --weights NAME=1 --json`),
against a real engine on 127.0.0.1 (tests/search_engine.py) serving the folder's paragraphs."""

import json
from pathlib import Path

import pytest
from search_engine import Engine, descriptor

from retrieval.cli.main import main
from retrieval.evaluation.evaluate import evaluate_run, run_from_rankings
from retrieval.sources.external import close_engines

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data" / "xquad"


def run(capsys, *args):
    capsys.readouterr()
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def beir(tmp_path_factory):
    """The sample's first 20 English paragraphs with their questions, and an engine serving them."""
    folder = tmp_path_factory.mktemp("beir") / "xquad-20"
    (folder / "qrels").mkdir(parents=True)
    docs = (SAMPLE / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:20]
    keep = {json.loads(d)["_id"] for d in docs}
    qrel_lines = (SAMPLE / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()
    kept = [line for line in qrel_lines[1:] if line.split("\t")[1] in keep][:20]
    wanted = {line.split("\t")[0] for line in kept}
    queries = [q for q in (SAMPLE / "queries.jsonl").read_text(encoding="utf-8").splitlines()
               if json.loads(q)["_id"] in wanted]
    (folder / "corpus.jsonl").write_text("\n".join(docs) + "\n", encoding="utf-8")
    (folder / "queries.jsonl").write_text("\n".join(queries) + "\n", encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text("\n".join([qrel_lines[0], *kept]) + "\n", encoding="utf-8")
    engine = Engine({d["_id"]: (d.get("title", ""), d["text"]) for d in map(json.loads, docs)})
    base = engine.start()
    file = folder.parent / "engine.json"
    file.write_text(json.dumps(descriptor(base)), encoding="utf-8")
    qrels = {}
    for line in kept:
        q, d, g = line.split("\t")
        qrels.setdefault(q, {})[d] = int(g)
    yield {"folder": folder, "file": file, "engine": engine, "base": base, "qrels": qrels,
           "queries": {json.loads(q)["_id"]: json.loads(q)["text"] for q in queries}}
    engine.stop()
    close_engines()


def test_sources_add_list_remove_and_refusals(beir, tmp_path, capsys):
    db = str(tmp_path / "db")
    assert run(capsys, "--db", db, "sources", "list") == (0, "", "")
    code, _, err = run(capsys, "--db", db, "sources", "add", str(beir["file"]))
    assert code == 0 and "registered http source 'engine'" in err
    code, out, _ = run(capsys, "--db", db, "sources", "list")
    assert code == 0 and out.startswith(f"engine\thttp\tengine\t{beir['base']}/search\t")
    code, _, err = run(capsys, "--db", db, "sources", "add", str(beir["file"]))
    assert code == 2 and "a source named 'engine' is registered already" in err
    assert run(capsys, "--db", db, "sources", "add", str(beir["file"]), "--replace")[0] == 0
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**descriptor("http://169.254.169.254"), "name": "meta"}), encoding="utf-8")
    code, _, err = run(capsys, "--db", db, "sources", "add", str(bad))
    assert code == 2 and "169.254.169.254 is a link-local" in err and "Traceback" not in err
    bad.write_text(json.dumps({**descriptor(beir["base"]), "name": "bm25"}), encoding="utf-8")
    code, _, err = run(capsys, "--db", db, "sources", "add", str(bad))
    assert code == 2 and "'bm25' is a built-in source's name" in err
    code, _, err = run(capsys, "--db", db, "sources", "remove", "nope")
    assert code == 2 and "no outside source named 'nope'; registered: engine" in err
    assert run(capsys, "--db", db, "sources", "remove", "engine")[0] == 0
    assert run(capsys, "--db", db, "sources", "list", "--json")[1] == "[]\n"


@pytest.mark.slow
def test_evaluate_the_engine_alone_and_fused_with_bm25(beir, tmp_path, capsys):
    db = str(tmp_path / "db")
    folder, file = str(beir["folder"]), str(beir["file"])
    code, out, err = run(capsys, "--db", db, "evaluate", folder, "--source", file, "--weights", "engine=1", "--json")
    assert code == 0, err
    alone = json.loads(out)
    assert set(alone["metrics"]) == {"engine", "hybrid"} and alone["n_queries"] == len(beir["qrels"])
    assert "errors" not in alone and "queries/s)" in err
    rankings = {q: [i for i, _ in beir["engine"].search(beir["queries"][q], 100)] for q in beir["qrels"]}
    direct, _ = evaluate_run(beir["qrels"], run_from_rankings(rankings), ["ndcg@10"])
    assert alone["metrics"]["engine"]["ndcg@10"] == round(direct["ndcg@10"], 6)  # the JSON keeps 6 digits
    calls = beir["engine"].calls
    # registered instead of given per run: the same engine by its name, fused with BM25; answers cached
    assert run(capsys, "--db", db, "sources", "add", file)[0] == 0
    code, out, err = run(capsys, "--db", db, "evaluate", folder, "--weights", "bm25=1,engine=1", "--json")
    assert code == 0, err
    fused = json.loads(out)
    assert set(fused["metrics"]) == {"bm25", "engine", "hybrid"}
    assert fused["metrics"]["engine"] == alone["metrics"]["engine"]
    assert beir["engine"].calls == calls + len(beir["qrels"])  # a new process-level cache: once per query
    # the fusion grid over BM25 and the engine: every variant from one retrieval, once per query
    code, out, err = run(capsys, "--db", db, "sweep", folder, "--sources", "bm25,engine", "--json")
    assert code == 0, err
    grid = [v for v in json.loads(out) if set(v["config"]["weights"]) == {"bm25", "engine"}]
    assert len(grid) > 20 and len({v["metrics"]["ndcg@10"] for v in grid}) > 1
    assert beir["engine"].calls == calls + 2 * len(beir["qrels"])
    # a snapshot of the fused config, then the CI gate against it: the engine is a source by name there too
    fused_args = ("--db", db, "evaluate", folder, "--weights", "bm25=1,engine=1")
    code, _, err = run(capsys, *fused_args, "--snapshot", "with-engine")
    assert code == 0, err
    code, _, err = run(capsys, *fused_args, "--baseline", "with-engine", "--fail-if-worse", "0.01")
    assert code == 0 and "Δ +0.0000" in err, err
    assert beir["engine"].calls == calls + 4 * len(beir["qrels"])  # each command asks once per query
    # a misspelt engine is an error naming the built-in sources and the outside engines
    code, _, err = run(capsys, "--db", db, "evaluate", folder, "--weights", "bm25=1,engin=1")
    assert code == 2 and "unknown source 'engin'" in err and "outside engines: engine" in err, err
