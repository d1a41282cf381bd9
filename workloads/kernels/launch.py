"""Kernel launches that skip Triton's per-call argument binding once a kernel is compiled for the arguments' kind.

Why: a call's host time is what a loop of calls waits for wherever it nears the kernel's time. On the H200 machine
a warm ``attention()`` call took 180-200 us of host time (b1 h32 s4096 causal; the warp-specialized kernel runs
248 us), and about a third of it was Triton's ``JITFunction.run``: binding every argument to the signature,
specializing each (alignment, ``== 1``, multiple of 16), hashing that into the cache key, reading the runtime knobs
(benchmarks/host_path.py; benchmarks/RESULTS.md, "The host's share of a call").

:func:`launch` does ``fn[grid](*args, **kwargs)`` the first time and keeps the compiled kernel under a key made from
what Triton specializes on: every int's value, every tensor's dtype and 16-byte alignment, every descriptor's block,
element type and layout, every constexpr and launch option, the current device, the compile knobs. Later calls with
the same key launch that kernel directly (``CompiledKernel[grid](*bound_args)``: the same launcher, stream and
launch hooks as Triton's own path, so Proton still sees the launches). Anything unusual takes Triton's path: the
interpreter (no compiled kernel), pre-run hooks, an argument the key cannot describe, a full cache. The cache keeps
compiled kernels only, never a tensor. Skipped with the binder: Triton's check that the module globals a kernel read
at compile time have not changed since; the project's kernels take everything that varies as arguments (Proton's
scopes as ``SCOPES``, FP8's key permutation as ``PERM``), which are in the key.

:func:`descriptor` builds host TMA descriptors the same way: Triton's dataclass checks its block, dtype and layout in
``__post_init__`` each time (a launch builds three to six); here the first one of a kind is built and checked by
Triton, and later ones copy its fields with the new tensor, shape and strides, after the checks that depend on them.
"""

from __future__ import annotations

import inspect
from typing import Any

#: off: every launch through ``fn[grid]`` and every descriptor built by Triton (benchmarks/host_path.py compares the
#: two in one process)
ENABLED = True
#: the most keys kept (a loop whose ints change every call, e.g. ragged lengths, would otherwise grow it without end)
LIMIT = 1024

_KERNELS: dict[tuple[Any, ...], Any] = {}
#: launches that found their kernel under their key, and those that went through Triton's path (tests, benchmarks)
COUNTS = {"direct": 0, "triton": 0}
_SIGNATURES: dict[Any, tuple[tuple[str, ...], dict[str, Any]]] = {}
_DESCRIPTORS: dict[tuple[Any, ...], dict[str, Any]] = {}


class _Unkeyable(Exception):
    """An argument the key cannot describe: the launch goes through Triton's own path."""


def launch(fn: Any, grid: tuple[int, ...], *args: Any, **kwargs: Any) -> Any:
    """``fn[grid](*args, **kwargs)``, the compiled kernel found without Triton's binder once it has run with arguments
    of the same kind; returns what Triton returns (the compiled kernel, or None under the interpreter)."""
    if not ENABLED or getattr(fn, "device_caches", None) is None or fn.pre_run_hooks or callable(grid):
        COUNTS["triton"] += 1  # the interpreter, pre-run hooks, a grid worked out from the arguments
        return fn[grid](*args, **kwargs)
    try:
        names, defaults = _signature(fn)
        bound = list(args)
        bound += [kwargs[n] if n in kwargs else defaults[n] for n in names[len(args):]]
        key = (fn, _device(), _knobs(), *[(k, kwargs[k]) for k in kwargs if k not in defaults],
               *[_kind(a) for a in bound])
        kernel = _KERNELS.get(key)
    except (_Unkeyable, TypeError):  # a parameter left out (Triton says which), or an unhashable constexpr
        COUNTS["triton"] += 1
        return fn[grid](*args, **kwargs)
    if kernel is not None:
        COUNTS["direct"] += 1
        kernel[(grid[0], grid[1] if len(grid) > 1 else 1, grid[2] if len(grid) > 2 else 1)](*bound)
        return kernel
    COUNTS["triton"] += 1
    kernel = fn[grid](*args, **kwargs)
    if hasattr(kernel, "packed_metadata") and len(_KERNELS) < LIMIT:
        _KERNELS[key] = kernel
    return kernel


