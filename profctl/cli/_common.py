"""What every command shares: the workload options, one-line errors, and the console."""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer

from profctl.errors import ProfctlError

F = TypeVar("F", bound=Callable[..., Any])

_LIST = "comma list"


def _opt(default: Any, *flags: str, help: str) -> Any:
    return typer.Option(default, *flags, help=help, rich_help_panel="Workload")


#: (parameter name, annotation, typer option) for every workload option, in --help order
WORKLOAD_OPTIONS: list[tuple[str, Any, Any]] = [
    ("backend", str | None, _opt(None, "--backend", "--backends", "-b",
        help=f"{_LIST}: flash-attn, fa4, sdpa-flash, sdpa-cudnn, sdpa-efficient, sdpa-math, eager "
             "[default: all on GPU; sdpa-flash,sdpa-math,eager on CPU]")),
    ("batch", str | None, _opt(None, "--batch", help=f"{_LIST} [default: 1]")),
    ("seqlen", str | None, _opt(None, "--seqlen", "-s",
        help=f"{_LIST}; sets seqlen-q and seqlen-kv [default: 1024,2048,4096 GPU; 256,512,1024 CPU]")),
    ("seqlen_q", str | None, _opt(None, "--seqlen-q", help=_LIST)),
    ("seqlen_kv", str | None, _opt(None, "--seqlen-kv", help=f"{_LIST} [default: = seqlen-q]")),
    ("heads", str | None, _opt(None, "--heads", help=f"{_LIST} query heads [default: 32 GPU; 8 CPU]")),
    ("kv_heads", str | None, _opt(None, "--kv-heads", help=f"{_LIST} (GQA/MQA) [default: = heads]")),
    ("head_dim", str | None, _opt(None, "--head-dim", "-d", help=f"{_LIST} [default: 128 GPU; 64 CPU]")),
    ("dtype", str | None, _opt(None, "--dtype", help=f"{_LIST} of bf16, fp16, fp32 [default: bf16 GPU; fp32 CPU]")),
    ("causal", str | None, _opt(None, "--causal", help=f"{_LIST} of true/false [default: false]")),
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


def workload_options(fn: F) -> F:
    """Give a command every workload option; it receives them as one ``wl: Workload`` argument (the built-in
    attention workload over the typed sweep the options describe; SpecError names a bad value)."""
    sig = inspect.signature(fn)
    own = [p for p in sig.parameters.values() if p.name != "wl"]
    extra = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=opt, annotation=ann)
             for name, ann, opt in WORKLOAD_OPTIONS]
    names = [n for n, _, _ in WORKLOAD_OPTIONS]

    @functools.wraps(fn)
    def wrapper(*args: Any, **kw: Any) -> Any:
        from profctl.pipelines.targets import Workload
        from profctl.spec import AttentionSweep

        wl = Workload(AttentionSweep.from_strings(**{n: kw.pop(n) for n in names if n in kw}))
        return fn(*args, wl=wl, **kw)

    wrapper.__signature__ = sig.replace(parameters=own + extra)  # type: ignore[attr-defined]
    ann = {k: v for k, v in getattr(fn, "__annotations__", {}).items() if k != "wl"}
    ann.update({n: a for n, a, _ in WORKLOAD_OPTIONS})
    wrapper.__annotations__ = ann
    return wrapper  # type: ignore[return-value]


def guard(fn: F) -> F:
    """Turn ProfctlError (and bad option values) into one line on stderr and the error's exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kw: Any) -> Any:
        from profctl.spec import SpecError

        try:
            return fn(*args, **kw)
        except ProfctlError as e:
            err(e.one_line())
            raise typer.Exit(e.exit_code) from None
        except SpecError as e:
            err(str(e))
            raise typer.Exit(2) from None
        except KeyboardInterrupt:
            err("interrupted; finished results were kept")
            raise typer.Exit(130) from None
        except BrokenPipeError:
            raise typer.Exit(0) from None

    return wrapper  # type: ignore[return-value]


def err(msg: str) -> None:
    print(f"profctl: error: {msg}", file=sys.stderr)


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
    given = [f.name for f in fields(AttentionSweep) if getattr(wl.sweep, f.name) != getattr(default, f.name)]
    if given:
        flag = {"passes": "pass", "backends": "backend", "seqlen_q": "seqlen"}
        names = ", ".join("--" + flag.get(n, n).replace("_", "-") for n in given)
        raise UsageError(f"{names}: workload options do not apply to your program ({' '.join(program)}); give "
                         "either workload options or -- CMD")
    return Program(tuple(program), cwd=Path.cwd())


def command_line() -> tuple[str, ...]:
    """The command line as typed, for the run's manifest."""
    return ("profctl", *sys.argv[1:])


def note(msg: str) -> None:
    print(f"profctl: {msg}", file=sys.stderr)


def emit(text: str | None, output: Any = None) -> None:
    """Text to stdout, or atomically to `output` (a path; '-' is stdout)."""
    if text is None:
        return
    if output is not None and str(output) != "-":
        from profctl.fsutil import atomic_write_text

        atomic_write_text(output, text)
        return
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
