"""`snapshot`: keep an evaluation of a collection's query set as a named snapshot; list, rename,
delete, export, diff and report snapshots."""

from __future__ import annotations

import json
from pathlib import Path

from retrieval.cli.common import add_config_options, config_from_args, log, open_workbench
from retrieval.types import RetrievalError


def add_parser(sub) -> None:
    """The `snapshot` command (`main.build_parser` calls this)."""
    p = sub.add_parser("snapshot", help="keep an evaluation of a collection's query set as a named snapshot, list, "
                                        "rename, delete or export snapshots, and diff two or more")
    p.add_argument("action", choices=("create", "list", "rename", "delete", "export", "diff", "report"))
    p.add_argument("names", nargs="*", help="create: COLLECTION; rename: OLD NEW; delete, export: NAME; "
                                            "diff: A B [C …] (each later one against A); report: A B; "
                                            "list: [COLLECTION]")
    p.add_argument("--html", type=Path, metavar="FILE", help="report: the self-contained HTML file to write")
    p.add_argument("--name", help="create: the new snapshot's name")
    p.add_argument("--queryset", default="default", help="create: the query set to evaluate (default: default)")
    p.add_argument("--judgments", metavar="SOURCE", help="create: the judgment source, 'consensus' (default) or an "
                                                         "implicit list of the set, e.g. implicit:pbm")
    p.add_argument("--metric", default="ndcg@10", help="diff: the metric compared")
    p.add_argument("--trec", action="store_true", help="export: the run in TREC format instead of JSON")
    p.add_argument("--json", action="store_true", help="diff: print JSON")
    add_config_options(p)


def cmd_snapshot(args) -> int:
    from retrieval.evaluation.snapshot_diff import diff_many, summary
    from retrieval.evaluation.snapshots import SnapshotStore, rerun_at

    wanted = {"create": 1, "rename": 2, "delete": 1, "export": 1, "report": 2}.get(args.action)
    if wanted is not None and len(args.names) != wanted:
        raise RetrievalError(f"'snapshot {args.action}' needs {wanted} name(s), got {len(args.names)}")
    if args.action == "diff" and len(args.names) < 2:
        raise RetrievalError(f"'snapshot diff' needs two or more snapshot names, got {len(args.names)}")
    workbench = open_workbench(args)
    snapshots = SnapshotStore(workbench.store)
    if args.action == "create":
        if not args.name:
            raise RetrievalError("'snapshot create' needs --name NAME")
        collection = workbench.resolve(args.names[0])
        snap = snapshots.create(workbench, collection, args.name, config_from_args(args), args.queryset,
                                source=args.judgments)
        log(f"snapshot {snap.name!r}: {len(snap.per_query)} judged queries of {snap.query_set!r} on "
            f"{collection} (version {snap.table_version}, {snap.doc_count} documents)")
        print(json.dumps({"name": snap.name, "mean": snap.mean}, ensure_ascii=False))
    elif args.action == "list":
        collection = workbench.resolve(args.names[0]) if args.names else None
        for snap in snapshots.list(collection):
            means = " ".join(f"{m} {v:.4f}" for m, v in snap.mean.items())
            print(f"{snap.name}\t{snap.collection}\tv{snap.table_version}\t{snap.query_set}\t"
                  f"{len(snap.per_query)} queries\t{snap.created}\t{means}")
        for problem in snapshots.problems:
            log(f"warning: {problem}")
    elif args.action == "rename":
        snapshots.rename(*args.names)
    elif args.action == "delete":
        snapshots.delete(args.names[0])
    elif args.action == "report":
        from retrieval.evaluation.snapshot_diff import diff
        from retrieval.evaluation.snapshot_report import report_html

        if not args.html:
            raise RetrievalError("'snapshot report' needs --html FILE")
        a, b = (snapshots.get(n) for n in args.names)
        d = diff(a, b, args.metric, rerun=rerun_at(workbench, a.collection))
        args.html.write_text(report_html(d, a, b), encoding="utf-8")
        log(f"wrote {args.html}")
    elif args.action == "export":
        print(snapshots.export_trec(args.names[0]) if args.trec else snapshots.export_json(args.names[0]), end="")
    else:
        chosen = [snapshots.get(n) for n in args.names]
        diffs = diff_many(chosen, args.metric, rerun=rerun_at(workbench, chosen[0].collection))
        if args.json:
            print(json.dumps(diffs[0] if len(diffs) == 1 else diffs, ensure_ascii=False))
            return 0
        for d in diffs:
            print(summary(d if len(diffs) > 1 else {k: v for k, v in d.items() if k != "p_holm"}))
            for cause, share in d["causes"].items():
                print(f"  {cause}: {share:+.4f}")
            for note in d["notes"]:
                print(f"  note: {note}")
            for entry in d["losers"]:
                print(f"  worse {entry['delta']:+.4f}  {entry['query_id']}  {entry['query']}")
    return 0


COMMANDS = {"snapshot": cmd_snapshot}
