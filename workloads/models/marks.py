"""Where the model's parts begin and end, for a profiler or a timer: the range-recorder protocol
(:class:`Ranges`), the part names (:data:`RANGE_NAMES`), and :func:`run_part`, which runs a part inside its range
and, through identity autograd nodes (_MarkBegin/_MarkEnd), brackets the part's backward by the same range on
autograd's thread."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any, Protocol

import torch

#: The range names the model opens, in the order a training step meets them. ``attn.core`` is exactly the
#: attn_fn call (the part a faster attention kernel changes); rotary embedding lives in ``attn.qkv``; the
#: residual adds sit outside every part. Parts run in backward are bracketed by the same name on autograd's
#: thread (see _MarkBegin/_MarkEnd).
RANGE_NAMES: tuple[str, ...] = ("embed", "norm", "attn.qkv", "attn.core", "attn.out", "mlp", "head", "loss",
                                "backward", "optimizer", "decode.step")


class Ranges(Protocol):
    """What the model needs of a range recorder: NVTX (profctl.workloads.attention.Nvtx), torch.profiler, PartTimer."""

    def range(self, name: str) -> contextlib.AbstractContextManager[Any]: ...


class NullRanges:
    """The default: no ranges, and the model adds no autograd markers."""

    def range(self, name: str) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()


class TeeRanges:
    """Several recorders at once (NVTX for a profiler and a PartTimer, say): entered in order, left reversed."""

    def __init__(self, *ranges: Ranges) -> None:
        self.ranges = ranges

    @contextlib.contextmanager
    def range(self, name: str) -> Iterator[None]:
        with contextlib.ExitStack() as st:
            for r in self.ranges:
                st.enter_context(r.range(name))
            yield


class _Mark:
    """One part's backward bracket: entered by _MarkBegin.backward, left by _MarkEnd.backward (same thread)."""

    __slots__ = ("cm", "name", "ranges")

    def __init__(self, ranges: Ranges, name: str) -> None:
        self.ranges, self.name = ranges, name
        self.cm: contextlib.AbstractContextManager[Any] | None = None

    def enter(self) -> None:
        if self.cm is None:
            self.cm = self.ranges.range(self.name)
            self.cm.__enter__()

    def exit(self) -> None:
        if self.cm is not None:
            cm, self.cm = self.cm, None
            cm.__exit__(None, None, None)


class _MarkBegin(torch.autograd.Function):
    """Identity on a part's outputs; its backward runs first of the part's backward: opens the range."""

    @staticmethod
    def forward(ctx: Any, mark: _Mark, *xs: torch.Tensor) -> Any:
        ctx.mark = mark
        return tuple(x.view_as(x) for x in xs)

    @staticmethod
    def backward(ctx: Any, *gs: Any) -> Any:
        ctx.mark.enter()
        return (None, *gs)


class _MarkEnd(torch.autograd.Function):
    """Identity on a part's inputs; its backward runs once the part's backward is done: closes the range."""

    @staticmethod
    def forward(ctx: Any, mark: _Mark, *xs: torch.Tensor) -> Any:
        ctx.mark = mark
        return tuple(x.view_as(x) for x in xs)

    @staticmethod
    def backward(ctx: Any, *gs: Any) -> Any:
        ctx.mark.exit()
        return (None, *gs)


def in_backward() -> bool:
    return bool(torch._C._current_graph_task_id() != -1)


NULL_RANGES = NullRanges()


def run_part(ranges: Ranges | None, name: str, fn: Callable[..., Any], *xs: torch.Tensor, **kw: Any) -> Any:
    """Run ``fn(*xs, **kw)`` inside ``ranges.range(name)``. When autograd records, wrap the tensors ``xs`` and
    the outputs in identity markers so that the part's backward runs inside the same range on autograd's
    thread (the thread the backward kernels are launched from)."""
    if ranges is None or isinstance(ranges, NullRanges):
        return fn(*xs, **kw)
    if not (torch.is_grad_enabled() and any(x.requires_grad for x in xs)):
        with ranges.range(name):
            return fn(*xs, **kw)
    mark = _Mark(ranges, name)
    xs = _MarkEnd.apply(mark, *xs)
    with ranges.range(name):
        out = fn(*xs, **kw)
    single = isinstance(out, torch.Tensor)
    outs = _MarkBegin.apply(mark, *((out,) if single else out))
    return outs[0] if single else outs
