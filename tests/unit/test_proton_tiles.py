"""Per query tile (issue 41 item 3): the KV blocks each CTA of a Proton trace visited against its span, the
least-squares line through them and the tiles furthest above it (profctl.analysis.timeline._tiles), rendered
(profctl.render.timeline_view) and kept in the run's JSON. On traces written here as Proton writes them, whose
answer is planted (cycles per block, fixed cycles, a straggler), and on the causal forward recorded on the H200
(tests/data/proton/README.md). Also: `profctl proton -b triton --window W` records the windowed forward
(workloads/proton_run.case_call, run under Triton's interpreter on the CPU)."""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from typer.testing import CliRunner

from profctl.analysis import timeline
from profctl.cli import app
from profctl.readers import proton_trace
from profctl.render import timeline_view
from tests.conftest import DATA, ROOT

PROTON = DATA / "proton"
KERNEL = "_fwd_kernel"
#: cycles each step of one KV block takes on every warp (load_k, qk, softmax, pv): 1,000 per block
STEPS = (("load_k", 150), ("qk", 300), ("softmax", 400), ("pv", 150))
PER_BLOCK = sum(c for _, c in STEPS)
LOAD_Q, STORE = 2_000, 500  # cycles, once per warp
FIXED = LOAD_Q + STORE


def write_trace(path: Path, tiles: list[tuple[int, int]], *, warps: int = 4, late: dict[int, int] | None = None,
                loop: bool = True, seed: int = 0) -> Path:
    """A Proton chrome trace (Triton 3.6's writer: one "X" event per scope instance per warp, ts and dur in cycles
    / 1000 at its assumed 1 GHz, pid "KERNEL CoreSM CTAn", tid "warp w (line 0)") of `tiles` (CTA id, KV blocks):
    every warp runs load_q, then per block load_k, qk, softmax, pv back to back, then store, so a tile's span is
    FIXED + PER_BLOCK x blocks exactly; `late` adds cycles before the store of every warp of a CTA (a straggler).
    Each CTA starts at its own global time (as Proton offsets CTAs); `loop` False: one instance of every scope."""
    rng = random.Random(seed)
    evs: list[dict[str, Any]] = []
    late = late or {}

    def ev(cta: int, sm: int, w: int, name: str, t: int, dur: int) -> None:
        evs.append({"ph": "X", "cat": KERNEL, "name": name, "pid": f"{KERNEL} Core{sm} CTA{cta}",
                    "tid": f"warp {w} (line 0)", "ts": t / 1000, "dur": dur / 1000,
                    "args": {"Frequency (MHz)": 1000, "call_stack": ["ROOT", KERNEL]}})

    for cta, blocks in tiles:
        sm = cta % 7
        base = rng.randrange(0, 5_000_000)
        for w in range(warps):
            t = base
            ev(cta, sm, w, "load_q", t, LOAD_Q)
            t += LOAD_Q
            for _ in range(blocks if loop else 1):
                for name, c in STEPS:
                    ev(cta, sm, w, name, t, c)
                    t += c
            t += late.get(cta, 0)
            ev(cta, sm, w, "store", t, STORE)
    rng.shuffle(evs)  # Proton's file is in no particular order the reader may rely on
    path.write_text(json.dumps({"displayTimeUnit": "ns", "traceEvents": evs}))
    return path


def analyze(path: Path, clock: float | None = None) -> timeline.KernelTimeline:
    rep = timeline.analyze(proton_trace.read(path), clock_mhz=clock)
    assert len(rep.kernels) == 1
    return rep.kernels[0]


def test_the_fit_recovers_the_planted_cost_per_block(tmp_path: Path) -> None:
    tiles = [(i, 1 + i % 8) for i in range(24)]  # 1..8 blocks, three tiles each
    k = analyze(write_trace(tmp_path / "t.chrome_trace", tiles), clock=2000.0)
    v = k.tiles
    assert v is not None and v.scope == "load_k"  # four loop scopes as often each: the first in the file
    assert [(t.cta, t.blocks) for t in v.tiles] == tiles
    assert [t.span_cycles for t in v.tiles] == [FIXED + PER_BLOCK * b for _, b in tiles]
    assert v.fit is not None and v.no_fit is None
    assert v.fit.per_block_cycles == pytest.approx(PER_BLOCK)
    assert v.fit.fixed_cycles == pytest.approx(FIXED)
    assert v.fit.r2 == pytest.approx(1.0)
    assert v.stragglers == [] and v.uneven == 0  # nothing is above an exact fit
    assert v.us(v.fit.per_block_cycles) == pytest.approx(PER_BLOCK / 2000.0)


