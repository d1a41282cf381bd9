"""The cross-tool join: the summaries of one workload from several tools (nsys, ncu, torch.profiler) and its
bench rows, joined into one view.

Every kernel row is placed in a *group* -- (backend, pass, shape) -- and given a join key; rows of different
tools in the same group with the same key are the same kernel and become one :class:`JoinedKernel`.

Where the group comes from:
  - NVTX / record_function ranges in profctl's scheme, ``<backend>[<shape_key>]/measure/<backend>.fwd|bwd``
    (ncu and torch give the whole path; nsys gives one row per enclosing range, see :func:`_place_flat`);
  - the shared fixtures' ranges ``<backend>.<fwd|bwd>.it<N>`` (one per iteration; per-iteration times are the
    median over iterations, so the first iteration's one-time costs do not count);
  - for torch traces without ranges, the aten ops that launched the kernel (``aten::_flash_attention_forward``
    is sdpa-flash, matmul/softmax without an attention op is the eager baseline).
Backend names are made canonical (``naive`` -> eager, ``sdpa_mem_eff`` -> sdpa-efficient, ...; profctl.spec).

How kernels are matched (names differ between tools: nsys and ncu write ``(int)128``, ``(bool)0``,
``<unnamed>``, ``[lambda() (instance 1)]`` and ``T1`` placeholders; torch writes ``128``, ``false``,
``(anonymous namespace)``, ``{lambda()#1}`` and spells parameters out; ncu's CSV drops namespaces or prints only
the base name), in order:
  1. exact: profctl.kernels.kernel_id, the canonical identity (every reader writes it in ``KernelRow.kernel_id``);
  2. loose: profctl.kernels.loose_key, the identity with template arguments below the first level emptied;
  3. base: profctl.kernels.base_key, the base function name (with its template arguments for generic CUTLASS
     names), pairing several same-named kernels by nearest per-launch duration.
How each tool's row was matched is kept per joined kernel (``JoinedKernel.matches``, tool -> exact/loose/base;
``match`` is the weakest of them, ``only`` for a kernel one tool saw), so an output can say when a match was not
exact.
"""

from __future__ import annotations

import re
import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profctl.kernels import base_key, display_name, loose_key, match_key
from profctl.nvtx import RangeKey, parse_range
from profctl.schema import KernelRow, Summary, timed_rows
from profctl.schema.bench import BenchRow
from profctl.shapes import label_of_key, sort_key
from profctl.spec import canonical_backend

TOOL_ORDER = ("nsys", "torch", "ncu")


# ------------------------------------------------------------------------------------------- the view
@dataclass
class ToolKernel:
    """One tool's figures for one kernel in one group, per iteration."""

    tool: str
    name: str
    kernel_class: str
    per_iter_ns: float
    launches_per_iter: float
    avg_ns: float
    metrics: dict[str, float] = field(default_factory=dict)
    split: bool = False  # a row shared by passes, split by launch count


@dataclass
class JoinedKernel:
    """One kernel of one (backend, pass, shape), with what each tool says about it."""

    backend: str
    pass_: str
    shape_key: str | None
    name: str
    short_name: str
    kernel_class: str
    key: str
    tools: dict[str, ToolKernel] = field(default_factory=dict)
    match: str = "only"  # how the tools were matched: exact, loose, base (the weakest), only (one tool)
    matches: dict[str, str] = field(default_factory=dict)  # tool -> how its row met the first tool's

    def time_ns(self, prefer: Sequence[str] = TOOL_ORDER) -> float | None:
        """Per-iteration time from the first tool in `prefer` that saw it (timelines before ncu's replay)."""
        for t in prefer:
            if t in self.tools:
                return self.tools[t].per_iter_ns
        return None

    def launches(self, prefer: Sequence[str] = TOOL_ORDER) -> float | None:
        for t in prefer:
            if t in self.tools:
                return self.tools[t].launches_per_iter
        return None

    @property
    def metrics(self) -> dict[str, float]:
        return self.tools["ncu"].metrics if "ncu" in self.tools else {}


