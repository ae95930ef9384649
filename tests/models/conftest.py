"""Fixtures the models' tests share: MiniLM's process-wide encoder, and one real fp32 ONNX export of
all-MiniLM-L6-v2 (a few seconds), its int8 quantisation and torch's vectors of the same texts, for
test_onnx_export.py and test_onnx_model.py (on one worker: `SHARED_GROUPS` in tests/conftest.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from retrieval.models import embed, onnx_export
from retrieval.models.embed import MINILM
from retrieval.models.encoder import TORCH, Encoder
from retrieval.models.onnx_export import MANIFEST, MODEL_FILE, ONNX_FP32, ONNX_INT8

TEXTS = [
    "How do I bake bread at home?",
    "A simple recipe for homemade bread with flour, yeast and water.",
    "The stock market closed lower on Friday.",
    "word " * 400,  # longer than MiniLM's 256-token window: truncated the same way as torch
]


@pytest.fixture(scope="module")
def minilm() -> Encoder:
    return embed.load_encoder(MINILM)


@pytest.fixture(scope="session")
def texts() -> list[str]:
    """The texts `torch_vectors` holds the vectors of."""
    return TEXTS


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    return Path(embed.resolve_model(MINILM).path)


@pytest.fixture(scope="session")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("workbench-cache")


@pytest.fixture(scope="session")
def exported(minilm_path, cache) -> Path:
    return onnx_export.ensure_onnx_model(minilm_path, cache, ONNX_FP32)


@pytest.fixture(scope="session")
def torch_vectors() -> np.ndarray:
    return embed.open_encoder(MINILM, backend=TORCH).encode_passages(TEXTS)


@pytest.fixture(scope="session")
def int8_export(exported, tmp_path_factory) -> Path:
    """The fp32 export quantised as `build_export` quantises an int8 variant."""
    int8 = tmp_path_factory.mktemp("int8")
    shutil.copytree(exported / onnx_export.TOKENIZER_DIR, int8 / onnx_export.TOKENIZER_DIR)
    onnx_export.quantize_int8(exported / MODEL_FILE, int8 / MODEL_FILE)
    manifest = json.loads((exported / MANIFEST).read_text()) | {"variant": ONNX_INT8}
    (int8 / MANIFEST).write_text(json.dumps(manifest))
    return int8
