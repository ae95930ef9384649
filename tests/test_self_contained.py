"""The repository is self-contained: its tests read only data inside it (sample_data/, tests/).

Two checks: no test names a path beside the repository (the evaluation sets in ../shared/eval
are for benchmarks only), and a copy of the repository's files in an empty temporary folder,
with nothing beside it, passes a small representative part of the suite, including tests that
read ../shared/eval before.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from retrieval.models.embed import cache_dir

REPO = Path(__file__).resolve().parents[1]

# Ways a test could reach the folders beside the repository: a literal ../shared path, a "shared"
# path segment, or the repository's parent. ("../etc" in the name validators' tests is input.)
OUTSIDE = re.compile(r"\.\./shared|[\"']shared[\"']\s*/|\bREPO\.parent\b|parents\[1\]\.parent")

# A few tests per area, all of them quick: the trec_eval equality on the bundled sample, parsing
# the bundled sample and a generated large corpus, a sweep's structure, A/B tests against scipy,
# the fusion maths. (The CLI tests, which once read ../shared/eval too, run in the suite itself:
# here their four model-loading processes cost 16 s and add no check of where data is read.)
SUBSET = [
    "tests/evaluation/test_evaluate.py::test_metrics_equal_trec_eval_on_a_real_bm25_run_over_the_sample",
    "tests/indexing/test_ingest.py::test_beir_bundled_xquad_sample",
    "tests/indexing/test_ingest.py::test_beir_large_corpus_parses_whole",
    "tests/evaluation/test_abtest.py::test_t_test_p_value_equals_scipy_on_the_per_query_values",
    "tests/evaluation/test_sweep.py::test_default_grid_has_132_variants_split_as_documented",
    "tests/search/test_fusion.py",
]


def repository_files() -> list[Path]:
    """What a clone holds (tracked files), plus new files not yet committed and not ignored."""
    out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                         cwd=REPO, capture_output=True, check=True).stdout
    return [Path(p) for p in sorted(set(out.decode().split("\0"))) if p and (REPO / p).is_file()]


def test_no_test_names_a_path_outside_the_repository():
    offenders = []
    for path in sorted((REPO / "tests").rglob("*.py")):
        if path.name == Path(__file__).name:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
            if OUTSIDE.search(line):
                offenders.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
    assert not offenders, "tests must read only data inside the repository:\n" + "\n".join(offenders)


def test_a_copy_with_nothing_beside_it_passes_a_part_of_the_suite(tmp_path):
    alone = tmp_path / "alone"  # the copy's parent holds nothing else: no ../shared
    copy = alone / "repo"
    for relative in repository_files():
        target = copy / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / relative, target)
    assert sorted(p.name for p in alone.iterdir()) == ["repo"]
    assert (copy / "sample_data" / "xquad" / "corpus.jsonl").is_file()
    # The models' converted files (E5's folder, the ONNX exports) are this machine's state, made
    # by `retrieval prepare`, not data of the repository: the copy reads them where this checkout
    # does instead of converting them again (15 s), and still reads no data beside itself.
    env = {**os.environ, "WORKBENCH_DB": str(tmp_path / "db"), "WORKBENCH_CACHE": str(cache_dir()),
           "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    env.pop("PYTHONPATH", None)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *SUBSET],
                          cwd=copy, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert " passed" in done.stdout and "skipped" not in done.stdout
