"""profctl.cli.argv, the command-line reader in front of click, as a pure function over tables written here: bare
and negated flags, old spellings, an option that would swallow the next one, an option given twice or with its
own negation, and messages that name flags as typed. No click, no typer: tests/cli/test_options.py checks the
same behaviour through the real commands."""

from __future__ import annotations

import subprocess
import sys

import pytest

from profctl.cli import argv
from profctl.cli.argv import GivenTwice, NeedsValue, Option, read, rewrite
from profctl.errors import UsageError
from tests.conftest import ROOT

#: a command shaped like `profctl bench`
BENCH = argv.table("bench", [
    Option("seqlen", ("--seqlen", "-s"), is_list=True),
    Option("seqlen_q", ("--seqlen-q",), is_list=True),
    Option("head_dim", ("--head-dim", "-d"), is_list=True),
    Option("causal", ("--causal",), is_list=True),
    Option("iters", ("--iters", "-n")),
    Option("timeout", ("--timeout",)),
    Option("reports", ("--reports",)),
    Option("nvtx", ("--nvtx",), negations=("--no-nvtx",), takes_value=False),
    Option("quiet", ("--quiet", "-q"), takes_value=False),
    Option("tag", ("--tag",), multiple=True),
])
#: a command shaped like `profctl doctor`: one old spelling stands for an option and its value
DOCTOR = argv.table("doctor", [Option("format", ("--format", "-f"))])


# ------------------------------------------------------------------------------------------- rewriting
@pytest.mark.parametrize(("tokens", "out"), [
    (["--causal"], ["--causal", "true"]),
    (["--causal", "--iters", "3"], ["--causal", "true", "--iters", "3"]),  # the bare flag does not eat the option
    (["--iters", "3", "--causal"], ["--iters", "3", "--causal", "true"]),
    (["--no-causal", "-n", "3"], ["--causal", "false", "-n", "3"]),
    (["--causal", "false,true"], ["--causal", "false,true"]),  # a sweep keeps its comma list
    (["--causal=true"], ["--causal=true"]),
    (["--causal", "-1"], ["--causal", "-1"]),  # a number is a value, not an option
    (["-d", "-4", "-s", "512"], ["-d", "-4", "-s", "512"]),
    (["--unknown", "x"], ["--unknown", "x"]),  # click refuses it, in its own words
    (["--no-nvtx=1"], ["--no-nvtx=1"]),  # click says a flag takes no value
])
def test_bare_and_negated_flags(tokens: list[str], out: list[str]) -> None:
    assert rewrite(tokens, BENCH) == out


def test_everything_after_a_double_dash_belongs_to_the_program() -> None:
    tokens = ["--causal", "--", "python", "x.py", "--causal", "--reports-dir", "-s", "1", "-s", "2"]
    assert rewrite(tokens, BENCH) == ["--causal", "true", *tokens[1:]]


def test_a_table_without_the_option_leaves_its_negation_alone() -> None:
    table = argv.table("report", [Option("limit", ("--limit",))])
    assert rewrite(["--no-causal"], table) == ["--no-causal"]
    with pytest.raises(NeedsValue):  # still an option word: never a value
        rewrite(["--limit", "--no-causal"], table)


# ------------------------------------------------------------------------------------------- old spellings
@pytest.mark.parametrize(("table", "tokens", "out", "note"), [
    (BENCH, ["--reports-dir", "x"], ["--reports", "x"], "--reports-dir is now --reports"),
    (BENCH, ["--reports-dir=x"], ["--reports=x"], "--reports-dir is now --reports"),
    (BENCH, ["--point-timeout", "5"], ["--timeout", "5"], "--point-timeout is now --timeout"),
    (DOCTOR, ["--json"], ["--format", "json"], "--json is now --format json"),
])
def test_old_spellings_are_rewritten_with_a_note(table: argv.Table, tokens: list[str], out: list[str],
                                                 note: str) -> None:
    r = read(tokens, table)
    assert r.tokens == out
    assert r.notes == (f"{note}; the old spelling goes in {argv.REMOVED_IN}",)
    assert r.typed == {table.by_flag[out[0].split("=")[0]].param: tokens[0].split("=")[0]}


def test_old_spellings_of_other_commands_or_missing_options_stay_unknown() -> None:
    assert rewrite(["--point-timeout", "5"], DOCTOR) == ["--point-timeout", "5"]  # bench's, not doctor's
    assert rewrite(["--reports-dir", "x"], DOCTOR) == ["--reports-dir", "x"]  # doctor has no --reports
    assert "-n" not in argv.table("runs", [Option("format", ("--format",))]).old


# ------------------------------------------------------------------------------------------- the flags as typed
def test_the_flags_as_typed_are_kept() -> None:
    r = read(["-s", "512", "--no-nvtx", "-n", "3", "--reports-dir", "r"], BENCH)
    assert r.typed == {"seqlen": "-s", "nvtx": "--no-nvtx", "iters": "-n", "reports": "--reports-dir"}


