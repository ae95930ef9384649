"""The MCP server's long-running tuning tools, `sweep` and `optimize`, as runs: each has an id, a
stop flag and, once it ends, its result; no `mcp` here (`tuning_tools.py` sends the progress as
MCP progress notifications and turns a cancelled request into a stop).

    sweep(query_set, config, sources, …)      `sweep --queryset --json`: the fusion grid judged,
                                              best first, the headline and the held-out estimate
    optimize(query_set, config, trials, …)    `optimize --queryset --json` (bayes, query-dependent)

Bounded by trials (`MCP_MAX_TRIALS` per study) and seconds (`MCP_MAX_SECONDS`); one run at a
time per server. Stopping a run (`stop_run`, or the client cancelling the request) ends it after
the variant or trial in progress; its result is the best so far (`stopped: true`), which the
stopped call returns, or `run_result(run_id)` after a cancelled request (a cancelled MCP request
is never answered).
"""

from __future__ import annotations

import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from retrieval.limits import MCP_MAX_ROWS, MCP_MAX_SECONDS, MCP_MAX_TRIALS
from retrieval.serve.arguments import ToolProblem
from retrieval.serve.tuning import TuningService, whole

RUN_ID_RE = re.compile(r"[A-Za-z0-9_-]{1,64}")
KEPT_RUNS = 20  # finished runs whose results run_result still returns
OPTIMIZE_METHODS = ("bayes", "query-dependent")  # lambdamart keeps a model in the store: the CLI's

Progress = Callable[[float, float, str], None]  # (done, total, message)


@dataclass
class Run:
    id: str
    kind: str
    stop: threading.Event = field(default_factory=threading.Event)
    started: float = field(default_factory=time.monotonic)
    result: dict[str, Any] | None = None
    error: str | None = None

    @property
    def state(self) -> str:
        return "failed" if self.error else ("running" if self.result is None else
                                            ("stopped" if self.result.get("stopped") else "finished"))


class Runs:
    """The server's runs: at most one running, the last `KEPT_RUNS` kept."""

    def __init__(self):
        self._runs: OrderedDict[str, Run] = OrderedDict()
        self._lock = threading.Lock()
        self._count = 0

    def start(self, kind: str, run_id: Any = None) -> Run:
        with self._lock:
            running = [r for r in self._runs.values() if r.state == "running"]
            if running:
                raise ToolProblem(f"Run {running[0].id!r} ({running[0].kind}) is still running: wait for it or "
                                  "stop_run it first (one run at a time)")
            self._count += 1
            if run_id is None:
                run_id = f"{kind}-{self._count}"
            if not isinstance(run_id, str) or not RUN_ID_RE.fullmatch(run_id):
                raise ToolProblem(f"run_id must be 1–64 letters, digits, '_' or '-', got {run_id!r}")
            if run_id in self._runs:
                raise ToolProblem(f"A run {run_id!r} exists already: choose another run_id")
            run = self._runs[run_id] = Run(run_id, kind)
            while len(self._runs) > KEPT_RUNS:
                self._runs.popitem(last=False)
            return run

    def get(self, run_id: Any) -> Run:
        run = self._runs.get(run_id) if isinstance(run_id, str) else None
        if run is None:
            raise ToolProblem(f"No run {run_id!r} (runs: {', '.join(self._runs) or 'none yet'})")
        return run

    def status(self, run: Run) -> dict[str, Any]:
        return {"run_id": run.id, "kind": run.kind, "state": run.state, "error": run.error,
                "seconds": round(time.monotonic() - run.started, 3), "result": run.result}


def _bounds(trials: Any, seconds: Any) -> tuple[int, float]:
    whole(trials, "trials", 1, MCP_MAX_TRIALS)
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not 0 < seconds <= MCP_MAX_SECONDS:
        raise ToolProblem(f"seconds must be a number above 0 and at most {MCP_MAX_SECONDS}, got {seconds!r}")
    return trials, float(seconds)


