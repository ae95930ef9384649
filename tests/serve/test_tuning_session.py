"""A tuning session over MCP, scripted through the official MCP Python client (no language model):
every number a tool gives equals what the CLI gives for the same step (`retrieval.cli.main.main`,
in this process, JSON compared); progress notifications during `optimize`, stopped and cancelled
runs keeping the best so far; without `--allow-write` every write tool refuses and nothing on
disk changes.

One database for the module: the bundled XQuAD sample's 60 English paragraphs (MiniLM: a copy of
the shared 'xsmall' collection) and its query set 'sample' of its first 60 English and 10 Chinese
questions, each judged on the English paragraph it asks about. One stdio server (`--allow-write`)
runs the scripted session once (`session`); the read-only server is built in this process
(`Client(server)`, the SDK's in-memory transport).
Set TUNING_TRANSCRIPT=FILE to write the session's transcript (docs/mcp.md shows it).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client import Client
from mcp.client.stdio import stdio_client
from mcp_client import run_async, server_env, tool_data

from retrieval.cli.main import main
from retrieval.indexing.readers.parse import parse_path
from retrieval.search.config import SearchConfig
from retrieval.search.workbench import Workbench
from retrieval.serve.tuning_tools import TUNING_TOOLS, WRITE_TOOLS
from retrieval.store import Store

REPO = Path(__file__).resolve().parents[2]
SET = "sample"
COLLECTION = "xsmall"
# The sample's first 60 English and 10 Chinese questions: the sweep's best beats the defaults (not
# significantly), and the Chinese ones miss their English paragraph (why not?).
N_QUERIES = 70


@pytest.fixture(scope="module")
def db(tmp_path_factory, xsmall) -> Path:
    """A copy of the shared 'xsmall' collection (the sample's English paragraphs, MiniLM: no second
    ingest), with the query set this module judges."""
    path = tmp_path_factory.mktemp("tuning") / "db"
    shutil.copytree(xsmall.store.uri, path)
    store = Store(str(path))
    sample = parse_path(REPO / "sample_data" / "xquad")
    english = [q for q in sample.qrels if q.startswith("en-")][:60]
    chinese = [q for q in sample.qrels if q.startswith("zh-")][:10]
    qrels = {q: dict(sample.qrels[q]) for q in english}
    qrels.update({q: {d.replace("zh-", "en-"): g for d, g in sample.qrels[q].items()} for q in chinese})
    Workbench(store).judgments.save_query_set(COLLECTION, SET, {q: sample.queries[q] for q in qrels}, qrels)
    return path


def changed(config: dict) -> dict:
    """A config's fields that differ from the defaults (what a call needs to name it)."""
    defaults = SearchConfig().to_dict()
    return {k: v for k, v in config.items() if v != defaults[k]}


