"""The one loader of an Nsight Compute report (.ncu-rep) through NVIDIA's ``ncu_report`` module (PyPI
``ncu-report``, the optional extra ``profctl[ncu]``), which reads reports on machines without a GPU or ncu. One load
yields both what the Summary is made of (:class:`~profctl.readers._ncu.Launch`, every launch) and the kernels in
depth (:class:`~profctl.schema.profile.KernelProfile`, profctl.readers._ncu_profile), for every launch or only
those some regexes pick (the others then come as their names only); the public readers
(profctl.readers.ncu_rep, profctl.readers.ncu_profiles) sit on top.

The container is checked first (truncation, a writer newer than the reader), because the library loads a truncated
file silently; the library then runs in a child process (profctl.readers._ncu_child), because some damaged
reports make it abort. Without the module this loader raises ReaderMissing; profctl.inputs then asks ncu itself
(``ncu --import``) for the raw CSV page and reads that.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import re
import signal
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profctl import proc
from profctl.errors import BadReport, ReaderMissing, ToolFailed
from profctl.readers._compressed import plain_copy
from profctl.readers._ncu import RULE_TYPES, SPEEDUP_TYPES, Launch, RepInfo, check_rep, newer_than, to_base
from profctl.readers._ncu_profile import profile_of
from profctl.schema.profile import KernelProfile

#: how long the child reading a report may take (ncu_report reads large reports slowly)
CHILD_TIMEOUT_S = 1800.0


@dataclass
class Loaded:
    """What one load of a report gave: every launch (when asked for), the profiles (when asked for: in depth for
    the launches the regexes pick, names only for the others), the writing ncu's version and the reader."""

    launches: list[Launch] = field(default_factory=list)
    profiles: list[KernelProfile] = field(default_factory=list)
    tool_version: str | None = None
    reader: str = ""


class plain_report(plain_copy):
    """Context manager: the report as an uncompressed file (a temporary copy for .gz/.xz; the original
    untouched)."""

    def __init__(self, p: Path) -> None:
        super().__init__(p, default_name=p.name + ".ncu-rep")


def load(rep: Path, shown: Path, *, launches: bool = True, profiles: bool = False,
         kernels: Sequence[str] | None = None, isolate: bool = True) -> Loaded:
    """Read the uncompressed report `rep` (named `shown` in messages) once. `launches`: every launch, for the
    Summary; `profiles`: KernelProfiles, in depth for the launches whose name, base name or NVTX path one of the
    regexes `kernels` searches (every launch when None), names only for the rest. `isolate` False reads in this
    process: for a report ncu has just written here (a damaged one is what needs the child)."""
    info = checked(rep, shown)
    want: dict[str, Any] = {"launches": launches, "profiles": profiles,
                            "kernels": list(kernels) if kernels is not None else None}
    if isolate:
        doc = _in_child(rep, shown, want)
        got = Loaded(launches=[Launch.from_dict(d) for d in doc.get("launches") or ()],
                     profiles=[KernelProfile.from_dict(d) for d in doc.get("profiles") or ()])
    else:
        import ncu_report as mod

        got = walk(mod, rep, shown, **want)
    got.tool_version = info.tool_version
    got.reader = f"ncu_report {module_version() or '?'}"
    return got


def module_version() -> str | None:
    """The installed ncu_report's version (its wheel follows Nsight Compute's numbering), or None."""
    from importlib.metadata import PackageNotFoundError, version  # 10-15 ms (email, zipfile)
    for dist in ("ncu-report", "ncu_report"):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return None


def checked(rep: Path, shown: Path) -> RepInfo:
    """The report's container facts (check_rep) once it is known readable here: not truncated or foreign, the
    ncu_report module installed (ReaderMissing), and not written by an ncu newer than that module (BadReport)."""
    info = check_rep(rep)
    if importlib.util.find_spec("ncu_report") is None:
        raise ReaderMissing(f"{shown}: reading .ncu-rep needs the ncu_report module: pip install 'profctl[ncu]'")
    reader_version = module_version()
    if newer_than(info.tool_version, reader_version):
        raise BadReport(
            f"{shown}: written by Nsight Compute {info.tool_version}, newer than this reader "
            f"(ncu_report {reader_version}); upgrade it: pip install -U ncu-report"
        )
    return info


