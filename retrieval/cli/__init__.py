"""The command line, `python -m retrieval …` (or the `retrieval` console script).

    main.py    the parser and every command group but one: ingest, search, evaluate, sweep,
               optimize, collections, snapshot, queryset, serve, prepare
    judge.py   `judge`: export, import, agreement, next, llm
"""

from retrieval.cli.main import console, main

__all__ = ["console", "main"]
