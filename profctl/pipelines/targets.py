"""What runs under a tool. `Workload` is the built-in attention workload (``python -m profctl.workloads.attention``
over a typed sweep); a user's program and a model are targets of their own next to it.

Each is a profctl.pipelines.base.Target: what differs between them for a pipeline (whether --range can name
something, how ncu selects the measured launches, how torch.profiler wraps the program, which backends run) is
a member of the target, so a pipeline has one path for all of them."""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from profctl import flops, nvml, proc, run_store
from profctl.errors import ProfctlError, SpecError, ToolNotFound, UsageError
from profctl.model_spec import ModelSpec, ModelSweep
from profctl.nvtx import DOMAIN, MEASURE, ncu_include
from profctl.pipelines.base import TargetDefaults
from profctl.run_store import torch_cuda_version
from profctl.spec import BUILTIN_BACKENDS, AttentionSpec, AttentionSweep, mask_refusal
from profctl.tools.torchprof import trace_argv

if TYPE_CHECKING:
    from profctl.tools.proton import ProtonOptions
    from profctl.tools.torchprof import TorchOptions

#: the workload child that runs Triton kernels under Proton (profctl proton)
PROTON_MODULE = "profctl.workloads.proton_run"
#: the Triton forward's dtypes that carry Proton scopes (the FP8 forward has none)
PROTON_DTYPES = ("bf16", "fp16")


def resolve_device(device: str) -> str:
    """'auto' -> 'cuda' when a GPU is visible and PyTorch is a CUDA build, else 'cpu'; 'cuda' without a GPU is
    an error."""
    if device not in ("auto", "cuda", "cpu"):
        raise UsageError(f"unknown device {device!r}; choose auto, cuda or cpu")
    if device == "cpu":
        return "cpu"
    has = cuda_usable()
    if device == "cuda" and not has:
        raise UsageError("--device cuda: PyTorch sees no CUDA GPU here (use --device cpu or auto)")
    return "cuda" if has else "cpu"


def cuda_usable() -> bool:
    """Whether a CUDA program started here would see a GPU: asked of NVML and of torch's version file, which
    takes milliseconds (importing torch to ask takes seconds); torch itself only when NVML's Python bindings are
    missing."""
    visible = nvml.visible_gpus()
    if visible is not None:
        return bool(visible) and torch_cuda_version() is not None
    import torch

    return bool(torch.cuda.is_available())


def check_functions(refs: Sequence[str], python: str = sys.executable) -> list[dict[str, Any]]:
    """Load users' attention functions in a child process (`python -m profctl.workloads.backends --check`); UsageError
    with the first problem: no such file or module, a syntax error, no such attribute, not callable, a
    signature that cannot take (q, k, v, is_causal=, scale=)."""

    try:
        out = proc.capture([python, "-m", "profctl.workloads.backends", "--check", *refs], timeout_s=300)
    except ProfctlError as e:
        raise UsageError(f"checking the backend functions {', '.join(refs)} failed: {e.message}") from None
    results = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    bad = [r for r in results if not r.get("ok")]
    if bad:
        raise UsageError(f"--backend {bad[0]['error']}")
    return results


SweepT = TypeVar("SweepT", AttentionSweep, ModelSweep)
T = TypeVar("T", bound="_SweepProgram[Any]")


