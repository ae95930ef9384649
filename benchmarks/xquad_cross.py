"""Build XQuAD's two cross-lingual evaluation folders from the parallel monolingual ones.

    .venv/bin/python benchmarks/xquad_cross.py [EVAL_DIR] [OUT_DIR]

EVAL_DIR (default ../shared/eval) holds `xquad-en` and `xquad-zh` in BEIR layout: the same 240
paragraphs and the same question ids in English and Chinese, but the corpus ids differ (each is a
hash of its paragraph's text). A question is judged relevant to one paragraph in each language, so
each shared question id pairs an English paragraph with its Chinese translation. From that:

- `xquad-en2zh`: the English questions over the Chinese paragraphs (Chinese qrels);
- `xquad-zh2en`: the Chinese questions over the English paragraphs (English qrels);

each with only the question ids present in both languages (1,181). Written to OUT_DIR (default
data/eval-cross, local state, not committed: the data is CC BY-SA 4.0, see ../shared/eval).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def read_jsonl(path: Path) -> list[dict]:
    with path.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def read_qrels(path: Path) -> list[tuple[str, str, str]]:
    lines = path.read_text(encoding="utf-8").splitlines()[1:]
    return [tuple(line.split("\t")[:3]) for line in lines if line.strip()]


def paragraph_pairs(en_qrels: list[tuple[str, str, str]], zh_qrels: list[tuple[str, str, str]]) -> dict[str, str]:
    """English paragraph id -> Chinese paragraph id, through the questions judged in both."""
    en = {q: d for q, d, _ in en_qrels}
    pairs: dict[str, str] = {}
    for q, zh_doc, _ in zh_qrels:
        if q in en:
            known = pairs.setdefault(en[q], zh_doc)
            if known != zh_doc:
                raise SystemExit(f"question {q}: English paragraph {en[q]} pairs with two Chinese ones")
    return pairs


def write_folder(out: Path, corpus: list[dict], queries: list[dict], qrels: list[tuple[str, str, str]]) -> None:
    (out / "qrels").mkdir(parents=True, exist_ok=True)
    with (out / "corpus.jsonl").open("w", encoding="utf-8") as f:
        f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in corpus)
    with (out / "queries.jsonl").open("w", encoding="utf-8") as f:
        f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in queries)
    with (out / "qrels" / "test.tsv").open("w", encoding="utf-8") as f:
        f.write("query-id\tcorpus-id\tscore\n")
        f.writelines(f"{q}\t{d}\t{s}\n" for q, d, s in qrels)


def build(eval_dir: Path, out_dir: Path) -> dict[str, Path]:
    en, zh = eval_dir / "xquad-en", eval_dir / "xquad-zh"
    for folder in (en, zh):
        if not (folder / "corpus.jsonl").is_file():
            raise SystemExit(f"{folder} is missing: give the folder holding xquad-en and xquad-zh "
                             "(default ../shared/eval beside the repository)")
    en_qrels, zh_qrels = read_qrels(en / "qrels" / "test.tsv"), read_qrels(zh / "qrels" / "test.tsv")
    paragraph_pairs(en_qrels, zh_qrels)  # checks the pairing is one-to-one where it is used
    shared = {q for q, _, _ in en_qrels} & {q for q, _, _ in zh_qrels}
    en_queries = [q for q in read_jsonl(en / "queries.jsonl") if q["_id"] in shared]
    zh_queries = [q for q in read_jsonl(zh / "queries.jsonl") if q["_id"] in shared]
    folders = {"xquad-en2zh": (read_jsonl(zh / "corpus.jsonl"), en_queries, [r for r in zh_qrels if r[0] in shared]),
               "xquad-zh2en": (read_jsonl(en / "corpus.jsonl"), zh_queries, [r for r in en_qrels if r[0] in shared])}
    written = {}
    for name, (corpus, queries, qrels) in folders.items():
        write_folder(out_dir / name, corpus, queries, qrels)
        written[name] = out_dir / name
    return written


def main() -> None:
    eval_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO.parent / "shared" / "eval"
    out_dir = Path(sys.argv[2]) if len(sys.argv) > 2 else REPO / "data" / "eval-cross"
    for name, folder in build(eval_dir, out_dir).items():
        print(f"{name}: {folder}")


if __name__ == "__main__":
    main()
