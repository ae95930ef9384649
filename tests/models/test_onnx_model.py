"""An export run by ONNX Runtime (`OnnxSentenceModel`): int8 texts run alone and side by side, the
export's tokenizer against transformers', and an encoder on it through `embed`, without torch.

The exports are conftest.py's (`exported`, `int8_export`)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from retrieval.models import embed, onnx_export
from retrieval.models.embed import MINILM
from retrieval.models.onnx_export import ONNX_FP32, ONNX_INT8
from retrieval.models.onnx_model import MAX_RUNS_AT_ONCE, OnnxSentenceModel


def test_an_int8_vector_does_not_depend_on_its_batch(int8_export, texts):
    """Dynamic int8 scales its activations over the whole input: batched, a text's vector moved
    with its neighbours (up to 0.024). Each text runs alone, so alone and among 16 agree."""
    model = OnnxSentenceModel(int8_export)
    assert model.per_text
    others = [f"filler passage number {i} about {'bread ' * (i * 3)}and the weather" for i in range(12)]
    batch = others[:6] + texts + others[6:]  # 16 texts of many lengths, padded batches if batched
    together = model.encode(batch, batch_size=16)
    for i, text in enumerate(texts):
        alone = model.encode([text])[0]
        assert np.abs(alone - together[6 + i]).max() <= 1e-6
    # the graph itself is batch-dependent: the same texts run as one padded input differ
    padded = model.encode_batch(batch)
    assert np.abs(padded[6:10] - together[6:10]).max() > 1e-4


def test_int8_texts_run_side_by_side_give_the_vectors_of_one_at_a_time(int8_export):
    """The per-text runs go `threads` at a time through one session: the vectors are those of
    the same texts run one after the other on that session, to the bit, in input order."""
    texts = [f"passage {i}: {'owls hunt mice at night ' * (i % 9)}and {'bees ' * (i % 5)}make honey"
             for i in range(40)]
    model = OnnxSentenceModel(int8_export, threads=3)
    assert model.threads == 3 and model._runs is None
    parallel = model.encode(texts, prompt="passage: ")
    assert model._runs is not None and model._runs._max_workers == 3  # side by side
    one_after_the_other = np.stack([model.encode_batch(["passage: " + t])[0] for t in texts])
    np.testing.assert_array_equal(parallel, one_after_the_other)
    single = OnnxSentenceModel(int8_export, threads=1)
    single.encode(texts[:3])
    assert single._runs is None  # one thread: no pool
    many = OnnxSentenceModel(int8_export, threads=16)
    many.encode(texts[:3])
    assert many._runs._max_workers == MAX_RUNS_AT_ONCE == 4


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

    folder = exported if model == MINILM else onnx_export.ensure_onnx_model(
        Path(embed.resolve_model(model).path), embed.cache_dir(), ONNX_INT8)  # ./run.sh prepare made it
    onnx_model = OnnxSentenceModel(folder)
    reference = AutoTokenizer.from_pretrained(str(folder / onnx_export.TOKENIZER_DIR))
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


def test_an_onnx_encoder_loads_and_encodes_without_torch_or_transformers():
    """In a fresh interpreter on a CPU build of torch: the default encoder of each built-in opens,
    encodes and counts truncation with neither torch nor transformers imported (an import of
    both costs ~4.7 s and ~220 MB: every CLI, MCP server and app process that only encodes)."""
    import subprocess
    import sys

    code = """
import sys
from retrieval.models import embed
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


def test_encoder_on_onnx_through_embed(exported, cache, monkeypatch, torch_vectors, texts):
    monkeypatch.setenv("WORKBENCH_CACHE", str(cache))
    encoder = embed.open_encoder(MINILM, backend=ONNX_FP32)
    assert encoder.backend == ONNX_FP32 and encoder.spec == embed.resolve_model(MINILM)
    assert np.einsum("ij,ij->i", encoder.encode_passages(texts), torch_vectors).min() >= 0.9999
    assert encoder.count_truncated(texts) == 1  # "word " * 400, by the export's own tokenizer
    assert encoder.token_lengths(texts)[3] == 402
    query = encoder.encode_queries(["bread recipe"])
    assert query.shape == (1, 384)
