"""The explanation ``profctl explain`` prints, built from a report: read the kernels --kernel and --vs pick, choose
A and B, their roofs, explain, and keep A's prediction with its run. One function for the command and for the
Python API (``profctl.explain``), so that both give the same ``-f json``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from profctl.errors import ProfctlError, UsageError


def build(report: str, kernel: str, *, vs: str | None = None, report2: str | None = None, shape: str | None = None,
          reports: Path | None = None) -> Any:
    """The :class:`profctl.analysis.explanation.Explanation` of kernel A (`kernel` in `report`) alone against its
    roofs, or against B (`vs`, in `report2` or `report`); `shape` a shape key (:func:`shape_key`) for the roofs.
    Typed errors as the command words them (UsageError, BadReport, NothingMatched)."""
    from profctl import inputs
    from profctl.analysis import explanation
    from profctl.analysis import select as kernel_select

    for flag, pattern in (("--kernel/--vs", kernel), ("--kernel/--vs", vs)):
        if pattern is not None:
            kernel_select.pattern_of(pattern, flag)
    # only the kernels --kernel and --vs pick are read in depth (the others by name, for a message naming them)
    pa = inputs.read_profiles(report, root=reports, kernels=[kernel] if report2 is not None or vs is None
                              else [kernel, vs])
    a, note_a = kernel_select.select(pa, kernel, report)
    if report2 is None and vs is None:
        e = explanation.explain_one(a, explanation.kernel_roofs(a, shape), shape_given=shape is not None)
        e.chosen += [n for n in (note_a,) if n]
    else:
        pb = inputs.read_profiles(report2, root=reports, kernels=[vs or kernel]) if report2 is not None else pa
        b, note_b = kernel_select.select(pb, vs or kernel, report2 or report, like=a)
        if a is b:
            raise UsageError(f"--kernel {kernel!r} and --vs {vs!r} pick the same launch ({kernel_select.describe(a)})")
        roofs = {"a": explanation.kernel_roofs(a, shape), "b": explanation.kernel_roofs(b, shape)}
        e = explanation.explain(a, b, roofs=roofs, shape_given=shape is not None)
        e.chosen += [n for n in (note_a, note_b) if n]
    close_the_loop(e, report, report2, reports, same_kernel=report2 is not None and e.b is not None
                   and e.b.base_name == e.a.base_name)
    return e


def close_the_loop(e: Any, report: str, report2: str | None, reports: Path | None, *, same_kernel: bool) -> None:
    """Keep A's prediction with its run (or in the store), and where the same kernel is explained before and after a
    change, set what was predicted against what the change realized and tally it (profctl.predictions)."""
    from profctl import inputs, predictions, run_store
    from profctl.analysis.causes import diagnose_one

    root = run_store.reports_root(reports)

    def run_dir(ref: str | None) -> Path | None:
        """The profctl run `ref` names (a run id, 'latest', a run directory); None for a report file, which is the
        user's and stays untouched (its prediction goes to the store's predictions folder)."""
        if not ref or Path(ref).is_file():
            return None
        try:
            found = inputs.resolve(ref, root=reports)
            d = found[0].run_dir if len(found) == 1 else None
            return d if d is not None and run_store.read_manifest(d).get("run_id") else None
        except Exception:  # it was read above: a second look that fails only means no run directory
            return None

    a, b = e.a, e.b
    da = e.diagnoses.get("a") or diagnose_one(a)  # the diagnosis printed is the one kept
    kept = predictions.load(root, a, run_dir(report))
    path, why = predictions.keep(root, a, da, run_dir(report))
    notes = [why] if why else []
    if path is not None:
        notes.append(f"A's prediction is kept in {path} (explain BEFORE AFTER sets it against what a change realized; "
                     "the tally per cause is profctl's track record)")
    if same_kernel and b is not None and a.duration_ns and b.duration_ns:
        db = e.diagnoses.get("b") or diagnose_one(b, e.roofs.get("b"), e.floors.get("b"))
        _, why_b = predictions.keep(root, b, db, run_dir(report2))
        outs, lines = predictions.close_loop(kept or predictions.prediction(a, da), a.duration_ns / 1e3,
                                             b.duration_ns / 1e3, db)
        e.loop += lines + (["(what explain predicts for BEFORE now; no prediction was kept from an earlier "
                            "explain of it)"] if kept is None and outs else [])
        key = f"{Path(str(a.report)).resolve()}|{Path(str(b.report)).resolve()}|{a.name}"
        why_t = predictions.add(root, a.device, outs, key)
        notes += [n for n in (why_b, why_t) if n]
    for c in [*e.causes, *e.slack]:
        c.track = predictions.track_record(root, a.device, c.id)
    e.notes += notes


def shape_key(text: str) -> str:
    """``b1,s4096,h32,d128`` -> a shape key profctl.shapes reads (``s`` is both sequence lengths)."""
    from profctl.shapes import Shape

    parts = []
    for p in text.split(","):
        p = p.strip()
        if p.startswith("s") and p[1:].isdigit():
            parts += [f"sq{p[1:]}", f"skv{p[1:]}"]
        else:
            parts.append(p)
    key = ",".join(parts)
    try:
        Shape.parse(key)
    except ValueError as e:
        raise UsageError(f"--shape {text!r}: {e}") from None
    return key


def kernel_names(report: str, reports: Path | None) -> str:
    """The kernels of an ncu report by name, for the message that asks for --kernel ('' when it is not one)."""
    from profctl import inputs

    try:
        ps = inputs.read_profiles(report, root=reports, kernels=["(?!)"])  # names only: no kernel read in depth
    except ProfctlError:
        return ""
    names = list(dict.fromkeys(p.base_name for p in ps))
    more = f", ... ({len(names) - 12} more)" if len(names) > 12 else ""
    return ", ".join(names[:12]) + more
