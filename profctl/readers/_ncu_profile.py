"""One kernel launch of an Nsight Compute report in depth, from ncu_report's action (the loader,
profctl.readers._ncu_load, calls it in the child process that reads users' reports): every instruction's
warp-state samples by stall reason, how often it executed, its source file and line, the source text around it,
and ncu's guided-analysis findings with the lines they point at (:class:`profctl.schema.profile.KernelProfile`).

This is what ncu's GUI shows on its Source and Details pages. It needs a report with source counters and warp
sampling (``--section SourceCounters --section WarpStateStats`` or ``--set full``; ``--import-source yes`` puts the
source text in). The reader only reads: hot lines, inline attribution and stall breakdowns are
profctl.analysis.source's work.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from profctl.readers._ncu import Launch
from profctl.schema.profile import KernelProfile, Marker, PcSample, RuleFinding, is_library_file

#: the per-instruction sample counters ncu's SourceCounters section collects (instanced by program counter)
SAMPLES = "smsp__pcsamp_sample_count"
STALL_PREFIX = "smsp__pcsamp_warps_issue_stalled_"
EXECUTED = "inst_executed"
#: per-instruction counters (instanced by program counter) -> their short names in PcSample.memory: global
#: sectors an access moved and would move ideally coalesced, shared-memory wavefronts it took and would take
#: without bank conflicts, its global requests, threads executing it, divergent branch targets
MEMORY = {"derived__memory_l2_theoretical_sectors_global_excessive": "excessive_sectors",
          "derived__memory_l1_conflicts_shared_nway": "smem_nway",
          "derived__avg_thread_executed": "avg_threads",
          "memory_l2_theoretical_sectors_global": "sectors",
          "memory_l2_theoretical_sectors_global_ideal": "sectors_ideal",
          "memory_l2_theoretical_sectors_local": "local_sectors",
          "memory_l1_wavefronts_shared": "wavefronts",
          "memory_l1_wavefronts_shared_ideal": "wavefronts_ideal",
          "memory_l1_tag_requests_global": "requests",
          "smsp__branch_targets_threads_divergent": "divergent_targets",
          "thread_inst_executed": "thread_inst"}
#: lines of source kept on each side of a line that has instructions (for the HTML excerpt)
CONTEXT_LINES = 6
_KINDS = {0: "info", 1: "ok", 2: "optimization", 3: "warning", 4: "error"}
_SPEEDUP = {0: "", 1: "local", 2: "global"}


def profile_of(a: Any, ln: Launch, shown: Path) -> KernelProfile:
    """The launch `ln` (read from the action `a` by the loader) in depth."""
    per_pc = _instanced(a)
    base = min(per_pc) if per_pc else 0
    files = _source_files(a)
    pcs = tuple(_pc(a, pc, vals, base, bool(files)) for pc, vals in sorted(per_pc.items()))
    text = _source_windows(files, pcs)
    funcs = _library_funcs(files, pcs)
    return KernelProfile(
        id=ln.id, name=ln.name, base_name=ln.base_name, nvtx=tuple(ln.nvtx), device=ln.device, cc=ln.cc,
        metrics=dict(ln.metrics), pcs=pcs, findings=tuple(_findings(a, base)), source_files=tuple(files),
        source_text=text, source_funcs=funcs, opcodes=_opcodes(a),
        has_samples=SAMPLES in set(a.metric_names() or ()), report=str(shown),
    )


def _instanced(a: Any) -> dict[int, dict[str, float]]:
    """program counter -> {counter: value} for the sample counters, each stall reason, inst_executed and the
    memory counters (short names of MEMORY)."""
    def wanted(n: str) -> bool:
        return n in (SAMPLES, EXECUTED) or n in MEMORY or (n.startswith(STALL_PREFIX) and not n.endswith("_not_issued"))

    names = [n for n in (a.metric_names() or ()) if wanted(n)]
    out: dict[int, dict[str, float]] = {}
    for n in names:
        m = a.metric_by_name(n)
        if m is None or not m.has_correlation_ids():
            continue
        ids = m.correlation_ids()
        key = n[len(STALL_PREFIX):] if n.startswith(STALL_PREFIX) else MEMORY.get(n, n)
        for i in range(m.num_instances()):
            v = m.as_double(i) if n in MEMORY else m.as_uint64(i)
            if v and math.isfinite(v):
                out.setdefault(int(ids.as_uint64(i)), {})[key] = v
    return out


def _pc(a: Any, pc: int, vals: dict[str, float], base: int, with_source: bool) -> PcSample:
    file = line = None
    if with_source:
        si = a.source_info(pc)
        if si is not None and si.file_name():
            file, line = str(si.file_name()), int(si.line())
    short = set(MEMORY.values())
    stalls = {k: int(v) for k, v in vals.items() if k not in (SAMPLES, EXECUTED) and k not in short}
    sass = a.sass_by_pc(pc)
    ex = vals.get(EXECUTED)
    return PcSample(offset=pc - base, sass=" ".join(sass.split()) if isinstance(sass, str) else "",
                    samples=int(vals.get(SAMPLES, 0)), stalls=stalls, executed=int(ex) if ex is not None else None,
                    file=file, line=line, memory={k: float(v) for k, v in vals.items() if k in short})


def _opcodes(a: Any) -> dict[str, float]:
    """SASS opcode -> warp-level instructions executed (ncu's InstructionStats section), when collected."""
    m = a.metric_by_name("sass__inst_executed_per_opcode")
    if m is None or not m.has_correlation_ids():
        return {}
    ids = m.correlation_ids()
    out = {}
    for i in range(m.num_instances()):
        v = m.as_double(i)
        if v and math.isfinite(v):
            out[str(ids.as_string(i))] = float(v)
    return out


def _source_files(a: Any) -> dict[str, str]:
    try:
        sf = a.source_files()
        return {str(k): str(sf[k]) for k in sf.keys()} if sf is not None else {}  # noqa: SIM118 (a SWIG map)
    except Exception:  # no source in the report
        return {}


def _source_windows(files: dict[str, str], pcs: tuple[PcSample, ...]) -> dict[str, dict[int, str]]:
    """The text of every line an instruction maps to, with CONTEXT_LINES on each side."""
    wanted: dict[str, set[int]] = {}
    for p in pcs:
        if p.file in files and p.line:
            wanted.setdefault(p.file, set()).update(range(p.line - CONTEXT_LINES, p.line + CONTEXT_LINES + 1))
    out: dict[str, dict[int, str]] = {}
    for f, lines in wanted.items():
        text = files[f].splitlines()
        out[f] = {n: text[n - 1] for n in sorted(lines) if 1 <= n <= len(text)}
    return out


def _library_funcs(files: dict[str, str], pcs: tuple[PcSample, ...]) -> dict[str, dict[int, str]]:
    """For each line of a library file that an instruction maps to, the function it is in (the nearest ``def``
    or C/C++ function header above it)."""
    out: dict[str, dict[int, str]] = {}
    for f in {p.file for p in pcs if p.file in files and is_library_file(p.file)}:
        assert f is not None
        text = files[f].splitlines()
        for n in sorted({p.line for p in pcs if p.file == f and p.line}):
            name = _enclosing_function(text, n)
            if name:
                out.setdefault(f, {})[n] = name
    return out


_DEF = re.compile(r"^\s*(?:async\s+)?def\s+(\w+)\s*\(")
_CFUNC = re.compile(r"^[\w:<>,\s\*&]*?\b(\w+)\s*\([^;]*\)\s*(?:const\s*)?\{?\s*$")


def _enclosing_function(text: list[str], line: int) -> str | None:
    for k in range(min(line, len(text)) - 1, max(line - 400, 0) - 1, -1):
        m = _DEF.match(text[k])
        if m:
            return m.group(1)
        if text[k][:1].isalpha():  # a C/C++ header at column 0: `__device__ float foo(int x) {`
            c = _CFUNC.match(text[k])
            if c and c.group(1) not in ("if", "for", "while", "switch", "return"):
                return c.group(1)
    return None


def _findings(a: Any, base: int) -> list[RuleFinding]:
    try:
        raw = a.rule_results_as_dicts() or []
        marks = a.source_markers() or []
    except Exception:
        return []
    by_rule: dict[tuple[str, str], list[Marker]] = {}
    for mk in marks:
        if not isinstance(mk, dict):
            continue
        key = (str(mk.get("rule_identifier") or ""), str(mk.get("section_identifier") or ""))
        loc = mk.get("source_location") or {}
        addr = mk.get("source_address")
        by_rule.setdefault(key, []).append(Marker(
            message=str(mk.get("message") or ""), file=loc.get("file_name") or None,
            line=int(loc["line"]) if loc.get("line") is not None else None,
            offset=int(addr) - base if isinstance(addr, int) and addr >= base else None))
    out = []
    for r in raw:
        msg = r.get("rule_message") or {}
        sp = r.get("speedup_estimation") or {}
        speed = sp.get("speedup") if sp else None
        key = (str(r.get("rule_identifier") or ""), str(r.get("section_identifier") or ""))
        out.append(RuleFinding(
            rule=key[0], section=key[1], kind=_KINDS.get(int(msg.get("type", 0) or 0), "info"),
            title=str(msg.get("title") or ""), message=str(msg.get("message") or ""),
            speedup=float(speed) if isinstance(speed, (int, float)) and math.isfinite(speed) else None,
            speedup_type=_SPEEDUP.get(int(sp.get("type", 0) or 0), "") if sp else "",
            markers=tuple(by_rule.get(key, ()))))
    return out
