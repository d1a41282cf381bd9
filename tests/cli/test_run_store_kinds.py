"""Every command that reads the run store reads every kind of run the other commands write, and any manifest
field of an unexpected type (older versions, other commands, hand edits): `runs`, `show`, `compare` and `report`
never end in a traceback -- over every pair of kinds and the whole mix (issue 21, class 1: `profctl report reports`
after the quickstart ended in `internal error: KeyError`), and a user's own program gets a real report in every
format, its CPU ops, ranges and plots (class 2: it printed an empty `Backends (none)`).

bench (attention and --model) and torch (the workload, and a program of our own) really run here (CPU); the nsys and ncu
run directories are built the way profctl/pipelines/nsys_pipeline.py and ncu_pipeline.py write them, with the reports
profctl recorded on the GPU machine (tests/data/nsys_profctl_fwdbwd.sqlite.gz, ncu_profctl_fwdbwd.ncu-rep.gz).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from profctl import inputs, run_store
from profctl.cli import app
from profctl.fsutil import atomic_write_json, atomic_write_text
from profctl.spec import AttentionSweep
from tests.conftest import DATA, copy_data

TINY = ["--device", "cpu", "--seqlen", "32", "--heads", "2", "--head-dim", "16", "--iters", "3", "--warmup", "1"]
GPU = {"name": "NVIDIA H100 80GB HBM3", "capability": [9, 0], "sm_count": 132, "torch": "2.11.0+cu130",
       "cuda": "13.0"}


def _events(path: Path, sweep: AttentionSweep) -> None:
    """The workload child's events file for `sweep` (device, then start and row per case), as it writes it."""
    lines = [{"event": "device", **GPU}]
    for i, spec in enumerate(sweep.specs()):
        lines += [{"event": "start", "index": i, "spec": spec.to_dict()},
                  {"event": "row", "index": i, "spec": spec.to_dict(), "status": "ok", "reason": None,
                   "median_ms": 0.1}]
    atomic_write_text(path, "".join(json.dumps(x) + "\n" for x in lines))


def nsys_run(root: Path) -> Path:
    """A run directory as pipelines/nsys_pipeline.py leaves it, around the SQLite export `profctl nsys` wrote on the GPU
    machine (tests/data/README.md: sdpa-flash, sdpa-cudnn, eager at seqlen 1024, 8 heads, fwd+bwd)."""
    from profctl.readers import nsys_sqlite

    sweep = AttentionSweep.from_strings(backend="sdpa-flash,sdpa-cudnn,eager", seqlen="1024", heads="8",
                                        pass_="fwd+bwd", warmup=2, iters=3, device="cuda").with_defaults("cuda")
    d = run_store.new_run("nsys", root=root, argv=["profctl", "nsys", "-b", "sdpa-flash,sdpa-cudnn,eager"],
                          extra={"workload": sweep.manifest_dict(), "trace": ["cuda", "nvtx"],
                                 "capture": "cudaProfilerApi", "sample": False})
    run_store.record_tool(d, "nsys", ["nsys", "profile", "-o", str(d / "profile")], version="2025.3.1",
                          log="nsys.log")
    sqlite = copy_data(DATA, "nsys_profctl_fwdbwd.sqlite", d)
    sqlite.rename(d / "profile.sqlite")
    (d / "nsys.log").write_text("nsys profile ...\n")
    with nsys_sqlite.NsysExport(d / "profile.sqlite", window="profiler-api") as ex:
        atomic_write_json(d / "summary.json", json.loads(nsys_sqlite.summarize(ex).to_json()))
    _events(d / "rows.jsonl", sweep)
    run_store.update_manifest(d, device=GPU)
    run_store.finish(d, "complete")
    return d


def ncu_run(root: Path) -> Path:
    """A run directory as pipelines/ncu_pipeline.py leaves it, around the report `profctl ncu --recipe occupancy`
    wrote on the GPU machine (tests/data/README.md)."""
    from dataclasses import replace

    sweep = AttentionSweep.from_strings(backend="sdpa-flash", seqlen="256", heads="2", pass_="fwd+bwd", warmup=1,
                                        iters=1, device="cuda").with_defaults("cuda")
    d = run_store.new_run("ncu", root=root, argv=["profctl", "ncu", "--recipe", "occupancy"],
                          extra={"workload": sweep.manifest_dict(), "recipe": "occupancy", "cc": "9.0"})
    report = copy_data(DATA, "ncu_profctl_fwdbwd.ncu-rep", d)
    report.rename(d / "profile.ncu-rep")
    (d / "ncu.log").write_text("==PROF== Disconnected\n")
    _events(d / "workload.jsonl", sweep)
    s = inputs.read_summary(inputs.file_input(d / "profile.ncu-rep"), by_range=True)
    s = replace(s, meta={**s.meta, "recipe": "occupancy", "cc": "9.0", "run_dir": str(d)})
    atomic_write_text(d / "summary.json", s.to_json() + "\n")
    run_store.finish(d, "complete", launches=len(s.meta.get("launches", [])), device=GPU)
    return d