def _in_child(rep: Path, shown: Path, want: dict[str, Any]) -> dict[str, Any]:
    """What the child (profctl.readers._ncu_child) read from `rep`: ``{"launches": [...], "profiles": [...]}``
    as JSON. ncu_report is native code, and some damaged reports make it abort the process (a protobuf ``Check
    failed``, seen by tests/unit/test_reader_fuzz.py): in the child, its abort becomes a one-line BadReport."""
    # the child imports this very profctl, however the parent found it (installed, PYTHONPATH, sys.path)
    root = str(Path(__file__).resolve().parents[2])
    env = {"PYTHONPATH": os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])}
    with tempfile.TemporaryDirectory(prefix="profctl-ncu-read-") as td:
        out, log = Path(td) / "read.json", Path(td) / "child.log"
        try:
            res = proc.run([sys.executable, "-m", "profctl.readers._ncu_child", str(rep), str(out), str(shown),
                            json.dumps(want)], log=log, timeout_s=CHILD_TIMEOUT_S, check=False, env=env)
        except ToolFailed as e:  # a timeout
            raise BadReport(f"{shown}: ncu_report did not finish reading it in {CHILD_TIMEOUT_S:.0f} s") from e
        try:
            doc = json.loads(out.read_text()) if out.exists() else None
        except ValueError:
            doc = None
        if res.returncode == 0 and isinstance(doc, dict) and "error" not in doc:
            return doc
        if isinstance(doc, dict) and isinstance(doc.get("error"), str):
            raise BadReport(doc["error"])
        rc = res.returncode
        how = (f"signal {signal.Signals(-rc).name}" if rc < 0 and -rc in signal.Signals._value2member_map_
               else f"exit status {rc}")
        text = res.log_text(8000)
        tail = next((ln.strip() for ln in reversed(text.splitlines()) if "Check failed" in ln or "rror" in ln),
                    proc.last_line(text))
        raise BadReport(f"{shown}: ncu_report stopped reading it ({how}{': ' + tail[:160] if tail else ''}): a "
                        "damaged report")


# ------------------------------------------------------------ ncu_report (in the child, or here for ncu's own)
def walk(mod: Any, rep: Path, shown: Path, *, launches: bool = True, profiles: bool = False,
         kernels: Sequence[str] | None = None) -> Loaded:
    """Every launch of `rep`, read with the ncu_report module `mod` (see :func:`load`)."""
    try:
        ctx = mod.load_report(str(rep))
    except Exception as e:  # the SWIG layer raises plain RuntimeError/FileNotFoundError
        raise BadReport(
            f"{shown}: ncu_report cannot load it: {str(e).strip().splitlines()[0][:160] if str(e) else e}"
        ) from None
    picks = [re.compile(k) for k in kernels] if kernels is not None else None
    got = Loaded()
    n = 0
    try:
        for ri in range(ctx.num_ranges()):
            rng = ctx.range_by_idx(ri)
            for ai in range(rng.num_actions()):
                a = rng.action_by_idx(ai)
                if launches or picks is None:  # every launch in full
                    ln = launch_of(mod, a, n, shown)
                    deep = profiles and (picks is None or _picked(ln, picks))
                else:  # profiles only: the names first, the rest where a regex picks it
                    assert picks is not None
                    ln = launch_names(mod, a, n, shown)
                    deep = profiles and _picked(ln, picks)
                    ln = launch_of(mod, a, n, shown) if deep else ln
                if launches:
                    got.launches.append(ln)
                if deep:
                    got.profiles.append(profile_of(a, ln, shown))
                elif profiles:
                    got.profiles.append(KernelProfile(id=ln.id, name=ln.name, base_name=ln.base_name,
                                                      nvtx=tuple(ln.nvtx), report=str(shown), names_only=True))
                n += 1
    except BadReport:
        raise
    except Exception as e:  # a damaged result the container check could not see
        raise BadReport(f"{shown}: ncu_report fails on launch {n} ({type(e).__name__}: "
                        f"{str(e).strip()[:120]})") from None
    if not n:
        raise no_launches(shown)
    return got


def _picked(ln: Launch, picks: list[re.Pattern[str]]) -> bool:
    """Whether a regex searches the launch's name, base name or NVTX path (what profctl.analysis.explanation's
    matching may pick it by)."""
    path = "/".join(ln.nvtx)
    return any(rx.search(ln.name) or rx.search(ln.base_name) or rx.search(path) for rx in picks)


def no_launches(shown: Path) -> BadReport:
    """A report ncu_report reads no launch from. ncu writes no report when its filters match nothing, so a
    file that holds result blocks (check_rep) and yields no launch is damaged."""
    return BadReport(f"{shown}: no profiled kernel launch could be read from it (a damaged report, or one whose "
                     "filters matched nothing)")


def _text(x: Any) -> str:
    """A name the SWIG layer returned: None (an unreadable name) and non-strings become ''."""
    return x.strip() if isinstance(x, str) else ""


