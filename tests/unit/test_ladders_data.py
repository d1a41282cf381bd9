"""Integrity of the ladders (tests/data/ladders, recorded with plain `ncu --set full` on an H200 by
tests/data/ladders/record.sh): kernels with two faults each in four rungs, the ground truth issue 47 measures
`profctl explain` against. Data only, not explain's accuracy (benchmarks/explain_accuracy/score_ladders.py scores
that): the manifest lists every report, rung and NVTX range; every report opens with profctl's reader and holds one
launch per rung in its range, named as the manifest says, with the source the folder holds; the times agree with
times.json and each fix gains at least 10 % somewhere; each rung's kernel carries the markers of the faults it
keeps; the rungs agree with their float reference on the CPU interpreter."""

from __future__ import annotations

import csv
import io
import json
import lzma
import os
import re
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "data" / "ladders"
MANIFEST = json.loads((DATA / "manifest.json").read_text())
LADDERS = MANIFEST["ladders"]
SOURCE = (DATA / "ladders.py").read_text()
#: faults of the launch configuration: marked on the Python launch line, not in the kernel
LAUNCH_CONFIG = {"too-few-blocks", "occupancy-registers", "occupancy-shared-memory", "occupancy-block-size",
                 "tail-effect"}
IDS = [ld["id"] for ld in LADDERS]


def _rungs(ld: dict) -> dict[str, dict]:
    return {r["rung"]: r for r in ld["rungs"]}


@cache
def launches(report: str) -> dict[str, object]:
    """NVTX range (`<ladder>.<rung>` inside `measure`) -> the profile of the launch recorded in it."""
    pytest.importorskip("ncu_report")
    from profctl.readers.ncu_profiles import read_profiles

    out: dict[str, object] = {}
    for p in read_profiles(DATA / report):
        parts = "/".join(p.nvtx).split("/")
        if len(parts) >= 2 and parts[0] == "measure":
            assert parts[1] not in out, f"two launches in range {parts[1]} of {report}"
            out[parts[1]] = p
    return out


def test_the_set_is_what_the_issue_asks_for() -> None:
    assert len(LADDERS) >= 3 and len(set(IDS)) == len(IDS)
    assert MANIFEST["device"].startswith("NVIDIA H200")
    causes = set()
    for ld in LADDERS:
        x, y = ld["faults"]
        assert x["cause"] != y["cause"] and x["key"] != y["key"]
        causes |= {x["cause"], y["cause"]}
        assert list(_rungs(ld)) == ["both", f"fix_{x['key']}", f"fix_{y['key']}", "clean"]
        assert x["removed_in"] == [f"fix_{x['key']}", "clean"] and y["removed_in"] == [f"fix_{y['key']}", "clean"]
    assert len(causes) >= 4  # different mechanisms across the set


def test_every_recorded_file_is_listed_and_small() -> None:
    listed = {ld["report"] for ld in LADDERS} | {ld["details"] for ld in LADDERS}
    present = {f.name for f in DATA.glob("*.xz")}
    assert listed == present
    for name in present:
        assert (DATA / name).stat().st_size < 2 * 2**20, name


@pytest.mark.parametrize("ld", LADDERS, ids=IDS)
def test_the_rungs_faults_and_pairs_are_consistent(ld: dict) -> None:
    x, y = ld["faults"]
    want = {"both": [x["cause"], y["cause"]], f"fix_{x['key']}": [y["cause"]], f"fix_{y['key']}": [x["cause"]],
            "clean": []}
    rungs = _rungs(ld)
    for rung, r in rungs.items():
        assert r["faults"] == want[rung]
        assert r["kernel"] == f"{ld['id']}_{rung}"
        assert r["nvtx"] == f"measure/{ld['id']}.{rung}"
    # every pair is a rung against the rung with one more fault fixed; its gap is the difference of their times
    assert len(ld["pairs"]) == 4
    for p in ld["pairs"]:
        a, b = rungs[p["a"]], rungs[p["b"]]
        assert set(a["faults"]) - set(b["faults"]) == {p["removed"]} and set(b["faults"]) < set(a["faults"])
        assert p["gap_us"] == pytest.approx(a["time_us"] - b["time_us"], abs=0.02)
    assert ld["joint_gain_us"] == pytest.approx(rungs["both"]["time_us"] - rungs["clean"]["time_us"], abs=0.02)


