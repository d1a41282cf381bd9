"""The steps a point times: one training step (forward, loss, backward, AdamW), a prefill into a KV cache,
one decode step, each with the attention call swappable, and SDPA pinned to one backend for scripts."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .marks import NULL_RANGES, Ranges
from .net import AttnFn, KVCache, Transformer


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
    r = ranges or NULL_RANGES
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
    r = ranges or NULL_RANGES
    fwd = forward if forward is not None else model
    with r.range("decode.step"):
        return fwd(token, attn_fn=attn_fn, ranges=ranges, cache=cache, start_pos=pos, last_only=True)[:, -1]


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
