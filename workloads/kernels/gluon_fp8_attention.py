"""profctl's FP8 (e4m3) attention forward in Gluon for Hopper, warp-specialized: the schedule of
:func:`gluon_attention.forward_ws` (a producer warp on TMA, two consumer warpgroups of 64 query rows that issue their
wgmma in turns) with FlashAttention-3's FP8 conventions (per-tensor descales, P rounded to e4m3 for P·V, V read
K-major), which the Triton FP8 forward (triton_fp8_kernels.py) shares.

Why (issue 50, item 2): `profctl explain` of the Triton FP8 forward alone reads "latency-bound" (no unit busier than
47 %, the tensor pipe 44 %): its one warpgroup a block waits on each wgmma and then runs its softmax with the tensor
cores idle. Emulating part of the exps on the FMA pipe (KernelConfig.emu) was measured 15-25 % slower: the SFU is not
the limit. The bf16 warp-specialized kernel took the same kind of wait from the Triton kernel and passed cuDNN.

FP8 wgmma wants both operands K-major: Q·Kᵀ reads K as stored (head dim contiguous); P·V reads Vᵀ, so V must be
K-major (:func:`triton_attention.prepare` makes it so; the caller copies it otherwise). P is rounded to e4m3 in
registers (the A operand, 4 values a 32-bit register), in the iteration that multiplies it (an 8-bit tensor carried by
a loop is kept a byte a register: explain's register-shuffle), and K's keys load permuted within each group of 16
(:func:`k_desc`) so that the scores' registers already are that operand. O leaves in bf16 through its own shared
tile and TMA (warp-specialized) or from registers (:func:`forward`: one warpgroup a 64-row block, two blocks an SM).

Measured on an H200 (benchmarks/RESULTS.md, "FP8 attention"), the kernels alone: 802-812 TFLOP/s warp-specialized
(779-793 with 192-key blocks of two tiles, :data:`SPLIT`), 814 one warpgroup a block (`do_bench`), against the Triton
FP8 kernel's 851-853; configs, not the default.

What it takes (:func:`unsupported` says why not; the caller falls back to the Triton FP8 kernel): a Hopper GPU, Gluon,
e4m3 inputs, head dim 64 or 128, contiguous (batch, heads, seq, dim) Q and K, a K-major V, sequence lengths that are
multiples of the tiles (of 64 keys with 192-key blocks), a positive scale, a causal diagonal offset >= 0 that is a
multiple of 128. Tested on the GPU only (tests/unit/test_triton_fp8.py, the `gl` variants); compiled offline for sm_90
by benchmarks/gluon_compile.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from . import gluon_attention as ga
from .gluon_attention import IMPORT_ERROR, gluon
from .launch import descriptor, launch

if gluon is not None:
    from triton.experimental.gluon import language as gl
    from triton.experimental.gluon.language.nvidia.hopper import (
        fence_async_shared,
        mbarrier,
        tma,
        warpgroup_mma,
        warpgroup_mma_init,
        warpgroup_mma_wait,
    )
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor

    @gluon.constexpr_function
    def _mma_layout(n):
        """One warpgroup's FP8 wgmma accumulator layout for an n-wide result (S: n = keys, O: n = head dim)."""
        return gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[4, 1], instr_shape=[16, n, 32])

    @gluon.jit
    def _load8(k_desc, vt_desc, k_smem, vt_smem, bars, kv_row, vt_row, j, slot, pred,
               BLOCK_N: gl.constexpr, PERM: gl.constexpr):
        """Key block j's K and Vᵀ tiles into ring slot `slot` (TMA, one mbarrier a slot). With PERM, K's 5-D view
        (rows / 16, 2, 4, 2, dim): its 16-key groups land permuted (:func:`k_desc`)."""
        bar = bars.index(slot)
        mbarrier.expect(bar, k_desc.block_type.nbytes + vt_desc.block_type.nbytes, pred=pred)
        if PERM:
            tma.async_copy_global_to_shared(k_desc, [(kv_row + j * BLOCK_N) // 16, 0, 0, 0, 0], bar,
                                            k_smem.index(slot), pred=pred)
        else:
            tma.async_copy_global_to_shared(k_desc, [kv_row + j * BLOCK_N, 0], bar, k_smem.index(slot), pred=pred)
        tma.async_copy_global_to_shared(vt_desc, [vt_row, j * BLOCK_N], bar, vt_smem.index(slot), pred=pred)

    @gluon.jit
    def _load8_split(kd, vd, k_smem, vt_smem, bars, kv_row, vt_row, j, slot,
                     BLOCK_N: gl.constexpr, BLOCK_N2: gl.constexpr):
        """Key block j of BLOCK_N + BLOCK_N2 keys as two tiles a ring slot (K permuted: :func:`k_desc`), one mbarrier.
        `kd`, `vd`, `k_smem`, `vt_smem`: (first tile's, second tile's). Keys past the end read as zeros (Vᵀ) or
        another head's K (masked: :func:`_tail_mask`)."""
        bar = bars.index(slot)
        key = j * (BLOCK_N + BLOCK_N2)
        mbarrier.expect(bar, kd[0].block_type.nbytes + vd[0].block_type.nbytes + kd[1].block_type.nbytes
                        + vd[1].block_type.nbytes)
        tma.async_copy_global_to_shared(kd[0], [(kv_row + key) // 16, 0, 0, 0, 0], bar, k_smem[0].index(slot))
        tma.async_copy_global_to_shared(kd[1], [(kv_row + key + BLOCK_N) // 16, 0, 0, 0, 0], bar,
                                        k_smem[1].index(slot))
        tma.async_copy_global_to_shared(vd[0], [vt_row, key], bar, vt_smem[0].index(slot))
        tma.async_copy_global_to_shared(vd[1], [vt_row, key + BLOCK_N], bar, vt_smem[1].index(slot))

    @gluon.jit
    def _ws8_producer(q_desc, kd, vd, q_smem, k_smem, vt_smem, q_bar, ready, empty, q_row, kv_row, vt_row,
                      n_tiles, BLOCK_N: gl.constexpr, BLOCK_N2: gl.constexpr, STAGES: gl.constexpr,
                      PERM: gl.constexpr):
        """Loads Q (both warpgroups' rows) once, then K and Vᵀ tiles into the ring as slots free up (`kd`, `vd`,
        `k_smem`, `vt_smem`: the first tile's and, with BLOCK_N2, the second's)."""
        mbarrier.expect(q_bar, 2 * q_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(q_desc, [q_row, 0], q_bar, q_smem.index(0))
        tma.async_copy_global_to_shared(q_desc, [q_row + q_desc.block_type.shape[0], 0], q_bar, q_smem.index(1))
        for j in range(n_tiles):
            slot = j % STAGES
            mbarrier.wait(empty.index(slot), ((j // STAGES) & 1) ^ 1, pred=j >= STAGES)
            if BLOCK_N2 > 0:
                _load8_split(kd, vd, k_smem, vt_smem, ready, kv_row, vt_row, j, slot, BLOCK_N, BLOCK_N2)
            else:
                _load8(kd[0], vd[0], k_smem[0], vt_smem[0], ready, kv_row, vt_row, j, slot, True, BLOCK_N, PERM)

    @gluon.jit
    def _k_tile(k_smem, slot, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, PERM: gl.constexpr):
        """Ring slot `slot`'s K tile as wgmma's B operand (dim x keys)."""
        if PERM:
            return k_smem.index(slot).reshape([BLOCK_N, HEAD_DIM]).permute((1, 0))
        else:
            return k_smem.index(slot).permute((1, 0))

    @gluon.jit
    def _p_operand(p, p_layout: gl.constexpr, BLOCK_N: gl.constexpr, PERM: gl.constexpr):
        """P (fp32, the Q·Kᵀ accumulator's layout) to e4m3 in the layout of P·V's register operand."""
        p8 = p.to(gl.float8e4nv)
        if PERM:
            p8 = gl.reshape(p8, [64, BLOCK_N // 16, 2, 4, 2])
            p8 = gl.permute(p8, (0, 1, 3, 2, 4))
            p8 = gl.reshape(p8, [64, BLOCK_N])
            return gl.convert_layout(p8, p_layout, assert_trivial=True)
        else:
            return gl.convert_layout(p8, p_layout)

    @gluon.jit
    def _state8(ROWS: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, s_layout: gl.constexpr,
                o_layout: gl.constexpr, PERM: gl.constexpr):
        """A block's starting state: the key of each score column (permuted with PERM: column r = 16h + 8b + 2q + j
        holds key 16h + 4q + 2b + j, K's rows as loaded), the running max and sum, O's accumulator, a zero S."""
        row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
        offs_n0 = gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, s_layout))
        if PERM:
            offs_n0 = (offs_n0 & -16) + ((offs_n0 >> 1) & 3) * 4 + ((offs_n0 >> 3) & 1) * 2 + (offs_n0 & 1)
        m_i = gl.full([ROWS], -1.0e30, gl.float32, layout=row_s)
        l_i = gl.zeros([ROWS], gl.float32, layout=row_s)
        acc = gl.zeros([ROWS, HEAD_DIM], gl.float32, layout=o_layout)
        s_zero = gl.zeros([ROWS, BLOCK_N], gl.float32, layout=s_layout)
        return offs_n0, m_i, l_i, acc, s_zero

    @gluon.jit
    def _k_ring(k_desc, STAGES: gl.constexpr, BLOCK_N: gl.constexpr, HEAD_DIM: gl.constexpr, PERM: gl.constexpr):
        """The ring of K tiles in shared memory: with PERM in the 5-D shape of K's permuted TMA view."""
        if PERM:
            return gl.allocate_shared_memory(gl.float8e4nv, [STAGES, BLOCK_N // 16, 2, 4, 2, HEAD_DIM],
                                             k_desc.layout)
        else:
            return gl.allocate_shared_memory(gl.float8e4nv, [STAGES, BLOCK_N, HEAD_DIM], k_desc.layout)

    @gluon.jit
    def _store8(acc, l_i, VS, Out, pid_bh, seqlen_q, start_m, BLOCK_M: gl.constexpr, HEAD_DIM: gl.constexpr,
                o_layout: gl.constexpr):
        """O = acc x v_descale / l in bf16, stored from the accumulator's registers."""
        row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
        l_safe = gl.where(l_i > 0.0, l_i, 1.0)
        o = acc * gl.expand_dims(gl.convert_layout(gl.load(VS) / l_safe, row_o), 1)
        rows = gl.arange(0, BLOCK_M, layout=row_o)
        cols = gl.arange(0, HEAD_DIM, layout=gl.SliceLayout(0, o_layout))
        base = Out + (pid_bh.to(gl.int64) * seqlen_q + start_m) * HEAD_DIM
        gl.store(base + gl.expand_dims(rows, 1) * HEAD_DIM + gl.expand_dims(cols, 0), o.to(gl.bfloat16))

    @gluon.jit
    def _tail_mask(s, j, offs_n, seqlen_kv, BLOCK: gl.constexpr):
        """Keys at or past seqlen_kv to -inf, on the last key block only (blocks of BLOCK keys that need not divide
        the sequence; `offs_n`: each column's key within the block)."""
        if (j + 1) * BLOCK > seqlen_kv:
            s = gl.where(gl.expand_dims(j * BLOCK + offs_n, 0) < seqlen_kv, s, float("-inf"))
        return s

    @gluon.jit
    def _softmax2(s, s2, m_i, l_i, qk_scale):
        """:func:`gluon_attention._gl_softmax` over a key block held as two tiles (their rows are the same threads'
        registers: the row vectors change layout object, not place)."""
        row2: gl.constexpr = gl.SliceLayout(1, s2.type.layout)
        row: gl.constexpr = m_i.type.layout
        m_blk = gl.maximum(gl.max(s, axis=1), gl.convert_layout(gl.max(s2, axis=1), row))
        m_new = gl.maximum(m_i, m_blk * qk_scale)
        p = gl.exp2(s * qk_scale - gl.expand_dims(m_new, 1))
        p2 = gl.exp2(s2 * qk_scale - gl.expand_dims(gl.convert_layout(m_new, row2), 1))
        alpha = gl.exp2(m_i - m_new)
        l_i = l_i * alpha + gl.sum(p, axis=1) + gl.convert_layout(gl.sum(p2, axis=1), row)
        return p, p2, alpha, l_i, m_new

    @gluon.jit
    def _p_ops(p, p2, p_layout: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_N2: gl.constexpr, PERM: gl.constexpr):
        """P of a key block (with BLOCK_N2, of its two tiles) as P·V's e4m3 register operands."""
        p_op = _p_operand(p, p_layout, BLOCK_N, PERM)
        if BLOCK_N2 > 0:  # noqa: SIM108 (constexpr branches)
            p2_op = _p_operand(p2, p_layout, BLOCK_N2, PERM)
        else:
            p2_op = p_op
        return p_op, p2_op

    @gluon.jit
    def _qk8(q, k_smem, slot, s_zero, s2_zero, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr,
             BLOCK_N2: gl.constexpr, PERM: gl.constexpr):
        """Q·Kᵀ of ring slot `slot`, issued (one wgmma group a tile)."""
        s = warpgroup_mma(q, _k_tile(k_smem[0], slot, BLOCK_N, HEAD_DIM, PERM), s_zero, use_acc=False, is_async=True)
        if BLOCK_N2 > 0:
            s2 = warpgroup_mma(q, _k_tile(k_smem[1], slot, BLOCK_N2, HEAD_DIM, PERM), s2_zero, use_acc=False,
                               is_async=True)
        else:
            s2 = s
        return s, s2

    @gluon.jit
    def _pv8(p_op, p2_op, vt_smem, slot, acc, BLOCK_N2: gl.constexpr):
        """O += P·V of ring slot `slot`, issued (one wgmma group a tile)."""
        acc = warpgroup_mma(p_op, vt_smem[0].index(slot).permute((1, 0)), acc, is_async=True)
        if BLOCK_N2 > 0:
            acc = warpgroup_mma(p2_op, vt_smem[1].index(slot).permute((1, 0)), acc, is_async=True)
        return acc

    @gluon.jit
    def _softmax8(s, s2, j, my_start, offs_m, offs_m2, offs_n0, offs_n2, diag_off, seqlen_kv, m_i, l_i, qk_scale,
                  PV_PENDING: gl.constexpr, BLOCK_N: gl.constexpr, BLOCK_N2: gl.constexpr, CAUSAL: gl.constexpr):
        """Key block j's scores once their wgmma are done (PV_PENDING: whether the P·V issued after them may still
        run), masked, through the online softmax."""
        if BLOCK_N2 > 0:
            BT: gl.constexpr = BLOCK_N + BLOCK_N2  # keys a block
            s, s2 = warpgroup_mma_wait(2 * PV_PENDING, deps=(s, s2))
            s = ga._gl_mask(s, j, my_start, offs_m, offs_n0, diag_off, BT, CAUSAL)
            s2 = ga._gl_mask(s2, j, my_start, offs_m2, offs_n2, diag_off, BT, CAUSAL)
            # the last block reaches past the keys (seqlen_kv need only be a multiple of BLOCK_N2), causal or not: a
            # top-left causal mask with fewer keys than queries would let rows see past them
            s = _tail_mask(s, j, offs_n0, seqlen_kv, BT)
            s2 = _tail_mask(s2, j, offs_n2, seqlen_kv, BT)
            p, p2, alpha, l_i, m_i = _softmax2(s, s2, m_i, l_i, qk_scale)
        else:
            s = warpgroup_mma_wait(PV_PENDING, deps=(s,))
            s = ga._gl_mask(s, j, my_start, offs_m, offs_n0, diag_off, BLOCK_N, CAUSAL)
            p, alpha, l_i, m_i = ga._gl_softmax(s, m_i, l_i, qk_scale)
            p2 = p
        return p, p2, alpha, l_i, m_i

    @gluon.jit
    def _ws8_consumer(o_desc, o_smem, q_smem, k_smem, vt_smem, q_bar, ready, empty, turn, start_m, q_row, n_tiles,
                      seqlen_kv, diag_off, qk_scale, v_descale, WG: gl.constexpr, HEAD_DIM: gl.constexpr,
                      BLOCK_N: gl.constexpr, BLOCK_N2: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr,
                      PERM: gl.constexpr):
        """One warpgroup's 64 query rows, in turns with the other (gluon_attention._ws_consumer's schedule). With
        BLOCK_N2 a key block is two tiles (BLOCK_N + BLOCK_N2 keys: FlashAttention-3's FP8 blocks are 224 keys,
        TMA boxes powers of two): two Q·Kᵀ and two P·V wgmma a turn, one softmax over both."""
        ROWS: gl.constexpr = 64
        s_layout: gl.constexpr = _mma_layout(BLOCK_N)
        o_layout: gl.constexpr = _mma_layout(HEAD_DIM)
        p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=4)
        row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
        row_o: gl.constexpr = gl.SliceLayout(1, o_layout)
        my_start = start_m + WG * ROWS
        offs_m = my_start + gl.arange(0, ROWS, layout=row_s)
        offs_n0, m_i, l_i, acc, s_zero = _state8(ROWS, BLOCK_N, HEAD_DIM, s_layout, o_layout, PERM)
        if BLOCK_N2 > 0:  # the second tile's zero S, keys and rows (the same rows, in its layout object)
            s2_layout: gl.constexpr = _mma_layout(BLOCK_N2)
            offs_n2 = _state8(ROWS, BLOCK_N2, HEAD_DIM, s2_layout, o_layout, PERM)[0] + BLOCK_N
            s2_zero = gl.zeros([ROWS, BLOCK_N2], gl.float32, layout=s2_layout)
            offs_m2 = my_start + gl.arange(0, ROWS, layout=gl.SliceLayout(1, s2_layout))
        else:
            offs_n2 = offs_n0
            s2_zero = s_zero
            offs_m2 = offs_m
        q = q_smem.index(WG)
        mbarrier.wait(q_bar, 0)

        mbarrier.wait(ready.index(0), 0)
        mbarrier.wait(turn.index(WG), 0, pred=WG == 1)  # warpgroup 0 goes first
        s, s2 = _qk8(q, k_smem, 0, s_zero, s2_zero, HEAD_DIM, BLOCK_N, BLOCK_N2, PERM)
        mbarrier.arrive(turn.index(1 - WG))
        p, p2, alpha, l_i, m_i = _softmax8(s, s2, 0, my_start, offs_m, offs_m2, offs_n0, offs_n2, diag_off,
                                           seqlen_kv, m_i, l_i, qk_scale, 0, BLOCK_N, BLOCK_N2, CAUSAL)

        for j in range(1, n_tiles):
            slot = j % STAGES
            prev = (j - 1) % STAGES
            # P_{j-1} to the e4m3 operand here, not at the end of the last iteration: an 8-bit tensor carried by the
            # loop is kept one byte a register, unpacked and repacked around every wgmma (256 PRMT a block in SASS)
            p_op, p2_op = _p_ops(p, p2, p_layout, BLOCK_N, BLOCK_N2, PERM)
            mbarrier.wait(ready.index(slot), (j // STAGES) & 1)
            mbarrier.wait(turn.index(WG), (j - 1 + WG) & 1)
            s, s2 = _qk8(q, k_smem, slot, s_zero, s2_zero, HEAD_DIM, BLOCK_N, BLOCK_N2, PERM)
            acc = _pv8(p_op, p2_op, vt_smem, prev, acc, BLOCK_N2)
            mbarrier.arrive(turn.index(1 - WG))
            p, p2, alpha, l_i, m_i = _softmax8(s, s2, j, my_start, offs_m, offs_m2, offs_n0, offs_n2, diag_off,
                                               seqlen_kv, m_i, l_i, qk_scale, 1, BLOCK_N, BLOCK_N2, CAUSAL)
            # (an 8-bit P cannot be a dependency of the wait in Triton 3.6; ptxas keeps a wgmma's register operand
            # until its wait_group, and P is rewritten only after this wait)
            acc = warpgroup_mma_wait(0, deps=(acc,))
            mbarrier.arrive(empty.index(prev))
            acc = acc * gl.expand_dims(gl.convert_layout(alpha, row_o), 1)

        last = (n_tiles - 1) % STAGES
        p_op, p2_op = _p_ops(p, p2, p_layout, BLOCK_N, BLOCK_N2, PERM)
        acc = _pv8(p_op, p2_op, vt_smem, last, acc, BLOCK_N2)
        acc = warpgroup_mma_wait(0, deps=(acc,))
        mbarrier.arrive(empty.index(last))

        l_safe = gl.where(l_i > 0.0, l_i, 1.0)
        o = acc * gl.expand_dims(gl.convert_layout(v_descale / l_safe, row_o), 1)
        mine = o_smem.index(WG)
        mine.store(o.to(gl.bfloat16))
        fence_async_shared()
        tma.async_copy_shared_to_global(o_desc, [q_row + WG * ROWS, 0], mine)
        tma.store_wait(pendings=0)

    @gluon.jit
    def _gl_ws_fp8_kernel(q_desc, k_desc, vt_desc, k2_desc, vt2_desc, o_desc, QS, KS, VS, seqlen_q, seqlen_kv, heads,
                          group, diag_off, sm_scale_log2, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr,
                          STAGES: gl.constexpr, CAUSAL: gl.constexpr, CONSUMER_REGS: gl.constexpr,
                          PRODUCER_REGS: gl.constexpr, PERM: gl.constexpr = False, BLOCK_N2: gl.constexpr = 0):
        BLOCK_M: gl.constexpr = 128  # two warpgroups of 64 rows
        pid_bh, kv_bh, start_m, n_tiles = ga._gl_block(heads, group, seqlen_kv, diag_off, BLOCK_M, BLOCK_N + BLOCK_N2,
                                                       CAUSAL)
        q_row = pid_bh * seqlen_q + start_m
        qk_scale = sm_scale_log2 * gl.load(QS) * gl.load(KS)
        v_descale = gl.load(VS)

        q_smem = gl.allocate_shared_memory(gl.float8e4nv, [2, 64, HEAD_DIM], q_desc.layout)
        k_smem = _k_ring(k_desc, STAGES, BLOCK_N, HEAD_DIM, PERM)
        vt_smem = gl.allocate_shared_memory(gl.float8e4nv, [STAGES, HEAD_DIM, BLOCK_N], vt_desc.layout)
        if BLOCK_N2 > 0:  # a key block's second tile (k2_desc, vt2_desc: the host passes k_desc, vt_desc without)
            k2_smem = _k_ring(k2_desc, STAGES, BLOCK_N2, HEAD_DIM, PERM)
            vt2_smem = gl.allocate_shared_memory(gl.float8e4nv, [STAGES, HEAD_DIM, BLOCK_N2], vt2_desc.layout)
        else:
            k2_smem = k_smem
            vt2_smem = vt_smem
        o_smem = gl.allocate_shared_memory(gl.bfloat16, [2, 64, HEAD_DIM], o_desc.layout)
        q_bar, ready, empty, turn = ga._ws_barriers(STAGES)
        ks = (k_smem, k2_smem)
        vts = (vt_smem, vt2_smem)

        wg0: gl.constexpr = 0
        wg1: gl.constexpr = 1
        gl.warp_specialize([
            (_ws8_consumer, (o_desc, o_smem, q_smem, ks, vts, q_bar, ready, empty, turn, start_m, q_row, n_tiles,
                             seqlen_kv, diag_off, qk_scale, v_descale, wg0, HEAD_DIM, BLOCK_N, BLOCK_N2, STAGES,
                             CAUSAL, PERM)),
            (_ws8_consumer, (o_desc, o_smem, q_smem, ks, vts, q_bar, ready, empty, turn, start_m, q_row, n_tiles,
                             seqlen_kv, diag_off, qk_scale, v_descale, wg1, HEAD_DIM, BLOCK_N, BLOCK_N2, STAGES,
                             CAUSAL, PERM)),
            (_ws8_producer, (q_desc, (k_desc, k2_desc), (vt_desc, vt2_desc), q_smem, ks, vts, q_bar, ready, empty,
                             q_row, kv_bh * seqlen_kv, kv_bh * HEAD_DIM, n_tiles, BLOCK_N, BLOCK_N2, STAGES, PERM)),
        ], [4, 1], [CONSUMER_REGS, PRODUCER_REGS])


    # ----------------------------------------------------------------------------------------------------------
    # one warpgroup a block (64 query rows, 4 warps), no producer: two or three blocks share an SM
    # ----------------------------------------------------------------------------------------------------------
    @gluon.jit
    def _wg8_start(q_desc, k_desc, vt_desc, QS, KS, seqlen_q, seqlen_kv, heads, group, diag_off, sm_scale_log2,
                   HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr,
                   PERM: gl.constexpr):
        """A one-warpgroup block's start: its place, the softmax scale with the descales folded in, Q's tile and the
        K/Vᵀ ring in shared memory with their barriers, and Q and the first STAGES key blocks' loads issued."""
        BLOCK_M: gl.constexpr = 64
        pid_bh, kv_bh, start_m, n_tiles = ga._gl_block(heads, group, seqlen_kv, diag_off, BLOCK_M, BLOCK_N, CAUSAL)
        kv_row = kv_bh * seqlen_kv
        vt_row = kv_bh * HEAD_DIM
        qk_scale = sm_scale_log2 * gl.load(QS) * gl.load(KS)
        q_smem = gl.allocate_shared_memory(gl.float8e4nv, [BLOCK_M, HEAD_DIM], q_desc.layout)
        k_smem = _k_ring(k_desc, STAGES, BLOCK_N, HEAD_DIM, PERM)
        vt_smem = gl.allocate_shared_memory(gl.float8e4nv, [STAGES, HEAD_DIM, BLOCK_N], vt_desc.layout)
        q_bar, bars = ga._gl_ring_barriers(STAGES)
        mbarrier.expect(q_bar, q_desc.block_type.nbytes)
        tma.async_copy_global_to_shared(q_desc, [pid_bh * seqlen_q + start_m, 0], q_bar, q_smem)
        for i in gl.static_range(STAGES):  # key block t goes to slot t % STAGES: fill them all
            _load8(k_desc, vt_desc, k_smem, vt_smem, bars, kv_row, vt_row, i, i, i < n_tiles, BLOCK_N, PERM)
        return pid_bh, start_m, n_tiles, kv_row, vt_row, qk_scale, q_smem, k_smem, vt_smem, q_bar, bars

    @gluon.jit
    def _gl_fp8_fwd_kernel(q_desc, k_desc, vt_desc, Out, QS, KS, VS, seqlen_q, seqlen_kv, heads, group, diag_off,
                           sm_scale_log2, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                           CAUSAL: gl.constexpr, PERM: gl.constexpr, CARRY_P8: gl.constexpr = False):
        """One warpgroup's 64 query rows: Q·K_jᵀ and P_{j-1}·V_{j-1} issued together, the softmax of block j
        under P_{j-1}·V_{j-1} (gluon_attention._gl_fwd_kernel's schedule, FP8 operands); O stored from registers
        (no shared tile for it, so three ring slots leave room for two blocks an SM). CARRY_P8: P made the e4m3
        operand at the end of the iteration that computed it and carried by the loop (the schedule before
        2026-11-29, kept as explain's planted register-shuffle: benchmarks/plant_register_shuffle.py)."""
        BLOCK_M: gl.constexpr = 64
        pid_bh, start_m, n_tiles, kv_row, vt_row, qk_scale, q_smem, k_smem, vt_smem, q_bar, bars = _wg8_start(
            q_desc, k_desc, vt_desc, QS, KS, seqlen_q, seqlen_kv, heads, group, diag_off, sm_scale_log2, HEAD_DIM,
            BLOCK_N, STAGES, CAUSAL, PERM)
        s_layout: gl.constexpr = _mma_layout(BLOCK_N)
        o_layout: gl.constexpr = _mma_layout(HEAD_DIM)
        p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=4)
        row_s: gl.constexpr = gl.SliceLayout(1, s_layout)
        row_o: gl.constexpr = gl.SliceLayout(1, o_layout)

        offs_m = start_m + gl.arange(0, BLOCK_M, layout=row_s)
        offs_n0, m_i, l_i, acc, s_zero = _state8(BLOCK_M, BLOCK_N, HEAD_DIM, s_layout, o_layout, PERM)

        mbarrier.wait(q_bar, 0)
        mbarrier.wait(bars.index(0), 0)
        s = warpgroup_mma(q_smem, _k_tile(k_smem, 0, BLOCK_N, HEAD_DIM, PERM), s_zero, use_acc=False, is_async=True)
        s = warpgroup_mma_wait(0, deps=(s,))
        s = ga._gl_mask(s, 0, start_m, offs_m, offs_n0, diag_off, BLOCK_N, CAUSAL)
        p, alpha, l_i, m_i = ga._gl_softmax(s, m_i, l_i, qk_scale)
        if CARRY_P8:
            p_op = _p_operand(p, p_layout, BLOCK_N, PERM)

        for j in range(1, n_tiles):
            slot = j % STAGES
            prev = (j - 1) % STAGES
            if not CARRY_P8:
                p_op = _p_operand(p, p_layout, BLOCK_N, PERM)  # (not carried by the loop: see _ws8_consumer)
            mbarrier.wait(bars.index(slot), (j // STAGES) & 1)
            s = warpgroup_mma(q_smem, _k_tile(k_smem, slot, BLOCK_N, HEAD_DIM, PERM), s_zero, use_acc=False,
                              is_async=True)
            acc = warpgroup_mma(p_op, vt_smem.index(prev).permute((1, 0)), acc, is_async=True)
            s = warpgroup_mma_wait(1, deps=(s,))
            s = ga._gl_mask(s, j, start_m, offs_m, offs_n0, diag_off, BLOCK_N, CAUSAL)
            p, alpha, l_i, m_i = ga._gl_softmax(s, m_i, l_i, qk_scale)
            acc = warpgroup_mma_wait(0, deps=(acc,))
            acc = acc * gl.expand_dims(gl.convert_layout(alpha, row_o), 1)
            if CARRY_P8:
                p_op = _p_operand(p, p_layout, BLOCK_N, PERM)
            gl.thread_barrier()  # every warp is past the P·V that read slot `prev`: refill it
            nxt = j - 1 + STAGES
            _load8(k_desc, vt_desc, k_smem, vt_smem, bars, kv_row, vt_row, nxt, prev, nxt < n_tiles, BLOCK_N, PERM)

        last = (n_tiles - 1) % STAGES
        if not CARRY_P8:
            p_op = _p_operand(p, p_layout, BLOCK_N, PERM)
        acc = warpgroup_mma(p_op, vt_smem.index(last).permute((1, 0)), acc, is_async=True)
        acc = warpgroup_mma_wait(0, deps=(acc,))

        _store8(acc, l_i, VS, Out, pid_bh, seqlen_q, start_m, BLOCK_M, HEAD_DIM, o_layout)
        ga._gl_invalidate(q_bar, bars, STAGES)


    @gluon.jit
    def _ahead_step(j, s, acc, m_i, l_i, q_smem, k_smem, vt_smem, bars, k_desc, vt_desc, kv_row, vt_row, n_tiles,
                    start_m, offs_m, offs_n0, diag_off, qk_scale, s_zero, BLOCK_N: gl.constexpr,
                    HEAD_DIM: gl.constexpr, STAGES: gl.constexpr, CAUSAL: gl.constexpr, PERM: gl.constexpr,
                    CARRY_PV: gl.constexpr):
        """Key block j of :func:`_gl_fp8_ahead_kernel` (j + 1 < n_tiles): S_j in registers on entry (and with
        CARRY_PV P_{j-1}·V_{j-1} possibly running); Q·K_{j+1}ᵀ issued, block j's softmax under it, P_j·V_j issued;
        S_{j+1} out, and P_j·V_j done unless CARRY_PV."""
        o_layout: gl.constexpr = _mma_layout(HEAD_DIM)
        nxt = (j + 1) % STAGES
        mbarrier.wait(bars.index(nxt), ((j + 1) // STAGES) & 1)
        s_next = warpgroup_mma(q_smem, _k_tile(k_smem, nxt, BLOCK_N, HEAD_DIM, PERM), s_zero, use_acc=False,
                               is_async=True)
        s = ga._gl_mask(s, j, start_m, offs_m, offs_n0, diag_off, BLOCK_N, CAUSAL)
        p, alpha, l_i, m_i = ga._gl_softmax(s, m_i, l_i, qk_scale)
        acc = warpgroup_mma_wait(1, deps=(acc,))  # P_{j-1}·V_{j-1} done; Q·K_{j+1}ᵀ may still run
        gl.thread_barrier()  # every warp is past the P·V that read block j-1's slot: refill it
        refill = j - 1 + STAGES
        _load8(k_desc, vt_desc, k_smem, vt_smem, bars, kv_row, vt_row, refill, (j + STAGES - 1) % STAGES,
               (j >= 1) & (refill < n_tiles), BLOCK_N, PERM)
        acc = acc * gl.expand_dims(gl.convert_layout(alpha, gl.SliceLayout(1, o_layout)), 1)
        p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=4)
        acc = warpgroup_mma(_p_operand(p, p_layout, BLOCK_N, PERM), vt_smem.index(j % STAGES).permute((1, 0)), acc,
                            is_async=True)
        if CARRY_PV:
            s_next = warpgroup_mma_wait(1, deps=(s_next,))  # Q·K_{j+1}ᵀ done; P_j·V_j may still run
        else:
            s_next, acc = warpgroup_mma_wait(0, deps=(s_next, acc))
        return s_next, acc, m_i, l_i

    @gluon.jit
    def _gl_fp8_ahead_kernel(q_desc, k_desc, vt_desc, Out, QS, KS, VS, seqlen_q, seqlen_kv, heads, group, diag_off,
                             sm_scale_log2, HEAD_DIM: gl.constexpr, BLOCK_N: gl.constexpr, STAGES: gl.constexpr,
                             CAUSAL: gl.constexpr, PERM: gl.constexpr, CARRY_PV: gl.constexpr = False):
        """:func:`_gl_fp8_fwd_kernel` with the next block's Q·Kᵀ issued before this block's softmax (FlashAttention-3's
        intra-warpgroup overlap, explain's "interleave two tiles"): the softmax of block j runs under Q·K_{j+1}ᵀ, at
        the price of a second score tile in registers; P_j·V_j is waited for at the end of its block. The loop takes
        two blocks a trip, so that the two score tiles trade registers instead of one being copied into the other
        every block (a trip of one block: 64 MOVs a thread a block, 10 % of the instructions, under ncu 350.0
        against 325.7 us). CARRY_PV: P_j·V_j left running into the next block (its softmax under P_j·V_j too): the
        loop then carries a running wgmma's accumulator, and ptxas serializes every wgmma of the kernel (C7514) --
        kept as explain's planted mma-serialized (tests/data/ladder50/plant_serial.ncu-rep.xz, RESULTS.md)."""
        BLOCK_M: gl.constexpr = 64
        pid_bh, start_m, n_tiles, kv_row, vt_row, qk_scale, q_smem, k_smem, vt_smem, q_bar, bars = _wg8_start(
            q_desc, k_desc, vt_desc, QS, KS, seqlen_q, seqlen_kv, heads, group, diag_off, sm_scale_log2, HEAD_DIM,
            BLOCK_N, STAGES, CAUSAL, PERM)
        s_layout: gl.constexpr = _mma_layout(BLOCK_N)
        o_layout: gl.constexpr = _mma_layout(HEAD_DIM)
        p_layout: gl.constexpr = gl.DotOperandLayout(operand_index=0, parent=o_layout, k_width=4)
        offs_m = start_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, s_layout))
        offs_n0, m_i, l_i, acc, s_zero = _state8(BLOCK_M, BLOCK_N, HEAD_DIM, s_layout, o_layout, PERM)

        mbarrier.wait(q_bar, 0)
        mbarrier.wait(bars.index(0), 0)
        s = warpgroup_mma(q_smem, _k_tile(k_smem, 0, BLOCK_N, HEAD_DIM, PERM), s_zero, use_acc=False, is_async=True)
        s = warpgroup_mma_wait(0, deps=(s,))
        if CARRY_PV:
            acc = warpgroup_mma_init(acc)  # the loop carries O as a wgmma accumulator that may still be written
        ctx = (q_smem, k_smem, vt_smem, bars, k_desc, vt_desc, kv_row, vt_row, n_tiles, start_m, offs_m, offs_n0,
               diag_off, qk_scale, s_zero)
        for jj in range(0, (n_tiles - 1) // 2):  # blocks 2jj and 2jj + 1
            for k in gl.static_range(2):
                s, acc, m_i, l_i = _ahead_step(2 * jj + k, s, acc, m_i, l_i, *ctx, BLOCK_N, HEAD_DIM, STAGES,
                                               CAUSAL, PERM, CARRY_PV)
        if (n_tiles - 1) % 2 == 1:
            s, acc, m_i, l_i = _ahead_step(n_tiles - 2, s, acc, m_i, l_i, *ctx, BLOCK_N, HEAD_DIM, STAGES, CAUSAL,
                                           PERM, CARRY_PV)

        last = n_tiles - 1
        s = ga._gl_mask(s, last, start_m, offs_m, offs_n0, diag_off, BLOCK_N, CAUSAL)
        p, alpha, l_i, m_i = ga._gl_softmax(s, m_i, l_i, qk_scale)
        acc = warpgroup_mma_wait(0, deps=(acc,))
        acc = acc * gl.expand_dims(gl.convert_layout(alpha, gl.SliceLayout(1, o_layout)), 1)
        acc = warpgroup_mma(_p_operand(p, p_layout, BLOCK_N, PERM), vt_smem.index(last % STAGES).permute((1, 0)),
                            acc, is_async=True)
        acc = warpgroup_mma_wait(0, deps=(acc,))
        _store8(acc, l_i, VS, Out, pid_bh, seqlen_q, start_m, BLOCK_M, HEAD_DIM, o_layout)
        ga._gl_invalidate(q_bar, bars, STAGES)

#: K's keys loaded permuted within each group of 16 (:func:`k_desc`), so that P·V takes the softmax's registers
#: as they are: without it P crosses threads (16 shuffles and 16 selects a key block for each thread)
PERMUTE_K = True


@contextmanager
def permute_k(on: bool | None) -> Iterator[None]:
    """:data:`PERMUTE_K` set to `on` inside the block (None: left as it is), restored after: the scripts that time
    the FP8 Gluon kernels with K's keys in their plain order."""
    global PERMUTE_K
    saved = PERMUTE_K
    PERMUTE_K = saved if on is None else on
    try:
        yield
    finally:
        PERMUTE_K = saved

#: K/V ring slots per head dim (shared memory: Q 16 KiB, O 32 KiB, each slot 2 x BLOCK_N x dim bytes)
STAGES = {64: 4, 128: 4}

#: key blocks of the warp-specialized kernel that are two tiles (TMA boxes are powers of two): keys -> (first tile,
#: second tile). FlashAttention-3 takes 224-key blocks for FP8 at head dim 128: more MMA a ping-pong turn. Measured
#: 2-3 % slower than 128-key blocks (ladder step 13); offline sm_90 compile: no spills without the mask, 120 bytes
#: causal (d128). 256 keys (two 128-key tiles) spill 100-340 bytes at 232-240 registers: not a choice
SPLIT = {192: (128, 64)}

#: shared memory a Hopper block may take (227 KiB)
SHARED_BYTES = 227 * 1024


def unsupported(q: Any, k: Any, v: Any, causal: bool, diag_off: int, sm_scale: float,
                block_n: int = 128, block_m: int = 128) -> str | None:
    """Why the FP8 Gluon forward cannot run these inputs here (None: it can); V must already be K-major."""
    import torch

    if IMPORT_ERROR is not None:
        return f"no Gluon in this Triton ({IMPORT_ERROR})"
    if not ga.hopper(q.device):
        return "the FP8 Gluon forward needs a Hopper GPU (sm_90: warpgroup MMA)"
    e4m3 = getattr(torch, "float8_e4m3fn", None)
    if not (q.dtype == k.dtype == v.dtype == e4m3):
        return "the FP8 Gluon forward takes float8_e4m3fn inputs"
    d = q.shape[-1]
    if d not in STAGES or k.shape[-1] != d or v.shape[-1] != d:
        return f"the FP8 Gluon forward takes head dim {' or '.join(map(str, STAGES))}"
    sp = v.stride(-1)  # V^T's row stride: keys, padded
    if (not (q.is_contiguous() and k.is_contiguous()) or v.stride(-2) != 1 or sp % 16
            or v.stride(1) != d * sp or v.stride(0) != v.shape[1] * d * sp):
        return "the FP8 Gluon forward takes contiguous Q and K and a K-major V (triton_attention.prepare)"
    if (q.data_ptr() | k.data_ptr() | v.data_ptr()) % 16:
        return "the FP8 Gluon forward's TMA loads take 16-byte aligned inputs"
    if block_n in SPLIT and block_m != 128:
        return f"{block_n}-key blocks are the warp-specialized FP8 kernel's (-ws), not one warpgroup's"
    tile = SPLIT[block_n][1] if block_n in SPLIT else block_n  # a split block's last tile is masked past the end
    if block_n not in (64, 128, *SPLIT) or q.shape[2] % block_m or k.shape[2] % tile:
        return f"the FP8 Gluon forward takes sequence lengths that are multiples of its tiles ({block_m}, {tile})"
    if sm_scale <= 0:
        return "the FP8 Gluon forward takes a positive softmax scale"
    if causal and (diag_off < 0 or diag_off % 128):
        return "the FP8 Gluon forward takes a causal diagonal offset >= 0 that is a multiple of 128"
    return None


def forward_ws(q: Any, k: Any, v: Any, descales: tuple[Any, ...], causal: bool, diag_off: int,
               sm_scale_log2: float, block_n: int = 128, stages: int | None = None, perm: bool | None = None) -> Any:
    """The warp-specialized FP8 forward for inputs :func:`unsupported` accepted: bf16 output (batch, heads, seq, dim).
    `descales` are one-element fp32 tensors on q's device (read in the kernel: the host never syncs)."""
    import torch

    perm = PERMUTE_K if perm is None else perm
    batch, heads, seqlen_q, d = q.shape
    kv_heads, seqlen_kv = k.shape[1], k.shape[2]
    stages = stages or STAGES[d]
    if block_n in SPLIT and not (perm and stages * 2 * block_n * d + 6 * 64 * d <= SHARED_BYTES):
        raise ValueError(f"{block_n}-key FP8 blocks take K permuted and at most "
                         f"{(SHARED_BYTES - 6 * 64 * d) // (2 * block_n * d)} ring slots at head dim {d}")
    o = torch.empty(q.shape, device=q.device, dtype=torch.bfloat16)
    vt = v.transpose(-1, -2)  # (batch, kv_heads, dim, seqlen) over storage whose rows are padded to 16 keys
    vt2 = torch.as_strided(vt, (batch * kv_heads * d, seqlen_kv), (vt.stride(-2), 1))

    grid = (seqlen_q // 128, batch * heads)
    f8 = gl.float8e4nv
    desc = ga.tma_desc
    bn, bn2 = SPLIT.get(block_n, (block_n, 0))
    kd, vd = k_desc(k, bn, perm), desc(vt2, [d, bn], f8)
    kd2, vd2 = (k_desc(k, bn2, perm), desc(vt2, [d, bn2], f8)) if bn2 else (kd, vd)
    launch(_gl_ws_fp8_kernel, grid, ga.rows_desc(q, 64, f8), kd, vd, kd2, vd2, ga.rows_desc(o, 64, gl.bfloat16),
           *descales, seqlen_q, seqlen_kv, heads, heads // kv_heads, diag_off, sm_scale_log2,
           HEAD_DIM=d, BLOCK_N=bn, STAGES=stages, CAUSAL=causal,
           CONSUMER_REGS=ga.WS_REGS[0], PRODUCER_REGS=ga.WS_REGS[1], PERM=perm, BLOCK_N2=bn2, num_warps=4)
    return o


def k_desc(k: Any, block_n: int, perm: bool) -> Any:
    """K's TMA descriptor: (rows, dim) tiles of `block_n` rows, or with `perm` the 5-D view (rows / 16, 2, 4, 2,
    dim) whose tile lands in shared memory with row 16h + 8b + 2q + j holding key 16h + 4q + 2b + j: the order in
    which the Q·Kᵀ accumulator's registers are already P·V's e4m3 operand (:data:`PERMUTE_K`)."""
    d = k.shape[-1]
    rows = k.view(-1, d)
    if not perm:
        return ga.tma_desc(rows, [block_n, d], gl.float8e4nv)
    block = [block_n // 16, 2, 4, 2, d]
    layout = ga.shared_layout(tuple(block), gl.float8e4nv)
    return descriptor(TensorDescriptor, rows, [rows.shape[0] // 16, 2, 4, 2, d], [16 * d, 2 * d, 4 * d, d, 1], block,
                      layout)


def forward(q: Any, k: Any, v: Any, descales: tuple[Any, ...], causal: bool, diag_off: int, sm_scale_log2: float,
            block_n: int = 128, stages: int = 3, perm: bool | None = None, carry_p8: bool = False,
            ahead: bool = False, carry_pv: bool = False) -> Any:
    """The one-warpgroup FP8 forward (64-row blocks, 4 warps) for inputs :func:`unsupported` accepted with
    ``block_m=64``: bf16 output (batch, heads, seq, dim). `ahead`: the next block's Q·Kᵀ issued before this block's
    softmax (:func:`_gl_fp8_ahead_kernel`; `carry_pv`: its planted serialization). `carry_p8`: the planted
    register-shuffle of :func:`_gl_fp8_fwd_kernel`."""
    import torch

    perm = PERMUTE_K if perm is None else perm
    batch, heads, seqlen_q, d = q.shape
    kv_heads, seqlen_kv = k.shape[1], k.shape[2]
    o = torch.empty(q.shape, device=q.device, dtype=torch.bfloat16)
    vt = v.transpose(-1, -2)
    vt2 = torch.as_strided(vt, (batch * kv_heads * d, seqlen_kv), (vt.stride(-2), 1))
    f8 = gl.float8e4nv
    kernel, more = ((_gl_fp8_ahead_kernel, {"CARRY_PV": carry_pv}) if ahead else
                    (_gl_fp8_fwd_kernel, {"CARRY_P8": carry_p8}))
    launch(
        kernel, (seqlen_q // 64, batch * heads),
        ga.rows_desc(q, 64, f8), k_desc(k, block_n, perm), ga.tma_desc(vt2, [d, block_n], f8), o,
        *descales, seqlen_q, seqlen_kv, heads, heads // kv_heads, diag_off, sm_scale_log2, HEAD_DIM=d,
        BLOCK_N=block_n, STAGES=stages, CAUSAL=causal, PERM=perm, num_warps=4, **more)
    return o
