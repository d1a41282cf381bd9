"""What every command shares: the workload options, how a command line is read (bare flags, hidden old
spellings, an option that would swallow the next one), one-line errors that name the flag as typed, checks that
run before anything slow, and the console."""

from __future__ import annotations

import errno
import functools
import inspect
import re
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import typer
from typer.core import TyperCommand

from profctl.errors import ProfctlError, UsageError


def _click(module: str) -> Any:
    """A module of the click typer runs on: its own copy (newer typer) or the click package (older typer)."""
    import importlib

    try:
        return importlib.import_module(f"typer._click.{module}")
    except ImportError:  # pragma: no cover - depends on the installed typer
        return importlib.import_module(f"click.{module}")


ClickUsageError: Any = _click("exceptions").UsageError
get_current_context: Any = _click("globals").get_current_context


def _is_option(p: Any) -> bool:
    return getattr(p, "param_type_name", "") == "option"

F = TypeVar("F", bound=Callable[..., Any])

_LIST = "comma list"


def _opt(default: Any, *flags: str, help: str) -> Any:
    return typer.Option(default, *flags, help=help, rich_help_panel="Workload")


#: (parameter name, annotation, typer option) for every workload option, in --help order. A list is one comma
#: list: an option given twice is an error (ProfctlCommand), never a silent replacement.
WORKLOAD_OPTIONS: list[tuple[str, Any, Any]] = [
    ("backend", str | None, _opt(None, "--backend", "--backends", "-b",
        help=f"{_LIST}: flash-attn, fa4, sdpa-flash, sdpa-cudnn, sdpa-efficient, sdpa-math, eager "
             "[default: all on GPU; sdpa-flash,sdpa-math,eager on CPU]")),
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
        help="GiB: cap the allocator; points that cannot fit are oom rows (\"fits a 24 GB GPU?\")")),
    ("part_timing", bool, _mopt(True, "--part-timing/--no-part-timing",
        help="time each part of the step (attention's share) with CUDA events")),
]
#: parameters that take a comma list (a second value is a sweep, not a replacement)
_LIST_PARAMS = {n for n, _, opt in WORKLOAD_OPTIONS + MODEL_OPTIONS if "comma list" in str(getattr(opt, "help", ""))}
#: attention-only options, refused with --model (they would be silently ignored)
_ATTENTION_ONLY = {"seqlen_q": "--seqlen-q", "seqlen_kv": "--seqlen-kv", "heads": "--heads", "head_dim": "--head-dim",
                   "causal": "--causal", "pass_": "--pass", "layout": "--layout", "flush_l2": "--flush-l2"}
_MODEL_ONLY = {"layers": "--layers", "mode": "--mode", "memory_limit": "--memory-limit"}


def build_workload(kw: dict[str, Any]) -> Any:
    """The built-in workload the options describe: the model workload with --model, else attention."""
    from profctl.errors import UsageError
    from profctl.pipelines.targets import Model, Workload
    from profctl.spec import AttentionSweep, ModelSweep

    model = kw.pop("model", None)
    mopts = {n: kw.pop(n, None) for n in ("layers", "mode", "memory_limit", "part_timing")}
    if model is None:
        given = [flag for n, flag in _MODEL_ONLY.items() if mopts.get(n) is not None]
        if given:
            raise UsageError(f"{', '.join(given)}: model options need --model")
        return Workload(AttentionSweep.from_strings(**kw))
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
#: options that may stand alone: the value a bare one means (every benchmark script spells it `--causal`)
BARE_VALUE = {"--causal": "true"}
#: negated spellings of those: the option and the value they mean
NEGATED = {"--no-causal": ("--causal", "false")}
#: old spellings kept for one release, hidden from --help: command ('*': any) -> {old: new words}
OLD_SPELLINGS: dict[str, dict[str, tuple[str, ...]]] = {
    "*": {"--reports-dir": ("--reports",)},
    "bench": {"--point-timeout": ("--timeout",)},
    "runs": {"-n": ("--limit",)},
    "doctor": {"--json": ("--format", "json")},
}
#: what CHANGELOG.md says about each old spelling (shown once when it is used)
REMOVED_IN = "0.3"
_TYPED = "profctl.typed"


