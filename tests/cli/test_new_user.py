"""What a new user broke after the quickstart (issue 21), class by class, on data of our own: a wrong function and
a failing point under `--strict -q` (3), model options checked up front (4), memory a point cannot have as `oom`
rows naming the estimate (5), a failing program's own error (6), summary lines that count (7), docs and behaviour
that agree (8), record_function ranges for nsys and ncu (9; the GPU half is tests/gpu/test_record_function_nvtx_gpu.py)
and host memory on CPU rows (10). Classes 1 and 2 (every mix of runs, a program's report) are in
tests/cli/test_run_store_kinds.py."""

from __future__ import annotations

import json
import re
import resource
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl import run_store
from profctl.cli import app
from tests.cli.test_writes import _without_dac_override, one_line, profctl
from tests.conftest import DATA, H100, ROOT

BENCH = DATA / "bench_h100_s4096.json.gz"
SMALL = ["--device", "cpu", "-s", "32", "--heads", "2", "-d", "16", "-n", "4", "--warmup", "0"]

WRONG = """
import torch

def attention(q, k, v, is_causal=False, scale=None, enable_gqa=False):
    s = (q @ k.transpose(-2, -1)) * (scale if scale is not None else q.shape[-1] ** -0.5)
    return torch.softmax(s, -1) @ v * 1.5
"""


def invoke(args: list[str], env: dict[str, str] | None = None) -> tuple[int, str, str]:
    r = CliRunner().invoke(app, args, env=env)
    assert "Traceback" not in r.output, r.output
    return r.exit_code, r.stdout, r.stderr


# ------------------------------------------------------------------------------------------- 3: --strict, -q
@pytest.fixture
def mine(tmp_path: Path) -> str:
    """A function of our own that computes the wrong thing (1.5x attention)."""
    (tmp_path / "mine.py").write_text(WRONG)
    return f"{tmp_path / 'mine.py'}:attention"


def test_quiet_never_hides_a_wrong_result_or_a_failed_point(tmp_path: Path, mine: str) -> None:
    rc, out, err = invoke(["bench", *SMALL, "--reports", str(tmp_path), "-q", "-b", f"{mine},sdpa-math", "-f",
                           "json"], {"PROFCTL_FAULT": "crash:sdpa-math"})
    assert rc == 0, err  # one point ran (wrongly): without --strict that is not a failure
    assert "wrong result: mine.attention b1 s32 h2 d16 fp32: relative error" in err
    assert "failed: sdpa-math b1 s32 h2 d16 fp32 fwd: crashed: workload process died" in err
    row = next(r for r in json.loads(out) if r["backend"] == "mine.attention")
    assert row["check"] == "fail"
    # class 10 on the same rows: a CPU row's memory is the host's peak over its measured iterations
    assert row["peak_host_mem_bytes"] > 50 * 2**20 and row["peak_mem_bytes"] == row["peak_host_mem_bytes"]
    assert row["peak_mem_where"] == "host"


def test_strict_fails_on_a_failed_point(tmp_path: Path, mine: str) -> None:
    rc, _, err = invoke(["bench", *SMALL, "--reports", str(tmp_path), "-q", "-b", f"{mine},sdpa-math", "--strict"],
                        {"PROFCTL_FAULT": "crash:sdpa-math"})
    assert rc == 1 and "a point failed: sdpa-math" in err, err


def test_strict_fails_on_a_wrong_result(tmp_path: Path, mine: str) -> None:
    rc, _, err = invoke(["bench", *SMALL, "--reports", str(tmp_path), "-q", "-b", mine, "--baseline", "none",
                         "--strict"])
    assert rc == 1 and "--strict: a wrong result: mine.attention" in err, err


def test_a_cpu_table_shows_host_memory(tmp_path: Path) -> None:
    rc, out, err = invoke(["bench", *SMALL, "-b", "eager", "--baseline", "none", "--reports", str(tmp_path)])
    assert rc == 0, err
    row = next(ln for ln in out.splitlines() if ln.startswith("│ eager"))
    assert re.search(r"\d+ MiB \(host\)", row), out


