"""Bad input to the nsys reader: each case is one BadReport line naming what is wrong, never a traceback."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from profctl.errors import BadReport
from profctl.readers import nsys_sqlite


@pytest.fixture
def attn(shared_fixture: Callable[[str], Path]) -> Path:
    return shared_fixture("attn.sqlite")


def _edit(src: Path, dst: Path, *sql: str) -> Path:
    """A modified copy (the fixture itself is never written)."""
    shutil.copyfile(src, dst)
    dst.chmod(0o644)
    c = sqlite3.connect(dst)
    for s in sql:
        c.execute(s)
    c.commit()
    c.close()
    return dst


def _err(path: Path, **kw: Any) -> str:
    with pytest.raises(BadReport) as ei:
        nsys_sqlite.read(path, **kw)
    line = ei.value.one_line()
    assert "\n" not in line
    return line


def test_not_sqlite(tmp_path: Path) -> None:
    p = tmp_path / "x.sqlite"
    p.write_text("hello, not a database\n")
    assert "not an SQLite file" in _err(p)


def test_sqlite_that_is_not_an_nsys_export(tmp_path: Path) -> None:
    p = tmp_path / "other.sqlite"
    c = sqlite3.connect(p)
    c.execute("CREATE TABLE people (name TEXT)")
    c.commit()
    c.close()
    assert "not an Nsight Systems export" in _err(p)


def test_export_without_cuda_trace_names_the_option(attn: Path, tmp_path: Path) -> None:
    p = _edit(attn, tmp_path / "nocuda.sqlite",
              *[f"DROP TABLE {t}" for t in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_RUNTIME",
                                            "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")],
              "DELETE FROM META_DATA_CAPTURE WHERE name = 'CAPTURE_EVENT_TYPE' AND value IN ('Cuda', 'CuBLAS', "
              "'CuDNN')")
    msg = _err(p)
    assert "without CUDA trace" in msg and "--trace=cuda" in msg and "traced: nvtx" in msg


def test_truncated_file(attn: Path, tmp_path: Path) -> None:
    p = tmp_path / "cut.sqlite"
    p.write_bytes(attn.read_bytes()[: attn.stat().st_size // 2])
    assert "truncated" in _err(p)


def test_truncated_below_header(tmp_path: Path, attn: Path) -> None:
    p = tmp_path / "tiny.sqlite"
    p.write_bytes(attn.read_bytes()[:40])
    assert "truncated" in _err(p)


def test_damaged_pages(attn: Path, tmp_path: Path) -> None:
    data = bytearray(attn.read_bytes())
    data[4096:len(data)] = b"\xff" * (len(data) - 4096)  # same size, garbage after the first page
    p = tmp_path / "garbage.sqlite"
    p.write_bytes(bytes(data))
    msg = _err(p)
    assert "SQLite file" in msg


def test_empty_capture_range(attn: Path, tmp_path: Path) -> None:
    p = _edit(attn, tmp_path / "empty.sqlite", "DELETE FROM CUPTI_ACTIVITY_KIND_KERNEL")
    assert "no GPU kernel ran inside the captured range" in _err(p)


def test_empty_measured_window(attn: Path, tmp_path: Path) -> None:
    """Kernels exist, but none was launched between cudaProfilerStart and cudaProfilerStop."""
    p = _edit(attn, tmp_path / "nowin.sqlite",
              "UPDATE CUPTI_ACTIVITY_KIND_RUNTIME SET start = start + 10000000000, end = end + 10000000000 "
              "WHERE nameId IN (SELECT id FROM StringIds WHERE value LIKE 'cudaLaunch%' OR value LIKE 'cuLaunch%')")
    assert "empty measured range" in _err(p, window="profiler-api")


def test_known_column_rename_is_mapped(attn: Path, tmp_path: Path) -> None:
    """An export that spells the kernel-name column `name` (and lacks the register column) reads the same."""
    p = _edit(attn, tmp_path / "renamed.sqlite",
              "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME COLUMN demangledName TO name",
              "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL DROP COLUMN registersPerThread")
    a = {k.name: (k.count, k.total_ns, k.med_ns) for k in nsys_sqlite.read(attn).kernels}
    b = {k.name: (k.count, k.total_ns, k.med_ns) for k in nsys_sqlite.read(p).kernels}
    assert a == b


def test_unknown_schema_names_the_missing_column(attn: Path, tmp_path: Path) -> None:
    p = _edit(attn, tmp_path / "future.sqlite",
              "ALTER TABLE CUPTI_ACTIVITY_KIND_KERNEL RENAME COLUMN start TO startNs")
    msg = _err(p)
    assert "CUPTI_ACTIVITY_KIND_KERNEL has no column 'start'" in msg and "2025.3.2.0" in msg


def test_nvtx_without_text_id_column(attn: Path, tmp_path: Path) -> None:
    """Older exports have NVTX text only (no textId): ranges still read, registered names just absent."""
    p = _edit(attn, tmp_path / "old_nvtx.sqlite", "ALTER TABLE NVTX_EVENTS DROP COLUMN textId")
    names = {r.name for r in nsys_sqlite.read(p).ranges}
    assert "sdpa_flash.fwd.it1" in names


def test_missing_file(tmp_path: Path) -> None:
    assert "no such file" in _err(tmp_path / "nope.sqlite")
