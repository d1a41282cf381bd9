"""Proton timelines at scale (issue 40): a trace of a few hundred MB read in one streaming pass under an
address-space limit, with the per-scope counts and totals its generator wrote; Proton's raw buffer read as
profctl's workload child reads it (headers, the CTAs kept, exact counts over all CTAs, the buffer cut down),
on a buffer laid out as Triton 3.6 lays it out; and a sampled timeline made whole by the child's tallies."""

from __future__ import annotations

import importlib.util
import struct
import sys
from pathlib import Path
from types import ModuleType

import pytest

from profctl.analysis import timeline
from profctl.readers import proton_trace, proton_tree
from tests.conftest import DATA, ROOT

torch = pytest.importorskip("torch")
from profctl.workloads import proton_ctas  # noqa: E402  (after torch: the module's functions need it)

PROTON = DATA / "proton"


def _scale() -> ModuleType:
    spec = importlib.util.spec_from_file_location("proton_scale", ROOT / "benchmarks" / "proton_scale.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["proton_scale"] = mod
    spec.loader.exec_module(mod)
    return mod


def test_a_trace_of_hundreds_of_mb_reads_in_bounded_memory(tmp_path: Path) -> None:
    bench = _scale()
    path = tmp_path / "big.chrome_trace"
    want = bench.generate(path, ctas=640)  # 800 k scope instances
    assert path.stat().st_size > 200e6
    got = bench.read_in_child(path, ROOT, limit_as=1536 << 20)
    assert "error" not in got, got
    assert got["ctas"] == 640 and got["events"] == sum(want["counts"].values())
    assert got["counts"] == want["counts"] and got["totals"] == want["totals"]


# ---------------------------------------------------------------------------------------- the raw buffer
UNITS = 4
SEG = 16  # records per warp segment
SCRATCH = 40 + 4 * UNITS + UNITS * SEG * 8


def _region(cta: int, sm: int, init: int, span: int, per_warp: list[list[tuple[int, bool, int]]],
            counts: list[int] | None = None) -> bytes:
    """One CTA's region as Triton 3.6 writes it: header, counts per warp, then each warp's records."""
    counts = counts if counts is not None else [len(r) for r in per_warp]
    head = struct.pack("<4I3Q", proton_ctas.PREAMBLE, cta, sm, UNITS * SEG * 8, init, init + span, init + span + 99)
    head += struct.pack(f"<{UNITS}I", *counts)
    body = b""
    for recs in per_warp:
        seg = b"".join(struct.pack("<II", (0 if start else 1 << 31) | (scope << 23) | (clk >> 32 & 0x7FF),
                                   clk & 0xFFFFFFFF) for scope, start, clk in recs[:SEG])
        body += seg + b"\0" * (SEG * 8 - len(seg))
    assert len(head) + len(body) == SCRATCH
    return head + body


def _warp(n: int, t0: int = 1 << 33) -> list[tuple[int, bool, int]]:
    """`n` instances of scope 1 (5 cycles each) then one of scope 2 (7 cycles), from cycle t0 (past 32 bits)."""
    out, t = [], t0
    for _ in range(n):
        out += [(1, True, t), (1, False, t + 5)]
        t += 10
    return [*out, (2, True, t), (2, False, t + 7)]


def _buffer(ctas: int, sms: int) -> tuple[object, list[int]]:
    regions, spans = [], []
    for c in range(ctas):
        span = 1000 + (500 if c == 7 else c)
        spans.append(span)
        regions.append(_region(c, c % sms, 10_000 + c, span, [_warp(3) for _ in range(UNITS)]))
    return torch.frombuffer(bytearray(b"".join(regions)), dtype=torch.uint8), spans


def test_headers_choice_tally_and_the_cut_buffer() -> None:
    buf, _ = _buffer(24, 6)
    h = proton_ctas.read_headers(buf, SCRATCH, UNITS)
    assert h.layout == "timed" and h.cta == list(range(24)) and h.sm == [c % 6 for c in range(24)]
    assert h.span_ns is not None and max(range(24), key=lambda i: h.span_ns[i]) == 7  # type: ignore[index]
    pick = proton_ctas.choose(h, 8)
    assert pick.total == 24 and pick.sm_count == 6 and pick.longest == 7
    assert len(pick.sms) == 2 and all(c % 6 in pick.sms or c == 7 for c in pick.ctas)
    assert {c for c in range(24) if c % 6 in pick.sms} <= set(pick.ctas)
    got = proton_ctas.tally(buf, h, list(range(UNITS)))
    assert got["counts"] == {1: 24 * UNITS * 3, 2: 24 * UNITS} and got["overflowed"] is False
    assert got["cycles"] == {1: 24 * UNITS * 3 * 5, 2: 24 * UNITS * 7}  # 64-bit clocks, upper bits kept
    cut = proton_ctas.compact(buf, h, pick.rows)
    assert cut.numel() == len(pick.rows) * SCRATCH
    again = proton_ctas.read_headers(cut, SCRATCH, UNITS)
    assert again.cta == pick.ctas  # the regions say which CTA they are, wherever they lie


def test_an_overflowed_warp_counts_what_is_kept_and_no_totals() -> None:
    full = _warp(10)  # 22 records into a segment of 16: the buffer kept 16 of them
    region = _region(0, 0, 1, 50, [full] + [_warp(1)] * (UNITS - 1), counts=[22] + [4] * (UNITS - 1))
    buf = torch.frombuffer(bytearray(region), dtype=torch.uint8)
    h = proton_ctas.read_headers(buf, SCRATCH, UNITS)
    got = proton_ctas.tally(buf, h, list(range(UNITS)))
    assert got["overflowed"] is True and got["cycles"] is None
    assert got["counts"] == {1: 8 + (UNITS - 1), 2: UNITS - 1}


def test_an_unknown_header_is_only_ids() -> None:
    region = _region(3, 5, 1, 50, [_warp(1)] * UNITS)
    buf = torch.frombuffer(bytearray(region + b"\0" * 24), dtype=torch.uint8)  # a size neither layout has
    h = proton_ctas.read_headers(buf, SCRATCH + 24, UNITS)
    assert h.cta == [3] and h.sm == [5] and h.layout == "unknown" and h.counts is None
    assert proton_ctas.tally(buf, h, list(range(UNITS)))["counts"] is None
    assert "longest CTA cannot be told" in proton_ctas.choose(h, 1).how


# ------------------------------------------------------------------------- a sampled timeline made whole
def test_a_sample_of_ctas_gets_the_launchs_counts_and_totals() -> None:
    trace = proton_trace.read(PROTON / "builtin_noncausal_16cta.chrome_trace.gz")
    plain = timeline.analyze(trace)
    rep = timeline.analyze(trace)
    k = rep.kernels[0]
    sample_counts = {s.name: s.count for s in k.scopes}
    counts = {n: c * 64 for n, c in sample_counts.items()}  # as if the launch had 1,024 CTAs like these 16
    tree = proton_tree.ProtonTree(path="t", scopes=[proton_tree.TreeScope(k.kernel, ("softmax",), 123_456_789, 1.0)])
    timeline.apply_sample(rep, {"kernels": {k.kernel: {"ctas_total": 1024, "counts": counts, "cycles": None}},
                                "how": "every CTA of 2 of 132 SMs"}, tree)
    got = {s.name: s for s in k.scopes}
    assert {n: s.count for n, s in got.items()} == counts
    assert got["softmax"].total_cycles == 123_456_789
    old = {s.name: s for s in plain.kernels[0].scopes}
    assert got["qk"].total_cycles == round(old["qk"].total_cycles * 64)  # neither tree nor records: scaled
    assert got["qk"].share == old["qk"].share and k.overlaps == plain.kernels[0].overlaps  # the sample's
    assert k.ctas == 16 and k.ctas_total == 1024 and "16 of 1024 CTAs" in (k.sample or "")
    assert any("scaled from 16 of 1024" in w for w in rep.warnings)
    back = timeline.TimelineReport.from_dict(rep.to_dict())
    assert back.kernels[0].ctas_total == 1024 and back.kernels[0].sample == k.sample


def test_a_trace_of_every_cta_is_left_as_it_is() -> None:
    trace = proton_trace.read(PROTON / "chain.chrome_trace.gz")
    rep = timeline.analyze(trace)
    before = rep.to_dict()
    timeline.apply_sample(rep, {"kernels": {rep.kernels[0].kernel: {"ctas_total": rep.kernels[0].ctas,
                                                                    "counts": {}, "cycles": {}}}})
    assert rep.to_dict() == before
