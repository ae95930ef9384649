"""benchmarks/bench_ingest.py: the repeated corpus, the stage timer, and one small run on the
bundled XQuAD sample (figures present and consistent; no timing is asserted)."""

from __future__ import annotations

import importlib.util
import json
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("bench_ingest", REPO / "benchmarks" / "bench_ingest.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)


def test_repeated_rows_keep_the_texts_and_make_every_id_unique():
    rows = [{"_id": "a", "title": "T", "text": "one"}, {"_id": "b", "text": "two"}]
    out = list(bench.repeated(rows, 5))
    assert [r["_id"] for r in out] == ["a", "b", "a~1", "b~1", "a~2"]
    assert [r["text"] for r in out] == ["one", "two", "one", "two", "one"]
    assert [r["title"] for r in out] == ["T", "", "T", "", "T"]


def test_stage_timer_charges_a_nested_call_to_the_inner_stage_only():
    timer = bench.StageTimer()
    inner = timer.timed("inner", lambda: time.sleep(0.02))

    def outer_body():
        inner()
        time.sleep(0.01)
    timer.timed("outer", outer_body)()
    assert 0.02 <= timer.seconds["inner"] < timer.seconds["inner"] + timer.seconds["outer"]
    assert 0.01 <= timer.seconds["outer"] < 0.02 + 0.01  # the inner 0.02 s is not counted again
    assert list(timer.timed_iterator("read", iter([1, 2, 3]))) == [1, 2, 3]
    assert set(timer.seconds) == {"inner", "outer", "read"}
    main = timer.main_seconds
    assert main == sum(timer.seconds.values())
    # A stage in another thread (the tokenising ahead) is counted, but not as the main thread's time.
    worker = threading.Thread(target=timer.timed("tokenise", lambda: time.sleep(0.01)))
    worker.start()
    worker.join()
    assert timer.seconds["tokenise"] >= 0.01 and timer.main_seconds == main


def test_timed_pipeline_restores_every_wrapped_function():
    from retrieval.indexing import derive, overlap, pipeline, writer
    from retrieval.indexing.readers.stream import DocumentStream

    before = (pipeline.document_records, pipeline.graph_rows, pipeline.count_truncated, pipeline.index_for_size,
              derive.EmbedBatches.__call__, writer.CollectionWriter.append, DocumentStream.batches,
              overlap.Ahead.__next__)
    with bench.timed_pipeline(bench.StageTimer()):
        assert pipeline.document_records is not before[0]
        assert overlap.Ahead.__next__ is not before[-1]
    after = (pipeline.document_records, pipeline.graph_rows, pipeline.count_truncated, pipeline.index_for_size,
             derive.EmbedBatches.__call__, writer.CollectionWriter.append, DocumentStream.batches,
             overlap.Ahead.__next__)
    assert after == before


def test_a_small_run_reports_every_key_and_stage(capsys, tmp_path):
    # 10 of the sample's paragraphs (5 English, their 5 Chinese translations): seconds to embed, not 130 documents twice
    lines = (REPO / "sample_data" / "xquad" / "corpus.jsonl").read_text(encoding="utf-8").splitlines()
    source = tmp_path / "corpus.jsonl"
    source.write_text("\n".join(lines[:5] + lines[60:65]) + "\n", encoding="utf-8")
    bench.main([str(source), "--docs", "13", "--json"])

    result = json.loads(capsys.readouterr().out)
    assert result["docs"] == 13  # 10 sample paragraphs, then 3 repeated with new ids
    assert {"ingest_docs_per_s", "encoder_docs_per_s", "peak_rss_mb", "stream_peak_rss_mb", "stages",
            "device"} <= set(result)
    assert 0 < result["stream_peak_rss_mb"] <= result["peak_rss_mb"]  # a high-water mark, taken earlier
    assert list(result["stages"]) == list(bench.STAGES)
    assert result["device"] in ("cpu", "cuda")
    assert result["stages"]["embed"] > 0 and result["stages"]["tokenise"] > 0 and result["stages"]["entities"] > 0
    assert result["graph"] == "current"
    assert result["ahead"] == 2 and result["encoder_docs"] == 13
    # read and tokenise ran in the tokenising thread, beside the writing thread's stages
    assert sum(v for k, v in result["stages"].items() if k not in ("read", "tokenise")) <= result["ingest_s"] + 0.01


def test_one_step_after_the_other_and_the_encoder_on_a_sample(capsys):
    bench.main([str(REPO / "sample_data" / "xquad" / "corpus.jsonl"), "--docs", "30", "--ahead", "0",
                "--encoder-docs", "20", "--graph", "off", "--json"])

    result = json.loads(capsys.readouterr().out)
    assert (result["docs"], result["ahead"], result["encoder_docs"], result["graph"]) == (30, 0, 20, "off")
    assert result["stages"]["wait"] == 0 and result["stages"]["entities"] == 0
    assert sum(result["stages"].values()) <= result["ingest_s"] + 0.01  # one thread: the stages add up


def test_the_timer_notes_the_peak_rss_when_a_stage_first_begins(monkeypatch):
    marks = iter([100.0, 250.0, 999.0])
    monkeypatch.setattr(bench, "peak_rss_mb", lambda: next(marks))
    timer = bench.StageTimer()
    write, indexes = timer.timed("write", lambda: None), timer.timed("indexes", lambda: None)
    write()
    write()  # only the first start of a stage is noted
    indexes()
    indexes()
    assert timer.peak_mb_at_start == {"write": 100.0, "indexes": 250.0}
    assert next(marks) == 999.0  # read twice, no more
