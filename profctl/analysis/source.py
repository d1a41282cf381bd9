"""Where a kernel spends its time, from ncu's warp-state samples: the stall breakdown, the hottest source lines
(with samples in library helpers folded under the user's line that called them), the hottest instructions, and
ncu's findings ranked beside the lines they point at.

Input: :class:`profctl.schema.profile.KernelProfile` (profctl.readers.ncu_profiles). Output: plain dataclasses the
renderers print as tables, Markdown, JSON or HTML.

Inline attribution. Triton inlines ``tl.sum``/``tl.max`` from ``triton/language/standard.py``, and CUDA C++ inlines
header functions; ncu's line table names the helper's file and line, not the call site, and neither the report's
API nor its source page carries the call site. profctl recovers it: an instruction of a library file goes to the
nearest instruction (in address order, within :data:`WINDOW` instructions) of a user line whose text calls the
helper by name (``_sum_combine`` and ``sum`` -> a line calling ``sum(``); failing a named caller, to the nearest
user line. Each folded line says so (``via standard.py:263 _sum_combine``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from profctl.analysis.parked import PARKED, opcode, parked
from profctl.analysis.stalls import at_opcode, ratio_metric, reason
from profctl.schema.profile import KernelProfile, PcSample, RuleFinding, is_library_file

#: how far (in instructions) a library instruction may be from the user line it is attributed to
WINDOW = 48


@dataclass(frozen=True)
class StallShare:
    reason: str
    samples: int
    share: float  # of all the kernel's samples, 0..1
    cycles_per_issue: float | None = None  # ncu's per-kernel ratio: cycles per issued instruction in this state

    @property
    def label(self) -> str:
        return reason(self.reason).label


@dataclass
class HotLine:
    """One source line (library samples folded in), or one instruction when the kernel has no source."""

    file: str | None
    line: int | None
    text: str
    samples: int = 0
    share: float = 0.0
    stalls: dict[str, int] = field(default_factory=dict)
    executed: int = 0
    via: dict[str, int] = field(default_factory=dict)  # "standard.py:263 _sum_combine" -> samples folded in
    opcodes: dict[str, int] = field(default_factory=dict)  # opcode -> samples on this line
    memory: dict[str, float] = field(default_factory=dict)  # worst smem_nway, excessive sector share
    notes: list[str] = field(default_factory=list)  # ncu's markers on this line (rule: message)
    offset: int | None = None  # for an instruction row

    @property
    def where(self) -> str:
        if self.file is None:
            return f"+0x{self.offset:x}" if self.offset is not None else "?"
        return f"{short_path(self.file)}:{self.line}"

    def top_stalls(self, n: int = 3) -> list[tuple[str, float]]:
        """The line's leading stall reasons (issuing left out) with their share of the line's samples."""
        st = [(k, v) for k, v in self.stalls.items() if reason(k).is_stall]
        st.sort(key=lambda kv: -kv[1])
        return [(k, v / self.samples) for k, v in st[:n] if self.samples]


@dataclass(frozen=True)
class Finding:
    """ncu's rule result, ranked, with the lines it points at in `where`."""

    rule: str
    title: str
    message: str
    kind: str
    speedup: float | None
    speedup_type: str
    where: tuple[str, ...] = ()


@dataclass
class SourceView:
    """Everything the source and stalls views show for one kernel."""

    profile: KernelProfile
    stalls: list[StallShare]
    lines: list[HotLine]
    sass: list[HotLine]
    findings: list[Finding]
    has_source: bool
    attribution: str = ""
    warnings: list[str] = field(default_factory=list)

    @property
    def total_samples(self) -> int:
        return self.profile.total_samples


def short_path(path: str) -> str:
    """The last two parts of a path (``language/standard.py``, ``planted/planted.cu``)."""
    parts = [p for p in path.replace("\\", "/").split("/") if p]
    return "/".join(parts[-2:]) if parts else path


