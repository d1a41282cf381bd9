"""How a command line is read: ProfctlCommand reads it with profctl.cli.argv (bare flags, hidden old spellings, an
option that would swallow the next one), rewords click's usage errors naming the flag as typed, and, while a
command runs, says which options the user gave and how (typed_flags, given, translate, conflict, percent)."""

from __future__ import annotations

import difflib
import sys
from collections.abc import Sequence
from contextvars import ContextVar
from typing import Any

import typer
from typer.core import TyperCommand

from profctl.cli import argv
from profctl.cli._formats import FROM_EXTENSION, format_of_output
from profctl.cli._messages import err, note
from profctl.errors import UsageError

#: click's UsageError, the base of every usage error click raises while parsing; reached through typer's public
#: BadParameter (typer ships click as a private module; older typer used the click package)
_ClickUsageError: type[Exception] = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
#: the context of the command being run (set while it runs), for typed_flags(), given() and guard's messages
_RUNNING: ContextVar[Any] = ContextVar("profctl_running_command", default=None)
_TYPED = "profctl.typed"
_PROGRAM = "profctl.program"


class ProfctlCommand(TyperCommand):
    """A typer command that reads its command line with profctl.cli.argv (bare ``--causal``, ``--no-causal``, old
    spellings, no option swallowing the next, no option given twice) and answers a wrong one in one line, naming
    the flag as typed (``-s``, not ``--seqlen-q``): argv's errors, and click's usage errors in profctl's words."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        for p in self.params:  # `[default: ...]` in a help text is rich markup to typer's help: keep it text
            if getattr(p, "is_flag", False) and getattr(p, "metavar", None) is None:
                setattr(p, "metavar", "")  # noqa: B010 - a flag takes no value: no `<bool>` in --help
            text = getattr(p, "help", None)
            if text and "[" in text and "\\[" not in text:
                setattr(p, "help", text.replace("[", "\\["))  # noqa: B010 - typer's options have it, not click's type
                if "[default:" in text:  # the text says the default in words: no second, typer-made one
                    setattr(p, "show_default", False)  # noqa: B010

    _argv_table: argv.Table | None = None

    def argv_table(self, ctx: Any) -> argv.Table:
        """This command's options as profctl.cli.argv reads them (made once, from its typer options)."""
        if self._argv_table is None:
            opts = [argv.Option(param=str(p.name), flags=tuple(p.opts), negations=tuple(p.secondary_opts),
                                takes_value=not (getattr(p, "is_flag", False) or getattr(p, "count", False)),
                                is_list=str(p.name) in argv.LIST_PARAMS, multiple=bool(getattr(p, "multiple", False)))
                    for p in self.get_params(ctx) if getattr(p, "param_type_name", "") == "option"]
            self._argv_table = argv.table(str(self.name), opts)
        return self._argv_table

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        table = self.argv_table(ctx)
        try:
            reading = argv.read(args, table)
        except argv.ArgvError as e:
            for n in e.notes:
                note(f"note: {n}")
            err(e.one_line())
            raise typer.Exit(2) from None
        for n in reading.notes:
            note(f"note: {n}")
        ctx.meta[_TYPED] = reading.typed
        ctx.meta[_PROGRAM] = reading.program
        if reading.program is not None and not any(p.name == "program" for p in self.get_params(ctx)):
            err(f"{self.name}: '--' starts the command line of a program to profile, and profctl {self.name} "
                "profiles none (profctl nsys, ncu and torch do)")
            raise typer.Exit(2)
        try:
            return super().parse_args(ctx, reading.tokens)
        except _ClickUsageError as e:
            if type(e).__name__ == "NoArgsIsHelpError":
                raise
            err(click_error_line(str(self.name), e, table, reading.typed))
            raise typer.Exit(2) from None

    def invoke(self, ctx: Any) -> Any:
        token = _RUNNING.set(ctx)
        try:
            self._format_from_output(ctx)
            return super().invoke(ctx)
        finally:
            _RUNNING.reset(token)

    def _format_from_output(self, ctx: Any) -> None:
        """-o NAME.html (.json, .csv, .md, .txt) without -f is that format; a -f that contradicts the name is an
        error naming both (a command whose -o is no --format output, `runs show --repro`, is left alone)."""
        params = ctx.params
        if "format" not in params or params.get("output") is None or "repro" in params:
            return
        typed = typed_flags()
        try:
            fmt = format_of_output(params["output"], params["format"], given=given("format"),
                                   flags=(typed.get("format", "--format"), typed.get("output", "-o")))
        except UsageError as e:
            err(e.one_line())
            raise typer.Exit(2) from None
        if fmt != params["format"]:
            params["format"] = fmt
            ctx.meta[FROM_EXTENSION] = f"{typed.get('output', '-o')} {params['output']}"


def click_error_line(command: str, e: Any, table: argv.Table, typed: dict[str, str]) -> str:
    """click's usage error `e` as profctl's one line, naming the option as the user typed it: built from the
    exception's fields (the parameter of a bad value, the option of a missing value), not by editing click's
    text."""
    msg = _click_message(e, table, typed).rstrip(".")
    return f"{command}: {msg[:1].lower()}{msg[1:]}; see `profctl {command} --help`"


