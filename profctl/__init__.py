"""profctl: profile GPU attention kernels with nsys, ncu and torch.profiler, and compare them in one summary.

Python API (mirrors the CLI; heavy modules load on first use)::

    import profctl
    res = profctl.bench(backend=["sdpa-flash", "eager"], seqlen=[1024, 2048], device="cpu")
    res.to_dataframe()
    s = profctl.read("report.sqlite")      # any nsys/ncu/torch report, or a run directory -> Summary
    s.kernels_df()
    res = profctl.nsys(backend="sdpa-flash", seqlen=2048)        # also ncu(recipe=...), torch(...)
    e = profctl.explain("report.ncu-rep", kernel="_fwd", vs="cudnn")  # .causes_df(), .to_dict() as -f json
    c = profctl.compare("base-run", "new-run")                       # also ab(a, b, ...), proton(...), timeline(f)

In a notebook every result displays itself (verdict first) and long calls show one line of progress
(docs/python-api.md).

Every profiling call is a pipeline ``run(Request) -> Result`` (profctl.pipelines); these functions build the
request from workload options (lists or scalars, named as on the command line, ``pass_`` for --pass).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from profctl._version import __version__

if TYPE_CHECKING:
    from profctl.api import AbCompareResult, CompareResult, ExplainResult, TimelineResult
    from profctl.pipelines.bench_pipeline import BenchResult
    from profctl.pipelines.ncu_pipeline import NcuResult
    from profctl.pipelines.nsys_pipeline import NsysResult
    from profctl.pipelines.targets import Model, Workload
    from profctl.pipelines.torchprof_pipeline import TorchResult
    from profctl.schema import Summary


def workload(**options: Any) -> Workload | Model:
    """The built-in workload from options as Python values: attention (``backend=["fa4", "eager"]``,
    ``seqlen=2048``, ``causal=[False, True]``, ``pass_="fwd+bwd"``, ``device="cuda"``, ``iters=20`` ...), or with
    ``model=`` the model workload (``model="llama-7b", layers=4, mode=["train", "decode"], batch=2,
    seqlen=4096, memory_limit_gib=24``). A backend may be a callable (your attention function)."""
    from profctl.model_spec import ModelSweep
    from profctl.pipelines.targets import Model, Workload
    from profctl.spec import AttentionSweep

    if "pass" in options:
        options["pass_"] = options.pop("pass")
    if "backends" in options:
        options["backend"] = options.pop("backends")
    if options.get("model") is not None:
        return Model(ModelSweep.from_strings(**options))
    options.pop("model", None)
    return Workload(AttentionSweep.from_strings(**options))


def _split(options: dict[str, Any], names: tuple[str, ...]) -> dict[str, Any]:
    """The request's options out of `options`, with the executor (``executor=``; serial, here, by default)."""
    from profctl.pipelines.executors import Local

    kw = {k: options.pop(k) for k in names if k in options}
    if "executor" in names and kw.get("executor") is None:
        kw["executor"] = Local()
    return kw


_REQUEST = ("reports", "timeout_s", "executor")


def bench(*, baseline: str | None = "eager", reports: str | Path | None = None, label: str | None = None,
          point_timeout_s: float = 900.0, executor: Any = None, progress: Any = None, processes: int | None = None,
          **options: Any) -> BenchResult:
    """Run a sweep like `profctl bench` and return its rows (``.to_dataframe()`` for pandas). `executor`: where
    (default serial, here; ``DaskExecutor(workers=2)`` or ``DaskExecutor(cluster=ADDRESS)``: docs/cluster.md).
    `progress`: a callable given each Progress, True for one line that rewrites itself (the default in a
    notebook), False for none. `processes`: fresh processes each point is timed in (default 3 on a CPU, 1 on a
    GPU), as `--processes`."""
    from profctl import api
    from profctl.pipelines import bench_pipeline

    kw = _split({"executor": executor}, ("executor",))
    on = api.progress_callback(progress, "bench")
    res = bench_pipeline.run(bench_pipeline.BenchRequest(target=workload(**options), baseline=baseline,
                                                         reports=Path(reports) if reports else None, label=label,
                                                         point_timeout_s=point_timeout_s, processes=processes,
                                                         **kw), on_progress=on)
    if isinstance(on, api.notebook_view.LineProgress):
        on.close()
    return api.displayed(res)


def nsys(**options: Any) -> NsysResult:
    """Profile like `profctl nsys` (options: the workload's, plus trace, capture, by_range, reports, ...)."""
    from profctl.pipelines import nsys_pipeline

    kw = _split(options, ("trace", "capture", "sample", "all_work", "by_range", *_REQUEST))
    if isinstance(kw.get("trace"), str):
        kw["trace"] = tuple(kw["trace"].split(","))
    return nsys_pipeline.run(nsys_pipeline.NsysRequest(target=workload(**options), **kw))


