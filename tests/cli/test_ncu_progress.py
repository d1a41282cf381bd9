"""Issue 31: `profctl ncu` on a program that launches the same kernels again and again (an autotuner) says what
ncu has profiled while it runs and, past what the recipe needs, how to narrow the run; --once asks ncu for each
kernel's first launch. On this CPU machine ncu is a stand-in script that writes its progress lines as the real
one does (``==PROF== Profiling "name" - N: 0%....50%....100% - K passes``, the dots as the passes go), then leaves
a real report (tests/data/planted/planted_triton.ncu-rep, recorded on the H200) where --export says. The real
thing runs in tests/gpu/test_ncu_gpu.py."""

from __future__ import annotations

import io
import sys
from contextlib import redirect_stderr
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl.cli import app
from profctl.errors import UsageError
from profctl.tools import ncu as tool

DATA = Path(__file__).resolve().parents[1] / "data" / "planted"

FAKE = r'''#!{python}
"""A stand-in for ncu: progress lines for KERNELS (name x count; --kernel-id ::regex:RE:1 keeps each name's first
launch), then a real report copied to --export."""
import lzma, re, sys, time
argv = sys.argv[1:]
if "--version" in argv:
    print("NVIDIA (R) Nsight Compute Command Line Profiler\nVersion 2025.3.1.0")
    sys.exit(0)
out = argv[argv.index("--export") + 1]
launches = [("row_stats", 1)] + [("_attn_fwd", 1)] * {n_autotune} + [("exp_rows", 1)]
once = argv[argv.index("--kernel-id") + 1] if "--kernel-id" in argv else None
print("==PROF== Connected to process 4242 (/usr/bin/python3)", flush=True)
time.sleep({startup})  # the program's own start (Python, torch, CUDA) before its first launch
seen = set()
for i, (name, _) in enumerate(launches):
    if once is not None:
        rx = once.split(":")[3]
        if name in seen or not re.search(rx, name):
            continue
        seen.add(name)
    sys.stdout.write(f'==PROF== Profiling "{{name}}" - {{i}}: 0%')
    sys.stdout.flush()
    time.sleep({pause})
    sys.stdout.write("....50%....100% - 9 passes\n")
    sys.stdout.flush()
with open(out, "wb") as f:
    f.write(lzma.decompress(open({report!r}, "rb").read()))
print(f"==PROF== Disconnected from process 4242\n==PROF== Report: {{out}}", flush=True)
'''


def fake_ncu(tmp_path: Path, n_autotune: int = 24, pause: float = 0.03, startup: float = 0.0) -> Path:
    p = tmp_path / "fake-ncu"
    p.write_text(FAKE.format(python=sys.executable, n_autotune=n_autotune, pause=pause, startup=startup,
                             report=str(DATA / "planted_triton.ncu-rep.xz")))
    p.chmod(0o755)
    return p


def test_progress_lines_are_read_as_ncu_writes_them() -> None:
    r = tool.ProgressReader()
    assert r.feed('==PROF== Connected to process 1 (/usr/bin/python3)\n==PROF== Profiling "_attn_fwd" - 0: 0%', 10.0
                  ) == []
    assert r.current == ("_attn_fwd", 10.0)
    assert r.feed("....50%...", 11.0) == []
    (done,) = r.feed(".100% - 9 passes\n==PROF== Profiling \"void at::native::elementwise_kernel<128, 2>\" - 1:",
                     12.5)
    assert (done.name, done.id, done.passes, done.seconds) == ("_attn_fwd", 0, 9, 2.5)
    assert r.current is not None and r.current[0] == "void at::native::elementwise_kernel<128, 2>"
    (done,) = r.feed(" 0%....50%....100% - 12 passes\n", 13.0)
    assert done.passes == 12 and done.seconds == pytest.approx(0.5)
    # a line seen whole in one read: its time runs from the end of the one before
    (done,) = r.feed('==PROF== Profiling "x" - 2: 0%....50%....100% - 1 pass\n', 14.0)
    assert done.seconds == pytest.approx(1.0) and done.passes == 1 and r.current is None