# ------------------------------------------------------------ stalls
def stall_breakdown(p: KernelProfile) -> list[StallShare]:
    """Per reason: samples, share of all samples, and ncu's cycles-per-issued-instruction ratio when collected.
    Largest first; reasons with no samples and no cycles are left out."""
    total = p.total_samples
    by: dict[str, int] = {}
    for pc in p.pcs:
        for k, v in pc.stalls.items():
            by[k] = by.get(k, 0) + v
    keys = set(by) | {k for k in ratio_keys(p)}
    out = [StallShare(k, by.get(k, 0), by.get(k, 0) / total if total else 0.0, p.metrics.get(ratio_metric(k)))
           for k in keys]
    out = [s for s in out if s.samples or (s.cycles_per_issue or 0) > 0.005]
    out.sort(key=lambda s: (-s.samples, -(s.cycles_per_issue or 0)))
    return out


def ratio_keys(p: KernelProfile) -> list[str]:
    pre, suf = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"
    keys = [m[len(pre):-len(suf)] for m in p.metrics if m.startswith(pre) and m.endswith(suf)]
    return ["no_instructions" if k == "no_instruction" else k for k in keys]


def stall_sites(p: KernelProfile, key: str, top: int = 3) -> list[tuple[str, float, str | None]]:
    """Where a stall reason's samples sit: (opcode, share of that reason's samples, line "file:n" or None),
    the largest first, grouped by opcode and line."""
    total = sum(x.stalls.get(key, 0) for x in p.pcs)
    if not total:
        return []
    by: dict[tuple[str, str | None], int] = {}
    for x in p.pcs:
        v = x.stalls.get(key, 0)
        if v:
            where = f"{short_path(x.file)}:{x.line}" if x.file else None
            k = (opcode(x.sass), where)
            by[k] = by.get(k, 0) + v
    out = sorted(by.items(), key=lambda kv: -kv[1])[:top]
    return [(op, v / total, where) for (op, where), v in out]


def site_sentence(p: KernelProfile, key: str) -> str:
    """``71% at WARPGROUP.DEPBAR.LE (triton_attention.py:85): waiting for ... wgmma ...`` for the largest site
    of a stall, with what the stall means there when the opcode says more than the reason."""
    sites = stall_sites(p, key, 1)
    if not sites:
        return ""
    op, share, where = sites[0]
    means = at_opcode(key, op)
    if key == "barrier":
        idle = parked(p)
        at_site = [x for x in p.pcs if opcode(x.sass) == op and where == (f"{short_path(x.file)}:{x.line}" if x.file
                                                                          else None)]
        if idle and 2 * sum(x.stalls.get(key, 0) for x in at_site if x.offset in idle) > \
                sum(x.stalls.get(key, 0) for x in at_site):
            means = PARKED
    return f"{100 * share:.0f}% at {op}" + (f" ({where})" if where else "") + (f": {means}" if means else "")


# ------------------------------------------------------------ lines
_CALL = re.compile(r"\b(\w+)\s*\(")


def helper_name(func: str | None) -> str | None:
    """The public name a helper function is called by: ``_sum_combine`` -> ``sum``, ``_elementwise_max`` ->
    ``max``, ``sum`` -> ``sum``."""
    if not func:
        return None
    n = func.lstrip("_")
    n = re.sub(r"^elementwise_", "", n)
    n = re.sub(r"_combine(_fn)?$", "", n)
    return n or None


Home = tuple[str, int]


def attribute(p: KernelProfile) -> tuple[list[tuple[PcSample, Home | None]], int]:
    """Each instruction with the user line (file, line) it is attributed to: its own for a user line; for a
    library instruction, among the user lines that call the helper by name, the one whose instructions lie
    nearest in address (a calling line with no instruction of its own stands where its neighbours' are); with no
    such caller, the line of the nearest user instruction (within :data:`WINDOW`); None with no source.
    Also: how many library samples found a named caller."""
    pcs = list(p.pcs)
    user_idx = [i for i, x in enumerate(pcs) if x.file and x.line and not is_library_file(x.file)]
    where = _positions(pcs, user_idx, _callers(p))
    named = 0
    out: list[tuple[PcSample, Home | None]] = []
    for i, x in enumerate(pcs):
        if not x.file or not x.line:
            out.append((x, None))
        elif not is_library_file(x.file):
            out.append((x, (x.file, x.line)))
        else:
            name = helper_name(p.source_funcs.get(x.file, {}).get(x.line))
            cands = [(min(abs(k - i) for k in ks), home) for home, (calls, ks) in where.items() if name in calls]
            if cands:
                named += x.samples
                out.append((x, min(cands)[1]))
                continue
            j = min((j for j in user_idx if abs(j - i) <= WINDOW), key=lambda j: (abs(j - i), j > i), default=None)
            out.append((x, (pcs[j].file or "", pcs[j].line or 0) if j is not None else None))
    return out, named


