"""Join the summaries of one workload from several tools (nsys, ncu, torch.profiler) and bench rows into one view.

Every kernel row is placed in a *group* -- (backend, pass, shape) -- and given a join key; rows of different
tools in the same group with the same key are the same kernel and become one :class:`MergedKernel`.

Where the group comes from:
  - NVTX / record_function ranges in profctl's scheme, ``<backend>[<shape_key>]/measure/<backend>.fwd|bwd``
    (ncu and torch give the whole path; nsys gives one row per enclosing range, see :func:`_place_flat`);
  - the shared fixtures' ranges ``<backend>.<fwd|bwd>.it<N>`` (one per iteration; per-iteration times are the
    median over iterations, so the first iteration's one-time costs do not count);
  - for torch traces without ranges, the aten ops that launched the kernel (``aten::_flash_attention_forward``
    is sdpa-flash, matmul/softmax without an attention op is the eager baseline).
Backend names are made canonical (``naive`` -> eager, ``sdpa_mem_eff`` -> sdpa-efficient, ...).

How kernels are matched (names differ between tools: nsys and ncu write ``(int)128``, ``(bool)0``,
``<unnamed>``, ``[lambda() (instance 1)]``; torch writes ``128``, ``false``, ``(anonymous namespace)``,
``{lambda()#1}``; ncu may print only the base name), in order:
  1. exact: :func:`join_key`, the demangled name with those spellings made equal;
  2. loose: the join key cut before its first ``(`` (drops lambda signatures that one demangler spells out);
  3. base: the base function name, pairing several same-named kernels by nearest per-launch duration.
"""

from __future__ import annotations

import gzip
import json
import re
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from profctl.kernels import base_name, match_key
from profctl.schema import KernelRow, Summary

TOOL_ORDER = ("nsys", "torch", "ncu")
PASSES = ("fwd", "bwd", "fwd+bwd")
PHASES = ("warmup", "measure", "setup")

_ALIASES = {
    "naive": "eager", "eager": "eager", "baseline": "eager",
    "flash": "sdpa-flash", "sdpa-flash": "sdpa-flash",
    "cudnn": "sdpa-cudnn", "sdpa-cudnn": "sdpa-cudnn",
    "mem-eff": "sdpa-efficient", "sdpa-mem-eff": "sdpa-efficient", "efficient": "sdpa-efficient",
    "sdpa-efficient": "sdpa-efficient", "mem-efficient": "sdpa-efficient",
    "math": "sdpa-math", "sdpa-math": "sdpa-math",
    "fa4": "fa4", "flash-attn": "flash-attn", "fa2": "flash-attn", "fa3": "flash-attn",
}


def canonical_backend(name: str) -> str:
    """profctl's name for a backend as other scripts spell it (naive, sdpa_flash, mem_eff, ...)."""
    s = name.strip().lower().replace("_", "-")
    return _ALIASES.get(s, s)


# ------------------------------------------------------------------------------------------------ ranges
@dataclass(frozen=True)
class RangeKey:
    """What a range path says: backend, pass, shape key, phase and iteration (each None when not said)."""

    backend: str
    pass_: str | None = None
    shape_key: str | None = None
    phase: str | None = None
    iteration: int | None = None


_PASS_RX = re.compile(r"^(?P<b>[^\[\]/]+?)\.(?P<p>fwd|bwd)(?:\.it(?P<it>\d+))?$")
_CASE_RX = re.compile(r"^(?P<b>[^\[\]/]+)\[(?P<s>[^\]]*)\]$")
_DOMAIN_RX = re.compile(r"^[\w.\-]+[@:](?=[^/\[\]]*(?:/|\[|$))")


def parse_range(text: str | None) -> RangeKey | None:
    """Parse an NVTX / record_function range name or path.

    Accepts ``profctl@sdpa-flash[b1,...]/measure/sdpa-flash.fwd`` (ncu), ``sdpa-flash[...]/measure/sdpa-flash.fwd``
    (torch), ``profctl:eager.fwd`` or ``profctl:eager[...]`` (nsys, one level), ``naive.fwd.it1`` (fixtures);
    ncu joins several domains' paths with `` | ``. None when it names no backend.
    """
    if not text:
        return None
    for part in text.split(" | "):
        key = _parse_one(part.strip())
        if key is not None:
            return key
    return None


