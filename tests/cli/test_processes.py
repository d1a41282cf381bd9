"""A bench run of several processes (issue 48, section 1: a gate with power on sequential runs). A CPU process keeps
a speed state for its whole life, so a run of one process cannot show the gate the noise between processes; a run
of three (the CPU default) can, and `profctl compare` takes each process as a run.

The judging tests read real recorded processes (tests/data/gate/slices-quiet.json.gz: quiet 2-CPU slices of the
H200 machine's host, three processes a role a pair); the bench tests run the real workload children."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from profctl import inputs
from profctl.analysis import compare as cm
from profctl.cli import app
from profctl.errors import UsageError
from profctl.pipelines import bench_pipeline
from profctl.pipelines.bench_rows import add_noise_warnings, add_process_warnings, merge_processes
from profctl.schema.bench import BenchRow
from tests.unit.test_regression import row, side

DATA = Path(__file__).resolve().parents[1] / "data" / "gate" / "slices-quiet.json.gz"
runner = CliRunner()


def _pairs() -> list[dict[str, Any]]:
    return list(json.loads(gzip.decompress(DATA.read_bytes()))["pairs"])


def _run(procs: list[dict[str, Any]], name: str) -> inputs.Side:
    """One bench run of three recorded processes, as `bench --processes 3` writes it (the middle process's row)."""
    rows = [BenchRow(row(median=1.0, device="cpu", times_ms=p["times_ms"],
                         median_ms=sorted(p["times_ms"])[10])) for p in procs]
    merged = merge_processes(rows)
    machine = max((p["machine"] for p in procs), key=lambda m: m["busy_cores"])
    return side([merged], name=name, device={"name": "cpu", "torch": "2.13.0+cpu", "threads": 2}, machine=machine)


def _verdicts(role: str) -> list[str]:
    out = []
    for i, pair in enumerate(_pairs()):
        rep = cm.compare_runs(_run(pair["base"], f"b{i}"), _run(pair[role], f"n{i}"), limit=0.05)
        (r,) = rep.rows
        assert r.processes == (3, 3) and r.runs == (1, 1)
        out.append(r.verdict)
    return out


# ------------------------------------------------------------------------------------------------ judging
def test_one_run_of_three_processes_a_side_catches_2x_on_every_quiet_pair() -> None:
    """The issue's goal "2x caught with one run a side on a quiet machine": one process a side caught 25 of 30 of
    these; three a side, in one run each, all ten (before, the run's concatenated steps were one unit: fewer)."""
    assert _verdicts("2") == ["slower"] * 10


def test_identical_code_never_fails_the_gate() -> None:
    assert "slower" not in _verdicts("same")


def test_1_3x_is_caught_by_most_single_runs_of_three_processes() -> None:
    """Three processes a side caught 7 of 10 (the rest inconclusive, never faster); one process a side 3 of 30."""
    v = _verdicts("1.3")
    assert v.count("slower") >= 7 and "faster" not in v


def test_three_runs_of_three_processes_catch_1_3x() -> None:
    """The issue's "1.3x caught with three runs a side, quiet": nine processes a side (three pairs' runs)."""
    pairs = _pairs()
    for g in range(0, 9, 3):
        grp = pairs[g:g + 3]
        base = cm.compare_runs(_side([_run(p["base"], f"b{g}{k}") for k, p in enumerate(grp)]),
                               _side([_run(p["1.3"], f"n{g}{k}") for k, p in enumerate(grp)]), limit=0.05)
        (r,) = base.rows
        assert r.verdict == "slower" and r.processes == (9, 9) and r.runs == (3, 3)
        assert "9 process(es) in 3 run(s)" in base.method


def test_on_a_busy_machine_the_note_points_to_an_a_b() -> None:
    """Beside a busy core a process sits at 1.6-1.9 or 8.0 ms (recorded, 2026-11-29): three processes a side
    cannot tell 1.3x, and asking for thousands of processes would be no answer: the note says what would tell."""
    busy = {"cpus": 2, "loadavg": [1.1, 1.0, 1.0], "busy_cores": 0.98, "torch_threads": 2}
    procs = {"base": [1.54, 8.0, 7.99], "new": [2.1, 8.0 * 1.3, 2.3]}
    sides = []
    for name, meds in procs.items():
        rows = [BenchRow(row(median=m, device="cpu", times_ms=[m * (1 + 0.01 * (i % 5)) for i in range(20)],
                             median_ms=m)) for m in meds]
        sides.append(side([merge_processes(rows)], name=name, device={"name": "cpu", "torch": "2.13.0+cpu"},
                          machine=busy))
    rep = cm.compare_runs(sides[0], sides[1], limit=0.05)
    (r,) = rep.rows
    assert r.verdict == "inconclusive" and r.processes == (3, 3) and cm.gate(rep, 0.05).passed
    assert "the machine was busy" in (r.to_dict()["note"] or "") and "bench --ab" in (r.to_dict()["note"] or "")


def _side(runs: list[inputs.Side]) -> inputs.Side:
    return inputs.Side(ref=",".join(r.name for r in runs), kind="bench", path=runs[0].path, name=runs[0].name,
                       manifest=runs[0].manifest, status="complete", rows=list(runs[0].rows), members=runs)


# ------------------------------------------------------------------------------------------------ the row
def test_process_times_split_and_fall_back() -> None:
    r = BenchRow({"times_ms": [1.0, 2.0, 3.0, 4.0, 5.0], "times_per_process": [2, 3]})
    assert r.process_times() == [[1.0, 2.0], [3.0, 4.0, 5.0]]
    assert BenchRow({"times_ms": [1.0, 2.0], "times_per_process": [3]}).process_times() == [[1.0, 2.0]]
    assert BenchRow({"times_ms": [1.0, 2.0]}).process_times() == [[1.0, 2.0]]
    assert BenchRow({"times_ms": None}).process_times() == []


def test_merge_takes_the_middle_process_and_keeps_every_step() -> None:
    def r(med: float, **over: Any) -> BenchRow:
        return BenchRow({"backend": "eager", "status": "ok", "median_ms": med, "tflops": 1 / med,
                         "times_ms": [med] * 5, "check": "ok", "rel_error": 1e-7, **over})

    m = merge_processes([r(3.0), r(1.0), r(2.0, tflops=0.5)])
    assert m.median_ms == 2.0 and m.tflops == 0.5 and m.processes == 3
    assert m.times_per_process == [5, 5, 5] and m.times_ms == [3.0] * 5 + [1.0] * 5 + [2.0] * 5
    assert m.process_medians_ms == [3.0, 1.0, 2.0] and m.process_failures is None
    # a wrong result in any process is the row's; a process that timed nothing is said
    m = merge_processes([r(1.0), r(1.1, check="fail", rel_error=0.3),
                         BenchRow({"backend": "eager", "status": "crashed", "reason": "exit -11"})])
    assert m.check == "fail" and m.rel_error == 0.3 and m.processes == 2
    assert m.process_failures == ["crashed: exit -11"]
    add_process_warnings([m])
    assert m.process_spread == pytest.approx(1.1)  # within 10 %: said only for the process that timed nothing
    assert m.process_warning == "1 of its 3 processes timed nothing (crashed: exit -11)"
    w = merge_processes([r(1.0), r(1.7), r(1.25)])
    add_process_warnings([w])
    add_noise_warnings([w])
    assert w.process_spread == pytest.approx(1.7) and "1.70x apart" in (w.process_warning or "")
    assert w.noise_warning is None  # each process's own steps are steady


def test_processes_default_by_device_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROFCTL_BENCH_PROCESSES", raising=False)
    assert bench_pipeline.processes_for(None, "cpu") == 3
    assert bench_pipeline.processes_for(None, "cuda") == 1
    assert bench_pipeline.processes_for(5, "cuda") == 5
    monkeypatch.setenv("PROFCTL_BENCH_PROCESSES", "2")
    assert bench_pipeline.processes_for(None, "cpu") == 2
    monkeypatch.setenv("PROFCTL_BENCH_PROCESSES", "two")
    with pytest.raises(UsageError, match="PROFCTL_BENCH_PROCESSES"):
        bench_pipeline.processes_for(None, "cpu")


# ------------------------------------------------------------------------------------------------ real runs
ARGS = ["bench", "--device", "cpu", "-b", "eager", "--baseline", "none", "-s", "64", "--heads", "2", "--iters", "6"]


def _bench(tmp_path: Path, *extra: str) -> tuple[Any, list[dict[str, Any]], dict[str, Any], Path]:
    res = runner.invoke(app, [*ARGS, *extra, "-q", "--reports", str(tmp_path)])
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    rows = json.loads((run / "bench.json").read_text())
    return res, rows, json.loads((run / "manifest.json").read_text()), run


def test_a_cpu_run_takes_three_processes_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PROFCTL_BENCH_PROCESSES", raising=False)
    res, (r,), manifest, run = _bench(tmp_path)
    assert res.exit_code == 0, res.output
    assert r["processes"] == 3 and r["times_per_process"] == [6, 6, 6] and len(r["times_ms"]) == 18
    assert sorted(r["process_medians_ms"])[1] == r["median_ms"] and manifest["processes"] == 3
    assert [p["process"] for p in manifest["parts"]] == [1, 2, 3]
    for name in ("events.jsonl", "events-2.jsonl", "events-3.jsonl", "workload.log", "workload-3.log"):
        assert (run / name).exists(), name


def test_processes_option_and_one_process(tmp_path: Path) -> None:
    res, (r,), manifest, _ = _bench(tmp_path / "a", "--processes", "2")
    assert res.exit_code == 0, res.output
    assert r["processes"] == 2 and r["times_per_process"] == [6, 6]
    res, (r,), manifest, _ = _bench(tmp_path / "b", "--processes", "1")
    assert res.exit_code == 0 and "processes" not in r and manifest.get("processes") is None


@pytest.mark.parametrize("extra, words", [
    (["--processes", "0"], "--processes must be 1 to 64, got 0"),
    (["--processes", "2", "--ab", "eager,sdpa-math"], "--processes is for sweeps"),
])
def test_bad_processes_is_one_line(tmp_path: Path, extra: list[str], words: str) -> None:
    res = runner.invoke(app, [*ARGS, *extra, "--reports", str(tmp_path)])
    assert res.exit_code == 2 and words in res.output and "Traceback" not in res.output


def test_processes_on_dask_workers_are_fresh_runs(tmp_path: Path) -> None:
    """Each process's pass over the parts is its own on Dask workers too: Dask keeps a finished future's result
    under its key, and the second pass once got the first's rows back (the same steps twice, no second process)."""
    pytest.importorskip("distributed")
    res = runner.invoke(app, ["bench", "--device", "cpu", "-b", "eager,sdpa-math", "--baseline", "none", "-s", "64",
                              "--heads", "2", "--iters", "6", "--workers", "2", "--processes", "2", "-q",
                              "--reports", str(tmp_path)])
    assert res.exit_code == 0, res.output
    (run,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    for r in json.loads((run / "bench.json").read_text()):
        assert r["processes"] == 2 and r["times_ms"][:6] != r["times_ms"][6:], r
    assert len(list(run.glob("part-*/events-2.jsonl"))) == 2
