"""Judging: relevance judgments, who gave them, and how to get more.

    judgments.py   query sets and graded judgments per collection in LanceDB (`JudgmentStore`)
    raters.py      several raters per judgment: agreement, disagreements, consensus
    qrels.py       judgments and query sets in the formats evaluation data ships in (TREC, BEIR,
                   CSV, Quepid), read and written
    judge_next.py  what to judge next (minimal test collections) and the depth pool: pure functions
    llm/           an LLM as one more rater, from any OpenAI-compatible endpoint: its settings,
                   HTTP client, answer cache and runs

The judging queue over a config's rankings is evaluation's (`evaluation/judging_queue.py`).
Entry points: `JudgmentStore`, `Rating`, `consensus`, `next_to_judge`.
"""

from retrieval.judging.judge_next import next_to_judge
from retrieval.judging.judgments import JudgmentStore
from retrieval.judging.raters import Rating, consensus

__all__ = ["JudgmentStore", "Rating", "consensus", "next_to_judge"]
