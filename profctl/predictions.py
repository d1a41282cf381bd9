"""Explain's predictions, kept and measured against what the user's change realized (issue 43, item 6).

Every ``profctl explain`` keeps what it predicted for kernel A (its causes, each's saving and the time of the fixed
kernel, its floor) with the run it read (``<run>/explain/<kernel>.json``) or, for a report outside the run store,
under ``<reports>/predictions/``. When the same kernel is explained before and after a change (``profctl explain
BEFORE AFTER --kernel K``), the causes that went away or shrank are set against the time the change realized
(BEFORE's duration less AFTER's): where exactly one cause changed, the change is that cause's, and the pair goes
into a tally per GPU and cause id (``<reports>/predictions/tally.json``) that later explanations quote beside the
cause ("barrier-sync on NVIDIA H200: 3 of 4 predictions within 35 %"). Where several changed together the saving
cannot be split between them: said, and not tallied. No peer tool measures its own advice on the user's code.

Explained against a reference (``profctl explain A --vs REF``, REF another kernel: cuDNN's, say), the causes the user
is told to fix are the PAIR's, and kernel A alone often names none. So the same file also keeps, under ``"vs"``, one
pair prediction per reference (the latest last): the reference (kernel, name, report, NVTX range, duration) and the
pair's causes with their savings (issue 50). ``explain BEFORE AFTER`` then scores the latest pair prediction kept for
BEFORE: each of its causes against AFTER's pair causes against the same reference (kept by ``explain AFTER --vs REF``,
or computed from the reference's report), and says which prediction it scored. A kernel-alone explain keeps the
file's pair predictions. Schema ``profctl.prediction/2`` (``/1``, without ``"vs"``, is still read).

Files are written atomically; one that cannot be written is a note, never a failed explanation.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from profctl.errors import CannotWrite

#: a prediction within this share of the realized saving counts as right
WITHIN = 0.35
#: a cause whose saving after the change is under this share of its saving before has shrunk
SHRANK = 0.5
#: several causes went away, but one was predicted to save this many times the others together: the change is its
DOMINANT = 4.0
#: a cause AFTER has and BEFORE had not, predicted to save at least this share of what the gone cause was predicted to
#: save, is a fault the change brought: the realized time is both, and the pair is not tallied. Issue 50's step 14:
#: loads-not-pipelined (42.2 us) "went away" when the kernel's O store went uncoalesced (19.1 us by AFTER's own
#: prediction) and the kernel lost 40.6 us; its consumers' data waits had not gone (8 % of the working warps'
#: samples, 6 % before): the new fault's memory traffic re-labelled them (tests/unit/test_ladder50_b16.py)
NEW_FAULT = 0.25
#: causes that name what binds a kernel once its faults are gone (a unit at its roof: profctl.analysis.causes'
#: _ROOF_CAUSE; or no single fault: latency-bound): one that appears after a change is the limit the gone fault hid
#: ("fixed, about X us, then the exposed latency binds"), not a fault the change brought. The register-shuffle fixes of
#: issue 50 (steps 10-12) left latency-bound or sfu-bound behind, and were faster
LIMITS = frozenset({"latency-bound", "sfu-bound", "compute-bound", "dram-bound"})
DIR = "predictions"
SCHEMA = "profctl.prediction/2"
#: the schemas a kept prediction is read in (/1 has no pair predictions)
READ = ("profctl.prediction/1", SCHEMA)


@dataclass(frozen=True)
class PredictionOutcome:
    """One cause of BEFORE set against the change: predicted and, where attributable, realized saving (us)."""

    cause: str
    went: str                # "went away" | "shrank"
    predicted_us: float
    realized_us: float | None

    @property
    def within(self) -> bool | None:
        if self.realized_us is None or self.realized_us <= 0:
            return None if self.realized_us is None else False
        return abs(self.predicted_us - self.realized_us) <= WITHIN * self.realized_us


def prediction(p: Any, diagnosis: Any) -> dict[str, Any]:
    """What explain predicts for kernel `p` (a KernelProfile) from its one-kernel diagnosis, as kept on disk."""
    from profctl._version import __version__

    fl = diagnosis.floor
    return {"schema": SCHEMA, "kernel": p.base_name, "name": p.name, "device": p.device, "report": str(p.report),
            "nvtx": p.nvtx_path, "duration_us": (p.duration_ns or 0) / 1e3,
            "floor_us": fl.floor_us if fl is not None else None,
            "attainable_us": fl.attainable_us if fl is not None else None,
            "verdict": diagnosis.verdict(),
            "causes": [{"id": c.id, "saving_us": round(c.saving_us, 3),
                        "fixed_us": None if c.fixed_us is None else round(c.fixed_us, 3)}
                       for c in [*diagnosis.causes, *diagnosis.slack]],
            "profctl": __version__, "at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}


def pair_prediction(e: Any) -> dict[str, Any]:
    """What explain predicts for A against reference B (an Explanation of a pair): B's identity and the causes the
    pair printed (none where A and B take the same time: there is no gap to close)."""
    b = e.b
    causes = [] if e.same_time else [*e.causes, *e.slack]
    return {"reference": {"kernel": b.base_name, "name": b.name, "report": str(b.report), "nvtx": b.nvtx_path,
                          "duration_us": (b.duration_ns or 0) / 1e3},
            "verdict": e.verdict, "gap_us": None if e.gap_us is None else round(e.gap_us, 3),
            "causes": [{"id": c.id, "saving_us": round(c.saving_us, 3)} for c in causes],
            "at": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")}


def same_reference(ref: dict[str, Any], other: dict[str, Any]) -> bool:
    """Two kept references name the same kernel launch: the same report file, kernel name and NVTX range."""
    def ident(r: dict[str, Any]) -> tuple[str, str, str]:
        return (str(Path(str(r.get("report", ""))).resolve()), str(r.get("name")), str(r.get("nvtx")))
    return ident(ref) == ident(other)


def pair_against(kept: dict[str, Any] | None, ref: dict[str, Any]) -> dict[str, Any] | None:
    """The pair prediction kept in `kept` against reference `ref`, or None."""
    for v in reversed((kept or {}).get("vs") or []):
        if isinstance(v, dict) and same_reference(v.get("reference") or {}, ref):
            return v
    return None


def where(root: Path, p: Any, run_dir: Path | None) -> Path:
    """The file that keeps `p`'s prediction: in its run's directory, else in the store's predictions folder."""
    if run_dir is not None:
        return run_dir / "explain" / f"{_safe(p.base_name)}.json"
    key = hashlib.sha256(f"{Path(str(p.report)).resolve()}\0{p.name}\0{p.nvtx_path}".encode()).hexdigest()[:16]
    return root / DIR / f"{_safe(p.base_name)[:40]}-{key}.json"