@dataclass
class Span:
    """The GPU time one iteration of a group spans (first kernel start to last kernel end), from NVTX."""

    tool: str
    per_iter_ns: float
    iterations: int


@dataclass
class CrossToolView:
    """Everything ``profctl report`` compares: merged kernels, bench rows, NVTX spans, the device."""

    kernels: list[JoinedKernel]
    bench: list[BenchRow]
    spans: dict[tuple[str, str, str | None], Span]
    device: str | None
    sources: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)

    def groups(self) -> list[tuple[str, str, str | None]]:
        gs = {(k.backend, k.pass_, k.shape_key) for k in self.kernels}
        gs |= {bench_group(r) for r in self.bench}
        gs |= set(self.spans)
        return sorted(gs, key=lambda g: (sort_key(g[2]), g[1], g[0]))

    def kernels_of(self, backend: str, pass_: str, shape: str | None) -> list[JoinedKernel]:
        return [k for k in self.kernels if (k.backend, k.pass_, k.shape_key) == (backend, pass_, shape)]

    def tools(self) -> list[str]:
        ts = {t for k in self.kernels for t in k.tools} | {s.tool for s in self.spans.values()}
        if self.bench:
            ts.add("bench")
        return [t for t in (*TOOL_ORDER, "bench") if t in ts]


# ------------------------------------------------------------------------------------------- placing
_OPS_BACKEND = (
    (re.compile(r"cudnn_?attention", re.I), "sdpa-cudnn"),
    (re.compile(r"efficient_?attention|memefficient", re.I), "sdpa-efficient"),
    (re.compile(r"attention_math", re.I), "sdpa-math"),
    (re.compile(r"flash_?attention|flash_attn", re.I), "sdpa-flash"),
)
_ATTN_OP = re.compile(r"attention|flash_attn|fmha", re.I)
#: ops of a matmul-softmax-matmul baseline (and their autograd nodes); anything else (aten::to, copies) is set-up
_EAGER_OP = re.compile(r"matmul|bmm|\bmm\b|addmm|softmax|masked_fill|mul|div|triu|tril|ones|where|exp|scale",
                       re.I)


def backend_from_ops(extra: dict[str, Any]) -> str | None:
    """The backend a torch kernel row belongs to, from the aten ops that launched it; None when the row mixes
    an attention op with others (the kernel was launched by several backends and cannot be split)."""
    ops: set[str] = set()
    for k in ("ops", "launch_ops", "fwd_ops"):
        v = extra.get(k)
        if isinstance(v, dict):
            ops |= set(v)
    if not ops:
        return None
    found = set()
    for op in ops:
        for rx, b in _OPS_BACKEND:
            if rx.search(op):
                found.add(b)
                break
    if len(found) == 1:
        return found.pop()
    if found:
        return None
    if any(_ATTN_OP.search(op) for op in ops):
        return None
    return "eager" if any(_EAGER_OP.search(op) for op in ops) else None


@dataclass
class _Placed:
    tool: str
    row: KernelRow
    backend: str
    pass_: str
    shape: str | None
    iteration: int | None
    weight: float = 1.0  # share of the row's time in this pass (a torch row split over passes)


def place(s: Summary, notes: list[str]) -> list[_Placed]:
    """Each kernel row of `s` in its (backend, pass, shape) group; rows no range or op places are left out."""
    rows = timed_rows(s)
    tool = s.sources[0].tool if s.sources else (rows[0].tool if rows else "?")
    ranged: list[tuple[KernelRow, RangeKey]] = []
    for k in rows:
        r = parse_range(k.nvtx_range)
        if r is not None and r.phase in (None, "measure"):
            ranged.append((k, r))
    if any(r.pass_ and r.shape_key for _, r in ranged):
        return [_Placed(tool, k, r.backend, r.pass_, r.shape_key, r.iteration) for k, r in ranged
                if r.pass_ and r.shape_key]
    if ranged:
        return _place_flat(tool, ranged, notes)
    if tool == "torch":
        return _place_by_ops(tool, rows, notes)
    if rows:
        notes.append(f"{_src(s)}: no profctl or <backend>.<pass> ranges on its kernels (read it with --by-range, "
                     "or record with NVTX); left out of the comparison")
    return []


