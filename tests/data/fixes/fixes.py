"""Real fixes and healthy kernels for measuring `profctl explain`'s predictions (see README.md here).

A FIX is a change a kernel engineer makes: A (before) and B (after) do the same work with the same result; its
expected cause is the catalog id (docs/diagnosis.md) that should be named for A. A HEALTHY kernel has nothing
wrong (at or near a roof) and stands alone. Every kernel variant is its own function (Triton: its own @triton.jit
name). Plain script, independent of profctl.

    python fixes.py --list                  id, kind (fix|healthy), expected cause (or 'healthy'), group, what
    python fixes.py --check [id|group..]    full size on the GPU: A == B within tolerance, healthy == torch ref
    python fixes.py --time OUT.json [..]    median of 60 per-launch CUDA event times after 5 warm-ups
    python fixes.py --record GROUP          3 warm-ups each, then one call in NVTX ranges measure/<id>.a|b
                                            (fixes) or measure/<id> (healthy)
    python fixes.py --smoke                 CPU, TRITON_INTERPRET=1: every case but SDPA at tiny shapes

Works with Triton 3.6 (the GPU machine) and 3.9 (the CPU interpreter).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass

if "--smoke" in sys.argv:
    os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
DEV = "cpu" if INTERPRET else "cuda"
LOG2E = 1.4426950408889634
HALF = torch.float16 if INTERPRET else torch.bfloat16  # the interpreter's bf16 dots are wrong


# ===================================================================== GEMM tiles (a: l2-thrashing)
@triton.jit
def _mm_tile(A, B, C, pid_m, pid_n, K, lda, ldb, ldc, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
             PREC: tl.constexpr):
    # C[tile] = A[rows, :K] @ B[:K, cols]; row strides lda, ldb, ldc
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptr = A + rm[:, None] * lda + rk[None, :]
    b_ptr = B + rk[:, None] * ldb + rn[None, :]
    acc = tl.zeros([BM, BN], tl.float32)
    for _ in range(0, K, BK):
        acc = tl.dot(tl.load(a_ptr), tl.load(b_ptr), acc, input_precision=PREC)
        a_ptr += BK
        b_ptr += BK * ldb
    tl.store(C + rm[:, None] * ldc + rn[None, :], acc.to(C.dtype.element_ty))


@triton.jit
def mm_row_major_order(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                       GROUP_M: tl.constexpr):
    # A: tiles in row-major launch order: one wave covers ~1 row of C tiles and so streams ALL of B
    pid = tl.program_id(0)
    grid_n = tl.cdiv(N, BN)
    _mm_tile(A, B, C, pid // grid_n, pid % grid_n, K, K, N, N, BM, BN, BK, "tf32")  # FIX: l2-thrashing


@triton.jit
def mm_grouped_order(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                     GROUP_M: tl.constexpr):
    # B: GROUP_M rows of tiles walked column by column: a wave reuses a few A strips and B strips from L2
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BM)
    width = GROUP_M * tl.cdiv(N, BN)
    first_m = (pid // width) * GROUP_M
    size_m = tl.minimum(grid_m - first_m, GROUP_M)
    _mm_tile(A, B, C, first_m + (pid % width) % size_m, (pid % width) // size_m, K, K, N, N, BM, BN, BK, "tf32")


# ===================================================================== fp32 Triton GEMM (n: no-tensor-cores)
@triton.jit
def mm_fp32_ieee(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # A: fp32 operands with input_precision="ieee": the product runs as FFMA on the FMA pipe
    _mm_tile(A, B, C, tl.program_id(0), tl.program_id(1), K, K, N, N, BM, BN, BK, "ieee")  # FIX: no-tensor-cores


@triton.jit
def mm_fp32_tf32(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # B: the same dot as TF32 on the tensor cores (what torch does with allow_tf32 / precision 'high')
    _mm_tile(A, B, C, tl.program_id(0), tl.program_id(1), K, K, N, N, BM, BN, BK, "tf32")


# ===================================================================== skinny GEMM (g: too-few-blocks)
@triton.jit
def skinny_mm_tile_per_block(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # A: one block per output tile: M=N=512 gives 16 blocks for 132 SMs, each looping over all of K
    _mm_tile(A, B, C, tl.program_id(0), tl.program_id(1), K, K, N, N, BM, BN, BK, "tf32")  # FIX: too-few-blocks


@triton.jit
def skinny_mm_split_k(A, B, P, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                      SPLIT: tl.constexpr):
    # B, step 1: K cut into SPLIT slices, one block per (tile, slice); fp32 partials P[slice, M, N]
    ks = tl.program_id(2)
    kc = K // SPLIT
    _mm_tile(A + ks * kc, B + ks * kc * N, P + ks * M * N, tl.program_id(0), tl.program_id(1), kc, K, N, N, BM, BN,
             BK, "tf32")


@triton.jit
def skinny_mm_sum_slices(P, C, MN, SPLIT: tl.constexpr, BLOCK: tl.constexpr):
    # B, step 2: C = sum of the SPLIT partials
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], tl.float32)
    for s in range(SPLIT):
        acc += tl.load(P + s * MN + offs)
    tl.store(C + offs, acc)


# ===================================================================== attention forward (b, c)
@triton.jit
def _attn_body(Q, K, V, Out, qk_scale, N_CTX, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # FlashAttention-2 loop; Q, K, V, Out: (heads, n_ctx, D) contiguous; program = (BLOCK_M rows, head)
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
    tl.store(Out + base + offs_m[:, None] * D + offs_d[None, :], (acc / l_i[:, None]).to(Out.dtype.element_ty))


@triton.jit
def attn_stages1(Q, K, V, Out, qk_scale, N_CTX, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # A (b): launched with num_stages=1: each K/V tile is loaded, waited for, then used
    _attn_body(Q, K, V, Out, qk_scale, N_CTX, D, BLOCK_M, BLOCK_N)  # FIX: loads-not-pipelined


@triton.jit
def attn_stages3(Q, K, V, Out, qk_scale, N_CTX, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # B (b): num_stages=3: the next K/V tiles load while this one is used
    _attn_body(Q, K, V, Out, qk_scale, N_CTX, D, BLOCK_M, BLOCK_N)


@triton.jit
def attn_warps4(Q, K, V, Out, qk_scale, N_CTX, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # A (c): num_warps=4 for a 128-row tile: one warpgroup per block, and the block's shared memory (Q + 3
    # stages of K/V) allows one block per SM: 4 warps per SM
    _attn_body(Q, K, V, Out, qk_scale, N_CTX, D, BLOCK_M, BLOCK_N)  # FIX: occupancy-shared-memory


@triton.jit
def attn_warps8(Q, K, V, Out, qk_scale, N_CTX, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # B (c): num_warps=8: two warpgroups (64 rows each) share the block's K/V tiles: 8 warps per SM
    _attn_body(Q, K, V, Out, qk_scale, N_CTX, D, BLOCK_M, BLOCK_N)


# ===================================================================== memory-bound Triton kernels
@triton.jit
def fused_scale_shift(X, Z, n, BLOCK: tl.constexpr):
    # B (h): z = x * 2 + 1 in one pass (A is torch's two kernels with y = x * 2 in DRAM between them)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(Z + offs, tl.load(X + offs, mask=mask) * 2.0 + 1.0, mask=mask)


@triton.jit
def rowsum_narrow(X, Out, N, BLOCK: tl.constexpr):
    # A (l): one 1-warp program per row, 32 floats per step: one 128-byte load in flight per warp
    row = tl.program_id(0).to(tl.int64) * N
    acc = tl.zeros([BLOCK], tl.float32)
    for c in range(0, N, BLOCK):
        acc += tl.load(X + row + c + tl.arange(0, BLOCK))  # FIX: latency-bound
    tl.store(Out + tl.program_id(0), tl.sum(acc, 0))


@triton.jit
def rowsum_wide(X, Out, N, BLOCK: tl.constexpr):
    # B (l): one 4-warp program per row, 2048 floats per step (16 per thread, vectorized)
    row = tl.program_id(0).to(tl.int64) * N
    acc = tl.zeros([BLOCK], tl.float32)
    for c in range(0, N, BLOCK):
        acc += tl.load(X + row + c + tl.arange(0, BLOCK))
    tl.store(Out + tl.program_id(0), tl.sum(acc, 0))


@triton.jit
def colsum_per_column(X, Out, R, N, BLOCK_R: tl.constexpr):
    # A (o): one program per column: each load gathers BLOCK_R floats N*4 bytes apart (one sector each)
    col = tl.program_id(0)
    offs = tl.arange(0, BLOCK_R)
    acc = tl.zeros([BLOCK_R], tl.float32)
    for r in range(0, R, BLOCK_R):
        acc += tl.load(X + (r + offs).to(tl.int64) * N + col)  # FIX: uncoalesced-global
    tl.store(Out + col, tl.sum(acc, 0))


@triton.jit
def colsum_tiled(X, Out, R, N, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    # B (o): one program per BLOCK_C columns: each load is BLOCK_R row segments of BLOCK_C contiguous floats
    cols = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    offs = tl.arange(0, BLOCK_R)
    acc = tl.zeros([BLOCK_R, BLOCK_C], tl.float32)
    for r in range(0, R, BLOCK_R):
        acc += tl.load(X + (r + offs).to(tl.int64)[:, None] * N + cols[None, :])
    tl.store(Out + cols, tl.sum(acc, 0))


@triton.jit
def softmax_three_pass(X, Out, N, BLOCK: tl.constexpr):
    # A (m): max pass, sum pass, write pass: the row is read from memory three times
    row = tl.program_id(0).to(tl.int64) * N
    offs = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    for c in range(0, N, BLOCK):
        m = tl.maximum(m, tl.load(X + row + c + offs))  # FIX: dram-bound
    mx = tl.max(m, 0)
    s = tl.zeros([BLOCK], tl.float32)
    for c in range(0, N, BLOCK):
        s += tl.exp2((tl.load(X + row + c + offs) - mx) * 1.4426950408889634)
    inv = 1.0 / tl.sum(s, 0)
    for c in range(0, N, BLOCK):
        tl.store(Out + row + c + offs, tl.exp2((tl.load(X + row + c + offs) - mx) * 1.4426950408889634) * inv)


@triton.jit
def softmax_online(X, Out, N, BLOCK: tl.constexpr):
    # B (m): running max and rescaled sum in one pass (online softmax), then the write pass: two reads
    row = tl.program_id(0).to(tl.int64) * N
    offs = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for c in range(0, N, BLOCK):
        x = tl.load(X + row + c + offs)
        m_new = tl.maximum(m, x)
        s = s * tl.exp2((m - m_new) * 1.4426950408889634) + tl.exp2((x - m_new) * 1.4426950408889634)
        m = m_new
    mx = tl.max(m, 0)
    inv = 1.0 / tl.sum(s * tl.exp2((m - mx) * 1.4426950408889634), 0)
    for c in range(0, N, BLOCK):
        tl.store(Out + row + c + offs, tl.exp2((tl.load(X + row + c + offs) - mx) * 1.4426950408889634) * inv)


@triton.jit
def stream_copy(X, Y, n, BLOCK: tl.constexpr):
    # healthy: a plain device copy (torch's copy_ of a contiguous tensor is a cudaMemcpy, not a kernel)
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(Y + offs, tl.load(X + offs, mask=mask), mask=mask)


# ===================================================================== the cases
@dataclass
class Case:
    id: str
    kind: str  # fix | healthy
    group: str
    cause: str  # expected catalog id for A, or 'healthy'
    what: str
    setup: Callable[[bool], dict]  # tiny -> state (tensors, shapes)
    a: Callable[[dict], torch.Tensor]  # fix: before; healthy: the kernel
    b: Callable[[dict], torch.Tensor] | None = None  # fix: after
    ref: Callable[[dict], torch.Tensor] | None = None  # torch reference (healthy; optional for fixes)
    tol: float = 1e-5  # max |x - y| / max |y|
    triton: bool = False  # has Triton kernels (run under the CPU interpreter by --smoke)
    gpu_only: bool = False  # --smoke skips it (SDPA's flash/cuDNN backends)
    alt: tuple[str, ...] = ()  # other causes that would also be a fair diagnosis of A


def _rand(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0, scale: float = 1.0) -> torch.Tensor:
    g = torch.Generator(device=DEV).manual_seed(seed)  # made on the GPU: GBs of inputs in milliseconds
    return (torch.randn(*shape, generator=g, device=DEV) * scale).to(dtype)


def _tf32(on: bool, fn: Callable[[], torch.Tensor]) -> torch.Tensor:
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = on
    try:
        return fn()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


# ---- (a) tile order
def _mm_setup(tiny: bool) -> dict:
    m, n, k = (64, 128, 64) if tiny else (8192, 16384, 4096)
    bm, bn, bk = (32, 32, 16) if tiny else (128, 128, 64)
    return {"a": _rand(m, k, dtype=HALF, seed=1), "b": _rand(k, n, dtype=HALF, seed=2),
            "c": torch.empty(m, n, dtype=HALF, device=DEV), "mnk": (m, n, k), "blk": (bm, bn, bk)}


def _mm_order(kernel: Callable) -> Callable[[dict], torch.Tensor]:
    def run(s: dict) -> torch.Tensor:
        (m, n, k), (bm, bn, bk) = s["mnk"], s["blk"]
        kernel[(triton.cdiv(m, bm) * triton.cdiv(n, bn),)](s["a"], s["b"], s["c"], m, n, k, BM=bm, BN=bn, BK=bk,
                                                           GROUP_M=8 if not INTERPRET else 2, num_warps=8,
                                                           num_stages=4)
        return s["c"]
    return run


# ---- (n) Triton fp32 GEMM
def _mm32_setup(tiny: bool) -> dict:
    m, n, k = (64, 64, 64) if tiny else (4096, 4096, 1024)
    return {"a": _rand(m, k, seed=3), "b": _rand(k, n, seed=4), "c": torch.empty(m, n, device=DEV), "mnk": (m, n, k),
            "blk": (32, 32, 16) if tiny else (128, 128, 32)}


def _mm32(kernel: Callable) -> Callable[[dict], torch.Tensor]:
    def run(s: dict) -> torch.Tensor:
        (m, n, k), (bm, bn, bk) = s["mnk"], s["blk"]
        kernel[(m // bm, n // bn)](s["a"], s["b"], s["c"], m, n, k, BM=bm, BN=bn, BK=bk, num_warps=8, num_stages=3)
        return s["c"]
    return run


# ---- (g) skinny GEMM, split-K
def _skinny_setup(tiny: bool) -> dict:
    m, n, k = (64, 64, 512) if tiny else (512, 512, 65536)
    split = 4 if tiny else 8
    return {"a": _rand(m, k, dtype=HALF, seed=5), "b": _rand(k, n, dtype=HALF, seed=6), "split": split,
            "c": torch.empty(m, n, device=DEV), "p": torch.empty(split, m, n, device=DEV), "mnk": (m, n, k),
            "blk": (32, 32, 16) if tiny else (128, 128, 64)}


def _skinny_a(s: dict) -> torch.Tensor:
    (m, n, k), (bm, bn, bk) = s["mnk"], s["blk"]
    skinny_mm_tile_per_block[(m // bm, n // bn)](s["a"], s["b"], s["c"], m, n, k, BM=bm, BN=bn, BK=bk, num_warps=8,
                                                 num_stages=4)
    return s["c"]


def _skinny_b(s: dict) -> torch.Tensor:
    (m, n, k), (bm, bn, bk) = s["mnk"], s["blk"]
    skinny_mm_split_k[(m // bm, n // bn, s["split"])](s["a"], s["b"], s["p"], m, n, k, BM=bm, BN=bn, BK=bk,
                                                      SPLIT=s["split"], num_warps=8, num_stages=4)
    block = 64 if INTERPRET else 1024
    skinny_mm_sum_slices[(m * n // block,)](s["p"], s["c"], m * n, SPLIT=s["split"], BLOCK=block, num_warps=4)
    return s["c"]


# ---- (b, c) Triton attention
def _attn_setup(tiny: bool) -> dict:
    h, n, d = (2, 64, 32) if tiny else (32, 4096, 128)
    q, k, v = (_rand(h, n, d, dtype=HALF, seed=10 + i) for i in range(3))
    return {"q": q, "k": k, "v": v, "o": torch.empty(h, n, d, dtype=HALF, device=DEV), "h": h, "n": n, "d": d,
            "bm": 16 if tiny else 128, "bn": 16 if tiny else 64, "scale": d ** -0.5 * LOG2E}


def _attn(kernel: Callable, warps: int, stages: int) -> Callable[[dict], torch.Tensor]:
    def run(s: dict) -> torch.Tensor:
        kernel[(s["n"] // s["bm"], s["h"])](s["q"], s["k"], s["v"], s["o"], s["scale"], s["n"], D=s["d"],
                                           BLOCK_M=s["bm"], BLOCK_N=s["bn"], num_warps=warps, num_stages=stages)
        return s["o"]
    return run


def _attn_ref(s: dict) -> torch.Tensor:
    return F.scaled_dot_product_attention(s["q"].float(), s["k"].float(), s["v"].float())


# ---- (d) transposed operand, (e) TF32, (h) fusion
def _tadd_setup(tiny: bool) -> dict:
    n = 64 if tiny else 8192
    x = _rand(n, n, seed=20)
    return {"x": x, "xt": x.t().contiguous(), "y": _rand(n, n, seed=21)}  # xt: made once, upstream


def _gemm_setup(m: int, n: int, k: int, dtype: torch.dtype) -> Callable[[bool], dict]:
    def setup(tiny: bool) -> dict:
        mm, nn, kk = (64, 64, 64) if tiny else (m, n, k)
        return {"a": _rand(mm, kk, dtype=dtype, seed=30), "b": _rand(kk, nn, dtype=dtype, seed=31)}
    return setup


def _vec_setup(n: int, dtype: torch.dtype = torch.float32) -> Callable[[bool], dict]:
    def setup(tiny: bool) -> dict:
        nn = 4096 if tiny else n
        return {"x": _rand(nn, dtype=dtype, seed=40), "y": _rand(nn, dtype=dtype, seed=41),
                "z": torch.empty(nn, dtype=dtype, device=DEV), "n": nn}
    return setup


def _fused_b(s: dict) -> torch.Tensor:
    block = 1024 if INTERPRET else 4096
    fused_scale_shift[(triton.cdiv(s["n"], block),)](s["x"], s["z"], s["n"], BLOCK=block, num_warps=8)
    return s["z"]


def _copy(s: dict) -> torch.Tensor:
    block = 1024 if INTERPRET else 8192
    stream_copy[(triton.cdiv(s["n"], block),)](s["x"], s["z"], s["n"], BLOCK=block, num_warps=8)
    return s["z"]


# ---- (l, m, o) row / column reductions
def _mat_setup(rows: int, cols: int, scale: float = 1.0) -> Callable[[bool], dict]:
    def setup(tiny: bool) -> dict:
        r, c = (16, 512) if tiny else (rows, cols)
        x = _rand(r, c, seed=50, scale=scale)
        return {"x": x, "r": r, "c": c, "o": torch.empty(r, c, device=DEV), "v": torch.empty(max(r, c), device=DEV)}
    return setup


def _rowsum(kernel: Callable, block: int, warps: int) -> Callable[[dict], torch.Tensor]:
    def run(s: dict) -> torch.Tensor:
        kernel[(s["r"],)](s["x"], s["v"], s["c"], BLOCK=min(block, s["c"]), num_warps=warps)
        return s["v"][: s["r"]]
    return run


def _colsum_a(s: dict) -> torch.Tensor:
    colsum_per_column[(s["c"],)](s["x"], s["v"], s["r"], s["c"], BLOCK_R=16 if INTERPRET else 256, num_warps=4)
    return s["v"][: s["c"]]


def _colsum_b(s: dict) -> torch.Tensor:
    colsum_tiled[(s["c"] // 32,)](s["x"], s["v"], s["r"], s["c"], BLOCK_R=16 if INTERPRET else 128, BLOCK_C=32,
                                  num_warps=4)
    return s["v"][: s["c"]]


def _softmax(kernel: Callable) -> Callable[[dict], torch.Tensor]:
    def run(s: dict) -> torch.Tensor:
        kernel[(s["r"],)](s["x"], s["o"], s["c"], BLOCK=128 if INTERPRET else 4096, num_warps=8)
        return s["o"]
    return run


# ---- (i, j, k) SDPA FlashAttention-2 vs cuDNN, and healthy library kernels
def _sdpa_setup(b: int, h: int, hkv: int, s_: int, d: int, causal: bool) -> Callable[[bool], dict]:
    def setup(tiny: bool) -> dict:
        q = _rand(b, h, s_, d, dtype=torch.bfloat16, seed=60)
        k, v = (_rand(b, hkv, s_, d, dtype=torch.bfloat16, seed=61 + i) for i in range(2))
        st = {"q": q, "k": k, "v": v, "causal": causal, "gqa": hkv != h}
        if hkv != h:  # for a backend without enable_gqa: K/V repeated per query head, made here (upstream)
            st["k_rep"], st["v_rep"] = (t.repeat_interleave(h // hkv, dim=1) for t in (k, v))
        return st
    return setup


def _sdpa(backend_name: str) -> Callable[[dict], torch.Tensor]:
    from torch.nn.attention import SDPBackend, sdpa_kernel
    backend = getattr(SDPBackend, backend_name)

    def run(s: dict) -> torch.Tensor:
        with sdpa_kernel([backend]):
            if s["gqa"] and s.get(f"native_{backend_name}", True):
                try:
                    return F.scaled_dot_product_attention(s["q"], s["k"], s["v"], is_causal=s["causal"],
                                                          enable_gqa=True)
                except RuntimeError as e:  # this backend has no GQA: use the repeated K/V from then on
                    s[f"native_{backend_name}"] = False
                    s.setdefault("notes", []).append(f"{backend_name}: no enable_gqa ({str(e)[:80]}); K/V repeated")
            k, v = (s["k_rep"], s["v_rep"]) if s["gqa"] else (s["k"], s["v"])
            return F.scaled_dot_product_attention(s["q"], k, v, is_causal=s["causal"])
    run.__name__ = f"sdpa_{backend_name.lower()}"
    return run


def _sdpa_ref(s: dict) -> torch.Tensor:
    k, v = (s["k_rep"], s["v_rep"]) if s["gqa"] else (s["k"], s["v"])
    from torch.nn.attention import SDPBackend, sdpa_kernel
    with sdpa_kernel([SDPBackend.MATH]):
        return F.scaled_dot_product_attention(s["q"].float(), k.float(), v.float(), is_causal=s["causal"])


def _ln_setup(tiny: bool) -> dict:
    r, c = (16, 256) if tiny else (16384, 8192)
    return {"x": _rand(r, c, dtype=torch.bfloat16, seed=70), "w": _rand(c, dtype=torch.bfloat16, seed=71),
            "b": _rand(c, dtype=torch.bfloat16, seed=72)}


def _fp32_ref(op: Callable[..., torch.Tensor], *keys: str) -> Callable[[dict], torch.Tensor]:
    def ref(s: dict) -> torch.Tensor:
        return op(*(s[k].float() for k in keys))
    return ref


def _a_name(f: Callable, name: str) -> Callable:
    f.__name__ = name
    return f


CASES: list[Case] = [
    # -------------------------------------------------------------------------------------- fixes
    Case("matmul_tile_order", "fix", "mm", "l2-thrashing",
         "bf16 GEMM 8192x16384x4096 (Triton, 128x128 tiles): row-major tile order -> GROUP_M=8 grouped order",
         _mm_setup, _mm_order(mm_row_major_order), _mm_order(mm_grouped_order),
         ref=lambda s: s["a"].float() @ s["b"].float(), tol=1e-2, triton=True, alt=("dram-bound",)),
    Case("matmul_tf32", "fix", "mm3", "no-tensor-cores",
         "torch fp32 matmul 4096^3: allow_tf32=False (FFMA SGEMM) -> allow_tf32=True (TF32 tensor cores)",
         _gemm_setup(4096, 4096, 4096, torch.float32),
         _a_name(lambda s: _tf32(False, lambda: s["a"] @ s["b"]), "matmul_fp32_ieee"),
         _a_name(lambda s: _tf32(True, lambda: s["a"] @ s["b"]), "matmul_fp32_tf32"),
         ref=_fp32_ref(torch.matmul, "a", "b"), tol=1e-2),
    Case("triton_dot_tf32", "fix", "mm2", "no-tensor-cores",
         "Triton fp32 GEMM 4096x4096x1024: tl.dot input_precision='ieee' -> 'tf32'",
         _mm32_setup, _mm32(mm_fp32_ieee), _mm32(mm_fp32_tf32), ref=lambda s: s["a"] @ s["b"], tol=1e-2,
         triton=True),
    Case("skinny_split_k", "fix", "mm2", "too-few-blocks",
         "bf16 GEMM 512x512x65536 (Triton): 16 tile blocks -> split-K x8 (128 blocks) + a sum kernel (B: 2 launches)",
         _skinny_setup, _skinny_a, _skinny_b, ref=lambda s: s["a"].float() @ s["b"].float(), tol=1e-3, triton=True),
    Case("attn_num_stages", "fix", "attn", "loads-not-pipelined",
         "Triton FA2 forward h32 s4096 d128 bf16, 128x64 tiles, 8 warps: num_stages=1 -> 3",
         _attn_setup, _attn(attn_stages1, 8, 1), _attn(attn_stages3, 8, 3), ref=_attn_ref, tol=2e-2, triton=True),
    Case("attn_num_warps", "fix", "attn", "occupancy-shared-memory",
         "Triton FA2 forward h32 s4096 d128 bf16, 128x64 tiles, 3 stages: num_warps=4 -> 8",
         _attn_setup, _attn(attn_warps4, 4, 3), _attn(attn_warps8, 8, 3), ref=_attn_ref, tol=2e-2, triton=True,
         alt=("latency-bound", "occupancy-registers")),
    Case("sdpa_d64", "fix", "attn", "legacy-mma",
         "SDPA b4 h16 s4096 d64 bf16 non-causal: FlashAttention-2 backend -> cuDNN backend",
         _sdpa_setup(4, 16, 16, 4096, 64, False), _sdpa("FLASH_ATTENTION"), _sdpa("CUDNN_ATTENTION"),
         ref=_sdpa_ref, tol=2e-2, gpu_only=True),
    Case("sdpa_d128_causal", "fix", "attn", "legacy-mma",
         "SDPA b4 h16 s4096 d128 bf16 causal: FlashAttention-2 backend -> cuDNN backend",
         _sdpa_setup(4, 16, 16, 4096, 128, True), _sdpa("FLASH_ATTENTION"), _sdpa("CUDNN_ATTENTION"),
         ref=_sdpa_ref, tol=2e-2, gpu_only=True),
    Case("sdpa_gqa", "fix", "attn", "legacy-mma",
         "SDPA GQA b1 h32 kv8 s4096 d128 bf16 non-causal: FlashAttention-2 -> cuDNN (enable_gqa, else K/V repeated)",
         _sdpa_setup(1, 32, 8, 4096, 128, False), _sdpa("FLASH_ATTENTION"), _sdpa("CUDNN_ATTENTION"),
         ref=_sdpa_ref, tol=2e-2, gpu_only=True),
    Case("transposed_add", "fix", "mem", "uncoalesced-global",
         "torch fp32 8192x8192: x.t() + y -> xt + y with xt = x.t().contiguous() made upstream",
         _tadd_setup, _a_name(lambda s: s["x"].t() + s["y"], "add_transposed"),
         _a_name(lambda s: s["xt"] + s["y"], "add_contiguous"), tol=0.0),
    Case("fuse_elementwise", "fix", "mem", "dram-bound",
         "2^27 fp32: torch y = x * 2; z = y + 1 (two kernels, A: 2 launches) -> one fused Triton kernel",
         _vec_setup(1 << 27), _a_name(lambda s: (s["x"] * 2) + 1, "torch_mul_then_add"), _fused_b, tol=0.0,
         triton=True),
    Case("rowsum_block", "fix", "mem", "latency-bound",
         "Triton row sums of 8192x8192 fp32: 1-warp programs, 32 floats a step -> 4 warps, 2048 floats a step",
         _mat_setup(8192, 8192), _rowsum(rowsum_narrow, 32, 1), _rowsum(rowsum_wide, 2048, 4),
         ref=lambda s: s["x"].sum(1), tol=1e-5, triton=True, alt=("occupancy-block-size",)),
    Case("colsum_layout", "fix", "mem", "uncoalesced-global",
         "Triton column sums of 8192x8192 fp32: one program per column (strided) -> 32-column tiles",
         _mat_setup(8192, 8192), _colsum_a, _colsum_b, ref=lambda s: s["x"].sum(0), tol=1e-5, triton=True),
    Case("softmax_online", "fix", "mem", "dram-bound",
         "Triton softmax of 4096x32768 fp32 rows: three passes over memory -> online max/sum + write pass",
         _mat_setup(4096, 32768, scale=3.0), _softmax(softmax_three_pass), _softmax(softmax_online),
         ref=lambda s: torch.softmax(s["x"], -1), tol=1e-5, triton=True),
    # -------------------------------------------------------------------------------------- healthy
    Case("h_gemm_bf16", "healthy", "healthy_mm", "healthy", "torch.matmul bf16 8192^3 (cuBLAS)",
         _gemm_setup(8192, 8192, 8192, torch.bfloat16), _a_name(lambda s: s["a"] @ s["b"], "matmul_bf16"),
         ref=_fp32_ref(torch.matmul, "a", "b"), tol=1e-2),
    Case("h_gemm_fp16", "healthy", "healthy_mm", "healthy", "torch.matmul fp16 4096^3 (cuBLAS)",
         _gemm_setup(4096, 4096, 4096, torch.float16), _a_name(lambda s: s["a"] @ s["b"], "matmul_fp16"),
         ref=_fp32_ref(torch.matmul, "a", "b"), tol=1e-2),
    Case("h_gemm_tf32", "healthy", "healthy_mm", "healthy", "torch.matmul fp32 with TF32 4096^3 (cuBLAS)",
         _gemm_setup(4096, 4096, 4096, torch.float32),
         _a_name(lambda s: _tf32(True, lambda: s["a"] @ s["b"]), "matmul_tf32"),
         ref=_fp32_ref(torch.matmul, "a", "b"), tol=1e-2),
    Case("h_gemm_skinny", "healthy", "healthy_mm", "healthy", "torch.matmul bf16 16384x1024x4096 (cuBLAS)",
         _gemm_setup(16384, 1024, 4096, torch.bfloat16), _a_name(lambda s: s["a"] @ s["b"], "matmul_bf16_skinny"),
         ref=_fp32_ref(torch.matmul, "a", "b"), tol=1e-2),
    Case("h_sdpa_cudnn", "healthy", "healthy_mm", "healthy", "SDPA cuDNN forward b1 h32 s4096 d128 bf16",
         _sdpa_setup(1, 32, 32, 4096, 128, False), _sdpa("CUDNN_ATTENTION"), ref=_sdpa_ref, tol=2e-2, gpu_only=True),
    Case("h_add", "healthy", "healthy_mem", "healthy", "torch.add of 2^28 fp32 (3 GiB moved)",
         _vec_setup(1 << 28), _a_name(lambda s: torch.add(s["x"], s["y"]), "add_fp32"),
         ref=lambda s: (s["x"].double() + s["y"].double()).float(), tol=0.0),
    Case("h_exp", "healthy", "healthy_mem", "healthy", "torch.exp of 2^27 bf16",
         _vec_setup(1 << 27, torch.bfloat16), _a_name(lambda s: torch.exp(s["x"]), "exp_bf16"),
         ref=lambda s: torch.exp(s["x"].float()), tol=1e-2),
    Case("h_sum", "healthy", "healthy_mem", "healthy", "torch.sum of 2^28 fp32 (a reduction)",
         _vec_setup(1 << 28), _a_name(lambda s: torch.sum(s["x"]), "sum_fp32"),
         ref=lambda s: s["x"].double().sum().float(), tol=1e-3),
    Case("h_copy", "healthy", "healthy_mem", "healthy", "Triton device copy of 2^28 fp32 (1 GiB)",
         _vec_setup(1 << 28), _copy, ref=lambda s: s["x"], tol=0.0, triton=True),
    Case("h_softmax", "healthy", "healthy_mem", "healthy", "torch.softmax over rows of 16384x16384 bf16",
         _a_name(lambda tiny: {"x": _rand(*((16, 256) if tiny else (16384, 16384)), dtype=torch.bfloat16, seed=80,
                                          scale=3.0)}, "softmax_setup"),
         _a_name(lambda s: torch.softmax(s["x"], -1), "softmax_bf16"),
         ref=lambda s: torch.softmax(s["x"].float(), -1), tol=1e-2),
    Case("h_layernorm", "healthy", "healthy_mem", "healthy", "F.layer_norm forward 16384x8192 bf16",
         _ln_setup, _a_name(lambda s: F.layer_norm(s["x"], (s["x"].shape[-1],), s["w"], s["b"]), "layer_norm_bf16"),
         ref=lambda s: F.layer_norm(s["x"].float(), (s["x"].shape[-1],), s["w"].float(), s["b"].float()), tol=2e-2),
]
GROUPS = sorted({c.group for c in CASES})


def _err(x: torch.Tensor, y: torch.Tensor) -> float:
    x, y = x.float(), y.float()
    if x.shape != y.shape or not bool(torch.isfinite(x).all()):
        return float("inf")
    return float((x - y).abs().max() / y.abs().max().clamp_min(1e-30))


def _sync() -> None:
    if DEV == "cuda":
        torch.cuda.synchronize()


def _check(c: Case, tiny: bool) -> tuple[bool, str]:
    s = c.setup(tiny)
    oa = c.a(s).clone()
    parts, ok = [], True
    if c.b is not None:
        e = _err(oa, c.b(s))
        ok &= e <= c.tol
        parts.append(f"A vs B {e:.3g}")
    if c.ref is not None:  # fp32 references on TF32 (error ~1e-3, inside every tolerance): seconds, not minutes
        e = _err(oa, _tf32(True, lambda: c.ref(s)))
        ok &= e <= max(c.tol, 2e-2 if c.kind == "fix" else c.tol)
        parts.append(f"vs torch {e:.3g}")
    _sync()
    notes = "; ".join(s.get("notes", []))
    return ok, ", ".join(parts) + (f" [{notes}]" if notes else "")


def _median_us(fn: Callable[[dict], torch.Tensor], s: dict, reps: int = 60) -> float:
    for _ in range(5):
        fn(s)
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(reps)]
    torch.cuda._sleep(200_000_000)  # the host queues every launch before the GPU reaches them: no host gaps timed
    for e0, e1 in ev:
        e0.record()
        fn(s)
        e1.record()
    torch.cuda.synchronize()
    t = sorted(e0.elapsed_time(e1) * 1e3 for e0, e1 in ev)
    return 0.5 * (t[reps // 2 - 1] + t[reps // 2])


def _smi() -> dict:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,clocks.max.sm,clocks.mem", "--format=csv,noheader,"
                              "nounits"], capture_output=True, text=True, timeout=10).stdout.split("\n")[0]
        keys = ("sm_clock_mhz", "max_sm_clock_mhz", "mem_clock_mhz")
        return dict(zip(keys, (int(v) for v in out.split(",")), strict=False))
    except Exception:  # noqa: BLE001 - cheap extra, never fatal
        return {}


def _selected(args: list[str]) -> list[Case]:
    return [c for c in CASES if not args or c.id in args or c.group in args]


def _record(c: Case) -> None:
    s = c.setup(False)
    runs = [("a", c.a), ("b", c.b)] if c.b is not None else [("", c.a)]
    for _, fn in runs:
        for _ in range(3):
            fn(s)
    torch.cuda.synchronize()
    for tag, fn in runs:
        torch.cuda.nvtx.range_push("measure")
        torch.cuda.nvtx.range_push(f"{c.id}.{tag}" if tag else c.id)
        fn(s)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_pop()


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    mode, rest = argv[0], argv[1:]
    if mode == "--list":
        for c in CASES:
            print(f"{c.id}\t{c.kind}\t{c.cause}\t{c.group}\t{c.what}")
        return 0
    failed = 0
    if mode in ("--check", "--smoke"):
        tiny = mode == "--smoke"
        for c in _selected(rest):
            if tiny and c.gpu_only:
                continue
            try:
                ok, msg = _check(c, tiny)
            except Exception as e:  # one case's failure must not hide the others
                ok, msg = False, f"error {type(e).__name__}: {str(e)[:300]}"
            print(f"check {c.id:18s} {c.kind:7s} {c.cause:24s} {'ok' if ok else 'FAIL'} ({msg})", flush=True)
            failed += not ok
            if DEV == "cuda":
                torch.cuda.empty_cache()
    elif mode == "--time":
        out, rows = rest[0], []
        for c in _selected(rest[1:]):
            try:
                s = c.setup(False)
                row: dict = {"id": c.id, "kind": c.kind, "cause": c.cause, "alt": list(c.alt), "group": c.group,
                             "what": c.what}
                if c.b is None:
                    row["time_us"] = round(_median_us(c.a, s), 2)
                    msg = f"{row['time_us']:10.1f} us"
                else:
                    row.update(a=c.a.__name__, b=c.b.__name__, time_a_us=round(_median_us(c.a, s), 2),
                               time_b_us=round(_median_us(c.b, s), 2))
                    row["a_over_b"] = round(row["time_a_us"] / row["time_b_us"], 3)
                    msg = f"A {row['time_a_us']:10.1f} us  B {row['time_b_us']:10.1f} us  A/B {row['a_over_b']:.2f}"
                if s.get("notes"):
                    row["notes"] = s["notes"]
                rows.append(row)
                print(f"time {c.id:18s} {c.cause:24s} {msg}", flush=True)
            except Exception as e:
                print(f"time {c.id}: error {type(e).__name__}: {str(e)[:500]}", flush=True)
                failed += 1
            torch.cuda.empty_cache()
        torch.cuda._sleep(2_000_000_000)  # the clocks are read while the GPU is busy (about a second)
        smi = _smi()
        torch.cuda.synchronize()
        with open(out, "w") as fh:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
                       "cudnn": torch.backends.cudnn.version(), **smi, "reps": 60, "warmups": 5,
                       "stat": "median of per-launch CUDA event times, queued behind torch.cuda._sleep",
                       "fixes": [r for r in rows if r["kind"] == "fix"],
                       "healthy": [r for r in rows if r["kind"] == "healthy"]}, fh, indent=1)
    elif mode == "--record":
        if not rest or any(g not in GROUPS for g in rest):
            print(f"--record GROUP: one of {GROUPS}")
            return 2
        for c in _selected(rest):
            try:
                _record(c)
                print(f"recorded {c.id}", flush=True)
            except Exception as e:
                print(f"record {c.id}: error {type(e).__name__}: {str(e)[:500]}", flush=True)
                failed += 1
            torch.cuda.empty_cache()
    else:
        print(f"unknown mode {mode}")
        return 2
    print("ok" if not failed else f"FAILED {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
