"""What an ingest derives for a collection, read from the sources' declarations
(`SourceSpec.derives`: bm25 the tokens and the native full-text index, dense the vector columns
and their ANN index by size, graph the entity tables, keyword nothing), and the choices made for a
new collection: its model, whether it also gets cross-lingual vectors, its catalogue entry.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from retrieval import limits  # `embed.load_encoder` looked up per call: a test may swap the encoder
from retrieval.models import embed
from retrieval.models.embed import E5
from retrieval.sources import SOURCES
from retrieval.sources.base import Derives
from retrieval.store import GRAPH_KINDS, XL_COLUMN, CollectionInfo, now_iso
from retrieval.text.tokenize import TOKENIZER_NAME
from retrieval.types import RetrievalError

# The catalogue fields naming each vector column's model and dimension.
VECTOR_MODELS = {"vector": ("model", "dim"), XL_COLUMN: ("xl_model", "xl_dim")}


@functools.cache
def declared() -> Derives:
    """Everything the registered sources declare, each kind in registry order, without repeats."""
    def union(kind: str) -> tuple[str, ...]:
        return tuple(dict.fromkeys(x for spec in SOURCES.values() for x in getattr(spec.derives, kind)))
    return Derives(columns=union("columns"), text_index=union("text_index"), vector_index=union("vector_index"),
                   tables=union("tables"))


def vector_models(info: CollectionInfo) -> dict[str, str]:
    """Vector column → model, for the declared vector columns the collection has (a model in its
    catalogue entry): `vector` always, `vector_xl` when it has cross-lingual vectors."""
    wanted = declared().columns
    return {column: getattr(info, model) for column, (model, _) in VECTOR_MODELS.items()
            if column in wanted and getattr(info, model)}


def encoders_for(info: CollectionInfo) -> dict:
    """The loaded encoder of each of the collection's vector columns (`vector_models`), checked
    to still give the dimension the collection holds."""
    encoders = {}
    for column, model in vector_models(info).items():
        encoder = embed.load_encoder(model)
        dim = getattr(info, VECTOR_MODELS[column][1])
        if encoder.spec.dim != dim:
            holds = "the collection holds" if column == "vector" else "the collection's cross-lingual column holds"
            raise RetrievalError(f"Model {model!r} now gives {encoder.spec.dim}-d vectors, {holds} {dim}-d ones")
        encoders[column] = encoder
    return encoders


def text_index_columns() -> tuple[str, ...]:
    """The columns under LanceDB's native full-text index, rebuilt after every write."""
    return declared().text_index


def ann_columns(info: CollectionInfo) -> list[str]:
    """The collection's vector columns that get an ANN index once it is large."""
    return [column for column in vector_models(info) if column in declared().vector_index]


def derives_graph() -> bool:
    """Whether an ingest extracts entities: a source reads the entity graph tables."""
    return set(GRAPH_KINDS) <= set(declared().tables)


def wants_cross_lingual(language: str, model: str, documents: int, requested: bool | None = None) -> bool:
    """Whether a new collection gets cross-lingual vectors (`vector_xl`, multilingual E5): so that
    a question in the other language finds its documents with default settings (Chinese
    questions over English XQuAD paragraphs: nDCG@10 0.095 with MiniLM alone, 0.815 with E5;
    docs/experiments/cross-lingual.md), while the collection's own model (MiniLM for English,
    which E5 would cost 0.012–0.013 nDCG@10) keeps serving queries in its language.

    Only a one-language collection ('en' or 'zh', which a query can cross) whose model is not
    the multilingual one needs them. `requested` None (auto): below
    `limits.CROSS_LINGUAL_AUTO_MAX` documents, where the second encoder (~3× the ingest's CPU) is
    affordable; True / False decide for the user."""
    if language not in ("en", "zh") or model == E5 or requested is False:
        return False
    return requested is True or documents < limits.CROSS_LINGUAL_AUTO_MAX


def new_collection(table: str, display: str, language: str, model: str, documents: int,
                   cross_lingual: bool | None = None, description: str = "") -> CollectionInfo:
    """The catalogue entry of a new collection (table and display name, `Store.new_names`) before
    its first write: its model, and E5 cross-lingual vectors when `wants_cross_lingual` says so
    for `documents` documents in `language`. The document count, language mix and truncation
    count are the write's to fill in."""
    import lancedb  # its version only; the Store has it loaded by now

    encoder = embed.load_encoder(model)
    xl = embed.load_encoder(E5) if wants_cross_lingual(language, encoder.spec.name, documents, cross_lingual) else None
    now = now_iso()
    backend = vectors_backend("", [e.backend for e in (encoder, xl) if e is not None], new=True)
    return CollectionInfo(
        name=table, model=encoder.spec.name, dim=encoder.spec.dim, tokenizer=TOKENIZER_NAME, language=language,
        doc_count=0, created=now, updated=now, lancedb_version=lancedb.__version__, description=description,
        display_name=display, truncated=0, xl_model=xl.spec.name if xl else "", xl_dim=xl.spec.dim if xl else 0,
        encoder_backend=backend,
    )


def vectors_backend(recorded: str, backends: Iterable[str], new: bool = False) -> str:
    """The catalogue's `encoder_backend` after a write whose vectors came from `backends`: every
    backend that computed some of the collection's vectors, sorted, joined by "+" ("onnx-int8",
    "onnx-int8+torch"); an older collection's "" (not recorded) stays "" unless `new`."""
    if not recorded and not new:
        return ""
    return "+".join(sorted(({*recorded.split("+")} - {""}) | set(backends)))
