"""profctl's NVTX scheme on a real GPU capture: backward kernels run on autograd's worker thread, and the
workload pushes the backward range on that thread too, so they are attributable to <backend>.bwd.

The data is an nsys export of `python -m workloads.attention --backend sdpa-flash,eager --seqlen 1024 --heads 8
--pass fwd+bwd --iters 3 --warmup 1` on an H100 (tests/data/README.md). This test uses plain SQL, independent of
profctl's readers: for each kernel, the NVTX push/pop ranges open on the launching thread at launch time.
"""

import sqlite3
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from profctl import nvtx as ns


def stacks(db: Path) -> list[tuple[str, int, list[str]]]:
    c = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    strings = dict(c.execute("SELECT id, value FROM StringIds"))
    dom = {d for (d,) in c.execute("SELECT domainId FROM NVTX_EVENTS WHERE eventType = 75 AND text = ?",
                                   (ns.DOMAIN,))}
    ranges = [(s, e, strings.get(t, txt), g) for s, e, t, txt, g, d in c.execute(
        "SELECT start, end, textId, text, globalTid, domainId FROM NVTX_EVENTS WHERE eventType = 59") if d in dom]
    out = []
    for name, tid, launch in c.execute(
            "SELECT s.value, r.globalTid, r.start FROM CUPTI_ACTIVITY_KIND_KERNEL k "
            "JOIN CUPTI_ACTIVITY_KIND_RUNTIME r ON k.correlationId = r.correlationId "
            "JOIN StringIds s ON s.id = k.shortName"):
        st = [n for s, e, n, g in sorted(ranges) if g == tid and s <= launch <= e]
        out.append((name, tid, st))
    return out


def test_backward_kernels_sit_in_the_bwd_range_on_autograds_thread(data_file: Callable[[str], Path]) -> None:
    rows = stacks(data_file("profctl_bwd_nvtx.sqlite"))
    fwd_threads = {tid for name, tid, st in rows if st and st[-1] == "sdpa-flash.fwd"}
    bwd = [(name, tid, st) for name, tid, st in rows if name.startswith("flash_bwd")]
    assert bwd, "the capture has flash backward kernels"
    bwd_threads = {tid for _, tid, _ in bwd}
    assert bwd_threads.isdisjoint(fwd_threads), "backward kernels are launched from another thread"
    for _name, _tid, st in bwd:
        assert st[-1] == "sdpa-flash.bwd"
        assert st[0].startswith("sdpa-flash[") and st[1] in (ns.MEASURE, ns.WARMUP)
    measured = Counter(name for name, _, st in bwd if st[1] == ns.MEASURE)
    assert measured == {"flash_bwd_dot_do_o_kernel": 3, "flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel": 3,
                        "flash_bwd_convert_dq_kernel": 3}   # --iters 3


def test_measured_forward_kernels_are_selected_exactly(data_file: Callable[[str], Path]) -> None:
    rows = stacks(data_file("profctl_bwd_nvtx.sqlite"))
    sel = Counter(name for name, _, st in rows if len(st) == 3 and st[0].startswith("eager[")
                  and st[1] == ns.MEASURE and st[2] == "eager.fwd")
    assert sel == {"nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNN": 3, "nvjet_sm90_tst_64x128_64x8_2x1_v_bz_NNN": 3,
                   "softmax_warp_forward": 3, "vectorized_elementwise_kernel": 3} or sum(sel.values()) == 12
    # warm-up and setup kernels are outside the measured ranges
    assert any(st[1:2] == [ns.WARMUP] for _, _, st in rows if st)
    assert any(st[1:2] == [ns.SETUP] for _, _, st in rows if st)
