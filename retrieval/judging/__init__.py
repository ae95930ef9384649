"""Judging: relevance judgments, who gave them, and how to get more.

    judgments.py        query sets and graded judgments per rater and collection (`JudgmentStore`)
    query_set.py        one query set as read (`QuerySet`) and the consensus source's name
    judgment_tables.py  the two LanceDB tables under it and the all-or-nothing write across them
    validation.py       what a query set may hold: set names, ids, query texts, grades
    raters.py           several raters per judgment: agreement, disagreements, consensus
    qrels.py            judgments and query sets in the formats evaluation data ships in (TREC,
                        BEIR, CSV; JSONL/TSV/CSV queries), read and written
    rating_formats.py   several raters' ratings as files: a ratings CSV and Quepid's, read and written
    judge_next.py       what to judge next (minimal test collections) and the depth pool: pure functions
    implicit/           judgments from behaviour logs (UBI, click logs) by click models (CTR, COEC,
                        PBM, SDBN), saved as the judgment source `implicit:<model>`; a click simulator
    llm/                an LLM as one more rater, from any OpenAI-compatible endpoint: its settings,
                        HTTP client, answer cache and runs

The judging queue over a config's rankings is evaluation's (`evaluation/judging_queue.py`).
Entry points: `JudgmentStore`, `Rating`, `consensus`, `next_to_judge`.
"""

from retrieval.judging.judge_next import next_to_judge
from retrieval.judging.judgments import JudgmentStore
from retrieval.judging.raters import Rating, consensus

__all__ = ["JudgmentStore", "Rating", "consensus", "next_to_judge"]
