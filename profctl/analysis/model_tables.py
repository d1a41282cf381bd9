"""The tables the design's model benchmarks print, from model bench rows (profctl bench --model):

- step time per model x backend, OOM rows kept, and the training step split into forward, backward and optimizer
  (seed 003: GPT sm/md/lg forward and forward+backward);
- memory against context, with whether it fits a 24 / 40 / 80 GB card (seed 004);
- tokens/s against context (prefill, decode with a KV cache) (seed 004);
- samples/s against batch x context for training (seed 004).

Each table is a list of rows (dicts of display-ready values keyed by column), one column per backend."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from profctl.schema.bench import BenchRow, bench_rows

CARDS_GIB = (24, 40, 80)


def is_model_row(r: BenchRow) -> bool:
    return r.is_model


def _backends(rows: list[BenchRow]) -> list[str]:
    out: list[str] = []
    for r in rows:
        if r.name not in out:
            out.append(r.name)
    return out


def _cell(r: BenchRow | None, value: Callable[[BenchRow], str]) -> str:
    if r is None:
        return "-"
    if r.status == "oom":
        return "OOM"
    if not r.ok:
        return str(r.status)
    return value(r)


def pivot(rows: Iterable[BenchRow], keys: tuple[str, ...], value: Callable[[BenchRow], str],
          extra: Callable[[list[BenchRow]], dict[str, str]] | None = None) -> list[dict[str, str]]:
    """One row per distinct `keys` (row fields), one column per backend holding `value` (OOM / unsupported said
    as such)."""
    rows = list(rows)
    backends = _backends(rows)
    groups: dict[tuple[Any, ...], dict[str, BenchRow]] = {}
    for r in rows:
        groups.setdefault(tuple(r.get(k) for k in keys), {})[r.name] = r
    out = []
    for key in sorted(groups, key=lambda k: tuple((x is None, str(x) if not isinstance(x, int) else x)
                                                   for x in k)):
        g = groups[key]
        row = {k: ("-" if v is None else str(v)) for k, v in zip(keys, key, strict=True)}
        row.update({b: _cell(g.get(b), value) for b in backends})
        if extra is not None:
            row.update(extra(list(g.values())))
        out.append(row)
    return out


def _gib(b: Any) -> str:
    return f"{b / 2**30:,.2f}" if isinstance(b, (int, float)) else "-"


def step_times(rows: list[BenchRow]) -> list[dict[str, str]]:
    """Median step time (ms) per model, mode, batch and context, a column per backend."""
    return pivot(rows, ("model", "layers", "mode", "batch", "seqlen", "dtype"), lambda r: f"{r.median_ms:.3f}")


def memory_by_context(rows: list[BenchRow]) -> list[dict[str, str]]:
    """Peak memory allocated (GiB) against context, a column per backend, and which cards every backend fits."""
    def fits(g: list[BenchRow]) -> dict[str, str]:
        """Backends whose peak (reserved, else allocated) fits the card; '?' where no memory was measured (CPU)."""
        out = {}
        measured = [r for r in g if r.ok and r.peak_mem_where != "host"
                    and (r.peak_mem_reserved_bytes or r.peak_mem_bytes)]
        refused = [r for r in g if r.status == "oom"]
        for card in CARDS_GIB:
            ok = [r.name for r in measured if (r.peak_mem_reserved_bytes or r.peak_mem_bytes or 0) <= card * 2**30]
            out[f"fits {card} GB"] = ", ".join(ok) if ok else ("?" if not measured and not refused else "none")
        return out

    return pivot(rows, ("model", "layers", "mode", "batch", "seqlen"),
                 lambda r: _gib(r.peak_mem_bytes) + (" (host)" if r.peak_mem_where == "host" else ""), fits)


def tokens_by_context(rows: list[BenchRow]) -> list[dict[str, str]]:
    """Tokens/s against context for prefill and decode (decode: new tokens/s over the batch)."""
    gen = [r for r in rows if r.mode in ("prefill", "decode")]
    return pivot(gen, ("model", "layers", "mode", "batch", "seqlen"), lambda r: f"{r.tokens_per_s:,.1f}")


def samples_by_batch_context(rows: list[BenchRow]) -> list[dict[str, str]]:
    """Training samples/s per batch x context, with the speedup of each backend over the first one."""
    train = [r for r in rows if r.mode == "train"]
    return pivot(train, ("model", "layers", "batch", "seqlen"), lambda r: f"{r.samples_per_s:,.2f}")


#: above this part_timing_cost the split's cell says what the timer added (its steps ran that much slower than the
#: measured ones: +1 % on a GPU-bound GPT-lg step with eager attention, +8 % to +57 % with SDPA on the H100)
TIMER_NOTE = 0.05


def train_split(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, str]]:
    """Seed 003's forward / backward (/ optimizer) time per training step, ms, from the part-timed steps (their
    means; the measured median is the step-time table's), with what the timer added where it slowed those steps.
    Rows without part timing are left out."""
    def v(r: BenchRow) -> str:
        if r.forward_ms is None:
            return "-"
        cell = f"{r.forward_ms:.2f} / {r.backward_ms or 0:.2f} / {r.optimizer_ms or 0:.2f}"
        cost = r.part_timing_cost
        if isinstance(cost, (int, float)) and cost > TIMER_NOTE:  # the split of a slowed step: say by how much
            cell += f" (timer {100 * cost:+.0f}%)"
        return cell

    train = [r for r in bench_rows(rows) if r.mode == "train"]
    if not any(r.forward_ms is not None for r in train):
        return []
    return pivot(train, ("model", "layers", "batch", "seqlen", "dtype"), v)


def mfu_table(rows: list[BenchRow]) -> list[dict[str, str]]:
    """MFU (model FLOPs / time / the device's dense peak) and attention's share of the step, per backend."""
    def v(r: BenchRow) -> str:
        mfu, share = r.mfu, r.attn_share
        return (f"{100 * mfu:.1f}%" if mfu is not None else "-") + \
            (f" (attn {100 * share:.0f}%)" if share is not None else "")

    return pivot(rows, ("model", "layers", "mode", "batch", "seqlen", "dtype"), v)


TABLES: tuple[tuple[str, Callable[[list[BenchRow]], list[dict[str, str]]]], ...] = (
    ("Step time (ms, median)", step_times),
    ("MFU and attention's share of the step", mfu_table),
    ("Training step: forward / backward / optimizer (ms, part-timed steps)", train_split),
    ("Peak memory (GiB) against context", memory_by_context),
    ("Tokens/s against context (prefill, decode)", tokens_by_context),
    ("Training samples/s per batch x context", samples_by_batch_context),
)


#: what a split cell's "(timer +N%)" means, added to the split table's title where a cell has one
TIMER_SAYS = ("(timer +N%): the part timer's CUDA events made those part-timed steps N% slower than the measured "
              "ones (the step-time table's), so read their ms as upper bounds")


def tables(rows: Iterable[Mapping[str, Any]]) -> list[tuple[str, list[dict[str, str]]]]:
    """Every table the rows (bench rows, or their JSON objects) allow (an empty one is left out)."""
    model_rows = [r for r in bench_rows(rows) if r.is_model]
    out = []
    for title, fn in TABLES:
        t = fn(model_rows)
        if not t:
            continue
        if fn is train_split and any("(timer " in v for row in t for v in row.values()):
            title = f"{title}; {TIMER_SAYS}"
        out.append((title, t))
    return out
