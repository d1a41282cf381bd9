"""How command lines are read, for every command: bare `--causal` and `--no-causal` (issue 10 part 5), an option
that would swallow the next option, an option given twice, contradicting options, one name per idea across the
commands (old spellings accepted with a note), errors that name the flag as typed, click's usage errors in one
line, and bad options answered before anything heavy is imported."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer.main
from typer.testing import CliRunner

from profctl.cli import app, argv
from profctl.cli._workload_options import MODEL_OPTIONS, WORKLOAD_OPTIONS
from profctl.cli.argv import OLD_SPELLINGS
from tests.conftest import DATA, ROOT

GROUP = typer.main.get_command(app)
COMMANDS: dict[str, Any] = dict(GROUP.commands)  # type: ignore[attr-defined]
WORKLOAD_COMMANDS = ("bench", "nsys", "ncu", "torch")
BENCH = str(DATA / "bench_h100_s4096.json.gz")


def parse(command: str, *args: str) -> dict[str, Any]:
    """The parameters `command` gets from `args`, through the real parser (nothing runs)."""
    return dict(COMMANDS[command].make_context(command, list(args)).params)


def error_line(args: list[str]) -> str:
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2, (args, res.output)
    lines = [ln for ln in res.stderr.splitlines() if ln.strip() and not ln.startswith("profctl: note:")]
    assert len(lines) == 1 and lines[0].startswith("profctl: error:"), res.output
    assert "Traceback" not in res.output and "╭" not in res.output
    return lines[0]


# ------------------------------------------------------------------------------------------- --causal
@pytest.mark.parametrize("command", WORKLOAD_COMMANDS)
@pytest.mark.parametrize(("args", "causal", "pass_"), [
    (["--causal"], "true", None),
    (["--causal", "--pass", "fwd"], "true", "fwd"),          # the bare flag does not eat the next option
    (["--pass", "bwd", "--causal"], "true", "bwd"),
    (["--no-causal", "--pass", "fwd"], "false", "fwd"),
    (["--causal", "false,true"], "false,true", None),        # the sweep keeps its comma list
    (["--causal=true"], "true", None),
])
def test_bare_and_negated_causal(command: str, args: list[str], causal: str, pass_: str | None) -> None:
    p = parse(command, *args)
    assert p["causal"] == causal and p["pass_"] == pass_


@pytest.mark.parametrize("command", WORKLOAD_COMMANDS)
def test_the_sweep_gets_the_bare_flag(command: str) -> None:
    from profctl.spec import AttentionSweep

    p = parse(command, "--causal", "--pass", "fwd+bwd", "--device", "cpu")
    sweep = AttentionSweep.from_strings(causal=p["causal"], pass_=p["pass_"], device="cpu")
    assert sweep.causal == (True,) and sweep.passes == ("fwd+bwd",)


#: every workload option that takes a value: none may swallow the option after it
VALUED = [flag for _, ann, opt in WORKLOAD_OPTIONS if ann is not bool for flag in opt.param_decls
          if flag.startswith("--") and flag != "--causal"]


@pytest.mark.parametrize("flag", VALUED)
def test_a_value_option_never_eats_the_next_option(flag: str) -> None:
    line = error_line(["bench", flag, "--iters", "3"])
    assert f"{flag} needs a value" in line and "--iters" in line


@pytest.mark.parametrize(("command", "args"), [
    ("report", [BENCH, "-f", "--limit", "3"]), ("compare", [BENCH, BENCH, "--threshold", "--strict"]),
    ("runs", ["--kind", "--limit", "3"]), ("ncu", ["--recipe", "--kernel", "x"]), ("nsys", ["--trace", "-f", "json"]),
])
def test_no_command_lets_an_option_eat_the_next(command: str, args: list[str]) -> None:
    assert "needs a value" in error_line([command, *args])


# ------------------------------------------------------------------------------------------- given twice
@pytest.mark.parametrize(("args", "names"), [
    (["bench", "-s", "512", "--seqlen", "1024"], ("-s 512", "--seqlen 1024")),
    (["bench", "--causal", "--no-causal"], ("--causal", "--no-causal")),
    (["bench", "--nvtx", "--no-nvtx"], ("--nvtx", "--no-nvtx")),
    (["bench", "--iters", "5", "-n", "10"], ("--iters 5", "-n 10")),
    (["torch", "--backend", "eager", "-b", "sdpa-math"], ("--backend eager", "-b sdpa-math")),
    (["report", BENCH, "-f", "json", "--format", "csv"], ("-f json", "--format csv")),
    (["nsys", "--reports-dir", "a", "--reports", "b"], ("--reports-dir a", "--reports b")),
    (["compare", BENCH, BENCH, "--threshold", "1%", "--threshold", "2%"], ("--threshold 1%", "--threshold 2%")),
])
def test_an_option_given_twice_is_an_error_naming_both(args: list[str], names: tuple[str, str]) -> None:
    line = error_line(args)
    assert all(n in line for n in names) and "both given" in line, line


def test_the_same_value_twice_is_harmless() -> None:
    assert parse("bench", "-s", "512", "--seqlen", "512")["seqlen"] == "512"


# ------------------------------------------------------------------------------------------- contradictions
@pytest.mark.parametrize(("args", "names"), [
    (["bench", "--seqlen", "512", "--seqlen-q", "1024"], ("--seqlen", "--seqlen-q")),
    (["report", BENCH, "--view", "summary", "--pivot", "ms"], ("--pivot", "--view summary")),
    (["report", BENCH, "--view", "summary", "--tokens", "4096"], ("--tokens", "--view summary")),
    (["report", BENCH, "--view", "summary", "--shape", "b1,sq1,skv1,h1,kv1,d8,bf16,full,bhsd"],
     ("--shape", "--view summary")),
    (["report", BENCH, "--title", "x", "-f", "markdown"], ("--title", "-f markdown")),
    (["report", BENCH, "--pivot", "ms", "--format", "json"], ("--pivot", "--format json")),
    (["report", BENCH, "--by-range"], ("--by-range", "bench rows")),
    (["report", BENCH, "--view", "compare", "--by-range"], ("--by-range", "--view compare")),
    (["report", str(DATA / "nsys_profctl_fwdbwd.sqlite.gz"), "--baseline", "sdpa-math"],
     ("--baseline", "per-kernel summary")),
    (["report", BENCH, "--limit", "3", "-f", "csv"], ("--limit", "-f csv")),
    (["runs", "--limit", "3", "--format", "json"], ("--limit", "--format json")),
    (["torch", "--limit", "3", "-f", "json", "--device", "cpu"], ("--limit", "-f json")),
    (["nsys", "--limit", "3", "-f", "csv"], ("--limit", "-f csv")),
    (["compare", BENCH, BENCH, "--strict"], ("--strict", "--fail-if-slower")),
    (["compare", BENCH, BENCH, "--threshold", "10%", "--fail-if-slower", "5%"],
     ("--threshold 10%", "--fail-if-slower 5%")),
    (["nsys", "--capture", "nvtx", "--no-nvtx"], ("--capture nvtx", "--no-nvtx")),
    (["nsys", "--by-range", "--no-nvtx"], ("--by-range", "--no-nvtx")),
    (["nsys", "--by-range", "--trace", "cuda"], ("--by-range", "--trace cuda")),
    (["ncu", "--no-nvtx"], ("NVTX", "--no-nvtx")),
])
def test_contradicting_options_are_an_error_naming_both(args: list[str], names: tuple[str, ...]) -> None:
    line = error_line(args)
    for n in names:
        assert n in line, (n, line)


@pytest.mark.parametrize(("args", "typed", "untyped"), [
    (["report", BENCH, "--title", "x"], "--title", ("--format", "-f ")),
    (["report", str(DATA / "planted" / "planted_cuda.ncu-rep.xz"), "--kernel", "x"], "--kernel", ("--view",)),
    (["report", str(DATA / "nsys_profctl_fwdbwd.sqlite.gz"), "--range", "x"], "--range", ("--format table",)),
])
def test_an_error_names_only_options_the_user_typed(args: list[str], typed: str, untyped: tuple[str, ...]) -> None:
    """Issue 29 item 8: `--kernel and --view auto contradict`, `--title and --format table contradict`: the user
    typed neither --view nor --format. A contradiction with a default names the option typed and why."""
    line = error_line(args)
    assert f"{typed} does not apply here" in line, line
    verdict = line.split("error: ", 1)[1].split(": ")[0]  # before the why, which may advise an option
    assert not any(u in verdict for u in untyped), line


def test_an_explicit_baseline_that_did_not_run_is_said() -> None:
    """flash-attn is not installed on the machine that recorded these rows: speedups cannot be against it."""
    res = CliRunner().invoke(app, ["report", BENCH, "--baseline", "flash-attn", "-f", "markdown"])
    assert res.exit_code == 0, res.output
    assert "--baseline flash-attn: no row of flash-attn in these inputs; speedups are against sdpa-math" in res.stdout


def test_a_default_that_would_contradict_adapts_quietly() -> None:
    """--threshold left at its default (2%) narrows to a tighter gate: no contradiction the user made."""
    res = CliRunner().invoke(app, ["compare", BENCH, BENCH, "--fail-if-slower", "1%", "-f", "json"])
    assert res.exit_code == 0, res.output


# ------------------------------------------------------------------------------------------- one name per idea
def _visible(command: str) -> dict[str, list[str]]:
    """{parameter name: its visible flags} of a command."""
    out = {}
    for p in COMMANDS[command].params:
        if getattr(p, "param_type_name", "") == "option" and not getattr(p, "hidden", False):
            out[str(p.name)] = [*p.opts, *p.secondary_opts]
    return out


#: one idea, one spelling: (the idea, the flags that must mean it wherever they appear, the parameter name)
IDEAS = [("run store root", ["--reports"], "reports"), ("rows shown", ["--limit"], "limit"),
         ("output format", ["--format", "-f"], "format"), ("seconds before a kill", ["--timeout"], "timeout"),
         ("measured iterations", ["--iters", "-n"], "iters"), ("output file", ["--output", "-o"], "output")]


@pytest.mark.parametrize(("idea", "flags", "param"), IDEAS, ids=[i[0] for i in IDEAS])
def test_one_name_per_idea(idea: str, flags: list[str], param: str) -> None:
    for command in COMMANDS:
        vis = _visible(command)
        for name, fl in vis.items():
            if name == param:
                assert sorted(x for x in fl if not x.startswith("--no-")) == sorted(flags), (command, fl)
            else:
                assert not set(fl) & set(flags), f"{command}: {fl} reuses {flags} for {name}, not {idea}"


def test_limit_has_one_default_everywhere() -> None:
    defaults = {c: p.default for c in COMMANDS for p in COMMANDS[c].params if p.name == "limit"}
    assert len(defaults) >= 4 and set(defaults.values()) == {0}, defaults


def test_no_visible_old_spelling() -> None:
    visible = {f for c in COMMANDS for fl in _visible(c).values() for f in fl}
    assert not visible & {"--reports-dir", "--point-timeout", "--json", "--csv", "--markdown"}


@pytest.mark.parametrize(("command", "old", "param", "args"), [
    (c, old, None, []) for c, table in OLD_SPELLINGS.items() if c != "*" for old in table] + [
    (c, "--reports-dir", "reports", []) for c in ("bench", "nsys", "ncu", "torch", "runs", "show", "compare")])
def test_old_spellings_still_work_with_a_note(command: str, old: str, param: str | None, args: list[str],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    new = ({**OLD_SPELLINGS["*"], **OLD_SPELLINGS[command]} if command in OLD_SPELLINGS else OLD_SPELLINGS["*"])[old]
    value = [] if len(new) > 1 else ["7" if new[0] in ("--limit", "--timeout") else "somewhere"]
    extra = [BENCH, BENCH] if command == "compare" else []
    p = parse(command, *extra, old, *value)
    target = next(o for o in COMMANDS[command].params if new[0] in getattr(o, "opts", []))
    got = p[str(target.name)]
    assert str(got) == (new[1] if len(new) > 1 else value[0]) or float(got) == float(value[0])
    assert f"{old} is now {' '.join(new)}" in capsys.readouterr().err


def test_bench_old_output_options_still_write(tmp_path: Path) -> None:
    res = CliRunner().invoke(app, ["bench", "--device", "cpu", "-s", "32", "--heads", "2", "-d", "16", "-n", "2",
                                   "--warmup", "0", "-b", "eager", "--baseline", "none", "-q", "--json",
                                   str(tmp_path / "r.json"), "--csv", str(tmp_path / "r.csv"), "--reports",
                                   str(tmp_path / "runs")])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "r.json").read_text().startswith("[") and (tmp_path / "r.csv").read_text().startswith("backend")
    assert "--json FILE is now -f json -o FILE" in res.stderr


# ------------------------------------------------------------------------------------------- flags as typed
@pytest.mark.parametrize(("args", "flag"), [
    (["bench", "-s", "0"], "-s"), (["bench", "--seqlen", "0"], "--seqlen"),
    (["bench", "--seqlen-q", "0"], "--seqlen-q"),
    (["bench", "-n", "0"], "-n"), (["bench", "--iters", "0"], "--iters"), (["bench", "-d", "-4"], "-d"),
    (["torch", "-n", "0"], "-n"), (["bench", "--point-timeout", "-1"], "--point-timeout"),
    (["bench", "--timeout", "0"], "--timeout"),
])
def test_errors_name_the_flag_as_typed(args: list[str], flag: str) -> None:
    line = error_line(args)
    assert f"{flag} " in line, line
    others = {"-s": "--seqlen", "--seqlen": "--seqlen-q", "-n": "--iters", "-d": "--head-dim",
              "--point-timeout": "--timeout"}
    if flag in others:
        assert others[flag] not in line.replace(flag, ""), line


@pytest.mark.parametrize("args", [["bench", "--foo"], ["compare"], ["report"], ["runs", "--limit", "x"],
                                  ["show", "a", "b"], ["recipes", "--cc"]])
def test_click_usage_errors_are_one_line(args: list[str]) -> None:
    line = error_line(args)
    assert f"profctl {args[0]} --help" in line


@pytest.mark.parametrize(("args", "says"), [
    (["bench", "-n", "x"], "bench: invalid value for '-n': "),
    (["bench", "--iters=x"], "invalid value for '--iters': "),
    (["bench", "-nx"], "invalid value for '--iters' / '-n': "),  # click's own hint: -nx is not a flag as typed
    (["runs", "-n", "x"], "invalid value for '-n': "), (["bench", "--point-timeout", "x"], "for '--point-timeout': "),
    (["runs", "-n"], "runs: option '-n' requires an argument; see `profctl runs --help`"),
    (["show", "--reports-dir"], "show: option '--reports-dir' requires an argument"),
    (["bench", "--no-nvtx=1"], "bench: option '--no-nvtx' does not take a value"),
    (["bench", "--seqlen", "512", "--seqln", "5"], "no such option: --seqln (did you mean --seqlen or --seqlen-q?)"),
    (["bench", "--bogus"], "bench: no such option: --bogus; see `profctl bench --help`"),  # no far-fetched guess
    (["bench", "-s", "512", "--", "--seqlen"], "bench: '--' starts the command line of a program to profile"),
    (["bench", "--"], "profctl bench profiles none (profctl nsys, ncu and torch do)"),
    (["compare"], "compare: missing argument 'base'; see `profctl compare --help`"),
])
def test_click_usage_errors_name_the_option_as_typed(args: list[str], says: str) -> None:
    """From the fields of click's exception (the parameter, the option), not by editing its text."""
    line = error_line(args)
    assert says in line, line


