"""The workbench's stated limits, in one place (docs/reliability.md, "Hardened inputs and limits").

* Numbers: the bounds `SearchConfig.validate` enforces. Within them, fusion cannot overflow: no
  NaN or infinite fused or display score for finite candidate scores (tests/test_properties.py).
* Models named by a link: only the built-in aliases and folders under `WORKBENCH_MODEL_DIRS`
  (`check_model_from_link`); the CLI, whose user is on the server, may name any path.
* JSON from a link or a file: its length and nesting (`check_json_text`), before it is parsed.
* Sizes: uploads per file and per ingest, and how much of one document a result card shows
  before "full text on demand". Each can be changed with an environment variable.

No Streamlit here: the core, the UI and the CLI read the same numbers.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from retrieval.types import RetrievalError

# ---- SearchConfig bounds (checked by SearchConfig.validate) -------------------------------------
# Each source weight is 0 or in [WEIGHT_MIN, WEIGHT_MAX], and one is > 0. So Σw ≥ 1e-6 and the
# display factors (k + 1)/Σw and 1/Σw stay ≤ ~1e12; and a weight never underflows against a
# normalised score (w·x = 0 for x > 0 would make the harmonic and geometric splits disagree).
WEIGHT_MIN = 1e-6
WEIGHT_MAX = 1000.0
RRF_K_MIN = 1.0
RRF_K_MAX = 1e6
DEPTH_MAX = 10_000  # candidates per source
TOP_K_MAX = 10_000  # ≥ DEPTH_MAX: evaluation ranks `depth` results
RERANK_TOP_N_MAX = 1_000
BM25_K1_MAX = 100.0
SOURCE_PARAM_MAX = 1e6  # every entry of the keyword / graph parameter dicts is in [0, this]
SCORE_MAX = 1e100  # |minimum scores| ≤ this; raw scores fused unnormalised ('none') are clamped to ±this
NAME_MAX = 200  # characters of a source name (a weights key)

# ---- JSON a user hands in (a link's filters= and query_weights=, a config file) -----------------
# Python's parser recurses per nesting level: 100,000 nested lists raise RecursionError, so the
# nesting is counted first, without parsing (`check_json_text`).
CONFIG_JSON_MAX_DEPTH = 32  # a config nests 3 deep (query_weights: {query: {source: weight}})
LINK_JSON_MAX_CHARS = 20_000  # one JSON value of a link


def json_depth(text: str) -> int:
    """How deep `[` and `{` nest in JSON text (brackets inside strings do not count)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            escaped, in_string = (False, True) if escaped else (char == "\\", char != '"')
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in "]}":
            depth -= 1
    return deepest


def check_json_text(text: str, what: str, max_chars: int | None = None) -> None:
    """Refuse JSON text longer than `max_chars` or nested deeper than `CONFIG_JSON_MAX_DEPTH`, before
    it is parsed; the message never repeats the text."""
    if max_chars is not None and len(text) > max_chars:
        raise RetrievalError(f"{what} is {len(text):,} characters long; the limit is {max_chars:,}")
    if json_depth(text) > CONFIG_JSON_MAX_DEPTH:
        raise RetrievalError(f"{what} is JSON nested more than {CONFIG_JSON_MAX_DEPTH} deep")


# ---- Sizes (environment variables, read once at import) -----------------------------------------


def _env_int(name: str, default: int, low: int, high: int) -> int:
    """An integer setting from the environment; a missing, unreadable or out-of-range value
    falls back to `default` (a limit must never be switched off by a typo)."""
    raw = os.environ.get(name, "").strip()
    try:
        value = int(raw)
    except ValueError:
        return default
    return value if low <= value <= high else default