def test_advice_comes_once_the_launches_outnumber_what_the_recipe_needs() -> None:
    kw = dict(recipe="explain", seconds=1.2, once=False, kernel=None, range_=None, launch_count=None, program=True)
    assert tool.narrowing_advice({"_attn_fwd": 19}, **kw) is None  # type: ignore[arg-type]
    assert tool.narrowing_advice({f"k{i}": 1 for i in range(25)}, **kw) is None  # type: ignore[arg-type]
    text = tool.narrowing_advice({"_attn_fwd": 22, "row_stats": 1}, **kw)  # type: ignore[arg-type]
    assert text is not None
    assert "23 launches of 2 kernels" in text and "_attn_fwd x22" in text and "about 1.2 s each" in text
    assert "explain recipe needs one launch of each kernel" in text
    for way in ("--once", "--kernel REGEX", "--launch-count N", "--range NAME"):
        assert way in text
    assert tool.narrowing_advice({"_attn_fwd": 22}, **{**kw, "once": True}) is None  # type: ignore[arg-type]
    narrowed = tool.narrowing_advice({"_attn_fwd": 22}, **{**kw, "kernel": "attn", "range_": "step"})  # type: ignore[arg-type]
    assert narrowed is not None and "--kernel REGEX" not in narrowed and "--range NAME" not in narrowed


def test_once_asks_ncu_for_each_kernels_first_launch(tmp_path: Path) -> None:
    opts = tool.ProfileOptions(once=True)
    argv = tool.profile_argv(Path("ncu"), tmp_path / "r", opts, ["prog"])
    assert argv[argv.index("--kernel-id") + 1] == "::regex:.*:1" and "--kernel-name" not in argv
    opts = tool.ProfileOptions(once=True, kernel_regex="regex:attn|gemm")
    argv = tool.profile_argv(Path("ncu"), tmp_path / "r", opts, ["prog"])
    assert argv[argv.index("--kernel-id") + 1] == "::regex:attn|gemm:1"
    with pytest.raises(UsageError, match="cannot hold a ':'"):
        tool.once_id("at::native::.*")


@pytest.mark.parametrize(("args", "needle"), [
    (["--once", "--launch-skip", "3"], "--once profiles each kernel's first launch; --launch-skip"),
    (["--once", "--kernel", "a::b"], "cannot hold a ':'"),
])
def test_once_with_what_it_cannot_take_is_one_line(tmp_path: Path, args: list[str], needle: str) -> None:
    fake = fake_ncu(tmp_path)
    r = CliRunner().invoke(app, ["ncu", *args, "--reports", str(tmp_path / "r"), "--", "python3", "x.py"],
                           env={"PROFCTL_NCU": str(fake)})
    assert r.exit_code == 2, r.output
    assert needle in r.output and len(r.output.strip().splitlines()) == 1


def _program(tmp_path: Path) -> object:
    from profctl.pipelines.targets import Program

    prog = tmp_path / "prog.py"
    prog.write_text("print('never run: the stand-in ncu does not start it')\n")
    return Program(command=("python3", str(prog)), cwd=tmp_path)


def test_an_autotuning_program_shows_its_kernels_and_is_told_how_to_narrow(tmp_path: Path) -> None:
    pytest.importorskip("ncu_report")
    from profctl import recipes
    from profctl.pipelines import ncu_pipeline

    seen: list[ncu_pipeline.NcuProgress] = []
    req = ncu_pipeline.NcuRequest(target=_program(tmp_path), recipe=recipes.get("stalls"), cc=(9, 0),  # type: ignore[arg-type]
                                  exe=fake_ncu(tmp_path), reports=tmp_path / "runs", clock_control="none")
    res = ncu_pipeline.run(req, on_progress=seen.append)
    done = [p for p in seen if p.last is not None]
    assert [p.launches for p in done] == list(range(1, 27))  # every launch, in order, as it ended
    assert done[-1].counts == {"row_stats": 1, "_attn_fwd": 24, "exp_rows": 1}
    assert all(p.last_s is not None and 0.0 <= p.last_s < 5 for p in done)
    assert any(p.current == "_attn_fwd" for p in seen)  # the launch being profiled, before it ended
    advised = [p.advice for p in seen if p.advice]
    assert advised and advised[0] == advised[-1]  # from the 20th launch on, the same text
    first = next(p for p in seen if p.advice)
    assert first.launches >= tool.ADVISE_AFTER and "--once" in advised[0] and "stalls recipe" in advised[0]
    assert res.summary.meta["advice"] == advised[0]
    assert "ncu: 26 launches of 3 kernels profiled; last exp_rows" in done[-1].describe()