def _click_message(e: Any, table: argv.Table, typed: dict[str, str]) -> str:
    param = getattr(e, "param", None)
    if param is not None and not hasattr(e, "param_type"):  # BadParameter (MissingParameter names an argument)
        flag = typed.get(str(param.name)) if getattr(param, "param_type_name", "") == "option" else None
        if flag and getattr(e, "param_hint", None) is None:
            return f"Invalid value for '{flag}': {e.message}"
    option_name = getattr(e, "option_name", None)
    if option_name is not None and not hasattr(e, "possibilities"):  # BadOptionUsage (not NoSuchOption)
        opt = table.by_flag.get(option_name)
        if opt is not None:
            flag = typed.get(opt.param, option_name)
            return f"Option '{flag}' {'requires an argument' if opt.takes_value else 'does not take a value'}"
    if option_name is not None and hasattr(e, "possibilities"):  # NoSuchOption: suggest only a near miss
        near = suggest(str(option_name), [f for f in table.by_flag if f.startswith("--")])
        return f"no such option: {option_name}" + (f" (did you mean {' or '.join(near)}?)" if near else "")
    return str(e.format_message())


def suggest(word: str, flags: Sequence[str]) -> list[str]:
    """The options a mistyped `word` most likely meant: a close spelling (a letter or two off: `--seqln`), or an
    option it begins (`--kv` for `--kv-heads`); none for a word like none of them (click offered `--gpus` for
    `--bogus`)."""
    close = difflib.get_close_matches(word, flags, n=2, cutoff=0.8)
    starts = [f for f in flags if len(word) >= 4 and f.startswith(word) and f not in close]
    return (close + starts)[:3]


def typed_flags() -> dict[str, str]:
    """{parameter name: flag as the user typed it} of the command being run ({} outside one)."""
    ctx = _RUNNING.get()
    return dict(ctx.meta.get(_TYPED, {})) if ctx is not None else {}


def translate(msg: str) -> str:
    """profctl's own message `msg` with every flag named the way the user typed it (`-s` where profctl says
    `--seqlen-q`)."""
    ctx = _RUNNING.get()
    if ctx is None or not isinstance(ctx.command, ProfctlCommand):
        return msg
    return argv.name_flags(msg, ctx.command.argv_table(ctx), typed_flags())


def command_line() -> tuple[str, ...]:
    """The command line as typed, for the run's manifest."""
    return ("profctl", *sys.argv[1:])


def given(name: str) -> bool:
    """Whether the user gave option `name` (a parameter name) on the command line, rather than its default."""
    ctx = _RUNNING.get()
    if ctx is None:
        return False
    src = ctx.get_parameter_source(name)
    return getattr(src, "name", "DEFAULT") not in ("DEFAULT", "DEFAULT_MAP")


def conflict(a: str, b: str, why: str) -> UsageError:
    """The error for two options that contradict each other: names both, as typed, and why. When one of them is
    only a default (`--view auto`, `--format table`), the user never typed it: the error names the one typed."""
    untyped = [side for side in (a, b) if _a_default(side)]
    if len(untyped) == 1:
        return UsageError(f"{b if untyped[0] == a else a} does not apply here: {why}")
    return UsageError(f"{a} and {b} contradict each other: {why}")


def _a_default(side: str) -> bool:
    """Whether `side` of a conflict (``--view auto``) names an option of the running command that the user did
    not give."""
    ctx = _RUNNING.get()
    flag = side.split(" ")[0]
    if ctx is None or not flag.startswith("-") or not isinstance(ctx.command, ProfctlCommand):
        return False
    opt = ctx.command.argv_table(ctx).by_flag.get(flag)
    return opt is not None and not given(opt.param)


def percent(text: str, flag: str, *, zero: bool = False) -> float:
    """A threshold option's value (`--fail-if-slower`, `--threshold`, `--run-noise`, on compare and on bench --ab)
    as a fraction: `5%` -> 0.05. One reading for every such number: the percent sign is required, because a bare
    number reads two ways (0.6 as 0.6 % or as 60 %?) and guessing made `0.6` a 60 % gate beside `1` meaning 1 %.
    `zero`: 0 (bare or 0%) is allowed, and is 0. UsageError naming the flag, as typed, otherwise."""
    t = text.strip()
    flag = typed_flags().get(flag.lstrip("-").replace("-", "_"), flag)
    body = t[:-1].strip() if t.endswith("%") else None
    try:
        v = float(body if body is not None else t)
    except ValueError:
        raise UsageError(f"{flag} {text!r}: give a percentage such as 5%") from None
    if zero and v == 0:
        return 0.0
    if body is None:
        ways = f"{v:g}% or {v * 100:g}%" if 0 < v < 1 else f"{v:g}%"
        raise UsageError(f"{flag} {t}: a threshold needs its percent sign ({ways}?): a bare number could be a "
                         "percent or a fraction")
    if not 0 < v < 100:
        raise UsageError(f"{flag} {t}: must be more than 0% and less than 100%")
    return v / 100.0



def double_dash_given() -> bool:
    """Whether the command line of the command being run had '--' (the start of a program to profile)."""
    ctx = _RUNNING.get()
    return ctx is not None and ctx.meta.get(_PROGRAM) is not None


def format_from_extension() -> str | None:
    """`-o NAME.ext` when the running command's format was taken from that name (no -f given), else None."""
    ctx = _RUNNING.get()
    return ctx.meta.get(FROM_EXTENSION) if ctx is not None else None
