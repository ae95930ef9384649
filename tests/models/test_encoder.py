"""A loaded encoder (`Encoder`), with MiniLM's real weights: passages in input order with progress,
empty input, truncation counts of a model without a window, and batch sizes and dtype by device."""

from __future__ import annotations

import numpy as np

from retrieval.models import embed
from retrieval.models.embed import MINILM
from retrieval.models.encoder import BATCH_SIZE, GPU_BATCH_SIZE, STATIC_BATCH_SIZE, TORCH, torch_settings


def test_encode_passages_keeps_input_order_and_reports_progress(minilm):
    texts = [("word " * (i % 7 + 1)) + f"number {i}" for i in range(37)]
    calls: list[tuple[int, int]] = []
    got = minilm.encode_passages(texts, batch_size=2, progress=lambda done, n: calls.append((done, n)))
    expected = minilm.model.encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    assert np.allclose(got, expected, atol=1e-4)
    assert calls[0] == (0, 37) and calls[-1] == (37, 37)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls)
    assert len(calls) == 1 + 3  # chunks of 2 × 8 texts: 16 + 16 + 5


def test_empty_input_gives_an_empty_matrix(minilm):
    assert minilm.encode_passages([]).shape == (0, 384)
    assert minilm.encode_queries([]).shape == (0, 384)


def test_a_static_embedding_folder_loads_and_counts_no_truncation(tmp_path, minilm):
    """A sentence-transformers StaticEmbedding folder (model2vec-style; bench_scale's cheap
    encoder) has no token window and a bare `tokenizers.Tokenizer`: nothing counts as truncated."""
    from pathlib import Path

    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import StaticEmbedding
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(Path(minilm.spec.path) / "tokenizer.json"))
    weights = np.random.default_rng(0).standard_normal((tokenizer.get_vocab_size(), 8)).astype(np.float32)
    SentenceTransformer(modules=[StaticEmbedding(tokenizer, embedding_weights=weights)], device="cpu").save(
        str(tmp_path / "static"))
    encoder = embed.open_encoder(str(tmp_path / "static"))
    assert encoder.spec.dim == 8
    assert encoder.count_truncated(["word " * 1000, "short"]) == 0
    vectors = encoder.encode_passages(["owls hunt at night", "bees make honey"])
    assert vectors.shape == (2, 8)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    # No padding, no attention: batches of 1,024 (`STATIC_BATCH_SIZE`), the same vectors as 1 by 1.
    assert encoder.passage_batch_size == STATIC_BATCH_SIZE == 1024
    assert minilm.passage_batch_size == BATCH_SIZE
    assert np.allclose(encoder.encode_passages(["owls hunt at night", "bees make honey"], batch_size=1), vectors,
                       atol=1e-6)


def test_a_gpu_gets_fp16_and_large_batches_a_cpu_keeps_fp32_and_16():
    assert torch_settings("cuda") == ("float16", GPU_BATCH_SIZE) == ("float16", 128)
    assert torch_settings("cpu") == ("float32", BATCH_SIZE) == ("float32", 16)


def test_a_torch_encoder_runs_as_its_device_says(minilm):
    """Loaded where torch sees a device: on this CPU fp32 weights and batches of 16, unchanged;
    on a GPU the same encoder would be fp16 with batches of 128 (`torch_settings`)."""
    encoder = embed.open_encoder(MINILM, backend=TORCH)
    dtype, batch = torch_settings(embed.device())
    assert str(next(encoder.model.parameters()).dtype) == f"torch.{dtype}"
    assert encoder.passage_batch_size == batch
    assert minilm.passage_batch_size == batch
