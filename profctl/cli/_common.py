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
        except (typer.Exit, typer.Abort, SystemExit):
            raise
        except Exception as e:  # a bug of profctl's: still one line for the user, the traceback on request
            import os

            if os.environ.get("PROFCTL_DEBUG"):
                raise
            err(f"internal error: {type(e).__name__}: {e} (set PROFCTL_DEBUG=1 for the traceback, and please "
                "report it)")
            raise typer.Exit(70) from None

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