@dataclass(frozen=True)
class _SweepProgram(TargetDefaults, Generic[SweepT]):
    """A built-in workload program (``python -m MODULE``) over a typed sweep: what the attention and the model
    workloads share. One case per point of the sweep; the child writes JSON-lines events."""

    sweep: SweepT
    python: str = sys.executable
    kind: ClassVar[str] = ""
    module: ClassVar[str] = ""
    @property
    def device(self) -> str:
        return self.sweep.device

    @property
    def nvtx(self) -> bool:
        return self.sweep.nvtx

    def runs_on_cpu(self) -> bool:
        return self.device != "cuda"

    def for_worker(self: T, python: str) -> T:
        return self if python == self.python else replace(self, python=python)

    def resolve(self: T) -> T:
        """The device decided and every default filled; UsageError for options that select nothing valid and
        for a function backend that cannot be loaded (checked in a child process)."""
        dev = resolve_device(self.sweep.device)
        w = replace(self, sweep=self.sweep.with_defaults(dev))
        try:
            w.sweep.specs()
        except SpecError as e:
            raise UsageError(str(e)) from None
        refs = [b for b in w.sweep.backends if b not in BUILTIN_BACKENDS]
        if refs:
            check_functions(refs, self.python)
        return w

    def backends(self) -> tuple[str, ...]:
        return self.sweep.backends

    def cases(self) -> list[Any]:
        return list(self.sweep.specs())

    def costs(self) -> list[float]:
        """A rough guess of each case's seconds, to deal cases into parts of about equal work."""
        return [self.case_cost(s, self.sweep.warmup + self.sweep.iters) for s in self.cases()]

    def case_cost(self, spec: Any, iterations: int) -> float:
        return float(iterations)

    def with_backends(self: T, backends: Sequence[str]) -> T:
        return replace(self, sweep=self.sweep.with_backends(backends))

    def with_iters(self: T, iters: int) -> T:
        return replace(self, sweep=replace(self.sweep, iters=iters))

    def argv(self, *, jsonl: Path | None = None, skip: int = 0, only: Sequence[int] | None = None,
             extra: Sequence[str] = ()) -> list[str]:
        argv = [self.python, "-m", self.module, *self.sweep.to_argv()]
        if jsonl is not None:
            argv += ["--jsonl", str(jsonl)]
        if skip:
            argv += ["--skip", str(skip)]
        if only is not None:
            argv += ["--only", ",".join(str(i) for i in only)]
        return argv + list(extra)

    def env(self) -> dict[str, str]:
        return {"PYTHONUNBUFFERED": "1"}

    def torch_argv(self, trace: Path, jsonl: Path, options: TorchOptions, only: Sequence[int] | None = None
                   ) -> list[str]:
        """The workload records its own measured iterations with torch.profiler (profctl.tools.torchprof)."""
        return self.argv(jsonl=jsonl, only=only, extra=trace_argv(trace, options))


@dataclass(frozen=True)
class Workload(_SweepProgram[AttentionSweep]):
    """The built-in attention workload over `sweep`: one case per (backend, shape, dtype, mask, pass)."""

    kind: ClassVar[str] = "workload"
    module: ClassVar[str] = "profctl.workloads.attention"
    case_ranges: ClassVar[bool] = True

    def cases(self) -> list[AttentionSpec]:
        return self.sweep.specs()

    def manifest(self) -> dict[str, Any]:
        return {"workload": self.sweep.manifest_dict()}

    def case_cost(self, spec: Any, iterations: int) -> float:
        return case_cost(spec, iterations)

    def nvtx_cases(self) -> list[tuple[str, str, str]]:
        """(backend, shape key, pass) of every case, as profctl's NVTX ranges name them."""
        return [(s.label, s.shape_key, s.pass_) for s in self.cases()]

    def ncu_filters(self, range_: str | None, cases: Sequence[int] | None = None) -> list[list[str]]:
        """One regex over the measured ranges of `cases` (every case: None)."""
        every = self.nvtx_cases()
        return [[ncu_include(every if cases is None else [every[i] for i in cases])]]

    def proton_argv(self, out: Path, jsonl: Path, options: ProtonOptions, case: int | None = None,
                    time_iters: int = 0) -> list[str]:
        """Case `case` of profctl's Triton forward with its Proton scopes (one recorded launch; with
        `time_iters`, that many plain and scoped launches timed). Only the 16-bit Triton forward has scopes."""
        spec = self.cases()[case or 0]
        if spec.backend != "triton":
            raise UsageError(f"--backend {spec.backend}: profctl proton records profctl's Triton forward "
                             "(--backend triton), whose steps carry Proton scopes, or your program (-- python ...)")
        if spec.pass_ != "fwd" or spec.dtype not in PROTON_DTYPES:
            raise UsageError(f"--pass {spec.pass_} --dtype {spec.dtype}: the Proton scopes are in the Triton "
                             f"forward in {' or '.join(PROTON_DTYPES)} (--pass fwd)")
        # a window is the forward's own (its tiles skip the blocks outside it); documents it has none of, and the
        # child would record the kernel without them
        why = mask_refusal(spec.backend, spec.window, spec.docs, spec.pass_)
        if why:
            raise UsageError(f"{why}: profctl proton records the Triton forward with the masks it runs")
        return [self.python, "-m", PROTON_MODULE, "--out", str(out), "--jsonl", str(jsonl),
                *options.argv(buffer_default="global"), "--warmup", str(self.sweep.warmup),
                "--case", json.dumps(spec.to_dict()), *(["--time", str(time_iters)] if time_iters else [])]


