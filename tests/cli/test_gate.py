"""A regression gate one can trust (issues 22 and 29), on the CPU with real runs of examples/ops_program.py under
`profctl torch`: two runs of the same program compare with no verdict of change; a slowdown planted in one op
(OPS_SLOW=softmax: the softmax does twice the work) is flagged, and only that op; old summaries still compare (by
the threshold, and say so); the gate's exit codes.

The verdicts are asserted on runs recorded on this 2-core CPU machine with both cores kept busy
(tests/data/gate/, tests/data/gate/record.py): what one process's timings do against another's is noise the test
cannot control, so asserting "no other op changed" on runs made during the test fails at random (issue 29). The
recorded runs make it deterministic, and the same assertions hold on them; the live runs below check that the
whole path (a program under `profctl torch`, then `compare`) works and finds a change far above the noise."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from profctl.cli import app
from tests.conftest import ROOT

PROGRAM = str(ROOT / "examples" / "ops_program.py")
RECORDED = ROOT / "tests" / "data" / "gate"
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
def recorded(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The recorded runs, copied (never used in place): base-1..4 of the unchanged program, slow-1..3 planted."""
    store = tmp_path_factory.mktemp("gate-recorded")
    out = {}
    for d in sorted(RECORDED.iterdir()):
        if d.is_dir():
            out[d.name] = Path(shutil.copytree(d, store / d.name))
    out["store"] = store
    return out


@pytest.fixture(scope="module")
def program_runs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Path]]:
    store = tmp_path_factory.mktemp("gate")
    yield {"base": _torch_run(store), "slow": _torch_run(store, slow=True), "store": store}


def _judged(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["kernel"]: r for r in doc["rows"] if r["verdict"] != "not judged"}


def _sides(recorded: dict[str, Path], *names: str) -> str:
    return ",".join(str(recorded[n]) for n in names)


@pytest.mark.parametrize(("base", "other"), [("base-1", "base-2"), ("base-2", "base-3"), ("base-3", "base-4"),
                                             ("base-1,base-2", "base-3,base-4")])
def test_two_runs_of_one_program_show_no_change(recorded: dict[str, Path], base: str, other: str) -> None:
    """No op is called faster or slower: first calls are left out, sub-10-us CPU ops and ops run once or twice
    are not judged, and every interval holds the CPU's run-to-run noise (one run a side: the measured default)."""
    code, doc, err = _compare(_sides(recorded, *base.split(",")), _sides(recorded, *other.split(",")),
                              "--fail-if-slower", "10%")
    judged = _judged(doc)
    assert code == 0, err
    assert not [(k, r["verdict"], r["change"]) for k, r in judged.items() if r["verdict"] in CHANGED]
    assert {"aten::mm", "aten::_softmax"} <= set(judged)  # the big ops are judged, with an interval
    for r in judged.values():
        assert r["method"] == "bootstrap" and r["ci_lo"] <= r["ci_hi"] and r["noise_floor"] is not None
        assert r["run_noise"] is not None and (r["runs_base"], r["runs_new"]) == (base.count(",") + 1,) * 2
    rows = {r["kernel"]: r for r in doc["rows"]}
    assert rows["aten::normal_"]["verdict"] == "not judged"  # the first-call op of the issue: run 3 times
    assert doc["threshold"] == 0.1 and doc["threshold_from"] == "the default for CPU timings"


@pytest.mark.parametrize(("base", "slow"), [("base-1", "slow-1"), ("base-4", "slow-3"),
                                            ("base-1,base-2,base-3", "slow-1,slow-2,slow-3")])
def test_a_slowdown_planted_in_one_op_is_flagged_and_only_that_op(recorded: dict[str, Path], base: str,
                                                                   slow: str) -> None:
    code, doc, err = _compare(_sides(recorded, *base.split(",")), _sides(recorded, *slow.split(",")),
                              "--fail-if-slower", "20%")
    judged = _judged(doc)
    others = [(k, r["verdict"]) for k, r in judged.items() if k != "aten::_softmax" and r["verdict"] in CHANGED]
    assert judged["aten::_softmax"]["verdict"] == "slower" and judged["aten::_softmax"]["ratio"] > 1.5
    assert judged["aten::_softmax"]["ci_lo"] > 1.2
    assert not others
    assert code == 1 and "aten::_softmax" in err and "--fail-if-slower 20%" in err
    assert len([line for line in err.strip().splitlines() if "error" in line]) == 1


def test_the_issue_complaint_is_what_run_noise_left_out_gives(recorded: dict[str, Path]) -> None:
    """Without the noise between runs (--run-noise 0: intervals over one process's calls only), the recorded
    identical runs are judged as the issue saw: ops called changed with tight intervals. That is the noise the
    default now holds."""
    changed = 0
    for a, b in (("base-1", "base-2"), ("base-2", "base-3"), ("base-3", "base-4")):
        _, doc, _ = _compare(str(recorded[a]), str(recorded[b]), "--threshold", "2%", "--run-noise", "0")
        changed += sum(r["verdict"] in CHANGED for r in _judged(doc).values())
        assert all(r["run_noise"] is None for r in _judged(doc).values())
    assert changed >= 1


