"""Warp stall reasons: what each one means to a kernel engineer and what usually fixes it, in one place.

Nsight Compute samples, at a fixed interval, what each warp on an SM sub-partition is doing: issuing an instruction
(``selected``) or waiting, and why. The names are ncu's (``smsp__pcsamp_warps_issue_stalled_<reason>`` per
instruction, ``smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio`` per kernel: cycles a warp spends
in that state per instruction issued). The words below are profctl's own summary of the Nsight Compute Profiling
Guide's descriptions (docs/diagnosis.md has the longer version).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StallReason:
    key: str
    label: str
    means: str
    fix: str
    is_stall: bool = True  # False for `selected` (issuing) and `not_selected` (ready, another warp issued)


_R = StallReason
REASONS: dict[str, StallReason] = {r.key: r for r in (
    _R("long_scoreboard", "long scoreboard",
       "waiting for data from global or local memory (an L1TEX load: a cache miss goes to L2/DRAM)",
       "coalesce the loads, issue them earlier (more pipeline stages, cp.async/TMA prefetch), keep reused data in "
       "shared memory or registers, raise occupancy to hide the latency; local memory here means register spills"),
    _R("short_scoreboard", "short scoreboard",
       "waiting for a result from the MIO units: shared memory, special math (MUFU: exp, rcp, rsqrt) or some "
       "conversions",
       "remove shared-memory bank conflicts, issue fewer MUFU instructions (exp2 with log2(e) folded into the "
       "scale, or a polynomial on the FMA pipe), put independent work between the producer and its use"),
    _R("mio_throttle", "MIO throttle",
       "the MIO instruction queue is full: too many shared-memory, special-math (MUFU) or dynamic-branch "
       "instructions in flight",
       "fewer and wider shared-memory accesses (128-bit, ldmatrix), no bank conflicts, fewer MUFU instructions; "
       "if this is the exp of a softmax, the special-function unit is the limiter (see the sfu roof)"),
    _R("lg_throttle", "LG throttle",
       "the L1 queue for local and global memory instructions is full: many small memory instructions",
       "vectorize loads and stores (128-bit), coalesce them, remove register spills to local memory"),
    _R("tex_throttle", "TEX throttle",
       "the texture / L1TEX pipe is saturated", "fewer texture or L1TEX instructions; use wider accesses"),
    _R("barrier", "barrier",
       "waiting at a block-wide barrier (__syncthreads, bar.sync) for slower warps of the block; ncu also counts a "
       "wait for asynchronous warpgroup MMA results (WARPGROUP.DEPBAR, Hopper's wgmma) here",
       "balance work between the warps of a block, synchronize less often, or let warps specialize (producer and "
       "consumer warps with asynchronous mbarriers instead of block-wide barriers)"),
    _R("membar", "memory barrier", "waiting at a memory fence (__threadfence, membar)",
       "fewer fences, or a narrower scope (block instead of device)"),
    _R("wait", "wait", "a fixed-latency dependency the compiler scheduled a wait for (ALU, FMA results)",
       "more independent instructions between a result and its use (unroll, interleave two tiles)"),
    _R("math_pipe_throttle", "math pipe throttle",
       "the execution pipe this instruction needs (FMA, ALU, FP64, tensor) is busy with other warps' work",
       "this pipe is the limiter: move work to another pipe or do less of it; on the tensor pipe it means you are "
       "close to the compute roof"),
    _R("warpgroup_arrive", "warpgroup arrive",
       "waiting for asynchronous warpgroup MMAs (wgmma) to finish (wgmma.wait_group / warpgroup arrive)",
       "keep more wgmma in flight before waiting; let two warpgroups take turns, ordered (ping-pong, as "
       "FlashAttention-3 and cuDNN do); overlap inside one warpgroup was measured not to pay (docs/diagnosis.md)"),
    _R("gmma", "GMMA", "waiting on the warpgroup MMA (wgmma) unit", "as for warpgroup arrive"),
    _R("dispatch_stall", "dispatch stall", "the dispatcher could not issue the selected instruction",
       "rarely actionable; look at pipe conflicts in the hot instructions"),
    _R("drain", "drain", "waiting for memory writes to drain at the end of the kernel",
       "usually small; fewer or earlier stores"),
    _R("imc_miss", "IMC miss", "an immediate-constant cache miss (kernel parameters, constant memory)",
       "avoid divergent indexing into constant memory; usually only at the kernel's start"),
    _R("branch_resolving", "branch resolving", "waiting for a branch target to be computed or the PC updated",
       "fewer divergent branches; make loop bounds uniform"),
    _R("no_instructions", "no instructions", "no instruction fetched: an instruction-cache miss or a fresh branch",
       "less code (less unrolling, fewer template instances in one kernel); small kernels see it at start"),
    _R("sleeping", "sleeping", "the warp is sleeping (nanosleep) or waiting on a yield", "by design; check spin loops"),
    _R("misc", "misc", "other reasons", "rarely actionable"),
    _R("not_selected", "not selected", "ready to issue, but the scheduler picked another warp this cycle",
       "not a problem: there are enough ready warps (occupancy could even drop)", is_stall=False),
    _R("selected", "selected (issuing)", "issuing an instruction: the warp is doing work",
       "not a stall", is_stall=False),
)}


#: what a stall means when its samples sit on particular instructions (reason, opcode prefix) -> words; a reason's
#: generic text can mislead (ncu counts a wait on wgmma results as a barrier stall)
AT_OPCODE: dict[tuple[str, str], str] = {
    ("barrier", "WARPGROUP.DEPBAR"): "waiting for the warpgroup's asynchronous MMAs (wgmma) to finish: the matrix "
                                     "multiply is not overlapped with other work; let two warpgroups take turns "
                                     "(ping-pong, as FlashAttention-3 and cuDNN do); overlap inside one warpgroup "
                                     "(the next tile's MMA before this softmax, or the softmax under the previous "
                                     "P V) was measured not to pay",
    ("barrier", "WARPGROUP.ARRIVE"): "waiting at a warpgroup arrive before wgmma: operands staged in registers",
    ("barrier", "BAR.SYNC"): "a block-wide barrier (__syncthreads): warps wait for the slowest of the block",
    ("barrier", "SYNCS.ARRIVE"): "a warpgroup's threads meeting at the named barrier (BAR.SYNC with a thread "
                                 "count) the compiler puts before one of them arrives on an mbarrier: they wait for "
                                 "the warpgroup's slowest warp (in a ping-pong, the handoff of the turn)",
    ("barrier", "SYNCS"): "an asynchronous-copy barrier (mbarrier: TMA or cp.async data not arrived yet; in a "
                          "warp-specialized kernel also a slot not yet freed or the other warpgroup's turn: the "
                          "barrier's name on the line says which)",
    ("long_scoreboard", "SYNCS"): "waiting on an mbarrier for TMA/cp.async data: the loads are not far enough ahead",
    ("mio_throttle", "MUFU"): "special-function (exp, rcp) instructions queue up: the SFU is the limiter here",
    ("short_scoreboard", "MUFU"): "waiting for special-function (exp, rcp) results",
    ("mio_throttle", "LDS"): "shared-memory loads queue up (bank conflicts or too many narrow loads)",
    ("mio_throttle", "STS"): "shared-memory stores queue up (bank conflicts or too many narrow stores)",
    ("short_scoreboard", "LDS"): "waiting for shared-memory loads",
    ("mio_throttle", "SHFL"): "warp shuffles queue up (a row reduction: tl.max / tl.sum across threads)",
    ("short_scoreboard", "SHFL"): "waiting for warp shuffles (a row reduction across threads)",
    ("mio_throttle", "LDG"): "global loads queue up in the load/store path: many narrow or uncoalesced loads; widen "
                             "them (128-bit vectors) and coalesce them (shared memory and MUFU are not involved)",
    ("mio_throttle", "STG"): "global stores queue up: many narrow or uncoalesced stores; widen and coalesce them",
    ("mio_throttle", "ATOM"): "atomics queue up: reduce within the warp/block first, then one atomic per block",
    ("mio_throttle", "RED"): "reductions to memory queue up: reduce within the warp/block first",
    ("lg_throttle", "LDG"): "global load instructions fill the L1 queue: fewer, wider, coalesced loads",
    ("lg_throttle", "STG"): "global store instructions fill the L1 queue: fewer, wider, coalesced stores",
    ("lg_throttle", "LDL"): "local-memory loads (register spills or a per-thread array) fill the L1 queue",
    ("lg_throttle", "STL"): "local-memory stores (register spills or a per-thread array) fill the L1 queue",
    ("long_scoreboard", "LDL"): "waiting for a local-memory load: a spilled register or a per-thread array indexed "
                                "at run time",
    ("lg_throttle", "RED"): "reductions to global memory fill the L1 queue: one per thread; reduce in the warp first",
    ("lg_throttle", "ATOM"): "atomics fill the L1 queue: one per thread; reduce in the warp first",
    ("drain", "EXIT"): "the kernel's last stores (or atomics) draining before the warp exits",
    ("barrier", "BAR.RED"): "a block-wide barrier with a reduction (__syncthreads_count/and/or)",
}


def at_opcode(key: str, opcode: str) -> str | None:
    """What stall `key` means on an instruction with this opcode, where that says more than the reason alone."""
    return next((t for (k, pre), t in AT_OPCODE.items() if k == key and opcode.startswith(pre)), None)


def reason(key: str) -> StallReason:
    """The reason for an ncu key; unknown keys (a newer ncu) get a plain entry rather than an error."""
    return REASONS.get(key) or StallReason(key, key.replace("_", " "), "a stall reason this profctl does not know",
                                           "see the Nsight Compute Profiling Guide")


def label(key: str) -> str:
    return reason(key).label


#: the kernel-level metric for a reason: cycles per issued instruction a warp spends stalled for it
RATIO = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
#: ncu's per-kernel ratio says "no_instruction", the per-PC sample counter "no_instructions"
RATIO_KEY = {"no_instructions": "no_instruction"}


def ratio_metric(key: str) -> str:
    return RATIO.format(RATIO_KEY.get(key, key))


__all__ = ["AT_OPCODE", "RATIO", "REASONS", "StallReason", "at_opcode", "label", "ratio_metric", "reason"]