def cli_json(capsys, db: Path, *args: str):
    capsys.readouterr()
    assert main(["--db", str(db), *args]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def error_text(result) -> str:
    assert result.is_error, result.structured_content
    text = result.content[0].text
    assert "Traceback" not in text
    return text


def disk_state(path: Path) -> dict[str, str]:
    """Every file under `path` with its content hash: any write shows."""
    return {str(f.relative_to(path)): hashlib.sha256(f.read_bytes()).hexdigest()
            for f in sorted(path.rglob("*")) if f.is_file()}


def test_read_only_server_refuses_every_write_tool_and_writes_nothing(db):
    from retrieval.serve.server import build_server
    from retrieval.serve.service import KnowledgeService, Served

    workbench = Workbench(Store(str(db)))
    service = KnowledgeService(workbench, [Served(COLLECTION, SearchConfig(), "defaults")])
    server = build_server(service)
    calls = {"save_config": {"name": "refused", "config": "defaults"},
             "record_judgment": {"query_set": SET, "query": "Who won?", "doc_id": "en-001", "grade": 2},
             "set_served_config": {"config": {"fusion": "rrf"}},
             "snapshot_create": {"name": "refused", "query_set": SET}}
    assert set(calls) == set(WRITE_TOOLS)
    before = disk_state(db)

    async def run():
        async with Client(server) as client:
            tools = {t.name: t for t in (await client.list_tools()).tools}
            assert set(TUNING_TOOLS) <= set(tools)
            for name, args in calls.items():
                assert "without --allow-write" in tools[name].description
                assert "start it with --allow-write" in error_text(await client.call_tool(name, args)), name
            listed = tool_data(await client.call_tool("list_configs", {}))
            assert listed["saved"] == [] and listed["served"][0]["config_name"] == "defaults"

    run_async(run)
    assert disk_state(db) == before
    assert service.served[COLLECTION].config_name == "defaults"


def test_bad_tuning_arguments_are_tool_errors(db):
    from retrieval.serve.server import build_server
    from retrieval.serve.service import KnowledgeService, Served

    service = KnowledgeService(Workbench(Store(str(db))), [Served(COLLECTION, SearchConfig(), "defaults")],
                               allow_write=True)
    bad = [
        ("evaluate_config", {"query_set": "nope"}, "No query set named 'nope'"),
        ("evaluate_config", {"query_set": SET, "max_queries": 0}, "max_queries must be a whole number"),
        ("evaluate_config", {"query_set": SET, "config": "missing"}, "No saved config named 'missing'"),
        ("evaluate_config", {"query_set": SET, "config": {"depth": "ten"}}, "depth"),
        ("evaluate_config", {"query_set": SET, "config": "../x.json"}, "Invalid config name"),
        ("compare_configs", {"a": "defaults", "b": "defaults", "query_set": SET, "metric": "f1"}, "metric must be"),
        ("why_not", {"query": " ", "doc_id": "en-001"}, "query must be a non-empty string"),
        ("explain_result", {"query": "Panthers", "doc_id": "en-059", "config": {"top_k": 1}}, "ask why_not"),
        ("optimize", {"query_set": SET, "trials": 10_000}, "trials must be a whole number from 1 to"),
        ("optimize", {"query_set": SET, "method": "lambdamart"}, "method must be one of bayes"),
        ("sweep", {"query_set": SET, "seconds": 0}, "seconds must be a number above 0"),
        ("sweep", {"query_set": SET, "run_id": "../x"}, "run_id must be"),
        ("snapshot_diff", {"names": ["only-one"]}, "two or more snapshot names"),
        ("run_result", {"run_id": "nope"}, "No run 'nope'"),
        ("save_config", {"name": "bad/name", "config": "defaults"}, "Invalid config name"),
        ("record_judgment", {"query_set": SET, "query": "q", "doc_id": "en-001", "grade": 7}, "Grade must be"),
        ("record_judgment", {"query_set": SET, "query": "q", "doc_id": "not-there", "grade": 1}, "No document"),
        ("set_served_config", {"config": {"fusion": "nope"}}, "fusion"),
    ]
    before = disk_state(db)

    async def run():
        async with Client(build_server(service)) as client:
            for tool, args, message in bad:
                assert message in error_text(await client.call_tool(tool, args)), (tool, args)

    run_async(run)
    assert disk_state(db) == before and service.served[COLLECTION].config_name == "defaults"


class Transcript:
    """The session's calls and their summaries, as docs/mcp.md shows them."""

    def __init__(self):
        self.lines: list[str] = []

    def add(self, tool: str, args: dict, data: dict) -> dict:
        shown = json.dumps(args, ensure_ascii=False)
        self.lines += [f"→ {tool} {shown}", f"← {data.get('summary', '')}", ""]
        return data


@pytest.fixture(scope="module")
def session(db):
    """The scripted session on one stdio server with --allow-write: evaluate the defaults → sweep →
    compare the best with the defaults → why not on the worst query's missing relevant document →
    save the best → snapshot both and diff; then optimize with progress, stopped, and cancelled."""
    args = ["-m", "retrieval", "--db", str(db), "serve", "--collection", COLLECTION, "--allow-write"]
    params = StdioServerParameters(command=sys.executable, cwd=str(REPO), env=server_env(), args=args)
    out: dict = {}
    transcript = Transcript()

    async def call(s, tool: str, arguments: dict, **kwargs) -> dict:
        return transcript.add(tool, arguments, tool_data(await s.call_tool(tool, arguments, **kwargs)))

    async def run():
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            out["tools"] = {t.name for t in (await s.list_tools()).tools}
            out["prompt"] = (await s.get_prompt("tuning_session", {"query_set": SET})).messages[0].content.text
            out["resources"] = {str(r.uri) for r in (await s.list_resources()).resources}
            query_sets = await s.read_resource("workbench://collections/xsmall/query-sets")
            out["query_sets_resource"] = json.loads(query_sets.contents[0].text)
            out["query_sets"] = await call(s, "list_query_sets", {})
            out["evaluate"] = await call(s, "evaluate_config", {"query_set": SET, "config": "defaults",
                                                               "rows": N_QUERIES})
            out["sweep"] = await call(s, "sweep", {"query_set": SET, "config": "defaults", "top": 5})
            best = changed(out["sweep"]["best"]["config"])  # the fields that differ from the defaults
            out["best"] = best
            out["compare"] = await call(s, "compare_configs", {"a": "defaults", "b": best, "query_set": SET,
                                                               "test": "randomization"})
            worst = out["evaluate"]["worst_queries"][0]
            out["why_not_args"] = (worst["query"], worst["missing_from_top_10"][0])
            out["why_not"] = await call(s, "why_not", {"query": worst["query"], "doc_id": out["why_not_args"][1],
                                                      "config": best})
            out["explain"] = await call(s, "explain_result", {"query": worst["query"], "doc_id": "en-001",
                                                              "config": {**best, "top_k": 20}})
            out["next"] = await call(s, "next_to_judge", {"query_set": SET, "configs": ["defaults", best],
                                                          "budget": 5})
            out["save"] = await call(s, "save_config", {"name": "best", "config": best})
            for name, config in (("before", "defaults"), ("after", "best")):
                await call(s, "snapshot_create", {"name": name, "config": config, "query_set": SET})
            out["diff"] = await call(s, "snapshot_diff", {"names": ["before", "after"]})
            out["optimize"] = await call(s, "optimize", {"query_set": SET, "trials": 3, "folds": 2,
                                                        "run_id": "whole"})
            await stopped_and_cancelled(s)
            await stopped_sweep(s)
            out["describe"] = tool_data(await s.call_tool("describe_config", {"config": best}))

    async def stopped_sweep(s):
        """A sweep whose seconds run out while it fetches the candidates: the first variant judged
        (a sweep always judges one), then it stops with what it has."""
        steps: list[float] = []

        async def on_progress(progress, total, message):
            steps.append(progress)

        out["sweep_stopped"] = tool_data(await s.call_tool("sweep", {"query_set": SET, "config": "defaults",
                                                                     "seconds": 0.001},
                                                           progress_callback=on_progress))
        out["sweep_steps"] = steps

    async def stopped_and_cancelled(s):
        """optimize with many trials: stop_run after a few progress notifications (the call returns
        the best so far), then a cancelled call whose result run_result gives."""
        seen: list[tuple[float, float | None, str | None]] = []
        stop_sent = anyio.Event()

        async def on_progress(progress, total, message):
            seen.append((progress, total, message))
            if sum("trial" in (m or "") for _, _, m in seen) >= 3 and not stop_sent.is_set():
                stop_sent.set()
                out["stop"] = tool_data(await s.call_tool("stop_run", {"run_id": "stopped"}))

        out["stopped"] = tool_data(await s.call_tool("optimize", {"query_set": SET, "trials": 200, "folds": 2,
                                                                 "run_id": "stopped"}, progress_callback=on_progress))
        out["progress"] = seen
        trials_seen = anyio.Event()

        async def on_cancel_progress(progress, total, message):
            if "trial" in (message or ""):
                trials_seen.set()

        async with anyio.create_task_group() as group:
            async def cancelled_call():
                await s.call_tool("optimize", {"query_set": SET, "trials": 200, "folds": 2, "run_id": "cancelled"},
                                  progress_callback=on_cancel_progress)
                out["cancel_answered"] = True

            group.start_soon(cancelled_call)
            await trials_seen.wait()
            group.cancel_scope.cancel()
        with anyio.fail_after(120):
            while (status := tool_data(await s.call_tool("run_result", {"run_id": "cancelled"})))["state"] == "running":
                await anyio.sleep(0.1)
        out["cancelled"] = status

    run_async(run)
    if os.environ.get("TUNING_TRANSCRIPT"):
        Path(os.environ["TUNING_TRANSCRIPT"]).write_text("\n".join(transcript.lines), encoding="utf-8")
    return out


def test_session_lists_tools_resources_and_the_prompt(session):
    assert set(TUNING_TOOLS) <= session["tools"]
    assert {"workbench://collections", "workbench://configs", "workbench://snapshots"} <= session["resources"]
    assert session["query_sets_resource"]["query_sets"] == [{"name": SET, "queries": N_QUERIES,
                                                             "judged": N_QUERIES, "judgments": N_QUERIES}]
    assert session["query_sets"]["query_sets"] == session["query_sets_resource"]["query_sets"]
    prompt = session["prompt"]
    for step in ("evaluate_config", "worst_queries", "why_not", "sweep", "compare_configs", "Propose"):
        assert step in prompt
    assert "Never claim a gain without a significance test on held-out folds" in prompt
    assert "how many judged queries and judgments" in prompt


def test_evaluate_equals_the_cli(session, db, capsys):
    data = session["evaluate"]
    cli = cli_json(capsys, db, "evaluate", COLLECTION, "--queryset", SET, "--json")
    assert data["n_queries"] == cli["n_queries"] == N_QUERIES and data["config"] == cli["config"]
    for system, values in cli["metrics"].items():
        assert {m: data["metrics"][system][m] for m in values} == values
    ndcg = data["metrics"]["hybrid"]["ndcg@10"]
    assert data["ci95"]["ndcg@10"][0] <= ndcg <= data["ci95"]["ndcg@10"][1]
    rows = data["per_query"]
    assert len(rows) == N_QUERIES and [r["ndcg@10"] for r in rows] == sorted(r["ndcg@10"] for r in rows)
    assert sum(r["ndcg@10"] for r in rows) / N_QUERIES == pytest.approx(ndcg, abs=1e-6)
    assert data["worst_queries"] == rows[:5]
    assert data["trust"]["judged@10"] == pytest.approx(sum(r["judged@10"] for r in rows) / N_QUERIES, abs=1e-6)
    assert all(r["judged@10"] in (0.0, 0.1) for r in rows)  # one judged paragraph per question


def test_sweep_equals_the_cli(session, db, capsys):
    data = session["sweep"]
    cli = cli_json(capsys, db, "sweep", COLLECTION, "--queryset", SET, "--top", "5", "--json")
    assert data["rows"] == cli and data["best"] == cli[0] and not data["stopped"]
    assert data["n_judged"] == data["n_variants"] and data["headline"]["best"] == cli[0]["label"]


def test_compare_equals_the_cli_evaluations(session, db, capsys, tmp_path):
    data = session["compare"]
    best = tmp_path / "best.json"
    best.write_text(json.dumps(session["sweep"]["best"]["config"]), encoding="utf-8")
    a = cli_json(capsys, db, "evaluate", COLLECTION, "--queryset", SET, "--json")["metrics"]["hybrid"]["ndcg@10"]
    b = cli_json(capsys, db, "evaluate", COLLECTION, "--queryset", SET, "--json", "--config", str(best))
    assert round(data["a"]["ndcg@10"], 6) == a and round(data["b"]["ndcg@10"], 6) == b["metrics"]["hybrid"]["ndcg@10"]
    assert data["delta"] == pytest.approx(data["b"]["ndcg@10"] - data["a"]["ndcg@10"], abs=1e-12)
    assert data["wins"] + data["ties"] + data["losses"] == N_QUERIES and data["wins"] and data["delta"] > 0
    assert data["delta_ci95"][0] <= data["delta"] <= data["delta_ci95"][1]
    assert [w["delta"] > 0 for w in data["winners"]] == [True] * len(data["winners"])
    # the same paired randomization test as the snapshots' diff of the two configs
    assert data["p_value"] == session["diff"]["diffs"][0]["p_value"]
    assert data["delta"] == pytest.approx(session["diff"]["diffs"][0]["delta"], abs=1e-12)
    # the A/B page's one verdict (abtest.verdict): believed only when significant and no hole can flip it
    assert data["verdict"]["believed"] == (data["significant"] and not data["trust"]["can_flip"])
    assert data["verdict"]["answer"] in data["summary"]


def test_why_not_on_the_worst_query_equals_the_cli(session, db, capsys, tmp_path):
    query, doc_id = session["why_not_args"]
    best = tmp_path / "best.json"
    best.write_text(json.dumps(session["sweep"]["best"]["config"]), encoding="utf-8")
    cli = cli_json(capsys, db, "search", COLLECTION, query, "--explain-doc", doc_id, "--json", "--config", str(best))
    data = session["why_not"]
    assert {k: v for k, v in data.items() if k not in ("summary", "config_name")} == cli
    assert data["stage"] in data["summary"] and data["doc_id"] == doc_id


def test_explain_result_and_next_to_judge_equal_the_cli(session, db, capsys, tmp_path):
    query, doc_id = session["why_not_args"]
    config = SearchConfig.from_dict({**session["best"], "top_k": 20})
    (tmp_path / "top20.json").write_text(config.to_json(), encoding="utf-8")
    (tmp_path / "defaults.json").write_text(SearchConfig().to_json(), encoding="utf-8")
    (tmp_path / "best.json").write_text(json.dumps(session["best"]), encoding="utf-8")
    found = cli_json(capsys, db, "search", COLLECTION, query, "--json", "--config", str(tmp_path / "top20.json"))
    shown = next(r for r in found["results"] if r["id"] == doc_id)
    explained = session["explain"]
    assert explained["_meta"] == shown["_meta"] and explained["score"] == shown["score"] and doc_id == "en-001"
    assert explained["_meta"]["rank"] == session["why_not"]["fused_rank"]  # why not: rank 12, below the top 10
    cli = cli_json(capsys, db, "judge", "next", COLLECTION, "--queryset", SET, "--configs",
                   f"{tmp_path / 'defaults.json'},{tmp_path / 'best.json'}", "--budget", "5", "--json")
    assert [{k: v for k, v in p.items() if k != "query"} for p in session["next"]["pairs"]] == cli["pairs"]
    assert session["next"]["selection"] == cli["selection"] == "next" and len(cli["pairs"]) == 5


def test_saved_best_and_snapshot_diff_equal_the_cli(session, db, capsys):
    assert session["save"]["saved"] == "best"
    assert Workbench(Store(str(db))).configs.load("best").to_dict() == session["sweep"]["best"]["config"]
    cli = cli_json(capsys, db, "snapshot", "diff", "before", "after", "--json")
    assert session["diff"]["diffs"][0] == cli
    assert set(cli["causes"]) and cli["causes"]["config"] == pytest.approx(cli["delta"], abs=1e-9)


def test_optimize_equals_the_cli(session, db, capsys):
    cli = cli_json(capsys, db, "optimize", COLLECTION, "--queryset", SET, "--trials", "3", "--folds", "2", "--json")
    timing = {"seconds", "seconds_detail", "run_id", "base_config_name", "summary"}
    # the CLI's corpus lines left out by --skip-invalid: a query set of a collection has none
    assert (cli.pop("skipped"), cli.pop("skipped_records")) == (0, [])
    assert {k: v for k, v in session["optimize"].items() if k not in timing} == {
        k: v for k, v in cli.items() if k not in timing}


def test_optimize_reports_progress_and_a_stop_keeps_the_best_so_far(session):
    seen = session["progress"]
    trials = [(p, t, m) for p, t, m in seen if "trial" in m]
    assert len(trials) >= 3 and all(m.startswith("optimize stopped: ") for _, _, m in seen)
    assert [p for p, _, _ in seen] == sorted(p for p, _, _ in seen) and seen[-1][1] == N_QUERIES + 3 * 200
    stopped = session["stopped"]
    assert stopped["stopped"] is True and stopped["summary"].startswith("Stopped: the best so far.")
    assert session["stop"]["run_id"] == "stopped"
    assert len(stopped["best_so_far"]) < 200  # the study of all queries ran fewer trials than asked
    assert stopped["config"] and stopped["cv"]["ci95"][0] <= stopped["cv"]["ndcg@10"] <= stopped["cv"]["ci95"][1]
    cancelled = session["cancelled"]
    assert "cancel_answered" not in session  # a cancelled request is never answered …
    assert cancelled["state"] == "stopped" and cancelled["result"]["stopped"] is True  # … its run keeps the best
    assert cancelled["result"]["config"] and len(cancelled["result"]["best_so_far"]) < 200


def test_a_sweep_out_of_seconds_returns_the_variants_judged_so_far(session):
    stopped, full = session["sweep_stopped"], session["sweep"]
    assert stopped["stopped"] is True and stopped["n_variants"] == full["n_variants"] == 132
    assert stopped["n_judged"] == 1 and "stopped: the best so far" in stopped["summary"]
    assert session["sweep_steps"][-1] == N_QUERIES + 1  # the queries' candidates, then the one variant
    from retrieval.evaluation.sweep import default_grid

    assert stopped["rows"] == [stopped["best"]] and stopped["best"]["label"] == default_grid(SearchConfig())[0].label
    assert "headline" not in stopped  # the current config (last in the grid's order) was not reached


def test_describe_config_reads_the_pages_help(session):
    from retrieval.search.config_help import FIELD_HELP
    from retrieval.sources import SOURCES

    parameters = {p["name"]: p for p in session["describe"]["parameters"]}
    best = session["sweep"]["best"]["config"]
    assert parameters["fusion"]["help"] == FIELD_HELP["fusion"][1] and parameters["fusion"]["value"] == best["fusion"]
    assert parameters["weights.bm25"]["help"] == SOURCES["bm25"].weight_help
    assert parameters["bm25_k1"]["range"] == [SOURCES["bm25"].params[0].low, SOURCES["bm25"].params[0].high]
    assert parameters["keyword.tag"]["used"] is False
