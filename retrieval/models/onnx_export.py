"""ONNX Runtime exports of a local sentence-transformers folder: how one is built, where it lives.

Only the pipeline both built-in models use is exported: a BERT-style ``Transformer`` → mean
``Pooling`` → ``Normalize``. The graph computes the whole pipeline,

    v = normalise( Σ_t mask_t · h_t / max(Σ_t mask_t, 1e-9) ),   h = transformer(input_ids, mask …),

so ONNX Runtime returns unit vectors and the tokenizer is the only other piece.

Variants (`VARIANTS`):

* ``onnx``      — fp32; the graph exported by torch (TorchScript exporter, eager attention so that
                  ONNX Runtime's BERT optimizer fuses attention, GELU and skip-LayerNorm);
* ``onnx-int8`` — the same graph with dynamic int8 quantisation of its weight MatMuls (but the
                  feed-forward down-projections, `quantized_nodes`) and fused
                  Attention: int8 weights *per output channel* (per-tensor scales lost too much on
                  all-MiniLM-L6-v2: mean cosine to fp32 0.93), uint8 activations quantised with a
                  scale computed over each input tensor; full 8-bit weights on a CPU with VNNI,
                  7-bit (``reduce_range``) without (`cpu_has_vnni`). That scale would make a text's
                  vector depend on the texts batched with it (up to 0.024 apart on nfcorpus), so
                  `OnnxSentenceModel` (`retrieval.models.onnx_model`) runs every text of an int8
                  export alone: per-text scales, no padding, the same vector whatever else is
                  encoded, and no slower on this CPU than batches of 16 (docs/experiments/encoder.md).

An export lives in ``<cache>/onnx/<folder>-<digest>-<variant>-v<FORMAT>/`` where the digest covers
the source folder's path and its files' sizes and modification times (a changed model is exported
again). It is built in a temporary directory under a file lock and renamed into place; its
``manifest.json`` (written last) records every file's size, so a folder that is incomplete or
damaged is detected and rebuilt. Exporting needs torch and the ``onnx`` package; loading an
export (`retrieval.models.onnx_model`) needs only onnxruntime and the tokenizer (`load_tokenizer`).
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from pathlib import Path

from retrieval.types import RetrievalError

ONNX_FP32 = "onnx"
ONNX_INT8 = "onnx-int8"
VARIANTS = (ONNX_FP32, ONNX_INT8)
# Bump when the export recipe changes: old exports are then ignored (2: FFN down-projections fp32;
# 3: weights of 1 MB and more in WEIGHTS_FILE, which ONNX Runtime maps instead of copying).
FORMAT = 3
MODEL_FILE = "model.onnx"
WEIGHTS_FILE = "model.onnx.data"
MANIFEST = "manifest.json"
TOKENIZER_DIR = "tokenizer"
_INPUTS = ("input_ids", "attention_mask", "token_type_ids")
_OPSET = 17


# --- where an export lives ----------------------------------------------------------------------


def source_digest(model_path: Path) -> str:
    """sha1 over the folder's resolved path and each file's relative path, size and mtime (ns)."""
    model_path = Path(model_path).resolve()
    h = hashlib.sha1(str(model_path).encode())
    for file in sorted(p for p in model_path.rglob("*") if p.is_file()):
        stat = file.stat()
        h.update(f"|{file.relative_to(model_path)}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return h.hexdigest()[:12]


def export_dir(cache_root: Path, model_path: Path, variant: str) -> Path:
    """``<cache_root>/onnx/<folder name>-<source digest>-<variant>-v<FORMAT>``."""
    _check_variant(variant)
    return Path(cache_root) / "onnx" / f"{Path(model_path).name}-{source_digest(model_path)}-{variant}-v{FORMAT}"


def remove_stale_exports(cache_root: Path) -> list[tuple[str, int]]:
    """Delete what nothing under ``<cache_root>/onnx`` will read again: exports made in an older
    `FORMAT` (a process that still maps one keeps its pages until it ends), and the staging
    folders (``.<export>-<random>``) of builds that were killed — one whose export's lock is held
    is a build in progress and is left. Returns (folder name, bytes) of each deleted."""
    from filelock import FileLock, Timeout

    root = Path(cache_root) / "onnx"
    removed = []
    for folder in sorted(root.iterdir()) if root.is_dir() else ():
        if not folder.is_dir():
            continue
        if folder.name.startswith("."):  # staging: "." + the export's name + "-" + mkdtemp's suffix
            target = folder.name[1:].rpartition("-")[0]
            try:
                with FileLock(str(root / target) + ".lock", timeout=0):
                    _remove(folder, removed)
            except Timeout:
                continue
            continue
        version = folder.name.rpartition("-v")[2]
        if version.isdigit() and int(version) < FORMAT and _remove(folder, removed):
            Path(str(folder) + ".lock").unlink(missing_ok=True)
    return removed


def _remove(folder: Path, removed: list[tuple[str, int]]) -> bool:
    size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
    shutil.rmtree(folder, ignore_errors=True)
    if folder.exists():  # not ours to delete (permissions): say nothing of it
        return False
    removed.append((folder.name, size))
    return True


def is_complete(folder: Path) -> bool:
    """True when `folder` has a readable manifest and every file it lists, at the recorded size."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
        files = manifest["files"]
        return bool(files) and all((folder / rel).stat().st_size == size for rel, size in files.items())
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False