def _parse_one(text: str) -> RangeKey | None:
    s = _DOMAIN_RX.sub("", text, count=1)
    comps = [c for c in s.split("/") if c]
    backend = pass_ = shape = phase = None
    it: int | None = None
    for c in comps:
        m = _CASE_RX.match(c)
        if m:
            backend, shape = canonical_backend(m["b"]), m["s"]
            continue
        if c in PHASES:
            phase = c
            continue
        m = _PASS_RX.match(c)
        if m:
            backend, pass_ = canonical_backend(m["b"]), m["p"]
            it = int(m["it"]) if m["it"] is not None else None
    if backend is None:
        return None
    return RangeKey(backend, pass_, shape, phase, it)


# ----------------------------------------------------------------------------------------------- names
_ANON = re.compile(r"\(anonymous namespace\)|<unnamed>")

#: the exact join key is profctl.kernels.match_key (the demanglers' spellings made equal)
join_key = match_key


def display_name(name: str, width: int = 60) -> str:
    """The base function name, for tables (``(anonymous namespace)`` does not confuse it)."""
    b = base_name(_ANON.sub("anon", name))
    return b if len(b) <= width else b[: width - 1] + "…"


def loose_key(name: str) -> str:
    """The join key up to its first ``(``: what is left when a lambda's signature is spelt differently."""
    k = join_key(name)
    i = k.find("(")
    return k[:i] if i > 0 else k


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
class MergedKernel:
    """One kernel of one (backend, pass, shape), with what each tool says about it."""

    backend: str
    pass_: str
    shape_key: str | None
    name: str
    short_name: str
    kernel_class: str
    key: str
    tools: dict[str, ToolKernel] = field(default_factory=dict)
    match: str = "only"  # how the tools were matched: exact, loose, base, only

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
class MergedView:
    """Everything ``profctl report`` compares: merged kernels, bench rows, NVTX spans, the device."""

    kernels: list[MergedKernel]
    bench: list[dict[str, Any]]
    spans: dict[tuple[str, str, str | None], Span]
    device: str | None
    sources: list[dict[str, Any]]
    notes: list[str] = field(default_factory=list)

    def groups(self) -> list[tuple[str, str, str | None]]:
        gs = {(k.backend, k.pass_, k.shape_key) for k in self.kernels}
        gs |= {(r["backend"], r["pass"], bench_shape_key(r)) for r in self.bench}
        gs |= set(self.spans)
        return sorted(gs, key=lambda g: (_shape_order(g[2]), g[1], g[0]))

    def kernels_of(self, backend: str, pass_: str, shape: str | None) -> list[MergedKernel]:
        return [k for k in self.kernels if (k.backend, k.pass_, k.shape_key) == (backend, pass_, shape)]

    def tools(self) -> list[str]:
        ts = {t for k in self.kernels for t in k.tools} | {s.tool for s in self.spans.values()}
        if self.bench:
            ts.add("bench")
        return [t for t in (*TOOL_ORDER, "bench") if t in ts]


# ----------------------------------------------------------------------------------------- bench rows
def _shape_order(key: str | None) -> tuple[Any, ...]:
    """Shapes in numeric order (batch, seqlen, ...), causal after non-causal; unparsable keys last."""
    if not key:
        return (2,)
    try:
        s = parse_shape_key(key)
    except ValueError:
        return (1, key)
    return (0, s["dtype"], s["head_dim"], s["heads"], s["kv_heads"], s["batch"], s["causal"], s["seqlen_q"],
            s["seqlen_kv"], s["layout"])


def bench_shape_key(r: dict[str, Any]) -> str:
    """The workload's shape key (workloads.spec.AttentionSpec.shape_key) of a bench row."""
    return ",".join([
        f"b{r['batch']}", f"sq{r['seqlen_q']}", f"skv{r['seqlen_kv']}", f"h{r['heads']}", f"kv{r['kv_heads']}",
        f"d{r['head_dim']}", str(r["dtype"]), "causal" if r.get("causal") else "full", str(r.get("layout", "bhsd")),
    ])