def keep(root: Path, p: Any, diagnosis: Any, run_dir: Path | None = None, vs: dict[str, Any] | None = None
         ) -> tuple[Path | None, str | None]:
    """Write `p`'s prediction, with the pair predictions kept before and `vs` (one against a reference, replacing
    the one against the same reference); (its path, None) or (None, why it could not be kept)."""
    from profctl.fsutil import atomic_write_json

    path = where(root, p, run_dir)
    d = prediction(p, diagnosis)
    pairs = list((load(root, p, run_dir) or {}).get("vs") or [])
    if vs is not None:
        pairs = [v for v in pairs if not same_reference(v.get("reference") or {}, vs["reference"])] + [vs]
    if pairs:
        d["vs"] = pairs
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, d)
    except (OSError, CannotWrite) as e:
        return None, f"the prediction was not kept ({path}: {getattr(e, 'message', None) or e})"
    return path, None


def load(root: Path, p: Any, run_dir: Path | None = None) -> dict[str, Any] | None:
    """A kept prediction for `p`, or None (none kept, or one profctl cannot read)."""
    try:
        d = json.loads(where(root, p, run_dir).read_text())
    except (OSError, ValueError):
        return None
    return d if isinstance(d, dict) and d.get("schema") in READ else None


def close_loop(pred: dict[str, Any], before_us: float, after_us: float, after: Any, scored: str | None = None
               ) -> tuple[list[PredictionOutcome], list[str]]:
    """BEFORE's predicted causes (`pred`: a kept prediction, or a pair prediction of it) against the change: which
    went away or shrank in `after` (AFTER's diagnosis, or its causes by id and saving: AFTER's pair against the same
    reference), and what it realized. `scored` says which prediction was scored (in the first line)."""
    realized = before_us - after_us
    now = dict(after) if isinstance(after, dict) else {c.id: c.saving_us for c in [*after.causes, *after.slack]}
    before_ids = {c.get("id") for c in pred.get("causes", [])}
    changed: list[tuple[dict[str, Any], str]] = []
    for c in pred.get("causes", []):
        if c.get("saving_us", 0) <= 0:
            continue
        left = now.get(c["id"])
        if left is None:
            changed.append((c, "went away"))
        elif left < SHRANK * c["saving_us"]:
            changed.append((c, "shrank"))
    head = (f"{'scored: ' + scored + '; ' if scored else ''}the change took the kernel from {before_us:,.1f} us to "
            f"{after_us:,.1f} us ({'saved' if realized >= 0 else 'lost'} {abs(realized):,.1f} us)")
    if not changed:
        n = len(pred.get("causes", []))
        return [], [f"{head}; none of the {n} cause(s) predicted before went away or shrank"]
    changed.sort(key=lambda cw: -float(cw[0]["saving_us"]))
    rest = sum(float(c["saving_us"]) for c, _ in changed[1:])
    if len(changed) == 1 or float(changed[0][0]["saving_us"]) >= DOMINANT * rest:
        # one cause changed, or one whose predicted saving dwarfs the others': the change is its
        c, went = changed[0]
        brought = {i: s for i, s in now.items()
                   if i not in before_ids and i not in LIMITS and s >= NEW_FAULT * float(c["saving_us"])}
        if brought:
            names = ", ".join(f"{i} ({s:,.1f} us by AFTER's prediction)" for i, s in sorted(brought.items()))
            return [PredictionOutcome(c["id"], went, float(c["saving_us"]), None)], [
                f"{head}; {c['id']} {went} (predicted to save {float(c['saving_us']):,.1f} us), but the change also "
                f"brought {names}: the realized {realized:,.1f} us is both, so it is not set against the prediction "
                "and not tallied (remove the new fault, then compare again)"]
        o = PredictionOutcome(c["id"], went, float(c["saving_us"]), realized)
        verdict = ("within 35 %" if o.within else "off by more than 35 %") if o.within is not None else \
            "the change saved nothing"
        also = (" (also gone: " + ", ".join(f"{x['id']} ({x['saving_us']:,.1f} us predicted)" for x, _ in
                                            changed[1:]) + ", too small to matter)") if len(changed) > 1 else ""
        return [o], [f"{head}; {c['id']} {went}: predicted to save {o.predicted_us:,.1f} us, realized "
                     f"{realized:,.1f} us ({verdict}){also}"]
    outs = [PredictionOutcome(c["id"], went, float(c["saving_us"]), None) for c, went in changed]
    names = ", ".join(f"{o.cause} ({o.went}, predicted {o.predicted_us:,.1f} us)" for o in outs)
    return outs, [f"{head}; several causes changed together: {names}. Their savings overlap, so the change is not "
                  "split between them and none is tallied"]


