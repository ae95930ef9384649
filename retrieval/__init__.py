"""Hybrid retrieval core of the search relevance workbench: ingest, tokenise, store (LanceDB),
per-source retrieval, explained fusion, thresholds, rerank and evaluation. No Streamlit here.

One package per domain, in layers (docs/architecture.md; a package imports only lower ones):

    types.py     plain data passed between stages, and the user-facing errors     (layer 0)
    limits.py    every bound and size limit; cache.py every cache of the core      (layer 1)
    addresses.py which hosts outgoing requests may call; loopback                 (layer 1)
    paths.py     where the checkout's own folders are (REPO_DIR)                   (layer 1)
    store/       collections in LanceDB: tables, catalogue, locks, journal, versions (2)
    text/        text analysis: tokenize, decode, chunk, highlight, entities       (2)
    models/      the encoders and their backends                                   (3)
    sources/     one module per source, and the registry                           (4)
    judging/     query sets, judgments, raters, formats, the LLM judge             (4)
    indexing/    files in, and the one write path                                  (5)
    search/      config, ranking plan, fusion, retriever, the Workbench facade     (6)
    evaluation/  metrics, sweeps, optimiser, A/B, snapshots                        (7)
    rule_tuning/ query rules measured (each left out in turn) and suggested        (8)
    cli/         the command line; serve/ the MCP server                           (9)
"""

import os

# No machine of this project reaches a model hub: fail fast instead of trying to download.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("LANCEDB_LOG", "error")
# torch threads spin-wait while any other process is busy, 3–5× slower on 2 cores; must be set before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# Lance runs its compute (full-text scoring, vector distances) on a pool of cores − 2 threads,
# at least 1: on 2 cores a search's BM25 and vector queries then queue for one thread (at 1M
# documents 40.9 ms together against 31.5 for the slower alone; with 2 threads 32.3 ms,
# docs/experiments/peers.md). Read once, when Lance first computes.
os.environ.setdefault("LANCE_CPU_THREADS", str(max(2, (os.cpu_count() or 2) - 2)))
# (LANCE_IO_THREADS depends on where the database is: set by the first local Store, store/database.py.)