_SHAPE_FIELDS = {"b": "batch", "sq": "seqlen_q", "skv": "seqlen_kv", "h": "heads", "kv": "kv_heads",
                 "d": "head_dim"}


def parse_shape_key(key: str) -> dict[str, Any]:
    """``b1,sq4096,skv4096,h32,kv32,d128,bf16,causal,bhsd`` -> the bench row's shape fields (missing: defaults)."""
    out: dict[str, Any] = {"dtype": "bf16", "causal": False, "layout": "bhsd"}
    for part in key.split(","):
        part = part.strip()
        m = re.fullmatch(r"(skv|sq|kv|b|h|d)(\d+)", part)
        if m:
            out[_SHAPE_FIELDS[m[1]]] = int(m[2])
        elif part in ("bf16", "fp16", "fp32"):
            out["dtype"] = part
        elif part in ("causal", "full"):
            out["causal"] = part == "causal"
        elif part in ("bhsd", "bshd"):
            out["layout"] = part
        elif part:
            raise ValueError(f"shape key part {part!r} is not one of b<N>, sq<N>, skv<N>, h<N>, kv<N>, d<N>, a dtype, "
                             "causal/full or a layout")
    if "seqlen_q" in out and "seqlen_kv" not in out:
        out["seqlen_kv"] = out["seqlen_q"]
    if "heads" in out and "kv_heads" not in out:
        out["kv_heads"] = out["heads"]
    missing = [f for f in ("batch", "seqlen_q", "heads", "head_dim") if f not in out]
    if missing:
        raise ValueError(f"shape key {key!r} lacks {', '.join(missing)}")
    return out


