"""FLOP counts pinned on small shapes, both causal alignments, GQA, and every pass."""

import itertools

import pytest

from profctl.flops import PASS_FACTOR, flops, forward_flops, unmasked_pairs
from profctl.spec import AttentionSpec


def brute_pairs(sq: int, skv: int, causal: bool, align: str) -> int:
    """Count visible pairs one by one, straight from the mask definitions."""
    off = 0 if align == "top-left" else skv - sq
    return sum(1 for i in range(sq) for j in range(skv) if not causal or j <= i + off)


@pytest.mark.parametrize(("sq", "skv", "causal", "align", "expected"), [
    (4, 4, False, "top-left", 16),
    (4, 4, True, "top-left", 10),
    (4, 4, True, "bottom-right", 10),      # equal lengths: both alignments agree
    (2, 4, True, "top-left", 3),           # rows see 1, 2 keys
    (2, 4, True, "bottom-right", 7),       # rows see 3, 4 keys
    (4, 2, True, "top-left", 7),           # rows see 1, 2, 2, 2
    (4, 2, True, "bottom-right", 3),       # rows see 0, 0, 1, 2 (first two fully masked)
    (1, 8, True, "top-left", 1),
    (1, 8, True, "bottom-right", 8),       # decoding: the one query sees every key
])
def test_pairs_pinned(sq: int, skv: int, causal: bool, align: str, expected: int) -> None:
    assert unmasked_pairs(sq, skv, causal, align) == expected


def test_pairs_match_brute_force() -> None:
    for sq, skv in itertools.product([1, 2, 3, 5, 8, 13, 31], repeat=2):
        for causal, align in [(False, "top-left"), (True, "top-left"), (True, "bottom-right")]:
            assert unmasked_pairs(sq, skv, causal, align) == brute_pairs(sq, skv, causal, align), (sq, skv, align)


def test_forward_flops_formula_and_alignment_per_backend() -> None:
    base = dict(batch=2, seqlen_q=2, seqlen_kv=4, heads=8, kv_heads=2, head_dim=16, causal=True)
    sdpa = AttentionSpec(backend="sdpa-flash", **base)
    fa4 = AttentionSpec(backend="fa4", **base)
    eager = AttentionSpec(backend="eager", **base)
    assert forward_flops(sdpa) == 4 * 2 * 8 * 3 * 16      # top-left: 3 pairs; query heads, not kv heads
    assert forward_flops(eager) == forward_flops(sdpa)     # the baseline follows SDPA
    assert forward_flops(fa4) == 4 * 2 * 8 * 7 * 16       # bottom-right: 7 pairs


def test_gqa_counts_query_heads() -> None:
    mha = AttentionSpec(backend="eager", heads=8, kv_heads=8, seqlen_q=64, seqlen_kv=64, head_dim=32)
    gqa = mha.with_(kv_heads=2)
    mqa = mha.with_(kv_heads=1)
    assert forward_flops(mha) == forward_flops(gqa) == forward_flops(mqa) == 4 * 8 * 64 * 64 * 32


def test_pass_factors() -> None:
    s = AttentionSpec(backend="sdpa-math", batch=1, heads=2, kv_heads=2, seqlen_q=8, seqlen_kv=8, head_dim=4)
    f = forward_flops(s)
    assert flops(s) == f
    assert flops(s.with_(pass_="bwd")) == 2.5 * f
    assert flops(s.with_(pass_="fwd+bwd")) == 3.5 * f
    assert PASS_FACTOR == {"fwd": 1.0, "bwd": 2.5, "fwd+bwd": 3.5}


def test_causal_equal_lengths_is_half_plus_diagonal() -> None:
    s = AttentionSpec(backend="sdpa-flash", batch=1, heads=1, kv_heads=1, seqlen_q=4096, seqlen_kv=4096,
                      head_dim=128, causal=True)
    assert forward_flops(s) == 4 * 128 * (4096 * 4097 // 2)


def test_bad_alignment_and_lengths() -> None:
    with pytest.raises(ValueError):
        unmasked_pairs(4, 4, True, "diagonal")
    with pytest.raises(ValueError):
        unmasked_pairs(0, 4, False)
