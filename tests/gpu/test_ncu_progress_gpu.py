"""Issue 31 for real: `profctl ncu` on a program that autotunes a Triton kernel (tests/data/programs/
autotune_triton.py: dozens of launches before the three that matter). While ncu runs profctl says what it has
profiled (from ncu's own progress lines) and, past what the recipe needs, how to narrow the run; --once
profiles each distinct kernel once. Clocks are never touched (--clock-control none)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from profctl import recipes
from profctl.pipelines import ncu_pipeline
from profctl.pipelines.targets import Program
from profctl.tools import ncu as tool

pytestmark = pytest.mark.gpu

ROOT = Path(__file__).resolve().parents[2]
PROG = ROOT / "tests" / "data" / "programs" / "autotune_triton.py"


def _ncu_or_skip() -> Path:
    try:
        return tool.find()
    except Exception as e:  # pragma: no cover - depends on the machine
        pytest.skip(f"ncu not available: {e}")


def test_an_autotuning_program_is_told_how_to_narrow_before_anyone_gives_up(tmp_path: Path) -> None:
    _ncu_or_skip()
    argv = [sys.executable, "-m", "profctl", "ncu", "--recipe", "speed-of-light", "--clock-control", "none",
            "--reports", str(tmp_path), "--", sys.executable, str(PROG)]
    p = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         start_new_session=True)
    err, deadline = b"", time.monotonic() + 240
    try:
        assert p.stderr is not None
        fd = p.stderr.fileno()
        os.set_blocking(fd, False)
        while time.monotonic() < deadline and p.poll() is None:
            try:
                err += os.read(fd, 65536)
            except BlockingIOError:
                pass
            if b"profctl: note: ncu has profiled" in err and err.endswith(b"\n"):
                break
            time.sleep(0.5)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGINT)
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
    text = err.decode("utf-8", errors="replace")
    line = next((ln for ln in text.splitlines() if ln.startswith("profctl: note: ncu has profiled")), None)
    assert line is not None, text[-2000:]
    assert "scale_add" in line and "--once" in line and "speed-of-light recipe" in line


def test_once_profiles_each_kernel_of_the_program_once_and_shows_each(tmp_path: Path) -> None:
    exe = _ncu_or_skip()
    seen: list[ncu_pipeline.NcuProgress] = []
    req = ncu_pipeline.NcuRequest(target=Program(command=(sys.executable, str(PROG)), cwd=ROOT),
                                  recipe=recipes.get("speed-of-light"), exe=exe, reports=tmp_path,
                                  clock_control="none", once=True)
    res = ncu_pipeline.run(req, on_progress=seen.append)
    launches = res.summary.meta["launches"]
    by_name: dict[str, int] = {}
    for ln in launches:  # ncu counts invocations per function name ("kernel"; templates share it)
        by_name[ln["kernel"]] = by_name.get(ln["kernel"], 0) + 1
    assert any("scale_add" in n for n in by_name) and set(by_name.values()) == {1}, by_name
    done = [p for p in seen if p.last is not None]
    assert done and done[-1].launches == len(launches)  # every launch in the report was shown as it ended
    assert sum(done[-1].counts.values()) == len(launches) and set(done[-1].counts.values()) == {1}
    assert all(p.last_s is not None and p.last_s >= 0 for p in done) and not any(p.advice for p in seen)
    m = res.summary.meta
    assert "--kernel-id" in m["ncu_argv"] and "::regex:.*:1" in m["ncu_argv"]
