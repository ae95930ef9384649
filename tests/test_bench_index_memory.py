"""benchmarks/bench_index_memory.py: the table a streamed ingest lays out, and one small run of
every index step, each in its own process (figures present and consistent; no memory figure is
asserted, they are the machine's)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import lancedb
import pytest

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("bench_index_memory", REPO / "benchmarks" / "bench_index_memory.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
XQUAD = REPO / "sample_data" / "xquad"


def test_the_table_is_laid_out_as_a_streamed_ingest_writes_it(tmp_path):
    bench.make_table(tmp_path / "db", 5000, XQUAD)
    table = lancedb.connect(str(tmp_path / "db")).open_table("c")
    assert table.count_rows() == 5000
    versions = table.list_versions()
    assert len(versions) == 3 and versions[-1]["metadata"]["total_data_files"] == "3"  # 2,048 + 2,048 + 904
    rows = table.to_arrow()
    assert rows.column("id").to_pylist()[:2] == ["d0", "d1"]
    first = json.loads((XQUAD / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert rows.column("tokens")[0].as_py().split()[:3] == (first["title"] + " " + first["text"]).lower().split()[:3]
    vectors = rows.column("vector").combine_chunks().flatten().to_numpy().reshape(-1, bench.DIM)
    assert abs(float((vectors[0] ** 2).sum()) - 1) < 1e-5


@pytest.mark.slow  # four processes that each import LanceDB: ~10 s on 2 cores
def test_every_step_runs_in_its_own_process_and_reports_its_peak(capsys):
    bench.main(["--docs", "3000", "--source", str(XQUAD), "--json"])
    out = json.loads(capsys.readouterr().out)
    assert out["io_threads"] is None and [s["docs"] for s in out["sizes"]] == [3000]
    steps = out["sizes"][0]["steps"]
    assert list(steps) == list(bench.STEPS)
    for r in steps.values():
        assert r["s"] >= 0 and r["base_mb"] > 50 and r["added_mb"] == r["peak_mb"] - r["base_mb"] >= 0
