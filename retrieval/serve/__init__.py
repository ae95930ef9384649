"""The MCP server: the workbench's tuned search for agents (`python -m retrieval serve`).

    server.py     the MCP server: the tools and their argument types, stdio and streamable HTTP,
                  loopback and token checks, `run`
    service.py    what each tool does over one Workbench (`KnowledgeService`), the served
                  collections; imports no `mcp`
    arguments.py  a tool call's filters and knowledge entries in the core's terms; `ToolProblem`
    launch.py     the command that starts it and an MCP client's configuration (imports no server)
    tuning.py     the read-only tuning tools' work (`TuningService`): evaluate, compare, why not, …
    runs.py       the long-running tuning tools (sweep, optimize) as runs: progress, stop, best so far
    writes.py     the tuning write tools (save_config, record_judgment, …), refused without --allow-write
    tuning_tools.py  the tuning tools registered on the server: argument types, progress, ToolErrors
    resources.py  the server's resources (collections, configs, query sets, snapshots) and its prompt

The `serve` command's options are `retrieval/cli/serve.py`'s.
"""
