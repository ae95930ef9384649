"""BM25 nDCG@10 with each version of the analyser, beside an independent BM25 (bm25s) on the same tokens.

Run from the repo root (BEIR folders; a few minutes for vaswani's 11k documents on a loaded machine):

    .venv/bin/python benchmarks/bm25_analysers.py ../shared/eval/nfcorpus ../shared/eval/vaswani

Columns: the project's BM25 (`BM25Postings`, the default k1 = 0.9, b = 0.4, Lucene idf, title + text
as the collection indexes them) with the v1 analyser (one-letter words, Chinese function words and
NFKC-split fractions kept), v2 (`tokenize`, today's), v2 with Chinese function words kept (the
stopword list alone), and bm25s (method "lucene", float64) over v2's tokens: Lucene ≥ 8 drops the
constant (k1 + 1) numerator, so its scores are ours / (k1 + 1) and its ranking is ours; the last
column is the largest |ours − (k1 + 1)·bm25s| over every query and document. `--json` prints the
rows as JSON.
"""

import argparse
import json
import sys
from pathlib import Path

import bm25s
import numpy as np

from retrieval.evaluation.evaluate import evaluate_run, run_from_rankings
from retrieval.indexing.readers.parse import parse_path
from retrieval.sources.base import top_hits
from retrieval.sources.bm25 import BM25Postings
from retrieval.text.passages import embedding_text
from retrieval.text.tokenize import CHINESE_STOPWORDS, tokenize, tokenize_v1

K1, B = 0.9, 0.4


def with_zh_function_words(text: str) -> list[str]:
    """v2 with the Chinese stopword list emptied (one-letter and fraction rules kept)."""
    t = sys.modules[tokenize.__module__]
    saved, t.CHINESE_STOPWORDS = t.CHINESE_STOPWORDS, frozenset()
    try:
        return tokenize(text)
    finally:
        t.CHINESE_STOPWORDS = saved


def ndcg10(corpus, analyse, reference: bool = False) -> tuple[float, float]:
    ids = [d.id for d in corpus.documents]
    docs = [analyse(embedding_text(d)) for d in corpus.documents]
    postings = BM25Postings(docs)
    model = None
    if reference:
        model = bm25s.BM25(k1=K1, b=B, method="lucene", dtype="float64")
        model.index(docs, show_progress=False)
    judged = [q for q in corpus.qrels if q in corpus.queries]
    rankings, worst = {}, 0.0
    for q in judged:
        terms = analyse(corpus.queries[q])
        if not terms:
            rankings[q] = []
            continue
        scores = postings.scores(terms, K1, B)
        if model is not None:
            known = [t for t in terms if t in postings.vocabulary]
            theirs = model.get_scores(known) * (K1 + 1) if known else np.zeros(len(ids))
            worst = max(worst, float(np.max(np.abs(scores - theirs))))
            scores = theirs
        rankings[q] = [h.doc_id for h in top_hits(ids, scores, 100)]
    qrels = {q: corpus.qrels[q] for q in judged}
    return evaluate_run(qrels, run_from_rankings(rankings), ["ndcg@10"])[0]["ndcg@10"], worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    missing = [f for f in args.folders if not Path(f).is_dir()]
    if missing:
        sys.exit(f"missing BEIR folder(s): {', '.join(missing)}; e.g. ../shared/eval/nfcorpus beside the repository")
    rows = []
    for folder in args.folders:
        corpus = parse_path(folder)
        v2, gap = ndcg10(corpus, tokenize, reference=True)
        rows.append({"collection": Path(folder).name, "v1": ndcg10(corpus, tokenize_v1)[0],
                     "v2": ndcg10(corpus, tokenize)[0],
                     "v2_zh_function_words_kept": ndcg10(corpus, with_zh_function_words)[0],
                     "bm25s_v2_tokens": v2, "max_score_gap": gap, "zh_stopwords": len(CHINESE_STOPWORDS)})
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'collection':<14} {'v1':>7} {'v2':>7} {'v2 zh fw kept':>14} {'bm25s (v2 tokens)':>18} "
          f"{'max |Δscore|':>13}")
    for r in rows:
        print(f"{r['collection']:<14} {r['v1']:>7.4f} {r['v2']:>7.4f} {r['v2_zh_function_words_kept']:>14.4f} "
              f"{r['bm25s_v2_tokens']:>18.4f} {r['max_score_gap']:>13.2e}")


if __name__ == "__main__":
    main()
