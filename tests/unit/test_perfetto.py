"""`profctl report FILE -f perfetto`: the Trace Event Format timeline of the recorded nsys exports and torch traces,
checked against the readers' own counts (kernels per name and per stream, memcpy and memset, range instances), the
format's rules (nesting on a thread, async pairs, named tracks) and `--range` against the per-range summary."""

from __future__ import annotations

import gzip
import json
import sqlite3
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from profctl.analysis.select import names_range
from profctl.cli import app
from profctl.readers import nsys_sqlite, torch_trace
from tests.conftest import DATA

runner = CliRunner()
NSYS = ["nsys_profctl_fwdbwd.sqlite", "nvtx_mixed_nsys.sqlite", "profctl_bwd_nvtx.sqlite"]
TORCH = ["torch_profctl_gpu_nvtx.json.gz", "torch_profctl_gpu_nonvtx.json.gz", "nvtx_mixed_torch.json.gz"]


def perfetto(path: Path, out: Path, *extra: str) -> dict[str, Any]:
    res = runner.invoke(app, ["report", str(path), "-f", "perfetto", "-o", str(out), *extra])
    assert res.exit_code == 0, res.output
    assert "open it in ui.perfetto.dev" in res.output
    opener = gzip.open if out.name.endswith(".gz") else open
    with opener(out, "rt") as f:
        doc: dict[str, Any] = json.load(f)
    check_format(doc)
    return doc


