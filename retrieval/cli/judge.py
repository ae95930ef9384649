"""`python -m retrieval judge …`: judging from the command line — what to judge next, agreement
between raters, disagreements and their adjudication, the LLM judge, import and export of ratings.

    judge next COLLECTION --queryset Q --configs A.json,B.json [--budget N] [--pool] [--json]
    judge agreement JUDGMENTS.csv [--json]          (or COLLECTION --queryset Q)
    judge disagreements COLLECTION --queryset Q [--json]
    judge adjudicate COLLECTION --queryset Q QUERY_ID DOC_ID GRADE
    judge llm COLLECTION --queryset Q --base-url URL --model M [--api-key-env VAR] [--budget N] …
    judge import COLLECTION --queryset Q FILE [--format csv|quepid|trec] [--rater NAME] [--replace]
    judge export COLLECTION --queryset Q [--format csv|quepid|trec]
    judge implicit --events FILE [--queries FILE] [--csv FILE] --model coec|ctr|pbm|sdbn|dbn …
                                                    (judge_implicit.py)

Results and JSON go to stdout, messages to stderr (as every command of `python -m retrieval`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from retrieval.cli.common import log, open_workbench
from retrieval.cli.judge_implicit import add_actions as add_implicit_actions
from retrieval.cli.judge_implicit import cmd_implicit
from retrieval.types import RetrievalError

FORMATS = ("csv", "quepid", "trec")
SELECTIONS = ("next", "pool")


def add_parser(sub) -> None:
    """The `judge` command and its actions (`main.build_parser` calls this)."""
    p = sub.add_parser("judge", help="judging: what to judge next, rater agreement, disagreements, the LLM judge, "
                                     "import and export of ratings")
    actions = p.add_subparsers(dest="judge_action", required=True)

    def common(q: argparse.ArgumentParser, queryset_required: bool = True) -> None:
        q.add_argument("collection", help="the collection's table name or display name")
        q.add_argument("--queryset", required=queryset_required, help="the query set")

    q = actions.add_parser("next", help="the unjudged (query, document) pairs whose judgment can most change the "
                                        "comparison of the configs (minimal test collection weights), or the pool")
    common(q)
    q.add_argument("--configs", required=True,
                   help="comma-separated configs to compare: JSON files or names of saved configs (two or more)")
    q.add_argument("--budget", type=int, default=50, help="how many pairs to list (default 50)")
    q.add_argument("--pool", action="store_true", help="the plain depth-10 pool in query order instead")
    q.add_argument("--json", action="store_true", help="print JSON")

    q = actions.add_parser("agreement", help="agreement between raters: Cohen's κ (plain and weighted) per pair, "
                                             "Krippendorff's α overall")
    q.add_argument("source", help="a ratings CSV (columns query, doc, grade, rater) or a collection with --queryset")
    q.add_argument("--queryset", help="the query set, when SOURCE is a collection")
    q.add_argument("--json", action="store_true", help="print JSON")

    q = actions.add_parser("disagreements", help="the (query, document) pairs the raters graded differently")
    common(q)
    q.add_argument("--json", action="store_true", help="print JSON")

    q = actions.add_parser("adjudicate", help="settle a disagreement: this grade is the consensus")
    common(q)
    q.add_argument("query_id")
    q.add_argument("doc_id")
    q.add_argument("grade", type=int, choices=(0, 1, 2, 3))

    q = actions.add_parser("llm", help="judge the queue with an LLM (any OpenAI-compatible endpoint); a rater of "
                                       "its own, 'llm:<model>'")
    common(q)
    q.add_argument("--base-url", help="e.g. http://127.0.0.1:11434/v1 (default: the settings saved in the app)")
    q.add_argument("--model", help="the model name the server knows")
    q.add_argument("--api-key-env", help="the NAME of the environment variable holding the key (never the key)")
    q.add_argument("--allow-link-local", action="store_true", default=None,
                   help="allow a link-local or cloud metadata address as the base URL (refused by default: the key "
                        "and the documents go there)")
    q.add_argument("--prompt", type=Path, help="a prompt template file with {query} and {passage} (default: UMBRELA)")
    q.add_argument("--concurrency", type=int, help="requests in flight at most (default 4)")
    q.add_argument("--configs", help="judge what `judge next` lists for these configs (default: the default "
                                     "config's depth-10 pool)")
    q.add_argument("--budget", type=int, default=100, help="how many pairs at most (default 100)")
    q.add_argument("--estimate", action="store_true", help="print the time and cost estimate and stop")

    q = actions.add_parser("import", help="import ratings: CSV (query, doc, grade, rater), Quepid's ratings CSV, "
                                          "or TREC qrels")
    common(q)
    q.add_argument("file", type=Path)
    q.add_argument("--format", choices=FORMATS, help="default: from the file name (.csv: csv, else trec)")
    q.add_argument("--rater", help="the rater of lines without one (default: the unnamed rater; 'quepid' for "
                                   "Quepid files)")
    q.add_argument("--replace", action="store_true", help="the set's ratings become exactly the file's")

    q = actions.add_parser("export", help="export the set's ratings: CSV with raters, Quepid's ratings CSV or "
                                          "TREC qrels (the consensus)")
    common(q)
    q.add_argument("--format", choices=FORMATS, default="csv")
    add_implicit_actions(actions)


def cmd_judge(args) -> int:
    if args.judge_action == "implicit":
        return cmd_implicit(args)
    if args.judge_action == "agreement" and Path(args.source).is_file():
        return _agreement_of_file(args)
    workbench = open_workbench(args)
    name = args.collection if args.judge_action != "agreement" else args.source
    collection = workbench.resolve(name)
    if args.judge_action == "agreement" and not args.queryset:
        raise RetrievalError(f"{args.source} is not a file: give a ratings CSV, or a collection with --queryset")
    return ACTIONS[args.judge_action](args, workbench, collection)


def _configs(workbench, spec: str) -> list:
    names = [part.strip() for part in spec.split(",") if part.strip()]
    if len(names) < 2:
        raise RetrievalError("--configs needs two or more configs, comma-separated (files or saved names)")
    return [workbench.configs.resolve(n)[0] for n in names]


def queue(workbench, collection: str, set_name: str, configs: list | None, budget: int, pool: bool = False):
    """The pairs to judge next for `configs` (None: the default config alone, so its depth-10
    pool): `judging_queue.judging_queue`."""
    from retrieval.evaluation.judging_queue import judging_queue
    from retrieval.search.config import SearchConfig

    return judging_queue(workbench, collection, set_name, configs or [SearchConfig()], budget=budget, pool=pool)


def _next(args, workbench, collection: str) -> int:
    if args.budget < 1:
        raise RetrievalError("--budget must be at least 1")
    configs = _configs(workbench, args.configs)
    pairs = queue(workbench, collection, args.queryset, configs, args.budget, args.pool)
    queries = workbench.judgments.queries(collection, args.queryset)
    if args.json:
        print(json.dumps({"selection": "pool" if args.pool else "next", "pairs": [
            {"query_id": c.query_id, "doc_id": c.doc_id, "weight": c.weight, "priority": c.priority,
             "ranks": list(c.ranks)}
            for c in pairs]}, ensure_ascii=False))
        return 0
    for c in pairs:
        ranks = " ".join("-" if r is None else str(r) for r in c.ranks)
        print(f"{c.weight:.4f}\t{c.query_id}\t{c.doc_id}\tranks {ranks}\t{queries.get(c.query_id, '')}")
    how = "the depth-10 pool" if args.pool else "by how much one judgment can change the comparison"
    log(f"{len(pairs)} pairs to judge next ({how})")
    return 0


def _agreement_of_file(args) -> int:
    from retrieval.judging.rating_formats import parse_ratings_csv
    from retrieval.text.encoding import decode_bytes

    try:
        text = decode_bytes(Path(args.source).read_bytes())[0]
    except OSError as exc:
        raise RetrievalError(f"Cannot read {args.source}: {exc.strerror}") from exc
    return _print_agreement(args, parse_ratings_csv(text))


def _agreement(args, workbench, collection: str) -> int:
    return _print_agreement(args, workbench.judgments.ratings_of(collection, args.queryset))


def _print_agreement(args, ratings) -> int:
    from retrieval.judging.raters import agreement

    result = agreement(ratings)
    if args.json:
        print(json.dumps(result.to_json(), ensure_ascii=False))
        return 0
    print(result.summary())
    return 0


def _disagreements(args, workbench, collection: str) -> int:
    from retrieval.judging.raters import disagreements

    found = disagreements(workbench.judgments.ratings_of(collection, args.queryset))
    if args.json:
        print(json.dumps([{"query_id": d.query_id, "doc_id": d.doc_id, "grades": d.grades, "spread": d.spread}
                          for d in found], ensure_ascii=False))
        return 0
    for d in found:
        grades = ", ".join(f"{r or '(unnamed)'} {g}" for r, g in d.grades.items())
        print(f"{d.spread}\t{d.query_id}\t{d.doc_id}\t{grades}")
    log(f"{len(found)} disagreements to adjudicate")
    return 0


def _adjudicate(args, workbench, collection: str) -> int:
    from retrieval.judging.raters import ADJUDICATED

    workbench.judgments.rate_many(collection, args.queryset, {(args.query_id, args.doc_id): args.grade},
                                  rater=ADJUDICATED)
    log(f"{args.query_id} / {args.doc_id}: adjudicated {args.grade}")
    return 0


def _llm(args, workbench, collection: str) -> int:
    import dataclasses

    from retrieval.judging.llm.run import estimate, judge_queue, queue_items
    from retrieval.judging.llm.settings import LLMSettings, load_settings

    saved = load_settings(workbench.store) or LLMSettings(base_url="", model="")
    changes = {k: v for k, v in {"base_url": args.base_url, "model": args.model, "api_key_env": args.api_key_env,
                                 "concurrency": args.concurrency, "allow_link_local": args.allow_link_local}.items()
               if v is not None}
    if args.prompt is not None:
        try:
            changes["prompt"] = args.prompt.read_text(encoding="utf-8")
        except OSError as exc:
            raise RetrievalError(f"Cannot read {args.prompt}: {exc.strerror}") from exc
        except UnicodeDecodeError:
            raise RetrievalError(f"{args.prompt} is not UTF-8 text") from None
    settings = dataclasses.replace(saved, **changes)
    settings.validate()
    if args.budget < 1:
        raise RetrievalError("--budget must be at least 1")
    configs = _configs(workbench, args.configs) if args.configs else None
    # The queue of the human judging page, minus what this LLM rated already.
    pairs = [(c.query_id, c.doc_id) for c in queue(workbench, collection, args.queryset, configs, args.budget)]
    items = queue_items(workbench, collection, args.queryset, pairs, settings)
    guess = estimate(items, settings)
    log(guess.sentence())
    if args.estimate:
        return 0

    def progress(done: int, total: int) -> None:
        log(f"  judged {done}/{total}")

    run = judge_queue(workbench, collection, args.queryset, pairs, settings, progress=progress)
    log(run.sentence())
    return 0 if not run.failed else 1


def _import(args, workbench, collection: str) -> int:
    from retrieval.judging.raters import Rating
    from retrieval.judging.rating_formats import parse_quepid_csv, parse_ratings_csv
    from retrieval.text.encoding import decode_bytes

    try:
        text = decode_bytes(args.file.read_bytes())[0]
    except OSError as exc:
        raise RetrievalError(f"Cannot read {args.file}: {exc.strerror}") from exc
    fmt = args.format or ("csv" if args.file.suffix.lower() == ".csv" else "trec")
    judgments = workbench.judgments
    queries = None
    if fmt == "trec":
        from retrieval.judging.judgments import UNNAMED
        from retrieval.judging.qrels import read_qrels_file

        qrels = read_qrels_file((args.file.name, args.file.read_bytes()))
        rater = args.rater or UNNAMED
        ratings = [Rating(q, d, rater, g) for q, docs in qrels.items() for d, g in docs.items()]
    elif fmt == "csv":
        from retrieval.judging.judgments import UNNAMED

        ratings = parse_ratings_csv(text, default_rater=args.rater or UNNAMED)
    else:
        known = judgments.queries(collection, args.queryset) if args.queryset in judgments.query_sets(collection) \
            else {}
        queries, ratings = parse_quepid_csv(text, {t: q for q, t in known.items()})
        if args.rater:
            ratings = [Rating(r.query_id, r.doc_id, args.rater, r.grade) for r in ratings]
    saved = judgments.save_ratings(collection, args.queryset, ratings, queries=queries, replace=args.replace)
    log(f"query set {args.queryset!r} of {collection!r}: {saved} ratings imported from {args.file.name} ({fmt})")
    return 0


def _export(args, workbench, collection: str) -> int:
    judgments = workbench.judgments
    if args.format == "trec":
        print(judgments.export_qrels(collection, args.queryset, "trec"), end="")
    elif args.format == "csv":
        from retrieval.judging.rating_formats import format_ratings_csv

        print(format_ratings_csv(judgments.ratings_of(collection, args.queryset)), end="")
    else:
        from retrieval.judging.raters import Rating
        from retrieval.judging.rating_formats import format_quepid_csv

        consensus = judgments.qrels(collection, args.queryset)
        ratings = [Rating(q, d, "quepid", g) for q, docs in consensus.items() for d, g in docs.items()]
        print(format_quepid_csv(judgments.queries(collection, args.queryset), ratings), end="")
    return 0


ACTIONS = {"next": _next, "agreement": _agreement, "disagreements": _disagreements, "adjudicate": _adjudicate,
           "llm": _llm, "import": _import, "export": _export}
COMMANDS = {"judge": cmd_judge}