def test_one_run_a_side_says_so_and_several_runs_are_measured(recorded: dict[str, Path]) -> None:
    r = CliRunner().invoke(app, ["compare", str(recorded["base-1"]), str(recorded["base-2"])])
    assert r.exit_code == 0, r.output
    assert "one run per side: intervals include run-to-run noise of ±6% a run" in r.stdout
    code, doc, _ = _compare(_sides(recorded, "base-1", "base-2", "base-3"), _sides(recorded, "base-4"))
    assert code == 0 and "3 run(s) against 1: run-to-run noise measured" in doc["method"]
    assert doc["runs"] == {"base": 3, "new": 1}
    assert any(r["run_noise_measured"] is not None for r in _judged(doc).values())


def test_live_runs_of_the_program_find_the_planted_slowdown(program_runs: dict[str, Path]) -> None:
    """The whole path on runs made now: the planted op (twice the work) comes out slower than the base with an
    interval that holds the CPU's run-to-run noise, and the gate's exit code follows the verdict (what else moves
    between these two processes is not asserted here: the recorded runs above do that deterministically).

    Bounded honestly (issue 39): twice the work is not twice the time (the op's fixed costs), and under two busy
    cores it measured 1.49x, right where one run a side (±21 % of run-to-run noise) tells it from noise, so whether
    this one pair says `slower` or `inconclusive` is the machine's doing. What must hold either way: the estimate is
    well past the noise of one op between processes (spreads of at most +28 % were measured), the row is judged
    with the default run noise, and a `slower` fails the gate naming the op while an `inconclusive` passes it."""
    code, doc, err = _compare(str(program_runs["base"]), str(program_runs["slow"]), "--fail-if-slower", "20%")
    judged = _judged(doc)
    soft = judged["aten::_softmax"]
    assert soft["ratio"] > 1.3 and soft["verdict"] in ("slower", "inconclusive"), soft
    assert soft["runs_base"] == 1 and soft["run_noise"] == pytest.approx(0.06)
    failing = [k for k, r in judged.items() if r["verdict"] == "slower" and r["ratio"] > 1.2]
    assert code == (1 if failing else 0), (code, failing, err)
    if soft["verdict"] == "slower":
        assert soft["ci_lo"] > 1.0 and "aten::_softmax" in err  # the gate names the worst regression first


def _strip_samples(summary: Path, out: Path) -> Path:
    """The summary as profctl wrote it before it kept samples (the fields it added taken out)."""
    d = json.loads(summary.read_text())
    for rows in (d.get("kernels") or [], d.get("cpu_ops") or []):
        for r in rows:
            for k in ("samples_ns", "samples_of", "first_call"):
                r.get("extra", {}).pop(k, None)
    out.write_text(json.dumps(d))
    return out


def test_old_summaries_still_compare_by_the_threshold(recorded: dict[str, Path], tmp_path: Path) -> None:
    old_base = _strip_samples(recorded["base-1"] / "summary.json", tmp_path / "old_base.json")
    old_slow = _strip_samples(recorded["slow-1"] / "summary.json", tmp_path / "old_slow.json")
    code, doc, err = _compare(str(old_base), str(old_slow), "--fail-if-slower", "20%")
    assert "no confidence interval" in doc["method"]
    judged = _judged(doc)
    assert {r["method"] for r in judged.values()} == {"threshold"}
    assert judged["aten::_softmax"]["verdict"] == "slower" and judged["aten::_softmax"]["ci_lo"] is None
    assert code == 1 and "threshold only" in err
    # one old side is enough for the threshold: the new side's samples are not half used
    code, doc, _ = _compare(str(old_base), str(recorded["slow-1"]))
    assert code == 0 and {r["method"] for r in _judged(doc).values()} == {"threshold"}
    # the floors still apply: ops run once or twice are not judged
    assert {r["kernel"]: r for r in doc["rows"]}["aten::normal_"]["verdict"] == "not judged"


def test_table_and_markdown_say_method_interval_and_noise_floor(recorded: dict[str, Path]) -> None:
    r = CliRunner().invoke(app, ["compare", str(recorded["base-1"]), str(recorded["slow-1"]),
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
def test_bad_gate_options_are_one_line(recorded: dict[str, Path], args: list[str], code: int,
                                       needle: str) -> None:
    r = CliRunner().invoke(app, ["compare", str(recorded["base-1"]), str(recorded["base-2"]), *args])
    assert r.exit_code == code and needle in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.output


def test_a_summary_and_a_bench_run_are_not_comparable(recorded: dict[str, Path], tmp_path: Path) -> None:
    from tests.cli.test_compare import make_run

    bench = make_run(tmp_path)
    code, _, err = _compare(str(recorded["base-1"]), str(bench))
    assert code == 6 and "kernel summary" in err


def test_the_gate_names_the_worst_regression_first(recorded: dict[str, Path]) -> None:
    """With several rows past the limit (here: run noise left out and a 1 % limit), the one-line error names the
    largest slowdown, not whichever row came first."""
    code, _, err = _compare(str(recorded["base-1"]), str(recorded["slow-1"]), "--fail-if-slower", "1%",
                            "--threshold", "1%", "--run-noise", "0")
    assert code == 1
    assert "regression beyond --fail-if-slower 1%: aten::_softmax +" in err and " more" in err
