"""Planted Triton kernel pairs for measuring how often `profctl explain` names the right cause (issue 33).

Each pair is a kernel A with ONE known fault and a kernel B doing the same work without it; A and B are separate
jit functions so that each has its own name in a profile. The line that carries a fault ends with a comment
"PLANT: <cause-id>". Plain script, independent of profctl.

    python pairs_triton.py --check [pair..]             A == B on tiny shapes; run it on the CPU with
                                                        TRITON_INTERPRET=1 (set by --check when there is no GPU)
    python pairs_triton.py --time OUT.json [pair..]     median of 60 per-launch CUDA event times, 5 warm-ups
                                                        (and the same A == B == torch check at full size)
    python pairs_triton.py --record GROUP               per pair of GROUP: A and B once (warm-up, compile), then
                                                        each once more inside NVTX ranges measure/<pair>.<a|b>
    python pairs_triton.py --list

Works with Triton 3.6 (the GPU machine) and 3.9 (the CPU interpreter).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass

if "--check" in sys.argv and os.environ.get("TRITON_INTERPRET") is None:
    try:
        import torch as _t
        _gpu = _t.cuda.is_available()
    except ImportError:
        _gpu = False
    if not _gpu:
        os.environ["TRITON_INTERPRET"] = "1"  # must be set before triton is imported

import torch
import triton
import triton.language as tl

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
DEV = "cpu" if INTERPRET else "cuda"
LOG2E = 1.4426950408889634
# Triton 3.9's interpreter computes bf16 dots wrongly (garbage on the CPU); the CPU check uses fp16 instead
HALF = torch.float16 if INTERPRET else torch.bfloat16


# ------------------------------------------------------------------ 1. uncoalesced-global: out = x.T (a copy)
@triton.jit
def transpose_flat_gather(X, Out, R, C, BLOCK: tl.constexpr):
    # A: one flat block of output elements; neighbouring outputs come from elements a whole row (C floats) apart
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    r = o % R
    c = o // R
    v = tl.load(X + r * C + c)  # PLANT: uncoalesced-global
    tl.store(Out + o, v)


@triton.jit
def transpose_tiled(X, Out, R, C, BR: tl.constexpr, BC: tl.constexpr):
    # B: a 2-D tile read along rows and written along columns; Triton stages it through shared memory
    r = tl.program_id(0) * BR + tl.arange(0, BR)
    c = tl.program_id(1) * BC + tl.arange(0, BC)
    v = tl.load(X + r[:, None] * C + c[None, :])
    tl.store(Out + c[None, :] * R + r[:, None], v)


# ------------------------------------------------------------- 2. dram-bound: softmax rows, 3 passes vs 1
@triton.jit
def softmax_three_passes(X, Out, N, BLOCK: tl.constexpr):
    # A: max, then sum of exps, then the output, each pass reading the 128 KB row from memory again
    row = tl.program_id(0).to(tl.int64) * N
    offs = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    for start in range(0, N, BLOCK):
        m = tl.maximum(m, tl.load(X + row + start + offs))
    mx = tl.max(m, 0)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, N, BLOCK):
        s += tl.exp2((tl.load(X + row + start + offs) - mx) * 1.4426950408889634)  # PLANT: dram-bound
    inv = 1.0 / tl.sum(s, 0)
    for start in range(0, N, BLOCK):
        x = tl.load(X + row + start + offs)
        tl.store(Out + row + start + offs, tl.exp2((x - mx) * 1.4426950408889634) * inv)


@triton.jit
def softmax_one_pass(X, Out, N, BLOCK: tl.constexpr):
    # B: the whole row read once into registers (BLOCK == N)
    row = tl.program_id(0).to(tl.int64) * N
    offs = tl.arange(0, BLOCK)
    x = tl.load(X + row + offs)
    mx = tl.max(x, 0)
    p = tl.exp2((x - mx) * 1.4426950408889634)
    inv = 1.0 / tl.sum(p, 0)
    tl.store(Out + row + offs, p * inv)


# ------------------------------------------- attention forward (FlashAttention-2 loop), bf16 in (fp16 on the
# CPU interpreter), fp32 out
# Q, K, V: (heads, n_ctx, D) contiguous; one program per (BLOCK_M rows, head).

@triton.jit
def attn_fwd_stages1(Q, K, V, Out, qk_scale, N_CTX, D: tl.constexpr, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr):
    # A of loads-not-pipelined: launched with num_stages=1, so every K/V tile load waits in the loop
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    base = tl.program_id(1).to(tl.int64) * N_CTX * D
    q = tl.load(Q + base + offs_m[:, None] * D + offs_d[None, :])
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for start in range(0, N_CTX, BLOCK_N):
        k = tl.load(K + base + (start + offs_n)[None, :] * D + offs_d[:, None])  # PLANT: loads-not-pipelined
        v = tl.load(V + base + (start + offs_n)[:, None] * D + offs_d[None, :])
        qk = tl.dot(q, k)
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.exp2(qk * qk_scale - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    tl.store(Out + base + offs_m[:, None] * D + offs_d[None, :], acc / l_i[:, None])


@triton.jit
def attn_fwd_stages3(Q, K, V, Out, qk_scale, N_CTX, D: tl.constexpr, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr):
    # B of loads-not-pipelined: the same code launched with num_stages=3 (the next tiles load during this one)
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    base = tl.program_id(1).to(tl.int64) * N_CTX * D
    q = tl.load(Q + base + offs_m[:, None] * D + offs_d[None, :])
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for start in range(0, N_CTX, BLOCK_N):
        k = tl.load(K + base + (start + offs_n)[None, :] * D + offs_d[:, None])
        v = tl.load(V + base + (start + offs_n)[:, None] * D + offs_d[None, :])
        qk = tl.dot(q, k)
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.exp2(qk * qk_scale - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    tl.store(Out + base + offs_m[:, None] * D + offs_d[None, :], acc / l_i[:, None])


@triton.jit
def attn_fwd_qk_fp32(Q, K, V, Out, qk_scale, N_CTX, D: tl.constexpr, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr):
    # A of no-tensor-cores: Q.K^T as an fp32 "ieee" dot: FMA instructions, the tensor cores idle
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    base = tl.program_id(1).to(tl.int64) * N_CTX * D
    q = tl.load(Q + base + offs_m[:, None] * D + offs_d[None, :])
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for start in range(0, N_CTX, BLOCK_N):
        k = tl.load(K + base + (start + offs_n)[None, :] * D + offs_d[:, None])
        v = tl.load(V + base + (start + offs_n)[:, None] * D + offs_d[None, :])
        qk = tl.dot(q.to(tl.float32), k.to(tl.float32), input_precision="ieee")  # PLANT: no-tensor-cores
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.exp2(qk * qk_scale - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    tl.store(Out + base + offs_m[:, None] * D + offs_d[None, :], acc / l_i[:, None])


@triton.jit
def attn_fwd_qk_bf16(Q, K, V, Out, qk_scale, N_CTX, D: tl.constexpr, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr):
    # B of no-tensor-cores: the same products as a bf16 dot (exact in fp32, accumulated in fp32) on tensor cores
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    base = tl.program_id(1).to(tl.int64) * N_CTX * D
    q = tl.load(Q + base + offs_m[:, None] * D + offs_d[None, :])
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for start in range(0, N_CTX, BLOCK_N):
        k = tl.load(K + base + (start + offs_n)[None, :] * D + offs_d[:, None])
        v = tl.load(V + base + (start + offs_n)[:, None] * D + offs_d[None, :])
        qk = tl.dot(q, k)
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.exp2(qk * qk_scale - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    tl.store(Out + base + offs_m[:, None] * D + offs_d[None, :], acc / l_i[:, None])


@triton.jit
def attn_fwd_exp_sfu(Q, K, V, Out, qk_scale, N_CTX, D: tl.constexpr, BLOCK_M: tl.constexpr,
                     BLOCK_N: tl.constexpr):
    # A of sfu-bound: head dim 16, so the matrix work per score is small and every exp2 goes to the SFU (MUFU)
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    base = tl.program_id(1).to(tl.int64) * N_CTX * D
    q = tl.load(Q + base + offs_m[:, None] * D + offs_d[None, :])
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for start in range(0, N_CTX, BLOCK_N):
        k = tl.load(K + base + (start + offs_n)[None, :] * D + offs_d[:, None])
        v = tl.load(V + base + (start + offs_n)[:, None] * D + offs_d[None, :])
        qk = tl.dot(q, k)
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.exp2(qk * qk_scale - m_new[:, None])  # PLANT: sfu-bound
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    tl.store(Out + base + offs_m[:, None] * D + offs_d[None, :], acc / l_i[:, None])


@triton.jit
def exp2_fma(x):
    # 2^x for x <= 0 without the SFU (FlashAttention-4's trick): x = j + f, j = round(x) through the 1.5*2^23
    # shifter, 2^f by a cubic (relative error 1.1e-4, below bf16's), 2^j added to the exponent bits
    x = tl.maximum(x, -126.0)
    t = x + 12582912.0
    f = x - (t - 12582912.0)
    p = 1.0 + f * (0.6933686 + f * (0.24221784 + f * 0.05459282))
    bits = p.to(tl.int32, bitcast=True) + (t.to(tl.int32, bitcast=True) << 23)
    return bits.to(tl.float32, bitcast=True)


@triton.jit
def attn_fwd_exp_split(Q, K, V, Out, qk_scale, N_CTX, D: tl.constexpr, BLOCK_M: tl.constexpr,
                       BLOCK_N: tl.constexpr):
    # B of sfu-bound: a quarter of the exps (every fourth column) by the FMA polynomial, the rest on the SFU
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    base = tl.program_id(1).to(tl.int64) * N_CTX * D
    q = tl.load(Q + base + offs_m[:, None] * D + offs_d[None, :])
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for start in range(0, N_CTX, BLOCK_N):
        k = tl.load(K + base + (start + offs_n)[None, :] * D + offs_d[:, None])
        v = tl.load(V + base + (start + offs_n)[:, None] * D + offs_d[None, :])
        qk = tl.dot(q, k)
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        x = qk * qk_scale - m_new[:, None]
        xa, xb = tl.split(tl.reshape(x, [BLOCK_M, BLOCK_N // 2, 2]))
        xb0, xb1 = tl.split(tl.reshape(xb, [BLOCK_M, BLOCK_N // 4, 2]))
        pb = tl.reshape(tl.join(tl.exp2(xb0), exp2_fma(xb1)), [BLOCK_M, BLOCK_N // 2])
        p = tl.reshape(tl.join(tl.exp2(xa), pb), [BLOCK_M, BLOCK_N])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    tl.store(Out + base + offs_m[:, None] * D + offs_d[None, :], acc / l_i[:, None])


@triton.jit
def attn_causal_all_blocks(Q, K, V, Out, qk_scale, N_CTX, D: tl.constexpr, BLOCK_M: tl.constexpr,
                           BLOCK_N: tl.constexpr):
    # A of compute-bound: causal attention that runs Q.K^T, softmax and P.V on every key block, also the blocks
    # above the diagonal that the mask zeroes entirely (their p is exactly 0, the output does not change)
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    base = tl.program_id(1).to(tl.int64) * N_CTX * D
    q = tl.load(Q + base + offs_m[:, None] * D + offs_d[None, :])
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for start in range(0, N_CTX, BLOCK_N):  # PLANT: compute-bound
        k = tl.load(K + base + (start + offs_n)[None, :] * D + offs_d[:, None])
        v = tl.load(V + base + (start + offs_n)[:, None] * D + offs_d[None, :])
        qk = tl.dot(q, k)
        qk = tl.where(offs_m[:, None] >= (start + offs_n)[None, :], qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.exp2(qk * qk_scale - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    tl.store(Out + base + offs_m[:, None] * D + offs_d[None, :], acc / l_i[:, None])


@triton.jit
def attn_causal_skip_blocks(Q, K, V, Out, qk_scale, N_CTX, D: tl.constexpr, BLOCK_M: tl.constexpr,
                            BLOCK_N: tl.constexpr):
    # B of compute-bound: the loop stops at the diagonal block (half the matrix work)
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    base = tl.program_id(1).to(tl.int64) * N_CTX * D
    q = tl.load(Q + base + offs_m[:, None] * D + offs_d[None, :])
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for start in range(0, (tl.program_id(0) + 1) * BLOCK_M, BLOCK_N):
        k = tl.load(K + base + (start + offs_n)[None, :] * D + offs_d[:, None])
        v = tl.load(V + base + (start + offs_n)[:, None] * D + offs_d[None, :])
        qk = tl.dot(q, k)
        qk = tl.where(offs_m[:, None] >= (start + offs_n)[None, :], qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.exp2(qk * qk_scale - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    tl.store(Out + base + offs_m[:, None] * D + offs_d[None, :], acc / l_i[:, None])


@triton.jit
def attn_fwd_mma_sync(Q, K, V, Out, qk_scale, N_CTX, D: tl.constexpr, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr):
    # A of legacy-mma (attention): compiled with DISABLE_MMA_V3=1, both dots on Ampere's mma.sync (HMMA), as in
    # FlashAttention-2 on Hopper
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    base = tl.program_id(1).to(tl.int64) * N_CTX * D
    q = tl.load(Q + base + offs_m[:, None] * D + offs_d[None, :])
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for start in range(0, N_CTX, BLOCK_N):
        k = tl.load(K + base + (start + offs_n)[None, :] * D + offs_d[:, None])
        v = tl.load(V + base + (start + offs_n)[:, None] * D + offs_d[None, :])
        qk = tl.dot(q, k)  # PLANT: legacy-mma
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.exp2(qk * qk_scale - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    tl.store(Out + base + offs_m[:, None] * D + offs_d[None, :], acc / l_i[:, None])


@triton.jit
def attn_fwd_wgmma(Q, K, V, Out, qk_scale, N_CTX, D: tl.constexpr, BLOCK_M: tl.constexpr,
                   BLOCK_N: tl.constexpr):
    # B of legacy-mma (attention): the same kernel compiled normally, both dots on Hopper's wgmma
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    base = tl.program_id(1).to(tl.int64) * N_CTX * D
    q = tl.load(Q + base + offs_m[:, None] * D + offs_d[None, :])
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for start in range(0, N_CTX, BLOCK_N):
        k = tl.load(K + base + (start + offs_n)[None, :] * D + offs_d[:, None])
        v = tl.load(V + base + (start + offs_n)[:, None] * D + offs_d[None, :])
        qk = tl.dot(q, k)
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.exp2(qk * qk_scale - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    tl.store(Out + base + offs_m[:, None] * D + offs_d[None, :], acc / l_i[:, None])


# --------------------------------------------------------------------- legacy-mma: a bf16 GEMM, C = A @ B
@triton.jit
def gemm_mma_sync(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # A of legacy-mma: compiled with DISABLE_MMA_V3=1, the fallback Triton takes when a dot cannot use Hopper's
    # wgmma (a 3-D dot, num_warps not a multiple of 4, BLOCK_M not a multiple of 64): Ampere's mma.sync
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros([BM, BN], tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(A + rm[:, None] * K + (k0 + rk)[None, :])
        b = tl.load(B + (k0 + rk)[:, None] * N + rn[None, :])
        acc = tl.dot(a, b, acc)  # PLANT: legacy-mma
    tl.store(C + rm[:, None] * N + rn[None, :], acc)


@triton.jit
def gemm_wgmma(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # B of legacy-mma: the same kernel compiled normally: warpgroup MMA (wgmma)
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros([BM, BN], tl.float32)
    for k0 in range(0, K, BK):
        a = tl.load(A + rm[:, None] * K + (k0 + rk)[None, :])
        b = tl.load(B + (k0 + rk)[:, None] * N + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(C + rm[:, None] * N + rn[None, :], acc)


# ======================================================================================== the pairs
@dataclass
class Pair:
    id: str
    group: str
    cause: str
    a: Callable
    b: Callable
    attention: bool
    setup: Callable[[bool], dict]  # tiny -> tensors and shapes
    run_a: Callable[[dict], None]
    run_b: Callable[[dict], None]
    rtol: float = 0.0
    atol: float = 0.0
    ref: Callable[[dict], torch.Tensor] | None = None  # what A and B compute, in torch (the --check reference)


def _uniform(*shape: int, lo: float = -1.0, hi: float = 1.0, dtype: torch.dtype = torch.float32,
             seed: int = 0) -> torch.Tensor:
    g = torch.Generator(device="cpu").manual_seed(seed)
    return (torch.rand(*shape, generator=g) * (hi - lo) + lo).to(dtype).to(DEV)


def _transpose_setup(tiny: bool) -> dict:
    r, c = (64, 32) if tiny else (8192, 8192)
    return {"x": _uniform(r, c, seed=1), "oa": torch.empty(c, r, device=DEV), "ob": torch.empty(c, r, device=DEV),
            "r": r, "c": c}


def _softmax_setup(tiny: bool) -> dict:
    rows, n = (4, 256) if tiny else (1024, 32768)
    x = _uniform(rows, n, lo=-4.0, hi=4.0, seed=2)
    return {"x": x, "oa": torch.empty_like(x), "ob": torch.empty_like(x), "rows": rows, "n": n,
            "chunk": 64 if tiny else 4096}


def _attn_setup(heads: int, n_ctx: int, d: int, block_m: int, block_n: int) -> Callable[[bool], dict]:
    def setup(tiny: bool) -> dict:
        h, n = (2, 64) if tiny else (heads, n_ctx)
        bm, bn = (16, 16) if tiny else (block_m, block_n)
        q, k, v = (_uniform(h, n, d, lo=-2.0, hi=2.0, dtype=HALF, seed=3 + i) for i in range(3))
        return {"q": q, "k": k, "v": v, "oa": torch.empty(h, n, d, device=DEV),
                "ob": torch.empty(h, n, d, device=DEV), "h": h, "n": n, "d": d, "bm": bm, "bn": bn,
                "scale": d ** -0.5 * LOG2E}
    return setup


def _mma_v3(allowed: bool, launch: Callable[[], None]) -> None:
    """Launch with Triton's DISABLE_MMA_V3 set (allowed=False) or unset: the compiler reads it when it compiles
    (the first launch), and it is part of the cache key."""
    old = os.environ.get("DISABLE_MMA_V3")
    if allowed:
        os.environ.pop("DISABLE_MMA_V3", None)
    else:
        os.environ["DISABLE_MMA_V3"] = "1"
    try:
        launch()
    finally:
        if old is None:
            os.environ.pop("DISABLE_MMA_V3", None)
        else:
            os.environ["DISABLE_MMA_V3"] = old


def _attn_launch(kernel: Callable, out: str, warps: int, stages: int, legacy: bool = False) -> Callable[[dict], None]:
    def run(s: dict) -> None:
        grid = (triton.cdiv(s["n"], s["bm"]), s["h"])
        _mma_v3(not legacy, lambda: kernel[grid](s["q"], s["k"], s["v"], s[out], s["scale"], s["n"], D=s["d"],
                                                 BLOCK_M=s["bm"], BLOCK_N=s["bn"], num_warps=warps,
                                                 num_stages=stages))
    return run


def _gemm_setup(tiny: bool) -> dict:
    n = 64 if tiny else 4096
    return {"a": _uniform(n, n, dtype=HALF, seed=7), "b": _uniform(n, n, dtype=HALF, seed=8),
            "oa": torch.empty(n, n, device=DEV), "ob": torch.empty(n, n, device=DEV), "n": n,
            "bm": 32 if tiny else 128, "bn": 32 if tiny else 128, "bk": 32 if tiny else 64}


def _gemm_launch(kernel: Callable, out: str, legacy: bool) -> Callable[[dict], None]:
    def run(s: dict) -> None:
        grid = (s["n"] // s["bm"], s["n"] // s["bn"])
        _mma_v3(not legacy, lambda: kernel[grid](s["a"], s["b"], s[out], s["n"], s["n"], s["n"], BM=s["bm"],
                                                 BN=s["bn"], BK=s["bk"], num_warps=8, num_stages=3))
    return run


def _attn_ref(causal: bool) -> Callable[[dict], torch.Tensor]:
    def ref(s: dict) -> torch.Tensor:
        q, k, v = (s[x].float() for x in "qkv")
        scores = q @ k.transpose(-1, -2) * s["d"] ** -0.5
        if causal:
            n = scores.shape[-1]
            scores = scores.masked_fill(torch.ones(n, n, dtype=torch.bool, device=q.device).triu(1), float("-inf"))
        return torch.softmax(scores, -1) @ v
    return ref


def _run_transpose_a(s: dict) -> None:
    block = 256 if not INTERPRET else 64
    transpose_flat_gather[(s["r"] * s["c"] // block,)](s["x"], s["oa"], s["r"], s["c"], BLOCK=block, num_warps=4)


def _run_transpose_b(s: dict) -> None:
    br, bc = (32, 32) if INTERPRET else (64, 64)
    transpose_tiled[(s["r"] // br, s["c"] // bc)](s["x"], s["ob"], s["r"], s["c"], BR=br, BC=bc, num_warps=4)


def _run_softmax_a(s: dict) -> None:
    softmax_three_passes[(s["rows"],)](s["x"], s["oa"], s["n"], BLOCK=s["chunk"], num_warps=4)


def _run_softmax_b(s: dict) -> None:
    softmax_one_pass[(s["rows"],)](s["x"], s["ob"], s["n"], BLOCK=s["n"], num_warps=16)


PAIRS: list[Pair] = [
    Pair("transpose_gather", "triton_mem", "uncoalesced-global", transpose_flat_gather, transpose_tiled, False,
         _transpose_setup, _run_transpose_a, _run_transpose_b, ref=lambda s: s["x"].t()),
    Pair("softmax_passes", "triton_mem", "dram-bound", softmax_three_passes, softmax_one_pass, True,
         _softmax_setup, _run_softmax_a, _run_softmax_b, rtol=1e-5, atol=1e-7,
         ref=lambda s: torch.softmax(s["x"], -1)),
    Pair("attn_num_stages", "triton_attn", "loads-not-pipelined", attn_fwd_stages1, attn_fwd_stages3, True,
         _attn_setup(16, 4096, 64, 128, 128),
         _attn_launch(attn_fwd_stages1, "oa", 8, 1), _attn_launch(attn_fwd_stages3, "ob", 8, 3),
         rtol=1e-2, atol=1e-3, ref=_attn_ref(False)),
    Pair("attn_qk_fp32", "triton_attn", "no-tensor-cores", attn_fwd_qk_fp32, attn_fwd_qk_bf16, True,
         _attn_setup(12, 4096, 64, 64, 64),
         _attn_launch(attn_fwd_qk_fp32, "oa", 4, 3), _attn_launch(attn_fwd_qk_bf16, "ob", 4, 3),
         rtol=1e-2, atol=1e-2, ref=_attn_ref(False)),
    Pair("attn_exp_sfu", "triton_sfu", "sfu-bound", attn_fwd_exp_sfu, attn_fwd_exp_split, True,
         _attn_setup(32, 4096, 16, 128, 128),
         _attn_launch(attn_fwd_exp_sfu, "oa", 8, 3), _attn_launch(attn_fwd_exp_split, "ob", 8, 3),
         rtol=1e-2, atol=1e-2, ref=_attn_ref(False)),
    Pair("attn_causal_masked", "triton_sfu", "compute-bound", attn_causal_all_blocks, attn_causal_skip_blocks, True,
         _attn_setup(16, 4096, 64, 128, 128),
         _attn_launch(attn_causal_all_blocks, "oa", 8, 3), _attn_launch(attn_causal_skip_blocks, "ob", 8, 3),
         rtol=1e-5, atol=1e-6, ref=_attn_ref(True)),
    Pair("attn_mma_sync", "triton_mma", "legacy-mma", attn_fwd_mma_sync, attn_fwd_wgmma, True,
         _attn_setup(16, 4096, 64, 128, 64),
         _attn_launch(attn_fwd_mma_sync, "oa", 4, 3, legacy=True), _attn_launch(attn_fwd_wgmma, "ob", 4, 3),
         rtol=1e-2, atol=1e-2, ref=_attn_ref(False)),
    Pair("gemm_mma_sync", "triton_mma", "legacy-mma", gemm_mma_sync, gemm_wgmma, False, _gemm_setup,
         _gemm_launch(gemm_mma_sync, "oa", True), _gemm_launch(gemm_wgmma, "ob", False), rtol=1e-3, atol=1e-3,
         ref=lambda s: s["a"].float() @ s["b"].float()),
]


def _sync() -> None:
    if not INTERPRET:
        torch.cuda.synchronize()


def _compare(p: Pair, s: dict, with_ref: bool = False) -> tuple[bool, float]:
    """A against B within the pair's tolerance (and, for --check, A against the torch reference within 3e-2:
    attention rounds P to 16 bits)."""
    a, b = s["oa"].float().cpu(), s["ob"].float().cpu()
    ok = bool(torch.isfinite(a).all() and torch.isfinite(b).all()
              and torch.allclose(a, b, rtol=p.rtol, atol=p.atol))
    if with_ref and p.ref is not None:
        ok = ok and bool(torch.allclose(a, p.ref(s).float().cpu(), rtol=3e-2, atol=3e-2))
    return ok, float((a - b).abs().max())


def _median_us(run: Callable[[dict], None], s: dict, reps: int = 60) -> float:
    for _ in range(5):
        run(s)
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    torch.cuda._sleep(200_000_000)  # keep the GPU busy while the host queues the launches: no host gaps timed
    for e0, e1 in ev:
        e0.record()
        run(s)
        e1.record()
    torch.cuda.synchronize()
    t = sorted(e0.elapsed_time(e1) * 1e3 for e0, e1 in ev)
    return t[reps // 2] if reps % 2 else 0.5 * (t[reps // 2 - 1] + t[reps // 2])


def _selected(args: list[str]) -> list[Pair]:
    return [p for p in PAIRS if not args or p.id in args or p.group in args]


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    mode, rest = argv[0], argv[1:]
    if mode == "--list":
        for p in PAIRS:
            print(p.id, p.group, p.cause, p.a.__name__, p.b.__name__, int(p.attention))
        return 0
    failed = 0
    if mode == "--check":
        for p in _selected(rest):
            try:
                s = p.setup(True)
                p.run_a(s)
                p.run_b(s)
                _sync()
                ok, diff = _compare(p, s, with_ref=True)
            except Exception as e:  # one pair's failure must not hide the others
                ok, diff = False, float("nan")
                print(f"check {p.id}: error {type(e).__name__}: {str(e)[:300]}")
            print(f"check {p.id:20s} {p.cause:20s} A={p.a.__name__} B={p.b.__name__}: {'ok' if ok else 'FAIL'} "
                  f"(max abs diff {diff:.3g}){' [interpreter]' if INTERPRET else ''}", flush=True)
            failed += not ok
    elif mode == "--time":
        out, rows = rest[0], []
        for p in _selected(rest[1:]):
            try:
                s = p.setup(False)
                p.run_a(s)
                p.run_b(s)
                _sync()
                ok, diff = _compare(p, s, with_ref=True)
                ta, tb = _median_us(p.run_a, s), _median_us(p.run_b, s)
            except Exception as e:
                print(f"time {p.id}: error {type(e).__name__}: {str(e)[:500]}", flush=True)
                failed += 1
                continue
            print(f"time {p.id:20s} {p.cause:20s} A {p.a.__name__:24s} {ta:10.1f} us  B {p.b.__name__:24s} "
                  f"{tb:10.1f} us  A/B {ta / tb:.2f}  check {'ok' if ok else 'FAIL'} ({diff:.3g})", flush=True)
            rows.append({"id": p.id, "cause": p.cause, "a": p.a.__name__, "b": p.b.__name__, "time_a_us": round(ta, 2),
                         "time_b_us": round(tb, 2), "check": "ok" if ok else "FAIL", "max_abs_diff": diff})
            failed += not ok
            del s
            torch.cuda.empty_cache()
        with open(out, "w") as fh:
            json.dump({"device": torch.cuda.get_device_name(), "triton": triton.__version__, "torch": torch.__version__,
                       "reps": 60, "stat": "median of per-launch CUDA event times", "pairs": rows}, fh, indent=1)
    elif mode == "--record":
        for p in _selected(rest):
            try:
                s = p.setup(False)
                p.run_a(s)
                p.run_b(s)
                torch.cuda.synchronize()
                for tag, run in (("a", p.run_a), ("b", p.run_b)):
                    torch.cuda.nvtx.range_push("measure")
                    torch.cuda.nvtx.range_push(f"{p.id}.{tag}")
                    run(s)
                    torch.cuda.synchronize()
                    torch.cuda.nvtx.range_pop()
                    torch.cuda.nvtx.range_pop()
                print(f"recorded {p.id}: {p.a.__name__}, {p.b.__name__}", flush=True)
            except Exception as e:
                print(f"record {p.id}: error {type(e).__name__}: {str(e)[:500]}", flush=True)
                failed += 1
            torch.cuda.empty_cache()
    else:
        print(f"unknown mode {mode}")
        return 2
    print("ok" if not failed else f"FAILED {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