def tally_path(root: Path) -> Path:
    return root / DIR / "tally.json"


def _read_tally(root: Path) -> dict[str, Any]:
    try:
        d = json.loads(tally_path(root).read_text())
        return d if isinstance(d, dict) else {}
    except (OSError, ValueError):
        return {}


def add(root: Path, device: str | None, outcomes: list[PredictionOutcome], key: str) -> str | None:
    """Count the attributable outcomes under `device` and cause id; the same before/after pair (`key`) counts once.
    None, or why the tally could not be written."""
    from profctl.fsutil import atomic_write_json

    scored = [o for o in outcomes if o.realized_us is not None]
    if not scored:
        return None
    t = _read_tally(root)
    dev = t.setdefault(device or "unknown GPU", {})
    for o in scored:
        entry = dev.setdefault(o.cause, {"n": 0, "within": 0, "seen": []})
        if key in entry["seen"]:
            continue
        entry["seen"].append(key)
        entry["n"] += 1
        entry["within"] += int(bool(o.within))
    try:
        tally_path(root).parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(tally_path(root), t)
    except (OSError, CannotWrite) as e:
        return f"the tally was not updated ({tally_path(root)}: {getattr(e, 'message', None) or e})"
    return None


def track_record(root: Path, device: str | None, cause: str) -> str | None:
    """``barrier-sync on NVIDIA H200: 3 of 4 predictions within 35 %`` from the tally, or None."""
    e = _read_tally(root).get(device or "unknown GPU", {}).get(cause)
    if not e or not e.get("n"):
        return None
    return (f"{cause} on {device or 'this GPU'}: {e['within']} of {e['n']} prediction{'s' if e['n'] != 1 else ''} "
            f"within 35 % of what the change realized")