class ProfctlCommand(TyperCommand):
    """A typer command that reads its command line as kernel engineers type it, and answers a wrong one in one
    line: ``--causal`` alone means true and ``--no-causal`` false; an option that takes a value never swallows
    the option after it (``--backend --seqlen 512`` is an error, not the backend "--seqlen"); an old spelling is
    accepted with a note; click's own usage errors become ``profctl: error: ...`` lines. The flags as typed are
    kept in the context, so error messages name the one the user typed (``-s``, not ``--seqlen-q``)."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        for p in self.params:  # `[default: ...]` in a help text is rich markup to typer's help: keep it text
            text = getattr(p, "help", None)
            if text and "[" in text and "\\[" not in text:
                setattr(p, "help", text.replace("[", "\\["))  # noqa: B010 - typer's options have it, not click's type
                if "[default:" in text:  # the text says the default in words: no second, typer-made one
                    setattr(p, "show_default", False)  # noqa: B010

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        try:
            args, typed = rewrite_args(self, ctx, list(args))
        except UsageError as e:
            err(e.one_line())
            raise typer.Exit(2) from None
        ctx.meta[_TYPED] = typed
        try:
            return super().parse_args(ctx, args)
        except ClickUsageError as e:
            if type(e).__name__ == "NoArgsIsHelpError":
                raise
            msg = e.format_message().rstrip(".")
            err(translate(f"{self.name}: {msg[:1].lower()}{msg[1:]}; see `profctl {self.name} --help`", ctx))
            raise typer.Exit(2) from None


def _options(cmd: Any, ctx: Any) -> tuple[dict[str, str], set[str], set[str]]:
    """{flag: parameter name} of every option of `cmd`, the flags that take a value, and the parameters that
    may be given several times."""
    names: dict[str, str] = {}
    valued: set[str] = set()
    multiple: set[str] = set()
    for p in cmd.get_params(ctx):
        if not _is_option(p):
            continue
        if getattr(p, "multiple", False):
            multiple.add(str(p.name))
        for flag in [*p.opts, *p.secondary_opts]:
            names[flag] = str(p.name)
            if not (getattr(p, 'is_flag', False) or getattr(p, 'count', False)):
                valued.add(flag)
    return names, valued, multiple


def rewrite_args(cmd: Any, ctx: Any, args: list[str]) -> tuple[list[str], dict[str, str]]:
    """The command line with bare and negated flags given their values and old spellings replaced; and
    {parameter name: flag as typed}. UsageError for an option that would swallow the next option, and for an
    option given twice with different values (`--seqlen 512 ... --seqlen 1024`, `--causal --no-causal`): one of
    them would silently win."""
    names, valued, multiple = _options(cmd, ctx)
    old = {**OLD_SPELLINGS["*"], **OLD_SPELLINGS.get(str(cmd.name), {})}
    old = {k: v for k, v in old.items() if v[0] in names}

    def is_option(tok: str) -> bool:
        head = tok.split("=", 1)[0] if tok.startswith("--") else tok
        return tok == "--" or head in names or head in old or head in NEGATED or tok in ("--help",)

    out: list[str] = []
    seen: dict[str, list[tuple[str, str, str]]] = {}  # parameter -> (flag as typed, value, as shown) each time
    i = 0
    while i < len(args):
        tok = args[i]
        if tok == "--":  # the rest belongs to a user's program
            out += args[i:]
            break
        head, eq, value = tok.partition("=") if tok.startswith("--") else (tok, "", "")
        typed_as = head
        bare = False
        words: list[str] = [tok]
        if head in old:
            note(f"note: {head} is now {' '.join(old[head])}; the old spelling goes in {REMOVED_IN}")
            words = [*old[head][:-1], old[head][-1] + (eq + value if eq else "")]
            head = old[head][0]
        elif head in NEGATED and NEGATED[head][0] in names:
            head, value = NEGATED[head]
            words, eq, bare = [head, value], "=", True
        nxt = args[i + 1] if i + 1 < len(args) else None
        if head in names and head in valued and not eq and words[-1] == head:
            if head in BARE_VALUE and (nxt is None or is_option(nxt)):
                words, value, eq, bare = [*words, BARE_VALUE[head]], BARE_VALUE[head], "=", True
            elif nxt is not None and is_option(nxt) and not _is_number(nxt):
                raise UsageError(f"{typed_as} needs a value, but the word after it is the option {nxt}",
                                 hint=f"give {typed_as} a value (e.g. {typed_as} VALUE {nxt} ...)")
        if head in names:
            given_value = value if eq else (nxt if head in valued and nxt is not None and words[-1] == head
                                            else typed_as)
            shown = typed_as if bare or given_value == typed_as else f"{typed_as} {given_value}"
            seen.setdefault(names[head], []).append((typed_as, str(given_value), shown))
        out += words
        i += 1
    for param, occ in seen.items():
        if param not in multiple and len({v for _, v, _ in occ}) > 1:
            (_, v1, a), (_, v2, b) = occ[0], next(o for o in occ[1:] if o[1] != occ[0][1])
            sweep = " (a comma list sweeps several values)" if "," in v1 + v2 or param in _LIST_PARAMS else ""
            raise UsageError(f"{a} and {b} both given: one would silently replace the other; give one{sweep}")
    return out, {param: occ[0][0] for param, occ in seen.items()}


def _is_number(tok: str) -> bool:
    return re.fullmatch(r"-\d+(\.\d*)?", tok) is not None


def typed_flags() -> dict[str, str]:
    """{parameter name: flag as the user typed it} of the command being run ({} outside one)."""
    ctx = get_current_context(silent=True)
    while ctx is not None:
        if _TYPED in ctx.meta:
            return dict(ctx.meta[_TYPED])
        ctx = ctx.parent
    return {}


#: flags a message may name for an option the user gave under another one (`--seqlen` sets seqlen-q and -kv)
_DERIVED = {"--seqlen-q": "seqlen", "--seqlen-kv": "seqlen"}


def translate(msg: str, ctx: Any = None) -> str:
    """`msg` with every flag named the way the user typed it (`-s` where profctl says `--seqlen-q`)."""
    if ctx is None:
        ctx = get_current_context(silent=True)
    if ctx is None:
        return msg
    typed = typed_flags() if _TYPED not in ctx.meta else dict(ctx.meta[_TYPED])
    if not typed:
        return msg
    canonical: dict[str, str] = {}
    for p in ctx.command.get_params(ctx):
        if _is_option(p) and p.name in typed:
            longs = [o for o in p.opts if o.startswith("--")] or list(p.opts)
            for o in [*longs, *p.opts]:
                if o != typed[p.name]:
                    canonical.setdefault(o, typed[p.name])
    for flag, param in _DERIVED.items():
        if param in typed and flag not in canonical and not any(
                t == flag for t in typed.values()):
            canonical[flag] = typed[param]

    def sub(m: re.Match[str]) -> str:
        return canonical.get(m.group(0), m.group(0))

    return re.sub(r"(?<![\w-])--?[A-Za-z][\w-]*(?![\w-])", sub, msg)


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
        import io

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
        from profctl.spec import SpecError

        real = sys.stdout
        sys.stdout = _GuardedStdout(real)
        try:
            out = fn(*args, **kw)
            sys.stdout.flush()
            return out
        except ProfctlError as e:
            err(translate(e.one_line()))
            raise typer.Exit(e.exit_code) from None
        except SpecError as e:
            err(translate(str(e)))
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            err("interrupted; finished results were kept")
            raise typer.Exit(130) from None
        except (StdoutFailed, OSError) as e:
            oserr = e.error if isinstance(e, StdoutFailed) else e
            if oserr.errno == errno.EPIPE:  # `| head` closed the pipe: not an error
                _silence_stdout(real)
                raise typer.Exit(0) from None
            from profctl.fsutil import why

            if isinstance(e, StdoutFailed):
                _silence_stdout(real)
                err(f"cannot write to standard output: {why(oserr)}")
            else:
                err(f"{oserr.filename}: {why(oserr)}" if oserr.filename else why(oserr))
            raise typer.Exit(1) from None
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except Exception as e:  # a bug of profctl's: still one line for the user, the traceback on request
            import os

            if os.environ.get("PROFCTL_DEBUG"):
                raise
            err(f"internal error: {type(e).__name__}: {e} (set PROFCTL_DEBUG=1 for the traceback, and please "
                "report it)")
            raise typer.Exit(70) from None
        finally:
            sys.stdout = real

    return wrapper  # type: ignore[return-value]


def _silence_stdout(stream: Any) -> None:
    """Point standard output at /dev/null and drop what is still buffered, so Python's own flush at exit does
    not print a second error."""
    import io
    import os

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


def target_of(wl: Any, program: list[str] | None) -> Any:
    """The request's target: the user's program when one follows '--', else the built-in workload. Workload
    options given together with a program are an error that names them (they would be silently ignored)."""
    if not program:
        return wl
    from dataclasses import fields
    from pathlib import Path

    from profctl.errors import UsageError
    from profctl.pipelines.targets import Program
    from profctl.spec import AttentionSweep

    default = AttentionSweep()
    given = [f.name for f in fields(AttentionSweep) if getattr(wl.sweep, f.name, None) != getattr(default, f.name)]
    if given:
        flag = {"passes": "pass", "backends": "backend", "seqlen_q": "seqlen"}
        names = ", ".join("--" + flag.get(n, n).replace("_", "-") for n in given)
        raise UsageError(f"{names}: workload options do not apply to your program ({' '.join(program)}); give "
                         "either workload options or -- CMD")
    return Program(tuple(program), cwd=Path.cwd())


def command_line() -> tuple[str, ...]:
    """The command line as typed, for the run's manifest."""
    return ("profctl", *sys.argv[1:])