#: a user's own program: two steps marked with torch.profiler.record_function, matmuls in them
PROGRAM = """
import sys
import torch
from torch.profiler import record_function

x = torch.randn(48, 96)
w = torch.randn(96, 96, requires_grad=True)
for _ in range(int(sys.argv[1])):
    with record_function("alpha"):
        h = torch.relu(x @ w)
    with record_function("beta"):
        (h @ w).sum().backward()
"""
KINDS = ["bench", "model", "torch", "program", "nsys", "ncu"]


def _new(root: Path, before: set[Path], kind: str) -> Path:
    (d,) = [p for p in root.glob(f"*-{kind}-*") if p not in before]
    return d


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One run of each kind the store can hold, in one run store: an attention bench, a model bench, torch on
    the workload, torch on a program of our own, nsys and ncu (from recorded reports)."""
    root = tmp_path_factory.mktemp("store")
    r = CliRunner()
    out = {}
    res = r.invoke(app, ["bench", *TINY, "-b", "sdpa-math,eager", "-q", "--reports", str(root)])
    assert res.exit_code == 0, res.output
    out["bench"] = next(root.glob("*-bench-*"))
    res = r.invoke(app, ["bench", "--model", "gpt-tiny", "--device", "cpu", "-s", "32", "--iters", "2", "--warmup",
                         "0", "-b", "eager", "-q", "--reports", str(root)])
    assert res.exit_code == 0, res.output
    out["model"] = _new(root, {out["bench"]}, "bench")
    res = r.invoke(app, ["torch", *TINY, "-b", "sdpa-math,eager", "-f", "json", "--reports", str(root)])
    assert res.exit_code == 0, res.output
    out["torch"] = next(root.glob("*-torch-*"))
    prog = root.parent / "myblock.py"
    prog.write_text(PROGRAM)
    res = r.invoke(app, ["torch", "-f", "json", "--reports", str(root), "--", "python", str(prog), "2"])
    assert res.exit_code == 0, res.output
    out["program"] = _new(root, {out["torch"]}, "torch")
    out["nsys"] = nsys_run(root)
    out["ncu"] = ncu_run(root)
    return out


def _clean(res: Any) -> None:
    assert "Traceback" not in res.output, res.output
    assert not isinstance(res.exception, Exception) or isinstance(res.exception, SystemExit), res.exception


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv", "json"])
def test_runs_lists_every_kind(store: dict[str, Path], fmt: str) -> None:
    root = store["bench"].parent
    res = CliRunner().invoke(app, ["runs", "--reports", str(root), "-f", fmt])
    _clean(res)
    assert res.exit_code == 0, res.output
    for d in store.values():
        if fmt != "table":  # the table may elide a name; every other format holds them whole
            assert d.name in res.stdout


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("fmt", ["table", "markdown", "json"])
def test_show_every_kind(store: dict[str, Path], kind: str, fmt: str) -> None:
    res = CliRunner().invoke(app, ["show", str(store[kind]), "-f", fmt])
    _clean(res)
    assert res.exit_code == 0, res.output
    if fmt == "json":
        assert json.loads(res.stdout)["manifest"]["kind"] == {"model": "bench", "program": "torch"}.get(kind, kind)


@pytest.mark.parametrize("kind", KINDS)
def test_compare_every_kind_with_itself(store: dict[str, Path], kind: str) -> None:
    res = CliRunner().invoke(app, ["compare", str(store[kind]), str(store[kind]), "-f", "json"])
    _clean(res)
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["rows"]


def test_compare_across_kinds_is_one_line(store: dict[str, Path]) -> None:
    res = CliRunner().invoke(app, ["compare", str(store["bench"]), str(store["torch"])])
    _clean(res)
    assert res.exit_code != 0 and len(res.stderr.strip().splitlines()) == 1


def test_report_reads_the_whole_store(store: dict[str, Path], tmp_path: Path) -> None:
    root = store["bench"].parent
    res = CliRunner().invoke(app, ["report", str(root), "-f", "json"])
    _clean(res)
    assert res.exit_code == 0, res.output
    assert {"bench", "torch", "nsys", "ncu"} <= {s["tool"] for s in json.loads(res.stdout)["sources"]}


# ------------------------------------------------------------------------------------------- every pair, every mix
#: what a report's JSON holds of each kind: (where, what)
def _holds(d: dict[str, Any], kind: str, store: dict[str, Path]) -> bool:
    """Whether report JSON `d` shows the run of `kind`: its rows in the comparison, its model tables, or its
    summary."""
    name = store[kind].name
    if kind == "model":
        return bool(d.get("models")) or (isinstance(d, list) and bool(d))
    if kind == "program":
        sums = d.get("summaries") or ([d] if d.get("schema") == "profctl.summary/1" else [])
        return any(name in json.dumps(x["sources"]) and x["cpu_ops"] for x in sums)
    return any(name in str(src.get("path")) for src in d.get("sources", [])) and bool(d.get("rows"))


PAIRS = [(a, b) for i, a in enumerate(KINDS) for b in KINDS[i:]]


@pytest.mark.parametrize(("a", "b"), PAIRS, ids=[f"{a}+{b}" for a, b in PAIRS])
def test_report_reads_every_pair_of_kinds(store: dict[str, Path], a: str, b: str) -> None:
    """Every pair of kinds (a kind with itself included) in one report: each shows up, nothing silently empty."""
    res = CliRunner().invoke(app, ["report", str(store[a]), str(store[b]), "-f", "json"])
    _clean(res)
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    for k in {a, b}:
        assert _holds(d if isinstance(d, dict) else {"models": d}, k, store), (k, res.stdout[:2000])


@pytest.mark.parametrize(("a", "b"), [(a, b) for a in KINDS for b in KINDS])
def test_compare_every_ordered_pair_is_a_comparison_or_one_line(store: dict[str, Path], a: str, b: str) -> None:
    res = CliRunner().invoke(app, ["compare", str(store[a]), str(store[b]), "-f", "json"])
    _clean(res)
    if res.exit_code == 0:
        assert json.loads(res.stdout)["rows"]
    else:  # refused as not comparable (6), in one line that says why
        assert res.exit_code == 6 and len(res.stderr.strip().splitlines()) == 1, res.output


@pytest.mark.parametrize("fmt", ["table", "markdown", "csv", "json", "html"])
def test_report_of_the_whole_store_in_every_format(store: dict[str, Path], fmt: str, tmp_path: Path) -> None:
    """`profctl report reports` after the quickstart: the first example of docs/reports.md."""
    root = store["bench"].parent
    out = tmp_path / f"report.{fmt}"
    res = CliRunner().invoke(app, ["report", str(root), "-f", fmt, "-o", str(out)])
    _clean(res)
    assert res.exit_code == 0, res.output
    text = out.read_text()
    if fmt == "json":
        d = json.loads(text)
        assert all(_holds(d, k, store) for k in KINDS), text[:3000]
    elif fmt == "csv":
        assert "# backends" in text and "# myblock" not in text and "aten::mm" in text and "Step time" in text
    else:  # the comparison, the model tables and the program, each under its title
        for needle in ("Backends", "Step time", "Your program: python", "aten::mm", "alpha", "beta"):
            assert needle in text, (needle, text[:3000])
    if fmt == "html":
        assert text.count("<img") >= 4 and 'id="summary-0"' in text


# ------------------------------------------------------------------------------------------- a program's report
@pytest.mark.parametrize("fmt", ["table", "markdown", "csv", "json", "html"])
@pytest.mark.parametrize("view", ["auto", "summary", "compare"])
def test_a_programs_run_gets_a_real_report(store: dict[str, Path], fmt: str, view: str, tmp_path: Path) -> None:
    """`profctl report <a run of profctl torch -- python myblock.py>` (what `profctl show` suggests): its CPU ops
    and its record_function ranges, and plots in HTML -- in every format and view, never an empty table."""
    out = tmp_path / f"r.{fmt}"
    res = CliRunner().invoke(app, ["report", str(store["program"]), "-f", fmt, "--view", view, "-o", str(out)])
    _clean(res)
    assert res.exit_code == 0, res.output
    text = out.read_text()
    assert "(none)" not in text and "nothing to plot" not in text
    if fmt == "json":
        d = json.loads(text)
        assert d["schema"] == "profctl.summary/1" and any(c["name"] == "aten::mm" for c in d["cpu_ops"])
        assert {"alpha", "beta"} <= {c["nvtx_range"] for c in d["cpu_ops"]} | {r["name"] for r in d["ranges"]}
    else:
        assert "aten::mm" in text and ("alpha" in text or fmt == "csv")
    if fmt == "html":
        assert text.count("<img") == 2 and "Ranges" in text
    if view != "summary" and fmt in ("table", "markdown"):
        assert "Your program: python" in text and "myblock.py" in text


#: manifest fields as other versions, other commands or hand edits leave them
ODD_FIELDS: list[tuple[str, Any]] = [
    ("device", "cpu"), ("device", "NVIDIA H100 80GB HBM3"), ("device", 0), ("device", ["cpu"]),
    ("environment", "linux"), ("environment", ["torch"]), ("git", "0123456789abcdef"), ("git", [1, 2]),
    ("git", {"commit": 12345}), ("tools", {"name": "nsys", "argv": "nsys profile"}), ("tools", "nsys"),
    ("tools", [{"name": "x", "argv": None}, "junk"]), ("command", "profctl bench -b eager"), ("command", None),
    ("started", 1732000000), ("ended", ["x"]), ("pid", "123"), ("points", "many"), ("rows", 2.0),
    ("clocks", ["x"]), ("clocks", {"throttle_reasons": "thermal", "clock_warnings": 3}), ("labels", "ref"),
    ("label", 7), ("status", None), ("status", 3), ("workload", "b1 s1024"), ("run_id", None), ("kind", 5),
    ("reason", {"x": 1}), ("cwd", None),
]


@pytest.mark.parametrize(("field", "value"), ODD_FIELDS, ids=[f"{f}={v!r}"[:40] for f, v in ODD_FIELDS])
@pytest.mark.parametrize("kind", ["bench", "torch"])
def test_odd_manifest_fields_never_break_runs_show_compare(store: dict[str, Path], tmp_path: Path, kind: str,
                                                           field: str, value: Any) -> None:
    d = tmp_path / store[kind].name
    shutil.copytree(store[kind], d)
    m = json.loads((d / "manifest.json").read_text())
    m[field] = value
    (d / "manifest.json").write_text(json.dumps(m))
    r = CliRunner()
    for args in (["runs", "--reports", str(tmp_path)], ["runs", "--reports", str(tmp_path), "-f", "json"],
                 ["show", str(d)], ["show", str(d), "-f", "markdown"], ["show", str(d), "-f", "json"],
                 ["compare", str(d), str(d)], ["compare", str(d), str(store[kind])]):
        res = r.invoke(app, args)
        _clean(res)
        assert res.exit_code in (0, 6), (args, res.output)  # 6: refused as not comparable, in one line
        if res.exit_code == 6:
            assert len(res.stderr.strip().splitlines()) == 1


def test_torch_run_of_0_1_with_a_device_string(store: dict[str, Path], tmp_path: Path) -> None:
    """The run `profctl torch` wrote before 0.2 kept `device` as a string: the crash of issue 17."""
    d = tmp_path / store["torch"].name
    shutil.copytree(store["torch"], d)
    m = json.loads((d / "manifest.json").read_text())
    m["device"] = "cpu"
    (d / "manifest.json").write_text(json.dumps(m))
    assert run_store.read_manifest(d)["device"] == {"name": "cpu"}
    for args in (["runs", "--reports", str(tmp_path)], ["show", "latest", "--reports", str(tmp_path)],
                 ["compare", str(d), str(store["torch"])]):
        res = CliRunner().invoke(app, args)
        _clean(res)
        assert res.exit_code == 0, res.output


@pytest.mark.parametrize("kind", ["bench", "model"])
def test_cpu_rows_carry_the_hosts_peak_memory(store: dict[str, Path], kind: str) -> None:
    """Issue 21, class 10: no GPU counter on a CPU, so the row's memory is the host's peak over the measured steps,
    said as such."""
    rows = json.loads((store[kind] / "bench.json").read_text())
    assert rows and all(r["peak_host_mem_bytes"] > 10 * 2**20 and r["peak_mem_where"] == "host" for r in rows)
    res = CliRunner().invoke(app, ["show", str(store[kind])])
    assert "MiB (host)" in res.stdout
