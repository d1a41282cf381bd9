"""What every picture of profctl's shares: matplotlib's Agg backend (:func:`require`), a figure as PNG bytes, each
backend's colour and each kernel class's, when an axis goes logarithmic, and a bar chart of named values. The
backend table's plots are in profctl.render.backend_table_plots.

matplotlib is the optional extra ``plot``; without it, :func:`require` raises a one-line error.
"""

from __future__ import annotations

import io
from typing import Any

from profctl.errors import ToolNotFound

BACKEND_ORDER = ("fa4", "flash-attn", "sdpa-cudnn", "sdpa-flash", "sdpa-efficient", "sdpa-math", "eager")
COLORS = {"fa4": "#d62728", "flash-attn": "#ff7f0e", "sdpa-cudnn": "#2ca02c", "sdpa-flash": "#1f77b4",
          "sdpa-efficient": "#9467bd", "sdpa-math": "#8c564b", "eager": "#7f7f7f"}
CLASS_COLORS = {"gemm": "#1f77b4", "softmax": "#ff7f0e", "elementwise": "#2ca02c", "reduce": "#9467bd",
                "flash_fwd": "#d62728", "flash_bwd": "#e377c2", "other": "#bcbd22"}
MARKERS = {"flash_fwd": "o", "flash_bwd": "s", "gemm": "^", "softmax": "v", "elementwise": "D", "other": "x"}
DPI = 100
#: lines of one backend (its colour) in several cases are told apart by marker and dash


def require() -> Any:
    """matplotlib.pyplot on the Agg backend, or a one-line error naming the extra to install."""
    try:
        import matplotlib
    except ModuleNotFoundError:
        raise ToolNotFound("plots need matplotlib, which is not installed",
                           hint="install it with: pip install 'profctl[plot]'") from None
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def png_bytes(fig: Any) -> bytes:
    plt = require()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def color(backend: str) -> str:
    return COLORS.get(backend, "#17becf")


LOG_SPAN = 10.0


def log_axis(values: list[float]) -> bool:
    """Whether values this far apart need a log axis (positive and spanning LOG_SPAN or more)."""
    pos = [v for v in values if v and v > 0]
    return len(pos) >= 2 and max(pos) / min(pos) >= LOG_SPAN


def bars(labels: list[str], values: list[float], *, xlabel: str, title: str,
         colors: list[str] | None = None) -> bytes | None:
    """A horizontal bar chart, the largest bar on top, each bar with its number (a summary's kernels, CPU ops or
    ranges by time); None without a positive value. A linear axis from zero, unless the values span a decade."""
    cs: list[str] = list(colors or []) + ["#1f77b4"] * len(labels)
    pairs = [(lab, v, cs[i]) for i, (lab, v) in enumerate(zip(labels, values, strict=False)) if v > 0]
    if not pairs:
        return None
    plt = require()
    pairs = pairs[::-1]  # barh draws the first at the bottom
    fig, ax = plt.subplots(figsize=(7.6, 0.32 * len(pairs) + 1.4))
    ax.barh(range(len(pairs)), [p[1] for p in pairs], color=[p[2] for p in pairs])
    ax.set_yticks(range(len(pairs)))
    ax.set_yticklabels([p[0] if len(p[0]) <= 48 else p[0][:30] + "…" + p[0][-17:] for p in pairs], fontsize=7)
    for i, p in enumerate(pairs):
        ax.annotate(f" {p[1]:.3g}", (p[1], i), va="center", fontsize=7)
    if log_axis([p[1] for p in pairs]):
        ax.set_xscale("log")
        xlabel += " (log scale)"
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    ax.grid(True, axis="x", alpha=0.3)
    return png_bytes(fig)