def given(name: str) -> bool:
    """Whether the user gave option `name` (a parameter name) on the command line, rather than its default."""
    ctx = get_current_context(silent=True)
    if ctx is None:
        return False
    src = ctx.get_parameter_source(name)
    return getattr(src, "name", "DEFAULT") not in ("DEFAULT", "DEFAULT_MAP")


def conflict(a: str, b: str, why: str) -> UsageError:
    """The error for two options that contradict each other: names both, as typed, and why."""
    return UsageError(f"{a} and {b} contradict each other: {why}")


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
    from profctl.fsutil import check_writable

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
            check_writable(p, flag)


def check_reports(reports: Path | str | None) -> None:
    """Before any work: the run store's root takes a new run directory (a read-only --reports fails now, not
    after the sweep)."""
    from profctl import runs
    from profctl.errors import CannotWrite
    from profctl.fsutil import write_problem

    root = runs.reports_root(reports)
    why = write_problem(root / "run")
    if why:
        why = why.replace(f" (in {root})", "")
        raise CannotWrite(f"cannot create a run directory under {root}: {why}",
                          hint="pass --reports DIR (or set PROFCTL_REPORTS) to a folder you can write")


def validate_workload(wl: Any) -> Any:
    """Every workload option checked before anything runs (SpecError/UsageError naming the option), the device
    decided (NVML: milliseconds), a warning for each head dim a backend of the sweep will pad or refuse, and for
    each dtype some backend refuses (fp8); one line and no run at all when no case can take its dtype and pass.
    Returns the workload with the device decided."""
    from profctl.pipelines.targets import resolve_device
    from profctl.spec import SpecError, dtype_problems, head_dim_warnings

    try:
        specs = wl.sweep.specs()
    except SpecError as e:
        raise UsageError(str(e)) from None
    if hasattr(wl.sweep, "head_dim"):  # the attention workload
        fatal, warnings = dtype_problems(specs)
        if fatal:  # exit 1, as a sweep whose every point was refused: nothing could run, said before running
            from profctl.errors import UnsupportedShape

            raise UnsupportedShape(f"no point can run: {fatal}")
        for w in warnings:
            warn(w)
    device = resolve_device(wl.sweep.device)
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
        from profctl.fsutil import atomic_write_text

        atomic_write_text(output, text)
        return
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