MB = 1024 * 1024
# Streamlit's own `server.maxUploadSize` (.streamlit/config.toml, MB, default 200) is what the
# browser may send at all; these are the workbench's limits on what it parses.
MAX_FILE_MB = _env_int("WORKBENCH_MAX_FILE_MB", 50, 1, 10_000)  # one uploaded file
MAX_UPLOAD_MB = _env_int("WORKBENCH_MAX_UPLOAD_MB", 200, 1, 100_000)  # all files of one ingest
# An .xlsx is a zip of XML: its size says little about what it holds. The zip's declared unzipped
# sizes are checked before anything is read (Python's zipfile never yields more than a member
# declares), the cells walked (rows × columns, empty ones included) and the characters of text
# read are counted while reading (one long shared string may fill many cells). Excel itself holds
# at most 32,767 characters in a cell, so a longer one was not written by Excel.
XLSX_MAX_UNCOMPRESSED_MB = _env_int("WORKBENCH_XLSX_MAX_UNCOMPRESSED_MB", 100, 1, 100_000)
XLSX_MAX_CELLS = _env_int("WORKBENCH_XLSX_MAX_CELLS", 5_000_000, 1, 1_000_000_000)
XLSX_CELL_CHARS = 32_767
# Levels of nesting a JSON document (a .json file, a JSONL line) may have: a record nested deeper
# is refused, naming it (Python's parser stops near 1,000 levels with a RecursionError, and later
# steps — the metadata's JSON, a table's cells — recurse too).
DOCUMENT_JSON_MAX_DEPTH = 100
# Result cards and details show at most this many characters of a document's text; the rest is
# loaded on demand. Titles are cut at TITLE_CHARS.
# Collections of at least this many documents are served by the scaled backends (`bm25_backend`
# "auto" → LanceDB's native BM25 index; the vector column gets an ANN index with exact refine):
# below it BM25 from in-memory postings (tunable k1, b) and an exact in-memory vector search take
# ~1 and ~10 ms a query at 20k documents (docs/experiments/scale.md); the exact search grows
# linearly with the collection and holds all its vectors in memory.
SCALE_DOCS = _env_int("WORKBENCH_SCALE_DOCS", 50_000, 1, 1_000_000_000)
# LanceDB's IO threads for a local database (`LANCE_IO_THREADS`, set for the process by the first
# local `Store` unless already set; LanceDB's own default is 8 locally, 64 on object storage,
# which is left alone). Each IO thread keeps its read-ahead in memory while an index is built
# or the files are compacted: at 1M documents on 2 cores (bench_ingest.py, static encoder) the
# ingest's peak RSS was 1,515–1,798 MB with 8 (four runs) and 1,381–1,625 with 2 (three), at
# the same speed; the compaction alone added 519–553 MB with 8, 449–459 with 2 (the IVF_RQ
# build's 531–687 varies as much between runs as between the settings); a search
# (vector + refine, full text) took the same time (docs/experiments/ingest.md). More IO threads
# than cores do not read a local disk faster.
LANCE_LOCAL_IO_THREADS = min(8, max(2, os.cpu_count() or 2))
# The LanceDB caches (metadata, index) of a write's own connection (`Store.write_connection`): a
# streamed ingest commits one version per batch, and LanceDB's default caches keep every version's
# manifest — +97 MB over the 489 appends of 1M documents, against +47 with 16 MB caches, and the
# connection is dropped with them when the write ends. LanceDB alone, appends of 2,048 rows then
# the index steps in one process: peak 860–876 MB with the searches' connection, 764–768 with
# this one (100k: 419 either way); a 1M static-encoder ingest's stream ends at 779–784 MB instead
# of 901–909 (docs/experiments/ingest.md). Searches keep LanceDB's defaults.
WRITE_CACHE_BYTES = 16 << 20
# glibc's mmap threshold for the whole process (`store.allocator.fix_mmap_threshold`, set when a
# `Store` opens unless glibc's own MALLOC_MMAP_THRESHOLD_ is set; 0 leaves glibc's default, which
# rises to 32 MiB and then keeps LanceDB's freed buffers in its threads' arenas). LanceDB alone at
# 1M rows, the index steps in one process: peak RSS 792 MB by default, 505 with 1 MiB. Static-
# encoder ingests (bench_ingest.py): peak 812 MB against 899 at 100k, 1,142 against 1,234 at 1M
# (means of 3-4 runs; 1,132-1,158 against 1,143-1,310), ~5 % slower (each large buffer is mapped
# anew); 4 and 8 MiB saved about half as much (docs/experiments/ingest.md).
MALLOC_MMAP_THRESHOLD = _env_int("WORKBENCH_MALLOC_MMAP_THRESHOLD", 1 << 20, 0, 32 << 20)
# The vector index of a scaled collection (`indexing.indexes.build_vector_index`) and how it is searched
# (`sources.dense.DenseSource`). IVF_RQ (RaBitQ codes per partition) is scanned far faster than
# IVF_SQ's 8-bit codes, so it affords the probes a recall of 0.98 needs with a real model; its
# shortlist of `depth` re-scored exactly (refine ×1) is as good as ×3 or ×5 (the misses are
# vectors in partitions not probed). At 1M documents on this machine (bench_ivf_partitions.py,
# the vector request's p50 and recall@10 against exact, 200 queries; docs/experiments/peers.md),
# 100 probes: recall 0.988 at 14.7 ms with all-MiniLM-L6-v2 (80: 0.977, 120: 0.992 at 16.2 ms),
# 0.999 at 16.8 ms with the static encoder. IVF_SQ, shipped before, needed ~45 probes for 0.98
# with MiniLM (25: 0.947 at 18.5 ms, 40: 0.975 at 24.6, 60: 0.994 at 30.8). IVF_RQ's build takes
# longer (153 s against 20 at 1M, peak RSS 1.1 GB), once per write of a large collection.
ANN_INDEX = "IVF_RQ"
# Bits per dimension of IVF_RQ's RaBitQ codes (`indexing.indexes.ann_index_options`). The figures
# above were taken with 8, what LanceDB's `create_index(metric=…)` passes unless told. 4 orders the
# shortlist as well — recall@10 of the refine-×1 request with every partition probed: 1.0000 with
# 4 and 8 bits (MiniLM, 30k documents), 0.9997 and 0.9997 (static encoder, 100k); 1 bit, LanceDB's
# own default, 0.985 and 0.973 — and builds 4× faster (100k vectors: 2.6 s against 11.9).
# docs/experiments/ingest.md ("The vector index's bits").
ANN_RQ_BITS = 4
# A write to a collection that has its ANN index adds the new rows to it (LanceDB `optimize`: a
# delta segment partitioned by the trained centroids, 0.13 s for 2,000 rows next to 50,000)
# instead of training it again over every vector (51 s and +425 MB of RSS at 1M), unless the new
# rows are more than this share of the indexed ones or the index has this many segments: so the
# centroids are retrained before the collection has doubled (1.2⁴ ≈ 2.1) since they were. (The
# compaction merges only files the same segments cover: a data file per segment until then.)
ANN_RETRAIN_SHARE = 0.2
ANN_MAX_SEGMENTS = 5
_ANN_NPROBES_SET = _env_int("WORKBENCH_ANN_NPROBES", 0, 1, 1_000_000)  # 0: not set (or unreadable)
ANN_NPROBES = _ANN_NPROBES_SET or 100
# What one call of the MCP server's tuning tools may cost (`retrieval.serve.tuning`): judged
# queries evaluated, optimiser trials per study, seconds of a sweep or an optimisation, pairs listed.
MCP_MAX_QUERIES = _env_int("WORKBENCH_MCP_MAX_QUERIES", 2_000, 1, 1_000_000)
MCP_MAX_TRIALS = _env_int("WORKBENCH_MCP_MAX_TRIALS", 200, 1, 100_000)
MCP_MAX_SECONDS = _env_int("WORKBENCH_MCP_MAX_SECONDS", 600, 1, 86_400)
MCP_MAX_ROWS = 1_000  # per-query rows, sweep rows, judging pairs in one answer
# Probes for an index built before IVF_RQ was the default: IVF_SQ's 25 gave recall@10 0.985 with
# the static encoder at 1M (0.954 with MiniLM; `collections index` rebuilds it as IVF_RQ).
LEGACY_NPROBES = {"IvfSq": 25}


