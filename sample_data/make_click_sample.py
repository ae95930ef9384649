"""Write `clicks/`: a small simulated UBI log over the bundled XQuAD sample (see README.md).

    python sample_data/make_click_sample.py

The first 20 English questions of `xquad/queries.jsonl`; per question, candidates: the paragraph
that answers it (grade 3), the paragraphs before and after it (grade 1: the same article) and four
other English paragraphs drawn with a fixed seed (grade 0). Five searches per question by
position-based users (`retrieval.judging.implicit.simulate`: γ_r = 1/(r + 1), noise 0.05, the top
5 of an imperfect ranker), written as UBI events (query ids, no user_query: the queries file
gives the texts) and UBI queries. Deterministic: the same files on every run.
"""

import json
from pathlib import Path

import numpy as np

from retrieval.judging.implicit.simulate import simulate

HERE = Path(__file__).resolve().parent


QUESTIONS, SESSIONS_PER_QUESTION, DEPTH, SEED = 20, 5, 5, 5


def main() -> None:
    queries = [json.loads(line) for line in (HERE / "xquad" / "queries.jsonl").read_text(encoding="utf-8").splitlines()]
    queries = [q for q in queries if q["_id"].startswith("en-")][:QUESTIONS]
    answers = {}
    for line in (HERE / "xquad" / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        query_id, doc_id, _ = line.split("\t")
        answers[query_id] = doc_id
    rng = np.random.default_rng(SEED)
    relevance = {}
    for q in queries:
        number = int(answers[q["_id"]].split("-")[1])
        grades = {f"en-{number:03d}": 3}
        for near in (number - 1, number + 1):
            if 1 <= near <= 60:
                grades[f"en-{near:03d}"] = 1
        while len(grades) < 7:
            grades.setdefault(f"en-{int(rng.integers(1, 61)):03d}", 0)
        relevance[q["text"]] = grades
    text_id = {q["text"]: f"ubi-{i:02d}" for i, q in enumerate(queries)}
    events, searches = [], []
    for event in simulate(relevance, QUESTIONS * SESSIONS_PER_QUESTION, depth=DEPTH, seed=SEED):
        search = f"{text_id[event.query]}-{event.session}"
        if not searches or searches[-1][0] != search:
            searches.append((search, event.query))
        events.append({"action_name": event.action, "query_id": search, "session_id": event.session,
                       "event_attributes": {"object": {"object_id": event.doc},
                                            "position": {"ordinal": event.position}}})
    out = HERE / "clicks"
    out.mkdir(exist_ok=True)
    with open(out / "ubi_events.ndjson", "w", encoding="utf-8") as handle:
        for e in events:
            handle.write(json.dumps(e, ensure_ascii=False, separators=(",", ":")) + "\n")
    with open(out / "ubi_queries.ndjson", "w", encoding="utf-8") as handle:
        for search, text in searches:
            handle.write(json.dumps({"query_id": search, "user_query": text}, ensure_ascii=False,
                                    separators=(",", ":")) + "\n")


if __name__ == "__main__":
    main()
