"""`profctl proton` where it cannot record: no GPU here, a backend without scopes, Proton missing or too old, a
program that is not Python -- each one line and a non-zero exit, before anything runs."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl.cli import app
from profctl.errors import ToolFailed, ToolNotFound
from profctl.tools import proton as tool
from tests.conftest import _has_cuda

needs_no_gpu = pytest.mark.skipif(_has_cuda(), reason="checks the answer on a machine without a GPU")


def _one_error(output: str) -> str:
    errors = [ln for ln in output.splitlines() if ln.startswith("profctl: error:")]
    assert len(errors) == 1 and "Traceback" not in output, output
    return errors[0]


@needs_no_gpu
def test_no_gpu_here_is_one_line(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["proton", "-b", "triton", "-s", "256", "--dtype", "bf16", "--reports",
                                 str(tmp_path)])
    # refused up front, in proton's words (what it needs, what to do instead), not the backend's: Triton's CPU
    # interpreter would time the kernel, and proton would then refuse it (issue 48.3)
    assert r.exit_code == 2
    line = _one_error(r.output)
    assert "records on a GPU" in line and "profctl report" in line and "TRITON_INTERPRET" not in line, line
    assert not any(tmp_path.iterdir())  # no run directory for a run that cannot happen


@pytest.mark.parametrize(("args", "words"), [
    (["--buffer", "texture"], "--buffer 'texture'"),
    (["--granularity", "block"], "--granularity 'block'"),
    (["--clock", "16"], "--clock 16"),
    (["--warps", "0,x"], "--warps '0,x'"),
    (["--data", "csv"], "--data 'csv'"),
    (["-f", "csv"], "unknown format 'csv'"),
    (["--ctas", "0"], "--ctas '0'"),
    (["--ctas", "some"], "--ctas 'some'"),
    (["--ctas", "8", "--data", "tree"], "--ctas picks the CTAs of a timeline"),
])
def test_bad_options_are_refused_first(tmp_path: Path, args: list[str], words: str) -> None:
    r = CliRunner().invoke(app, ["proton", *args, "--reports", str(tmp_path)])
    assert r.exit_code == 2
    assert words in _one_error(r.output)


def test_overhead_is_for_the_builtin_forward(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["proton", "--overhead", "5", "--reports", str(tmp_path), "--", "python", "x.py"])
    assert r.exit_code == 2 and "--overhead" in _one_error(r.output)


def _fake_triton(root: Path, version: str, profiler: str | None) -> Path:
    """A `triton` package of another version on PYTHONPATH: `profiler` is its triton/profiler/language.py (None:
    no profiler package at all)."""
    pkg = root / "triton"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text(f"__version__ = {version!r}\n")
    if profiler is not None:
        (pkg / "profiler").mkdir()
        (pkg / "profiler" / "__init__.py").write_text("class mode:\n    pass\n")
        (pkg / "profiler" / "language.py").write_text(profiler)
    return root


def test_proton_missing_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(_fake_triton(tmp_path, "2.0.0", None)))
    with pytest.raises(ToolNotFound, match=r"Proton \(triton\.profiler\) cannot be imported with Triton 2\.0\.0") as e:
        tool.check(sys.executable)
    assert "\n" not in e.value.one_line()


def test_proton_too_old_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", str(_fake_triton(tmp_path, "3.1.0", "def scope(name):\n    pass\n")))
    with pytest.raises(ToolFailed, match=r"Triton 3\.1\.0's Proton is too old") as e:
        tool.check(sys.executable)
    assert "\n" not in e.value.one_line()


def test_triton_missing_is_one_line(tmp_path: Path) -> None:
    bare = Path("/usr/bin/python3")
    if not bare.exists():
        pytest.skip("no interpreter without Triton here")
    with pytest.raises(ToolNotFound, match="Triton is not installed"):
        tool.check(str(bare))


def test_this_tritons_proton_passes() -> None:
    pytest.importorskip("triton.profiler.language")
    assert tool.check(sys.executable)


def test_a_compile_failure_in_the_log_reads_as_one_line() -> None:
    import gzip

    from tests.conftest import DATA

    with gzip.open(DATA / "proton" / "warpgroup.log.gz", "rt") as f:
        said = tool.log_problem(f.read())
    assert said is not None and "granularity warp_group" in said