# ------------------------------------------------------------------------------------------- 4: model options
@pytest.mark.parametrize(("args", "says"), [
    (["--kv-heads", "3"], "--kv-heads 3: gpt-tiny has 4 query heads; --kv-heads must divide them (1, 2, 4)"),
    (["--kv-heads", "8"], "--kv-heads 8: gpt-tiny has 4 query heads"),
    (["--layers", "4"], "--layers 4: gpt-tiny has 2 layers"),
    (["-s", "200"], "gpt-tiny has 128 learned positions; -s 200 train needs 200: no point of gpt-tiny can run"),
    (["--mode", "decode", "-s", "128"], "-s 128 decode needs 129"),
    (["--memory-limit", "0"], "--memory-limit must be positive"),
    (["--batch", "0"], "--batch"),
])
def test_model_options_are_checked_before_anything_runs(tmp_path: Path, args: list[str], says: str) -> None:
    """The attention path refused such mistakes up front; the model path crashed both points and left the
    ValueError in workload.log."""
    rc, _, err = invoke(["bench", "--model", "gpt-tiny", "--device", "cpu", *args, "--reports", str(tmp_path)])
    assert rc == 2
    assert says in one_line(err)
    assert not list(tmp_path.iterdir())  # nothing ran, no run directory


def test_the_checks_know_the_presets() -> None:
    from profctl.model_spec import MODEL_PRESETS, PRESET_LIMITS
    from profctl.workloads.models.presets import PRESETS

    assert set(PRESET_LIMITS) == set(MODEL_PRESETS) <= set(PRESETS)
    for name, (layers, heads, positions) in PRESET_LIMITS.items():
        cfg = PRESETS[name]
        assert (cfg.layers, cfg.heads) == (layers, heads)
        assert positions == (cfg.max_seqlen if cfg.positions == "learned" else None)


# ------------------------------------------------------------------------------------------- 5: memory
def test_a_point_that_cannot_fit_is_an_oom_row_naming_its_estimate(tmp_path: Path) -> None:
    """Eager at seqlen 200000 needs terabytes of scores: refused before allocating, not an allocator error."""
    rc, out, err = invoke(["bench", "--device", "cpu", "-s", "200000", "--heads", "1", "-d", "16", "-n", "1",
                           "--warmup", "0", "-b", "eager", "--baseline", "none", "-f", "json", "--reports",
                           str(tmp_path)])
    assert rc == 1 and "no point ran" in err
    (row,) = json.loads(out)
    assert row["status"] == "oom" and row["reason"].startswith("refused before allocating: it needs about")
    assert "scores" in row["reason"] and "GiB" in row["reason"] and row["estimate_bytes"] > 100 * 2**30


def test_a_small_memory_limit_is_said_in_a_unit_that_does_not_read_zero(tmp_path: Path) -> None:
    """Issue 39 item 10: `--memory-limit 0.001` refused a point that "needs about 0.00 GiB ... more than the 0.00
    GiB of --memory-limit"; under a hundredth of a GiB the amounts are MiB."""
    _, out, _ = invoke(["bench", "--device", "cpu", "-s", "256", "--heads", "4", "-d", "64", "-n", "1", "--warmup",
                        "0", "-b", "eager", "--baseline", "none", "--memory-limit", "0.001", "-f", "json",
                        "--reports", str(tmp_path)])
    (row,) = json.loads(out)
    assert row["status"] == "oom" and "0.00 " not in row["reason"], row["reason"]
    assert re.search(r"needs about \d+\.\d\d MiB .* more than the 1\.02 MiB of --memory-limit", row["reason"])


def test_a_child_killed_while_over_its_memory_is_oom_naming_the_estimate(tmp_path: Path) -> None:
    """SIGKILL during a point (as the kernel's out-of-memory killer sends it; PROFCTL_FAULT sends it here, nothing
    is allocated) is `oom` when the point's estimate was at least half the memory it had (here --memory-limit),
    and the sweep goes on."""
    rc, out, err = invoke(["bench", "--device", "cpu", "-s", "1024", "--heads", "8", "-d", "16", "-n", "2",
                           "--warmup", "0", "-b", "eager,sdpa-math", "--baseline", "none", "--memory-limit", "0.1",
                           "-f", "json", "--reports", str(tmp_path)], {"PROFCTL_FAULT": "sigkill:eager"})
    assert rc == 0, err
    eager, math = json.loads(out)
    assert eager["status"] == "oom", eager
    assert "killed by the system (SIGKILL)" in eager["reason"] and "estimate is 0.08 GiB" in eager["reason"]
    assert "0.10 GiB of --memory-limit" in eager["reason"]
    assert math["status"] == "ok"


