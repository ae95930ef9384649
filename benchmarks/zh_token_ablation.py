"""Why our BM25 beats the reference figure on Chinese sets: single-character tokens.

bm25s's default token pattern `\\w\\w+` drops one-character tokens, which in jieba output are
frequent and meaningful (年, 省, 队 …). Run from the repo root:

    .venv/bin/python benchmarks/zh_token_ablation.py ../shared/eval/cmrc2018-dev ../shared/eval/xquad-zh

Prints BM25 (k1 = 1.5, b = 0.75, bm25s's defaults) nDCG@10 with all tokens and with tokens of ≥ 2
characters only.
"""

import sys
from pathlib import Path

from retrieval.evaluation.evaluate import evaluate_run, run_from_rankings
from retrieval.indexing.readers.parse import parse_path
from retrieval.sources.base import top_hits
from retrieval.sources.bm25 import LuceneIdfBM25
from retrieval.text.tokenize import tokenize


def two_or_more(text: str) -> list[str]:
    return [t for t in tokenize(text) if len(t) >= 2]


def ndcg10(folder: str, analyse) -> float:
    corpus = parse_path(folder)
    ids = [d.id for d in corpus.documents]
    model = LuceneIdfBM25([analyse(d.text) for d in corpus.documents], k1=1.5, b=0.75)
    judged = [q for q in corpus.qrels if q in corpus.queries]
    rankings = {}
    for q in judged:
        terms = analyse(corpus.queries[q])
        rankings[q] = [h.doc_id for h in top_hits(ids, model.get_scores(terms), 100)] if terms else []
    return evaluate_run({q: corpus.qrels[q] for q in judged}, run_from_rankings(rankings), ["ndcg@10"])[0]["ndcg@10"]


if __name__ == "__main__":
    missing = [folder for folder in sys.argv[1:] if not Path(folder).is_dir()]
    if missing or len(sys.argv) < 2:
        sys.exit(f"missing BEIR folder(s): {', '.join(missing) or 'none given'}; e.g. ../shared/eval/xquad-zh "
                 "beside the repository (see the usage at the top of this file)")
    print(f"{'collection':<16} {'all tokens':>11} {'≥2 chars':>9}")
    for folder in sys.argv[1:]:
        print(f"{Path(folder).name:<16} {ndcg10(folder, tokenize):>11.4f} {ndcg10(folder, two_or_more):>9.4f}")
