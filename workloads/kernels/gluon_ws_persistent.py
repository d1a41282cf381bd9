"""The warp-specialized Gluon forward (gluon_attention.forward_ws) on a persistent grid: one block an SM takes its
tiles in turn (causal: the longest query blocks of every head first), and the producer warp loads the next tile's Q
and first K/V blocks while the consumers still finish this one, so a short sequence's pipeline fill and its O store
are hidden instead of paid once a tile.

Why (issue 50): `profctl explain` of the warp-specialized kernel against cuDNN at b16 h32 s1024 names
loads-not-pipelined (20 % of warp time waits for K/V tiles, 37 us): with 8 key blocks a tile, each block fills its
ring from empty and drains it at the end. Config ``m128n128w4s3-p1-ws-gl``.

Synchronization, all mbarriers: ``ready``/``empty`` per ring slot (TMA landed / both consumers done), counted across
tiles by one running index; ``turn`` (the two consumers issue in turns, counted across tiles by one running issue
index); ``q_bar`` (this tile's Q landed) and ``q_empty`` (both consumers stored their O from Q's slot: the producer may
load the next Q). What it takes is what gluon_attention.unsupported checks for 128-row tiles.
"""

from __future__ import annotations

from typing import Any

from . import gluon_attention as ga
from .gluon_attention import gluon
from .launch import launch