def test_a_straggler_is_named_first(tmp_path: Path) -> None:
    tiles = [(i, 1 + i % 8) for i in range(24)]
    k = analyze(write_trace(tmp_path / "t.chrome_trace", tiles, late={13: 6_000, 2: 1_500}))
    v = k.tiles
    assert v is not None and v.fit is not None
    assert v.stragglers[:2] == [13, 2]
    t13 = v.tile(13)
    assert t13 is not None and t13.span_cycles == FIXED + PER_BLOCK * 6 + 6_000
    assert t13.excess_cycles is not None and t13.excess_cycles > 5_000
    # two late tiles pull the line: by what least squares on the planted spans says (13 is above the mean
    # blocks, 2 below), here summed in plain Python
    xs = [b for _, b in tiles]
    ys = [FIXED + PER_BLOCK * b + {13: 6_000, 2: 1_500}.get(c, 0) for c, b in tiles]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sum((x - mx) ** 2 for x in xs)
    assert v.fit.per_block_cycles == pytest.approx(slope) and slope == pytest.approx(PER_BLOCK + 6_750 / 126)
    fixed = my - slope * mx
    assert v.fit.fixed_cycles == pytest.approx(fixed)
    ss_res = sum((y - fixed - slope * x) ** 2 for x, y in zip(xs, ys, strict=True))
    assert v.fit.r2 == pytest.approx(1 - ss_res / sum((y - my) ** 2 for y in ys)) and v.fit.r2 < 0.9


def test_every_tile_with_as_many_blocks_gives_no_fit(tmp_path: Path) -> None:
    k = analyze(write_trace(tmp_path / "t.chrome_trace", [(i, 5) for i in range(6)]))
    v = k.tiles
    assert v is not None and v.fit is None and v.stragglers == []
    assert v.no_fit is not None and "every tile visited 5 KV block(s)" in v.no_fit
    assert all(t.excess_cycles is None for t in v.tiles)
    few = analyze(write_trace(tmp_path / "two.chrome_trace", [(0, 1), (1, 4)])).tiles
    assert few is not None and few.fit is None and few.no_fit is not None and "at least 3" in few.no_fit
    lines = timeline_view.tile_lines(k)
    assert any(line.startswith("no fit: every tile visited 5") for line in lines)


def test_a_kernel_without_a_loop_has_no_tile_view(tmp_path: Path) -> None:
    k = analyze(write_trace(tmp_path / "t.chrome_trace", [(i, 3) for i in range(4)], loop=False))
    assert k.tiles is None
    assert "tile" not in timeline_view.to_markdown(timeline.TimelineReport(source="x", kernels=[k])).lower()
    groups = analyze(PROTON / "groups_even.chrome_trace.gz")  # a recorded kernel with A and B once per warp
    assert groups.tiles is None


def test_the_json_round_trip_keeps_the_view(tmp_path: Path) -> None:
    tiles = [(i, 1 + i % 8) for i in range(12)]
    rep = timeline.analyze(proton_trace.read(write_trace(tmp_path / "t.chrome_trace", tiles, late={5: 3_000})),
                           clock_mhz=1500.0)
    d = json.loads(json.dumps(rep.to_dict()))
    td = d["kernels"][0]["tiles"]
    assert td["scope"] == "load_k" and len(td["tiles"]) == 12 and td["stragglers"][0] == 5
    assert td["fit"]["per_block_us"] == pytest.approx(td["fit"]["per_block_cycles"] / 1500.0)
    assert td["tiles"][0]["span_us"] == pytest.approx(td["tiles"][0]["span_cycles"] / 1500.0)
    back = timeline.TimelineReport.from_dict(d)
    assert back.kernels[0].tiles == rep.kernels[0].tiles
    assert timeline_view.to_markdown(back) == timeline_view.to_markdown(rep)
    # the keys a reader of profctl.proton/1 had are all still there, with the same values
    old = {key: val for key, val in d["kernels"][0].items() if key != "tiles"}
    assert old == {key: val for key, val in json.loads(json.dumps(rep.to_dict()))["kernels"][0].items()
                   if key != "tiles"}
    assert d["schema"] == "profctl.proton/1"
    no_loop = timeline.analyze(proton_trace.read(PROTON / "groups_even.chrome_trace.gz")).to_dict()
    assert no_loop["kernels"][0]["tiles"] is None
    assert timeline.TimelineReport.from_dict(no_loop).kernels[0].tiles is None


