"""profctl's attention forward in Gluon (Triton's lower-level language) for Hopper: the step `profctl explain` asked
for and Triton 3.6 cannot express (issue 50).

Why: explain's first cause for the Triton forward against cuDNN, at every shape measured, is "mma-not-overlapped":
each warpgroup waits for its Q·Kᵀ wgmma before the softmax, and Triton 3.6 keeps a dot asynchronous only when its
result is the next iteration's accumulator (the pipelined variant, ``KernelConfig.pipe``, still waited). Gluon issues
the wgmma asynchronously and waits where the program says (``warpgroup_mma_wait``), so the softmax of key block j runs
on the CUDA cores while P·V of block j-1 runs on the tensor cores (FlashAttention-3's intra-warpgroup overlap):

    S_j = Q·K_jᵀ (async) ; O += P_{j-1}·V_{j-1} (async) ; wait S_j ; softmax(S_j) -> P_j ; wait O ; O *= alpha_j

Loads: K and V through TMA into a ring of STAGES shared-memory slots, one mbarrier a slot; a slot is refilled once
every warp is past the P·V that read it. Two warpgroups (8 warps) share a 128-row query block; causal launches take
the longest rows first; the causal mask is applied only to the key blocks that cross the diagonal.

What it takes (:func:`unsupported` says why not, and the caller falls back to the Triton kernel): a Hopper GPU
(sm_90: wgmma), Gluon (Triton >= 3.6), bf16 or fp16, head dim 64 or 128, contiguous (batch, heads, seq, dim) inputs,
sequence lengths that are multiples of the 128-row tiles, a positive softmax scale, no sliding window, and a causal
diagonal offset >= 0 that is a multiple of the tile. Gluon has no CPU interpreter: the kernel is tested on the GPU
(tests/gpu) and compiled offline for sm_90 by benchmarks/gluon_compile.py.
"""

from __future__ import annotations

import functools
from typing import Any

from .launch import descriptor, launch

try:  # the module imports without Gluon; `unsupported` then says why
    from triton.experimental import gluon
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (
        fence_async_shared,
        mbarrier,
        tma,
        warpgroup_mma,
        warpgroup_mma_wait,
    )
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    IMPORT_ERROR: str | None = None
except Exception as _e:  # ImportError on Triton < 3.6, or a Triton without Gluon
    gluon = None
    IMPORT_ERROR = f"{type(_e).__name__}: {_e}"

#: the query and key tile (rows), the warps of a block (two warpgroups) and the K/V ring's slots, per head dim
TILE = 128
NUM_WARPS = 8
STAGES = {64: 4, 128: 3}


