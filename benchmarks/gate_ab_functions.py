"""Attention functions for checking `profctl bench --ab` on the GPU (`benchmarks/gpu.sh gate-ab`).

    profctl bench --ab benchmarks/gate_ab_functions.py:attn,benchmarks/gate_ab_functions.py:attn_same -s 4096
    profctl bench --ab benchmarks/gate_ab_functions.py:attn,benchmarks/gate_ab_functions.py:attn_3pct -s 4096

`attn` and `attn_same` are the same code (PyTorch SDPA): an A/B of them must give an interval around 0.
`attn_3pct` is `attn` followed by one extra kernel sized to take 3 % of the attention's time, so the variant is
about 3 % slower, honestly and by construction: the extra kernel is ``torch.cuda._sleep(cycles)``, a kernel that
spins for a number of GPU clock cycles. Its cycles are calibrated at the first call for each shape: the
attention and a sleep of a known cycle count are each timed with CUDA events (median of 20), and the cycle count
is set to 3 % of the attention's time at the measured cycles per millisecond. A compute-bound attention and a
cycle-counted spin both scale with the SM clock, so the 3 % holds if the clock moves. The calibration (attention
time, sleep time, the fraction it aims at and the fraction measured back) is printed to stderr once per shape
(the A/B run's workload.log). On a CPU, `attn_3pct` repeats 3 % of the work instead (no calibration there).
"""

from __future__ import annotations

import statistics
import sys
from typing import Any

import torch
import torch.nn.functional as F

EXTRA = 0.03
_cycles: dict[tuple[Any, ...], int] = {}


def attn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False, scale: float | None = None,
         enable_gqa: bool = False) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)


def attn_same(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False, scale: float | None = None,
              enable_gqa: bool = False) -> torch.Tensor:
    return F.scaled_dot_product_attention(q, k, v, is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)


def _median_ms(fn: Any, reps: int = 20) -> float:
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def _calibrate(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kw: dict[str, Any]) -> int:
    """Cycles of torch.cuda._sleep that take EXTRA of the attention's time on this GPU, for this shape."""
    with torch.no_grad():
        for _ in range(5):
            attn(q, k, v, **kw)
        t_attn = _median_ms(lambda: attn(q, k, v, **kw))
        probe = 1_000_000
        torch.cuda._sleep(probe)
        t_probe = _median_ms(lambda: torch.cuda._sleep(probe))
        cycles = max(1, int(EXTRA * t_attn * probe / t_probe))
        t_both = _median_ms(lambda: (attn(q, k, v, **kw), torch.cuda._sleep(cycles)))
    print(f"gate_ab_functions: calibrated {tuple(q.shape)} {q.dtype}: attention {t_attn:.4f} ms, sleep of {probe} "
          f"cycles {t_probe:.4f} ms -> {cycles} cycles; attention+sleep / attention = {t_both / t_attn:.4f} "
          f"(aim {1 + EXTRA:.2f})", file=sys.stderr, flush=True)
    return cycles


def attn_3pct(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False, scale: float | None = None,
              enable_gqa: bool = False) -> torch.Tensor:
    kw: dict[str, Any] = {"is_causal": is_causal, "scale": scale, "enable_gqa": enable_gqa}
    out = attn(q, k, v, **kw)
    if q.is_cuda:
        key = (tuple(q.shape), tuple(k.shape), q.dtype, is_causal, q.requires_grad)
        if key not in _cycles:
            _cycles[key] = _calibrate(q.detach(), k.detach(), v.detach(), kw)
        torch.cuda._sleep(_cycles[key])
    else:  # no cycle-counted kernel on a CPU: 3 % more of the same work
        n = max(1, round(q.shape[-2] * EXTRA))
        attn(q[..., :n, :], k, v, **kw)
    return out


SLOWER = 0.30


def attn_1_3x(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False,
              scale: float | None = None, enable_gqa: bool = False) -> torch.Tensor:
    """`attn` and then 30 % more of the same work (the attention of 30 % of the queries again): a planted
    slowdown of about 1.3x on any device, for benchmarks/run_noise.py --bench (does the gate catch it?)."""
    kw: dict[str, Any] = {"is_causal": is_causal, "scale": scale, "enable_gqa": enable_gqa}
    out = attn(q, k, v, **kw)
    n = max(1, round(q.shape[-2] * SLOWER))
    attn(q[..., :n, :], k, v, **kw)
    return out


def _planted(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, extra: float, kw: dict[str, Any]) -> torch.Tensor:
    """`attn` and then `extra` more of the same work (the attention of that share of the queries again, whole
    attentions first): a slowdown of about 1 + extra on any device."""
    out = attn(q, k, v, **kw)
    whole, part = int(extra), extra - int(extra)
    for _ in range(whole):
        attn(q, k, v, **kw)
    if part > 0:
        attn(q[..., :max(1, round(q.shape[-2] * part)), :], k, v, **kw)
    return out


def attn_1_1x(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False,
              scale: float | None = None, enable_gqa: bool = False) -> torch.Tensor:
    """A planted 1.1x: `attn` and 10 % of the queries again (benchmarks/run_noise.py --bench)."""
    return _planted(q, k, v, 0.10, {"is_causal": is_causal, "scale": scale, "enable_gqa": enable_gqa})


def attn_2x(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, is_causal: bool = False,
            scale: float | None = None, enable_gqa: bool = False) -> torch.Tensor:
    """A planted 2x: the attention twice (benchmarks/run_noise.py --bench)."""
    return _planted(q, k, v, 1.0, {"is_causal": is_causal, "scale": scale, "enable_gqa": enable_gqa})
