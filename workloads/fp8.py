"""FP8 (e4m3) attention inputs: per-tensor quantization, dequantization, and a float64 emulation of what
profctl's Triton FP8 forward computes. Plain torch, no Triton: the workload, the tests and the tolerance study
(benchmarks/fp8_tolerance.py) share it.

The convention is FlashAttention-3's: a backend gets e4m3 tensors ``q8, k8, v8`` and one descale factor per
tensor (``x ~= x8 * x_descale``); it folds ``q_descale * k_descale`` into the softmax scale, rounds the
probabilities P to e4m3 for the P @ V product, and multiplies the output accumulator by ``v_descale`` at the end.
So against attention of the *dequantized* inputs the only rounding left is P's: e4m3 keeps 3 mantissa bits
(a relative step of 2^-3, round-to-nearest error up to 2^-4), and that sets the tolerance (docs/bench.md,
"FP8").
"""

from __future__ import annotations

import math

import torch

#: the largest finite e4m3 (``torch.float8_e4m3fn``) value
E4M3_MAX = 448.0
E4M3 = torch.float8_e4m3fn


def quantize(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(x8, descale): ``x / descale`` rounded to e4m3 (to nearest, ties to even) with ``descale = amax(|x|) / 448``
    (1 for an all-zero tensor), so the largest magnitude lands on e4m3's largest value. descale is a one-element
    float32 tensor on x's device: a kernel reads it without a host sync."""
    xf = x.detach().float()
    amax = xf.abs().amax() if xf.numel() else torch.zeros((), device=x.device)
    descale = torch.where(amax > 0, amax / E4M3_MAX, torch.ones_like(amax)).reshape(1)
    x8 = (xf / descale).clamp(-E4M3_MAX, E4M3_MAX).to(E4M3)
    return x8, descale


def dequantize(x8: torch.Tensor, descale: torch.Tensor | float, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """``x8 * descale`` in `dtype` (float64 by default: exact, as e4m3 times a float32 needs 28 bits)."""
    d = descale if isinstance(descale, float) else descale.to(dtype).reshape(())
    return x8.to(dtype) * d


def round_e4m3(x: torch.Tensor) -> torch.Tensor:
    """`x` rounded to the nearest e4m3 value (ties to even), in x's dtype: what the kernel's cast of P does."""
    return x.float().clamp(-E4M3_MAX, E4M3_MAX).to(E4M3).to(x.dtype)


def emulate(q8: torch.Tensor, k8: torch.Tensor, v8: torch.Tensor, descales: tuple[torch.Tensor, ...],
            causal: bool, scale: float, diag_off: int = 0, block_n: int = 128,
            round_p: bool = True) -> torch.Tensor:
    """The Triton FP8 forward in float64, key block by key block: scores of the dequantized q and k, an online
    softmax (running max per row), P = exp(s - running max) rounded to e4m3 (``round_p``) before P @ V, the row
    sums of the unrounded P, and v_descale applied at the end. (batch, heads, seqlen, dim) inputs, GQA by
    ``kv head = head // (heads // kv_heads)``; query i sees key j iff ``j <= i + diag_off`` when causal; rows that
    see no key give 0. With ``round_p=False`` it is exact attention of the dequantized inputs."""
    qd, kd, vd = descales
    q = dequantize(q8, qd)
    k = dequantize(k8, kd)
    v = v8.double()  # v_descale is applied to the accumulator at the end, as the kernel does
    rep = q.shape[1] // k.shape[1]
    if rep > 1:
        k = k.repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
    sq, skv = q.shape[2], k.shape[2]
    m = torch.full(q.shape[:3], -math.inf, dtype=torch.float64, device=q.device)
    l_sum = torch.zeros(q.shape[:3], dtype=torch.float64, device=q.device)
    acc = torch.zeros(q.shape, dtype=torch.float64, device=q.device)
    rows = torch.arange(sq, device=q.device)[:, None]
    for start in range(0, skv, block_n):
        kb, vb = k[:, :, start:start + block_n], v[:, :, start:start + block_n]
        s = (q @ kb.transpose(-1, -2)) * scale
        if causal:
            cols = torch.arange(start, start + kb.shape[2], device=q.device)[None, :]
            s = s.masked_fill(cols > rows + diag_off, -math.inf)
        m_new = torch.maximum(m, s.amax(-1))
        m_safe = torch.where(torch.isfinite(m_new), m_new, torch.zeros_like(m_new))
        p = torch.exp(s - m_safe[..., None])
        alpha = torch.exp(m - m_safe)
        l_sum = l_sum * alpha + p.sum(-1)
        acc = acc * alpha[..., None] + (round_e4m3(p) if round_p else p) @ vb
        m = m_new
    out = acc * (float(vd) if isinstance(vd, float) else vd.double().reshape(())) / \
        torch.where(l_sum > 0, l_sum, torch.ones_like(l_sum))[..., None]
    return out
