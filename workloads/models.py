"""GPT-2- and Llama-2-shaped transformers for timing attention *inside* a model.

The attention workload (workloads/attention.py) times one attention call. This module times the same kernels
where they live: a training step (forward, loss, backward, AdamW), a prefill over a prompt into a KV cache, and
one decode step against a filled KV cache, with the attention call swappable (``attn_fn`` follows
``torch.nn.functional.scaled_dot_product_attention``'s convention, so SDPA itself, SDPA pinned to a backend by
the caller, FlashAttention behind an adapter, or :func:`eager_attention` all plug in).

One entry point for the runner: :func:`run_model_case` returns a result row (status ok/oom/error/unsupported,
times, tokens/s, FLOPs, memory, per-part times). Pure functions: :func:`model_flops`, :func:`mfu`,
:func:`param_count`, :func:`estimate_bytes`. Range names a profiler can select on: :data:`RANGE_NAMES`.
docs/models.md has the presets' shapes and every formula.

No GPU is needed to import or run this module (gpt-tiny runs on CPU in milliseconds).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import math
import statistics
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

import torch
import torch.nn.functional as F
from torch import nn

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

MODES: tuple[str, ...] = ("train", "prefill", "decode")

#: The range names the model opens, in the order a training step meets them. ``attn.core`` is exactly the
#: attn_fn call (the part a faster attention kernel changes); rotary embedding lives in ``attn.qkv``; the
#: residual adds sit outside every part. Parts run in backward are bracketed by the same name on autograd's
#: thread (see _MarkBegin/_MarkEnd).
RANGE_NAMES: tuple[str, ...] = ("embed", "norm", "attn.qkv", "attn.core", "attn.out", "mlp", "head", "loss",
                                "backward", "optimizer", "decode.step")

DTYPES: dict[str, torch.dtype] = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}

AttnFn = Callable[..., torch.Tensor]


# ================================================================================================ configuration
@dataclass(frozen=True)
class ModelConfig:
    """A decoder-only transformer's shape. ``vocab`` is the number of embedding/LM-head rows (padded);
    token ids are drawn from ``[0, vocab_real)``."""

    name: str
    family: str  # "gpt" (LayerNorm, GELU MLP, learned positions, biases) or "llama" (RMSNorm, SwiGLU, rotary)
    layers: int
    d_model: int
    heads: int
    kv_heads: int
    head_dim: int
    mlp_hidden: int
    vocab: int
    vocab_real: int
    max_seqlen: int
    norm: str  # "layernorm" | "rmsnorm"
    norm_eps: float
    mlp: str  # "gelu" (tanh approximation, GPT-2's gelu_new) | "swiglu"
    positions: str  # "learned" | "rotary"
    rope_theta: float = 10000.0
    tied_embeddings: bool = False
    bias: bool = False

    def __post_init__(self) -> None:
        for f in ("layers", "d_model", "heads", "kv_heads", "head_dim", "mlp_hidden", "vocab", "vocab_real",
                  "max_seqlen"):
            if int(getattr(self, f)) <= 0:
                raise ValueError(f"{self.name}: {f} must be positive, got {getattr(self, f)}")
        if self.heads % self.kv_heads:
            raise ValueError(f"{self.name}: heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if self.vocab_real > self.vocab:
            raise ValueError(f"{self.name}: vocab_real {self.vocab_real} > vocab {self.vocab}")
        if self.norm not in ("layernorm", "rmsnorm") or self.mlp not in ("gelu", "swiglu") \
                or self.positions not in ("learned", "rotary"):
            raise ValueError(f"{self.name}: unknown norm/mlp/positions {self.norm}/{self.mlp}/{self.positions}")
        if self.positions == "rotary" and self.head_dim % 2:
            raise ValueError(f"{self.name}: rotary embeddings need an even head_dim, got {self.head_dim}")

    def with_(self, **changes: Any) -> ModelConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _gpt(name: str, layers: int, d_model: int, heads: int, **kw: Any) -> ModelConfig:
    base: dict[str, Any] = dict(family="gpt", head_dim=64, mlp_hidden=4 * d_model, vocab=50304, vocab_real=50257,
                                max_seqlen=1024, norm="layernorm", norm_eps=1e-5, mlp="gelu", positions="learned",
                                tied_embeddings=True, bias=True)
    base.update(kw)
    return ModelConfig(name=name, layers=layers, d_model=d_model, heads=heads, kv_heads=base.pop("kv_heads", heads),
                       **base)


#: GPT-2 small/medium/large as in the GPT-2 release (biases everywhere, LayerNorm eps 1e-5, tanh GELU, learned
#: positions for 1024 tokens, tied input/output embeddings), with the vocabulary padded from 50257 to 50304
#: (a multiple of 64, as nanoGPT does); the padded rows are never drawn as tokens. gpt-tiny is the same
#: architecture small enough for CPU tests. llama-7b is Llama-2-7B (no biases, untied LM head); llama-tiny is
#: its architecture at gpt-tiny's size.
PRESETS: dict[str, ModelConfig] = {
    "gpt-tiny": _gpt("gpt-tiny", 2, 64, 4, head_dim=16, vocab=256, vocab_real=256, max_seqlen=128),
    "gpt-sm": _gpt("gpt-sm", 12, 768, 12),
    "gpt-md": _gpt("gpt-md", 24, 1024, 16),
    "gpt-lg": _gpt("gpt-lg", 36, 1280, 20),
    "llama-7b": ModelConfig(name="llama-7b", family="llama", layers=32, d_model=4096, heads=32, kv_heads=32,
                            head_dim=128, mlp_hidden=11008, vocab=32000, vocab_real=32000, max_seqlen=4096,
                            norm="rmsnorm", norm_eps=1e-5, mlp="swiglu", positions="rotary", rope_theta=10000.0,
                            tied_embeddings=False, bias=False),
}
PRESETS["llama-tiny"] = PRESETS["llama-7b"].with_(name="llama-tiny", layers=2, d_model=64, heads=4, kv_heads=4,
                                                  head_dim=16, mlp_hidden=172, vocab=256, vocab_real=256,
                                                  max_seqlen=128)


def preset(name: str, *, layers: int | None = None, kv_heads: int | None = None,
           max_seqlen: int | None = None) -> ModelConfig:
    """A preset by name, optionally cut to ``layers``, given ``kv_heads`` (GQA/MQA) or a longer ``max_seqlen``."""
    if name not in PRESETS:
        raise ValueError(f"unknown model preset {name!r}; known: {', '.join(PRESETS)}")
    cfg = PRESETS[name]
    changes: dict[str, Any] = {}
    if layers is not None:
        changes["layers"] = layers
    if kv_heads is not None:
        changes["kv_heads"] = kv_heads
    if max_seqlen is not None:
        changes["max_seqlen"] = max_seqlen
    if changes:
        suffix = ",".join(f"{k}={v}" for k, v in changes.items())
        cfg = cfg.with_(name=f"{name}[{suffix}]", **changes)
    return cfg


# ================================================================================================ counting
def _linear_weights_per_layer(cfg: ModelConfig) -> int:
    """Elements of every Linear weight of one block (the matmul operands; biases are adds, not counted)."""
    qkv = cfg.d_model * (cfg.heads + 2 * cfg.kv_heads) * cfg.head_dim
    out = cfg.heads * cfg.head_dim * cfg.d_model
    mlp = (3 if cfg.mlp == "swiglu" else 2) * cfg.d_model * cfg.mlp_hidden
    return qkv + out + mlp


def param_count(cfg: ModelConfig) -> int:
    """Number of parameters, embeddings and LM head included (a tied head adds none).

    Per block: fused QKV d*(h+2kv)*hd, output hd*h*d, MLP 2*d*ffn (GELU) or 3*d*ffn (SwiGLU), plus biases
    (GPT: (h+2kv)*hd + d + ffn + d) and two norms (LayerNorm 2d, RMSNorm d). Outside: token embedding V*d,
    learned positions max_seqlen*d (GPT), final norm, untied head V*d.
    """
    d, ffn = cfg.d_model, cfg.mlp_hidden
    per_norm = 2 * d if cfg.norm == "layernorm" else d
    per_layer = _linear_weights_per_layer(cfg) + 2 * per_norm
    if cfg.bias:
        per_layer += (cfg.heads + 2 * cfg.kv_heads) * cfg.head_dim + d + (ffn if cfg.mlp == "gelu" else 2 * ffn) + d
    total = cfg.layers * per_layer + cfg.vocab * d + per_norm
    if cfg.positions == "learned":
        total += cfg.max_seqlen * d
    if not cfg.tied_embeddings:
        total += cfg.vocab * d
    return total


def _visible_pairs(seqlen_q: int, seqlen_kv: int, causal: bool) -> int:
    """(query, key) pairs a top-left causal mask leaves visible (SDPA's is_causal): row i sees min(i+1, skv)."""
    if not causal:
        return seqlen_q * seqlen_kv
    full = min(seqlen_q, seqlen_kv)
    return full * (full + 1) // 2 + max(0, seqlen_q - seqlen_kv) * seqlen_kv


def model_flops(cfg: ModelConfig, mode: str, batch: int, seqlen: int) -> dict[str, int]:
    """FLOPs of one step of ``mode``; ``seqlen`` is the prompt (train/prefill) or the cache context (decode).

    matmul    = 2 * rows * W, W = every Linear weight element the rows pass through (the LM head included,
                with its padded vocabulary; embeddings are gathers and count nothing; norms, activations,
                rotary and residual adds are not counted). train: rows = batch*seqlen through blocks and
                head, times 3 (forward + 2x backward). prefill: batch*seqlen rows through the blocks,
                batch rows (last position) through the head. decode: batch rows through blocks and head.
    attention = layers * 4 * batch * heads * pairs * head_dim, pairs counted with SDPA's top-left causal mask:
                train/prefill causal over seqlen x seqlen (s(s+1)/2), train times 3.5 (backward = 2.5x
                forward); decode one query over seqlen+1 keys, non-causal.
    Returns matmul, attention, total (= model FLOPs, the MFU numerator) and tokens (processed per step:
    batch*seqlen for train/prefill, batch new tokens for decode).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if batch <= 0 or seqlen <= 0:
        raise ValueError("batch and seqlen must be positive")
    w_layers = cfg.layers * _linear_weights_per_layer(cfg)
    w_head = cfg.vocab * cfg.d_model
    per_pair = 4 * batch * cfg.heads * cfg.head_dim * cfg.layers
    if mode == "train":
        tokens = batch * seqlen
        matmul = 3 * 2 * tokens * (w_layers + w_head)
        attention = per_pair * _visible_pairs(seqlen, seqlen, True) * 7 // 2
    elif mode == "prefill":
        tokens = batch * seqlen
        matmul = 2 * tokens * w_layers + 2 * batch * w_head
        attention = per_pair * _visible_pairs(seqlen, seqlen, True)
    else:
        tokens = batch
        matmul = 2 * batch * (w_layers + w_head)
        attention = per_pair * _visible_pairs(1, seqlen + 1, False)
    return {"matmul": matmul, "attention": attention, "total": matmul + attention, "tokens": tokens}


def mfu(flops: float, seconds: float, peak_tflops: float) -> float:
    """Model FLOPs utilisation: flops / seconds / (peak_tflops * 1e12), a fraction (0.5 = 50 %)."""
    if seconds <= 0 or peak_tflops <= 0:
        return float("nan")
    return flops / seconds / (peak_tflops * 1e12)


# ================================================================================================ memory estimate
class OutOfMemoryBudget(Exception):
    """The pre-allocation estimate of a point exceeds the memory cap: refused before anything is allocated."""

    def __init__(self, need_bytes: int, cap_bytes: int, detail: dict[str, int]) -> None:
        self.need_bytes, self.cap_bytes, self.detail = need_bytes, cap_bytes, detail
        super().__init__(f"estimated {need_bytes / 2**30:.2f} GiB > cap {cap_bytes / 2**30:.2f} GiB "
                         f"({', '.join(f'{k} {v / 2**30:.2f}' for k, v in detail.items() if v)})")


def _dtype_bytes(dtype: str | torch.dtype) -> int:
    dt = DTYPES[dtype] if isinstance(dtype, str) else dtype
    return int(torch.empty((), dtype=dt).element_size())


def estimate_bytes(cfg: ModelConfig, batch: int, seqlen: int, mode: str, dtype: str | torch.dtype = "bf16",
                   attention: str = "flash", *, master_fp32: bool = False, detail: bool = False) -> Any:
    """Bytes a point needs before it runs, to refuse what cannot fit (no allocation happens here).

    weights   P * bytes (P = param_count); with master_fp32 the parameters are fp32 (4 bytes).
    train     + AdamW exp_avg and exp_avg_sq 2 * P * param bytes
              + max(grads P * param bytes, activations), activations being
                  saved tensors per block and token: GPT 8d + (h+2kv)*hd + h*hd + 2*ffn elements, Llama
                  5d + (h+2kv)*hd + h*hd + 4*ffn (norm inputs and outputs, q/k/v, attention output, the MLP's
                  saved intermediates), times layers * batch * seqlen
                + the head: logits and log-softmax (2 * batch*seqlen*V) and their gradient (+1)
                + eager: the probabilities b*h*s^2 saved per layer plus 2 score-sized buffers alive in one
                  layer's forward/backward; "math" likewise with 4-byte scores (SDPA's math backend upcasts)
              + master_fp32: autocast's bf16 copies of the weights, P * 2.
    prefill   + KV cache 2 * layers * batch * kv_heads * seqlen * hd, + max(one block's transient
              activations, eager: 2 score matrices of one layer).
    decode    + KV cache for seqlen+1 positions, + max(activations of one token (negligible), eager: 2 score
              rows).
    Activation bytes use the compute dtype (bf16 under autocast with master_fp32). The estimate is meant
    to be a little low rather than high (allocator fragmentation, cuBLAS/cuDNN workspaces and transients of
    one layer's backward are not counted), so it refuses only points that cannot fit; the real CUDA OOM is
    still caught. Against torch.cuda.max_memory_allocated on the H100 (llama-7b cut to 4 layers, 4096
    tokens; benchmarks/RESULTS.md): train 0 % to 8 % low, fp32 masters 9 % low, prefill and decode 1 % to 7 %
    low.
    Returns total bytes, or (total, {part: bytes}) with detail=True (the parts can add up to more than the
    total: parts that never coexist are not counted together).
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    if attention not in ("flash", "eager", "math"):
        raise ValueError(f"attention must be 'flash', 'eager' or 'math', got {attention!r}")
    act_b = _dtype_bytes(dtype)
    if master_fp32 and act_b == 4:
        act_b = 2
    par_b = 4 if master_fp32 else _dtype_bytes(dtype)
    P = param_count(cfg)
    d, h, kv, hd, ffn, L, V = (cfg.d_model, cfg.heads, cfg.kv_heads, cfg.head_dim, cfg.mlp_hidden, cfg.layers,
                              cfg.vocab)
    score_b = 4 if attention == "math" else act_b
    parts: dict[str, int] = {"weights": P * par_b}
    if mode == "train":
        tokens = batch * seqlen
        parts["grads"] = P * par_b
        parts["adamw"] = 2 * P * par_b
        if cfg.family == "gpt":
            per_tok = 8 * d + (h + 2 * kv) * hd + h * hd + 2 * ffn
        else:
            per_tok = 5 * d + (h + 2 * kv) * hd + h * hd + 4 * ffn
        parts["activations"] = L * tokens * per_tok * act_b
        parts["head"] = 3 * tokens * V * act_b
        if attention != "flash":
            score = batch * h * seqlen * seqlen * score_b
            parts["scores"] = L * score + 2 * score
    elif mode == "prefill":
        tokens = batch * seqlen
        parts["kv_cache"] = 2 * L * batch * kv * seqlen * hd * act_b
        per_tok = 4 * d + (h + 2 * kv) * hd + h * hd + (4 * ffn if cfg.mlp == "swiglu" else 2 * ffn)
        parts["activations"] = tokens * per_tok * act_b
        if attention != "flash":
            parts["scores"] = 2 * batch * h * seqlen * seqlen * score_b
    else:
        parts["kv_cache"] = 2 * L * batch * kv * (seqlen + 1) * hd * act_b
        parts["activations"] = batch * (6 * d + 4 * ffn + 2 * V) * act_b
        if attention != "flash":
            parts["scores"] = 2 * batch * h * (seqlen + 1) * score_b
    total = sum(parts.values())
    if mode == "train":
        # gradients are allocated during backward as the saved activations are freed: the peak is at the start
        # of backward (activations) or at its end (gradients), not both
        transient = parts["activations"] + parts["head"] + parts.get("scores", 0)
        total = total - parts["grads"] - transient + max(parts["grads"], transient)
        if master_fp32:
            parts["autocast_copies"] = P * act_b  # the bf16 copies of the weights autocast keeps for a forward
            total += parts["autocast_copies"]
    elif "scores" in parts:  # without autograd, one layer's scores and the MLP's intermediates never coexist
        total = total - parts["activations"] - parts["scores"] + max(parts["activations"], parts["scores"])
    return (total, parts) if detail else total


# ================================================================================================ attention
_MASKS: dict[tuple[int, int, str], torch.Tensor] = {}
_MASKS_LOCK = threading.Lock()


def eager_attention(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_mask: Any = None,
                    dropout_p: float = 0.0, is_causal: bool = False, scale: float | None = None,
                    enable_gqa: bool = False) -> torch.Tensor:
    """The "standard attention" baseline: scores = q k^T * scale materialised (batch*heads*sq*skv), top-left
    causal mask, softmax, probabilities @ v. GQA by repeat_interleave of k/v. Same signature and result as
    F.scaled_dot_product_attention (without attn_mask or dropout)."""
    if attn_mask is not None or dropout_p:
        raise NotImplementedError("eager_attention supports neither attn_mask nor dropout")
    hq, hkv = query.shape[-3], key.shape[-3]
    if hq != hkv:
        if not enable_gqa or hq % hkv:
            raise ValueError(f"{hq} query heads against {hkv} kv heads needs enable_gqa and a multiple")
        key = key.repeat_interleave(hq // hkv, dim=-3)
        value = value.repeat_interleave(hq // hkv, dim=-3)
    scale = query.shape[-1] ** -0.5 if scale is None else scale
    s = torch.matmul(query, key.transpose(-2, -1)).mul_(scale)  # in place: matmul's backward needs q, k only
    if is_causal:
        sq, skv = s.shape[-2], s.shape[-1]
        k_ = (sq, skv, str(s.device))
        with _MASKS_LOCK:
            m = _MASKS.get(k_)
            if m is None:
                if len(_MASKS) >= 2:  # a 32K x 32K mask is 1 GiB: keep only the last two shapes
                    _MASKS.pop(next(iter(_MASKS)))
                m = _MASKS[k_] = torch.ones(sq, skv, dtype=torch.bool, device=s.device).triu(1)
        s.masked_fill_(m, float("-inf"))
    p = torch.softmax(s, dim=-1)
    return torch.matmul(p, value)


# ================================================================================================ ranges
class Ranges(Protocol):
    """What the model needs of a range recorder: NVTX (workloads.attention.Nvtx), torch.profiler, PartTimer."""

    def range(self, name: str) -> contextlib.AbstractContextManager[Any]: ...


class NullRanges:
    """The default: no ranges, and the model adds no autograd markers."""

    def range(self, name: str) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()


class TeeRanges:
    """Several recorders at once (NVTX for a profiler and a PartTimer, say): entered in order, left reversed."""

    def __init__(self, *ranges: Ranges) -> None:
        self.ranges = ranges

    @contextlib.contextmanager
    def range(self, name: str) -> Iterator[None]:
        with contextlib.ExitStack() as st:
            for r in self.ranges:
                st.enter_context(r.range(name))
            yield


class _Mark:
    """One part's backward bracket: entered by _MarkBegin.backward, left by _MarkEnd.backward (same thread)."""

    __slots__ = ("cm", "name", "ranges")

    def __init__(self, ranges: Ranges, name: str) -> None:
        self.ranges, self.name = ranges, name
        self.cm: contextlib.AbstractContextManager[Any] | None = None

    def enter(self) -> None:
        if self.cm is None:
            self.cm = self.ranges.range(self.name)
            self.cm.__enter__()

    def exit(self) -> None:
        if self.cm is not None:
            cm, self.cm = self.cm, None
            cm.__exit__(None, None, None)


class _MarkBegin(torch.autograd.Function):
    """Identity on a part's outputs; its backward runs first of the part's backward: opens the range."""

    @staticmethod
    def forward(ctx: Any, mark: _Mark, *xs: torch.Tensor) -> Any:
        ctx.mark = mark
        return tuple(x.view_as(x) for x in xs)

    @staticmethod
    def backward(ctx: Any, *gs: Any) -> Any:
        ctx.mark.enter()
        return (None, *gs)


class _MarkEnd(torch.autograd.Function):
    """Identity on a part's inputs; its backward runs once the part's backward is done: closes the range."""

    @staticmethod
    def forward(ctx: Any, mark: _Mark, *xs: torch.Tensor) -> Any:
        ctx.mark = mark
        return tuple(x.view_as(x) for x in xs)

    @staticmethod
    def backward(ctx: Any, *gs: Any) -> Any:
        ctx.mark.exit()
        return (None, *gs)


def _in_backward() -> bool:
    return bool(torch._C._current_graph_task_id() != -1)


class PartTimer:
    """Per-part time without a profiler: CUDA events (perf_counter on CPU) at entry and exit of every range,
    forward and (through the autograd markers) backward, read after one synchronize.

    Cost: two events per range entry (``events`` counts them) plus the autograd markers of backward parts; a few
    microseconds of host time each and no GPU work, but a host-bound step gets slower (+34 % to +73 % for a
    batch-1 decode step on the H100), so run_model_case times parts in steps of their own, never the measured ones.
    A part's time is the GPU time between its two events: kernels of other streams or idle gaps inside
    the bracket count too. Nested ranges (``backward`` holds the parts' backward) are each timed whole.
    """

    def __init__(self, device: str | torch.device) -> None:
        self.cuda = torch.device(device).type == "cuda"
        self._lock = threading.Lock()
        self._records: list[tuple[str, str, Any, Any]] = []
        self.events = 0

    def _stamp(self) -> Any:
        if self.cuda:
            e = torch.cuda.Event(enable_timing=True)
            e.record()
            return e
        return time.perf_counter()

    @contextlib.contextmanager
    def range(self, name: str) -> Iterator[None]:
        phase = "bwd" if _in_backward() else "fwd"
        start = self._stamp()
        try:
            yield
        finally:
            end = self._stamp()
            with self._lock:
                self._records.append((name, phase, start, end))
                self.events += 2

    def reset(self) -> None:
        with self._lock:
            self._records.clear()
            self.events = 0

    def results(self, iters: int) -> dict[str, float]:
        """ms per iteration for each range name (forward + backward), and ``name.fwd`` / ``name.bwd`` for the
        parts that also ran in backward."""
        if self.cuda:
            torch.cuda.synchronize()
        out: dict[str, float] = {}
        with self._lock:
            recs = list(self._records)
        in_bwd = {name for name, phase, _, _ in recs if phase == "bwd"}
        for name, phase, a, b in recs:
            ms = a.elapsed_time(b) if self.cuda else (b - a) * 1e3
            out[name] = out.get(name, 0.0) + ms
            if name in in_bwd:  # split only parts that also ran in backward (not 'backward', 'optimizer')
                out[f"{name}.{phase}"] = out.get(f"{name}.{phase}", 0.0) + ms
        return {k: v / max(iters, 1) for k, v in sorted(out.items())}


_NULL = NullRanges()


def _part(ranges: Ranges | None, name: str, fn: Callable[..., Any], *xs: torch.Tensor, **kw: Any) -> Any:
    """Run ``fn(*xs, **kw)`` inside ``ranges.range(name)``. When autograd records, wrap the tensors ``xs`` and
    the outputs in identity markers so that the part's backward runs inside the same range on autograd's
    thread (the thread the backward kernels are launched from)."""
    if ranges is None or isinstance(ranges, NullRanges):
        return fn(*xs, **kw)
    if not (torch.is_grad_enabled() and any(x.requires_grad for x in xs)):
        with ranges.range(name):
            return fn(*xs, **kw)
    mark = _Mark(ranges, name)
    xs = _MarkEnd.apply(mark, *xs)
    with ranges.range(name):
        out = fn(*xs, **kw)
    single = isinstance(out, torch.Tensor)
    outs = _MarkBegin.apply(mark, *((out,) if single else out))
    return outs[0] if single else outs


# ================================================================================================ model
@dataclass
class KVCache:
    """Per-layer K and V, each (layers, batch, kv_heads, max_len, head_dim): ``k[l, :, :, :n]`` is the
    (batch, kv_heads, n, head_dim) view SDPA takes, last dimension contiguous."""

    k: torch.Tensor
    v: torch.Tensor

    @classmethod
    def allocate(cls, cfg: ModelConfig, batch: int, max_len: int, device: str | torch.device,
                 dtype: torch.dtype) -> KVCache:
        shape = (cfg.layers, batch, cfg.kv_heads, max_len, cfg.head_dim)
        return cls(torch.zeros(shape, device=device, dtype=dtype), torch.zeros(shape, device=device, dtype=dtype))

    @property
    def max_len(self) -> int:
        return int(self.k.shape[3])

    def nbytes(self) -> int:
        return int(self.k.numel() * self.k.element_size() * 2)


class _Block(nn.Module):
    def __init__(self, cfg: ModelConfig, dtype: torch.dtype) -> None:
        super().__init__()
        d, hd = cfg.d_model, cfg.head_dim
        self.cfg = cfg
        self.norm1_w = nn.Parameter(torch.empty(d, dtype=dtype))
        self.norm2_w = nn.Parameter(torch.empty(d, dtype=dtype))
        if cfg.norm == "layernorm":
            self.norm1_b: nn.Parameter | None = nn.Parameter(torch.empty(d, dtype=dtype))
            self.norm2_b: nn.Parameter | None = nn.Parameter(torch.empty(d, dtype=dtype))
        else:
            self.norm1_b = self.norm2_b = None
        # one matmul for q, k and v; one for gate and up (SwiGLU)
        self.qkv = nn.Linear(d, (cfg.heads + 2 * cfg.kv_heads) * hd, bias=cfg.bias, dtype=dtype)
        self.out = nn.Linear(cfg.heads * hd, d, bias=cfg.bias, dtype=dtype)
        n_in = 2 * cfg.mlp_hidden if cfg.mlp == "swiglu" else cfg.mlp_hidden
        self.fc_in = nn.Linear(d, n_in, bias=cfg.bias, dtype=dtype)
        self.fc_out = nn.Linear(cfg.mlp_hidden, d, bias=cfg.bias, dtype=dtype)

    def norm(self, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
        if self.cfg.norm == "layernorm":
            return F.layer_norm(x, (x.shape[-1],), w, b, self.cfg.norm_eps)
        return F.rms_norm(x, (x.shape[-1],), w, self.cfg.norm_eps)

    def mlp(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc_in(x)
        if self.cfg.mlp == "swiglu":
            gate, up = h.chunk(2, dim=-1)
            h = F.silu(gate) * up
        else:
            h = F.gelu(h, approximate="tanh")
        return self.fc_out(h)

    def _qkv(self, xn: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor] | None,
             start_pos: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """One matmul, split (not sliced: split's backward is one cat) into (b, h, s, hd) views; rotary on q
        and k together."""
        cfg = self.cfg
        b, s, _ = xn.shape
        h, kv, hd = cfg.heads, cfg.kv_heads, cfg.head_dim
        t = self.qkv(xn).view(b, s, h + 2 * kv, hd)
        if rope is not None:
            qk, v = t.split([h + kv, kv], dim=2)
            cos, sin = rope[0][start_pos:start_pos + s], rope[1][start_pos:start_pos + s]
            if cos.dtype != t.dtype:  # autocast: the tables follow the fp32 residual, the matmul is bf16
                cos, sin = cos.to(t.dtype), sin.to(t.dtype)
            qk = _rope(qk, cos, sin)
            q, k = qk.split([h, kv], dim=2)
        else:
            q, k, v = t.split([h, kv, kv], dim=2)
        return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

    def _out(self, o: torch.Tensor) -> torch.Tensor:
        b, _, s, _ = o.shape
        return self.out(o.transpose(1, 2).reshape(b, s, -1))

    def run(self, x: torch.Tensor, li: int, *, attn_fn: AttnFn, ranges: Ranges | None,
            rope: tuple[torch.Tensor, torch.Tensor] | None, cache: KVCache | None, start_pos: int) -> torch.Tensor:
        """One pre-norm block: x + attn(norm(x)), then + mlp(norm(.)); K/V into ``cache`` layer ``li``."""
        cfg, r = self.cfg, ranges
        end = start_pos + x.shape[1]
        n1 = (self.norm1_w,) if self.norm1_b is None else (self.norm1_w, self.norm1_b)
        n2 = (self.norm2_w,) if self.norm2_b is None else (self.norm2_w, self.norm2_b)
        xn = _part(r, "norm", self.norm, x, *n1)
        q, k, v = _part(r, "attn.qkv", self._qkv, xn, rope=rope, start_pos=start_pos)
        causal = True
        if cache is not None:
            with torch.no_grad():
                cache.k[li, :, :, start_pos:end].copy_(k)
                cache.v[li, :, :, start_pos:end].copy_(v)
            if start_pos > 0:  # decode: the new query against every cached position, itself included
                k, v = cache.k[li, :, :, :end], cache.v[li, :, :, :end]
                causal = False
        o = _part(r, "attn.core", attn_fn, q, k, v, is_causal=causal, scale=cfg.head_dim ** -0.5,
                  enable_gqa=cfg.heads != cfg.kv_heads)
        x = x + _part(r, "attn.out", self._out, o)
        xn = _part(r, "norm", self.norm, x, *n2)
        return x + _part(r, "mlp", self.mlp, xn)


def _swap_halves(x: torch.Tensor) -> torch.Tensor:
    h = x.shape[-1] // 2
    return torch.cat((x[..., h:], x[..., :h]), dim=-1)


class _Rope(torch.autograd.Function):
    """Rotary embedding as one autograd node: out = x*cos + swap(x)*sin_signed, three kernels each way.

    rotate_half(x)*sin (Hugging Face's Llama convention) equals swap_halves(x)*sin_signed with sin_signed =
    (-sin, sin) over the two halves; swapping halves is its own transpose, so dx = g*cos + swap(g*sin_signed).
    Autograd over the textbook formula runs neg, cat, two muls and an add forward and more backward, on the
    strided q/k view: measured 1.1 ms per layer forward on the H100 for Llama-7B at 2 x 4096 tokens.
    """

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(cos, sin_signed)
        return torch.addcmul(x * cos, _swap_halves(x), sin_signed)

    @staticmethod
    def backward(ctx: Any, g: torch.Tensor) -> Any:
        cos, sin_signed = ctx.saved_tensors
        return torch.addcmul(_swap_halves(g * sin_signed), g, cos), None, None


#: "function": rotary as the _Rope autograd node (default); "autograd": the textbook formula through autograd
#: (kept to measure the difference: benchmarks/model_gpu.py).
ROPE_IMPL = "function"


def _rope(x: torch.Tensor, cos: torch.Tensor, sin_signed: torch.Tensor) -> torch.Tensor:
    """Rotary embedding, rotate-half convention (as Hugging Face's Llama): x*cos + rotate_half(x)*sin."""
    if ROPE_IMPL == "function":
        return cast(torch.Tensor, _Rope.apply(x, cos, sin_signed))
    return x * cos + _swap_halves(x) * sin_signed


class Transformer(nn.Module):
    """A decoder-only transformer in (batch, seq, d_model) with pre-norm blocks.

    q/k/v come out of one fused matmul as (batch, seq, heads, head_dim) and are handed to attn_fn as
    (batch, heads, seq, head_dim) transposed views (no copy: SDPA's flash and cuDNN kernels read that layout).
    """

    def __init__(self, cfg: ModelConfig, dtype: torch.dtype) -> None:
        super().__init__()
        self.cfg = cfg
        d = cfg.d_model
        self.tok_emb = nn.Parameter(torch.empty(cfg.vocab, d, dtype=dtype))
        self.pos_emb = (nn.Parameter(torch.empty(cfg.max_seqlen, d, dtype=dtype))
                        if cfg.positions == "learned" else None)
        self.blocks = nn.ModuleList(_Block(cfg, dtype) for _ in range(cfg.layers))
        self.normf_w = nn.Parameter(torch.empty(d, dtype=dtype))
        self.normf_b = nn.Parameter(torch.empty(d, dtype=dtype)) if cfg.norm == "layernorm" else None
        self.lm_head = None if cfg.tied_embeddings else nn.Parameter(torch.empty(cfg.vocab, d, dtype=dtype))
        self._rope_cache: dict[tuple[str, torch.dtype], tuple[torch.Tensor, torch.Tensor]] = {}

    # -------------------------------------------------------------------------------------------- init
    @torch.no_grad()
    def init_weights(self, seed: int) -> None:
        """Deterministic random weights drawn on the parameters' own device: N(0, 0.02), the residual
        projections N(0, 0.02/sqrt(2*layers)) (GPT-2's scheme), norm weights 1, biases 0."""
        dev = self.tok_emb.device
        g = torch.Generator(device=dev).manual_seed(seed)
        resid_std = 0.02 / math.sqrt(2 * self.cfg.layers)
        for name, p in self.named_parameters():
            if name.endswith("norm1_w") or name.endswith("norm2_w") or name == "normf_w":
                p.fill_(1.0)
            elif name.endswith("_b") or name.endswith(".bias"):
                p.zero_()
            elif name.endswith("out.weight") or name.endswith("fc_out.weight"):
                p.normal_(0.0, resid_std, generator=g)
            else:
                p.normal_(0.0, 0.02, generator=g)

    def _rope_tables(self, end: int, device: torch.device, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and signed sin (see _Rope), (n, 1, head_dim) with n >= end, computed in fp32 once per device and
        dtype."""
        key = (str(device), dtype)
        hit = self._rope_cache.get(key)
        if hit is None or hit[0].shape[0] < end:
            n = max(end, self.cfg.max_seqlen)
            hd = self.cfg.head_dim
            inv = 1.0 / (self.cfg.rope_theta ** (torch.arange(0, hd, 2, device=device, dtype=torch.float32) / hd))
            ang = torch.outer(torch.arange(n, device=device, dtype=torch.float32), inv)
            cos = torch.cat((ang.cos(), ang.cos()), dim=-1)  # (n, hd)
            sin_signed = torch.cat((-ang.sin(), ang.sin()), dim=-1)
            hit = (cos.to(dtype)[:, None, :], sin_signed.to(dtype)[:, None, :])  # heads broadcast
            self._rope_cache[key] = hit
        return hit

    # -------------------------------------------------------------------------------------------- forward
    def forward(self, idx: torch.Tensor, *, attn_fn: AttnFn = F.scaled_dot_product_attention,
                ranges: Ranges | None = None, targets: torch.Tensor | None = None, cache: KVCache | None = None,
                start_pos: int = 0, last_only: bool = False) -> torch.Tensor:
        """Logits (batch, seq or 1, vocab), or the mean cross-entropy against ``targets`` when given.

        With ``cache``: K/V of these positions are written at [start_pos, start_pos+seq). start_pos 0 is a
        prefill (causal attention over the new tokens); start_pos > 0 takes one token (decode): its query
        attends, non-causally, to the cache's first start_pos+1 positions.
        """
        cfg = self.cfg
        s = idx.shape[1]
        r = ranges
        end = start_pos + s
        if cache is not None and end > cache.max_len:
            raise ValueError(f"positions up to {end} do not fit the KV cache of {cache.max_len}")
        if start_pos > 0 and (cache is None or s != 1):
            raise ValueError("start_pos > 0 needs a KV cache and a single new token (decode)")

        def embed(*ws: torch.Tensor) -> torch.Tensor:
            x = F.embedding(idx, ws[0])
            if len(ws) > 1:
                x = x + ws[1][start_pos:end]
            return x

        if self.pos_emb is not None and end > cfg.max_seqlen:
            raise ValueError(f"position {end - 1} beyond {cfg.name}'s {cfg.max_seqlen} learned positions "
                             "(preset(..., max_seqlen=N))")
        ws = (self.tok_emb,) if self.pos_emb is None else (self.tok_emb, self.pos_emb)
        x = _part(r, "embed", embed, *ws)
        rope = self._rope_tables(end, x.device, x.dtype) if cfg.positions == "rotary" else None

        for li in range(cfg.layers):
            blk = cast(_Block, self.blocks[li])
            x = blk.run(x, li, attn_fn=attn_fn, ranges=r, rope=rope, cache=cache, start_pos=start_pos)

        if last_only:
            x = x[:, -1:]

        def normf(x: torch.Tensor, *wb: torch.Tensor) -> torch.Tensor:
            if cfg.norm == "layernorm":
                return F.layer_norm(x, (x.shape[-1],), wb[0], wb[1], cfg.norm_eps)
            return F.rms_norm(x, (x.shape[-1],), wb[0], cfg.norm_eps)

        x = _part(r, "norm", normf, x, self.normf_w, *(() if self.normf_b is None else (self.normf_b,)))
        head_w = self.tok_emb if self.lm_head is None else self.lm_head
        logits = _part(r, "head", F.linear, x, head_w)
        if targets is None:
            return logits

        def loss_fn(lg: torch.Tensor) -> torch.Tensor:
            # on the logits' own dtype: no fp32 copy of batch*seq*vocab (log_softmax accumulates in fp32)
            return F.cross_entropy(lg.reshape(-1, lg.shape[-1]), targets.reshape(-1))

        return _part(r, "loss", loss_fn, logits)


def _resolve_dtype(dtype: str | torch.dtype | None, device: torch.device) -> torch.dtype:
    if dtype is None:
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    if isinstance(dtype, torch.dtype):
        return dtype
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    return DTYPES[dtype]


def build_model(cfg: ModelConfig, *, device: str | torch.device = "cpu", dtype: str | torch.dtype | None = None,
                seed: int = 0) -> Transformer:
    """The model with deterministic random weights, built on the meta device and materialised directly on
    ``device`` in ``dtype`` (no CPU copy of a big model, no default init pass, no download)."""
    dev = torch.device(device)
    dt = _resolve_dtype(dtype, dev)
    with torch.device("meta"):
        model = Transformer(cfg, dt)
    model.to_empty(device=dev)
    model.init_weights(seed)
    return model


def make_tokens(cfg: ModelConfig, batch: int, seqlen: int, *, device: str | torch.device = "cpu",
                seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Random token ids and random next-token targets, (batch, seqlen) each, the same on every device."""
    g = torch.Generator(device="cpu").manual_seed(seed + 1_000_003)
    idx = torch.randint(0, cfg.vocab_real, (batch, seqlen), generator=g)
    tgt = torch.randint(0, cfg.vocab_real, (batch, seqlen), generator=g)
    return idx.to(device), tgt.to(device)


# ================================================================================================ steps
def make_optimizer(model: nn.Module, *, lr: float = 1e-5) -> torch.optim.Optimizer:
    """AdamW over every parameter: the fused CUDA kernel when the parameters are on CUDA, else foreach."""
    params = [p for p in model.parameters() if p.requires_grad]
    on_cuda = bool(params) and params[0].is_cuda
    kw: dict[str, Any] = {"fused": True} if on_cuda else {"foreach": True}
    return torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=0.1, **kw)


def train_step(model: Transformer, opt: torch.optim.Optimizer, idx: torch.Tensor, targets: torch.Tensor, *,
               attn_fn: AttnFn = F.scaled_dot_product_attention, ranges: Ranges | None = None,
               autocast_dtype: torch.dtype | None = None, forward: Callable[..., torch.Tensor] | None = None
               ) -> torch.Tensor:
    """One optimizer step: forward, cross-entropy, backward, AdamW, zero_grad(set_to_none). Returns the loss
    (not synchronised). ``autocast_dtype`` runs the forward under autocast (fp32 master weights);
    ``forward`` replaces ``model`` (a torch.compile'd model)."""
    r = ranges or _NULL
    fwd = forward if forward is not None else model
    ctx = (torch.autocast(device_type=idx.device.type, dtype=autocast_dtype) if autocast_dtype is not None
           else contextlib.nullcontext())
    with ctx:
        loss = fwd(idx, targets=targets, attn_fn=attn_fn, ranges=ranges)
    with r.range("backward"):
        loss.backward()
    with r.range("optimizer"):
        opt.step()
        opt.zero_grad(set_to_none=True)
    return loss.detach()


@torch.no_grad()
def prefill(model: Transformer, idx: torch.Tensor, cache: KVCache, *, attn_fn: AttnFn = F.scaled_dot_product_attention,
            ranges: Ranges | None = None, forward: Callable[..., torch.Tensor] | None = None) -> torch.Tensor:
    """Forward over the prompt, K/V written into ``cache`` at positions [0, seq); last-position logits (b, V)."""
    fwd = forward if forward is not None else model
    return fwd(idx, attn_fn=attn_fn, ranges=ranges, cache=cache, start_pos=0, last_only=True)[:, -1]


@torch.no_grad()
def decode_step(model: Transformer, token: torch.Tensor, cache: KVCache, pos: int, *,
                attn_fn: AttnFn = F.scaled_dot_product_attention, ranges: Ranges | None = None,
                forward: Callable[..., torch.Tensor] | None = None) -> torch.Tensor:
    """One new token per sequence (``token`` (batch, 1)) at position ``pos``: K/V written at ``pos``, the query
    attends to cache positions [0, pos] non-causally. Logits (batch, V)."""
    r = ranges or _NULL
    fwd = forward if forward is not None else model
    with r.range("decode.step"):
        return fwd(token, attn_fn=attn_fn, ranges=ranges, cache=cache, start_pos=pos, last_only=True)[:, -1]


# ================================================================================================ the runner's entry
def _stats(times: list[float]) -> dict[str, float]:
    return {"median_ms": statistics.median(times), "min_ms": min(times), "max_ms": max(times),
            "mean_ms": statistics.fmean(times), "std_ms": statistics.stdev(times) if len(times) > 1 else 0.0}


def _one_line(s: str, width: int = 400) -> str:
    s = " ".join(s.split())
    return s if len(s) <= width else s[: width - 1] + "…"


def _attention_kind(attn_fn: AttnFn) -> str:
    return "eager" if attn_fn is eager_attention else "flash"


def _hook(hooks: Any, name: str) -> None:
    fn = getattr(hooks, name, None)
    if fn is not None:
        fn()


def run_model_case(cfg: ModelConfig, *, mode: str, batch: int, seqlen: int, dtype: str | torch.dtype | None = None,
                   device: str | torch.device = "cuda", attn_fn: AttnFn = F.scaled_dot_product_attention,
                   warmup: int = 2, iters: int = 5, seed: int = 0, ranges: Ranges | None = None,
                   part_timing: bool = False, memory_limit_gib: float | None = None,
                   attention_memory: str | None = None, master_fp32: bool = False, compile_model: bool = False,
                   peak_tflops: float | None = None, hooks: Any = None) -> dict[str, Any]:
    """Run one point and return its row; never raises for a failure of the point itself.

    mode train: one AdamW step per iteration on (batch, seqlen) random tokens. prefill: forward over a
    (batch, seqlen) prompt into a KV cache of seqlen positions. decode: one token per sequence against a KV
    cache holding ``seqlen`` positions of random K/V (not a real prefill: that would cost O(seqlen^2) memory
    with eager attention; values do not change the work); every iteration writes position seqlen and attends
    to seqlen+1 keys, the position is reset (not advanced) so every iteration does the same work.

    ``warmup`` iterations run first (allocator, cuBLAS/cuDNN autotuning, torch.compile); then ``iters``
    iterations each timed between CUDA events (perf_counter on CPU), read after one synchronize.
    ``attention_memory`` ("flash" | "eager" | "math") tells the memory estimate how attn_fn behaves
    (default: "eager" for eager_attention, else "flash"). ``memory_limit_gib`` refuses a point whose
    estimate exceeds it (status oom, nothing allocated) and on CUDA caps the caching allocator at that size
    for this point; a real CUDA OOM becomes status oom too. ``part_timing`` adds per-part ms and attention's
    share of the step (PartTimer; off by default). Parts are timed in ``iters`` steps of their own between the
    warm-up and the measured steps (still inside the warm-up phase, so no profiler sees them): the timer's host
    cost per range (a third or more of a host-bound decode step on the H100) never reaches the measured step times,
    and ``part_timing_cost`` says what it was. ``hooks`` (optional methods
    ``warmup_begin()``, ``measure_begin()``, ``iteration_end()``, ``measure_end()``) let a profiler bracket the
    warm-up and the measured iterations (NVTX phases, cudaProfilerStart/Stop, torch.profiler).
    """
    dev = torch.device(device)
    row: dict[str, Any] = {"status": "ok", "reason": None, "model": cfg.name, "mode": mode, "batch": batch,
                           "seqlen": seqlen, "device": str(dev), "warmup": warmup, "iters": iters, "seed": seed,
                           "master_fp32": master_fp32, "compiled": compile_model, "config": cfg.to_dict()}
    checked = _check_point(cfg, row, mode, batch, seqlen, dtype, dev, master_fp32, iters, warmup)
    if isinstance(checked, dict):
        return checked
    dev, dt = checked
    row["dtype"] = str(dt).replace("torch.", "")
    fl = model_flops(cfg, mode, batch, seqlen)
    row.update(model_flops=fl["total"], matmul_flops=fl["matmul"], attn_flops=fl["attention"],
               tokens_per_step=fl["tokens"], params=param_count(cfg))
    kind = attention_memory or _attention_kind(attn_fn)
    est, est_parts = estimate_bytes(cfg, batch, seqlen, mode, dt, kind, master_fp32=master_fp32, detail=True)
    row["estimate_bytes"] = est
    row["estimate_detail"] = est_parts
    st = _Point(cfg=cfg, mode=mode, batch=batch, seqlen=seqlen, dev=dev, dt=dt, seed=seed, attn_fn=attn_fn)
    try:
        st.cap_memory(memory_limit_gib, est, est_parts, row)
        timer = PartTimer(dev) if part_timing else None
        st.rng = ranges
        if timer is not None:
            st.part_rng = timer if ranges is None else TeeRanges(ranges, timer)
        one = st.build(compile_model=compile_model, master_fp32=master_fp32)
        times, part_times = st.time(one, warmup=warmup, iters=iters, timer=timer, hooks=hooks, row=row)
        _fill_row(row, st, fl, times, timer, peak_tflops, part_times)
        return row
    except OutOfMemoryBudget as e:
        return {**row, "status": "oom", "reason": f"refused before allocating: {e}"}
    except torch.cuda.OutOfMemoryError as e:
        return {**row, "status": "oom", "reason": _one_line(f"{type(e).__name__}: {e}")}
    except Exception as e:
        msg = _one_line(f"{type(e).__name__}: {e}")
        status = "oom" if "out of memory" in msg.lower() else (
            "unsupported" if isinstance(e, NotImplementedError) or "No available kernel" in msg else "error")
        return {**row, "status": status, "reason": msg}
    finally:
        st.release()


def _check_point(cfg: ModelConfig, row: dict[str, Any], mode: str, batch: int, seqlen: int,
                 dtype: str | torch.dtype | None, dev: torch.device, master_fp32: bool, iters: int,
                 warmup: int) -> tuple[torch.device, torch.dtype] | dict[str, Any]:
    """(device, dtype) to run with, or the row of a point that cannot run (error / unsupported)."""
    try:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        if iters <= 0 or warmup < 0 or batch <= 0 or seqlen <= 0:
            raise ValueError("iters, batch and seqlen must be positive and warmup >= 0")
        if dev.type == "cuda" and not torch.cuda.is_available():
            return {**row, "status": "unsupported", "reason": "no CUDA device is available"}
        if dev.type == "cuda" and dev.index is None:  # the allocator cap needs an indexed device
            dev = torch.device("cuda", torch.cuda.current_device())
        dt = _resolve_dtype(dtype, dev)
        if master_fp32 and (mode != "train" or dt == torch.float32):
            raise ValueError("master_fp32 applies to train mode with a bf16/fp16 compute dtype")
        if cfg.positions == "learned" and seqlen + (mode == "decode") > cfg.max_seqlen:
            return {**row, "status": "unsupported",
                    "reason": f"{cfg.name} has {cfg.max_seqlen} learned positions; seqlen {seqlen} needs "
                              f"max_seqlen >= {seqlen + (mode == 'decode')}"}
    except ValueError as e:
        return {**row, "status": "error", "reason": _one_line(str(e))}
    return dev, dt


@dataclass
class _Point:
    """What one point holds while it runs (the model, its optimizer, the KV cache), and its steps."""

    cfg: ModelConfig
    mode: str
    batch: int
    seqlen: int
    dev: torch.device
    dt: torch.dtype
    seed: int
    attn_fn: AttnFn
    model: Any = None
    opt: Any = None
    cache: Any = None
    tensors: list[Any] = dataclasses.field(default_factory=list)
    losses: list[torch.Tensor] = dataclasses.field(default_factory=list)
    rng: Ranges | None = None  # what the step's ranges go to now (read at every call)
    part_rng: Ranges | None = None  # the same with the PartTimer, for the part-timed steps
    capped: bool = False
    first_loss_at: int = 0

    @property
    def cuda(self) -> bool:
        return self.dev.type == "cuda"

    def cap_memory(self, limit_gib: float | None, est: int, est_parts: dict[str, int], row: dict[str, Any]) -> None:
        """Refuse a point whose estimate exceeds the cap (nothing allocated yet); on CUDA cap the allocator."""
        if limit_gib is not None:
            cap = int(limit_gib * 2**30)
            row["memory_limit_bytes"] = cap
            if est > cap:
                raise OutOfMemoryBudget(est, cap, est_parts)
            if self.cuda:
                total = torch.cuda.get_device_properties(self.dev).total_memory
                torch.cuda.set_per_process_memory_fraction(min(1.0, cap / total), self.dev)
                self.capped = True
        if self.cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(self.dev)

    def build(self, *, compile_model: bool, master_fp32: bool) -> Callable[[], Any]:
        """The model, its inputs and state for the mode; the function that runs one step (with ``self.rng`` as
        it is when the step runs, so the part-timed steps and the measured ones share one model)."""
        cfg, dev, dt, seed, attn_fn = self.cfg, self.dev, self.dt, self.seed, self.attn_fn
        self.model = model = build_model(cfg, device=dev, dtype=torch.float32 if master_fp32 else dt, seed=seed)
        fwd: Callable[..., torch.Tensor] | None = None
        if compile_model:
            if self.rng is not None or self.part_rng is not None:
                raise ValueError("compile_model runs without ranges/part timing (they would split the graph)")
            fwd = torch.compile(model, dynamic=False)
        if self.mode == "train":
            model.train()
            self.opt = opt = make_optimizer(model)
            idx, tgt = make_tokens(cfg, self.batch, self.seqlen, device=dev, seed=seed)
            self.tensors += [idx, tgt]
            autocast_dtype = dt if master_fp32 else None
            return lambda: self.losses.append(train_step(model, opt, idx, tgt, attn_fn=attn_fn, ranges=self.rng,
                                                         autocast_dtype=autocast_dtype, forward=fwd))
        model.eval()
        if self.mode == "prefill":
            idx, _ = make_tokens(cfg, self.batch, self.seqlen, device=dev, seed=seed)
            self.cache = cache = KVCache.allocate(cfg, self.batch, self.seqlen, dev, dt)
            self.tensors.append(idx)
            return lambda: prefill(model, idx, cache, attn_fn=attn_fn, ranges=self.rng, forward=fwd)
        idx, _ = make_tokens(cfg, self.batch, 1, device=dev, seed=seed)
        self.cache = cache = KVCache.allocate(cfg, self.batch, self.seqlen + 1, dev, dt)
        g = torch.Generator(device=dev).manual_seed(seed + 7)
        cache.k.normal_(generator=g)
        cache.v.normal_(generator=g)
        self.tensors.append(idx)
        pos = self.seqlen
        return lambda: decode_step(model, idx, cache, pos, attn_fn=attn_fn, ranges=self.rng, forward=fwd)

    def time(self, one: Callable[[], Any], *, warmup: int, iters: int, timer: PartTimer | None, hooks: Any,
             row: dict[str, Any]) -> tuple[list[float], list[float] | None]:
        """Warm-up steps; with a timer, `iters` part-timed steps (still in the warm-up phase); then `iters`
        measured steps without it. The ms of each measured step and of each part-timed one, each between CUDA
        events (perf_counter on CPU)."""
        cuda, dev = self.cuda, self.dev
        _hook(hooks, "warmup_begin")
        for _ in range(warmup):
            one()
        part_times = None
        if timer is not None:
            base, self.rng = self.rng, self.part_rng
            try:
                timer.reset()
                part_times = self._steps(one, iters)
            finally:
                self.rng = base
        if cuda:
            torch.cuda.synchronize(dev)
            row["static_bytes"] = int(torch.cuda.memory_allocated(dev))
            torch.cuda.reset_peak_memory_stats(dev)
        self.first_loss_at = len(self.losses)
        _hook(hooks, "measure_begin")
        t0 = time.perf_counter()
        times = self._steps(one, iters, after=lambda: _hook(hooks, "iteration_end"))
        row["wall_s"] = time.perf_counter() - t0
        _hook(hooks, "measure_end")
        return times, part_times

    def _steps(self, one: Callable[[], Any], iters: int, after: Callable[[], None] | None = None) -> list[float]:
        """`iters` steps, each between CUDA events (perf_counter on CPU), read after one synchronize: their ms."""
        cuda, dev = self.cuda, self.dev
        marks: list[Any] = []

        def stamp() -> None:
            if cuda:
                e = torch.cuda.Event(enable_timing=True)
                e.record()
                marks.append(e)
            else:
                marks.append(time.perf_counter())

        stamp()
        for _ in range(iters):
            one()
            stamp()
            if after is not None:
                after()
        if cuda:
            torch.cuda.synchronize(dev)
            return [marks[i].elapsed_time(marks[i + 1]) for i in range(iters)]
        return [(marks[i + 1] - marks[i]) * 1e3 for i in range(iters)]

    def release(self) -> None:
        self.model = self.opt = self.cache = None
        self.tensors.clear()
        with _MASKS_LOCK:
            _MASKS.clear()
        if self.cuda:
            with contextlib.suppress(Exception):
                torch.cuda.synchronize(self.dev)
            gc.collect()
            torch.cuda.empty_cache()
            if self.capped:
                torch.cuda.set_per_process_memory_fraction(1.0, self.dev)


def _fill_row(row: dict[str, Any], st: _Point, fl: dict[str, int], times: list[float], timer: PartTimer | None,
              peak_tflops: float | None, part_times: list[float] | None = None) -> None:
    """Times, throughput, MFU, losses, memory and the per-part split into the row. The split comes from the
    part-timed steps, and shares are of their own mean step time (parts are means too)."""
    mode, batch, seqlen, dev = st.mode, st.batch, st.seqlen, st.dev
    row["times_ms"] = times
    row.update(_stats(times))
    sec = row["median_ms"] / 1e3
    row["tokens_per_s"] = fl["tokens"] / sec
    row["samples_per_s"] = batch / sec if mode != "decode" else None
    row["tflops"] = fl["total"] / sec / 1e12
    if peak_tflops:
        row["peak_tflops"] = peak_tflops
        row["mfu"] = mfu(fl["total"], sec, peak_tflops)
    if st.losses:
        row["loss_first"] = float(st.losses[0].float().item())
        row["loss_first_measured"] = float(st.losses[st.first_loss_at].float().item())
        row["loss_last"] = float(st.losses[-1].float().item())
    if st.cuda:
        peak = int(torch.cuda.max_memory_allocated(dev))
        row["peak_mem_allocated_bytes"] = peak
        row["peak_mem_reserved_bytes"] = int(torch.cuda.max_memory_reserved(dev))
        tok_held = batch * (seqlen + 1 if mode == "decode" else seqlen)
        row["mem_per_token_bytes"] = (peak - row["static_bytes"]) / tok_held
    else:
        row["peak_mem_allocated_bytes"] = row["peak_mem_reserved_bytes"] = row["mem_per_token_bytes"] = None
    if timer is None or not part_times:
        return
    parts = timer.results(len(part_times))
    row["parts_ms"] = parts
    row["part_events_per_step"] = timer.events / len(part_times)
    step = statistics.fmean(part_times)
    row["part_step_ms"] = step
    measured = statistics.fmean(times)
    row["part_timing_cost"] = step / measured - 1 if measured > 0 else None
    core = parts.get("attn.core", 0.0)
    block = core + parts.get("attn.qkv", 0.0) + parts.get("attn.out", 0.0)
    row["attn_share"] = core / step if step > 0 else None
    row["attn_block_share"] = block / step if step > 0 else None
    if mode == "train":  # the seeds' forward / backward / total per step (mean over the iterations)
        row["backward_ms"] = parts.get("backward", 0.0)
        row["optimizer_ms"] = parts.get("optimizer", 0.0)
        row["forward_ms"] = step - row["backward_ms"] - row["optimizer_ms"]


def sdpa_backend_fn(backend: str) -> AttnFn:
    """F.scaled_dot_product_attention pinned to one SDPA backend ("flash", "cudnn", "efficient", "math") for
    the benchmark script and tests; the runner makes its own."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    b = {"flash": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION,
         "efficient": SDPBackend.EFFICIENT_ATTENTION, "math": SDPBackend.MATH}[backend]

    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, **kw: Any) -> torch.Tensor:
        with sdpa_kernel(b):
            return F.scaled_dot_product_attention(q, k, v, **kw)

    fn.__name__ = f"sdpa_{backend}"
    return fn


def summarize(rows: Sequence[dict[str, Any]]) -> list[str]:
    """One text line per row (for scripts)."""
    out = []
    for r in rows:
        head = f"{r['model']} {r['mode']} b{r['batch']} s{r['seqlen']}"
        if r["status"] != "ok":
            out.append(f"{head}: {r['status']}: {r['reason']}")
            continue
        mf = f" MFU {100 * r['mfu']:.1f}%" if r.get("mfu") is not None else ""
        out.append(f"{head}: {r['median_ms']:.3f} ms, {r['tokens_per_s']:.0f} tok/s{mf}")
    return out
