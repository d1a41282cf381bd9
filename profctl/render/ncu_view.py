"""Render an ncu Summary: the launch list, the recipe's metrics per kernel, the per-kernel diagnosis and the
per-backend comparison, as rich tables, Markdown or JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from profctl.analysis.diagnose import Diagnosis, backend_of, by_backend
from profctl.recipes import Recipe
from profctl.render.tables import console, fmt_ns, markdown, print_table
from profctl.schema import KernelRow, Summary


def fmt_value(v: float | None, unit: str | None) -> str:
    """A metric value in its base unit, readable: 41.7%, 271.23 us, 67.3 MB, 571 GB/s, 1.05M."""
    if v is None:
        return "-"
    u = unit or ""
    if u == "%":
        return f"{v:.1f}%"
    if u == "ns":
        return fmt_ns(v)
    if u in ("byte", "byte/s", "hz"):
        suffix = {"byte": "B", "byte/s": "B/s", "hz": "Hz"}[u]
        for scale, p in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
            if abs(v) >= scale:
                return f"{v / scale:.3g} {p}{suffix}"
        return f"{v:.0f} {suffix}"
    if abs(v) >= 1e6:
        return f"{v / 1e6:.3g}M"
    if abs(v) >= 1e4:
        return f"{v / 1e3:.3g}K"
    if float(v).is_integer():
        return f"{v:.0f}"
    return f"{v:.3g}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}%"


def _dims(d: Sequence[int] | None) -> str:
    return "x".join(str(x) for x in d) if d else "-"


def launch_rows(s: Summary) -> list[dict[str, Any]]:
    """One row per profiled launch, in profiling order."""
    rows = []
    for ln in s.meta.get("launches", []):
        backend, pass_, _ = backend_of(ln.get("nvtx_range"))
        rows.append(
            {
                "id": ln["id"],
                "backend": backend or "",
                "pass": pass_ or "",
                "kernel": ln["kernel"],
                "grid": _dims(ln.get("grid")),
                "block": _dims(ln.get("block")),
                "regs": ln.get("registers") if ln.get("registers") is not None else "-",
                "smem": fmt_value(ln.get("shared_mem_bytes"), "byte") if ln.get("shared_mem_bytes") else "0",
                "duration": fmt_ns(ln["duration_ns"]) if ln.get("duration_ns") is not None else "-",
            }
        )
    return rows


def _ordered_kernels(s: Summary, ds: Sequence[Diagnosis]) -> list[KernelRow]:
    by_key = {min(k.extra.get("ids") or [0]): k for k in s.kernels}
    out = [by_key[d.first_id] for d in ds if d.first_id in by_key]
    return out or list(s.kernels)


def metric_rows(
    s: Summary, recipe: Recipe | None, cc: tuple[int, int] | None, ds: Sequence[Diagnosis]
) -> list[dict[str, Any]]:
    """Kernel rows with the recipe's metrics (for this compute capability) as columns."""
    specs = recipe.metrics_for(cc) if recipe else []
    rows = []
    for k in _ordered_kernels(s, ds):
        backend, pass_, _ = backend_of(k.nvtx_range)
        r: dict[str, Any] = {
            "backend": backend or "",
            "pass": pass_ or "",
            "kernel": k.short_name,
            "n": k.count,
        }
        units = k.extra.get("units", {})
        for m in specs:
            r[m.label] = fmt_value(k.metrics.get(m.name), units.get(m.name))
        rows.append(r)
    return rows


