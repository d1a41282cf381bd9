"""Proton's raw profile buffer, read in the workload child right after a launch (``profctl proton --ctas N``):
which CTA ran on which SM and for how long (each CTA's header), every scope's exact count (and total cycles)
over all CTAs from the records themselves, and the buffer cut down to the CTAs kept, so that Proton's own
parser and Chrome-trace writer -- which hold every record of every CTA in memory, as JSON objects, several GB at
a 1,024-CTA grid -- only see a sample.

The layout is Triton 3.6's (third_party/proton/common/lib/TraceDataIO: CircularLayoutParser, EntryDecoder),
one region of ``profile_scratch_size`` bytes per CTA, each self-describing (the parser reads the CTA id from the
region, not from its place, so a buffer of some regions is read as those CTAs):

* header, 32-bit little-endian words: preamble ``0xdeadbeef``, CTA id, SM id, ``bufSize`` (bytes of records);
  then, in Proton versions that write each CTA's start and finalization times (3.6 does: its traces carry
  ``Finalization Time (ns)``), three 64-bit global-timer values (start, before and after the copy-out); then one
  count per unit (warp): the warp's write index in 32-bit WORDS, two per record. The records follow right after
  the counts; the region is then padded to ``profile_scratch_size`` (on an H200 with Triton 3.6, 4 warps:
  56 bytes of header and counts, 72 of padding; benchmarks/proton_buffer_probe.py prints it). Which header it
  is, when the room before the records (``profile_scratch_size - bufSize``) fits both, the words say: the counts
  are even (two words a record) and a timed header's three times are in order and seconds apart at most; the
  timer's and the clock's words are not all even. A room neither fits is an unknown layout, and then only the
  preamble, CTA and SM ids are used.
* the records: ``bufSize / units recorded`` bytes per recorded warp, 8 bytes a record: word 0 bit 31 set for an
  end, bits 23-30 the scope id, bits 0-10 the clock's upper bits; word 1 the clock's lower 32 bits. A warp with
  more records than its segment holds kept the last ones (the buffer is circular).

Everything here is torch on whatever device the buffer is on, in chunks of CTAs (a few MB of temporaries);
tests/unit/test_proton_scale.py checks it on a buffer built on the CPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

PREAMBLE = 0xDEADBEEF
#: CTAs per chunk when the records are tallied
CHUNK = 64


@dataclass
class Headers:
    """Per CTA region (row ``i`` of the buffer): its CTA id, SM, record counts per warp and time span."""

    scratch: int
    units: int
    rows: list[int]  # rows whose preamble is Proton's
    cta: list[int]
    sm: list[int]
    buf_size: int
    meta: int  # header bytes
    counts: Any = None  # torch int64 [rows, units] or None (unknown layout)
    span_ns: list[int] | None = None  # preFinal - init per row, when the header holds the times
    layout: str = "unknown"


def read_headers(buf: Any, scratch: int, units: int) -> Headers:
    """The header of every CTA region of `buf` (a torch uint8 tensor of n x `scratch` bytes, any device)."""
    import torch

    n = buf.numel() // scratch
    head_words = min(scratch, 40 + 4 * units + 8) // 4
    view = buf[: n * scratch].view(n, scratch)[:, : head_words * 4].contiguous()
    w = view.view(torch.int32).to("cpu").to(torch.int64) & 0xFFFFFFFF
    ok = (w[:, 0] == PREAMBLE).nonzero().flatten().tolist()
    if not ok:
        return Headers(scratch, units, [], [], [], 0, 0)
    buf_size = int(w[ok[0], 3])
    room = scratch - buf_size
    h = Headers(scratch, units, ok, w[ok, 1].tolist(), w[ok, 2].tolist(), buf_size, room)
    lo = w[ok]
    fits = [(name, head) for name, head in (("timed", 40), ("v0", 16)) if head + 4 * units <= room]
    plausible = [(name, head) for name, head in fits if _plausible(lo, name, head, units)]
    exact = [f for f in plausible if f[1] + 4 * units == room]
    if not (exact or plausible):
        return h
    name, head = (exact or plausible)[0]
    h.layout, h.meta = name, head + 4 * units
    h.counts = lo[:, head // 4 : head // 4 + units] // 2  # words -> records
    if name == "timed":
        init = lo[:, 4] | (lo[:, 5] << 32)
        pre = lo[:, 6] | (lo[:, 7] << 32)
        h.span_ns = (pre - init).tolist()
    return h


def _plausible(lo: Any, name: str, head: int, units: int) -> bool:
    """Whether the header words of every region read as layout `name`: write indexes even (two words a record),
    and for a timed header its start, pre- and post-finalization times in order and under a minute apart."""
    counts = lo[:, head // 4 : head // 4 + units]
    if bool((counts % 2 != 0).any()) or bool((counts > (1 << 30)).any()):
        return False
    if name == "timed":
        init = lo[:, 4] | (lo[:, 5] << 32)
        pre = lo[:, 6] | (lo[:, 7] << 32)
        post = lo[:, 8] | (lo[:, 9] << 32)
        if bool((init <= 0).any()) or bool((pre < init).any()) or bool((post < pre).any()) \
                or bool((pre - init >= 60 * 10**9).any()):
            return False
    return True


@dataclass
class Sample:
    """The CTAs kept, and why."""

    rows: list[int]
    ctas: list[int]
    sms: list[int]
    longest: int | None
    total: int
    sm_count: int
    how: str
    extra: dict[str, Any] = field(default_factory=dict)


def choose(h: Headers, want: int) -> Sample:
    """About `want` CTAs that stand for the grid: every CTA of a few SMs spread over the GPU (each SM's CTAs are
    its waves, first to last), SMs added until `want` are kept, and the longest CTA of the launch (from the
    headers' times, when they are there)."""
    by_sm: dict[int, list[int]] = {}
    for i, sm in enumerate(h.sm):
        by_sm.setdefault(sm, []).append(i)
    sms_all = sorted(by_sm)
    keep: set[int] = set()
    sms: list[int] = []
    if sms_all and want > 0:
        per_sm = max(1, len(h.rows) // len(sms_all))
        n_sm = max(1, min(len(sms_all), -(-want // per_sm)))
        step = len(sms_all) / n_sm
        for k in range(n_sm):
            sm = sms_all[int(k * step)]
            sms.append(sm)
            keep.update(by_sm[sm])
    longest = None
    if h.span_ns is not None and h.span_ns:
        j = max(range(len(h.span_ns)), key=lambda i: h.span_ns[i])  # type: ignore[index]
        longest = h.cta[j]
        keep.add(j)
    idx = sorted(keep)
    how = f"every CTA of {len(sms)} of {len(sms_all)} SMs (SM {', '.join(map(str, sms))})"
    how += f" and the longest CTA ({longest})" if longest is not None else \
        " (the longest CTA cannot be told: Proton's headers hold no times)"
    return Sample(rows=[h.rows[i] for i in idx], ctas=[h.cta[i] for i in idx], sms=sms, longest=longest,
                  total=len(h.rows), sm_count=len(sms_all), how=how)


def tally(buf: Any, h: Headers, uids: list[int], *, clock64: bool = True) -> dict[str, Any]:
    """Every scope's count (start records) over all CTAs of the launch, by scope id; and its total cycles
    (sum of ends minus sum of starts) when no warp overflowed its segment and the clock is 64-bit (else None:
    a circular buffer's window can start inside a scope). Needs a known layout."""
    import torch

    if h.counts is None or not h.rows or not uids:
        return {"counts": None, "cycles": None, "overflowed": None, "records": None}
    seg_entries = h.buf_size // len(uids) // 8
    counts = torch.zeros(256, dtype=torch.int64)
    starts = torch.zeros(256, dtype=torch.int64)
    ends = torch.zeros(256, dtype=torch.int64)
    recorded = h.counts[:, uids]  # [rows, segments] records written (cpu)
    overflowed = bool((recorded > seg_entries).any())
    n = buf.numel() // h.scratch
    regions = buf[: n * h.scratch].view(n, h.scratch)
    dev = buf.device
    ar = torch.arange(seg_entries, device=dev)
    for c0 in range(0, len(h.rows), CHUNK):
        rows = torch.tensor(h.rows[c0 : c0 + CHUNK], device=dev)
        data = regions.index_select(0, rows)[:, h.meta : h.meta + len(uids) * seg_entries * 8].contiguous()
        e = data.view(torch.int32).view(len(rows), len(uids), seg_entries, 2).to(torch.int64) & 0xFFFFFFFF
        valid = ar[None, None, :] < recorded[c0 : c0 + CHUNK].to(dev).clamp(max=seg_entries)[:, :, None]
        tag = e[..., 0]
        is_end = (tag >> 31) & 1
        scope = (tag >> 23) & 0xFF
        cyc = ((tag & 0x7FF) << 32) | e[..., 1]
        s = valid & (is_end == 0)
        t = valid & (is_end == 1)
        counts += torch.bincount(scope[s], minlength=256).cpu()
        starts += _sum_by(scope[s], cyc[s])
        ends += _sum_by(scope[t], cyc[t])
    used = counts.nonzero().flatten().tolist()
    exact = not overflowed and clock64
    return {"counts": {int(i): int(counts[i]) for i in used},
            "cycles": {int(i): int(ends[i] - starts[i]) for i in used} if exact else None,
            "overflowed": overflowed, "records": int(recorded.sum())}


def _sum_by(keys: Any, values: Any) -> Any:
    """Per key 0..255, the sum of `values` (int64 exact), on the CPU."""
    import torch

    out = torch.zeros(256, dtype=torch.int64, device=keys.device)
    out.index_add_(0, keys, values)
    return out.cpu()


def compact(buf: Any, h: Headers, rows: list[int]) -> Any:
    """The regions of `rows` only, one after another (a buffer Proton reads as those CTAs)."""
    import torch

    n = buf.numel() // h.scratch
    idx = torch.tensor(rows, device=buf.device)
    return buf[: n * h.scratch].view(n, h.scratch).index_select(0, idx).reshape(-1).contiguous()
