"""Proton timelines read back (profctl.readers.proton_trace / proton_tree, profctl.analysis.timeline): on traces
recorded on an H200 with plain Proton (tests/data/proton/README.md), profctl's counts, totals, overlaps and
critical path are checked against what the file holds, computed here straight from its JSON events; and the
planted answers (a loop whose second scope waits on the first; two warp groups with and without overlap)."""

from __future__ import annotations

import gzip
import json
import lzma
from collections import defaultdict
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl.analysis import timeline, timeline_diff
from profctl.cli import app
from profctl.errors import BadReport
from profctl.readers import proton_trace, proton_tree, sniff
from tests.conftest import DATA, copy_data

PROTON = DATA / "proton"
TRACES = ["chain", "groups_overlap", "groups_even", "groups_barrier", "overflow", "sampled", "clock32", "global",
          "two_launches", "builtin_noncausal_16cta", "builtin_causal_16cta", "profctl_noncausal_16cta"]


def events(name: str) -> list[dict]:
    with gzip.open(PROTON / f"{name}.chrome_trace.gz", "rt", encoding="utf-8") as f:
        return [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]


def intervals(evs: list[dict]) -> dict[tuple, list[tuple[int, int]]]:
    """(kernel call stack, pid, warp, scope) -> [(start, end)] in cycles, as the trace holds them."""
    out: dict[tuple, list[tuple[int, int]]] = defaultdict(list)
    for e in evs:
        warp = int(e["tid"].split()[1])
        s = round(e["ts"] * 1000)
        out[(tuple(e["args"]["call_stack"]), e["pid"], warp, e["name"])].append((s, s + round(e["dur"] * 1000)))
    return out


def union_length(iv: list[tuple[int, int]]) -> int:
    total, end = 0, None
    for s, e in sorted(iv):
        if end is None or s > end:
            total += e - s
            end = e
        elif e > end:
            total += e - end
            end = e
    return total


def brute_overlap(evs: list[dict], a: str, b: str) -> tuple[int, int]:
    """(cycles a warp is in A while another warp of its CTA is in B, A's busy cycles), by walking every cycle
    boundary of each CTA: the oracle for profctl's overlap figure."""
    iv = intervals(evs)
    per_cta: dict[tuple, dict] = defaultdict(lambda: defaultdict(dict))
    for (stack, pid, warp, scope), xs in iv.items():
        per_cta[(stack, pid)][warp][scope] = xs
    hit = busy = 0
    for warps in per_cta.values():
        for w, scopes in warps.items():
            for s, e in _merge(scopes.get(a, [])):
                busy += e - s
                others = _merge([x for w2, sc in warps.items() if w2 != w for x in sc.get(b, [])])
                hit += sum(max(0, min(e, oe) - max(s, os_)) for os_, oe in others)
    return hit, busy


