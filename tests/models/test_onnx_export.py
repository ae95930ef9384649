"""ONNX exports: built from a local folder (graph, int8 quantisation, weights stored apart,
tokenizer), and their cache (reuse, rebuild).

The real fp32 export of all-MiniLM-L6-v2 is conftest.py's `exported`; the cache's locking and
rebuilding are tested with a stand-in builder that writes a small fake export."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from retrieval.models import onnx_export
from retrieval.models.onnx_export import MANIFEST, MODEL_FILE, ONNX_FP32, ONNX_INT8
from retrieval.models.onnx_model import OnnxSentenceModel
from retrieval.types import RetrievalError


def test_export_from_the_local_folder_matches_torch(exported, minilm_path, cache, torch_vectors, texts):
    assert exported == onnx_export.export_dir(cache, minilm_path, ONNX_FP32)
    assert onnx_export.is_complete(exported)
    manifest = json.loads((exported / MANIFEST).read_text())
    assert (manifest["variant"], manifest["dim"], manifest["max_seq_length"]) == (ONNX_FP32, 384, 256)
    assert manifest["inputs"] == ["input_ids", "attention_mask", "token_type_ids"]
    model = OnnxSentenceModel(exported)
    vectors = model.encode(texts, batch_size=3)  # two batches, padded differently from torch's
    assert vectors.shape == (4, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.einsum("ij,ij->i", vectors, torch_vectors).min() >= 0.9999


def test_second_load_reuses_the_export(exported, minilm_path, cache, monkeypatch):
    before = (exported / MODEL_FILE).stat().st_mtime_ns

    def no_rebuild(*args):
        raise AssertionError("exported again")

    monkeypatch.setattr(onnx_export, "build_export", no_rebuild)
    assert onnx_export.ensure_onnx_model(minilm_path, cache, ONNX_FP32) == exported
    assert (exported / MODEL_FILE).stat().st_mtime_ns == before


def test_int8_quantises_all_weight_matmuls_but_the_down_projections(exported):
    import onnx

    graph = onnx.load(str(exported / MODEL_FILE), load_external_data=False).graph
    shapes = {init.name: tuple(init.dims) for init in graph.initializer}
    kinds = {}
    for node in graph.node:
        weight = next((shapes[i] for i in node.input if i in shapes), None)
        if node.op_type == "MatMul" and weight is not None:
            kinds[node.name] = weight
    picked = set(onnx_export.quantized_nodes(graph))
    attention = {n.name for n in graph.node if n.op_type == "Attention"}
    # MiniLM's 6 layers: fused attention, its 384 → 384 output and the 384 → 1536 up-projection
    # quantised; the 1536 → 384 down-projections left in fp32
    assert len(attention) == 6 and attention <= picked
    assert sorted(kinds[n] for n in picked - attention) == [(384, 384)] * 6 + [(384, 1536)] * 6
    assert sorted(kinds[n] for n in set(kinds) - picked) == [(1536, 384)] * 6


def model_bytes(folder: Path) -> int:
    """The graph and its weights (in WEIGHTS_FILE beside it, when stored apart)."""
    return sum(p.stat().st_size for p in (folder / MODEL_FILE, folder / onnx_export.WEIGHTS_FILE) if p.exists())


def test_an_exports_large_weights_are_stored_apart_and_mapped(exported):
    """`build_export` moves weights of 1 MB and more (all of MiniLM's but the biases and norms)
    into WEIGHTS_FILE, listed in the manifest; the graph file keeps the rest."""
    import onnx

    manifest = json.loads((exported / MANIFEST).read_text())
    assert manifest["format"] == onnx_export.FORMAT == 3
    assert manifest["files"][onnx_export.WEIGHTS_FILE] == (exported / onnx_export.WEIGHTS_FILE).stat().st_size
    graph = onnx.load(str(exported / MODEL_FILE), load_external_data=False).graph
    apart = {t.name for t in graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL}
    large = {t.name for t in graph.initializer
             if int(np.prod(t.dims)) * 4 >= 1 << 20 and t.data_type == onnx.TensorProto.FLOAT}
    # the word embeddings and 3 weights a layer (fused q/k/v 384×1152, the feed-forward's two
    # 384×1536 and 1536×384; the 384×384 output projection is 0.6 MB)
    assert apart == large and len(apart) == 1 + 6 * 3
    assert (exported / MODEL_FILE).stat().st_size < 0.05 * model_bytes(exported)


def test_int8_quantisation_stays_close_to_torch(exported, int8_export, torch_vectors, texts):
    # int8 weights take a quarter of the space (the embedding table and the down-projections stay fp32)
    assert model_bytes(int8_export) < 0.8 * model_bytes(exported)
    vectors = OnnxSentenceModel(int8_export).encode(texts)
    cos = np.einsum("ij,ij->i", vectors, torch_vectors)
    assert cos.min() >= 0.98 and cos.max() < 0.99999  # close, and really quantised
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize("written", ["a string", "an AddedToken", "in special_tokens_map.json", "nowhere"])
def test_the_padding_token_is_read_as_any_transformers_version_wrote_it(exported, tmp_path, written):
    folder = tmp_path / "tokenizer"
    shutil.copytree(exported / onnx_export.TOKENIZER_DIR, folder)
    config = json.loads((folder / "tokenizer_config.json").read_text())
    assert config["pad_token"] == "[PAD]"
    del config["pad_token"]
    if written == "a string":
        config["pad_token"] = "[PAD]"
    elif written == "an AddedToken":
        config["pad_token"] = {"content": "[PAD]", "lstrip": False, "normalized": False}
    elif written == "in special_tokens_map.json":
        (folder / "special_tokens_map.json").write_text(json.dumps({"pad_token": {"content": "[PAD]"}}))
    (folder / "tokenizer_config.json").write_text(json.dumps(config))
    if written == "nowhere":
        with pytest.raises(RetrievalError, match="no padding token"):
            onnx_export.load_tokenizer(folder, 8)
        return
    tokenizer = onnx_export.load_tokenizer(folder, 8)
    ids = [e.ids for e in tokenizer.encode_batch(["a", "a b c"])]
    assert ids[0][-1] == tokenizer.token_to_id("[PAD]") == 0 and len(ids[0]) == len(ids[1]) == 5


# --- the cache, with a stand-in builder -------------------------------------------------------------


def fake_build(calls: list):
    def build(model_path: Path, dest: Path, variant: str) -> None:
        calls.append(dest)
        (dest / MODEL_FILE).write_bytes(b"x" * 10)
        (dest / MANIFEST).write_text(json.dumps({"files": {MODEL_FILE: 10}}))
    return build


@pytest.fixture
def source(tmp_path) -> Path:
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "weights.bin").write_bytes(b"abc")
    return folder


def test_export_is_built_once_in_staging_then_renamed(source, tmp_path, monkeypatch):
    calls: list[Path] = []
    monkeypatch.setattr(onnx_export, "build_export", fake_build(calls))
    target = onnx_export.ensure_onnx_model(source, tmp_path / "cache", ONNX_INT8)
    assert target.name.startswith("model-") and target.name.endswith(f"-{ONNX_INT8}-v{onnx_export.FORMAT}")
    assert len(calls) == 1 and calls[0] != target and calls[0].parent == target.parent  # built beside it
    assert not calls[0].exists()  # renamed away
    assert onnx_export.ensure_onnx_model(source, tmp_path / "cache", ONNX_INT8) == target
    assert len(calls) == 1
    leftovers = [p.name for p in target.parent.iterdir() if p != target and not p.name.endswith(".lock")]
    assert leftovers == []


@pytest.mark.parametrize("damage", ["no manifest", "truncated file", "bad manifest", "missing file"])
def test_a_partial_or_damaged_export_is_rebuilt(source, tmp_path, monkeypatch, damage):
    calls: list[Path] = []
    monkeypatch.setattr(onnx_export, "build_export", fake_build(calls))
    target = onnx_export.ensure_onnx_model(source, tmp_path / "cache", ONNX_FP32)
    if damage == "no manifest":
        (target / MANIFEST).unlink()
    elif damage == "truncated file":
        (target / MODEL_FILE).write_bytes(b"x" * 4)
    elif damage == "bad manifest":
        (target / MANIFEST).write_text("{not json")
    else:
        (target / MODEL_FILE).unlink()
    assert not onnx_export.is_complete(target)
    assert onnx_export.ensure_onnx_model(source, tmp_path / "cache", ONNX_FP32) == target
    assert len(calls) == 2 and onnx_export.is_complete(target)
    assert (target / MODEL_FILE).read_bytes() == b"x" * 10


def test_a_failed_build_leaves_nothing_behind(source, tmp_path, monkeypatch):
    def broken(model_path, dest, variant):
        (dest / MODEL_FILE).write_bytes(b"half")
        raise RuntimeError("export failed")

    monkeypatch.setattr(onnx_export, "build_export", broken)
    with pytest.raises(RuntimeError, match="export failed"):
        onnx_export.ensure_onnx_model(source, tmp_path / "cache", ONNX_FP32)
    assert [p.name for p in (tmp_path / "cache" / "onnx").iterdir() if not p.name.endswith(".lock")] == []


def test_the_export_folder_follows_the_source_files(source, tmp_path):
    first = onnx_export.export_dir(tmp_path, source, ONNX_FP32)
    assert onnx_export.export_dir(tmp_path, source, ONNX_FP32) == first
    assert onnx_export.export_dir(tmp_path, source, ONNX_INT8) != first
    (source / "weights.bin").write_bytes(b"abcd")
    assert onnx_export.export_dir(tmp_path, source, ONNX_FP32) != first
    with pytest.raises(RetrievalError, match="Unknown ONNX variant"):
        onnx_export.export_dir(tmp_path, source, "onnx-fp16")


def test_only_mean_pooled_normalised_models_are_exported(minilm_path, tmp_path):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    transformer = Transformer(str(minilm_path))
    cls = tmp_path / "cls-pooled"
    SentenceTransformer(modules=[transformer, Pooling(384, "cls"), Normalize()], device="cpu").save(str(cls))
    with pytest.raises(RetrievalError, match="mean Pooling"):
        onnx_export.build_export(cls, tmp_path / "out", ONNX_FP32)


def test_vnni_is_read_from_the_cpu_flags():
    assert onnx_export.cpu_has_vnni("processor : 0\nflags : fpu avx2 avx512f avx512_vnni\n")
    assert onnx_export.cpu_has_vnni("flags\t\t: sse avx_vnni avx2\n")
    assert not onnx_export.cpu_has_vnni("flags : fpu sse avx2 fma\nbugs : avx512_vnni_is_not_a_flag_here\n")
    assert not onnx_export.cpu_has_vnni("")
