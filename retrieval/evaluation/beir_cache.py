"""A BEIR folder as a cache collection: parsed, ingested once under a name that changes with its
content, the model and the encoder backends (`beir_collection_name`), and reused after
(`ensure_beir_collection`: what `retrieval evaluate` and `sweep` judge a BEIR folder on, and the
benchmarks)."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path

from retrieval.store import Store
from retrieval.types import ParsedCorpus, RetrievalError

# Bumped when the ingest pipeline starts writing something a cached collection lacks (2: the
# cross-lingual vectors), so an older cache is not reused.
BEIR_CACHE_FORMAT = 2


def beir_collection_name(folder: Path, model: str | None, cross_lingual: bool | None = None) -> str:
    """A cache collection name for a BEIR folder: its name plus a hash of path, corpus content,
    model, the encoder backends its vectors would come from and `BEIR_CACHE_FORMAT`.

    The hash changes when the corpus's bytes change, the model does or its backend (a GPU, the
    int8 export, $WORKBENCH_ENCODER_BACKEND), so a stale cache is never reused and a figure is
    never of vectors another backend computed; a copy of the same file (a new modification time)
    is still recognised. `cross_lingual` False (one model only, no E5 vectors) names another
    collection than the default (None: as `indexing.plan.wants_cross_lingual` decides), whose
    name is unchanged by this option.
    """
    from retrieval.models.embed import BUILTIN_MODELS, backend_for

    content = hashlib.sha1()
    with (folder / "corpus.jsonl").open("rb") as corpus:
        for block in iter(lambda: corpus.read(1 << 20), b""):
            content.update(block)
    # The named model, or either built-in (chosen by language), and E5 (cross-lingual vectors).
    backends = ",".join(f"{m}={backend_for(m)}" for m in sorted({m for m in (model, *BUILTIN_MODELS) if m}))
    key = f"{folder.resolve()}|{content.hexdigest()}|{model}|{BEIR_CACHE_FORMAT}|{backends}"
    if cross_lingual is not None:
        key += f"|cross-lingual={cross_lingual}"
    digest = hashlib.sha1(key.encode()).hexdigest()[:10]
    slug = re.sub(r"[^a-z0-9]+", "-", folder.name.lower()).strip("-")[:40] or "beir"
    return f"eval-{slug}-{digest}"


def ensure_beir_collection(
    store: Store,
    folder: str | Path,
    model: str | None = None,
    log: Callable[[str], None] = lambda message: None,
    progress: Callable[[str, int, int], None] | None = None,
    skip_invalid: bool = False,
    cross_lingual: bool | None = None,
) -> tuple[str, ParsedCorpus]:
    """Parse a BEIR folder; ingest it into a cache collection unless one exists already.
    `skip_invalid`: corpus lines with a problem are left out (and said; `ParsedCorpus.skipped`),
    their judgments kept: relevant documents no search can find. `cross_lingual`: False embeds
    with the collection's model only (no E5 vectors for questions in the other language: about a
    third of the ingest's CPU); None as `indexing.plan.wants_cross_lingual` decides."""
    from retrieval.indexing.pipeline import create_collection
    from retrieval.indexing.readers.options import ParseOptions
    from retrieval.indexing.readers.parse import parse_path, skipped_note

    folder = Path(folder)
    if not (folder / "corpus.jsonl").is_file():
        raise RetrievalError(f"{folder} is not a BEIR folder: no corpus.jsonl")
    corpus = parse_path(folder, ParseOptions(skip_invalid=skip_invalid))
    if corpus.skipped:
        log(skipped_note(corpus.skipped))
    if not corpus.qrels:
        raise RetrievalError(f"{folder} has no qrels/*.tsv judgments")
    name = beir_collection_name(folder, model, cross_lingual)
    if store.exists(name):
        log(f"reusing cached collection {name}")
    else:
        log(f"ingesting {len(corpus.documents)} documents into {name} …")
        # graph "on": an evaluation may weigh the graph source, and a BEIR corpus is flat records
        # (whose "auto" would leave a large one's graph off and change its rankings).
        create_collection(store, name, corpus, model=model, description=f"BEIR cache of {folder}", progress=progress,
                          cross_lingual=cross_lingual, graph="on")
    return name, corpus
