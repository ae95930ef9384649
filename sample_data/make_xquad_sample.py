"""Rebuild sample_data/xquad/ from ../shared/eval/xquad-en and xquad-zh (run from the repo root).

Takes the first N English paragraphs and their Chinese translations (aligned through the shared
question ids), renames them en-001 … / zh-001 … so a translation pair shares its number, and keeps
every question of both languages whose paragraph is in the sample, with its judgment.
"""

import json
import sys
from pathlib import Path

N = int(sys.argv[1]) if len(sys.argv) > 1 else 60
EVAL = Path(__file__).resolve().parents[2] / "shared" / "eval"
OUT = Path(__file__).resolve().parent / "xquad"


def read(lang):
    folder = EVAL / f"xquad-{lang}"
    if not folder.is_dir():
        sys.exit(f"{folder} is missing: this script rebuilds the sample from ../shared/eval/xquad-en and xquad-zh "
                 "beside the repository")
    corpus = [json.loads(line) for line in (folder / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    queries = {q["_id"]: q["text"] for q in map(json.loads,
                                                (folder / "queries.jsonl").read_text(encoding="utf-8").splitlines())}
    qrels = {}
    for line in (folder / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines(keepends=True)[1:]:
        qid, did, _ = line.rstrip("\n").split("\t")
        qrels[qid] = did
    return corpus, queries, qrels


en_corpus, en_queries, en_qrels = read("en")
zh_corpus, zh_queries, zh_qrels = read("zh")
en_ids = [d["_id"] for d in en_corpus[:N]]
number = {doc_id: i for i, doc_id in enumerate(en_ids, start=1)}
# A Chinese paragraph is the translation of the English one its questions point to.
zh_number = {zh_qrels[q]: number[en_qrels[q]] for q in zh_qrels if q in en_qrels and en_qrels[q] in number}
zh_text = {d["_id"]: d["text"] for d in zh_corpus}

OUT.mkdir(exist_ok=True)
(OUT / "qrels").mkdir(exist_ok=True)
with open(OUT / "corpus.jsonl", "w", encoding="utf-8") as f:
    for d in en_corpus[:N]:
        f.write(json.dumps({"_id": f"en-{number[d['_id']]:03d}", "title": "", "text": d["text"], "lang": "en"},
                           ensure_ascii=False) + "\n")
    for zh_id, n in sorted(zh_number.items(), key=lambda item: item[1]):
        f.write(json.dumps({"_id": f"zh-{n:03d}", "title": "", "text": zh_text[zh_id], "lang": "zh"},
                           ensure_ascii=False) + "\n")
with (open(OUT / "queries.jsonl", "w", encoding="utf-8") as fq,
      open(OUT / "qrels" / "test.tsv", "w", encoding="utf-8") as fr):
    fr.write("query-id\tcorpus-id\tscore\n")
    for lang, queries, qrels, numbering in (("en", en_queries, en_qrels, number),
                                            ("zh", zh_queries, zh_qrels, zh_number)):
        for qid, did in qrels.items():
            if did in numbering:
                fq.write(json.dumps({"_id": f"{lang}-{qid}", "text": queries[qid]}, ensure_ascii=False) + "\n")
                fr.write(f"{lang}-{qid}\t{lang}-{numbering[did]:03d}\t1\n")
print(f"{N} English + {len(zh_number)} Chinese paragraphs written to {OUT}")
