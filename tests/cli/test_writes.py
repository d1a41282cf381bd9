"""Writing where one cannot is one line naming the path, a non-zero exit and no half-written file: a read-only
--reports directory, an output option naming a directory, a full disk, a full standard output. And what profctl
writes has the mode of any file the user writes (0666 less the umask)."""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import stat
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl.cli import app
from tests.conftest import DATA, ROOT

BENCH = DATA / "bench_h100_s4096.json.gz"
WL = ["--device", "cpu", "--seqlen", "32", "--heads", "2", "--head-dim", "16", "--iters", "2", "--warmup", "0",
      "-b", "eager"]
TINY = [*WL, "--baseline", "none"]


def _without_dac_override() -> None:
    """In the child: drop CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH from the bounding set before exec, so a root
    test run meets permissions as a user does (PR_CAPBSET_DROP = 24; the caps are 1 and 2)."""
    if os.geteuid() != 0:
        return
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (1, 2):
        if libc.prctl(24, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _full_disk(limit: int) -> Callable[[], None]:
    """In the child: files may grow to `limit` bytes (RLIMIT_FSIZE), and a write past it fails with EFBIG instead
    of killing the process (SIGXFSZ ignored): what a full disk looks like to a writer."""
    def pre() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return pre


def profctl(*args: str, cwd: Path, pre: Callable[[], None] | None = None, stdout: object = subprocess.PIPE
            ) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "profctl", *args], cwd=cwd, env=env, preexec_fn=pre,
                          stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=300)


def one_line(err: str, *needles: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("profctl: note:")]
    assert len(lines) == 1, err
    assert lines[0].startswith("profctl: error:") and "Traceback" not in err, err
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def leftovers(d: Path) -> list[str]:
    return sorted(p.name for p in d.rglob("*") if p.name.endswith(".tmp"))


@pytest.fixture
def readonly(tmp_path: Path) -> Path:
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o555)
    yield d
    d.chmod(0o755)


@pytest.mark.parametrize("cmd", [["bench", *TINY, "-q"], ["torch", *WL]])
def test_readonly_reports_is_one_line(tmp_path: Path, readonly: Path, cmd: list[str]) -> None:
    p = profctl(*cmd, "--reports", str(readonly), cwd=tmp_path, pre=_without_dac_override)
    assert p.returncode != 0
    one_line(p.stderr, str(readonly), "cannot create a run directory")
    assert list(readonly.iterdir()) == []


def test_readonly_output_folder_is_one_line(tmp_path: Path, readonly: Path) -> None:
    out = readonly / "report.md"
    p = profctl("report", str(BENCH), "-f", "markdown", "-o", str(out), cwd=tmp_path, pre=_without_dac_override)
    assert p.returncode != 0
    one_line(p.stderr, str(out))
    assert not out.exists() and leftovers(readonly) == []


@pytest.mark.parametrize("args", [
    ["report", str(BENCH), "-f", "markdown", "-o", "{d}"],
    ["report", str(BENCH), "-f", "html", "--output", "{d}"],
    ["compare", str(BENCH), str(BENCH), "-o", "{d}"],
    ["bench", *TINY, "-f", "json", "-o", "{d}"],
    ["bench", *TINY, "--json", "{d}"],
    ["bench", *TINY, "--csv", "{d}"],
    ["bench", *TINY, "--markdown", "{d}"],
])
def test_output_naming_a_directory_fails_before_any_work(tmp_path: Path, args: list[str]) -> None:
    d = tmp_path / "outdir"
    d.mkdir()
    reports = tmp_path / "reports"
    res = CliRunner().invoke(app, [a.replace("{d}", str(d)) for a in args] + (
        ["--reports", str(reports)] if args[0] == "bench" else []))
    assert res.exit_code != 0
    one_line(res.stderr, str(d), "is a directory")
    assert not reports.exists()  # the check came before the sweep: no run was started
    assert list(d.iterdir()) == []


def test_two_outputs_to_one_place_is_one_line(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["bench", *TINY, "-f", "json", "--csv", "-", "--reports", str(tmp_path)])
    one_line(res.stderr, "-f", "--csv", "standard output")
    res = CliRunner().invoke(app, ["bench", *TINY, "-f", "json", "-o", str(tmp_path / "x"), "--markdown",
                                   str(tmp_path / "x"), "--reports", str(tmp_path)])
    one_line(res.stderr, "-o", "--markdown")


def test_full_disk_leaves_no_file(tmp_path: Path) -> None:
    out = tmp_path / "report.html"
    p = profctl("report", str(BENCH), "-f", "html", "-o", str(out), cwd=tmp_path, pre=_full_disk(20_000))
    assert p.returncode == 1
    one_line(p.stderr, str(out), "file too large")
    assert not out.exists() and leftovers(tmp_path) == []


def test_full_disk_for_standard_output_is_one_line(tmp_path: Path) -> None:
    with open(tmp_path / "out.json", "w") as f:
        p = profctl("report", str(BENCH), "-f", "json", cwd=tmp_path, pre=_full_disk(4_000), stdout=f)
    assert p.returncode == 1
    one_line(p.stderr, "standard output", "file too large")


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
def test_dev_full_is_one_line(tmp_path: Path) -> None:
    with open("/dev/full", "w") as f:
        p = profctl("report", str(BENCH), "-f", "markdown", cwd=tmp_path, stdout=f)
    assert p.returncode == 1
    one_line(p.stderr, "standard output", "no space left on device")