def test_a_sigkill_unrelated_to_memory_stays_a_crash() -> None:
    from profctl import memory

    assert memory.killed_for_memory({"estimate_bytes": 10, "available_bytes": 2**30}) is None
    assert memory.killed_for_memory(None) is None
    assert "out of memory" in (memory.killed_for_memory({"estimate_bytes": 600, "available_bytes": 1000}) or "")


def test_a_model_too_big_for_the_address_space_is_refused_at_once(tmp_path: Path) -> None:
    """`bench --model llama-7b --layers 4 --batch 2 -s 4096` on a CPU allocated until the kernel killed it; under
    an 8 GiB address-space cap (ulimit -v: a cap that works without cgroups) it is an oom row at once."""
    def cap() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (8 * 2**30, 8 * 2**30))

    p = profctl("bench", "--model", "llama-7b", "--layers", "4", "--batch", "2", "-s", "4096", "-b", "sdpa-flash",
                "--baseline", "none", "--device", "cpu", "-f", "json", "--reports", str(tmp_path), cwd=tmp_path,
                pre=cap)
    assert p.returncode == 1, p.stderr
    (row,) = json.loads(p.stdout)
    assert row["status"] == "oom" and "24.78 GiB" in row["reason"], row["reason"]
    assert "address-space limit (ulimit -v)" in row["reason"] or "host memory" in row["reason"]


