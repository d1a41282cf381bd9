"""`profctl bench --ab` (issue 22), real runs on the CPU: two identical functions give an interval around 0 and
no verdict of change; one doing twice the work is found and fails --fail-if-slower; one function under two
environment settings; bad options in one line; and `profctl show RUN --repro` scripts that bash reads and that
rerun the same cases."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from profctl import run_store
from profctl.cli import app
from tests.conftest import ROOT

FUNCTIONS = '''
import os
import torch


def attn_a(q, k, v, is_causal=False, scale=None, enable_gqa=False):
    return torch.softmax((q @ k.transpose(-2, -1)) * scale, dim=-1) @ v


def attn_b(q, k, v, is_causal=False, scale=None, enable_gqa=False):
    return torch.softmax((q @ k.transpose(-2, -1)) * scale, dim=-1) @ v


def attn_twice(q, k, v, is_causal=False, scale=None, enable_gqa=False):
    attn_a(q, k, v, is_causal, scale)
    return attn_a(q, k, v, is_causal, scale)


def attn_env(q, k, v, is_causal=False, scale=None, enable_gqa=False):
    for _ in range(int(os.environ.get("AB_TEST_REPS", "1")) - 1):
        attn_a(q, k, v, is_causal, scale)
    return attn_a(q, k, v, is_causal, scale)
'''
SHAPE = ["--device", "cpu", "-s", "256", "--heads", "4", "--head-dim", "32", "--warmup", "2"]


@pytest.fixture
def fns(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    # one intra-op thread: on a CPU shared with other jobs, a second thread waits on the scheduler for tens of ms
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    p = tmp_path / "fns.py"
    p.write_text(FUNCTIONS)
    return p


def _ab(store: Path, *args: str) -> tuple[int, dict[str, Any], Any]:
    r = CliRunner().invoke(app, ["bench", *SHAPE, "--reports", str(store), "-f", "json", *args])
    doc = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}
    return r.exit_code, doc, r


def test_identical_functions_give_an_interval_around_zero(fns: Path, tmp_path: Path) -> None:
    for _attempt in range(3):  # a shared CPU can be busy for a moment: at most two more tries
        code, doc, r = _ab(tmp_path / "r", "--ab", f"{fns}:attn_a,{fns}:attn_b", "--rounds", "30", "--iters", "10")
        assert code == 0, r.output
        (row,) = doc["result"]["rows"]
        assert row["verdict"] in ("unchanged", "inconclusive"), row
        if row["ci_lo"] <= 1.0 <= row["ci_hi"]:
            break
    assert row["ci_lo"] <= 1.0 <= row["ci_hi"], row
    assert row["method"] == "paired rounds" and row["n_base"] == 30 and row["noise_floor"] is not None
    assert doc["result"]["kind"] == "ab" and (row["backend_base"], row["backend_new"]) == (f"{fns}:attn_a",
                                                                                           f"{fns}:attn_b")
    (case,) = doc["cases"]
    assert len(case["rounds"]) == 30 and [r["order"] for r in case["rounds"][:2]] == ["AB", "BA"]
    assert all(len(r["a_ms"]) == 10 and len(r["b_ms"]) == 10 for r in case["rounds"])
    run = Path(r.stderr.strip().splitlines()[-1].split("run: ")[1])
    assert (run / "ab.json").is_file() and json.loads((run / "manifest.json").read_text())["kind"] == "ab"


def test_a_function_twice_as_slow_is_found_and_fails_the_gate(fns: Path, tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["bench", *SHAPE, "--reports", str(tmp_path), "--ab",
                                 f"{fns}:attn_a,{fns}:attn_twice", "--rounds", "10", "--iters", "5",
                                 "--fail-if-slower", "10%", "-q"])
    assert r.exit_code == 1, r.output
    (line,) = r.stdout.strip().splitlines()  # the one-line answer
    assert line.startswith(f"{fns}:attn_twice vs {fns}:attn_a, b1 s256 h4 d32 fp32 fwd: +") and line.endswith(
        ": slower") and "95% CI" in line and "noise floor" in line
    err = [x for x in r.stderr.splitlines() if x.startswith("profctl: error:")]
    assert len(err) == 1 and "regression beyond --fail-if-slower 10%" in err[0]


def test_one_function_under_two_environment_settings(fns: Path, tmp_path: Path) -> None:
    code, doc, r = _ab(tmp_path, "-b", f"{fns}:attn_env", "--ab-env", "AB_TEST_REPS=1|AB_TEST_REPS=2",
                       "--rounds", "10", "--iters", "5")
    assert code == 0, r.output
    (row,) = doc["result"]["rows"]
    assert row["verdict"] == "slower" and row["ratio"] > 1.5, row
    assert row["backend_base"].endswith("AB_TEST_REPS=1") and row["backend_new"].endswith("AB_TEST_REPS=2")
    assert "AB_TEST_REPS" not in os.environ


@pytest.mark.parametrize(("args", "needle"), [
    (["--ab", "eager"], "give two variants"),
    (["--ab", "eager,sdpa-math", "-b", "eager"], "--ab and -b contradict"),
    (["--ab", "eager,sdpa-math", "--ab-env", "X=1|X=2"], "--ab-env"),
    (["--ab-env", "X=1|X=2"], "exactly one --backend"),
    (["-b", "eager", "--ab-env", "X=1"], "separated by '|'"),
    (["-b", "eager", "--ab-env", "X=1|X=1"], "the same"),
    (["-b", "eager", "--ab-env", "X|Y=2"], "not VAR=VALUE"),
    (["--ab", "eager,sdpa-math", "--rounds", "2"], "--rounds 2"),
    (["--ab", "eager,sdpa-math", "--strict"], "--fail-if-slower"),
    (["--ab", "eager,sdpa-math", "--label", "x"], "--label"),
    (["--ab", "eager,sdpa-math", "--model", "gpt-tiny"], "--model"),
    (["--ab", "eager,sdpa-math", "--workers", "2"], "--workers"),
    (["--fail-if-slower", "5%"], "no --ab"),
    (["--rounds", "5"], "no --ab"),
    (["--ab", "eager,sdpa-math", "--fail-if-slower", "0.6"], "--fail-if-slower 0.6: a threshold needs its percent"),
    (["--ab", "eager,sdpa-math", "--threshold", "2"], "--threshold 2: a threshold needs its percent sign"),
    (["--ab", "eager,sdpa-math", "--threshold", "100%"], "--threshold 100%: must be more than 0%"),
])
def test_bad_ab_options_are_one_line(tmp_path: Path, args: list[str], needle: str) -> None:
    r = CliRunner().invoke(app, ["bench", "--device", "cpu", "--reports", str(tmp_path), *args])
    lines = [x for x in r.stderr.splitlines() if not x.startswith("profctl: note")]
    assert r.exit_code == 2 and len(lines) == 1 and needle in lines[0], r.output
    assert not list(tmp_path.iterdir())  # refused before any run directory


# ------------------------------------------------------------------------------------------------ repro
def _cases(run: Path) -> list[tuple[Any, ...]]:
    rows = json.loads((run / "bench.json").read_text())
    return sorted((r["backend"], r["seqlen_q"], r["heads"], r["head_dim"], r["dtype"], r["pass"]) for r in rows)


def test_repro_script_is_bash_and_reruns_the_same_cases(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("TORCH_SHOW_CPP_STACKTRACES", "0")  # a variable of interest the script must export again
    store = tmp_path / "runs"
    args = ["bench", "--device", "cpu", "-s", "64,128", "--heads", "2", "--head-dim", "16", "-b", "eager,sdpa-math",
            "--iters", "3", "--warmup", "1", "-q", "--reports", str(store)]
    monkeypatch.setattr(sys, "argv", ["profctl", *args])  # what the manifest records as the command line
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    (run,) = list(store.iterdir())
    script = tmp_path / "again.sh"
    r = CliRunner().invoke(app, ["show", run.name, "--reports", str(store), "--repro", "-o", str(script)])
    assert r.exit_code == 0, r.output
    assert os.access(script, os.X_OK)
    text = script.read_text()
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    assert "export OMP_NUM_THREADS=1" in text and "export TORCH_SHOW_CPP_STACKTRACES=0" in text
    assert "# GPU: none (a CPU run)" in text and "PyTorch" in text and "exec $PROFCTL bench --device cpu" in text
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "TORCH_SHOW_CPP_STACKTRACES")}
    env.update(PROFCTL=f"{sys.executable} -m profctl", PYTHON=sys.executable)
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "repro: warning" not in done.stderr  # same profctl, same PyTorch, no GPU on either side
    again = [d for d in store.iterdir() if d != run]
    assert len(again) == 1 and _cases(again[0]) == _cases(run)
    m = json.loads((again[0] / "manifest.json").read_text())
    assert m["env"]["OMP_NUM_THREADS"] == "1" and m["cwd"] == json.loads((run / "manifest.json").read_text())["cwd"]


def test_an_a_a_run_says_so(tmp_path: Path) -> None:
    """`--ab X,X` (an A/A run, which measures noise) is allowed and said, as `compare X X` warns."""
    r = CliRunner().invoke(app, ["bench", *SHAPE, "--ab", "eager,eager", "--rounds", "5", "--iters", "2",
                                 "--reports", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert "warning: --ab eager,eager: A and B are the same variant" in r.stderr


def test_a_repro_script_without_profctl_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 29 item 10: a repro script run where profctl is not on PATH failed with `exec: profctl: ... Is a
    directory` (bash found the profctl/ source folder through a '.' in PATH). It runs the profctl its Python
    imports, saying so, or says in one line what to do (exit 127); the version it checks is the profctl that
    runs."""
    monkeypatch.chdir(ROOT)  # the run's folder holds a profctl/ folder, as a checkout does
    run = run_store.new_run("bench", root=tmp_path, argv=["profctl", "recipes", "-f", "csv"], env=False)
    run_store.finish(run, "complete")
    script = tmp_path / "again.sh"
    r = CliRunner().invoke(app, ["show", str(run), "--repro", "-o", str(script)])
    assert r.exit_code == 0, r.output
    env = {"PATH": "/usr/bin:/bin:.", "HOME": os.environ.get("HOME", "/tmp"), "PYTHON": sys.executable}
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "Is a directory" not in done.stderr and "tensor-core" in done.stdout
    assert f"repro: warning: profctl is not on PATH: running {sys.executable} -m profctl" in done.stderr
    assert "profctl none here" not in done.stderr  # the version is asked of the profctl that runs
    env["PYTHON"] = str(tmp_path / "no-python")
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert done.returncode == 127, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("repro: error: profctl is not on PATH") and "source .venv/bin/activate" in line