def test_the_reader_tables_match_the_commands() -> None:
    """argv's declarations: the list options are the workload options whose help says so; every command with an
    old spelling exists; each command's table knows its flags, negations and values."""
    says_list = {n for n, _, opt in WORKLOAD_OPTIONS + MODEL_OPTIONS if "comma list" in str(opt.help)}
    assert says_list == argv.LIST_PARAMS
    assert set(OLD_SPELLINGS) - {"*"} <= set(COMMANDS)
    bench = COMMANDS["bench"]
    table = bench.argv_table(bench.make_context("bench", []))
    assert table.by_flag["-s"].param == "seqlen" and table.by_flag["-s"].is_list
    assert table.by_flag["--no-nvtx"].param == "nvtx" and not table.by_flag["--nvtx"].takes_value
    assert table.old == {"--reports-dir": ("--reports",), "--point-timeout": ("--timeout",)}


# ------------------------------------------------------------------------------------------- answered fast
BAD = [
    ["bench", "--baseline", "nope"], ["bench", "-b", "nope"], ["bench", "--timeout", "-1"], ["bench", "-f", "xml"],
    ["bench", "--label", "a=b", "-b", "eager,sdpa-math"], ["bench", "--heads", "8", "--kv-heads", "3"],
    ["bench", "-o", "/"], ["bench", "--causal", "maybe"], ["torch", "--timeout", "0"], ["torch", "-f", "xml"],
    ["nsys", "--trace", "nope"], ["nsys", "--capture", "x"], ["ncu", "--recipe", "nope"],
    ["ncu", "--clock-control", "x"], ["ncu", "--kernel", "("], ["report", BENCH, "--pivot", "x"],
    ["compare", BENCH, BENCH, "--resamples", "5"], ["runs", "-f", "xml"], ["recipes", "--cc", "nine"],
    ["doctor", "-f", "xml"], ["runs", "--kind", "nope"], ["runs", "--status", "done"],
    ["report", BENCH, "--baseline", "fa5"],
]


