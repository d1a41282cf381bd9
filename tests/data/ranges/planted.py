"""Planted range-level faults, each in its own NVTX range and record_function range (issue 49).

Each planted range has a fixed twin (``fixed/<name>``) that does the same GPU work without the fault, so that what
removing the fault gains is measured outside any profiler (``--mode time`` writes it to truth.json):

* ``planted/python_overhead``: ~0.3 ms of pure-Python bookkeeping (``_prepare_args``) before each small matmul;
  host-bound. Fixed: the bookkeeping done once, outside the loop.
* ``planted/item_sync``: a ``.item()`` per iteration, then Python logging (``_log_metrics``) that could have
  overlapped the GPU's next layers; sync-bound. Fixed: the loss summed on the device, one ``.item()`` at the end.
* ``planted/transpose_copy``: ``x.t().contiguous()`` copied before a matmul; GPU-bound with an extra copy kernel.
  Fixed: the matmul takes the transposed view (cuBLAS reads it transposed).
* ``planted/tiny_kernels``: a loop of 20 tiny elementwise ops (40 kernels of a few microseconds); launch-bound.
  Fixed: the same ops captured once in a CUDA graph and replayed.
* ``healthy/matmul``: big matmuls, well fed: GPU-bound, no cause.
* ``train/forward`` and ``train/backward``: a Linear's forward and backward, one range each per iteration (the
  backward's kernels run on autograd's thread).

Usage: ``python planted.py --mode nsys|torch|time --out DIR`` (``nsys``: run under ``nsys profile``; ``torch``:
torch.profiler around everything, ``DIR/ranges_torch.json``; ``time``: no profiler, ``DIR/truth.json``). On a
machine without CUDA it runs everything on the CPU at small sizes (a smoke test: no ranges are pushed).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch

CUDA = torch.cuda.is_available()
DEV = "cuda" if CUDA else "cpu"
DT = torch.bfloat16 if CUDA else torch.float32
SMALL = not CUDA  # CPU smoke test: tiny shapes
ITERS = int(os.environ.get("RANGES_ITERS", "60" if CUDA else "3"))
PREP_SPIN = 8000  # pure-Python loop steps per call (~0.3 ms)
LOG_SPIN = 6000
TINY_OPS = 20


def _n(big: int) -> int:
    return 64 if SMALL else big


@contextlib.contextmanager
def rng(name: str) -> Iterator[None]:
    """An NVTX range (for nsys) and a record_function range (for torch.profiler), the GPU drained at its end."""
    if CUDA:
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push(name)
    with torch.profiler.record_function(name):
        yield
        if CUDA:
            torch.cuda.synchronize()
    if CUDA:
        torch.cuda.nvtx.range_pop()


def _prepare_args(n: int) -> int:
    """The planted Python overhead: bookkeeping in pure Python before each call."""
    t = 0
    for i in range(n):
        t += i * i
    return t


def _log_metrics(n: int) -> int:
    """Python logging after the loss is read: it could overlap the GPU's work if nothing waited."""
    t = 0
    for i in range(n):
        t += i ^ 3
    return t


def _randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape, device=DEV, dtype=DT)


# ------------------------------------------------------------------------------------------------ the programs
def python_overhead(fixed: bool) -> Callable[[], object]:
    a, w = _randn(_n(2048), _n(2048)), _randn(_n(2048), _n(2048))

    def step() -> object:
        if not fixed:
            _prepare_args(PREP_SPIN)
        return torch.relu(a @ w)
    return step


def item_sync(fixed: bool) -> Callable[[], object]:
    x = _randn(_n(8192), _n(2048))
    ws = [_randn(_n(2048), _n(2048)) * 0.02 for _ in range(4)]
    total = torch.zeros((), device=DEV, dtype=torch.float32)

    def step() -> object:
        nonlocal total
        h = x
        for w in ws:
            h = torch.tanh(h @ w)
        loss = h.mean()
        if fixed:
            total += loss
        else:
            total += loss.item()
        _log_metrics(LOG_SPIN)
        return total
    return step