if gluon is not None:
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (
        mbarrier,
        tma,
        warpgroup_mma,
        warpgroup_mma_wait,
    )

    @gluon.jit
    def _tile(tile, n_m, n_bh, seqlen_q, seqlen_kv, diag_off, BLOCK_N: gl.constexpr, CAUSAL: gl.constexpr):
        """Tile number -> (batch x head, its first query row, its key blocks)."""
        if CAUSAL:  # the longest query blocks of every head first
            pid_m = n_m - 1 - tile // n_bh
            pid_bh = tile % n_bh
            hi = gl.minimum(pid_m * 128 + 128 + diag_off, seqlen_kv)
        else:  # one head's query blocks together: its K and V stay in L2
            pid_m = tile % n_m
            pid_bh = tile // n_m
            hi = seqlen_kv
        return pid_bh, pid_m * 128, gl.cdiv(hi, BLOCK_N)

    @gluon.jit
    def _wsp_producer(q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, q_empty, ready, empty, seqlen_q,
                      seqlen_kv, heads, group, diag_off, n_m, n_bh, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                      CAUSAL: gl.constexpr):
        base = 0
        t_local = 0
        for tile in range(gl.program_id(0), n_m * n_bh, gl.num_programs(0)):
            pid_bh, start_m, n_tiles = _tile(tile, n_m, n_bh, seqlen_q, seqlen_kv, diag_off, BLOCK_N, CAUSAL)
            kv_bh = (pid_bh // heads) * (heads // group) + (pid_bh % heads) // group
            q_row = pid_bh * seqlen_q + start_m
            kv_row = kv_bh * seqlen_kv
            # Q's slots hold the last tile's O until both consumers stored it
            mbarrier.wait(q_empty, (t_local & 1) ^ 1, pred=t_local > 0)
            mbarrier.expect(q_bar, 2 * q_desc.block_type.nbytes)
            tma.async_copy_global_to_shared(q_desc, [q_row, 0], q_bar, q_smem.index(0))
            tma.async_copy_global_to_shared(q_desc, [q_row + 64, 0], q_bar, q_smem.index(1))
            for j in range(n_tiles):
                it = base + j
                slot = it % STAGES
                mbarrier.wait(empty.index(slot), ((it // STAGES) & 1) ^ 1, pred=it >= STAGES)
                bar = ready.index(slot)
                mbarrier.expect(bar, k_desc.block_type.nbytes + v_desc.block_type.nbytes)
                tma.async_copy_global_to_shared(k_desc, [kv_row + j * BLOCK_N, 0], bar, k_smem.index(slot))
                tma.async_copy_global_to_shared(v_desc, [kv_row + j * BLOCK_N, 0], bar, v_smem.index(slot))
            base += n_tiles
            t_local += 1  # noqa: SIM113 (a Gluon loop: no enumerate)

    @gluon.jit
    def _wsp_turn(turn, g, WG: gl.constexpr):
        """Wait for this warpgroup's turn at its g-th issue: warpgroup 0's waits for warpgroup 1's (g-1)-th,
        warpgroup 1's for warpgroup 0's g-th (strict alternation, so a parity is enough)."""
        if WG == 0:
            mbarrier.wait(turn.index(0), (g - 1) & 1, pred=g > 0)
        else:
            mbarrier.wait(turn.index(1), g & 1)

    @gluon.jit
    def _wsp_consumer(o_desc, LSE, q_smem, k_smem, v_smem, q_bar, q_empty, ready, empty, turn, seqlen_q, seqlen_kv,
                      diag_off, qk_scale, n_m, n_bh, WG: gl.constexpr, HEAD_DIM: gl.constexpr,
                      BLOCK_N: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr):
        ROWS: gl.constexpr = 64
        dtype: gl.constexpr = o_desc.dtype
        s_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, BLOCK_N, 16])
        o_layout: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1],
                                                           instr_shape=[16, HEAD_DIM, 16])
        p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=2)
        row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
        row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
        offs_n0 = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        s_zero = gl.zeros([ROWS, BLOCK_N], gl.float32, layout=s_layout)
        q = q_smem.index(WG)
        base = 0
        t_local = 0
        g = 0
        for tile in range(gl.program_id(0), n_m * n_bh, gl.num_programs(0)):
            pid_bh, start_m, n_tiles = _tile(tile, n_m, n_bh, seqlen_q, seqlen_kv, diag_off, BLOCK_N, CAUSAL)
            my_start = start_m + WG * ROWS
            offs_m = my_start + gl.arange(0, ROWS, layout=row_s)
            m_i = gl.full([ROWS], -1.0e30, gl.float32, layout=row_s)
            l_i = gl.zeros([ROWS], gl.float32, layout=row_s)
            acc = gl.zeros([ROWS, HEAD_DIM], gl.float32, layout=o_layout)
            mbarrier.wait(q_bar, t_local & 1)

            slot = base % STAGES
            mbarrier.wait(ready.index(slot), (base // STAGES) & 1)
            _wsp_turn(turn, g, WG)
            s = warpgroup_mma(q, k_smem.index(slot).permute((1, 0)), s_zero, use_acc=False, is_async=True)
            mbarrier.arrive(turn.index(1 - WG))
            g += 1
            s = warpgroup_mma_wait(0, deps=(s,))
            s = ga._gl_mask(s, 0, my_start, offs_m, offs_n0, diag_off, BLOCK_N, CAUSAL)
            p, alpha, l_i, m_i = ga._gl_softmax(s, m_i, l_i, qk_scale)
            p_op = gl.convert_layout(p.to(dtype), p_layout)

            for j in range(1, n_tiles):
                it = base + j
                slot = it % STAGES
                prev = (it - 1) % STAGES
                mbarrier.wait(ready.index(slot), (it // STAGES) & 1)
                _wsp_turn(turn, g, WG)
                s = warpgroup_mma(q, k_smem.index(slot).permute((1, 0)), s_zero, use_acc=False, is_async=True)
                acc = warpgroup_mma(p_op, v_smem.index(prev), acc, is_async=True)
                mbarrier.arrive(turn.index(1 - WG))
                g += 1
                s = warpgroup_mma_wait(1, deps=(s,))
                s = ga._gl_mask(s, j, my_start, offs_m, offs_n0, diag_off, BLOCK_N, CAUSAL)
                p, alpha, l_i, m_i = ga._gl_softmax(s, m_i, l_i, qk_scale)
                acc, p_op = warpgroup_mma_wait(0, deps=(acc, p_op))
                mbarrier.arrive(empty.index(prev))
                acc = acc * gl.expand_dims(gl.convert_layout(alpha, row_o), 1)
                p_op = gl.convert_layout(p.to(dtype), p_layout)

            last = (base + n_tiles - 1) % STAGES
            acc = warpgroup_mma(p_op, v_smem.index(last), acc, is_async=True)
            acc = warpgroup_mma_wait(0, deps=(acc,))
            mbarrier.arrive(empty.index(last))

            ga._ws_store(acc, l_i, m_i, q, o_desc, LSE, pid_bh, seqlen_q, offs_m, pid_bh * seqlen_q + my_start, row_o)
            mbarrier.arrive(q_empty)  # Q's slot is free for the next tile's Q
            base += n_tiles
            t_local += 1  # noqa: SIM113 (a Gluon loop: no enumerate)

    @gluon.jit
    def _gl_wsp_fwd_kernel(q_desc, k_desc, v_desc, o_desc, LSE, seqlen_q, seqlen_kv, heads, group, diag_off,
                           qk_scale, n_bh, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                           CAUSAL: gl.constexpr, CONSUMER_REGS: gl.constexpr, PRODUCER_REGS: gl.constexpr):
        dtype: gl.constexpr = q_desc.dtype
        n_m = seqlen_q // 128
        q_smem = gl.allocate_shared_memory(dtype, [2, 64, HEAD_DIM], q_desc.layout)
        k_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], k_desc.layout)
        v_smem = gl.allocate_shared_memory(dtype, [STAGES, BLOCK_N, HEAD_DIM], v_desc.layout)
        q_bar, ready, empty, turn = ga._ws_barriers(STAGES)
        q_empty = gl.allocate_shared_memory(gl.int64, [1], mbarrier.MBarrierLayout())
        mbarrier.init(q_empty, count=2)  # both consumers stored their O: Q's slots are free

        wg0: gl.constexpr = 0
        wg1: gl.constexpr = 1
        gl.warp_specialize([
            (_wsp_consumer, (o_desc, LSE, q_smem, k_smem, v_smem, q_bar, q_empty, ready, empty, turn, seqlen_q,
                             seqlen_kv, diag_off, qk_scale, n_m, n_bh, wg0, HEAD_DIM, BLOCK_N, STAGES, CAUSAL)),
            (_wsp_consumer, (o_desc, LSE, q_smem, k_smem, v_smem, q_bar, q_empty, ready, empty, turn, seqlen_q,
                             seqlen_kv, diag_off, qk_scale, n_m, n_bh, wg1, HEAD_DIM, BLOCK_N, STAGES, CAUSAL)),
            (_wsp_producer, (q_desc, k_desc, v_desc, q_smem, k_smem, v_smem, q_bar, q_empty, ready, empty, seqlen_q,
                             seqlen_kv, heads, group, diag_off, n_m, n_bh, BLOCK_N, STAGES, CAUSAL)),
        ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])


def forward_wsp(q: Any, k: Any, v: Any, causal: bool, diag_off: int, qk_scale_log2: float, block_n: int = 128,
                stages: int | None = None, sms: int | None = None) -> tuple[Any, Any]:
    """The persistent warp-specialized forward for inputs gluon_attention.unsupported accepted with 128-row tiles:
    (O, log-sum-exp in the log2 domain). `sms`: the grid (default: the GPU's multiprocessors)."""
    import torch

    batch, heads, seqlen_q, d = q.shape
    kv_heads, seqlen_kv = k.shape[1], k.shape[2]
    o, lse, _, desc = ga.outputs(q)

    n_tiles = (seqlen_q // 128) * batch * heads
    grid = (min(n_tiles, sms or torch.cuda.get_device_properties(q.device).multi_processor_count),)
    launch(_gl_wsp_fwd_kernel, grid, desc(q, 64), desc(k, block_n), desc(v, block_n), desc(o, 64), lse, seqlen_q,
           seqlen_kv, heads, heads // kv_heads, diag_off, qk_scale_log2, batch * heads, HEAD_DIM=d,
           BLOCK_N=block_n, STAGES=stages or ga.STAGES[d], CAUSAL=causal,
           CONSUMER_REGS=ga.WS_REGS[0], PRODUCER_REGS=ga.WS_REGS[1], num_warps=4)
    return o, lse
