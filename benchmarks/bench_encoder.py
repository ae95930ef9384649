"""Encoder throughput (issue 9, item 3): torch fp32 at several batch sizes against ONNX Runtime
fp32 and int8 exports, and what each costs in nDCG@10.

    nice -n 10 .venv/bin/python benchmarks/bench_encoder.py [--runs SET:MODEL …] [--eval-dir DIR]
        [--sample N] [--batches 16,32,64,128] [--backends torch,onnx,onnx-int8]
        [--corpus-backends torch,onnx-int8] [--no-hybrid] [--json] [--json-out FILE]

For each run (an evaluation set and the model that set's language gets by default) and each
backend (`embed.BACKENDS`):

- load: seconds to open the encoder (an ONNX export is built on first use into
  ``$WORKBENCH_CACHE/onnx``; the build is timed once, in the `export` column);
- batch sizes: documents/s (wall and CPU: process CPU seconds over all threads) of the whole
  corpus at each batch size, estimated from about N passages: whole batches of the corpus sorted
  longest first (as `Encoder.encode_passages` batches it), one from each of N / batch equal
  strata of the length order, their time scaled to all batches (`sample_batches`);
- corpus: documents/s encoding the whole corpus at `encoder.BATCH_SIZE`; then the cosine of each
  passage vector to torch fp32's (min, mean) and nDCG@10 of
  * dense: exact dot-product ranking of the backend's query vectors over its passage vectors;
  * dense-mixed: the backend's query vectors over torch's passage vectors (a collection ingested
    before a backend switch);
  * hybrid: the shipped default `SearchConfig()` through `evaluate_collection`, on a collection
    written (in a temporary store) with the backend's passage vectors and queried with its
    query vectors.

Prints one Markdown table per run; --json prints the same as JSON. Wall times depend on what else
runs on the machine; CPU seconds much less.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import numpy as np  # noqa: E402

from retrieval.evaluation.evaluate import QrelsEvaluator, evaluate_collection  # noqa: E402
from retrieval.indexing.pipeline import create_collection  # noqa: E402
from retrieval.indexing.readers.parse import parse_path  # noqa: E402
from retrieval.models import embed  # noqa: E402
from retrieval.models.encoder import BATCH_SIZE, TORCH, Encoder  # noqa: E402
from retrieval.search.config import SearchConfig  # noqa: E402
from retrieval.search.workbench import Workbench  # noqa: E402
from retrieval.store import Store  # noqa: E402
from retrieval.text.passages import embedding_text  # noqa: E402

DEFAULT_RUNS = (f"nfcorpus:{embed.MINILM}", f"cmrc2018-dev:{embed.E5}")
METRIC = "ndcg@10"
DEPTH = 100


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def timed(fn, *args, **kwargs):
    """(fn(*args, **kwargs), wall seconds, process CPU seconds)."""
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - wall, time.process_time() - cpu


class Precomputed(Encoder):
    """An encoder whose passage vectors were computed already (by text): ingest writes them
    without encoding again; queries go to the wrapped encoder."""

    def __init__(self, encoder: Encoder, vectors: dict[str, np.ndarray]):
        super().__init__(encoder.spec, encoder.model, encoder.backend)
        self.vectors = vectors

    def encode_passages(self, texts, batch_size=BATCH_SIZE, progress=None):
        return np.stack([self.vectors[t] for t in texts])


def dense_ndcg(evaluator: QrelsEvaluator, qids: list[str], q: np.ndarray, d: np.ndarray, doc_ids: list[str]) -> float:
    """nDCG@10 of ranking every document by q·d (the top `DEPTH`)."""
    scores = q @ d.T
    top = np.argsort(-scores, axis=1, kind="stable")[:, :DEPTH]
    rankings = {qid: [doc_ids[j] for j in row] for qid, row in zip(qids, top, strict=True)}
    return evaluator.evaluate_rankings(rankings, (METRIC,))[0][METRIC]


def hybrid_ndcg(model: str, encoder: Encoder, corpus, texts: list[str], vectors: np.ndarray,
                queries: dict[str, str], qrels) -> float:
    """nDCG@10 of the default config on a temporary collection holding `vectors`."""
    with tempfile.TemporaryDirectory(prefix="bench-encoder-") as tmp:
        store = Store(str(Path(tmp) / "db"))
        saved = embed._encoders.get(model)
        embed._encoders[model] = Precomputed(encoder, dict(zip(texts, vectors, strict=True)))
        try:
            # No cross-lingual column: it would embed the corpus again with E5 (the slow part) and
            # does not change the English queries' ranking.
            name = create_collection(store, "bench", corpus, model=model, cross_lingual=False).info.name
            workbench = Workbench(store)
            report = evaluate_collection(workbench, name, queries, qrels, SearchConfig(), metrics=(METRIC,))
        finally:
            if saved is None:
                embed._encoders.pop(model, None)
            else:
                embed._encoders[model] = saved
    return report.metrics["hybrid"][METRIC]


def sample_batches(by_length: list[str], batch_size: int, sample: int) -> tuple[list[list[str]], float]:
    """About `sample` texts as whole batches of the corpus's own batching (longest first, cut
    every `batch_size`): the middle batch of each of k equal strata of the length order, and the
    factor (batches in the corpus / k) that scales their time to the whole corpus's. Each batch
    pads as it would in a whole-corpus encode, which a random sample encoded on its own would not
    (its batches span wider length ranges the larger they are)."""
    starts = list(range(0, len(by_length), batch_size))
    k = max(1, min(len(starts), round(sample / batch_size)))
    chosen = [starts[int((i + 0.5) * len(starts) / k)] for i in range(k)]
    return [by_length[s : s + batch_size] for s in chosen], len(starts) / k


def open_backend(model: str, backend: str) -> tuple[Encoder, float | None, float]:
    """(encoder, seconds to build its ONNX export or None when cached or torch, seconds to load)."""
    export = None
    if backend != TORCH:
        from retrieval.models import onnx_export

        path, cache = Path(embed.resolve_model(model).path), embed.cache_dir()
        if not onnx_export.is_complete(onnx_export.export_dir(cache, path, backend)):
            _, export, _ = timed(onnx_export.ensure_onnx_model, path, cache, backend)
    encoder, load, _ = timed(embed.open_encoder, model, backend=backend)
    return encoder, export, load


def bench_run(folder: Path, model: str, backends: list[str], corpus_backends: set[str], batches: list[int],
              sample: int, hybrid: bool) -> dict:
    corpus = parse_path(folder)
    docs = corpus.documents
    texts = [embedding_text(d) for d in docs]
    doc_ids = [d.id for d in docs]
    qrels = {q: j for q, j in corpus.qrels.items() if j and q in corpus.queries}
    qids = list(qrels)
    evaluator = QrelsEvaluator(qrels)
    by_length = sorted(texts, key=len, reverse=True)  # the order encode_passages batches in
    log(f"{folder.name} × {model}: {len(docs)} documents, {len(qids)} judged queries, sample {sample}")
    rows, reference, sample_reference = [], None, None
    for backend in backends:
        encoder, export, load = open_backend(model, backend)
        encoder.encode_passages(by_length[-8:], batch_size=8)  # warm-up: first-call allocations
        row = {"backend": backend, "export_s": export, "load_s": load, "batches": {}}
        for bs in batches:
            picked, scale = sample_batches(by_length, bs, sample)
            wall = cpu = 0.0
            for batch in picked:
                vectors, w, c = timed(encoder.encode_passages, batch, batch_size=bs)
                wall, cpu = wall + w, cpu + c
            # documents/s of the whole corpus, its time estimated from the sampled batches'
            n = len(texts)
            row["batches"][bs] = {"sampled": sum(map(len, picked)), "docs_per_s": n / (wall * scale),
                                  "docs_per_cpu_s": n / (cpu * scale)}
            log(f"  {backend} batch {bs}: {len(picked)} batches, {n / (wall * scale):.1f} docs/s, "
                f"{n / (cpu * scale):.1f} docs/CPU-s (estimated for the corpus)")
        # the cosine on the last batch of the largest size (the same texts for every backend)
        sample_reference = vectors if sample_reference is None else sample_reference
        cos = np.einsum("ij,ij->i", vectors, sample_reference)
        row |= {"sample_cos_min": float(cos.min()), "sample_cos_mean": float(cos.mean())}
        if backend in corpus_backends:
            vectors, wall, cpu = timed(encoder.encode_passages, texts)
            q = encoder.encode_queries([corpus.queries[i] for i in qids])
            row |= {"corpus_docs_per_s": len(texts) / wall, "corpus_docs_per_cpu_s": len(texts) / cpu,
                    "corpus_wall_s": wall, "corpus_cpu_s": cpu}
            reference = vectors if reference is None else reference
            cos = np.einsum("ij,ij->i", vectors, reference)
            row |= {"cos_min": float(cos.min()), "cos_mean": float(cos.mean()),
                    "dense": dense_ndcg(evaluator, qids, q, vectors, doc_ids),
                    "dense_mixed": dense_ndcg(evaluator, qids, q, reference, doc_ids)}
            log(f"  {backend} corpus: {row['corpus_docs_per_s']:.1f} docs/s, dense {row['dense']:.4f}")
            if hybrid:
                row["hybrid"] = hybrid_ndcg(model, encoder, corpus, texts, vectors, corpus.queries, qrels)
                log(f"  {backend} hybrid {row['hybrid']:.4f}")
        rows.append(row)
        del encoder
    return {"set": folder.name, "model": model, "documents": len(docs), "queries": len(qids),
            "sample": sample, "rows": rows}


def fmt(value: float | None, spec: str) -> str:
    return "—" if value is None else format(value, spec)


def markdown(run: dict, batches: list[int]) -> str:
    base = run["rows"][0]
    head = ["backend", "export s", "load s", *(f"b{b} docs/s (CPU)" for b in batches), "sample cos min / mean",
            f"corpus b{BATCH_SIZE} docs/s (CPU)", "corpus cos min / mean", "dense", "Δ", "dense-mixed",
            "hybrid", "Δ"]
    lines = [f"**{run['set']} × {run['model']}** — {run['documents']} documents, {run['queries']} judged "
             f"queries; batch columns estimated from ≈{run['sample']} documents in whole batches; nDCG@10, Δ against "
             f"{base['backend']}",
             "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in run["rows"]:
        cells = [r["backend"], fmt(r["export_s"], ".0f"), fmt(r["load_s"], ".1f")]
        cells += [f"{r['batches'][b]['docs_per_s']:.1f} ({r['batches'][b]['docs_per_cpu_s']:.1f})" for b in batches]
        cells += [f"{r['sample_cos_min']:.4f} / {r['sample_cos_mean']:.4f}"]
        if "dense" in r:
            cells += [f"{r['corpus_docs_per_s']:.1f} ({r['corpus_docs_per_cpu_s']:.1f})",
                      f"{r['cos_min']:.4f} / {r['cos_mean']:.4f}", f"{r['dense']:.4f}",
                      f"{r['dense'] - base['dense']:+.4f}", f"{r['dense_mixed']:.4f}"]
        else:
            cells += ["—"] * 5
        hybrid, base_hybrid = r.get("hybrid"), base.get("hybrid")
        delta = None if hybrid is None or base_hybrid is None else hybrid - base_hybrid
        cells += [fmt(hybrid, ".4f"), fmt(delta, "+.4f")]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--eval-dir", type=Path, default=REPO.parent / "shared" / "eval")
    parser.add_argument("--runs", nargs="+", default=list(DEFAULT_RUNS), metavar="SET:MODEL")
    parser.add_argument("--backends", default=",".join(embed.BACKENDS))
    parser.add_argument("--corpus-backends", default=None,
                        help="backends that encode the whole corpus and are scored (default: all)")
    parser.add_argument("--batches", default="16,32,64,128")
    parser.add_argument("--sample", type=int, default=256)
    parser.add_argument("--no-hybrid", action="store_true")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--json-out", type=Path, help="also write the JSON to this file")
    args = parser.parse_args()
    import torch

    batches = [int(b) for b in args.batches.split(",")]
    backends = args.backends.split(",")
    corpus_backends = set(args.corpus_backends.split(",") if args.corpus_backends else backends)
    if backends[0] != TORCH or TORCH not in corpus_backends:
        parser.error("torch is the reference: the first backend, and one of the corpus backends")
    header = {"torch_threads": torch.get_num_threads(), "torch_interop_threads": torch.get_num_interop_threads(),
              "cpus": len(os.sched_getaffinity(0)), "device": embed.device(), "load_avg_start": os.getloadavg()}
    log(f"machine: {header}")
    runs = []
    for item in args.runs:
        name, _, model = item.partition(":")
        runs.append(bench_run(args.eval_dir / name, model, backends, corpus_backends, batches, args.sample,
                              not args.no_hybrid))
    header["load_avg_end"] = os.getloadavg()
    data = json.dumps({"machine": header, "runs": runs}, indent=1)
    if args.json_out:
        args.json_out.write_text(data + "\n", encoding="utf-8")
    if args.json:
        print(data)
        return
    print(f"torch threads {header['torch_threads']} (interop {header['torch_interop_threads']}) on "
          f"{header['cpus']} CPUs, device {header['device']}; load average {header['load_avg_start'][0]:.1f} "
          f"at start, {header['load_avg_end'][0]:.1f} at end\n")
    for run in runs:
        print(markdown(run, batches) + "\n")


if __name__ == "__main__":
    main()
