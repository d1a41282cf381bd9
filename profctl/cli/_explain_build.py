"""The explanation ``profctl explain`` prints, built from a report: read the kernels --kernel and --vs pick, choose
A and B, their roofs, explain, and keep A's prediction with its run. One function for the command and for the
Python API (``profctl.explain``), so that both give the same ``-f json``."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from profctl.errors import ProfctlError, UsageError


def build(report: str, kernel: str, *, vs: str | None = None, report2: str | None = None, shape: str | None = None,
          reports: Path | None = None, changed: bool = False) -> Any:
    """The :class:`profctl.analysis.explanation.Explanation` of kernel A (`kernel` in `report`) alone against its
    roofs, or against B (`vs`, in `report2` or `report`); `shape` a shape key (:func:`shape_key`) for the roofs.
    `changed`: B is A after a change that also renamed it (a rewrite: another kernel, another launch in the same
    report), so A's prediction is set against B's time as for the same kernel in two reports.
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
    if changed and e.b is None:
        raise UsageError("--changed sets A against B after a change: give B (--vs, or a second report)")
    close_the_loop(e, report, report2, reports, same_kernel=e.b is not None and (
        changed or (report2 is not None and e.b.base_name == e.a.base_name)), shape=shape)
    return e


def close_the_loop(e: Any, report: str, report2: str | None, reports: Path | None, *, same_kernel: bool,
                   shape: str | None = None) -> None:
    """Keep A's prediction with its run (or in the store), and A's pair prediction where B is a reference (another
    kernel: ``explain A --vs REF``); where the same kernel is explained before and after a change, set what was
    predicted against what the change realized and tally it (profctl.predictions). A pair prediction kept for
    BEFORE is what is scored (against AFTER's pair with the same reference), else BEFORE's kernel-alone one."""
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
    vs = predictions.pair_prediction(e) if b is not None and not same_kernel else None
    path, why = predictions.keep(root, a, da, run_dir(report), vs=vs)
    notes = [why] if why else []
    if path is not None:
        notes.append(f"A's prediction{' (alone, and against B)' if vs else ''} is kept in {path} (explain BEFORE "
                     "AFTER sets it against what a change realized; the tally per cause is profctl's track record)")
    if same_kernel and b is not None and a.duration_ns and b.duration_ns:
        db = e.diagnoses.get("b") or diagnose_one(b, e.roofs.get("b"), e.floors.get("b"))
        # the latest pair prediction kept for BEFORE, where it named causes (a pair at the same time as its reference
        # names none: the user was then shown A's own causes, the kernel-alone prediction)
        # (and not one against AFTER itself: a pair explain of BEFORE against the changed kernel is no reference)
        pair = next((v for v in reversed((kept or {}).get("vs") or []) if v.get("causes")
                     and not _is_launch(v.get("reference") or {}, b)), None)
        after_pair, why_pair = (_after_against(b, pair["reference"], predictions.load(root, b, run_dir(report2)),
                                               reports, shape) if pair else (None, None))
        _, why_b = predictions.keep(root, b, db, run_dir(report2), vs=after_pair)
        if pair is not None and after_pair is not None:
            ref = pair["reference"]
            outs, lines = predictions.close_loop(
                pair, a.duration_ns / 1e3, b.duration_ns / 1e3,
                {c["id"]: float(c["saving_us"]) for c in after_pair["causes"]},
                scored=f"the pair's prediction against {_short(ref['kernel'])} ({ref.get('nvtx') or ref['report']}), "
                       "kept by explain BEFORE --vs it")
        else:
            outs, lines = predictions.close_loop(
                kept or predictions.prediction(a, da), a.duration_ns / 1e3, b.duration_ns / 1e3, db,
                scored="the kernel-alone prediction" + (f" ({why_pair})" if why_pair else ""))
            lines += (["(what explain predicts for BEFORE now; no prediction was kept from an earlier explain of "
                       "it)"] if kept is None and outs else [])
        e.loop += lines
        # the same change counts once; launches told apart by their NVTX ranges (one report, several shapes) are not
        # the same change
        key = f"{Path(str(a.report)).resolve()}|{Path(str(b.report)).resolve()}|{a.name}" + (
            f"|{a.nvtx_path}|{b.nvtx_path}" if a.nvtx_path or b.nvtx_path else "")
        why_t = predictions.add(root, a.device, outs, key)
        notes += [n for n in (why_b, why_t) if n]
    for c in [*e.causes, *e.slack]:
        c.track = predictions.track_record(root, a.device, c.id)
    e.notes += notes


def _short(name: str, n: int = 48) -> str:
    return name if len(name) <= n else name[:n - 3] + "..."


def _after_against(b: Any, ref: dict[str, Any], kept_b: dict[str, Any] | None, reports: Path | None,
                   shape: str | None) -> tuple[dict[str, Any] | None, str | None]:
    """AFTER's pair prediction against BEFORE's reference: the one kept (``explain AFTER --vs REF``), else computed
    from the reference's report (the same report, or a path that still reads); (it, None) or (None, why not)."""
    from profctl import inputs, predictions
    from profctl.analysis import explanation

    got = predictions.pair_against(kept_b, ref)
    if got is not None:
        return got, None
    try:
        pick = ref.get("nvtx") or ref["name"]  # only the reference's launch is read in depth
        ps = inputs.read_profiles(str(ref["report"]), root=reports, kernels=["^" + re.escape(str(pick)) + "$"])
        found = [p for p in ps if p.name == ref["name"] and p.nvtx_path == ref.get("nvtx")]
        if len(found) != 1:
            return None, f"BEFORE's reference {ref['kernel'][:60]} is not found once in {ref['report']}"
        r = found[0]
        roofs = {"a": explanation.kernel_roofs(b, shape), "b": explanation.kernel_roofs(r, shape)}
        pe = explanation.explain(b, r, roofs=roofs, shape_given=shape is not None)
    except (ProfctlError, OSError) as err:
        return None, f"BEFORE's reference could not be read ({err})"
    return predictions.pair_prediction(pe), None


def _is_launch(ref: dict[str, Any], p: Any) -> bool:
    """Whether a kept reference is kernel launch `p` (the same kernel name and NVTX range, in the same report)."""
    try:
        same_report = Path(str(ref.get("report"))).resolve() == Path(str(p.report)).resolve()
    except OSError:
        same_report = False
    return same_report and ref.get("name") == p.name and (ref.get("nvtx") or None) == (p.nvtx_path or None)


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