def _positions(pcs: list[PcSample], user_idx: list[int], callers: dict[Home, set[str]]
               ) -> dict[Home, tuple[set[str], list[int]]]:
    """For each user line that calls something: (the names it calls, the instruction indices standing for it:
    its own, else those of the nearest line within 3 that has any)."""
    at: dict[Home, list[int]] = {}
    for i in user_idx:
        at.setdefault((pcs[i].file or "", pcs[i].line or 0), []).append(i)
    out: dict[Home, tuple[set[str], list[int]]] = {}
    for (f, n), calls in callers.items():
        ks = at.get((f, n)) or next((at[(f, n + d)] for d in (-1, 1, -2, 2, -3, 3) if (f, n + d) in at), [])
        if calls and ks:
            out[(f, n)] = (calls, ks)
    return out


def _callers(p: KernelProfile) -> dict[Home, set[str]]:
    """(file, line) of user lines -> the names they call (``tl.sum(x)`` -> sum)."""
    out: dict[Home, set[str]] = {}
    for f, lines in p.source_text.items():
        if is_library_file(f):
            continue
        for n, text in lines.items():
            code = text.split("#", 1)[0]
            out[(f, n)] = set(_CALL.findall(code))
    return out


def hot_lines(p: KernelProfile, top: int | None = 10) -> tuple[list[HotLine], int, int]:
    """The kernel's source lines by samples, library samples folded under their caller; the library samples
    folded in, and those of them that found a named caller. Empty when no instruction maps to a source line."""
    total = p.total_samples
    pairs, named = attribute(p)
    lines: dict[Home, HotLine] = {}
    for x, home in pairs:
        if home is None:
            continue
        hl = lines.get(home)
        if hl is None:
            text = p.source_text.get(home[0], {}).get(home[1], "")
            hl = lines[home] = HotLine(home[0], home[1], text.strip())
        _add(hl, x)
        if (x.file, x.line) != home and x.samples:
            fn = p.source_funcs.get(x.file or "", {}).get(x.line or -1, "")
            tag = f"{short_path(x.file or '')}:{x.line}" + (f" {fn}" if fn else "")
            hl.via[tag] = hl.via.get(tag, 0) + x.samples
    out = sorted(lines.values(), key=lambda h: (-h.samples, -h.executed))
    for h in out:
        h.share = h.samples / total if total else 0.0
    _attach_notes(out, p.findings)
    folded = sum(sum(h.via.values()) for h in out)
    return (out[:top] if top else out), folded, named


def _add(hl: HotLine, x: PcSample) -> None:
    hl.samples += x.samples
    hl.executed += x.executed or 0
    for k, v in x.stalls.items():
        hl.stalls[k] = hl.stalls.get(k, 0) + v
    if x.samples:
        op = opcode(x.sass)
        hl.opcodes[op] = hl.opcodes.get(op, 0) + x.samples
    nway = x.memory.get("smem_nway")
    if nway and nway > hl.memory.get("smem_nway", 0):
        hl.memory["smem_nway"] = nway
    if x.memory.get("excessive_sectors"):
        hl.memory["excessive_sectors"] = hl.memory.get("excessive_sectors", 0) + x.memory["excessive_sectors"]


def hot_instructions(p: KernelProfile, top: int | None = 10) -> list[HotLine]:
    """The kernel's instructions by samples: what a library kernel without source shows."""
    total = p.total_samples
    out: list[HotLine] = []
    for x in sorted(p.pcs, key=lambda x: (-x.samples, -(x.executed or 0))):
        if not x.samples and out:
            break
        hl = HotLine(x.file, x.line, x.sass, offset=x.offset)
        _add(hl, x)
        hl.share = x.samples / total if total else 0.0
        out.append(hl)
    return out[:top] if top else out


