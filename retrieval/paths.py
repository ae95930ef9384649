"""Where the checkout's own folders are: the one home of the repository's root.

`REPO_DIR` is the folder holding `retrieval/`; the defaults below it (the database `data/lancedb`,
the models' converted files `.cache`, the bundled `sample_data/`) are each read where they are
used, with the environment variable that overrides them (`WORKBENCH_DB`, `WORKBENCH_CACHE`,
`WORKBENCH_SAMPLE`).
"""

from __future__ import annotations

from pathlib import Path

REPO_DIR = Path(__file__).resolve().parents[1]
