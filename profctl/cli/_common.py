"""What every command shares: the workload options, how a command line is read (profctl.cli.argv: bare flags,
hidden old spellings, an option that would swallow the next one), one-line errors that name the flag as typed,
checks that run before anything slow, and the console."""

from __future__ import annotations

import difflib
import errno
import functools
import inspect
import io
import os
import sys
import time
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from dataclasses import fields
from pathlib import Path
from typing import Any, TypeVar

import typer
from typer.core import TyperCommand

from profctl.cli import argv
from profctl.errors import CannotWrite, ProfctlError, ProgramFailed, SpecError, UnsupportedShape, UsageError
from profctl.fsutil import atomic_write_text, check_writable, why, write_problem
from profctl.render.tables import console, text_console

F = TypeVar("F", bound=Callable[..., Any])

_LIST = "comma list"
#: --reports, said the same way by every command
REPORTS_HELP = "the run store, the folder of run directories [default: $PROFCTL_REPORTS, else ./reports]"


def _opt(default: Any, *flags: str, help: str) -> Any:
    return typer.Option(default, *flags, help=help, rich_help_panel="Workload")


#: (parameter name, annotation, typer option) for every workload option, in --help order. A list is one comma
#: list: an option given twice is an error (ProfctlCommand), never a silent replacement.
WORKLOAD_OPTIONS: list[tuple[str, Any, Any]] = [
    ("backend", str | None, _opt(None, "--backend", "--backends", "-b",
        help=f"{_LIST}: flash-attn, fa4, sdpa-flash, sdpa-cudnn, sdpa-efficient, sdpa-math, eager, triton, or your "
             "function as path/file.py:fn or package.module:fn [default: all on GPU; sdpa-flash,sdpa-math,eager on "
             "CPU]")),
    ("batch", str | None, _opt(None, "--batch", help=f"{_LIST} [default: 1]")),
    ("seqlen", str | None, _opt(None, "--seqlen", "-s",
        help=f"{_LIST}; sets seqlen-q, and seqlen-kv unless --seqlen-kv is given "
             "[default: 1024,2048,4096 GPU; 256,512,1024 CPU]")),
    ("seqlen_q", str | None, _opt(None, "--seqlen-q", help=f"{_LIST} (instead of --seqlen)")),
    ("seqlen_kv", str | None, _opt(None, "--seqlen-kv", help=f"{_LIST} [default: = seqlen-q]")),
    ("heads", str | None, _opt(None, "--heads", help=f"{_LIST} query heads [default: 32 GPU; 8 CPU]")),
    ("kv_heads", str | None, _opt(None, "--kv-heads", help=f"{_LIST} (GQA/MQA) [default: = heads]")),
    ("head_dim", str | None, _opt(None, "--head-dim", "-d", help=f"{_LIST} [default: 128 GPU; 64 CPU]")),
    ("dtype", str | None, _opt(None, "--dtype", help=f"{_LIST} of bf16, fp16, fp32, fp8 (e4m3 with per-tensor "
                                                          "scales: triton, forward only) [default: bf16 GPU; fp32 "
                                                          "CPU]")),
    ("causal", str | None, _opt(None, "--causal",
        help="causal mask: bare --causal is true, --no-causal false; a comma list sweeps (--causal false,true) "
             "[default: false]")),
    ("pass_", str | None, _opt(None, "--pass", help=f"{_LIST} of fwd, bwd, fwd+bwd [default: fwd]")),
    ("layout", str | None, _opt(None, "--layout", help=f"{_LIST} of bhsd, bshd (input tensor layout)")),
    ("device", str, _opt("auto", "--device", help="auto, cuda or cpu")),
    ("warmup", int, _opt(3, "--warmup", help="warm-up iterations per case")),
    ("iters", int, _opt(10, "--iters", "-n", help="measured iterations per case")),
    ("seed", int, _opt(0, "--seed", help="input seed")),
    ("nvtx", bool, _opt(True, "--nvtx/--no-nvtx", help="NVTX ranges around iterations")),
    ("check", bool, _opt(True, "--check/--no-check", help="check outputs against a float64 reference")),
    ("flush_l2", bool, _opt(False, "--flush-l2/--no-flush-l2", help="flush L2 before each iteration")),
]