def diagnosis_rows(ds: Sequence[Diagnosis]) -> list[dict[str, Any]]:
    return [
        {
            "backend": d.backend or "",
            "pass": d.pass_ or "",
            "kernel": d.kernel,
            "class": d.kernel_class,
            "time": fmt_ns(d.duration_ns),
            "bound": d.bound,
            "limiter": f"{d.limiter} {d.limiter_pct:.0f}%" if d.limiter and d.limiter_pct is not None else "-",
            "SM %": _pct(d.compute_pct),
            "mem %": _pct(d.memory_pct),
            "tensor %": _pct(d.tensor_pct),
            "occupancy": (
                f"{d.achieved_occupancy:.1f}/{d.theoretical_occupancy:.1f}%"
                if d.achieved_occupancy is not None and d.theoretical_occupancy is not None
                else "-"
            ),
            "roof": f"{d.roof_pct:.0f}%" if d.roof_pct is not None else "-",
            "notes": len(d.notes),
        }
        for d in ds
    ]


def note_lines(ds: Sequence[Diagnosis]) -> list[str]:
    """The diagnosis notes (thresholds crossed, recipe hints), one line each, under the tables."""
    out = []
    for d in ds:
        for n in d.notes:
            out.append(" ".join(x for x in (d.backend or "", d.pass_ or "", f"{d.kernel}:", n) if x))
    return out


def _device(s: Summary) -> str | None:
    devs = s.meta.get("devices") or []
    return devs[0] if len(devs) == 1 else None


def backend_rows(ds: Sequence[Diagnosis], device: str | None = None) -> list[dict[str, Any]]:
    return [
        {
            "pass": b["pass"],
            "backend": b["backend"],
            "kernels": b["kernels"],
            "time": fmt_ns(b["time_ns"]),
            "main kernel": f"{b['main_kernel']} ({100 * b['main_share']:.0f}%)",
            "bound": b["bound"],
            "limiter": b["limiter"] or "-",
            "tensor %": _pct(b["tensor_pct"]),
            "occupancy": (
                f"{b['achieved_occupancy']:.1f}/{b['theoretical_occupancy']:.1f}%"
                if b["achieved_occupancy"] is not None and b["theoretical_occupancy"] is not None
                else "-"
            ),
            "speed of light": b["roof"] or "-",
        }
        for b in by_backend(ds, device)
    ]


def to_json(s: Summary, ds: Sequence[Diagnosis]) -> str:
    return json.dumps(
        {"summary": s.to_dict(), "diagnosis": [d.to_dict() for d in ds], "backends": by_backend(ds, _device(s))},
        indent=1,
        default=str,
    )


def _sections(s: Summary, ds: Sequence[Diagnosis], recipe: Recipe | None, cc: tuple[int, int] | None,
              launches: bool) -> list[tuple[str, list[dict[str, Any]]]]:
    sections = []
    if launches:
        sections.append(("Profiled launches", launch_rows(s)))
    title = f"Metrics — recipe {recipe.name}" if recipe else "Metrics"
    sections += [
        (title, metric_rows(s, recipe, cc, ds)),
        ("Diagnosis", diagnosis_rows(ds)),
        ("Backends side by side (main kernel per backend)", backend_rows(ds, _device(s))),
    ]
    return sections


def to_markdown(s: Summary, ds: Sequence[Diagnosis], *, recipe: Recipe | None, cc: tuple[int, int] | None,
                launches: bool = True) -> str:
    text = "".join(f"## {t}\n\n{markdown(rows)}\n" for t, rows in _sections(s, ds, recipe, cc, launches))
    notes = note_lines(ds)
    if notes:
        text += "## Notes\n\n" + "".join(f"- {n}\n" for n in notes)
    return text


def to_console(s: Summary, ds: Sequence[Diagnosis], con: Any = None, *, recipe: Recipe | None,
               cc: tuple[int, int] | None, launches: bool = True) -> None:

    con = con or console()  # a pipe or a log gets wide lines rather than tables folded into 80 columns
    for t, rows in _sections(s, ds, recipe, cc, launches):
        print_table(con, t, rows)
    notes = note_lines(ds)
    if notes:
        con.print("Notes:", markup=False)
        for n in notes:
            con.print(f"  - {n}", markup=False, soft_wrap=True)
