"""Hybrid retrieval core of the search relevance workbench: ingest, tokenise, store (LanceDB),
per-source retrieval, explained fusion, thresholds, rerank and evaluation. No Streamlit here."""

import os

# No machine of this project reaches a model hub: fail fast instead of trying to download.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("LANCEDB_LOG", "error")
# torch threads spin-wait while any other process is busy, 3–5× slower on 2 cores; must be set before torch loads.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