@dataclass(frozen=True)
class Model(_SweepProgram[ModelSweep]):
    """The model workload (``python -m profctl.workloads.model``): GPT/Llama-shaped steps with a swappable attention
    backend, one case per (model, layers, kv heads, mode, batch, context, dtype, backend)."""

    kind: ClassVar[str] = "model"
    module: ClassVar[str] = "profctl.workloads.model"
    #: what `profctl ncu --model` profiles unless --range names another part: the attention call itself
    DEFAULT_PART: ClassVar[str] = "attn.core"

    def cases(self) -> list[ModelSpec]:
        return self.sweep.specs()

    def manifest(self) -> dict[str, Any]:
        return {"model_workload": self.sweep.manifest_dict()}

    def case_cost(self, spec: Any, iterations: int) -> float:
        """Tokens through the layers per step: a model step's work grows about so (balance only)."""
        layers = getattr(spec, "layers", None) or 8
        return iterations * spec.batch * spec.seqlen * layers * 1e-6

    def part_filter(self, part: str, cases: Sequence[int] | None = None) -> str:
        """ONE regex selecting the launches of part `part` inside the measured steps of every case of the sweep,
        on the main thread (forward) and on autograd's (backward, where the runner pushes the case and phase
        again): ``<case>/measure/<part>/`` in every mode. No '/' inside a group: ncu splits the expression there."""
        specs = self.cases()
        ids = sorted({re.escape(specs[i].case_id) for i in (range(len(specs)) if cases is None else cases)})
        group = ids[0] if len(ids) == 1 else "(" + "|".join(ids) + ")"
        return f"regex:{DOMAIN}@{group}/{MEASURE}/{re.escape(part)}/"

    def ncu_filters(self, range_: str | None, cases: Sequence[int] | None = None) -> list[list[str]]:
        """The launches of the part `range_` names (default: attention itself) in the measured steps."""
        return [[self.part_filter(range_ or self.DEFAULT_PART, cases)]]


#: backends that work on the whole score matrix: their time per FLOP relative to a flash kernel, and how much a
#: causal mask adds (benchmarks/RESULTS.md, H100 bf16: eager 3.2 ms vs 0.78 for sdpa-flash, 5.8 ms causal)
_DENSE_BACKENDS = {"eager": (4.0, 1.8), "sdpa-math": (15.0, 1.2)}
_FLOP_RATE = 3e14  # FLOP/s of a flash kernel, roughly
_RANDN_RATE = 1e8  # input elements per second drawn on the CPU


def case_cost(spec: AttentionSpec, iterations: int) -> float:
    """A rough guess of a case's seconds -- its iterations at a flash kernel's rate (dense backends slower, and
    slower again with a causal mask, which flash kernels halve), plus drawing its inputs on the CPU. Only used to
    deal cases into parts of about equal work; a wrong guess costs balance, never correctness."""
    factor, causal_extra = _DENSE_BACKENDS.get(spec.backend, (1.0, 0.0))
    if causal_extra:
        work = flops.flops(spec.with_(causal=False)) * factor * (causal_extra if spec.causal else 1.0)
    else:
        work = flops.flops(spec)
    bwd = spec.pass_ != "fwd"
    elements = spec.batch * spec.head_dim * ((2 if bwd else 1) * spec.heads * spec.seqlen_q
                                             + 2 * spec.kv_heads * spec.seqlen_kv)
    return iterations * work / _FLOP_RATE + elements / _RANDN_RATE


#: environment variables a program run records in its manifest (they change what it does): profctl.run_store' list
ENV_OF_INTEREST = run_store.ENV_OF_INTEREST
ENV_PREFIXES = run_store.ENV_PREFIXES


