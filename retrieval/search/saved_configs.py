"""Named saved `SearchConfig`s, in the LanceDB table `_configs` of the store.

One row per name: name, config (the config's own JSON, `SearchConfig.to_json`) and saved (UTC
time). A table name starting with '_' is never listed as a collection. Configs are stored and
exchanged as JSON only (no pickle): `import_json` goes through `SearchConfig.from_json`, so an
unknown field or a bad value is refused with the config's own readable message.

Names: 1–64 characters from letters, digits, space, '_', '-' and '.', starting with a letter or
digit and not ending with a space (they are shown in pickers and used in file names).
Each write is one LanceDB commit (a merge-insert keyed on the name, or a delete) of the keyed side
table (`store.side_tables.KeyedTable`), under its lock.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pyarrow as pa

from retrieval.search.config import SearchConfig, json_object
from retrieval.store import Store, counts_as_write, now_iso
from retrieval.store.side_tables import KeyedTable
from retrieval.types import RetrievalError

CONFIGS_TABLE = "_configs"
CONFIG_NAME_RE = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9 _.\-]{0,62}[A-Za-z0-9_.\-])?")  # fullmatch
CONFIGS_SCHEMA = pa.schema([
    pa.field("name", pa.string(), nullable=False),
    pa.field("config", pa.string(), nullable=False),
    pa.field("saved", pa.string(), nullable=False),
])


def validate_config_name(name: str) -> str:
    """See the module docstring for the rule."""
    return validate_saved_name(name, "config")


def validate_saved_name(name: str, what: str) -> str:
    """The rule for names of saved things (configs, snapshots): see the module docstring."""
    if not isinstance(name, str) or not CONFIG_NAME_RE.fullmatch(name):
        raise RetrievalError(
            f"Invalid {what} name {name!r}: use 1–64 characters from letters, digits, space, '_', '-' "
            "and '.', starting with a letter or digit and not ending with a space"
        )
    return name


class ConfigStore:
    """Saved configs of one `Store` (see the module docstring)."""

    def __init__(self, store: Store):
        self.store = store
        self.table = KeyedTable(store, CONFIGS_TABLE, CONFIGS_SCHEMA, "name")

    def names(self) -> list[str]:
        """Saved names, sorted case-insensitively."""
        return sorted(self.table.keys(), key=lambda n: (n.lower(), n))

    @counts_as_write
    def save(self, name: str, config: SearchConfig, overwrite: bool = False) -> None:
        """Save `config` under `name`; an existing name is an error unless `overwrite`."""
        validate_config_name(name)
        if not isinstance(config, SearchConfig):
            raise RetrievalError(f"Only a SearchConfig can be saved, got {type(config).__name__}")
        config.validate()
        with self.table.lock():
            if not overwrite and self.table.has(name):
                raise RetrievalError(f"A config named {name!r} already exists; choose another name or overwrite it")
            self.table.put({"name": name, "config": config.to_json(), "saved": now_iso()})

    def resolve(self, spec: str | None) -> tuple[SearchConfig, str]:
        """The config `--config SPEC` names, and how to say where it came from: an existing file
        (or a name ending in .json, or with a path separator) is read as a `SearchConfig` JSON file, anything else is a
        config saved on the Evaluate page; None: the defaults. A missing file or name, or a bad
        config, is a one-line `RetrievalError`."""
        if not spec:
            return SearchConfig(), "defaults"
        path = Path(spec)
        if path.is_file() or spec.lower().endswith(".json") or "/" in spec or "\\" in spec:
            try:
                text = path.read_text(encoding="utf-8-sig")
            except OSError as exc:
                raise RetrievalError(f"Cannot read config file {spec}: {exc.strerror or exc}") from exc
            except UnicodeDecodeError:
                raise RetrievalError(f"Config file {spec} is not UTF-8 text") from None
            try:
                return self.parse(text), f"file {path.name}"
            except RetrievalError as exc:
                raise RetrievalError(f"{spec}: {exc}") from exc
        return self.load(spec), f"saved config {spec!r}"

    def load(self, name: str) -> SearchConfig:
        """The config saved under `name`."""
        validate_config_name(name)
        row = self.table.get(name)
        if row is None:
            known = ", ".join(self.names()) or "none saved yet"
            raise RetrievalError(f"No saved config named {name!r} (saved: {known})")
        return SearchConfig.from_json(row["config"])

    @counts_as_write
    def delete(self, name: str) -> None:
        """Remove a saved config (an unknown name is an error)."""
        validate_config_name(name)
        with self.table.lock():
            if not self.table.has(name):
                raise RetrievalError(f"No saved config named {name!r}")
            self.table.delete(name)

    def export_json(self, name: str) -> str:
        """The saved config as JSON (`SearchConfig.to_json`), e.g. for `--config FILE.json`; a
        config with a learned ranker carries its model (`ranker_models.BUNDLE_KEY`), so it loads
        in another store."""
        config = self.load(name)
        if not config.ranker:
            return config.to_json()
        from retrieval.search.ranker_models import BUNDLE_KEY, RankerModels

        data = {**config.to_dict(), BUNDLE_KEY: RankerModels(self.store).load(config.ranker)}
        return json.dumps(data, ensure_ascii=False, sort_keys=True)

    def import_json(self, name: str, text: str, overwrite: bool = False) -> SearchConfig:
        """Parse JSON with `SearchConfig.from_json` (unknown fields and bad values refused with its
        message) and save it under `name`. Nothing is saved when parsing fails."""
        validate_config_name(name)
        config = self.parse(text)
        self.save(name, config, overwrite=overwrite)
        return config

    def parse(self, text: str) -> SearchConfig:
        """A config from JSON (`SearchConfig.from_json`'s rules); the model an exported config
        carries is checked and kept in this store (`ranker_models.unbundled`) once the config is
        known to be valid."""
        from retrieval.search.ranker_models import BUNDLE_KEY, unbundled

        data = json_object(text)
        try:
            config = SearchConfig.from_dict({k: v for k, v in data.items() if k != BUNDLE_KEY})
        except RetrievalError:
            raise
        except (TypeError, ValueError, AttributeError) as exc:  # e.g. "depth": "ten"
            raise RetrievalError(f"Invalid search config: {exc}") from exc
        unbundled(data, self.store)
        return config
