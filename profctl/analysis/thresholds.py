"""Explain's thresholds and ceilings: one table, each with its value and why (issue 47, item 7).

A cause detector or the model of a kernel's time reads a number from here, never inline, so that what profctl
judges by can be read in one place (``profctl recipes explain`` prints it) and changed with its reason. The
ncu-verdict thresholds of ``profctl ncu`` (profctl.recipes.THRESHOLDS) are a recipe's, overridable per recipe;
these are explain's own.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Threshold:
    """A number explain judges by: its value and the reason it has that value."""

    name: str
    value: float
    reason: str


_T = Threshold
THRESHOLDS: dict[str, Threshold] = {t.name: t for t in (
    _T("noise", 0.03, "a cause saving under this share of the kernel's time (alone, or its part in the named fixes "
       "together) is noise: ncu's replay spread of one launch is 1-2 %"),
    _T("masked", 0.5, "a fault whose saving alone is under this share of its part in the named fixes together is "
       "masked: another fault then binds, and the note says what the two give together"),
    _T("pipelining_regs", 160, "registers a thread at and above which a second score tile (the next tile's Q K^T "
       "before this tile's softmax) does not fit without spilling or fewer pipeline stages: profctl's Triton forward "
       "at 190 got 28 % slower with it (benchmarks/RESULTS.md)"),
    _T("mma_serialized_links", 0.5, "share of a kernel's wgmma chain links split by a full wait at and above which "
       "ptxas serialized its wgmma: a compiler that did so splits every link (profctl's FP8 forward with the next "
       "Q K^T ahead: 1.0), an asynchronous kernel none (cuDNN, FA3-style and Triton kernels on record: 0.0)"),
    _T("same_time", 0.03, "two kernels within this share of each other's time take the same time: no gap to split "
       "(ncu's replay spread of one launch is about 1-2 %)"),
    _T("shared_degree", 0.8, "a cause B has to at least this fraction of A's degree (excess sectors, stall share, "
       "warps) is shared by both: it does not explain the gap"),
    _T("wasted_work", 1.2, "tensor work counted above this multiple of the useful work (the shape's FLOPs, or B's "
       "for the same result) is work the result does not need: a causal kernel's diagonal blocks cost 1.03-1.1x "
       "(tests/data/flex: 128-wide blocks at s4096 count 1.03x)"),
    _T("staged_l1_left", 0.5, "tiles staged through registers (LDG, STS) pass the L1 twice where an async copy "
       "(cp.async, TMA) passes it once: pipelining them leaves about half the L1 work (tests/data/ladders gemm_order: "
       "the L1's work went from 2107 to 1097 us at its peak with num_stages 1 -> 3)"),
    _T("late_loads_memory", 0.7, "loads are late, not bandwidth-bound, while L2 and DRAM stay under this share of "
       "their peak (the practical ceilings are 90 %); with two faults the model, not this gate, says which binds"),
    _T("thrash_dram", 0.25, "a kernel re-reading its operands with a low L2 hit rate thrashes even while another "
       "fault keeps DRAM under its roof: DRAM this busy is enough to name it (tests/data/ladders gemm_order: 30 % "
       "busy with unpipelined loads, 84 % once they were pipelined)"),
    _T("tensor_idle", 0.05, "a tensor pipe under this share of its peak does no matrix work to speak of (an FP32 "
       "kernel's stray MMAs)"),
    _T("tensor_used", 0.1, "B's tensor pipe at this share of its peak does its matrix work there: more FP32 work "
       "in A is no-tensor-cores, not wasted work"),
    _T("fma_busy", 0.2, "an FMA pipe at least this busy is where more FP32 instructions than B's cost time"),
    _T("same_loads", 1.4, "two kernels whose global load instructions (LDG, and the async copies LDGSTS and TMA "
       "apart) are within this ratio of each other issue their loads alike: in a pair where A thrashes L2, A's "
       "extra wait for its loads is the misses' latency, which the reordering takes away with the misses "
       "(tests/data/pairs projections_reuse: the same loop in a new order waits 50 % of its warp time against "
       "93 %, and runs in B's 330 us, not the 630 us a late-loads hold left standing would give)"),
    _T("thrash_hit_pct", 60.0, "an L2 hit rate (%) under this, with operands re-read, is thrashing (a GEMM whose tiles "
       "reuse their operands from L2 hits 80-90 %: tests/data/ladders gemm_order, grouped order)"),
    _T("memory_share", 0.6, "memory sets at least this share of the time: its traffic is what the kernel waits on"),
    _T("late_loads_wait", 0.2, "warps waiting this share of their time for loads are worth prefetching for"),
    _T("late_loads_busy", 0.7, "a pipe or issue slots this busy bound the kernel: waiting loads are then not its "
       "limit"),
    _T("said_share", 0.05, "a share of the warp time worth saying in the evidence"),
    _T("gap_noise", 0.01, "a cause saving under this share of a pair's gap is not one of its causes"),
    _T("clock_moves_floor", 0.99, "a floor at the max clock under this share of the floor at the clock the kernel "
       "ran is worth saying (an L2- or DRAM-bound floor does not move with the SM clock)"),
    _T("shuffle_share", 0.15, "PRMT, SEL, SHFL and LOP3 at or above this share of an MMA kernel's instructions move "
       "registers more than its math needs (register-shuffle): the Triton FP8 forward, whose P crosses threads once "
       "a key block, spends 10.5 %, profctl's FP8 Gluon forward with an 8-bit P carried by its loop 36 % "
       "(tests/data/ladder50: ladder_ws, ws_fp8_perm)"),
    _T("shuffle_usual", 0.05, "the share of PRMT, SEL, SHFL and LOP3 an MMA kernel keeps once its operands need no "
       "moving (row reductions' shuffles, packing): 5 % in the FP8 Gluon forward with K permuted, 3-4 % in the "
       "bf16 attention kernels; register-shuffle's saving is what the share above it costs"),
    _T("roof_busy", 0.75, "a pipe at or above this share of its peak is at its compute roof (compute-bound, alone); "
       "under it never: the best attention kernels keep the tensor pipe 72-85 % busy, and a pipe 44 % busy is not "
       "the limit (issue 47)"),
)}


def value(name: str) -> float:
    """A threshold's value by name (KeyError names the table)."""
    return THRESHOLDS[name].value


__all__ = ["THRESHOLDS", "Threshold", "value"]
