"""Attention backends. Each returns a callable (q, k, v) -> out for one spec, or raises BackendUnavailable
with the reason: a backend is skipped with its reason, never silently replaced by another."""

from __future__ import annotations

import importlib
import re
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from workloads.spec import AttentionSpec

AttnFn = Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]

TORCH_DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


class BackendUnavailable(Exception):
    """Not installed, not supported on this device, or cannot take this shape; str() is the reason."""


def _to_bhsd(x: torch.Tensor, layout: str) -> torch.Tensor:
    return x if layout == "bhsd" else x.transpose(1, 2)


def _to_bshd(x: torch.Tensor, layout: str) -> torch.Tensor:
    return x if layout == "bshd" else x.transpose(1, 2)


def _from_bhsd(o: torch.Tensor, layout: str) -> torch.Tensor:
    return o if layout == "bhsd" else o.transpose(1, 2)


def _from_bshd(o: torch.Tensor, layout: str) -> torch.Tensor:
    return o if layout == "bshd" else o.transpose(1, 2)


# ---------------------------------------------------------------------------------------------------------
def _sdpa(kind: str) -> Callable[[AttentionSpec], AttnFn]:
    def make(spec: AttentionSpec) -> AttnFn:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        backend = {
            "sdpa-flash": SDPBackend.FLASH_ATTENTION,
            "sdpa-cudnn": SDPBackend.CUDNN_ATTENTION,
            "sdpa-efficient": SDPBackend.EFFICIENT_ATTENTION,
            "sdpa-math": SDPBackend.MATH,
        }[kind]
        if spec.device != "cuda" and kind in ("sdpa-cudnn", "sdpa-efficient"):
            raise BackendUnavailable(f"{kind} runs on CUDA only, not on {spec.device}")
        gqa = spec.heads != spec.kv_heads
        if gqa and "enable_gqa" not in (F.scaled_dot_product_attention.__doc__ or ""):
            raise BackendUnavailable(f"torch {torch.__version__} SDPA has no enable_gqa (GQA needs torch >= 2.5)")
        kw: dict[str, Any] = {"is_causal": spec.causal}
        if gqa:
            kw["enable_gqa"] = True
        lay = spec.layout

        def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
            with sdpa_kernel(backend):
                o = F.scaled_dot_product_attention(_to_bhsd(q, lay), _to_bhsd(k, lay), _to_bhsd(v, lay), **kw)
            return _from_bhsd(o, lay)

        return fn

    return make


def _eager(spec: AttentionSpec) -> AttnFn:
    """The baseline: explicit matmul, softmax, matmul; GQA by repeating kv heads; causal top-left like SDPA."""
    scale = spec.head_dim ** -0.5
    rep = spec.heads // spec.kv_heads
    lay = spec.layout
    mask_cache: dict[tuple[int, int, str], torch.Tensor] = {}

    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        q, k, v = _to_bhsd(q, lay), _to_bhsd(k, lay), _to_bhsd(v, lay)
        if rep > 1:
            k = k.repeat_interleave(rep, dim=1)
            v = v.repeat_interleave(rep, dim=1)
        s = torch.matmul(q, k.transpose(-2, -1)) * scale
        if spec.causal:
            key = (q.shape[-2], k.shape[-2], str(q.device))
            m = mask_cache.get(key)
            if m is None:
                m = torch.ones(key[0], key[1], dtype=torch.bool, device=q.device).triu(1)
                mask_cache[key] = m
            s = s.masked_fill(m, float("-inf"))
        p = torch.softmax(s, dim=-1)
        return _from_bhsd(torch.matmul(p, v), lay)

    return fn