def descriptor(cls: Any, base: Any, shape: list[int], strides: list[int], block: list[int], *rest: Any) -> Any:
    """``cls(base, shape, strides, block, *rest)``, a host TMA descriptor (Triton's or Gluon's), checked by Triton
    the first time for its (class, dtype, block, rest) and built from that one's fields after."""
    key = (cls, base.dtype, tuple(block), *rest)
    fields = _DESCRIPTORS.get(key) if ENABLED else None
    if fields is None or not _fits(base, shape, strides, len(block)):
        made = cls(base, shape, strides, block, *rest)
        fields = getattr(made, "__dict__", None)
        kept = ENABLED and len(_DESCRIPTORS) < LIMIT
        if kept and fields is not None and {"base", "shape", "strides"} <= fields.keys():
            _DESCRIPTORS[key] = dict(fields)
        return made
    made = cls.__new__(cls)
    made.__dict__.update(fields)
    made.base, made.shape, made.strides = base, shape, strides
    return made


def _fits(base: Any, shape: list[int], strides: list[int], rank: int) -> bool:
    """Triton's checks of a descriptor that depend on its tensor: 16-byte aligned base and strides, the last dim
    contiguous, every dim non-empty, the block's rank."""
    if base.data_ptr() % 16 or not len(shape) == len(strides) == rank or strides[-1] != 1:
        return False
    size = base.element_size()
    for i in range(rank):  # noqa: SIM110 - a loop, not all() over a generator: a launch builds up to six of these
        if shape[i] <= 0 or (i < rank - 1 and strides[i] * size % 16):
            return False
    return True


def clear() -> None:
    """Forget every kept kernel and zero the counts (tests)."""
    _KERNELS.clear()
    _DESCRIPTORS.clear()
    COUNTS.update(direct=0, triton=0)


def kept() -> int:
    """How many compiled kernels are kept."""
    return len(_KERNELS)


def _signature(fn: Any) -> tuple[tuple[str, ...], dict[str, Any]]:
    """(parameter names in order, name -> default or a marker that it has none) of a jitted function."""
    sig = _SIGNATURES.get(fn)
    if sig is None:
        params = inspect.signature(fn.fn).parameters
        names = tuple(params)
        sig = _SIGNATURES[fn] = (names, {n: _NO_DEFAULT if p.default is inspect.Parameter.empty else p.default
                                         for n, p in params.items()})
    return sig


class _NoDefault:
    """A parameter without a default: leaving it out is the caller's error, which Triton's path reports."""


_NO_DEFAULT = _NoDefault()


def _kind(a: Any) -> Any:
    """What Triton specializes on for one argument."""
    t = type(a)
    if t is int or t is str or a is None:
        return a  # ints are specialized by value (== 1, multiple of 16, 32 or 64 bits): the value decides them all
    if t is bool:
        return (bool, a)  # True == 1 in a dict key; a bool is its own type in a signature
    if t is float:
        return float  # floats are passed as fp32, never specialized by value
    if hasattr(a, "data_ptr"):
        return (a.dtype, a.data_ptr() % 16 == 0)
    if hasattr(a, "block_shape"):  # a host TMA descriptor (Triton's or Gluon's)
        # Gluon's layouts are frozen dataclasses: equal by value, hashable
        return (t, a.base.dtype, tuple(a.block_shape), getattr(a, "layout", None), getattr(a, "padding", None))
    if isinstance(a, _NoDefault):
        raise _Unkeyable
    return (t, a)  # a constexpr value (hashable, or TypeError: Triton's path)


def _device() -> int:
    import torch

    return torch.cuda.current_device()


def _knobs() -> tuple[Any, ...]:
    """The runtime knobs that change what Triton compiles (debug, instrumentation such as Proton's)."""
    from triton import knobs

    return (knobs.runtime.debug, knobs.compilation.instrumentation_mode)