def _merge(iv: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for s, e in sorted(iv):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def report_json(path: Path, *args: str) -> dict:
    r = CliRunner().invoke(app, ["report", str(path), "-f", "json", *args])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


@pytest.mark.parametrize("name", TRACES)
def test_counts_totals_and_overlaps_match_the_file(name: str) -> None:
    """Every scope's count and total cycles, and every overlap pair, as computed here from the JSON events."""
    evs = events(name)
    doc = report_json(PROTON / f"{name}.chrome_trace.gz")
    rows = {(r["kernel"], r["name"]): r for r in doc["scopes"]}
    want: dict[tuple, list[int]] = defaultdict(lambda: [0, 0])
    for e in evs:
        key = (e["cat"], e["name"])
        want[key][0] += 1
        want[key][1] += round(e["dur"] * 1000)
    if name == "two_launches":  # one kernel per call site: each launch is its own row
        assert sorted(r["count"] for r in doc["scopes"]) == [48, 48, 48, 48]
        assert len(doc["kernels"]) == 2
        return
    assert {k: (r["count"], r["total_cycles"]) for k, r in rows.items()} == {k: tuple(v) for k, v in want.items()}
    k = doc["kernels"][0]
    for o in k["overlaps"]:
        hit, busy = brute_overlap(evs, o["a"], o["b"])
        assert (o["cycles"], o["a_cycles"]) == (hit, busy), (o["a"], o["b"])


def test_the_loop_whose_second_scope_waits_on_the_first() -> None:
    iv = intervals(events("chain"))
    for xs in iv.values():
        assert len(xs) == 6
    for key, prods in iv.items():
        if key[3] != "produce":
            continue
        cons = sorted(iv[(*key[:3], "consume")])
        for (_, pe), (cs, _) in zip(sorted(prods), cons, strict=True):
            assert pe <= cs  # the consume of an iteration starts after its produce ended
    k = report_json(PROTON / "chain.chrome_trace.gz")["kernels"][0]
    path = k["path"]
    assert [s["scope"] for s in path["steps"]] == ["produce", "consume"] * 6
    assert path["by_scope"]["produce"] + path["by_scope"]["consume"] + path["unscoped_cycles"] == path["span_cycles"]
    assert path["unscoped_cycles"] < 0.05 * path["span_cycles"]


def _cross(k: dict, a: str, b: str) -> float:
    return next(o["fraction"] for o in k["overlaps"] if o["a"] == a and o["b"] == b)


def test_two_warp_groups_with_overlap() -> None:
    """Warps 4-7 run all of their B while warps 0-3 are still in A: B-under-A is the share of B's cycles that
    warps 4-7 spent, and none of A's warps 0-3 B's overlap A."""
    evs = events("groups_overlap")
    iv = intervals(evs)
    b_late = sum(e - s for (_, _, w, sc), xs in iv.items() if sc == "B" and w >= 4 for s, e in xs)
    b_all = sum(e - s for (_, _, _, sc), xs in iv.items() if sc == "B" for s, e in xs)
    k = report_json(PROTON / "groups_overlap.chrome_trace.gz")["kernels"][0]
    assert _cross(k, "B", "A") == pytest.approx(b_late / b_all, abs=1e-3)
    assert 0.3 < _cross(k, "B", "A") < 0.6


def test_two_warp_groups_without_overlap() -> None:
    k = report_json(PROTON / "groups_even.chrome_trace.gz")["kernels"][0]
    assert _cross(k, "B", "A") < 0.02 and _cross(k, "A", "B") < 0.02


def test_the_barrier_is_inside_b_as_proton_recorded_it() -> None:
    """Warps 4-7 opened B before the barrier's wait: every B ends within a few cycles of the others, after every
    A ended -- and profctl reports the overlap that follows from that, not the one the source suggests."""
    iv = intervals(events("groups_barrier"))
    for pid in {key[1] for key in iv}:
        b_ends = [e for (_, p, _, sc), xs in iv.items() if p == pid and sc == "B" for _, e in xs]
        a_ends = [e for (_, p, _, sc), xs in iv.items() if p == pid and sc == "A" for _, e in xs]
        assert max(b_ends) - min(b_ends) < 50 and min(b_ends) > max(a_ends)
    k = report_json(PROTON / "groups_barrier.chrome_trace.gz")["kernels"][0]
    assert _cross(k, "B", "A") > 0.3


def test_shares_and_path_of_profctls_forward() -> None:
    doc = report_json(PROTON / "builtin_noncausal_16cta.chrome_trace.gz")
    k = doc["kernels"][0]
    assert (k["kernel"], k["ctas"], k["warps"]) == ("_fwd_kernel", 16, 8)
    counts = {s["name"]: s["count"] for s in k["scopes"]}
    assert counts == {"load_q": 128, "store": 128, "load_k": 4096, "load_v": 4096, "qk": 4096, "softmax": 4096,
                      "pv": 4096}  # 16 CTAs x 8 warps, 32 key blocks each
    for w, share in k["warp_share"].items():
        assert 0.5 < sum(share.values()) <= 1.0, w
    path = k["path"]
    assert sum(path["by_scope"].values()) + path["unscoped_cycles"] == path["span_cycles"]
    assert path["span_cycles"] == k["max_cta_span"]


def test_sampled_warps_only() -> None:
    k = report_json(PROTON / "sampled.chrome_trace.gz")["kernels"][0]
    assert sorted(k["warp_share"]) == ["0", "2"] and k["warps"] == 2


def test_what_did_not_fit_is_said() -> None:
    with gzip.open(PROTON / "overflow.log.gz", "rt") as f:
        drops = proton_trace.drops_in_log(f.read())
    assert len(drops.warps) == 8 and {w[2:] for w in drops.warps} == {(224, 32)}
    assert "448" not in (drops.describe() or "") and "1792 records lost" in (drops.describe() or "")
    tr = proton_trace.read(PROTON / "overflow.chrome_trace.gz", drops=drops)
    assert tr.n_events == 8 * 16  # each warp's last 32 records: 16 instances
    rep = timeline.analyze(tr)
    assert any("buffer overflowed" in w for w in rep.warnings)


def test_the_tree_format() -> None:
    doc = report_json(PROTON / "chain.hatchet.gz")
    with gzip.open(PROTON / "chain.hatchet.gz", "rt") as f:
        tree = json.load(f)
    want = {c["frame"]["name"]: c["metrics"]["cycles"] for c in tree[0]["children"][0]["children"]}
    assert {r["name"]: r["total_cycles"] for r in doc["scopes"]} == want
    assert all(r["count"] is None for r in doc["scopes"])
    assert doc["clock_mhz"] == 1980.0 and doc["tree"] is True


def test_plain_gz_and_xz_read_the_same(tmp_path: Path) -> None:
    plain = copy_data(PROTON, "chain.chrome_trace", tmp_path)
    xz = tmp_path / "chain.chrome_trace.xz"
    xz.write_bytes(lzma.compress(plain.read_bytes()))
    docs = [report_json(p) for p in (plain, PROTON / "chain.chrome_trace.gz", xz)]
    assert docs[0]["scopes"] == docs[1]["scopes"] == docs[2]["scopes"]
    assert sniff(xz) == "proton-trace" and sniff(PROTON / "chain.hatchet.gz") == "proton-tree"


@pytest.mark.parametrize(("make", "words"), [
    ("noscopes", "empty Proton output"),
    ("truncated", "truncated Proton trace"),
    ("no_scope_events", "no scopes in this Proton trace"),
])
def test_bad_traces_are_one_line(tmp_path: Path, make: str, words: str) -> None:
    if make == "noscopes":
        p = PROTON / "noscopes.chrome_trace"
    elif make == "truncated":
        raw = gzip.decompress((PROTON / "chain.chrome_trace.gz").read_bytes())
        p = tmp_path / "cut.chrome_trace"
        p.write_bytes(raw[: len(raw) // 2])
    else:  # Proton's layout, but none of its events is a scope of a kernel
        p = tmp_path / "odd.chrome_trace"
        p.write_text(json.dumps({"displayTimeUnit": "ns", "traceEvents": [
            {"args": {"Frequency (MHz)": 1000.0}, "ph": "M", "pid": "k Core1 CTA0", "tid": "warp 0", "name": "x"}]}))
    with pytest.raises(BadReport, match=words):
        proton_trace.read(p) if make != "noscopes" else sniff(p)
    r = CliRunner().invoke(app, ["report", str(p)])
    assert r.exit_code == 5, r.output
    lines = [ln for ln in r.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and words in lines[0] and "Traceback" not in r.output


def test_html_draws_one_cta_and_perfetto_holds_every_instance(tmp_path: Path) -> None:
    src = PROTON / "groups_overlap.chrome_trace.gz"
    html_out, pf = tmp_path / "t.html", tmp_path / "t.json"
    for fmt, out in (("html", html_out), ("perfetto", pf)):
        r = CliRunner().invoke(app, ["report", str(src), "-f", fmt, "-o", str(out)])
        assert r.exit_code == 0, r.output
    page = html_out.read_text()
    assert page.count("<svg") == 1 and page.count("<rect") >= 16  # one CTA: 8 warps x (A, B) + the legend
    trace = json.loads(pf.read_text())
    xs = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(xs) == len(events("groups_overlap"))
    assert {e["name"] for e in trace["traceEvents"] if e["ph"] == "M"} >= {"process_name", "thread_name"}


def test_explain_says_which_overlap_was_lost() -> None:
    r = CliRunner().invoke(app, ["explain", str(PROTON / "groups_overlap.chrome_trace.gz"),
                                 str(PROTON / "groups_even.chrome_trace.gz"), "--kernel", "groups", "-f", "json"])
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    lost = {(o["a"], o["b"]) for o in d["lost"]}
    assert ("B", "A") in lost and ("A", "B") in lost


def test_explain_of_the_recorded_change() -> None:
    """The full non-causal timelines of the H200 session (default, and conditional rescaling): softmax grew and
    P.V lost its overlap with the other warpgroup's softmax (benchmarks/RESULTS.md, issue 30)."""
    def load(name: str) -> timeline.TimelineReport:
        with gzip.open(PROTON / "full" / f"{name}.timeline.json.gz", "rt") as f:
            return timeline.TimelineReport.from_dict(json.load(f))

    a, b = load("default_noncausal").kernel(None), load("lazy_noncausal").kernel(None)
    d = timeline_diff.compare(a, b)
    grew = max(d.scopes, key=lambda s: s.delta)
    assert grew.name == "softmax" and grew.ratio is not None and grew.ratio > 1.3
    assert ("pv", "softmax") in {(o.a, o.b) for o in d.lost}


def test_an_empty_tree_and_a_tree_of_another_backend_are_one_line(tmp_path: Path) -> None:
    p = tmp_path / "cupti.hatchet"
    p.write_text(json.dumps([{"frame": {"name": "ROOT"}, "metrics": {}, "children": [
        {"frame": {"name": "k"}, "metrics": {"time (ns)": 5, "count": 1}, "children": []}]}, {}]))
    with pytest.raises(BadReport, match="no scope with cycles"):
        proton_tree.read(p)
