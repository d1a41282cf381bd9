"""Read an Nsight Compute report (.ncu-rep, or gzip/xz-compressed) into a Summary, through NVIDIA's
``ncu_report`` module (PyPI ``ncu-report``, the optional extra ``profctl[ncu]``), which reads reports on machines
without a GPU or ncu. The container is checked first (truncation, a writer newer than the reader), because the
library loads a truncated file silently; the library then runs in a child process, because some damaged reports
make it abort. Without the module this reader raises ReaderMissing; profctl.inputs then asks ncu itself
(``ncu --import``) for the raw CSV page and reads that.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from profctl.errors import BadReport
from profctl.readers._compressed import plain_copy
from profctl.readers._ncu import (
    RULE_TYPES,
    SPEEDUP_TYPES,
    Launch,
    check_rep,
    newer_than,
    summarize,
    to_base,
)
from profctl.schema import Summary


class ReaderMissing(BadReport):
    """The ncu_report module is not installed (another way to read the report may exist: ncu --import)."""


def read(path: str | Path, *, by_range: bool = True, isolate: bool = True, **_: Any) -> Summary:
    """The Summary of one report: per (kernel, NVTX range) when `by_range`, else per kernel. `isolate` False
    reads in this process: for a report ncu has just written here (a damaged one is what needs the child)."""
    p = Path(path)
    with plain_report(p) as rep:
        launches, version, reader = read_launches(rep, shown_as=p, isolate=isolate)
    return summarize(launches, path=p, tool_version=version, by_range=by_range, reader=reader)


class plain_report(plain_copy):
    """Context manager: the report as an uncompressed file (a temporary copy for .gz/.xz; the original
    untouched)."""

    def __init__(self, p: Path) -> None:
        super().__init__(p, default_name=p.name + ".ncu-rep")


def module_version() -> str | None:
    """The installed ncu_report's version (its wheel follows Nsight Compute's numbering), or None."""
    try:
        from importlib.metadata import PackageNotFoundError, version
    except ImportError:  # pragma: no cover
        return None
    for dist in ("ncu-report", "ncu_report"):
        try:
            return version(dist)
        except PackageNotFoundError:
            continue
    return None


def checked(rep: Path, shown: Path) -> Any:
    """The report's container facts (check_rep) once it is known readable here: not truncated or foreign, the
    ncu_report module installed (ReaderMissing), and not written by an ncu newer than that module (BadReport)."""
    import importlib.util

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


def read_launches(rep: Path, *, shown_as: Path | None = None, isolate: bool = True
                  ) -> tuple[list[Launch], str | None, str]:
    """(launches, version of the ncu that wrote the report, which reader read it).

    ncu_report is native code, and some damaged reports make it abort the process (a protobuf ``Check failed``,
    seen by tests/unit/test_reader_fuzz.py). So it runs in a child Python (`isolate`, profctl.readers._ncu_child)
    and its abort becomes a one-line BadReport; the launches come back as JSON.
    """
    shown = shown_as or rep
    info = checked(rep, shown)
    reader_version = module_version()
    if isolate:
        launches = _read_in_child(rep, shown)
    else:
        import ncu_report as mod

        launches = _read_with_module(mod, rep, shown)
    return launches, info.tool_version, f"ncu_report {reader_version or '?'}"


def _read_in_child(rep: Path, shown: Path, mode: str = "launches") -> list[Any]:
    """What the child read from `rep` (see :func:`read_launches`): Launches for mode ``launches``, the kernel
    profiles' plain dicts for ``profiles`` (profctl.readers.ncu_source)."""
    import json
    import os
    import signal
    import sys
    import tempfile

    from profctl import proc
    from profctl.errors import ToolFailed
    from profctl.readers._ncu_child import launch_from_dict

    # the child imports this very profctl, however the parent found it (installed, PYTHONPATH, sys.path)
    root = str(Path(__file__).resolve().parents[2])
    env = {"PYTHONPATH": os.pathsep.join([root, *filter(None, [os.environ.get("PYTHONPATH")])])}
    with tempfile.TemporaryDirectory(prefix="profctl-ncu-read-") as td:
        out, log = Path(td) / "launches.json", Path(td) / "child.log"
        try:
            res = proc.run([sys.executable, "-m", "profctl.readers._ncu_child", str(rep), str(out), str(shown), mode],
                           log=log, timeout_s=CHILD_TIMEOUT_S, check=False, env=env)
        except ToolFailed as e:  # a timeout
            raise BadReport(f"{shown}: ncu_report did not finish reading it in {CHILD_TIMEOUT_S:.0f} s") from e
        try:
            doc = json.loads(out.read_text()) if out.exists() else None
        except ValueError:
            doc = None
        if res.returncode == 0 and isinstance(doc, dict) and isinstance(doc.get(mode), list):
            return [launch_from_dict(d) for d in doc[mode]] if mode == "launches" else doc[mode]
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


#: how long the child reading a report may take (ncu_report reads large reports slowly)
CHILD_TIMEOUT_S = 1800.0


# ------------------------------------------------------------ ncu_report
def _read_with_module(mod: Any, rep: Path, shown: Path) -> list[Launch]:
    try:
        ctx = mod.load_report(str(rep))
    except Exception as e:  # the SWIG layer raises plain RuntimeError/FileNotFoundError
        raise BadReport(
            f"{shown}: ncu_report cannot load it: {str(e).strip().splitlines()[0] if str(e) else e}"
        ) from None
    launches: list[Launch] = []
    try:
        for ri in range(ctx.num_ranges()):
            rng = ctx.range_by_idx(ri)
            for ai in range(rng.num_actions()):
                launches.append(_launch(mod, rng.action_by_idx(ai), len(launches), shown))
    except BadReport:
        raise
    except Exception as e:  # a damaged result the container check could not see
        raise BadReport(f"{shown}: ncu_report fails on launch {len(launches)} ({type(e).__name__}: "
                        f"{str(e).strip()[:120]})") from None
    if not launches:
        raise no_launches(shown)
    return launches


def no_launches(shown: Path) -> BadReport:
    """A report ncu_report reads no launch from. ncu writes no report when its filters match nothing, so a
    file that holds result blocks (check_rep) and yields no launch is damaged."""
    return BadReport(f"{shown}: no profiled kernel launch could be read from it (a damaged report, or one whose "
                     "filters matched nothing)")


def _text(x: Any) -> str:
    """A name the SWIG layer returned: None (an unreadable name) and non-strings become ''."""
    return x.strip() if isinstance(x, str) else ""


def _launch(mod: Any, a: Any, idx: int, shown: Path) -> Launch:
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
