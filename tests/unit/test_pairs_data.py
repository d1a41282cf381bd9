"""Integrity of the planted kernel pairs (tests/data/pairs, recorded with plain `ncu --set full` on an H200 by
tests/data/pairs/record.sh): the ground truth that `profctl explain`'s accuracy is measured against.
Every pair's report opens with profctl's reader and holds both kernels in their NVTX ranges, the planted line of
the report's embedded source carries the `PLANT: <cause>` marker, the sources beside the reports are the ones the
reports embed, and B is faster than A by the manifest's ratio per the timing run (unless listed costs_nothing)."""

from __future__ import annotations

import csv
import io
import json
import lzma
import os
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

from profctl.readers.ncu_profiles import read_profiles
from profctl.schema.profile import KernelProfile

pytest.importorskip("ncu_report")

DATA = Path(__file__).resolve().parents[1] / "data" / "pairs"
MANIFEST = json.loads((DATA / "manifest.json").read_text())
PAIRS = MANIFEST["pairs"]
CATALOG = {"uncoalesced-global", "smem-bank-conflict", "local-memory", "occupancy-registers",
           "occupancy-shared-memory", "occupancy-block-size", "tail-effect", "too-few-blocks", "warp-divergence",
           "no-tensor-cores", "legacy-mma", "mma-not-overlapped", "loads-not-pipelined", "sfu-bound", "dram-bound",
           "compute-bound", "l2-thrashing", "atomic-contention", "barrier-sync"}
LAUNCH_CONFIG = {"occupancy-registers", "occupancy-shared-memory", "occupancy-block-size", "tail-effect",
                 "too-few-blocks"}


@cache
def launches(report: str) -> dict[str, KernelProfile]:
    """NVTX range (`<pair>.<a|b>` inside `measure`) -> the profile of the launch recorded in it."""
    out: dict[str, KernelProfile] = {}
    for p in read_profiles(DATA / report):
        parts = "/".join(p.nvtx).split("/")
        if len(parts) >= 2 and parts[0] == "measure":
            assert parts[1] not in out, f"two launches in range {parts[1]} of {report}"
            out[parts[1]] = p
    return out


def test_the_manifest_covers_the_catalog() -> None:
    ids = [p["id"] for p in PAIRS]
    assert len(ids) == len(set(ids))
    counted = [p for p in PAIRS if p["in_accuracy_set"]]
    assert all(not p["costs_nothing"] for p in counted)
    assert all(p["in_accuracy_set"] or p["costs_nothing"] or p.get("caveat") for p in PAIRS)
    assert len(counted) >= 18
    assert {p["cause"] for p in PAIRS} <= CATALOG
    assert len({p["cause"] for p in counted}) >= 17
    assert sum(p["attention"] for p in counted) >= 5
    assert {p["lang"] for p in PAIRS} == {"cuda", "triton", "library"}
    assert all(p["what"] and p["check"] == "ok" for p in PAIRS)


@pytest.mark.parametrize("pair", PAIRS, ids=[p["id"] for p in PAIRS])
def test_both_kernels_are_in_the_report(pair: dict) -> None:
    path = DATA / pair["report"]
    assert path.stat().st_size < 2 * 1024 * 1024
    got = launches(pair["report"])
    a, b = got[f"{pair['id']}.a"], got[f"{pair['id']}.b"]
    assert (a.base_name, b.base_name) == (pair["a"], pair["b"])
    assert a.has_samples and b.has_samples
    assert a.device and "H200" in a.device


@pytest.mark.parametrize("pair", PAIRS, ids=[p["id"] for p in PAIRS])
def test_the_planted_line_carries_its_marker(pair: dict) -> None:
    a = launches(pair["report"])[f"{pair['id']}.a"]
    if pair["line"] is None:
        assert pair["cause"] in LAUNCH_CONFIG or pair["lang"] == "library"
        return
    assert pair["cause"] not in LAUNCH_CONFIG
    files = [f for f in a.source_text if Path(f).name == pair["file"]]
    assert len(files) == 1, a.source_files
    text = a.source_text[files[0]][pair["line"]]
    assert f"PLANT: {pair['cause']}" in text
    # the copy beside the report is the source the report embeds
    assert (DATA / pair["file"]).read_text().splitlines()[pair["line"] - 1] == text


@pytest.mark.parametrize("pair", PAIRS, ids=[p["id"] for p in PAIRS])
def test_b_is_faster_than_a_per_the_timing_run(pair: dict) -> None:
    timings = json.loads((DATA / "timings.json").read_text())
    rows = {r["id"]: r for run in timings.values() for r in run["pairs"]}
    row = rows[pair["id"]]
    assert (row["time_a_us"], row["time_b_us"]) == (pair["time_a_us"], pair["time_b_us"])
    ratio = pair["time_a_us"] / pair["time_b_us"]
    assert pair["costs_nothing"] == (ratio < MANIFEST["min_ratio"])
    if not pair["costs_nothing"]:
        assert ratio >= MANIFEST["min_ratio"]
        assert pair["time_b_us"] >= 30 and pair["time_a_us"] <= 5000


@pytest.mark.parametrize("report", sorted({p["report"] for p in PAIRS}))
def test_the_details_page_names_the_same_kernels(report: str) -> None:
    page = DATA / report.replace(".ncu-rep.xz", "_details.csv.xz")
    with lzma.open(page, "rt") as fh:
        rows = list(csv.DictReader(io.StringIO(fh.read())))
    names = {r["Kernel Name"] for r in rows}
    for p in (p for p in PAIRS if p["report"] == report):
        for k in (p["a"], p["b"]):
            assert any(k[:40] in n for n in names), (k, sorted(names))


def test_the_triton_pairs_agree_on_the_cpu_interpreter() -> None:
    """Every Triton pair's A and B give the same result as each other and as torch (tiny shapes, Triton's
    interpreter): the check the GPU run repeats at full size."""
    pytest.importorskip("triton")
    script = Path(__file__).resolve().parents[1] / "data" / "pairs" / "pairs_triton.py"
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    r = subprocess.run([sys.executable, str(script), "--check"], capture_output=True, text=True, env=env,
                       timeout=600, check=False)
    checks = [ln for ln in r.stdout.splitlines() if ln.startswith("check ")]
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert len(checks) == sum(p["lang"] == "triton" for p in PAIRS) and all(": ok" in c for c in checks), checks