def _flash_attn(spec: AttentionSpec) -> AttnFn:
    """FlashAttention-3 (flash_attn_interface) if installed, else FlashAttention-2 (flash_attn)."""
    func = None
    errs = []
    for modname in ("flash_attn_interface", "flash_attn"):
        try:
            func = importlib.import_module(modname).flash_attn_func
            break
        except Exception as e:  # ImportError, or a broken build raising at import
            errs.append(f"{modname}: {type(e).__name__}: {e}")
    if func is None:
        raise BackendUnavailable("flash-attn is not installed (pip install 'profctl[flash]'); " + "; ".join(errs))
    _need_cuda_half(spec, "flash-attn")
    lay = spec.layout

    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        o = func(_to_bshd(q, lay), _to_bshd(k, lay), _to_bshd(v, lay), causal=spec.causal)
        if isinstance(o, tuple):
            o = o[0]
        return _from_bshd(o, lay)

    return fn


def _fa4(spec: AttentionSpec) -> AttnFn:
    try:
        from flash_attn.cute import flash_attn_func
    except Exception as e:
        raise BackendUnavailable(f"FlashAttention-4 (flash_attn.cute) is not installed: {type(e).__name__}: {e}") from e
    _need_cuda_half(spec, "fa4")
    major, _ = torch.cuda.get_device_capability()
    if major < 9:
        raise BackendUnavailable(f"fa4 needs compute capability >= 9.0 (Hopper/Blackwell), this GPU is sm_{major}x")
    lay = spec.layout

    def fn(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        o = flash_attn_func(_to_bshd(q, lay), _to_bshd(k, lay), _to_bshd(v, lay), causal=spec.causal)
        if isinstance(o, tuple):
            o = o[0]
        return _from_bshd(o, lay)

    return fn


def _need_cuda_half(spec: AttentionSpec, name: str) -> None:
    if spec.device != "cuda":
        raise BackendUnavailable(f"{name} runs on CUDA only, not on {spec.device}")
    if spec.dtype not in ("bf16", "fp16"):
        raise BackendUnavailable(f"{name} supports bf16 and fp16 only, not {spec.dtype}")


MAKERS: dict[str, Callable[[AttentionSpec], AttnFn]] = {
    "flash-attn": _flash_attn,
    "fa4": _fa4,
    "sdpa-flash": _sdpa("sdpa-flash"),
    "sdpa-cudnn": _sdpa("sdpa-cudnn"),
    "sdpa-efficient": _sdpa("sdpa-efficient"),
    "sdpa-math": _sdpa("sdpa-math"),
    "eager": _eager,
}


def make(spec: AttentionSpec) -> AttnFn:
    if spec.device == "cuda" and not torch.cuda.is_available():
        raise BackendUnavailable("no CUDA device is available (use --device cpu)")
    return MAKERS[spec.backend](spec)


_UNSUPPORTED = re.compile(
    r"No available kernel|No viable backend|not supported|unsupported|does not support|only supports|must be|expected|"
    r"should be|Only support|is not implemented|NotImplemented", re.I)


def classify_failure(exc: BaseException, caught_warnings: list[warnings.WarningMessage]) -> tuple[str, str]:
    """(status, reason) for an exception raised by a backend's first call.

    'unsupported' when the backend refused the shape/dtype/device (PyTorch explains why in warnings, which we
    attach), 'oom' for out-of-memory, 'error' for anything else.
    """
    msg = f"{type(exc).__name__}: {exc}".strip()
    if isinstance(exc, torch.cuda.OutOfMemoryError) or "out of memory" in msg.lower():
        return "oom", _one_line(msg)
    if isinstance(exc, BackendUnavailable):
        return "unsupported", _one_line(str(exc))
    if isinstance(exc, (NotImplementedError, AssertionError, ValueError, TypeError)) or _UNSUPPORTED.search(msg):
        why = [str(w.message) for w in caught_warnings if "kernel" in str(w.message).lower()
               or "support" in str(w.message).lower()]
        reason = _one_line(msg) + (" | " + " | ".join(_one_line(w) for w in why[:4]) if why else "")
        return "unsupported", reason
    return "error", _one_line(msg)


def _one_line(s: str, width: int = 400) -> str:
    s = " ".join(s.split())
    return s if len(s) <= width else s[: width - 1] + "…"