def ann_nprobes(index_type: str | None) -> int:
    """How many partitions a vector search probes in an index of `index_type` (LanceDB's name,
    e.g. "IvfRq"): `WORKBENCH_ANN_NPROBES` when set, else `LEGACY_NPROBES` for an index built
    before the default changed, else `ANN_NPROBES`."""
    return _ANN_NPROBES_SET or LEGACY_NPROBES.get(index_type or "", ANN_NPROBES)


# Collections of at least this many documents (after the ingest) get their entity graph tables
# built after the ingest, in batches (`indexing.graph.build_graph`: in the background after the app's
# or the MCP server's write, from the Graph page's button, or `collections graph NAME`; never by a
# search), so entity extraction never blocks a large
# ingest; below it every ingest writes them, as always.
GRAPH_INLINE_MAX = _env_int("WORKBENCH_GRAPH_INLINE_MAX", SCALE_DOCS, 1, 1_000_000_000)
# A new collection's entity graph setting "auto" (`indexing.graph.graph_setting`) is "off" for a
# flat corpus (records, not chunks of files) of at least this many documents: the graph source is
# for knowledge collections (Markdown, text), and extraction was most of a large ingest's time
# (853 of 1,199 s at 100k, docs/experiments/scale.md). Its graph is built when the user asks.
GRAPH_AUTO_FLAT_MAX = _env_int("WORKBENCH_GRAPH_AUTO_FLAT_MAX", 10_000, 0, 1_000_000_000)
# An English (or all-Chinese) collection on a one-language model gets cross-lingual vectors
# (multilingual E5, `indexing.plan.wants_cross_lingual`) by default below this many documents: they
# cost ~3× the ingest's CPU (300 nfcorpus abstracts: 29 CPU s with MiniLM alone, 94 with both;
# docs/experiments/cross-lingual.md). Larger ones get them when asked (`--cross-lingual`).
CROSS_LINGUAL_AUTO_MAX = _env_int("WORKBENCH_CROSS_LINGUAL_AUTO_MAX", 20_000, 0, 1_000_000_000)
EXCERPT_CHARS = _env_int("WORKBENCH_EXCERPT_CHARS", 5_000, 100, 10_000_000)
TITLE_CHARS = 500


