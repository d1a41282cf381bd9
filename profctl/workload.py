"""The workload options every profiling command shares, resolved into specs and the child's command line.

`profctl bench`, `nsys`, `ncu` and `torch` all launch ``python -m workloads.attention`` with the same options;
this module owns how those options are validated, defaulted (small shapes on CPU) and turned into argv.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from profctl.errors import UsageError
from workloads.spec import BACKENDS, AttentionSpec, SpecError, parse_list, specs_from_options

#: defaults when the user gives no shape: a real comparison on a GPU, one that finishes in seconds on a CPU
GPU_DEFAULTS = {"batch": "1", "seqlen": "1024,2048,4096", "heads": "32", "head_dim": "128", "dtype": "bf16"}
CPU_DEFAULTS = {"batch": "1", "seqlen": "256,512,1024", "heads": "8", "head_dim": "64", "dtype": "fp32"}
CPU_BACKENDS = ("sdpa-flash", "sdpa-math", "eager")


@dataclass(frozen=True)
class WorkloadArgs:
    """Workload options as the user typed them (comma lists as strings); None means 'default'."""

    backend: str | None = None
    batch: str | None = None
    seqlen: str | None = None
    seqlen_q: str | None = None
    seqlen_kv: str | None = None
    heads: str | None = None
    kv_heads: str | None = None
    head_dim: str | None = None
    dtype: str | None = None
    causal: str | None = None
    pass_: str | None = None
    layout: str | None = None
    device: str = "auto"
    warmup: int = 3
    iters: int = 10
    seed: int = 0
    nvtx: bool = True
    check: bool = True
    flush_l2: bool = False
    extra_env: dict[str, str] = field(default_factory=dict)

    # ------------------------------------------------------------------------------------------------------
    def resolved(self) -> WorkloadArgs:
        """Fill device, backends and shapes with defaults; validate everything (UsageError names the value)."""
        dev = resolve_device(self.device)
        d = GPU_DEFAULTS if dev == "cuda" else CPU_DEFAULTS
        backend = self.backend or ",".join(BACKENDS if dev == "cuda" else CPU_BACKENDS)
        given_shape = any(x is not None for x in (self.seqlen, self.seqlen_q))
        out = replace(
            self, device=dev, backend=backend,
            batch=self.batch or d["batch"],
            seqlen=self.seqlen if given_shape else d["seqlen"],
            heads=self.heads or d["heads"], head_dim=self.head_dim or d["head_dim"], dtype=self.dtype or d["dtype"],
            causal=self.causal or "false", pass_=self.pass_ or "fwd", layout=self.layout or "bhsd",
        )
        if self.warmup < 0:
            raise UsageError(f"--warmup must be >= 0, got {self.warmup}")
        if self.iters <= 0:
            raise UsageError(f"--iters must be positive, got {self.iters}")
        out.specs()  # validates
        return out

    def specs(self) -> list[AttentionSpec]:
        sq = self.seqlen_q or self.seqlen
        skv = self.seqlen_kv  # None: each case's seqlen_kv equals its seqlen_q (--seqlen sets both)
        try:
            specs = specs_from_options(
                backend=self.backend or "", batch=self.batch or "", seqlen_q=sq or "", seqlen_kv=skv,
                heads=self.heads or "", kv_heads=self.kv_heads, head_dim=self.head_dim or "", dtype=self.dtype or "",
                causal=self.causal or "false", pass_=self.pass_ or "fwd", layout=self.layout or "bhsd",
                device=self.device if self.device != "auto" else "cpu")
        except SpecError as e:
            raise UsageError(str(e)) from None
        if not specs:
            raise UsageError("the workload options select no case (an empty list?)")
        return specs

    def manifest_dict(self) -> dict[str, Any]:
        """The options as recorded in a run's manifest (``pass`` spelled as on the command line)."""
        from dataclasses import asdict

        d = asdict(self)
        d.pop("extra_env", None)
        d["pass"] = d.pop("pass_")
        return d

    def backends(self) -> list[str]:
        return parse_list(self.backend, option="--backend")

    def child_argv(self, *, jsonl: Path | None = None, skip: int = 0, extra: list[str] | None = None,
                   python: str | None = None) -> list[str]:
        """``python -m workloads.attention ...`` for these options (resolved first)."""
        r = self if self.device != "auto" else self.resolved()
        argv = [python or sys.executable, "-m", "workloads.attention",
                "--backend", r.backend or "", "--batch", r.batch or "", "--heads", r.heads or "",
                "--head-dim", r.head_dim or "", "--dtype", r.dtype or "", "--causal", r.causal or "false",
                "--pass", r.pass_ or "fwd", "--layout", r.layout or "bhsd", "--device", r.device,
                "--warmup", str(r.warmup), "--iters", str(r.iters), "--seed", str(r.seed)]
        if r.seqlen_q:
            argv += ["--seqlen-q", r.seqlen_q]
        elif r.seqlen:
            argv += ["--seqlen", r.seqlen]
        if r.seqlen_kv:
            argv += ["--seqlen-kv", r.seqlen_kv]
        if r.kv_heads:
            argv += ["--kv-heads", r.kv_heads]
        if not r.nvtx:
            argv.append("--no-nvtx")
        if not r.check:
            argv.append("--no-check")
        if r.flush_l2:
            argv.append("--flush-l2")
        if jsonl is not None:
            argv += ["--jsonl", str(jsonl)]
        if skip:
            argv += ["--skip", str(skip)]
        return argv + list(extra or [])


def resolve_device(device: str) -> str:
    """'auto' -> 'cuda' when PyTorch sees a GPU, else 'cpu'; 'cuda' without a GPU is an error."""
    if device not in ("auto", "cuda", "cpu"):
        raise UsageError(f"unknown device {device!r}; choose auto, cuda or cpu")
    if device == "cpu":
        return "cpu"
    import torch

    has = torch.cuda.is_available()
    if device == "cuda" and not has:
        raise UsageError("--device cuda: PyTorch sees no CUDA GPU here (use --device cpu or auto)")
    return "cuda" if has else "cpu"


def project_root() -> Path:
    """Where workloads/ lives, so the child process imports the same code as the parent."""
    return Path(__file__).resolve().parent.parent


def child_env() -> dict[str, str]:
    """PYTHONPATH for the child so `-m workloads.attention` resolves from any working directory."""
    import os

    root = str(project_root())
    pp = os.environ.get("PYTHONPATH", "")
    return {"PYTHONPATH": root + (os.pathsep + pp if pp else ""), "PYTHONUNBUFFERED": "1"}


__all__ = ["WorkloadArgs", "child_env", "project_root", "resolve_device", "sys"]
