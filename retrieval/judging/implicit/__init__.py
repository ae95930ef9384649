"""Implicit judgments: behaviour logs turned into judgment lists by click models.

    logs.py      UBI NDJSON (events, queries) and CSV/TSV click logs read as a stream of click
                 events; bad lines counted and named
    counts.py    a log folded into event counts (SRW's) and session counts, in bounded memory
    coec.py      CTR and COEC exactly as OpenSearch SRW computes it
    pbm.py       the position-based model, by EM
    sdbn.py      the simplified DBN (a cascade model), closed form
    grading.py   a model's scores as grades 0–3 by thresholds, a minimum of impressions
    simulate.py  a click simulator (position-based or cascade users over known relevance, noise)
    source.py    an implicit list saved as the judgment source `implicit:<model>`, and its
                 agreement with the explicit judgments

Source: Chuklin, Markov & de Rijke, "Click Models for Web Search" (2015).
Entry points: `read_logs`, `ClickCounts`, `implicit_judgments`, `MODELS`.
"""

from retrieval.judging.implicit.counts import ClickCounts
from retrieval.judging.implicit.grading import MODELS, ImplicitList, implicit_judgments
from retrieval.judging.implicit.logs import read_logs

__all__ = ["MODELS", "ClickCounts", "ImplicitList", "implicit_judgments", "read_logs"]