def _place_flat(tool: str, ranged: list[tuple[KernelRow, RangeKey]], notes: list[str]) -> list[_Placed]:
    """nsys gives one row per enclosing range: leaf rows (`<backend>.fwd`, no shape) and case rows
    (`<backend>[shape]`, all passes). Use leaf rows with the case's shape when the backend ran one shape; the
    case rows with the leaf rows' pass when it ran one pass; else the case rows as pass fwd+bwd."""
    out: list[_Placed] = []
    by_backend: dict[str, list[tuple[KernelRow, RangeKey]]] = defaultdict(list)
    for k, r in ranged:
        by_backend[r.backend].append((k, r))
    for backend, items in by_backend.items():
        leaf = [(k, r) for k, r in items if r.pass_]
        case = [(k, r) for k, r in items if not r.pass_ and r.shape_key]
        shapes = sorted({r.shape_key for _, r in case if r.shape_key})
        passes = sorted({r.pass_ for _, r in leaf if r.pass_})
        if leaf and len(shapes) <= 1:
            shape = shapes[0] if shapes else None
            out += [_Placed(tool, k, backend, r.pass_ or "fwd", shape, r.iteration) for k, r in leaf]
        elif case and len(passes) == 1:
            out += [_Placed(tool, k, backend, passes[0], r.shape_key, None) for k, r in case]
        elif case:
            notes.append(f"{tool}: {backend} ran {len(shapes)} shapes and both passes; its kernels are shown per "
                         "shape as fwd+bwd (nsys rows are per range, not per range path)")
            out += [_Placed(tool, k, backend, "fwd+bwd", r.shape_key, None) for k, r in case]
    return out


def _place_by_ops(tool: str, rows: list[KernelRow], notes: list[str]) -> list[_Placed]:
    out = []
    left = 0
    for k in rows:
        b = backend_from_ops(k.extra)
        passes = k.extra.get("pass") if isinstance(k.extra.get("pass"), dict) else {}
        if b is None or not passes:
            left += 1
            continue
        n = sum(passes.values()) or 1
        for p, c in passes.items():
            if p in ("fwd", "bwd") and c:
                out.append(_Placed(tool, k, b, p, None, None, weight=c / n))
    if left:
        notes.append(f"{tool}: {left} kernel row(s) launched by several backends' ops could not be attributed")
    return out


def _src(s: Summary) -> str:
    return s.sources[0].path if s.sources else "summary"


# ------------------------------------------------------------------------------------------- per tool
def _per_tool(placed: list[_Placed]) -> dict[tuple[str, str, str | None], list[ToolKernel]]:
    """Per group, one ToolKernel per kernel name with per-iteration figures."""
    groups: dict[tuple[str, str, str | None], list[_Placed]] = defaultdict(list)
    for p in placed:
        groups[(p.backend, p.pass_, p.shape)].append(p)
    out: dict[tuple[str, str, str | None], list[ToolKernel]] = {}
    for g, ps in groups.items():
        tool = ps[0].tool
        by_name: dict[str, list[_Placed]] = defaultdict(list)
        for p in ps:
            by_name[p.row.name].append(p)
        iters_known = any(p.iteration is not None for p in ps)
        n_iter = _iterations(ps)
        tks = []
        for name, items in by_name.items():
            if iters_known:
                per: dict[int, float] = defaultdict(float)
                cnt: dict[int, float] = defaultdict(float)
                for p in items:
                    it = p.iteration if p.iteration is not None else -1
                    per[it] += p.row.total_ns * p.weight
                    cnt[it] += p.row.count * p.weight
                its = sorted(per)
                per_iter = statistics.median(per[i] for i in its)
                launches = statistics.median(cnt[i] for i in its)
            else:
                total = sum(p.row.total_ns * p.weight for p in items)
                count = sum(p.row.count * p.weight for p in items)
                per_iter, launches = total / n_iter, count / n_iter
            k0 = items[0].row
            count_all = sum(p.row.count * p.weight for p in items) or 1.0
            avg = sum(p.row.total_ns * p.weight for p in items) / count_all
            metrics: dict[str, float] = {}
            for p in items:
                for m, v in p.row.metrics.items():
                    metrics.setdefault(m, v)
            tks.append(ToolKernel(tool=tool, name=name, kernel_class=k0.kernel_class, per_iter_ns=per_iter,
                                  launches_per_iter=launches, avg_ns=avg, metrics=metrics,
                                  split=any(p.weight < 1 for p in items)))
        out[g] = tks
    return out


