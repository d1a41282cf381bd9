"""FLOP accounting for attention, following each backend's causal-mask alignment and the workload's mask.

forward  = 4 * batch * query_heads * visible(q, k) pairs * head_dim   (two GEMMs of 2*d FLOPs per pair)
backward = 2.5 x forward  (five GEMMs against the forward's two)
fwd+bwd  = 3.5 x forward

Only pairs the mask leaves visible are counted: the useful work. The mask is causal (with the backend's
alignment), a sliding window (``--window W``: a query sees the W keys up to its own diagonal, and the W - 1 after
it when not causal) and documents packed into one sequence (``--docs``: a query sees keys of its own document
only), in any combination. Backends that compute the masked pairs anyway (eager, sdpa-math) are credited with the
same useful FLOPs, so TFLOP/s compares like with like; a block-sparse kernel computes whole tiles, and
:func:`tile_pairs` counts the pairs of the tiles it cannot skip (the waste of partial tiles).
"""

from __future__ import annotations

from itertools import pairwise

from profctl.shapes import doc_lengths
from profctl.spec import AttentionSpec

PASS_FACTOR = {"fwd": 1.0, "bwd": 2.5, "fwd+bwd": 3.5}


def _offset(seqlen_q: int, seqlen_kv: int, align: str) -> int:
    if align == "top-left":
        return 0
    if align == "bottom-right":
        return seqlen_kv - seqlen_q
    raise ValueError(f"unknown causal alignment {align!r}")


def _band(seqlen_q: int, seqlen_kv: int, causal: bool, window: int | None) -> tuple[int, int]:
    """(lo, hi): row i (diagonal d = i + offset) sees keys d + lo <= j <= d + hi before clamping to the keys."""
    if window is not None and window <= 0:
        raise ValueError(f"a window must be positive, got {window}")
    big = seqlen_q + seqlen_kv  # beyond every key from every row
    lo = -(window - 1) if window else -big
    hi = 0 if causal else (window - 1 if window else big)
    return lo, hi


def _band_pairs(seqlen_q: int, seqlen_kv: int, causal: bool, align: str, window: int | None) -> int:
    """Pairs of one sequence (no documents): sum over rows of |[d + lo, d + hi] & [0, seqlen_kv)|, in O(1)."""
    if seqlen_q <= 0 or seqlen_kv <= 0:
        raise ValueError("sequence lengths must be positive")
    off = _offset(seqlen_q, seqlen_kv, align)
    lo, hi = _band(seqlen_q, seqlen_kv, causal, window)
    # row i sees clamp(i + off + hi + 1, 0, skv) - clamp(i + off + lo, 0, skv) keys (both ends move by one a row,
    # and the first never passes the second, so the difference is never negative)
    return _sum_clamped(seqlen_q, off + hi + 1, seqlen_kv) - _sum_clamped(seqlen_q, off + lo, seqlen_kv)


def unmasked_pairs(seqlen_q: int, seqlen_kv: int, causal: bool, align: str = "top-left") -> int:
    """Number of (query, key) pairs the causal mask leaves visible, per batch and head.

    top-left:     query i sees keys 0..i                       (PyTorch SDPA is_causal)
    bottom-right: query i sees keys 0..i + seqlen_kv - seqlen_q (FlashAttention >= 2.1, FA4)
    Rows that see no key (bottom-right with seqlen_q > seqlen_kv) contribute nothing.
    """
    return visible_pairs(seqlen_q, seqlen_kv, causal, align)


def visible_pairs(seqlen_q: int, seqlen_kv: int, causal: bool, align: str | None = "top-left",
                  window: int | None = None, docs: tuple[int, ...] = ()) -> int:
    """Pairs the whole mask leaves visible, per batch and head: causal (with `align`), a sliding `window`, and
    `docs` (profctl.shapes.doc_lengths: a query sees its own document's keys only; it needs seqlen_q ==
    seqlen_kv, and each document is then its own square sequence)."""
    align = align or "top-left"
    if not docs:
        return _band_pairs(seqlen_q, seqlen_kv, causal, align, window)
    if seqlen_q != seqlen_kv:
        raise ValueError(f"documents need one sequence for queries and keys, got {seqlen_q} and {seqlen_kv}")
    return sum(_band_pairs(n, n, causal, align, window) for n in doc_lengths(docs, seqlen_q))


def tile_pairs(seqlen_q: int, seqlen_kv: int, causal: bool, align: str | None = "top-left",
               window: int | None = None, docs: tuple[int, ...] = (), block_m: int = 128,
               block_n: int = 128) -> tuple[int, int, int]:
    """What a block-sparse kernel with `block_m` x `block_n` tiles computes, per batch and head: (tiles with at least
    one visible pair, all tiles, the pairs of those tiles). A tile at the end of a sequence counts only the pairs
    that exist. FlexAttention's block mask (128 x 128) and profctl's Triton forward skip the other tiles."""
    align = align or "top-left"
    if docs and seqlen_q != seqlen_kv:
        raise ValueError(f"documents need one sequence for queries and keys, got {seqlen_q} and {seqlen_kv}")
    off = _offset(seqlen_q, seqlen_kv, align)
    lo, hi = _band(seqlen_q, seqlen_kv, causal, window)
    starts = [0]
    for n in doc_lengths(docs, seqlen_q) if docs else [seqlen_q]:
        starts.append(starts[-1] + n)
    spans = list(pairwise(starts)) if docs else [(0, max(seqlen_q, seqlen_kv))]
    used = pairs = total = 0
    for r0 in range(0, seqlen_q, block_m):
        r1 = min(r0 + block_m, seqlen_q)
        for c0 in range(0, seqlen_kv, block_n):
            c1 = min(c0 + block_n, seqlen_kv)
            total += 1
            if any(_tile_visible(max(r0, a), min(r1, b), max(c0, a), min(c1, b), off, lo, hi) for a, b in spans):
                used += 1
                pairs += (r1 - r0) * (c1 - c0)
    return used, total, pairs


def _tile_visible(r0: int, r1: int, c0: int, c1: int, off: int, lo: int, hi: int) -> bool:
    """Whether rows [r0, r1) and keys [c0, c1) (both inside one document, where there are documents) hold a
    visible pair: the rows' bands move by one a row and touch, so together they cover [first row's lo, last row's
    hi]. (Documents need seqlen_q == seqlen_kv, so `off` is 0 there and a document's band is the sequence's.)"""
    if r0 >= r1 or c0 >= c1:
        return False
    return max(r0 + off + lo, c0) <= min(r1 - 1 + off + hi, c1 - 1)


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


def spec_pairs(spec: AttentionSpec) -> int:
    """The visible pairs of one (batch, head) of `spec`, with its backend's alignment and its mask."""
    return visible_pairs(spec.seqlen_q, spec.seqlen_kv, spec.causal, spec.mask_align, spec.window, spec.docs)


def forward_flops(spec: AttentionSpec) -> int:
    return 4 * spec.batch * spec.heads * spec_pairs(spec) * spec.head_dim


def flops(spec: AttentionSpec, pass_: str | None = None) -> float:
    """FLOPs of one iteration of `spec`'s pass (or of `pass_` when given)."""
    return forward_flops(spec) * PASS_FACTOR[pass_ or spec.pass_]


def tflops(flop_count: float, seconds: float) -> float:
    return flop_count / seconds / 1e12 if seconds > 0 else float("nan")
