"""The seeds' published tables from bench rows: one named preset per layout (``profctl report ROWS --table NAME``).

| preset | the seed's table | rows x columns |
| --- | --- | --- |
| ``seed-004-forward`` | 004: forward time per GPU (Standard, FA2, FA3 FP16/FP8, Best Speedup) | seqlen x backend |
| ``seed-004-time-per-token`` | 004: empirical scaling, time per token | backend x seqlen |
| ``seed-004-memory-per-token`` | 004: memory per token | backend x seqlen |
| ``seed-002-batch`` | 002: scaling (Batch Size, Speedup vs Batch=1, Efficiency) | batch, per backend |
| ``seed-003-torch-triton`` | 003: flash attention benchmark (ft/bt/fbt, speedups) | seqlen x d x dtype |

Backends stand in for the seeds' columns by what they are, and every table says which is which in a note:
Standard is the ``--baseline`` (eager: matmul, softmax, matmul in PyTorch); Flash Attn 2 is ``sdpa-flash``
(PyTorch's vendored FlashAttention-2). profctl runs no FlashAttention-3: the seed's FA3 (FP16) column has no
equal here, and the nearest backends profctl has (cuDNN's fused attention, FlashAttention-4, profctl's Triton
kernel in bf16) get columns of their own under their own names; the seed's FA3 (FP8) column is the Triton
kernel's fp8 rows when there are any. A table is made of the rows given, nothing else: a case without a row
is ``-``, a row that ran out of memory ``OOM``, one a backend could not run ``N/A`` (as the seeds print them).

Each table is a list of panels: one per GPU and per case the seed holds fixed (batch, heads, head dim, dtype,
mask, ...), each with its columns and rows of :class:`Cell` (the number, unrounded, and its text).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from profctl.errors import NothingMatched, UsageError
from profctl.schema.bench import BenchRow, bench_rows

FP8 = "fp8"
MIB = 2**20


@dataclass(frozen=True)
class Cell:
    """One table cell: the number (None for none) and what a table shows."""

    value: float | None = None
    text: str = "-"


MISSING = Cell()


@dataclass
class Panel:
    """One table: its title, the case fields it holds fixed (CSV's leading columns), its columns and rows."""

    title: str
    context: dict[str, Any]
    columns: list[str]
    rows: list[dict[str, Cell]]
    notes: list[str] = field(default_factory=list)


@dataclass
class SeedTable:
    """A preset's whole output: its panels and the notes that say which backend is which column."""

    name: str
    title: str
    seed: str
    panels: list[Panel]
    notes: list[str]


@dataclass(frozen=True)
class Column:
    """A backend column of a seed's layout: the rows of `backend` (in fp8, or not) under `label`, standing in
    for the seed's column `stands_for`."""

    label: str
    backend: str
    fp8: bool = False
    stands_for: str = ""

    def takes(self, r: BenchRow) -> bool:
        return r.backend == self.backend and (r.dtype == FP8) == self.fp8


# ------------------------------------------------------------------------------------------------ cells
def sig(v: float, digits: int = 3) -> str:
    """`v` to `digits` significant figures, never in exponent form (0.0763, 14.3, 1,590)."""
    if v >= 10 ** digits:
        return f"{v:,.0f}"
    text = f"{v:.{digits}g}"
    if "e" in text:
        text = f"{v:.{digits + 3}f}".rstrip("0").rstrip(".")
    return text


def failed(r: BenchRow) -> Cell:
    """A row without a number, said as the seeds say it: OOM, N/A (the backend cannot run the case), else its
    status."""
    if r.status == "oom":
        return Cell(None, "OOM")
    if r.status == "unsupported":
        return Cell(None, "N/A")
    return Cell(None, str(r.status or "-"))


def number(r: BenchRow | None, value: Callable[[BenchRow], float | None], fmt: Callable[[float], str] = sig) -> Cell:
    """The cell of row `r`'s `value` (MISSING without a row; OOM / N/A / its status when it has no number)."""
    if r is None:
        return MISSING
    v = value(r) if r.ok else None
    if v is None:
        return failed(r) if not r.ok else MISSING
    return Cell(float(v), fmt(float(v)))


def ratio(num: Cell, den: Cell, fmt: str = ".1f") -> Cell:
    """num / den as the seeds print a speedup (``6.0x``); N/A when either side has no number but a row."""
    if num.value is not None and den.value:
        v = num.value / den.value
        return Cell(v, f"{v:{fmt}}x")
    if num is MISSING or den is MISSING:
        return MISSING
    return Cell(None, "N/A")


def label(text: str) -> Cell:
    return Cell(None, text)


def seqlen_label(sq: int | None, skv: int | None, *, k: bool = False) -> str:
    """``4096``, or ``4K`` with `k` (seed 004's headers); ``1024/4096`` when q and kv differ."""
    def one(n: int | None) -> str:
        if n is None:
            return "?"
        return f"{n // 1024}K" if k and n >= 1024 and n % 1024 == 0 else str(n)

    return one(sq) if sq == skv or skv is None else f"{one(sq)}/{one(skv)}"


# ------------------------------------------------------------------------------------------------ grouping
def attention_rows(rows: Iterable[Mapping[str, Any]]) -> list[BenchRow]:
    """The attention rows (model rows have no place in these layouts)."""
    return [r for r in bench_rows(rows) if not r.is_model and r.backend]


def gpu_of(r: BenchRow, device: str | None) -> str | None:
    """The GPU a row ran on (the row's, else its run's device), "CPU" for a CPU row; None when nothing names it:
    the `gpu` field stays empty in the data formats (no prose in a data column), the title says so."""
    name = r.gpu_name or device or ("CPU" if r.device == "cpu" else None)
    return str(name) if name else None


#: a panel title's words for a GPU that nothing names
UNNAMED_GPU = "GPU not named"


def _gpu_title(gpu: str | None) -> str:
    return gpu or UNNAMED_GPU


def _order(key: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple((x is None, x if isinstance(x, (int, float)) else str(x)) for x in key)


def group(rows: Iterable[BenchRow], key: Callable[[BenchRow], tuple[Any, ...]]) -> dict[tuple[Any, ...],
                                                                                       list[BenchRow]]:
    """Rows by `key`, in key order (numbers as numbers, None last)."""
    out: dict[tuple[Any, ...], list[BenchRow]] = {}
    for r in rows:
        out.setdefault(key(r), []).append(r)
    return {k: out[k] for k in sorted(out, key=_order)}


def half_panels(rows: list[BenchRow], key: Callable[[BenchRow], tuple[Any, ...]]) -> dict[tuple[Any, ...],
                                                                                           list[BenchRow]]:
    """Panels of `key` (which must not hold the dtype) split by the rows' dtype, fp8 rows joining every panel
    of the same case in another dtype (the seed's FP8 column beside its FP16 ones); alone when there is none."""
    by = group(rows, lambda r: (*key(r), None if r.dtype == FP8 else r.dtype))
    out: dict[tuple[Any, ...], list[BenchRow]] = {}
    for k, rs in by.items():
        if k[-1] is not None:
            out[k] = rs + by.get((*k[:-1], None), [])
    for k, rs in by.items():
        if k[-1] is None and not any(o[:-1] == k[:-1] for o in out):
            out[(*k[:-1], FP8)] = rs
    return {k: out[k] for k in sorted(out, key=_order)}


def pick(rows: Iterable[BenchRow], col: Column) -> BenchRow | None:
    """The row of `col` among `rows` (the last one given when several inputs hold the case)."""
    found = None
    for r in rows:
        if col.takes(r):
            found = r
    return found


def constructed_note(rows: list[BenchRow]) -> list[str]:
    n = sum(1 for r in rows if r.get("constructed"))
    return [f"{n} of these {len(rows)} rows are marked constructed (made for a test, not measured)."] if n else []


def _mask(causal: Any) -> str:
    """The mask in words: a mask beyond causal (:func:`_mask_of`) with its window and documents."""
    if isinstance(causal, str):  # already in words (a panel's context)
        return causal
    if isinstance(causal, tuple):
        c, window, docs = causal
        return _mask(c) + (f" w{window}" if window else "") + (f" docs{docs}" if docs else "")
    return "causal" if causal else "non-causal"


def _mask_of(r: BenchRow) -> tuple[bool, int, str]:
    """What a panel's case holds of the mask: causal or not, a window and documents (--window, --docs), so rows of
    different masks never share a cell (sorted as causal alone was: non-causal first)."""
    return bool(r.causal), int(r.window or 0), "+".join(map(str, r.docs or ()))


def _heads(h: Any, kv: Any) -> str:
    return f"{h}" if kv in (None, h) else f"{h} (kv {kv})"


def _shown(rows: list[BenchRow], cols: list[Column], always: int) -> list[Column]:
    """The first `always` columns, and the others that some row fills; one column per (backend, fp8)."""
    out: list[Column] = []
    for i, c in enumerate(cols):
        if any(o.backend == c.backend and o.fp8 == c.fp8 for o in out):
            continue
        if i < always or any(c.takes(r) for r in rows):
            out.append(c)
    return out


# ------------------------------------------------------------------------------------------------ seed 004
FA3_16 = "Flash Attn 3 (FP16)"
FA3_8 = "Flash Attn 3 (FP8)"
#: what each backend standing in for a seed column is, for the notes
WHAT = {
    "sdpa-flash": "PyTorch SDPA's flash backend, its vendored FlashAttention-2",
    "sdpa-cudnn": "cuDNN's fused attention through SDPA",
    "fa4": "FlashAttention-4, flash_attn.cute in CuTe DSL",
    "triton": "profctl's own FlashAttention-2-style Triton kernel",
    "flash-attn": "the flash-attn package's flash_attn_func: FlashAttention-3 when flash_attn_interface is "
                  "installed, else FlashAttention-2 (the rows do not say which)",
    "eager": "matmul, softmax, matmul in PyTorch, the score matrix in memory",
    "sdpa-math": "PyTorch SDPA's math backend",
}


def seed004_columns(baseline: str, dtype: str) -> list[Column]:
    """Seed 004's GPU table, column by column, as profctl's backends fill it (the first two always shown)."""
    return [Column(f"Standard ({baseline})", baseline, stands_for="Standard"),
            Column("Flash Attn 2 (sdpa-flash)", "sdpa-flash", stands_for="Flash Attn 2"),
            Column("flash-attn", "flash-attn", stands_for="Flash Attn 2 or 3"),
            Column("cuDNN (sdpa-cudnn)", "sdpa-cudnn", stands_for=FA3_16),
            Column("FA4 (fa4)", "fa4", stands_for=FA3_16),
            Column(f"Triton {dtype} (triton)", "triton", stands_for=FA3_16),
            Column("Triton FP8 (triton)", "triton", fp8=True, stands_for=FA3_8)]


def _case_key(device: str | None) -> Callable[[BenchRow], tuple[Any, ...]]:
    """Seed 004's panels: one per GPU and case, the sequence length along the table (dtype added by
    half_panels)."""
    return lambda r: (gpu_of(r, device), r.batch, r.heads, r.kv_heads, r.head_dim, _mask_of(r), r.layout or "bhsd",
                      r.pass_)


def _context(k: tuple[Any, ...]) -> dict[str, Any]:
    gpu, batch, heads, kv, d, causal, layout, pass_, dtype = k
    return {"gpu": gpu, "batch": batch, "heads": heads, "kv_heads": kv, "head_dim": d, "dtype": dtype,
            "causal": _causal(causal), "layout": layout, "pass": pass_,
            **({"mask": _mask(causal)} if isinstance(causal, tuple) and (causal[1] or causal[2]) else {})}


def _causal(mask: Any) -> bool:
    return bool(mask[0]) if isinstance(mask, tuple) else bool(mask)


def _case_text(c: Mapping[str, Any]) -> str:
    lay = "" if c["layout"] == "bhsd" else f", {c['layout']}"
    return (f"batch={c['batch']}, heads={_heads(c['heads'], c['kv_heads'])}, dim={c['head_dim']}, {c['dtype']}, "
            f"{_mask(c.get('mask', c['causal']))}{lay}")


def seed004_forward(rows: list[BenchRow], baseline: str, device: str | None) -> list[Panel]:
    """Forward pass time (ms) per sequence length, a column per backend, and the best speedup over Standard."""
    fwd = [r for r in rows if r.pass_ == "fwd"]
    panels = []
    for k, rs in half_panels(fwd, _case_key(device)).items():
        ctx = _context(k)
        cols = _shown(fwd, seed004_columns(baseline, ctx["dtype"]), 2)
        out = []
        for (sq, skv), pts in group(rs, lambda r: (r.seqlen_q, r.seqlen_kv)).items():
            row = {"Seq Length": label(seqlen_label(sq, skv))}
            cells = {c.label: number(pick(pts, c), lambda r: r.median_ms) for c in cols}
            row.update(cells)
            others = [(cells[c.label].value, c.label) for c in cols[1:] if cells[c.label].value is not None]
            best = min(others) if others else None
            row["Best Speedup"] = ratio(cells[cols[0].label], Cell(best[0], "")) if best else \
                (MISSING if cells[cols[0].label] is MISSING else Cell(None, "N/A"))
            row["Best"] = label(best[1] if best and row["Best Speedup"].value is not None else "-")
            out.append(row)
        panels.append(Panel(f"{_gpu_title(ctx['gpu'])}: forward pass time (ms), {_case_text(ctx)}", ctx,
                            ["Seq Length", *(c.label for c in cols), "Best Speedup", "Best"], out))
    return panels


def _per_token(rows: list[BenchRow], baseline: str, device: str | None, what: str,
               value: Callable[[BenchRow], float | None], speedups: bool) -> list[Panel]:
    """Seed 004's scaling tables: a row per backend, a column per sequence length, `value` per token."""
    panels = []
    for k, rs in half_panels(rows, _case_key(device)).items():
        ctx = _context(k)
        cols = [c for c in _shown(rows, seed004_columns(baseline, ctx["dtype"]), 0) if any(c.takes(r) for r in rs)]
        lengths = group(rs, lambda r: (r.seqlen_q, r.seqlen_kv))
        heads = [seqlen_label(sq, skv, k=True) for sq, skv in lengths]
        grid = {c.label: [number(pick(pts, c), value) for pts in lengths.values()] for c in cols}
        out = [{"Sequence": label(c.label), **dict(zip(heads, grid[c.label], strict=True))} for c in cols]
        if speedups and cols and cols[0].backend == baseline:
            for c in cols[1:]:
                out.append({"Sequence": label(f"Speedup: {c.label}"),
                            **{h: ratio(s, x) for h, s, x in zip(heads, grid[cols[0].label], grid[c.label],
                                                                  strict=True)}})
        if out:
            panels.append(Panel(f"{_gpu_title(ctx['gpu'])}: {what}, {_case_text(ctx)}, {ctx['pass']}", ctx,
                                ["Sequence", *heads], out))
    return panels


def seed004_time_per_token(rows: list[BenchRow], baseline: str, device: str | None) -> list[Panel]:
    """Time per token (µs): median time / (batch x seqlen_q), per backend against sequence length."""
    def us(r: BenchRow) -> float | None:
        return r.median_ms * 1e3 / (r.batch or 1) / (r.seqlen_q or 1) if r.median_ms else None

    return _per_token(rows, baseline, device, "time per token (µs)", us, True)


def seed004_memory_per_token(rows: list[BenchRow], baseline: str, device: str | None) -> list[Panel]:
    """Memory per token (MiB): peak allocated memory / (batch x seqlen_q), per backend against sequence length."""
    def mib(r: BenchRow) -> float | None:
        return r.peak_mem_bytes / MIB / (r.batch or 1) / (r.seqlen_q or 1) if r.peak_mem_bytes else None

    return _per_token(rows, baseline, device, "memory per token (MiB)", mib, False)


def seed004_notes(rows: list[BenchRow], baseline: str, *, fwd_only: bool) -> list[str]:
    """Which backend stands for which of the seed's columns, and what was left out."""
    rows = [r for r in rows if r.pass_ == "fwd"] if fwd_only else rows
    have = {(r.backend, r.dtype == FP8) for r in rows}
    notes = [f"Standard = {baseline}: {WHAT.get(baseline, 'the --baseline backend')}; Flash Attn 2 = sdpa-flash: "
             f"{WHAT['sdpa-flash']}."]
    near = [f"{c.label.split(' (')[0]} ({c.backend}: {WHAT[c.backend]})" for c in seed004_columns(baseline, "bf16")
            if c.stands_for == FA3_16 and (c.backend, False) in have]
    notes.append("No FlashAttention-3 here: in place of the seed's Flash Attn 3 (FP16) column, the nearest "
                 "backends profctl has, each under its own name: " + ("; ".join(near) if near else "none in "
                                                                       "these rows") + ".")
    if ("triton", True) in have:
        notes.append("In place of the seed's Flash Attn 3 (FP8) column: Triton FP8, the triton rows in dtype fp8 "
                     "(profctl's Triton kernel on e4m3 inputs), not FA3.")
    else:
        notes.append("No fp8 rows in these inputs: the seed's Flash Attn 3 (FP8) column is left out "
                     "(profctl bench -b triton --dtype fp8 --pass fwd makes them).")
    if ("flash-attn", False) in have:
        notes.append(f"flash-attn: {WHAT['flash-attn']}.")
    cols = seed004_columns(baseline, "bf16")  # what ran but has no column (an fp8 row a backend refused does not)
    left = sorted({r.backend for r in rows if r.ok and not any(c.takes(r) for c in cols)})
    if left:
        notes.append(f"Not among the seed's columns, left out: {', '.join(left)}.")
    return notes


# ------------------------------------------------------------------------------------------------ seed 002
def seed002_batch(rows: list[BenchRow], baseline: str, device: str | None) -> list[Panel]:
    """Throughput over batch per backend and case: the speedup over the smallest batch (at equal work per
    sample, B x its time / the time at B) and the efficiency (speedup / B), as seed 002's scaling tables."""
    def key(r: BenchRow) -> tuple[Any, ...]:
        return (gpu_of(r, device), r.name, r.dtype, r.seqlen_q, r.seqlen_kv, r.heads, r.kv_heads, r.head_dim,
                _mask_of(r), r.layout or "bhsd", r.pass_)

    panels = []
    for k, rs in group(rows, key).items():
        gpu, name, dtype, sq, skv, h, kv, d, causal, layout, pass_ = k
        batches = group(rs, lambda r: (r.batch,))
        if len(batches) < 2:
            continue
        ms = {b: number(pts[-1], lambda r: r.median_ms) for (b,), pts in batches.items()}
        b0 = min(b for (b,) in batches if b is not None)
        base = ms[b0]
        sp_col = f"Speedup vs Batch={b0}"
        out = []
        for b, cell in ms.items():
            sp = ratio(Cell(base.value * b / b0, "") if base.value is not None and b else base, cell, ".2f")
            eff = Cell(sp.value / (b / b0) * 100, f"{sp.value / (b / b0) * 100:.1f}%") \
                if sp.value is not None and b else Cell(None, sp.text)
            out.append({"Batch Size": label(str(b)), "Problem Size (BxSxHxD)": label(f"{b}x{sq}x{h}x{d}"),
                        "ms": cell, sp_col: sp, "Efficiency": eff})
        ctx = {"gpu": gpu, "backend": name, "seqlen_q": sq, "seqlen_kv": skv, "heads": h, "kv_heads": kv,
               "head_dim": d, "dtype": dtype, "causal": _causal(causal), "layout": layout, "pass": pass_}
        panels.append(Panel(f"{_gpu_title(gpu)}: {name}, seqlen {seqlen_label(sq, skv)}, heads={_heads(h, kv)}, "
                            f"dim={d}, {dtype}, {_mask(causal)}, {pass_}: throughput over batch", ctx,
                            ["Batch Size", "Problem Size (BxSxHxD)", "ms", sp_col, "Efficiency"], out))
    return panels


SEED002_NOTES = [
    "Speedup vs Batch=1 is throughput against the smallest batch measured (1 in the seed): B x the time at "
    "batch 1 / the time at batch B (the work grows with B); Efficiency = that speedup / B = the time at batch 1 / "
    "the time at B (100 %: B samples in the time of one), as in seed 002's strong and weak scaling tables. Problem "
    "Size is B x S x H x D; ms is the median time at B.",
]


# ------------------------------------------------------------------------------------------------ seed 003
SEED003_COLUMNS = ("seq_len", "d_model", "precision", "ft_torch", "bt_torch", "fbt_torch", "ft_triton",
                   "bt_triton", "fbt_triton", "speedup_fwd", "speedup_bwd", "speedup_tot")


def _ms3(v: float) -> str:
    return f"{v:.3f}"


def _passes(rs: list[BenchRow], backend: str) -> tuple[Cell, Cell, Cell]:
    """(forward, backward, forward+backward) ms of `backend`: from its fwd, bwd and fwd+bwd rows, the first two
    from a fwd+bwd row's own split when their rows are missing."""
    by: dict[Any, BenchRow] = {}
    for r in rs:
        if r.backend == backend:
            by[r.pass_] = r
    both = by.get("fwd+bwd")
    ft = number(by["fwd"], lambda r: r.median_ms, _ms3) if "fwd" in by else \
        number(both, lambda r: r.get("fwd_median_ms"), _ms3)
    bt = number(by["bwd"], lambda r: r.median_ms, _ms3) if "bwd" in by else \
        number(both, lambda r: r.get("bwd_median_ms"), _ms3)
    return ft, bt, number(both, lambda r: r.median_ms, _ms3)


def seed003_torch_triton(rows: list[BenchRow], baseline: str, device: str | None) -> list[Panel]:
    """Seed 003's flash attention benchmark: per sequence length, head dim and precision, the forward,
    backward and forward+backward times of the baseline ("torch") and of triton, and triton's speedups."""
    def key(r: BenchRow) -> tuple[Any, ...]:
        return gpu_of(r, device), r.batch, r.heads, r.kv_heads, _mask_of(r), r.layout or "bhsd"

    panels = []
    for k, rs in group(rows, key).items():
        gpu, batch, h, kv, causal, layout = k
        out = []
        for (sq, skv, d, dtype), pts in group(rs, lambda r: (r.seqlen_q, r.seqlen_kv, r.head_dim, r.dtype)).items():
            torch_, triton = _passes(pts, baseline), _passes(pts, "triton")
            if all(c is MISSING for c in (*torch_, *triton)):
                continue
            cells = [label(seqlen_label(sq, skv)), label(str(d)), label(str(dtype)), *torch_, *triton,
                     *(ratio(a, b) for a, b in zip(torch_, triton, strict=True))]
            out.append(dict(zip(SEED003_COLUMNS, cells, strict=True)))
        if out:
            ctx = {"gpu": gpu, "batch": batch, "heads": h, "kv_heads": kv, "causal": _causal(causal), "layout": layout}
            panels.append(Panel(f"{_gpu_title(gpu)}: batch={batch}, heads={_heads(h, kv)}, {_mask(causal)}: "
                                f"{baseline} (torch) against triton, ms", ctx, list(SEED003_COLUMNS), out))
    return panels


def seed003_notes(baseline: str) -> list[str]:
    return [f"torch = {baseline} ({WHAT.get(baseline, 'the --baseline backend')}); triton = profctl's Triton "
            "FlashAttention-2 (backend triton). d_model is the head dim; precision the dtype.",
            "ft, bt, fbt: median ms of --pass fwd, bwd and fwd+bwd rows (ft and bt from a fwd+bwd row's own split "
            "when the fwd or bwd row is missing); speedup = torch / triton; N/A where either side has no number "
            "(OOM, unsupported)."]


# ------------------------------------------------------------------------------------------------ presets
@dataclass(frozen=True)
class Preset:
    title: str
    seed: str
    build: Callable[[list[BenchRow], str, str | None], list[Panel]]
    notes: Callable[[list[BenchRow], str], list[str]]
    needs: str  #: what bench rows the table needs, for the error when none fits
    more: tuple[str, ...] = ()  #: notes on how the figures are made


def _fwd_notes(rows: list[BenchRow], baseline: str) -> list[str]:
    return seed004_notes(rows, baseline, fwd_only=True)


def _all_notes(rows: list[BenchRow], baseline: str) -> list[str]:
    return seed004_notes(rows, baseline, fwd_only=False)


PRESETS: dict[str, Preset] = {
    "seed-004-forward": Preset(
        "Forward pass time per GPU", "seed 004: Speed comparisons across GPUs", seed004_forward, _fwd_notes,
        "forward (--pass fwd) attention rows",
        ("Times are the median ms of the measured iterations (CUDA events). Best Speedup = Standard ms / the "
         "least ms of the other columns of the row; Best names that column.",)),
    "seed-004-time-per-token": Preset(
        "Time per token against sequence length", "seed 004: Empirical scaling, time per token",
        seed004_time_per_token, _all_notes, "attention rows with a time",
        ("Time per token = median time / (batch x seqlen_q), in µs; a Speedup row is Standard / that column.",)),
    "seed-004-memory-per-token": Preset(
        "Memory per token against sequence length", "seed 004: Memory per token", seed004_memory_per_token,
        _all_notes, "attention rows with peak memory",
        ("Memory per token = the peak memory torch allocated over the measured iterations (inputs, outputs and "
         "workspace) / (batch x seqlen_q), in MiB; rows measured without it (CPU) show -.",)),
    "seed-002-batch": Preset(
        "Scaling over batch", "seed 002: Scaling Analysis", seed002_batch, lambda rows, b: [],
        "rows of one case at two or more batch sizes", tuple(SEED002_NOTES)),
    "seed-003-torch-triton": Preset(
        "Torch against Triton: forward, backward, forward+backward", "seed 003: flash attention benchmark",
        seed003_torch_triton, lambda rows, b: seed003_notes(b),
        "rows of the baseline and of triton (--pass fwd,bwd,fwd+bwd)"),
}


def build(name: str, rows: Iterable[Mapping[str, Any]], *, baseline: str = "eager",
          device: str | None = None) -> SeedTable:
    """Preset `name` of `rows` (bench rows; model rows are left out). UsageError for an unknown name,
    NothingMatched when no row fits the layout."""
    preset = PRESETS.get(name)
    if preset is None:
        raise UsageError(f"--table {name!r}: choose from {', '.join(PRESETS)}")
    att = attention_rows(rows)
    if name == "seed-003-torch-triton" and not any(r.backend == "triton" for r in att):
        raise NothingMatched(f"--table {name}: no triton rows in these inputs (profctl bench -b triton,{baseline} "
                             "--pass fwd,bwd,fwd+bwd makes them)")
    panels = preset.build(att, baseline, device)
    if not panels:
        raise NothingMatched(f"--table {name}: no {preset.needs} in these inputs "
                             f"({len(att)} attention row(s))")
    notes = [*preset.notes(att, baseline), *preset.more, *constructed_note(att)]
    if any(p.context.get("gpu") is None for p in panels):
        notes.append(f"{UNNAMED_GPU}: these rows do not say which GPU ran them, nor does a run beside them (a bench "
                     "JSON file on its own): their gpu field is left empty; give the run directory, whose manifest "
                     "names the GPU.")
    return SeedTable(name, preset.title, preset.seed, panels, notes)


__all__ = ["PRESETS", "Cell", "Column", "Panel", "Preset", "SeedTable", "build"]