@pytest.mark.parametrize("ld", LADDERS, ids=IDS)
def test_the_times_are_the_timing_runs_and_each_fix_gains(ld: dict) -> None:
    times = {r["id"]: r for r in json.loads((DATA / "times.json").read_text())["ladders"]}[ld["id"]]
    rungs = _rungs(ld)
    assert {k: r["time_us"] for k, r in rungs.items()} == times["time_us"]
    assert {k: r["kernel"] for k, r in rungs.items()} == times["kernels"]
    t = times["time_us"]
    assert all(v > 20 for v in t.values())
    assert t["clean"] < min(t[r] for r in t if r != "clean") and t["both"] > t["clean"] * 1.1
    for f in ld["faults"]:  # fixing each fault gains at least 10 % in at least one rung
        other = next(g for g in ld["faults"] if g is not f)
        gains = [t["both"] / t[f"fix_{f['key']}"], t[f"fix_{other['key']}"] / t["clean"]]
        assert max(gains) >= 1.1, (f["cause"], gains)


def test_check_log_says_every_rung_matches_its_reference() -> None:
    lines = [ln for ln in (DATA / "check.log").read_text().splitlines() if ln.startswith("check ")]
    assert len(lines) == 4 * len(LADDERS) and all(" ok (" in ln for ln in lines), lines
    assert (DATA / "failed.txt").read_text().strip() == "failed steps: none"


@pytest.mark.parametrize("ld", LADDERS, ids=IDS)
def test_each_rung_is_in_its_report(ld: dict) -> None:
    got = launches(ld["report"])
    assert set(got) == {f"{ld['id']}.{r}" for r in _rungs(ld)}
    for rung, r in _rungs(ld).items():
        p = got[f"{ld['id']}.{rung}"]
        assert p.base_name == r["kernel"]
        assert p.has_samples and p.device and "H200" in p.device
        assert (p.duration_ns or 0) > 0
        # the copy beside the report is the source the report embeds
        files = [f for f in p.source_text if Path(f).name == "ladders.py"]
        assert len(files) == 1, list(p.source_text)
        lines = SOURCE.splitlines()
        for n, text in p.source_text[files[0]].items():
            assert lines[n - 1] == text, (n, text)


def _kernel_source(name: str) -> str:
    m = re.search(rf"^def {name}\(.*?(?=^\S)", SOURCE + "\nEND", re.S | re.M)
    assert m, name
    return m.group(0)


@pytest.mark.parametrize("ld", LADDERS, ids=IDS)
def test_each_kernel_carries_the_markers_of_the_faults_it_keeps(ld: dict) -> None:
    for r in ld["rungs"]:
        src = _kernel_source(r["kernel"])
        assert re.search(rf"^@triton\.jit\ndef {r['kernel']}\(", SOURCE, re.M), r["kernel"]
        marked = set(re.findall(r"# FAULT: ([a-z0-9-]+)", src))
        assert marked == set(r["faults"]) - LAUNCH_CONFIG, (r["kernel"], marked)
    for f in ld["faults"]:  # a fault of the launch configuration is marked where the rungs are launched
        if f["cause"] in LAUNCH_CONFIG:
            assert f"# FAULT: {f['cause']}" in SOURCE


@pytest.mark.parametrize("ld", LADDERS, ids=IDS)
def test_the_details_page_names_the_same_kernels(ld: dict) -> None:
    with lzma.open(DATA / ld["details"], "rt") as fh:
        names = {r["Kernel Name"] for r in csv.DictReader(io.StringIO(fh.read()))}
    assert names == {r["kernel"] for r in ld["rungs"]}


def test_the_ladders_agree_with_their_reference_on_the_cpu_interpreter() -> None:
    """Every rung against the float reference at tiny shapes in Triton's interpreter: the check the GPU run repeats
    at full size."""
    pytest.importorskip("triton")
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    r = subprocess.run([sys.executable, str(DATA / "ladders.py"), "--smoke"], capture_output=True, text=True, env=env,
                       timeout=600, check=False)
    checks = [ln for ln in r.stdout.splitlines() if ln.startswith("check ")]
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert len(checks) == 4 * len(LADDERS) and all(" ok (" in c for c in checks), checks
    listed = subprocess.run([sys.executable, str(DATA / "ladders.py"), "--list"], capture_output=True, text=True,
                            env=env, timeout=300, check=True).stdout.splitlines()
    assert [ln.split("\t")[2] for ln in listed] == [r["kernel"] for ld in LADDERS for r in ld["rungs"]]
