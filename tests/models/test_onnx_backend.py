"""The ONNX Runtime backend: export of a local folder, its cache (reuse, rebuild), its vectors.

One real export of all-MiniLM-L6-v2 (fp32, a few seconds) is shared by the module; the cache's
locking and rebuilding are tested with a stand-in builder that writes a small fake export."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from retrieval.models import embed, onnx_backend
from retrieval.models.embed import MINILM
from retrieval.models.onnx_backend import MANIFEST, MODEL_FILE, ONNX_FP32, ONNX_INT8
from retrieval.types import RetrievalError

TEXTS = [
    "How do I bake bread at home?",
    "A simple recipe for homemade bread with flour, yeast and water.",
    "The stock market closed lower on Friday.",
    "word " * 400,  # longer than MiniLM's 256-token window: truncated the same way as torch
]


@pytest.fixture(scope="module")
def minilm_path() -> Path:
    return Path(embed.resolve_model(MINILM).path)


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("workbench-cache")


@pytest.fixture(scope="module")
def exported(minilm_path, cache) -> Path:
    return onnx_backend.ensure_onnx_model(minilm_path, cache, ONNX_FP32)


@pytest.fixture(scope="module")
def torch_vectors() -> np.ndarray:
    return embed.open_encoder(MINILM, backend=embed.TORCH).encode_passages(TEXTS)


def test_export_from_the_local_folder_matches_torch(exported, minilm_path, cache, torch_vectors):
    assert exported == onnx_backend.export_dir(cache, minilm_path, ONNX_FP32)
    assert onnx_backend.is_complete(exported)
    manifest = json.loads((exported / MANIFEST).read_text())
    assert (manifest["variant"], manifest["dim"], manifest["max_seq_length"]) == (ONNX_FP32, 384, 256)
    assert manifest["inputs"] == ["input_ids", "attention_mask", "token_type_ids"]
    model = onnx_backend.OnnxSentenceModel(exported)
    vectors = model.encode(TEXTS, batch_size=3)  # two batches, padded differently from torch's
    assert vectors.shape == (4, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.einsum("ij,ij->i", vectors, torch_vectors).min() >= 0.9999


def test_second_load_reuses_the_export(exported, minilm_path, cache, monkeypatch):
    before = (exported / MODEL_FILE).stat().st_mtime_ns

    def no_rebuild(*args):
        raise AssertionError("exported again")

    monkeypatch.setattr(onnx_backend, "build_export", no_rebuild)
    assert onnx_backend.ensure_onnx_model(minilm_path, cache, ONNX_FP32) == exported
    assert (exported / MODEL_FILE).stat().st_mtime_ns == before


@pytest.fixture(scope="module")
def int8_export(exported, tmp_path_factory) -> Path:
    """The fp32 export quantised as `build_export` quantises an int8 variant."""
    int8 = tmp_path_factory.mktemp("int8")
    shutil.copytree(exported / onnx_backend.TOKENIZER_DIR, int8 / onnx_backend.TOKENIZER_DIR)
    onnx_backend.quantize_int8(exported / MODEL_FILE, int8 / MODEL_FILE)
    manifest = json.loads((exported / MANIFEST).read_text()) | {"variant": ONNX_INT8}
    (int8 / MANIFEST).write_text(json.dumps(manifest))
    return int8


def test_int8_quantises_all_weight_matmuls_but_the_down_projections(exported):
    import onnx

    graph = onnx.load(str(exported / MODEL_FILE), load_external_data=False).graph
    shapes = {init.name: tuple(init.dims) for init in graph.initializer}
    kinds = {}
    for node in graph.node:
        weight = next((shapes[i] for i in node.input if i in shapes), None)
        if node.op_type == "MatMul" and weight is not None:
            kinds[node.name] = weight
    picked = set(onnx_backend.quantized_nodes(graph))
    attention = {n.name for n in graph.node if n.op_type == "Attention"}
    # MiniLM's 6 layers: fused attention, its 384 → 384 output and the 384 → 1536 up-projection
    # quantised; the 1536 → 384 down-projections left in fp32
    assert len(attention) == 6 and attention <= picked
    assert sorted(kinds[n] for n in picked - attention) == [(384, 384)] * 6 + [(384, 1536)] * 6
    assert sorted(kinds[n] for n in set(kinds) - picked) == [(1536, 384)] * 6


def model_bytes(folder: Path) -> int:
    """The graph and its weights (in WEIGHTS_FILE beside it, when stored apart)."""
    return sum(p.stat().st_size for p in (folder / MODEL_FILE, folder / onnx_backend.WEIGHTS_FILE) if p.exists())


def test_an_exports_large_weights_are_stored_apart_and_mapped(exported):
    """`build_export` moves weights of 1 MB and more (all of MiniLM's but the biases and norms)
    into WEIGHTS_FILE, listed in the manifest; the graph file keeps the rest."""
    import onnx

    manifest = json.loads((exported / MANIFEST).read_text())
    assert manifest["format"] == onnx_backend.FORMAT == 3
    assert manifest["files"][onnx_backend.WEIGHTS_FILE] == (exported / onnx_backend.WEIGHTS_FILE).stat().st_size
    graph = onnx.load(str(exported / MODEL_FILE), load_external_data=False).graph
    apart = {t.name for t in graph.initializer if t.data_location == onnx.TensorProto.EXTERNAL}
    large = {t.name for t in graph.initializer
             if int(np.prod(t.dims)) * 4 >= 1 << 20 and t.data_type == onnx.TensorProto.FLOAT}
    # the word embeddings and 3 weights a layer (fused q/k/v 384×1152, the feed-forward's two
    # 384×1536 and 1536×384; the 384×384 output projection is 0.6 MB)
    assert apart == large and len(apart) == 1 + 6 * 3
    assert (exported / MODEL_FILE).stat().st_size < 0.05 * model_bytes(exported)


def test_int8_quantisation_stays_close_to_torch(exported, int8_export, torch_vectors):
    # int8 weights take a quarter of the space (the embedding table and the down-projections stay fp32)
    assert model_bytes(int8_export) < 0.8 * model_bytes(exported)
    vectors = onnx_backend.OnnxSentenceModel(int8_export).encode(TEXTS)
    cos = np.einsum("ij,ij->i", vectors, torch_vectors)
    assert cos.min() >= 0.98 and cos.max() < 0.99999  # close, and really quantised
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_an_int8_vector_does_not_depend_on_its_batch(int8_export):
    """Dynamic int8 scales its activations over the whole input: batched, a text's vector moved
    with its neighbours (up to 0.024). Each text runs alone, so alone and among 64 agree."""
    model = onnx_backend.OnnxSentenceModel(int8_export)
    assert model.per_text
    others = [f"filler passage number {i} about {'bread ' * (i % 37)}and the weather" for i in range(60)]
    batch = others[:30] + TEXTS + others[30:]  # 64 texts of many lengths, padded batches if batched
    together = model.encode(batch, batch_size=64)
    for i, text in enumerate(TEXTS):
        alone = model.encode([text])[0]
        assert np.abs(alone - together[30 + i]).max() <= 1e-6
    # the graph itself is batch-dependent: the same texts run as one padded input differ
    padded = model.encode_batch(batch)
    assert np.abs(padded[30:34] - together[30:34]).max() > 1e-4


def test_int8_texts_run_side_by_side_give_the_vectors_of_one_at_a_time(int8_export):
    """The per-text runs go `threads` at a time through one session: the vectors are those of
    the same texts run one after the other on that session, to the bit, in input order."""
    texts = [f"passage {i}: {'owls hunt mice at night ' * (i % 9)}and {'bees ' * (i % 5)}make honey"
             for i in range(40)]
    model = onnx_backend.OnnxSentenceModel(int8_export, threads=3)
    assert model.threads == 3 and model._runs is None
    parallel = model.encode(texts, prompt="passage: ")
    assert model._runs is not None and model._runs._max_workers == 3  # side by side
    one_after_the_other = np.stack([model.encode_batch(["passage: " + t])[0] for t in texts])
    np.testing.assert_array_equal(parallel, one_after_the_other)
    single = onnx_backend.OnnxSentenceModel(int8_export, threads=1)
    single.encode(texts[:3])
    assert single._runs is None  # one thread: no pool
    many = onnx_backend.OnnxSentenceModel(int8_export, threads=16)
    many.encode(texts[:3])
    assert many._runs._max_workers == onnx_backend.MAX_RUNS_AT_ONCE == 4


TOKENIZER_TEXTS = [
    "", "a", "How many points did the Panthers defense surrender?", "黑豹队的防守丢了多少分？",
    "Ünïcödé ﬁ ligature ½ café naïve 𝔘𝔫𝔦", "mixed 中文 and English 123,456.78", "  padded  ", "tab\tnew\nline",
    *("x " * (n - 2) for n in (253, 254, 255, 256, 257, 258, 510, 511, 512, 513, 514)),  # about the windows
]


@pytest.mark.parametrize("model", [MINILM, embed.E5])
def test_the_exports_tokenizer_gives_transformers_ids_without_importing_it(exported, model):
    """The export's tokenizer (`tokenizers` on its tokenizer.json) feeds the graph the ids, masks
    and type ids transformers' tokenizer gives, in padded batches and at the windows' edges, and
    cuts exactly the texts transformers counts as longer than the window."""
    from transformers import AutoTokenizer

    folder = exported if model == MINILM else onnx_backend.ensure_onnx_model(
        Path(embed.resolve_model(model).path), embed.cache_dir(), ONNX_INT8)  # ./run.sh prepare made it
    onnx_model = onnx_backend.OnnxSentenceModel(folder)
    reference = AutoTokenizer.from_pretrained(str(folder / onnx_backend.TOKENIZER_DIR))
    for start in range(0, len(TOKENIZER_TEXTS), 5):
        batch = TOKENIZER_TEXTS[start:start + 5]
        want = reference(batch, padding=True, truncation=True, max_length=onnx_model.max_seq_length,
                         return_tensors="np")
        got = onnx_model._feed(batch)
        assert list(got) == onnx_model.inputs
        for name in onnx_model.inputs:
            np.testing.assert_array_equal(got[name], want[name], err_msg=f"{name}, texts {start}…")
    lengths = [len(ids) for ids in reference(TOKENIZER_TEXTS, truncation=False, verbose=False)["input_ids"]]
    assert onnx_model.token_lengths(TOKENIZER_TEXTS) == lengths
    # n − 2 "x " make n tokens for MiniLM (257 … 514 exceed 256: 7 texts); E5's tokenizer adds one
    # for the trailing space (512 … 514 exceed 512: 3)
    assert sum(n > onnx_model.max_seq_length for n in lengths) == (7 if model == MINILM else 3)
    onnx_model.max_seq_length = 16  # as `open_encoder(max_seq_length=…)` sets it
    assert onnx_model._feed(["x " * 40])["input_ids"].shape == (1, 16)
    assert onnx_model.token_lengths([" ".join("x" * 14), " ".join("x" * 40)]) == [16, 42]  # + 2 special, uncut


@pytest.mark.parametrize("written", ["a string", "an AddedToken", "in special_tokens_map.json", "nowhere"])
def test_the_padding_token_is_read_as_any_transformers_version_wrote_it(exported, tmp_path, written):
    folder = tmp_path / "tokenizer"
    shutil.copytree(exported / onnx_backend.TOKENIZER_DIR, folder)
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
            onnx_backend.load_tokenizer(folder, 8)
        return
    tokenizer = onnx_backend.load_tokenizer(folder, 8)
    ids = [e.ids for e in tokenizer.encode_batch(["a", "a b c"])]
    assert ids[0][-1] == tokenizer.token_to_id("[PAD]") == 0 and len(ids[0]) == len(ids[1]) == 5


def test_an_onnx_encoder_loads_and_encodes_without_torch_or_transformers():
    """In a fresh interpreter on a CPU build of torch: the default encoder of each built-in opens,
    encodes and counts truncation with neither torch nor transformers imported (an import of
    both costs ~4.7 s and ~220 MB: every CLI, MCP server and app process that only encodes)."""
    import subprocess
    import sys

    code = """
import sys
from retrieval import embed
for name in embed.BUILTIN_MODELS:
    encoder = embed.load_encoder(name)
    assert encoder.backend == "onnx-int8", encoder.backend
    assert encoder.encode_queries(["bread"]).shape == (1, 384)
    assert encoder.count_truncated(["x " * 600, "y"]) == 1
print(sorted(m for m in ("torch", "transformers", "sentence_transformers") if m in sys.modules))
"""
    env = {k: v for k, v in os.environ.items() if k != embed.BACKEND_ENV}
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv(embed.BACKEND_ENV, raising=False)
        embed.prepare_builtin_models()  # a missing export would be built there, with torch
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    # torch only where it may see a GPU (not a CPU build): `device` must ask it then
    assert done.stdout.strip() == ("[]" if embed._torch_is_cpu_build() else "['torch']")


def test_encoder_on_onnx_through_embed(exported, cache, monkeypatch, torch_vectors):
    monkeypatch.setenv("WORKBENCH_CACHE", str(cache))
    encoder = embed.open_encoder(MINILM, backend=ONNX_FP32)
    assert encoder.backend == ONNX_FP32 and encoder.spec == embed.resolve_model(MINILM)
    assert np.einsum("ij,ij->i", encoder.encode_passages(TEXTS), torch_vectors).min() >= 0.9999
    assert encoder.count_truncated(TEXTS) == 1  # "word " * 400, by the export's own tokenizer
    assert encoder.token_lengths(TEXTS)[3] == 402
    query = encoder.encode_queries(["bread recipe"])
    assert query.shape == (1, 384)


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
    monkeypatch.setattr(onnx_backend, "build_export", fake_build(calls))
    target = onnx_backend.ensure_onnx_model(source, tmp_path / "cache", ONNX_INT8)
    assert target.name.startswith("model-") and target.name.endswith(f"-{ONNX_INT8}-v{onnx_backend.FORMAT}")
    assert len(calls) == 1 and calls[0] != target and calls[0].parent == target.parent  # built beside it
    assert not calls[0].exists()  # renamed away
    assert onnx_backend.ensure_onnx_model(source, tmp_path / "cache", ONNX_INT8) == target
    assert len(calls) == 1
    leftovers = [p.name for p in target.parent.iterdir() if p != target and not p.name.endswith(".lock")]
    assert leftovers == []


@pytest.mark.parametrize("damage", ["no manifest", "truncated file", "bad manifest", "missing file"])
def test_a_partial_or_damaged_export_is_rebuilt(source, tmp_path, monkeypatch, damage):
    calls: list[Path] = []
    monkeypatch.setattr(onnx_backend, "build_export", fake_build(calls))
    target = onnx_backend.ensure_onnx_model(source, tmp_path / "cache", ONNX_FP32)
    if damage == "no manifest":
        (target / MANIFEST).unlink()
    elif damage == "truncated file":
        (target / MODEL_FILE).write_bytes(b"x" * 4)
    elif damage == "bad manifest":
        (target / MANIFEST).write_text("{not json")
    else:
        (target / MODEL_FILE).unlink()
    assert not onnx_backend.is_complete(target)
    assert onnx_backend.ensure_onnx_model(source, tmp_path / "cache", ONNX_FP32) == target
    assert len(calls) == 2 and onnx_backend.is_complete(target)
    assert (target / MODEL_FILE).read_bytes() == b"x" * 10


def test_a_failed_build_leaves_nothing_behind(source, tmp_path, monkeypatch):
    def broken(model_path, dest, variant):
        (dest / MODEL_FILE).write_bytes(b"half")
        raise RuntimeError("export failed")

    monkeypatch.setattr(onnx_backend, "build_export", broken)
    with pytest.raises(RuntimeError, match="export failed"):
        onnx_backend.ensure_onnx_model(source, tmp_path / "cache", ONNX_FP32)
    assert [p.name for p in (tmp_path / "cache" / "onnx").iterdir() if not p.name.endswith(".lock")] == []


def test_the_export_folder_follows_the_source_files(source, tmp_path):
    first = onnx_backend.export_dir(tmp_path, source, ONNX_FP32)
    assert onnx_backend.export_dir(tmp_path, source, ONNX_FP32) == first
    assert onnx_backend.export_dir(tmp_path, source, ONNX_INT8) != first
    (source / "weights.bin").write_bytes(b"abcd")
    assert onnx_backend.export_dir(tmp_path, source, ONNX_FP32) != first
    with pytest.raises(RetrievalError, match="Unknown ONNX variant"):
        onnx_backend.export_dir(tmp_path, source, "onnx-fp16")


def test_only_mean_pooled_normalised_models_are_exported(minilm_path, tmp_path):
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer

    transformer = Transformer(str(minilm_path))
    cls = tmp_path / "cls-pooled"
    SentenceTransformer(modules=[transformer, Pooling(384, "cls"), Normalize()], device="cpu").save(str(cls))
    with pytest.raises(RetrievalError, match="mean Pooling"):
        onnx_backend.build_export(cls, tmp_path / "out", ONNX_FP32)


def test_vnni_is_read_from_the_cpu_flags():
    assert onnx_backend.cpu_has_vnni("processor : 0\nflags : fpu avx2 avx512f avx512_vnni\n")
    assert onnx_backend.cpu_has_vnni("flags\t\t: sse avx_vnni avx2\n")
    assert not onnx_backend.cpu_has_vnni("flags : fpu sse avx2 fma\nbugs : avx512_vnni_is_not_a_flag_here\n")
    assert not onnx_backend.cpu_has_vnni("")