def sweep(tuning: TuningService, run: Run, progress: Progress, query_set: str, config: Any = None,
          collection_name: str | None = None, sources: str = "bm25,dense", max_queries: int | None = None,
          top: int = 10, seconds: float = 120.0) -> dict[str, Any]:
    """`sweep COLLECTION --queryset SET --sources … --top N --json`'s rows, with its headline and
    held-out estimate (`sweep.headline`, `sweep.held_out_estimate`); stopped after `seconds` or
    `stop_run`, the variants judged by then."""
    from retrieval.evaluation.evaluate import DEFAULT_METRICS
    from retrieval.evaluation.sweep import default_grid, headline, held_out_estimate, run_sweep, with_current

    whole(top, "top", 1, MCP_MAX_ROWS)
    _, seconds = _bounds(1, seconds)
    served = tuning.served(collection_name)
    base, name = tuning.config(config, served)
    if not isinstance(sources, str):
        raise ToolProblem("sources must be two source names, comma-separated, e.g. 'bm25,dense'")
    variants, current = with_current(default_grid(base, tuple(s.strip() for s in sources.split(",") if s.strip())),
                                     base)
    queries, qrels = tuning.judged(served, query_set, max_queries)
    deadline = time.monotonic() + seconds

    def step(done: int, total: int) -> None:
        progress(done, total, f"sweep {run.id}: step {done}/{total} (queries, then variants)")

    result = run_sweep(tuning.workbench, served.collection, queries, qrels, variants, DEFAULT_METRICS, step,
                       lambda: run.stop.is_set() or time.monotonic() > deadline)
    rows = result.to_json_list()
    out: dict[str, Any] = {"run_id": run.id, "config_name": name, "n_variants": len(variants),
                           "n_judged": len(rows), "n_queries": result.n_queries, "stopped": result.stopped,
                           "rows": rows[:top], "best": rows[0]}
    said = [f"{len(rows)} of {len(variants)} variants judged on {result.n_queries} queries"
            + (" (stopped: the best so far)" if result.stopped else "") + "."]
    if current in result.per_query:
        line = headline(result, current)
        out["headline"] = {"metric": line.metric, "current": line.current, "current_value": line.current_value,
                           "best": line.best, "best_value": line.best_value, "tied": list(line.tied),
                           "p_value": line.p_value, "significant": line.significant}
        said.append(line.sentence())
    if result.n_queries >= 2:
        held = held_out_estimate(result, folds=min(5, result.n_queries))
        out["held_out"] = {"metric": held.metric, "folds": held.folds, "score": held.score,
                           "in_sample": held.in_sample, "chosen": list(held.chosen)}
        said.append(f"Held-out {held.metric} of taking the best variant ({held.folds}-fold over queries): "
                    f"{held.score:.4f} (in-sample best {held.in_sample:.4f}).")
    out["summary"] = " ".join(said)
    return out


def optimize(tuning: TuningService, run: Run, progress: Progress, query_set: str, config: Any = None,
             collection_name: str | None = None, method: str = "bayes", trials: int = 20, folds: int = 5,
             seed: int = 0, seconds: float = 120.0, metric: str = "ndcg@10", sources: str | None = None,
             max_queries: int | None = None) -> dict[str, Any]:
    """`optimize COLLECTION --queryset SET --trials N --folds K --seed S --json`
    (`study.prepare`, `optimize.cross_validate`); the learned config is proposed, not saved."""
    from retrieval.evaluation.optimize import cross_validate
    from retrieval.evaluation.study import prepare

    if method not in OPTIMIZE_METHODS:
        raise ToolProblem(f"method must be one of {', '.join(OPTIMIZE_METHODS)} (lambdamart: the CLI's optimize), "
                          f"got {method!r}")
    trials, seconds = _bounds(trials, seconds)
    whole(folds, "folds", 2, 20)
    whole(seed, "seed", 0, 2**31 - 1)
    served = tuning.served(collection_name)
    base, name = tuning.config(config, served)
    picked = [s.strip() for s in sources.split(",") if s.strip()] if isinstance(sources, str) else None
    queries, qrels = tuning.judged(served, query_set, max_queries)
    # One count for the whole run (MCP progress only grows): each query's candidates, then each trial.
    total = len(qrels) + (folds + 1) * trials
    prepared = prepare(tuning.workbench, served.collection, queries, qrels, base, picked, metric,
                       lambda done, n: progress(done, total, f"optimize {run.id}: candidates {done}/{n}"), method)

    def on_trial(event: dict[str, Any]) -> None:
        done = len(qrels) + (event["study"] - 1) * event["trials"] + event["trial"]
        progress(done, total, f"optimize {run.id}: {event['label']}: trial {event['trial']}/{event['trials']}, "
                 f"best {event['best']:.4f}")

    result = cross_validate(prepared, trials, folds, seed, seconds, should_stop=run.stop.is_set, progress=on_trial)
    out = {"run_id": run.id, "base_config_name": name, **result.to_json(), "summary": result.summary()}
    if result.stopped:
        out["summary"] = "Stopped: the best so far. " + out["summary"]
    return out
