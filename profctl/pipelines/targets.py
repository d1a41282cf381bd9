"""What runs under a tool. `Workload` is the built-in attention workload (``python -m workloads.attention``
over a typed sweep); a user's program and a model are targets of their own next to it."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from profctl.errors import UsageError
from profctl.spec import AttentionSpec, AttentionSweep, SpecError


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
    from profctl import nvml
    from profctl.runs import torch_cuda_version

    visible = nvml.visible_gpus()
    if visible is not None:
        return bool(visible) and torch_cuda_version() is not None
    import torch

    return bool(torch.cuda.is_available())


@dataclass(frozen=True)
class Workload:
    """The built-in attention workload over `sweep`: one case per (backend, shape, dtype, mask, pass)."""

    sweep: AttentionSweep
    python: str = sys.executable
    kind: str = "workload"
    module: str = "workloads.attention"

    @property
    def device(self) -> str:
        return self.sweep.device

    def resolve(self) -> Workload:
        """The device decided and every default filled; UsageError for options that select nothing valid."""
        dev = resolve_device(self.sweep.device)
        w = replace(self, sweep=self.sweep.with_defaults(dev))
        try:
            w.sweep.specs()
        except SpecError as e:
            raise UsageError(str(e)) from None
        return w

    def cases(self) -> list[AttentionSpec]:
        return self.sweep.specs()

    def backends(self) -> tuple[str, ...]:
        return self.sweep.backends

    def with_backends(self, backends: Sequence[str]) -> Workload:
        return replace(self, sweep=self.sweep.with_backends(backends))

    def with_iters(self, iters: int) -> Workload:
        return replace(self, sweep=replace(self.sweep, iters=iters))

    def argv(self, *, jsonl: Path | None = None, skip: int = 0, extra: Sequence[str] = ()) -> list[str]:
        argv = [self.python, "-m", self.module, *self.sweep.to_argv()]
        if jsonl is not None:
            argv += ["--jsonl", str(jsonl)]
        if skip:
            argv += ["--skip", str(skip)]
        return argv + list(extra)

    def env(self) -> dict[str, str]:
        return {"PYTHONUNBUFFERED": "1"}

    def manifest(self) -> dict[str, Any]:
        return {"workload": self.sweep.manifest_dict()}
