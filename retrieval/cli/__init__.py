"""The command line, `python -m retrieval …` (or the `retrieval` console script).

    main.py         the parser assembled from the command groups, `main` and `console`
    common.py       what the groups share: config options, argparse types, the Workbench,
                    messages on stderr, progress bars and ingest lines
    ingest.py       `ingest`
    search.py       `search` (and `--explain-doc`)
    evaluate.py     `evaluate`, `sweep`, `optimize`
    rules.py        `rules`: check, impact, suggest (query rules)
    snapshot.py     `snapshot`: create, list, rename, delete, export, diff, report
    collections.py  `collections`: list, stats, versions, index, graph, delete, clear
    sources.py      `sources`: add, list, remove outside engines (HTTP search APIs, MCP search tools)
    queryset.py     `queryset`: list, export, import
    judge.py        `judge`: next, agreement, disagreements, adjudicate, llm, import, export
    judge_implicit.py  `judge implicit`: judgments from behaviour logs by a click model
    serve.py        `serve`: its options; starts the MCP server (`retrieval.serve`)
    prepare.py      `prepare`

Each group module adds its subparsers (`add_parser(sub)`) and maps its commands to their
functions (`COMMANDS`); a new group is one module and one entry of `main.GROUPS`.
"""