def launch_names(mod: Any, a: Any, idx: int, shown: Path) -> Launch:
    """Only what names the launch (kernel names, NVTX path): what a kernel not asked for in depth costs. One with
    no name is read in full, so that its damage is reported as :func:`launch_of` reports it."""
    IAction = mod.IAction
    ln = Launch(id=idx, name="", base_name=_text(a.name(IAction.NameBase_FUNCTION)))
    ln.set_name(_text(a.name(IAction.NameBase_DEMANGLED)), _text(a.name(IAction.NameBase_MANGLED)) or None)
    if not (ln.name or ln.base_name):
        return launch_of(mod, a, idx, shown)
    ln.set_nvtx(*_nvtx(a))
    return ln


def launch_of(mod: Any, a: Any, idx: int, shown: Path) -> Launch:
    """One launch, read from ncu_report's action `a`; BadReport for one it could not decode (see
    :func:`_undecoded`)."""
    IAction, IMetric = mod.IAction, mod.IMetric
    numeric = {IMetric.ValueKind_DOUBLE, IMetric.ValueKind_FLOAT, IMetric.ValueKind_UINT32,
               IMetric.ValueKind_UINT64}
    ln = Launch(id=idx, name="", base_name=_text(a.name(IAction.NameBase_FUNCTION)))
    ln.set_name(_text(a.name(IAction.NameBase_DEMANGLED)), _text(a.name(IAction.NameBase_MANGLED)) or None)
    for mname in a.metric_names() or ():
        m = a.metric_by_name(mname)
        if m is None or m.kind() not in numeric:
            continue
        kind = m.kind()
        v = m.as_double() if kind in (IMetric.ValueKind_DOUBLE, IMetric.ValueKind_FLOAT) else m.as_uint64()
        if not isinstance(v, (int, float)) or not math.isfinite(float(v)):
            continue
        val, unit = to_base(float(v), _text(m.unit()))
        ln.metrics[str(mname)] = val
        if unit:
            ln.units[str(mname)] = unit
    ln.set_nvtx(*_nvtx(a))
    dev = a.metric_by_name("device__attribute_display_name")
    ln.device = _text(dev.as_string()) or None if dev is not None else None
    ma = ln.metrics.get("device__attribute_compute_capability_major")
    mi = ln.metrics.get("device__attribute_compute_capability_minor")
    ln.cc = f"{int(ma)}.{int(mi)}" if ma is not None and mi is not None else None
    ln.rules = _rules(a)
    ln.fill_launch_fields()
    _undecoded(ln, shown)
    return ln


def _undecoded(ln: Launch, shown: Path) -> None:
    """Refuse a launch that ncu_report could not decode. Nsight Compute names every kernel it profiles, so a
    launch with no name is a damaged result (a flipped bit in it makes ncu_report return an empty action: no
    name, no metrics), not a kernel to show as `<unnamed launch>` at 0 ns."""
    if ln.name or ln.base_name:
        return
    what = "no kernel name and no metrics" if not ln.metrics else f"no kernel name ({len(ln.metrics)} metrics)"
    raise BadReport(f"{shown}: a damaged Nsight Compute report: launch {ln.id} has {what}; ncu_report could not "
                    "decode it")


def _nvtx(a: Any) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(push/pop stack, open start/end ranges) per domain name, as ncu recorded them for the launch."""
    st = a.nvtx_state()
    pp: dict[str, list[str]] = {}
    se: dict[str, list[str]] = {}
    if st is None:
        return pp, se
    for did in st.domains():
        d = st.domain_by_id(did)
        name = _text(d.name())
        pp.setdefault(name, []).extend(_text(x) for x in d.push_pop_ranges())
        se.setdefault(name, []).extend(_text(x) for x in d.start_end_ranges())
    return pp, se


def _rules(a: Any) -> list[dict[str, Any]]:
    try:
        raw = a.rule_results_as_dicts()
    except Exception:
        return []
    out = []
    for r in raw or []:
        msg = r.get("rule_message") or {}
        sp = r.get("speedup_estimation") or {}
        out.append(
            {
                "rule": r.get("rule_identifier", ""),
                "section": r.get("section_identifier", ""),
                "type": RULE_TYPES.get(int(msg.get("type", 0) or 0), ""),
                "title": msg.get("title", ""),
                "message": msg.get("message", ""),
                "speedup_type": SPEEDUP_TYPES.get(int(sp.get("type", 0) or 0), "") if sp else "",
                "speedup": float(sp["speedup"]) if sp and sp.get("speedup") is not None else None,
            }
        )
    return out