def test_host_budget_reads_an_address_space_cap() -> None:
    code = ("import resource; resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30)); "
            "from profctl import memory; b = memory.host_budget(); print(b.bytes, b.what)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True).stdout
    have, what = out.split(" ", 1)
    assert int(have) < 3 * 2**30 and ("ulimit -v" in what or "host memory" in what)


def test_a_cpu_allocator_failure_is_oom() -> None:
    import torch

    from profctl.workloads.backends import classify_failure

    with pytest.raises(RuntimeError) as e:
        torch.empty(2**40, dtype=torch.float32)  # 4 TiB: refused by the allocator at once, nothing touched
    assert classify_failure(e.value, [])[0] == "oom"


# ------------------------------------------------------------------------------------------- 6: your program
def test_a_failing_program_shows_its_own_error_and_the_log(tmp_path: Path) -> None:
    (tmp_path / "raises.py").write_text("def step():\n    raise RuntimeError('shape mismatch 3 vs 4')\n\n\nstep()\n")
    rc, _, err = invoke(["torch", "--reports", str(tmp_path / "runs"), "--", "python", str(tmp_path / "raises.py")])
    assert rc == 8, err
    assert 'raises.py", line 2, in step' in err and "pyprofile.py" not in err  # its frames, not the wrapper's
    (line,) = [ln for ln in err.splitlines() if ln.startswith("profctl: error:")]
    assert re.search(r"status 1\b.*: RuntimeError: shape mismatch 3 vs 4", line) and "(log: " in line
    assert "torch.log" in line


@pytest.mark.parametrize("cmd", ["torch", "nsys", "ncu"])
def test_nothing_after_the_double_dash_is_an_error(tmp_path: Path, cmd: str) -> None:
    rc, _, err = invoke([cmd, "--reports", str(tmp_path), "--"])
    assert rc == 2 and "nothing after '--'" in one_line(err)


# ------------------------------------------------------------------------------------------- 7: counts
def test_the_summary_line_counts_the_planned_points() -> None:
    from profctl.pipelines.bench_pipeline import BenchResult
    from profctl.render.bench_view import what_ran
    from profctl.schema.bench import BenchRow

    row = {"backend": "eager", "batch": 1, "seqlen_q": 64, "seqlen_kv": 64, "heads": 2, "kv_heads": 2,
           "head_dim": 16, "dtype": "fp32", "causal": False, "pass": "fwd", "device": "cpu", "status": "ok"}
    rows = [BenchRow(row, seqlen_q=s, seqlen_kv=s) for s in (64, 128, 256)]
    got = what_ran(BenchResult(run_dir=Path("r"), rows=rows, points=4, interrupted=True), ["eager"])
    assert got[0] == "ran eager on cpu: 3 of 4 points (3 shapes, fwd; 1 not finished)"
    got = what_ran(BenchResult(run_dir=Path("r"), rows=[], points=4, interrupted=True), ["eager"])
    assert got[0] == "ran nothing on cpu: 0 of 4 points (none finished)"


# ------------------------------------------------------------------------------------------- 8: docs and behaviour
def test_an_output_that_cannot_be_written_exits_2_as_documented(tmp_path: Path) -> None:
    rc, _, err = invoke(["report", str(BENCH), "-f", "json", "-o", str(tmp_path)])
    assert rc == 2 and "is a directory" in one_line(err)
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        p = profctl("report", str(BENCH), "-f", "json", "-o", str(ro / "x.json"), cwd=tmp_path,
                    pre=_without_dac_override)
    finally:
        ro.chmod(0o755)
    assert p.returncode == 2, p.stderr
    one_line(p.stderr, str(ro / "x.json"))


def test_an_output_in_a_new_folder_is_said(tmp_path: Path) -> None:
    out = tmp_path / "new" / "dir" / "x.json"
    rc, _, err = invoke(["report", str(BENCH), "-f", "json", "-o", str(out)])
    assert rc == 0 and out.is_file()
    assert f"-o {out}: the folder {tmp_path / 'new'} does not exist; it will be made" in err


def test_piped_tables_keep_one_row_per_line(tmp_path: Path) -> None:
    """Long NVTX paths in a piped table: every row on one line (a wrapped row has an empty first cell)."""
    rc, out, _ = invoke(["report", str(DATA / "nsys_profctl_fwdbwd.sqlite.gz"), "--by-range"])
    assert rc == 0
    rows = [ln for ln in out.splitlines() if ln.startswith("│")]
    assert rows and not [ln for ln in rows if re.match(r"^│\s+│", ln)], out[:3000]
    assert any("/measure/" in ln for ln in rows)


def test_look_alike_kernel_rows_get_footnotes() -> None:
    rc, out, _ = invoke(["report", str(H100 / "attn.sqlite.gz"), "--limit", "8"])
    assert rc == 0
    marks = re.findall(r"elementwise_kernel \[(\d+)\]", out)
    assert len(marks) >= 2 and len(set(marks)) == len(marks)
    for m in marks:
        assert re.search(rf"^\s+\[{m}\] void at::native::elementwise_kernel<", out, re.M)


def test_timing_spread_warnings_are_one_line() -> None:
    from profctl.render.bench_view import noise_lines
    from profctl.schema.bench import BenchRow

    rows = [BenchRow(backend=f"b{i}", model="gpt-tiny", workload="model", mode="train", batch=1, seqlen=64,
                     dtype="fp32", status="ok", iqr_ratio=0.2 + i / 100, noise_warning="timings spread: ...")
            for i in range(7)]
    (line,) = noise_lines(rows)
    assert line.startswith("b0 gpt-tiny train b1 s64 fp32 and 6 more of the 7 points") and "worst: b6" in line
    assert "timings spread" in line
    assert len(noise_lines(rows[:4])) == 4  # a few are said one by one


def test_show_marks_a_cut_command_line(tmp_path: Path) -> None:
    d = run_store.new_run("nsys", root=tmp_path, argv=["profctl", "nsys"])
    run_store.record_tool(d, "nsys", ["nsys", "profile", *[f"--arg{i}=value" for i in range(60)]], version="x")
    run_store.finish(d, "complete")
    rc, out, _ = invoke(["show", str(d), "-f", "markdown"])
    assert rc == 0
    line = next(ln for ln in out.splitlines() if "tool nsys" in ln)
    assert "…" in line and "--arg59" not in line


def test_help_says_what_the_options_take() -> None:
    from typer.main import get_command

    cli = get_command(app)
    bench = cli.commands["bench"]  # type: ignore[attr-defined]
    ctx = bench.make_context("bench", [], resilient_parsing=True)
    text = bench.get_help(ctx)
    assert "<bool>" not in text  # a flag takes no value (--quiet true is refused)
    backend = next(p for p in bench.params if p.name == "backend")
    assert "triton" in backend.help and "path/file.py:fn" in backend.help
    helps = {name: next(p.help for p in c.params if p.name == "reports")
             for name, c in cli.commands.items() if any(p.name == "reports" for p in c.params)}  # type: ignore
    assert len(helps) >= 8 and all(h.startswith(helps["bench"]) for h in helps.values()), helps


# ------------------------------------------------------------------------------------------- 9: record_function
def test_record_function_ranges_are_pushed_as_nvtx_ranges() -> None:
    """The wrapper patches record_function (context manager and decorator) to push and pop an NVTX range of its
    name; in a child process, so this test process keeps the real record_function. (The ranges reaching nsys and
    ncu is tests/gpu/test_record_function_nvtx_gpu.py.)"""
    code = """
calls = []
from profctl.workloads import rfnvtx
rfnvtx.install(lambda n: calls.append(("push", n)), lambda: calls.append(("pop",)))
from torch.profiler import record_function
with record_function("alpha"):
    with record_function("beta"):
        pass
@record_function("step")
def f():
    return 1
f()
print(calls)
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == str([("push", "alpha"), ("push", "beta"), ("pop",), ("pop",), ("push", "step"),
                                      ("pop",)])


def test_record_function_nvtx_runs_the_program_in_the_wrapper(tmp_path: Path) -> None:
    from profctl.cli._program import with_range_hint
    from profctl.errors import NothingMatched
    from profctl.pipelines.targets import Program

    prog = Program(("python", "train.py", "--steps", "2"), record_function_nvtx=True)
    assert prog.argv()[1:] == ["-m", "profctl.workloads.rfnvtx", "--", "train.py", "--steps", "2"]
    assert Program(("python", "train.py")).argv() == ["python", "train.py"]
    e = with_range_hint(NothingMatched("no kernel was launched inside an NVTX range named 'beta'"),
                        Program(("python", "train.py")))
    assert "--record-function-nvtx" in e.one_line()
    (tmp_path / "p.py").write_text("import sys\nfrom torch.profiler import record_function\n"
                                   "with record_function('beta'):\n    sys.exit(3)\n")
    p = subprocess.run([*prog.argv()[:4], str(tmp_path / "p.py")], capture_output=True, text=True, timeout=120)
    assert p.returncode == 3, p.stderr  # the program's own status comes back


@pytest.mark.parametrize("args", [["--record-function-nvtx"], ["--record-function-nvtx", "--", "ls"]])
def test_record_function_nvtx_needs_a_python_program(tmp_path: Path, args: list[str]) -> None:
    rc, _, err = invoke(["nsys", "--reports", str(tmp_path), *args])
    assert rc == 2 and "--record-function-nvtx" in one_line(err)


def test_the_workload_child_ignores_nothing_it_is_given() -> None:
    """--memory-limit reaches the attention workload's child as it reaches the model's."""
    from profctl.spec import AttentionSweep

    argv = AttentionSweep(memory_limit_gib=2.5).to_argv()
    assert argv[argv.index("--memory-limit") + 1] == "2.5"


def test_the_version_is_the_changelogs(tmp_path: Path) -> None:
    """Issue 29 item 11: `profctl --version` said 0.2.0 while the CHANGELOG listed its features under 0.3.0, and
    repro scripts recorded the wrong one. One home (profctl/_version.py), which pyproject reads; the CHANGELOG's
    newest section is that version; the run store records it."""
    import tomllib

    from profctl._version import __version__

    r = CliRunner().invoke(app, ["--version"])
    assert r.exit_code == 0 and r.stdout.strip() == f"profctl {__version__}"
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert "version" not in project["project"] and "version" in project["project"]["dynamic"]
    assert project["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "profctl._version.__version__"}
    top = re.search(r"^## (\S+)", (ROOT / "CHANGELOG.md").read_text(), flags=re.M)
    assert top is not None and top.group(1) == __version__
    assert run_store.read_manifest(run_store.new_run("bench", root=tmp_path, env=False))["profctl"] == __version__


def test_bench_docs_say_exit_status_once() -> None:
    """docs/bench.md's "Exit status" was two near-duplicate paragraphs."""
    text = (ROOT / "docs" / "bench.md").read_text()
    section = text[text.index("## Exit status"):]
    assert text.count("## Exit status") == 1 and section.count("0 when at least one point ran") == 1