def test_bad_options_are_answered_before_anything_heavy(tmp_path: Path) -> None:
    """torch, pandas and matplotlib cannot even be imported here: a bad option must be refused (exit 2, one
    line) without them, i.e. in well under a second instead of the 3 s a torch import takes."""
    fake = tmp_path / "fake"
    for mod in ("torch", "pandas", "matplotlib"):
        (fake / mod).mkdir(parents=True)
        (fake / mod / "__init__.py").write_text(f"raise ImportError('{mod} imported while checking options')\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(fake), str(ROOT)]))
    for args in BAD:
        p = subprocess.run([sys.executable, "-m", "profctl", *args], cwd=tmp_path, env=env, capture_output=True,
                           text=True, timeout=60)
        lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
        assert p.returncode in (1, 2), (args, p.stderr)  # 2: a bad value; 1: an output that cannot be written
        assert len(lines) == 1 and lines[0].startswith("profctl: error:"), (args, p.stderr)
        assert "imported while checking options" not in p.stderr


@pytest.mark.parametrize("command", list(COMMANDS))
def test_help_says_each_default_once(command: str) -> None:
    """Help texts that say their default in words ('[default: all on GPU; ...]') keep it (typer would read the
    brackets as markup and drop them), and typer does not add a second one."""
    res = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert not re.search(r"\[default: [^\]]*\].*\[default:", res.stdout)
    if command in WORKLOAD_COMMANDS:
        assert "[default: 1]" in res.stdout and "[default: all on GPU;" in res.stdout


# ------------------------------------------------------------------------------------------ -o's name (39.5)
REPORT = DATA / "bench_h100_s4096.json.gz"


@pytest.mark.parametrize(("name", "starts"), [("x.html", "<!doctype html"), ("y.json", "{"), ("z.csv", "backend"),
                                              ("w.md", "#")])
def test_the_output_name_picks_the_format(tmp_path: Path, name: str, starts: str) -> None:
    r = CliRunner().invoke(app, ["report", str(REPORT), "-o", str(tmp_path / name)])
    assert r.exit_code == 0, r.output
    text = (tmp_path / name).read_text(encoding="utf-8")
    assert text.lower().startswith(starts.lower()) or (starts == "backend" and "," in text.splitlines()[0]), text[:200]
    assert "┃" not in text


def test_a_format_that_contradicts_the_output_name_is_refused(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["report", str(REPORT), "-f", "csv", "-o", str(tmp_path / "y.json")])
    assert r.exit_code == 2 and not (tmp_path / "y.json").exists()
    assert "-f csv" in r.stderr and "y.json" in r.stderr and "contradict" in r.stderr
    assert CliRunner().invoke(app, ["report", str(REPORT), "-f", "table", "-o", str(tmp_path / "t.txt")]).exit_code == 0


def test_an_output_name_the_command_cannot_write_names_its_formats(tmp_path: Path) -> None:
    r = CliRunner().invoke(app, ["compare", str(REPORT), str(REPORT), "-o", str(tmp_path / "c.html")])
    assert r.exit_code == 2 and not (tmp_path / "c.html").exists()
    line = [ln for ln in r.stderr.splitlines() if ln.startswith("profctl: error:")]
    assert len(line) == 1 and "c.html" in line[0] and "table, markdown, csv, json" in line[0], r.stderr
