"""The MCP server's answers sized for a model (issue 48, section 2), without a client: every answer within its
budget on real recorded reports (the summary first, the full data one call away: the file, a page, `fields`,
`kernel`), the summaries that said None, bad inputs answered with profctl's own line, timing calls taking turns,
and the tools' schema derived from the CLI's one definition of the workload options."""

from __future__ import annotations

import itertools
import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from profctl.cli import app
from tests.conftest import DATA

pytest.importorskip("mcp")

import anyio  # after the skip: anyio comes with the SDK

from profctl import mcp_answers, mcp_server
from profctl.cli._workload_options import typed_options
from profctl.mcp_answers import Outcome

BUDGET = getattr(mcp_answers, "DEFAULT_BUDGET", 8000)
#: what profctl mcp passes the server: the CLI's workload options, less --memory-limit
WORKLOAD = tuple(typed_options(exclude=("memory_limit",)))


def cli_json(*argv: str) -> Any:
    """The CLI's JSON for `profctl ARGV -f json`, in this process."""
    r = CliRunner().invoke(app, [*argv, "-f", "json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def answer_of(tool: str, data: Any, record: Path, **kw: Any) -> tuple[dict[str, Any], str]:
    """(structured answer, text) as the server would send them for the CLI's JSON `data`."""
    o = Outcome(["x"], 0, data, None, record, None, 0.1)
    a = mcp_answers.answer(tool, o, page_no=kw.pop("page_no", 1), page_rows=kw.pop("page_rows", 25),
                           stop_pct=90.0, **kw)
    return a, mcp_answers.text_of(a)


def sizes(a: dict[str, Any], text: str) -> tuple[int, int]:
    return len(text), len(json.dumps(a, default=str, separators=(",", ":")))


REPORTS = ["planted/attn_pair.ncu-rep.xz", "h100-sm90/attn.sqlite.gz", "nsys_profctl_fwdbwd.sqlite.gz",
           "h100-sm90/torch_trace.json.gz", "proton/chain.chrome_trace.gz", "proton/chain.hatchet.gz",
           "bench_h100_s4096.json.gz", "model_decode_h100.json.gz"]


@pytest.mark.parametrize("name", REPORTS)
def test_a_report_answer_is_within_its_budget_summary_first_the_rest_one_call_away(name: str, tmp_path: Path) -> None:
    data = cli_json("report", str(DATA / name))
    whole = len(json.dumps(data, separators=(",", ":")))
    a, text = answer_of("report", data, tmp_path)
    n_text, n_struct = sizes(a, text)
    assert n_text <= BUDGET and n_struct <= BUDGET, (name, n_text, n_struct, whole)
    assert text.startswith(a["summary"])
    assert json.dumps(a["data"], separators=(",", ":")) not in text  # the text does not repeat the data
    assert a["full"]["path"] == str(tmp_path / "answer.json") and a["full"]["chars"] >= whole
    assert "None" not in a["summary"], a["summary"]
    if whole > BUDGET:  # cut, and said how to get the rest
        assert a["paged"] or a["elided"]
        assert "answer.json" in text


def test_the_biggest_report_gives_each_kernels_metrics_one_call_away(tmp_path: Path) -> None:
    data = cli_json("report", str(DATA / "planted/attn_pair.ncu-rep.xz"))
    a, _ = answer_of("report", data, tmp_path)
    assert [k["short_name"] for k in a["data"]["kernels"]] == [k["short_name"] for k in data["kernels"]]
    assert any(e["path"] == "kernels[].metrics" for e in a["elided"])
    metric = "gpu__time_duration.sum"
    one, text = answer_of("report", data, tmp_path, kernel="_fwd_kernel", fields=[f"kernels.metrics.{metric}",
                                                                                   "kernels.short_name"])
    assert one["data"]["kernels"] == [{"short_name": "_fwd_kernel",
                                       "metrics": {metric: data["kernels"][0]["metrics"][metric]}}]
    assert sizes(one, text)[0] <= BUDGET
    with pytest.raises(Exception, match="no_such"):
        answer_of("report", data, tmp_path, fields=["no_such"])


def test_explain_answers_with_and_without_vs_are_within_the_budget(tmp_path: Path) -> None:
    rep = str(DATA / "pairs/pairs_triton_mem.ncu-rep.xz")
    kernels = [k["short_name"] for k in cli_json("report", rep)["kernels"]]
    for argv in (["-k", kernels[0]], ["-k", kernels[0], "--vs", kernels[-1]]):
        data = cli_json("explain", rep, *argv)
        a, text = answer_of("explain", data, tmp_path)
        assert max(sizes(a, text)) <= BUDGET, (argv, sizes(a, text))
        assert a["summary"].splitlines()[0] and "None" not in a["summary"]


def test_runs_are_newest_first_and_the_summary_names_the_newest(tmp_path: Path) -> None:
    from profctl import run_store

    store = tmp_path / "reports"
    for i in range(60):
        r = run_store.new_run("bench", root=store, argv=["profctl", "bench", "-s", str(i)], env=False)
        run_store.finish(r, "complete")
    newest = r.name
    data = cli_json("runs", "--reports", str(store))
    a, text = answer_of("runs", data, tmp_path)
    assert a["summary"].startswith(f"60 run(s); the newest: {newest} (bench, complete")
    assert a["data"][0]["run_id"] == newest and a["data"][0]["command"] == "profctl bench -s 59"
    assert max(sizes(a, text)) <= BUDGET


def test_a_proton_report_summary_says_its_kernels_scopes(tmp_path: Path) -> None:
    data = cli_json("report", str(DATA / "proton/chain.chrome_trace.gz"))
    a, _ = answer_of("report", data, tmp_path)
    first = a["summary"].splitlines()[0]
    assert "None" not in first and " 0 us" not in first, first
    assert "chain_kernel" in first and "produce" in first


def test_explain_without_floor_counters_says_what_is_missing_not_zero(tmp_path: Path) -> None:
    data = cli_json("explain", str(DATA / "ncu_profctl_fwdbwd.ncu-rep.gz"), "-k", "flash_fwd_splitkv_kernel")
    a, _ = answer_of("explain", data, tmp_path)
    s = a["summary"]
    assert "None" not in s and "0 % of its practical best" not in s and "(0 us" not in s, s
    assert s.splitlines()[0] == data["headline"]
    assert "no practical best" in s and "--recipe explain" in s
    assert a["stop"]["floors"] == [] and a["stop"]["stop"] is False


def test_a_negative_seqlen_reaches_profctls_own_check() -> None:
    argv = mcp_server.workload_argv({"seqlen": [-5], "backends": ["sdpa-math"]}, None, WORKLOAD)
    assert "--seqlen=-5" in argv
    r = CliRunner().invoke(app, ["bench", "--device", "cpu", *argv, "-f", "json"])
    assert r.exit_code == 2 and "seqlen" in r.output and "comma list" not in r.output


def _server() -> Any:
    return mcp_server.make_server(mcp_server.Config(reports=Path("/nonexistent"), workload=WORKLOAD), _sleepy)


@pytest.mark.parametrize(("args", "says"), [
    ({}, "bench: workload: a required input is missing"),
    ({"workload": {"seqlen": "many"}}, "bench: workload.seqlen: "),
    ({"workload": {"seqlen": [128]}, "baselin": "none"}, "bench: baselin: not an input of bench"),
])
def test_a_missing_or_mistyped_input_is_profctls_one_line_not_pydantics(args: dict[str, Any], says: str) -> None:
    res = anyio.run(_server().call_tool, "bench", args)
    assert res.is_error
    a = res.structured_content
    assert a["exit_code"] == 2 and a["exit_meaning"].startswith("bad arguments")
    assert a["error"].startswith(says), a["error"]
    text = res.content[0].text
    assert "pydantic" not in text and "http" not in text and "\n" not in a["error"]
    assert text.startswith(f"error: {a['error']} (exit 2: bad arguments")


def test_the_schema_is_derived_from_the_clis_workload_options() -> None:
    from profctl.cli._workload_options import WORKLOAD_OPTIONS

    tools = {t.name: t for t in anyio.run(_server().list_tools)}
    schema = tools["bench"].input_schema
    defs = schema.get("$defs", {})
    workload = next(d for d in defs.values() if "seqlen" in d.get("properties", {}))["properties"]
    for name in ("window", "docs", "seqlen_q", "seqlen_kv", "nvtx", "check", "flush_l2"):
        assert name in workload, name
    cli_names = {n for n, _, _ in WORKLOAD_OPTIONS}
    assert {mcp_server.MCP_NAME.get(n, n) for n in cli_names} <= set(workload)
    assert "flex" in workload["backends"]["description"] and "flex-fa4" in workload["backends"]["description"]
    for name, prop in workload.items():
        assert prop.get("description"), name
    described = {"explain": ("kernel", "vs", "shape", "report", "report2"), "compare": ("by", "base", "new"),
                 "runs": ("kind", "status"), "report": ("paths", "kernel", "fields"), "ncu": ("kernel", "recipe")}
    for tool, names in described.items():
        props = tools[tool].input_schema["properties"]
        for n in names:
            assert props[n].get("description"), (tool, n)
    assert "page" in tools["runs"].input_schema["properties"]


# ------------------------------------------------------------------------------ timing calls take turns
def _sleepy(argv: list[str], out: str, log: str) -> None:
    """A worker that stands for a timing command: notes when it ran, sleeps, prints a bench-like list."""
    t0 = time.time()
    time.sleep(0.8)
    Path(out).write_text(json.dumps([{"backend": "x", "status": "ok", "t0": t0, "t1": time.time()}]))


def test_concurrent_timing_calls_take_turns_and_say_they_waited(tmp_path: Path) -> None:
    svc = mcp_server.Service(mcp_server.Config(reports=tmp_path), _sleepy)
    got: list[dict[str, Any]] = []

    def one() -> None:
        got.append(svc.call("bench", ["bench"], {}, timing=True)[0])

    threads = [threading.Thread(target=one) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    spans = sorted((a["data"][0]["t0"], a["data"][0]["t1"]) for a in got)
    assert all(b[0] >= a[1] for a, b in itertools.pairwise(spans)), spans  # one at a time
    assert sum("waited" in a["summary"] for a in got) >= 2


def test_explain_takes_a_range_of_a_timeline_and_answers_within_the_budget(tmp_path: Path) -> None:
    """Issue 49 item 3: the range explain from the MCP server (the same tool, `range` for `kernel`)."""
    tools = {t.name: t for t in anyio.run(_server().list_tools)}
    props = tools["explain"].input_schema["properties"]
    assert props["range"].get("description") and "kernel" not in tools["explain"].input_schema.get("required", [])
    data = cli_json("explain", str(DATA / "ranges" / "ranges.sqlite.xz"), "--range", "planted/item_sync")
    a, text = answer_of("explain", data, tmp_path)
    assert text.splitlines()[0] == data["verdict"] == "sync-bound"
    assert max(sizes(a, text)) <= BUDGET
    # with an ncu report of the same program: each kernel's verdict and floor, still within the budget
    assert props["ncu"].get("description")
    data = cli_json("explain", str(DATA / "ranges" / "ranges.sqlite.xz"), "--range", "planted/item_sync", "--ncu",
                    str(DATA / "ranges" / "ranges_ncu.ncu-rep.xz"))
    assert any(k["matched"] for k in data["kernel_floors"])
    a, text = answer_of("explain", data, tmp_path)
    assert max(sizes(a, text)) <= BUDGET