def is_bench_json(path: Path) -> bool:
    """A `profctl bench --json` file: a JSON list of rows with a backend and a status."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    if head[:2] == b"\x1f\x8b":
        try:
            with gzip.open(path, "rb") as g:
                head = g.read(4096)
        except (OSError, EOFError):
            return False
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff").lstrip()
    return text.startswith("[") and '"backend"' in text and ('"status"' in text or '"median_ms"' in text)


def read_bench(path: Path) -> list[dict[str, Any]]:
    """Rows of a bench JSON file (gzipped or not); BadReport for anything else."""
    from profctl.errors import BadReport

    opener: Any = gzip.open if path.read_bytes()[:2] == b"\x1f\x8b" else open
    try:
        with opener(path, "rt", encoding="utf-8") as f:
            rows = json.load(f)
    except (OSError, ValueError, EOFError) as e:
        raise BadReport(f"{path}: not a readable bench JSON file: {e}") from None
    need = ("backend", "batch", "seqlen_q", "seqlen_kv", "heads", "kv_heads", "head_dim", "dtype", "pass")
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise BadReport(f"{path}: a bench JSON file is a list of rows (profctl bench --json)")
    for i, r in enumerate(rows):
        miss = [k for k in need if k not in r]
        if miss:
            raise BadReport(f"{path}: row {i} lacks {', '.join(miss)}: not a profctl bench --json file")
    return rows


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


def _kernel_rows(s: Summary) -> list[KernelRow]:
    return [k for k in s.kernels if k.extra.get("kind", "kernel") == "kernel" and k.kernel_class not in
            ("memcpy", "memset")]


def place(s: Summary, notes: list[str]) -> list[_Placed]:
    """Each kernel row of `s` in its (backend, pass, shape) group; rows no range or op places are left out."""
    rows = _kernel_rows(s)
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
def _match(groups: dict[tuple[str, str, str | None], list[list[ToolKernel]]]) -> list[MergedKernel]:
    out: list[MergedKernel] = []
    for (backend, pass_, shape), per_tool in groups.items():
        merged: list[MergedKernel] = []
        for tks in per_tool:
            for tk in sorted(tks, key=lambda t: -t.per_iter_ns):
                m, how = _find(merged, tk)
                if m is None:
                    merged.append(MergedKernel(backend, pass_, shape, tk.name, display_name(tk.name), tk.kernel_class,
                                               join_key(tk.name), {tk.tool: tk}, "only"))
                    continue
                if tk.tool in m.tools:  # a second report of the same tool (e.g. two ncu recipes): add metrics
                    for k, v in tk.metrics.items():
                        m.tools[tk.tool].metrics.setdefault(k, v)
                else:
                    m.tools[tk.tool] = tk
                m.match = how if m.match in ("only", "exact") or how == "base" else m.match
        out += merged
    return out


def _find(merged: list[MergedKernel], tk: ToolKernel) -> tuple[MergedKernel | None, str]:
    """The merged kernel `tk` is, by exact key, loose key, then base name (nearest per-launch time)."""
    k, lk, bn = join_key(tk.name), loose_key(tk.name), base_name(tk.name)

    def free(m: MergedKernel) -> bool:
        return tk.tool not in m.tools or tk.tool == "ncu"

    for how, test in (("exact", lambda m: m.key == k), ("loose", lambda m: loose_key(m.name) == lk)):
        cands = [m for m in merged if test(m) and (free(m) or m.tools.get(tk.tool, tk).name == tk.name)]
        if cands:
            return cands[0], how
    cands = [m for m in merged if base_name(m.name) == bn and tk.tool not in m.tools]
    if not cands:
        return None, "only"

    def dist(m: MergedKernel) -> float:
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
def merge_view(summaries: Iterable[Summary], bench_rows: Iterable[dict[str, Any]] = (),
               device: str | None = None, shape: str | None = None) -> MergedView:
    """Join summaries and bench rows into one view. `shape` (a shape key) names the workload's shape when no
    input does (the shared fixtures); `device` the GPU model when no input does."""
    notes: list[str] = []
    ss = list(summaries)
    bench = [dict(r) for r in bench_rows]
    for r in bench:
        r["backend"] = canonical_backend(str(r["backend"]))
    # timeline tools first, so they anchor the match and ncu joins them
    ss.sort(key=lambda s: TOOL_ORDER.index(_tool(s)) if _tool(s) in TOOL_ORDER else len(TOOL_ORDER))
    placed_all = [(s, place(s, notes)) for s in ss]
    raw_spans: list[dict[tuple[str, str, str | None], Span]] = []
    for s, placed in placed_all:
        shape_of: dict[str, str] = {p.backend: p.shape for p in placed if p.shape}
        raw_spans.append(_spans(s, _tool(s), shape_of))
    # one shape known in all: it is the shape of the groups that do not say
    shapes = {p.shape for _, ps in placed_all for p in ps if p.shape} | {bench_shape_key(r) for r in bench}
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
    for b in sorted({str(r.get("_source")) for r in bench if r.get("_source")}):
        sources.append({"path": b, "tool": "bench", "version": None,
                        "kernels_placed": sum(1 for r in bench if r.get("_source") == b)})
    return MergedView(kernels=kernels, bench=bench, spans=spans, device=device, sources=sources, notes=notes)


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


# ------------------------------------------------------------------------------------------- nsys paths
def read_nsys_paths(path: str | Path, *, first_case: str | None = None) -> Summary:
    """An nsys export summarised per range *path* ``<backend>[<shape>]/measure/<backend>.<pass>`` (profctl's
    scheme), measured iterations only, so several shapes and passes of one run stay apart.

    The nsys reader's per-range rows name one range each (nvtx_kern_sum), which loses the shape of the leaf
    ranges. Here each kernel launch is placed in the innermost ``<backend>.fwd|bwd`` range around its launch on
    the launching thread, and that range in its enclosing ``measure`` and case ranges (the workload pushes the
    same stack on autograd's thread). With capture by cudaProfilerStart the first case's range was pushed before
    the capture began: its leaves have no case range, and `first_case` (``<backend>[<shape>]``) names it.
    """
    import bisect

    from profctl.readers.nsys_sqlite import NsysExport
    from profctl.schema import RangeRow, Source, durations_stats
    from workloads import nvtx_scheme as ns

    with NsysExport(path) as ex:
        insts = [i for i in ex.range_instances() if i.domain == ns.DOMAIN]
        by_tid: dict[int, list[Any]] = defaultdict(list)
        for i in insts:
            by_tid[i.tid].append(i)
        leaf_path: dict[int, str] = {}
        leaves: dict[int, list[Any]] = {}
        for tid, rs in by_tid.items():
            rs.sort(key=lambda i: (i.start, -i.end))
            stack: list[Any] = []
            for i in rs:
                while stack and stack[-1].end < i.end:
                    stack.pop()
                stack.append(i)
                key = parse_range(i.text)
                if key is None or key.pass_ is None:
                    continue
                parents = [p.text for p in stack[:-1]]
                if ns.MEASURE not in parents:
                    continue
                case = next((p for p in reversed(parents) if _CASE_RX.match(p)), None)
                if case is None and first_case and parse_range(first_case) is not None and \
                        parse_range(first_case).backend == key.backend:  # type: ignore[union-attr]
                    case = first_case
                leaf_path[i.rid] = f"{case}/{ns.MEASURE}/{i.text}" if case else f"{ns.MEASURE}/{i.text}"
                leaves.setdefault(tid, []).append(i)
        starts: dict[int, list[int]] = {}
        for tid, ls in leaves.items():
            ls.sort(key=lambda i: i.start)
            starts[tid] = [x.start for x in ls]
        ex._build_launches()
        by_id = ex._name_is_string_id()
        durs: dict[tuple[str, Any], list[float]] = defaultdict(list)
        rids: dict[tuple[str, Any], set[int]] = defaultdict(set)
        for tid, rs_, re_, nid, d in ex.q("SELECT tid, rs, re, name, ge - gs FROM launches WHERE kind = 0"):
            ls = leaves.get(int(tid or 0)) or []
            if not ls:
                continue
            j = bisect.bisect_right(starts[int(tid or 0)], rs_) - 1
            if j < 0 or not (ls[j].start <= rs_ <= ls[j].end and re_ <= ls[j].end):
                continue
            k = (leaf_path[ls[j].rid], nid)
            durs[k].append(float(d))
            rids[k].add(ls[j].rid)
        names = {nid: (ex.string(nid) if by_id else str(nid)) for _, nid in durs}
        version = ex.schema.version
        gpus = ex.gpu_info()
    from profctl.kernels import classify, short_name

    kernels = []
    for (p, nid), ds in durs.items():
        st = durations_stats(ds)
        name = names[nid]
        kernels.append(KernelRow(tool="nsys", name=name, short_name=short_name(name), kernel_class=classify(name),
                                 nvtx_range=p, count=int(st["count"]), total_ns=st["total_ns"], avg_ns=st["avg_ns"],
                                 med_ns=st["med_ns"], min_ns=st["min_ns"], max_ns=st["max_ns"], std_ns=st["std_ns"],
                                 extra={"kind": "kernel", "nvtx_instances": len(rids[(p, nid)])}))
    spans: dict[str, list[float]] = defaultdict(list)
    for i in insts:
        if i.rid in leaf_path and i.proj_start is not None:
            spans[leaf_path[i.rid]].append(float((i.proj_end or 0) - i.proj_start))
    ranges = [RangeRow(name=p, domain=ns.DOMAIN, style="push_pop", count=len(v), range_total_ns=0.0,
                       gpu_proj_total_ns=sum(v), gpu_ops=None, extra={"proj_instances": len(v), "path": True})
              for p, v in spans.items()]
    return Summary(sources=(Source(path=str(path), tool="nsys", tool_version=version),), kernels=tuple(kernels),
                   ranges=tuple(ranges), meta={"reader": "profctl.merge.read_nsys_paths", **gpus})



def nsys_first_case(run_dir: Path) -> str | None:
    """``<backend>[<shape>]`` of the first case an nsys run directory's workload ran (its rows.jsonl)."""
    p = Path(run_dir) / "rows.jsonl"
    if not p.exists():
        return None
    for line in p.read_text(encoding="utf-8").splitlines():
        try:
            ev = json.loads(line)
        except ValueError:
            continue
        spec = ev.get("spec") if isinstance(ev, dict) else None
        if isinstance(spec, dict) and "backend" in spec:
            try:
                return f"{spec['backend']}[{bench_shape_key(spec)}]"
            except KeyError:
                return None
    return None