def _iterations(ps: list[_Placed]) -> float:
    """Iterations a group's rows cover: nsys' range instances, else the fewest launches of any kernel (every
    kernel of an iteration runs at least once in it)."""
    inst = [int(p.row.extra["nvtx_instances"]) for p in ps if isinstance(p.row.extra.get("nvtx_instances"), int)]
    if inst:
        return float(max(inst)) or 1.0
    counts = [p.row.count * p.weight for p in ps if p.row.count]
    return max(1.0, round(min(counts))) if counts else 1.0


# ------------------------------------------------------------------------------------------- matching
def _match(groups: dict[tuple[str, str, str | None], list[list[ToolKernel]]]) -> list[JoinedKernel]:
    out: list[JoinedKernel] = []
    for (backend, pass_, shape), per_tool in groups.items():
        merged: list[JoinedKernel] = []
        for tks in per_tool:
            for tk in sorted(tks, key=lambda t: -t.per_iter_ns):
                m, how = _find(merged, tk)
                if m is None:
                    merged.append(JoinedKernel(backend, pass_, shape, tk.name, display_name(tk.name), tk.kernel_class,
                                               match_key(tk.name), {tk.tool: tk}, "only", {tk.tool: "exact"}))
                    continue
                if tk.tool in m.tools:  # a second report of the same tool (e.g. two ncu recipes): add metrics
                    for k, v in tk.metrics.items():
                        m.tools[tk.tool].metrics.setdefault(k, v)
                else:
                    m.tools[tk.tool] = tk
                    m.matches[tk.tool] = how
                m.match = how if m.match in ("only", "exact") or how == "base" else m.match
        out += merged
    return out


def _find(merged: list[JoinedKernel], tk: ToolKernel) -> tuple[JoinedKernel | None, str]:
    """The merged kernel `tk` is, by exact key, loose key, then base name (nearest per-launch time)."""
    k, lk, bn = match_key(tk.name), loose_key(tk.name), base_key(tk.name)

    def free(m: JoinedKernel) -> bool:
        return tk.tool not in m.tools or tk.tool == "ncu"

    for how, test in (("exact", lambda m: m.key == k), ("loose", lambda m: loose_key(m.name) == lk)):
        cands = [m for m in merged if test(m) and (free(m) or m.tools.get(tk.tool, tk).name == tk.name)]
        if cands:
            return cands[0], how
    cands = [m for m in merged if base_key(m.name) == bn and tk.tool not in m.tools]
    if not cands:
        return None, "only"

    def dist(m: JoinedKernel) -> float:
        ref = next(iter(m.tools.values())).avg_ns
        return abs(ref - tk.avg_ns) / max(ref, tk.avg_ns, 1.0)

    return min(cands, key=dist), "base"


# ------------------------------------------------------------------------------------------- spans
def _spans(s: Summary, tool: str, shape_of: dict[str, str]) -> dict[tuple[str, str, str | None], Span]:
    """Per-iteration GPU span of each `<backend>.<pass>` range (nsys projects ranges onto the GPU)."""
    per: dict[tuple[str, str, str | None], list[float]] = defaultdict(list)
    iters: dict[tuple[str, str, str | None], int] = defaultdict(int)
    for r in s.ranges:
        key = parse_range(r.name)
        if key is None or key.pass_ is None or not r.gpu_proj_total_ns:
            continue
        n = int(r.extra.get("proj_instances") or r.count or 1)
        g = (key.backend, key.pass_, key.shape_key or shape_of.get(key.backend))
        if key.iteration is not None:
            per[g].append(r.gpu_proj_total_ns / max(n, 1))
            iters[g] += 1
        else:
            per[g].append(r.gpu_proj_total_ns / max(n, 1))
            iters[g] += n
    return {g: Span(tool, statistics.median(v), iters[g]) for g, v in per.items() if v}


