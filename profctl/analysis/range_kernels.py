"""The kernels of a range against their own floors, from an Nsight Compute report of the same program
(``profctl explain RUN --range NAME --ncu REPORT``, issue 49).

Each kernel of the range (per name and launch configuration) is matched to a launch of the ncu report: the same
kernel by :func:`profctl.kernels.kernel_id` (else :func:`profctl.kernels.loose_key`), at the same launch
configuration (blocks in the grid, threads per block) where both tools record it, and of those the launch whose
time is closest, within :data:`profctl.analysis.range_explain.THRESHOLDS` ``ncu_time_ratio`` (a persistent kernel,
such as cuBLAS's nvjet GEMMs, launches one grid for every problem size). Its verdict and floor come from explain's
own one-kernel explanation (:func:`profctl.analysis.explanation.explain_one`, the floor of
:mod:`profctl.analysis.floor`); the floor is carried to the range as the share of the launch's time that its
practical best is (ncu replays a launch with cold caches and its own clocks: the share transfers, the microseconds
do not).

The range's floor is then the sum of its kernels' floors (a kernel without an ncu launch keeps its time; the extra
copies and casts a cause removes count nothing) plus what must stay serial: one launch's host cost per instance
before its first kernel can start. No saving goes below it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any

from profctl.analysis import explanation
from profctl.analysis.range_explain import COPY_KERNEL, Cause, RangeExplanation, th
from profctl.kernels import kernel_id, loose_key, short_name


def _config(p: Any) -> tuple[int, int] | None:
    g, b = p.metrics.get("launch__grid_size"), p.metrics.get("launch__block_size")
    return (int(g), int(b)) if isinstance(g, (int, float)) and isinstance(b, (int, float)) and g and b else None


def _us(ns: float) -> str:
    return f"{ns / 1e3:,.1f} us" if abs(ns) < 1e6 else f"{ns / 1e6:,.2f} ms"


def pick(name: str, config: tuple[int, int] | None, avg_ns: float, profiles: Sequence[Any]) -> tuple[Any, str]:
    """The ncu launch standing for the range's launches of `name` at `config` (avg `avg_ns` each), and how it was
    matched; (None, why not) when the report has no launch of it at this size."""
    full = [p for p in profiles if not p.names_only and p.duration_ns]
    key = kernel_id(name)
    cands = [p for p in full if kernel_id(p.name) == key]
    if not cands:
        lk = loose_key(name)
        cands = [p for p in full if loose_key(p.name) == lk]
    if not cands:
        return None, "no launch of this kernel in the ncu report"
    how = "name and time"
    if config is not None:
        same = [p for p in cands if _config(p) == config]
        others = {_config(p) for p in cands}
        if same:
            cands, how = same, "name, launch configuration and time"
        elif None not in others:
            shown = ", ".join(f"{g}x{b}" for g, b in sorted(c for c in others if c is not None))
            return None, (f"the ncu report has this kernel only at other launch configurations (blocks x threads "
                          f"{shown}; the range's: {config[0]}x{config[1]}): another problem size")
    # the time too: a persistent kernel (cuBLAS's nvjet GEMMs) launches one grid for every problem size
    best = min(cands, key=lambda p: abs(math.log(p.duration_ns / max(avg_ns, 1.0))))
    ratio = max(best.duration_ns, avg_ns) / max(min(best.duration_ns, avg_ns), 1.0)
    if ratio > th("ncu_time_ratio"):
        return None, (f"the closest ncu launch takes {best.duration_ns / 1e3:,.1f} us against "
                      f"{avg_ns / 1e3:,.1f} us here: another problem size")
    return best, how


def _one(name: str, config: tuple[int, int] | None, count: int, total: float, ex: RangeExplanation,
         profiles: Sequence[Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"name": name, "config": list(config) if config else None, "count": count,
                           "total_ns": total, "share": total / max(ex.time_ns, 1.0),
                           "extra": bool(COPY_KERNEL.search(name))}
    p, how = pick(name, config, total / max(count, 1), profiles)
    if p is None:
        return row | {"matched": False, "why": how, "floor_ns": 0.0 if row["extra"] else total}
    e = explanation.explain_one(p, explanation.kernel_roofs(p, None))
    fl = e.floors.get("a")
    ncu_us = p.duration_ns / 1e3
    frac = min(1.0, fl.attainable_us / ncu_us) if fl is not None and fl.units and ncu_us else None
    b = fl.binding if fl is not None else None
    floor = total * frac if frac is not None else total
    return row | {"matched": True, "matched_by": how, "ncu_name": p.name, "ncu_id": p.id, "ncu_us": ncu_us,
                  "verdict": e.verdict or "", "binding": b.key if b else None,
                  "at_roof": bool(fl is not None and fl.at_roof),
                  "attainable_us": fl.attainable_us if fl is not None else None,
                  "floor_share": frac, "floor_ns": 0.0 if row["extra"] else floor,
                  "above_floor_ns": total - floor,
                  "top_cause": e.causes[0].id if e.causes and not (fl is not None and fl.at_roof) else None}


def attach(ex: RangeExplanation, profiles: Sequence[Any], report: str) -> None:
    """Each kernel's verdict and floor from `profiles` (an ncu report of the same program), the range's floor from
    them, and the kernels' own distance to their floors as a cause; every saving bounded by the new floor."""
    ex.ncu_report = report
    if not ex.configs:
        return
    rows = [_one(n, c, k, t, ex, profiles) for n, c, k, t in ex.configs]
    ex.kernel_floors = rows
    non_kernel = sum(t for n, _, t in ex.kernels if n.startswith("[") and "Device-to-Device" not in n)
    serial = ex.instances * ex.launch_cost_ns
    floor = sum(r["floor_ns"] for r in rows) + non_kernel + serial
    ex.floor_ns = min(ex.floor_ns, floor) if ex.floor_ns else floor
    matched = [r for r in rows if r["matched"] and not r["extra"]]
    if not matched:
        ex.notes.append(f"no kernel of the range has a launch of the same size in {report}: no kernel floor")
    above = sum(r["above_floor_ns"] for r in matched)
    gpu_bound = ex.busy_share >= th("gpu_bound_share")
    room = ex.time_ns - ex.floor_ns
    kept = [c for c in ex.causes if c.id != "kernels"]
    if above > 0:
        saving = min(above * (1.0 if gpu_bound else ex.busy_share), room)
        worst = sorted(matched, key=lambda r: -r["above_floor_ns"])
        ev = [f"{len(matched)} of the range's {len(rows)} kernels have an ncu launch of the same size; together "
              f"they are {_us(above)} above their practical best ({_us(sum(r['total_ns'] for r in matched))} "
              "against the floors' share of it)"]
        if not gpu_bound:
            ev.append(f"the GPU is busy {ex.busy_share:.0%} of the range: a faster kernel saves that share of its "
                      "gain")
        ev += [f"{short_name(r['name'], 50)}: {r['verdict']}" for r in worst[:3]]
        kept.append(Cause("kernels", "the kernels themselves: above their floors", above, max(saving, 0.0),
                          "explain each kernel on its own (profctl explain NCU_REPORT --kernel NAME): its causes, "
                          "its floor and what each fix saves", ev,
                          [(short_name(r["name"], 60), r["above_floor_ns"]) for r in worst[:5]]))
    for c in kept:
        c.saving_ns = min(c.saving_ns, room)
    keep = th("min_cause_share") * ex.time_ns
    ex.causes = sorted((c for c in kept if c.saving_ns >= keep), key=lambda c: -c.saving_ns)
    ex.all_fixed_ns = max(ex.floor_ns, ex.time_ns - sum(c.saving_ns for c in ex.causes))
    shares = [r["floor_share"] for r in matched if r["floor_share"] is not None]
    if shares:
        ex.notes.append(f"kernel floors from {report}: {len(matched)} kernels matched, their practical best "
                        f"{statistics.median(shares):.0%} of their time (median); the range's floor is their "
                        f"floors plus {_us(serial)} that stays serial (one launch's host cost per instance)")