def _mopt(default: Any, *flags: str, help: str) -> Any:
    return typer.Option(default, *flags, help=help, rich_help_panel="Model workload")


#: options that select the model workload (GPT/Llama-shaped steps with the attention backend inside)
MODEL_OPTIONS: list[tuple[str, Any, Any]] = [
    ("model", str | None, _mopt(None, "--model",
        help=f"{_LIST} of gpt-tiny, gpt-sm, gpt-md, gpt-lg, llama-tiny, llama-7b: time a model step with the "
             "attention backend inside (docs/models.md); --seqlen is the context, --batch, --dtype, --backend, "
             "--kv-heads apply")),
    ("layers", str | None, _mopt(None, "--layers", help=f"{_LIST}: cut the preset to N layers (to fit)")),
    ("mode", str | None, _mopt(None, "--mode", help=f"{_LIST} of train, prefill, decode [default: train]")),
    ("memory_limit", float | None, _mopt(None, "--memory-limit",
        help="GiB: refuse points whose memory estimate is over it (oom rows; also the attention workload) and cap "
             "a model's CUDA allocator (\"fits a 24 GB GPU?\") [default: the memory free on the device]")),
    ("part_timing", bool, _mopt(True, "--part-timing/--no-part-timing",
        help="time each part of the step (attention's share) with CUDA events")),
]
#: attention-only options, refused with --model (they would be silently ignored)
_ATTENTION_ONLY = {"seqlen_q": "--seqlen-q", "seqlen_kv": "--seqlen-kv", "heads": "--heads", "head_dim": "--head-dim",
                   "causal": "--causal", "pass_": "--pass", "layout": "--layout", "flush_l2": "--flush-l2"}
_MODEL_ONLY = {"layers": "--layers", "mode": "--mode"}


def build_workload(kw: dict[str, Any]) -> Any:
    """The built-in workload the options describe: the model workload with --model, else attention."""
    from profctl.pipelines.targets import Model, Workload
    from profctl.spec import AttentionSweep, ModelSweep

    model = kw.pop("model", None)
    mopts = {n: kw.pop(n, None) for n in ("layers", "mode", "memory_limit", "part_timing")}
    if model is None:
        given = [flag for n, flag in _MODEL_ONLY.items() if mopts.get(n) is not None]
        if given:
            raise UsageError(f"{', '.join(given)}: model options need --model")
        return Workload(AttentionSweep.from_strings(**kw, memory_limit_gib=mopts["memory_limit"]))
    given = [flag for n, flag in _ATTENTION_ONLY.items() if kw.get(n) not in (None, False)]
    if given:
        raise UsageError(f"{', '.join(given)}: attention-workload options do not apply with --model")
    sweep = ModelSweep.from_strings(
        model=model, mode=mopts["mode"], layers=mopts["layers"], batch=kw.get("batch"), seqlen=kw.get("seqlen"),
        dtype=kw.get("dtype"), backend=kw.get("backend"), kv_heads=kw.get("kv_heads"), device=kw["device"],
        warmup=kw["warmup"], iters=kw["iters"], seed=kw["seed"], nvtx=kw["nvtx"],
        part_timing=mopts["part_timing"] if mopts["part_timing"] is not None else True,
        memory_limit_gib=mopts["memory_limit"])
    return Model(sweep)


def workload_options(fn: F) -> F:
    """Give a command every workload option; it receives them as one ``wl: Workload`` argument (the built-in
    attention workload over the typed sweep the options describe; SpecError names a bad value)."""
    sig = inspect.signature(fn)
    own = [p for p in sig.parameters.values() if p.name != "wl"]
    options = WORKLOAD_OPTIONS + MODEL_OPTIONS
    extra = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=opt, annotation=ann)
             for name, ann, opt in options]
    names = [n for n, _, _ in options]

    @functools.wraps(fn)
    def wrapper(*args: Any, **kw: Any) -> Any:
        wl = build_workload({n: kw.pop(n) for n in names if n in kw})
        return fn(*args, wl=wl, **kw)

    wrapper.__signature__ = sig.replace(parameters=own + extra)  # type: ignore[attr-defined]
    ann = {k: v for k, v in getattr(fn, "__annotations__", {}).items() if k != "wl"}
    ann.update({n: a for n, a, _ in options})
    wrapper.__annotations__ = ann
    return wrapper  # type: ignore[return-value]