# ------------------------------------------------------------------------------------------- entry
def bench_group(r: BenchRow) -> tuple[str, str, str | None]:
    """The group of a bench row: (backend, pass, shape key)."""
    return (str(r.backend), str(r.pass_), r.shape_key())


def join(summaries: Iterable[Summary], bench_rows: Iterable[Mapping[str, Any]] = (),
               device: str | None = None, shape: str | None = None) -> CrossToolView:
    """Join summaries and bench rows into one view. `shape` (a shape key) names the workload's shape when no
    input does (the shared fixtures); `device` the GPU model when no input does."""
    notes: list[str] = []
    ss = list(summaries)
    bench = [BenchRow.from_dict(r) for r in bench_rows]
    for r in bench:
        r.backend = canonical_backend(str(r.backend))
    # timeline tools first, so they anchor the match and ncu joins them
    ss.sort(key=lambda s: TOOL_ORDER.index(_tool(s)) if _tool(s) in TOOL_ORDER else len(TOOL_ORDER))
    placed_all = [(s, place(s, notes)) for s in ss]
    raw_spans: list[dict[tuple[str, str, str | None], Span]] = []
    for s, placed in placed_all:
        shape_of: dict[str, str] = {p.backend: p.shape for p in placed if p.shape}
        raw_spans.append(_spans(s, _tool(s), shape_of))
    placed_all, raw_spans = _one_source_per_case(placed_all, raw_spans, notes)
    bench = _one_bench_row_per_case(bench, notes)
    # one shape known in all: it is the shape of the groups that do not say
    shapes = {p.shape for _, ps in placed_all for p in ps if p.shape} | {r.shape_key() for r in bench}
    shapes |= {g[2] for sp in raw_spans for g in sp if g[2]}
    fill = shape or (next(iter(shapes)) if len(shapes) == 1 else None)
    unnamed = any(p.shape is None for _, ps in placed_all for p in ps)
    if unnamed and not fill and len(shapes) > 1:
        notes.append("some kernels name no shape and the inputs hold several; they are shown apart (give --shape)")
    per_group: dict[tuple[str, str, str | None], list[list[ToolKernel]]] = defaultdict(list)
    spans: dict[tuple[str, str, str | None], Span] = {}
    sources: list[dict[str, Any]] = []
    for (s, placed), sp in zip(placed_all, raw_spans, strict=False):
        for p in placed:
            if p.shape is None:
                p.shape = fill
        for src in s.sources:
            sources.append({"path": src.path, "tool": src.tool, "version": src.tool_version,
                            "kernels_placed": len(placed)})
        for g, tks in _per_tool(placed).items():
            per_group[g].append(tks)
        for (b, pa, sh), v in sp.items():
            spans.setdefault((b, pa, sh or fill), v)
        if device is None:
            device = _device_of(s)
    kernels = _match(per_group)
    for b in sorted({str(r.source) for r in bench if r.source}):
        sources.append({"path": b, "tool": "bench", "version": None,
                        "kernels_placed": sum(1 for r in bench if r.source == b)})
    return CrossToolView(kernels=kernels, bench=bench, spans=spans, device=device, sources=sources, notes=notes)


def _label(path: str) -> str:
    """A source as a note names it: ``<run-id>/<file>`` for a file in a run directory, else as given."""
    p = Path(path)
    return f"{p.parent.name}/{p.name}" if re.match(r"^\d{8}T\d{6}Z-", p.parent.name) else path


