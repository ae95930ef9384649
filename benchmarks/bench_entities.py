"""Entity extraction per document: jieba's own part-of-speech tagger against the faster one
(text/pos_tagging.py), alternating in one process so a loaded machine slows both alike; prints
a table (or --json) and checks that both give the same entities.

    nice -n 19 .venv/bin/python benchmarks/bench_entities.py [--docs 300] [--rounds 2] [--eval-dir DIR] [--json]

Corpora: ../shared/eval/{xquad-en, nfcorpus, vaswani, xquad-zh, cmrc2018-dev}/corpus.jsonl, the
first --docs documents of each. A round runs the extractor with jieba's tagger, then the fast
one (its run cache cleared first, so it starts cold every round); ms/doc is the best round's.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EVAL = REPO.parent / "shared" / "eval"
CORPORA = ("xquad-en", "nfcorpus", "vaswani", "xquad-zh", "cmrc2018-dev")


def extractors():
    """(with jieba's tagger, with the fast one): two extractors of the default configuration."""
    import jieba.posseg

    from retrieval.text.entities import EntityExtractor

    slow, fast = EntityExtractor(), EntityExtractor()
    for extractor in (slow, fast):
        extractor.extract("预热：曹操")  # loads jieba
    slow._pos = jieba.posseg.POSTokenizer(fast._pos.tokenizer)
    slow._tfidf.postokenizer = slow._pos
    return slow, fast


def run(docs: int, rounds: int, eval_dir: Path = EVAL) -> list[dict]:
    from retrieval.text.pos_tagging import viterbi

    slow, fast = extractors()
    rows = []
    for name in CORPORA:
        lines = (eval_dir / name / "corpus.jsonl").read_text(encoding="utf-8").splitlines()[:docs]
        texts = [(r.get("title") or "", r["text"]) for r in map(json.loads, lines)]
        best = {"jieba": float("inf"), "fast": float("inf")}
        same = True
        for _ in range(rounds):
            viterbi.cache_clear()
            outputs = {}
            for label, extractor in (("jieba", slow), ("fast", fast)):
                started = time.perf_counter()
                outputs[label] = [extractor.extract(text, title) for title, text in texts]
                best[label] = min(best[label], time.perf_counter() - started)
            same = same and outputs["jieba"] == outputs["fast"]
        chars = sum(len(t) for _, t in texts) / len(texts)
        rows.append({"corpus": name, "docs": len(texts), "chars_per_doc": round(chars),
                     "jieba_ms_per_doc": round(1000 * best["jieba"] / len(texts), 3),
                     "fast_ms_per_doc": round(1000 * best["fast"] / len(texts), 3),
                     "speedup": round(best["jieba"] / best["fast"], 2), "same_entities": same})
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--eval-dir", type=Path, default=EVAL, help="the shared BEIR sets (default ../shared/eval)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rows = run(args.docs, args.rounds, args.eval_dir)
    if args.json:
        print(json.dumps(rows))
        return
    print("| corpus | docs | chars/doc | jieba tagger ms/doc | fast ms/doc | speedup | same entities |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | --- |")
    for r in rows:
        print(f"| {r['corpus']} | {r['docs']} | {r['chars_per_doc']} | {r['jieba_ms_per_doc']:.2f} | "
              f"{r['fast_ms_per_doc']:.2f} | {r['speedup']:.2f}× | {r['same_entities']} |")


if __name__ == "__main__":
    main()