def check_format(doc: dict[str, Any]) -> None:
    """What the viewers need: numbers for pid, tid, ts and dur; complete events nested on each thread; every
    async begin ended; every track that holds events named."""
    events = doc["traceEvents"]
    named = {(e["pid"], e["tid"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    procs = {e["pid"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    per_thread: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    opened: Counter[Any] = Counter()
    for e in events:
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "X":
            assert e["dur"] >= 0 and isinstance(e["ts"], (int, float))
            assert (e["pid"], e["tid"]) in named and e["pid"] in procs
            per_thread[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
        elif e["ph"] in ("b", "e"):
            opened[(e["pid"], e["id"])] += 1 if e["ph"] == "b" else -1
    assert not any(opened.values())
    for spans in per_thread.values():  # complete events on one thread nest (or follow each other)
        stack: list[float] = []
        for s, end in sorted(spans, key=lambda x: (x[0], -x[1])):
            while stack and stack[-1] <= s + 1e-3:
                stack.pop()
            assert not stack or end <= stack[-1] + 1e-3, (s, end, stack[-1])
            stack.append(end)


def kernels(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in doc["traceEvents"] if e["ph"] == "X" and e["cat"] == "kernel"]


def of_kind(s: Any, kind: str) -> int:
    return sum(k.count for k in s.kernels if k.extra.get("kind", "kernel") == kind)


# ------------------------------------------------------------------------------------------------ nsys
@pytest.mark.parametrize("name", [*NSYS, "h100-sm90/attn.sqlite"])
def test_nsys_timeline_has_the_reports_counts(name: str, data_file, shared_fixture, tmp_path: Path) -> None:
    db = shared_fixture("attn.sqlite") if name.startswith("h100") else data_file(name)
    doc = perfetto(db, tmp_path / "trace.json")
    s = nsys_sqlite.read(db)
    by_name = Counter(e["name"] for e in kernels(doc))
    assert by_name == Counter({k.name: k.count for k in s.kernels if k.extra.get("kind", "kernel") == "kernel"})
    cats = Counter(e["cat"] for e in doc["traceEvents"] if e["ph"] == "X")
    assert (cats["memcpy"], cats["memset"]) == (of_kind(s, "memcpy"), of_kind(s, "memset"))
    with sqlite3.connect(db) as con:  # per stream: straight from the export, independently of profctl
        per_stream = dict(con.execute("SELECT streamId, count(*) FROM CUPTI_ACTIVITY_KIND_KERNEL GROUP BY 1"))
    assert Counter(e["tid"] for e in kernels(doc)) == per_stream
    with nsys_sqlite.NsysExport(db) as ex:
        want = Counter(f"{r.domain}@{r.text}" if r.domain else r.text for r in ex.range_instances())
    got = Counter(f"{e['args']['domain']}@{e['name']}" if e["args"]["domain"] != "<default>" else e["name"]
                  for e in doc["traceEvents"] if e.get("cat") == "nvtx" and e["ph"] in ("X", "b"))
    assert got == want
    k = kernels(doc)[0]
    assert len(k["args"]["grid"]) == 3 and len(k["args"]["block"]) == 3 and "registers per thread" in k["args"]


@pytest.mark.parametrize("rng", ["profctl@sdpa-flash.fwd", "sdpa-cudnn.bwd", "eager.bwd", "measure", "warmup"])
def test_nsys_range_keeps_the_kernels_launched_in_it(rng: str, data_file, tmp_path: Path) -> None:
    db = data_file("nsys_profctl_fwdbwd.sqlite")
    doc = perfetto(db, tmp_path / "trace.json", "--range", rng)
    s = nsys_sqlite.read(db, by_range=True)
    want = sum(k.count for k in s.kernels if k.extra.get("kind", "kernel") == "kernel"
               and names_range(k.nvtx_range, rng))
    assert want > 0 and len(kernels(doc)) == want
    leaf = rng.split("@")[-1]
    n = sum(1 for e in doc["traceEvents"] if e.get("cat") == "nvtx" and e["name"] == leaf)
    assert n == sum(1 for r in nsys_sqlite.NsysExport(db).range_instances() if r.text == leaf)


def test_nsys_start_end_ranges_are_async_pairs(data_file, tmp_path: Path) -> None:
    doc = perfetto(data_file("nvtx_mixed_nsys.sqlite"), tmp_path / "trace.json.gz")
    begins = [e for e in doc["traceEvents"] if e["ph"] == "b"]
    assert {e["name"] for e in begins} >= {"step 0", "epoch 1"}


def test_nsys_rep_reads_the_fresh_export_beside_it(shared_fixture, tmp_path: Path) -> None:
    rep = shared_fixture("attn.nsys-rep")
    db = shared_fixture("attn.sqlite")  # written after the report: fresh
    assert db.parent == rep.parent and db.stat().st_mtime >= rep.stat().st_mtime
    doc = perfetto(rep, tmp_path / "trace.json")
    assert len(kernels(doc)) == 161 and doc["otherData"]["source"] == "attn.nsys-rep"


# ------------------------------------------------------------------------------------------------ torch
@pytest.mark.parametrize("name", [*TORCH, "h100-sm90/torch_trace.json.gz"])
def test_torch_timeline_has_the_reports_counts(name: str, tmp_path: Path) -> None:
    path = DATA / name
    doc = perfetto(path, tmp_path / "trace.json")
    s = torch_trace.read(path)
    want: Counter[str] = Counter()
    streams: dict[str, int] = {}
    for k in s.kernels:
        if k.extra.get("kind") == "kernel":
            want[k.name] += k.count
            streams[k.name] = k.extra["streams"]
    got = kernels(doc)
    assert Counter(e["name"] for e in got) == want
    assert {n: len({(e["pid"], e["tid"]) for e in got if e["name"] == n}) for n in want} == streams
    cats = Counter(e["cat"] for e in doc["traceEvents"] if e["ph"] == "X")
    assert (cats["memcpy"], cats["memset"]) == (of_kind(s, "memcpy"), of_kind(s, "memset"))
    ranges = Counter("ProfilerStep#*" if e["name"].startswith("ProfilerStep#") else e["name"]
                     for e in doc["traceEvents"] if e.get("cat") == "user_annotation")
    assert ranges == Counter({r.name: r.count for r in s.ranges})
    assert cats["cpu_op"] == sum(c.count for c in s.cpu_ops)
    if got and "grid" in got[0]["args"]:
        assert len(got[0]["args"]["grid"]) == 3 and len(got[0]["args"]["block"]) == 3


@pytest.mark.parametrize("rng", ["measure", "sdpa-flash.bwd", "eager.fwd", "profctl@eager.bwd"])
def test_torch_range_keeps_the_kernels_launched_in_it(rng: str, tmp_path: Path) -> None:
    path = DATA / "torch_profctl_gpu_nvtx.json.gz"
    doc = perfetto(path, tmp_path / "trace.json", "--range", rng)
    s = torch_trace.read(path, by_range=True)
    leaf = rng.split("@")[-1]
    want = sum(k.count for k in s.kernels if k.extra.get("kind") == "kernel" and names_range(k.nvtx_range, leaf))
    assert want > 0 and len(kernels(doc)) == want


# ------------------------------------------------------------------------------------------------ the command
def test_unknown_range_is_one_line_and_writes_nothing(data_file, tmp_path: Path) -> None:
    out = tmp_path / "trace.json"
    res = runner.invoke(app, ["report", str(data_file("nsys_profctl_fwdbwd.sqlite")), "-f", "perfetto", "-o",
                              str(out), "--range", "nope"])
    assert res.exit_code == 7, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "--range 'nope'" in lines[0] and "profctl@measure" in lines[0]
    assert not out.exists() and not list(tmp_path.glob(".trace.json*"))


def test_to_stdout_without_output(data_file) -> None:
    res = runner.invoke(app, ["report", str(data_file("nvtx_mixed_nsys.sqlite")), "-f", "perfetto"])
    assert res.exit_code == 0
    doc = json.loads(res.stdout)
    assert len(kernels(doc)) == 88


@pytest.mark.parametrize(("args", "needle"), [
    (["--range", "measure"], "--range does not apply here: --range picks the window of a timeline"),
    (["-f", "perfetto", "--pivot", "ms"], "--pivot and -f perfetto contradict"),
    (["-f", "perfetto", "--view", "summary"], "contradict"),
    (["-f", "perfetto", "--limit", "3"], "--limit and -f perfetto contradict"),
])
def test_options_a_timeline_does_not_take(args: list[str], needle: str, data_file) -> None:
    res = runner.invoke(app, ["report", str(data_file("nvtx_mixed_nsys.sqlite")), *args])
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and needle in lines[0], res.output


def test_bench_rows_have_no_timeline(tmp_path: Path) -> None:
    res = runner.invoke(app, ["report", str(DATA / "bench_h100_s4096.json.gz"), "-f", "perfetto", "-o",
                              str(tmp_path / "t.json")])
    assert res.exit_code == 2 and "writes one timeline" in res.output and "Traceback" not in res.output


# ------------------------------------------------------------------------------------------------ older exports
#: exports as other nsys versions and capture options write them, made from a recorded one: nsys 2023.x keeps its
#: version in EXPORT_META_DATA and writes no NVTX_EVENTS table without NVTX trace (the case of issue 29 item 9),
#: and a capture may lack memcpy, memset or runtime tables, thread names or GPU info
OLDER: dict[str, list[str]] = {
    "2023.2 without NVTX trace": ["ALTER TABLE META_DATA_EXPORT RENAME TO EXPORT_META_DATA", "DROP TABLE NVTX_EVENTS"],
    "no NVTX_EVENTS": ["DROP TABLE NVTX_EVENTS"],
    "no memcpy table": ["DROP TABLE CUPTI_ACTIVITY_KIND_MEMCPY"],
    "no memset table": ["DROP TABLE IF EXISTS CUPTI_ACTIVITY_KIND_MEMSET"],
    "no runtime table": ["DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME"],
    "no thread names": ["DROP TABLE ThreadNames"],
    "no GPU info": ["DROP TABLE TARGET_INFO_GPU"],
    "no memcpy labels": ["DROP TABLE ENUM_CUDA_MEMCPY_OPER"],
    "older column spellings": ["ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME COLUMN registersPerThread TO registers",
                               "ALTER TABLE NVTX_EVENTS RENAME COLUMN globalTid TO globalThreadId"],
}


@pytest.mark.parametrize("variant", list(OLDER))
def test_an_export_report_reads_is_a_timeline_too(variant: str, data_file, tmp_path: Path) -> None:
    """One reader, one answer: an export that `profctl report` summarises is a timeline under -f perfetto (the
    same schema layer reads both), with every kernel the summary counts; one it refuses is refused alike."""
    db = tmp_path / "old.sqlite"
    db.write_bytes(data_file("nvtx_mixed_nsys.sqlite").read_bytes())
    with sqlite3.connect(db) as c:
        for sql in OLDER[variant]:
            c.execute(sql)
    summary = runner.invoke(app, ["report", str(db), "-f", "json"])
    out = tmp_path / "t.json"
    timeline = runner.invoke(app, ["report", str(db), "-f", "perfetto", "-o", str(out)])
    assert "Traceback" not in summary.output + timeline.output
    assert (summary.exit_code, timeline.exit_code) == (0, 0), (summary.output, timeline.output)
    kernels_counted = sum(k["count"] for k in json.loads(summary.stdout)["kernels"]
                          if k["extra"].get("kind", "kernel") == "kernel")
    doc = json.loads(out.read_text())
    check_format(doc)
    assert len(kernels(doc)) == kernels_counted
