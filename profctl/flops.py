"""FLOP accounting for attention, following each backend's causal-mask alignment.

forward  = 4 * batch * query_heads * unmasked(q, k) pairs * head_dim   (two GEMMs of 2*d FLOPs per pair)
backward = 2.5 x forward  (five GEMMs against the forward's two)
fwd+bwd  = 3.5 x forward

Only pairs the mask leaves visible are counted: the useful work. Backends that compute the masked pairs
anyway (eager, sdpa-math) are credited with the same useful FLOPs, so TFLOP/s compares like with like.
"""

from __future__ import annotations

from profctl.spec import AttentionSpec

PASS_FACTOR = {"fwd": 1.0, "bwd": 2.5, "fwd+bwd": 3.5}


def unmasked_pairs(seqlen_q: int, seqlen_kv: int, causal: bool, align: str = "top-left") -> int:
    """Number of (query, key) pairs the mask leaves visible, per batch and head.

    top-left:     query i sees keys 0..i                       (PyTorch SDPA is_causal)
    bottom-right: query i sees keys 0..i + seqlen_kv - seqlen_q (FlashAttention >= 2.1, FA4)
    Rows that see no key (bottom-right with seqlen_q > seqlen_kv) contribute nothing.
    """
    if seqlen_q <= 0 or seqlen_kv <= 0:
        raise ValueError("sequence lengths must be positive")
    if not causal:
        return seqlen_q * seqlen_kv
    if align == "top-left":
        offset = 0
    elif align == "bottom-right":
        offset = seqlen_kv - seqlen_q
    else:
        raise ValueError(f"unknown causal alignment {align!r}")
    # row i sees clamp(i + offset + 1, 0, seqlen_kv) keys; sum in closed form
    return _sum_clamped(seqlen_q, offset + 1, seqlen_kv)


def _sum_clamped(n: int, start: int, cap: int) -> int:
    """sum_{i=0}^{n-1} min(max(i + start, 0), cap), in O(1)."""
    total = 0
    # rows with i + start <= 0 contribute 0: i <= -start
    i0 = max(0, -start + 1)  # first row with positive count
    if i0 >= n:
        return 0
    # rows where i + start < cap: linear part, i < cap - start
    i1 = min(n, max(i0, cap - start))  # first row that hits the cap
    if i1 > i0:
        a, b = i0 + start, (i1 - 1) + start
        total += (a + b) * (i1 - i0) // 2
    total += (n - i1) * cap
    return total


def forward_flops(spec: AttentionSpec) -> int:
    pairs = unmasked_pairs(spec.seqlen_q, spec.seqlen_kv, spec.causal, spec.causal_align or "top-left")
    return 4 * spec.batch * spec.heads * pairs * spec.head_dim


def flops(spec: AttentionSpec, pass_: str | None = None) -> float:
    """FLOPs of one iteration of `spec`'s pass (or of `pass_` when given)."""
    return forward_flops(spec) * PASS_FACTOR[pass_ or spec.pass_]


def tflops(flop_count: float, seconds: float) -> float:
    return flop_count / seconds / 1e12 if seconds > 0 else float("nan")
