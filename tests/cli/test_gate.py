"""A regression gate one can trust (issue 22), end to end on the CPU with real runs: two runs of the same program
under `profctl torch` compare with no verdict of change; a slowdown planted in one op (examples/ops_program.py,
OPS_SLOW=softmax: the softmax does twice the work) is flagged, and only that op; old summaries still compare (by
the threshold, and say so); the gate's exit codes."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from profctl.cli import app
from tests.conftest import ROOT

PROGRAM = str(ROOT / "examples" / "ops_program.py")
CHANGED = ("slower", "faster")


def _torch_run(store: Path, *, slow: bool = False) -> Path:
    """One `profctl torch` run of the program (a fresh process), its run directory."""
    before = set(store.iterdir()) if store.exists() else set()
    old = os.environ.get("OPS_SLOW")
    os.environ["OPS_SLOW"] = "softmax" if slow else ""
    try:
        r = CliRunner().invoke(app, ["torch", "--reports", str(store), "-f", "json", "--", "python", PROGRAM])
    finally:
        if old is None:
            os.environ.pop("OPS_SLOW", None)
        else:
            os.environ["OPS_SLOW"] = old
    assert r.exit_code == 0, r.output
    (new,) = set(store.iterdir()) - before
    return new


def _compare(*args: str) -> tuple[int, dict[str, Any], str]:
    r = CliRunner().invoke(app, ["compare", *args, "-f", "json"])
    return r.exit_code, (json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}), r.stderr


@pytest.fixture(scope="module")
def program_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    store = tmp_path_factory.mktemp("gate")
    yield {"base": _torch_run(store), "same": _torch_run(store), "slow": _torch_run(store, slow=True),
           "store": store}


def _judged(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["kernel"]: r for r in doc["rows"] if r["verdict"] != "not judged"}


def test_two_runs_of_one_program_show_no_change(program_runs: dict[str, Path]) -> None:
    """No op is called faster or slower: first calls are left out, sub-10-us CPU ops and ops run once or twice
    are not judged, and the CPU's band (10 %) holds what moves between two processes (a CPU shared with other
    jobs can move a lot more for a moment: one more run is allowed)."""
    base, other = program_runs["base"], program_runs["same"]
    for _attempt in range(2):
        code, doc, err = _compare(str(base), str(other), "--fail-if-slower", "20%")
        judged = _judged(doc)
        if not any(r["verdict"] in CHANGED for r in judged.values()):
            break
        other = _torch_run(program_runs["store"])
    assert code == 0, err
    assert not [(k, r["verdict"], r["change"]) for k, r in judged.items() if r["verdict"] in CHANGED]
    assert {"aten::mm", "aten::_softmax"} <= set(judged)  # the big ops are judged, with an interval
    for r in judged.values():
        assert r["method"] == "bootstrap" and r["ci_lo"] <= r["ci_hi"] and r["noise_floor"] is not None
    rows = {r["kernel"]: r for r in doc["rows"]}
    assert rows["aten::normal_"]["verdict"] == "not judged"  # the first-call op of the issue: run 3 times
    assert doc["threshold"] == 0.1 and doc["threshold_from"] == "the default for CPU timings"


def test_a_slowdown_planted_in_one_op_is_flagged_and_only_that_op(program_runs: dict[str, Path]) -> None:
    base, slow = program_runs["base"], program_runs["slow"]
    for _attempt in range(2):
        code, doc, err = _compare(str(base), str(slow), "--fail-if-slower", "20%")
        judged = _judged(doc)
        others = [(k, r["verdict"]) for k, r in judged.items() if k != "aten::_softmax" and r["verdict"] in CHANGED]
        if not others:
            break
        slow = _torch_run(program_runs["store"], slow=True)
    assert judged["aten::_softmax"]["verdict"] == "slower" and judged["aten::_softmax"]["ratio"] > 1.5
    assert judged["aten::_softmax"]["ci_lo"] > 1.2
    assert not others
    assert code == 1 and "aten::_softmax" in err and "--fail-if-slower 20%" in err
    assert len(err.strip().splitlines()) == 1


def _strip_samples(summary: Path, out: Path) -> Path:
    """The summary as profctl wrote it before it kept samples (the fields it added taken out)."""
    d = json.loads(summary.read_text())
    for rows in (d.get("kernels") or [], d.get("cpu_ops") or []):
        for r in rows:
            for k in ("samples_ns", "samples_of", "first_call"):
                r.get("extra", {}).pop(k, None)
    out.write_text(json.dumps(d))
    return out


def test_old_summaries_still_compare_by_the_threshold(program_runs: dict[str, Path], tmp_path: Path) -> None:
    old_base = _strip_samples(program_runs["base"] / "summary.json", tmp_path / "old_base.json")
    old_slow = _strip_samples(program_runs["slow"] / "summary.json", tmp_path / "old_slow.json")
    code, doc, err = _compare(str(old_base), str(old_slow), "--fail-if-slower", "20%")
    assert "no confidence interval" in doc["method"]
    judged = _judged(doc)
    assert {r["method"] for r in judged.values()} == {"threshold"}
    assert judged["aten::_softmax"]["verdict"] == "slower" and judged["aten::_softmax"]["ci_lo"] is None
    assert code == 1 and "threshold only" in err
    # one old side is enough for the threshold: the new side's samples are not half used
    code, doc, _ = _compare(str(old_base), str(program_runs["slow"]))
    assert code == 0 and {r["method"] for r in _judged(doc).values()} == {"threshold"}
    # the floors still apply: ops run once or twice are not judged
    assert {r["kernel"]: r for r in doc["rows"]}["aten::normal_"]["verdict"] == "not judged"


def test_table_and_markdown_say_method_interval_and_noise_floor(program_runs: dict[str, Path]) -> None:
    r = CliRunner().invoke(app, ["compare", str(program_runs["base"]), str(program_runs["slow"]),
                                 "-f", "markdown"])
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "method: ratio of medians over each kernel's instances" in out and "not judged below" in out
    header = next(line for line in out.splitlines() if line.startswith("| kernel"))
    assert "| CI |" in header and "| noise floor |" in header and "| verdict |" in header
    assert "noise floor: the smallest change each row could have seen" in out
    assert "not judged" in out and "first call left out" in out


@pytest.mark.parametrize(("args", "code", "needle"), [
    (["--min-samples", "1"], 2, "--min-samples 1"),
    (["--min-total-ms", "-1"], 2, "--min-total-ms -1"),
    (["--threshold", "10%", "--fail-if-slower", "5%"], 2, "contradict"),
    (["--strict"], 2, "--fail-if-slower"),
])
def test_bad_gate_options_are_one_line(program_runs: dict[str, Path], args: list[str], code: int,
                                       needle: str) -> None:
    r = CliRunner().invoke(app, ["compare", str(program_runs["base"]), str(program_runs["same"]), *args])
    assert r.exit_code == code and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.output


def test_a_summary_and_a_bench_run_are_not_comparable(program_runs: dict[str, Path], tmp_path: Path) -> None:
    from tests.cli.test_compare import make_run

    bench = make_run(tmp_path)
    code, _, err = _compare(str(program_runs["base"]), str(bench))
    assert code == 6 and "kernel summary" in err
