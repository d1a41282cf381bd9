"""An explain defect found by issue 50's warp-specialized Gluon forward (tests/data/ladder50/README.md,
ladder_ws*.ncu-rep.xz): explain read its barrier stalls as __syncthreads ("barrier-sync: use shuffles") and its
producer's waits for free slots as late loads. They are neither: a quarter of its warp samples are warps parked at
the warp_specialize partition barrier (no work), and its mbarrier waits (SYNCS.PHASECHK.TRANS64.TRYWAIT and a retry
branch) are, by the barrier's name on the line, consumers waiting for data (`ready`), the producer waiting for a free
slot (`empty`) or the ping-pong's handoff (`turn`). profctl.analysis.mbarriers tells them apart."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest
from typer.testing import CliRunner

from profctl.analysis import mbarriers
from profctl.cli import app

pytest.importorskip("ncu_report")

DATA = Path(__file__).resolve().parents[1] / "data" / "ladder50"
WS = str(DATA / "ladder_ws.ncu-rep.xz")
WS2 = str(DATA / "ladder_ws_s2.ncu-rep.xz")
S8192C = "b1,s8192,h16,d128,bf16,causal"


@cache
def _explain(*args: str) -> dict:
    r = CliRunner().invoke(app, ["explain", *args, "-f", "json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.output)


@cache
def _profile(path: str, kernel: str):  # type: ignore[no-untyped-def]
    from profctl.readers.ncu_profiles import read_profiles

    return next(p for p in read_profiles(path, kernels=[kernel]) if not p.names_only)


def _ids(d: dict) -> list[str]:
    return [c["id"] for c in d["causes"]]


def test_the_ws_kernels_barrier_stalls_are_parked_warps_and_mbarrier_waits_not_syncthreads() -> None:
    """s8192c, A faster than cuDNN: before, A's own first cause was barrier-sync at gluon_attention.py:237 (its
    `mbarrier.wait(ready...)`), "26 % of the warp time waits at block-wide barriers (__syncthreads)"."""
    d = _explain(WS, "-k", "s8192c/m128n128w4s3-ws-gl$", "--vs", "s8192c/cudnn", "--shape", S8192C)
    assert "barrier-sync" not in _ids(d), _ids(d)
    premise = next(p for p in d["premises"] if p.startswith("A: its barrier stalls are not __syncthreads"))
    assert "26 % of its warp samples are warps parked" in premise
    assert "`empty`: the producer waiting for a free slot" in premise and "not a fault" in premise
    assert "`turn`: the ping-pong's handoff" in premise and "by design" in premise
    assert not any(p.startswith("B: its barrier") for p in d["premises"])  # cuDNN: no parked warps, no source
    barrier = next(f for f in d["factors"] if f["name"] == "stall: barrier")
    assert "at NOP (kernels/gluon_attention.py:267): warps parked" in barrier["says"]


@pytest.mark.parametrize("kernel, vs, shape", [
    ("b16s1024/m128n128w4s3-ws-gl$", "b16s1024/cudnn", "b16,s1024,h32,d128,bf16"),
    ("fp8s4096/m128n128w4s4-ws-gl$", "fp8s4096/m64n128w4s3$", "b1,s4096,h32,d128,fp8"),
])
def test_the_producers_waits_for_free_slots_are_not_late_loads(kernel: str, vs: str, shape: str) -> None:
    """Before, both pairs read loads-not-pipelined (the producer warp's `empty` waits, long scoreboard at the retry
    branch, counted as loads) then barrier-sync (the parked warps)."""
    d = _explain(WS, "-k", kernel, "--vs", vs, "--shape", shape)
    assert not {"barrier-sync", "loads-not-pipelined"} & set(_ids(d)), _ids(d)


def test_a_two_slot_ring_is_late_loads_at_the_ready_wait_with_the_rings_fix() -> None:
    """With 2 slots instead of 3 the consumers do wait for their tiles (`ready`): loads-not-pipelined at the wait,
    fixed by a deeper ring / a longer prefetch distance, and no barrier-sync beside it."""
    d = _explain(WS2, "-k", "s8192c/m128n128w4s2-ws-gl$", "--vs", "s8192c/cudnn", "--shape", S8192C)
    assert _ids(d) == ["loads-not-pipelined"], _ids(d)
    c = d["causes"][0]
    assert c["lines"][0]["line"] == 237 and c["lines"][0]["file"].endswith("gluon_attention.py")
    assert "deeper ring" in c["fix"] and "prefetch distance" in c["fix"]
    assert any("mbarriers `q_bar`, `ready`" in e for e in c["evidence"])


def test_the_triton_kernels_real_barriers_stay_barrier_sync() -> None:
    """The Triton forward's __syncthreads (BAR.SYNC 0x0 of all its 4 warps, no USETMAXREG) keep their diagnosis,
    against cuDNN and now against the warp-specialized kernel too (its parked warps no longer hide them)."""
    go = str(DATA / "ladder_global_order.ncu-rep.xz")
    d = _explain(go, "-k", "s8192c/m64n64w4s3$", "--vs", "s8192c/cudnn", "--shape", S8192C)
    assert _ids(d) == ["mma-not-overlapped", "barrier-sync"], _ids(d)
    assert "__syncthreads" in " ".join(d["causes"][1]["evidence"])
    d = _explain(WS, "-k", "s4096c/m64n64w4s3$", "--vs", "s4096c/m128n128w4s3-ws-gl$", "--shape",
                 "b1,s4096,h32,d128,bf16,causal")
    assert "barrier-sync" in _ids(d)


def test_the_waits_by_role_from_the_sass_and_the_lines() -> None:
    p = _profile(WS, "s8192c/m128n128w4s3-ws-gl$")
    w = mbarriers.waits(p)
    assert w.warp_specialized and 0.25 < w.parked < 0.27
    assert w.lines[mbarriers.DATA][0][1] == 237 and w.lines[mbarriers.FREE][0][1] == 193
    assert w.share(mbarriers.FREE) > w.share(mbarriers.DATA)  # the producer waits more than the consumers do
    assert w.names[mbarriers.TURN] == ["turn"]
    cudnn = _profile(WS, "s8192c/cudnn")
    assert mbarriers.warp_specialized(cudnn) and not mbarriers.parked(cudnn)  # named barriers only
    assert not mbarriers.waits(_profile(WS, "fp8s4096/m64n128w4s3$")).any  # Triton: no USETMAXREG, no mbarrier text


@pytest.mark.parametrize("text, role", [
    ("mbarrier.wait(ready.index(slot), (j // STAGES) & 1)", "data"),
    ("mbarrier.wait(q_bar, 0)", "data"),
    ("mbarrier.wait(empty.index(slot), ((j // STAGES) & 1) ^ 1, pred=j >= STAGES)", "free"),
    ("mbarrier.wait(turn.index(WG), (j - 1 + WG) & 1)", "turn"),
    ("mbarrier.arrive(turn.index(1 - WG))", "turn"),
    ("mbarrier.arrive(empty.index(prev))", "release"),
    ("pipeline_k.consumer_wait(smem_pipe_read);", "data"),
    ("acc = tl.dot(p, v, acc)", None),
])
def test_role_of_a_line(text: str, role: str | None) -> None:
    assert mbarriers.role_of(text) == role