# ------------------------------------------------------------------------------------------ reading argv
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
            return super().invoke(ctx)
        finally:
            _RUNNING.reset(token)


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


# ------------------------------------------------------------------------------------------ errors
class StdoutFailed(Exception):
    """Writing to standard output failed (a full disk under `> file`, /dev/full, a closed pipe)."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


class _GuardedStdout:
    """Standard output as the command sees it: a failed write or flush is a StdoutFailed, so it is told apart
    from a file that cannot be read or written."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def write(self, text: str) -> int:
        try:
            raw = getattr(self._inner, "buffer", None)
            if not isinstance(raw, io.RawIOBase):
                return int(self._inner.write(text))
            # unbuffered (PYTHONUNBUFFERED, python -u): the text layer drops the rest of a short write silently,
            # so write the bytes here until all are out or the write fails
            self._inner.flush()
            view = memoryview(text.encode(self._inner.encoding or "utf-8", self._inner.errors or "strict"))
            while view:
                n = raw.write(view)
                view = view[n or 0:]
            return len(text)
        except OSError as e:
            raise StdoutFailed(e) from None

    def flush(self) -> None:
        try:
            self._inner.flush()
        except OSError as e:
            raise StdoutFailed(e) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def guard(fn: F) -> F:
    """Turn ProfctlError (and bad option values, and an output that cannot be written) into one line on stderr,
    naming flags as typed, and the error's exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kw: Any) -> Any:
        real = sys.stdout
        t0 = time.time()
        sys.stdout = _GuardedStdout(real)
        try:
            out = fn(*args, **kw)
            sys.stdout.flush()
            return out
        except ProfctlError as e:
            _error_lines(e)
            err(translate(e.one_line()))
            raise typer.Exit(e.exit_code) from None
        except SpecError as e:
            err(translate(str(e)))
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            err(_interrupted(t0))
            raise typer.Exit(130) from None
        except (StdoutFailed, OSError) as e:
            oserr = e.error if isinstance(e, StdoutFailed) else e
            if oserr.errno == errno.EPIPE:  # `| head` closed the pipe: not an error
                _silence_stdout(real)
                raise typer.Exit(0) from None
            if isinstance(e, StdoutFailed):
                _silence_stdout(real)
                err(f"cannot write to standard output: {why(oserr)}")
            else:
                err(f"{oserr.filename}: {why(oserr)}" if oserr.filename else why(oserr))
            raise typer.Exit(1) from None
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except Exception as e:  # a bug of profctl's: still one line for the user, the traceback on request
            if os.environ.get("PROFCTL_DEBUG"):
                raise
            err(f"internal error: {type(e).__name__}: {e} (set PROFCTL_DEBUG=1 for the traceback, and please "
                "report it)")
            raise typer.Exit(70) from None
        finally:
            sys.stdout = real

    return wrapper  # type: ignore[return-value]


def _interrupted(t0: float) -> str:
    """The line for Ctrl-C: the run directory this command made (it keeps what had finished), or that none was
    made yet. profctl.run_store is asked only if it was imported: a command that never loaded it made no run."""
    rs = sys.modules.get("profctl.run_store")
    made = rs.made_since(t0) if rs is not None else []
    if not made:
        return "interrupted before any run directory was made"
    return f"interrupted; what had finished is kept in {made[-1]} (profctl show {made[-1].name})"


def _silence_stdout(stream: Any) -> None:
    """Point standard output at /dev/null and drop what is still buffered, so Python's own flush at exit does
    not print a second error."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        os.dup2(fd, stream.fileno())
        os.close(fd)
    except (OSError, ValueError, AttributeError, io.UnsupportedOperation):
        pass


