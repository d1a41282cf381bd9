"""profctl: profile GPU attention kernels with nsys, ncu and torch.profiler, and compare them in one summary.

Python API (mirrors the CLI; heavy modules load on first use)::

    import profctl
    res = profctl.bench(backend=["sdpa-flash", "eager"], seqlen=[1024, 2048], device="cpu")
    res.to_dataframe()
    s = profctl.read("report.sqlite")      # any nsys/ncu/torch report -> profctl.schema.Summary
    s.kernels_df()
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from profctl.schema import Summary
    from profctl.sweep import BenchResult

__version__ = "0.1.0"


def _csv(v: Any) -> str | None:
    if v is None:
        return None
    if isinstance(v, (str, bytes)):
        return str(v)
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, Sequence):
        return ",".join(_csv(x) or "" for x in v)
    return str(v)


def workload_args(**options: Any) -> Any:
    """WorkloadArgs from Python values: lists or scalars for every workload option (``pass_`` for --pass)."""
    from profctl.workload import WorkloadArgs

    listy = {"backend", "batch", "seqlen", "seqlen_q", "seqlen_kv", "heads", "kv_heads", "head_dim", "dtype",
             "causal", "pass_", "layout"}
    if "pass" in options:
        options["pass_"] = options.pop("pass")
    if "backends" in options:
        options["backend"] = options.pop("backends")
    kw: dict[str, Any] = {k: (_csv(v) if k in listy else v) for k, v in options.items()}
    return WorkloadArgs(**kw)


def bench(*, baseline: str | None = "eager", reports: str | Path | None = None, **options: Any) -> BenchResult:
    """Run a sweep like `profctl bench` and return its rows (``.to_dataframe()`` for pandas)."""
    from profctl.sweep import run_bench

    return run_bench(workload_args(**options), baseline=baseline, reports=reports)


def read(path: str | Path, *, by_range: bool = False) -> Summary:
    """Read any report profctl knows (nsys, ncu, torch.profiler, summary JSON) into a Summary."""
    from profctl import readers

    return readers.read(path, by_range=by_range)


__all__ = ["__version__", "bench", "read", "workload_args"]