def ncu(recipe: str = "tensor-core", progress: Any = None, **options: Any) -> NcuResult:
    """Profile like `profctl ncu --recipe RECIPE` (options: the workload's, plus kernel, launch_count,
    clock_control, ...). One measured iteration unless ``iters`` is given. `progress` as for :func:`bench`."""
    from profctl import api, recipes
    from profctl.pipelines import ncu_pipeline

    kw = _split(options, ("kernel", "launch_count", "replay_mode", "clock_control", "cache_control", *_REQUEST))
    options.setdefault("iters", 1)
    on = api.progress_callback(progress, "ncu")
    res = ncu_pipeline.run(ncu_pipeline.NcuRequest(target=workload(**options), recipe=recipes.get(recipe), **kw),
                           on_progress=on)
    if isinstance(on, api.notebook_view.LineProgress):
        on.close()
    return res


def torch(**options: Any) -> TorchResult:
    """Profile like `profctl torch` (options: the workload's, plus by_range, reports, ...)."""
    from profctl.pipelines import torchprof_pipeline

    kw = _split(options, ("by_range", *_REQUEST))
    return torchprof_pipeline.run(torchprof_pipeline.TorchRequest(target=workload(**options), **kw))


def read(path: str | Path, *, by_range: bool = False) -> Summary:
    """Read any report profctl knows (nsys, ncu, torch.profiler, summary JSON), a run directory or a run id
    into a Summary."""
    from profctl import api, inputs

    return api.displayed(inputs.read(path, by_range=by_range))


def explain_range(path: str | Path, name: str, *, vs: str | None = None, path2: str | Path | None = None,
                  ncu: str | Path | None = None) -> Any:
    """Why range `name` of an nsys SQLite export or torch.profiler trace (or a run directory holding one) takes
    its time: a profctl.analysis.range_explain.RangeExplanation (``.verdict``, ``.causes``, ``.to_dict()``), or
    with `vs` (a second range) or `path2` (the same range in a second report) a RangePair (what made B faster).
    `ncu`: an ncu report of the same program (else the store's ncu run of it, if any): each kernel's verdict and
    floor (``.kernel_floors``), the range's floor from them."""
    from profctl.cli._ranges import explain_range as _explain_range

    return _explain_range(str(path), name, vs=vs, report2=str(path2) if path2 is not None else None,
                          ncu=str(ncu) if ncu is not None else None)


def explain(report: str | Path, report2: str | Path | None = None, *, kernel: str, vs: str | None = None,
            shape: str | None = None, reports: str | Path | None = None) -> ExplainResult:
    """Like `profctl explain REPORT [REPORT2] --kernel A [--vs B] [--shape S]`: the causes of A's time (or of its
    gap to B) ranked by saving. ``.to_dict()`` is the command's ``-f json``; ``.causes_df()``, ``.floor_df()``,
    ``.lines_df()``; errors are profctl.errors' (UsageError, BadReport, NothingMatched)."""
    from profctl import api

    return api.explain(report, report2, kernel=kernel, vs=vs, shape=shape, reports=reports)


def compare(base: str | Path, new: str | Path, **options: Any) -> CompareResult:
    """Like `profctl compare BASE NEW` (threshold, fail_if_slower, run_noise, min_total_ms, ...):
    per case the change with its interval and verdict; ``.gate(limit)`` is --fail-if-slower's verdict."""
    from profctl import api

    return api.compare(base, new, **options)


def ab(a: Any, b: Any, **options: Any) -> AbCompareResult:
    """Like `profctl bench --ab A,B`: two backends or attention functions (names, ``file.py:fn``, callables)
    interleaved round by round in one process; workload options as for :func:`bench`, plus rounds, threshold."""
    from profctl import api

    return api.ab(a, b, **options)


def proton(**options: Any) -> TimelineResult:
    """Like `profctl proton`: warp timelines inside Triton kernels (profctl's Triton forward, or
    ``program=["python", "x.py"]``); a CUDA GPU and Triton's Proton needed."""
    from profctl import api

    return api.proton(**options)


def timeline(path: str | Path, *, cta: int | None = None) -> TimelineResult:
    """A recorded Proton trace or tree (or a run of profctl proton) as `profctl report TRACE` reads it."""
    from profctl import api

    return api.timeline(path, cta=cta)


__all__ = ["__version__", "ab", "bench", "compare", "explain", "explain_range", "ncu", "nsys", "proton", "read",
           "timeline", "torch", "workload"]