def test_the_repro_hint_is_a_command_a_shell_runs_as_printed(tmp_path: Path) -> None:
    """Issue 39 item 10: the hint `bash PATH` printed a path with spaces unquoted (bash read it as two words)."""
    import re
    import shlex

    run = run_store.new_run("bench", root=tmp_path, argv=["profctl", "recipes", "-f", "csv"], env=False)
    run_store.finish(run, "complete")
    script = tmp_path / "my scripts" / "again it.sh"
    script.parent.mkdir()
    r = CliRunner().invoke(app, ["show", str(run), "--repro", "-o", str(script)])
    assert r.exit_code == 0, r.output
    m = re.search(r"\(bash (.*?); PROFCTL=", r.stderr)
    assert m and shlex.split(m.group(1)) == [str(script)], r.stderr
    # the printed words, read by bash as a user pasting them would (an argument list to bash -c)
    done = subprocess.run(["bash", "-c", f"bash -n {m.group(1)}"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr  # the printed command, pasted into a shell, finds the script


def test_repro_of_an_ab_run_and_bad_requests(fns: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    args = ["--ab", f"{fns}:attn_a,{fns}:attn_b", "--rounds", "5", "--iters", "2"]
    monkeypatch.setattr(sys, "argv", ["profctl", "bench", *SHAPE, *args])
    code, _, r = _ab(tmp_path / "runs", *args)
    assert code == 0, r.output
    (run,) = list((tmp_path / "runs").iterdir())
    out = CliRunner().invoke(app, ["show", str(run), "--repro", "-o", "-"])
    assert out.exit_code == 0 and out.stdout.startswith("#!/usr/bin/env bash")
    assert subprocess.run(["bash", "-n"], input=out.stdout, text=True).returncode == 0
    assert "--ab " in out.stdout and "(ab, complete)" in out.stdout
    for args, needle in ((["-o", str(tmp_path / "x.sh")], "no --repro"), (["--repro", "-f", "json"], "--repro")):
        bad = CliRunner().invoke(app, ["show", str(run), *args])
        assert bad.exit_code == 2 and needle in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