def check_upload_sizes(files: Iterable[tuple[str, bytes]]) -> None:
    """RetrievalError naming the file (or the total) when uploads exceed MAX_FILE_MB / MAX_UPLOAD_MB."""
    total = 0
    for name, data in files:
        size = len(data)
        total += size
        if size > MAX_FILE_MB * MB:
            raise RetrievalError(f"{name} is {size / MB:.1f} MB; the workbench reads files of at most "
                                 f"{MAX_FILE_MB} MB (WORKBENCH_MAX_FILE_MB)")
    if total > MAX_UPLOAD_MB * MB:
        raise RetrievalError(f"The files add up to {total / MB:.1f} MB; one ingest reads at most {MAX_UPLOAD_MB} MB "
                             "(WORKBENCH_MAX_UPLOAD_MB)")


# ---- Models named by a link ---------------------------------------------------------------------
MODEL_DIRS_ENV = "WORKBENCH_MODEL_DIRS"


def model_dirs() -> list[Path]:
    """The folders a link may name models in: `WORKBENCH_MODEL_DIRS`, os.pathsep-separated
    (read on every call, so a test or an operator can change it); none by default."""
    raw = os.environ.get(MODEL_DIRS_ENV, "")
    return [Path(part).expanduser().resolve() for part in raw.split(os.pathsep) if part.strip()]


def model_allowed(name: str, builtins: Iterable[str]) -> bool:
    """Whether a browser user may name model `name`: a built-in alias, or a path that resolves
    (symlinks followed, '..' removed) inside one of `model_dirs()`. Decided from the text alone
    plus path resolution, never from whether the path exists, so the answer tells nothing about
    the server's files."""
    if name in set(builtins):
        return True
    if not name or "\x00" in name:
        return False
    dirs = model_dirs()
    if not dirs:
        return False
    path = Path(name).expanduser()
    if not path.is_absolute():
        return False
    resolved = path.resolve()
    return any(resolved.is_relative_to(d) for d in dirs)


def check_model_from_link(name: str, builtins: Iterable[str], what: str) -> None:
    """RetrievalError unless `model_allowed(name, builtins)`; the message says what is allowed
    and does not say whether `name` exists."""
    builtins = tuple(builtins)
    if model_allowed(name, builtins):
        return
    dirs = model_dirs()
    folders = (f", or a folder inside {', '.join(str(d) for d in dirs)}" if dirs
               else f" (the server allows no model folders: {MODEL_DIRS_ENV} is not set)")
    raise RetrievalError(f"{what} {name!r} is not allowed from the browser: use "
                         f"{' or '.join(map(repr, builtins))}{folders}")
