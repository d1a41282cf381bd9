"""Fuzzing every reader (issue 10 part 3): no report, however damaged, ends in a traceback.

Seeded, with a fixed number of mutated files per reader (FUZZ_COUNTS; the test prints the tally), made from the
recorded reports in tests/data: byte-level mutations (bit flips, overwritten runs, truncation at many offsets,
spliced copies, on the plain file and on its gzip) and structured ones per format (deeply nested or huge JSON,
wrong types, NaN; CSVs with only a header or a units row, renamed or repeated header columns; SQLite exports with
inverted timestamps, missing string ids, NULLs, text in number columns, dropped tables and columns). Each mutated
file must read, through `profctl.inputs` as the CLI reads, either as a one-line BadReport, or as a valid summary
(serialisable, finite numbers) that is not empty without a warning (and, for .ncu-rep, has no launch that
ncu_report could not decode shown as an `<unnamed launch>`). The .ncu-rep cases run in a child process,
since ncu_report is native code. A few of each go through `profctl report` for the exit status 5.
"""

from __future__ import annotations

import gzip
import json
import math
import random
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from profctl import inputs
from profctl.errors import BadReport, ReaderFault
from profctl.schema import Summary

SEED = 20261123
#: mutated files per reader: a stable number, whatever the seed files hold
FUZZ_COUNTS = {"torch": 320, "ncu-csv": 320, "nsys": 160, "summary": 160, "bench": 60, "ncu-rep": 64}
Get = Callable[[str], Path]
Mutation = tuple[str, bytes]  # (what was done, the file's bytes)


# ------------------------------------------------------------------------------------------- byte mutations
def _bitflips(b: bytes, r: random.Random, lo: int = 0, hi: int | None = None) -> bytes:
    x = bytearray(b)
    hi = len(x) if hi is None else min(hi, len(x))
    for _ in range(r.choice([1, 2, 8, 64])):
        p = r.randrange(lo, hi)
        x[p] ^= 1 << r.randrange(8)
    return bytes(x)


def _overwrite(b: bytes, r: random.Random, lo: int = 0, hi: int | None = None) -> bytes:
    x = bytearray(b)
    hi = len(x) if hi is None else min(hi, len(x))
    p, k = r.randrange(lo, hi), r.randrange(1, 256)
    x[p : p + k] = bytes(r.randrange(256) for _ in range(k)) if r.random() < 0.7 else b"\x00" * k
    return bytes(x)


def _splice(b: bytes, r: random.Random) -> bytes:
    p, q = sorted(r.randrange(len(b)) for _ in range(2))
    at = r.randrange(len(b))
    return b[:at] + b[p:q] + b[at:]


def byte_mutations(b: bytes, r: random.Random, n: int, *, lo: int = 0, hi: int | None = None) -> Iterator[Mutation]:
    """`n` byte-level mutations of `b`: truncations at evenly spread and random offsets, bit flips, overwritten
    runs, spliced copies, and the same on the gzip of `b`."""
    gz = gzip.compress(b, 6, mtime=0)
    for i in range(n):
        kind = i % 6
        if kind == 0:
            cut = (i * 7919) % len(b) if i % 12 else r.randrange(len(b))
            yield f"truncated at {cut}", b[:cut]
        elif kind == 1:
            yield "bit flips", _bitflips(b, r, lo, hi)
        elif kind == 2:
            yield "overwritten run", _overwrite(b, r, lo, hi)
        elif kind == 3:
            yield "spliced", _splice(b, r)
        elif kind == 4:
            yield "gzip truncated", gz[: r.randrange(len(gz))]
        else:
            yield "gzip bit flips", _bitflips(gz, r, 10)


# ------------------------------------------------------------------------------------------- checking
def check(path: Path) -> tuple[str, str]:
    """('bad', message) for a one-line BadReport, ('ok', '') for a valid summary; AssertionError otherwise."""
    try:
        s = inputs.read(path, by_range=True)
    except BadReport as e:
        line = e.one_line()
        assert line and "\n" not in line and "Traceback" not in line, line
        assert e.exit_code == 5
        assert not isinstance(e, ReaderFault), f"caught only by the safety net: {line}"
        return "bad", line
    assert isinstance(s, Summary)
    json.loads(s.to_json())  # serialisable, no NaN or infinity
    for row in (*s.kernels, *s.cpu_ops, *s.ranges):
        for k, v in vars(row).items():
            if isinstance(v, float):
                assert math.isfinite(v), (k, v)
    for k in s.kernels:
        assert k.count >= 0 and isinstance(k.name, str) and isinstance(k.kernel_id, str)
    unnamed = [k.name for k in s.kernels if k.name.startswith("<unnamed launch")]
    assert not unnamed, f"a damaged ncu file read as data: {unnamed[:2]}"  # ncu names every kernel it profiles
    if not s.kernels and not s.cpu_ops:
        assert s.warnings, "an empty summary without a word"
    return "ok", ""


