"""The options every profiling command shares, built once: the attention workload's, the model workload's and
--reports'; the workload they describe, and its check before anything runs."""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
from collections.abc import Callable
from typing import Any, TypeVar

import typer

from profctl.cli._messages import warn
from profctl.errors import SpecError, UnsupportedShape, UsageError

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
        help=f"{_LIST}: flash-attn, fa4, sdpa-flash, sdpa-cudnn, sdpa-efficient, sdpa-math, eager, triton, flex, "
             "flex-fa4, or your function as path/file.py:fn or package.module:fn [default: all on GPU; flex, "
             "flex-fa4 only when named; sdpa-flash,sdpa-math,eager on CPU]")),
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
    ("window", str | None, _opt(None, "--window",
        help=f"{_LIST}: a sliding window of W keys (none: no window), e.g. none,1024; backends without a native "
             "window say 'not run here' (docs/bench.md)")),
    ("docs", str | None, _opt(None, "--docs",
        help=f"{_LIST}: documents packed into the sequence, N equal ones or lengths joined by '+' (4, 1024+3072, "
             "none)")),
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
                   "causal": "--causal", "pass_": "--pass", "layout": "--layout", "flush_l2": "--flush-l2",
                   "window": "--window", "docs": "--docs"}
_MODEL_ONLY = {"layers": "--layers", "mode": "--mode"}
#: the type of one item of each comma-list option, for a typed client (the MCP server's schema: a list of these);
#: the other options are typed by their annotation. With WORKLOAD_OPTIONS and MODEL_OPTIONS, the one definition
#: of the workload options that the CLI and profctl.mcp_server share.
ITEM_TYPES: dict[str, type] = {
    "backend": str, "batch": int, "seqlen": int, "seqlen_q": int, "seqlen_kv": int, "heads": int, "kv_heads": int,
    "head_dim": int, "dtype": str, "causal": bool, "window": str, "docs": str, "pass_": str, "layout": str,
    "model": str, "layers": int, "mode": str,
}


@dataclasses.dataclass(frozen=True)
class TypedOption:
    """One workload option as a typed client sees it: its parameter name, the CLI's flags (``--nvtx/--no-nvtx``
    for a switch), the type of one item (``many``: a list that sweeps, the CLI's comma list), the CLI's default
    and its help, said for a list rather than a comma list."""

    name: str
    flags: tuple[str, ...]
    item: type
    many: bool
    default: Any
    help: str

    @property
    def flag(self) -> str:
        """The long flag a command line uses (the first one)."""
        return next(f for f in self.flags if f.startswith("--"))

    def argv(self, value: Any) -> list[str]:
        """This option set to `value` on a command line, as one word (``--seqlen=-5`` is a value, never an
        option); a list is the CLI's comma list; a switch is its on or off flag."""
        if self.item is bool and not self.many:
            on, _, off = self.flag.partition("/")
            return [on if value else off]
        if self.many:
            value = ",".join(str(v).lower() if isinstance(v, bool) else str(v) for v in value)
        return [f"{self.flag}={value}"]


def typed_options(*, exclude: tuple[str, ...] = ()) -> list[TypedOption]:
    """Every workload and model option, in --help order, typed for a client that sends lists and numbers."""
    out = []
    for name, ann, opt in WORKLOAD_OPTIONS + MODEL_OPTIONS:
        if name in exclude:
            continue
        many = name in ITEM_TYPES
        item = ITEM_TYPES.get(name) or next(t for t in (bool, int, float, str) if t is ann or t in
                                            getattr(ann, "__args__", ()))
        text = str(opt.help)
        if many:  # the CLI's "comma list" is a list here
            text = re.sub(r"\ba comma list\b|^comma list\b", "a list", text)
        default = opt.default if opt.default is not None else None
        if not many and default is not None and "[default:" not in text:
            text += f" [default: {str(default).lower() if isinstance(default, bool) else default}]"
        out.append(TypedOption(name, tuple(opt.param_decls), item, many, default, text))
    return out


def build_workload(kw: dict[str, Any]) -> Any:
    """The built-in workload the options describe: the model workload with --model, else attention."""
    from profctl.model_spec import ModelSweep
    from profctl.pipelines.targets import Model, Workload
    from profctl.spec import AttentionSweep

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

