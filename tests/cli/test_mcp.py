"""`profctl mcp` (issue 42), driven through the MCP SDK's own client over stdio on the CPU: bench on CPU backends,
explain and report on recorded reports, an A/B of two functions, a refused bad input, a time limit hit; each answer
leads with its summary, carries the CLI's own JSON for the same command line, pages long lists and is kept as a run.
The GPU lock is checked directly (one GPU job at a time), and `profctl --help` does not import the SDK."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from profctl import run_store
from tests.conftest import DATA, ROOT

pytest.importorskip("mcp")

import anyio  # after the skip: anyio comes with the SDK
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

PLANTED = DATA / "planted" / "planted_triton.ncu-rep.xz"
NSYS = DATA / "h100-sm90" / "attn.sqlite.gz"
CPU = {"backends": ["sdpa-math"], "seqlen": [128], "heads": [2], "head_dim": [32], "iters": 3, "warmup": 1,
       "device": "cpu"}
Calls = Callable[[ClientSession], Awaitable[Any]]


def session(store: Path, calls: Calls, *options: str) -> Any:
    """Start `profctl mcp` as a client would (a stdio subprocess), run `calls` on its session, return their result."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "profctl", "mcp", "--reports", str(store),
                                                                  *options], cwd=str(store.parent),
                                   env={"PYTHONPATH": str(ROOT),  # and the suite's one bench process a run
                                        **{k: v for k, v in os.environ.items() if k == "PROFCTL_BENCH_PROCESSES"}})

    async def go() -> Any:
        async with stdio_client(params) as (r, w), ClientSession(r, w) as s:
            await s.initialize()
            return await calls(s)

    return anyio.run(go)


def call(tool: str, args: dict[str, Any]) -> Calls:
    async def one(s: ClientSession) -> Any:
        return await s.call_tool(tool, args)
    return one


def answer_of(res: Any) -> dict[str, Any]:
    """The structured answer, with the summary leading the text and the text within the budget, saying where the
    whole data is, not repeating it; the data shown is the whole data when it fits (else said: paged, elided)."""
    a = res.structured_content
    text = res.content[0].text
    assert text.startswith(a["summary"]), text[:200]
    assert len(text) <= 8000 and len(json.dumps(a, separators=(",", ":"))) <= 8000
    if a["full"]:
        assert a["full"]["path"] in text
        whole = json.loads(Path(a["full"]["path"]).read_text())
        if a["ok"] and not a["paged"] and not a["elided"]:
            assert a["data"] == (whole if a["tool"] != "runs" else a["data"])
    return dict(a)


def full_of(a: dict[str, Any]) -> Any:
    """The whole of an answer's data: the CLI's JSON, kept in the call's run directory (`full.path`)."""
    return json.loads(Path(a["full"]["path"]).read_text())