def run_cases(tmp: Path, suffix: str, cases: Iterator[Mutation], tally: dict[str, int], reader: str) -> list[str]:
    failures: list[str] = []
    for i, (what, data) in enumerate(cases):
        p = tmp / f"{reader}-{i}{suffix}"
        p.write_bytes(data)
        try:
            check(p)
        except Exception as e:
            failures.append(f"{reader} #{i} ({what}): {type(e).__name__}: {str(e)[:300]}")
        finally:
            p.unlink(missing_ok=True)
        tally[reader] = tally.get(reader, 0) + 1
    return failures


# ------------------------------------------------------------------------------------------- torch traces
def _torch_seed(data_file: Get) -> bytes:
    """A small real trace: the recorded profctl trace's metadata and its first 300 events of each kind we read."""
    d = json.loads(data_file("torch_profctl_gpu_nvtx.json").read_text())
    keep: list[Any] = []
    seen: dict[Any, int] = {}
    for e in d["traceEvents"]:
        k = (e.get("ph"), e.get("cat"))
        seen[k] = seen.get(k, 0) + 1
        if seen[k] <= 300:
            keep.append(e)
    d["traceEvents"] = keep
    return json.dumps(d).encode()


def torch_structured(seed: bytes, r: random.Random) -> Iterator[Mutation]:
    d = json.loads(seed)
    evs = d["traceEvents"]
    bad_values: list[Any] = [None, "x", -1, 1e308, float("nan"), float("inf"), [], {}, {"a": [1]}, True, 2**70]
    yield "deeply nested event", b'{"traceEvents": [' + b"[" * 200_000 + b"]" * 200_000 + b"]}"
    yield "deeply nested header", b'{"deviceProperties": ' + b'{"a":' * 100_000 + b"1" + b"}" * 100_000 + b"}"
    yield "deeply nested, cut", b'{"traceEvents": [' + b"[" * 50_000
    yield "traceEvents not a list", b'{"traceEvents": 5}'
    yield "traceEvents of numbers", b'{"traceEvents": [1, 2.5, "x", null, true]}'
    yield "empty object", b"{}"
    yield "empty array", b"[]"
    yield "NaN literal", seed.replace(b'"dur": ', b'"dur": NaN, "x": ', 5)
    yield "Infinity literal", seed.replace(b'"ts": ', b'"ts": Infinity, "y": ', 5)
    for field in ("ts", "dur", "name", "cat", "ph", "pid", "tid", "args", "id"):
        for v in bad_values:
            if r.random() < 0.45:
                continue
            x = json.loads(seed)
            for e in r.sample(x["traceEvents"], k=min(20, len(x["traceEvents"]))):
                e[field] = v
            yield f"events with {field}={v!r}", json.dumps(x).encode()
    x = json.loads(seed)
    for e in x["traceEvents"]:
        if isinstance(e.get("args"), dict) and "correlation" in e["args"]:
            e["args"]["correlation"] = r.choice(bad_values)
    yield "bad correlations", json.dumps(x).encode()
    x = json.loads(seed)
    x["traceEvents"] = [e for e in evs if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset")]
    yield "no GPU activity", json.dumps(x).encode()
    x = json.loads(seed)
    x["traceEvents"] = [e for e in evs if e.get("cat") in ("kernel",)]
    yield "kernels only", json.dumps(x).encode()
    x = json.loads(seed)
    x["deviceProperties"] = [{"name": {"nested": 1}}, 5, None]
    yield "odd deviceProperties", json.dumps(x).encode()


def test_fuzz_torch_trace(data_file: Get, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                          fuzz_tally: dict[str, int]) -> None:
    from profctl.readers import torch_trace

    monkeypatch.setattr(torch_trace, "MAX_VALUE_CHARS", 1 << 20)  # "huge" scaled down to 1 Mi characters
    r = random.Random(SEED)
    seed = _torch_seed(data_file)
    structured = list(torch_structured(seed, r))
    huge = [("a huge string value", b'{"traceEvents": [{"name": "' + b"k" * (3 << 20) + b'"}]}'),
            ("a huge event array", b'{"traceEvents": [' + b",".join([b'{"ph": "X", "cat": "cpu_op", "name": "a", '
                                                                     b'"ts": 1, "dur": 1, "pid": 1, "tid": 1}'] * 20000)
             + b"]}")]
    n = FUZZ_COUNTS["torch"] - len(structured) - len(huge)
    cases = [*structured, *huge, *byte_mutations(seed, r, n)]
    assert len(cases) == FUZZ_COUNTS["torch"]
    failures = run_cases(tmp_path, ".json", iter(cases), fuzz_tally, "torch")
    assert not failures, "\n".join(failures)


# ------------------------------------------------------------------------------------------- ncu CSV
def csv_structured(raw: bytes, details: bytes, cmdline: bytes) -> Iterator[Mutation]:
    lines = raw.decode().splitlines(keepends=True)
    header, units = lines[0], lines[1]
    yield "header only", header.encode()
    yield "units row only", (header + units).encode()
    yield "units row, no header", units.encode()
    yield "details header only", details.decode().splitlines(keepends=True)[0].encode()
    yield "cmdline: log lines only", b"==PROF== Connected to process 1\n==PROF== Disconnected from process 1\n"
    for old, new in (('"ID"', '"Id"'), ('"Kernel Name"', '"Kernel"'), ('"gpu__time_duration.sum"', '"duration"'),
                     ('"Device"', '"Kernel Name"'), ('"CC"', '"ID"')):
        yield f"raw header {old} -> {new}", raw.replace(old.encode(), new.encode(), 1)
    for old, new in (('"Metric Value"', '"Value"'), ('"Metric Name"', '"Metric"'), ('"Metric Unit"', '"Unit"'),
                     ('"Section Name"', '"Section"')):
        yield f"cmdline header {old} -> {new}", cmdline.replace(old.encode(), new.encode(), 1)
    yield "a column cut from the header", raw.replace(b'"Context",', b"", 1)
    yield "rows longer than the header", raw.replace(b"\n", b',"extra"\n')
    yield "NUL bytes", raw[:500] + b"\x00" * 100 + raw[500:]
    yield "not UTF-8", raw[:300] + b"\xff\xfe\xfa" + raw[300:]
    yield "unterminated quote", raw[:2000] + b'"unterminated' + raw[2000:]
    yield "CRLF", raw.replace(b"\n", b"\r\n")
    yield "BOM", b"\xef\xbb\xbf" + raw
    yield "non-numeric IDs", raw.replace(b'\n"0",', b'\n"zero",', 1)
    yield "values NaN and inf", raw.replace(b'"3,', b'"nan', 5).replace(b'"4,', b'"inf', 5)
    yield "values out of range", raw.replace(b'"1,980,000"', b'"1e999"').replace(b'"5,120"', b'"-1e999"')
    yield "a huge field", header.encode() + b'"0","' + b"9" * (2 << 20) + b'"\n'
    yield "durations all zero", cmdline.replace(b'"ns","', b'"ns","0",  "')


def test_fuzz_ncu_csv(data_file: Get, tmp_path: Path, fuzz_tally: dict[str, int]) -> None:
    r = random.Random(SEED + 1)
    raw = data_file("nvtx_mixed_raw.csv").read_bytes()
    details = data_file("nvtx_mixed_details.csv").read_bytes()
    cmdline = data_file("nvtx_mixed_full_cmdline.csv").read_bytes()[:20000]
    cmdline = cmdline[: cmdline.rfind(b"\n") + 1]
    structured = list(csv_structured(raw, details, cmdline))
    n = FUZZ_COUNTS["ncu-csv"] - len(structured)
    cases = [*structured, *byte_mutations(raw, r, n // 2), *byte_mutations(details + b"", r, n // 4),
             *byte_mutations(cmdline, r, n - n // 2 - n // 4)]
    assert len(cases) == FUZZ_COUNTS["ncu-csv"]
    failures = run_cases(tmp_path, ".csv", iter(cases), fuzz_tally, "ncu-csv")
    assert not failures, "\n".join(failures)


# ------------------------------------------------------------------------------------------- nsys SQLite
NSYS_SQL: list[tuple[str, list[str]]] = [
    ("all kernels end before they start", ["UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start - 100"]),
    ("some kernels end before they start",
     ["UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = start - 7 WHERE rowid % 3 = 0"]),
    ("NVTX ranges end before they start", ["UPDATE NVTX_EVENTS SET end = start - 1 WHERE eventType IN (59, 60)"]),
    ("runtime calls end before they start", ["UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET end = start - 1"]),
    ("memcpys end before they start", ["UPDATE CUPTI_ACTIVITY_KIND_MEMCPY SET end = start - 1"]),
    ("kernel names missing from StringIds",
     ["DELETE FROM StringIds WHERE id IN (SELECT demangledName FROM CUPTI_ACTIVITY_KIND_KERNEL)"]),
    ("NVTX texts missing from StringIds", ["DELETE FROM StringIds WHERE id IN (SELECT textId FROM NVTX_EVENTS)"]),
    ("runtime names missing", ["DELETE FROM StringIds WHERE id IN (SELECT nameId FROM CUPTI_ACTIVITY_KIND_RUNTIME)"]),
    ("StringIds emptied", ["DELETE FROM StringIds"]),
    ("StringIds dropped", ["DROP TABLE StringIds"]),
    ("kernel table dropped", ["DROP TABLE CUPTI_ACTIVITY_KIND_KERNEL"]),
    ("kernel table emptied", ["DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL"]),
    ("runtime table dropped", ["DROP TABLE CUPTI_ACTIVITY_KIND_RUNTIME"]),
    ("NVTX table dropped", ["DROP TABLE NVTX_EVENTS"]),
    ("ThreadNames dropped", ["DROP TABLE ThreadNames"]),
    ("meta data dropped", ["DROP TABLE META_DATA_EXPORT"]),
    ("TARGET_INFO_GPU emptied", ["DELETE FROM TARGET_INFO_GPU"]),
    ("NULL range ends", ["UPDATE NVTX_EVENTS SET end = NULL WHERE rowid % 2 = 0"]),
    ("text in number columns", ["UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = 'abc', end = 'x' WHERE rowid % 2 = 1"]),
    ("text in name ids", ["UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET demangledName = 'zz' WHERE rowid % 2 = 1"]),
    ("huge timestamps", ["UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET end = 9223372036854775807 WHERE rowid % 2 = 0"]),
    ("real timestamps", ["UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET start = start + 0.5"]),
    ("duplicate correlation ids", ["UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET correlationId = 1"]),
    ("NULL correlation ids", ["UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET correlationId = NULL"]),
    ("NULL thread ids", ["UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET globalTid = NULL",
                         "UPDATE NVTX_EVENTS SET globalTid = NULL"]),
    ("domains unnamed", ["DELETE FROM NVTX_EVENTS WHERE eventType = 75"]),
    ("odd NVTX event types", ["UPDATE NVTX_EVENTS SET eventType = 71 WHERE eventType = 59 AND rowid % 2 = 0"]),
    ("kernel name column dropped", ["ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN demangledName"]),
    ("kernel shortName column dropped", ["ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN shortName"]),
    ("NVTX text columns dropped", ["ALTER TABLE NVTX_EVENTS DROP COLUMN textId", "ALTER TABLE NVTX_EVENTS DROP "
                                                                                 "COLUMN text"]),
    ("runtime correlation column dropped", ["ALTER TABLE CUPTI_ACTIVITY_KIND_RUNTIME DROP COLUMN correlationId"]),
    ("mangled names all one", ["UPDATE CUPTI_ACTIVITY_KIND_KERNEL SET mangledName = demangledName"]),
    ("ThreadNames odd", ["UPDATE ThreadNames SET globalTid = 'x', nameId = -5"]),
    ("old export metadata", ["ALTER TABLE META_DATA_EXPORT RENAME TO EXPORT_META_DATA"]),
]


def test_fuzz_nsys_sqlite(data_file: Get, tmp_path: Path, fuzz_tally: dict[str, int]) -> None:
    r = random.Random(SEED + 2)
    seed_path = data_file("nvtx_mixed_nsys.sqlite")
    seed = seed_path.read_bytes()

    def structured() -> Iterator[Mutation]:
        for what, sqls in NSYS_SQL:
            db = tmp_path / "mut.sqlite"
            db.write_bytes(seed)
            c = sqlite3.connect(db)
            for q in sqls:
                c.execute(q)
            c.commit()
            c.close()
            yield what, db.read_bytes()

    page = int.from_bytes(seed[16:18], "big")
    n = FUZZ_COUNTS["nsys"] - len(NSYS_SQL)
    cases = [*structured(), ("header only", seed[:100]), ("first page only", seed[:page]),
             *byte_mutations(seed, r, n - 2, lo=100)]
    assert len(cases) == FUZZ_COUNTS["nsys"]
    failures = run_cases(tmp_path, ".sqlite", iter(cases), fuzz_tally, "nsys")
    assert not failures, "\n".join(failures)


# ------------------------------------------------------------------------------------------- summary, bench
def test_fuzz_summary_and_bench_json(data_file: Get, tmp_path: Path, fuzz_tally: dict[str, int]) -> None:
    r = random.Random(SEED + 3)
    s = inputs.read(data_file("nvtx_mixed_nsys.sqlite"), by_range=True)
    seed = s.to_json(indent=None).encode()
    d = json.loads(seed)
    structured: list[Mutation] = [
        ("deeply nested", b'{"schema": "profctl.summary/1", "kernels": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"),
        ("kernels not a list", json.dumps({**d, "kernels": 5}).encode()),
        ("kernels of strings", json.dumps({**d, "kernels": ["a", "b"]}).encode()),
        ("a kernel missing fields", json.dumps({**d, "kernels": [{"name": "k"}]}).encode()),
        ("count a string", json.dumps({**d, "kernels": [{**d["kernels"][0], "count": "x"}]}).encode()),
        ("NaN time", seed.replace(b'"total_ns": ', b'"total_ns": NaN, "t": ', 1)),
        ("bad class", json.dumps({**d, "kernels": [{**d["kernels"][0], "kernel_class": "attention"}]}).encode()),
        ("no kernels", json.dumps({**d, "kernels": []}).encode()),
        ("meta a list", json.dumps({**d, "meta": [1, 2]}).encode()),
        ("sources odd", json.dumps({**d, "sources": [{"tool": "x"}]}).encode()),
        ("ranges odd", json.dumps({**d, "ranges": [{"name": 5}]}).encode()),
        ("cpu_ops odd", json.dumps({**d, "cpu_ops": [{"name": "x"}]}).encode()),
        ("schema only", b'{"schema": "profctl.summary/1"}'),
    ]
    n = FUZZ_COUNTS["summary"] - len(structured)
    cases = [*structured, *byte_mutations(seed, r, n)]
    failures = run_cases(tmp_path, ".json", iter(cases), fuzz_tally, "summary")
    bench = data_file("bench_h100_s4096.json").read_bytes()
    bcases = [("deeply nested bench", b'[{"backend": "x", "status": "ok", "v": ' + b"[" * 100_000 + b"]" * 100_000
               + b"}]"), *byte_mutations(bench, r, FUZZ_COUNTS["bench"] - 1)]
    from profctl.readers import bench_json

    for i, (what, data) in enumerate(bcases):
        p = tmp_path / f"bench-{i}.json"
        p.write_bytes(data)
        try:
            rows = bench_json.read(p)
            assert isinstance(rows, list)
        except BadReport as e:
            assert "\n" not in e.one_line()
        except Exception as e:
            failures.append(f"bench #{i} ({what}): {type(e).__name__}: {str(e)[:300]}")
        fuzz_tally["bench"] = fuzz_tally.get("bench", 0) + 1
    assert not failures, "\n".join(failures)


# ------------------------------------------------------------------------------------------- ncu reports
_CHILD = r"""
import json, sys, traceback
from pathlib import Path
from profctl import inputs
from profctl.errors import BadReport
from profctl.errors import ReaderFault
for p in sys.argv[1:]:
    print(json.dumps({"file": p, "start": True}), flush=True)
    try:
        s = inputs.read(Path(p), by_range=True)
        s.to_json()
        empty_ok = bool(s.kernels) or bool(s.warnings)
        unnamed = [k.name for k in s.kernels if k.name.startswith("<unnamed launch")]
        result = "ok" if empty_ok and not unnamed else f"read as data: {unnamed[:2]}" if unnamed else "empty"
        print(json.dumps({"file": p, "result": result}), flush=True)
    except BadReport as e:
        line = e.one_line()
        fault = type(e).__name__ == "ReaderFault"
        print(json.dumps({"file": p, "result": "bad" if "\n" not in line and not fault else line}), flush=True)
    except Exception:
        print(json.dumps({"file": p, "result": "traceback", "tb": traceback.format_exc()[-600:]}), flush=True)
"""


def test_fuzz_ncu_report(data_file: Get, tmp_path: Path, fuzz_tally: dict[str, int]) -> None:
    pytest.importorskip("ncu_report")
    import struct

    r = random.Random(SEED + 4)
    seed = data_file("nvtx_mixed.ncu-rep").read_bytes()
    # the container's file header and the first blocks' headers (results, not the embedded cubins)
    (hlen,) = struct.unpack_from("<I", seed, 4)
    head = 8 + hlen + 70_000
    n = FUZZ_COUNTS["ncu-rep"]
    cases = [("block header truncated", seed[: 8 + hlen + 2]), ("file header only", seed[: 8 + hlen]),
             *byte_mutations(seed, r, n - 2, hi=head)]
    files = []
    for i, (what, data) in enumerate(cases):
        p = tmp_path / f"rep-{i}.ncu-rep"
        p.write_bytes(data)
        files.append((str(p), what))
    proc = subprocess.run([sys.executable, "-c", _CHILD, *(f for f, _ in files)], capture_output=True, text=True,
                          timeout=300)
    results: dict[str, dict[str, Any]] = {}
    last = None
    for line in proc.stdout.splitlines():
        rec = json.loads(line)
        if rec.get("start"):
            last = rec["file"]
        else:
            results[rec["file"]] = rec
    assert proc.returncode == 0, f"the reader crashed the process (exit {proc.returncode}) on {last}"
    bad = [f"{what}: {results.get(f)}" for f, what in files if results.get(f, {}).get("result") not in ("ok", "bad")]
    fuzz_tally["ncu-rep"] = len(files)
    assert not bad, "\n".join(bad)


def test_report_that_aborts_ncu_report_is_one_line(data_file: Get, tmp_path: Path) -> None:
    """Found by this fuzzing: one byte (offset 51750, 0 -> 1) in a result of nvtx_mixed.ncu-rep makes ncu_report
    abort the process (protobuf `Check failed: count >= 0`). The report is read in a child process, so this is a
    one-line BadReport, and profctl lives on."""
    pytest.importorskip("ncu_report")
    b = bytearray(data_file("nvtx_mixed.ncu-rep").read_bytes())
    assert b[51750] == 0
    b[51750] = 1
    p = tmp_path / "aborts.ncu-rep"
    p.write_bytes(bytes(b))
    with pytest.raises(BadReport, match="ncu_report stopped reading it") as e:
        inputs.read(p)
    assert "\n" not in e.value.one_line() and not isinstance(e.value, ReaderFault)


# ------------------------------------------------------------------------------------------- through the CLI
def test_cli_exit_5_on_damaged_reports(data_file: Get, tmp_path: Path) -> None:
    """`profctl report` on damaged reports of each format: exit 5, one line on stderr, no traceback."""
    from typer.testing import CliRunner

    from profctl.cli import app

    r = random.Random(SEED + 5)
    damaged = {
        "trace.json": b'{"traceEvents": [' + b"[" * 100_000,
        "raw.csv": data_file("nvtx_mixed_raw.csv").read_bytes().splitlines(keepends=True)[0],
        "export.sqlite": data_file("nvtx_mixed_nsys.sqlite").read_bytes()[:50_000],
        "summary.json": b'{"schema": "profctl.summary/1", "kernels": 5}',
        "report.ncu-rep": data_file("nvtx_mixed.ncu-rep").read_bytes()[:30_000],
        "trace.json.gz": gzip.compress(b'{"traceEvents": [{"ph": "X"')[:-5],
    }
    for name, data in damaged.items():
        p = tmp_path / name
        p.write_bytes(data if r.random() < 2 else b"")
        res = CliRunner().invoke(app, ["report", str(p), "--format", "json"])
        err = res.stderr.strip().splitlines()  # type: ignore[attr-defined]
        assert res.exit_code == 5, (name, res.exit_code, res.output)
        assert len(err) == 1 and err[0].startswith("profctl: error:"), (name, err)
        assert "Traceback" not in res.output


@pytest.fixture(scope="module")
def fuzz_tally() -> Iterator[dict[str, int]]:
    tally: dict[str, int] = {}
    yield tally
    print("\nmutated files read per reader:", ", ".join(f"{k} {v}" for k, v in sorted(tally.items())))
