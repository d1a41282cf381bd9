"""NVTX ranges as the workloads push them: profctl's domain, an optional mirror (torch.profiler's
record_function), and the identity autograd functions that push a range on autograd's worker thread around a
backward pass (backward kernels run there, outside the ranges of the thread that called backward())."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

from profctl import nvtx as scheme


class Nvtx:
    """Push/pop in profctl's domain; a no-op when disabled or when the nvtx package is missing."""

    def __init__(self, enabled: bool, mirror: Any = None) -> None:
        self.enabled = False
        self._nvtx: Any = None
        self._mirror = mirror  # an object with push(name)/pop(), e.g. torch.profiler ranges (Hooks.ranges())
        if enabled:
            try:
                import nvtx

                self._nvtx = nvtx
                self._domain = nvtx.get_domain(scheme.DOMAIN)
                self.enabled = True
            except Exception as e:  # pragma: no cover - depends on the environment
                print(f"warning: NVTX disabled ({type(e).__name__}: {e})", file=sys.stderr)

    def push(self, name: str) -> None:
        if self.enabled:
            self._domain.push_range(self._domain.get_event_attributes(message=name))
        if self._mirror is not None:
            self._mirror.push(name)

    def pop(self) -> None:
        if self.enabled:
            self._domain.pop_range()
        if self._mirror is not None:
            self._mirror.pop()

    @contextlib.contextmanager
    def range(self, name: str) -> Iterator[None]:
        self.push(name)
        try:
            yield
        finally:
            self.pop()


def backward_markers(nv: Nvtx, stack: list[str]) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """Identity autograd functions that push/pop `stack` on autograd's worker thread during a backward pass.

    ``begin`` wraps the output: its backward runs first in the backward pass and pushes ``stack`` (read when it
    runs, so a phase can change from warmup to measure). ``end`` wraps the inputs: its backward runs after the
    wrapped computation's backward and pops. The backward kernels then nest in the same ranges as on the main
    thread.
    """
    import torch

    class Begin(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, o: torch.Tensor) -> torch.Tensor:
            return o.view_as(o)

        @staticmethod
        def backward(ctx: Any, go: torch.Tensor) -> torch.Tensor:
            for name in stack:
                nv.push(name)
            return go

    class End(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, *xs: torch.Tensor) -> Any:
            return tuple(x.view_as(x) for x in xs)

        @staticmethod
        def backward(ctx: Any, *gs: torch.Tensor) -> Any:
            for _ in stack:
                nv.pop()
            return gs

    return Begin.apply, End.apply
