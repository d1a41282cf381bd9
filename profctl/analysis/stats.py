"""The statistics of every comparison profctl makes, in one place: bench runs, kernel and op summaries, and the
interleaved A/B runs of ``profctl bench --ab`` all use these functions, so one verdict means one thing.

* :func:`bootstrap_ratio`: median(new) / median(base) with a percentile bootstrap interval, both sides
  resampled independently (bench iterations, kernel launches, op calls);
* :func:`bootstrap_paired`: the same ratio for interleaved A/B rounds, resampling whole rounds for both
  sides at once (paired);
* :func:`decide`: the verdict from a ratio, its interval and the threshold;
* :func:`noise_floor`: the smallest change a comparison could have seen (half the interval's width).

Medians because a few slow instances (a context switch, a clock ramp) should not move the answer; a bootstrap
because per-instance times are skewed and a ratio of medians has no handy closed form; a ratio because it reads
as "+4 %" and is the same for time and TFLOP/s.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Sequence
from typing import Any

DEFAULT_THRESHOLD = 0.02
DEFAULT_CONFIDENCE = 0.95
DEFAULT_RESAMPLES = 4000
#: fewer samples than this on either side (iterations, instances, rounds): no interval
MIN_SAMPLES = 5


def seed_of(key: Any) -> int:
    """A generator seed from what is compared, so the same inputs always give the same interval."""
    return int.from_bytes(hashlib.sha256(repr(key).encode()).digest()[:8], "little")


def bootstrap_ratio(base: Iterable[float], new: Iterable[float], *, confidence: float = DEFAULT_CONFIDENCE,
                    resamples: int = DEFAULT_RESAMPLES, seed: int = 0) -> tuple[float, float, float]:
    """(median(new) / median(base), lo, hi): the percentile bootstrap interval of the ratio of medians."""
    import numpy as np

    a = np.asarray(list(base), dtype=float)
    b = np.asarray(list(new), dtype=float)
    if a.size == 0 or b.size == 0:
        raise ValueError("empty sample")
    ma0, mb0 = float(np.median(a)), float(np.median(b))
    if ma0 <= 0 or mb0 <= 0:
        raise ValueError("non-positive median time")
    rng = np.random.default_rng(seed)
    out = np.empty(resamples)
    chunk = max(1, 2_000_000 // max(a.size, b.size))
    for s in range(0, resamples, chunk):
        k = min(chunk, resamples - s)
        ma = np.median(a[rng.integers(0, a.size, (k, a.size))], axis=1)
        mb = np.median(b[rng.integers(0, b.size, (k, b.size))], axis=1)
        out[s:s + k] = mb / ma
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(out, [alpha, 1.0 - alpha])
    return mb0 / ma0, float(lo), float(hi)


def bootstrap_paired(base_rounds: Sequence[Sequence[float]], new_rounds: Sequence[Sequence[float]], *,
                     confidence: float = DEFAULT_CONFIDENCE, resamples: int = DEFAULT_RESAMPLES,
                     seed: int = 0) -> tuple[float, float, float]:
    """(median(new) / median(base), lo, hi) for interleaved A/B rounds: the ratio of the medians of all
    iterations, with a percentile bootstrap that resamples whole rounds, the same rounds for both sides, so
    what a round's conditions did to both stays paired. Pooling a round's iterations before taking medians
    keeps a burst of load (a few slow iterations in one block) from deciding a round."""
    import numpy as np

    if len(base_rounds) != len(new_rounds) or not base_rounds:
        raise ValueError("the two sides need the same rounds")
    a_all = np.concatenate([np.asarray(r, dtype=float) for r in base_rounds])
    b_all = np.concatenate([np.asarray(r, dtype=float) for r in new_rounds])
    ma0, mb0 = float(np.median(a_all)), float(np.median(b_all))
    if a_all.size == 0 or b_all.size == 0 or ma0 <= 0 or mb0 <= 0:
        raise ValueError("empty sample or non-positive median time")
    rng = np.random.default_rng(seed)
    n = len(base_rounds)
    out = np.empty(resamples)
    for s in range(resamples):
        idx = rng.integers(0, n, n)
        ma = np.median(np.concatenate([base_rounds[i] for i in idx]))
        mb = np.median(np.concatenate([new_rounds[i] for i in idx]))
        out[s] = mb / ma
    alpha = (1.0 - confidence) / 2.0
    lo, hi = np.quantile(out, [alpha, 1.0 - alpha])
    return mb0 / ma0, float(lo), float(hi)


def decide(ratio: float, lo: float | None, hi: float | None, threshold: float) -> tuple[str, str | None]:
    """The verdict for a time ratio and its interval (None: no interval, a plain threshold), and why it is
    inconclusive when it is."""
    up, down = 1.0 + threshold, 1.0 / (1.0 + threshold)
    if lo is None or hi is None:
        if ratio >= up:
            return "slower", None
        if ratio <= down:
            return "faster", None
        return "unchanged", None
    if lo > 1.0 and ratio >= up:
        return "slower", None
    if hi < 1.0 and ratio <= down:
        return "faster", None
    if lo >= down and hi <= up:
        return "unchanged", None
    return "inconclusive", f"the interval {pct_change(lo)}..{pct_change(hi)} reaches past ±{threshold * 100:g}%"


def noise_floor(lo: float | None, hi: float | None) -> float | None:
    """The smallest change (a fraction) the comparison could have told from noise: half the interval's width,
    on the log scale (``sqrt(hi/lo) - 1``). A true change of about this size just moves the interval off 1;
    a smaller one would read as no change. None without an interval."""
    if lo is None or hi is None or lo <= 0 or hi <= 0:
        return None
    return math.exp((math.log(hi) - math.log(lo)) / 2.0) - 1.0


def samples_needed(n: int, lo: float, hi: float, threshold: float) -> int:
    """Samples for an interval half as wide as the band (the width shrinks as 1/sqrt(n))."""
    half = (math.log(hi) - math.log(lo)) / 2
    target = math.log(1.0 + threshold) / 2
    if half <= 0 or target <= 0:
        return n
    return math.ceil(n * (half / target) ** 2)


def pct_change(r: float | None) -> str:
    """A ratio as a signed percentage change ('+4.0%'); '-' for None."""
    return "-" if r is None else f"{(r - 1.0) * 100:+.1f}%"


def pct(x: float | None) -> str:
    """A fraction as an unsigned ±percentage ('±0.4%'); '-' for None."""
    return "-" if x is None else f"±{x * 100:.1f}%"


__all__ = ["DEFAULT_CONFIDENCE", "DEFAULT_RESAMPLES", "DEFAULT_THRESHOLD", "MIN_SAMPLES", "bootstrap_paired",
           "bootstrap_ratio", "decide", "noise_floor", "pct", "pct_change", "samples_needed", "seed_of"]
