"""GPT-2- and Llama-2-shaped transformers for timing attention *inside* a model: the library's one import.

The attention workload (workloads/attention.py) times one attention call. This library times the same kernels
where they live: a training step (forward, loss, backward, AdamW), a prefill over a prompt into a KV cache, and
one decode step against a filled KV cache, with the attention call swappable (``attn_fn`` follows
``torch.nn.functional.scaled_dot_product_attention``'s convention, so SDPA itself, SDPA pinned to a backend by
the caller, FlashAttention behind an adapter, or :func:`eager_attention` all plug in).

One entry point for the runner: :func:`run_model_case` returns a result row (status ok/oom/error/unsupported,
times, tokens/s, FLOPs, memory, per-part times). Pure functions: :func:`model_flops`, :func:`mfu`,
:func:`param_count`, :func:`estimate_bytes`. Range names a profiler can select on: :data:`RANGE_NAMES`.
docs/models.md has the presets' shapes and every formula.

Each idea has its module, its names also reachable here (imported on first use):

| module | what |
|---|---|
| presets | ModelConfig, PRESETS, preset (pure Python) |
| arithmetic | param_count, model_flops, mfu, estimate_bytes, OutOfMemoryBudget (pure Python, no torch) |
| marks | the range protocol, RANGE_NAMES, and the autograd marks that bracket backward parts |
| part_timer | PartTimer: per-part times without a profiler |
| net | the network (Transformer, KVCache, eager_attention, build_model, make_tokens) |
| steps | train_step, prefill, decode_step, make_optimizer, sdpa_backend_fn |
| runner | run_model_case (one point, its row) and summarize |

No GPU is needed to import or run this library (gpt-tiny runs on CPU in milliseconds).
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from profctl.spec import MODES

if TYPE_CHECKING:
    from .arithmetic import OutOfMemoryBudget, estimate_bytes, mfu, model_flops, param_count
    from .marks import RANGE_NAMES, NullRanges, Ranges, TeeRanges
    from .net import KVCache, Transformer, build_model, eager_attention, make_tokens
    from .part_timer import PartTimer
    from .presets import PRESETS, ModelConfig, preset
    from .runner import run_model_case, summarize
    from .steps import decode_step, make_optimizer, prefill, sdpa_backend_fn, train_step

#: where each name of the library lives: imported on first use, so that the pure-Python modules
#: (arithmetic, presets) import without torch
_HOME = {
    "KVCache": "net", "ModelConfig": "presets", "NullRanges": "marks", "OutOfMemoryBudget": "arithmetic",
    "PRESETS": "presets", "PartTimer": "part_timer", "RANGE_NAMES": "marks", "Ranges": "marks",
    "TeeRanges": "marks", "Transformer": "net", "build_model": "net", "decode_step": "steps",
    "eager_attention": "net", "estimate_bytes": "arithmetic", "make_optimizer": "steps", "make_tokens": "net",
    "mfu": "arithmetic", "model_flops": "arithmetic", "param_count": "arithmetic", "prefill": "steps",
    "preset": "presets", "run_model_case": "runner", "sdpa_backend_fn": "steps", "summarize": "runner",
    "train_step": "steps",
}


def __getattr__(name: str) -> Any:
    """The library's names, from their modules on first use (PEP 562)."""
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{home}", __name__), name)


__all__ = [
    "MODES",
    "PRESETS",
    "RANGE_NAMES",
    "KVCache",
    "ModelConfig",
    "NullRanges",
    "OutOfMemoryBudget",
    "PartTimer",
    "Ranges",
    "TeeRanges",
    "Transformer",
    "build_model",
    "decode_step",
    "eager_attention",
    "estimate_bytes",
    "make_optimizer",
    "make_tokens",
    "mfu",
    "model_flops",
    "param_count",
    "prefill",
    "preset",
    "run_model_case",
    "sdpa_backend_fn",
    "summarize",
    "train_step",
]
