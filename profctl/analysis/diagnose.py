"""Per-kernel diagnosis from ncu metrics: compute-, memory- or latency-bound (speed of light), the limiting
unit, tensor-pipe utilisation, achieved vs theoretical occupancy, and the recipe's hints.

Works on any Summary row that carries ncu metrics; a figure the report did not collect is None and the verdict
says 'unknown' rather than guessing. Thresholds come from the recipe (profctl.recipes.THRESHOLDS defaults).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from profctl.analysis.figures import Figures
from profctl.nvtx import parse_range
from profctl.recipes import THRESHOLDS, Recipe
from profctl.roofs import shape_roofs
from profctl.schema import KernelRow, Summary
from profctl.spec import MODES

MEMORY_UNITS = {"L1/shared", "L2", "DRAM", "memory"}
MMA_CLASSES = ("flash_fwd", "flash_bwd", "gemm")
#: kernels that are a whole attention pass on their own (a roof applies to one launch)
ATTENTION = ("flash_fwd",)


@dataclass(frozen=True)
class Diagnosis:
    backend: str | None
    pass_: str | None
    shape: str | None
    kernel: str
    kernel_class: str
    nvtx_range: str | None
    count: int
    duration_ns: float
    compute_pct: float | None
    memory_pct: float | None
    dram_pct: float | None
    bound: str  # compute-bound | memory-bound | latency-bound | unknown
    limiter: str | None
    limiter_pct: float | None
    tensor_pct: float | None
    achieved_occupancy: float | None
    theoretical_occupancy: float | None
    notes: tuple[str, ...] = field(default_factory=tuple)
    first_id: int = 0  # the first launch id of the row (a stable key: names can repeat)
    #: an attention kernel's time against the binding speed-of-light roof of its pass (profctl.roofs)
    roof: str | None = None
    roof_pct: float | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["pass"] = d.pop("pass_")
        d["notes"] = list(self.notes)
        return d


def backend_of(nvtx_range: str | None) -> tuple[str | None, str | None, str | None]:
    """(backend, pass, shape key) a launch's NVTX path names (profctl.nvtx.parse_range)."""
    k = parse_range(nvtx_range)
    if k is None:
        return (None, None, None)
    pass_ = k.pass_
    if pass_ is None and k.shape_key:  # a model step's case (no <backend>.<pass> leaf): its mode stands for the pass

        pass_ = next((t for t in k.shape_key.split(",") if t in MODES), None)
    return (k.backend, pass_, k.shape_key)


def roof_of(shape: str | None, backend: str | None, pass_: str | None, device: str | None, seconds: float
            ) -> tuple[str | None, float | None]:
    """(the sentence, the percent) of `seconds` against the binding roof of an attention pass of this shape."""
    if pass_ not in ("fwd", "bwd", "fwd+bwd") or seconds <= 0:
        return None, None
    r = shape_roofs(shape, device, backend, pass_)
    if r is None:
        return None, None
    h = r.against(seconds)
    return h.sentence(), h.pct