def _one_source_per_case(placed_all: list[tuple[Summary, list[_Placed]]],
                         raw_spans: list[dict[tuple[str, str, str | None], Span]], notes: list[str]
                         ) -> tuple[list[tuple[Summary, list[_Placed]]], list[dict[tuple[str, str, str | None], Span]]]:
    """Two reports of one tool holding the same case (backend, pass, shape): the later input is used for it
    and a note says which was kept. Two ncu reports of one case join when they measured different metrics (two
    recipes); when they measured the same ones, the later is used as well."""
    last: dict[tuple[str, tuple[str, str, str | None]], int] = {}
    dropped: set[tuple[int, tuple[str, str, str | None]]] = set()
    clashes: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for i, (s, placed) in enumerate(placed_all):
        tool = _tool(s)
        for g in sorted({(p.backend, p.pass_, p.shape) for p in placed} | set(raw_spans[i]),
                        key=lambda g: (g[0], g[1], g[2] or "")):
            j = last.get((tool, g))
            if j is not None and (tool != "ncu" or _same_metrics(placed_all[j][1], placed, g)):
                dropped.add((j, g))
                clashes[(tool, _src(placed_all[j][0]), _src(s))].append(_case_words(g))
            last[(tool, g)] = i
    notes += _clash_notes(clashes)
    if not dropped:
        return placed_all, raw_spans
    out = [(s, [p for p in placed if (i, (p.backend, p.pass_, p.shape)) not in dropped])
           for i, (s, placed) in enumerate(placed_all)]
    spans = [{g: v for g, v in sp.items() if (i, g) not in dropped} for i, sp in enumerate(raw_spans)]
    return out, spans


def _same_metrics(a: list[_Placed], b: list[_Placed], g: tuple[str, str, str | None]) -> bool:
    ma = {m for p in a if (p.backend, p.pass_, p.shape) == g for m in p.row.metrics}
    mb = {m for p in b if (p.backend, p.pass_, p.shape) == g for m in p.row.metrics}
    return ma <= mb or mb <= ma  # one measured nothing the other did not: the same recipe (or less)


def _one_bench_row_per_case(bench: list[BenchRow], notes: list[str]) -> list[BenchRow]:
    """Bench rows of one case (backend, pass, shape) from several inputs: the later input's row is used, and a
    note says which."""
    seen: dict[tuple[str, str, str | None], int] = {}
    out: list[BenchRow | None] = []
    clashes: dict[tuple[str, str, str], list[str]] = defaultdict(list)
    for r in bench:
        k = bench_group(r)
        j = seen.get(k)
        if j is not None:
            old = out[j] or BenchRow()
            clashes[("bench", str(old.source or "?"), str(r.source or "?"))].append(_case_words(k))
            out[j] = None
        seen[k] = len(out)
        out.append(r)
    notes += _clash_notes(clashes)
    return [r for r in out if r is not None]


def _case_words(g: tuple[str, str, str | None]) -> str:
    return f"{g[0]} {g[1]} {label_of_key(g[2])}".strip()


#: how every note of _clash_notes ends (is_dedup_note tells them from the other notes)
_CLASH_TAIL = "is used for them"


def _clash_notes(clashes: dict[tuple[str, str, str], list[str]]) -> list[str]:
    out = []
    for (tool, old, new), cases in clashes.items():
        what = ", ".join(cases[:3]) + (f" and {len(cases) - 3} more" if len(cases) > 3 else "")
        out.append(f"{tool}: {_label(old)} and {_label(new)} both hold {len(cases)} case(s) ({what}); "
                   f"the later input, {_label(new)}, {_CLASH_TAIL}")
    return out


def is_dedup_note(note: str) -> bool:
    """A de-duplication note (_clash_notes): two inputs held the same cases and the later one is used for them.
    A directory of many runs gives one per pair of runs; the HTML page folds them into one line."""
    return note.endswith(_CLASH_TAIL)


def _tool(s: Summary) -> str:
    return s.sources[0].tool if s.sources else (s.kernels[0].tool if s.kernels else "?")


def _device_of(s: Summary) -> str | None:
    gpus = s.meta.get("gpus")
    if isinstance(gpus, list) and gpus and isinstance(gpus[0], dict) and gpus[0].get("name"):
        return str(gpus[0]["name"])
    devs = s.meta.get("devices")
    if isinstance(devs, list):
        for d in devs:
            if isinstance(d, str) and d:
                return d
            if isinstance(d, dict) and d.get("name"):
                return str(d["name"])
    return None