def test_closed_pipe_is_quiet(tmp_path: Path) -> None:
    """`profctl report ... | true`: the reader has closed the pipe before profctl writes (start-up takes a second;
    a reader that takes a few bytes first would let this small report fit in the pipe's buffer, and profctl would
    never meet the closed pipe); profctl stays quiet, exit 0."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.Popen([sys.executable, "-m", "profctl", "report", str(BENCH), "-f", "csv"], cwd=tmp_path,
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout is not None and p.stderr is not None
    try:
        p.stdout.close()
        p.wait(timeout=120)
        err = p.stderr.read()
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0 and "Traceback" not in err and "Error" not in err, err


def _modes(root: Path, names: set[str]) -> dict[str, int]:
    return {str(p.relative_to(root)): stat.S_IMODE(p.stat().st_mode) for p in root.rglob("*")
            if p.is_file() and p.name in names}


def test_run_files_have_the_umask_mode(tmp_path: Path) -> None:
    """Under umask 022 every file of a bench and a torch run, and every report written from them, is 0644."""
    old = os.umask(0o022)
    try:
        reports = tmp_path / "reports"
        r = CliRunner()
        res = r.invoke(app, ["bench", *TINY, "-q", "--reports", str(reports), "-f", "json", "-o",
                             str(tmp_path / "rows.json")])
        assert res.exit_code == 0, res.output
        res = r.invoke(app, ["torch", *WL, "-f", "json", "--reports", str(reports)])
        assert res.exit_code == 0, res.output
        res = r.invoke(app, ["report", str(reports), "-f", "html", "-o", str(tmp_path / "page.html")])
        assert res.exit_code == 0, res.output
    finally:
        os.umask(old)
    modes = _modes(tmp_path, {"rows.json", "page.html", "manifest.json", "bench.json", "summary.json"})
    assert len(modes) == 6, modes  # two manifests, bench.json, the torch summary, rows.json, the page
    assert set(modes.values()) == {0o644}, {k: oct(v) for k, v in modes.items()}


def test_reports_follow_another_umask(tmp_path: Path) -> None:
    old = os.umask(0o027)
    try:
        r = CliRunner()
        for fmt in ("html", "markdown", "csv", "json"):
            res = r.invoke(app, ["report", str(BENCH), "-f", fmt, "-o", str(tmp_path / f"page.{fmt}")])
            assert res.exit_code == 0, res.output
        res = r.invoke(app, ["compare", str(BENCH), str(BENCH), "-o", str(tmp_path / "cmp.txt")])
        assert res.exit_code == 0, res.output
    finally:
        os.umask(old)
    modes = _modes(tmp_path, {"page.html", "page.markdown", "page.csv", "page.json", "cmp.txt"})
    assert len(modes) == 5 and set(modes.values()) == {0o640}, {k: oct(v) for k, v in modes.items()}
    assert "profctl compare" in (tmp_path / "cmp.txt").read_text()  # a table written as text, not markdown


# ------------------------------------------------------------------------------------------ -o through (39.3)
def test_output_through_a_link_replaces_its_target_and_keeps_the_link(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "out.csv"
    target.write_text("old\n")
    link = tmp_path / "link.csv"
    link.symlink_to(target)
    p = profctl("report", str(BENCH), "-f", "csv", "-o", str(link), cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text().startswith("backend") or "," in target.read_text().splitlines()[0]
    assert target.read_text() != "old\n" and leftovers(tmp_path / "real") == []
    assert "is a link" in p.stderr


def test_output_to_a_fifo_is_streamed_to_its_reader(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.Popen([sys.executable, "-m", "profctl", "report", str(BENCH), "-f", "csv", "-o", str(fifo)],
                         cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    got: list[str] = []

    def read() -> None:  # blocks until profctl opens the FIFO for writing (forever, had it replaced the FIFO)
        with open(fifo, encoding="utf-8") as reader:
            got.append(reader.read())

    t = threading.Thread(target=read, daemon=True)
    t.start()
    try:
        assert p.wait(timeout=120) == 0
        t.join(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert got and got[0].count("\n") > 1 and "," in got[0], p.stderr
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and leftovers(tmp_path) == []


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="no /dev/full here")
def test_output_to_dev_full_is_one_line_and_leaves_the_device(tmp_path: Path) -> None:
    p = profctl("report", str(BENCH), "-f", "markdown", "-o", "/dev/full", cwd=tmp_path)
    assert p.returncode == 1
    one_line(p.stderr, "/dev/full", "no space left on device")
    assert stat.S_ISCHR(os.stat("/dev/full").st_mode)


def test_output_to_dev_null_and_dev_stdout_is_written_in_place(tmp_path: Path) -> None:
    p = profctl("report", str(BENCH), "-f", "csv", "-o", "/dev/null", cwd=tmp_path)
    assert p.returncode == 0 and stat.S_ISCHR(os.stat("/dev/null").st_mode), p.stderr
    p = profctl("report", str(BENCH), "-f", "csv", "-o", "/dev/stdout", cwd=tmp_path)
    assert p.returncode == 0 and p.stdout.count("\n") > 1 and "," in p.stdout, p.stderr
    assert "written to as it is" in p.stderr