def diagnose_row(k: KernelRow, recipe: Recipe | None = None, cc: tuple[int, int] | None = None,
                 device: str | None = None) -> Diagnosis:
    th = recipe.all_thresholds() if recipe else {key: v for key, (v, _) in THRESHOLDS.items()}
    m = k.metrics
    f = Figures(m)
    compute, memory, dram = f.get("compute_pct"), f.get("memory_pct"), f.get("dram_pct")
    tensor = f.get("tensor_pct")
    ach, theo = f.get("achieved_occupancy"), f.get("theoretical_occupancy")

    units = f.units()
    if memory is None:
        mem_units = [v for label, v in units.items() if label in MEMORY_UNITS]
        memory = max(mem_units) if mem_units else None
    bound = "unknown"
    if compute is not None and memory is not None:
        if max(compute, memory) < th["bound_pct"]:
            bound = "latency-bound"
        elif compute >= memory:
            bound = "compute-bound"
        else:
            bound = "memory-bound"
    # where the report has no per-unit figure on one side, that side's speed-of-light total stands in for it
    if memory is not None and not set(units) & MEMORY_UNITS:
        units["memory"] = memory
    if compute is not None and not set(units) - MEMORY_UNITS:
        units["SM"] = compute
    limiter, limiter_pct = max(units.items(), key=lambda x: x[1]) if units else (None, None)

    notes: list[str] = []
    if bound == "latency-bound" and compute is not None and memory is not None:
        notes.append(f"SM {compute:.0f}% and memory {memory:.0f}% both < {th['bound_pct']:.0f}% of peak")
    if tensor is not None and k.kernel_class in MMA_CLASSES and 1.0 <= tensor < th["tensor_low_pct"]:
        notes.append(f"tensor pipe busy {tensor:.0f}% (< {th['tensor_low_pct']:.0f}%) in an MMA kernel")
    if ach is not None and theo and ach < th["occupancy_ratio"] * theo:
        notes.append(
            f"achieved occupancy {ach:.1f}% is below {th['occupancy_ratio']:.2g} x theoretical {theo:.1f}%"
        )
    if dram is not None and dram >= th["dram_high_pct"]:
        notes.append(f"DRAM at {dram:.0f}% of peak")
    if recipe is not None:
        for h in recipe.hints:
            if h.fires(m, cc) and h.say not in notes:
                notes.append(h.say)
    backend, pass_, shape = backend_of(k.nvtx_range)
    roof, roof_pct = (roof_of(shape, backend, pass_, device, k.avg_ns * 1e-9) if k.kernel_class in ATTENTION
                      else (None, None))
    return Diagnosis(
        backend=backend,
        pass_=pass_,
        shape=shape,
        kernel=k.short_name,
        kernel_class=k.kernel_class,
        nvtx_range=k.nvtx_range,
        count=k.count,
        duration_ns=k.avg_ns,
        compute_pct=compute,
        memory_pct=memory,
        dram_pct=dram,
        bound=bound,
        limiter=limiter,
        limiter_pct=limiter_pct,
        tensor_pct=tensor,
        achieved_occupancy=ach,
        theoretical_occupancy=theo,
        notes=tuple(notes),
        first_id=min(k.extra.get("ids") or [0]),
        roof=roof,
        roof_pct=roof_pct,
    )


def diagnose(
    s: Summary,
    recipe: Recipe | None = None,
    cc: tuple[int, int] | None = None,
    backend_order: Sequence[str] = (),
) -> list[Diagnosis]:
    """One Diagnosis per ncu kernel row, ordered pass, then backend (in `backend_order`, then by name), then
    by first launch, so flash and baseline kernels of one pass sit next to each other."""
    rows = [k for k in s.kernels if k.tool == "ncu"]
    devs = s.meta.get("devices") or []
    ds = [diagnose_row(k, recipe, cc, devs[0] if len(devs) == 1 else None) for k in rows]
    order = {b: i for i, b in enumerate(backend_order)}

    def key(d: Diagnosis) -> tuple[Any, ...]:
        return (d.pass_ or "", order.get(d.backend or "", len(order)), d.backend or "", d.first_id)

    return sorted(ds, key=key)


def by_backend(ds: Sequence[Diagnosis], device: str | None = None) -> list[dict[str, Any]]:
    """Per (pass, backend): kernels, their summed time, and the verdict of the kernel that takes longest; the
    side-by-side comparison of flash and baseline paths. With the GPU named, the time of one iteration (every
    kernel of the pass launches at least once per iteration: the least-launched one counts the iterations)
    against the pass's binding roof."""
    groups: dict[tuple[str, str], list[Diagnosis]] = {}
    for d in ds:
        groups.setdefault((d.pass_ or "", d.backend or "?"), []).append(d)
    out = []
    for (pass_, backend), g in groups.items():
        main = max(g, key=lambda d: d.duration_ns * d.count)
        iters = min(d.count for d in g) or 1
        roof, roof_pct = roof_of(main.shape, backend, pass_ or None, device,
                                 sum(d.duration_ns * d.count for d in g) / iters * 1e-9)
        out.append(
            {
                "pass": pass_,
                "backend": backend,
                "kernels": len(g),
                "launches": sum(d.count for d in g),
                "time_ns": sum(d.duration_ns * d.count for d in g),
                "main_kernel": main.kernel,
                "main_share": (main.duration_ns * main.count)
                / (sum(d.duration_ns * d.count for d in g) or 1.0),
                "bound": main.bound,
                "limiter": main.limiter,
                "tensor_pct": main.tensor_pct,
                "achieved_occupancy": main.achieved_occupancy,
                "theoretical_occupancy": main.theoretical_occupancy,
                "roof": roof,
                "roof_pct": roof_pct,
            }
        )
    return out
