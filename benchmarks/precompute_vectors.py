"""A built-in model's passage vectors of a whole BEIR corpus, computed in shards that survive a stop.

Embedding the 1M-document scale corpus with the real MiniLM takes many CPU-hours on 2 cores, more
than one sitting; this runs it in shards of --shard documents (corpus order), each written to a
temporary file and renamed into place, so a stopped run resumes at the first missing shard. The
vectors are the ingest's own: the same stream (`readers.stream.open_stream`), text (`derive.title_and_text`)
and encoder (`embed.open_encoder`, `encode_passages`) as `Workbench.ingest_stream`; the int8
backend runs each text alone, so a vector does not depend on the shard it was computed in.
`bench_peers.py --vectors DIR` then ingests the corpus with them (`bench_scale.PrecomputedPassages`,
which checks each batch's first passage against the model). After a change of the ONNX export
format the shards already made are kept only if the first and the last give the same vectors to
the bit under the new format (recorded in the manifest's `format_checks`). Usage:

    nice -n 19 .venv/bin/python benchmarks/precompute_vectors.py data/scale/corpus-1000000 \
        [--model all-MiniLM-L6-v2] [--backend onnx-int8] [--out DIR] [--shard 16384]

Prints one line per shard (documents, seconds, documents per second of wall and CPU time).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

SHARD = 16_384
CHECK = 32  # passages re-encoded per checked shard after an export format change


def shard_path(out: Path, index: int) -> Path:
    """Shard `index` (documents index·shard … (index+1)·shard − 1 of the corpus)."""
    return out / f"shard-{index:05d}.npy"


def default_out(corpus: Path, model: str, backend: str) -> Path:
    """data/scale/vectors-<corpus folder>-<model>-<backend>, beside the corpus folder."""
    return corpus.parent / f"vectors-{corpus.name}-{Path(model).name}-{backend}"


def read_manifest(out: Path) -> dict:
    path = out / "manifest.json"
    return json.loads(path.read_text()) if path.is_file() else {}


def main(argv: list[str] | None = None) -> None:
    from retrieval.indexing.readers.stream import open_stream
    from retrieval.models import embed, onnx_export
    from retrieval.text.passages import title_and_text

    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpus", type=Path, help="BEIR folder (corpus.jsonl)")
    parser.add_argument("--model", default=embed.MINILM)
    parser.add_argument("--backend", default=None, help="encoder backend (default: embed.backend_for)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--shard", type=int, default=SHARD)
    args = parser.parse_args(argv)

    backend = args.backend or embed.backend_for(args.model)
    out = args.out or default_out(args.corpus, args.model, backend)
    out.mkdir(parents=True, exist_ok=True)
    manifest = {"corpus": str(args.corpus.resolve()), "model": args.model, "backend": backend,
                "shard": args.shard, "onnx_format": onnx_export.FORMAT}
    before = read_manifest(out)
    same_run = {k: v for k, v in before.items() if k not in ("documents", "onnx_format", "format_checks")}
    if before and same_run != {k: v for k, v in manifest.items() if k != "onnx_format"}:
        sys.exit(f"{out} holds vectors of another run ({before}); pick another --out")
    stream = open_stream(args.corpus, batch_size=args.shard)
    encoder = embed.open_encoder(args.model, backend=backend)
    # An export format change that keeps the vectors to the bit keeps the shards made before it:
    # the first CHECK passages of the first and the last shard made are encoded again and must be
    # equal to the bit, or the run stops.
    format_checks = before.get("format_checks", [])
    made = sorted(int(p.name[6:11]) for p in out.glob("shard-?????.npy"))
    # Only the int8 export runs each text alone, so only its vectors can be compared to the bit;
    # torch's do not come from an export (nothing to check); the fp32 export's depend on the batch.
    changed = backend in onnx_export.VARIANTS and before and before.get("onnx_format") != onnx_export.FORMAT
    if changed and made and backend != onnx_export.ONNX_INT8:
        sys.exit(f"{out} was made by export format {before.get('onnx_format')} on {backend}, whose vectors depend on "
                 "their batch and cannot be checked to the bit: pick another --out")
    to_check = {made[0], made[-1]} if changed and made else set()

    def write_manifest() -> None:
        (out / "manifest.json").write_text(json.dumps({**manifest, "documents": stream.total,
                                                       "format_checks": format_checks}, indent=1))

    if not to_check:  # else once the checks have passed: a failed check leaves the old format recorded
        write_manifest()
    total_docs = total_wall = total_cpu = 0.0
    for index, batch in enumerate(stream.batches()):
        path = shard_path(out, index)
        if index in to_check:
            texts = [title_and_text(d.title, d.text) for d in batch[:CHECK]]
            if not np.array_equal(encoder.encode_passages(texts).astype(np.float32), np.load(path)[:CHECK]):
                sys.exit(f"shard {index} was made by export format {before.get('onnx_format')}; format "
                         f"{onnx_export.FORMAT} gives other vectors: pick another --out")
            format_checks.append({"from": before.get("onnx_format"), "to": onnx_export.FORMAT,
                                  "shard": index, "passages": len(texts), "equal": True})
            print(f"shard {index:5d}: {len(texts)} passages equal to the bit under format {onnx_export.FORMAT}",
                  flush=True)
            if index == max(to_check):
                write_manifest()
        if path.is_file():
            continue
        texts = [title_and_text(d.title, d.text) for d in batch]
        wall, cpu = time.perf_counter(), time.process_time()
        vectors = encoder.encode_passages(texts)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        temporary = path.with_suffix(".partial.npy")
        np.save(temporary, vectors.astype(np.float32))
        os.replace(temporary, path)  # the shard exists only once it is whole
        total_docs, total_wall, total_cpu = total_docs + len(batch), total_wall + wall, total_cpu + cpu
        print(f"shard {index:5d}: {len(batch):,} documents in {wall:.0f} s ({len(batch) / wall:.1f} docs/s, "
              f"{len(batch) / cpu:.1f} per CPU-s); this run {total_docs:,.0f} documents, "
              f"{total_docs / total_wall:.1f} docs/s", flush=True)
    done = sum(1 for _ in out.glob("shard-?????.npy"))
    print(f"{out}: {done} shards of {-(-stream.total // args.shard)}", flush=True)


if __name__ == "__main__":
    main()