def kept_for(root: Path, report: Path) -> list[dict[str, Any]]:
    """Every prediction kept for kernels of `report` (a report file, or a run directory's): in the run's explain
    folder and in the store's predictions folder."""
    report = Path(report).resolve()
    folders = [report / "explain"] if report.is_dir() else [report.parent / "explain"]
    folders.append(root / DIR)
    out = []
    for folder in folders:
        for f in sorted(folder.glob("*.json")) if folder.is_dir() else []:
            try:
                d = json.loads(f.read_text())
            except (OSError, ValueError):
                continue
            if not isinstance(d, dict) or d.get("schema") not in READ:
                continue
            kept = Path(str(d.get("report", ""))).resolve()
            if kept == report or (report.is_dir() and report in kept.parents):
                out.append(d)
    return out


def in_comparison(root: Path, base: Path, rows: list[Any]) -> list[str]:
    """For `profctl compare` of two ncu reports: each kernel of BASE that explain made a prediction for, what it
    predicted against what the change realized (BASE's time less NEW's). No tally: a comparison has no diagnosis
    of NEW to say which cause went away (``profctl explain BEFORE AFTER --kernel K`` does)."""
    from profctl.kernels import match_key

    kept = {match_key(str(d.get("name", ""))): d for d in kept_for(root, base)}
    out = []
    for r in rows:
        d = kept.get(r.case.get("match_key", "")) if hasattr(r, "case") else None
        if d is None or r.base_ms is None or r.new_ms is None or not d.get("causes"):
            continue
        first = max(d["causes"], key=lambda c: c.get("saving_us", 0))
        realized = (r.base_ms - r.new_ms) * 1e3
        out.append(f"explain predicted for {d['kernel']} ({str(d.get('at', ''))[:10]}): {first['id']} saves "
                   f"{first['saving_us']:,.1f} us; this change realized {realized:,.1f} us (`profctl explain BASE NEW "
                   f"--kernel {d['kernel']}` says which cause went away and tallies it)")
    return out


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", name)[:80] or "kernel"


__all__ = ["READ", "SCHEMA", "WITHIN", "PredictionOutcome", "add", "close_loop", "in_comparison", "keep", "kept_for",
           "load", "pair_against", "pair_prediction", "prediction", "same_reference", "tally_path", "track_record",
           "where"]