def cli_json(argv: list[str], cwd: Path) -> Any:
    """What `profctl ARGV` prints (the same command line the answer says it ran)."""
    out = subprocess.run([sys.executable, "-m", "profctl", *argv], capture_output=True, text=True, timeout=300,
                         cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def argv_of(a: dict[str, Any]) -> list[str]:
    return str(a["command"]).split()[1:]


CASE = ("backend", "batch", "seqlen_q", "seqlen_kv", "heads", "head_dim", "dtype", "causal", "pass", "device",
        "status", "check")


def test_bench_on_the_cpu_is_the_clis_json_kept_as_a_run(tmp_path: Path) -> None:
    store = tmp_path / "reports"
    a = answer_of(session(store, call("bench", {"workload": CPU})))
    assert a["ok"] and a["exit_code"] == 0
    assert a["summary"].splitlines()[0].startswith("sdpa-math b1 s128 h2 d32 fp32 fwd: ")
    assert "no roof here" in a["summary"] and a["stop"]["stop"] is False
    assert a["stop"]["last_change_beyond_noise"] is None  # one run judges no change: ab does
    cli = cli_json(argv_of(a), tmp_path)
    assert [{k: r[k] for k in CASE} for r in a["data"]] == [{k: r[k] for k in CASE} for r in cli]
    assert [sorted(r) for r in a["data"]] == [sorted(r) for r in cli]
    record, run = run_store.load_run(a["record"]), run_store.load_run(a["run"])
    assert record.kind == "mcp-bench" and record.status == "complete" and run.kind == "bench"
    assert record.manifest["command"] == ["profctl", *argv_of(a)]
    assert json.loads((record.path / "answer.json").read_text()) == a["data"]
    assert (record.path / "summary.txt").read_text().strip() == a["summary"]


def test_explain_and_report_equal_the_cli_and_page_long_lists(tmp_path: Path) -> None:
    store = tmp_path / "reports"

    async def calls(s: ClientSession) -> Any:
        ex = await s.call_tool("explain", {"report": str(PLANTED), "kernel": "exp_rows"})
        rep = [await s.call_tool("report", {"paths": [str(NSYS)], "page": n}) for n in (1, 2, 3, 4)]
        return ex, rep

    ex_res, rep_res = session(store, calls, "--page-rows", "0")
    ex = answer_of(ex_res)
    lines = ex["summary"].splitlines()
    assert lines[0] == full_of(ex)["verdict"]  # the verdict first, then the first cause with its line and saving
    assert lines[1].startswith("first cause: sfu-bound") and "planted_triton.py:33" in lines[1] and "saves" in lines[1]
    assert "% of its practical best" in lines[2] and "left" in lines[2]
    assert full_of(ex) == cli_json(argv_of(ex), tmp_path)
    assert ex["stop"]["floors"][0]["pct_of_floor"] == full_of(ex)["floor"]["a"]["pct_of_attainable"]
    assert ex["stop"]["stop"] is False  # a cause still removes work from it
    assert run_store.load_run(ex["record"]).kind == "mcp-explain"
    whole = [answer_of(r) for r in rep_res]
    assert full_of(whole[0]) == cli_json(argv_of(whole[0]), tmp_path)
    assert whole[0]["summary"].startswith("37 kernel(s); the most time: ")  # page rows 0: whole, if it fits

    def paged(a: dict[str, Any]) -> list[str]:
        return [k["kernel_id"] for k in a["data"]["kernels"]]

    small = [answer_of(r) for r in session(store, lambda s: _pages(s, NSYS), "--page-rows", "15")]
    assert [p["page"] for a in small for p in a["paged"] if p["path"] == "kernels"] == [1, 2, 3]
    assert small[0]["paged"][0] == {"path": "kernels", "page": 1, "pages": 3, "rows": 37, "size": 15,
                                    "next": "page=2"}
    assert "kernels page 1 of 3 (37 rows, next: page=2)" in small[0]["summary"]
    assert [k for a in small[:3] for k in paged(a)] == [k["kernel_id"] for k in full_of(whole[0])["kernels"]]
    assert small[3]["exit_code"] == 2 and "page 4" in small[3]["error"]  # past the last page: said, not empty


async def _pages(s: ClientSession, path: Path) -> list[Any]:
    return [await s.call_tool("report", {"paths": [str(path)], "page": n, "fields": ["kernels.kernel_id"]})
            for n in (1, 2, 3, 4)]


FUNCTIONS = '''
import torch


def attn_a(q, k, v, is_causal=False, scale=None, enable_gqa=False):
    return torch.softmax((q @ k.transpose(-2, -1)) * scale, dim=-1) @ v


def attn_twice(q, k, v, is_causal=False, scale=None, enable_gqa=False):
    attn_a(q, k, v, is_causal, scale)
    return attn_a(q, k, v, is_causal, scale)
'''


def test_ab_of_two_functions_says_the_verdict_and_whether_to_stop(tmp_path: Path) -> None:
    fns = tmp_path / "fns.py"
    fns.write_text(FUNCTIONS)
    w = {k: v for k, v in CPU.items() if k != "backends"} | {"seqlen": [256], "iters": 5}
    a = answer_of(session(tmp_path / "reports", call("ab", {"a": f"{fns}:attn_a", "b": f"{fns}:attn_twice",
                                                            "workload": w, "rounds": 7})))
    assert a["ok"], a["summary"]
    row = full_of(a)["result"]["rows"][0]
    assert row["verdict"] in ("slower", "inconclusive", "unchanged", "faster")
    first = a["summary"].splitlines()[0]
    assert first.startswith(f"{fns}:attn_twice vs {fns}:attn_a, b1 s256 h2 d32 fp32 fwd: ") and row["verdict"] in first
    assert "95% CI" in first
    assert a["stop"]["last_change_beyond_noise"] == (row["verdict"] in ("faster", "slower"))
    assert a["stop"]["floors"] == []  # a CPU has no roof: the verdict alone says whether a change was measurable
    cli = cli_json(argv_of(a), tmp_path)
    assert sorted(cli) == sorted(full_of(a)) and sorted(cli["result"]["rows"][0]) == sorted(row)
    assert run_store.load_run(a["run"]).kind == "ab"


def test_a_bad_input_is_refused_in_one_line_with_its_exit_meaning(tmp_path: Path) -> None:
    store = tmp_path / "reports"

    async def calls(s: ClientSession) -> Any:
        return (await s.call_tool("bench", {"workload": CPU | {"seqlen": [0]}}),
                await s.call_tool("bench", {"workload": CPU | {"backends": ["sdpa-math,eager"]}}),
                await s.call_tool("explain", {"report": str(PLANTED), "kernel": "no_such_kernel"}),
                await s.call_tool("bench", {"workload": CPU | {"seqlen": [-5]}}),
                await s.call_tool("bench", {"workload": CPU, "baselin": "none"}),
                await s.call_tool("explain", {"report": str(PLANTED)}))

    results = session(store, calls)
    bad_value, comma, nothing, negative, mistyped, missing = (answer_of(r) for r in results)
    assert negative["exit_code"] == 2 and "--seqlen must be a positive integer, got -5" in negative["error"]
    assert mistyped["exit_code"] == 2 and mistyped["error"].startswith("bench: baselin: not an input of bench "
                                                                       "(did you mean baseline?)")
    # explain takes a kernel or a range (issue 49): neither is the CLI's own one line, naming the report's kernels
    assert missing["exit_code"] == 2 and missing["error"].startswith("--kernel (a kernel of an ncu report) or --range")
    assert "reduce_kernel" in missing["error"] and "\n" not in missing["error"]
    assert all("pydantic" not in r.content[0].text for r in results)
    assert all(r.is_error for r in results)
    assert bad_value["exit_code"] == 2 and bad_value["exit_meaning"].startswith("bad arguments")
    assert "\n" not in bad_value["error"] and "seqlen" in bad_value["error"]
    assert bad_value["summary"].startswith(f"error: {bad_value['error']} (exit 2: bad arguments")
    out = subprocess.run([sys.executable, "-m", "profctl", *argv_of(bad_value)], capture_output=True, text=True,
                         cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert out.returncode == 2 and out.stderr.strip().endswith(bad_value["error"])  # the CLI's own line
    assert comma["exit_code"] == 2 and comma["record"] is None and "comma list" in comma["error"]  # nothing ran
    assert nothing["exit_code"] == 7 and "no_such_kernel" in nothing["error"]


def test_a_call_past_its_time_limit_is_stopped_and_said(tmp_path: Path) -> None:
    store = tmp_path / "reports"
    t0 = time.monotonic()
    res = session(store, call("bench", {"workload": CPU | {"seqlen": [1024], "iters": 100000},
                                        "time_limit_s": 4}))
    a = answer_of(res)
    assert res.is_error and a["time_limit_hit"] and a["exit_code"] == 4
    assert a["error"].startswith("time limit hit: the call ran past 4 s and was stopped")
    assert time.monotonic() - t0 < 60
    record = run_store.load_run(a["record"])
    assert record.status == "failed" and record.manifest["reason"] == a["error"]
    made = [r for r in run_store.list_runs(store) if r.kind == "bench"]
    assert all(r.status != "running" for r in made)  # stopped, not left behind as running


def test_one_gpu_job_at_a_time_a_second_waits_then_is_refused(tmp_path: Path) -> None:
    from profctl.mcp_server import Busy, gpu_lock

    with gpu_lock(tmp_path, 0, wait_s=1, what="mcp bench"):
        t0 = time.monotonic()
        with pytest.raises(Busy) as e, gpu_lock(tmp_path, 0, wait_s=0.5, what="mcp ab"):
            pass
        assert time.monotonic() - t0 >= 0.5
        assert "GPU 0 is busy (mcp bench, pid" in e.value.one_line() and "waited 0.5 s" in e.value.one_line()
        with gpu_lock(tmp_path, 1, wait_s=0, what="mcp ab"):  # another GPU: not held
            pass
    with gpu_lock(tmp_path, 0, wait_s=0, what="mcp ab"):  # released when the first ends
        pass


def test_help_does_not_import_the_sdk() -> None:
    code = ("import sys; from typer.testing import CliRunner; from profctl.cli import app; "
            "r = CliRunner().invoke(app, ['--help']); assert r.exit_code == 0 and 'mcp' in r.output; "
            "print(sorted(m for m in ('mcp', 'pydantic', 'anyio') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
