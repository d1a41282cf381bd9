"""The FP8 (e4m3) forward of profctl's FlashAttention-2 in Triton: :func:`_fwd_fp8_kernel` and its key loops, apart
from the 16-bit kernels (workloads/kernels/triton_kernels.py), whose tile helpers it calls through that module
(``tk._load_tile``: Triton resolves a module's globals in a kernel). FlashAttention-3's convention: per-tensor
descales, P rounded to e4m3 for P @ V, V read K-major (workloads/kernels/triton_attention.py has the design).

Imports without Triton (``triton`` is then None and no kernel is defined), as triton_kernels does.
"""

from __future__ import annotations

from . import triton_kernels as tk
from .triton_kernels import INTERPRET, tl, triton

if triton is not None:

    #: Triton 3.9's interpreter casts fp32 to e4m3 by truncating the mantissa (and mishandles the carry of its
    #: round-to-nearest mode); there (only) P is first rounded onto the e4m3 grid in fp32, to nearest with ties to
    #: even, so that the cast is exact and the CPU tests see the GPU's rounding (cvt.rn.satfinite).
    _ROUND_E4M3_FIRST = tl.constexpr(INTERPRET)

    @triton.jit
    def _to_e4m3(p):
        """Non-negative fp32 P (at most 1) to e4m3, rounded to nearest, ties to even."""
        if _ROUND_E4M3_FIRST:
            bits = p.to(tl.int32, bitcast=True)
            bits = (bits + 0x7FFFF + ((bits >> 20) & 1)) & -1048576  # keep 3 of fp32's 23 mantissa bits, RTNE
            normal = bits.to(tl.float32, bitcast=True)
            subnormal = (p + 16384.0) - 16384.0  # below 2^-6: multiples of 2^-9 (fp32's step at 2^14)
            p = tl.where(p < 0.015625, subnormal, normal)
        return p.to(tl.float8e4nv)

    @triton.jit
    def _load_vt(desc, off_b, off_h, start, vt_base, stride_vn, stride_vd, offs_n, seqlen_kv, offs_d,
                 HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_N: tl.constexpr, CHECK_COLS: tl.constexpr,
                 TMA: tl.constexpr):
        """A [BLOCK_D, BLOCK_N] tile of V^T (keys along the columns): FP8 wgmma wants the B operand of P @ V
        K-major, i.e. V stored with the keys contiguous. The TMA descriptor is over V^T as (batch, head, dim,
        seq)."""
        if TMA:
            x = desc.load([off_b, off_h, 0, start]).reshape(BLOCK_D, BLOCK_N)
        else:
            ptrs = vt_base + offs_d[:, None] * stride_vd + offs_n[None, :] * stride_vn
            if CHECK_COLS:
                if BLOCK_D == HEAD_DIM:
                    x = tl.load(ptrs, mask=offs_n[None, :] < seqlen_kv, other=0.0)
                else:
                    x = tl.load(ptrs, mask=(offs_n[None, :] < seqlen_kv) & (offs_d[:, None] < HEAD_DIM), other=0.0)
            else:
                if BLOCK_D == HEAD_DIM:  # noqa: SIM108 (constexpr branches, not a run-time select)
                    x = tl.load(ptrs)
                else:
                    x = tl.load(ptrs, mask=offs_d[:, None] < HEAD_DIM, other=0.0)
        return x

    @triton.jit
    def _fp8_block(acc, l_i, m_i, s, vt, offs_m, offs_n, seqlen_kv, diag_off, qk_scale,
                   MASKED: tl.constexpr, CAUSAL: tl.constexpr, SCALE_POS: tl.constexpr, EMU: tl.constexpr = 0):
        """One key block of the FP8 online softmax: S (fp32, descales folded into qk_scale) to P, P rounded to
        e4m3 for P @ V against the V^T tile; the row sums take the unrounded P."""
        p, acc, l_i, m_new = tk._softmax_step(s, acc, l_i, m_i, offs_m, offs_n, seqlen_kv, diag_off, qk_scale,
                                              MASKED, CAUSAL, SCALE_POS, EMU=EMU)
        acc = tl.dot(_to_e4m3(p), tl.trans(vt), acc)
        return acc, l_i, m_new

    @triton.jit
    def _fwd_fp8_key_loop(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
                          KD, VD, b32, kh32,
                          lo, hi, offs_m, offs_d, seqlen_kv, diag_off, qk_scale,
                          BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
                          MASKED: tl.constexpr, CAUSAL: tl.constexpr, SCALE_POS: tl.constexpr, TMA: tl.constexpr,
                          EMU: tl.constexpr = 0):
        """:func:`_fwd_key_loop` with e4m3 operands (:func:`_fp8_block`) over key blocks [lo, hi)."""
        offs_n0 = tl.arange(0, BLOCK_N)
        for start_n in range(lo, hi, BLOCK_N):
            start_n = tl.multiple_of(start_n, BLOCK_N)
            offs_n = start_n + offs_n0
            k = tk._load_tile(KD, b32, kh32, start_n,
                              k_base + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd,
                              offs_n, seqlen_kv, offs_d, BLOCK_N, HEAD_DIM, BLOCK_D, MASKED, TMA)
            vt = _load_vt(VD, b32, kh32, start_n, v_base, stride_vn, stride_vd, offs_n, seqlen_kv, offs_d,
                          HEAD_DIM, BLOCK_D, BLOCK_N, MASKED, TMA)
            s = tl.dot(q, tl.trans(k))
            acc, l_i, m_i = _fp8_block(acc, l_i, m_i, s, vt, offs_m, offs_n, seqlen_kv, diag_off, qk_scale,
                                       MASKED, CAUSAL, SCALE_POS, EMU)
        return acc, l_i, m_i

    @triton.jit
    def _fwd_fp8_key_loop_pipe(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
                               KD, VD, b32, kh32, lo, hi, offs_m, offs_d, seqlen_kv, diag_off, qk_scale,
                               BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
                               CAUSAL: tl.constexpr, SCALE_POS: tl.constexpr, TMA: tl.constexpr,
                               EMU: tl.constexpr = 0):
        """The unmasked key blocks [lo, hi) software-pipelined by hand: Q K^T of the next block is issued before
        the softmax of this one, so its (asynchronous) wgmma runs under that softmax's exponentials (FA3's
        intra-warpgroup overlap). With FP8 the two GEMMs of a block take about as long as its exponentials, so
        that overlap is where the time is. Costs a second S tile in registers."""
        offs_n0 = tl.arange(0, BLOCK_N)
        if hi > lo:
            offs_n = lo + offs_n0
            k = tk._load_tile(KD, b32, kh32, lo, k_base + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd,
                              offs_n, seqlen_kv, offs_d, BLOCK_N, HEAD_DIM, BLOCK_D, False, TMA)
            s = tl.dot(q, tl.trans(k))
            for start_n in range(lo, hi - BLOCK_N, BLOCK_N):
                start_n = tl.multiple_of(start_n, BLOCK_N)
                offs_n = start_n + offs_n0
                offs_next = offs_n + BLOCK_N
                vt = _load_vt(VD, b32, kh32, start_n, v_base, stride_vn, stride_vd, offs_n, seqlen_kv, offs_d,
                              HEAD_DIM, BLOCK_D, BLOCK_N, False, TMA)
                k = tk._load_tile(KD, b32, kh32, start_n + BLOCK_N, k_base + offs_next[:, None] * stride_kn
                                  + offs_d[None, :] * stride_kd, offs_next, seqlen_kv, offs_d, BLOCK_N, HEAD_DIM,
                                  BLOCK_D, False, TMA)
                s_next = tl.dot(q, tl.trans(k))
                acc, l_i, m_i = _fp8_block(acc, l_i, m_i, s, vt, offs_m, offs_n, seqlen_kv, diag_off, qk_scale,
                                           False, CAUSAL, SCALE_POS, EMU)
                s = s_next
            last = hi - BLOCK_N
            offs_n = last + offs_n0
            vt = _load_vt(VD, b32, kh32, last, v_base, stride_vn, stride_vd, offs_n, seqlen_kv, offs_d,
                          HEAD_DIM, BLOCK_D, BLOCK_N, False, TMA)
            acc, l_i, m_i = _fp8_block(acc, l_i, m_i, s, vt, offs_m, offs_n, seqlen_kv, diag_off, qk_scale,
                                       False, CAUSAL, SCALE_POS, EMU)
        return acc, l_i, m_i

    @triton.jit
    def _fwd_fp8_kernel(Q, K, V, Out, QS, KS, VS, QD, KD, VD,
                        stride_qb, stride_qh, stride_qm, stride_qd,
                        stride_kb, stride_kh, stride_kn, stride_kd,
                        stride_vb, stride_vh, stride_vn, stride_vd,
                        stride_ob, stride_oh, stride_om, stride_od,
                        heads, group, seqlen_q, seqlen_kv, diag_off, sm_scale_log2,
                        HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                        CAUSAL: tl.constexpr, REVERSE: tl.constexpr, SCALE_POS: tl.constexpr, TMA: tl.constexpr,
                        PIPE: tl.constexpr, EMU: tl.constexpr = 0):
        """The FP8 (e4m3) forward: :func:`_fwd_kernel`'s structure, with FlashAttention-3's per-tensor descale
        factors (QS, KS, VS: one fp32 each, read here so the host never syncs): q_descale * k_descale is folded
        into the softmax scale, v_descale multiplies the accumulator once at the end. V is read as V^T (VD is a
        descriptor over V^T; the strides are V's own). PIPE: the unmasked blocks go through
        :func:`_fwd_fp8_key_loop_pipe`. EMU: the unmasked blocks' exps in part (1) or all (2) on the FMA pipe
        (``tk._exp2``). No log-sum-exp is written: there is no FP8 backward."""
        if REVERSE:  # noqa: SIM108
            pid_m = tl.num_programs(0) - 1 - tl.program_id(0)
        else:
            pid_m = tl.program_id(0)
        pid_bh = tl.program_id(1)
        b32 = pid_bh // heads
        h32 = pid_bh % heads
        kh32 = h32 // group
        off_b = b32.to(tl.int64)
        off_kh = kh32.to(tl.int64)
        off_h = h32.to(tl.int64)
        start_m = pid_m * BLOCK_M
        offs_m = start_m + tl.arange(0, BLOCK_M)
        offs_d = tl.arange(0, BLOCK_D)
        qk_scale = sm_scale_log2 * tl.load(QS) * tl.load(KS)

        q_base = Q + off_b * stride_qb + off_h * stride_qh
        k_base = K + off_b * stride_kb + off_kh * stride_kh
        v_base = V + off_b * stride_vb + off_kh * stride_vh
        q = tk._load_tile(QD, b32, h32, start_m, q_base + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd,
                          offs_m, seqlen_q, offs_d, BLOCK_M, HEAD_DIM, BLOCK_D, True, TMA)
        if CAUSAL:
            hi = tl.maximum(tl.minimum(start_m + BLOCK_M + diag_off, seqlen_kv), 0)
            full = tl.maximum(tl.minimum(start_m + diag_off + 1, seqlen_kv), 0)
            full = (full // BLOCK_N) * BLOCK_N
        else:
            hi = seqlen_kv
            full = (seqlen_kv // BLOCK_N) * BLOCK_N

        m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - 1.0e30
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
        acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
        if PIPE:
            acc, l_i, m_i = _fwd_fp8_key_loop_pipe(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn,
                                                   stride_vd, KD, VD, b32, kh32, 0, full, offs_m, offs_d, seqlen_kv,
                                                   diag_off, qk_scale, BLOCK_N, HEAD_DIM, BLOCK_D, CAUSAL, SCALE_POS,
                                                   TMA, EMU)
        else:
            acc, l_i, m_i = _fwd_fp8_key_loop(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn,
                                              stride_vd, KD, VD, b32, kh32, 0, full, offs_m, offs_d, seqlen_kv,
                                              diag_off, qk_scale, BLOCK_N, HEAD_DIM, BLOCK_D, False, CAUSAL,
                                              SCALE_POS, TMA, EMU)
        acc, l_i, m_i = _fwd_fp8_key_loop(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn,
                                          stride_vd, KD, VD, b32, kh32, full, hi, offs_m, offs_d, seqlen_kv, diag_off,
                                          qk_scale, BLOCK_N, HEAD_DIM, BLOCK_D, True, CAUSAL, SCALE_POS, TMA)
        seen = l_i > 0.0
        o = acc * (tl.load(VS) / tl.where(seen, l_i, 1.0))[:, None]
        o_base = Out + off_b * stride_ob + off_h * stride_oh
        tk._store_rows(o_base + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od, o.to(Out.dtype.element_ty),
                       offs_m, seqlen_q, offs_d, HEAD_DIM, BLOCK_D)