def test_once_profiles_each_kernel_once_and_needs_no_advice(tmp_path: Path) -> None:
    pytest.importorskip("ncu_report")
    from profctl import recipes
    from profctl.pipelines import ncu_pipeline

    seen: list[ncu_pipeline.NcuProgress] = []
    req = ncu_pipeline.NcuRequest(target=_program(tmp_path), recipe=recipes.get("stalls"), cc=(9, 0),  # type: ignore[arg-type]
                                  exe=fake_ncu(tmp_path), reports=tmp_path / "runs", once=True)
    res = ncu_pipeline.run(req, on_progress=seen.append)
    assert "--kernel-id" in res.summary.meta["ncu_argv"]
    assert seen[-1].counts == {"row_stats": 1, "_attn_fwd": 1, "exp_rows": 1}
    assert not any(p.advice for p in seen) and res.summary.meta["advice"] is None


def test_reading_ahead_waits_for_the_programs_first_launch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The imports and ncu_report's warm-up that profctl does while ncu runs start only once ncu names a launch
    being profiled: while the program starts (Python, torch, CUDA) they would compete with it."""
    pytest.importorskip("ncu_report")
    import time

    from profctl import recipes
    from profctl.pipelines import ncu_pipeline

    when: dict[str, float] = {}
    monkeypatch.setattr(ncu_pipeline, "prefetch", lambda modules: when.setdefault("prefetch", time.time()))
    monkeypatch.setattr(tool, "warm_reader", lambda report=None: bool(when.setdefault("warm", time.time())))
    req = ncu_pipeline.NcuRequest(target=_program(tmp_path), recipe=recipes.get("stalls"), cc=(9, 0),  # type: ignore[arg-type]
                                  exe=fake_ncu(tmp_path, n_autotune=4, pause=0.3, startup=1.5),
                                  reports=tmp_path / "runs", clock_control="none")
    t0 = time.time()
    ncu_pipeline.run(req)
    end = time.time()
    assert set(when) == {"prefetch", "warm"}
    for what, t in when.items():
        assert t0 + 1.5 <= t < end - 1.0, (what, t - t0, end - t0)  # after the start, well before ncu ended


def test_what_is_read_ahead_names_modules_that_exist() -> None:
    """The read-ahead swallows a failed import (the import where the module is used says what is wrong), so a
    misspelt name would only cost the time it was meant to save: every name must be importable."""
    import importlib.util

    from profctl.cli.ncu_cmd import RENDERERS
    from profctl.pipelines.ncu_pipeline import READING

    assert [m for m in (*READING, *RENDERERS) if importlib.util.find_spec(m) is None] == []


def test_the_cli_prints_the_advice_once_and_progress_now_and_then(tmp_path: Path) -> None:
    """What `profctl ncu` shows on a stderr that is not a terminal (a CI log): the advice once, and a progress
    line at most every `every_s` seconds."""
    from profctl.cli.ncu_cmd import _showing_progress
    from profctl.pipelines.ncu_pipeline import NcuProgress

    err = io.StringIO()
    with redirect_stderr(err), _showing_progress(every_s=0.0) as show:
        show(NcuProgress(1, {"k": 1}, last="k", last_s=0.5))
        show(NcuProgress(21, {"k": 21}, last="k", last_s=0.5, advice="narrow it: --once"))
        show(NcuProgress(22, {"k": 22}, current="k", current_s=3.0, advice="narrow it: --once"))
    lines = err.getvalue().splitlines()
    assert lines.count("profctl: note: narrow it: --once") == 1
    assert "profctl: ncu: 1 launch of 1 kernel profiled; last k 0.5 s" in lines
    assert "profctl: ncu: 22 launches of 1 kernel profiled; now: k (3 s)" in lines
    err = io.StringIO()
    with redirect_stderr(err), _showing_progress(every_s=3600) as show:
        show(NcuProgress(5, {"k": 5}, last="k", last_s=0.5))
    assert err.getvalue() == ""  # a minute has not passed


def test_a_program_on_a_machine_without_gpu_is_one_line_not_an_internal_error(tmp_path: Path,
                                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """`profctl ncu -- CMD` where neither NVML nor PyTorch sees a GPU (a CPU build of torch raised
    AssertionError from inside the compute-capability lookup)."""
    from profctl import nvml

    monkeypatch.setattr(nvml, "visible_gpus", lambda: [])
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("PROFCTL_NCU", str(fake_ncu(tmp_path)))
    prog = _program(tmp_path)
    r = CliRunner().invoke(app, ["ncu", "--recipe", "stalls", "--clock-control", "none", "--reports",
                                 str(tmp_path / "runs"), "--", *prog.command])
    assert r.exit_code == 2, r.output
    assert "no NVIDIA GPU is visible here" in r.output and "internal error" not in r.output
    assert r.output.count("\n") <= 2
