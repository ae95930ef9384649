"""`rules check|impact|suggest`: query rules (Querqy's common-rules text, docs/guide/rules.md)
checked and written back, each rule's measured effect on a judged query set, and rules proposed
from the judgments, each with its measured Δ."""

from __future__ import annotations

import json
from pathlib import Path

from retrieval.cli.common import add_config_options, config_from_args, log, open_workbench, read_rules_file
from retrieval.cli.evaluate import _judged, add_judged_options
from retrieval.types import RetrievalError


def add_parser(sub) -> None:
    """The `rules` command (`main.build_parser` calls this)."""
    p = sub.add_parser("rules", help="query rules: check a rules file, measure each rule, suggest rules")
    actions = p.add_subparsers(dest="rules_action", required=True)
    check = actions.add_parser("check", help="read a rules file (every bad line named) and print it back")
    check.add_argument("file", type=Path)
    impact = actions.add_parser("impact", help="evaluate the rule set with each rule left out in turn: each rule's "
                                               "Δ with its 95%% interval and the queries it changes")
    add_judged_options(impact)
    impact.add_argument("--metric", default="ndcg@10")
    impact.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    add_config_options(impact)
    suggest = actions.add_parser("suggest", help="propose rules from the judgments (synonyms, pins), each measured "
                                                 "on the queries it touches")
    add_judged_options(suggest)
    suggest.add_argument("--metric", default="ndcg@10")
    suggest.add_argument("--limit", type=int, default=10, help="at most this many suggestions (default 10)")
    suggest.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    add_config_options(suggest)


def cmd_rules(args) -> int:
    if args.rules_action == "check":
        from retrieval.search.rules import parse_rules, write_rules

        text = read_rules_file(args.file)
        rules = parse_rules(text)
        print(write_rules(rules), end="")
        log(f"{args.file}: {len(rules)} rule(s), all valid")
        return 0
    if args.rules_action == "impact":
        return _impact(args)
    return _suggest(args)


def _impact(args) -> int:
    from retrieval.rule_tuning.impact import rule_impact

    if args.rules is None:
        raise RetrievalError("rules impact needs --rules FILE")
    config = config_from_args(args)
    workbench = open_workbench(args)
    name, queries, qrels, _label, _skipped = _judged(args, workbench)
    report = rule_impact(workbench, name, queries, qrels, config, args.metric,
                         progress=lambda done, total: log(f"  rules {done}/{total}") if done % 50 == 0 else None)
    if args.json:
        print(json.dumps(report.to_json_dict(), ensure_ascii=False))
        return 0
    print(f"{report.metric} on {report.n_queries} judged queries: {report.with_rules:.4f} with the rules, "
          f"{report.without_rules:.4f} without any")
    print(f"{'rule':>4} {'line':>5}  {'input':<24} {'fires':>5} {'changes':>7} {'Δ (fired)':>10} "
          f"{'95% interval':>19} {'p':>6} {'Δ (all)':>8}  verdict")
    for r in report.rules:
        print(f"{r.number:>4} {r.line:>5}  {r.input[:24]:<24} {len(r.fires_on):>5} {len(r.changed):>7} "
              f"{r.delta:>+10.4f} [{r.ci[0]:>+8.4f}, {r.ci[1]:>+8.4f}] {r.p:>6.3f} {r.delta_all:>+8.4f}  {r.verdict}"
              + (f"  changes: {', '.join(r.changed[:5])}{' …' if len(r.changed) > 5 else ''}" if r.changed else ""))
    return 0


def _suggest(args) -> int:
    from retrieval.rule_tuning.suggest import suggest_rules

    config = config_from_args(args)
    workbench = open_workbench(args)
    name, queries, qrels, _label, _skipped = _judged(args, workbench)
    suggestions = suggest_rules(workbench, name, queries, qrels, config, args.metric, limit=args.limit)
    if args.json:
        print(json.dumps([s.to_json_dict() for s in suggestions], ensure_ascii=False))
        return 0
    if not suggestions:
        print("no rule found that raises the metric on the queries it touches")
    for s in suggestions:
        print(f"{s.delta:+.4f} {args.metric} on {len(s.touched)} quer{'y' if len(s.touched) == 1 else 'ies'} "
              f"({s.before:.4f} → {s.after:.4f}): {s.why}")
        print("    " + s.text.rstrip("\n").replace("\n", "\n    "))
    return 0


COMMANDS = {"rules": cmd_rules}
