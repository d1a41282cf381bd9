"""Ladders: kernels with TWO faults, and each fault fixed alone, then both (issue 47; see README.md here).

A LADDER is one kernel written four ways, each its own @triton.jit function (ncu's base names tell them apart):
`both` (both faults), `fix_<x>` (fault X fixed, Y remains), `fix_<y>` (Y fixed, X remains) and `clean` (both fixed).
All four compute the same result from the same inputs and are checked against a float reference. The line carrying
a fault ends with `# FAULT: <cause-id>` (the catalog id, docs/diagnosis.md); a fault in the launch configuration
is marked on the launch line. Plain script, independent of profctl.

    python ladders.py --list                    ladder, rung, kernel, faults left, what
    python ladders.py --check [ladder..]        full size on the GPU: every rung against a float reference
    python ladders.py --time OUT.json [..]      median of 60 per-launch CUDA-event times after 5 warm-ups
    python ladders.py --record GROUP            3 warm-ups each, then one call per rung in the NVTX range
                                                measure/<ladder>.<rung> (torch.cuda.synchronize around it)
    python ladders.py --smoke                   CPU, TRITON_INTERPRET=1: every rung at tiny shapes
    python ladders.py --manifest TIMES.json OUT writes manifest.json from this file's ladders and the times

Works with Triton 3.6 (the GPU machine) and 3.9 (the CPU interpreter).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

if "--smoke" in sys.argv:
    os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
DEV = "cpu" if INTERPRET else ("cuda" if torch.cuda.is_available() else "cpu")
LOG2E = 1.4426950408889634
HALF = torch.float16 if INTERPRET else torch.bfloat16  # the interpreter's bf16 dots are wrong
REPS, WARMUPS = 60, 5


# ===================================================================== GEMM tile (ladders gemm_tiles, gemm_order)
@triton.jit
def _gemm_tile(A, B, C, pid_m, pid_n, K, lda, ldb, ldc, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # C[tile] = A[rows, :K] @ B[:K, cols] in fp32, stored in C's type; row strides lda, ldb, ldc
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    a_ptr = A + rm[:, None] * lda + rk[None, :]
    b_ptr = B + rk[:, None] * ldb + rn[None, :]
    acc = tl.zeros([BM, BN], tl.float32)
    for _ in range(0, K, BK):
        acc = tl.dot(tl.load(a_ptr), tl.load(b_ptr), acc)
        a_ptr += BK
        b_ptr += BK * ldb
    tl.store(C + rm[:, None] * ldc + rn[None, :], acc.to(C.dtype.element_ty))


# ---- ladder gemm_tiles: 1024x1024x16384 bf16. Faults: num_stages=1 (loads-not-pipelined) and 128x256 tiles,
# 32 blocks for 132 SMs (too-few-blocks). Fixes: num_stages=3; 64x128 tiles (128 blocks).
@triton.jit
def gemm_tiles_both(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # both faults: 128x256 tiles (32 blocks), launched with num_stages=1
    _gemm_tile(A, B, C, tl.program_id(0), tl.program_id(1), K, K, N, N, BM, BN, BK)  # FAULT: loads-not-pipelined


@triton.jit
def gemm_tiles_fix_stages(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # loads pipelined (num_stages=3); still 128x256 tiles: 32 blocks
    _gemm_tile(A, B, C, tl.program_id(0), tl.program_id(1), K, K, N, N, BM, BN, BK)


@triton.jit
def gemm_tiles_fix_grid(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # 64x128 tiles: 128 blocks; still num_stages=1
    _gemm_tile(A, B, C, tl.program_id(0), tl.program_id(1), K, K, N, N, BM, BN, BK)  # FAULT: loads-not-pipelined


@triton.jit
def gemm_tiles_clean(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    # 64x128 tiles (128 blocks), num_stages=3
    _gemm_tile(A, B, C, tl.program_id(0), tl.program_id(1), K, K, N, N, BM, BN, BK)


# ---- ladder gemm_order: 8192x16384x4096 bf16, 128x128x64 tiles. Faults: row-major tile order (l2-thrashing: a
# wave of 132 tiles spans about one row of C and streams all of B, 128 MB, more than L2) and num_stages=1
# (loads-not-pipelined). Fixes: GROUP_M=8 grouped order; num_stages=4.
@triton.jit
def gemm_order_both(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    grid_n = tl.cdiv(N, BN)
    pid_m = pid // grid_n  # FAULT: l2-thrashing
    pid_n = pid % grid_n
    _gemm_tile(A, B, C, pid_m, pid_n, K, K, N, N, BM, BN, BK)  # FAULT: loads-not-pipelined


@triton.jit
def gemm_order_fix_order(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                         GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BM)
    width = GROUP_M * tl.cdiv(N, BN)
    first_m = (pid // width) * GROUP_M
    size_m = tl.minimum(grid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % width) % size_m
    pid_n = (pid % width) // size_m
    _gemm_tile(A, B, C, pid_m, pid_n, K, K, N, N, BM, BN, BK)  # FAULT: loads-not-pipelined


@triton.jit
def gemm_order_fix_stages(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                          GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    grid_n = tl.cdiv(N, BN)
    pid_m = pid // grid_n  # FAULT: l2-thrashing
    pid_n = pid % grid_n
    _gemm_tile(A, B, C, pid_m, pid_n, K, K, N, N, BM, BN, BK)


@triton.jit
def gemm_order_clean(A, B, C, M, N, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BM)
    width = GROUP_M * tl.cdiv(N, BN)
    first_m = (pid // width) * GROUP_M
    size_m = tl.minimum(grid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % width) % size_m
    pid_n = (pid % width) // size_m
    _gemm_tile(A, B, C, pid_m, pid_n, K, K, N, N, BM, BN, BK)


# ===================================================================== ladder field: one field of a struct array
# y[i] = 2 * x[i].f0 + 1 for 2^25 particles of 16 fp32 fields. Faults: the field read from the array of structs
# (64-byte stride: one useful float per 32-byte sector; uncoalesced-global) and a grid-stride loop launched on a
# fixed 32 blocks (too-few-blocks). Fixes: the field stored as its own array (structure of arrays, made upstream);
# one block per 1024 elements.
@triton.jit
def _field_body(X, Y, n, STRIDE: tl.constexpr, BLOCK: tl.constexpr):
    for start in range(tl.program_id(0) * BLOCK, n, tl.num_programs(0) * BLOCK):
        offs = start + tl.arange(0, BLOCK)
        mask = offs < n
        x = tl.load(X + offs * STRIDE, mask=mask)
        tl.store(Y + offs, x * 2.0 + 1.0, mask=mask)


@triton.jit
def field_both(X, Y, n, FIELDS: tl.constexpr, BLOCK: tl.constexpr):
    # X: the array of structs (n, FIELDS); launched on 32 blocks
    _field_body(X, Y, n, FIELDS, BLOCK)  # FAULT: uncoalesced-global


@triton.jit
def field_fix_layout(X, Y, n, FIELDS: tl.constexpr, BLOCK: tl.constexpr):
    # X: the field's own array (structure of arrays); still 32 blocks
    _field_body(X, Y, n, 1, BLOCK)


@triton.jit
def field_fix_grid(X, Y, n, FIELDS: tl.constexpr, BLOCK: tl.constexpr):
    # one block per BLOCK elements; still the array of structs
    _field_body(X, Y, n, FIELDS, BLOCK)  # FAULT: uncoalesced-global


@triton.jit
def field_clean(X, Y, n, FIELDS: tl.constexpr, BLOCK: tl.constexpr):
    _field_body(X, Y, n, 1, BLOCK)


# ===================================================================== ladder causal: causal attention forward
# FlashAttention-2 forward, h32 s4096 d128 bf16, 128x64 tiles, 8 warps. Faults: the KV loop runs over every block
# and the mask zeroes the upper half (wasted-work: 2x the matrix work) and num_stages=1 (loads-not-pipelined).
# Fixes: the loop stops at the diagonal; num_stages=3.
@triton.jit
def _causal_body(Q, K, V, Out, qk_scale, N_CTX, hi, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # Q, K, V, Out: (heads, n_ctx, D) contiguous; program = (BLOCK_M query rows, head); KV blocks [0, hi)
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, D)
    base = tl.program_id(1).to(tl.int64) * N_CTX * D
    q = tl.load(Q + base + offs_m[:, None] * D + offs_d[None, :])
    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    for start in range(0, hi, BLOCK_N):
        k = tl.load(K + base + (start + offs_n)[None, :] * D + offs_d[:, None])
        v = tl.load(V + base + (start + offs_n)[:, None] * D + offs_d[None, :])
        qk = tl.dot(q, k)
        qk = tl.where(offs_m[:, None] >= (start + offs_n)[None, :], qk, float("-inf"))  # the causal mask
        m_new = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
        p = tl.exp2(qk * qk_scale - m_new[:, None])
        alpha = tl.exp2(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    tl.store(Out + base + offs_m[:, None] * D + offs_d[None, :], (acc / l_i[:, None]).to(Out.dtype.element_ty))


@triton.jit
def causal_both(Q, K, V, Out, qk_scale, N_CTX, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    hi = N_CTX  # FAULT: wasted-work
    _causal_body(Q, K, V, Out, qk_scale, N_CTX, hi, D, BLOCK_M, BLOCK_N)  # FAULT: loads-not-pipelined


@triton.jit
def causal_fix_skip(Q, K, V, Out, qk_scale, N_CTX, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    hi = (tl.program_id(0) + 1) * BLOCK_M  # the KV blocks at or left of the diagonal
    _causal_body(Q, K, V, Out, qk_scale, N_CTX, hi, D, BLOCK_M, BLOCK_N)  # FAULT: loads-not-pipelined


@triton.jit
def causal_fix_stages(Q, K, V, Out, qk_scale, N_CTX, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    hi = N_CTX  # FAULT: wasted-work
    _causal_body(Q, K, V, Out, qk_scale, N_CTX, hi, D, BLOCK_M, BLOCK_N)


@triton.jit
def causal_clean(Q, K, V, Out, qk_scale, N_CTX, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    hi = (tl.program_id(0) + 1) * BLOCK_M
    _causal_body(Q, K, V, Out, qk_scale, N_CTX, hi, D, BLOCK_M, BLOCK_N)


# ===================================================================== the ladders
@dataclass
class Fault:
    key: str  # the rung fix_<key> removes it
    cause: str  # catalog id
    fix: str  # what removes it


@dataclass
class Ladder:
    id: str
    what: str
    x: Fault
    y: Fault
    setup: Callable[[bool], dict]
    rungs: dict[str, Callable[[dict], torch.Tensor]]  # both, fix_<x>, fix_<y>, clean
    ref: Callable[[dict], torch.Tensor]
    tol: float
    alt: dict[str, list[str]] = field(default_factory=dict)  # cause -> other ids that would be a fair diagnosis
    shape: str | None = None  # explain's --shape for an attention kernel (the NVTX ranges name none)

    @property
    def group(self) -> str:
        return self.id

    def faults_left(self, rung: str) -> list[str]:
        return {"both": [self.x.cause, self.y.cause], f"fix_{self.x.key}": [self.y.cause],
                f"fix_{self.y.key}": [self.x.cause], "clean": []}[rung]

    def kernel(self, rung: str) -> str:
        return f"{self.id}_{rung}"


def _rand(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0, scale: float = 1.0) -> torch.Tensor:
    g = torch.Generator(device=DEV).manual_seed(seed)  # made on the GPU: GBs of inputs in milliseconds
    return (torch.randn(*shape, generator=g, device=DEV) * scale).to(dtype)


def _tf32(fn: Callable[[], torch.Tensor]) -> torch.Tensor:
    if DEV != "cuda":
        return fn()
    old = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True  # fp32 references in seconds (error ~1e-3, inside the tolerances)
    try:
        return fn()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old


# ---- gemm_tiles
def _tiles_setup(tiny: bool) -> dict:
    m, n, k = (64, 64, 128) if tiny else (1024, 1024, 16384)
    return {"a": _rand(m, k, dtype=HALF, seed=1, scale=0.1), "b": _rand(k, n, dtype=HALF, seed=2),
            "c": torch.empty(m, n, dtype=HALF, device=DEV), "mnk": (m, n, k), "tiny": tiny}


def _tiles(kernel: Callable, big: bool, stages: int) -> Callable[[dict], torch.Tensor]:
    def run(s: dict) -> torch.Tensor:
        (m, n, k) = s["mnk"]
        if s["tiny"]:
            (bm, bn, bk), warps = ((32, 64, 32) if big else (16, 32, 32)), 4
        else:
            (bm, bn, bk), warps = ((128, 256, 64), 8) if big else ((64, 128, 64), 4)  # big: 32 blocks
        kernel[(m // bm, n // bn)](s["a"], s["b"], s["c"], m, n, k, BM=bm, BN=bn, BK=bk, num_warps=warps,
                                   num_stages=stages)
        return s["c"]
    run.__name__ = kernel.__name__
    return run


# ---- gemm_order
def _order_setup(tiny: bool) -> dict:
    m, n, k = (64, 128, 64) if tiny else (8192, 16384, 4096)
    bm, bn, bk = (16, 16, 16) if tiny else (128, 128, 64)
    return {"a": _rand(m, k, dtype=HALF, seed=3), "b": _rand(k, n, dtype=HALF, seed=4, scale=0.1),
            "c": torch.empty(m, n, dtype=HALF, device=DEV), "mnk": (m, n, k), "blk": (bm, bn, bk)}


def _order(kernel: Callable, stages: int) -> Callable[[dict], torch.Tensor]:
    def run(s: dict) -> torch.Tensor:
        (m, n, k), (bm, bn, bk) = s["mnk"], s["blk"]
        kernel[(triton.cdiv(m, bm) * triton.cdiv(n, bn),)](s["a"], s["b"], s["c"], m, n, k, BM=bm, BN=bn, BK=bk,
                                                           GROUP_M=2 if INTERPRET else 8, num_warps=8,
                                                           num_stages=stages)
        return s["c"]
    run.__name__ = kernel.__name__
    return run


def _mm_ref(s: dict) -> torch.Tensor:
    return s["a"].float() @ s["b"].float()


# ---- field
FIELDS = 16


def _field_setup(tiny: bool) -> dict:
    n = 4096 if tiny else 1 << 25
    aos = _rand(n, FIELDS, seed=20)  # 2 GiB: the particles as an array of structs
    return {"aos": aos, "soa": aos.t().contiguous(), "y": torch.empty(n, device=DEV), "n": n, "tiny": tiny}


def _field(kernel: Callable, soa: bool, few: bool) -> Callable[[dict], torch.Tensor]:
    def run(s: dict) -> torch.Tensor:
        block = 128 if s["tiny"] else 1024
        grid = (4 if s["tiny"] else 32) if few else triton.cdiv(s["n"], block)  # FAULT: too-few-blocks (few)
        kernel[(grid,)](s["soa"] if soa else s["aos"], s["y"], s["n"], FIELDS=FIELDS, BLOCK=block, num_warps=4)
        return s["y"]
    run.__name__ = kernel.__name__
    return run


# ---- causal
def _causal_setup(tiny: bool) -> dict:
    h, n, d = (2, 64, 32) if tiny else (32, 4096, 128)
    q, k, v = (_rand(h, n, d, dtype=HALF, seed=10 + i) for i in range(3))
    return {"q": q, "k": k, "v": v, "o": torch.empty(h, n, d, dtype=HALF, device=DEV), "h": h, "n": n, "d": d,
            "bm": 16 if tiny else 128, "bn": 16 if tiny else 64, "scale": d ** -0.5 * LOG2E}


def _causal(kernel: Callable, stages: int) -> Callable[[dict], torch.Tensor]:
    def run(s: dict) -> torch.Tensor:
        kernel[(s["n"] // s["bm"], s["h"])](s["q"], s["k"], s["v"], s["o"], s["scale"], s["n"], D=s["d"],
                                           BLOCK_M=s["bm"], BLOCK_N=s["bn"], num_warps=8, num_stages=stages)
        return s["o"]
    run.__name__ = kernel.__name__
    return run


def _causal_ref(s: dict) -> torch.Tensor:
    return F.scaled_dot_product_attention(s["q"].float(), s["k"].float(), s["v"].float(), is_causal=True)


LADDERS: list[Ladder] = [
    Ladder("gemm_tiles", "Triton bf16 GEMM 1024x1024x16384: 128x256 tiles (32 blocks), num_stages=1",
           Fault("stages", "loads-not-pipelined", "num_stages=1 -> 3"),
           Fault("grid", "too-few-blocks", "128x256 tiles, 8 warps (32 blocks) -> 64x128 tiles, 4 warps (128 blocks)"),
           _tiles_setup,
           {"both": _tiles(gemm_tiles_both, True, 1),  # FAULT: too-few-blocks (128x256 tiles)
            "fix_stages": _tiles(gemm_tiles_fix_stages, True, 3),  # FAULT: too-few-blocks (128x256 tiles)
            "fix_grid": _tiles(gemm_tiles_fix_grid, False, 1),
            "clean": _tiles(gemm_tiles_clean, False, 3)},
           _mm_ref, 1e-2),
    Ladder("gemm_order", "Triton bf16 GEMM 8192x16384x4096, 128x128x64 tiles, 8 warps: row-major tile order, "
           "num_stages=1",
           Fault("order", "l2-thrashing", "row-major tile order -> GROUP_M=8 grouped order"),
           Fault("stages", "loads-not-pipelined", "num_stages=1 -> 4"),
           _order_setup,
           {"both": _order(gemm_order_both, 1), "fix_order": _order(gemm_order_fix_order, 1),
            "fix_stages": _order(gemm_order_fix_stages, 4), "clean": _order(gemm_order_clean, 4)},
           _mm_ref, 1e-2, alt={"l2-thrashing": ["dram-bound"]}),
    Ladder("field", "Triton y = 2 x.f0 + 1 over 2^25 structs of 16 fp32 (2 GiB): strided field read on 32 blocks",
           Fault("layout", "uncoalesced-global", "array of structs (64-byte stride) -> the field's own array "
                 "(structure of arrays, made upstream)"),
           Fault("grid", "too-few-blocks", "grid-stride loop on 32 blocks -> one 4-warp block per 1024 elements"),
           _field_setup,
           {"both": _field(field_both, False, True), "fix_layout": _field(field_fix_layout, True, True),
            "fix_grid": _field(field_fix_grid, False, False), "clean": _field(field_clean, True, False)},
           lambda s: s["aos"][:, 0].double() * 2 + 1, 1e-6, alt={"too-few-blocks": ["latency-bound"]}),
    Ladder("causal", "Triton causal FlashAttention-2 forward h32 s4096 d128 bf16, 128x64 tiles, 8 warps: every KV "
           "block computed and masked, num_stages=1",
           Fault("skip", "wasted-work", "loop over every KV block, upper half masked -> stop at the diagonal"),
           Fault("stages", "loads-not-pipelined", "num_stages=1 -> 3"),
           _causal_setup,
           {"both": _causal(causal_both, 1), "fix_skip": _causal(causal_fix_skip, 1),
            "fix_stages": _causal(causal_fix_stages, 3), "clean": _causal(causal_clean, 3)},
           _causal_ref, 2e-2, shape="b1,s4096,h32,d128,bf16,causal"),
]
GROUPS = [ld.group for ld in LADDERS]
OUT = {"gemm_tiles": "c", "gemm_order": "c", "field": "y", "causal": "o"}  # each ladder's output tensor


def _err(x: torch.Tensor, y: torch.Tensor) -> float:
    x, y = x.double(), y.double()
    if x.shape != y.shape or not bool(torch.isfinite(x).all()):
        return float("inf")
    return float((x - y).abs().max() / y.abs().max().clamp_min(1e-30))


def _sync() -> None:
    if DEV == "cuda":
        torch.cuda.synchronize()


def _check(ld: Ladder, tiny: bool) -> list[tuple[str, bool, str]]:
    s = ld.setup(tiny)
    ref = _tf32(lambda: ld.ref(s))
    out = []
    for rung, fn in ld.rungs.items():
        s[OUT[ld.id]].fill_(float("nan"))  # a rung that writes nothing must not pass on the previous rung's result
        e = _err(fn(s).clone(), ref)
        out.append((rung, e <= ld.tol, f"vs float reference {e:.3g} (tol {ld.tol:g})"))
    _sync()
    return out


def _median_us(fn: Callable[[dict], torch.Tensor], s: dict, reps: int = REPS) -> float:
    for _ in range(WARMUPS):
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
    except Exception:  # cheap extra, never fatal
        return {}


def _selected(args: list[str]) -> list[Ladder]:
    return [ld for ld in LADDERS if not args or ld.id in args or ld.group in args]


def _record(ld: Ladder) -> None:
    s = ld.setup(False)
    for fn in ld.rungs.values():
        for _ in range(3):
            fn(s)
    torch.cuda.synchronize()
    for rung, fn in ld.rungs.items():
        torch.cuda.nvtx.range_push("measure")
        torch.cuda.nvtx.range_push(f"{ld.id}.{rung}")
        fn(s)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
        torch.cuda.nvtx.range_pop()


def manifest(times: dict) -> dict:
    """The ground truth: per ladder its faults, which rung removes which, its rungs' kernels and times."""
    by = {ld["id"]: ld for ld in times.get("ladders", [])}
    out = []
    for ld in LADDERS:
        t = by.get(ld.id, {}).get("time_us", {})
        rungs = []
        for rung in ld.rungs:
            rungs.append({"rung": rung, "kernel": ld.kernel(rung), "nvtx": f"measure/{ld.id}.{rung}",
                          "faults": ld.faults_left(rung), "time_us": t.get(rung)})
        x, y = f"fix_{ld.x.key}", f"fix_{ld.y.key}"
        # the pairs: a rung against the rung with one more fault fixed; the gap is what that fix gained there
        pairs = [{"a": a, "b": b, "removed": c, "gap_us": round(t[a] - t[b], 2) if a in t and b in t else None}
                 for a, b, c in (("both", x, ld.x.cause), ("both", y, ld.y.cause), (x, "clean", ld.y.cause),
                                 (y, "clean", ld.x.cause))]
        out.append({"id": ld.id, "group": ld.group, "report": f"ladders_{ld.group}.ncu-rep.xz",
                    "details": f"ladders_{ld.group}_details.csv.xz", "what": ld.what, "shape": ld.shape,
                    "faults": [{"key": f.key, "cause": f.cause, "alt": ld.alt.get(f.cause, []), "fix": f.fix,
                                "removed_in": [f"fix_{f.key}", "clean"]} for f in (ld.x, ld.y)],
                    "rungs": rungs, "pairs": pairs,
                    "joint_gain_us": round(t["both"] - t["clean"], 2) if "both" in t and "clean" in t else None})
    keep = ("device", "torch", "triton", "sm_clock_mhz", "max_sm_clock_mhz", "mem_clock_mhz", "reps", "warmups",
            "stat")
    return {"schema": "profctl.ladders/1", **{k: times[k] for k in keep if k in times}, "ladders": out}


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__)
        return 2
    mode, rest = argv[0], argv[1:]
    if mode == "--list":
        for ld in LADDERS:
            for rung in ld.rungs:
                print(f"{ld.id}\t{rung}\t{ld.kernel(rung)}\t{','.join(ld.faults_left(rung)) or '-'}\t{ld.what}")
        return 0
    if mode == "--manifest":
        with open(rest[0]) as fh:
            times = json.load(fh)
        with open(rest[1], "w") as fh:
            json.dump(manifest(times), fh, indent=1)
            fh.write("\n")
        return 0
    failed = 0
    if mode in ("--check", "--smoke"):
        for ld in _selected(rest):
            try:
                rows = _check(ld, mode == "--smoke")
            except Exception as e:  # one ladder's failure must not hide the others
                rows = [("*", False, f"error {type(e).__name__}: {str(e)[:300]}")]
            for rung, ok, msg in rows:
                print(f"check {ld.id:11s} {rung:11s} {'ok' if ok else 'FAIL'} ({msg})", flush=True)
                failed += not ok
            if DEV == "cuda":
                torch.cuda.empty_cache()
    elif mode == "--time":
        out, rows = rest[0], []
        for ld in _selected(rest[1:]):
            try:
                s = ld.setup(False)
                t = {rung: round(_median_us(fn, s), 2) for rung, fn in ld.rungs.items()}
                rows.append({"id": ld.id, "kernels": {r: ld.kernel(r) for r in ld.rungs}, "time_us": t})
                print(f"time {ld.id:11s} " + "  ".join(f"{r} {v:9.1f} us" for r, v in t.items()), flush=True)
                del s
            except Exception as e:
                print(f"time {ld.id}: error {type(e).__name__}: {str(e)[:500]}", flush=True)
                failed += 1
            torch.cuda.empty_cache()
        torch.cuda._sleep(2_000_000_000)  # the clocks are read while the GPU is busy (about a second)
        smi = _smi()
        torch.cuda.synchronize()
        with open(out, "w") as fh:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
                       **smi, "reps": REPS, "warmups": WARMUPS,
                       "stat": "median of per-launch CUDA event times, queued behind torch.cuda._sleep",
                       "ladders": rows}, fh, indent=1)
    elif mode == "--record":
        if not rest or any(g not in GROUPS for g in rest):
            print(f"--record GROUP: one of {GROUPS}")
            return 2
        for ld in _selected(rest):
            try:
                _record(ld)
                print(f"recorded {ld.id}", flush=True)
            except Exception as e:
                print(f"record {ld.id}: error {type(e).__name__}: {str(e)[:500]}", flush=True)
                failed += 1
            torch.cuda.empty_cache()
    else:
        print(f"unknown mode {mode}")
        return 2
    print("ok" if not failed else f"FAILED {failed}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
