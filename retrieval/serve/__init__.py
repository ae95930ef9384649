"""The MCP server: the workbench's tuned search for agents (`python -m retrieval serve`).

    server.py   the tools, the service behind them, stdio and streamable HTTP, loopback and
                token checks
    launch.py   the command that starts it and an MCP client's configuration (imports no server)
"""