@dataclass(frozen=True)
class Program(TargetDefaults):
    """A user's own program (`profctl nsys|ncu|torch -- CMD ARGS...`): run as given, in `cwd`, with the
    parent's environment plus `env`. It has no cases of profctl's; what the tools capture of it is chosen by
    the request (the whole run, an NVTX range, cudaProfilerStart/Stop)."""

    command: tuple[str, ...]
    cwd: Path | None = None
    extra_env: tuple[tuple[str, str], ...] = ()
    kind: str = "program"
    device: str = "cuda"
    #: a Python program's torch.profiler.record_function ranges pushed as NVTX ranges too (nsys and ncu see them:
    #: it runs inside profctl.workloads.rfnvtx)
    record_function_nvtx: bool = False
    foreign: ClassVar[bool] = True  # its NVTX ranges: whatever it pushes itself (TargetDefaults.nvtx)

    def resolve(self) -> Program:
        """UsageError for an empty command; ToolNotFound for an executable that is not there."""

        if not self.command:
            raise UsageError("no program given: profctl nsys|ncu|torch [OPTIONS] -- CMD [ARGS...]")
        if self.record_function_nvtx and self.python_entry() is None:
            raise UsageError("--record-function-nvtx runs a Python program's record_function ranges as NVTX "
                             "ranges: give -- python SCRIPT.py ARGS... or -- python -m MODULE ARGS...")
        exe = self.command[0]
        where = Path(self.cwd or ".") / exe if os.sep in exe else None
        found = (where.is_file() and os.access(where, os.X_OK)) if where is not None else shutil.which(exe)
        if not found:
            raise ToolNotFound(f"cannot run {exe}: no such executable"
                               + ("" if os.sep in exe else " on PATH"))
        return self

    def cases(self) -> list[Any]:
        return []  # run as given, wherever (TargetDefaults.for_worker): nothing of profctl's in it

    def ncu_filters(self, range_: str | None, cases: Sequence[int] | None = None) -> list[list[str]]:
        """A --range: its push/pop form (``name/``), then its start/end form (``name``) -- ncu matches them
        differently and a program may use either. No --range: no NVTX filter (the whole program)."""
        return [[f"{range_}/"], [range_]] if range_ else [[]]

    def torch_argv(self, trace: Path, jsonl: Path, options: TorchOptions, only: Sequence[int] | None = None
                   ) -> list[str]:
        """The user's Python program inside profctl's torch.profiler wrapper (profctl.workloads.pyprofile). A bare
        ``python``/``python3`` means the interpreter profctl runs in (it has profctl and torch); an interpreter
        given by its path is used as given."""
        entry = self.python_entry(code=True)
        if entry is None:
            raise UsageError("profctl torch profiles Python programs: give -- python SCRIPT.py ARGS..., "
                             "-- python -m MODULE ARGS... or -- python -c CODE (use profctl nsys or ncu for other "
                             "programs)")
        return [self._python(), "-m", "profctl.workloads.pyprofile", "--trace", str(trace), "--jsonl", str(jsonl),
                *options.argv(), "--", *entry]

    def proton_argv(self, out: Path, jsonl: Path, options: ProtonOptions, case: int | None = None,
                    time_iters: int = 0) -> list[str]:
        """The user's Python program inside a Proton session (profctl.workloads.proton_run): its kernels are
        compiled with Proton's instrumentation, so the scopes their @triton.jit code opens are recorded."""
        entry = self.python_entry()
        if entry is None:
            raise UsageError("profctl proton records Triton kernels of Python programs: give -- python SCRIPT.py "
                             "ARGS... or -- python -m MODULE ARGS...")
        return [self._python(), "-m", PROTON_MODULE, "--out", str(out), "--jsonl", str(jsonl), *options.argv(),
                "--", *entry]

    def argv(self, *, jsonl: Path | None = None, skip: int = 0, only: Sequence[int] | None = None,
             extra: Sequence[str] = ()) -> list[str]:
        entry = self.python_entry() if self.record_function_nvtx else None
        if entry is None:
            return list(self.command)
        return [self._python(), "-m", "profctl.workloads.rfnvtx", "--", *entry]

    def _python(self) -> str:
        """The interpreter a Python program runs with under a wrapper of profctl's: the one given by its path,
        else (a bare ``python``) the one profctl runs in, which has profctl and torch."""
        first = self.command[0]
        return first if Path(first).name.startswith("python") and "/" in first else sys.executable

    def env(self) -> dict[str, str]:
        return dict(self.extra_env)

    def manifest(self) -> dict[str, Any]:
        env = run_store.env_of_interest()
        env.update(dict(self.extra_env))
        return {"program": {"argv": list(self.command), "cwd": str(Path(self.cwd or ".").resolve()),
                            "environment": env}}

    def python_entry(self, *, code: bool = False) -> list[str] | None:
        """``[script.py, args...]`` or ``[-m, module, args...]`` when the program is a Python script run by a
        Python interpreter (or a .py file given directly); with `code` (a wrapper that runs it: torch's) also
        ``[-c, code, args...]`` for ``python -c CODE``; None otherwise."""
        cmd = list(self.command)
        python = bool(cmd) and Path(cmd[0]).name.startswith("python")
        if python:
            cmd = cmd[1:]
            while cmd and cmd[0].startswith("-") and cmd[0] not in ("-m", "-c"):
                cmd = cmd[1:]  # interpreter flags (-u, -O, -X ...) do not matter under the wrapper
        if not cmd:
            return None
        if cmd[0] == "-c":
            return cmd if code and python and len(cmd) > 1 else None
        if cmd[0] == "-m" and len(cmd) > 1:
            return cmd
        return cmd if cmd[0].endswith(".py") else None
