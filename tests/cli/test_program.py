"""Profiling a user's own program: `profctl torch -- python SCRIPT.py ARGS` on the CPU (the real torch.profiler),
its ranges, argv and exit status; the errors every profiler command gives for a program it cannot run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl.cli import app

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "my_program.py"


def run(args: list[str], tmp_path: Path) -> tuple[int, str, str]:
    fake_ncu = tmp_path / "ncu"  # answers --version only: gets `profctl ncu` past finding ncu on this machine
    fake_ncu.write_text("#!/bin/sh\necho 'Version 2025.3.1.0'\n")
    fake_ncu.chmod(0o755)
    r = CliRunner().invoke(app, [args[0], "--reports", str(tmp_path / "runs"), *args[1:]],
                           env={"PROFCTL_NCU": str(fake_ncu), "PROFCTL_NSYS": str(fake_ncu)})
    return r.exit_code, r.stdout, r.stderr


def test_torch_profiles_a_python_program_with_its_own_ranges(tmp_path: Path) -> None:
    rc, out, err = run(["torch", "-f", "json", "--", "python", str(EXAMPLE), "--steps", "2", "--seqlen", "64"],
                       tmp_path)
    assert rc == 0, err
    s = json.loads(out)
    ranges = {r["name"]: r for r in s["ranges"]}
    assert {"step", "attention", "mlp", "loss", "warmup"} <= set(ranges)
    assert ranges["step"]["count"] == 2 and ranges["warmup"]["count"] == 1  # push/pop and start/end mirrored
    assert not s["kernels"]  # a CPU run: its ops are CPU ops (self times), not kernels
    flash = [k for k in s["cpu_ops"] if "flash_attention" in k["name"]]
    assert flash and {k["nvtx_range"] for k in flash} == {"warmup", "step/attention"}  # the CPU op, in its ranges
    (run_dir,) = (tmp_path / "runs").iterdir()
    m = json.loads((run_dir / "manifest.json").read_text())
    assert m["program"]["argv"][1:] == [str(EXAMPLE), "--steps", "2", "--seqlen", "64"]
    assert m["status"] == "complete" and (run_dir / "torch.log").is_file()
    assert "my_program: 2 steps" in (run_dir / "torch.log").read_text()  # the program's own output, in the log


def test_range_keeps_only_what_ran_inside_it(tmp_path: Path) -> None:
    rc, out, err = run(["torch", "-f", "json", "--range", "mlp", "--", "python", str(EXAMPLE), "--steps", "1",
                        "--seqlen", "64"], tmp_path)
    assert rc == 0, err
    ks = json.loads(out)["cpu_ops"]
    assert ks and all("mlp" in k["nvtx_range"].split("/") for k in ks)
    assert not any("flash_attention" in k["name"] for k in ks)


def test_a_domain_range_as_nsys_takes_it_selects_the_same_range_under_torch(tmp_path: Path) -> None:
    # issue 39 item 8: README's `--range myapp@attention` matched nothing under torch (its trace has no domains)
    rc, out, err = run(["torch", "-f", "json", "--range", "myapp@attention", "--", "python", str(EXAMPLE),
                        "--steps", "1", "--seqlen", "64"], tmp_path)
    assert rc == 0, err
    ks = json.loads(out)["cpu_ops"]
    assert ks and all("attention" in k["nvtx_range"].split("/") for k in ks)
    assert any("flash_attention" in k["name"] for k in ks)
    assert "records no NVTX domain" in err


def test_torch_profiles_python_dash_c(tmp_path: Path) -> None:
    # issue 39 item 10: `profctl torch -- python -c CODE` was refused as "not a Python program"
    code = ("import sys, torch\nwith torch.profiler.record_function('mine'):\n"
            "    torch.ones(64, 64) @ torch.ones(64, 64)\nprint('argv', sys.argv)")
    rc, out, err = run(["torch", "-f", "json", "--range", "mine", "--", "python", "-c", code, "x1"], tmp_path)
    assert rc == 0, err
    assert any("mm" in k["name"] for k in json.loads(out)["cpu_ops"])
    (run_dir,) = (tmp_path / "runs").iterdir()
    assert "argv ['-c', 'x1']" in (run_dir / "torch.log").read_text()  # sys.argv as `python -c` gives it


def test_an_interrupt_of_the_test_session_inside_a_command_stops_the_session(tmp_path: Path) -> None:
    """Issue 39 item 11: on the H200 a GPU test got "interrupted; what had finished is kept in ..." instead of its
    promised line: benchmarks/gpu.sh's `timeout -s INT` (330 s for GPU tests that take longer) sent SIGINT to
    pytest while the command ran in-process, profctl answered it (exit 130) and pytest went on with the rest. The
    same here: a program that interrupts the session running it. The GPU tests' conftest turns that exit into
    KeyboardInterrupt (tests/conftest.py, reraise_interrupt), so the session stops and says why."""
    import signal

    from tests.conftest import reraise_interrupt

    prog = tmp_path / "interrupts.py"
    prog.write_text("import os, signal, time\nos.kill(os.getppid(), signal.SIGINT)\ntime.sleep(60)\n")
    old = signal.signal(signal.SIGINT, signal.default_int_handler)  # a CI runner may start pytest with it ignored
    try:
        r = CliRunner().invoke(app, ["torch", "--reports", str(tmp_path / "runs"), "--", "python", str(prog)])
    finally:
        signal.signal(signal.SIGINT, old)
    assert r.exit_code == 130 and "interrupted; what had finished is kept in" in r.stderr  # the line seen on the GPU
    with pytest.raises(KeyboardInterrupt, match="interrupted while a profctl command ran"):
        reraise_interrupt(r)
    ok = CliRunner().invoke(app, ["recipes"])
    assert reraise_interrupt(ok) is ok


def test_a_range_that_matched_nothing_names_the_ranges_seen(tmp_path: Path) -> None:
    rc, _, err = run(["torch", "--range", "nosuch", "--", "python", str(EXAMPLE), "--steps", "1", "--seqlen", "32"],
                     tmp_path)
    assert rc != 0
    (line,) = err.strip().splitlines()
    assert "'nosuch'" in line and "step" in line and "attention" in line


def test_the_programs_failure_is_reported_and_its_trace_kept(tmp_path: Path) -> None:
    rc, out, err = run(["torch", "-f", "json", "--", "python", str(EXAMPLE), "--steps", "1", "--seqlen", "32",
                        "--exit-status", "3"], tmp_path)
    assert rc == 8
    assert "exited with status 3" in err.strip().splitlines()[-1]
    assert json.loads(out)["cpu_ops"]  # the summary of what ran before the exit


def test_a_program_that_fails_before_profiling_says_why(tmp_path: Path) -> None:
    """Its own error line (argparse's here), not the profiler's exit noise nor "a trace without events"."""
    rc, _, err = run(["torch", "--", "python", str(EXAMPLE), "--no-such-flag"], tmp_path)
    assert rc == 8
    (line,) = err.strip().splitlines()
    assert "status 2 before anything was profiled" in line and "unrecognized arguments: --no-such-flag" in line
    assert "torch.log" in line


def test_the_reason_a_log_gives_is_not_the_profilers_noise() -> None:
    from profctl.proc import last_line

    assert last_line("Traceback (most recent call last):\n  File 'x'\nValueError: bad shape\n"
                     "USDT:2026-11-23 SyncActivityProfilerHandler.cpp:59] profiler_stop\n") == "ValueError: bad shape"
    assert last_line("$ python x.py\nstep 1\nstep 2\n") == "step 2"
    assert last_line("") == "(no output)"


def test_a_program_module_runs_as_main(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg_prog"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "main.py").write_text("import sys, torch\nassert __name__ == '__main__'\n"
                                 "with torch.profiler.record_function('work'):\n    torch.ones(8).sum()\n"
                                 "sys.exit(int(sys.argv[1]))\n")
    import os

    cwd = os.getcwd()
    os.chdir(tmp_path)  # the program runs in the user's working directory
    try:
        rc, out, err = run(["torch", "-f", "json", "--", "python", "-m", "pkg_prog.main", "0"], tmp_path)
    finally:
        os.chdir(cwd)
    assert rc == 0, err
    assert "work" in {r["name"] for r in json.loads(out)["ranges"]}


@pytest.mark.parametrize(("cmd", "needle"), [
    (["nsys", "--", "no-such-program-x"], "no such executable"),
    (["ncu", "--", "no-such-program-x"], "no such executable"),
    (["torch", "--", "no-such-program-x"], "no such executable"),
    (["torch", "--", "ls"], "profiles Python programs"),
    (["torch", "--seqlen", "128", "--", "python", "x.py"], "--seqlen: workload options do not apply"),
    (["torch", "--range", "x"], "--range selects a range of your own program"),
])
def test_bad_programs_are_one_line_errors(tmp_path: Path, cmd: list[str], needle: str) -> None:
    rc, _, err = run(cmd, tmp_path)
    assert rc != 0
    lines = err.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0], err
