"""The Triton kernels of profctl's FlashAttention-2 (workloads/kernels/triton_attention.py has the design, the launch
configurations, the host side and the autograd wrapper): the forward, the backward's delta preprocess, dK/dV and
dQ, and the tile helpers they share with the FP8 (e4m3) forward (workloads/kernels/triton_fp8_kernels.py). The
kernels keep their names (``_fwd_kernel``, ...): profilers show them.

This module imports without Triton (``triton`` is then None and no kernel is defined; :data:`IMPORT_ERROR` says
why). :data:`INTERPRET` is decided once, at import, as Triton decides it: the kernels are built for Triton's CPU
interpreter when ``TRITON_INTERPRET=1`` is set before this module is first imported.
"""

from __future__ import annotations

import os
from typing import Any

try:  # the module must import without Triton; calling the attention then raises TritonAttentionUnavailable
    import triton
    import triton.language as tl

    IMPORT_ERROR: str | None = None
except Exception as _e:  # ImportError, or a broken install raising at import
    triton = None
    tl = None
    IMPORT_ERROR = f"{type(_e).__name__}: {_e}"

#: Whether the kernels below were built for Triton's CPU interpreter (decided once, at import, like Triton).
INTERPRET: bool = os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "yes", "on", "y")

#: Proton's kernel language (``triton.profiler.language``) once :func:`enable_scopes` ran, else None. The forward
#: names its steps with Proton scopes only when launched with ``SCOPES=True`` (``profctl proton --backend
#: triton``); with the default ``SCOPES=False`` the scope calls are constexpr-pruned before any IR is made, so the
#: kernel profctl benchmarks is the same code as without them (checked: the same PTX, offline sm_90 compile).
pl: Any = None


def enable_scopes() -> None:
    """Make the ``SCOPES=True`` forward compile: import Proton's kernel language and let it instrument Triton
    kernels (``pl.enable_semantic("triton")``), before the first scoped launch. Raises ImportError (or what a
    broken Proton raises) when Proton is not there."""
    global pl
    import triton.profiler.language as proton_language

    proton_language.enable_semantic("triton")
    pl = proton_language