def ensure_onnx_model(model_path: Path, cache_root: Path, variant: str) -> Path:
    """The export of `model_path` as `variant`, built on first use.

    A file lock serialises exporting processes; the folder is built in a temporary directory and
    renamed into place, and one that exists but is incomplete (a crash, a damaged file) is
    removed and built again.
    """
    from filelock import FileLock

    target = export_dir(cache_root, model_path, variant)
    if is_complete(target):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(target) + ".lock"):
        if is_complete(target):
            return target
        if target.exists():
            shutil.rmtree(target)
        staging = Path(tempfile.mkdtemp(prefix=f".{target.name}-", dir=target.parent))
        try:
            build_export(Path(model_path), staging, variant)
            staging.rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
    return target


# --- building an export ---------------------------------------------------------------------------


def build_export(model_path: Path, dest: Path, variant: str) -> None:
    """Export the sentence-transformers folder `model_path` into `dest` (tokenizer, graph, manifest)."""
    _check_variant(variant)
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(str(model_path), device="cpu", local_files_only=True)
    transformer = _check_pipeline(model, model_path)
    tokenizer = model.tokenizer
    inputs = [name for name in _INPUTS if name in tokenizer.model_input_names]
    tokenizer.save_pretrained(str(dest / TOKENIZER_DIR))
    raw = dest / "raw.onnx"
    _export_graph(transformer.auto_model, tokenizer, inputs, raw)
    config = transformer.auto_model.config
    _optimize(raw, dest / MODEL_FILE, config.num_attention_heads, config.hidden_size)
    raw.unlink()
    if variant == ONNX_INT8:
        fp32 = dest / "fp32.onnx"
        (dest / MODEL_FILE).rename(fp32)
        quantize_int8(fp32, dest / MODEL_FILE)
        fp32.unlink()
    store_weights_apart(dest / MODEL_FILE)
    load_tokenizer(dest / TOKENIZER_DIR, model.max_seq_length)  # what loading it needs, checked at build time
    files = {str(p.relative_to(dest)): p.stat().st_size for p in sorted(dest.rglob("*")) if p.is_file()}
    manifest = {
        "format": FORMAT, "variant": variant, "source": str(Path(model_path).resolve()),
        "inputs": inputs, "max_seq_length": model.max_seq_length,
        "dim": model.get_embedding_dimension(), "files": files,
    }  # fmt: skip
    (dest / MANIFEST).write_text(json.dumps(manifest, indent=1), encoding="utf-8")