def err(msg: str) -> None:
    print(f"profctl: error: {msg}", file=sys.stderr)


def note(msg: str) -> None:
    print(f"profctl: {msg}", file=sys.stderr)


def warn(msg: str) -> None:
    print(f"profctl: warning: {msg}", file=sys.stderr)


PROGRAM_HELP = ("-- CMD [ARGS...]: profile your own program instead of the built-in workload (everything after "
                "'--' is its command line)")


def program_failed(status: int, lines: Sequence[str], kept: str, run_dir: Any, log: Any) -> ProgramFailed:
    """The error for a user's program that exited with `status`: one line naming its exception and the log, its
    last error lines (its exception) printed above it by @guard."""
    why = f": {lines[-1].strip()}" if lines else ""
    return ProgramFailed(f"the program exited with status {status}{why}; {kept} {run_dir}", log=log,
                         lines=list(lines))


def _error_lines(e: ProfctlError) -> None:
    """A failed program's last error lines, indented, above the one-line error (ProgramFailed.lines)."""
    lines = getattr(e, "lines", None)
    if isinstance(e, ProgramFailed) and lines:
        note(f"the program's last error lines ({e.log}):" if e.log else "the program's last error lines:")
        for ln in lines:
            print(f"    {ln}", file=sys.stderr)


#: --record-function-nvtx, for nsys and ncu
RF_NVTX_HELP = ("your Python program's torch.profiler.record_function ranges also as NVTX ranges (which --range "
                "then selects): the program runs inside profctl's small wrapper (profctl.workloads.rfnvtx)")


def target_of(wl: Any, program: list[str] | None, *, record_function_nvtx: bool = False) -> Any:
    """The request's target: the user's program when one follows '--', else the built-in workload. Workload
    options given together with a program are an error that names them (they would be silently ignored)."""
    if record_function_nvtx and not program:
        raise UsageError("--record-function-nvtx applies to your own Python program: give -- python SCRIPT.py "
                         "ARGS... (the built-in workloads push NVTX ranges of their own)")
    ctx = _RUNNING.get()
    if not program and ctx is not None and ctx.meta.get(_PROGRAM) is not None:
        raise UsageError("nothing after '--': give the program to profile (-- python SCRIPT.py ARGS...), or leave "
                         "out '--' to profile the built-in workload")
    if not program:
        return wl
    from profctl.pipelines.targets import Program
    from profctl.spec import AttentionSweep

    default = AttentionSweep()
    given = [f.name for f in fields(AttentionSweep) if getattr(wl.sweep, f.name, None) != getattr(default, f.name)]
    if given:
        flag = {"passes": "pass", "backends": "backend", "seqlen_q": "seqlen"}
        names = ", ".join("--" + flag.get(n, n).replace("_", "-") for n in given)
        raise UsageError(f"{names}: workload options do not apply to your program ({' '.join(program)}); give "
                         "either workload options or -- CMD")
    return Program(tuple(program), cwd=Path.cwd(), record_function_nvtx=record_function_nvtx)


def with_range_hint(e: Any, target: Any) -> Any:
    """A --range that matched nothing in a Python program profiled without --record-function-nvtx: the error
    says that record_function ranges are not NVTX ranges, and which option makes them so."""
    entry = getattr(target, "python_entry", lambda: None)()
    if entry is not None and not getattr(target, "record_function_nvtx", False):
        e.hint = ("a torch.profiler.record_function range is no NVTX range, so nsys and ncu do not see it: add "
                  "--record-function-nvtx to push the program's record_function ranges as NVTX ranges")
    return e


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


def check_format(format: str, allowed: Sequence[str]) -> None:
    if format not in allowed:
        raise UsageError(f"unknown format {format!r}; choose from {', '.join(allowed)}", hint=None)