if gluon is not None:

    @gluon.jit
    def _gl_softmax(s, m_i, l_i, qk_scale):
        """One online-softmax step in the log2 domain: scores -> P, the rescale factor, l and m."""
        m_new = gl.maximum(m_i, gl.max(s, axis=1) * qk_scale)
        p = gl.exp2(s * qk_scale - gl.expand_dims(m_new, 1))
        alpha = gl.exp2(m_i - m_new)
        l_i = l_i * alpha + gl.sum(p, axis=1)
        return p, alpha, l_i, m_new

    @gluon.jit
    def _gl_mask(s, j, start_m, offs_m, offs_n0, diag_off, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):
        """The causal mask on a key block that crosses the diagonal (the others pass unchanged)."""
        if CAUSAL:  # noqa: SIM102 (a constexpr condition, then a run-time one)
            if (j + 1) * BLOCK_N > start_m + diag_off + 1:
                keep = gl.expand_dims(j * BLOCK_N + offs_n0, 0) <= gl.expand_dims(offs_m, 1) + diag_off
                s = gl.where(keep, s, float("-inf"))
        return s

    @gluon.jit
    def _gl_block(heads, group, seqlen_kv, diag_off, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                  CAUSAL: gl.constexpr):
        """This program's (batch, head) index, its K/V head's (GQA), its first query row and its number of key blocks;
        causal launches take the longest rows first, so the short ones fill the tail."""
        if CAUSAL:  # noqa: SIM108 (constexpr branches)
            pid_m = gl.num_programs(0) - 1 - gl.program_id(0)
        else:
            pid_m = gl.program_id(0)
        pid_bh = gl.program_id(1)
        kv_bh = (pid_bh // heads) * (heads // group) + (pid_bh % heads) // group
        start_m = pid_m * BLOCK_M
        if CAUSAL:  # noqa: SIM108 (constexpr branches)
            hi = gl.minimum(start_m + BLOCK_M + diag_off, seqlen_kv)
        else:
            hi = seqlen_kv
        return pid_bh, kv_bh, start_m, gl.cdiv(hi, BLOCK_N)

    @gluon.jit
    def _gl_store(acc, l_i, m_i, o_desc, q_smem, LSE, pid_bh, seqlen_q, offs_m, q_row, row_o: gl.constexpr):
        """O = acc / l through Q's shared memory and TMA, and the log-sum-exp (log2 domain) for the backward."""
        seen = l_i > 0.0
        l_safe = gl.where(seen, l_i, 1.0)
        o = acc / gl.expand_dims(gl.convert_layout(l_safe, row_o), 1)
        lse = gl.where(seen, m_i + gl.log2(l_safe), float("inf"))  # +inf: the backward's exp2(s - lse) is 0
        gl.store(LSE + pid_bh.to(gl.int64) * seqlen_q + offs_m, lse)
        gl.thread_barrier()  # every warpgroup's last wgmma has read Q: its slot takes O
        q_smem.store(o.to(o_desc.dtype))
        fence_async_shared()
        tma.async_copy_shared_to_global(o_desc, [q_row, 0], q_smem)
        tma.store_wait(pendings=0)

    @gluon.jit
    def _gl_ring_barriers(STAGES: gl.constexpr):
        """The one-warpgroup-a-block kernels' mbarriers, initialized: Q landed, and per ring slot its K/V landed."""
        q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        kv_bars = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        mbarrier.init(q_bar, count=1)
        for i in gl.static_range(STAGES):
            mbarrier.init(kv_bars.index(i), count=1)
        return q_bar, kv_bars

    @gluon.jit
    def _gl_invalidate(q_bar, kv_bars, STAGES: gl.constexpr):
        mbarrier.invalidate(q_bar)
        for i in gl.static_range(STAGES):
            mbarrier.invalidate(kv_bars.index(i))

    @gluon.jit
    def _gl_load_kv(k_desc, v_desc, k_smem, v_smem, bars, row, slot, pred):
        bar = bars.index(slot)
        mbarrier.expect(bar, k_desc.block_type.nbytes + v_desc.block_type.nbytes, pred=pred)
        tma.async_copy_global_to_shared(k_desc, [row, 0], bar, k_smem.index(slot), pred=pred)
        tma.async_copy_global_to_shared(v_desc, [row, 0], bar, v_smem.index(slot), pred=pred)

    @gluon.jit
    def _gl_fwd_kernel(q_desc, k_desc, v_desc, o_desc, LSE, seqlen_q, seqlen_kv, heads, group, diag_off, qk_scale,
                       HEAD_DIM: gl.constexpr, BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr,
                       STAGES: gl.constexpr, CAUSAL: gl.constexpr, num_warps: gl.constexpr):
        dtype: gl.constexpr = q_desc.dtype
        pid_bh, kv_bh, start_m, n_tiles = _gl_block(heads, group, seqlen_kv, diag_off, BLOCK_M, BLOCK_N, CAUSAL)
        q_row = pid_bh * seqlen_q + start_m
        kv_row = kv_bh * seqlen_kv

        s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                           instr_shape=[16, BLOCK_N, 16])
        o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[num_warps, 1],
                                                           instr_shape=[16, HEAD_DIM, 16])
        p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
        row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
        row_o: gl.constexpr = gl.SliceLayout(1, o_layout)

        q_smem = gl.allocate_shared_memory(dtype, [BLOCK_M, HEAD_DIM], q_desc.layout)
        k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], k_desc.layout)
        v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], v_desc.layout)
        q_bar, kv_bars = _gl_ring_barriers(STAGES)

        mbarrier.expect(q_bar, q_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(q_desc, [q_row, 0], q_bar, q_smem)
        for i in gl.static_range(STAGES):  # key block t goes to slot t % STAGES: fill them all
            _gl_load_kv(k_desc, v_desc, k_smem, v_smem, kv_bars, kv_row + i * BLOCK_N, i, i < n_tiles)

        offs_m = start_m + gl.arange(0, BLOCK_M, layout=row_s)
        offs_n0 = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        m_i = gl.full([BLOCK_M], -1.0e30, gl.float32, layout=row_s)  # finite: a row with no key yet gives no NaN
        l_i = gl.zeros([BLOCK_M], gl.float32, layout=row_s)
        acc = gl.zeros([BLOCK_M, HEAD_DIM], gl.float32, layout=o_layout)
        s_zero = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=s_layout)

        # key block 0: its scores and P (nothing to overlap yet)
        mbarrier.wait(q_bar, 0)
        mbarrier.wait(kv_bars.index(0), 0)
        s = warpgroup_mma(q_smem, k_smem.index(0).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        s = warpgroup_mma_wait(0, deps=(s,))
        s = _gl_mask(s, 0, start_m, offs_m, offs_n0, diag_off, BLOCK_N, CAUSAL)
        p, alpha, l_i, m_i = _gl_softmax(s, m_i, l_i, qk_scale)
        p_op = gl.convert_layout(p.to(dtype), p_layout)

        for j in range(1, n_tiles):
            slot = j % STAGES
            prev = (j - 1) % STAGES
            mbarrier.wait(kv_bars.index(slot), (j // STAGES) & 1)
            s = warpgroup_mma(q_smem, k_smem.index(slot).permute((1, 0)), s_zero, use_acc=False, is_async=True)
            acc = warpgroup_mma(p_op, v_smem.index(prev), acc, is_async=True)
            s = warpgroup_mma_wait(1, deps=(s,))  # Q·K_jᵀ is done; P_{j-1}·V_{j-1} may still run under the softmax
            s = _gl_mask(s, j, start_m, offs_m, offs_n0, diag_off, BLOCK_N, CAUSAL)
            p, alpha, l_i, m_i = _gl_softmax(s, m_i, l_i, qk_scale)
            acc, p_op = warpgroup_mma_wait(0, deps=(acc, p_op))
            acc = acc * gl.expand_dims(gl.convert_layout(alpha, row_o), 1)
            p_op = gl.convert_layout(p.to(dtype), p_layout)
            gl.thread_barrier()  # every warp is past the P·V that read slot `prev`: refill it
            nxt = j - 1 + STAGES  # the block that takes slot `prev` next
            _gl_load_kv(k_desc, v_desc, k_smem, v_smem, kv_bars, kv_row + nxt * BLOCK_N, prev, nxt < n_tiles)

        last = (n_tiles - 1) % STAGES
        acc = warpgroup_mma(p_op, v_smem.index(last), acc, is_async=True)
        acc = warpgroup_mma_wait(0, deps=(acc,))

        _gl_store(acc, l_i, m_i, o_desc, q_smem, LSE, pid_bh, seqlen_q, offs_m, q_row, row_o)
        _gl_invalidate(q_bar, kv_bars, STAGES)


    # ----------------------------------------------------------------------------------------------------------
    # warp-specialized: a producer warp on TMA and two consumer warpgroups (64 query rows each) that take turns
    # ----------------------------------------------------------------------------------------------------------
    @gluon.jit
    def _ws_producer(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, ready, empty, q_row, kv_row, n_tiles,
                     BLOCK_N: gl.constexpr, STAGES: gl.constexpr):
        """Loads Q (both warpgroups' rows) once, then K and V into the ring as slots free up."""
        mbarrier.expect(q_bar, 2 * q_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(q_desc, [q_row, 0], q_bar, q_smem.index(0))
        tma.async_copy_global_to_shared(q_desc, [q_row + q_desc.block_type.shape[0], 0], q_bar, q_smem.index(1))
        for j in range(n_tiles):
            slot = j % STAGES
            # the consumers free a slot once both have read it (two arrivals a phase)
            mbarrier.wait(empty.index(slot), ((j // STAGES) & 1) ^ 1, pred=j >= STAGES)
            bar = ready.index(slot)
            mbarrier.expect(bar, k_desc.block_type.nbytes + v_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(k_desc, [kv_row + j * BLOCK_N, 0], bar, k_smem.index(slot))
            tma.async_copy_global_to_shared(v_desc, [kv_row + j * BLOCK_N, 0], bar, v_smem.index(slot))

    @gluon.jit
    def _ws_consumer(o_desc, LSE, q_smem, k_smem, v_smem, q_bar, ready, empty, turn, pid_bh, start_m, q_row,
                     seqlen_q, n_tiles, diag_off, qk_scale, WG: gl.constexpr, HEAD_DIM: gl.constexpr,
                     BLOCK_N: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr):
        """One warpgroup's 64 query rows. It issues its wgmma only in its turn (after the other warpgroup issued
        its own), so while one warpgroup does its softmax the other's wgmma keep the tensor pipe busy."""
        ROWS: gl.constexpr = 64
        dtype: gl.constexpr = o_desc.dtype
        s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, BLOCK_N, 16])
        o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, HEAD_DIM, 16])
        p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
        row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
        row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
        my_start = start_m + WG * ROWS
        offs_m = my_start + gl.arange(0, ROWS, layout=row_s)
        offs_n0 = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        m_i = gl.full([ROWS], -1.0e30, gl.float32, layout=row_s)
        l_i = gl.zeros([ROWS], gl.float32, layout=row_s)
        acc = gl.zeros([ROWS, HEAD_DIM], gl.float32, layout=o_layout)
        s_zero = gl.zeros([ROWS, BLOCK_N], gl.float32, layout=s_layout)
        q = q_smem.index(WG)
        mbarrier.wait(q_bar, 0)

        # key block 0
        mbarrier.wait(ready.index(0), 0)
        mbarrier.wait(turn.index(WG), 0, pred=WG == 1)  # warpgroup 0 goes first
        s = warpgroup_mma(q, k_smem.index(0).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        mbarrier.arrive(turn.index(1 - WG))
        s = warpgroup_mma_wait(0, deps=(s,))
        s = _gl_mask(s, 0, my_start, offs_m, offs_n0, diag_off, BLOCK_N, CAUSAL)
        p, alpha, l_i, m_i = _gl_softmax(s, m_i, l_i, qk_scale)
        p_op = gl.convert_layout(p.to(dtype), p_layout)

        for j in range(1, n_tiles):
            slot = j % STAGES
            prev = (j - 1) % STAGES
            mbarrier.wait(ready.index(slot), (j // STAGES) & 1)
            # my turn: warpgroup 0's j-th issue waits for warpgroup 1's (j-1)-th, warpgroup 1's j-th for 0's j-th
            mbarrier.wait(turn.index(WG), (j - 1 + WG) & 1)
            s = warpgroup_mma(q, k_smem.index(slot).permute((1, 0)), s_zero, use_acc=False, is_async=True)
            acc = warpgroup_mma(p_op, v_smem.index(prev), acc, is_async=True)
            mbarrier.arrive(turn.index(1 - WG))
            s = warpgroup_mma_wait(1, deps=(s,))
            s = _gl_mask(s, j, my_start, offs_m, offs_n0, diag_off, BLOCK_N, CAUSAL)
            p, alpha, l_i, m_i = _gl_softmax(s, m_i, l_i, qk_scale)
            acc, p_op = warpgroup_mma_wait(0, deps=(acc, p_op))
            mbarrier.arrive(empty.index(prev))  # this warpgroup is done with key block j-1
            acc = acc * gl.expand_dims(gl.convert_layout(alpha, row_o), 1)
            p_op = gl.convert_layout(p.to(dtype), p_layout)

        last = (n_tiles - 1) % STAGES
        acc = warpgroup_mma(p_op, v_smem.index(last), acc, is_async=True)
        acc = warpgroup_mma_wait(0, deps=(acc,))
        mbarrier.arrive(empty.index(last))

        _ws_store(acc, l_i, m_i, q, o_desc, LSE, pid_bh, seqlen_q, offs_m, q_row + WG * ROWS, row_o)

    @gluon.jit
    def _ws_store(acc, l_i, m_i, q, o_desc, LSE, pid_bh, seqlen_q, offs_m, o_row, row_o: gl.constexpr):
        """A consumer warpgroup's end of a tile: O = acc / l through its own Q slot and TMA, and its rows'
        log-sum-exp (log2 domain; +inf for a row that saw no key, so the backward's exp2(s - lse) is 0)."""
        seen = l_i > 0.0
        l_safe = gl.where(seen, l_i, 1.0)
        o = acc / gl.expand_dims(gl.convert_layout(l_safe, row_o), 1)
        lse = gl.where(seen, m_i + gl.log2(l_safe), float("inf"))
        gl.store(LSE + pid_bh.to(gl.int64) * seqlen_q + offs_m, lse)
        q.store(o.to(o_desc.dtype))  # this warpgroup's own Q rows take its O
        fence_async_shared()
        tma.async_copy_shared_to_global(o_desc, [o_row, 0], q)
        tma.store_wait(pendings=0)

    @gluon.jit
    def _ws_barriers(STAGES: gl.constexpr):
        """The warp-specialized kernels' mbarriers, initialized: Q landed; per ring slot, K/V landed (one TMA
        arrival) and slot free (both consumers); and the two consumers' turns."""
        q_bar = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        ready = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        empty = gl.allocate_shared_memory(gl.int64, [STAGES, 1], mbarrier.MBarrierLayout())
        turn = gl.allocate_shared_memory(gl.int64, [2, 1], mbarrier.MBarrierLayout())
        mbarrier.init(q_bar, count=1)
        for i in gl.static_range(STAGES):
            mbarrier.init(ready.index(i), count=1)
            mbarrier.init(empty.index(i), count=2)
        for i in gl.static_range(2):
            mbarrier.init(turn.index(i), count=1)
        return q_bar, ready, empty, turn

    @gluon.jit
    def _gl_ws_fwd_kernel(q_desc, k_desc, v_desc, o_desc, LSE, seqlen_q, seqlen_kv, heads, group, diag_off,
                          qk_scale, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                          CAUSAL: gl.constexpr, CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr):
        BLOCK_M: gl.constexpr = 128  # two warpgroups of 64 rows
        dtype: gl.constexpr = q_desc.dtype
        pid_bh, kv_bh, start_m, n_tiles = _gl_block(heads, group, seqlen_kv, diag_off, BLOCK_M, BLOCK_N, CAUSAL)
        q_row = pid_bh * seqlen_q + start_m
        kv_row = kv_bh * seqlen_kv

        q_smem = gl.allocate_shared_memory(dtype, [2, 64, HEAD_DIM], q_desc.layout)
        k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], k_desc.layout)
        v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], v_desc.layout)
        q_bar, ready, empty, turn = _ws_barriers(STAGES)

        wg0: gl.constexpr = 0
        wg1: gl.constexpr = 1
        gl.warp_specialize([
            (_ws_consumer, (o_desc, LSE, q_smem, k_smem, v_smem, q_bar, ready, empty, turn, pid_bh, start_m, q_row,
                            seqlen_q, n_tiles, diag_off, qk_scale, wg0, HEAD_DIM, BLOCK_N, STAGES, CAUSAL)),
            (_ws_consumer, (o_desc, LSE, q_smem, k_smem, v_smem, q_bar, ready, empty, turn, pid_bh, start_m, q_row,
                            seqlen_q, n_tiles, diag_off, qk_scale, wg1, HEAD_DIM, BLOCK_N, STAGES, CAUSAL)),
            (_ws_producer, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, ready, empty, q_row, kv_row,
                            n_tiles, BLOCK_N, STAGES)),
        ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])


def unsupported(q: Any, k: Any, v: Any, causal: bool, diag_off: int, sm_scale: float, window: int = 0,
                block_m: int = TILE, block_n: int = TILE) -> str | None:
    """Why the Gluon forward cannot run these inputs here (None: it can)."""
    import torch

    if IMPORT_ERROR is not None:
        return f"no Gluon in this Triton ({IMPORT_ERROR})"
    if not hopper(q.device):
        return "the Gluon forward needs a Hopper GPU (sm_90: warpgroup MMA)"
    if q.dtype not in (torch.bfloat16, torch.float16) or not (q.dtype == k.dtype == v.dtype):
        return "the Gluon forward takes bf16 or fp16"
    d = q.shape[-1]
    if d not in STAGES or k.shape[-1] != d or v.shape[-1] != d:
        return f"the Gluon forward takes head dim {' or '.join(map(str, STAGES))}"
    if not (q.is_contiguous() and k.is_contiguous() and v.is_contiguous()):
        return "the Gluon forward takes contiguous (batch, heads, seq, dim) inputs"
    if (q.data_ptr() | k.data_ptr() | v.data_ptr()) % 16:
        return "the Gluon forward's TMA loads take 16-byte aligned inputs"
    if block_m not in (64, 128) or block_n not in (64, 128):
        return "the Gluon forward takes 64- or 128-row tiles"
    if q.shape[2] % block_m or k.shape[2] % block_n:
        return f"the Gluon forward takes sequence lengths that are multiples of its tiles ({block_m}, {block_n})"
    if sm_scale <= 0 or window:
        return "the Gluon forward takes a positive softmax scale and no sliding window"
    if causal and (diag_off < 0 or diag_off % max(block_m, block_n)):
        return f"the Gluon forward takes a causal diagonal offset >= 0 that is a multiple of {max(block_m, block_n)}"
    return None


@functools.lru_cache(maxsize=16)
def hopper(device: Any) -> bool:
    """Whether `device` is a Hopper GPU (sm_90), asked of the driver once per device (every launch checks)."""
    import torch

    return bool(device.type == "cuda" and torch.cuda.get_device_capability(device)[0] == 9)


@functools.lru_cache(maxsize=64)
def shared_layout(block: tuple[int, ...], dtype: Any) -> Any:
    """The default swizzled shared-memory layout of a `block` tile: the same for every call with that tile, and Gluon
    takes about 10 us of host time to work it out (a launch builds four to six descriptors; on the H200 machine a
    call's host time can pass a short kernel's, and a loop of calls then waits for it: benchmarks/RESULTS.md)."""
    return gl.NVMMASharedLayout.get_default_for(list(block), dtype)


def tma_desc(x: Any, block: list[int], dtype: Any) -> Any:
    """A 2-D TMA descriptor over `x` (rows, columns) with tiles of `block` in the default swizzled layout."""
    return descriptor(TensorDescriptor, x, list(x.shape), list(x.stride()), block, shared_layout(tuple(block), dtype))


def rows_desc(x: Any, rows: int, dtype: Any) -> Any:
    """:func:`tma_desc` over the (batch * heads * seq, dim) rows of a contiguous `x`, in tiles of `rows` rows: the
    descriptor reads only the base's address and element type, so no 2-D view is made (a view is a few us of host
    time, and a launch builds four to six descriptors)."""
    d = x.shape[-1]
    return descriptor(TensorDescriptor, x, [x.numel() // d, d], [d, 1], [rows, d], shared_layout((rows, d), dtype))


def outputs(q: Any) -> tuple[Any, Any, Any, Any]:
    """O like q, the log-sum-exp (batch, heads, seq) in fp32, Gluon's element type of q, and a function
    (tensor, rows) -> the TMA descriptor over its (batch * heads * seq, dim) rows in tiles of `rows`."""
    import torch

    gdt = gl.bfloat16 if q.dtype == torch.bfloat16 else gl.float16
    lse = torch.empty(q.shape[:3], device=q.device, dtype=torch.float32)
    return torch.empty_like(q), lse, gdt, lambda x, rows: rows_desc(x, rows, gdt)


def forward(q: Any, k: Any, v: Any, causal: bool, diag_off: int, qk_scale_log2: float, block_m: int = TILE,
            block_n: int = TILE, num_warps: int = NUM_WARPS, stages: int | None = None) -> tuple[Any, Any]:
    """(O, LSE in the log2 domain) for inputs :func:`unsupported` accepted. 64-row query tiles with 4 warps (one
    warpgroup) leave room for two blocks an SM, which then overlap each other."""
    batch, heads, seqlen_q, d = q.shape
    kv_heads, seqlen_kv = k.shape[1], k.shape[2]
    o, lse, _, desc = outputs(q)

    grid = (seqlen_q // block_m, batch * heads)
    launch(_gl_fwd_kernel, grid, desc(q, block_m), desc(k, block_n), desc(v, block_n), desc(o, block_m), lse,
           seqlen_q, seqlen_kv, heads, heads // kv_heads, diag_off, qk_scale_log2, HEAD_DIM=d, BLOCK_M=block_m,
           BLOCK_N=block_n, STAGES=stages or STAGES[d], CAUSAL=causal, num_warps=num_warps)
    return o, lse


#: the warp-specialized forward's register split (setmaxnreg): two consumer warpgroups get most of the file, the
#: producer warp (TMA only) little, as FlashAttention-3 does (240 / 24 there with two consumers and a producer group)
WS_REGS = (232, 40)


def forward_ws(q: Any, k: Any, v: Any, causal: bool, diag_off: int, qk_scale_log2: float, block_n: int = TILE,
               stages: int | None = None) -> tuple[Any, Any]:
    """The warp-specialized forward (a producer warp, two consumer warpgroups taking turns) for inputs
    :func:`unsupported` accepted with 128-row query tiles."""
    batch, heads, seqlen_q, d = q.shape
    kv_heads, seqlen_kv = k.shape[1], k.shape[2]
    o, lse, _, desc = outputs(q)

    grid = (seqlen_q // TILE, batch * heads)
    launch(_gl_ws_fwd_kernel, grid, desc(q, 64), desc(k, block_n), desc(v, block_n), desc(o, 64), lse, seqlen_q,
           seqlen_kv, heads, heads // kv_heads, diag_off, qk_scale_log2, HEAD_DIM=d, BLOCK_N=block_n,
           STAGES=stages or STAGES[d], CAUSAL=causal, CONSUMER_REGS=WS_REGS[0], PRODUCER_REGS=WS_REGS[1], num_warps=4)
    return o, lse