def _check_pipeline(model, model_path: Path):
    """The model's Transformer module, if the pipeline is Transformer → mean Pooling → Normalize."""
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    modules = list(model)
    ok = (
        len(modules) == 3
        and isinstance(modules[0], Transformer)
        and isinstance(modules[1], Pooling)
        and getattr(modules[1], "pooling_mode", None) == "mean"
        and isinstance(modules[2], Normalize)
    )
    if not ok:
        names = " → ".join(type(m).__name__ for m in modules)
        raise RetrievalError(
            f"ONNX export supports Transformer → mean Pooling → Normalize; {model_path} is {names}"
        )
    return modules[0]


def _export_graph(hf_model, tokenizer, inputs: list[str], path: Path) -> None:
    """torch → ONNX of the transformer, mean pooling and normalisation, batch and length dynamic."""
    import warnings

    import torch

    class Pipeline(torch.nn.Module):
        def __init__(self, hf):
            super().__init__()
            self.hf = hf

        def forward(self, *tensors):
            named = dict(zip(inputs, tensors, strict=True))
            hidden = self.hf(**named).last_hidden_state
            mask = named["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            mean = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            return torch.nn.functional.normalize(mean, p=2.0, dim=-1)

    # Eager attention traces to the MatMul/Softmax pattern ONNX Runtime's optimizer fuses; the
    # sample batch is padded so that the attention mask is traced as data, never as a constant.
    hf_model.set_attn_implementation("eager")
    sample = tokenizer(["a short text", "a somewhat longer text than the first one"],
                       padding=True, return_tensors="pt")
    args = tuple(sample[name] for name in inputs)
    axes = {name: {0: "batch", 1: "tokens"} for name in inputs} | {"embedding": {0: "batch"}}
    with torch.inference_mode(), warnings.catch_warnings():
        # The tracer's warnings name branches on shapes (a KV cache's padding, negative indices)
        # that a batch of attention-masked input never takes; the test compares the vectors.
        warnings.simplefilter("ignore", category=torch.jit.TracerWarning)
        warnings.simplefilter("ignore", category=UserWarning)
        warnings.simplefilter("ignore", category=DeprecationWarning)
        torch.onnx.export(
            Pipeline(hf_model).eval(), args, str(path), dynamo=False, input_names=inputs,
            output_names=["embedding"], dynamic_axes=axes, opset_version=_OPSET,
        )  # fmt: skip


def _optimize(src: Path, dest: Path, num_heads: int, hidden_size: int) -> None:
    """ONNX Runtime's BERT graph optimizer: fused Attention, BiasGelu, SkipLayerNormalization."""
    from onnxruntime.transformers.optimizer import optimize_model

    optimized = optimize_model(str(src), model_type="bert", num_heads=num_heads, hidden_size=hidden_size, opt_level=1)
    optimized.save_model_to_file(str(dest))


def store_weights_apart(model_file: Path) -> None:
    """Move the graph's weights of 1 MB and more into `WEIGHTS_FILE` beside it (ONNX external
    data). ONNX Runtime then maps that file rather than copying the weights into its own memory:
    E5's int8 export (a 384 MB fp32 word-embedding table of which a text reads a few rows) loaded
    at 112 MB resident and peak against 489 MB resident and an 830 MB peak inline, the same
    vectors to the bit (docs/experiments/encoder.md)."""
    import onnx

    model = onnx.load(str(model_file))
    onnx.save_model(model, str(model_file), save_as_external_data=True, all_tensors_to_one_file=True,
                    location=WEIGHTS_FILE, size_threshold=1 << 20)


def cpu_has_vnni(cpuinfo: str | None = None) -> bool:
    """Whether this CPU has VNNI (AVX-512 VNNI or AVX-VNNI), read from /proc/cpuinfo's flags;
    False when they cannot be read. Without VNNI, ONNX Runtime's uint8 × int8 MatMul can saturate
    its 16-bit intermediate sums, so weights are quantised to 7 bits (`reduce_range`): on an
    AVX2-only AMD EPYC, MiniLM's int8 cosine to torch fell to 0.979 with 8-bit weights and stayed
    ≥ 0.98 with 7-bit ones (tests/models/test_onnx_export.py)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
        except OSError:
            return False
    flags = set()
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            flags.update(line.partition(":")[2].split())
    return bool(flags & {"avx512_vnni", "avx_vnni"})


def quantized_nodes(graph) -> list[str]:
    """The nodes an int8 export quantises: fused Attention and every MatMul with a weight, except
    the feed-forward down-projections (a weight with more input than output features, 1,536 →
    384 in both built-in models). Their input is GELU's output, whose few large values take one
    uint8 scale per text far from the rest: with them quantised, vaswani's passages fell to
    cosine 0.973 to torch and its dense nDCG@10 by 0.0063; left in fp32, 0.988 and 0.0016, at
    1.37× torch's documents per CPU-second there instead of 1.64× (docs/experiments/encoder.md)."""
    shapes = {init.name: tuple(init.dims) for init in graph.initializer}
    nodes = []
    for node in graph.node:
        if node.op_type == "Attention":
            nodes.append(node.name)
        elif node.op_type == "MatMul":
            weight = next((shapes[i] for i in node.input if i in shapes), None)
            if weight is not None and not (len(weight) == 2 and weight[0] > weight[1]):
                nodes.append(node.name)
    return nodes


def quantize_int8(src: Path, dest: Path) -> None:
    """Dynamic int8: weights int8 per output channel (symmetric), activations uint8 per text;
    the nodes of `quantized_nodes` only (see the module docstring)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    nodes = quantized_nodes(onnx.load(str(src), load_external_data=False).graph)
    quantize_dynamic(
        str(src), str(dest), weight_type=QuantType.QInt8, per_channel=True, reduce_range=not cpu_has_vnni(),
        op_types_to_quantize=["MatMul", "Attention"], nodes_to_quantize=nodes,
        extra_options={"DefaultTensorType": onnx.TensorProto.FLOAT},
    )  # fmt: skip


def _check_variant(variant: str) -> None:
    if variant not in VARIANTS:
        raise RetrievalError(f"Unknown ONNX variant {variant!r} (expected one of {', '.join(VARIANTS)})")


# --- reading an export's tokenizer ----------------------------------------------------------------


def load_tokenizer(folder: Path, max_length: int):
    """The export's tokenizer as a `tokenizers.Tokenizer` (its ``tokenizer.json``), truncating to
    `max_length` tokens and padding to a batch's longest as ``tokenizer_config.json`` says: the
    ids transformers' tokenizer gives (tested), without importing transformers and torch (4.7 s and
    ~220 MB of a process that only encodes)."""
    from tokenizers import Tokenizer

    folder = Path(folder)
    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.enable_truncation(max_length, stride=0, strategy="longest_first",
                                direction=config.get("truncation_side", "right"))
    pad_token = config.get("pad_token")
    if pad_token is None and (folder / "special_tokens_map.json").is_file():  # older transformers kept it there
        pad_token = json.loads((folder / "special_tokens_map.json").read_text(encoding="utf-8")).get("pad_token")
    if isinstance(pad_token, dict):  # an AddedToken written out
        pad_token = pad_token.get("content")
    pad_id = tokenizer.token_to_id(pad_token) if isinstance(pad_token, str) else None
    if pad_id is None:
        raise RetrievalError(f"The tokenizer in {folder} names no padding token it knows ({pad_token!r})")
    tokenizer.enable_padding(direction=config.get("padding_side", "right"), pad_id=pad_id,
                             pad_type_id=config.get("pad_token_type_id", 0), pad_token=pad_token)
    return tokenizer