@pytest.mark.parametrize(("typed", "message", "named"), [
    ({"seqlen": "-s"}, "--seqlen-q must be a positive integer, got 0", "-s must be a positive integer, got 0"),
    ({"seqlen": "-s"}, "--seqlen must be positive", "-s must be positive"),
    ({"seqlen": "--seqlen", "seqlen_q": "--seqlen-q"}, "--seqlen and --seqlen-q both given",
     "--seqlen and --seqlen-q both given"),
    ({"iters": "-n"}, "--iters must be positive; see --iters-ish and x--iters", "-n must be positive; see "
     "--iters-ish and x--iters"),
    ({"timeout": "--point-timeout"}, "--timeout must be positive, got -1", "--point-timeout must be positive, got -1"),
    ({"nvtx": "--no-nvtx"}, "--by-range needs NVTX, which --no-nvtx turns off",
     "--by-range needs NVTX, which --no-nvtx turns off"),
    ({}, "--seqlen-q must be positive", "--seqlen-q must be positive"),
])
def test_messages_name_flags_as_typed(typed: dict[str, str], message: str, named: str) -> None:
    assert argv.name_flags(message, BENCH, typed) == named


# ------------------------------------------------------------------------------------------- refusals
@pytest.mark.parametrize(("tokens", "option", "next_word"), [
    (["--seqlen", "--iters", "3"], "--seqlen", "--iters"),
    (["-s", "-n", "3"], "-s", "-n"),
    (["--iters", "--"], "--iters", "--"),
    (["--reports-dir", "--causal"], "--reports-dir", "--causal"),  # named as typed, not as rewritten
    (["--timeout", "--help"], "--timeout", "--help"),
])
def test_an_option_never_swallows_the_next(tokens: list[str], option: str, next_word: str) -> None:
    with pytest.raises(NeedsValue) as e:
        read(tokens, BENCH)
    assert (e.value.option, e.value.next_word) == (option, next_word)
    assert e.value.one_line() == (f"{option} needs a value, but the word after it is the option {next_word}; give "
                                  f"{option} a value (e.g. {option} VALUE {next_word} ...)")
    assert isinstance(e.value, UsageError) and e.value.exit_code == 2


@pytest.mark.parametrize(("tokens", "first", "other", "line"), [
    (["-s", "512", "--seqlen", "1024"], "-s", "--seqlen",
     "-s 512 and --seqlen 1024 both given: one would silently replace the other; give one (a comma list sweeps "
     "several values)"),
    (["--iters", "5", "-n", "10"], "--iters", "-n",
     "--iters 5 and -n 10 both given: one would silently replace the other; give one"),
    (["--timeout=1,2", "--timeout", "3"], "--timeout", "--timeout",
     "--timeout 1,2 and --timeout 3 both given: one would silently replace the other; give one (a comma list "
     "sweeps several values)"),
    (["-q", "--quiet"], "-q", "--quiet", "-q and --quiet both given: one would silently replace the other; give one"),
    (["--causal", "false", "--causal"], "--causal", "--causal",
     "--causal false and --causal both given: one would silently replace the other; give one (a comma list sweeps "
     "several values)"),
])
def test_an_option_given_twice_names_both(tokens: list[str], first: str, other: str, line: str) -> None:
    with pytest.raises(GivenTwice) as e:
        read(tokens, BENCH)
    assert (e.value.option, e.value.other, e.value.one_line()) == (first, other, line)


@pytest.mark.parametrize("tokens", [["--causal", "--no-causal"], ["--causal=true", "--no-causal"],
                                    ["--nvtx", "--no-nvtx"]])
def test_an_option_and_its_negation_contradict(tokens: list[str]) -> None:
    with pytest.raises(GivenTwice) as e:
        read(tokens, BENCH)
    assert (e.value.option, e.value.other) == (tokens[0].split("=")[0], tokens[1])


@pytest.mark.parametrize("tokens", [["-s", "512", "--seqlen", "512"], ["--no-causal", "--causal=false"],
                                    ["--nvtx", "--nvtx"], ["--tag", "a", "--tag", "b"]])
def test_the_same_value_twice_or_a_multiple_option_is_harmless(tokens: list[str]) -> None:
    assert read(tokens, BENCH).tokens


def test_an_error_carries_the_notes_earned_before_it() -> None:
    with pytest.raises(GivenTwice) as e:
        read(["--reports-dir", "a", "--reports", "b"], BENCH)
    assert e.value.notes == (f"--reports-dir is now --reports; the old spelling goes in {argv.REMOVED_IN}",)
    assert e.value.one_line().startswith("--reports-dir a and --reports b both given")
    with pytest.raises(NeedsValue) as n:
        read(["--iters", "--reports-dir", "x"], BENCH)
    assert n.value.notes == ()  # the line stopped before the old spelling


# ------------------------------------------------------------------------------------------- no click
def test_the_reader_needs_neither_click_nor_typer() -> None:
    """argv.py loaded on its own, with click and typer made unimportable."""
    code = ("import importlib.util, sys\n"
            "sys.modules['typer'] = sys.modules['click'] = None\n"
            f"spec = importlib.util.spec_from_file_location('argv_alone', {str(ROOT / 'profctl/cli/argv.py')!r})\n"
            "m = sys.modules['argv_alone'] = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
            "t = m.table('bench', [m.Option('causal', ('--causal',))])\n"
            "print(m.rewrite(['--no-causal'], t))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.strip() == "['--causal', 'false']", out.stderr
