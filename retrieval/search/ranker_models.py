"""Learned ranker models, in the LanceDB table `_ranker_models` of the store.

A model is LightGBM's own text format (no pickle), named by its content: id = 'lambdamart-' +
the first 16 hex digits of the SHA-256 of the text, so saving the same model twice is one row
and a config's `ranker` (the id) can never point at a different model than the one it was
evaluated with. One row per id: id, text, saved (UTC time). Each write is one LanceDB commit (a
merge-insert keyed on the id) of the keyed side table (`store.side_tables.KeyedTable`), under its
lock.
"""

from __future__ import annotations

import hashlib
import re

import pyarrow as pa

from retrieval.store import Store, counts_as_write, now_iso
from retrieval.store.side_tables import KeyedTable
from retrieval.types import RetrievalError

MODELS_TABLE = "_ranker_models"
MODEL_ID_RE = re.compile(r"lambdamart-[0-9a-f]{16}")  # fullmatch
MODELS_SCHEMA = pa.schema([
    pa.field("id", pa.string(), nullable=False),
    pa.field("text", pa.string(), nullable=False),
    pa.field("saved", pa.string(), nullable=False),
])
MODEL_MAX_CHARS = 20_000_000
# An exported config that names a learned ranker carries its model under this key (saved_configs.py).
BUNDLE_KEY = "ranker_model"


def model_id(text: str) -> str:
    """'lambdamart-' + sha256(text)[:16]."""
    return "lambdamart-" + hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def validate_model_id(value: str) -> str:
    if not isinstance(value, str) or not MODEL_ID_RE.fullmatch(value):
        raise RetrievalError(f"A learned ranker is named 'lambdamart-' and 16 hex digits, got {value!r}")
    return value


def unbundled(data: dict, store: Store) -> dict:
    """A config's fields from an exported config (`saved_configs.ConfigStore.export_json`): the model it
    carries under `BUNDLE_KEY` is checked against the config's `ranker` (the id is the model's
    hash) and kept in `store`; the fields are returned without it."""
    if BUNDLE_KEY not in data:
        return data
    data = dict(data)
    text = data.pop(BUNDLE_KEY)
    if not isinstance(text, str) or model_id(text) != data.get("ranker"):
        raise RetrievalError(f"The config carries a model that is not its learned ranker {data.get('ranker')!r} "
                             "(the ranker's id is its model's hash)")
    RankerModels(store).save(text)
    return data


class RankerModels:
    """The store's learned ranker models (see the module docstring)."""

    def __init__(self, store: Store):
        self.store = store
        self.table = KeyedTable(store, MODELS_TABLE, MODELS_SCHEMA, "id")

    @counts_as_write
    def save(self, text: str) -> str:
        """Keep `text` (a LightGBM model) and return its id; a model already kept is not written again."""
        if not isinstance(text, str) or not text.startswith("tree\n") or len(text) > MODEL_MAX_CHARS:
            raise RetrievalError("Not a LightGBM model text (it starts with 'tree'), or larger than 20 MB")
        ident = model_id(text)
        with self.table.lock():
            if not self.table.has(ident):
                self.table.put({"id": ident, "text": text, "saved": now_iso()})
        return ident

    def load(self, ident: str) -> str:
        """The model text kept under `ident`."""
        row = self.table.get(validate_model_id(ident), ["text"])
        if row is None:
            raise RetrievalError(f"No learned ranker {ident!r} in this store: import the config with its model "
                                 "(an exported config carries it)")
        return row["text"]

    def ids(self) -> list[str]:
        return sorted(self.table.keys())