def _attach_notes(lines: Sequence[HotLine], findings: Sequence[RuleFinding]) -> None:
    by = {(h.file, h.line): h for h in lines}
    for f in findings:
        for m in f.markers:
            h = by.get((m.file, m.line))
            note = f"{f.rule}: {m.message}"
            if h is not None and m.message and note not in h.notes:
                h.notes.append(note)


# ------------------------------------------------------------ findings
_RANK = {"error": 0, "warning": 1, "optimization": 2, "info": 3, "ok": 4}


def ranked_findings(p: KernelProfile) -> list[Finding]:
    """ncu's rule results that say something (a title or a message), by estimated speedup (global before local),
    then severity; duplicates (same rule and message) once."""
    seen: set[tuple[str, str]] = set()
    out = []
    for f in p.findings:
        if not (f.title or f.message) or f.kind == "ok":
            continue
        key = (f.rule, f.message)
        if key in seen:
            continue
        seen.add(key)
        where = tuple(dict.fromkeys(
            f"{short_path(m.file)}:{m.line}" for m in f.markers if m.file and m.line is not None))
        out.append(Finding(f.rule, f.title or f.rule, _plain(f.message), f.kind, f.speedup, f.speedup_type, where))
    out.sort(key=lambda f: (-(f.speedup or 0) * (1.0 if f.speedup_type != "local" else 0.5), _RANK.get(f.kind, 5)))
    return out


_LINK = re.compile(r"@(?:section|url):([^:@]+):([^@]+)@")


def _plain(message: str) -> str:
    """ncu's message with its GUI links (``@section:Id:Title@``, ``@url:Title:href@``) as plain words."""
    return _LINK.sub(lambda m: m.group(2) if m.group(0).startswith("@section") else m.group(1), message).strip()


# ------------------------------------------------------------ the view
def view(p: KernelProfile, top: int | None = 10) -> SourceView:
    """The source and stalls views of one kernel."""
    lines, folded, named = hot_lines(p, top)
    has_source = any(x.file for x in p.pcs)
    warnings = []
    if not p.has_samples:
        warnings.append(f"{p.base_name}: no warp-state samples in this report; record with profctl ncu --recipe "
                        "stalls (or ncu --section SourceCounters --section WarpStateStats, or --set full)")
    elif not has_source:
        warnings.append(f"{p.base_name}: no source-line information (a library kernel, or a CUDA kernel built "
                        "without -lineinfo: add nvcc -lineinfo); showing the hottest instructions")
    elif not p.source_text:
        warnings.append(f"{p.base_name}: line numbers but no source text; record with --import-source yes")
    how = ""
    if folded:
        how = (f"{folded} samples in library helpers (Triton's tl.sum, tl.max, ...; inlined headers) are shown under "
               "the user line that called them: " + ("all found by the helper's name on that line" if named >= folded
                                                     else f"{named} by the helper's name on that line, "
                                                          f"{folded - named} by address proximity"))
    _name_flex_mods(p, lines)
    return SourceView(p, stall_breakdown(p), lines, hot_instructions(p, top), ranked_findings(p), has_source,
                      how, warnings)


def _name_flex_mods(p: KernelProfile, lines: list[HotLine]) -> None:
    """A hot line of FlexAttention's generated kernel that computes the user's mask_mod or score_mod says so."""
    from profctl.analysis.flex_source import is_flex_kernel, mod_lines

    if not is_flex_kernel(p.base_name):
        return
    roles = {f: mod_lines(t) for f, t in p.source_text.items()}
    for h in lines:
        role = roles.get(h.file or "", {}).get(h.line or -1)
        if role:
            h.notes.insert(0, f"flex: your {role} (inlined by Inductor)")


__all__ = ["Finding", "HotLine", "SourceView", "StallShare", "attribute", "helper_name", "hot_instructions",
           "hot_lines", "ranked_findings", "short_path", "stall_breakdown", "view"]