if triton is not None:

    #: Triton 3.9's interpreter multiplies bf16 operands as their raw uint16 bits in tl.dot; there (only) the
    #: operands are widened to fp32 first, which is exact, so the CPU tests still check the bf16 rounding of P.
    _WIDEN_BF16_DOT = tl.constexpr(INTERPRET)

    @triton.jit
    def _mma(a, b, acc, DOT_PREC: tl.constexpr):
        """a @ b (+ acc) with fp32 accumulation."""
        if _WIDEN_BF16_DOT:  # noqa: SIM102 (Triton needs constexpr conditions one at a time)
            if a.dtype == tl.bfloat16:
                return tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")
        return tl.dot(a, b, acc, input_precision=DOT_PREC)

    @triton.jit
    def _scope_in(NAME: tl.constexpr, ON: tl.constexpr):
        """Open Proton scope NAME when ON (a constexpr: off, nothing is emitted)."""
        if ON:
            pl.enter_scope(NAME)

    @triton.jit
    def _scope_out(NAME: tl.constexpr, ON: tl.constexpr):
        """Close Proton scope NAME when ON."""
        if ON:
            pl.exit_scope(NAME)

    @triton.jit
    def _load_rows(ptrs, offs_r, n_rows, offs_d, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
                   CHECK_ROWS: tl.constexpr):
        """Load a [rows, BLOCK_D] tile; bounds checks only where asked (tails) or when D is padded."""
        if CHECK_ROWS:
            if BLOCK_D == HEAD_DIM:
                x = tl.load(ptrs, mask=offs_r[:, None] < n_rows, other=0.0)
            else:
                x = tl.load(ptrs, mask=(offs_r[:, None] < n_rows) & (offs_d[None, :] < HEAD_DIM), other=0.0)
        else:
            if BLOCK_D == HEAD_DIM:  # noqa: SIM108 (constexpr branches, not a run-time select)
                x = tl.load(ptrs)
            else:
                x = tl.load(ptrs, mask=offs_d[None, :] < HEAD_DIM, other=0.0)
        return x

    @triton.jit
    def _load_tile(desc, off_b, off_h, start, ptrs, offs_r, n_rows, offs_d, ROWS: tl.constexpr,
                   HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, CHECK_ROWS: tl.constexpr, TMA: tl.constexpr):
        """A [ROWS, BLOCK_D] tile of one (batch, head): through a 4-D TMA descriptor (the copy engine zero-fills
        rows past the end: no masks, no address registers), or through pointers."""
        if TMA:
            x = desc.load([off_b, off_h, start, 0]).reshape(ROWS, BLOCK_D)
        else:
            x = _load_rows(ptrs, offs_r, n_rows, offs_d, HEAD_DIM, BLOCK_D, CHECK_ROWS)
        return x

    @triton.jit
    def _kv_tile(desc, b32, kh32, start, base, stride_n, stride_d, offs_n, offs_d, seqlen_kv, BLOCK_N: tl.constexpr,
                 HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, CHECK_ROWS: tl.constexpr, TMA: tl.constexpr,
                 NAME: tl.constexpr, SCOPES: tl.constexpr):
        """A K or V tile of the forward's key loops (rows offs_n, from key `start`), in Proton scope NAME."""
        _scope_in(NAME, SCOPES)
        x = _load_tile(desc, b32, kh32, start, base + offs_n[:, None] * stride_n + offs_d[None, :] * stride_d,
                       offs_n, seqlen_kv, offs_d, BLOCK_N, HEAD_DIM, BLOCK_D, CHECK_ROWS, TMA)
        _scope_out(NAME, SCOPES)
        return x

    @triton.jit
    def _store_rows(ptrs, x, offs_r, n_rows, offs_d, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr):
        if BLOCK_D == HEAD_DIM:
            tl.store(ptrs, x, mask=offs_r[:, None] < n_rows)
        else:
            tl.store(ptrs, x, mask=(offs_r[:, None] < n_rows) & (offs_d[None, :] < HEAD_DIM))

    @triton.jit
    def _exp2_poly(x):
        """2^x for x <= 0 on the FMA and integer pipes, not the SFU (FlashAttention-4's trick): x = n + f with n
        rounded to nearest by adding 1.5 * 2^23 (an FADD, not an F2I or FRND on the XU pipe), 2^f for f in
        [-0.5, 0.5] by a cubic (relative error 7.5e-5: below bf16's and e4m3's rounding of P), and n added to the
        exponent bits. Below 2^-125 (P that rounds to 0 in e4m3 and bf16 sums) the result is the denormal floor."""
        x = tl.maximum(x, -125.0)
        j = x + 12582912.0
        f = x - (j - 12582912.0)
        p = ((0.05517165 * f + 0.24261112) * f + 0.69326099) * f + 0.99992807
        bits = p.to(tl.int32, bitcast=True) + (j.to(tl.int32, bitcast=True) << 23)
        return bits.to(tl.float32, bitcast=True)

    @triton.jit
    def _exp2(x, EMU: tl.constexpr):
        """2^x of a [rows, keys] tile: EMU 0 all on the SFU (MUFU.EX2), 2 all by :func:`_exp2_poly`, 1 every other
        key's by the polynomial, so the SFU and the FMA pipe share the exps (FA4 splits them the same way)."""
        if EMU == 0:
            y = tl.exp2(x)
        elif EMU == 2:
            y = _exp2_poly(x)
        else:
            a, b = tl.split(tl.reshape(x, [x.shape[0], x.shape[1] // 2, 2]))
            y = tl.reshape(tl.join(tl.exp2(a), _exp2_poly(b)), [x.shape[0], x.shape[1]])
        return y

    @triton.jit
    def _softmax_step(s, acc, l_i, m_i, offs_m, offs_n, seqlen_kv, diag_off, qk_scale,
                      MASKED: tl.constexpr, CAUSAL: tl.constexpr, SCALE_POS: tl.constexpr,
                      WINDOW: tl.constexpr = 0, EMU: tl.constexpr = 0):
        """One online-softmax step of every forward (bf16 and e4m3, plain and pipelined): scores `s` of a key block
        -> (P, acc and l rescaled to the new running max, that max). MASKED: the key-tail bound and, if CAUSAL,
        the causal mask (offs_m/offs_n/seqlen_kv/diag_off are read only then). SCALE_POS: a positive scale, taken
        after the row max so the subtraction fuses into one FMA. WINDOW > 0 (MASKED only): a sliding window, each row
        seeing the WINDOW keys up to its diagonal (and the WINDOW - 1 after it without CAUSAL). EMU: the unmasked
        blocks' exps in part or all on the FMA pipe (:func:`_exp2`)."""
        if MASKED:
            keep = offs_n[None, :] < seqlen_kv
            if CAUSAL:
                keep = keep & (offs_n[None, :] <= offs_m[:, None] + diag_off)
            if WINDOW > 0:
                keep = keep & (offs_n[None, :] > offs_m[:, None] + diag_off - WINDOW)
                if not CAUSAL:
                    keep = keep & (offs_n[None, :] < offs_m[:, None] + diag_off + WINDOW)
            s = tl.where(keep, s * qk_scale, float("-inf"))
            m_new = tl.maximum(m_i, tl.max(s, 1))
            p = tl.exp2(s - m_new[:, None])
        elif SCALE_POS:
            m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
            p = _exp2(s * qk_scale - m_new[:, None], EMU)
        else:
            s = s * qk_scale
            m_new = tl.maximum(m_i, tl.max(s, 1))
            p = _exp2(s - m_new[:, None], EMU)
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        return p, acc, l_i, m_new

    @triton.jit
    def _fwd_key_loop(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
                      KD, VD, b32, kh32,
                      lo, hi, offs_m, offs_d, seqlen_kv, diag_off, qk_scale,
                      BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
                      MASKED: tl.constexpr, CAUSAL: tl.constexpr, SCALE_POS: tl.constexpr,
                      DOT_PREC: tl.constexpr, TMA: tl.constexpr, SCOPES: tl.constexpr = False,
                      LAZY: tl.constexpr = False, WINDOW: tl.constexpr = 0, WS: tl.constexpr = False,
                      EMU: tl.constexpr = 0):
        """Online softmax over key blocks [lo, hi). MASKED: apply the causal mask, WINDOW's and the key-tail bound.
        SCOPES: each step in a Proton scope (load_k, load_v, qk, softmax, pv). LAZY (unmasked blocks, a
        positive scale): rescale only when a row's max grew by more than 2^8. WS: Triton's automatic warp
        specialization of the loop (producer warps for the loads). EMU: exps on the FMA pipe (:func:`_exp2`)."""
        if WS:
            for start_n in tl.range(lo, hi, BLOCK_N, warp_specialize=True):
                acc, l_i, m_i = _fwd_key_step(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn,
                                              stride_vd, KD, VD, b32, kh32, start_n, offs_m, offs_d, seqlen_kv,
                                              diag_off, qk_scale, BLOCK_N, HEAD_DIM, BLOCK_D, MASKED, CAUSAL,
                                              SCALE_POS, DOT_PREC, TMA, SCOPES, LAZY, WINDOW, EMU)
        else:
            for start_n in range(lo, hi, BLOCK_N):
                acc, l_i, m_i = _fwd_key_step(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn,
                                              stride_vd, KD, VD, b32, kh32, start_n, offs_m, offs_d, seqlen_kv,
                                              diag_off, qk_scale, BLOCK_N, HEAD_DIM, BLOCK_D, MASKED, CAUSAL,
                                              SCALE_POS, DOT_PREC, TMA, SCOPES, LAZY, WINDOW, EMU)
        return acc, l_i, m_i

    @triton.jit
    def _fwd_key_step(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
                      KD, VD, b32, kh32, start_n, offs_m, offs_d, seqlen_kv, diag_off, qk_scale,
                      BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
                      MASKED: tl.constexpr, CAUSAL: tl.constexpr, SCALE_POS: tl.constexpr,
                      DOT_PREC: tl.constexpr, TMA: tl.constexpr, SCOPES: tl.constexpr, LAZY: tl.constexpr,
                      WINDOW: tl.constexpr, EMU: tl.constexpr = 0):
        """One key block of :func:`_fwd_key_loop`."""
        offs_n0 = tl.arange(0, BLOCK_N)
        start_n = tl.multiple_of(start_n, BLOCK_N)
        offs_n = start_n + offs_n0
        k = _kv_tile(KD, b32, kh32, start_n, k_base, stride_kn, stride_kd, offs_n, offs_d, seqlen_kv,
                     BLOCK_N, HEAD_DIM, BLOCK_D, MASKED, TMA, "load_k", SCOPES)
        v = _kv_tile(VD, b32, kh32, start_n, v_base, stride_vn, stride_vd, offs_n, offs_d, seqlen_kv,
                     BLOCK_N, HEAD_DIM, BLOCK_D, MASKED, TMA, "load_v", SCOPES)
        _scope_in("qk", SCOPES)
        s = _mma(q, tl.trans(k), None, DOT_PREC)
        _scope_out("qk", SCOPES)
        _scope_in("softmax", SCOPES)
        if LAZY:
            # FlashAttention-4's conditional rescaling: the running max moves (and acc, l are rescaled) only
            # when some row's max grew by more than 2^8 in this block; otherwise P is taken against the
            # stale max (values up to 256: exact in the final normalization, which uses the same max), and
            # the softmax does not touch acc, so the previous block's P @ V need not finish before it.
            m_new = tl.maximum(m_i, tl.max(s, 1) * qk_scale)
            if tl.max(m_new - m_i, 0) > 8.0:
                alpha = tl.exp2(m_i - m_new)
                acc = acc * alpha[:, None]
                l_i = l_i * alpha
                m_i = m_new
            p = tl.exp2(s * qk_scale - m_i[:, None])
            l_i = l_i + tl.sum(p, 1)
            m_new = m_i
        else:
            p, acc, l_i, m_new = _softmax_step(s, acc, l_i, m_i, offs_m, offs_n, seqlen_kv, diag_off, qk_scale,
                                               MASKED, CAUSAL, SCALE_POS, WINDOW=WINDOW, EMU=EMU)
        _scope_out("softmax", SCOPES)
        _scope_in("pv", SCOPES)
        acc = _mma(p.to(v.dtype), v, acc, DOT_PREC)
        _scope_out("pv", SCOPES)
        m_i = m_new
        return acc, l_i, m_i

    @triton.jit
    def _softmax_pv(s, v, acc, l_i, m_i, qk_scale, SCALE_POS: tl.constexpr, DOT_PREC: tl.constexpr,
                    SCOPES: tl.constexpr = False):
        """One unmasked online-softmax step: scores `s` of a key block -> rescaled `acc` + P @ V, l, m."""
        _scope_in("softmax", SCOPES)
        p, acc, l_i, m_new = _softmax_step(s, acc, l_i, m_i, 0, 0, 0, 0, qk_scale, False, False, SCALE_POS)
        _scope_out("softmax", SCOPES)
        _scope_in("pv", SCOPES)
        acc = _mma(p.to(v.dtype), v, acc, DOT_PREC)
        _scope_out("pv", SCOPES)
        return acc, l_i, m_new

    @triton.jit
    def _fwd_key_loop_pipelined(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
                                KD, VD, b32, kh32, lo, hi, offs_d, seqlen_kv, qk_scale,
                                BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
                                SCALE_POS: tl.constexpr, DOT_PREC: tl.constexpr, TMA: tl.constexpr,
                                SCOPES: tl.constexpr = False):
        """The unmasked key blocks [lo, hi) with Q @ K^T of the next block issued before the softmax of this one,
        so the tensor cores work on it while the softmax runs (FlashAttention-3's intra-warpgroup overlap):
        `profctl explain` found the plain loop's warps waiting on each wgmma result (WARPGROUP.DEPBAR) at tl.dot."""
        offs_n0 = tl.arange(0, BLOCK_N)
        if lo < hi:
            k = _kv_tile(KD, b32, kh32, lo, k_base, stride_kn, stride_kd, lo + offs_n0, offs_d, seqlen_kv,
                         BLOCK_N, HEAD_DIM, BLOCK_D, False, TMA, "load_k", SCOPES)
            _scope_in("qk", SCOPES)
            s = _mma(q, tl.trans(k), None, DOT_PREC)
            _scope_out("qk", SCOPES)
            for start_n in range(lo, hi - BLOCK_N, BLOCK_N):
                start_n = tl.multiple_of(start_n, BLOCK_N)
                nxt = start_n + BLOCK_N
                k = _kv_tile(KD, b32, kh32, nxt, k_base, stride_kn, stride_kd, nxt + offs_n0, offs_d, seqlen_kv,
                             BLOCK_N, HEAD_DIM, BLOCK_D, False, TMA, "load_k", SCOPES)
                _scope_in("qk", SCOPES)
                s_next = _mma(q, tl.trans(k), None, DOT_PREC)
                _scope_out("qk", SCOPES)
                v = _kv_tile(VD, b32, kh32, start_n, v_base, stride_vn, stride_vd, start_n + offs_n0, offs_d,
                             seqlen_kv, BLOCK_N, HEAD_DIM, BLOCK_D, False, TMA, "load_v", SCOPES)
                acc, l_i, m_i = _softmax_pv(s, v, acc, l_i, m_i, qk_scale, SCALE_POS, DOT_PREC, SCOPES)
                s = s_next
            last = hi - BLOCK_N
            v = _kv_tile(VD, b32, kh32, last, v_base, stride_vn, stride_vd, last + offs_n0, offs_d, seqlen_kv,
                         BLOCK_N, HEAD_DIM, BLOCK_D, False, TMA, "load_v", SCOPES)
            acc, l_i, m_i = _softmax_pv(s, v, acc, l_i, m_i, qk_scale, SCALE_POS, DOT_PREC, SCOPES)
        return acc, l_i, m_i

    @triton.jit
    def _fwd_kernel(Q, K, V, Out, LSE, QD, KD, VD,
                    stride_qb, stride_qh, stride_qm, stride_qd,
                    stride_kb, stride_kh, stride_kn, stride_kd,
                    stride_vb, stride_vh, stride_vn, stride_vd,
                    stride_ob, stride_oh, stride_om, stride_od,
                    heads, group, seqlen_q, seqlen_kv, diag_off, qk_scale, n_bh,
                    HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                    CAUSAL: tl.constexpr, REVERSE: tl.constexpr, SCALE_POS: tl.constexpr,
                    DOT_PREC: tl.constexpr, TMA: tl.constexpr, PIPE: tl.constexpr = False,
                    SCOPES: tl.constexpr = False, LAZY: tl.constexpr = False, WINDOW: tl.constexpr = 0,
                    PERSIST: tl.constexpr = False, WS: tl.constexpr = False, EMU: tl.constexpr = 0):
        """One program per (query block, batch x head); PERSIST: a grid of a few programs per SM, each taking every
        grid-th tile, longest first across all heads when REVERSE (causal). Measured on the H200 (RESULTS.md, issue
        50): slower than one program per tile at every shape; `profctl explain` names DRAM (the programs running at
        once read every head's K and V); going head by head instead left SMs idle (busy 66 %: tail-effect)."""
        if PERSIST:
            n_m = tl.cdiv(seqlen_q, BLOCK_M)
            for tile in range(tl.program_id(0), n_m * n_bh, tl.num_programs(0)):
                if REVERSE:  # the longest query blocks of every head first
                    pid_m = n_m - 1 - tile // n_bh
                    pid_bh = tile % n_bh
                else:  # one head's query blocks together: its K and V stay in L2
                    pid_m = tile % n_m
                    pid_bh = tile // n_m
                _fwd_tile(pid_m, pid_bh, Q, K, V, Out, LSE, QD, KD, VD,
                          stride_qb, stride_qh, stride_qm, stride_qd, stride_kb, stride_kh, stride_kn, stride_kd,
                          stride_vb, stride_vh, stride_vn, stride_vd, stride_ob, stride_oh, stride_om, stride_od,
                          heads, group, seqlen_q, seqlen_kv, diag_off, qk_scale,
                          HEAD_DIM, BLOCK_D, BLOCK_M, BLOCK_N, CAUSAL, SCALE_POS, DOT_PREC, TMA, PIPE, SCOPES, LAZY,
                          WINDOW, WS, EMU)
        else:
            if REVERSE:  # noqa: SIM108 (causal: the longest rows first, so the short ones fill the launch's tail)
                pid_m = tl.num_programs(0) - 1 - tl.program_id(0)
            else:
                pid_m = tl.program_id(0)
            _fwd_tile(pid_m, tl.program_id(1), Q, K, V, Out, LSE, QD, KD, VD,
                      stride_qb, stride_qh, stride_qm, stride_qd, stride_kb, stride_kh, stride_kn, stride_kd,
                      stride_vb, stride_vh, stride_vn, stride_vd, stride_ob, stride_oh, stride_om, stride_od,
                      heads, group, seqlen_q, seqlen_kv, diag_off, qk_scale,
                      HEAD_DIM, BLOCK_D, BLOCK_M, BLOCK_N, CAUSAL, SCALE_POS, DOT_PREC, TMA, PIPE, SCOPES, LAZY,
                      WINDOW, WS, EMU)

    @triton.jit
    def _fwd_tile(pid_m, pid_bh, Q, K, V, Out, LSE, QD, KD, VD,
                  stride_qb, stride_qh, stride_qm, stride_qd,
                  stride_kb, stride_kh, stride_kn, stride_kd,
                  stride_vb, stride_vh, stride_vn, stride_vd,
                  stride_ob, stride_oh, stride_om, stride_od,
                  heads, group, seqlen_q, seqlen_kv, diag_off, qk_scale,
                  HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                  CAUSAL: tl.constexpr, SCALE_POS: tl.constexpr, DOT_PREC: tl.constexpr, TMA: tl.constexpr,
                  PIPE: tl.constexpr, SCOPES: tl.constexpr, LAZY: tl.constexpr, WINDOW: tl.constexpr,
                  WS: tl.constexpr, EMU: tl.constexpr):
        """The forward of one query block of one (batch, head)."""
        b32 = pid_bh // heads
        h32 = pid_bh % heads
        kh32 = h32 // group
        off_b = b32.to(tl.int64)
        off_kh = kh32.to(tl.int64)
        off_h = h32.to(tl.int64)
        start_m = pid_m * BLOCK_M
        offs_m = start_m + tl.arange(0, BLOCK_M)
        offs_d = tl.arange(0, BLOCK_D)

        q_base = Q + off_b * stride_qb + off_h * stride_qh
        k_base = K + off_b * stride_kb + off_kh * stride_kh
        v_base = V + off_b * stride_vb + off_kh * stride_vh
        _scope_in("load_q", SCOPES)
        q = _load_tile(QD, b32, h32, start_m, q_base + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd,
                       offs_m, seqlen_q, offs_d, BLOCK_M, HEAD_DIM, BLOCK_D, True, TMA)
        _scope_out("load_q", SCOPES)

        # key blocks [0, full) are seen whole by every row of this query block; [full, hi) need the mask
        if CAUSAL:
            hi = tl.maximum(tl.minimum(start_m + BLOCK_M + diag_off, seqlen_kv), 0)
            full = tl.maximum(tl.minimum(start_m + diag_off + 1, seqlen_kv), 0)
            full = (full // BLOCK_N) * BLOCK_N
        else:
            hi = seqlen_kv
            full = (seqlen_kv // BLOCK_N) * BLOCK_N
        lo = 0
        if WINDOW > 0:  # a sliding window: only the key blocks [lo, hi) that hold a key of the window, all masked
            lo = tl.maximum(start_m + diag_off - WINDOW + 1, 0)
            lo = (lo // BLOCK_N) * BLOCK_N
            if not CAUSAL:
                hi = tl.maximum(tl.minimum(start_m + BLOCK_M - 1 + diag_off + WINDOW, seqlen_kv), 0)
            full = lo

        m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - 1.0e30  # finite: a row with no key yet gives no NaN
        l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
        acc = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
        if PIPE:
            acc, l_i, m_i = _fwd_key_loop_pipelined(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn,
                                                    stride_vd, KD, VD, b32, kh32, lo, full, offs_d, seqlen_kv,
                                                    qk_scale, BLOCK_N, HEAD_DIM, BLOCK_D, SCALE_POS, DOT_PREC, TMA,
                                                    SCOPES)
        else:
            acc, l_i, m_i = _fwd_key_loop(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn,
                                          stride_vd, KD, VD, b32, kh32, lo, full, offs_m, offs_d, seqlen_kv, diag_off,
                                          qk_scale, BLOCK_N, HEAD_DIM, BLOCK_D, False, CAUSAL, SCALE_POS, DOT_PREC,
                                          TMA, SCOPES, LAZY, WS=WS, EMU=EMU)
        acc, l_i, m_i = _fwd_key_loop(acc, l_i, m_i, q, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
                                      KD, VD, b32, kh32, full, hi, offs_m, offs_d, seqlen_kv, diag_off, qk_scale,
                                      BLOCK_N, HEAD_DIM, BLOCK_D, True, CAUSAL, SCALE_POS, DOT_PREC, TMA, SCOPES,
                                      WINDOW=WINDOW)
        seen = l_i > 0.0
        l_safe = tl.where(seen, l_i, 1.0)
        o = acc / l_safe[:, None]
        lse = tl.where(seen, m_i + tl.log2(l_safe), float("inf"))  # +inf: the backward's exp2(s - lse) is 0
        _scope_in("store", SCOPES)
        o_base = Out + off_b * stride_ob + off_h * stride_oh
        _store_rows(o_base + offs_m[:, None] * stride_om + offs_d[None, :] * stride_od, o.to(Out.dtype.element_ty),
                    offs_m, seqlen_q, offs_d, HEAD_DIM, BLOCK_D)
        tl.store(LSE + pid_bh.to(tl.int64) * seqlen_q + offs_m, lse, mask=offs_m < seqlen_q)
        _scope_out("store", SCOPES)

    @triton.jit
    def _bwd_delta_kernel(Out, DO, DELTA,
                          stride_ob, stride_oh, stride_om, stride_od,
                          stride_dob, stride_doh, stride_dom, stride_dod,
                          heads, seqlen_q,
                          HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr):
        """delta_i = sum_d dO_id * O_id, in fp32: the row term of dS = P * (dP - delta)."""
        pid_m = tl.program_id(0)
        pid_bh = tl.program_id(1)
        off_b = (pid_bh // heads).to(tl.int64)
        off_h = (pid_bh % heads).to(tl.int64)
        offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        offs_d = tl.arange(0, BLOCK_D)
        o = _load_rows(Out + off_b * stride_ob + off_h * stride_oh + offs_m[:, None] * stride_om
                       + offs_d[None, :] * stride_od, offs_m, seqlen_q, offs_d, HEAD_DIM, BLOCK_D, True)
        do = _load_rows(DO + off_b * stride_dob + off_h * stride_doh + offs_m[:, None] * stride_dom
                        + offs_d[None, :] * stride_dod, offs_m, seqlen_q, offs_d, HEAD_DIM, BLOCK_D, True)
        delta = tl.sum(o.to(tl.float32) * do.to(tl.float32), 1)
        tl.store(DELTA + pid_bh.to(tl.int64) * seqlen_q + offs_m, delta, mask=offs_m < seqlen_q)

    @triton.jit
    def _bwd_dkdv_kernel(Q, K, V, DO, LSE, DELTA, DK, DV, QD, DOD,
                         stride_qb, stride_qh, stride_qm, stride_qd,
                         stride_kb, stride_kh, stride_kn, stride_kd,
                         stride_vb, stride_vh, stride_vn, stride_vd,
                         stride_dob, stride_doh, stride_dom, stride_dod,
                         stride_dks, stride_dkb, stride_dkh, stride_dkn, stride_dkd,
                         stride_dvs, stride_dvb, stride_dvh, stride_dvn, stride_dvd,
                         heads, kv_heads, group, n_split, seqlen_q, seqlen_kv, diag_off, qk_scale, sm_scale,
                         HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                         CAUSAL: tl.constexpr, DOT_PREC: tl.constexpr, TMA: tl.constexpr):
        """dK, dV of one key block: one loop over (query head of the group, query block), all transposed
        (keys as rows) so that no P^T has to be formed.

        One flat loop, not an unmasked loop between masked ones as in the forward: the dK and dV accumulators
        already take half the registers, every extra software-pipelined loop made ptxas spill (seen in the
        resource report), and with a head_dim-deep contraction per score the always-on causal select and the
        bounds-checked loads cost little next to the four GEMMs per block.
        """
        pid_n = tl.program_id(0)  # causal: the first key blocks have the most query rows; they go first
        pid = tl.program_id(1)
        split = pid % n_split
        pid_bkh = pid // n_split
        b32 = pid_bkh // kv_heads
        off_b = b32.to(tl.int64)
        off_kh = pid_bkh % kv_heads
        start_n = pid_n * BLOCK_N
        offs_n = start_n + tl.arange(0, BLOCK_N)
        offs_d = tl.arange(0, BLOCK_D)
        offs_m0 = tl.arange(0, BLOCK_M)
        k = _load_rows(K + off_b * stride_kb + off_kh.to(tl.int64) * stride_kh + offs_n[:, None] * stride_kn
                       + offs_d[None, :] * stride_kd, offs_n, seqlen_kv, offs_d, HEAD_DIM, BLOCK_D, True)
        v = _load_rows(V + off_b * stride_vb + off_kh.to(tl.int64) * stride_vh + offs_n[:, None] * stride_vn
                       + offs_d[None, :] * stride_vd, offs_n, seqlen_kv, offs_d, HEAD_DIM, BLOCK_D, True)

        # the query blocks that see any key of this block: from the first row i with i + diag_off >= start_n
        if CAUSAL:  # noqa: SIM108 (constexpr branch)
            lo = (tl.maximum(start_n - diag_off, 0) // BLOCK_M) * BLOCK_M
        else:
            lo = 0
        n_mblocks = tl.maximum(tl.cdiv(seqlen_q - lo, BLOCK_M), 0)
        per_prog = group // n_split
        head0 = off_kh * group + split * per_prog  # the query heads sharing this kv head (GQA)

        dk = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
        dv = tl.zeros([BLOCK_N, BLOCK_D], dtype=tl.float32)
        for it in range(0, per_prog * n_mblocks):
            g = it // n_mblocks
            start_m = lo + (it - g * n_mblocks) * BLOCK_M
            h32 = head0 + g
            bh = off_b * heads + h32
            off_h = h32.to(tl.int64)
            offs_m = start_m + offs_m0
            q = _load_tile(QD, b32, h32, start_m, Q + off_b * stride_qb + off_h * stride_qh
                           + offs_m[:, None] * stride_qm + offs_d[None, :] * stride_qd, offs_m, seqlen_q, offs_d,
                           BLOCK_M, HEAD_DIM, BLOCK_D, True, TMA)
            do = _load_tile(DOD, b32, h32, start_m, DO + off_b * stride_dob + off_h * stride_doh
                            + offs_m[:, None] * stride_dom + offs_d[None, :] * stride_dod, offs_m, seqlen_q, offs_d,
                            BLOCK_M, HEAD_DIM, BLOCK_D, True, TMA)
            # rows past the end: lse = +inf makes their P exactly 0
            lse = tl.load(LSE + bh * seqlen_q + offs_m, mask=offs_m < seqlen_q, other=float("inf"))
            delta = tl.load(DELTA + bh * seqlen_q + offs_m, mask=offs_m < seqlen_q, other=0.0)
            s_t = _mma(k, tl.trans(q), None, DOT_PREC)
            p_t = tl.exp2(s_t * qk_scale - lse[None, :])
            if CAUSAL:
                p_t = tl.where(offs_n[:, None] <= offs_m[None, :] + diag_off, p_t, 0.0)
            dv = _mma(p_t.to(do.dtype), do, dv, DOT_PREC)
            dp_t = _mma(v, tl.trans(do), None, DOT_PREC)
            ds_t = p_t * (dp_t - delta[None, :])
            dk = _mma(ds_t.to(q.dtype), q, dk, DOT_PREC)

        dk = dk * sm_scale
        off_s = split.to(tl.int64)
        off_kh = off_kh.to(tl.int64)
        _store_rows(DK + off_s * stride_dks + off_b * stride_dkb + off_kh * stride_dkh + offs_n[:, None] * stride_dkn
                    + offs_d[None, :] * stride_dkd, dk.to(DK.dtype.element_ty), offs_n, seqlen_kv, offs_d,
                    HEAD_DIM, BLOCK_D)
        _store_rows(DV + off_s * stride_dvs + off_b * stride_dvb + off_kh * stride_dvh + offs_n[:, None] * stride_dvn
                    + offs_d[None, :] * stride_dvd, dv.to(DV.dtype.element_ty), offs_n, seqlen_kv, offs_d,
                    HEAD_DIM, BLOCK_D)

    @triton.jit
    def _bwd_dq_key_loop(dq, q, do, lse, delta, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
                         KD, VD, b32, kh32, lo, hi, offs_m, offs_d, seqlen_kv, diag_off, qk_scale,
                         BLOCK_N: tl.constexpr, HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr,
                         MASKED: tl.constexpr, CAUSAL: tl.constexpr, DOT_PREC: tl.constexpr, TMA: tl.constexpr):
        """Accumulate dQ (unscaled) of one query block over key blocks [lo, hi)."""
        offs_n0 = tl.arange(0, BLOCK_N)
        for start_n in range(lo, hi, BLOCK_N):
            start_n = tl.multiple_of(start_n, BLOCK_N)
            offs_n = start_n + offs_n0
            k = _load_tile(KD, b32, kh32, start_n, k_base + offs_n[:, None] * stride_kn + offs_d[None, :] * stride_kd,
                           offs_n, seqlen_kv, offs_d, BLOCK_N, HEAD_DIM, BLOCK_D, MASKED, TMA)
            v = _load_tile(VD, b32, kh32, start_n, v_base + offs_n[:, None] * stride_vn + offs_d[None, :] * stride_vd,
                           offs_n, seqlen_kv, offs_d, BLOCK_N, HEAD_DIM, BLOCK_D, MASKED, TMA)
            s = _mma(q, tl.trans(k), None, DOT_PREC)
            p = tl.exp2(s * qk_scale - lse[:, None])
            if MASKED:
                keep = offs_n[None, :] < seqlen_kv
                if CAUSAL:
                    keep = keep & (offs_n[None, :] <= offs_m[:, None] + diag_off)
                p = tl.where(keep, p, 0.0)
            dp = _mma(do, tl.trans(v), None, DOT_PREC)
            ds = p * (dp - delta[:, None])
            dq = _mma(ds.to(k.dtype), k, dq, DOT_PREC)
        return dq

    @triton.jit
    def _bwd_dq_kernel(Q, K, V, DO, LSE, DELTA, DQ, KD, VD,
                       stride_qb, stride_qh, stride_qm, stride_qd,
                       stride_kb, stride_kh, stride_kn, stride_kd,
                       stride_vb, stride_vh, stride_vn, stride_vd,
                       stride_dob, stride_doh, stride_dom, stride_dod,
                       stride_dqb, stride_dqh, stride_dqm, stride_dqd,
                       heads, group, seqlen_q, seqlen_kv, diag_off, qk_scale, sm_scale,
                       HEAD_DIM: tl.constexpr, BLOCK_D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       CAUSAL: tl.constexpr, REVERSE: tl.constexpr, DOT_PREC: tl.constexpr, TMA: tl.constexpr):
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
        q = _load_rows(Q + off_b * stride_qb + off_h * stride_qh + offs_m[:, None] * stride_qm
                       + offs_d[None, :] * stride_qd, offs_m, seqlen_q, offs_d, HEAD_DIM, BLOCK_D, True)
        do = _load_rows(DO + off_b * stride_dob + off_h * stride_doh + offs_m[:, None] * stride_dom
                        + offs_d[None, :] * stride_dod, offs_m, seqlen_q, offs_d, HEAD_DIM, BLOCK_D, True)
        row = pid_bh.to(tl.int64) * seqlen_q + offs_m
        lse = tl.load(LSE + row, mask=offs_m < seqlen_q, other=float("inf"))
        delta = tl.load(DELTA + row, mask=offs_m < seqlen_q, other=0.0)
        k_base = K + off_b * stride_kb + off_kh * stride_kh
        v_base = V + off_b * stride_vb + off_kh * stride_vh
        if CAUSAL:
            hi = tl.maximum(tl.minimum(start_m + BLOCK_M + diag_off, seqlen_kv), 0)
            full = tl.maximum(tl.minimum(start_m + diag_off + 1, seqlen_kv), 0)
            full = (full // BLOCK_N) * BLOCK_N
        else:
            hi = seqlen_kv
            full = (seqlen_kv // BLOCK_N) * BLOCK_N
        dq = tl.zeros([BLOCK_M, BLOCK_D], dtype=tl.float32)
        dq = _bwd_dq_key_loop(dq, q, do, lse, delta, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
                              KD, VD, b32, kh32, 0, full, offs_m, offs_d, seqlen_kv, diag_off, qk_scale,
                              BLOCK_N, HEAD_DIM, BLOCK_D, False, CAUSAL, DOT_PREC, TMA)
        dq = _bwd_dq_key_loop(dq, q, do, lse, delta, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
                              KD, VD, b32, kh32, full, hi, offs_m, offs_d, seqlen_kv, diag_off, qk_scale,
                              BLOCK_N, HEAD_DIM, BLOCK_D, True, CAUSAL, DOT_PREC, TMA)
        dq = dq * sm_scale
        _store_rows(DQ + off_b * stride_dqb + off_h * stride_dqh + offs_m[:, None] * stride_dqm
                    + offs_d[None, :] * stride_dqd, dq.to(DQ.dtype.element_ty), offs_m, seqlen_q, offs_d,
                    HEAD_DIM, BLOCK_D)
