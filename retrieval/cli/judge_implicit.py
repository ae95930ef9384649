"""`python -m retrieval judge implicit …`: judgments from behaviour logs by a click model.

    judge implicit [--events FILE] [--queries FILE] [--csv FILE] --model coec|ctr|pbm|sdbn|dbn
                   [--max-rank 20] [--min-impressions N] [--thresholds T1,T2,T3]
                   [--collection C --query-set S] [--json]

Reads a UBI events file (with its queries file) and/or a CSV/TSV click log, fits the model
(`judging.implicit`) and prints the judgments (`--json`: {"model", "position_ctr" or "examination",
"judgments", "skipped", …}). With a collection and a query set, documents the collection lacks are
left out and the list is saved in the set as the judgment source `implicit:<model>`; where the set
has explicit judgments, its agreement with them (κ, α) is printed too (JSON: "saved", "agreement").
`dbn` is the simplified DBN (`sdbn`), fitted in closed form.
"""

from __future__ import annotations

import json
from pathlib import Path

from retrieval.cli.common import at_least, log
from retrieval.types import RetrievalError

MODEL_CHOICES = ("coec", "ctr", "pbm", "sdbn", "dbn")


def add_actions(actions) -> None:
    """The `implicit` action of `judge` (`judge.add_parser` calls this)."""
    q = actions.add_parser("implicit", help="judgments from behaviour logs (UBI NDJSON or a CSV/TSV click log) by a "
                                            "click model: CTR, COEC (as OpenSearch SRW), PBM (EM), SDBN")
    q.add_argument("--events", type=Path, help="UBI events, one JSON object a line")
    q.add_argument("--queries", type=Path, help="UBI queries (query_id → user_query), one JSON object a line")
    q.add_argument("--csv", type=Path, help="a CSV/TSV click log: query, doc, position, clicked [, session, time]")
    q.add_argument("--model", required=True, choices=MODEL_CHOICES,
                   help="coec: clicks over expected clicks (SRW's); ctr; pbm: position-based model (EM); "
                        "sdbn (or dbn): the simplified DBN, a cascade model")
    q.add_argument("--max-rank", type=at_least(1), default=20, dest="max_rank",
                   help="positions above this are left out (SRW's maxRank; default 20)")
    q.add_argument("--min-impressions", type=at_least(1), default=1, dest="min_impressions",
                   help="pairs seen fewer times are left unjudged and counted (default 1)")
    q.add_argument("--thresholds", help="three increasing scores where grades 1, 2 and 3 start (default: coec "
                                        "0.5,1,2; the others 0.1,0.3,0.6)")
    q.add_argument("--collection", help="match documents to this collection and save the list in --query-set")
    q.add_argument("--query-set", "--queryset", dest="query_set", help="the query set to save the list in")
    q.add_argument("--json", action="store_true", help="print JSON")


def cmd_implicit(args) -> int:
    from retrieval.judging.implicit import ClickCounts, implicit_judgments, read_logs

    if bool(args.collection) != bool(args.query_set):
        raise RetrievalError("--collection and --query-set go together (the list is saved in that set)")
    thresholds = None
    if args.thresholds:
        try:
            thresholds = [float(t) for t in args.thresholds.split(",")]
        except ValueError:
            raise RetrievalError(f"--thresholds takes three numbers, comma-separated, got {args.thresholds!r}"
                                 ) from None
    model = "sdbn" if args.model == "dbn" else args.model
    if args.model == "dbn":
        log("dbn: the simplified DBN (continuation γ = 1), fitted in closed form (model 'sdbn')")
    workbench = collection = None
    if args.collection:
        from retrieval.cli.common import open_workbench

        workbench = open_workbench(args)
        collection = workbench.resolve(args.collection)
    events, report = read_logs(args.events, args.queries, args.csv)
    counts = ClickCounts(max_rank=args.max_rank).add_all(events)
    known = None
    if collection is not None:
        held = workbench.store.existing_ids(collection, sorted({doc for _, doc in counts.pairs}))
        known = held.__contains__
    result = implicit_judgments(counts, model, args.min_impressions, thresholds, known)
    result.skipped.update(report.to_json())
    out = result.to_json()
    if collection is not None:
        out.update(_save(workbench, collection, args.query_set, result))
    if args.json:
        print(json.dumps(out, ensure_ascii=False))
    else:
        _print(result, out)
    return 0


def _save(workbench, collection: str, set_name: str, result) -> dict:
    from retrieval.judging.implicit.source import agreement_with_explicit, save_implicit

    saved = save_implicit(workbench.judgments, collection, set_name, result)
    log(f"query set {set_name!r} of {collection!r}: {saved.saved} judgments saved as {saved.rater!r} "
        f"({saved.queries_matched} log queries matched, {saved.queries_not_in_set} not in the set, "
        f"{saved.queries_added} added)")
    agreement = agreement_with_explicit(workbench.judgments.ratings_of(collection, set_name), saved.rater)
    return {"saved": saved.to_json(), "agreement": agreement.to_json() if agreement.pairs else None}


BAR_WIDTH = 40  # characters of the longest bar of the drawn curve


def curve_lines(curve: dict[int, float]) -> list[str]:
    """The position curve drawn as text: one line a position, a bar as long as its value
    (the largest value BAR_WIDTH characters)."""
    top = max(curve.values(), default=0.0) or 1.0
    return [f"{r:>4} {'█' * round(BAR_WIDTH * v / top):<{BAR_WIDTH}} {v:.3f}" for r, v in curve.items()]


def _print(result, out: dict) -> None:
    print(f"{result.model}: {result.curve_name.replace('_', ' ')} by position")
    for line in curve_lines(result.curve):
        print(line)
    for j in result.judgments:
        print(f"{j.grade}\t{j.score:.4f}\t{j.clicks}/{j.impressions}\t{j.query}\t{j.doc}")
    skipped = {k: v for k, v in result.skipped.items() if k not in ("lines", "events", "bad_lines") and v}
    log(f"{len(result.judgments)} pairs judged; {result.log['sessions']} sessions; left out: "
        + (", ".join(f"{k} {v}" for k, v in skipped.items()) or "nothing"))
    for reason, bad in result.skipped.get("bad_lines", {}).items():
        log(f"  {bad['count']} bad line(s): {reason} ({', '.join(bad['lines'])}{' …' if bad['count'] > 5 else ''})")
    if out.get("agreement"):
        pair = out["agreement"]["pairs"][0]
        log(f"agreement with the explicit judgments over {pair['n']} pairs: κ {pair['cohen_kappa']}, weighted κ "
            f"{pair['weighted_kappa']}, α {out['agreement']['krippendorff_alpha']}")