def check_limit(limit: int, format: str) -> None:
    """--limit is a count of rows for the tables a person reads; csv and json are data and always whole."""
    if limit < 0:
        raise UsageError(f"--limit must be >= 0, got {limit}")
    if given("limit") and format in ("csv", "json"):
        raise conflict(typed_flags().get("limit", "--limit"), f"--format {format}",
                       "csv and json are always whole; --limit shortens tables (table, markdown, html)")


def check_outputs(*paths: tuple[str, Path | str | None]) -> None:
    """Before any work: every output file can be written (not a directory, a folder that takes files), and no
    two outputs are the same file or both standard output. `paths`: (flag, path) pairs."""
    seen: dict[str, str] = {}
    for flag, p in paths:
        if p is None:
            continue
        key = "-" if str(p) == "-" else str(Path(p).resolve())
        if key in seen:
            where = "standard output" if key == "-" else str(p)
            raise UsageError(f"{seen[key]} and {flag} both write to {where}: give each its own file")
        seen[key] = flag
        if key != "-":
            try:
                check_writable(p, flag)
            except CannotWrite as e:  # found before any work: a bad option value (exit 2, as docs/bench.md says)
                raise UsageError(e.message, hint=e.hint) from None
            missing = Path(p).parent
            if not missing.exists():
                while not missing.parent.exists():
                    missing = missing.parent
                note(f"note: {flag} {p}: the folder {missing} does not exist; it will be made")


def check_reports(reports: Path | str | None) -> None:
    """Before any work: the run store's root takes a new run directory (a read-only --reports fails now, not
    after the sweep)."""
    from profctl import run_store

    root = run_store.reports_root(reports)
    problem = write_problem(root / "run")
    if problem:
        problem = problem.replace(f" (in {root})", "")
        raise UsageError(f"cannot create a run directory under {root}: {problem}",
                         hint="pass --reports DIR (or set PROFCTL_REPORTS) to a folder you can write")


def validate_workload(wl: Any) -> Any:
    """Every workload option checked before anything runs (SpecError/UsageError naming the option), the device
    decided (NVML: milliseconds), a warning for each head dim a backend of the sweep will pad or refuse, and for
    each dtype some backend refuses (fp8); one line and no run at all when no case can take its dtype and pass.
    Returns the workload with the device decided."""
    from profctl.pipelines.targets import resolve_device
    from profctl.spec import dtype_problems, head_dim_warnings

    try:
        specs = wl.sweep.specs()
    except SpecError as e:
        raise UsageError(str(e)) from None
    device = resolve_device(wl.sweep.device)
    if hasattr(wl.sweep, "head_dim"):  # the attention workload
        fatal, warnings = dtype_problems(specs, device)
        if fatal:  # exit 1, as a sweep whose every point was refused: nothing could run, said before running
            raise UnsupportedShape(f"no point can run: {fatal}")
        for w in warnings:
            warn(w)
    if device == "cuda" and hasattr(wl.sweep, "head_dim"):  # the model workload's head dims come from presets
        s = wl.sweep.with_defaults(device)
        for w in head_dim_warnings(s.backends, s.head_dim, s.dtype):
            warn(w)
    return wl


def emit(text: str | None, output: Any = None) -> None:
    """Text to stdout, or atomically to `output` (a path; '-' is stdout)."""
    if text is None:
        return
    if output is not None and str(output) != "-":
        atomic_write_text(output, text)
        return
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def emit_summary(s: Any, format: str, output: Any = None, *, limit: int | None = None) -> None:
    """A Summary in `format` (profctl.render.summary_view: table, markdown, csv, json or html) to `output` or
    stdout; `limit` shortens the table, Markdown and HTML."""
    from profctl.render import summary_view

    if format == "table":
        con, buf = text_console() if output is not None else (console(), None)
        summary_view.to_console(s, con, limit)
        if buf is not None:
            emit(buf.getvalue(), output)
    elif format == "markdown":
        emit(summary_view.to_markdown(s, limit), output)
    elif format == "html":
        emit(summary_view.to_html(s, limit=limit), output)
    else:
        emit(summary_view.to_csv(s) if format == "csv" else summary_view.to_json(s), output)
