"""`profctl doctor`: tools found (with their versions), GPU/driver, and problems with their fix."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl.cli import app
from profctl.tools import nsys as adapter


def _fake_nsys(tmp_path: Path) -> Path:
    """A stand-in executable that answers `--version` as nsys 2025.3.1 does (the real one is not installed)."""
    exe = tmp_path / "nsys"
    exe.write_text("#!/bin/sh\necho 'NVIDIA Nsight Systems version 2025.3.1.90-253135822126v0'\n")
    exe.chmod(0o755)
    return exe


def test_doctor_json_lists_nsys_from_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exe = _fake_nsys(tmp_path)
    monkeypatch.setenv("PROFCTL_NSYS", str(exe))
    r = CliRunner().invoke(app, ["doctor", "--format", "json"])
    d = json.loads(r.stdout)
    assert r.exit_code == (1 if d["problems"] else 0), r.output  # a problem is a non-zero exit
    nsys = next(t for t in d["tools"] if t["name"] == "nsys")
    assert nsys["path"] == str(exe) and nsys["version"] == "2025.3.1.90" and nsys["found_via"] == "$PROFCTL_NSYS"
    assert "driver" in d["gpu"] or d["problems"]


def test_doctor_env_may_name_a_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _fake_nsys(tmp_path)
    monkeypatch.setenv("PROFCTL_NSYS", str(tmp_path))
    assert adapter.find() == tmp_path / "nsys"


def test_doctor_reports_missing_nsys_with_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if any(c.how != "$PROFCTL_NSYS" for c in adapter.candidates()):
        pytest.skip("a real nsys is installed here")
    monkeypatch.delenv("PROFCTL_NSYS", raising=False)
    r = CliRunner().invoke(app, ["doctor"])
    assert r.exit_code == 1  # it found a problem: a script running `profctl doctor && ...` stops
    assert "nsys (Nsight Systems) was not found" in r.stdout and "PROFCTL_NSYS" in r.stdout


def test_doctor_bad_env_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROFCTL_NSYS", str(tmp_path / "missing" / "nsys"))
    r = CliRunner().invoke(app, ["doctor", "--json"])
    d = json.loads(r.stdout)
    assert any("PROFCTL_NSYS" in p and "is not an nsys executable" in p for p in d["problems"])


def test_ldd_output_parsing_names_libdw_fix() -> None:
    ldd = ("\tlinux-vdso.so.1 (0x00007ffd)\n\tlibdw.so.1 => not found\n"
           "\tlibc.so.6 => /lib/x86_64-linux-gnu/libc.so.6 (0x00007f)\n")
    missing = adapter.missing_libraries(ldd)
    assert missing == ["libdw.so.1"]
    assert "install libdw1" in adapter.describe_missing("QdstrmImporter", missing)


def test_version_parsing() -> None:
    assert adapter.parse_version("NVIDIA Nsight Systems version 2025.3.1.90-253135822126v0\n") == "2025.3.1.90"


def test_search_order_env_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    exe = _fake_nsys(tmp_path)
    other = tmp_path / "bin"
    other.mkdir()
    _fake_nsys(other)
    monkeypatch.setenv("PROFCTL_NSYS", str(exe))
    monkeypatch.setenv("PATH", str(other) + os.pathsep + os.environ.get("PATH", ""))
    cs = adapter.candidates()
    assert [c.how for c in cs[:2]] == ["$PROFCTL_NSYS", "PATH"]
    assert adapter.find() == exe
