"""What makes two sides of a comparison measure different things (a different GPU, versions that change the
numbers, L2 flushed in one only: reasons to refuse), or differ in ways worth a warning (driver, NVTX, warm-up,
the code under test); read from the runs' typed manifests (profctl.run_store.Manifest)."""

from __future__ import annotations

from typing import Any

from profctl import machine_state
from profctl.inputs import Side
from profctl.schema import timed_rows


def env_checks(base: Side, new: Side, backends: set[str]) -> tuple[list[str], list[str]]:
    """(reasons to refuse, warnings) from the two manifests."""
    reasons: list[str] = []
    warns: list[str] = []
    gb, gn = base.gpu(), new.gpu()
    if gb and gn and gb != gn:
        reasons.append(f"different GPU: {gb} vs {gn}")
    checks = [("torch", "PyTorch"), ("cuda", "CUDA")]
    if "flash-attn" in backends:
        checks.append(("flash_attn", "flash-attn"))
    if "fa4" in backends:
        checks += [("fa4", "FA4"), ("cutlass_dsl", "CUTLASS DSL")]
    for key, name in checks:
        vb, vn = base.manifest.versions.get(key), new.manifest.versions.get(key)
        if vb and vn and vb != vn:
            reasons.append(f"{name} {vb} vs {vn}")
    db, dn = base.manifest.driver, new.manifest.driver
    if db and dn and db != dn:
        warns.append(f"driver {db} vs {dn}")
    wb, wn = base.manifest.workload, new.manifest.workload
    if wb is not None and wn is not None:
        if wb.flush_l2 != wn.flush_l2:
            reasons.append(f"L2 flushed before each iteration in {'base' if wb.flush_l2 else 'new'} only")
        if wb.nvtx != wn.nvtx:
            warns.append("NVTX ranges on in one run only (a small per-iteration cost)")
        if wb.warmup != wn.warmup:
            warns.append(f"warm-up iterations {wb.warmup} vs {wn.warmup}")
    cb, cn = base.manifest.commit, new.manifest.commit
    if cb and cn and cb != cn:
        warns.append(f"code under test: {cb[:10]} -> {cn[:10]}")
    return reasons, warns


def side_checks(side: Side, label: str, backends: set[str]) -> list[str]:
    """Reasons the runs of one side are not runs of the same thing (different GPU or versions)."""
    out = []
    for other in side.runs[1:]:
        reasons, _ = env_checks(side.runs[0], other, backends)
        out += [f"{label} runs {side.runs[0].name} and {other.name}: {r}" for r in reasons]
    return out


def machine_checks(base: Side, new: Side) -> tuple[list[str], str | None]:
    """(warnings, the states in words when CPU timings could have moved with them, else None) from the runs' recorded
    machine state (profctl.machine_state): the two sides in different states, or one side's runs in different
    states (a reason its per-run medians may fall in two groups)."""
    mb = [r.manifest.machine or None for r in base.runs]
    mn = [r.manifest.machine or None for r in new.runs]
    words, apart = machine_state.differences(mb, mn)
    out = []
    if words:
        out.append("the sides ran in different machine states: " + "; ".join(words))
    for label, side in (("base", mb), ("new", mn)):
        if len(side) > 1:
            inner, _ = machine_state.differences(side[:1], side[1:])
            busy = [x for x in map(machine_state.busy_of, side) if x is not None]
            if inner and busy and max(busy) - min(busy) >= machine_state.BUSY_CORES_APART:
                out.append(f"{label}'s runs ran in different machine states (busy cores of other work "
                           f"{min(busy):.1f}..{max(busy):.1f}): their medians may fall in groups")
    return out, "; ".join(words) if apart and all_cpu(base) and all_cpu(new) else None


def all_cpu(s: Side) -> bool:
    """Whether everything a side timed was timed on a CPU (CPU ops, CPU bench rows)."""
    if s.kind == "bench":
        return bool(s.rows) and all(r.device == "cpu" for r in s.rows)
    rows = timed_rows(s.summary) if s.summary is not None else []
    return bool(rows) and all(k.extra.get("device") == "cpu" for k in rows)


def values_text(v: set[Any]) -> str:
    """A set of values in a few words, for a message that says what differs."""
    xs = sorted(str(x) for x in v)
    return ",".join(xs[:6]) + (",..." if len(xs) > 6 else "")