def transpose_copy(fixed: bool) -> Callable[[], object]:
    x, w = _randn(_n(8192), _n(8192)), _randn(_n(8192), _n(512))

    def step() -> object:
        if fixed:
            return x.t() @ w
        return x.t().contiguous() @ w
    return step


def _tiny_body(x: torch.Tensor) -> torch.Tensor:
    for _ in range(TINY_OPS):
        x = x * 0.999 + 0.001
    return x


def tiny_kernels(fixed: bool) -> Callable[[], object]:
    x = torch.randn(4096, device=DEV)
    if not (fixed and CUDA):
        return lambda: _tiny_body(x)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):
            _tiny_body(x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        _tiny_body(x)
    return g.replay


def healthy(fixed: bool) -> Callable[[], object]:
    x, w = _randn(_n(8192), _n(4096)), _randn(_n(4096), _n(4096))
    return lambda: torch.relu(x @ w)


PLANTED: dict[str, Callable[[bool], Callable[[], object]]] = {
    "python_overhead": python_overhead, "item_sync": item_sync, "transpose_copy": transpose_copy,
    "tiny_kernels": tiny_kernels,
}


def _variants() -> list[tuple[str, Callable[[], object]]]:
    """(range name, one iteration) of every range but the training step's, set up (and warmed) before timing."""
    out = []
    for name, make in PLANTED.items():
        out.append((f"planted/{name}", make(False)))
        out.append((f"fixed/{name}", make(True)))
    out.append(("healthy/matmul", healthy(False)))
    for _, step in out:
        for _ in range(3):
            step()
    if CUDA:
        torch.cuda.synchronize()
    return out


def train(iters: int) -> None:
    lin = torch.nn.Linear(_n(4096), _n(4096), device=DEV, dtype=DT)
    x = _randn(_n(8192), _n(4096))
    for i in range(iters + 3):
        mark = contextlib.nullcontext if i < 3 else rng
        lin.weight.grad = lin.bias.grad = None
        with mark("train/forward"):  # type: ignore[operator]
            loss = lin(x).square().mean()
        with mark("train/backward"):  # type: ignore[operator]
            loss.backward()


def run_ranges(iters: int) -> None:
    for name, step in _variants():
        with rng(name):
            for _ in range(iters):
                step()
    train(iters // 2)


# ------------------------------------------------------------------------------------------------ modes
def _time(step: Callable[[], object], iters: int) -> float:
    """Median over five loops of one loop's time per iteration (us), the GPU drained before and after."""
    per = []
    for _ in range(5):
        if CUDA:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(iters):
            step()
        if CUDA:
            torch.cuda.synchronize()
        per.append((time.perf_counter() - t0) / iters * 1e6)
    return statistics.median(per)


def time_mode(out: Path, iters: int) -> dict[str, object]:
    per = {name: _time(step, iters) for name, step in _variants()}
    pairs = {n: {"faulty_us": per[f"planted/{n}"], "fixed_us": per[f"fixed/{n}"],
                 "gain_us": per[f"planted/{n}"] - per[f"fixed/{n}"]} for n in PLANTED}
    truth = {"iters": iters, "per_iter_us": per, "pairs": pairs, "device": torch.cuda.get_device_name() if CUDA
             else "cpu", "torch": torch.__version__}
    (out / "truth.json").write_text(json.dumps(truth, indent=1) + "\n")
    return truth


def torch_mode(out: Path, iters: int) -> None:
    acts = [torch.profiler.ProfilerActivity.CPU] + ([torch.profiler.ProfilerActivity.CUDA] if CUDA else [])
    with torch.profiler.profile(activities=acts, with_stack=True) as prof:
        run_ranges(iters)
    prof.export_chrome_trace(str(out / "ranges_torch.json"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=("nsys", "torch", "time"), required=True)
    ap.add_argument("--out", default=".")
    ap.add_argument("--iters", type=int, default=ITERS)
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    if a.mode == "nsys":
        run_ranges(a.iters)
    elif a.mode == "torch":
        torch_mode(out, a.iters)
    else:
        print(json.dumps(time_mode(out, a.iters)["pairs"], indent=1))


if __name__ == "__main__":
    main()
