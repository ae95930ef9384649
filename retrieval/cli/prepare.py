"""`prepare`: make the built-in models' files for this machine now, and delete outdated or
unfinished exports."""

from __future__ import annotations

from retrieval.cli.common import log


def add_parser(sub) -> None:
    """The `prepare` command (`main.build_parser` calls this)."""
    sub.add_parser("prepare", help="make the built-in models' files for this machine now (E5's conversion, the "
                   "ONNX exports a CPU runs; about a minute, once), not at the first ingest, and delete outdated "
                   "or unfinished exports; ./run.sh does it after an install")


def cmd_prepare(args) -> int:
    from retrieval.models import embed

    def announce(model: str, backend: str) -> None:
        log(f"{model}: making its files for {backend} (once) …")

    for done in embed.prepare_builtin_models(announce):
        state = f"made in {done.seconds:.0f} s" if done.made else "ready"
        log(f"{done.model} ({done.backend}): {state}")
    removed = embed.remove_stale_exports()
    if removed:
        log(f"removed {len(removed)} outdated or unfinished export(s) ({sum(b for _, b in removed) / 1e6:,.0f} MB): "
            + ", ".join(name for name, _ in removed))
    return 0


COMMANDS = {"prepare": cmd_prepare}