def test_figures_kept_before_the_view_are_made_again(tmp_path: Path) -> None:
    """A run's ``<name>.timeline.json`` is read instead of the trace; one written before the per-tile view (no
    "tiles" key) is not: the trace is read again, so the view is there."""
    trace = write_trace(tmp_path / "case-0.chrome_trace", [(i, 1 + i % 4) for i in range(8)])
    d = timeline.analyze(proton_trace.read(trace)).to_dict()
    cache = tmp_path / "case-0.timeline.json"
    d["kernels"][0]["mean_cta_span"] = 1.5  # a mark: the cache was read
    cache.write_text(json.dumps(d))
    got = json.loads(CliRunner().invoke(app, ["report", str(trace), "-f", "json"]).stdout)["kernels"][0]
    assert got["mean_cta_span"] == 1.5 and got["tiles"]["fit"] is not None
    del d["kernels"][0]["tiles"]
    cache.write_text(json.dumps(d))
    got = json.loads(CliRunner().invoke(app, ["report", str(trace), "-f", "json"]).stdout)["kernels"][0]
    assert got["mean_cta_span"] != 1.5 and got["tiles"]["fit"]["per_block_cycles"] == pytest.approx(PER_BLOCK)


def _raw_blocks(name: str) -> dict[int, int]:
    """CTA id -> load_k instances per warp, straight from the file's JSON (every warp must agree)."""
    with gzip.open(PROTON / f"{name}.chrome_trace.gz", "rt", encoding="utf-8") as f:
        evs = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X" and e["name"] == "load_k"]
    per: dict[int, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    for e in evs:
        per[int(e["pid"].rsplit("CTA", 1)[1])][e["tid"]] += 1
    out = {}
    for cta, warps in per.items():
        assert len(set(warps.values())) == 1, (cta, warps)
        out[cta] = next(iter(warps.values()))
    return out


def test_the_recorded_causal_forward() -> None:
    """b1 h32 s4096 d128, causal, 64x64 tiles, CTAs 0-15 (tests/data/proton/README.md). The causal forward runs
    its longest rows first (REVERSE: CTA c is query tile 63 - c), and query tile m sees key blocks 0..m: CTA c
    visits 64 - c blocks. Checked: the blocks are those, and those of the file's own JSON; the spans are the CTA
    spans the timeline already reports; the cost per block is positive and explains the spans (R^2 > 0.99), the
    fixed part is positive and below the shortest tile; every straggler is above the line."""
    k = analyze(PROTON / "builtin_causal_16cta.chrome_trace.gz", clock=1980.0)
    v = k.tiles
    assert v is not None and v.scope == "load_k" and len(v.tiles) == k.ctas == 16
    assert {t.cta: t.blocks for t in v.tiles} == {c: 64 - c for c in range(16)} == _raw_blocks("builtin_causal_16cta")
    assert len({t.blocks for t in v.tiles}) == 16 and v.uneven == 0
    assert max(t.span_cycles for t in v.tiles) == k.max_cta_span
    assert sum(t.span_cycles for t in v.tiles) / 16 == pytest.approx(k.mean_cta_span)
    assert v.fit is not None and v.fit.r2 > 0.99
    assert 1_000 < v.fit.per_block_cycles < 4_000  # ~1 us per 64x64 block of d128 at 1980 MHz
    assert 0 < v.fit.fixed_cycles < min(t.span_cycles for t in v.tiles)
    assert v.stragglers and all((t := v.tile(c)) is not None and (t.excess_cycles or 0) > 0 for c in v.stragglers)
    noncausal = analyze(PROTON / "builtin_noncausal_16cta.chrome_trace.gz").tiles
    assert noncausal is not None and {t.blocks for t in noncausal.tiles} == {32}  # 4096 / 128
    assert noncausal.fit is None and noncausal.no_fit is not None and "32 KV block(s)" in noncausal.no_fit


def _console(rep: timeline.TimelineReport, limit: int | None = None) -> str:
    con = Console(width=160, record=True, file=open(os.devnull, "w"))  # noqa: SIM115 (closed with the console)
    timeline_view.to_console(rep, con, limit=limit)
    con.file.close()
    return con.export_text()


def test_rendered_where_the_other_sections_end() -> None:
    """The section comes last per kernel; without it (tiles None) every renderer writes what it wrote before."""
    rep = timeline.analyze(proton_trace.read(PROTON / "builtin_causal_16cta.chrome_trace.gz"), clock_mhz=1980.0)
    k = rep.kernels[0]
    text = _console(rep)
    assert "per query tile" in text and "16 tile(s) (CTAs) in the trace" in text
    assert "cycles per KV block +" in text and "fixed (R^2 0.99" in text
    md = timeline_view.to_markdown(rep)
    page = timeline_view.to_html(rep)
    assert "### Per query tile" in md and "<h3>Per query tile" in page
    rows = timeline_view.tile_rows(k)
    assert [r["which"] for r in rows][:2] == ["fewest blocks", "fewest blocks"]
    assert rows[0]["KV blocks"] == "49" and any(r["KV blocks"] == "64" for r in rows)
    assert any("straggler" in r["which"] for r in rows) and "span us" in rows[0]
    short = timeline_view.to_markdown(rep, limit=2)
    assert f"_{len(rows) - 2} more row(s) not shown" in short.split("### Per query tile")[1]
    start = md.index("### Per query tile")
    ends = [i + 1 for i in (md.find("\n## ", start), md.find("\n> ", start)) if i != -1]
    without_section = md[:start] + md[min(ends, default=len(md)):]
    tiles, k.tiles = k.tiles, None
    try:
        assert timeline_view.to_markdown(rep).rstrip() == without_section.rstrip()
        assert _console(rep) == text.split("per query tile")[0]
        cut = page.index("<h3>Per query tile")
        after = page.index("</table></div>", cut) + len("</table></div>")
        assert timeline_view.to_html(rep) == page[:cut].rstrip("\n") + page[after:]
    finally:
        k.tiles = tiles


def test_the_sampled_run_says_how_many_tiles_it_stands_on() -> None:
    rep = timeline.analyze(proton_trace.read(PROTON / "builtin_causal_16cta.chrome_trace.gz"))
    timeline.apply_sample(rep, {"kernels": {KERNEL: {"ctas_total": 2048}}, "how": "every CTA of 8 SMs"})
    lines = timeline_view.tile_lines(rep.kernels[0])
    assert lines[0].startswith("16 tile(s) (CTAs) in the trace of the launch's 2,048 (a sample")


# ------------------------------------------------------------------------------- the windowed forward recorded
_WINDOWED = """
import json, sys
import torch
from profctl.spec import AttentionSpec
from profctl.workloads import proton_run
from profctl.workloads.attention import inputs, reference

out = []
for d in json.loads(sys.argv[1]):
    call, spec = proton_run.case_call(json.dumps(d))
    with torch.no_grad():
        o = call().double()
    q, k, v, _ = inputs(spec, False, 0)
    out.append({"window": float((o - reference(spec, q, k, v)).abs().max()),
                "no_window": float((o - reference(spec.with_(window=None), q, k, v)).abs().max())})
print(json.dumps(out))
"""


def test_proton_records_the_windowed_forward(tmp_path: Path) -> None:
    """case_call (what profctl proton's child launches, plain and scoped) runs the Triton forward with the
    case's window: under Triton's interpreter on the CPU, its output is the windowed reference and not the
    unwindowed one -- top-left causal, and a bottom-right window without causal (seqlen_q < seqlen_kv)."""
    pytest.importorskip("triton")
    from profctl.spec import AttentionSpec

    specs = [AttentionSpec("triton", seqlen_q=40, seqlen_kv=40, heads=2, kv_heads=2, head_dim=16, causal=True,
                           window=9, dtype="fp32", device="cpu"),
             AttentionSpec("triton", seqlen_q=24, seqlen_kv=56, heads=1, kv_heads=1, head_dim=16, causal=False,
                           window=7, dtype="fp32", device="cpu", align="bottom-right")]
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", _WINDOWED, json.dumps([s.to_dict() for s in specs])], env=env,
                       cwd=tmp_path, text=True, capture_output=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    got = json.loads(r.stdout.strip().splitlines()[-1])
    for g in got:
        assert g["window"] < 1e-4 and g["no_window"] > 1e-2, got


def test_profctl_proton_takes_a_window_and_refuses_documents(tmp_path: Path) -> None:
    from profctl.errors import UsageError
    from profctl.pipelines.targets import Workload
    from profctl.spec import AttentionSweep
    from profctl.tools.proton import ProtonOptions

    def argv(**kw: Any) -> list[str]:
        sweep = AttentionSweep.from_strings(backend="triton", seqlen="4096", heads="32", head_dim="128",
                                            dtype="bf16", causal="true", device="cuda", **kw)
        return Workload(sweep).proton_argv(tmp_path / "o", tmp_path / "o.jsonl", ProtonOptions())

    got = argv(window="1024")
    case = json.loads(got[got.index("--case") + 1])
    assert case["window"] == 1024 and case["causal"] is True
    with pytest.raises(UsageError, match="cannot take --docs"):
        argv(docs="4")
